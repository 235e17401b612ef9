//! Running the work after the ack: an asynchronous (`Event`) invocation of this same
//! function with `{"clawless": {"drain": "<lane>"}}`. Lambda queues it, retries it twice on
//! failure, and the scheduled sweep catches anything left.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use serde_json::json;

#[async_trait]
pub trait Invoker: Send + Sync {
    /// Asks for `lane` to be drained in another invocation.
    async fn drain_later(&self, lane: &str) -> Result<(), String>;
}

pub struct SelfInvoke {
    pub client: aws_sdk_lambda::Client,
    pub function: String,
}

#[async_trait]
impl Invoker for SelfInvoke {
    async fn drain_later(&self, lane: &str) -> Result<(), String> {
        let payload = json!({"clawless": {"drain": lane}}).to_string();
        self.client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map(drop)
            .map_err(|e| aws_sdk_lambda::error::DisplayErrorContext(&e).to_string())
    }
}

/// The event that asks for a drain.
pub fn drain_event(lane: &str) -> serde_json::Value {
    json!({"clawless": {"drain": lane}})
}
