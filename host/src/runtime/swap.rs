//! Loading a tool's component while calls run: a new build of a tool (or a new tool)
//! is compiled and checked beside the running ones, then swapped in for the calls that
//! start after. A call holds the `Arc` of the component it started with, so calls in
//! flight finish on the old build; a component that fails to load changes nothing.
//! A tool retired ([`Runtime::retire`]) is offered to no new call; calls in flight
//! on it finish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::{LoadedTool, RefusedTool, Runtime, wasm_files};
use crate::error::Error;

/// The components swapped in since the runtime was loaded, by tool name; `None` for
/// a tool retired.
#[derive(Debug, Default)]
pub(crate) struct Swapped(RwLock<BTreeMap<String, Option<Arc<LoadedTool>>>>);

/// A component of a tools directory, before anything is swapped in.
enum Found {
    /// Its bytes are the build this tool runs now.
    Running(String),
    /// A new build, loaded and checked.
    New(Arc<LoadedTool>),
}

impl Found {
    fn name(&self) -> &str {
        match self {
            Self::Running(name) => name,
            Self::New(tool) => &tool.name,
        }
    }
}

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
    /// The tools the directory's loadable components are now (swapped in, or
    /// unchanged).
    pub tools: std::collections::BTreeSet<String>,
}

impl Runtime {
    /// Swaps in every `*.wasm` component of the tools directory `dir` whose bytes are
    /// not a build some tool runs now (see [`Runtime::swap`]): what a server calls
    /// when the directory changed (or on `SIGHUP`). A file that fails to load is
    /// listed with why and changes nothing; a tool whose file is gone keeps running.
    pub fn swap_dir(&self, dir: &Path) -> Result<DirSwap, Error> {
        self.swap_dir_reserving(dir, &BTreeMap::new())
    }

    /// [`Runtime::swap_dir`], unless a component of `dir` is one of the tools
    /// `reserved` names (by tool name, with where that tool's component comes from,
    /// say a digest-pinned registry source): then nothing at all is swapped and the
    /// error names both, as at start-up ([`Error::DuplicateTool`]). Every file is
    /// loaded and checked before the first is swapped in, so a refusal leaves the
    /// tools that run as they were.
    pub(crate) fn swap_dir_reserving(
        &self,
        dir: &Path,
        reserved: &BTreeMap<String, PathBuf>,
    ) -> Result<DirSwap, Error> {
        let running: BTreeMap<String, String> = self
            .current_tools()
            .iter()
            .map(|t| (t.digest.clone(), t.name.clone()))
            .collect();
        let mut report = DirSwap::default();
        let mut found = Vec::new();
        for path in wasm_files(dir)? {
            let read = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(
                    |bytes| match running.get(&super::component_digest(&bytes)) {
                        Some(name) => Ok(Found::Running(name.clone())),
                        None => self
                            .prepare(&path, &bytes)
                            .map(|tool| Found::New(Arc::new(tool)))
                            .map_err(|e| e.to_string()),
                    },
                );
            match read {
                Ok(tool) => found.push((path, tool)),
                Err(reason) => report.refused.push(RefusedTool {
                    source: path,
                    reason,
                }),
            }
        }
        for (path, tool) in &found {
            if let Some(first) = reserved.get(tool.name()) {
                return Err(Error::DuplicateTool {
                    name: tool.name().to_owned(),
                    first: first.clone(),
                    second: path.clone(),
                });
            }
        }
        for (path, tool) in found {
            match tool {
                Found::Running(name) => {
                    report.tools.insert(name);
                    report.unchanged.push(path);
                }
                Found::New(tool) => {
                    report.tools.insert(tool.name.clone());
                    report.swapped.push(self.install(tool));
                }
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
        self.swap_checked(source, bytes, |_| Ok(()))
    }

    /// [`Runtime::swap`], when the loaded tool passes `check` (say, that it is the
    /// tool the configuration names); else nothing changes and `check`'s error is
    /// returned.
    pub(crate) fn swap_checked(
        &self,
        source: &Path,
        bytes: &[u8],
        check: impl FnOnce(&LoadedTool) -> Result<(), Error>,
    ) -> Result<SwapReport, Error> {
        let tool = Arc::new(self.prepare(source, bytes)?);
        check(&tool)?;
        Ok(self.install(tool))
    }

    /// Makes the loaded `tool` the one new calls of its name get.
    fn install(&self, tool: Arc<LoadedTool>) -> SwapReport {
        let mut swapped = self.swapped.0.write().unwrap_or_else(|e| e.into_inner());
        let replaced = self
            .current_in(&swapped, &tool.name)
            .map(|old| old.digest.clone());
        swapped.insert(tool.name.clone(), Some(Arc::clone(&tool)));
        tracing::info!(
            tool = %tool.name,
            component = %tool.digest,
            replaced = replaced.as_deref().unwrap_or("(none)"),
            "swapped in a tool component"
        );
        SwapReport { tool, replaced }
    }

    /// Offers the tool `name` to no new call (its component left the tools
    /// directory, or its source the configuration): it is no longer listed, and a
    /// new call of it is of an unknown tool. Calls in flight on it finish. The
    /// digest of the build it ran, `None` if no such tool runs. A later
    /// [`Runtime::swap`] of a component of that name brings it back.
    pub fn retire(&self, name: &str) -> Option<String> {
        let mut swapped = self.swapped.0.write().unwrap_or_else(|e| e.into_inner());
        let retired = self.current_in(&swapped, name)?.digest.clone();
        swapped.insert(name.to_owned(), None);
        tracing::info!(tool = %name, component = %retired, "retired a tool");
        Some(retired)
    }

    /// The component new calls of `name` get: the latest swapped in, else the one
    /// loaded at start; `None` for a tool never loaded, or retired.
    pub fn current(&self, name: &str) -> Option<Arc<LoadedTool>> {
        let swapped = self.swapped.0.read().unwrap_or_else(|e| e.into_inner());
        self.current_in(&swapped, name)
    }

    fn current_in(
        &self,
        swapped: &BTreeMap<String, Option<Arc<LoadedTool>>>,
        name: &str,
    ) -> Option<Arc<LoadedTool>> {
        match swapped.get(name) {
            Some(now) => now.clone(),
            None => self.tools.get(name).cloned(),
        }
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
        for (name, now) in swapped.iter() {
            match now {
                Some(tool) => all.insert(name.as_str(), Arc::clone(tool)),
                None => all.remove(name.as_str()),
            };
        }
        all.into_values().collect()
    }
}
