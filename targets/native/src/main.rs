//! `clawless`: the native assistant. `clawless --help` lists the commands; each has its own
//! `--help`.
//!
//! Exit codes: 0 done; 1 it failed (Telegram, storage, I/O); 2 the command line was wrong
//! (including an unknown `--connector`); 3 the configuration is invalid or a setting is
//! missing.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use clawless_core::admin::AdminError;
use clawless_native::{listen, poll, runner, server, setup};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

mod admin_cli;
mod chat_cli;
mod hooks_cli;
use admin_cli::{audit, config_check, doctor, memory, pairing, skills, webhook};

const GRACE: Duration = Duration::from_secs(20);

/// Exit code for a wrong command line (clap uses it too), e.g. an unknown `--connector`.
const EXIT_USAGE: u8 = 2;
/// Exit code for an invalid configuration or a missing setting.
const EXIT_CONFIG: u8 = 3;

/// A failure that is the configuration's or the environment's, not the world's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ConfigProblem(String);

use clawless_native::cli::{Cli, Command, ConfigAction, HooksAction, SkillsAction, WebhookAction};

fn main() -> ExitCode {
    // The sandbox helper (see `sandbox.rs`): fences itself in and becomes the command.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "__sandbox") {
        return ExitCode::from(clawless_native::sandbox::main(&args[2..]));
    }
    if let Ok(exe) = std::env::current_exe() {
        clawless_native::sandbox::set_exe(exe);
    }
    let cli = Cli::parse(); // exits with 2 on a wrong command line
    let filter =
        clawless_platform::native_io::log_filter(std::env::var("RUST_LOG").ok().as_deref())
            .unwrap_or_else(|e| {
                eprintln!("warning: {e}; logging at info");
                Targets::new().with_default(tracing::level_filters::LevelFilter::INFO)
            });
    match &cli.command {
        // The cockpit owns the terminal: the log goes to a file beside it.
        Some(Command::Tui { .. }) => {
            let path = std::env::temp_dir().join("clawless-tui.log");
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(file) => tracing_subscriber::fmt()
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file))
                    .finish()
                    .with(filter)
                    .init(),
                Err(e) => {
                    eprintln!("error: opening the log {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .finish()
            .with(filter)
            .init(),
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(dispatch(
        cli.command.unwrap_or(Command::Run { listen: None }),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            match e.downcast_ref::<AdminError>() {
                Some(AdminError::UnknownConnector(..)) => ExitCode::from(EXIT_USAGE),
                Some(AdminError::NotSet(_)) => ExitCode::from(EXIT_CONFIG),
                _ if e.downcast_ref::<ConfigProblem>().is_some() => ExitCode::from(EXIT_CONFIG),
                _ if e
                    .downcast_ref::<clawless_native::remote::NoToken>()
                    .is_some() =>
                {
                    ExitCode::from(EXIT_CONFIG)
                }
                _ => ExitCode::FAILURE,
            }
        }
    }
}

async fn dispatch(command: Command) -> Result<()> {
    match command {
        Command::Run { listen } => run_polling(listen.as_deref()).await,
        Command::Serve { listen } => serve(&listen).await,
        Command::Health { addr } => {
            clawless_native::health::check(&addr).await?;
            println!("ok");
            Ok(())
        }
        Command::Chat { connector } => chat_cli::chat(connector.as_deref()).await,
        Command::Tui {
            connector,
            serve,
            remote,
        } => match remote {
            Some(base) => {
                let source = clawless_native::tui::Source::Remote {
                    base: base.clone(),
                    env: setup::env(),
                };
                clawless_native::tui::run(source, format!("attaching to {base}")).await
            }
            None => tui(connector.as_deref(), serve.as_deref()).await,
        },
        Command::Config {
            action: ConfigAction::Check,
        } => config_check().await,
        Command::Doctor {
            json,
            remote,
            security,
        } => doctor(json, remote.as_deref(), security).await,
        Command::Init {
            token,
            owner,
            provider,
            key,
            env_file,
        } => {
            let env = setup::env();
            let (config, _) =
                setup::load_config(&env).map_err(|e| ConfigProblem(format!("{e:#}")))?;
            let given = clawless_native::init::Answers {
                token,
                owner,
                provider,
                key,
            };
            let (stdin, mut stdout) = (std::io::stdin(), std::io::stdout());
            let mut io = clawless_native::init::Io {
                input: &mut stdin.lock(),
                output: &mut stdout,
                hide: clawless_native::init::interactive(),
            };
            clawless_native::init::run(&mut io, given, &env, &config, &env_file).await
        }
        Command::Webhook {
            action: WebhookAction::Set {
                remote: Some(base), ..
            },
            ..
        } => clawless_native::remote::setup(&setup::env(), &base).await,
        Command::Webhook { action, connector } => webhook(action, connector.as_deref()).await,
        Command::Memory { action, connector } => memory(action, connector.as_deref()).await,
        Command::Hooks {
            action: HooksAction::Test { name, url },
        } => hooks_cli::test(&name, &url).await,
        Command::Export {
            file,
            person,
            connector,
            remote: Some(base),
        } => {
            let mut query = Vec::new();
            if let Some(user) = person {
                query.push(format!("person={user}"));
            }
            if let Some(c) = connector {
                query.push(format!("connector={c}"));
            }
            clawless_native::archive_cli::export_remote(
                &setup::env(),
                &base,
                &query.join("&"),
                &file,
            )
            .await
        }
        Command::Export {
            file,
            person,
            connector,
            remote: None,
        } => {
            let n = build().await?;
            let whom = match person {
                None => clawless_core::archive::Whom::Bot,
                Some(user) => clawless_core::archive::Whom::Person {
                    connector: n.app.admin().connector_id(connector.as_deref())?,
                    user,
                },
            };
            clawless_native::archive_cli::export(&n.app, &whom, &file).await
        }
        Command::Import {
            path,
            overwrite,
            remote: Some(base),
            ..
        } => {
            clawless_native::archive_cli::import_remote(&setup::env(), &base, &path, overwrite)
                .await
        }
        Command::Import {
            path,
            from: Some(_),
            connector,
            ..
        } => {
            let n = build().await?;
            let id = n.app.admin().connector_id(connector.as_deref())?;
            clawless_native::openclaw_cli::import_openclaw(&n.app, &setup::env(), &path, &id).await
        }
        Command::Import {
            path, overwrite, ..
        } => {
            let n = build().await?;
            clawless_native::archive_cli::import(&n.app, &path, overwrite).await
        }
        Command::Pairing { action, connector } => pairing(action, connector.as_deref()).await,
        Command::Skills {
            action: SkillsAction::List,
            connector,
        } => skills(connector.as_deref()).await,
        Command::Audit {
            chat,
            since,
            json,
            connector,
            remote: Some(url),
        } => {
            let filter = clawless_native::remote::AuditFilter {
                chat,
                since,
                connector,
            };
            clawless_native::remote::audit(&setup::env(), &url, &filter, json).await
        }
        Command::Audit {
            chat,
            since,
            json,
            connector,
            remote: None,
        } => audit(chat, since, json, connector.as_deref()).await,
    }
}

/// Builds the app, a failure being the configuration's.
async fn build() -> Result<setup::Native> {
    let env = setup::env();
    let (config, source) = setup::load_config(&env).map_err(|e| ConfigProblem(format!("{e:#}")))?;
    setup::build_with(&env, config, source).await
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested");
}

fn require_ready(n: &setup::Native) -> Result<()> {
    let missing = n.app.missing_settings();
    if !missing.is_empty() {
        return Err(ConfigProblem(format!(
            "cannot start, set these first:\n  - {}\nSee README.md.",
            missing.join("\n  - ")
        ))
        .into());
    }
    for line in n
        .app
        .answering_models()
        .into_iter()
        .chain(n.app.voice_services())
    {
        tracing::info!("{line}");
    }
    for id in n.app.admin().connectors_without_users() {
        tracing::warn!(
            connector = %id,
            "no allowed users: strangers get a pairing code, which only `clawless pairing approve` can approve; set TELEGRAM_ALLOWED_USERS or allowed_users in main.yaml"
        );
    }
    Ok(())
}

async fn run_polling(listen: Option<&str>) -> Result<()> {
    let n = build().await?;
    require_ready(&n)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (kicker, runner) = runner::new(n.app.clone());
    // Hooks, the panel and /metrics beside polling, when asked.
    let mut listening = None;
    if let Some(addr) = listen {
        let limits = setup::limits(&setup::env()).map_err(|e| ConfigProblem(format!("{e:#}")))?;
        let webhook = server::Webhook::new(n.app.clone(), kicker.clone(), limits.body_timeout);
        let mut rx = stop_rx.clone();
        let stop = async move {
            let _ = rx.changed().await;
        };
        let bound = listen::beside(addr, webhook, limits, stop).await;
        listening = Some(bound.with_context(|| format!("binding {addr}"))?);
    }
    let mut pollers = Vec::new();
    for id in n.app.admin().connector_ids() {
        poll::check_no_webhook(&n.app, &id).await?;
        let mut rx = stop_rx.clone();
        pollers.push(tokio::spawn(poll::run(
            n.app.clone(),
            id,
            kicker.clone(),
            async move {
                let _ = rx.changed().await;
            },
        )));
    }
    tracing::info!(config = %n.config_source, "clawless is running with long polling; Ctrl-C stops");
    let mut rx = stop_rx.clone();
    let run = tokio::spawn(runner.run(
        async move {
            let _ = rx.changed().await;
        },
        GRACE,
    ));
    let backups = spawn_backups(&n, stop_rx.clone());
    shutdown_signal().await;
    let _ = stop_tx.send(true);
    for p in pollers.into_iter().chain(backups) {
        let _ = p.await;
    }
    if let Some(l) = listening {
        let _ = l.await;
    }
    let _ = run.await;
    Ok(())
}

async fn serve(addr: &str) -> Result<()> {
    let n = build().await?;
    let serving = start_serving(&n, addr).await?;
    shutdown_signal().await;
    serving.stop().await;
    Ok(())
}

/// The backups `backup:` sets, beside the bot until `stop` changes.
fn spawn_backups(
    n: &setup::Native,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let backups = n.backups.clone()?;
    tracing::info!(dir = %backups.dir.display(), every_s = backups.every.as_secs(), keep = backups.keep, "backups on");
    Some(tokio::spawn(backups.run(n.app.clone(), async move {
        let _ = stop.changed().await;
    })))
}

/// Webhooks served and the runner running, until [`Serving::stop`].
struct Serving {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    local: std::net::SocketAddr,
}

impl Serving {
    /// The listener and the runner wind down side by side: within the shutdown deadline and
    /// the runner's grace, whatever clients do.
    async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

async fn start_serving(n: &setup::Native, addr: &str) -> Result<Serving> {
    let limits = setup::limits(&setup::env()).map_err(|e| ConfigProblem(format!("{e:#}")))?;
    require_ready(n)?;
    if let Some(env) = n.app.admin().missing_webhook_secrets().first() {
        return Err(ConfigProblem(format!("set {env} (any random string) before serving webhooks; `clawless webhook set` sends it to Telegram")).into());
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (kicker, runner) = runner::new(n.app.clone());
    let mut rx = stop_rx.clone();
    let run = tokio::spawn(runner.run(
        async move {
            let _ = rx.changed().await;
        },
        GRACE,
    ));
    tracing::info!(%local, config = %n.config_source, "clawless serving webhooks at POST /telegram/<connector>");
    let mut rx = stop_rx.clone();
    let webhook = server::Webhook::new(n.app.clone(), kicker, limits.body_timeout);
    // On stop the listener and the runner wind down side by side: within the shutdown
    // deadline and the runner's grace, whatever clients do.
    let server = tokio::spawn(listen::serve(listener, webhook, limits, async move {
        let _ = rx.changed().await;
    }));
    let mut tasks = vec![
        tokio::spawn(async move {
            let _ = server.await;
        }),
        tokio::spawn(async move {
            let _ = run.await;
        }),
    ];
    tasks.extend(spawn_backups(n, stop_rx.clone()));
    Ok(Serving {
        stop: stop_tx,
        tasks,
        local,
    })
}

/// `clawless tui`: the cockpit, with the bot serving webhooks beside it given `serve`.
async fn tui(connector: Option<&str>, serve: Option<&str>) -> Result<()> {
    let n = build().await?;
    let connector = n.app.admin().connector_id(connector)?;
    let serving = match serve {
        Some(addr) => Some(start_serving(&n, addr).await?),
        None => None,
    };
    let log = std::env::temp_dir().join("clawless-tui.log");
    let mut status = format!("log: {}", log.display());
    if let Some(s) = &serving {
        status = format!("serving webhooks at {} · {status}", s.local);
    }
    if !n.app.admin().has_model() {
        status = format!("no model key set: the chat cannot answer · {status}");
    }
    let source = clawless_native::tui::Source::Local {
        app: n.app.clone(),
        connector,
    };
    let shown = clawless_native::tui::run(source, status).await;
    if let Some(s) = serving {
        s.stop().await;
    }
    shown
}
