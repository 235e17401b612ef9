//! Turns longer than an invocation: each drain is one invocation with its limits (a Worker's
//! 30 s of wait-until work, a free plan's 50 outbound requests), as the serverless shells
//! drain. A turn that does not fit is kept in its job and handed on (`Drained::HandOff`), and
//! the next invocation goes on from there: every tool once, no finished model call made again,
//! the answer once, and no invocation past its limits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use clawless_core::allowance::Limits;
use clawless_core::{Config, Drained};
use clawless_platform::{Clock, HttpResponse};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use clawless_testkit::mcp::{waits, McpFake};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

const MCP: &str = "https://mcp.example.com/mcp";

/// A harness whose agent has the test MCP server's `wait` as `slow__wait`, safe to run
/// unasked; a call takes its seconds of the fake clock.
fn harness() -> (Harness, Arc<McpFake>) {
    let mut files = clawless_core::config::embedded();
    let agent = files.0.get("agents.d/assistant.yaml").unwrap().clone();
    let agent = format!(
        "{agent}\nmcp:\n  - name: slow\n    url_env: DEMO_MCP_URL\n    level: safe\n    tools: [wait]\n"
    );
    files.0.insert("agents.d/assistant.yaml".into(), agent);
    let config = Config::load(&files).unwrap();
    let h = Harness::with_env(Wire::Anthropic, config, &[("DEMO_MCP_URL", MCP)]).unwrap();
    let fake = Arc::new(McpFake::new());
    let server = fake.clone();
    let clock = h.clock.clone();
    h.http.route(MCP, move |req| {
        if let Some(secs) = waits(&req.body) {
            clock.advance(Duration::from_secs(secs));
        }
        let (status, headers, body) =
            server.handle(|name| req.header_value(name).map(str::to_owned), &req.body);
        let mut resp = HttpResponse::new(status, body);
        for (k, v) in headers {
            resp = resp.with_header(&k, v);
        }
        Ok(resp)
    });
    (h, fake)
}

/// Scripts `rounds` model answers each asking for a 10 s `wait`, then the answer.
fn six_rounds(h: &Harness, rounds: usize) {
    for i in 0..rounds {
        let input = json!({"seconds": 10, "round": i});
        h.script(
            200,
            anthropic_tool_use(&format!("toolu_{i}"), "slow__wait", input),
        );
    }
    h.script(200, anthropic_text("All six done."));
}

/// What one invocation did: how it ended, the fake clock's time it took, the requests it made.
struct Invocation {
    ended: Drained,
    ms: u64,
    requests: u64,
}

/// Drains the lane invocation by invocation, each within `limits`, until it is not handed on.
async fn invocations(h: &Harness, lane: &clawless_core::Lane, limits: Limits) -> Vec<Invocation> {
    let mut done = Vec::new();
    loop {
        let started = h.clock.now_ms();
        let before = h.app.outbound_requests();
        let ended = h
            .app
            .drain_within(lane, Duration::from_secs(15), limits)
            .await
            .unwrap();
        done.push(Invocation {
            ended,
            ms: h.clock.now_ms() - started,
            requests: h.app.outbound_requests() - before,
        });
        if ended != Drained::HandOff {
            return done;
        }
        assert!(done.len() < 10, "handed on forever");
    }
}

#[test]
fn six_ten_second_tools_fit_in_thirty_second_invocations() {
    block_on(async {
        let (h, mcp) = harness();
        six_rounds(&h, 6);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let limits = Limits {
            wall: Some(Duration::from_secs(30)),
            requests: None,
            ..Limits::default()
        };
        let done = invocations(&h, &lane, limits).await;
        let ends: Vec<Drained> = done.iter().map(|i| i.ended).collect();
        assert_eq!(
            ends,
            [Drained::HandOff, Drained::HandOff, Drained::Idle],
            "two tools an invocation"
        );
        for i in &done {
            assert!(i.ms <= 30_000, "an invocation ran {} ms", i.ms);
        }
        let waits = mcp.calls().iter().filter(|(n, _)| n == "wait").count();
        assert_eq!(waits, 6, "every tool once");
        assert_eq!(h.llm_requests().len(), 7, "no model call made twice");
        assert_eq!(h.sent_texts(), vec!["All six done."], "answered once");
        // The turn's steps are written once, with the answer.
        let main = clawless_core::ConnectorId::new("main");
        let audit = h
            .app
            .admin()
            .audit_entries(&main, 86_400_000, None, 100)
            .await
            .unwrap();
        let tools = audit
            .iter()
            .filter(|e| matches!(e.step, clawless_core::audit::Step::Tool { .. }))
            .count();
        assert_eq!(tools, 6, "{audit:?}");
        h.assert_spec_clean();
    });
}

#[test]
fn requests_are_counted_per_invocation_and_never_pass_the_limit() {
    block_on(async {
        let (h, mcp) = harness();
        six_rounds(&h, 6);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let limits = Limits {
            wall: None,
            requests: Some(20),
            ..Limits::default()
        };
        let done = invocations(&h, &lane, limits).await;
        assert!(done.len() >= 2, "twenty requests do not hold six rounds");
        for i in &done {
            assert!(
                i.requests <= 20,
                "an invocation made {} requests",
                i.requests
            );
        }
        let waits = mcp.calls().iter().filter(|(n, _)| n == "wait").count();
        assert_eq!(waits, 6, "every tool once");
        assert_eq!(h.llm_requests().len(), 7, "no model call made twice");
        assert_eq!(h.sent_texts(), vec!["All six done."], "answered once");
    });
}

#[test]
fn without_limits_the_turn_runs_through() {
    block_on(async {
        let (h, mcp) = harness();
        six_rounds(&h, 6);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let done = invocations(&h, &lane, Limits::default()).await;
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].ended, Drained::Idle);
        assert_eq!(mcp.calls().len(), 6);
        assert_eq!(h.sent_texts(), vec!["All six done."]);
    });
}

/// A photo turn handed on before its first model call (the invocation's requests spent on
/// reading it): the invocation that goes on reads the photo again, and the model sees it, not
/// the line history keeps (found with the Worker's queue: an album's images were lost so).
#[test]
fn a_photo_turn_handed_on_before_the_model_still_shows_the_model_its_image() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("A tiny jpeg."));
        let u = photo_update(&h);
        let reply = h
            .app
            .handle_webhook("main", Some(support::SECRET), u.to_string().as_bytes())
            .await;
        let lane = reply.lane.unwrap();
        let mut ends = Vec::new();
        for requests in [3, 50] {
            let limits = Limits {
                requests: Some(requests),
                ..Default::default()
            };
            ends.push(
                h.app
                    .drain_within(&lane, Duration::from_secs(15), limits)
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(
            ends,
            [
                clawless_core::Drained::HandOff,
                clawless_core::Drained::Idle
            ],
            "handed on once"
        );
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 1, "one model call");
        let content = &requests[0]["messages"][0]["content"];
        assert_eq!(content[0]["type"], "image", "{content}");
        assert_eq!(h.sent_texts(), vec!["A tiny jpeg."]);
    });
}

/// A photo turn whose first model call fails (every attempt of it) is retried later: the retry
/// shows the model the image again (its media read again: the model never saw them), and the
/// audit trail keeps the failed call's steps beside the retry's (its entries numbered after
/// them, not over them).
#[test]
fn a_photo_turn_whose_first_model_call_failed_still_shows_the_model_its_image() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        for _ in 0..3 {
            h.script(500, json!({"error": "down"}));
        }
        let u = photo_update(&h);
        h.deliver_raw(&u).await;
        assert!(h.sent_texts().is_empty(), "not answered yet");
        let failed = h.llm_requests().len();
        assert!(failed >= 1);
        let audit_before = h.platform.kv.list("audit/", 100).await.unwrap();
        assert!(
            !audit_before.is_empty(),
            "the failed call is in the audit trail"
        );
        let mut kept = Vec::new();
        for key in &audit_before {
            kept.push(h.platform.kv.get(key).await.unwrap());
        }
        h.script(200, anthropic_text("A tiny jpeg."));
        let owner = clawless_testkit::fixtures::OWNER_ID;
        let lane = clawless_core::Lane::of_chat(&"main".into(), owner);
        h.clock.advance(Duration::from_secs(60));
        h.drain(&lane).await;
        assert_eq!(h.sent_texts(), vec!["A tiny jpeg."]);
        let requests = h.llm_requests();
        assert_eq!(requests.len(), failed + 1, "one more call");
        let content = &requests[failed]["messages"][0]["content"];
        assert_eq!(content[0]["type"], "image", "{content}");
        let audit_after = h.platform.kv.list("audit/", 100).await.unwrap();
        for (key, before) in audit_before.iter().zip(kept) {
            let now = h.platform.kv.get(key).await.unwrap();
            assert_eq!(now, before, "{key} not written over");
        }
        assert!(
            audit_after.len() > audit_before.len(),
            "the retry's steps too"
        );
        // One turn's entries are numbered on: the retry's follow the failed attempt's.
        let mut seqs = Vec::new();
        for key in &audit_after {
            let entry = h.platform.kv.get(key).await.unwrap().unwrap();
            let entry: serde_json::Value = serde_json::from_slice(&entry).unwrap();
            seqs.push(entry["seq"].as_u64().unwrap());
        }
        seqs.sort();
        let numbered: Vec<u64> = (0..seqs.len() as u64).collect();
        assert_eq!(seqs, numbered, "{audit_after:?}");
    });
}

/// The owner's photo "What is this?" (file `p1`, a tiny JPEG the fake Bot API serves).
fn photo_update(h: &Harness) -> serde_json::Value {
    let jpeg: &[u8] = b"\xff\xd8\xff\xe0 a tiny jpeg";
    h.file("p1", jpeg);
    let mut u = clawless_testkit::fixtures::update("private_text", 1);
    let m = u["message"].as_object_mut().unwrap();
    m.remove("text");
    m.remove("entities");
    m.insert("caption".into(), json!("What is this?"));
    m.insert(
        "photo".into(),
        json!([{"file_id": "p1", "file_unique_id": "l", "width": 800, "height": 600, "file_size": jpeg.len()}]),
    );
    u
}
