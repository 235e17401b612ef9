#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn repository_config_is_valid() {
    let cfg = Config::load(&embedded()).unwrap();
    assert_eq!(
        cfg.routing.connectors.get("main").map(|r| r.agent.as_str()),
        Some("assistant")
    );
    let agent = &cfg.agents["assistant"];
    assert!(agent.system_prompt.contains("assistant"));
    assert_eq!(
        agent.tools,
        [
            "current_time",
            "memory_search",
            "memory_get",
            "memory_write",
            "schedule",
            "watch",
            "web_fetch",
            "web_search",
            "skill",
            "generate_image"
        ]
    );
    assert_eq!(cfg.providers["openai"].kind, ProviderKind::Openai);
    // The example skill is carried as text, for the skills module to read.
    assert!(cfg.skills["summarize-url/SKILL.md"].starts_with("---\nname: summarize-url\n"));
}

#[test]
fn the_workspace_tools_are_accepted() {
    let cfg = Config::load(&with(
        "agents.d/assistant.yaml",
        "id: assistant\nmodels: [openai/x]\ntools: [read_file, write_file, edit_file, list_dir, delete_file]\npolicy: {tools: {delete_file: ask}}\n",
    ))
    .unwrap();
    assert_eq!(cfg.agents["assistant"].tools.len(), 5);
}

fn with(path: &str, text: &str) -> ConfigFiles {
    let mut files = embedded();
    files.0.insert(path.into(), text.into());
    files
}

#[test]
fn errors_name_file_and_field() {
    let e = Config::load(&with(
        "agents.d/assistant.yaml",
        "id: assistant\nmodels: [nope/x]\n",
    ))
    .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("agents.d/assistant.yaml", "models[0]")
    );
    assert!(e.message.contains("unknown provider"), "{e}");

    let e = Config::load(&with(
        "agents.d/assistant.yaml",
        "id: assistant\nmodels: [openai/x]\ntools: [rm_rf]\n",
    ))
    .unwrap_err();
    assert_eq!(e.field, "tools[0]");

    let e = Config::load(&with("routing.yaml", "default_agent: ghost\n")).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("routing.yaml", "default_agent")
    );

    let e = Config::load(&with("main.yaml", "sesion: {}\n")).unwrap_err();
    assert_eq!(e.file, "main.yaml");
    assert!(e.message.contains("unknown field"), "{e}");
    assert!(e.field.starts_with("line 1"), "{e}");

    let e = Config::load(&with(
        "agents.d/second.yaml",
        "id: assistant\nmodels: [openai/x]\n",
    ))
    .unwrap_err();
    assert!(e.message.contains("duplicate agent"), "{e}");

    let e = Config::load(&with(
        "agents.d/other.yaml",
        "id: other\nmodels: [openai/x]\n",
    ))
    .unwrap_err();
    assert_eq!(e.file, "prompts/other/system.md");

    let mut files = embedded();
    files.0.remove("main.yaml");
    assert_eq!(Config::load(&files).unwrap_err().file, "main.yaml");
}

#[test]
fn an_owner_is_a_person_and_survives_the_json() {
    let cfg = Config::load(&with(
        "main.yaml",
        "connectors:\n  main:\n    allowed_users: [5]\n    owner: 7\n",
    ))
    .unwrap();
    assert_eq!(cfg.connectors["main"].owner, Some(7));
    assert_eq!(Config::from_json(&cfg.to_json()).unwrap(), cfg);
    for bad in ["-100123", "0"] {
        let e = Config::load(&with(
            "main.yaml",
            &format!("connectors:\n  main:\n    owner: {bad}\n"),
        ))
        .unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("main.yaml", "connectors.main.owner"),
            "{e}"
        );
    }
}

#[test]
fn json_round_trip_keeps_everything() {
    let config = Config::load(&embedded()).unwrap();
    let back = Config::from_json(&config.to_json()).unwrap();
    assert_eq!(
        back, config,
        "the Worker's build-time JSON is the same config"
    );
    assert!(!back.agents["assistant"].system_prompt.is_empty());
    let err = Config::from_json("{\"connectors\": 1}").unwrap_err();
    assert_eq!(err.file, "config.json");
}

#[test]
fn memory_settings_are_read_and_checked() {
    let cfg = Config::load(&embedded()).unwrap();
    assert_eq!(cfg.memory, crate::memory::store::SearchConfig::default());
    let cfg = Config::load(&with(
        "main.yaml",
        "memory:\n  max_results: 3\n  min_score: 0.5\n",
    ))
    .unwrap();
    assert_eq!((cfg.memory.max_results, cfg.memory.min_score), (3, 0.5));
    assert_eq!(
        cfg.memory.chunk_tokens, 400,
        "unset fields keep their default"
    );
    for (yaml, field) in [
        ("memory:\n  max_results: 0\n", "memory.max_results"),
        ("memory:\n  min_score: 1.5\n", "memory.min_score"),
        ("memory:\n  chunk_overlap: 400\n", "memory.chunk_overlap"),
        ("memory:\n  max_file_kb: 0\n", "memory.max_file_kb"),
        (
            "memory:\n  vector_weight: 0\n  text_weight: 0\n",
            "memory.vector_weight",
        ),
    ] {
        let e = Config::load(&with("main.yaml", yaml)).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("main.yaml", field),
            "{yaml}"
        );
    }
    let e = Config::load(&with("main.yaml", "memory:\n  top_k: 3\n")).unwrap_err();
    assert!(e.message.contains("unknown field"), "{e}");
}

#[test]
fn ids_fit_in_storage_keys() {
    // Found by fuzzing: a connector id of some 600 characters loaded, and every update for it
    // then failed to store (its inbox key was over the Kv port's 512 bytes).
    let long = "m".repeat(MAX_ID_LEN + 1);
    let e = Config::load(&with(
        "main.yaml",
        &format!("connectors:\n  main: {{}}\n  {long}: {{}}\n"),
    ))
    .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field),
        ("main.yaml", format!("connectors.{long}"))
    );
    let e = Config::load(&with(
        "agents.d/assistant.yaml",
        &format!("id: {long}\nmodels: [openai/x]\n"),
    ))
    .unwrap_err();
    assert_eq!(e.field, "id");

    let most = "m".repeat(MAX_ID_LEN);
    let cfg = Config::load(&with(
        "main.yaml",
        &format!("connectors:\n  main: {{}}\n  {most}: {{}}\n"),
    ));
    assert!(cfg.is_ok(), "{cfg:?}");
}

#[test]
fn huge_durations_saturate() {
    // Found with the config fuzz target: `idle_minutes * 60_000` and `dedupe_hours * 3600`
    // overflowed for settings near u64::MAX (the loader accepts them).
    let cfg = Config::load(&with(
        "main.yaml",
        "session: {idle_minutes: 18446744073709551615}\ninbox: {dedupe_hours: 18446744073709551615}\n",
    ))
    .unwrap();
    assert_eq!(cfg.session.idle_ms(), u64::MAX);
    assert_eq!(cfg.inbox.dedupe_ttl().as_secs(), u64::MAX);
    assert_eq!(InboxConfig::default().dedupe_ttl().as_secs(), 48 * 3600);
    assert_eq!(
        SessionConfig {
            idle_minutes: 2,
            ..Default::default()
        }
        .idle_ms(),
        120_000
    );
}

#[test]
fn every_provider_preset_is_there_with_its_key_variable() {
    let cfg = Config::load(&embedded()).unwrap();
    for (id, kind, key, base_env) in [
        (
            "anthropic",
            ProviderKind::Anthropic,
            Some("ANTHROPIC_API_KEY"),
            "ANTHROPIC_BASE_URL",
        ),
        (
            "openai",
            ProviderKind::Openai,
            Some("OPENAI_API_KEY"),
            "OPENAI_BASE_URL",
        ),
        (
            "gemini",
            ProviderKind::Gemini,
            Some("GEMINI_API_KEY"),
            "GEMINI_BASE_URL",
        ),
        (
            "openrouter",
            ProviderKind::Openai,
            Some("OPENROUTER_API_KEY"),
            "OPENROUTER_BASE_URL",
        ),
        (
            "groq",
            ProviderKind::Openai,
            Some("GROQ_API_KEY"),
            "GROQ_BASE_URL",
        ),
        (
            "deepseek",
            ProviderKind::Openai,
            Some("DEEPSEEK_API_KEY"),
            "DEEPSEEK_BASE_URL",
        ),
        (
            "mistral",
            ProviderKind::Openai,
            Some("MISTRAL_API_KEY"),
            "MISTRAL_BASE_URL",
        ),
        (
            "xai",
            ProviderKind::Openai,
            Some("XAI_API_KEY"),
            "XAI_BASE_URL",
        ),
        (
            "together",
            ProviderKind::Openai,
            Some("TOGETHER_API_KEY"),
            "TOGETHER_BASE_URL",
        ),
        ("ollama", ProviderKind::Openai, None, "OLLAMA_BASE_URL"),
    ] {
        let p = cfg
            .providers
            .get(id)
            .unwrap_or_else(|| panic!("no {id} preset"));
        assert_eq!(p.kind, kind, "{id}");
        assert_eq!(p.api_key_env.as_deref(), key, "{id}");
        assert_eq!(p.base_url_env.as_deref(), Some(base_env), "{id}");
        let base = p.base_url.as_deref().unwrap_or_default();
        assert!(
            base.starts_with("https://") || id == "ollama",
            "{id}: {base}"
        );
    }
    assert_eq!(
        cfg.providers["ollama"].base_url.as_deref(),
        Some("http://localhost:11434/v1")
    );
    // Any one key works: the default agent lists one model of every preset (a keyless one
    // joins a chain only once its base URL is set, see `assemble::set_up`).
    let listed = &cfg.agents["assistant"].models;
    for id in cfg.providers.keys() {
        assert!(
            listed.iter().any(|m| m.starts_with(&format!("{id}/"))),
            "{id}: {listed:?}"
        );
    }
    assert!(cfg.providers["gemini"]
        .prices
        .contains_key("gemini-2.5-flash"));
}

#[test]
fn which_models_see_images() {
    let cfg = Config::load(&embedded()).unwrap();
    let deepseek = &cfg.providers["deepseek"];
    assert!(!deepseek.sees_images("deepseek-chat"));
    assert!(!deepseek.sees_images("deepseek-reasoner"));
    assert!(deepseek.sees_images("deepseek-vl-future"));
    // Only models known not to see images are marked: DeepSeek's, and the text-only models
    // the default agent names for Groq, xAI and Together.
    for (id, p) in &cfg.providers {
        assert_ne!(p.vision, Some(false), "{id}");
        let marked = ["deepseek", "groq", "xai", "together"].contains(&id.as_str());
        assert_eq!(marked, !p.no_vision.is_empty(), "{id}");
    }
    assert!(!cfg.providers["groq"].sees_images("llama-3.3-70b-versatile"));
    assert!(cfg.providers["mistral"].sees_images("mistral-small-latest"));
    assert!(cfg.providers["gemini"].sees_images("gemini-2.5-flash"));

    let blind = Config::load(&with(
        "providers.d/local.yaml",
        "id: local\nkind: openai\nvision: false\n",
    ))
    .unwrap();
    assert!(!blind.providers["local"].sees_images("anything"));

    for (yaml, field) in [
        (
            "id: local\nkind: openai\nno_vision: [a, \" \"]\n",
            "no_vision[1]",
        ),
        (
            "id: local\nkind: openai\nvision: false\nno_vision: [a]\n",
            "no_vision",
        ),
        ("id: local\nkind: openai\nattempts: 0\n", "attempts"),
    ] {
        let e = Config::load(&with("providers.d/local.yaml", yaml)).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.field.as_str()),
            ("providers.d/local.yaml", field),
            "{yaml}"
        );
    }
    let e = Config::load(&with("providers.d/local.yaml", "id: local\nkind: palm\n")).unwrap_err();
    assert!(e.message.contains("unknown variant"), "{e}");
}

#[test]
fn an_agent_may_name_its_skills_with_the_skill_tool() {
    let agent = |extra: &str| {
        Config::load(&with(
            "agents.d/assistant.yaml",
            &format!("id: assistant\nmodels: [openai/x]\n{extra}"),
        ))
    };
    let cfg = agent("tools: [skill]\nskills: [summarize-url, my-own]\n").unwrap();
    assert_eq!(
        cfg.agents["assistant"].skills.as_deref(),
        Some(&["summarize-url".to_owned(), "my-own".to_owned()][..])
    );
    let e = agent("skills: [summarize-url]\n").unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.contains("`skill` tool")),
        ("skills", true)
    );
    let e = agent("tools: [skill]\nskills: [Not_A_Name]\n").unwrap_err();
    assert_eq!(e.field, "skills[0]");
    // A config whose skill does not parse still loads: the skill is reported, not the config.
    let mut files = embedded();
    files
        .0
        .insert("skills/broken/SKILL.md".into(), "no frontmatter".into());
    files
        .0
        .insert("skills/broken/notes.bin".into(), String::new());
    assert!(Config::load(&files)
        .unwrap()
        .skills
        .contains_key("broken/SKILL.md"));
}

#[test]
fn skills_survive_the_json_the_worker_embeds() {
    let cfg = Config::load(&with(
        "agents.d/assistant.yaml",
        "id: assistant\nmodels: [openai/x]\ntools: [skill]\nskills: [summarize-url]\n",
    ))
    .unwrap();
    let back = Config::from_json(&cfg.to_json()).unwrap();
    assert_eq!(back, cfg);
    assert!(back.skills.contains_key("summarize-url/SKILL.md"));
}

#[test]
fn a_local_programs_reach_is_checked() {
    let agent = |mcp: &str| {
        with(
            "agents.d/assistant.yaml",
            &format!("id: assistant\nmodels: [openai/x]\nmcp:\n{mcp}"),
        )
    };
    let ok = Config::load(&agent(
        "  - name: files\n    command: [fs-server]\n    paths: [/srv/shared]\n    network: true\n",
    ));
    assert!(ok.is_ok(), "{ok:?}");
    let e = Config::load(&agent(
        "  - name: files\n    command: [fs-server]\n    paths: [srv/shared]\n",
    ))
    .unwrap_err();
    assert!(e.field.ends_with("mcp.files.paths"), "{e}");
    assert!(e.message.contains("absolute"), "{e}");
    let e = Config::load(&agent(
        "  - name: web\n    url: https://mcp.example/mcp\n    network: true\n",
    ))
    .unwrap_err();
    assert!(e.message.contains("only a program"), "{e}");
}
