//! One second of a load, merged over whatever produced it: the unit every
//! per-second consumer (results writer, judge, live line, metrics exporter)
//! reads. It owns the data only; who made it (the local engine's workers
//! today, remote agents next) and who reads it (see [`crate::pipeline`]) are
//! not its business.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::time::Duration;

use super::{FailureSamples, Stats};

/// Where a measurement belongs: the stage its arrival was due in, and the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Stage index.
    pub stage: u16,
    /// Global step index (the engine's `Work::step_names` name them).
    pub step: u16,
}

/// One second of the run (the last one may be shorter), merged over workers.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Second number, from 0.
    pub index: u32,
    /// Length of the interval (1 s, except at the end).
    pub length: Duration,
    /// Requests in flight at the end of the interval.
    pub in_flight: u64,
    /// Open model: arrivals the schedule put in this interval (this shard's share).
    pub target: Option<f64>,
    /// What happened in it, all together.
    pub stats: Stats,
    /// The same, by (stage of the arrival, step).
    pub parts: Vec<(Key, Stats)>,
    /// The failing exchanges the workers kept in this second (the first
    /// few of each step and failure kind, over the run, per worker):
    /// bounded, merged first by time.
    pub samples: FailureSamples,
}

impl Interval {
    /// An empty second number `index`, to merge others into.
    pub fn empty(index: u32) -> Interval {
        Interval {
            index,
            length: Duration::ZERO,
            in_flight: 0,
            target: None,
            stats: Stats::default(),
            parts: Vec::new(),
            samples: FailureSamples::default(),
        }
    }

    /// Add `other`, the same second as another generator measured it (a
    /// shard, an agent): parts by key, totals, in-flight counts and targets
    /// added; the length is the longer one (a last second cut shorter on one
    /// machine). Associative and order-free, like [`Stats::merge`], so
    /// shards merged in any order or grouping give the same second.
    pub fn merge(&mut self, other: &Interval) {
        self.length = self.length.max(other.length);
        self.in_flight += other.in_flight;
        self.target = match (self.target, other.target) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.stats.merge(&other.stats);
        let mut parts: BTreeMap<Key, Stats> = std::mem::take(&mut self.parts).into_iter().collect();
        for (key, st) in &other.parts {
            parts.entry(*key).or_default().merge(st);
        }
        self.parts = parts.into_iter().collect();
        self.samples.merge(&other.samples);
    }

    /// The parts merged by step index, whatever stage their arrivals were due
    /// in. A step with one part (within a stage, every step) is borrowed, not
    /// copied: a copy is ~1.3 MB of histograms, every second.
    pub fn by_step(&self) -> BTreeMap<u16, Cow<'_, Stats>> {
        let mut out: BTreeMap<u16, Cow<'_, Stats>> = BTreeMap::new();
        for (key, s) in &self.parts {
            match out.entry(key.step) {
                Entry::Vacant(e) => {
                    e.insert(Cow::Borrowed(s));
                }
                Entry::Occupied(mut e) => e.get_mut().to_mut().merge(s),
            }
        }
        out
    }
}

/// The name of step `step`: its name in `names`, or its index if it has none.
pub fn step_name(names: &[String], step: u16) -> String {
    names.get(usize::from(step)).cloned().unwrap_or_else(|| step.to_string())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use proptest::prelude::*;

    use super::*;
    use crate::measure::{FailureKind, FailureSample};

    /// A second with a part per (key, latency in µs) given.
    fn second(index: u32, length_ms: u64, values: &[(u16, u16, u16)]) -> Interval {
        let mut iv = Interval::empty(index);
        iv.length = Duration::from_millis(length_ms);
        iv.target = Some(values.len() as f64 / 2.0);
        let mut parts: BTreeMap<Key, Stats> = BTreeMap::new();
        for &(stage, step, us) in values {
            let st = parts.entry(Key { stage: stage % 2, step: step % 3 }).or_default();
            st.sent += 1;
            st.completed += 1;
            st.iterations += u64::from(us % 2);
            st.latency.record(Duration::from_micros(u64::from(us) + 1));
            st.service.record(Duration::from_micros(u64::from(us) / 2 + 1));
            // One value in three failed and was kept as a sample by its worker.
            if us % 3 == 0 {
                let sample = FailureSample { t: f64::from(us) / 1e3, status: Some(503), ..FailureSample::default() };
                iv.samples.add((step % 3, FailureKind::Http5xx), sample);
            }
        }
        for st in parts.values() {
            iv.stats.merge(st);
        }
        iv.in_flight = values.len() as u64 % 5;
        iv.parts = parts.into_iter().collect();
        iv
    }

    fn merged(seconds: &[&Interval]) -> Interval {
        let mut out = Interval::empty(0);
        for s in seconds {
            out.merge(s);
        }
        out
    }

    fn same(a: &Interval, b: &Interval) -> bool {
        // Targets are sums of floats: equal to the last bits is not promised.
        let targets = match (a.target, b.target) {
            (Some(x), Some(y)) => (x - y).abs() < 1e-9,
            (x, y) => x == y,
        };
        a.length == b.length
            && a.in_flight == b.in_flight
            && a.stats == b.stats
            && a.parts == b.parts
            && a.samples == b.samples
            && targets
    }

    proptest! {
        /// #13: shards' seconds merge associatively and in any order, and
        /// the merged histograms count every value of every shard.
        #[test]
        fn seconds_merge_associatively_and_in_any_order(
            a in prop::collection::vec((0u16..4, 0u16..6, 1u16..60000), 0..30),
            b in prop::collection::vec((0u16..4, 0u16..6, 1u16..60000), 0..30),
            c in prop::collection::vec((0u16..4, 0u16..6, 1u16..60000), 0..30),
            lengths in (1u64..1000, 1u64..1000, 1u64..1000),
        ) {
            let (a, b, c) = (second(3, lengths.0, &a), second(3, lengths.1, &b), second(3, lengths.2, &c));
            let mut ab = a.clone();
            ab.merge(&b);
            let mut bc = b.clone();
            bc.merge(&c);
            let left = merged(&[&ab, &c]);
            let right = merged(&[&a, &bc]);
            prop_assert!(same(&left, &right), "(a + b) + c == a + (b + c)");
            prop_assert!(same(&left, &merged(&[&c, &a, &b])), "order-free");
            prop_assert!(same(&left, &merged(&[&b, &c, &a])), "order-free");
            let count = a.stats.latency.len() + b.stats.latency.len() + c.stats.latency.len();
            prop_assert_eq!(left.stats.latency.len(), count);
            let by_parts: u64 = left.parts.iter().map(|(_, s)| s.latency.len()).sum();
            prop_assert_eq!(by_parts, count, "the parts add up to the total");
            prop_assert_eq!(left.length, a.length.max(b.length).max(c.length));
            // The samples too: the first few of each key over the three, bounded.
            for (key, kept) in left.samples.iter() {
                prop_assert!(kept.len() <= crate::measure::PER_KEY);
                let mut all: Vec<f64> =
                    [&a, &b, &c].iter().flat_map(|s| s.samples.of(key).iter().map(|x| x.t)).collect();
                all.sort_by(f64::total_cmp);
                all.truncate(crate::measure::PER_KEY);
                prop_assert_eq!(kept.iter().map(|x| x.t).collect::<Vec<_>>(), all, "the first by time");
            }
        }
    }

    fn part(stage: u16, step: u16, completed: u64) -> (Key, Stats) {
        (Key { stage, step }, Stats { completed, ..Stats::default() })
    }

    /// A step seen in one stage is borrowed; a step across a stage boundary
    /// (two parts in the second) is merged into a copy.
    #[test]
    fn by_step_merges_stages_and_borrows_the_rest() {
        let iv = Interval {
            index: 3,
            length: Duration::from_secs(1),
            in_flight: 0,
            target: None,
            stats: Stats::default(),
            parts: vec![part(0, 0, 5), part(0, 1, 7), part(1, 0, 2)],
            samples: FailureSamples::default(),
        };
        let steps = iv.by_step();
        assert_eq!(steps.len(), 2);
        assert!(matches!(steps[&0], Cow::Owned(_)), "step 0 is in two stages: merged");
        assert_eq!(steps[&0].completed, 7);
        assert!(matches!(steps[&1], Cow::Borrowed(_)), "step 1 is in one: borrowed");
        assert_eq!(steps[&1].completed, 7);
    }
}
