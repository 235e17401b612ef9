//! A Lambda Runtime API emulator with the Invoke API the self-invocation calls, in memory:
//! `invoke` hands an event to the function and waits for its response; asynchronous
//! invocations are queued like Lambda queues them (or only recorded, for the benchmark).

use std::collections::{HashMap, VecDeque};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::serve;
use serde_json::{json, Value};
use tokio::sync::Notify;

pub const SECRET: &str = "lambda-e2e-secret";

/// How long an invocation may wait to be taken by a function (see [`Emulator::invoke`]).
pub const PICKUP: Duration = Duration::from_secs(180);

/// The Runtime API and Invoke API, in memory.
#[derive(Default)]
pub struct Emulator {
    queue: Mutex<VecDeque<(String, Value)>>,
    responses: Mutex<HashMap<String, Value>>,
    counter: Mutex<u64>,
    arrived: Notify,
    answered: Notify,
    /// Instants of `/next` calls.
    pub nexts: Mutex<Vec<Instant>>,
    /// Asynchronous invocations received through the Invoke API.
    pub async_invokes: Mutex<Vec<Value>>,
    /// When set, asynchronous invocations are recorded but not run.
    pub hold_async: AtomicBool,
    /// The function's timeout: each invocation's deadline is this long after it is handed
    /// out (300 s when unset, the SAM template's).
    pub timeout: Mutex<Option<Duration>>,
    /// Each invocation handed out: its id, when, and its deadline.
    pub handed: Mutex<HashMap<String, (Instant, Instant)>>,
    /// Invocations answered after their deadline (a real Lambda would have cut them): id and
    /// how long they ran.
    pub overran: Mutex<Vec<(String, Duration)>>,
    /// How long each invocation ran, in the order answered.
    pub ran: Mutex<Vec<Duration>>,
}

impl Emulator {
    fn enqueue(&self, event: Value) -> String {
        let id = {
            let mut n = self.counter.lock().unwrap();
            *n += 1;
            format!("req-{n}")
        };
        self.queue.lock().unwrap().push_back((id.clone(), event));
        self.arrived.notify_waiters();
        self.arrived.notify_one();
        id
    }

    /// Invokes synchronously: waits for the function's response, as long as Lambda would: until
    /// the invocation's own deadline (the function's timeout after it was handed out) once the
    /// function has taken it, and for [`PICKUP`] before (a function process starting, or busy
    /// with the invocations queued before it). Not a fixed budget: on a loaded machine a cold
    /// debug build's first invocation may take longer than any round number.
    pub async fn invoke(&self, event: Value) -> Value {
        let id = self.enqueue(event);
        let queued = Instant::now();
        loop {
            let wait = self.answered.notified();
            if let Some(v) = self.responses.lock().unwrap().remove(&id) {
                return v;
            }
            let handed = self.handed.lock().unwrap().get(&id).copied();
            match handed {
                Some((began, deadline)) => assert!(
                    Instant::now() < deadline,
                    "no response to {id} within the function's timeout ({:?} after it was taken)",
                    deadline - began
                ),
                None => assert!(
                    queued.elapsed() < PICKUP,
                    "{id} was not taken by a function within {PICKUP:?}"
                ),
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), wait).await;
        }
    }
}

/// Whether the function process a runtime endpoint serves is alive (see [`start_function`]).
#[derive(Clone)]
struct Alive(Arc<AtomicBool>);

async fn next(
    State(emu): State<Arc<Emulator>>,
    axum::Extension(Alive(alive)): axum::Extension<Alive>,
) -> impl IntoResponse {
    emu.nexts.lock().unwrap().push(Instant::now());
    loop {
        // A killed process's `/next` may still be waiting here (its connection's end not yet
        // noticed): it must not take an invocation, which nobody would answer.
        if !alive.load(Ordering::SeqCst) {
            return (StatusCode::GONE, HeaderMap::new(), String::new());
        }
        let wait = emu.arrived.notified();
        if let Some((id, event)) = emu.queue.lock().unwrap().pop_front() {
            let timeout = emu
                .timeout
                .lock()
                .unwrap()
                .unwrap_or(Duration::from_secs(300));
            let now = Instant::now();
            emu.handed
                .lock()
                .unwrap()
                .insert(id.clone(), (now, now + timeout));
            let deadline = (std::time::SystemTime::now() + timeout)
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis();
            let headers = [
                ("lambda-runtime-aws-request-id", id),
                ("lambda-runtime-deadline-ms", deadline.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:123456789012:function:clawless-bot".into(),
                ),
                (
                    "lambda-runtime-trace-id",
                    "Root=1-5759e988-bd862e3fe1be46a994272793".into(),
                ),
            ];
            let mut map = HeaderMap::new();
            for (k, v) in headers {
                map.insert(k, v.parse().unwrap());
            }
            return (StatusCode::OK, map, event.to_string());
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), wait).await;
    }
}

async fn respond(
    State(emu): State<Arc<Emulator>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some((began, deadline)) = emu.handed.lock().unwrap().get(&id).copied() {
        emu.ran.lock().unwrap().push(began.elapsed());
        if Instant::now() > deadline {
            emu.overran
                .lock()
                .unwrap()
                .push((id.clone(), began.elapsed()));
        }
    }
    emu.responses.lock().unwrap().insert(id, v);
    emu.answered.notify_waiters();
    StatusCode::ACCEPTED
}

async fn error(
    State(emu): State<Arc<Emulator>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let text = String::from_utf8_lossy(&body).into_owned();
    emu.responses
        .lock()
        .unwrap()
        .insert(id, json!({"error": text}));
    emu.answered.notify_waiters();
    StatusCode::ACCEPTED
}

async fn init_error(body: Bytes) -> StatusCode {
    panic!("init error: {}", String::from_utf8_lossy(&body));
}

/// `POST /2015-03-31/functions/{name}/invocations` with `X-Amz-Invocation-Type: Event`.
async fn invoke_api(
    State(emu): State<Arc<Emulator>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let event: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(
        headers
            .get("x-amz-invocation-type")
            .and_then(|v| v.to_str().ok()),
        Some("Event")
    );
    emu.async_invokes.lock().unwrap().push(event.clone());
    if !emu.hold_async.load(Ordering::SeqCst) {
        emu.enqueue(event);
    }
    (StatusCode::ACCEPTED, "")
}

/// Every emulator started, by its URL: a function started against one gets a runtime endpoint
/// of its own (see [`start_function`]).
fn emulators() -> &'static Mutex<HashMap<String, Arc<Emulator>>> {
    static ALL: std::sync::OnceLock<Mutex<HashMap<String, Arc<Emulator>>>> =
        std::sync::OnceLock::new();
    ALL.get_or_init(Default::default)
}

pub async fn start_emulator() -> (Arc<Emulator>, String) {
    let emu = Arc::new(Emulator::default());
    let url = serve(router(&emu, Arc::new(AtomicBool::new(true)))).await;
    emulators().lock().unwrap().insert(url.clone(), emu.clone());
    (emu, url)
}

/// The Runtime and Invoke APIs of `emu`, for a function whose liveness is `alive`.
fn router(emu: &Arc<Emulator>, alive: Arc<AtomicBool>) -> axum::Router {
    axum::Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(respond),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .route("/2015-03-31/functions/{name}/invocations", post(invoke_api))
        .layer(axum::Extension(Alive(alive)))
        .with_state(emu.clone())
}

/// A runtime endpoint of its own for one function process of the emulator at `runtime` (its
/// URL): what it serves stops handing out invocations once the process is killed. `None`
/// when `runtime` is no emulator of this test.
fn own_endpoint(runtime: &str) -> Option<(String, Arc<AtomicBool>)> {
    let emu = emulators().lock().unwrap().get(runtime).cloned()?;
    let alive = Arc::new(AtomicBool::new(true));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
    listener.set_nonblocking(true).ok()?;
    let addr = listener.local_addr().ok()?;
    let listener = tokio::net::TcpListener::from_std(listener).ok()?;
    let app = router(&emu, alive.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Some((format!("http://{addr}"), alive))
}

/// The function process, killed on drop.
pub struct Function {
    child: Child,
    /// Cleared when the process is killed: its endpoint hands out no more invocations.
    alive: Option<Arc<AtomicBool>>,
    /// What it printed (its log), line by line; also echoed to the test's stderr.
    logs: Arc<Mutex<Vec<String>>>,
}

impl Function {
    /// The lines it printed so far (stdout and stderr).
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// How it ended, if it did within `within` (a failed start ends the process).
    pub async fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        if let Some(alive) = &self.alive {
            alive.store(false, Ordering::SeqCst);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies `out` line by line into `logs` and the test's stderr, on a thread of its own.
fn keep_lines(out: impl std::io::Read + Send + 'static, logs: &Arc<Mutex<Vec<String>>>) {
    use std::io::BufRead;
    let sink = logs.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            eprintln!("{line}");
            sink.lock().unwrap().push(line);
        }
    });
}

pub fn bootstrap() -> String {
    std::env::var("CLAWLESS_LAMBDA_BOOTSTRAP")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_bootstrap").to_owned())
}

/// Starts the bootstrap against the emulator, moto's `table`, and the fakes.
pub fn start_function(runtime: &str, moto: &str, table: &str, tg: &str, llm: &str) -> Function {
    start_function_with(runtime, moto, table, tg, llm, &[])
}

/// [`start_function`] with `env` added last (overriding the defaults).
pub fn start_function_with(
    runtime: &str,
    moto: &str,
    table: &str,
    tg: &str,
    llm: &str,
    env: &[(&str, &str)],
) -> Function {
    let (own, alive) = match own_endpoint(runtime) {
        Some((url, alive)) => (url, Some(alive)),
        None => (runtime.to_owned(), None),
    };
    let runtime = own.trim_start_matches("http://");
    let child = Command::new(bootstrap())
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime)
        .env("AWS_LAMBDA_FUNCTION_NAME", "clawless-bot")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/22/[$LATEST]test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/clawless-bot")
        .envs(super::aws_env())
        .env("AWS_ENDPOINT_URL_DYNAMODB", moto)
        .env("AWS_ENDPOINT_URL_LAMBDA", format!("http://{runtime}"))
        .env("CLAWLESS_TABLE", table)
        .env("TELEGRAM_BOT_TOKEN", "77:LAMBDA-E2E")
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-lambda")
        .env("ANTHROPIC_BASE_URL", llm)
        .env("TRANSCRIBE_BASE_URL", llm)
        .env("SPEECH_BASE_URL", llm)
        .env("IMAGE_BASE_URL", llm)
        .env(
            clawless_testkit::fixtures::MCP_URL_ENV,
            format!("{llm}/mcp"),
        )
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let logs = Arc::new(Mutex::new(Vec::new()));
    if let Some(out) = child.stdout.take() {
        keep_lines(out, &logs);
    }
    if let Some(err) = child.stderr.take() {
        keep_lines(err, &logs);
    }
    Function { child, alive, logs }
}
