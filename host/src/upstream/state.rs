//! Where an upstream stands, as its supervisor keeps it: starting, ready, or failing
//! and waiting out a backoff before it is started again. Read without waiting by
//! every lookup; a call of a tool whose upstream is not ready is refused with
//! [`UpstreamState`]'s text, naming the upstream and what went wrong.

use std::time::Instant;

/// One upstream's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamState {
    /// Being started (the process spawned or the session opened, `initialize` and
    /// `tools/list` under way); `restart` is how many starts in a row came before
    /// it without answering (0 for the first).
    Starting {
        /// Starts in a row before this one that ended in a crash or no answer.
        restart: u32,
        /// Why the last one ended, if one did.
        last_error: Option<String>,
    },
    /// Listed its tools and answers calls.
    Ready,
    /// The last start or the connection failed; it is started again at `retry_at`.
    Failing {
        /// What went wrong, stripped of its credentials.
        error: String,
        /// When it is started again.
        retry_at: Instant,
    },
    /// Disabled by an operator (the console): not started, its tools left out of
    /// `tools/list`, its calls refused until an operator enables it again. Kept in
    /// the journal, so it holds across a restart of the host and on every host of
    /// the journal.
    Disabled {
        /// The principal of the operator who disabled it.
        by: String,
        /// When, in ms since the epoch.
        at: i64,
    },
}

impl UpstreamState {
    /// Whether its tools are offered and its calls sent.
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }

    /// A short name of the state: `starting`, `ready`, `failing` or `disabled`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Starting { .. } => "starting",
            Self::Ready => "ready",
            Self::Failing { .. } => "failing",
            Self::Disabled { .. } => "disabled",
        }
    }

    /// Every state's [`UpstreamState::name`], in that order (the `state` label of
    /// `justonce_upstream_state`).
    pub const NAMES: [&'static str; 4] = ["starting", "ready", "failing", "disabled"];

    /// The error it last stopped with, if it is failing or started again after one.
    pub fn last_error(&self) -> Option<&str> {
        match self {
            Self::Starting { last_error, .. } => last_error.as_deref(),
            Self::Failing { error, .. } => Some(error),
            Self::Ready | Self::Disabled { .. } => None,
        }
    }

    /// What an agent is told of the upstream `upstream` in this state, when a call of
    /// one of its tools is refused.
    pub fn describe(&self, upstream: &str) -> String {
        match self {
            Self::Starting {
                restart: 0,
                last_error: None,
            } => format!(
                "the upstream `{upstream}` is starting (it has not yet answered initialize and tools/list)"
            ),
            Self::Starting {
                restart,
                last_error,
            } => format!(
                "the upstream `{upstream}` is starting again (restart {restart}{})",
                last_error
                    .as_deref()
                    .map(|e| format!("; the last start or connection ended: {e}"))
                    .unwrap_or_default()
            ),
            Self::Ready => format!("the upstream `{upstream}` is ready"),
            Self::Failing { error, retry_at } => {
                let left = retry_at.saturating_duration_since(Instant::now());
                format!(
                    "the upstream `{upstream}` is failing: {error}; it is started again in {} ms",
                    left.as_millis()
                )
            }
            Self::Disabled { by, at } => format!(
                "the upstream `{upstream}` was disabled by the operator `{by}` at {} (justonce console, Upstreams); its calls are not sent until an operator enables it again",
                crate::clock::rfc3339(*at)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_names_the_upstream_and_a_failing_one_its_error() {
        let starting = UpstreamState::Starting {
            restart: 0,
            last_error: None,
        };
        assert!(starting.describe("ledger").contains("`ledger` is starting"));
        let failing = UpstreamState::Failing {
            error: "did not answer initialize within 30000 ms".into(),
            retry_at: Instant::now(),
        };
        let told = failing.describe("ledger");
        assert!(
            told.contains("`ledger` is failing: did not answer initialize"),
            "{told}"
        );
        assert_eq!(failing.name(), "failing");
        assert!(!failing.is_ready() && UpstreamState::Ready.is_ready());
    }
}
