//! `media:` in `main.yaml`: how large a photo, voice note or document may be, and how long
//! an album is waited for.

use serde::{Deserialize, Serialize};

/// `media:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// A photo's largest size at most this big is given to the model (providers take about
    /// 5 MB an image).
    pub max_photo_kb: u64,
    /// Voice notes, audio and video notes longer than this are not transcribed.
    pub max_voice_secs: u64,
    /// Voice notes, audio and video notes bigger than this are not downloaded.
    pub max_audio_kb: u64,
    /// Text files (txt, md, csv, json, code) up to this size are read into the message.
    pub max_text_kb: u64,
    /// PDFs up to this size go to a model that reads them.
    pub max_pdf_kb: u64,
    /// The photos of an album arrive as separate updates; the first waits this long for the
    /// others, so the album is one turn.
    pub album_wait_ms: u64,
    /// Whether answers are spoken in chats that did not choose with `/voice`: `auto` answers
    /// a voice note with one, `on` every message, `off` none. Needs a speech service.
    pub voice_replies: VoiceMode,
    /// A spoken answer says at most this many characters (cut at a sentence); the whole
    /// answer follows as text.
    pub max_spoken_chars: usize,
}

/// When answers are spoken (`/voice`, `media.voice_replies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoiceMode {
    /// A voice note is answered with one.
    Auto,
    On,
    Off,
}

impl VoiceMode {
    pub fn parse(word: &str) -> Option<VoiceMode> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(VoiceMode::Auto),
            "on" => Some(VoiceMode::On),
            "off" => Some(VoiceMode::Off),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            VoiceMode::Auto => "auto",
            VoiceMode::On => "on",
            VoiceMode::Off => "off",
        }
    }

    /// Whether an answer to a message that `was_voice` is spoken.
    pub fn speaks(self, was_voice: bool) -> bool {
        match self {
            VoiceMode::Auto => was_voice,
            VoiceMode::On => true,
            VoiceMode::Off => false,
        }
    }
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_photo_kb: 5 * 1024,
            max_voice_secs: 600,
            max_audio_kb: 20 * 1024,
            max_text_kb: 256,
            max_pdf_kb: 10 * 1024,
            album_wait_ms: 1500,
            voice_replies: VoiceMode::Auto,
            max_spoken_chars: 600,
        }
    }
}

/// Telegram bots download files up to 20 MB.
const BOT_API_MAX_KB: u64 = 20 * 1024;

impl MediaConfig {
    pub fn max_photo(&self) -> usize {
        bytes(self.max_photo_kb)
    }
    pub fn max_audio(&self) -> usize {
        bytes(self.max_audio_kb)
    }
    pub fn max_text(&self) -> usize {
        bytes(self.max_text_kb)
    }
    pub fn max_pdf(&self) -> usize {
        bytes(self.max_pdf_kb)
    }

    /// What is wrong with it, as (field, message).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let sizes = [
            ("media.max_photo_kb", self.max_photo_kb),
            ("media.max_audio_kb", self.max_audio_kb),
            ("media.max_text_kb", self.max_text_kb),
            ("media.max_pdf_kb", self.max_pdf_kb),
        ];
        for (field, kb) in sizes {
            if !(1..=BOT_API_MAX_KB).contains(&kb) {
                return Some((field, format!("must be 1 to {BOT_API_MAX_KB}")));
            }
        }
        if !(1..=7200).contains(&self.max_voice_secs) {
            return Some(("media.max_voice_secs", "must be 1 to 7200".into()));
        }
        if !(20..=4000).contains(&self.max_spoken_chars) {
            return Some(("media.max_spoken_chars", "must be 20 to 4000".into()));
        }
        if self.album_wait_ms > 10_000 {
            return Some(("media.album_wait_ms", "must be at most 10000".into()));
        }
        None
    }
}

fn bytes(kb: u64) -> usize {
    usize::try_from(kb.saturating_mul(1024)).unwrap_or(usize::MAX)
}
