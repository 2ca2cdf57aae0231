//! `http` (keyed): requests to allowlisted origins, with the effect key in an
//! idempotency header so the downstream can tell a retry from a new request.

use std::sync::Arc;

use serde_json::Value;

use crate::http::{CheckError, Client, HttpConfig, Outbound, RequestSpec, SendError, is_safe};
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest};

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

impl Provider for HttpProvider {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let outbound = self.prepare(request.tool, request.operation, request.payload)?;
        let header = self.config.header_for(&outbound.origin);
        let key = (!is_safe(&outbound.method)).then(|| (header, request.key.as_str()));
        self.send(&outbound, key)
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
