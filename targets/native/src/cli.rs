//! The command line of `clawless`: every command and its flags (clap), each with the help
//! `clawless --help` shows. `main.rs` dispatches them.

use clap::{Parser, Subcommand};

/// `clawless --version`: the release and the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CLAWLESS_COMMIT"),
    ")"
);

/// The clawless assistant: a Telegram bot with memory and tools, on this machine.
///
/// Environment: TELEGRAM_BOT_TOKEN, one provider key (ANTHROPIC_API_KEY, OPENAI_API_KEY,
/// GEMINI_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY, …; and *_BASE_URL),
/// TELEGRAM_ALLOWED_USERS, TELEGRAM_WEBHOOK_SECRET (serve), CLAWLESS_CONFIG, CLAWLESS_DATA.
#[derive(Debug, Parser)]
#[command(name = "clawless", version = VERSION)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set up in a minute: the bot token, you as its owner (send it /start), a model key;
    /// each checked, then written to .env, which `clawless` reads at start.
    Init {
        /// The bot token (else asked; also read from TELEGRAM_BOT_TOKEN).
        #[arg(long, env = "TELEGRAM_BOT_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// The owner's Telegram user id (else found from the /start they send).
        #[arg(long)]
        owner: Option<i64>,
        /// The model provider, an id of config/providers.d (else asked).
        #[arg(long)]
        provider: Option<String>,
        /// The provider's key (else asked), or Ollama's base URL.
        #[arg(long)]
        key: Option<String>,
        /// Where to write.
        #[arg(long, default_value = crate::setup::ENV_FILE)]
        env_file: std::path::PathBuf,
    },
    /// Run the bot with long polling (the default): no public URL needed.
    Run {
        /// Also answer HTTP at this address: incoming webhooks (`POST /hooks/<name>`), the
        /// panel, /healthz and /metrics (Telegram's updates still come by polling).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Serve webhooks at POST /telegram/<connector>.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
    },
    /// Exit 0 if a `clawless serve` answers GET /healthz at ADDR, else 1 (a container's
    /// HEALTHCHECK: the image has no curl).
    Health {
        /// The address `serve` listens on, as seen from here.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
    },
    /// A conversation with the agent in this terminal (/new starts over, Ctrl-D quits).
    Chat {
        /// The bot whose agent to talk to (default: the only one).
        #[arg(long)]
        connector: Option<String>,
    },
    /// The terminal cockpit: a chat with the agent (streamed, tool calls in line) and live
    /// panels of what the bot does (sessions, inbox, runs, reminders, events by trace id).
    Tui {
        /// The bot whose agent to talk to (default: the only one).
        #[arg(long)]
        connector: Option<String>,
        /// Also serve Telegram's webhooks at this address (as `serve`), so the panels show
        /// the bot at work.
        #[arg(long, conflicts_with = "remote")]
        serve: Option<String>,
        /// Attach read-only to a deployment instead (a Worker's or a Lambda's base URL, or a
        /// `clawless serve`): its kept events and stores, with the token in
        /// CLAWLESS_ADMIN_TOKEN.
        #[arg(long)]
        remote: Option<String>,
    },
    /// Check the configuration and say which settings are still missing.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// What is wrong, if anything: the token, the webhook, each model's key, storage, the
    /// backlog and missing settings, one line per check (exit code 1 on a failure).
    Doctor {
        /// The checks as one JSON object.
        #[arg(long)]
        json: bool,
        /// The risky settings instead, each with its fix: the config (private addresses,
        /// shared memory, unsafe tools that do not ask), the secrets (webhook, admin token),
        /// and this machine (root, the sandbox, readable data or .env).
        #[arg(long, conflicts_with = "remote")]
        security: bool,
        /// Ask a deployed Worker or Lambda instead (its base URL): its `/admin/doctor`, with
        /// the token in CLAWLESS_ADMIN_TOKEN.
        #[arg(long)]
        remote: Option<String>,
    },
    /// Telegram's webhook for one bot.
    Webhook {
        #[command(subcommand)]
        action: WebhookAction,
        /// The bot (default: the only one).
        #[arg(long, global = true)]
        connector: Option<String>,
    },
    /// What the agent did: model calls, tool calls, approvals, commands (oldest first).
    Audit {
        /// Only this chat.
        #[arg(long)]
        chat: Option<i64>,
        /// How far back: `90s`, `30m`, `2h`, `7d`.
        #[arg(long, default_value = "24h", value_parser = clawless_core::audit::parse_window)]
        since: u64,
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        /// The bot (default: every bot).
        #[arg(long)]
        connector: Option<String>,
        /// Ask a deployed Worker or Lambda instead (its base URL): its `/admin/audit`, with
        /// the token in CLAWLESS_ADMIN_TOKEN.
        #[arg(long)]
        remote: Option<String>,
    },
    /// Who may talk to a bot: strangers' pairing codes, paired people (/pair and /users in
    /// Telegram do the same).
    Pairing {
        #[command(subcommand)]
        action: PairingAction,
        /// The bot (default: the only one).
        #[arg(long, global = true)]
        connector: Option<String>,
    },
    /// Skills: which each bot's agent is offered, and why the others are not.
    Skills {
        #[command(subcommand)]
        action: SkillsAction,
        /// The bot (default: every bot).
        #[arg(long, global = true)]
        connector: Option<String>,
    },
    /// Everything the bot keeps (memory, sessions, workspaces, reminders, pairings, usage,
    /// the audit trail), or one person's, as one archive any shell imports.
    Export {
        /// Where to write it (`-`: standard output).
        file: std::path::PathBuf,
        /// Only this person's data (a Telegram user id): their private chat, memory and
        /// workspace, reminders, usage.
        #[arg(long)]
        person: Option<i64>,
        /// The bot the person talks to (default: the only one).
        #[arg(long)]
        connector: Option<String>,
        /// Export a deployed Worker or Lambda instead (its base URL): its `/admin/export`,
        /// with the token in CLAWLESS_ADMIN_TOKEN.
        #[arg(long)]
        remote: Option<String>,
    },
    /// Merge an archive into this bot (what the store holds already is kept unless
    /// --overwrite); or, with --from openclaw, OpenClaw's folder.
    Import {
        /// The archive (`-`: standard input), or OpenClaw's folder.
        path: std::path::PathBuf,
        /// Read another assistant's data instead: `openclaw` (its folder ~/.openclaw, or its
        /// workspace ~/.openclaw/workspace, whose parent is then read too).
        #[arg(long, value_parser = ["openclaw"])]
        from: Option<String>,
        /// Replace what this store holds under the same name.
        #[arg(long, conflicts_with = "from")]
        overwrite: bool,
        /// The bot whose owner gets OpenClaw's notes and conversations (default: the only one).
        #[arg(long)]
        connector: Option<String>,
        /// Import into a deployed Worker or Lambda instead (its base URL): its
        /// `/admin/import`, with the token in CLAWLESS_ADMIN_TOKEN.
        #[arg(long, conflicts_with = "from")]
        remote: Option<String>,
    },
    /// Incoming webhooks (`hooks:` in main.yaml).
    Hooks {
        #[command(subcommand)]
        action: HooksAction,
    },
    /// The assistant's memory.
    Memory {
        #[command(subcommand)]
        action: MemoryAction,
        /// The bot (default: every bot).
        #[arg(long, global = true)]
        connector: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Validate the config and the environment.
    Check,
}

#[derive(Debug, Subcommand)]
pub enum WebhookAction {
    /// Point Telegram at URL (/telegram/<connector> is appended unless present); with
    /// --remote, a deployed Worker or Lambda points it at itself and sets the command menu.
    Set {
        #[arg(required_unless_present = "remote", conflicts_with = "remote")]
        url: Option<String>,
        /// The deployment's base URL: its `POST /admin/setup`, with the token in
        /// CLAWLESS_ADMIN_TOKEN.
        #[arg(long)]
        remote: Option<String>,
    },
    /// What Telegram knows of the webhook.
    Info,
    /// Remove the webhook (long polling can then run).
    Delete,
}

#[derive(Debug, Subcommand)]
pub enum PairingAction {
    /// The configured users, the paired people and the codes waiting for approval.
    List,
    /// Let in the person a stranger's code was given to.
    Approve { code: String },
    /// Unpair a person (a Telegram user id): they are a stranger again.
    Remove { user: i64 },
}

#[derive(Debug, Subcommand)]
pub enum SkillsAction {
    /// Each skill of config/skills/ and of the data directory's files/skills/, with its
    /// source and whether it is offered (or why not).
    List,
}

#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// Send hook NAME a sample delivery, with its secret from its secret_env, as a caller
    /// would, and say what the answer means.
    Test {
        /// The hook's name (its URL is /hooks/NAME).
        name: String,
        /// The running bot's base URL (`clawless serve`, `clawless run --listen`, a Lambda's
        /// Function URL, a Worker's URL).
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum MemoryAction {
    /// Search a memory (default: the owner's, the first allowed user's).
    Search {
        query: String,
        /// Search this user's memory instead.
        #[arg(long, conflicts_with = "group")]
        user: Option<i64>,
        /// Search this group's memory instead.
        #[arg(long)]
        group: Option<i64>,
    },
    /// Re-index every memory file that changed.
    Reindex,
}
