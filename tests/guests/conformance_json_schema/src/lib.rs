//! Test guest: `json_schema_2020_12_tool` of the MCP conformance suite's
//! `json-schema-2020-12` scenario (SEP-1613 and SEP-2106, tests/tests/mcp_conformance.rs
//! and mcp_conformance_next.rs): an input schema with `$schema` (draft 2020-12, which
//! schemars writes), the definition `$defs.address` (with an `$anchor`) that a property
//! refers to, `additionalProperties: false`, a composition (`allOf` of an `anyOf`) and
//! a conditional (`if`/`then`/`else`), all of which `tools/list` must keep.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// A postal address: a definition of its own, `$defs.address`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "address", extend("$anchor" = "addressDef"))]
struct Address {
    /// The street and number.
    street: String,
    /// The city.
    city: String,
}

/// How to reach them.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ContactMethod {
    /// By phone.
    Phone,
    /// By email.
    Email,
}

/// A name, an address, and a phone number or an email address (at least one; the
/// phone number when the contact method is `phone`, else the email address).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend(
    "allOf" = [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if" = {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then" = {"required": ["phone"]},
    "else" = {"required": ["email"]},
    "additionalProperties" = false
))]
struct Args {
    /// Whom the address is for.
    name: String,
    /// Where they live.
    address: Address,
    /// How to reach them.
    contact_method: Option<ContactMethod>,
    /// Their phone number.
    phone: Option<String>,
    /// Their email address.
    email: Option<String>,
}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "json_schema_2020_12_tool";
    const DESCRIPTION: &'static str = "Tool with JSON Schema 2020-12 features.";

    fn call(args: Args) -> Result<Rich, ToolError> {
        let Args {
            name,
            address,
            contact_method,
            phone,
            email,
        } = args;
        let reach = match contact_method {
            Some(ContactMethod::Phone) => phone,
            _ => email.or(phone),
        };
        Ok(Content::text(format!(
            "{name}, {}, {}: {}",
            address.street,
            address.city,
            reach.unwrap_or_default()
        ))
        .into())
    }
}

export_tool!(Conformance);
