//! Reading the YAML tree ([`Config::load`]): `main.yaml`, `routing.yaml`, the agents, the
//! providers, the prompts and the skills, each parsed with errors naming the file and the
//! line, then validated as a whole.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::validate::{valid_id, validate_agent};
use super::*;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct MainFile {
    #[serde(default)]
    connectors: BTreeMap<String, ConnectorConfig>,
    #[serde(default)]
    session: SessionConfig,
    #[serde(default)]
    inbox: InboxConfig,
    #[serde(default)]
    memory: SearchConfig,
    #[serde(default)]
    limits: LimitsConfig,
    #[serde(default)]
    approvals: ApprovalConfig,
    #[serde(default)]
    audit: AuditConfig,
    #[serde(default)]
    web: WebConfig,
    #[serde(default)]
    media: MediaConfig,
    #[serde(default)]
    streaming: StreamingConfig,
    #[serde(default)]
    backup: BackupConfig,
    #[serde(default)]
    hooks: Vec<HookConfig>,
    #[serde(default)]
    watches: WatchConfig,
}

impl Config {
    /// Parses and validates the tree: required files, unknown fields, duplicate ids, references
    /// between files, prompts.
    pub fn load(files: &ConfigFiles) -> Result<Config, ConfigError> {
        let get = |name: &str| {
            files
                .0
                .get(name)
                .ok_or_else(|| err(name, "-", "file is missing"))
        };
        let main: MainFile = parse("main.yaml", get("main.yaml")?)?;
        let routing = get("routing.yaml")?;

        let mut providers = BTreeMap::new();
        for (path, text) in files
            .0
            .range("providers.d/".to_owned()..)
            .take_while(|(p, _)| p.starts_with("providers.d/"))
        {
            if !path.ends_with(".yaml") && !path.ends_with(".yml") {
                continue;
            }
            let p: ProviderConfig = parse(path, text)?;
            p.check(path)?;
            if let Some(prev) = providers.insert(p.id.clone(), p) {
                return Err(err(
                    path,
                    "id",
                    format!("duplicate provider id {:?}", prev.id),
                ));
            }
        }

        let mut agents = BTreeMap::new();
        let mut paths = BTreeMap::new();
        for (path, text) in files
            .0
            .range("agents.d/".to_owned()..)
            .take_while(|(p, _)| p.starts_with("agents.d/"))
        {
            if !path.ends_with(".yaml") && !path.ends_with(".yml") {
                continue;
            }
            let mut a: AgentConfig = parse(path, text)?;
            validate_agent(path, &a, &providers)?;
            paths.insert(a.id.clone(), path.clone());
            a.system_prompt = persona::compose(files, &a)?;
            if let Some(prev) = agents.insert(a.id.clone(), a) {
                return Err(err(path, "id", format!("duplicate agent id {:?}", prev.id)));
            }
        }
        if agents.is_empty() {
            return Err(err("agents.d/", "-", "no agent defined"));
        }
        spawn::check_links(&agents, &paths)?;
        let skills = files
            .0
            .range("skills/".to_owned()..)
            .take_while(|(p, _)| p.starts_with("skills/"))
            .map(|(p, text)| (p["skills/".len()..].to_owned(), text.clone()))
            .collect();

        let mut connectors = main.connectors;
        if connectors.is_empty() {
            connectors.insert(
                "main".into(),
                ConnectorConfig {
                    allowed_users: vec![],
                    owner: None,
                    token_env: default_token_env(),
                    webhook_secret_env: default_secret_env(),
                    shared_memory: false,
                },
            );
        }
        for (id, c) in &connectors {
            if !valid_id(id) {
                return Err(err(
                    "main.yaml",
                    format!("connectors.{id}"),
                    "connector ids are 1 to 64 letters, digits, _ and -",
                ));
            }
            if c.owner.is_some_and(|o| o <= 0) {
                return Err(err(
                    "main.yaml",
                    format!("connectors.{id}.owner"),
                    "must be a person's Telegram user id (a positive number), not a group's",
                ));
            }
        }
        let routing = routing::load(routing, &agents, &connectors)?;
        if main.session.history_window < 2 {
            return Err(err(
                "main.yaml",
                "session.history_window",
                "must be at least 2",
            ));
        }
        if main.inbox.max_attempts == 0 {
            return Err(err("main.yaml", "inbox.max_attempts", "must be at least 1"));
        }
        if main.inbox.dedupe_hours < 24 {
            return Err(err(
                "main.yaml",
                "inbox.dedupe_hours",
                "must be at least 24 (Telegram re-sends for a day)",
            ));
        }
        if let Some((field, why)) = main.memory.invalid() {
            return Err(err("main.yaml", format!("memory.{field}"), why));
        }
        if main.limits.max_input_chars < 100 {
            return Err(err(
                "main.yaml",
                "limits.max_input_chars",
                "must be at least 100",
            ));
        }
        if !main.limits.caps().is_valid() {
            return Err(err(
                "main.yaml",
                "limits",
                "spend caps are US dollars: a number of at least 0",
            ));
        }
        if let Some((field, message)) = main.web.problem() {
            return Err(err("main.yaml", field, message));
        }
        if let Some((field, message)) = main.media.problem() {
            return Err(err("main.yaml", field, message));
        }
        if !(100..=10_000).contains(&main.streaming.draft_every_ms) {
            return Err(err(
                "main.yaml",
                "streaming.draft_every_ms",
                "must be 100 to 10000",
            ));
        }
        if let Some((field, why)) = main.backup.problem() {
            return Err(err("main.yaml", field, why));
        }
        if !(1..=50).contains(&main.limits.max_reply_parts) {
            return Err(err(
                "main.yaml",
                "limits.max_reply_parts",
                "must be between 1 and 50",
            ));
        }
        check_hooks(&main.hooks, &connectors, &agents)?;
        if let Some((field, why)) = main.watches.problem() {
            return Err(err("main.yaml", field, why));
        }
        Ok(Config {
            connectors,
            session: main.session,
            inbox: main.inbox,
            memory: main.memory,
            limits: main.limits,
            approvals: main.approvals,
            audit: main.audit,
            web: main.web,
            media: main.media,
            streaming: main.streaming,
            backup: main.backup,
            hooks: main.hooks,
            watches: main.watches,
            routing,
            agents,
            providers,
            skills,
        })
    }
}

/// `hooks:`: each hook on its own, no name twice, and the connector and agent it names exist.
fn check_hooks(
    hooks: &[HookConfig],
    connectors: &BTreeMap<String, ConnectorConfig>,
    agents: &BTreeMap<String, AgentConfig>,
) -> Result<(), ConfigError> {
    if hooks.len() > hooks::MAX_HOOKS {
        let most = hooks::MAX_HOOKS;
        return Err(err("main.yaml", "hooks", format!("at most {most} hooks")));
    }
    for (i, h) in hooks.iter().enumerate() {
        if let Some((field, why)) = h.problem(i) {
            return Err(err("main.yaml", field, why));
        }
        if hooks[..i].iter().any(|o| o.name == h.name) {
            let why = format!("{:?} is listed twice", h.name);
            return Err(err("main.yaml", format!("hooks[{i}].name"), why));
        }
        if let Some(c) = h
            .connector
            .as_deref()
            .filter(|c| !connectors.contains_key(*c))
        {
            let why = format!("no connector {c:?} in connectors:");
            return Err(err("main.yaml", format!("hooks[{i}].connector"), why));
        }
        if h.connector.is_none() && connectors.len() > 1 && !connectors.contains_key("main") {
            let why = "several connectors and none is `main`: say which one";
            return Err(err("main.yaml", format!("hooks[{i}].connector"), why));
        }
        if let Some(a) = h.agent.as_deref().filter(|a| !agents.contains_key(*a)) {
            let why = format!("no agent {a:?} in agents.d/");
            return Err(err("main.yaml", format!("hooks[{i}].agent"), why));
        }
    }
    Ok(())
}
