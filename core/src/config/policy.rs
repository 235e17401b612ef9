//! What an agent's tools may do without asking: `policy:` in `agents.d/*.yaml`, and how long
//! an approval waits and a grant lasts (`approvals:` in `main.yaml`).
//!
//! ```yaml
//! policy:
//!   safe: allow        # reads the assistant's own data only
//!   guarded: allow     # writes the assistant's own data, or reads the network
//!   unsafe: ask        # effects outside the assistant
//!   tools:
//!     memory_write: ask
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::level::Level;

/// What a call needs before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// Runs.
    Allow,
    /// Waits for an allowed user to tap "Allow" in Telegram.
    Ask,
    /// Never runs; the model is told so.
    Deny,
}

/// An agent's policy: a rule per capability level, and per tool where it differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    pub safe: Rule,
    pub guarded: Rule,
    #[serde(rename = "unsafe")]
    pub unsafe_: Rule,
    /// Tool name → rule, over its level's.
    pub tools: BTreeMap<String, Rule>,
    /// Once a turn has read untrusted text (a page, a search, an MCP answer, a file), its
    /// unsafe calls and the calls that act later or elsewhere ask, even under a grant.
    pub ask_after_untrusted: bool,
    /// The policy of the agent that spawned this one (see [`crate::spawn`]): a call needs at
    /// least what it would need there. Set at run time, never from a file.
    #[serde(skip)]
    pub outer: Option<Box<PolicyConfig>>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            safe: Rule::Allow,
            guarded: Rule::Allow,
            unsafe_: Rule::Ask,
            tools: BTreeMap::new(),
            ask_after_untrusted: true,
            outer: None,
        }
    }
}

impl Rule {
    /// The stricter of two rules: deny over ask over allow.
    pub fn stricter(self, other: Rule) -> Rule {
        let rank = |r: Rule| match r {
            Rule::Allow => 0,
            Rule::Ask => 1,
            Rule::Deny => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

impl PolicyConfig {
    /// What a call of `name` at `level` needs: its tool's rule, else its level's; the
    /// stricter of that and the outer policy's.
    pub fn rule(&self, name: &str, level: Level) -> Rule {
        let own = self.tools.get(name).copied().unwrap_or(match level {
            Level::Safe => self.safe,
            Level::Guarded => self.guarded,
            Level::Unsafe => self.unsafe_,
        });
        match &self.outer {
            Some(outer) => own.stricter(outer.rule(name, level)),
            None => own,
        }
    }

    /// This policy under `outer` (which may have its own): every rule at least as strict.
    pub fn under(&self, outer: &PolicyConfig) -> PolicyConfig {
        let outer = match &self.outer {
            Some(mine) => mine.under(outer),
            None => outer.clone(),
        };
        PolicyConfig {
            outer: Some(Box::new(outer)),
            ..self.clone()
        }
    }

    /// Whether some call could ever need an approval.
    pub fn may_ask(&self) -> bool {
        [self.safe, self.guarded, self.unsafe_].contains(&Rule::Ask)
            || self.tools.values().any(|r| *r == Rule::Ask)
    }
}

/// `audit:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Entries are kept this many days.
    pub retention_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { retention_days: 30 }
    }
}

impl AuditConfig {
    pub fn retention(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.retention_days.max(1).saturating_mul(86_400))
    }
}

/// `approvals:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    /// An unanswered approval is denied after this long.
    pub expiry_minutes: u64,
    /// How long "Allow for …" lets a tool run in a chat without asking.
    pub grant_minutes: u64,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        Self {
            expiry_minutes: 30,
            grant_minutes: 30,
        }
    }
}

impl ApprovalConfig {
    pub fn expiry_ms(&self) -> u64 {
        self.expiry_minutes.saturating_mul(60_000)
    }

    pub fn grant_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.grant_minutes.saturating_mul(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_under_another_is_never_looser() {
        let mut parent = PolicyConfig::default();
        parent.tools.insert("memory_write".into(), Rule::Ask);
        parent.guarded = Rule::Deny;
        let mut child = PolicyConfig {
            safe: Rule::Allow,
            guarded: Rule::Allow,
            unsafe_: Rule::Allow,
            ..Default::default()
        };
        child.tools.insert("web_fetch".into(), Rule::Allow);
        let merged = child.under(&parent);
        assert_eq!(merged.rule("memory_write", Level::Safe), Rule::Ask);
        assert_eq!(merged.rule("web_fetch", Level::Guarded), Rule::Deny);
        assert_eq!(merged.rule("exec", Level::Unsafe), Rule::Ask);
        assert_eq!(merged.rule("current_time", Level::Safe), Rule::Allow);
        // Two levels down the grandparent still holds.
        let grand = PolicyConfig::default().under(&merged);
        assert_eq!(grand.rule("web_fetch", Level::Guarded), Rule::Deny);
        assert_eq!(Rule::Allow.stricter(Rule::Ask), Rule::Ask);
        assert_eq!(Rule::Deny.stricter(Rule::Ask), Rule::Deny);
    }
}

/// `backup:` in `main.yaml`: archives of the whole store (see [`crate::archive`]) written on a
/// schedule by the native binary into `dir` (default `<data>/backups`), the newest `keep`
/// kept. Off unless `every` is set. Serverless stores have their own (README: D1 Time Travel,
/// DynamoDB point-in-time recovery).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// How often: `12h`, `1d`, `7d` (at least an hour).
    pub every: Option<String>,
    /// How many archives are kept, newest first.
    pub keep: usize,
    /// Where they are written (relative paths from the working directory).
    pub dir: Option<String>,
}

impl Default for BackupConfig {
    fn default() -> Self {
        Self {
            every: None,
            keep: 7,
            dir: None,
        }
    }
}

impl BackupConfig {
    /// How often, in ms (`None`: off); an unreadable or too frequent period is an error.
    pub fn period_ms(&self) -> Result<Option<u64>, String> {
        let Some(every) = &self.every else {
            return Ok(None);
        };
        let ms = crate::audit::parse_window(every)?;
        if ms < 3_600_000 {
            return Err("must be at least 1h".into());
        }
        Ok(Some(ms))
    }

    /// The first problem, as (field, why).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if let Err(why) = self.period_ms() {
            return Some(("backup.every", why));
        }
        if !(1..=1000).contains(&self.keep) {
            return Some(("backup.keep", "must be 1 to 1000".into()));
        }
        None
    }
}
