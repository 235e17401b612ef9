//! The panel's list of incoming webhooks (`GET /api/hooks`), for the bot's owner only: each
//! hook of the signed-in bot with its mode, chat and whether its secret is set, never the
//! secret (the same [`crate::admin::HookInfo`] `/admin/hooks` and `doctor` read).

use serde_json::{json, Value};

use super::Who;
use crate::app::App;

/// The hooks whose deliveries land in a chat of `who`'s bot.
pub(crate) fn list(app: &App, who: &Who<'_>) -> Value {
    let hooks: Vec<Value> = app
        .admin()
        .hooks()
        .into_iter()
        .filter(|h| h.connector == who.conn.id.as_str())
        .map(|h| {
            json!({
                "name": h.name,
                "mode": h.mode,
                "chat": h.chat,
                "secret_env": h.secret_env,
                "secret_set": h.secret_set,
            })
        })
        .collect();
    json!({ "hooks": hooks })
}
