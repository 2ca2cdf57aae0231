//! The issuer's signing keys (its JWKS): fetched over HTTP from the configured
//! `jwks_url` or the `jwks_uri` of the issuer's metadata, kept, and fetched again
//! when a token names a key not seen yet (a rotation), at most once per
//! [`KeyCache::MIN_REFRESH`] on the host's clock, so tokens with made-up key ids
//! cannot make the server hammer the issuer; and one fetch at a time, on a thread of
//! its own, so a slow issuer cannot hold the HTTP server's workers.

use std::io::Read as _;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{Jwk, JwkSet};

use super::TokenRefused;
use crate::clock::{Clock, millis};

/// The largest metadata or JWKS document read, in bytes.
const MAX_DOCUMENT_BYTES: u64 = 1 << 20;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the issuer's keys could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// A document could not be fetched (unreachable, not 200, too large).
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// What was fetched.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// A document is not what it should be (not JSON, no `jwks_uri`, another issuer).
    #[error("{url}: {reason}")]
    Malformed {
        /// What was fetched.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Another request is fetching the keys; this one does not wait for it.
    #[error("the issuer's keys are being fetched for another request")]
    Busy,
    /// The fetch did not end in time (it goes on, and the next token may find the
    /// keys).
    #[error("the issuer's keys did not come within {0:?}")]
    Late(Duration),
    /// No thread could be started to fetch them.
    #[error("cannot start fetching the issuer's keys: {0}")]
    Thread(String),
}

/// Where the keys come from.
pub trait KeySource: Send + Sync {
    /// The issuer's current key set.
    fn fetch(&self) -> Result<JwkSet, KeysError>;
}

/// The keys of an issuer, over HTTP: from `jwks_url` when given, else from the
/// `jwks_uri` its metadata names (RFC 8414's
/// `/.well-known/oauth-authorization-server`, then OpenID Connect's
/// `/.well-known/openid-configuration`); that metadata must name the same issuer.
#[derive(Debug)]
pub struct HttpKeys {
    issuer: String,
    jwks_url: Mutex<Option<String>>,
    agent: ureq::Agent,
}

impl HttpKeys {
    /// The keys of `issuer`, at `jwks_url` or discovered from its metadata.
    pub fn new(issuer: &str, jwks_url: Option<&str>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(FETCH_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        Self {
            issuer: issuer.to_owned(),
            jwks_url: Mutex::new(jwks_url.map(str::to_owned)),
            agent,
        }
    }

    /// The JWKS URL: configured, or found in the issuer's metadata (once).
    fn jwks_url(&self) -> Result<String, KeysError> {
        let mut known = self.jwks_url.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(url) = &*known {
            return Ok(url.clone());
        }
        let mut last = None;
        for url in metadata_urls(&self.issuer) {
            match self.get_json(&url) {
                Ok(doc) => {
                    let found = doc.get("issuer").and_then(|i| i.as_str());
                    if found != Some(self.issuer.as_str()) {
                        return Err(KeysError::Malformed {
                            url,
                            reason: format!(
                                "the metadata names the issuer {found:?}, not {:?}",
                                self.issuer
                            ),
                        });
                    }
                    let Some(jwks) = doc.get("jwks_uri").and_then(|j| j.as_str()) else {
                        return Err(KeysError::Malformed {
                            url,
                            reason: "the metadata has no jwks_uri".into(),
                        });
                    };
                    *known = Some(jwks.to_owned());
                    return Ok(jwks.to_owned());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| KeysError::Malformed {
            url: self.issuer.clone(),
            reason: "not an http(s) URL".into(),
        }))
    }

    fn get_json(&self, url: &str) -> Result<serde_json::Value, KeysError> {
        let fetch = |reason: String| KeysError::Fetch {
            url: url.to_owned(),
            reason,
        };
        let mut response =
            blocking(|| self.agent.get(url).call()).map_err(|e| fetch(e.to_string()))?;
        if response.status() != 200 {
            return Err(fetch(format!("status {}", response.status())));
        }
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_DOCUMENT_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| fetch(e.to_string()))?;
        if body.len() as u64 > MAX_DOCUMENT_BYTES {
            return Err(fetch(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        serde_json::from_slice(&body).map_err(|e| KeysError::Malformed {
            url: url.to_owned(),
            reason: format!("not JSON: {e}"),
        })
    }
}

impl KeySource for HttpKeys {
    fn fetch(&self) -> Result<JwkSet, KeysError> {
        let url = self.jwks_url()?;
        let doc = self.get_json(&url)?;
        serde_json::from_value(doc).map_err(|e| KeysError::Malformed {
            url,
            reason: format!("not a JWK set: {e}"),
        })
    }
}

/// Runs blocking I/O: on a multi-threaded tokio runtime's worker, after handing its
/// other tasks to another worker.
fn blocking<T>(io: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(io)
        }
        _ => io(),
    }
}

/// Where an issuer's metadata may be: RFC 8414 section 3.1 (the well-known segment
/// before the issuer's path), then OpenID Connect Discovery (after it).
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let Some((scheme, rest)) = issuer.split_once("://") else {
        return Vec::new();
    };
    if !matches!(scheme, "http" | "https") {
        return Vec::new();
    }
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let path = path.trim_end_matches('/');
    let suffix = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    vec![
        format!("{scheme}://{authority}/.well-known/oauth-authorization-server{suffix}"),
        format!("{scheme}://{authority}{suffix}/.well-known/openid-configuration"),
    ]
}

/// The keys last fetched, and when.
#[derive(Default)]
struct Held {
    keys: Option<JwkSet>,
    /// When the last fetch was tried (ms), successful or not.
    tried_ms: Option<i64>,
    /// When `keys` were fetched (ms).
    fetched_ms: i64,
    /// A fetch is under way on its own thread: no other starts, none waits for it.
    fetching: bool,
}

/// What a fetch's thread hands the request that started it.
type Fetched = Result<JwkSet, KeysError>;

/// The held keys, locked: held only to read or store them, never across a fetch.
fn lock(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks the fetch over when its thread ends, however it ends: a source that
/// panicked must not leave every later token waiting on a fetch that never comes.
struct FetchRunning(Arc<Mutex<Held>>);

impl Drop for FetchRunning {
    fn drop(&mut self) {
        lock(&self.0).fetching = false;
    }
}

/// The issuer's keys, fetched on first use and again for a key id not seen yet (or
/// once they are older than [`KeyCache::MAX_AGE`]), never twice within
/// [`KeyCache::MIN_REFRESH`].
///
/// A fetch runs on a thread of its own, one at a time, with the cache unlocked:
/// the request that started it waits for it (at most [`KeyCache::MAX_WAIT`]); any
/// other request that needs a key the cache lacks meanwhile is refused at once with
/// [`KeysError::Busy`] (a 503) rather than queueing behind it, so an issuer that
/// hangs costs the HTTP server one waiting request, not its workers.
pub struct KeyCache {
    source: Arc<dyn KeySource>,
    clock: Arc<dyn Clock>,
    held: Arc<Mutex<Held>>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache").finish_non_exhaustive()
    }
}

impl KeyCache {
    /// The shortest time between two fetches.
    pub const MIN_REFRESH: Duration = Duration::from_secs(30);
    /// Keys older than this are fetched again (and kept if that fails).
    pub const MAX_AGE: Duration = Duration::from_secs(3600);
    /// How long the request that started a fetch waits for it: the metadata and
    /// the key set may each take `FETCH_TIMEOUT`, and the first metadata URL may
    /// fail first.
    pub const MAX_WAIT: Duration = Duration::from_secs(3 * FETCH_TIMEOUT.as_secs() + 1);

    /// Keys from `source`, timed on `clock`.
    pub fn new(source: Box<dyn KeySource>, clock: Arc<dyn Clock>) -> Self {
        Self {
            source: Arc::from(source),
            clock,
            held: Arc::default(),
        }
    }

    /// Fetches the keys now (at start-up, to say early when the issuer is out of
    /// reach); counts as a fetch for the rate limit.
    pub fn prefetch(&self) -> Result<usize, KeysError> {
        let fetch = {
            let mut held = lock(&self.held);
            if held.fetching {
                return Err(KeysError::Busy);
            }
            self.start_fetch(&mut held)?
        };
        Ok(Self::wait(&fetch)?.keys.len())
    }

    /// Starts a fetch on its own thread (the caller has checked that none runs);
    /// its answer comes on the channel returned, and it stores the keys it got.
    fn start_fetch(&self, held: &mut Held) -> Result<Receiver<Fetched>, KeysError> {
        let started_ms = self.clock.now_ms();
        held.tried_ms = Some(started_ms);
        held.fetching = true;
        let (answer, fetch) = mpsc::sync_channel(1);
        let source = Arc::clone(&self.source);
        let running = FetchRunning(Arc::clone(&self.held));
        let spawned = std::thread::Builder::new()
            .name("justonce-jwks".into())
            .spawn(move || {
                let fetched = source.fetch();
                {
                    let mut held = lock(&running.0);
                    match &fetched {
                        Ok(keys) => {
                            tracing::info!(
                                keys = keys.keys.len(),
                                "fetched the OAuth issuer's keys"
                            );
                            held.keys = Some(keys.clone());
                            held.fetched_ms = started_ms;
                        }
                        // The URL and the reason are for the operator: the refused
                        // client is told only that the keys cannot be had now.
                        Err(e) => tracing::warn!("fetching the OAuth issuer's keys: {e}"),
                    }
                    held.fetching = false;
                }
                drop(running);
                // The request that started it may have stopped waiting.
                let _ = answer.send(fetched);
            });
        match spawned {
            Ok(_) => Ok(fetch),
            Err(e) => {
                held.fetching = false;
                Err(KeysError::Thread(e.to_string()))
            }
        }
    }

    /// The answer of the fetch this request started, waited for off the async
    /// workers (see `blocking`).
    fn wait(fetch: &Receiver<Fetched>) -> Fetched {
        blocking(|| fetch.recv_timeout(Self::MAX_WAIT))
            .unwrap_or(Err(KeysError::Late(Self::MAX_WAIT)))
    }

    /// The key that verifies a token whose header names `kid`: by id, or the only
    /// key when the token names none.
    pub(super) fn key(&self, kid: Option<&str>) -> Result<DecodingKey, TokenRefused> {
        let unknown = || TokenRefused::UnknownKey(kid.map(str::to_owned));
        let (fetch, found, had_keys) = {
            let mut held = lock(&self.held);
            let now = self.clock.now_ms();
            let stale = now.saturating_sub(held.fetched_ms) >= millis(Self::MAX_AGE);
            let found = held.keys.as_ref().and_then(|k| pick(k, kid)).cloned();
            let may_fetch = held
                .tried_ms
                .is_none_or(|t| now.saturating_sub(t) >= millis(Self::MIN_REFRESH));
            match found {
                // Stale keys still verify while another request refreshes them.
                Some(jwk) if !stale || !may_fetch || held.fetching => return decode(&jwk, kid),
                None if held.fetching => return Err(TokenRefused::Keys(KeysError::Busy)),
                None if !may_fetch => return Err(unknown()),
                found => {
                    let fetch = self.start_fetch(&mut held).map_err(TokenRefused::Keys)?;
                    (fetch, found, held.keys.is_some())
                }
            }
        };
        let jwk = match (Self::wait(&fetch), found) {
            (Ok(keys), _) => pick(&keys, kid).cloned().ok_or_else(unknown)?,
            // Stale keys still verify while the issuer is out of reach.
            (Err(_), Some(stale)) => stale,
            (Err(_), None) if had_keys => return Err(unknown()),
            (Err(e), None) => return Err(TokenRefused::Keys(e)),
        };
        decode(&jwk, kid)
    }
}

/// The verifying key of `jwk`, the key a token naming `kid` asked for.
fn decode(jwk: &Jwk, kid: Option<&str>) -> Result<DecodingKey, TokenRefused> {
    DecodingKey::from_jwk(jwk).map_err(|e| TokenRefused::BadKey {
        kid: kid.map(str::to_owned),
        reason: e.to_string(),
    })
}

/// The key with id `kid`, or with none named, the set's only key.
fn pick<'a>(keys: &'a JwkSet, kid: Option<&str>) -> Option<&'a Jwk> {
    match kid {
        Some(kid) => keys.find(kid),
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
}
