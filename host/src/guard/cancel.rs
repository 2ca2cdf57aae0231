//! Calls cancelled by their client on this host (MCP `tasks/cancel`): their runs
//! perform no further effect. An effect already started is never cut short; the
//! next one is refused before it starts, and the tool's answer to that refusal is
//! the call's outcome, saved and replayed like any other. Kept in this process's
//! memory: a run on another host, or after a restart, does not know of the cancel.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// Whether any call was ever cancelled here: the effect path reads only this until
/// one is.
static ANY: AtomicBool = AtomicBool::new(false);

fn keys() -> MutexGuard<'static, HashSet<String>> {
    static KEYS: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    KEYS.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Cancels the call of invocation key `key` on this host.
pub(crate) fn cancel(key: &str) {
    keys().insert(key.to_owned());
    ANY.store(true, Ordering::Release);
}

/// Whether the call of `key` was cancelled on this host.
pub(crate) fn is_cancelled(key: &str) -> bool {
    ANY.load(Ordering::Acquire) && keys().contains(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_key_is_known_and_another_is_not() {
        cancel("cancel-tests-a");
        assert!(is_cancelled("cancel-tests-a"));
        assert!(!is_cancelled("cancel-tests-b"));
    }
}
