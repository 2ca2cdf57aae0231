//! The host: tools, journal and providers behind one `call` that is safe to retry.
//! A facade: [`HostBuilder`](crate::HostBuilder) wires it, the guard (`guard/`) does
//! the work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::call::{CallRequest, CallResponse};
use crate::clock::Clock;
use crate::error::Result;
pub(crate) use crate::guard::RunningTask;
use crate::guard::{Guard, Shared};
use crate::http::HttpConfig;
use crate::journal::{
    CallStory, GcReport, Journal, JournalEntry, JournalStats, Operated, Operator, Resolution,
    UnresolvedEffect,
};
use crate::keys::InvocationKey;
use crate::readiness::{self, NotReady};
use crate::retention::Retention;
use crate::runtime::{DirSwap, Runtime, SwapReport, ToolLimits};
use crate::upstream::{UpstreamTool, Upstreams};

/// The guarded tool host. Build it once with [`Host::builder`]; `call` it from many
/// threads.
pub struct Host {
    guard: Guard,
    runtime: Arc<Runtime>,
    limits: ToolLimits,
    http: Arc<HttpConfig>,
    hidden_from_mcp: std::sync::RwLock<std::collections::BTreeSet<String>>,
    upstreams: Arc<Upstreams>,
    /// Set once by [`Host::drain`], never cleared.
    draining: AtomicBool,
    /// What `/metrics` last read from the journal, shown while it is down.
    journal_gauges: crate::metrics::JournalGauges,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("runtime", &self.runtime)
            .field("journal", &self.guard.shared().journal)
            .finish()
    }
}

impl Host {
    pub(crate) fn new(
        guard: Guard,
        runtime: Arc<Runtime>,
        limits: ToolLimits,
        http: Arc<HttpConfig>,
    ) -> Self {
        Self {
            guard,
            runtime,
            limits,
            http,
            hidden_from_mcp: Default::default(),
            upstreams: Default::default(),
            draining: AtomicBool::new(false),
            journal_gauges: Default::default(),
        }
    }

    pub(crate) fn with_upstreams(mut self, upstreams: Arc<Upstreams>) -> Self {
        self.upstreams = upstreams;
        self
    }

    /// The tools of the upstream MCP servers (`[upstreams.NAME]`) that are ready. If
    /// no one called [`Host::start_upstreams`], the first use starts them all (in
    /// parallel) and waits for each one's first start, as a command that runs one
    /// call expects; after it, nothing waits. An upstream that is not ready offers
    /// none; its error is logged.
    pub fn upstream_tools(&self) -> Vec<UpstreamTool> {
        self.upstreams.tools()
    }

    /// The upstream MCP servers (`[upstreams.NAME]`), in the order of `justonce.toml`.
    pub(crate) fn upstream_servers(&self) -> &Upstreams {
        &self.upstreams
    }

    /// Starts every upstream's supervisor, in parallel, without waiting for any
    /// (`serve` does, before it answers anything): each one's tools are offered
    /// once it is ready, and its calls refused at once while it is not.
    pub fn start_upstreams(&self) {
        self.upstreams.start();
    }

    /// Each upstream's name and where it stands now.
    pub fn upstream_states(&self) -> Vec<(String, crate::upstream::UpstreamState)> {
        self.upstreams
            .iter()
            .map(|u| (u.name().to_owned(), u.state()))
            .collect()
    }

    /// The upstream MCP servers (`[upstreams.NAME]`), to report on and operate.
    pub fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// Calls `listener` each time an upstream's offered tools may have changed (it
    /// became ready, went down, or said so); [`Host::upstream_tools`] then has them.
    pub(crate) fn on_upstream_tools_changed(&self, listener: Arc<dyn Fn() + Send + Sync>) {
        for upstream in self.upstreams.iter() {
            upstream.on_tools_changed(Arc::clone(&listener));
        }
    }

    pub(crate) fn hiding_from_mcp(self, tools: std::collections::BTreeSet<String>) -> Self {
        self.hide_from_mcp(tools);
        self
    }

    /// Keeps exactly `tools` from MCP from now on (a reload of the configuration);
    /// whether that changed anything.
    pub(crate) fn hide_from_mcp(&self, tools: std::collections::BTreeSet<String>) -> bool {
        let mut hidden = self
            .hidden_from_mcp
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let changed = *hidden != tools;
        *hidden = tools;
        changed
    }

    /// Whether `serve` offers `tool` over MCP (`[tools.NAME] mcp`, true unless set
    /// false). A hidden tool is still called by the library and `run`.
    pub fn exposed_over_mcp(&self, tool: &str) -> bool {
        !self
            .hidden_from_mcp
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(tool)
    }

    /// Starts building a host.
    pub fn builder() -> crate::HostBuilder {
        crate::HostBuilder::default()
    }

    /// Calls a tool under the guard: runs it the first time, replays the saved
    /// outcome to every retry, waits for a parallel duplicate, and refuses the same key
    /// with different arguments.
    pub fn call(&self, request: &CallRequest) -> Result<CallResponse> {
        self.guard.call(request)
    }

    /// [`Host::call`] of a call that replayed lately, answered from memory alone
    /// (no I/O, nothing run): the same answer, or `None` ("not remembered") whenever
    /// it needs the journal or a run, and then `call` decides. For a caller that
    /// must not block, such as an async server's worker.
    pub(crate) fn replay_from_memory(&self, request: &CallRequest) -> Option<Result<CallResponse>> {
        self.guard.replay_from_memory(request)
    }

    /// The invocation key a call would run under, without running anything.
    pub fn key_for(&self, request: &CallRequest) -> Result<InvocationKey> {
        self.guard.key_for(request)
    }

    /// The loaded tools.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Loads a new build of a tool (or a new tool) while calls run: calls in flight
    /// finish on the component they started with, calls that start after get this
    /// one, and the tool keeps its name and so its keys (a retry of a call the old
    /// build completed replays its answer). A component that fails to load changes
    /// nothing, and the error says why. An MCP server lists
    /// [`Runtime::current_tools`]; its `Catalog::refresh` tells its clients the
    /// list changed (`serve` does both on a reload, see [`crate::HostBuilder::reload`]).
    pub fn swap_tool(&self, source: &std::path::Path, bytes: &[u8]) -> Result<SwapReport> {
        self.runtime.swap(source, bytes)
    }

    /// Swaps in every component of the tools directory `dir` that is not a build
    /// some tool runs now (see [`Host::swap_tool`] and [`Runtime::swap_dir`]).
    pub fn swap_tools_dir(&self, dir: &std::path::Path) -> Result<DirSwap> {
        self.runtime.swap_dir(dir)
    }

    /// The sandbox limits of every tool.
    pub fn limits(&self) -> &ToolLimits {
        &self.limits
    }

    /// The server's secrets that key request states (read from the journal).
    pub fn state_keys(&self) -> Result<crate::ask::StateKeys> {
        self.shared().state_keys()
    }

    /// The clock the host measures retention and leases on.
    pub fn clock(&self) -> &dyn Clock {
        &*self.shared().clock
    }

    /// How long completed records of calls in a conversation are kept, in
    /// milliseconds (also the window of records journaled before each record
    /// carried its own).
    pub fn retention_ms(&self) -> i64 {
        self.guard.retention_ms()
    }

    /// The window of every call: in a conversation, without one, and per tool.
    pub fn retention(&self) -> &Retention {
        self.guard.retention()
    }

    /// How this host reaches HTTP downstreams.
    pub fn http_config(&self) -> &HttpConfig {
        &self.http
    }

    /// This host process as its leases and log lines name it.
    pub fn identity(&self) -> &crate::journal::HostIdentity {
        self.guard.identity()
    }

    /// Invocations (newest first), optionally of one conversation, with their effects.
    pub fn journal(&self, conversation: Option<&str>, limit: u32) -> Result<Vec<JournalEntry>> {
        self.shared().journal.entries(conversation, limit)
    }

    /// Invocations (newest first) of one principal (see [`crate::principal_scope`]),
    /// with their effects.
    pub fn journal_of_principal(&self, principal: &str, limit: u32) -> Result<Vec<JournalEntry>> {
        let prefix = crate::call::principal_prefix(principal);
        self.shared().journal.entries_by_prefix(&prefix, limit)
    }

    /// Pending unkeyed effects that wait for a person, judged at `now` (ms).
    pub fn unresolved(&self, now: i64) -> Result<Vec<UnresolvedEffect>> {
        self.shared().journal.unresolved(now)
    }

    /// Records a person's decision about a pending unkeyed effect (see
    /// [`Resolution`]; `justonce resolve`), as done `by` someone, in the operations
    /// of the effect's call.
    pub fn resolve(
        &self,
        effect_key: &str,
        resolution: Resolution,
        response: &serde_json::Value,
        by: &str,
    ) -> Result<Operated> {
        let operator = self.operator(by, false);
        self.shared()
            .journal
            .resolve(effect_key, resolution, response, &operator)
    }

    /// One call's whole story: its record with every effect, and what operators did
    /// to it (`justonce journal KEY`).
    pub fn story(&self, key: &InvocationKey) -> Result<CallStory> {
        self.shared().journal.story(key)
    }

    /// Removes the record of one call so that the same call runs again, under new
    /// effect keys downstream (`justonce forget`), recorded as done `by` someone.
    /// Refused for a running call, or one with an effect whose outcome is unknown,
    /// unless `force`.
    pub fn forget(&self, key: &InvocationKey, by: &str, force: bool) -> Result<Operated> {
        let operator = self.operator(by, force);
        let forgotten = self.shared().journal.forget(key, &operator)?;
        // The call that runs next under this key is a new one: not cancelled.
        self.shared().tasks.forget(key.as_str());
        Ok(forgotten)
    }

    /// Cancels the call of the MCP task `key` (`tasks/cancel`): it performs no new
    /// effect, on any host of the journal; one its journal holds replays. Journaled
    /// against the generation of the call its record holds now (with no record yet,
    /// against the key's first record, whichever host makes it): it ends with that generation
    /// (see [`Guard::cancel_task`]).
    pub(crate) fn cancel_task(&self, key: &InvocationKey) -> Result<()> {
        self.guard.cancel_task(key).map(drop)
    }

    /// Whether the call of the MCP task `key`, whose record is of `generation`
    /// (`None`: no record), was cancelled: `journaled` (its record says its
    /// generation was cancelled, by any host), or on this host before it had one.
    pub(crate) fn task_cancelled(
        &self,
        key: &str,
        generation: Option<u64>,
        journaled: bool,
    ) -> bool {
        journaled || self.shared().tasks.is_cancelled(key, generation)
    }

    /// Notes that the call of the MCP task `key` runs on this host (what
    /// `tasks/get` answers before the call journals anything): the run's token,
    /// for [`Host::task_stopped`].
    pub(crate) fn task_started(&self, key: &str, task: RunningTask) -> u64 {
        self.shared().tasks.started(key, task)
    }

    /// Notes that the run `run` of the MCP task `key` stopped running on this host
    /// (a later run of it, resumed meanwhile, still runs).
    pub(crate) fn task_stopped(&self, key: &str, run: u64) {
        self.shared().tasks.stopped(key, run);
    }

    /// The call of the MCP task `key`, if it runs on this host.
    pub(crate) fn running_task(&self, key: &str) -> Option<RunningTask> {
        self.shared().tasks.running(key)
    }

    /// Closes one diverged or stuck call with a saved `abandoned` outcome that lists
    /// the effects it performed (`justonce abandon`), recorded as done `by` someone;
    /// every retry replays it. Refused for a completed call (a second `abandon` is
    /// [`Operated::AlreadyDone`]), and for a running one unless `force`.
    pub fn abandon(&self, key: &InvocationKey, by: &str, force: bool) -> Result<Operated> {
        let operator = self.operator(by, force);
        self.shared().journal.abandon(key, &operator)
    }

    fn operator<'a>(&self, by: &'a str, force: bool) -> Operator<'a> {
        Operator {
            by,
            force,
            now: self.clock().now_ms(),
        }
    }

    /// Deletes completed records past their own windows.
    pub fn gc(&self) -> Result<GcReport> {
        let now = self.clock().now_ms();
        self.shared().journal.gc(now, self.retention_ms())
    }

    /// The journal's identity and its mark, the creation time of its newest call
    /// ever, brought up to date now (see [`crate::journal::JournalMark`]).
    pub fn journal_mark(&self) -> Result<crate::journal::JournalMark> {
        let mut fresh = [0u8; 16];
        getrandom::fill(&mut fresh)
            .map_err(|e| crate::Error::Host(anyhow::anyhow!("cannot draw a journal id: {e}")))?;
        self.shared().journal.mark(&hex::encode(fresh))
    }

    /// Runs [`Host::gc`] if the journal's last scheduled gc, by any host, ran
    /// `every` or more ago on the journal's clock, as this host (one host at a
    /// time: see [`crate::journal::Journal::gc_if_due`]). A run is logged and
    /// counted (`justonce_gc_removed_total`).
    pub fn gc_if_due(&self, every: std::time::Duration) -> Result<crate::journal::ScheduledGc> {
        let now = self.clock().now_ms();
        let every_ms = crate::clock::millis(every);
        let by = &self.identity().name;
        let outcome = self
            .shared()
            .journal
            .gc_if_due(now, every_ms, self.retention_ms(), by)?;
        if let crate::journal::ScheduledGc::Ran(report) = &outcome {
            self.shared().metrics.gc().ran([
                report.invocations,
                report.effects,
                report.aliases,
                report.outbox,
                report.mailbox,
                report.early_cancels,
            ]);
            tracing::info!(
                invocations = report.invocations,
                effects = report.effects,
                aliases = report.aliases,
                outbox = report.outbox,
                mailbox = report.mailbox,
                early_cancels = report.early_cancels,
                every_s = every.as_secs(),
                "scheduled gc removed {} expired call(s) and what they held",
                report.invocations
            );
        }
        Ok(outcome)
    }

    /// What this host counted since it started, in Prometheus' text format (what
    /// `/metrics` serves): its build, calls by tool and outcome, effects and attempts
    /// by provider and result, retries, lease takeovers, calls in flight, the
    /// journal's commit and fsync latencies; and, read from the journal now, whether
    /// it answers, the outbox's depth, the effects without a definitive answer, those
    /// waiting for a person, and the calls stuck and running (their last values while
    /// the journal does not answer). Every loaded tool and configured provider has its
    /// series from the start, at zero.
    pub fn metrics_text(&self) -> String {
        let shared = self.shared();
        for tool in self.runtime.current_tools() {
            shared.metrics.tool(&tool.name);
        }
        for provider in shared.providers.keys() {
            shared.metrics.provider(provider);
        }
        let mut text = crate::metrics::text::Text::default();
        crate::metrics::render_build_info(env!("CARGO_PKG_VERSION"), &mut text);
        shared.metrics.render(&mut text);
        shared.journal.metrics().render(&mut text);
        let upstreams: Vec<_> = self
            .upstreams
            .iter()
            .map(|u| {
                let report = u.report();
                (report.name, report.state.name(), report.starts)
            })
            .collect();
        crate::metrics::render_upstreams(
            &upstreams,
            &crate::upstream::UpstreamState::NAMES,
            &mut text,
        );
        self.journal_gauges
            .render(self.read_journal_gauges(), &mut text);
        text.finish()
    }

    /// The gauges `/metrics` reads from the journal. When it does not answer a first
    /// cheap read, the others are not tried (each would wait for it again).
    fn read_journal_gauges(&self) -> crate::metrics::Reading {
        use crate::metrics::{Attention, Reading, Unknown};
        let journal = &self.shared().journal;
        if let Err(e) = journal.ping() {
            tracing::warn!(
                "metrics: the journal does not answer; its gauges show their last values: {e}"
            );
            return Reading::default();
        }
        let now = self.clock().now_ms();
        let read = |what: &str, e: crate::Error| tracing::warn!("metrics: reading {what}: {e}");
        let outbox = journal
            .outbox()
            .outbox_depth()
            .map_err(|e| read("the outbox's depth", e))
            .ok();
        let unknown = journal
            .pending_effects()
            .and_then(|pending| {
                let unresolved = journal.unresolved(now)?.len();
                Ok(Unknown {
                    pending,
                    unresolved,
                })
            })
            .map_err(|e| read("the pending effects", e))
            .ok();
        let attention = journal
            .attention(now)
            .map(|attention| {
                let mut by_host = std::collections::BTreeMap::<String, u64>::new();
                // This host has its series at zero from the start.
                by_host.insert(self.identity().name.clone(), 0);
                for owner in &attention.running_owners {
                    let holder = crate::journal::Holder::of(owner);
                    let host = holder.host.unwrap_or_else(|| "unnamed".into());
                    *by_host.entry(host).or_default() += 1;
                }
                Attention {
                    stuck: attention.stuck,
                    running_by_host: by_host.into_iter().collect(),
                }
            })
            .map_err(|e| read("the stuck and running calls", e))
            .ok();
        Reading {
            up: true,
            outbox,
            unknown,
            attention,
        }
    }

    /// Stops this host taking new work: from now on [`Host::readiness`] says
    /// `draining`, and an MCP server on it starts no new call or session (the calls
    /// in flight finish). `true` the first time, `false` when it was draining
    /// already. A drain is not undone.
    pub fn drain(&self) -> bool {
        !self.draining.swap(true, Ordering::SeqCst)
    }

    /// Hands over the calls still running on this host, for a host that stops before
    /// they end (a drain past its timeout): from now on no run here writes to the
    /// journal, and each call's lease ends now, journaled as handed over by this
    /// host, so the next retry of it, on any host, takes it over at once (and logs
    /// that this host handed it over). Each is logged at `warn`. Call it last: the
    /// runs in flight here can save nothing after it.
    pub fn hand_over(&self) -> crate::HandOver {
        self.guard.hand_over()
    }

    /// Whether [`Host::drain`] was called.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Whether this host should be sent new work (`/readyz`): not draining, a tool
    /// loaded or an upstream configured, and the journal answering a read now (on
    /// PostgreSQL, a round trip). It blocks for that read.
    pub fn readiness(&self) -> std::result::Result<(), NotReady> {
        let tools =
            !self.runtime.current_tools().is_empty() || self.upstreams.iter().next().is_some();
        readiness::judge(self.draining(), tools, || self.shared().journal.ping())
    }

    /// How many commits and fsyncs the journal made so far.
    pub fn journal_stats(&self) -> JournalStats {
        self.shared().journal.stats()
    }

    /// How many round trips to its server a PostgreSQL journal made so far (0 on
    /// SQLite), for the bench. Not part of the embedding surface.
    #[doc(hidden)]
    pub fn journal_round_trips(&self) -> u64 {
        self.shared().journal.round_trips()
    }

    /// How long the SQLite journal's one writer has been busy making and committing
    /// the grouped writes of calls so far (`None` on PostgreSQL), for the bench. Not
    /// part of the embedding surface.
    #[doc(hidden)]
    pub fn journal_writer_busy(&self) -> Option<std::time::Duration> {
        self.shared().journal.writer_busy()
    }

    /// Runs a read-only query on the SQLite journal's database (tests read a
    /// provider's tables with it). Not part of the embedding surface.
    #[doc(hidden)]
    pub fn inspect_sqlite<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>,
    ) -> Result<R> {
        let journal = self.shared().journal.as_sqlite().ok_or_else(|| {
            crate::Error::Host(anyhow::anyhow!("this host's journal is not SQLite"))
        })?;
        journal.read(f)
    }

    /// Every message in the outbox, oldest first, on either journal (tests and tools
    /// read the queue with it). Not part of the embedding surface.
    #[doc(hidden)]
    pub fn outbox_messages(&self) -> Result<Vec<crate::providers::OutboxMessage>> {
        self.shared().journal.outbox().outbox_messages()
    }

    pub(crate) fn http_config_arc(&self) -> Arc<HttpConfig> {
        Arc::clone(&self.http)
    }

    /// The guard, for the sweeper's runs.
    pub(crate) fn guard(&self) -> &Guard {
        &self.guard
    }

    /// What the guard shares; the outbox deliverer uses the journal and the clock.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        self.guard.shared()
    }

    /// The journal, for the outbox deliverer.
    pub(crate) fn journal_handle(&self) -> &Arc<dyn Journal> {
        &self.shared().journal
    }
}
