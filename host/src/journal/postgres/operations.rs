//! The rows `justonce forget`, `abandon` and `resolve` read and write on PostgreSQL;
//! what they decide is shared with SQLite (`journal/operate.rs`). The invocation's row is
//! locked (`FOR UPDATE`) for the operation's transaction, so a host deciding the
//! same call waits for it.

use postgres::{GenericClient, Transaction};
use serde_json::Value;

use super::ops::effects_of;
use crate::journal::operate::{Found, OperateTx};
use crate::journal::{Action, JournalEffect, JournalOperation};

/// One operation's transaction.
pub(super) struct Tx<'a, 'b>(pub &'a mut Transaction<'b>);

/// The operations on `key`, oldest first.
pub(super) fn operations_of(
    client: &mut impl GenericClient,
    key: &str,
) -> Result<Vec<JournalOperation>, postgres::Error> {
    Ok(client
        .query(
            "SELECT action, who, at, detail FROM operations WHERE invocation_key = $1
              ORDER BY at, id",
            &[&key],
        )?
        .into_iter()
        .map(|r| {
            let detail: String = r.get(3);
            JournalOperation {
                key: key.to_string(),
                // The table's CHECK admits only the actions this build knows.
                action: Action::parse(r.get(0)).unwrap_or(Action::Forget),
                by: r.get(1),
                at: r.get(2),
                detail: serde_json::from_str(&detail).unwrap_or(Value::String(detail)),
            }
        })
        .collect())
}

impl OperateTx for Tx<'_, '_> {
    type Error = postgres::Error;

    fn find(&mut self, key: &str) -> Result<Option<Found>, postgres::Error> {
        Ok(self
            .0
            .query_opt(
                concat!(
                    "SELECT state, lease_expires_at, outcome, ",
                    db_now!(),
                    ", lease_owner FROM invocations WHERE key = $1 FOR UPDATE"
                ),
                &[&key],
            )?
            .map(|r| Found {
                state: r.get(0),
                lease_owner: r.get(4),
                lease_expires_at: r.get(1),
                outcome: r.get(2),
                now: Some(r.get(3)),
            }))
    }

    fn effects(&mut self, key: &str) -> Result<Vec<JournalEffect>, postgres::Error> {
        effects_of(self.0, key)
    }

    fn operations(&mut self, key: &str) -> Result<Vec<JournalOperation>, postgres::Error> {
        operations_of(self.0, key)
    }

    fn delete(&mut self, key: &str) -> Result<(), postgres::Error> {
        self.0
            .execute("DELETE FROM effects WHERE invocation_key = $1", &[&key])?;
        self.0
            .execute("DELETE FROM aliases WHERE invocation_key = $1", &[&key])?;
        self.0
            .execute("DELETE FROM invocations WHERE key = $1", &[&key])?;
        Ok(())
    }

    fn close(&mut self, key: &str, outcome: &str, now: i64) -> Result<(), postgres::Error> {
        self.0.execute(
            concat!(
                "UPDATE invocations SET state = 'completed', outcome = $2, completed_at = ",
                db_now!(),
                ", updated_at = $3, lease_owner = NULL, lease_expires_at = NULL WHERE key = $1"
            ),
            &[&key, &outcome, &now],
        )?;
        Ok(())
    }

    fn record(&mut self, op: &JournalOperation) -> Result<(), postgres::Error> {
        // Every host drops the outcomes it remembers when the operation commits
        // (`listen.rs`): a `forget` deletes a record they may hold.
        self.0.execute(
            concat!("SELECT pg_notify(", channel!(), ", $1)"),
            &[&op.key],
        )?;
        self.0.execute(
            "INSERT INTO operations (invocation_key, action, who, at, detail)
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &op.key,
                &op.action.as_str(),
                &op.by,
                &op.at,
                &op.detail.to_string(),
            ],
        )?;
        Ok(())
    }

    fn effect_of(&mut self, key: &str) -> Result<Option<String>, postgres::Error> {
        Ok(self
            .0
            .query_opt("SELECT invocation_key FROM effects WHERE key = $1", &[&key])?
            .map(|r| r.get(0)))
    }

    fn resolve_effect(
        &mut self,
        key: &str,
        performed: Option<&str>,
        now: i64,
    ) -> Result<(), postgres::Error> {
        match performed {
            Some(answer) => self.0.execute(
                "UPDATE effects SET state = 'done', response = $2, resolution = 'performed',
                        resolved_at = $3, updated_at = $3
                  WHERE key = $1",
                &[&key, &answer, &now],
            )?,
            None => self.0.execute(
                "UPDATE effects SET resolution = 'not_performed', resolved_at = $2,
                        updated_at = $2
                  WHERE key = $1",
                &[&key, &now],
            )?,
        };
        Ok(())
    }
    fn answer_effect(&mut self, key: &str, answer: &str, now: i64) -> Result<(), postgres::Error> {
        self.0.execute(
            "UPDATE effects SET state = 'done', response = $2, updated_at = $3
              WHERE key = $1 AND state = 'pending'",
            &[&key, &answer, &now],
        )?;
        Ok(())
    }
}
