//! What runs a guest for the guard: the wasm runtime in production, a scripted guest
//! in the guard's own tests. The guard only needs a tool's schema and limits, and a
//! way to run it with an effect handler.

use std::sync::Arc;

use serde_json::Value;

use std::time::Duration;

use crate::runtime::{
    EffectHandler, GuestOutcome, InputSchema, Limits, LoadedTool, ReconcileRequest, Reconciled,
    Runtime, ToolLimits,
};

/// How long a tool's `reconcile` may run (its deadline and wall-clock cap), unless
/// the tool's own limits are shorter: a probe is one question to the downstream.
pub(crate) const RECONCILE_TIMEOUT: Duration = Duration::from_secs(10);

/// A tool's own probe of its effects: its component's `reconcile`.
pub(crate) trait ToolProbe: Send + Sync {
    /// Runs it about `effect`, its reads going to `reads` (which allows nothing
    /// else). `Err` says why it gave no answer.
    fn reconcile(
        &self,
        effect: ReconcileRequest<'_>,
        reads: Box<dyn EffectHandler>,
    ) -> Result<Reconciled, String>;
}

/// A loaded component's `reconcile`, under the tool's limits with a probe's deadline.
struct ComponentProbe {
    runtime: Arc<Runtime>,
    tool: Arc<LoadedTool>,
    limits: Limits,
}

impl ToolProbe for ComponentProbe {
    fn reconcile(
        &self,
        effect: ReconcileRequest<'_>,
        reads: Box<dyn EffectHandler>,
    ) -> Result<Reconciled, String> {
        self.runtime
            .reconcile(&self.tool, effect, reads, &self.limits)
    }
}

/// What the guard knows of a tool before it runs it.
#[derive(Debug, Clone)]
pub(crate) struct ToolSpec {
    /// The name agents call it by.
    pub name: Arc<str>,
    /// Its input schema, as the tool described it.
    pub input_schema: Arc<Value>,
    /// The same, compiled.
    pub schema: Arc<InputSchema>,
    /// The sandbox limits it runs under.
    pub limits: Limits,
    /// It only reads: nothing of its calls is journaled, and an effect traps.
    pub read_only: bool,
    /// The digest (`sha256:…`) of its component, journaled with each run.
    pub component: Option<Arc<str>>,
    /// The component the call runs: fixed when the call is prepared, so a call in
    /// flight finishes on it when a new build is swapped in (`None` for a scripted
    /// guest).
    pub loaded: Option<Arc<LoadedTool>>,
}

/// Runs guests for the guard.
pub(crate) trait Runner: Send + Sync {
    /// The tool called `name`, if loaded.
    fn tool(&self, name: &str) -> Option<ToolSpec>;

    /// Why the tool called `name` cannot be called now, when it is one the host
    /// offers at times but not now (an upstream MCP server's, while that server is
    /// not ready); `None` for a tool it has, or never heard of.
    fn unavailable(&self, _name: &str) -> Option<String> {
        None
    }

    /// The loaded tool names, comma-separated (for error messages).
    fn names(&self) -> String;

    /// The tool's own probe of its effects (`reconcile`), if it has one.
    fn tool_probe(&self, _tool: &ToolSpec) -> Option<Arc<dyn ToolProbe>> {
        None
    }

    /// Runs `call(args)` of `tool` with `handler` answering its effects, and hands
    /// the handler back with the outcome.
    fn run(
        &self,
        tool: &ToolSpec,
        args: &str,
        handler: Box<dyn EffectHandler>,
    ) -> (GuestOutcome, Box<dyn EffectHandler>);
}

/// The wasm runtime as the guard's runner, with each tool's limits.
pub(crate) struct WasmRunner {
    pub runtime: Arc<Runtime>,
    pub limits: ToolLimits,
    /// How long a tool's `reconcile` may run, at most.
    pub probe_timeout: Duration,
}

impl Runner for WasmRunner {
    fn tool(&self, name: &str) -> Option<ToolSpec> {
        let tool = self.runtime.current(name)?;
        Some(ToolSpec {
            name: Arc::from(tool.name.as_str()),
            input_schema: Arc::clone(&tool.input_schema_arc),
            schema: Arc::clone(&tool.schema),
            limits: self.limits.for_tool(name).clone(),
            read_only: tool.read_only,
            component: Some(Arc::from(tool.digest.as_str())),
            loaded: Some(tool),
        })
    }

    fn names(&self) -> String {
        self.runtime.names()
    }

    fn tool_probe(&self, tool: &ToolSpec) -> Option<Arc<dyn ToolProbe>> {
        let loaded = tool.loaded.as_ref().filter(|t| t.reconciles())?;
        let mut limits = tool.limits.clone();
        limits.deadline = limits.deadline.min(self.probe_timeout);
        limits.wall_clock = limits.wall_clock.min(self.probe_timeout);
        Some(Arc::new(ComponentProbe {
            runtime: Arc::clone(&self.runtime),
            tool: Arc::clone(loaded),
            limits,
        }))
    }

    fn run(
        &self,
        tool: &ToolSpec,
        args: &str,
        handler: Box<dyn EffectHandler>,
    ) -> (GuestOutcome, Box<dyn EffectHandler>) {
        let loaded = tool
            .loaded
            .as_ref()
            .expect("a tool this runner found carries its component");
        self.runtime.call(loaded, args, handler, &tool.limits)
    }
}
