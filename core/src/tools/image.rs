//! `generate_image`: one picture from a prompt, by the image service (see
//! [`crate::media::image`]), kept in the conversation's workspace under `pictures/` and sent
//! with the answer: the turn finds the call's result (`{"picture": …}`) in its messages and
//! puts a photo part in the answer's checkpoint, so the picture is sent once, through crashes.
//! Guarded: it spends money and writes the workspace; not run again after a crash left its
//! outcome unknown. Offered only where an image service is set.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::{Clock, Files};
use serde_json::{json, Value};

use super::files::path::workspace_path;
use super::{Level, Report, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::media::image::{PaintError, Painter, MAX_PROMPT_CHARS, SIZES};

/// The tool's name, which the turn looks for in its messages.
pub const NAME: &str = "generate_image";

/// A caption longer than this is cut (Telegram's limit is 1,024 characters).
pub const MAX_CAPTION_CHARS: usize = 1000;

pub struct GenerateImage {
    pub painter: Arc<dyn Painter>,
    pub files: Arc<dyn Files>,
    pub clock: Arc<dyn Clock>,
}

/// A picture made and kept: its path in the workspace and the spend.
#[derive(Debug, Clone, PartialEq)]
pub struct Made {
    /// Relative to the workspace: `pictures/2026-11-27-1a2b3c4d.jpg`.
    pub path: String,
    /// The Files path.
    pub full: String,
    pub spend: crate::llm::Tally,
    /// The model call's audit step.
    pub step: crate::audit::Step,
}

/// Makes one picture of `prompt` at `size` and keeps it in `ctx`'s workspace. Errors are
/// sentences for the model or the user.
pub async fn make(
    tool: &GenerateImage,
    scope: &crate::ids::Scope,
    (prompt, size, call): (&str, &str, &str),
) -> Result<Made, ToolError> {
    let prompt = prompt.trim();
    if prompt.is_empty() {
        return Err(ToolError("Say what the picture should show.".into()));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(ToolError(format!(
            "The prompt is over {MAX_PROMPT_CHARS} characters; say it shorter."
        )));
    }
    if !SIZES.contains(&size) {
        return Err(ToolError(format!(
            "size must be one of {}",
            SIZES.join(", ")
        )));
    }
    let started = tool.clock.now_ms();
    let painted = tool.painter.paint(prompt, size).await;
    let step = |cost_micros: u64, outcome: &str| crate::audit::Step::Model {
        model: tool.painter.model().to_owned(),
        input: 0,
        output: 0,
        cached_input: 0,
        cost_micros,
        latency_ms: tool.clock.now_ms().saturating_sub(started),
        outcome: outcome.to_owned(),
        agent: None,
    };
    let picture = match painted {
        Ok(p) => p,
        Err(PaintError::Refused(why)) => {
            return Err(ToolError(format!(
                "The image service refused this prompt ({why}). Tell the user in a sentence; do not try to get around it."
            )))
        }
        Err(PaintError::Failed(e)) => {
            tracing::warn!(service = tool.painter.name(), error = %e, "no picture");
            return Err(ToolError(format!(
                "No picture was made: the image service {} failed ({}). Tell the user; try again later only if they ask.",
                tool.painter.name(),
                e.kind()
            )));
        }
    };
    let (y, m, d) = crate::calendar::civil_from_days(crate::calendar::day_of(started));
    let day = format!("{y:04}-{m:02}-{d:02}");
    let tag = fnv(&format!("{call}\u{0}{prompt}\u{0}{started}"));
    let path = format!("pictures/{day}-{tag}.{}", picture.format.extension());
    let full = workspace_path(scope, &path)?;
    if let Err(e) = tool.files.write(&full, &picture.bytes).await {
        return Err(ToolError(format!(
            "The picture was made but could not be kept ({} bytes): {}",
            picture.bytes.len(),
            e.message
        )));
    }
    Ok(Made {
        path,
        full,
        spend: crate::llm::Tally {
            calls: 1,
            cost_micros: picture.cost_micros,
            ..Default::default()
        },
        step: step(picture.cost_micros, "ok"),
    })
}

/// FNV-1a, 32 bits, in hex: a short name, not a secret.
fn fnv(text: &str) -> String {
    let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

/// The picture a `generate_image` result names, if the call made one.
pub fn picture_of(result: &str) -> Option<String> {
    let v: Value = serde_json::from_str(result).ok()?;
    v.get("picture")?.as_str().map(str::to_owned)
}

/// The caption a `generate_image` call asked for, else its prompt, cut.
pub fn caption_of(input: &Value) -> String {
    let text = input
        .get("caption")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .or_else(|| input.get("prompt").and_then(Value::as_str))
        .unwrap_or("");
    text.trim().chars().take(MAX_CAPTION_CHARS).collect()
}

#[async_trait]
impl Tool for GenerateImage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: format!(
                "Make one picture from a description and send it with your answer (it is kept \
                 in the workspace under pictures/). Costs money: only when the user asks for a \
                 picture. Sizes: {}.",
                SIZES.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "What the picture shows, in detail."},
                    "size": {"type": "string", "enum": SIZES, "description": "Width x height; square if left out."},
                    "caption": {"type": "string", "description": "A short caption shown under the picture."}
                },
                "required": ["prompt"]
            }),
        }
    }

    fn level(&self) -> Level {
        Level::Guarded
    }

    /// Pictures take a minute at some services, longer than most tools may.
    fn time_limit(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(120))
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        self.call_reporting(ctx, input, &Report::default()).await
    }

    async fn call_reporting(
        &self,
        ctx: &ToolContext,
        input: Value,
        report: &Report,
    ) -> Result<String, ToolError> {
        let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or("");
        let size = input
            .get("size")
            .and_then(Value::as_str)
            .unwrap_or(SIZES[0]);
        let made = make(self, &ctx.scope, (prompt, size, &ctx.call)).await?;
        report.spend(made.spend);
        report.step(self.clock.now_ms(), made.step);
        Ok(json!({
            "picture": made.path,
            "note": "The picture is sent with your answer; do not send or link it again.",
        })
        .to_string())
    }
}
