//! Browser sessions of the console: opened with a token, kept on the server, each
//! with a CSRF token of its own, ending at a time read from the injected clock.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::auth::tokens::Role;

/// How long a session lasts from its login: eight hours.
pub const DEFAULT_TTL_MS: i64 = 8 * 3600 * 1000;

/// The most sessions kept at once; past it, the one that ends soonest goes.
const MAX_SESSIONS: usize = 4096;

/// One browser's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrowserSession {
    /// The principal of the token it was opened with (who the audit trail names).
    pub principal: String,
    /// The token's role.
    pub role: Role,
    /// What every action form must carry back.
    pub csrf: String,
    /// When it ends (ms since the epoch).
    pub expires_at: i64,
}

/// The sessions open now, by their secret id (the cookie's value).
#[derive(Debug)]
pub(crate) struct BrowserSessions {
    ttl_ms: i64,
    open: Mutex<HashMap<String, BrowserSession>>,
}

/// 32 random bytes in hex; `None` when the system's randomness fails.
fn secret() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

impl BrowserSessions {
    /// Sessions lasting `ttl_ms` each.
    pub fn new(ttl_ms: i64) -> Self {
        Self {
            ttl_ms,
            open: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BrowserSession>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session for `principal` with `role` at `now`: its id and the session.
    pub fn open(&self, principal: &str, role: Role, now: i64) -> Option<(String, BrowserSession)> {
        let id = secret()?;
        let session = BrowserSession {
            principal: principal.to_owned(),
            role,
            csrf: secret()?,
            expires_at: now.saturating_add(self.ttl_ms),
        };
        let mut open = self.lock();
        open.retain(|_, s| s.expires_at > now);
        if open.len() >= MAX_SESSIONS
            && let Some(first) = open
                .iter()
                .min_by_key(|(_, s)| s.expires_at)
                .map(|(id, _)| id.clone())
        {
            open.remove(&first);
        }
        open.insert(id.clone(), session.clone());
        Some((id, session))
    }

    /// The session `id` names, if it is open at `now` (an ended one is removed).
    pub fn get(&self, id: &str, now: i64) -> Option<BrowserSession> {
        let mut open = self.lock();
        match open.get(id) {
            Some(s) if s.expires_at > now => Some(s.clone()),
            Some(_) => {
                open.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends the session `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lasts_until_its_ttl_and_ids_and_csrf_tokens_differ() {
        let sessions = BrowserSessions::new(1000);
        let (a, first) = sessions.open("ops", Role::Operator, 5000).unwrap();
        let (b, second) = sessions.open("eve", Role::Viewer, 5000).unwrap();
        assert_ne!(a, b);
        assert_ne!(first.csrf, second.csrf);
        assert_eq!(
            sessions.get(&a, 5999).map(|s| s.principal),
            Some("ops".into())
        );
        assert_eq!(sessions.get(&a, 6000), None, "ended at its ttl");
        assert_eq!(sessions.get(&a, 5000), None, "and removed");
        sessions.close(&b);
        assert_eq!(sessions.get(&b, 5000), None);
        assert_eq!(sessions.get("guess", 5000), None);
    }
}
