//! A session's record of the events sent on its streams, so a client whose stream
//! dropped before the answer arrived can fetch the rest with a `GET` carrying
//! `Last-Event-ID` (MCP's "resumability and redelivery", on `GET /mcp`): the answer
//! of a call whose connection broke is the very loss justonce exists to prevent.
//!
//! - Every event of a stream gets an id `TAG-STREAM-SEQ`: the session's random tag
//!   (so an id of another session is refused, never read as one of this session's),
//!   the stream's number, and the event's place on it. A stream opens with a
//!   priming event (an id, `retry:` and no data, sequence 0) that lets a client
//!   resume before anything else was said.
//! - Resuming replays only the events of the stream the id names, after it, then
//!   follows the stream live until its answer; one listener per stream, a newer one
//!   ending the older.
//! - The record is bounded per session ([`ReplayCaps`]): past the bounds, the oldest
//!   events go, those of answered streams first; the newest event always stays. It
//!   lives in the session's entry and ends with it.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::mpsc::Sender;
use tokio::sync::mpsc::error::TrySendError;

use super::streams::event;
use super::{KEPT_FOR_ANSWERS, LiveEvents, is_droppable, live_channel};

/// How long a client waits before reconnecting, sent as `retry:` on the priming
/// event (milliseconds).
pub(crate) const RECONNECT_AFTER_MS: u64 = 1000;

/// The bounds of one session's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayCaps {
    /// Events kept, over all the session's streams.
    pub events: usize,
    /// Bytes of events kept, over all the session's streams.
    pub bytes: usize,
}

impl Default for ReplayCaps {
    fn default() -> Self {
        Self {
            events: 512,
            bytes: 1 << 20,
        }
    }
}

/// Why a `Last-Event-ID` cannot be resumed from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResumeError {
    /// Not an id this server writes.
    #[error("Last-Event-ID {0:?} is not an event id of this server")]
    Malformed(String),
    /// An id of another session.
    #[error("Last-Event-ID {0:?} is not an event of this session")]
    Foreign(String),
    /// This session has no such stream (never, or no longer kept).
    #[error(
        "Last-Event-ID {0:?} names a stream this session does not keep (never opened, or answered and dropped to keep the record bounded)"
    )]
    UnknownStream(String),
    /// Events after the id were dropped to keep the record bounded.
    #[error(
        "the events after Last-Event-ID {0:?} are no longer kept (the record is bounded); repeat the call with the same key: it replays its saved outcome"
    )]
    Gone(String),
}

impl ResumeError {
    /// The HTTP status to answer with: 400 for a malformed id, else 404.
    pub fn status(&self) -> u16 {
        match self {
            ResumeError::Malformed(_) => 400,
            _ => 404,
        }
    }
}

/// One POST stream's events.
struct Stream {
    number: u64,
    /// The sequence number of `events[0]` (the priming event, 0, is not kept).
    first: u64,
    events: VecDeque<Bytes>,
    /// The answer was recorded: nothing more comes.
    answered: bool,
    /// Where its events go live, while a client listens.
    listener: Option<Sender<Bytes>>,
}

impl Stream {
    fn next_seq(&self) -> u64 {
        self.first + self.events.len() as u64
    }
}

#[derive(Default)]
struct Record {
    next_stream: u64,
    streams: VecDeque<Stream>,
    events: usize,
    bytes: usize,
}

impl Record {
    fn stream(&mut self, number: u64) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.number == number)
    }

    /// Drops the oldest events, answered streams' first, until within `caps`; the
    /// newest event stays.
    fn bound(&mut self, caps: ReplayCaps) {
        while (self.events > caps.events || self.bytes > caps.bytes) && self.events > 1 {
            let victim = self
                .streams
                .iter()
                .position(|s| s.answered && !s.events.is_empty())
                .or_else(|| self.streams.iter().position(|s| !s.events.is_empty()));
            let Some(at) = victim else { return };
            let stream = &mut self.streams[at];
            if let Some(event) = stream.events.pop_front() {
                stream.first += 1;
                self.events -= 1;
                self.bytes -= event.len();
            }
            if stream.answered && stream.events.is_empty() {
                self.streams.remove(at);
            }
        }
    }
}

/// One session's events, by stream.
pub(crate) struct EventLog {
    tag: String,
    caps: ReplayCaps,
    record: Mutex<Record>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("caps", &self.caps)
            .finish()
    }
}

impl EventLog {
    /// An empty record whose ids carry `tag` (random per session).
    pub fn new(tag: String, caps: ReplayCaps) -> Self {
        Self {
            tag,
            caps,
            record: Mutex::new(Record::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn id(&self, stream: u64, seq: u64) -> String {
        format!("{}-{stream}-{seq}", self.tag)
    }

    /// Opens a stream with a listener: its number, its priming event, and where its
    /// events come.
    pub fn open(&self) -> (u64, Bytes, LiveEvents) {
        let (sender, receiver) = live_channel();
        let mut record = self.lock();
        let number = record.next_stream;
        record.next_stream += 1;
        record.streams.push_back(Stream {
            number,
            first: 1,
            events: VecDeque::new(),
            answered: false,
            listener: Some(sender),
        });
        let priming = format!(
            "id: {}\nretry: {RECONNECT_AFTER_MS}\ndata:\n\n",
            self.id(number, 0)
        );
        (number, Bytes::from(priming), receiver)
    }

    /// Records `message` on `stream` and sends it to its listener; with `answer`,
    /// the stream ends after it. A listener that does not read is sent no more
    /// progress once its queue is nearly full (room stays for the answer); one
    /// whose queue is full when a question or the answer comes is ended, and comes
    /// back for the rest with `Last-Event-ID` (the record has it).
    pub fn append(&self, stream: u64, message: &serde_json::Value, answer: bool) {
        let mut record = self.lock();
        let Some(open) = record.stream(stream) else {
            return;
        };
        let frame = event(Some(&self.id(stream, open.next_seq())), message);
        if let Some(listener) = &open.listener {
            let droppable = !answer && is_droppable(message);
            if !droppable || listener.capacity() > KEPT_FOR_ANSWERS {
                match listener.try_send(frame.clone()) {
                    Ok(()) => {}
                    Err(TrySendError::Closed(_)) => open.listener = None,
                    Err(TrySendError::Full(_)) if droppable => {}
                    Err(TrySendError::Full(_)) => {
                        tracing::debug!(
                            "a stream's client read none of its last events: the stream is ended, the client fetches the rest with Last-Event-ID"
                        );
                        open.listener = None;
                    }
                }
            }
        }
        if answer {
            open.answered = true;
            open.listener = None;
        }
        let size = frame.len();
        open.events.push_back(frame);
        record.events += 1;
        record.bytes += size;
        record.bound(self.caps);
    }

    /// Ends `stream`'s live listener (its events are still recorded): the client
    /// comes back with `Last-Event-ID`.
    pub fn detach(&self, stream: u64) {
        if let Some(open) = self.lock().stream(stream) {
            open.listener = None;
        }
    }

    /// The events after `last_event_id`, and, while its stream is unanswered, where
    /// its next events come (ending any earlier listener of it).
    pub fn resume(&self, last_event_id: &str) -> Result<(Bytes, Option<LiveEvents>), ResumeError> {
        let malformed = || ResumeError::Malformed(last_event_id.to_owned());
        let mut parts = last_event_id.trim().rsplitn(3, '-');
        let (Some(seq), Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        let (Ok(seq), Ok(number)) = (seq.parse::<u64>(), stream.parse::<u64>()) else {
            return Err(malformed());
        };
        if tag != self.tag {
            return Err(ResumeError::Foreign(last_event_id.to_owned()));
        }
        let mut record = self.lock();
        let Some(stream) = record.stream(number) else {
            return Err(ResumeError::UnknownStream(last_event_id.to_owned()));
        };
        if seq >= stream.next_seq() {
            return Err(ResumeError::UnknownStream(last_event_id.to_owned()));
        }
        if seq + 1 < stream.first {
            return Err(ResumeError::Gone(last_event_id.to_owned()));
        }
        let skip = usize::try_from(seq + 1 - stream.first).unwrap_or(usize::MAX);
        let replay: Vec<u8> = stream
            .events
            .iter()
            .skip(skip)
            .flat_map(|e| e.iter().copied())
            .collect();
        let live = (!stream.answered).then(|| {
            let (sender, receiver) = live_channel();
            stream.listener = Some(sender);
            receiver
        });
        Ok((Bytes::from(replay), live))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn log(caps: ReplayCaps) -> EventLog {
        EventLog::new("t0".into(), caps)
    }

    fn drain(receiver: &mut LiveEvents) -> String {
        let mut out = String::new();
        while let Ok(event) = receiver.try_recv() {
            out.push_str(std::str::from_utf8(&event).unwrap());
        }
        out
    }

    #[test]
    fn a_stream_primes_then_sends_its_events_live_and_ends_with_its_answer() {
        let log = log(ReplayCaps::default());
        let (stream, priming, mut live) = log.open();
        assert_eq!(
            priming,
            Bytes::from(format!(
                "id: t0-{stream}-0\nretry: {RECONNECT_AFTER_MS}\ndata:\n\n"
            ))
        );
        log.append(stream, &json!({"n": 1}), false);
        log.append(stream, &json!({"n": 2}), true);
        assert_eq!(
            drain(&mut live),
            format!(
                "id: t0-{stream}-1\nevent: message\ndata: {{\"n\":1}}\n\nid: t0-{stream}-2\nevent: message\ndata: {{\"n\":2}}\n\n"
            )
        );
        assert!(live.is_closed(), "answered: the stream ends");
    }

    #[test]
    fn resuming_replays_what_followed_the_id_on_that_stream_only_then_follows_it_live() {
        let log = log(ReplayCaps::default());
        let (a, _, live_a) = log.open();
        let (b, _, _live_b) = log.open();
        drop(live_a);
        log.append(a, &json!({"a": 1}), false);
        log.append(b, &json!({"b": 1}), false);
        log.append(a, &json!({"a": 2}), false);
        let (replay, live) = log.resume(&format!("t0-{a}-1")).unwrap();
        let replay = String::from_utf8(replay.to_vec()).unwrap();
        assert!(replay.contains(r#"{"a":2}"#), "{replay}");
        assert!(!replay.contains(r#""a":1"#), "{replay}");
        assert!(!replay.contains(r#""b""#), "not another stream's: {replay}");
        let mut live = live.expect("unanswered: it goes on");
        log.append(a, &json!({"a": 3}), true);
        assert!(drain(&mut live).contains(r#"{"a":3}"#));
        // From the priming event: everything.
        let (all, done) = log.resume(&format!("t0-{a}-0")).unwrap();
        assert_eq!(
            std::str::from_utf8(&all).unwrap().matches("data: ").count(),
            3
        );
        assert!(done.is_none(), "answered: nothing more comes");
    }

    #[test]
    fn a_listener_that_does_not_read_gets_no_more_progress_past_its_cap_and_still_the_answer() {
        let log = log(ReplayCaps::default());
        let (s, _, mut live) = log.open();
        let progress =
            |n: usize| json!({ "method": "notifications/progress", "params": { "progress": n } });
        for n in 0..50_000 {
            log.append(s, &progress(n), false);
        }
        log.append(s, &json!({ "id": 1, "result": {} }), true);
        let events = drain(&mut live);
        let queued = events.matches("data: ").count();
        assert_eq!(
            queued,
            super::super::LIVE_EVENTS - KEPT_FOR_ANSWERS + 1,
            "progress up to the cap, then the answer"
        );
        assert!(
            events.trim_end().ends_with(r#"data: {"id":1,"result":{}}"#),
            "{}",
            &events[events.len() - 200..]
        );
        // The opposite: a question or an answer is never dropped from a full
        // queue; the stream ends, and the record has it.
        let (full, _, mut live) = log.open();
        for n in 0..super::super::LIVE_EVENTS {
            log.append(full, &json!({ "n": n }), false);
        }
        log.append(full, &json!({ "id": 2, "result": {} }), true);
        assert_eq!(
            drain(&mut live).matches("data: ").count(),
            super::super::LIVE_EVENTS
        );
        assert!(
            live.is_closed(),
            "ended: the client comes back for the rest"
        );
        let last = format!("t0-{full}-{}", super::super::LIVE_EVENTS);
        let (rest, _) = log.resume(&last).unwrap();
        assert!(std::str::from_utf8(&rest).unwrap().contains(r#""id":2"#));
    }

    #[test]
    fn a_newer_listener_ends_the_older() {
        let log = log(ReplayCaps::default());
        let (a, _, mut first) = log.open();
        let (_, second) = log.resume(&format!("t0-{a}-0")).unwrap();
        log.append(a, &json!({"n": 1}), false);
        assert!(first.try_recv().is_err());
        assert!(first.is_closed());
        assert!(second.unwrap().try_recv().is_ok());
    }

    #[test]
    fn foreign_malformed_and_unknown_ids_are_refused_by_kind() {
        let log = log(ReplayCaps::default());
        let (a, _, _live) = log.open();
        log.append(a, &json!({"n": 1}), false);
        let err = |id: &str| log.resume(id).unwrap_err();
        assert!(matches!(err("nonsense"), ResumeError::Malformed(_)));
        assert!(matches!(err("t0-x-1"), ResumeError::Malformed(_)));
        assert_eq!(err("nonsense").status(), 400);
        let foreign = err(&format!("ffff-{a}-1"));
        assert!(matches!(foreign, ResumeError::Foreign(_)), "{foreign}");
        assert_eq!(foreign.status(), 404);
        assert!(matches!(err("t0-9-1"), ResumeError::UnknownStream(_)));
        assert!(matches!(
            err(&format!("t0-{a}-5")),
            ResumeError::UnknownStream(_)
        ));
        assert!(log.resume(&format!("t0-{a}-1")).is_ok());
    }

    #[test]
    fn the_record_is_bounded_answered_streams_go_first_and_the_newest_event_stays() {
        let log = log(ReplayCaps {
            events: 3,
            bytes: 1 << 20,
        });
        let (old, _, _l1) = log.open();
        let (live, _, _l2) = log.open();
        log.append(old, &json!({"old": 1}), true);
        log.append(live, &json!({"live": 1}), false);
        log.append(live, &json!({"live": 2}), false);
        log.append(live, &json!({"live": 3}), false);
        // The answered stream went first, whole.
        assert!(matches!(
            log.resume(&format!("t0-{old}-0")),
            Err(ResumeError::UnknownStream(_))
        ));
        log.append(live, &json!({"live": 4}), false);
        assert!(matches!(
            log.resume(&format!("t0-{live}-0")),
            Err(ResumeError::Gone(_))
        ));
        let (kept, _) = log.resume(&format!("t0-{live}-1")).unwrap();
        assert_eq!(
            std::str::from_utf8(&kept)
                .unwrap()
                .matches("data: ")
                .count(),
            3
        );

        let tiny = EventLog::new(
            "t1".into(),
            ReplayCaps {
                events: 10,
                bytes: 1,
            },
        );
        let (s, _, _l) = tiny.open();
        tiny.append(s, &json!({"big": "answer"}), true);
        let (answer, _) = tiny.resume(&format!("t1-{s}-0")).unwrap();
        assert!(
            std::str::from_utf8(&answer).unwrap().contains("answer"),
            "over the bytes cap, the newest event still stays"
        );
    }
}
