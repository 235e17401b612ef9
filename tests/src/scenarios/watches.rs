//! A watch on each shell, on the asking config (watches every 10 s, private addresses
//! allowed): the model sets one on the fakes' `/page`; while the page stays the same the
//! shell's scheduled runs check it with conditional GETs and the model is not asked; when it
//! changes, one turn sees what changed, once. Tasks gated by the watch (run only when it saw a
//! change since they were set): one due before the change does not run, one due after it does.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Shell;
use crate::fixtures::OWNER_ID;
use crate::servers::text_update_from;

/// The allowed person who sets the watch (in [`super::allowed_users`]).
pub const WATCH_USER: i64 = OWNER_ID + 91;

/// Runs the shell's scheduled work every second until `cond` holds (at most `limit`).
async fn until_scheduled(shell: &dyn Shell, what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() > deadline {
            let f = shell.fakes();
            let sent = f.sent_to(WATCH_USER);
            let checks = f.page_asked.lock().unwrap().clone();
            let logs = shell.logs();
            let tail = logs[logs.len().saturating_sub(30)..].join("\n");
            panic!(
                "{}: timed out waiting for {what}; sent to the chat: {sent:?}; checks: {checks:?}; the log ends:\n{tail}",
                shell.name()
            );
        }
        shell.scheduled().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The watch scenario on `shell`.
pub async fn a_watch_acts_once_on_a_change(shell: &dyn Shell) {
    let name = shell.name();
    let f = shell.fakes();
    *f.page.lock().unwrap() = "All systems operational.".into();
    let url = f.serve_page().await;
    let args = json!({"action": "create", "url": url, "every": "10s", "task": "say what changed"});
    let update = text_update_from(WATCH_USER, 995_001, &format!("watch: {args}"));
    let status = shell.post(update.to_string(), Some(shell.secret())).await;
    assert_eq!(status, 200, "{name}");
    let set = Instant::now() + Duration::from_secs(60);
    while f.sent_to(WATCH_USER).is_empty() {
        if Instant::now() > set {
            let logs = shell.logs();
            let tail = &logs[logs.len().saturating_sub(40)..];
            let calls: Vec<String> = f
                .calls
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, b)| b["chat_id"] == WATCH_USER)
                .map(|(m, b)| format!("{m} {b}"))
                .collect();
            let requests = f.llm_requests.lock().unwrap().len();
            let bot_calls = f.calls.lock().unwrap().len();
            let asked = (requests, f.llm_count("watch: "), bot_calls);
            panic!(
                "{name}: the watch was not set within 60 s ({asked:?} model requests, asked of the watch, Bot API calls; calls to the chat: {calls:?}); the log ends:\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A task gated by the watch, due in 12 s: before any change, so it does not run.
    let set = f.sent_to(WATCH_USER).concat();
    let id: u64 = set
        .split_once(" as #")
        .and_then(|(_, rest)| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name}: the watch's id in {set:?}"));
    let gate = |n: i64, prompt: &str| {
        let minutes = if n == 1 { 0.2 } else { 0.75 };
        let args =
            json!({"action": "create", "in_minutes": minutes, "prompt": prompt, "if_changed": id});
        text_update_from(WATCH_USER, 995_001 + n, &format!("schedule: {args}")).to_string()
    };
    assert_eq!(shell.post(gate(1, SHUT), Some(shell.secret())).await, 200);
    let shut_due = Instant::now() + Duration::from_secs(13);
    until_scheduled(
        shell,
        "the first gated task set",
        Duration::from_secs(60),
        || f.sent_to(WATCH_USER).len() >= 2,
    )
    .await;
    let ran = |prompt: &str| {
        f.sent_to(WATCH_USER)
            .iter()
            .filter(|t| t.contains("[Scheduled task #") && t.contains(prompt))
            .count()
    };
    let asked_before = f.llm_requests.lock().unwrap().len();
    // The first check learns the page; two more periods of the same page are conditional.
    until_scheduled(
        shell,
        "three checks, the gated task due",
        Duration::from_secs(90),
        || f.page_asked.lock().unwrap().len() >= 3 && Instant::now() > shut_due,
    )
    .await;
    shell.scheduled().await;
    let asked = f.page_asked.lock().unwrap().clone();
    assert!(
        asked[1..].iter().all(Option::is_some),
        "{name}: every check after the first is conditional: {asked:?}"
    );
    assert_eq!(
        f.llm_requests.lock().unwrap().len(),
        asked_before,
        "{name}: no model call while the page stays the same (nor for the gated task)"
    );
    assert_eq!(ran(SHUT), 0, "{name}: a gated task with no change");
    // A gated task due 45 s after the change (seen within a period of 10 s).
    let before = f.sent_to(WATCH_USER).len();
    assert_eq!(shell.post(gate(2, OPEN), Some(shell.secret())).await, 200);
    until_scheduled(
        shell,
        "the second gated task set",
        Duration::from_secs(60),
        || f.sent_to(WATCH_USER).len() > before,
    )
    .await;
    // The page changes: one turn that sees the new text.
    *f.page.lock().unwrap() = "Degraded performance in eu-west.".into();
    until_scheduled(shell, "the change's turn", Duration::from_secs(90), || {
        f.sent_to(WATCH_USER)
            .iter()
            .any(|t| t.contains("+ Degraded performance in eu-west."))
    })
    .await;
    // Another period of the new page: nothing more.
    let checks = f.page_asked.lock().unwrap().len();
    until_scheduled(shell, "one more check", Duration::from_secs(60), || {
        f.page_asked.lock().unwrap().len() > checks
    })
    .await;
    let turns = f
        .sent_to(WATCH_USER)
        .iter()
        .filter(|t| t.contains("saw the page change"))
        .count();
    assert_eq!(
        turns,
        1,
        "{name}: one turn for one change: {:?}",
        f.sent_to(WATCH_USER)
    );
    // The second gated task's time: it runs, once.
    until_scheduled(shell, "the gated task", Duration::from_secs(90), || {
        ran(OPEN) >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    shell.scheduled().await;
    assert_eq!(
        (ran(SHUT), ran(OPEN)),
        (0, 1),
        "{name}: {:?}",
        f.sent_to(WATCH_USER)
    );
}

/// What the gated tasks ask: the one due before the change, and the one after it.
const SHUT: &str = "gated before: say the status";
const OPEN: &str = "gated after: say the status";
