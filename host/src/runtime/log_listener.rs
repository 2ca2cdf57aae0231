//! A guest's log lines, handed to whoever runs the call on this thread besides the
//! host's log: the MCP server forwards them to its client as `notifications/message`.
//! Guests run on the thread that called them, so a thread-local listener sees the
//! lines of exactly the calls it wraps.

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

/// Receives `(tool, level, message)` for each line a guest logs.
pub type Listener = Box<dyn Fn(&str, LogLevel, &str)>;

thread_local! {
    static LISTENER: RefCell<Option<Listener>> = const { RefCell::new(None) };
}

/// Runs `run` with `listener` receiving the log lines of the guests it runs on this
/// thread; the listener that was there before is restored after.
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

/// Hands one line to this thread's listener, if there is one.
pub(crate) fn deliver(tool: &str, level: LogLevel, message: &str) {
    LISTENER.with(|l| {
        if let Some(listener) = l.borrow().as_ref() {
            listener(tool, level, message);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn lines_reach_the_listener_of_the_run_only() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&seen);
        deliver("t", LogLevel::Info, "before");
        with_log_listener(
            Box::new(move |tool, level, message| {
                sink.borrow_mut()
                    .push(format!("{tool} {level:?} {message}"))
            }),
            || deliver("t", LogLevel::Warn, "during"),
        );
        deliver("t", LogLevel::Info, "after");
        assert_eq!(*seen.borrow(), vec!["t Warn during".to_owned()]);
    }
}
