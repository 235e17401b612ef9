//! The admin endpoint of every shell, `/admin/<name>` (and `/metrics`, the same as
//! `/admin/metrics`): `GET /admin/metrics` the Prometheus text of [`Admin::metrics_text`],
//! `GET /admin/events?after=<cursor>` the kept events ([`Admin::event_page`]) and `GET
//! /admin/overview` the stores as the cockpit shows them ([`Admin::overview`]), which
//! `clawless tui --remote` reads, `GET /admin/hooks` the incoming webhooks ([`Admin::hooks`]:
//! each one's name, bot, chat, mode, rate, agent and whether its secret is set, never the
//! secret), `GET /admin/audit` answers
//! the audit trail to `clawless audit --remote URL`, `GET /admin/doctor` the checks of
//! [`crate::doctor`] to `clawless doctor --remote URL`, and `POST /admin/setup` points
//! Telegram's webhook at the deployment itself and sets the command menu (see
//! [`Admin::setup`]). `GET /admin/export?cursor=<c>[&person=<user id>&connector=<id>]` answers
//! one part of the archive of [`crate::archive`], its manifest naming the next part's cursor,
//! and `POST /admin/import[?overwrite=1]` merges the archive part it is sent, answering what it
//! did (400 with why when the part is refused, nothing of it written); `clawless export
//! --remote URL` and `import --remote URL` move a whole archive through them in parts. It exists only when `CLAWLESS_ADMIN_TOKEN` is set (else 404, as any unknown
//! path), and answers only a bearer of that token (compared in constant time; 401 with no
//! detail otherwise). Shells only route here: each passes the request as an
//! [`AdminRequest`].

use serde_json::{json, Value};

use crate::app::Admin;
use crate::audit::parse_window;
use crate::ids::ConnectorId;

/// The shortest admin token taken: a guessable token would open the audit trail.
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;
/// Entries answered by default, and at most.
const DEFAULT_LIMIT: usize = 1000;
const MAX_LIMIT: usize = 10_000;
/// The longest query string read.
const MAX_QUERY: usize = 512;

/// What the endpoint answers: status, content type and body.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminReply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl AdminReply {
    /// The body as text (empty when it is not UTF-8, as an archive is not).
    pub fn body_text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or("")
    }

    fn text(status: u16, body: &str) -> AdminReply {
        AdminReply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }

    fn json(status: u16, body: &Value) -> AdminReply {
        AdminReply {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
        }
    }
}

/// The query of `/admin/audit`: `since` (`90s`, `30m`, `2h`, `7d`; default 24 h), `chat`,
/// `connector` (default every one) and `limit` (default 1,000, at most 10,000).
#[derive(Debug, Clone, PartialEq)]
struct AuditQuery {
    since_ms: u64,
    chat: Option<i64>,
    connector: Option<String>,
    limit: usize,
}

fn parse_query(query: &str) -> Result<AuditQuery, String> {
    if query.len() > MAX_QUERY {
        return Err(format!("the query is over {MAX_QUERY} bytes"));
    }
    let mut q = AuditQuery {
        since_ms: 24 * 3_600_000,
        chat: None,
        connector: None,
        limit: DEFAULT_LIMIT,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "since" => q.since_ms = parse_window(value)?,
            "chat" => {
                q.chat = Some(
                    value
                        .parse()
                        .map_err(|_| format!("chat {value:?} is not a chat id"))?,
                )
            }
            "connector" => q.connector = Some(value.to_owned()),
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| format!("limit must be 1 to {MAX_LIMIT}"))?
            }
            other => return Err(format!("unknown parameter {other:?}")),
        }
    }
    Ok(q)
}

/// One request to `/admin/<name>`, as a shell received it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdminRequest<'a> {
    pub method: &'a str,
    /// What follows `/admin/`: `audit`, `doctor` or `setup`.
    pub name: &'a str,
    /// The `authorization` header.
    pub authorization: Option<&'a str>,
    /// The query string, without `?`.
    pub query: Option<&'a str>,
    /// The base URL the request reached the deployment at (`https://host`), from the request
    /// itself: where `/admin/setup` points the webhook.
    pub origin: Option<&'a str>,
    /// The request's body (`POST /admin/import`'s archive), read by the shell within
    /// [`MAX_ADMIN_BODY`].
    pub body: &'a [u8],
    /// The shell answering: `native`, `worker` or `lambda` (an export's manifest names it).
    pub shell: &'a str,
}

/// The largest body a shell reads for the admin endpoint: one part of an archive to import
/// (see [`crate::archive::parts`]).
pub const MAX_ADMIN_BODY: usize = 4 << 20;
#[cfg(feature = "archive")]
const _: () = assert!(crate::archive::parts::PART_PACKED <= MAX_ADMIN_BODY);
/// The longest export cursor taken (percent-encoded).
#[cfg(feature = "archive")]
const MAX_CURSOR: usize = 4096;

impl Admin<'_> {
    /// Whether `authorization` is the admin token's bearer: a shell asks before it reads a
    /// large body (an archive), so only the admin makes it read one.
    pub fn admits(self, authorization: Option<&str>) -> bool {
        let given = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .unwrap_or("");
        !self.app.admin_token.is_empty() && self.app.admin_token.matches(given)
    }

    /// `/admin/<name>`. No token configured, or an unknown name → 404; the wrong method →
    /// 405; a wrong or missing bearer token → 401; then the endpoint's own answer (each says
    /// its codes).
    pub async fn serve(self, req: AdminRequest<'_>) -> AdminReply {
        if self.app.admin_token.is_empty() {
            return AdminReply::text(404, "not found");
        }
        let method = match req.name {
            "audit" | "doctor" | "metrics" | "events" | "overview" | "export" | "hooks" => "GET",
            "setup" | "import" => "POST",
            _ => return AdminReply::text(404, "not found"),
        };
        if !req.method.eq_ignore_ascii_case(method) {
            return AdminReply::text(405, "method not allowed");
        }
        let given = req
            .authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .unwrap_or("");
        if !self.app.admin_token.matches(given) {
            tracing::info!("admin request refused: wrong or missing token");
            return AdminReply::text(401, "unauthorized");
        }
        match req.name {
            "audit" => self.admin_audit_reply(req.query).await,
            "metrics" => AdminReply {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: self.metrics_text().await.into_bytes(),
            },
            "events" => {
                let cursor = req
                    .query
                    .unwrap_or("")
                    .split('&')
                    .find_map(|p| p.strip_prefix("after="))
                    .filter(|c| c.len() <= MAX_QUERY);
                match self.event_page(cursor).await {
                    Ok(page) => {
                        AdminReply::json(200, &serde_json::to_value(&page).unwrap_or(Value::Null))
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "events unreadable");
                        AdminReply::text(503, "storage unavailable")
                    }
                }
            }
            "overview" => match self.overview().await {
                Ok(o) => AdminReply::json(200, &serde_json::to_value(&o).unwrap_or(Value::Null)),
                Err(e) => {
                    tracing::error!(error = %e, "stores unreadable");
                    AdminReply::text(503, "storage unavailable")
                }
            },
            "hooks" => AdminReply::json(200, &json!({ "hooks": self.hooks() })),
            "export" => self.export_reply(req.query, req.shell).await,
            "import" => self.import_reply(req.query, req.body).await,
            "doctor" => {
                let checks = self.doctor(crate::doctor::Delivery::Webhook).await;
                let ok = checks
                    .iter()
                    .all(|c| c.status != crate::doctor::Status::Fail);
                AdminReply::json(200, &json!({ "ok": ok, "checks": checks }))
            }
            _ => match req.origin {
                Some(origin) => {
                    // `?webhook=<url>`: Telegram's updates go there (the Worker's front)
                    // instead of to this deployment.
                    let webhook = req
                        .query
                        .and_then(|q| crate::panel::param(q, "webhook"))
                        .filter(|w| !w.is_empty());
                    let done = self
                        .setup(origin, webhook.as_deref().unwrap_or(origin))
                        .await;
                    let status = if done.ok { 200 } else { 502 };
                    AdminReply::json(status, &serde_json::to_value(&done).unwrap_or(Value::Null))
                }
                None => AdminReply::text(400, "the request's own URL is unknown"),
            },
        }
    }

    /// `/admin/audit` (see [`Admin::serve`]).
    pub async fn admin_audit(
        self,
        method: &str,
        authorization: Option<&str>,
        query: Option<&str>,
    ) -> AdminReply {
        self.serve(AdminRequest {
            method,
            name: "audit",
            authorization,
            query,
            origin: None,
            body: &[],
            shell: "",
        })
        .await
    }

    /// `/admin/export`: the archive (`application/gzip`); a bad query → 400; storage down → 503.
    #[cfg(feature = "archive")]
    async fn export_reply(self, query: Option<&str>, shell: &str) -> AdminReply {
        use crate::archive::Whom;
        let (mut person, mut connector, mut cursor) = (None, None, None);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=').unwrap_or((pair, "")) {
                ("cursor", v) if v.len() <= MAX_CURSOR => {
                    match percent_encoding::percent_decode_str(v).decode_utf8() {
                        Ok(c) => cursor = Some(c.into_owned()),
                        Err(_) => return AdminReply::text(400, "cursor: not UTF-8"),
                    }
                }
                ("cursor", _) => return AdminReply::text(400, "cursor: too long"),
                ("person", v) => match v.parse::<i64>() {
                    Ok(id) => person = Some(id),
                    Err(_) => return AdminReply::text(400, "person: a Telegram user id"),
                },
                ("connector", v) => connector = Some(v.to_owned()),
                (other, _) => {
                    let name: String = other.chars().take(40).collect();
                    return AdminReply::text(400, &format!("unknown parameter {name}"));
                }
            }
        }
        let whom = match person {
            None => Whom::Bot,
            Some(user) => match self.connector_id(connector.as_deref()) {
                Ok(connector) => Whom::Person { connector, user },
                Err(e) => return AdminReply::text(400, &e.to_string()),
            },
        };
        // Parts only for a client that asks for them: an older one would take the first part
        // for the whole export.
        let Some(cursor) = cursor else {
            return AdminReply::text(
                400,
                "this deployment sends an export in parts: use `clawless export --remote` of the same release or newer",
            );
        };
        let part = self.export_part(&whom, shell, &cursor);
        match part.await {
            Ok(archive) => AdminReply {
                status: 200,
                content_type: "application/gzip",
                body: archive,
            },
            Err(e @ crate::archive::ArchiveError::Damaged(_)) => {
                AdminReply::text(400, &e.to_string())
            }
            Err(e) => {
                tracing::error!(error = %e, "export failed");
                AdminReply::text(503, &e.to_string())
            }
        }
    }

    /// `/admin/import`: the report as JSON; a refused archive → 400 with why, nothing written.
    #[cfg(feature = "archive")]
    async fn import_reply(self, query: Option<&str>, body: &[u8]) -> AdminReply {
        use crate::archive::{ArchiveError, Limits, Merge};
        let merge = match query.unwrap_or("") {
            "" | "overwrite=0" => Merge::KeepOurs,
            "overwrite=1" => Merge::Replace,
            _ => return AdminReply::text(400, "the only parameter is overwrite=1"),
        };
        match self.import(body, &Limits::part(), merge).await {
            Ok(report) => {
                tracing::info!(%report, "archive imported");
                AdminReply::json(200, &serde_json::to_value(&report).unwrap_or(Value::Null))
            }
            Err(ArchiveError::Storage(e)) => {
                tracing::error!(error = %e, "import failed");
                AdminReply::text(503, "storage unavailable; importing again finishes it")
            }
            Err(e) => AdminReply::text(400, &e.to_string()),
        }
    }

    #[cfg(not(feature = "archive"))]
    async fn export_reply(self, _: Option<&str>, _: &str) -> AdminReply {
        AdminReply::text(404, "not found")
    }

    #[cfg(not(feature = "archive"))]
    async fn import_reply(self, _: Option<&str>, _: &[u8]) -> AdminReply {
        AdminReply::text(404, "not found")
    }

    /// `/admin/audit`'s answer: `{"entries": [...]}`, each entry with its `connector`, oldest
    /// first per connector; a bad query → 400 saying what is wrong; storage down → 503.
    async fn admin_audit_reply(self, query: Option<&str>) -> AdminReply {
        let q = match parse_query(query.unwrap_or("")) {
            Ok(q) => q,
            Err(e) => return AdminReply::text(400, &e),
        };
        let ids = match &q.connector {
            Some(name) => match self.connector_id(Some(name)) {
                Ok(id) => vec![id],
                Err(e) => return AdminReply::text(400, &e.to_string()),
            },
            None => self.connector_ids(),
        };
        let mut entries = Vec::new();
        for id in ids {
            match self
                .audit_entries(&id, q.since_ms, q.chat, q.limit - entries.len())
                .await
            {
                Ok(found) => entries.extend(found.into_iter().map(|e| with_connector(&id, &e))),
                Err(e) => {
                    tracing::error!(connector = %id, error = %e, "audit trail unreadable");
                    return AdminReply::text(503, "storage unavailable");
                }
            }
            if entries.len() >= q.limit {
                break;
            }
        }
        AdminReply::json(200, &json!({ "entries": entries }))
    }
}

fn with_connector(id: &ConnectorId, e: &crate::audit::Entry) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("connector".into(), json!(id.as_str()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        let q = parse_query("since=2h&chat=-100&connector=main&limit=5").unwrap();
        assert_eq!(
            q,
            AuditQuery {
                since_ms: 7_200_000,
                chat: Some(-100),
                connector: Some("main".into()),
                limit: 5
            }
        );
        assert_eq!(parse_query("").unwrap().limit, DEFAULT_LIMIT);
        for bad in ["since=2w", "chat=x", "limit=0", "limit=10001", "who=me"] {
            assert!(parse_query(bad).is_err(), "{bad}");
        }
        assert!(parse_query(&"a".repeat(600)).is_err());
    }
}
