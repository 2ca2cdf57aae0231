//! A tool's input schema, compiled once at load and checked against every call's
//! arguments before anything is stored.

use serde_json::Value;

use super::integer_formats;

/// How many schema violations one error message lists.
const MAX_REPORTED: usize = 5;

/// A compiled JSON Schema (draft 2020-12 unless the schema says otherwise). Remote
/// `$ref`s are not fetched: a schema that needs them is refused at load.
pub struct InputSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InputSchema")
    }
}

impl InputSchema {
    /// Compiles `schema`; the error says why it is not a usable JSON Schema. The
    /// 64-bit integer formats it declares are checked too (see [`integer_formats`]).
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::options()
            .with_keyword(integer_formats::KEYWORD, integer_formats::keyword)
            .build(&integer_formats::marked(schema))
            .map(|validator| Self { validator })
            .map_err(|e| format!("input schema is not a valid JSON Schema: {e}"))
    }

    /// Checks `args`; the error names each failing location as a JSON pointer
    /// (`/orders/0/order_id`, or `/` for the whole object).
    pub fn check(&self, args: &Value) -> Result<(), String> {
        self.check_besides(args, None)
    }

    /// Checks `args` as [`check`](Self::check) does, leaving out the complaint that
    /// the one property at `undeclared` (a JSON pointer) is not allowed, which the
    /// caller has reported already.
    pub fn check_besides(&self, args: &Value, undeclared: Option<&str>) -> Result<(), String> {
        let reported = undeclared.and_then(|path| path.rsplit_once('/'));
        let mut problems: Vec<String> = self
            .validator
            .iter_errors(args)
            .filter(|e| !reported.is_some_and(|(parent, name)| only_unexpected(e, parent, name)))
            .take(MAX_REPORTED + 1)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                format!("at {at}: {e}")
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        if problems.len() > MAX_REPORTED {
            problems.truncate(MAX_REPORTED);
            problems.push("…".into());
        }
        Err(format!(
            "do not match the tool's input schema: {}",
            problems.join("; ")
        ))
    }
}

/// Whether `error` says no more than that the property `name` (escaped as in a JSON
/// pointer) of the object at `parent` is not allowed.
fn only_unexpected(error: &jsonschema::ValidationError<'_>, parent: &str, name: &str) -> bool {
    let name = name.replace("~1", "/").replace("~0", "~");
    matches!(
        error.kind(),
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected }
            if unexpected.as_slice() == [name]
    ) && error.instance_path().to_string() == parent
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn orders() -> InputSchema {
        InputSchema::compile(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "orders": { "type": "array", "items": { "$ref": "#/$defs/Order" } }
            },
            "required": ["orders"],
            "$defs": {
                "Order": {
                    "type": "object",
                    "properties": { "order_id": { "type": "integer", "minimum": 0 } },
                    "required": ["order_id"]
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn names_the_failing_path() {
        let err = orders()
            .check(&json!({"orders": [{"order_id": 1}, {"order_id": "x"}]}))
            .unwrap_err();
        assert!(err.contains("at /orders/1/order_id"), "{err}");
        let err = orders().check(&json!({})).unwrap_err();
        assert!(err.contains("at /:") && err.contains("orders"), "{err}");
    }

    #[test]
    fn an_integer_written_as_a_float_is_an_integer() {
        // `4417.0` and `4417` are one number to the invocation key, so to the schema too.
        orders()
            .check(&json!({"orders": [{"order_id": 4417.0}]}))
            .unwrap();
        assert!(
            orders()
                .check(&json!({"orders": [{"order_id": 4417.5}]}))
                .is_err()
        );
    }

    #[test]
    fn a_64_bit_integer_format_refuses_what_its_type_cannot_take() {
        // What schemars writes for `struct Args { id: u64, delta: i64 }`.
        let schema = InputSchema::compile(&json!({
            "type": "object",
            "properties": {
                "id": { "type": "integer", "format": "uint64", "minimum": 0 },
                "delta": { "type": "integer", "format": "int64" },
                "note": { "type": "string", "default": { "format": "uint64" } }
            }
        }))
        .unwrap();
        let args = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        schema
            .check(&args(
                r#"{"id": 18446744073709551615, "delta": -9223372036854775808}"#,
            ))
            .unwrap();
        let err = schema
            .check(&args(
                r#"{"id": 18446744073709551616, "delta": 9223372036854775808}"#,
            ))
            .unwrap_err();
        assert!(
            err.contains("at /id:")
                && err.contains("unsigned 64-bit")
                && err.contains("at /delta:"),
            "{err}"
        );
        // The numbers as sent, not as the doubles that hold them.
        assert!(
            err.contains("18446744073709551616 is not")
                && err.contains("9223372036854775808 is not")
                && !err.contains("e19")
                && !err.contains("e18"),
            "{err}"
        );
    }

    #[test]
    fn digits_past_a_64_bit_range_are_refused_only_where_the_schema_takes_ids_as_digits() {
        let schema = InputSchema::compile(&json!({
            "type": "object",
            "properties": {
                "id": { "type": ["integer", "string"], "format": "uint64", "pattern": "^(0|[1-9][0-9]*)$" },
                "openapi_id": { "type": "string", "format": "int64" },
                "either": { "anyOf": [{ "type": ["integer", "string"], "format": "int64" }, { "type": "null" }] }
            }
        }))
        .unwrap();
        let err = schema
            .check(&json!({ "id": "18446744073709551616" }))
            .unwrap_err();
        assert!(
            err.contains("at /id:") && err.contains("18446744073709551616"),
            "{err}"
        );
        // The opposite cases: digits in range (where normalization did not make them
        // a number, inside a union), and a string-typed id of OpenAPI's, pass.
        schema
            .check(&json!({ "id": "18446744073709551615", "either": "-5" }))
            .unwrap();
        schema
            .check(&json!({ "openapi_id": "99999999999999999999999" }))
            .unwrap();
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        let err = InputSchema::compile(&json!({"type": "no-such-type"})).unwrap_err();
        assert!(err.contains("not a valid JSON Schema"), "{err}");
    }
}
