//! Compaction on the whole flow: a conversation past its token budget keeps its recent turns,
//! its older turns become a summary the model reads first, and their facts are in memory;
//! `/compact` and `/context` on demand; a failing model still leaves a compacted session.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures;
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::Value;
use support::{daily, Harness, Wire};

fn harness(compact_tokens: u64) -> Harness {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    config.session.compact_tokens = compact_tokens;
    config.session.keep_recent = 2;
    Harness::with_config(Wire::Anthropic, config)
}

async fn say(h: &Harness, id: i64, text: &str) {
    let mut u = fixtures::update("private_text", id);
    u["message"]["text"] = text.into();
    u["message"]["message_id"] = (100 + id).into();
    assert_eq!(h.deliver_raw(&u).await, 200);
}

/// Every text the model was given in the request's messages, in order.
fn texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

const FACTS: &str =
    "- Ana, the user's sister, lives in Lisbon; her birthday is 12 March\n- The user prefers tea";
const SUMMARY: &str = "- The user told me about their sister Ana and that they prefer tea";

#[test]
fn a_long_conversation_is_compacted_keeping_facts_and_recent_turns() {
    block_on(async {
        let h = harness(300);
        h.script(200, anthropic_text("Noted!"));
        say(
            &h,
            1,
            "My sister Ana lives in Lisbon; her birthday is 12 March.",
        )
        .await;
        h.script(200, anthropic_text("Got it."));
        say(&h, 2, "Also, I prefer tea to coffee.").await;
        assert_eq!(h.llm_requests().len(), 2, "under the budget: no compaction");

        // This turn's long answer passes the budget: after it is delivered, two more model
        // calls: the facts, then the summary.
        let long = format!("It is sunny. {}", "Clear skies all day. ".repeat(80));
        h.script(200, anthropic_text(&long));
        h.script(200, anthropic_text(FACTS));
        h.script(200, anthropic_text(SUMMARY));
        say(&h, 3, "What's the weather like?").await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 5);
        assert!(support::system_text(&requests[3]).contains("worth remembering"));
        assert!(texts(&requests[3])[0].contains("My sister Ana lives in Lisbon"));
        assert!(support::system_text(&requests[4]).contains("compact the history"));
        assert_eq!(h.sent_texts().len(), 3, "compaction sends nothing");
        assert!(h.sent_texts()[2].starts_with("It is sunny."));

        // The facts are in memory.
        let note = daily(&h).await;
        assert!(
            note.contains("## Kept from a compacted conversation"),
            "{note}"
        );
        assert!(
            note.contains("Ana, the user's sister, lives in Lisbon"),
            "{note}"
        );
        assert!(note.contains("prefers tea"), "{note}");

        // The next turn reads the summary first, then the recent turns word for word; the
        // compacted turns are gone from the history.
        h.script(200, anthropic_text("On 12 March."));
        say(&h, 4, "When is Ana's birthday?").await;
        let next = h.llm_requests()[5].clone();
        let seen = texts(&next);
        assert!(
            seen[0].starts_with("[Summary of the earlier part of this conversation"),
            "{seen:?}"
        );
        assert!(seen[0].contains(SUMMARY));
        assert!(
            !seen.iter().any(|t| t.contains("I prefer tea to coffee")),
            "{seen:?}"
        );
        assert!(!seen.iter().any(|t| t == "Noted!"));
        assert_eq!(seen[1], "What's the weather like?");
        assert!(seen[2].starts_with("It is sunny."));
        // The question, then what memory recalled for it (the facts the compaction kept).
        assert_eq!(seen[seen.len() - 2], "When is Ana's birthday?");
        assert!(support::recalled(&next).contains("12 March"), "{seen:?}");
        h.assert_spec_clean();
    });
}

#[test]
fn compact_and_context_on_demand() {
    block_on(async {
        let h = harness(12_000);
        h.script(200, anthropic_text("Hello!"));
        say(&h, 1, "Hi, I am planning a trip to Porto in May.").await;
        h.script(200, anthropic_text("Lovely."));
        say(&h, 2, "I will travel by train.").await;
        say(&h, 3, "/context").await;
        let context = h.sent_texts().pop().unwrap();
        assert!(context.contains("History: 4 messages"), "{context}");
        assert!(
            context.contains("No older turns summarised yet"),
            "{context}"
        );
        assert_eq!(h.llm_requests().len(), 2, "/context asks no model");

        h.script(200, anthropic_text("- Trip to Porto in May"));
        h.script(200, anthropic_text("- Planning a trip to Porto in May"));
        say(&h, 4, "/compact").await;
        let reply = h.sent_texts().pop().unwrap();
        assert!(reply.starts_with("Compacted: 2 older messages"), "{reply}");
        assert!(reply.contains("went to memory"), "{reply}");
        assert!(daily(&h).await.contains("Trip to Porto in May"));

        say(&h, 5, "/context").await;
        let context = h.sent_texts().pop().unwrap();
        assert!(context.contains("History: 2 messages"), "{context}");
        assert!(
            context.contains("Summary of older turns: about"),
            "{context}"
        );

        // Again at once: only the recent turn is left, nothing to fold.
        say(&h, 6, "/compact").await;
        let reply = h.sent_texts().pop().unwrap();
        assert!(reply.starts_with("Nothing to compact yet"), "{reply}");
    });
}

#[test]
fn a_failing_model_still_compacts_with_the_topics() {
    block_on(async {
        let h = harness(12_000);
        h.script(200, anthropic_text("Sure."));
        say(&h, 1, "Remind me how sourdough starters work.").await;
        h.script(200, anthropic_text("Flour and water."));
        say(&h, 2, "And how often to feed it?").await;
        // No answers scripted: every model call of the compaction fails.
        say(&h, 3, "/compact").await;
        let reply = h.sent_texts().pop().unwrap();
        assert!(reply.starts_with("Compacted: 2 older messages"), "{reply}");
        assert!(reply.contains("topics only"), "{reply}");
        assert!(!reply.contains("went to memory"));

        h.script(200, anthropic_text("Daily."));
        say(&h, 4, "Thanks!").await;
        let seen = texts(&h.llm_requests().pop().unwrap());
        assert!(
            seen[0].contains("sourdough"),
            "the topics stand in: {seen:?}"
        );
        assert_eq!(seen[1], "And how often to feed it?");
    });
}

#[test]
fn turns_larger_than_the_summarisers_window_all_reach_the_summary() {
    block_on(async {
        // Six turns of two 3,000-character messages: the ten folded (30,000 characters) are
        // more than the summariser reads at once (24,000).
        let h = harness(8_800);
        let long = |tag: &str| format!("{tag} {}", "word ".repeat(600));
        for turn in 1..=6 {
            h.script(200, anthropic_text(&long(&format!("ANSWER-{turn:02}"))));
            if turn == 6 {
                // The compaction after the sixth answer: its facts, then the two pieces.
                h.script(200, anthropic_text("- facts"));
                h.script(200, anthropic_text("- first part"));
                h.script(200, anthropic_text("- both parts"));
            }
            say(&h, turn, &long(&format!("TURN-{turn:02}"))).await;
        }
        let compactions: Vec<Value> = h
            .llm_requests()
            .into_iter()
            .filter(|r| r["system"].to_string().contains("compact the history"))
            .collect();
        assert_eq!(compactions.len(), 2, "two pieces, a summary of summaries");
        let read: Vec<String> = compactions.iter().flat_map(texts).collect();
        for turn in 1..=5 {
            let (q, a) = (format!("TURN-{turn:02}"), format!("ANSWER-{turn:02}"));
            assert!(
                read.iter().any(|t| t.contains(&q)),
                "{q} reached the summariser"
            );
            assert!(
                read.iter().any(|t| t.contains(&a)),
                "{a} reached the summariser"
            );
        }
        // The second piece is folded into what the first gave.
        assert!(texts(&compactions[1])[0].contains("Summary so far:\n- first part"));
    });
}
