//! Who is asking: the panel's two ways in, and nothing else.
//!
//! - **Inside Telegram** (the Mini App): every API call carries `Authorization: tma
//!   <initData>`, the launch data Telegram signed for this bot. Its `hash` is
//!   HMAC-SHA-256 over the other fields (sorted, `key=value`, one per line) keyed with
//!   HMAC-SHA-256(key `WebAppData`, the bot token) — Telegram's documented check. It is
//!   refused older than [`INIT_DATA_MAX_AGE_S`] or from the future. No cookie is involved, so
//!   no request can be forged from another site (no CSRF token needed).
//! - **In a browser**: `/panel` in a private chat sends a link holding a one-time token
//!   ([`link_token`]) valid [`LINK_TTL_MS`]. Opening it shows a page whose button posts the
//!   token back (a link preview that fetches the page consumes nothing); that post takes the
//!   token once (compare-and-swap to a used mark) and sets a session cookie (HttpOnly, Secure,
//!   SameSite=Strict) valid [`SESSION_TTL_MS`]. Every change made with the cookie needs the
//!   CSRF token `/api/me` answers (`X-CSRF-Token`).
//!
//! No random source exists in the core (wasm32 has none without a new port), so tokens are
//! HMAC-SHA-256 under a key derived from the bot's token and webhook secret (as pairing codes
//! are): unpredictable to anyone without the bot's own secrets. A session cookie is stateless
//! (`s1.<connector>.<user>.<issued ms>.<mac>`), so sign-outs are kept in the store, one record
//! per person (`super::signout`): the sessions ended one by one, and the time of "sign out
//! everywhere", up to which no session, launch data or sign-in link is taken.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::ids::ConnectorId;
pub use crate::signing::PanelKeys;
use crate::signing::{b64, hex, mac, mac_hex};

/// Launch data older than this is refused (reopening the panel gives fresh data).
pub const INIT_DATA_MAX_AGE_S: u64 = 3600;
/// Launch data this far in the future is refused (clock skew allowed).
const FUTURE_SKEW_S: u64 = 60;
/// The longest launch data read.
pub const MAX_INIT_DATA: usize = 4096;
/// Fields of launch data, at most.
const MAX_FIELDS: usize = 32;
/// How long a sign-in link may be used (once).
pub const LINK_TTL_MS: u64 = 10 * 60_000;
/// How long a browser session lasts.
pub const SESSION_TTL_MS: u64 = 12 * 3_600_000;
/// The session cookie's name. `__Host-` binds it to this host, path `/`, Secure.
pub const COOKIE: &str = "__Host-clawless";
/// The longest cookie header read.
const MAX_COOKIE: usize = 4096;

/// The person launch data names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchUser {
    pub id: i64,
    pub name: String,
    /// When Telegram signed the data, ms.
    pub signed_ms: u64,
}

/// Why launch data was refused (the API answers 401 either way; tests tell them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    BadSignature,
    Expired,
    NoUser,
}

/// Checks `init_data` (the query string Telegram gave the Mini App) with `keys` at `now_ms`.
pub fn verify_init_data(
    init_data: &str,
    keys: &PanelKeys,
    now_ms: u64,
) -> Result<LaunchUser, Refused> {
    if init_data.len() > MAX_INIT_DATA {
        return Err(Refused::Malformed);
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut hash = None;
    for pair in init_data.split('&').filter(|p| !p.is_empty()) {
        if fields.len() >= MAX_FIELDS {
            return Err(Refused::Malformed);
        }
        let (k, v) = pair.split_once('=').ok_or(Refused::Malformed)?;
        let k = form_decode(k).ok_or(Refused::Malformed)?;
        let v = form_decode(v).ok_or(Refused::Malformed)?;
        if k == "hash" {
            if hash.replace(v).is_some() {
                return Err(Refused::Malformed);
            }
        } else {
            if fields.iter().any(|(seen, _)| *seen == k) {
                return Err(Refused::Malformed);
            }
            fields.push((k, v));
        }
    }
    let hash = hash.ok_or(Refused::Malformed)?;
    fields.sort();
    let check: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let want = mac_hex(&keys.webapp, check.join("\n").as_bytes());
    if want.is_empty() || !bool::from(want.as_bytes().ct_eq(hash.to_ascii_lowercase().as_bytes())) {
        return Err(Refused::BadSignature);
    }
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let signed_s: u64 = field("auth_date")
        .and_then(|d| d.parse().ok())
        .ok_or(Refused::Malformed)?;
    let now_s = now_ms / 1000;
    if signed_s + INIT_DATA_MAX_AGE_S < now_s || signed_s > now_s + FUTURE_SKEW_S {
        return Err(Refused::Expired);
    }
    let user: serde_json::Value = field("user")
        .and_then(|u| serde_json::from_str(u).ok())
        .ok_or(Refused::NoUser)?;
    let id = user
        .get("id")
        .and_then(serde_json::Value::as_i64)
        .filter(|id| *id > 0)
        .ok_or(Refused::NoUser)?;
    let name = user
        .get("first_name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .chars()
        .take(64)
        .collect();
    Ok(LaunchUser {
        id,
        name,
        signed_ms: signed_s * 1000,
    })
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space), as the Mini App's
/// `URLSearchParams` reads it; `None` when not UTF-8.
pub fn form_decode(s: &str) -> Option<String> {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// The one-time sign-in token of the link `/panel` answers an update with: the same for a
/// retry of the same update (so a retried turn sends the same link), unguessable without the
/// bot's secrets.
pub fn link_token(keys: &PanelKeys, connector: &ConnectorId, user: i64, update_id: i64) -> String {
    b64(&mac(
        &keys.own,
        &[
            b"link",
            connector.as_str().as_bytes(),
            user.to_string().as_bytes(),
            update_id.to_string().as_bytes(),
        ],
    )[..24])
}

/// What a link token is stored under (its hash: the Kv never holds a usable token).
pub fn token_digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes())[..16])
}

/// A signed-in browser: the cookie's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub connector: ConnectorId,
    pub user: i64,
    pub issued_ms: u64,
}

/// The cookie value of a new session.
pub fn session_cookie(keys: &PanelKeys, s: &Session) -> String {
    let body = format!("s1.{}.{}.{}", s.connector.as_str(), s.user, s.issued_ms);
    let sig = b64(&mac(&keys.own, &[b"session", body.as_bytes()]));
    format!("{body}.{sig}")
}

/// The session a cookie value holds, if this bot's `keys` signed it and it has not expired
/// at `now_ms` (sign-out is checked by the caller, which reads the Kv).
pub fn read_session(keys: &PanelKeys, value: &str, now_ms: u64) -> Option<Session> {
    let (body, sig) = value.rsplit_once('.')?;
    let want = b64(&mac(&keys.own, &[b"session", body.as_bytes()]));
    if !bool::from(want.as_bytes().ct_eq(sig.as_bytes())) {
        return None;
    }
    let mut parts = body.splitn(4, '.');
    if parts.next()? != "s1" {
        return None;
    }
    let connector = ConnectorId::new(parts.next()?);
    let user: i64 = parts.next()?.parse().ok()?;
    let issued_ms: u64 = parts.next()?.parse().ok()?;
    if issued_ms + SESSION_TTL_MS < now_ms || issued_ms > now_ms + FUTURE_SKEW_S * 1000 {
        return None;
    }
    Some(Session {
        connector,
        user,
        issued_ms,
    })
}

/// The CSRF token that goes with a session cookie.
pub fn csrf_token(keys: &PanelKeys, cookie_value: &str) -> String {
    b64(&mac(&keys.own, &[b"csrf", cookie_value.as_bytes()])[..18])
}

/// Whether `given` is the CSRF token of `cookie_value` (constant time).
pub fn csrf_matches(keys: &PanelKeys, cookie_value: &str, given: &str) -> bool {
    bool::from(
        csrf_token(keys, cookie_value)
            .as_bytes()
            .ct_eq(given.as_bytes()),
    )
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    if header.len() > MAX_COOKIE {
        return None;
    }
    header.split(';').find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// Builds launch data signed for `keys` (tests and the fake Telegram of the browser tests).
pub fn sign_init_data(keys: &PanelKeys, fields: &[(&str, &str)]) -> String {
    let mut sorted: Vec<&(&str, &str)> = fields.iter().collect();
    sorted.sort();
    let check: Vec<String> = sorted.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let hash = mac_hex(&keys.webapp, check.join("\n").as_bytes());
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let mut out: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect();
    out.push(format!("hash={hash}"));
    out.join("&")
}

#[cfg(test)]
mod tests;
