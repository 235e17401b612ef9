//! Durable turns: a turn with tools killed at each point — after the model asked for a tool,
//! while the tool runs, after its result, while the answer is sent — goes on from its last
//! kept step when the lane is drained again (as a restarted process does). Each side effect
//! happens once (a reminder, a memory note) or at most once (`message`, whose outcome the
//! model is then told is unknown), the model call that finished before the kill is not made
//! again, and the answer arrives once.
//!
//! The kill (`support/kill.rs`): the first port call matching a pattern never completes, and
//! the drain is dropped there, as a killed process stops; its lease stays behind until it
//! lapses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use clawless_core::agent::UNKNOWN_OUTCOME;
use clawless_core::inbox::LEASE_TTL;
use clawless_core::{Config, Lane};
use clawless_platform::Clock;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::kill::Kill;
use support::{Harness, Wire, LLM};

fn harness(kill: &Arc<Kill>) -> Harness {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.tools.push("message".into());
    let kill = kill.clone();
    Harness::with_ports(Wire::Anthropic, config, move |platform, _, _| {
        support::kill::install(platform, &kill)
    })
}

/// The owner asks something in private (update 1); returns its lane, not drained yet.
async fn ask(h: &Harness) -> Lane {
    h.accept_only("private_text", 1).await.expect("accepted")
}

/// Drains `lane` with the kill armed: it must be reached. Then the process "restarts": the
/// dead drainer's lease lapses and the lane is drained again, to the end.
async fn kill_then_restart(h: &Harness, kill: &Kill, lane: &Lane) {
    assert!(
        kill.run(h.app.drain(lane)).await,
        "the kill point was not reached"
    );
    h.clock.advance(LEASE_TTL + Duration::from_secs(1));
    h.drain(lane).await;
}

fn schedule_call() -> Value {
    anthropic_tool_use(
        "t1",
        "schedule",
        json!({"action": "create", "in_minutes": 60, "text": "call Ana"}),
    )
}

/// The reminders the store holds.
async fn reminders(h: &Harness) -> Vec<String> {
    h.platform.kv.list("sched/", 100).await.unwrap()
}

#[test]
fn a_reminder_is_created_once_whatever_the_point_of_the_kill() {
    // (kill point, after the call did its work, model calls in all)
    let points = [
        // After the model asked for the tool, before the tool began.
        ("get call/", false, 2),
        // While the tool runs: its claim taken, the reminder not written.
        ("put sched/", false, 2),
        // While the tool runs: the reminder written, its claim not marked done.
        ("put call/", true, 2),
        // After its result was kept: the second model call never answers.
        (LLM, false, 2),
    ];
    for (pattern, after, model_calls) in points {
        block_on(async {
            let kill = Arc::new(Kill::default());
            let h = harness(&kill);
            let lane = ask(&h).await;
            h.script(200, schedule_call());
            h.script(200, anthropic_text("Reminder set."));
            kill.arm(pattern, after);
            kill_then_restart(&h, &kill, &lane).await;
            assert_eq!(
                reminders(&h).await.len(),
                1,
                "kill at {pattern}: one reminder"
            );
            assert_eq!(
                h.platform.kv.list("sched-due/", 100).await.unwrap().len(),
                1,
                "kill at {pattern}: one due entry"
            );
            assert_eq!(
                h.llm_requests().len(),
                model_calls,
                "kill at {pattern}: the model call that finished is not made again"
            );
            assert_eq!(h.sent_texts(), ["Reminder set."], "kill at {pattern}");
            // The answering call read the first call's tool result.
            assert_eq!(
                h.last_tool_result()["tool_use_id"],
                "t1",
                "kill at {pattern}"
            );
            assert!(h.head_job(&lane).await.is_none(), "kill at {pattern}: done");
            h.assert_spec_clean();
        });
    }
}

#[test]
fn an_answer_killed_while_being_sent_goes_out_once_and_nothing_runs_again() {
    block_on(async {
        let kill = Arc::new(Kill::default());
        let h = harness(&kill);
        let lane = ask(&h).await;
        h.script(200, schedule_call());
        h.script(200, anthropic_text("Reminder set."));
        // Killed as the answer is handed to Telegram, before Telegram has it.
        kill.arm("\"text\":\"Reminder set.\"", false);
        kill_then_restart(&h, &kill, &lane).await;
        assert_eq!(reminders(&h).await.len(), 1);
        assert_eq!(h.llm_requests().len(), 2);
        assert_eq!(h.sent_texts(), ["Reminder set."]);
    });
}

#[test]
fn a_message_cut_while_being_sent_is_not_sent_again_and_the_model_is_told() {
    block_on(async {
        let kill = Arc::new(Kill::default());
        let h = harness(&kill);
        let lane = ask(&h).await;
        h.script(
            200,
            anthropic_tool_use("t1", "message", json!({"text": "Working on it"})),
        );
        h.script(200, anthropic_text("Done."));
        // Telegram got the message; the process died before the tool's result was kept.
        kill.arm("Working on it", true);
        kill_then_restart(&h, &kill, &lane).await;
        assert_eq!(
            h.sent_texts(),
            ["Working on it", "Done."],
            "the message went out once, the answer once"
        );
        assert_eq!(
            h.llm_requests().len(),
            2,
            "the first model call is not repeated"
        );
        let result = h.last_tool_result();
        assert_eq!(result["content"], UNKNOWN_OUTCOME);
        assert_eq!(result["is_error"], true);
        // The audit trail says so.
        let mut said = false;
        for key in h.platform.kv.list("audit/", 100).await.unwrap() {
            let entry = h.platform.kv.get(&key).await.unwrap().unwrap();
            said |= String::from_utf8_lossy(&entry).contains("unknown after a restart");
        }
        assert!(
            said,
            "the message call's audit entry names the unknown outcome"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn a_memory_note_cut_after_its_append_is_kept_once() {
    block_on(async {
        let kill = Arc::new(Kill::default());
        let h = harness(&kill);
        let lane = ask(&h).await;
        h.script(
            200,
            anthropic_tool_use(
                "t1",
                "memory_write",
                json!({"content": "Ana's birthday is May 3"}),
            ),
        );
        h.script(200, anthropic_text("Noted."));
        // The note was appended; the process died while it was being indexed.
        kill.arm("put memidx/", false);
        kill_then_restart(&h, &kill, &lane).await;
        let notes = h.platform.files.list("memory").await.unwrap();
        let daily = notes
            .iter()
            .find(|p| p.ends_with(".md") && !p.ends_with("MEMORY.md"))
            .expect("a daily note");
        let text = String::from_utf8(h.platform.files.read(daily).await.unwrap()).unwrap();
        assert_eq!(text.matches("Ana's birthday is May 3").count(), 1, "{text}");
        assert_eq!(h.llm_requests().len(), 2);
        assert_eq!(h.sent_texts(), ["Noted."]);
        // Run again after the restart, the tool found its note and said so.
        let result = h.last_tool_result();
        assert_eq!(result["tool_use_id"], "t1");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("already ends with this note"),
            "{result}"
        );
    });
}

#[test]
fn a_turn_whose_model_fails_after_a_tool_goes_on_from_the_tool_on_retry() {
    block_on(async {
        let kill = Arc::new(Kill::default());
        let h = harness(&kill);
        let lane = ask(&h).await;
        h.script(200, schedule_call());
        // Then the model fails (the script is empty: HTTP 500) until the turn gives up.
        let first = h.drain(&lane).await;
        let clawless_core::Drained::RetryAt(at) = first else {
            panic!("a retry is scheduled, got {first:?}")
        };
        let failed_calls = h.llm_requests().len();
        h.script(200, anthropic_text("Reminder set."));
        h.clock
            .advance(Duration::from_millis(at.saturating_sub(h.clock.now_ms())));
        h.drain(&lane).await;
        assert_eq!(reminders(&h).await.len(), 1);
        assert_eq!(h.llm_requests().len(), failed_calls + 1, "one more call");
        assert_eq!(h.last_tool_result()["tool_use_id"], "t1");
        assert_eq!(h.sent_texts(), ["Reminder set."]);
        // The audit trail holds the tool's step once, although the turn ran twice.
        let mut tool_steps = 0;
        for key in h.platform.kv.list("audit/", 100).await.unwrap() {
            let entry = h.platform.kv.get(&key).await.unwrap().unwrap();
            let entry: Value = serde_json::from_slice(&entry).unwrap();
            if entry.to_string().contains("\"schedule\"") {
                tool_steps += 1;
            }
        }
        assert_eq!(tool_steps, 1);
        // Two model calls answered, 10 input tokens each: counted once each.
        let all = h.platform.kv.list("usage/main/m", 10).await.unwrap();
        let all = all
            .iter()
            .find(|k| k.ends_with("/all"))
            .expect("the month's usage");
        let usage: Value =
            serde_json::from_slice(&h.platform.kv.get(all).await.unwrap().unwrap()).unwrap();
        assert_eq!(usage["input"], 20, "{usage}");
    });
}
