//! `justonce.lock`: the digest each tool's `source` tag resolved to when `justonce
//! lock` ran, so every host that reads the same files runs the same component for
//! the same tool name.
//!
//! ```toml
//! # Written by `justonce lock`. Commit it with justonce.toml.
//! [tools.refund]
//! source = "oci://127.0.0.1:5000/shop/refund:v1"
//! digest = "sha256:…"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::reference::{Digest, Reference};

/// The lock file's name, beside `justonce.toml`.
pub const LOCK_FILE_NAME: &str = "justonce.lock";

/// The lock file of the configuration file `config`.
pub fn lock_path_beside(config: &Path) -> PathBuf {
    config.with_file_name(LOCK_FILE_NAME)
}

/// Tool name → the source as written and the digest it resolved to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockFile {
    /// By tool name.
    pub tools: BTreeMap<String, Locked>,
}

/// One tool's pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    /// The `source` it was resolved from.
    pub source: Reference,
    /// The manifest digest the tag named then.
    pub digest: Digest,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    #[serde(default)]
    tools: BTreeMap<String, RawLocked>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocked {
    source: String,
    digest: String,
}

impl LockFile {
    /// Reads the lock file at `path`; an absent file is an empty lock.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let raw: RawLock = toml::from_str(&text).map_err(|e| {
            format!(
                "{}: {} (run `justonce lock` to write it again)",
                path.display(),
                e.message()
            )
        })?;
        let mut tools = BTreeMap::new();
        for (name, locked) in raw.tools {
            let bad = |e: String| format!("{}: `tools.{name}`: {e}", path.display());
            tools.insert(
                name.clone(),
                Locked {
                    source: locked.source.parse().map_err(bad)?,
                    digest: locked.digest.parse().map_err(bad)?,
                },
            );
        }
        Ok(Self { tools })
    }

    /// Writes it to `path` (a new file renamed into place).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let raw = RawLock {
            tools: self
                .tools
                .iter()
                .map(|(name, l)| {
                    (
                        name.clone(),
                        RawLocked {
                            source: l.source.to_string(),
                            digest: l.digest.to_string(),
                        },
                    )
                })
                .collect(),
        };
        let text = format!(
            "# Written by `justonce lock`: the digest each tool's `source` tag named. Commit it\n# with justonce.toml; run `justonce lock` again to move to what the tags name now.\n\n{}",
            toml::to_string(&raw).map_err(|e| e.to_string())?
        );
        let tmp = path.with_extension("lock.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The digest `tool`'s `source` is pinned to: its own digest, else the lock's
    /// when the lock was made from the same source. The error says to run
    /// `justonce lock`.
    pub fn pin(&self, tool: &str, source: &Reference) -> Result<Reference, String> {
        if let Some(digest) = &source.digest {
            return Ok(source.pinned(digest.clone()));
        }
        match self.tools.get(tool) {
            Some(locked) if locked.source == *source => Ok(source.pinned(locked.digest.clone())),
            Some(locked) => Err(format!(
                "`tools.{tool}.source` is {source} but {LOCK_FILE_NAME} pins {}: run `justonce lock` to pin the new source",
                locked.source
            )),
            None => Err(format!(
                "`tools.{tool}.source` names the tag {source} and no digest: run `justonce lock` to pin it (written to {LOCK_FILE_NAME}), or write the digest (`@sha256:…`) in the source"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    #[test]
    fn a_tag_is_pinned_by_the_lock_only_for_the_source_it_was_made_from() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE_NAME);
        assert_eq!(LockFile::read(&path).unwrap(), LockFile::default());
        let v1: Reference = "oci://127.0.0.1:5000/shop/refund:v1".parse().unwrap();
        let mut lock = LockFile::default();
        lock.tools.insert(
            "refund".into(),
            Locked {
                source: v1.clone(),
                digest: D1.parse().unwrap(),
            },
        );
        lock.write(&path).unwrap();
        let read = LockFile::read(&path).unwrap();
        assert_eq!(read, lock);
        assert_eq!(
            read.pin("refund", &v1).unwrap().digest.unwrap().as_str(),
            D1
        );
        let v2: Reference = "oci://127.0.0.1:5000/shop/refund:v2".parse().unwrap();
        let why = read.pin("refund", &v2).unwrap_err();
        assert!(
            why.contains("run `justonce lock`") && why.contains(":v1"),
            "{why}"
        );
        let why = read.pin("send_receipt", &v1).unwrap_err();
        assert!(why.contains("names the tag"), "{why}");
        let by_digest: Reference = format!("oci://r.example/a@{D1}").parse().unwrap();
        assert_eq!(read.pin("other", &by_digest).unwrap(), by_digest);
        std::fs::write(&path, "[tools.refund]\nsource = \"x\"\ndigest = \"y\"\n").unwrap();
        let why = LockFile::read(&path).unwrap_err();
        assert!(
            why.contains("tools.refund") && why.contains("oci://"),
            "{why}"
        );
    }
}
