//! `justonce run`: call one tool under the guard and print the outcome as JSON.

use clap::Args;

use super::{Cli, exit, exit_code, print_json};
use crate::call::CallRequest;
use crate::error::Error;

/// Call one tool and print one JSON object with `ok`, `result` or `error`, `replayed`
/// and `key`.
#[derive(Debug, Args)]
pub struct Run {
    /// The tool's name, or the path of a component to load and call (one that ends in
    /// `.wasm` or holds a `/`).
    tool: String,
    /// The arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    args: String,
    /// The conversation: the window in which a repeat is a duplicate (kept
    /// `retention_hours`). Without one, a repeat is a duplicate only within
    /// `unscoped_retention_minutes` (10 by default).
    #[arg(long, value_name = "ID", conflicts_with = "fresh")]
    conversation: Option<String>,
    /// Run in a conversation of its own, new each time: nothing an earlier run saved is
    /// replayed (for trying out a tool while writing it).
    #[arg(long, conflicts_with_all = ["key", "call_id"])]
    fresh: bool,
    /// The model provider's tool-call id (an alias of the derived key).
    #[arg(long, value_name = "ID")]
    call_id: Option<String>,
    /// An explicit idempotency key instead of the derived one.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
}

impl Run {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let (host, tool) = super::target::host_for(cli, &self.tool)?;
        let mut request = CallRequest::new(tool, self.args.clone());
        request.conversation = match self.fresh {
            true => Some(fresh_conversation()),
            false => self.conversation.clone(),
        };
        request.tool_call_id = self.call_id.clone();
        request.key = self.key.clone();
        match host.call(&request) {
            Ok(response) => {
                print_json(&response.to_json());
                Ok(if response.outcome.is_success() {
                    exit::SUCCESS
                } else {
                    exit::TOOL_ERROR
                })
            }
            Err(error) => {
                print_json(&error_json(&error));
                Ok(exit_code(&error))
            }
        }
    }
}

/// A conversation id no earlier run used: the time and the process, and a counter
/// for several in one process.
fn fresh_conversation() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "fresh-{nanos}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The JSON an agent gets for a call that produced no outcome (see
/// [`Error::to_agent_json`]).
pub(crate) fn error_json(error: &Error) -> serde_json::Value {
    error.to_agent_json()
}
