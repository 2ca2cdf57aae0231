//! What a trap tells the agent: a Rust guest's panic message with its file and line,
//! or a Python or JavaScript tool's uncaught exception as its SDK reported it, read
//! from what the guest printed to stderr before it trapped, instead of a wasm
//! backtrace (which goes to the host's log).

/// The line before an uncaught exception's report, which the Python and JavaScript
/// SDKs print to stderr just before they trap (`guest-sdk/python/justonce/__init__.py`,
/// `guest-sdk/js/justonce.js`): the language runtime's own panic or trap that follows
/// says only that something was thrown.
pub(crate) const UNCAUGHT_START: &str = "justonce: uncaught exception:";
/// The line after the report.
pub(crate) const UNCAUGHT_END: &str = "justonce: end of report";

/// What a guest said about its failure before it trapped: the last uncaught exception
/// an SDK reported (`ValueError: bad amount` and where), else the last Rust panic;
/// `None` when there is neither.
pub(crate) fn from_stderr(stderr: &str) -> Option<String> {
    uncaught_exception(stderr).or_else(|| rust_panic(stderr))
}

/// The last uncaught exception a Python or JavaScript SDK reported to `stderr`.
fn uncaught_exception(stderr: &str) -> Option<String> {
    let start = stderr.rfind(UNCAUGHT_START)?;
    let rest = &stderr[start + UNCAUGHT_START.len()..];
    let report = rest.split(UNCAUGHT_END).next().unwrap_or(rest).trim();
    (!report.is_empty()).then(|| report.to_string())
}

/// The last panic a Rust guest printed to `stderr`, as
/// `panicked at src/lib.rs:20:9: the message`; `None` when there is none.
///
/// std prints `thread '…' panicked at FILE:LINE:COL:` on one line, the message on the
/// lines after it, then (usually) a `note: run with RUST_BACKTRACE=1 …` line.
fn rust_panic(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let rest = &stderr[start + "panicked at ".len()..];
    let (location, after) = rest.split_once('\n').unwrap_or((rest, ""));
    let location = location.trim_end().trim_end_matches(':');
    let message: Vec<&str> = after
        .lines()
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    let message = message.join("\n");
    let message = message.trim();
    Some(if message.is_empty() {
        format!("panicked at {location}")
    } else {
        format!("panicked at {location}: {message}")
    })
}

/// The short form of a WebAssembly trap (`wasm trap: …`, once: wasmtime's `Trap`
/// says it), without the backtrace that wasmtime attaches as context.
pub(crate) fn trap_summary(error: &wasmtime::Error) -> String {
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panic_message_and_its_location_are_read_from_stderr() {
        let stderr = "starting\nthread '<unnamed>' panicked at src/lib.rs:20:9:\npanics: deliberate panic\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            from_stderr(stderr).unwrap(),
            "panicked at src/lib.rs:20:9: panics: deliberate panic"
        );
    }

    #[test]
    fn a_message_of_several_lines_is_kept_and_the_last_panic_wins() {
        let stderr = "thread 'main' panicked at a.rs:1:1:\nfirst\nthread 'main' panicked at b.rs:2:3:\nline one\nline two\n";
        assert_eq!(
            from_stderr(stderr).unwrap(),
            "panicked at b.rs:2:3: line one\nline two"
        );
    }

    #[test]
    fn an_sdks_report_of_an_uncaught_exception_wins_over_the_runtime_panic_after_it() {
        // componentize-py panics in its own runtime once the exception leaves `call`.
        let stderr = format!(
            "starting\n{UNCAUGHT_START}\nValueError: bad amount\n  at app.py:12 in refund\n\
             {UNCAUGHT_END}\nthread '<unnamed>' panicked at runtime/src/lib.rs:1293:29:\n\
             Python function threw an unexpected exception\n"
        );
        assert_eq!(
            from_stderr(&stderr).unwrap(),
            "ValueError: bad amount\n  at app.py:12 in refund"
        );
        // A report cut off before its end line is still read.
        let cut = format!("{UNCAUGHT_START}\nError: boom from JS\n");
        assert_eq!(from_stderr(&cut).unwrap(), "Error: boom from JS");
        // An empty one is not a report.
        let empty = format!("{UNCAUGHT_START}\n{UNCAUGHT_END}\n");
        assert_eq!(from_stderr(&empty), None);
    }

    #[test]
    fn a_trap_says_wasm_trap_once() {
        let error = wasmtime::Error::new(wasmtime::Trap::UnreachableCodeReached);
        assert_eq!(
            trap_summary(&error),
            "wasm trap: wasm `unreachable` instruction executed"
        );
    }

    #[test]
    fn output_without_a_panic_gives_none() {
        assert_eq!(from_stderr("just logging\n"), None);
        assert_eq!(from_stderr(""), None);
    }
}
