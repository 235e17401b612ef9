//! The real `bootstrap` under a Lambda Runtime API emulator (this file's own, with the Invoke
//! API the self-invocation calls), with moto for DynamoDB and the fake Bot API and model on
//! 127.0.0.1: the same scenarios as the native end-to-end tests.
//!
//! The binary is `CLAWLESS_LAMBDA_BOOTSTRAP` when set (`.ci/run` points it at the release
//! build), else the one cargo built for this test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, VecDeque};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::servers::{fakes, serve, text_update, until};
use serde_json::{json, Value};
use tokio::sync::Notify;

const SECRET: &str = "lambda-e2e-secret";

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

    /// Invokes synchronously: waits for the function's response.
    pub async fn invoke(&self, event: Value) -> Value {
        let id = self.enqueue(event);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let wait = self.answered.notified();
            if let Some(v) = self.responses.lock().unwrap().remove(&id) {
                return v;
            }
            assert!(Instant::now() < deadline, "no response to {id}");
            let _ = tokio::time::timeout(Duration::from_millis(100), wait).await;
        }
    }
}

async fn next(State(emu): State<Arc<Emulator>>) -> impl IntoResponse {
    emu.nexts.lock().unwrap().push(Instant::now());
    loop {
        let wait = emu.arrived.notified();
        if let Some((id, event)) = emu.queue.lock().unwrap().pop_front() {
            let deadline = (std::time::SystemTime::now() + Duration::from_secs(300))
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
    emu.enqueue(event);
    (StatusCode::ACCEPTED, "")
}

pub async fn start_emulator() -> (Arc<Emulator>, String) {
    let emu = Arc::new(Emulator::default());
    let router = axum::Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(respond),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .route("/2015-03-31/functions/{name}/invocations", post(invoke_api))
        .with_state(emu.clone());
    let url = serve(router).await;
    (emu, url)
}

/// The function process, killed on drop.
pub struct Function(Child);

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn bootstrap() -> String {
    std::env::var("CLAWLESS_LAMBDA_BOOTSTRAP")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_bootstrap").to_owned())
}

/// Starts the bootstrap against the emulator, moto's `table`, and the fakes.
pub fn start_function(runtime: &str, moto: &str, table: &str, tg: &str, llm: &str) -> Function {
    let runtime = runtime.trim_start_matches("http://");
    let child = Command::new(bootstrap())
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime)
        .env("AWS_LAMBDA_FUNCTION_NAME", "clawless-bot")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/22/[$LATEST]test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/clawless-bot")
        .envs(common::aws_env())
        .env("AWS_ENDPOINT_URL_DYNAMODB", moto)
        .env("AWS_ENDPOINT_URL_LAMBDA", format!("http://{runtime}"))
        .env("CLAWLESS_TABLE", table)
        .env("TELEGRAM_BOT_TOKEN", "77:LAMBDA-E2E")
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-lambda")
        .env("ANTHROPIC_BASE_URL", llm)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Function(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_under_the_runtime_emulator() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-e2e").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let _function = start_function(&runtime, &moto.url, "clawless-e2e", &tg, &llm);
    let post = |update: Value, secret: Option<&'static str>| {
        let emu = emu.clone();
        async move {
            emu.invoke(common::url_event("/telegram/main", &update, secret))
                .await
        }
    };

    // A wrong secret: 401, no model call, no invocation.
    let r = post(text_update(1, "hello"), Some("wrong")).await;
    assert_eq!(r["statusCode"], 401);

    // A private reply, through the self-invocation.
    let r = post(text_update(2, "hello lambda"), Some(SECRET)).await;
    assert_eq!(r["statusCode"], 200);
    until("the private reply", || f.sent_to(OWNER_ID).len() == 1).await;
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello lambda"]);
    assert_eq!(
        emu.async_invokes.lock().unwrap()[0]["clawless"]["drain"],
        format!("main:{OWNER_ID}")
    );

    // A duplicate is acknowledged and answered once.
    assert_eq!(
        post(text_update(2, "hello lambda"), Some(SECRET)).await["statusCode"],
        200
    );
    // A tool round trip and a long reply.
    post(text_update(3, "what time is it"), Some(SECRET)).await;
    until("the tool answer", || f.sent_to(OWNER_ID).len() == 2).await;
    assert!(f.sent_to(OWNER_ID)[1].starts_with("Tool said: "));
    post(text_update(4, "something long please"), Some(SECRET)).await;
    until("the long answer in parts", || {
        f.sent_to(OWNER_ID).len() >= 4
    })
    .await;
    // A stranger and group gating.
    post(fixtures::update("stranger_private", 5), Some(SECRET)).await;
    post(fixtures::update("group_no_mention", 6), Some(SECRET)).await;
    post(fixtures::update("group_mention", 7), Some(SECRET)).await;
    until("the stranger notice and the group answer", || {
        f.sent_to(STRANGER_ID).len() == 1 && f.sent_to(GROUP_ID).len() == 1
    })
    .await;

    // The scheduled event sweeps.
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    assert_eq!(emu.invoke(scheduled).await["swept"], true);

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(f.llm_count("hello lambda"), 1, "answered once");
    assert_eq!(f.llm_count("hello"), 1, "the 401 never reached the model");
    assert_eq!(
        f.llm_count("Eve"),
        0,
        "the stranger never reached the model"
    );
    assert_eq!(f.sent_to(GROUP_ID), ["You said: what is 2+2?"]);
    assert!(f
        .sent()
        .iter()
        .all(|b| b["text"].as_str().unwrap().encode_utf16().count() <= 4096));
    assert!(
        f.violations.lock().unwrap().is_empty(),
        "{:?}",
        f.violations.lock().unwrap()
    );
}
