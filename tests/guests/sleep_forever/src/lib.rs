//! Test guest: sleeps in a WASI call (`wasi:clocks` + `wasi:io/poll`), where the
//! epoch deadline cannot interrupt it, to test that the host ends the wait at the
//! call's deadline.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// How long to sleep, in seconds.
    seconds: u64,
    /// A tag that only makes calls distinct (so they are not deduplicated).
    #[serde(default)]
    tag: u64,
}

struct SleepForever;

impl Tool for SleepForever {
    type Args = Args;
    type Output = u64;
    const NAME: &'static str = "sleep_forever";
    const DESCRIPTION: &'static str = "Sleeps for the given seconds, then returns its tag.";

    fn call(args: Args) -> Result<u64, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(args.seconds));
        Ok(args.tag)
    }
}

export_tool!(SleepForever);
