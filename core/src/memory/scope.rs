//! Whose memory a conversation reads and writes.
//!
//! A private chat's memory belongs to the person; a group's memory to the group. Scopes are
//! `<agent>/<connector>/<owner>`, where the owner segment is `u<user id>`, `g<chat id>`, or
//! `shared` for a deployment that chose one memory everywhere (`shared_memory: true` on the
//! connector). Recall, the memory tools and session summaries only ever see the scope of the
//! conversation they run in, so one person's notes never reach another person or a group.

use crate::ids::{ConnectorId, Scope};
use crate::telegram::Message;

/// Who a memory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOwner {
    /// A person (private chats, and the terminal chat of the connector's owner).
    User(i64),
    /// A group or supergroup, shared by its members.
    Group(i64),
    /// Everyone of the connector: the single-user setting.
    Shared,
}

impl MemoryOwner {
    /// The owner of the memory a message reads and writes.
    pub fn of(msg: &Message, shared: bool) -> MemoryOwner {
        if shared {
            return MemoryOwner::Shared;
        }
        match (&msg.from, msg.is_private()) {
            (Some(from), true) => MemoryOwner::User(from.id.0),
            _ => MemoryOwner::Group(msg.chat.id.0),
        }
    }

    fn segment(self) -> String {
        match self {
            MemoryOwner::User(id) => format!("u{id}"),
            MemoryOwner::Group(id) => format!("g{id}"),
            MemoryOwner::Shared => "shared".into(),
        }
    }

    /// Reads an owner segment back (`u42`, `g-100123`, `shared`).
    pub fn parse(segment: &str) -> Option<MemoryOwner> {
        if segment == "shared" {
            return Some(MemoryOwner::Shared);
        }
        if let Some(id) = segment.strip_prefix('u') {
            return id.parse().ok().map(MemoryOwner::User);
        }
        segment
            .strip_prefix('g')
            .and_then(|id| id.parse().ok())
            .map(MemoryOwner::Group)
    }
}

/// The scope of one owner's memory for an agent on a connector.
pub fn scope(agent: &str, connector: &ConnectorId, owner: MemoryOwner) -> Scope {
    Scope::new(format!("{agent}/{connector}/{}", owner.segment()))
}

/// The scope every conversation of the connector shared before memory was per person:
/// `<agent>/<connector>`. Only the one-time migration reads it.
pub fn legacy_scope(agent: &str, connector: &ConnectorId) -> Scope {
    Scope::new(format!("{agent}/{connector}"))
}

/// Whether a path relative to the legacy root is a legacy memory file (`MEMORY.md` or
/// `memory/…`) rather than a per-owner directory.
pub fn is_legacy_file(rel: &str) -> bool {
    rel == "MEMORY.md" || rel.starts_with("memory/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_round_trip_and_never_collide_with_legacy_files() {
        for owner in [
            MemoryOwner::User(42),
            MemoryOwner::Group(-100123),
            MemoryOwner::Shared,
        ] {
            let seg = owner.segment();
            assert_eq!(MemoryOwner::parse(&seg), Some(owner));
            assert!(!is_legacy_file(&format!("{seg}/MEMORY.md")));
        }
        assert_eq!(
            scope("a", &ConnectorId::new("main"), MemoryOwner::User(7)),
            "a/main/u7"
        );
        assert_eq!(MemoryOwner::parse("memory"), None);
        assert_eq!(MemoryOwner::parse("MEMORY.md"), None);
    }
}
