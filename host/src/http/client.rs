//! One HTTP exchange with a timeout, no redirects, no proxy and a capped body.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ureq::Agent;
use ureq::http::Request;
use ureq::unversioned::transport::DefaultConnector;

use super::address::{AddressRefused, CheckedResolver, named_addresses};
use super::config::HttpConfig;
use super::request::Outbound;
use super::secrets::strip_secrets;

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

    /// Whether this status is not an answer but a request to come back: the key's
    /// first request is still in progress (409), or the downstream asks to be tried
    /// again (408, 425, 429, 502, 503, 504 by default; see [`RETRY_STATUSES`]). The
    /// effect stays pending and is retried under the same key.
    pub fn asks_to_retry(&self, statuses: &[u16]) -> bool {
        statuses.contains(&self.status)
    }

    /// The `Retry-After` delay, given in seconds or as an HTTP date (a date in the
    /// past is no delay).
    pub fn retry_after(&self) -> Option<Duration> {
        let value = self.headers.get("retry-after")?.trim();
        if let Ok(seconds) = value.parse::<u64>() {
            return Some(Duration::from_secs(seconds));
        }
        let at = httpdate::parse_http_date(value).ok()?;
        Some(
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or(Duration::ZERO),
        )
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
    /// Nothing was sent: the connection was refused, or the host name did not
    /// resolve. Known not performed; trying again later is safe.
    NotSent(String),
    /// The host name resolved to an address the configuration does not let a name
    /// reach (loopback, private, link-local): nothing was sent, and nothing will be
    /// until the configuration names the address.
    Refused(String),
}

/// The statuses that are not an answer by default: 409 (the key's first request
/// is still in progress, IETF Idempotency-Key draft and Stripe), 408, 425, 429, 502,
/// 503 and 504 (come back later).
pub const RETRY_STATUSES: &[u16] = &[408, 409, 425, 429, 502, 503, 504];

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
        let agent_config = Agent::config_builder()
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
            .build();
        // The one lookup of a name, checked; the connection goes to what it returned.
        let resolver = CheckedResolver::new(named_addresses(
            config.named_hosts().iter().map(String::as_str),
        ));
        let agent = Agent::with_parts(agent_config, DefaultConnector::new(), resolver);
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
        let secrets = self.config.service_headers_for(&request.tool, &request.url);
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
        let mut body = String::from_utf8_lossy(&bytes).into_owned();
        // A downstream that echoes a credential (in a body, a `Set-Cookie`) must not
        // put it in the journal, the logs or the guest's hands.
        let secrets = self.config.secret_values();
        strip_secrets(&mut body, &secrets);
        for value in headers.values_mut() {
            strip_secrets(value, &secrets);
        }
        Ok(HttpResponse {
            status,
            headers,
            body,
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
        ureq::Error::HostNotFound => {
            SendError::NotSent(format!("{url}: the host name did not resolve"))
        }
        ureq::Error::Io(e) if e.get_ref().is_some_and(|e| e.is::<AddressRefused>()) => {
            SendError::Refused(format!("{url}: {e}"))
        }
        ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            SendError::NotSent(format!("{url}: the connection was refused ({e})"))
        }
        other => SendError::Unknown(format!("{url}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_retry_after(value: &str) -> HttpResponse {
        HttpResponse {
            status: 503,
            headers: BTreeMap::from([("retry-after".to_string(), value.to_string())]),
            body: String::new(),
            truncated: false,
        }
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        assert_eq!(
            with_retry_after("7").retry_after(),
            Some(Duration::from_secs(7))
        );
        let in_a_minute = std::time::SystemTime::now() + Duration::from_secs(60);
        let date = httpdate::fmt_http_date(in_a_minute);
        let wait = with_retry_after(&date).retry_after().unwrap();
        assert!(
            wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
            "{wait:?} from {date}"
        );
        // A date in the past is no wait; a malformed value is none.
        assert_eq!(
            with_retry_after("Wed, 21 Oct 2015 07:28:00 GMT").retry_after(),
            Some(Duration::ZERO)
        );
        assert_eq!(with_retry_after("soon").retry_after(), None);
    }

    #[test]
    fn only_the_come_back_statuses_ask_to_retry() {
        let response = |status| HttpResponse {
            status,
            headers: BTreeMap::new(),
            body: String::new(),
            truncated: false,
        };
        for status in [408, 409, 425, 429, 502, 503, 504] {
            assert!(response(status).asks_to_retry(RETRY_STATUSES), "{status}");
        }
        for status in [200, 201, 400, 402, 404, 422, 500] {
            assert!(!response(status).asks_to_retry(RETRY_STATUSES), "{status}");
        }
    }
}
