//! `[upstreams.NAME.probes.TOOL]`: one of the upstream's read-only tools, asked
//! whether an unkeyed call of its write tool `TOOL` whose answer was lost happened
//! (docs/gateway.md, "Probes"). The guard asks at the agent's retry
//! (`guard::effect::probing`); this is how the question is put and its answer read.

use serde_json::{Value, json};

use super::Upstream;
use crate::probe::{self, ProbeAnswer};
use crate::provider::{EffectRequest, Probed};

/// How to ask an upstream whether a call of one of its write tools happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamProbe {
    /// The read-only tool asked (its name upstream).
    pub tool: String,
    /// Its arguments: a template (`crate::probe`) filled in from the effect,
    /// `{key}` (the effect key sent in `_meta`) and `{arguments.NAME}` (the write
    /// call's arguments).
    pub arguments: Value,
    /// Where in the read tool's answer to look (a JSON pointer; `""` for the whole).
    pub pointer: String,
    /// How what is there reads.
    pub answer: ProbeAnswer,
}

impl UpstreamProbe {
    /// The placeholders a probe's arguments may name: the effect key, and the write
    /// call's arguments.
    pub(crate) fn may_name(placeholder: &str) -> bool {
        placeholder == "key" || placeholder.starts_with("arguments.")
    }

    /// Asks `upstream` once, within its `timeout` (waiting as long for it to be
    /// started again, as after the crash that lost the answer), whether the effect
    /// of `request` happened. `Err` when the question could not be put or answered.
    pub(crate) fn ask(
        &self,
        upstream: &Upstream,
        request: &EffectRequest<'_>,
    ) -> Result<Probed, String> {
        match upstream.tool(&self.tool) {
            Some(tool) if annotated_read_only(&tool.entry) => {}
            Some(_) => {
                return Err(format!(
                    "`{}` is not annotated readOnlyHint by the upstream `{}`: a probe may only read",
                    self.tool,
                    upstream.name()
                ));
            }
            None => {
                return Err(format!(
                    "the upstream `{}` lists no tool `{}` (or the configuration leaves it out)",
                    upstream.name(),
                    self.tool
                ));
            }
        }
        let context = json!({
            "key": request.key.as_str(),
            "arguments": request.payload.get("arguments").cloned().unwrap_or(json!({})),
        });
        let arguments = probe::fill(&self.arguments, &context)?;
        let wait = Some(upstream.config.timeout);
        let result = upstream
            .call_tool(&self.tool, request.tool, &arguments, None, wait)
            .map_err(|e| e.to_string())?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            return Err(format!(
                "`{}` answered an error: {}",
                self.tool,
                text_of(&result)
            ));
        }
        Ok(self.answer.read(&answer_of(&result), &self.pointer))
    }
}

/// Whether a `tools/list` entry says its tool only reads.
fn annotated_read_only(entry: &Value) -> bool {
    entry["annotations"]["readOnlyHint"] == Value::Bool(true)
}

/// The text items of a `CallToolResult`, joined.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// What a read tool answered, as its probe's `pointer` reads it: its
/// `structuredContent` where it has one, else its text parsed as JSON where it
/// parses, else that text.
pub(crate) fn answer_of(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return structured.clone();
    }
    let text = text_of(result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_tools_answer_is_its_structured_content_else_its_text_as_json_else_the_text() {
        let structured = json!({ "content": [{ "type": "text", "text": "[1]" }], "structuredContent": { "result": [1] } });
        assert_eq!(answer_of(&structured), json!({ "result": [1] }));
        let text = json!({ "content": [{ "type": "text", "text": "[{\"n\": 1}]" }] });
        assert_eq!(answer_of(&text), json!([{ "n": 1 }]));
        let prose = json!({ "content": [{ "type": "text", "text": "no rows" }] });
        assert_eq!(answer_of(&prose), json!("no rows"));
    }
}
