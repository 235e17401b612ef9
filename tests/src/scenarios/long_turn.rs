//! A turn longer than one invocation, for a shell started on the asking config (its `slow`
//! MCP server) whose invocations end 30 s after they begin: six rounds, each a 10 s tool.

use std::time::{Duration, Instant};

use super::Shell;
use crate::servers::text_update_from;

/// Asks `user` (allowed, in their private chat; update ids from `first_id`) for six rounds of
/// a 10 s tool: answered once, every tool once, no model call made twice, and the answer
/// within 10 s of the last tool's end.
pub async fn a_long_turn_is_answered_once(shell: &dyn Shell, user: i64, first_id: i64) {
    let f = shell.fakes();
    let question = "rounds: 6 x 10";
    let update = text_update_from(user, first_id, question);
    assert_eq!(
        shell.post(update.to_string(), Some(shell.secret())).await,
        200
    );
    let started = Instant::now();
    let answered = loop {
        if !f.sent_to(user).is_empty() {
            break Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "{}: no answer to the long turn; log:\n{}",
            shell.name(),
            shell.logs().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Anything sent twice would show by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        f.sent_to(user),
        vec!["All 6 rounds done.".to_owned()],
        "{}: answered once",
        shell.name()
    );
    let waits = f.mcp.calls().iter().filter(|(n, _)| n == "wait").count();
    assert_eq!(waits, 6, "{}: every tool once", shell.name());
    let asked = f
        .llm_requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r["messages"].to_string().contains(question))
        .count();
    assert_eq!(asked, 7, "{}: no model call made twice", shell.name());
    let last_tool = *f.waits_ended.lock().unwrap().last().unwrap();
    let after = answered.saturating_duration_since(last_tool);
    assert!(
        after <= Duration::from_secs(10),
        "{}: the answer came {after:?} after the last tool",
        shell.name()
    );
    eprintln!(
        "{}: six 10 s rounds answered in {:?}, {after:?} after the last tool",
        shell.name(),
        answered - started
    );
}
