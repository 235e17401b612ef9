//! The bot's command menu in Telegram (`setMyCommands`), from the command table `/help` reads
//! ([`crate::turn::commands`]): everyone's commands in the default scope, and everyone's plus
//! the owner's in the owner's private chat. Sent only when it changed: a hash of what was last
//! sent is kept in the Kv, so a shell may ask at every start (native) or at the first scheduled
//! run of each instance (Worker, Lambda) for one Kv read.

use clawless_platform::Kv;
use serde_json::{json, Value};
use sha2::Digest;

use crate::app::Admin;
use crate::connector::Connector;
use crate::keys;
use crate::turn::commands;

/// What registering the menu did on one connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// Sent to Telegram: the scopes set (`default`, and `owner` when an owner is known).
    Sent(Vec<&'static str>),
    /// Telegram already has this menu (the hash matched).
    Unchanged,
}

impl Admin<'_> {
    /// Sets every connector's command menu in Telegram where it changed (see [`crate::menu`]):
    /// what was done per connector, as sentences. Failures are logged and said, not returned.
    pub async fn register_menus(self) -> Vec<String> {
        let mut out = Vec::new();
        for c in self.app.connectors.values().filter(|c| c.token_set) {
            let line = match register(c, &*self.app.platform.kv).await {
                Ok(Registered::Sent(scopes)) => {
                    let line = format!(
                        "{}: command menu set ({} scope)",
                        c.id,
                        scopes.join(" and ")
                    );
                    // After its hash is saved: a restart from here on sends nothing.
                    tracing::info!("{line}");
                    line
                }
                Ok(Registered::Unchanged) => {
                    format!("{}: command menu unchanged", c.id)
                }
                Err(e) => {
                    tracing::warn!(connector = %c.id, error = %e, "setting the command menu failed");
                    format!("{}: setting the command menu failed: {e}", c.id)
                }
            };
            out.push(line);
        }
        out
    }
}

/// The `setMyCommands` bodies of `owner`'s bot: the default scope first.
fn bodies(owner: Option<i64>) -> Vec<(&'static str, Value)> {
    let list = |owner: bool| -> Vec<Value> {
        commands::menu(owner)
            .into_iter()
            .map(|(command, description)| json!({"command": command, "description": description}))
            .collect()
    };
    let mut out = vec![(
        "default",
        json!({"commands": list(false), "scope": {"type": "default"}}),
    )];
    if let Some(owner) = owner {
        out.push((
            "owner",
            json!({"commands": list(true), "scope": {"type": "chat", "chat_id": owner}}),
        ));
    }
    out
}

/// A short hex digest of the bodies: what the Kv keeps.
fn digest(bodies: &[(&'static str, Value)]) -> String {
    let mut hash = sha2::Sha256::new();
    for (_, body) in bodies {
        hash.update(body.to_string().as_bytes());
        hash.update(b"\n");
    }
    hash.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sets `connector`'s menu unless Telegram already has it. The hash is saved only after every
/// scope was set, so a failure is tried again next time. Errors are sentences.
async fn register(connector: &Connector, kv: &dyn Kv) -> Result<Registered, String> {
    let bodies = bodies(connector.owner);
    let hash = digest(&bodies);
    let key = keys::command_menu(&connector.id);
    let saved = kv
        .get(&key)
        .await
        .map_err(|e| format!("reading the menu's hash: {e}"))?;
    if saved.as_deref() == Some(hash.as_bytes()) {
        return Ok(Registered::Unchanged);
    }
    let mut scopes = Vec::new();
    for (scope, body) in bodies {
        connector
            .bot
            .call("setMyCommands", body)
            .await
            .map_err(|e| format!("setMyCommands ({scope} scope): {e}"))?;
        scopes.push(scope);
    }
    kv.put(&key, hash.as_bytes(), None)
        .await
        .map_err(|e| format!("saving the menu's hash: {e}"))?;
    Ok(Registered::Sent(scopes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_scope_adds_the_owners_commands_and_changes_the_hash() {
        let everyone = bodies(None);
        assert_eq!(everyone.len(), 1);
        let with_owner = bodies(Some(42));
        assert_eq!(with_owner[1].1["scope"]["chat_id"], 42);
        let names = |v: &Value| -> Vec<String> {
            v["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["command"].as_str().map(str::to_owned))
                .collect()
        };
        assert!(!names(&with_owner[0].1).contains(&"users".to_owned()));
        assert!(names(&with_owner[1].1).contains(&"users".to_owned()));
        assert_ne!(digest(&everyone), digest(&with_owner));
        assert_ne!(digest(&with_owner), digest(&bodies(Some(43))));
        assert_eq!(digest(&with_owner), digest(&bodies(Some(42))));
    }
}
