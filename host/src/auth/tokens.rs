//! Bearer tokens for MCP over HTTP, the console and `/metrics`: each names a
//! principal, the caller whose calls are keyed apart from everyone else's.
//!
//! The tokens file is JSON, `{"tokens": [{"name", "sha256", "created_at_ms", "role"}]}`:
//! only the SHA-256 of each token is stored, so the file does not let its reader call.
//! Each token has a [`Role`]: agents call tools over MCP, viewers read the console,
//! operators read it and act on calls; a token written before roles existed is an
//! agent's.
//! A token is shown once, by [`add`]. A running server notices a change of the file
//! at the next request (one `stat` per request: see [`Tokens`]), so [`revoke`] takes
//! effect on the next request.
//!
//! A PostgreSQL journal keeps the tokens for every host of it instead (a table of the
//! same records, `crate::journal::tokens`): [`Tokens::in_journal`] reads it at each
//! request, so one [`revoke_in`] is seen by every host at its next request, and
//! [`import_into`] brings a tokens file's entries over once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::{Clock, SystemClock};
use crate::journal::Journal;
use crate::journal::tokens::{TokenRow, TokenTable};

/// What every token starts with, so a leaked one is recognisable in a log or a scan.
pub const TOKEN_PREFIX: &str = "jo_";

/// The longest principal name.
pub const MAX_NAME_LEN: usize = 64;

/// A problem with the tokens file or a token name.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The tokens file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a tokens file.
    #[error("{path}: not a tokens file: {reason}")]
    Malformed {
        /// The tokens file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A principal name outside `[A-Za-z0-9._-]{1,64}`.
    #[error(
        "invalid principal name {0:?}: use 1 to {MAX_NAME_LEN} of the characters A-Z a-z 0-9 . _ -"
    )]
    InvalidName(String),
    /// The file could be written by someone other than this user (and root): it is
    /// not trusted to say who may call.
    #[error("{path}: not trusted: {reason}")]
    Untrusted {
        /// The tokens file.
        path: PathBuf,
        /// Who else could write it.
        reason: String,
    },
    /// Two entries of the file have one name: which token is that principal's is not
    /// clear, so neither is taken.
    #[error(
        "{path}: the name {name:?} has more than one entry; keep the one you issued and remove the others (and find out who added them)"
    )]
    DuplicateName {
        /// The tokens file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// Two entries of the file have one token: it would name two principals.
    #[error("{path}: {first:?} and {second:?} have the same token; remove one of them")]
    SharedToken {
        /// The tokens file.
        path: PathBuf,
        /// The first entry's name.
        first: String,
        /// The other's.
        second: String,
    },
    /// `add` of a name that has a token already.
    #[error("{0:?} has a token already; revoke it first to issue a new one")]
    Exists(String),
    /// `revoke` of a name that has no token.
    #[error("no token is named {0:?}")]
    Unknown(String),
    /// The operating system's randomness failed.
    #[error("cannot draw a random token: {0}")]
    Random(String),
    /// The journal that keeps the tokens did not answer, or keeps none.
    #[error("the journal's tokens: {0}")]
    Journal(String),
}

/// What a token's holder may do; each role is refused what is another's, by the
/// server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Calls tools over MCP (`/mcp`); no console.
    #[default]
    Agent,
    /// Reads the console; no action, no tool call.
    Viewer,
    /// Reads the console and acts on calls (resolve, forget, abandon); no tool call.
    Operator,
}

impl Role {
    /// The name in the tokens file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Viewer => "viewer",
            Self::Operator => "operator",
        }
    }

    /// Whether it may read the console.
    pub fn reads_console(self) -> bool {
        matches!(self, Self::Viewer | Self::Operator)
    }

    /// Whether it may act on calls from the console.
    pub fn acts(self) -> bool {
        self == Self::Operator
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "agent" => Ok(Self::Agent),
            "viewer" => Ok(Self::Viewer),
            "operator" => Ok(Self::Operator),
            other => Err(format!(
                "unknown role {other:?}: use agent, viewer or operator"
            )),
        }
    }
}

/// Who holds a token: the principal it names and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The principal.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// The SHA-256 of a token: what the file stores and what a console session keeps to
/// find out, on every request, whether the token that opened it is still in the file
/// (and with which role). It is not the token: it does not let its holder call.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    /// The digest of `token`.
    pub fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Enough to tell two apart in a log; the whole digest is in the file anyway.
        write!(f, "TokenDigest({}…)", hex::encode(&self.0[..6]))
    }
}

/// One token as the file stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRecord {
    /// The principal it names.
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    /// When it was issued (ms since the epoch).
    pub created_at_ms: u64,
    /// What its holder may do (absent in a file written before roles: an agent).
    #[serde(default)]
    pub role: Role,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensDoc {
    tokens: Vec<TokenRecord>,
}

/// Whether `name` can name a principal.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Lowercase hex SHA-256 of a token.
pub fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Every token in the file at `path`; none when it does not exist.
pub fn list(path: &Path) -> Result<Vec<TokenRecord>, TokenError> {
    Ok(read(path)?.tokens)
}

/// Issues an agent's token for principal `name` (see [`add_with_role`]).
pub fn add(path: &Path, name: &str) -> Result<String, TokenError> {
    add_with_role(path, name, Role::Agent)
}

/// Issues a token with `role` for principal `name`, stores its hash, and returns the
/// token: the only time it is shown.
pub fn add_with_role(path: &Path, name: &str, role: Role) -> Result<String, TokenError> {
    let mut doc = read(path)?;
    if doc.tokens.iter().any(|t| t.name == name) {
        return Err(TokenError::Exists(name.to_owned()));
    }
    let (token, record) = issue(name, role)?;
    doc.tokens.push(record);
    write(path, &doc)?;
    Ok(token)
}

/// A new token for principal `name` with `role`, and its record (its hash).
fn issue(name: &str, role: Role) -> Result<(String, TokenRecord), TokenError> {
    if !valid_name(name) {
        return Err(TokenError::InvalidName(name.to_owned()));
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| TokenError::Random(e.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let created_at_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let record = TokenRecord {
        name: name.to_owned(),
        sha256: digest(&token),
        created_at_ms,
        role,
    };
    Ok((token, record))
}

fn journal_error(e: crate::error::Error) -> TokenError {
    TokenError::Journal(e.to_string())
}

fn row_of(record: &TokenRecord) -> TokenRow {
    TokenRow {
        name: record.name.clone(),
        sha256: record.sha256.to_ascii_lowercase(),
        created_at_ms: i64::try_from(record.created_at_ms).unwrap_or(i64::MAX),
        role: record.role.as_str().to_owned(),
    }
}

/// The record of a row of the journal's table; `None` for a role this build does
/// not know (such a token is refused).
fn record_of(row: TokenRow) -> Option<TokenRecord> {
    Some(TokenRecord {
        role: row.role.parse().ok()?,
        name: row.name,
        sha256: row.sha256,
        created_at_ms: u64::try_from(row.created_at_ms).unwrap_or(0),
    })
}

/// Every token the journal's `table` keeps.
pub fn list_in(table: &dyn TokenTable) -> Result<Vec<TokenRecord>, TokenError> {
    Ok(table
        .token_rows()
        .map_err(journal_error)?
        .into_iter()
        .filter_map(record_of)
        .collect())
}

/// Issues a token with `role` for principal `name` in the journal's `table` (see
/// [`add_with_role`]): every host of the journal takes it from its next request.
pub fn add_in(table: &dyn TokenTable, name: &str, role: Role) -> Result<String, TokenError> {
    let (token, record) = issue(name, role)?;
    if !table
        .insert_token(&row_of(&record))
        .map_err(journal_error)?
    {
        return Err(TokenError::Exists(name.to_owned()));
    }
    Ok(token)
}

/// Removes the token of principal `name` from the journal's `table`: every host of
/// the journal refuses it from its next request.
pub fn revoke_in(table: &dyn TokenTable, name: &str) -> Result<(), TokenError> {
    match table.delete_token(name).map_err(journal_error)? {
        true => Ok(()),
        false => Err(TokenError::Unknown(name.to_owned())),
    }
}

/// What [`import_into`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// The principals whose tokens were added to the journal.
    pub added: Vec<String>,
    /// The principals left out: the journal has a token of that name (or that
    /// token) already, and keeps it.
    pub kept: Vec<String>,
}

/// Adds the tokens of the file at `path` to the journal's `table`, as they are
/// (their hashes: their holders keep using them); a name the journal has already
/// keeps the journal's.
pub fn import_into(table: &dyn TokenTable, path: &Path) -> Result<Imported, TokenError> {
    let mut imported = Imported::default();
    for record in read(path)?.tokens {
        match table
            .insert_token(&row_of(&record))
            .map_err(journal_error)?
        {
            true => imported.added.push(record.name),
            false => imported.kept.push(record.name),
        }
    }
    // From now on the journal's tokens are the hosts' (an empty file adopts none).
    table.keep_tokens().map_err(journal_error)?;
    Ok(imported)
}

/// Removes the token of principal `name`.
pub fn revoke(path: &Path, name: &str) -> Result<(), TokenError> {
    let mut doc = read(path)?;
    let before = doc.tokens.len();
    doc.tokens.retain(|t| t.name != name);
    if doc.tokens.len() == before {
        return Err(TokenError::Unknown(name.to_owned()));
    }
    write(path, &doc)
}

/// The file's bytes; `None` when it does not exist. Refused when someone other than
/// this user (or root) could have written it, as the compile cache refuses its
/// entries ([`crate::trust`]): checked on the file as opened, so what is read is what
/// was checked. A replacement by another user would be theirs, and refused too.
fn contents(path: &Path) -> Result<Option<Vec<u8>>, TokenError> {
    use std::io::Read as _;
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    crate::trust::trusted(path, &meta, false).map_err(|reason| TokenError::Untrusted {
        path: path.to_owned(),
        reason,
    })?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(bytes))
}

fn read(path: &Path) -> Result<TokensDoc, TokenError> {
    parse(path, contents(path)?.as_deref())
}

fn parse(path: &Path, bytes: Option<&[u8]>) -> Result<TokensDoc, TokenError> {
    let Some(bytes) = bytes else {
        return Ok(TokensDoc::default());
    };
    let doc: TokensDoc = serde_json::from_slice(bytes).map_err(|e| TokenError::Malformed {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    if let Some(bad) = doc.tokens.iter().find(|t| {
        !valid_name(&t.name)
            || t.sha256.len() != 64
            || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        return Err(TokenError::Malformed {
            path: path.to_owned(),
            reason: format!("the entry {:?} has a bad name or sha256", bad.name),
        });
    }
    // An appended entry must not shadow (or be shadowed by) another of the same name
    // or token: which one a lookup finds would be up to the order of a map.
    let mut names = std::collections::HashSet::new();
    let mut digests = HashMap::new();
    for t in &doc.tokens {
        if !names.insert(t.name.as_str()) {
            return Err(TokenError::DuplicateName {
                path: path.to_owned(),
                name: t.name.clone(),
            });
        }
        if let Some(first) = digests.insert(t.sha256.to_ascii_lowercase(), t.name.as_str()) {
            return Err(TokenError::SharedToken {
                path: path.to_owned(),
                first: first.to_owned(),
                second: t.name.clone(),
            });
        }
    }
    Ok(doc)
}

/// Writes aside and renames into place, so a server reading the file never sees half
/// of it; owner-only, in a directory made owner-only when it is made here (it is the
/// database's too, by default: `token add` may run before the journal is created).
fn write(path: &Path, doc: &TokensDoc) -> Result<(), TokenError> {
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::trust::create_private_dir(dir).map_err(io)?;
    }
    let aside = path.with_extension(format!("tmp{}", std::process::id()));
    let text = serde_json::to_string_pretty(doc).unwrap_or_default();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&aside).and_then(|mut f| {
        use std::io::Write as _;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()
    });
    written
        .and_then(|()| std::fs::rename(&aside, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&aside);
            io(e)
        })
}

/// One version of the file: its bytes (`None`: no file). Until the file settles it
/// is compared by content, so a rewrite that keeps the length and the modification
/// time (within one tick of the file system's clock) is still noticed.
type Version = Option<Vec<u8>>;

/// How long after its last change a file is taken as settled: longer than the
/// coarsest tick of a file system's clock (and a little clock skew), so a later
/// change cannot carry the same change time.
const SETTLE: Duration = Duration::from_secs(2);

/// What one `stat` tells of the file: which file it is and when it last changed.
/// The change time (`ctime`) is set by the kernel on every write, rename in and
/// `touch`, and cannot be set back by a program, unlike the modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Some(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// Elsewhere no stamp: the file is read and compared on every request.
    #[cfg(not(unix))]
    fn of(_: &std::fs::Metadata) -> Option<Self> {
        None
    }

    /// Whether the file had gone unchanged for [`SETTLE`] at `now_ms`.
    fn settled_at(&self, now_ms: i64) -> bool {
        self.ctime_ns < (i128::from(now_ms) - i128::from(crate::clock::millis(SETTLE))) * 1_000_000
    }
}

/// The tokens as last read.
#[derive(Debug, Default)]
struct Loaded {
    /// The file's bytes.
    version: Version,
    /// The file's stamp when it was read, kept only if the file had settled by then:
    /// the same stamp later means the same bytes, and no read. Any change after the
    /// read gets a change time past it (the file settled, so its own is older than
    /// `now - SETTLE`), or is another inode (a rename into place); an inode number
    /// reused for a new file also comes with a new change time.
    settled: Option<Stamp>,
    /// The holders by the SHA-256 of their token.
    by_digest: HashMap<TokenDigest, Holder>,
}

/// The tokens a server accepts. Every request `stat`s the file: it is read again
/// when the stamp changed, or while the file has not settled (it changed within
/// [`SETTLE`]), and parsed again when its bytes differ, so a revoked token is
/// refused from the next request on.
pub struct Tokens {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    loaded: Mutex<Loaded>,
    /// The journal that keeps the tokens instead of the file (PostgreSQL).
    journal: Option<Arc<dyn Journal>>,
    /// How many times the file was read (a test counts them).
    #[cfg(test)]
    reads: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("path", &self.path)
            .field("loaded", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// The tokens of the file at `path`; fails if it cannot be read now.
    pub fn open(path: &Path) -> Result<Self, TokenError> {
        Self::open_with_clock(path, Arc::new(SystemClock))
    }

    /// The tokens of the file at `path`, taking the time from `clock` to tell
    /// whether the file has settled.
    fn open_with_clock(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, TokenError> {
        let tokens = Self {
            path: path.to_owned(),
            clock,
            loaded: Mutex::new(Loaded::default()),
            journal: None,
            #[cfg(test)]
            reads: std::sync::atomic::AtomicUsize::new(0),
        };
        let stamp = tokens.stamp();
        let version = tokens.read()?;
        tokens.load(version, stamp)?;
        Ok(tokens)
    }

    /// The tokens `journal` keeps for every host of it (PostgreSQL), looked up at
    /// each request: a token revoked through any host is refused from the next
    /// request on. While the journal does not answer, each token is taken as the
    /// journal last said (and the log says so): no request could be served then
    /// anyway, and a brief outage does not lock out the console. Fails when the
    /// journal keeps no tokens (SQLite) or does not answer now.
    pub(crate) fn in_journal(journal: Arc<dyn Journal>) -> Result<Self, TokenError> {
        let table = journal.tokens().ok_or_else(|| {
            TokenError::Journal(
                "this journal keeps no tokens (a SQLite journal's hosts keep a tokens file)".into(),
            )
        })?;
        let by_digest = list_in(table)?
            .into_iter()
            .filter_map(|t| Some((TokenDigest(unhex(&t.sha256)?), holder_of_record(t))))
            .collect();
        Ok(Self {
            path: PathBuf::from("the journal's tokens table"),
            clock: Arc::new(SystemClock),
            loaded: Mutex::new(Loaded {
                by_digest,
                ..Loaded::default()
            }),
            journal: Some(journal),
            #[cfg(test)]
            reads: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The file (for tokens the journal keeps: a description of them).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many tokens are accepted now.
    pub fn len(&self) -> usize {
        if let Some(table) = self.journal.as_ref().and_then(|j| j.tokens()) {
            match list_in(table) {
                Ok(list) => return list.len(),
                Err(e) => tracing::warn!("counting the tokens as last read: {e}"),
            }
            return self.lock().by_digest.len();
        }
        self.refresh();
        self.lock().by_digest.len()
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file's stamp now, if it had settled by now (`None` also when it cannot
    /// be `stat`ed: then it is read, and that tells what is wrong).
    fn stamp(&self) -> Option<Stamp> {
        let now_ms = self.clock.now_ms();
        let meta = std::fs::metadata(&self.path).ok()?;
        Stamp::of(&meta).filter(|s| s.settled_at(now_ms))
    }

    fn read(&self) -> Result<Version, TokenError> {
        #[cfg(test)]
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        contents(&self.path)
    }

    /// Takes `version` as the tokens, read when the file had the settled `stamp`.
    fn load(&self, version: Version, stamp: Option<Stamp>) -> Result<(), TokenError> {
        let mut loaded = self.lock();
        if loaded.version == version {
            loaded.settled = stamp;
            return Ok(());
        }
        drop(loaded);
        let doc = parse(&self.path, version.as_deref())?;
        let by_digest = doc
            .tokens
            .into_iter()
            .filter_map(|t| Some((TokenDigest(unhex(&t.sha256)?), holder_of_record(t))))
            .collect();
        *self.lock() = Loaded {
            version,
            settled: stamp,
            by_digest,
        };
        Ok(())
    }

    /// Re-reads the file unless its settled stamp is unchanged, and parses it when
    /// its content changed; a file that became unreadable or malformed keeps the
    /// last good tokens (and says so in the log) rather than locking everyone out.
    fn refresh(&self) {
        let stamp = self.stamp();
        if stamp.is_some() && self.lock().settled == stamp {
            return;
        }
        let result = self.read().and_then(|now| self.load(now, stamp));
        if let Err(e) = result {
            tracing::warn!("keeping the tokens read before: {e}");
        }
    }

    /// The principal `token` names, if it is a token of the file (whatever its role).
    pub fn principal(&self, token: &str) -> Option<String> {
        self.holder(token).map(|h| h.name)
    }

    /// Who holds `token` and with which role, if it is a token of the file.
    pub fn holder(&self, token: &str) -> Option<Holder> {
        // Looked up by digest: comparing digests leaks nothing about the token.
        self.holder_of(&TokenDigest::of(token))
    }

    /// Who holds the token of `digest` now, and with which role, if it is still in
    /// the file: a revoked token has none, a token whose entry was changed has the
    /// role the file gives it now.
    pub fn holder_of(&self, digest: &TokenDigest) -> Option<Holder> {
        if let Some(table) = self.journal.as_ref().and_then(|j| j.tokens()) {
            return self.holder_in_journal(table, digest);
        }
        self.refresh();
        self.lock().by_digest.get(digest).cloned()
    }

    /// The holder of `digest` as the journal says now, remembered for an outage.
    fn holder_in_journal(&self, table: &dyn TokenTable, digest: &TokenDigest) -> Option<Holder> {
        let sha256 = hex::encode(digest.0);
        let look_up = || table.token_by_digest(&sha256);
        // The servers check tokens on their (multi-threaded) runtime's workers; the
        // journal's client blocks, so the worker hands its other tasks over first.
        let found = match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(look_up),
            Err(_) => look_up(),
        };
        match found {
            Ok(row) => {
                let holder = row.and_then(record_of).map(holder_of_record);
                let mut loaded = self.lock();
                match &holder {
                    Some(holder) => loaded.by_digest.insert(*digest, holder.clone()),
                    None => loaded.by_digest.remove(digest),
                };
                holder
            }
            Err(e) => {
                tracing::warn!(
                    "the journal does not answer for a token; taking it as it last said: {e}"
                );
                self.lock().by_digest.get(digest).cloned()
            }
        }
    }
}

fn holder_of_record(t: TokenRecord) -> Holder {
    Holder {
        name: t.name,
        role: t.role,
    }
}

/// The 32 bytes of a lowercase or uppercase hex SHA-256 (checked by [`parse`]).
fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stored_hashed_names_its_principal_and_stops_working_when_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let alice = add(&path, "alice").unwrap();
        assert!(alice.starts_with(TOKEN_PREFIX));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&alice), "the file holds no token");
        assert!(text.contains(&digest(&alice)));

        let tokens = Tokens::open(&path).unwrap();
        assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));
        assert_eq!(tokens.principal("jo_guess"), None);
        let bob = add(&path, "bob").unwrap();
        assert_eq!(tokens.principal(&bob).as_deref(), Some("bob"));
        revoke(&path, "alice").unwrap();
        assert_eq!(tokens.principal(&alice), None);
        assert_eq!(tokens.principal(&bob).as_deref(), Some("bob"));
        assert_eq!(list(&path).unwrap().len(), 1);
    }

    #[test]
    fn a_same_length_rewrite_within_one_mtime_tick_is_noticed() {
        same_length_rewrite_keeping_the_mtime_is_noticed(Arc::new(SystemClock));
    }

    /// Rewrites the file in place (the same inode) to the same length, with the
    /// modification time put back, and checks the tokens follow.
    fn same_length_rewrite_keeping_the_mtime_is_noticed(clock: Arc<dyn Clock>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let old = add(&path, "alice").unwrap();
        let tokens = Tokens::open_with_clock(&path, clock).unwrap();
        assert_eq!(tokens.principal(&old).as_deref(), Some("alice"));
        let before = std::fs::metadata(&path).unwrap();
        // Another token for the same name: the file keeps its length.
        let new = format!("{TOKEN_PREFIX}{}", "7".repeat(64));
        let text = std::fs::read_to_string(&path).unwrap();
        let rewritten = text.replace(&digest(&old), &digest(&new));
        assert_eq!(rewritten.len(), text.len());
        std::fs::write(&path, rewritten).unwrap();
        // Within one tick of the file system's clock: the same modification time.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(before.modified().unwrap())
            .unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (after.modified().unwrap(), after.len()),
            (before.modified().unwrap(), before.len())
        );
        assert_eq!(tokens.principal(&old), None, "the revoked token is refused");
        assert_eq!(tokens.principal(&new).as_deref(), Some("alice"));
    }

    /// A clock `ahead` of the system's: the files written now look that old.
    fn ahead(ahead: Duration) -> Arc<dyn Clock> {
        Arc::new(crate::clock::ManualClock::new(
            SystemClock.now_ms() + crate::clock::millis(ahead),
        ))
    }

    fn reads(tokens: &Tokens) -> usize {
        tokens.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn a_settled_file_is_only_stated_and_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let alice = add(&path, "alice").unwrap();
        let tokens = Tokens::open_with_clock(&path, ahead(SETTLE * 5)).unwrap();
        assert_eq!(reads(&tokens), 1);
        for _ in 0..3 {
            assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));
        }
        assert_eq!(reads(&tokens), 1, "an unchanged settled file is not read");
        revoke(&path, "alice").unwrap();
        assert_eq!(
            tokens.principal(&alice),
            None,
            "the revoked token is refused"
        );
        assert_eq!(reads(&tokens), 2);
    }

    #[test]
    fn a_file_changed_within_the_settling_time_is_read_at_every_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let alice = add(&path, "alice").unwrap();
        let tokens = Tokens::open_with_clock(&path, ahead(Duration::ZERO)).unwrap();
        for _ in 0..3 {
            assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));
        }
        assert_eq!(reads(&tokens), 4, "each request compares the content");
    }

    #[test]
    fn a_same_length_rewrite_keeping_the_mtime_is_noticed_on_a_settled_file() {
        // Only the change time, which no program sets, tells.
        same_length_rewrite_keeping_the_mtime_is_noticed(ahead(SETTLE * 5));
    }

    #[test]
    fn a_token_carries_its_role_and_a_file_without_roles_reads_as_agents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let old = format!("{TOKEN_PREFIX}{}", "1".repeat(64));
        let before_roles = format!(
            r#"{{"tokens": [{{"name": "old-bot", "sha256": "{}", "created_at_ms": 1}}]}}"#,
            digest(&old)
        );
        std::fs::write(&path, before_roles).unwrap();
        let ops = add_with_role(&path, "ops", Role::Operator).unwrap();
        let eve = add_with_role(&path, "eve", Role::Viewer).unwrap();
        let tokens = Tokens::open(&path).unwrap();
        let role = |t: &str| tokens.holder(t).map(|h| h.role);
        assert_eq!(role(&old), Some(Role::Agent));
        assert_eq!(role(&ops), Some(Role::Operator));
        assert_eq!(role(&eve), Some(Role::Viewer));
        assert_eq!("operator".parse::<Role>(), Ok(Role::Operator));
        assert!(
            "admin"
                .parse::<Role>()
                .unwrap_err()
                .contains("agent, viewer or operator")
        );
        assert!(Role::Operator.acts() && !Role::Viewer.acts() && !Role::Agent.acts());
        assert!(!Role::Agent.reads_console() && Role::Viewer.reads_console());
    }

    #[test]
    fn a_file_others_could_write_is_refused_and_a_new_directory_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        // `token add` before the journal made the database's directory.
        let path = dir.path().join("new/db/tokens.json");
        let alice = add(&path, "alice").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir.path().join("new")), 0o700);
        assert_eq!(mode(&path), 0o600);

        let tokens = Tokens::open(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let refused = Tokens::open(&path).unwrap_err();
        assert!(
            matches!(&refused, TokenError::Untrusted { reason, .. }
                if reason.contains("writable by its group or by others")),
            "{refused}"
        );
        assert!(refused.to_string().contains("tokens.json"), "{refused}");
        assert!(matches!(list(&path), Err(TokenError::Untrusted { .. })));
        assert!(matches!(
            add(&path, "bob"),
            Err(TokenError::Untrusted { .. })
        ));
        // A running server keeps what it read while the file was trusted.
        let mallory = format!("{TOKEN_PREFIX}{}", "6".repeat(64));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace(&digest(&alice), &digest(&mallory))).unwrap();
        assert_eq!(
            tokens.principal(&mallory),
            None,
            "written by anyone: not read"
        );
        assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(tokens.principal(&mallory).as_deref(), Some("alice"));

        // Another user's file (only root can make one to test with).
        if crate::trust::effective_uid() == 0 {
            std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
            assert!(matches!(
                Tokens::open(&path),
                Err(TokenError::Untrusted { reason, .. }) if reason.contains("owned by user 4242")
            ));
        }
    }

    #[test]
    fn a_repeated_name_or_token_is_refused_naming_it_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let alice = add(&path, "alice").unwrap();
        let tokens = Tokens::open(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let entry = |name: &str, token: &str| {
            format!(
                r#"{{"name": "{name}", "sha256": "{}", "created_at_ms": 2}}"#,
                digest(token)
            )
        };
        let appended = |extra: String| {
            let at = text.rfind(']').unwrap();
            format!("{},{extra}{}", text[..at].trim_end(), &text[at..])
        };
        let mallory = format!("{TOKEN_PREFIX}{}", "5".repeat(64));
        std::fs::write(&path, appended(entry("alice", &mallory))).unwrap();
        let refused = Tokens::open(&path).unwrap_err();
        assert!(
            matches!(&refused, TokenError::DuplicateName { name, path: p } if name == "alice" && *p == path),
            "{refused}"
        );
        let told = refused.to_string();
        assert!(
            told.contains("\"alice\"") && told.contains(&path.display().to_string()),
            "{told}"
        );
        assert_eq!(
            tokens.principal(&mallory),
            None,
            "the appended entry is not taken"
        );
        assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));

        std::fs::write(&path, appended(entry("bob", &alice))).unwrap();
        assert!(matches!(
            Tokens::open(&path),
            Err(TokenError::SharedToken { first, second, .. }) if first == "alice" && second == "bob"
        ));
        assert_eq!(tokens.principal(&alice).as_deref(), Some("alice"));
    }

    #[test]
    fn names_are_checked_and_unique() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        assert!(matches!(add(&path, "a b"), Err(TokenError::InvalidName(_))));
        assert!(matches!(add(&path, ""), Err(TokenError::InvalidName(_))));
        add(&path, "ci-bot.1").unwrap();
        assert!(matches!(add(&path, "ci-bot.1"), Err(TokenError::Exists(_))));
        assert!(matches!(
            revoke(&path, "nobody"),
            Err(TokenError::Unknown(_))
        ));
        assert!(list(&dir.path().join("absent.json")).unwrap().is_empty());
    }
}
