//! The standalone streams of sessions (MCP's `GET /mcp`): where the server's own
//! messages go (`notifications/tools/list_changed`). One stream per session, a newer
//! `GET` replacing the older; a stream ends when its session is deleted, the server
//! stops, or the client hangs up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::mpsc::Sender;
use tokio::sync::mpsc::error::TrySendError;

use super::{LiveEvents, live_channel};

/// The open streams, by session id.
#[derive(Debug, Default)]
pub(crate) struct Streams(Mutex<HashMap<String, Sender<Bytes>>>);

impl Streams {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Sender<Bytes>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the stream of `session` (ending the one it had); what to send on it.
    pub fn open(&self, session: &str) -> LiveEvents {
        let (sender, receiver) = live_channel();
        self.lock().insert(session.to_owned(), sender);
        receiver
    }

    /// Opens the stream `name` as [`Streams::open`], and what closes it when
    /// dropped: a stream whose holder is gone (its client hung up, or it was refused)
    /// leaves no entry behind, though nothing is ever sent to it again.
    pub fn open_held(self: &Arc<Self>, name: &str) -> (LiveEvents, Opened) {
        let live = self.open(name);
        let opened = Opened {
            streams: Arc::clone(self),
            name: name.to_owned(),
        };
        (live, opened)
    }

    /// How many streams are open.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Sends `message` as an event on every open stream, and forgets the streams
    /// whose client hung up. A stream whose client has not read the
    /// [`super::LIVE_EVENTS`] before misses it (the server's own messages say
    /// something changed: the ones queued say it already).
    pub fn send(&self, message: &serde_json::Value) {
        let event = event(None, message);
        self.lock()
            .retain(|_, stream| match stream.try_send(event.clone()) {
                Ok(()) | Err(TrySendError::Full(_)) => true,
                Err(TrySendError::Closed(_)) => false,
            });
    }

    /// Sends `message` as an event on the stream of `session`, if it has one open
    /// (and room: see [`Streams::send`]).
    pub fn send_to(&self, session: &str, message: &serde_json::Value) {
        let mut streams = self.lock();
        if let Some(stream) = streams.get(session)
            && let Err(TrySendError::Closed(_)) = stream.try_send(event(None, message))
        {
            streams.remove(session);
        }
    }

    /// Ends the stream of `session`, if it has one.
    pub fn close(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Ends every stream (the server stops).
    pub fn close_all(&self) {
        self.lock().clear();
    }
}

/// A stream opened by [`Streams::open_held`]: closes it when dropped.
#[derive(Debug)]
pub(crate) struct Opened {
    streams: Arc<Streams>,
    name: String,
}

impl Opened {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.streams.close(&self.name);
    }
}

/// `message` as one `message` event of `text/event-stream`, under `id` if it has
/// one (a stream that can be resumed).
pub(crate) fn event(id: Option<&str>, message: &serde_json::Value) -> Bytes {
    let id = id.map(|id| format!("id: {id}\n")).unwrap_or_default();
    Bytes::from(format!("{id}event: message\ndata: {message}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_reaches_every_open_stream_and_a_closed_one_is_forgotten() {
        let streams = Streams::default();
        let mut a = streams.open("a");
        let mut b = streams.open("b");
        streams.send(&json!({"n": 1}));
        assert_eq!(a.try_recv().unwrap(), event(None, &json!({"n": 1})));
        assert_eq!(b.try_recv().unwrap(), event(None, &json!({"n": 1})));
        drop(b);
        streams.close("a");
        assert!(a.try_recv().is_err(), "closed: the stream ends");
        streams.send(&json!({"n": 2}));
        assert!(streams.lock().is_empty(), "b hung up and was forgotten");
    }

    #[test]
    fn a_client_that_does_not_read_holds_at_most_the_cap_and_keeps_its_stream() {
        let streams = Streams::default();
        let mut slow = streams.open("slow");
        for n in 0..super::super::LIVE_EVENTS * 4 {
            streams.send(&json!({ "n": n }));
        }
        let mut queued = 0;
        while slow.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, super::super::LIVE_EVENTS);
        streams.send(&json!({"after": 1}));
        assert!(slow.try_recv().is_ok(), "read again, it hears what follows");
    }

    #[test]
    fn a_held_stream_is_forgotten_when_its_holder_is_dropped() {
        let streams = Arc::new(Streams::default());
        let _kept = streams.open("kept");
        for n in 0..20 {
            let (live, opened) = streams.open_held(&format!("listen-{n}"));
            assert_eq!(opened.name(), format!("listen-{n}"));
            if n % 2 == 0 {
                drop(live); // the client hung up first
            }
            drop(opened);
        }
        assert_eq!(streams.len(), 1, "only the stream not held is left");
    }

    #[test]
    fn a_newer_stream_of_a_session_replaces_the_older() {
        let streams = Streams::default();
        let mut old = streams.open("s");
        let mut new = streams.open("s");
        streams.send(&json!({"n": 1}));
        assert!(old.try_recv().is_err());
        assert!(new.try_recv().is_ok());
    }
}
