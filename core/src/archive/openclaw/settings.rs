//! `openclaw.json`: the settings that map onto this assistant, read conservatively. What
//! maps: the default agent's model and its fallbacks (`agents.defaults.model`, as the
//! `openclaw` agent's models where this config has the provider), the person's time zone
//! (`agents.defaults.userTimezone`, the owner's private chat's `/timezone`), and who was let
//! in on Telegram (`channels.telegram.allowFrom`: said, not applied: who may talk is this
//! config's to say). Every other section is named as not carried; no value of the file is
//! ever shown (it can hold tokens).

use serde_json::Value;

use super::json5;

/// What `openclaw.json` says that maps here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Settings {
    /// The default agent's model refs, primary first (`anthropic/claude-opus-4-6`).
    pub models: Vec<String>,
    /// `agents.defaults.userTimezone`, as written.
    pub timezone: Option<String>,
    /// The numeric Telegram user ids of `channels.telegram.allowFrom`.
    pub telegram_users: Vec<i64>,
    /// The OpenClaw agent whose workspace and conversations these are (`main` unless
    /// `agents.list` names another default).
    pub agent: String,
    /// `session.mainKey`: the session key of the direct chats (`main`).
    pub main_key: String,
}

impl Default for Settings {
    /// OpenClaw's own defaults: agent `main`, main key `main`, nothing else.
    fn default() -> Settings {
        Settings {
            models: Vec::new(),
            timezone: None,
            telegram_users: Vec::new(),
            agent: "main".into(),
            main_key: "main".into(),
        }
    }
}

/// The most of `openclaw.json` read, and of model refs and users kept.
pub const MAX_BYTES: usize = 1 << 20;
const MAX_ITEMS: usize = 50;

/// Reads `openclaw.json`; what it says, and what it holds that does not map (each with why).
pub fn read(bytes: &[u8]) -> (Settings, Vec<String>) {
    let mut settings = Settings::default();
    let mut unmapped = Vec::new();
    let not_read = |why: &str| format!("openclaw.json: not read ({why}); nothing of it carried");
    if bytes.len() > MAX_BYTES {
        unmapped.push(not_read(&format!("over {MAX_BYTES} bytes")));
        return (settings, unmapped);
    }
    let parsed = std::str::from_utf8(bytes)
        .ok()
        .and_then(json5::to_json)
        .and_then(|json| serde_json::from_str::<Value>(&json).ok());
    let Some(Value::Object(root)) = parsed else {
        unmapped.push(not_read("not JSON5 this migration reads"));
        return (settings, unmapped);
    };
    let defaults = &root.get("agents").unwrap_or(&Value::Null)["defaults"];
    match &defaults["model"] {
        Value::String(primary) => settings.models.push(primary.clone()),
        model => {
            settings.models.extend(text(&model["primary"]));
            if let Some(list) = model["fallbacks"].as_array() {
                settings.models.extend(list.iter().filter_map(text));
            }
        }
    }
    settings.models.truncate(MAX_ITEMS);
    settings.timezone = text(&defaults["userTimezone"]);
    if let Some(id) = default_agent(root.get("agents").unwrap_or(&Value::Null)) {
        settings.agent = id;
    }
    if let Some(key) = text(&root.get("session").unwrap_or(&Value::Null)["mainKey"]) {
        settings.main_key = key;
    }
    let telegram = &root.get("channels").unwrap_or(&Value::Null)["telegram"];
    let mut others = Vec::new();
    for entry in telegram["allowFrom"].as_array().into_iter().flatten() {
        let raw = match entry {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => continue,
        };
        let id = raw.trim();
        let id = (id
            .strip_prefix("telegram:")
            .or_else(|| id.strip_prefix("tg:")))
        .unwrap_or(id);
        match id.parse::<i64>() {
            Ok(n) if n > 0 && settings.telegram_users.len() < MAX_ITEMS => {
                if !settings.telegram_users.contains(&n) {
                    settings.telegram_users.push(n);
                }
            }
            _ => others.push(name(&raw)),
        }
    }
    if !others.is_empty() {
        unmapped.push(format!(
            "openclaw.json channels.telegram.allowFrom {}: not a Telegram user id (\"*\" or a username): let people in here with allowed_users or pairing",
            others.join(", ")
        ));
    }
    unmapped.extend(leftovers(&root));
    (settings, unmapped)
}

/// The id of the agent `agents.list` marks `default: true`, else its first.
fn default_agent(agents: &Value) -> Option<String> {
    let list = agents["list"].as_array()?;
    let chosen = (list.iter().find(|a| a["default"] == Value::Bool(true))).or(list.first())?;
    text(&chosen["id"]).filter(|id| is_id(id))
}

/// The sections that do not map, by name, each with why (never a value).
fn leftovers(root: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in root.iter().take(MAX_ITEMS) {
        let why = match key.as_str() {
            "agents" => {
                let mut skipped: Vec<String> = (value.get("defaults").and_then(Value::as_object))
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.as_str())
                    .filter(|k| !["model", "userTimezone", "workspace"].contains(k))
                    .take(MAX_ITEMS)
                    .map(name)
                    .collect();
                skipped.sort();
                if !skipped.is_empty() {
                    out.push(format!(
                        "openclaw.json agents.defaults {}: no setting here maps them",
                        skipped.join(", ")
                    ));
                }
                let others = value["list"]
                    .as_array()
                    .map_or(0, Vec::len)
                    .saturating_sub(1);
                if others > 0 {
                    out.push(format!("openclaw.json agents.list: {others} more agents, not carried (only the default agent's workspace and conversations are; make agents here in agents.d)"));
                }
                continue;
            }
            "channels" => {
                let mut names: Vec<String> = (value.as_object().into_iter().flatten())
                    .map(|(k, _)| k.as_str())
                    .filter(|k| *k != "telegram")
                    .take(MAX_ITEMS)
                    .map(name)
                    .collect();
                names.sort();
                if !names.is_empty() {
                    out.push(format!(
                        "openclaw.json channels {}: this assistant talks on Telegram only",
                        names.join(", ")
                    ));
                }
                if value.get("telegram").is_some() {
                    out.push("openclaw.json channels.telegram: its bot token and policies are not carried (the token goes in TELEGRAM_BOT_TOKEN; who may talk, in allowed_users and pairing)".into());
                }
                continue;
            }
            "session" => "sessions here are per chat; set their window and idle time in main.yaml",
            "models" | "auth" => {
                "providers and keys are set here in providers.d and the environment"
            }
            "env" => "the environment is this machine's own: set keys there",
            _ => "no setting here maps it",
        };
        out.push(format!("openclaw.json {}: {why}", name(key)));
    }
    out
}

fn text(v: &Value) -> Option<String> {
    v.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 200)
        .map(str::to_owned)
}

/// A key or an entry as the report shows it: printable, at most 40 characters.
fn name(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(40).collect()
}

/// An OpenClaw agent id this migration accepts in a path: letters, digits, `-`, `_`.
pub fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::read;

    #[test]
    fn what_maps_is_read_and_the_rest_named_without_values() {
        let (s, unmapped) = read(
            br#"{
              // JSON5, as people edit it
              agents: {
                defaults: { model: { primary: "anthropic/claude-opus-4-6", fallbacks: ["google/gemini-2.5-pro"] },
                            userTimezone: "Europe/Vienna", thinkingDefault: "low" },
                list: [{ id: "main", default: true }, { id: "work" }],
              },
              channels: { telegram: { botToken: "123:SECRET", allowFrom: ["tg:111", 222, "@sam", "*"] },
                          discord: { token: "SECRET2" } },
              gateway: { auth: { token: "SECRET3" } },
            }"#,
        );
        assert_eq!(
            s.models,
            ["anthropic/claude-opus-4-6", "google/gemini-2.5-pro"]
        );
        assert_eq!(s.timezone.as_deref(), Some("Europe/Vienna"));
        assert_eq!(s.telegram_users, [111, 222]);
        assert_eq!((s.agent.as_str(), s.main_key.as_str()), ("main", "main"));
        let said = unmapped.join("\n");
        for named in [
            "thinkingDefault",
            "1 more agents",
            "discord",
            "gateway",
            "@sam",
        ] {
            assert!(said.contains(named), "{named}: {said}");
        }
        assert!(!said.contains("SECRET"), "no value shown: {said}");
        let (s, unmapped) = read(b"not json");
        assert_eq!(s.models, Vec::<String>::new());
        assert!(unmapped[0].contains("not read"), "{unmapped:?}");
        let (s, _) = read(br#"{"agents": {"defaults": {"model": "openai/gpt-5"}}}"#);
        assert_eq!(s.models, ["openai/gpt-5"]);
    }
}
