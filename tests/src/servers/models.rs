//! The fake model servers of [`super::fakes`], one handler per wire format (Anthropic
//! Messages, OpenAI Chat Completions, Gemini `generateContent`) and the providers' model
//! listings their key checks call.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use futures::StreamExt;
use serde_json::{json, Value};

use super::{Fakes, FORUM_TOPIC, KEY_REFUSED, MODEL_429_ONCE, MODEL_500_ONCE, MODEL_AWAITS_TYPING};
use crate::llm::{anthropic_text, anthropic_tool_use};

/// [`anthropic`], except that a text answer to a streamed request (`"stream": true`) in a
/// conversation whose first message asks for it "slowly" comes as server-sent events, in
/// three pieces 400 ms apart (the terminal cockpit's test watches it being written), and the
/// answer of a long turn asked "… stream T" comes in 2T pieces 500 ms apart.
pub(super) async fn anthropic_streaming(
    state: State<Arc<Fakes>>,
    Json(req): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let slowly =
        req["stream"] == true && req["messages"][0]["content"].to_string().contains("slowly");
    // A long turn's answer streamed for that many seconds ("rounds: N x S stream T").
    let streamed = (req["stream"] == true)
        .then(|| req["messages"].as_array().and_then(|m| stream_secs(m)))
        .flatten();
    let (status, headers, Json(answer)) = anthropic(state, Json(req)).await;
    let text = answer["content"]
        .as_array()
        .filter(|blocks| blocks.iter().all(|b| b["type"] == "text"))
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        });
    match (status.is_success(), text, streamed) {
        (true, Some(text), Some(secs)) => {
            let pieces = usize::try_from(secs * 2).unwrap_or(1);
            sse_pieces(&text, pieces, Duration::from_millis(500))
        }
        (true, Some(text), None) if slowly => sse_pieces(&text, 3, Duration::from_millis(400)),
        _ => (status, headers, Json(answer)).into_response(),
    }
}

/// `text` as Anthropic's stream of events, in `n` pieces `gap` apart.
fn sse_pieces(text: &str, n: usize, gap: Duration) -> axum::response::Response {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n.max(1)).max(1);
    let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut frames = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_s", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        ) + &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for p in pieces {
        frames.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    frames.push(
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0}))
            + &event("message_delta", json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}}))
            + &event("message_stop", json!({"type": "message_stop"})),
    );
    let stream =
        futures::stream::iter(frames.into_iter().enumerate()).then(move |(i, frame)| async move {
            if i > 0 {
                tokio::time::sleep(gap).await;
            }
            Ok::<_, std::convert::Infallible>(frame)
        });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_default()
}

/// A scripted Anthropic model: "remember: X" saves X with `memory_write`, "files: […]" writes
/// each `{path, content}` with `write_file` in one round, "schedule: {…}"
/// calls `schedule` with that JSON, "fetch: URL" calls `web_fetch`, "run: CMD" calls `exec`, "time" asks for the clock
/// tool, "draw: X" calls `generate_image`, "note: X" calls `slow__note`, "everything: X" calls `everything__echo` (the official MCP reference server), "long"
/// writes 6000+ characters, "model down" always gets a 500, a `MODEL_*_ONCE`
/// marker fails the first time, [`MODEL_AWAITS_TYPING`] waits for "typing…", anything else is
/// echoed.
pub(super) async fn anthropic(
    State(f): State<Arc<Fakes>>,
    Json(req): Json<Value>,
) -> (axum::http::StatusCode, axum::http::HeaderMap, Json<Value>) {
    f.mark("model");
    f.llm_requests.lock().unwrap().push(req.clone());
    f.llm_wires.lock().unwrap().push("anthropic");
    while f.llm_hang.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delay = f.llm_delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let last = msgs.last().cloned().unwrap_or(Value::Null);
    if last["content"][0]["type"] == "tool_result" && f.llm_hang_on_result.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("model");
        while f.llm_hang_on_result.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let asked = &text_of(&last);
    if asked.contains("saw the page change") && f.llm_hang_on_watch.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("watch");
        while f.llm_hang_on_watch.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    if asked.contains(MODEL_AWAITS_TYPING) {
        // Typing in the topic itself (other scenarios' typing is in the log too).
        let typed = || {
            f.calls
                .lock()
                .unwrap()
                .iter()
                .any(|(m, b)| m == "sendChatAction" && b["message_thread_id"] == FORUM_TOPIC)
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while !typed() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let overloaded =
        || Json(json!({"type": "error", "error": {"type": "api_error", "message": "overloaded"}}));
    if asked.contains("model down") || f.first_failure(asked, MODEL_500_ONCE) {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::http::HeaderMap::new(),
            overloaded(),
        );
    }
    if f.first_failure(asked, MODEL_429_ONCE) {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("retry-after", axum::http::HeaderValue::from_static("1"));
        return (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            headers,
            overloaded(),
        );
    }
    let answer = rounds(&msgs).unwrap_or_else(|| answer(&last));
    (
        axum::http::StatusCode::OK,
        axum::http::HeaderMap::new(),
        Json(answer),
    )
}

/// The question of the long turn under way in `msgs` ("rounds: …"), from its message on.
fn long_turn(msgs: &[Value]) -> Option<(String, &[Value])> {
    let start = msgs
        .iter()
        .rposition(|m| m["role"] == "user" && text_of(m).starts_with("rounds: "))?;
    Some((text_of(&msgs[start]), &msgs[start..]))
}

/// How long the answer of a long turn asked "… stream T" streams: T seconds.
fn stream_secs(msgs: &[Value]) -> Option<u64> {
    let (asked, _) = long_turn(msgs)?;
    asked.split_once(" stream ")?.1.trim().parse().ok()
}

/// A turn asked "rounds: N x S": one call of `slow__wait` for S seconds a round, N rounds,
/// then "All N rounds done." (`scenarios::long_turn`); with " stream T", the answer goes on
/// for T × 4 words and streams for T seconds.
fn rounds(msgs: &[Value]) -> Option<Value> {
    let (asked, turn) = long_turn(msgs)?;
    let spec = asked.strip_prefix("rounds: ")?;
    let (spec, stream) = match spec.split_once(" stream ") {
        Some((spec, secs)) => (spec, secs.trim().parse::<usize>().ok()),
        None => (spec, None),
    };
    let (n, secs) = spec.split_once(" x ")?;
    let n: usize = n.trim().parse().ok()?;
    let secs: u64 = secs.trim().parse().ok()?;
    let done = turn
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .count();
    Some(match done < n {
        true => anthropic_tool_use(
            &format!("toolu_wait_{done}"),
            "slow__wait",
            // Each round's call differs: identical calls past two are refused as repeats.
            json!({"seconds": secs, "round": done + 1}),
        ),
        false => {
            // One message (under Telegram's 4,096 characters) of about 9 characters a piece.
            let more = " and more".repeat(stream.unwrap_or(0) * 2);
            anthropic_text(&format!("All {n} rounds done{more}."))
        }
    })
}

/// `POST /chat/completions`, the OpenAI wire (OpenRouter, Groq and every compatible preset
/// point here through their `*_BASE_URL`): echoes the last message.
pub(super) async fn openai(State(f): State<Arc<Fakes>>, Json(req): Json<Value>) -> Json<Value> {
    f.mark("model");
    f.llm_requests.lock().unwrap().push(req.clone());
    f.llm_wires.lock().unwrap().push("openai");
    let last = req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let text = match &last["content"] {
        Value::String(s) => said(s).to_owned(),
        other => text_of(&json!({ "content": other })),
    };
    Json(crate::llm::openai_text(&format!("You said: {text}")))
}

/// `POST /v1beta/models/<model>:generateContent` (or `:streamGenerateContent`), the Gemini
/// wire: echoes the last message (answered whole, as JSON).
pub(super) async fn gemini(State(f): State<Arc<Fakes>>, Json(req): Json<Value>) -> Json<Value> {
    f.mark("model");
    f.llm_requests.lock().unwrap().push(req.clone());
    f.llm_wires.lock().unwrap().push("gemini");
    let parts = req["contents"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|c| c["parts"].as_array())
        .cloned()
        .unwrap_or_default();
    let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    Json(crate::llm::gemini_text(&format!(
        "You said: {}",
        said(&text.join("\n"))
    )))
}

/// `GET /models`, `/v1/models`, `/v1beta/models`: the providers' key checks. A key holding
/// [`KEY_REFUSED`] is refused as its provider would: Gemini's (`x-goog-api-key`) with 400
/// `API_KEY_INVALID`, the others' with 401.
pub(super) async fn list(headers: axum::http::HeaderMap) -> (axum::http::StatusCode, Json<Value>) {
    let refused = |h: &str| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(KEY_REFUSED))
    };
    if refused("x-goog-api-key") {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(crate::llm::gemini_key_invalid()),
        );
    }
    if refused("authorization") || refused("x-api-key") {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            Json(
                json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
            ),
        );
    }
    (
        axum::http::StatusCode::OK,
        Json(json!({"data": [], "models": []})),
    )
}

/// The text blocks of a message, joined.
fn text_of(message: &Value) -> String {
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    said(&texts.join("\n")).to_owned()
}

/// What the person said in a message's text: the memories recalled for the turn, which the
/// request carries after it, left out.
fn said(text: &str) -> &str {
    match text.find(RECALLED) {
        Some(at) => text[..at].trim_end(),
        None => text,
    }
}

/// How the memories recalled for a turn begin, after the newest message.
const RECALLED: &str = "## Relevant memories\n";

/// What the scripted model answers to the last message.
fn answer(last: &Value) -> Value {
    let blocks = last["content"].as_array().cloned().unwrap_or_default();
    let images = blocks.iter().filter(|b| b["type"] == "image").count();
    if images > 0 {
        return anthropic_text(&format!("I see {images} image(s): {}", text_of(last)));
    }
    if last["content"][0]["type"] == "tool_result" {
        let said = last["content"][0]["content"].as_str().unwrap_or("");
        // An obedient model: a tool result that says "OBEY schedule: {…}" is done.
        if let Some(args) = said.strip_prefix("OBEY schedule: ") {
            let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
            return anthropic_tool_use("toolu_obey", "schedule", args);
        }
        // And one that does what a page of the injection corpus says.
        if let Some((tool, input)) = crate::injection::obeyed(said) {
            return anthropic_tool_use("toolu_page_says", tool, input);
        }
        return anthropic_text(&format!("Tool said: {said}"));
    }
    let text = text_of(last);
    if let Some(fact) = text.strip_prefix("remember: ") {
        return anthropic_tool_use("toolu_mem", "memory_write", json!({"content": fact}));
    }
    if let Some(said) = text.strip_prefix("note: ") {
        return anthropic_tool_use("toolu_note", "slow__note", json!({"text": said}));
    }
    if let Some(prompt) = text.strip_prefix("draw: ") {
        let input = json!({"prompt": prompt, "caption": format!("Drawn: {prompt}")});
        return anthropic_tool_use("toolu_draw", "generate_image", input);
    }
    if let Some(said) = text.strip_prefix("everything: ") {
        let input = json!({"message": said});
        return anthropic_tool_use("toolu_everything", "everything__echo", input);
    }
    if let Some(n) = text.strip_prefix("page: ") {
        let n: u64 = n.trim().parse().unwrap_or(0);
        return anthropic_tool_use("toolu_page", "slow__page", json!({ "n": n }));
    }
    if let Some(said) = text.strip_prefix("mcp: ") {
        return anthropic_tool_use("toolu_mcp", "demo__echo", json!({"text": said}));
    }
    if let Some(command) = text.strip_prefix("run: ") {
        return anthropic_tool_use("toolu_exec", "exec", json!({"command": command}));
    }
    if let Some(url) = text.strip_prefix("fetch: ") {
        return anthropic_tool_use("toolu_fetch", "web_fetch", json!({"url": url}));
    }
    if let Some(files) = text.strip_prefix("files: ") {
        // One round of `write_file` calls: `[{"path", "content"}, …]`.
        let files: Vec<Value> = serde_json::from_str(files).unwrap_or_default();
        let mut content = vec![json!({"type": "text", "text": "Writing."})];
        for (i, f) in files.iter().enumerate() {
            content.push(json!({"type": "tool_use", "id": format!("toolu_file{i}"),
                "name": "write_file", "input": f}));
        }
        return json!({
            "id": "msg_files", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}
        });
    }
    if let Some(args) = text.strip_prefix("watch: ") {
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        return anthropic_tool_use("toolu_watch", "watch", args);
    }
    if let Some(args) = text.strip_prefix("schedule: ") {
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        return anthropic_tool_use("toolu_sched", "schedule", args);
    }
    if text.contains("time") {
        return anthropic_tool_use("toolu_e2e", "current_time", json!({"utc_offset": "UTC"}));
    }
    if text.contains("long") {
        return anthropic_text(
            &(0..120)
                .map(|i| format!("Line {i:03} {}", "y".repeat(48)))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    anthropic_text(&format!("You said: {text}"))
}
