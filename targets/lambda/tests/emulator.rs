//! The real `bootstrap` under a Lambda Runtime API emulator (this file's own, with the Invoke
//! API the self-invocation calls), with moto for DynamoDB and the fake Bot API and model on
//! 127.0.0.1: the same scenarios as the native end-to-end tests.
//!
//! The binary is `CLAWLESS_LAMBDA_BOOTSTRAP` when set (`.ci/run` points it at the release
//! build), else the one cargo built for this test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::servers::{fakes, recall_after_new, text_update, until};
use common::emulator::{start_emulator, start_function, SECRET};
use serde_json::Value;

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

    // Memory: a fact told in one session is recalled after /new.
    recall_after_new(&f, 20, |u| {
        let post = &post;
        async move {
            post(u, Some(SECRET)).await;
        }
    })
    .await;

    // The scheduled event sweeps.
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    assert_eq!(emu.invoke(scheduled).await["swept"], true);

    f.assert_scenario_outcome("hello lambda").await;
    assert_eq!(f.llm_count("hello"), 1, "the 401 never reached the model");
}

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
