//! Browser sessions of the console: opened with a token, kept on the server, each
//! with a CSRF token of its own, ending at a time read from the injected clock.
//! A session remembers the digest of the token that opened it, so the console can
//! refuse it as soon as that token is revoked or its role changes (see
//! `Console::visitor`).
//!
//! One principal cannot crowd out another: each keeps at most
//! [`MAX_SESSIONS_PER_PRINCIPAL`] sessions (its next login closes its own oldest,
//! never anyone else's), and its logins are rate-limited ([`LOGIN_BURST`], then one
//! every [`LOGIN_EVERY_MS`]). Logins with an unknown token share one rate limit of
//! their own ([`FAILED_BURST`], then one every [`FAILED_EVERY_MS`]): past it they are
//! answered 429 and not logged one by one.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::auth::tokens::{Holder, Role, TokenDigest};

/// How long a session lasts from its login: eight hours.
pub const DEFAULT_TTL_MS: i64 = 8 * 3600 * 1000;

/// The most sessions one principal keeps at once (browsers and tabs of one
/// person); its next login closes its own session that ends soonest.
pub(crate) const MAX_SESSIONS_PER_PRINCIPAL: usize = 16;

/// The most sessions kept at once. Reached only with more than
/// `MAX_SESSIONS / MAX_SESSIONS_PER_PRINCIPAL` principals logged in at their cap:
/// then a principal without a session is refused rather than anyone logged out.
const MAX_SESSIONS: usize = 4096;

/// Logins one principal may make at once.
pub(crate) const LOGIN_BURST: i64 = 10;

/// After a burst, a principal gets one more login this often (ten a minute).
pub(crate) const LOGIN_EVERY_MS: i64 = 6_000;

/// Logins with an unknown token answered 401 at once, whoever sends them.
pub(crate) const FAILED_BURST: i64 = 30;

/// After that burst, one more unknown token is answered 401 this often; the rest get
/// 429 (a token has 256 random bits: this bounds the log, not a guess).
pub(crate) const FAILED_EVERY_MS: i64 = 1_000;

/// One browser's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrowserSession {
    /// The principal of the token it was opened with (who the audit trail names).
    pub principal: String,
    /// The token's role (when the session is used: the role the file gives the
    /// token now).
    pub role: Role,
    /// The digest of the token it was opened with (none for a bearer token's
    /// request, which is checked as it comes).
    pub token: Option<TokenDigest>,
    /// What every action form must carry back.
    pub csrf: String,
    /// When it ends (ms since the epoch).
    pub expires_at: i64,
}

/// Why no session was opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OpenRefused {
    /// The principal logged in too often; it may again in `retry_after_ms`.
    #[error("too many logins as {principal}: try again in {} s", seconds_up(*retry_after_ms))]
    Throttled {
        /// Who.
        principal: String,
        /// How long until the next login is taken.
        retry_after_ms: i64,
    },
    /// As many sessions are open as the console keeps, none of them this
    /// principal's.
    #[error("the console has as many sessions open as it keeps ({MAX_SESSIONS}); try again later")]
    Full,
    /// The system's randomness failed.
    #[error("the server could not draw a random session id")]
    Random,
}

/// `ms` in whole seconds, rounded up (what a person is told to wait, and
/// `Retry-After`).
pub(crate) fn seconds_up(ms: i64) -> i64 {
    ms.max(0).saturating_add(999) / 1000
}

/// A rate as GCRA (a token bucket kept as one number per bucket): `burst` at once,
/// then one every `every_ms`.
#[derive(Debug, Clone, Copy)]
struct Rate {
    burst: i64,
    every_ms: i64,
}

impl Rate {
    /// Takes one from the bucket whose theoretical arrival time is `tat` (the time it
    /// is full again; `i64::MIN` for a new one), at `now`; `Err` is how long until
    /// one can be taken.
    fn take(self, tat: &mut i64, now: i64) -> Result<(), i64> {
        let from = (*tat).max(now);
        let wait = from - now - (self.burst - 1) * self.every_ms;
        if wait > 0 {
            return Err(wait);
        }
        *tat = from + self.every_ms;
        Ok(())
    }
}

const PER_PRINCIPAL: Rate = Rate {
    burst: LOGIN_BURST,
    every_ms: LOGIN_EVERY_MS,
};

const FAILED: Rate = Rate {
    burst: FAILED_BURST,
    every_ms: FAILED_EVERY_MS,
};

/// What the lock guards.
#[derive(Debug)]
struct State {
    /// The sessions open now, by their secret id (the cookie's value).
    open: HashMap<String, BrowserSession>,
    /// Each principal's login bucket (when it is full again). Keyed only by
    /// principals of valid tokens, so bounded by the tokens file; full ones are
    /// dropped.
    logins: HashMap<String, i64>,
    /// The bucket of logins with an unknown token.
    failed: i64,
}

/// The sessions open now, and the logins' rate limits.
#[derive(Debug)]
pub(crate) struct BrowserSessions {
    ttl_ms: i64,
    state: Mutex<State>,
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
            state: Mutex::new(State {
                open: HashMap::new(),
                logins: HashMap::new(),
                failed: i64::MIN,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session for `holder` of the token of digest `token` at `now`: its id
    /// and the session. Refused past the principal's login rate, or when the console
    /// is full of other principals' sessions; past the principal's own cap, its
    /// session that ends soonest is closed.
    pub fn open(
        &self,
        holder: &Holder,
        token: TokenDigest,
        now: i64,
    ) -> Result<(String, BrowserSession), OpenRefused> {
        let principal = &holder.name;
        let mut state = self.lock();
        state.logins.retain(|_, tat| *tat > now);
        let tat = state.logins.entry(principal.clone()).or_insert(i64::MIN);
        PER_PRINCIPAL
            .take(tat, now)
            .map_err(|retry_after_ms| OpenRefused::Throttled {
                principal: principal.clone(),
                retry_after_ms,
            })?;
        let id = secret().ok_or(OpenRefused::Random)?;
        let session = BrowserSession {
            principal: principal.clone(),
            role: holder.role,
            token: Some(token),
            csrf: secret().ok_or(OpenRefused::Random)?,
            expires_at: now.saturating_add(self.ttl_ms),
        };
        let open = &mut state.open;
        open.retain(|_, s| s.expires_at > now);
        let own: Vec<(&String, i64)> = open
            .iter()
            .filter(|(_, s)| s.principal == *principal)
            .map(|(id, s)| (id, s.expires_at))
            .collect();
        // Only ever the principal's own session makes room for it.
        let full = own.len() >= MAX_SESSIONS_PER_PRINCIPAL || open.len() >= MAX_SESSIONS;
        if full {
            let Some(oldest) = own
                .iter()
                .min_by_key(|(_, ends)| *ends)
                .map(|(id, _)| (*id).clone())
            else {
                return Err(OpenRefused::Full);
            };
            open.remove(&oldest);
            tracing::info!(%principal, "a console login closed the same principal's oldest session");
        }
        open.insert(id.clone(), session.clone());
        Ok((id, session))
    }

    /// Whether a login with an unknown token at `now` is within the shared rate of
    /// failures (answered 401) or past it (429).
    pub fn may_fail(&self, now: i64) -> bool {
        FAILED.take(&mut self.lock().failed, now).is_ok()
    }

    /// The session `id` names, if it is open at `now` (an ended one is removed).
    pub fn get(&self, id: &str, now: i64) -> Option<BrowserSession> {
        let open = &mut self.lock().open;
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
        self.lock().open.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(name: &str, role: Role) -> Holder {
        Holder {
            name: name.to_owned(),
            role,
        }
    }

    #[test]
    fn a_session_lasts_until_its_ttl_and_ids_and_csrf_tokens_differ() {
        let sessions = BrowserSessions::new(1000);
        let ops = holder("ops", Role::Operator);
        let eve = holder("eve", Role::Viewer);
        let (a, first) = sessions.open(&ops, TokenDigest::of("a"), 5000).unwrap();
        let (b, second) = sessions.open(&eve, TokenDigest::of("b"), 5000).unwrap();
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

    #[test]
    fn a_flooding_principal_closes_only_its_own_sessions_and_is_rate_limited() {
        // Long enough for the flood, at the rate it is let in, to outlast no session.
        let ttl = 100 * 24 * 3_600_000;
        let sessions = BrowserSessions::new(ttl);
        let ops = holder("ops", Role::Operator);
        let eve = holder("eve", Role::Viewer);
        let (operator, _) = sessions.open(&ops, TokenDigest::of("o"), 0).unwrap();
        // The viewer logs in as fast as it is let, well past the global cap.
        let mut now = 1;
        let mut eves = Vec::new();
        let mut throttled = 0;
        while eves.len() < MAX_SESSIONS + 10 {
            match sessions.open(&eve, TokenDigest::of("e"), now) {
                Ok((id, _)) => eves.push(id),
                Err(OpenRefused::Throttled { retry_after_ms, .. }) => {
                    assert!(retry_after_ms > 0 && retry_after_ms <= LOGIN_EVERY_MS);
                    throttled += 1;
                    now += retry_after_ms;
                }
                Err(e) => panic!("{e}"),
            }
            assert!(now < ttl, "the sessions outlive the flood");
        }
        assert!(throttled > 0, "rate-limited");
        assert!(
            sessions.get(&operator, now).is_some(),
            "the operator's session outlived the viewer's flood"
        );
        let kept: Vec<_> = eves
            .iter()
            .filter(|id| sessions.get(id, now).is_some())
            .collect();
        assert_eq!(kept.len(), MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(
            kept.first().copied(),
            eves.get(eves.len() - MAX_SESSIONS_PER_PRINCIPAL),
            "the newest ones are kept"
        );
    }

    #[test]
    fn logins_past_the_burst_wait_for_the_rate() {
        let sessions = BrowserSessions::new(3_600_000);
        let ops = holder("ops", Role::Operator);
        for _ in 0..LOGIN_BURST {
            sessions.open(&ops, TokenDigest::of("o"), 0).unwrap();
        }
        let refused = sessions.open(&ops, TokenDigest::of("o"), 0).unwrap_err();
        assert_eq!(
            refused,
            OpenRefused::Throttled {
                principal: "ops".into(),
                retry_after_ms: LOGIN_EVERY_MS
            }
        );
        assert!(
            refused.to_string().contains("try again in 6 s"),
            "{refused}"
        );
        // Another principal is not held up by it.
        sessions
            .open(&holder("eve", Role::Viewer), TokenDigest::of("e"), 0)
            .unwrap();
        assert!(
            sessions
                .open(&ops, TokenDigest::of("o"), LOGIN_EVERY_MS - 1)
                .is_err()
        );
        sessions
            .open(&ops, TokenDigest::of("o"), LOGIN_EVERY_MS)
            .unwrap();

        let failures = (0..FAILED_BURST + 1)
            .filter(|_| sessions.may_fail(0))
            .count();
        assert_eq!(failures as i64, FAILED_BURST, "then 429");
        assert!(sessions.may_fail(FAILED_EVERY_MS));
    }
}
