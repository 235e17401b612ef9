//! `clawless`: the native assistant.
//!
//! - `clawless` (no arguments): the bot with long polling; no public URL needed.
//! - `clawless serve [--listen ADDR]`: the webhook server.
//! - `clawless chat`: a terminal conversation with the same agent.
//! - `clawless config check`: validate the config and say what is missing.
//! - `clawless webhook set <url> | info | delete`.
//! - `clawless memory search "<query>"`, `clawless memory reindex`: the memory of each bot.

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clawless_native::{listen, poll, runner, server, setup};

const USAGE: &str = "usage: clawless [serve [--listen ADDR] | chat | config check | webhook set <url> | webhook info | webhook delete
                | memory search \"<query>\" | memory reindex]

Environment: TELEGRAM_BOT_TOKEN, ANTHROPIC_API_KEY or OPENAI_API_KEY (and *_BASE_URL),
TELEGRAM_ALLOWED_USERS, TELEGRAM_WEBHOOK_SECRET (serve), CLAWLESS_CONFIG, CLAWLESS_DATA.";

const GRACE: Duration = Duration::from_secs(20);

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    rt.block_on(async {
        match words.as_slice() {
            [] => run_polling().await,
            ["serve"] => serve("127.0.0.1:8080").await,
            ["serve", "--listen", addr] => serve(addr).await,
            ["chat"] => chat().await,
            ["config", "check"] => config_check(),
            ["webhook", "set", url] => webhook_set(url).await,
            ["webhook", "info"] => webhook_info().await,
            ["webhook", "delete"] => webhook_delete().await,
            ["memory", "search", query] => memory_search(query).await,
            ["memory", "reindex"] => memory_reindex().await,
            ["help"] | ["--help"] | ["-h"] => {
                println!("{USAGE}");
                Ok(())
            }
            _ => bail!("{USAGE}"),
        }
    })
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
        bail!(
            "cannot start, set these first:\n  - {}\nSee README.md.",
            missing.join("\n  - ")
        );
    }
    for c in n.app.connectors.values().filter(|c| c.allowed.is_empty()) {
        tracing::warn!(
            connector = %c.id,
            "no allowed users: everyone gets only their id back; set TELEGRAM_ALLOWED_USERS or allowed_users in main.yaml"
        );
    }
    Ok(())
}

async fn run_polling() -> Result<()> {
    let n = setup::build(&setup::env())?;
    require_ready(&n)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (kicker, runner) = runner::new(n.app.clone(), Some(n.kv.clone()));
    let mut pollers = Vec::new();
    for id in n.app.connectors.keys() {
        poll::check_no_webhook(&n.app, id).await?;
        let mut rx = stop_rx.clone();
        pollers.push(tokio::spawn(poll::run(
            n.app.clone(),
            id.clone(),
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
    shutdown_signal().await;
    let _ = stop_tx.send(true);
    for p in pollers {
        let _ = p.await;
    }
    let _ = run.await;
    Ok(())
}

async fn serve(addr: &str) -> Result<()> {
    let env = setup::env();
    let limits = setup::limits(&env)?;
    let n = setup::build(&env)?;
    require_ready(&n)?;
    for c in n.app.connectors.values() {
        if c.secret.is_empty() {
            bail!("set {} (any random string) before serving webhooks; `clawless webhook set` sends it to Telegram", c.secret_env);
        }
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (kicker, runner) = runner::new(n.app.clone(), Some(n.kv.clone()));
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
    shutdown_signal().await;
    let _ = stop_tx.send(true);
    let _ = server.await;
    let _ = run.await;
    Ok(())
}

async fn chat() -> Result<()> {
    let n = setup::build(&setup::env())?;
    if n.app
        .connectors
        .values()
        .all(|c| c.agent.chain.links.is_empty())
    {
        bail!("set ANTHROPIC_API_KEY or OPENAI_API_KEY first");
    }
    let connector = n
        .app
        .connectors
        .keys()
        .next()
        .cloned()
        .unwrap_or_else(|| "main".into());
    let session = "local:terminal";
    println!("clawless chat — /new starts over, Ctrl-D quits");
    let stdin = std::io::stdin();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/new" {
            clawless_core::session::clear(&*n.app.platform.kv, session)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("(fresh conversation)");
            continue;
        }
        match n.app.chat_local(&connector, session, line).await {
            Ok(reply) => println!("{reply}\n"),
            Err(e) => println!("(error: {e})\n"),
        }
    }
}

fn config_check() -> Result<()> {
    let env = setup::env();
    let (config, source) = setup::load_config(&env)?;
    println!(
        "config OK ({source}): {} connector(s), {} agent(s), {} provider(s)",
        config.connectors.len(),
        config.agents.len(),
        config.providers.len()
    );
    let n = setup::build(&env)?;
    let missing = n.app.missing_settings();
    if missing.is_empty() {
        println!("environment OK");
    } else {
        println!("still to set:\n  - {}", missing.join("\n  - "));
    }
    Ok(())
}

fn first_connector(n: &setup::Native) -> Result<&clawless_core::app::Connector> {
    let c = n
        .app
        .connectors
        .values()
        .next()
        .context("no connector configured")?;
    if !c.token_set {
        bail!("set {} first", c.token_env);
    }
    Ok(c)
}

async fn webhook_set(url: &str) -> Result<()> {
    let n = setup::build(&setup::env())?;
    let c = first_connector(&n)?;
    if c.secret.is_empty() {
        bail!(
            "set {} first: Telegram will send it with every update",
            c.secret_env
        );
    }
    let full = if url.contains("/telegram/") {
        url.to_owned()
    } else {
        format!("{}/telegram/{}", url.trim_end_matches('/'), c.id)
    };
    c.bot
        .set_webhook(&full, &c.secret)
        .await
        .map_err(|e| anyhow::anyhow!("setWebhook: {e}"))?;
    println!("webhook set to {full}");
    Ok(())
}

async fn webhook_info() -> Result<()> {
    let n = setup::build(&setup::env())?;
    let info = first_connector(&n)?
        .bot
        .get_webhook_info()
        .await
        .map_err(|e| anyhow::anyhow!("getWebhookInfo: {e}"))?;
    println!("{}", serde_json::to_string_pretty(&info)?);
    Ok(())
}

async fn webhook_delete() -> Result<()> {
    let n = setup::build(&setup::env())?;
    first_connector(&n)?
        .bot
        .delete_webhook()
        .await
        .map_err(|e| anyhow::anyhow!("deleteWebhook: {e}"))?;
    println!("webhook deleted; `clawless` can now use long polling");
    Ok(())
}

async fn memory_reindex() -> Result<()> {
    let n = setup::build(&setup::env())?;
    for c in n.app.connectors.values() {
        let scope = c.tool_context().scope;
        let changed = n
            .app
            .memory
            .reindex(&scope)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        println!("{scope}: {changed} file(s) re-indexed");
    }
    Ok(())
}

async fn memory_search(query: &str) -> Result<()> {
    let n = setup::build(&setup::env())?;
    for c in n.app.connectors.values() {
        let scope = c.tool_context().scope;
        n.app
            .memory
            .reindex(&scope)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let hits = n
            .app
            .memory
            .search(&scope, query)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if hits.is_empty() {
            println!("{scope}: no matching memories");
        }
        for h in hits {
            println!(
                "{} lines {}-{} (score {:.2})\n{}\n",
                h.path, h.start_line, h.end_line, h.score, h.text
            );
        }
    }
    Ok(())
}
