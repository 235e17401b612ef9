#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::config::{embedded, Config, ConfigError, ConfigFiles};

/// The repository's config with `agents.d/assistant.yaml` holding `extra` after its models,
/// and a second agent `researcher`.
fn load(extra: &str) -> Result<Config, ConfigError> {
    let mut files: ConfigFiles = embedded();
    files.0.insert(
        "agents.d/assistant.yaml".into(),
        format!("id: assistant\nmodels: [openai/x]\n{extra}"),
    );
    files.0.insert(
        "agents.d/researcher.yaml".into(),
        "id: researcher\nmodels: [openai/x]\ntools: [web_fetch]\n".into(),
    );
    files.0.insert(
        "prompts/researcher/system.md".into(),
        "You research.".into(),
    );
    Config::load(&files)
}

#[test]
fn spawn_and_agent_tools_are_read() {
    let cfg = load(
        "tools: [web_fetch, spawn]\nspawn: {agents: [researcher], max_depth: 3, timeout_secs: 60, max_tokens: 5000, tools: [web_fetch]}\nagent_tools:\n  - {agent: researcher, name: research, description: Researches.}\n",
    )
    .unwrap();
    let a = &cfg.agents["assistant"];
    assert_eq!(
        (
            a.spawn.agents.as_slice(),
            a.spawn.max_depth,
            a.spawn.timeout_secs
        ),
        (&["researcher".to_owned()][..], 3, 60)
    );
    assert_eq!(a.agent_tools[0].name, "research");
    // The Worker embeds the config as JSON: nothing is lost.
    assert_eq!(Config::from_json(&cfg.to_json()).unwrap(), cfg);
    // Defaults.
    let d = &cfg.agents["researcher"].spawn;
    assert_eq!((d.max_depth, d.timeout_secs, d.background), (2, 120, false));
}

#[test]
fn an_unknown_agent_is_refused_naming_file_and_field() {
    let e = load("tools: [spawn]\nspawn: {agents: [researcher, ghost]}\n").unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("agents.d/assistant.yaml", "spawn.agents[1]")
    );
    assert!(e.message.contains("unknown agent \"ghost\""), "{e}");
    let e = load("agent_tools: [{agent: ghost, name: g, description: d}]\n").unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("agents.d/assistant.yaml", "agent_tools[0].agent")
    );
}

#[test]
fn bounds_and_names_are_checked() {
    let field = |extra: &str| load(extra).unwrap_err().field;
    assert_eq!(field("spawn: {max_depth: 0}\n"), "spawn.max_depth");
    assert_eq!(field("spawn: {max_depth: 9}\n"), "spawn.max_depth");
    assert_eq!(field("spawn: {timeout_secs: 0}\n"), "spawn.timeout_secs");
    assert_eq!(field("spawn: {max_tokens: 10}\n"), "spawn.max_tokens");
    assert_eq!(
        field("tools: [spawn]\nspawn: {tools: [exec]}\n"),
        "spawn.tools[0]"
    );
    assert_eq!(
        field("agent_tools: [{agent: researcher, name: web_fetch, description: d}]\n"),
        "agent_tools[0].name"
    );
    assert_eq!(
        field("agent_tools: [{agent: researcher, name: 'has space', description: d}]\n"),
        "agent_tools[0].name"
    );
    assert_eq!(
        field("agent_tools: [{agent: researcher, name: r, description: d}, {agent: researcher, name: r, description: e}]\n"),
        "agent_tools[1].name"
    );
    assert_eq!(
        field("agent_tools: [{agent: researcher, name: r, description: ''}]\n"),
        "agent_tools[0].description"
    );
    assert!(load("spawn: {agentz: []}\n")
        .unwrap_err()
        .message
        .contains("unknown field"));
}
