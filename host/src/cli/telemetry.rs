//! Traces: the `call`, `effect` and `attempt` spans (`runtime::spans`) exported as
//! OpenTelemetry spans over OTLP/HTTP (protobuf) when a collector is configured, and
//! nothing at all (no exporter, no thread, no span recorded for it) when none is.
//!
//! The collector comes from the standard variables, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! (used as written) or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` added), else from
//! `[telemetry] otlp_endpoint` in justonce.toml. `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none` turn exporting off; `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are honoured.
//!
//! The SDK's batch processor exports on a thread of its own; the HTTP client is the
//! blocking `ureq` the host already has, so no async runtime runs. [`shutdown`] sends
//! what is left: the CLI calls it before it exits, and `serve` before it stops on a
//! signal.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The per-signal endpoint variable, used as written.
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The base endpoint variable; `/v1/traces` is added.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// How long one export may take (the OTLP exporters' default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The provider whose batch processor holds the spans not yet sent.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Nowhere: nothing is recorded for traces and nothing is sent.
    Off,
    /// The collector the standard `OTEL_EXPORTER_OTLP_*ENDPOINT` variables name (the
    /// exporter reads them).
    Environment,
    /// The full traces URL built from `[telemetry] otlp_endpoint`.
    Url(String),
}

impl Destination {
    /// Where spans go, from the variables `var` reads and the configuration file's
    /// `otlp_endpoint` (the variables win, as the OpenTelemetry specification asks).
    pub fn resolve(var: impl Fn(&str) -> Option<String>, config: Option<&str>) -> Self {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
        {
            return Self::Off;
        }
        if set(TRACES_ENDPOINT_ENV).is_some() || set(ENDPOINT_ENV).is_some() {
            return Self::Environment;
        }
        match config {
            Some(base) => Self::Url(format!("{}/v1/traces", base.trim_end_matches('/'))),
            None => Self::Off,
        }
    }
}

/// The exporter could not be set up from its configuration.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot export traces: {0} (check {TRACES_ENDPOINT_ENV}, {ENDPOINT_ENV} and `[telemetry] otlp_endpoint`; unset them to export nothing)"
)]
pub struct TelemetryError(String);

/// The layer that turns the host's spans into OpenTelemetry spans and exports them to
/// `destination`; `None` when it is [`Destination::Off`].
pub fn layer<S>(destination: &Destination) -> Result<Option<impl Layer<S> + use<S>>, TelemetryError>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(UreqClient::new());
    let builder = match destination {
        Destination::Off => return Ok(None),
        Destination::Environment => builder,
        Destination::Url(url) => builder.with_endpoint(url),
    };
    let exporter = builder.build().map_err(|e| TelemetryError(e.to_string()))?;
    let mut resource = Resource::builder();
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name("justonce");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("justonce");
    // One provider a process; a second `init` would be a bug, and keeps the first.
    let _ = PROVIDER.set(provider);
    // The host's own spans, and its warnings and errors as their events: not the
    // exporter's or the HTTP client's logs (which would feed back into the exporter),
    // and not the info lines (a guest's output among them).
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.target().starts_with("justonce") && (meta.is_span() || *meta.level() <= Level::WARN)
    });
    Ok(Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_filter(ours),
    ))
}

/// Sends the spans not yet exported and stops the exporter; waits at most 5 s (an
/// unreachable collector loses them, and says so on stderr). Does nothing when
/// nothing is exported or after the first call.
pub fn shutdown() {
    let Some(provider) = PROVIDER.get() else {
        return;
    };
    match provider.shutdown() {
        Ok(()) | Err(opentelemetry_sdk::error::OTelSdkError::AlreadyShutdown) => {}
        Err(e) => tracing::warn!("traces not all exported at shutdown: {e}"),
    }
}

/// The exporter's HTTP client: the blocking `ureq` (no async runtime), called on the
/// batch processor's own thread.
#[derive(Debug)]
struct UreqClient(ureq::Agent);

impl UreqClient {
    fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            // The exporter reads the status itself (and retries what asks for it).
            .http_status_as_error(false)
            .timeout_global(Some(EXPORT_TIMEOUT))
            .build()
            .into();
        Self(agent)
    }
}

#[async_trait::async_trait]
impl HttpClient for UreqClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let mut response = self.0.run(Request::from_parts(parts, body.to_vec()))?;
        let body = response.body_mut().read_to_vec()?;
        let (parts, _) = response.into_parts();
        Ok(Response::from_parts(parts, Bytes::from(body)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(vars: &[(&str, &str)], config: Option<&str>) -> Destination {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Destination::resolve(
            |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            config,
        )
    }

    #[test]
    fn nothing_is_exported_unless_an_endpoint_is_named() {
        assert_eq!(resolve(&[], None), Destination::Off);
        assert_eq!(resolve(&[(ENDPOINT_ENV, " ")], None), Destination::Off);
        assert_eq!(
            resolve(&[(ENDPOINT_ENV, "http://c:4318")], None),
            Destination::Environment
        );
        assert_eq!(
            resolve(&[(TRACES_ENDPOINT_ENV, "http://c:4318/v1/traces")], None),
            Destination::Environment
        );
    }

    #[test]
    fn the_variables_win_over_the_file_whose_url_gets_the_traces_path() {
        assert_eq!(
            resolve(&[], Some("http://collector:4318/")),
            Destination::Url("http://collector:4318/v1/traces".into())
        );
        assert_eq!(
            resolve(&[(ENDPOINT_ENV, "http://c:4318")], Some("http://file:4318")),
            Destination::Environment
        );
    }

    #[test]
    fn the_standard_switches_turn_exporting_off() {
        let endpoint = (ENDPOINT_ENV, "http://c:4318");
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                resolve(&[endpoint, off], Some("http://file:4318")),
                Destination::Off,
                "{off:?}"
            );
        }
        assert_eq!(
            resolve(&[endpoint, ("OTEL_SDK_DISABLED", "false")], None),
            Destination::Environment
        );
    }
}
