//! Agents per chat: `routing.yaml` rules route a group by its chat id, a forum topic by its
//! topic, chats by kind, the rest to the connector's entry and then `default_agent`; `/agent`
//! switches among the agents a chat may use (the next message answered by the other
//! persona, in a fresh conversation) and refuses the others. Asserted on the system prompt
//! the scripted model receives.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use clawless_core::{Config, ConfigFiles};
use clawless_testkit::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

const ASSISTANT: &str = "helpful personal assistant";
const CODER: &str = "You write code.";

/// The repository's config with a second persona, `coder` (🛠 Coder, with style and safety
/// files), and `routing` as routing.yaml.
fn config(routing: &str) -> Config {
    let mut files: ConfigFiles = clawless_core::config::embedded();
    for (path, text) in [
        (
            "agents.d/coder.yaml",
            "id: coder\nname: Coder\nemoji: \"🛠\"\nmodels: [anthropic/claude-sonnet-4-5]\n",
        ),
        ("prompts/coder/system.md", "You write code.\n"),
        ("prompts/coder/style.md", "Answer in one line.\n"),
        ("prompts/coder/safety.md", "Never delete files.\n"),
        ("routing.yaml", routing),
    ] {
        files.0.insert(path.into(), text.into());
    }
    Config::load(&files).unwrap()
}

fn harness(routing: &str) -> Harness {
    Harness::with_config(Wire::Anthropic, config(routing))
}

/// The system prompt of the last model request.
fn last_system(h: &Harness) -> String {
    let requests = h.llm_requests();
    let last = requests.last().expect("a model request");
    match &last["system"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `fixture` with its text replaced (its mention entities dropped: a command needs none).
fn says(fixture: &str, id: i64, text: &str) -> Value {
    let mut u = fixtures::update(fixture, id);
    u["message"]["text"] = json!(text);
    if let Some(m) = u["message"].as_object_mut() {
        m.remove("entities");
    }
    u
}

/// Which persona answered `fixture`.
async fn who_answers(h: &Harness, fixture: &str, id: i64) -> &'static str {
    h.script(200, anthropic_text("ok"));
    h.deliver(fixture, id).await;
    let system = last_system(h);
    match (system.contains(ASSISTANT), system.contains(CODER)) {
        (true, false) => "assistant",
        (false, true) => "coder",
        _ => panic!("unexpected system prompt: {system}"),
    }
}

fn tap(update_id: i64, from: i64, data: &str) -> Value {
    json!({"update_id": update_id, "callback_query": {
        "id": format!("cb{update_id}"),
        "from": {"id": from, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "42",
        "data": data,
        "message": {"message_id": 5, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "agents"}
    }})
}

fn answers(h: &Harness) -> Vec<String> {
    h.calls("answerCallbackQuery")
        .iter()
        .map(|b| b["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_group_is_routed_by_its_chat_id_and_the_rest_to_the_default() {
    block_on(async {
        let h = harness(&format!(
            "default_agent: assistant\nrules:\n  - {{chat: {GROUP_ID}, agent: coder}}\n"
        ));
        assert_eq!(who_answers(&h, "group_mention", 1).await, "coder");
        assert_eq!(who_answers(&h, "private_text", 2).await, "assistant");
        h.assert_spec_clean();
    });
}

#[test]
fn a_forum_topic_is_routed_by_its_topic() {
    block_on(async {
        let h = harness(&format!(
            "default_agent: assistant\nrules:\n  - {{chat: {GROUP_ID}, topic: 5, agent: coder}}\n"
        ));
        assert_eq!(who_answers(&h, "forum_topic_mention", 1).await, "coder");
        // The same group outside the topic: no rule matches.
        assert_eq!(who_answers(&h, "group_mention", 2).await, "assistant");
        let sent = h.calls("sendMessage");
        assert_eq!(sent[0]["message_thread_id"], 5);
    });
}

#[test]
fn private_and_group_chats_are_routed_by_kind() {
    block_on(async {
        let h = harness(
            "default_agent: assistant\nrules:\n  - {kind: group, agent: coder}\n  - {kind: private, agent: assistant}\n",
        );
        assert_eq!(who_answers(&h, "private_text", 1).await, "assistant");
        assert_eq!(who_answers(&h, "group_mention", 2).await, "coder");
        assert_eq!(who_answers(&h, "forum_topic_mention", 3).await, "coder");
    });
}

#[test]
fn without_a_matching_rule_the_connector_entry_answers() {
    block_on(async {
        let h = harness(&format!(
            "default_agent: assistant\nconnectors:\n  main: coder\nrules:\n  - {{chat: {GROUP_ID}, agent: assistant}}\n"
        ));
        assert_eq!(who_answers(&h, "private_text", 1).await, "coder");
        assert_eq!(who_answers(&h, "group_mention", 2).await, "assistant");
    });
}

#[test]
fn agent_switches_the_persona_and_starts_afresh() {
    block_on(async {
        let h = harness(
            "default_agent: assistant\nconnectors:\n  main: {agent: assistant, agents: [coder]}\n",
        );
        h.deliver_raw(&says("private_text", 1, "/agent")).await;
        let menu = h.calls("sendMessage").pop().unwrap();
        let text = menu["text"].as_str().unwrap();
        assert!(
            text.starts_with("This chat talks with Assistant."),
            "{text}"
        );
        assert!(
            text.contains("• Assistant: /agent assistant (current)"),
            "{text}"
        );
        assert!(text.contains("• 🛠 Coder: /agent coder\n"), "{text}");
        let buttons: Vec<(&str, &str)> = menu["reply_markup"]["inline_keyboard"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let b = &row[0];
                (
                    b["text"].as_str().unwrap(),
                    b["callback_data"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(buttons, [("Assistant", "ag:0"), ("🛠 Coder", "ag:1")]);

        assert_eq!(who_answers(&h, "private_text", 2).await, "assistant");
        // The switch ends the conversation: its summary (by the assistant's model) goes to
        // the assistant's memory.
        h.script(200, anthropic_text("- Ada asked what the bot can do"));
        h.deliver_raw(&says("private_text", 3, "/agent Coder"))
            .await;
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "Now talking with 🛠 Coder. This is a fresh conversation."
        );
        assert!(support::daily(&h)
            .await
            .contains("Ada asked what the bot can do"));

        h.script(200, anthropic_text("ok"));
        h.deliver("private_text", 4).await;
        let system = last_system(&h);
        // The persona: identity, system.md, style.md, safety.md, in that order.
        let at = |s: &str| {
            system
                .find(s)
                .unwrap_or_else(|| panic!("{s:?} in {system}"))
        };
        assert!(at("You are 🛠 Coder.") < at(CODER));
        assert!(at(CODER) < at("Answer in one line."));
        assert!(at("Answer in one line.") < at("Never delete files."));
        assert!(!system.contains(ASSISTANT));
        // A fresh conversation: only this message.
        let last = h.llm_requests().pop().unwrap();
        assert_eq!(last["messages"].as_array().unwrap().len(), 1, "{last}");

        // A tap goes back; a repeated choice changes nothing.
        h.deliver_raw(&tap(5, OWNER_ID, "ag:0")).await;
        assert_eq!(
            answers(&h)[0],
            "Now talking with Assistant. This is a fresh conversation."
        );
        h.deliver_raw(&tap(6, OWNER_ID, "ag:0")).await;
        assert_eq!(answers(&h)[1], "This chat already talks with Assistant.");
        assert_eq!(who_answers(&h, "private_text", 7).await, "assistant");
        h.assert_spec_clean();
    });
}

#[test]
fn an_agent_the_chat_may_not_use_is_refused() {
    block_on(async {
        let h = harness(&format!(
            "default_agent: assistant\nrules:\n  - {{kind: private, agent: assistant, agents: [coder]}}\n  - {{chat: {GROUP_ID}, agent: assistant}}\n"
        ));
        // The group may use only the assistant, though coder exists.
        h.deliver_raw(&says("group_mention", 1, "/agent coder"))
            .await;
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "This chat cannot use \"coder\". It may use: assistant."
        );
        h.deliver_raw(&says("group_mention", 2, "/agent")).await;
        let menu = h.calls("sendMessage").pop().unwrap();
        assert_eq!(
            menu["text"],
            "This chat talks with Assistant, the only agent it may use."
        );
        assert!(menu.get("reply_markup").is_none(), "{menu}");
        assert_eq!(who_answers(&h, "group_mention", 3).await, "assistant");

        // In private: an unknown name, a stranger's tap and a stale button change nothing.
        h.deliver_raw(&says("private_text", 4, "/agent ghost"))
            .await;
        assert_eq!(
            h.sent_texts().last().unwrap(),
            "This chat cannot use \"ghost\". It may use: assistant, coder."
        );
        h.deliver_raw(&tap(5, STRANGER_ID, "ag:1")).await;
        h.deliver_raw(&tap(6, OWNER_ID, "ag:9")).await;
        let got = answers(&h);
        assert!(got[0].starts_with("Only people this bot serves"), "{got:?}");
        assert_eq!(got[1], "That agent is no longer offered here.");
        assert_eq!(who_answers(&h, "private_text", 7).await, "assistant");
        h.assert_spec_clean();
    });
}

#[test]
fn an_agent_tap_while_an_approval_waits_is_refused_and_the_wait_goes_on() {
    block_on(async {
        let mut config = config(
            "default_agent: assistant\nconnectors:\n  main: {agent: assistant, agents: [coder]}\n",
        );
        let assistant = config.agents.get_mut("assistant").unwrap();
        assistant
            .policy
            .tools
            .insert("memory_write".into(), clawless_core::config::Rule::Ask);
        let h = Harness::with_config(Wire::Anthropic, config);
        h.script(
            200,
            clawless_testkit::llm::anthropic_tool_use(
                "t1",
                "memory_write",
                json!({"target": "daily", "content": "buy milk"}),
            ),
        );
        h.deliver_raw(&says("private_text", 1, "remember: buy milk"))
            .await;
        let approval = h.calls("sendMessage").pop().unwrap();
        let allow = approval["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .unwrap()
            .to_owned();

        h.deliver_raw(&tap(2, OWNER_ID, "ag:1")).await;
        assert_eq!(
            answers(&h),
            ["Answer the request above first, or /stop it."]
        );
        // Still the assistant's turn, still waiting: the allow resumes it.
        h.script(200, anthropic_text("Saved."));
        h.deliver_raw(&tap(3, OWNER_ID, &allow)).await;
        assert_eq!(h.sent_texts().last().unwrap(), "Saved.");
        assert!(support::daily(&h).await.contains("buy milk"));
        assert_eq!(who_answers(&h, "private_text", 4).await, "assistant");
        h.assert_spec_clean();
    });
}
