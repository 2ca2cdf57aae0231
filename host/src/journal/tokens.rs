//! The bearer tokens a PostgreSQL journal keeps for every host of it, so that one
//! `justonce token revoke` is seen by all of them at their next request (a SQLite
//! journal's hosts keep theirs in a tokens file: see `crate::auth::tokens`). Only each
//! token's SHA-256 is stored, as the file stores it.

use crate::error::Result;

/// One token as the journal stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// The principal it names.
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    /// When it was issued (ms since the epoch).
    pub created_at_ms: i64,
    /// What its holder may do (`agent`, `viewer`, `operator`).
    pub role: String,
}

/// The table of tokens of a journal that keeps them.
pub trait TokenTable: Send + Sync {
    /// Every token, by name.
    fn token_rows(&self) -> Result<Vec<TokenRow>>;

    /// The token whose SHA-256 is `sha256` (lowercase hex), if any.
    fn token_by_digest(&self, sha256: &str) -> Result<Option<TokenRow>>;

    /// Adds `row`; `false` (and nothing changed) when its name or its token has an
    /// entry already.
    fn insert_token(&self, row: &TokenRow) -> Result<bool>;

    /// Removes the token of `name`; `false` when there is none.
    fn delete_token(&self, name: &str) -> Result<bool>;

    /// Whether the journal keeps the tokens of its hosts: once `justonce token
    /// import` ran on it ([`TokenTable::keep_tokens`]). Until then each host reads
    /// its own tokens file, as before the journal had a table for them.
    fn keeps_tokens(&self) -> Result<bool>;

    /// From now on the journal keeps the tokens of its hosts (each reads the table
    /// from its next start, and no longer its file).
    fn keep_tokens(&self) -> Result<()>;
}
