//! A tool's input schema in the form the strict tool-schema modes of model APIs
//! accept (OpenAI's structured outputs, Gemini's function declarations, Anthropic's
//! tools), for `justonce tools --json` and, with its dialect keywords, `tools/list`.
//!
//! Schema generators such as schemars write `$ref`s into `$defs` and integer formats
//! (`uint64`, `int32`, …) that those modes refuse. [`portable`] inlines the references,
//! drops the formats they do not know while keeping what the format meant as
//! `minimum`/`maximum`, and writes `oneOf` as `anyOf`. Arguments are still checked
//! against the tool's own schema; this is only what a model is shown.
//!
//! MCP's schema dialect is JSON Schema 2020-12, and SEP-1613 asks a server to keep
//! `$schema` and `$defs` in `tools/list`: [`portable_with_dialect`] is the portable
//! form with the root's `$schema` and `$defs` carried over as the tool declared them.
//! Nothing outside `$defs` refers to them any more, so a model's strict mode still
//! finds every property's schema inline.

use serde_json::{Map, Value, json};

/// The `format`s the strict modes accept (OpenAI's list; the others accept a subset
/// of it or ignore formats).
const KEPT_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords that only hold definitions or name the dialect: gone once references are
/// inlined.
const DROPPED_KEYWORDS: &[&str] = &["$defs", "definitions", "$schema", "$id", "$comment"];

/// `schema` with its local `$ref`s inlined and its formats made portable; see the
/// module docs. A reference back into a definition that is being inlined (a
/// recursive type) becomes `{}` (any value), the one thing a schema without
/// references can say there.
pub fn portable(schema: &Value) -> Value {
    let root = schema;
    let mut stack = Vec::new();
    rewrite(schema, root, &mut stack)
}

/// [`portable`], with the root's `$schema` and `$defs` (those it has) kept: what
/// MCP's `tools/list` shows (SEP-1613). `$schema` is carried over as declared; each
/// definition of `$defs` keeps its name and is itself made portable (its `$ref`s
/// inlined, its formats portable), so no part of the listing holds a `$ref`.
pub fn portable_with_dialect(schema: &Value) -> Value {
    let mut rewritten = portable(schema);
    if let (Value::Object(declared), Value::Object(out)) = (schema, &mut rewritten) {
        if let Some(dialect) = declared.get("$schema") {
            out.insert("$schema".to_owned(), dialect.clone());
        }
        if let Some(defs) = declared.get("$defs") {
            let defs = match defs {
                Value::Object(defs) => Value::Object(
                    defs.iter()
                        .map(|(name, def)| (name.clone(), rewrite(def, schema, &mut Vec::new())))
                        .collect(),
                ),
                other => other.clone(),
            };
            out.insert("$defs".to_owned(), defs);
        }
    }
    rewritten
}

fn rewrite(schema: &Value, root: &Value, stack: &mut Vec<String>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = match map.get("$ref").and_then(Value::as_str) {
        Some(reference) => inline(reference, root, stack),
        None => Map::new(),
    };
    for (key, value) in map {
        if key == "$ref" || DROPPED_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let key = if key == "oneOf" {
            "anyOf"
        } else {
            key.as_str()
        };
        let value = match key {
            // Maps of names to subschemas.
            "properties" | "patternProperties" | "dependentSchemas" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), rewrite(s, root, stack)))
                        .collect(),
                ),
                other => other.clone(),
            },
            // Lists of subschemas.
            "anyOf" | "allOf" | "prefixItems" => match value {
                Value::Array(items) => {
                    Value::Array(items.iter().map(|s| rewrite(s, root, stack)).collect())
                }
                other => other.clone(),
            },
            // One subschema.
            "items"
            | "additionalProperties"
            | "not"
            | "contains"
            | "propertyNames"
            | "if"
            | "then"
            | "else"
            | "unevaluatedProperties"
            | "unevaluatedItems" => rewrite(value, root, stack),
            // Data, not schemas.
            _ => value.clone(),
        };
        out.insert(key.to_owned(), value);
    }
    portable_format(&mut out);
    Value::Object(out)
}

/// The definition `reference` points at, rewritten, as the base that the keywords
/// beside the `$ref` are laid over.
fn inline(reference: &str, root: &Value, stack: &mut Vec<String>) -> Map<String, Value> {
    if stack.iter().any(|r| r == reference) {
        return Map::new();
    }
    let Some(target) = reference
        .strip_prefix('#')
        .and_then(|pointer| root.pointer(pointer))
    else {
        // Not a local reference: left as it is rather than guessed at.
        let mut kept = Map::new();
        kept.insert("$ref".into(), Value::String(reference.to_owned()));
        return kept;
    };
    stack.push(reference.to_owned());
    let inlined = rewrite(target, root, stack);
    stack.pop();
    match inlined {
        Value::Object(map) => map,
        // `true` (anything) is `{}`; `false` (nothing) cannot be laid over.
        Value::Bool(false) => Map::from_iter([("not".to_owned(), json!({}))]),
        _ => Map::new(),
    }
}

/// Drops a format the strict modes refuse, keeping the range it stood for.
fn portable_format(schema: &mut Map<String, Value>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    if KEPT_FORMATS.contains(&format) {
        return;
    }
    let range: Option<(f64, Option<f64>)> = match format {
        "uint8" => Some((0.0, Some(u8::MAX.into()))),
        "uint16" => Some((0.0, Some(u16::MAX.into()))),
        "uint32" => Some((0.0, Some(u32::MAX.into()))),
        "uint64" | "uint128" | "uint" => Some((0.0, None)),
        "int8" => Some((i8::MIN.into(), Some(i8::MAX.into()))),
        "int16" => Some((i16::MIN.into(), Some(i16::MAX.into()))),
        "int32" => Some((i32::MIN.into(), Some(i32::MAX.into()))),
        _ => None,
    };
    schema.remove("format");
    if let Some((min, max)) = range {
        tighten(schema, "minimum", min, f64::max);
        if let Some(max) = max {
            tighten(schema, "maximum", max, f64::min);
        }
    }
}

/// Sets `key` to `bound`, or keeps the stricter of the two when it is set already.
fn tighten(schema: &mut Map<String, Value>, key: &str, bound: f64, stricter: fn(f64, f64) -> f64) {
    let value = match schema.get(key).and_then(Value::as_f64) {
        Some(existing) if stricter(existing, bound) == existing => return,
        _ => bound,
    };
    // Whole numbers are written as integers (`0`, not `0.0`).
    schema.insert(key.to_owned(), json!(value as i64));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What schemars writes for `struct Args { orders: Vec<Order> }`.
    fn schemars_args() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "type": "object",
            "properties": {
                "orders": { "type": "array", "items": { "$ref": "#/$defs/Order" } },
                "note": { "anyOf": [{ "$ref": "#/$defs/Note" }, { "type": "null" }] }
            },
            "required": ["orders"],
            "additionalProperties": false,
            "$defs": {
                "Order": {
                    "type": "object",
                    "properties": {
                        "order_id": { "type": "integer", "format": "uint64", "minimum": 0 },
                        "qty": { "type": "integer", "format": "uint8", "minimum": 1 },
                        "at": { "type": "string", "format": "date-time" }
                    },
                    "required": ["order_id"]
                },
                "Note": { "type": "string", "description": "A note." }
            }
        })
    }

    #[test]
    fn references_are_inlined_and_definitions_dropped() {
        let schema = portable(&schemars_args());
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
        assert!(schema.get("$schema").is_none());
        assert_eq!(
            schema["properties"]["orders"]["items"]["required"],
            json!(["order_id"])
        );
        assert_eq!(
            schema["properties"]["note"]["anyOf"][0],
            json!({ "type": "string", "description": "A note." })
        );
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn integer_formats_are_dropped_and_their_range_kept() {
        let schema = portable(&schemars_args());
        let order = &schema["properties"]["orders"]["items"]["properties"];
        assert_eq!(
            order["order_id"],
            json!({ "type": "integer", "minimum": 0 })
        );
        assert_eq!(
            order["qty"],
            json!({ "type": "integer", "minimum": 1, "maximum": 255 }),
            "the stricter minimum stays"
        );
        assert_eq!(
            order["at"]["format"], "date-time",
            "a format the strict modes accept is kept"
        );
        let int = portable(&json!({ "type": "integer", "format": "int32" }));
        assert_eq!(
            int,
            json!({ "type": "integer", "minimum": -2147483648i64, "maximum": 2147483647 })
        );
        let float = portable(&json!({ "type": "number", "format": "double" }));
        assert_eq!(float, json!({ "type": "number" }));
    }

    #[test]
    fn siblings_of_a_ref_win_and_one_of_becomes_any_of() {
        let schema = json!({
            "properties": {
                "kind": { "$ref": "#/$defs/Kind", "description": "Which kind." }
            },
            "$defs": { "Kind": { "oneOf": [{ "const": "a" }, { "const": "b" }], "description": "Kind." } }
        });
        assert_eq!(
            portable(&schema)["properties"]["kind"],
            json!({ "anyOf": [{ "const": "a" }, { "const": "b" }], "description": "Which kind." })
        );
    }

    #[test]
    fn a_recursive_reference_ends_in_any_value_instead_of_looping() {
        let schema = json!({
            "$ref": "#/$defs/Node",
            "$defs": { "Node": {
                "type": "object",
                "properties": { "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } } }
            } }
        });
        let out = portable(&schema);
        assert_eq!(out["type"], "object");
        assert_eq!(out["properties"]["children"]["items"], json!({}));
    }

    #[test]
    fn a_schema_without_references_or_formats_is_unchanged() {
        let schema = json!({
            "type": "object",
            "properties": { "event": { "type": "string", "minLength": 1 } },
            "required": ["event"],
            "additionalProperties": false
        });
        assert_eq!(portable(&schema), schema);
        assert_eq!(
            portable_with_dialect(&schema),
            schema,
            "no dialect to carry"
        );
    }

    #[test]
    fn with_dialect_the_root_keeps_schema_and_defs_by_name_each_portable() {
        let declared = schemars_args();
        let schema = portable_with_dialect(&declared);
        assert_eq!(schema["$schema"], declared["$schema"]);
        let defs = schema["$defs"].as_object().expect("$defs kept");
        assert_eq!(
            defs.keys().collect::<Vec<_>>(),
            declared["$defs"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            "every definition, under its own name"
        );
        assert_eq!(
            defs["Order"],
            portable(&declared["$defs"]["Order"]),
            "each definition made portable"
        );
        assert_eq!(
            defs["Order"]["properties"]["order_id"],
            json!({ "type": "integer", "minimum": 0 }),
            "uint64 is dropped for the range it meant"
        );
        assert!(!schema.to_string().contains("$ref"), "{schema}");
        let mut rest = schema.clone();
        rest.as_object_mut().unwrap().remove("$defs");
        rest.as_object_mut().unwrap().remove("$schema");
        assert_eq!(
            rest,
            portable(&declared),
            "everything else is the portable form"
        );
    }

    /// SEP-2106 (MCP 2026-07-28): a listing keeps composition (`allOf` of an
    /// `anyOf`), conditionals (`if`/`then`/`else`) and a definition's `$anchor`; the
    /// portable form only rewrites what is inside them.
    #[test]
    fn composition_conditionals_and_anchors_are_kept() {
        let declared = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object"}},
            "type": "object",
            "properties": {
                "address": {"$ref": "#/$defs/address"},
                "phone": {"type": "string"},
                "n": {"type": "integer", "format": "uint8"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["n"]}]}],
            "if": {"properties": {"n": {"$ref": "#/$defs/address"}}},
            "then": {"required": ["phone"]},
            "else": {"required": ["n"]}
        });
        let listed = portable_with_dialect(&declared);
        assert_eq!(listed["allOf"], declared["allOf"]);
        assert_eq!(listed["then"], declared["then"]);
        assert_eq!(listed["else"], declared["else"]);
        assert_eq!(listed["$defs"]["address"]["$anchor"], "addressDef");
        // Inside them, references are inlined as everywhere else.
        assert_eq!(
            listed["if"]["properties"]["n"],
            json!({"$anchor": "addressDef", "type": "object"})
        );
    }
}
