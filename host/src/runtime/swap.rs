//! Loading a tool's component while calls run: a new build of a tool (or a new tool)
//! is compiled and checked beside the running ones, then swapped in for the calls that
//! start after. A call holds the `Arc` of the component it started with, so calls in
//! flight finish on the old build; a component that fails to load changes nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use super::{LoadedTool, RefusedTool, Runtime, wasm_files};
use crate::error::Error;

/// The components swapped in since the runtime was loaded, by tool name.
#[derive(Debug, Default)]
pub(crate) struct Swapped(RwLock<BTreeMap<String, Arc<LoadedTool>>>);

/// What [`Runtime::swap`] did.
#[derive(Debug, Clone)]
pub struct SwapReport {
    /// The tool as new calls now get it.
    pub tool: Arc<LoadedTool>,
    /// The digest of the component it replaced, `None` for a tool that is new.
    pub replaced: Option<String>,
}

/// What [`Runtime::swap_dir`] did.
#[derive(Debug, Default)]
pub struct DirSwap {
    /// The components swapped in (a new build of a tool, or a new tool).
    pub swapped: Vec<SwapReport>,
    /// The files whose build is the one their tool already runs (not compiled again).
    pub unchanged: Vec<std::path::PathBuf>,
    /// The files that failed to load, with why; their tools keep their old build.
    pub refused: Vec<RefusedTool>,
}

impl Runtime {
    /// Swaps in every `*.wasm` component of the tools directory `dir` whose bytes are
    /// not a build some tool runs now (see [`Runtime::swap`]): what a server calls
    /// when the directory changed (or on `SIGHUP`). A file that fails to load is
    /// listed with why and changes nothing; a tool whose file is gone keeps running.
    pub fn swap_dir(&self, dir: &Path) -> Result<DirSwap, Error> {
        let running: std::collections::BTreeSet<String> = self
            .current_tools()
            .iter()
            .map(|t| t.digest.clone())
            .collect();
        let mut report = DirSwap::default();
        for path in wasm_files(dir)? {
            let swapped = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    if running.contains(&super::component_digest(&bytes)) {
                        return Ok(None);
                    }
                    self.swap(&path, &bytes)
                        .map(Some)
                        .map_err(|e| e.to_string())
                });
            match swapped {
                Ok(Some(swap)) => report.swapped.push(swap),
                Ok(None) => report.unchanged.push(path),
                Err(reason) => report.refused.push(RefusedTool {
                    source: path,
                    reason,
                }),
            }
        }
        Ok(report)
    }

    /// Compiles and checks the component `bytes` (from `source`) and makes it the one
    /// that new calls of its tool get: a new build of a loaded tool, or a new tool.
    /// Calls already running keep the component they started with. On an error
    /// (not a component, a denied import, a bad description) nothing changes: the
    /// old build keeps serving, and the error says why.
    pub fn swap(&self, source: &Path, bytes: &[u8]) -> Result<SwapReport, Error> {
        let tool = Arc::new(self.prepare(source, bytes)?);
        let mut swapped = self.swapped.0.write().unwrap_or_else(|e| e.into_inner());
        let replaced = swapped
            .get(&tool.name)
            .or_else(|| self.tools.get(&tool.name))
            .map(|old| old.digest.clone());
        swapped.insert(tool.name.clone(), Arc::clone(&tool));
        tracing::info!(
            tool = %tool.name,
            component = %tool.digest,
            replaced = replaced.as_deref().unwrap_or("(none)"),
            "swapped in a tool component"
        );
        Ok(SwapReport { tool, replaced })
    }

    /// The component new calls of `name` get: the latest swapped in, else the one
    /// loaded at start.
    pub fn current(&self, name: &str) -> Option<Arc<LoadedTool>> {
        let swapped = self.swapped.0.read().unwrap_or_else(|e| e.into_inner());
        swapped.get(name).or_else(|| self.tools.get(name)).cloned()
    }

    /// Every tool as new calls get it, by name (what an MCP `tools/list` should
    /// show after a swap).
    pub fn current_tools(&self) -> Vec<Arc<LoadedTool>> {
        let swapped = self.swapped.0.read().unwrap_or_else(|e| e.into_inner());
        let mut all: BTreeMap<&str, Arc<LoadedTool>> = self
            .tools
            .iter()
            .map(|(name, tool)| (name.as_str(), Arc::clone(tool)))
            .collect();
        for (name, tool) in swapped.iter() {
            all.insert(name.as_str(), Arc::clone(tool));
        }
        all.into_values().collect()
    }
}
