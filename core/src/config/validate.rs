//! Checks of an agent's file beyond its shape: ids, the emoji, models naming known providers,
//! tools that exist, a policy naming only listed tools, skill names that can exist, `spawn:`.

use std::collections::BTreeMap;

use super::{err, AgentConfig, ConfigError, ProviderConfig};

pub(super) fn validate_agent(
    path: &str,
    a: &AgentConfig,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<(), ConfigError> {
    if !valid_id(&a.id) {
        return Err(err(
            path,
            "id",
            "agent ids are 1 to 64 letters, digits, _ and -",
        ));
    }
    if a.emoji
        .as_deref()
        .is_some_and(|e| !super::persona::valid_emoji(e))
    {
        return Err(err(
            path,
            "emoji",
            format!(
                "one emoji (at most {} bytes, no spaces)",
                super::MAX_EMOJI_BYTES
            ),
        ));
    }
    if a.models.is_empty() {
        return Err(err(path, "models", "list at least one provider/model"));
    }
    for (i, m) in a.models.iter().enumerate() {
        let Some((p, model)) = m.split_once('/') else {
            return Err(err(
                path,
                format!("models[{i}]"),
                format!("{m:?} is not provider/model"),
            ));
        };
        if model.is_empty() {
            return Err(err(path, format!("models[{i}]"), "model name is empty"));
        }
        if !providers.contains_key(p) {
            return Err(err(
                path,
                format!("models[{i}]"),
                format!("unknown provider {p:?}"),
            ));
        }
    }
    if a.mcp.len() > super::mcp::MAX_SERVERS {
        let most = super::mcp::MAX_SERVERS;
        return Err(err(path, "mcp", format!("at most {most} servers")));
    }
    for (i, server) in a.mcp.iter().enumerate() {
        server
            .check()
            .map_err(|(field, message)| err(path, field, message))?;
        if a.mcp[..i].iter().any(|s| s.name == server.name) {
            let message = format!("{:?} is listed twice", server.name);
            return Err(err(path, "mcp.name", message));
        }
    }
    for (i, t) in a.tools.iter().enumerate() {
        if !crate::tools::BUILTIN_TOOLS.contains(&t.as_str()) {
            return Err(err(
                path,
                format!("tools[{i}]"),
                format!("unknown tool {t:?}"),
            ));
        }
    }
    for name in a.policy.tools.keys() {
        // `<server>__<tool>`: a tool of one of its MCP servers (listed at run time).
        let mcp = name
            .split_once("__")
            .is_some_and(|(server, _)| a.mcp.iter().any(|s| s.name == server));
        if !a.tools.contains(name) && !mcp {
            return Err(err(
                path,
                format!("policy.tools.{name}"),
                format!("{name:?} is not in this agent's tools nor of its mcp: servers: list it there first"),
            ));
        }
    }
    if let Some(skills) = &a.skills {
        if !a.tools.iter().any(|t| t == crate::skills::SKILL_TOOL) {
            return Err(err(
                path,
                "skills",
                "skills are read with the `skill` tool: list it under tools",
            ));
        }
        for (i, name) in skills.iter().enumerate() {
            if !crate::skills::valid_name(name) {
                return Err(err(
                    path,
                    format!("skills[{i}]"),
                    format!("{name:?} is not a skill name (lowercase letters, digits and single hyphens)"),
                ));
            }
        }
    }
    if a.max_rounds == 0 {
        return Err(err(path, "max_rounds", "must be at least 1"));
    }
    super::spawn::check_agent(path, a)
}

/// A connector or agent id: 1 to [`super::MAX_ID_LEN`] ASCII letters, digits, `_` and `-`. (Found
/// by fuzzing: a 600-character connector id passed, and every update to it failed to store.)
pub(super) fn valid_id(id: &str) -> bool {
    (1..=super::MAX_ID_LEN).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
