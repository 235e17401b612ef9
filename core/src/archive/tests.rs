//! The archive's pure parts: whose keys and files an export holds.

use super::select::Whom;
use crate::ids::ConnectorId;

#[test]
fn a_person_holds_their_own_and_nothing_of_others() {
    let me = Whom::Person {
        connector: ConnectorId::new("main"),
        user: 42,
    };
    for key in [
        "session/main:42",
        "session/main:42:t7",
        "summarized/main:42/100",
        "agent/main:42",
        "consolidation/assistant/main/u42",
        "paired/main/42",
        "grant/main/42/exec",
        "sched/main/42/0000000001",
        "sched-due/000001700000000000/main/42/1",
        "sched-seq/main",
        "sched-fired/main/42/0123456789abcdef",
        "tz/main/42",
        "usage/main/d2026-11-27/u42",
        "usage/main/m2026-11/c42",
    ] {
        assert!(me.has_key(key, b""), "{key}");
    }
    for key in [
        "session/main:420",
        "session/main:-100:u42",
        "session/other:42",
        "consolidation/assistant/main/u420",
        "consolidation/assistant/main/g42",
        "paired/main/4",
        "grant/main/-42/exec",
        "sched/main/420/0000000001",
        "sched-due/000001700000000000/main/43/1",
        "sched-fired/main/420/0123456789abcdef",
        "usage/main/d2026-11-27/all",
        "usage/main/d2026-11-27/u1",
        "usage/main/d2026-11-27/massistant|gpt",
        "audit/main/000001700000000000/1.00000",
    ] {
        assert!(!me.has_key(key, b"{}"), "{key}");
    }
    assert!(me.has_file("memory/assistant/main/u42/MEMORY.md"));
    assert!(me.has_file("workspace/assistant/main/u42/a/b.txt"));
    assert!(!me.has_file("memory/assistant/main/u420/MEMORY.md"));
    assert!(!me.has_file("memory/assistant/main/g42/MEMORY.md"));
    assert!(!me.has_file("skills/x/SKILL.md"));
    assert!(Whom::Bot.has_file("skills/x/SKILL.md"));
    // Spoken answers waiting for their send are transient: no export carries them.
    assert!(!Whom::Bot.has_file("spoken/main/42/7-0a1b2c3d4e5f6a7b"));
    assert!(Whom::Bot.has_file("spokenword/notes.md"));
}
