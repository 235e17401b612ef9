//! `clawless pairing list|approve|remove`: who may talk to a bot, as text for a terminal, over
//! the core's admin calls (`Admin::pairing_list`, `pairing_approve`, `pairing_remove`).

use clawless_core::admin::AdminError;
use clawless_core::{App, ConnectorId};

/// What `clawless pairing list` prints for `id`: the configured users, the paired people and
/// the codes waiting, one per line.
pub async fn list(app: &App, id: &ConnectorId) -> Result<String, AdminError> {
    let l = app.admin().pairing_list(id).await?;
    let mut out = format!("{id}:\n");
    for user in &l.configured {
        let owner = if Some(*user) == l.owner {
            " (owner)"
        } else {
            ""
        };
        out.push_str(&format!("  {user}{owner}: from the config\n"));
    }
    if l.owner.is_none() {
        out.push_str("  no owner: nobody can /pair in Telegram; approve codes here\n");
    }
    for p in &l.paired {
        let by =
            p.by.map_or("the command line".to_owned(), |b| b.to_string());
        out.push_str(&format!(
            "  {}: paired by {by} ({})\n",
            p.person.label(),
            date(p.at_ms)
        ));
    }
    for p in &l.pending {
        out.push_str(&format!(
            "  code {} waiting: {} ({})\n",
            p.code,
            p.person.label(),
            date(p.at_ms)
        ));
    }
    Ok(out)
}

/// `clawless pairing approve CODE`: what to print, or `None` when no such code waits.
pub async fn approve(
    app: &App,
    id: &ConnectorId,
    code: &str,
) -> Result<Option<String>, AdminError> {
    Ok(app
        .admin()
        .pairing_approve(id, code)
        .await?
        .map(|p| format!("{id}: {} can talk to the bot now", p.person.label())))
}

/// `clawless pairing remove USER`: what to print, or `None` when they were not paired.
pub async fn remove(app: &App, id: &ConnectorId, user: i64) -> Result<Option<String>, AdminError> {
    Ok(app
        .admin()
        .pairing_remove(id, user)
        .await?
        .map(|p| format!("{id}: {} is a stranger again", p.person.label())))
}

/// `2023-11-14 22:13 UTC`.
fn date(ms: u64) -> String {
    let days = clawless_core::calendar::day_of(ms);
    let (y, m, d) = clawless_core::calendar::civil_from_days(days);
    let secs = ms / 1000;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600 % 24,
        secs / 60 % 60
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use clawless_core::{Config, Env};
    use clawless_platform::{HttpResponse, Platform};
    use futures::executor::block_on;
    use serde_json::json;

    /// A stranger's code, approved and removed at the command line, as printed.
    #[test]
    fn the_command_line_lists_approves_and_removes() {
        block_on(async {
            let (platform, _clock, http) = Platform::in_memory();
            http.route("https://api.telegram.org/", |_| {
                Ok(HttpResponse::json(
                    200,
                    &json!({"ok": true, "result": {
                    "message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}}}),
                ))
            });
            let env = Env::from_pairs([
                ("TELEGRAM_BOT_TOKEN", "1:T"),
                ("TELEGRAM_WEBHOOK_SECRET", "s"),
                ("TELEGRAM_ALLOWED_USERS", "111"),
            ]);
            let config = Config::load(&clawless_core::config::embedded()).unwrap();
            let app = App::new(platform, config, &env, "t").unwrap();
            let id = app.admin().connector_id(None).unwrap();
            let update = json!({"update_id": 5, "message": {"message_id": 9, "date": 1,
                "chat": {"id": 999, "type": "private"},
                "from": {"id": 999, "is_bot": false, "first_name": "Eve", "username": "eve"},
                "text": "hi"}});
            let reply = app
                .handle_webhook("main", Some("s"), update.to_string().as_bytes())
                .await;
            app.drain(&reply.lane.unwrap()).await.unwrap();

            let listed = list(&app, &id).await.unwrap();
            assert!(
                listed.contains("  111 (owner): from the config\n"),
                "{listed}"
            );
            let code = app.admin().pairing_list(&id).await.unwrap().pending[0]
                .code
                .clone();
            assert!(
                listed.contains(&format!("  code {code} waiting: Eve (@eve, 999) (")),
                "{listed}"
            );
            assert_eq!(approve(&app, &id, "NOPE2345").await.unwrap(), None);
            assert_eq!(
                approve(&app, &id, &code).await.unwrap().unwrap(),
                "main: Eve (@eve, 999) can talk to the bot now"
            );
            let listed = list(&app, &id).await.unwrap();
            assert!(
                listed.contains("  Eve (@eve, 999): paired by the command line ("),
                "{listed}"
            );
            assert!(!listed.contains("code "), "{listed}");
            assert_eq!(
                remove(&app, &id, 111).await.unwrap(),
                None,
                "config users stay"
            );
            assert_eq!(
                remove(&app, &id, 999).await.unwrap().unwrap(),
                "main: Eve (@eve, 999) is a stranger again"
            );
        });
    }
}
