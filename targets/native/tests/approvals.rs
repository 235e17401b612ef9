//! An approval on the real `clawless` binary: the turn waits for the tap in storage, the
//! process is killed (kill -9) while it waits, and the tap, posted to the restarted process,
//! resumes the turn once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{post_update, start_bot_with, Serve, SECRET};
use serde_json::{json, Value};

/// The repository's config with `memory_write` asking first, in a temp dir.
fn asking_config() -> std::path::PathBuf {
    let dir = common::temp_dir("approvals-config");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    copy_dir(&src, &dir);
    let agent = dir.join("agents.d/assistant.yaml");
    let text = std::fs::read_to_string(&agent).unwrap();
    let asking = text.replace("  tools: {}", "  tools: { memory_write: ask }");
    assert_ne!(
        text, asking,
        "the policy block of assistant.yaml changed shape"
    );
    std::fs::write(&agent, asking).unwrap();
    dir
}

/// How many files under `dir` contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| match p.is_dir() {
            true => files_containing(&p, needle),
            false => usize::from(
                std::fs::read_to_string(&p).is_ok_and(|t| t.matches(needle).count() == 1),
            ),
        })
        .sum()
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tap_after_kill_and_restart_resumes_the_waiting_turn_once() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("approvals");
    let config = asking_config();
    let config = config.to_str().unwrap();
    let env = [("CLAWLESS_CONFIG", config)];
    let how = || Serve {
        env: &env,
        ..Serve::default()
    };
    let mut bot = start_bot_with(&data, &tg, &llm_url, how()).await;
    post_update(&bot, &text_update(10, "remember: locker 42"), Some(SECRET)).await;
    until("the approval message", || {
        f.sent().iter().any(|b| b.get("reply_markup").is_some())
    })
    .await;
    let buttons: Vec<String> = f
        .sent()
        .iter()
        .find_map(|b| b["reply_markup"]["inline_keyboard"][0].as_array().cloned())
        .unwrap()
        .iter()
        .map(|b| b["callback_data"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(buttons.len(), 3);
    assert_eq!(f.llm_count("remember: locker 42"), 1);

    // Killed while the approval waits; the tap reaches the new process.
    bot.child.kill().unwrap();
    bot.child.wait().unwrap();
    drop(bot);
    let bot = start_bot_with(&data, &tg, &llm_url, how()).await;
    let tap = json!({"update_id": 11, "callback_query": {
        "id": "cb11", "from": {"id": OWNER_ID, "is_bot": false, "first_name": "Ada"},
        "chat_instance": "1", "data": buttons[0],
        "message": {"message_id": 1, "date": 1, "chat": {"id": OWNER_ID, "type": "private"}, "text": "🔐"}
    }});
    assert_eq!(post_update(&bot, &tap, Some(SECRET)).await, 200);
    until("the answer after the tap", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t.starts_with("Tool said:"))
    })
    .await;
    // The same tap again (Telegram re-delivers): nothing more.
    assert_eq!(post_update(&bot, &tap, Some(SECRET)).await, 200);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let answers: Vec<Value> = f
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "answerCallbackQuery")
        .map(|(_, b)| b.clone())
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    let replies: Vec<String> = f
        .sent_to(OWNER_ID)
        .into_iter()
        .filter(|t| t.starts_with("Tool said:"))
        .collect();
    assert_eq!(replies.len(), 1, "answered once");
    assert_eq!(
        files_containing(&data.join("files"), "locker 42"),
        1,
        "the allowed call wrote the note once"
    );
    assert!(f.violations.lock().unwrap().is_empty());
}
