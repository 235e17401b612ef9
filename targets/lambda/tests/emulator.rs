//! The real `bootstrap` under a Lambda Runtime API emulator (this file's own, with the Invoke
//! API the self-invocation calls), with moto for DynamoDB and the fake Bot API and model on
//! 127.0.0.1: the shared scenarios (`clawless_testkit::scenarios`) and the approval scenarios
//! (each tap a separate invocation), crash recovery through the schedule, and the error reply
//! of a failing model.
//!
//! The binary is `CLAWLESS_LAMBDA_BOOTSTRAP` when set (a release build, say), else the one
//! cargo built for this test (what `.ci/run` runs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::{HOOK_SECRET, HOOK_SECRET_ENV, OWNER_ID};
use clawless_testkit::scenarios::{self, Shell, Status};
use clawless_testkit::servers::{fakes, text_update, until, Fakes};
use common::emulator::{start_emulator, start_function, start_function_with, Emulator, SECRET};
use serde_json::Value;

/// The function under the emulator as a [`Shell`] for the shared scenarios: a webhook is a
/// Function URL event, invoked synchronously.
struct Lambda {
    emu: Arc<Emulator>,
    f: Arc<Fakes>,
    /// The function's instances: a real Lambda runs a second instance while the first is
    /// busy (a drain waiting for an album's other photos, say).
    functions: Vec<common::emulator::Function>,
}

impl Shell for Lambda {
    fn name(&self) -> &str {
        "lambda"
    }
    fn fakes(&self) -> &Fakes {
        &self.f
    }
    fn secret(&self) -> &str {
        SECRET
    }
    fn post<'a>(&'a self, body: String, secret: Option<&'a str>) -> Status<'a> {
        Box::pin(async move {
            let mut event = common::url_event("/telegram/main", &Value::Null, secret);
            event["body"] = Value::from(body);
            let status = self.emu.invoke(event).await["statusCode"].as_u64();
            status.and_then(|s| u16::try_from(s).ok()).unwrap_or(0)
        })
    }
    fn logs(&self) -> Vec<String> {
        self.functions.iter().flat_map(|f| f.logs()).collect()
    }
    fn scheduled(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(async move {
            let event: Value = serde_json::from_str(common::SCHEDULED).unwrap();
            self.emu.invoke(event).await;
        })
    }
}

/// Every shared scenario (`clawless_testkit::scenarios`) on two bootstrap processes (two
/// instances, as a real Lambda runs while one is busy), then what
/// only the Lambda has: each answered chat was drained by an asynchronous self-invocation, and
/// the schedule event sweeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_on_lambda() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-e2e").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let users = scenarios::allowed_users();
    let env = [("TELEGRAM_ALLOWED_USERS", users.as_str())];
    let functions = (0..2)
        .map(|_| start_function_with(&runtime, &moto.url, "clawless-e2e", &tg, &llm, &env))
        .collect();
    let lambda = Lambda { emu, f, functions };
    scenarios::run_all(&lambda).await;

    let drained: Vec<String> = lambda
        .emu
        .async_invokes
        .lock()
        .unwrap()
        .iter()
        .map(|e| {
            e["clawless"]["drain"]
                .as_str()
                .expect("a drain event")
                .to_owned()
        })
        .collect();
    for body in lambda.f.sent() {
        // A stranger's pairing code is announced to the owner from the stranger's drain.
        let text = body["text"].as_str().unwrap_or("");
        if text.contains("asks to talk to me") {
            continue;
        }
        let lane = format!("main:{}", body["chat_id"]);
        assert!(
            drained.contains(&lane),
            "{lane} answered without a drain invocation"
        );
    }
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    assert_eq!(lambda.emu.invoke(scheduled).await["swept"], true);
    // No admin token configured: the admin endpoint does not exist.
    let mut event = common::url_event("/admin/audit", &Value::Null, None);
    event["requestContext"]["http"]["method"] = Value::from("GET");
    assert_eq!(lambda.emu.invoke(event).await["statusCode"], 404);
}

/// Every approval scenario on one bootstrap process reading the asking config from
/// `CLAWLESS_CONFIG`: each tap is a Function URL invocation of its own, the waiting turn
/// resumes in the drain it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_scenarios_on_lambda() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-approvals").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let config = clawless_testkit::scratch::dir("lambda-asking");
    clawless_testkit::fixtures::asking_config(&config);
    let users = scenarios::allowed_users();
    let env = [
        ("TELEGRAM_ALLOWED_USERS", users.as_str()),
        ("CLAWLESS_CONFIG", config.to_str().unwrap()),
    ];
    let env = [
        env[0],
        env[1],
        ("CLAWLESS_ADMIN_TOKEN", ADMIN_TOKEN),
        ("CLAWLESS_PUBLIC_URL", "https://panel.test"),
        (HOOK_SECRET_ENV, HOOK_SECRET),
    ];
    let functions = vec![start_function_with(
        &runtime,
        &moto.url,
        "clawless-approvals",
        &tg,
        &llm,
        &env,
    )];
    let lambda = Lambda { emu, f, functions };
    scenarios::run_approvals(&lambda).await;

    // The audit trail of those turns, through the admin endpoint.
    let audit = |auth: Option<String>| {
        let mut event = common::url_event("/admin/audit", &Value::Null, None);
        event["requestContext"]["http"]["method"] = Value::from("GET");
        event["rawQueryString"] = Value::from("since=1h");
        event["body"] = Value::Null;
        if let Some(auth) = auth {
            event["headers"]["authorization"] = Value::from(auth);
        }
        lambda.emu.invoke(event)
    };
    for auth in [None, Some(format!("Bearer {ADMIN_TOKEN}x"))] {
        let r = audit(auth).await;
        assert_eq!(
            (r["statusCode"].as_u64(), r["body"].as_str()),
            (Some(401), Some("unauthorized"))
        );
    }
    // `/metrics` counts what a small scenario did (one function process: its live counts).
    let scrape = || {
        let mut event = common::url_event("/metrics", &Value::Null, None);
        event["requestContext"]["http"]["method"] = Value::from("GET");
        event["body"] = Value::Null;
        event["headers"]["authorization"] = Value::from(format!("Bearer {ADMIN_TOKEN}"));
        let invoked = lambda.emu.invoke(event);
        async move {
            let r = invoked.await;
            assert_eq!(r["statusCode"], 200, "{r}");
            r["body"].as_str().unwrap_or_default().to_owned()
        }
    };
    scenarios::metrics_count_a_scenario(&lambda, scrape).await;
    // The same turn's events, kept in DynamoDB for `clawless tui --remote`.
    let events = |cursor: Option<String>| {
        let mut event = common::url_event("/admin/events", &Value::Null, None);
        event["requestContext"]["http"]["method"] = Value::from("GET");
        event["body"] = Value::Null;
        event["headers"]["authorization"] = Value::from(format!("Bearer {ADMIN_TOKEN}"));
        if let Some(cursor) = cursor {
            event["rawQueryString"] = Value::from(format!("after={cursor}"));
        }
        let invoked = lambda.emu.invoke(event);
        async move {
            let r = invoked.await;
            assert_eq!(r["statusCode"], 200, "{r}");
            serde_json::from_str::<Value>(r["body"].as_str().unwrap_or_default()).unwrap()
        }
    };
    scenarios::assert_turn_kept(events, "main/990002").await;
    let r = audit(Some(format!("Bearer {ADMIN_TOKEN}"))).await;
    assert_eq!(r["statusCode"], 200, "{r}");
    let v: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    let kinds: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["model", "tool", "approval"] {
        assert!(kinds.contains(&kind), "no {kind} entry: {kinds:?}");
    }
    // The control panel through Function URL events.
    let panel = |c: scenarios::PanelCall| {
        let invoked = lambda.emu.invoke(common::panel_event(c));
        async move { common::panel_answer(&invoked.await) }
    };
    scenarios::panel_over_http(&lambda, "77:LAMBDA-E2E", panel).await;
    // Incoming webhooks through Function URL events; each delivery drained by a self-invoke.
    scenarios::hooks_over_http(&lambda, panel).await;
    // A watch, checked by the schedule's invocations.
    scenarios::a_watch_acts_once_on_a_change(&lambda).await;
}

const ADMIN_TOKEN: &str = "lambda-admin-token-0123456789";

/// An invocation killed (SIGKILL) while the model is thinking loses nothing and answers once:
/// a new function process starts, the dead invocation's lease lapses (20 s), and the scheduled
/// sweep answers. The schedule runs every minute in AWS; here it is fired every 5 s, so what
/// is measured is the lapse; the minute's granularity adds at most 60 s on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_invocation_is_answered_by_the_scheduled_sweep() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-crash").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    f.llm_hang.store(true, Ordering::SeqCst);
    let first = start_function(&runtime, &moto.url, "clawless-crash", &tg, &llm);
    let r = emu
        .invoke(common::url_event(
            "/telegram/main",
            &text_update(1, "hello across a crash"),
            Some(SECRET),
        ))
        .await;
    assert_eq!(r["statusCode"], 200);
    until("the model call in flight", || {
        f.llm_count("hello across a crash") == 1
    })
    .await;
    drop(first); // SIGKILL, mid-turn
    let killed = Instant::now();
    f.llm_hang.store(false, Ordering::SeqCst);
    assert!(f.sent_to(OWNER_ID).is_empty(), "nothing was answered yet");

    let _second = start_function(&runtime, &moto.url, "clawless-crash", &tg, &llm);
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    while f.sent_to(OWNER_ID).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "no answer within a minute of the crash"
        );
        assert_eq!(emu.invoke(scheduled.clone()).await["swept"], true);
        if f.sent_to(OWNER_ID).is_empty() {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
    println!(
        "lambda crash recovery: answered {:.1} s after the kill (sweeps every 5 s)",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello across a crash"]);
    // Another sweep has nothing left to do: answered exactly once.
    emu.invoke(scheduled).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(f.sent_to(OWNER_ID).len(), 1);
}

/// A model that keeps failing: the drain invocation retries inline (3, 6, 12 s backoff), then
/// tells the user, all without the schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_gets_its_error_reply_within_a_minute() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-failing").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let _function = start_function(&runtime, &moto.url, "clawless-failing", &tg, &llm);
    let r = emu
        .invoke(common::url_event(
            "/telegram/main",
            &text_update(1, "model down please"),
            Some(SECRET),
        ))
        .await;
    assert_eq!(r["statusCode"], 200);
    f.assert_error_reply_within_a_minute("lambda").await;
}

/// Any one provider key starts the function: with only Gemini's key set, the default agent
/// answers through the Gemini wire format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_gemini_key_answers() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-gemini").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let only_gemini = [
        ("ANTHROPIC_API_KEY", ""),
        ("GEMINI_API_KEY", "gemini-lambda"),
        ("GEMINI_BASE_URL", llm.as_str()),
    ];
    let _function = start_function_with(
        &runtime,
        &moto.url,
        "clawless-gemini",
        &tg,
        &llm,
        &only_gemini,
    );
    let r = emu
        .invoke(common::url_event(
            "/telegram/main",
            &text_update(1, "hello gemini"),
            Some(SECRET),
        ))
        .await;
    assert_eq!(r["statusCode"], 200);
    until("the answer", || !f.sent_to(OWNER_ID).is_empty()).await;
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello gemini"]);
    assert_eq!(*f.llm_wires.lock().unwrap(), ["gemini"]);
}

/// The first scheduled run of an instance sets the command menu, and only once per change;
/// `POST /admin/setup` points the webhook at the function's own URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_menu_is_set_once_and_setup_sets_the_webhook() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-setup").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let admin = "0123456789abcdef-lambda";
    let _function = start_function_with(
        &runtime,
        &moto.url,
        "clawless-setup",
        &tg,
        &llm,
        &[("CLAWLESS_ADMIN_TOKEN", admin)],
    );
    let calls = |method: &str| f.calls_of(method);
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    assert_eq!(emu.invoke(scheduled.clone()).await["swept"], true);
    assert_eq!(
        calls("setMyCommands").len(),
        2,
        "everyone's and the owner's"
    );
    assert_eq!(emu.invoke(scheduled).await["swept"], true);
    assert_eq!(calls("setMyCommands").len(), 2, "once per change");

    let mut event = common::url_event("/admin/setup", &Value::Null, None);
    event["requestContext"]["http"]["method"] = Value::from("POST");
    event["headers"]["authorization"] = Value::from(format!("Bearer {admin}"));
    let r = emu.invoke(event.clone()).await;
    assert_eq!(r["statusCode"], 200, "{r}");
    let domain = event["requestContext"]["domainName"].as_str().unwrap();
    let set = calls("setWebhook");
    assert_eq!(set.len(), 1);
    assert_eq!(set[0]["url"], format!("https://{domain}/telegram/main"));
    assert_eq!(set[0]["secret_token"], SECRET);
    let report: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(report["ok"], true);
    assert!(!r["body"].as_str().unwrap().contains(SECRET));
    event["headers"]["authorization"] = Value::from("Bearer wrong-token-wrong-token");
    assert_eq!(emu.invoke(event).await["statusCode"], 401);
    assert!(f.violations.lock().unwrap().is_empty());
}

/// A turn of six 10 s tools on a function whose timeout is 30 s: each invocation stops
/// before its deadline and hands the lane on by invoking itself; answered once, every tool
/// once, no invocation past its deadline (the emulator checks each answer's time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_goes_on_in_fresh_invocations() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-long").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    *emu.timeout.lock().unwrap() = Some(Duration::from_secs(30));
    let config = clawless_testkit::scratch::dir("lambda-long");
    clawless_testkit::fixtures::asking_config(&config);
    let env = [("CLAWLESS_CONFIG", config.to_str().unwrap())];
    let functions = vec![start_function_with(
        &runtime,
        &moto.url,
        "clawless-long",
        &tg,
        &llm,
        &env,
    )];
    let lambda = Lambda { emu, f, functions };
    scenarios::a_long_turn_is_answered_once(&lambda, OWNER_ID, 1).await;
    let overran = lambda.emu.overran.lock().unwrap().clone();
    assert!(overran.is_empty(), "past the deadline: {overran:?}");
    let drains = lambda.emu.async_invokes.lock().unwrap().len();
    assert!(
        drains >= 3,
        "{drains} drain invocations: the lane was not handed on"
    );
    let ran = lambda.emu.ran.lock().unwrap().clone();
    eprintln!("lambda: {drains} drain invocations; each ran {ran:?}");
    let _ = std::fs::remove_dir_all(&config);
}

/// A turn with a tool (`slow__note`, not to be run twice) whose drain invocation is killed at
/// each point — while the tool runs, after its result, while the answer is sent — and a new
/// function process swept by the schedule: answered once each time, the note at most once
/// (once when it had run), a reminder set by `schedule` exactly once, the finished model call
/// not made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_at_each_point_goes_on_once() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-points").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let config = clawless_testkit::scratch::dir("lambda-points");
    clawless_testkit::fixtures::asking_config(&config);
    let env = [("CLAWLESS_CONFIG", config.to_str().unwrap())];
    let start = || start_function_with(&runtime, &moto.url, "clawless-points", &tg, &llm, &env);
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    let mut function = start();
    for (i, point) in scenarios::KILL_POINTS.into_iter().enumerate() {
        let before = f.sent_to(OWNER_ID).len() + point.answers_first();
        point.arm(&f);
        let update = point.update(100 + i as i64, &f).await;
        let r = emu
            .invoke(common::url_event("/telegram/main", &update, Some(SECRET)))
            .await;
        assert_eq!(r["statusCode"], 200);
        point.wait_held(&f, || emu.invoke(scheduled.clone())).await;
        drop(function); // SIGKILL, mid-turn
        let killed = Instant::now();
        point.disarm(&f);
        function = start();
        while f.sent_to(OWNER_ID).len() == before {
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "{point:?}: no answer within a minute of the kill"
            );
            assert_eq!(emu.invoke(scheduled.clone()).await["swept"], true);
            if f.sent_to(OWNER_ID).len() == before {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
        emu.invoke(scheduled.clone()).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        point.check(&f, OWNER_ID, before, "lambda");
        if point.reminds() {
            let listing = text_update(200 + i as i64, scenarios::LISTING);
            let r = emu
                .invoke(common::url_event("/telegram/main", &listing, Some(SECRET)))
                .await;
            assert_eq!(r["statusCode"], 200);
            until("the listing", || f.sent_to(OWNER_ID).len() > before + 1).await;
            point.check_listing(&f, OWNER_ID, "lambda");
        }
        println!(
            "lambda, killed at {point:?}: answered {:.1} s after the kill",
            killed.elapsed().as_secs_f64()
        );
    }
    drop(function);
    let _ = std::fs::remove_dir_all(&config);
}
