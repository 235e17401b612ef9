//! Speech to text: the `Transcriber` port of the core, and the adapter for OpenAI-compatible
//! `/audio/transcriptions` endpoints (OpenAI Whisper, Groq, any base URL). The Worker brings
//! its own (Workers AI Whisper) through `App::with_transcriber`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::Value;

use crate::llm::LlmError;
use crate::secret::Secret;
use crate::telegram::api::{multipart, FilePart};

/// A transcript longer than this is cut (about two hours of speech).
pub const MAX_TRANSCRIPT_CHARS: usize = 100_000;

/// Turns speech into text.
#[async_trait]
pub trait Transcriber: Send + Sync {
    /// The service, as the user is told it when it fails (`groq`, `openai`, `workers-ai`).
    fn name(&self) -> &str;
    /// The words spoken in `audio`; `file_name`'s extension tells its format.
    async fn transcribe(&self, audio: &[u8], file_name: &str) -> Result<String, LlmError>;
}

/// An OpenAI-compatible `/audio/transcriptions` endpoint.
pub struct OpenAiTranscriber {
    pub http: Arc<dyn Http>,
    pub name: String,
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
    pub timeout: Duration,
}

/// Which transcription service the settings name, first match wins: `TRANSCRIBE_BASE_URL`
/// (with `TRANSCRIBE_API_KEY`, `TRANSCRIBE_MODEL`), then `GROQ_API_KEY` (Groq's
/// `whisper-large-v3-turbo`), then `OPENAI_API_KEY` (`whisper-1` at `OPENAI_BASE_URL` or
/// OpenAI). `None` when there is none.
pub fn from_env(http: Arc<dyn Http>, env: &crate::env::Env) -> Option<OpenAiTranscriber> {
    let model = |default: &str| {
        env.get("TRANSCRIBE_MODEL")
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(default)
            .to_owned()
    };
    let (name, base_url, api_key, model) =
        if let Some(base) = env.get("TRANSCRIBE_BASE_URL").filter(|b| !b.is_empty()) {
            let name = host_of(base);
            (
                name,
                base.to_owned(),
                env.secret("TRANSCRIBE_API_KEY"),
                model("whisper-1"),
            )
        } else if !env.secret("GROQ_API_KEY").is_empty() {
            (
                "groq".to_owned(),
                "https://api.groq.com/openai/v1".to_owned(),
                env.secret("GROQ_API_KEY"),
                model("whisper-large-v3-turbo"),
            )
        } else if !env.secret("OPENAI_API_KEY").is_empty() {
            let base = env
                .get("OPENAI_BASE_URL")
                .filter(|b| !b.is_empty())
                .unwrap_or("https://api.openai.com/v1");
            (
                "openai".to_owned(),
                base.to_owned(),
                env.secret("OPENAI_API_KEY"),
                model("whisper-1"),
            )
        } else {
            return None;
        };
    Some(OpenAiTranscriber {
        http,
        name,
        base_url,
        api_key,
        model,
        timeout: Duration::from_secs(120),
    })
}

/// `https://host:port/path` → `host`, for naming a service without its path or secrets.
pub(crate) fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = host.rsplit('@').next().unwrap_or(host);
    host.chars().take(64).collect()
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    fn name(&self) -> &str {
        &self.name
    }

    async fn transcribe(&self, audio: &[u8], file_name: &str) -> Result<String, LlmError> {
        let url = format!(
            "{}/audio/transcriptions",
            self.base_url.trim_end_matches('/')
        );
        let fields = [
            ("model", self.model.clone()),
            ("response_format", "json".to_owned()),
        ];
        let file = FilePart {
            field: "file",
            name: file_name,
            content_type: "application/octet-stream",
            bytes: audio,
        };
        let (content_type, body) = multipart(&fields, file);
        let mut req = HttpRequest {
            method: clawless_platform::Method::Post,
            url,
            headers: vec![("content-type".into(), content_type)],
            body,
            timeout: self.timeout,
            idle: None,
            outside: None,
        };
        if !self.api_key.is_empty() {
            req = req.header("authorization", format!("Bearer {}", self.api_key.expose()));
        }
        let resp = self.http.send(req).await?;
        if resp.status != 200 {
            return Err(LlmError::from_status(
                resp.status,
                resp.header("retry-after"),
                &resp.body,
            ));
        }
        parse(&resp.body)
    }
}

/// Reads `{"text": "…"}`, cut at [`MAX_TRANSCRIPT_CHARS`].
pub fn parse(body: &[u8]) -> Result<String, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::Fatal(format!("transcription: bad JSON: {e}")))?;
    let text = v
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::Fatal("transcription: no text".into()))?;
    Ok(text.trim().chars().take(MAX_TRANSCRIPT_CHARS).collect())
}
