//! Approvals on the real `clawless` binary: the shared approval scenarios
//! (`clawless_testkit::scenarios::run_approvals`), the panel and incoming webhooks over its
//! HTTP, and a kill -9 while an approval waits: the
//! turn waits for the tap in storage, and the tap, posted to the restarted process, resumes it
//! once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use clawless_testkit::fixtures::{HOOK_SECRET, HOOK_SECRET_ENV, OWNER_ID};
use clawless_testkit::scenarios;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{post_update, start_bot_with, Serve, SECRET, TOKEN};
use common::shells::Native;
use serde_json::{json, Value};

/// The repository's config with `memory_write` asking first, in a temp dir.
fn asking_config() -> std::path::PathBuf {
    let dir = common::temp_dir("approvals-config");
    clawless_testkit::fixtures::asking_config(&dir);
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

/// Every approval scenario on one `clawless serve` running the asking config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_scenarios_on_native() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("approvals-scenarios");
    let config = asking_config();
    let users = scenarios::allowed_users();
    let how = Serve {
        env: &[
            ("TELEGRAM_ALLOWED_USERS", &users),
            ("CLAWLESS_CONFIG", config.to_str().unwrap()),
            ("CLAWLESS_ADMIN_TOKEN", ADMIN),
            ("CLAWLESS_PUBLIC_URL", "https://panel.test"),
            (HOOK_SECRET_ENV, HOOK_SECRET),
        ],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm_url, how).await;
    let url = format!("{}/metrics", bot.url);
    let native = Native { bot, f };
    scenarios::run_approvals(&native).await;
    // `/metrics`, behind the admin token, counts what it did.
    let refused = reqwest::get(&url).await.unwrap().status();
    assert_eq!(refused, 401);
    let scrape = || async {
        let r = reqwest::Client::new()
            .get(&url)
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap()
    };
    scenarios::metrics_count_a_scenario(&native, scrape).await;
    // The control panel over this process's HTTP.
    let base = native.bot.url.clone();
    scenarios::panel_over_http(&native, TOKEN, |c| scenarios::panel_http(&base, c)).await;
    // Incoming webhooks, over the same HTTP.
    scenarios::hooks_over_http(&native, |c| scenarios::panel_http(&base, c)).await;
    // A watch, checked by the runner at its times.
    scenarios::a_watch_acts_once_on_a_change(&native).await;
}

const ADMIN: &str = "native-admin-token-0123456789";

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

/// Six rounds of a 10 s tool on `clawless serve`, which has no invocation to outlast: the
/// shared long turn, answered once, every tool once, in one drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_is_answered_once_on_native() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("long-turn");
    let config = asking_config();
    let how = Serve {
        env: &[("CLAWLESS_CONFIG", config.to_str().unwrap())],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm_url, how).await;
    let native = Native { bot, f };
    scenarios::a_long_turn_is_answered_once(&native, OWNER_ID, 1).await;
}

/// A turn with a tool (`slow__note`, not to be run twice) killed with kill -9 at each point —
/// while the tool runs, after its result, while the answer is sent — and the bot restarted
/// on its data (and the same with `schedule`, idempotent by its call id, after its result and
/// while sending): answered once each time, the note at most once (once when it had run), a
/// reminder exactly once, the finished model call not made again
/// (`scenarios::KillPoint::check`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_at_each_point_goes_on_once() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("kill-points");
    let config = asking_config();
    let env = [("CLAWLESS_CONFIG", config.to_str().unwrap())];
    let how = || Serve {
        env: &env,
        ..Serve::default()
    };
    let mut bot = start_bot_with(&data, &tg, &llm_url, how()).await;
    for (i, point) in scenarios::KILL_POINTS.into_iter().enumerate() {
        let before = f.sent_to(OWNER_ID).len() + point.answers_first();
        point.arm(&f);
        let update = point.update(100 + i as i64, &f).await;
        assert_eq!(post_update(&bot, &update, Some(SECRET)).await, 200);
        point.wait_held(&f, || async {}).await;
        bot.child.kill().unwrap();
        bot.child.wait().unwrap();
        point.disarm(&f);
        drop(bot);
        bot = start_bot_with(&data, &tg, &llm_url, how()).await;
        let took = clawless_testkit::servers::within(
            "the answer after the restart",
            std::time::Duration::from_secs(60),
            || f.sent_to(OWNER_ID).len() > before,
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        point.check(&f, OWNER_ID, before, "native");
        if point.reminds() {
            let listing = text_update(200 + i as i64, scenarios::LISTING);
            assert_eq!(post_update(&bot, &listing, Some(SECRET)).await, 200);
            until("the listing", || f.sent_to(OWNER_ID).len() > before + 1).await;
            point.check_listing(&f, OWNER_ID, "native");
        }
        println!("native, killed at {point:?}: answered {took:?} after the restart");
    }
}
