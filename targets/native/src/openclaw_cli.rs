//! `clawless import --from openclaw DIR`: OpenClaw's state directory (`~/.openclaw`) or its
//! workspace (`~/.openclaw/workspace`) read ([`read`]), mapped by
//! `clawless_core::archive::openclaw`, and written: the persona as agent `openclaw` of the
//! config directory, offered in its routing ([`agent`]); the notes into that agent's memory
//! of the owner (the default agent's when there is no persona), the skills, the time zone and
//! the conversations into the store. Everything not carried is listed with why.

pub mod agent;
pub mod read;

use std::path::{Path, PathBuf};

use anyhow::Result;
use clawless_core::archive::openclaw;
use clawless_core::ids::ConnectorId;
use clawless_core::App;

/// The config directory agents are written to: `CLAWLESS_CONFIG`, else `./config`.
fn config_dir(env: &clawless_core::env::Env) -> Option<PathBuf> {
    env.get("CLAWLESS_CONFIG").map(PathBuf::from).or_else(|| {
        Path::new("config")
            .is_dir()
            .then(|| PathBuf::from("config"))
    })
}

/// `clawless import --from openclaw DIR` for `connector`; says what it did.
pub async fn import_openclaw(
    app: &App,
    env: &clawless_core::env::Env,
    dir: &Path,
    connector: &ConnectorId,
) -> Result<()> {
    let found = read::read(dir)?;
    let mut plan = openclaw::plan(&found.files);
    plan.unmapped.extend(found.unread);
    let admin = app.admin();
    let (models, not) = admin.openclaw_models(&plan);
    plan.unmapped.extend(not);
    let default = admin.default_agent_config(connector).map(|a| a.id);
    let mut agent = default.clone().unwrap_or_default();
    let mut said = Vec::new();
    match (&plan.persona, config_dir(env)) {
        (Some(persona), Some(config)) => {
            let wrote = agent::write(app, connector, &config, persona, &models)?;
            said.push(format!("{wrote} (from {})", plan.persona_from.join(", ")));
            match agent::offer(&config, connector, agent::ID) {
                Ok(lines) => said.extend(lines),
                Err(e) => plan
                    .unmapped
                    .push(format!("/agent {} is not offered: {e:#}", agent::ID)),
            }
            agent = agent::ID.to_owned();
        }
        (Some(_), None) => plan.unmapped.push(format!(
            "{}: no config directory to write an agent into (set CLAWLESS_CONFIG); the notes go to the default agent's memory",
            plan.persona_from.join(", ")
        )),
        (None, _) if !models.is_empty() => plan.unmapped.push(
            "openclaw.json agents.defaults.model: no persona files, so no agent of OpenClaw's here to give it to (the default agent keeps its models)".into(),
        ),
        (None, _) => {}
    }
    let done = admin.import_openclaw(&plan, connector, &agent).await?;
    println!(
        "memory: {} notes added, {} appended to, {} already there, in agent {}'s memory of the owner; {} indexed",
        done.notes_added, done.notes_appended, done.notes_same, done.agent, done.reindexed
    );
    println!(
        "skills: {} files added, {} already there",
        done.skill_files_added, done.skill_files_kept
    );
    if !plan.conversations.is_empty() {
        println!(
            "conversations: {} continued here (their chats talk with {}), {} already there",
            done.conversations_added, done.agent, done.conversations_same
        );
    }
    for line in plan.remarks.iter().chain(&said).chain(&done.said) {
        println!("{line}");
    }
    let unmapped: Vec<&String> = plan.unmapped.iter().chain(&done.unmapped).collect();
    if unmapped.is_empty() {
        println!("everything was mapped");
    } else {
        println!("not mapped ({}):", unmapped.len());
        for line in unmapped {
            println!("  - {line}");
        }
    }
    Ok(())
}
