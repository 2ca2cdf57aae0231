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
    /// The longest wait a downstream's `Retry-After` is honoured for; a longer one
    /// is cut to this.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// `attempts` attempts with no pause between them, as tests use.
    pub fn immediate(attempts: u32) -> Self {
        Self {
            max_attempts: attempts.max(1),
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            max_retry_after: Duration::ZERO,
        }
    }

    /// Honours a downstream's `Retry-After` up to `bound` (the clock the host sleeps
    /// on decides whether that is a real wait).
    pub fn honouring_retry_after(mut self, bound: Duration) -> Self {
        self.max_retry_after = bound;
        self
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

    /// The pause before attempt number `attempt` when the previous attempt was asked
    /// to wait `retry_after`: the longer of the backoff and the request, the request
    /// cut to `max_retry_after`.
    pub fn pause_before(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let asked = retry_after.unwrap_or_default().min(self.max_retry_after);
        self.backoff_before(attempt).max(asked)
    }
}

impl RetryPolicy {
    /// The longest an effect's attempts can pause in all, when every attempt is asked
    /// to wait the longest `Retry-After` honoured.
    pub fn longest_wait(&self) -> Duration {
        // The first attempt follows nothing it could be asked to wait for.
        (2..=self.max_attempts)
            .map(|attempt| self.pause_before(attempt, Some(self.max_retry_after)))
            .fold(Duration::ZERO, Duration::saturating_add)
    }
}

impl Default for RetryPolicy {
    /// Three attempts, 100 ms then 200 ms apart, never more than 2 s; a
    /// `Retry-After` is honoured up to 2 s (a call's deadline is 10 s by default).
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(2),
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
            max_retry_after: Duration::ZERO,
        };
        let pauses: Vec<u128> = (1..=5)
            .map(|a| policy.backoff_before(a).as_millis())
            .collect();
        assert_eq!(pauses, vec![0, 100, 200, 350, 350]);
    }

    #[test]
    fn retry_after_lengthens_the_pause_up_to_its_bound() {
        let policy = RetryPolicy::immediate(3).honouring_retry_after(Duration::from_secs(5));
        assert_eq!(policy.pause_before(2, None), Duration::ZERO);
        assert_eq!(
            policy.pause_before(2, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.pause_before(2, Some(Duration::from_secs(60))),
            Duration::from_secs(5)
        );
        let slow = RetryPolicy::default();
        assert_eq!(
            slow.pause_before(3, Some(Duration::from_millis(50))),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn the_longest_wait_adds_up_every_pause_at_its_longest() {
        let policy = RetryPolicy::default();
        // Three attempts: the first has no backoff but a Retry-After of up to 2 s
        // can still stand before the second and third.
        assert_eq!(policy.longest_wait(), Duration::from_secs(4));
        assert_eq!(RetryPolicy::immediate(5).longest_wait(), Duration::ZERO);
    }

    #[test]
    fn immediate_never_pauses_and_keeps_one_attempt() {
        let policy = RetryPolicy::immediate(0);
        assert_eq!(policy.max_attempts, 1);
        assert_eq!(policy.backoff_before(7), Duration::ZERO);
    }
}
