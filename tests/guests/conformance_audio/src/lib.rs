//! Test guest: `test_audio_content` of the MCP conformance suite's `tools-call-*` scenarios
//! (tests/tests/mcp_conformance.rs), written with the SDK like any tool.

use justonce_guest::{Content, Rich, Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {}

/// A WAV header of no samples (44 bytes: 8 kHz, mono, 8 bits).
const WAV: &[u8] = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x40\x1f\x00\x00\x01\x00\x08\x00data\x00\x00\x00\x00";

struct Conformance;

impl Tool for Conformance {
    type Args = Args;
    type Output = Rich;
    const NAME: &'static str = "test_audio_content";
    const DESCRIPTION: &'static str = "Returns a sound.";

    fn call(_: Args) -> Result<Rich, ToolError> {
        Ok(Content::audio(WAV, "audio/wav").into())
    }
}

export_tool!(Conformance);
