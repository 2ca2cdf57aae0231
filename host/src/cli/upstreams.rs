//! `justonce upstreams`: each upstream MCP server of the configuration started (in
//! parallel, as `justonce tools` does) and reported on: its state, how many tools it
//! lists, how long it took to be ready, its last error, and the calls of its tools
//! the journal has waiting on it. The console's Upstreams page shows the same for a
//! running server (`/console/api/upstreams` as JSON, to an operator's or viewer's
//! token).

use clap::Args;
use serde_json::Value;

use super::{Cli, exit, print_json};
use crate::console::UpstreamView;
use crate::error::Error;

/// Start each upstream MCP server of the configuration (`[upstreams.NAME]`) in
/// parallel, wait for each one's first start, and print its state (ready or
/// failing), how many tools it lists, how long it took to be ready, its last error
/// and the calls of its tools waiting on it in the journal. Exits 0 when every one
/// is ready, 1 when one is not, 2 when none is configured.
#[derive(Debug, Args)]
pub struct Upstreams {
    /// Print a JSON array of `{name, state, tools, starts, ready_in_ms, last_error,
    /// retry_in_ms, disabled_by, tool_names, waiting}`, as the console's
    /// `/console/api/upstreams` answers.
    #[arg(long)]
    json: bool,
}

/// The exit code when an upstream is not ready.
const NOT_READY: u8 = 1;

impl Upstreams {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let host = cli.host().build()?;
        let upstreams = host.upstreams();
        if upstreams.is_empty() {
            eprintln!(
                "justonce: no upstream MCP server is configured ([upstreams.NAME] in justonce.toml)"
            );
            return Ok(exit::BAD_INPUT);
        }
        // Starts them all in parallel and waits for each one's first start.
        host.upstream_tools();
        let views = UpstreamView::all(upstreams, &**host.journal_handle(), host.clock().now_ms())?;
        if self.json {
            print_json(&Value::Array(
                views.iter().map(UpstreamView::to_json).collect(),
            ));
        } else {
            for view in &views {
                println!("{}", describe(view));
            }
        }
        let all_ready = views.iter().all(|v| v.report.state.is_ready());
        Ok(if all_ready { exit::SUCCESS } else { NOT_READY })
    }
}

/// One upstream in a few lines.
fn describe(view: &UpstreamView) -> String {
    let report = &view.report;
    let mut out = format!(
        "{}: {}, {} tool(s)",
        report.name,
        report.state.name(),
        report.tools.unwrap_or(0)
    );
    if let Some(ready_in) = report.ready_in {
        out.push_str(&format!(", ready in {} ms", ready_in.as_millis()));
    }
    if let Some(error) = report.state.last_error() {
        out.push_str(&format!("\n  last error: {error}"));
    }
    if !view.waiting.is_empty() {
        out.push_str(&format!(
            "\n  {} call(s) waiting on it:",
            view.waiting.len()
        ));
        for entry in &view.waiting {
            out.push_str(&format!("\n    {} {}", entry.key, entry.tool));
        }
    }
    out
}
