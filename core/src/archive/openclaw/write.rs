//! [`Admin::import_openclaw`]: a [`Plan`] written into the store: the notes into one agent's
//! memory of the owner, the skills onto the Files port, the owner's time zone, and each
//! conversation as its private chat's history, that chat then talking with the same agent.
//! Running it again writes nothing.

use clawless_platform::{ErrorKind, KvExt};
use serde::Serialize;

use super::sessions::Chat;
use super::settings::is_id;
use super::Plan;
use crate::app::Admin;
use crate::archive::ArchiveError;
use crate::config::Place;
use crate::ids::{ConnectorId, SessionKey};
use crate::keys;
use crate::memory::scope::scope;

/// What [`Admin::import_openclaw`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Written {
    /// The agent whose memory got the notes and whose the conversations are.
    pub agent: String,
    /// Memory files written new, appended to, and already holding the text.
    pub notes_added: usize,
    pub notes_appended: usize,
    pub notes_same: usize,
    /// Skill files written, and already there.
    pub skill_files_added: usize,
    pub skill_files_kept: usize,
    /// Memory files indexed.
    pub reindexed: usize,
    /// Conversations written as a chat's history, and already there.
    pub conversations_added: usize,
    pub conversations_same: usize,
    /// What else was done or found, one sentence each (the time zone, who was let in).
    pub said: Vec<String>,
    /// What could not be written here, each with why.
    pub unmapped: Vec<String>,
}

/// OpenClaw's provider ids that have another name here.
const PROVIDER_NAMES: [(&str, &str); 1] = [("google", "gemini")];

impl Admin<'_> {
    /// `plan`'s model refs that name a provider of this config (`google/…` is `gemini/…`
    /// here), in order; and those that do not, each with why.
    pub fn openclaw_models(self, plan: &Plan) -> (Vec<String>, Vec<String>) {
        let (mut here, mut not) = (Vec::new(), Vec::new());
        for model in &plan.settings.models {
            let shown: String = model.chars().filter(|c| !c.is_control()).take(80).collect();
            let Some((provider, name)) = model.split_once('/') else {
                not.push(format!(
                    "openclaw.json model {shown}: an alias, not a provider/model"
                ));
                continue;
            };
            let provider = (PROVIDER_NAMES
                .iter()
                .find(|(theirs, _)| *theirs == provider))
            .map_or(provider, |(_, ours)| *ours);
            if self.app.config.providers.contains_key(provider) && !name.is_empty() {
                let id = format!("{provider}/{name}");
                if !here.contains(&id) {
                    here.push(id);
                }
            } else {
                not.push(format!(
                    "openclaw.json model {shown}: no provider {provider:.40} in providers.d here"
                ));
            }
        }
        (here, not)
    }

    /// Writes `plan` for `connector`: its notes into `agent`'s memory of the connector's
    /// owner (or the shared memory), its skills onto the Files port, OpenClaw's time zone as
    /// the owner's private chat's (unless it has one), and each conversation as its private
    /// chat's history when that chat has none here, the chat then talking with `agent`
    /// (where its route offers it). The persona and the config are the shell's to write.
    pub async fn import_openclaw(
        self,
        plan: &Plan,
        connector: &ConnectorId,
        agent: &str,
    ) -> Result<Written, ArchiveError> {
        let app = self.app;
        let conn = app.connectors.get(connector).ok_or_else(|| {
            ArchiveError::Write(format!("no connector {connector} in the config"))
        })?;
        if !is_id(agent) {
            return Err(ArchiveError::Write(format!(
                "{agent:.40} is not an agent id"
            )));
        }
        let mut done = Written {
            agent: agent.to_owned(),
            ..Default::default()
        };
        match conn.default_memory_owner() {
            Some(owner) => {
                let scope = scope(agent, connector, owner);
                self.write_notes(plan, &crate::memory::store::root(&scope), &mut done)
                    .await?;
                done.reindexed = (app.memory.reindex(&scope).await)
                    .map_err(|e| ArchiveError::Write(format!("indexing the notes: {e}")))?;
            }
            None if plan.memory.is_empty() => {}
            None => {
                return Err(ArchiveError::Write(format!(
                    "connector {connector} has no owner: set its owner (or shared_memory) so the notes have someone to belong to"
                )))
            }
        }
        let files = &*app.platform.files;
        for (rel, bytes) in &plan.skills {
            let path = format!("skills/{rel}");
            match files.read(&path).await {
                Ok(_) => done.skill_files_kept += 1,
                Err(e) if e.kind == ErrorKind::NotFound => {
                    files.write(&path, bytes).await?;
                    done.skill_files_added += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.set_zone(plan, connector, &mut done).await?;
        let users = &plan.settings.telegram_users;
        let new: Vec<String> = (users.iter())
            .filter(|u| Some(**u) != conn.owner && !conn.allowed.contains(u))
            .map(i64::to_string)
            .collect();
        if !new.is_empty() {
            done.said.push(format!(
                "openclaw.json let in {} on Telegram, who may not talk to this bot yet: add them to allowed_users of connector {connector} in main.yaml (or TELEGRAM_ALLOWED_USERS), or let them in when they ask with a pairing code",
                new.join(", ")
            ));
        }
        self.continue_conversations(plan, connector, agent, &mut done)
            .await?;
        Ok(done)
    }

    /// Each memory file under `root`: written, appended to once, or already there.
    async fn write_notes(
        self,
        plan: &Plan,
        root: &str,
        done: &mut Written,
    ) -> Result<(), ArchiveError> {
        let files = &*self.app.platform.files;
        for (rel, text) in &plan.memory {
            let path = format!("{root}/{rel}");
            let held = match files.read(&path).await {
                Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                Err(e) if e.kind == ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            };
            match held {
                None => {
                    files.write(&path, text.as_bytes()).await?;
                    done.notes_added += 1;
                }
                Some(held) if held.contains(text.trim()) => done.notes_same += 1,
                Some(held) => {
                    let joined = format!("{}\n\n## From OpenClaw\n\n{}\n", held.trim_end(), text);
                    files.write(&path, joined.as_bytes()).await?;
                    done.notes_appended += 1;
                }
            }
        }
        Ok(())
    }

    /// OpenClaw's `userTimezone` as the owner's private chat's, unless it has one.
    async fn set_zone(
        self,
        plan: &Plan,
        connector: &ConnectorId,
        done: &mut Written,
    ) -> Result<(), ArchiveError> {
        let Some(name) = &plan.settings.timezone else {
            return Ok(());
        };
        let shown: String = name.chars().filter(|c| !c.is_control()).take(60).collect();
        let Some(zone) = crate::schedule::zone::Zone::find(name) else {
            done.unmapped.push(format!(
                "openclaw.json agents.defaults.userTimezone {shown}: not a time zone this assistant knows"
            ));
            return Ok(());
        };
        let owner = self.app.connectors.get(connector).and_then(|c| c.owner);
        let Some(owner) = owner else {
            done.unmapped.push(format!("openclaw.json agents.defaults.userTimezone {shown}: connector {connector} has no owner whose chat would take it"));
            return Ok(());
        };
        let kv = &*self.app.platform.kv;
        match kv.get(&keys::chat_zone(connector, owner)).await? {
            Some(held) if held != zone.name.as_bytes() => done.said.push(format!(
                "time zone: the owner's chat keeps its own ({}), not OpenClaw's {}",
                String::from_utf8_lossy(&held)
                    .chars()
                    .take(60)
                    .collect::<String>(),
                zone.name
            )),
            Some(_) => {}
            None => {
                self.app
                    .schedules()
                    .set_zone(connector, owner, &zone)
                    .await?;
                done.said.push(format!(
                    "time zone: {} for the owner's chat (OpenClaw's userTimezone)",
                    zone.name
                ));
            }
        }
        Ok(())
    }

    /// Each conversation as its private chat's history, where the chat has none here; the
    /// chat then talks with `agent` (its route's own agent needs no choice).
    async fn continue_conversations(
        self,
        plan: &Plan,
        connector: &ConnectorId,
        agent: &str,
        done: &mut Written,
    ) -> Result<(), ArchiveError> {
        let app = self.app;
        let Some(conn) = app.connectors.get(connector) else {
            return Ok(());
        };
        let kv = &*app.platform.kv;
        let window = app.config.session.history_window.max(2);
        for c in &plan.conversations {
            let chat = match c.chat {
                Chat::User(id) => id,
                Chat::Owner => match conn.owner {
                    Some(id) => id,
                    None => {
                        done.unmapped.push(format!(
                            "{}: connector {connector} has no owner whose chat would take it",
                            c.from
                        ));
                        continue;
                    }
                },
            };
            let mut messages = c.messages.clone();
            crate::session::trim(&mut messages, window);
            // A private chat's session: connector and chat (see `session::session_key`).
            let key = SessionKey::new(format!("{connector}:{chat}"));
            let held = crate::session::load(kv, &key).await?;
            if held.messages == messages {
                done.conversations_same += 1;
                continue;
            }
            if !held.messages.is_empty() || held.summary.is_some() {
                done.unmapped.push(format!(
                    "{}: chat {chat} has a conversation here already; not merged into it",
                    c.from
                ));
                continue;
            }
            let session = crate::session::Session {
                messages,
                updated_ms: app.platform.clock.now_ms(),
                ..held
            };
            crate::session::save(kv, &key, &session).await?;
            done.conversations_added += 1;
            let place = Place {
                chat,
                topic: None,
                private: true,
            };
            let choice = keys::chat_agent(&key);
            if conn.route(Some(&place)).agent != agent && kv.get(&choice).await?.is_none() {
                kv.put_json(&choice, &agent, None).await?;
            }
        }
        Ok(())
    }
}
