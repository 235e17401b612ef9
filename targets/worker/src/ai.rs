//! Workers AI through the `AI` binding (`js_sys::Reflect`), when one is bound: memory
//! embeddings (`@cf/baai/bge-small-en-v1.5`, 384 dimensions: the same size as the local
//! embedder, so a Vectorize index fits either; without the binding the Worker embeds
//! locally), voice transcription (`@cf/openai/whisper-large-v3-turbo`) and voice replies
//! (`@cf/myshell-ai/melotts`, MP3) and pictures (`@cf/black-forest-labs/flux-1-schnell`),
//! each unless a service is set in the environment.

use async_trait::async_trait;
use base64::Engine as _;
use clawless_core::llm::LlmError;
use clawless_core::media::image::{self, PaintError, Painter, Picture};
use clawless_core::media::speak::{check, Speech, MAX_SPEECH_BYTES};
use clawless_core::media::{Speaker, Transcriber};
use clawless_core::memory::embed::{EmbedError, EmbeddingProvider};
use js_sys::{Array, Function, Object, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use worker::send::{SendFuture, SendWrapper};

pub const MODEL: &str = "@cf/baai/bge-small-en-v1.5";
pub const DIMS: usize = 384;
/// Texts per call (the model takes up to 100).
const BATCH: usize = 50;

pub struct WorkersAi {
    ai: SendWrapper<JsValue>,
}

/// Calls `ai.run(model, input)` and awaits its answer; errors as their message.
async fn run_model(ai: &JsValue, model: &str, input: &Object) -> Result<JsValue, String> {
    let message = |e: JsValue| {
        e.dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| e.as_string())
            .unwrap_or_else(|| "unknown error".into())
    };
    let run: Function = Reflect::get(ai, &JsValue::from_str("run"))
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| "the AI binding has no run()".to_owned())?;
    let promise = run
        .call2(ai, &JsValue::from_str(model), input)
        .map_err(message)?;
    JsFuture::from(Promise::resolve(&promise))
        .await
        .map_err(message)
}

/// The speech model.
pub const WHISPER: &str = "@cf/openai/whisper-large-v3-turbo";

/// Voice notes transcribed by Workers AI Whisper.
pub struct WorkersAiWhisper {
    ai: SendWrapper<JsValue>,
}

impl WorkersAiWhisper {
    pub fn new(ai: JsValue) -> Self {
        Self {
            ai: SendWrapper(ai),
        }
    }

    async fn run(&self, audio: &[u8]) -> Result<String, LlmError> {
        let input = Object::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode(audio);
        let _ = Reflect::set(
            &input,
            &JsValue::from_str("audio"),
            &JsValue::from_str(&encoded),
        );
        // Workers AI errors are mostly capacity and limits: worth a retry later.
        let out = run_model(&self.ai.0, WHISPER, &input)
            .await
            .map_err(|e| LlmError::Transient(format!("workers ai whisper: {e}")))?;
        let text = Reflect::get(&out, &JsValue::from_str("text"))
            .ok()
            .and_then(|t| t.as_string())
            .ok_or_else(|| LlmError::Fatal("workers ai whisper: no text in the answer".into()))?;
        Ok(text
            .trim()
            .chars()
            .take(clawless_core::media::transcribe::MAX_TRANSCRIPT_CHARS)
            .collect())
    }
}

#[async_trait]
impl Transcriber for WorkersAiWhisper {
    fn name(&self) -> &str {
        "workers-ai"
    }

    async fn transcribe(&self, audio: &[u8], _file_name: &str) -> Result<String, LlmError> {
        SendFuture::new(self.run(audio)).await
    }
}

/// The text-to-speech model: `{prompt, lang}` → `{audio}`, base64 MP3.
pub const MELOTTS: &str = "@cf/myshell-ai/melotts";

/// What MeloTTS charges for `text`: $0.0002 an audio minute, at about 900 characters a
/// minute.
fn melotts_price(text: &str) -> u64 {
    (text.chars().count() as u64)
        .saturating_mul(200)
        .div_ceil(900)
}

/// Voice replies spoken by Workers AI MeloTTS.
pub struct WorkersAiSpeech {
    ai: SendWrapper<JsValue>,
}

impl WorkersAiSpeech {
    pub fn new(ai: JsValue) -> Self {
        Self {
            ai: SendWrapper(ai),
        }
    }

    async fn run(&self, text: &str) -> Result<Speech, LlmError> {
        let input = Object::new();
        let _ = Reflect::set(
            &input,
            &JsValue::from_str("prompt"),
            &JsValue::from_str(text),
        );
        let _ = Reflect::set(&input, &JsValue::from_str("lang"), &JsValue::from_str("en"));
        let out = run_model(&self.ai.0, MELOTTS, &input)
            .await
            .map_err(|e| LlmError::Transient(format!("workers ai melotts: {e}")))?;
        let encoded = Reflect::get(&out, &JsValue::from_str("audio"))
            .ok()
            .and_then(|a| a.as_string())
            .unwrap_or_default();
        if encoded.len() > MAX_SPEECH_BYTES / 3 * 4 + 4 {
            return Err(LlmError::Fatal(
                "workers-ai: the speech was over the size limit".into(),
            ));
        }
        let audio = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| LlmError::Fatal("workers-ai: the speech was not audio".into()))?;
        check("workers-ai", audio, melotts_price(text))
    }
}

#[async_trait]
impl Speaker for WorkersAiSpeech {
    fn name(&self) -> &str {
        "workers-ai"
    }

    fn model(&self) -> &str {
        MELOTTS
    }

    fn price_micros(&self, text: &str) -> u64 {
        melotts_price(text)
    }

    async fn speak(&self, text: &str) -> Result<Speech, LlmError> {
        SendFuture::new(self.run(text)).await
    }
}

/// The image model: `{prompt, steps}` → `{image}`, base64 JPEG, 1024×1024.
pub const FLUX: &str = "@cf/black-forest-labs/flux-1-schnell";

/// What one picture costs: 4 tiles of 512×512 at $0.0000528 and 4 steps at $0.0001056.
const FLUX_PRICE_MICROS: u64 = 634;

/// Pictures made by Workers AI FLUX.1 schnell.
pub struct WorkersAiPainter {
    ai: SendWrapper<JsValue>,
}

impl WorkersAiPainter {
    pub fn new(ai: JsValue) -> Self {
        Self {
            ai: SendWrapper(ai),
        }
    }

    async fn run(&self, prompt: &str) -> Result<Picture, PaintError> {
        let input = Object::new();
        let _ = Reflect::set(
            &input,
            &JsValue::from_str("prompt"),
            &JsValue::from_str(prompt),
        );
        let _ = Reflect::set(&input, &JsValue::from_str("steps"), &JsValue::from_f64(4.0));
        let out = run_model(&self.ai.0, FLUX, &input).await.map_err(|e| {
            // Workers AI says a flagged prompt in its error message.
            if e.contains("NSFW") || e.contains("flagged") {
                PaintError::Refused(e.chars().take(200).collect())
            } else {
                PaintError::Failed(LlmError::Transient(format!("workers ai flux: {e}")))
            }
        })?;
        let encoded = Reflect::get(&out, &JsValue::from_str("image"))
            .ok()
            .and_then(|a| a.as_string());
        let bytes = image::decoded("workers-ai", encoded.as_deref(), false)?;
        image::check("workers-ai", bytes, FLUX_PRICE_MICROS)
    }
}

#[async_trait]
impl Painter for WorkersAiPainter {
    fn name(&self) -> &str {
        "workers-ai"
    }

    fn model(&self) -> &str {
        FLUX
    }

    fn price_micros(&self, _size: &str) -> u64 {
        FLUX_PRICE_MICROS
    }

    async fn paint(&self, prompt: &str, _size: &str) -> Result<Picture, PaintError> {
        SendFuture::new(self.run(prompt)).await
    }
}

impl WorkersAi {
    pub fn new(ai: JsValue) -> Self {
        Self {
            ai: SendWrapper(ai),
        }
    }

    async fn run(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let err = |what: &str, e: JsValue| {
            let message = e
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .or_else(|| e.as_string())
                .unwrap_or_else(|| "unknown error".into());
            EmbedError(format!("workers ai {what}: {message}"))
        };
        let ai = &self.ai.0;
        let run: Function = Reflect::get(ai, &JsValue::from_str("run"))
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| EmbedError("the AI binding has no run()".into()))?;
        let input = Object::new();
        let list: Array = texts.iter().map(|t| JsValue::from_str(t)).collect();
        let _ = Reflect::set(&input, &JsValue::from_str("text"), &list);
        let promise = run
            .call2(ai, &JsValue::from_str(MODEL), &input)
            .map_err(|e| err("run", e))?;
        let out = JsFuture::from(Promise::resolve(&promise))
            .await
            .map_err(|e| err("run", e))?;
        let data: Array = Reflect::get(&out, &JsValue::from_str("data"))
            .ok()
            .and_then(|d| d.dyn_into().ok())
            .ok_or_else(|| EmbedError("workers ai: no data in the answer".into()))?;
        let vectors: Vec<Vec<f32>> = data
            .iter()
            .map(|row| {
                row.dyn_into::<Array>()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect())
                    .unwrap_or_default()
            })
            .collect();
        if vectors.len() != texts.len() || vectors.iter().any(|v: &Vec<f32>| v.len() != DIMS) {
            return Err(EmbedError(format!(
                "workers ai: expected {} vectors of {DIMS}, got {}",
                texts.len(),
                vectors.len()
            )));
        }
        Ok(vectors)
    }
}

#[async_trait]
impl EmbeddingProvider for WorkersAi {
    fn dims(&self) -> usize {
        DIMS
    }

    fn id(&self) -> String {
        format!("workers-ai/{MODEL}")
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(SendFuture::new(self.run(batch)).await?);
        }
        Ok(out)
    }
}
