//! Test guest: `test_input_required_result_request_state` of the MCP conformance
//! suite (tests/tests/mcp_conformance_next.rs): asks the person behind the agent to
//! confirm (`confirm`). The host hands it the answer only when the request state
//! that came with it is the one this question was given (the host checks it), so
//! getting an answer at all says the state round-tripped: "state-ok".

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[path = "../../conformance_ask_common.rs"]
mod common;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_input_required_result_request_state";
    const DESCRIPTION: &'static str = "Asks the user to confirm, and says state-ok once the answer came back with its request state.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        let answer = common::ask_one("confirm", "Please confirm", "ok", "boolean")?;
        let ok = answer.get("ok").cloned().unwrap_or_default();
        Ok(Content::text(format!("state-ok: {} (ok = {ok})", answer.action())).into())
    }
}

export_tool!(Conformance);
