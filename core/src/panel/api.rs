//! The panel's JSON API, `/api/...`, for a signed-in person ([`Who`]). Everyone reaches only
//! their own: the memory of their private chats (each agent's scope of theirs), their
//! workspace files, the reminders of their private chat, their usage. Nothing takes an id of another person:
//! every store is addressed from the signed-in identity, so there is no id to swap. The owner
//! of the bot also reaches the audit trail, pairing, health, the configuration and the
//! incoming webhooks.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /api/me` | who is signed in, whether the owner, the CSRF token (browser) |
//! | `POST /api/signout` | ends this browser's session (its cookie is refused from then on); `{"everywhere": true}` every session, launch data and sign-in link issued so far (see [`super::signout`]) |
//! | `GET /api/memory[?q=words]` | the memory files per agent, or a search with scores |
//! | `GET`, `PUT`, `DELETE /api/memory/file?agent=A&path=P` | one file: read, replace (`{"text"}`), delete; the index follows |
//! | `GET /api/files`, `GET`, `DELETE /api/files/file?agent=A&path=P` | the workspace files per agent; one shown as text (64 KB; a binary file by its size) or deleted |
//! | `GET /api/reminders`, `DELETE /api/reminders/<id>` | reminders of the private chat |
//! | `GET /api/usage`, `GET /api/usage/days[?days=14]` | tokens and cost today and this month; per day (the owner: everyone's, each person's and each agent's per model) |
//! | `GET /api/conversations`, `GET /api/conversations/messages?key=K` | the private chat's sessions (the owner: every session, with tool inputs and results) |
//! | `GET /api/audit[?since=24h]` | owner: the audit trail |
//! | `GET /api/approvals`, `POST /api/approvals` (`{"lane", "id", "answer": "once"/"while"/"deny"}`) | owner: what waits, and an answer (see [`super::approvals`]) |
//! | `GET /api/pairing`, `POST /api/pairing/approve` (`{"code"}`), `POST /api/pairing/remove` (`{"user"}`) | owner |
//! | `GET /api/health` | owner: backlog, retries, approvals, reminders, counts, the bot's errors of the last minutes |
//! | `GET /api/config` | owner: the effective configuration, secrets redacted |
//! | `GET /api/hooks` | owner: the bot's incoming webhooks (name, mode, chat, whether the secret is set; see [`super::hooks`]) |

use serde_json::{json, Value};

use super::{param, scopes, unavailable, Answer, PanelReply, PanelRequest, Who};
use crate::app::App;
use crate::ids::Scope;
use crate::memory::store::{root, MemoryError};
use crate::usage::{Period, Who as Payer};

/// Memory files listed per agent, at most.
const MAX_FILES: usize = 200;
/// Search words read, at most (characters).
const MAX_WORDS: usize = 200;

/// Answers one API call of `who`.
pub(crate) async fn answer(app: &App, who: &Who<'_>, req: &PanelRequest<'_>) -> PanelReply {
    let m = req.method.to_ascii_uppercase();
    let path = req.path.trim_end_matches('/');
    let query = req.query.unwrap_or("");
    let owner_only = matches!(
        path,
        "/api/audit"
            | "/api/approvals"
            | "/api/pairing"
            | "/api/pairing/approve"
            | "/api/pairing/remove"
            | "/api/health"
            | "/api/config"
            | "/api/hooks"
    );
    if owner_only && !who.owner {
        return PanelReply::error(403, "only the bot's owner sees this");
    }
    let done = match (m.as_str(), path) {
        ("GET", "/api/me") => Ok(me(who)),
        ("POST", "/api/signout") => return signout(app, who, req.body).await,
        ("GET", "/api/memory") => memory(app, who, param(query, "q")).await,
        ("GET" | "PUT" | "DELETE", "/api/memory/file") => {
            memory_file(app, who, &m, query, req.body).await
        }
        ("GET", "/api/files") => super::workspace::list(app, who).await,
        ("GET" | "DELETE", "/api/files/file") => super::workspace::file(app, who, &m, query).await,
        ("GET", "/api/reminders") => reminders(app, who).await,
        ("DELETE", p) if p.starts_with("/api/reminders/") => {
            match p["/api/reminders/".len()..].parse::<u64>() {
                Ok(id) => cancel_reminder(app, who, id).await,
                Err(_) => Err(PanelReply::error(404, "no such reminder")),
            }
        }
        ("GET", "/api/usage") => usage(app, who).await,
        ("GET", "/api/usage/days") => {
            let days = param(query, "days")
                .and_then(|d| d.parse().ok())
                .unwrap_or(14);
            super::history::usage_days(app, who, days)
                .await
                .map_err(unavailable)
        }
        ("GET", "/api/conversations") => super::history::list(app, who).await.map_err(unavailable),
        ("GET", "/api/conversations/messages") => {
            let key = param(query, "key").unwrap_or_default();
            match super::history::messages(app, who, &key).await {
                Ok(Some(v)) => Ok(v),
                Ok(None) => Err(PanelReply::error(404, "no such conversation")),
                Err(e) => Err(unavailable(e)),
            }
        }
        ("GET", "/api/approvals") => super::approvals::list(app, who).await.map_err(unavailable),
        ("POST", "/api/approvals") => return super::approvals::answer(app, who, req.body).await,
        ("GET", "/api/audit") => audit(app, who, param(query, "since")).await,
        ("GET", "/api/pairing") => pairing(app, who).await,
        ("POST", "/api/pairing/approve") => pairing_change(app, who, req.body, true).await,
        ("POST", "/api/pairing/remove") => pairing_change(app, who, req.body, false).await,
        ("GET", "/api/health") => super::history::health(app, who).await,
        ("GET", "/api/config") => Ok(config(app)),
        ("GET", "/api/hooks") => Ok(super::hooks::list(app, who)),
        (
            _,
            "/api/me"
            | "/api/signout"
            | "/api/memory"
            | "/api/files"
            | "/api/files/file"
            | "/api/reminders"
            | "/api/usage"
            | "/api/usage/days"
            | "/api/conversations"
            | "/api/conversations/messages"
            | "/api/audit"
            | "/api/approvals"
            | "/api/pairing"
            | "/api/pairing/approve"
            | "/api/pairing/remove"
            | "/api/health"
            | "/api/config"
            | "/api/hooks",
        ) => Err(PanelReply::error(405, "method not allowed")),
        _ => Err(PanelReply::error(404, "not found")),
    };
    match done {
        Ok(v) => PanelReply::json(200, &v),
        Err(reply) => reply,
    }
}

fn body_json(body: &[u8]) -> Result<Value, PanelReply> {
    serde_json::from_slice(body).map_err(|_| PanelReply::error(400, "the body is not JSON"))
}

fn me(who: &Who<'_>) -> Value {
    let mut v = json!({
        "id": who.user,
        "name": who.name,
        "connector": who.conn.id.as_str(),
        "owner": who.owner,
    });
    if let Some(cookie) = &who.cookie {
        v["csrf"] = json!(super::auth::csrf_token(&who.conn.panel_keys, cookie));
    }
    v
}

async fn signout(app: &App, who: &Who<'_>, body: &[u8]) -> PanelReply {
    let everywhere = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("everywhere").and_then(Value::as_bool))
        .unwrap_or(false);
    let (kv, conn, now) = (&*app.platform.kv, &who.conn.id, app.platform.clock.now_ms());
    let ended = match &who.cookie {
        _ if everywhere => super::signout::everywhere(kv, conn, who.user, now).await,
        Some(cookie) => {
            super::signout::end_session(kv, conn, who.user, cookie, who.signed_ms, now).await
        }
        // Launch data is Telegram's, fresh at each opening: nothing here to end.
        None => Ok(()),
    };
    if let Err(e) = ended {
        return unavailable(e);
    }
    if everywhere {
        tracing::info!(connector = %who.conn.id, "panel: signed out everywhere");
    }
    PanelReply::json(200, &json!({ "ok": true, "everywhere": everywhere })).with(
        "set-cookie",
        format!(
            "{}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict",
            super::auth::COOKIE
        ),
    )
}

/// Whether `rel` is a memory file of a scope (`MEMORY.md`, `memory/<name>.md`, the name of
/// letters, digits, spaces and `-_.`, as every store takes).
fn is_memory_file(rel: &str) -> bool {
    let name = rel.strip_prefix("memory/").unwrap_or(rel);
    (rel == "MEMORY.md" || rel.starts_with("memory/"))
        && name.ends_with(".md")
        && !name.contains("..")
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
}

async fn memory(app: &App, who: &Who<'_>, q: Option<String>) -> Answer {
    let scopes = scopes(app, who);
    if let Some(q) = q.filter(|q| !q.trim().is_empty()) {
        let words: String = q.chars().take(MAX_WORDS).collect();
        let mut hits = Vec::new();
        for (agent, scope) in &scopes {
            let at = format!("{}/", root(scope));
            match app.memory.search(scope, &words).await {
                Ok(found) => hits.extend(found.into_iter().map(|h| {
                    json!({
                        "agent": agent,
                        "path": h.path.strip_prefix(&at).unwrap_or(&h.path),
                        "line": h.start_line,
                        "score": h.score,
                        "text": h.text,
                    })
                })),
                Err(MemoryError::Port(e)) => return Err(unavailable(e)),
                Err(e) => tracing::warn!(error = %e, "panel: memory search failed"),
            }
        }
        return Ok(json!({ "hits": hits }));
    }
    let mut out = Vec::new();
    for (agent, scope) in &scopes {
        let dir = root(scope);
        let at = format!("{dir}/");
        let files = app.memory.files.list(&dir).await.map_err(unavailable)?;
        let files: Vec<&str> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&at))
            .filter(|rel| is_memory_file(rel))
            .take(MAX_FILES)
            .collect();
        if !files.is_empty() {
            out.push(json!({ "agent": agent, "files": files }));
        }
    }
    Ok(json!({ "scopes": out }))
}

async fn memory_file(app: &App, who: &Who<'_>, method: &str, query: &str, body: &[u8]) -> Answer {
    let agent = param(query, "agent").unwrap_or_default();
    let rel = param(query, "path").unwrap_or_default();
    let Some((_, scope)) = scopes(app, who).into_iter().find(|(a, _)| *a == agent) else {
        return Err(PanelReply::error(404, "no such memory"));
    };
    if !is_memory_file(&rel) {
        return Err(PanelReply::error(
            400,
            "a memory file is MEMORY.md or memory/<name>.md",
        ));
    }
    let full = format!("{}/{rel}", root(&scope));
    let current = app.memory.read(&scope, &rel).await.map_err(|e| match e {
        MemoryError::Port(e) => unavailable(e),
        other => PanelReply::error(500, &other.to_string()),
    })?;
    match method {
        "GET" => match current {
            Some(text) => Ok(json!({ "agent": agent, "path": rel, "text": text })),
            None => Err(PanelReply::error(404, "no such file")),
        },
        "PUT" => {
            let text = body_json(body)?
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| PanelReply::error(400, "send {\"text\": \"...\"}"))?;
            if text.len() > app.memory.config.max_file_bytes() {
                return Err(PanelReply::error(413, "over memory.max_file_kb"));
            }
            app.memory
                .files
                .write(&full, text.as_bytes())
                .await
                .map_err(unavailable)?;
            reindex(app, &scope, &full).await?;
            tracing::info!(connector = %who.conn.id, "panel: memory file written");
            Ok(json!({ "ok": true }))
        }
        _ => {
            if current.is_none() {
                return Err(PanelReply::error(404, "no such file"));
            }
            app.memory.files.delete(&full).await.map_err(unavailable)?;
            reindex(app, &scope, &full).await?;
            tracing::info!(connector = %who.conn.id, "panel: memory file deleted");
            Ok(json!({ "ok": true }))
        }
    }
}

async fn reindex(app: &App, scope: &Scope, full: &str) -> Result<(), PanelReply> {
    match app.memory.index_file(scope, full).await {
        Ok(_) => Ok(()),
        Err(MemoryError::Port(e)) => Err(unavailable(e)),
        // The file is saved; the scheduled re-index tries again.
        Err(e) => {
            tracing::warn!(error = %e, "panel: memory file not indexed");
            Ok(())
        }
    }
}

async fn reminders(app: &App, who: &Who<'_>) -> Answer {
    let list = app
        .schedules()
        .list(&who.conn.id, who.user)
        .await
        .map_err(unavailable)?;
    let list: Vec<Value> = list
        .iter()
        .map(|r| {
            let watch = crate::watch::parts(&r.what).map(
                |(url, every, _)| json!({"url": url, "every": crate::watch::shown_every(every)}),
            );
            json!({
                "id": r.id,
                "text": r.what.body(),
                "next_ms": r.next_ms,
                "cron": r.cron,
                "zone": r.zone,
                "watch": watch,
            })
        })
        .collect();
    Ok(json!({ "reminders": list }))
}

async fn cancel_reminder(app: &App, who: &Who<'_>, id: u64) -> Answer {
    match app.schedules().cancel(&who.conn.id, who.user, id).await {
        Ok(Some(_)) => Ok(json!({ "ok": true })),
        Ok(None) => Err(PanelReply::error(404, "no such reminder")),
        Err(e) => Err(unavailable(e)),
    }
}

async fn usage(app: &App, who: &Who<'_>) -> Answer {
    let ledger = app.ledger();
    let id = &who.conn.id;
    let mut v = json!({
        "today": ledger.get(id, Period::Day, Payer::User(who.user)).await.map_err(unavailable)?,
        "month": ledger.get(id, Period::Month, Payer::User(who.user)).await.map_err(unavailable)?,
    });
    if who.owner {
        v["everyone"] = json!({
            "today": ledger.get(id, Period::Day, Payer::Everyone).await.map_err(unavailable)?,
            "month": ledger.get(id, Period::Month, Payer::Everyone).await.map_err(unavailable)?,
        });
    }
    Ok(v)
}

async fn audit(app: &App, who: &Who<'_>, since: Option<String>) -> Answer {
    let window = match since {
        Some(s) => crate::audit::parse_window(&s).map_err(|e| PanelReply::error(400, &e))?,
        None => 24 * 3_600_000,
    };
    let entries = app
        .admin()
        .audit_entries(&who.conn.id, window, None, 500)
        .await
        .map_err(unavailable)?;
    Ok(json!({ "entries": entries }))
}

async fn pairing(app: &App, who: &Who<'_>) -> Answer {
    let list = app
        .admin()
        .pairing_list(&who.conn.id)
        .await
        .map_err(unavailable)?;
    Ok(json!({
        "owner": list.owner,
        "configured": list.configured,
        "paired": list.paired,
        "pending": list.pending,
    }))
}

async fn pairing_change(app: &App, who: &Who<'_>, body: &[u8], approve: bool) -> Answer {
    let v = body_json(body)?;
    let admin = app.admin();
    let done = if approve {
        let code = v
            .get("code")
            .and_then(Value::as_str)
            .filter(|c| c.len() <= 16)
            .ok_or_else(|| PanelReply::error(400, "send {\"code\": \"...\"}"))?;
        admin
            .pairing_approve(&who.conn.id, &code.to_ascii_uppercase())
            .await
    } else {
        let user = v
            .get("user")
            .and_then(Value::as_i64)
            .ok_or_else(|| PanelReply::error(400, "send {\"user\": <id>}"))?;
        admin.pairing_remove(&who.conn.id, user).await
    };
    match done {
        Ok(Some(p)) => Ok(json!({ "ok": true, "paired": p })),
        Ok(None) => Err(PanelReply::error(404, "no such code or person")),
        Err(e) => Err(unavailable(e)),
    }
}

/// The effective configuration with every value that could be a secret replaced (names of
/// environment variables stay: they say where a secret comes from, not what it is).
fn config(app: &App) -> Value {
    let mut v = serde_json::to_value(&*app.config).unwrap_or(Value::Null);
    redact(&mut v, false);
    v
}

fn redact(v: &mut Value, secret: bool) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                let k = k.to_ascii_lowercase();
                let named = !k.ends_with("_env")
                    && [
                        "secret",
                        "password",
                        "token",
                        "authorization",
                        "api_key",
                        "apikey",
                        "headers",
                        "env",
                        "cookie",
                    ]
                    .iter()
                    .any(|s| k.contains(s));
                redact(val, secret || named);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| redact(x, secret)),
        Value::String(s) if secret => *s = "[redacted]".into(),
        Value::Number(_) | Value::Bool(_) if secret => *v = Value::String("[redacted]".into()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_files_are_only_memory_files() {
        for ok in ["MEMORY.md", "memory/2026-11-27.md", "memory/notes.md"] {
            assert!(is_memory_file(ok), "{ok}");
        }
        for bad in [
            "../MEMORY.md",
            "memory/../../x.md",
            "memory/a/b.md",
            "skills/x.md",
            "MEMORY.txt",
            "memory/x.txt",
            "memory/<img src=x onerror=alert(1)>.md",
            "memory/a:b.md",
            "",
        ] {
            assert!(!is_memory_file(bad), "{bad}");
        }
    }

    #[test]
    fn secrets_are_redacted_and_env_names_kept() {
        let mut v = json!({
            "token_env": "TELEGRAM_BOT_TOKEN",
            "mcp": [{"headers": {"Authorization": "Bearer sk-1"}, "env": {"KEY": "v"}, "url": "https://x"}],
            "api_key": "sk-2",
            "name": "main"
        });
        redact(&mut v, false);
        let s = v.to_string();
        assert!(
            !s.contains("sk-1") && !s.contains("sk-2") && !s.contains("\"v\""),
            "{s}"
        );
        assert!(s.contains("TELEGRAM_BOT_TOKEN") && s.contains("https://x") && s.contains("main"));
    }
}
