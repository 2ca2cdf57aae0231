//! `justonce push`: a tool component to an OCI registry, as a Wasm OCI artifact.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::error::{Error, LoadFault};
use crate::registry::{Digest, Logins, Reference, RegistryClient, RegistryError, read_logins};
use crate::runtime::{Limits, Runtime};

/// Push a tool component to an OCI registry as a Wasm OCI artifact (config
/// `application/vnd.wasm.config.v0+json`, one layer `application/wasm`, as
/// wasm-pkg-tools and Wassette write them) and print its digest. The component is
/// loaded first: only a valid tool is pushed. Credentials: the configuration's
/// `[registries."HOST"] secrets_file`, else JUSTONCE_REGISTRY_USERNAME and
/// JUSTONCE_REGISTRY_PASSWORD (else the configuration's `registry_secrets_file`).
/// Plain HTTP only for a registry on this machine.
#[derive(Debug, Args)]
pub struct Push {
    /// The component file (*.wasm).
    #[arg(value_name = "COMPONENT")]
    component: PathBuf,
    /// Where to push it: oci://REGISTRY/REPOSITORY:TAG.
    #[arg(value_name = "REFERENCE")]
    reference: String,
}

/// The CLI's error for a registry's.
pub(super) fn registry_error(reference: &str, error: RegistryError) -> Error {
    let text = error.to_string();
    let reason = text
        .strip_prefix(&format!("{reference}: "))
        .map_or(text.clone(), str::to_owned);
    Error::Load {
        path: PathBuf::from(reference),
        reason,
        fault: error.fault(),
    }
}

/// The logins of `registries`: the configuration's files, and the environment's
/// login for the one registry it can be bound to.
pub(super) fn logins<'a>(
    cli: &Cli,
    registries: impl IntoIterator<Item = &'a Reference>,
) -> Result<Logins, Error> {
    let sources = cli
        .settings
        .as_ref()
        .map(|c| c.login_sources())
        .unwrap_or_default();
    let registries = registries.into_iter().map(|r| r.registry.clone()).collect();
    read_logins(&sources, &registries)
}

impl Push {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let reference: Reference = self.reference.parse().map_err(|reason| Error::Load {
            path: PathBuf::from(&self.reference),
            reason,
            fault: LoadFault::Input,
        })?;
        let bytes = std::fs::read(&self.component).map_err(|e| Error::Load {
            path: self.component.clone(),
            reason: e.to_string(),
            fault: LoadFault::Input,
        })?;
        let mut runtime = Runtime::new(Limits::default())?;
        let tool = runtime.load(&self.component, &bytes)?.name.clone();
        let client = RegistryClient::new(logins(cli, [&reference])?);
        let digest = client
            .push(&reference, &bytes)
            .map_err(|e| registry_error(&self.reference, e))?;
        print_json(&json!({
            "pushed": reference.pinned(digest.clone()).to_string(),
            "digest": digest.as_str(),
            "tool": tool,
            "component_digest": Digest::of(&bytes).as_str(),
            "size": bytes.len(),
        }));
        Ok(exit::SUCCESS)
    }
}
