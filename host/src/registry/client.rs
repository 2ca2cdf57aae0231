//! The OCI distribution API over `ureq` (blocking, the HTTP stack the host already
//! has): push a component's blobs and manifest, read a manifest by tag or digest, read
//! a blob. Every byte read is checked against the digest that named it.
//!
//! Plain HTTP is used only for a registry on this machine (`localhost`, or a loopback
//! IP address such as `127.0.0.1` or `[::1]`); every other registry is spoken to over
//! HTTPS. Authentication follows the registry's `WWW-Authenticate` challenge: HTTP
//! Basic with the registry's own login, or a bearer token from the token service it
//! names. That login goes to the token service only when it is on the registry's own
//! host over HTTPS (or, for a registry on this machine over plain HTTP, on that same
//! loopback host); any other realm is asked for an anonymous token. Redirects are
//! followed at most [`MAX_REDIRECTS`] times and only within the origin asked, but for
//! a blob download, which may go on to HTTPS storage elsewhere, without any
//! authorization (its bytes are checked against their digest). Each answer is read
//! only up to what it may be: a manifest [`MAX_MANIFEST_BYTES`], a token answer
//! [`MAX_TOKEN_BYTES`], a blob the size its descriptor declares, anything else
//! [`MAX_STATUS_BYTES`].

use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::Duration;

use ureq::Agent;
use ureq::http::{Request, Uri};

use super::RegistryError;
use super::artifact::{Artifact, MANIFEST_MEDIA_TYPE, Manifest};
use super::credentials::{Credentials, Logins};
use super::reference::{Digest, Reference, is_loopback_host};

/// The largest manifest read (the OCI distribution spec's own suggestion).
const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest token service answer read (a JSON object holding a token).
const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// The largest answer read where only its status and headers matter (uploads,
/// `HEAD`, redirects) or an error is summarised.
const MAX_STATUS_BYTES: u64 = 64 << 10;
/// The largest component pulled.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// The redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// A client for OCI registries.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    agent: Agent,
    logins: Logins,
}

/// What the registry answered.
struct Reply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// What a request reads: how much of its answer is read, and where it may be
/// redirected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// A manifest.
    Manifest,
    /// A blob of the size its descriptor declares.
    Blob(u64),
    /// A token service's answer.
    Token,
    /// Nothing but a status and headers (an upload, a `HEAD`).
    Status,
}

impl Reading {
    /// The most bytes of a successful answer that are read.
    fn limit(self) -> u64 {
        match self {
            Self::Manifest => MAX_MANIFEST_BYTES,
            Self::Blob(size) => size,
            Self::Token => MAX_TOKEN_BYTES,
            Self::Status => MAX_STATUS_BYTES,
        }
    }

    /// Whether a redirect may leave the origin asked: only a blob download, whose
    /// bytes are checked against their digest, to HTTPS (ghcr.io and Docker Hub serve
    /// blobs from storage on other hosts); never carrying an authorization.
    fn may_leave_origin(self, to: &Uri) -> bool {
        matches!(self, Self::Blob(_)) && to.scheme_str() == Some("https")
    }
}

/// A pulled manifest and what it names.
#[derive(Debug, Clone)]
pub struct PulledManifest {
    /// Its bytes, whose digest is `digest`.
    pub bytes: Vec<u8>,
    /// Its digest.
    pub digest: Digest,
    /// The component layer's digest.
    pub layer: Digest,
    /// The component layer's size.
    pub layer_size: u64,
}

impl RegistryClient {
    /// A client that authenticates to each registry with its login in `logins` when
    /// the registry asks.
    pub fn new(logins: Logins) -> Self {
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            // Redirects are followed by `Session::send_once`, which checks where each
            // one goes before anything (an authorization above all) is sent there.
            .max_redirects(0)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(300)))
            .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { agent, logins }
    }

    /// Pushes the component `wasm` to `reference` (which names a tag) as a Wasm OCI
    /// artifact; returns the manifest's digest.
    pub fn push(&self, reference: &Reference, wasm: &[u8]) -> Result<Digest, RegistryError> {
        let Some(tag) = &reference.tag else {
            return Err(RegistryError::Protocol {
                reference: reference.to_string(),
                reason: "push needs a tag (oci://REGISTRY/REPOSITORY:TAG); the digest is computed"
                    .into(),
            });
        };
        if reference.digest.is_some() {
            return Err(RegistryError::Protocol {
                reference: reference.to_string(),
                reason: "push takes a tag without a digest; the digest is computed and printed"
                    .into(),
            });
        }
        let artifact = Artifact::of(wasm);
        let mut session = Session::new(self, reference);
        session.upload(&artifact.config)?;
        session.upload(wasm)?;
        let digest = artifact.digest();
        let url = format!("{}/manifests/{tag}", session.repo_url());
        let reply = session.send(
            "PUT",
            &url,
            &[("content-type", MANIFEST_MEDIA_TYPE)],
            Some(&artifact.manifest),
            Reading::Status,
        )?;
        session.expect(&reply, &[201], "storing the manifest")?;
        if let Some(said) = reply.headers.get("docker-content-digest")
            && said != digest.as_str()
        {
            return Err(RegistryError::DigestMismatch {
                reference: reference.to_string(),
                what: "manifest",
                expected: digest.to_string(),
                actual: said.clone(),
            });
        }
        Ok(digest)
    }

    /// Reads the manifest `reference` names (its digest if it has one, else its tag),
    /// checks that its bytes have that digest and that it is a component artifact.
    pub fn manifest(&self, reference: &Reference) -> Result<PulledManifest, RegistryError> {
        let mut session = Session::new(self, reference);
        let url = format!(
            "{}/manifests/{}",
            session.repo_url(),
            reference.manifest_ref()
        );
        let reply = session.send(
            "GET",
            &url,
            &[("accept", MANIFEST_MEDIA_TYPE)],
            None,
            Reading::Manifest,
        )?;
        session.expect(&reply, &[200], "reading the manifest")?;
        let digest = Digest::of(&reply.body);
        if let Some(expected) = &reference.digest
            && *expected != digest
        {
            return Err(RegistryError::DigestMismatch {
                reference: reference.to_string(),
                what: "manifest",
                expected: expected.to_string(),
                actual: digest.to_string(),
            });
        }
        let (_, layer, layer_digest) =
            Manifest::component_layer(&reply.body).map_err(|why| session.protocol(why))?;
        Ok(PulledManifest {
            bytes: reply.body,
            digest,
            layer: layer_digest,
            layer_size: layer.size,
        })
    }

    /// Reads the component layer of `manifest` and checks its size and digest.
    pub fn component(
        &self,
        reference: &Reference,
        manifest: &PulledManifest,
    ) -> Result<Vec<u8>, RegistryError> {
        if manifest.layer_size > MAX_COMPONENT_BYTES {
            return Err(RegistryError::Protocol {
                reference: reference.to_string(),
                reason: format!(
                    "the component is {} bytes, over the limit of {MAX_COMPONENT_BYTES}",
                    manifest.layer_size
                ),
            });
        }
        let mut session = Session::new(self, reference);
        let url = format!("{}/blobs/{}", session.repo_url(), manifest.layer);
        let reply = session.send("GET", &url, &[], None, Reading::Blob(manifest.layer_size))?;
        session.expect(&reply, &[200], "reading the component layer")?;
        let actual = Digest::of(&reply.body);
        if actual != manifest.layer {
            return Err(RegistryError::DigestMismatch {
                reference: reference.to_string(),
                what: "component layer",
                expected: manifest.layer.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(reply.body)
    }
}

/// `scheme://host:port` of `uri`, the port made explicit, the host lowercase; `None`
/// for a URI that is not absolute HTTP(S).
fn origin_of(uri: &Uri) -> Option<(String, String, u16)> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    Some((scheme, host, uri.port_u16().unwrap_or(default)))
}

/// The requests of one operation on one repository, with the authorization the
/// registry asked for once it asked.
struct Session<'a> {
    client: &'a RegistryClient,
    reference: &'a Reference,
    authorization: Option<String>,
}

impl<'a> Session<'a> {
    fn new(client: &'a RegistryClient, reference: &'a Reference) -> Self {
        Self {
            client,
            reference,
            authorization: None,
        }
    }

    /// This registry's login (anonymous when it has none).
    fn login(&self) -> Credentials {
        self.client.logins.for_registry(&self.reference.registry)
    }

    fn origin(&self) -> String {
        let scheme = if self.reference.is_loopback() {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.reference.registry)
    }

    fn repo_url(&self) -> String {
        format!("{}/v2/{}", self.origin(), self.reference.repository)
    }

    fn protocol(&self, reason: String) -> RegistryError {
        RegistryError::Protocol {
            reference: self.reference.to_string(),
            reason,
        }
    }

    /// Sends a request; on a 401, answers the challenge once and sends it again.
    fn send(
        &mut self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        reading: Reading,
    ) -> Result<Reply, RegistryError> {
        let attempt = |session: &Self| {
            let authorization = session.authorization.clone();
            session.send_once(method, url, headers, body, authorization, reading)
        };
        let reply = attempt(self)?;
        if reply.status != 401 {
            return Ok(reply);
        }
        let challenge = reply
            .headers
            .get("www-authenticate")
            .cloned()
            .unwrap_or_default();
        self.authorization = Some(self.answer(&challenge)?);
        let reply = attempt(self)?;
        if reply.status == 401 {
            return Err(self.unauthorized("the registry refused the credentials"));
        }
        Ok(reply)
    }

    fn unauthorized(&self, why: &str) -> RegistryError {
        RegistryError::Unauthorized {
            reference: self.reference.to_string(),
            reason: if self.login().is_anonymous() {
                format!(
                    "{why}; it needs credentials: give the registry a login with [registries.\"{}\"] secrets_file in justonce.toml (a file of {} and {}), or set those two in the environment",
                    self.reference.registry,
                    super::credentials::USERNAME_VAR,
                    super::credentials::PASSWORD_VAR
                )
            } else {
                why.to_owned()
            },
        }
    }

    /// Whether the registry's login may go to the token service at `realm`: on the
    /// registry's own host over HTTPS, or over plain HTTP only where the registry is
    /// itself on this machine over plain HTTP and the realm is that same loopback
    /// host. Anywhere else a login would leave the registry it was given for.
    fn login_may_go_to(&self, realm: &Uri) -> bool {
        let Some((scheme, host, _)) = origin_of(realm) else {
            return false;
        };
        if !host.eq_ignore_ascii_case(self.reference.host()) {
            return false;
        }
        match scheme.as_str() {
            "https" => true,
            _ => self.reference.is_loopback() && is_loopback_host(&host),
        }
    }

    /// The `Authorization` value that answers `challenge`.
    fn answer(&self, challenge: &str) -> Result<String, RegistryError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return self
                .login()
                .basic()
                .ok_or_else(|| self.unauthorized("the registry asks for a login"));
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(self.unauthorized(&format!(
                "the registry asks for `{scheme}` authentication, which is not supported (Basic and Bearer are)"
            )));
        }
        let params = challenge_params(params);
        let realm = params
            .get("realm")
            .ok_or_else(|| self.protocol("the Bearer challenge names no realm".into()))?;
        let mut url = realm.clone();
        let mut sep = if url.contains('?') { '&' } else { '?' };
        for name in ["service", "scope"] {
            if let Some(value) = params.get(name) {
                url.push(sep);
                url.push_str(name);
                url.push('=');
                url.push_str(&percent_encode(value));
                sep = '&';
            }
        }
        let uri: Uri = url
            .parse()
            .ok()
            .filter(|u| origin_of(u).is_some())
            .ok_or_else(|| {
                self.protocol(format!(
                    "the Bearer challenge's realm {realm:?} is not an http(s) URL"
                ))
            })?;
        let login = if self.login_may_go_to(&uri) {
            self.login().basic()
        } else {
            if !self.login().is_anonymous() {
                tracing::warn!(
                    registry = %self.reference.registry,
                    realm = %realm,
                    "the registry's token service is not on its own host over HTTPS; asking it for an anonymous token, without the registry's login"
                );
            }
            None
        };
        let reply = self.send_once("GET", &url, &[], None, login, Reading::Token)?;
        if reply.status == 401 || reply.status == 403 {
            return Err(self.unauthorized("the registry's token service refused the credentials"));
        }
        if reply.status != 200 {
            return Err(self.protocol(format!(
                "the registry's token service answered {}",
                reply.status
            )));
        }
        let token: serde_json::Value = serde_json::from_slice(&reply.body)
            .map_err(|_| self.protocol("the token service's answer is not JSON".into()))?;
        let token = token
            .get("token")
            .or_else(|| token.get("access_token"))
            .and_then(|t| t.as_str())
            .ok_or_else(|| self.protocol("the token service's answer holds no token".into()))?;
        Ok(format!("Bearer {token}"))
    }

    /// Sends a request with `authorization`, following a `GET`'s or `HEAD`'s
    /// redirects within the origin of `url` (a blob's to HTTPS storage elsewhere too,
    /// without the authorization), at most [`MAX_REDIRECTS`] of them.
    fn send_once(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        mut authorization: Option<String>,
        reading: Reading,
    ) -> Result<Reply, RegistryError> {
        let start = url
            .parse::<Uri>()
            .map_err(|e| self.protocol(format!("{url}: {e}")))?;
        let mut url = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            let reply = self.exchange(
                method,
                &url,
                headers,
                body,
                authorization.as_deref(),
                reading,
            )?;
            let redirect = matches!(reply.status, 301 | 302 | 303 | 307 | 308);
            if !redirect || !matches!(method, "GET" | "HEAD") {
                return Ok(reply);
            }
            let location = reply.headers.get("location").ok_or_else(|| {
                self.protocol(format!(
                    "{url} answered {} without a Location",
                    reply.status
                ))
            })?;
            let next = resolve_location(&url, location).ok_or_else(|| {
                self.protocol(format!("{url} redirected to {location:?}, not a URL"))
            })?;
            let to: Uri = next.parse().map_err(|_| {
                self.protocol(format!("{url} redirected to {location:?}, not a URL"))
            })?;
            let same_origin = origin_of(&to).is_some() && origin_of(&to) == origin_of(&start);
            if !same_origin {
                if !reading.may_leave_origin(&to) {
                    return Err(self.protocol(format!(
                        "{url} redirected to {next}, another origin; refused (only redirects within the registry's origin are followed)"
                    )));
                }
                // An authorization is the registry's; storage elsewhere gets none.
                authorization = None;
            }
            url = next;
        }
        Err(self.protocol(format!(
            "{url}: more than {MAX_REDIRECTS} redirects; refused"
        )))
    }

    /// One request and its answer, read up to what `reading` allows.
    fn exchange(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        authorization: Option<&str>,
        reading: Reading,
    ) -> Result<Reply, RegistryError> {
        let mut request = Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        let unreachable = |reason: String| RegistryError::Unreachable {
            reference: self.reference.to_string(),
            reason,
        };
        // The URL never holds a credential (they travel in headers), so it may be shown.
        let sent = match body {
            Some(body) => request
                .header("content-length", body.len().to_string())
                .body(body)
                .map_err(|e| self.protocol(e.to_string()))
                .map(|r| self.client.agent.run(r)),
            None => request
                .body(())
                .map_err(|e| self.protocol(e.to_string()))
                .map(|r| self.client.agent.run(r)),
        }?;
        let mut response = sent.map_err(|e| unreachable(format!("{url}: {e}")))?;
        let status = response.status().as_u16();
        let mut headers = BTreeMap::new();
        for (name, value) in response.headers() {
            headers.insert(
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            );
        }
        // An error's body is only summarised: what fits is enough.
        let success = (200..300).contains(&status);
        let limit = if success {
            reading.limit()
        } else {
            MAX_STATUS_BYTES
        };
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(limit + 1)
            .read_to_end(&mut body)
            .map_err(|e| unreachable(format!("{url}: the answer was cut off: {e}")))?;
        if body.len() as u64 > limit {
            if success {
                return Err(self.protocol(format!(
                    "{url} answered more than {limit} bytes, the most {} may be; refused",
                    match reading {
                        Reading::Manifest => "a manifest",
                        Reading::Blob(_) => "the blob (the size its descriptor declares)",
                        Reading::Token => "a token service's answer",
                        Reading::Status => "this answer",
                    }
                )));
            }
            body.truncate(limit as usize);
        }
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// `Ok` when the status is one of `ok`; else the error that says what failed.
    fn expect(&self, reply: &Reply, ok: &[u16], doing: &str) -> Result<(), RegistryError> {
        if ok.contains(&reply.status) {
            return Ok(());
        }
        let detail = registry_errors(&reply.body);
        let reference = self.reference.to_string();
        Err(match reply.status {
            404 => RegistryError::NotFound {
                reference,
                reason: format!("{doing}: 404 {detail}"),
            },
            403 => self.unauthorized(&format!("{doing}: 403 {detail}")),
            status => RegistryError::Protocol {
                reference,
                reason: format!("{doing}: the registry answered {status} {detail}"),
            },
        })
    }

    /// Uploads one blob (monolithically), unless the repository has it already.
    fn upload(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        let digest = Digest::of(bytes);
        let blob = format!("{}/blobs/{digest}", self.repo_url());
        if self.send("HEAD", &blob, &[], None, Reading::Status)?.status == 200 {
            return Ok(());
        }
        let start = format!("{}/blobs/uploads/", self.repo_url());
        let reply = self.send("POST", &start, &[], Some(&[]), Reading::Status)?;
        self.expect(&reply, &[202], "starting an upload")?;
        let location = reply
            .headers
            .get("location")
            .ok_or_else(|| self.protocol("the upload was started without a Location".into()))?;
        let mut url = resolve_location(&self.origin(), location).ok_or_else(|| {
            self.protocol(format!("the upload's Location {location:?} is not a URL"))
        })?;
        // The blob and the authorization go to the registry, nowhere else it names.
        let registry = self.origin().parse::<Uri>().ok();
        let target = url.parse::<Uri>().ok().as_ref().and_then(origin_of);
        if target.is_none() || registry.as_ref().and_then(origin_of) != target {
            return Err(self.protocol(format!(
                "the upload's Location {url} is not on the registry's origin; refused"
            )));
        }
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str("digest=");
        url.push_str(&percent_encode(digest.as_str()));
        let reply = self.send(
            "PUT",
            &url,
            &[("content-type", "application/octet-stream")],
            Some(bytes),
            Reading::Status,
        )?;
        self.expect(&reply, &[201], "uploading a blob")
    }
}

/// The absolute URL a `Location` names, seen from `base` (an absolute URL): an
/// absolute one as it is, a path on `base`'s origin; `None` for anything else.
fn resolve_location(base: &str, location: &str) -> Option<String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return Some(location.to_owned());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        let uri: Uri = base.parse().ok()?;
        let origin = format!("{}://{}", uri.scheme_str()?, uri.authority()?);
        return Some(format!("{origin}{location}"));
    }
    None
}

/// The `name="value"` pairs of a challenge.
fn challenge_params(text: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    let mut rest = text.trim();
    while let Some((name, after)) = rest.split_once('=') {
        let name = name
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            },
        };
        params.insert(name, value.to_owned());
        rest = next.trim_start().trim_start_matches(',');
    }
    params
}

/// `value` with everything but unreserved characters percent-encoded.
fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The `errors` of a registry's error body (`code: message`, joined), or nothing.
fn registry_errors(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let errors: Vec<String> = value["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}: {}",
                e["code"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    if errors.is_empty() {
        String::new()
    } else {
        format!("({})", errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A request a fake server saw: its path and `Authorization`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Seen {
        path: String,
        authorization: Option<String>,
    }

    /// A fake HTTP server on the loopback address `ip`, answering each request with
    /// the bytes `answer` makes of what it saw (status line and all), for at most 64
    /// requests; its `HOST:PORT` and what it saw.
    fn serve(
        ip: &str,
        answer: impl Fn(&Seen) -> Vec<u8> + Send + 'static,
    ) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap_or(0);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                let mut authorization = None;
                for _ in 0..100 {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorization = Some(value.trim().to_owned());
                    }
                }
                let request = Seen {
                    path,
                    authorization,
                };
                let reply = answer(&request);
                log.lock().unwrap().push(request);
                // The client may hang up before a reply it refuses is whole.
                let _ = stream.write_all(&reply);
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        (address, seen)
    }

    /// An HTTP/1.1 reply with `headers` and `body`.
    fn reply(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(body);
        out
    }

    fn reference(registry: &str) -> Reference {
        format!("oci://{registry}/shop/refund:v1").parse().unwrap()
    }

    /// A registry on 127.0.0.1 that asks for a bearer token from `realm`, and what
    /// it saw.
    fn bearer_registry(realm: String) -> (String, Arc<Mutex<Vec<Seen>>>) {
        serve("127.0.0.1", move |seen| {
            if seen.authorization.as_deref() == Some("Bearer t0k") {
                reply("404 Not Found", &[], b"")
            } else {
                let challenge = format!("Bearer realm=\"{realm}\",service=\"registry\"");
                reply("401 Unauthorized", &[("WWW-Authenticate", &challenge)], b"")
            }
        })
    }

    fn token_service(ip: &str) -> (String, Arc<Mutex<Vec<Seen>>>) {
        serve(ip, |_| reply("200 OK", &[], br#"{"token":"t0k"}"#))
    }

    #[test]
    fn a_registrys_login_goes_to_no_token_service_off_its_host_and_to_its_own_loopback_one() {
        // The realm on another (loopback) host over plain HTTP: asked anonymously.
        let (elsewhere, asked) = token_service("127.0.0.2");
        let (registry, _) = bearer_registry(format!("http://{elsewhere}/token"));
        let client = RegistryClient::new(
            Logins::anonymous().with(&registry, Credentials::login("user", "secret")),
        );
        let err = client.manifest(&reference(&registry)).unwrap_err();
        assert!(matches!(err, RegistryError::NotFound { .. }), "{err}");
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].authorization, None, "the login stayed home");

        // The realm on the registry's own loopback host: the login goes with it.
        let (own, asked) = token_service("127.0.0.1");
        let (registry, _) = bearer_registry(format!("http://{own}/token"));
        let client = RegistryClient::new(
            Logins::anonymous().with(&registry, Credentials::login("user", "secret")),
        );
        let err = client.manifest(&reference(&registry)).unwrap_err();
        assert!(matches!(err, RegistryError::NotFound { .. }), "{err}");
        let asked = asked.lock().unwrap().clone();
        assert_eq!(
            asked[0].authorization,
            Credentials::login("user", "secret").basic()
        );

        // Another registry's login is not this one's.
        let (own, asked) = token_service("127.0.0.1");
        let (registry, _) = bearer_registry(format!("http://{own}/token"));
        let client = RegistryClient::new(
            Logins::anonymous().with("127.0.0.1:1", Credentials::login("user", "secret")),
        );
        let _ = client.manifest(&reference(&registry));
        assert_eq!(asked.lock().unwrap()[0].authorization, None);
    }

    #[test]
    fn only_a_same_host_https_realm_or_the_registrys_own_loopback_host_gets_the_login() {
        let client = RegistryClient::new(Logins::anonymous());
        let may = |registry: &str, realm: &str| {
            let reference = reference(registry);
            Session::new(&client, &reference).login_may_go_to(&realm.parse().unwrap())
        };
        assert!(may("ghcr.io", "https://ghcr.io/token"));
        assert!(may("ghcr.io", "https://GHCR.io:8443/token"));
        assert!(!may("ghcr.io", "http://ghcr.io/token"), "plain HTTP");
        assert!(!may("ghcr.io", "https://auth.ghcr.io/token"));
        assert!(!may("ghcr.io", "https://ghcr.io.evil.example/token"));
        assert!(may("127.0.0.1:5000", "http://127.0.0.1:5001/token"));
        assert!(!may("127.0.0.1:5000", "http://127.0.0.2:5001/token"));
        assert!(!may("127.evil.com:5000", "http://127.evil.com/token"));
    }

    #[test]
    fn redirects_are_followed_within_the_origin_only_and_at_most_five_times() {
        let (elsewhere, visited) = serve("127.0.0.2", |_| reply("200 OK", &[], b"{}"));
        let (registry, seen) = serve("127.0.0.1", move |seen| {
            if seen.path.ends_with("/manifests/away") {
                let to = format!("http://{elsewhere}/steal");
                reply("307 Temporary Redirect", &[("Location", &to)], b"")
            } else {
                let to = seen.path.clone();
                reply("302 Found", &[("Location", &to)], b"")
            }
        });
        let client = RegistryClient::new(
            Logins::anonymous().with(&registry, Credentials::login("user", "secret")),
        );
        let mut away = reference(&registry);
        away.tag = Some("away".into());
        let err = client.manifest(&away).unwrap_err();
        assert!(err.to_string().contains("another origin"), "{err}");
        assert!(
            visited.lock().unwrap().is_empty(),
            "no request left the registry"
        );

        let err = client.manifest(&reference(&registry)).unwrap_err();
        assert!(err.to_string().contains("more than 5 redirects"), "{err}");
        assert_eq!(seen.lock().unwrap().len(), 1 + 1 + MAX_REDIRECTS);
    }

    #[test]
    fn each_answer_is_read_only_up_to_what_it_may_be() {
        // A token answer of a mebibyte.
        let (token, _) = serve("127.0.0.1", |_| {
            let mut body = br#"{"token":""#.to_vec();
            body.extend(std::iter::repeat_n(b'a', 1 << 20));
            body.extend_from_slice(br#""}"#);
            reply("200 OK", &[], &body)
        });
        let (registry, _) = bearer_registry(format!("http://{token}/token"));
        let client = RegistryClient::new(Logins::anonymous());
        let err = client.manifest(&reference(&registry)).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("more than {MAX_TOKEN_BYTES} bytes")),
            "{err}"
        );

        // A manifest over 4 MiB, and a blob longer than its descriptor says.
        let (registry, _) = serve("127.0.0.1", |seen| {
            let size = if seen.path.contains("/manifests/") {
                (MAX_MANIFEST_BYTES + 1) as usize
            } else {
                1 << 20
            };
            reply("200 OK", &[], &vec![b' '; size])
        });
        let err = client.manifest(&reference(&registry)).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("more than {MAX_MANIFEST_BYTES} bytes")),
            "{err}"
        );
        let wasm = b"\0asm\x0d\0\x01\0".to_vec();
        let pulled = PulledManifest {
            bytes: Vec::new(),
            digest: Digest::of(b""),
            layer: Digest::of(&wasm),
            layer_size: wasm.len() as u64,
        };
        let err = client
            .component(&reference(&registry), &pulled)
            .unwrap_err();
        assert!(
            matches!(&err, RegistryError::Protocol { reason, .. } if reason.contains("more than 8 bytes")),
            "{err}"
        );
    }

    #[test]
    fn a_bearer_challenge_is_read_with_quoted_commas_and_colons() {
        let params = challenge_params(
            r#"realm="https://ghcr.io/token",service="ghcr.io",scope="repository:acme/refund:pull,push""#,
        );
        assert_eq!(params["realm"], "https://ghcr.io/token");
        assert_eq!(params["service"], "ghcr.io");
        assert_eq!(params["scope"], "repository:acme/refund:pull,push");
        assert_eq!(
            percent_encode("repository:a/b:pull,push"),
            "repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }

    #[test]
    fn a_registry_error_body_is_summarised_and_anything_else_is_not_shown() {
        let body =
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#;
        assert_eq!(
            registry_errors(body),
            "(MANIFEST_UNKNOWN: manifest unknown)"
        );
        assert_eq!(registry_errors(b"<html>secret page</html>"), "");
    }
}
