//! `clawless doctor`: what is wrong with a running deployment, one line per check. The checks
//! run here, in the core, so the native command and a Worker's or Lambda's `/admin/doctor`
//! (for `doctor --remote`) say the same: the bot token (`getMe`), the webhook as Telegram sees
//! it (URL, pending updates, its last delivery error and when), each model's key (the
//! provider's cheapest call), each MCP server's tool list (a local program started), storage
//! (a write, read and delete of a probe key), the backlog
//! (oldest pending job, retries due), the settings still missing and each incoming webhook's
//! secret (`hooks.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::Admin;
use crate::telegram::api::TelegramError;

mod hooks;
mod security;

/// A pending job older than this is a failure of the backlog check: something stopped
/// draining (a sweep that never runs, a lane stuck behind a failing job).
const STUCK_AFTER_MS: u64 = 10 * 60_000;
/// Telegram's last delivery error counts as current within this long.
const RECENT_ERROR_SECS: i64 = 3_600;
/// Lanes looked at for the backlog.
const LANES_LOOKED_AT: usize = 1_000;
/// How long an MCP server has to list its tools (a local program to start: a first `npx -y`
/// fetches its package).
const MCP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Works, but worth a look.
    Warn,
    /// Broken: `doctor` exits 1.
    Fail,
}

/// One check: what was looked at, how it came out, and a sentence saying what was found (and,
/// on a failure, what to do). Never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

impl Check {
    fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
        }
    }
}

/// Where the deployment runs, for what the webhook should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Native: long polling (no webhook) or `serve` (a webhook): either is fine.
    Either,
    /// The Worker and the Lambda receive only through the webhook.
    Webhook,
}

impl Admin<'_> {
    /// Every check, in a fixed order (see the module doc).
    pub async fn doctor(self, delivery: Delivery) -> Vec<Check> {
        let mut out = Vec::new();
        for missing in self.app.missing_settings() {
            out.push(Check::new(
                "settings",
                Status::Fail,
                format!("set {missing}"),
            ));
        }
        for note in self.app.unoffered_tools() {
            out.push(Check::new("settings", Status::Warn, note));
        }
        for id in self.connectors_without_users() {
            out.push(Check::new(
                "settings",
                Status::Warn,
                format!("{id} has no allowed users and no owner: strangers get a pairing code that only `clawless pairing approve` can approve; set TELEGRAM_ALLOWED_USERS to your id"),
            ));
        }
        out.extend(self.hook_checks());
        for c in self.app.connectors.values().filter(|c| c.token_set) {
            let name = format!("telegram {}", c.id);
            match c.bot.get_me().await {
                Ok(me) => out.push(Check::new(
                    name,
                    Status::Ok,
                    format!("the token is @{}'s", me.username),
                )),
                Err(TelegramError::Refused(code, _)) => out.push(Check::new(
                    name,
                    Status::Fail,
                    format!(
                        "Telegram refused the token ({code}): it was revoked or mistyped; get a new one from @BotFather (/token) and set {}",
                        c.token_env
                    ),
                )),
                Err(e) => out.push(Check::new(
                    name,
                    Status::Fail,
                    format!("Telegram could not be asked: {e}"),
                )),
            }
            let name = format!("webhook {}", c.id);
            match c.bot.get_webhook_info().await {
                Ok(info) => out.push(webhook_check(
                    name,
                    &info,
                    delivery,
                    self.app.platform.clock.now_ms(),
                )),
                Err(e) => out.push(Check::new(
                    name,
                    Status::Fail,
                    format!("getWebhookInfo failed: {e}"),
                )),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for agent in self.app.connectors.values().flat_map(|c| c.agents_used()) {
            for link in &agent.chain.links {
                if !seen.insert(link.label.clone()) {
                    continue;
                }
                let name = format!("model {}", link.label);
                out.push(match link.provider.check_key().await {
                    Ok(()) => Check::new(name, Status::Ok, "the provider takes the key"),
                    Err(e) => self.key_failure(name, &link.label, &e),
                });
            }
        }
        out.extend(self.mcp_checks().await);
        out.push(self.storage_check().await);
        out.push(self.backlog_check().await);
        out
    }

    /// Each MCP server's tool list, all at once: a server's within a turn's wait, a local
    /// program's within [`MCP_WAIT`] (started, and stopped with the process), so one that
    /// exits says its last words and the likely cause in the sandbox. A program that does not
    /// start fails; a server that does not answer is a warning (the bot answers without it).
    async fn mcp_checks(self) -> Vec<Check> {
        let servers = self.app.mcp_servers();
        let wait = |s: &crate::mcp::McpServer| match s.is_program() {
            true => MCP_WAIT,
            false => crate::mcp::LIST_WAIT,
        };
        let listed = futures::future::join_all(servers.iter().map(|s| s.warm(wait(s)))).await;
        servers
            .iter()
            .zip(listed)
            .map(|(s, listed)| {
                let name = format!("mcp {}", s.name());
                match listed {
                    Ok(n) => Check::new(name, Status::Ok, format!("{n} tools")),
                    Err(e) if s.is_program() => Check::new(
                        name,
                        Status::Fail,
                        format!("the program did not start: {e}"),
                    ),
                    Err(e) => Check::new(
                        name,
                        Status::Warn,
                        format!("no tool list: {e}; the bot answers without it"),
                    ),
                }
            })
            .collect()
    }

    /// A failed key check of the model `label` (`provider/model`) as a sentence: a refused
    /// key names the provider and the variable to set; anything else is the provider not
    /// answering.
    fn key_failure(self, name: String, label: &str, e: &crate::llm::LlmError) -> Check {
        let provider = label.split('/').next().unwrap_or(label);
        let providers = &self.app.config.providers;
        let env = providers
            .get(provider)
            .and_then(|p| p.api_key_env.as_deref());
        Check::new(name, Status::Fail, key_failure(provider, env, e))
    }

    /// A write, a read and a delete of a probe key.
    async fn storage_check(self) -> Check {
        let kv = &*self.app.platform.kv;
        let key = crate::keys::doctor_probe(&self.app.instance);
        let probe = format!("{}", self.app.platform.clock.now_ms());
        let result = async {
            kv.put(
                &key,
                probe.as_bytes(),
                Some(std::time::Duration::from_secs(60)),
            )
            .await?;
            let back = kv.get(&key).await?;
            kv.delete(&key).await?;
            Ok::<_, clawless_platform::PortError>(back.as_deref() == Some(probe.as_bytes()))
        }
        .await;
        match result {
            Ok(true) => Check::new("storage", Status::Ok, "a write, read and delete worked"),
            Ok(false) => Check::new(
                "storage",
                Status::Fail,
                "what was written did not read back",
            ),
            Err(e) => Check::new("storage", Status::Fail, format!("unreachable: {e}")),
        }
    }

    /// The pending jobs at the head of each lane: how many lanes wait, the oldest, and how
    /// many are retries (and how many of those are due).
    async fn backlog_check(self) -> Check {
        let lanes = match self.app.inbox.lanes(LANES_LOOKED_AT).await {
            Ok(lanes) => lanes,
            Err(e) => return Check::new("backlog", Status::Fail, format!("unreadable: {e}")),
        };
        let now = self.app.platform.clock.now_ms();
        let (mut oldest, mut retrying, mut due) = (None::<u64>, 0, 0);
        for lane in &lanes {
            let Ok(Some((_, job))) = self.app.inbox.head(lane).await else {
                continue;
            };
            if job.accepted_ms > 0 {
                oldest = Some(oldest.map_or(job.accepted_ms, |o| o.min(job.accepted_ms)));
            }
            if job.attempts > 0 {
                retrying += 1;
                if job.not_before_ms <= now {
                    due += 1;
                }
            }
        }
        if lanes.is_empty() {
            return Check::new("backlog", Status::Ok, "nothing pending");
        }
        let age = oldest.map(|o| now.saturating_sub(o));
        let detail = format!(
            "{} conversation(s) waiting{}; {retrying} retrying, {due} of them due now",
            lanes.len(),
            age.map(|a| format!(", the oldest for {}", human(a)))
                .unwrap_or_default(),
        );
        let stuck = age.is_some_and(|a| a > STUCK_AFTER_MS);
        if stuck {
            return Check::new(
                "backlog",
                Status::Fail,
                format!("{detail}: nothing drained it; is the schedule (cron, timer) running?"),
            );
        }
        Check::new("backlog", Status::Ok, detail)
    }
}

/// What Telegram's `getWebhookInfo` says, judged.
fn webhook_check(name: String, info: &Value, delivery: Delivery, now_ms: u64) -> Check {
    let url = info.get("url").and_then(Value::as_str).unwrap_or("");
    let pending = info
        .get("pending_update_count")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if url.is_empty() {
        return match delivery {
            Delivery::Either => Check::new(
                name,
                Status::Ok,
                format!("no webhook: long polling ({pending} update(s) waiting at Telegram)"),
            ),
            Delivery::Webhook => Check::new(
                name,
                Status::Fail,
                "no webhook is set, so Telegram sends this deployment nothing: POST /admin/setup (or `clawless webhook set --remote URL`)",
            ),
        };
    }
    // Shown without its query: the path names the connector; the secret travels in a header.
    let shown = url.split('?').next().unwrap_or(url);
    let error_at = info.get("last_error_date").and_then(Value::as_i64);
    let message = info
        .get("last_error_message")
        .and_then(Value::as_str)
        .unwrap_or("");
    let now_s = (now_ms / 1000) as i64;
    match error_at {
        Some(at) if now_s - at <= RECENT_ERROR_SECS => Check::new(
            name,
            Status::Fail,
            format!(
                "{shown}: Telegram's last delivery failed {} ago: {message} ({pending} update(s) waiting)",
                human(((now_s - at).max(0) as u64) * 1000)
            ),
        ),
        Some(at) => Check::new(
            name,
            Status::Ok,
            format!(
                "{shown}, {pending} update(s) waiting; the last delivery error was {} ago: {message}",
                human(((now_s - at).max(0) as u64) * 1000)
            ),
        ),
        None => Check::new(
            name,
            Status::Ok,
            format!("{shown}, {pending} update(s) waiting, no delivery error"),
        ),
    }
}

/// What a failed key check of `provider` (its key in `env`) says.
fn key_failure(provider: &str, env: Option<&str>, e: &crate::llm::LlmError) -> String {
    match (e, env) {
        (crate::llm::LlmError::KeyRefused { .. }, Some(env)) => {
            format!("{provider} refused the key: set a valid one in {env}")
        }
        (crate::llm::LlmError::KeyRefused { .. }, None) => {
            format!("{provider} refused the key: set a valid one")
        }
        _ => format!("the provider did not answer: {e}"),
    }
}

/// `ms` as a short human duration: `45 s`, `12 min`, `3 h`, `2 d`.
fn human(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=119 => format!("{s} s"),
        120..=7_199 => format!("{} min", s / 60),
        7_200..=172_799 => format!("{} h", s / 3_600),
        _ => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_webhook_is_judged_by_its_last_error_and_the_shell() {
        let now = 1_000_000_000_000;
        let none = json!({"url": "", "pending_update_count": 0});
        assert_eq!(
            webhook_check("w".into(), &none, Delivery::Either, now).status,
            Status::Ok
        );
        assert_eq!(
            webhook_check("w".into(), &none, Delivery::Webhook, now).status,
            Status::Fail
        );
        let failing = json!({"url": "https://bot.example/telegram/main", "pending_update_count": 7,
            "last_error_date": now / 1000 - 120, "last_error_message": "Wrong response from the webhook: 500 Internal Server Error"});
        let c = webhook_check("w".into(), &failing, Delivery::Webhook, now);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.detail
                .contains("2 min ago: Wrong response from the webhook: 500"),
            "{}",
            c.detail
        );
        assert!(c.detail.contains("7 update(s) waiting"));
        let old = json!({"url": "https://bot.example/telegram/main", "pending_update_count": 0,
            "last_error_date": now / 1000 - 2 * 86_400, "last_error_message": "Connection timed out"});
        assert_eq!(
            webhook_check("w".into(), &old, Delivery::Webhook, now).status,
            Status::Ok
        );
    }

    #[test]
    fn a_refused_key_is_told_apart_from_a_provider_down() {
        let refused = crate::llm::LlmError::from_status(401, None, b"invalid x-api-key");
        assert_eq!(
            key_failure("anthropic", Some("ANTHROPIC_API_KEY"), &refused),
            "anthropic refused the key: set a valid one in ANTHROPIC_API_KEY"
        );
        let down = crate::llm::LlmError::from_status(503, None, b"");
        assert!(key_failure("anthropic", None, &down).contains("did not answer"));
        assert_eq!(human(45_000), "45 s");
        assert_eq!(human(12 * 60_000), "12 min");
    }
}
