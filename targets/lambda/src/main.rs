//! `bootstrap`: the Lambda entry. Builds the shell once per cold start, then hands every
//! event to `Shell::handle`.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let filter =
        clawless_platform::native_io::log_filter(std::env::var("RUST_LOG").ok().as_deref())
            .unwrap_or_else(|e| {
                eprintln!("warning: {e}; logging at info");
                Targets::new().with_default(tracing::level_filters::LevelFilter::INFO)
            });
    tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .without_time()
        .finish()
        .with(filter)
        .init();
    let shell = Arc::new(clawless_lambda::setup::build().await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let shell = shell.clone();
        let deadline = Some(event.context.deadline);
        async move { Ok::<Value, Error>(shell.handle_until(event.payload, deadline).await) }
    }))
    .await
}
