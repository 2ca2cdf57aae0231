//! What a trap tells the agent: a Rust guest's panic message with its file and line,
//! read from what the guest printed to stderr before it trapped, instead of a wasm
//! backtrace (which goes to the host's log).

/// The last panic a Rust guest printed to `stderr`, as
/// `panicked at src/lib.rs:20:9: the message`; `None` when there is none.
///
/// std prints `thread '…' panicked at FILE:LINE:COL:` on one line, the message on the
/// lines after it, then (usually) a `note: run with RUST_BACKTRACE=1 …` line.
pub(crate) fn from_stderr(stderr: &str) -> Option<String> {
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

/// The short form of a WebAssembly trap (`wasm trap: …`), without the backtrace that
/// wasmtime attaches as context.
pub(crate) fn trap_summary(error: &wasmtime::Error) -> String {
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => format!("wasm trap: {trap}"),
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
    fn output_without_a_panic_gives_none() {
        assert_eq!(from_stderr("just logging\n"), None);
        assert_eq!(from_stderr(""), None);
    }
}
