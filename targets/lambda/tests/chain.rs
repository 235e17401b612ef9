//! A bot moves through every shell and keeps everything: built on native (the sample archive
//! imported: memory notes, a session, workspace files, a skill, a pending and a recurring
//! reminder, a pairing, usage), then native → export → the Worker in workerd (the native CLI's
//! `import --remote`, twice, a cut copy and a wrong token refused) → export → the Lambda
//! (the real `bootstrap` under the Runtime API emulator with moto, through Function URL events
//! as AWS sends them) → export → native again. Each shell's export holds what went in; at the
//! end the memory files are byte-identical, recall answers as it did, the person's `/usage`
//! reads the same, and each reminder fires once, at its time, after the last move.
//!
//! On each shell, too, another bot whose reminders have the sample's ids is merged in: both
//! are renumbered and all four kept.
//!
//! Also: a store a newer release wrote, refused by the Worker and the Lambda.
//!
//! Needs the Worker's release build and Node (`CLAWLESS_WORKER_BUILD`, `CLAWLESS_NODE`,
//! `CLAWLESS_NODE_MODULES`), moto and the native binary (`CLAWLESS_NATIVE_BIN`): `.ci/run` runs
//! these with the Worker suites, after the Worker build (the Lambda suites skip them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_core::archive::sample::{self, Due, PERSON};
use clawless_core::archive::{unpack, Contents, Limits};
use clawless_testkit::miniflare::{bot_vars, Miniflare};
use clawless_testkit::remote::{clawless, local, round_trip, run, Running};
use clawless_testkit::servers::{fakes, now_ms, text_update, Fakes};
use common::emulator::{start_emulator, start_function, start_function_with};
use serde_json::json;

const ADMIN: &str = "chain-archive-token-0123456789";
/// What recall is asked on native, before and after the moves.
const QUESTIONS: [&str; 2] = ["door code", "dentist"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_moves_through_every_shell() {
    let bin = std::env::var("CLAWLESS_NATIVE_BIN")
        .expect("CLAWLESS_NATIVE_BIN: the native `clawless` binary (set by .ci/run)");
    let dir = clawless_testkit::scratch::dir("chain");
    let began = Instant::now();
    let t0 = now_ms();
    // Due after the moves (about 5 s here; a slow machine may take many times that): the
    // recurring reminder (every minute) at a whole minute at least two minutes ahead, the
    // pending one 10 s before it.
    let recurring_ms = ((t0 + 120_000) / 60_000 + 1) * 60_000;
    let due = Due {
        pending_ms: recurring_ms - 10_000,
        recurring_ms,
    };
    let sample = sample::contents_due(t0, due);

    // On native: the bot built, its /usage and recall asked, exported.
    let home = dir.join("native-before");
    let first = dir.join("sample.tar.gz");
    std::fs::write(&first, sample::archive_due(t0, due).unwrap()).unwrap();
    let (ok, said) = local(&bin, &home, &["import", first.to_str().unwrap()]);
    assert!(ok, "{said}");
    let usage_before = usage_on(&bin, &home).await.0;
    assert!(
        usage_before.contains("Today: you 15 tokens"),
        "{usage_before}"
    );
    let recall_before = recall(&bin, &home);
    assert!(
        recall_before[0].contains("2468") && recall_before[1].contains("Tuesday"),
        "{recall_before:?}"
    );
    let from_native = dir.join("native.tar.gz");
    let (ok, said) = local(&bin, &home, &["export", from_native.to_str().unwrap()]);
    assert!(ok, "{said}");
    let archive = std::fs::read(&from_native).unwrap();
    // What it held when it left: the sample, and what running it added (the audit of /usage,
    // the mark of a consolidation pass).
    let (manifest, left) = unpack(&archive, &Limits::default()).unwrap();
    assert_eq!(manifest.source, "native");
    let of_sample = Contents {
        kv: (left.kv.iter())
            .filter(|e| sample.kv.iter().any(|s| s.key == e.key))
            .cloned()
            .collect(),
        files: left.files.clone(),
    };
    sample::same(&sample, &of_sample, 60_000).unwrap();
    assert!(left.kv.len() > sample.kv.len(), "the bot ran: {left:?}");

    // Into the Worker and out again.
    let (_f, tg, llm) = fakes().await;
    let mut vars = bot_vars(&tg, &llm);
    vars["CLAWLESS_ADMIN_TOKEN"] = json!(ADMIN);
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars, false);
    let (b, url, d) = (bin.clone(), mf.url.clone(), dir.join("worker"));
    std::fs::create_dir_all(&d).unwrap();
    let from_worker =
        tokio::task::spawn_blocking(move || round_trip(&b, &url, ADMIN, &d, &archive))
            .await
            .unwrap();
    // A merge there of another bot whose reminders have the same ids: nothing lost.
    let (b, url, d) = (bin.clone(), mf.url.clone(), dir.join("worker"));
    let merged = tokio::task::spawn_blocking(move || merge_other_bot(&b, &url, ADMIN, &d))
        .await
        .unwrap();
    merged_whole(&merged, "worker");
    drop(mf);
    holds(&from_worker, "worker", &left);

    // Into the Lambda and out again.
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-chain").await;
    let (emu, runtime) = start_emulator().await;
    let function = start_function_with(
        &runtime,
        &moto.url,
        "clawless-chain",
        &tg,
        &llm,
        &[("CLAWLESS_ADMIN_TOKEN", ADMIN)],
    );
    let from_lambda = common::archive_round_trip(&emu, ADMIN, &from_worker).await;
    merged_whole(&common::merge_other_bot(&emu, ADMIN).await, "lambda");
    drop(function);
    holds(&from_lambda, "lambda", &left);

    // Home to a fresh native data directory.
    let back = dir.join("native-after");
    let last = dir.join("lambda.tar.gz");
    std::fs::write(&last, &from_lambda).unwrap();
    let (ok, said) = local(&bin, &back, &["import", last.to_str().unwrap()]);
    assert!(ok && said.contains("files: 4 added"), "{said}");
    // And the merge on native, whose reminders (200 days ahead) do not fire below.
    let other = dir.join("other.tar.gz");
    std::fs::write(&other, sample::other_bot(now_ms()).unwrap()).unwrap();
    let (ok, said) = local(&bin, &back, &["import", other.to_str().unwrap()]);
    assert!(ok && said.contains(" 2 renumbered"), "{said}");
    let merged = dir.join("merged.tar.gz");
    let (ok, said) = local(&bin, &back, &["export", merged.to_str().unwrap()]);
    assert!(ok, "{said}");
    let (_, held) = unpack(&std::fs::read(&merged).unwrap(), &Limits::default()).unwrap();
    merged_whole(&sample::reminders_in(&held), "native");
    for (path, bytes) in &left.files {
        assert_eq!(
            &std::fs::read(back.join("files").join(path)).unwrap(),
            bytes,
            "{path}"
        );
    }
    assert_eq!(recall(&bin, &back), recall_before, "recall after the moves");
    eprintln!("the moves took {:?}", began.elapsed());
    assert!(
        now_ms() + 5_000 < due.pending_ms,
        "the moves took {:?}: too long for the reminders' lead",
        began.elapsed()
    );

    // Running there: the same /usage, and each reminder fires once at its time.
    let (usage_after, f, _bot) = usage_on(&bin, &back).await;
    assert_eq!(usage_after, usage_before, "/usage after the moves");
    let fired = |text: &str| {
        f.sent_to(PERSON)
            .iter()
            .filter(|t| t.as_str() == format!("⏰ {text}"))
            .count()
    };
    for (text, at) in [("tea", due.pending_ms), ("stretch", due.recurring_ms)] {
        assert_eq!(fired(text), 0, "{text} fired before its time");
        let deadline = Instant::now() + Duration::from_millis(at.saturating_sub(now_ms()) + 10_000);
        while fired(text) == 0 {
            assert!(Instant::now() < deadline, "{text} did not fire");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let seen = now_ms();
        assert!(
            (at..at + 5_000).contains(&seen),
            "{text} at its second: seen {seen}, due {at}"
        );
    }
    // Nothing more through the next sweep (every 15 s), before the recurring one's next minute.
    tokio::time::sleep(Duration::from_secs(16)).await;
    assert_eq!((fired("tea"), fired("stretch")), (1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Another bot's archive ([`sample::other_bot`]) merged into the shell at `base`, which holds
/// the sample, with `clawless import --remote`: it says both its reminders were renumbered;
/// the reminders the shell then holds.
fn merge_other_bot(bin: &str, base: &str, token: &str, dir: &Path) -> Vec<(u64, String)> {
    let file = dir.join("other.tar.gz");
    std::fs::write(&file, sample::other_bot(now_ms()).unwrap()).unwrap();
    let (ok, said) = clawless(
        bin,
        token,
        &["import", "--remote", base, file.to_str().unwrap()],
    );
    assert!(ok && said.contains(" 2 renumbered"), "{said}");
    let out = dir.join("merged.tar.gz");
    let (ok, said) = clawless(
        bin,
        token,
        &["export", "--remote", base, out.to_str().unwrap()],
    );
    assert!(ok, "{said}");
    let (_, held) = unpack(&std::fs::read(&out).unwrap(), &Limits::default()).unwrap();
    sample::reminders_in(&held)
}

/// Whether a store that held the sample and had the other bot merged in holds all four
/// reminders, each under an id of its own.
fn merged_whole(held: &[(u64, String)], shell: &str) {
    let mut texts: Vec<&str> = held.iter().map(|(_, t)| t.as_str()).collect();
    texts.sort();
    let mut want = vec!["stretch", "tea"];
    want.extend(sample::OTHER_REMINDERS);
    want.sort();
    assert_eq!(
        texts, want,
        "{shell}: every reminder after the merge: {held:?}"
    );
    let mut ids: Vec<u64> = held.iter().map(|(id, _)| *id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "{shell}: an id each: {held:?}");
    eprintln!("{shell}: a merge of two bots with colliding reminder ids kept all four: {held:?}");
}

/// Whether the archive `bytes` was exported by `source` and holds what native's did.
fn holds(bytes: &[u8], source: &str, sent: &Contents) {
    let (manifest, held) = unpack(bytes, &Limits::default()).unwrap();
    assert_eq!(manifest.source, source);
    if let Err(e) = sample::same(sent, &held, 60_000) {
        panic!("the {source} export: {e}");
    }
}

/// What `clawless memory search` answers on `data` to each of [`QUESTIONS`].
fn recall(bin: &str, data: &Path) -> Vec<String> {
    QUESTIONS
        .iter()
        .map(|q| {
            let (ok, said) = local(bin, data, &["memory", "search", q]);
            assert!(ok, "{said}");
            said
        })
        .collect()
}

/// The bot run on `data` with long polling against fresh fakes: its answer to the person's
/// `/usage`, the fakes and the running bot.
async fn usage_on(bin: &str, data: &Path) -> (String, Arc<Fakes>, Running) {
    let (f, tg, llm) = fakes().await;
    let bot = run(bin, data, &tg, &llm);
    f.push_update(text_update(1, "/usage"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = f
            .sent_to(PERSON)
            .into_iter()
            .find(|t| t.starts_with("Today:"))
        {
            return (t, f, bot);
        }
        assert!(Instant::now() < deadline, "no answer to /usage");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A store a newer release wrote is refused by the Worker and by the Lambda when they start,
/// the release and the version named, and left as it was (native's refusal is tested in
/// `targets/native/src/setup/tests.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_store_is_refused_on_every_shell() {
    use clawless_core::{keys, upgrade};
    use clawless_platform::Kv as _;
    let newer = upgrade::CURRENT + 1;
    let record = format!(r#"{{"version":{newer},"by":"9.9.9"}}"#);
    let refused = |said: &str| {
        said.contains(&format!("clawless 9.9.9 (store version {newer})"))
            && said.contains("nothing was changed")
    };
    let (_f, tg, llm) = fakes().await;

    // The Worker: D1 holds the record before the first request.
    let mut vars = bot_vars(&tg, &llm);
    vars["CLAWLESS_ADMIN_TOKEN"] = json!(ADMIN);
    let mf = Miniflare::start("CLAWLESS_WORKER_BUILD", vars, false);
    mf.control("sql", clawless_platform::sql::kv::SCHEMA).await;
    let insert = format!(
        "INSERT INTO kv (key, value, expires_at) VALUES ('{}', CAST('{record}' AS BLOB), NULL)",
        keys::store_version()
    );
    mf.control("sql", &insert).await;
    let r = reqwest::Client::new()
        .get(format!("{}/admin/export", mf.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let said = r.text().await.unwrap();
    assert!(status == 500 && refused(&said), "{status}: {said}");
    let select = format!(
        "SELECT CAST(value AS TEXT) AS v FROM kv WHERE key = '{}'",
        keys::store_version()
    );
    let rows = mf.control("sql", &select).await;
    assert_eq!(rows[0]["v"], json!(record), "left as it was");

    // The Lambda: the function does not start.
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-newer").await;
    let kv = clawless_lambda::dynamo::DynamoKv(clawless_lambda::dynamo::Table {
        client,
        name: "clawless-newer".into(),
        clock: Arc::new(clawless_platform::native_io::SystemClock),
    });
    upgrade::set_version(&kv, newer, "9.9.9").await.unwrap();
    let (_emu, runtime) = start_emulator().await;
    let mut function = start_function(&runtime, &moto.url, "clawless-newer", &tg, &llm);
    let status = function.exited(Duration::from_secs(30)).await;
    assert!(status.is_some_and(|s| !s.success()), "{status:?}");
    let logs = function.logs().join("\n");
    assert!(refused(&logs), "{logs}");
    assert!(matches!(
        upgrade::check(&kv).await,
        Err(upgrade::UpgradeError::TooNew { .. })
    ));
    let kept = kv.get(&keys::store_version()).await.unwrap().unwrap();
    assert_eq!(String::from_utf8(kept).unwrap(), record, "left as it was");
}
