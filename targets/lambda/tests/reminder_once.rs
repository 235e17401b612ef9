//! A reminder on the real `bootstrap` under the Runtime API emulator with moto: set through the
//! model's `schedule` call (a Function URL invocation), the function process killed and a new
//! one started before it is due, then the schedule event — fired twice at once, as overlapping
//! schedules would — delivers it exactly once; a later schedule finds nothing to send.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, now_ms, reminder_at, text_update, until};
use common::emulator::{start_emulator, start_function, SECRET};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_is_delivered_once_by_the_schedule_after_a_restart() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-reminders").await;
    let (f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let function = start_function(&runtime, &moto.url, "clawless-reminders", &tg, &llm);

    let at = now_ms().div_ceil(1000) + 4;
    let webhook = common::url_event(
        "/telegram/main",
        &text_update(10, &reminder_at(at, "stretch")),
        Some(SECRET),
    );
    assert_eq!(emu.invoke(webhook).await["statusCode"], 200);
    until("the tool's answer", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t.starts_with("Tool said: Scheduled."))
    })
    .await;

    // The turn's drain is over (its job and lease gone: a kill during it would leave the lane
    // leased for 20 s, which the crash tests cover); then a new process before it is due.
    while !keys_under(&client, "inbox/").await.is_empty()
        || !keys_under(&client, "lease/").await.is_empty()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(function);
    assert!(now_ms() < at * 1000, "restarted before the reminder is due");
    let _function = start_function(&runtime, &moto.url, "clawless-reminders", &tg, &llm);
    let alarms = || {
        f.sent_to(OWNER_ID)
            .into_iter()
            .filter(|t| t.starts_with('⏰'))
            .collect::<Vec<_>>()
    };
    let scheduled: Value = serde_json::from_str(common::SCHEDULED).unwrap();
    // Before it is due, the schedule sends nothing.
    emu.invoke(scheduled.clone()).await;
    assert!(alarms().is_empty(), "nothing before its time");
    while now_ms() < at * 1000 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (a, b) = tokio::join!(emu.invoke(scheduled.clone()), emu.invoke(scheduled.clone()));
    assert_eq!(
        (a["swept"].clone(), b["swept"].clone()),
        (Value::Bool(true), Value::Bool(true))
    );

    until("the reminder", || !alarms().is_empty()).await;
    emu.invoke(scheduled).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(alarms(), ["⏰ stretch"], "delivered exactly once");
    assert!(f.violations.lock().unwrap().is_empty());
}

/// The Kv keys under `prefix` in the table.
async fn keys_under(client: &aws_sdk_dynamodb::Client, prefix: &str) -> Vec<String> {
    let scan = client
        .scan()
        .table_name("clawless-reminders")
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    scan.items
        .unwrap_or_default()
        .iter()
        .filter_map(|i| i.get("s")?.as_s().ok().cloned())
        .filter(|k| k.starts_with(prefix))
        .collect()
}
