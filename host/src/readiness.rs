//! Whether a host should be sent new work, as `/readyz` says it: it is not draining,
//! it has tools to offer, and its journal answers. [`Host::readiness`] checks; this
//! module names why a host is not ready, and in which order that is decided.
//!
//! [`Host::readiness`]: crate::Host::readiness

use crate::error::Error;

/// Why a host should not be sent new work now (`/readyz` answers `503` with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// The host is stopping (SIGTERM): the calls in flight finish, and no new call
    /// or session starts.
    #[error("draining")]
    Draining,
    /// No tool is loaded and no upstream MCP server is configured: a call could only
    /// be refused.
    #[error("no tools loaded")]
    NoTools,
    /// The journal did not answer a read. `kind` is the error's kind
    /// ([`Error::kind`]); its detail (which may name the database) goes to the log
    /// only.
    #[error("journal unreachable: {kind}")]
    JournalUnreachable {
        /// The kind of the journal's error (`store_unavailable`, …).
        kind: &'static str,
    },
}

/// Decides readiness from what is known without the journal (`draining`, `tools`:
/// whether there are tools to offer) and, only when those allow, from `ping`, a read
/// of the journal: a draining host costs its journal nothing per probe.
pub(crate) fn judge(
    draining: bool,
    tools: bool,
    ping: impl FnOnce() -> Result<(), Error>,
) -> Result<(), NotReady> {
    if draining {
        return Err(NotReady::Draining);
    }
    if !tools {
        return Err(NotReady::NoTools);
    }
    ping().map_err(|e| {
        tracing::warn!("readiness: the journal did not answer: {e}");
        NotReady::JournalUnreachable { kind: e.kind() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> Result<(), Error> {
        Err(Error::Host(anyhow::anyhow!(
            "postgres://justonce:secret@db.internal/journal refused"
        )))
    }

    #[test]
    fn a_host_is_ready_only_when_not_draining_with_tools_and_a_journal_that_answers() {
        assert_eq!(judge(false, true, || Ok(())), Ok(()));
        assert_eq!(judge(false, false, || Ok(())), Err(NotReady::NoTools));
        assert_eq!(
            judge(false, true, unreachable),
            Err(NotReady::JournalUnreachable {
                kind: "host_failed"
            })
        );
    }

    #[test]
    fn a_draining_host_is_not_ready_without_asking_its_journal() {
        let asked = std::cell::Cell::new(false);
        let ping = || {
            asked.set(true);
            Ok(())
        };
        assert_eq!(judge(true, true, ping), Err(NotReady::Draining));
        assert!(!asked.get(), "the journal was read while draining");
    }

    #[test]
    fn the_reason_names_the_kind_of_a_journal_failure_never_its_detail() {
        let told = judge(false, true, unreachable).unwrap_err().to_string();
        assert_eq!(told, "journal unreachable: host_failed");
        assert!(!told.contains("secret") && !told.contains("db.internal"));
    }
}
