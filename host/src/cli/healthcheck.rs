//! `justonce healthcheck URL`: GET a health probe of a running `serve` and say by the exit
//! code whether it answered 200, for a container's `HEALTHCHECK` in an image that has
//! no shell and no curl (docs/deploy/Dockerfile).

use std::time::Duration;

use clap::Args;

use super::{Cli, exit};
use crate::error::Error;

/// GET URL (a health probe of a running `serve`: http://127.0.0.1:8080/healthz,
/// /readyz or /livez, on the --http or --metrics listener) and exit 0 when it answers
/// 200, 1 when it answers anything else or nothing within the timeout (what a
/// container's HEALTHCHECK expects), 2 for a URL that is not http://HOST[:PORT]/PATH.
/// The answer's first line, or why there was none, goes to stderr. No proxy is used.
#[derive(Debug, Args)]
pub struct Healthcheck {
    /// The probe's URL, e.g. http://127.0.0.1:8080/healthz.
    #[arg(value_parser = probe_url)]
    url: ureq::http::Uri,
    /// How long to wait for the answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
}

/// The exit code of a probe that did not answer 200 (a container runtime's
/// "unhealthy").
const UNHEALTHY: u8 = 1;

impl Healthcheck {
    pub(super) fn run(&self, _cli: &Cli) -> Result<u8, Error> {
        match agent(Duration::from_millis(self.timeout_ms))
            .get(&self.url)
            .call()
        {
            Ok(mut response) => {
                let status = response.status().as_u16();
                let body = response
                    .body_mut()
                    .with_config()
                    .limit(4096)
                    .read_to_string()
                    .unwrap_or_default();
                let first = body.lines().next().unwrap_or("");
                eprintln!("{}: {status} {first}", self.url);
                Ok(if status == 200 {
                    exit::SUCCESS
                } else {
                    UNHEALTHY
                })
            }
            Err(e) => {
                eprintln!("{}: no answer: {e}", self.url);
                Ok(UNHEALTHY)
            }
        }
    }
}

/// The HTTP client of a command that asks a running `serve`: no proxy, no
/// redirects, every status an answer, at most `timeout` for the whole exchange.
pub(super) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// `text` as a probe's URL: plain HTTP with a host (the listeners serve no TLS).
fn probe_url(text: &str) -> Result<ureq::http::Uri, String> {
    let bad = |why: &str| format!("{why} (e.g. http://127.0.0.1:8080/healthz)");
    let uri: ureq::http::Uri = text.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad(
            "not an http:// URL: serve's listeners are plain HTTP (TLS is the proxy's)",
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_http_url_with_a_host_is_a_probe() {
        let uri = probe_url("http://127.0.0.1:8080/healthz").unwrap();
        assert_eq!((uri.host(), uri.path()), (Some("127.0.0.1"), "/healthz"));
        for (bad, why) in [
            ("https://127.0.0.1:8080/healthz", "not an http:// URL"),
            ("127.0.0.1:8080", "not an http:// URL"),
            ("http:///healthz", "not a URL"),
            ("not a url", "not a URL"),
        ] {
            let refused = probe_url(bad).unwrap_err();
            assert!(refused.starts_with(why), "{bad}: {refused}");
        }
    }
}
