//! Key derivation: the two layers of keys described in DESIGN.md ("Two layers of
//! keys").
//!
//! Every key is a hash of the RFC 8785 canonical form ([`crate::jcs`]) of a JSON
//! *array* of its parts, never of a joined string, so no choice of parts can
//! collide with another split of the same characters. Each array starts with a
//! versioned domain tag (`"justonce.invocation.v1"`, …) so keys of different kinds
//! or versions never coincide.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::jcs::{JcsError, canonicalize};

const INVOCATION_TAG: &str = "justonce.invocation.v1";
const EFFECT_TAG: &str = "justonce.effect.v2";
const ARGUMENTS_TAG: &str = "justonce.arguments.v1";
const SCOPED_KEY_TAG: &str = "justonce.scoped-key.v1";
const LOCAL_KEY_ARGUMENTS_TAG: &str = "justonce.arguments.local-key.v1";

/// Length in hex characters of derived invocation and effect keys (128 bits).
pub const KEY_HEX_LEN: usize = 32;

/// Longest explicit invocation key a caller may choose, in bytes.
pub const MAX_EXPLICIT_KEY_LEN: usize = 255;

/// Identifies one tool call's intent: derived by [`invocation_key`] or chosen by the
/// caller and checked by [`InvocationKey::parse`].
///
/// Serializes as a plain string; deserializing applies the same validation as
/// [`InvocationKey::parse`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct InvocationKey(String);

/// Identifies one host-import call (effect) inside an invocation; derived by
/// [`effect_key`] and passed to the provider as its idempotency key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EffectKey(String);

/// A full lowercase-hex SHA-256 of canonical JSON, used to detect that the same key
/// now stands for different content (different arguments, or a diverged effect).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

/// Why a caller-chosen invocation key was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is the empty string.
    #[error("invocation key is empty")]
    Empty,
    /// The key is longer than [`MAX_EXPLICIT_KEY_LEN`] bytes.
    #[error("invocation key is {len} bytes long; the maximum is {MAX_EXPLICIT_KEY_LEN}")]
    TooLong {
        /// The length of the rejected key in bytes.
        len: usize,
    },
    /// The key contains a character that is not printable ASCII (U+0021 to U+007E):
    /// whitespace, a control character or a non-ASCII character.
    #[error(
        "invocation key contains {ch:?} at byte {index}; only printable ASCII without whitespace is allowed"
    )]
    InvalidChar {
        /// The first offending character.
        ch: char,
        /// Its byte offset in the key.
        index: usize,
    },
}

impl InvocationKey {
    /// Accepts a caller-chosen explicit key: 1 to 255 characters, each printable
    /// ASCII other than space (`'!'` through `'~'`). No other normalization is done;
    /// the key is used exactly as given (case matters).
    pub fn parse(key: &str) -> Result<InvocationKey, KeyError> {
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if let Some((index, ch)) = key.char_indices().find(|&(_, c)| !c.is_ascii_graphic()) {
            return Err(KeyError::InvalidChar { ch, index });
        }
        if key.len() > MAX_EXPLICIT_KEY_LEN {
            return Err(KeyError::TooLong { len: key.len() });
        }
        Ok(InvocationKey(key.to_owned()))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for InvocationKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        InvocationKey::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl EffectKey {
    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Fingerprint {
    /// The fingerprint as a 64-character lowercase hex string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InvocationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for EffectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lowercase hex SHA-256 (64 characters) of the canonical form of `parts`.
fn hash_parts(parts: Vec<Value>) -> Result<String, JcsError> {
    let canonical = canonicalize(&Value::Array(parts))?;
    Ok(format!("{:x}", Sha256::digest(canonical.as_bytes())))
}

/// The digest [`hash_parts`] gives for the string parts `strings` followed by one
/// value given in canonical form (`canonical`, the output of
/// [`canonicalize`](crate::jcs::canonicalize)), without serializing that value
/// again: the canonical form of an array is its members' canonical forms joined by
/// commas inside brackets.
fn hash_strings_and_canonical(strings: &[&str], canonical: &str) -> String {
    let mut text = String::with_capacity(canonical.len() + 64);
    text.push('[');
    for part in strings {
        crate::jcs::write_string(&mut text, part);
        text.push(',');
    }
    text.push_str(canonical);
    text.push(']');
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// [`invocation_key`] of arguments already in canonical form.
pub(crate) fn invocation_key_of_canonical(
    scope: &str,
    tool: &str,
    canonical_args: &str,
) -> InvocationKey {
    let mut hex = hash_strings_and_canonical(&[INVOCATION_TAG, scope, tool], canonical_args);
    hex.truncate(KEY_HEX_LEN);
    InvocationKey(hex)
}

/// [`arguments_fingerprint`] of arguments already in canonical form.
pub(crate) fn arguments_fingerprint_of_canonical(tool: &str, canonical_args: &str) -> Fingerprint {
    Fingerprint(hash_strings_and_canonical(
        &[ARGUMENTS_TAG, tool],
        canonical_args,
    ))
}

/// The fingerprint of a call a caller without a principal (`run --key`, a stdio
/// client) makes under a key of its own choosing: the arguments' fingerprint under
/// a tag of its own. Such a key is used as it is given, so it could be any key,
/// including one a principal's call computed (from its name, conversation, tool and
/// arguments); with another fingerprint, that record answers such a call
/// `mismatch`, never its saved outcome, and a principal never replays an outcome a
/// local caller planted under its key. Calls without an explicit key, and every
/// principal's call, keep [`arguments_fingerprint_of_canonical`].
pub(crate) fn local_key_fingerprint_of_canonical(tool: &str, canonical_args: &str) -> Fingerprint {
    Fingerprint(hash_strings_and_canonical(
        &[LOCAL_KEY_ARGUMENTS_TAG, tool],
        canonical_args,
    ))
}

/// The invocation key of a tool call:
/// `hex(sha256(JCS(["justonce.invocation.v1", scope, tool, args])))[..32]`.
///
/// `scope` is the window in which a repeat counts as a duplicate (typically the
/// conversation). Fails only if `args` has no canonical form. The guard hashes the
/// canonical text it has already ([`invocation_key_of_canonical`]); this is the
/// definition its tests compare that with.
#[cfg(test)]
pub fn invocation_key(scope: &str, tool: &str, args: &Value) -> Result<InvocationKey, JcsError> {
    let mut hex = hash_parts(vec![
        INVOCATION_TAG.into(),
        scope.into(),
        tool.into(),
        args.clone(),
    ])?;
    hex.truncate(KEY_HEX_LEN);
    Ok(InvocationKey(hex))
}

/// A caller-chosen key confined to `scope`, so two scopes (two principals) choosing
/// the same key get two invocations:
/// `hex(sha256(JCS(["justonce.scoped-key.v1", scope, key])))[..32]`.
pub fn scoped_key(scope: &str, key: &InvocationKey) -> Result<InvocationKey, JcsError> {
    let mut hex = hash_parts(vec![
        SCOPED_KEY_TAG.into(),
        scope.into(),
        key.0.clone().into(),
    ])?;
    hex.truncate(KEY_HEX_LEN);
    Ok(InvocationKey(hex))
}

/// The key of effect number `seq` (0, 1, 2 …) of one generation of an invocation:
/// `hex(sha256(JCS(["justonce.effect.v2", invocation_key, generation, seq])))[..32]`.
///
/// The generation is fixed when the invocation is first journaled, so the same call
/// made again after its record expired is a new effect downstream too: a downstream
/// that remembers keys longer than the journal does must not swallow it.
pub fn effect_key(invocation: &InvocationKey, generation: u64, seq: u32) -> EffectKey {
    let mut hex = hash_parts(vec![
        EFFECT_TAG.into(),
        invocation.as_str().into(),
        generation.into(),
        seq.into(),
    ])
    .expect("an array of strings and a u32 always has a canonical form");
    hex.truncate(KEY_HEX_LEN);
    EffectKey(hex)
}

/// The fingerprint of an effect's content:
/// `hex(sha256(JCS([provider, operation, payload])))`, all 64 hex characters.
///
/// Compared with the journal on resume; a different fingerprint for the same
/// effect key means the guest has diverged.
pub fn effect_fingerprint(
    provider: &str,
    operation: &str,
    payload: &Value,
) -> Result<Fingerprint, JcsError> {
    hash_parts(vec![provider.into(), operation.into(), payload.clone()]).map(Fingerprint)
}

/// The fingerprint of a tool call's arguments:
/// `hex(sha256(JCS(["justonce.arguments.v1", tool, args])))`, all 64 hex characters.
///
/// Stored with an invocation key (explicit, or reached through a tool-call id
/// alias) to detect the same key being reused with different arguments. The guard
/// hashes the canonical text it has already ([`arguments_fingerprint_of_canonical`]);
/// this is the definition its tests compare that with.
#[cfg(test)]
pub fn arguments_fingerprint(tool: &str, args: &Value) -> Result<Fingerprint, JcsError> {
    hash_parts(vec![ARGUMENTS_TAG.into(), tool.into(), args.clone()]).map(Fingerprint)
}

/// Values read back from the journal: they were validated when first written, and
/// a key is never recomputed once stored.
macro_rules! from_stored {
    ($($t:ident),*) => {$(
        impl $t {
            pub(crate) fn from_stored(stored: String) -> Self {
                Self(stored)
            }
        }
    )*};
}
from_stored!(InvocationKey, EffectKey, Fingerprint);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_of_canonical_text_are_the_keys_of_the_value() {
        let big = crate::jcs::canonicalize_str(r#"{"id": 9007199254740993}"#).unwrap();
        let values = [
            json!({}),
            json!({"b": [1, 2.5, "x"], "a": {"é": null, "\u{1F600}": true}}),
            json!({"text": "quote \" backslash \\ newline \n tab \t \u{1}"}),
            json!({"n": 1e21, "m": -0.0, "k": 100}),
            serde_json::from_str(&big).unwrap(),
        ];
        for value in values {
            let canonical = crate::jcs::canonicalize(&value).unwrap();
            for (scope, tool) in [("c1", "pay"), ("", "t\"é\u{0}"), ("scope,\"x\"", "a")] {
                assert_eq!(
                    invocation_key_of_canonical(scope, tool, &canonical),
                    invocation_key(scope, tool, &value).unwrap(),
                    "{value} in {scope:?} of {tool:?}"
                );
                assert_eq!(
                    arguments_fingerprint_of_canonical(tool, &canonical),
                    arguments_fingerprint(tool, &value).unwrap(),
                    "{value} of {tool:?}"
                );
            }
        }
    }

    fn ikey(scope: &str, tool: &str, args: &Value) -> InvocationKey {
        invocation_key(scope, tool, args).unwrap()
    }

    /// The expected values were computed independently of this code, in a shell,
    /// from the canonical JSON written out by hand:
    ///
    /// ```text
    /// printf '%s' '["justonce.invocation.v1","conv-1","refund",{"amount":4417,"order":"A-1"}]' | sha256sum
    /// printf '%s' '["justonce.effect.v2","<invocation key above>",1234567,0]' | sha256sum
    /// printf '%s' '["stripe","refund",{"amount":4417,"currency":"eur"}]' | sha256sum
    /// printf '%s' '["justonce.arguments.v1","refund",{"amount":4417,"order":"A-1"}]' | sha256sum
    /// ```
    #[test]
    fn known_values() {
        let args = json!({"order": "A-1", "amount": 4417.0});
        let key = ikey("conv-1", "refund", &args);
        assert_eq!(key.as_str(), "900b7c922bc33875d62d53e060efefb1");
        assert_eq!(
            effect_key(&key, 1_234_567, 0).as_str(),
            "0be3fd17a2c1833da22c1201a188e28d"
        );
        let fp = effect_fingerprint(
            "stripe",
            "refund",
            &json!({"currency": "eur", "amount": 4417}),
        )
        .unwrap();
        assert_eq!(
            fp.as_str(),
            "1c6fbc649d1a46a1510b96016624a12bf88d503270fbd2bc023dc23b87e1f5a5"
        );
        assert_eq!(
            arguments_fingerprint("refund", &args).unwrap().as_str(),
            "857e78a87b788a051d0da1447f27a05fcbe7ae99c5d96c80dafa692914df4586"
        );
    }

    #[test]
    fn shapes() {
        let key = ikey("s", "t", &json!(null));
        assert_eq!(key.as_str().len(), 32);
        assert!(
            key.as_str()
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        // A derived key is also a valid explicit key.
        assert_eq!(InvocationKey::parse(key.as_str()).unwrap(), key);
        let ekey = effect_key(&key, 1, 7);
        assert_eq!(ekey.as_str().len(), 32);
        assert!(
            ekey.as_str()
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        let fp = arguments_fingerprint("t", &json!(null)).unwrap();
        assert_eq!(fp.as_str().len(), 64);
        assert!(
            fp.as_str()
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        assert_eq!(key.to_string(), key.as_str());
        assert_eq!(ekey.to_string(), ekey.as_str());
        assert_eq!(fp.to_string(), fp.as_str());
    }

    #[test]
    fn stable_across_calls_and_spellings() {
        let a = json!({"a": 1, "b": 4417});
        let b: Value = serde_json::from_str(r#"{"b":4417.0,"a":1}"#).unwrap();
        assert_eq!(ikey("conv", "refund", &a), ikey("conv", "refund", &a));
        assert_eq!(ikey("conv", "refund", &a), ikey("conv", "refund", &b));
        assert_eq!(
            arguments_fingerprint("refund", &a).unwrap(),
            arguments_fingerprint("refund", &b).unwrap()
        );
        assert_eq!(
            effect_fingerprint("p", "op", &a).unwrap(),
            effect_fingerprint("p", "op", &b).unwrap()
        );
    }

    #[test]
    fn any_part_changes_the_key() {
        let args = json!({"a": 1});
        let base = ikey("conv", "refund", &args);
        assert_ne!(base, ikey("conv2", "refund", &args));
        assert_ne!(base, ikey("conv", "refund2", &args));
        assert_ne!(base, ikey("conv", "refund", &json!({"a": 2})));
        assert_ne!(base, ikey("conv", "refund", &json!({"a": "1"})));
        assert_ne!(base, ikey("conv", "refund", &json!([{"a": 1}])));

        let e0 = effect_key(&base, 1, 0);
        assert_ne!(e0, effect_key(&base, 1, 1));
        assert_ne!(e0, effect_key(&ikey("conv2", "refund", &args), 1, 0));
        // Another generation of the same call (after its record expired) is a new key.
        assert_ne!(e0, effect_key(&base, 2, 0));
        assert_eq!(e0, effect_key(&base, 1, 0));

        let fp = effect_fingerprint("p", "op", &args).unwrap();
        assert_ne!(fp, effect_fingerprint("q", "op", &args).unwrap());
        assert_ne!(fp, effect_fingerprint("p", "op2", &args).unwrap());
        assert_ne!(fp, effect_fingerprint("p", "op", &json!({"a": 2})).unwrap());

        let af = arguments_fingerprint("refund", &args).unwrap();
        assert_ne!(af, arguments_fingerprint("refund2", &args).unwrap());
        assert_ne!(
            af,
            arguments_fingerprint("refund", &json!({"a": 2})).unwrap()
        );
    }

    #[test]
    fn no_ambiguity_between_parts() {
        let args = json!({});
        assert_ne!(ikey("a|b", "c", &args), ikey("a", "b|c", &args));
        assert_ne!(ikey("ab", "c", &args), ikey("a", "bc", &args));
        assert_ne!(ikey("a\",\"b", "c", &args), ikey("a", "b\",\"c", &args));
        assert_ne!(effect_fingerprint("a|b", "c", &args).unwrap(), {
            effect_fingerprint("a", "b|c", &args).unwrap()
        });
        // Domain tags keep the different kinds of hash apart.
        let ik = ikey("s", "t", &args);
        let af = arguments_fingerprint("t", &args).unwrap();
        assert!(!af.as_str().starts_with(ik.as_str()));
    }

    #[test]
    fn explicit_keys() {
        for ok in [
            "a",
            "order-4417",
            "A-1:refund/retry#2",
            "~!@$%^&*()_+{}|\"'<>?",
            &"k".repeat(255),
        ] {
            let key = InvocationKey::parse(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
            assert_eq!(key.as_str(), ok);
        }
        assert_eq!(InvocationKey::parse(""), Err(KeyError::Empty));
        assert_eq!(
            InvocationKey::parse(&"k".repeat(256)),
            Err(KeyError::TooLong { len: 256 })
        );
        for (bad, ch, index) in [
            ("a b", ' ', 1),
            ("a\tb", '\t', 1),
            ("ab\n", '\n', 2),
            ("\u{7f}", '\u{7f}', 0),
            ("\u{0}", '\u{0}', 0),
            ("caf\u{e9}", '\u{e9}', 3),
            ("x\u{a0}", '\u{a0}', 1),
        ] {
            assert_eq!(
                InvocationKey::parse(bad),
                Err(KeyError::InvalidChar { ch, index }),
                "{bad:?}"
            );
        }
        // Case is significant: no normalization.
        assert_ne!(
            InvocationKey::parse("Key").unwrap(),
            InvocationKey::parse("key").unwrap()
        );
    }

    #[test]
    fn serde_is_transparent_and_validating() {
        let key = ikey("s", "t", &json!(1));
        let text = serde_json::to_string(&key).unwrap();
        assert_eq!(text, format!("\"{key}\""));
        assert_eq!(serde_json::from_str::<InvocationKey>(&text).unwrap(), key);
        assert!(serde_json::from_str::<InvocationKey>("\"has space\"").is_err());
        assert!(serde_json::from_str::<InvocationKey>("\"\"").is_err());

        let ekey = effect_key(&key, 1, 3);
        let text = serde_json::to_string(&ekey).unwrap();
        assert_eq!(text, format!("\"{ekey}\""));
        assert_eq!(serde_json::from_str::<EffectKey>(&text).unwrap(), ekey);

        let fp = arguments_fingerprint("t", &json!(1)).unwrap();
        let text = serde_json::to_string(&fp).unwrap();
        assert_eq!(text, format!("\"{fp}\""));
        assert_eq!(serde_json::from_str::<Fingerprint>(&text).unwrap(), fp);
    }
}
