//! The plain counters of [`Stats`] as the results files write them: a
//! series line's, a part's, a summary's figures' and `quick --json`'s
//! counters are one [`Counters`] each, flattened into their line, its keys and rules
//! (written always, when not zero, or not at all; what a file from before a
//! counter reads it as) taken from the one declaration in `stats.rs`. A
//! counter added there reaches every file by itself, under its field name.
//!
//! It owns the JSON of the counters, not the lines around them (those are
//! `perfops-report`'s `run.rs`), nor the failures by kind (a map by name,
//! [`FailureCounts`](super::FailureCounts) and the `failures` keys).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::stats::{Counter, Shown, Stats};

/// Which file a [`Counters`] is written into: its rule per counter.
pub trait Place {
    /// How `c` appears in this file.
    fn shown(c: Counter) -> Shown;
}

/// A `series.jsonl` line (one second of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeriesPlace;
/// One (stage, step) part of a series line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartPlace;
/// `quick --json`'s summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuickPlace;
/// `summary.json`'s figures (a stage's, a step's, the total's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SummaryPlace;

impl Place for SeriesPlace {
    fn shown(c: Counter) -> Shown {
        c.in_series()
    }
}
impl Place for PartPlace {
    fn shown(c: Counter) -> Shown {
        c.in_part()
    }
}
impl Place for QuickPlace {
    fn shown(c: Counter) -> Shown {
        c.in_quick()
    }
}
impl Place for SummaryPlace {
    fn shown(c: Counter) -> Shown {
        c.in_summary()
    }
}

/// The counters of one line of a results file, by [`Counter`]; those the
/// file does not hold ([`Shown::Never`]) are 0 and not written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Counters<P> {
    values: [u64; Counter::COUNT],
    place: PhantomData<P>,
}

/// A series line's counters.
pub type SeriesCounters = Counters<SeriesPlace>;
/// A part's counters.
pub type PartCounters = Counters<PartPlace>;
/// `quick --json`'s counters.
pub type QuickCounters = Counters<QuickPlace>;
/// `summary.json`'s figures' counters.
pub type SummaryCounters = Counters<SummaryPlace>;

impl<P> Default for Counters<P> {
    fn default() -> Counters<P> {
        Counters { values: [0; Counter::COUNT], place: PhantomData }
    }
}

impl<P: Place> Counters<P> {
    /// The counters of `stats` this file holds.
    pub fn of(stats: &Stats) -> Counters<P> {
        let mut out = Counters::default();
        for &c in Counter::ALL {
            if P::shown(c) != Shown::Never {
                out.values[c as usize] = stats.counter(c);
            }
        }
        out
    }

    /// Add them to `stats`' counters (a part read back).
    pub fn add_to(&self, stats: &mut Stats) {
        for &c in Counter::ALL {
            *stats.counter_mut(c) += self.values[c as usize];
        }
    }
}

impl<P> Index<Counter> for Counters<P> {
    type Output = u64;
    fn index(&self, c: Counter) -> &u64 {
        &self.values[c as usize]
    }
}

impl<P> IndexMut<Counter> for Counters<P> {
    fn index_mut(&mut self, c: Counter) -> &mut u64 {
        &mut self.values[c as usize]
    }
}

impl<P: Place> fmt::Debug for Counters<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = Counter::ALL.iter().filter(|&&c| P::shown(c) != Shown::Never);
        f.debug_map().entries(shown.map(|&c| (c.name(), self.values[c as usize]))).finish()
    }
}

impl<P: Place> Serialize for Counters<P> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for &c in Counter::ALL {
            let v = self.values[c as usize];
            match P::shown(c) {
                Shown::Always => map.serialize_entry(c.name(), &v)?,
                Shown::NonZero if v != 0 => map.serialize_entry(c.name(), &v)?,
                Shown::NonZero | Shown::Never => {}
            }
        }
        map.end()
    }
}

impl<'de, P: Place> Deserialize<'de> for Counters<P> {
    /// Leniently, as the lines around it: a counter missing reads as 0 (or
    /// as the counter its declaration says older files meant), a key that
    /// is no counter of this file is left to the line.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Counters<P>, D::Error> {
        struct V<P>(PhantomData<P>);
        impl<'de, P: Place> Visitor<'de> for V<P> {
            type Value = Counters<P>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of counters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Counters<P>, A::Error> {
                let mut out = Counters::default();
                let mut present = [false; Counter::COUNT];
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match Counter::from_name(&key).filter(|&c| P::shown(c) != Shown::Never) {
                        Some(c) => {
                            out.values[c as usize] = map.next_value()?;
                            present[c as usize] = true;
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                for &c in Counter::ALL {
                    if let Some(from) = c.when_absent().filter(|_| !present[c as usize] && P::shown(c) != Shown::Never)
                    {
                        out.values[c as usize] = out.values[from as usize];
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Stats {
        // Every counter a different value: a counter written under another's name shows.
        let mut s = Stats::default();
        for (i, &c) in Counter::ALL.iter().enumerate() {
            *s.counter_mut(c) = 10 + i as u64;
        }
        s
    }

    #[test]
    fn every_file_writes_what_the_declaration_says() {
        let s = stats();
        // (what, JSON, the keys it must have, the keys it must not)
        let cases: [(&str, serde_json::Value, &[&str], &[&str]); 3] = [
            // A series line: no connects, no arrivals_answered (its achieved_rate says it).
            (
                "series",
                serde_json::to_value(SeriesCounters::of(&s)).unwrap(),
                &["sent", "iterations", "completed", "dropped", "bytes_in", "bytes_out", "goaways", "stream_waits"],
                &["connects", "arrivals_answered"],
            ),
            // A part: every counter (merge reads them back).
            ("part", serde_json::to_value(PartCounters::of(&s)).unwrap(), &["connects", "arrivals_answered"], &[]),
            // quick: no flows.
            (
                "quick",
                serde_json::to_value(QuickCounters::of(&s)).unwrap(),
                &["connects", "bytes_in"],
                &["iterations", "arrivals_answered"],
            ),
        ];
        for (what, json, have, lack) in cases {
            for k in have {
                let c = Counter::from_name(k).unwrap();
                assert_eq!(json[k], s.counter(c), "{what}: {k}");
            }
            for k in lack {
                assert!(json.get(k).is_none(), "{what}: {k} in {json}");
            }
        }
        // HTTP/2's counters are left out when zero, as before they existed.
        let json = serde_json::to_value(SeriesCounters::of(&Stats { sent: 1, ..Stats::default() })).unwrap();
        assert!(json.get("goaways").is_none() && json.get("stream_waits").is_none() && json["sent"] == 1);
    }

    #[test]
    fn read_back_leniently() {
        // (JSON, sent, iterations, arrivals_answered): each way an older or hand-made file reads.
        let cases: [(&str, u64, u64, u64); 4] = [
            // Everything present.
            (r#"{"sent":3,"iterations":2,"arrivals_answered":1}"#, 3, 2, 1),
            // A part written before arrivals_answered existed: it reads as iterations.
            (r#"{"sent":3,"iterations":2}"#, 3, 2, 2),
            // Keys that are not counters are left alone.
            (r#"{"stage":1,"failures":{"x":1},"sent":3}"#, 3, 0, 0),
            // Nothing: zeros.
            ("{}", 0, 0, 0),
        ];
        for (json, sent, iterations, answered) in cases {
            let c: PartCounters = serde_json::from_str(json).unwrap();
            assert_eq!(
                (c[Counter::Sent], c[Counter::Iterations], c[Counter::ArrivalsAnswered]),
                (sent, iterations, answered),
                "{json}"
            );
        }
        // A part's counters round trip whole.
        let s = stats();
        let back: PartCounters = serde_json::from_str(&serde_json::to_string(&PartCounters::of(&s)).unwrap()).unwrap();
        let mut into = Stats::default();
        back.add_to(&mut into);
        assert_eq!(into.counters(), s.counters());
    }
}
