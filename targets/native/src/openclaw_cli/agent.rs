//! The persona as agent `openclaw` of the config directory (`agents.d/openclaw.yaml`, its
//! prompt `prompts/openclaw/system.md`), offered on the connector's route in `routing.yaml`
//! so `/agent openclaw` switches to it. The routing file is edited in place (only the
//! connector's entry changes; its comments stay), then the whole config is loaded again: a
//! config that does not load is put back as it was.

use std::path::Path;

use anyhow::{bail, Context, Result};
use clawless_core::ids::ConnectorId;
use clawless_core::{App, Config, ConfigFiles};

/// The agent's id.
pub const ID: &str = "openclaw";

/// Writes agent [`ID`] (the connector's default agent's tools, `models` first and then its
/// models, the persona as its prompt) into `config`, unless it is there already: what it did.
pub fn write(
    app: &App,
    connector: &ConnectorId,
    config: &Path,
    persona: &str,
    models: &[String],
) -> Result<String> {
    let file = config.join("agents.d").join(format!("{ID}.yaml"));
    let prompt = config.join("prompts").join(ID).join("system.md");
    if file.exists() || prompt.exists() {
        return Ok(format!(
            "agent {ID}: kept as it is in {} (delete it to import the persona again)",
            config.display()
        ));
    }
    let mut agent = app
        .admin()
        .default_agent_config(connector)
        .context("the connector's default agent")?;
    agent.id = ID.to_owned();
    agent.name = Some(persona_name(persona).unwrap_or_else(|| "OpenClaw".to_owned()));
    agent.emoji = None;
    agent.agent_tools.clear();
    agent.spawn = Default::default();
    // OpenClaw's models first; the default agent's after them, so whichever key is set here
    // still answers.
    let mut all: Vec<String> = models.to_vec();
    all.extend(agent.models.drain(..).filter(|m| !models.contains(m)));
    agent.models = all;
    // JSON is YAML: the file reads back as any agents.d file does.
    let text = serde_json::to_string_pretty(&agent)?;
    std::fs::create_dir_all(file.parent().unwrap_or(config))?;
    std::fs::create_dir_all(prompt.parent().unwrap_or(config))?;
    std::fs::write(&file, format!("# Imported from OpenClaw.\n{text}\n"))?;
    std::fs::write(&prompt, format!("{persona}\n"))?;
    Ok(format!(
        "agent {ID}: written to {} and {}",
        file.display(),
        prompt.display()
    ))
}

/// The config of the directory `config`.
fn load(config: &Path) -> Result<Config> {
    let files = clawless_platform::native_io::read_config_dir(config)
        .with_context(|| format!("reading {}", config.display()))?;
    Config::load(&ConfigFiles(files)).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Offers agent `id` on `connector`'s own route in `config/routing.yaml` (`/agent <id>`
/// switches to it), unless it is offered there already; one sentence per thing said,
/// including each rule whose chats still do not offer it.
pub fn offer(config: &Path, connector: &ConnectorId, id: &str) -> Result<Vec<String>> {
    let before = load(config).context("the config does not load as it is")?;
    let route = (before.routing.connectors.get(connector.as_str()))
        .with_context(|| format!("routing.yaml has no route for connector {connector}"))?;
    let mut said = Vec::new();
    let routing = &before.routing;
    if route.allowed().iter().any(|a| a == id) {
        said.push(format!(
            "routing: /agent {id} is offered on connector {connector} already"
        ));
    } else {
        let file = config.join("routing.yaml");
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let mut agents: Vec<String> = route.allowed().to_vec();
        agents.push(id.to_owned());
        let list: Vec<String> = agents.iter().map(|a| format!("{a:?}")).collect();
        let entry = format!(
            "{connector}: {{agent: {:?}, agents: [{}]}}",
            route.agent,
            list.join(", ")
        );
        let edited = with_entry(&text, connector.as_str(), &entry)?;
        replace(&file, &edited)?;
        let after = load(config);
        let offered = after.as_ref().ok().and_then(|c| {
            let r = c.routing.connectors.get(connector.as_str())?;
            r.allowed().iter().any(|a| a == id).then_some(())
        });
        if after.is_err() || offered.is_none() {
            replace(&file, &text)?;
            let why = after
                .err()
                .map_or("it did not take".to_owned(), |e| format!("{e:#}"));
            bail!("routing.yaml put back as it was: {why}");
        }
        said.push(format!(
            "routing: connector {connector} now offers /agent {id} ({}); restart, then /agent {id} in a chat uses it",
            file.display()
        ));
    }
    for (i, rule) in routing.rules.iter().enumerate() {
        if rule.may_match(connector.as_str()) && !rule.route.allowed().iter().any(|a| a == id) {
            said.push(format!(
                "routing: rule {} sends its chats to {} and does not offer {id}: add {id} to its agents: to offer it there",
                i + 1,
                rule.route.agent
            ));
        }
    }
    Ok(said)
}

/// `text` with `connector`'s entry under the top-level `connectors:` replaced by `entry` (or
/// added, with the file's indent); the rest of the file as it was.
fn with_entry(text: &str, connector: &str, entry: &str) -> Result<String> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let Some(head) = lines.iter().position(|l| l.starts_with("connectors:")) else {
        out.push("connectors:".into());
        out.push(format!("  {entry}"));
        return Ok(out.join("\n") + "\n");
    };
    let value = lines[head]["connectors:".len()..]
        .split(" #")
        .next()
        .unwrap_or("");
    if !value.trim().is_empty() {
        bail!("its connectors: is written on one line; add the agent to the agents: of connector {connector} there yourself");
    }
    let block_end = (head + 1..lines.len())
        .find(|&i| !blank(lines[i]) && indent(lines[i]) == 0)
        .unwrap_or(lines.len());
    let key = format!("{connector}:");
    let found = (head + 1..block_end).find(|&i| {
        let t = lines[i].trim_start();
        !blank(lines[i]) && (t.starts_with(&key) || t.starts_with(&format!("\"{connector}\":")))
    });
    let Some(at) = found else {
        let pad = (head + 1..block_end)
            .find(|&i| !blank(lines[i]))
            .map_or(2, |i| indent(lines[i]));
        out.insert(head + 1, format!("{}{entry}", " ".repeat(pad)));
        return Ok(out.join("\n") + "\n");
    };
    let pad = indent(lines[at]);
    let end = (at + 1..block_end)
        .find(|&i| !lines[i].trim().is_empty() && indent(lines[i]) <= pad)
        .unwrap_or(block_end);
    // A comment on the entry's own line stays.
    let comment = lines[at].find(" #").map(|i| &lines[at][i..]).unwrap_or("");
    out.splice(at..end, [format!("{}{entry}{comment}", " ".repeat(pad))]);
    Ok(out.join("\n") + "\n")
}

/// Writes `text` beside `file`, then renames.
fn replace(file: &Path, text: &str) -> Result<()> {
    let tmp = file.with_extension("yaml.partial");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("writing {}", file.display()))
}

/// The `Name` line of OpenClaw's IDENTITY.md (`- **Name**: Jarvis`).
fn persona_name(persona: &str) -> Option<String> {
    persona.lines().find_map(|line| {
        let rest = line
            .trim_start_matches(['-', '*', ' '])
            .strip_prefix("Name")?;
        let name = rest.trim_start_matches(['*', ':', ' ']).trim();
        (!name.is_empty() && name.len() <= 40).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::{persona_name, with_entry};

    #[test]
    fn the_name_comes_from_identity() {
        assert_eq!(
            persona_name("# IDENTITY.md\n\n- **Name**: Jarvis\n").as_deref(),
            Some("Jarvis")
        );
        assert_eq!(persona_name("Name: Ada").as_deref(), Some("Ada"));
        assert_eq!(persona_name("no name here"), None);
    }

    #[test]
    fn only_the_connector_s_entry_changes() {
        let entry = "main: {agent: \"a\", agents: [\"a\", \"openclaw\"]}";
        let text = "# head\ndefault_agent: a\nconnectors:\n  main: a   # the bot\n  other: b\n# rules:\n#   - {kind: private}\n";
        assert_eq!(
            with_entry(text, "main", entry).unwrap(),
            "# head\ndefault_agent: a\nconnectors:\n  main: {agent: \"a\", agents: [\"a\", \"openclaw\"]} # the bot\n  other: b\n# rules:\n#   - {kind: private}\n"
        );
        let block = "connectors:\n    main:\n      agent: a\n      agents: [a, c]\nrules: []\n";
        assert_eq!(
            with_entry(block, "main", entry).unwrap(),
            format!("connectors:\n    {entry}\nrules: []\n")
        );
        let none = "default_agent: a\nconnectors:\n  other: b\n";
        assert_eq!(
            with_entry(none, "main", entry).unwrap(),
            format!("default_agent: a\nconnectors:\n  {entry}\n  other: b\n")
        );
        assert_eq!(
            with_entry("default_agent: a\n", "main", entry).unwrap(),
            format!("default_agent: a\nconnectors:\n  {entry}\n")
        );
        assert!(with_entry("connectors: {main: a}\n", "main", entry).is_err());
    }
}
