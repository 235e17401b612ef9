#![allow(clippy::unwrap_used, clippy::expect_used)]

use clawless_platform::HttpResponse;
use futures::executor::block_on;
use serde_json::json;

use super::*;
use crate::llm::{ChatMessage, ChatRequest};

fn chain(models: &[&str], env: &[(&str, &str)]) -> (Vec<Link>, Arc<clawless_platform::FakeHttp>) {
    let (platform, _clock, http) = Platform::in_memory();
    let config = Config::load(&crate::config::embedded()).unwrap();
    let env = Env::from_pairs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let models: Vec<String> = models.iter().map(|m| m.to_string()).collect();
    (links(&platform, &config, &models, &env), http)
}

#[test]
fn links_come_from_presets_with_their_keys_and_vision() {
    let (links, _) = chain(
        &[
            "deepseek/deepseek-chat",
            "groq/llama-3.3-70b-versatile",
            "gemini/gemini-2.5-flash",
            "ollama/llama3.2",
        ],
        &[
            ("DEEPSEEK_API_KEY", "ds"),
            ("GEMINI_API_KEY", "gk"),
            ("OLLAMA_BASE_URL", "http://ollama.test/v1"),
        ],
    );
    let got: Vec<(&str, bool)> = links.iter().map(|l| (l.label.as_str(), l.vision)).collect();
    assert_eq!(
        got,
        [
            ("deepseek/deepseek-chat", false),
            // groq: no key set, skipped
            ("gemini/gemini-2.5-flash", true),
            // no key to set: there once its base URL is set
            ("ollama/llama3.2", true),
        ]
    );
    assert!(links[1].price.is_some());
    let chain = |links: Vec<Link>| ModelChain {
        links,
        clock: Arc::new(clawless_platform::FakeClock::new(0)),
        base_backoff: Duration::from_secs(1),
        max_wait: Duration::from_secs(1),
    };
    assert!(!chain(links.clone()).sees_images());
    assert!(chain(links[1..].to_vec()).sees_images());
    assert!(!chain(Vec::new()).sees_images());
}

#[test]
fn a_keyless_provider_is_left_out_until_its_base_url_is_set() {
    let (links, _) = chain(&["ollama/llama3.2"], &[]);
    assert!(links.is_empty());
    let (links, _) = chain(&["ollama/llama3.2"], &[("OLLAMA_BASE_URL", " ")]);
    assert!(links.is_empty(), "a blank value is not set");
}

#[test]
fn any_one_key_gives_the_default_agent_a_model() {
    let config = Config::load(&crate::config::embedded()).unwrap();
    let models = &config.agents["assistant"].models;
    for (var, label) in [
        ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
        ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
        ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
        ("OPENROUTER_API_KEY", "openrouter/openai/gpt-4o-mini"),
        ("GROQ_API_KEY", "groq/llama-3.3-70b-versatile"),
        ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
        ("MISTRAL_API_KEY", "mistral/mistral-small-latest"),
        ("XAI_API_KEY", "xai/grok-3-mini"),
        (
            "TOGETHER_API_KEY",
            "together/meta-llama/Llama-3.3-70B-Instruct-Turbo",
        ),
        ("OLLAMA_BASE_URL", "ollama/llama3.2"),
    ] {
        let refs: Vec<&str> = models.iter().map(String::as_str).collect();
        let (links, _) = chain(&refs, &[(var, "set")]);
        let got: Vec<&str> = links.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(got, [label], "only {var}");
    }
    // Several keys: the agent's order, the first answering and the others its fallbacks.
    let refs: Vec<&str> = models.iter().map(String::as_str).collect();
    let (links, _) = chain(&refs, &[("GROQ_API_KEY", "g"), ("GEMINI_API_KEY", "k")]);
    let got: Vec<&str> = links.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        got,
        ["gemini/gemini-2.5-flash", "groq/llama-3.3-70b-versatile"]
    );
    // Every preset is in the default agent's list: no key leaves it without a model.
    for p in config.providers.values() {
        assert!(
            models.iter().any(|m| m.starts_with(&format!("{}/", p.id))),
            "{} is not in the default agent's models",
            p.id
        );
    }
}

#[test]
fn a_gemini_link_calls_the_native_api_at_its_base_url() {
    let (links, http) = chain(
        &["gemini/gemini-2.5-flash"],
        &[
            ("GEMINI_API_KEY", "AIza-test"),
            ("GEMINI_BASE_URL", "http://gemini.test"),
        ],
    );
    http.route("http://gemini.test/", |_| {
        Ok(HttpResponse::json(
            200,
            &json!({"candidates": [{"content": {"parts": [{"text": "hello"}]}, "finishReason": "STOP"}]}),
        ))
    });
    let request = ChatRequest {
        model: links[0].model.clone(),
        system: String::new(),
        messages: vec![ChatMessage::user_text("hi")],
        tools: Default::default(),
        max_tokens: 64,
        ..Default::default()
    };
    let answer = block_on(links[0].provider.chat(&request)).unwrap();
    assert_eq!(answer.message.text(), "hello");
    let sent = &http.requests()[0];
    assert_eq!(
        sent.url,
        "http://gemini.test/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(sent.header_value("x-goog-api-key"), Some("AIza-test"));
}
