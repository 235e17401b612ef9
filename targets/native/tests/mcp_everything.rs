//! Against the official MCP reference server, `@modelcontextprotocol/server-everything` (npm,
//! Streamable HTTP), installed by `.ci/run` (feature `mcp-everything`): a call through it, the
//! server restarted (it forgets every session and answers the old one with HTTP 400), and a
//! second call that succeeds because the client starts a new session and sends it again.
//!
//! And the book's example of a local program (`docs/src/mcp.md`: `npx -y
//! @modelcontextprotocol/server-filesystem`), taken from the book as it is written (its
//! directory a temporary one): it starts in the sandbox, downloading the package from the npm
//! registry, and answers a call.
//!
//! Needs `CLAWLESS_NODE` (a Node binary) and `CLAWLESS_NODE_MODULES` (where the package is),
//! and, for the book's example, `npx` on `PATH` and the npm registry.

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

/// The `mcp:` entry named `name` of the book's example agent file in `docs/src/mcp.md`.
fn book_entry(name: &str) -> serde_yaml::Value {
    let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/mcp.md");
    let text = std::fs::read_to_string(book).unwrap();
    let start = text
        .find("```yaml\n# config/agents.d/assistant.yaml\n")
        .expect("the example agent file in the book");
    let block = &text[start + "```yaml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let file: serde_yaml::Value = serde_yaml::from_str(block).unwrap();
    file["mcp"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} server in the book's example"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_books_npx_example_starts_in_the_sandbox_and_answers() {
    use clawless_core::config::McpServerConfig;
    use clawless_core::mcp::McpServer;
    use clawless_core::tools::ToolContext;
    use clawless_core::{Env, Scope};
    use std::sync::Arc;

    // The real binary as the sandbox's helper, as the bot runs programs.
    clawless_native::sandbox::set_exe(env!("CARGO_BIN_EXE_clawless").into());
    let shared = common::temp_dir("book-npx-shared");
    std::fs::write(shared.join("hello.txt"), "hi").unwrap();
    let entry = serde_yaml::to_string(&book_entry("files")).unwrap();
    assert!(
        entry.contains("npx") && entry.contains("/srv/shared"),
        "{entry}"
    );
    let entry = entry.replace("/srv/shared", shared.to_str().unwrap());
    let config: McpServerConfig = serde_yaml::from_str(&entry).unwrap();
    config.check().unwrap();
    let files = common::temp_dir("book-npx-files");
    let env = Env::from_pairs([("FILES_MCP_TOKEN", "token".to_owned())]);
    let server = Arc::new(McpServer::new(
        config,
        Arc::new(clawless_platform::FakeHttp::new()),
        Some(Arc::new(clawless_native::exec::ShellExec::new(&files))),
        Arc::new(clawless_platform::native_io::SystemClock),
        &env,
    ));
    assert_eq!(server.unavailable(), None);
    // As the bot does when it starts (the first start fetches the package), then as a turn does.
    let started = std::time::Instant::now();
    server
        .warm(clawless_native::runner::PROGRAM_START)
        .await
        .unwrap();
    let tools = server.tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
    let list = tools
        .iter()
        .find(|t| t.spec().name == "files__list_directory")
        .unwrap_or_else(|| panic!("no list_directory in {names:?}"));
    let ctx = ToolContext {
        scope: Scope::new("assistant/main/u1"),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    };
    let listed = list
        .call(&ctx, serde_json::json!({"path": shared.to_str().unwrap()}))
        .await
        .unwrap();
    assert!(listed.contains("hello.txt"), "{listed}");
    println!(
        "the book's npx example: started and answered in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(tools);
    drop(server);
    let _ = std::fs::remove_dir_all(&shared);
    let _ = std::fs::remove_dir_all(&files);
}
