//! The config loader: `Config::load` on the embedded tree with one file replaced by the input,
//! and `Config::from_json` on the input. A config that loads survives `to_json`/`from_json`
//! unchanged, and an `App` built from it runs a turn (the model failing four times first, so
//! retries, backoff, sessions and dedupe all use its numbers) without panicking.
//!
//! Input: one byte choosing the file (main.yaml, routing.yaml, the agent, a provider, a new
//! agent file, a skill's SKILL.md, which the turn's system prompt reads), then its text. The
//! text is also read as a SKILL.md on its own.

#![no_main]

use clawless_core::Config;
use clawless_fuzz::world::{Wire, World};
use clawless_testkit::fixtures;
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;

const FILES: &[&str] = &[
    "main.yaml",
    "routing.yaml",
    "agents.d/assistant.yaml",
    "providers.d/anthropic.yaml",
    "agents.d/extra.yaml",
    "skills/fuzzed/SKILL.md",
];

fuzz_target!(|data: &[u8]| {
    let Some((which, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let _ = Config::from_json(&text);
    let _ = clawless_core::skills::frontmatter::parse(&text);

    let mut files = clawless_core::config::embedded();
    let name = FILES[usize::from(*which) % FILES.len()];
    files.0.insert(name.to_owned(), text.into_owned());
    if name == "agents.d/extra.yaml" {
        files
            .0
            .insert("prompts/extra/system.md".into(), "Be brief.".into());
    }
    let Ok(config) = Config::load(&files) else {
        return;
    };
    let back = Config::from_json(&config.to_json()).expect("to_json output reads back");
    assert_eq!(back, config, "JSON round trip changed the config");

    let Some(connector) = config.connectors.keys().next().cloned() else {
        return;
    };
    let script = vec![(500, Vec::new()); 4];
    let Ok(world) = World::with_config(config, Wire::Anthropic, script) else {
        return;
    };
    let update = fixtures::update("private_text", 1).to_string();
    let lane = block_on(world.app.accept_update(&connector, update.as_bytes()))
        .expect("in-memory storage never fails");
    if let Some(lane) = lane {
        assert!(world.drain(&lane), "the lane never drained");
    }
});
