//! The fake media services of [`super::fakes`], served beside the model: transcription
//! (`/audio/transcriptions`), speech (`/audio/speech`) and pictures (`/images/generations`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::Fakes;

/// `POST /audio/transcriptions`: the "transcript" is the audio file's content.
pub(super) async fn transcribe(
    State(f): State<Arc<Fakes>>,
    headers: axum::http::HeaderMap,
    raw: axum::body::Bytes,
) -> Json<Value> {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
    let (name, content) = crate::spec::multipart_file(content_type, &raw).unwrap_or_default();
    f.transcriptions
        .lock()
        .unwrap()
        .push((name, content.clone()));
    Json(json!({ "text": content }))
}

/// In a text to speak: the speech service answers with an empty body.
pub const SPEECH_EMPTY: &str = "speak nothing";

/// `POST /audio/speech`: an OGG "recording" of the input (`OggS` and the words), or an empty
/// body for [`SPEECH_EMPTY`]; held while [`Fakes::speech_hang`] is set.
pub(super) async fn speak(
    State(f): State<Arc<Fakes>>,
    Json(body): Json<Value>,
) -> (axum::http::StatusCode, Vec<u8>) {
    let input = body["input"].as_str().unwrap_or("").to_owned();
    f.speech_asked.lock().unwrap().push(input.clone());
    if f.speech_hang.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("speech");
        while f.speech_hang.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return (axum::http::StatusCode::BAD_GATEWAY, Vec::new());
    }
    if input.contains(SPEECH_EMPTY) {
        return (axum::http::StatusCode::OK, Vec::new());
    }
    let mut audio = b"OggS\0\x02".to_vec();
    audio.extend_from_slice(input.as_bytes());
    (axum::http::StatusCode::OK, audio)
}

/// In a prompt: the image service refuses it as its content policy does.
pub const IMAGE_REFUSED: &str = "refuse this picture";

/// How big a picture the fake image service makes.
pub const PICTURE_BYTES: usize = 512 * 1024;

/// `POST /images/generations`: a "JPEG" of the prompt (the JPEG signature and the words,
/// padded to [`PICTURE_BYTES`]), in base64, or a content-policy refusal for [`IMAGE_REFUSED`];
/// held while [`Fakes::paint_hang`] is set.
pub(super) async fn paint(
    State(f): State<Arc<Fakes>>,
    Json(body): Json<Value>,
) -> (axum::http::StatusCode, Json<Value>) {
    use base64::Engine as _;
    let prompt = body["prompt"].as_str().unwrap_or("");
    f.images_asked.lock().unwrap().push(prompt.to_owned());
    if f.paint_hang.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("paint");
        while f.paint_hang.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return (
            axum::http::StatusCode::BAD_GATEWAY,
            Json(json!({"error": {"message": "held"}})),
        );
    }
    if prompt.contains(IMAGE_REFUSED) {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"error": {"code": "content_policy_violation",
                "message": "Your request was rejected as a result of our safety system."}})),
        );
    }
    let mut jpeg = b"\xff\xd8\xff\xe0".to_vec();
    jpeg.extend_from_slice(prompt.as_bytes());
    // As big as a real one: past a DynamoDB item's 400 KB, so the Lambda keeps it in parts.
    jpeg.resize(PICTURE_BYTES.max(jpeg.len()), b' ');
    let b64 = base64::engine::general_purpose::STANDARD.encode(jpeg);
    (
        axum::http::StatusCode::OK,
        Json(json!({"created": 1, "data": [{"b64_json": b64}]})),
    )
}
