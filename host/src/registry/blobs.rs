//! Pulled components kept on disk by digest, so a host starts with the registry away.
//!
//! `DIR/sha256/HEX` holds the blob whose digest is `sha256:HEX`: a manifest or a
//! component. Every read checks the bytes against the digest that names them; an
//! entry that does not match is removed and treated as missing, so a damaged or
//! altered cache costs a pull, never a wrong component (so, unlike the compiled
//! cache, whose entries are machine code run as they are, it needs no ownership
//! checks). The directory is created `0700` and entries are written to a new file
//! renamed into place.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use super::artifact::Manifest;
use super::reference::Digest;

/// A directory of blobs named by digest.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// The cache in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds (or would hold) the blob `digest`.
    pub fn path_of(&self, digest: &Digest) -> PathBuf {
        self.dir.join("sha256").join(digest.hex())
    }

    /// The blob `digest`, if it is here and its bytes have that digest.
    pub fn get(&self, digest: &Digest) -> Option<Vec<u8>> {
        let path = self.path_of(digest);
        let bytes = fs::read(&path).ok()?;
        if digest.matches(&bytes) {
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "a cached blob does not match its digest; removed");
            let _ = fs::remove_file(&path);
            None
        }
    }

    /// The component of the manifest `manifest`: both must be here and intact.
    pub fn component(&self, manifest: &Digest) -> Option<Vec<u8>> {
        let bytes = self.get(manifest)?;
        let (_, _, layer) = Manifest::component_layer(&bytes).ok()?;
        self.get(&layer)
    }

    /// Keeps `bytes` as the blob of its own digest. A failure is logged, not
    /// returned: the cache only saves pulls.
    pub fn put(&self, bytes: &[u8]) {
        if let Err(e) = self.write(bytes) {
            tracing::warn!(dir = %self.dir.display(), "cannot keep a pulled blob: {e}");
        }
    }

    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let digest = Digest::of(bytes);
        let path = self.path_of(&digest);
        let parent = path.parent().expect("an entry is in a directory");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        // Unique per process and write: two threads may keep the same blob at once.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = parent.join(format!(".{}.{}.{n}.tmp", digest.hex(), std::process::id()));
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::artifact::Artifact;

    #[test]
    fn a_component_is_served_only_while_its_bytes_match_their_digests() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path().join("blobs"));
        let wasm = b"\0asm\x0d\0\x01\0v1".to_vec();
        let artifact = Artifact::of(&wasm);
        assert_eq!(cache.component(&artifact.digest()), None);
        cache.put(&artifact.manifest);
        assert_eq!(cache.component(&artifact.digest()), None, "no layer yet");
        cache.put(&wasm);
        assert_eq!(cache.component(&artifact.digest()), Some(wasm.clone()));
        // Altered on disk: refused and removed, so the next load pulls again.
        let layer = cache.path_of(&Digest::of(&wasm));
        fs::write(&layer, b"\0asm\x0d\0\x01\0evil").unwrap();
        assert_eq!(cache.component(&artifact.digest()), None);
        assert!(!layer.exists());
    }
}
