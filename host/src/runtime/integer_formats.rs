//! The integer formats a tool's types declare (`"format": "uint64"`, `"int64"`, as
//! schemars writes them for `u64` and `i64`), checked against the arguments: JSON
//! Schema takes them as annotations only, so without this an id past `u64::MAX`
//! passed the schema and the tool's own parse refused it, as a saved tool error.
//! The author's types cannot take such a value: it is bad input, refused before
//! anything is stored.

use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

/// The keyword added beside each checked `format` in the validator's copy of the
/// schema (never in what agents see).
pub(super) const KEYWORD: &str = "x-justonce-integer-format";

/// Values of these keywords are data, not schemas: left as they are.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// The range of an integer format: `u64` or `i64`.
#[derive(Clone, Copy)]
enum Range {
    Unsigned,
    Signed,
}

impl Range {
    fn of(format: &str) -> Option<Self> {
        match format {
            "uint64" => Some(Self::Unsigned),
            "int64" => Some(Self::Signed),
            _ => None,
        }
    }

    /// Whether `value` (a number; anything else is the `type` keyword's business)
    /// fits. serde_json keeps every integer within 64 bits as one; what is not (a
    /// fraction, or an integer past 64 bits, which the canonical form writes as a
    /// double) does not fit.
    fn takes(self, value: &Value, digits_too: bool) -> bool {
        let n = match value {
            Value::Number(n) => n,
            // An id that may come as its digits: digits past the range are refused
            // as a number past it would be (normalization made the others numbers);
            // any other string is the `pattern`'s business, and a string under a
            // format that does not take integers (OpenAPI's `"type": "string",
            // "format": "int64"`) is not this check's at all.
            Value::String(text) if digits_too && spells_an_integer(text) => {
                return match self {
                    Self::Unsigned => text
                        .strip_prefix('+')
                        .unwrap_or(text)
                        .parse::<u64>()
                        .is_ok(),
                    Self::Signed => text
                        .strip_prefix('+')
                        .unwrap_or(text)
                        .parse::<i64>()
                        .is_ok(),
                };
            }
            _ => return true,
        };
        match self {
            Self::Unsigned => n.as_u64().is_some(),
            Self::Signed => n.as_i64().is_some(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Unsigned => "an unsigned 64-bit integer (0 to 18446744073709551615)",
            Self::Signed => "a signed 64-bit integer (-9223372036854775808 to 9223372036854775807)",
        }
    }
}

/// Whether `text` is an integer's decimal digits (with a sign, leading zeros allowed):
/// one a 64-bit id format refuses as a string only because it is out of range.
fn spells_an_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `schema` with [`KEYWORD`] beside every `format` of [`Range`], for the validator.
pub(super) fn marked(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = if DATA_KEYWORDS.contains(&key.as_str()) {
                        value.clone()
                    } else {
                        marked(value)
                    };
                    (key.clone(), value)
                })
                .collect();
            if let Some(format) = map.get("format").and_then(Value::as_str)
                && Range::of(format).is_some()
            {
                out.insert(KEYWORD.to_owned(), Value::String(format.to_owned()));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(marked).collect()),
        other => other.clone(),
    }
}

/// The validator of [`KEYWORD`].
pub(super) fn keyword<'a>(
    parent: &'a Map<String, Value>,
    value: &'a Value,
    _path: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let range = value
        .as_str()
        .and_then(Range::of)
        .ok_or_else(|| ValidationError::custom(format!("{KEYWORD}: not a known format")))?;
    Ok(Box::new(Check {
        range,
        digits_too: crate::normalize::takes_an_id_as_digits(parent),
    }))
}

/// A refused value as its exact digits: a whole number a 64-bit integer cannot hold
/// arrives as a double, which JSON prints in exponent form (`2^64` as
/// `1.8446744073709552e19`), not the number the caller sent; every double that is a
/// whole number has one exact decimal expansion, printed in full.
fn exact_digits(value: &Value) -> String {
    match value.as_f64() {
        Some(x) if !value.is_i64() && !value.is_u64() && x.is_finite() && x.fract() == 0.0 => {
            format!("{x:.0}")
        }
        _ => value.to_string(),
    }
}

struct Check {
    range: Range,
    /// The schema takes the id's digits as a string too.
    digits_too: bool,
}

impl<'i> Keyword<'i> for Check {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(ValidationError::custom(format!(
            "{} is not {}, which the tool's type takes",
            exact_digits(instance),
            self.range.name()
        )))
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.range.takes(instance, self.digits_too)
    }
}
