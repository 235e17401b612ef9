//! Whole-flow tests on the Gemini wire: a Telegram turn with a tool round trip through the
//! native `generateContent` API (streamed in private chats), its thought signature echoed, the
//! key in its header.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::{Config, Drained};
use clawless_platform::Clock;
use clawless_testkit::fixtures;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire, LLM};

fn gemini_harness() -> Harness {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    config.agents.get_mut("assistant").unwrap().models = vec!["gemini/gemini-2.5-flash".into()];
    Harness::with_env(
        Wire::Anthropic,
        config,
        &[
            ("GEMINI_API_KEY", "AIza-flow-test"),
            ("GEMINI_BASE_URL", LLM),
        ],
    )
    .unwrap()
}

fn text(t: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10}
    })
}

#[test]
fn a_tool_round_trip_over_gemini_echoes_the_thought_signature() {
    block_on(async {
        let h = gemini_harness();
        h.script(
            200,
            json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "current_time", "args": {"utc_offset": "+02:00"}},
                 "thoughtSignature": "U0lHLTE="}
            ]}, "finishReason": "STOP"}], "responseId": "a"}),
        );
        h.script(200, text("It is **Tuesday**."));
        h.script(200, text("Still Tuesday."));
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["It is <b>Tuesday</b>."]);

        let requests = h.http.requests();
        let llm: Vec<_> = requests.iter().filter(|r| r.url.starts_with(LLM)).collect();
        // A private chat's reply streams (this server answers the streamed request whole).
        assert_eq!(
            llm[0].url,
            format!("{LLM}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        );
        assert_eq!(
            llm[0].header_value("x-goog-api-key"),
            Some("AIza-flow-test")
        );
        assert!(!llm[0].url.contains("AIza"));

        let bodies = h.llm_requests();
        assert!(bodies[0]["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("assistant"));
        assert!(bodies[0]["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "current_time"));
        let contents = &bodies[1]["contents"];
        assert_eq!(contents[1]["role"], "model");
        assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "U0lHLTE=");
        let response = &contents[2]["parts"][0]["functionResponse"];
        assert_eq!(contents[2]["role"], "user");
        assert_eq!(response["name"], "current_time");
        assert!(
            response["response"]["output"]
                .as_str()
                .unwrap()
                .contains("2023-11-15"),
            "{response}"
        );

        // The next turn carries the history, the call and its signature included.
        let mut second = fixtures::update("private_text", 2);
        second["message"]["text"] = json!("And now?");
        h.deliver_raw(&second).await;
        assert_eq!(h.sent_texts().last().unwrap(), "Still Tuesday.");
        let third = &h.llm_requests()[2]["contents"];
        let roles: Vec<&str> = third
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "model", "user", "model", "user"]);
        assert_eq!(third[1]["parts"][0]["thoughtSignature"], "U0lHLTE=");
        h.assert_spec_clean();
    });
}

#[test]
fn a_blocked_prompt_ends_in_a_reply_without_the_key() {
    block_on(async {
        let h = gemini_harness();
        for _ in 0..4 {
            h.script(200, json!({"promptFeedback": {"blockReason": "SAFETY"}}));
        }
        let lane = h.accept_only("private_text", 1).await.unwrap();
        // The inbox tries a failed turn again before it tells the user.
        while let Drained::RetryAt(at) = h.drain(&lane).await {
            let now = h.clock.now_ms();
            h.clock
                .advance(std::time::Duration::from_millis(at.saturating_sub(now)));
        }
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].contains("(gemini)"), "{sent:?}");
        assert!(!sent[0].contains("AIza"), "{sent:?}");
        h.assert_spec_clean();
    });
}

/// Google answers a bad key with 400 `API_KEY_INVALID`, not 401: the person is told in one
/// sentence that Gemini refused the key (not that it is down, and no JSON), and `doctor`
/// names the provider and the variable to set.
#[test]
fn a_refused_gemini_key_is_said_as_one_not_as_gemini_down() {
    block_on(async {
        let h = gemini_harness();
        for _ in 0..4 {
            h.script(400, clawless_testkit::llm::gemini_key_invalid());
        }
        let lane = h.accept_only("private_text", 1).await.unwrap();
        while let Drained::RetryAt(at) = h.drain(&lane).await {
            let now = h.clock.now_ms();
            h.clock
                .advance(std::time::Duration::from_millis(at.saturating_sub(now)));
        }
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].contains("(gemini) refused my API key"), "{sent:?}");
        for raw in [
            "{",
            "API_KEY_INVALID",
            "INVALID_ARGUMENT",
            "HTTP 400",
            "AIza",
        ] {
            assert!(!sent[0].contains(raw), "{raw} in {sent:?}");
        }

        h.script(400, clawless_testkit::llm::gemini_key_invalid());
        let checks = h
            .app
            .admin()
            .doctor(clawless_core::doctor::Delivery::Either)
            .await;
        let model = checks
            .iter()
            .find(|c| c.name == "model gemini/gemini-2.5-flash")
            .unwrap();
        assert_eq!(model.status, clawless_core::doctor::Status::Fail);
        assert_eq!(
            model.detail,
            "gemini refused the key: set a valid one in GEMINI_API_KEY"
        );
        h.assert_spec_clean();
    });
}
