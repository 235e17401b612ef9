//! In-process handler tests: Function URL, drain and schedule events through `Shell::handle`
//! on in-memory ports, with a recording invoker instead of Lambda.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use clawless_core::{App, Config, Env};
use clawless_lambda::events::Shell;
use clawless_lambda::invoke::{drain_event, Invoker};
use clawless_platform::{FakeHttp, HttpResponse, Platform};
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::anthropic_text;
use clawless_testkit::spec::{method_of, spec};
use serde_json::{json, Value};

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

#[async_trait]
impl Invoker for Recorder {
    async fn drain_later(&self, lane: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(lane.to_owned());
        Ok(())
    }
}

fn shell() -> (Shell, Arc<Recorder>, Arc<FakeHttp>) {
    let (platform, _clock, http) = Platform::in_memory();
    let env = Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "9:LAMBDA"),
        ("TELEGRAM_WEBHOOK_SECRET", "lambda-secret"),
        ("TELEGRAM_ALLOWED_USERS", &OWNER_ID.to_string()),
        ("ANTHROPIC_API_KEY", "sk"),
        ("ANTHROPIC_BASE_URL", "http://llm.test"),
    ]);
    let app = App::new(
        platform,
        Config::load(&clawless_core::config::embedded()).unwrap(),
        &env,
        "t",
    )
    .unwrap();
    http.route("http://llm.test", |_| {
        Ok(HttpResponse::json(
            200,
            &anthropic_text("Hello from Lambda."),
        ))
    });
    http.route("https://api.telegram.org/", |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        spec().check_call(method_of(&req.url).unwrap(), &body).unwrap();
        Ok(HttpResponse::json(200, &json!({"ok": true, "result": {"message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}}})))
    });
    let recorder = Arc::new(Recorder::default());
    (
        Shell {
            app: Arc::new(app),
            invoker: recorder.clone(),
        },
        recorder,
        http,
    )
}

fn sent(http: &FakeHttp) -> Vec<String> {
    http.requests()
        .iter()
        .filter(|r| r.url.ends_with("/sendMessage"))
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn webhook_acks_then_the_drain_event_answers() {
    let (shell, recorder, http) = shell();
    let update = fixtures::update("private_text", 5);
    let resp = shell
        .handle(common::url_event(
            "/telegram/main",
            &update,
            Some("lambda-secret"),
        ))
        .await;
    assert_eq!(resp["statusCode"], 200);
    assert!(sent(&http).is_empty(), "nothing is sent on the ack path");
    let lanes = recorder.0.lock().unwrap().clone();
    assert_eq!(lanes, [format!("main:{OWNER_ID}")]);
    shell.handle(drain_event(&lanes[0])).await;
    assert_eq!(sent(&http), ["Hello from Lambda."]);
    // A re-delivery is acknowledged and dropped.
    let resp = shell
        .handle(common::url_event(
            "/telegram/main",
            &update,
            Some("lambda-secret"),
        ))
        .await;
    assert_eq!(resp["statusCode"], 200);
    assert_eq!(recorder.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn wrong_secret_is_401_and_invokes_nothing() {
    let (shell, recorder, http) = shell();
    let update = fixtures::update("private_text", 5);
    for secret in [Some("nope"), None] {
        let resp = shell
            .handle(common::url_event("/telegram/main", &update, secret))
            .await;
        assert_eq!(resp["statusCode"], 401);
    }
    assert!(recorder.0.lock().unwrap().is_empty());
    assert!(http.requests().is_empty());
}

#[tokio::test]
async fn base64_bodies_health_and_unknown_paths() {
    let (shell, recorder, _http) = shell();
    let mut ev = common::url_event("/telegram/main", &json!({}), Some("lambda-secret"));
    // {"update_id":1,"poll":{}} in base64: an unhandled update type, acknowledged.
    ev["body"] = json!("eyJ1cGRhdGVfaWQiOjEsInBvbGwiOnt9fQ==");
    ev["isBase64Encoded"] = json!(true);
    assert_eq!(shell.handle(ev).await["statusCode"], 200);
    assert!(recorder.0.lock().unwrap().is_empty());
    let mut health = common::url_event("/healthz", &json!({}), None);
    health["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(shell.handle(health).await["body"], "ok");
    assert_eq!(
        shell
            .handle(common::url_event("/other", &json!({}), None))
            .await["statusCode"],
        404
    );
}

#[tokio::test]
async fn the_schedule_sweeps_pending_work() {
    let (shell, recorder, http) = shell();
    let update = fixtures::update("private_text", 9);
    shell
        .handle(common::url_event(
            "/telegram/main",
            &update,
            Some("lambda-secret"),
        ))
        .await;
    assert_eq!(
        recorder.0.lock().unwrap().len(),
        1,
        "pretend the self-invoke was lost"
    );
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    assert_eq!(shell.handle(scheduled).await["swept"], true);
    assert_eq!(sent(&http), ["Hello from Lambda."]);
}

/// A Function URL event whose body the Function URL base64-encoded as `encoded`.
fn encoded_event(encoded: &str, secret: Option<&str>) -> Value {
    let mut ev = common::url_event("/telegram/main", &json!({}), secret);
    ev["body"] = json!(encoded);
    ev["isBase64Encoded"] = json!(true);
    ev
}

#[tokio::test]
async fn the_secret_is_checked_before_the_body_is_decoded() {
    let (shell, recorder, http) = shell();
    // Not base64: decoding it would answer 400.
    for secret in [Some("nope"), None] {
        let resp = shell.handle(encoded_event("*not base64*", secret)).await;
        assert_eq!(resp["statusCode"], 401, "{secret:?}");
    }
    let resp = shell
        .handle(encoded_event("*not base64*", Some("lambda-secret")))
        .await;
    assert_eq!(resp["statusCode"], 400, "with the secret it is decoded");
    assert!(recorder.0.lock().unwrap().is_empty());
    assert!(http.requests().is_empty());
}

#[tokio::test]
async fn a_body_over_the_cap_is_413_without_decoding_it() {
    use clawless_core::shell::MAX_UPDATE_BYTES;
    let (shell, recorder, _http) = shell();
    // Over the cap and not base64: a 413 (not a 400) shows it was never decoded.
    let huge = "*".repeat(MAX_UPDATE_BYTES * 2);
    let resp = shell
        .handle(encoded_event(&huge, Some("lambda-secret")))
        .await;
    assert_eq!(resp["statusCode"], 413);
    // A plain body over the cap.
    let mut ev = common::url_event("/telegram/main", &json!({}), Some("lambda-secret"));
    ev["body"] = json!(" ".repeat(MAX_UPDATE_BYTES + 1));
    assert_eq!(shell.handle(ev).await["statusCode"], 413);
    assert!(recorder.0.lock().unwrap().is_empty());
    // Routes come from the core: a wrong method is 405, a deeper path 404.
    let mut get = common::url_event("/telegram/main", &json!({}), Some("lambda-secret"));
    get["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(shell.handle(get).await["statusCode"], 405);
    let deeper = common::url_event("/telegram/main/x", &json!({}), Some("lambda-secret"));
    assert_eq!(shell.handle(deeper).await["statusCode"], 404);
}
