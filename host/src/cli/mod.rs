//! The `justonce` command line: one file per subcommand, each a clap struct with
//! `run`. `main` only calls [`main`].

mod abandon;
mod console;
mod deliver;
mod demo;
mod forget;
mod gc;
mod healthcheck;
mod journal;
mod key;
mod lock;
mod logging;
mod mail;
mod new;
mod oauth;
mod operate;
mod push;
mod replay;
mod resolve;
mod rotate;
mod run;
mod serve;
mod shell;
mod target;
mod telemetry;
mod token;
mod tools;
mod upstreams;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::builder::HostBuilder;
use crate::config::{self, Config};
use crate::error::{Error, LoadFault};
use crate::host::Host;

/// Where the journal lives when neither `--db` nor the configuration file says.
const DEFAULT_DB: &str = ".justonce/state.db";

/// The tokens file's name next to the database, when the configuration names none.
const TOKENS_FILE: &str = "tokens.json";

/// Exit codes, documented in docs/operators.md and in `justonce --help`.
pub mod exit {
    /// The tool call succeeded (first time or replayed).
    pub const SUCCESS: u8 = 0;
    /// The tool reported an error or trapped (saved; a retry replays it).
    pub const TOOL_ERROR: u8 = 1;
    /// Bad input: usage, unknown tool, a component that is not a valid tool, invalid
    /// arguments or key, key mismatch, a bad configuration file.
    pub const BAD_INPUT: u8 = 2;
    /// Outcome unknown or still in progress: retrying the same call is safe.
    pub const RETRY_SAFE: u8 = 3;
    /// The resumed tool diverged from its journal; nothing was performed.
    pub const DIVERGENCE: u8 = 4;
    /// The host itself failed (journal, runtime, loading).
    pub const HOST_FAILURE: u8 = 5;
}

const AFTER_HELP: &str = "Exit codes: 0 success, 1 tool error (saved, replayed on retry), \
2 bad input (nothing stored), 3 outcome unknown or in progress (retrying the same call is safe), \
4 divergence, 5 host failure.";

/// A WebAssembly tool host for AI agents that makes every retry safe.
#[derive(Debug, Parser)]
#[command(name = "justonce", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// Directory of tool components (*.wasm). Default: the example tools built into
    /// this binary.
    #[arg(long, global = true, value_name = "DIR", env = "JUSTONCE_TOOLS")]
    tools: Option<PathBuf>,

    /// The journal database [default: the configuration's `database`, else
    /// .justonce/state.db].
    #[arg(long = "db", global = true, value_name = "PATH", env = "JUSTONCE_DB")]
    db_flag: Option<PathBuf>,

    /// The configuration file [default: justonce.toml next to the database, if any].
    #[arg(long, global = true, value_name = "PATH", env = "JUSTONCE_CONFIG")]
    config: Option<PathBuf>,

    /// The journal database in use: `--db`, else the configuration's, else the default.
    #[arg(skip)]
    db: PathBuf,

    /// A JSON file that says which origins each tool may reach over HTTP (deny by
    /// default), the named services, and the idempotency header (see docs/tool-authors.md).
    #[arg(long, global = true, value_name = "FILE", env = "JUSTONCE_HTTP_CONFIG")]
    http_config: Option<PathBuf>,
    /// How long a running call's lease lasts, in milliseconds: a duplicate waits for a
    /// live lease and takes over an expired one (its host presumably died).
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "JUSTONCE_LEASE_MS",
        default_value_t = 60_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    lease_ms: u64,

    /// This host's name in the leases it journals and in its log lines, so that
    /// `journal` and the console say which host runs a call [default: the machine's
    /// hostname]. Letters, digits, `.`, `-`, `_`, `:`.
    #[arg(long, global = true, value_name = "NAME", env = "JUSTONCE_HOST_NAME",
          value_parser = parse_host_name)]
    host_name: Option<crate::journal::HostIdentity>,

    /// The configuration file that was read, if any.
    #[arg(skip)]
    settings: Option<Config>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::Run),
    Tools(tools::Tools),
    Upstreams(upstreams::Upstreams),
    Key(key::Key),
    Journal(journal::Journal),
    Mail(mail::Mail),
    Gc(gc::Gc),
    Demo(demo::Demo),
    Deliver(deliver::Deliver),
    Resolve(resolve::Resolve),
    Forget(forget::Forget),
    Abandon(abandon::Abandon),
    // Boxed: its many flags would make every other command as large.
    Serve(Box<serve::Serve>),
    Console(console::Console),
    Token(token::Token),
    Replay(replay::Replay),
    New(new::New),
    Push(push::Push),
    Lock(lock::Lock),
    RotateStateSecret(rotate::RotateStateSecret),
    Healthcheck(healthcheck::Healthcheck),
}

impl Command {
    /// Whether the command only reads and prints what it found (`journal`, `tools`,
    /// `key`): one a reader may stop reading (`| head`). Not a command that writes
    /// a journal or runs a tool: SIGPIPE is the process's, and a journal connection
    /// that broke mid-write must be an error the command reports, not a kill.
    fn only_reads_and_prints(&self) -> bool {
        matches!(
            self,
            Self::Tools(_) | Self::Key(_) | Self::Journal(_) | Self::Mail(_)
        )
    }
}

/// A command whose reader goes away (`justonce journal | head`) ends there, quietly,
/// as Unix tools do: SIGPIPE's default action. Rust's runtime ignores SIGPIPE, so
/// every print after the reader left would panic with "failed printing to stdout".
#[cfg(unix)]
fn end_quietly_when_the_reader_goes() {
    // SAFETY: `signal` with a valid signal number and `SIG_DFL` has no
    // preconditions; this runs on the main thread before any other is started.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Elsewhere there is no SIGPIPE: a print to a closed pipe fails as it does.
#[cfg(not(unix))]
fn end_quietly_when_the_reader_goes() {}

/// Says so when the working directory holds a `justonce.toml` that is not read: the
/// file is read beside the database (`.justonce/justonce.toml` by default) or from
/// `--config`, and a newcomer's first guess is the directory they run in.
fn warn_of_a_config_not_read(db: &Path) {
    let here = Path::new(config::FILE_NAME);
    if !here.is_file() {
        return;
    }
    let name = config::FILE_NAME;
    // A database URL (PostgreSQL) has no directory to read a file beside.
    if db.to_string_lossy().contains("://") {
        eprintln!(
            "justonce: warning: ./{name} is not read: with a database URL the configuration is read from --config PATH"
        );
        return;
    }
    let beside = db.parent().unwrap_or(Path::new("")).join(name);
    let same = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if !same(here, &beside) {
        eprintln!(
            "justonce: warning: ./{name} is not read: the configuration is read beside the database ({}) or from --config PATH",
            beside.display(),
        );
    }
}

impl Cli {
    /// Reads the configuration file (`--config`, else `justonce.toml` next to the
    /// database) and settles which database is used.
    fn settle(&mut self) -> Result<(), Error> {
        let db = self
            .db_flag
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
        self.settings = match &self.config {
            Some(path) => Some(Config::load(path)?),
            None => {
                let beside = Config::beside(&db)?;
                if beside.is_none() {
                    warn_of_a_config_not_read(&db);
                }
                beside
            }
        };
        let from_config = self.settings.as_ref().and_then(|c| c.database.clone());
        self.db = self.db_flag.clone().or(from_config).unwrap_or(db);
        Ok(())
    }

    /// A host builder with the configuration, and the journal and tools chosen on the
    /// command line.
    fn host(&self) -> HostBuilder {
        // The example tools are a first look at a host with no tools of its own: a
        // configuration that names tools, or upstreams to serve, has its own.
        let configured_tools = self.settings.as_ref().is_some_and(|c| {
            c.tools_dir.is_some() || !c.sources.is_empty() || !c.upstreams.is_empty()
        });
        let mut builder = self.host_without_tools();
        if let Some(config) = &self.settings {
            builder = builder.tool_sources_of(config);
        }
        match &self.tools {
            Some(dir) => builder.tools_dir(dir),
            None if configured_tools => builder,
            None => builder.example_tools(),
        }
    }

    /// What `serve` watches and reads again on a reload.
    fn watched(&self) -> watch::Sources {
        let config_dir = self.settings.as_ref().and_then(|c| c.tools_dir.clone());
        watch::Sources {
            config: watch::config_path(self.settings.as_ref(), &self.db),
            tools_dir: self.tools.clone().or(config_dir),
            tools_flag: self.tools.is_some(),
        }
    }

    /// A host builder with the journal and settings, and no tools yet (for `run` of a
    /// component file, which loads that component alone).
    fn host_without_tools(&self) -> HostBuilder {
        let mut builder = Host::builder();
        if let Some(config) = &self.settings {
            builder = builder.config(config);
        }
        let mut builder = builder
            .without_tool_sources()
            // A Python or JavaScript tool compiles for seconds the first time.
            .on_compile(std::sync::Arc::new(|compiling| {
                eprintln!("justonce: {}", compiling.line());
            }))
            .database(&self.db)
            .lease(std::time::Duration::from_millis(self.lease_ms));
        let configured = self.settings.as_ref().and_then(|c| c.host_name.as_ref());
        if let Some(identity) = self.host_name.as_ref().or(configured) {
            builder = builder.identity(identity.clone());
        }
        match &self.http_config {
            Some(path) => builder.http_config_file(path),
            None => builder,
        }
    }

    /// The journal in use, for the commands that read or operate it without a host
    /// (`journal`, `gc`, `resolve`, `forget`, `abandon`).
    fn journal(&self) -> Result<std::sync::Arc<dyn crate::journal::Journal>, Error> {
        let password_file = self
            .settings
            .as_ref()
            .and_then(|c| c.password_file.as_deref());
        crate::journal::open(
            &self.db,
            crate::journal::Durability::default(),
            password_file,
        )
    }

    /// The tokens file of `serve --http`: `flag`, else the configuration's, else
    /// tokens.json next to a SQLite database. A PostgreSQL journal's URL is no
    /// directory: its tokens file is beside the configuration file, else in the
    /// working directory's `.justonce/` (never under a path made of the URL).
    fn tokens_file(&self, flag: Option<&PathBuf>) -> PathBuf {
        if let Some(path) = flag
            .cloned()
            .or_else(|| self.settings.as_ref().and_then(|c| c.tokens_file.clone()))
        {
            return path;
        }
        self.state_dir().join(TOKENS_FILE)
    }

    /// Where this host writes its memory of the journal's mark
    /// (`journal-marks.json`): beside a SQLite database; for a PostgreSQL journal, the
    /// working directory's `.justonce/`, never beside the configuration file, which is
    /// read-only where it is mounted from a secret or a ConfigMap (a container's
    /// working directory is its writable volume).
    fn marks_dir(&self) -> PathBuf {
        if crate::journal::postgres::is_postgres_url(&self.db.to_string_lossy()) {
            return PathBuf::from(".justonce");
        }
        self.state_dir()
    }

    /// Where this host reads its own files (the tokens file by default): beside a
    /// SQLite database; for a PostgreSQL journal, whose URL is no directory, beside
    /// the configuration file, else the working directory's `.justonce/` (never under
    /// a path made of the URL).
    fn state_dir(&self) -> PathBuf {
        let dir = if crate::journal::postgres::is_postgres_url(&self.db.to_string_lossy()) {
            match &self.settings {
                Some(config) => config.path.parent().map(PathBuf::from),
                None => Some(PathBuf::from(".justonce")),
            }
        } else {
            self.db.parent().map(PathBuf::from)
        };
        dir.unwrap_or_default()
    }

    /// How long records are kept, as configured (24 h unless the file says).
    fn retention(&self) -> std::time::Duration {
        self.settings
            .as_ref()
            .and_then(|c| c.retention)
            .unwrap_or(std::time::Duration::from_secs(24 * 3600))
    }
}

/// `--host-name`, checked as leases will read it back.
fn parse_host_name(name: &str) -> Result<crate::journal::HostIdentity, String> {
    crate::journal::HostIdentity::named(name).map_err(|e| e.to_string())
}

/// The exit code for an error.
pub fn exit_code(error: &Error) -> u8 {
    match error {
        Error::Load {
            fault: LoadFault::Input,
            ..
        }
        | Error::DuplicateTool { .. }
        | Error::UnknownTool { .. }
        | Error::InvalidArguments { .. }
        | Error::InvalidKey(_)
        | Error::Mismatch { .. }
        | Error::CannotResolve { .. }
        | Error::CannotOperate { .. }
        | Error::InputStateInvalid(_)
        | Error::Config { .. }
        | Error::ReservedProvider { .. } => exit::BAD_INPUT,
        Error::InProgress { .. }
        | Error::Busy { .. }
        | Error::OutcomeUnknown { .. }
        | Error::NotPerformed { .. }
        | Error::Unavailable { .. }
        | Error::InputRequired { .. }
        | Error::InputUnavailable { .. }
        | Error::LeaseLost { .. } => exit::RETRY_SAFE,
        Error::Postgres { .. } if error.retry_safe() => exit::RETRY_SAFE,
        Error::Divergence { .. } => exit::DIVERGENCE,
        Error::Load { .. }
        | Error::Store { .. }
        | Error::Postgres { .. }
        | Error::NewerSchema { .. }
        | Error::JournalPoisoned { .. }
        | Error::Host(_) => exit::HOST_FAILURE,
    }
}

/// Parses the command line, runs the command and returns its exit code. Errors are
/// printed to stderr with their causes.
pub fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if let Err(error) = cli.settle() {
        eprintln!("justonce: {error:#}");
        return ExitCode::from(exit_code(&error));
    }
    // After the configuration file is read: it may name the traces' collector.
    let traces = telemetry::Destination::resolve(
        |name| std::env::var(name).ok(),
        cli.settings
            .as_ref()
            .and_then(|c| c.otlp_endpoint.as_deref()),
    );
    if let Err(error) = logging::init(&traces) {
        eprintln!("justonce: {error}");
        return ExitCode::from(exit::BAD_INPUT);
    }
    if cli.command.only_reads_and_prints() {
        end_quietly_when_the_reader_goes();
    }
    let result = match &cli.command {
        Command::Run(cmd) => cmd.run(&cli),
        Command::Tools(cmd) => cmd.run(&cli),
        Command::Upstreams(cmd) => cmd.run(&cli),
        Command::Key(cmd) => cmd.run(&cli),
        Command::Journal(cmd) => cmd.run(&cli),
        Command::Mail(cmd) => cmd.run(&cli),
        Command::Gc(cmd) => cmd.run(&cli),
        Command::Demo(cmd) => cmd.run(&cli),
        Command::Deliver(cmd) => cmd.run(&cli),
        Command::Resolve(cmd) => cmd.run(&cli),
        Command::Forget(cmd) => cmd.run(&cli),
        Command::Abandon(cmd) => cmd.run(&cli),
        Command::Serve(cmd) => cmd.run(&cli),
        Command::Console(cmd) => cmd.run(&cli),
        Command::Token(cmd) => cmd.run(&cli),
        Command::Replay(cmd) => cmd.run(&cli),
        Command::New(cmd) => cmd.run(&cli),
        Command::Push(cmd) => cmd.run(&cli),
        Command::Lock(cmd) => cmd.run(&cli),
        Command::RotateStateSecret(cmd) => cmd.run(&cli),
        Command::Healthcheck(cmd) => cmd.run(&cli),
    };
    // Every span of the command is closed: send what is not sent yet.
    telemetry::shutdown();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("justonce: {error:#}");
            ExitCode::from(exit_code(&error))
        }
    }
}

/// Prints a JSON value on one line of stdout.
fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The tokens file `justonce ARGS` would use.
    fn tokens_file_of(args: &[&str]) -> PathBuf {
        let mut cli =
            Cli::try_parse_from(["justonce"].iter().chain(args).chain(&["token", "list"])).unwrap();
        cli.settle().unwrap();
        cli.tokens_file(None)
    }

    #[test]
    fn a_postgres_journals_tokens_file_is_beside_the_configuration_never_under_its_url() {
        let url = "postgres://justonce@127.0.0.1:55432/justonce";
        assert_eq!(
            tokens_file_of(&["--db", url]),
            Path::new(".justonce").join(TOKENS_FILE)
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("justonce.toml");
        std::fs::write(&config, format!("database = \"{url}\"\n")).unwrap();
        assert_eq!(
            tokens_file_of(&["--config", config.to_str().unwrap()]),
            dir.path().join(TOKENS_FILE)
        );
        let db = dir.path().join("state.db");
        assert_eq!(
            tokens_file_of(&["--db", db.to_str().unwrap()]),
            dir.path().join(TOKENS_FILE),
            "a SQLite journal's is beside it, as before"
        );
    }
}
