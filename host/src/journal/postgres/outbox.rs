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

    fn take_message(&self, _now: i64, hold_ms: i64, skip: &[i64]) -> Result<Option<Taken>> {
        let row = self.single(|client| {
            client.query_opt(
                concat!(
                    "WITH clock AS (SELECT ",
                    db_now!(),
                    " AS now)
                     UPDATE outbox SET attempts = attempts + 1,
                            next_attempt_at = (SELECT now FROM clock) + $1,
                            updated_at = (SELECT now FROM clock)
                      WHERE id = (SELECT id FROM outbox
                                   WHERE state = 'pending'
                                     AND next_attempt_at <= (SELECT now FROM clock)
                                     AND NOT (id = ANY($2))
                                   ORDER BY next_attempt_at, id LIMIT 1
                                   FOR UPDATE SKIP LOCKED)
                  RETURNING id, effect_key, method, url, headers, body, attempts, tool"
                ),
                &[&hold_ms, &skip],
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

    fn settle_message(&self, taken: &Taken, settle: Settle<'_>, _now: i64) -> Result<()> {
        let c = settle.columns();
        let attempt = i32::try_from(taken.attempt).unwrap_or(i32::MAX);
        self.single(|client| {
            client.c.execute(
                &settle_sql('$', db_now!()),
                &[
                    &taken.id,
                    &c.state,
                    &c.status,
                    &c.error,
                    &c.response,
                    &c.retry_in_ms,
                    &attempt,
                ],
            )
        })?;
        Ok(())
    }

    fn outbox_messages(&self) -> Result<Vec<OutboxMessage>> {
        let rows = self.read(|client| {
            client.c.query(
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
    use crate::clock::ManualClock;
    use crate::journal::Durability;
    use std::sync::Arc;

    const FIVE_MINUTES: i64 = 5 * 60 * 1000;

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
    fn a_taken_message_is_hidden_from_other_hosts_until_its_hold_ends_on_the_database_clock_and_a_late_sender_is_fenced()
     {
        let Some(cluster) = testing::cluster("a_taken_message_is_hidden_on_the_database_clock")
        else {
            return;
        };
        let config = cluster.schema();
        // One database clock both hosts read; their own clocks disagree by minutes.
        let database = Arc::new(ManualClock::new(0));
        let open = || {
            PostgresJournal::open(
                PostgresTarget::from_config(config.clone()),
                Durability::Full,
            )
            .unwrap()
            .with_database_clock(database.clone())
        };
        let (a, b) = (open(), open());
        a.prepare_outbox().unwrap();
        b.prepare_outbox().unwrap();
        let mut client = config.connect(postgres::NoTls).unwrap();
        enqueue(&mut client, "k1", 0);
        let (a_now, b_now) = (|| 10, || 10 + FIVE_MINUTES);

        database.set(10);
        let first = a.take_message(a_now(), 1_000, &[]).unwrap().unwrap();
        // The other host finds nothing while the first holds it, though its own
        // clock is five minutes past the hold.
        database.set(20);
        assert!(b.take_message(b_now(), 1_000, &[]).unwrap().is_none());
        // The hold ended on the database's clock (the first host died mid-send): the
        // other takes it, under the same key, as the second attempt.
        database.set(1_010);
        let second = b.take_message(b_now(), 1_000, &[]).unwrap().unwrap();
        assert_eq!((first.attempt, second.attempt), (1, 2));
        assert_eq!(first.effect_key, second.effect_key);
        // The late first sender's retry changes nothing; the second's delivery stands.
        let late = Settle::RetryLater {
            status: None,
            error: "late",
            retry_in_ms: 5,
        };
        a.settle_message(&first, late, a_now()).unwrap();
        let shown = a.outbox_messages().unwrap();
        assert_eq!(
            (shown[0].state.as_str(), shown[0].last_error.as_deref()),
            ("pending", None)
        );
        let delivered = Settle::Delivered {
            status: 200,
            response: "{}",
        };
        b.settle_message(&second, delivered, b_now()).unwrap();
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
        database.set(9_999_999);
        assert!(a.take_message(a_now(), 0, &[]).unwrap().is_none());
        // The opposite: a second message is taken by whoever asks, and a pass skips
        // what it took already.
        enqueue(&mut client, "k2", 0);
        let other = a.take_message(a_now(), 3_000, &[]).unwrap().unwrap();
        assert_eq!(other.effect_key, "k2");
        assert!(
            a.take_message(a_now(), 3_000, &[other.id])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_retry_is_due_after_its_wait_on_the_database_clock_whatever_the_settling_host_reads() {
        let Some(cluster) = testing::cluster("a_retry_is_due_on_the_database_clock") else {
            return;
        };
        let config = cluster.schema();
        let database = Arc::new(ManualClock::new(0));
        let journal = PostgresJournal::open(
            PostgresTarget::from_config(config.clone()),
            Durability::Full,
        )
        .unwrap()
        .with_database_clock(database.clone());
        journal.prepare_outbox().unwrap();
        let mut client = config.connect(postgres::NoTls).unwrap();
        enqueue(&mut client, "k1", 0);
        database.set(100);
        let taken = journal.take_message(0, 1_000, &[]).unwrap().unwrap();
        // A host whose clock is five minutes behind settles a retry in 50 ms.
        let retry = Settle::RetryLater {
            status: Some(503),
            error: "the receiver answered 503",
            retry_in_ms: 50,
        };
        journal
            .settle_message(&taken, retry, 100 - FIVE_MINUTES)
            .unwrap();
        // Not due before the wait has passed on the database's clock...
        database.set(149);
        assert!(journal.take_message(0, 1_000, &[]).unwrap().is_none());
        // ...and due once it has, not five minutes early or late.
        database.set(150);
        let again = journal.take_message(0, 1_000, &[]).unwrap().unwrap();
        assert_eq!((again.effect_key.as_str(), again.attempt), ("k1", 2));
    }
}
