//! What the `conformance_ask_*` guests share (each includes this file with
//! `#[path]`): one question for one field of a flat object, asked with the SDK's
//! `ask_all` under the name the conformance suite expects.

use justonce_guest::{Answer, Question, ToolError, ask_all};
use serde_json::json;

/// Asks question `name` (`message`) for one `field` of JSON type `kind`: the answer.
pub fn ask_one(name: &str, message: &str, field: &str, kind: &str) -> Result<Answer, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": { field: { "type": kind } },
        "required": [field],
    });
    Ok(ask_all(&[Question::new(name, message, schema)])?.remove(0))
}
