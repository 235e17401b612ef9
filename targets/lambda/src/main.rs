//! `bootstrap`: the Lambda entry. Builds the shell once per cold start, then hands every
//! event to `Shell::handle`.

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_current_span(false)
        .without_time()
        .init();
    let shell = Arc::new(clawless_lambda::setup::build().await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let shell = shell.clone();
        let deadline = Some(event.context.deadline);
        async move { Ok::<Value, Error>(shell.handle_until(event.payload, deadline).await) }
    }))
    .await
}
