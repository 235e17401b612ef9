//! The built Worker in local workerd, through Miniflare (`tests/miniflare.mjs`), with D1
//! simulated locally, a Vectorize mock, and the fake Bot API and model on 127.0.0.1: the port
//! conformance suites on the real bindings, the shared scenarios and the approval scenarios
//! (`clawless_testkit::scenarios`), the webhook's checks, memory, crash recovery and a reminder
//! across a restart; the control panel in a real headless chromium (`workerd/browser.rs`).
//!
//! Needs (all set by `.ci/run`): `CLAWLESS_NODE` (Node >= 22), `CLAWLESS_NODE_MODULES` (with
//! miniflare), `CLAWLESS_NATIVE_BIN` and tmux (the remote cockpit attached to the Worker),
//! `CLAWLESS_WORKER_BUILD` (the release build) and `CLAWLESS_WORKER_TEST_BUILD`
//! (the build with the `test-routes` feature, built on the config `asking-config` writes:
//! `CLAWLESS_EMBED_CONFIG=DIR worker-build --profile worker --out-dir build-test -- --features
//! test-routes`), and `CLAWLESS_WORKER_FRONT_BUILD` (the front's build, `front.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "workerd/browser.rs"]
mod browser;
#[path = "workerd/front.rs"]
mod front;
#[path = "workerd/restarts.rs"]
mod restarts;

use std::sync::Arc;

use clawless_testkit::fixtures::{HOOK_SECRET, HOOK_SECRET_ENV, OWNER_ID};
use clawless_testkit::miniflare::{bot_vars, Miniflare, SECRET};
use clawless_testkit::scenarios::{self, Shell, Status};
use clawless_testkit::servers::{echo_server, fakes, recall_after_new, text_update, until, Fakes};
use clawless_testkit::tmux::Tmux;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suites_pass_on_the_worker_bindings() {
    let echo = echo_server().await;
    let mf = Miniflare::start("CLAWLESS_WORKER_TEST_BUILD", json!({}), false);
    for suite in ["clock", "kv", "files", "text", "vectors-d1", "vectorize"] {
        assert_eq!(
            mf.get(&format!("/__conformance/{suite}")).await,
            (200, "pass".to_owned()),
            "suite {suite}"
        );
    }
    let (status, body) = mf.get(&format!("/__conformance/http?base={echo}")).await;
    assert_eq!((status, body.as_str()), (200, "pass"), "suite http");
    let (status, _) = mf.get("/__conformance/nope").await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_worker_has_no_conformance_route() {
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", json!({}), false);
    assert_eq!(mf.get("/__conformance/kv").await.0, 404);
    // The bench route sits behind its own cfg: the release build lacks it too.
    assert_eq!(mf.get("/__bench").await.0, 404);
    assert_eq!(mf.get("/healthz").await, (200, "ok".to_owned()));
}

/// A model that keeps failing: the Worker retries inside the invocation (3, 6, 12 s backoff)
/// while a retry fits its 30 s; the one that does not goes through the queue at its time; then
/// the user is told, all without the cron.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_gets_its_error_reply_within_a_minute() {
    let (f, tg, llm) = fakes().await;
    let options = json!({"vars": bot_vars(&tg, &llm), "queue": true});
    let mf = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    mf.post_update(&text_update(1, "model down please"), Some(SECRET))
        .await;
    f.assert_error_reply_within_a_minute("worker").await;
}

/// Any one provider key starts the Worker: with only OpenRouter's key set, the default agent
/// answers through the OpenAI wire format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_openrouter_key_answers() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["ANTHROPIC_API_KEY"] = json!("");
    vars["OPENROUTER_API_KEY"] = json!("or-worker");
    vars["OPENROUTER_BASE_URL"] = json!(llm);
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars, false);
    mf.post_update(&text_update(1, "hello openrouter"), Some(SECRET))
        .await;
    until("the answer", || !f.sent_to(OWNER_ID).is_empty()).await;
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello openrouter"]);
    assert_eq!(*f.llm_wires.lock().unwrap(), ["openai"]);
}

/// The first cron run of an isolate sets the command menu, once per change; `POST
/// /admin/setup` points the webhook at the Worker's own URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_menu_is_set_once_and_setup_sets_the_webhook() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["CLAWLESS_ADMIN_TOKEN"] = json!(ADMIN_TOKEN);
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars, false);
    let calls = |method: &str| f.calls_of(method);
    for _ in 0..2 {
        let outcome = mf.control("scheduled", "").await;
        assert_eq!(outcome["outcome"], "ok", "{outcome}");
    }
    assert_eq!(
        calls("setMyCommands").len(),
        2,
        "everyone's and the owner's, once"
    );
    let r = reqwest::Client::new()
        .post(format!("{}/admin/setup", mf.url))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let report: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    let set = calls("setWebhook");
    assert_eq!(set.len(), 1);
    assert_eq!(set[0]["url"], format!("{}/telegram/main", mf.url));
    assert_eq!(set[0]["secret_token"], SECRET);
    assert!(f.violations.lock().unwrap().is_empty());
}

/// A build in workerd as a [`Shell`] for the shared scenarios.
struct Worker {
    mf: Miniflare,
    f: Arc<Fakes>,
}

impl Shell for Worker {
    fn name(&self) -> &str {
        "worker"
    }
    fn fakes(&self) -> &Fakes {
        &self.f
    }
    fn secret(&self) -> &str {
        SECRET
    }
    fn post<'a>(&'a self, body: String, secret: Option<&'a str>) -> Status<'a> {
        Box::pin(self.mf.post_body(body, secret))
    }
    fn logs(&self) -> Vec<String> {
        self.mf.logs.lock().unwrap().clone()
    }
    fn scheduled(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(async move {
            self.mf.control("scheduled", "").await;
        })
    }
}

/// Every shared scenario (`clawless_testkit::scenarios`) on one workerd (memory through the
/// Vectorize mock), then what only the Worker has: the core's warning about junk in the
/// Worker's log, the cron handler, and an empty inbox in D1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_in_workerd() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["TELEGRAM_ALLOWED_USERS"] = json!(scenarios::allowed_users());
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars, true);
    let worker = Worker { mf, f };
    scenarios::run_all(&worker).await;
    let mf = &worker.mf;

    // The junk a scenario posted was acknowledged and logged through the Worker's subscriber.
    until("the core's warning in the worker log", || {
        mf.logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("WARN") && l.contains("update is not JSON; dropped"))
    })
    .await;
    // No admin token configured: the admin endpoint does not exist.
    let r = reqwest::get(format!("{}/admin/audit", mf.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let outcome = mf.control("scheduled", "").await;
    assert_eq!(outcome["outcome"], "ok", "{outcome}");
    let inbox = mf
        .control(
            "sql",
            "SELECT count(*) AS n FROM kv WHERE key LIKE 'inbox/%'",
        )
        .await;
    assert_eq!(inbox[0]["n"], 0, "nothing left in the inbox");
}

/// Every approval scenario in workerd, each tap a request (and invocation) of its own. The
/// test build is built on the asking config (`.ci/run`: `CLAWLESS_EMBED_CONFIG=<dir written by
/// asking-config> worker-build … --features test-routes`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_scenarios_in_workerd() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["TELEGRAM_ALLOWED_USERS"] = json!(scenarios::allowed_users());
    vars["CLAWLESS_ADMIN_TOKEN"] = json!(ADMIN_TOKEN);
    vars["CLAWLESS_PUBLIC_URL"] = json!("https://panel.test");
    vars[HOOK_SECRET_ENV] = json!(HOOK_SECRET);
    let mf = Miniflare::start("CLAWLESS_WORKER_TEST_BUILD", vars, false);
    let worker = Worker { mf, f };
    scenarios::run_approvals(&worker).await;

    // The audit trail of those turns, through the admin endpoint.
    let audit = |auth: Option<&str>| {
        let mut req = reqwest::Client::new().get(format!("{}/admin/audit?since=1h", worker.mf.url));
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    for auth in [None, Some(format!("Bearer {ADMIN_TOKEN}x"))] {
        assert_eq!(
            audit(auth.as_deref()).await,
            (401, "unauthorized".to_owned())
        );
    }
    // `/metrics` counts what a small scenario did.
    let url = format!("{}/metrics", worker.mf.url);
    let scrape = || {
        let req = reqwest::Client::new()
            .get(&url)
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"));
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.text().await.unwrap()
        }
    };
    scenarios::metrics_count_a_scenario(&worker, scrape).await;
    // The same turn's events, kept in D1 for `clawless tui --remote`.
    let events = |cursor: Option<String>| {
        let after = cursor.map(|c| format!("?after={c}")).unwrap_or_default();
        let req = reqwest::Client::new()
            .get(format!("{}/admin/events{after}", worker.mf.url))
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"));
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap()
        }
    };
    scenarios::assert_turn_kept(events, "main/990002").await;
    // And as a person sees it: `clawless tui --remote` attached to this Worker, in tmux.
    let bin = std::env::var("CLAWLESS_NATIVE_BIN")
        .expect("CLAWLESS_NATIVE_BIN: the native `clawless` binary (set by .ci/run)");
    let tmux = Tmux::new("workerd");
    let (_, events) = tmux
        .remote_cockpit_shows(&bin, &worker.mf.url, ADMIN_TOKEN, "main/990002", "answered")
        .await;
    assert!(events.contains("reply_sent"), "{events}");
    let (status, body) = audit(Some(&format!("Bearer {ADMIN_TOKEN}"))).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let kinds: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["model", "tool", "approval"] {
        assert!(kinds.contains(&kind), "no {kind} entry: {kinds:?}");
    }
    // The control panel: its pages from static assets, its API from the Worker.
    let base = worker.mf.url.clone();
    scenarios::panel_over_http(&worker, "77:WORKER-E2E", |c| {
        scenarios::panel_http(&base, c)
    })
    .await;
    // Incoming webhooks, each delivery drained under wait-until.
    scenarios::hooks_over_http(&worker, |c| scenarios::panel_http(&base, c)).await;
    // A watch, checked by the cron.
    scenarios::a_watch_acts_once_on_a_change(&worker).await;
}

pub(crate) const ADMIN_TOKEN: &str = "workerd-admin-token-0123456789";

/// The webhook checks before it reads: a wrong secret or a declared length over the cap is
/// refused while the body is still unsent (a Worker reading first would wait for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_refuses_before_reading_the_body() {
    use clawless_core::shell::MAX_UPDATE_BYTES;
    use std::time::Duration;
    let (f, tg, llm) = fakes().await;
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", bot_vars(&tg, &llm), false);
    let head = |secret: &str, length: usize| {
        format!(
            "POST /telegram/main HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             X-Telegram-Bot-Api-Secret-Token: {secret}\r\nContent-Length: {length}\r\n\r\n"
        )
    };
    let within = Duration::from_secs(10);
    let unsigned = mf.status_for_head(&head("wrong", 2 << 20), within).await;
    assert_eq!(unsigned, Some(401));
    let oversized = mf
        .status_for_head(&head(SECRET, MAX_UPDATE_BYTES + 1), within)
        .await;
    assert_eq!(oversized, Some(413));
    // A body over the cap that is sent is refused as well; one at the cap is read.
    let over = mf
        .post_body(" ".repeat(MAX_UPDATE_BYTES + 1), Some(SECRET))
        .await;
    assert_eq!(over, 413);
    assert_eq!(
        mf.post_body(" ".repeat(MAX_UPDATE_BYTES), Some(SECRET))
            .await,
        200
    );
    // Routes come from the core.
    assert_eq!(mf.get("/telegram/main").await.0, 405);
    assert!(f.llm_requests.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_recall_on_d1_vectors() {
    let (f, tg, llm) = fakes().await;
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", bot_vars(&tg, &llm), false);
    recall_after_new(&f, 1, |u| {
        let mf = &mf;
        async move {
            mf.post_update(&u, Some(SECRET)).await;
        }
    })
    .await;
    let files = mf.control("sql", "SELECT path FROM files").await;
    assert!(
        files
            .to_string()
            .contains("memory/assistant/main/u111111111/memory/"),
        "the daily note is a file: {files}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_recall_with_workers_ai_embeddings() {
    let (f, tg, llm) = fakes().await;
    let mf = Miniflare::start_with(
        "CLAWLESS_WORKER_BUILD",
        json!({"vars": bot_vars(&tg, &llm), "vectorize": true, "ai": true}),
    );
    recall_after_new(&f, 1, |u| {
        let mf = &mf;
        async move {
            mf.post_update(&u, Some(SECRET)).await;
        }
    })
    .await;
    let manifests = mf
        .control(
            "sql",
            "SELECT CAST(value AS TEXT) AS m FROM kv WHERE key LIKE 'memidx/%'",
        )
        .await;
    assert!(
        manifests
            .to_string()
            .contains("workers-ai/@cf/baai/bge-small-en-v1.5"),
        "indexed with Workers AI: {manifests}"
    );
}

/// A turn of six 10 s tools in workerd with the queue bound and every invocation cut 30 s
/// after it began (the test build's `CLAWLESS_TEST_CUT_MS`, as Cloudflare ends wait-until
/// work; Miniflare does not): the webhook's drain hands the lane on through the queue, each
/// consumer goes on from the last step; answered once, every tool once, and no invocation
/// cut, past 30 s or past 50 outbound requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_goes_on_through_the_queue() {
    let (f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["CLAWLESS_TEST_CUT_MS"] = json!("30000");
    let options = json!({"vars": vars, "queue": true});
    let mf = Miniflare::start_with("CLAWLESS_WORKER_TEST_BUILD", options);
    let worker = Worker { mf, f };
    scenarios::a_long_turn_is_answered_once(&worker, OWNER_ID, 1).await;
    let (status, body) = worker.mf.get("/__invocations").await;
    assert_eq!(status, 200);
    let invocations: Vec<serde_json::Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    eprintln!("worker invocations: {invocations:?}");
    let drains = |kind: &str| invocations.iter().filter(|i| i["kind"] == kind).count();
    assert!(
        drains("webhook") >= 1 && drains("queue") >= 2,
        "{invocations:?}"
    );
    for i in &invocations {
        assert_eq!(i["cut"], false, "{i}");
        assert!(i["ms"].as_u64().unwrap() <= 30_000, "{i}");
        assert!(i["requests"].as_u64().unwrap() <= 50, "{i}");
    }
}

/// Four tool rounds, then an answer streamed for two minutes, on the free plan's 50 outbound
/// requests an invocation: the webhook's 30 s are not enough, so the lane goes on through the
/// queue (the model call under way given up and made again there), and previews spread the
/// requests they may spend. Answered once, and no invocation past 50 requests or the webhook's
/// past 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_minute_stream_stays_within_fifty_requests() {
    let (f, tg, llm) = fakes().await;
    let vars = bot_vars(&tg, &llm);
    let options = json!({"vars": vars, "queue": true});
    let mf = Miniflare::start_with("CLAWLESS_WORKER_TEST_BUILD", options);
    let worker = Worker { mf, f };
    scenarios::a_long_streamed_answer_is_answered_once(&worker, OWNER_ID, 1).await;
    let (status, body) = worker.mf.get("/__invocations").await;
    assert_eq!(status, 200);
    let invocations: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    eprintln!("worker invocations: {invocations:?}");
    assert!(invocations.len() >= 2, "{invocations:?}");
    for i in &invocations {
        assert!(i["requests"].as_u64().unwrap() <= 50, "{i}");
        if i["kind"] == "webhook" {
            assert!(i["ms"].as_u64().unwrap() <= 30_000, "{i}");
        }
    }
}
