//! The CLI's log on stderr: `JUSTONCE_LOG` filters it (`warn` by default),
//! `JUSTONCE_LOG_FORMAT=json` writes one JSON object a line with the keys of the
//! enclosing call and effect (see `runtime::spans`), and colours are used only when
//! stderr is a terminal (and `NO_COLOR` is unset). Traces go beside the log, to an
//! OTLP collector when one is configured (see `telemetry`).

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use super::telemetry::{self, Destination, TelemetryError};

/// The variable that picks the log format.
pub const FORMAT_ENV: &str = "JUSTONCE_LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines.
    Text,
    /// One JSON object a line, with the fields of every enclosing span.
    Json,
}

/// A value of `JUSTONCE_LOG_FORMAT` that names no format.
#[derive(Debug, thiserror::Error)]
#[error("{FORMAT_ENV} must be `text` or `json`, not `{0}`")]
pub struct UnknownFormat(String);

impl Format {
    /// Reads `value` (unset or empty is [`Format::Text`]).
    pub fn parse(value: Option<&str>) -> Result<Self, UnknownFormat> {
        match value.map(str::trim) {
            None | Some("" | "text") => Ok(Self::Text),
            Some("json") => Ok(Self::Json),
            Some(other) => Err(UnknownFormat(other.to_owned())),
        }
    }
}

/// The log or the traces cannot be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `JUSTONCE_LOG_FORMAT` names no format.
    #[error(transparent)]
    Format(#[from] UnknownFormat),
    /// The OTLP exporter refused its configuration.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
}

/// Installs the subscriber for this process: the log on stderr, and the traces'
/// exporter when `traces` names a collector (each layer filters for itself, so
/// `JUSTONCE_LOG` does not decide which spans are exported).
pub fn init(traces: &Destination) -> Result<(), SetupError> {
    let format = Format::parse(std::env::var(FORMAT_ENV).ok().as_deref())?;
    let filter = EnvFilter::try_from_env("JUSTONCE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = match format {
        Format::Json => log
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_filter(filter)
            .boxed(),
        Format::Text => log
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
            .with_filter(filter)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(telemetry::layer(traces)?)
        .with(log)
        .init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_text_unless_json_is_asked_for_and_a_typo_is_named() {
        assert_eq!(Format::parse(None).unwrap(), Format::Text);
        assert_eq!(Format::parse(Some("json")).unwrap(), Format::Json);
        let err = Format::parse(Some("jsno")).unwrap_err();
        assert!(err.to_string().contains("`jsno`"), "{err}");
    }
}
