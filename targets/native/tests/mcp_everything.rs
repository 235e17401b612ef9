//! Against the official MCP reference server, `@modelcontextprotocol/server-everything` (npm,
//! Streamable HTTP), installed by `.ci/run` (feature `mcp-everything`): a call through it, the
//! server restarted (it forgets every session and answers the old one with HTTP 400), and a
//! second call that succeeds because the client starts a new session and sends it again.
//!
//! Needs `CLAWLESS_NODE` (a Node binary) and `CLAWLESS_NODE_MODULES` (where the package is).

#![cfg(feature = "mcp-everything")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clawless_testkit::fixtures::OWNER_ID;
use clawless_testkit::servers::{fakes, text_update, until};
use common::bot::{post_update, start_bot_with, Serve, SECRET};

/// The reference server on `port`, killed on drop.
struct Everything(Child);

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set (see .ci/run)"))
}

async fn start_everything(port: u16) -> Everything {
    let script = std::path::Path::new(&env("CLAWLESS_NODE_MODULES"))
        .join("@modelcontextprotocol/server-everything/dist/index.js");
    let child = Command::new(env("CLAWLESS_NODE"))
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node starts");
    let server = Everything(child);
    let url = format!("127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&url).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "server-everything did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_restarted_between_two_calls() {
    let (f, tg, llm) = fakes().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = start_everything(port).await;
    let config = common::temp_dir("everything-config");
    clawless_testkit::fixtures::asking_config(&config);
    let agent = config.join("agents.d/assistant.yaml");
    let mut yaml = std::fs::read_to_string(&agent).unwrap();
    yaml.push_str(&format!(
        "  - name: everything\n    url: http://127.0.0.1:{port}/mcp\n    level: safe\n    tools: [echo]\n"
    ));
    std::fs::write(&agent, yaml).unwrap();
    let data = common::temp_dir("everything");
    let how = Serve {
        env: &[("CLAWLESS_CONFIG", config.to_str().unwrap())],
        ..Serve::default()
    };
    let bot = start_bot_with(&data, &tg, &llm, how).await;

    let first = text_update(1, "everything: before the restart");
    assert_eq!(post_update(&bot, &first, Some(SECRET)).await, 200);
    until("the first answer", || f.sent_to(OWNER_ID).len() == 1).await;
    assert_eq!(f.sent_to(OWNER_ID), ["Tool said: Echo: before the restart"]);

    drop(server);
    let _server = start_everything(port).await;
    let second = text_update(2, "everything: after the restart");
    assert_eq!(post_update(&bot, &second, Some(SECRET)).await, 200);
    until("the second answer", || f.sent_to(OWNER_ID).len() == 2).await;
    assert_eq!(
        f.sent_to(OWNER_ID)[1],
        "Tool said: Echo: after the restart",
        "the call after the restart went through a new session"
    );
    let _ = std::fs::remove_dir_all(&config);
}
