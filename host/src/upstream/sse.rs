//! The events of a Server-Sent Events stream an upstream sends (the answer stream of
//! a `POST`, the `GET` stream of its session), read line by line with one bound: no
//! line and no event's `data` is held past [`MAX_EVENT_BYTES`]. An event over it is
//! read to its end and dropped whole, and said so as an error that names the
//! upstream, the stream and the bound.

use std::io::BufRead;

use super::client::{Line, MAX_LINE_BYTES, read_line};

/// The most bytes of one event's `data` (its lines joined) kept: as much as one
/// line of a stdio upstream's output.
pub(crate) const MAX_EVENT_BYTES: usize = MAX_LINE_BYTES;

/// Room on a line for the field's name (`data: `) beside the data it carries.
const FIELD_NAME_BYTES: usize = 16;

/// An event of an upstream's stream over the cap: what it carried is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "upstream `{upstream}` sent an event of {length} bytes on its {stream}, over the cap of {max} bytes: it was dropped, and what it carried is lost"
)]
pub(crate) struct Oversized {
    /// The upstream.
    pub upstream: String,
    /// Which stream: its `response stream`, its `GET stream`.
    pub stream: &'static str,
    /// The event's length, at least (the bytes read of it).
    pub length: usize,
    /// The cap.
    pub max: usize,
}

/// The events of one stream, in order.
pub(super) struct Events {
    upstream: String,
    stream: &'static str,
    max: usize,
    /// The `data` of the event being read, its lines joined with `\n`.
    data: String,
    /// The length of the event being read, once it went past the cap.
    over: Option<usize>,
}

impl Events {
    /// The events of `upstream`'s `stream` (named in an error), each at most `max`
    /// bytes of data.
    pub(super) fn new(upstream: &str, stream: &'static str, max: usize) -> Self {
        Self {
            upstream: upstream.to_owned(),
            stream,
            max,
            data: String::new(),
            over: None,
        }
    }

    /// The next event's data read from `reader`, or why it was dropped; `None` once
    /// the stream ended (an event it did not end with a blank line is not one).
    pub(super) fn next(&mut self, reader: &mut impl BufRead) -> Option<Result<String, Oversized>> {
        loop {
            // A `data:` field's name and its space are not data.
            match read_line(reader, self.max.saturating_add(FIELD_NAME_BYTES)) {
                Line::End => return None,
                Line::Overlong { head, length } => {
                    // Only a `data` line counts towards an event; another field (a
                    // comment, an id) that long is skipped.
                    if head.starts_with("data:") {
                        self.grow_past_cap(length);
                    }
                }
                Line::Read(line) => {
                    if let Some(rest) = line.strip_prefix("data:") {
                        let rest = rest.strip_prefix(' ').unwrap_or(rest);
                        let joined = self.data.len() + usize::from(!self.data.is_empty());
                        if self.over.is_some() || joined + rest.len() > self.max {
                            self.grow_past_cap(joined + rest.len());
                        } else {
                            if !self.data.is_empty() {
                                self.data.push('\n');
                            }
                            self.data.push_str(rest);
                        }
                        continue;
                    }
                    if !line.is_empty() {
                        continue; // another field, or a comment
                    }
                    if let Some(length) = self.over.take() {
                        return Some(Err(Oversized {
                            upstream: self.upstream.clone(),
                            stream: self.stream,
                            length,
                            max: self.max,
                        }));
                    }
                    if !self.data.is_empty() {
                        return Some(Ok(std::mem::take(&mut self.data)));
                    }
                }
            }
        }
    }

    /// The event being read is `length` bytes more past the cap: its data goes.
    fn grow_past_cap(&mut self, length: usize) {
        let before = self.over.unwrap_or(self.data.len());
        self.over = Some(before.saturating_add(length));
        self.data = String::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str, max: usize) -> Vec<Result<String, Oversized>> {
        let mut reader = std::io::BufReader::with_capacity(8, text.as_bytes());
        let mut events = Events::new("u", "response stream", max);
        std::iter::from_fn(|| events.next(&mut reader)).collect()
    }

    #[test]
    fn data_lines_make_one_event_until_a_blank_line() {
        let text = "event: message\ndata: {\"a\":\n: a comment\ndata:  1}\n\ndata: two\n\nid: 3\n\ndata: cut";
        assert_eq!(
            events(text, 64),
            [Ok("{\"a\":\n 1}".to_owned()), Ok("two".to_owned())]
        );
    }

    #[test]
    fn an_event_over_the_cap_is_dropped_whole_and_named_and_the_next_one_read() {
        let long_line = format!("data: {}\n\ndata: next\n\n", "x".repeat(100));
        let dropped = events(&long_line, 16);
        assert_eq!(dropped.len(), 2, "{dropped:?}");
        let Err(error) = &dropped[0] else {
            panic!("{dropped:?}")
        };
        assert_eq!(error.max, 16);
        assert!(error.length >= 100, "{error:?}");
        let said = error.to_string();
        assert!(
            said.contains("upstream `u`")
                && said.contains("response stream")
                && said.contains("over the cap of 16 bytes"),
            "{said}"
        );
        assert_eq!(dropped[1], Ok("next".to_owned()));
        // Many short lines over the cap together: the same.
        let many = format!("{}\ndata: after\n\n", "data: 0123456789\n".repeat(5));
        let dropped = events(&many, 32);
        assert!(
            matches!(&dropped[0], Err(e) if e.length > 32),
            "{dropped:?}"
        );
        assert_eq!(dropped[1], Ok("after".to_owned()));
        // The opposite: an event right at the cap is kept.
        let at_cap = format!("data: {}\n\n", "y".repeat(16));
        assert_eq!(events(&at_cap, 16), [Ok("y".repeat(16))]);
    }
}
