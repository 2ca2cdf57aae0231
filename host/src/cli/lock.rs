//! `justonce lock`: pin every registry tool's tag to the digest it names now.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::push::{logins, registry_error};
use super::{Cli, exit, print_json};
use crate::error::Error;
use crate::registry::{LockFile, Locked, RegistryClient, lock_path_beside, resolve};

/// Resolve each `[tools.NAME] source` that names a tag to the digest the registry
/// gives for it now, and write them to justonce.lock beside justonce.toml (a source
/// that names a digest is pinned already). Every host reading the two files then
/// runs the same component for each tool; run it again to move to what the tags
/// name then.
#[derive(Debug, Args)]
pub struct Lock {}

impl Lock {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let Some(config) = &cli.settings else {
            return Err(Error::Config {
                path: PathBuf::from(crate::config::FILE_NAME),
                reason: "no configuration file to lock: `justonce lock` pins the `source` of each [tools.NAME] in justonce.toml (next to --db, or --config)".into(),
            });
        };
        let path = lock_path_beside(&config.path);
        let before = config.lock.clone().unwrap_or_default();
        let client = RegistryClient::new(logins(cli, config.sources.values())?);
        let mut lock = LockFile::default();
        for (tool, source) in &config.sources {
            if source.digest.is_some() {
                print_json(
                    &json!({"tool": tool, "source": source.to_string(), "pinned": "in justonce.toml"}),
                );
                continue;
            }
            let digest =
                resolve(&client, source).map_err(|e| registry_error(&source.to_string(), e))?;
            let changed = before.tools.get(tool).is_none_or(|l| l.digest != digest);
            print_json(&json!({
                "tool": tool,
                "source": source.to_string(),
                "digest": digest.as_str(),
                "changed": changed,
            }));
            lock.tools.insert(
                tool.clone(),
                Locked {
                    source: source.clone(),
                    digest,
                },
            );
        }
        lock.write(&path).map_err(|reason| Error::Config {
            path: path.clone(),
            reason,
        })?;
        Ok(exit::SUCCESS)
    }
}
