//! The webhook receiver the simulator's outbox delivers to: a tiny HTTP server on
//! 127.0.0.1 that records every request with its `Idempotency-Key`, and asks the
//! history what to do with each (answer it, lose the answer, or refuse it because
//! the host that sent it is dead), at the moment it arrives: the history may cut the
//! power right then, while the deliverer waits for the answer.
//!
//! Loopback only, one connection at a time, a bounded number of connections and
//! bytes, stopped when dropped. (`http/local_api.rs` is the tests' richer receiver;
//! this one exists for the hook.)

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::SimClock;

/// Connections served before the receiver stops by itself.
const MAX_CONNECTIONS: usize = 100_000;
/// The largest request head or body accepted.
const MAX_REQUEST_BYTES: usize = 1 << 20;
/// How long a sender may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// One webhook as the receiver got it.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// Its `Idempotency-Key` header.
    pub key: Option<String>,
    /// Its body.
    pub body: String,
    /// The clock's moment it arrived.
    pub at: usize,
}

/// What the receiver does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Records it and answers 200.
    Answer,
    /// Records it and closes the connection without answering: the sender cannot
    /// tell it arrived, and sends it again under the same key.
    LoseAnswer,
    /// The host that sent it was dead: it never left, nothing is recorded.
    Dead,
}

/// Decides what becomes of each request (the history's, set after the world is).
pub(crate) type Hook = Arc<dyn Fn(&Delivery) -> Take + Send + Sync>;

struct State {
    clock: Arc<SimClock>,
    deliveries: Mutex<Vec<Delivery>>,
    hook: Mutex<Option<Hook>>,
    stop: AtomicBool,
}

/// The receiver; see the module docs.
pub(crate) struct Receiver {
    addr: SocketAddr,
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listens on a free port of 127.0.0.1; until [`Receiver::hook`] is set, every
    /// request is answered.
    pub(crate) fn start(clock: Arc<SimClock>) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            clock,
            deliveries: Mutex::default(),
            hook: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        let serving = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("justonce-sim-receiver".into())
            .spawn(move || serve(&listener, &serving))?;
        Ok(Self {
            addr,
            state,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Decides from now on what becomes of each request.
    pub(crate) fn hook(&self, hook: Hook) {
        *self.state.hook.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    /// Every webhook received, in order (the same key may come more than once).
    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.state
            .deliveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept; the loop sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(listener: &TcpListener, state: &State) {
    for _ in 0..MAX_CONNECTIONS {
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        if state.stop.load(Ordering::SeqCst) {
            return;
        }
        let _ = handle(stream, state);
    }
}

fn handle(stream: TcpStream, state: &State) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut stream = stream;
    let Some((key, body)) = read_request(&mut reader)? else {
        return respond(&mut stream, "400 Bad Request");
    };
    let delivery = Delivery {
        key,
        body: String::from_utf8_lossy(&body).into_owned(),
        at: state.clock.mark(),
    };
    let hook = state.hook.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let take = hook.map_or(Take::Answer, |hook| hook(&delivery));
    if take != Take::Dead {
        state
            .deliveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(delivery);
    }
    match take {
        Take::Answer => respond(&mut stream, "200 OK"),
        // Closed without a word.
        Take::LoseAnswer | Take::Dead => Ok(()),
    }
}

/// The idempotency key and body of one request; `None` when it is malformed.
fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> io::Result<Option<(Option<String>, Vec<u8>)>> {
    let mut line = String::new();
    let mut head = reader.read_line(&mut line)?;
    if line.split_whitespace().count() < 2 {
        return Ok(None);
    }
    let mut key = None;
    let mut length = 0usize;
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        head += n;
        if n == 0 || head > MAX_REQUEST_BYTES {
            return Ok(None);
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let Some((name, value)) = trimmed.split_once(':') else {
            return Ok(None);
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "idempotency-key" => key = Some(value.trim().to_owned()),
            "content-length" => length = value.trim().parse().unwrap_or(usize::MAX),
            // A body of unknown length is not one this receiver reads.
            "transfer-encoding" => return Ok(None),
            _ => {}
        }
    }
    if length > MAX_REQUEST_BYTES {
        return Ok(None);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Some((key, body)))
}

fn respond(stream: &mut TcpStream, status: &str) -> io::Result<()> {
    let body = "{}";
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
