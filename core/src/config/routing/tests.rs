#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::config::{embedded, Config, ConfigError, ConfigFiles};

/// The repository's config with a second agent, `coder` (🛠 Coder), a second connector
/// `side`, and `routing` as routing.yaml.
fn files(routing: &str) -> ConfigFiles {
    let mut files = embedded();
    let add = |files: &mut ConfigFiles, k: &str, v: &str| files.0.insert(k.into(), v.into());
    add(
        &mut files,
        "agents.d/coder.yaml",
        "id: coder\nname: Coder\nemoji: \"🛠\"\nmodels: [openai/x]\n",
    );
    add(&mut files, "prompts/coder/system.md", "You write code.\n");
    add(
        &mut files,
        "main.yaml",
        "connectors:\n  main: {}\n  side: {token_env: SIDE_TOKEN, webhook_secret_env: SIDE_SECRET}\n",
    );
    add(&mut files, "routing.yaml", routing);
    files
}

fn load(routing: &str) -> Result<Config, ConfigError> {
    Config::load(&files(routing))
}

fn fails(routing: &str) -> (String, String, String) {
    let e = load(routing).unwrap_err();
    (e.file, e.field, e.message)
}

const PRIVATE: Place = Place {
    chat: 7,
    topic: None,
    private: true,
};

fn group(chat: i64, topic: Option<i64>) -> Place {
    Place {
        chat,
        topic,
        private: false,
    }
}

#[test]
fn the_old_form_stays_valid_and_fills_every_connector() {
    let cfg = load("default_agent: assistant\nconnectors:\n  side: coder\n").unwrap();
    let r = &cfg.routing;
    assert_eq!(r.connectors["main"].agent, "assistant");
    assert_eq!(r.connectors["side"].allowed(), ["coder"]);
    assert_eq!(r.route("side", &PRIVATE).unwrap().agent, "coder");
    assert_eq!(
        r.route("main", &group(-5, None)).unwrap().agent,
        "assistant"
    );
    assert!(r.route("ghost", &PRIVATE).is_none());
}

#[test]
fn the_first_rule_that_matches_wins_then_the_connector_entry() {
    let cfg = load(
        "default_agent: assistant
connectors:
  main: {agent: assistant, agents: [coder]}
rules:
  - {chat: -100, topic: 5, agent: coder}
  - {chat: -100, agent: assistant, agents: [coder, assistant]}
  - {connector: side, kind: private, agent: coder}
  - {kind: group, agent: coder}
",
    )
    .unwrap();
    let r = &cfg.routing;
    let agent = |conn: &str, place: Place| r.route(conn, &place).unwrap().agent.clone();
    assert_eq!(agent("main", group(-100, Some(5))), "coder");
    assert_eq!(agent("main", group(-100, Some(6))), "assistant");
    assert_eq!(agent("main", group(-100, None)), "assistant");
    assert_eq!(agent("main", group(-200, None)), "coder");
    assert_eq!(agent("side", PRIVATE), "coder");
    assert_eq!(agent("main", PRIVATE), "assistant");
    // The routed agent first, each once.
    let second = r.route("main", &group(-100, None)).unwrap();
    assert_eq!(second.allowed(), ["assistant", "coder"]);
    assert_eq!(r.connectors["main"].allowed(), ["assistant", "coder"]);
    assert_eq!(r.agents_of("side"), ["assistant", "coder"]);
    // The validated routing survives the JSON the Worker embeds.
    assert_eq!(Config::from_json(&cfg.to_json()).unwrap(), cfg);
}

#[test]
fn a_rule_for_every_chat_of_a_connector_is_its_default() {
    let cfg = load(
        "default_agent: assistant\nrules:\n  - {chat: 1, agent: assistant}\n  - {connector: side, agent: coder}\n",
    )
    .unwrap();
    assert_eq!(cfg.routing.connector_route("side").unwrap().agent, "coder");
    assert_eq!(
        cfg.routing.connector_route("main").unwrap().agent,
        "assistant"
    );
}

#[test]
fn errors_name_the_field() {
    let head = "default_agent: assistant\n";
    let cases = [
        ("rules:\n  - {agent: coder}\n", "rules[0]", "matches nothing"),
        (
            "rules:\n  - {chat: 1, agent: ghost}\n",
            "rules[0].agent",
            "unknown agent \"ghost\"",
        ),
        (
            "rules:\n  - {chat: 1, agent: coder}\n  - {kind: private, agent: coder, agents: [assistant, ghost]}\n",
            "rules[1].agents[1]",
            "unknown agent \"ghost\"",
        ),
        (
            "rules:\n  - {connector: nope, agent: coder}\n",
            "rules[0].connector",
            "unknown connector",
        ),
        (
            "rules:\n  - {topic: 5, agent: coder}\n",
            "rules[0].topic",
            "give chat too",
        ),
        (
            "rules:\n  - {kind: channel, agent: coder}\n",
            "rules[0]",
            "unknown variant",
        ),
        (
            "rules:\n  - {chat: 1, agent: coder, agnets: [x]}\n",
            "rules[0]",
            "unknown field",
        ),
        (
            "connectors:\n  main: ghost\n",
            "connectors.main.agent",
            "unknown agent",
        ),
        (
            "connectors:\n  main: {agent: coder, agents: [ghost]}\n",
            "connectors.main.agents[0]",
            "unknown agent",
        ),
        (
            "connectors:\n  nope: coder\n",
            "connectors.nope",
            "unknown connector",
        ),
    ];
    for (body, field, message) in cases {
        let (file, f, m) = fails(&format!("{head}{body}"));
        assert_eq!(
            (file.as_str(), f.as_str()),
            ("routing.yaml", field),
            "{body}"
        );
        assert!(m.contains(message), "{body}: {m}");
    }
    let (file, field, _) = fails("default_agent: ghost\n");
    assert_eq!(
        (file.as_str(), field.as_str()),
        ("routing.yaml", "default_agent")
    );
}

#[test]
fn a_persona_is_identity_then_system_style_safety() {
    let mut f = files("default_agent: assistant\n");
    f.0.insert("prompts/coder/safety.md".into(), "Never run rm.\n".into());
    f.0.insert("prompts/coder/style.md".into(), "\nTerse.\n".into());
    let cfg = Config::load(&f).unwrap();
    let coder = &cfg.agents["coder"];
    assert_eq!(
        coder.system_prompt,
        "You are 🛠 Coder.\n\nYou write code.\n\nTerse.\n\nNever run rm."
    );
    assert_eq!(coder.display_name(), "🛠 Coder");
    // Without style.md and safety.md: identity and system.md alone.
    let cfg = load("default_agent: assistant\n").unwrap();
    assert_eq!(
        cfg.agents["coder"].system_prompt,
        "You are 🛠 Coder.\n\nYou write code."
    );
    // An agent without name or emoji has no identity line.
    f.0.insert(
        "agents.d/coder.yaml".into(),
        "id: coder\nmodels: [openai/x]\n".into(),
    );
    let cfg = Config::load(&f).unwrap();
    assert!(cfg.agents["coder"]
        .system_prompt
        .starts_with("You write code."));
    assert_eq!(cfg.agents["coder"].display_name(), "coder");
}

#[test]
fn an_emoji_is_short_and_has_no_spaces() {
    for bad in ["\"\"", "\"a b\"", &format!("\"{}\"", "🦊".repeat(9))] {
        let mut f = files("default_agent: assistant\n");
        f.0.insert(
            "agents.d/coder.yaml".into(),
            format!("id: coder\nemoji: {bad}\nmodels: [openai/x]\n"),
        );
        let e = Config::load(&f).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("agents.d/coder.yaml", "emoji"),
            "{bad}"
        );
    }
}
