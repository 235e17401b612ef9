//! `clawless doctor --security`: the settings that make the assistant riskier than it needs
//! to be, each named with its fix. What the core can judge from its config and settings is
//! here (the same on every shell); the native command adds what only the machine knows (root,
//! the sandbox, file modes).

use super::{Check, Status};
use crate::app::Admin;
use crate::config::Rule;
use crate::tools::Level;

/// Fewer distinct characters than this in the admin token: a word, not a random string.
const MIN_TOKEN_VARIETY: usize = 10;

impl Admin<'_> {
    /// Whether any agent is offered `tool` here.
    pub fn offers(self, tool: &str) -> bool {
        self.app
            .agents
            .values()
            .any(|a| a.tools.get(tool).is_some())
    }

    /// The security checks the core can make: one line each, `Ok` when nothing is found.
    pub fn security_checks(self) -> Vec<Check> {
        let mut out = Vec::new();
        if self.app.config.web.allow_private {
            out.push(Check::new(
                "web",
                Status::Warn,
                "web.allow_private is on: web_fetch may reach this machine, its network and the cloud's metadata service; turn it off unless a page there is needed",
            ));
        }
        for c in self.app.connectors.values() {
            if c.secret.is_empty() {
                out.push(Check::new(
                    "webhook secret",
                    Status::Warn,
                    format!(
                        "connector {} has no webhook secret ({}): anyone who finds its webhook URL can post updates as anyone; set a long random one",
                        c.id, c.secret_env
                    ),
                ));
            }
            if c.shared_memory {
                out.push(Check::new(
                    "memory",
                    Status::Warn,
                    format!(
                        "connector {} shares one memory among everyone it serves (shared_memory: true): each person can read what others told it; turn it off unless one person uses it",
                        c.id
                    ),
                ));
            }
        }
        let token = self.app.admin_token.expose();
        let variety = token
            .chars()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if !token.is_empty() && variety < MIN_TOKEN_VARIETY {
            out.push(Check::new(
                "admin token",
                Status::Warn,
                format!("CLAWLESS_ADMIN_TOKEN has only {variety} different characters: it can be guessed; use a random one (openssl rand -hex 32)"),
            ));
        }
        for agent in self.app.agents.values() {
            let policy = &agent.config.policy;
            for tool in agent.tools.names() {
                let level = agent.tools.get(&tool).map_or(Level::Unsafe, |t| t.level());
                if level == Level::Unsafe && policy.rule(&tool, level) == Rule::Allow {
                    out.push(Check::new(
                        "policy",
                        Status::Warn,
                        format!(
                            "agent {:?} runs {tool} (unsafe) without asking; set policy.tools.{tool}: ask",
                            agent.config.id
                        ),
                    ));
                }
            }
            if !policy.ask_after_untrusted {
                out.push(Check::new(
                    "policy",
                    Status::Warn,
                    format!(
                        "agent {:?} has ask_after_untrusted off: a page or an MCP answer can steer its tools under a grant; turn it on",
                        agent.config.id
                    ),
                ));
            }
        }
        if out.is_empty() {
            out.push(Check::new(
                "settings",
                Status::Ok,
                "no risky setting found in the config and the settings",
            ));
        }
        out
    }
}
