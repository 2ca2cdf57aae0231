//! Progress reports of a long call.

use crate::__bindings::justonce::tool::progress::report;

/// Reports that `done` of `total` (if known) is done, and what is happening, to a
/// client that asked to hear (MCP's `notifications/progress`; nothing goes anywhere
/// otherwise). Each report's `done` should be larger than the last; the host drops
/// one that is not.
///
/// Like logging, it is not an effect: it is not journaled, and a replayed call
/// reports nothing.
pub fn progress(done: f64, total: Option<f64>, message: Option<&str>) {
    report(done, total, message);
}
