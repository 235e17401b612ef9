//! A SKILL.md read: the frontmatter between its `---` lines into [`Meta`] (the AgentSkills
//! fields this uses, with their limits), the Markdown after it as the body. Fields this does
//! not use (`license`, `allowed-tools`, `compatibility`, the rest of `metadata`) are allowed
//! and ignored, so skills written for Claude or OpenClaw load unchanged.

use serde_json::Value;

/// Longest skill name (AgentSkills).
pub const MAX_NAME: usize = 64;
/// Longest description, in characters (AgentSkills).
pub const MAX_DESCRIPTION: usize = 1024;
/// Most names in one requirement list.
const MAX_REQUIRED: usize = 32;
/// Longest name in a requirement list.
const MAX_REQUIRED_NAME: usize = 128;

/// What a skill says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub name: String,
    /// When to use it, on one line (runs of white space made one space).
    pub description: String,
    pub requires: Requires,
}

/// What a skill needs to be offered: top-level `requires: {env, tools, bins}`, merged with
/// OpenClaw's `metadata.openclaw.requires` (`env`, `bins`, `anyBins`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requires {
    /// Settings that must be set (non-empty).
    pub env: Vec<String>,
    /// Tools the agent must be offered.
    pub tools: Vec<String>,
    /// Programs it runs (`bins` and `anyBins`): only the `exec` tool can, so they need it.
    pub bins: Vec<String>,
}

/// A skill name: 1 to [`MAX_NAME`] lowercase letters, digits and hyphens, no hyphen first,
/// last or twice in a row.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Splits SKILL.md into its frontmatter and its body (both without the `---` lines).
pub fn split(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let missing = || "SKILL.md does not start with a frontmatter block (a line `---`)".to_owned();
    let (first, rest) = text.split_once('\n').ok_or_else(missing)?;
    if first.trim_end() != "---" {
        return Err(missing());
    }
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            let body = &rest[at + line.len()..];
            return Ok((&rest[..at], body.trim_start_matches(['\r', '\n'])));
        }
        at += line.len();
    }
    Err("the frontmatter is not closed (a line `---` after it)".into())
}

/// Reads SKILL.md: its [`Meta`] and its body. An error is a sentence for the skill's author.
pub fn parse(text: &str) -> Result<(Meta, &str), String> {
    let (front, body) = split(text)?;
    let value = super::yaml::parse(front, 2).map_err(|e| format!("frontmatter {e}"))?;
    let Value::Object(fields) = value else {
        return Err("the frontmatter is not a mapping of fields".into());
    };
    let name = text_field(fields.get("name")).ok_or("`name` is missing")?;
    if !valid_name(&name) {
        return Err(format!(
            "name {name:?} is not 1 to {MAX_NAME} lowercase letters, digits and single hyphens"
        ));
    }
    let description = text_field(fields.get("description"))
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .ok_or("`description` is missing")?;
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION {
        return Err(format!(
            "description is {chars} characters, over {MAX_DESCRIPTION}"
        ));
    }
    let mut requires = Requires::default();
    if let Some(r) = fields.get("requires").filter(|r| !r.is_null()) {
        let r = r.as_object().ok_or("`requires` is not a mapping")?;
        requires.env = names(r.get("env"), "requires.env")?;
        requires.tools = names(r.get("tools"), "requires.tools")?;
        requires.bins = names(r.get("bins"), "requires.bins")?;
    }
    if let Some(open) = openclaw_requires(fields.get("metadata")) {
        for key in ["env", "bins", "anyBins"] {
            let into = match key {
                "env" => &mut requires.env,
                _ => &mut requires.bins,
            };
            for n in names(open.get(key), &format!("metadata.openclaw.requires.{key}"))? {
                if !into.contains(&n) {
                    into.push(n);
                }
            }
        }
    }
    Ok((
        Meta {
            name,
            description,
            requires,
        },
        body,
    ))
}

/// `metadata.openclaw.requires`, from a mapping or from `metadata` written as a JSON string.
fn openclaw_requires(metadata: Option<&Value>) -> Option<serde_json::Map<String, Value>> {
    let parsed;
    let metadata = match metadata? {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        other => other,
    };
    metadata
        .get("openclaw")?
        .get("requires")?
        .as_object()
        .cloned()
}

/// A scalar field as text (a name written `2024` is still a name).
fn text_field(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list of names (or one name), bounded.
fn names(value: Option<&Value>, field: &str) -> Result<Vec<String>, String> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    if items.len() > MAX_REQUIRED {
        return Err(format!("{field} lists over {MAX_REQUIRED} names"));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let name = text_field(Some(item))
            .filter(|n| !n.is_empty() && n.len() <= MAX_REQUIRED_NAME)
            .ok_or_else(|| format!("{field} holds something that is not a name"))?;
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}
