//! A newcomer with nothing but the binary: in an empty `HOME`, with `PATH` holding no cargo and
//! no config files anywhere, `clawless --version`, `init` (flags), `config check`, `serve`
//! answering one update from the fake Bot API through the fake model, and `health` on it.
//! Run on the binary cargo built, and on a released one (`dist/build`, installed by
//! `dist/install.sh`) when `CLAWLESS_DIST_BINARY` names it: `dist/smoke` sets it, for the
//! tarball's binary and for the one copied out of the container image.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{post_update, Bot, SECRET, TOKEN};

/// `bin ARGS` in `home`, with only what a fresh shell there has and the fakes' base URLs (as the
/// real ones would be).
fn bare(bin: &Path, home: &Path, tg: &str, llm: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .current_dir(home)
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("TELEGRAM_API_BASE", tg)
        .env("GEMINI_BASE_URL", llm)
        .env("RUST_LOG", "warn")
        .args(args)
        .stdin(Stdio::null());
    cmd
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn newcomer(bin: &Path) {
    let (f, tg, llm) = fakes().await;
    let home = common::temp_dir("dist");
    let run = |args: &[&str]| bare(bin, &home, &tg, &llm, args).output().unwrap();

    let out = run(&["--version"]);
    assert!(out.status.success(), "{}", said(&out));
    let version = String::from_utf8_lossy(&out.stdout).into_owned();
    let expected = format!("clawless {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&expected), "{version}");

    let owner = OWNER_ID.to_string();
    let out = run(&[
        "init",
        "--token",
        TOKEN,
        "--owner",
        &owner,
        "--provider",
        "gemini",
        "--key",
        "good-key-123",
    ]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(home.join(".env").is_file());

    // The config embedded in the binary: there is none on disk.
    let out = run(&["config", "check"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("agent \"assistant\" answers with gemini/gemini-2.5-flash"),
        "{}",
        said(&out)
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let bot = Bot::spawn(
        bare(bin, &home, &tg, &llm, &["serve", "--listen", &listen])
            .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
            .stdout(Stdio::null()),
        format!("http://{listen}"),
    );
    until("clawless health says serve answers", || {
        run(&["health", "--addr", &listen]).status.success()
    })
    .await;
    let update = text_update(700, "hello from the release");
    assert_eq!(post_update(&bot, &update, Some(SECRET)).await, 200);
    until("the update answered", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t == "You said: hello from the release")
    })
    .await;
    assert!(f.llm_wires.lock().unwrap().contains(&"gemini"));
    assert!(f.violations.lock().unwrap().is_empty());
    drop(bot);

    let out = run(&["health", "--addr", &listen]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(home.join("data").is_dir(), "the data beside .env");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_binary_answers_with_nothing_beside_it() {
    newcomer(Path::new(env!("CARGO_BIN_EXE_clawless"))).await;
}

/// The released binary: only when `dist/smoke` names it (it needs `dist/build`'s output).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_released_binary_answers_with_nothing_beside_it() {
    let Some(bin) = std::env::var_os("CLAWLESS_DIST_BINARY").map(PathBuf::from) else {
        eprintln!("CLAWLESS_DIST_BINARY is not set: dist/smoke runs this on a released binary");
        return;
    };
    assert!(
        bin.is_file(),
        "CLAWLESS_DIST_BINARY={} is missing",
        bin.display()
    );
    newcomer(&bin).await;
}
