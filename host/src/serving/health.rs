//! `/healthz`, `/livez` and `/readyz`: what a load balancer, a container runtime or
//! Kubernetes probes, on the MCP server's listener and on the `--metrics` one. No
//! token, no `Origin` or `Host` check (a probe sends neither as a browser would), and
//! nothing in the answer but a word or a one-line reason: `ok`, `draining`,
//! `journal unreachable: store_unavailable` (the detail of a journal error goes to the
//! log, never to the probe).
//!
//! - `/healthz` and `/livez`: `200` while the process serves requests.
//! - `/readyz`: `200` when [`Host::readiness`] says the host should be sent new work,
//!   `503` with why not otherwise.

use super::wire::{Head, Response};
use crate::host::Host;

/// What a probe asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// `/healthz` or `/livez`: whether the process serves.
    Live,
    /// `/readyz`: whether the host should be sent new work.
    Ready,
}

impl Probe {
    /// The probe `path` (with any query) asks, if it is one.
    pub(crate) fn of(path: &str) -> Option<Self> {
        match path.split('?').next() {
            Some("/healthz" | "/livez") => Some(Self::Live),
            Some("/readyz") => Some(Self::Ready),
            _ => None,
        }
    }
}

/// The answer to `probe` about `host`, from the request's `head` (`GET` or `HEAD`
/// only). `/readyz` reads the journal: call it where blocking is allowed.
pub(crate) fn answer(host: &Host, probe: Probe, head: &Head) -> Response {
    if head.method != "GET" && head.method != "HEAD" {
        return text(405, "GET or HEAD").with("allow", "GET, HEAD");
    }
    match probe {
        Probe::Live => text(200, "ok"),
        Probe::Ready => match host.readiness() {
            Ok(()) => text(200, "ok"),
            Err(not_ready) => text(503, &not_ready.to_string()),
        },
    }
}

/// A one-line plain-text answer that no cache keeps.
fn text(status: u16, line: &str) -> Response {
    Response::plain(
        status,
        "text/plain; charset=utf-8",
        format!("{line}\n").into_bytes(),
    )
    .with("cache-control", "no-store")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_paths_are_told_apart_with_or_without_a_query_and_nothing_else_is_one() {
        assert_eq!(Probe::of("/healthz"), Some(Probe::Live));
        assert_eq!(Probe::of("/livez?verbose"), Some(Probe::Live));
        assert_eq!(Probe::of("/readyz"), Some(Probe::Ready));
        for other in ["/readyz/", "/mcp", "/metrics", "/health", "/readyzz", ""] {
            assert_eq!(Probe::of(other), None, "{other}");
        }
    }
}
