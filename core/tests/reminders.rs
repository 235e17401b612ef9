//! Reminders end to end over the fakes: set through the model's `schedule` call, fired by
//! `App::scheduled` on the fake clock through the inbox, exactly once: not before the time,
//! once at it, once with overlapping runs, once after a crash between the enqueue and the
//! record's advance, once after downtime (a recurring one then rescheduled in the future, a
//! missed one-off late); cancelled ones never; another chat's neither listed nor cancelled;
//! `/reminders` with its buttons, `/timezone`, and a scheduled task's agent turn in its topic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

#[path = "reminders/commands.rs"]
mod commands;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawless_core::Config;
use clawless_platform::kv::tap::{Tapped, Verdict};
use clawless_platform::Clock;
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const MIN: Duration = Duration::from_secs(60);

/// A private message from the owner.
fn message(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// The model sets a reminder with `input` when asked `update_id`; returns the tool's answer.
async fn set(h: &Harness, update_id: i64, input: Value) -> String {
    h.script(
        200,
        anthropic_tool_use(&format!("t{update_id}"), "schedule", input),
    );
    h.script(200, anthropic_text("Done."));
    assert_eq!(
        h.deliver_raw(&message(update_id, "please schedule it"))
            .await,
        200
    );
    tool_result(h)
}

/// The last tool result the model was shown.
fn tool_result(h: &Harness) -> String {
    let requests = h.llm_requests();
    requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .rfind(|b| b["type"] == "tool_result")
        .map(|b| b["content"].as_str().unwrap_or("").to_owned())
        .expect("a tool result")
}

fn alarms(h: &Harness) -> Vec<String> {
    h.sent_texts()
        .into_iter()
        .filter(|t| t.starts_with('⏰'))
        .collect()
}

#[test]
fn a_reminder_in_ten_minutes_is_delivered_once_at_its_time() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let said = set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 10, "text": "tea"}),
        )
        .await;
        assert!(
            said.starts_with("Scheduled. #1 next at 2023-11-14 22:23"),
            "{said}"
        );
        h.app.scheduled().await;
        h.clock.advance(9 * MIN);
        h.app.scheduled().await;
        assert!(alarms(&h).is_empty(), "nothing before its time");
        h.clock.advance(MIN);
        let next = h.app.scheduled().await;
        assert_eq!(alarms(&h), ["⏰ tea"]);
        assert_eq!(next, None, "nothing else is due");
        h.clock.advance(MIN);
        h.app.scheduled().await;
        assert_eq!(alarms(&h).len(), 1, "once");
        // Sent to the chat, not as a reply.
        let sent = h.calls("sendMessage");
        let last = sent.last().unwrap();
        assert_eq!(last["chat_id"], json!(OWNER_ID));
        assert!(last.get("reply_parameters").is_none());
        h.assert_spec_clean();
    });
}

#[test]
fn overlapping_scheduler_runs_deliver_once() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // A second instance on the same storage: another invocation, its own leases.
        let env = clawless_core::Env::from_pairs([
            ("TELEGRAM_BOT_TOKEN", support::TOKEN.to_string()),
            ("TELEGRAM_WEBHOOK_SECRET", support::SECRET.to_string()),
            ("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".to_string()),
            ("ANTHROPIC_BASE_URL", support::LLM.to_string()),
        ]);
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let other = clawless_core::App::new(h.platform.clone(), config, &env, "other").unwrap();
        set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 5, "text": "stand up"}),
        )
        .await;
        set(
            &h,
            2,
            json!({"action": "create", "cron": "*/5 * * * *", "text": "blink"}),
        )
        .await;
        h.clock.advance(5 * MIN);
        futures::join!(
            h.app.scheduled(),
            other.scheduled(),
            h.app.fire_due(),
            other.fire_due()
        );
        futures::join!(other.fire_due(), h.app.scheduled());
        let mut got = alarms(&h);
        got.sort();
        assert_eq!(got, ["⏰ blink", "⏰ stand up"]);
    });
}

#[test]
fn a_crash_between_the_enqueue_and_the_advance_still_delivers_once() {
    block_on(async {
        let armed = Arc::new(AtomicBool::new(false));
        let flag = armed.clone();
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let h = Harness::with_ports(Wire::Anthropic, config, move |p, _, _| {
            // While armed, the next compare-and-swap on a reminder record fails: a firing
            // that crashed after putting its job in the inbox and before advancing the record.
            p.kv = Arc::new(Tapped::new(p.kv.clone(), move |call| {
                if call.kind() == "cas"
                    && call.key().starts_with("sched/")
                    && flag.swap(false, Ordering::SeqCst)
                {
                    return Verdict::Fail(clawless_platform::PortError::unavailable("crashed"));
                }
                Verdict::Run
            }));
        });
        set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 1, "text": "once"}),
        )
        .await;
        h.clock.advance(MIN);
        armed.store(true, Ordering::SeqCst);
        h.app.scheduled().await;
        assert!(!armed.load(Ordering::SeqCst), "the advance failed");
        assert_eq!(
            alarms(&h),
            ["⏰ once"],
            "the job was in the inbox: the sweep delivered it"
        );
        // The next run finds the record unmoved: the same firing again, dropped as seen.
        h.clock.advance(MIN);
        h.app.scheduled().await;
        h.clock.advance(MIN);
        h.app.scheduled().await;
        assert_eq!(alarms(&h), ["⏰ once"]);
        assert!(h.app.next_due().await.is_none(), "the one-off is done");
    });
}

#[test]
fn after_downtime_a_recurring_one_fires_once_and_moves_past_now_and_a_missed_one_off_fires_late() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // Every 10 minutes; and a one-off in 10 minutes.
        set(
            &h,
            1,
            json!({"action": "create", "cron": "*/10 * * * *", "text": "drink"}),
        )
        .await;
        set(
            &h,
            2,
            json!({"action": "create", "in_minutes": 10, "text": "late"}),
        )
        .await;
        // Five hours down.
        h.clock.advance(300 * MIN);
        let now = h.clock.now_ms();
        let next = h.app.scheduled().await.unwrap();
        let mut got = alarms(&h);
        got.sort();
        assert_eq!(got, ["⏰ drink", "⏰ late"], "each once");
        assert!(
            next > now && next <= now + 600_000,
            "next in the future: {next} vs {now}"
        );
        assert_eq!(next % 600_000, 0, "on the ten minutes");
        h.clock.advance(Duration::from_millis(next - now));
        h.app.scheduled().await;
        assert_eq!(alarms(&h).iter().filter(|t| *t == "⏰ drink").count(), 2);
    });
}

#[test]
fn a_cancelled_reminder_never_fires() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 3, "text": "nope"}),
        )
        .await;
        let said = set(&h, 2, json!({"action": "cancel", "id": 1})).await;
        assert_eq!(said, "Cancelled reminder #1.");
        let said = set(&h, 3, json!({"action": "list"})).await;
        assert_eq!(said, "Time zone of this chat: UTC. No reminders.");
        h.clock.advance(10 * MIN);
        h.app.scheduled().await;
        assert!(alarms(&h).is_empty());
    });
}

#[test]
fn a_scheduled_task_runs_as_an_agent_turn_in_its_topic() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let u = fixtures::update("forum_topic_mention", 1);
        h.script(
            200,
            anthropic_tool_use(
                "t1",
                "schedule",
                json!({"action": "create", "in_minutes": 60, "prompt": "summarise the news"}),
            ),
        );
        h.script(200, anthropic_text("Will do."));
        h.deliver_raw(&u).await;
        let before = h.llm_requests().len();
        h.clock.advance(60 * MIN);
        h.script(200, anthropic_text("Here is the news."));
        h.app.scheduled().await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), before + 1);
        let asked = requests.last().unwrap()["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string();
        assert!(asked.contains("[Scheduled task #1"), "{asked}");
        assert!(asked.contains("summarise the news"), "{asked}");
        let sent = h.calls("sendMessage");
        let answer = sent.last().unwrap();
        assert_eq!(answer["text"], "Here is the news.");
        assert_eq!(answer["chat_id"], json!(GROUP_ID));
        assert_eq!(answer["message_thread_id"], json!(5), "in its topic");
        assert!(answer.get("reply_parameters").is_none());
        h.assert_spec_clean();
    });
}

#[test]
fn refusals_are_sentences_for_the_model() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let long = "x".repeat(2001);
        for (input, says) in [
            (
                json!({"action": "create", "in_minutes": 5, "text": long}),
                "more than the 2000",
            ),
            (
                json!({"action": "create", "in_minutes": 5}),
                "exactly one of text or prompt",
            ),
            (
                json!({"action": "create", "cron": "0 9 * *", "text": "x"}),
                "has 5 fields",
            ),
            (
                json!({"action": "create", "in_minutes": 5, "text": "x", "zone": "Nowhere"}),
                "unknown time zone",
            ),
            (json!({"action": "cancel", "id": 9}), "no reminder #9"),
            (json!({"action": "snooze"}), "action must be"),
        ] {
            let said = set(&h, h.llm_requests().len() as i64 + 1, input).await;
            assert!(said.contains(says), "{said}");
        }
    });
}

#[test]
fn a_scheduled_task_recurs_at_most_every_15_minutes_and_a_chat_has_a_daily_bound() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let next = |h: &Harness| h.llm_requests().len() as i64 + 1;
        for cron in ["*/5 * * * *", "0,5 9 * * *", "* * * * *"] {
            let said = set(
                &h,
                next(&h),
                json!({"action": "create", "cron": cron, "prompt": "check the news"}),
            )
            .await;
            assert!(said.contains("at most every 15 minutes"), "{cron}: {said}");
        }
        // A text reminder asks no model: as often as a minute.
        let said = set(
            &h,
            next(&h),
            json!({"action": "create", "cron": "*/5 * * * *", "text": "blink"}),
        )
        .await;
        assert!(said.starts_with("Scheduled."), "{said}");
        // Every 15 minutes is 96 runs a day; another task every half hour would pass 100.
        let said = set(
            &h,
            next(&h),
            json!({"action": "create", "cron": "*/15 * * * *", "prompt": "check the news"}),
        )
        .await;
        assert!(said.starts_with("Scheduled."), "{said}");
        let said = set(
            &h,
            next(&h),
            json!({"action": "create", "cron": "*/30 * * * *", "prompt": "check the mail"}),
        )
        .await;
        assert!(
            said.contains("would run 144 times in the coming day"),
            "{said}"
        );
        let said = set(
            &h,
            next(&h),
            json!({"action": "create", "cron": "0 9 * * *", "prompt": "plan my day"}),
        )
        .await;
        assert!(
            said.starts_with("Scheduled."),
            "one more a day still fits: {said}"
        );
    });
}
