//! OpenClaw's state directory (the fixture `tests/fixtures/openclaw`: its workspace with
//! `MEMORY.md` and a lower-case `memory.md`, `openclaw.json`, a session transcript, managed
//! skills) mapped and written: the notes go to the `openclaw` agent's memory, which recalls
//! them when that agent answers, and the default agent's memory is as it was; the owner's
//! chat continues the OpenClaw conversation with the persona; the time zone is the owner's
//! chat's; every file or setting not carried is listed with why; a second run writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use std::collections::BTreeMap;

use clawless_core::archive::openclaw::{self, Chat};
use clawless_core::ids::{ConnectorId, Scope};
use clawless_core::Config;
use clawless_testkit::fixtures::{self, OWNER_ID};
use clawless_testkit::llm::anthropic_text;
use futures::executor::block_on;
use serde_json::{json, Value};
use support::{Harness, Wire};

/// Every file of the fixture, by path below it, as the native shell reads the directory.
fn fixture() -> BTreeMap<String, Vec<u8>> {
    let root = clawless_testkit::repo::root().join("tests/fixtures/openclaw");
    let mut files = BTreeMap::new();
    for path in clawless_testkit::repo::files_ending(&root, &[""]) {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy();
        files.insert(rel.replace('\\', "/"), std::fs::read(&path).unwrap());
    }
    files
}

fn message(update_id: i64, text: &str) -> Value {
    let mut u = fixtures::update("private_text", update_id);
    u["message"]["message_id"] = json!(100 + update_id);
    u["message"]["text"] = json!(text);
    u
}

/// The embedded config with agent `openclaw` (the persona as its prompt) offered beside the
/// default one, as `clawless import --from openclaw` leaves the config directory.
fn config_with_persona(persona: &str) -> Config {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let mut agent = config.agents["assistant"].clone();
    agent.id = "openclaw".into();
    agent.name = Some("Jarvis".into());
    agent.system_prompt = persona.to_owned();
    config.agents.insert("openclaw".into(), agent);
    let route = config.routing.connectors.get_mut("main").unwrap();
    route.agents.push("openclaw".into());
    config
}

async fn recall(h: &Harness, agent: &str, query: &str) -> String {
    let scope = Scope::new(format!("{agent}/main/u{OWNER_ID}"));
    let hits = h.app.memory_store().search(&scope, query).await.unwrap();
    hits.into_iter()
        .map(|hit| hit.text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn everything_is_mapped_or_listed_with_why() {
    let plan = openclaw::plan(&fixture());
    assert_eq!(
        plan.memory.keys().collect::<Vec<_>>(),
        ["MEMORY.md", "memory/2026-11-20.md", "memory/2026-11-21.md"]
    );
    let memory = &plan.memory["MEMORY.md"];
    assert!(
        memory.contains("7391") && memory.contains("Lisbon"),
        "{memory}"
    );
    assert!(plan
        .remarks
        .join("\n")
        .contains("memory.md: joined to MEMORY.md"));
    assert_eq!(
        plan.skills.keys().collect::<Vec<_>>(),
        [
            "pomodoro/SKILL.md",
            "weather/SKILL.md",
            "weather/cities.txt"
        ]
    );
    assert!(
        String::from_utf8_lossy(&plan.skills["weather/SKILL.md"]).contains("wttr.in"),
        "the workspace's weather skill, not the managed copy"
    );
    assert_eq!(
        plan.persona_from,
        ["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md"]
    );
    let s = &plan.settings;
    assert_eq!(
        s.models,
        [
            "anthropic/claude-opus-4-6",
            "google/gemini-2.5-pro",
            "zai/glm-4.7"
        ]
    );
    assert_eq!(s.timezone.as_deref(), Some("Europe/Zurich"));
    assert_eq!(s.telegram_users, [OWNER_ID, 444_444_444]);
    assert_eq!(plan.conversations.len(), 1, "{:?}", plan.conversations);
    assert_eq!(plan.conversations[0].chat, Chat::Owner);
    assert_eq!(plan.conversations[0].messages.len(), 4);

    let unmapped = plan.unmapped.join("\n");
    for (listed, why) in [
        ("workspace/HEARTBEAT.md", "reminders"),
        ("workspace/BOOTSTRAP.md", "first-run"),
        ("workspace/canvas/index.html", "no place"),
        ("workspace/skills/loose/notes.md", "SKILL.md"),
        (
            "skills/weather/",
            "the workspace has a skill of the same name",
        ),
        ("telegram:group:-1001234567890", "each member"),
        ("cron:daily-digest", "not a chat"),
        ("earlier conversations", "1 of them, not carried"),
        ("openclaw.json gateway", "no setting here"),
        ("thinkingDefault", "no setting here"),
        ("@sam", "not a Telegram user id"),
        ("channels.telegram: its bot token", "TELEGRAM_BOT_TOKEN"),
        ("credentials/telegram-pairing.json", "no place"),
    ] {
        let line = plan.unmapped.iter().find(|l| l.contains(listed));
        assert!(
            line.is_some_and(|l| l.contains(why)),
            "{listed} listed with why ({why}): {unmapped}"
        );
    }
    assert!(!unmapped.contains("FIXTURE-NOT-A-TOKEN"), "no value shown");
    assert!(!unmapped.contains("memory.md"), "memory.md was mapped");
}

#[test]
fn the_persona_recalls_the_notes_and_continues_the_conversation() {
    block_on(async {
        let plan = openclaw::plan(&fixture());
        let h = Harness::with_config(
            Wire::Anthropic,
            config_with_persona(plan.persona.as_deref().unwrap()),
        );
        let main = ConnectorId::new("main");
        let admin = h.app.admin();
        let (models, not) = admin.openclaw_models(&plan);
        assert_eq!(
            models,
            ["anthropic/claude-opus-4-6", "gemini/gemini-2.5-pro"]
        );
        assert!(
            not.join("\n").contains("zai/glm-4.7: no provider zai"),
            "{not:?}"
        );

        let done = admin
            .import_openclaw(&plan, &main, "openclaw")
            .await
            .unwrap();
        assert_eq!(done.agent, "openclaw");
        assert_eq!(
            (
                done.notes_added,
                done.skill_files_added,
                done.conversations_added
            ),
            (3, 3, 1),
            "{done:?}"
        );
        let said = done.said.join("\n");
        assert!(said.contains("Europe/Zurich"), "{said}");
        assert!(
            said.contains("444444444") && !said.contains(&OWNER_ID.to_string()),
            "{said}"
        );

        // The persona's memory holds the notes; the default agent's is as it was.
        assert!(recall(&h, "openclaw", "bike lock code")
            .await
            .contains("7391"));
        assert!(recall(&h, "openclaw", "sister Ana")
            .await
            .contains("Lisbon"));
        assert!(recall(&h, "assistant", "bike lock code").await.is_empty());

        // The owner's chat talks with the persona, which has the conversation and the notes.
        h.script(200, anthropic_text("It is 7391."));
        h.deliver_raw(&message(1, "What is my bike lock code?"))
            .await;
        let asked = h.llm_requests().last().unwrap().clone();
        let system = asked["system"].to_string();
        assert!(system.contains("Jarvis"), "the persona answers: {system}");
        // Recalled memory may come in the system prompt or beside the question.
        let recalled = asked.to_string();
        assert!(
            recalled.contains("7391"),
            "the note is recalled: {recalled}"
        );
        let history = asked["messages"].to_string();
        assert!(
            history.contains("Platform 7"),
            "the conversation goes on: {history}"
        );
        h.deliver_raw(&message(2, "/agent openclaw")).await;
        let reply = h.sent_texts().last().unwrap().clone();
        assert!(reply.contains("already talks with Jarvis"), "{reply}");
        h.deliver_raw(&message(3, "/timezone")).await;
        assert!(h.sent_texts().last().unwrap().contains("Europe/Zurich"));

        let again = admin
            .import_openclaw(&plan, &main, "openclaw")
            .await
            .unwrap();
        assert_eq!(
            (
                again.notes_added,
                again.notes_appended,
                again.skill_files_added
            ),
            (0, 0, 0),
            "{again:?}"
        );
        assert_eq!(again.conversations_added, 0, "{again:?}");
        assert!(
            again
                .unmapped
                .join("\n")
                .contains("has a conversation here already"),
            "the chat went on since: {again:?}"
        );
    });
}
