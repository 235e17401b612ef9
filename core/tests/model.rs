//! `/model`: a button per model of the agent's chain; a tap makes one the chat's first
//! choice, kept per chat; "Default" forgets it; people the bot does not serve change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures::{OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::{anthropic_text, openai_text};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire, LLM};

fn tap(update_id: i64, from: i64, data: &str) -> Value {
    json!({"update_id": update_id, "callback_query": {
        "id": format!("cb{update_id}"),
        "from": {"id": from, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "42",
        "data": data,
        "message": {"message_id": 5, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "models"}
    }})
}

/// A harness with both providers' keys: the chain is anthropic, then openai.
fn both() -> Harness {
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let base = format!("{LLM}/v1");
    Harness::with_env(
        Wire::Anthropic,
        config,
        &[("OPENAI_API_KEY", "sk-o"), ("OPENAI_BASE_URL", &base)],
    )
    .unwrap()
}

fn last_model_url(h: &Harness) -> String {
    let requests = h.http.requests();
    let last = requests.iter().rev().find(|r| r.url.starts_with(LLM));
    last.map(|r| r.url.clone()).unwrap_or_default()
}

fn answers(h: &Harness) -> Vec<String> {
    h.calls("answerCallbackQuery")
        .iter()
        .map(|b| b["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_chat_chooses_its_model_and_goes_back_to_the_default() {
    block_on(async {
        let h = both();
        let mut u = clawless_testkit::fixtures::update("private_text", 1);
        u["message"]["text"] = json!("/model");
        h.deliver_raw(&u).await;
        let menu = h.calls("sendMessage").pop().unwrap();
        assert!(menu["text"]
            .as_str()
            .unwrap()
            .contains("anthropic/claude-sonnet-4-5 (the default)"));
        let buttons: Vec<(String, String)> = menu["reply_markup"]["inline_keyboard"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                (
                    row[0]["text"].as_str().unwrap().to_owned(),
                    row[0]["callback_data"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let labels: Vec<&str> = buttons.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            ["anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"]
        );
        // `md:<index>:<tag of the label>`.
        assert!(buttons[0].1.starts_with("md:0:") && buttons[0].1.len() == 13);
        assert!(buttons[1].1.starts_with("md:1:") && buttons[1].1.len() == 13);
        assert_ne!(buttons[0].1[5..], buttons[1].1[5..]);
        let openai = buttons[1].1.clone();

        // Someone the bot does not serve changes nothing.
        h.deliver_raw(&tap(2, STRANGER_ID, &openai)).await;
        assert!(answers(&h)[0].contains("Only people this bot serves"));
        h.script(200, anthropic_text("from anthropic"));
        h.deliver("private_text", 3).await;
        assert!(last_model_url(&h).ends_with("/v1/messages"));

        // The owner picks openai: the next turn asks it first.
        h.deliver_raw(&tap(4, OWNER_ID, &openai)).await;
        assert_eq!(answers(&h)[1], "This chat now uses openai/gpt-4o-mini.");
        h.script(200, openai_text("from openai"));
        h.deliver("private_text", 5).await;
        assert!(
            last_model_url(&h).ends_with("/chat/completions"),
            "{}",
            last_model_url(&h)
        );
        assert_eq!(h.sent_texts().last().unwrap(), "from openai");

        // The menu now says so and offers the default back.
        let mut u = clawless_testkit::fixtures::update("private_text", 6);
        u["message"]["text"] = json!("/model");
        h.deliver_raw(&u).await;
        let menu = h.calls("sendMessage").pop().unwrap();
        assert!(menu["text"]
            .as_str()
            .unwrap()
            .contains("openai/gpt-4o-mini (chosen with /model)"));
        assert_eq!(
            menu["reply_markup"]["inline_keyboard"][2][0]["callback_data"],
            "md:-"
        );
        h.deliver_raw(&tap(7, OWNER_ID, "md:-")).await;
        assert_eq!(
            answers(&h)[2],
            "Back to the default: anthropic/claude-sonnet-4-5."
        );
        h.script(200, anthropic_text("anthropic again"));
        h.deliver("private_text", 8).await;
        assert!(last_model_url(&h).ends_with("/v1/messages"));

        // A button of a model no longer configured is refused, and one of another agent's
        // list (another model at that index: its tag differs).
        h.deliver_raw(&tap(9, OWNER_ID, "md:7")).await;
        let refused = "That model is not one you can pick here now: send /model again.";
        assert_eq!(answers(&h)[3], refused);
        h.deliver_raw(&tap(10, OWNER_ID, "md:1:00000000")).await;
        assert_eq!(answers(&h)[4], refused);
        h.script(200, anthropic_text("still the default"));
        h.deliver("private_text", 11).await;
        assert!(last_model_url(&h).ends_with("/v1/messages"));
        h.assert_spec_clean();
    });
}

#[test]
fn a_chosen_model_that_fails_falls_back_to_the_rest_of_the_chain() {
    block_on(async {
        let h = both();
        h.deliver_raw(&tap(1, OWNER_ID, "md:1")).await;
        // openai fails all its attempts; anthropic answers.
        for _ in 0..3 {
            h.script(500, json!({"error": "down"}));
        }
        h.script(200, anthropic_text("fallback"));
        h.deliver("private_text", 2).await;
        assert_eq!(h.sent_texts().last().unwrap(), "fallback");
    });
}

#[test]
fn a_failure_names_the_provider_that_failed_last_in_the_chats_order() {
    block_on(async {
        let h = both();
        h.deliver_raw(&tap(1, OWNER_ID, "md:1")).await;
        // Every call fails: openai (chosen) first, then anthropic, on every try of the job.
        for _ in 0..40 {
            h.script(500, json!({"error": "down"}));
        }
        h.deliver("private_text", 2).await;
        let lane = clawless_core::Lane::of_chat(&"main".into(), OWNER_ID);
        for _ in 0..5 {
            h.clock.advance(std::time::Duration::from_secs(120));
            h.drain(&lane).await;
        }
        let sent = h.sent_texts();
        let last = sent.last().unwrap();
        assert!(
            last.contains("(anthropic)") && !last.contains("(openai)"),
            "{sent:?}"
        );
    });
}
