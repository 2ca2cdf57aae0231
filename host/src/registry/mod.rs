//! Tools from OCI registries, pinned by digest: `justonce push` writes a component
//! as a Wasm OCI artifact ([`artifact`]), `justonce.toml` names a tool's `source` by
//! reference ([`Reference`]), `justonce lock` pins tags to digests ([`LockFile`]), and
//! a host [`fetch`]es each pinned component from its [`BlobCache`] or the registry,
//! checking every byte against its digest.

pub mod artifact;
mod blobs;
mod client;
mod credentials;
mod load;
mod lock;
mod reference;
#[doc(hidden)]
pub mod testing;

use std::path::{Path, PathBuf};

pub use blobs::BlobCache;
pub use client::{MAX_COMPONENT_BYTES, PulledManifest, RegistryClient};
pub use credentials::{
    Credentials, CredentialsError, LoginSources, Logins, PASSWORD_VAR, REGISTRY_VAR, USERNAME_VAR,
};
pub(crate) use load::{load_sources, named_as_configured, read_logins};
pub use lock::{LOCK_FILE_NAME, LockFile, Locked, lock_path_beside};
pub use reference::{Digest, Reference, SCHEME};

/// Why a component could not be pushed or pulled. The reference never holds a
/// credential, and no variant carries one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The bytes the registry served (or the cache held) do not have the digest that
    /// named them. Nothing was loaded.
    #[error(
        "{reference}: the {what} does not match its digest (expected {expected}, got {actual}); refused"
    )]
    DigestMismatch {
        /// The reference being pulled.
        reference: String,
        /// `manifest` or `component layer`.
        what: &'static str,
        /// The digest that named the bytes.
        expected: String,
        /// The digest of the bytes served.
        actual: String,
    },
    /// The registry could not be reached (and, when pulling, the component is not in
    /// the cache).
    #[error("{reference}: the registry cannot be reached: {reason}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// What failed, and where the cache was looked for.
        reason: String,
    },
    /// The registry has no such repository, tag or digest.
    #[error("{reference}: not found in the registry ({reason})")]
    NotFound {
        /// The reference.
        reference: String,
        /// What the registry said.
        reason: String,
    },
    /// The registry wants credentials it was not given, or refused them.
    #[error("{reference}: not authorized: {reason}")]
    Unauthorized {
        /// The reference.
        reference: String,
        /// What to do.
        reason: String,
    },
    /// The registry answered something that is not a component artifact, or not
    /// what the distribution API says.
    #[error("{reference}: {reason}")]
    Protocol {
        /// The reference.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// A reference that names a tag and no digest where a pinned one is needed.
    #[error("{reference} is not pinned to a digest: {reason}")]
    Unpinned {
        /// The reference.
        reference: String,
        /// What to do.
        reason: String,
    },
}

/// A component pulled (or read from the cache) and checked.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The reference, pinned to the manifest's digest.
    pub reference: Reference,
    /// The component's bytes.
    pub component: Vec<u8>,
    /// The digest of those bytes (the layer's digest).
    pub component_digest: Digest,
    /// Whether the cache served it (no request reached the registry).
    pub from_cache: bool,
}

/// Where pulled blobs are kept for a host whose compiled components are kept in the
/// per-user cache `cache`: its `blobs/` directory, shared like the compiled
/// components by every journal. The one place that decides it.
pub fn blob_cache_in(cache: &Path) -> PathBuf {
    cache.join("blobs")
}

/// The component `reference` (which must carry a digest) pins: from `cache` when it
/// holds it intact, else from the registry, checked against the digests and kept in
/// `cache`.
pub fn fetch(
    client: &RegistryClient,
    cache: Option<&BlobCache>,
    reference: &Reference,
) -> Result<Fetched, RegistryError> {
    let Some(digest) = &reference.digest else {
        return Err(RegistryError::Unpinned {
            reference: reference.to_string(),
            reason: "run `justonce lock`, or write the digest (`@sha256:…`) in the source".into(),
        });
    };
    if let Some(component) = cache.and_then(|c| c.component(digest)) {
        return Ok(Fetched {
            reference: reference.clone(),
            component_digest: Digest::of(&component),
            component,
            from_cache: true,
        });
    }
    let pulled = client.manifest(reference).map_err(|e| match (e, cache) {
        (RegistryError::Unreachable { reference, reason }, Some(cache)) => {
            RegistryError::Unreachable {
                reference,
                reason: format!(
                    "{reason}; and the component is not in the cache ({})",
                    cache.dir().display()
                ),
            }
        }
        (e, _) => e,
    })?;
    let component = client.component(reference, &pulled)?;
    if let Some(cache) = cache {
        cache.put(&component);
        cache.put(&pulled.bytes);
    }
    Ok(Fetched {
        reference: reference.clone(),
        component_digest: pulled.layer,
        component,
        from_cache: false,
    })
}

/// The manifest digest `reference`'s tag names now (for `justonce lock`), after
/// checking that it is a component artifact.
pub fn resolve(client: &RegistryClient, reference: &Reference) -> Result<Digest, RegistryError> {
    match (&reference.tag, &reference.digest) {
        (None, Some(digest)) => Ok(digest.clone()),
        (None, None) => Err(RegistryError::Protocol {
            reference: reference.to_string(),
            reason: "names neither a tag nor a digest".into(),
        }),
        (Some(_), _) => {
            let tag = Reference {
                digest: None,
                ..reference.clone()
            };
            Ok(client.manifest(&tag)?.digest)
        }
    }
}
