//! Environment → `App` for the Lambda: the only place this shell reads env vars. Config is
//! the one embedded and validated at build time (see `build.rs`), or the directory named by
//! `CLAWLESS_CONFIG` (for example one shipped in a layer), read at cold start.

use std::sync::Arc;

use clawless_core::{App, Config, ConfigFiles, Env};
use clawless_platform::native_io::{ReqwestHttp, SystemClock};
use clawless_platform::{Clock, Platform};

use crate::dynamo::{DynamoFiles, DynamoKv, DynamoText, DynamoVectors, Table};
use crate::events::Shell;
use crate::invoke::SelfInvoke;

/// Bounds on every DynamoDB and Lambda call: the SDK sets no timeout of its own, so a stalled
/// connection would hold an invocation until Lambda kills it. A connection in 3 s, an attempt
/// in 5 s, a call with its retries in 15 s (DynamoDB answers in milliseconds).
fn sdk_timeouts() -> aws_config::timeout::TimeoutConfig {
    use std::time::Duration;
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(5))
        .operation_timeout(Duration::from_secs(15))
        .build()
}

/// Builds the shell. Needs `CLAWLESS_TABLE` and `AWS_LAMBDA_FUNCTION_NAME` (set by Lambda).
pub async fn build() -> Result<Shell, String> {
    let env = Env::from_pairs(std::env::vars());
    let table_name = env
        .get("CLAWLESS_TABLE")
        .ok_or("CLAWLESS_TABLE is not set")?
        .to_owned();
    let function = env
        .get("AWS_LAMBDA_FUNCTION_NAME")
        .ok_or("AWS_LAMBDA_FUNCTION_NAME is not set")?
        .to_owned();
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(https_client())
        .timeout_config(sdk_timeouts())
        .load()
        .await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let table = Table {
        client: aws_sdk_dynamodb::Client::new(&aws),
        name: table_name,
        clock: clock.clone(),
    };
    let platform = Platform {
        kv: Arc::new(DynamoKv(table.clone())),
        files: Arc::new(DynamoFiles(table.clone())),
        http: Arc::new(ReqwestHttp::new().map_err(|e| e.to_string())?),
        vectors: Arc::new(DynamoVectors(table.clone())),
        text: Arc::new(DynamoText(table)),
        clock: clock.clone(),
        exec: None,
    };
    let files = match env.get("CLAWLESS_CONFIG") {
        Some(dir) => clawless_platform::native_io::read_config_dir(std::path::Path::new(dir))
            .map(ConfigFiles)
            .map_err(|e| format!("reading config directory {dir}: {e}"))?,
        None => clawless_core::config::embedded(),
    };
    let config = Config::load(&files).map_err(|e| format!("config is invalid: {e}"))?;
    let instance = format!(
        "lambda-{}-{}",
        env.get("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or("local"),
        clock.now_ms()
    );
    let app = App::new(platform, config, &env, instance).map_err(|e| e.to_string())?;
    // Before any event: a store a newer release wrote is refused, an older one brought up.
    app.upgrade_store()
        .await
        .map_err(|e| format!("the DynamoDB table: {e}"))?;
    for missing in app.missing_settings() {
        tracing::error!(%missing, "not configured: the bot cannot answer until this is set");
    }
    for line in app
        .answering_models()
        .into_iter()
        .chain(app.voice_services())
    {
        tracing::info!("{line}");
    }
    for note in app.unoffered_tools() {
        tracing::warn!(%note, "tool not offered");
    }
    let invoker = SelfInvoke {
        client: aws_sdk_lambda::Client::new(&aws),
        function,
    };
    Ok(Shell {
        app: Arc::new(app),
        invoker: Arc::new(invoker),
    })
}

/// The SDK's HTTP client: hyper + rustls on ring.
pub fn https_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}
