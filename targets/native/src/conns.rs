//! The listener's table of open connections: a cap, and who gives way when it is reached.
//!
//! A cap keeps descriptors and memory bounded, but a cap that refuses newcomers lets a crowd
//! of idle sockets lock everyone out, Telegram included. So at the cap a new connection is
//! still taken, and the oldest connection that is not inside a request handler is closed to
//! make room. Idle and slow sockets can only push out each other (or an idle keep-alive
//! connection of Telegram's, which simply reconnects); a request whose head has arrived is
//! inside its handler and is never pushed out. Without the secret a handler returns at once,
//! so only when every open connection is a real request in progress is a newcomer refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// The open connections, oldest first.
pub struct Conns {
    max: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    /// By id, and ids only grow: the first entry is the oldest.
    open: BTreeMap<u64, Entry>,
}

struct Entry {
    in_handler: bool,
    evict: Arc<Notify>,
}

impl Conns {
    /// A table that holds at most `max` connections (at least one).
    pub fn new(max: usize) -> Arc<Conns> {
        Arc::new(Conns {
            max: max.max(1),
            table: Mutex::default(),
        })
    }

    /// Registers a new connection. At the cap, the oldest connection outside a handler is
    /// evicted first; `None` when there is none (every open connection is in a handler).
    pub fn admit(self: &Arc<Self>) -> Option<Conn> {
        let mut table = self.table();
        if table.open.len() >= self.max {
            let oldest_idle = table
                .open
                .iter()
                .find(|(_, e)| !e.in_handler)
                .map(|(&id, _)| id)?;
            if let Some(evicted) = table.open.remove(&oldest_idle) {
                evicted.evict.notify_one();
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        let evict = Arc::new(Notify::new());
        let entry = Entry {
            in_handler: false,
            evict: evict.clone(),
        };
        table.open.insert(id, entry);
        Some(Conn {
            id,
            conns: self.clone(),
            evict,
        })
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.table().open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table; a panic elsewhere while it was held leaves it consistent (every change
    /// is one insert, remove or flag), so a poisoned lock is taken as is.
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_in_handler(&self, id: u64, in_handler: bool) -> bool {
        match self.table().open.get_mut(&id) {
            Some(entry) => {
                entry.in_handler = in_handler;
                true
            }
            None => false,
        }
    }
}

/// One open connection; dropping it takes it out of the table.
pub struct Conn {
    id: u64,
    conns: Arc<Conns>,
    evict: Arc<Notify>,
}

impl Conn {
    /// Marks the connection as inside a request handler until the guard drops, so it is not
    /// evicted; `None` if it has been evicted already.
    pub fn enter(&self) -> Option<InHandler> {
        self.conns.set_in_handler(self.id, true).then(|| InHandler {
            id: self.id,
            conns: self.conns.clone(),
        })
    }

    /// Whether a request on this connection is inside its handler.
    pub fn in_handler(&self) -> bool {
        let table = self.conns.table();
        table.open.get(&self.id).is_some_and(|e| e.in_handler)
    }

    /// Resolves once the connection has been evicted: its task then drops it.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.conns.table().open.remove(&self.id);
    }
}

/// A request inside its handler; dropping it makes the connection evictable again.
pub struct InHandler {
    id: u64,
    conns: Arc<Conns>,
}

impl Drop for InHandler {
    fn drop(&mut self) {
        self.conns.set_in_handler(self.id, false);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn was_evicted(conn: &Conn) -> bool {
        tokio::time::timeout(Duration::from_millis(20), conn.evicted())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_gives_way() {
        let conns = Conns::new(3);
        let a = conns.admit().unwrap();
        let b = conns.admit().unwrap();
        let c = conns.admit().unwrap();
        let _a_busy = a.enter().unwrap();
        assert!(a.in_handler() && !b.in_handler());
        let d = conns.admit().unwrap();
        assert_eq!(conns.len(), 3);
        assert!(!was_evicted(&a).await, "in a handler: kept");
        assert!(was_evicted(&b).await, "the oldest idle one went");
        assert!(!was_evicted(&c).await && !was_evicted(&d).await);
        assert!(
            b.enter().is_none(),
            "an evicted connection cannot start a request"
        );
    }

    #[tokio::test]
    async fn a_newcomer_is_refused_only_when_all_are_in_handlers() {
        let conns = Conns::new(2);
        let a = conns.admit().unwrap();
        let b = conns.admit().unwrap();
        let busy_a = a.enter().unwrap();
        let _busy_b = b.enter().unwrap();
        assert!(conns.admit().is_none());
        drop(busy_a);
        let _c = conns.admit().unwrap();
        assert!(was_evicted(&a).await, "idle again, so evictable");
        drop(b);
        assert_eq!(conns.len(), 1, "a dropped connection leaves the table");
    }
}
