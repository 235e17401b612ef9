//! The built Worker killed or stopped and started again on the same persisted D1: a turn cut
//! while the model thinks and one cut at each point of a tool's call, finished by the cron
//! sweep, and a reminder delivered once by the cron after a restart.

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::scenarios;
use clawless_testkit::servers::{fakes, text_update, text_update_from, until};
use serde_json::json;

use clawless_testkit::miniflare::{bot_vars, Miniflare, SECRET};

/// An invocation that dies during the turn loses nothing and answers once: workerd is killed
/// (SIGKILL) while the model is thinking, a new one starts on the same D1, the dead drain's
/// lease lapses (20 s, really waited for), and the cron sweep answers. Cron runs every minute
/// on Cloudflare; here the scheduled handler is fired every 5 s, so what is measured is the
/// lapse; the minute's granularity adds at most 60 s on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_invocation_is_finished_by_the_cron_sweep() {
    use std::sync::atomic::Ordering;
    let (f, tg, llm) = fakes().await;
    let dir = clawless_testkit::scratch::dir("worker-crash");
    let options = json!({"vars": bot_vars(&tg, &llm), "persist": dir.to_string_lossy()});

    f.llm_hang.store(true, Ordering::SeqCst);
    let first = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
    assert_eq!(
        first
            .post_update(&text_update(1, "hello across a crash"), Some(SECRET))
            .await,
        200
    );
    until("the model call in flight", || {
        f.llm_count("hello across a crash") == 1
    })
    .await;
    first.kill();
    let killed = std::time::Instant::now();
    f.llm_hang.store(false, Ordering::SeqCst);
    assert!(f.sent_to(OWNER_ID).is_empty(), "nothing was answered yet");

    let second = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    while f.sent_to(OWNER_ID).is_empty() {
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(60),
            "no answer within a minute of the crash"
        );
        let outcome = second.control("scheduled", "").await;
        assert_eq!(outcome["outcome"], "ok", "{outcome}");
        if f.sent_to(OWNER_ID).is_empty() {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }
    println!(
        "worker crash recovery: answered {:.1} s after the kill (cron fired every 5 s)",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(f.sent_to(OWNER_ID), ["You said: hello across a crash"]);
    // Another sweep has nothing left to do: answered exactly once.
    second.control("scheduled", "").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(f.sent_to(OWNER_ID).len(), 1);
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reminder in workerd: set through the model's `schedule` call, workerd stopped and started
/// again on the same persisted D1 before it is due, then the cron handler — run twice at once,
/// as overlapping cron invocations would — delivers it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_is_delivered_once_by_the_cron_after_a_restart() {
    use clawless_testkit::servers::{now_ms, reminder_at};
    let (f, tg, llm) = fakes().await;
    let dir = clawless_testkit::scratch::dir("worker-reminder");
    let options = json!({"vars": bot_vars(&tg, &llm), "persist": dir.to_string_lossy()});
    let first = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
    let at = now_ms().div_ceil(1000) + 5;
    let ask = text_update(1, &reminder_at(at, "stretch"));
    assert_eq!(first.post_update(&ask, Some(SECRET)).await, 200);
    until("the tool's answer", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t.starts_with("Tool said: Scheduled."))
    })
    .await;
    // The turn's drain is over before the stop (a stop during it is the crash test's case).
    let pending = "SELECT count(*) AS n FROM kv WHERE key LIKE 'inbox/%' OR key LIKE 'lease/%'";
    while first.control("sql", pending).await[0]["n"] != 0 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    first.kill();
    assert!(now_ms() < at * 1000, "restarted before the reminder is due");

    let second = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    let alarms = || {
        f.sent_to(OWNER_ID)
            .into_iter()
            .filter(|t| t.starts_with('⏰'))
            .collect::<Vec<_>>()
    };
    assert_eq!(second.control("scheduled", "").await["outcome"], "ok");
    assert!(alarms().is_empty(), "nothing before its time");
    while now_ms() < at * 1000 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (a, b) = tokio::join!(
        second.control("scheduled", ""),
        second.control("scheduled", "")
    );
    assert_eq!((&a["outcome"], &b["outcome"]), (&json!("ok"), &json!("ok")));
    until("the reminder", || !alarms().is_empty()).await;
    second.control("scheduled", "").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(alarms(), ["⏰ stretch"], "delivered exactly once");
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A turn with a tool (`slow__note`, not to be run twice) whose workerd is killed at each
/// point — while the tool runs, after its result, while the answer is sent — and started again
/// on the same D1, swept by the cron: answered once each time, the note at most once (once
/// when it had run), a reminder set by `schedule` exactly once, the finished model call not
/// made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_at_each_point_goes_on_once() {
    let (f, tg, llm) = fakes().await;
    let dir = clawless_testkit::scratch::dir("worker-points");
    let options = json!({"vars": bot_vars(&tg, &llm), "persist": dir.to_string_lossy()});
    let mut mf = Miniflare::start_with("CLAWLESS_WORKER_TEST_BUILD", options.clone());
    for (i, point) in scenarios::KILL_POINTS.into_iter().enumerate() {
        let before = f.sent_to(OWNER_ID).len() + point.answers_first();
        point.arm(&f);
        let update = point.update(100 + i as i64, &f).await;
        assert_eq!(mf.post_update(&update, Some(SECRET)).await, 200);
        point.wait_held(&f, || mf.control("scheduled", "")).await;
        mf.kill();
        let killed = std::time::Instant::now();
        point.disarm(&f);
        mf = Miniflare::start_with("CLAWLESS_WORKER_TEST_BUILD", options.clone());
        while f.sent_to(OWNER_ID).len() == before {
            assert!(
                killed.elapsed() < std::time::Duration::from_secs(60),
                "{point:?}: no answer within a minute of the kill"
            );
            let outcome = mf.control("scheduled", "").await;
            assert_eq!(outcome["outcome"], "ok", "{outcome}");
            if f.sent_to(OWNER_ID).len() == before {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
        mf.control("scheduled", "").await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        point.check(&f, OWNER_ID, before, "worker");
        if point.reminds() {
            let listing = text_update(200 + i as i64, scenarios::LISTING);
            assert_eq!(mf.post_update(&listing, Some(SECRET)).await, 200);
            until("the listing", || f.sent_to(OWNER_ID).len() > before + 1).await;
            point.check_listing(&f, OWNER_ID, "worker");
        }
        println!(
            "worker, killed at {point:?}: answered {:.1} s after the kill",
            killed.elapsed().as_secs_f64()
        );
    }
    drop(mf);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A new isolate on a database it finds incomplete: a table gone is made again and a text
/// index of the first layout is moved over. (An isolate checks the schema with one read and
/// writes nothing when the schema is whole; this is the case where it must write.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_isolate_repairs_a_schema_it_finds_incomplete() {
    let (_f, tg, llm) = fakes().await;
    let dir = clawless_testkit::scratch::dir("worker-schema");
    let options = json!({"vars": bot_vars(&tg, &llm), "persist": dir.to_string_lossy()});

    let first = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options.clone());
    // A stranger's update: acknowledged and answered with a notice, no model call.
    assert_eq!(
        first
            .post_update(&text_update_from(42, 1, "hi"), Some(SECRET))
            .await,
        200
    );
    let present = "SELECT name FROM sqlite_master WHERE name IN ('files', 'text_docs', 'text_fts') ORDER BY name";
    assert_eq!(
        first.control("sql", present).await,
        json!([{"name": "files"}, {"name": "text_docs"}])
    );
    first.control("sql", "DROP TABLE files").await;
    first
        .control(
            "sql",
            "CREATE VIRTUAL TABLE text_fts USING fts5(id UNINDEXED, body, metadata UNINDEXED)",
        )
        .await;
    first
        .control(
            "sql",
            "INSERT INTO text_fts (id, body, metadata) VALUES ('legacy-1', 'words of old', '{}')",
        )
        .await;
    drop(first);

    let second = Miniflare::start_with("CLAWLESS_WORKER_BUILD", options);
    assert_eq!(
        second
            .post_update(&text_update_from(42, 2, "hi"), Some(SECRET))
            .await,
        200
    );
    assert_eq!(
        second.control("sql", present).await,
        json!([{"name": "files"}, {"name": "text_docs"}]),
        "the table is back and the legacy one is gone"
    );
    assert_eq!(
        second
            .control(
                "sql",
                "SELECT b.body FROM text_docs AS d JOIN text_body AS b ON b.rowid = d.rid WHERE d.id = 'legacy-1'",
            )
            .await,
        json!([{"body": "words of old"}])
    );
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}
