//! One call's story on a time axis, as SVG drawn on the server: when the call was
//! journaled, each effect from its journaling to its last attempt (with how many
//! attempts), the lease of the host holding it (and when it ended), what operators
//! did and who, and when the outcome was saved.
//!
//! The journal keeps the first and last touch of each effect, the current holder of
//! a running call's lease and the operations; it does not keep a row per run or per
//! attempt, so the run and attempt counts are written on the bars.

use std::fmt::Write as _;

use super::html::{escape, relative};
use crate::clock::rfc3339;
use crate::journal::{CallStory, LeaseStatus};

/// The drawing's width and the left margin of the lane names, in pixels.
const WIDTH: i64 = 760;
const LABELS: i64 = 150;
/// One lane's height.
const LANE: i64 = 30;

/// One thing on the axis: a bar from `from` to `to` (a point when equal).
struct Mark {
    lane: String,
    from: i64,
    to: i64,
    class: &'static str,
    text: String,
}

/// The story's marks, lane by lane.
fn marks(story: &CallStory, now: i64) -> Vec<Mark> {
    let mut out = Vec::new();
    let Some(e) = &story.entry else {
        return out;
    };
    let end = e.completed_at.unwrap_or(now);
    out.push(Mark {
        lane: "call".into(),
        from: e.created_at,
        to: end,
        class: if e.completed_at.is_some() {
            "done"
        } else {
            "open"
        },
        text: format!(
            "journaled {}; {} run{}{}",
            rfc3339(e.created_at),
            e.runs,
            if e.runs == 1 { "" } else { "s" },
            e.completed_at
                .map(|at| format!("; outcome saved {}", rfc3339(at)))
                .unwrap_or_else(|| "; no outcome yet".into())
        ),
    });
    for f in &e.effects {
        out.push(Mark {
            lane: format!("#{} {}", f.seq, f.provider),
            from: f.created_at,
            to: f.updated_at,
            class: if f.state == "done" { "done" } else { "pending" },
            text: format!(
                "{}.{}, key {}…: {} attempt{}, {}{}",
                f.provider,
                f.operation,
                f.key.chars().take(12).collect::<String>(),
                f.attempts,
                if f.attempts == 1 { "" } else { "s" },
                f.state,
                f.last_error
                    .as_deref()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            ),
        });
    }
    match e.lease_status(now) {
        LeaseStatus::Live { holder, until } => out.push(Mark {
            lane: "lease".into(),
            from: now.min(until),
            to: until,
            class: "live",
            text: format!("held by {} until {}", holder.label(), rfc3339(until)),
        }),
        LeaseStatus::Ended { holder, at } => {
            let at = at.unwrap_or(now);
            out.push(Mark {
                lane: "lease".into(),
                from: at,
                to: at,
                class: "ended",
                text: format!(
                    "{}'s lease ended {}",
                    holder.map_or_else(|| "its host".into(), |h| h.label()),
                    rfc3339(at)
                ),
            });
        }
        LeaseStatus::Released => {}
    }
    for o in &story.operations {
        out.push(Mark {
            lane: "operators".into(),
            from: o.at,
            to: o.at,
            class: "operation",
            text: format!(
                "{} by {} at {}{}{}",
                o.action.as_str(),
                o.by,
                rfc3339(o.at),
                o.detail["on_host"]
                    .as_str()
                    .map(|h| format!(", run on {h}"))
                    .unwrap_or_default(),
                o.detail["was"]
                    .as_str()
                    .map(|w| format!(" (it was {w})"))
                    .unwrap_or_default()
            ),
        });
    }
    out
}

/// The timeline of `story` at `now`, or an empty string when there is nothing to draw.
pub fn timeline(story: &CallStory, now: i64) -> String {
    let marks = marks(story, now);
    let (Some(start), Some(end)) = (
        marks.iter().map(|m| m.from).min(),
        marks.iter().map(|m| m.to).max(),
    ) else {
        return String::new();
    };
    let span = (end - start).max(1);
    let x = |at: i64| LABELS + (at - start) * (WIDTH - LABELS - 10) / span;
    let mut lanes: Vec<&str> = Vec::new();
    for m in &marks {
        if !lanes.contains(&m.lane.as_str()) {
            lanes.push(&m.lane);
        }
    }
    let height = LANE * i64::try_from(lanes.len()).unwrap_or(0) + 40;
    let mut svg = format!(
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" role=\"img\" \
         aria-label=\"The call's timeline\">"
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = LANE * i64::try_from(i).unwrap_or(0);
        let _ = write!(
            svg,
            "<text class=\"lane\" x=\"0\" y=\"{}\">{}</text>\
             <line class=\"grid\" x1=\"{LABELS}\" x2=\"{WIDTH}\" y1=\"{}\" y2=\"{}\"></line>",
            y + 19,
            escape(lane),
            y + LANE,
            y + LANE
        );
    }
    for m in &marks {
        let lane = lanes.iter().position(|l| *l == m.lane).unwrap_or(0);
        let y = LANE * i64::try_from(lane).unwrap_or(0) + 7;
        let (x1, x2) = (x(m.from), x(m.to));
        if x2 - x1 < 4 {
            let _ = write!(
                svg,
                "<circle class=\"mark m-{}\" cx=\"{x1}\" cy=\"{}\" r=\"7\"><title>{}</title></circle>",
                m.class,
                y + 8,
                escape(&m.text)
            );
        } else {
            let _ = write!(
                svg,
                "<rect class=\"mark m-{}\" x=\"{x1}\" y=\"{y}\" width=\"{}\" height=\"16\" rx=\"3\"><title>{}</title></rect>",
                m.class,
                x2 - x1,
                escape(&m.text)
            );
        }
    }
    // The axis: five ticks, each the time since the first mark; the ends absolute.
    let axis = LANE * i64::try_from(lanes.len()).unwrap_or(0) + 4;
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LABELS}\" x2=\"{}\" y1=\"{axis}\" y2=\"{axis}\"></line>",
        WIDTH - 10
    );
    // Marks all at one instant (or nearly) get one tick, not five on top of each other.
    let ticks = if end - start < 5 { 0 } else { 4 };
    for i in 0..=ticks {
        let at = start + span * i / 4;
        let tx = x(at);
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        if ticks == 0 && i > 0 {
            break;
        }
        let _ = write!(
            svg,
            "<line class=\"axis\" x1=\"{tx}\" x2=\"{tx}\" y1=\"{axis}\" y2=\"{}\"></line>\
             <text class=\"tick\" x=\"{tx}\" y=\"{}\" text-anchor=\"{anchor}\">+{}<title>{}</title></text>",
            axis + 5,
            axis + 18,
            escape(&duration(at - start)),
            rfc3339(at)
        );
    }
    svg.push_str("</svg>");
    let mut out = String::from("<figure class=\"timeline\">");
    out.push_str(&svg);
    let _ = write!(
        out,
        "<figcaption>From {} ({}) to {} ({}); hover a mark for what happened.</figcaption><ul class=\"events\">",
        rfc3339(start),
        relative(start, now),
        rfc3339(end),
        relative(end, now)
    );
    let mut ordered: Vec<&Mark> = marks.iter().collect();
    ordered.sort_by_key(|m| m.from);
    for m in ordered {
        let _ = write!(
            out,
            "<li><span class=\"dot m-{}\"></span>{}: {}</li>",
            m.class,
            escape(&m.lane),
            escape(&m.text)
        );
    }
    out.push_str("</ul></figure>");
    out
}

/// A length of time in the largest unit that reads well: `850 ms`, `12.4 s`,
/// `3.2 min`, `1.5 h`.
pub fn duration(ms: i64) -> String {
    let tenths = |whole: i64, unit: i64| format!("{}.{}", whole / unit, whole % unit * 10 / unit);
    match ms {
        ..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{} s", tenths(ms, 1000)),
        60_000..3_600_000 => format!("{} min", tenths(ms, 60_000)),
        _ => format!("{} h", tenths(ms, 3_600_000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_400), "12.4 s");
        assert_eq!(duration(192_000), "3.2 min");
        assert_eq!(duration(5_400_000), "1.5 h");
    }
}
