//! A second by key, written so that seconds of several generators add up
//! exactly (#13): `perfops run --shard I/N` (and `merge`) write, beside each
//! `series.jsonl` line's totals, its parts by (stage, step) key — counters in
//! the line's `parts`, every histogram of each part in `latency.hlog` under a
//! tag `<histogram>@<stage>.<step>` — and [`read_seconds`] turns a directory
//! back into the [`Interval`]s the engine produced, with nothing rounded.
//!
//! ```text
//!   series.jsonl  {"t":3, ..., "parts":[{"stage":0,"step":1,"sent":120,...}]}
//!   latency.hlog  latency      (totals, for HdrHistogram's own tools)
//!                 latency@0.1  service@0.1  latency_ok@0.1  service_ok@0.1
//!                 connect@0.1  tls@0.1  ttfb@0.1
//! ```
//!
//! Percentiles are never added: a merged second's p99 is read from the sum
//! of the shards' histograms. It owns the format of the parts and reading a
//! directory back; what to do with the seconds (merging shards, judging) is
//! the caller's.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use perfops_core::measure::{
    Counter, FailureKind, FailureSamples, Histogram, HistogramKind, Interval, Key, PartCounters, Stats,
};

use perfops_core::telemetry::watched::{ProbeResult, Sample};

use crate::read::{ReportError, RunFiles, for_each_interval};
use crate::run::{PartLine, RunMeta, RunSummary, SeriesLine, failures};

// The histograms of a part are tagged by their field name (`latency@0.1`):
// `HistogramKind`'s names, from `Stats`' one declaration.

fn histogram_mut<'a>(st: &'a mut Stats, name: &str) -> Option<&'a mut Histogram> {
    HistogramKind::from_name(name).map(|h| st.histogram_mut(h))
}

/// The `latency.hlog` tag of histogram `name` of the part `key`.
pub fn part_tag(name: &str, key: Key) -> String {
    format!("{name}@{}.{}", key.stage, key.step)
}

/// The histogram name and key of a part's tag; `None` for the totals' tags.
pub fn parse_part_tag(tag: &str) -> Option<(&str, Key)> {
    let (name, key) = tag.split_once('@')?;
    let (stage, step) = key.split_once('.')?;
    Some((name, Key { stage: stage.parse().ok()?, step: step.parse().ok()? }))
}

/// The counters of each part of `iv`, for its `series.jsonl` line.
pub fn part_lines(iv: &Interval) -> Vec<PartLine> {
    iv.parts
        .iter()
        .map(|(key, st)| PartLine {
            stage: key.stage,
            step: key.step,
            counters: PartCounters::of(st),
            failures: failures(st),
        })
        .collect()
}

/// Every non-empty histogram of every part of `iv`, tagged.
pub fn part_histograms(iv: &Interval) -> Vec<(String, &Histogram)> {
    let mut out = Vec::new();
    for (key, st) in &iv.parts {
        for &h in HistogramKind::ALL {
            let (name, h) = (h.name(), st.histogram(h));
            if !h.is_empty() {
                out.push((part_tag(name, *key), h));
            }
        }
    }
    out
}

/// The failing exchanges `failures.jsonl` kept, by the second each ended in,
/// keyed by their step's index in `steps` (`meta.json`'s step names): what
/// the workers' seconds carried when they were written, so that a merge
/// keeps them. Lines that do not read, or name a step or kind this run did
/// not have, are left out (counted in a note); each sample is held to a kept
/// one's bounds, as the file may come from anywhere, and each second keeps
/// the first few of each key, as a worker's does.
fn failure_samples(dir: &Path, steps: &[String], notes: &mut Vec<String>) -> BTreeMap<u32, FailureSamples> {
    let mut out: BTreeMap<u32, FailureSamples> = BTreeMap::new();
    let Some(bytes) = crate::read::read_file(dir, crate::failures::FAILURES_FILE, notes) else { return out };
    let mut unknown = 0usize;
    for line in crate::failures::failure_lines(&String::from_utf8_lossy(&bytes)) {
        let step = |name: &str| steps.iter().position(|n| n == name).and_then(|i| u16::try_from(i).ok());
        let Some((step, kind, sample)) = line.and_then(|(name, kind, sample)| Some((step(&name)?, kind, sample)))
        else {
            unknown += 1;
            continue;
        };
        let t = if sample.t.is_finite() && sample.t > 0.0 { sample.t.min(f64::from(u32::MAX)) as u32 } else { 0 };
        out.entry(t).or_default().add((step, kind), sample);
    }
    if unknown > 0 {
        notes.push(format!(
            "{}: {unknown} line(s) left out (unreadable, or of a step or kind this run did not have)",
            crate::failures::FAILURES_FILE
        ));
    }
    out
}

/// A results directory read back as the seconds that made it.
#[derive(Debug)]
pub struct ReadBack {
    /// `meta.json` (default when missing: the caller decides what that means).
    pub meta: RunMeta,
    /// `summary.json`, if the run finished.
    pub summary: Option<RunSummary>,
    /// Each second, in order, as the engine produced it.
    pub seconds: Vec<Interval>,
    /// `watch.jsonl`.
    pub watch: Vec<Sample>,
    /// `probe.jsonl`.
    pub probe: Vec<ProbeResult>,
    /// `scenario.yaml`, redacted.
    pub scenario: Option<String>,
    /// `events.jsonl`: the actions by hand on this run.
    pub events: Vec<perfops_core::pipeline::control::ControlEvent>,
    /// What could not be read.
    pub notes: Vec<String>,
    /// Seconds whose line says requests ended but whose histograms are not
    /// in `latency.hlog` (a generator killed between the two writes): their
    /// latency is unknown, so a merge names them.
    pub without_histograms: Vec<u32>,
}

/// Why a directory cannot be read back as seconds.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    /// The directory itself.
    #[error(transparent)]
    Dir(#[from] ReportError),
    /// A run written without its parts (not a shard): its seconds can only be
    /// added approximately, so they are not.
    #[error("{0}: its seconds have no parts by step (it was not run with --shard), so they cannot be merged exactly")]
    NoParts(String),
    /// A histogram that does not fit perfops' range, or that is not in the log.
    #[error("{dir}: latency.hlog {problem}")]
    Hlog {
        /// The directory.
        dir: String,
        /// What is wrong.
        problem: String,
    },
}

/// Read `dir` back: each `series.jsonl` line with its parts, their
/// histograms from `latency.hlog` (aligned on the second their interval
/// starts in).
pub fn read_seconds(dir: &Path) -> Result<ReadBack, ReadBackError> {
    let files = RunFiles::read(dir)?;
    let name = dir.display().to_string();
    if files.series.iter().any(|l| {
        l.parts.is_empty()
            && (l.counters[Counter::Sent] > 0 || l.counters[Counter::Dropped] > 0 || l.counters[Counter::Completed] > 0)
    }) {
        return Err(ReadBackError::NoParts(name));
    }
    let mut notes = files.notes.clone();
    let mut by_t: BTreeMap<u32, (SeriesLine, BTreeMap<Key, Stats>)> = BTreeMap::new();
    for line in files.series {
        let mut parts = BTreeMap::new();
        for p in &line.parts {
            let mut st = Stats::default();
            p.counters.add_to(&mut st);
            for (kind, n) in &p.failures {
                match FailureKind::from_name(kind) {
                    Some(k) => st.failures.add_n(k, *n),
                    None => notes.push(format!("second {}: unknown failure kind `{kind}` left out", line.t)),
                }
            }
            parts.insert(Key { stage: p.stage, step: p.step }, st);
        }
        by_t.insert(line.t, (line, parts));
    }
    let mut problem = None;
    if let Some(log) = &files.hlog {
        let bad = for_each_interval(log, |iv| {
            let Some((hname, key)) = iv.tag.as_deref().and_then(parse_part_tag) else { return };
            let t = iv.start_s.round().max(0.0) as u32;
            let target =
                by_t.get_mut(&t).and_then(|(_, parts)| parts.get_mut(&key)).and_then(|st| histogram_mut(st, hname));
            match target.map(|h| h.merge_hdr(&iv.histogram)) {
                Some(true) => {}
                Some(false) => {
                    problem.get_or_insert_with(|| format!("has a histogram out of range at t={t} ({hname})"));
                }
                None => {
                    problem.get_or_insert_with(|| {
                        format!("has {hname}@{}.{} at t={t}, which series.jsonl lacks", key.stage, key.step)
                    });
                }
            }
        });
        if bad > 0 {
            notes.push(format!("latency.hlog: {bad} histogram(s) could not be decoded"));
        }
    } else if !by_t.is_empty() {
        problem = Some("is missing".into());
    }
    if let Some(problem) = problem {
        return Err(ReadBackError::Hlog { dir: name, problem });
    }
    let without_histograms = by_t
        .iter()
        .filter(|(_, (_, parts))| {
            let ended: u64 = parts.values().map(|st| st.completed + st.failures.total()).sum();
            ended > 0 && parts.values().all(|st| st.latency.is_empty())
        })
        .map(|(t, _)| *t)
        .collect();
    let mut samples = failure_samples(dir, files.meta.as_ref().map_or(&[][..], |m| &m.steps), &mut notes);
    let last = by_t.keys().next_back().copied();
    let seconds = by_t
        .into_iter()
        .map(|(t, (line, parts))| {
            let mut stats = Stats::default();
            for st in parts.values() {
                stats.merge(st);
            }
            Interval {
                index: t,
                length: Duration::from_secs_f64(line.length_s.max(0.0)),
                in_flight: line.in_flight,
                target: line.target_rate.map(|r| r * line.length_s),
                stats,
                parts: parts.into_iter().collect(),
                // Each failing exchange in the second it ended in; those past the last second
                // (the drain's) in the last.
                samples: {
                    let mut kept = samples.remove(&t).unwrap_or_default();
                    if Some(t) == last {
                        std::mem::take(&mut samples).values().for_each(|later| kept.merge(later));
                    }
                    kept
                },
            }
        })
        .collect();
    Ok(ReadBack {
        meta: files.meta.unwrap_or_default(),
        summary: files.summary,
        seconds,
        watch: files.watch,
        probe: files.probe,
        scenario: files.scenario,
        events: files.events,
        notes,
        without_histograms,
    })
}
