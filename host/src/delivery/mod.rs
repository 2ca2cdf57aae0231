//! Delivery of the outbox: every pending message is sent with its effect key as the
//! idempotency key, a failure is retried later under the same key with backoff, and
//! the delivery is recorded. A receiver that deduplicates by key therefore records a
//! message once, even when a response is lost or the sender dies mid-request.
//!
//! The journal provides the queue (`journal/outbox.rs`). On SQLite one deliverer
//! sends from a journal at a time: a pass holds a lock file next to the database
//! (`<db>.deliver.lock`), which the operating system releases when the process dies,
//! so a restarted deliverer resumes at once. On PostgreSQL deliverers on several
//! hosts send at once, without a lock file: each message is taken with `SELECT …
//! FOR UPDATE SKIP LOCKED` and hidden from the others while it is sent (until its
//! hold ends, should its deliverer die). `justonce deliver` runs a pass;
//! [`Deliverer::spawn_loop`] runs passes in the background (for `serve`).

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::clock::{Clock, millis};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::http::{
    Client, HttpConfig, HttpResponse, Origin, Outbound, SendError, check_headers, parse_url,
};
use crate::journal::Journal;
use crate::journal::outbox::{Settle, Taken};

/// How patiently the deliverer retries a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPolicy {
    /// Attempts in all before a message is marked `failed`.
    pub max_attempts: u32,
    /// The wait before the second attempt; it doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// The most messages one pass sends.
    pub batch: u32,
    /// How long a message one deliverer took is hidden from the deliverers of other
    /// hosts (PostgreSQL), so that none sends it meanwhile; at least twice the HTTP
    /// timeout is used whatever this says. Should the deliverer die mid-send, another
    /// sends the message, under the same key, once the hold ends.
    pub hold: Duration,
}

impl Default for DeliveryPolicy {
    /// 12 attempts, 1 s doubling to 10 min apart (about 40 minutes in all);
    /// `Retry-After` honoured up to an hour; 100 messages a pass; a taken message
    /// hidden for 5 minutes.
    fn default() -> Self {
        Self {
            max_attempts: 12,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(600),
            max_retry_after: Duration::from_secs(3600),
            batch: 100,
            hold: Duration::from_secs(300),
        }
    }
}

impl DeliveryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn backoff_after(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let doublings = attempt.saturating_sub(1).min(20);
        let backoff = self
            .initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff);
        backoff.max(retry_after.unwrap_or_default().min(self.max_retry_after))
    }
}

/// What became of one message in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// The receiver answered 2xx; recorded as delivered.
    Delivered,
    /// No answer, or one that asks to retry: sent again later under the same key.
    Retrying,
    /// The receiver refused it definitively, or the attempts ran out.
    Failed,
}

/// One attempt at one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryAttempt {
    /// The message's id in the outbox.
    pub message_id: i64,
    /// The idempotency key it was sent with (its effect key).
    pub key: String,
    /// Where it went.
    pub url: String,
    /// Which attempt this was, from 1.
    pub attempt: u32,
    /// What became of it.
    pub outcome: DeliveryOutcome,
    /// The receiver's status, if it answered.
    pub status: Option<u16>,
    /// Why it did not succeed, if it did not.
    pub error: Option<String>,
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeliveryReport {
    /// Every attempt made, in order.
    pub attempts: Vec<DeliveryAttempt>,
}

impl DeliveryReport {
    /// How many attempts ended with `outcome`.
    pub fn count(&self, outcome: DeliveryOutcome) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.outcome == outcome)
            .count()
    }
}

/// Sends the outbox of one host's journal; see the module docs.
pub struct Deliverer {
    journal: Arc<dyn Journal>,
    clock: Arc<dyn Clock>,
    config: Arc<HttpConfig>,
    client: Client,
    policy: DeliveryPolicy,
    lock_file: Option<PathBuf>,
    in_process: Mutex<()>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("policy", &self.policy)
            .field("lock_file", &self.lock_file)
            .finish()
    }
}

struct PassLock<'a> {
    _in_process: MutexGuard<'a, ()>,
    _file: Option<File>,
}

impl Deliverer {
    /// A deliverer for `host`'s journal, with the host's HTTP config (key header
    /// names, timeout, response cap) and clock.
    pub fn new(host: &Host) -> Result<Self> {
        let journal = Arc::clone(host.journal_handle());
        journal.outbox().prepare_outbox()?;
        let lock_file = journal.outbox().pass_lock_file();
        let config = host.http_config_arc();
        Ok(Self {
            client: Client::new(Arc::clone(&config)),
            clock: Arc::clone(&host.shared().clock),
            journal,
            config,
            policy: DeliveryPolicy::default(),
            lock_file,
            in_process: Mutex::new(()),
        })
    }

    /// Uses `policy` instead of the default.
    pub fn policy(mut self, policy: DeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    fn lock(&self) -> Result<PassLock<'_>> {
        let in_process = self.in_process.lock().unwrap_or_else(|p| p.into_inner());
        let file = match &self.lock_file {
            None => None,
            Some(path) => {
                let fail = |e: std::io::Error| {
                    Error::Host(anyhow::anyhow!(
                        "cannot lock {} for delivery: {e}",
                        path.display()
                    ))
                };
                // Owner-only, as the database beside it: no one else gets to hold
                // (and so stall) this journal's delivery.
                let file = File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(fail)?;
                // Waits for another deliverer's pass to end; released by the OS if that
                // process dies.
                file.lock().map_err(fail)?;
                Some(file)
            }
        };
        Ok(PassLock {
            _in_process: in_process,
            _file: file,
        })
    }

    /// Sends every message that is due, once each, and records what happened. On
    /// SQLite, waits for another deliverer's pass on the same journal to finish first;
    /// on PostgreSQL, sends alongside the deliverers of other hosts, each message by
    /// one of them.
    pub fn run_once(&self) -> Result<DeliveryReport> {
        let _lock = self.lock()?;
        let outbox = self.journal.outbox();
        let hold = millis(
            self.policy
                .hold
                .max(self.config.timeout_duration().saturating_mul(2)),
        );
        let mut taken = Vec::new();
        let mut report = DeliveryReport::default();
        while taken.len() < usize::try_from(self.policy.batch).unwrap_or(usize::MAX) {
            let now = self.clock.now_ms();
            let Some(message) = outbox.take_message(now, hold, &taken)? else {
                break;
            };
            taken.push(message.id);
            let (outcome, status, error) = self.send(&message)?;
            report.attempts.push(DeliveryAttempt {
                message_id: message.id,
                key: message.effect_key,
                url: message.url,
                attempt: message.attempt,
                outcome,
                status,
                error,
            });
        }
        Ok(report)
    }

    /// Whether the receiver's status asks to come back (the same classification as
    /// the `http` provider's).
    fn asks_to_retry(&self, url: &str, response: &HttpResponse) -> bool {
        response.asks_to_retry(self.config.retry_statuses(url))
    }

    /// Checks a queued message again before it is sent: the row was checked when it
    /// was queued, but the configuration may have changed since (an origin taken off
    /// the tool's allowlist waits until it is back), and a row may have been written
    /// by other hands (a reserved header gives the message up).
    fn recheck(
        &self,
        message: &Taken,
        origin: &Origin,
        headers: &[(String, String)],
    ) -> std::result::Result<(), SendError> {
        self.config
            .check_allowed(&message.tool, origin)
            .map_err(SendError::Refused)?;
        let headers = headers.iter().map(|(n, v)| (n, v));
        check_headers(&self.config, &message.url, origin, headers).map_err(SendError::Invalid)
    }

    fn send(&self, message: &Taken) -> Result<(DeliveryOutcome, Option<u16>, Option<String>)> {
        // A message that cannot be sent as queued is given up, never sent without
        // what it was queued with.
        let answer = match (parse_url(&message.url), &message.headers) {
            (Err(reason), _) => Err(SendError::Invalid(reason)),
            (_, Err(reason)) => Err(SendError::Invalid(reason.clone())),
            (Ok(origin), Ok(headers)) => match self.recheck(message, &origin, headers) {
                Err(refused) => Err(refused),
                Ok(()) => {
                    let header = self.config.header_for(&origin).to_owned();
                    let outbound = Outbound {
                        tool: message.tool.clone(),
                        method: message.method.clone(),
                        url: message.url.clone(),
                        origin,
                        headers: headers.clone(),
                        body: message.body.clone(),
                    };
                    self.client
                        .send(&outbound, Some((&header, &message.effect_key)))
                }
            },
        };
        let now = self.clock.now_ms();
        let settle =
            |settle: Settle<'_>| self.journal.outbox().settle_message(message, settle, now);
        let failed = |status: Option<u16>,
                      error: String|
         -> Result<(DeliveryOutcome, Option<u16>, Option<String>)> {
            settle(Settle::Failed {
                status,
                error: &error,
            })?;
            Ok((DeliveryOutcome::Failed, status, Some(error)))
        };
        let (status, error, retry_after) = match answer {
            Ok(response) if response.is_success() => {
                settle(Settle::Delivered {
                    status: response.status,
                    response: &response.to_json().to_string(),
                })?;
                return Ok((DeliveryOutcome::Delivered, Some(response.status), None));
            }
            Ok(response) if !self.asks_to_retry(&message.url, &response) => {
                let error = format!(
                    "the receiver refused the message with status {}",
                    response.status
                );
                return failed(Some(response.status), error);
            }
            Ok(response) => (
                Some(response.status),
                format!("the receiver answered {}", response.status),
                response.retry_after(),
            ),
            Err(
                SendError::Unknown(reason)
                | SendError::NotSent(reason)
                | SendError::Refused(reason),
            ) => (None, reason, None),
            Err(SendError::Invalid(reason)) => return failed(None, reason),
        };
        if message.attempt >= self.policy.max_attempts {
            let error = format!("gave up after {} attempts: {error}", message.attempt);
            return failed(status, error);
        }
        let wait = self.policy.backoff_after(message.attempt, retry_after);
        settle(Settle::RetryLater {
            status,
            error: &error,
            retry_in_ms: millis(wait),
        })?;
        Ok((DeliveryOutcome::Retrying, status, Some(error)))
    }

    /// Runs a pass every `interval` on a background thread until the returned handle
    /// is stopped or dropped. A failing pass is logged and the loop goes on.
    pub fn spawn_loop(self: Arc<Self>, interval: Duration) -> Result<DeliveryLoop> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("justonce-deliver".into())
            .spawn(move || {
                loop {
                    match self.run_once() {
                        Ok(report) if !report.attempts.is_empty() => tracing::info!(
                            delivered = report.count(DeliveryOutcome::Delivered),
                            retrying = report.count(DeliveryOutcome::Retrying),
                            failed = report.count(DeliveryOutcome::Failed),
                            "outbox delivery pass"
                        ),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("outbox delivery pass failed: {e:#}"),
                    }
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|e| Error::Host(anyhow::anyhow!("cannot start the delivery loop: {e}")))?;
        Ok(DeliveryLoop {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// The handle of a background delivery loop; stopping or dropping it ends the loop
/// after the pass under way.
#[derive(Debug)]
pub struct DeliveryLoop {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl DeliveryLoop {
    /// Ends the loop and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for DeliveryLoop {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_yields_to_a_longer_retry_after() {
        let policy = DeliveryPolicy {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
            ..DeliveryPolicy::default()
        };
        let waits: Vec<u64> = (1..=5)
            .map(|a| policy.backoff_after(a, None).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(
            policy
                .backoff_after(1, Some(Duration::from_secs(30)))
                .as_secs(),
            30
        );
        assert_eq!(
            policy
                .backoff_after(1, Some(Duration::from_secs(999)))
                .as_secs(),
            60
        );
    }
}
