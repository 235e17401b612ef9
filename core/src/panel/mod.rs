//! The control panel: a Mini App inside Telegram and the same pages in any browser, served
//! by every shell from here. Shells only route: `/app/...` (the pages, the sign-in link) and
//! `/api/...` (the JSON the pages call) come to [`Panel::serve`] as a [`PanelRequest`].
//!
//! Who is asking is settled in [`auth`] (Telegram's signed launch data, or a session cookie
//! from a one-time link) and checked against who may talk to the bot
//! (`turn::pairing::may_talk`), the one gate. Everyone sees only their own: their memory,
//! reminders and usage; the owner of the bot also the audit trail, pairing, health, the
//! configuration (secrets redacted) and the incoming webhooks. See [`api`].
//!
//! The pages (`core/panel/app`) are static: embedded here with the `panel-files` feature
//! (native, Lambda); the Worker serves them as static assets and leaves the feature off, so
//! they cost its wasm nothing. Every reply carries a strict Content-Security-Policy: no
//! inline script, nothing from another origin.

pub mod api;
pub mod approvals;
pub mod auth;
mod files;
mod history;
mod hooks;
mod signout;
mod workspace;

use crate::app::{App, Panel};
use crate::connector::Connector;
use crate::ids::{ConnectorId, Scope};
use crate::keys;
use crate::memory::scope::{scope as memory_scope, MemoryOwner};
use auth::{LaunchUser, Refused};

/// The largest request body read (a memory file edit is the largest).
pub const MAX_BODY: usize = 256 * 1024;
/// The longest query string read.
const MAX_QUERY: usize = 1024;

/// One request to `/app/...` or `/api/...`, as a shell received it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PanelRequest<'a> {
    pub method: &'a str,
    /// The whole path (`/api/me`).
    pub path: &'a str,
    /// The query string, without `?`.
    pub query: Option<&'a str>,
    /// The `authorization` header (`tma <launch data>` from the Mini App).
    pub authorization: Option<&'a str>,
    /// The `cookie` header.
    pub cookie: Option<&'a str>,
    /// The `x-csrf-token` header.
    pub csrf: Option<&'a str>,
    /// The body, read by the shell up to [`MAX_BODY`].
    pub body: &'a [u8],
}

/// What the panel answers: status, content type, headers beyond it, body.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelReply {
    pub status: u16,
    pub content_type: &'static str,
    /// Security headers always; `set-cookie` and `location` when due.
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// A lane the answer put work in (an approval answered): the shell drains it, as after
    /// a webhook's ack.
    pub lane: Option<crate::ids::Lane>,
}

/// The Content-Security-Policy of every reply: this origin's files only, no inline script or
/// style, no frames but Telegram's web client.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self' https://web.telegram.org";

impl PanelReply {
    fn new(status: u16, content_type: &'static str, body: String) -> PanelReply {
        PanelReply {
            status,
            content_type,
            headers: vec![
                ("content-security-policy", CSP.to_owned()),
                ("x-content-type-options", "nosniff".to_owned()),
                ("referrer-policy", "no-referrer".to_owned()),
                ("cache-control", "no-store".to_owned()),
            ],
            body,
            lane: None,
        }
    }

    pub(crate) fn json(status: u16, v: &serde_json::Value) -> PanelReply {
        PanelReply::new(status, "application/json", v.to_string())
    }

    /// An error as JSON: `{"error": "..."}`.
    pub(crate) fn error(status: u16, why: &str) -> PanelReply {
        PanelReply::json(status, &serde_json::json!({ "error": why }))
    }

    fn html(status: u16, body: String) -> PanelReply {
        PanelReply::new(status, "text/html; charset=utf-8", body)
    }

    fn with(mut self, name: &'static str, value: String) -> PanelReply {
        self.headers.push((name, value));
        self
    }
}

/// 503 for a store that failed (logged, not shown).
pub(crate) fn unavailable(e: impl std::fmt::Display) -> PanelReply {
    tracing::error!(error = %e, "panel: storage unavailable");
    PanelReply::error(503, "storage unavailable")
}

/// Who is asking, once checked.
pub(crate) struct Who<'a> {
    pub conn: &'a Connector,
    pub user: i64,
    pub name: String,
    pub owner: bool,
    /// The session cookie's value when signed in by a browser (changes need its CSRF token).
    pub cookie: Option<String>,
    /// When the session or the launch data was issued, ms.
    pub signed_ms: u64,
}

impl<'a> Panel<'a> {
    /// `/app/...` and `/api/...`. Unknown paths → 404; then each says its codes: 401 without
    /// a valid sign-in, 403 for someone who may not talk to the bot or a page only the owner
    /// sees, 403 for a change without its CSRF token.
    pub async fn serve(self, req: PanelRequest<'_>) -> PanelReply {
        if req.query.is_some_and(|q| q.len() > MAX_QUERY) {
            return PanelReply::error(414, "the query is too long");
        }
        if req.body.len() > MAX_BODY {
            return PanelReply::error(413, "the body is too large");
        }
        let get = req.method.eq_ignore_ascii_case("GET") || req.method.eq_ignore_ascii_case("HEAD");
        match req.path {
            "/app" => PanelReply::html(308, String::new()).with("location", "/app/".into()),
            "/app/login" if get => self.login_page(req.query),
            "/app/login" if req.method.eq_ignore_ascii_case("POST") => self.sign_in(req.body).await,
            "/app/login" => PanelReply::error(405, "method not allowed"),
            p if p.starts_with("/app/") => match files::file(p) {
                Some((body, content_type)) if get => {
                    let mut r = PanelReply::new(200, content_type, body.to_owned());
                    r.headers.retain(|(n, _)| *n != "cache-control");
                    r.with("cache-control", "no-cache".into())
                }
                Some(_) => PanelReply::error(405, "method not allowed"),
                None => PanelReply::error(404, "not found"),
            },
            p if p.starts_with("/api/") => {
                let who = match self.who(&req).await {
                    Ok(who) => who,
                    Err(reply) => return reply,
                };
                if !get {
                    if let Some(cookie) = &who.cookie {
                        let ok = req
                            .csrf
                            .is_some_and(|t| auth::csrf_matches(&who.conn.panel_keys, cookie, t));
                        if !ok {
                            tracing::info!("panel change refused: no or wrong CSRF token");
                            return PanelReply::error(403, "missing or wrong CSRF token");
                        }
                    }
                }
                api::answer(self.app, &who, &req).await
            }
            _ => PanelReply::error(404, "not found"),
        }
    }

    /// Who signed the request, and whether they may use the panel.
    async fn who(self, req: &PanelRequest<'_>) -> Result<Who<'a>, PanelReply> {
        let unauthorized = || PanelReply::error(401, "sign in again: open the panel from the bot");
        let now = self.app.platform.clock.now_ms();
        let (conn, user, name, signed_ms, cookie) = if let Some(init) =
            req.authorization.and_then(|a| a.strip_prefix("tma "))
        {
            let mut found = Err(Refused::BadSignature);
            for conn in self.app.connectors.values() {
                match auth::verify_init_data(init, &conn.panel_keys, now) {
                    Err(Refused::BadSignature) => continue,
                    other => {
                        found = other.map(|u| (conn, u));
                        break;
                    }
                }
            }
            let (
                conn,
                LaunchUser {
                    id,
                    name,
                    signed_ms,
                },
            ) = found.map_err(|why| {
                tracing::info!(?why, "panel launch data refused");
                unauthorized()
            })?;
            (conn, id, name, signed_ms, None)
        } else if let Some(value) = req.cookie.and_then(|c| auth::cookie(c, auth::COOKIE)) {
            let conn = value
                .strip_prefix("s1.")
                .and_then(|rest| rest.split('.').next())
                .and_then(|id| self.app.connectors.get(&ConnectorId::new(id)))
                .ok_or_else(unauthorized)?;
            let s = auth::read_session(&conn.panel_keys, value, now).ok_or_else(unauthorized)?;
            (
                conn,
                s.user,
                String::new(),
                s.issued_ms,
                Some(value.to_owned()),
            )
        } else {
            return Err(unauthorized());
        };
        let out = signout::SignedOut::read(&*self.app.platform.kv, &conn.id, user)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "panel sign-out record unreadable");
                PanelReply::error(503, "storage unavailable")
            })?;
        if out.refuses(signed_ms, cookie.as_deref()) {
            return Err(unauthorized());
        }
        let may = crate::turn::pairing::may_talk(self.app, conn, user)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "who may talk unreadable");
                PanelReply::error(503, "storage unavailable")
            })?;
        if !may {
            return Err(PanelReply::error(403, "you may not use this bot"));
        }
        Ok(Who {
            conn,
            user,
            name,
            owner: conn.owner == Some(user),
            cookie,
            signed_ms,
        })
    }

    /// The page a sign-in link opens: one button that posts the token back. Opening the link
    /// (or a preview fetching it) uses nothing up.
    fn login_page(self, query: Option<&str>) -> PanelReply {
        let token = query
            .unwrap_or("")
            .split('&')
            .find_map(|p| p.strip_prefix("t="))
            .filter(|t| is_token(t));
        let Some(token) = token else {
            return PanelReply::html(
                400,
                page(
                    "This link is not complete. Send /panel to the bot for a new one.",
                    None,
                ),
            );
        };
        PanelReply::html(
            200,
            page(
                "Sign in to your assistant's panel in this browser.",
                Some(token),
            ),
        )
    }

    /// Takes a link's token once and starts a browser session.
    async fn sign_in(self, body: &[u8]) -> PanelReply {
        let body = String::from_utf8_lossy(body);
        let token = body
            .split('&')
            .find_map(|p| p.strip_prefix("t="))
            .filter(|t| is_token(t));
        let refused = || {
            PanelReply::html(401, page("This link was used already or has expired. Send /panel to the bot for a new one.", None))
        };
        let Some(token) = token else {
            return refused();
        };
        let kv = &self.app.platform.kv;
        let key = keys::panel_link(&auth::token_digest(token));
        let read = match kv.get(&key).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return refused(),
            Err(e) => {
                tracing::error!(error = %e, "panel link unreadable");
                return PanelReply::html(
                    503,
                    page("Storage is unavailable; try again in a minute.", None),
                );
            }
        };
        let Ok(link) = serde_json::from_slice::<Link>(&read) else {
            return refused();
        };
        if link.used {
            return refused();
        }
        let conn_id = ConnectorId::new(&link.connector);
        match signout::SignedOut::read(&**kv, &conn_id, link.user).await {
            Ok(out) if out.refuses(link.issued_ms, None) => {
                return PanelReply::html(
                    401,
                    page("This link was made before you signed out everywhere. Send /panel to the bot for a new one.", None),
                )
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "panel sign-out record unreadable");
                return PanelReply::html(
                    503,
                    page("Storage is unavailable; try again in a minute.", None),
                );
            }
        }
        let used = serde_json::to_vec(&Link {
            used: true,
            ..link.clone()
        })
        .unwrap_or_default();
        let ttl = Some(std::time::Duration::from_millis(auth::LINK_TTL_MS));
        match kv
            .compare_and_swap(&key, Some(&read), Some(&used), ttl)
            .await
        {
            Ok(true) => {}
            Ok(false) => return refused(),
            Err(e) => {
                tracing::error!(error = %e, "panel link not taken");
                return PanelReply::html(
                    503,
                    page("Storage is unavailable; try again in a minute.", None),
                );
            }
        }
        let Some(conn) = self.app.connectors.get(&conn_id) else {
            return refused();
        };
        let session = auth::Session {
            connector: conn.id.clone(),
            user: link.user,
            issued_ms: self.app.platform.clock.now_ms(),
        };
        let value = auth::session_cookie(&conn.panel_keys, &session);
        tracing::info!(connector = %conn.id, "panel signed in by link");
        PanelReply::html(303, String::new())
            .with("location", "/app/".into())
            .with(
                "set-cookie",
                format!(
                    "{}={value}; Path=/; Max-Age={}; HttpOnly; Secure; SameSite=Strict",
                    auth::COOKIE,
                    auth::SESSION_TTL_MS / 1000
                ),
            )
    }

    /// Stores a new sign-in link for `user` (the token of `update_id`) and returns its token;
    /// a retry of the same update finds it stored and gives it again.
    pub(crate) async fn new_link(
        self,
        conn: &Connector,
        user: i64,
        update_id: i64,
    ) -> Result<String, clawless_platform::PortError> {
        let token = auth::link_token(&conn.panel_keys, &conn.id, user, update_id);
        let link = Link {
            connector: conn.id.as_str().to_owned(),
            user,
            used: false,
            issued_ms: self.app.platform.clock.now_ms(),
        };
        let bytes = serde_json::to_vec(&link).unwrap_or_default();
        let ttl = Some(std::time::Duration::from_millis(auth::LINK_TTL_MS));
        self.app
            .platform
            .kv
            .put_if_absent(&keys::panel_link(&auth::token_digest(&token)), &bytes, ttl)
            .await?;
        Ok(token)
    }

    /// The sign-in link's base: `CLAWLESS_PUBLIC_URL`, else the origin of the webhook
    /// Telegram has for `conn`; `None` when neither is known.
    pub(crate) async fn base(self, conn: &Connector) -> Option<String> {
        if let Some(url) = &self.app.public_url {
            return Some(url.trim_end_matches('/').to_owned());
        }
        let url = self.app.admin().webhook_url(&conn.id).await.ok()??;
        let rest = url.strip_prefix("https://")?;
        let host = rest.split('/').next().filter(|h| !h.is_empty())?;
        Some(format!("https://{host}"))
    }
}

/// A sign-in link as stored (under its token's digest).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Link {
    connector: String,
    user: i64,
    #[serde(default)]
    used: bool,
    /// When the link was made, ms: a later "sign out everywhere" refuses it (0 from a release
    /// before this was kept: refused after any).
    #[serde(default)]
    issued_ms: u64,
}

/// Whether `t` looks like a link token (base64url, 32 characters).
fn is_token(t: &str) -> bool {
    t.len() == 32
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The sign-in page: a sentence and, with a token, the button that posts it.
fn page(text: &str, token: Option<&str>) -> String {
    let form = token.map_or(String::new(), |t| {
        format!(
            "<form method=\"post\" action=\"/app/login\"><input type=\"hidden\" name=\"t\" value=\"{t}\"><button type=\"submit\">Sign in</button></form>"
        )
    });
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>clawless panel</title><link rel=\"stylesheet\" href=\"/app/panel.css\"></head><body><main class=\"login\"><h1>clawless</h1><p>{text}</p>{form}</main></body></html>"
    )
}

/// An API answer: the JSON body, or the reply that says why not.
pub(crate) type Answer = Result<serde_json::Value, PanelReply>;

/// The decoded value of `name` in a query string.
pub(crate) fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k == name).then(|| auth::form_decode(v)).flatten()
    })
}

/// The memory scopes of `who`: one per agent (a bot with one memory for everyone: only the
/// owner reaches it).
pub(crate) fn scopes(app: &App, who: &Who<'_>) -> Vec<(String, Scope)> {
    let owner = if who.conn.shared_memory {
        if !who.owner {
            return Vec::new();
        }
        MemoryOwner::Shared
    } else {
        MemoryOwner::User(who.user)
    };
    app.agents
        .keys()
        .map(|agent| (agent.clone(), memory_scope(agent, &who.conn.id, owner)))
        .collect()
}
