//! HTTP/1.1 on one connection: reading a request head and body within size caps and
//! a deadline, and writing a response as JSON, as a one-event SSE stream, or empty.
//!
//! Only what MCP's Streamable HTTP transport needs: bodies by `Content-Length` (a
//! `Transfer-Encoding` request is refused, which also closes the door on request
//! smuggling), persistent connections, no pipelining beyond reading in order.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The most header lines a request may have.
const MAX_HEADERS: usize = 64;

/// A request head.
#[derive(Debug)]
pub(crate) struct Head {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target.
    pub path: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// HTTP/1.0 closes after the response unless it asks otherwise.
    pub http10: bool,
}

impl Head {
    /// A POST to `/mcp` with `headers` (lowercase names), for tests.
    #[cfg(test)]
    pub fn with_headers(headers: &[(&str, &str)]) -> Self {
        Self {
            method: "POST".into(),
            path: "/mcp".into(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            http10: false,
        }
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many times header `name` (lowercase) occurs.
    pub fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }

    /// Whether the client wants the connection kept open after the response.
    pub fn keep_alive(&self) -> bool {
        let connection = self.header("connection").unwrap_or("").to_ascii_lowercase();
        if self.http10 {
            connection.contains("keep-alive")
        } else {
            !connection.contains("close")
        }
    }
}

/// Why no request could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The client closed the connection (or stayed idle past the limit) between
    /// requests: nothing to answer.
    Idle,
    /// The client did not send its request in time.
    TimedOut,
    /// The head is larger than allowed (431).
    HeadTooLarge,
    /// The head is not HTTP/1.x (400).
    Malformed(String),
    /// The connection failed.
    Io(io::Error),
}

/// One client connection and the bytes read from it ahead of the current request.
pub(crate) struct Conn {
    stream: TcpStream,
    buffered: Vec<u8>,
}

impl Conn {
    /// Wraps an accepted stream; responses go out without Nagle's delay.
    pub fn new(stream: TcpStream, write_timeout: Duration) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(write_timeout))?;
        Ok(Self {
            stream,
            buffered: Vec::new(),
        })
    }

    /// Reads into the buffer once, waiting at most until `deadline`; the bytes read.
    fn fill(&mut self, deadline: Instant) -> Result<usize, ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::TimedOut);
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(ReadError::Io)?;
        let mut chunk = [0u8; 8192];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buffered.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ReadError::TimedOut);
                }
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// Reads the next request head: waits up to `idle` for its first byte, then up to
    /// `within` for the rest of it. A head over `max_bytes` is refused.
    pub fn read_head(
        &mut self,
        idle: Duration,
        within: Duration,
        max_bytes: usize,
    ) -> Result<(Head, Instant), ReadError> {
        if self.buffered.is_empty() {
            match self.fill(Instant::now() + idle) {
                Ok(0) | Err(ReadError::TimedOut) => return Err(ReadError::Idle),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        let deadline = Instant::now() + within;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&self.buffered) {
                Ok(httparse::Status::Complete(len)) => {
                    if len > max_bytes {
                        return Err(ReadError::HeadTooLarge);
                    }
                    let head = Head {
                        method: request.method.unwrap_or("").to_owned(),
                        path: request.path.unwrap_or("").to_owned(),
                        headers: request
                            .headers
                            .iter()
                            .map(|h| {
                                (
                                    h.name.to_ascii_lowercase(),
                                    String::from_utf8_lossy(h.value).into_owned(),
                                )
                            })
                            .collect(),
                        http10: request.version == Some(0),
                    };
                    self.buffered.drain(..len);
                    return Ok((head, deadline));
                }
                Ok(httparse::Status::Partial) if self.buffered.len() > max_bytes => {
                    return Err(ReadError::HeadTooLarge);
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => return Err(ReadError::HeadTooLarge),
                Err(e) => return Err(ReadError::Malformed(e.to_string())),
            }
            if self.fill(deadline)? == 0 {
                return Err(ReadError::Malformed(
                    "the connection closed mid-head".into(),
                ));
            }
        }
    }

    /// Reads a body of `len` bytes by `deadline`.
    pub fn read_body(&mut self, len: usize, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        while self.buffered.len() < len {
            if self.fill(deadline)? == 0 {
                return Err(ReadError::Malformed(
                    "the connection closed mid-body".into(),
                ));
            }
        }
        Ok(self.buffered.drain(..len).collect())
    }

    /// Writes `response`; with `keep_alive` false, says the connection closes.
    pub fn write(&mut self, response: &Response, keep_alive: bool) -> io::Result<()> {
        let mut out = Vec::with_capacity(256 + response.body.len());
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\n",
            response.status,
            reason(response.status)
        );
        for (name, value) in &response.headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        if !keep_alive {
            out.extend_from_slice(b"connection: close\r\n");
        }
        match response.kind {
            Kind::Json | Kind::Empty => {
                if response.kind == Kind::Json {
                    out.extend_from_slice(b"content-type: application/json\r\n");
                }
                let _ = write!(out, "content-length: {}\r\n\r\n", response.body.len());
                out.extend_from_slice(&response.body);
            }
            Kind::Sse => {
                // One event in one chunk, then the last chunk: the stream ends with
                // the response and the connection stays usable.
                out.extend_from_slice(
                    b"content-type: text/event-stream\r\ncache-control: no-store\r\ntransfer-encoding: chunked\r\n\r\n",
                );
                let event_len = b"event: message\ndata: ".len() + response.body.len() + 2;
                let _ = write!(out, "{event_len:x}\r\nevent: message\ndata: ");
                out.extend_from_slice(&response.body);
                out.extend_from_slice(b"\n\n\r\n0\r\n\r\n");
            }
        }
        self.stream.write_all(&out)?;
        self.stream.flush()
    }

    /// Tells a client that waits for a go-ahead before its body
    /// (`Expect: 100-continue`, as curl sends for larger bodies) to send it.
    pub fn go_ahead(&mut self) -> io::Result<()> {
        self.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
    }

    /// A second handle on the socket, to shut it down from another thread.
    pub fn try_clone_stream(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }
}

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `application/json` with a length.
    Json,
    /// One `message` event of `text/event-stream`, chunked.
    Sse,
    /// No body.
    Empty,
}

/// A response to write.
#[derive(Debug)]
pub(crate) struct Response {
    /// The status code.
    pub status: u16,
    /// Extra headers (lowercase names).
    pub headers: Vec<(&'static str, String)>,
    /// How the body goes out.
    pub kind: Kind,
    /// The JSON of the body, if any.
    pub body: Vec<u8>,
}

impl Response {
    /// A status with no body.
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            kind: Kind::Empty,
            body: Vec::new(),
        }
    }

    /// A status with a JSON body, sent as `kind` (JSON or SSE).
    pub fn message(status: u16, kind: Kind, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            kind,
            body: body.to_string().into_bytes(),
        }
    }

    /// Adds a header.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}
