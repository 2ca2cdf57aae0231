//! A bounded, truncating capture of a guest's stdout or stderr.
//!
//! wasmtime's `MemoryOutputPipe` fails the guest's write once it is full, which a Rust
//! guest turns into a panic: a chatty tool would be killed for printing. This sink keeps
//! the first bytes for the host's log and counts the rest, and never fails a write.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// How much a guest may write in one call to `write`; the WASI streams' usual permit.
const WRITE_PERMIT: usize = 64 << 10;

/// How many of the last bytes written are kept apart from the capped head, so that
/// what a guest printed just before it trapped (a panic message) is read even past
/// the cap.
const TAIL_BYTES: usize = 4 << 10;

#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
    tail: Vec<u8>,
}

/// A stream that keeps at most `capacity` bytes and drops (and counts) the rest.
/// Clones share the captured bytes.
#[derive(Debug, Clone)]
pub(crate) struct BoundedCapture {
    capacity: usize,
    captured: Arc<Mutex<Captured>>,
}

impl BoundedCapture {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            captured: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Captured> {
        self.captured.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn keep(&self, bytes: &[u8]) {
        let mut captured = self.lock();
        let room = self.capacity.saturating_sub(captured.kept.len());
        let kept = bytes.len().min(room);
        captured.kept.extend_from_slice(&bytes[..kept]);
        captured.dropped += (bytes.len() - kept) as u64;
        let last = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        captured.tail.extend_from_slice(last);
        let excess = captured.tail.len().saturating_sub(TAIL_BYTES);
        captured.tail.drain(..excess);
    }

    /// The last bytes written (at most 4 KiB), whatever the cap dropped.
    pub(crate) fn tail(&self) -> Vec<u8> {
        self.lock().tail.clone()
    }

    /// The bytes kept, and how many more were written and dropped.
    pub(crate) fn contents(&self) -> (Vec<u8>, u64) {
        let captured = self.lock();
        (captured.kept.clone(), captured.dropped)
    }
}

impl IsTerminal for BoundedCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for BoundedCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for BoundedCapture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for BoundedCapture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for BoundedCapture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest_without_failing() {
        let mut capture = BoundedCapture::new(5);
        capture.write(Bytes::from_static(b"abc")).unwrap();
        capture.write(Bytes::from_static(b"defgh")).unwrap();
        assert!(
            capture.check_write().unwrap() > 0,
            "still writable when full"
        );
        capture.write(Bytes::from_static(b"ij")).unwrap();
        assert_eq!(capture.contents(), (b"abcde".to_vec(), 5));
        assert_eq!(capture.tail(), b"abcdefghij");
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_past_the_cap() {
        let mut capture = BoundedCapture::new(5);
        capture
            .write(Bytes::from(vec![b'x'; TAIL_BYTES * 2]))
            .unwrap();
        capture.write(Bytes::from_static(b"panicked at")).unwrap();
        let tail = capture.tail();
        assert_eq!(tail.len(), TAIL_BYTES);
        assert!(tail.ends_with(b"panicked at"));
    }
}
