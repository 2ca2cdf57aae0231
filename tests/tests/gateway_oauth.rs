//! OAuth to an HTTP upstream (docs/gateway.md, "OAuth to an upstream"): the host
//! fetches the access token with the client credentials grant (or reads it from a
//! token file), sends it as `Authorization: Bearer`, fetches a new one when the
//! upstream refuses it (HTTP 401: not processed, the call sent once more under the
//! same key), and strips it from everything the upstream gives back. The upstream
//! and the token endpoint are the tests' own, one Rust server: it accepts only the
//! token it issued last (or the one the test names), counts its fetches and calls,
//! and echoes the token it was sent in each result.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::mcp_gateway_credentials::Served;

/// The client's secret, in the secrets file only.
const SECRET: &str = "cs_live_0c4f7a9e2d61";

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// The tokens it issued, in order.
    issued: Vec<String>,
    /// The token it accepts now (none: the last issued one was rotated out).
    accepted: Option<String>,
    /// Each `tools/call` POST: its `Idempotency-Key`, and whether it was refused.
    calls: Vec<(String, bool)>,
    /// The `Authorization` of each `/token` request.
    clients: Vec<String>,
    /// The form of each `/token` request.
    forms: Vec<Vec<(String, String)>>,
    /// The refresh tokens it issued, in order.
    refresh_tokens: Vec<String>,
}

/// The token endpoint (`/token`) and the MCP server (`/mcp`), on one port.
struct Server {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

impl Server {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let state = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let state = Arc::clone(&state);
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Self { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The server accepts no token it issued so far: the next one it issues.
    fn rotate(&self) {
        self.seen.lock().unwrap().accepted = None;
    }

    /// The server accepts `token` (one it did not issue: a token file's).
    fn accept(&self, token: &str) {
        self.seen.lock().unwrap().accepted = Some(token.to_owned());
    }
}

/// One request: its request line, its headers (lowercase names), its body.
type Request = (String, Vec<(String, String)>, Vec<u8>);

/// The request `reader` reads.
fn receive(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((line, headers, body))
}

/// The fields of a form body (the values the tests send need no decoding).
fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

fn respond(stream: &mut TcpStream, status: u16, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn serve(mut stream: TcpStream, seen: &Mutex<Seen>) {
    let Some((line, headers, body)) = receive(&mut BufReader::new(&stream)) else {
        return;
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    if line.starts_with("POST /token ") {
        let mut seen = seen.lock().unwrap();
        seen.clients.push(header("authorization"));
        seen.forms.push(form_fields(&body));
        let token = format!("at_issued_{}_5b9d3e7f", seen.issued.len() + 1);
        let refresh = format!("rt_issued_{}_8e0a2c4d", seen.issued.len() + 1);
        seen.issued.push(token.clone());
        seen.refresh_tokens.push(refresh.clone());
        seen.accepted = Some(token.clone());
        let answer = json!({
            "access_token": token,
            "token_type": "bearer",
            "expires_in": 3600,
            "refresh_token": refresh,
        });
        return respond(&mut stream, 200, &answer.to_string());
    }
    if !line.starts_with("POST /mcp ") {
        return respond(&mut stream, 405, "");
    }
    let message: Value = serde_json::from_slice(&body).unwrap();
    let method = message["method"].as_str().unwrap_or("");
    let token = header("authorization")
        .strip_prefix("Bearer ")
        .unwrap_or_default()
        .to_owned();
    let accepted = {
        let mut seen = seen.lock().unwrap();
        let accepted = seen.accepted.as_deref() == Some(token.as_str());
        if method == "tools/call" {
            seen.calls.push((header("idempotency-key"), !accepted));
        }
        accepted
    };
    if !accepted {
        return respond(&mut stream, 401, r#"{"error":"invalid_token"}"#);
    }
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "oauth-echo", "version": "1" },
        }),
        "tools/list" => json!({ "tools": [{
            "name": "whoami",
            "description": "Echoes the bearer token it was sent.",
            "inputSchema": { "type": "object", "properties": { "n": { "type": "integer" } } },
        }] }),
        "tools/call" => json!({
            "content": [{ "type": "text", "text": format!("you are {token}") }],
            "structuredContent": { "token": token, "n": message["params"]["arguments"]["n"] },
        }),
        _ if message.get("id").is_none() => return respond(&mut stream, 202, ""),
        _ => json!({}),
    };
    let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": result });
    respond(&mut stream, 200, &answer.to_string());
}

/// `whoami` called with `n` through `served`: its result, which must be a success.
fn whoami(served: &mut Served, n: u64) -> Value {
    let response = served.client.call("whoami", json!({ "n": n }), json!({}));
    let result = response["result"].clone();
    assert_ne!(result["isError"], true, "{response}");
    assert_eq!(result["structuredContent"]["n"], n, "{response}");
    result
}

/// Writes `text` to the file at `path` and sets its modification time to `at`.
fn rewrite(path: &Path, text: &str, at: SystemTime) {
    std::fs::write(path, text).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(at).unwrap();
}

/// `[upstreams.api]` at the server, its `oauth` section `oauth`.
fn configure(dir: &Path, server: &Server, oauth: &str) {
    std::fs::write(dir.join("api.env"), format!("API_SECRET={SECRET}\n")).unwrap();
    std::fs::write(
        dir.join("justonce.toml"),
        format!(
            "[upstreams.api]\nurl = {:?}\nsecrets_file = \"api.env\"\n[upstreams.api.oauth]\n{oauth}\n",
            server.url("/mcp")
        ),
    )
    .unwrap();
}

/// The client credentials grant at the server's `/token`, the secret from the
/// secrets file, with the keys `more`.
fn grant(server: &Server, more: &str) -> String {
    format!(
        "token_url = {:?}\nclient_id = \"justonce-gw\"\nclient_secret = \"${{API_SECRET}}\"\n{more}",
        server.url("/token")
    )
}

#[test]
fn a_token_is_fetched_once_sent_as_bearer_refreshed_after_a_401_and_never_shown() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &server, &grant(&server, "scope = \"tools\""));
    let mut served = Served::start(dir.path());
    let mut told = Vec::new();
    for n in 1..=4 {
        told.push(whoami(&mut served, n));
    }
    {
        let seen = server.seen.lock().unwrap();
        assert_eq!(seen.issued.len(), 1, "one token for every call");
        assert_eq!(seen.calls.len(), 4);
        assert!(seen.calls.iter().all(|(_, refused)| !refused));
        assert!(seen.clients[0].starts_with("Basic "), "{:?}", seen.clients);
    }
    // Each result echoed the token: the agent saw it stripped.
    for result in &told {
        assert_eq!(
            result["structuredContent"]["token"], "[redacted]",
            "{result}"
        );
        assert_eq!(
            result["content"][0]["text"], "you are [redacted]",
            "{result}"
        );
    }

    // The server rotates: the token is refused, a new one fetched, the call sent
    // once more under the same key and performed once.
    server.rotate();
    let after = whoami(&mut served, 5);
    assert_eq!(after["structuredContent"]["token"], "[redacted]", "{after}");
    let seen = server.seen.lock().unwrap();
    assert_eq!(
        seen.issued.len(),
        2,
        "fetched again once: {:?}",
        seen.issued
    );
    let last: Vec<&(String, bool)> = seen.calls[4..].iter().collect();
    assert_eq!(last.len(), 2, "{last:?}");
    assert!(last[0].1 && !last[1].1, "refused, then performed: {last:?}");
    assert_eq!(last[0].0, last[1].0, "both attempts under one key");
    assert!(!last[0].0.is_empty());
    let performed = seen.calls.iter().filter(|(_, refused)| !refused).count();
    assert_eq!(performed, 5, "each call performed once");
    let issued = seen.issued.clone();
    drop(seen);

    let log = served.close();
    assert!(
        log.contains("refused its OAuth access token (HTTP 401)"),
        "{log}"
    );
    for token in issued.iter().map(String::as_str).chain([SECRET]) {
        assert!(!log.contains(token), "the log holds {token}: {log}");
        for result in &told {
            assert!(!result.to_string().contains(token), "{result}");
        }
        assert!(!after.to_string().contains(token), "{after}");
    }
}

#[test]
fn a_token_file_is_read_again_when_a_helper_replaces_it() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("api.token");
    std::fs::write(&file, "tf_first_3a8c5e1b9d\n").unwrap();
    server.accept("tf_first_3a8c5e1b9d");
    configure(dir.path(), &server, "token_file = \"api.token\"");
    let mut served = Served::start(dir.path());
    let first = whoami(&mut served, 1);
    assert_eq!(first["structuredContent"]["token"], "[redacted]", "{first}");

    // The helper writes a new token (a later modification time) and the server
    // accepts only it: the next call is sent with it, not refused.
    let then = std::fs::metadata(&file).unwrap().modified().unwrap();
    rewrite(
        &file,
        "tf_second_7e2d4f6a0c\n",
        then + Duration::from_secs(5),
    );
    server.accept("tf_second_7e2d4f6a0c");
    let second = whoami(&mut served, 2);
    assert_eq!(
        second["structuredContent"]["token"], "[redacted]",
        "{second}"
    );
    {
        let seen = server.seen.lock().unwrap();
        assert_eq!(seen.calls.len(), 2, "{:?}", seen.calls);
        assert!(seen.calls.iter().all(|(_, refused)| !refused));
        assert!(seen.issued.is_empty(), "no token endpoint");
    }
    let log = served.close();
    for token in ["tf_first_3a8c5e1b9d", "tf_second_7e2d4f6a0c"] {
        assert!(!log.contains(token), "{log}");
        assert!(!first.to_string().contains(token), "{first}");
        assert!(!second.to_string().contains(token), "{second}");
    }
}

#[test]
fn client_secret_post_sends_the_client_in_the_form_and_its_refresh_token_is_never_shown() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    configure(
        dir.path(),
        &server,
        &grant(&server, "client_auth = \"client_secret_post\""),
    );
    let mut served = Served::start(dir.path());
    let told = whoami(&mut served, 1);
    assert_eq!(told["structuredContent"]["token"], "[redacted]", "{told}");
    let (issued, refresh) = {
        let seen = server.seen.lock().unwrap();
        assert_eq!(seen.clients, [""], "no Basic header: {:?}", seen.clients);
        let form = &seen.forms[0];
        for (name, value) in [
            ("grant_type", "client_credentials"),
            ("client_id", "justonce-gw"),
            ("client_secret", SECRET),
        ] {
            assert!(
                form.iter().any(|(n, v)| n == name && v == value),
                "{name}={value} in {form:?}"
            );
        }
        (seen.issued.clone(), seen.refresh_tokens.clone())
    };
    let log = served.close();
    for secret in issued
        .iter()
        .chain(&refresh)
        .map(String::as_str)
        .chain([SECRET])
    {
        assert!(!log.contains(secret), "the log holds {secret}: {log}");
        assert!(!told.to_string().contains(secret), "{told}");
    }
}
