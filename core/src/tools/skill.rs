//! `skill`: reads one of the skills the system prompt lists (see [`crate::skills`]): its
//! instructions (SKILL.md without the frontmatter) and the names of its other files, or one
//! of those files. A skill that is unknown, or not offered to this agent here, is refused
//! with the reason.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::ids::Scope;
use crate::llm::ToolSpec;
use crate::skills::{Offer, SKILL_TOOL};

/// Where a conversation's own skills are: `skills/` of its workspace.
pub fn workspace_skills(scope: &Scope) -> String {
    format!("{}/skills", super::files::path::root(scope))
}

pub struct SkillTool(pub Arc<Offer>);

#[async_trait]
impl Tool for SkillTool {
    fn stays_inside(&self) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Safe
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SKILL_TOOL.into(),
            description: "Read a skill listed under Skills in your instructions: how to do a particular task. Call it with the skill's `name` before doing that task, then follow it. A skill may name other files of its own; read one with `file`.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the skill's name, as listed"},
                    "file": {"type": "string", "description": "one of the skill's other files, as the skill names it"}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let name = input
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError("`name` (a string) is required".into()))?;
        let file = match input.get("file") {
            None | Some(Value::Null) => None,
            Some(Value::String(f)) => Some(f.as_str()),
            Some(_) => return Err(ToolError("`file` must be a string".into())),
        };
        let workspace = workspace_skills(&ctx.scope);
        self.0
            .read(Some(&workspace), name, file)
            .await
            .map_err(ToolError)
    }
}
