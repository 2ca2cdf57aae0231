//! The WebAssembly side: one engine, components compiled once and pre-instantiated,
//! a fresh deny-all `Store` for every call.

mod bindings;
mod cache;
mod capture;
pub mod compile_notice;
mod content;
mod effects;
mod host_imports;
mod import_policy;
mod input_schema;
mod integer_formats;
mod limiter;
mod limits;
pub mod log_listener;
mod panic_message;
mod pool;
mod portable_schema;
mod reconcile;
mod sockets;
pub mod spans;
mod swap;
mod trap;
mod unguarded;
mod waits;

pub(crate) use bindings::ToolError as GuestToolError;
pub use cache::{CacheStats, CompileCache};
pub use compile_notice::{CompileNotice, Compiling};
pub(crate) use effects::{EffectFailure, EffectHandler};
pub use input_schema::InputSchema;
pub use limits::{Limits, ToolLimits};
pub use pool::CONCURRENT_CALLS;
pub(crate) use pool::check_fits as check_pool_fits;
pub use portable_schema::portable as portable_schema;
pub use portable_schema::portable_with_dialect as portable_schema_with_dialect;
pub(crate) use reconcile::{ReconcileRequest, Reconciled};
pub use swap::{DirSwap, SwapReport};
pub(crate) use trap::TrapReason;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Trap, UpdateDeadline};
use wasmtime_wasi::WasiCtx;

use crate::error::{Error, LoadFault};
use bindings::{Tool, ToolPre};
use capture::BoundedCapture;
use host_imports::GuestState;
pub(crate) use host_imports::truncate;
use limiter::{CallLimiter, LimitHit};

/// How often the engine's epoch advances; the deadline is counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The keyword at the root of a tool's input schema by which the SDKs mark a tool
/// that only reads.
pub const READ_ONLY_KEYWORD: &str = "x-justonce-read-only";

/// The keyword at the root of a tool's input schema that carries the JSON Schema of
/// its result (MCP's `outputSchema`).
pub const OUTPUT_SCHEMA_KEYWORD: &str = "x-justonce-output-schema";

/// A tool that was loaded and checked.
pub struct LoadedTool {
    /// The name agents call it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The tool only reads (the SDKs' read-only mark, MCP's `readOnlyHint`): nothing
    /// of its calls is journaled, every call runs, and an effect it asks for traps.
    pub read_only: bool,
    /// The JSON Schema of its result, an object's, if it declared one (MCP's
    /// `outputSchema`).
    pub output_schema: Option<Value>,
    /// Where the component came from.
    pub source: PathBuf,
    /// The component's digest (`sha256:…` of its bytes): which build of the tool
    /// this is.
    pub digest: String,
    /// `input_schema`, compiled; every call's arguments are checked against it.
    pub schema: Arc<InputSchema>,
    /// `input_schema`, shared with the guard's view of the tool.
    pub(crate) input_schema_arc: Arc<Value>,
    pre: ToolPre<GuestState>,
    /// The component's `reconcile` (the `reconciling-tool` world), if it exports one.
    reconciling: Option<bindings::reconciling::ReconcilingToolPre<GuestState>>,
}

impl std::fmt::Debug for LoadedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedTool")
            .field("name", &self.name)
            .field("source", &self.source)
            .finish()
    }
}

/// A component that was refused at load, with the reason.
#[derive(Debug, Clone)]
pub struct RefusedTool {
    /// Where the component came from.
    pub source: PathBuf,
    /// Why it was refused.
    pub reason: String,
}

/// How a call of a guest ended, before the guard interprets it.
pub(crate) enum GuestOutcome {
    /// `call` returned: its JSON or error, and the result parts it added (MCP
    /// content blocks; `None` for none).
    Returned(Result<String, bindings::ToolError>, Option<Vec<Value>>),
    /// Every call slot stayed taken for `waited`: the guest never started.
    Busy {
        /// How long the call waited for a slot.
        waited: Duration,
    },
    /// The guest trapped: a reason code and the runtime's message.
    Trapped {
        /// Why.
        reason: TrapReason,
        /// What the runtime said.
        message: String,
    },
}

/// The engine, the linker and the loaded tools. Build it once and share it (it is
/// `Send + Sync`); several [`Host`](crate::Host)s may share one runtime.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestState>,
    limits: Limits,
    tools: BTreeMap<String, Arc<LoadedTool>>,
    refused: Vec<RefusedTool>,
    ticker_stop: Arc<AtomicBool>,
    cache: Option<CompileCache>,
    permits: pool::CallPermits,
    pool_memory_bytes: usize,
    /// Whether the store's WASI context lets the network through (only the sockets
    /// tests set it, to show that the stubs deny whatever the context says).
    wasi_network: bool,
    /// Components swapped in while serving (see `swap`).
    swapped: swap::Swapped,
    /// Told before a large component is compiled (see [`Runtime::on_compile`]).
    compile_notice: Option<CompileNotice>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// An engine with epoch interruption and a linker that offers the guest only the
    /// justonce imports and a deny-all WASI.
    pub fn new(limits: Limits) -> Result<Self, Error> {
        let pool_memory_bytes = limits.memory_bytes;
        Self::with_pool_memory(limits, pool_memory_bytes)
    }

    /// Like [`Runtime::new`], with pooled slots of `pool_memory_bytes` of linear memory
    /// (at least `limits.memory_bytes`), for hosts whose tools may have more memory
    /// than the defaults.
    pub(crate) fn with_pool_memory(
        limits: Limits,
        pool_memory_bytes: usize,
    ) -> Result<Self, Error> {
        let pool_memory_bytes = pool_memory_bytes.max(limits.memory_bytes);
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // Fuel is metered always so that any tool's limits may set it; a call without
        // a fuel limit gets all the fuel there is.
        config.consume_fuel(true);
        // A fresh store per call is cheap with pre-reserved slots (see `pool`).
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool::pooling_config(
            pool_memory_bytes,
        )));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::<GuestState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        waits::shadow_blocking_poll(&mut linker)?;
        sockets::deny_sockets(&mut linker)?;
        Tool::add_to_linker::<_, HasSelf<GuestState>>(&mut linker, |state| state)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = Arc::clone(&ticker_stop);
            std::thread::Builder::new()
                .name("justonce-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| Error::Host(e.into()))?;
        }
        Ok(Self {
            engine,
            linker,
            limits,
            tools: BTreeMap::new(),
            refused: Vec::new(),
            ticker_stop,
            cache: None,
            permits: pool::CallPermits::new(pool::CONCURRENT_CALLS),
            pool_memory_bytes,
            wasi_network: false,
            swapped: swap::Swapped::default(),
            compile_notice: None,
        })
    }

    /// Keeps compiled components in `dir` (created on first use) and loads them from
    /// there when their bytes and this engine's configuration match, instead of
    /// compiling again. Applies to the components loaded after this call.
    pub fn set_compile_cache(&mut self, dir: impl Into<PathBuf>) {
        self.cache = Some(CompileCache::new(&self.engine, dir.into()));
    }

    /// Calls `notice` before compiling a component of at least
    /// [`compile_notice::ANNOUNCED_BYTES`] that the compile cache does not hold (or
    /// any such component, without a cache): the CLI says that it compiles, and for
    /// about how long, instead of going silent for seconds.
    pub fn on_compile(&mut self, notice: CompileNotice) {
        self.compile_notice = Some(notice);
    }

    /// The compiled-component cache, if one was set.
    pub fn compile_cache(&self) -> Option<&CompileCache> {
        self.cache.as_ref()
    }

    /// The largest linear memory a call of this runtime can have, in bytes: the size
    /// of a pooled slot's memory. No tool may be configured with more (the host
    /// builder refuses it); [`Runtime::new`] sizes it from its limits.
    pub fn pool_memory_bytes(&self) -> usize {
        self.pool_memory_bytes
    }

    /// Configures every store's WASI context to allow TCP, UDP, name lookup and every
    /// address, as a careless embedder might: `wasi:sockets` is linked to stubs that
    /// deny all the same (for the test that shows it).
    #[doc(hidden)]
    pub fn open_wasi_network_context(&mut self) {
        self.wasi_network = true;
    }

    /// How many of the [`CONCURRENT_CALLS`] call slots are free now (for tests that
    /// fill them).
    #[doc(hidden)]
    pub fn free_call_slots(&self) -> u32 {
        self.permits.free()
    }

    /// The default limits: a tool describes itself under them at load, and a host
    /// that sets none runs every call under them.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Compiles, links and checks a component, and adds its tool.
    pub fn load(&mut self, source: &Path, bytes: &[u8]) -> Result<&LoadedTool, Error> {
        let tool = self.prepare(source, bytes)?;
        if let Some(existing) = self.tools.get(&tool.name) {
            return Err(Error::DuplicateTool {
                name: tool.name.clone(),
                first: existing.source.clone(),
                second: source.to_path_buf(),
            });
        }
        let name = tool.name.clone();
        self.tools.insert(name.clone(), Arc::new(tool));
        Ok(&self.tools[&name])
    }

    /// Loads a component file.
    pub fn load_file(&mut self, path: &Path) -> Result<&LoadedTool, Error> {
        let bytes = std::fs::read(path).map_err(|e| Error::Load {
            path: path.to_path_buf(),
            fault: io_fault(&e),
            reason: match e.kind() {
                std::io::ErrorKind::NotFound => "no such file; check the path (a tool built with `cargo build --release --target wasm32-wasip2` is at target/wasm32-wasip2/release/NAME.wasm)".into(),
                std::io::ErrorKind::IsADirectory => "is a directory; give a .wasm file (or the directory with --tools)".into(),
                _ => e.to_string(),
            },
        })?;
        self.load(path, &bytes)
    }

    /// Loads every `*.wasm` file in `dir` (sorted by name). A component that is refused
    /// is remembered in [`Runtime::refused`] instead of failing the whole directory.
    pub fn load_dir(&mut self, dir: &Path) -> Result<(), Error> {
        for path in wasm_files(dir)? {
            if let Err(e) = self.load_file(&path) {
                self.refused.push(RefusedTool {
                    source: path,
                    reason: e.to_string(),
                });
            }
        }
        Ok(())
    }

    fn prepare(&self, source: &Path, bytes: &[u8]) -> Result<LoadedTool, Error> {
        let refuse = |reason: String| Error::Load {
            path: source.to_path_buf(),
            reason,
            fault: LoadFault::Input,
        };
        if !bytes.starts_with(b"\0asm") {
            return Err(refuse("not a WebAssembly file (no \\0asm header)".into()));
        }
        // Bytes 6..8 are the layer: 0 for a core module, 1 for a component.
        if bytes.get(6..8) == Some(&[0, 0]) {
            return Err(refuse(
                "is a core WebAssembly module, not a component; build the tool for wasm32-wasip2"
                    .into(),
            ));
        }
        let announce = || {
            if let Some(notice) = &self.compile_notice
                && bytes.len() >= compile_notice::ANNOUNCED_BYTES
            {
                notice(&Compiling {
                    source,
                    bytes: bytes.len(),
                    cached: self.cache.is_some(),
                });
            }
        };
        let component = match &self.cache {
            Some(cache) => cache.component(&self.engine, bytes, announce),
            None => {
                announce();
                Component::from_binary(&self.engine, bytes)
            }
        }
        .map_err(|e| refuse(format!("not a valid component: {e:#}")))?;
        import_policy::check(&self.engine, &component, bytes).map_err(refuse)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| refuse(format!("{e:#}")))?;
        let reconciling = reconcile::pre(&component, &pre).map_err(refuse)?;
        let pre = ToolPre::new(pre)
            .map_err(|e| refuse(format!("does not export the justonce `tool` world: {e:#}")))?;

        let _slot = self
            .permits
            .acquire_within(self.limits.deadline)
            .ok_or_else(|| Error::Load {
                path: source.to_path_buf(),
                reason: format!(
                    "every one of the {CONCURRENT_CALLS} call slots stayed taken for {} ms; \
                     try loading it again",
                    self.limits.deadline.as_millis()
                ),
                fault: LoadFault::Host,
            })?;
        let mut store = self.store(Arc::from("<describe>"), None, &self.limits);
        let info = pre
            .instantiate(&mut store)
            .and_then(|tool| tool.call_describe(&mut store))
            .map_err(|e| refuse(format!("describe() failed: {e:#}")))?;
        if info.name.is_empty()
            || !info
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(refuse(format!(
                "tool name `{}` must be non-empty lowercase letters, digits, `_` or `-`",
                info.name
            )));
        }
        let mut input_schema: Value = serde_json::from_str(&info.input_schema)
            .map_err(|e| refuse(format!("input schema is not JSON: {e}")))?;
        // The read-only mark travels in the schema's root (no change to the ABI's
        // `tool-info`), and is not part of the schema agents see.
        let read_only = match input_schema
            .as_object_mut()
            .and_then(|root| root.remove(READ_ONLY_KEYWORD))
        {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => {
                return Err(refuse(format!(
                    "`{READ_ONLY_KEYWORD}` in the input schema must be true or false, not {other}"
                )));
            }
        };
        let output_schema = match input_schema
            .as_object_mut()
            .and_then(|root| root.remove(OUTPUT_SCHEMA_KEYWORD))
        {
            None => None,
            Some(schema) if schema.get("type") == Some(&Value::from("object")) => Some(schema),
            Some(other) => {
                return Err(refuse(format!(
                    "`{OUTPUT_SCHEMA_KEYWORD}` in the input schema must be the JSON Schema of an object (`\"type\": \"object\"`), not {other}"
                )));
            }
        };
        let schema = InputSchema::compile(&input_schema).map_err(refuse)?;
        Ok(LoadedTool {
            name: info.name,
            description: info.description,
            input_schema_arc: Arc::new(input_schema.clone()),
            input_schema,
            read_only,
            output_schema,
            source: source.to_path_buf(),
            digest: component_digest(bytes),
            schema: Arc::new(schema),
            pre,
            reconciling,
        })
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Arc<LoadedTool>> {
        self.tools.get(name)
    }

    /// Every tool loaded at start, by name (with the builds swapped in since:
    /// [`Runtime::current_tools`]).
    pub fn tools(&self) -> impl Iterator<Item = &LoadedTool> {
        self.tools.values().map(|t| &**t)
    }

    /// Components that were refused while loading a directory.
    pub fn refused(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// The names of the tools new calls get, comma-separated (for error messages).
    pub(crate) fn names(&self) -> String {
        let current = self.current_tools();
        let names: Vec<&str> = current.iter().map(|t| t.name.as_str()).collect();
        if names.is_empty() {
            "(none)".into()
        } else {
            names.join(", ")
        }
    }

    fn store(
        &self,
        tool: Arc<str>,
        handler: Option<Box<dyn EffectHandler>>,
        limits: &Limits,
    ) -> wasmtime::Store<GuestState> {
        let stdout = BoundedCapture::new(limits.max_output_bytes);
        let stderr = BoundedCapture::new(limits.max_output_bytes);
        let mut wasi = WasiCtx::builder();
        // Denied twice: by this context, and by the stubs `wasi:sockets` is linked to.
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(self.wasi_network)
            .allow_udp(self.wasi_network)
            .allow_ip_name_lookup(self.wasi_network);
        if self.wasi_network {
            wasi.inherit_network();
        }
        // Clocks and random come from the invocation's journal, so a resumed run sees
        // the same values (see `determinism`).
        match &handler {
            Some(handler) => handler.entropy().configure(&mut wasi),
            None => crate::determinism::GuestEntropy::describe().configure(&mut wasi),
        }
        let state = GuestState {
            wasi: wasi.build(),
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(limiter::MAX_HANDLES);
                table
            },
            limiter: CallLimiter::new(limits.memory_bytes),
            max_effects: limits.max_effects,
            max_payload_bytes: limits.max_payload_bytes,
            max_result_bytes: limits.max_result_bytes,
            parts: content::ResultParts::default(),
            effects: 0,
            limit_hit: None,
            handler,
            tool,
            stdout,
            stderr,
            log_budget: limits.max_output_bytes,
            log_dropped: 0,
            started: std::time::Instant::now(),
            deadline: limits.deadline,
            wall_clock: limits.wall_clock,
            host_time: std::time::Duration::ZERO,
            ask_time: std::time::Duration::ZERO,
        };
        let mut store = wasmtime::Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
            .set_fuel(limits.fuel.unwrap_or(u64::MAX))
            .expect("fuel is enabled on the engine");
        store.set_epoch_deadline(ticks_for(limits.deadline.min(limits.wall_clock)));
        // At each expiry, time the host spent inside `perform` is given back: the
        // deadline bounds the guest's own running time.
        store.epoch_deadline_callback(|ctx| {
            let left = ctx.data().deadline_left();
            Ok(if left.is_zero() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(ticks_for(left))
            })
        });
        store
    }

    /// Runs `call(args)` of `tool` in a fresh store under `limits`, its effects going
    /// to `handler`, and hands the handler back with the outcome.
    pub(crate) fn call(
        &self,
        tool: &LoadedTool,
        args: &str,
        handler: Box<dyn EffectHandler>,
        limits: &Limits,
    ) -> (GuestOutcome, Box<dyn EffectHandler>) {
        // A slot frees within a deadline of the longest call holding one (time in
        // `perform` aside), so waiting one deadline serves a call behind full slots.
        let Some(_slot) = self.permits.acquire_within(limits.deadline) else {
            return (
                GuestOutcome::Busy {
                    waited: limits.deadline,
                },
                handler,
            );
        };
        let mut store = self.store(Arc::from(tool.name.as_str()), Some(handler), limits);
        let result = tool
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_call(&mut store, args));
        store.data().flush_output();
        let handler = store
            .data_mut()
            .handler
            .take()
            .expect("the handler stays in the store for the whole call");
        let outcome = match result {
            Ok(returned) => GuestOutcome::Returned(returned, store.data_mut().parts.take()),
            Err(error) => {
                let hit = store.data().limit_hit();
                let reason = classify_trap(&error, hit.as_ref());
                let message = match (&hit, reason) {
                    (Some(hit), _) => hit.to_string(),
                    (None, TrapReason::DeadlineExceeded) if store.data().past_wall_clock() => {
                        format!(
                            "the call ran past its wall-clock cap of {} ms ({} ms of it inside effects)",
                            limits.wall_clock.as_millis(),
                            store.data().host_time.as_millis()
                        )
                    }
                    (None, TrapReason::DeadlineExceeded) => format!(
                        "the call ran past its deadline of {} ms",
                        limits.deadline.as_millis()
                    ),
                    (None, TrapReason::FuelExhausted) => format!(
                        "the call used up its fuel ({})",
                        limits.fuel.unwrap_or(u64::MAX)
                    ),
                    (None, TrapReason::Panic) => {
                        let stderr = store.data().stderr.tail();
                        panic_message::from_stderr(&String::from_utf8_lossy(&stderr))
                            .unwrap_or_else(|| panic_message::trap_summary(&error))
                    }
                    (None, TrapReason::HostFailure) => format!("{error:#}"),
                    (None, TrapReason::HandleLimit) => LimitHit::Handles {
                        limit: limiter::MAX_HANDLES,
                    }
                    .to_string(),
                    _ => panic_message::trap_summary(&error),
                };
                if reason != TrapReason::HostFailure {
                    // The agent gets the message; the backtrace is for the tool's author.
                    tracing::info!(target: "justonce::guest", tool = %tool.name, reason = reason.as_str(), "the tool trapped: {error:?}");
                }
                GuestOutcome::Trapped { reason, message }
            }
        };
        (outcome, handler)
    }
}

/// The `*.wasm` files in the tools directory `dir`, sorted by name.
fn wasm_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Load {
        path: dir.to_path_buf(),
        fault: io_fault(&e),
        reason: format!("cannot read the tools directory: {e} (check --tools or `tools_dir`)"),
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// Whose fault a failure to read a path the user gave is: theirs when it does not
/// exist or is not what was asked for, else the host's.
fn io_fault(e: &std::io::Error) -> LoadFault {
    use std::io::ErrorKind as Kind;
    match e.kind() {
        Kind::NotFound
        | Kind::PermissionDenied
        | Kind::IsADirectory
        | Kind::NotADirectory
        | Kind::InvalidFilename => LoadFault::Input,
        _ => LoadFault::Host,
    }
}

/// `sha256:` and the hex digest of `bytes` (the form OCI registries name blobs by).
fn component_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The epoch ticks in `d`, at least one.
fn ticks_for(d: Duration) -> u64 {
    u64::try_from(d.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1)).unwrap_or(u64::MAX)
}

/// A short reason code for a trap, for agents and tests to match on. A limit the
/// guest ran into wins over the trap it caused (a failed allocation becomes a panic).
fn classify_trap(error: &wasmtime::Error, hit: Option<&LimitHit>) -> TrapReason {
    if let Some(hit) = hit.or_else(|| error.downcast_ref::<LimitHit>()) {
        return hit.reason();
    }
    if limiter::is_handle_cap(error) {
        return TrapReason::HandleLimit;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => TrapReason::DeadlineExceeded,
        Some(Trap::StackOverflow) => TrapReason::StackOverflow,
        Some(Trap::OutOfFuel) => TrapReason::FuelExhausted,
        Some(Trap::UnreachableCodeReached) => TrapReason::Panic,
        Some(_) => TrapReason::Trap,
        None if error.downcast_ref::<wasmtime_wasi::I32Exit>().is_some() => TrapReason::Exited,
        None => TrapReason::HostFailure,
    }
}
