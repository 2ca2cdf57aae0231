//! The outbox queue on PostgreSQL: several hosts deliver at once, without a lock
//! file. Each message is taken with `SELECT … FOR UPDATE SKIP LOCKED` (a deliverer
//! never waits for, nor takes, a row another is taking) and hidden until its hold
//! ends, in one statement that counts the attempt; what became of it is recorded
//! after the send.

use std::path::PathBuf;

use super::{PostgresJournal, schema};
use crate::error::Result;
use crate::journal::outbox::{
    DEPTH_SQL, MESSAGE_COLUMNS, OutboxDepth, OutboxMessage, OutboxQueue, POSTGRES_SCHEMA, Settle,
    Taken, parse_headers, settle_sql,
};

fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

impl OutboxQueue for PostgresJournal {
    fn prepare_outbox(&self) -> Result<()> {
        self.transaction(|tx| {
            schema::lock(tx)?;
            tx.batch_execute(POSTGRES_SCHEMA).map(Ok::<_, ()>)
        })
        .map(|_| ())
    }

    fn pass_lock_file(&self) -> Option<PathBuf> {
        None
    }

    fn take_message(&self, now: i64, hold_until: i64, skip: &[i64]) -> Result<Option<Taken>> {
        let row = self.single(|client| {
            client.query_opt(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = $2, updated_at = $1
                  WHERE id = (SELECT id FROM outbox
                               WHERE state = 'pending' AND next_attempt_at <= $1
                                 AND NOT (id = ANY($3))
                               ORDER BY next_attempt_at, id LIMIT 1
                               FOR UPDATE SKIP LOCKED)
              RETURNING id, effect_key, method, url, headers, body, attempts, tool",
                &[&now, &hold_until, &skip],
            )
        })?;
        Ok(row.map(|r| Taken {
            id: r.get(0),
            effect_key: r.get(1),
            method: r.get(2),
            url: r.get(3),
            headers: parse_headers(r.get(4)),
            body: r.get(5),
            attempt: count(r.get(6)),
            tool: r.get(7),
        }))
    }

    fn settle_message(&self, taken: &Taken, settle: Settle<'_>, now: i64) -> Result<()> {
        let c = settle.columns(now);
        let attempt = i32::try_from(taken.attempt).unwrap_or(i32::MAX);
        self.single(|client| {
            client.execute(
                &settle_sql('$'),
                &[
                    &taken.id,
                    &c.state,
                    &c.status,
                    &c.error,
                    &c.response,
                    &c.next_attempt_at,
                    &c.delivered_at,
                    &now,
                    &attempt,
                ],
            )
        })?;
        Ok(())
    }

    fn outbox_messages(&self) -> Result<Vec<OutboxMessage>> {
        let rows = self.read(|client| {
            client.query(
                &format!("SELECT {MESSAGE_COLUMNS} FROM outbox ORDER BY id"),
                &[],
            )
        })?;
        Ok(rows
            .into_iter()
            .map(|r| OutboxMessage {
                id: r.get(0),
                effect_key: r.get(1),
                tool: r.get(2),
                method: r.get(3),
                url: r.get(4),
                state: r.get(5),
                attempts: count(r.get(6)),
                last_status: r
                    .get::<_, Option<i32>>(7)
                    .and_then(|s| u16::try_from(s).ok()),
                last_error: r.get(8),
            })
            .collect())
    }

    fn outbox_depth(&self) -> Result<OutboxDepth> {
        let row = self.read(|client| {
            let exists = client.query_one("SELECT to_regclass('outbox') IS NOT NULL", &[])?;
            if !exists.get::<_, bool>(0) {
                return Ok(None);
            }
            client.query_one(DEPTH_SQL, &[]).map(Some)
        })?;
        let count = |i: usize| {
            row.as_ref()
                .map_or(0, |r| u64::try_from(r.get::<_, i64>(i)).unwrap_or(0))
        };
        Ok(OutboxDepth {
            pending: count(0),
            retrying: count(1),
            failed: count(2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PostgresTarget, testing};
    use super::*;
    use crate::journal::Durability;

    fn enqueue(client: &mut postgres::Client, key: &str, now: i64) {
        client
            .execute(
                "INSERT INTO outbox (effect_key, tool, method, url, headers, body, state,
                                     next_attempt_at, created_at, updated_at)
                 VALUES ($1, 't', 'POST', 'http://127.0.0.1:9/x', '[]', '\\x'::bytea,
                         'pending', $2, $2, $2)",
                &[&key, &now],
            )
            .unwrap();
    }

    #[test]
    fn a_taken_message_is_hidden_from_other_hosts_until_its_hold_ends_and_a_late_sender_is_fenced()
    {
        let Some(cluster) = testing::cluster(
            "a_taken_message_is_hidden_from_other_hosts_until_its_hold_ends_and_a_late_sender_is_fenced",
        ) else {
            return;
        };
        let config = cluster.schema();
        let open = || {
            PostgresJournal::open(
                PostgresTarget::from_config(config.clone()),
                Durability::Full,
            )
            .unwrap()
        };
        let (a, b) = (open(), open());
        a.prepare_outbox().unwrap();
        b.prepare_outbox().unwrap();
        let mut client = config.connect(postgres::NoTls).unwrap();
        enqueue(&mut client, "k1", 0);

        let first = a.take_message(10, 1_000, &[]).unwrap().unwrap();
        // The other host finds nothing while the first holds it.
        assert!(b.take_message(20, 1_020, &[]).unwrap().is_none());
        // The hold ended (the first host died mid-send): the other takes it, under
        // the same key, as the second attempt.
        let second = b.take_message(1_000, 2_000, &[]).unwrap().unwrap();
        assert_eq!((first.attempt, second.attempt), (1, 2));
        assert_eq!(first.effect_key, second.effect_key);
        // The late first sender's retry changes nothing; the second's delivery stands.
        let late = Settle::RetryLater {
            status: None,
            error: "late",
            next_attempt_at: 5,
        };
        a.settle_message(&first, late, 1_100).unwrap();
        let shown = a.outbox_messages().unwrap();
        assert_eq!(
            (shown[0].state.as_str(), shown[0].last_error.as_deref()),
            ("pending", None)
        );
        let delivered = Settle::Delivered {
            status: 200,
            response: "{}",
        };
        b.settle_message(&second, delivered, 1_200).unwrap();
        let shown = b.outbox_messages().unwrap();
        assert_eq!(
            (
                shown[0].state.as_str(),
                shown[0].attempts,
                shown[0].last_status
            ),
            ("delivered", 2, Some(200))
        );
        // Delivered: nobody takes it again, however late.
        assert!(a.take_message(9_999_999, 0, &[]).unwrap().is_none());
        // The opposite: a second message is taken by whoever asks, and a pass skips
        // what it took already.
        enqueue(&mut client, "k2", 0);
        let other = a.take_message(3_000, 3_000, &[]).unwrap().unwrap();
        assert_eq!(other.effect_key, "k2");
        assert!(a.take_message(3_000, 3_000, &[other.id]).unwrap().is_none());
    }
}
