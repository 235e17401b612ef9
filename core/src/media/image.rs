//! Pictures made from a prompt: the `Painter` port of the core, what a made picture may be
//! ([`check`]: PNG, JPEG or WebP by its first bytes, within [`MAX_IMAGE_BYTES`]), the sizes
//! one may ask for, and the adapter for OpenAI-compatible `/images/generations` endpoints. The
//! Worker brings its own (Workers AI) through `App::with_embedder`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use clawless_platform::{Http, HttpRequest};
use serde_json::{json, Value};

use crate::llm::LlmError;
use crate::secret::Secret;

/// A picture bigger than this is not kept or sent (Telegram's `sendPhoto` takes 10 MB).
pub const MAX_IMAGE_BYTES: usize = 10 * 1024 * 1024;

/// The sizes a picture may be asked in; the first is the default.
pub const SIZES: &[&str] = &["1024x1024", "1024x1536", "1536x1024"];

/// A prompt longer than this is refused (providers take about 1,000 to 4,000 characters).
pub const MAX_PROMPT_CHARS: usize = 1000;

/// The picture formats `sendPhoto` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Webp,
}

impl ImageFormat {
    /// The format `bytes` are in, by their first bytes; `None` for anything else.
    pub fn of(bytes: &[u8]) -> Option<ImageFormat> {
        match bytes {
            [0x89, b'P', b'N', b'G', ..] => Some(ImageFormat::Png),
            [0xff, 0xd8, 0xff, ..] => Some(ImageFormat::Jpeg),
            [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => {
                Some(ImageFormat::Webp)
            }
            _ => None,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Webp => "webp",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Webp => "image/webp",
        }
    }
}

/// A picture made, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    pub bytes: Vec<u8>,
    pub format: ImageFormat,
    /// Millionths of a US dollar.
    pub cost_micros: u64,
}

/// Why no picture was made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PaintError {
    /// The service would not draw this prompt (its content policy).
    #[error("the image service refused this prompt: {0}")]
    Refused(String),
    #[error(transparent)]
    Failed(#[from] LlmError),
}

/// Makes pictures from prompts.
#[async_trait]
pub trait Painter: Send + Sync {
    /// The service (`openai`, `workers-ai`, a host).
    fn name(&self) -> &str;
    /// The model, as the usage pages name it.
    fn model(&self) -> &str;
    /// One picture of `prompt` at `size` (one of [`SIZES`]), checked by [`check`].
    async fn paint(&self, prompt: &str, size: &str) -> Result<Picture, PaintError>;
}

/// `bytes` from `service` as a [`Picture`], if they are one `sendPhoto` shows: empty, over
/// [`MAX_IMAGE_BYTES`] or another format is an error saying so.
pub fn check(service: &str, bytes: Vec<u8>, cost_micros: u64) -> Result<Picture, PaintError> {
    let fail = |m: String| PaintError::Failed(LlmError::Fatal(m));
    if bytes.is_empty() {
        return Err(fail(format!("{service}: the picture was empty")));
    }
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(fail(format!(
            "{service}: the picture was {} bytes, over the {MAX_IMAGE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let format = ImageFormat::of(&bytes)
        .ok_or_else(|| fail(format!("{service}: the answer was not a PNG, JPEG or WebP")))?;
    Ok(Picture {
        bytes,
        format,
        cost_micros,
    })
}

/// An OpenAI-compatible `/images/generations` endpoint.
pub struct OpenAiPainter {
    pub http: Arc<dyn Http>,
    pub name: String,
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
    pub timeout: Duration,
}

/// Which image service the settings name, first match wins: `IMAGE_BASE_URL` (with
/// `IMAGE_API_KEY`), then `OPENAI_API_KEY` (at `OPENAI_BASE_URL` or OpenAI); `IMAGE_MODEL`
/// chooses the model (default `gpt-image-1`). `None` when there is none, or `IMAGE_BASE_URL`
/// is `off`.
pub fn from_env(http: Arc<dyn Http>, env: &crate::env::Env) -> Option<OpenAiPainter> {
    let setting = |name: &str, default: &str| {
        env.get(name)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .unwrap_or(default)
            .to_owned()
    };
    let (name, base_url, api_key) = match env.get("IMAGE_BASE_URL").map(str::trim) {
        Some("off") => return None,
        Some(base) if !base.is_empty() => (
            super::transcribe::host_of(base),
            base.to_owned(),
            env.secret("IMAGE_API_KEY"),
        ),
        _ if !env.secret("OPENAI_API_KEY").is_empty() => (
            "openai".to_owned(),
            setting("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            env.secret("OPENAI_API_KEY"),
        ),
        _ => return None,
    };
    Some(OpenAiPainter {
        http,
        name,
        base_url,
        api_key,
        model: setting("IMAGE_MODEL", "gpt-image-1"),
        timeout: Duration::from_secs(120),
    })
}

/// OpenAI's price of one picture, in millionths of a dollar: `dall-e-3` $0.04 square and
/// $0.08 otherwise, `dall-e-2` $0.02, `gpt-image-1` (medium quality) $0.042 square and $0.063
/// otherwise. Another server's model is counted as `gpt-image-1`.
pub fn price_micros(model: &str, size: &str) -> u64 {
    let square = size == SIZES[0];
    match (model, square) {
        ("dall-e-2", _) => 20_000,
        ("dall-e-3", true) => 40_000,
        ("dall-e-3", false) => 80_000,
        (_, true) => 42_000,
        (_, false) => 63_000,
    }
}

#[async_trait]
impl Painter for OpenAiPainter {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn paint(&self, prompt: &str, size: &str) -> Result<Picture, PaintError> {
        let url = format!("{}/images/generations", self.base_url.trim_end_matches('/'));
        // DALL·E answers with a link unless asked for the bytes; gpt-image-1 always sends the
        // bytes and takes an output format instead (JPEG: a tenth of a PNG's size).
        let mut body = json!({"model": self.model, "prompt": prompt, "n": 1, "size": size});
        if self.model.starts_with("dall-e") {
            body["response_format"] = json!("b64_json");
        } else {
            body["output_format"] = json!("jpeg");
        }
        let mut req = HttpRequest::post_json(url, &body, self.timeout);
        if !self.api_key.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.api_key.expose()));
        }
        let resp = self.http.send(req).await.map_err(LlmError::from)?;
        if resp.status != 200 {
            if let Some(why) = refusal(resp.status, &resp.body) {
                return Err(PaintError::Refused(why));
            }
            return Err(
                LlmError::from_status(resp.status, resp.header("retry-after"), &resp.body).into(),
            );
        }
        let v: Value = serde_json::from_slice(&resp.body)
            .map_err(|_| LlmError::Fatal(format!("{}: the answer was not JSON", self.name)))?;
        let encoded = v["data"][0]["b64_json"].as_str().unwrap_or("");
        if encoded.len() > MAX_IMAGE_BYTES / 3 * 4 + 4 {
            return Err(LlmError::Fatal(format!(
                "{}: the picture was over the {MAX_IMAGE_BYTES}-byte limit",
                self.name
            ))
            .into());
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap_or_default();
        check(&self.name, bytes, price_micros(&self.model, size))
    }
}

/// A content-policy refusal in an error answer: OpenAI's `content_policy_violation` code or
/// its "safety system" message, as a short reason (the provider's words, cut).
pub fn refusal(status: u16, body: &[u8]) -> Option<String> {
    if status != 400 {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let error = &v["error"];
    let code = error["code"].as_str().unwrap_or("");
    let message = error["message"].as_str().unwrap_or("");
    let refused = code.contains("content_policy")
        || code == "moderation_blocked"
        || message.contains("safety system");
    refused.then(|| {
        let words: String = message
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        match words.trim() {
            "" => "its content policy".to_owned(),
            w => w.to_owned(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_are_told_by_their_first_bytes() {
        assert_eq!(
            ImageFormat::of(b"\x89PNG\r\n\x1a\n"),
            Some(ImageFormat::Png)
        );
        assert_eq!(
            ImageFormat::of(b"\xff\xd8\xff\xe0"),
            Some(ImageFormat::Jpeg)
        );
        assert_eq!(
            ImageFormat::of(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(ImageFormat::Webp)
        );
        for other in [&b""[..], b"GIF89a", b"{\"data\": []}", b"RIFF\0\0\0\0WAVE"] {
            assert_eq!(ImageFormat::of(other), None, "{other:?}");
        }
    }

    #[test]
    fn refusals_are_told_from_other_errors() {
        let body = |code: &str, message: &str| {
            serde_json::to_vec(&json!({"error": {"code": code, "message": message}})).unwrap()
        };
        let said = refusal(
            400,
            &body(
                "content_policy_violation",
                "Your request was rejected as a result of our safety system.",
            ),
        );
        assert!(said.unwrap().contains("safety system"));
        assert!(refusal(400, &body("moderation_blocked", "")).is_some());
        assert_eq!(refusal(400, &body("invalid_size", "bad size")), None);
        assert_eq!(refusal(500, &body("content_policy_violation", "x")), None);
        assert_eq!(refusal(400, b"<html>"), None);
    }

    #[test]
    fn empty_oversize_and_other_bodies_are_refused() {
        assert!(check("s", vec![], 0).is_err());
        assert!(check("s", b"GIF89a".to_vec(), 0).is_err());
        let mut big = b"\xff\xd8\xff".to_vec();
        big.resize(MAX_IMAGE_BYTES + 1, 0);
        assert!(check("s", big, 0)
            .unwrap_err()
            .to_string()
            .contains("limit"));
        assert_eq!(
            check("s", b"\xff\xd8\xff\xe0".to_vec(), 5)
                .unwrap()
                .cost_micros,
            5
        );
    }
}
