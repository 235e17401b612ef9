//! What a shell's command line and set-up ask of the app, as methods, so no shell reaches into
//! `App` or `Connector` fields: which bots there are and what they still lack, their webhooks
//! (and a serverless deployment's set-up of itself), the incoming webhooks, sessions, long
//! polling, pairings, skills and housekeeping.

use clawless_platform::{KvExt, PortError};
use serde_json::Value;

use crate::app::Admin;
use crate::ids::{ConnectorId, SessionKey};
use crate::memory::scope::MemoryOwner;
use crate::memory::store::{MemoryError, MemoryHit};
use crate::pairing::{Paired, Pending};
use crate::session;
use crate::telegram::TelegramError;

/// Why an admin call could not be done: a message for the person at the command line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdminError {
    /// No connector of that name.
    #[error("no connector {0:?} (configured: {1})")]
    UnknownConnector(String, String),
    /// A setting is missing; the message names the environment variable.
    #[error("{0}")]
    NotSet(String),
    #[error("Telegram: {0}")]
    Telegram(#[from] TelegramError),
    #[error("storage: {0}")]
    Storage(#[from] PortError),
}

/// What [`Admin::setup`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SetupReport {
    /// Every webhook was set.
    pub ok: bool,
    /// One sentence per step, in order.
    pub steps: Vec<String>,
}

/// One incoming webhook as the operator sees it (`/admin/hooks`, `doctor`, the panel): where
/// its deliveries land and whether its secret is set, never the secret nor its length.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookInfo {
    /// Its URL's last part: `POST /hooks/<name>`.
    pub name: String,
    /// The bot whose chat it is.
    pub connector: String,
    pub chat: i64,
    pub mode: crate::config::HookMode,
    pub per_minute: u32,
    /// The agent that answers a `turn` (`None`: the chat's).
    pub agent: Option<String>,
    /// The setting that holds its secret (a name, not the secret).
    pub secret_env: String,
    /// Whether that setting is set: without it every delivery is refused with 401.
    pub secret_set: bool,
}

/// Who may talk to a connector, as `clawless pairing list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingList {
    pub owner: Option<i64>,
    /// From the config and `TELEGRAM_ALLOWED_USERS`, the owner first.
    pub configured: Vec<i64>,
    pub paired: Vec<Paired>,
    /// Codes waiting for approval.
    pub pending: Vec<Pending>,
}

impl<'a> Admin<'a> {
    /// The connectors' ids, in order.
    pub fn connector_ids(self) -> Vec<ConnectorId> {
        self.app.connectors.keys().cloned().collect()
    }

    /// The incoming webhooks (`hooks:`), by name.
    pub fn hooks(self) -> Vec<HookInfo> {
        self.app
            .hooks
            .values()
            .map(|h| HookInfo {
                name: h.config.name.clone(),
                connector: h.connector.as_str().to_owned(),
                chat: h.config.chat,
                mode: h.config.mode,
                per_minute: h.config.per_minute,
                agent: h.config.agent.clone(),
                secret_env: h.config.secret_env.clone(),
                secret_set: h.has_secret(),
            })
            .collect()
    }

    /// The configuration of the connector's default agent (`None`: no such connector).
    pub fn default_agent_config(self, id: &ConnectorId) -> Option<crate::config::AgentConfig> {
        let conn = self.app.connectors.get(id)?;
        Some(conn.default_agent().config.clone())
    }

    /// `name`, or the only connector when `name` is `None`; an error names the choices.
    pub fn connector_id(self, name: Option<&str>) -> Result<ConnectorId, AdminError> {
        let ids = self.connector_ids();
        match name {
            Some(n) if self.app.connectors.contains_key(n) => Ok(ConnectorId::new(n)),
            None if ids.len() == 1 => Ok(ids[0].clone()),
            other => Err(AdminError::UnknownConnector(
                other.unwrap_or("(none given)").to_owned(),
                ids.iter()
                    .map(ConnectorId::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// Who may talk to `connector`: the configured users (the owner first) and the paired
    /// people (at most 1000), and the codes waiting for approval.
    pub async fn pairing_list(self, connector: &ConnectorId) -> Result<PairingList, AdminError> {
        let conn = self.conn(connector)?;
        let pairings = self.app.pairings();
        let mut configured: Vec<i64> = conn.owner.into_iter().collect();
        configured.extend(conn.allowed.iter().filter(|u| Some(**u) != conn.owner));
        Ok(PairingList {
            owner: conn.owner,
            configured,
            paired: pairings.paired(&conn.id, 1000).await?,
            pending: pairings.pending(&conn.id).await?,
        })
    }

    /// Lets in the person whose pending code is `code` (the command line's `/pair`): the
    /// pairing is kept, audited, and they are welcomed; `None` when no such code waits.
    pub async fn pairing_approve(
        self,
        connector: &ConnectorId,
        code: &str,
    ) -> Result<Option<Paired>, AdminError> {
        let conn = self.conn(connector)?;
        let Some(paired) = self.app.pairings().approve(&conn.id, code, None).await? else {
            return Ok(None);
        };
        self.audit_admin(conn, &paired, "approved").await?;
        crate::pairing::welcome(conn, &paired).await;
        Ok(Some(paired))
    }

    /// Ends `user`'s pairing (they are a stranger again); `None` when they were not paired.
    /// Configured users are changed in the config, not here.
    pub async fn pairing_remove(
        self,
        connector: &ConnectorId,
        user: i64,
    ) -> Result<Option<Paired>, AdminError> {
        let conn = self.conn(connector)?;
        let Some(paired) = self.app.pairings().remove(&conn.id, user).await? else {
            return Ok(None);
        };
        self.audit_admin(conn, &paired, "removed").await?;
        Ok(Some(paired))
    }

    /// Writes a pairing's `action` done at the command line to the audit trail: chat and
    /// user 0, the person's id as the trace.
    async fn audit_admin(
        self,
        conn: &crate::connector::Connector,
        paired: &Paired,
        action: &str,
    ) -> Result<(), PortError> {
        let entry = crate::audit::Entry {
            at_ms: self.app.platform.clock.now_ms(),
            trace: paired.person.id,
            seq: 0,
            chat: 0,
            user: 0,
            step: paired.step(action),
        };
        let retention = self.app.config.audit.retention();
        crate::audit::write(&*self.app.platform.kv, &conn.id, &[entry], retention).await
    }

    fn conn(self, connector: &ConnectorId) -> Result<&'a crate::connector::Connector, AdminError> {
        let id = self.connector_id(Some(connector.as_str()))?;
        self.app
            .connectors
            .get(&id)
            .ok_or_else(|| AdminError::UnknownConnector(id.to_string(), String::new()))
    }

    /// Connectors with no configured user, so no owner (strangers get codes only the command
    /// line can approve).
    pub fn connectors_without_users(self) -> Vec<ConnectorId> {
        self.app
            .connectors
            .values()
            .filter(|c| c.allowed.is_empty())
            .map(|c| c.id.clone())
            .collect()
    }

    /// Whether some agent has a model it can call.
    pub fn has_model(self) -> bool {
        self.app
            .connectors
            .values()
            .flat_map(|c| c.agents_used())
            .any(|a| !a.chain.links.is_empty())
    }

    /// The webhook secrets still to set, as environment variable names.
    pub fn missing_webhook_secrets(self) -> Vec<String> {
        let mut out: Vec<String> = self
            .app
            .connectors
            .values()
            .filter(|c| c.secret.is_empty())
            .map(|c| c.secret_env.clone())
            .collect();
        out.dedup();
        out
    }

    fn bot_of(
        self,
        connector: &ConnectorId,
    ) -> Result<&'a crate::connector::Connector, AdminError> {
        let c = self.conn(connector)?;
        if !c.token_set {
            return Err(AdminError::NotSet(format!("set {} first", c.token_env)));
        }
        Ok(c)
    }

    /// Points Telegram at `url` for `connector` (`/telegram/<connector>` appended unless the
    /// URL has a `/telegram/` path), with the connector's secret. Returns the full URL.
    pub async fn set_webhook(
        self,
        connector: &ConnectorId,
        url: &str,
    ) -> Result<String, AdminError> {
        let c = self.bot_of(connector)?;
        if c.secret.is_empty() {
            return Err(AdminError::NotSet(format!(
                "set {} first: Telegram will send it with every update",
                c.secret_env
            )));
        }
        let full = if url.contains("/telegram/") {
            url.to_owned()
        } else {
            format!("{}/telegram/{}", url.trim_end_matches('/'), c.id)
        };
        c.bot.set_webhook(&full, &c.secret).await?;
        Ok(full)
    }

    /// Makes `connector`'s menu button open the control panel at `<origin>/app/` (a Mini App:
    /// HTTPS only). Returns that URL.
    pub async fn set_panel_button(
        self,
        connector: &ConnectorId,
        origin: &str,
    ) -> Result<String, AdminError> {
        let c = self.bot_of(connector)?;
        let url = format!("{}/app/", origin.trim_end_matches('/'));
        if !url.starts_with("https://") {
            return Err(AdminError::NotSet(format!(
                "{url} is not HTTPS, which Telegram requires of a Mini App"
            )));
        }
        c.bot.set_menu_button_web_app("Panel", &url).await?;
        Ok(url)
    }

    /// A serverless deployment sets itself up (`POST /admin/setup`): every connector's webhook
    /// pointed at `webhook` (`<webhook>/telegram/<connector>`, with the secret and the update
    /// kinds the bot reads: the deployment's own `origin`, or the Worker's front), then the
    /// command menus, then (HTTPS) each bot's menu button opening the control panel at
    /// `origin`. Each step said in one sentence; `ok` only when every webhook was set.
    pub async fn setup(self, origin: &str, webhook: &str) -> SetupReport {
        let mut report = SetupReport {
            ok: true,
            steps: Vec::new(),
        };
        let origin = origin.trim_end_matches('/');
        let webhook = webhook.trim_end_matches('/');
        for url in [origin, webhook] {
            if !url.starts_with("https://") && !url.starts_with("http://") {
                report.ok = false;
                report
                    .steps
                    .push(format!("{url:?} is not an http(s) URL: nothing was set"));
                return report;
            }
        }
        for id in self.connector_ids() {
            match self.set_webhook(&id, webhook).await {
                Ok(full) => report.steps.push(format!("{id}: webhook set to {full}")),
                Err(e) => {
                    report.ok = false;
                    report
                        .steps
                        .push(format!("{id}: the webhook was not set: {e}"));
                }
            }
        }
        report.steps.extend(self.register_menus().await);
        if origin.starts_with("https://") {
            for id in self.connector_ids() {
                report
                    .steps
                    .push(match self.set_panel_button(&id, origin).await {
                        Ok(url) => format!("{id}: the menu button opens the panel at {url}"),
                        Err(e) => format!("{id}: the panel's menu button was not set: {e}"),
                    });
            }
        }
        report
    }

    /// What Telegram says of `connector`'s webhook (`getWebhookInfo`).
    pub async fn webhook_info(self, connector: &ConnectorId) -> Result<Value, AdminError> {
        Ok(self.bot_of(connector)?.bot.get_webhook_info().await?)
    }

    /// Removes `connector`'s webhook, so long polling can run.
    pub async fn delete_webhook(self, connector: &ConnectorId) -> Result<(), AdminError> {
        Ok(self.bot_of(connector)?.bot.delete_webhook().await?)
    }

    /// The webhook URL Telegram has for `connector`, if one is set.
    pub async fn webhook_url(self, connector: &ConnectorId) -> Result<Option<String>, AdminError> {
        let info = self.webhook_info(connector).await?;
        Ok(info
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .map(str::to_owned))
    }

    /// Forgets the conversation history of a session key (the terminal chat's `/new`).
    pub async fn reset_session(self, session_key: &SessionKey) -> Result<(), AdminError> {
        Ok(session::clear(&*self.app.platform.kv, session_key).await?)
    }

    /// Long polling: `connector`'s updates from `offset` on (waiting up to `timeout_secs`),
    /// each with the offset to poll from (and save) once it is accepted.
    pub async fn poll_updates(
        self,
        connector: &ConnectorId,
        offset: i64,
        timeout_secs: u64,
    ) -> Result<Vec<(Value, i64)>, AdminError> {
        let c = self.bot_of(connector)?;
        let updates = c.bot.get_updates(offset, timeout_secs).await?;
        Ok(updates
            .into_iter()
            .map(|u| {
                let next = u
                    .get("update_id")
                    .and_then(Value::as_i64)
                    .map_or(offset, |id| offset.max(id + 1));
                (u, next)
            })
            .collect())
    }

    /// The long-polling offset last saved for `connector` (0 when none is, or it cannot be
    /// read: Telegram then hands out what it has not confirmed, and the inbox drops what it
    /// already has).
    pub async fn poll_offset(self, connector: &ConnectorId) -> i64 {
        let Ok(c) = self.bot_of(connector) else {
            return 0;
        };
        self.app
            .platform
            .kv
            .get_json(&crate::keys::poll_offset(&c.id))
            .await
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Saves the long-polling offset of `connector`.
    pub async fn save_poll_offset(
        self,
        connector: &ConnectorId,
        offset: i64,
    ) -> Result<(), AdminError> {
        let c = self.bot_of(connector)?;
        Ok(self
            .app
            .platform
            .kv
            .put_json(&crate::keys::poll_offset(&c.id), &offset, None)
            .await?)
    }

    /// Re-indexes the changed memory files of every scope of `connector`, after moving the
    /// memory from before it was per person to its owner (once). Returns how many files
    /// were (re)indexed.
    pub async fn reindex_memory(self, connector: &ConnectorId) -> Result<usize, MemoryError> {
        let Some(conn) = self.app.connectors.get(connector) else {
            return Ok(0);
        };
        let life = self.app.lifecycle();
        // Memory from before it was per person was the connector's (single) agent's.
        let first = &conn.default_agent().config.id;
        life.migrate_legacy(first, &conn.id, conn.default_memory_owner())
            .await?;
        let mut changed = 0;
        for agent in conn.agents_used() {
            for scope in life.scopes(&agent.config.id, &conn.id).await? {
                changed += self.app.memory.reindex(&scope).await?;
            }
        }
        Ok(changed)
    }

    /// Searches the memory of `owner` (default: the connector's owner, or the shared memory)
    /// on `connector` under its default agent, after re-indexing it.
    pub async fn search_memory(
        self,
        connector: &ConnectorId,
        owner: Option<MemoryOwner>,
        query: &str,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let Some(conn) = self.app.connectors.get(connector) else {
            return Ok(Vec::new());
        };
        let Some(owner) = owner.or(conn.default_memory_owner()) else {
            return Ok(Vec::new());
        };
        let scope = conn.memory_scope(owner);
        self.app.memory.reindex(&scope).await?;
        self.app.memory.search(&scope, query).await
    }

    /// The audit trail of `connector` over the past `window_ms`, oldest first, at most
    /// `limit` entries, only of `chat` when given.
    pub async fn audit_entries(
        self,
        connector: &ConnectorId,
        window_ms: u64,
        chat: Option<i64>,
        limit: usize,
    ) -> Result<Vec<crate::audit::Entry>, PortError> {
        let since = self.app.platform.clock.now_ms().saturating_sub(window_ms);
        crate::audit::read(&*self.app.platform.kv, connector, since, chat, limit).await
    }

    /// The skills the default agent of `connector` sees (the config's and the deployment's,
    /// by name), each with whether it is offered and why not; with the agent's id. A
    /// conversation's own skills are that conversation's and are not listed.
    pub async fn skills(
        self,
        connector: &ConnectorId,
    ) -> Result<(String, Vec<crate::skills::Status>), AdminError> {
        let id = self.connector_id(Some(connector.as_str()))?;
        let Some(conn) = self.app.connectors.get(&id) else {
            return Err(AdminError::UnknownConnector(id.to_string(), String::new()));
        };
        let agent = conn.default_agent();
        let statuses = match &agent.skills {
            Some(offer) => offer.statuses(None).await,
            None => Vec::new(),
        };
        Ok((agent.config.id.clone(), statuses))
    }

    /// Drops every lease: only for a process that knows no other drainer is alive, such as
    /// the native binary at start-up (one process per data directory).
    pub async fn clear_leases(self) -> Result<usize, PortError> {
        self.app.inbox.clear_leases().await
    }
}
