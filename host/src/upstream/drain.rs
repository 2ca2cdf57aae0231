//! The rest of a response stream, read after its answer off the requester's way, so
//! that its connection is kept for the next request.
//!
//! An upstream that answers a `POST` with a Server-Sent Events stream ends the
//! stream after the response (the chunked body's last chunk), but the client has
//! what it asked for at the response's event and stops reading there. The HTTP
//! agent keeps a connection only once its body was read to the end; a body left
//! unread closes it, and the next request pays a new connection (a `connect`, the
//! server's `accept`, and, with a timeout, a thread for the name lookup): 1.2 ms of
//! the 2.1 ms the gateway added to a call of an HTTP upstream on this project's
//! 2-core machine. So the rest is read to its end: a followed request's (one under
//! a key) by the thread that read its response, once its requester has the answer
//! (at most [`HERE`] at once; past that it is dropped), any other on one thread per
//! upstream session that waits for such rests (at most [`QUEUED`] wait at once; one
//! more is dropped, its connection closed as before). A server that holds a stream
//! open after its response holds its reader for the request's timeout at worst
//! (a followed one's: its timeout and `FOLLOW_FOR` more), the rests behind it
//! dropped meanwhile.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

/// The most rests waiting to be read at once; one more is dropped.
const QUEUED: usize = 16;

/// The most rests read at once by the threads that got their responses
/// ([`Held::read_here`]); one more is dropped.
const HERE: usize = 4;

/// The most bytes read of one rest (what comes after the response is read and
/// thrown away): past it the connection is closed.
const MOST: u64 = 1 << 20;

/// A response body's rest, owned.
pub(super) type Rest = Box<dyn Read + Send>;

/// The thread that reads the rests of one upstream session's response streams,
/// started with the first.
pub(super) struct Drain {
    name: String,
    to: Mutex<Option<SyncSender<Rest>>>,
    /// Rests queued or being read.
    unread: Arc<AtomicUsize>,
    /// Rests being read by the threads that got their responses.
    here: AtomicUsize,
}

impl Drain {
    /// No thread yet; when started, it is named `name`.
    pub(super) fn new(name: String) -> Self {
        Self {
            name,
            to: Mutex::new(None),
            unread: Arc::default(),
            here: AtomicUsize::new(0),
        }
    }

    /// Whether every rest handed over was read (or dropped).
    #[cfg(test)]
    pub(super) fn idle(&self) -> bool {
        self.unread.load(Ordering::SeqCst) == 0
    }

    /// Holds `rest` for the thread that got its response, to be read there
    /// ([`Held::read_here`]) once that thread has handed its response on.
    pub(super) fn hold(&self, rest: Rest) -> Held<'_> {
        self.unread.fetch_add(1, Ordering::SeqCst);
        Held {
            drain: self,
            rest: Some(rest),
        }
    }

    /// Reads `rest` to its end on the drain's thread (its connection kept), or
    /// drops it (its connection closed) when [`QUEUED`] rests wait already or no
    /// thread can be had. Never blocks.
    pub(super) fn finish(&self, rest: Rest) {
        let mut to = self.to.lock().unwrap_or_else(|p| p.into_inner());
        self.unread.fetch_add(1, Ordering::SeqCst);
        let rest = match to.as_ref() {
            Some(thread) => match thread.try_send(rest) {
                Ok(()) => return,
                // Dropped, the queue full.
                Err(TrySendError::Full(_)) => {
                    self.unread.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                // The thread ended (it panicked): another one is started.
                Err(TrySendError::Disconnected(rest)) => rest,
            },
            None => rest,
        };
        let (sender, rests) = sync_channel::<Rest>(QUEUED);
        let unread = Arc::clone(&self.unread);
        let started = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || {
                for rest in rests {
                    read_to_end(rest);
                    unread.fetch_sub(1, Ordering::SeqCst);
                }
            });
        if started.is_ok() && sender.try_send(rest).is_ok() {
            *to = Some(sender);
        } else {
            self.unread.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A rest held by the thread that got its response ([`Drain::hold`]); dropped
/// unread, its connection is closed.
pub(super) struct Held<'a> {
    drain: &'a Drain,
    rest: Option<Rest>,
}

impl Held<'_> {
    /// Reads the rest to its end on this thread (one whose next job can wait),
    /// unless [`HERE`] threads read one now: then it is dropped (its connection
    /// closed). Such a rest is a followed request's, read under that request's
    /// horizon (its timeout and [`FOLLOW_FOR`](super::http_client::FOLLOW_FOR) more), so a
    /// server that holds its streams open past their responses holds each reader
    /// that long: at most [`HERE`] of them, and never the drain's thread, which
    /// the other rests need.
    pub(super) fn read_here(mut self) {
        let Some(rest) = self.rest.take() else {
            return;
        };
        if self.drain.here.fetch_add(1, Ordering::SeqCst) < HERE {
            read_to_end(rest);
        }
        self.drain.here.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.drain.unread.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads `rest` to its end (at most [`MOST`] bytes), throwing what it reads away
/// (a failed read ends it: the connection is then not kept).
fn read_to_end(rest: Rest) {
    let _ = std::io::copy(&mut rest.take(MOST), &mut std::io::sink());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    /// A rest whose reads are counted, ended by `ends` (each `()` lets one read
    /// return its end).
    struct Counted {
        reads: Arc<AtomicUsize>,
        ends: Receiver<()>,
    }

    impl Read for Counted {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            let _ = self.ends.recv();
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(0)
        }
    }

    fn counted(reads: &Arc<AtomicUsize>) -> (Rest, std::sync::mpsc::Sender<()>) {
        let (end, ends) = channel();
        let rest = Counted {
            reads: Arc::clone(reads),
            ends,
        };
        (Box::new(rest), end)
    }

    fn until(what: &str, done: impl Fn() -> bool) {
        let bound = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < bound, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_rest_is_read_to_its_end_on_the_drains_thread_without_blocking_the_caller() {
        let drain = Drain::new("drain-test".into());
        let reads = Arc::new(AtomicUsize::new(0));
        let (rest, end) = counted(&reads);
        // `finish` returns while the rest's read still waits for its end.
        drain.finish(rest);
        assert_eq!(reads.load(Ordering::SeqCst), 0);
        end.send(()).unwrap();
        until("the rest was not read", || {
            reads.load(Ordering::SeqCst) == 1
        });
        // A second rest goes to the same thread.
        let (rest, end) = counted(&reads);
        drain.finish(rest);
        end.send(()).unwrap();
        until("the second rest was not read", || {
            reads.load(Ordering::SeqCst) == 2
        });
    }

    #[test]
    fn a_rest_held_is_read_on_this_thread_and_past_the_bound_dropped() {
        let drain = Arc::new(Drain::new("drain-test".into()));
        let reads = Arc::new(AtomicUsize::new(0));
        let (rest, end) = counted(&reads);
        end.send(()).unwrap();
        drain.hold(rest).read_here();
        // Read before `read_here` returned, on this thread.
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // `HERE` threads each reading a rest that does not end yet.
        let mut unstick = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..HERE {
            let (rest, end) = counted(&reads);
            unstick.push(end);
            let drain = Arc::clone(&drain);
            readers.push(std::thread::spawn(move || drain.hold(rest).read_here()));
        }
        until("the readers did not start", || {
            drain.here.load(Ordering::SeqCst) == HERE
        });
        // One more is not read (past the bound): `read_here` returns at once,
        // having dropped it (a reader past the bound would wait here for an end
        // that is sent only after; the test fails on the bound, not hangs).
        let (rest, end) = counted(&reads);
        let (returned, returns) = channel();
        let more = Arc::clone(&drain);
        std::thread::spawn(move || {
            more.hold(rest).read_here();
            let _ = returned.send(());
        });
        assert!(
            returns.recv_timeout(Duration::from_secs(30)).is_ok(),
            "a fifth rest was read past the bound"
        );
        assert!(end.send(()).is_err(), "the fifth rest was not dropped");
        for end in unstick {
            end.send(()).unwrap();
        }
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1 + HERE);
        assert!(drain.idle());
    }

    #[test]
    fn rests_past_the_queue_behind_one_that_never_ends_are_dropped_not_waited_for() {
        let drain = Drain::new("drain-test".into());
        let reads = Arc::new(AtomicUsize::new(0));
        // One that holds the thread (its end never comes until the test says so).
        let (stuck, unstick) = counted(&reads);
        drain.finish(stuck);
        let mut ends = Vec::new();
        let mut dropped = 0;
        for _ in 0..QUEUED + 5 {
            let (rest, end) = counted(&reads);
            drain.finish(rest);
            // A dropped rest's end has no reader any more.
            if end.send(()).is_err() {
                dropped += 1;
            } else {
                ends.push(end);
            }
        }
        // The thread may have taken the stuck one off the queue or not yet.
        assert!(
            (5..=6).contains(&dropped),
            "{dropped} rests dropped of {}",
            QUEUED + 5
        );
        unstick.send(()).unwrap();
        let expected = 1 + QUEUED + 5 - dropped;
        until("the queued rests were not read", || {
            reads.load(Ordering::SeqCst) == expected
        });
    }
}
