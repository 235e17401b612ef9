//! `clawless export` and `clawless import` through the binary: a store moved to an empty data
//! directory, a second import that changes nothing, a person's export, a damaged archive
//! refused with nothing written. (OpenClaw's folder: `openclaw.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Output, Stdio};

use clawless_testkit::fixtures::OWNER_ID;
use common::bot::clawless;

/// No fake is reached: export and import talk to no one.
const NOWHERE: &str = "http://127.0.0.1:9";

fn run(data: &Path, args: &[&str]) -> Output {
    clawless(data, NOWHERE, NOWHERE)
        .stderr(Stdio::piped())
        .args(args)
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn note(data: &Path, text: &str) {
    let dir = data.join(format!("files/memory/assistant/main/u{OWNER_ID}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("MEMORY.md"), text).unwrap();
}

#[test]
fn a_store_moves_to_an_empty_directory_and_a_second_import_changes_nothing() {
    let (a, b) = (common::temp_dir("export-a"), common::temp_dir("export-b"));
    note(&a, "- The door code is 2468.\n");
    let out = run(&a, &["memory", "reindex"]);
    assert!(out.status.success(), "{}", said(&out));
    let file = a.join("bot.tar.gz");
    let out = run(&a, &["export", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("exported bot"), "{}", said(&out));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "only its owner reads it");
    }

    let out = run(&b, &["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("files: 1 added"), "{}", said(&out));
    let out = run(&b, &["import", file.to_str().unwrap()]);
    assert!(said(&out).contains("entries: 0 added"), "{}", said(&out));
    assert!(
        said(&out).contains("files: 0 added, 1 already there"),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read(b.join(format!("files/memory/assistant/main/u{OWNER_ID}/MEMORY.md")))
            .unwrap(),
        b"- The door code is 2468.\n"
    );
    let out = run(&b, &["memory", "search", "door code"]);
    assert!(said(&out).contains("2468"), "recalled: {}", said(&out));

    // A person's export, and a damaged archive refused.
    let mine = a.join("me.tar.gz");
    let out = run(
        &a,
        &[
            "export",
            "--person",
            &OWNER_ID.to_string(),
            mine.to_str().unwrap(),
        ],
    );
    assert!(
        said(&out).contains(&format!("exported person main {OWNER_ID}")),
        "{}",
        said(&out)
    );
    let bytes = std::fs::read(&file).unwrap();
    let cut = a.join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let c = common::temp_dir("export-c");
    let out = run(&c, &["import", cut.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(said(&out).contains("damaged"), "{}", said(&out));
    assert!(!c.join("files/memory").exists(), "nothing written");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// The admin endpoint of `clawless serve`: the sample archive in through `import --remote`
/// (twice; a cut copy refused), and out again through `export --remote`, the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_moves_through_the_admin_endpoint() {
    use clawless_core::archive::{sample, unpack, Limits};
    const ADMIN: &str = "native-admin-token-0123456789";
    let (_f, tg, llm) = clawless_testkit::servers::fakes().await;
    let data = common::temp_dir("archive-http");
    let bot = common::bot::start_bot_with(
        &data,
        &tg,
        &llm,
        common::bot::Serve {
            env: &[("CLAWLESS_ADMIN_TOKEN", ADMIN)],
            ..Default::default()
        },
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let archive = sample::archive(now).unwrap();
    let bin = env!("CARGO_BIN_EXE_clawless");
    let back = tokio::task::spawn_blocking({
        let (url, data) = (bot.url.clone(), data.clone());
        move || clawless_testkit::remote::round_trip(bin, &url, ADMIN, &data, &archive)
    })
    .await
    .unwrap();
    let (manifest, held) = unpack(&back, &Limits::default()).unwrap();
    assert_eq!(manifest.source, "native");
    sample::same(&sample::contents(now), &held, 60_000).unwrap();
}

/// `backup: {every: 1h, keep: 2}`: a bot started with no recent archive writes one at once,
/// beside its work; the oldest beyond two are removed; the archive restores into an empty
/// directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_are_written_on_schedule_and_pruned() {
    let (_f, tg, llm) = clawless_testkit::servers::fakes().await;
    let data = common::temp_dir("backups");
    let config = data.join("config");
    copy_dir(&clawless_testkit::repo::root().join("config"), &config);
    let main = config.join("main.yaml");
    let yaml = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, format!("{yaml}\nbackup:\n  every: 1h\n  keep: 2\n")).unwrap();
    let dir = data.join("backups");
    std::fs::create_dir_all(&dir).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3 * 3600);
    for name in [
        "clawless-20200101T000000Z.tar.gz",
        "clawless-20200102T000000Z.tar.gz",
    ] {
        let file = std::fs::File::create(dir.join(name)).unwrap();
        file.set_modified(old).unwrap();
    }
    note(&data, "- The door code is 2468.\n");
    let config_env = config.to_str().unwrap().to_owned();
    let bot = common::bot::start_bot_with(
        &data,
        &tg,
        &llm,
        common::bot::Serve {
            env: &[("CLAWLESS_CONFIG", config_env.as_str())],
            ..Default::default()
        },
    )
    .await;
    clawless_testkit::servers::until("a backup", || {
        std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("clawless-2") && !name.starts_with("clawless-2020")
        })
    })
    .await;
    clawless_testkit::servers::until("pruned to two", || {
        std::fs::read_dir(&dir).unwrap().count() == 2
    })
    .await;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names[0], "clawless-20200102T000000Z.tar.gz", "{names:?}");
    drop(bot);
    let restored = common::temp_dir("restored");
    let out = run(
        &restored,
        &["import", dir.join(&names[1]).to_str().unwrap()],
    );
    assert!(said(&out).contains("files: 1 added"), "{}", said(&out));
}
