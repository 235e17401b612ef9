//! Pairing: people the owner lets in without a redeploy. A stranger who writes gets a one-time
//! code; the owner approves it (`/pair CODE` in their private chat, or `clawless pairing
//! approve CODE`); the person is then kept in the Kv beside the configured `allowed_users`,
//! so a Worker or Lambda deployment adds people without a new config.
//!
//! Keys (built in [`crate::keys`]):
//! - `stranger/<connector>/<user>`: what a stranger was told ([`Record`]: their code, when,
//!   by which update), kept as long as the code. Told less than [`RESEND_MS`] ago, the
//!   stranger's messages are dropped at the ack (one Kv read, as before pairing); later the
//!   same code is sent again, so writing again within the hour never makes a new one.
//! - `pairing/<connector>/<code>`: a pending code ([`Pending`]: whose it is), TTL one hour.
//! - `paired/<connector>/<user>`: a paired person ([`Paired`]: who paired them, when).
//!
//! Who may talk: the configured set (no I/O), else one Kv read of the sender's `paired/` key,
//! made only for a sender outside that set who addressed the bot.
//!
//! Bounds: a stranger has one code an hour (the record), is answered at most once per
//! [`RESEND_MS`], and a connector has at most [`MAX_PENDING`] codes pending: past that, a
//! new stranger is told to try later (a flood of new accounts mints nothing). The owner is told
//! of a new code while fewer than [`NOTIFY_BELOW`] are pending.
//!
//! Codes: [`CODE_LEN`] characters of 32 that cannot be misread (no 0/O, 1/I): 40 bits. The
//! core has no random source (no OS randomness on wasm32-unknown-unknown without a new
//! port), so a code is HMAC-SHA-256 keyed by the connector's bot token and webhook secret over
//! the connector, the user, the update id, the clock, the instance name and an attempt number.
//! The stranger may know everything but the key, which is the bot's own secret (whoever has
//! it controls the bot anyway), so they cannot predict or choose a code. Codes are unique per
//! connector (`put_if_absent`; a clash takes the next attempt).
//!
//! Exactly once: the stranger's record is written by compare-and-swap on the bytes read, so a
//! group and a private chat (two lanes) never both mint; a retry of the same update finds its
//! own record and gives the same answer. Approving writes `paired/` first, then deletes the
//! code and the record: a crash between leaves a code that pairs the same person again.

use std::time::Duration;

use clawless_platform::{Clock, Kv, KvExt, PortError};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};

use crate::audit::Step;
use crate::connector::Connector;
use crate::ids::ConnectorId;
use crate::keys;
use crate::secret::Secret;
use crate::telegram::types::User;

/// How long a code can be approved.
pub const CODE_TTL_MS: u64 = 3_600_000;
/// A stranger is answered at most this often.
pub const RESEND_MS: u64 = 10 * 60_000;
/// Codes pending at once on a connector, at most.
pub const MAX_PENDING: usize = 50;
/// The owner is told of a new code only while fewer than this many are pending.
pub const NOTIFY_BELOW: usize = 10;
/// Characters of a code.
pub const CODE_LEN: usize = 8;
/// What codes are made of: digits and capitals without 0, 1, I and O.
const ALPHABET: &[u8; 32] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ";
/// How much of a name or username is kept.
const MAX_NAME: usize = 64;

/// Someone as Telegram named them when they asked: shown to the owner only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    pub id: i64,
    pub name: String,
    pub username: Option<String>,
}

impl Person {
    /// The sender of a message, names cut and without control characters.
    pub fn of(user: &User) -> Person {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(MAX_NAME)
                .collect::<String>()
                .trim()
                .to_owned()
        };
        Person {
            id: user.id.0,
            name: clean(&user.first_name),
            username: user
                .username
                .as_deref()
                .map(clean)
                .filter(|u| !u.is_empty()),
        }
    }

    /// `Eve (@eve, 999)`.
    pub fn label(&self) -> String {
        let name = if self.name.is_empty() {
            "Someone"
        } else {
            &self.name
        };
        match &self.username {
            Some(u) => format!("{name} (@{u}, {})", self.id),
            None => format!("{name} ({})", self.id),
        }
    }
}

/// A code waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub code: String,
    pub person: Person,
    pub at_ms: u64,
}

/// A person the owner let in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paired {
    pub person: Person,
    /// The owner who approved, or `None` for the command line.
    pub by: Option<i64>,
    pub at_ms: u64,
}

impl Paired {
    /// The audit step of `action` (`approved`, `removed`) on this pairing.
    pub fn step(&self, action: &str) -> Step {
        Step::Pairing {
            action: action.into(),
            person: self.person.label(),
        }
    }
}

/// What a stranger was told.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    /// Their code; `None` when none could be given (too many pending).
    code: Option<String>,
    expires_ms: u64,
    told_ms: u64,
    /// The update that told them.
    update: i64,
}

/// What to answer a stranger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// Their code; `new` when made for this message, with how many were pending before it.
    Code {
        code: String,
        new: bool,
        pending: usize,
    },
    /// No code now: too many are pending.
    Full,
    /// Told less than [`RESEND_MS`] ago: no answer.
    Quiet,
}

/// The pairing store of one app.
pub struct Pairings<'a> {
    pub kv: &'a dyn Kv,
    pub clock: &'a dyn Clock,
}

impl Pairings<'_> {
    /// Whether `user` was told less than [`RESEND_MS`] ago (the ack drops their messages).
    pub async fn quiet(&self, connector: &ConnectorId, user: i64) -> Result<bool, PortError> {
        let record = self.record(connector, user).await?.1;
        let now = self.clock.now_ms();
        Ok(record.is_some_and(|r| now < r.told_ms.saturating_add(RESEND_MS)))
    }

    /// What `person` writing in `update` is told: their code (the pending one, or a new
    /// one keyed by `key`; `salt` names the instance), that too many wait, or nothing.
    pub async fn stranger(
        &self,
        connector: &ConnectorId,
        person: &Person,
        update: i64,
        key: &Secret,
        salt: &str,
    ) -> Result<Told, PortError> {
        let (old, record) = self.record(connector, person.id).await?;
        let now = self.clock.now_ms();
        if let Some(r) = &record {
            if r.update == update {
                // A retry of the message that was answered: the same answer.
                return Ok(match r.code.clone() {
                    Some(code) => Told::Code {
                        code,
                        new: false,
                        pending: MAX_PENDING,
                    },
                    None => Told::Full,
                });
            }
            if now < r.told_ms.saturating_add(RESEND_MS) {
                return Ok(Told::Quiet);
            }
        }
        let mut kept = None;
        if let Some(Record {
            code: Some(code),
            expires_ms,
            ..
        }) = record
        {
            let still = self.pending_code(connector, &code).await?;
            if still.is_some_and(|p| p.person.id == person.id) {
                kept = Some((code, expires_ms));
            }
        }
        let (code, new, pending, expires_ms) = match kept {
            Some((code, expires_ms)) => (Some(code), false, 0, expires_ms),
            None => match self.mint(connector, person, update, key, salt).await? {
                Some((code, pending)) => (Some(code), true, pending, now + CODE_TTL_MS),
                None => (None, false, MAX_PENDING, now + RESEND_MS),
            },
        };
        let record = Record {
            code: code.clone(),
            expires_ms,
            told_ms: now,
            update,
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| PortError::invalid(e.to_string()))?;
        let ttl = Duration::from_millis(expires_ms.saturating_sub(now).max(1000));
        let key_of = keys::stranger(connector, person.id);
        let swapped = self
            .kv
            .compare_and_swap(&key_of, old.as_deref(), Some(&bytes), Some(ttl))
            .await?;
        if !swapped {
            // Another lane answered them meanwhile; the code made here is not theirs to keep.
            if let (true, Some(c)) = (new, &code) {
                self.kv.delete(&keys::pairing_code(connector, c)).await?;
            }
            return Ok(Told::Quiet);
        }
        Ok(match code {
            Some(code) => Told::Code { code, new, pending },
            None => Told::Full,
        })
    }

    /// A new code for `person`, and how many were pending before it; `None` when
    /// [`MAX_PENDING`] are.
    async fn mint(
        &self,
        connector: &ConnectorId,
        person: &Person,
        update: i64,
        key: &Secret,
        salt: &str,
    ) -> Result<Option<(String, usize)>, PortError> {
        let pending = self
            .kv
            .list(&keys::pairing_codes(connector), MAX_PENDING)
            .await?
            .len();
        if pending >= MAX_PENDING {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        for attempt in 0..4u32 {
            let input = format!(
                "clawless pairing v1\n{connector}\n{}\n{update}\n{now}\n{salt}\n{attempt}",
                person.id
            );
            let Some(code) = derive(key.expose().as_bytes(), &input) else {
                return Ok(None);
            };
            let p = Pending {
                code: code.clone(),
                person: person.clone(),
                at_ms: now,
            };
            let bytes = serde_json::to_vec(&p).map_err(|e| PortError::invalid(e.to_string()))?;
            let ttl = Some(Duration::from_millis(CODE_TTL_MS));
            let key_of = keys::pairing_code(connector, &code);
            if self.kv.put_if_absent(&key_of, &bytes, ttl).await? {
                return Ok(Some((code, pending)));
            }
        }
        Ok(None)
    }

    /// Pairs the person whose pending code is `code` (any case, spaces and dashes ignored);
    /// `None` when no such code is pending (unknown, expired or used).
    pub async fn approve(
        &self,
        connector: &ConnectorId,
        code: &str,
        by: Option<i64>,
    ) -> Result<Option<Paired>, PortError> {
        let Some(code) = normalize(code) else {
            return Ok(None);
        };
        let Some(p) = self.pending_code(connector, &code).await? else {
            return Ok(None);
        };
        let paired = Paired {
            person: p.person,
            by,
            at_ms: self.clock.now_ms(),
        };
        let user = paired.person.id;
        self.kv
            .put_json(&keys::paired(connector, user), &paired, None)
            .await?;
        self.kv
            .delete(&keys::pairing_code(connector, &code))
            .await?;
        self.kv.delete(&keys::stranger(connector, user)).await?;
        Ok(Some(paired))
    }

    /// Whether `user` is paired.
    pub async fn is_paired(&self, connector: &ConnectorId, user: i64) -> Result<bool, PortError> {
        Ok(self.kv.get(&keys::paired(connector, user)).await?.is_some())
    }

    /// Ends `user`'s pairing; what it was, if there was one.
    pub async fn remove(
        &self,
        connector: &ConnectorId,
        user: i64,
    ) -> Result<Option<Paired>, PortError> {
        let key = keys::paired(connector, user);
        let Some(bytes) = self.kv.get(&key).await? else {
            return Ok(None);
        };
        self.kv.delete(&key).await?;
        let unknown = || Paired {
            person: Person {
                id: user,
                name: String::new(),
                username: None,
            },
            by: None,
            at_ms: 0,
        };
        Ok(Some(
            serde_json::from_slice(&bytes).unwrap_or_else(|_| unknown()),
        ))
    }

    /// The paired people of `connector`, at most `limit`, in id order (as text).
    pub async fn paired(
        &self,
        connector: &ConnectorId,
        limit: usize,
    ) -> Result<Vec<Paired>, PortError> {
        let keys = self.kv.list(&keys::paired_users(connector), limit).await?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(p) = self.kv.get_json::<Paired>(&key).await.ok().flatten() {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The codes pending on `connector` (at most [`MAX_PENDING`]).
    pub async fn pending(&self, connector: &ConnectorId) -> Result<Vec<Pending>, PortError> {
        let keys = self
            .kv
            .list(&keys::pairing_codes(connector), MAX_PENDING)
            .await?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(p) = self.kv.get_json::<Pending>(&key).await.ok().flatten() {
                out.push(p);
            }
        }
        Ok(out)
    }

    async fn pending_code(
        &self,
        connector: &ConnectorId,
        code: &str,
    ) -> Result<Option<Pending>, PortError> {
        let bytes = self.kv.get(&keys::pairing_code(connector, code)).await?;
        Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// The stranger record's bytes (what a swap compares with) and what they say; an
    /// unreadable record (the marker of older versions) reads as none.
    async fn record(
        &self,
        connector: &ConnectorId,
        user: i64,
    ) -> Result<(Option<Vec<u8>>, Option<Record>), PortError> {
        let old = self.kv.get(&keys::stranger(connector, user)).await?;
        let record = old.as_deref().and_then(|b| serde_json::from_slice(b).ok());
        Ok((old, record))
    }
}

/// `code` as stored: upper case, spaces and dashes dropped; `None` unless it has the form
/// of a code.
pub fn normalize(code: &str) -> Option<String> {
    let code: String = code
        .chars()
        .take(4 * CODE_LEN)
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let valid = code.len() == CODE_LEN && code.bytes().all(|b| ALPHABET.contains(&b));
    valid.then_some(code)
}

/// The first 40 bits of HMAC-SHA-256(`key`, `input`) as a code.
fn derive(key: &[u8], input: &str) -> Option<String> {
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).ok()?;
    mac.update(input.as_bytes());
    let digest = mac.finalize().into_bytes();
    let bits = digest
        .iter()
        .take(5)
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let code = (0..CODE_LEN)
        .map(|i| char::from(ALPHABET[((bits >> (35 - 5 * i)) & 31) as usize]))
        .collect();
    Some(code)
}

/// Tells a newly paired person they may talk now (best effort: logged on failure).
pub(crate) async fn welcome(conn: &Connector, paired: &Paired) {
    let to = crate::telegram::api::Target {
        chat_id: paired.person.id,
        thread_id: None,
    };
    let text = "Welcome! You can talk to me now: just write. /help lists what I can do.";
    if let Err(e) = conn.bot.send_message(to, text, false, None).await {
        tracing::info!(connector = %conn.id, error = %e, "the welcome was not sent");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unambiguous_and_differ_by_key_and_input() {
        let a = derive(b"token-a", "x").unwrap_or_default();
        assert_eq!(a.len(), CODE_LEN);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        assert_ne!(Some(a.clone()), derive(b"token-b", "x"));
        assert_ne!(Some(a.clone()), derive(b"token-a", "y"));
        assert_eq!(normalize(&a.to_lowercase()), Some(a.clone()));
        let spaced = format!("{}-{} ", &a[..4], &a[4..]);
        assert_eq!(normalize(&spaced), Some(a));
        assert_eq!(normalize("ABCD0OI1"), None, "ambiguous characters");
        assert_eq!(normalize("ABC"), None);
        assert_eq!(normalize(&"A".repeat(10_000)), None);
    }
}
