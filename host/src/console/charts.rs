//! The console's pictures over a real window of time (the last hour or the last
//! day, on the console's clock): calls and replays per minute (per quarter hour over
//! a day), and per tool the calls, replays, resumed runs, effect retries, unknown
//! outcomes, failures, and two latencies kept apart — a run's (journaled → outcome
//! saved, over the calls that finished in one run, so no wait for a retry is in it)
//! and an attempt's (an effect journaled → answered, over effects answered at their
//! first attempt). SVG drawn on the server (no script, no inline style).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::html::{ROOT, escape, link, page};
use super::sessions::BrowserSession;
use super::timeline::duration;
use super::view::states;
use crate::clock::rfc3339;
use crate::journal::JournalEntry;

/// One minute, in milliseconds.
const MINUTE_MS: i64 = 60_000;

/// The windows the charts page offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last hour, by the minute.
    Hour,
    /// The last day, by the quarter hour.
    Day,
}

impl Window {
    /// The window a query names (`?window=day`); the last hour otherwise.
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("day") => Self::Day,
            _ => Self::Hour,
        }
    }

    /// Its length in milliseconds.
    pub fn ms(self) -> i64 {
        match self {
            Self::Hour => 60 * MINUTE_MS,
            Self::Day => 24 * 60 * MINUTE_MS,
        }
    }

    /// One bar's length in milliseconds.
    pub fn bucket_ms(self) -> i64 {
        match self {
            Self::Hour => MINUTE_MS,
            Self::Day => 15 * MINUTE_MS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }

    fn per(self) -> &'static str {
        match self {
            Self::Hour => "per minute",
            Self::Day => "per 15 minutes",
        }
    }
}

/// What one tool's calls add up to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ToolFigures {
    /// Calls.
    pub calls: u32,
    /// Retries answered with the saved outcome.
    pub replays: u32,
    /// Calls whose guest ran more than once (resumed after a failure or a crash).
    pub retried: u32,
    /// Calls with an effect whose outcome is unknown.
    pub unknown: u32,
    /// Calls that ended in a tool error or a trap.
    pub failed: u32,
    /// Attempts at effects after each effect's first (the same key sent again).
    pub effect_retries: u32,
    /// Run latency percentiles (p50, p95, p99) in milliseconds: journaled → outcome
    /// saved, over the calls that completed in one run.
    pub run_latency: Option<(i64, i64, i64)>,
    /// Attempt latency percentiles (p50, p95, p99) in milliseconds: an effect
    /// journaled → answered, over the effects answered at their first attempt.
    pub attempt_latency: Option<(i64, i64, i64)>,
}

/// The `p`th percentile (nearest rank) of `sorted`, which is not empty.
fn percentile(sorted: &[i64], p: usize) -> i64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn percentiles(mut times: Vec<i64>) -> Option<(i64, i64, i64)> {
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    Some((
        percentile(&times, 50),
        percentile(&times, 95),
        percentile(&times, 99),
    ))
}

/// Each tool's figures over `entries`.
pub fn per_tool(entries: &[JournalEntry]) -> BTreeMap<String, ToolFigures> {
    let mut figures: BTreeMap<String, ToolFigures> = BTreeMap::new();
    let mut runs: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut attempts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for e in entries {
        let f = figures.entry(e.tool.clone()).or_default();
        let s = states(e);
        f.calls += 1;
        f.replays += e.replays;
        f.retried += u32::from(e.runs > 1);
        f.unknown += u32::from(s.contains(&"unknown"));
        f.failed += u32::from(s.contains(&"failed") || s.contains(&"abandoned"));
        for effect in &e.effects {
            f.effect_retries += effect.attempts.saturating_sub(1);
            if effect.attempts == 1 && effect.state == "done" {
                attempts
                    .entry(e.tool.clone())
                    .or_default()
                    .push(effect.updated_at - effect.created_at);
            }
        }
        if let Some(done) = e.completed_at
            && e.runs == 1
        {
            runs.entry(e.tool.clone())
                .or_default()
                .push(done - e.created_at);
        }
    }
    for (tool, f) in &mut figures {
        f.run_latency = runs.remove(tool).and_then(percentiles);
        f.attempt_latency = attempts.remove(tool).and_then(percentiles);
    }
    figures
}

/// Calls and replays per bucket of `window` ending at `now`: (start of the bucket,
/// calls made in it, replays of those calls). A call's replays are counted where the
/// call was made (the journal counts them, it does not date them).
pub fn over_time(entries: &[JournalEntry], window: Window, now: i64) -> Vec<(i64, u32, u32)> {
    let bucket = window.bucket_ms();
    let last = now.div_euclid(bucket) * bucket;
    let count = window.ms() / bucket;
    let first = last - (count - 1) * bucket;
    let mut out: Vec<(i64, u32, u32)> = (0..count).map(|i| (first + i * bucket, 0, 0)).collect();
    for e in entries.iter().filter(|e| e.created_at >= first) {
        let slot = usize::try_from((e.created_at - first) / bucket).unwrap_or(usize::MAX);
        if let Some(row) = out.get_mut(slot) {
            row.1 += 1;
            row.2 += e.replays;
        }
    }
    out
}

/// `HH:MM` (UTC) of `ms`.
fn clock_time(ms: i64) -> String {
    rfc3339(ms).get(11..16).unwrap_or_default().to_owned()
}

/// The bar chart of calls and replays over `rows`, with its axes.
fn calls_chart(rows: &[(i64, u32, u32)], window: Window) -> String {
    let (width, height, left, bottom) = (760i64, 180i64, 40i64, 24i64);
    let plot_h = height - bottom - 8;
    let max = rows
        .iter()
        .map(|(_, c, r)| i64::from(*c.max(r)))
        .max()
        .unwrap_or(0)
        .max(1);
    // A round top for the y axis: 1, 2, 5, 10, 20, 50, ….
    let mut top = 1i64;
    while top < max {
        top = match top.to_string().chars().next() {
            Some('1') => top * 2,
            Some('2') => top * 5 / 2,
            _ => top * 2,
        };
    }
    let n = i64::try_from(rows.len()).unwrap_or(1).max(1);
    let step = (width - left - 4) / n;
    let y = |v: i64| 8 + plot_h - v * plot_h / top;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"Calls and replays {}\">",
        window.per()
    );
    let ticks: &[i64] = if top >= 2 {
        &[0, top / 2, top]
    } else {
        &[0, top]
    };
    for &tick in ticks {
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{left}\" x2=\"{width}\" y1=\"{ty}\" y2=\"{ty}\"></line>\
             <text x=\"{tx}\" y=\"{ly}\" text-anchor=\"end\">{tick}</text>",
            ty = y(tick),
            tx = left - 6,
            ly = y(tick) + 4
        );
    }
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{left}\" x2=\"{left}\" y1=\"8\" y2=\"{y0}\"></line>\
         <line class=\"axis\" x1=\"{left}\" x2=\"{width}\" y1=\"{y0}\" y2=\"{y0}\"></line>",
        y0 = y(0)
    );
    let label_every = (rows.len() / 6).max(1);
    for (i, (at, calls, replays)) in rows.iter().enumerate() {
        let x = left + 2 + i64::try_from(i).unwrap_or(0) * step;
        let half = (step / 2).max(1);
        let (c, r) = (i64::from(*calls), i64::from(*replays));
        let title = format!(
            "{} – {}: {calls} call(s), {replays} replay(s)",
            rfc3339(*at),
            clock_time(*at + window.bucket_ms())
        );
        if c > 0 {
            let _ = write!(
                svg,
                "<rect class=\"s-calls\" x=\"{x}\" y=\"{}\" width=\"{half}\" height=\"{}\"><title>{}</title></rect>",
                y(c),
                y(0) - y(c),
                escape(&title)
            );
        }
        if r > 0 {
            let _ = write!(
                svg,
                "<rect class=\"s-replays\" x=\"{}\" y=\"{}\" width=\"{half}\" height=\"{}\"><title>{}</title></rect>",
                x + half,
                y(r),
                y(0) - y(r),
                escape(&title)
            );
        }
        if i % label_every == 0 || i + 1 == rows.len() {
            let _ = write!(
                svg,
                "<line class=\"axis\" x1=\"{x}\" x2=\"{x}\" y1=\"{y0}\" y2=\"{y1}\"></line>\
                 <text x=\"{x}\" y=\"{ly}\" text-anchor=\"middle\">{label}</text>",
                y0 = y(0),
                y1 = y(0) + 4,
                ly = height - 6,
                label = clock_time(*at)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Per tool, two bars on one scale: its effect retries and its calls with an unknown
/// outcome, with the counts written beside them.
fn trouble_chart(figures: &BTreeMap<String, ToolFigures>) -> String {
    if figures.is_empty() {
        return "<p>No calls in this window.</p>".into();
    }
    let (width, left, row) = (760i64, 160i64, 34i64);
    let max = figures
        .values()
        .map(|f| i64::from(f.effect_retries.max(f.unknown)))
        .max()
        .unwrap_or(0)
        .max(1);
    let n = i64::try_from(figures.len()).unwrap_or(0);
    let height = row * n + 24;
    let scale = |v: i64| v * (width - left - 60) / max;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"Effect retries and unknown outcomes per tool\">\
         <line class=\"axis\" x1=\"{left}\" x2=\"{left}\" y1=\"0\" y2=\"{}\"></line>",
        row * n
    );
    for (i, (tool, f)) in figures.iter().enumerate() {
        let y = row * i64::try_from(i).unwrap_or(0);
        let (r, u) = (i64::from(f.effect_retries), i64::from(f.unknown));
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect class=\"s-retries\" x=\"{left}\" y=\"{}\" width=\"{}\" height=\"12\"><title>{}: {r} effect retries</title></rect>\
             <text x=\"{}\" y=\"{}\">{r} retries</text>\
             <rect class=\"s-unknown\" x=\"{left}\" y=\"{}\" width=\"{}\" height=\"12\"><title>{}: {u} calls with an unknown outcome</title></rect>\
             <text x=\"{}\" y=\"{}\">{u} unknown</text>",
            left - 8,
            y + 18,
            escape(tool),
            y + 3,
            scale(r).max(1),
            escape(tool),
            left + scale(r) + 6,
            y + 13,
            y + 17,
            scale(u).max(1),
            escape(tool),
            left + scale(u) + 6,
            y + 27,
        );
    }
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{left}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\"></line>\
         <text x=\"{left}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max}</text></svg>",
        width - 60,
        row * n + 16,
        width - 60,
        row * n + 16,
        y = row * n
    );
    svg
}

/// `p50 / p95 / p99` of a latency, or a dash.
fn latency(figures: Option<(i64, i64, i64)>) -> String {
    figures
        .map(|(a, b, c)| format!("{} / {} / {}", duration(a), duration(b), duration(c)))
        .unwrap_or_else(|| "–".into())
}

/// The charts page over `entries` (the newest calls) in `window` ending at `now`.
pub fn charts(
    session: &BrowserSession,
    entries: &[JournalEntry],
    window: Window,
    now: i64,
) -> String {
    let start = now - window.ms();
    let within: Vec<JournalEntry> = entries
        .iter()
        .filter(|e| e.created_at >= start)
        .cloned()
        .collect();
    let mut body = String::from("<p class=\"windows\">");
    for w in [Window::Hour, Window::Day] {
        let text = format!("Last {}", w.name());
        if w == window {
            let _ = write!(body, "<strong>{text}</strong> ");
        } else {
            let _ = write!(
                body,
                "{} ",
                link(&format!("{ROOT}/charts?window={}", w.name()), &text)
            );
        }
    }
    let _ = write!(
        body,
        "</p><p class=\"note\">From {} to {} (UTC): {} call(s).</p><h2>Calls and replays {}</h2>\
         <p class=\"legend\"><span class=\"s-calls\"></span>calls made<span class=\"s-replays\"></span>\
         retries answered with the saved outcome (counted where their call was made)</p>",
        rfc3339(start),
        rfc3339(now),
        within.len(),
        window.per()
    );
    body.push_str(&calls_chart(&over_time(&within, window, now), window));
    let figures = per_tool(&within);
    body.push_str(
        "<h2>Effect retries and unknown outcomes per tool</h2><p class=\"legend\"><span class=\"s-retries\"></span>\
         attempts after an effect's first (the same key sent again)<span class=\"s-unknown\"></span>calls with an \
         effect whose outcome is unknown</p>",
    );
    body.push_str(&trouble_chart(&figures));
    body.push_str(
        "<h2>Per tool</h2><table id=\"per-tool\"><thead><tr><th>Tool</th><th>Calls</th>\
         <th>Replays</th><th title=\"calls whose guest ran more than once\">Resumed</th>\
         <th title=\"calls with an effect whose outcome is unknown\">Unknown</th><th>Failed</th>\
         <th title=\"attempts at effects after their first, under the same key\">Effect retries</th>\
         <th title=\"journaled to outcome saved, over calls that completed in one run\">Run latency p50 / p95 / p99</th>\
         <th title=\"effect journaled to answered, over effects answered at their first attempt\">Attempt latency p50 / p95 / p99</th>\
         </tr></thead><tbody>",
    );
    for (tool, f) in figures {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&tool),
            f.calls,
            f.replays,
            f.retried,
            f.unknown,
            f.failed,
            f.effect_retries,
            latency(f.run_latency),
            latency(f.attempt_latency),
        );
    }
    body.push_str("</tbody></table><p class=\"note\">Run latency leaves out calls that ran more than once: their time includes the wait for a retry or an operator. The host's /metrics has the same counters since it started.</p>");
    page("Charts", Some(session), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tool: &str, created_at: i64, completed_at: Option<i64>, runs: u32) -> JournalEntry {
        JournalEntry {
            key: format!("{tool}{created_at}"),
            conversation: "c".into(),
            tool: tool.into(),
            state: if completed_at.is_some() {
                "completed"
            } else {
                "incomplete"
            }
            .into(),
            arguments: None,
            runs,
            replays: 1,
            tool_call_ids: Vec::new(),
            outcome: None,
            summary: completed_at.map(|_| "success".into()),
            created_at,
            completed_at,
            expires_at: None,
            effects: Vec::new(),
            component: None,
            lease_owner: None,
            lease_expires_at: None,
            holding: String::new(),
            judged: 0,
            generation: None,
            cancelled: false,
        }
    }

    #[test]
    fn figures_count_per_tool_and_take_nearest_rank_percentiles() {
        let mut entries: Vec<JournalEntry> = (1..=100)
            .map(|i| entry("a", i * 1000, Some(i * 1000 + i), 1))
            .collect();
        entries.push(entry("b", 5, None, 2));
        // A call resumed after a long wait: its run count leaves it out of run latency.
        entries.push(entry("a", 0, Some(10_000_000), 2));
        let figures = per_tool(&entries);
        assert_eq!(figures["a"].calls, 101);
        assert_eq!(figures["a"].run_latency, Some((50, 95, 99)));
        assert_eq!(figures["a"].replays, 101);
        assert_eq!((figures["b"].calls, figures["b"].retried), (1, 1));
        assert_eq!(figures["b"].run_latency, None);
    }

    #[test]
    fn attempt_latency_is_of_first_attempts_and_retries_are_counted() {
        let mut e = entry("a", 0, Some(50_000), 2);
        e.effects = vec![effect(1, 100, 400), effect(3, 100, 40_000)];
        let figures = per_tool(&[e]);
        assert_eq!(figures["a"].attempt_latency, Some((300, 300, 300)));
        assert_eq!(figures["a"].effect_retries, 2);
        assert_eq!(figures["a"].run_latency, None, "two runs");
    }

    fn effect(attempts: u32, created_at: i64, updated_at: i64) -> crate::journal::JournalEffect {
        crate::journal::JournalEffect {
            seq: 0,
            key: "k".into(),
            provider: "http".into(),
            class: "keyed".into(),
            operation: "request".into(),
            state: "done".into(),
            attempts,
            response: None,
            last_error: None,
            resolution: None,
            created_at,
            updated_at,
            catalog_class: None,
        }
    }

    #[test]
    fn calls_per_minute_cover_the_last_hour_ending_now() {
        let now = 600 * MINUTE_MS + 30_000;
        let entries = [
            entry("a", 600 * MINUTE_MS + 5, None, 1),
            entry("a", 600 * MINUTE_MS + 9, None, 1),
            entry("a", 599 * MINUTE_MS, None, 1),
            entry("a", 500 * MINUTE_MS, None, 1),
        ];
        let minutes = over_time(&entries, Window::Hour, now);
        assert_eq!(minutes.len(), 60);
        assert_eq!(minutes.last(), Some(&(600 * MINUTE_MS, 2, 2)));
        assert_eq!(minutes[58], (599 * MINUTE_MS, 1, 1));
        assert_eq!(
            minutes.iter().map(|(_, n, _)| n).sum::<u32>(),
            3,
            "older ones left out"
        );
        let quarters = over_time(&entries, Window::Day, now);
        assert_eq!(quarters.len(), 96);
        assert_eq!(quarters.iter().map(|(_, n, _)| n).sum::<u32>(), 4);
    }
}
