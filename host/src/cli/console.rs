//! `justonce console`: the web console alone, for a host that serves MCP over stdio
//! or not at all (`serve --http` has it at /console already).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::serve::{listen, open_tokens};
use super::{Cli, exit};
use crate::clock::SystemClock;
use crate::console::{Console as Routes, DEFAULT_TTL_MS};
use crate::error::Error;
use crate::serving::{HttpServer, ServerOptions};

/// Serve the web console of the journal at http://ADDR:PORT/console (the URL is the
/// first line on stdout); a viewer's or operator's token opens it (`justonce token
/// add NAME --role viewer|operator`).
#[derive(Debug, Args)]
pub struct Console {
    /// Where to listen: ADDR:PORT, or PORT on 127.0.0.1; port 0 picks a free one.
    #[arg(value_name = "ADDR:PORT", default_value = "127.0.0.1:8765")]
    listen: String,
    /// The tokens file [default: the configuration's `tokens_file`, else tokens.json
    /// next to the database].
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// A browser origin allowed besides loopback ones (repeatable), e.g.
    /// https://ops.example.com, for a console behind a reverse proxy.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// How long a browser session lasts after its login, in minutes.
    #[arg(long, value_name = "MINUTES", default_value_t = DEFAULT_TTL_MS / 60_000, value_parser = clap::value_parser!(i64).range(1..))]
    session_minutes: i64,
}

impl Console {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let journal = cli.journal()?;
        // One reader of the file for the server and the console.
        let (path, tokens) = open_tokens(cli, self.tokens.as_ref(), &journal)?;
        let tokens = Arc::new(tokens);
        let (listener, bound) = listen("console", &self.listen)?;
        let routes = Routes::new(
            journal,
            Arc::clone(&tokens),
            Arc::new(SystemClock),
            self.session_minutes.saturating_mul(60_000),
        )
        .configured(cli.settings.clone());
        let options = ServerOptions {
            allowed_origins: self.allow_origin.clone(),
            ..ServerOptions::default()
        };
        let url = format!("http://{bound}/console");
        tracing::info!(db = %cli.db.display(), tokens = %path.display(), "serving the console on {url}");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}").and_then(|()| out.flush());
        drop(out);
        HttpServer::new(tokens, options)
            .with_routes(Arc::new(routes))
            .serve(listener)
            .map_err(|e| Error::Host(anyhow::anyhow!("serving HTTP on {bound}: {e}")))?;
        Ok(exit::SUCCESS)
    }
}
