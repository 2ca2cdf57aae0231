//! The operator's credentials an upstream was handed, stripped from everything it
//! sends back: a result, an `isError` result, a JSON-RPC error, a progress report, a
//! log message, a line of its stderr. The upstream is a downstream the host does
//! not trust (docs/threat-model.md): whatever it echoes of its `headers`, its `env`
//! or its secrets file must reach no agent, no journal and no log.
//!
//! What is a credential follows the `http` provider's config: each value a `${NAME}`
//! is filled in with, every value of the secrets file, and each header value whole;
//! text written out in `env` (`DEBUG = "true"`) is a setting, not a credential.
//! The stripping is the `http` provider's ([`crate::http::Redaction`]): each value
//! verbatim, JSON-escaped, percent-encoded and base64-encoded, replaced by
//! `[redacted]`; a value shorter than 4 bytes (`1`, `on`, `yes`) is not stripped,
//! or every answer would be shredded. It is applied where the upstream's messages
//! come in (the stdio reader, the HTTP client), before anything reads them.
//!
//! An OAuth access token (`oauth.rs`) is learned while the connection runs: each
//! one the host fetches or reads is added ([`Credentials::learn`]), the last
//! [`MAX_LEARNED`] of them stripped from then on by every clone; one learned again
//! (a refresh token kept across refreshes) counts as the newest.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::http::{End, Redaction};

/// What of the operator's configuration one connection to an upstream is stripped
/// of.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    redaction: Arc<Redaction>,
    /// What was learned while it runs (its access tokens), shared by every clone.
    learned: Arc<RwLock<Learned>>,
}

/// The most learned credentials kept stripped: the newest tokens (an old one a
/// server echoes long after it was replaced is the server's to forget).
pub(crate) const MAX_LEARNED: usize = 16;

/// The credentials learned while a connection runs.
#[derive(Debug, Default)]
struct Learned {
    values: Vec<String>,
    redaction: Arc<Redaction>,
}

impl Credentials {
    /// `secrets` (the values filled into its `headers` and `env`, and those of its
    /// secrets file), stripped from all it answers.
    pub(crate) fn new(secrets: &[String]) -> Self {
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        Self {
            redaction: Arc::new(Redaction::new(&secrets)),
            learned: Arc::default(),
        }
    }

    /// Strips `secret` too, from now on, here and in every clone (an access token
    /// fetched while the connection runs). Learned again, it becomes the newest:
    /// a credential still in use (a refresh token not rotated) is learned on each
    /// use, and so never let go as the oldest.
    pub(crate) fn learn(&self, secret: &str) {
        let mut learned = self.learned.write().unwrap_or_else(|p| p.into_inner());
        if learned.values.last().is_some_and(|v| v == secret) {
            return;
        }
        learned.values.retain(|v| v != secret);
        learned.values.push(secret.to_owned());
        if learned.values.len() > MAX_LEARNED {
            learned.values.remove(0);
        }
        let values: Vec<&str> = learned.values.iter().map(String::as_str).collect();
        learned.redaction = Arc::new(Redaction::new(&values));
    }

    /// The learned credentials' stripping, now.
    fn learned(&self) -> Arc<Redaction> {
        let learned = self.learned.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&learned.redaction)
    }

    /// Both strippings of `text`.
    fn strip(&self, text: &mut String, end: End) {
        self.redaction.strip(text, end);
        self.learned().strip(text, end);
    }

    /// Whether there is nothing to strip.
    fn is_empty(&self) -> bool {
        self.redaction.is_empty() && self.learned().is_empty()
    }

    /// `text` (whole: a log line, an error's message) without the credentials.
    pub(crate) fn text(&self, mut text: String) -> String {
        self.strip(&mut text, End::Whole);
        text
    }

    /// `text` without the credentials, where it may have been cut inside one (an
    /// HTTP body read up to a cap): a credential's beginning at its end goes too.
    pub(crate) fn text_maybe_cut(&self, mut text: String) -> String {
        self.strip(&mut text, End::MayBeCut);
        text
    }

    /// `value` without the credentials anywhere in it: each string and each object
    /// key stripped; a number whose digits hold one is replaced by its digits,
    /// stripped, as a string.
    pub(crate) fn json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.strip(text, End::Whole),
            Value::Number(number) => {
                let digits = number.to_string();
                let stripped = self.text(digits.clone());
                if stripped != digits {
                    *value = Value::String(stripped);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.json(item)),
            Value::Object(map) => {
                map.values_mut().for_each(|item| self.json(item));
                // Rebuilt only where a key holds a credential (rare): an answer may
                // be large.
                let renamed: Vec<(String, String)> = map
                    .keys()
                    .filter_map(|key| {
                        let stripped = self.text(key.clone());
                        (stripped != *key).then(|| (key.clone(), stripped))
                    })
                    .collect();
                for (key, stripped) in renamed {
                    if let Some(item) = map.remove(&key) {
                        map.insert(stripped, item);
                    }
                }
            }
            Value::Null | Value::Bool(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOKEN: &str = "tok_9f3c1a7e5b2d";

    fn stripped(secrets: &[&str], mut value: Value) -> Value {
        let secrets: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
        Credentials::new(&secrets).json(&mut value);
        value
    }

    #[test]
    fn a_credential_is_stripped_anywhere_in_an_answer_in_its_encodings() {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(TOKEN);
        let answer = json!({
            "content": [
                { "type": "text", "text": format!("your token is {TOKEN}") },
                { "type": "text", "text": format!("Basic {encoded}") },
            ],
            "structuredContent": {
                "env": { "API_TOKEN": TOKEN },
                "nested": [[{ "escaped": "tok_9f3c%31a7e5b2d" }]],
                TOKEN: "as a key",
            },
            "isError": true,
        });
        let out = stripped(&[TOKEN], answer).to_string();
        assert!(!out.contains("9f3c1a7e"), "{out}");
        assert!(!out.contains(&encoded[..12]), "{out}");
        assert_eq!(out.matches("[redacted]").count(), 5, "{out}");
        assert!(out.contains("your token is [redacted]"), "{out}");
        assert!(out.contains("\"isError\":true"), "{out}");
    }

    #[test]
    fn a_number_holding_a_credential_is_stripped_and_other_numbers_are_kept() {
        let out = stripped(&["80442211"], json!({ "pin": 80442211, "n": 7, "x": 1.5 }));
        assert_eq!(out, json!({ "pin": "[redacted]", "n": 7, "x": 1.5 }));
    }

    #[test]
    fn a_value_under_four_bytes_is_not_stripped_and_what_is_not_a_credential_passes() {
        let answer = json!({
            "content": [{ "type": "text", "text": "1 on yes, all kept; a beginning at the end too: tok_9f3c" }],
            "structuredContent": { "n": 1 },
        });
        assert_eq!(
            stripped(&["1", "on", "yes", "", TOKEN], answer.clone()),
            answer
        );
        assert_eq!(stripped(&[], answer.clone()), answer);
        assert_eq!(
            Credentials::default().text("tok_9f3c1a7e5b2d".into()),
            TOKEN,
            "no credentials, nothing stripped"
        );
    }

    #[test]
    fn a_credential_learned_later_is_stripped_by_every_clone() {
        let credentials = Credentials::new(&["static_secret_1".to_owned()]);
        let clone = credentials.clone();
        assert_eq!(clone.text(format!("t={TOKEN}")), format!("t={TOKEN}"));
        credentials.learn(TOKEN);
        assert_eq!(clone.text(format!("t={TOKEN}")), "t=[redacted]");
        let mut value = serde_json::json!({ "a": format!("x {TOKEN}"), "b": "static_secret_1" });
        clone.json(&mut value);
        assert_eq!(
            value,
            serde_json::json!({ "a": "x [redacted]", "b": "[redacted]" })
        );
        for n in 0..MAX_LEARNED {
            credentials.learn(&format!("tok_later_{n:04}"));
        }
        assert_eq!(
            clone.text(format!("t={TOKEN}")),
            format!("t={TOKEN}"),
            "the oldest of more than MAX_LEARNED is let go"
        );
        assert_eq!(clone.text("tok_later_0015".into()), "[redacted]");
    }

    #[test]
    fn a_credential_learned_again_is_the_newest_and_is_not_let_go() {
        let credentials = Credentials::default();
        credentials.learn("rt_kept_55555555");
        for n in 0..MAX_LEARNED * 2 {
            credentials.learn(&format!("tok_later_{n:04}"));
            assert_eq!(
                credentials.text("t=rt_kept_55555555".into()),
                "t=[redacted]",
                "learned again on each use, it is never the oldest ({n})"
            );
            credentials.learn("rt_kept_55555555");
        }
        let newest = format!("tok_later_{:04}", MAX_LEARNED * 2 - 1);
        let let_go = format!("tok_later_{:04}", MAX_LEARNED * 2 - MAX_LEARNED);
        assert_eq!(credentials.text(newest), "[redacted]");
        assert_eq!(
            credentials.text(let_go.clone()),
            let_go,
            "still MAX_LEARNED kept"
        );
    }
}
