//! Memory through the whole flow: what the assistant writes on its own (session summaries,
//! daily consolidation), recall of a fact across `/new`, and remote embeddings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::{daily, Harness, Wire};

#[test]
fn session_summary_nothing_fallback_and_once() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // The model finds nothing worth keeping: nothing is written.
        h.script(200, anthropic_text("one"));
        h.deliver("private_text", 1).await;
        h.script(200, anthropic_text("NOTHING"));
        h.deliver("private_command_new", 2).await;
        assert_eq!(daily(&h).await, "");
        // An empty session needs no summary at all.
        let before = h.llm_requests().len();
        h.deliver("private_command_new", 3).await;
        assert_eq!(
            h.llm_requests().len(),
            before,
            "no model call for an empty session"
        );
        // The model fails: the note still says what was talked about.
        h.script(200, anthropic_text("two"));
        let mut u = fixtures::update("private_text", 4);
        u["message"]["text"] = json!("plan a trip to Porto");
        h.deliver_raw(&u).await;
        h.script(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        );
        h.deliver("private_command_new", 5).await;
        assert_eq!(
            daily(&h).await,
            "## Session summary\n- Talked about: plan a trip to Porto\n"
        );
        assert!(
            h.sent_texts().last().unwrap().contains("fresh"),
            "/new still answers"
        );
    });
}

#[test]
fn an_idle_session_is_summarised_when_the_next_message_starts_a_new_one() {
    block_on(async {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        config.session.idle_minutes = 30;
        let h = Harness::with_config(Wire::Anthropic, config);
        h.script(200, anthropic_text("one"));
        h.deliver("private_text", 1).await;
        h.clock.advance(std::time::Duration::from_secs(31 * 60));
        h.script(200, anthropic_text("- Said hello before lunch."));
        h.script(200, anthropic_text("two"));
        h.deliver("private_text", 2).await;
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), 3);
        assert_eq!(
            reqs[2]["messages"].as_array().unwrap().len(),
            1,
            "the idle session was dropped"
        );
        assert_eq!(
            daily(&h).await,
            "## Session summary\n- Said hello before lunch.\n"
        );
        assert_eq!(h.sent_texts().last().unwrap(), "two");
    });
}

#[test]
fn consolidation_promotes_daily_notes_once() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let files = &h.platform.files;
        files
            .write(
                "memory/assistant/main/u111111111/MEMORY.md",
                b"- Has a cat called Miso.\n",
            )
            .await
            .unwrap();
        // Notes from two days back and from today; only past days are consolidated.
        files
            .write(
                "memory/assistant/main/u111111111/memory/2023-11-12.md",
                b"- Sister Ana moved to Lisbon.\n- Had pasta.\n",
            )
            .await
            .unwrap();
        files
            .write(
                "memory/assistant/main/u111111111/memory/2023-11-14.md",
                b"- Today.\n",
            )
            .await
            .unwrap();
        h.script(200, anthropic_text("- Sister Ana lives in Lisbon."));
        h.app.consolidate().await;
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), 1, "one past note, one model call");
        let input = reqs[0]["messages"][0]["content"].to_string();
        assert!(
            input.contains("Miso") && input.contains("Sister Ana moved"),
            "{input}"
        );
        let memory = String::from_utf8(
            files
                .read("memory/assistant/main/u111111111/MEMORY.md")
                .await
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            memory,
            "- Has a cat called Miso.\n\n## From the notes of 2023-11-12\n- Sister Ana lives in Lisbon.\n"
        );
        assert!(
            !h.app
                .memory_store()
                .search(
                    &"assistant/main/u111111111".into(),
                    "where does Ana live Lisbon"
                )
                .await
                .unwrap()
                .is_empty(),
            "MEMORY.md is re-indexed"
        );
        // Again the same day: nothing to do. The next day: the note is not done twice.
        h.app.consolidate().await;
        h.clock.advance(std::time::Duration::from_secs(86_400));
        h.script(200, anthropic_text("NOTHING"));
        h.app.consolidate().await;
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), 2, "only yesterday's note (2023-11-14) is new");
        assert!(reqs[1]["messages"][0]["content"]
            .to_string()
            .contains("Today."));
    });
}

#[test]
fn a_fact_told_before_new_is_recalled_after_it() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        // Session 1: the user tells a fact; the model saves it with memory_write.
        h.script(
            200,
            anthropic_tool_use(
                "toolu_m",
                "memory_write",
                json!({"content": "The user's cat is called Miso.", "target": "long_term"}),
            ),
        );
        h.script(200, anthropic_text("Noted!"));
        let mut tell = fixtures::update("private_text", 1);
        tell["message"]["text"] = json!("Remember: my cat is called Miso.");
        h.deliver_raw(&tell).await;
        let saved = h
            .platform
            .files
            .read("memory/assistant/main/u111111111/MEMORY.md")
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(saved).unwrap(),
            "- The user's cat is called Miso.\n",
            "memory is a Markdown file"
        );
        // A fresh session.
        h.deliver("private_command_new", 2).await;
        // Session 2: the question arrives with the memory recalled into the system prompt.
        h.script(200, anthropic_text("Your cat is Miso."));
        let mut ask = fixtures::update("private_text", 3);
        ask["message"]["text"] = json!("What is my cat called?");
        h.deliver_raw(&ask).await;
        let last = h.llm_requests().pop().unwrap();
        assert_eq!(
            last["messages"].as_array().unwrap().len(),
            1,
            "no history after /new"
        );
        // After the question, not in the instructions, which stay the same for the cache.
        let recalled = support::recalled(&last);
        assert!(recalled.contains("Miso"), "{last}");
        assert!(!support::system_text(&last).contains("Relevant memories"));
        assert!(
            !h.llm_requests()[0]
                .to_string()
                .contains("Relevant memories"),
            "nothing recalled before it was saved"
        );
        assert_eq!(h.sent_texts().last().unwrap(), "Your cat is Miso.");
        // Another connector or agent scope sees nothing: the memory is partitioned.
        assert!(h
            .app
            .memory_store()
            .search(&"assistant/other/u111111111".into(), "cat Miso")
            .await
            .unwrap()
            .is_empty());
    });
}

#[test]
fn openai_embeddings_when_configured() {
    block_on(async {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        config.memory.embedder = "openai".into();
        let h = Harness::with_config(Wire::OpenAi, config.clone());
        h.http
            .route(format!("{}/v1/embeddings", support::LLM), |req| {
                let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
                assert_eq!(body["model"], "text-embedding-3-small");
                assert_eq!(body["dimensions"], 384);
                let data: Vec<_> = body["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .map(|(i, _)| {
                        let mut v = vec![0.01f32; 384];
                        v[i % 384] = 1.0;
                        json!({"index": i, "embedding": v})
                    })
                    .collect();
                Ok(clawless_platform::HttpResponse::json(
                    200,
                    &json!({"data": data}),
                ))
            });
        h.platform
            .files
            .write(
                "memory/assistant/main/u111111111/MEMORY.md",
                b"- Ana lives in Lisbon.\n",
            )
            .await
            .unwrap();
        assert_eq!(
            h.app
                .memory_store()
                .reindex(&"assistant/main/u111111111".into())
                .await
                .unwrap(),
            1
        );
        let hits = h
            .app
            .memory_store()
            .search(&"assistant/main/u111111111".into(), "Ana Lisbon")
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        let calls: Vec<_> = h
            .http
            .requests()
            .into_iter()
            .filter(|r| r.url.ends_with("/v1/embeddings"))
            .collect();
        assert!(
            calls.len() >= 2,
            "the file and the query were embedded remotely"
        );
        assert_eq!(
            calls[0].header_value("authorization"),
            Some("Bearer sk-openai-test")
        );

        // Without a key the app refuses to start, naming the setting.
        let (platform, _, _) = clawless_platform::Platform::in_memory();
        let err = clawless_core::App::new(platform, config, &clawless_core::Env::new(), "t")
            .err()
            .unwrap();
        assert_eq!(err.field, "memory.embedder");
    });
}
