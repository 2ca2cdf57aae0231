//! WAL checkpoints off the call path.
//!
//! SQLite's automatic checkpoint runs inside whichever commit crosses the threshold,
//! and a checkpoint fsyncs the WAL and the database: one call in a few hundred would
//! stall for milliseconds. A background thread with its own connection runs passive
//! checkpoints instead (they never block a writer), and the journal's own connection
//! keeps a much higher automatic threshold only as a backstop in case the thread
//! falls behind.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

/// How often the background thread checkpoints.
const INTERVAL: Duration = Duration::from_millis(200);

/// The automatic threshold (WAL pages) left on the journal's connection: about 40 MB
/// of WAL, reached only if the background thread cannot keep up.
pub(crate) const BACKSTOP_PAGES: u32 = 10_000;

/// Stops the background checkpointer when dropped (with the store), and waits for
/// its thread: a checkpoint under way finishes and its connection is closed, so the
/// database is no longer held by this store once it is gone.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Disconnecting wakes the thread at once (or after the checkpoint it runs).
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Checkpointer {
    /// Starts checkpointing the WAL of the database at `path`. `None` when the thread
    /// or its connection cannot be set up: the backstop then does the work, inline.
    pub(crate) fn start(path: &Path) -> Option<Self> {
        Self::start_every(path, INTERVAL)
    }

    /// [`Checkpointer::start`], checkpointing every `interval`.
    fn start_every(path: &Path, interval: Duration) -> Option<Self> {
        let conn = Connection::open(path).ok()?;
        conn.busy_timeout(Duration::from_secs(1)).ok()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("justonce-checkpoint".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    // Passive: copies what it can without waiting for readers or
                    // writers; a failure (busy) is retried on the next tick.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .ok()?;
        Some(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once a checkpointer is dropped (with its journal), its connection is closed:
    /// the caller may at once take the file for itself, as leaving WAL mode does,
    /// without waiting or being told the database is locked.
    #[test]
    fn a_dropped_checkpointer_has_closed_its_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        for _ in 0..50 {
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            conn.execute("INSERT INTO t VALUES (zeroblob(65536))", [])
                .unwrap();
            // Checkpointing without pause, so the drop meets one under way.
            let checkpointer =
                Checkpointer::start_every(&path, Duration::ZERO).expect("a checkpointer");
            std::thread::yield_now();
            drop(checkpointer);
            // No busy timeout on `conn`: a connection still open elsewhere is an error.
            conn.pragma_update(None, "journal_mode", "DELETE")
                .expect("the checkpointer's connection is closed once it is dropped");
        }
    }
}
