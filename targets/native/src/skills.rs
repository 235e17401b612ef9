//! `clawless skills list`: each skill of a bot's agent, where it comes from and whether it is
//! offered (or why not), as text for a terminal, over `Admin::skills`.

use clawless_core::admin::AdminError;
use clawless_core::{App, ConnectorId};

/// What `clawless skills list` prints for `id`, one skill a line.
pub async fn list(app: &App, id: &ConnectorId) -> Result<String, AdminError> {
    let (agent, list) = app.admin().skills(id).await?;
    let mut out = format!("{id} (agent {agent}):\n");
    if list.is_empty() {
        out.push_str("  no skills (a skill is a folder with SKILL.md in config/skills/ or files/skills/ of the data directory)\n");
    }
    for s in list {
        let source = s.source.label();
        match &s.offered {
            Ok(()) => out.push_str(&format!("  {} ({source}): offered\n", s.name)),
            Err(why) => out.push_str(&format!("  {} ({source}): not offered: {why}\n", s.name)),
        }
    }
    Ok(out)
}
