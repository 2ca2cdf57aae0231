//! The request a tool describes in an effect payload, checked before anything is sent.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use ureq::http::{HeaderName, HeaderValue};

use super::config::{HttpConfig, Origin};

/// Why a request may not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CheckError {
    /// The tool asked for something malformed: its own fault, saved as a refusal.
    #[error("{0}")]
    Tool(String),
    /// The host's configuration refuses it (not on the allowlist, no such service):
    /// not the tool's doing, and it may succeed once the configuration is fixed.
    #[error("{0}")]
    Config(String),
}

/// What a tool puts in the payload of an `http` `request` or an `outbox` `enqueue`:
///
/// ```json
/// { "method": "POST", "service": "payments", "path": "/v1/refunds",
///   "headers": { "X-Tenant": "acme" }, "json": { "amount_cents": 1299 } }
/// ```
///
/// `url` (absolute) replaces `service` + `path`; `body` (text) replaces `json`;
/// `record: true` makes a `GET` or `HEAD` a journaled effect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestSpec {
    pub method: Option<String>,
    pub url: Option<String>,
    pub service: Option<String>,
    pub path: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub body: Option<String>,
    pub json: Option<Value>,
    #[serde(default)]
    pub record: bool,
}

/// The methods a tool may use.
const METHODS: &[&str] = &["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"];

/// Headers the host sets itself; a tool that sets one is refused.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
];

/// Headers that ask a cloud metadata service (GCP, Azure, AWS IMDSv2) for its
/// credentials; no tool has a reason to send them.
const METADATA: &[&str] = &[
    "metadata-flavor",
    "metadata",
    "x-google-metadata-request",
    "x-aws-ec2-metadata-token",
    "x-aws-ec2-metadata-token-ttl-seconds",
];

/// Checks the headers a tool asked for on a request to `url`: none the host sets
/// itself (framing, the effect key, the service's credentials), none that speak to a
/// cloud metadata service, every name and value valid. Run when a request is made and
/// again when a queued message is delivered.
pub(crate) fn check_headers<'a>(
    config: &HttpConfig,
    url: &str,
    origin: &Origin,
    headers: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    let key_header = config.header_for(origin);
    let secrets = config.service_headers(url);
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if RESERVED.contains(&lower.as_str()) {
            return Err(format!("header `{name}` is set by the host, not by a tool"));
        }
        if METADATA.contains(&lower.as_str()) {
            return Err(format!(
                "header `{name}` asks a cloud metadata service for credentials; a tool may not send it"
            ));
        }
        if lower.eq_ignore_ascii_case(key_header) {
            return Err(format!(
                "header `{name}` carries the effect key, which the host sets; a tool never chooses it"
            ));
        }
        if secrets.iter().any(|(s, _)| s.eq_ignore_ascii_case(name)) {
            return Err(format!(
                "header `{name}` is set by the host for this service (from its configuration); a tool does not set it"
            ));
        }
        HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
    }
    Ok(())
}

/// Whether a method changes nothing on the server (RFC 9110 §9.2.1): such requests
/// carry no key and are not journaled unless the tool asks.
pub(crate) fn is_safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// A checked request, ready to send.
#[derive(Debug, Clone)]
pub(crate) struct Outbound {
    /// The tool that asked for it: a service's headers go only with its grant.
    pub tool: String,
    pub method: String,
    pub url: String,
    pub origin: Origin,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RequestSpec {
    /// Reads a payload; the error names the field that is wrong.
    pub fn parse(payload: &Value) -> Result<Self, String> {
        Self::deserialize(payload).map_err(|e| format!("the request payload is not valid: {e}"))
    }

    /// The method in upper case, `default` when the payload names none.
    pub fn method(&self, default: Option<&str>) -> Result<String, String> {
        let method = match (&self.method, default) {
            (Some(m), _) => m.to_ascii_uppercase(),
            (None, Some(d)) => d.to_owned(),
            (None, None) => return Err("the request needs a `method`".into()),
        };
        if !METHODS.contains(&method.as_str()) {
            return Err(format!(
                "method `{method}` is not allowed (allowed: {})",
                METHODS.join(", ")
            ));
        }
        Ok(method)
    }

    /// Resolves the target, checks it against `tool`'s allowlist and the headers
    /// against the reserved ones. Nothing is sent.
    pub fn check(
        &self,
        config: &HttpConfig,
        tool: &str,
        method: String,
    ) -> Result<Outbound, CheckError> {
        if let Some(service) = self.service.as_deref()
            && self.url.is_none()
        {
            config
                .check_granted(tool, service)
                .map_err(CheckError::Config)?;
        }
        if let Some(service) = self.service.as_deref()
            && self.url.is_none()
            && !config.has_service(service)
        {
            return Err(CheckError::Config(
                config
                    .resolve(None, Some(service), self.path.as_deref())
                    .err()
                    .unwrap_or_else(|| format!("no service named `{service}` is configured")),
            ));
        }
        let (url, origin) = config
            .resolve(
                self.url.as_deref(),
                self.service.as_deref(),
                self.path.as_deref(),
            )
            .map_err(CheckError::Tool)?;
        config
            .check_allowed(tool, &origin)
            .map_err(CheckError::Config)?;
        self.outbound(config, tool, method, url, origin)
            .map_err(CheckError::Tool)
    }

    fn outbound(
        &self,
        config: &HttpConfig,
        tool: &str,
        method: String,
        url: String,
        origin: Origin,
    ) -> Result<Outbound, String> {
        check_headers(config, &url, &origin, &self.headers)?;
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        let body = match (&self.body, &self.json) {
            (Some(_), Some(_)) => return Err("give either `body` or `json`, not both".into()),
            (Some(text), None) => text.clone().into_bytes(),
            (None, Some(json)) => {
                if !headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                json.to_string().into_bytes()
            }
            (None, None) => Vec::new(),
        };
        if !body.is_empty() && matches!(method.as_str(), "GET" | "HEAD") {
            return Err(format!("a {method} request carries no body"));
        }
        Ok(Outbound {
            tool: tool.to_owned(),
            method,
            url,
            origin,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> HttpConfig {
        HttpConfig::default()
            .service("payments", "http://127.0.0.1:9000")
            .allow("refund", "http://127.0.0.1:9000")
    }

    #[test]
    fn a_json_request_gets_its_content_type_and_a_resolved_url() {
        let spec = RequestSpec::parse(&json!({
            "method": "post", "service": "payments", "path": "/v1/refunds", "json": {"a": 1}
        }))
        .unwrap();
        let method = spec.method(None).unwrap();
        let out = spec.check(&config(), "refund", method).unwrap();
        assert_eq!(out.method, "POST");
        assert_eq!(out.url, "http://127.0.0.1:9000/v1/refunds");
        assert_eq!(out.body, br#"{"a":1}"#);
        assert!(
            out.headers
                .contains(&("Content-Type".into(), "application/json".into()))
        );
    }

    #[test]
    fn bad_requests_are_refused_with_the_reason() {
        let cases = [
            (
                json!({"method": "TRACE", "url": "http://127.0.0.1:9000/"}),
                "method `TRACE`",
            ),
            (
                json!({"method": "POST", "url": "http://127.0.0.1:9000/", "headers": {"Idempotency-Key": "mine"}}),
                "carries the effect key",
            ),
            (
                json!({"method": "POST", "url": "http://127.0.0.1:9000/", "headers": {"Host": "x"}}),
                "set by the host",
            ),
            (
                json!({"method": "PUT", "url": "http://127.0.0.1:9000/", "headers": {"Metadata-Flavor": "Google"}}),
                "cloud metadata service",
            ),
            (
                json!({"method": "GET", "url": "http://127.0.0.1:9000/", "body": "x"}),
                "carries no body",
            ),
            (
                json!({"method": "POST", "url": "http://127.0.0.1:9000/", "body": "x", "json": 1}),
                "either `body` or `json`",
            ),
            (
                json!({"method": "POST", "url": "http://payments.invalid/"}),
                "may not reach http://payments.invalid:80",
            ),
        ];
        for (payload, needle) in cases {
            let spec = RequestSpec::parse(&payload).unwrap();
            let err = spec
                .method(None)
                .and_then(|m| {
                    spec.check(&config(), "refund", m).map_err(|e| match e {
                        CheckError::Tool(reason) | CheckError::Config(reason) => reason,
                    })
                })
                .unwrap_err();
            assert!(err.contains(needle), "{payload}: {err}");
        }
        let err = RequestSpec::parse(&json!({"methd": "GET"})).unwrap_err();
        assert!(err.contains("methd"), "{err}");
    }

    #[test]
    fn only_a_tool_granted_a_service_may_name_it() {
        let config = config().grant("payments", "payout");
        let spec = RequestSpec::parse(&json!({"method": "POST", "service": "payments"})).unwrap();
        let err = spec.check(&config, "refund", "POST".into()).unwrap_err();
        assert!(
            matches!(&err, CheckError::Config(e) if e.contains("not granted the service `payments`")),
            "{err}"
        );
        let config = config.grant("payments", "refund");
        spec.check(&config, "refund", "POST".into()).unwrap();
    }

    #[test]
    fn a_tool_may_not_set_a_header_its_service_gets_from_the_host() {
        let config = config().service_header("payments", "Authorization", "Bearer s3cr3t");
        let spec = RequestSpec::parse(&json!({
            "method": "POST", "service": "payments", "path": "/v1",
            "headers": {"authorization": "Bearer mine"}
        }))
        .unwrap();
        let err = spec.check(&config, "refund", "POST".into()).unwrap_err();
        assert!(
            err.to_string().contains("set by the host for this service"),
            "{err}"
        );
        let spec = RequestSpec::parse(&json!({"method": "POST", "service": "payments"})).unwrap();
        let out = spec.check(&config, "refund", "POST".into()).unwrap();
        assert!(
            out.headers.is_empty(),
            "the secret is added when sending, never to the outbound request: {out:?}"
        );
    }
}
