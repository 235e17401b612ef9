//! The `message` tool over the fakes: a progress message in the conversation's chat goes out
//! before the answer without asking; to another person's private chat it is unsafe, so it
//! asks first (and runs once allowed); to a chat the bot does not serve it is refused. And
//! `exec`, which only the owner may approve.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::Config;
use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::json;
use support::{Harness, Wire};

const FRIEND: i64 = 222_222_222;

fn harness() -> Harness {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let agent = config.agents.get_mut("assistant").unwrap();
    agent.tools.push("message".into());
    let users = format!("{OWNER_ID},{FRIEND}");
    Harness::with_env(
        Wire::Anthropic,
        config,
        &[("TELEGRAM_ALLOWED_USERS", users.as_str())],
    )
    .unwrap()
}

/// (chat, text) of every sendMessage, in order.
fn sent(h: &Harness) -> Vec<(i64, String)> {
    h.calls("sendMessage")
        .iter()
        .map(|b| {
            (
                b["chat_id"].as_i64().unwrap(),
                b["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_progress_message_goes_out_before_the_answer() {
    block_on(async {
        let h = harness();
        h.script(
            200,
            anthropic_tool_use("t1", "message", json!({"text": "Working on it…"})),
        );
        h.script(200, anthropic_text("Done."));
        h.deliver("private_text", 1).await;
        assert_eq!(
            sent(&h),
            [
                (OWNER_ID, "Working on it…".to_owned()),
                (OWNER_ID, "Done.".to_owned())
            ]
        );
        assert_eq!(h.last_tool_result()["content"], "Sent.");
        h.assert_spec_clean();
    });
}

#[test]
fn to_another_person_it_asks_first_and_only_people_the_bot_serves() {
    block_on(async {
        let h = harness();
        h.script(
            200,
            anthropic_tool_use(
                "t1",
                "message",
                json!({"text": "Dinner at 8", "chat_id": FRIEND}),
            ),
        );
        h.deliver("private_text", 1).await;
        let asked = h.calls("sendMessage");
        let buttons = asked.last().unwrap()["reply_markup"]["inline_keyboard"][0]
            .as_array()
            .unwrap()
            .clone();
        assert!(asked.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("message"));
        assert!(
            sent(&h).iter().all(|(chat, _)| *chat == OWNER_ID),
            "nothing to the friend yet"
        );

        // Allowed once: the message goes to the friend, then the answer to the owner.
        h.script(200, anthropic_text("Told them."));
        let tap = json!({"update_id": 2, "callback_query": {
            "id": "cb2", "from": {"id": OWNER_ID, "is_bot": false, "first_name": "Ada"},
            "chat_instance": "1", "data": buttons[0]["callback_data"],
            "message": {"message_id": 1, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "🔐"}
        }});
        h.deliver_raw(&tap).await;
        let to_friend: Vec<_> = sent(&h).into_iter().filter(|(c, _)| *c == FRIEND).collect();
        assert_eq!(to_friend, [(FRIEND, "Dinner at 8".to_owned())]);
        assert_eq!(
            h.last_tool_result()["content"],
            format!("Sent to chat {FRIEND}.")
        );

        // A chat the bot does not serve: refused, nothing sent (after the approval).
        h.script(
            200,
            anthropic_tool_use("t2", "message", json!({"text": "hi", "chat_id": 333})),
        );
        h.script(200, anthropic_text("Could not."));
        let mut u = clawless_testkit::fixtures::update("private_text", 3);
        u["message"]["message_id"] = json!(30);
        h.deliver_raw(&u).await;
        let buttons =
            h.calls("sendMessage").last().unwrap()["reply_markup"]["inline_keyboard"][0].clone();
        let tap = json!({"update_id": 4, "callback_query": {
            "id": "cb4", "from": {"id": OWNER_ID, "is_bot": false, "first_name": "Ada"},
            "chat_instance": "1", "data": buttons[0]["callback_data"],
            "message": {"message_id": 1, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "🔐"}
        }});
        h.deliver_raw(&tap).await;
        assert!(sent(&h).iter().all(|(c, _)| *c != 333));
        let refused = h.last_tool_result();
        assert_eq!(refused["is_error"], true);
        assert!(refused["content"]
            .as_str()
            .unwrap()
            .contains("not the private chat of someone this bot serves"));
        h.assert_spec_clean();
    });
}

/// `exec` runs as the bot's user: only the owner may approve it, even in another allowed
/// person's own chat.
#[test]
fn only_the_owner_approves_exec() {
    use std::sync::Arc;

    use support::Ran;

    block_on(async {
        let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
        config
            .agents
            .get_mut("assistant")
            .unwrap()
            .tools
            .push("exec".into());
        let ran = Arc::new(Ran::default());
        let exec = ran.clone();
        let users = format!("{OWNER_ID},{FRIEND}");
        let h = Harness::with_ports_env(
            Wire::Anthropic,
            config,
            &[("TELEGRAM_ALLOWED_USERS", users.as_str())],
            move |p, _, _| p.exec = Some(exec),
        );
        h.script(
            200,
            anthropic_tool_use("t1", "exec", json!({"command": "ls"})),
        );
        // The friend asks in their own private chat.
        let mut u = clawless_testkit::fixtures::update("private_text", 1);
        u["message"]["from"]["id"] = json!(FRIEND);
        u["message"]["chat"]["id"] = json!(FRIEND);
        h.deliver_raw(&u).await;
        let asked = h.calls("sendMessage");
        let data =
            asked.last().unwrap()["reply_markup"]["inline_keyboard"][0][0]["callback_data"].clone();
        let tap = |id: i64, from: i64| {
            json!({"update_id": id, "callback_query": {
                "id": format!("cb{id}"), "from": {"id": from, "is_bot": false, "first_name": "X"},
                "chat_instance": "1", "data": data,
                "message": {"message_id": 1, "date": 1, "chat": {"id": FRIEND, "type": "private"}, "text": "🔐"}
            }})
        };
        h.deliver_raw(&tap(2, FRIEND)).await;
        let answers = h.calls("answerCallbackQuery");
        assert!(
            answers.last().unwrap()["text"]
                .as_str()
                .unwrap()
                .contains("not yours"),
            "{answers:?}"
        );
        assert!(
            ran.0.lock().unwrap().is_empty(),
            "not run on the friend's tap"
        );
        h.script(200, anthropic_text("Listed."));
        h.deliver_raw(&tap(3, OWNER_ID)).await;
        assert_eq!(
            *ran.0.lock().unwrap(),
            ["ls"],
            "run once the owner allowed it"
        );
    });
}
