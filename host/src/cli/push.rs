//! `justonce push`: a tool component to an OCI registry, as a Wasm OCI artifact.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Cli, exit, print_json};
use crate::error::{Error, LoadFault};
use crate::registry::{Credentials, Digest, Reference, RegistryClient, RegistryError};
use crate::runtime::{Limits, Runtime};

/// Push a tool component to an OCI registry as a Wasm OCI artifact (config
/// `application/vnd.wasm.config.v0+json`, one layer `application/wasm`, as
/// wasm-pkg-tools and Wassette write them) and print its digest. The component is
/// loaded first: only a valid tool is pushed. Credentials: JUSTONCE_REGISTRY_USERNAME
/// and JUSTONCE_REGISTRY_PASSWORD, else the configuration's `registry_secrets_file`.
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

/// The registry credentials: the environment's, else the configuration's secrets file.
pub(super) fn credentials(cli: &Cli) -> Result<Credentials, Error> {
    let file = cli
        .settings
        .as_ref()
        .and_then(|c| c.registry_secrets_file.clone());
    Credentials::resolve(&|name| std::env::var(name).ok(), file.as_deref()).map_err(|reason| {
        Error::Config {
            path: file.unwrap_or_else(|| PathBuf::from("<environment>")),
            reason,
        }
    })
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
        let client = RegistryClient::new(credentials(cli)?);
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
