//! Diagnostics for the host's log.
//!
//! Logging is not an effect: it is not journaled, and a replayed call logs nothing.

use crate::__bindings::justonce::tool::log::{Level, write};

/// Writes a very detailed tracing line.
pub fn trace(msg: &str) {
    write(Level::Trace, msg);
}

/// Writes a line useful when debugging the tool.
pub fn debug(msg: &str) {
    write(Level::Debug, msg);
}

/// Writes a line about normal progress.
pub fn info(msg: &str) {
    write(Level::Info, msg);
}

/// Writes a line about something unexpected that the tool recovered from.
pub fn warn(msg: &str) {
    write(Level::Warn, msg);
}

/// Writes a line about a failure.
pub fn error(msg: &str) {
    write(Level::Error, msg);
}
