//! What the tests' own HTTP upstreams read of a request.

use std::collections::HashMap;
use std::io::BufRead;

/// One request read off a connection: its request line, its headers (names
/// lowercase) and its body.
pub(super) struct Received {
    pub line: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// Reads one request from `reader` (its body by `Content-Length`).
pub(super) fn receive(reader: &mut impl BufRead) -> Received {
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
    }
    let length = headers
        .get("content-length")
        .map_or(0, |n| n.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Received {
        line,
        headers,
        body,
    }
}
