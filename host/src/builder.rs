//! [`HostBuilder`]: wires the engine and tools, the journal, the providers and the
//! guard's policy into a [`Host`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock, millis};
use crate::error::{Error, Result};
use crate::fault;
use crate::guard::{GatewayRunner, Guard, Policy, Shared, WasmRunner};
use crate::host::Host;
use crate::http::HttpConfig;
use crate::journal::{self, Durability};
use crate::provider::Provider;
use crate::providers::{HttpProvider, InjectedFault, KvProvider, MailProvider, OutboxProvider};
use crate::registry::{
    self, BlobCache, Credentials, LockFile, LoginSources, Logins, Reference, RegistryClient,
};
use crate::retention::Retention;
use crate::retry::RetryPolicy;
use crate::runtime::{Limits, Runtime, ToolLimits};

mod reload;

pub use reload::Reload;

/// Builds a [`Host`].
pub struct HostBuilder {
    database: Option<PathBuf>,
    password_file: Option<PathBuf>,
    durability: Durability,
    clock: Arc<dyn Clock>,
    retention: Duration,
    unscoped_retention: Option<Duration>,
    tool_retention: BTreeMap<String, Duration>,
    lease: Duration,
    wait_bound: Duration,
    poll: Duration,
    /// How long a tool's `reconcile` may run, at most.
    probe_timeout: Duration,
    retry: RetryPolicy,
    limits: Option<Limits>,
    tool_limits: BTreeMap<String, Limits>,
    providers: BTreeMap<String, Arc<dyn Provider>>,
    /// Faults injected into the providers (`serve --fault`); none by default.
    faults: Vec<InjectedFault>,
    runtime: Option<Arc<Runtime>>,
    components: Vec<(PathBuf, Option<Vec<u8>>)>,
    tools_dir: Option<PathBuf>,
    example_tools: bool,
    lose_first_mail_responses: u32,
    http: HttpConfig,
    http_config_file: Option<PathBuf>,
    /// `None`: beside the database; `Some(None)`: no cache.
    compile_cache: Option<Option<PathBuf>>,
    /// Told before a large component is compiled.
    compile_notice: Option<crate::runtime::CompileNotice>,
    /// Tests only: a PostgreSQL journal's clock is [`HostBuilder::clock`].
    database_clock_is_host_clock: bool,
    /// Tools from OCI registries: name → pinned reference, or why it is not pinned.
    sources: BTreeMap<String, std::result::Result<Reference, String>>,
    /// Logins given by [`HostBuilder::registry_credentials`]; `None`: read them.
    registry_logins: Option<Logins>,
    registry_login_sources: LoginSources,
    /// `None`: beside the compiled-component cache.
    blob_cache: Option<PathBuf>,
    /// Per tool: origins and service names added to the HTTP allowlist.
    tool_allow: BTreeMap<String, Vec<String>>,
    hidden_from_mcp: std::collections::BTreeSet<String>,
    /// `[tools.NAME] ask_person`: the question each tool's unknown unkeyed effects
    /// put to the person behind the agent.
    ask_person: BTreeMap<String, String>,
    /// The host as its leases and log lines name it; `None`: the machine's hostname.
    identity: Option<crate::journal::HostIdentity>,
    /// Upstream MCP servers whose tools the host offers under the guard.
    upstreams: Vec<(String, crate::upstream::UpstreamConfig)>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self {
            database: None,
            password_file: None,
            durability: Durability::default(),
            clock: Arc::new(SystemClock),
            retention: Duration::from_secs(24 * 60 * 60),
            unscoped_retention: None,
            tool_retention: BTreeMap::new(),
            lease: Duration::from_secs(60),
            wait_bound: Duration::from_secs(30),
            poll: Duration::from_millis(20),
            probe_timeout: crate::guard::RECONCILE_TIMEOUT,
            retry: RetryPolicy::default(),
            limits: None,
            tool_limits: BTreeMap::new(),
            providers: BTreeMap::new(),
            faults: Vec::new(),
            runtime: None,
            components: Vec::new(),
            tools_dir: None,
            example_tools: false,
            lose_first_mail_responses: 0,
            http: HttpConfig::default(),
            http_config_file: None,
            compile_cache: None,
            compile_notice: None,
            database_clock_is_host_clock: false,
            sources: BTreeMap::new(),
            registry_logins: None,
            registry_login_sources: LoginSources::default(),
            blob_cache: None,
            tool_allow: BTreeMap::new(),
            hidden_from_mcp: std::collections::BTreeSet::new(),
            ask_person: BTreeMap::new(),
            identity: None,
            upstreams: Vec::new(),
        }
    }
}

impl HostBuilder {
    /// Names this host in the leases it journals and in its log lines (`--host-name`;
    /// the machine's hostname by default), so that `journal` and the console say which
    /// host runs a call, or whose lease ended.
    pub fn identity(mut self, identity: crate::journal::HostIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Keeps the journal in the SQLite file at `path` (created with its directory),
    /// or, for a `postgres://USER@HOST:PORT/DB` URL, in that PostgreSQL database,
    /// which several hosts may share (the password from the URL, else `PGPASSWORD`,
    /// else [`password_file`](Self::password_file), else `PGPASSFILE` or
    /// `~/.pgpass`). Without it the journal lives in memory.
    pub fn database(mut self, path: impl Into<PathBuf>) -> Self {
        self.database = Some(path.into());
        self
    }

    /// Reads a PostgreSQL journal's password from the first line of the file at
    /// `path` when neither the URL nor `PGPASSWORD` gives one. The password never
    /// appears in logs or errors; a file that cannot be read is named.
    pub fn password_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.password_file = Some(path.into());
        self
    }

    /// How durable each commit is; [`Durability::Full`] by default.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Tests only: a PostgreSQL journal decides leases, expiry and gc on the
    /// builder's [`clock`](HostBuilder::clock), as if it were the database's (in
    /// production the database's own clock decides, never a host's).
    #[doc(hidden)]
    pub fn database_clock_is_host_clock(mut self) -> Self {
        self.database_clock_is_host_clock = true;
        self
    }

    /// The clock retention and leases are measured on (on PostgreSQL the database's
    /// clock decides them; this one labels).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long the records of calls in a conversation (or with an explicit key) are
    /// kept after they complete; older ones are treated as absent (default 24 h).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How long the records of calls that name no conversation are kept (default
    /// 10 min, or the [`retention`](Self::retention) if that is shorter): such a
    /// call is scoped by its principal alone, so the same call again later is a new
    /// one (the second refund next morning).
    pub fn unscoped_retention(mut self, window: Duration) -> Self {
        self.unscoped_retention = Some(window);
        self
    }

    /// How long the records of `tool`'s calls are kept, conversation or not,
    /// replacing both windows above for it (a nightly job that must not run twice
    /// in two days).
    pub fn tool_retention(mut self, tool: impl Into<String>, retention: Duration) -> Self {
        self.tool_retention.insert(tool.into(), retention);
        self
    }

    /// Opts `tool` in to asking the person behind the agent, at the agent's retry,
    /// whether an unkeyed effect of it whose outcome is unknown went through, where
    /// no probe decides: `question` is the yes-or-no question's text, a template
    /// filled in from the effect (`{key}`, `{payload.NAME}`, `{body.NAME}`, …; see
    /// docs/tool-authors.md). Asked through the client's elicitation; the answer is
    /// journaled as the effect's resolution, decided by `person`.
    pub fn ask_person(mut self, tool: impl Into<String>, question: impl Into<String>) -> Self {
        self.ask_person.insert(tool.into(), question.into());
        self
    }

    /// How long a running invocation's lease lasts before another host may take over.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a duplicate waits for a running original before `in_progress`.
    pub fn wait_bound(mut self, bound: Duration) -> Self {
        self.wait_bound = bound;
        self
    }

    /// How long a tool's own probe (its component's `reconcile`) may run, at most
    /// (its deadline and wall-clock cap; the tool's limits when shorter). Default
    /// 10 s.
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// The retry policy for effects whose outcome is unknown.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The sandbox limits of every tool without limits of its own (default: those of
    /// the runtime, [`Limits::default`] unless a shared [`Runtime`] says otherwise).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The sandbox limits of the tool called `tool`, replacing the defaults for it.
    pub fn tool_limits(mut self, tool: impl Into<String>, limits: Limits) -> Self {
        self.tool_limits.insert(tool.into(), limits);
        self
    }

    /// Registers a provider under `name`, replacing a built-in one of that name.
    /// The names the host keeps for itself, `user` (a tool's questions to the person
    /// behind the agent) and those starting with `mcp:` (the upstream MCP servers, see
    /// [`HostBuilder::upstream`]), are refused by [`HostBuilder::build`] with
    /// [`Error::ReservedProvider`].
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.into(), provider);
        self
    }

    /// Offers the tools of the MCP server `config` describes, under the guard: each
    /// call is an invocation whose one effect is the upstream `tools/call`, journaled
    /// on the provider `mcp:NAME` before it is sent (`[upstreams.NAME]`).
    pub fn upstream(
        mut self,
        name: impl Into<String>,
        config: crate::upstream::UpstreamConfig,
    ) -> Self {
        self.upstreams.push((name.into(), config));
        self
    }

    /// Injects `faults` into the providers they target (a provider's or a tool's
    /// name), for testing an agent loop against "the effect lands, the response is
    /// lost" and a late answer. Never for production: the caller says so loudly.
    pub fn inject_faults(mut self, faults: Vec<InjectedFault>) -> Self {
        self.faults = faults;
        self
    }

    /// Makes the built-in `mail` provider lose the response of the first `n` attempts
    /// for each key (after recording the email), as a timeout would.
    pub fn lose_first_mail_responses(mut self, n: u32) -> Self {
        self.lose_first_mail_responses = n;
        self
    }

    /// How the built-in `http` and `outbox` providers and webhook delivery reach
    /// HTTP downstreams: the per-tool allowlist (deny by default), named services,
    /// the idempotency header, the timeout and the response cap.
    pub fn http(mut self, config: HttpConfig) -> Self {
        self.http = config;
        self.http_config_file = None;
        self
    }

    /// Reads the HTTP config from a JSON file when the host is built (see
    /// [`HttpConfig`]); replaces [`HostBuilder::http`].
    pub fn http_config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.http_config_file = Some(path.into());
        self
    }

    /// Uses an already-loaded runtime (engine and compiled tools) instead of loading
    /// components; lets many hosts share one compilation.
    pub fn runtime(mut self, runtime: Arc<Runtime>) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Loads the component file at `path`.
    pub fn component(mut self, path: impl Into<PathBuf>) -> Self {
        self.components.push((path.into(), None));
        self
    }

    /// Loads every `*.wasm` component in `dir`.
    pub fn tools_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tools_dir = Some(dir.into());
        self
    }

    /// Loads the example tools built into this binary (`send_receipt`, `refund`).
    pub fn example_tools(mut self) -> Self {
        self.example_tools = true;
        self
    }

    /// Keeps compiled components in `dir` so the next process loads them without
    /// compiling (see [`Runtime::set_compile_cache`]). By default a host with a
    /// database (SQLite or PostgreSQL) uses the per-user cache that every journal
    /// shares: `$JUSTONCE_CACHE_DIR`, else `$XDG_CACHE_HOME/justonce`, else
    /// `~/.cache/justonce`); an in-memory host keeps none.
    pub fn compile_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.compile_cache = Some(Some(dir.into()));
        self
    }

    /// Calls `notice` before a large component that the compile cache does not hold
    /// is compiled (see [`Runtime::on_compile`]); the CLI prints a line.
    pub fn on_compile(mut self, notice: crate::runtime::CompileNotice) -> Self {
        self.compile_notice = Some(notice);
        self
    }

    /// Compiles every component at load, with no on-disk cache.
    pub fn no_compile_cache(mut self) -> Self {
        self.compile_cache = Some(None);
        self
    }

    /// Loads the tool `tool` from an OCI registry: `reference` must carry the
    /// manifest's digest (`oci://REGISTRY/REPOSITORY@sha256:…`, a tag may stand before
    /// it). The component is read from the blob cache, else pulled, and refused when
    /// its bytes do not match the digest or when it is not the tool `tool`.
    pub fn tool_source(mut self, tool: impl Into<String>, reference: Reference) -> Self {
        self.sources.insert(tool.into(), Ok(reference));
        self
    }

    /// `[tools.NAME] source`, pinned by its own digest or else by the lock file.
    pub(crate) fn tool_source_pinned_by(
        mut self,
        tool: String,
        source: &Reference,
        lock: &std::result::Result<LockFile, String>,
    ) -> Self {
        let pinned = match lock {
            Ok(lock) => lock.pin(&tool, source),
            Err(_) if source.digest.is_some() => Ok(source.clone()),
            Err(why) => Err(format!("{why} (run `justonce lock` to write it anew)")),
        };
        self.sources.insert(tool, pinned);
        self
    }

    /// Lets `tool` reach each of `entries` over HTTP too: an origin
    /// (`https://host[:port]`) or the name of a service of the HTTP config, added to
    /// its allowlist (`[tools.NAME] allow`).
    pub fn tool_allow(mut self, tool: impl Into<String>, entries: Vec<String>) -> Self {
        self.tool_allow
            .entry(tool.into())
            .or_default()
            .extend(entries);
        self
    }

    /// Keeps `tool` out of what `serve` offers over MCP (`[tools.NAME] mcp = false`);
    /// the library and `run` still call it. See [`Host::exposed_over_mcp`].
    pub fn hide_from_mcp(mut self, tool: impl Into<String>) -> Self {
        self.hidden_from_mcp.insert(tool.into());
        self
    }

    /// Forgets the tools from registries named so far (`run COMPONENT` loads that
    /// component alone).
    pub(crate) fn without_tool_sources(mut self) -> Self {
        self.sources.clear();
        self
    }

    /// The login for the registry `registry` (`HOST[:PORT]`, as a
    /// [`tool_source`](Self::tool_source) names it); every registry not given one is
    /// spoken to anonymously. Without this call the logins are read: each
    /// [`registry_login_file`](Self::registry_login_file), and
    /// [`registry::USERNAME_VAR`] and [`registry::PASSWORD_VAR`] from the environment
    /// (else from [`registry_secrets_file`](Self::registry_secrets_file)) for the one
    /// registry they can be bound to (see [`Logins::resolve`]).
    pub fn registry_credentials(mut self, registry: &str, credentials: Credentials) -> Self {
        let logins = self.registry_logins.take().unwrap_or_default();
        self.registry_logins = Some(logins.with(registry, credentials));
        self
    }

    /// Reads the registry login from this file (`NAME=value` lines) when the
    /// environment has none; it is bound to one registry as
    /// [`registry_credentials`](Self::registry_credentials) says.
    pub fn registry_secrets_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.registry_login_sources.global_file = Some(path.into());
        self
    }

    /// Reads the login of the registry `registry` (`HOST[:PORT]`) from this file
    /// (`NAME=value` lines: [`registry::USERNAME_VAR`] and [`registry::PASSWORD_VAR`]);
    /// it goes to that registry alone.
    pub fn registry_login_file(mut self, registry: &str, path: impl Into<PathBuf>) -> Self {
        self.registry_login_sources
            .per_registry
            .insert(registry.to_owned(), path.into());
        self
    }

    /// Keeps pulled components in `dir`, by digest (default: `blobs/` in the
    /// compiled-component cache, see [`registry::blob_cache_in`]; none for a host
    /// without one).
    pub fn blob_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.blob_cache = Some(dir.into());
        self
    }

    /// Fetches and loads the tools from registries.
    fn load_sources(&self, runtime: &mut Runtime, compiled: Option<&Path>) -> Result<()> {
        if self.sources.is_empty() {
            return Ok(());
        }
        let mut pinned = BTreeMap::new();
        for (tool, source) in &self.sources {
            let reference = self.pinned_source(tool, source)?;
            // A component already loaded (from the tools directory, say) that is this
            // tool is refused before any pull, so the refusal does not hang on
            // whether the registry answers (a reload checks the same).
            if let Some(loaded) = runtime.tool(tool) {
                return Err(Error::DuplicateTool {
                    name: tool.clone(),
                    first: PathBuf::from(reference.to_string()),
                    second: loaded.source.clone(),
                });
            }
            pinned.insert(tool.clone(), reference);
        }
        registry::load_sources(
            runtime,
            &pinned,
            &self.registry_client()?,
            self.pulled_blobs(compiled).as_ref(),
        )
    }

    /// The reference `tool`'s `source` pins, or why it pins none.
    fn pinned_source(
        &self,
        tool: &str,
        source: &std::result::Result<Reference, String>,
    ) -> Result<Reference> {
        let reference = source.as_ref().map_err(|why| Error::Load {
            path: PathBuf::from(format!("[tools.{tool}]")),
            reason: why.clone(),
            fault: crate::error::LoadFault::Input,
        })?;
        if reference.digest.is_none() {
            return Err(Error::Load {
                path: PathBuf::from(reference.to_string()),
                reason: format!(
                    "the source of `{tool}` names no digest; pin it (`@sha256:…`, or `justonce lock`)"
                ),
                fault: crate::error::LoadFault::Input,
            });
        }
        Ok(reference.clone())
    }

    /// A client with each registry's login.
    fn registry_client(&self) -> Result<RegistryClient> {
        let logins = match &self.registry_logins {
            Some(logins) => logins.clone(),
            None => {
                let registries = self
                    .sources
                    .values()
                    .filter_map(|s| s.as_ref().ok())
                    .map(|r| r.registry.clone())
                    .collect();
                registry::read_logins(&self.registry_login_sources, &registries)?
            }
        };
        Ok(RegistryClient::new(logins))
    }

    /// Where pulled components are kept, for a host whose compiled components are
    /// kept in `compiled`.
    fn pulled_blobs(&self, compiled: Option<&Path>) -> Option<BlobCache> {
        self.blob_cache
            .clone()
            .or_else(|| compiled.map(registry::blob_cache_in))
            .map(BlobCache::new)
    }

    /// Opens the journal, loads the tools and registers the built-in providers.
    pub fn build(self) -> Result<Host> {
        fault::check_env()?;
        check_provider_names(self.providers.keys())?;
        let open_for = self.lease.saturating_add(self.retry.longest_wait());
        let retention = self.windows(open_for)?;
        if self.lease.is_zero() {
            // A zero lease would let every duplicate take over a running call.
            return Err(Error::Host(anyhow::anyhow!(
                "the lease must be longer than zero (HostBuilder::lease)"
            )));
        }
        let runtime = match self.runtime {
            Some(_) if !self.sources.is_empty() => {
                return Err(Error::Host(anyhow::anyhow!(
                    "tools from registries are loaded by the builder, not into a shared runtime (HostBuilder::runtime); swap them in with Host::swap_tool"
                )));
            }
            Some(runtime) => runtime,
            None => {
                // Pooled slots big enough for the largest memory any tool is given.
                let defaults = self.limits.clone().unwrap_or_default();
                let pool_memory = self
                    .tool_limits
                    .values()
                    .map(|l| l.memory_bytes)
                    .fold(defaults.memory_bytes, usize::max);
                let mut runtime = Runtime::with_pool_memory(defaults, pool_memory)?;
                let cache_dir = match &self.compile_cache {
                    Some(choice) => choice.clone(),
                    None => self
                        .database
                        .as_ref()
                        .and_then(|_| crate::runtime::CompileCache::default_dir()),
                };
                if let Some(dir) = &cache_dir {
                    runtime.set_compile_cache(dir);
                }
                if let Some(notice) = &self.compile_notice {
                    runtime.on_compile(notice.clone());
                }
                if self.example_tools {
                    for (name, bytes) in crate::examples::ALL {
                        runtime.load(Path::new(&format!("<built-in {name}>")), bytes)?;
                    }
                }
                if let Some(dir) = &self.tools_dir {
                    runtime.load_dir(dir)?;
                }
                for (path, bytes) in &self.components {
                    match bytes {
                        Some(bytes) => runtime.load(path, bytes)?,
                        None => runtime.load_file(path)?,
                    };
                }
                self.load_sources(&mut runtime, cache_dir.as_deref())?;
                Arc::new(runtime)
            }
        };
        let journal = match &self.database {
            Some(path) => journal::open_with_clock(
                path,
                self.durability,
                self.password_file.as_deref(),
                self.database_clock_is_host_clock
                    .then(|| Arc::clone(&self.clock)),
            )?,
            None => journal::in_memory()?,
        };
        let mut http = match &self.http_config_file {
            Some(path) => HttpConfig::load_unnamed(path).map_err(|reason| Error::Config {
                path: path.clone(),
                reason,
            })?,
            None => {
                self.http.validate().map_err(|e| Error::Config {
                    path: PathBuf::from("<http config>"),
                    reason: e.to_string(),
                })?;
                self.http
            }
        };
        for (tool, entries) in &self.tool_allow {
            http.allow_for_tool(tool, entries)
                .map_err(|reason| Error::Config {
                    path: PathBuf::from("<[tools.NAME] allow>"),
                    reason,
                })?;
        }
        let http = Arc::new(http);
        let mut providers = self.providers;
        providers
            .entry("http".into())
            .or_insert_with(|| Arc::new(HttpProvider::new(Arc::clone(&http))));
        providers.entry("outbox".into()).or_insert_with(|| {
            Arc::new(OutboxProvider::new(
                Arc::clone(&http),
                Arc::clone(&self.clock),
            ))
        });
        providers
            .entry("kv".into())
            .or_insert_with(|| Arc::new(KvProvider));
        if !providers.contains_key("mail") {
            // The built-in test mailbox is a SQLite file: beside a SQLite journal, or,
            // with a PostgreSQL one, in the working directory (hosts started there
            // share it, as the downstream of a test would be shared).
            let mailbox = self.database.as_deref().map(crate::providers::mailbox_file);
            let mail =
                MailProvider::open(mailbox.as_deref(), Arc::clone(&self.clock), self.retention)?
                    .lose_first_responses(self.lose_first_mail_responses);
            providers.insert("mail".into(), Arc::new(mail));
        }
        let upstreams: Vec<Arc<crate::upstream::Upstream>> = self
            .upstreams
            .into_iter()
            .map(|(name, config)| Arc::new(crate::upstream::Upstream::new(name, config)))
            .collect();
        for upstream in &upstreams {
            providers.insert(
                upstream.provider_name(),
                Arc::new(crate::upstream::UpstreamProvider::new(Arc::clone(upstream))),
            );
        }
        let upstreams = Arc::new(crate::upstream::Upstreams::new(upstreams));
        // Before any is started: one an operator disabled is never started.
        crate::upstream_switch::follow_once(&upstreams, &*journal)?;
        crate::upstream_switch::follow(&upstreams, &journal);
        let providers = crate::providers::with_faults(providers, &self.faults);
        for provider in providers.values() {
            journal.prepare_provider(provider.as_ref())?;
        }
        for tool in self.tool_limits.keys() {
            if runtime.tool(tool).is_none() {
                tracing::warn!(tool, "limits are set for a tool that is not loaded");
            }
        }
        let limits = ToolLimits {
            defaults: self.limits.unwrap_or_else(|| runtime.limits().clone()),
            tools: self.tool_limits,
        };
        crate::runtime::check_pool_fits(&runtime, &limits)?;
        let wasm = WasmRunner {
            runtime: Arc::clone(&runtime),
            limits: limits.clone(),
            probe_timeout: self.probe_timeout,
        };
        let runner: Arc<dyn crate::guard::Runner> = if upstreams.is_empty() {
            Arc::new(wasm)
        } else {
            Arc::new(GatewayRunner {
                wasm,
                upstreams: Arc::clone(&upstreams),
            })
        };
        let shared = Arc::new(Shared {
            journal,
            providers,
            clock: self.clock,
            retry: self.retry,
            metrics: Default::default(),
            tasks: Default::default(),
            runs: Default::default(),
            ask_person: self.ask_person.clone(),
        });
        for tool in retention.tools.keys() {
            if runtime.tool(tool).is_none() {
                tracing::warn!(tool, "a retention is set for a tool that is not loaded");
            }
        }
        let policy = Policy {
            retention: Arc::new(retention),
            lease_ms: millis(self.lease),
            wait_bound: self.wait_bound,
            poll: self.poll,
            renew_every: Some(crate::guard::renew_interval(millis(self.lease))),
        };
        let mut guard = Guard::new(shared, runner, policy);
        if let Some(identity) = self.identity {
            guard = guard.identified_as(identity);
        }
        Ok(Host::new(guard, runtime, limits, http)
            .hiding_from_mcp(self.hidden_from_mcp)
            .with_upstreams(upstreams))
    }
}

impl HostBuilder {
    /// The window of every call, each at least `open_for` (a lease plus the retry
    /// budget): a record could otherwise expire while a run that holds its lease is
    /// still retrying one of its effects. A window set shorter is refused, naming
    /// it; the default unscoped window (10 min, at most the retention) is raised to
    /// `open_for` when a long lease needs it.
    fn windows(&self, open_for: Duration) -> Result<Retention> {
        let too_short = |what: String, window: Duration| Error::Config {
            path: PathBuf::from("<host builder>"),
            reason: format!(
                "{what} of {} s is shorter than a lease plus the retry budget ({} s); keep records at least that long",
                window.as_secs_f64(),
                open_for.as_secs_f64()
            ),
        };
        let mut retention = Retention::new(self.retention);
        retention.unscoped = match self.unscoped_retention {
            Some(window) => window,
            None => retention.unscoped.max(open_for),
        };
        retention.tools = self.tool_retention.clone();
        if self.retention < open_for {
            return Err(too_short("the retention".into(), self.retention));
        }
        if retention.unscoped < open_for {
            return Err(too_short(
                "the retention of calls without a conversation (unscoped_retention_minutes)".into(),
                retention.unscoped,
            ));
        }
        if let Some((tool, &window)) = retention.tools.iter().find(|(_, w)| **w < open_for) {
            return Err(too_short(
                format!("the retention of tool `{tool}` ([tools.{tool}] retention_hours)"),
                window,
            ));
        }
        Ok(retention)
    }
}

/// Refuses a provider registered under a name the host keeps for its own effects:
/// one called `user` would never be reached (a tool asks through `input.ask`, which the
/// journal records under that name), and one called `mcp:NAME` would be unreachable by
/// tools and replaced by the upstream of that name.
fn check_provider_names<'a>(names: impl IntoIterator<Item = &'a String>) -> Result<()> {
    for name in names {
        let reason = if name == crate::ask::PROVIDER {
            "a tool asks the person behind the agent through `input.ask`, and the journal keeps its questions under this name"
        } else if name.starts_with(crate::upstream::PROVIDER_PREFIX) {
            "names starting with `mcp:` are the upstream MCP servers' (`[upstreams.NAME]`, HostBuilder::upstream)"
        } else {
            continue;
        };
        return Err(Error::ReservedProvider {
            name: name.clone(),
            reason,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN_FOR: Duration = Duration::from_secs(65);

    #[test]
    fn every_window_defaults_sensibly_and_one_shorter_than_a_lease_is_refused_by_name() {
        let windows = HostBuilder::default().windows(OPEN_FOR).unwrap();
        assert_eq!(windows.unscoped, Duration::from_secs(600));
        assert_eq!(windows.conversation, Duration::from_secs(24 * 3600));
        let long_lease = HostBuilder::default()
            .windows(Duration::from_secs(900))
            .unwrap();
        assert_eq!(
            long_lease.unscoped,
            Duration::from_secs(900),
            "the default is raised to a lease plus the retry budget"
        );
        let refused = |builder: HostBuilder| match builder.windows(OPEN_FOR) {
            Err(Error::Config { reason, .. }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let why = refused(HostBuilder::default().unscoped_retention(Duration::from_secs(30)));
        assert!(
            why.contains("unscoped_retention_minutes") && why.contains("30 s"),
            "{why}"
        );
        let why = refused(HostBuilder::default().tool_retention("nightly", Duration::from_secs(1)));
        assert!(why.contains("[tools.nightly] retention_hours"), "{why}");
        let why = refused(HostBuilder::default().retention(Duration::from_secs(1)));
        assert!(why.starts_with("the retention of 1 s"), "{why}");
    }

    /// `user` and `mcp:…` are refused by name, before anything is opened; a name that
    /// only looks like them is a provider like any other.
    #[test]
    fn a_provider_under_a_reserved_name_is_refused_and_names_like_them_are_not() {
        let kv = || Arc::new(KvProvider) as Arc<dyn Provider>;
        for (name, says) in [("user", "input.ask"), ("mcp:payments", "[upstreams.NAME]")] {
            match HostBuilder::default().provider(name, kv()).build() {
                Err(error @ Error::ReservedProvider { .. }) => {
                    let text = error.to_string();
                    assert!(
                        text.contains(&format!("`{name}` is reserved")) && text.contains(says),
                        "{text}"
                    );
                }
                Err(other) => panic!("{name}: expected ReservedProvider, got {other}"),
                Ok(_) => panic!("{name}: a host was built"),
            }
        }
        let names = ["users", "mcp", "payments", "user:x"].map(String::from);
        check_provider_names(&names).expect("names that only look reserved");
        let names = ["payments", "mcp:x"].map(String::from);
        assert!(matches!(
            check_provider_names(&names),
            Err(Error::ReservedProvider { name, .. }) if name == "mcp:x"
        ));
    }
}
