//! An operator's disable of an upstream MCP server holds across restarts and on
//! every host of the journal (docs/gateway.md, "Operating upstreams").
//!
//! The journal keeps each disable (who, when: `upstream_disables`). An operator's
//! disable or enable is journaled first (durable), then applied to this process's
//! upstream. A host reads the journal's disables when it is built, before any
//! upstream is started, so a disabled one is never started; while it lives, a
//! thread of its own reads them again every [`FOLLOW_EVERY`] and applies them, so a
//! disable or an enable taken on another host of the journal holds here within
//! about that long. Nothing but an operator's enable (on any host) ends a disable.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::error::Result;
use crate::journal::{Journal, UpstreamDisable};
use crate::upstream::{Upstream, UpstreamState, Upstreams};

/// How often a host reads the journal's disables while it lives: the longest a
/// disable or enable taken on another host of the journal goes unheeded here.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Held across a read of the journal's disables and its applying, and across an
/// operator's journaled disable or enable and its applying: a read taken before an
/// operator's write is never applied after it (it would undo it here until the next
/// read).
static SWITCHING: Mutex<()> = Mutex::new(());

/// [`SWITCHING`], taken.
fn switching() -> MutexGuard<'static, ()> {
    SWITCHING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Brings each of `upstreams` to what `disables` says: disabled by whom the journal
/// names; one disabled here that the journal no longer names (an operator enabled
/// it, on this host or another) enabled. A disable of an upstream this host does
/// not have is left alone.
fn apply(upstreams: &Upstreams, disables: &[UpstreamDisable]) {
    for upstream in upstreams.iter() {
        match disables.iter().find(|d| d.upstream == upstream.name()) {
            Some(disable) => {
                if upstream.disable(&disable.by, disable.at) {
                    tracing::warn!(target: "justonce::upstream", upstream = %upstream.name(), by = %disable.by, "disabled by the operator {} (journaled): its tools are left out until an operator enables it", disable.by);
                }
            }
            None => {
                if matches!(upstream.state(), UpstreamState::Disabled { .. }) && upstream.enable() {
                    tracing::info!(target: "justonce::upstream", upstream = %upstream.name(), "enabled by an operator (journaled): started again");
                }
            }
        }
    }
}

/// Reads the journal's disables and applies them to `upstreams` (see the module
/// docs); a host does it once when it is built, before it starts any.
pub(crate) fn follow_once(upstreams: &Upstreams, journal: &dyn Journal) -> Result<()> {
    if upstreams.is_empty() {
        return Ok(());
    }
    let _switching = switching();
    apply(upstreams, &journal.upstream_disables()?);
    Ok(())
}

/// Starts the thread that follows the journal's disables every [`FOLLOW_EVERY`],
/// for as long as both `upstreams` and `journal` live (the host holds them). A
/// journal that does not answer is logged and asked again at the next turn; the
/// upstreams stay as they were.
pub(crate) fn follow(upstreams: &Arc<Upstreams>, journal: &Arc<dyn Journal>) {
    if upstreams.is_empty() {
        return;
    }
    let upstreams: Weak<Upstreams> = Arc::downgrade(upstreams);
    let journal: Weak<dyn Journal> = Arc::downgrade(journal);
    let spawned = std::thread::Builder::new()
        .name("upstream-switch".into())
        .spawn(move || {
            let mut failing = false;
            loop {
                std::thread::sleep(FOLLOW_EVERY);
                let (Some(upstreams), Some(journal)) = (upstreams.upgrade(), journal.upgrade())
                else {
                    return;
                };
                match follow_once(&upstreams, &*journal) {
                    Ok(()) if failing => {
                        failing = false;
                        tracing::info!(target: "justonce::upstream", "the journal's upstream disables are read again");
                    }
                    Ok(()) => {}
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(target: "justonce::upstream", "cannot read the journal's upstream disables (upstreams stay as they are): {e}");
                    }
                    Err(_) => {}
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(target: "justonce::upstream", "cannot start the thread that follows the journal's upstream disables: {e}");
    }
}

/// An operator's disable of `upstream` by `by` at `now` (ms): journaled first, for
/// every host and restart, then applied here. The disable on record (an upstream
/// disabled already stays disabled by whoever did it first).
pub(crate) fn disable(
    journal: &dyn Journal,
    upstream: &Upstream,
    by: &str,
    now: i64,
) -> Result<UpstreamDisable> {
    let _switching = switching();
    let disable = journal.disable_upstream(upstream.name(), by, now)?;
    upstream.disable(&disable.by, disable.at);
    Ok(disable)
}

/// An operator's enable of `upstream`: its disable ended in the journal, then it is
/// started here (other hosts follow). Whether it was disabled (in the journal, or
/// here only).
pub(crate) fn enable(journal: &dyn Journal, upstream: &Upstream) -> Result<bool> {
    let _switching = switching();
    let journaled = journal.enable_upstream(upstream.name())?;
    let here = upstream.enable();
    Ok(journaled || here)
}
