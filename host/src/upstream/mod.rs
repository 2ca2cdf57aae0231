//! Upstream MCP servers: the tools people already run, behind the host as a gateway.
//!
//! A call of an upstream tool is a guarded invocation whose one effect is the
//! upstream `tools/call` (DESIGN.md, "Upstream MCP servers"): the guard journals the
//! effect before it is sent, and [`UpstreamProvider`] sends it with its effect key in
//! `_meta["dev.justonce/idempotency-key"]`. This module holds what is not the guard:
//! the configuration of one upstream ([`UpstreamConfig`]), the process or session
//! that serves it ([`Upstream`]), started and started again after it ended by a
//! supervisor of its own, off every request's path (`supervisor`), where it stands
//! ([`UpstreamState`]), the tools it lists, the index that finds a tool's upstream
//! ([`Upstreams`]), and the provider.

mod client;
mod connection;
mod credentials;
mod drain;
mod http_agent;
mod http_client;
mod late;
mod log_field;
mod log_messages;
mod oauth;
mod probes;
mod progress;
mod provider;
mod sse;
mod state;
mod stream;
mod supervisor;
pub mod surface;
#[cfg(test)]
mod test_http;
mod threads;
mod upstreams;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Once, RwLock, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::InputSchema;
pub(crate) use client::ClientError;
use connection::Connection;
use credentials::Credentials;
use log_field::field;

pub use oauth::{ClientAuth, ClientCredentials, UpstreamOAuth};
pub use probes::UpstreamProbe;
pub use provider::UpstreamProvider;
pub use state::UpstreamState;
pub use surface::{Lists, Surface, SurfaceNews};
pub use upstreams::{Lookup, Upstreams};

/// The `_meta` key under which an upstream `tools/call` carries its effect key: the
/// same name a client uses to hand justonce an explicit key, so a justonce server
/// upstream of another deduplicates by it.
pub const IDEMPOTENCY_KEY_META: &str = "dev.justonce/idempotency-key";

/// The code of the tool error an upstream's `isError` result is saved as; its details
/// hold the result's `content` and `structuredContent`, which MCP answers as they came.
pub const UPSTREAM_ERROR: &str = "upstream_error";

/// The most pages of `tools/list` read from one upstream: one answering a next
/// cursor forever is an error, not a loop.
pub const MAX_TOOLS_PAGES: usize = 100;

/// The most tools listed from one upstream.
pub const MAX_TOOLS: usize = 10_000;

/// The largest `tools/call` result saved as an effect's answer (as the HTTP client's
/// cap on a response): a larger one is no answer, with an error naming the cap.
pub const MAX_RESULT_BYTES: usize = 16 << 20;

/// How the provider of an upstream's calls is named: `mcp:NAME`. Only the gateway's
/// own call of an upstream tool may use it, never a component's guest.
pub const PROVIDER_PREFIX: &str = "mcp:";

/// `[upstreams.NAME]` of `justonce.toml`: one MCP server whose tools the host offers
/// under the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The program and its arguments, started with its stdio as the MCP transport
    /// (empty for a server reached at `url`).
    pub command: Vec<String>,
    /// The Streamable HTTP endpoint of a server that runs elsewhere, instead of a
    /// `command`.
    pub url: Option<String>,
    /// Headers sent with every HTTP request (`Authorization`); `${NAME}` in a value is
    /// filled in as in `env`.
    pub headers: BTreeMap<String, String>,
    /// `[upstreams.NAME.oauth]`: the access token sent as `Authorization: Bearer`
    /// with every HTTP request, from a token endpoint or a token file.
    pub oauth: Option<UpstreamOAuth>,
    /// Variables added to its environment; `${NAME}` in a value is filled in from
    /// `secrets_file`, else from the host's environment, when it starts.
    pub env: BTreeMap<String, String>,
    /// A file of `NAME=value` lines the `env` values may reference.
    pub secrets_file: Option<PathBuf>,
    /// Only these of its tools (by their upstream names); all when `None`.
    pub tools: Option<Vec<String>>,
    /// Not these of its tools.
    pub exclude: Vec<String>,
    /// Written before each tool's name in `tools/list` (`mem_` makes `create_entities`
    /// `mem_create_entities`).
    pub prefix: String,
    /// The upstream deduplicates `tools/call` by the key in `_meta`: every tool's
    /// unknown outcome is resent under the same key.
    pub dedupes_by_key: bool,
    /// Tools known safe to send again (an unknown outcome is resent under the same
    /// key), besides those the upstream annotates `idempotentHint: true`.
    pub idempotent: Vec<String>,
    /// Whether a tool annotated `readOnlyHint: true` runs every time, unsaved (the
    /// default); `false` guards it like any other.
    pub trust_read_only_hint: bool,
    /// How long a request waits for the upstream's answer.
    pub timeout: Duration,
    /// The probes of its write tools (by their names upstream): how to ask whether
    /// an unkeyed call whose answer was lost happened.
    pub probes: BTreeMap<String, UpstreamProbe>,
    /// `[upstreams.NAME.ask_person]`: the question (a template, `crate::ask_person`)
    /// the person behind the agent is asked at the retry about an unkeyed call of
    /// each of these write tools whose answer was lost and that no probe decides.
    pub ask_person: BTreeMap<String, String>,
    /// The largest result of a read-only tool passed through (sent every time, not
    /// saved), in bytes of its JSON; at most [`MAX_RESULT_BYTES`]. A saved result
    /// is capped by the tool's `max_result_bytes` instead.
    pub max_read_bytes: usize,
}

impl UpstreamConfig {
    /// A stdio upstream started as `command`, with the defaults.
    pub fn command(command: Vec<String>) -> Self {
        Self {
            command,
            url: None,
            headers: BTreeMap::new(),
            oauth: None,
            env: BTreeMap::new(),
            secrets_file: None,
            tools: None,
            exclude: Vec::new(),
            prefix: String::new(),
            dedupes_by_key: false,
            idempotent: Vec::new(),
            trust_read_only_hint: true,
            timeout: Duration::from_secs(30),
            probes: BTreeMap::new(),
            ask_person: BTreeMap::new(),
            max_read_bytes: MAX_RESULT_BYTES,
        }
    }

    /// An upstream reached over Streamable HTTP at `url`, with the defaults.
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::command(Vec::new())
        }
    }
}

/// Whether `name` is a tool name MCP allows: 1 to 128 of ASCII letters, digits, `_`,
/// `-` and `.`.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// One upstream as an operator sees it: [`Upstream::report`].
#[derive(Debug, Clone)]
pub struct UpstreamReport {
    /// Its name in `justonce.toml`.
    pub name: String,
    /// Where it stands now.
    pub state: UpstreamState,
    /// How many tools it offers by its last listing (`None`: it never listed).
    pub tools: Option<usize>,
    /// Starts its supervisor began since the host started (restarts: one less).
    pub starts: u64,
    /// How long its last start that answered took, to its tools listed.
    pub ready_in: Option<Duration>,
}

impl UpstreamReport {
    /// What an operator reads of it, as JSON (the console's API): `name`, `state`,
    /// `tools`, `starts`, `ready_in_ms`, `last_error`, `retry_in_ms` (while failing),
    /// `disabled_by` and `disabled_at` (RFC 3339, while disabled).
    pub fn to_json(&self) -> Value {
        let retry_in_ms = match &self.state {
            UpstreamState::Failing { retry_at, .. } => Some(
                retry_at
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
            ),
            _ => None,
        };
        let (disabled_by, disabled_at) = match &self.state {
            UpstreamState::Disabled { by, at } => {
                (Some(by.as_str()), Some(crate::clock::rfc3339(*at)))
            }
            _ => (None, None),
        };
        json!({
            "name": self.name,
            "state": self.state.name(),
            "tools": self.tools,
            "starts": self.starts,
            "ready_in_ms": self.ready_in.map(|d| d.as_millis() as u64),
            "last_error": self.state.last_error(),
            "retry_in_ms": retry_in_ms,
            "disabled_by": disabled_by,
            "disabled_at": disabled_at,
        })
    }
}

/// One tool an upstream lists, as the host offers it.
#[derive(Debug, Clone)]
pub struct UpstreamTool {
    /// The name agents call it by (the prefix and the upstream's name).
    pub name: String,
    /// Its name upstream.
    pub upstream_name: String,
    /// The upstream this tool is on.
    pub upstream: String,
    /// The `tools/list` entry the upstream gave, as it gave it; shared, as every
    /// lookup of a call hands out a copy of its tool.
    pub entry: Arc<Value>,
    /// Its input schema.
    pub input_schema: Arc<Value>,
    /// The same, compiled.
    pub schema: Arc<InputSchema>,
    /// Runs every time and is not saved (`readOnlyHint`, trusted).
    pub read_only: bool,
    /// An unknown outcome is resent under the same key (`idempotentHint`, the
    /// configuration's `idempotent` or `dedupes_by_key`).
    pub keyed: bool,
}

/// One upstream server: its configuration, its state and connection (kept by its
/// supervisor, see [`Upstream::supervise`]), its tools.
pub struct Upstream {
    name: String,
    config: UpstreamConfig,
    /// Its state and connection, shared with its supervisor and its reader.
    shared: Arc<supervisor::Shared>,
    /// Its supervisor, started once.
    supervised: Once,
    /// The tools it listed last (kept while it is down: its calls are refused
    /// naming it, not as unknown tools).
    tools: RwLock<Option<Arc<Vec<UpstreamTool>>>>,
    /// Told when its tools changed: it became ready, it went down, it said so.
    listeners: Arc<Mutex<Vec<client::ListChanged>>>,
    /// At most one refresh after a `list_changed` under way, and one more asked for.
    refresh: Arc<Refresh>,
    /// The answers that came after their call was given up, by effect key.
    late: Arc<late::LateAnswers>,
    /// Its `list_changed`s, counted for the log.
    list_changes: Arc<Tally>,
    /// The names in `tools`, `exclude` and `idempotent` warned about as not listed
    /// (`key.name`): each once, not at every listing.
    warned_names: Mutex<HashSet<String>>,
    /// What it offers besides its tools, as it said last; `None` until its first
    /// start answered `initialize`.
    surface: RwLock<Option<Arc<Surface>>>,
    /// Told what it said about its resources and prompts.
    surface_listeners: Arc<Mutex<Vec<SurfaceListener>>>,
    /// At most one listing of its resources (and one of its prompts) under way
    /// after it said they changed, and one more asked for.
    surface_refresh: Arc<[Refresh; 2]>,
    /// Its resources (by its own URIs) that clients of the host subscribed to, and
    /// how many subscriptions hold each: subscribed again on each new connection.
    subscriptions: Mutex<HashMap<String, usize>>,
}

/// Called with what an upstream said about its resources and prompts.
pub type SurfaceListener = Arc<dyn Fn(&SurfaceNews) + Send + Sync>;

/// Coalesces the refreshes a flood of `notifications/tools/list_changed` asks for:
/// one runs at a time, and any number asked for while it runs is one more after it.
#[derive(Debug, Default)]
struct Refresh {
    /// 0 idle, 1 running, 2 running with another asked for.
    state: std::sync::atomic::AtomicU8,
}

impl Refresh {
    /// Asks for a refresh: whether the caller is to start one (none was running).
    fn ask(&self) -> bool {
        self.state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| Some((s + 1).min(2)))
            == Ok(0)
    }

    /// Said by the running refresh when it is done: whether to run once more.
    fn again(&self) -> bool {
        loop {
            let swap = |from, to| {
                self.state
                    .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            };
            if swap(2, 1) {
                return true;
            }
            if swap(1, 0) {
                return false;
            }
        }
    }
}

/// Counts an upstream's `notifications/tools/list_changed` for the log: a flood is
/// one line now and then with how many came, not a line each.
#[derive(Debug, Default)]
struct Tally {
    /// Said since the last line.
    count: std::sync::atomic::AtomicU64,
    /// When the last line was written.
    logged: Mutex<Option<Instant>>,
}

/// The least time between two log lines of one upstream's `list_changed`s.
const LIST_CHANGED_LOG_EVERY: Duration = Duration::from_secs(10);

impl Tally {
    /// One more was said.
    fn note(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// At `now`: how many were said since the last line, if a line is due (none was
    /// written in the last [`LIST_CHANGED_LOG_EVERY`]); else they are counted on.
    fn due(&self, now: Instant) -> Option<u64> {
        let mut logged = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        if logged.is_some_and(|at| now.saturating_duration_since(at) < LIST_CHANGED_LOG_EVERY) {
            return None;
        }
        *logged = Some(now);
        Some(self.count.swap(0, Ordering::SeqCst))
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .finish()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.shared.gone();
    }
}

impl Upstream {
    /// The upstream `name`, not started.
    pub fn new(name: impl Into<String>, config: UpstreamConfig) -> Self {
        Self {
            name: name.into(),
            config,
            shared: Arc::default(),
            supervised: Once::new(),
            tools: RwLock::new(None),
            listeners: Arc::default(),
            refresh: Arc::default(),
            late: Arc::default(),
            list_changes: Arc::default(),
            warned_names: Mutex::default(),
            surface: RwLock::new(None),
            surface_listeners: Arc::default(),
            surface_refresh: Arc::default(),
            subscriptions: Mutex::default(),
        }
    }

    /// Calls `listener` each time its offered tools may have changed: it became
    /// ready, its connection ended, or it said its tools changed (then on a thread
    /// of its own, after they were listed again).
    pub fn on_tools_changed(&self, listener: Arc<dyn Fn() + Send + Sync>) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(listener);
    }

    /// Its name in `justonce.toml`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What is written before the names of its tools and prompts here.
    pub fn prefix(&self) -> &str {
        &self.config.prefix
    }

    /// The cap on a result of one of its read-only tools (`max_read_bytes`).
    pub fn max_read_bytes(&self) -> usize {
        self.config.max_read_bytes
    }

    /// The provider name its effects are journaled under.
    pub fn provider_name(&self) -> String {
        format!("{PROVIDER_PREFIX}{}", self.name)
    }

    /// Where it stands now (never waits).
    pub fn state(&self) -> UpstreamState {
        self.shared.lock().state.clone()
    }

    /// Where it stands and what its supervisor counted, for an operator (the
    /// console, `/metrics`, `justonce upstreams`).
    pub fn report(&self) -> UpstreamReport {
        let status = self.shared.lock();
        UpstreamReport {
            name: self.name.clone(),
            state: status.state.clone(),
            tools: self.listed().map(|t| t.len()),
            starts: status.starts,
            ready_in: status.ready_in,
        }
    }

    /// An operator's "restart": its connection let go (a process stopped) and it
    /// started again now, without waiting out a backoff; its tools are left out
    /// until it is ready again. Whether it was asked (a disabled one is not
    /// started: [`Upstream::enable`] it).
    pub fn restart(&self) -> bool {
        let asked = self.shared.restart();
        if asked {
            self.tell_listeners();
        }
        asked
    }

    /// An operator's "disable" by `by` at `at` (ms): its connection let go, its
    /// tools left out of `tools/list` (the listeners told), its calls refused, not
    /// performed, naming the operator, until [`Upstream::enable`]. Only the state
    /// of this process: the journal keeps the disable for every host and restart
    /// (`crate::upstream_switch`). A disabled upstream never started is settled.
    /// Whether anything changed (it was not disabled so, already).
    pub fn disable(&self, by: &str, at: i64) -> bool {
        let changed = self.shared.disable(by, at);
        if changed {
            self.tell_listeners();
        }
        changed
    }

    /// An operator's "enable": a disabled upstream is started now. Whether it was
    /// disabled.
    pub fn enable(&self) -> bool {
        self.shared.enable()
    }

    /// Starts its supervisor (once): a thread of its own that starts it, keeps its
    /// state and starts it again after a backoff whenever it ends. Returns at once.
    pub fn supervise(self: &Arc<Self>) {
        self.supervised.call_once(|| supervisor::spawn(self));
    }

    /// Waits until its first start ended, ready or not (a start is bounded by its
    /// `timeout` for each request).
    pub fn wait_settled(&self) {
        let mut status = self.shared.lock();
        while !status.settled {
            status = self.shared.wait(status);
        }
    }

    /// Waits until it is ready, at most until `deadline`; whether it is.
    #[cfg(test)]
    pub(crate) fn wait_ready(&self, deadline: Instant) -> bool {
        let mut status = self.shared.lock();
        loop {
            if status.state.is_ready() {
                return true;
            }
            let (next, waiting) = self.shared.wait_until(status, deadline);
            status = next;
            if !waiting {
                return status.state.is_ready();
            }
        }
    }

    /// Tells each listener its tools may have changed.
    fn tell_listeners(&self) {
        let now = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        now.iter().for_each(|listener| listener());
    }

    /// The connection of a ready upstream, and its number. When it is not ready,
    /// `wait` says how long to wait for it (a resend of a call whose first answer
    /// was lost); without it, or past it, the refusal names its state: nothing is
    /// started here.
    fn connection(&self, wait: Option<Duration>) -> Result<(u64, Arc<Connection>), ClientError> {
        let deadline = wait.map(|wait| Instant::now() + wait);
        let mut status = self.shared.lock();
        loop {
            if let (true, Some((number, connection))) =
                (status.state.is_ready(), status.connection.as_ref())
            {
                if connection.alive() {
                    return Ok((*number, Arc::clone(connection)));
                }
                // It ended and no one said yet: say so, and let it be started again.
                let number = *number;
                drop(status);
                self.shared.ended(number, "its connection ended");
                status = self.shared.lock();
                continue;
            }
            let waiting = match deadline {
                Some(deadline) => {
                    let (next, waiting) = self.shared.wait_until(status, deadline);
                    status = next;
                    waiting
                }
                None => false,
            };
            if !waiting && !status.state.is_ready() {
                return Err(ClientError::Down(status.state.describe(&self.name)));
            }
        }
    }

    /// One start: a new connection (numbered `number`), `initialize`, its tools
    /// listed. Run by its supervisor; `me` is itself, for the thread that lists
    /// the tools again when it says they changed.
    fn start(&self, number: u64, me: &Weak<Upstream>) -> Result<Arc<Connection>, ClientError> {
        let connection = self.connect(number, me).map_err(ClientError::NotSent)?;
        let capabilities = match connection.initialize(self.config.timeout) {
            Ok(result) => result.get("capabilities").cloned().unwrap_or(Value::Null),
            // Its credentials or `url` refused: told as such, not as no answer.
            Err(ClientError::Misconfigured(reason)) => {
                return Err(ClientError::Misconfigured(reason));
            }
            Err(e) => {
                return Err(ClientError::NotSent(format!(
                    "upstream `{}` did not initialize: {e}",
                    self.name
                )));
            }
        };
        let connection = Arc::new(connection);
        self.list(&connection).map_err(ClientError::NotSent)?;
        self.list_surface(&connection, capabilities);
        self.subscribe_again(&connection);
        Ok(connection)
    }

    /// Lists its tools again on the connection it has (after it said they changed).
    fn relist(&self) {
        let listed = self
            .connection(None)
            .map_err(|e| e.to_string())
            .and_then(|(_, connection)| self.list(&connection));
        if let Err(e) = listed {
            tracing::warn!(target: "justonce::upstream", upstream = %self.name, "its tools could not be listed again: {}", field(&e));
        }
    }

    /// A new connection, numbered `number`: the process started, or the HTTP client
    /// made; what it answers stripped of the credentials it was handed.
    fn connect(&self, number: u64, me: &Weak<Upstream>) -> Result<Connection, String> {
        let mut secrets = Vec::new();
        match &self.config.url {
            Some(url) => {
                let headers = self.filled_in("headers", &self.config.headers, &mut secrets)?;
                // A header is there to carry a credential: each value is one whole,
                // written out or not, and so is the token of a `Bearer TOKEN`.
                for (_, value) in &headers {
                    let value = crate::http::SecretValue::literal(value.clone());
                    secrets.extend(value.secrets().map(str::to_owned));
                }
                let oauth = self.oauth_source(&mut secrets)?;
                let shared = Arc::clone(&self.shared);
                let hooks = stream::HttpHooks {
                    changed: self.on_list_changed(me),
                    heard: self.on_surface_news(me),
                    ended: Arc::new(move |why: &str| shared.ended(number, why)),
                };
                let credentials = Credentials::new(&secrets);
                let bearer = oauth.map(|source| {
                    Arc::new(oauth::Bearer::new(
                        &self.name,
                        source,
                        Arc::new(crate::clock::SystemClock),
                        self.config.timeout,
                        credentials.clone(),
                    ))
                });
                Ok(Connection::Http(
                    http_client::HttpClient::new(&self.name, url, headers)
                        .stripping(credentials)
                        .bearing(bearer)
                        .hooked(hooks)
                        .keeping_late(Arc::clone(&self.late)),
                ))
            }
            None => {
                let env = self.filled_in("env", &self.config.env, &mut secrets)?;
                let credentials = Credentials::new(&secrets);
                let changed = self.on_list_changed(me);
                let shared = Arc::clone(&self.shared);
                let ended: client::Ended = Box::new(move |why: &str| shared.ended(number, why));
                client::StdioClient::spawn(
                    &self.name,
                    &self.config.command,
                    &env,
                    client::Hooks {
                        changed,
                        heard: self.on_surface_news(me),
                        ended,
                        late: Arc::clone(&self.late),
                    },
                    credentials,
                )
                .map(Connection::Stdio)
            }
        }
    }

    /// What is done when it says its tools changed: they are listed again, on a
    /// thread of its own (the answer comes through the thread that read the
    /// notification), at most one listing under way and one more asked for however
    /// many it says; the log counts them.
    fn on_list_changed(&self, me: &Weak<Upstream>) -> client::ListChanged {
        let me = Weak::clone(me);
        let refresh = Arc::clone(&self.refresh);
        let tally = Arc::clone(&self.list_changes);
        Arc::new(move || {
            tally.note();
            if !refresh.ask() {
                return; // one is under way and another will follow it
            }
            let me = Weak::clone(&me);
            let refresh = Arc::clone(&refresh);
            let _ = std::thread::Builder::new()
                .name("upstream-tools-changed".into())
                .spawn(move || {
                    loop {
                        if let Some(upstream) = me.upgrade() {
                            if let Some(said) = upstream.list_changes.due(Instant::now()) {
                                tracing::info!(target: "justonce::upstream", upstream = %upstream.name, said, "its tools changed (said {said} time(s) since the last such line); listing them again");
                            }
                            upstream.relist();
                            upstream.tell_listeners();
                        }
                        if !refresh.again() {
                            break;
                        }
                    }
                });
        })
    }

    /// `values` (of the key `what`) with their `${NAME}`s filled in from the secrets
    /// file, else the host's environment; each variable's value and every value of
    /// the secrets file added to `secrets_seen` (to strip from what the upstream
    /// answers). Text written out in the configuration is not a credential, as in
    /// the `http` provider's config: `DEBUG = "true"` is a setting.
    /// Where its OAuth tokens come from, if it has `oauth`: `client_id` and
    /// `client_secret` filled in as `headers` are, the secret (and what filled it
    /// in) added to `secrets`.
    fn oauth_source(&self, secrets: &mut Vec<String>) -> Result<Option<oauth::Source>, String> {
        let Some(config) = &self.config.oauth else {
            return Ok(None);
        };
        let (id, secret) = match config {
            UpstreamOAuth::ClientCredentials(grant) => {
                let client = BTreeMap::from([
                    ("client_id".to_owned(), grant.client_id.clone()),
                    ("client_secret".to_owned(), grant.client_secret.clone()),
                ]);
                let filled: BTreeMap<String, String> = self
                    .filled_in("oauth", &client, secrets)?
                    .into_iter()
                    .collect();
                secrets.push(filled["client_secret"].clone());
                (filled["client_id"].clone(), filled["client_secret"].clone())
            }
            UpstreamOAuth::TokenFile(_) => (String::new(), String::new()),
        };
        Ok(Some(oauth::Source::of(config, &id, &secret)))
    }

    fn filled_in(
        &self,
        what: &str,
        values: &BTreeMap<String, String>,
        secrets_seen: &mut Vec<String>,
    ) -> Result<Vec<(String, String)>, String> {
        let seen = std::cell::RefCell::new(Vec::new());
        let secrets = match &self.config.secrets_file {
            Some(path) => crate::http::read_secrets_file(path)?,
            None => BTreeMap::new(),
        };
        let lookup = |name: &str| {
            let value = secrets
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok());
            seen.borrow_mut().extend(value.clone());
            value
        };
        let filled: Vec<(String, String)> = values
            .iter()
            .map(|(k, v)| {
                crate::http::expand(v, &lookup)
                    .map(|v| (k.clone(), v))
                    .map_err(|e| format!("upstream `{}`: {what}.{k}: {e}", self.name))
            })
            .collect::<Result<_, _>>()?;
        secrets_seen.extend(seen.into_inner());
        secrets_seen.extend(secrets.into_values());
        Ok(filled)
    }

    /// The tools it offers: its supervisor started if need be, and its first start
    /// waited for; the error naming its state when it has listed none.
    pub fn tools(self: &Arc<Self>) -> Result<Arc<Vec<UpstreamTool>>, String> {
        self.supervise();
        self.wait_settled();
        match self.listed() {
            Some(tools) if self.state().is_ready() => Ok(tools),
            _ => Err(self.state().describe(&self.name)),
        }
    }

    /// The tools it listed last, if it ever did (whatever its state now).
    pub fn listed(&self) -> Option<Arc<Vec<UpstreamTool>>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Lists its tools on `client` and keeps them.
    fn list(&self, client: &Connection) -> Result<(), String> {
        let mut entries = Vec::new();
        let mut cursor: Option<Value> = None;
        let mut pages = 0usize;
        loop {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let page = client
                .request(
                    "tools/list",
                    params,
                    self.config.timeout,
                    (None, None),
                    None,
                )
                .map_err(|e| format!("upstream `{}`: tools/list: {e}", self.name))?;
            if let Some(Value::Array(tools)) = page.get("tools") {
                entries.extend(tools.iter().cloned());
            }
            pages += 1;
            match page.get("nextCursor") {
                Some(next) if !next.is_null() => {
                    if pages >= MAX_TOOLS_PAGES || entries.len() >= MAX_TOOLS {
                        return Err(format!(
                            "upstream `{}`: tools/list still had more after {pages} pages and {} tools (the host reads at most {MAX_TOOLS_PAGES} pages, {MAX_TOOLS} tools)",
                            self.name,
                            entries.len()
                        ));
                    }
                    cursor = Some(next.clone())
                }
                _ => break,
            }
        }
        let listed: Vec<&str> = entries
            .iter()
            .filter_map(|e| e.get("name").and_then(Value::as_str))
            .collect();
        for (key, name) in unknown_names(&self.config, &listed) {
            let first = self
                .warned_names
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(format!("{key}.{name}"));
            if !first {
                continue;
            }
            tracing::warn!(target: "justonce::upstream", upstream = %self.name, "`upstreams.{}.{key}` names `{name}`, a tool the upstream does not list: check its spelling (the upstream's own name, without the `prefix`)", self.name);
        }
        let tools = Arc::new(self.offered(entries));
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = Some(tools);
        Ok(())
    }

    /// The entries the configuration lets through, under their names here.
    fn offered(&self, entries: Vec<Value>) -> Vec<UpstreamTool> {
        let config = &self.config;
        let mut offered = Vec::new();
        for entry in entries {
            let Some(upstream_name) = entry.get("name").and_then(Value::as_str) else {
                continue;
            };
            let upstream_name = upstream_name.to_owned();
            if config
                .tools
                .as_ref()
                .is_some_and(|only| !only.contains(&upstream_name))
                || config.exclude.contains(&upstream_name)
            {
                continue;
            }
            let name = format!("{}{upstream_name}", config.prefix);
            if offered.iter().any(|t: &UpstreamTool| t.name == name) {
                tracing::warn!(target: "justonce::upstream", upstream = %self.name, tool = %field(&name), "listed twice by the upstream: the second `{}` is left out, the first one is offered", field(&upstream_name));
                continue;
            }
            if !valid_tool_name(&name) {
                tracing::warn!(target: "justonce::upstream", upstream = %self.name, tool = %field(&name), "left out: not a valid MCP tool name (1 to 128 of A-Z a-z 0-9 _ - .)");
                continue;
            }
            let input_schema = entry
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({ "type": "object" }));
            let schema = match InputSchema::compile(&input_schema) {
                Ok(schema) => schema,
                Err(e) => {
                    tracing::warn!(target: "justonce::upstream", upstream = %self.name, tool = %name, "left out: {}", field(&e.to_string()));
                    continue;
                }
            };
            let hint = |name: &str| {
                entry
                    .get("annotations")
                    .and_then(|a| a.get(name))
                    .and_then(Value::as_bool)
                    == Some(true)
            };
            let read_only = config.trust_read_only_hint && hint("readOnlyHint");
            let keyed = config.dedupes_by_key
                || hint("idempotentHint")
                || config.idempotent.contains(&upstream_name);
            offered.push(UpstreamTool {
                name,
                upstream_name,
                upstream: self.name.clone(),
                entry: Arc::new(entry),
                input_schema: Arc::new(input_schema),
                schema: Arc::new(schema),
                read_only,
                keyed,
            });
        }
        offered
    }

    /// The upstream tool `upstream_name`, if offered.
    fn tool(&self, upstream_name: &str) -> Option<UpstreamTool> {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()?
            .iter()
            .find(|t| t.upstream_name == upstream_name)
            .cloned()
    }

    /// Sends `tools/call` of `tool` with `arguments`, its effect key in `_meta` when
    /// there is one; the upstream's result as it sent it. Its progress reports are
    /// handed on as those of `as_tool` (the name the host offers it by). Refused at
    /// once, nothing sent, when it is not ready, unless `wait` says how long to wait
    /// for it.
    pub(crate) fn call_tool(
        &self,
        tool: &str,
        as_tool: &str,
        arguments: &Value,
        key: Option<&str>,
        wait: Option<Duration>,
    ) -> Result<Value, ClientError> {
        self.call_tool_asking(tool, as_tool, arguments, (key, wait), None)
    }

    /// [`Upstream::call_tool`], with what the upstream asks of the client during the
    /// call (elicitation, sampling, roots) answered by `asks`.
    pub(crate) fn call_tool_asking(
        &self,
        tool: &str,
        as_tool: &str,
        arguments: &Value,
        (key, wait): (Option<&str>, Option<Duration>),
        asks: Option<&dyn crate::provider::ClientRequests>,
    ) -> Result<Value, ClientError> {
        // An earlier attempt's answer that came late, whatever its state now.
        if let Some(answer) = self.late_answer(key) {
            return answer;
        }
        let (number, client) = self.connection(wait)?;
        let mut params = json!({ "name": tool, "arguments": arguments });
        if let Some(key) = key {
            params["_meta"] = json!({ IDEMPOTENCY_KEY_META: key });
        }
        let answer = client.request(
            "tools/call",
            params,
            self.config.timeout,
            (key, Some(as_tool)),
            asks,
        );
        match &answer {
            Ok(_) => self.shared.lock().failures = 0,
            // Its process ended, its session or its configuration refused: it is
            // started again by its supervisor, not by the next call.
            Err(e) if !client.alive() => self.shared.ended(number, &e.to_string()),
            Err(_) => {}
        }
        answer.and_then(|result| within_cap(&self.name, result, MAX_RESULT_BYTES))
    }
}

impl Upstream {
    /// The answer kept for `key` that came after its request was given up, taken
    /// (as `call_tool` would have answered it in time).
    fn late_answer(&self, key: Option<&str>) -> Option<Result<Value, ClientError>> {
        let message = self.late.take(key?)?;
        Some(self.read_late(message))
    }

    /// A late answer (a JSON-RPC response to `tools/call`) as `call_tool` would
    /// have answered it in time.
    fn read_late(&self, message: Value) -> Result<Value, ClientError> {
        client::answer_of(&self.name, "tools/call", message)
            .and_then(|result| within_cap(&self.name, result, MAX_RESULT_BYTES))
    }

    /// Whether a request under `key` is still running on its connection: sent,
    /// given up past the timeout, and not answered yet.
    fn still_running(&self, key: &str) -> bool {
        let status = self.shared.lock();
        status
            .connection
            .as_ref()
            .is_some_and(|(_, connection)| connection.running(key))
    }

    /// Whether a request under `key` waits for the client's later answer to what
    /// the upstream asked during it.
    fn asking(&self, key: &str) -> bool {
        let status = self.shared.lock();
        status
            .connection
            .as_ref()
            .is_some_and(|(_, connection)| connection.asking(key))
    }
}

/// The names `config`'s `tools`, `exclude` and `idempotent` give that are not among
/// the tools the upstream `listed` (a misspelling, a prefixed name, a tool it
/// dropped), each with its key: an `exclude` that names nothing excludes nothing.
fn unknown_names<'a>(config: &'a UpstreamConfig, listed: &[&str]) -> Vec<(&'static str, &'a str)> {
    let keys = [
        ("tools", config.tools.as_deref().unwrap_or_default()),
        ("exclude", config.exclude.as_slice()),
        ("idempotent", config.idempotent.as_slice()),
    ];
    keys.into_iter()
        .flat_map(|(key, names)| names.iter().map(move |name| (key, name.as_str())))
        .filter(|(_, name)| !listed.contains(name))
        .collect()
}

/// `result`, unless its JSON is longer than `cap` bytes: then no answer (it cannot
/// be saved), with an error naming the cap.
fn within_cap(upstream: &str, result: Value, cap: usize) -> Result<Value, ClientError> {
    let size = serde_json::to_vec(&result).map_or(usize::MAX, |v| v.len());
    if size > cap {
        return Err(ClientError::Lost(format!(
            "upstream `{upstream}` answered tools/call with a result of {size} bytes, over the cap of {cap} bytes a saved answer may have"
        )));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, annotations: Value) -> Value {
        json!({
            "name": name,
            "inputSchema": { "type": "object", "properties": { "a": { "type": "string" } } },
            "annotations": annotations,
        })
    }

    fn listed(config: UpstreamConfig) -> Vec<UpstreamTool> {
        Upstream::new("u", config).offered(vec![
            entry("create", json!({ "idempotentHint": false })),
            entry("delete", json!({ "idempotentHint": true })),
            entry("read", json!({ "readOnlyHint": true })),
            entry("bad name!", json!({})),
            json!({ "name": "no_schema" }),
            json!({ "name": "broken", "inputSchema": { "type": 7 } }),
        ])
    }

    /// An answer of the fake server's: `result` for the request `id`.
    const INITIALIZED: &str = r#"read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"t","version":"0"}}}'; read -r l"#;

    /// An upstream that is the shell script `script`, after it answered initialize
    /// (request 1) and read `notifications/initialized`; its next request is 2.
    fn scripted(script: &str, config: impl FnOnce(&mut UpstreamConfig)) -> Arc<Upstream> {
        let mut upstream = UpstreamConfig::command(vec![
            "sh".into(),
            "-c".into(),
            format!("{INITIALIZED}; {script}"),
        ]);
        upstream.timeout = std::time::Duration::from_secs(10);
        config(&mut upstream);
        Arc::new(Upstream::new("fake", upstream))
    }

    fn names(tools: &[UpstreamTool]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn a_stdio_upstream_sees_its_configured_env_and_not_the_hosts() {
        // A variable cargo sets in every test's environment: the host has it.
        const HOSTS: &str = "CARGO_MANIFEST_DIR";
        assert!(std::env::var_os(HOSTS).is_some(), "{HOSTS} is set here");
        // It names its one tool after what it sees (tools/list is request 2).
        let script = format!(
            r#"read -r l; h=absent; [ -n "${{{HOSTS}+x}}" ] && h=present; c=absent; [ "$CONFIGURED" = yes ] && c=present; p=absent; [ -n "$PATH" ] && p=present
echo '{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"host_'$h'_configured_'$c'_path_'$p'","inputSchema":{{"type":"object"}}}}]}}}}'; read -r l"#
        );
        let upstream = scripted(&script, |config| {
            config.env.insert("CONFIGURED".into(), "yes".into());
        });
        let tools = upstream.tools().unwrap();
        assert_eq!(
            names(&tools),
            ["host_absent_configured_present_path_present"]
        );
    }

    #[test]
    fn what_a_stdio_upstream_echoes_of_its_credentials_is_stripped_as_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("u.env");
        std::fs::write(&secrets, "API_TOKEN=tok_file_5e2a9c\n").unwrap();
        // Lists `t` (request 2), answers a result (3) and a JSON-RPC error (4) that
        // echo its environment.
        let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}'; read -r l; echo '{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"token '$TOKEN' flag '$FLAG'"}],"structuredContent":{"'$TOKEN'":"'$TOKEN'"}}}'; read -r l; echo '{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no '$TOKEN'","data":{"t":"'$TOKEN'"}}}'; read -r l"#;
        let upstream = scripted(script, |config| {
            config.secrets_file = Some(secrets);
            config.env = BTreeMap::from([
                ("TOKEN".into(), "${API_TOKEN}".into()),
                // A setting written out in the configuration: not a credential.
                ("FLAG".into(), "true".into()),
            ]);
        });
        assert_eq!(names(&upstream.tools().unwrap()), ["t"]);
        let result = upstream
            .call_tool("t", "t", &json!({}), None, None)
            .unwrap();
        assert_eq!(
            result,
            json!({
                "content": [{ "type": "text", "text": "token [redacted] flag true" }],
                "structuredContent": { "[redacted]": "[redacted]" },
            })
        );
        let refused = upstream.call_tool("t", "t", &json!({}), None, None);
        assert_eq!(
            refused,
            Err(ClientError::Refused(json!({
                "code": -1,
                "message": "no [redacted]",
                "data": { "t": "[redacted]" },
            })))
        );
    }

    #[test]
    fn a_call_past_its_timeout_is_never_sent_again_under_its_key_and_its_late_answer_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (received, gate) = (dir.path().join("received"), dir.path().join("gate"));
        // Lists `t` (request 2); takes one call (3), answers it once the gate exists;
        // then answers the next call it is sent (4).
        let script = format!(
            r#"read -r l; echo '{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"t","inputSchema":{{"type":"object"}}}}]}}}}'
read -r l; echo "$l" >> '{received}'; while [ ! -e '{gate}' ]; do sleep 0.01; done
echo '{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"late"}}]}}}}'
read -r l; echo "$l" >> '{received}'; echo '{{"jsonrpc":"2.0","id":4,"result":{{"content":[{{"type":"text","text":"other"}}]}}}}'; read -r l"#,
            received = received.display(),
            gate = gate.display(),
        );
        let upstream = scripted(&script, |config| {
            config.timeout = Duration::from_millis(200);
        });
        assert_eq!(names(&upstream.tools().unwrap()), ["t"]);
        let call = |key| upstream.call_tool("t", "t", &json!({}), Some(key), None);
        let given_up = call("k1");
        assert!(
            matches!(&given_up, Err(ClientError::Lost(m)) if m.contains("its answer, if it comes, answers the retry")),
            "{given_up:?}"
        );
        assert!(upstream.still_running("k1") && !upstream.still_running("k2"));
        // Under the same key: it waits for the one sent, and sends nothing.
        assert!(matches!(call("k1"), Err(ClientError::Lost(_))));
        std::fs::write(&gate, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60); // a hang's bound
        let answered = loop {
            match call("k1") {
                Err(ClientError::Lost(_)) if Instant::now() < deadline => continue,
                answered => break answered.unwrap(),
            }
        };
        assert_eq!(answered["content"][0]["text"], "late");
        assert!(!upstream.still_running("k1"));
        // The opposite: another key is another request, sent.
        assert_eq!(call("k2").unwrap()["content"][0]["text"], "other");
        let sent: Vec<Value> = std::fs::read_to_string(&received)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let keys: Vec<&Value> = sent
            .iter()
            .map(|m| &m["params"]["_meta"][IDEMPOTENCY_KEY_META])
            .collect();
        assert_eq!(keys, [&json!("k1"), &json!("k2")], "{sent:?}");
    }

    #[test]
    fn an_answer_that_comes_while_nobody_waits_answers_the_next_attempt_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let gate = dir.path().join("gate");
        let script = format!(
            r#"read -r l; echo '{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"t","inputSchema":{{"type":"object"}}}}]}}}}'
read -r l; while [ ! -e '{gate}' ]; do sleep 0.01; done
echo '{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"late"}}]}}}}'; read -r l"#,
            gate = gate.display(),
        );
        let upstream = scripted(&script, |config| {
            config.timeout = Duration::from_millis(200);
        });
        upstream.tools().unwrap();
        let provider = UpstreamProvider::new(Arc::clone(&upstream));
        let key = crate::keys::EffectKey::from_stored("k1".into());
        assert!(
            upstream
                .call_tool("t", "t", &json!({}), Some(key.as_str()), None)
                .is_err()
        );
        use crate::provider::{EarlierAttempt, Provider};
        assert_eq!(
            provider.earlier_attempt(&key),
            Some(EarlierAttempt::Running)
        );
        std::fs::write(&gate, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60); // a hang's bound
        while upstream.still_running(key.as_str()) {
            assert!(Instant::now() < deadline, "never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        let answer = json!({ "content": [{ "type": "text", "text": "late" }] });
        assert_eq!(
            provider.earlier_attempt(&key),
            Some(EarlierAttempt::Answered(Ok(answer)))
        );
        assert_eq!(provider.earlier_attempt(&key), None, "taken once");
    }

    #[test]
    fn an_upstream_answering_a_next_cursor_forever_is_an_error_after_the_page_cap() {
        // Every tools/list (requests 2, 3, …) answered with one more page.
        let script = r#"n=2; while read -r l; do echo '{"jsonrpc":"2.0","id":'$n',"result":{"tools":[],"nextCursor":"more"}}'; n=$((n+1)); done"#;
        let err = scripted(script, |_| {}).tools().unwrap_err();
        assert!(
            err.contains("upstream `fake`")
                && err.contains(&format!("after {MAX_TOOLS_PAGES} pages")),
            "{err}"
        );
        // The opposite: a last page without a cursor ends the list.
        let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"p2"}}'; read -r l; echo '{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"b","inputSchema":{"type":"object"}}]}}'; read -r l"#;
        let tools = scripted(script, |_| {}).tools().unwrap();
        assert_eq!(names(&tools), ["a", "b"]);
    }

    #[test]
    fn a_reply_with_neither_result_nor_error_is_no_answer_not_an_empty_list() {
        let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":2}'; read -r l"#;
        let err = scripted(script, |_| {}).tools().unwrap_err();
        assert!(err.contains("neither a result nor an error"), "{err}");
    }

    #[test]
    fn a_result_over_the_cap_is_no_answer_naming_the_cap() {
        let result = json!({ "content": [{ "type": "text", "text": "x".repeat(100) }] });
        let over = within_cap("u", result.clone(), 50);
        assert!(
            matches!(&over, Err(ClientError::Lost(m)) if m.contains("over the cap of 50 bytes")),
            "{over:?}"
        );
        assert_eq!(within_cap("u", result.clone(), 1000), Ok(result));
    }

    #[test]
    fn a_flood_of_list_changed_is_counted_in_one_log_line_now_and_then() {
        let tally = Tally::default();
        let start = Instant::now();
        tally.note();
        assert_eq!(tally.due(start), Some(1), "the first is logged");
        for _ in 0..10_000 {
            tally.note();
        }
        let soon = start + LIST_CHANGED_LOG_EVERY / 2;
        assert_eq!(tally.due(soon), None, "counted, not logged");
        tally.note();
        let later = start + LIST_CHANGED_LOG_EVERY;
        assert_eq!(tally.due(later), Some(10_001), "one line says how many");
        assert_eq!(tally.due(later + LIST_CHANGED_LOG_EVERY), Some(0));
    }

    #[test]
    fn a_tool_name_with_a_newline_forges_no_log_line() {
        let upstream = Upstream::new("u", UpstreamConfig::command(vec!["x".into()]));
        let forged = "pay\n2026-12-06T07:00:00Z  INFO justonce: call ok tool=refund";
        let (offered, lines) = crate::test_log::logged(|| {
            upstream.offered(vec![
                entry(forged, json!({})),
                entry(forged, json!({})),
                entry("ok", json!({})),
            ])
        });
        assert_eq!(names(&offered), ["ok"]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        for line in &lines {
            let text = line.to_string();
            let tool = line["fields"]["tool"].as_str().unwrap();
            assert!(!tool.contains('\n'), "{text}");
            assert!(tool.starts_with("pay\\n2026-12-06"), "{text}");
            let message = line["fields"]["message"].as_str().unwrap();
            assert!(!message.contains('\n'), "{text}");
        }
    }

    #[test]
    fn a_flood_of_list_changed_runs_one_refresh_and_at_most_one_more() {
        let refresh = Refresh::default();
        assert!(refresh.ask(), "the first starts one");
        assert!(
            !refresh.ask() && !refresh.ask() && !refresh.ask(),
            "the flood starts none"
        );
        assert!(refresh.again(), "one more after it");
        assert!(!refresh.again(), "and no more");
        assert!(refresh.ask(), "a later one starts again");
    }

    /// A Streamable HTTP upstream offering `pay`, whose `tools/call` needs
    /// `Authorization: Bearer good-token-123` (else 401, its body echoing what it
    /// got); the calls it processed.
    fn http_upstream() -> (String, Arc<Mutex<Vec<Value>>>) {
        use std::io::{BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let processed: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen = Arc::clone(&processed);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let received = test_http::receive(&mut reader);
                let auth = received
                    .headers
                    .get("authorization")
                    .cloned()
                    .unwrap_or_default();
                if !received.line.starts_with("POST ") {
                    // No GET stream, and a session's DELETE is nothing to it.
                    let _ = write!(
                        stream,
                        "HTTP/1.1 405 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    continue;
                }
                let body = received.body;
                let message: Value = serde_json::from_slice(&body).unwrap();
                let id = message["id"].clone();
                let ok = |result: Value| json!({ "jsonrpc": "2.0", "id": id, "result": result });
                let (status, answer) = match message["method"].as_str().unwrap_or("") {
                    "initialize" => (200, ok(json!({ "protocolVersion": "2025-06-18", "capabilities": { "tools": {} }, "serverInfo": { "name": "t", "version": "0" } })).to_string()),
                    "tools/list" => (200, ok(json!({ "tools": [{ "name": "pay", "inputSchema": { "type": "object" } }] })).to_string()),
                    "tools/call" if auth == "Bearer good-token-123" => {
                        seen.lock().unwrap().push(message["params"].clone());
                        (200, ok(json!({ "content": [{ "type": "text", "text": "paid" }] })).to_string())
                    }
                    "tools/call" => (401, format!("bad credentials: {auth}")),
                    _ => (202, String::new()),
                };
                let kind = if status == 200 {
                    "application/json"
                } else {
                    "text/plain"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        (url, processed)
    }

    #[test]
    fn a_401_is_not_performed_without_the_token_and_the_call_goes_through_once_fixed() {
        use crate::provider::{Provider, ProviderError, ReadRequest};
        let (url, processed) = http_upstream();
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("upstream.env");
        std::fs::write(&secrets, "TOKEN=bad-token-456\n").unwrap();
        let mut config = UpstreamConfig::command(Vec::new());
        config.url = Some(url);
        config.headers = BTreeMap::from([("Authorization".into(), "Bearer ${TOKEN}".into())]);
        config.secrets_file = Some(secrets.clone());
        let upstream = Arc::new(Upstream::new("u", config));
        assert_eq!(names(&upstream.tools().unwrap()), ["pay"]);
        let provider = UpstreamProvider::new(Arc::clone(&upstream));
        let invocation = crate::keys::InvocationKey::from_stored("0".repeat(32));
        let payload = json!({ "arguments": { "amount": 10 } });
        let call = || {
            provider.read(&ReadRequest {
                tool: "pay",
                invocation: &invocation,
                seq: 0,
                attempt: 1,
                operation: "pay",
                payload: &payload,
                client: None,
            })
        };
        match call() {
            Err(ProviderError::NotPerformed { reason, retry }) => {
                assert!(!retry, "the configuration's refusal: {reason}");
                assert!(reason.contains("HTTP 401"), "{reason}");
                assert!(
                    !reason.contains("bad-token-456"),
                    "the token is stripped: {reason}"
                );
                assert!(reason.contains("[redacted]"), "{reason}");
            }
            other => panic!("a 401: {other:?}"),
        }
        assert!(processed.lock().unwrap().is_empty());

        // The secrets file is fixed: once its supervisor started it again (with the
        // file read again), the same call goes through, processed once. A session
        // it started before the fix is refused again, and ended.
        std::fs::write(&secrets, "TOKEN=good-token-123\n").unwrap();
        let answer = loop {
            let bound = Instant::now() + Duration::from_secs(60); // a hang's bound
            assert!(upstream.wait_ready(bound), "{:?}", upstream.state());
            match call() {
                Err(ProviderError::NotPerformed { reason, .. }) if reason.contains("HTTP 401") => {}
                other => break other.unwrap(),
            }
        };
        assert_eq!(answer["content"][0]["text"], "paid", "{answer}");
        let processed = processed.lock().unwrap();
        assert_eq!(processed.len(), 1);
        assert_eq!(processed[0]["arguments"], json!({ "amount": 10 }));
    }

    /// The upstream `name`, its tools listed already as `entries` answer.
    fn listing(name: &str, entries: Vec<Value>) -> Arc<Upstream> {
        let upstream = Arc::new(Upstream::new(
            name,
            UpstreamConfig::command(vec!["x".into()]),
        ));
        *upstream.tools.write().unwrap() = Some(Arc::new(upstream.offered(entries)));
        ready_without_a_process(&upstream);
        upstream
    }

    /// Marks `upstream` ready, its supervisor never started.
    fn ready_without_a_process(upstream: &Arc<Upstream>) {
        upstream.supervised.call_once(|| {});
        let mut status = upstream.shared.lock();
        status.state = UpstreamState::Ready;
        status.settled = true;
    }

    #[test]
    fn a_name_offered_twice_is_listed_once_the_first_ones() {
        let described = |name: &str, description: &str| {
            let mut entry = entry(name, json!({}));
            entry["description"] = json!(description);
            entry
        };
        let a = listing(
            "a",
            vec![
                described("x", "a's first"),
                described("x", "a's second"),
                described("y", "a's"),
            ],
        );
        let b = listing("b", vec![described("x", "b's"), described("z", "b's")]);
        let upstreams = Upstreams::new(vec![a, b]);
        let tools = upstreams.tools();
        assert_eq!(names(&tools), ["x", "y", "z"]);
        let x = &tools[0];
        assert_eq!(
            (x.upstream.as_str(), &x.entry["description"]),
            ("a", &json!("a's first"))
        );
        let Lookup::Ready(found, tool) = upstreams.find("x") else {
            panic!("x is a ready upstream's")
        };
        assert_eq!(
            (found.name(), &tool.entry["description"]),
            ("a", &json!("a's first"))
        );
        // The opposite: different names from both are all offered.
        assert!(matches!(upstreams.find("z"), Lookup::Ready(b, _) if b.name() == "b"));
    }

    #[test]
    fn its_provider_refuses_an_operation_that_is_not_an_offered_tool() {
        use crate::provider::{Provider, ProviderError, ReadRequest};
        let mut config = UpstreamConfig::command(vec!["/nonexistent/justonce-upstream".into()]);
        config.exclude = vec!["delete".into()];
        let upstream = Arc::new(Upstream::new("u", config.clone()));
        *upstream.tools.write().unwrap() = Some(Arc::new(upstream.offered(vec![
            entry("create", json!({})),
            entry("delete", json!({ "idempotentHint": true })),
        ])));
        let provider = UpstreamProvider::new(Arc::clone(&upstream));
        let invocation = crate::keys::InvocationKey::from_stored("0".repeat(32));
        let payload = json!({ "arguments": {} });
        let read = |operation| {
            provider.read(&ReadRequest {
                tool: "create",
                invocation: &invocation,
                seq: 0,
                attempt: 1,
                operation,
                payload: &payload,
                client: None,
            })
        };
        for refused in ["delete", "never_listed"] {
            match read(refused) {
                Err(ProviderError::NotPerformed { reason, retry }) => {
                    assert!(!retry, "a configuration refusal");
                    assert!(
                        reason.contains(&format!(
                            "`{refused}` is not a tool the host offers of the upstream `u`"
                        )),
                        "{reason}"
                    );
                }
                other => panic!("{refused}: {other:?}"),
            }
        }
        // The opposite case: an offered tool is sent (here, to a server that is not
        // ready: refused at once naming its state, nothing sent, left to its
        // supervisor rather than retried within the call).
        match read("create") {
            Err(ProviderError::NotPerformed { reason, retry }) => {
                assert!(!retry, "{reason}");
                assert!(reason.contains("the upstream `u` is starting"), "{reason}");
            }
            other => panic!("create: {other:?}"),
        }
    }

    #[test]
    fn tools_are_offered_by_the_configuration_under_their_prefixed_names() {
        let mut config = UpstreamConfig::command(vec!["x".into()]);
        config.prefix = "u_".into();
        config.exclude = vec!["no_schema".into()];
        let tools = listed(config.clone());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["u_create", "u_delete", "u_read"],
            "bad names and schemas left out"
        );
        let by = |n: &str| tools.iter().find(|t| t.upstream_name == n).unwrap().clone();
        assert!(!by("create").keyed && !by("create").read_only);
        assert!(by("delete").keyed, "idempotentHint");
        assert!(by("read").read_only);

        config.tools = Some(vec!["create".into(), "read".into()]);
        config.idempotent = vec!["create".into()];
        config.trust_read_only_hint = false;
        let tools = listed(config);
        assert_eq!(tools.len(), 2);
        assert!(tools[0].keyed, "listed in idempotent");
        assert!(!tools[1].read_only, "the hint is not trusted");

        let mut keyed = UpstreamConfig::command(vec!["x".into()]);
        keyed.dedupes_by_key = true;
        assert!(listed(keyed).iter().all(|t| t.keyed));
    }

    #[test]
    fn env_and_headers_are_filled_in_from_the_secrets_file_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("memory.env");
        std::fs::write(&secrets, "MEMORY_TOKEN=tok_from_file\nOTHER=other_secret\n").unwrap();
        let mut config = UpstreamConfig::url("http://127.0.0.1:9/mcp");
        config.secrets_file = Some(secrets);
        config.headers = BTreeMap::from([(
            "Authorization".to_owned(),
            "Bearer ${MEMORY_TOKEN}".to_owned(),
        )]);
        let upstream = Upstream::new("memory", config.clone());
        let mut seen = Vec::new();
        assert_eq!(
            upstream
                .filled_in("headers", &config.headers, &mut seen)
                .unwrap(),
            [(
                "Authorization".to_owned(),
                "Bearer tok_from_file".to_owned()
            )]
        );
        // To strip: the variable's value and every value of the secrets file.
        seen.sort();
        seen.dedup();
        assert_eq!(seen, ["other_secret", "tok_from_file"]);
        let missing = BTreeMap::from([(
            "X".to_owned(),
            "${JUSTONCE_TEST_SURELY_UNSET_VARIABLE}".to_owned(),
        )]);
        let error = upstream
            .filled_in("env", &missing, &mut Vec::new())
            .unwrap_err();
        assert!(
            error.contains("upstream `memory`: env.X")
                && error.contains("JUSTONCE_TEST_SURELY_UNSET_VARIABLE"),
            "{error}"
        );
    }

    #[test]
    fn names_in_tools_exclude_and_idempotent_the_upstream_does_not_list_are_found() {
        let mut config = UpstreamConfig::command(vec!["x".into()]);
        config.prefix = "mem_".into();
        config.tools = Some(vec!["create".into(), "mem_read".into()]);
        config.exclude = vec!["delete".into(), "purge".into()];
        config.idempotent = vec!["create".into(), "craete".into()];
        let listed = ["create", "read", "delete"];
        assert_eq!(
            unknown_names(&config, &listed),
            [
                ("tools", "mem_read"),
                ("exclude", "purge"),
                ("idempotent", "craete")
            ]
        );
        // The opposite: names it lists are not named, nor is an unset `tools`.
        let mut known = UpstreamConfig::command(vec!["x".into()]);
        known.exclude = vec!["delete".into()];
        known.idempotent = vec!["create".into()];
        assert!(unknown_names(&known, &listed).is_empty());
    }

    #[test]
    fn mcp_tool_names_are_checked() {
        for good in ["a", "mem_create-entities.v2", &"x".repeat(128)] {
            assert!(valid_tool_name(good), "{good}");
        }
        for bad in ["", "a b", "é", "a/b", &"x".repeat(129)] {
            assert!(!valid_tool_name(bad), "{bad}");
        }
    }
}
