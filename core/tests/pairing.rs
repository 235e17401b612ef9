//! Pairing end to end over the fakes: a stranger gets a one-time code and no model call, the
//! owner is told; `/pair CODE` from the owner in private lets them in (answered by the model
//! from then on); an expired, a used or a mistyped code is refused, and so is anyone but the
//! owner or a group; `/users` lists and its remove button unpairs; the command line approves
//! and removes; one code per stranger an hour, at most 50 pending; `owner:` of `main.yaml`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::time::Duration;

use clawless_core::{Config, ConnectorId};
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const MIN: Duration = Duration::from_secs(60);
/// A second configured user, not the owner.
const MEMBER: i64 = 222_222_222;

/// A private message from `from` (its chat has the same id).
fn private(update_id: i64, from: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["from"]["id"] = json!(from);
    u["message"]["chat"]["id"] = json!(from);
    u["message"]["text"] = json!(text);
    u
}

fn owner(update_id: i64, text: &str) -> Value {
    private(update_id, OWNER_ID, text)
}

fn stranger(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("stranger_private", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// A tap on `data` by `from`, on a message in the owner's chat.
fn tap(update_id: i64, from: i64, data: &str) -> Value {
    tap_in(update_id, from, OWNER_ID, data)
}

/// A tap on `data` by `from`, on a message in `chat`.
fn tap_in(update_id: i64, from: i64, chat: i64, data: &str) -> Value {
    json!({"update_id": update_id, "callback_query": {
        "id": format!("cb{update_id}"),
        "from": {"id": from, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "42",
        "data": data,
        "message": {"message_id": 5, "date": 1, "chat": {"id": chat, "type": "private"}, "text": "Users"}
    }})
}

/// The texts sent to `chat`, in order.
fn sent_to(h: &Harness, chat: i64) -> Vec<String> {
    h.calls("sendMessage")
        .iter()
        .filter(|b| b["chat_id"] == json!(chat))
        .map(|b| b["text"].as_str().unwrap().to_owned())
        .collect()
}

fn last_to(h: &Harness, chat: i64) -> String {
    sent_to(h, chat).pop().unwrap_or_default()
}

/// The code in a text that says `/pair CODE`.
fn code_in(text: &str) -> String {
    let at = text.find("/pair ").expect("a /pair in the text") + "/pair ".len();
    text[at..].chars().take(8).collect()
}

/// The stranger writes and is told their code; returns it.
async fn ask(h: &Harness, update_id: i64) -> String {
    h.deliver_raw(&stranger(update_id, "hello bot")).await;
    let told = last_to(h, STRANGER_ID);
    assert!(told.contains("private assistant"), "{told}");
    code_in(&told)
}

/// The stranger writes; whether the model answered them.
async fn answered(h: &Harness, update_id: i64) -> bool {
    let before = h.llm_requests().len();
    h.script(200, anthropic_text("Hi Eve"));
    h.deliver_raw(&stranger(update_id, "hello again")).await;
    let asked = h.llm_requests().len() > before;
    if !asked {
        h.llm.lock().unwrap().clear();
    }
    asked && last_to(h, STRANGER_ID) == "Hi Eve"
}

fn main_id() -> ConnectorId {
    ConnectorId::new("main")
}

#[test]
fn the_owner_pairs_a_stranger_who_is_then_answered() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let code = ask(&h, 1).await;
        assert!(h.llm_requests().is_empty(), "no model call for a stranger");
        assert_eq!(code.len(), 8);
        let notice = last_to(&h, OWNER_ID);
        assert!(
            notice.starts_with("Eve (999999999) asks to talk to me")
                && notice.contains(&format!("/pair {code}")),
            "{notice}"
        );
        assert!(!answered(&h, 2).await, "not before the owner approves");

        h.deliver_raw(&owner(3, &format!("/pair {}", code.to_lowercase())))
            .await;
        assert_eq!(
            last_to(&h, OWNER_ID),
            "Eve (999999999) can talk to me now. /users lists who may talk to me and removes people."
        );
        assert!(last_to(&h, STRANGER_ID).starts_with("Welcome!"));
        assert!(answered(&h, 4).await, "paired: the model answers");
        // Buttons serve them too (the choice of model in their chat).
        h.deliver_raw(&tap_in(5, STRANGER_ID, STRANGER_ID, "md:0"))
            .await;
        let tapped = h.calls("answerCallbackQuery");
        let said = tapped.last().unwrap()["text"].as_str().unwrap();
        assert!(said.starts_with("This chat now uses"), "{said}");
        let trail = h
            .app
            .admin()
            .audit_entries(&main_id(), 3_600_000, None, 100)
            .await
            .unwrap();
        let pairing: Vec<_> = trail
            .iter()
            .filter(|e| matches!(e.step, clawless_core::audit::Step::Pairing { .. }))
            .collect();
        assert_eq!(pairing.len(), 1, "{trail:?}");
        assert_eq!(pairing[0].user, OWNER_ID);
        assert_eq!(
            clawless_core::audit::line(pairing[0])
                .split_once("  ")
                .unwrap()
                .1,
            "pairing of Eve (999999999): approved"
        );
        h.assert_spec_clean();
    });
}

#[test]
fn an_expired_code_is_refused_and_a_new_one_given() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let code = ask(&h, 1).await;
        h.clock.advance(61 * MIN);
        h.deliver_raw(&owner(2, &format!("/pair {code}"))).await;
        let said = last_to(&h, OWNER_ID);
        assert!(
            said.starts_with(&format!("No code {code} is waiting")),
            "{said}"
        );
        assert!(!answered(&h, 3).await, "still a stranger");
        let again = code_in(&last_to(&h, STRANGER_ID));
        assert_ne!(again, code, "a new code after the hour");
        h.assert_spec_clean();
    });
}

#[test]
fn a_used_code_is_refused() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let code = ask(&h, 1).await;
        h.deliver_raw(&owner(2, &format!("/pair {code}"))).await;
        assert!(last_to(&h, OWNER_ID).contains("can talk to me now"));
        h.deliver_raw(&owner(3, &format!("/pair {code}"))).await;
        let said = last_to(&h, OWNER_ID);
        assert!(said.contains("it was used already"), "{said}");
        h.deliver_raw(&owner(4, "/pair NOPE")).await;
        assert!(last_to(&h, OWNER_ID).starts_with("No code NOPE is waiting"));
        h.deliver_raw(&owner(5, "/pair")).await;
        assert!(last_to(&h, OWNER_ID).starts_with("Send /pair with the code"));
        let welcomes = sent_to(&h, STRANGER_ID)
            .iter()
            .filter(|t| t.starts_with("Welcome!"))
            .count();
        assert_eq!(welcomes, 1);
        h.assert_spec_clean();
    });
}

#[test]
fn only_the_owner_in_private_pairs() {
    block_on(async {
        let config = Config::load(&clawless_core::config::embedded()).unwrap();
        let users = format!("{OWNER_ID},{MEMBER}");
        let extra = [("TELEGRAM_ALLOWED_USERS", users.as_str())];
        let h = Harness::with_env(Wire::Anthropic, config, &extra).unwrap();
        let code = ask(&h, 1).await;
        h.deliver_raw(&private(2, MEMBER, &format!("/pair {code}")))
            .await;
        assert_eq!(
            last_to(&h, MEMBER),
            "Only the bot's owner can let people in or out."
        );
        h.deliver_raw(&private(3, MEMBER, "/users")).await;
        assert_eq!(
            last_to(&h, MEMBER),
            "Only the bot's owner can let people in or out."
        );
        let mut group = fixtures::update("group_mention", 4);
        group["message"]["text"] = json!(format!("/pair {code}"));
        group["message"]["entities"] = json!([{"type": "bot_command", "offset": 0, "length": 5}]);
        h.deliver_raw(&group).await;
        assert_eq!(
            last_to(&h, GROUP_ID),
            "Do that in your private chat with me, not in a group."
        );
        assert!(!answered(&h, 5).await, "nobody paired them");
        // The code is still good for the owner, in private.
        h.deliver_raw(&owner(6, &format!("/pair {code}"))).await;
        assert!(answered(&h, 7).await);
        h.assert_spec_clean();
    });
}

#[test]
fn users_lists_and_a_remove_tap_unpairs() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        h.deliver_raw(&owner(1, "/users")).await;
        let empty = last_to(&h, OWNER_ID);
        assert!(
            empty.contains(&format!("{OWNER_ID} (you)")) && empty.contains("Paired: nobody"),
            "{empty}"
        );
        let code = ask(&h, 2).await;
        h.deliver_raw(&owner(3, &format!("/pair {code}"))).await;
        h.deliver_raw(&owner(4, "/users")).await;
        let calls = h.calls("sendMessage");
        let list = calls.last().unwrap();
        let text = list["text"].as_str().unwrap();
        assert!(
            text.contains("\n• Eve (999999999), since 2023-11-14"),
            "{text}"
        );
        let rows = list["reply_markup"]["inline_keyboard"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "config users have no button: {rows:?}");
        assert_eq!(rows[0][0]["text"], "Remove Eve");
        let data = rows[0][0]["callback_data"].as_str().unwrap();

        h.deliver_raw(&tap(5, STRANGER_ID, data)).await;
        assert!(answered(&h, 6).await, "a stranger's tap removes nothing");
        h.deliver_raw(&tap(7, OWNER_ID, data)).await;
        h.deliver_raw(&tap(8, OWNER_ID, data)).await;
        let answers: Vec<(String, bool)> = h
            .calls("answerCallbackQuery")
            .iter()
            .map(|a| {
                (
                    a["text"].as_str().unwrap().to_owned(),
                    a["show_alert"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            answers,
            [
                ("Only the bot's owner can remove people.".into(), true),
                (
                    "Removed Eve (999999999): they are a stranger again.".into(),
                    false
                ),
                ("They were not paired any more.".into(), false),
            ]
        );
        assert!(!answered(&h, 9).await, "a stranger again");
        assert!(last_to(&h, STRANGER_ID).contains("/pair "), "a new code");
        h.deliver_raw(&owner(10, "/users")).await;
        assert!(last_to(&h, OWNER_ID).contains("Paired: nobody"));
        h.assert_spec_clean();
    });
}

#[test]
fn the_command_line_approves_lists_and_removes() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let id = main_id();
        let code = ask(&h, 1).await;
        let list = h.app.admin().pairing_list(&id).await.unwrap();
        assert_eq!(list.owner, Some(OWNER_ID));
        assert_eq!(list.configured, [OWNER_ID]);
        assert!(list.paired.is_empty());
        assert_eq!(list.pending.len(), 1);
        assert_eq!(
            (list.pending[0].code.as_str(), list.pending[0].person.id),
            (code.as_str(), STRANGER_ID)
        );

        let paired = h
            .app
            .admin()
            .pairing_approve(&id, &code)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((paired.person.id, paired.by), (STRANGER_ID, None));
        assert!(last_to(&h, STRANGER_ID).starts_with("Welcome!"));
        assert!(h
            .app
            .admin()
            .pairing_approve(&id, &code)
            .await
            .unwrap()
            .is_none());
        let list = h.app.admin().pairing_list(&id).await.unwrap();
        assert_eq!((list.paired.len(), list.pending.len()), (1, 0));
        assert!(answered(&h, 2).await);

        h.clock.advance(MIN);
        assert!(h
            .app
            .admin()
            .pairing_remove(&id, OWNER_ID)
            .await
            .unwrap()
            .is_none());
        let removed = h
            .app
            .admin()
            .pairing_remove(&id, STRANGER_ID)
            .await
            .unwrap();
        assert_eq!(removed.map(|p| p.person.name), Some("Eve".into()));
        assert!(!answered(&h, 3).await);
        let trail = h
            .app
            .admin()
            .audit_entries(&id, 3_600_000, None, 100)
            .await
            .unwrap();
        let lines: Vec<String> = trail
            .iter()
            .filter(|e| e.user == 0 && e.chat == 0)
            .map(clawless_core::audit::line)
            .map(|l| l.split_once("  ").unwrap().1.to_owned())
            .collect();
        assert_eq!(
            lines,
            [
                "pairing of Eve (999999999): approved",
                "pairing of Eve (999999999): removed"
            ]
        );
        h.assert_spec_clean();
    });
}

#[test]
fn one_code_an_hour_and_a_stranger_answered_at_most_every_ten_minutes() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let code = ask(&h, 1).await;
        h.deliver_raw(&stranger(2, "anyone?")).await;
        h.clock.advance(9 * MIN);
        h.deliver_raw(&stranger(3, "hello?")).await;
        assert_eq!(sent_to(&h, STRANGER_ID).len(), 1, "quiet for ten minutes");
        h.clock.advance(2 * MIN);
        assert_eq!(ask(&h, 4).await, code, "the same code within the hour");
        assert_eq!(sent_to(&h, OWNER_ID).len(), 1, "the owner told once");
        h.clock.advance(50 * MIN);
        let next = ask(&h, 5).await;
        assert_ne!(next, code, "a new code once the first expired");
        assert_eq!(sent_to(&h, OWNER_ID).len(), 2);
        // The first no longer pairs; the second does.
        h.deliver_raw(&owner(6, &format!("/pair {code}"))).await;
        assert!(last_to(&h, OWNER_ID).starts_with("No code"));
        h.deliver_raw(&owner(7, &format!("/pair {next}"))).await;
        assert!(answered(&h, 8).await);
        assert!(h.llm_requests().len() == 1, "only the paired message");
        h.assert_spec_clean();
    });
}

#[test]
fn pending_codes_are_bounded_and_the_owner_told_of_the_first_ten() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        for i in 0..51 {
            let who = STRANGER_ID - 1 - i;
            h.deliver_raw(&private(100 + i, who, "let me in")).await;
        }
        for i in 0..50 {
            assert!(last_to(&h, STRANGER_ID - 1 - i).contains("/pair "));
        }
        let last = last_to(&h, STRANGER_ID - 51);
        assert!(
            last.contains("too many people are waiting") && !last.contains("/pair"),
            "{last}"
        );
        assert_eq!(sent_to(&h, OWNER_ID).len(), 10, "the owner is not flooded");
        let pending = h
            .app
            .admin()
            .pairing_list(&main_id())
            .await
            .unwrap()
            .pending;
        assert_eq!(pending.len(), 50);
        h.assert_spec_clean();
    });
}

#[test]
fn a_stranger_told_by_an_older_version_gets_a_code() {
    block_on(async {
        let h = Harness::new(Wire::Anthropic);
        let key = clawless_core::keys::stranger(&main_id(), STRANGER_ID);
        h.platform.kv.put(&key, b"1", None).await.unwrap();
        let code = ask(&h, 1).await;
        assert_eq!(code.len(), 8);
    });
}

#[test]
fn owner_in_main_yaml_is_the_one_who_pairs() {
    block_on(async {
        let mut files = clawless_core::config::embedded();
        files.0.insert(
            "main.yaml".into(),
            format!("connectors:\n  main:\n    owner: {MEMBER}\n"),
        );
        let config = Config::load(&files).unwrap();
        let h = Harness::with_config(Wire::Anthropic, config);
        let code = ask(&h, 1).await;
        assert!(last_to(&h, MEMBER).contains(&format!("/pair {code}")));
        assert!(sent_to(&h, OWNER_ID).is_empty());
        h.deliver_raw(&owner(2, &format!("/pair {code}"))).await;
        assert!(last_to(&h, OWNER_ID).starts_with("Only the bot's owner"));
        h.deliver_raw(&private(3, MEMBER, &format!("/pair {code}")))
            .await;
        assert!(last_to(&h, MEMBER).contains("can talk to me now"));
        assert!(answered(&h, 4).await);
        h.assert_spec_clean();
    });
}
