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

/// A caption longer than this is cut (Telegram's limit is 1,024 characters, counted in UTF-16
/// units).
pub const MAX_CAPTION_CHARS: usize = 1000;

pub struct GenerateImage {
    pub painter: Arc<dyn Painter>,
    pub files: Arc<dyn Files>,
    pub clock: Arc<dyn Clock>,
    /// Pictures made per turn in this process (`turn` of [`ToolContext::call`]), to hold a
    /// turn to [`MAX_PICTURES_PER_TURN`]; forgotten past [`REMEMBERED_TURNS`] turns.
    pub made: std::sync::Mutex<std::collections::BTreeMap<String, usize>>,
}

/// Pictures one turn may make: what one answer sends.
pub const MAX_PICTURES_PER_TURN: usize = 4;

/// Turns whose pictures are counted at once.
const REMEMBERED_TURNS: usize = 256;

impl GenerateImage {
    pub fn new(painter: Arc<dyn Painter>, files: Arc<dyn Files>, clock: Arc<dyn Clock>) -> Self {
        GenerateImage {
            painter,
            files,
            clock,
            made: Default::default(),
        }
    }

    /// Counts one picture for the turn of `call`; false when the turn has made its share.
    fn count(&self, call: &str) -> bool {
        // `<turn>:<round>:<call id>`: the turn is what comes before the last two fields.
        let turn = call.rsplitn(3, ':').nth(2).unwrap_or(call).to_owned();
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if made.len() >= REMEMBERED_TURNS && !made.contains_key(&turn) {
            made.clear();
        }
        let n = made.entry(turn).or_insert(0);
        *n += 1;
        *n <= MAX_PICTURES_PER_TURN
    }
}

/// A picture made: its path in the workspace, the spend, and whether it was kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Made {
    /// Relative to the workspace: `pictures/2026-11-27-1a2b3c4d.jpg`.
    pub path: String,
    /// The Files path.
    pub full: String,
    pub spend: crate::llm::Tally,
    /// The image call's audit step.
    pub step: crate::audit::Step,
    /// Why it could not be kept (and so not sent), when it could not: it was paid for.
    pub unkept: Option<String>,
}

/// Why no picture was made: a sentence for the user, and one for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmade {
    pub user: String,
    pub model: String,
}

impl Unmade {
    fn said(user: String, model: &str) -> Unmade {
        Unmade {
            model: format!("{user} {model}"),
            user,
        }
    }
    fn plain(text: String) -> Unmade {
        Unmade {
            user: text.clone(),
            model: text,
        }
    }
}

/// Makes one picture of `prompt` at `size` and keeps it in `scope`'s workspace; `left` is
/// what the spend cap leaves, if there is one.
pub async fn make(
    tool: &GenerateImage,
    scope: &crate::ids::Scope,
    (prompt, size, call): (&str, &str, &str),
    left: Option<&crate::llm::Left>,
) -> Result<Made, Unmade> {
    let prompt = prompt.trim();
    if prompt.is_empty() {
        return Err(Unmade::plain("Say what the picture should show.".into()));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(Unmade::plain(format!(
            "The prompt is over {MAX_PROMPT_CHARS} characters; say it shorter."
        )));
    }
    if !SIZES.contains(&size) {
        return Err(Unmade::plain(format!(
            "The size must be one of {}.",
            SIZES.join(", ")
        )));
    }
    if let Some(left) = left.filter(|l| l.micros < tool.painter.price_micros(size)) {
        return Err(Unmade::said(
            format!(
                "A picture would go over {} spending limit; it was not made.",
                left.cap
            ),
            "Tell the user.",
        ));
    }
    if !tool.count(call) {
        return Err(Unmade::plain(format!(
            "This answer has made its {MAX_PICTURES_PER_TURN} pictures; no more were made."
        )));
    }
    let started = tool.clock.now_ms();
    let painted = tool.painter.paint(prompt, size).await;
    let picture = match painted {
        Ok(p) => p,
        Err(PaintError::Refused(why)) => {
            return Err(Unmade::said(
                format!("The image service refused this prompt ({why})."),
                "Tell the user in a sentence; do not try to get around it.",
            ))
        }
        Err(PaintError::Failed(e)) => {
            tracing::warn!(service = tool.painter.name(), error = %e, "no picture");
            return Err(Unmade::said(
                format!(
                    "No picture was made: the image service {} failed ({}).",
                    tool.painter.name(),
                    e.kind()
                ),
                "Tell the user; try again later only if they ask.",
            ));
        }
    };
    let (y, m, d) = crate::calendar::civil_from_days(crate::calendar::day_of(started));
    let tag = fnv(&format!("{call}\u{0}{prompt}\u{0}{started}"));
    let path = format!(
        "pictures/{y:04}-{m:02}-{d:02}-{tag}.{}",
        picture.format.extension()
    );
    let full = workspace_path(scope, &path).map_err(|e| Unmade::plain(e.0))?;
    let unkept = match tool.files.write(&full, &picture.bytes).await {
        Ok(()) => None,
        Err(e) => Some(format!(
            "The picture was made but could not be kept, so it was not sent ({} bytes): {}",
            picture.bytes.len(),
            e.message
        )),
    };
    Ok(Made {
        path,
        full,
        spend: crate::llm::Tally {
            calls: 1,
            cost_micros: picture.cost_micros,
            ..Default::default()
        },
        step: crate::audit::Step::Model {
            model: tool.painter.model().to_owned(),
            input: 0,
            output: 0,
            cached_input: 0,
            cost_micros: picture.cost_micros,
            latency_ms: tool.clock.now_ms().saturating_sub(started),
            outcome: "ok".into(),
            agent: None,
        },
        unkept,
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
    cut_caption(text)
}

/// `text` within [`MAX_CAPTION_CHARS`] UTF-16 units, cut at a character.
pub fn cut_caption(text: &str) -> String {
    let mut units = 0;
    text.trim()
        .chars()
        .take_while(|c| {
            units += c.len_utf16();
            units <= MAX_CAPTION_CHARS
        })
        .collect()
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
        // A sub-agent's answer is not the one sent: its pictures would be paid for and lost.
        if ctx.depth > 0 {
            return Err(ToolError(
                "generate_image is for the conversation's own agent: describe the picture in your answer instead.".into(),
            ));
        }
        let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or("");
        let size = input
            .get("size")
            .and_then(Value::as_str)
            .unwrap_or(SIZES[0]);
        let made = make(
            self,
            &ctx.scope,
            (prompt, size, &ctx.call),
            ctx.budget.as_ref(),
        )
        .await
        .map_err(|u| ToolError(u.model))?;
        report.spend(made.spend);
        report.step(self.clock.now_ms(), made.step);
        if let Some(why) = made.unkept {
            return Err(ToolError(why));
        }
        Ok(json!({
            "picture": made.path,
            "note": "The picture is sent with your answer; do not send or link it again.",
        })
        .to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captions_are_cut_in_utf16_units_and_results_name_their_picture() {
        let emoji = "😀".repeat(600);
        let cut = cut_caption(&emoji);
        assert!(cut.encode_utf16().count() <= MAX_CAPTION_CHARS && !cut.is_empty());
        assert_eq!(caption_of(&json!({"prompt": " a kite "})), "a kite");
        assert_eq!(caption_of(&json!({"prompt": "p", "caption": "c"})), "c");
        assert_eq!(caption_of(&json!({"prompt": "p", "caption": "  "})), "p");
        let made = json!({"picture": "pictures/a.jpg", "note": "…"}).to_string();
        assert_eq!(picture_of(&made).as_deref(), Some("pictures/a.jpg"));
        assert_eq!(picture_of("No picture was made"), None);
        assert_eq!(picture_of("{\"picture\": 3}"), None);
    }
}
