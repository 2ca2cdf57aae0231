//! `justonce.toml`: where the tools and the journal are, how long records are kept, the
//! retry policy, and the sandbox limits, globally and per tool.
//!
//! ```toml
//! tools_dir = "tools"            # relative paths are relative to this file
//! database = "state.db"         # or postgres://USER@HOST:PORT/DB
//! password_file = "db-password"  # PostgreSQL's password, when the URL has none
//! retention_hours = 24           # calls in a conversation
//! unscoped_retention_minutes = 10 # calls that name no conversation
//! durability = "full"            # or "normal": no fsync on the call path
//! tokens_file = "tokens.json"    # bearer tokens of `serve --http` (`justonce token`)
//! host_name = "web-1"            # this host in leases, logs and the console (else the hostname)
//! gc_every_minutes = 60          # `serve` runs gc this often, one host at a time (0: never)
//! registry_secrets_file = "registry.env" # one registry's login, if not in the environment
//!
//! [sweep]                        # `serve` asks probes about unknown outcomes
//! every_seconds = 60             # this often, one host at a time (0: never)
//! max_probes = 20                # at most this many a sweep
//! probe_timeout_ms = 10000       # a tool's own probe (`reconcile`) at most
//!
//! [retry]
//! attempts = 3
//! initial_backoff_ms = 100
//! max_backoff_ms = 2000
//!
//! [limits]                       # every tool
//! deadline_ms = 10000
//! memory_mib = 64
//!
//! [tools.send_receipt]           # one tool; unset keys come from [limits]
//! deadline_ms = 2000
//! max_effects = 10
//! retention_hours = 48           # its records, conversation or not
//! allow = ["payments", "https://hooks.example"]  # services and origins it may reach
//! mcp = false                    # not offered over MCP (Host::exposed_over_mcp)
//! ask_person = "Did the receipt to {payload.json.to} go out?"  # an unkeyed effect whose
//!                                # answer was lost: asked of the user at the retry
//!
//! [tools.refund]                 # a tool from an OCI registry, by digest or by a
//! source = "oci://127.0.0.1:5000/shop/refund:v1"  # tag that `justonce lock` pins
//!                                # in justonce.lock beside this file
//!
//! [registries."ghcr.io"]         # the login of one registry (HOST or HOST:PORT)
//! secrets_file = "ghcr.env"      # JUSTONCE_REGISTRY_USERNAME=… and _PASSWORD=…
//!
//! [mcp]                          # how `serve` treats calls
//! unscoped = "refuse"            # a call naming no conversation (nor key) is refused with
//!                                # the glue that names one; "session": scoped by its MCP
//!                                # session (a stateless client, which has none, is
//!                                # refused; "session-or-window" gives it the window,
//!                                # logged); default "window": deduplicated within
//!                                # unscoped_retention_minutes
//! answer_within_ms = 4000        # a duplicate waiting for the first call answers
//!                                # in_progress (retry-safe) by then (default 4000)
//! task_after_ms = 1000           # a call from a client of the Tasks extension still
//!                                # running by then is answered with a task (default 1000)
//! task_required = ["export"]     # tools always answered with a task
//! ask_timeout_ms = 300000        # a session's call waits this long for the answer to
//!                                # each question its tool asks (default 300000)
//! drain_timeout_ms = 20000       # on SIGTERM, how long the calls in flight may take to
//!                                # finish; those still running are then handed over to
//!                                # the next host that gets their retry (default 20000)
//! journal_wait_ms = 60000        # how long serve waits at start for a database that
//!                                # does not answer yet (default 60000)
//!
//! [upstreams.memory]             # an MCP server's tools, under the guard (see
//! command = ["node", "server-memory/dist/index.js"]  # `config/upstreams.rs`)
//!
//! [telemetry]                    # traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_* win)
//! otlp_endpoint = "http://localhost:4318"
//!
//! [oauth]                        # `serve --http` also takes OAuth 2.1 access tokens
//! issuer = "https://auth.example.com"
//! resource = "https://mcp.example.com/mcp"  # the audience; default http://ADDR:PORT/mcp
//! scopes = ["mcp:tools"]         # every token must grant them
//! ```
//!
//! Unknown keys and bad values are errors that name the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::builder::HostBuilder;
use crate::error::{Error, Result};
use crate::journal::Durability;
use crate::registry::{LockFile, LoginSources, Reference, lock_path_beside};
use crate::retention::Unscoped;
use crate::retry::RetryPolicy;
use crate::runtime::{Limits, ToolLimits};

mod upstreams;

/// The configuration file's name; the CLI looks for it next to the database.
pub const FILE_NAME: &str = "justonce.toml";

/// The largest memory cap a 32-bit WebAssembly guest can use, in MiB.
const MAX_MEMORY_MIB: u64 = 4096;

/// A checked configuration file. Absent keys stay `None` and leave the built-in
/// defaults (or the command line's choice) in place.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it was read from.
    pub path: PathBuf,
    /// The directory of tool components.
    pub tools_dir: Option<PathBuf>,
    /// The journal database.
    pub database: Option<PathBuf>,
    /// The file whose first line is a PostgreSQL journal's password.
    pub password_file: Option<PathBuf>,
    /// How long records of calls in a conversation are kept.
    pub retention: Option<Duration>,
    /// How long records of calls that name no conversation are kept.
    pub unscoped_retention: Option<Duration>,
    /// `[tools.NAME] retention_hours`: how long each of these tools' records are
    /// kept, conversation or not.
    pub tool_retention: BTreeMap<String, Duration>,
    /// How hard the journal works to survive a power cut.
    pub durability: Option<Durability>,
    /// The retry policy for effects whose outcome is unknown.
    pub retry: Option<RetryPolicy>,
    /// The sandbox limits: `[limits]` over the built-in defaults, and each
    /// `[tools.NAME]` over `[limits]`.
    pub limits: ToolLimits,
    /// The bearer tokens of `serve --http` (hashed; `justonce token` edits it).
    pub tokens_file: Option<PathBuf>,
    /// `[telemetry] otlp_endpoint`: the OTLP/HTTP collector traces are exported to
    /// (its base URL; `/v1/traces` is added), unless the standard
    /// `OTEL_EXPORTER_OTLP_*ENDPOINT` variables name one.
    pub otlp_endpoint: Option<String>,
    /// `[tools.NAME] source`: the tools loaded from OCI registries, as written.
    pub sources: BTreeMap<String, Reference>,
    /// `justonce.lock` beside the file (empty when there is none): the digests the
    /// sources' tags were pinned to; the error when it cannot be read (a tool whose
    /// tag needs it is then refused with it, and `justonce lock` writes it anew).
    pub lock: std::result::Result<LockFile, String>,
    /// The file the registry login is read from when the environment has none
    /// (`NAME=value` lines); bound to one registry (see `registry::Logins`).
    pub registry_secrets_file: Option<PathBuf>,
    /// `[registries."HOST"] secrets_file`: each registry's own login file, by
    /// registry (`HOST[:PORT]`).
    pub registry_logins: BTreeMap<String, PathBuf>,
    /// `[tools.NAME] allow`: origins and service names each tool may reach over
    /// HTTP, added to the HTTP config's allowlist.
    pub tool_allow: BTreeMap<String, Vec<String>>,
    /// `[tools.NAME] mcp = false`: the tools `serve` does not offer over MCP.
    pub hidden_from_mcp: std::collections::BTreeSet<String>,
    /// `[tools.NAME] ask_person`: the question (a template, `crate::ask_person`) the
    /// person behind the agent is asked, at the retry, about an unkeyed effect of the
    /// tool whose outcome is unknown and that no probe decides.
    pub ask_person: BTreeMap<String, String>,
    /// `[oauth]`: the OAuth 2.1 access tokens `serve --http` accepts.
    pub oauth: Option<OAuthConfig>,
    /// `[mcp]`: how `serve` treats calls.
    pub mcp: McpSettings,
    /// `host_name`: this host's name in the leases it journals, its log lines and
    /// the console (`--host-name` and `JUSTONCE_HOST_NAME` win over it).
    pub host_name: Option<crate::journal::HostIdentity>,
    /// `[upstreams.NAME]`: MCP servers whose tools the host offers under the guard,
    /// in the order of the file (where two offer one name, the first one's is).
    pub upstreams: Vec<(String, crate::upstream::UpstreamConfig)>,
    /// `gc_every_minutes`: how often `serve` runs gc, one host of a journal at a
    /// time; zero: never (`justonce gc` is run by other means).
    pub gc_every: Option<Duration>,
    /// `[sweep]`: how `serve` sweeps unknown outcomes a probe can decide.
    pub sweep: SweepSettings,
}

/// `[sweep]`: how `serve` sweeps unknown outcomes a probe can decide. Unset keys
/// leave the defaults (every 60 s, at most 20 probes, 10 s for a tool's probe).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepSettings {
    /// `every_seconds`: how often, one host of a journal at a time; zero: never.
    pub every: Option<Duration>,
    /// `max_probes`: at most this many probes a sweep.
    pub max_probes: Option<u32>,
    /// `probe_timeout_ms`: how long a tool's own probe (`reconcile`) may run, at
    /// most, at a retry or in a sweep.
    pub probe_timeout: Option<Duration>,
}

/// `[mcp]`: how `serve` treats calls. Unset keys leave `serve`'s defaults (or its
/// flags) in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpSettings {
    /// `unscoped`: what a call that names no conversation and no key gets.
    pub unscoped: Option<Unscoped>,
    /// `answer_within_ms`: how long a duplicate waits for the first call of its key
    /// before it is answered `in_progress` (retry-safe): below the time its client
    /// waits for an answer.
    pub answer_within: Option<Duration>,
    /// `task_after_ms`: how long a call from a client of the Tasks extension may
    /// run before it is answered with a task.
    pub task_after: Option<Duration>,
    /// `task_required`: the tools always answered with a task.
    pub task_required: std::collections::BTreeSet<String>,
    /// `ask_timeout_ms`: how long a call of a session's client waits for the answer
    /// to each question its tool asks (`elicitation/create`).
    pub ask_timeout: Option<Duration>,
    /// `drain_timeout_ms`: on SIGTERM, how long `serve` lets the calls in flight
    /// finish before it hands the rest over ([`crate::Host::hand_over`]) and exits.
    pub drain_timeout: Option<Duration>,
    /// `journal_wait_ms`: how long `serve` waits at start for a database that does
    /// not answer yet before it gives up.
    pub journal_wait: Option<Duration>,
}

/// `[oauth]`: `serve --http` as an OAuth 2.1 resource server (see
/// `crate::auth::oauth`). Unset keys take the defaults there (or the command line's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier.
    pub issuer: Option<String>,
    /// Its JWKS URL; default: the `jwks_uri` of its metadata.
    pub jwks_url: Option<String>,
    /// This resource's canonical URL, the audience of its tokens.
    pub resource: Option<String>,
    /// Scopes every token must grant.
    pub scopes: Option<Vec<String>>,
    /// The claim naming the principal (default `sub`).
    pub principal_claim: Option<String>,
    /// Written before the claim's value to make the principal (default `oauth:`); a
    /// prefix a token's name could start with is refused.
    pub principal_prefix: Option<String>,
    /// The role of OAuth principals (default `agent`).
    pub role: Option<String>,
    /// How far `exp` and `nbf` may be off the host's clock, in seconds.
    pub leeway_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tools_dir: Option<PathBuf>,
    database: Option<PathBuf>,
    password_file: Option<PathBuf>,
    retention_hours: Option<u64>,
    unscoped_retention_minutes: Option<u64>,
    durability: Option<RawDurability>,
    retry: Option<RawRetry>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    tools: BTreeMap<String, RawLimits>,
    tokens_file: Option<PathBuf>,
    telemetry: Option<RawTelemetry>,
    registry_secrets_file: Option<PathBuf>,
    #[serde(default)]
    registries: BTreeMap<String, RawRegistry>,
    oauth: Option<OAuthConfig>,
    mcp: Option<RawMcp>,
    host_name: Option<String>,
    gc_every_minutes: Option<u64>,
    sweep: Option<RawSweep>,
    #[serde(default, deserialize_with = "upstreams::in_file_order")]
    upstreams: Vec<(String, upstreams::RawUpstream)>,
}

/// `[sweep]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    every_seconds: Option<u64>,
    max_probes: Option<u32>,
    probe_timeout_ms: Option<u64>,
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    unscoped: Option<String>,
    answer_within_ms: Option<u64>,
    task_after_ms: Option<u64>,
    #[serde(default)]
    task_required: Vec<String>,
    ask_timeout_ms: Option<u64>,
    drain_timeout_ms: Option<u64>,
    journal_wait_ms: Option<u64>,
}

impl RawMcp {
    fn settings(self) -> std::result::Result<McpSettings, String> {
        let unscoped = self
            .unscoped
            .map(|text| {
                text.parse::<Unscoped>()
                    .map_err(|e| format!("`mcp.unscoped` {e}"))
            })
            .transpose()?;
        if let Some(ms) = self.answer_within_ms {
            require(ms >= 1, "mcp.answer_within_ms", "must be at least 1")?;
        }
        if let Some(ms) = self.ask_timeout_ms {
            require(ms >= 1, "mcp.ask_timeout_ms", "must be at least 1")?;
        }
        Ok(McpSettings {
            unscoped,
            answer_within: self.answer_within_ms.map(Duration::from_millis),
            task_after: self.task_after_ms.map(Duration::from_millis),
            task_required: self.task_required.into_iter().collect(),
            ask_timeout: self.ask_timeout_ms.map(Duration::from_millis),
            drain_timeout: self.drain_timeout_ms.map(Duration::from_millis),
            journal_wait: self.journal_wait_ms.map(Duration::from_millis),
        })
    }
}

/// `[registries."HOST"]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistry {
    secrets_file: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    otlp_endpoint: Option<String>,
}

impl RawTelemetry {
    fn endpoint(self) -> std::result::Result<Option<String>, String> {
        let Some(url) = self.otlp_endpoint else {
            return Ok(None);
        };
        let url = url.trim().to_owned();
        require(
            url.starts_with("http://") || url.starts_with("https://"),
            "telemetry.otlp_endpoint",
            &format!(
                "must be an http:// or https:// URL (the collector's OTLP/HTTP port, e.g. http://localhost:4318), not {url:?}"
            ),
        )?;
        Ok(Some(url))
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawDurability {
    Full,
    Normal,
}

impl From<RawDurability> for Durability {
    fn from(raw: RawDurability) -> Self {
        match raw {
            RawDurability::Full => Durability::Full,
            RawDurability::Normal => Durability::Normal,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    attempts: Option<u32>,
    initial_backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
    max_retry_after_ms: Option<u64>,
}

/// [`Config::pending_of`] where there may be no configuration: an upstream's probe
/// configured now, else what the guard journaled at the effect's claim (its
/// provider's probe or its tool's own `reconcile`, the person behind the agent, or
/// a person), else (an effect claimed by an older host) what the configuration
/// suggests; without any, a `person`.
pub fn pending_of(config: Option<&Config>, effect: &crate::journal::UnresolvedEffect) -> String {
    if effect.class != "unkeyed" {
        return "retry".into();
    }
    let upstream = effect
        .provider
        .strip_prefix(crate::upstream::PROVIDER_PREFIX)
        .and_then(|name| Some((name, config?.upstream(name)?)));
    if let Some((name, upstream)) = upstream
        && let Some(probe) = upstream.probes.get(&effect.operation)
    {
        return format!("probe {name}.{}", probe.tool);
    }
    match effect.ends_by.as_deref() {
        Some(probe) if probe.starts_with("probe ") => return probe.to_owned(),
        Some("ask_person") => return "person (asked at the call's retry)".into(),
        Some("person") => return "person".into(),
        _ => {}
    }
    let asks = upstream.is_some_and(|(_, u)| u.ask_person.contains_key(&effect.operation))
        || config.is_some_and(|c| c.ask_person.contains_key(&effect.tool));
    // An unkeyed HTTP service's status request is configured by service, which the
    // journal does not keep with the effect: named for what it may be.
    let http = effect.provider == "http";
    match (asks, http) {
        (true, true) => {
            "the service's status request if it has one, else person (asked at the call's retry)"
                .into()
        }
        (true, false) => "person (asked at the call's retry)".into(),
        (false, true) => "the service's status request if it has one, else person".into(),
        (false, false) => "person".into(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    deadline_ms: Option<u64>,
    wall_clock_ms: Option<u64>,
    memory_mib: Option<u64>,
    fuel: Option<u64>,
    max_args_bytes: Option<usize>,
    max_payload_bytes: Option<usize>,
    max_result_bytes: Option<usize>,
    max_effects: Option<u32>,
    max_output_bytes: Option<usize>,
    /// Only in `[tools.NAME]`: not a sandbox limit, but how long its records are kept.
    retention_hours: Option<u64>,
    /// Only in `[tools.NAME]`: the OCI reference the tool's component is pulled from.
    source: Option<String>,
    /// Only in `[tools.NAME]`: origins and service names the tool may reach over HTTP.
    allow: Option<Vec<String>>,
    /// Only in `[tools.NAME]`: whether `serve` offers the tool over MCP (default true).
    mcp: Option<bool>,
    /// Only in `[tools.NAME]`: the question the person behind the agent is asked about
    /// an unkeyed effect of the tool whose outcome is unknown (`crate::ask_person`).
    ask_person: Option<String>,
}

/// `Err("`{key}` {problem}")` unless `ok`.
fn require(ok: bool, key: &str, problem: &str) -> std::result::Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("`{key}` {problem}"))
    }
}

impl RawLimits {
    /// These settings over `base`; `section` is the table's name for messages.
    fn over(&self, base: &Limits, section: &str) -> std::result::Result<Limits, String> {
        let key = |name: &str| format!("{section}.{name}");
        let at_least_one = |value: Option<u64>, name: &str| match value {
            Some(0) => Err(format!("`{}` must be at least 1", key(name))),
            _ => Ok(()),
        };
        at_least_one(self.deadline_ms, "deadline_ms")?;
        at_least_one(self.wall_clock_ms, "wall_clock_ms")?;
        at_least_one(self.memory_mib, "memory_mib")?;
        at_least_one(self.fuel, "fuel")?;
        for (name, value) in [
            ("max_args_bytes", self.max_args_bytes),
            ("max_payload_bytes", self.max_payload_bytes),
            ("max_result_bytes", self.max_result_bytes),
        ] {
            at_least_one(value.map(|v| v as u64), name)?;
        }
        if let Some(mib) = self.memory_mib {
            require(
                mib <= MAX_MEMORY_MIB,
                &key("memory_mib"),
                &format!("must be at most {MAX_MEMORY_MIB} (a guest's 32-bit address space)"),
            )?;
        }
        Ok(Limits {
            deadline: self
                .deadline_ms
                .map_or(base.deadline, Duration::from_millis),
            wall_clock: self
                .wall_clock_ms
                .map_or(base.wall_clock, Duration::from_millis),
            memory_bytes: self
                .memory_mib
                .map_or(base.memory_bytes, |mib| (mib as usize) << 20),
            fuel: self.fuel.or(base.fuel),
            max_args_bytes: self.max_args_bytes.unwrap_or(base.max_args_bytes),
            max_payload_bytes: self.max_payload_bytes.unwrap_or(base.max_payload_bytes),
            max_result_bytes: self.max_result_bytes.unwrap_or(base.max_result_bytes),
            max_effects: self.max_effects.unwrap_or(base.max_effects),
            max_output_bytes: self.max_output_bytes.unwrap_or(base.max_output_bytes),
        })
    }
}

impl RawRetry {
    fn policy(&self) -> std::result::Result<RetryPolicy, String> {
        let base = RetryPolicy::default();
        if let Some(attempts) = self.attempts {
            require(attempts >= 1, "retry.attempts", "must be at least 1")?;
        }
        let policy = RetryPolicy {
            max_attempts: self.attempts.unwrap_or(base.max_attempts),
            initial_backoff: self
                .initial_backoff_ms
                .map_or(base.initial_backoff, Duration::from_millis),
            max_backoff: self
                .max_backoff_ms
                .map_or(base.max_backoff, Duration::from_millis),
            max_retry_after: self
                .max_retry_after_ms
                .map_or(base.max_retry_after, Duration::from_millis),
        };
        require(
            policy.initial_backoff <= policy.max_backoff,
            "retry.initial_backoff_ms",
            "must not be more than `retry.max_backoff_ms`",
        )?;
        Ok(policy)
    }
}

/// `hours` as a duration.
fn hours_of(hours: u64) -> Duration {
    Duration::from_secs(hours.saturating_mul(3600))
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(0, |t| t.matches('\n').count()) + 1
}

impl Config {
    /// Reads and checks the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            reason: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Reads the configuration file next to the database `db`, if there is one.
    pub fn beside(db: &Path) -> Result<Option<Self>> {
        let dir = db.parent().unwrap_or(Path::new(""));
        let path = dir.join(FILE_NAME);
        if path.is_file() {
            Self::load(&path).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Checks the TOML `text` as if it were read from `path` (relative paths in it are
    /// resolved against `path`'s directory).
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let error = |reason: String| Error::Config {
            path: path.to_path_buf(),
            reason,
        };
        let deserializer = toml::de::Deserializer::parse(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(text, s.start));
            error(format!("line {line}: {}", e.message().trim_end()))
        })?;
        let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let line = e.inner().span().map_or(0, |s| line_of(text, s.start));
            let message = e.inner().message().trim_end().to_string();
            match e.path().to_string().as_str() {
                "." => error(format!("line {line}: {message}")),
                key => error(format!("`{key}` (line {line}): {message}")),
            }
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        if let Some(hours) = raw.retention_hours {
            require(hours >= 1, "retention_hours", "must be at least 1").map_err(error)?;
        }
        if let Some(minutes) = raw.unscoped_retention_minutes {
            require(
                minutes >= 1,
                "unscoped_retention_minutes",
                "must be at least 1",
            )
            .map_err(error)?;
        }
        require(
            raw.limits.retention_hours.is_none(),
            "limits.retention_hours",
            "is not a limit: set `retention_hours` at the top level, or in [tools.NAME] for one tool",
        )
        .map_err(error)?;
        for (key, set) in [
            ("source", raw.limits.source.is_some()),
            ("allow", raw.limits.allow.is_some()),
            ("mcp", raw.limits.mcp.is_some()),
            ("ask_person", raw.limits.ask_person.is_some()),
        ] {
            require(
                !set,
                &format!("limits.{key}"),
                "is not a limit: set it in [tools.NAME] for one tool",
            )
            .map_err(error)?;
        }
        let tool_allow: BTreeMap<String, Vec<String>> = raw
            .tools
            .iter()
            .filter_map(|(name, t)| Some((name.clone(), t.allow.clone()?)))
            .collect();
        let mut ask_person = BTreeMap::new();
        for (name, section) in &raw.tools {
            if let Some(template) = &section.ask_person {
                crate::ask_person::check_template(template, &format!("tools.{name}.ask_person"))
                    .map_err(error)?;
                ask_person.insert(name.clone(), template.clone());
            }
        }
        let hidden_from_mcp = raw
            .tools
            .iter()
            .filter(|(_, t)| t.mcp == Some(false))
            .map(|(name, _)| name.clone())
            .collect();
        let mut sources = BTreeMap::new();
        for (name, section) in &raw.tools {
            if let Some(source) = &section.source {
                let reference = source
                    .parse::<Reference>()
                    .map_err(|why| error(format!("`tools.{name}.source`: {why}")))?;
                sources.insert(name.clone(), reference);
            }
        }
        let mut registry_logins = BTreeMap::new();
        for (registry, section) in raw.registries {
            let probe = format!("{}{registry}/a:v1", crate::registry::SCHEME);
            require(
                probe
                    .parse::<Reference>()
                    .is_ok_and(|r| r.registry == registry),
                &format!("registries.\"{registry}\""),
                "must be named after a registry as sources name it: HOST or HOST:PORT",
            )
            .map_err(error)?;
            registry_logins.insert(registry, dir.join(section.secrets_file));
        }
        let lock = if sources.is_empty() {
            Ok(LockFile::default())
        } else {
            LockFile::read(&lock_path_beside(path))
        };
        let mut upstreams = Vec::new();
        for (name, section) in raw.upstreams {
            let config = section.checked(&name, dir).map_err(error)?;
            upstreams.push((name, config));
        }
        let mut tool_retention = BTreeMap::new();
        for (name, section) in &raw.tools {
            if let Some(hours) = section.retention_hours {
                require(
                    hours >= 1,
                    &format!("tools.{name}.retention_hours"),
                    "must be at least 1",
                )
                .map_err(error)?;
                tool_retention.insert(name.clone(), hours_of(hours));
            }
        }
        let defaults = raw
            .limits
            .over(&Limits::default(), "limits")
            .map_err(error)?;
        let mut tools = BTreeMap::new();
        for (name, section) in &raw.tools {
            let limits = section
                .over(&defaults, &format!("tools.{name}"))
                .map_err(error)?;
            tools.insert(name.clone(), limits);
        }
        Ok(Self {
            path: path.to_path_buf(),
            tools_dir: raw.tools_dir.map(|p| dir.join(p)),
            database: raw.database.map(|p| {
                if crate::journal::postgres::is_postgres_url(&p.to_string_lossy()) {
                    p
                } else {
                    dir.join(p)
                }
            }),
            password_file: raw.password_file.map(|p| dir.join(p)),
            retention: raw.retention_hours.map(hours_of),
            unscoped_retention: raw
                .unscoped_retention_minutes
                .map(|m| Duration::from_secs(m.saturating_mul(60))),
            tool_retention,
            durability: raw.durability.map(Durability::from),
            retry: raw.retry.map(|r| r.policy()).transpose().map_err(error)?,
            limits: ToolLimits { defaults, tools },
            tokens_file: raw.tokens_file.map(|p| dir.join(p)),
            otlp_endpoint: raw
                .telemetry
                .map(RawTelemetry::endpoint)
                .transpose()
                .map_err(error)?
                .flatten(),
            sources,
            lock,
            registry_secrets_file: raw.registry_secrets_file.map(|p| dir.join(p)),
            registry_logins,
            tool_allow,
            hidden_from_mcp,
            ask_person,
            oauth: raw.oauth,
            mcp: raw
                .mcp
                .map(RawMcp::settings)
                .transpose()
                .map_err(error)?
                .unwrap_or_default(),
            host_name: raw
                .host_name
                .map(|name| {
                    crate::journal::HostIdentity::named(&name)
                        .map_err(|e| error(format!("host_name: {e}")))
                })
                .transpose()?,
            upstreams,
            gc_every: raw
                .gc_every_minutes
                .map(|m| Duration::from_secs(m.saturating_mul(60))),
            sweep: raw
                .sweep
                .map_or_else(SweepSettings::default, |s| SweepSettings {
                    every: s.every_seconds.map(Duration::from_secs),
                    max_probes: s.max_probes,
                    probe_timeout: s.probe_timeout_ms.map(Duration::from_millis),
                }),
        })
    }
}

impl Config {
    /// The upstream `[upstreams.NAME]`, if the file names it.
    pub fn upstream(&self, name: &str) -> Option<&crate::upstream::UpstreamConfig> {
        self.upstreams
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, config)| config)
    }

    /// What the unresolved `effect` waits for under this configuration (`journal
    /// --unresolved` and the console show it): an unkeyed one its upstream's probe
    /// (`probe UPSTREAM.TOOL`, asked at its call's next retry), else the person
    /// behind the agent where its tool opts in (`person (asked at the call's
    /// retry)`), else a `person` (an operator's `justonce resolve`); a keyed one the
    /// call's `retry`.
    pub fn pending_of(&self, effect: &crate::journal::UnresolvedEffect) -> String {
        pending_of(Some(self), effect)
    }

    /// Where the registry logins are read from: `registry_secrets_file` and each
    /// `[registries."HOST"] secrets_file`.
    pub fn login_sources(&self) -> LoginSources {
        LoginSources {
            global_file: self.registry_secrets_file.clone(),
            per_registry: self.registry_logins.clone(),
        }
    }
}

impl HostBuilder {
    /// Applies a configuration file: its tools directory, database, retention windows,
    /// retry policy and limits. Later builder calls override it.
    pub fn config(mut self, config: &Config) -> Self {
        if let Some(dir) = &config.tools_dir {
            self = self.tools_dir(dir);
        }
        if let Some(db) = &config.database {
            self = self.database(db);
        }
        if let Some(path) = &config.password_file {
            self = self.password_file(path);
        }
        if let Some(retention) = config.retention {
            self = self.retention(retention);
        }
        if let Some(window) = config.unscoped_retention {
            self = self.unscoped_retention(window);
        }
        for (tool, retention) in &config.tool_retention {
            self = self.tool_retention(tool.clone(), *retention);
        }
        if let Some(durability) = config.durability {
            self = self.durability(durability);
        }
        if let Some(retry) = &config.retry {
            self = self.retry_policy(retry.clone());
        }
        if let Some(timeout) = config.sweep.probe_timeout {
            self = self.probe_timeout(timeout);
        }
        self = self.tool_sources_of(config);
        for (tool, entries) in &config.tool_allow {
            self = self.tool_allow(tool.clone(), entries.clone());
        }
        for tool in &config.hidden_from_mcp {
            self = self.hide_from_mcp(tool.clone());
        }
        for (tool, question) in &config.ask_person {
            self = self.ask_person(tool.clone(), question.clone());
        }
        for (name, upstream) in &config.upstreams {
            self = self.upstream(name.clone(), upstream.clone());
        }
        self = self.limits(config.limits.defaults.clone());
        for (tool, limits) in &config.limits.tools {
            self = self.tool_limits(tool.clone(), limits.clone());
        }
        self
    }
}

impl HostBuilder {
    /// The configuration's `[tools.NAME] source`s, pinned by their digests or the lock
    /// file, and where the registry credentials are read from.
    pub(crate) fn tool_sources_of(mut self, config: &Config) -> Self {
        for (tool, source) in &config.sources {
            self = self.tool_source_pinned_by(tool.clone(), source, &config.lock);
        }
        if let Some(path) = &config.registry_secrets_file {
            self = self.registry_secrets_file(path);
        }
        for (registry, path) in &config.registry_logins {
            self = self.registry_login_file(registry, path);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/etc/justonce/justonce.toml"))
    }

    fn reason(text: &str) -> String {
        match parse(text) {
            Err(Error::Config { reason, .. }) => reason,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn an_oauth_table_is_read_as_written_and_an_unknown_key_in_it_is_named() {
        let config = parse(
            "[oauth]\nissuer = \"https://auth.example.com\"\nscopes = [\"mcp:tools\"]\nrole = \"agent\"",
        )
        .unwrap();
        let oauth = config.oauth.unwrap();
        assert_eq!(oauth.issuer.as_deref(), Some("https://auth.example.com"));
        assert_eq!(oauth.scopes, Some(vec!["mcp:tools".to_owned()]));
        assert_eq!(
            (oauth.resource, oauth.role.as_deref()),
            (None, Some("agent"))
        );
        let why = reason("[oauth]\naudience = \"https://mcp.example.com/mcp\"");
        assert!(why.contains("oauth") && why.contains("audience"), "{why}");
    }

    #[test]
    fn the_mcp_table_sets_unscoped_calls_and_the_answer_by_time() {
        let config = parse("[mcp]\nunscoped = \"refuse\"\nanswer_within_ms = 2500").unwrap();
        assert_eq!(config.mcp.unscoped, Some(Unscoped::Refuse));
        assert_eq!(config.mcp.answer_within, Some(Duration::from_millis(2500)));
        assert_eq!(
            parse("[mcp]\nunscoped = \"window\"").unwrap().mcp.unscoped,
            Some(Unscoped::Window)
        );
        assert_eq!(parse("").unwrap().mcp, McpSettings::default());
        let why = reason("[mcp]\nunscoped = \"drop\"");
        assert!(
            why.contains("mcp.unscoped") && why.contains("refuse"),
            "{why}"
        );
        let why = reason("[mcp]\nanswer_within_ms = 0");
        assert!(why.contains("mcp.answer_within_ms"), "{why}");
        let asks = parse("[mcp]\nask_timeout_ms = 90000").unwrap();
        assert_eq!(asks.mcp.ask_timeout, Some(Duration::from_secs(90)));
        let why = reason("[mcp]\nask_timeout_ms = 0");
        assert!(why.contains("mcp.ask_timeout_ms"), "{why}");
        let why = reason("[mcp]\nwait_ms = 5");
        assert!(why.contains("wait_ms"), "{why}");
    }

    /// `host_name` names this host in leases, logs and the console; a name a lease
    /// owner cannot carry is refused naming the key.
    #[test]
    fn host_name_names_this_host_and_a_bad_one_is_refused() {
        let config = parse("host_name = \"web-1\"").unwrap();
        assert_eq!(config.host_name.map(|h| h.name).as_deref(), Some("web-1"));
        assert_eq!(parse("").unwrap().host_name, None);
        let why = reason("host_name = \"web 1@x\"");
        assert!(
            why.contains("host_name") && why.contains("web 1@x"),
            "{why}"
        );
    }

    #[test]
    fn each_registry_names_its_own_login_file_and_a_bad_registry_name_is_named() {
        let config = parse(
            "registry_secrets_file = \"registry.env\"\n[registries.\"ghcr.io\"]\nsecrets_file = \"ghcr.env\"\n[registries.\"127.0.0.1:5000\"]\nsecrets_file = \"/run/local.env\"\n",
        )
        .unwrap();
        let sources = config.login_sources();
        assert_eq!(
            sources.global_file.as_deref(),
            Some(Path::new("/etc/justonce/registry.env"))
        );
        assert_eq!(
            sources.per_registry,
            BTreeMap::from([
                ("127.0.0.1:5000".to_owned(), PathBuf::from("/run/local.env")),
                (
                    "ghcr.io".to_owned(),
                    PathBuf::from("/etc/justonce/ghcr.env")
                ),
            ])
        );
        let why = reason("[registries.\"https://ghcr.io\"]\nsecrets_file = \"g.env\"");
        assert!(why.contains("registries.") && why.contains("HOST"), "{why}");
        let why = reason("[registries.\"ghcr.io\"]\nusername = \"me\"");
        assert!(why.contains("username"), "{why}");
    }

    #[test]
    fn durability_is_full_or_normal_and_nothing_else() {
        assert_eq!(
            parse("durability = \"normal\"").unwrap().durability,
            Some(Durability::Normal)
        );
        assert_eq!(
            parse("durability = \"full\"").unwrap().durability,
            Some(Durability::Full)
        );
        assert_eq!(parse("").unwrap().durability, None);
        let why = reason("durability = \"fast\"");
        assert!(why.contains("durability"), "{why}");
    }

    #[test]
    fn a_postgres_url_is_kept_as_written_and_a_relative_path_is_beside_the_file() {
        let url = "postgres://justonce@db.internal:5432/journal";
        let config = parse(&format!("database = \"{url}\"")).unwrap();
        assert_eq!(config.database.as_deref(), Some(Path::new(url)));
        let config = parse("database = \"state.db\"").unwrap();
        assert_eq!(
            config.database.as_deref(),
            Some(Path::new("/etc/justonce/state.db"))
        );
        assert_eq!(config.password_file, None);
    }

    #[test]
    fn a_password_file_is_beside_the_configuration_file() {
        let config =
            parse("database = \"postgres://justonce@db/journal\"\npassword_file = \"secrets/db\"")
                .unwrap();
        assert_eq!(
            config.password_file.as_deref(),
            Some(Path::new("/etc/justonce/secrets/db"))
        );
    }

    #[test]
    fn a_full_file_sets_everything_and_tool_sections_inherit_from_limits() {
        let config = parse(
            r#"
            tools_dir = "tools"
            database = "/var/lib/justonce/state.db"
            retention_hours = 48
            [retry]
            attempts = 5
            initial_backoff_ms = 10
            max_backoff_ms = 50
            [limits]
            deadline_ms = 2500
            memory_mib = 32
            max_effects = 7
            [tools.send_receipt]
            deadline_ms = 100
            fuel = 1000000
            "#,
        )
        .unwrap();
        assert_eq!(
            config.tools_dir.as_deref(),
            Some(Path::new("/etc/justonce/tools"))
        );
        assert_eq!(
            config.database.as_deref(),
            Some(Path::new("/var/lib/justonce/state.db"))
        );
        assert_eq!(config.retention, Some(Duration::from_secs(48 * 3600)));
        assert_eq!(config.retry.as_ref().unwrap().max_attempts, 5);
        let defaults = &config.limits.defaults;
        assert_eq!(defaults.deadline, Duration::from_millis(2500));
        assert_eq!(defaults.memory_bytes, 32 << 20);
        assert_eq!(defaults.max_args_bytes, Limits::default().max_args_bytes);
        let tool = config.limits.for_tool("send_receipt");
        assert_eq!(tool.deadline, Duration::from_millis(100));
        assert_eq!(tool.fuel, Some(1_000_000));
        assert_eq!(tool.max_effects, 7, "inherited from [limits]");
        assert_eq!(config.limits.for_tool("refund"), defaults);
    }

    #[test]
    fn the_unscoped_window_and_a_tools_retention_are_read_and_checked() {
        let config = parse(
            "unscoped_retention_minutes = 30\n[tools.nightly]\nretention_hours = 48\ndeadline_ms = 5\n",
        )
        .unwrap();
        assert_eq!(
            config.unscoped_retention,
            Some(Duration::from_secs(30 * 60))
        );
        assert_eq!(
            config.tool_retention.get("nightly"),
            Some(&Duration::from_secs(48 * 3600))
        );
        assert_eq!(
            config.limits.for_tool("nightly").deadline,
            Duration::from_millis(5)
        );
        let r = reason("unscoped_retention_minutes = 0\n");
        assert!(
            r.contains("`unscoped_retention_minutes` must be at least 1"),
            "{r}"
        );
        let r = reason("[tools.nightly]\nretention_hours = 0\n");
        assert!(
            r.contains("`tools.nightly.retention_hours` must be at least 1"),
            "{r}"
        );
        let r = reason("[limits]\nretention_hours = 5\n");
        assert!(r.contains("`limits.retention_hours` is not a limit"), "{r}");
    }

    #[test]
    fn a_tools_section_holds_its_source_allowlist_and_mcp_exposure_and_limits_holds_none() {
        let config = parse(
            "[tools.refund]\nsource = \"oci://127.0.0.1:5000/shop/refund:v1\"\nallow = [\"payments\"]\nmcp = false\nask_person = \"Refund {body.amount}?\"\n[tools.echo]\nmcp = true\n",
        )
        .unwrap();
        assert_eq!(config.ask_person["refund"], "Refund {body.amount}?");
        assert!(!config.ask_person.contains_key("echo"));
        assert_eq!(
            config.sources["refund"].to_string(),
            "oci://127.0.0.1:5000/shop/refund:v1"
        );
        assert_eq!(config.tool_allow["refund"], ["payments"]);
        assert!(config.hidden_from_mcp.contains("refund"));
        assert!(!config.hidden_from_mcp.contains("echo"));
        assert_eq!(config.lock, Ok(LockFile::default()), "no lock file yet");
        for key in [
            "source = \"oci://r/a:v1\"",
            "allow = []",
            "mcp = false",
            "ask_person = \"Did it?\"",
        ] {
            let r = reason(&format!("[limits]\n{key}\n"));
            assert!(r.contains("is not a limit"), "{r}");
        }
        let r = reason("[tools.refund]\nask_person = \"Did {amount} go?\"\n");
        assert!(
            r.contains("`tools.refund.ask_person` names `{amount}`"),
            "{r}"
        );
        let r = reason("[tools.refund]\nsource = \"https://r/a:v1\"\n");
        assert!(
            r.contains("`tools.refund.source`") && r.contains("oci://"),
            "{r}"
        );
    }

    #[test]
    fn an_empty_file_changes_nothing() {
        let config = parse("").unwrap();
        assert_eq!(config.limits, ToolLimits::default());
        assert_eq!(
            (config.retry, config.retention, config.database),
            (None, None, None)
        );
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let r = reason("[limits]\ndeadline = 5\n");
        assert!(
            r.contains("`limits.deadline` (line 2): unknown field"),
            "{r}"
        );
        assert!(r.contains("deadline_ms"), "says what is expected: {r}");
        let r = reason("[tools.echo]\nmemory_mb = 5\n");
        assert!(r.contains("`tools.echo.memory_mb`"), "{r}");
        let r = reason("databse = \"x.db\"\n");
        assert!(r.contains("`databse`"), "{r}");
    }

    #[test]
    fn bad_values_are_errors_that_name_the_key() {
        let r = reason("[limits]\ndeadline_ms = \"ten seconds\"\n");
        assert!(
            r.contains("`limits.deadline_ms`") && r.contains("line 2"),
            "{r}"
        );
        let r = reason("[limits]\nmemory_mib = -1\n");
        assert!(r.contains("`limits.memory_mib`"), "{r}");
        let r = reason("[tools.echo]\ndeadline_ms = 0\n");
        assert!(
            r.contains("`tools.echo.deadline_ms` must be at least 1"),
            "{r}"
        );
        let r = reason("[limits]\nmemory_mib = 5000\n");
        assert!(
            r.contains("`limits.memory_mib` must be at most 4096"),
            "{r}"
        );
        let r = reason("[retry]\nattempts = 0\n");
        assert!(r.contains("`retry.attempts`"), "{r}");
        let r = reason("retention_hours = 0\n");
        assert!(r.contains("`retention_hours`"), "{r}");
        let r = reason("[limits\n");
        assert!(r.contains("line 1"), "{r}");
    }

    #[test]
    fn the_otlp_endpoint_is_an_http_url_and_a_typo_in_its_table_is_named() {
        let config = parse("[telemetry]\notlp_endpoint = \"http://collector:4318\"\n").unwrap();
        assert_eq!(
            config.otlp_endpoint.as_deref(),
            Some("http://collector:4318")
        );
        assert_eq!(parse("[telemetry]\n").unwrap().otlp_endpoint, None);
        let r = reason("[telemetry]\notlp_endpoint = \"collector:4317\"\n");
        assert!(
            r.contains("`telemetry.otlp_endpoint` must be an http:// or https:// URL"),
            "{r}"
        );
        let r = reason("[telemetry]\nendpoint = \"http://collector:4318\"\n");
        assert!(r.contains("`telemetry.endpoint`"), "{r}");
    }
}
