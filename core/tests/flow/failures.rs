//! Whole-flow tests of failures: the model rate-limited or down, Telegram failing a part of a
//! reply, refusing its HTML or asking to wait, and a drainer that lost its lane while the
//! model thought.

use clawless_core::Drained;
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::json;

use super::support::{self, Harness, Wire};

#[test]
fn rate_limit_then_success() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script_429("2");
        h.script(200, anthropic_text("after waiting"));
        let before = h.clock_now();
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["after waiting"]);
        assert_eq!(h.llm_requests().len(), 2);
        assert!(h.clock_now() - before >= 2000, "retry-after was honoured");
    });
}

#[test]
fn model_down_retries_then_tells_the_user() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        let mut rounds = 0;
        loop {
            match h.drain(&lane).await {
                Drained::RetryAt(at) => {
                    assert!(h.sent_texts().is_empty(), "no reply while retries remain");
                    h.clock
                        .advance(std::time::Duration::from_millis(at - h.clock_now()));
                    rounds += 1;
                }
                Drained::Idle => break,
                Drained::Busy => panic!("lease left behind"),
                Drained::HandOff => panic!("nothing limits this drain"),
            }
        }
        assert_eq!(rounds, 3, "max_attempts 4 = 3 retries");
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1, "never silent");
        assert!(sent[0].starts_with("Sorry, I could not answer"));
        // The question is not lost: the next turn's history holds it, marked unanswered.
        let asked = h.llm_requests()[0]["messages"][0].clone();
        h.script(200, anthropic_text("Now I can."));
        h.deliver("private_text", 2).await;
        let next = h.llm_requests().pop().unwrap();
        let messages = next["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert_eq!(messages[0], asked);
        assert_eq!(messages[1]["role"], "assistant");
        let note = messages[1]["content"].to_string();
        assert!(note.contains("[Not answered:"), "{note}");
        h.assert_spec_clean();
    });
}

#[test]
fn crash_after_answer_resends_only_missing_parts_without_calling_model_again() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let long = (0..8)
            .map(|i| format!("Paragraph {i}: {}", "lorem ipsum ".repeat(70)))
            .collect::<Vec<_>>()
            .join("\n\n");
        h.script(200, anthropic_text(&long));
        let bad_gateway = json!({"ok": false, "error_code": 502, "description": "Bad Gateway"});
        // The first part goes through; the second meets a Telegram outage twice.
        h.tg_script.lock().unwrap().extend([
            None,
            Some((502, bad_gateway.clone())),
            Some((502, bad_gateway)),
        ]);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        assert!(matches!(h.drain(&lane).await, Drained::RetryAt(_)));
        assert_eq!(h.sent_texts().len(), 2, "one delivered, one refused");
        h.clock.advance(std::time::Duration::from_secs(3600));
        assert!(matches!(h.drain(&lane).await, Drained::RetryAt(_)));
        h.clock.advance(std::time::Duration::from_secs(3600));
        assert_eq!(h.drain(&lane).await, Drained::Idle);
        assert_eq!(h.llm_requests().len(), 1, "the model was called once");
        let sent = h.sent_texts();
        let parts = sent.len() - 2;
        assert!(parts >= 2, "a long reply is split");
        assert_eq!(sent[1], sent[2], "the refused part is the one retried");
        let delivered = [&sent[..1], &sent[3..]].concat().join("\n");
        for i in 0..8 {
            assert_eq!(
                delivered.matches(&format!("Paragraph {i}:")).count(),
                1,
                "paragraph {i} delivered exactly once"
            );
        }
        h.assert_spec_clean();
    });
}

#[test]
fn html_refused_is_resent_as_plain_text() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("**bold** move"));
        h.tg_script.lock().unwrap().push_back(Some((400, json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: unexpected end tag"}))));
        h.deliver("private_text", 1).await;
        let sent = h.calls("sendMessage");
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1]["text"], "bold move");
        assert!(sent[1].get("parse_mode").is_none());
    });
}

#[test]
fn telegram_429_is_waited_out() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("hi"));
        h.tg_script.lock().unwrap().push_back(Some((429, json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": {"retry_after": 3}}))));
        let before = h.clock_now();
        h.deliver("private_text", 1).await;
        assert_eq!(h.calls("sendMessage").len(), 2);
        assert!(h.clock_now() - before >= 3000);
    });
}

trait Now {
    fn clock_now(&self) -> u64;
}
impl Now for Harness {
    fn clock_now(&self) -> u64 {
        use clawless_platform::Clock;
        self.clock.now_ms()
    }
}

#[test]
fn a_drainer_that_lost_its_lane_never_sends() {
    use futures::FutureExt;
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let lane = h.accept_only("private_text", 1).await.unwrap();
        // While the model thinks, the lease lapses and another drainer takes the lane.
        let kv = h.platform.kv.clone();
        let lease_key = format!("lease/{lane}");
        h.http.route(support::LLM, move |_| {
            kv.put(&lease_key, b"another-drainer", None)
                .now_or_never()
                .unwrap()
                .unwrap();
            Ok(clawless_platform::HttpResponse::json(
                200,
                &anthropic_text("stale answer"),
            ))
        });
        assert_eq!(h.drain(&lane).await, Drained::Busy);
        assert!(h.sent_texts().is_empty(), "the stale drainer sent nothing");
        assert!(
            h.head_job(&lane).await.unwrap().checkpoint().is_none(),
            "nor saved its answer"
        );
        // The other drainer goes away; the job is answered once.
        h.platform
            .kv
            .delete(&format!("lease/{lane}"))
            .await
            .unwrap();
        h.http.route(support::LLM, |_| {
            Ok(clawless_platform::HttpResponse::json(
                200,
                &anthropic_text("fresh answer"),
            ))
        });
        assert_eq!(h.drain(&lane).await, Drained::Idle);
        assert_eq!(h.sent_texts(), ["fresh answer"]);
    });
}
