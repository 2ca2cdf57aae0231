//! The input schema a tool describes itself with: schemars' schema of the
//! arguments, with every object closed to properties it does not declare.
//!
//! A serde struct ignores fields it does not know, so without this two argument
//! objects that differ only in an unknown property would be two calls to the host
//! (two invocation keys) and one call to the tool. Closed, the host refuses the
//! unknown property instead, naming it.

use serde_json::{Map, Value};

/// Keywords whose subschemas describe the same instance as the schema holding them.
const IN_PLACE: &[&str] = &["$ref", "allOf", "anyOf", "oneOf", "if", "then", "else"];

/// Keywords that say which properties an object may have.
const DECLARES: &[&str] = &[
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
];

/// The JSON Schema of `T` as [`crate::Tool::Args`], closed as [`close_objects`] says,
/// its 64-bit integers taking their digits as a string too ([`ids_as_digits`]).
pub(crate) fn input_schema<T: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    close_objects(&mut schema);
    ids_as_digits(&mut schema);
    schema
}

/// Keywords whose values are data, not schemas.
const DATA: &[&str] = &["const", "enum", "default", "examples"];

/// Lets every `u64` and `i64` (schemars' `"format": "uint64"`/`"int64"`) come as its
/// decimal digits in a string as well as a number: `"type"` gets `"string"` beside
/// `"integer"`, and a `pattern` of canonical digits. A model told to send big ids as
/// strings (as APIs do: Twitter's `id_str`) then reaches the tool exactly, where a
/// client that parses JSON numbers as doubles would have rounded the number. The host
/// turns such a string into the number before the key is computed and before the
/// tool is handed it, so the two spellings are one call and the tool's `u64` parses
/// either.
pub(crate) fn ids_as_digits(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let pattern = match map.get("format").and_then(Value::as_str) {
                Some("uint64") => Some("^(0|[1-9][0-9]*)$"),
                Some("int64") => Some("^(0|-?[1-9][0-9]*)$"),
                _ => None,
            };
            if let Some(pattern) = pattern
                && widen_integer(map)
            {
                map.entry("pattern")
                    .or_insert_with(|| Value::String(pattern.to_owned()));
            }
            for (key, value) in map.iter_mut() {
                if !DATA.contains(&key.as_str()) {
                    ids_as_digits(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(ids_as_digits),
        _ => {}
    }
}

/// `"type": "integer"` (or a list with it) gets `"string"` beside it; whether it did.
fn widen_integer(map: &mut Map<String, Value>) -> bool {
    let string = || Value::String("string".to_owned());
    match map.get_mut("type") {
        Some(Value::String(name)) if name == "integer" => {
            map.insert(
                "type".to_owned(),
                Value::Array(vec![Value::String("integer".to_owned()), string()]),
            );
            true
        }
        Some(Value::Array(names))
            if names.iter().any(|n| n == "integer") && !names.iter().any(|n| n == "string") =>
        {
            let at = names.iter().position(|n| n == "integer").unwrap_or(0) + 1;
            names.insert(at, string());
            true
        }
        _ => false,
    }
}

/// Adds `additionalProperties: false` to every object schema in `root` (and its
/// `$defs`) that declares `properties` and says nothing about other properties.
///
/// A schema that says anything (`additionalProperties`, `unevaluatedProperties` or
/// `patternProperties`, e.g. `#[schemars(extend("additionalProperties" = true))]`,
/// a map, a `serde_json::Value`) is left as it is. Where an object's properties come
/// from several schemas combined (`#[serde(flatten)]` of an enum, an internally
/// tagged newtype variant whose tag sits next to a `$ref`), the combining schema gets
/// `unevaluatedProperties: false`, which sees all of them, and the parts stay open:
/// closing a part would refuse its siblings' properties. A plain `$ref` elsewhere to
/// a definition kept open that way gets `unevaluatedProperties: false` in its place.
pub(crate) fn close_objects(root: &mut Value) {
    let defs = definitions(root);
    let mut composite = Vec::new();
    let mut walked = Vec::new();
    mark_composite(root, root, true, &mut composite, &mut walked);
    for def in &defs {
        if let Some(schema) = root.pointer(def) {
            mark_composite(root, schema, true, &mut composite, &mut walked);
        }
    }

    close(root, true, &composite);
    for def in defs {
        let plain = !composite.contains(&def);
        if let Some(schema) = root.pointer_mut(&def) {
            close(schema, plain, &composite);
        }
    }
}

/// JSON pointers of the root's `$defs` and `definitions` entries.
fn definitions(root: &Value) -> Vec<String> {
    let mut pointers = Vec::new();
    for keyword in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = root.get(keyword) {
            for name in defs.keys() {
                let name = name.replace('~', "~0").replace('/', "~1");
                pointers.push(format!("/{keyword}/{name}"));
            }
        }
    }
    pointers
}

/// Whether the schemas `map` combines in place may each be closed on their own:
/// only when `map` itself declares no properties and combines in one way only
/// (`$ref`, alternatives in `anyOf`/`oneOf`, or an `allOf` of one).
fn parts_are_plain(map: &Map<String, Value>) -> bool {
    if DECLARES.iter().any(|k| map.contains_key(*k)) {
        return false;
    }
    let combiners: Vec<&str> = IN_PLACE
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    match combiners.as_slice() {
        ["$ref"] | ["anyOf"] | ["oneOf"] => true,
        ["allOf"] => map["allOf"].as_array().is_some_and(|all| all.len() == 1),
        _ => false,
    }
}

/// The subschemas of `map` that describe the same instance (first) and those that
/// describe a property or element of it (second). `$ref` and `not` are not among
/// them: refs are followed by name, and `not` is never closed.
fn children(map: &Map<String, Value>) -> (Vec<&Value>, Vec<&Value>) {
    let (mut same, mut nested) = (Vec::new(), Vec::new());
    for (key, value) in map {
        match key.as_str() {
            "allOf" | "anyOf" | "oneOf" => same.extend(value.as_array().into_iter().flatten()),
            "if" | "then" | "else" => same.push(value),
            "properties" | "patternProperties" => {
                nested.extend(value.as_object().into_iter().flat_map(Map::values));
            }
            "prefixItems" => nested.extend(value.as_array().into_iter().flatten()),
            "items" => match value {
                Value::Array(tuple) => nested.extend(tuple),
                schema => nested.push(schema),
            },
            "additionalProperties" | "unevaluatedProperties" | "additionalItems" | "contains" => {
                nested.push(value);
            }
            _ => {}
        }
    }
    (same, nested)
}

/// Records in `composite` every definition that some schema combines with other
/// schemas in place, directly or through further refs; those must stay open.
fn mark_composite(
    root: &Value,
    schema: &Value,
    plain: bool,
    composite: &mut Vec<String>,
    walked: &mut Vec<String>,
) {
    let Value::Object(map) = schema else { return };
    let parts_plain = plain && parts_are_plain(map);
    if !parts_plain
        && let Some(pointer) = map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .filter(|p| p.starts_with('/'))
    {
        if !composite.iter().any(|c| c == pointer) {
            composite.push(pointer.to_owned());
        }
        if !walked.iter().any(|w| w == pointer) {
            walked.push(pointer.to_owned());
            if let Some(target) = root.pointer(pointer) {
                mark_composite(root, target, false, composite, walked);
            }
        }
    }
    let (same, nested) = children(map);
    for child in same {
        mark_composite(root, child, parts_plain, composite, walked);
    }
    for child in nested {
        mark_composite(root, child, true, composite, walked);
    }
}

/// Closes `schema` if `plain` and it is an object schema that says nothing about
/// undeclared properties, or a plain `$ref` to a definition in `composite`, then its
/// subschemas (not `$defs`, which [`close_objects`] closes by name).
fn close(schema: &mut Value, plain: bool, composite: &[String]) {
    let Value::Object(map) = schema else { return };
    let says_nothing = !DECLARES[1..].iter().any(|k| map.contains_key(*k));
    let combines = IN_PLACE.iter().any(|k| map.contains_key(*k));
    let refs_composite = parts_are_plain(map)
        && map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .is_some_and(|pointer| composite.iter().any(|c| c == pointer));
    if plain
        && says_nothing
        && (map.get("properties").is_some_and(Value::is_object) || refs_composite)
    {
        let keyword = if combines {
            "unevaluatedProperties"
        } else {
            "additionalProperties"
        };
        map.insert(keyword.to_owned(), Value::Bool(false));
    }
    let parts_plain = plain && parts_are_plain(map);
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "allOf" | "anyOf" | "oneOf" => {
                for part in value.as_array_mut().into_iter().flatten() {
                    close(part, parts_plain, composite);
                }
            }
            "if" | "then" | "else" => close(value, parts_plain, composite),
            "properties" | "patternProperties" => {
                for property in value.as_object_mut().into_iter().flat_map(Map::values_mut) {
                    close(property, true, composite);
                }
            }
            "prefixItems" => {
                for item in value.as_array_mut().into_iter().flatten() {
                    close(item, true, composite);
                }
            }
            "items" => match value {
                Value::Array(tuple) => tuple
                    .iter_mut()
                    .for_each(|item| close(item, true, composite)),
                schema => close(schema, true, composite),
            },
            "additionalProperties" | "unevaluatedProperties" | "additionalItems" | "contains" => {
                close(value, true, composite);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Refund {
        order_id: u64,
        #[serde(default = "eur")]
        currency: String,
        reason: Option<String>,
        shipping: Option<Shipping>,
        lines: Vec<Line>,
        tags: BTreeMap<String, String>,
        extra: serde_json::Value,
        #[serde(default)]
        data: serde_json::Map<String, serde_json::Value>,
    }

    fn eur() -> String {
        "EUR".into()
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Shipping {
        speed: String,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Line {
        sku: String,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Ids {
        order: u64,
        delta: i64,
        parent: Option<u64>,
        small: u32,
        #[serde(default = "seven")]
        defaulted: u64,
    }

    fn seven() -> u64 {
        7
    }

    #[test]
    fn a_64_bit_integer_also_takes_its_digits_and_other_integers_do_not() {
        let schema = input_schema::<Ids>();
        let properties = &schema["properties"];
        assert_eq!(
            properties["order"]["type"],
            json!(["integer", "string"]),
            "{schema:#}"
        );
        assert_eq!(properties["order"]["pattern"], "^(0|[1-9][0-9]*)$");
        assert_eq!(properties["delta"]["type"], json!(["integer", "string"]));
        assert_eq!(properties["delta"]["pattern"], "^(0|-?[1-9][0-9]*)$");
        assert_eq!(
            properties["parent"]["type"],
            json!(["integer", "string", "null"])
        );
        assert_eq!(
            properties["defaulted"]["default"], 7,
            "a default stays a number"
        );
        // The opposite case: a 32-bit integer is a number only.
        assert_eq!(properties["small"]["type"], "integer");
        assert!(properties["small"].get("pattern").is_none());
        // The tool's own parse takes the number the host hands it.
        let parsed: Ids = serde_json::from_value(
            json!({ "order": 9007199254740993u64, "delta": -1, "parent": null, "small": 1 }),
        )
        .unwrap();
        assert_eq!(parsed.order, 9007199254740993);
    }

    #[test]
    fn every_struct_is_closed_and_maps_stay_open() {
        let schema = input_schema::<Refund>();
        assert_eq!(schema["additionalProperties"], false, "{schema:#}");
        assert_eq!(schema["$defs"]["Shipping"]["additionalProperties"], false);
        assert_eq!(schema["$defs"]["Line"]["additionalProperties"], false);
        let properties = &schema["properties"];
        assert_eq!(properties["tags"]["additionalProperties"]["type"], "string");
        assert_eq!(properties["extra"], true);
        assert_eq!(properties["data"]["additionalProperties"], true);
        assert_eq!(properties["currency"]["default"], "EUR");
        assert_eq!(properties["reason"]["type"], json!(["string", "null"]));
    }

    /// The rule of all three SDKs: an optional property (an `Option` here) may be
    /// left out or `null`, and its schema says both.
    #[test]
    fn an_option_is_not_required_and_admits_null() {
        let schema = input_schema::<Refund>();
        let required = schema["required"].as_array().unwrap();
        for optional in ["reason", "shipping", "currency", "data"] {
            assert!(
                !required.contains(&json!(optional)),
                "{optional}: {schema:#}"
            );
        }
        assert!(required.contains(&json!("order_id")));
        assert_eq!(
            schema["properties"]["reason"]["type"],
            json!(["string", "null"])
        );
        let shipping = schema["properties"]["shipping"]["anyOf"]
            .as_array()
            .unwrap();
        assert!(shipping.contains(&json!({"type": "null"})), "{schema:#}");
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[schemars(extend("additionalProperties" = true))]
    struct Open {
        a: u32,
    }

    #[test]
    fn an_author_opts_out_by_saying_so() {
        assert_eq!(input_schema::<Open>()["additionalProperties"], true);
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum Action {
        Refund(Line),
        Cancel { at: String },
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Tagged {
        action: Action,
        line: Line,
    }

    #[test]
    fn a_struct_under_a_sibling_tag_stays_open_and_its_user_is_closed() {
        let schema = input_schema::<Tagged>();
        let variants = schema["$defs"]["Action"]["oneOf"].as_array().unwrap();
        let refund = variants
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "Refund")
            .unwrap();
        assert_eq!(refund["$ref"], "#/$defs/Line", "{schema:#}");
        assert_eq!(refund["unevaluatedProperties"], false, "{schema:#}");
        assert!(
            schema["$defs"]["Line"]
                .get("additionalProperties")
                .is_none(),
            "{schema:#}"
        );
        assert_eq!(
            schema["properties"]["line"]["unevaluatedProperties"], false,
            "{schema:#}"
        );
        let cancel = variants
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "Cancel")
            .unwrap();
        assert_eq!(cancel["additionalProperties"], false, "{schema:#}");
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    enum Speed {
        Slow { days: u32 },
        Fast { hours: u32 },
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Flattened {
        order_id: u64,
        #[serde(flatten)]
        speed: Speed,
    }

    #[test]
    fn a_flattened_enum_is_closed_where_its_branches_meet_the_fields() {
        let schema = input_schema::<Flattened>();
        assert_eq!(schema["unevaluatedProperties"], false, "{schema:#}");
        assert!(schema.get("additionalProperties").is_none(), "{schema:#}");
    }

    #[test]
    fn a_second_pass_changes_nothing() {
        let once = input_schema::<Tagged>();
        let mut twice = once.clone();
        close_objects(&mut twice);
        assert_eq!(once, twice);
    }
}
