//! An upstream's progress reports for one call, coalesced before they are handed on:
//! a burst goes through as it comes, then at most one report per interval, and a
//! report that comes sooner waits, replaced by any later one (the last wins). What
//! waits is handed on when its interval ends or before the call's answer, so the
//! agent always hears the last report. A flood of 50 000 reports becomes a few
//! dozen a second, whatever the upstream sends.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Reports handed on at once before the rate applies.
pub(crate) const BURST: u32 = 8;

/// After the burst, at most one report per this interval.
pub(crate) const INTERVAL: Duration = Duration::from_millis(100);

/// One call's progress reports on their way to whoever listens (the MCP client
/// that asked for progress), through `hand_on`.
pub(crate) struct Coalesced<F: FnMut(&Value)> {
    /// Hands a report on.
    hand_on: F,
    /// Reports that may go at once.
    tokens: u32,
    /// When the last token came back (or the first report came).
    refilled: Option<Instant>,
    /// The last report that came too soon, waiting for its turn.
    held: Option<Value>,
}

/// The reports of `tool`'s call, handed to this thread's listener.
pub(crate) fn of_tool(tool: &str) -> Coalesced<impl FnMut(&Value) + '_> {
    Coalesced::new(move |message| deliver(tool, message))
}

impl<F: FnMut(&Value)> Coalesced<F> {
    /// No report yet; each one's turn handed to `hand_on`.
    pub(crate) fn new(hand_on: F) -> Self {
        Self {
            hand_on,
            tokens: BURST,
            refilled: None,
            held: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        let Some(refilled) = self.refilled else {
            self.refilled = Some(now);
            return;
        };
        let passed = now.saturating_duration_since(refilled);
        let back = u32::try_from(passed.as_nanos() / INTERVAL.as_nanos()).unwrap_or(u32::MAX);
        if back > 0 {
            self.tokens = self.tokens.saturating_add(back).min(BURST);
            self.refilled = Some(refilled + INTERVAL * back.min(BURST));
            if self.tokens == BURST {
                self.refilled = Some(now);
            }
        }
    }

    /// A report (`notifications/progress`) came at `now`: handed on if its turn
    /// came, else held (replacing the one held).
    pub(crate) fn report(&mut self, message: Value, now: Instant) {
        self.refill(now);
        if self.tokens > 0 {
            self.tokens -= 1;
            self.held = None;
            (self.hand_on)(&message);
        } else {
            self.held = Some(message);
        }
    }

    /// When the held report's turn comes, if one is held.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.held.as_ref()?;
        Some(self.refilled? + INTERVAL)
    }

    /// Hands on the held report if its turn came by `now`.
    pub(crate) fn tick(&mut self, now: Instant) {
        if self.due().is_some_and(|due| due <= now)
            && let Some(held) = self.held.take()
        {
            self.report(held, now);
        }
    }

    /// Hands on the held report, whatever the rate (the answer follows).
    pub(crate) fn flush(&mut self) {
        if let Some(held) = self.held.take() {
            (self.hand_on)(&held);
        }
    }
}

/// Waits on `rx` until `deadline` for what is not a progress report, handing the
/// reports on the way on, coalesced, as `progress_of`'s (to this thread's listener;
/// dropped when `None`), the last one before the answer. `note` tells a report
/// (`Ok(Some)`) or something it dealt with itself (`Ok(None)`: the upstream's
/// request answered by the call's client, a log message) from an answer (given
/// back as `Err`); the time it took over what it dealt with moves `deadline` on (a
/// person reading a question is not the upstream's time).
pub(crate) fn await_answer<T>(
    rx: &Receiver<T>,
    mut deadline: Instant,
    progress_of: Option<&str>,
    mut note: impl FnMut(T) -> Result<Option<Value>, T>,
) -> Result<T, RecvTimeoutError> {
    let mut reports = of_tool(progress_of.unwrap_or_default());
    let answer = loop {
        let until = reports.due().map_or(deadline, |due| due.min(deadline));
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(message) => match note_timed(&mut note, message) {
                (Ok(Some(report)), _) => {
                    if progress_of.is_some() {
                        reports.report(report, Instant::now());
                    }
                }
                (Ok(None), took) => deadline += took,
                (Err(answer), _) => break Ok(answer),
            },
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                reports.tick(Instant::now());
            }
            Err(e) => break Err(e),
        }
    };
    reports.flush();
    answer
}

/// What `note` made of `message`, and how long it took.
fn note_timed<T, R>(note: &mut impl FnMut(T) -> R, message: T) -> (R, std::time::Duration) {
    let started = Instant::now();
    let made = note(message);
    (made, started.elapsed())
}

/// Hands an upstream's `notifications/progress` to this thread's listener as a
/// progress report of `tool`.
pub(crate) fn deliver(tool: &str, message: &Value) {
    use crate::runtime::log_listener::{self, GuestNote};
    let params = message.get("params");
    let field = |name: &str| params.and_then(|p| p.get(name));
    let Some(done) = field("progress").and_then(Value::as_f64) else {
        return;
    };
    log_listener::deliver(
        tool,
        GuestNote::Progress {
            done,
            total: field("total").and_then(Value::as_f64),
            message: field("message").and_then(Value::as_str),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The time a call's client takes over what the upstream asked (a person
    /// reading a question) is not the upstream's: the wait for the answer goes on
    /// past the first deadline by that much. The person here takes 1.5 s of a 1 s
    /// budget; the answer comes 10 ms after they are done, which a fixed deadline
    /// (passed by then) would miss.
    #[test]
    fn the_time_the_client_takes_over_a_question_moves_the_deadline_on() {
        let (tx, rx) = std::sync::mpsc::channel::<Value>();
        tx.send(json!({ "method": "elicitation/create", "id": 1 }))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let answered = await_answer(&rx, deadline, None, |message| {
            if message.get("method").is_none() {
                return Err(message);
            }
            std::thread::sleep(Duration::from_millis(1500));
            let tx = tx.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                let _ = tx.send(json!({ "id": 7, "result": {} }));
            });
            Ok(None)
        });
        assert_eq!(answered.unwrap()["id"], 7);
    }

    #[test]
    fn a_flood_is_a_burst_then_one_per_interval_and_the_last_report_wins() {
        let start = Instant::now();
        let mut handed = Vec::new();
        let mut coalesced = Coalesced::new(|m: &Value| handed.push(m.clone()));
        // 50 000 reports within 1 s (one each 20 µs).
        for n in 1..=50_000u32 {
            let now = start + Duration::from_micros(20 * u64::from(n));
            coalesced.tick(now);
            coalesced.report(json!(n), now);
        }
        // The held one goes before the answer.
        coalesced.flush();
        drop(coalesced);
        let count = handed.len() as u32;
        let most = BURST + (1000 / INTERVAL.as_millis() as u32) + 1;
        assert!(count <= most, "{count} handed on, at most {most}");
        assert_eq!(
            &handed[..BURST as usize],
            &(1..=BURST).map(|n| json!(n)).collect::<Vec<_>>()[..],
            "the burst goes as it comes"
        );
        assert_eq!(handed.last(), Some(&json!(50_000)), "the last one wins");
    }

    #[test]
    fn a_held_report_is_due_one_interval_after_the_last_token_and_a_slow_upstream_is_not_held() {
        let start = Instant::now();
        let mut handed = 0;
        let mut coalesced = Coalesced::new(|_: &Value| handed += 1);
        // One report a second: every one is handed on at once, none held.
        for n in 0..20u64 {
            let now = start + Duration::from_secs(n);
            coalesced.report(json!(n), now);
            assert_eq!(coalesced.due(), None);
        }
        drop(coalesced);
        assert_eq!(handed, 20);
        // The opposite: past the burst, one is held until its interval ends.
        let mut coalesced = Coalesced::new(|_: &Value| {});
        for _ in 0..=BURST {
            coalesced.report(json!(0), start);
        }
        assert_eq!(coalesced.due(), Some(start + INTERVAL));
    }
}
