//! Reminders through the chat's commands: `/reminders` with its cancel buttons (a stranger's
//! tap refused), another chat's reminders neither listed nor cancelled, and `/timezone`.

use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::{anthropic_text, anthropic_tool_use};
use futures::executor::block_on;
use serde_json::{json, Value};

use super::support::{Harness, Wire};
use super::{alarms, message, set, tool_result, MIN};

/// A tap on a reminder button with `data`, by `from`, on a message in `chat`.
fn tap(update_id: i64, from: i64, chat: i64, data: &str) -> Value {
    json!({"update_id": update_id, "callback_query": {
        "id": format!("cb{update_id}"),
        "from": {"id": from, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "42",
        "data": data,
        "message": {"message_id": 5, "date": 1, "chat": {"id": chat, "type": "private"}, "text": "Reminders"}
    }})
}

#[test]
fn reminders_lists_with_cancel_buttons_and_the_button_cancels() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 30, "text": "call Ana"}),
        )
        .await;
        set(
            &h,
            2,
            json!({"action": "create", "cron": "0 9 * * mon-fri", "prompt": "plan my day"}),
        )
        .await;
        h.deliver_raw(&message(3, "/reminders")).await;
        let sent = h.calls("sendMessage");
        let list = sent.last().unwrap();
        let text = list["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "Reminders in this chat (time zone UTC):\n#1 next at 2023-11-14 22:43"
            ),
            "{text}"
        );
        assert!(
            text.contains("#2 next at 2023-11-15 09:00 (Wednesday), UTC+00:00"),
            "{text}"
        );
        assert!(
            text.contains("repeating \"0 9 * * mon-fri\" in UTC: task \"plan my day\""),
            "{text}"
        );
        let rows = list["reply_markup"]["inline_keyboard"].as_array().unwrap();
        let data: Vec<&str> = rows
            .iter()
            .map(|r| r[0]["callback_data"].as_str().unwrap())
            .collect();
        assert_eq!(data, ["rm:1", "rm:2"]);
        assert!(data.iter().all(|d| d.len() <= 64));
        assert_eq!(rows[0][0]["text"], "Cancel #1");

        // A stranger's tap is refused; the owner's cancels; a second tap finds nothing.
        h.deliver_raw(&tap(4, STRANGER_ID, OWNER_ID, "rm:1")).await;
        h.deliver_raw(&tap(5, OWNER_ID, OWNER_ID, "rm:1")).await;
        h.deliver_raw(&tap(6, OWNER_ID, OWNER_ID, "rm:1")).await;
        let answers = h.calls("answerCallbackQuery");
        let said: Vec<(&str, bool)> = answers
            .iter()
            .map(|a| {
                (
                    a["text"].as_str().unwrap(),
                    a["show_alert"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            said,
            [
                ("Only people this bot serves can cancel reminders.", true),
                ("Cancelled reminder #1.", false),
                ("That reminder is no longer there.", false)
            ]
        );
        h.clock.advance(40 * MIN);
        h.app.scheduled().await;
        assert!(alarms(&h).is_empty(), "cancelled");
        h.deliver_raw(&message(7, "/reminders")).await;
        let text = h.sent_texts().pop().unwrap();
        assert!(text.contains("#2") && !text.contains("#1"), "{text}");
        h.assert_spec_clean();
    });
}

#[test]
fn another_chats_reminders_can_be_neither_listed_nor_cancelled() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        set(
            &h,
            1,
            json!({"action": "create", "in_minutes": 5, "text": "mine"}),
        )
        .await;
        // In the group, the owner sees none of the private chat's reminders …
        let mut u = fixtures::update("group_mention", 2);
        u["message"]["text"] = json!("/reminders");
        u["message"]["entities"] = json!([]);
        h.deliver_raw(&u).await;
        assert!(h
            .sent_texts()
            .pop()
            .unwrap()
            .starts_with("No reminders in this chat."));
        // … the model there cannot cancel it, nor can a button on a message in the group.
        let mut u = fixtures::update("group_mention", 3);
        h.script(
            200,
            anthropic_tool_use("t3", "schedule", json!({"action": "cancel", "id": 1})),
        );
        h.script(200, anthropic_text("No."));
        u["message"]["text"] = json!("@clawless_test_bot cancel reminder 1");
        h.deliver_raw(&u).await;
        assert_eq!(tool_result(&h), "this chat has no reminder #1");
        h.deliver_raw(&tap(4, OWNER_ID, GROUP_ID, "rm:1")).await;
        assert_eq!(
            h.calls("answerCallbackQuery")[0]["text"],
            "That reminder is no longer there."
        );
        h.clock.advance(5 * MIN);
        h.app.scheduled().await;
        assert_eq!(alarms(&h), ["⏰ mine"]);
    });
}

#[test]
fn timezone_sets_the_zone_local_times_are_read_in() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver_raw(&message(1, "/timezone")).await;
        assert!(h.sent_texts()[0].starts_with("This chat's time zone is UTC"));
        h.deliver_raw(&message(2, "/timezone Mars/Olympus")).await;
        assert!(h.sent_texts()[1].starts_with("I don't know the time zone"));
        h.deliver_raw(&message(3, "/timezone europe/berlin")).await;
        assert!(
            h.sent_texts()[2].starts_with("Time zone set to Europe/Berlin: it is 2023-11-14 23:13"),
            "{:?}",
            h.sent_texts()
        );
        let said = set(
            &h,
            4,
            json!({"action": "create", "at": "2023-11-15T09:00", "text": "x"}),
        )
        .await;
        assert!(
            said.contains("2023-11-15 09:00 (Wednesday), Europe/Berlin (UTC+01:00)"),
            "{said}"
        );
        // A zone given with the reminder wins for it.
        let said = set(
            &h,
            5,
            json!({"action": "create", "at": "2023-11-15T09:00", "zone": "America/New_York", "text": "y"}),
        )
        .await;
        assert!(
            said.contains("(in 15 h 46 min)"),
            "09:00 EST is 14:00 UTC: {said}"
        );
    });
}
