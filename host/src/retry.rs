//! How often, and how patiently, the effect guard retries an effect whose outcome is
//! unknown.

use std::time::Duration;

/// The retry budget for one effect whose outcome is unknown (a timeout or a lost
/// response). Every attempt carries the same stored key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least 1.
    pub max_attempts: u32,
    /// The pause before the second attempt.
    pub initial_backoff: Duration,
    /// The longest pause between two attempts.
    pub max_backoff: Duration,
}

impl RetryPolicy {
    /// `attempts` attempts with no pause between them, as tests use.
    pub fn immediate(attempts: u32) -> Self {
        Self {
            max_attempts: attempts.max(1),
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
        }
    }

    /// The pause before attempt number `attempt` (1-based; the first has none):
    /// doubles from `initial_backoff` up to `max_backoff`.
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let doublings = (attempt - 2).min(20);
        self.initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff)
    }
}

impl Default for RetryPolicy {
    /// Three attempts, 100 ms then 200 ms apart, never more than 2 s.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
        };
        let pauses: Vec<u128> = (1..=5).map(|a| policy.backoff_before(a).as_millis()).collect();
        assert_eq!(pauses, vec![0, 100, 200, 350, 350]);
    }

    #[test]
    fn immediate_never_pauses_and_keeps_one_attempt() {
        let policy = RetryPolicy::immediate(0);
        assert_eq!(policy.max_attempts, 1);
        assert_eq!(policy.backoff_before(7), Duration::ZERO);
    }
}
