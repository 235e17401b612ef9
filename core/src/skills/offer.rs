//! One agent's view of the skills: which are offered (their requirements met by this agent on
//! this shell), the block of the system prompt that lists them, what the `skill` tool reads,
//! and the reasons `clawless skills list` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Catalog, Entry, Meta, Source, MAX_SKILLS};

/// The name of the tool that reads a skill.
pub const SKILL_TOOL: &str = "skill";

/// The skills one agent may be offered.
pub struct Offer {
    pub catalog: Arc<Catalog>,
    /// The agent's id (in reasons).
    agent: String,
    /// The tools the agent is offered on this shell.
    tools: BTreeSet<String>,
    /// The agent's `skills:`; `None` lets every skill in.
    only: Option<BTreeSet<String>>,
}

/// A skill and whether it is offered, for `clawless skills list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub name: String,
    pub source: Source,
    /// Its description, when its SKILL.md could be read.
    pub description: Option<String>,
    /// `Ok` when offered, else why not.
    pub offered: Result<(), String>,
}

impl Offer {
    /// `tools`: the names of the tools the agent is offered (the `skill` tool among them, or
    /// no skill is offered); `only`: its `skills:` list.
    pub fn new(
        catalog: Arc<Catalog>,
        agent: &str,
        tools: impl IntoIterator<Item = String>,
        only: Option<&[String]>,
    ) -> Offer {
        Offer {
            catalog,
            agent: agent.to_owned(),
            tools: tools.into_iter().collect(),
            only: only.map(|names| names.iter().cloned().collect()),
        }
    }

    /// Whether the agent can read skills at all (it lists the `skill` tool).
    pub fn enabled(&self) -> bool {
        self.tools.contains(SKILL_TOOL)
    }

    /// The skill's frontmatter when it is offered to this agent, else every reason it is not.
    pub fn check<'e>(&self, entry: &'e Entry) -> Result<&'e Meta, String> {
        let meta = entry.meta.as_ref().map_err(Clone::clone)?;
        let mut why = Vec::new();
        if !self.enabled() {
            why.push(format!(
                "agent {:?} does not list the `{SKILL_TOOL}` tool",
                self.agent
            ));
        }
        if self.only.as_ref().is_some_and(|o| !o.contains(&meta.name)) {
            why.push(format!("not in the `skills:` of agent {:?}", self.agent));
        }
        let req = &meta.requires;
        let unset: Vec<&str> = req
            .env
            .iter()
            .filter(|v| !self.catalog.env_is_set(v))
            .map(String::as_str)
            .collect();
        if !unset.is_empty() {
            why.push(format!("needs {} set", unset.join(", ")));
        }
        let missing: Vec<&str> = req
            .tools
            .iter()
            .filter(|t| !self.tools.contains(*t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            why.push(format!(
                "needs the tool {}, which agent {:?} is not offered here",
                missing.join(", "),
                self.agent
            ));
        }
        if !req.bins.is_empty() && !self.tools.contains("exec") {
            why.push(format!(
                "runs programs ({}), which needs the `exec` tool (native only), not offered to agent {:?} here",
                req.bins.join(", "),
                self.agent
            ));
        }
        if why.is_empty() {
            Ok(meta)
        } else {
            Err(why.join("; "))
        }
    }

    /// Every skill of the conversation whose workspace skills are in `workspace`, with
    /// whether it is offered.
    pub async fn statuses(&self, workspace: Option<&str>) -> Vec<Status> {
        let entries = self.catalog.entries(workspace).await;
        entries
            .values()
            .map(|e| Status {
                name: e.name.clone(),
                source: e.source,
                description: e.meta.as_ref().ok().map(|m| m.description.clone()),
                offered: self.check(e).map(|_| ()),
            })
            .collect()
    }

    /// The system prompt's block listing the offered skills, or `""` when none is (and
    /// without reading anything when the agent has no `skill` tool).
    pub async fn prompt(&self, workspace: Option<&str>) -> String {
        if !self.enabled() {
            return String::new();
        }
        let entries = self.catalog.entries(workspace).await;
        let offered: Vec<&Meta> = entries
            .values()
            .filter_map(|e| self.check(e).ok())
            .collect();
        if offered.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "## Skills\nInstructions for particular tasks. When a request matches one of these, first call the `{SKILL_TOOL}` tool with its name, then follow what it says.\n"
        );
        for meta in offered.iter().take(MAX_SKILLS) {
            out.push_str(&format!("- {}: {}\n", meta.name, meta.description));
        }
        if offered.len() > MAX_SKILLS {
            out.push_str(&format!(
                "({} more skills are not listed.)\n",
                offered.len() - MAX_SKILLS
            ));
        }
        out
    }

    /// What the `skill` tool answers: the body of skill `name`, or its `file`, when it is
    /// offered; else a sentence saying why not.
    pub async fn read(
        &self,
        workspace: Option<&str>,
        name: &str,
        file: Option<&str>,
    ) -> Result<String, String> {
        let entries = self.catalog.entries(workspace).await;
        let Some(entry) = entries.get(name) else {
            return Err(unknown(name, &entries, |e| self.check(e).is_ok()));
        };
        if let Err(why) = self.check(entry) {
            return Err(format!("Skill {name:?} is not available here: {why}."));
        }
        if let Some(file) = file {
            if !entry.files.iter().any(|f| f == file) {
                let listed = if entry.files.is_empty() {
                    "it has no other files".to_owned()
                } else {
                    format!("its files: {}", entry.files.join(", "))
                };
                return Err(format!("Skill {name:?} has no file {file:?} ({listed})."));
            }
            return self.catalog.read(entry, Some(file)).await;
        }
        let body = self.catalog.read(entry, None).await?;
        if entry.files.is_empty() {
            return Ok(body);
        }
        Ok(format!(
            "{body}\n\n---\nOther files of this skill (read one with `{SKILL_TOOL}` and `file`): {}",
            entry.files.join(", ")
        ))
    }
}

/// The refusal for a name no skill has, naming those that are offered.
fn unknown(
    name: &str,
    entries: &BTreeMap<String, Entry>,
    offered: impl Fn(&Entry) -> bool,
) -> String {
    let names: Vec<&str> = entries
        .values()
        .filter(|e| offered(e))
        .map(|e| e.name.as_str())
        .collect();
    if names.is_empty() {
        format!("No skill is named {name:?}, and none is offered here.")
    } else {
        format!("No skill is named {name:?}. Offered: {}.", names.join(", "))
    }
}
