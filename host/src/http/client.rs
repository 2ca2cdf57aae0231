//! One HTTP exchange with a timeout, no redirects, no proxy and a capped body.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ureq::Agent;
use ureq::http::Request;

use super::config::HttpConfig;
use super::request::Outbound;

/// What the downstream answered, as saved in the journal and handed to the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The response headers, names in lower case; repeated headers joined by `, `.
    pub headers: BTreeMap<String, String>,
    /// The body as text (invalid UTF-8 replaced), at most the configured size.
    pub body: String,
    /// Whether the body was longer than the cap and was cut.
    pub truncated: bool,
}

impl HttpResponse {
    /// The response as JSON: `{"status", "headers", "body", "truncated"}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a response serializes")
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Whether the downstream asked to be tried again later (429, 503): the request
    /// may be retried with the same key.
    pub fn asks_to_retry(&self) -> bool {
        matches!(self.status, 429 | 503)
    }

    /// The `Retry-After` delay, when it is given in seconds. (An HTTP date is ignored
    /// and the retry policy's own backoff applies.)
    pub fn retry_after(&self) -> Option<Duration> {
        let value = self.headers.get("retry-after")?;
        value.trim().parse::<u64>().ok().map(Duration::from_secs)
    }
}

/// Why an exchange produced no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// Refused before anything reached the network.
    Invalid(String),
    /// The request may or may not have arrived (connection failure, timeout, a
    /// response cut off): retry with the same key.
    Unknown(String),
}

/// A blocking HTTP client configured for guarded effects. It adds a service's
/// configured headers (credentials) to the requests under its base URL, here and
/// nowhere earlier, so they never reach the journal, the outbox or the guest.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    agent: Agent,
    config: Arc<HttpConfig>,
}

impl Client {
    pub fn new(config: Arc<HttpConfig>) -> Self {
        let agent: Agent = Agent::config_builder()
            // A status is an answer, saved as the outcome; only the transport fails.
            .http_status_as_error(false)
            // A redirect could lead off the allowlist and would repeat the request:
            // the 3xx is returned as the answer instead.
            .max_redirects(0)
            .max_redirects_will_error(false)
            // The environment's proxy settings would route effects around the allowlist.
            .proxy(None)
            .timeout_global(Some(config.timeout_duration()))
            .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { agent, config }
    }

    /// Sends `request`, adding `key` (header name, value) when given.
    pub fn send(
        &self,
        request: &Outbound,
        key: Option<(&str, &str)>,
    ) -> Result<HttpResponse, SendError> {
        let mut builder = Request::builder()
            .method(request.method.as_str())
            .uri(request.url.as_str());
        let secrets = self.config.service_headers(&request.url);
        // The service's own header wins over one queued before the config named it.
        for (name, value) in &request.headers {
            if !secrets.iter().any(|(s, _)| s.eq_ignore_ascii_case(name)) {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        for (name, value) in secrets {
            builder = builder.header(name, value);
        }
        if let Some((name, value)) = key {
            builder = builder.header(name, value);
        }
        let result = if request.body.is_empty() {
            let http = builder
                .body(())
                .map_err(|e| SendError::Invalid(e.to_string()))?;
            self.agent.run(http)
        } else {
            let http = builder
                .body(request.body.as_slice())
                .map_err(|e| SendError::Invalid(e.to_string()))?;
            self.agent.run(http)
        };
        let mut response = result.map_err(|e| classify(&request.url, e))?;
        let status = response.status().as_u16();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let cap = self.config.max_response_bytes;
        let mut bytes = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(cap as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| {
                SendError::Unknown(format!(
                    "{} answered {status} but the body was cut off: {e}",
                    request.url
                ))
            })?;
        let truncated = bytes.len() > cap;
        bytes.truncate(cap);
        Ok(HttpResponse {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            truncated,
        })
    }
}

/// Which transport failures leave the outcome unknown: everything that can happen
/// after a connection attempt began.
fn classify(url: &str, error: ureq::Error) -> SendError {
    match error {
        ureq::Error::Http(_)
        | ureq::Error::BadUri(_)
        | ureq::Error::InvalidProxyUrl
        | ureq::Error::BodyExceedsLimit(_) => SendError::Invalid(format!("{url}: {error}")),
        ureq::Error::Timeout(_) => SendError::Unknown(format!("{url} timed out ({error})")),
        other => SendError::Unknown(format!("{url}: {other}")),
    }
}
