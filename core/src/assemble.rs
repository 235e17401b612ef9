//! Assembly: config + env + ports → [`App`]. Providers and model chains, embedders, the tools
//! of each agent, the connectors and their bots.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawless_platform::Platform;

use crate::agent::Agent;
use crate::app::App;
use crate::config::{Config, ConfigError, ProviderConfig, ProviderKind};
use crate::connector::Connector;
use crate::env::{parse_user_list, Env};
use crate::ids::ConnectorId;
use crate::inbox::Inbox;
use crate::llm::cache::Refusable;
use crate::llm::chain::Link;
use crate::llm::{anthropic, gemini, openai, ModelChain, Provider};
use crate::memory::embed::{EmbeddingProvider, LocalEmbedder, OpenAiEmbeddings};
use crate::memory::store::MemoryStore;
use crate::secret::Secret;
use crate::skills::{Catalog, Offer, SKILL_TOOL};
use crate::telegram::{api, BotApi};
use crate::tools::skill::SkillTool;
use crate::tools::{ToolDeps, ToolRegistry};

/// The counts of outbound requests and of storage calls (see [`crate::allowance`]).
type Counts = (Arc<AtomicU64>, Arc<AtomicU64>);

/// `platform` with every outbound request and every storage call counted (see
/// [`crate::allowance`]), and the counts.
fn counted(mut platform: Platform) -> (Platform, Counts) {
    let outbound = Arc::new(AtomicU64::new(0));
    platform.http = Arc::new(crate::allowance::Counted {
        inner: platform.http,
        count: outbound.clone(),
    });
    let stored = Arc::new(AtomicU64::new(0));
    crate::allowance::count_storage(&mut platform, &stored);
    (platform, (outbound, stored))
}

impl App {
    /// Assembles the app, memory embedded as `memory.embedder` says. `instance` names this
    /// process or invocation in leases.
    pub fn new(
        platform: Platform,
        config: Config,
        env: &Env,
        instance: impl Into<String>,
    ) -> Result<App, ConfigError> {
        let (platform, counts) = counted(platform);
        let embedder = embedder_from_config(&platform, &config, env)?;
        Self::assemble(platform, counts, config, env, instance, (embedder, None))
    }

    /// Whether voice notes can be transcribed (a service is set).
    pub fn transcribes(&self) -> bool {
        self.transcriber.is_some()
    }

    /// Replaces the transcription service (the Worker's Workers AI Whisper).
    pub fn with_transcriber(mut self, transcriber: Arc<dyn crate::media::Transcriber>) -> App {
        self.transcriber = Some(transcriber);
        self
    }

    /// The speech service voice replies use, as `name (model)`, if one is set.
    pub fn speaks(&self) -> Option<String> {
        self.speaker
            .as_ref()
            .map(|s| format!("{} ({})", s.name(), s.model()))
    }

    /// Replaces the speech service (the Worker's Workers AI).
    pub fn with_speaker(mut self, speaker: Arc<dyn crate::media::Speaker>) -> App {
        self.speaker = Some(speaker);
        self
    }

    /// [`App::new`] with the shell's own embedder and, unless the environment names an image
    /// service, its own `painter` (the Worker's Workers AI). Memory files indexed by another
    /// embedder are re-indexed as they are met (their manifests name it).
    pub fn with_embedder(
        platform: Platform,
        config: Config,
        env: &Env,
        instance: impl Into<String>,
        (embedder, painter): (
            Arc<dyn EmbeddingProvider>,
            Option<Arc<dyn crate::media::image::Painter>>,
        ),
    ) -> Result<App, ConfigError> {
        let (platform, counts) = counted(platform);
        Self::assemble(platform, counts, config, env, instance, (embedder, painter))
    }

    fn assemble(
        platform: Platform,
        (outbound, stored): Counts,
        config: Config,
        env: &Env,
        instance: impl Into<String>,
        (embedder, shell_painter): (
            Arc<dyn EmbeddingProvider>,
            Option<Arc<dyn crate::media::image::Painter>>,
        ),
    ) -> Result<App, ConfigError> {
        // An image service named in the environment wins over the shell's own.
        let painter = match env.get("IMAGE_BASE_URL").map(str::trim) {
            Some("off") => None,
            _ => crate::media::image::from_env(platform.http.clone(), env).or(shell_painter),
        };
        let env_err = |field: &str, message: String| ConfigError {
            file: "environment".into(),
            field: field.into(),
            message,
        };
        let mut extra_users = Vec::new();
        if let Some(v) = env.get("TELEGRAM_ALLOWED_USERS") {
            extra_users = parse_user_list(v).map_err(|m| env_err("TELEGRAM_ALLOWED_USERS", m))?;
        }
        let admin_token = Secret::new(env.get("CLAWLESS_ADMIN_TOKEN").unwrap_or(""));
        let short = crate::admin_http::MIN_ADMIN_TOKEN_LEN;
        if !admin_token.is_empty() && admin_token.expose().chars().count() < short {
            return Err(env_err(
                "CLAWLESS_ADMIN_TOKEN",
                format!("is shorter than {short} characters; use a long random one (openssl rand -hex 32)"),
            ));
        }
        let api_base = env
            .get("TELEGRAM_API_BASE")
            .unwrap_or(api::DEFAULT_API_BASE)
            .to_owned();
        let memory = Arc::new(MemoryStore {
            files: platform.files.clone(),
            kv: platform.kv.clone(),
            vectors: platform.vectors.clone(),
            text: platform.text.clone(),
            embedder,
            config: config.memory.clone(),
        });
        // One Bot API client per connector, shared by its connector and the `message` tool.
        let mut bots = BTreeMap::new();
        for (id, c) in &config.connectors {
            let bot = Arc::new(BotApi::new(
                platform.http.clone(),
                platform.clock.clone(),
                &api_base,
                env.secret(&c.token_env),
            ));
            let allowed = c
                .allowed_users
                .iter()
                .chain(&extra_users)
                .chain(&c.owner)
                .copied()
                .collect();
            bots.insert(
                ConnectorId::new(id.as_str()),
                crate::tools::message::Outbound { bot, allowed },
            );
        }
        let bots = Arc::new(bots);
        let wake = Arc::new(crate::schedule::Wake::default());
        let deps = ToolDeps {
            clock: platform.clock.clone(),
            memory: memory.clone(),
            http: platform.http.clone(),
            web: config.web.clone(),
            search: crate::tools::web::search::SearchBackend::from_env(env),
            exec: platform.exec.clone(),
            files: platform.files.clone(),
            kv: platform.kv.clone(),
            wake: wake.clone(),
            bots: bots.clone(),
            painter: painter.clone(),
            watches: config.watches.clone(),
        };
        let catalog = Arc::new(Catalog::new(
            config.skills.clone(),
            platform.files.clone(),
            platform.clock.clone(),
            env.names_set(),
        ));
        // A hook's token is a secret whatever its setting is called.
        let hook_envs: Vec<&str> = config.hooks.iter().map(|h| h.secret_env.as_str()).collect();
        let secrets = env.secrets_with(&hook_envs);
        let mut agents: BTreeMap<String, Arc<Agent>> = BTreeMap::new();
        // Filled once every agent is built: the spawn tools look agents up in it.
        let spawn = crate::spawn::SpawnDeps {
            directory: Arc::new(crate::spawn::Directory::default()),
            clock: platform.clock.clone(),
            kv: platform.kv.clone(),
            wake: wake.clone(),
        };
        for (id, agent) in &config.agents {
            let mut tools = ToolRegistry::for_agent(
                &agent.tools,
                agent.tool_timeout_secs,
                agent.sandbox,
                &deps,
            )
            .map_err(|m| ConfigError {
                file: format!("agents.d/{id}.yaml"),
                field: "tools".into(),
                message: m,
            })?;
            let skills = Arc::new(skill_offer(&catalog, agent, &tools));
            if skills.enabled() {
                tools.register(Arc::new(SkillTool(skills.clone())));
            }
            let others = tools.names();
            for t in crate::spawn::tools_for(agent, &others, &spawn) {
                tools.register(t);
            }
            let chain = ModelChain {
                links: links(&platform, &config, &agent.models, env),
                clock: platform.clock.clone(),
                base_backoff: Duration::from_secs(1),
                max_wait: Duration::from_secs(30),
            };
            agents.insert(
                id.clone(),
                Arc::new(Agent {
                    config: agent.clone(),
                    chain,
                    tools,
                    clock: platform.clock.clone(),
                    skills: Some(skills),
                    mcp: agent
                        .mcp
                        .iter()
                        .map(|c| {
                            Arc::new(crate::mcp::McpServer::new(
                                c.clone(),
                                platform.http.clone(),
                                platform.exec.clone(),
                                platform.clock.clone(),
                                env,
                            ))
                        })
                        .collect(),
                    secrets: secrets.clone(),
                }),
            );
        }
        spawn.directory.fill(&agents);
        let agents = Arc::new(agents);
        let routing = Arc::new(config.routing.clone());
        let mut connectors = BTreeMap::new();
        for (id, c) in &config.connectors {
            let no_agent = || env_err("routing", format!("no agent for connector {id}"));
            let entry = routing.connector_route(id).cloned().ok_or_else(no_agent)?;
            let default = agents.get(&entry.agent).cloned().ok_or_else(no_agent)?;
            let token = env.secret(&c.token_env);
            connectors.insert(
                ConnectorId::new(id.as_str()),
                Connector {
                    id: ConnectorId::new(id.as_str()),
                    token_set: !token.is_empty(),
                    bot: bots
                        .get(id.as_str())
                        .map(|o| o.bot.clone())
                        .unwrap_or_else(|| {
                            Arc::new(BotApi::new(
                                platform.http.clone(),
                                platform.clock.clone(),
                                &api_base,
                                token.clone(),
                            ))
                        }),
                    token_env: c.token_env.clone(),
                    secret: env.secret(&c.webhook_secret_env),
                    secret_env: c.webhook_secret_env.clone(),
                    allowed: c
                        .allowed_users
                        .iter()
                        .chain(&extra_users)
                        .chain(&c.owner)
                        .copied()
                        .collect(),
                    owner: c
                        .owner
                        .or_else(|| c.allowed_users.iter().chain(&extra_users).copied().next()),
                    pairing_key: Secret::new(format!(
                        "{}\n{}",
                        token.expose(),
                        env.secret(&c.webhook_secret_env).expose()
                    )),
                    panel_keys: crate::signing::PanelKeys::new(
                        token.expose(),
                        env.secret(&c.webhook_secret_env).expose(),
                    ),
                    shared_memory: c.shared_memory,
                    agents: agents.clone(),
                    routing: routing.clone(),
                    entry,
                    default,
                    identity: Mutex::new(None),
                },
            );
        }
        let hooks = crate::hooks::build(&config, &connectors, env)?;
        let inbox = Inbox {
            kv: platform.kv.clone(),
            clock: platform.clock.clone(),
            config: config.inbox.clone(),
        };
        let platform_http = platform.http.clone();
        let events = Arc::new(crate::events::Bus::default());
        Ok(App {
            platform,
            memory,
            config: Arc::new(config),
            connectors,
            inbox,
            instance: instance.into(),
            counter: AtomicU64::new(0),
            admin_token,
            public_url: env
                .get("CLAWLESS_PUBLIC_URL")
                .map(|u| u.trim().trim_end_matches('/').to_owned())
                .filter(|u| !u.is_empty()),
            agents: (*agents).clone(),
            spawn,
            transcriber: crate::media::transcribe::from_env(platform_http.clone(), env)
                .map(|t| Arc::new(t) as Arc<dyn crate::media::Transcriber>),
            speaker: crate::media::speak::from_env(platform_http, env)
                .map(|t| Arc::new(t) as Arc<dyn crate::media::Speaker>),
            painter,
            menus_checked: Default::default(),
            journal: events.subscribe("journal", crate::observe::JOURNAL_CAP),
            events,
            metrics_kept: Default::default(),
            usage_written: Default::default(),
            journal_seq: Default::default(),
            outbound,
            stored,
            wake,
            hooks,
        })
    }
}

/// Which skills `agent` may be offered: its `skills:`, checked against the tools it is
/// offered here (`tools`, the `skill` tool counted when it lists it).
fn skill_offer(
    catalog: &Arc<Catalog>,
    agent: &crate::config::AgentConfig,
    tools: &ToolRegistry,
) -> Offer {
    let listed = agent.tools.iter().any(|t| t == SKILL_TOOL);
    let offered = tools
        .names()
        .into_iter()
        .chain(listed.then(|| SKILL_TOOL.to_owned()));
    Offer::new(catalog.clone(), &agent.id, offered, agent.skills.as_deref())
}

/// The embedder `memory.embedder` names: the built-in one, or OpenAI-compatible embeddings
/// (384 dimensions, so indexes stay interchangeable with the local embedder and Vectorize).
fn embedder_from_config(
    platform: &Platform,
    config: &Config,
    env: &Env,
) -> Result<Arc<dyn EmbeddingProvider>, ConfigError> {
    if config.memory.embedder != "openai" {
        return Ok(Arc::new(LocalEmbedder::default()));
    }
    let api_key = env.secret("OPENAI_API_KEY");
    if api_key.is_empty() {
        return Err(ConfigError {
            file: "main.yaml".into(),
            field: "memory.embedder".into(),
            message: "openai embeddings need OPENAI_API_KEY".into(),
        });
    }
    Ok(Arc::new(OpenAiEmbeddings {
        http: platform.http.clone(),
        base_url: env
            .get("OPENAI_BASE_URL")
            .unwrap_or("https://api.openai.com/v1")
            .to_owned(),
        api_key,
        model: config.memory.embedding_model.clone(),
        dims: 384,
    }))
}

/// The chain of an agent: its `provider/model` entries whose provider is set up here (see
/// [`ProviderConfig::set_up`]), in the agent's order.
fn links(platform: &Platform, config: &Config, models: &[String], env: &Env) -> Vec<Link> {
    let mut out = Vec::new();
    for m in models {
        let Some((pid, model)) = m.split_once('/') else {
            continue;
        };
        let Some(p) = config.providers.get(pid) else {
            continue;
        };
        if !p.set_up(env) {
            continue;
        }
        let key = p.api_key_env.as_deref().map(|k| env.secret(k));
        out.push(Link {
            label: m.clone(),
            provider: provider(platform.http.clone(), p, key.unwrap_or_default(), env),
            model: model.to_owned(),
            attempts: p.attempts,
            price: p.prices.get(model).copied(),
            vision: p.sees_images(model),
            reads_pdf: reads_pdf(p, env),
        });
    }
    out
}

/// Whether the provider reads PDFs given in a message: Anthropic, Gemini, and OpenAI itself
/// (not every OpenAI-compatible server does).
fn reads_pdf(p: &ProviderConfig, env: &Env) -> bool {
    match p.kind {
        ProviderKind::Anthropic | ProviderKind::Gemini => true,
        ProviderKind::Openai => {
            let base = p
                .base_url_env
                .as_deref()
                .and_then(|e| env.get(e))
                .or(p.base_url.as_deref())
                .unwrap_or(openai::DEFAULT_BASE_URL);
            base.starts_with("https://api.openai.com/")
        }
    }
}

/// Whether provider `p` takes `key`, by its cheapest call ([`Provider::check_key`]): what
/// `clawless init` asks before it writes a key down. The base URL is `p`'s, or its variable's
/// in `env`.
pub async fn check_provider_key(
    http: Arc<dyn clawless_platform::Http>,
    p: &ProviderConfig,
    key: &str,
    env: &Env,
) -> Result<(), crate::llm::LlmError> {
    provider(http, p, Secret::new(key), env).check_key().await
}

fn provider(
    http: Arc<dyn clawless_platform::Http>,
    p: &ProviderConfig,
    key: Secret,
    env: &Env,
) -> Arc<dyn Provider> {
    let timeout = Duration::from_secs(p.timeout_secs);
    let base = p
        .base_url_env
        .as_deref()
        .and_then(|e| env.get(e))
        .map(str::to_owned)
        .or_else(|| p.base_url.clone());
    match p.kind {
        ProviderKind::Anthropic => Arc::new(anthropic::Anthropic {
            http,
            base_url: base.unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.into()),
            api_key: key,
            timeout,
            cache: Refusable::new(p.cache.breakpoints.then_some(p.cache.ttl)),
        }),
        ProviderKind::Openai => Arc::new(openai::OpenAi {
            http,
            base_url: base.unwrap_or_else(|| openai::DEFAULT_BASE_URL.into()),
            api_key: key,
            timeout,
            cache_key: Refusable::new(p.cache.key.then_some(())),
        }),
        ProviderKind::Gemini => Arc::new(gemini::Gemini {
            http,
            base_url: base.unwrap_or_else(|| gemini::DEFAULT_BASE_URL.into()),
            api_key: key,
            timeout,
        }),
    }
}

#[cfg(test)]
mod tests;
