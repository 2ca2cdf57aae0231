//! `justonce upstreams`: each upstream MCP server and where it stands: its state,
//! how many tools it lists, how long it took to be ready, its last error, who
//! disabled it and when, and the calls of its tools the journal has waiting on it.
//!
//! Two forms print the same: the local one starts each upstream of the
//! configuration (in parallel, as `justonce tools` does) and reports on it; with
//! `--url` it asks a running server's console (`/console/api/upstreams`, with a
//! viewer's or operator's token) about the upstreams it runs.

use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::healthcheck::agent;
use super::{Cli, exit, print_json};
use crate::console::UpstreamView;
use crate::error::Error;

/// Print each upstream MCP server (`[upstreams.NAME]`) with its state (ready,
/// starting, failing or disabled, and by whom), how many tools it lists, how long
/// it took to be ready, its last error and the calls of its tools waiting on it in
/// the journal. Without --url, each upstream of the configuration is started here in
/// parallel and its first start waited for; with --url, a running server is asked
/// about its own. Exits 0 when every one is ready, 1 when one is not, 2 when none is
/// configured or the server refused the token or has no console there, 5 when the
/// server did not answer.
#[derive(Debug, Args)]
pub struct Upstreams {
    /// Print a JSON array of `{name, state, tools, starts, ready_in_ms, last_error,
    /// retry_in_ms, disabled_by, disabled_at, tool_names, waiting}`, as the
    /// console's `/console/api/upstreams` answers.
    #[arg(long)]
    json: bool,
    /// Ask the running server at this URL (`serve --http`'s, e.g.
    /// http://127.0.0.1:8080 or the MCP URL it printed) instead of starting the
    /// upstreams here.
    #[arg(long, value_name = "URL", value_parser = server_url)]
    url: Option<ureq::http::Uri>,
    /// The viewer's or operator's bearer token for --url (`justonce token add NAME
    /// --role viewer`).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "JUSTONCE_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// How long to wait for the server's answer with --url, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
}

/// The exit code when an upstream is not ready.
const NOT_READY: u8 = 1;

/// The console's route that lists the upstreams.
const API: &str = "/console/api/upstreams";

/// Why the running server's upstreams could not be read: said on stderr with the
/// exit code it maps to.
#[derive(Debug, thiserror::Error)]
enum Remote {
    /// No token was given.
    #[error(
        "--url needs a viewer's or operator's token: --token TOKEN or JUSTONCE_TOKEN (justonce token add NAME --role viewer)"
    )]
    NoToken,
    /// The server refused the token.
    #[error(
        "{url} refused the token ({status}): it must be a viewer's or operator's token of that server (an agent's does not read the console)"
    )]
    Refused { url: String, status: u16 },
    /// Nothing answered there.
    #[error("{url} did not answer: {reason} (is `justonce serve --http` running there?)")]
    NoAnswer { url: String, reason: String },
    /// Something answered, but not a justonce console.
    #[error(
        "{url} answered {status}, not the console's list of upstreams: is this the address of `justonce serve --http` (not its --metrics listener)?"
    )]
    NoConsole { url: String, status: u16 },
    /// The answer was not the list of upstreams.
    #[error("{url} answered something that is not a list of upstreams: {reason}")]
    NotAList { url: String, reason: String },
}

impl Remote {
    /// The exit code it maps to.
    fn exit_code(&self) -> u8 {
        match self {
            Self::NoAnswer { .. } => exit::HOST_FAILURE,
            _ => exit::BAD_INPUT,
        }
    }
}

impl Upstreams {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let listed = match &self.url {
            Some(url) => match self.remote(url) {
                Ok(listed) => listed,
                Err(e) => {
                    eprintln!("justonce: {e}");
                    return Ok(e.exit_code());
                }
            },
            None => match self.local(cli)? {
                Some(listed) => listed,
                None => {
                    eprintln!(
                        "justonce: no upstream MCP server is configured ([upstreams.NAME] in justonce.toml)"
                    );
                    return Ok(exit::BAD_INPUT);
                }
            },
        };
        if listed.is_empty() {
            eprintln!(
                "justonce: the server has no upstream MCP server ([upstreams.NAME] in its justonce.toml)"
            );
            return Ok(exit::BAD_INPUT);
        }
        if self.json {
            print_json(&Value::Array(listed.clone()));
        } else {
            for upstream in &listed {
                println!("{}", describe(upstream));
            }
        }
        let all_ready = listed.iter().all(|u| u["state"] == "ready");
        Ok(if all_ready { exit::SUCCESS } else { NOT_READY })
    }

    /// The upstreams of the configuration, started here, as the console's API
    /// answers them; `None` when none is configured.
    fn local(&self, cli: &Cli) -> Result<Option<Vec<Value>>, Error> {
        let host = cli.host().build()?;
        let upstreams = host.upstreams();
        if upstreams.is_empty() {
            return Ok(None);
        }
        // Starts them all in parallel and waits for each one's first start.
        host.upstream_tools();
        let views = UpstreamView::all(upstreams, &**host.journal_handle(), host.clock().now_ms())?;
        Ok(Some(views.iter().map(UpstreamView::to_json).collect()))
    }

    /// The upstreams the server at `url` runs, from its console's API.
    fn remote(&self, url: &ureq::http::Uri) -> Result<Vec<Value>, Remote> {
        let token = self.token.as_deref().ok_or(Remote::NoToken)?;
        let target = api_url(url);
        let mut response = agent(Duration::from_millis(self.timeout_ms))
            .get(&target)
            .header("authorization", format!("Bearer {token}"))
            .call()
            .map_err(|e| Remote::NoAnswer {
                url: target.clone(),
                reason: e.to_string(),
            })?;
        let status = response.status().as_u16();
        match status {
            200 => {}
            401 | 403 => {
                return Err(Remote::Refused {
                    url: target,
                    status,
                });
            }
            _ => {
                return Err(Remote::NoConsole {
                    url: target,
                    status,
                });
            }
        }
        let body = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| Remote::NotAList {
                url: target.clone(),
                reason: e.to_string(),
            })?;
        match serde_json::from_str::<Value>(&body) {
            Ok(Value::Array(listed)) => Ok(listed),
            Ok(_) => Err(Remote::NotAList {
                url: target,
                reason: "not a JSON array".into(),
            }),
            Err(e) => Err(Remote::NotAList {
                url: target,
                reason: e.to_string(),
            }),
        }
    }
}

/// `text` as a server's URL: http:// or https:// with a host.
fn server_url(text: &str) -> Result<ureq::http::Uri, String> {
    let bad = |why: &str| format!("{why} (e.g. http://127.0.0.1:8080)");
    let uri: ureq::http::Uri = text.parse().map_err(|_| bad("not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad("not an http:// or https:// URL"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(uri)
}

/// The console API's URL on the server at `url`: its path, less a trailing `/mcp`
/// or `/console` (the URLs `serve` prints), then [`API`].
fn api_url(url: &ureq::http::Uri) -> String {
    let path = url.path().trim_end_matches('/');
    let base = path
        .strip_suffix("/mcp")
        .or_else(|| path.strip_suffix("/console"))
        .unwrap_or(path);
    format!(
        "{}://{}{base}{API}",
        url.scheme_str().unwrap_or("http"),
        url.authority().map(|a| a.as_str()).unwrap_or_default()
    )
}

/// One upstream (as the console's API answers it) in a few lines.
fn describe(upstream: &Value) -> String {
    let text = |field: &str| upstream[field].as_str().unwrap_or_default();
    let mut out = format!(
        "{}: {}, {} tool(s)",
        text("name"),
        text("state"),
        upstream["tools"].as_u64().unwrap_or(0)
    );
    if let Some(ready_in) = upstream["ready_in_ms"].as_u64() {
        out.push_str(&format!(", ready in {ready_in} ms"));
    }
    if let Some(by) = upstream["disabled_by"].as_str() {
        out.push_str(&format!("\n  disabled by {by} at {}", text("disabled_at")));
    }
    if let Some(error) = upstream["last_error"].as_str() {
        out.push_str(&format!("\n  last error: {error}"));
    }
    if let Some(waiting) = upstream["waiting"].as_array().filter(|w| !w.is_empty()) {
        out.push_str(&format!("\n  {} call(s) waiting on it:", waiting.len()));
        for call in waiting {
            out.push_str(&format!(
                "\n    {} {}",
                call["key"].as_str().unwrap_or_default(),
                call["tool"].as_str().unwrap_or_default()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_found_from_the_servers_url_or_the_urls_serve_prints() {
        for (given, api) in [
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080/console/api/upstreams",
            ),
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/console/api/upstreams",
            ),
            (
                "http://127.0.0.1:8080/mcp",
                "http://127.0.0.1:8080/console/api/upstreams",
            ),
            (
                "https://gw.example/console",
                "https://gw.example/console/api/upstreams",
            ),
            (
                "https://gw.example/tools/mcp",
                "https://gw.example/tools/console/api/upstreams",
            ),
        ] {
            assert_eq!(api_url(&server_url(given).unwrap()), api, "{given}");
        }
        for (bad, why) in [
            ("ftp://127.0.0.1:8080", "not an http"),
            ("127.0.0.1:8080", "not an http"),
            ("not a url", "not a URL"),
        ] {
            let refused = server_url(bad).unwrap_err();
            assert!(refused.starts_with(why), "{bad}: {refused}");
        }
    }
}
