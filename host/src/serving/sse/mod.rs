//! Server-sent events (`text/event-stream`) as the endpoints above send them: each
//! event a `message` carrying one JSON value.
//!
//! - [`streams`]: the open standalone streams, one per key (a session), where a
//!   server's own messages go.
//! - [`resume`]: a session's record of the events of its streams, so a client whose
//!   stream dropped fetches the rest with `Last-Event-ID`.

pub(crate) mod resume;
pub(crate) mod streams;

pub(crate) use resume::EventLog;
pub use resume::ReplayCaps;
pub(crate) use streams::Streams;

use bytes::Bytes;
use tokio::sync::mpsc::{Receiver, Sender, channel};

/// The most events waiting for one stream's client to read them. A client that
/// does not read loses progress and log events first (they stay in the session's
/// record, [`EventLog`]): past [`LIVE_EVENTS`] less [`KEPT_FOR_ANSWERS`] queued,
/// they are not queued; a question or an answer that finds the queue full ends the
/// live stream instead (the client comes back for it with `Last-Event-ID`).
pub(crate) const LIVE_EVENTS: usize = 256;

/// Room in a stream's queue kept for what is not progress (questions, the answer).
pub(crate) const KEPT_FOR_ANSWERS: usize = 16;

/// Where a stream's events wait for its client, at most [`LIVE_EVENTS`].
pub(crate) type LiveEvents = Receiver<Bytes>;

/// A new stream's queue.
pub(crate) fn live_channel() -> (Sender<Bytes>, LiveEvents) {
    channel(LIVE_EVENTS)
}

/// Whether `message` is a note that may be dropped before an answer is:
/// `notifications/progress` or `notifications/message`.
pub(crate) fn is_droppable(message: &serde_json::Value) -> bool {
    matches!(
        message.get("method").and_then(serde_json::Value::as_str),
        Some("notifications/progress" | "notifications/message")
    )
}
