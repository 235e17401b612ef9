//! A newcomer's first minutes with the real `clawless` binary against the fake Bot API and
//! model servers: `clawless init` driven in a pseudo-terminal (util-linux `script`) ending in a
//! `.env` that starts a working bot, any one provider key answering, the command menu set once
//! per change, and `clawless doctor` naming each kind of failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, now_ms, text_update, until};
use common::bot::{clawless, start_bot_with, Bot, Serve, TOKEN};
use serde_json::{json, Value};

fn config_dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../config")
}

/// `clawless` with nothing but what a newcomer's shell has: PATH, the fakes' base URLs (as
/// the real ones would be), the config and a data directory.
fn bare(dir: &std::path::Path, tg: &str, llm: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawless"));
    cmd.env_clear()
        .current_dir(dir)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_API_BASE", tg)
        .env("GEMINI_BASE_URL", llm)
        .env("CLAWLESS_CONFIG", config_dir())
        .env("CLAWLESS_DATA", dir.join("data"))
        .env("RUST_LOG", "warn");
    cmd
}

/// A program in a pseudo-terminal: what it printed so far, and a way to type.
struct Pty {
    child: std::process::Child,
    seen: Arc<Mutex<String>>,
}

impl Pty {
    /// `cmd` (its program, environment and folder) with `args`, run by util-linux `script` on
    /// a new pseudo-terminal that our pipe feeds.
    fn spawn(cmd: &Command, args: &str) -> Pty {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut script = Command::new("script");
        script
            .args(["-qfec", &format!("{program} {args}"), "/dev/null"])
            .env_clear()
            .env("TERM", "dumb")
            .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(dir) = cmd.get_current_dir() {
            script.current_dir(dir);
        }
        let mut child = script.spawn().unwrap();
        let seen = Arc::new(Mutex::new(String::new()));
        let sink = seen.clone();
        let mut out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Pty { child, seen }
    }

    /// Waits until `text` has been printed `times` times in all (at most 20 s).
    async fn expect(&self, text: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.seen.lock().unwrap().matches(text).count() < times {
            assert!(
                Instant::now() < deadline,
                "never saw {text:?} ({times}x); the screen:\n{}",
                self.seen.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the program's terminal has its echo off: a secret prompt is printed just
    /// before the echo goes off, and a line typed in between would be echoed (at most 20 s).
    async fn echo_off(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.echoes() != Some(false) {
            assert!(
                Instant::now() < deadline,
                "the terminal's echo never went off"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the terminal of `script`'s child echoes (none yet: `None`).
    fn echoes(&self) -> Option<bool> {
        let parent = self.child.id().to_string();
        let child = std::fs::read_dir("/proc").ok()?.flatten().find(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                // The parent's pid is the second field after the command's closing bracket.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == parent))
                    .unwrap_or(false)
            })
        })?;
        let tty = std::fs::read_link(child.path().join("fd/0")).ok()?;
        let file = std::fs::OpenOptions::new().read(true).open(tty).ok()?;
        let modes = rustix::termios::tcgetattr(&file).ok()?;
        Some(
            modes
                .local_modes
                .contains(rustix::termios::LocalModes::ECHO),
        )
    }

    fn typed(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_in_a_terminal_writes_an_env_that_starts_a_working_bot() {
    let (f, tg, llm) = fakes().await;
    let dir = common::temp_dir("init");
    f.updates.lock().unwrap().push(text_update(500, "/start"));
    let mut pty = Pty::spawn(&bare(&dir, &tg, &llm), "init");
    pty.expect("Bot token", 1).await;
    pty.echo_off().await;
    pty.typed("42:WRONG-TOKEN");
    pty.expect(
        "Telegram refused that token: copy it again from @BotFather (/mybots, API Token).",
        1,
    )
    .await;
    pty.expect("Bot token", 2).await;
    pty.echo_off().await;
    pty.typed(TOKEN);
    pty.expect("Token OK: the bot is @clawless_test_bot.", 1)
        .await;
    pty.expect(&format!("Found you: Ada (@ada), id {OWNER_ID}."), 1)
        .await;
    pty.expect("Number or name:", 1).await;
    pty.typed("gemini");
    pty.expect("gemini key (GEMINI_API_KEY):", 1).await;
    pty.echo_off().await;
    pty.typed("wrong-key");
    pty.expect(
        "gemini refused that key: copy it again from the provider's console.",
        1,
    )
    .await;
    pty.expect("gemini key (GEMINI_API_KEY):", 2).await;
    pty.echo_off().await;
    pty.typed("good-key-123");
    pty.expect("Wrote .env (readable only by you)", 1).await;
    let status = pty.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let screen = pty.seen.lock().unwrap().clone();
    for secret in [TOKEN, "good-key-123", "wrong-key", "WRONG-TOKEN"] {
        assert!(!screen.contains(secret), "{secret} shown:\n{screen}");
    }
    let env_file = dir.join(".env");
    let text = std::fs::read_to_string(&env_file).unwrap();
    assert_eq!(
        text,
        format!(
            "TELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS={OWNER_ID}\nGEMINI_API_KEY=good-key-123\n"
        )
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&env_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The owner was told in Telegram too.
    assert!(f
        .sent_to(OWNER_ID)
        .iter()
        .any(|t| t.starts_with("Found you!")));

    // `clawless` with no arguments, in that folder, runs on what init wrote.
    f.updates
        .lock()
        .unwrap()
        .push(text_update(501, "hello after init"));
    let _bot = Bot::spawn(bare(&dir, &tg, &llm).stdout(Stdio::null()), String::new());
    until("the message after init answered", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t == "You said: hello after init")
    })
    .await;
    assert!(f.llm_wires.lock().unwrap().contains(&"gemini"));
    assert!(f.violations.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_with_flags_asks_nothing_and_a_wrong_key_fails_in_one_sentence() {
    let (_f, tg, llm) = fakes().await;
    let dir = common::temp_dir("init-flags");
    let run = |key: &str| {
        bare(&dir, &tg, &llm)
            .args(["init", "--token", TOKEN, "--owner", "111", "--provider"])
            .args(["gemini", "--key", key])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run("wrong-key");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gemini refused that key: copy it again from the provider's console."),
        "{err}"
    );
    // Google says so with 400 API_KEY_INVALID: one sentence, none of its JSON.
    assert!(
        !err.contains('{') && !err.contains("API_KEY_INVALID"),
        "{err}"
    );
    assert!(!dir.join(".env").exists(), "nothing written");
    let out = run("good-key");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join(".env")).unwrap();
    assert!(text.contains("TELEGRAM_ALLOWED_USERS=111\n"), "{text}");
}

/// Any one provider key starts the bot: with only Gemini's, OpenRouter's or Groq's key set,
/// the default agent answers through that provider's wire format, and `config check` says
/// which model answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_one_provider_key_answers() {
    let cases = [
        ("GEMINI", "gemini", "gemini/gemini-2.5-flash"),
        ("OPENROUTER", "openai", "openrouter/openai/gpt-4o-mini"),
        ("GROQ", "openai", "groq/llama-3.3-70b-versatile"),
    ];
    for (i, (prefix, wire, model)) in cases.into_iter().enumerate() {
        let (f, tg, llm_url) = fakes().await;
        let data = common::temp_dir(&format!("e2e-one-key-{prefix}"));
        let only = |cmd: &mut Command| {
            cmd.env_remove("ANTHROPIC_API_KEY")
                .env_remove("ANTHROPIC_BASE_URL")
                .env(format!("{prefix}_API_KEY"), "key-e2e")
                .env(format!("{prefix}_BASE_URL"), &llm_url);
        };
        let mut check = clawless(&data, &tg, &llm_url);
        only(&mut check);
        let out = check.args(["config", "check"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{prefix}: {said}");
        assert!(
            said.contains(&format!("agent \"assistant\" answers with {model}\n")),
            "{prefix}: {said}"
        );
        let id = 90 + i as i64;
        f.updates
            .lock()
            .unwrap()
            .push(text_update(id, &format!("hello {prefix}")));
        let mut cmd = clawless(&data, &tg, &llm_url);
        only(&mut cmd);
        let _bot = Bot::spawn(cmd.stdout(Stdio::null()), String::new());
        until("the polled update answered", || {
            !f.sent_to(OWNER_ID).is_empty()
        })
        .await;
        assert_eq!(f.sent_to(OWNER_ID), [format!("You said: hello {prefix}")]);
        assert_eq!(*f.llm_wires.lock().unwrap(), [wire], "{prefix}");
        assert!(f.violations.lock().unwrap().is_empty());
    }
}

/// The command menu is set at start, everyone's and the owner's; a restart with the same
/// commands sets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_menu_is_set_once_per_change() {
    let (f, tg, llm_url) = fakes().await;
    let data = common::temp_dir("menu");
    let menus = || f.calls_of("setMyCommands");
    let bot = Bot::spawn(
        clawless(&data, &tg, &llm_url)
            .env("RUST_LOG", "warn,clawless_core::menu=info")
            .stdout(Stdio::null()),
        String::new(),
    );
    until("the command menu set", || menus().len() == 2).await;
    assert_eq!(menus()[0]["scope"]["type"], "default");
    assert_eq!(menus()[1]["scope"]["chat_id"], OWNER_ID);
    // Killed only once the menu's hash is saved (it logs that), else the restart rightly sends
    // the menu again.
    until("the menu's hash saved", || {
        bot.logs().iter().any(|l| l.contains("command menu set"))
    })
    .await;
    drop(bot);
    // The restarted bot answers a message only after its first sweep began: once it has, and
    // its menu check (the sweep's last step) had time, nothing more was sent.
    f.updates
        .lock()
        .unwrap()
        .push(text_update(600, "after the restart"));
    let _bot = Bot::spawn(
        clawless(&data, &tg, &llm_url).stdout(Stdio::null()),
        String::new(),
    );
    until("the message after the restart answered", || {
        f.sent_to(OWNER_ID)
            .iter()
            .any(|t| t == "You said: after the restart")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(menus().len(), 2, "an unchanged menu is not sent again");
    assert!(f.violations.lock().unwrap().is_empty());
}

/// `clawless doctor` on the fakes: clean is exit 0; a revoked token, a failing webhook and a
/// rejected key are each a `FAIL` line and exit 1; `--json` and `--remote` say the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_failure() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("doctor");
    let doctor = |extra: &[(&str, &str)], args: &[&str]| {
        let mut cmd = clawless(&data, &tg, &llm);
        cmd.envs(extra.iter().copied()).arg("doctor").args(args);
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, said) = doctor(&[], &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("ok   telegram main: the token is @clawless_test_bot's\n"),
        "{said}"
    );
    assert!(
        said.contains("ok   webhook main: no webhook: long polling"),
        "{said}"
    );
    assert!(
        said.contains("ok   model anthropic/claude-sonnet-4-5: the provider takes the key\n"),
        "{said}"
    );
    assert!(
        said.contains("ok   storage:") && said.contains("ok   backlog: nothing pending"),
        "{said}"
    );

    let (code, said) = doctor(&[("TELEGRAM_BOT_TOKEN", "42:WRONG")], &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("FAIL telegram main: Telegram refused the token (401)"),
        "{said}"
    );
    assert!(!said.contains("42:WRONG"), "the token is not shown");

    let (code, said) = doctor(&[("ANTHROPIC_API_KEY", "sk-wrong")], &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("FAIL model anthropic/claude-sonnet-4-5: anthropic refused the key: set a valid one in ANTHROPIC_API_KEY\n"),
        "{said}"
    );

    *f.webhook_info.lock().unwrap() = Some(json!({
        "url": "https://bot.example/telegram/main", "has_custom_certificate": false,
        "pending_update_count": 3, "last_error_date": now_ms() / 1000 - 90,
        "last_error_message": "Wrong response from the webhook: 502 Bad Gateway"
    }));
    let (code, said) = doctor(&[], &["--json"]);
    assert_eq!(code, Some(1), "{said}");
    let answer: Value = serde_json::from_str(said.trim()).unwrap();
    assert_eq!(answer["ok"], false);
    let webhook = answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "webhook main")
        .unwrap()
        .clone();
    assert_eq!(webhook["status"], "fail");
    // 90 s when the doctor read it, or a second or two more on a loaded machine.
    let detail = webhook["detail"].as_str().unwrap_or_default();
    let ago = detail
        .strip_prefix("https://bot.example/telegram/main: Telegram's last delivery failed ")
        .and_then(|rest| {
            rest.strip_suffix(
                " s ago: Wrong response from the webhook: 502 Bad Gateway (3 update(s) waiting)",
            )
        })
        .and_then(|n| n.parse::<u64>().ok());
    assert!(ago.is_some_and(|s| (90..=95).contains(&s)), "{detail}");

    // --remote: the same checks from a running deployment's /admin/doctor.
    *f.webhook_info.lock().unwrap() = Some(json!({
        "url": "https://bot.example/telegram/main", "has_custom_certificate": false,
        "pending_update_count": 0
    }));
    let admin = "0123456789abcdef-doctor";
    let how = Serve {
        env: &[("CLAWLESS_ADMIN_TOKEN", admin)],
        ..Serve::default()
    };
    let bot = start_bot_with(&common::temp_dir("doctor-serve"), &tg, &llm, how).await;
    let (code, said) = doctor(&[("CLAWLESS_ADMIN_TOKEN", admin)], &["--remote", &bot.url]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("ok   webhook main: https://bot.example/telegram/main, 0 update(s) waiting, no delivery error"), "{said}");
    let (code, _) = doctor(
        &[("CLAWLESS_ADMIN_TOKEN", "0123456789abcdef-wrong")],
        &["--remote", &bot.url],
    );
    assert_eq!(code, Some(1), "a wrong admin token");
    drop(bot);
}

/// A model that keeps failing: the native runner retries the turn when the core says (the
/// inbox's 3, 6, 12 s), not at the next 15 s sweep, then tells the user. Each drain attempt
/// is a cluster of model requests (the chain's own tries, 1 s then 2 s apart); the gaps
/// between clusters are the inbox's backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_turn_is_retried_on_its_schedule() {
    let (f, tg, llm) = fakes().await;
    let data = common::temp_dir("retry-schedule");
    f.updates
        .lock()
        .unwrap()
        .push(text_update(700, "model down please"));
    let _bot = Bot::spawn(
        clawless(&data, &tg, &llm).stdout(Stdio::null()),
        String::new(),
    );
    let mut seen: Vec<Instant> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while f.sent_to(OWNER_ID).is_empty() {
        assert!(Instant::now() < deadline, "no error reply within a minute");
        let n = f.llm_count("model down please");
        while seen.len() < n {
            seen.push(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gaps: Vec<f64> = seen
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .filter(|g| *g > 2.6)
        .collect();
    println!("gaps between drain attempts: {gaps:?} s");
    assert_eq!(gaps.len(), 3, "four drain attempts: {gaps:?}");
    for (gap, want) in gaps.iter().zip([3.0, 6.0, 12.0]) {
        assert!(
            (gap - want).abs() <= 1.0,
            "a retry {gap:.2} s after the failure, not {want} s: {gaps:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_security_names_the_risky_settings_of_a_bot() {
    use std::os::unix::fs::PermissionsExt;
    let (_f, tg, llm) = fakes().await;
    let data = common::temp_dir("doctor-security");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = clawless(&data, &tg, &llm)
        .env("TELEGRAM_WEBHOOK_SECRET", "")
        .args(["doctor", "--security"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "warnings only: {said}");
    assert!(said.contains("no webhook secret"), "{said}");
    assert!(
        said.contains(&format!("chmod 700 {}", data.display())),
        "{said}"
    );
    let out = clawless(&data, &tg, &llm)
        .args(["doctor", "--security", "--remote", "https://x.example"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--security is a local check");
}
