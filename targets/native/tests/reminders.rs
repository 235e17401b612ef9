//! Reminders on the real `clawless` binary: one set through the model's `schedule` call a few
//! seconds ahead, the process killed (kill -9) and started again before it is due, and the
//! reminder delivered once, at its second (the runner wakes for it, not the 15 s sweep); then
//! one set while the process runs, delivered at its second too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, now_ms, reminder_at, text_update, until};
use common::bot::{post_update, start_bot, SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_survives_kill_and_restart_and_is_delivered_once_on_time() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("reminders");
    let mut bot = start_bot(&data, &tg, &llm_url).await;
    let at = now_ms().div_ceil(1000) + 6;
    let ask = reminder_at(at, "stretch");
    assert_eq!(
        post_update(&bot, &text_update(10, &ask), Some(SECRET)).await,
        200
    );
    until("the tool's answer", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t.starts_with("Tool said: Scheduled. #1"))
    })
    .await;

    // Killed before it is due; started again on the same data.
    bot.child.kill().unwrap();
    bot.child.wait().unwrap();
    drop(bot);
    assert!(now_ms() < at * 1000, "restarted before the reminder is due");
    let _bot = start_bot(&data, &tg, &llm_url).await;
    let alarms = || {
        f.sent_to(OWNER_ID)
            .into_iter()
            .filter(|t| t.starts_with('⏰'))
            .count()
    };
    until("the reminder", || alarms() > 0).await;
    let seen = now_ms();
    assert!(
        seen >= at * 1000,
        "not early: seen {seen}, due {}",
        at * 1000
    );
    assert!(
        seen < at * 1000 + 4000,
        "at its second, not at the next sweep: {} ms late",
        seen - at * 1000
    );
    // Nothing more, through the next sweeps.
    tokio::time::sleep(Duration::from_secs(16)).await;
    assert_eq!(alarms(), 1);
    assert_eq!(f.sent_to(OWNER_ID).last().unwrap(), "⏰ stretch");

    // Set while the process runs: the turn tells the runner its due time (no listing of the
    // due index after the turn), and it fires at its second rather than at a sweep.
    let at = now_ms().div_ceil(1000) + 4;
    let ask = reminder_at(at, "drink water");
    assert_eq!(
        post_update(&_bot, &text_update(11, &ask), Some(SECRET)).await,
        200
    );
    until("the second reminder", || {
        f.sent_to(OWNER_ID).iter().any(|t| t == "⏰ drink water")
    })
    .await;
    let seen = now_ms();
    assert!(
        (at * 1000..at * 1000 + 3000).contains(&seen),
        "at its second: seen {seen}, due {}",
        at * 1000
    );
    assert!(f.violations.lock().unwrap().is_empty());
}
