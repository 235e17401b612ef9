//! Incoming webhooks (`hooks:` in `main.yaml`): `POST /hooks/<name>` with `Authorization:
//! Bearer <secret>` puts a delivery in one chat's lane, exactly once, as a Telegram update is
//! (the ack is [`crate::App::serve_hook`]). A delivery is a job the bot makes up in that chat,
//! as a reminder's firing is ([`crate::schedule::What::Hook`]): `message` sends the filled-in
//! template with no model call; `turn` runs a turn on it, as untrusted text, so a risky call
//! it leads to asks first.
//!
//! Exactly once: a delivery's update id is negative (never Telegram's) and in a range of its
//! own, `-(2^62 + n)`: with an `Idempotency-Key`, `n` is a digest of the hook and the key, so a
//! repeat finds the job or its seen marker (kept `inbox.dedupe_hours`) and is answered 202
//! without a second delivery; without one, `n` is the second it came and a digest of what
//! came, so deliveries sort by time in their lane (behind reminders' firings, ahead of
//! Telegram's updates).
//!
//! The ack reads no more than [`MAX_HOOK_BYTES`] and only after the hook and its secret are
//! checked (constant time); it costs four Kv calls: the rate's count read and swapped, then
//! the inbox's seen read and put-if-absent.

use std::collections::BTreeMap;

use clawless_platform::{Kv, PortError};
use sha2::Digest as _;

use crate::config::HookConfig;
use crate::ids::ConnectorId;
use crate::keys;
use crate::secret::Secret;

pub use crate::template::Payload;

/// The largest body a hook takes: 413 past it.
pub const MAX_HOOK_BYTES: usize = 64 * 1024;
/// The longest `Idempotency-Key` taken: 400 past it.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;
/// A delivery's update id is below `-HOOK_IDS` (see the module's text).
const HOOK_IDS: i64 = 1 << 62;
/// Losing the rate count's swap this many times in a row answers 429.
const RATE_TRIES: usize = 4;

/// One configured hook, its secret read from the environment.
pub struct Hook {
    pub config: HookConfig,
    pub(crate) secret: Secret,
    pub(crate) connector: ConnectorId,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("name", &self.config.name)
            .field("secret", &self.secret)
            .field("connector", &self.connector)
            .field("chat", &self.config.chat)
            .finish_non_exhaustive()
    }
}

impl Hook {
    /// Whether a token was set for it (without one every delivery is refused).
    pub fn has_secret(&self) -> bool {
        !self.secret.is_empty()
    }
}

/// The configured hooks with their secrets and connectors; a hook whose chat is a person the
/// bot does not serve is refused here, where `TELEGRAM_ALLOWED_USERS` is known.
pub(crate) fn build(
    config: &crate::Config,
    connectors: &BTreeMap<ConnectorId, crate::connector::Connector>,
    env: &crate::Env,
) -> Result<BTreeMap<String, Hook>, crate::ConfigError> {
    let mut out = BTreeMap::new();
    for (i, h) in config.hooks.iter().enumerate() {
        let id = match (&h.connector, connectors.len()) {
            (Some(c), _) => ConnectorId::new(c.as_str()),
            (None, 1) => match connectors.keys().next() {
                Some(only) => only.clone(),
                None => continue,
            },
            (None, _) => ConnectorId::new("main"),
        };
        let Some(conn) = connectors.get(&id) else {
            continue; // the config's check named it
        };
        if h.chat > 0 && !conn.allowed.contains(&h.chat) {
            return Err(crate::ConfigError {
                file: "main.yaml".into(),
                field: format!("hooks[{i}].chat"),
                message: format!(
                    "{} is not a person bot {id} serves (allowed_users, owner or TELEGRAM_ALLOWED_USERS)",
                    h.chat
                ),
            });
        }
        let hook = Hook {
            config: h.clone(),
            secret: env.secret(&h.secret_env),
            connector: id,
        };
        out.insert(h.name.clone(), hook);
    }
    Ok(out)
}

/// A hook request's head, as the shell read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookRequest<'a> {
    /// The path's last part.
    pub name: &'a str,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The `Idempotency-Key` header.
    pub idempotency_key: Option<&'a str>,
    /// The `Content-Type` header.
    pub content_type: Option<&'a str>,
}

/// How a body is read, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Json,
    Text,
    /// `application/x-www-form-urlencoded`: read as a JSON object of its fields.
    Form,
    /// No type said: JSON when it parses, else text.
    Sniffed,
}

impl BodyKind {
    /// The kind `content_type` names; `None`: neither JSON nor text (415).
    pub(crate) fn of(content_type: Option<&str>) -> Option<BodyKind> {
        let Some(ct) = content_type else {
            return Some(BodyKind::Sniffed);
        };
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "" => Some(BodyKind::Sniffed),
            "application/json" => Some(BodyKind::Json),
            "application/x-www-form-urlencoded" => Some(BodyKind::Form),
            e if e.starts_with("application/") && e.ends_with("+json") => Some(BodyKind::Json),
            e if e.starts_with("text/") => Some(BodyKind::Text),
            _ => None,
        }
    }

    /// `body` read as this kind; `Err` says why not (400).
    pub(crate) fn read(self, body: &[u8]) -> Result<Payload, &'static str> {
        let text = || std::str::from_utf8(body).map_err(|_| "body is not UTF-8 text");
        match self {
            BodyKind::Json => serde_json::from_slice(body)
                .map(Payload::Json)
                .map_err(|_| "body is not valid JSON"),
            BodyKind::Text => Ok(Payload::Text(text()?.to_owned())),
            BodyKind::Form => {
                let fields: serde_json::Map<String, serde_json::Value> =
                    form_urlencoded::parse(body)
                        .map(|(k, v)| (k.into_owned(), v.into_owned().into()))
                        .collect();
                Ok(Payload::Json(fields.into()))
            }
            BodyKind::Sniffed => match serde_json::from_slice(body) {
                Ok(v) => Ok(Payload::Json(v)),
                Err(_) => Ok(Payload::Text(text()?.to_owned())),
            },
        }
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
pub(crate) fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether an `Idempotency-Key` can be used: 1 to [`MAX_IDEMPOTENCY_KEY`] visible ASCII
/// characters.
pub(crate) fn key_ok(key: &str) -> bool {
    (1..=MAX_IDEMPOTENCY_KEY).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic())
}

/// A delivery's update id (see the module's text): from the key when there is one, else
/// from the time and what came.
pub(crate) fn update_id(hook: &str, key: Option<&str>, now_ms: u64, body: &[u8]) -> i64 {
    let mut h = sha2::Sha256::new();
    h.update(hook.as_bytes());
    h.update([0]);
    let n = match key {
        Some(key) => {
            h.update(b"key\0");
            h.update(key.as_bytes());
            digest_bits(h) & (HOOK_IDS as u64 - 1)
        }
        None => {
            h.update(now_ms.to_be_bytes());
            h.update(body);
            let secs = (now_ms / 1000).min(u64::from(u32::MAX));
            (secs << 30) | (digest_bits(h) & ((1 << 30) - 1))
        }
    };
    -(HOOK_IDS + n as i64)
}

fn digest_bits(h: sha2::Sha256) -> u64 {
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_be_bytes(first)
}

/// Counts one delivery of `hook` in this minute; `false` when the minute already took
/// `per_minute` (or the count could not be swapped after a few tries: many at once).
pub(crate) async fn within_rate(
    kv: &dyn Kv,
    hook: &str,
    per_minute: u32,
    now_ms: u64,
) -> Result<bool, PortError> {
    let key = keys::hook_rate(hook, now_ms / 60_000);
    let ttl = Some(std::time::Duration::from_secs(120));
    for _ in 0..RATE_TRIES {
        let old = kv.get(&key).await?;
        let count: u32 = old
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if count >= per_minute {
            return Ok(false);
        }
        let new = (count + 1).to_string();
        if kv
            .compare_and_swap(&key, old.as_deref(), Some(new.as_bytes()), ttl)
            .await?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The chat type of a delivery's made-up message: a person's chat, a supergroup (ids below
/// -10^12) or a basic group.
pub(crate) fn chat_type(chat: i64) -> &'static str {
    match chat {
        c if c > 0 => "private",
        c if c < -1_000_000_000_000 => "supergroup",
        _ => "group",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_kinds_by_content_type() {
        assert_eq!(BodyKind::of(Some("application/json")), Some(BodyKind::Json));
        assert_eq!(
            BodyKind::of(Some("Application/JSON; charset=utf-8")),
            Some(BodyKind::Json)
        );
        assert_eq!(
            BodyKind::of(Some("application/vnd.api+json")),
            Some(BodyKind::Json)
        );
        assert_eq!(BodyKind::of(Some("text/plain")), Some(BodyKind::Text));
        assert_eq!(
            BodyKind::of(Some("application/x-www-form-urlencoded")),
            Some(BodyKind::Form)
        );
        assert_eq!(BodyKind::of(None), Some(BodyKind::Sniffed));
        for refused in [
            "image/png",
            "application/octet-stream",
            "multipart/form-data; boundary=x",
        ] {
            assert_eq!(BodyKind::of(Some(refused)), None, "{refused}");
        }
        assert_eq!(
            BodyKind::Form.read(b"name=Ana+B&msg=hi%21"),
            Ok(Payload::Json(
                serde_json::json!({"name": "Ana B", "msg": "hi!"})
            ))
        );
        assert!(BodyKind::Json.read(b"{").is_err());
        assert!(BodyKind::Text.read(&[0xff, 0xfe]).is_err());
        assert_eq!(
            BodyKind::Sniffed.read(b"plain words"),
            Ok(Payload::Text("plain words".into()))
        );
    }

    #[test]
    fn update_ids_are_below_every_other_kind_and_keyed_ones_repeat() {
        let a = update_id("ci", Some("k1"), 1_000, b"x");
        assert_eq!(a, update_id("ci", Some("k1"), 99_000_000, b"other"));
        assert_ne!(a, update_id("ci", Some("k2"), 1_000, b"x"));
        assert_ne!(a, update_id("form", Some("k1"), 1_000, b"x"));
        let now = 1_800_000_000_000;
        let b = update_id("ci", None, now, b"x");
        assert_ne!(b, update_id("ci", None, now, b"y"));
        // Later deliveries sort after earlier ones in the lane (their keys' text).
        let later = update_id("ci", None, now + 1_000, b"x");
        assert!(keys_order(b) < keys_order(later));
        // Below every firing (whose ids are above -2^62 until 2106).
        let firing = crate::schedule::fire_update_id((1 << 30) - 1, u64::from(u32::MAX) * 1000);
        for id in [a, b, later] {
            assert!(id < firing && id < 0, "{id}");
            assert!(keys_order(firing) < keys_order(id));
        }
    }

    fn keys_order(id: i64) -> String {
        format!("{id:020}")
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("abc")), None);
        assert_eq!(bearer(None), None);
        assert!(key_ok("deploy-42"));
        assert!(!key_ok(""));
        assert!(!key_ok("a b"));
        assert!(!key_ok(&"k".repeat(MAX_IDEMPOTENCY_KEY + 1)));
    }

    #[test]
    fn the_rate_counts_per_minute() {
        let clock = std::sync::Arc::new(clawless_platform::clock::FakeClock::new(0));
        let kv = clawless_platform::kv::MemoryKv::new(clock);
        let run = |at| futures::executor::block_on(within_rate(&kv, "ci", 2, at));
        assert!(run(1_000).unwrap());
        assert!(run(2_000).unwrap());
        assert!(!run(3_000).unwrap(), "the third in a minute is refused");
        assert!(run(61_000).unwrap(), "the next minute counts afresh");
    }
}
