//! The command line's commands that work on the configuration and the data directory, with
//! no bot running: `config check`, `webhook`, `audit`, `doctor`, `pairing`, `memory`,
//! `skills`.

use anyhow::{Context, Result};
use clawless_core::memory::scope::MemoryOwner;
use clawless_native::cli::{MemoryAction, PairingAction, WebhookAction};
use clawless_native::setup;

use super::{build, ConfigProblem};

pub(crate) async fn config_check() -> Result<()> {
    let env = setup::env();
    let (config, source) = setup::load_config(&env).map_err(|e| ConfigProblem(format!("{e:#}")))?;
    println!(
        "config OK ({source}): {} connector(s), {} agent(s), {} provider(s)",
        config.connectors.len(),
        config.agents.len(),
        config.providers.len()
    );
    let exec_agents: Vec<&String> = config
        .agents
        .iter()
        .filter(|(_, a)| a.tools.iter().any(|t| t == "exec"))
        .map(|(id, _)| id)
        .collect();
    if !exec_agents.is_empty() {
        println!(
            "note: exec (listed by {exec_agents:?}) runs only in this native binary; the \
             Worker and the Lambda do not offer it"
        );
    }
    let n = setup::build_with(&env, config, source).await?;
    for line in n.app.answering_models() {
        println!("{line}");
    }
    for line in n.app.voice_services() {
        println!("{line}");
    }
    for note in n.app.unoffered_tools() {
        println!("note: {note}");
    }
    if n.app.admin().offers("exec") {
        let sandbox = clawless_native::fence::check();
        let mark = match sandbox.status {
            clawless_core::doctor::Status::Ok => "note",
            _ => "warning",
        };
        println!("{mark}: {}", sandbox.detail);
    }
    let missing = n.app.missing_settings();
    if missing.is_empty() {
        println!("environment OK");
        Ok(())
    } else {
        println!("still to set:\n  - {}", missing.join("\n  - "));
        Err(ConfigProblem(format!("{} setting(s) missing", missing.len())).into())
    }
}

pub(crate) async fn webhook(action: WebhookAction, connector: Option<&str>) -> Result<()> {
    let n = build().await?;
    let id = n.app.admin().connector_id(connector)?;
    match action {
        WebhookAction::Set { url, .. } => {
            let full = n
                .app
                .admin()
                .set_webhook(&id, url.as_deref().unwrap_or(""))
                .await?;
            println!("webhook set to {full}");
            let origin = full.split("/telegram/").next().unwrap_or("");
            if origin.starts_with("https://") {
                match n.app.admin().set_panel_button(&id, origin).await {
                    Ok(url) => println!("the menu button opens the panel at {url}"),
                    Err(e) => println!("the panel's menu button was not set: {e}"),
                }
            }
        }
        WebhookAction::Info => {
            let info = n.app.admin().webhook_info(&id).await?;
            println!("{}", serde_json::to_string_pretty(&info)?);
        }
        WebhookAction::Delete => {
            n.app.admin().delete_webhook(&id).await?;
            println!("webhook deleted; `clawless` can now use long polling");
        }
    }
    Ok(())
}

pub(crate) async fn audit(
    chat: Option<i64>,
    since: u64,
    json: bool,
    connector: Option<&str>,
) -> Result<()> {
    let n = build().await?;
    let ids = match connector {
        Some(c) => vec![n.app.admin().connector_id(Some(c))?],
        None => n.app.admin().connector_ids(),
    };
    for id in ids {
        let entries = n
            .app
            .admin()
            .audit_entries(&id, since, chat, 10_000)
            .await
            .with_context(|| format!("reading the audit trail of {id}"))?;
        for e in entries {
            if json {
                println!("{}", serde_json::to_string(&e)?);
            } else {
                println!("{id} chat {} {}", e.chat, clawless_core::audit::line(&e));
            }
        }
    }
    Ok(())
}

/// `clawless doctor`: the checks here, or a deployment's; exit code 1 on a failure.
pub(crate) async fn doctor(json: bool, remote: Option<&str>, security: bool) -> Result<()> {
    use clawless_core::doctor::{Delivery, Status};
    let checks = match remote {
        _ if security => {
            let env = setup::env();
            let app = build().await?.app;
            let mut checks = app.admin().security_checks();
            checks.extend(setup::machine_checks(&env, app.admin().offers("exec")));
            checks
        }
        Some(base) => clawless_native::remote::doctor(&setup::env(), base).await?,
        None => {
            let mut checks = build().await?.app.admin().doctor(Delivery::Either).await;
            checks.push(clawless_native::fence::check());
            checks
        }
    };
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if json {
        println!(
            "{}",
            serde_json::json!({"ok": failed == 0, "checks": checks})
        );
    } else {
        for line in clawless_native::remote::doctor_lines(&checks) {
            println!("{line}");
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} check(s) failed");
    }
    Ok(())
}

pub(crate) async fn pairing(action: PairingAction, connector: Option<&str>) -> Result<()> {
    let n = build().await?;
    let id = n.app.admin().connector_id(connector)?;
    let said = match &action {
        PairingAction::List => Some(clawless_native::pairing::list(&n.app, &id).await?),
        PairingAction::Approve { code } => {
            clawless_native::pairing::approve(&n.app, &id, code).await?
        }
        PairingAction::Remove { user } => {
            clawless_native::pairing::remove(&n.app, &id, *user).await?
        }
    };
    match (said, action) {
        (Some(text), _) => println!("{}", text.trim_end()),
        (None, PairingAction::Approve { code }) => anyhow::bail!(
            "no code {code:?} is waiting on {id}: used, expired (codes last an hour) or mistyped"
        ),
        (None, _) => anyhow::bail!(
            "that person is not paired on {id} (configured users are changed in the config)"
        ),
    }
    Ok(())
}

pub(crate) async fn memory(action: MemoryAction, connector: Option<&str>) -> Result<()> {
    let n = build().await?;
    let ids = match connector {
        Some(c) => vec![n.app.admin().connector_id(Some(c))?],
        None => n.app.admin().connector_ids(),
    };
    for id in ids {
        let changed = n
            .app
            .admin()
            .reindex_memory(&id)
            .await
            .with_context(|| format!("re-indexing the memory of {id}"))?;
        let MemoryAction::Search { query, user, group } = &action else {
            println!("{id}: {changed} file(s) re-indexed");
            continue;
        };
        let owner = match (user, group) {
            (Some(u), _) => Some(MemoryOwner::User(*u)),
            (_, Some(g)) => Some(MemoryOwner::Group(*g)),
            _ => None,
        };
        let hits = n
            .app
            .admin()
            .search_memory(&id, owner, query)
            .await
            .with_context(|| format!("searching the memory of {id}"))?;
        if hits.is_empty() {
            println!("{id}: no matching memories");
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

pub(crate) async fn skills(connector: Option<&str>) -> Result<()> {
    let n = build().await?;
    let ids = match connector {
        Some(c) => vec![n.app.admin().connector_id(Some(c))?],
        None => n.app.admin().connector_ids(),
    };
    for id in ids {
        print!("{}", clawless_native::skills::list(&n.app, &id).await?);
    }
    Ok(())
}
