//! Whole-flow tests: real-format updates through the webhook entry, the inbox and the agent,
//! on in-memory ports, with every Bot API call checked against the spec.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

#[path = "flow/failures.rs"]
mod failures;

use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use, openai_text, openai_tool_call};
use clawless_testkit::spec::spec;
use futures::executor::block_on;
use serde_json::json;
use support::{daily, Harness, Wire, SECRET};

#[test]
fn fixtures_are_real_format_updates() {
    for name in fixtures::ALL {
        spec()
            .check_type("Update", &fixtures::update(name, 1))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn private_text_is_answered_once_anthropic() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("I can **help** with many things."));
        assert_eq!(h.deliver("private_text", 100).await, 200);
        let sent = h.calls("sendMessage");
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["chat_id"], OWNER_ID);
        assert_eq!(sent[0]["text"], "I can <b>help</b> with many things.");
        assert_eq!(sent[0]["parse_mode"], "HTML");
        assert!(
            sent[0].get("reply_parameters").is_none(),
            "private replies are not quoted"
        );
        assert_eq!(
            h.calls("sendChatAction").len(),
            1,
            "typing shown while working"
        );
        let req = &h.llm_requests()[0];
        assert_eq!(req["model"], "claude-sonnet-4-5");
        assert_eq!(req["messages"][0]["content"][0]["text"], "What can you do?");
        assert!(req["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "current_time"));
        h.assert_spec_clean();
    });
}

#[test]
fn private_text_is_answered_once_openai_with_history() {
    block_on(async {
        let h = Harness::new(Wire::OpenAi);
        h.script(200, openai_text("First answer."));
        h.script(200, openai_text("Second answer."));
        h.deliver("private_text", 100).await;
        let mut second = fixtures::update("private_text", 101);
        second["message"]["text"] = json!("And then?");
        h.deliver_raw(&second).await;
        assert_eq!(h.sent_texts(), ["First answer.", "Second answer."]);
        let reqs = h.llm_requests();
        assert_eq!(reqs[1]["model"], "gpt-4o-mini");
        let roles: Vec<_> = reqs[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user"],
            "history is kept across turns"
        );
        assert_eq!(reqs[1]["messages"][2]["content"], "First answer.");
        h.assert_spec_clean();
    });
}

#[test]
fn start_and_help_need_no_model_and_new_ends_the_session() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver("private_command_start", 1).await;
        assert!(h.sent_texts()[0].contains("/new"), "help lists commands");
        assert!(h.llm_requests().is_empty(), "/start needs no model");
        h.script(200, anthropic_text("one"));
        h.deliver("private_text", 2).await;
        // /new: the session had no memory_write, so the model summarises it for the day's note.
        h.script(200, anthropic_text("- The user greeted the assistant."));
        h.deliver("private_command_new", 3).await;
        assert!(h.sent_texts()[2].contains("fresh"));
        h.script(200, anthropic_text("two"));
        h.deliver("private_text", 4).await;
        let reqs = h.llm_requests();
        assert_eq!(reqs.len(), 3, "two texts and one summary reached the model");
        assert!(
            support::system_text(&reqs[1]).contains("conversation that just ended"),
            "the summary request"
        );
        assert!(
            reqs[1]["tools"].as_array().is_none_or(|t| t.is_empty()),
            "no tools"
        );
        assert_eq!(
            reqs[2]["messages"].as_array().unwrap().len(),
            1,
            "/new dropped the history"
        );
        assert_eq!(
            daily(&h).await,
            "## Session summary\n- The user greeted the assistant.\n"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn groups_answer_only_when_addressed() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver("group_no_mention", 1).await;
        h.deliver("group_command_other_bot", 2).await;
        h.deliver("stranger_group_no_mention", 3).await;
        assert!(
            h.sent_texts().is_empty(),
            "unaddressed group messages get no answer"
        );
        assert!(h.llm_requests().is_empty());

        h.script(200, anthropic_text("4"));
        h.deliver("group_mention", 4).await;
        h.script(200, anthropic_text("12"));
        h.deliver("group_reply_to_bot", 5).await;
        let sent = h.calls("sendMessage");
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0]["chat_id"], GROUP_ID);
        assert_eq!(
            sent[0]["reply_parameters"]["message_id"], 21,
            "group answers quote the question"
        );
        let first = &h.llm_requests()[0];
        assert_eq!(
            first["messages"][0]["content"][0]["text"], "what is 2+2?",
            "the mention is stripped"
        );
        assert_eq!(h.calls("getMe").len(), 1, "getMe is cached");
        h.assert_spec_clean();
    });
}

#[test]
fn forum_topic_is_answered_in_its_thread() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("Summary."));
        h.deliver("forum_topic_mention", 1).await;
        let sent = h.calls("sendMessage");
        assert_eq!(sent[0]["message_thread_id"], 5);
        assert_eq!(h.calls("sendChatAction")[0]["message_thread_id"], 5);
        h.assert_spec_clean();
    });
}

#[test]
fn edits_unknown_updates_and_garbage_get_200_and_nothing_else() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        assert_eq!(h.deliver("edited_message", 1).await, 200);
        assert_eq!(h.deliver("unknown_poll", 2).await, 200);
        let r = h
            .app
            .handle_webhook("main", Some(SECRET), b"{not json")
            .await;
        assert_eq!((r.status, r.lane), (200, None));
        let r = h
            .app
            .handle_webhook("main", Some(SECRET), br#"{"message": {}}"#)
            .await;
        assert_eq!((r.status, r.lane), (200, None));
        assert!(
            h.http.requests().is_empty(),
            "nothing sent, no model called"
        );
    });
}

#[test]
fn stickers_are_explained_and_photos_are_turns() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver("sticker", 2).await;
        assert_eq!(h.sent_texts().len(), 1);
        assert!(h.sent_texts()[0].contains("cannot read that kind of message"));
        assert!(h.llm_requests().is_empty());
        // Photos are read (core/tests/media.rs): with or without a caption, a turn.
        h.file("AgACAgQAAx0", b"jpeg".to_vec());
        h.script(200, anthropic_text("A photo."));
        h.deliver("photo_no_caption", 1).await;
        h.script(200, anthropic_text("Still a photo."));
        h.deliver("photo_caption", 3).await;
        let requests = h.llm_requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["messages"][0]["content"][0]["type"], "image");
        let caption = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"][1]
            ["text"]
            .clone();
        assert_eq!(caption, "What is in this picture?");
        h.assert_spec_clean();
    });
}

#[test]
fn duplicate_delivery_is_answered_once() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(200, anthropic_text("once"));
        h.deliver("private_text", 7).await;
        assert_eq!(h.deliver("private_text", 7).await, 200);
        // Re-delivered while still pending, too.
        let lane = h.accept_only("private_text", 8).await.unwrap();
        assert_eq!(h.accept_only("private_text", 8).await, None);
        h.script(200, anthropic_text("twice"));
        h.drain(&lane).await;
        assert_eq!(h.sent_texts(), ["once", "twice"]);
        assert_eq!(h.llm_requests().len(), 2);
    });
}

#[test]
fn wrong_or_missing_secret_is_401_and_nothing_happens() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let body = fixtures::update("private_text", 1).to_string();
        for secret in [Some("wrong"), None, Some("")] {
            let r = h.app.handle_webhook("main", secret, body.as_bytes()).await;
            assert_eq!((r.status, r.lane.clone()), (401, None));
        }
        assert_eq!(
            h.app
                .handle_webhook("nope", Some(SECRET), body.as_bytes())
                .await
                .status,
            404
        );
        assert!(
            h.platform.kv.list("", 10).await.unwrap().is_empty(),
            "nothing stored"
        );
        assert!(h.http.requests().is_empty());
    });
}

#[test]
fn stranger_gets_one_reply_with_a_code_and_their_id_and_no_model_call() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver("stranger_private", 1).await;
        h.deliver("stranger_private", 2).await;
        h.deliver("stranger_private", 3).await;
        let sent = h.calls("sendMessage");
        let to_stranger: Vec<&str> = sent
            .iter()
            .filter(|b| b["chat_id"] == json!(STRANGER_ID))
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(to_stranger.len(), 1, "at most one reply: {to_stranger:?}");
        assert!(to_stranger[0].contains(&STRANGER_ID.to_string()));
        assert!(to_stranger[0].contains("/pair "), "{}", to_stranger[0]);
        let to_owner = sent.iter().filter(|b| b["chat_id"] == json!(OWNER_ID));
        assert_eq!(to_owner.count(), 1, "the owner is told once");
        assert!(h.llm_requests().is_empty());
        h.assert_spec_clean();
    });
}

#[test]
fn tool_round_trip_anthropic() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.script(
            200,
            anthropic_tool_use("toolu_1", "current_time", json!({"utc_offset": "+02:00"})),
        );
        h.script(200, anthropic_text("It is Tuesday."));
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["It is Tuesday."]);
        let second = &h.llm_requests()[1]["messages"];
        assert_eq!(second[1]["content"][1]["type"], "tool_use");
        let result = &second[2]["content"][0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["tool_use_id"], "toolu_1");
        assert!(
            result["content"].as_str().unwrap().contains("2023-11-15"),
            "{result}"
        );
        assert_eq!(result["is_error"], false);
    });
}

#[test]
fn tool_round_trip_openai_and_bad_arguments_reported_to_model() {
    block_on(async {
        let h = Harness::new(Wire::OpenAi);
        h.script(
            200,
            openai_tool_call(
                "call_1",
                "current_time",
                "{\"utc_offset\": \"Mars/Olympus\"}",
            ),
        );
        h.script(200, openai_tool_call("call_2", "current_time", "{}"));
        h.script(200, openai_text("Done."));
        h.deliver("private_text", 1).await;
        assert_eq!(h.sent_texts(), ["Done."]);
        let third = &h.llm_requests()[2]["messages"];
        let tool_msgs: Vec<_> = third
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(tool_msgs.len(), 2);
        assert!(
            tool_msgs[0]["content"]
                .as_str()
                .unwrap()
                .starts_with("Error:"),
            "tool errors go back to the model"
        );
        assert_eq!(tool_msgs[1]["tool_call_id"], "call_2");
        assert!(tool_msgs[1]["content"]
            .as_str()
            .unwrap()
            .contains("UTC+00:00"));
    });
}

#[test]
fn updates_of_one_chat_are_processed_in_order() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let mut lane = None;
        for (id, text) in [(30, "third"), (10, "first"), (20, "second")] {
            let mut u = fixtures::update("private_text", id);
            u["message"]["text"] = json!(text);
            let r = h
                .app
                .handle_webhook("main", Some(SECRET), u.to_string().as_bytes())
                .await;
            lane = r.lane;
        }
        for t in ["a1", "a2", "a3"] {
            h.script(200, anthropic_text(t));
        }
        assert_eq!(h.app.sweep().await.unwrap(), None);
        let asked: Vec<String> = h
            .llm_requests()
            .iter()
            .map(|r| {
                r["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(asked, ["first", "second", "third"]);
        assert!(lane.is_some());
    });
}

#[test]
fn six_thousand_characters_split_into_valid_messages() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let reply: String = (0..100)
            .map(|i| format!("Line {i:03} {}\n", "x".repeat(50)))
            .collect();
        assert!(reply.len() >= 6000);
        h.script(200, anthropic_text(&reply));
        h.deliver("private_text", 1).await;
        let sent = h.sent_texts();
        assert!(sent.len() >= 2);
        assert!(sent.iter().all(|t| t.encode_utf16().count() <= 4096));
        assert!(sent.concat().contains("Line 000") && sent.concat().contains("Line 099"));
        h.assert_spec_clean();
    });
}

#[test]
fn secrets_never_show_in_debug() {
    let h = Harness::new(Wire::Anthropic);
    let env = clawless_core::Env::from_pairs([("TELEGRAM_BOT_TOKEN", support::TOKEN)]);
    let shown = format!("{env:?} {:?}", h.app);
    assert!(shown.contains("Connector"), "{shown}");
    assert!(
        !shown.contains(support::TOKEN) && !shown.contains(SECRET),
        "{shown}"
    );
}
