//! Text to speech: the `Speaker` port of the core, what a spoken answer may be
//! ([`check`]: OGG/Opus, MP3 or M4A, the formats Telegram's `sendVoice` takes, within
//! [`MAX_SPEECH_BYTES`]), the words of an answer worth speaking ([`speakable`]), and the adapter
//! for OpenAI-compatible `/audio/speech` endpoints. The Worker brings its own (Workers AI)
//! through `App::with_speaker`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_platform::{Http, HttpRequest};
use serde_json::json;

use crate::llm::LlmError;
use crate::secret::Secret;

/// A spoken answer bigger than this is not sent (Telegram takes voice notes up to 50 MB; a
/// summary-length answer is well under 1 MB).
pub const MAX_SPEECH_BYTES: usize = 8 * 1024 * 1024;

/// What is said where voice replies cannot be made: no speech service is set.
pub const NO_SPEECH: &str =
    "No speech service is set: the bot's owner needs OPENAI_API_KEY or SPEECH_BASE_URL (on Cloudflare, the AI binding) for voice replies.";

/// The audio formats `sendVoice` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioFormat {
    /// OGG with Opus: shown as a voice note everywhere.
    OggOpus,
    Mp3,
    M4a,
}

impl AudioFormat {
    /// The format `audio` is in, by its first bytes; `None` for anything else.
    pub fn of(audio: &[u8]) -> Option<AudioFormat> {
        match audio {
            [b'O', b'g', b'g', b'S', ..] => Some(AudioFormat::OggOpus),
            [b'I', b'D', b'3', ..] => Some(AudioFormat::Mp3),
            // An MPEG audio frame header: 11 sync bits, then a layer that is not "reserved".
            [0xff, b, ..] if b & 0xe0 == 0xe0 && b & 0x06 != 0 => Some(AudioFormat::Mp3),
            [_, _, _, _, b'f', b't', b'y', b'p', ..] => Some(AudioFormat::M4a),
            _ => None,
        }
    }

    /// The file name it is sent under.
    pub fn file_name(self) -> &'static str {
        match self {
            AudioFormat::OggOpus => "answer.ogg",
            AudioFormat::Mp3 => "answer.mp3",
            AudioFormat::M4a => "answer.m4a",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            AudioFormat::OggOpus => "audio/ogg",
            AudioFormat::Mp3 => "audio/mpeg",
            AudioFormat::M4a => "audio/mp4",
        }
    }
}

/// Speech ready to send, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speech {
    pub audio: Vec<u8>,
    pub format: AudioFormat,
    /// Millionths of a US dollar.
    pub cost_micros: u64,
}

/// Turns text into speech.
#[async_trait]
pub trait Speaker: Send + Sync {
    /// The service, as the user is told it when it fails (`openai`, `workers-ai`, a host).
    fn name(&self) -> &str;
    /// The model, as the usage pages name it.
    fn model(&self) -> &str;
    /// What speaking `text` will cost, in millionths of a dollar (checked against the spend
    /// cap before it is spoken).
    fn price_micros(&self, text: &str) -> u64;
    /// `text` spoken, checked by [`check`].
    async fn speak(&self, text: &str) -> Result<Speech, LlmError>;
}

/// `audio` from `service` as [`Speech`], if it is audio `sendVoice` takes: an empty body, one
/// over [`MAX_SPEECH_BYTES`] or one in another format is an error saying so.
pub fn check(service: &str, audio: Vec<u8>, cost_micros: u64) -> Result<Speech, LlmError> {
    if audio.is_empty() {
        return Err(LlmError::Fatal(format!("{service}: the speech was empty")));
    }
    if audio.len() > MAX_SPEECH_BYTES {
        return Err(LlmError::Fatal(format!(
            "{service}: the speech was {} bytes, over the {MAX_SPEECH_BYTES}-byte limit",
            audio.len()
        )));
    }
    let format = AudioFormat::of(&audio).ok_or_else(|| {
        LlmError::Fatal(format!(
            "{service}: the answer was not audio in OGG, MP3 or M4A"
        ))
    })?;
    Ok(Speech {
        audio,
        format,
        cost_micros,
    })
}

/// What of a Markdown answer is worth speaking, at most `max_chars` characters: code blocks,
/// links' addresses and Markdown marks left out, cut at the last sentence end before the limit
/// (else at a word). Empty when nothing is left.
pub fn speakable(markdown: &str, max_chars: usize) -> String {
    let mut words = String::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let line = line.trim_start_matches(['#', '>', ' ']);
        let line = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .unwrap_or(line);
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str(&without_marks(line));
    }
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= max_chars {
        return words;
    }
    let cut: String = words.chars().take(max_chars).collect();
    let sentence = cut.rfind(['.', '!', '?']).filter(|&at| at > cut.len() / 3);
    match sentence {
        Some(at) => cut[..=at].to_owned(),
        None => match cut.rfind(' ') {
            Some(at) => format!("{}…", &cut[..at]),
            None => cut,
        },
    }
}

/// A line without `*`, `_`, `` ` `` and `~` marks, links as their text.
fn without_marks(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        // `[text](address)` → `text`.
        if c == '[' {
            if let Some((text, after)) = rest[1..].split_once("](") {
                if let Some(end) = after.find(')') {
                    if !text.contains(']') {
                        out.push_str(text);
                        rest = &after[end + 1..];
                        continue;
                    }
                }
            }
        }
        if !matches!(c, '*' | '_' | '`' | '~') {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// An OpenAI-compatible `/audio/speech` endpoint, asked for Opus.
pub struct OpenAiSpeaker {
    pub http: Arc<dyn Http>,
    pub name: String,
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
    pub voice: String,
    pub timeout: Duration,
}

/// Which speech service the settings name, first match wins: `SPEECH_BASE_URL` (with
/// `SPEECH_API_KEY`), then `OPENAI_API_KEY` (at `OPENAI_BASE_URL` or OpenAI). `SPEECH_MODEL`
/// (default `tts-1`) and `SPEECH_VOICE` (default `alloy`) choose the voice. `None` when there
/// is none, or `SPEECH_BASE_URL` is `off`.
pub fn from_env(http: Arc<dyn Http>, env: &crate::env::Env) -> Option<OpenAiSpeaker> {
    use super::service::{openai_compatible, setting, Found};
    let Found::Service(service) = openai_compatible(env, "SPEECH") else {
        return None;
    };
    let (name, base_url, api_key) = (service.name, service.base_url, service.api_key);
    Some(OpenAiSpeaker {
        http,
        name,
        base_url,
        api_key,
        model: setting(env, "SPEECH_MODEL", "tts-1"),
        voice: setting(env, "SPEECH_VOICE", "alloy"),
        timeout: Duration::from_secs(30),
    })
}

/// OpenAI's price of speech per character, in millionths of a dollar: `tts-1` $15 and
/// `tts-1-hd` $30 per million characters; `gpt-4o-mini-tts` about $0.015 a minute, some
/// 1,000 characters. Another server's model is counted as `tts-1`.
pub fn price_per_char_micros(model: &str) -> u64 {
    if model.contains("hd") {
        30
    } else {
        15
    }
}

#[async_trait]
impl Speaker for OpenAiSpeaker {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn price_micros(&self, text: &str) -> u64 {
        (text.chars().count() as u64).saturating_mul(price_per_char_micros(&self.model))
    }

    async fn speak(&self, text: &str) -> Result<Speech, LlmError> {
        let url = format!("{}/audio/speech", self.base_url.trim_end_matches('/'));
        let body = json!({
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": "opus",
        });
        let mut req = HttpRequest::post_json(url, &body, self.timeout);
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
        check(&self.name, resp.body, self.price_micros(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_their_first_bytes() {
        assert_eq!(
            AudioFormat::of(b"OggS\0\x02rest"),
            Some(AudioFormat::OggOpus)
        );
        assert_eq!(AudioFormat::of(b"ID3\x04"), Some(AudioFormat::Mp3));
        assert_eq!(AudioFormat::of(&[0xff, 0xfb, 0x90]), Some(AudioFormat::Mp3));
        assert_eq!(
            AudioFormat::of(b"\0\0\0\x20ftypM4A "),
            Some(AudioFormat::M4a)
        );
        for not_audio in [
            &b""[..],
            b"{\"error\": \"no\"}",
            b"<html>",
            b"RIFF....WAVE",
            &[0xff, 0xe0],
        ] {
            assert_eq!(AudioFormat::of(not_audio), None, "{not_audio:?}");
        }
    }

    #[test]
    fn empty_oversize_and_other_bodies_are_refused_with_a_reason() {
        let said = |r: Result<Speech, LlmError>| r.err().map(|e| e.to_string()).unwrap();
        assert!(said(check("s", vec![], 0)).contains("empty"));
        assert!(said(check("s", b"not audio".to_vec(), 0)).contains("not audio"));
        let mut big = b"OggS".to_vec();
        big.resize(MAX_SPEECH_BYTES + 1, 0);
        assert!(said(check("s", big, 0)).contains("over the"));
        let ok = check("s", b"OggS...".to_vec(), 7).unwrap();
        assert_eq!((ok.format, ok.cost_micros), (AudioFormat::OggOpus, 7));
    }

    #[test]
    fn only_prose_is_spoken_and_long_answers_are_cut_at_a_sentence() {
        let md = "# Plan\n\nThe **first** step is [the docs](https://x.test/a).\n\n```sh\nrm -rf /\n```\n- `cargo` builds it.";
        assert_eq!(
            speakable(md, 500),
            "Plan The first step is the docs. cargo builds it."
        );
        let long = "One sentence here. Another one follows. ".repeat(40);
        let spoken = speakable(&long, 100);
        assert!(
            spoken.ends_with('.') && spoken.chars().count() <= 100,
            "{spoken}"
        );
        let words = "word ".repeat(100);
        let spoken = speakable(&words, 30);
        assert!(
            spoken.ends_with('…') && spoken.chars().count() <= 31,
            "{spoken}"
        );
        assert_eq!(speakable("```\nonly code\n```", 100), "");
        // Cut on a character boundary, never inside one.
        assert!(speakable(&"ü".repeat(50), 10).chars().count() <= 10);
    }
}
