//! HTTP through the host's `http` provider, and webhooks through its `outbox`.
//!
//! The host adds the idempotency key (an `Idempotency-Key` header by default) to
//! every request that changes something, so the downstream can recognise a retry;
//! it allows only the origins configured for this tool. `GET`, `HEAD` and `OPTIONS`
//! are reads: not journaled (a retried call reads again) unless [`Request::record`]
//! is set.
//!
//! ```no_run
//! use justonce_guest::http::Request;
//!
//! let response = Request::post_to("payments", "/v1/refunds")
//!     .json(&serde_json::json!({ "order_id": 4417, "amount_cents": 1299 }))
//!     .send()?;
//! if response.is_success() {
//!     let reply: serde_json::Value = response.json()?;
//!     # let _ = reply;
//! }
//! # Ok::<(), justonce_guest::effects::EffectError>(())
//! ```

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::effects::{self, EffectError};

/// A request for the `http` provider (or a message for the `outbox`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    json: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    record: bool,
}

impl Request {
    /// A request to an absolute URL.
    pub fn new(method: &str, url: &str) -> Self {
        Self::blank(method, Some(url.to_owned()), None, None)
    }

    /// A request to `path` under a service the host names (its base URL lives in
    /// the host's config, not in the tool).
    pub fn to_service(method: &str, service: &str, path: &str) -> Self {
        Self::blank(
            method,
            None,
            Some(service.to_owned()),
            Some(path.to_owned()),
        )
    }

    /// `GET` an absolute URL.
    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    /// `POST` to an absolute URL.
    pub fn post(url: &str) -> Self {
        Self::new("POST", url)
    }

    /// `POST` to `path` under a named service.
    pub fn post_to(service: &str, path: &str) -> Self {
        Self::to_service("POST", service, path)
    }

    fn blank(
        method: &str,
        url: Option<String>,
        service: Option<String>,
        path: Option<String>,
    ) -> Self {
        Self {
            method: method.to_owned(),
            url,
            service,
            path,
            headers: BTreeMap::new(),
            body: None,
            json: None,
            record: false,
        }
    }

    /// Adds a header. The idempotency key header is the host's; setting it is refused.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.insert(name.to_owned(), value.to_owned());
        self
    }

    /// Sends `value` as a JSON body (`Content-Type: application/json`).
    #[must_use]
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        self.json = Some(serde_json::to_value(value).unwrap_or(serde_json::Value::Null));
        self.body = None;
        self
    }

    /// Sends `text` as the body.
    #[must_use]
    pub fn body(mut self, text: &str) -> Self {
        self.body = Some(text.to_owned());
        self.json = None;
        self
    }

    /// Journals a read like an effect: a retried or resumed call gets the first
    /// answer instead of reading again.
    #[must_use]
    pub fn record(mut self) -> Self {
        self.record = true;
        self
    }

    /// Sends the request through the `http` provider. Any status is an answer;
    /// check [`Response::is_success`].
    pub fn send(&self) -> Result<Response, EffectError> {
        effects::perform("http", "request", self)
    }

    /// Queues the request as a webhook in the `outbox`, in the same transaction as
    /// its journal record: it is sent later, once, with the effect key as its
    /// idempotency key.
    pub fn enqueue(&self) -> Result<Queued, EffectError> {
        effects::perform("outbox", "enqueue", self)
    }
}

/// What the downstream answered.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body as text, cut at the host's limit.
    #[serde(default)]
    pub body: String,
    /// Whether the body was cut.
    #[serde(default)]
    pub truncated: bool,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, EffectError> {
        serde_json::from_str(&self.body).map_err(|e| {
            EffectError::BadResponse(format!(
                "the {} response body is not the JSON expected: {e}",
                self.status
            ))
        })
    }
}

/// A webhook queued in the outbox.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Queued {
    /// The message's id in the outbox.
    pub message_id: i64,
    /// `pending` until it is delivered.
    pub state: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_serializes_to_the_provider_payload() {
        let request = Request::post_to("payments", "/v1/refunds")
            .header("X-Tenant", "acme")
            .json(&serde_json::json!({ "amount_cents": 5 }));
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({
                "method": "POST", "service": "payments", "path": "/v1/refunds",
                "headers": { "X-Tenant": "acme" }, "json": { "amount_cents": 5 }
            })
        );
        let read = Request::get("http://127.0.0.1:1/x").record();
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::json!({ "method": "GET", "url": "http://127.0.0.1:1/x", "record": true })
        );
    }

    #[test]
    fn a_response_body_that_is_not_the_json_expected_is_a_bad_response() {
        let response = Response {
            status: 502,
            headers: BTreeMap::new(),
            body: "<html>".into(),
            truncated: false,
        };
        assert!(!response.is_success());
        let err = response.json::<serde_json::Value>().unwrap_err();
        assert!(
            matches!(err, EffectError::BadResponse(ref m) if m.contains("502")),
            "{err}"
        );
    }
}
