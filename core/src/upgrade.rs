//! The store's layout version (`schema/store`) and the steps that bring an older store up to
//! [`CURRENT`], each run once. Every shell calls [`check`] before anything else touches its
//! store, so a binary older than the store refuses to start (and changes nothing), then
//! [`App::upgrade_store`] once at start.
//!
//! | version | layout |
//! |---|---|
//! | 1 | no record: everything before versioning (memory may still be the connector's, not per person) |
//! | 2 | memory per person: the step moves a connector's memory to its owner |

use clawless_platform::{Kv, KvExt, PortError};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::keys;

/// The layout this binary writes.
pub const CURRENT: u32 = 2;

/// The version record, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreVersion {
    pub version: u32,
    /// The release that wrote it.
    pub by: String,
}

/// Why a store cannot be used or brought up to date.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpgradeError {
    #[error("this store was written by clawless {by} (store version {version}); this binary knows up to version {CURRENT}. Run {by} or newer; nothing was changed")]
    TooNew { version: u32, by: String },
    #[error("the store's version record is unreadable: {0}")]
    Unreadable(String),
    #[error("storage: {0}")]
    Storage(#[from] PortError),
}

/// The store's version (1 when it has no record), refused when it is newer than [`CURRENT`].
/// Reads only.
pub async fn check(kv: &dyn Kv) -> Result<u32, UpgradeError> {
    parse(kv.get(&keys::store_version()).await?.as_deref())
}

/// The version a record says (1 without one), refused when newer than [`CURRENT`].
fn parse(raw: Option<&[u8]>) -> Result<u32, UpgradeError> {
    let Some(raw) = raw else {
        return Ok(1);
    };
    let stored: StoreVersion =
        serde_json::from_slice(raw).map_err(|e| UpgradeError::Unreadable(e.to_string()))?;
    if stored.version > CURRENT {
        return Err(UpgradeError::TooNew {
            version: stored.version,
            by: stored
                .by
                .chars()
                .filter(|c| !c.is_control())
                .take(40)
                .collect(),
        });
    }
    Ok(stored.version)
}

/// What [`App::upgrade_store`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upgraded {
    /// The store was at this version already.
    Current,
    /// Brought from the first version to the second.
    From(u32),
    /// A step could not finish yet (its reason is logged); the store stays at this version and
    /// the step runs again at the next start.
    Pending(u32),
}

impl App {
    /// Brings the store up to [`CURRENT`], each step once, then records it; a store newer
    /// than this binary is refused first, untouched. One read when it is current. Safe to run
    /// from several processes at once: every step finds what an earlier run did, and the
    /// record is raised by compare-and-swap.
    pub async fn upgrade_store(&self) -> Result<Upgraded, UpgradeError> {
        let kv = &*self.platform.kv;
        let key = keys::store_version();
        let before = kv.get(&key).await?;
        let from = parse(before.as_deref())?;
        if from == CURRENT {
            return Ok(Upgraded::Current);
        }
        let mut at = from;
        while at < CURRENT {
            if !self.upgrade_step(at).await? {
                return Ok(Upgraded::Pending(at));
            }
            at += 1;
        }
        let record = StoreVersion {
            version: CURRENT,
            by: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let new = serde_json::to_vec(&record).unwrap_or_default();
        if !kv
            .compare_and_swap(&key, before.as_deref(), Some(&new), None)
            .await?
        {
            // Another process upgraded meanwhile: what it wrote must be at least as new.
            check(kv).await?;
        }
        tracing::info!(from, to = CURRENT, "store upgraded");
        Ok(Upgraded::From(from))
    }

    /// The step from version `from` to the next; false when it could not finish yet.
    pub(crate) async fn upgrade_step(&self, from: u32) -> Result<bool, UpgradeError> {
        match from {
            // Memory per person: each connector's memory from before moves to its owner.
            1 => {
                let life = self.lifecycle();
                let mut done = true;
                for conn in self.connectors.values() {
                    let first = &conn.default_agent().config.id;
                    let owner = conn.default_memory_owner();
                    if let Err(e) = life.migrate_legacy(first, &conn.id, owner).await {
                        return Err(match e {
                            crate::memory::store::MemoryError::Port(p) => p.into(),
                            other => PortError::unavailable(other.to_string()).into(),
                        });
                    }
                    // No owner to move it to: the marker is not written, the step waits.
                    let base = crate::memory::scope::legacy_scope(first, &conn.id);
                    done &= kv_has(&*self.platform.kv, &keys::memory_scopes_moved(&base)).await?;
                }
                Ok(done)
            }
            _ => Ok(true),
        }
    }
}

async fn kv_has(kv: &dyn Kv, key: &str) -> Result<bool, PortError> {
    Ok(kv.get(key).await?.is_some())
}

/// Writes `version` as the store's record: for tests that build an older or newer store.
pub async fn set_version(kv: &dyn Kv, version: u32, by: &str) -> Result<(), PortError> {
    let record = StoreVersion {
        version,
        by: by.to_owned(),
    };
    kv.put_json(&keys::store_version(), &record, None).await
}
