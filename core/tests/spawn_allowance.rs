//! Sub-agents within the invocation's allowance: a child's model and tool calls ask the same
//! `Allowance` its parent's do, so a sub-agent never runs an invocation past its end. A child
//! that cannot begin its next step stops; its parent is told what it found, pauses at its own
//! next step (kept in its job) and goes on in the next invocation, which answers once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clawless_core::allowance::Limits;
use clawless_core::audit::Step as AuditStep;
use clawless_core::{ConnectorId, Drained, Lane};
use clawless_platform::{Clock, HttpResponse};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::spawn::{harness, tool_results};
use support::{Harness, LLM};

/// What one researcher model call takes on the fake clock.
const CHILD_CALL: Duration = Duration::from_secs(5);

/// The researcher asks for the time at a new offset on every call, each call taking
/// [`CHILD_CALL`]; every other model call takes the harness's script.
fn researcher_never_done(h: &Harness) {
    let script = h.llm.clone();
    let clock = h.clock.clone();
    let n = Arc::new(AtomicU64::new(0));
    h.http.route(LLM, move |req| {
        if String::from_utf8_lossy(&req.body).contains("You research things.") {
            clock.advance(CHILD_CALL);
            let i = n.fetch_add(1, Ordering::Relaxed);
            let input = json!({"utc_offset": format!("+{:02}:00", i % 12)});
            return Ok(HttpResponse::json(
                200,
                &anthropic_tool_use(&format!("t{i}"), "current_time", input),
            ));
        }
        let next = script.lock().unwrap().pop_front();
        Ok(match next {
            Some((status, body, _)) => HttpResponse::json(status, &body),
            None => HttpResponse::json(500, &json!({"error": "script exhausted"})),
        })
    });
}

/// Drains `lane` invocation by invocation, each within `limits`, until it is not handed on:
/// how each ended and the fake clock's time it took.
async fn invocations(h: &Harness, lane: &Lane, limits: Limits) -> Vec<(Drained, u64)> {
    let mut done = Vec::new();
    loop {
        let started = h.clock.now_ms();
        let ended = h
            .app
            .drain_within(lane, Duration::from_secs(15), limits)
            .await
            .unwrap();
        done.push((ended, h.clock.now_ms() - started));
        if ended != Drained::HandOff {
            return done;
        }
        assert!(done.len() < 6, "handed on forever");
    }
}

#[test]
fn a_sub_agent_stops_at_the_invocations_end_and_its_parent_goes_on_in_the_next() {
    block_on(async {
        let h = harness(|_| {});
        researcher_never_done(&h);
        let task = json!({"task": "Tell me the time in many places.", "agent": "researcher", "tools": ["current_time"]});
        h.script(200, anthropic_tool_use("s1", "spawn", task));
        h.script(200, anthropic_text("Here is what the researcher found."));
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let limits = Limits {
            wall: Some(Duration::from_secs(30)),
            requests: None,
            ..Limits::default()
        };
        let done = invocations(&h, &lane, limits).await;
        let ends: Vec<Drained> = done.iter().map(|d| d.0).collect();
        assert_eq!(ends, [Drained::HandOff, Drained::Idle], "{done:?}");
        for (_, ms) in &done {
            assert!(*ms <= 30_000, "an invocation ran {ms} ms: {done:?}");
        }
        // The child ran within the first invocation, then stopped before its next step.
        let requests = h.llm_requests();
        let child: Vec<_> = requests
            .iter()
            .filter(|r| support::system_text(r) == "You research things.")
            .collect();
        assert!((2..8).contains(&child.len()), "{} child calls", child.len());
        assert_eq!(requests.len(), child.len() + 2, "the parent's two calls");
        // The parent's model, in the next invocation, was told, with what the child found.
        let told = tool_results(requests.last().unwrap());
        assert_eq!(told.len(), 1, "{told:?}");
        let (text, is_error) = &told[0];
        assert!(*is_error);
        assert!(
            text.contains("did not finish") && text.contains("ran out"),
            "{text}"
        );
        assert!(text.contains("- current_time: "), "{text}");
        assert_eq!(h.sent_texts(), ["Here is what the researcher found."]);
        // Nothing the child did is lost from the books: each of its model calls is audited.
        let main = ConnectorId::new("main");
        let audit = h
            .app
            .admin()
            .audit_entries(&main, 86_400_000, None, 100)
            .await
            .unwrap();
        let child_calls = audit
            .iter()
            .filter(
                |e| matches!(&e.step, AuditStep::Model { agent: Some(a), .. } if a == "researcher"),
            )
            .count();
        assert_eq!(child_calls, child.len(), "{audit:?}");
        h.assert_spec_clean();
    });
}

#[test]
fn without_limits_the_sub_agent_runs_to_its_round_limit() {
    block_on(async {
        let h = harness(|_| {});
        researcher_never_done(&h);
        let task = json!({"task": "Tell me the time in many places.", "agent": "researcher"});
        h.script(200, anthropic_tool_use("s1", "spawn", task));
        h.script(200, anthropic_text("Done."));
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let done = invocations(&h, &lane, Limits::default()).await;
        assert_eq!(done.len(), 1);
        let requests = h.llm_requests();
        let told = tool_results(requests.last().unwrap());
        assert!(told[0].0.contains("I stopped after 8 rounds"), "{told:?}");
        assert_eq!(h.sent_texts(), ["Done."]);
    });
}

#[test]
fn a_background_sub_agent_stops_at_the_invocations_end_and_posts_what_it_found() {
    block_on(async {
        let h = harness(|c| {
            c.agents.get_mut("assistant").unwrap().spawn.background = true;
        });
        researcher_never_done(&h);
        let task = json!({"task": "Tell me the time in many places.", "agent": "researcher", "background": true});
        h.script(200, anthropic_tool_use("s1", "spawn", task));
        h.script(200, anthropic_text("I'll post it here."));
        h.deliver("private_text", 1).await;
        let lanes = h.app.enqueue_due().await;
        let tasks = lanes
            .iter()
            .find(|l| l.task_chat().is_some())
            .expect("the task's lane")
            .clone();
        let limits = Limits {
            wall: Some(Duration::from_secs(30)),
            ..Limits::default()
        };
        let done = invocations(&h, &tasks, limits).await;
        for (_, ms) in &done {
            assert!(*ms <= 30_000, "an invocation ran {ms} ms: {done:?}");
        }
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert!(
            sent[1].contains("Background task #1 (researcher) did not finish")
                && sent[1].contains("ran out")
                && sent[1].contains("current_time: 2023"),
            "{sent:?}"
        );
    });
}
