//! The tokens table (see `journal/tokens.rs`).

use postgres::Row;

use super::PostgresJournal;
use crate::error::Result;
use crate::journal::tokens::{TokenRow, TokenTable};

const COLUMNS: &str = "name, sha256, created_at_ms, role";

fn row_of(r: &Row) -> TokenRow {
    TokenRow {
        name: r.get(0),
        sha256: r.get(1),
        created_at_ms: r.get(2),
        role: r.get(3),
    }
}

impl TokenTable for PostgresJournal {
    fn token_rows(&self) -> Result<Vec<TokenRow>> {
        self.read(|client| {
            let rows = client
                .c
                .query(&format!("SELECT {COLUMNS} FROM tokens ORDER BY name"), &[])?;
            Ok(rows.iter().map(row_of).collect())
        })
    }

    fn token_by_digest(&self, sha256: &str) -> Result<Option<TokenRow>> {
        const BY_DIGEST: &str =
            "SELECT name, sha256, created_at_ms, role FROM tokens WHERE sha256 = $1";
        self.read(|client| {
            Ok(client
                .query_opt(BY_DIGEST, &[&sha256])?
                .as_ref()
                .map(row_of))
        })
    }

    fn insert_token(&self, row: &TokenRow) -> Result<bool> {
        self.single(|client| {
            let inserted = client.c.execute(
                &format!(
                    "INSERT INTO tokens ({COLUMNS}) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
                ),
                &[&row.name, &row.sha256, &row.created_at_ms, &row.role],
            )?;
            Ok(inserted == 1)
        })
    }

    fn keeps_tokens(&self) -> Result<bool> {
        const KEEPS: &str = "SELECT EXISTS (SELECT 1 FROM journal_meta WHERE name = 'tokens')";
        self.read(|client| Ok(client.query_one(KEEPS, &[])?.get(0)))
    }

    fn keep_tokens(&self) -> Result<()> {
        self.single(|client| {
            client.c.execute(
                "INSERT INTO journal_meta (name, value) VALUES ('tokens', 'journal') ON CONFLICT DO NOTHING",
                &[],
            )?;
            Ok(())
        })
    }

    fn delete_token(&self, name: &str) -> Result<bool> {
        self.single(|client| {
            Ok(client
                .c
                .execute("DELETE FROM tokens WHERE name = $1", &[&name])?
                == 1)
        })
    }
}
