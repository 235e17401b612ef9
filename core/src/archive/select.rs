//! Whose data an export holds: the whole bot, or one person's (their private chat, their
//! memory and workspace, their usage, reminders, grants and choices). A person's export holds
//! nothing of a group, nor of any other person.

use crate::ids::ConnectorId;
use crate::keys;

/// Whose data to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whom {
    /// Everything the bot keeps.
    Bot,
    /// One person of a connector.
    Person { connector: ConnectorId, user: i64 },
}

impl Whom {
    /// How the manifest names it.
    pub fn label(&self) -> String {
        match self {
            Whom::Bot => "bot".into(),
            Whom::Person { connector, user } => format!("person {connector} {user}"),
        }
    }

    /// Whether the Kv entry `key` (with `value`) is this export's.
    pub fn has_key(&self, key: &str, value: &[u8]) -> bool {
        let Whom::Person { connector, user } = self else {
            return true;
        };
        let conn = connector.as_str();
        let private = format!("{conn}:{user}");
        let me = user.to_string();
        let u = format!("u{user}");
        let Some((prefix, rest)) = key.split_once('/') else {
            return false;
        };
        let seg: Vec<&str> = rest.split('/').collect();
        let in_chat = || seg.first() == Some(&conn) && seg.get(1) == Some(&me.as_str());
        let in_scope = || seg.get(1) == Some(&conn) && seg.get(2) == Some(&u.as_str());
        match prefix {
            // A session key (`<conn>:<chat>[:t<topic>]`): the private chat's, any topic.
            "session" | "summarized" | "compacted" | "agent" => seg.first().is_some_and(|s| {
                *s == private
                    || s.strip_prefix(&private)
                        .is_some_and(|t| t.starts_with(":t"))
            }),
            "consolidation" | "consolidated" | "memscope" => in_scope(),
            "paired" | "panel-out" | "grant" | "sched" | "sched-fired" | "tz" | "model"
            | "voice" => in_chat(),
            "usage" => {
                seg.first() == Some(&conn)
                    && seg
                        .get(2)
                        .is_some_and(|w| *w == u || *w == format!("c{user}"))
            }
            "sched-due" => {
                keys::parse_due(key).is_some_and(|(_, c, chat, _)| c == *connector && chat == *user)
            }
            // The id counter: an import keeps the larger, so ids never collide.
            "sched-seq" => seg.first() == Some(&conn),
            "audit" => {
                seg.first() == Some(&conn)
                    && serde_json::from_slice::<crate::audit::Entry>(value)
                        .is_ok_and(|e| e.chat == *user)
            }
            _ => false,
        }
    }

    /// Whether the file at `path` (on the Files port) is this export's: for a person, their
    /// memory and workspace (`memory/<agent>/<conn>/u<user>/…`, `workspace/…` alike).
    pub fn has_file(&self, path: &str) -> bool {
        // Spoken answers waiting for their send are no one's to carry.
        if path.split('/').next() == Some(crate::turn::SPOKEN_DIR) {
            return false;
        }
        let Whom::Person { connector, user } = self else {
            return true;
        };
        let seg: Vec<&str> = path.splitn(5, '/').collect();
        matches!(seg.first(), Some(&"memory") | Some(&"workspace"))
            && seg.len() == 5
            && seg[2] == connector.as_str()
            && seg[3] == format!("u{user}")
    }
}
