//! Approvals end to end over the fakes: a call that asks suspends the turn in its job, the
//! buttons' answer arrives as a separate update and resumes it exactly once; deny, expiry
//! through the clock, a tap by someone else, a duplicate tap, a new message first, `/stop`,
//! a grant and `/revoke`, and a restart while the approval waits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

#[path = "approvals/audit.rs"]
mod audit;
#[path = "approvals/panel.rs"]
mod panel;

use std::time::Duration;

use clawless_core::config::Rule;
use clawless_core::{App, Config, Env};
use clawless_testkit::fixtures::{self, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{daily, Harness, Wire, LLM, SECRET, TOKEN};

/// The embedded config with `memory_write` asking first.
fn asking() -> Config {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.policy.tools.insert("memory_write".into(), Rule::Ask);
    config
}

fn write_call(id: &str, text: &str) -> Value {
    anthropic_tool_use(
        id,
        "memory_write",
        json!({"target": "daily", "content": text}),
    )
}

/// A private message from the owner with `text`.
fn message(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(10 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// A tap on a button with `data`, by `from`, on the approval message `message_id`.
fn tap(update_id: i64, from: i64, data: &str, message_id: i64) -> Value {
    json!({"update_id": update_id, "callback_query": {
        "id": format!("cb{update_id}"),
        "from": {"id": from, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "42",
        "data": data,
        "message": {"message_id": message_id, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "🔐"}
    }})
}

/// The approval message sent last: its id and its three buttons' data.
fn approval(h: &Harness) -> (i64, Vec<String>) {
    let calls = h.calls("sendMessage");
    let (i, call) = calls
        .iter()
        .enumerate()
        .rev()
        .find(|(_, c)| c.get("reply_markup").is_some())
        .expect("an approval message was sent");
    let buttons = call["reply_markup"]["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["callback_data"].as_str().unwrap().to_owned())
        .collect();
    // The fake numbers sent messages from 1001 in order.
    (1001 + i as i64, buttons)
}

fn answers(h: &Harness) -> Vec<Value> {
    h.calls("answerCallbackQuery")
}

#[test]
fn allow_once_runs_the_call_and_resumes_the_turn_exactly_once() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "buy milk"));
        assert_eq!(h.deliver_raw(&message(1, "remember: buy milk")).await, 200);
        // Suspended: one model call, nothing written, the buttons sent.
        assert_eq!(h.llm_requests().len(), 1);
        assert!(daily(&h).await.is_empty(), "nothing runs before the answer");
        let (approval_id, buttons) = approval(&h);
        assert_eq!(buttons.len(), 3);
        let text = &h.sent_texts()[0];
        assert!(
            text.contains("memory_write") && text.contains("buy milk"),
            "{text}"
        );

        h.script(200, anthropic_text("Saved."));
        assert_eq!(
            h.deliver_raw(&tap(2, OWNER_ID, &buttons[0], approval_id))
                .await,
            200
        );
        assert!(
            daily(&h).await.contains("buy milk"),
            "the call ran once allowed"
        );
        assert_eq!(h.llm_requests().len(), 2);
        assert_eq!(h.last_tool_result()["is_error"], json!(false));
        assert_eq!(h.sent_texts().last().unwrap(), "Saved.");
        assert_eq!(answers(&h).len(), 1, "the tap is answered");
        let edits = h.calls("editMessageText");
        assert_eq!(edits.len(), 1);
        assert!(edits[0]["text"].as_str().unwrap().contains("allowed once"));

        // The same tap delivered again, and a second tap: nothing more happens.
        h.deliver_raw(&tap(2, OWNER_ID, &buttons[0], approval_id))
            .await;
        h.deliver_raw(&tap(3, OWNER_ID, &buttons[0], approval_id))
            .await;
        assert_eq!(h.llm_requests().len(), 2, "resumed once");
        assert_eq!(h.sent_texts().len(), 2);
        let late = answers(&h);
        assert_eq!(late.len(), 2, "the second tap is answered too");
        assert!(late[1]["text"]
            .as_str()
            .unwrap()
            .contains("no longer waiting"));
        assert_eq!(daily(&h).await.matches("buy milk").count(), 1);
        h.assert_spec_clean();
    });
}

#[test]
fn deny_tells_the_model_and_runs_nothing() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "secret plan"));
        h.deliver_raw(&message(1, "remember my plan")).await;
        let (id, buttons) = approval(&h);
        h.script(200, anthropic_text("Alright, I did not save it."));
        h.deliver_raw(&tap(2, OWNER_ID, &buttons[2], id)).await;
        assert!(daily(&h).await.is_empty());
        let result = h.last_tool_result();
        assert_eq!(result["is_error"], json!(true));
        assert!(
            result["content"].as_str().unwrap().contains("denied"),
            "{result}"
        );
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "Alright, I did not save it."
        );
        assert!(h.calls("editMessageText")[0]["text"]
            .as_str()
            .unwrap()
            .contains("denied"));
        h.assert_spec_clean();
    });
}

#[test]
fn an_unanswered_approval_expires_through_the_clock() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "x"));
        h.deliver_raw(&message(1, "remember x")).await;
        // Not yet: the sweep finds it still waiting.
        h.clock.advance(Duration::from_secs(29 * 60));
        h.app.sweep().await.unwrap();
        assert_eq!(h.llm_requests().len(), 1);
        h.clock.advance(Duration::from_secs(2 * 60));
        h.script(
            200,
            anthropic_text("Nobody answered, so I did not save it."),
        );
        h.app.sweep().await.unwrap();
        assert_eq!(h.llm_requests().len(), 2);
        let result = h.last_tool_result();
        assert!(
            result["content"].as_str().unwrap().contains("in time"),
            "{result}"
        );
        assert!(daily(&h).await.is_empty());
        assert!(h.calls("editMessageText")[0]["text"]
            .as_str()
            .unwrap()
            .contains("nobody answered"));
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "Nobody answered, so I did not save it."
        );
    });
}

#[test]
fn a_tap_by_someone_else_is_refused_and_changes_nothing() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "mine"));
        h.deliver_raw(&message(1, "remember mine")).await;
        let (id, buttons) = approval(&h);
        h.deliver_raw(&tap(2, STRANGER_ID, &buttons[0], id)).await;
        let refused = answers(&h);
        assert_eq!(refused.len(), 1);
        assert!(refused[0]["text"].as_str().unwrap().contains("not yours"));
        assert_eq!(refused[0]["show_alert"], json!(true));
        assert_eq!(h.llm_requests().len(), 1, "still waiting");
        assert!(daily(&h).await.is_empty());
        // The owner can still answer.
        h.script(200, anthropic_text("Saved."));
        h.deliver_raw(&tap(3, OWNER_ID, &buttons[0], id)).await;
        assert!(daily(&h).await.contains("mine"));
        h.assert_spec_clean();
    });
}

#[test]
fn a_new_message_supersedes_the_wait_and_is_answered_after_it() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "old"));
        h.deliver_raw(&message(1, "remember old")).await;
        h.script(200, anthropic_text("Skipped saving."));
        h.script(200, anthropic_text("Hello again."));
        h.deliver_raw(&message(2, "never mind, hi")).await;
        let sent = h.sent_texts();
        assert_eq!(sent.len(), 3, "{sent:?}");
        assert_eq!(&sent[1..], ["Skipped saving.", "Hello again."]);
        let requests = h.llm_requests();
        assert!(
            requests[1].to_string().contains("new message"),
            "the model is told"
        );
        assert!(daily(&h).await.is_empty());
    });
}

#[test]
fn stop_ends_the_waiting_turn_without_another_model_call() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "x"));
        h.deliver_raw(&message(1, "remember x")).await;
        h.deliver_raw(&message(2, "/stop")).await;
        assert_eq!(h.llm_requests().len(), 1);
        assert_eq!(h.sent_texts().last().unwrap(), "Stopped.");
        assert_eq!(
            h.sent_texts().len(),
            2,
            "/stop is answered by the stopped turn"
        );
        assert!(h.calls("editMessageText")[0]["text"]
            .as_str()
            .unwrap()
            .contains("/stop"));
        // Alone, /stop says nothing waits.
        h.deliver_raw(&message(3, "/stop")).await;
        assert!(h
            .sent_texts()
            .last()
            .unwrap()
            .contains("Nothing is waiting"));
    });
}

#[test]
fn allow_for_a_while_grants_the_tool_in_this_chat_until_revoked() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "first"));
        h.deliver_raw(&message(1, "remember first")).await;
        let (id, buttons) = approval(&h);
        h.script(200, anthropic_text("Saved."));
        h.deliver_raw(&tap(2, OWNER_ID, &buttons[1], id)).await;
        // Granted: the next call runs without asking.
        h.script(200, write_call("t2", "second"));
        h.script(200, anthropic_text("Saved again."));
        h.deliver_raw(&message(3, "remember second")).await;
        assert!(daily(&h).await.contains("second"));
        assert_eq!(
            h.calls("sendMessage")
                .iter()
                .filter(|c| c.get("reply_markup").is_some())
                .count(),
            1
        );
        h.deliver_raw(&message(4, "/approve")).await;
        assert!(h.sent_texts().last().unwrap().contains("memory_write"));
        h.deliver_raw(&message(5, "/revoke")).await;
        assert!(h
            .sent_texts()
            .last()
            .unwrap()
            .contains("Ended: memory_write"));
        // Revoked: it asks again.
        h.script(200, write_call("t3", "third"));
        h.deliver_raw(&message(6, "remember third")).await;
        assert_eq!(
            h.calls("sendMessage")
                .iter()
                .filter(|c| c.get("reply_markup").is_some())
                .count(),
            2
        );
        assert!(!daily(&h).await.contains("third"));
        h.assert_spec_clean();
    });
}

#[test]
fn a_tap_after_a_restart_resumes_the_turn() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "survives"));
        h.deliver_raw(&message(1, "remember survives")).await;
        let (id, buttons) = approval(&h);
        // The process dies; a new one starts on the same storage.
        let env = Env::from_pairs([
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
            ("TELEGRAM_WEBHOOK_SECRET", SECRET.to_string()),
            ("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".to_string()),
            ("ANTHROPIC_BASE_URL", LLM.to_string()),
        ]);
        let app = App::new(h.platform.clone(), asking(), &env, "second").unwrap();
        h.script(200, anthropic_text("Saved after the restart."));
        let reply = app
            .handle_webhook(
                "main",
                Some(SECRET),
                tap(2, OWNER_ID, &buttons[0], id).to_string().as_bytes(),
            )
            .await;
        app.drain(reply.lane.as_ref().unwrap()).await.unwrap();
        assert!(daily(&h).await.contains("survives"));
        assert_eq!(h.sent_texts().last().unwrap(), "Saved after the restart.");
    });
}

#[test]
fn group_chatter_neither_answers_nor_supersedes_a_waiting_approval() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "team lunch"));
        // Both accepted before the bot knows its own name, so the chatter is not dropped at
        // the ack: it reaches the lane behind the turn that will wait.
        let lane = h.accept_only("group_mention", 1).await.unwrap();
        let mut chatter = fixtures::update("group_no_mention", 2);
        chatter["message"]["message_id"] = json!(21);
        let reply = h
            .app
            .handle_webhook("main", Some(SECRET), chatter.to_string().as_bytes())
            .await;
        assert_eq!(reply.lane.as_ref(), Some(&lane), "the chatter is queued");
        h.drain(&lane).await;
        let (id, buttons) = approval(&h);
        assert_eq!(h.llm_requests().len(), 1, "still waiting");
        assert!(h.calls("editMessageText").is_empty(), "not superseded");
        h.script(200, anthropic_text("Saved for the team."));
        let mut t = tap(3, OWNER_ID, &buttons[0], id);
        t["callback_query"]["message"]["chat"] =
            json!({"id": fixtures::GROUP_ID, "type": "supergroup"});
        h.deliver_raw(&t).await;
        assert_eq!(h.sent_texts().last().unwrap(), "Saved for the team.");
        assert_eq!(h.last_tool_result()["is_error"], json!(false));
        h.assert_spec_clean();
    });
}

#[test]
fn a_tool_the_agent_does_not_have_is_never_asked_about() {
    block_on(async {
        // Unsafe tools ask by default; a made-up name must not reach the approval message.
        let h = Harness::with_config(Wire::Anthropic, asking());
        let name = "made_up_".repeat(600);
        h.script(200, anthropic_tool_use("t1", &name, json!({})));
        h.script(200, anthropic_text("I have no such tool."));
        h.deliver_raw(&message(1, "do something")).await;
        assert!(h
            .calls("sendMessage")
            .iter()
            .all(|c| c.get("reply_markup").is_none()));
        let result = h.last_tool_result();
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .starts_with("Unknown tool"),
            "{result}"
        );
        assert_eq!(h.sent_texts(), ["I have no such tool."]);
        h.assert_spec_clean();
    });
}

/// Data no button of the bot wrote (a forged or foreign tap) is refused, while a turn waits
/// and when none does; it is never taken for the waiting approval's answer.
#[test]
fn a_tap_with_unknown_data_is_refused_and_answers_no_approval() {
    block_on(async {
        let h = Harness::with_config(Wire::Anthropic, asking());
        h.script(200, write_call("t1", "buy milk"));
        h.deliver_raw(&message(1, "remember: buy milk")).await;
        let (approval_id, buttons) = approval(&h);
        let forged = [
            "xx:1",
            "ap:",
            "ap:nope",
            &format!("{}x", buttons[0]),
            "ap:1.1:o:o",
        ];
        for (i, data) in forged.iter().enumerate() {
            h.deliver_raw(&tap(10 + i as i64, OWNER_ID, data, approval_id))
                .await;
        }
        assert_eq!(h.llm_requests().len(), 1, "the turn still waits");
        assert!(daily(&h).await.is_empty(), "nothing ran");
        let refused = answers(&h);
        assert_eq!(refused.len(), forged.len(), "every tap is answered");
        for a in &refused {
            let text = a["text"].as_str().unwrap();
            assert!(
                text.contains("no longer valid") || text.contains("no longer waiting"),
                "{text}"
            );
        }
        assert!(refused[0]["text"]
            .as_str()
            .unwrap()
            .contains("no longer valid"));
        // The real button still answers it, once.
        h.script(200, anthropic_text("Saved."));
        h.deliver_raw(&tap(20, OWNER_ID, &buttons[0], approval_id))
            .await;
        assert_eq!(daily(&h).await.matches("buy milk").count(), 1);
        assert_eq!(h.sent_texts().last().unwrap(), "Saved.");
        // With no turn waiting, unknown data is refused the same way.
        h.deliver_raw(&tap(21, OWNER_ID, "zz:9", approval_id)).await;
        let last = answers(&h).pop().unwrap();
        assert!(last["text"].as_str().unwrap().contains("no longer valid"));
        h.assert_spec_clean();
    });
}
