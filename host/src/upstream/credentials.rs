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

use std::sync::Arc;

use serde_json::Value;

use crate::http::{End, Redaction};

/// What of the operator's configuration one connection to an upstream is stripped
/// of.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    redaction: Arc<Redaction>,
}

impl Credentials {
    /// `secrets` (the values filled into its `headers` and `env`, and those of its
    /// secrets file), stripped from all it answers.
    pub(crate) fn new(secrets: &[String]) -> Self {
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        Self {
            redaction: Arc::new(Redaction::new(&secrets)),
        }
    }

    /// `text` (whole: a log line, an error's message) without the credentials.
    pub(crate) fn text(&self, mut text: String) -> String {
        self.redaction.strip(&mut text, End::Whole);
        text
    }

    /// `text` without the credentials, where it may have been cut inside one (an
    /// HTTP body read up to a cap): a credential's beginning at its end goes too.
    pub(crate) fn text_maybe_cut(&self, mut text: String) -> String {
        self.redaction.strip(&mut text, End::MayBeCut);
        text
    }

    /// `value` without the credentials anywhere in it: each string and each object
    /// key stripped; a number whose digits hold one is replaced by its digits,
    /// stripped, as a string.
    pub(crate) fn json(&self, value: &mut Value) {
        if self.redaction.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.redaction.strip(text, End::Whole),
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
}
