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
