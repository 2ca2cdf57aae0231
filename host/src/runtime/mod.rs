//! The WebAssembly side: one engine, components compiled once and pre-instantiated,
//! a fresh deny-all `Store` for every call.

mod bindings;
mod limits;
mod state;

pub use limits::Limits;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, StoreLimitsBuilder, Trap};
use wasmtime_wasi::WasiCtx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use crate::error::Error;
use crate::guard::EffectSession;
use bindings::{Tool, ToolPre};
use state::GuestState;

/// How often the engine's epoch advances; the deadline is counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// A tool that was loaded and checked.
pub struct LoadedTool {
    /// The name agents call it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// Where the component came from.
    pub source: PathBuf,
    pre: ToolPre<GuestState>,
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
    /// `call` returned.
    Returned(Result<String, bindings::ToolError>),
    /// The guest trapped: a reason code and the runtime's message.
    Trapped { reason: &'static str, message: String },
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
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        let engine = Engine::new(&config)?;
        let mut linker = Linker::<GuestState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
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
        })
    }

    /// The limits every call runs under.
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
            reason: e.to_string(),
        })?;
        self.load(path, &bytes)
    }

    /// Loads every `*.wasm` file in `dir` (sorted by name). A component that is refused
    /// is remembered in [`Runtime::refused`] instead of failing the whole directory.
    pub fn load_dir(&mut self, dir: &Path) -> Result<(), Error> {
        let entries = std::fs::read_dir(dir).map_err(|e| Error::Load {
            path: dir.to_path_buf(),
            reason: format!("cannot read the tools directory: {e}"),
        })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        paths.sort();
        for path in paths {
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
        };
        if !bytes.starts_with(b"\0asm") {
            return Err(refuse("not a WebAssembly file (no \\0asm header)".into()));
        }
        let component = Component::from_binary(&self.engine, bytes)
            .map_err(|e| refuse(format!("not a valid component: {e:#}")))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| refuse(format!("{e:#}")))?;
        let pre = ToolPre::new(pre)
            .map_err(|e| refuse(format!("does not export the justonce `tool` world: {e:#}")))?;

        let mut store = self.store(Arc::from("<describe>"), None);
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
        let input_schema: Value = serde_json::from_str(&info.input_schema)
            .map_err(|e| refuse(format!("input schema is not JSON: {e}")))?;
        Ok(LoadedTool {
            name: info.name,
            description: info.description,
            input_schema,
            source: source.to_path_buf(),
            pre,
        })
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Arc<LoadedTool>> {
        self.tools.get(name)
    }

    /// Every loaded tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &LoadedTool> {
        self.tools.values().map(|t| &**t)
    }

    /// Components that were refused while loading a directory.
    pub fn refused(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// The loaded tool names, comma-separated (for error messages).
    pub(crate) fn names(&self) -> String {
        let names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        if names.is_empty() {
            "(none)".into()
        } else {
            names.join(", ")
        }
    }

    fn store(&self, tool: Arc<str>, session: Option<EffectSession>) -> wasmtime::Store<GuestState> {
        let limits = &self.limits;
        let stdout = MemoryOutputPipe::new(limits.max_output_bytes);
        let stderr = MemoryOutputPipe::new(limits.max_output_bytes);
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        // Clocks and random come from the invocation's journal, so a resumed run sees
        // the same values (see `determinism`).
        match &session {
            Some(session) => session.entropy.configure(&mut wasi),
            None => crate::determinism::GuestEntropy::describe().configure(&mut wasi),
        }
        let state = GuestState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                .instances(16)
                .tables(64)
                .memories(16)
                .trap_on_grow_failure(true)
                .build(),
            session,
            tool,
            stdout,
            stderr,
        };
        let mut store = wasmtime::Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        let ticks = limits.deadline.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1);
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.epoch_deadline_trap();
        store
    }

    /// Runs `call(args)` of `tool` in a fresh store with this run's effect guard, and
    /// hands the guard back with the outcome.
    pub(crate) fn call(
        &self,
        tool: &LoadedTool,
        args: &str,
        session: EffectSession,
    ) -> (GuestOutcome, EffectSession) {
        let mut store = self.store(Arc::from(tool.name.as_str()), Some(session));
        let result = tool
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_call(&mut store, args));
        store.data().flush_output();
        let session = store
            .data_mut()
            .session
            .take()
            .expect("the session stays in the store for the whole call");
        let outcome = match result {
            Ok(returned) => GuestOutcome::Returned(returned),
            Err(error) => GuestOutcome::Trapped {
                reason: classify_trap(&error),
                message: format!("{error:#}"),
            },
        };
        (outcome, session)
    }
}

/// A short reason code for a trap, for agents and tests to match on.
fn classify_trap(error: &wasmtime::Error) -> &'static str {
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => "deadline_exceeded",
        Some(Trap::StackOverflow) => "stack_overflow",
        Some(Trap::OutOfFuel) => "fuel_exhausted",
        Some(Trap::UnreachableCodeReached) => "panic",
        Some(_) => "trap",
        None if format!("{error:#}").contains("memory") => "memory_limit",
        None => "host_failure",
    }
}
