//! Runs the built Worker under Miniflare (`targets/worker/tests/miniflare.mjs`), for the
//! Worker's tests and bench and for the archive's move through every shell.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fixtures::OWNER_ID;
use serde_json::{json, Value};

pub const SECRET: &str = "worker-e2e-secret";

pub struct Miniflare {
    child: Child,
    pub url: String,
    pub control: String,
    /// The front Worker's URL, when it was started (`"front": true`).
    pub front: Option<String>,
    http: reqwest::Client,
    /// Every line Node and workerd printed (worker logs included).
    pub logs: Arc<Mutex<Vec<String>>>,
    /// Node's `TMPDIR`, where Miniflare keeps its files: removed once it has ended (its own
    /// removal at dispose is not awaited before the launcher exits).
    tmp: std::path::PathBuf,
}

fn env_path(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set (see .ci/run)"))
}

impl Miniflare {
    /// Starts the build in `build_var` with `vars` as `[vars]`/secrets.
    pub fn start(build_var: &str, vars: Value, vectorize: bool) -> Miniflare {
        Self::start_with(build_var, json!({"vars": vars, "vectorize": vectorize}))
    }

    /// Starts with the launcher's options as they are (`vars`, `vectorize`, `ai`).
    pub fn start_with(build_var: &str, options: Value) -> Miniflare {
        let worker = crate::repo::root().join("targets/worker");
        let tmp = crate::scratch::dir("miniflare");
        let mut command = Command::new(env_path("CLAWLESS_NODE"));
        if options["front"] == json!(true) {
            command.env(
                "CLAWLESS_WORKER_FRONT_BUILD",
                env_path("CLAWLESS_WORKER_FRONT_BUILD"),
            );
        }
        let mut child = command
            .arg(worker.join("tests/miniflare.mjs"))
            // The launcher's module paths are relative to the Worker's directory.
            .current_dir(&worker)
            .arg(options.to_string())
            .env("CLAWLESS_WORKER_BUILD", env_path(build_var))
            .env("CLAWLESS_NODE_MODULES", env_path("CLAWLESS_NODE_MODULES"))
            .env("TMPDIR", &tmp)
            .stdin(Stdio::piped())
            // Its own process group, so node and its workerd can be killed together.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let keep = |logs: &Arc<Mutex<Vec<String>>>, line: String| {
            eprintln!("{line}");
            logs.lock().unwrap().push(line);
        };
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep(&sink, line);
            }
        });
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let ready: Value = loop {
            let line = lines
                .next()
                .expect("miniflare printed its address")
                .unwrap();
            if line.starts_with('{') {
                break serde_json::from_str(&line).unwrap();
            }
        };
        // Keep draining stdout (worker logs) so the pipe never fills.
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep(&sink, line);
            }
        });
        Miniflare {
            child,
            url: ready["url"].as_str().unwrap().to_owned(),
            control: ready["control"].as_str().unwrap().to_owned(),
            front: ready["front"].as_str().map(str::to_owned),
            // A fresh connection per request, as Telegram's are: a refusal that leaves the
            // body unread may close the connection, and a pooled one would then fail the
            // next request.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap(),
            logs,
            tmp,
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    pub async fn post_update(&self, update: &Value, secret: Option<&str>) -> u16 {
        self.post_body(update.to_string(), secret).await
    }

    pub async fn post_body(&self, body: String, secret: Option<&str>) -> u16 {
        self.post_body_to(&self.url, body, secret).await
    }

    /// [`Miniflare::post_body`] to the Worker at `base` (the assistant's or the front's).
    pub async fn post_body_to(&self, base: &str, body: String, secret: Option<&str>) -> u16 {
        let mut req = self
            .http
            .post(format!("{base}/telegram/main"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = secret {
            req = req.header("x-telegram-bot-api-secret-token", s);
        }
        req.send().await.unwrap().status().as_u16()
    }

    /// Sends `head` (a request head, no body) on a raw connection and returns the status of
    /// the response, or `None` if none came within `within`: for bodies declared and never
    /// sent.
    pub async fn status_for_head(&self, head: &str, within: Duration) -> Option<u16> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.url.trim_start_matches("http://");
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 12];
        tokio::time::timeout(within, s.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        std::str::from_utf8(&buf[9..12]).ok()?.parse().ok()
    }

    pub async fn control(&self, what: &str, body: &str) -> Value {
        let r = self
            .http
            .post(format!("{}/{what}", self.control))
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "{what}: {}",
            r.text().await.unwrap()
        );
        serde_json::from_str(&r.text().await.unwrap()).unwrap()
    }
}

impl Miniflare {
    /// Kills node and workerd at once (SIGKILL to the process group): an invocation dying
    /// mid-turn, with no chance to finish anything.
    pub fn kill(mut self) {
        self.kill_group();
    }

    fn kill_group(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Miniflare {
    fn drop(&mut self) {
        // Closing stdin makes the script dispose workerd and exit; if it has not within 5 s,
        // the whole group is killed so no workerd outlives the test.
        drop(self.child.stdin.take());
        let ended = (0..100).any(|_| {
            let ended = matches!(self.child.try_wait(), Ok(Some(_)));
            if !ended {
                std::thread::sleep(Duration::from_millis(50));
            }
            ended
        });
        if !ended {
            self.kill_group();
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

pub fn bot_vars(tg: &str, llm: &str) -> Value {
    json!({
        "TELEGRAM_BOT_TOKEN": "77:WORKER-E2E",
        "TELEGRAM_WEBHOOK_SECRET": SECRET,
        "TELEGRAM_ALLOWED_USERS": OWNER_ID.to_string(),
        "TELEGRAM_API_BASE": tg,
        "ANTHROPIC_API_KEY": "sk-worker",
        "ANTHROPIC_BASE_URL": llm,
        "TRANSCRIBE_BASE_URL": llm,
        "SPEECH_BASE_URL": llm,
        "IMAGE_BASE_URL": llm,
        crate::fixtures::MCP_URL_ENV: format!("{llm}/mcp"),
    })
}
