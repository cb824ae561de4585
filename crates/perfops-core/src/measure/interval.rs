//! One second of a load, merged over whatever produced it: the unit every
//! per-second consumer (results writer, judge, live line, metrics exporter)
//! reads. It owns the data only; who made it (the local engine's workers
//! today, remote agents next) and who reads it (see [`crate::pipeline`]) are
//! not its business.

use std::collections::BTreeMap;
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
    /// The parts merged by step index, whatever stage their arrivals were due in.
    pub fn by_step(&self) -> BTreeMap<u16, Stats> {
        let mut out: BTreeMap<u16, Stats> = BTreeMap::new();
        for (key, s) in &self.parts {
            out.entry(key.step).or_default().merge(s);
        }
        out
    }
}

/// The name of step `step`: its name in `names`, or its index if it has none.
pub fn step_name(names: &[String], step: u16) -> String {
    names.get(usize::from(step)).cloned().unwrap_or_else(|| step.to_string())
}
