//! Outbound HTTP, shared by the `http` provider and webhook delivery from the outbox:
//! which tool may reach which origin ([`HttpConfig`]), the request a tool describes,
//! and one exchange with a timeout, no redirects and a capped response
//! ([`HttpResponse`]). [`LocalApi`] is a loopback payments API and webhook receiver
//! for the demo and the tests.

mod address;
mod client;
mod config;
pub mod local_api;
mod lookup;
mod request;
mod secrets;
mod tool_allow;

pub use client::HttpResponse;
pub(crate) use client::{Client, RETRY_STATUSES, SendError};
pub use config::{DEFAULT_IDEMPOTENCY_HEADER, HttpConfig, Service, StatusRequest};
pub(crate) use config::{Origin, parse_url};
pub(crate) use lookup::Lookups;
pub(crate) use request::{CheckError, Outbound, RequestSpec, check_headers, is_safe};
pub(crate) use secrets::{End, Redaction, SecretValue, expand, read_secrets_file};
