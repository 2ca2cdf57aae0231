//! While `serve` waits for its journal at start (a database not up yet): the
//! listeners it will serve on already answer, so a load balancer, a container
//! runtime or Kubernetes sees a live process that is not ready instead of a refused
//! connection. `/healthz` and `/livez` answer `200 ok`, `/readyz` answers `503
//! journal unreachable: KIND`, and every other request `503` with why. Once the
//! journal answers, [`Starting::stop`] hands the listeners back, connections waiting
//! on them included, to the servers that take over.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::health::Probe;

/// How often an idle listener looks whether it should stop.
const POLL: Duration = Duration::from_millis(20);
/// How long a prober may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read.
const MAX_HEAD: usize = 8 << 10;

/// The probes' answers on listeners while the journal does not answer.
#[derive(Debug)]
pub struct Starting {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Starting {
    /// Answers on each of `listeners` (on a thread each) that the host is not ready
    /// because its journal's error is of `kind` (`store_unavailable`, …).
    pub fn answer_on(listeners: &[&TcpListener], kind: &'static str) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for listener in listeners {
            let listener = listener.try_clone()?;
            listener.set_nonblocking(true)?;
            let stop = Arc::clone(&stop);
            threads.push(
                std::thread::Builder::new()
                    .name("justonce-starting".into())
                    .spawn(move || answer_until(&listener, &stop, kind))?,
            );
        }
        Ok(Self { stop, threads })
    }

    /// Stops answering, once the request under way is answered.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn answer_until(listener: &TcpListener, stop: &AtomicBool, kind: &str) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                // One prober at a time: a probe is one short request.
                let _ = answer(stream, kind);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    // The listener is shared with the server that takes over: it blocks again, as
    // it was handed to us.
    let _ = listener.set_nonblocking(false);
}

/// Reads the request line and head of `stream` and answers it.
fn answer(stream: TcpStream, kind: &str) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut read = line.len();
    let mut header = String::new();
    while read < MAX_HEAD {
        header.clear();
        let n = reader.read_line(&mut header)?;
        read += n;
        if n == 0 || header == "\r\n" || header == "\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = match Probe::of(path) {
        Some(_) if method != "GET" && method != "HEAD" => (405, "GET or HEAD".to_owned()),
        Some(Probe::Live) => (200, "ok".to_owned()),
        Some(Probe::Ready) => (503, format!("journal unreachable: {kind}")),
        None => (
            503,
            "starting: the host waits for its journal; try again shortly".to_owned(),
        ),
    };
    let reason = match status {
        200 => "OK",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let body = format!("{body}\n");
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn a_host_waiting_for_its_journal_is_alive_and_not_ready_and_hands_its_listener_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let starting = Starting::answer_on(&[&listener], "store_unavailable").unwrap();
        let live = get(addr, "/healthz");
        assert!(
            live.starts_with("HTTP/1.1 200 OK\r\n") && live.ends_with("\r\n\r\nok\n"),
            "{live}"
        );
        let ready = get(addr, "/readyz");
        assert!(ready.starts_with("HTTP/1.1 503 "), "{ready}");
        assert!(
            ready.ends_with("\r\n\r\njournal unreachable: store_unavailable\n"),
            "{ready}"
        );
        assert!(get(addr, "/mcp").contains("starting: the host waits for its journal"));
        starting.stop();
        // Back to the caller, blocking: a connection made now waits for its accept.
        let _client = TcpStream::connect(addr).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(accepted.peer_addr().is_ok());
    }
}
