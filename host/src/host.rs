//! The host: tools, journal and providers behind one `call` that is safe to retry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::clock::{Clock, SystemClock, millis};
use crate::determinism::{GuestEntropy, Seed};
use crate::error::{Error, Result};
use crate::fault::{self, FaultPoint};
use crate::guard::{EffectSession, Interruption, InvocationGuard, RunStart, Shared};
use crate::http::HttpConfig;
use crate::keys::{self, InvocationKey};
use crate::outcome::Outcome;
use crate::provider::Provider;
use crate::providers::{HttpProvider, KvProvider, MailProvider, OutboxProvider};
use crate::retry::RetryPolicy;
use crate::runtime::{GuestOutcome, Limits, LoadedTool, Runtime, ToolLimits};
use crate::store::{Begin, BeginOutcome, BehindJob, Durability, Lookup, NewInvocation, Store};

/// The scope used when a caller names no conversation.
pub const DEFAULT_SCOPE: &str = "default";

/// One tool call as an agent (or its client) makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRequest {
    /// The tool's name.
    pub tool: String,
    /// The arguments, JSON text (an object).
    pub arguments: String,
    /// The window in which a repeat is a duplicate, usually the conversation id.
    /// [`DEFAULT_SCOPE`] when absent.
    pub conversation: Option<String>,
    /// The provider's tool-call id, an alias of the invocation key.
    pub tool_call_id: Option<String>,
    /// A caller-chosen idempotency key that replaces the derived one.
    pub key: Option<String>,
    /// The authenticated caller (MCP over HTTP). When set, the scope of the call's
    /// key is [`principal_scope`] of it and the conversation, explicit keys included.
    pub principal: Option<String>,
}

/// The scope recorded for a call of `principal` in `conversation`: the JSON array
/// `["principal","conversation"]`, unambiguous for any two strings.
pub fn principal_scope(principal: &str, conversation: &str) -> String {
    serde_json::to_string(&[principal, conversation]).unwrap_or_default()
}

impl CallRequest {
    /// A call of `tool` with `arguments` (JSON text).
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            arguments: arguments.into(),
            conversation: None,
            tool_call_id: None,
            key: None,
            principal: None,
        }
    }

    /// Sets the authenticated caller.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Sets the conversation scope.
    pub fn conversation(mut self, conversation: impl Into<String>) -> Self {
        self.conversation = Some(conversation.into());
        self
    }

    /// Sets the provider's tool-call id.
    pub fn tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// Sets an explicit idempotency key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    fn scope(&self) -> std::borrow::Cow<'_, str> {
        let conversation = self.conversation.as_deref().unwrap_or(DEFAULT_SCOPE);
        match &self.principal {
            None => conversation.into(),
            Some(principal) => principal_scope(principal, conversation).into(),
        }
    }
}

/// The answer to a call: the outcome, and whether it was replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResponse {
    /// The invocation key the call ran (or was found) under.
    pub key: InvocationKey,
    /// `true` when the outcome was saved by an earlier attempt and nothing ran now.
    pub replayed: bool,
    /// How the tool call ended.
    pub outcome: Outcome,
}

impl CallResponse {
    /// The JSON the CLI prints: the outcome's fields plus `replayed` and `key`.
    pub fn to_json(&self) -> Value {
        let mut v = self.outcome.to_agent_json();
        v["replayed"] = Value::Bool(self.replayed);
        v["key"] = Value::String(self.key.to_string());
        v
    }
}

/// Builds a [`Host`].
pub struct HostBuilder {
    database: Option<PathBuf>,
    durability: Durability,
    clock: Arc<dyn Clock>,
    retention: Duration,
    lease: Duration,
    wait_bound: Duration,
    poll: Duration,
    retry: RetryPolicy,
    limits: Option<Limits>,
    tool_limits: BTreeMap<String, Limits>,
    providers: BTreeMap<String, Arc<dyn Provider>>,
    runtime: Option<Arc<Runtime>>,
    components: Vec<(PathBuf, Option<Vec<u8>>)>,
    tools_dir: Option<PathBuf>,
    example_tools: bool,
    lose_first_mail_responses: u32,
    http: HttpConfig,
    http_config_file: Option<PathBuf>,
    /// `None`: beside the database; `Some(None)`: no cache.
    compile_cache: Option<Option<PathBuf>>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self {
            database: None,
            durability: Durability::default(),
            clock: Arc::new(SystemClock),
            retention: Duration::from_secs(24 * 60 * 60),
            lease: Duration::from_secs(60),
            wait_bound: Duration::from_secs(30),
            poll: Duration::from_millis(20),
            retry: RetryPolicy::default(),
            limits: None,
            tool_limits: BTreeMap::new(),
            providers: BTreeMap::new(),
            runtime: None,
            components: Vec::new(),
            tools_dir: None,
            example_tools: false,
            lose_first_mail_responses: 0,
            http: HttpConfig::default(),
            http_config_file: None,
            compile_cache: None,
        }
    }
}

impl HostBuilder {
    /// Keeps the journal in the SQLite file at `path` (created with its directory).
    /// Without it the journal lives in memory.
    pub fn database(mut self, path: impl Into<PathBuf>) -> Self {
        self.database = Some(path.into());
        self
    }

    /// How durable each commit is; [`Durability::Full`] by default.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The clock retention and leases are measured on.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long records are kept; older ones are treated as absent (default 24 h).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
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
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.into(), provider);
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
    /// database file keeps them in `cache/` beside it (`.justonce/cache/` for the
    /// CLI's default); an in-memory host keeps none.
    pub fn compile_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.compile_cache = Some(Some(dir.into()));
        self
    }

    /// Compiles every component at load, with no on-disk cache.
    pub fn no_compile_cache(mut self) -> Self {
        self.compile_cache = Some(None);
        self
    }

    /// Opens the journal, loads the tools and registers the built-in providers.
    pub fn build(self) -> Result<Host> {
        fault::check_env()?;
        if self.lease.is_zero() {
            // A zero lease would let every duplicate take over a running call.
            return Err(Error::Host(anyhow::anyhow!(
                "the lease must be longer than zero (HostBuilder::lease)"
            )));
        }
        let runtime = match self.runtime {
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
                        .as_deref()
                        .map(|db| db.with_file_name("cache")),
                };
                if let Some(dir) = cache_dir {
                    runtime.set_compile_cache(dir);
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
                Arc::new(runtime)
            }
        };
        let store = match &self.database {
            Some(path) => Store::open(path, self.durability)?,
            None => Store::in_memory()?,
        };
        let retention_ms = millis(self.retention);
        let http = Arc::new(match &self.http_config_file {
            Some(path) => HttpConfig::load(path).map_err(|e| Error::Config {
                path: path.clone(),
                reason: e.to_string(),
            })?,
            None => {
                self.http.validate().map_err(|e| Error::Config {
                    path: PathBuf::from("<http config>"),
                    reason: e.to_string(),
                })?;
                self.http
            }
        });
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
            let mail = MailProvider::open(
                self.database.as_deref(),
                Arc::clone(&self.clock),
                self.retention,
            )?
            .lose_first_responses(self.lose_first_mail_responses);
            providers.insert("mail".into(), Arc::new(mail));
        }
        for provider in providers.values() {
            store.with(|conn| provider.prepare(conn))?;
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
        Ok(Host {
            runtime,
            limits,
            shared: Arc::new(Shared {
                store,
                providers,
                clock: self.clock,
                retry: self.retry,
            }),
            waiters: InvocationGuard::default(),
            retention_ms,
            lease_ms: millis(self.lease),
            wait_bound: self.wait_bound,
            poll: self.poll,
            owner: owner_id(),
            runs: AtomicU64::new(0),
            http,
        })
    }
}

fn owner_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{:x}", std::process::id(), nanos)
}

/// The guarded tool host. Build it once with [`Host::builder`]; `call` it from many
/// threads.
pub struct Host {
    runtime: Arc<Runtime>,
    limits: ToolLimits,
    shared: Arc<Shared>,
    waiters: InvocationGuard,
    retention_ms: i64,
    lease_ms: i64,
    wait_bound: Duration,
    poll: Duration,
    owner: String,
    runs: AtomicU64,
    http: Arc<HttpConfig>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("runtime", &self.runtime)
            .field("store", &self.shared.store)
            .finish()
    }
}

impl Host {
    /// Starts building a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The loaded tools.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The sandbox limits of every tool.
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// The journal.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The clock the host measures retention and leases on.
    pub fn clock(&self) -> &dyn Clock {
        &*self.shared.clock
    }

    /// How long records are kept, in milliseconds.
    pub fn retention_ms(&self) -> i64 {
        self.retention_ms
    }

    /// How this host reaches HTTP downstreams.
    pub fn http_config(&self) -> &HttpConfig {
        &self.http
    }

    pub(crate) fn http_config_arc(&self) -> Arc<HttpConfig> {
        Arc::clone(&self.http)
    }

    /// What the guards share; the outbox deliverer uses the journal and the clock.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The invocation key a call would run under, without running anything.
    pub fn key_for(&self, request: &CallRequest) -> Result<InvocationKey> {
        Ok(self.prepare(request)?.key)
    }

    /// Deletes records older than the retention window.
    pub fn gc(&self) -> Result<crate::store::GcReport> {
        self.shared
            .store
            .gc(self.shared.clock.now_ms(), self.retention_ms)
    }

    fn prepare(&self, request: &CallRequest) -> Result<Prepared> {
        let tool = self
            .runtime
            .tool(&request.tool)
            .ok_or_else(|| Error::UnknownTool {
                name: request.tool.clone(),
                available: self.runtime.names(),
            })?
            .clone();
        let invalid = |reason: String| Error::InvalidArguments {
            tool: request.tool.clone(),
            reason,
        };
        let limit = self.limits.for_tool(&tool.name).max_args_bytes;
        if request.arguments.len() > limit {
            return Err(invalid(format!(
                "{} bytes exceeds the limit of {limit} bytes",
                request.arguments.len()
            )));
        }
        // Canonicalizing the text (not a parsed value) also refuses duplicate keys,
        // which a parser would silently collapse.
        let canonical =
            crate::jcs::canonicalize_str(&request.arguments).map_err(|e| invalid(e.to_string()))?;
        let args: Value = serde_json::from_str(&canonical)
            .map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        if !args.is_object() {
            return Err(invalid("arguments must be a JSON object".into()));
        }
        tool.schema.check(&args).map_err(invalid)?;
        let fingerprint =
            keys::arguments_fingerprint(&tool.name, &args).map_err(|e| invalid(e.to_string()))?;
        let key = match &request.key {
            Some(explicit) => {
                let key =
                    InvocationKey::parse(explicit).map_err(|e| Error::InvalidKey(e.to_string()))?;
                match &request.principal {
                    None => key,
                    Some(_) => keys::scoped_key(&request.scope(), &key)
                        .map_err(|e| Error::InvalidKey(e.to_string()))?,
                }
            }
            None => keys::invocation_key(&request.scope(), &tool.name, &args)
                .map_err(|e| invalid(e.to_string()))?,
        };
        Ok(Prepared {
            tool,
            canonical,
            fingerprint,
            key,
        })
    }

    /// Calls a tool under the guard: runs it the first time, replays the saved
    /// outcome to every retry, waits for a parallel duplicate, and refuses the same key
    /// with different arguments.
    pub fn call(&self, request: &CallRequest) -> Result<CallResponse> {
        let prepared = self.prepare(request)?;
        // A write made behind an earlier call that the journal refused (a full disk)
        // fails this call with the reason, before anything runs.
        self.shared.store.take_behind_failure()?;
        let owner = format!(
            "{}/{}",
            self.owner,
            self.runs.fetch_add(1, Ordering::Relaxed)
        );
        let started = Instant::now();
        // A retry of a call this host saw complete is replayed from memory.
        if request.tool_call_id.is_none()
            && let Some(stored) = self.shared.store.recall(
                &prepared.key,
                &prepared.fingerprint,
                self.shared.clock.now_ms(),
                self.retention_ms,
            )
        {
            self.shared.store.make_durable()?;
            return replayed(prepared.key, &stored);
        }
        // Journaled only if this call creates the invocation; a resumed run gets the
        // seed its first run drew, so it sees the same random values.
        let seed = Seed::random()?;
        let scope = request.scope();
        loop {
            // One call of a key at a time in this process: a duplicate waits here for
            // the running one, then looks again (and replays its outcome).
            let Some(entered) = self.waiters.enter_or_wait(&prepared.key, self.poll) else {
                if started.elapsed() >= self.wait_bound {
                    return Err(Error::InProgress { key: prepared.key });
                }
                continue;
            };
            let begin = Begin {
                key: &prepared.key,
                scope: &scope,
                tool: &prepared.tool.name,
                fingerprint: &prepared.fingerprint,
                explicit_key: request.key.is_some(),
                tool_call_id: request.tool_call_id.as_deref(),
                now: self.shared.clock.now_ms(),
                retention_ms: self.retention_ms,
                lease_ms: self.lease_ms,
                owner: &owner,
                seed: &seed,
            };
            let decided = match self.shared.store.lookup(&begin)? {
                Lookup::Replay {
                    outcome,
                    created_at,
                } => {
                    // Durable before it is returned, like the answer its first caller got.
                    self.shared.store.make_durable()?;
                    if begin.tool_call_id.is_none() {
                        self.shared.store.remember(
                            &prepared.key,
                            &prepared.fingerprint,
                            created_at,
                            &outcome,
                        );
                    }
                    BeginOutcome::Replay(outcome)
                }
                Lookup::Absent => {
                    // No record: run first, and journal the invocation with its first
                    // effect, or complete with its outcome if it performs none.
                    let record = NewInvocation {
                        key: prepared.key.clone(),
                        scope: begin.scope.to_owned(),
                        tool: prepared.tool.name.clone(),
                        fingerprint: prepared.fingerprint.clone(),
                        explicit_key: begin.explicit_key,
                        created_at: begin.now,
                        seed: seed.clone(),
                    };
                    let entropy = GuestEntropy {
                        seed: seed.clone(),
                        started_ms: begin.now,
                    };
                    match self.run(&prepared, &owner, entropy, Some(record), false)? {
                        Some(response) => return Ok(response),
                        // Another process journaled the key meanwhile: look again.
                        None => continue,
                    }
                }
                Lookup::Decide => self.shared.store.decide(&begin)?,
            };
            match decided {
                BeginOutcome::Run { entropy, resumed } => {
                    match self.run(&prepared, &owner, entropy, None, resumed)? {
                        Some(response) => return Ok(response),
                        None => continue,
                    }
                }
                BeginOutcome::Replay(stored) => return replayed(prepared.key, &stored),
                BeginOutcome::Mismatch(key) => return Err(Error::Mismatch { key }),
                BeginOutcome::Wait => {
                    // Running in another process (or host): poll the journal.
                    drop(entered);
                    if started.elapsed() >= self.wait_bound {
                        return Err(Error::InProgress { key: prepared.key });
                    }
                    self.waiters.wait(self.poll);
                }
            }
        }
    }

    /// Runs the guest once. `None` when the run gave way to another run of the same
    /// key that journaled it first (the caller looks again).
    fn run(
        &self,
        prepared: &Prepared,
        owner: &str,
        entropy: GuestEntropy,
        unjournaled: Option<NewInvocation>,
        resumed: bool,
    ) -> Result<Option<CallResponse>> {
        let session = EffectSession::new(
            Arc::clone(&self.shared),
            prepared.key.clone(),
            &prepared.tool.name,
            owner,
            self.lease_ms,
            RunStart {
                entropy,
                unjournaled,
                resumed,
            },
        );
        let limits = self.limits.for_tool(&prepared.tool.name);
        let (guest, session) =
            self.runtime
                .call(&prepared.tool, &prepared.canonical, session, limits);
        self.settle(prepared, owner, guest, session)
    }

    /// Saves the outcome of a run, or leaves the invocation resumable when it cannot
    /// be saved (an unknown effect outcome, a divergence, a host fault).
    fn settle(
        &self,
        prepared: &Prepared,
        owner: &str,
        guest: GuestOutcome,
        mut session: EffectSession,
    ) -> Result<Option<CallResponse>> {
        let key = &prepared.key;
        let now = self.shared.clock.now_ms();
        // A run that never journaled its invocation has no record to leave resumable.
        let journaled = session.unjournaled.is_none();
        if let Some(fault) = session.host_fault {
            if journaled {
                let _ = self.shared.store.suspend(key, owner, now);
            }
            return Err(fault);
        }
        if let Some(interruption) = session.interrupted {
            if interruption == Interruption::Superseded {
                return Ok(None);
            }
            if journaled && !self.shared.store.suspend(key, owner, now)? {
                // Another host took the call over meanwhile; what this run learnt is
                // in the journal, and the other host's outcome is the one that counts.
                return Err(Error::LeaseLost { key: key.clone() });
            }
            return Err(match interruption {
                Interruption::OutcomeUnknown {
                    seq,
                    provider,
                    reason,
                } => Error::OutcomeUnknown {
                    key: key.clone(),
                    seq,
                    provider,
                    reason,
                },
                Interruption::Divergence { seq, detail } => Error::Divergence {
                    key: key.clone(),
                    seq,
                    detail,
                },
                Interruption::LeaseLost { .. } | Interruption::Superseded => {
                    Error::LeaseLost { key: key.clone() }
                }
            });
        }
        let skipped = match session.skipped_journaled_effects() {
            Ok(skipped) => skipped,
            Err(fault) => {
                let _ = self.shared.store.suspend(key, owner, now);
                return Err(fault);
            }
        };
        if let Some((seq, journaled)) = skipped {
            // The resumed guest finished without asking for effects an earlier run
            // journaled (and may have performed): its outcome would not match them.
            if !self.shared.store.suspend(key, owner, now)? {
                return Err(Error::LeaseLost { key: key.clone() });
            }
            return Err(Error::Divergence {
                key: key.clone(),
                seq,
                detail: format!(
                    "the journal holds {journaled} effect(s) from position #{seq} on, but the guest finished without asking for them"
                ),
            });
        }
        if let GuestOutcome::Trapped {
            reason: "host_failure",
            message,
        } = &guest
        {
            // Not the guest's doing (the runtime failed around it): nothing to save;
            // the call stays resumable and a retry runs it again.
            if journaled {
                let _ = self.shared.store.suspend(key, owner, now);
            }
            return Err(Error::Host(anyhow::anyhow!("{message}")));
        }
        let outcome = match guest {
            GuestOutcome::Returned(Ok(text)) => {
                self.result_outcome(&text, self.limits.for_tool(&prepared.tool.name))
            }
            GuestOutcome::Returned(Err(e)) => Outcome::ToolError {
                code: e.code,
                message: e.message,
                details: e
                    .details
                    .map(|d| serde_json::from_str(&d).unwrap_or(Value::String(d))),
            },
            GuestOutcome::Trapped { reason, message } => Outcome::Trap {
                reason: reason.to_string(),
                message,
            },
        };
        // Stored first, then answered: the answer a caller gets is always one a retry
        // can get again.
        let mut stored = outcome.to_stored();
        // The caller gets what a retry will read back, parsed from the same text.
        let answer = match Outcome::from_stored(&stored) {
            Ok(answer) => answer,
            Err(e) => {
                // JSON nested past what the parser reads back (a hostile guest): save a
                // trap instead, or every retry would fail to replay the outcome.
                let trap = Outcome::Trap {
                    reason: "invalid_output".into(),
                    message: format!("the tool's output cannot be saved and read back: {e}"),
                };
                stored = trap.to_stored();
                trap
            }
        };
        fault::point(FaultPoint::AfterRecord);
        let store = &self.shared.store;
        // Remembered once saved, or before it is queued (a queued write that fails
        // makes the store forget it again).
        let remember = || {
            store.remember(
                key,
                &prepared.fingerprint,
                session.entropy.started_ms,
                &stored,
            )
        };
        if let Some(record) = session.unjournaled.take() {
            // No effect: the record is written once, complete.
            let job = BehindJob::CompleteNew {
                record,
                outcome: stored.clone(),
                now,
            };
            if store.can_write_behind() {
                // Written behind the answer (see `store/behind.rs`); lost with the
                // process, a retry runs a call that did nothing.
                remember();
                store.write_behind(job)?;
            } else if store.write_through(job)? {
                remember();
            } else {
                // Another run journaled the key meanwhile and wins; this caller looks
                // again.
                return Ok(None);
            }
        } else if store.can_write_behind()
            && ((store.writes_behind() && !session.performed_unkeyed)
                || !session.needs_durable_outcome())
        {
            // `Normal` unless an unkeyed effect ran; with `Full`, a fresh run whose
            // effects were all transactional (committed with their records).
            remember();
            store.write_behind(BehindJob::Complete {
                key: key.clone(),
                owner: owner.to_owned(),
                outcome: stored.clone(),
                now,
            })?;
        } else {
            // Committed now, and made durable first if it must be.
            match store.complete(key, owner, &stored, now, session.needs_durable_outcome()) {
                Ok(true) => remember(),
                Ok(false) => return Err(Error::LeaseLost { key: key.clone() }),
                Err(e) => {
                    // Release the lease so duplicates need not wait for it to expire.
                    let _ = self.shared.store.suspend(key, owner, now);
                    return Err(e);
                }
            }
        }
        fault::point(FaultPoint::AfterOutcome);
        Ok(Some(CallResponse {
            key: key.clone(),
            replayed: false,
            outcome: answer,
        }))
    }

    fn result_outcome(&self, text: &str, limits: &Limits) -> Outcome {
        let limit = limits.max_result_bytes;
        if text.len() > limit {
            return Outcome::Trap {
                reason: "result_too_large".into(),
                message: format!(
                    "the tool's result of {} bytes exceeds the limit of {limit} bytes",
                    text.len()
                ),
            };
        }
        match serde_json::from_str(text) {
            Ok(result) => Outcome::Success { result },
            Err(e) => Outcome::Trap {
                reason: "invalid_output".into(),
                message: format!("the tool returned a result that is not JSON: {e}"),
            },
        }
    }
}

/// The answer to a call whose outcome was saved by an earlier attempt.
fn replayed(key: InvocationKey, stored: &str) -> Result<CallResponse> {
    let outcome = Outcome::from_stored(stored).map_err(|e| {
        Error::Host(anyhow::anyhow!(
            "the saved outcome of {key} is unreadable: {e}"
        ))
    })?;
    Ok(CallResponse {
        key,
        replayed: true,
        outcome,
    })
}

struct Prepared {
    tool: Arc<LoadedTool>,
    canonical: String,
    fingerprint: keys::Fingerprint,
    key: InvocationKey,
}
