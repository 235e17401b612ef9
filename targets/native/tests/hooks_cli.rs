//! `clawless hooks test NAME` against a running `clawless serve`: the sample delivery reaches
//! the hook's chat through the fake Bot API; an unknown name, a secret not set, a wrong
//! secret and nothing listening each end in their own sentence and exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use clawless_testkit::fixtures::{HOOK_CHAT, HOOK_SECRET, HOOK_SECRET_ENV};
use clawless_testkit::servers::{fakes, until};
use common::bot::{clawless, start_bot_with, Serve};

/// What one `clawless hooks test` said: exit code, stdout, stderr.
struct Said {
    code: Option<i32>,
    out: String,
    err: String,
}

/// Runs `clawless hooks test <args>` with the config `config` and `extra` settings.
async fn hooks_test(
    data: &std::path::Path,
    tg: &str,
    llm: &str,
    config: &std::path::Path,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Said {
    let mut cmd = clawless(data, tg, llm);
    cmd.current_dir(data)
        .stderr(std::process::Stdio::piped())
        .env("CLAWLESS_CONFIG", config)
        .envs(extra.iter().copied())
        .args(["hooks", "test"])
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Said {
        code: out.status.code(),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_test_delivers_a_sample_and_names_each_failure() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("hooks-cli");
    let config = common::temp_dir("hooks-cli-config");
    clawless_testkit::fixtures::asking_config(&config);
    let how = Serve {
        env: &[
            ("CLAWLESS_CONFIG", config.to_str().unwrap()),
            (HOOK_SECRET_ENV, HOOK_SECRET),
        ],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm, how).await;
    let cli = common::temp_dir("hooks-cli-run");
    let run = |extra: &'static [(&'static str, &'static str)], args: Vec<String>| {
        let (cli, tg, llm, config) = (cli.clone(), tg.clone(), llm.clone(), config.clone());
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            hooks_test(&cli, &tg, &llm, &config, extra, &args).await
        }
    };
    let url = bot.url.clone();
    let right: &[(&str, &str)] = &[(HOOK_SECRET_ENV, HOOK_SECRET)];

    // The sample reaches the hook's chat, filled into its template ("CI {{status}}: …").
    let said = run(right, vec!["ci".into(), "--url".into(), url.clone()]).await;
    assert_eq!(said.code, Some(0), "{}{}", said.out, said.err);
    assert_eq!(said.out.lines().count(), 1, "{}", said.out);
    assert!(
        said.out
            .starts_with(&format!("202: delivered; look in chat {HOOK_CHAT}")),
        "{}",
        said.out
    );
    until("the test delivery in the hook's chat", || {
        f.sent_to(HOOK_CHAT)
            .iter()
            .any(|t| t.starts_with("CI test:"))
    })
    .await;
    assert!(f.violations.lock().unwrap().is_empty());

    // An unknown name: the configuration's problem (exit 3), nothing sent.
    let said = run(right, vec!["nope".into(), "--url".into(), url.clone()]).await;
    assert_eq!(said.code, Some(3), "{}", said.err);
    assert!(
        said.err
            .contains("no hook \"nope\" in the configuration (its hooks: ci, ask)"),
        "{}",
        said.err
    );
    // The secret not set here: said before anything is sent.
    let said = run(&[], vec!["ci".into(), "--url".into(), url.clone()]).await;
    assert_eq!(said.code, Some(3), "{}", said.err);
    assert!(
        said.err.contains(&format!("set {HOOK_SECRET_ENV} first")),
        "{}",
        said.err
    );
    // Another secret than the bot's: the bot answers 401, and the sentence says so.
    let wrong: &[(&str, &str)] = &[(HOOK_SECRET_ENV, "not-the-bots-secret-0123456789")];
    let said = run(wrong, vec!["ci".into(), "--url".into(), url.clone()]).await;
    assert_eq!(said.code, Some(1), "{}", said.err);
    assert!(
        said.err.contains(&format!(
            "401: the running bot has another secret for hook ci: give it the same {HOOK_SECRET_ENV}"
        )),
        "{}",
        said.err
    );
    // Nothing listening at the URL.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let said = run(
        right,
        vec!["ci".into(), "--url".into(), format!("127.0.0.1:{port}")],
    )
    .await;
    assert_eq!(said.code, Some(1), "{}", said.err);
    assert!(
        said.err.contains(&format!(
            "nothing listens at http://127.0.0.1:{port}: start `clawless serve` or `clawless run --listen 127.0.0.1:8080`"
        )),
        "{}",
        said.err
    );
    let delivered = f
        .sent_to(HOOK_CHAT)
        .iter()
        .filter(|t| t.starts_with("CI test"))
        .count();
    assert_eq!(delivered, 1, "only the good test was delivered");
}
