//! An MCP server run as a local program (stdio), on this machine: the small Python server in
//! `tests/fixtures/mcp/stdio_server.py` started through the native Exec port. Its tools are
//! listed and called (lines that are not responses skipped), it gets only the variables the
//! config passes, and after it exits it is started again. `clawless doctor` starts each
//! program: one that works is counted, one that exits at start is a failure naming its last
//! words and the likely cause.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use clawless_core::config::McpServerConfig;
use clawless_core::mcp::McpServer;
use clawless_core::tools::ToolContext;
use clawless_core::{Env, Scope};
use clawless_native::exec::ShellExec;
use clawless_platform::native_io::SystemClock;
use clawless_platform::FakeHttp;
use serde_json::json;

const SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/mcp/stdio_server.py"
);

fn server() -> Arc<McpServer> {
    let config: McpServerConfig = serde_json::from_value(json!({
        "name": "local",
        "command": ["python3", SERVER],
        "env": {"MCP_TEST_VAR": "LOCAL_MCP_SECRET"},
        "level": "guarded",
        "timeout_secs": 10,
    }))
    .unwrap();
    config.check().unwrap();
    let root = clawless_testkit::scratch::dir("mcp-stdio");
    let env = Env::from_pairs([("LOCAL_MCP_SECRET", "it-is-passed".to_owned())]);
    Arc::new(McpServer::new(
        config,
        Arc::new(FakeHttp::new()),
        Some(Arc::new(ShellExec::new(root))),
        Arc::new(SystemClock),
        &env,
    ))
}

fn ctx() -> ToolContext {
    ToolContext {
        scope: Scope::new("assistant/main/u1"),
        granted: Default::default(),
        origin: None,
        depth: 0,
        budget: None,
        call: String::new(),
        tainted: None,
        allowance: None,
    }
}

#[tokio::test]
async fn a_local_program_is_listed_called_and_started_again_after_it_exits() {
    // The scrubbed environment: nothing of this process's reaches the program.
    std::env::set_var("LOCAL_MCP_SECRET", "from-the-parent");
    let server = server();
    assert_eq!(server.unavailable(), None);
    let tools = server.tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(names, ["local__add", "local__env", "local__exit"]);
    let add = &tools[0];
    assert_eq!(
        add.call(&ctx(), json!({"a": 2, "b": 40})).await.unwrap(),
        "42"
    );
    assert_eq!(
        tools[1].call(&ctx(), json!({})).await.unwrap(),
        "it-is-passed"
    );
    // It quits: that call fails, and the next one starts it again (a new session).
    let quit = tools[2].call(&ctx(), json!({})).await.unwrap_err();
    assert!(quit.0.contains("unreachable"), "{}", quit.0);
    assert_eq!(
        add.call(&ctx(), json!({"a": 1, "b": 1})).await.unwrap(),
        "2"
    );
}

#[tokio::test]
async fn calls_at_once_each_get_their_own_answer() {
    let server = server();
    let tools = server.tools().await.unwrap();
    let (add, ctx) = (&tools[0], ctx());
    let (a, b, c) = tokio::join!(
        add.call(&ctx, json!({"a": 1, "b": 2})),
        add.call(&ctx, json!({"a": 10, "b": 20})),
        add.call(&ctx, json!({"a": 100, "b": 200})),
    );
    assert_eq!([a.unwrap(), b.unwrap(), c.unwrap()], ["3", "30", "300"]);
}

#[tokio::test]
async fn a_program_is_not_offered_where_programs_cannot_run() {
    let config: McpServerConfig =
        serde_json::from_value(json!({"name": "local", "command": ["python3", SERVER]})).unwrap();
    let server = McpServer::new(
        config,
        Arc::new(FakeHttp::new()),
        None,
        Arc::new(SystemClock),
        &Env::default(),
    );
    assert!(server
        .unavailable()
        .unwrap()
        .contains("only the native binary"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_starts_each_program_and_shows_the_last_words_of_one_that_exits() {
    let (_f, tg, llm) = clawless_testkit::servers::fakes().await;
    let config = common::temp_dir("doctor-mcp-config");
    clawless_testkit::fixtures::asking_config(&config);
    let agent = config.join("agents.d/assistant.yaml");
    let mut yaml = std::fs::read_to_string(&agent).unwrap();
    // One that works (the system's python: a CI's virtualenv may live where the sandbox does
    // not reach), and one that does not find what it needs and exits.
    let server = std::fs::canonicalize(SERVER).unwrap();
    let fixtures = server.parent().unwrap().to_owned();
    yaml.push_str(&format!(
        "  - name: local\n    command: [/usr/bin/python3, {server:?}]\n    paths: [{fixtures:?}]\n  - name: broken\n    command: [/usr/bin/python3, -c, \"import sys; open('/root/.secret-config'); \"]\n"
    ));
    std::fs::write(&agent, yaml).unwrap();
    let data = common::temp_dir("doctor-mcp");
    let out = common::bot::clawless(&data, &tg, &llm)
        .env("CLAWLESS_CONFIG", &config)
        .arg("doctor")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ok   mcp local: 3 tools\n"), "{said}");
    let broken = said
        .lines()
        .find(|l| l.starts_with("FAIL mcp broken: the program did not start:"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        broken.contains("No such file or directory: '/root/.secret-config'"),
        "its last words: {broken}"
    );
    assert!(
        broken.contains("likely: a program or file it names is not there"),
        "the likely cause: {broken}"
    );
    let _ = std::fs::remove_dir_all(&config);
    let _ = std::fs::remove_dir_all(&data);
}
