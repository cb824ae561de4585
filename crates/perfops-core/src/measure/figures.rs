//! The histograms of [`Stats`] that `summary.json`'s figures show beside
//! latency and service time (a stream's first event, gaps, events, duration:
//! each row of `stats!` whose `summary` is not `Never`), as one flattened
//! map of `NAME_ms` (durations) or `NAME` (counts) to their figures. A
//! histogram added to the table with `summary: NonZero` reaches the summary,
//! `compare` and the report's rows by itself.
//!
//! It owns the JSON of those figures, not the figures around them
//! (`perfops-report`'s `run.rs`). Read leniently: a summary written before
//! a histogram existed lacks its key, and reads as an empty histogram's.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::HistogramSummary;
use super::stats::{HistogramKind, Shown, Stats};

/// Figures of the histograms a summary shows, by [`HistogramKind`]; those
/// empty (a run that streamed nothing) are not written.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HistogramFigures {
    values: [Option<HistogramSummary>; HistogramKind::COUNT],
}

impl HistogramFigures {
    /// The figures of `stats`' histograms that a summary shows.
    pub fn of(stats: &Stats) -> HistogramFigures {
        let mut out = HistogramFigures::default();
        for &h in HistogramKind::ALL {
            let hist = stats.histogram(h);
            let shown = match h.in_summary() {
                Shown::Always => true,
                Shown::NonZero => !hist.is_empty(),
                Shown::Never => false,
            };
            if shown {
                out.values[h as usize] = Some(hist.summary_in(h.unit()));
            }
        }
        out
    }

    /// The figures of `h`, if the summary has them.
    pub fn get(&self, h: HistogramKind) -> Option<&HistogramSummary> {
        self.values[h as usize].as_ref()
    }

    /// Those present, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (HistogramKind, &HistogramSummary)> {
        HistogramKind::ALL.iter().filter_map(|&h| self.get(h).map(|s| (h, s)))
    }

    /// No histogram to show.
    pub fn is_empty(&self) -> bool {
        self.values.iter().all(Option::is_none)
    }
}

impl Serialize for HistogramFigures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (h, s) in self.iter() {
            map.serialize_entry(&h.summary_key(), s)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for HistogramFigures {
    /// Leniently: a key that is no histogram's is left to the line around it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<HistogramFigures, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HistogramFigures;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of histograms' figures")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HistogramFigures, A::Error> {
                let mut out = HistogramFigures::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let kind = HistogramKind::ALL
                        .iter()
                        .copied()
                        .find(|h| h.in_summary() != Shown::Never && h.summary_key() == key);
                    match kind {
                        Some(h) => out.values[h as usize] = Some(map.next_value()?),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn written_when_filled_and_read_back() {
        // Nothing streamed: nothing written, so older readers and goldens see no change.
        let quiet = Stats::default();
        assert_eq!(serde_json::to_string(&HistogramFigures::of(&quiet)).unwrap(), "{}");
        let mut s = Stats::default();
        s.first_event.record(Duration::from_millis(12));
        s.events.record_count(0); // an answer without events counts as 0, not as 1
        s.events.record_count(7);
        // latency is never among them: it has fields of its own.
        s.latency.record(Duration::from_millis(1));
        let f = HistogramFigures::of(&s);
        let json = serde_json::to_value(f).unwrap();
        // (key, count, max): a duration in ms, a count as it is.
        let cases: [(&str, u64, f64); 2] = [("first_event_ms", 1, 12.0), ("events", 2, 7.0)];
        for (key, count, max) in cases {
            assert_eq!(json[key]["count"], count, "{key}: {json}");
            assert!((json[key]["max"].as_f64().unwrap() - max).abs() < 0.02, "{key}: {json}");
        }
        assert_eq!(json["events"]["min"], 0.0, "{json}");
        assert!(json.get("latency_ms").is_none() && json.get("event_gap_ms").is_none(), "{json}");
        // Read back among other keys, which it leaves alone.
        let mut line = json.clone();
        line["name"] = "x".into();
        let back: HistogramFigures = serde_json::from_value(line).unwrap();
        assert_eq!(back, f);
        // A summary from before these histograms reads as empty.
        let old: HistogramFigures = serde_json::from_str(r#"{"latency_ms":{"count":1}}"#).unwrap();
        assert!(old.is_empty());
    }
}
