//! Header values that hold secrets: written in the HTTP config as templates
//! (`"Bearer ${PAYMENTS_TOKEN}"`), filled in from the host's environment or a secrets
//! file when the config is loaded, and never shown: `Debug` and serialization give the
//! template (or `[redacted]`), never the value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What `Debug` and serialization show of a value that was given directly, not as a
/// template; and what replaces a secret a downstream echoed back.
pub(crate) const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not stripped from responses: replacing every
/// occurrence of a two-letter value would garble the response and protect nothing.
const MIN_STRIPPED_SECRET: usize = 4;

/// A header value the host adds to a service's requests; the guest never sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    /// As written in the config, `${NAME}` references included; safe to show.
    template: String,
    /// The value with every reference filled in; `None` until resolved.
    value: Option<String>,
    /// What of `value` is secret: each variable's value, or all of a literal value.
    secrets: Vec<String>,
}

impl SecretValue {
    /// A value given directly (not read from a config file): shown as `[redacted]`.
    pub fn literal(value: impl Into<String>) -> Self {
        let value = value.into();
        // `Bearer TOKEN`: the token is secret on its own too.
        let mut secrets = vec![value.clone()];
        secrets.extend(
            value
                .split_once(' ')
                .map(|(_, rest)| rest.trim().to_owned()),
        );
        Self {
            template: REDACTED.to_owned(),
            value: Some(value),
            secrets,
        }
    }

    /// A template whose `${NAME}` references are filled in by [`SecretValue::resolve`].
    pub fn template(template: impl Into<String>) -> Self {
        Self {
            template: template.into(),
            value: None,
            secrets: Vec::new(),
        }
    }

    /// The value to send, once resolved.
    pub(crate) fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The template as written (what error messages may show).
    pub fn shown(&self) -> &str {
        &self.template
    }

    /// Fills in the template's references from `lookup`; the error names the
    /// variable that is missing, never a value.
    pub fn resolve(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        if self.value.is_none() {
            let filled = std::cell::RefCell::new(Vec::new());
            let value = expand(&self.template, &|name| {
                let value = lookup(name)?;
                filled.borrow_mut().push(value.clone());
                Some(value)
            })?;
            self.secrets = filled.into_inner();
            self.value = Some(value);
        }
        Ok(())
    }

    /// The secret parts of the value (each filled-in variable, or a literal value
    /// whole), to strip from what a downstream answers.
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(String::as_str)
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.template)
    }
}

impl Serialize for SecretValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.template)
    }
}

impl<'de> Deserialize<'de> for SecretValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::template)
    }
}

/// `text` with every occurrence of each of `secrets` replaced by `[redacted]`, and a
/// secret's beginning at the very end cut too (a body truncated inside a secret).
///
/// A downstream may echo a secret the host handed it in another form than the
/// host sent it: JSON-escaped (PHP's `json_encode` writes `/` as `\/`, others write
/// `\u0041` for `A`), percent-encoded (in a URL or a form, `%2F` or `%2f`, `+` for a
/// space), or base64-encoded (standard or URL-safe, padded or not, at any offset in
/// a longer encoded value). Each form is stripped, and mixtures of the first two
/// (`%2B` in a JSON string): what the journal saves, the log writes and the guest is
/// handed must not give the secret back by decoding.
pub(crate) fn strip_secrets(text: &mut String, secrets: &[&str]) {
    Redaction::new(secrets).strip(text, End::MayBeCut);
}

/// The forms of some secrets to strip (see [`strip_secrets`]), worked out once for
/// the many texts of one answer (each string of a JSON value, each line of a log).
/// A secret shorter than [`MIN_STRIPPED_SECRET`] bytes is not stripped.
#[derive(Clone, Default)]
pub(crate) struct Redaction {
    /// Each form of each secret, the longest first.
    needles: Vec<String>,
}

/// Whether a text's end may be a cut (a body truncated at a cap), so that a
/// secret's beginning there is stripped too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The text may have been cut inside a secret: a beginning of one at its very
    /// end (at least [`MIN_STRIPPED_SECRET`] bytes of it) is stripped.
    MayBeCut,
    /// The text is whole (a JSON string, a log line): what ends it is as it was
    /// sent, and a secret's beginning there is a coincidence, kept.
    Whole,
}

impl Redaction {
    /// The forms of `secrets` to strip.
    pub(crate) fn new(secrets: &[&str]) -> Self {
        let mut needles: Vec<String> = secrets
            .iter()
            .filter(|s| s.len() >= MIN_STRIPPED_SECRET)
            .flat_map(|s| forms(s))
            .collect();
        // The longest first where two begin at one place (a whole `Bearer TOKEN`, or
        // a whole padded encoding, before the run inside it).
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        needles.dedup();
        Self { needles }
    }

    /// Whether there is nothing to strip.
    pub(crate) fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Replaces each secret in `text`, in any of its forms, by `[redacted]`.
    pub(crate) fn strip(&self, text: &mut String, end: End) {
        if !self.is_empty() {
            strip_decoding(text, &self.needles, end);
        }
    }
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redaction({} forms)", self.needles.len())
    }
}

/// Base64 runs shorter than this (in characters, 36 bits) are not stripped: a
/// short run of a long encoded value could be one by chance.
const MIN_BASE64_RUN: usize = 6;

/// What `secret` may be echoed as before any escaping: itself, and its base64
/// encodings. An encoding of a secret inside a longer encoded value depends on the
/// secret's offset there modulo 3; for each offset, the characters made only of the
/// secret's bits are the same whatever surrounds it, and those are stripped (the
/// partial characters at either end give away at most a few bits).
fn forms(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let mut forms = vec![secret.to_owned()];
    // Encoded alone: whole, its last character included.
    for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
        forms.push(engine.encode(secret));
    }
    for offset in 0..3 {
        let mut shifted = vec![0; offset];
        shifted.extend_from_slice(secret.as_bytes());
        // Characters wholly within the secret's bits: from the first that starts
        // after the offset's bytes to the last that ends within the secret.
        let (first, end) = ((8 * offset).div_ceil(6), 8 * shifted.len() / 6);
        if end < first + MIN_BASE64_RUN {
            continue;
        }
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            forms.push(engine.encode(&shifted)[first..end].to_owned());
        }
    }
    forms
}

/// Replaces each run of `text` that decodes to one of `needles` (see [`units`];
/// the first that fits where several do) by `[redacted]`, and a run at the very end
/// that decodes to at least [`MIN_STRIPPED_SECRET`] bytes of one's beginning. One
/// pass over the text for all of them: a response may be a mebibyte.
fn strip_decoding(text: &mut String, needles: &[String], end: End) {
    // Which bytes may begin a run: a needle's first, or an escape.
    let mut begins = [false; 256];
    for needle in needles {
        if let Some(&first) = needle.as_bytes().first() {
            begins[usize::from(first)] = true;
        }
    }
    for escape in [b'%', b'\\', b'+'] {
        begins[usize::from(escape)] = true;
    }
    let bytes = text.as_bytes();
    let mut stripped: Option<Vec<u8>> = None;
    let (mut kept, mut i) = (0, 0);
    while i < bytes.len() {
        let end = if begins[usize::from(bytes[i])] {
            // What the text here may stand for, read once for every needle.
            let here = units(bytes, i);
            needles
                .iter()
                .map(String::as_bytes)
                .filter(|needle| {
                    here.iter()
                        .flatten()
                        .any(|(_, decoded)| needle.starts_with(decoded.as_bytes()))
                })
                .find_map(|needle| decodes_to(bytes, i, needle, end))
        } else {
            None
        };
        match end {
            Some(end) => {
                let out = stripped.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
                out.extend_from_slice(&bytes[kept..i]);
                out.extend_from_slice(REDACTED.as_bytes());
                (kept, i) = (end, end);
            }
            None => i += 1,
        }
    }
    if let Some(mut out) = stripped {
        out.extend_from_slice(&bytes[kept..]);
        // A run begins at an ASCII byte or at a needle's first (a character's first
        // byte) and ends after a whole character, so the text stays UTF-8.
        *text = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    }
}

/// Where the run of `text` from `start` that decodes to `needle` ends, if one does
/// (or, where its `end` may be a cut, one that reaches the end of `text` having
/// decoded at least [`MIN_STRIPPED_SECRET`] of its bytes). Read one way while only
/// one way fits; where two do (a `%` of the needle that is also the start of `%25`),
/// [`search`].
fn decodes_to(text: &[u8], start: usize, needle: &[u8], end: End) -> Option<usize> {
    let (mut i, mut j) = (start, 0);
    loop {
        if ends(text, (i, j), needle, end) {
            return Some(i);
        }
        if i == text.len() {
            return None;
        }
        let mut fits = units(text, i)
            .into_iter()
            .flatten()
            .filter(|(_, decoded)| needle[j..].starts_with(decoded.as_bytes()));
        match (fits.next(), fits.next()) {
            (None, _) => return None,
            (Some((taken, decoded)), None) => (i, j) = (i + taken, j + decoded.len()),
            (Some(_), Some(_)) => return search(text, (i, j), needle, end),
        }
    }
}

/// [`decodes_to`] from the state `(i, j)` (at `text[i]`, `needle[j..]` to go), each
/// way tried, and a state tried once not tried again.
fn search(text: &[u8], from: (usize, usize), needle: &[u8], end: End) -> Option<usize> {
    let mut todo = vec![from];
    let mut tried = std::collections::HashSet::new();
    while let Some((i, j)) = todo.pop() {
        if ends(text, (i, j), needle, end) {
            return Some(i);
        }
        if i == text.len() || !tried.insert((i, j)) {
            continue;
        }
        // Pushed in reverse, so the byte as it is is tried first.
        for (taken, decoded) in units(text, i).into_iter().flatten().rev() {
            if needle[j..].starts_with(decoded.as_bytes()) {
                todo.push((i + taken, j + decoded.len()));
            }
        }
    }
    None
}

/// Whether a run that reached `text[i]` having decoded `needle[..j]` is a secret:
/// all of it, or (where the text's `end` may be a cut) enough of its beginning at
/// the very end.
fn ends(text: &[u8], (i, j): (usize, usize), needle: &[u8], end: End) -> bool {
    j == needle.len() || (end == End::MayBeCut && i == text.len() && j >= MIN_STRIPPED_SECRET)
}

/// The ways the text at `i` may be read: how many bytes each takes, and what it
/// stands for. The byte itself; `+` as a space; `%XX` (either case) as its byte;
/// a JSON escape (`\/`, `\"`, `\\\\`, `\n` and the like, `\uXXXX` with surrogate
/// pairs) as its character.
fn units(text: &[u8], i: usize) -> [Option<(usize, Decoded)>; 2] {
    let byte = text[i];
    let hex = |at: usize, n: usize| {
        text.get(at..at + n)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let escaped = match byte {
        b'+' => Some((1, Decoded::byte(b' '))),
        b'%' => hex(i + 1, 2).map(|b| (3, Decoded::byte(b as u8))),
        b'\\' => match text.get(i + 1) {
            Some(b'u') => hex(i + 2, 4).and_then(|unit| {
                let low = (text.get(i + 6..i + 8) == Some(b"\\u"))
                    .then(|| hex(i + 8, 4))
                    .flatten()
                    .filter(|low| (0xDC00..0xE000).contains(low));
                match (unit, low) {
                    (0xD800..0xDC00, Some(low)) => {
                        let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(c).map(|c| (12, Decoded::char(c)))
                    }
                    _ => char::from_u32(unit).map(|c| (6, Decoded::char(c))),
                }
            }),
            Some(&escape) => match escape {
                b'/' | b'\\' | b'"' | b'\'' => Some(escape),
                b'b' => Some(0x08),
                b'f' => Some(0x0C),
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b't' => Some(b'\t'),
                _ => None,
            }
            .map(|b| (2, Decoded::byte(b))),
            None => None,
        },
        _ => None,
    };
    [Some((1, Decoded::byte(byte))), escaped]
}

/// The bytes one unit of text stands for: one byte, or a character's UTF-8.
#[derive(Clone, Copy)]
struct Decoded {
    bytes: [u8; 4],
    len: usize,
}

impl Decoded {
    fn byte(b: u8) -> Self {
        Self {
            bytes: [b, 0, 0, 0],
            len: 1,
        }
    }

    fn char(c: char) -> Self {
        let mut bytes = [0; 4];
        let len = c.encode_utf8(&mut bytes).len();
        Self { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// Replaces every `${NAME}` in `template` with `lookup(NAME)`. `$` not followed by
/// `{` is kept as it is.
pub(crate) fn expand(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`${{` without a closing `}}` in `{template}`"))?;
        let name = &after[..end];
        if !is_variable_name(name) {
            return Err(format!(
                "`${{{name}}}` is not a variable reference (use letters, digits and `_`)"
            ));
        }
        let value = lookup(name).ok_or_else(|| format!("the variable `{name}` is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads a secrets file of `NAME=value` lines (blank lines and `#` comments skipped;
/// a value in matching single or double quotes loses them). The error names the file
/// and the line number, never a value.
pub(crate) fn read_secrets_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secrets file {}: {e}", path.display()))?;
    let mut secrets = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let parsed = line
            .split_once('=')
            .map(|(name, value)| (name.trim(), unquote(value.trim())))
            .filter(|(name, _)| is_variable_name(name));
        let Some((name, value)) = parsed else {
            return Err(format!(
                "the secrets file {} line {}: expected NAME=value",
                path.display(),
                n + 1
            ));
        };
        secrets.insert(name.to_owned(), value.to_owned());
    }
    Ok(secrets)
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t".to_owned())
    }

    #[test]
    fn references_are_filled_in_and_a_missing_one_is_named() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand("$5 and ${TOKEN}!", &env).unwrap(), "$5 and s3cr3t!");
        assert_eq!(expand("plain", &env).unwrap(), "plain");
        let err = expand("Bearer ${OTHER}", &env).unwrap_err();
        assert!(err.contains("`OTHER` is not set"), "{err}");
        assert!(expand("${TOKEN", &env).unwrap_err().contains("closing"));
        assert!(
            expand("${1X}", &env)
                .unwrap_err()
                .contains("not a variable")
        );
    }

    #[test]
    fn debug_and_serialization_never_show_the_value() {
        let mut secret = SecretValue::template("Bearer ${TOKEN}");
        secret.resolve(&env).unwrap();
        assert_eq!(secret.value(), Some("Bearer s3cr3t"));
        let shown = format!("{secret:?} {}", serde_json::to_string(&secret).unwrap());
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("${TOKEN}"), "{shown}");
        let literal = SecretValue::literal("s3cr3t");
        let shown = format!("{literal:?} {}", serde_json::to_string(&literal).unwrap());
        assert!(
            !shown.contains("s3cr3t") && shown.contains(REDACTED),
            "{shown}"
        );
    }

    #[test]
    fn secrets_are_stripped_whole_and_at_a_cut_end() {
        let mut secret = SecretValue::template("Bearer ${TOKEN}");
        secret.resolve(&env).unwrap();
        let secrets: Vec<&str> = secret.secrets().collect();
        assert_eq!(secrets, ["s3cr3t"]);
        let mut text = "{\"auth\":\"Bearer s3cr3t\",\"again\":\"s3cr3t\"}".to_owned();
        strip_secrets(&mut text, &secrets);
        assert_eq!(
            text,
            "{\"auth\":\"Bearer [redacted]\",\"again\":\"[redacted]\"}"
        );
        let mut cut = "token=s3cr".to_owned();
        strip_secrets(&mut cut, &secrets);
        assert_eq!(cut, "token=[redacted]");
        let mut short = "ab ab".to_owned();
        strip_secrets(&mut short, &["ab"]);
        assert_eq!(short, "ab ab", "too short to be worth stripping");
        let literal = SecretValue::literal("Bearer abcdefgh");
        assert_eq!(
            literal.secrets().collect::<Vec<_>>(),
            ["Bearer abcdefgh", "abcdefgh"]
        );
    }

    #[test]
    fn a_whole_text_keeps_a_secrets_beginning_at_its_end_and_a_cut_one_does_not() {
        let redaction = Redaction::new(&["s3cr3t", "ab"]);
        let strip = |text: &str, end| {
            let mut text = text.to_owned();
            redaction.strip(&mut text, end);
            text
        };
        assert_eq!(strip("token=s3cr", End::Whole), "token=s3cr");
        assert_eq!(strip("token=s3cr", End::MayBeCut), "token=[redacted]");
        assert_eq!(strip("s3cr3t, ab", End::Whole), "[redacted], ab");
        assert!(Redaction::new(&["ab", ""]).is_empty(), "too short to strip");
    }

    #[test]
    fn secrets_are_stripped_in_the_encodings_a_downstream_echoes_them_in() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let secret = "sk/live+9f3c 1a7e\"5b2d";
        let stripped = |echoed: &str| {
            let mut text = format!("{{\"echo\":\"{echoed}\",\"n\":1}}");
            strip_secrets(&mut text, &[secret]);
            text
        };
        let whole = format!("{{\"echo\":\"{REDACTED}\",\"n\":1}}");
        let every_char_u = secret
            .chars()
            .map(|c| format!("\\u{:04X}", c as u32))
            .collect::<String>();
        let percent = |upper: bool, plus: bool| {
            secret
                .bytes()
                .map(|b| match b {
                    b' ' if plus => "+".to_owned(),
                    b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                    b if upper => format!("%{b:02X}"),
                    b => format!("%{b:02x}"),
                })
                .collect::<String>()
        };
        let mut echoes = vec![
            // PHP's json_encode: `/` as `\/`, the quote escaped.
            r#"sk\/live+9f3c 1a7e\"5b2d"#.to_owned(),
            every_char_u.to_lowercase(),
            every_char_u,
            percent(true, false),
            percent(false, false),
            percent(true, true),
            // Both at once: a URL-encoded value in a JSON string.
            r#"sk%2Flive\u002B9f3c+1a7e\"5b2d"#.to_owned(),
        ];
        for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
            let encoded = engine.encode(secret);
            // As it is, JSON-escaped by PHP, and percent-encoded in a query.
            echoes.push(encoded.replace('/', r"\/"));
            echoes.push(
                encoded
                    .replace('+', "%2B")
                    .replace('/', "%2F")
                    .replace('=', "%3D"),
            );
            echoes.push(encoded);
        }
        for echoed in &echoes {
            assert_eq!(stripped(echoed), whole, "{echoed}");
        }

        // Inside a longer encoded value, at each offset: only the few characters
        // made of the value's other bytes (and a few bits of the secret) are left.
        for (before, after) in [("x", "yz"), ("xy", ""), ("", "xyz"), ("wxyz", "q")] {
            for engine in [STANDARD, URL_SAFE_NO_PAD] {
                let blob = engine.encode(format!("{before}{secret}{after}"));
                let text = stripped(&blob);
                assert!(text.contains(REDACTED), "{blob}: {text}");
                let left = text.len() - whole.len();
                assert!(left <= 10, "{blob}: {left} characters left in {text}");
            }
        }

        // A `%` of the secret percent-encoded: `%25` reads both as itself and as `%`.
        for echoed in ["ab%25cdef", "ab%2525cdef", r"ab\u002525cdef"] {
            let mut text = format!("k={echoed}&n=1");
            strip_secrets(&mut text, &["ab%25cdef"]);
            assert_eq!(text, format!("k={REDACTED}&n=1"), "{echoed}");
        }
        // A body cut inside an escaped secret.
        let mut cut = r#"{"echo":"sk\/liv"#.to_owned();
        strip_secrets(&mut cut, &[secret]);
        assert_eq!(cut, format!("{{\"echo\":\"{REDACTED}"));
        // What merely looks like it stays, escapes included.
        for kept in [
            r#"{"url":"https:\/\/x.example\/sk\/live"}"#,
            "?q=sk%2Flive%2B9f3c&n=1",
            r#"{"b64":"c2svbGl2ZSs5ZjNj"}"#,
        ] {
            let mut text = kept.to_owned();
            strip_secrets(&mut text, &[secret]);
            assert_eq!(text, kept);
        }
    }

    #[test]
    fn a_secrets_file_is_read_and_a_bad_line_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.env");
        std::fs::write(
            &path,
            "# tokens\nTOKEN=abc\nexport QUOTED=\"x y\"\n\nOTHER='z'\n",
        )
        .unwrap();
        let secrets = read_secrets_file(&path).unwrap();
        assert_eq!(secrets["TOKEN"], "abc");
        assert_eq!(secrets["QUOTED"], "x y");
        assert_eq!(secrets["OTHER"], "z");
        std::fs::write(&path, "TOKEN=abc\nhunter2\n").unwrap();
        let err = read_secrets_file(&path).unwrap_err();
        assert!(err.contains("line 2") && !err.contains("hunter2"), "{err}");
    }
}
