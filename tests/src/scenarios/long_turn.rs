//! Turns longer than one invocation, for a shell started on the asking config (its `slow`
//! MCP server): six rounds, each a 10 s tool, on a shell whose invocations end 30 s after
//! they begin; and four quick rounds, then an answer streamed for two minutes.

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

/// Asks `user` for four rounds of a 1 s tool, then an answer streamed for two minutes (240
/// pieces, 500 ms apart): answered once, every tool once, and shown while it is written.
/// The shell's harness checks what each invocation spent.
pub async fn a_long_streamed_answer_is_answered_once(shell: &dyn Shell, user: i64, first_id: i64) {
    let f = shell.fakes();
    let update = text_update_from(user, first_id, "rounds: 4 x 1 stream 120");
    assert_eq!(
        shell.post(update.to_string(), Some(shell.secret())).await,
        200
    );
    let started = Instant::now();
    while f.sent_to(user).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{}: no answer to the streamed turn; log:\n{}",
            shell.name(),
            shell.logs().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = f.sent_to(user);
    assert_eq!(sent.len(), 1, "{}: answered once: {sent:?}", shell.name());
    assert!(
        sent[0].starts_with("All 4 rounds done and more"),
        "{}",
        sent[0]
    );
    let waits = f.mcp.calls().iter().filter(|(n, _)| n == "wait").count();
    assert_eq!(waits, 4, "{}: every tool once", shell.name());
    let drafts = f
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, b)| m == "sendMessageDraft" && b["chat_id"] == user)
        .count();
    assert!(drafts >= 5, "{}: {drafts} drafts shown", shell.name());
    eprintln!(
        "{}: four rounds and a two-minute stream answered in {:?}, {drafts} drafts",
        shell.name(),
        started.elapsed()
    );
}
