//! `justonce serve`: an MCP server over stdio for the loaded tools.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{Cli, exit};
use crate::delivery::Deliverer;
use crate::error::Error;
use crate::mcp::{Server, ServerConfig, Shutdown};

/// Serve the tools over MCP on stdin/stdout.
///
/// Newline-delimited JSON-RPC on stdout; logs go to stderr (JUSTONCE_LOG=info shows
/// more of them).
#[derive(Debug, Args)]
pub struct Serve {
    /// The conversation of calls whose request sends none in
    /// `_meta["dev.justonce/conversation"]` (default: "default").
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// How many tool calls run at once; more wait in a queue.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_calls: u16,
    /// How often the outbox's due webhooks are delivered in the background, in
    /// milliseconds; 0 leaves delivery to `justonce deliver`.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    deliver_every_ms: u64,
}

impl Serve {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let host = Arc::new(cli.host().build()?);
        for refused in host.runtime().refused() {
            tracing::warn!("refused {}: {}", refused.source.display(), refused.reason);
        }
        tracing::info!(
            tools = host.runtime().names(),
            db = %cli.db.display(),
            "serving MCP on stdio"
        );
        // Webhooks queued by tool calls go out while the server runs; the loop stops
        // when serving ends (after the pass under way).
        let _delivery = match self.deliver_every_ms {
            0 => None,
            ms => Some(Arc::new(Deliverer::new(&host)?).spawn_loop(Duration::from_millis(ms))?),
        };
        let config = ServerConfig {
            conversation: self.conversation.clone(),
            max_concurrent_calls: usize::from(self.max_concurrent_calls),
        };
        let server = Server::new(host, config);
        stop_on_signals(server.shutdown())?;
        server
            .serve(std::io::stdin().lock(), std::io::stdout())
            .map_err(|e| Error::Host(anyhow::anyhow!("reading the MCP client's messages: {e}")))?;
        Ok(exit::SUCCESS)
    }
}

/// On SIGTERM or SIGINT: stop reading, let the calls in flight finish and save their
/// outcome (and answer), then exit 0. Calls still waiting for a worker are not run.
fn stop_on_signals(shutdown: Arc<Shutdown>) -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot handle SIGTERM and SIGINT: {e}")))?;
    std::thread::Builder::new()
        .name("justonce-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "stopping: no new calls; the calls in flight finish");
                shutdown.stop();
                shutdown.wait_idle();
                // The reader may be blocked on stdin; everything answered is written
                // and saved, so the process ends here.
                std::process::exit(i32::from(exit::SUCCESS));
            }
        })
        .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the signal thread: {e}")))?;
    Ok(())
}
