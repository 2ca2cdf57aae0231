//! Loading the tools that `justonce.toml` names by `source` into a runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{BlobCache, LoginSources, Logins, Reference, RegistryClient, RegistryError, fetch};
use crate::error::{Error, LoadFault};
use crate::runtime::{LoadedTool, Runtime};

impl RegistryError {
    /// Whose fault it is: the host's when the registry cannot be reached, else the
    /// reference's, the registry's content's or the credentials'.
    pub fn fault(&self) -> LoadFault {
        match self {
            Self::Unreachable { .. } => LoadFault::Host,
            _ => LoadFault::Input,
        }
    }
}

/// The logins `sources` and the host's environment give, for an operation that
/// speaks to `registries` (see [`Logins::resolve`]); a configuration error otherwise.
pub(crate) fn read_logins(
    sources: &LoginSources,
    registries: &BTreeSet<String>,
) -> Result<Logins, Error> {
    Logins::resolve(&|name| std::env::var(name).ok(), sources, registries).map_err(|e| {
        Error::Config {
            path: e.place(),
            reason: e.reason(),
        }
    })
}

/// Fetches each pinned `source` (tool name → reference with a digest) and loads it
/// into `runtime`, checking that the component is the tool it is configured as.
pub(crate) fn load_sources(
    runtime: &mut Runtime,
    sources: &BTreeMap<String, Reference>,
    client: &RegistryClient,
    cache: Option<&BlobCache>,
) -> Result<(), Error> {
    for (name, reference) in sources {
        let shown = reference.to_string();
        let refuse = |reason: String, fault: LoadFault| Error::Load {
            path: PathBuf::from(&shown),
            reason,
            fault,
        };
        let fetched = fetch(client, cache, reference).map_err(|e| {
            let text = e.to_string();
            let reason = text
                .strip_prefix(&format!("{shown}: "))
                .map_or(text.clone(), str::to_owned);
            refuse(format!("`tools.{name}.source`: {reason}"), e.fault())
        })?;
        tracing::info!(
            tool = %name,
            source = %shown,
            component = %fetched.component_digest,
            from_cache = fetched.from_cache,
            "loading a tool from a registry"
        );
        let tool = runtime.load(Path::new(&shown), &fetched.component)?;
        named_as_configured(tool, name, &shown)?;
    }
    Ok(())
}

/// `Ok` when the component `loaded` from `source` is the tool `tool` that the
/// configuration names it as.
pub(crate) fn named_as_configured(
    loaded: &LoadedTool,
    tool: &str,
    source: &str,
) -> Result<(), Error> {
    if loaded.name == tool {
        return Ok(());
    }
    Err(Error::Load {
        path: PathBuf::from(source),
        reason: format!(
            "`tools.{tool}.source` holds the tool `{}`, not `{tool}`: name the section after the tool, or fix the source",
            loaded.name
        ),
        fault: LoadFault::Input,
    })
}
