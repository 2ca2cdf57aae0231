//! Test guest: `json_schema_2020_12_tool` of the MCP conformance suite's
//! `json-schema-2020-12` scenario (SEP-1613, tests/tests/mcp_conformance.rs): an input
//! schema with `$schema` (draft 2020-12, which schemars writes), the definition
//! `$defs.address` that a property refers to, and `additionalProperties: false`,
//! which `tools/list` must keep.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// A postal address: a definition of its own, `$defs.address`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "address")]
struct Address {
    /// The street and number.
    street: String,
    /// The city.
    city: String,
}

/// A name and an address.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Whom the address is for.
    name: String,
    /// Where they live.
    address: Address,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "json_schema_2020_12_tool";
    const DESCRIPTION: &'static str = "Tool with JSON Schema 2020-12 features.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        let Args { name, address } = args;
        Ok(Content::text(format!("{name}, {}, {}", address.street, address.city)).into())
    }
}

export_tool!(Conformance);
