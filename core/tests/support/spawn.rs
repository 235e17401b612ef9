//! What the sub-agent tests share: the assistant with `spawn` and a `researcher` it may run,
//! and readers of what the model was shown and what was sent.

use clawless_core::Config;
use serde_json::Value;

use super::{Harness, Wire};

/// The assistant with `spawn`, allowed to run `researcher`; the researcher has a tool the
/// assistant lacks (`write_file`) and may spawn too.
pub fn config(adjust: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config::load(&clawless_core::config::embedded()).unwrap();
    let a = config.agents.get_mut("assistant").unwrap();
    a.tools.push("spawn".into());
    a.spawn.agents = vec!["researcher".into()];
    let mut r = a.clone();
    r.id = "researcher".into();
    r.system_prompt = "You research things.".into();
    r.tools = [
        "current_time",
        "memory_search",
        "web_fetch",
        "write_file",
        "spawn",
    ]
    .map(String::from)
    .to_vec();
    r.spawn.agents = Vec::new();
    config.agents.insert("researcher".into(), r);
    adjust(&mut config);
    config
}

pub fn harness(adjust: impl FnOnce(&mut Config)) -> Harness {
    Harness::with_config(Wire::Anthropic, config(adjust))
}

pub fn tool_names(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every tool result shown to the model in `request`: (content, is_error).
pub fn tool_results(request: &Value) -> Vec<(String, bool)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (content, b["is_error"].as_bool().unwrap_or(false))
        })
        .collect()
}

pub fn sent_texts(h: &Harness) -> Vec<String> {
    h.calls("sendMessage")
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_owned())
        .collect()
}
