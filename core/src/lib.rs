//! clawless core: the whole assistant, platform-agnostic. It reaches storage, files, HTTP and
//! time only through the ports of `clawless-platform`, and depends on no runtime crate, so the
//! native binary, the Cloudflare Worker and the Lambda run this same code.
//!
//! # Layout
//! - [`app`]: `App`, the façade every shell calls; [`assemble`] builds it from config + env +
//!   ports.
//! - [`ingress`]: the ack path: check, parse once, classify, store in the inbox.
//! - [`drain`]: the work after the ack: a lane's jobs in order under its lease; the sweep.
//! - [`admin`]: what a shell's command line and set-up ask (webhooks, sessions, polling);
//!   [`admin_http`]: the serverless shells' `/admin/audit` endpoint.
//! - [`turn`]: processing one inbox job: decide (access, group gating, commands), the agent
//!   turn, the checkpoint, delivery.
//! - [`upgrade`]: the store's layout version, checked at start, and the steps up to it.
//! - [`keys`]: every Kv key, built in one place; [`ids`]: the typed names keys are built
//!   from (connector, lane, session key, memory scope).
//! - [`pairing`]: people the owner lets in with a one-time code, kept in the Kv beside the
//!   configured ones.
//! - [`inbox`]: the durable inbox: exactly-once, in-order per chat, leases, retries.
//! - [`schedule`]: reminders and scheduled tasks: records, the due index, cron, time zones;
//!   [`fire`]: firing what is due through the inbox, exactly once.
//! - [`agent`]: the model ↔ tools loop; [`spawn`]: sub-agents, run as tools.
//! - [`llm`]: message model, Anthropic, OpenAI-compatible and Gemini adapters, the retrying
//!   fallback chain.
//! - [`tools`]: the tool registry and built-in tools; [`level`]: what a tool can affect.
//!   [`mcp`]: the MCP client, whose servers' tools join an agent's for a turn.
//! - [`skills`]: skills (AgentSkills folders): where they come from, which an agent is
//!   offered, the system prompt's list of them.
//! - [`memory`]: Markdown memory per person and per group: chunking, embeddings, hybrid
//!   search, recall, summaries and consolidation.
//! - [`session`]: conversation history through Kv.
//! - [`audit`]: the audit trail of model calls, tool calls, approvals and commands.
//! - [`usage`]: tokens and spend per person, chat and everyone; the spend caps.
//! - [`shell`]: what every shell shares: the secret header, the body cap, routing.
//! - [`telegram`]: update types, the Bot API client, Markdown → HTML and splitting.
//! - [`calendar`]: days since the epoch to dates and back (daily notes, zones, cron).
//! - [`config`]: YAML config into validated types. [`env`]: settings and secrets from the
//!   target. [`secret`]: `Secret`, never printed.

pub mod admin;
pub mod admin_http;
pub mod agent;
pub mod allowance;
pub mod app;
#[cfg(feature = "archive")]
pub mod archive;
pub mod assemble;
pub mod audit;
pub mod calendar;
pub mod config;
pub mod connector;
pub mod doctor;
pub mod drain;
pub mod env;
pub mod events;
pub mod fire;
pub mod front;
pub mod hooks;
pub mod ids;
pub mod inbox;
pub mod ingress;
pub mod keys;
pub mod level;
pub mod llm;
pub mod local;
pub mod mcp;
pub mod media;
pub mod memory;
pub mod menu;
pub mod observe;
pub mod pairing;
pub mod panel;
pub mod schedule;
pub mod secret;
pub mod session;
pub mod shell;
pub mod signing;
pub mod skills;
pub mod spawn;
pub(crate) mod task;
pub mod telegram;
pub mod template;
pub mod tools;
pub mod turn;
pub mod upgrade;
pub mod usage;
pub mod watch;

pub use app::App;
pub use config::{Config, ConfigError, ConfigFiles};
pub use env::Env;
pub use ids::{ConnectorId, Lane, Scope, SessionKey};
pub use inbox::{Drained, Swept};
pub use ingress::WebhookReply;
pub use secret::Secret;
