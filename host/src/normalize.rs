//! Arguments as the tool will see them: normalized against the tool's input JSON
//! Schema before the invocation key is computed, so two argument objects the tool
//! cannot tell apart are one call (DESIGN.md, "Two layers of keys").
//!
//! Three rules, applied through `properties`, `items` and `prefixItems`, local
//! `$ref`s (`#/$defs/...`, `#/definitions/...`), `allOf`, and `anyOf`/`oneOf`:
//!
//! 1. **Defaults.** A declared property that is absent and whose schema has a
//!    `default` gets that default (itself normalized), as serde's
//!    `#[serde(default)]` would give the tool.
//! 2. **Null is absent.** A property whose value is `null` and that the schema does
//!    not require is removed — unless its schema both accepts `null` and has a
//!    default. For a serde `Option` without a default (`"type": ["string", "null"]`)
//!    `null` and absent are both `None`, so the null goes. With a default, the two
//!    differ (`null` is `None`, absent is the default) and the null stays. A
//!    property whose schema does not accept `null` cannot mean anything by it, so
//!    the null is taken for "not given": removed, then rule 1 fills its default.
//! 3. **Undeclared is refused.** Under `additionalProperties: false` (or
//!    `unevaluatedProperties: false`) a property the schema does not declare is an
//!    error naming its path and the declared properties: the tool would ignore it,
//!    and a key over it would make one call two.
//!
//! **Unions.** Of an `anyOf`/`oneOf` (every data-carrying serde enum, `Option<T>`,
//! Pydantic's unions), the branches that can take the value are found by what
//! discriminates them: `type`, `const` and `enum` (values, not only their types),
//! `required`, the same for each property's value, and `additionalProperties`
//! (a branch under which the value has an undeclared property cannot take it). The
//! value is normalized inside each of those branches; if they all give the same
//! result, that is the value (a tagged enum has one branch left, an `Option<T>` one),
//! and if they give different results the call is refused with the path
//! ([`NormalizeError::Ambiguous`]): the tool would read it one way, and another
//! spelling of the same intent could be keyed the other way.
//!
//! 4. **A 64-bit id in digits is the id.** Where the schema of a value says it is a
//!    64-bit integer (`"format": "int64"` or `"uint64"`) that may also come as a
//!    string (`"type"` has both `"integer"` and `"string"`: the form the SDKs write
//!    for 64-bit ids, since a client that parses JSON numbers as doubles rounds them),
//!    a string of its exact decimal digits within the format's range (`"42"`, not
//!    `"042"` nor `"4.2e1"`) becomes that integer, so `"9007199254740993"` and
//!    `9007199254740993` are one call and the tool is handed the number either way.
//!    Any other string is left for the schema check (its `pattern`, and the range).
//!
//! Where a schema is more than that (`if`/`then`/`else`, `not`, dependencies, remote
//! or dynamic refs), the subtree is left as it is: the schema check that follows
//! still judges it. Values of the wrong type are left as they are for the same
//! reason.

use serde_json::{Map, Value};

/// How many `$ref`, `allOf` and `anyOf` hops one value's schema may take before the
/// schema counts as too complex (a cycle of refs that never reaches a value).
const MAX_HOPS: usize = 64;

/// How many union branches one call's arguments may make the normalizer try before
/// the schema counts as too complex (nested untagged unions multiply).
const MAX_BRANCH_TRIES: usize = 4096;

/// Keywords whose meaning the rules cannot follow; a value under one is left as is.
const COMPLEX: &[&str] = &[
    "if",
    "then",
    "else",
    "not",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "$dynamicRef",
    "$recursiveRef",
];

/// Why arguments cannot be normalized against the tool's input schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NormalizeError {
    /// An object under `additionalProperties: false` has a property its schema does
    /// not declare.
    #[error(
        "undeclared property {path}; the tool's schema declares: {}",
        declared_list(declared)
    )]
    Undeclared {
        /// The property's JSON pointer in the arguments, e.g. `/orders/0/coupon`.
        path: String,
        /// The properties the schema declares at that place.
        declared: Vec<String>,
    },
    /// Several `anyOf`/`oneOf` branches can take the value at `path` and normalize it
    /// differently, so its meaning (and its key) is not certain.
    #[error(
        "the value at {} fits {count} alternatives of its schema (anyOf/oneOf) that read it differently; add the property that tells them apart (a tag) or write out the defaults",
        display_path(path)
    )]
    Ambiguous {
        /// The value's JSON pointer in the arguments (empty for the whole object).
        path: String,
        /// How many branches could take it.
        count: usize,
    },
    /// The schema's unions are nested too deeply to try every reading.
    #[error(
        "the tool's schema has too many nested alternatives (anyOf/oneOf) to read the value at {}",
        display_path(path)
    )]
    TooComplex {
        /// The value's JSON pointer in the arguments.
        path: String,
    },
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "the top level"
    } else {
        path
    }
}

fn declared_list(declared: &[String]) -> String {
    if declared.is_empty() {
        "no properties".to_owned()
    } else {
        declared.join(", ")
    }
}

/// Normalizes `args` against the tool's input JSON Schema `schema` (the root, which
/// holds any `$defs`): fills defaults, drops nulls that mean "not given", and refuses
/// undeclared properties, as the module documentation describes.
pub(crate) fn normalize(schema: &Value, args: Value) -> Result<Value, NormalizeError> {
    Normalizer {
        root: schema,
        tries: std::cell::Cell::new(0),
    }
    .value(&[schema], args, &mut String::new())
}

struct Normalizer<'s> {
    root: &'s Value,
    /// Union branches tried so far, bounded by [`MAX_BRANCH_TRIES`].
    tries: std::cell::Cell<usize>,
}

/// The schema objects that apply to one value, and the unions still to choose in.
#[derive(Clone, Default)]
struct Facets<'s> {
    /// Schema objects that apply whatever is chosen.
    maps: Vec<&'s Map<String, Value>>,
    /// Each `anyOf`/`oneOf` of which several branches can take the value.
    choices: Vec<Vec<&'s Value>>,
}

/// What the schemas that apply to one object say about its properties.
#[derive(Default)]
struct ObjectView<'s> {
    /// Each declared property with every schema declared for it, in schema order.
    properties: Vec<(&'s str, Vec<&'s Value>)>,
    required: Vec<&'s str>,
    /// Schemas under `additionalProperties: false`, each with what it declares.
    closed: Vec<&'s Map<String, Value>>,
    /// Some schema says `unevaluatedProperties: false`.
    unevaluated_closed: bool,
    /// Some schema has `patternProperties`: which names it allows is not checked here.
    patterns: bool,
    /// `additionalProperties` schemas, which apply to undeclared properties.
    additional: Vec<&'s Value>,
}

impl<'s> Normalizer<'s> {
    /// Normalizes `value`, to which every schema in `schemas` applies; `path` is its
    /// JSON pointer.
    fn value(
        &self,
        schemas: &[&'s Value],
        value: Value,
        path: &mut String,
    ) -> Result<Value, NormalizeError> {
        if let Value::String(text) = &value {
            return Ok(self.exact_id(schemas, &value, text).unwrap_or(value));
        }
        if !matches!(value, Value::Object(_) | Value::Array(_)) {
            return Ok(value);
        }
        let mut facets = Facets::default();
        for schema in schemas {
            if self.facets(schema, &value, 0, &mut facets).is_none() {
                return Ok(value);
            }
        }
        self.choose(facets, value, path)
    }

    /// Rule 4: the integer `text` spells, where the one reading of the schemas that
    /// apply to it is a 64-bit id that may come as a string; `None` otherwise.
    fn exact_id(&self, schemas: &[&'s Value], value: &Value, text: &str) -> Option<Value> {
        // Most strings are not digits: they skip the walk of their schemas.
        if !canonical_digits(text) {
            return None;
        }
        let mut facets = Facets::default();
        for schema in schemas {
            self.facets(schema, value, 0, &mut facets)?;
        }
        if !facets.choices.is_empty() {
            return None;
        }
        let format = facets.maps.iter().find_map(|map| {
            let format = map.get("format")?.as_str()?;
            takes_an_id_as_digits(map).then_some(format)
        })?;
        exact_integer(text, format)
    }

    /// Normalizes `value` under every reading its unions leave open; one result is
    /// the value, several different ones are [`NormalizeError::Ambiguous`].
    fn choose(
        &self,
        mut facets: Facets<'s>,
        value: Value,
        path: &mut String,
    ) -> Result<Value, NormalizeError> {
        let Some(branches) = facets.choices.pop() else {
            return match value {
                Value::Object(object) => self.object(&facets.maps, object, path).map(Value::Object),
                Value::Array(items) => self.array(&facets.maps, items, path).map(Value::Array),
                other => Ok(other),
            };
        };
        let count = branches.len();
        let mut readings: Vec<Value> = Vec::new();
        let mut refusal = None;
        for branch in branches {
            let tries = self.tries.get() + 1;
            self.tries.set(tries);
            if tries > MAX_BRANCH_TRIES {
                return Err(NormalizeError::TooComplex { path: path.clone() });
            }
            let mut reading = facets.clone();
            if self.facets(branch, &value, 0, &mut reading).is_none() {
                return Ok(value);
            }
            match self.choose(reading, value.clone(), path) {
                Ok(normalized) if !readings.contains(&normalized) => readings.push(normalized),
                Ok(_) => {}
                Err(e @ (NormalizeError::Ambiguous { .. } | NormalizeError::TooComplex { .. })) => {
                    return Err(e);
                }
                Err(e) => {
                    refusal.get_or_insert(e);
                }
            }
        }
        match (readings.pop(), readings.is_empty()) {
            (Some(only), true) => Ok(only),
            (Some(_), false) => Err(NormalizeError::Ambiguous {
                path: path.clone(),
                count,
            }),
            // No branch takes it: the first branch's reason, else the schema check's.
            (None, _) => refusal.map_or(Ok(value), Err),
        }
    }

    /// Collects into `out` the schema objects that apply to `value` through `schema`:
    /// itself, its `$ref` target, its `allOf` members, and the one `anyOf`/`oneOf`
    /// branch that can take the value, or the branches to choose from where several
    /// can. `None` if the schema is too complex to follow or no branch takes it.
    fn facets(
        &self,
        schema: &'s Value,
        value: &Value,
        hops: usize,
        out: &mut Facets<'s>,
    ) -> Option<()> {
        if hops > MAX_HOPS {
            return None;
        }
        let map = match schema {
            Value::Bool(true) => return Some(()),
            Value::Object(map) => map,
            _ => return None,
        };
        if COMPLEX.iter().any(|k| map.contains_key(*k)) {
            return None;
        }
        out.maps.push(map);
        if let Some(reference) = map.get("$ref") {
            self.facets(self.resolve(reference)?, value, hops + 1, out)?;
        }
        if let Some(all) = map.get("allOf") {
            for member in all.as_array()? {
                self.facets(member, value, hops + 1, out)?;
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(keyword) {
                let fitting: Vec<&'s Value> = branches
                    .as_array()?
                    .iter()
                    .filter(|branch| self.may_accept(branch, value, hops + 1))
                    .collect();
                if fitting.len() < branches.as_array()?.len()
                    && crate::mutants::on(crate::mutants::Mutant::UnionsUntouched)
                {
                    return None;
                }
                match fitting.as_slice() {
                    [] => return None,
                    [only] => self.facets(only, value, hops + 1, out)?,
                    _ => out.choices.push(fitting),
                }
            }
        }
        Some(())
    }

    /// Whether `schema` might accept `value` once normalized, judged by `type`,
    /// `const` and `enum` (by value), an object's `required` properties and its
    /// properties' values in turn, through refs and composition. Errs toward `true`:
    /// a `null` for a property that is not required may be dropped, so it fits.
    fn may_accept(&self, schema: &'s Value, value: &Value, hops: usize) -> bool {
        let map = match schema {
            Value::Bool(accepts) => return *accepts,
            Value::Object(map) => map,
            _ => return true,
        };
        if hops > MAX_HOPS {
            return true;
        }
        if let Some(ty) = map.get("type") {
            let fits = match ty {
                Value::String(name) => type_fits(name, value),
                Value::Array(names) => names
                    .iter()
                    .any(|n| n.as_str().is_some_and(|n| type_fits(n, value))),
                _ => true,
            };
            if !fits {
                return false;
            }
        }
        if map.get("const").is_some_and(|c| !json_eq(c, value)) {
            return false;
        }
        if let Some(Value::Array(options)) = map.get("enum")
            && !options.iter().any(|o| json_eq(o, value))
        {
            return false;
        }
        if let Value::Object(object) = value {
            let required: Vec<&str> = match map.get("required") {
                Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if required.iter().any(|name| !object.contains_key(*name)) {
                return false;
            }
            if let Some(Value::Object(properties)) = map.get("properties") {
                let misfit = object.iter().any(|(name, item)| {
                    let droppable = item.is_null() && !required.contains(&name.as_str());
                    properties
                        .get(name)
                        .is_some_and(|s| !droppable && !self.may_accept(s, item, hops + 1))
                });
                if misfit {
                    return false;
                }
            }
        }
        if let Some(target) = map.get("$ref").and_then(|r| self.resolve(r))
            && !self.may_accept(target, value, hops + 1)
        {
            return false;
        }
        if let Some(Value::Array(all)) = map.get("allOf")
            && !all.iter().all(|s| self.may_accept(s, value, hops + 1))
        {
            return false;
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(keyword)
                && !branches.iter().any(|s| self.may_accept(s, value, hops + 1))
            {
                return false;
            }
        }
        true
    }

    /// The schema a local `$ref` (`#`, `#/$defs/Name`, any `#/` pointer) names.
    fn resolve(&self, reference: &Value) -> Option<&'s Value> {
        match reference.as_str()? {
            "#" => Some(self.root),
            r => self.root.pointer(r.strip_prefix('#')?),
        }
    }

    /// The `default` of a property's schema, looked up through `$ref`s; the
    /// outermost wins, as the schema nearest the property is the most specific.
    fn default_of(&self, schema: &'s Value, hops: usize) -> Option<&'s Value> {
        let map = schema.as_object()?;
        if let Some(default) = map.get("default") {
            return Some(default);
        }
        if hops > MAX_HOPS {
            return None;
        }
        self.default_of(self.resolve(map.get("$ref")?)?, hops + 1)
    }

    fn view(&self, facets: &[&'s Map<String, Value>]) -> ObjectView<'s> {
        let mut view = ObjectView::default();
        for facet in facets {
            if let Some(Value::Object(properties)) = facet.get("properties") {
                for (name, schema) in properties {
                    match view.properties.iter_mut().find(|(n, _)| n == name) {
                        Some((_, schemas)) => schemas.push(schema),
                        None => view.properties.push((name, vec![schema])),
                    }
                }
            }
            if let Some(Value::Array(required)) = facet.get("required") {
                view.required
                    .extend(required.iter().filter_map(Value::as_str));
            }
            view.patterns |= facet.contains_key("patternProperties");
            match facet.get("additionalProperties") {
                Some(Value::Bool(false)) => view.closed.push(facet),
                Some(schema @ Value::Object(_)) => view.additional.push(schema),
                _ => {}
            }
            view.unevaluated_closed |=
                facet.get("unevaluatedProperties") == Some(&Value::Bool(false));
        }
        view
    }

    fn object(
        &self,
        facets: &[&'s Map<String, Value>],
        mut object: Map<String, Value>,
        path: &mut String,
    ) -> Result<Map<String, Value>, NormalizeError> {
        let view = self.view(facets);
        let declared = |name: &str| view.properties.iter().find(|(n, _)| *n == name);

        if !view.patterns {
            let declares = |facet: &Map<String, Value>, name: &str| {
                facet
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.contains_key(name))
            };
            let undeclared = object.keys().find(|name| {
                view.closed.iter().any(|facet| !declares(facet, name))
                    || (view.unevaluated_closed
                        && view.additional.is_empty()
                        && declared(name).is_none())
            });
            if let Some(name) = undeclared {
                let mut declared: Vec<String> = view
                    .properties
                    .iter()
                    .map(|(n, _)| (*n).to_owned())
                    .collect();
                declared.sort();
                return Err(NormalizeError::Undeclared {
                    path: child_path(path, name),
                    declared,
                });
            }
        }

        // Rule 2, then rule 1: a null taken for "not given" gets the default.
        for (name, schemas) in &view.properties {
            if object.get(*name) != Some(&Value::Null) || view.required.contains(name) {
                continue;
            }
            let has_default = schemas.iter().any(|s| self.default_of(s, 0).is_some());
            let accepts_null = schemas.iter().all(|s| self.may_accept(s, &Value::Null, 0));
            if !(accepts_null && has_default) {
                object.remove(*name);
            }
        }
        for (name, schemas) in &view.properties {
            if !object.contains_key(*name)
                && !crate::mutants::on(crate::mutants::Mutant::SkippedDefault)
                && let Some(default) = schemas.iter().find_map(|s| self.default_of(s, 0))
            {
                object.insert((*name).to_owned(), default.clone());
            }
        }

        let mut normalized = Map::new();
        for (name, value) in object {
            let schemas = match declared(&name) {
                Some((_, schemas)) => schemas.as_slice(),
                None if !view.patterns => view.additional.as_slice(),
                None => &[],
            };
            let value = if schemas.is_empty() {
                value
            } else {
                let len = path.len();
                push_segment(path, &name);
                let value = self.value(schemas, value, path);
                path.truncate(len);
                value?
            };
            normalized.insert(name, value);
        }
        Ok(normalized)
    }

    fn array(
        &self,
        facets: &[&'s Map<String, Value>],
        items: Vec<Value>,
        path: &mut String,
    ) -> Result<Vec<Value>, NormalizeError> {
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let schemas: Vec<&'s Value> =
                    facets.iter().filter_map(|f| item_schema(f, i)).collect();
                if schemas.is_empty() {
                    return Ok(item);
                }
                let len = path.len();
                push_segment(path, &i.to_string());
                let item = self.value(&schemas, item, path);
                path.truncate(len);
                item
            })
            .collect()
    }
}

/// Whether a schema's `type` names both `integer` and `string`: with a 64-bit
/// `format`, an id that may come as its digits (rule 4; the form the SDKs write).
pub(crate) fn takes_an_id_as_digits(schema: &Map<String, Value>) -> bool {
    let Some(Value::Array(types)) = schema.get("type") else {
        return false;
    };
    let named = |name: &str| types.iter().any(|t| t.as_str() == Some(name));
    named("integer") && named("string")
}

/// `text` as the integer of `format` (`int64`, `uint64`) it spells in canonical
/// decimal digits (no sign on zero, no leading zero, no `+`), if that integer is in the
/// format's range.
fn exact_integer(text: &str, format: &str) -> Option<Value> {
    if !canonical_digits(text) {
        return None;
    }
    match format {
        "uint64" => text.parse::<u64>().ok().map(Value::from),
        "int64" => text.parse::<i64>().ok().map(Value::from),
        _ => None,
    }
}

/// Whether `text` is an integer's canonical decimal digits: an optional `-`, no
/// leading zero, not `-0`.
fn canonical_digits(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0"
}

/// The schema that `facet` gives the array element at `index`: `prefixItems[index]`
/// or `items` (2020-12), or draft 7's tuple `items[index]` or `additionalItems`.
fn item_schema(facet: &Map<String, Value>, index: usize) -> Option<&Value> {
    match (facet.get("prefixItems"), facet.get("items")) {
        (Some(Value::Array(prefix)), _) if index < prefix.len() => Some(&prefix[index]),
        (_, Some(Value::Array(tuple))) => tuple.get(index).or_else(|| facet.get("additionalItems")),
        (_, items) => items,
    }
}

/// Whether `value` has the JSON Schema type `name`.
fn type_fits(name: &str, value: &Value) -> bool {
    match (name, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// An integer-valued number exactly; `None` for a double.
fn as_integer(n: &serde_json::Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// JSON equality as JSON Schema's `const` and `enum` use it: numbers by value
/// (`1` and `1.0` are equal), objects regardless of member order.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (as_integer(x), as_integer(y)) {
            (Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}

/// `path` followed by the JSON pointer segment `name` (with `~` and `/` escaped).
fn child_path(path: &str, name: &str) -> String {
    let mut child = path.to_owned();
    push_segment(&mut child, name);
    child
}

fn push_segment(path: &mut String, name: &str) {
    path.push('/');
    path.push_str(&name.replace('~', "~0").replace('/', "~1"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A 64-bit id as the SDKs write it: a number, or its digits as a string.
    fn id_schema(format: &str, nullable: bool) -> Value {
        let types = if nullable {
            json!(["integer", "string", "null"])
        } else {
            json!(["integer", "string"])
        };
        json!({
            "type": "object",
            "properties": {
                "id": { "type": types, "format": format, "pattern": "^(0|-?[1-9][0-9]*)$" },
                "label": { "type": "string" }
            },
            "additionalProperties": false
        })
    }

    #[test]
    fn a_64_bit_id_in_exact_digits_is_the_id_and_anything_else_stays_a_string() {
        let schema = id_schema("uint64", false);
        let as_string = normalize(&schema, json!({ "id": "9007199254740993" })).unwrap();
        let as_number: Value = serde_json::from_str(r#"{"id":9007199254740993}"#).unwrap();
        assert_eq!(as_string, as_number, "one call, the tool handed the number");
        assert_eq!(
            crate::jcs::canonicalize(&as_string).unwrap(),
            r#"{"id":9007199254740993}"#,
            "exact digits, not a double's"
        );
        assert_eq!(
            normalize(&schema, json!({ "id": "18446744073709551615" })).unwrap(),
            json!({ "id": u64::MAX })
        );
        // Not the canonical digits of an in-range id: left for the schema check.
        for kept in [
            "18446744073709551616",
            "-1",
            "007",
            "+7",
            "7.0",
            "1e3",
            "",
            "-0",
            "seven",
        ] {
            assert_eq!(
                normalize(&schema, json!({ "id": kept })).unwrap(),
                json!({ "id": kept }),
                "{kept:?}"
            );
        }
        let signed = id_schema("int64", true);
        assert_eq!(
            normalize(&signed, json!({ "id": "-9223372036854775808" })).unwrap(),
            json!({ "id": i64::MIN })
        );
        assert_eq!(
            normalize(&signed, json!({ "id": null })).unwrap(),
            json!({}),
            "a null id is still absent"
        );
        // The opposite case: a string property that is not a 64-bit id keeps its digits.
        assert_eq!(
            normalize(&schema, json!({ "label": "42" })).unwrap(),
            json!({ "label": "42" })
        );
        let integer_only = json!({
            "type": "object",
            "properties": { "id": { "type": "integer", "format": "uint64" } }
        });
        assert_eq!(
            normalize(&integer_only, json!({ "id": "42" })).unwrap(),
            json!({ "id": "42" }),
            "a schema that takes no string is not widened by the host: the check refuses it"
        );
    }

    /// The input schema the `refund` example tool describes itself with (schemars 1,
    /// from `justonce tools --json`), closed by the guest SDK.
    fn refund_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "description": "The arguments of `refund`.",
            "type": "object",
            "properties": {
                "order_id": {
                    "description": "The order to refund.",
                    "type": "integer", "format": "uint64", "minimum": 0
                },
                "amount_cents": {
                    "description": "How much to refund, in cents.",
                    "type": "integer", "format": "uint64", "minimum": 1
                },
                "currency": {
                    "description": "The ISO 4217 currency code of the amount.",
                    "type": "string",
                    "default": "EUR"
                },
                "reason": {
                    "description": "Why the order is refunded, for the payment provider's records.",
                    "type": ["string", "null"]
                }
            },
            "additionalProperties": false,
            "required": ["order_id", "amount_cents"]
        })
    }

    /// The input schema of the `send_receipt` example tool: an array of `$defs` refs.
    fn send_receipt_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "description": "The arguments of `send_receipt`.",
            "type": "object",
            "properties": {
                "orders": {
                    "description": "The orders to send receipts for. An entry repeated verbatim gets one receipt.",
                    "type": "array",
                    "items": { "$ref": "#/$defs/Order" },
                    "minItems": 1,
                    "maxItems": 50
                }
            },
            "additionalProperties": false,
            "required": ["orders"],
            "$defs": {
                "Order": {
                    "description": "One paid order.",
                    "type": "object",
                    "properties": {
                        "order_id": {
                            "description": "The order's number.",
                            "type": "integer", "format": "uint64", "minimum": 0
                        },
                        "email": { "description": "Where to send the receipt.", "type": "string" },
                        "amount_cents": {
                            "description": "The amount paid, in cents.",
                            "type": "integer", "format": "uint64", "minimum": 0
                        }
                    },
                    "additionalProperties": false,
                    "required": ["order_id", "email", "amount_cents"]
                }
            }
        })
    }

    /// The input schema of the `notify` example tool: a `serde_json::Map` field with
    /// `#[serde(default)]`, an open object.
    fn notify_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "description": "The arguments of `notify`.",
            "type": "object",
            "properties": {
                "event": {
                    "description": "What happened, such as `refund.issued`.",
                    "type": "string", "minLength": 1, "maxLength": 100
                },
                "data": {
                    "description": "Details of the event for the receiver.",
                    "type": "object",
                    "additionalProperties": true,
                    "default": {}
                }
            },
            "additionalProperties": false,
            "required": ["event"]
        })
    }

    fn normalized(schema: &Value, args: Value) -> Value {
        normalize(schema, args).expect("normalizes")
    }

    #[test]
    fn refund_with_default_and_null_written_out_is_the_same_call() {
        let schema = refund_schema();
        let terse = normalized(&schema, json!({"order_id": 1, "amount_cents": 5}));
        let verbose = normalized(
            &schema,
            json!({"order_id": 1, "amount_cents": 5, "currency": "EUR", "reason": null}),
        );
        assert_eq!(terse, verbose);
        assert_eq!(
            terse,
            json!({"order_id": 1, "amount_cents": 5, "currency": "EUR"})
        );
    }

    #[test]
    fn refund_in_another_currency_is_another_call() {
        let schema = refund_schema();
        let eur = normalized(&schema, json!({"order_id": 1, "amount_cents": 5}));
        let usd = normalized(
            &schema,
            json!({"order_id": 1, "amount_cents": 5, "currency": "USD"}),
        );
        assert_ne!(eur, usd);
        assert_eq!(usd["currency"], "USD");
        let with_reason = normalized(
            &schema,
            json!({"order_id": 1, "amount_cents": 5, "reason": "damaged"}),
        );
        assert_eq!(with_reason["reason"], "damaged");
    }

    #[test]
    fn notify_without_data_or_with_null_data_is_notify_with_empty_data() {
        let schema = notify_schema();
        let expected = json!({"event": "refund.issued", "data": {}});
        for args in [
            json!({"event": "refund.issued"}),
            json!({"event": "refund.issued", "data": {}}),
            json!({"event": "refund.issued", "data": null}),
        ] {
            assert_eq!(normalized(&schema, args.clone()), expected, "{args}");
        }
        // Inside an open map a null is a value like any other.
        let args = json!({"event": "refund.issued", "data": {"note": null}});
        assert_eq!(normalized(&schema, args.clone()), args);
    }

    #[test]
    fn absent_property_gets_its_default() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": { "type": "integer", "default": 3 },
                "tags": { "type": "array", "items": { "type": "string" }, "default": [] },
                "note": { "type": "string" }
            }
        });
        assert_eq!(normalized(&schema, json!({})), json!({"n": 3, "tags": []}));
        assert_eq!(
            normalized(&schema, json!({"n": 4})),
            json!({"n": 4, "tags": []})
        );
    }

    #[test]
    fn null_for_an_optional_property_is_leaving_it_out() {
        let schema = refund_schema();
        assert_eq!(
            normalized(
                &schema,
                json!({"order_id": 1, "amount_cents": 5, "reason": null})
            ),
            normalized(&schema, json!({"order_id": 1, "amount_cents": 5})),
        );
    }

    #[test]
    fn null_for_a_property_that_cannot_be_null_takes_its_default() {
        let schema = refund_schema();
        let args = json!({"order_id": 1, "amount_cents": 5, "currency": null});
        assert_eq!(normalized(&schema, args)["currency"], "EUR");
    }

    #[test]
    fn null_keeps_its_meaning_where_it_differs_from_the_default() {
        // `#[serde(default = "...")] cc: Option<String>`: null is None, absent is the default.
        let schema = json!({
            "type": "object",
            "properties": {
                "cc": { "type": ["string", "null"], "default": "audit@example.com" }
            }
        });
        assert_eq!(
            normalized(&schema, json!({"cc": null})),
            json!({"cc": null})
        );
        assert_eq!(
            normalized(&schema, json!({})),
            json!({"cc": "audit@example.com"})
        );
    }

    #[test]
    fn null_for_a_required_property_is_left_to_the_schema_check() {
        let schema = json!({
            "type": "object",
            "properties": { "reason": { "type": ["string", "null"] } },
            "required": ["reason"]
        });
        assert_eq!(
            normalized(&schema, json!({"reason": null})),
            json!({"reason": null})
        );
    }

    #[test]
    fn undeclared_property_is_refused_with_its_path_and_the_declared_ones() {
        let err = normalize(
            &refund_schema(),
            json!({"order_id": 1, "amount_cents": 5, "note": "x"}),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "undeclared property /note; the tool's schema declares: amount_cents, currency, order_id, reason"
        );
    }

    #[test]
    fn undeclared_property_is_kept_where_the_schema_allows_it() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "integer" } }
        });
        assert_eq!(
            normalized(&schema, json!({"a": 1, "b": null})),
            json!({"a": 1, "b": null})
        );
    }

    #[test]
    fn nested_objects_are_normalized() {
        let schema = json!({
            "type": "object",
            "properties": {
                "customer": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string" },
                        "locale": { "type": "string", "default": "en" },
                        "nickname": { "type": ["string", "null"] }
                    },
                    "additionalProperties": false,
                    "required": ["name"]
                }
            },
            "additionalProperties": false
        });
        assert_eq!(
            normalized(
                &schema,
                json!({"customer": {"name": "Ada", "nickname": null}})
            ),
            json!({"customer": {"name": "Ada", "locale": "en"}})
        );
        let err = normalize(&schema, json!({"customer": {"name": "Ada", "age": 36}})).unwrap_err();
        assert_eq!(
            err,
            NormalizeError::Undeclared {
                path: "/customer/age".into(),
                declared: vec!["locale".into(), "name".into(), "nickname".into()],
            }
        );
    }

    #[test]
    fn arrays_of_defs_refs_are_normalized_element_by_element() {
        let schema = send_receipt_schema();
        let order = json!({"order_id": 7, "email": "a@example.com", "amount_cents": 100});
        assert_eq!(
            normalized(&schema, json!({"orders": [order.clone()]})),
            json!({"orders": [order]})
        );
        let mut extra = order.clone();
        extra["coupon"] = json!("SAVE");
        let err = normalize(&schema, json!({"orders": [order, extra]})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "undeclared property /orders/1/coupon; the tool's schema declares: amount_cents, email, order_id"
        );
    }

    #[test]
    fn defaults_and_nulls_inside_defs_refs_and_options_of_them() {
        // `Option<Shipping>` is schemars' `anyOf: [{$ref}, {type: null}]`.
        let schema = json!({
            "type": "object",
            "properties": {
                "shipping": {
                    "anyOf": [{ "$ref": "#/$defs/Shipping" }, { "type": "null" }]
                },
                "billing": { "$ref": "#/definitions/Shipping" }
            },
            "additionalProperties": false,
            "$defs": {
                "Shipping": {
                    "type": "object",
                    "properties": {
                        "speed": { "type": "string", "default": "standard" },
                        "note": { "type": ["string", "null"] }
                    },
                    "additionalProperties": false
                }
            },
            "definitions": {
                "Shipping": { "$ref": "#/$defs/Shipping" }
            }
        });
        assert_eq!(
            normalized(
                &schema,
                json!({"shipping": {"note": null}, "billing": {}, })
            ),
            json!({
                "shipping": {"speed": "standard"},
                "billing": {"speed": "standard"}
            })
        );
        assert_eq!(
            normalized(&schema, json!({"shipping": null})),
            json!({}),
            "Option<Shipping> of null is absent"
        );
        let err = normalize(&schema, json!({"billing": {"fast": true}})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "undeclared property /billing/fast; the tool's schema declares: note, speed"
        );
    }

    #[test]
    fn an_inserted_default_is_normalized_too() {
        let schema = json!({
            "type": "object",
            "properties": {
                "options": {
                    "$ref": "#/$defs/Options",
                    "default": { "retries": 1, "label": null }
                }
            },
            "$defs": {
                "Options": {
                    "type": "object",
                    "properties": {
                        "retries": { "type": "integer" },
                        "label": { "type": ["string", "null"] }
                    }
                }
            }
        });
        assert_eq!(
            normalized(&schema, json!({})),
            normalized(&schema, json!({"options": {"retries": 1}}))
        );
    }

    #[test]
    fn all_of_members_are_merged() {
        let schema = json!({
            "allOf": [
                { "type": "object", "properties": { "a": { "type": "integer", "default": 1 } } },
                { "properties": { "b": { "type": ["string", "null"] } } }
            ]
        });
        assert_eq!(normalized(&schema, json!({"b": null})), json!({"a": 1}));
    }

    #[test]
    fn unevaluated_properties_false_refuses_what_no_member_declares() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "integer" } },
            "allOf": [{ "properties": { "b": { "type": "integer" } } }],
            "unevaluatedProperties": false
        });
        assert_eq!(
            normalized(&schema, json!({"a": 1, "b": 2})),
            json!({"a": 1, "b": 2})
        );
        let err = normalize(&schema, json!({"a": 1, "c": 2})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "undeclared property /c; the tool's schema declares: a, b"
        );
    }

    /// An internally tagged enum as schemars writes it (`#[serde(tag = "kind")]`).
    fn tagged_action_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "const": "refund" },
                                "note": { "type": ["string", "null"] }
                            },
                            "required": ["kind"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": { "type": "string", "const": "cancel" },
                                "at": { "type": "string", "default": "now" }
                            },
                            "required": ["kind"],
                            "additionalProperties": false
                        }
                    ]
                }
            }
        })
    }

    #[test]
    fn tagged_enum_defaults_are_filled_in_the_variant_the_tag_names() {
        let schema = tagged_action_schema();
        let left_out = normalized(&schema, json!({"action": {"kind": "cancel"}}));
        let written = normalized(&schema, json!({"action": {"kind": "cancel", "at": "now"}}));
        assert_eq!(left_out, json!({"action": {"kind": "cancel", "at": "now"}}));
        assert_eq!(left_out, written);
        // Another variant is another call, and its nulls are dropped inside it.
        assert_eq!(
            normalized(&schema, json!({"action": {"kind": "refund", "note": null}})),
            json!({"action": {"kind": "refund"}})
        );
        // An undeclared property inside the chosen variant is refused with its path.
        let err =
            normalize(&schema, json!({"action": {"kind": "cancel", "extra": 1}})).unwrap_err();
        assert!(
            matches!(&err, NormalizeError::Undeclared { path, .. } if path == "/action/extra"),
            "{err}"
        );
    }

    #[test]
    fn externally_and_adjacently_tagged_enums_choose_by_required_and_const() {
        let external = json!({
            "oneOf": [
                { "type": "string", "enum": ["Stop"] },
                {
                    "type": "object",
                    "properties": { "Move": {
                        "type": "object",
                        "properties": { "speed": { "type": "integer", "default": 1 } },
                        "additionalProperties": false
                    } },
                    "required": ["Move"],
                    "additionalProperties": false
                },
                {
                    "type": "object",
                    "properties": { "Turn": {
                        "type": "object",
                        "properties": { "degrees": { "type": "integer", "default": 90 } },
                        "additionalProperties": false
                    } },
                    "required": ["Turn"],
                    "additionalProperties": false
                }
            ]
        });
        assert_eq!(
            normalized(&external, json!({"Turn": {}})),
            json!({"Turn": {"degrees": 90}})
        );
        assert_eq!(normalized(&external, json!("Stop")), json!("Stop"));
        let adjacent = json!({
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "t": { "const": "a" },
                        "c": { "type": "object", "properties": { "n": { "default": 0 } } }
                    },
                    "required": ["t", "c"]
                },
                {
                    "type": "object",
                    "properties": {
                        "t": { "const": "b" },
                        "c": { "type": "object", "properties": { "m": { "default": 1 } } }
                    },
                    "required": ["t", "c"]
                }
            ]
        });
        assert_eq!(
            normalized(&adjacent, json!({"t": "b", "c": {}})),
            json!({"t": "b", "c": {"m": 1}})
        );
    }

    #[test]
    fn untagged_branches_that_read_a_value_alike_are_one_reading() {
        // `A { x }` and `B { x, y: Option<_> }`: {x: 1} is read alike by both.
        let schema = json!({
            "anyOf": [
                { "type": "object", "properties": { "x": { "type": "integer" } },
                  "required": ["x"], "additionalProperties": false },
                { "type": "object", "properties": { "x": { "type": "integer" },
                  "y": { "type": ["integer", "null"] } },
                  "required": ["x"], "additionalProperties": false }
            ]
        });
        assert_eq!(
            normalized(&schema, json!({"x": 1, "y": null})),
            json!({"x": 1})
        );
        // `y` is declared by B alone, so only B takes it.
        assert_eq!(
            normalized(&schema, json!({"x": 1, "y": 2})),
            json!({"x": 1, "y": 2})
        );
    }

    #[test]
    fn untagged_branches_that_read_a_value_differently_are_refused_with_the_path() {
        let schema = json!({
            "type": "object",
            "properties": { "item": {
                "anyOf": [
                    { "type": "object", "properties": { "x": { "type": "integer" } },
                      "additionalProperties": false },
                    { "type": "object", "properties": { "x": { "type": "integer" },
                      "y": { "type": "integer", "default": 0 } },
                      "additionalProperties": false }
                ]
            } }
        });
        let err = normalize(&schema, json!({"item": {"x": 1}})).unwrap_err();
        assert_eq!(
            err,
            NormalizeError::Ambiguous {
                path: "/item".into(),
                count: 2
            }
        );
        assert!(err.to_string().contains("/item"), "{err}");
        // Written out, only one branch can take it.
        assert_eq!(
            normalized(&schema, json!({"item": {"x": 1, "y": 0}})),
            json!({"item": {"x": 1, "y": 0}})
        );
    }

    #[test]
    fn enums_inside_options_arrays_and_maps_are_normalized() {
        let schema = json!({
            "type": "object",
            "properties": {
                "maybe": { "anyOf": [ { "$ref": "#/$defs/Action" }, { "type": "null" } ] },
                "list": { "type": "array", "items": { "$ref": "#/$defs/Action" } },
                "map": { "type": "object", "additionalProperties": { "$ref": "#/$defs/Action" } }
            },
            "$defs": { "Action": tagged_action_schema()["properties"]["action"].clone() }
        });
        let args = json!({
            "maybe": {"kind": "cancel"},
            "list": [{"kind": "refund", "note": null}, {"kind": "cancel", "at": "later"}],
            "map": {"k": {"kind": "cancel"}}
        });
        assert_eq!(
            normalized(&schema, args),
            json!({
                "maybe": {"kind": "cancel", "at": "now"},
                "list": [{"kind": "refund"}, {"kind": "cancel", "at": "later"}],
                "map": {"k": {"kind": "cancel", "at": "now"}}
            })
        );
    }

    #[test]
    fn discriminators_compare_numbers_by_value() {
        let schema = json!({
            "oneOf": [
                { "type": "object", "properties": { "v": { "const": 1.0 },
                  "a": { "default": "one" } }, "required": ["v"] },
                { "type": "object", "properties": { "v": { "enum": [2] },
                  "b": { "default": "two" } }, "required": ["v"] }
            ]
        });
        assert_eq!(
            normalized(&schema, json!({"v": 1})),
            json!({"v": 1, "a": "one"})
        );
        assert_eq!(
            normalized(&schema, json!({"v": 2})),
            json!({"v": 2, "b": "two"})
        );
    }

    #[test]
    fn complex_keywords_leave_the_subtree_as_it_is() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": ["string", "null"], "default": "x" } },
            "if": { "required": ["a"] },
            "then": { "required": ["b"] },
            "additionalProperties": false
        });
        let args = json!({"z": null});
        assert_eq!(normalized(&schema, args.clone()), args);
    }

    #[test]
    fn additional_properties_schemas_apply_to_undeclared_properties() {
        // `HashMap<String, Item>`.
        let schema = json!({
            "type": "object",
            "additionalProperties": { "$ref": "#/$defs/Item" },
            "$defs": {
                "Item": {
                    "type": "object",
                    "properties": { "qty": { "type": "integer", "default": 1 } },
                    "additionalProperties": false
                }
            }
        });
        assert_eq!(
            normalized(&schema, json!({"x": {}, "y": {"qty": 2}})),
            json!({"x": {"qty": 1}, "y": {"qty": 2}})
        );
        let err = normalize(&schema, json!({"x": {"q": 1}})).unwrap_err();
        assert!(
            err.to_string().starts_with("undeclared property /x/q;"),
            "{err}"
        );
    }

    #[test]
    fn tuples_use_prefix_items() {
        let schema = json!({
            "type": "array",
            "prefixItems": [
                { "type": "object", "properties": { "a": { "type": "integer", "default": 0 } } }
            ],
            "items": { "type": "object", "properties": { "b": { "type": ["integer", "null"] } } }
        });
        assert_eq!(
            normalized(&schema, json!([{}, {"b": null}])),
            json!([{"a": 0}, {}])
        );
    }

    #[test]
    fn ref_cycles_and_foreign_refs_are_left_as_they_are() {
        let cycle = json!({ "$ref": "#/$defs/A", "$defs": { "A": { "$ref": "#/$defs/A" } } });
        assert_eq!(normalized(&cycle, json!({"a": null})), json!({"a": null}));
        let remote = json!({ "$ref": "https://example.com/schema.json" });
        assert_eq!(normalized(&remote, json!({"a": null})), json!({"a": null}));
    }

    #[test]
    fn recursive_schemas_normalize_every_level() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "note": { "type": ["string", "null"] },
                "children": { "type": "array", "items": { "$ref": "#" }, "default": [] }
            },
            "additionalProperties": false
        });
        assert_eq!(
            normalized(
                &schema,
                json!({"name": "a", "children": [{"name": "b", "note": null}]})
            ),
            json!({"name": "a", "children": [{"name": "b", "children": []}]})
        );
    }

    #[test]
    fn wrong_types_are_left_to_the_schema_check() {
        let schema = refund_schema();
        assert_eq!(normalized(&schema, json!("refund")), json!("refund"));
        assert_eq!(normalized(&schema, json!([1, 2])), json!([1, 2]));
    }

    #[test]
    fn path_segments_are_escaped() {
        let schema = json!({ "type": "object", "properties": {}, "additionalProperties": false });
        let err = normalize(&schema, json!({"a/b~c": 1})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "undeclared property /a~1b~0c; the tool's schema declares: no properties"
        );
    }
}
