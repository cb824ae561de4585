//! The output seam: what a run's seconds are shown or kept by, with a
//! lifecycle (k6's `Output`: start, samples, stop, "must not block").
//!
//! ```text
//!   start(meta) ──> second(s) ─> second(s) ─> ... ──> finish(summary)
//!   meta.json's     each Second the pipeline placed,   the summary the run
//!   RunMeta         on the collector thread             concluded (run or quick)
//! ```
//!
//! This module owns the [`Output`] trait, what it is given at each end
//! ([`RunMeta`] at the start, an [`End`] at the finish), the per-load list
//! ([`OutputList`]) the pipeline hands each second to, and [`Copied`], a
//! second an output may keep. It does not own the choice of outputs (the
//! registry by name, `perfops_run::outputs`) nor anything that may stop the load: that is
//! a decision (`perfops_core::pipeline::Sink`: the judge, `abort_when`, a
//! target that is down), handed each second before any output.
//!
//! Why here and not in the pure core: an output starts with what a results
//! directory's `meta.json` holds and finishes with what `summary.json`
//! holds; both types are this crate's, and a second copy of their fields in
//! the core would drift. The pipeline keeps knowing nothing of outputs: the
//! list is one `Sink` to it, one that can fail but never decides.
//!
//! **Non-blocking.** [`Output::second`] runs on the collector thread, before
//! the next second is gathered, the `abort_when` decision is made on it and
//! the workers get their histograms back: it must return in microseconds.
//! Anything slower (a network push, a pipe a reader may leave full) goes
//! through [`crate::detach::Detached`], which runs the output on a thread of
//! its own behind a bounded buffer and counts what it had to drop.

use std::sync::Arc;
use std::time::Duration;

use perfops_core::measure::Interval;
use perfops_core::pipeline::control::{ControlEvent, Steer};
use perfops_core::pipeline::{ClosedStage, Flow, Second, Sink, SinkError};
use perfops_core::telemetry::watched::{ProbeResult, Sample};
use serde::Serialize;

use crate::quick::QuickSummary;
use crate::run::{RunMeta, RunSummary};

/// What a run concluded, as an output's finish receives it: `run`, `limit`,
/// `sweep`, a coordinator (and `merge`) end with a [`RunSummary`], `quick`
/// with its own [`QuickSummary`]. Serialized as the summary itself.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum End<'a> {
    /// `summary.json`'s content.
    Run(&'a RunSummary),
    /// `quick --json`'s content.
    Quick(&'a QuickSummary),
}

impl End<'_> {
    /// An owned copy, for an output that finishes on another thread.
    pub fn owned(&self) -> OwnedEnd {
        match self {
            End::Run(s) => OwnedEnd::Run(Box::new((*s).clone())),
            End::Quick(s) => OwnedEnd::Quick(Box::new((*s).clone())),
        }
    }
}

/// [`End`], owned.
#[derive(Debug, Clone)]
pub enum OwnedEnd {
    /// A run's summary.
    Run(Box<RunSummary>),
    /// A quick run's summary.
    Quick(Box<QuickSummary>),
}

impl OwnedEnd {
    /// Borrowed again.
    pub fn end(&self) -> End<'_> {
        match self {
            OwnedEnd::Run(s) => End::Run(s),
            OwnedEnd::Quick(s) => End::Quick(s),
        }
    }
}

/// Something that shows or keeps a run's seconds: the results directory, the
/// live line, the Prometheus endpoint, a JSON-lines stream.
///
/// Called in order: [`Output::start`] once (before the first load),
/// [`Output::second`] for every second of every load (a `limit` runs several),
/// [`Output::finish`] once with the summary. An error stops the load, as a
/// failed results writer does: the seconds after it are still handed on.
pub trait Output {
    /// The run begins: what its `meta.json` says (name, kind, start, steps,
    /// planned stages).
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        let _ = meta;
        Ok(())
    }

    /// One second, as the pipeline placed it. Must return in microseconds
    /// (see the module doc): a slow output is wrapped in
    /// [`crate::detach::Detached`].
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError>;

    /// The run is over: its summary. Called once, after the last second.
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        let _ = end;
        Ok(())
    }

    /// The seconds are over (called once, before [`Output::notes`] and
    /// [`Output::finish`]): an output that delivers them elsewhere tries to
    /// deliver what it still holds, within a bound of its own, so that its
    /// notes say what could not be delivered before the summary is written.
    fn drain(&mut self) {}

    /// What the user should hear about this output once the seconds are
    /// over (seconds it dropped or could not deliver), said on stderr and
    /// in the summary's warnings.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The run's steering, for an output that offers control (the live
    /// page); handed once, before [`Output::start`]. Others ignore it.
    fn steer(&mut self, steer: Arc<dyn Steer>) {
        let _ = steer;
    }

    /// The run's `report.html`, once the results writer made it, before
    /// [`Output::finish`]: for an output that shows it (the live page
    /// becomes it). Not called for a run without a results directory
    /// (`quick`). Others ignore it.
    fn report(&mut self, html: &str) {
        let _ = html;
    }
}

impl<O: Output + ?Sized> Output for &mut O {
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        (**self).start(meta)
    }
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        (**self).second(second)
    }
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        (**self).finish(end)
    }
    fn drain(&mut self) {
        (**self).drain()
    }
    fn notes(&self) -> Vec<String> {
        (**self).notes()
    }
    fn steer(&mut self, steer: Arc<dyn Steer>) {
        (**self).steer(steer)
    }
    fn report(&mut self, html: &str) {
        (**self).report(html)
    }
}

impl<O: Output + ?Sized> Output for Box<O> {
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        (**self).start(meta)
    }
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        (**self).second(second)
    }
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        (**self).finish(end)
    }
    fn drain(&mut self) {
        (**self).drain()
    }
    fn notes(&self) -> Vec<String> {
        (**self).notes()
    }
    fn steer(&mut self, steer: Arc<dyn Steer>) {
        (**self).steer(steer)
    }
    fn report(&mut self, html: &str) {
        (**self).report(html)
    }
}

/// The outputs of one load, in order, as one sink of the pipeline: each
/// second goes to every output even when one fails; the failures of a
/// second are reported together. An output never stops the load by choice.
pub struct OutputList<'s>(Vec<Box<dyn Output + 's>>);

impl<'s> OutputList<'s> {
    /// These outputs, in this order.
    pub fn new(outputs: Vec<Box<dyn Output + 's>>) -> Self {
        OutputList(outputs)
    }
}

impl Sink for OutputList<'_> {
    fn second(&mut self, second: &Second<'_>) -> Result<Flow, SinkError> {
        let mut failed: Vec<String> = Vec::new();
        for output in &mut self.0 {
            if let Err(e) = output.second(second) {
                failed.push(e.0);
            }
        }
        if failed.is_empty() { Ok(Flow::Continue) } else { Err(SinkError(failed.join("; "))) }
    }
}

/// A second an output may keep past its call: an owned copy of the interval
/// (its histograms are copies, never the collector's, which go back to the
/// workers) and of where the pipeline placed it.
#[derive(Debug, Clone)]
pub struct Copied {
    interval: Interval,
    t: u32,
    start: Duration,
    stage: String,
    draining: bool,
    step_names: Arc<[String]>,
    stage_names: Arc<[String]>,
    events: Vec<ControlEvent>,
    stages: Vec<ClosedStage>,
    watched: Vec<Sample>,
    probes: Vec<ProbeResult>,
}

impl Copied {
    /// Copy `second`, into `old`'s memory when there is one (a copy an
    /// output is done with): its histograms are overwritten where new ones
    /// would be allocated, ~8 MB a second with 5 steps (measured with 5
    /// steps: 0.20 ms into a reused copy, 0.54 to 0.75 ms into new memory;
    /// see `crate::detach`).
    pub fn of(second: &Second<'_>, old: Option<Copied>) -> Copied {
        let interval = match old {
            Some(old) => refill(old.interval, second.interval),
            None => second.interval.clone(),
        };
        Copied {
            interval,
            t: second.t,
            start: second.start,
            stage: second.stage.to_string(),
            draining: second.draining,
            step_names: second.step_names.into(),
            stage_names: second.stage_names.into(),
            events: second.events.to_vec(),
            stages: second.stages.to_vec(),
            watched: second.watched.to_vec(),
            probes: second.probes.to_vec(),
        }
    }

    /// The second again, as an output takes it.
    pub fn second(&self) -> Second<'_> {
        Second {
            interval: &self.interval,
            t: self.t,
            start: self.start,
            stage: &self.stage,
            draining: self.draining,
            step_names: &self.step_names,
            stage_names: &self.stage_names,
            events: &self.events,
            stages: &self.stages,
            watched: &self.watched,
            probes: &self.probes,
        }
    }
}

/// `from`, copied into `into`'s memory: each `Stats` cleared and merged
/// again, which is exact (merging into an empty one adds nothing else).
fn refill(mut into: Interval, from: &Interval) -> Interval {
    // Destructured, so that a new field cannot be forgotten here.
    let Interval { index, length, in_flight, target, stats, parts, samples } = from;
    (into.index, into.length, into.in_flight, into.target) = (*index, *length, *in_flight, *target);
    // Few and small (the first failing exchanges of the run): copied.
    into.samples.clone_from(samples);
    into.stats.clear();
    into.stats.merge(stats);
    into.parts.truncate(parts.len());
    for (i, (key, part)) in parts.iter().enumerate() {
        match into.parts.get_mut(i) {
            Some((k, kept)) => {
                *k = *key;
                kept.clear();
                kept.merge(part);
            }
            None => into.parts.push((*key, part.clone())),
        }
    }
    into
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Remembers the seconds it saw; fails when told to.
    struct Seen<'a> {
        seen: &'a mut Vec<(&'static str, u32)>,
        name: &'static str,
        fail: bool,
    }

    impl Output for Seen<'_> {
        fn second(&mut self, s: &Second<'_>) -> Result<(), SinkError> {
            self.seen.push((self.name, s.t));
            if self.fail { Err(SinkError(format!("{} failed", self.name))) } else { Ok(()) }
        }
    }

    fn second(iv: &Interval) -> Second<'_> {
        Second {
            interval: iv,
            t: 4,
            start: Duration::from_secs(4),
            stage: "a",
            draining: false,
            step_names: &[],
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        }
    }

    /// Every output sees the second, in order, even after one failed; the
    /// failures are one error, and no output can ask for a stop.
    #[test]
    fn a_list_hands_each_second_to_every_output_and_reports_every_failure() {
        let mut seen = Vec::new();
        let iv = Interval::empty(4);
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        let result = {
            let mut list = OutputList::new(vec![
                Box::new(Seen { seen: &mut a, name: "a", fail: true }),
                Box::new(Seen { seen: &mut b, name: "b", fail: false }),
                Box::new(Seen { seen: &mut c, name: "c", fail: true }),
            ]);
            list.second(&second(&iv))
        };
        seen.extend(a);
        seen.extend(b);
        seen.extend(c);
        assert_eq!(seen, vec![("a", 4), ("b", 4), ("c", 4)]);
        assert_eq!(result, Err(SinkError("a failed; c failed".into())));
    }

    /// A copy says what the second said.
    #[test]
    fn a_copy_is_the_second() {
        let iv = Interval { in_flight: 7, ..Interval::empty(2) };
        let names = vec!["login".to_string(), "orders".to_string()];
        let s = Second { step_names: &names, ..second(&iv) };
        let copy = Copied::of(&s, None);
        let back = copy.second();
        assert_eq!((back.t, back.stage, back.interval.in_flight, back.step_names), (4, "a", 7, &names[..]));
    }

    /// A copy made in the memory of an older one is the second, whatever
    /// the older one held: more parts, fewer, other values.
    #[test]
    fn a_copy_in_reused_memory_is_the_second() {
        use perfops_core::measure::{Key, Stats};
        let stats = |n: u64| {
            let mut st = Stats { sent: n, completed: n, ..Stats::default() };
            for v in 1..=n {
                st.latency.record(Duration::from_micros(v * 100));
            }
            st
        };
        let iv = |index: u32, parts: &[(u16, u64)]| Interval {
            in_flight: u64::from(index),
            target: Some(f64::from(index)),
            length: Duration::from_millis(900),
            stats: stats(parts.iter().map(|p| p.1).sum()),
            parts: parts.iter().map(|&(step, n)| (Key { stage: 0, step }, stats(n))).collect(),
            ..Interval::empty(index)
        };
        let cases = [
            // The old copy had more parts than the new second: the extra ones go.
            (iv(1, &[(0, 5), (1, 7), (2, 9)]), iv(2, &[(1, 3)])),
            // Fewer: the new ones are added.
            (iv(3, &[]), iv(4, &[(0, 2), (1, 4)])),
            // As many, other values: nothing of the old is left.
            (iv(5, &[(0, 50), (1, 70)]), iv(6, &[(0, 1), (1, 2)])),
        ];
        for (old, new) in cases {
            let old = Copied::of(&second(&old), None);
            let copy = Copied::of(&second(&new), Some(old));
            let got = copy.second().interval;
            let what = format!("second {}", new.index);
            assert_eq!(
                (got.index, got.length, got.in_flight, got.target),
                (new.index, new.length, new.in_flight, new.target),
                "{what}"
            );
            assert_eq!(got.stats, new.stats, "{what}");
            assert_eq!(got.parts, new.parts, "{what}");
        }
    }
}
