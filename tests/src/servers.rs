//! Fake Bot API and model servers on 127.0.0.1 for the shells' end-to-end tests (feature
//! `servers`): every Bot API call is checked against the spec, the model is scripted by what
//! it is asked ("remember: X" → memory_write, "schedule: {…}" → schedule, "mcp: X" → the
//! test MCP server's `demo__echo` (served at `<model URL>/mcp`; a result saying "OBEY schedule: {…}"
//! is obeyed), "time" → a tool call, "long" → 6000+
//! characters, else an echo), and either side fails once on request (the `*_ONCE` markers).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use serde_json::{json, Value};

mod media;
mod models;
mod page;
mod telegram;

pub use media::{IMAGE_REFUSED, PICTURE_BYTES, SPEECH_EMPTY};

use crate::fixtures;

#[derive(Default)]
pub struct Fakes {
    /// The text `/page` serves ([`Fakes::serve_page`]) (its ETag follows it), and each request's `If-None-Match`.
    pub page: Arc<Mutex<String>>,
    pub page_asked: Arc<Mutex<Vec<Option<String>>>>,
    /// When set, what the page says from the request after the next one on (a change).
    pub page_next: Arc<Mutex<Option<String>>>,
    /// Bot API calls answered: (method, body).
    pub calls: Mutex<Vec<(String, Value)>>,
    pub violations: Mutex<Vec<String>>,
    /// sendMessage attempts seen, answered or not.
    pub send_attempts: Mutex<usize>,
    pub llm_requests: Mutex<Vec<Value>>,
    /// While set, the model never answers.
    pub llm_hang: AtomicBool,
    /// Milliseconds the model waits before each answer (a slow model); 0 answers at once.
    pub llm_delay_ms: std::sync::atomic::AtomicU64,
    /// While set, sendMessage never answers; a send caught by it is lost (never delivered),
    /// as when the sender dies mid-request.
    pub send_hang: AtomicBool,
    /// Updates handed out by getUpdates.
    pub updates: Mutex<Vec<Value>>,
    /// Wakes a getUpdates that waits for updates (see [`Fakes::push_update`]).
    pub update_added: tokio::sync::Notify,
    /// Notified after each sendMessage is recorded.
    pub sent_added: tokio::sync::Notify,
    /// sendMessage calls refused on purpose (a `SEND_*_ONCE` marker), by body.
    pub send_refused: Mutex<Vec<Value>>,
    /// Texts that already failed once (model questions and sent texts with a marker).
    failed_once: Mutex<HashSet<String>>,
    /// Files `getFile` and the file download serve, by file id.
    pub files: Mutex<std::collections::HashMap<String, Vec<u8>>>,
    /// Transcriptions asked for: the audio file's name and content.
    pub transcriptions: Mutex<Vec<(String, String)>>,
    /// The bot token the shell used in its Bot API calls (from the URL path).
    pub token: Mutex<Option<String>>,
    /// The MCP server at `<model URL>/mcp` (see [`crate::mcp`]).
    pub mcp: crate::mcp::McpFake,
    /// The wire format of each model request, in order: "anthropic", "openai" or "gemini".
    pub llm_wires: Mutex<Vec<&'static str>>,
    /// What `getWebhookInfo` answers instead of "no webhook", when set.
    pub webhook_info: Mutex<Option<Value>>,
    /// When each call of the MCP server's `wait` ended.
    pub waits_ended: Mutex<Vec<Instant>>,
    /// When each Bot API call was answered (its method) and each model request arrived
    /// ("model"), in order: the polling bench splits a reply's time with it.
    pub timeline: Mutex<Vec<(String, Instant)>>,
    /// While set, a `tools/call` of the MCP server's `note` is held before it takes effect,
    /// then refused (503): the kill tests cut a turn there.
    pub note_hang: AtomicBool,
    /// While set, a model request that answers a tool result is held (then answered).
    pub llm_hang_on_result: AtomicBool,
    /// While set, a watch's turn on a change is held at its model call (then answered).
    pub llm_hang_on_watch: AtomicBool,
    /// What has been held so far: "note", "model", "watch", "send", "speech", "paint", "upload" (see
    /// the hang switches).
    pub held: Mutex<Vec<&'static str>>,
    /// Files uploaded to the Bot API, in order.
    pub uploads: Mutex<Vec<Upload>>,
    /// Texts asked to be spoken at `/audio/speech`, in order.
    pub speech_asked: Mutex<Vec<String>>,
    /// While set, a speech request is held (then refused): the kill tests cut a turn there.
    pub speech_hang: AtomicBool,
    /// Prompts asked to be drawn at `/images/generations`, in order.
    pub images_asked: Mutex<Vec<String>>,
    /// While set, a picture request is held (then refused): the kill tests cut a turn there.
    pub paint_hang: AtomicBool,
    /// While set, an upload (`sendVoice`, `sendPhoto`) is held before it is taken (then
    /// refused): the kill tests cut a turn there.
    pub upload_hang: AtomicBool,
}

/// A file uploaded to the fake Bot API.
#[derive(Debug, Clone)]
pub struct Upload {
    /// `sendVoice`, `sendPhoto`, `sendDocument`.
    pub method: String,
    pub chat: i64,
    pub name: String,
    pub bytes: Vec<u8>,
}

/// In a bot token: the fake Bot API refuses every call with 401 Unauthorized (a revoked or
/// mistyped token).
pub const TOKEN_REFUSED: &str = "WRONG";
/// In a model key: the fake model's key check refuses it as the provider would (Gemini with
/// 400 `API_KEY_INVALID`, the others with 401).
pub const KEY_REFUSED: &str = "wrong";

/// In a question: the model answers it with HTTP 500 the first time it is asked.
pub const MODEL_500_ONCE: &str = "model fails once with 500";
/// In a question: the model answers it with HTTP 429 and `retry-after: 1` the first time.
pub const MODEL_429_ONCE: &str = "model fails once with 429";
/// In a question: the model answers only once a typing indicator has been shown (waiting at
/// most 2 s), as a model slower than one Bot API round trip does. Typing runs beside the model
/// call and stops when it answers, so a fake answering at once may leave no indicator at all.
pub const MODEL_AWAITS_TYPING: &str = "summarise the topic";
/// The forum topic of that question (`forum_topic_mention.json`).
const FORUM_TOPIC: i64 = 5;
/// In a sent text: the Bot API refuses its first sendMessage with 502 Bad Gateway.
pub const SEND_502_ONCE: &str = "send fails once with 502";
/// In a sent text: the Bot API refuses its first sendMessage with 429, `retry_after` 1.
pub const SEND_429_ONCE: &str = "send fails once with 429";

impl Fakes {
    fn mark(&self, what: &str) {
        self.timeline
            .lock()
            .unwrap()
            .push((what.to_string(), Instant::now()));
    }

    /// The bodies of the Bot API calls of `method` answered so far, in order.
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    pub fn sent(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "sendMessage")
            .map(|(_, b)| b.clone())
            .collect()
    }
    /// Hands `update` to getUpdates, waking a long poll that waits, as Telegram does.
    pub fn push_update(&self, update: Value) {
        self.updates.lock().unwrap().push(update);
        self.update_added.notify_one();
    }

    /// The files uploaded with `method` (`sendVoice`, `sendPhoto`) to `chat`: (name, bytes).
    pub fn uploads_to(&self, method: &str, chat: i64) -> Vec<(String, Vec<u8>)> {
        self.uploads
            .lock()
            .unwrap()
            .iter()
            .filter(|u| u.method == method && u.chat == chat)
            .map(|u| (u.name.clone(), u.bytes.clone()))
            .collect()
    }

    pub fn sent_to(&self, chat: i64) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|b| b["chat_id"] == chat)
            .map(|b| b["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }
    /// The sendMessage bodies refused on purpose for `chat`.
    pub fn refused_to(&self, chat: i64) -> usize {
        let refused = self.send_refused.lock().unwrap();
        refused.iter().filter(|b| b["chat_id"] == chat).count()
    }

    /// Whether `text` carries `marker` and has not failed yet (it has now).
    fn first_failure(&self, text: &str, marker: &str) -> bool {
        text.contains(marker) && self.failed_once.lock().unwrap().insert(text.to_owned())
    }

    pub fn llm_count(&self, needle: &str) -> usize {
        // The question is the last message of the request that first asks it.
        let reqs = self.llm_requests.lock().unwrap();
        reqs.iter()
            .filter(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .is_some_and(|m| m.to_string().contains(needle))
            })
            .count()
    }
}

impl Fakes {
    /// After "model down please" was posted by the owner: the owner gets the error reply
    /// within a minute, as a sentence (never the provider's body). Prints how long it took.
    pub async fn assert_error_reply_within_a_minute(&self, shell: &str) {
        let took = within("the error reply", Duration::from_secs(60), || {
            !self.sent_to(fixtures::OWNER_ID).is_empty()
        })
        .await;
        println!(
            "{shell}: error reply {:.1} s after the update (model failing, no scheduler)",
            took.as_secs_f64()
        );
        let sent = self.sent_to(fixtures::OWNER_ID);
        assert!(
            sent[0].starts_with("Sorry, I could not answer that"),
            "{sent:?}"
        );
        assert!(!sent[0].contains("overloaded"), "no raw body: {sent:?}");
    }
}

/// Waits until `cond` holds, at most `limit`; returns how long it took (fails past it).
pub async fn within(what: &str, limit: Duration, cond: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

pub async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub fn text_update(id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", id);
    u["message"]["text"] = json!(text);
    u
}

/// A private text from `user` (in the private chat with them).
pub fn text_update_from(user: i64, id: i64, text: &str) -> Value {
    let mut u = text_update(id, text);
    u["message"]["from"]["id"] = json!(user);
    u["message"]["chat"]["id"] = json!(user);
    u
}

pub async fn fakes() -> (Arc<Fakes>, String, String) {
    let f = Arc::new(Fakes::default());
    let tg = serve(
        axum::Router::new()
            .route("/{*method}", post(telegram::bot_api))
            .route("/file/{*path}", axum::routing::get(telegram::file))
            .with_state(f.clone()),
    )
    .await;
    let llm_url = serve(
        axum::Router::new()
            .route("/v1/messages", post(models::anthropic_streaming))
            .route("/chat/completions", post(models::openai))
            .route("/models", axum::routing::get(models::list))
            .route("/v1/models", axum::routing::get(models::list))
            .route("/v1beta/models", axum::routing::get(models::list))
            .route("/v1beta/models/{model}", post(models::gemini))
            .route("/audio/transcriptions", post(media::transcribe))
            .route("/audio/speech", post(media::speak))
            .route("/images/generations", post(media::paint))
            .route("/mcp", post(mcp))
            .with_state(f.clone()),
    )
    .await;
    (f, tg, llm_url)
}

/// The MCP server of [`crate::mcp`], over HTTP.
async fn mcp(
    State(f): State<Arc<Fakes>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if crate::mcp::notes(&body) && f.note_hang.load(Ordering::SeqCst) {
        f.held.lock().unwrap().push("note");
        while f.note_hang.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Its caller was killed meanwhile: the note must not take effect now.
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            axum::http::HeaderMap::new(),
            b"held".to_vec(),
        );
    }
    let waits = crate::mcp::waits(&body);
    if let Some(secs) = waits {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    let (status, answer_headers, body) = f.mcp.handle(header, &body);
    if waits.is_some() {
        f.waits_ended.lock().unwrap().push(Instant::now());
    }
    let mut out = axum::http::HeaderMap::new();
    for (k, v) in answer_headers {
        out.insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(&v).unwrap(),
        );
    }
    (axum::http::StatusCode::from_u16(status).unwrap(), out, body)
}

/// Serves `router` on 127.0.0.1 at a free port; returns `http://127.0.0.1:PORT`.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// The server the Http conformance suite expects (`/echo`, `/status/{code}`, `/slow`,
/// `/redirect`, `/big`, `/stream`), served on 127.0.0.1; returns its base URL.
pub async fn echo_server() -> String {
    use axum::body::Bytes;
    use axum::extract::Path;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    async fn echo(headers: HeaderMap, body: Bytes) -> (StatusCode, HeaderMap, Bytes) {
        let mut h = HeaderMap::new();
        if let Some(v) = headers.get("x-test") {
            h.insert("x-echo", v.clone());
        }
        (StatusCode::OK, h, body)
    }
    let router = axum::Router::new()
        .route("/echo", post(echo))
        .route(
            "/status/{code}",
            get(|Path(code): Path<u16>| async move {
                (
                    StatusCode::from_u16(code).unwrap(),
                    [("retry-after", "7")],
                    "status",
                )
            }),
        )
        .route(
            "/redirect",
            get(|| async { (StatusCode::FOUND, [("location", "/big")], "moved") }),
        )
        .route(
            "/big",
            // `clawless_platform::http::conformance::BIG` bytes.
            get(|| async { vec![b'x'; 100_000] }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "slow"
            }),
        )
        .route("/stream", get(stream));
    serve(router).await
}

/// `GET /stream` of the Http conformance suite (`clawless_platform::http::conformance::stream`
/// is the reference): three pieces, each 300 ms after the one before, sent as they come.
async fn stream() -> impl axum::response::IntoResponse {
    const PIECES: [&str; 3] = ["data: one\n\n", "data: two\n\n", "data: three\n\n"];
    let pieces = futures::stream::unfold(0usize, |i| async move {
        let piece = PIECES.get(i)?;
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Some((Ok::<_, std::convert::Infallible>(*piece), i + 1))
    });
    (
        [("content-type", "text/event-stream")],
        axum::body::Body::from_stream(pieces),
    )
}

/// Memory across sessions, the same on every shell: "remember: …" (the model saves it with
/// `memory_write`), `/new`, then a question in the fresh session whose system prompt must
/// carry the fact. `post` delivers one update to the shell under test.
pub async fn recall_after_new<F, Fut>(f: &Fakes, first_id: i64, post: F)
where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    recall_after_new_as(f, fixtures::OWNER_ID, first_id, post).await;
}

/// [`recall_after_new`] in the private chat of `user` (an allowed user).
pub async fn recall_after_new_as<F, Fut>(f: &Fakes, user: i64, first_id: i64, post: F)
where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let before = f.sent_to(user).len();
    let say = |id: i64, text: &str| text_update_from(user, id, text);
    post(say(first_id, "remember: My sister Ana lives in Lisbon.")).await;
    until("the memory_write answer", || {
        f.sent_to(user).len() == before + 1
    })
    .await;
    assert!(
        f.sent_to(user)[before].starts_with("Tool said: "),
        "{:?}",
        f.sent_to(user)
    );
    post(say(first_id + 1, "/new")).await;
    until("the /new answer", || f.sent_to(user).len() == before + 2).await;
    let question = "where does my sister live?";
    post(say(first_id + 2, question)).await;
    until("the answer", || f.sent_to(user).len() == before + 3).await;
    let reqs = f.llm_requests.lock().unwrap().clone();
    let asked = reqs
        .iter()
        .rfind(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m.to_string().contains(question))
        })
        .expect("the question reached the model");
    assert_eq!(
        asked["messages"].as_array().unwrap().len(),
        1,
        "a new session: no history"
    );
    // Recalled at the end of the request, after the question: the instructions stay the same
    // from turn to turn, the prefix the provider's prompt cache reads back.
    let last = asked["messages"][0].to_string();
    assert!(
        last.contains("Relevant memories") && last.contains("Lisbon"),
        "{last}"
    );
    assert!(!asked["system"].to_string().contains("Relevant memories"));
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What to tell the fake model so it sets a reminder saying `text` at `at` (seconds since the
/// epoch): a `schedule` call with the time as `2026-03-29T09:00:05Z`.
pub fn reminder_at(at: u64, text: &str) -> String {
    // Days since the epoch → civil date (Howard Hinnant's algorithm).
    let z = (at / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = at % 86_400;
    let when = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    );
    format!("schedule: {{\"action\": \"create\", \"at\": \"{when}\", \"text\": \"{text}\"}}")
}
