//! The built-in tools with any JSON input, on fresh in-memory ports: `current_time`, the
//! memory tools, the workspace file tools and `schedule` (in a private chat). A call answers text or a `ToolError` with a
//! message, never panics, and writes nothing outside its scope's memory and workspace roots.
//!
//! Input: one byte choosing the first tool, then JSON. A JSON array is a sequence of calls
//! (up to 8; the tool advances by one per call), so a write can be read and searched back.

#![no_main]

use std::sync::Arc;

use clawless_core::memory::embed::LocalEmbedder;
use clawless_core::memory::store::{root, MemoryStore, SearchConfig};
use clawless_core::tools::files::path::root as workspace_root;
use clawless_core::tools::{ToolContext, ToolDeps, ToolRegistry, BUILTIN_TOOLS};
use clawless_platform::Platform;
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const SCOPE: &str = "assistant/main/u1";

fuzz_target!(|data: &[u8]| {
    let Some((first, json)) = data.split_first() else {
        return;
    };
    let Ok(input) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let calls = match input {
        Value::Array(items) => items.into_iter().take(8).collect(),
        single => vec![single],
    };

    let (platform, _, _) = Platform::in_memory();
    let memory = Arc::new(MemoryStore {
        files: platform.files.clone(),
        kv: platform.kv.clone(),
        vectors: platform.vectors.clone(),
        text: platform.text.clone(),
        embedder: Arc::new(LocalEmbedder::default()),
        config: SearchConfig::default(),
    });
    let deps = ToolDeps {
        clock: platform.clock.clone(),
        memory,
        http: platform.http.clone(),
        web: Default::default(),
        search: None,
        exec: None,
        bots: Default::default(),
        painter: None,
        watches: Default::default(),
        files: platform.files.clone(),
        kv: platform.kv.clone(),
        wake: Default::default(),
    };
    let names: Vec<String> = BUILTIN_TOOLS.iter().map(|s| s.to_string()).collect();
    let registry = ToolRegistry::builtins(&names, &deps).unwrap();
    let ctx = ToolContext {
        scope: SCOPE.into(),
        granted: Default::default(),
        origin: Some(clawless_core::schedule::Origin {
            connector: "main".into(),
            chat: 1,
            chat_type: "private".into(),
            thread: None,
            user: 1,
            user_name: "Ada".into(),
        }),
        depth: 0,
        budget: None,
        call: "main/1/1:1:fuzz".into(),
        tainted: None,
        allowance: None,
    };

    // Every built-in this platform offers (`exec` needs a shell that runs commands).
    let names = registry.names();
    for (i, call) in calls.into_iter().enumerate() {
        let name = &names[(usize::from(*first) + i) % names.len()];
        let tool = registry.get(name).unwrap();
        match block_on(tool.call(&ctx, call)) {
            Ok(text) => assert!(!text.is_empty(), "{name} answered nothing"),
            Err(e) => assert!(!e.0.is_empty(), "{name} failed without a message"),
        }
    }

    let memory = format!("{}/", root(&SCOPE.into()));
    let workspace = format!("{}/", workspace_root(&SCOPE.into()));
    let files = block_on(platform.files.list("")).unwrap_or_default();
    for f in files {
        assert!(
            f.starts_with(&memory) || f.starts_with(&workspace),
            "{f} is outside {memory} and {workspace}"
        );
    }
});
