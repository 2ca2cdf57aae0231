//! The open connections, and which of them have not yet sent an authenticated
//! request. Those are capped on their own: one more than the cap closes the one that
//! has waited longest, so sockets that send half a head and go quiet cannot keep a
//! caller with a token out, however many there are.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

#[derive(Default)]
struct Table {
    open: usize,
    /// Unauthenticated connections by id (ids grow, so the first is the oldest),
    /// each with what closes it.
    anonymous: BTreeMap<u64, Arc<Notify>>,
    next: u64,
}

/// The open connections.
pub(crate) struct Connections {
    table: Mutex<Table>,
    max_open: usize,
    max_anonymous: usize,
}

/// One connection's place in the table; dropping it frees the place.
pub(crate) struct Slot<'a> {
    connections: &'a Connections,
    id: u64,
    /// Notified when the connection is to close (evicted, or the server stops).
    pub close: Arc<Notify>,
}

impl Connections {
    /// At most `max_open` connections, of which `max_anonymous` unauthenticated.
    pub fn new(max_open: usize, max_anonymous: usize) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            max_open: max_open.max(1),
            max_anonymous: max_anonymous.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a new connection, closing the oldest unauthenticated one when it is
    /// one too many; `None` when every place is held by authenticated connections.
    pub fn admit(&self) -> Option<Slot<'_>> {
        let mut table = self.lock();
        if table.open >= self.max_open || table.anonymous.len() >= self.max_anonymous {
            let (_, oldest) = table.anonymous.pop_first()?;
            tracing::info!(
                "too many connections without an authenticated request; closing the oldest"
            );
            oldest.notify_one();
        }
        table.open += 1;
        table.next += 1;
        let id = table.next;
        let close = Arc::new(Notify::new());
        table.anonymous.insert(id, Arc::clone(&close));
        Some(Slot {
            connections: self,
            id,
            close,
        })
    }

    /// Closes every connection that has not sent an authenticated request (the
    /// server is stopping; the others close between requests).
    pub fn close_anonymous(&self) {
        let mut table = self.lock();
        for (_, close) in std::mem::take(&mut table.anonymous) {
            close.notify_one();
        }
    }
}

impl Slot<'_> {
    /// The connection sent an authenticated request: it no longer counts against
    /// the unauthenticated cap, and is never evicted.
    pub fn authenticated(&self) {
        self.connections.lock().anonymous.remove(&self.id);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut table = self.connections.lock();
        table.open -= 1;
        table.anonymous.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_unauthenticated_connection_makes_room_and_authenticated_ones_stay() {
        let connections = Connections::new(3, 2);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        first.authenticated();
        let third = connections.admit().unwrap();
        // The anonymous cap (2) is reached: the oldest anonymous one (second) goes.
        let fourth = connections.admit().unwrap();
        assert!(second.close.notified().now_or_never_ready());
        assert!(
            !first.close.notified().now_or_never_ready(),
            "authenticated stays"
        );
        drop(second);
        third.authenticated();
        fourth.authenticated();
        // Every place is held by authenticated connections: refused.
        assert!(connections.admit().is_none());
        drop(first);
        assert!(connections.admit().is_some());
    }

    trait Ready {
        fn now_or_never_ready(self) -> bool;
    }

    impl<F: std::future::Future> Ready for F {
        fn now_or_never_ready(self) -> bool {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            std::pin::pin!(self).poll(&mut cx).is_ready()
        }
    }
}
