//! Sandboxes made ahead for `exec` ([`fence::spare`]): the namespaces, the helper's start and
//! joining the command's cgroup — most of a short command's time, and after a quiet moment
//! an RCU grace period of 10 – 20 ms for the cgroup — are paid before the command is asked
//! for. One waits for the next command without the network; as it is taken, the next is made
//! beside the command (on another of the runtime's threads).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clawless_platform::PortError;
use tokio::io::AsyncWriteExt;
use tokio::process::Child;

use crate::fence;
use crate::sandbox::PidsGroup;

/// A sandbox waiting for its request: the fence's process and the cgroup its helper joined.
pub struct Spare {
    pub child: Child,
    pub group: Option<PidsGroup>,
}

impl Spare {
    /// One made now (without the network unless `network`), in a cgroup of its own where one
    /// can be made.
    fn make(network: bool) -> Result<Spare, PortError> {
        let group = PidsGroup::new();
        let child = fence::spare(network, group.as_ref().map(PidsGroup::path))
            .ok_or_else(|| PortError::unavailable("no sandbox helper"))?
            .spawn()
            .map_err(|e| PortError::unavailable(format!("cannot start /bin/sh: {e}")))?;
        Ok(Spare { child, group })
    }

    /// Sends its request and closes its input.
    async fn send(&mut self, request: &[u8]) -> std::io::Result<()> {
        let mut input = self
            .child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("its input is gone"))?;
        input.write_all(request).await?;
        input.shutdown().await
    }
}

/// Dropped off the runtime's threads: removing the cgroup waits for its last process.
fn discard(spare: Spare) {
    tokio::task::spawn_blocking(move || drop(spare));
}

/// The spare made ahead, if any.
#[derive(Default)]
pub struct Spares(Arc<Mutex<Option<Spare>>>);

impl Spares {
    /// Starts the command `request` asks for (see [`fence::request`]) in a spare sandbox:
    /// the one made ahead when `network` is off and it still runs, else one made now.
    pub async fn start(&self, request: &[u8], network: bool) -> Result<Spare, PortError> {
        let ready = match network {
            true => None,
            false => {
                let ready = self.take();
                self.refill();
                ready
            }
        };
        let mut spare = match ready {
            Some(spare) => spare,
            None => Spare::make(network)?,
        };
        if spare.send(request).await.is_err() {
            // It ended before it was asked (killed from outside): one made now.
            discard(spare);
            spare = Spare::make(network)?;
            spare
                .send(request)
                .await
                .map_err(|e| PortError::unavailable(format!("cannot start /bin/sh: {e}")))?;
        }
        Ok(spare)
    }

    /// The process id of the one waiting, and its cgroup.
    pub fn waiting(&self) -> Option<(u32, Option<PathBuf>)> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let spare = slot.as_ref()?;
        let group = spare.group.as_ref().map(|g| g.path().to_path_buf());
        Some((spare.child.id()?, group))
    }

    /// The one made ahead, if it still runs.
    fn take(&self) -> Option<Spare> {
        let mut spare = self.0.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        match spare.child.try_wait() {
            Ok(None) => Some(spare),
            _ => {
                discard(spare);
                None
            }
        }
    }

    /// Makes the next one; one already there is kept.
    fn refill(&self) {
        let slot = self.0.clone();
        tokio::spawn(async move {
            let Ok(spare) = Spare::make(false) else {
                return;
            };
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.is_none() {
                true => *slot = Some(spare),
                false => discard(spare),
            }
        });
    }
}
