//! The console's pictures, over the newest calls: calls per hour, and per tool the
//! calls, replays, retried runs, unknown outcomes, failures and latency
//! percentiles. SVG drawn on the server (no script, no inline style).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::html::{escape, page};
use super::sessions::BrowserSession;
use super::view::states;
use crate::clock::rfc3339;
use crate::journal::JournalEntry;

/// One hour, in milliseconds.
const HOUR_MS: i64 = 3_600_000;

/// How many hours the timeline shows, ending with the newest call's.
const HOURS: i64 = 24;

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
    /// Completion latency percentiles (p50, p95, p99) in milliseconds, over the
    /// completed calls.
    pub latency: Option<(i64, i64, i64)>,
}

/// The `p`th percentile (nearest rank) of `sorted`, which is not empty.
fn percentile(sorted: &[i64], p: usize) -> i64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Each tool's figures over `entries`.
pub fn per_tool(entries: &[JournalEntry]) -> BTreeMap<String, ToolFigures> {
    let mut figures: BTreeMap<String, ToolFigures> = BTreeMap::new();
    let mut latencies: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for e in entries {
        let f = figures.entry(e.tool.clone()).or_default();
        let s = states(e);
        f.calls += 1;
        f.replays += e.replays;
        f.retried += u32::from(e.runs > 1);
        f.unknown += u32::from(s.contains(&"unknown"));
        f.failed += u32::from(s.contains(&"failed") || s.contains(&"abandoned"));
        if let Some(done) = e.completed_at {
            latencies
                .entry(e.tool.clone())
                .or_default()
                .push(done - e.created_at);
        }
    }
    for (tool, mut times) in latencies {
        times.sort_unstable();
        if let Some(f) = figures.get_mut(&tool) {
            f.latency = Some((
                percentile(&times, 50),
                percentile(&times, 95),
                percentile(&times, 99),
            ));
        }
    }
    figures
}

/// Calls per hour for the [`HOURS`] hours ending with the newest call's: (start of
/// the hour, calls).
pub fn per_hour(entries: &[JournalEntry]) -> Vec<(i64, u32)> {
    let Some(newest) = entries.iter().map(|e| e.created_at).max() else {
        return Vec::new();
    };
    let last = newest.div_euclid(HOUR_MS) * HOUR_MS;
    let first = last - (HOURS - 1) * HOUR_MS;
    let mut counts = vec![0u32; usize::try_from(HOURS).unwrap_or(24)];
    for e in entries.iter().filter(|e| e.created_at >= first) {
        let slot = usize::try_from((e.created_at - first) / HOUR_MS).unwrap_or(0);
        if let Some(count) = counts.get_mut(slot) {
            *count += 1;
        }
    }
    (0..HOURS)
        .map(|i| first + i * HOUR_MS)
        .zip(counts)
        .collect()
}

/// A bar chart of `bars` (label, value), `width` pixels wide.
fn bars(bars: &[(String, u32)], width: u32) -> String {
    let max = bars.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    let (height, gap) = (120u32, 2u32);
    let step = (width / u32::try_from(bars.len().max(1)).unwrap_or(1)).max(3);
    let mut svg = format!(
        "<svg class=\"chart\" width=\"{}\" height=\"{}\" role=\"img\">",
        step * u32::try_from(bars.len()).unwrap_or(0),
        height + 4
    );
    for (i, (label, value)) in bars.iter().enumerate() {
        let h = value * height / max;
        let x = u32::try_from(i).unwrap_or(0) * step;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{h}\" fill=\"#3b6e8f\"><title>{}: {value}</title></rect>",
            height - h,
            step - gap,
            escape(label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The charts page over `entries` (the newest calls).
pub fn charts(session: &BrowserSession, entries: &[JournalEntry]) -> String {
    let mut body = format!(
        "<p class=\"note\">Over the newest {} calls.</p><h2>Calls per hour</h2>",
        entries.len()
    );
    let hours: Vec<(String, u32)> = per_hour(entries)
        .into_iter()
        .map(|(at, n)| (rfc3339(at), n))
        .collect();
    body.push_str(&bars(&hours, 720));
    if let (Some((first, _)), Some((last, _))) = (hours.first(), hours.last()) {
        let _ = write!(
            body,
            "<p class=\"note\">From {} to {} (hover a bar for its count).</p>",
            escape(first),
            escape(last)
        );
    }
    body.push_str(
        "<h2>Per tool</h2><table id=\"per-tool\"><thead><tr><th>Tool</th><th>Calls</th>\
         <th>Replays</th><th>Retried</th><th>Unknown</th><th>Failed</th>\
         <th>Latency p50 / p95 / p99</th></tr></thead><tbody>",
    );
    for (tool, f) in per_tool(entries) {
        let latency = f
            .latency
            .map(|(a, b, c)| format!("{a} / {b} / {c} ms"))
            .unwrap_or_default();
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{latency}</td></tr>",
            escape(&tool),
            f.calls,
            f.replays,
            f.retried,
            f.unknown,
            f.failed
        );
    }
    body.push_str("</tbody></table>");
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
            effects: Vec::new(),
            component: None,
            lease_owner: None,
            lease_expires_at: None,
            holding: String::new(),
            judged: 0,
        }
    }

    #[test]
    fn figures_count_per_tool_and_take_nearest_rank_percentiles() {
        let mut entries: Vec<JournalEntry> = (1..=100)
            .map(|i| entry("a", i * 1000, Some(i * 1000 + i), 1))
            .collect();
        entries.push(entry("b", 5, None, 2));
        let figures = per_tool(&entries);
        assert_eq!(figures["a"].calls, 100);
        assert_eq!(figures["a"].latency, Some((50, 95, 99)));
        assert_eq!(figures["a"].replays, 100);
        assert_eq!((figures["b"].calls, figures["b"].retried), (1, 1));
        assert_eq!(figures["b"].latency, None);
    }

    #[test]
    fn calls_per_hour_end_with_the_newest_calls_hour() {
        let entries = [
            entry("a", 10 * HOUR_MS + 5, None, 1),
            entry("a", 10 * HOUR_MS + 9, None, 1),
            entry("a", 9 * HOUR_MS, None, 1),
            entry("a", HOUR_MS * -30, None, 1),
        ];
        let hours = per_hour(&entries);
        assert_eq!(hours.len(), 24);
        assert_eq!(hours.last(), Some(&(10 * HOUR_MS, 2)));
        assert_eq!(hours[22], (9 * HOUR_MS, 1));
        assert_eq!(
            hours.iter().map(|(_, n)| n).sum::<u32>(),
            3,
            "older ones left out"
        );
    }
}
