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
use std::time::Duration;

use rusqlite::Connection;

/// How often the background thread checkpoints.
const INTERVAL: Duration = Duration::from_millis(200);

/// The automatic threshold (WAL pages) left on the journal's connection: about 40 MB
/// of WAL, reached only if the background thread cannot keep up.
pub(crate) const BACKSTOP_PAGES: u32 = 10_000;

/// Stops the background checkpointer when dropped (with the store).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    _stop: Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the WAL of the database at `path`. `None` when the thread
    /// or its connection cannot be set up: the backstop then does the work, inline.
    pub(crate) fn start(path: &Path) -> Option<Self> {
        let conn = Connection::open(path).ok()?;
        conn.busy_timeout(Duration::from_secs(1)).ok()?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("justonce-checkpoint".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                    // Passive: copies what it can without waiting for readers or
                    // writers; a failure (busy) is retried on the next tick.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .ok()?;
        Some(Self { _stop: stop })
    }
}
