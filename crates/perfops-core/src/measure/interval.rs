//! One second of a load, merged over whatever produced it: the unit every
//! per-second consumer (results writer, judge, live line, metrics exporter)
//! reads. It owns the data only; who made it (the local engine's workers
//! today, remote agents next) and who reads it (see [`crate::pipeline`]) are
//! not its business.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::time::Duration;

use super::Stats;

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
}

impl Interval {
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

    use super::*;

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
        };
        let steps = iv.by_step();
        assert_eq!(steps.len(), 2);
        assert!(matches!(steps[&0], Cow::Owned(_)), "step 0 is in two stages: merged");
        assert_eq!(steps[&0].completed, 7);
        assert!(matches!(steps[&1], Cow::Borrowed(_)), "step 1 is in one: borrowed");
        assert_eq!(steps[&1].completed, 7);
    }
}
