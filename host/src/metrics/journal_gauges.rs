//! The gauges a scrape reads from the journal (the outbox's depth, the effects
//! without a definitive answer, the stuck and running calls), and whether the journal
//! answered (`justonce_journal_up`). A scrape while the journal is down shows `0`
//! there and the last values read in the gauges, so the alerts on them keep their
//! series instead of going blank when they are needed most.

use std::sync::Mutex;

use super::text::Text;
use super::{OutboxDepth, render_attention, render_unknown};

/// What one scrape read from the journal; a `None` is a read that failed.
#[derive(Debug, Default)]
pub(crate) struct Reading {
    /// Whether the journal answered this scrape.
    pub up: bool,
    /// The outbox's depth.
    pub outbox: Option<OutboxDepth>,
    /// The effects without a definitive answer.
    pub unknown: Option<Unknown>,
    /// The calls stuck, and those running by host.
    pub attention: Option<Attention>,
}

/// The effects without a definitive answer (see [`render_unknown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unknown {
    /// In flight, or their outcome unknown.
    pub pending: u64,
    /// Of those, the ones waiting for a person.
    pub unresolved: usize,
}

/// The calls that need an operator's eye (see [`render_attention`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attention {
    /// Stuck with an unknown outcome.
    pub stuck: u64,
    /// Running now, by the host holding each.
    pub running_by_host: Vec<(String, u64)>,
}

/// The last value of each gauge read from the journal, kept between scrapes.
#[derive(Debug, Default)]
pub(crate) struct JournalGauges(Mutex<Last>);

#[derive(Debug, Default)]
struct Last {
    outbox: Option<OutboxDepth>,
    unknown: Option<Unknown>,
    attention: Option<Attention>,
}

impl JournalGauges {
    /// Writes `justonce_journal_up` from `reading`, and each gauge: as `reading` has
    /// it, or, where its read failed, as last read (not at all before the first read
    /// that succeeded).
    pub(crate) fn render(&self, reading: Reading, out: &mut Text) {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(outbox) = reading.outbox {
            last.outbox = Some(outbox);
        }
        if let Some(unknown) = reading.unknown {
            last.unknown = Some(unknown);
        }
        if let Some(attention) = reading.attention {
            last.attention = Some(attention);
        }
        out.family(
            "justonce_journal_up",
            "gauge",
            "Whether the journal answered this scrape (1) or not (0); the gauges read from it keep their last values while it does not.",
        );
        out.sample("justonce_journal_up", &[], u8::from(reading.up));
        if let Some(outbox) = &last.outbox {
            outbox.render(out);
        }
        if let Some(unknown) = &last.unknown {
            render_unknown(unknown.pending, unknown.unresolved, out);
        }
        if let Some(attention) = &last.attention {
            render_attention(attention.stuck, &attention.running_by_host, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample;

    fn rendered(gauges: &JournalGauges, reading: Reading) -> String {
        let mut text = Text::default();
        gauges.render(reading, &mut text);
        text.finish()
    }

    fn read(stuck: u64) -> Reading {
        Reading {
            up: true,
            outbox: Some(OutboxDepth {
                pending: 2,
                retrying: 0,
                failed: 1,
            }),
            unknown: Some(Unknown {
                pending: 3,
                unresolved: 1,
            }),
            attention: Some(Attention {
                stuck,
                running_by_host: vec![("h1".into(), 4)],
            }),
        }
    }

    #[test]
    fn while_the_journal_is_down_its_gauges_keep_the_last_values_read() {
        let gauges = JournalGauges::default();
        rendered(&gauges, read(5));
        let down = rendered(&gauges, Reading::default());
        for (series, value) in [
            ("justonce_journal_up", 0.0),
            ("justonce_calls_stuck", 5.0),
            (r#"justonce_calls_running{host="h1"}"#, 4.0),
            ("justonce_effects_pending", 3.0),
            ("justonce_effects_unresolved", 1.0),
            (r#"justonce_outbox_messages{state="failed"}"#, 1.0),
        ] {
            assert_eq!(sample(&down, series), Some(value), "{series} in\n{down}");
        }
        // The opposite: a read that succeeds again replaces the value kept.
        let back = rendered(&gauges, read(0));
        assert_eq!(sample(&back, "justonce_journal_up"), Some(1.0));
        assert_eq!(sample(&back, "justonce_calls_stuck"), Some(0.0));
    }

    #[test]
    fn a_gauge_never_read_is_not_made_up() {
        let down = rendered(&JournalGauges::default(), Reading::default());
        assert_eq!(sample(&down, "justonce_journal_up"), Some(0.0));
        assert_eq!(sample(&down, "justonce_calls_stuck"), None, "{down}");
        assert_eq!(sample(&down, "justonce_effects_pending"), None, "{down}");
    }
}
