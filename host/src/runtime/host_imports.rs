//! What a guest's `Store` holds for one call, and the host side of the WIT imports.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{EffectError, Level, justonce::tool};
use super::capture::BoundedCapture;
use super::effects::{EffectFailure, EffectHandler};
use super::limiter::{CallLimiter, LimitHit};
use super::log_listener::{GuestNote, LogLevel};
use crate::ask::Question;

/// The longest log line a guest may write; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;

/// What a progress report costs of the log budget besides its message, in bytes.
const PROGRESS_COST: usize = 64;

/// Per-call guest state: a deny-all WASI context, the store's limits and the effect
/// guard of this run (absent while the tool only describes itself).
pub(crate) struct GuestState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    /// Caps memory and table growth, and remembers the first cap hit.
    pub limiter: CallLimiter,
    /// Effects this call may ask for.
    pub max_effects: u32,
    /// Largest effect payload this call may send, in bytes.
    pub max_payload_bytes: usize,
    /// Largest result this call may return, in bytes (its parts together too).
    pub max_result_bytes: usize,
    /// The result parts added so far.
    pub parts: super::content::ResultParts,
    /// Effects asked for so far.
    pub effects: u32,
    /// A limit `perform` refused (the limiter keeps its own).
    pub limit_hit: Option<LimitHit>,
    /// Where `perform` goes (absent while the tool describes itself).
    pub handler: Option<Box<dyn EffectHandler>>,
    pub tool: Arc<str>,
    /// Bounded captures of the guest's stdout and stderr, logged after the call.
    pub stdout: BoundedCapture,
    /// See `stdout`.
    pub stderr: BoundedCapture,
    /// Bytes the guest may still write through the `log` import in this call.
    pub log_budget: usize,
    /// Log lines dropped once the budget ran out.
    pub log_dropped: u64,
    /// When the call started, for the deadline.
    pub started: std::time::Instant,
    /// The guest's running time the call may take (see `host_time`).
    pub deadline: std::time::Duration,
    /// The wall-clock time the whole call may take, time inside `perform` included.
    pub wall_clock: std::time::Duration,
    /// Time spent inside the host's `perform` (providers, retries, backoff): it does
    /// not count against the guest's deadline, or an effect that took place could
    /// end in a saved `deadline_exceeded` trap.
    pub host_time: std::time::Duration,
    /// Time spent waiting for the user's answers (`input.ask`): a person's time
    /// counts against neither the deadline nor the wall-clock cap, or an answer that
    /// took a minute would end in a saved `deadline_exceeded` trap.
    pub ask_time: std::time::Duration,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl tool::types::Host for GuestState {}

impl tool::effects::Host for GuestState {
    fn perform(
        &mut self,
        provider: String,
        operation: String,
        payload: String,
    ) -> wasmtime::Result<Result<String, EffectError>> {
        if self.handler.is_none() {
            return Ok(Err(EffectError::Denied(
                "effects are not allowed while a tool describes itself".into(),
            )));
        }
        self.charge_effect(payload.len())?;
        let handler = self.handler.as_mut().expect("checked above");
        let entered = std::time::Instant::now();
        let performed = handler.perform(&provider, &operation, &payload);
        self.host_time += entered.elapsed();
        self.answered(performed)
    }
}

impl tool::input::Host for GuestState {
    fn ask(
        &mut self,
        questions: Vec<tool::input::Question>,
    ) -> wasmtime::Result<Result<Vec<String>, EffectError>> {
        if self.handler.is_none() {
            return Ok(Err(EffectError::Denied(
                "a tool cannot ask anything while it describes itself".into(),
            )));
        }
        // An ask is an effect: it counts against the budget, its questions against
        // the payload cap.
        let size = questions
            .iter()
            .map(|q| q.name.len() + q.message.len() + q.schema.len())
            .sum();
        self.charge_effect(size)?;
        let questions: Vec<Question> = questions
            .into_iter()
            .map(|q| Question {
                // Schema text that is not JSON is kept as a string, which the guard
                // refuses as not a schema (at the ask's position).
                schema: serde_json::from_str(&q.schema)
                    .unwrap_or(serde_json::Value::String(q.schema)),
                name: q.name,
                message: q.message,
            })
            .collect();
        let handler = self.handler.as_mut().expect("checked above");
        let entered = std::time::Instant::now();
        let asked = handler.ask(&questions);
        let waited = entered.elapsed();
        self.host_time += waited;
        self.ask_time += waited;
        self.answered(asked)
    }
}

impl tool::content::Host for GuestState {
    fn add(&mut self, part: tool::content::Part) -> wasmtime::Result<()> {
        // Past the cap the call traps, and the trap is the saved outcome.
        self.parts.add(part, self.max_result_bytes).map_err(|hit| {
            self.limit_hit.get_or_insert(hit.clone());
            wasmtime::Error::new(hit)
        })
    }
}

impl tool::progress::Host for GuestState {
    fn report(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        if !super::log_listener::listening() {
            return;
        }
        // Reports share the log lines' budget: a guest cannot flood the client.
        let message = message.as_deref().map(|m| truncate(m, MAX_LOG_LINE));
        let cost = PROGRESS_COST + message.map_or(0, str::len);
        if cost > self.log_budget {
            self.log_budget = 0;
            self.log_dropped += 1;
            return;
        }
        self.log_budget -= cost;
        let note = GuestNote::Progress {
            done,
            total,
            message,
        };
        super::log_listener::deliver(&self.tool, note);
    }
}

impl tool::log::Host for GuestState {
    fn write(&mut self, level: Level, message: String) {
        let message = truncate(&message, MAX_LOG_LINE);
        if message.len() > self.log_budget {
            self.log_budget = 0;
            self.log_dropped += 1;
            return;
        }
        self.log_budget -= message.len();
        let message = escape_controls(message);
        let tool = &*self.tool;
        let note_level = match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        super::log_listener::deliver(tool, GuestNote::Log(note_level, &message));
        match level {
            Level::Trace => tracing::trace!(target: "justonce::guest", tool, "{message}"),
            Level::Debug => tracing::debug!(target: "justonce::guest", tool, "{message}"),
            Level::Info => tracing::info!(target: "justonce::guest", tool, "{message}"),
            Level::Warn => tracing::warn!(target: "justonce::guest", tool, "{message}"),
            Level::Error => tracing::error!(target: "justonce::guest", tool, "{message}"),
        }
    }
}

impl GuestState {
    /// Counts one effect (or ask) of `payload` bytes against the call's budget and
    /// payload cap. Past either the guest traps, and the trap is the saved outcome: a
    /// guest cannot swallow the limit and carry on.
    fn charge_effect(&mut self, payload: usize) -> wasmtime::Result<()> {
        let hit = if self.effects >= self.max_effects {
            Some(LimitHit::Effects {
                limit: self.max_effects,
            })
        } else if payload > self.max_payload_bytes {
            Some(LimitHit::Payload {
                size: payload,
                limit: self.max_payload_bytes,
            })
        } else {
            None
        };
        if let Some(hit) = hit {
            self.limit_hit.get_or_insert(hit.clone());
            return Err(wasmtime::Error::new(hit));
        }
        self.effects += 1;
        Ok(())
    }

    /// What the guest gets of the guard's answer to an effect or an ask: a domain
    /// error as a WIT `effect-error`, or a trap for an effect a read-only tool asked
    /// for, a run that stops here, and a fault of the host.
    fn answered<T>(
        &mut self,
        answer: Result<Result<T, EffectFailure>, String>,
    ) -> wasmtime::Result<Result<T, EffectError>> {
        match answer {
            Ok(Err(EffectFailure::ReadOnly(message))) => {
                let hit = LimitHit::ReadOnly(message);
                self.limit_hit.get_or_insert(hit.clone());
                Err(wasmtime::Error::new(hit))
            }
            Ok(Err(EffectFailure::Stopped(message))) => Err(wasmtime::Error::msg(message)),
            Ok(result) => Ok(result.map_err(|failure| match failure {
                EffectFailure::Rejected(s) => EffectError::Rejected(s),
                EffectFailure::OutcomeUnknown(s) => EffectError::OutcomeUnknown(s),
                EffectFailure::Denied(s) => EffectError::Denied(s),
                EffectFailure::Divergence(s) => EffectError::Divergence(s),
                EffectFailure::ReadOnly(s) | EffectFailure::Stopped(s) => {
                    unreachable!("matched above: {s}")
                }
            })),
            Err(fault) => Err(wasmtime::Error::msg(fault)),
        }
    }

    /// Sends what the guest printed to the host's log (never into results), each
    /// line escaped, and says what the caps dropped.
    pub fn flush_output(&self) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let (bytes, dropped) = pipe.contents();
            let text = String::from_utf8_lossy(&bytes);
            for line in text.trim_end().lines() {
                let line = escape_controls(line);
                tracing::info!(target: "justonce::guest", tool = &*self.tool, stream, "{line}");
            }
            if dropped > 0 {
                tracing::warn!(target: "justonce::guest", tool = &*self.tool, stream, dropped, "output past the limit was dropped");
            }
        }
        if self.log_dropped > 0 {
            tracing::warn!(target: "justonce::guest", tool = &*self.tool, dropped = self.log_dropped, "log lines past the call's budget were dropped");
        }
    }

    /// What is left of the call's deadline: the guest's running time so far (the
    /// time since it started, less the time inside `perform` and `ask`) counts
    /// against it, and against the wall-clock cap all but the time waiting for the
    /// user's answers.
    pub fn deadline_left(&self) -> std::time::Duration {
        let elapsed = self.started.elapsed();
        let guest_time = elapsed.saturating_sub(self.host_time);
        self.deadline
            .saturating_sub(guest_time)
            .min(self.wall_clock.saturating_sub(self.call_time(elapsed)))
    }

    /// Whether the call ran past its wall-clock cap (rather than its guest deadline).
    pub fn past_wall_clock(&self) -> bool {
        self.call_time(self.started.elapsed()) >= self.wall_clock
    }

    /// The part of `elapsed` the wall-clock cap counts: all but the user's time.
    fn call_time(&self, elapsed: std::time::Duration) -> std::time::Duration {
        elapsed.saturating_sub(self.ask_time)
    }

    /// The first sandbox limit this call ran into, if any.
    pub fn limit_hit(&self) -> Option<LimitHit> {
        self.limit_hit.clone().or_else(|| self.limiter.hit.clone())
    }
}

/// `s` with its control characters escaped (`\n` as `\\n`, …): a guest's text is one
/// line of the host's log, and cannot forge another.
pub(crate) fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().collect::<String>()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guests_newline_cannot_start_a_host_log_line() {
        assert_eq!(escape_controls("plain"), "plain");
        assert_eq!(
            escape_controls("fine\nINFO justonce: forged\r\u{1b}[2J"),
            "fine\\nINFO justonce: forged\\r\\u{1b}[2J"
        );
    }

    #[test]
    fn the_users_time_counts_against_neither_the_deadline_nor_the_wall_clock() {
        use std::time::{Duration, Instant};
        let limits = super::super::Limits::default();
        let runtime = super::super::Runtime::new(limits.clone()).unwrap();
        let mut store = runtime.store(Arc::from("t"), None, &limits);
        let state = store.data_mut();
        // The call started longer ago than its wall-clock cap, almost all of it
        // spent waiting for the user's answers (no sleep: the start is moved back).
        let ago = limits.wall_clock + Duration::from_secs(30);
        state.started = Instant::now().checked_sub(ago).unwrap();
        state.host_time = ago - Duration::from_secs(1);
        state.ask_time = ago - Duration::from_secs(1);
        assert!(!state.past_wall_clock());
        assert!(state.deadline_left() > limits.deadline - Duration::from_secs(2));

        // The opposite: the same time inside effects counts against the wall clock.
        state.ask_time = Duration::ZERO;
        assert!(state.past_wall_clock());
        assert_eq!(state.deadline_left(), Duration::ZERO);
    }
}
