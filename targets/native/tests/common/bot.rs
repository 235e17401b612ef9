//! The real `clawless` binary as a child process, pointed at the testkit's fake servers.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawless_testkit::fixtures::OWNER_ID;
use serde_json::Value;

pub const TOKEN: &str = "42:E2E-TOKEN";
pub const SECRET: &str = "e2e-secret";

/// A running `clawless`, killed and reaped when dropped (so a failing test leaves nothing).
pub struct Bot {
    pub child: Child,
    pub url: String,
    /// What it wrote to stderr (its log), line by line; also echoed to the test's stderr.
    logs: Arc<Mutex<Vec<String>>>,
}

impl Bot {
    /// Spawns `cmd` with its stderr captured (see [`Bot::logs`]).
    pub fn spawn(cmd: &mut Command, url: String) -> Bot {
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let sink = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("{line}");
                    sink.lock().unwrap().push(line);
                }
            });
        }
        Bot { child, url, logs }
    }

    /// The lines it logged so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `clawless` with a clean environment pointing at the fakes.
pub fn clawless(data: &std::path::Path, tg: &str, llm: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clawless"));
    configure(&mut cmd, data, tg, llm);
    cmd
}

fn configure(cmd: &mut Command, data: &std::path::Path, tg: &str, llm: &str) {
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .env("TELEGRAM_ALLOWED_USERS", OWNER_ID.to_string())
        .env("TELEGRAM_API_BASE", tg)
        .env("ANTHROPIC_API_KEY", "sk-e2e")
        .env("ANTHROPIC_BASE_URL", llm)
        .env("TRANSCRIBE_BASE_URL", llm)
        .env("SPEECH_BASE_URL", llm)
        .env("IMAGE_BASE_URL", llm)
        .env(
            clawless_testkit::fixtures::MCP_URL_ENV,
            format!("{llm}/mcp"),
        )
        .env("CLAWLESS_DATA", data)
        .env(
            "CLAWLESS_CONFIG",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"),
        )
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit());
}

/// How to start `clawless serve` beyond the defaults.
#[derive(Default)]
pub struct Serve<'a> {
    /// Extra environment (the server limits).
    pub env: &'a [(&'a str, &'a str)],
    /// A soft limit on open descriptors for the child (`ulimit -n`).
    pub nofile: Option<u32>,
}

pub async fn start_bot(data: &std::path::Path, tg: &str, llm: &str) -> Bot {
    start_bot_with(data, tg, llm, Serve::default()).await
}

/// `clawless serve` on a free port; returns once `/healthz` answers.
pub async fn start_bot_with(data: &std::path::Path, tg: &str, llm: &str, how: Serve<'_>) -> Bot {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = match how.nofile {
        // `exec` keeps the pid: signals and /proc reach clawless itself.
        Some(n) => {
            let mut sh = Command::new("sh");
            sh.args([
                "-c",
                &format!("ulimit -n {n} && exec \"$0\" \"$@\""),
                env!("CARGO_BIN_EXE_clawless"),
            ]);
            sh
        }
        None => Command::new(env!("CARGO_BIN_EXE_clawless")),
    };
    configure(&mut cmd, data, tg, llm);
    cmd.envs(how.env.iter().copied());
    // Owned by `Bot` at once, so a failing test still kills and reaps it.
    let bot = Bot::spawn(
        cmd.args(["serve", "--listen", &listen])
            .stdout(Stdio::null()),
        format!("http://{listen}"),
    );
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{}/healthz", bot.url)).send().await {
            if r.status() == 200 {
                return bot;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the bot did not become healthy");
}

pub async fn post_update(bot: &Bot, update: &Value, secret: Option<&str>) -> u16 {
    post_body(bot, update.to_string(), secret).await
}

pub async fn post_body(bot: &Bot, body: String, secret: Option<&str>) -> u16 {
    let mut req = reqwest::Client::new()
        .post(format!("{}/telegram/main", bot.url))
        .header("content-type", "application/json")
        .body(body);
    if let Some(s) = secret {
        req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
    }
    req.send().await.unwrap().status().as_u16()
}

/// Sends SIGTERM to the bot.
pub fn sigterm(bot: &Bot) {
    let status = Command::new("kill")
        .args(["-TERM", &bot.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits up to `within` for the bot to exit; `None` if it is still running.
pub async fn exited_within(bot: &mut Bot, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = bot.child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
