//! `Mcp-Session-Id` for the revisions that negotiate through `initialize`: which
//! era each session speaks, and whose it is. A session is bound to the principal
//! that opened it; another principal presenting its id is told it does not exist.
//!
//! The table is bounded: opening one more session than the cap forgets the one used
//! longest ago, whose client then gets 404 and opens a new session, as the transport
//! asks of it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};

use crate::mcp::session::Era;

struct Entry {
    principal: String,
    era: Era,
    used: u64,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    clock: u64,
}

/// The open sessions.
pub(crate) struct Sessions {
    table: Mutex<Table>,
    cap: usize,
}

impl Sessions {
    /// An empty table holding at most `cap` sessions.
    pub fn new(cap: usize) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session of `principal` speaking `era`; its id, or `None` if the
    /// operating system's randomness failed.
    pub fn open(&self, principal: &str, era: Era) -> Option<String> {
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).ok()?;
        let id = secret.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        let mut table = self.lock();
        if table.entries.len() >= self.cap
            && let Some(oldest) = table
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| id.clone())
        {
            tracing::info!(session = %oldest, "session table full; forgetting the least recently used session");
            table.entries.remove(&oldest);
        }
        table.clock += 1;
        let used = table.clock;
        table.entries.insert(
            id.clone(),
            Entry {
                principal: principal.to_owned(),
                era,
                used,
            },
        );
        Some(id)
    }

    /// The era of session `id` if it is open and `principal`'s.
    pub fn era(&self, id: &str, principal: &str) -> Option<Era> {
        let mut table = self.lock();
        table.clock += 1;
        let now = table.clock;
        let entry = table.entries.get_mut(id)?;
        if entry.principal != principal {
            return None;
        }
        entry.used = now;
        Some(entry.era)
    }

    /// Closes session `id` if it is open and `principal`'s; whether it was.
    pub fn close(&self, id: &str, principal: &str) -> bool {
        let mut table = self.lock();
        if table
            .entries
            .get(id)
            .is_some_and(|e| e.principal == principal)
        {
            table.entries.remove(id);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_its_principals_alone_and_the_least_recently_used_goes_first() {
        let sessions = Sessions::new(2);
        let a = sessions
            .open("alice", Era::Handshake("2025-11-25"))
            .unwrap();
        assert_eq!(
            sessions.era(&a, "alice"),
            Some(Era::Handshake("2025-11-25"))
        );
        assert_eq!(sessions.era(&a, "bob"), None, "not bob's");
        assert!(!sessions.close(&a, "bob"));
        let b = sessions.open("bob", Era::Handshake("2025-06-18")).unwrap();
        assert_ne!(a, b);
        sessions.era(&a, "alice");
        let c = sessions
            .open("carol", Era::Handshake("2025-06-18"))
            .unwrap();
        assert_eq!(sessions.era(&b, "bob"), None, "bob's was used longest ago");
        assert!(sessions.era(&a, "alice").is_some());
        assert!(sessions.close(&c, "carol"));
        assert_eq!(sessions.era(&c, "carol"), None);
    }
}
