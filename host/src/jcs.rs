//! RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! The canonical form of a JSON value is the byte string every key in justonce is
//! hashed from, so two spellings of the same intent (`{"a":1,"b":4417}` and
//! `{"b":4417.0, "a":1}`) must produce the same bytes:
//!
//! - no insignificant whitespace;
//! - object members sorted by their names compared as UTF-16 code units
//!   (RFC 8785 §3.2.3), which is *not* the UTF-8 byte / code point order once
//!   characters outside the Basic Multilingual Plane are involved;
//! - strings escaped as RFC 8785 §3.2.2.2 says: only `"`, `\` and the control
//!   characters below U+0020 are escaped, `\b \t \n \f \r` in their short form and
//!   the rest as `\u00xx` with lowercase hex; every other character is written as
//!   literal UTF-8;
//! - numbers as IEEE-754 doubles printed the way ECMAScript's
//!   `Number.prototype.toString` prints them (`1.0`, `1`, `1e0` and `10e-1` are all
//!   `1`; `1e21` is `1e+21`; `-0` is `0`);
//! - with one extension (DESIGN.md, "Two layers of keys"): **no value is ever
//!   rounded.** An integer beyond ±2^53 that fits in 64 bits is written as its exact
//!   decimal digits (`9007199254740993` stays `9007199254740993`; RFC 8785 alone
//!   would print the double nearest to it, `9007199254740992`), however it was
//!   spelled (`9007199254740993.0` and `9.007199254740993e15` are that integer too).
//!   An integer *literal* beyond 64 bits is refused unless a double holds that very
//!   number (`1000000000000000000000` is the double 1e21, written `1e+21`): any
//!   other would hand the tool another number. Everything within ±2^53 canonicalizes
//!   exactly as RFC 8785 says, so no key of such values changes. Fractions and
//!   exponent forms beyond 64 bits are doubles, as every JSON reader takes them.
//!
//! The ordering is done here, not by `serde_json::Map`: this module is correct
//! whether or not serde_json's `preserve_order` feature is enabled.

use std::cmp::Ordering;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a JSON text or value has no RFC 8785 canonical form.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// The input is not JSON that RFC 8785 accepts (I-JSON, RFC 7493): a syntax
    /// error, trailing characters, a lone surrogate escape, a duplicate object key,
    /// or a number outside the range of an IEEE-754 double (such as `1e400`, which
    /// serde_json reports as "number out of range"). The message names the problem
    /// and its line and column.
    #[error("not valid JSON: {0}")]
    Parse(#[from] serde_json::Error),
    /// A number in an already-parsed value is not a finite IEEE-754 double. This
    /// cannot be produced by serde_json as configured here (without
    /// `arbitrary_precision`), but is checked rather than assumed.
    #[error("number {0} is not representable as a finite IEEE-754 double")]
    NumberOutOfRange(String),
    /// An integer literal that can be kept neither as a 64-bit integer nor as a
    /// double that holds that very number: keeping it would change the value
    /// the tool is handed.
    #[error(
        "integer {literal} at line {line} column {column} does not fit in 64 bits and would be rounded; send it as a string"
    )]
    InexactInteger {
        /// The literal as written.
        literal: String,
        /// Its 1-based line in the JSON text.
        line: usize,
        /// Its 1-based column (in bytes) in that line.
        column: usize,
    },
}

/// The magnitude up to which a double holds every integer: 2^53.
const EXACT_IN_F64: u64 = 1 << 53;

/// Returns the RFC 8785 canonical form of `value`.
///
/// Fails only if a number is not a finite double (see [`JcsError::NumberOutOfRange`]).
pub fn canonicalize(value: &Value) -> Result<String, JcsError> {
    let mut out = String::new();
    write_value(&mut out, value)?;
    Ok(out)
}

/// Parses `json` and returns its RFC 8785 canonical form.
///
/// Stricter than `serde_json::from_str`: a duplicate object key is an error (I-JSON
/// forbids them and RFC 8785 §3.1 requires the canonicalizer to fail rather than
/// silently keep one of the values). The guard reads arguments with
/// [`parse_canonical`] instead, which gives the value this text reads back as.
#[cfg(test)]
pub fn canonicalize_str(json: &str) -> Result<String, JcsError> {
    canonicalize(&parse_exact(json)?)
}

/// Parses `json` strictly (as [`parse_exact`]) and returns the value its canonical
/// form reads back as (`serde_json::from_str(&canonicalize_str(json)?)`), without
/// writing and reading the text again: only numbers change (`1.0` reads back as the
/// integer `1`, `-0` as `0`), each as its canonical spelling reads.
pub fn parse_canonical(json: &str) -> Result<Value, JcsError> {
    let mut value = parse_exact(json)?;
    numbers_as_canonical(&mut value)?;
    Ok(value)
}

/// Replaces every number of `value` whose canonical spelling reads back as another
/// number (a double, an integer beyond 2^53) with what it reads back as.
fn numbers_as_canonical(value: &mut Value) -> Result<(), JcsError> {
    match value {
        Value::Number(n) => {
            let small_integer = n
                .as_i64()
                .map(|i| i.unsigned_abs())
                .or(n.as_u64())
                .is_some_and(|m| m <= EXACT_IN_F64);
            if !small_integer {
                let mut text = String::new();
                write_number(&mut text, n)?;
                *n = serde_json::from_str(&text)?;
            }
        }
        Value::Array(items) => {
            for item in items {
                numbers_as_canonical(item)?;
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                numbers_as_canonical(item)?;
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
    Ok(())
}

/// Parses `json` as [`canonicalize_str`] does, keeping every integer exact: duplicate
/// object keys refused, integers beyond 2^53 however spelled read as exact 64-bit
/// integers, and integer literals that would be rounded refused
/// ([`JcsError::InexactInteger`]).
pub fn parse_exact(json: &str) -> Result<Value, JcsError> {
    let json = exact_numbers(json)?;
    let mut de = serde_json::Deserializer::from_str(&json);
    let StrictValue(value) = StrictValue::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Rewrites the number tokens of `json` that serde_json would round into a spelling
/// it reads exactly, or refuses them; every other byte is kept.
///
/// serde_json reads an integer literal within 64 bits exactly and everything else as
/// a double. So a fraction or exponent whose value is an integer beyond 2^53 that
/// fits in 64 bits (`9007199254740993.0`, `1.5e18`) is rewritten to its digits, and
/// an integer literal beyond 64 bits is refused unless the double nearest to it is
/// that very number. Text that is not JSON is passed on for the parser to
/// refuse.
pub fn exact_numbers(json: &str) -> Result<std::borrow::Cow<'_, str>, JcsError> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = string_end(bytes, i + 1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &json[start..i];
                match exact_token(token) {
                    Exact::Keep => {}
                    Exact::Digits(digits) => {
                        let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
                        out.push_str(&json[copied..start]);
                        out.push_str(&digits);
                        copied = i;
                    }
                    Exact::Refuse => {
                        let line = json[..start].matches('\n').count() + 1;
                        let column = start - json[..start].rfind('\n').map_or(0, |n| n + 1) + 1;
                        return Err(JcsError::InexactInteger {
                            literal: token.to_owned(),
                            line,
                            column,
                        });
                    }
                }
            }
            _ => i += 1,
        }
    }
    Ok(match out {
        None => std::borrow::Cow::Borrowed(json),
        Some(mut out) => {
            out.push_str(&json[copied..]);
            std::borrow::Cow::Owned(out)
        }
    })
}

/// The index just past the closing quote of a string whose body starts at `i`.
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// What [`exact_numbers`] does with one number token.
enum Exact {
    /// serde_json reads it as what it says (or refuses it as malformed).
    Keep,
    /// An integer beyond 2^53 within 64 bits spelled with a fraction or exponent:
    /// these digits say the same integer.
    Digits(String),
    /// An integer literal that would be rounded.
    Refuse,
}

fn exact_token(token: &str) -> Exact {
    let (negative, body) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => match body[at + 1..].parse::<i64>() {
            Ok(exponent) => (&body[..at], exponent),
            Err(_) => return Exact::Keep,
        },
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return Exact::Keep;
    }
    if fraction.is_empty() && exponent == 0 && body.len() == mantissa.len() {
        // An integer literal: serde_json keeps it within 64 bits.
        if fits_64_bits(negative, whole) {
            return Exact::Keep;
        }
        // Past 64 bits serde_json reads it as the nearest double: kept if that double
        // is the same number (`1000000000000000000000` is 1e21), refused otherwise.
        let nearest: f64 = match token.parse() {
            Ok(f) => f,
            Err(_) => return Exact::Refuse,
        };
        let digits = whole.trim_start_matches('0');
        return if nearest.is_finite() && integer_digits(nearest.abs()).as_deref() == Some(digits) {
            Exact::Keep
        } else {
            Exact::Refuse
        };
    }
    // A fraction or exponent: is its exact value an integer beyond 2^53 in 64 bits?
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let trailing = digits.len() - digits.trim_end_matches('0').len();
    let significant = &digits[..digits.len() - trailing];
    if significant.is_empty() {
        return Exact::Keep;
    }
    let Some(scale) = exponent
        .checked_sub(fraction.len() as i64)
        .and_then(|e| e.checked_add(trailing as i64))
    else {
        return Exact::Keep;
    };
    if scale < 0 || significant.len() as i64 + scale > 20 {
        return Exact::Keep;
    }
    let integer = format!("{significant}{}", "0".repeat(scale as usize));
    if !fits_64_bits(negative, &integer) {
        return Exact::Keep;
    }
    let magnitude: u128 = integer.parse().unwrap_or(u128::MAX);
    if magnitude <= u128::from(EXACT_IN_F64) {
        return Exact::Keep;
    }
    Exact::Digits(if negative {
        format!("-{integer}")
    } else {
        integer
    })
}

/// The exact decimal digits of `f`, a non-negative integral double (every double of
/// 2^53 or more is one); `None` for a fraction.
fn integer_digits(f: f64) -> Option<String> {
    if f.fract() != 0.0 {
        return None;
    }
    let bits = f.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let mantissa = if (bits >> 52) & 0x7ff == 0 {
        (bits & ((1 << 52) - 1)) << 1
    } else {
        (bits & ((1 << 52) - 1)) | (1 << 52)
    };
    if exponent <= 0 {
        return Some(((mantissa as u128) >> exponent.unsigned_abs()).to_string());
    }
    // mantissa × 2^exponent, in base 10, least significant digit first.
    let mut digits: Vec<u8> = mantissa
        .to_string()
        .bytes()
        .rev()
        .map(|b| b - b'0')
        .collect();
    for _ in 0..exponent {
        let mut carry = 0;
        for digit in &mut digits {
            let doubled = *digit * 2 + carry;
            *digit = doubled % 10;
            carry = doubled / 10;
        }
        if carry > 0 {
            digits.push(carry);
        }
    }
    Some(digits.iter().rev().map(|d| char::from(b'0' + d)).collect())
}

/// Whether the decimal `digits` (no sign) with the given sign fit in an `i64` or `u64`.
fn fits_64_bits(negative: bool, digits: &str) -> bool {
    match digits.parse::<u128>() {
        Ok(n) if negative => n <= 1u128 << 63,
        Ok(n) => n <= u128::from(u64::MAX),
        Err(_) => false,
    }
}

fn write_value(out: &mut String, value: &Value) -> Result<(), JcsError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n)?,
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|(a, _), (b, _)| cmp_utf16(a, b));
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Compares two strings by their UTF-16 code units (RFC 8785 §3.2.3).
fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_number(out: &mut String, n: &Number) -> Result<(), JcsError> {
    // No value is rounded: an integer a double might not hold is written as its
    // digits. Within 2^53 a double holds it and prints the same digits.
    let exact = !crate::mutants::on(crate::mutants::Mutant::RoundedIntegers);
    if exact
        && let Some(i) = n.as_i64()
        && i.unsigned_abs() > EXACT_IN_F64
    {
        out.push_str(&i.to_string());
        return Ok(());
    }
    if exact
        && let Some(u) = n.as_u64()
        && u > EXACT_IN_F64
    {
        out.push_str(&u.to_string());
        return Ok(());
    }
    match n.as_f64() {
        Some(f) if f.is_finite() => {
            let mut buf = ryu_js::Buffer::new();
            // ryu-js prints -0 as "0", as Number.prototype.toString does.
            out.push_str(buf.format_finite(f));
            Ok(())
        }
        _ => Err(JcsError::NumberOutOfRange(n.to_string())),
    }
}

pub(crate) fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let b = c as u32 as usize;
                out.push_str("\\u00");
                out.push(HEX[b >> 4] as char);
                out.push(HEX[b & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A `serde_json::Value` deserialized with duplicate object keys rejected.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("number {v} is not a finite IEEE-754 double")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate object key {key:?}")));
            }
            let StrictValue(item) = map.next_value()?;
            members.insert(key, item);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn canon(json: &str) -> String {
        canonicalize_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    /// The RFC 8785 reference vectors (testdata/jcs, from cyberphone/json-canonicalization).
    /// The output files end without a newline, so they are compared byte for byte.
    #[test]
    fn reference_vectors() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/jcs");
        let mut count = 0;
        let mut entries: Vec<_> = std::fs::read_dir(dir.join("input"))
            .expect("testdata/jcs/input")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for input_path in entries {
            let name = input_path.file_name().expect("file name");
            let input = std::fs::read_to_string(&input_path).expect("read input");
            let expected = std::fs::read(dir.join("output").join(name)).expect("read output");
            let actual = canonicalize_str(&input)
                .unwrap_or_else(|e| panic!("{}: {e}", input_path.display()));
            assert_eq!(
                actual.as_bytes(),
                &expected[..],
                "{}: got {actual}",
                input_path.display()
            );
            // The canonical form is a fixed point.
            assert_eq!(canon(&actual), actual);
            count += 1;
        }
        assert_eq!(count, 6, "expected the six RFC 8785 vectors");
    }

    #[test]
    fn numbers_in_ecmascript_form() {
        for (input, expected) in [
            ("1.0", "1"),
            ("1", "1"),
            ("1e0", "1"),
            ("10e-1", "1"),
            ("4417.0", "4417"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("-0.0", "0"),
            ("-0", "0"),
            ("-1.5", "-1.5"),
            ("0.1", "0.1"),
            ("333333333.33333329", "333333333.3333333"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("9007199254740992", "9007199254740992"),
            ("9007199254740993", "9007199254740993"),
            ("18446744073709551615", "18446744073709551615"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("1152921504606846976", "1152921504606846976"),
            ("9007199254740993.0", "9007199254740993"),
            ("9.007199254740993e15", "9007199254740993"),
            ("-9.007199254740993E+15", "-9007199254740993"),
            ("1.5e18", "1500000000000000000"),
            ("9007199254740992.0", "9007199254740992"),
            ("2e19", "20000000000000000000"),
            ("20000000000000000000", "20000000000000000000"),
        ] {
            assert_eq!(canon(input), expected, "input {input}");
        }
        // Two spellings of one double are one number. This needs serde_json's
        // `float_roundtrip` feature: its default float parser may land one ULP off
        // (333333333.33333329 became 333333333.33333325 without it).
        for (a, b) in [
            ("333333333.33333329", "333333333.3333333"),
            ("0.299999999999999988897769753748", "0.3"),
            ("2.2250738585072011e-308", "2.225073858507201e-308"),
            ("9007199254740993.0", "9007199254740993"),
            ("900719925474099300e-2", "9007199254740993"),
        ] {
            assert_eq!(canon(a), canon(b), "{a} vs {b}");
        }
        for text in [
            "333333333.33333329",
            "0.1",
            "1.7976931348623157e308",
            "2.2250738585072011e-308",
            "4.9406564584124654e-324",
            "123456789012345678901234567890e-50",
            "0.30000000000000004",
        ] {
            let ours: f64 = serde_json::from_str(text).unwrap();
            assert_eq!(
                ours.to_bits(),
                text.parse::<f64>().unwrap().to_bits(),
                "{text}"
            );
        }
        assert_eq!(canonicalize(&json!(-0.0)).unwrap(), "0");
        assert_eq!(
            canonicalize(&json!(u64::MAX)).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(
            canonicalize(&json!(i64::MIN)).unwrap(),
            "-9223372036854775808"
        );
        assert_eq!(
            canonicalize(&json!(4417)).unwrap(),
            canonicalize(&json!(4417.0)).unwrap()
        );
    }

    /// The extension's vectors (testdata/jcs-exact): what RFC 8785 leaves to a double
    /// is kept exact, and everything a double holds is as RFC 8785 prints it.
    #[test]
    fn exact_integer_vectors() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/jcs-exact");
        let mut count = 0;
        for entry in std::fs::read_dir(dir.join("input")).expect("testdata/jcs-exact/input") {
            let input_path = entry.expect("dir entry").path();
            let name = input_path.file_name().expect("file name");
            let input = std::fs::read_to_string(&input_path).expect("read input");
            let expected =
                std::fs::read_to_string(dir.join("output").join(name)).expect("read output");
            assert_eq!(
                canon(&input),
                expected.trim_end(),
                "{}",
                input_path.display()
            );
            count += 1;
        }
        assert!(count >= 2, "the exact-integer vectors are missing");
    }

    #[test]
    fn integers_past_two_to_the_53_are_distinct() {
        // Two customers, two keys: RFC 8785 alone gives both the same bytes.
        assert_ne!(canon("9007199254740993"), canon("9007199254740992"));
        assert_ne!(canon("18446744073709551615"), canon("18446744073709551614"));
        assert_ne!(canon("1152921504606847000"), canon("1152921504606846976"));
        // Within a double's exact range the spellings of one integer are one number.
        assert_eq!(canon("100"), canon("1e2"));
        assert_eq!(canon("1"), canon("1.0"));
        assert_eq!(canon("0"), canon("-0"));
    }

    #[test]
    fn integer_literals_that_would_be_rounded_are_refused() {
        for (json, literal) in [
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
            ("{\n \"id\": 18446744073709551617}", "18446744073709551617"),
            ("[-9223372036854775809]", "-9223372036854775809"),
        ] {
            match canonicalize_str(json) {
                Err(JcsError::InexactInteger { literal: got, .. }) => assert_eq!(got, literal),
                other => panic!("{json}: expected InexactInteger, got {other:?}"),
            }
        }
        let msg = canonicalize_str("{\n \"id\": 18446744073709551617}")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("line 2 column 8"), "{msg}");
        assert!(msg.contains("send it as a string"), "{msg}");
        // Digits inside strings are text, and a float's exponent form is a double.
        assert_eq!(
            canon(r#"{"id":"123456789012345678901234567890","e":1e30}"#),
            r#"{"e":1e+30,"id":"123456789012345678901234567890"}"#
        );
        // A double that holds the literal's number exactly keeps it, as RFC 8785
        // prints that double: no value changes, only its spelling.
        assert_eq!(canon("100000000000000000000"), "100000000000000000000");
        assert_eq!(canon("1000000000000000000000"), canon("1e21"));
        assert_eq!(
            canon("18446744073709551616"),
            canon("1.8446744073709552e19")
        );
        assert_eq!(
            integer_digits(18446744073709551616.0).as_deref(),
            Some("18446744073709551616")
        );
        assert_eq!(
            integer_digits(1e21).as_deref(),
            Some("1000000000000000000000")
        );
        assert_eq!(integer_digits(4.0).as_deref(), Some("4"));
        assert_eq!(integer_digits(0.5), None);
    }

    #[test]
    fn keys_sorted_by_utf16_code_units() {
        // Code point (= UTF-8 byte) order: a < é < ｡ (U+FF61) < 😀 (U+1F600).
        // UTF-16 order: 😀 is the surrogate pair D83D DE00, which sorts before FF61.
        let value = json!({"\u{ff61}": 3, "\u{1f600}": 2, "a": 0, "\u{e9}": 1});
        assert_eq!(
            canonicalize(&value).unwrap(),
            "{\"a\":0,\"\u{e9}\":1,\"\u{1f600}\":2,\"\u{ff61}\":3}"
        );
        // serde_json's own map (without preserve_order) iterates in code point order,
        // so this test would fail if the map's order were used.
        let map_order: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(map_order, ["a", "\u{e9}", "\u{ff61}", "\u{1f600}"]);
        // Prefixes sort first; comparison is by code unit, not by length.
        assert_eq!(
            canon(r#"{"ab":1,"b":2,"a":3,"":4}"#),
            r#"{"":4,"a":3,"ab":1,"b":2}"#
        );
    }

    #[test]
    fn string_escaping() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        assert_eq!(
            canonicalize(&Value::String(all_controls)).unwrap(),
            "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f\
             \\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\""
        );
        // Quote and backslash escaped; solidus, DEL, non-ASCII and astral characters literal.
        assert_eq!(
            canon(r#""\" \\ \/ \u007f \u00e9 \u20ac \ud83d\ude00 </script>""#),
            "\"\\\" \\\\ / \u{7f} \u{e9} \u{20ac} \u{1f600} </script>\""
        );
        // Escaped and literal spellings of the same string are the same string.
        assert_eq!(canon(r#"{"\u0041":"\u0042"}"#), r#"{"A":"B"}"#);
    }

    #[test]
    fn nested_structures_without_whitespace() {
        let input = r#"
            { "z": [ 1.50, { "y": null, "x": [ [ ], { } ] }, true ],
              "m": { "b": { "d": false, "c": "s" }, "a": [ -0, 2e2 ] } }
        "#;
        assert_eq!(
            canon(input),
            r#"{"m":{"a":[0,200],"b":{"c":"s","d":false}},"z":[1.5,{"x":[[],{}],"y":null},true]}"#
        );
        assert_eq!(canon("[]"), "[]");
        assert_eq!(canon("{}"), "{}");
        assert_eq!(canon(" null "), "null");
        assert_eq!(canon("\"\""), "\"\"");
    }

    fn parse_error(json: &str) -> String {
        match canonicalize_str(json) {
            Err(e @ JcsError::Parse(_)) => e.to_string(),
            other => panic!("{json}: expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn number_too_large_for_f64_is_an_error() {
        for json in ["1e400", "-1e400", "[1, 2e308]", r#"{"a": 1e999}"#] {
            let msg = parse_error(json);
            assert!(msg.contains("number out of range"), "{json}: {msg}");
        }
        // Tiny numbers underflow to 0 (as in ECMAScript) rather than failing.
        assert_eq!(canon("1e-400"), "0");
    }

    #[test]
    fn malformed_input_is_an_error() {
        for json in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "'a'",
            "NaN",
            "Infinity",
            "01",
            "1.",
            "nul",
        ] {
            parse_error(json);
        }
        let msg = parse_error("{} []");
        assert!(msg.contains("trailing characters"), "{msg}");
        // Lone surrogate escapes have no UTF-8 form (serde_json's message varies with
        // what follows the escape).
        parse_error(r#""\ud800""#);
        parse_error(r#""\ud800x""#);
        parse_error(r#""\udc00""#);
    }

    #[test]
    fn duplicate_keys_are_an_error() {
        let msg = parse_error(r#"{"a":1,"b":2,"a":1}"#);
        assert!(msg.contains("duplicate object key \"a\""), "{msg}");
        // Nested, and duplicates spelled differently (escape vs literal).
        let msg = parse_error(r#"[{"x":{"\u0041":1,"A":2}}]"#);
        assert!(msg.contains("duplicate object key \"A\""), "{msg}");
        // The same key in sibling objects is fine.
        assert_eq!(canon(r#"[{"a":1},{"a":2}]"#), r#"[{"a":1},{"a":2}]"#);
    }

    #[test]
    fn non_finite_number_in_a_value_is_an_error() {
        // serde_json refuses to build a non-finite Number, so a value can only carry
        // one through arbitrary_precision; the check exists for that case.
        assert!(Number::from_f64(f64::INFINITY).is_none());
        assert!(Number::from_f64(f64::NAN).is_none());
        let err = JcsError::NumberOutOfRange("1e400".into());
        assert_eq!(
            err.to_string(),
            "number 1e400 is not representable as a finite IEEE-754 double"
        );
        // And serde_json really is built without arbitrary_precision here.
        assert!(serde_json::from_str::<Value>("1e400").is_err());
    }

    /// The guard parses arguments once (`parse_canonical`) where it used to write
    /// their canonical text and read it back: both must give the very same value, or
    /// normalization and the schema would judge other numbers than the tool gets.
    #[test]
    fn parse_canonical_reads_what_the_canonical_text_reads_back_as() {
        for json in [
            r#"{"a": 1.0, "b": -0, "c": -0.0, "d": 1e2, "e": 2.5, "f": -7}"#,
            r#"{"big": 9007199254740993.0, "bigger": 1.5e18, "huge": 1e21, "tiny": 5e-324}"#,
            r#"{"max": 18446744073709551615, "min": -9223372036854775808, "over": 1e20}"#,
            r#"[1.0, [2.0, {"x": 3.000}], "1.0", true, null, 0.1]"#,
            r#"{"s": "\u00e9\ud83d\ude00", "n": {"deep": [4.0e0]}}"#,
        ] {
            let read_back: Value = serde_json::from_str(&canon(json)).unwrap();
            let parsed = parse_canonical(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(parsed, read_back, "{json}");
            assert_eq!(canonicalize(&parsed).unwrap(), canon(json), "{json}");
        }
        assert!(
            parse_canonical(r#"{"a": 1, "a": 2}"#).is_err(),
            "duplicates"
        );
        assert!(parse_canonical("123456789012345678901234567890").is_err());
    }
}
