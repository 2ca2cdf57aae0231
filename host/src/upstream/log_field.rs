//! Text an upstream supplied (a tool name, a line of its stderr, a message it sent),
//! as it is written into a host log line: control characters escaped, so a newline
//! in a tool name cannot start a line of its own that reads like the host's, and
//! capped, so a 17 MiB line is not logged whole. The text is stripped of
//! credentials before it gets here; what is cut off is said with its length.

use std::fmt;

/// The most bytes of an upstream's text a log line holds by default.
pub(crate) const MAX_FIELD_BYTES: usize = 4096;

/// `text` as a log field: escaped, and at most `cap` bytes of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field<'a> {
    text: &'a str,
    cap: usize,
}

/// `text` as a log field, at most [`MAX_FIELD_BYTES`] of it.
pub(crate) fn field(text: &str) -> Field<'_> {
    capped(text, MAX_FIELD_BYTES)
}

/// `text` as a log field, at most `cap` bytes of it.
pub(crate) fn capped(text: &str, cap: usize) -> Field<'_> {
    Field { text, cap }
}

/// Whether `c` is written escaped: what can break or rewrite a line (controls, the
/// Unicode line and paragraph separators, bidirectional overrides) and `\`.
fn escaped(c: char) -> bool {
    c.is_control()
        || c == '\\'
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = 0usize;
        for (at, c) in self.text.char_indices() {
            let width = if escaped(c) {
                c.escape_default().count()
            } else {
                c.len_utf8()
            };
            if written + width > self.cap {
                return write!(f, "…[cut: {} of {} bytes logged]", at, self.text.len());
            }
            written += width;
            if escaped(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newline_and_other_controls_are_escaped_and_the_rest_is_untouched() {
        let forged = "pay\n2026-01-01T00:00:00Z  INFO justonce: call ok\r\u{1b}[2K\\é 日本";
        assert_eq!(
            field(forged).to_string(),
            "pay\\n2026-01-01T00:00:00Z  INFO justonce: call ok\\r\\u{1b}[2K\\\\é 日本"
        );
        assert_eq!(field("\u{2028}\u{202e}").to_string(), "\\u{2028}\\u{202e}");
        assert_eq!(field("plain_tool-1.2").to_string(), "plain_tool-1.2");
    }

    #[test]
    fn a_long_text_is_cut_at_the_cap_saying_how_long_it_was() {
        let long = "x".repeat(17 << 20);
        let logged = field(&long).to_string();
        assert!(logged.len() < MAX_FIELD_BYTES + 64, "{}", logged.len());
        assert!(
            logged.ends_with(&format!(
                "…[cut: {MAX_FIELD_BYTES} of {} bytes logged]",
                17 << 20
            )),
            "{}",
            &logged[logged.len() - 60..]
        );
        // An escape is never cut in two, nor a character.
        assert_eq!(
            capped("ab\n", 3).to_string(),
            "ab…[cut: 2 of 3 bytes logged]"
        );
        assert_eq!(capped("aé", 2).to_string(), "a…[cut: 1 of 3 bytes logged]");
        // The opposite: a text within the cap is whole.
        assert_eq!(capped("abc", 3).to_string(), "abc");
    }
}
