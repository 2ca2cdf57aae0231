//! A guest's log lines and progress reports, handed to whoever runs the call on this
//! thread (log lines go to the host's log besides): the MCP server forwards them to
//! its client as `notifications/message` and `notifications/progress`. Guests run on
//! the thread that called them, so a thread-local listener hears exactly the calls
//! it wraps.

use std::cell::RefCell;

/// How important a log line is, as the guest wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Very detailed tracing.
    Trace,
    /// Detail useful when debugging a tool.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the tool recovered from.
    Warn,
    /// A failure.
    Error,
}

/// What a guest said while it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GuestNote<'a> {
    /// A log line.
    Log(LogLevel, &'a str),
    /// A progress report: `done` of `total`, if known, and what is happening.
    Progress {
        /// How much is done.
        done: f64,
        /// How much there is to do, if known.
        total: Option<f64>,
        /// What is happening.
        message: Option<&'a str>,
    },
    /// The host itself says what it is doing for the call while no guest speaks:
    /// waiting for a parallel duplicate, retrying an effect.
    Host(&'a str),
}

/// Receives `(tool, note)` for each line a guest logs and each progress it reports.
pub type Listener = Box<dyn Fn(&str, GuestNote<'_>)>;

thread_local! {
    static LISTENER: RefCell<Option<Listener>> = const { RefCell::new(None) };
}

/// Runs `run` with `listener` hearing the guests it runs on this thread; the listener
/// that was there before is restored after.
pub fn with_log_listener<R>(listener: Listener, run: impl FnOnce() -> R) -> R {
    struct Restore(Option<Listener>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            LISTENER.with(|l| *l.borrow_mut() = previous);
        }
    }
    let _restore = Restore(LISTENER.with(|l| l.borrow_mut().replace(listener)));
    run()
}

/// Hands one note to this thread's listener, if there is one.
pub(crate) fn deliver(tool: &str, note: GuestNote<'_>) {
    LISTENER.with(|l| {
        if let Some(listener) = l.borrow().as_ref() {
            listener(tool, note);
        }
    });
}

/// Tells this thread's listener, if there is one, what the host is doing for a call
/// of `tool` (`message` is made only then).
pub(crate) fn host_says(tool: &str, message: impl FnOnce() -> String) {
    if listening() {
        deliver(tool, GuestNote::Host(&message()));
    }
}

/// Whether this thread has a listener (a guest need not say what no one hears).
pub(crate) fn listening() -> bool {
    LISTENER.with(|l| l.borrow().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn lines_reach_the_listener_of_the_run_only() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&seen);
        deliver("t", GuestNote::Log(LogLevel::Info, "before"));
        assert!(!listening());
        with_log_listener(
            Box::new(move |tool, note| sink.borrow_mut().push(format!("{tool} {note:?}"))),
            || {
                assert!(listening());
                deliver("t", GuestNote::Log(LogLevel::Warn, "during"));
            },
        );
        deliver("t", GuestNote::Log(LogLevel::Info, "after"));
        assert_eq!(*seen.borrow(), vec![r#"t Log(Warn, "during")"#.to_owned()]);
    }
}
