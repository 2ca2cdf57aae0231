//! The time a client gets to send a request, enforced under hyper on the socket
//! itself: a connection idle between requests past its bound is closed quietly; one
//! that began a request head and did not finish it in time gets `408` and is closed.
//! While a request is being answered (its body read, its call run) the socket has no
//! read deadline: the body has its own, set where it is read, and a call runs as long
//! as it runs.

use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Where a connection is between its requests, as the request handler tells it.
#[derive(Debug, Default)]
pub(crate) struct Phase {
    /// A request's head arrived and it is not answered yet.
    busy: AtomicBool,
    /// When the bytes of the current (unfinished) head began to arrive.
    head_began: Mutex<Option<Instant>>,
}

impl Phase {
    /// A request's head is complete: no read deadline until it is answered. Returns
    /// when its head began, from which the body's deadline is counted.
    pub fn request_began(&self) -> Instant {
        self.busy.store(true, Ordering::Release);
        self.lock().take().unwrap_or_else(Instant::now)
    }

    /// The request is answered: the idle bound applies again.
    pub fn request_ended(&self) {
        self.busy.store(false, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.head_began.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The bounds a [`Deadlined`] socket enforces.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// Between requests, before the first byte of the next one.
    pub idle: Duration,
    /// From the first byte of a head to its end.
    pub head: Duration,
    /// What a late head is answered with before the connection closes.
    pub late: Vec<u8>,
}

/// A socket with [`Bounds`] on reading.
pub(crate) struct Deadlined {
    io: TcpStream,
    phase: std::sync::Arc<Phase>,
    bounds: std::sync::Arc<Bounds>,
    sleep: Pin<Box<Sleep>>,
    idle_since: Instant,
}

impl Deadlined {
    /// Bounds reading from `io`; `phase` is shared with the request handler.
    pub fn new(
        io: TcpStream,
        phase: std::sync::Arc<Phase>,
        bounds: std::sync::Arc<Bounds>,
    ) -> Self {
        let now = Instant::now();
        Self {
            io,
            phase,
            bounds,
            sleep: Box::pin(tokio::time::sleep_until(now)),
            idle_since: now,
        }
    }
}

impl AsyncRead for Deadlined {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let busy = this.phase.busy.load(Ordering::Acquire);
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if !busy && buf.filled().len() > before {
                    this.phase.lock().get_or_insert_with(Instant::now);
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending if busy => {
                this.idle_since = Instant::now();
                return Poll::Pending;
            }
            Poll::Pending => {}
        }
        let head_began = *this.phase.lock();
        let deadline = match head_began {
            Some(began) => began + this.bounds.head,
            None => this.idle_since + this.bounds.idle,
        };
        if this.sleep.deadline() != deadline {
            this.sleep.as_mut().reset(deadline);
        }
        if this.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        match head_began {
            // Idle past the bound: end of stream, a quiet close.
            None => Poll::Ready(Ok(())),
            Some(_) => {
                tracing::info!("a client was too slow sending its request; closing");
                let _ = this.io.try_write(&this.bounds.late);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the request head was not sent in time",
                )))
            }
        }
    }
}

impl AsyncWrite for Deadlined {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.idle_since = Instant::now();
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.idle_since = Instant::now();
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
