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

use super::service::{openai_compatible, setting, Found};
use crate::llm::LlmError;
use crate::secret::Secret;

/// A picture bigger than this is not kept or sent (Telegram's `sendPhoto` takes 10 MB).
pub const MAX_IMAGE_BYTES: usize = 10_000_000;

/// The sizes a picture may be asked in; the first is the default.
pub const SIZES: &[&str] = &["1024x1024", "1024x1536", "1536x1024"];

/// A prompt longer than this is refused (providers take about 1,000 to 4,000 characters).
pub const MAX_PROMPT_CHARS: usize = 1000;

/// What is said where pictures cannot be made: no image service is set.
pub const NO_IMAGES: &str = "No image service is set: the bot's owner needs OPENAI_API_KEY, GEMINI_API_KEY or IMAGE_BASE_URL (on Cloudflare, the AI binding) for pictures.";

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
    /// What one picture at `size` costs, in millionths of a dollar (checked against the spend
    /// caps before `/imagine` draws).
    fn price_micros(&self, size: &str) -> u64;
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
/// `IMAGE_API_KEY`), then `OPENAI_API_KEY` (at `OPENAI_BASE_URL` or OpenAI), then
/// `GEMINI_API_KEY` (Gemini's image output); `IMAGE_MODEL` chooses the model (default
/// `gpt-image-1`, on Gemini `gemini-2.5-flash-image`). `None` when there is none, or
/// `IMAGE_BASE_URL` is `off`.
pub fn from_env(http: Arc<dyn Http>, env: &crate::env::Env) -> Option<Arc<dyn Painter>> {
    let service = match openai_compatible(env, "IMAGE") {
        Found::Service(s) => s,
        Found::Off => return None,
        Found::None => {
            let key = env.secret("GEMINI_API_KEY");
            if key.is_empty() {
                return None;
            }
            let base = setting(env, "GEMINI_BASE_URL", crate::llm::gemini::DEFAULT_BASE_URL);
            return Some(Arc::new(GeminiPainter {
                http,
                base_url: base,
                api_key: key,
                model: setting(env, "IMAGE_MODEL", "gemini-2.5-flash-image"),
                timeout: Duration::from_secs(120),
            }));
        }
    };
    Some(Arc::new(OpenAiPainter {
        http,
        name: service.name,
        base_url: service.base_url,
        api_key: service.api_key,
        model: setting(env, "IMAGE_MODEL", "gpt-image-1"),
        timeout: Duration::from_secs(120),
    }))
}

/// OpenAI's price of one picture, in millionths of a dollar: `dall-e-3` $0.04 square and
/// $0.08 otherwise, `dall-e-2` $0.02, `gpt-image-1` (asked for medium quality) $0.042 square
/// and $0.063 otherwise. Another server's model is counted as `gpt-image-1`.
pub fn price_micros(model: &str, size: &str) -> u64 {
    let square = openai_size(model, size) == SIZES[0];
    match (model, square) {
        ("dall-e-2", _) => 20_000,
        ("dall-e-3", true) => 40_000,
        ("dall-e-3", false) => 80_000,
        (_, true) => 42_000,
        (_, false) => 63_000,
    }
}

/// The size `model` is asked for: DALL·E 3 draws tall and wide at 1024x1792 and 1792x1024,
/// DALL·E 2 only squares.
fn openai_size<'a>(model: &str, size: &'a str) -> &'a str {
    match (model, size) {
        ("dall-e-2", _) => SIZES[0],
        ("dall-e-3", "1024x1536") => "1024x1792",
        ("dall-e-3", "1536x1024") => "1792x1024",
        _ => size,
    }
}

/// The picture in a base64 field of an answer, or an error saying what came instead.
pub fn decoded(service: &str, encoded: Option<&str>, link: bool) -> Result<Vec<u8>, PaintError> {
    let fail = |m: String| PaintError::Failed(LlmError::Fatal(m));
    let Some(encoded) = encoded else {
        return Err(fail(match link {
            true => format!("{service}: the answer was a link, not the picture"),
            false => format!("{service}: the answer held no picture"),
        }));
    };
    if encoded.len() > MAX_IMAGE_BYTES / 3 * 4 + 4 {
        return Err(fail(format!(
            "{service}: the picture was over the {MAX_IMAGE_BYTES}-byte limit"
        )));
    }
    base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| fail(format!("{service}: the picture was not base64")))
}

#[async_trait]
impl Painter for OpenAiPainter {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn price_micros(&self, size: &str) -> u64 {
        price_micros(&self.model, size)
    }

    async fn paint(&self, prompt: &str, size: &str) -> Result<Picture, PaintError> {
        let url = format!("{}/images/generations", self.base_url.trim_end_matches('/'));
        let size = openai_size(&self.model, size);
        // DALL·E answers with a link unless asked for the bytes; gpt-image-1 always sends the
        // bytes and takes an output format (JPEG: a tenth of a PNG's size) and a quality
        // (medium, as priced; its default may choose high, four times the price).
        let mut body = json!({"model": self.model, "prompt": prompt, "n": 1, "size": size});
        if self.model.starts_with("dall-e") {
            body["response_format"] = json!("b64_json");
        } else {
            body["output_format"] = json!("jpeg");
            body["quality"] = json!("medium");
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
        let first = &v["data"][0];
        let link = first["url"].is_string();
        let bytes = decoded(&self.name, first["b64_json"].as_str(), link)?;
        check(&self.name, bytes, price_micros(&self.model, size))
    }
}

/// Gemini's image output (`generateContent` answering with an image part).
pub struct GeminiPainter {
    pub http: Arc<dyn Http>,
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
    pub timeout: Duration,
}

/// Gemini's price of one picture (`gemini-2.5-flash-image`: 1,290 output tokens at $30 a
/// million), in millionths of a dollar.
pub const GEMINI_PRICE_MICROS: u64 = 39_000;

#[async_trait]
impl Painter for GeminiPainter {
    fn name(&self) -> &str {
        "gemini"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn price_micros(&self, _size: &str) -> u64 {
        GEMINI_PRICE_MICROS
    }

    async fn paint(&self, prompt: &str, size: &str) -> Result<Picture, PaintError> {
        let url = format!(
            "{}/v1beta/models/{}:generateContent",
            self.base_url.trim_end_matches('/'),
            self.model
        );
        let ratio = match size {
            "1024x1536" => "2:3",
            "1536x1024" => "3:2",
            _ => "1:1",
        };
        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                "imageConfig": {"aspectRatio": ratio},
            },
        });
        let req = HttpRequest::post_json(url, &body, self.timeout)
            .header("x-goog-api-key", self.api_key.expose());
        let resp = self.http.send(req).await.map_err(LlmError::from)?;
        if resp.status != 200 {
            return Err(
                LlmError::from_status(resp.status, resp.header("retry-after"), &resp.body).into(),
            );
        }
        let v: Value = serde_json::from_slice(&resp.body)
            .map_err(|_| LlmError::Fatal("gemini: the answer was not JSON".into()))?;
        let candidate = &v["candidates"][0];
        let parts = candidate["content"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let image = parts.iter().find_map(|p| p["inlineData"]["data"].as_str());
        if image.is_none() {
            // No picture: a safety block says so in its finish reason or the prompt feedback.
            let blocked = v["promptFeedback"]["blockReason"]
                .as_str()
                .or_else(|| candidate["finishReason"].as_str())
                .filter(|r| {
                    r.contains("SAFETY") || r.contains("PROHIBITED") || r.contains("BLOCK")
                });
            if let Some(r) = blocked {
                return Err(PaintError::Refused(r.chars().take(60).collect()));
            }
        }
        let bytes = decoded("gemini", image, false)?;
        check("gemini", bytes, GEMINI_PRICE_MICROS)
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
    fn each_openai_model_is_asked_a_size_it_draws_and_priced_so() {
        assert_eq!(openai_size("dall-e-3", "1024x1536"), "1024x1792");
        assert_eq!(openai_size("dall-e-3", "1536x1024"), "1792x1024");
        assert_eq!(openai_size("dall-e-2", "1536x1024"), "1024x1024");
        assert_eq!(openai_size("gpt-image-1", "1536x1024"), "1536x1024");
        assert_eq!(price_micros("dall-e-3", "1024x1024"), 40_000);
        assert_eq!(price_micros("dall-e-3", "1536x1024"), 80_000);
        assert_eq!(price_micros("dall-e-2", "1536x1024"), 20_000);
        assert_eq!(price_micros("gpt-image-1", "1024x1536"), 63_000);
        assert!(decoded("s", None, true)
            .unwrap_err()
            .to_string()
            .contains("a link"));
        assert!(decoded("s", Some("not base64!"), false)
            .unwrap_err()
            .to_string()
            .contains("base64"));
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
