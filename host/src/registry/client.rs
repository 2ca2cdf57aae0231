//! The OCI distribution API over `ureq` (blocking, the HTTP stack the host already
//! has): push a component's blobs and manifest, read a manifest by tag or digest, read
//! a blob. Every byte read is checked against the digest that named it.
//!
//! Plain HTTP is used only for a registry on this machine (`localhost`, `127.*`,
//! `[::1]`); every other registry is spoken to over HTTPS. Authentication follows the
//! registry's `WWW-Authenticate` challenge: HTTP Basic with the credentials, or a
//! bearer token from the token service it names (anonymous, or with the credentials).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::time::Duration;

use ureq::Agent;
use ureq::http::Request;

use super::RegistryError;
use super::artifact::{Artifact, MANIFEST_MEDIA_TYPE, Manifest};
use super::credentials::Credentials;
use super::reference::{Digest, Reference};

/// The largest manifest read (the spec's own suggestion is 4 MiB).
const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest component pulled.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// A client for OCI registries.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    agent: Agent,
    credentials: Credentials,
}

/// What the registry answered.
struct Reply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
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
    /// A client that authenticates with `credentials` when a registry asks.
    pub fn new(credentials: Credentials) -> Self {
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            // Blob downloads may be redirected to storage; the credentials are not
            // sent along (ureq's default).
            .max_redirects(5)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(300)))
            .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { agent, credentials }
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
        let reply = session.send("GET", &url, &[("accept", MANIFEST_MEDIA_TYPE)], None)?;
        session.expect(&reply, &[200], "reading the manifest")?;
        if reply.body.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(
                session.protocol(format!("the manifest is over {MAX_MANIFEST_BYTES} bytes"))
            );
        }
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
        let reply = session.send("GET", &url, &[], None)?;
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
    ) -> Result<Reply, RegistryError> {
        let reply = self.send_once(method, url, headers, body)?;
        if reply.status != 401 {
            return Ok(reply);
        }
        let challenge = reply
            .headers
            .get("www-authenticate")
            .cloned()
            .unwrap_or_default();
        self.authorization = Some(self.answer(&challenge)?);
        let reply = self.send_once(method, url, headers, body)?;
        if reply.status == 401 {
            return Err(self.unauthorized("the registry refused the credentials"));
        }
        Ok(reply)
    }

    fn unauthorized(&self, why: &str) -> RegistryError {
        RegistryError::Unauthorized {
            reference: self.reference.to_string(),
            reason: if self.client.credentials.is_anonymous() {
                format!(
                    "{why}; it needs credentials: set {} and {} (in the environment or the registry secrets file)",
                    super::credentials::USERNAME_VAR,
                    super::credentials::PASSWORD_VAR
                )
            } else {
                why.to_owned()
            },
        }
    }

    /// The `Authorization` value that answers `challenge`.
    fn answer(&self, challenge: &str) -> Result<String, RegistryError> {
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return self
                .client
                .credentials
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
        let mut request = Request::builder().method("GET").uri(url.as_str());
        if let Some(basic) = self.client.credentials.basic() {
            request = request.header("authorization", basic);
        }
        let request = request.body(()).map_err(|e| self.protocol(e.to_string()))?;
        let reply = self.run(request, &url)?;
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

    fn send_once(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Reply, RegistryError> {
        let mut request = Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header("authorization", authorization.as_str());
        }
        match body {
            Some(body) => {
                let request = request
                    .header("content-length", body.len().to_string())
                    .body(body)
                    .map_err(|e| self.protocol(e.to_string()))?;
                self.run(request, url)
            }
            None => {
                let request = request.body(()).map_err(|e| self.protocol(e.to_string()))?;
                self.run(request, url)
            }
        }
    }

    fn run(
        &self,
        request: Request<impl ureq::AsSendBody>,
        url: &str,
    ) -> Result<Reply, RegistryError> {
        let unreachable = |reason: String| RegistryError::Unreachable {
            reference: self.reference.to_string(),
            reason,
        };
        // The URL never holds a credential (they travel in headers), so it may be shown.
        let mut response = self
            .client
            .agent
            .run(request)
            .map_err(|e| unreachable(format!("{url}: {e}")))?;
        let status = response.status().as_u16();
        let mut headers = BTreeMap::new();
        for (name, value) in response.headers() {
            headers.insert(
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            );
        }
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_COMPONENT_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| unreachable(format!("{url}: the answer was cut off: {e}")))?;
        if body.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(self.protocol(format!(
                "{url} answered more than {MAX_COMPONENT_BYTES} bytes"
            )));
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
        if self.send("HEAD", &blob, &[], None)?.status == 200 {
            return Ok(());
        }
        let start = format!("{}/blobs/uploads/", self.repo_url());
        let reply = self.send("POST", &start, &[], Some(&[]))?;
        self.expect(&reply, &[202], "starting an upload")?;
        let location = reply
            .headers
            .get("location")
            .ok_or_else(|| self.protocol("the upload was started without a Location".into()))?;
        let mut url = if location.starts_with('/') {
            format!("{}{location}", self.origin())
        } else {
            location.clone()
        };
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str("digest=");
        url.push_str(&percent_encode(digest.as_str()));
        let reply = self.send(
            "PUT",
            &url,
            &[("content-type", "application/octet-stream")],
            Some(bytes),
        )?;
        self.expect(&reply, &[201], "uploading a blob")
    }
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
    use super::*;

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
