//! `Mcp-Session-Id` for the revisions that negotiate through `initialize`: which
//! era each session speaks, and whose it is. A session is bound to the principal
//! that opened it; another principal presenting its id is told it does not exist.
//!
//! The table is bounded per principal and in all: a principal at its cap is refused
//! a new session (429) until it ends one (`DELETE`) or one expires, and so is
//! everyone when the table is full (503). No principal's sessions make room for
//! another's. A session unused for the idle bound expires; its client then gets 404
//! and opens a new one, as the transport asks of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

#[allow(deprecated)] // SEP-2577 deprecates logging; revisions up to 2025-11-25 have it.
use rmcp::model::LoggingLevel;

use crate::mcp::elicit::{Declared, Pending};
use crate::mcp::session::Era;
use crate::mcp::surface::Subscribed;
use crate::serving::sse::{EventLog, ReplayCaps};

#[allow(deprecated)]
struct Entry {
    principal: String,
    era: Era,
    log_level: Option<LoggingLevel>,
    /// When it was last used, on the host's clock (ms).
    used: i64,
    /// The events of its POST streams, for `Last-Event-ID`; ends with the session.
    events: Arc<EventLog>,
    /// What its client declared (`elicitation`, `sampling`, `roots`) when it
    /// initialized.
    declared: Declared,
    /// Its calls' questions waiting for the client's answers; closed with the
    /// session.
    pending: Arc<Pending>,
    /// The upstreams' resources it subscribed to.
    subscribed: Arc<Subscribed>,
}

/// What a session's request needs of its entry.
#[allow(deprecated)]
pub(crate) struct Found {
    /// The revision it speaks.
    pub era: Era,
    /// Its `logging/setLevel`, if set.
    pub log_level: Option<LoggingLevel>,
    /// The record of its streams' events.
    pub events: Arc<EventLog>,
    /// What its client declared, so its calls' tools may ask it that.
    pub declared: Declared,
    /// Its calls' questions waiting for the client's answers.
    pub pending: Arc<Pending>,
    /// The upstreams' resources it subscribed to.
    pub subscribed: Arc<Subscribed>,
}

/// Why no session was opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The principal holds its cap of sessions.
    #[error(
        "{principal} has {cap} open sessions, the most allowed: end one (DELETE /mcp) or wait until one is idle for {idle_secs} s"
    )]
    PrincipalFull {
        /// Who.
        principal: String,
        /// The cap.
        cap: usize,
        /// The idle bound, in seconds.
        idle_secs: u64,
    },
    /// The table holds its cap of sessions.
    #[error("the server holds {0} open sessions, the most it keeps: retry later")]
    ServerFull(usize),
    /// The operating system's randomness failed.
    #[error("cannot draw a session id")]
    Random,
}

/// The open sessions.
pub(crate) struct Sessions {
    table: Mutex<HashMap<String, Entry>>,
    /// The subscriptions of the sessions that expired, until [`Sessions::sweep`]
    /// hands them over to be ended.
    gone: Mutex<Vec<Arc<Subscribed>>>,
    cap: usize,
    per_principal: usize,
    idle: Duration,
    replay: ReplayCaps,
}

impl Sessions {
    /// An empty table holding at most `cap` sessions, `per_principal` of one
    /// principal, each expiring after `idle` unused and keeping its events within
    /// `replay`.
    pub fn new(cap: usize, per_principal: usize, idle: Duration, replay: ReplayCaps) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            gone: Mutex::default(),
            cap: cap.max(1),
            per_principal: per_principal.max(1),
            idle,
            replay,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expired(&self, entry: &Entry, now: i64) -> bool {
        now.saturating_sub(entry.used) >= crate::clock::millis(self.idle)
    }

    /// `entry` expired: its calls waiting for an answer end without one, and its
    /// subscriptions wait for [`Sessions::sweep`] to be ended.
    fn expire(&self, entry: &Entry) {
        entry.pending.close();
        self.gone
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&entry.subscribed));
    }

    /// Removes every session expired at `now` (ms on the host's clock); the
    /// subscriptions of those and of the sessions that expired since the last sweep,
    /// for the caller to end (unsubscribing upstream waits for the upstreams).
    pub fn sweep(&self, now: i64) -> Vec<Arc<Subscribed>> {
        self.lock().retain(|_, e| {
            let expired = self.expired(e, now);
            if expired {
                self.expire(e);
            }
            !expired
        });
        std::mem::take(&mut *self.gone.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Opens a session of `principal` speaking `era` at `now` (ms on the host's
    /// clock); its id.
    pub fn open(&self, principal: &str, era: Era, now: i64) -> Result<String, Refused> {
        let id = random_hex::<16>()?;
        // Names the session's event ids (see `replay`).
        let tag = random_hex::<8>()?;
        let mut table = self.lock();
        let mine = table.values().filter(|e| e.principal == principal).count();
        if mine >= self.per_principal || table.len() >= self.cap {
            table.retain(|_, e| {
                let expired = self.expired(e, now);
                if expired {
                    self.expire(e);
                }
                !expired
            });
        }
        if table.values().filter(|e| e.principal == principal).count() >= self.per_principal {
            return Err(Refused::PrincipalFull {
                principal: principal.to_owned(),
                cap: self.per_principal,
                idle_secs: self.idle.as_secs(),
            });
        }
        if table.len() >= self.cap {
            return Err(Refused::ServerFull(self.cap));
        }
        table.insert(
            id.clone(),
            Entry {
                principal: principal.to_owned(),
                era,
                log_level: None,
                used: now,
                events: Arc::new(EventLog::new(tag, self.replay)),
                declared: Declared::default(),
                pending: Arc::default(),
                subscribed: Arc::default(),
            },
        );
        Ok(id)
    }

    /// The era of session `id` if it is open, unexpired at `now`, and `principal`'s.
    #[cfg(test)]
    pub fn era(&self, id: &str, principal: &str, now: i64) -> Option<Era> {
        self.lookup(id, principal, now).map(|found| found.era)
    }

    /// Session `id` if it is open, unexpired at `now` (ms on the host's clock), and
    /// `principal`'s.
    pub fn lookup(&self, id: &str, principal: &str, now: i64) -> Option<Found> {
        let mut table = self.lock();
        let entry = table.get(id)?;
        if entry.principal != principal {
            return None;
        }
        if self.expired(entry, now) {
            if let Some(gone) = table.remove(id) {
                self.expire(&gone);
            }
            return None;
        }
        let entry = table.get_mut(id)?;
        entry.used = now;
        Some(Found {
            era: entry.era,
            log_level: entry.log_level,
            events: Arc::clone(&entry.events),
            declared: entry.declared,
            pending: Arc::clone(&entry.pending),
            subscribed: Arc::clone(&entry.subscribed),
        })
    }

    /// The open sessions that subscribed to `uri` (an upstream's resource, the
    /// host's URI).
    pub fn subscribers(&self, uri: &str) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.subscribed.holds(uri))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Sets the log level of session `id` (`logging/setLevel`), if it is open and
    /// `principal`'s.
    #[allow(deprecated)]
    pub fn set_log_level(&self, id: &str, principal: &str, level: Option<LoggingLevel>) {
        if let Some(entry) = self.lock().get_mut(id)
            && entry.principal == principal
        {
            entry.log_level = level;
        }
    }

    /// Records what the client of session `id` declared (`elicitation`,
    /// `sampling`, `roots`), if the session is open and `principal`'s.
    pub fn set_declared(&self, id: &str, principal: &str, declared: Declared) {
        if let Some(entry) = self.lock().get_mut(id)
            && entry.principal == principal
        {
            entry.declared = declared;
        }
    }

    /// Closes session `id` if it is open and `principal`'s; its subscriptions, if
    /// it was (to end them). Its calls waiting for an answer end without one.
    pub fn close(&self, id: &str, principal: &str) -> Option<Arc<Subscribed>> {
        let mut table = self.lock();
        if table.get(id).is_some_and(|e| e.principal == principal) {
            let gone = table.remove(id)?;
            gone.pending.close();
            Some(gone.subscribed)
        } else {
            None
        }
    }
}

/// `N` fresh random bytes, as lowercase hex.
fn random_hex<const N: usize>() -> Result<String, Refused> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|_| Refused::Random)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::mcp::protocol::ProtocolVersion;

    const V: Era = Era::Handshake(&ProtocolVersion::V_2025_11_25);

    fn ms(d: Duration) -> i64 {
        crate::clock::millis(d)
    }

    #[test]
    fn a_session_is_its_principals_alone_and_ends_when_closed() {
        let sessions = Sessions::new(8, 8, Duration::from_secs(60), ReplayCaps::default());
        let now = 0;
        let a = sessions
            .open("alice", Era::Handshake(&ProtocolVersion::V_2025_06_18), now)
            .unwrap();
        assert_eq!(
            sessions.era(&a, "alice", now),
            Some(Era::Handshake(&ProtocolVersion::V_2025_06_18))
        );
        assert_eq!(sessions.era(&a, "bob", now), None, "not bob's");
        assert!(sessions.close(&a, "bob").is_none());
        let b = sessions.open("bob", V, now).unwrap();
        assert_ne!(a, b);
        assert!(sessions.close(&a, "alice").is_some());
        assert_eq!(sessions.era(&a, "alice", now), None);
        assert!(sessions.era(&b, "bob", now).is_some());
    }

    /// Whether the client elicits is the session's, and its calls waiting for an
    /// answer end when it ends (closed, or expired).
    #[test]
    fn a_sessions_questions_end_with_it() {
        let idle = Duration::from_secs(60);
        let sessions = Sessions::new(8, 8, idle, ReplayCaps::default());
        let now = 0;
        let a = sessions.open("alice", V, now).unwrap();
        assert!(
            !sessions
                .lookup(&a, "alice", now)
                .unwrap()
                .declared
                .elicitation
        );
        let elicits = Declared {
            elicitation: true,
            ..Declared::default()
        };
        sessions.set_declared(&a, "bob", elicits);
        assert!(
            !sessions
                .lookup(&a, "alice", now)
                .unwrap()
                .declared
                .elicitation,
            "not bob's"
        );
        sessions.set_declared(&a, "alice", elicits);
        let found = sessions.lookup(&a, "alice", now).unwrap();
        assert!(found.declared.elicitation);
        assert!(!found.pending.is_closed());
        assert!(sessions.close(&a, "alice").is_some());
        assert!(found.pending.is_closed(), "closed with the session");
        let b = sessions.open("alice", V, now).unwrap();
        let waiting = sessions.lookup(&b, "alice", now).unwrap().pending;
        assert!(sessions.lookup(&b, "alice", now + ms(idle)).is_none());
        assert!(waiting.is_closed(), "closed when it expired");
    }

    #[test]
    fn a_principal_at_its_cap_is_refused_and_nobody_elses_session_makes_room() {
        let sessions = Sessions::new(3, 2, Duration::from_secs(60), ReplayCaps::default());
        let now = 0;
        let bob = sessions.open("bob", V, now).unwrap();
        let a1 = sessions.open("alice", V, now).unwrap();
        sessions.open("alice", V, now).unwrap();
        let full = sessions.open("alice", V, now).unwrap_err();
        assert!(
            matches!(full, Refused::PrincipalFull { cap: 2, .. }),
            "{full}"
        );
        assert!(
            full.to_string().contains("alice has 2 open sessions"),
            "{full}"
        );
        assert!(
            sessions.era(&bob, "bob", now).is_some(),
            "bob's session stays"
        );
        // The table is full (3): carol is refused too, and bob's session stays.
        assert_eq!(sessions.open("carol", V, now), Err(Refused::ServerFull(3)));
        assert!(sessions.era(&bob, "bob", now).is_some());
        // Alice ends one: she has room again.
        assert!(sessions.close(&a1, "alice").is_some());
        assert!(sessions.open("alice", V, now).is_ok());
    }

    #[test]
    fn an_idle_session_expires_and_frees_its_place_and_a_used_one_does_not() {
        let idle = Duration::from_secs(60);
        let sessions = Sessions::new(8, 2, idle, ReplayCaps::default());
        let t0 = 0;
        let old = sessions.open("alice", V, t0).unwrap();
        let used = sessions.open("alice", V, t0).unwrap();
        let t1 = t0 + ms(idle / 2);
        assert!(sessions.era(&used, "alice", t1).is_some());
        let t2 = t0 + ms(idle);
        assert_eq!(
            sessions.era(&old, "alice", t2),
            None,
            "idle for the bound: expired"
        );
        assert!(
            sessions.era(&used, "alice", t2).is_some(),
            "used at t1: alive"
        );
        assert!(
            sessions.open("alice", V, t2).is_ok(),
            "the expired one made room"
        );
        assert!(sessions.open("alice", V, t2).is_err(), "two alive: full");
    }

    /// A session that expires hands its subscriptions over to be ended (whether
    /// it expired found by a request, by a new session making room, or by a sweep),
    /// and a session still used keeps its own. Before, they were dropped with it:
    /// the upstream was never told.
    #[test]
    fn an_expired_sessions_subscriptions_are_handed_over_to_end_and_a_used_ones_are_kept() {
        let idle = Duration::from_secs(60);
        let sessions = Sessions::new(8, 8, idle, ReplayCaps::default());
        let subscribe = |id: &str, uri: &str| {
            let params: crate::mcp::protocol::Params =
                serde_json::from_value(serde_json::json!({ "uri": uri })).unwrap();
            let found = sessions.lookup(id, "alice", 0).unwrap();
            found.subscribed.note("resources/subscribe", &params);
        };
        let (a, b, c) = (
            sessions.open("alice", V, 0).unwrap(),
            sessions.open("alice", V, 0).unwrap(),
            sessions.open("alice", V, 0).unwrap(),
        );
        subscribe(&a, "justonce://u/x");
        subscribe(&b, "justonce://u/x");
        subscribe(&c, "justonce://u/y");
        assert!(sessions.sweep(ms(idle) - 1).is_empty(), "none expired yet");
        // b is used halfway; a and c are not.
        assert!(sessions.lookup(&b, "alice", ms(idle / 2)).is_some());
        // c expires found by a request, a by the sweep.
        assert!(sessions.lookup(&c, "alice", ms(idle)).is_none());
        let gone = sessions.sweep(ms(idle));
        let mut held: Vec<bool> = Vec::new();
        for uri in ["justonce://u/x", "justonce://u/y"] {
            held.push(gone.iter().any(|s| s.holds(uri)));
        }
        assert_eq!(gone.len(), 2, "a's and c's");
        assert_eq!(held, [true, true]);
        assert_eq!(sessions.subscribers("justonce://u/x"), vec![b]);
        assert!(sessions.subscribers("justonce://u/y").is_empty());
        assert!(sessions.sweep(ms(idle)).is_empty(), "handed over once");
    }
}
