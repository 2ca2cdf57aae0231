//! `http` (keyed): requests to allowlisted origins, with the effect key in an
//! idempotency header so the downstream can tell a retry from a new request.

use std::sync::Arc;

use serde_json::Value;

use crate::http::{
    CheckError, Client, HttpConfig, Outbound, RequestSpec, SendError, Service, is_safe,
};
use crate::provider::{EffectRequest, Probed, Provider, ProviderClass, ProviderError, ReadRequest};

/// The operation the provider performs.
const REQUEST: &str = "request";

/// Performs HTTP requests for tools. Operation `request` takes the payload described
/// in docs/tool-authors.md, "HTTP and webhooks" (`method`, `url` or `service` +
/// `path`, `headers`, `body` or `json`, `record`) and answers `{"status", "headers",
/// "body", "truncated"}`.
///
/// - Every non-safe method carries the effect key in the configured idempotency
///   header (`Idempotency-Key` by default); a tool may not set that header itself.
/// - A tool reaches only the origins its allowlist names; anything else is refused
///   before a connection is made.
/// - A connection failure, a timeout, a cut-off response, and the statuses that are
///   not an answer (409 while the key's first request is in flight; 408, 425, 429,
///   502, 503, 504: see [`RETRY_STATUSES`](crate::http::RETRY_STATUSES), configurable
///   per service) leave the outcome unknown: the guard retries with the same key
///   (waiting out `Retry-After`, seconds or a date, up to its bound). Any other
///   status is a definitive answer, saved and replayed.
/// - A refused connection is known not performed; a request the host's
///   configuration refuses (not on the tool's allowlist, no such service, a name
///   that resolves to a loopback, private or link-local address the configuration
///   does not name) is not performed either. Neither is saved: the call may succeed later.
/// - `GET`, `HEAD` and `OPTIONS` are reads: performed without a journal record or a
///   key, unless the payload says `"record": true`.
/// - A request to a service configured `"unkeyed": true` carries no key and is an
///   unkeyed effect: performed at most once, an unknown outcome fails closed. Its
///   `status` request, where configured, is its probe (`Provider::probe`).
pub struct HttpProvider {
    config: Arc<HttpConfig>,
    client: Client,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider")
            .field("config", &self.config)
            .finish()
    }
}

impl HttpProvider {
    /// A provider that follows `config`.
    pub fn new(config: Arc<HttpConfig>) -> Self {
        let client = Client::new(Arc::clone(&config));
        Self { config, client }
    }

    fn prepare(
        &self,
        tool: &str,
        operation: &str,
        payload: &Value,
    ) -> Result<Outbound, ProviderError> {
        if operation != REQUEST {
            return Err(ProviderError::Invalid(format!(
                "http has no operation `{operation}` (it has `{REQUEST}`)"
            )));
        }
        let spec = RequestSpec::parse(payload).map_err(ProviderError::Invalid)?;
        let method = spec.method(None).map_err(ProviderError::Invalid)?;
        spec.check(&self.config, tool, method).map_err(|e| match e {
            CheckError::Tool(reason) => ProviderError::Invalid(reason),
            CheckError::Config(reason) => ProviderError::NotPerformed {
                reason,
                retry: false,
            },
        })
    }

    /// The unkeyed service `payload` is a request to, if it is one, with its name.
    fn unkeyed_service(&self, payload: &Value) -> Option<(&str, &Service)> {
        let spec = RequestSpec::parse(payload).ok()?;
        self.config
            .service_of(spec.service.as_deref(), spec.url.as_deref())
            .filter(|(_, service)| service.unkeyed)
    }

    fn send(&self, request: &Outbound, key: Option<(&str, &str)>) -> Result<Value, ProviderError> {
        match self.client.send(request, key) {
            Ok(response) if response.asks_to_retry(self.config.retry_statuses(&request.url)) => {
                let reason = format!("{} answered {}", request.url, response.status);
                let retry_after = response.retry_after();
                Err(match response.status {
                    409 => ProviderError::Conflict {
                        reason,
                        retry_after,
                    },
                    _ => ProviderError::Throttled {
                        reason,
                        retry_after,
                    },
                })
            }
            Ok(response) => Ok(response.to_json()),
            Err(SendError::Invalid(reason)) => Err(ProviderError::Invalid(reason)),
            Err(SendError::Unknown(reason)) => Err(ProviderError::Unknown(reason)),
            Err(SendError::NotSent(reason)) => Err(ProviderError::NotPerformed {
                reason,
                retry: true,
            }),
            Err(SendError::Refused(reason)) => Err(ProviderError::NotPerformed {
                reason,
                retry: false,
            }),
        }
    }
}

/// The header added to a status request's answer saved as the effect's answer: the
/// lost request's own answer is not on record, and this says who found it performed.
pub const DECIDED_BY_HEADER: &str = "x-justonce-decided-by";

/// `value` with every string in it percent-encoded (all but RFC 3986's unreserved
/// characters), for a path: a field of the body cannot add a segment or a query.
fn percent_encoded(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(
            text.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    other => format!("%{other:02X}"),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(percent_encoded).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), percent_encoded(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Provider for HttpProvider {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn class_of(&self, _operation: &str, payload: &Value) -> ProviderClass {
        match self.unkeyed_service(payload) {
            Some(_) => ProviderClass::Unkeyed,
            None => ProviderClass::Keyed,
        }
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let outbound = self.prepare(request.tool, request.operation, request.payload)?;
        let header = self.config.header_for(&outbound.origin);
        let keyed = self.unkeyed_service(request.payload).is_none();
        let key = (keyed && !is_safe(&outbound.method)).then(|| (header, request.key.as_str()));
        self.send(&outbound, key)
    }

    fn probe_of(&self, _operation: &str, payload: &Value) -> Option<String> {
        let (name, service) = self.unkeyed_service(payload)?;
        service.status.as_ref()?;
        Some(format!("http {name} status"))
    }

    fn probe(&self, request: &EffectRequest<'_>) -> Result<Probed, String> {
        let Some((name, service)) = self.unkeyed_service(request.payload) else {
            return Err("the request is not to an unkeyed service".into());
        };
        let Some(status) = &service.status else {
            return Err(format!("the service `{name}` has no status request"));
        };
        let spec = RequestSpec::parse(request.payload)?;
        let body = spec
            .json
            .clone()
            .or_else(|| {
                spec.body
                    .as_deref()
                    .and_then(|b| serde_json::from_str(b).ok())
            })
            .unwrap_or(Value::Null);
        let context = serde_json::json!({
            "key": request.key.as_str(),
            "body": percent_encoded(&body),
        });
        let path = match crate::probe::fill(&Value::String(status.path.clone()), &context)? {
            Value::String(path) => path,
            other => other.to_string(),
        };
        let asked = serde_json::json!({ "method": status.method, "service": name, "path": path });
        let outbound = self
            .prepare(request.tool, REQUEST, &asked)
            .map_err(|e| format!("the status request cannot be made: {e}"))?;
        let response = self.client.send(&outbound, None).map_err(|e| {
            let (SendError::Invalid(why)
            | SendError::Unknown(why)
            | SendError::NotSent(why)
            | SendError::Refused(why)) = e;
            format!("the status request to {} failed: {why}", outbound.url)
        })?;
        Ok(if status.performed.contains(&response.status) {
            // The status request's answer stands in for the lost one, marked with who
            // decided (the journal's resolution says the same).
            let mut found = response;
            found.headers.insert(
                DECIDED_BY_HEADER.into(),
                format!("probe http {name} status"),
            );
            Probed::Found(found.to_json())
        } else if status.not_performed.contains(&response.status) {
            Probed::NotPerformed
        } else {
            Probed::Unknown(format!(
                "{} answered {}, which the status request does not read as performed ({:?}) nor as not performed ({:?})",
                outbound.url, response.status, status.performed, status.not_performed
            ))
        })
    }

    fn unjournaled_read(&self, operation: &str, payload: &Value) -> bool {
        operation == REQUEST
            && RequestSpec::parse(payload)
                .ok()
                .and_then(|spec| Some((spec.method(None).ok()?, spec.record)))
                .is_some_and(|(method, record)| is_safe(&method) && !record)
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        let outbound = self.prepare(request.tool, request.operation, request.payload)?;
        self.send(&outbound, None)
    }
}
