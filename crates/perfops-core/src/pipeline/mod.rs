//! One second of a load, handed to one ordered list of sinks.
//!
//! An interval source (the local engine's collector today, remote agents
//! next) produces [`Interval`]s in order; a [`Pipeline`] places each on the
//! session clock and in its stage, then hands it to its sinks in the order
//! they were added (the spirit of vegeta's `Reporter` and k6's outputs;
//! `perfops_run::outputs::pipeline` is where a run adds them):
//!
//! ```text
//!   source ──Interval──> Pipeline ──Second──> judge ─> outputs (by name, results writer, live line)
//!   (engine, agents)     │ places it: t = offset + index, its stage or "(draining)"
//!                        │ after the sinks: a stop (signal, a judge, a failed sink)
//!                        │ ends the arrivals at the end of this second; the ledger counts it
//!                        └─> StageLedger: per stage and step, dropped per second
//! ```
//!
//! It owns the order and the stop decision, nothing else: what a sink writes
//! or shows is the sink's business, and it knows no engine. A sink that fails
//! ([`SinkError`]: a full disk under the results writer) stops the load, as a
//! judge would: measuring on when the results cannot be kept wastes the
//! target's time and hides the failure (#12). The caller hears it as a
//! [`Notice::Failed`] and ends the command with an error.

mod abort;
pub mod control;
mod down;
mod stages;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use abort::AbortWhen;
pub use down::TargetDown;
pub use stages::{Measured, StageLedger, StagePlan, StageResult, StageThroughput};

use crate::analysis::verdict::Judged;
use crate::measure::Interval;
use crate::telemetry::watched::{ProbeResult, Sample};

/// One second as every sink sees it: the interval and where it sits.
#[derive(Debug, Clone, Copy)]
pub struct Second<'a> {
    /// What was measured in it.
    pub interval: &'a Interval,
    /// Its number on the session clock: the load's first second plus its index.
    pub t: u32,
    /// Its start on the session clock.
    pub start: Duration,
    /// The stage it belongs to, or `(draining)` once the arrivals ended.
    pub stage: &'a str,
    /// After the last arrival: only responses to earlier ones.
    pub draining: bool,
    /// Step names, by the index in [`crate::measure::Key::step`].
    pub step_names: &'a [String],
    /// The load's stage names, by the index in [`crate::measure::Key::stage`]:
    /// a part's stage is its arrival's, which may be an earlier stage than
    /// the second's own (a late answer). Empty for a load without stages.
    pub stage_names: &'a [String],
    /// The actions by hand that took effect in it ([`control`]), in order.
    pub events: &'a [control::ControlEvent],
    /// The stages that closed with it, judged ([`Pipeline::judging`]): a
    /// verdict as the stage's figures stand when its responses are in,
    /// before the run's end judges every stage again on everything.
    pub stages: &'a [ClosedStage],
    /// What the watchers read since the second before ([`Sink::watched`]):
    /// `watch.jsonl`'s lines, as written.
    pub watched: &'a [Sample],
    /// The probe checks since the second before: `probe.jsonl`'s lines.
    pub probes: &'a [ProbeResult],
}

/// A stage of the load judged as it closed ([`StageLedger::closing`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedStage {
    /// Its index in the load's stages.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// What the judge said of it.
    pub judged: Judged,
}

impl<'a> Second<'a> {
    /// The stage a part of this second belongs to: its arrival's stage, or
    /// the second's own in a load without stages.
    pub fn stage_of(&self, key: crate::measure::Key) -> &'a str {
        self.stage_names.get(usize::from(key.stage)).map_or(self.stage, String::as_str)
    }

    /// `interval` placed in `stage` at its own index, nothing else said: a
    /// second as a test or a replay starts it (struct update syntax for the rest).
    pub fn new(interval: &'a Interval, stage: &'a str) -> Second<'a> {
        Second {
            interval,
            t: interval.index,
            start: Duration::from_secs(u64::from(interval.index)),
            stage,
            draining: false,
            step_names: &[],
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        }
    }

    /// Arrivals scheduled in it; `None` when closed or draining.
    pub fn target(&self) -> Option<f64> {
        if self.draining { None } else { self.interval.target }
    }
}

/// What a sink wants after a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop the arrivals, for this reason (an `abort_when` rule held).
    Stop(String),
}

/// A sink could not do its work for a second; the load stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// Something that consumes each second of a load, in order, and may stop
/// the load: the seam of decisions (the judge, `abort_when`, a target that is
/// down). What only shows or keeps a second is an output
/// (`perfops_report::output::Output`, with a start and a finish), handed on
/// as one sink that can fail but never decides.
pub trait Sink {
    /// Take one second. An error stops the load and is reported by the
    /// pipeline's caller; the seconds after it (until the arrivals end) are
    /// still handed on, and the sink decides whether it tries again.
    fn second(&mut self, second: &Second<'_>) -> Result<Flow, SinkError>;

    /// Judge the last `new` of `stages` (the load's stages closed so far,
    /// in order: an earlier one is a later one's previous), `events` the
    /// load's actions by hand with the index of the stage each changed.
    /// `None`: this sink judges nothing (all but the judge); the first sink
    /// that answers is the one.
    fn judge(
        &mut self,
        stages: &[StageResult],
        new: usize,
        events: &[(usize, control::ControlEvent)],
    ) -> Option<Vec<Judged>> {
        let _ = (stages, new, events);
        None
    }

    /// What was watched since the last second, taken once a second before
    /// the second is handed on (the judge takes the watchers' lines then),
    /// so that it reaches every sink with the second ([`Second::watched`]).
    /// `None`: this sink watches nothing (all but the judge).
    fn watched(&mut self) -> Option<(Vec<Sample>, Vec<ProbeResult>)> {
        None
    }
}

/// A borrowed sink is a sink: the pipeline holds borrowed and owned ones alike.
impl<S: Sink + ?Sized> Sink for &mut S {
    fn second(&mut self, second: &Second<'_>) -> Result<Flow, SinkError> {
        (**self).second(second)
    }

    fn judge(
        &mut self,
        stages: &[StageResult],
        new: usize,
        events: &[(usize, control::ControlEvent)],
    ) -> Option<Vec<Judged>> {
        (**self).judge(stages, new, events)
    }

    fn watched(&mut self) -> Option<(Vec<Sample>, Vec<ProbeResult>)> {
        (**self).watched()
    }
}

/// What the pipeline tells its caller while a second is handed on, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A sink stopped the load.
    Abort(String),
    /// A sink failed this second: the load stops.
    Failed(SinkError),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Abort(reason) => write!(f, "aborting: {reason}"),
            Notice::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// A re-plan by hand on its way to the pipeline (from the run's steering,
/// on another thread): the event as it will be recorded, the stage it
/// changed, and the stages from its instant on.
#[derive(Debug, Clone)]
pub struct Replanned {
    /// What the results keep of it; `t` on the session clock.
    pub event: control::ControlEvent,
    /// Its instant, from the load's start.
    pub at: Duration,
    /// The index of the stage it changed.
    pub stage: usize,
    /// The stages as re-planned (as many as before; equal before `at`).
    pub stages: Vec<StagePlan>,
    /// A stop: the arrivals end at `at`.
    pub stop: bool,
}

/// Where the steering leaves re-plans for the pipeline to take at its next
/// second: a lock taken once a second by the pipeline, and once per action.
pub type Replans = Arc<Mutex<Vec<Replanned>>>;

/// The driver: one load's seconds, placed and handed to its sinks in order.
pub struct Pipeline<'s> {
    ledger: StageLedger,
    offset: u32,
    step_names: &'s [String],
    /// The ledger's stage names (again after a re-plan), for [`Second::stage_names`].
    stage_names: Vec<String>,
    stop: Arc<AtomicBool>,
    sinks: Vec<Box<dyn Sink + 's>>,
    replans: Option<Replans>,
    /// Events taken from `replans` that no second has carried yet.
    waiting: Vec<control::ControlEvent>,
    events: Vec<(usize, control::ControlEvent)>,
    /// Judge stages as they close, this long (the requests' timeout) after
    /// their end at the latest ([`Pipeline::judging`]).
    grace: Option<Duration>,
    /// The stages closed so far.
    closed: Vec<StageResult>,
}

impl<'s> Pipeline<'s> {
    /// A load whose first second is `offset` on the session clock, counted
    /// per stage by `ledger`; `stop` is the flag the source watches (set by
    /// signals, and here when a sink stops the load).
    pub fn new(ledger: StageLedger, offset: u32, step_names: &'s [String], stop: Arc<AtomicBool>) -> Self {
        Pipeline {
            stage_names: ledger.names(),
            ledger,
            offset,
            step_names,
            stop,
            sinks: Vec::new(),
            replans: None,
            waiting: Vec::new(),
            events: Vec::new(),
            grace: None,
            closed: Vec::new(),
        }
    }

    /// Judge each stage as it closes ([`StageLedger::closing`]: its responses
    /// in, or `grace` past its end), by the first sink that judges
    /// ([`Sink::judge`]), and hand the verdicts on with the second that
    /// closed it ([`Second::stages`]), so that every output sees them as
    /// they come. Once per stage, not per second: the ledger's figures of
    /// the stage are copied then.
    pub fn judging(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// Take the re-plans by hand left in `replans`: the ledger places the
    /// next seconds by them, and each event goes with the second it took
    /// effect in (that starts at its instant); a stop at `T`, with the
    /// second that ends at `T`: the arrivals' last, which there always is.
    pub fn steered(mut self, replans: Replans) -> Self {
        self.replans = Some(replans);
        self
    }

    /// Add `sink` at the end of the list.
    pub fn to(self, sink: &'s mut dyn Sink) -> Self {
        self.then(Box::new(sink))
    }

    /// Add `sink`, owned by the pipeline, at the end of the list (a list of
    /// outputs made for this load).
    pub fn then(mut self, sink: Box<dyn Sink + 's>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Hand `iv` to every sink, in order; `notify` hears aborts and failures
    /// as they happen.
    pub fn second(&mut self, iv: &Interval, notify: &mut dyn FnMut(&Notice)) {
        let at = Duration::from_secs(u64::from(iv.index));
        if let Some(replans) = &self.replans {
            let taken = std::mem::take(&mut *replans.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            for r in taken {
                // Equal to the old plan before `r.at`, which is at or after
                // this second's end: nothing placed so far moves.
                self.ledger.replan(&r.stages);
                self.stage_names = self.ledger.names();
                if r.stop {
                    self.ledger.stop(r.at);
                }
                self.events.push((r.stage, r.event.clone()));
                self.waiting.push(r.event);
            }
        }
        let end_s = f64::from(self.offset) + (at + iv.length).as_secs_f64();
        let stop = |e: &control::ControlEvent| e.action == control::Action::Stop.name();
        let due = self.waiting.iter().take_while(|e| e.t < end_s - 1e-9 || (stop(e) && e.t <= end_s + 1e-9)).count();
        let events: Vec<control::ControlEvent> = self.waiting.drain(..due).collect();
        let closed = self.close(at);
        let (watched, probes) = self.sinks.iter_mut().find_map(|s| s.watched()).unwrap_or_default();
        // A stop decided in this second ends the arrivals at its end, so it
        // cannot change where this second belongs: placed before the sinks run.
        let (stage, draining) = self.ledger.place(at);
        let second = Second {
            interval: iv,
            t: self.offset + iv.index,
            start: Duration::from_secs(u64::from(self.offset)) + at,
            stage,
            draining,
            step_names: self.step_names,
            stage_names: &self.stage_names,
            events: &events,
            stages: &closed,
            watched: &watched,
            probes: &probes,
        };
        for sink in &mut self.sinks {
            match sink.second(&second) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop(reason)) => {
                    notify(&Notice::Abort(reason));
                    self.stop.store(true, Ordering::Relaxed);
                }
                Err(e) => {
                    notify(&Notice::Failed(e));
                    self.stop.store(true, Ordering::Relaxed);
                }
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            // Arrivals stopped within this second.
            self.ledger.stop(at + iv.length);
        }
        self.ledger.add(iv, self.step_names);
    }

    /// The stages that closed by the second starting at `at`, judged.
    fn close(&mut self, at: Duration) -> Vec<ClosedStage> {
        let Some(grace) = self.grace else { return Vec::new() };
        let new = self.ledger.closing(at, grace);
        if new.is_empty() {
            return Vec::new();
        }
        let (n, first) = (new.len(), self.closed.len());
        self.closed.extend(new);
        let judged = self.sinks.iter_mut().find_map(|s| s.judge(&self.closed, n, &self.events)).unwrap_or_default();
        judged
            .into_iter()
            .zip(first..)
            .map(|(judged, index)| ClosedStage { index, name: self.closed[index].plan.name.clone(), judged })
            .collect()
    }

    /// The load is over: what the ledger counted.
    pub fn finish(self) -> Measured {
        Measured { events: self.events, ..self.ledger.finish() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Stats;

    /// Remembers what it saw; stops at second `stop_at`.
    struct Seen {
        seconds: Vec<(u32, String, bool, Option<f64>)>,
        stop_at: Option<u32>,
    }

    impl Sink for Seen {
        fn second(&mut self, s: &Second<'_>) -> Result<Flow, SinkError> {
            self.seconds.push((s.t, s.stage.to_string(), s.draining, s.target()));
            Ok(match self.stop_at {
                Some(k) if k == s.interval.index => Flow::Stop(format!("at {k}")),
                _ => Flow::Continue,
            })
        }
    }

    /// Remembers the events each second carried, and its stage.
    #[derive(Default)]
    struct Events(Vec<(u32, String, Vec<String>)>);

    impl Sink for Events {
        fn second(&mut self, s: &Second<'_>) -> Result<Flow, SinkError> {
            self.0.push((s.t, s.stage.to_string(), s.events.iter().map(|e| format!("{}@{}", e.action, e.t)).collect()));
            Ok(Flow::Continue)
        }
    }

    /// Re-plans by hand: the ledger places the seconds after each by the new
    /// ends, every sink sees each event in the second it took effect in
    /// (a stop: in the arrivals' last), and the measure keeps them.
    #[test]
    fn replans_by_hand_move_the_stages_and_ride_on_their_seconds() {
        let names = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let replans: Replans = Arc::default();
        let mut seen = Events::default();
        // Session clock from 10; a: 0-3 s, b: 3-6 s.
        let ledger = StageLedger::new(&[plan("a", 3), plan("b", 3)], 10.0);
        let mut p = Pipeline::new(ledger, 10, &names, stop.clone()).to(&mut seen).steered(replans.clone());
        let event = |action: &str, t: f64, stage: &str| control::ControlEvent {
            t,
            action: action.into(),
            value: None,
            stage: stage.into(),
            by: "test".into(),
        };
        p.second(&iv(0), &mut |_| {});
        // `next` at load second 1 (session 11): a ends there, b runs 1-4 s.
        replans.lock().unwrap().push(Replanned {
            event: event("next", 11.0, "a"),
            at: Duration::from_secs(1),
            stage: 0,
            stages: vec![plan("a", 1), plan("b", 3)],
            stop: false,
        });
        p.second(&iv(1), &mut |_| {});
        // `stop` at load second 3 (session 13), in b.
        replans.lock().unwrap().push(Replanned {
            event: event("stop", 13.0, "b"),
            at: Duration::from_secs(3),
            stage: 1,
            stages: vec![plan("a", 1), plan("b", 3)],
            stop: true,
        });
        for k in 2..4 {
            p.second(&iv(k), &mut |_| {});
        }
        let measured = p.finish();
        let want = vec![
            (10, "a".to_string(), vec![]),
            (11, "b".into(), vec!["next@11".to_string()]),
            (12, "b".into(), vec!["stop@13".into()]),
            (13, "(draining)".into(), vec![]),
        ];
        assert_eq!(seen.0, want);
        assert!(measured.stopped && !stop.load(Ordering::Relaxed), "a stop by hand is the plan's, not the flag's");
        assert_eq!((measured.stages[0].ran_s, measured.stages[1].ran_s), (1.0, 2.0));
        assert_eq!(
            measured.events.iter().map(|(i, e)| (*i, e.action.as_str())).collect::<Vec<_>>(),
            [(0, "next"), (1, "stop")]
        );
    }

    /// Judges each stage it is handed as holding, and says how many stages
    /// before it it was given (an earlier one is a later one's previous).
    #[derive(Default)]
    struct Judges(Vec<Second2>);
    type Second2 = (u32, Vec<String>);

    impl Sink for Judges {
        fn second(&mut self, s: &Second<'_>) -> Result<Flow, SinkError> {
            self.0.push((
                s.t,
                s.stages.iter().map(|c| format!("{}#{} {:?}", c.name, c.index, c.judged.reasons)).collect(),
            ));
            Ok(Flow::Continue)
        }

        fn judge(
            &mut self,
            stages: &[StageResult],
            new: usize,
            _: &[(usize, control::ControlEvent)],
        ) -> Option<Vec<Judged>> {
            let judged = |s: &StageResult| Judged {
                verdict: crate::analysis::verdict::StageVerdict::Holds,
                reasons: vec![format!("{} s of {}", s.ran_s, stages.len())],
                broke: Vec::new(),
                slo: Vec::new(),
                expected_rate: None,
                generator_limited: false,
            };
            Some(stages[stages.len() - new..].iter().map(judged).collect())
        }
    }

    /// With judging asked for, each stage is judged once, by the sink that
    /// judges, and rides on the second that closed it: here the one after
    /// its end (every second ends with nothing in flight), the last stage
    /// with the drain's first second.
    #[test]
    fn a_stage_judged_as_it_closes_rides_on_the_second_that_closed_it() {
        let names = Vec::new();
        let mut judges = Judges::default();
        let ledger = StageLedger::new(&[plan("a", 2), plan("b", 1)], 5.0);
        let mut p = Pipeline::new(ledger, 5, &names, Arc::default()).to(&mut judges).judging(Duration::from_secs(9));
        for k in 0..4 {
            p.second(&Interval { in_flight: 0, ..iv(k) }, &mut |_| {});
        }
        p.finish();
        let want: Vec<Second2> = vec![
            (5, vec![]),
            (6, vec![]),
            (7, vec!["a#0 [\"2 s of 1\"]".to_string()]),
            (8, vec!["b#1 [\"1 s of 2\"]".to_string()]),
        ];
        assert_eq!(judges.0, want);
    }

    /// Hands on a sample it "read" before each second, as the judge hands on
    /// the watchers' lines.
    struct Reads(u32);

    impl Sink for Reads {
        fn second(&mut self, _: &Second<'_>) -> Result<Flow, SinkError> {
            Ok(Flow::Continue)
        }

        fn watched(&mut self) -> Option<(Vec<Sample>, Vec<ProbeResult>)> {
            self.0 += 1;
            let sample =
                Sample { t: f64::from(self.0) - 0.5, source: "demo".into(), values: vec![("busy".into(), 1.0)] };
            Some((vec![sample], Vec::new()))
        }
    }

    /// Remembers the times of the samples each second carried.
    #[derive(Default)]
    struct Carried(Vec<Vec<f64>>);

    impl Sink for Carried {
        fn second(&mut self, s: &Second<'_>) -> Result<Flow, SinkError> {
            self.0.push(s.watched.iter().map(|w| w.t).collect());
            Ok(Flow::Continue)
        }
    }

    /// What the sink that watches read before a second reaches every sink
    /// with that second, once: here each second carries the one sample read
    /// before it.
    #[test]
    fn what_was_watched_rides_on_the_next_second_once() {
        let names = Vec::new();
        let (mut reads, mut carried) = (Reads(0), Carried::default());
        let ledger = StageLedger::new(&[plan("a", 3)], 0.0);
        let mut p = Pipeline::new(ledger, 0, &names, Arc::default()).to(&mut reads).to(&mut carried);
        for k in 0..3 {
            p.second(&iv(k), &mut |_| {});
        }
        p.finish();
        assert_eq!(carried.0, vec![vec![0.5], vec![1.5], vec![2.5]]);
    }

    struct Broken;

    impl Sink for Broken {
        fn second(&mut self, _: &Second<'_>) -> Result<Flow, SinkError> {
            Err(SinkError("disk full".into()))
        }
    }

    fn iv(index: u32) -> Interval {
        let stats = Stats { iterations: 10, arrivals_answered: 10, ..Stats::default() };
        Interval { index, length: Duration::from_secs(1), target: Some(10.0), stats, ..Interval::empty(index) }
    }

    fn plan(name: &str, secs: u64) -> StagePlan {
        StagePlan { name: name.into(), target_rate: Some(10.0), start_rate: None, duration: Duration::from_secs(secs) }
    }

    #[test]
    fn seconds_are_placed_in_order_and_a_stop_ends_the_arrivals_after_its_second() {
        let names = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let (mut first, mut second) =
            (Seen { seconds: Vec::new(), stop_at: Some(2) }, Seen { seconds: Vec::new(), stop_at: None });
        let mut notices = Vec::new();
        let ledger = StageLedger::new(&[plan("a", 2), plan("b", 3)], 7.0);
        let mut p = Pipeline::new(ledger, 7, &names, stop.clone()).to(&mut first).to(&mut second);
        for k in 0..5 {
            p.second(&iv(k), &mut |n| notices.push(n.clone()));
        }
        let measured = p.finish();
        assert!(stop.load(Ordering::Relaxed));
        assert_eq!(notices, vec![Notice::Abort("at 2".into())]);
        let want = vec![
            // On the session clock from 7; stage a for 2 s, then b.
            (7, "a".to_string(), false, Some(10.0)),
            (8, "a".into(), false, Some(10.0)),
            // The stop's own second still belongs to its stage...
            (9, "b".into(), false, Some(10.0)),
            // ...the next ones drain, with no target.
            (10, "(draining)".into(), true, None),
            (11, "(draining)".into(), true, None),
        ];
        // Every sink sees the same seconds, the one after the stopper too.
        assert_eq!(first.seconds, want);
        assert_eq!(second.seconds, want);
        assert!(measured.stopped);
        assert_eq!(measured.stages[1].ran_s, 1.0, "b ran from 2 s to the stop at 3 s");
        assert_eq!(measured.dropped.iter().map(|d| d.0).collect::<Vec<_>>(), vec![7.0, 8.0, 9.0, 10.0, 11.0]);
    }

    /// #12: a failing sink (a full disk) is reported and stops the load; the
    /// other sinks still see its second.
    #[test]
    fn a_failing_sink_is_reported_and_stops_the_load() {
        let names = Vec::new();
        let (mut broken, mut seen) = (Broken, Seen { seconds: Vec::new(), stop_at: None });
        let mut notices = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let ledger = StageLedger::new(&[plan("a", 2)], 0.0);
        let mut p = Pipeline::new(ledger, 0, &names, stop.clone()).to(&mut broken).to(&mut seen);
        p.second(&iv(0), &mut |n| notices.push(n.to_string()));
        let measured = p.finish();
        assert_eq!(notices, vec!["disk full".to_string()]);
        assert_eq!(seen.seconds.len(), 1);
        assert!(stop.load(Ordering::Relaxed), "the load stops");
        assert!(measured.stopped);
    }
}
