//! Compiled components cached on disk, so a process compiles a tool once, not on every
//! start.
//!
//! One cache per user serves every journal: `$JUSTONCE_CACHE_DIR` when set, else
//! `$XDG_CACHE_HOME/justonce`, else `~/.cache/justonce` ([`CompileCache::default_dir`]). An entry is
//! named by the sha256 of the component's bytes and of the engine's compatibility
//! hash (wasmtime's version, target, compiler flags and tunables), and holds a header
//! that repeats both digests plus an HMAC-SHA256 of the whole entry under a key of
//! this cache (`key`, 32 random bytes in a `0600` file in the directory). Every entry
//! is verified before use; a missing, stale, torn or corrupt one is compiled again and
//! rewritten (a new file, created with `create_new`, renamed into place, so a reader
//! never sees half an entry). An entry whose HMAC does not match was not written by
//! this cache: it is logged as a warning and compiled again, never run. The cache never
//! makes a load fail: when it cannot be read or written, the component is compiled as
//! if there were none.
//!
//! An entry's artifact is machine code that wasmtime runs as it is, so forging one
//! must take the key: it is readable by this user alone, and the cache is used only
//! when nobody else can write it: the directory is created `0700`, and a directory,
//! key or entry that is owned by neither this user nor root, is writable by group or
//! others (the key: readable by them), or is a symbolic link, is neither read nor
//! written (the component is compiled instead): [`crate::trust`], the check the
//! tokens file gets too. Files are opened without following symbolic links.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use crate::trust::{create_private_dir, trusted};
use wasmtime::component::Component;

/// The first bytes of every entry: a name and the format's version.
const MAGIC: &[u8; 16] = b"justonce-cwasm\0\x02";
/// Magic, then the sha256 of the component and of the engine, then the HMAC of the
/// entry (all but the HMAC itself).
const HEADER_LEN: usize = MAGIC.len() + 3 * 32;
/// The file of the cache's HMAC key, in its directory.
const KEY_FILE: &str = "key";
/// The variable that moves the cache (the tests point it at a directory of their own).
const CACHE_DIR_ENV: &str = "JUSTONCE_CACHE_DIR";

/// The per-user cache directory given the environment `env`: `$JUSTONCE_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/justonce`, else `$HOME/.cache/justonce` (a relative
/// `XDG_CACHE_HOME` or `HOME` is ignored, as the XDG spec says); `None` when none is
/// known.
fn dir_from(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = env(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(cache) = absolute("XDG_CACHE_HOME") {
        return Some(cache.join("justonce"));
    }
    absolute("HOME").map(|home| home.join(".cache").join("justonce"))
}

/// How the cache served the loads so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Loads served by a verified entry (no compilation).
    pub hits: u64,
    /// Loads that found no entry and compiled.
    pub misses: u64,
    /// Loads that found an entry that failed verification (stale, torn, corrupt) and
    /// compiled again.
    pub rebuilt: u64,
    /// Entries that could not be written (the loads still succeeded).
    pub write_failures: u64,
}

/// A directory of compiled components for one engine configuration.
#[derive(Debug)]
pub struct CompileCache {
    dir: PathBuf,
    engine: [u8; 32],
    hits: AtomicU64,
    misses: AtomicU64,
    rebuilt: AtomicU64,
    write_failures: AtomicU64,
}

/// Feeds `Hash` output into sha256, so the engine's hash is stable across processes
/// (std's `DefaultHasher` promises no such thing).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        unreachable!("only the digest is read")
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// HMAC-SHA256 (RFC 2104) of `header` then `artifact`, under `key` (at most one
/// block, 64 bytes, long).
fn mac(key: &[u8], header: &[u8], artifact: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    assert!(
        key.len() <= BLOCK,
        "a key longer than a block is hashed first"
    );
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let pad = |byte: u8| padded.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(header)
        .chain_update(artifact)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Why an entry was not used.
#[derive(Debug)]
enum Unusable {
    Missing,
    Unreadable(std::io::Error),
    Untrusted(String),
    Invalid(&'static str),
    /// Well formed, for this component and engine, but not written under this
    /// cache's key.
    Forged,
    Refused(wasmtime::Error),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("no entry"),
            Self::Unreadable(e) => write!(f, "unreadable: {e}"),
            Self::Untrusted(why) => write!(f, "not trusted: {why}"),
            Self::Invalid(why) => f.write_str(why),
            Self::Forged => f.write_str(
                "its HMAC does not match this cache's key: not written by this cache (forged, or written under a key since replaced)",
            ),
            Self::Refused(e) => write!(f, "refused by wasmtime: {e:#}"),
        }
    }
}

impl CompileCache {
    /// A cache in `dir` (created on the first write) for components compiled by
    /// `engine`.
    pub(crate) fn new(engine: &Engine, dir: PathBuf) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine: hasher.0.finalize().into(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            rebuilt: AtomicU64::new(0),
            write_failures: AtomicU64::new(0),
        }
    }

    /// The per-user cache directory that every journal shares: `$JUSTONCE_CACHE_DIR`
    /// when set, else `$XDG_CACHE_HOME/justonce`, else `~/.cache/justonce`; `None`
    /// when the environment names no home.
    pub fn default_dir() -> Option<PathBuf> {
        dir_from(&|name| std::env::var_os(name))
    }

    /// The directory the entries live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds (or would hold) the compiled form of the component `wasm`.
    pub fn entry_path(&self, wasm: &[u8]) -> PathBuf {
        self.path_for(&sha256(wasm))
    }

    fn path_for(&self, wasm_digest: &[u8; 32]) -> PathBuf {
        self.dir.join(format!(
            "{}-{}.cwasm",
            hex::encode(&wasm_digest[..16]),
            hex::encode(&self.engine[..8])
        ))
    }

    /// How the cache served the loads so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            rebuilt: self.rebuilt.load(Ordering::Relaxed),
            write_failures: self.write_failures.load(Ordering::Relaxed),
        }
    }

    /// The component `wasm` compiled by `engine`: from a verified entry, or compiled
    /// now (after calling `before_compile`) and written to the cache.
    pub(crate) fn component(
        &self,
        engine: &Engine,
        wasm: &[u8],
        before_compile: impl FnOnce(),
    ) -> wasmtime::Result<Component> {
        let digest = sha256(wasm);
        let path = self.path_for(&digest);
        match self.read(engine, &path, &digest) {
            Ok(component) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(component);
            }
            Err(Unusable::Missing) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
            }
            Err(Unusable::Forged) => {
                tracing::warn!(entry = %path.display(), why = %Unusable::Forged, "compiled-component cache entry not used; compiling again");
                self.rebuilt.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                tracing::info!(entry = %path.display(), %why, "compiled-component cache entry not used; compiling again");
                self.rebuilt.fetch_add(1, Ordering::Relaxed);
            }
        }
        before_compile();
        let component = Component::from_binary(engine, wasm)?;
        if let Err(e) = self.write(&path, &digest, &component) {
            tracing::warn!(entry = %path.display(), "cannot write the compiled-component cache: {e:#}");
            self.write_failures.fetch_add(1, Ordering::Relaxed);
        }
        Ok(component)
    }

    fn read(
        &self,
        engine: &Engine,
        path: &Path,
        wasm_digest: &[u8; 32],
    ) -> Result<Component, Unusable> {
        match fs::symlink_metadata(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
            Err(e) => return Err(Unusable::Unreadable(e)),
            // A plain file where the directory should be holds no entry: a miss (and
            // the write after it fails), not a forgery.
            Ok(meta) if meta.is_file() => return Err(Unusable::Missing),
            Ok(meta) => trusted(&self.dir, &meta, true).map_err(Unusable::Untrusted)?,
        }
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
                    Unusable::Missing
                }
                _ if e.raw_os_error() == Some(libc::ELOOP) => {
                    Unusable::Untrusted(format!("{} is a symbolic link", path.display()))
                }
                _ => Unusable::Unreadable(e),
            })?;
        let meta = file.metadata().map_err(Unusable::Unreadable)?;
        trusted(path, &meta, false).map_err(Unusable::Untrusted)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(Unusable::Unreadable)?;
        // No key yet: no entry this cache could have written.
        let key = self.read_key()?.ok_or(Unusable::Missing)?;
        let artifact = self.verify(&bytes, wasm_digest, &key)?;
        deserialize_verified(engine, artifact).map_err(Unusable::Refused)
    }

    /// The artifact inside an entry, if the entry is whole and was written for this
    /// component and this engine.
    fn verify<'a>(
        &self,
        entry: &'a [u8],
        wasm_digest: &[u8; 32],
        key: &[u8; 32],
    ) -> Result<&'a [u8], Unusable> {
        if entry.len() < HEADER_LEN {
            return Err(Unusable::Invalid("shorter than its header"));
        }
        let (header, artifact) = entry.split_at(HEADER_LEN);
        let (magic, digests) = header.split_at(MAGIC.len());
        if magic != MAGIC {
            return Err(Unusable::Invalid("not an entry of this format"));
        }
        if &digests[..32] != wasm_digest {
            return Err(Unusable::Invalid("written for other component bytes"));
        }
        if digests[32..64] != self.engine {
            return Err(Unusable::Invalid("written by another engine configuration"));
        }
        if digests[64..] != mac(key, &header[..HEADER_LEN - 32], artifact) {
            return Err(Unusable::Forged);
        }
        Ok(artifact)
    }

    /// The cache's key, if its file exists and only this user can read it.
    fn read_key(&self) -> Result<Option<[u8; 32]>, Unusable> {
        let path = self.dir.join(KEY_FILE);
        let mut file = match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Unusable::Untrusted(format!(
                    "{} is a symbolic link",
                    path.display()
                )));
            }
            Err(e) => return Err(Unusable::Unreadable(e)),
        };
        let meta = file.metadata().map_err(Unusable::Unreadable)?;
        trusted(&path, &meta, false).map_err(Unusable::Untrusted)?;
        if meta.mode() & 0o077 != 0 {
            return Err(Unusable::Untrusted(format!(
                "{} is readable by its group or by others (mode {:o}); remove it and the cache is rebuilt under a new key",
                path.display(),
                meta.mode() & 0o7777
            )));
        }
        let mut key = [0u8; 32];
        file.read_exact(&mut key).map_err(Unusable::Unreadable)?;
        Ok(Some(key))
    }

    /// The cache's key, made now (32 random bytes, `0600`, `create_new`) when there is
    /// none; a process that loses the race to make it reads the winner's.
    fn key_for_writing(&self) -> anyhow::Result<[u8; 32]> {
        if let Some(key) = self.read_key().map_err(|e| anyhow::anyhow!("{e}"))? {
            return Ok(key);
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)
            .map_err(|e| anyhow::anyhow!("no randomness for the cache key: {e}"))?;
        let path = self.dir.join(KEY_FILE);
        let made = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()));
        match made {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .read_key()
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .ok_or_else(|| anyhow::anyhow!("{} vanished", path.display())),
            Err(e) => Err(e.into()),
        }
    }

    fn write(
        &self,
        path: &Path,
        wasm_digest: &[u8; 32],
        component: &Component,
    ) -> anyhow::Result<()> {
        let artifact = component.serialize()?;
        create_private_dir(&self.dir)?;
        trusted(&self.dir, &fs::symlink_metadata(&self.dir)?, true).map_err(anyhow::Error::msg)?;
        let key = self.key_for_writing()?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(wasm_digest);
        header.extend_from_slice(&self.engine);
        let mac = mac(&key, &header, &artifact);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let temp = path.with_extension(format!("tmp-{}-{nanos}", std::process::id()));
        let result = (|| -> std::io::Result<()> {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temp)?;
            file.write_all(&header)?;
            file.write_all(&mac)?;
            file.write_all(&artifact)?;
            // No fsync: an entry torn by a power cut fails verification and is rebuilt.
            fs::rename(&temp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        Ok(result?)
    }
}

/// Loads an artifact this cache wrote, after [`CompileCache::verify`] accepted it.
///
/// The one `unsafe` block of the crate. `Component::deserialize` is unsafe because
/// wasmtime maps the artifact's machine code and runs it as is: the bytes must be the
/// output of `Component::serialize` by a compatible engine, never arbitrary data.
#[allow(unsafe_code)]
fn deserialize_verified(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `artifact` passed `verify`: its sha256 equals the digest recorded when
    // this cache wrote it from `Component::serialize`, and the header names this
    // component's sha256 and this engine's compatibility hash. So the bytes are exactly
    // what a compatible engine produced for this component: a torn write, a bit flip, a
    // stale entry or a file of another format is refused before it gets here, and
    // wasmtime itself checks its version and configuration in the artifact again. What
    // the digest cannot stop is someone who can write the cache directory forging an
    // entry: `read` used it only after `trusted` found the directory and the entry
    // owned by this user, writable by nobody else, and not symbolic links.
    unsafe { Component::deserialize(engine, artifact) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_hash_is_stable_and_depends_on_the_configuration() {
        let dir = PathBuf::from("unused");
        let a = CompileCache::new(&Engine::default(), dir.clone());
        let b = CompileCache::new(&Engine::default(), dir.clone());
        assert_eq!(a.engine, b.engine, "two equal engines hash alike");
        let mut config = wasmtime::Config::new();
        config.cranelift_opt_level(wasmtime::OptLevel::None);
        let other = CompileCache::new(&Engine::new(&config).unwrap(), dir);
        assert_ne!(
            a.engine, other.engine,
            "another compiler configuration hashes apart"
        );
    }

    #[test]
    fn a_directory_or_entry_others_could_forge_is_not_used() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("compiled");
        let cache = CompileCache::new(&Engine::default(), dir.clone());
        let wasm = sha256(b"component");
        let entry = cache.path_for(&wasm);
        // What `write` creates: a private directory and file.
        create_private_dir(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        fs::write(&entry, b"not an entry").unwrap();
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o600)).unwrap();
        let key = dir.join(KEY_FILE);
        fs::write(&key, [7u8; 32]).unwrap();
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
        let why = |cache: &CompileCache| {
            cache
                .read(&Engine::default(), &entry, &wasm)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(
            why(&cache).contains("header"),
            "read and verified: {}",
            why(&cache)
        );

        fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(
            why(&cache).contains("writable by its group or by others"),
            "{}",
            why(&cache)
        );
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o600)).unwrap();

        fs::set_permissions(&key, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(
            why(&cache).contains("readable by its group or by others"),
            "the key must be secret: {}",
            why(&cache)
        );
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(
            why(&cache).contains("writable by its group or by others"),
            "{}",
            why(&cache)
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();

        let elsewhere = root.path().join("forged");
        fs::rename(&entry, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &entry).unwrap();
        assert!(why(&cache).contains("symbolic link"), "{}", why(&cache));
    }

    #[test]
    fn verify_refuses_every_kind_of_damage() {
        let cache = CompileCache::new(&Engine::default(), PathBuf::from("unused"));
        let wasm = sha256(b"component");
        let artifact = b"compiled code".to_vec();
        let key = [7u8; 32];
        let mut entry = MAGIC.to_vec();
        entry.extend_from_slice(&wasm);
        entry.extend_from_slice(&cache.engine);
        let mac = mac(&key, &entry, &artifact);
        entry.extend_from_slice(&mac);
        entry.extend_from_slice(&artifact);
        assert_eq!(cache.verify(&entry, &wasm, &key).ok(), Some(&artifact[..]));

        let damaged = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut e = entry.clone();
            f(&mut e);
            match cache.verify(&e, &wasm, &key) {
                Err(Unusable::Invalid(why)) => why,
                Err(Unusable::Forged) => "forged: torn or corrupt",
                other => panic!("damage accepted: {other:?}"),
            }
        };
        assert!(damaged(&|e| e.truncate(HEADER_LEN - 1)).contains("header"));
        assert!(damaged(&|e| e[0] ^= 1).contains("format"));
        assert!(damaged(&|e| e[MAGIC.len()] ^= 1).contains("component"));
        assert!(damaged(&|e| e[MAGIC.len() + 32] ^= 1).contains("engine"));
        assert!(
            damaged(&|e| {
                let last = e.len() - 1;
                e[last] ^= 1;
            })
            .contains("corrupt")
        );
        assert!(
            damaged(&|e| {
                e.pop();
            })
            .contains("torn")
        );
        assert!(matches!(
            cache.verify(&entry, &sha256(b"another component"), &key),
            Err(Unusable::Invalid(_))
        ));
        // The same entry under another cache's key is a forgery.
        assert!(matches!(
            cache.verify(&entry, &wasm, &[8u8; 32]),
            Err(Unusable::Forged)
        ));
    }

    #[test]
    fn the_per_user_directory_follows_the_override_then_xdg_then_home() {
        let with = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            dir_from(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into()))
        };
        let all = [
            ("JUSTONCE_CACHE_DIR", "/tmp/mine"),
            ("XDG_CACHE_HOME", "/home/ada/.xdg"),
            ("HOME", "/home/ada"),
        ];
        assert_eq!(with(&all), Some(PathBuf::from("/tmp/mine")));
        assert_eq!(
            with(&all[1..]),
            Some(PathBuf::from("/home/ada/.xdg/justonce"))
        );
        assert_eq!(
            with(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/home/ada")]),
            Some(PathBuf::from("/home/ada/.cache/justonce"))
        );
        assert_eq!(with(&[]), None);
    }

    #[test]
    fn the_mac_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        let mac = mac(b"Jefe", b"what do ya want ", b"for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
