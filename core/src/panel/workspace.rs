//! A person's workspace files, the ones their conversations' tools read and write
//! (`workspace/<agent>/<bot>/<person>/`): listed per agent, a file shown as text (at most
//! [`MAX_SHOWN`] bytes; a binary file by its size) or deleted. The path is checked by the
//! workspace tools' own rules, inside the signed-in person's workspace only.

use serde_json::json;

use super::{param, scopes, unavailable, Answer, PanelReply, Who};
use crate::app::App;
use crate::tools::files::path::{root, workspace_path};

/// Files listed per agent, at most.
const MAX_LISTED: usize = 200;
/// Bytes of a file shown, at most.
const MAX_SHOWN: usize = 64 * 1024;

/// `GET /api/files`: each agent's workspace files of `who`.
pub(super) async fn list(app: &App, who: &Who<'_>) -> Answer {
    let mut out = Vec::new();
    for (agent, scope) in scopes(app, who) {
        let dir = root(&scope);
        let at = format!("{dir}/");
        let files = app.platform.files.list(&dir).await.map_err(unavailable)?;
        let more = files.len() > MAX_LISTED;
        let shown: Vec<&str> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&at))
            .take(MAX_LISTED)
            .collect();
        if !shown.is_empty() {
            out.push(json!({ "agent": agent, "files": shown, "more": more }));
        }
    }
    Ok(json!({ "workspaces": out }))
}

/// `GET` or `DELETE /api/files/file?agent=..&path=..`.
pub(super) async fn file(app: &App, who: &Who<'_>, method: &str, query: &str) -> Answer {
    let agent = param(query, "agent").unwrap_or_default();
    let rel = param(query, "path").unwrap_or_default();
    let Some((_, scope)) = scopes(app, who).into_iter().find(|(a, _)| *a == agent) else {
        return Err(PanelReply::error(404, "no such workspace"));
    };
    let full = workspace_path(&scope, &rel).map_err(|e| PanelReply::error(400, &e.0))?;
    let bytes = match app.platform.files.read(&full).await {
        Ok(b) => b,
        Err(e) if e.kind == clawless_platform::ErrorKind::NotFound => {
            return Err(PanelReply::error(404, "no such file"))
        }
        Err(e) if e.kind == clawless_platform::ErrorKind::Invalid => {
            return Err(PanelReply::error(400, "not a file path"))
        }
        Err(e) => return Err(unavailable(e)),
    };
    if method == "DELETE" {
        app.platform
            .files
            .delete(&full)
            .await
            .map_err(unavailable)?;
        tracing::info!(connector = %who.conn.id, "panel: workspace file deleted");
        return Ok(json!({ "ok": true }));
    }
    let size = bytes.len();
    let head = &bytes[..size.min(MAX_SHOWN)];
    let text = match std::str::from_utf8(head) {
        Ok(t) => Some(t),
        // Cut inside a character: the whole characters before it.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
    .filter(|t| !t.contains('\0'));
    Ok(json!({ "agent": agent, "path": rel, "size": size, "text": text, "cut": size > MAX_SHOWN }))
}
