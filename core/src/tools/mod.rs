//! Tools the model can call: the `Tool` trait, the registry, and the built-ins.
//!
//! - [`time`]: `current_time`, the date and time at a UTC offset.

pub mod time;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::llm::ToolSpec;

/// Names of the built-in tools an agent may list.
pub const BUILTIN_TOOLS: &[&str] = &["current_time"];

/// What a tool returns to the model on failure: the message is shown to the model as a tool
/// error, so it can correct its call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, input: Value) -> Result<String, ToolError>;
}

/// Tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }
    /// A registry holding only the named built-ins; unknown names are returned as errors.
    pub fn builtins(
        names: &[String],
        clock: Arc<dyn clawless_platform::Clock>,
    ) -> Result<ToolRegistry, String> {
        let mut reg = ToolRegistry::default();
        for name in names {
            match name.as_str() {
                "current_time" => reg.register(Arc::new(time::CurrentTime {
                    clock: clock.clone(),
                })),
                other => return Err(format!("unknown tool {other:?} (built-ins: current_time)")),
            }
        }
        Ok(reg)
    }
}
