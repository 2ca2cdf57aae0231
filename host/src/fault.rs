//! Fault injection for crash tests: abort the process, with no unwinding (like
//! `kill -9`), at one of the points where a crash leaves the journal in a distinct
//! state.
//!
//! Off unless asked for. The points are compiled into debug builds (which `cargo
//! test` uses) and into release builds with the cargo feature `fault-injection`; even
//! then they do nothing unless the environment variable `JUSTONCE_FAULT` names one:
//!
//! ```text
//! JUSTONCE_FAULT=after_decide        # the run holds the lease of its record; the guest has not run
//! JUSTONCE_FAULT=before_effect       # the effect is journaled; the provider is not called
//! JUSTONCE_FAULT=after_provider      # the provider answered; the answer is not recorded
//! JUSTONCE_FAULT=after_record        # the guest finished; its outcome (and its keyed effects' answers, saved with it) not
//! JUSTONCE_FAULT=after_outcome       # the outcome is saved; the caller is not answered
//! JUSTONCE_FAULT=before_effect:2     # the same, at the second time the point is reached
//! JUSTONCE_FAULT=fsync_fails         # the journal's first fsync fails (EIO); no abort
//! ```
//!
//! A release build without the feature ignores the variable (with a warning).
//!
//! The simulator crashes hosts in-process instead: [`with_hook`] calls a hook of its
//! own at every point a thread reaches (in every build), and the hook may panic.

use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

/// The environment variable that arms a fault point.
pub const ENV: &str = "JUSTONCE_FAULT";

/// Where the host can be made to abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// A journaled call was decided to run (or resume): its run holds the record's
    /// lease; the guest has not run.
    AfterDecide,
    /// The effect record (and its attempt) is journaled; the provider is not called.
    BeforeEffect,
    /// The provider answered; its answer is not recorded.
    AfterProvider,
    /// The guest finished; its outcome is not saved, nor are the answers of keyed
    /// effects, which are saved with it (their records are pending: a retry asks
    /// the downstream again under the same key).
    AfterRecord,
    /// The outcome is saved; the caller is not answered.
    AfterOutcome,
    /// Not a crash: the SQLite journal's fsync fails (`EIO`) at this arrival, as a
    /// failing disk's would, and the later ones succeed, as the kernel's may.
    FsyncFails,
}

impl FaultPoint {
    /// Every point, in the order a call reaches them.
    pub const ALL: [FaultPoint; 6] = [
        Self::AfterDecide,
        Self::BeforeEffect,
        Self::AfterProvider,
        Self::AfterRecord,
        Self::AfterOutcome,
        Self::FsyncFails,
    ];

    /// The name `JUSTONCE_FAULT` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AfterDecide => "after_decide",
            Self::BeforeEffect => "before_effect",
            Self::AfterProvider => "after_provider",
            Self::AfterRecord => "after_record",
            Self::AfterOutcome => "after_outcome",
            Self::FsyncFails => "fsync_fails",
        }
    }
}

impl FromStr for FaultPoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.as_str()).collect();
                format!(
                    "`{s}` is not a fault point; use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// An armed fault: the point, and at which arrival there to abort (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Armed {
    point: FaultPoint,
    at: u32,
}

fn parse(value: &str) -> Result<Armed, String> {
    let (name, at) = match value.split_once(':') {
        Some((name, n)) => {
            let at = n
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("`{n}` after `:` must be a count from 1"))?;
            (name, at)
        }
        None => (value, 1),
    };
    Ok(Armed {
        point: name.parse()?,
        at,
    })
}

static ARMED: OnceLock<Result<Option<Armed>, String>> = OnceLock::new();
static ARRIVALS: AtomicU32 = AtomicU32::new(0);

fn armed() -> &'static Result<Option<Armed>, String> {
    ARMED.get_or_init(|| match std::env::var(ENV) {
        Err(_) => Ok(None),
        Ok(value) if !cfg!(any(debug_assertions, feature = "fault-injection")) => {
            tracing::warn!(
                "{ENV}={value} is ignored: this build has no fault injection (cargo feature `fault-injection`)"
            );
            Ok(None)
        }
        Ok(value) => parse(&value)
            .map(Some)
            .map_err(|e| format!("{ENV}={value}: {e}")),
    })
}

/// Checks `JUSTONCE_FAULT` once, so a mistyped point is an error when the host is
/// built rather than a test that silently never crashes.
pub(crate) fn check_env() -> Result<()> {
    match armed() {
        Ok(_) => Ok(()),
        Err(message) => Err(Error::Host(anyhow::anyhow!("{message}"))),
    }
}

/// Aborts the process if `JUSTONCE_FAULT` arms `point` and this is the arrival it
/// names.
pub(crate) fn point(point: FaultPoint) {
    HOOK.with_borrow(|hook| {
        if let Some(hook) = hook {
            hook(point);
        }
    });
    if arrived(point) {
        eprintln!("justonce: {ENV}: aborting at {}", point.as_str());
        std::process::abort();
    }
}

/// What [`with_hook`] calls at each fault point.
pub(crate) type Hook = std::rc::Rc<dyn Fn(FaultPoint)>;

thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `hook` called at every fault point this thread reaches meanwhile
/// (the simulator's in-process crashes: the hook may panic, and the panic unwinds
/// through the call). The thread's previous hook is back afterwards, also when `f`
/// panics.
pub(crate) fn with_hook<R>(hook: Hook, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Hook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            HOOK.with_borrow_mut(|hook| *hook = previous);
        }
    }
    let _restore = Restore(HOOK.with_borrow_mut(|h| h.replace(hook)));
    f()
}

/// Whether `JUSTONCE_FAULT` arms `point` and this is the arrival it names: for a
/// fault that is an error rather than a crash ([`FaultPoint::FsyncFails`]).
pub(crate) fn arrived(point: FaultPoint) -> bool {
    if !cfg!(any(debug_assertions, feature = "fault-injection")) {
        return false;
    }
    let Ok(Some(armed)) = armed() else {
        return false;
    };
    armed.point == point && ARRIVALS.fetch_add(1, Ordering::SeqCst) + 1 == armed.at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_with_an_optional_arrival_and_bad_values_are_named() {
        assert_eq!(
            parse("after_provider"),
            Ok(Armed {
                point: FaultPoint::AfterProvider,
                at: 1
            })
        );
        assert_eq!(
            parse("before_effect:3"),
            Ok(Armed {
                point: FaultPoint::BeforeEffect,
                at: 3
            })
        );
        let err = parse("befor_effect").unwrap_err();
        assert!(
            err.contains("`befor_effect`") && err.contains("after_outcome"),
            "{err}"
        );
        let err = parse("after_record:0").unwrap_err();
        assert!(err.contains("`0`"), "{err}");
    }
}
