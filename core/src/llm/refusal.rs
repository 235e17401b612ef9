//! Whether a provider's error answer means it refused the API key, in each provider's own
//! words. Most say 401 (Anthropic, OpenAI, Groq, Mistral, DeepSeek, Together, OpenRouter) or
//! 403 for a key without the right; a few say it with another status and a body of their own
//! (`SHAPES`). [`super::LlmError::from_status`] asks here, so a chat call, a streamed one,
//! a key check (`doctor`, `init`) and the media services all read a refusal alike.

use serde_json::Value;

/// The refusals told by their body (any 4xx status), one function per provider's shape.
const SHAPES: &[fn(&Value) -> bool] = &[gemini, xai, openai];

/// 403 bodies that are not about the key: OpenAI's answer to a country it does not serve.
const NOT_THE_KEY: &[&str] = &["unsupported_country_region_territory"];

/// Whether an answer of `status` with `body` says the key was refused.
pub(super) fn key_refused(status: u16, body: &[u8]) -> bool {
    // Not a client error, or one that says to wait: whatever the body says.
    if !(400..500).contains(&status) || matches!(status, 408 | 429) {
        return false;
    }
    let parsed = serde_json::from_slice::<Value>(body).ok();
    // `streamGenerateContent` without SSE answers an array of one error.
    let error = match &parsed {
        Some(Value::Array(items)) => items.first(),
        other => other.as_ref(),
    };
    if matches!(status, 401 | 403) {
        let code = error
            .and_then(|e| e.pointer("/error/code"))
            .and_then(Value::as_str);
        return !code.is_some_and(|c| NOT_THE_KEY.contains(&c));
    }
    error.is_some_and(|e| SHAPES.iter().any(|shape| shape(e)))
}

/// Gemini: 400 `{"error": {"status": "INVALID_ARGUMENT", "details": [{"@type": "…ErrorInfo",
/// "reason": "API_KEY_INVALID", …}]}}` for a mistyped, deleted or expired key.
fn gemini(body: &Value) -> bool {
    let Some(details) = body.pointer("/error/details").and_then(Value::as_array) else {
        return false;
    };
    details
        .iter()
        .any(|d| d.get("reason").and_then(Value::as_str) == Some("API_KEY_INVALID"))
}

/// xAI: 400 `{"code": "Client specified an invalid argument", "error": "Incorrect API key
/// provided: …"}`.
fn xai(body: &Value) -> bool {
    body.get("error")
        .and_then(Value::as_str)
        .is_some_and(|e| e.starts_with("Incorrect API key provided"))
}

/// OpenAI and Groq: `{"error": {"code": "invalid_api_key", …}}`, 401 on an answer, but a
/// streamed error chunk has no status of its own.
fn openai(body: &Value) -> bool {
    body.pointer("/error/code").and_then(Value::as_str) == Some("invalid_api_key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(status: u16, body: Value) -> bool {
        key_refused(status, body.to_string().as_bytes())
    }

    #[test]
    fn each_presets_refusal_is_read_as_one() {
        let gemini = json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT", "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                 "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
                {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
                 "message": "API key not valid. Please pass a valid API key."}]}});
        assert!(refused(400, gemini.clone()));
        assert!(
            refused(400, json!([gemini])),
            "the array of a non-SSE stream"
        );
        assert!(refused(
            400,
            json!({"code": "Client specified an invalid argument",
                "error": "Incorrect API key provided: xa***na. You can obtain an API key from https://console.x.ai."})
        ));
        // A streamed OpenAI error chunk (read as 400: its code is no status).
        assert!(refused(
            400,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
        ));
        for body in [
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            json!({"error": {"message": "Invalid API Key", "type": "invalid_request_error", "code": "invalid_api_key"}}),
            json!({"message": "Unauthorized", "request_id": "abc"}),
            json!({"error": {"message": "No auth credentials found", "code": 401}}),
            json!({"error": {"message": "Authentication Fails, Your api key is invalid", "type": "authentication_error"}}),
        ] {
            assert!(refused(401, body));
        }
        assert!(key_refused(401, b"not json"));
        assert!(refused(
            403,
            json!({"error": {"code": 403, "message": "Method doesn't allow unregistered callers.", "status": "PERMISSION_DENIED"}})
        ));
    }

    #[test]
    fn other_answers_are_not_a_refused_key() {
        // Gemini's other 400s: a bad request, a country it does not serve.
        assert!(!refused(
            400,
            json!({"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}})
        ));
        assert!(!refused(
            400,
            json!({"error": {"code": 400, "message": "User location is not supported for the API use.", "status": "FAILED_PRECONDITION"}})
        ));
        assert!(!refused(
            403,
            json!({"error": {"code": "unsupported_country_region_territory", "message": "Country, region, or territory not supported"}})
        ));
        assert!(!refused(
            404,
            json!({"error": {"message": "model not found"}})
        ));
        assert!(!key_refused(400, b"API_KEY_INVALID"), "words, not a shape");
        // Not a client error, or a wait: whatever the body says.
        assert!(!refused(500, json!({"error": {"code": "invalid_api_key"}})));
        assert!(!refused(429, json!({"error": {"code": "invalid_api_key"}})));
    }
}
