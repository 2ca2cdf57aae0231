//! OAuth 2.0 to an HTTP upstream, as its client: the access token sent as
//! `Authorization: Bearer` with each request, from one of two sources
//! (`[upstreams.NAME.oauth]`, docs/gateway.md "OAuth to an upstream"):
//!
//! - the client credentials grant (RFC 6749 §4.4): a form `POST` to `token_url`,
//!   the client authenticated with HTTP Basic (§2.3.1, `client_secret_basic`, the
//!   default) or in the form (`client_secret_post`), `scope` and `audience` when
//!   configured; the token is fetched again shortly before its `expires_in` ends
//!   ([`refresh_margin`]), with the `refresh_token` the endpoint gave, if it gave
//!   one (§6; a refused refresh falls back to the grant);
//! - a token file an external helper keeps fresh: read again when its modification
//!   time changes.
//!
//! Either way, a token the upstream refused (HTTP 401) is given up
//! ([`Bearer::rejected`]): the next request fetches (or reads) one anew. Every token
//! is a credential: learned by the connection's [`Credentials`] before it is sent,
//! so it is stripped from every answer, error and log line like a header's value.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::Value;
use ureq::Agent;

use super::credentials::Credentials;
use crate::clock::Clock;

/// The most of a token endpoint's answer read.
const MAX_TOKEN_RESPONSE_BYTES: u64 = 64 << 10;

/// `[upstreams.NAME.oauth]`: where an HTTP upstream's access token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamOAuth {
    /// Fetched from a token endpoint with the client credentials grant.
    ClientCredentials(ClientCredentials),
    /// Read from a file an external helper keeps fresh.
    TokenFile(PathBuf),
}

/// The client credentials grant's settings; `client_id` and `client_secret` may
/// hold `${NAME}`, filled in from the upstream's secrets file or the environment
/// as its `headers` are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The client's id.
    pub client_id: String,
    /// The client's secret.
    pub client_secret: String,
    /// The scope asked for, if any.
    pub scope: Option<String>,
    /// The audience (resource) asked for, if any (Auth0 and others name the API so).
    pub audience: Option<String>,
    /// How the client authenticates to the token endpoint.
    pub auth: ClientAuth,
}

/// How the client authenticates to the token endpoint (RFC 6749 §2.3.1; the names
/// of RFC 7591's `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// `client_secret_basic`: HTTP Basic with the id and secret (the default).
    #[default]
    Basic,
    /// `client_secret_post`: `client_id` and `client_secret` in the form.
    Post,
}

impl ClientAuth {
    /// Its name in `justonce.toml` (`client_auth`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Basic => "client_secret_basic",
            Self::Post => "client_secret_post",
        }
    }

    /// The method named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Basic, Self::Post]
            .into_iter()
            .find(|a| a.name() == name)
    }
}

/// Why no token could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// The configuration is at fault (the endpoint refused the client, answered no
    /// bearer token; the file is missing or empty): fixed by the operator.
    #[error("{0}")]
    Refused(String),
    /// The endpoint did not answer, or failed on its side: tried again later.
    #[error("{0}")]
    Unavailable(String),
}

/// How long before its expiry a token with `expires_in` is fetched again: a minute,
/// or half its life when that is shorter.
pub(crate) fn refresh_margin(expires_in: Duration) -> Duration {
    Duration::from_secs(60).min(expires_in / 2)
}

/// How a request to the token endpoint carries the client, filled in.
#[derive(Debug)]
pub(crate) enum Client {
    /// The `Authorization: Basic` value.
    Basic(String),
    /// The form fields `client_id` and `client_secret`.
    Post(Vec<(&'static str, String)>),
}

/// Where the tokens come from, with what was filled in.
#[derive(Debug)]
pub(crate) enum Source {
    /// A form `POST` to `url` of `form` (the grant), the client carried by `client`.
    Endpoint {
        url: String,
        client: Client,
        form: Vec<(&'static str, String)>,
    },
    /// A file's content.
    File(PathBuf),
}

impl Source {
    /// The source `oauth` names, `client_id` and `client_secret` as filled in.
    pub(crate) fn of(oauth: &UpstreamOAuth, client_id: &str, client_secret: &str) -> Self {
        match oauth {
            UpstreamOAuth::ClientCredentials(grant) => {
                let client = match grant.auth {
                    ClientAuth::Basic => {
                        // RFC 6749 §2.3.1: each form-encoded, then joined by `:`.
                        let encode = |s: &str| {
                            form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                        };
                        let pair = format!("{}:{}", encode(client_id), encode(client_secret));
                        Client::Basic(base64::engine::general_purpose::STANDARD.encode(pair))
                    }
                    ClientAuth::Post => Client::Post(vec![
                        ("client_id", client_id.to_owned()),
                        ("client_secret", client_secret.to_owned()),
                    ]),
                };
                let mut form = vec![("grant_type", "client_credentials".to_owned())];
                form.extend(grant.scope.clone().map(|s| ("scope", s)));
                form.extend(grant.audience.clone().map(|a| ("audience", a)));
                Self::Endpoint {
                    url: grant.token_url.clone(),
                    client,
                    form,
                }
            }
            UpstreamOAuth::TokenFile(path) => Self::File(path.clone()),
        }
    }
}

/// The token held now.
#[derive(Debug)]
struct Held {
    token: String,
    /// When it is fetched again (ms on the clock), if it said when it expires.
    refresh_at_ms: Option<i64>,
    /// The refresh token the endpoint gave with it, if any: the next token is asked
    /// for with it (RFC 6749 §6) instead of the grant.
    refresh_token: Option<String>,
    /// The file's modification time when it was read.
    modified: Option<SystemTime>,
}

/// One connection's access tokens: fetched or read when needed, one at a time.
pub(crate) struct Bearer {
    upstream: String,
    source: Source,
    agent: Agent,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    /// Told each token before it is sent.
    credentials: Credentials,
    /// The token now; held while one is fetched, so concurrent requests wait for
    /// that one instead of fetching their own.
    held: Mutex<Option<Held>>,
}

impl Bearer {
    /// The tokens of the upstream `upstream` from `source`, each request to the
    /// token endpoint bounded by `timeout`, each token learned by `credentials`.
    pub(crate) fn new(
        upstream: &str,
        source: Source,
        clock: Arc<dyn Clock>,
        timeout: Duration,
        credentials: Credentials,
    ) -> Self {
        Self {
            upstream: upstream.to_owned(),
            source,
            agent: super::http_agent::agent(),
            clock,
            timeout,
            credentials,
            held: Mutex::new(None),
        }
    }

    /// The token to send now: the one held while it is fresh, else a new one.
    pub(crate) fn token(&self) -> Result<String, TokenError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(now) = held.as_ref().filter(|h| self.fresh(h)) {
            return Ok(now.token.clone());
        }
        let refresh_token = held.as_ref().and_then(|h| h.refresh_token.clone());
        let new = match &self.source {
            Source::Endpoint { url, client, form } => {
                self.renew(url, client, form, refresh_token)?
            }
            Source::File(path) => self.read(path)?,
        };
        self.credentials.learn(&new.token);
        let token = new.token.clone();
        *held = Some(new);
        Ok(token)
    }

    /// The token held now, without fetching one (the `GET` stream's).
    pub(crate) fn held(&self) -> Option<String> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref().map(|h| h.token.clone())
    }

    /// The upstream refused `token` (HTTP 401): unless another request replaced it
    /// already, it is given up, and the next request gets a new one.
    pub(crate) fn rejected(&self, token: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.as_ref().is_some_and(|h| h.token == token) {
            *held = None;
        }
    }

    /// Whether `held` may still be sent.
    fn fresh(&self, held: &Held) -> bool {
        match &self.source {
            Source::Endpoint { .. } => held.refresh_at_ms.is_none_or(|at| self.clock.now_ms() < at),
            Source::File(path) => modified(path).ok() == held.modified,
        }
    }

    /// A new token from the endpoint at `url`: with `refresh_token` if there is
    /// one, else (or if the endpoint refuses it) with the grant's `form`. A refresh
    /// answered without a new refresh token keeps the one it was asked with.
    fn renew(
        &self,
        url: &str,
        client: &Client,
        form: &[(&'static str, String)],
        refresh_token: Option<String>,
    ) -> Result<Held, TokenError> {
        if let Some(refresh_token) = refresh_token {
            let refresh = [
                ("grant_type", "refresh_token".to_owned()),
                ("refresh_token", refresh_token.clone()),
            ];
            match self.fetch(url, client, &refresh) {
                Ok(mut held) => {
                    let kept = held.refresh_token.get_or_insert(refresh_token);
                    // Learned again after the new access token: still sent, it
                    // must not be let go as the oldest learned credential.
                    self.credentials.learn(kept);
                    return Ok(held);
                }
                Err(TokenError::Refused(why)) => {
                    tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, "its refresh token was refused ({why}); asking with the client credentials grant");
                }
                Err(e) => return Err(e),
            }
        }
        self.fetch(url, client, form)
    }

    /// A token from the endpoint at `url`, asked for with `form`.
    fn fetch(
        &self,
        url: &str,
        client: &Client,
        form: &[(&'static str, String)],
    ) -> Result<Held, TokenError> {
        let what = format!(
            "upstream `{}`: its OAuth token endpoint {url}",
            self.upstream
        );
        let strip = |text: String| self.credentials.text(text);
        let mut request = self.agent.post(url).header("Accept", "application/json");
        let mut fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        match client {
            Client::Basic(basic) => {
                request = request.header("Authorization", &format!("Basic {basic}"));
            }
            Client::Post(pair) => fields.extend(pair.iter().map(|(k, v)| (*k, v.as_str()))),
        }
        let mut response = request
            .config()
            .timeout_global(Some(self.timeout))
            .build()
            .send_form(fields)
            .map_err(|e| TokenError::Unavailable(strip(format!("{what} did not answer: {e}"))))?;
        let status = response.status().as_u16();
        let mut text = String::new();
        use std::io::Read as _;
        let read = response
            .body_mut()
            .as_reader()
            .take(MAX_TOKEN_RESPONSE_BYTES)
            .read_to_string(&mut text);
        let answer: Option<Value> = serde_json::from_str(&text).ok();
        let field = |name: &str| {
            answer
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match status {
            200..=299 => {}
            // RFC 6749 §5.2: the client or the grant is refused; its `error` code
            // (never its body, which may echo what was sent) names why.
            400..=499 => {
                let code = field("error").map_or(String::new(), |e| format!(": `{e}`"));
                return Err(TokenError::Refused(strip(format!(
                    "{what} answered HTTP {status}{code}; check its `client_id`, `client_secret`, `scope` and `audience`"
                ))));
            }
            _ => {
                return Err(TokenError::Unavailable(format!(
                    "{what} answered HTTP {status}"
                )));
            }
        }
        if let Err(e) = read {
            return Err(TokenError::Unavailable(strip(format!(
                "{what}: its answer was cut off: {e}"
            ))));
        }
        let Some(token) = field("access_token").filter(|t| !t.is_empty()) else {
            return Err(TokenError::Refused(format!(
                "{what} answered no `access_token`"
            )));
        };
        // Learned at once: whatever is said of it from here on is stripped.
        self.credentials.learn(&token);
        let refresh_token = field("refresh_token").filter(|t| !t.is_empty());
        if let Some(refresh_token) = &refresh_token {
            self.credentials.learn(refresh_token);
        }
        let kind = field("token_type").unwrap_or_default();
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(TokenError::Refused(strip(format!(
                "{what} answered a token of type {kind:?}; only `Bearer` tokens are sent"
            ))));
        }
        let expires_in = answer
            .as_ref()
            .and_then(|a| a.get("expires_in"))
            .and_then(|e| e.as_u64().or_else(|| e.as_str()?.parse().ok()))
            .map(Duration::from_secs);
        let refresh_at_ms = expires_in.map(|life| {
            let after = life.saturating_sub(refresh_margin(life));
            self.clock
                .now_ms()
                .saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX))
        });
        tracing::info!(target: "justonce::upstream", upstream = %self.upstream, expires_in_s = expires_in.map(|e| e.as_secs()), grant = form.first().map_or("", |(_, g)| g.as_str()), "fetched an OAuth access token");
        Ok(Held {
            token,
            refresh_at_ms,
            refresh_token,
            modified: None,
        })
    }

    /// The token in the file at `path`.
    fn read(&self, path: &std::path::Path) -> Result<Held, TokenError> {
        let what = format!(
            "upstream `{}`: its OAuth token file {}",
            self.upstream,
            path.display()
        );
        let modified = modified(path).ok();
        let text = std::fs::read_to_string(path)
            .map_err(|e| TokenError::Refused(format!("{what} cannot be read: {e}")))?;
        let token = text.trim().to_owned();
        if token.is_empty() {
            return Err(TokenError::Refused(format!("{what} is empty")));
        }
        if token.contains(['\r', '\n']) {
            self.credentials.learn(&token);
            return Err(TokenError::Refused(format!(
                "{what} holds more than one line; it holds the access token alone"
            )));
        }
        Ok(Held {
            token,
            refresh_at_ms: None,
            refresh_token: None,
            modified,
        })
    }
}

/// The modification time of the file at `path`.
fn modified(path: &std::path::Path) -> std::io::Result<SystemTime> {
    std::fs::metadata(path)?.modified()
}

#[cfg(test)]
mod tests;
