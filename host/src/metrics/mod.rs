//! What a host counts for Prometheus (`/metrics`): calls by tool and outcome, effects
//! and their attempts by provider and result, retries, lease takeovers, calls in
//! flight, and the journal's commit and fsync latencies.
//!
//! A leaf module: the guard and the journals report into it, the host adds what it
//! reads from the journal at scrape time (queue depths, effects waiting for a person)
//! and the HTTP layer serves the text ([`text`]).
//!
//! Counters are plain atomics, not a metrics crate: `prometheus-client`'s histogram
//! takes a lock on every observation, and the `prometheus` crate brings a global
//! registry and protobuf; the text format is a page of code. On a call's path the
//! only lock is one uncontended read lock to find its tool's (or an effect's
//! provider's) row of counters; a write lock is taken once per tool or provider, the
//! first time it is seen. Label values are tool and provider names the host loaded
//! or configured, so the number of series is bounded by the configuration, never by
//! what a client sends.

mod family;
mod gc;
mod histogram;
mod journal_gauges;
pub(crate) mod text;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use family::Family;
pub(crate) use gc::GcCounters;
pub(crate) use histogram::Histogram;
pub(crate) use journal_gauges::{Attention, JournalGauges, Reading, Unknown};
use text::Text;

/// How a call ended, as the `outcome` label of `justonce_calls_total` says it: the
/// kind of a saved outcome of a call that ran, `replayed` for one answered from the
/// journal, the kind of an error otherwise ([`crate::Error::kind`]); any other error
/// kind counts as `error`.
pub(crate) const CALL_OUTCOMES: [&str; 12] = [
    "success",
    "tool_error",
    "trap",
    "replayed",
    "mismatch",
    "in_progress",
    "busy",
    "outcome_unknown",
    "not_performed",
    "divergence",
    "lease_lost",
    "error",
];

/// Why a call was refused before its tool and key were known
/// (`justonce_calls_refused_total{reason}`); any other error counts as `error`.
pub(crate) const REFUSALS: [&str; 4] =
    ["unknown_tool", "invalid_arguments", "invalid_key", "error"];

/// What a guarded effect ended as, as its guest was told
/// (`justonce_effects_total{result}`): `host_failed` when the journal failed.
pub(crate) const EFFECT_RESULTS: [&str; 7] = [
    "ok",
    "rejected",
    "denied",
    "outcome_unknown",
    "divergence",
    "read_only",
    "host_failed",
];

/// How one attempt at an effect ended (`justonce_effect_attempts_total{result}`), as
/// its trace span says: `refused` when the journal refused the claim (a lost lease).
pub(crate) const ATTEMPT_RESULTS: [&str; 8] = [
    "ok",
    "rejected",
    "denied",
    "not_performed",
    "unknown",
    "throttled",
    "conflict",
    "refused",
];

/// What an effect was retried after (`justonce_effect_retries_total{after}`): the
/// previous attempt's result in the same run, or `earlier_run` when that attempt was
/// made by an earlier run of the call (a resumed or taken-over call). `conflict` is a
/// 409: the downstream still processes the key's first request.
pub(crate) const RETRY_CAUSES: [&str; 5] = [
    "unknown",
    "throttled",
    "conflict",
    "not_performed",
    "earlier_run",
];

/// Who decided a resolution of an unkeyed effect whose outcome was unknown
/// (`justonce_resolutions_total{decided_by}`), as `journal::DecidedBy` names them.
pub(crate) const DECIDERS: [&str; 3] = ["probe", "person", "operator"];

/// What a sweep's probe of an unknown outcome ended in
/// (`justonce_sweep_probes_total{result}`): decided `performed` or `not_performed`,
/// `undecided` (the probe could not tell, failed, or the call moved on meanwhile),
/// or `failed` (the sweep's run itself failed).
pub(crate) const SWEEP_RESULTS: [&str; 4] = ["performed", "not_performed", "undecided", "failed"];

/// The position of `kind` in `kinds`, or of the last one (the catch-all).
fn index_of(kinds: &[&str], kind: &str) -> usize {
    kinds
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(kinds.len() - 1)
}

/// The counters of one tool.
#[derive(Debug, Default)]
pub(crate) struct ToolCounters {
    outcomes: [AtomicU64; CALL_OUTCOMES.len()],
    takeovers: AtomicU64,
}

impl ToolCounters {
    /// Counts a call that ended as `outcome` (one of [`CALL_OUTCOMES`]).
    pub(crate) fn answered(&self, outcome: &str) {
        self.outcomes[index_of(&CALL_OUTCOMES, outcome)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a run that took over a call whose previous run's lease expired.
    pub(crate) fn took_over(&self) {
        self.takeovers.fetch_add(1, Ordering::Relaxed);
    }
}

/// The counters of one provider.
#[derive(Debug, Default)]
pub(crate) struct ProviderCounters {
    effects: [AtomicU64; EFFECT_RESULTS.len()],
    attempts: [AtomicU64; ATTEMPT_RESULTS.len()],
    retries: [AtomicU64; RETRY_CAUSES.len()],
}

impl ProviderCounters {
    /// Counts an effect that ended as `result` (one of [`EFFECT_RESULTS`]).
    pub(crate) fn effect_ended(&self, result: &str) {
        self.effects[index_of(&EFFECT_RESULTS, result)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an attempt that ended as `result` (one of [`ATTEMPT_RESULTS`]).
    pub(crate) fn attempt_ended(&self, result: &str) {
        self.attempts[index_of(&ATTEMPT_RESULTS, result)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an attempt after the first under the same effect key, made after
    /// `cause` (one of [`RETRY_CAUSES`]).
    pub(crate) fn retried(&self, cause: &str) {
        self.retries[index_of(&RETRY_CAUSES, cause)].fetch_add(1, Ordering::Relaxed);
    }
}

/// What one effect reports to: its provider's row, and its tool's row for that
/// provider (which tool retries against which downstream).
#[derive(Debug, Clone)]
pub(crate) struct EffectCounters {
    provider: Arc<ProviderCounters>,
    by_tool: Arc<ProviderCounters>,
}

impl EffectCounters {
    /// Counts an effect that ended as `result` (one of [`EFFECT_RESULTS`]).
    pub(crate) fn effect_ended(&self, result: &str) {
        self.provider.effect_ended(result);
        self.by_tool.effect_ended(result);
    }

    /// Counts an attempt that ended as `result` (one of [`ATTEMPT_RESULTS`]).
    pub(crate) fn attempt_ended(&self, result: &str) {
        self.provider.attempt_ended(result);
        self.by_tool.attempt_ended(result);
    }

    /// Counts a retry after `cause` (one of [`RETRY_CAUSES`]).
    pub(crate) fn retried(&self, cause: &str) {
        self.provider.retried(cause);
        self.by_tool.retried(cause);
    }
}

/// The downstream an effect of `provider` with `payload` goes to, for the `service`
/// label: the configured service an HTTP request names (`{"service": "payments"}`),
/// else its URL's host (`{"url": "https://api.example.com/…"}`, without port or
/// credentials); for any other provider, or an HTTP request naming neither, the
/// provider's name. The tool chooses the payload before any allowlist judges it, so
/// the rows are capped ([`MAX_EFFECT_ROWS`]).
pub(crate) fn service_of(provider: &str, payload: &serde_json::Value) -> String {
    if provider != "http" {
        return provider.to_owned();
    }
    if let Some(service) = payload.get("service").and_then(|s| s.as_str()) {
        return service.to_owned();
    }
    if let Some(url) = payload.get("url").and_then(|u| u.as_str())
        && let Some((_, rest)) = url.split_once("://")
    {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.split(':').next().unwrap_or(""),
        };
        if !host.is_empty() {
            return host.to_ascii_lowercase();
        }
    }
    provider.to_owned()
}

/// How many (tool, provider, service) rows the effect series hold: the service comes
/// from what a tool asks for, so past this many a new one is counted as
/// [`OTHER_SERVICE`].
const MAX_EFFECT_ROWS: usize = 512;

/// The `service` of effects past [`MAX_EFFECT_ROWS`].
const OTHER_SERVICE: &str = "other";

/// The key of a (tool, provider, service) row: a separator no configured name holds.
const PAIR: char = '\u{1f}';

fn load(count: &AtomicU64) -> u64 {
    count.load(Ordering::Relaxed)
}

/// Writes the series `name{row_label=…,kind_label=…}` of every row and kind: `counts`
/// gives a row's counters in the order of `kinds`.
fn split<T>(
    name: &str,
    (row_label, rows): (&str, &[(String, Arc<T>)]),
    (kind_label, kinds): (&str, &[&str]),
    counts: impl Fn(&T) -> &[AtomicU64],
    out: &mut Text,
) {
    for (row, counters) in rows {
        for (kind, count) in kinds.iter().zip(counts(counters)) {
            out.sample(name, &[(row_label, row), (kind_label, kind)], load(count));
        }
    }
}

/// What one host's guard counts.
#[derive(Debug, Default)]
pub(crate) struct CallMetrics {
    tools: Family<ToolCounters>,
    providers: Family<ProviderCounters>,
    /// The same counters by tool and provider.
    by_tool: Family<ProviderCounters>,
    refused: [AtomicU64; REFUSALS.len()],
    in_flight: AtomicI64,
    resolutions: [AtomicU64; DECIDERS.len()],
    swept: [AtomicU64; SWEEP_RESULTS.len()],
    gc: GcCounters,
}

/// A call in flight; counted until dropped.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl CallMetrics {
    /// The counters of `tool` (created with zeros the first time).
    pub(crate) fn tool(&self, tool: &str) -> Arc<ToolCounters> {
        self.tools.row(tool)
    }

    /// The counters of `provider` (created with zeros the first time).
    pub(crate) fn provider(&self, provider: &str) -> Arc<ProviderCounters> {
        self.providers.row(provider)
    }

    /// The counters an effect of `tool` on `provider` reports to.
    /// `service` names the downstream within the provider (for `http`, the
    /// configured service the request names, else the URL's host; for any other
    /// provider, the provider itself): see [`service_of`].
    pub(crate) fn effect(&self, provider: &str, service: &str, tool: &str) -> EffectCounters {
        EffectCounters {
            provider: self.providers.row(provider),
            by_tool: self.by_tool.row_capped(
                &format!("{tool}{PAIR}{provider}{PAIR}{service}"),
                MAX_EFFECT_ROWS,
                &format!("{tool}{PAIR}{provider}{PAIR}{OTHER_SERVICE}"),
            ),
        }
    }

    /// This host's scheduled gc counters.
    pub(crate) fn gc(&self) -> &GcCounters {
        &self.gc
    }

    /// Counts a call refused before its tool was known, by error kind.
    pub(crate) fn refused(&self, kind: &str) {
        self.refused[index_of(&REFUSALS, kind)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a resolution of an unknown outcome that `decided_by` (one of
    /// [`DECIDERS`]) made through this host: its guard's probes and the persons it
    /// asked, its console's operators.
    pub(crate) fn resolved(&self, decided_by: &str) {
        self.resolutions[index_of(&DECIDERS, decided_by)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a sweep's probe of one unknown outcome that ended in `result` (one of
    /// [`SWEEP_RESULTS`]).
    pub(crate) fn swept(&self, result: &str) {
        self.swept[index_of(&SWEEP_RESULTS, result)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call in flight until the returned guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// Writes every counter in the text format.
    pub(crate) fn render(&self, out: &mut Text) {
        let tools = self.tools.rows();
        let providers = self.providers.rows();
        out.family(
            "justonce_calls_total",
            "counter",
            "Tool calls answered, by tool and outcome (replayed: answered from the journal).",
        );
        split(
            "justonce_calls_total",
            ("tool", &tools),
            ("outcome", &CALL_OUTCOMES),
            |r| &r.outcomes,
            out,
        );
        out.family(
            "justonce_calls_refused_total",
            "counter",
            "Tool calls refused before their tool and key were known, by reason.",
        );
        for (reason, count) in REFUSALS.iter().zip(&self.refused) {
            out.sample(
                "justonce_calls_refused_total",
                &[("reason", reason)],
                load(count),
            );
        }
        out.family(
            "justonce_resolutions_total",
            "counter",
            "Unknown outcomes of unkeyed effects resolved through this host, by who decided: its probes and the persons it asked at a retry, its console's operators.",
        );
        for (decided_by, count) in DECIDERS.iter().zip(&self.resolutions) {
            out.sample(
                "justonce_resolutions_total",
                &[("decided_by", decided_by)],
                load(count),
            );
        }
        out.family(
            "justonce_sweep_probes_total",
            "counter",
            "Unknown outcomes this host's sweeper probed, by what came of it: performed, not_performed, undecided, failed.",
        );
        for (result, count) in SWEEP_RESULTS.iter().zip(&self.swept) {
            out.sample(
                "justonce_sweep_probes_total",
                &[("result", result)],
                load(count),
            );
        }
        out.family(
            "justonce_calls_in_flight",
            "gauge",
            "Tool calls being answered now.",
        );
        out.sample(
            "justonce_calls_in_flight",
            &[],
            self.in_flight.load(Ordering::Relaxed),
        );
        out.family(
            "justonce_lease_takeovers_total",
            "counter",
            "Runs that took over a call whose previous run's lease had expired, by tool.",
        );
        for (tool, row) in &tools {
            out.sample(
                "justonce_lease_takeovers_total",
                &[("tool", tool)],
                load(&row.takeovers),
            );
        }
        out.family(
            "justonce_effects_total",
            "counter",
            "Guarded effects, by provider and what the tool was told.",
        );
        split(
            "justonce_effects_total",
            ("provider", &providers),
            ("result", &EFFECT_RESULTS),
            |r| &r.effects,
            out,
        );
        out.family(
            "justonce_effect_attempts_total",
            "counter",
            "Attempts at effects (each sent under the effect's key), by provider and result.",
        );
        split(
            "justonce_effect_attempts_total",
            ("provider", &providers),
            ("result", &ATTEMPT_RESULTS),
            |r| &r.attempts,
            out,
        );
        out.family(
            "justonce_effect_retries_total",
            "counter",
            "Attempts after an effect's first (the same key sent again), by provider and what the previous attempt got.",
        );
        split(
            "justonce_effect_retries_total",
            ("provider", &providers),
            ("after", &RETRY_CAUSES),
            |r| &r.retries,
            out,
        );
        // The same by tool: which tool retries against which downstream. Only pairs
        // that had an effect have series (a tool does not say which providers it uses).
        let by_tool: Vec<(String, String, String, Arc<ProviderCounters>)> = self
            .by_tool
            .rows()
            .into_iter()
            .filter_map(|(triple, row)| {
                let mut parts = triple.splitn(3, PAIR);
                let (tool, provider, service) = (parts.next()?, parts.next()?, parts.next()?);
                Some((
                    tool.to_owned(),
                    provider.to_owned(),
                    service.to_owned(),
                    row,
                ))
            })
            .collect();
        for (name, help, kind_label, kinds, counts) in [
            (
                "justonce_tool_effects_total",
                "Guarded effects, by tool, provider, service and what the tool was told.",
                "result",
                &EFFECT_RESULTS[..],
                (|r: &ProviderCounters| &r.effects[..]) as fn(&ProviderCounters) -> &[AtomicU64],
            ),
            (
                "justonce_tool_effect_attempts_total",
                "Attempts at effects, by tool, provider, service and result (conflict: a 409, the downstream still processes the key).",
                "result",
                &ATTEMPT_RESULTS[..],
                |r| &r.attempts[..],
            ),
            (
                "justonce_tool_effect_retries_total",
                "Attempts after an effect's first, by tool, provider, service and what the previous attempt got.",
                "after",
                &RETRY_CAUSES[..],
                |r| &r.retries[..],
            ),
        ] {
            out.family(name, "counter", help);
            for (tool, provider, service, row) in &by_tool {
                for (kind, count) in kinds.iter().zip(counts(row)) {
                    out.sample(
                        name,
                        &[
                            ("tool", tool),
                            ("provider", provider),
                            ("service", service),
                            (kind_label, kind),
                        ],
                        load(count),
                    );
                }
            }
        }
        self.gc.render(out);
    }
}

/// What a journal measures: how long its commits and its fsyncs take.
#[derive(Debug, Default)]
pub(crate) struct JournalMetrics {
    commits: Histogram,
    fsyncs: Histogram,
}

impl JournalMetrics {
    /// Records a committed write transaction that took `took` (waiting for the
    /// connection included, and under `Durability::Full` the fsync of a grouped
    /// round its leader settled before waking its callers).
    pub(crate) fn committed(&self, took: Duration) {
        self.commits.observe(took);
    }

    /// Records an fsync of the journal at a durable point that took `took`.
    pub(crate) fn synced(&self, took: Duration) {
        self.fsyncs.observe(took);
    }

    /// How many commits and fsyncs were timed.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.commits.count(), self.fsyncs.count())
    }

    /// Writes both histograms in the text format.
    pub(crate) fn render(&self, out: &mut Text) {
        out.family(
            "justonce_journal_commit_seconds",
            "histogram",
            "How long the journal's write transactions take, from taking the connection to the commit.",
        );
        self.commits.render("justonce_journal_commit_seconds", out);
        out.family(
            "justonce_journal_fsync_seconds",
            "histogram",
            "How long the journal's fsyncs at durable points take (SQLite with full durability).",
        );
        self.fsyncs.render("justonce_journal_fsync_seconds", out);
    }
}

/// Writes `justonce_build_info{version}`, always 1: which build a host runs, to join
/// on in queries and see a rolling upgrade's progress.
pub(crate) fn render_build_info(version: &str, out: &mut Text) {
    out.family(
        "justonce_build_info",
        "gauge",
        "The build of justonce this host runs (always 1).",
    );
    out.sample("justonce_build_info", &[("version", version)], 1);
}

/// Writes how many effects have no definitive answer now (`pending`: in flight, or
/// their outcome unknown), and how many of them wait for a person (`unresolved`: an
/// unkeyed effect whose outcome is unknown, `justonce journal --unresolved`).
pub(crate) fn render_unknown(pending: u64, unresolved: usize, out: &mut Text) {
    out.family(
        "justonce_effects_pending",
        "gauge",
        "Effects claimed without a definitive answer: in flight, or their outcome unknown.",
    );
    out.sample("justonce_effects_pending", &[], pending);
    out.family(
        "justonce_effects_unresolved",
        "gauge",
        "Unkeyed effects whose outcome is unknown, waiting for a person (justonce resolve).",
    );
    out.sample("justonce_effects_unresolved", &[], unresolved);
}

/// Writes the calls stuck with an unknown outcome, and the calls running now by the
/// host holding each (from the journal: every host's scrape shows the whole fleet).
pub(crate) fn render_attention(stuck: u64, running_by_host: &[(String, u64)], out: &mut Text) {
    out.family(
        "justonce_calls_stuck",
        "gauge",
        "Calls stuck with an unknown outcome: an effect attempted without an answer, no live lease, not abandoned (the same call retried resumes one; justonce journal --unresolved lists them).",
    );
    out.sample("justonce_calls_stuck", &[], stuck);
    out.family(
        "justonce_calls_running",
        "gauge",
        "Calls running now under a live lease, by the host that holds each (--host-name).",
    );
    for (host, count) in running_by_host {
        out.sample("justonce_calls_running", &[("host", host)], *count);
    }
}

/// Writes each upstream MCP server's state (1 for the state it is in, 0 for each of
/// the other `states`) and the starts its supervisor began, from `upstreams`: (its
/// name, its state, its starts). Names are the configuration's, so the series are
/// bounded by it. Its calls by outcome are `justonce_effects_total` of the provider
/// `mcp:NAME`.
pub(crate) fn render_upstreams(upstreams: &[(String, &str, u64)], states: &[&str], out: &mut Text) {
    if upstreams.is_empty() {
        return;
    }
    out.family(
        "justonce_upstream_state",
        "gauge",
        "Where each upstream MCP server stands: 1 for its state (starting, ready, failing, disabled), 0 for the others.",
    );
    for (name, state, _) in upstreams {
        for each in states {
            let on = u8::from(each == state);
            out.sample(
                "justonce_upstream_state",
                &[("upstream", name), ("state", each)],
                on,
            );
        }
    }
    out.family(
        "justonce_upstream_starts_total",
        "counter",
        "Starts of each upstream MCP server since the host started (its first, its restarts after a failure, an operator's restarts).",
    );
    for (name, _, starts) in upstreams {
        out.sample(
            "justonce_upstream_starts_total",
            &[("upstream", name)],
            starts,
        );
    }
}

/// The outbox's depth, which the host reads from its journal when it is scraped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OutboxDepth {
    /// Messages waiting for their first delivery attempt.
    pub pending: u64,
    /// Messages still to be delivered after failed attempts.
    pub retrying: u64,
    /// Messages given up on.
    pub failed: u64,
}

impl OutboxDepth {
    /// Writes the queue depths in the text format.
    pub(crate) fn render(&self, out: &mut Text) {
        out.family(
            "justonce_outbox_messages",
            "gauge",
            "Webhooks in the outbox not delivered, by state (pending: not tried yet; retrying: tried and due again; failed: given up).",
        );
        for (state, count) in [
            ("pending", self.pending),
            ("retrying", self.retrying),
            ("failed", self.failed),
        ] {
            out.sample("justonce_outbox_messages", &[("state", state)], count);
        }
    }
}

/// The value of the series `name{labels}` (labels in the order they are written) in
/// `text`, if it is there.
#[cfg(test)]
pub(crate) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[cfg(test)]
impl CallMetrics {
    /// Every counter in the text format.
    pub(crate) fn rendered(&self) -> String {
        let mut text = Text::default();
        self.render(&mut text);
        text.finish()
    }
}

#[cfg(test)]
mod tests;
