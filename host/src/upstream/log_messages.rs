//! An upstream's log messages (`notifications/message`): during a call whose client
//! listens, handed to it as the tool's log lines, through the same per-call path as
//! a component's (the client's `logging/setLevel` decides which it gets), at most
//! [`MAX_PER_CALL`] of them, each cut at [`MAX_MESSAGE_BYTES`]; outside a call, to
//! the host's log, escaped and cut there ([`super::log_field`]).

use serde_json::Value;

use super::log_field::field;
use crate::runtime::log_listener::{self, GuestNote, LogLevel};
use crate::runtime::truncate;

/// The most log messages of one call handed to its client; the rest are counted
/// in the host's log.
pub(crate) const MAX_PER_CALL: usize = 256;

/// The longest log message handed to a client, in bytes (as a component's line).
pub(crate) const MAX_MESSAGE_BYTES: usize = super::log_field::MAX_FIELD_BYTES;

/// Whether `message` is a log message.
pub(crate) fn is_log(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("notifications/message")
}

/// Writes the upstream's log message to the host's log (no call hears it).
pub(crate) fn to_log(upstream: &str, message: &Value) {
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    tracing::info!(target: "justonce::upstream", upstream = %upstream, "{}", field(&params.to_string()));
}

/// The log messages of one call, on their way to its client.
pub(crate) struct CallLogs<'a> {
    upstream: &'a str,
    handed: usize,
    dropped: usize,
}

impl<'a> CallLogs<'a> {
    /// None yet, from `upstream`.
    pub(crate) fn new(upstream: &'a str) -> Self {
        Self {
            upstream,
            handed: 0,
            dropped: 0,
        }
    }

    /// Hands `message` on as a log line of `tool` (the name the host offers it by),
    /// to this thread's listener; to the host's log too.
    pub(crate) fn hand_on(&mut self, tool: &str, message: &Value) {
        to_log(self.upstream, message);
        if self.handed >= MAX_PER_CALL {
            self.dropped += 1;
            return;
        }
        self.handed += 1;
        let params = message.get("params");
        let level = level(params.and_then(|p| p.get("level")).and_then(Value::as_str));
        let text = match params.and_then(|p| p.get("data")) {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        log_listener::deliver(
            tool,
            GuestNote::Log(level, truncate(&text, MAX_MESSAGE_BYTES)),
        );
    }
}

impl Drop for CallLogs<'_> {
    fn drop(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(target: "justonce::upstream", upstream = %self.upstream, dropped = self.dropped, "a call's log messages past {MAX_PER_CALL} were not handed to its client");
        }
    }
}

/// MCP's level (RFC 5424's names) as a log line's: `notice` is `info`, the levels
/// above `error` are `error`; one it does not know is `info`.
fn level(name: Option<&str>) -> LogLevel {
    match name {
        Some("debug") => LogLevel::Debug,
        Some("warning") => LogLevel::Warn,
        Some("error" | "critical" | "alert" | "emergency") => LogLevel::Error,
        _ => LogLevel::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn a_calls_log_messages_reach_its_listener_leveled_cut_and_bounded() {
        let heard = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&heard);
        log_listener::with_log_listener(
            Box::new(move |tool, note| {
                if let GuestNote::Log(level, text) = note {
                    sink.borrow_mut().push((tool.to_owned(), level, text.len()));
                }
            }),
            || {
                let mut logs = CallLogs::new("ev");
                let say = |level: &str, data: Value| json!({ "method": "notifications/message", "params": { "level": level, "data": data } });
                logs.hand_on("ev_t", &say("warning", json!("w")));
                logs.hand_on("ev_t", &say("critical", json!({ "a": 1 })));
                logs.hand_on("ev_t", &say("debug", json!("é".repeat(MAX_MESSAGE_BYTES))));
                for _ in 0..MAX_PER_CALL {
                    logs.hand_on("ev_t", &say("info", json!("flood")));
                }
            },
        );
        let heard = heard.borrow();
        assert_eq!(heard.len(), MAX_PER_CALL);
        assert_eq!(heard[0], ("ev_t".into(), LogLevel::Warn, 1));
        assert_eq!(
            heard[1],
            ("ev_t".into(), LogLevel::Error, r#"{"a":1}"#.len())
        );
        assert_eq!(heard[2].1, LogLevel::Debug);
        assert!(heard[2].2 <= MAX_MESSAGE_BYTES && heard[2].2 >= MAX_MESSAGE_BYTES - 1);
    }
}
