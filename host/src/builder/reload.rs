//! Reloading a running host's tools from what a builder names now (the tools
//! directory, the registry sources, which tools MCP offers): what `serve` does when
//! the tools directory or `justonce.toml` changed, or on `SIGHUP`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::HostBuilder;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::registry::{self, SCHEME};
use crate::runtime::{LoadedTool, RefusedTool, SwapReport};

/// What [`HostBuilder::reload`] changed in a running host.
#[derive(Debug, Default)]
pub struct Reload {
    /// The components swapped in: a new build of a tool, or a new tool.
    pub swapped: Vec<SwapReport>,
    /// The components that failed to load (or to be fetched), with why; their
    /// tools keep the build they run.
    pub refused: Vec<RefusedTool>,
    /// The tools offered to no new call any more (their component left the tools
    /// directory, or their source the configuration), with the digest each ran.
    pub retired: Vec<(String, String)>,
    /// Whether the set of tools kept from MCP changed.
    pub mcp_changed: bool,
}

impl Reload {
    /// Whether the tools new calls get, or the ones MCP offers, changed.
    pub fn changed(&self) -> bool {
        !self.swapped.is_empty() || !self.retired.is_empty() || self.mcp_changed
    }
}

impl HostBuilder {
    /// Brings `host`'s tools to what this builder names now, while calls run: every
    /// component of its tools directory and every registry source (fetched anew, from
    /// the blob cache when it holds the pinned digest) whose build is not the one its
    /// tool runs is swapped in ([`Host::swap_tool`]: calls in flight finish on their
    /// build, new calls get the new one, the tool keeps its keys). A component that
    /// fails to load leaves its tool's build serving and is listed with why. A tool
    /// whose file left the directory, or whose source left the configuration, is
    /// retired: calls in flight on it finish, new calls find no such tool. The tools
    /// kept from MCP become the ones named now.
    ///
    /// A component of the tools directory that is a tool with a registry `source`
    /// refuses the whole reload ([`Error::DuplicateTool`], as at build): nothing is
    /// swapped or retired and the tools that run keep running.
    ///
    /// Limits, retention, allowlists and the journal are read at build only; the
    /// tools directory is the one `host` was built with (a new `tools_dir` takes
    /// effect at restart).
    pub fn reload(self, host: &Host, tools_dir: Option<&Path>) -> Result<Reload> {
        let runtime = host.runtime();
        let mut report = Reload::default();
        let mut provided = BTreeSet::new();
        if let Some(dir) = tools_dir {
            // A file of the directory must not stand in for a registry tool: at
            // start-up that is refused, and so is a reload (nothing swapped), or a
            // SIGHUP with the registry away would leave an unpinned file serving.
            let reserved: BTreeMap<String, PathBuf> = self
                .sources
                .iter()
                .map(|(tool, source)| (tool.clone(), PathBuf::from(shown_source(tool, source))))
                .collect();
            let swapped = runtime.swap_dir_reserving(dir, &reserved)?;
            provided.extend(swapped.tools);
            report.swapped.extend(swapped.swapped);
            report.refused.extend(swapped.refused);
        }
        self.reload_sources(host, &mut report, &mut provided);
        for tool in runtime.current_tools() {
            if !provided.contains(&tool.name)
                && self.left(&tool, tools_dir)
                && let Some(digest) = runtime.retire(&tool.name)
            {
                report.retired.push((tool.name.clone(), digest));
            }
        }
        report.mcp_changed = host.hide_from_mcp(self.hidden_from_mcp.clone());
        for swap in &report.swapped {
            tracing::info!(
                tool = %swap.tool.name,
                component = %swap.tool.digest,
                replaced = swap.replaced.as_deref().unwrap_or("(none)"),
                "reloaded: new calls get this build; calls in flight finish on theirs"
            );
        }
        for refused in &report.refused {
            tracing::warn!(
                "reload: kept what runs; {} was not loaded: {}",
                refused.source.display(),
                refused.reason
            );
        }
        for (tool, digest) in &report.retired {
            tracing::info!(tool, component = %digest, "reloaded: the tool is gone, no new call gets it");
        }
        Ok(report)
    }

    /// Swaps in each registry source whose component is not the build its tool runs.
    fn reload_sources(&self, host: &Host, report: &mut Reload, provided: &mut BTreeSet<String>) {
        if self.sources.is_empty() {
            return;
        }
        let runtime = host.runtime();
        let client = self.registry_client();
        let blobs = self.pulled_blobs(runtime.compile_cache().map(|c| c.dir()));
        for (tool, source) in &self.sources {
            let shown = shown_source(tool, source);
            let swapped = self.pinned_source(tool, source).and_then(|reference| {
                let client = client.as_ref().map_err(clone_error)?;
                let fetched = registry::fetch(client, blobs.as_ref(), &reference).map_err(|e| {
                    Error::Load {
                        path: PathBuf::from(&shown),
                        fault: e.fault(),
                        reason: format!("`tools.{tool}.source`: {e}"),
                    }
                })?;
                let digest = fetched.component_digest.to_string();
                if runtime.current(tool).is_some_and(|t| t.digest == digest) {
                    return Ok(None);
                }
                runtime
                    .swap_checked(Path::new(&shown), &fetched.component, |loaded| {
                        registry::named_as_configured(loaded, tool, &shown)
                    })
                    .map(Some)
            });
            match swapped {
                Ok(Some(swap)) => {
                    provided.insert(tool.clone());
                    report.swapped.push(swap);
                }
                Ok(None) => {
                    provided.insert(tool.clone());
                }
                Err(e) => {
                    // What runs keeps running: the tool is not retired for it.
                    provided.insert(tool.clone());
                    report.refused.push(RefusedTool {
                        source: PathBuf::from(shown),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }

    /// Whether `tool`'s component left what this builder names: a file of the tools
    /// directory that is gone, or a registry source no longer configured. Built-in
    /// tools and components named one by one never leave.
    fn left(&self, tool: &LoadedTool, tools_dir: Option<&Path>) -> bool {
        if tool.source.to_string_lossy().starts_with(SCHEME) {
            return !self.sources.contains_key(&tool.name);
        }
        tools_dir.is_some_and(|dir| tool.source.parent() == Some(dir) && !tool.source.exists())
    }
}

/// How `tool`'s `source` is named in reports: its reference, else its section.
fn shown_source(tool: &str, source: &std::result::Result<registry::Reference, String>) -> String {
    source
        .as_ref()
        .map_or_else(|_| format!("[tools.{tool}]"), ToString::to_string)
}

/// The credentials' error again, for each source it stops.
fn clone_error(error: &Error) -> Error {
    match error {
        Error::Config { path, reason } => Error::Config {
            path: path.clone(),
            reason: reason.clone(),
        },
        other => Error::Host(anyhow::anyhow!("{other}")),
    }
}
