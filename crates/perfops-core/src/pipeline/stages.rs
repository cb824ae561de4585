//! A load's stages as measured: which stage a second belongs to, each
//! stage's statistics (by when its arrivals were due) and throughput (by when
//! responses came), per step, and the arrivals dropped each second. This is
//! the accounting every command judges from; the judging itself is in
//! [`crate::analysis`].

use std::collections::BTreeMap;
use std::time::Duration;

use crate::analysis::verdict::{Range, StageFacts};
use crate::measure::{Interval, Stats, step_name};

/// A stage of one load, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePlan {
    /// Its name.
    pub name: String,
    /// Open model: mean scheduled arrivals per second.
    pub target_rate: Option<f64>,
    /// Open model: scheduled arrivals per second at its start; a ramp's
    /// first rate (`None`: the mean's, a constant stage).
    pub start_rate: Option<f64>,
    /// How long it lasts.
    pub duration: Duration,
}

impl StagePlan {
    /// Scheduled arrivals per second `t_s` into the stage (a ramp is linear:
    /// from its start rate to twice its mean less its start at the end).
    pub fn rate_at(&self, t_s: f64) -> Option<f64> {
        let mean = self.target_rate?;
        let start = self.start_rate.unwrap_or(mean);
        let d = self.duration.as_secs_f64();
        let along = if d > 0.0 { (t_s / d).clamp(0.0, 1.0) } else { 1.0 };
        Some(start + 2.0 * (mean - start) * along)
    }

    /// Mean scheduled arrivals per second over its first `ran_s` seconds:
    /// what a stage cut short was asked for while it ran. A ramp stopped
    /// half-way was asked for less than its whole mean:
    ///
    /// ```text
    ///   rate                       ,' to
    ///          mean of the whole ,'
    ///                    ......,'.......
    ///                        ,'
    ///   mean of the part   ,'|
    ///            .......,'...|
    ///   from   ,'            | stop
    ///         |--- ran_s ----|---------|
    /// ```
    pub fn target_over(&self, ran_s: f64) -> Option<f64> {
        let mean = self.target_rate?;
        let start = self.start_rate.unwrap_or(mean);
        let d = self.duration.as_secs_f64();
        let along = if d > 0.0 { (ran_s / d).clamp(0.0, 1.0) } else { 1.0 };
        Some(start + (mean - start) * along)
    }
}

/// A stage of one load, as measured.
#[derive(Debug, Clone)]
pub struct StageResult {
    /// What was planned.
    pub plan: StagePlan,
    /// Start on the session clock, seconds.
    pub from_s: f64,
    /// End on the session clock, seconds: planned, or the stop.
    pub to_s: f64,
    /// How long it ran.
    pub ran_s: f64,
    /// Arrivals answered per second while it ran.
    pub achieved_rate: f64,
    /// The lowest, over its seconds, of the median latency of its first
    /// requests (s): how long a server that holds takes to answer an
    /// arrival, what its achieved rate lags its arrivals by. `None`: none
    /// answered.
    pub first_lag_s: Option<f64>,
    /// Requests of the arrivals due in it.
    pub stats: Stats,
    /// The same by step name.
    pub steps: BTreeMap<String, Stats>,
}

impl StageResult {
    /// Open model: the mean scheduled arrivals per second over the time it
    /// ran, the rate its achieved rate is judged and shown against (the
    /// plan's mean when it ran whole).
    pub fn target_rate(&self) -> Option<f64> {
        self.plan.target_over(self.ran_s)
    }

    /// The scheduled arrivals per second when it ended or was stopped.
    pub fn end_rate(&self) -> Option<f64> {
        self.plan.rate_at(self.ran_s)
    }

    /// Its requests less those of the steps that read their answers as
    /// streams (`stream:`; a step that streamed has the `events` histogram):
    /// what the Nagle / delayed-ACK diagnosis reads. A streamed answer's
    /// service time is the stream's length, which the server's pace sets:
    /// events 40 ms apart put every answer at a multiple of 40 ms above its
    /// first byte, and that is no delayed ACK. All of it when nothing streamed.
    pub fn unstreamed(&self) -> std::borrow::Cow<'_, Stats> {
        if self.steps.values().all(|s| s.events.is_empty()) {
            return std::borrow::Cow::Borrowed(&self.stats);
        }
        let mut out = Stats::default();
        for s in self.steps.values().filter(|s| s.events.is_empty()) {
            out.merge(s);
        }
        std::borrow::Cow::Owned(out)
    }

    /// What [`crate::analysis::verdict::judge`] judges this stage by: its own
    /// figures, what was watched over it, and the rate of `previous` (the
    /// stage before it) when that one ran up to this one's start in the same
    /// load; `limit`'s attempts each start a load, after a cool-down, with
    /// nothing of the last in flight (0 then, as for a first stage).
    pub fn facts<'a>(
        &'a self,
        previous: Option<&StageResult>,
        watched: &'a BTreeMap<String, Range>,
        restarts: &'a [f64],
        unready: &'a [f64],
        generator_cpu: Option<f64>,
    ) -> StageFacts<'a> {
        StageFacts {
            ran_s: self.ran_s,
            planned_s: self.plan.duration.as_secs_f64(),
            stats: &self.stats,
            steps: &self.steps,
            // What it was asked for while it ran: a ramp cut short was asked
            // for less than its whole mean.
            target_rate: self.target_rate(),
            end_rate: self.end_rate(),
            achieved_rate: self.achieved_rate,
            first_lag_s: self.first_lag_s,
            previous_rate: previous
                .filter(|p| p.ran_s > 0.0 && (self.from_s - p.to_s).abs() < 1e-3)
                .and_then(StageResult::end_rate)
                .unwrap_or(0.0),
            watched,
            restarts,
            unready,
            generator_cpu,
        }
    }
}

/// What a [`StageLedger`] counted over one load.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Each stage, in order.
    pub stages: Vec<StageResult>,
    /// Per step name over the load.
    pub steps: BTreeMap<String, Stats>,
    /// Per second on the session clock: arrivals dropped.
    pub dropped: Vec<(f64, u64)>,
    /// The arrivals were stopped (a signal, a judge, or by hand).
    pub stopped: bool,
    /// The actions by hand that took effect, each with the index of the
    /// stage it changed, in order.
    pub events: Vec<(usize, super::control::ControlEvent)>,
}

/// The per-stage accounting of one load.
#[derive(Debug, Clone)]
pub struct StageLedger {
    /// `None`: one unnamed stretch (`quick`), placed under this label and not counted.
    stages: Option<Vec<StagePlan>>,
    label: String,
    offset_s: f64,
    per_stage: Vec<Stats>,
    per_stage_step: Vec<BTreeMap<String, Stats>>,
    steps: BTreeMap<String, Stats>,
    // Throughput is counted when responses arrive (latency by when arrivals
    // were due): a stage past capacity must not look faster because its
    // backlog drained later.
    throughput: StageThroughput,
    // Per stage: the lowest per-second median latency of its first requests
    // (see `StageResult::first_lag_s`).
    first_lag: Vec<Option<f64>>,
    dropped: Vec<(f64, u64)>,
    stopped: bool,
    /// Stages already handed out by [`StageLedger::closing`].
    closed: usize,
    /// The end of the latest second counted that ended with nothing in flight.
    idle_at: Option<Duration>,
}

impl StageLedger {
    /// A load of `stages` (at least one; their durations add up to the
    /// load's) starting at `offset_s` on the session clock.
    pub fn new(stages: &[StagePlan], offset_s: f64) -> StageLedger {
        let mut ends = Vec::with_capacity(stages.len());
        let mut t = Duration::ZERO;
        for s in stages {
            t += s.duration;
            ends.push(t);
        }
        StageLedger {
            stages: Some(stages.to_vec()),
            label: String::new(),
            offset_s,
            per_stage: vec![Stats::default(); stages.len()],
            per_stage_step: vec![BTreeMap::new(); stages.len()],
            steps: BTreeMap::new(),
            throughput: StageThroughput::new(ends),
            first_lag: vec![None; stages.len()],
            dropped: Vec::new(),
            stopped: false,
            closed: 0,
            idle_at: None,
        }
    }

    /// A load without stages: every second is placed under `label`, never
    /// draining, and nothing is counted (the caller keeps the engine's totals).
    pub fn unstaged(label: &str) -> StageLedger {
        StageLedger { stages: None, label: label.to_string(), ..StageLedger::new(&[], 0.0) }
    }

    /// The stages' names, in order (none for a load without stages).
    pub fn names(&self) -> Vec<String> {
        self.stages.iter().flatten().map(|s| s.name.clone()).collect()
    }

    /// The stage ends, as offsets from the load's start.
    pub fn ends(&self) -> &[Duration] {
        &self.throughput.ends
    }

    /// Where the second starting at `at` belongs: its stage's name, or
    /// `(draining)` (true) once the arrivals ended.
    pub fn place(&self, at: Duration) -> (&str, bool) {
        let Some(stages) = &self.stages else { return (&self.label, false) };
        if at >= self.throughput.active_end() {
            return ("(draining)", true);
        }
        let i = self.throughput.ends.iter().position(|&e| at < e).unwrap_or(stages.len().saturating_sub(1));
        (stages.get(i).map_or("", |s| s.name.as_str()), false)
    }

    /// The stages re-planned by hand from some instant on (equal to the
    /// old ones before it, the same number of stages): the seconds already
    /// counted stay where they were, the next ones are placed by the new ends.
    pub fn replan(&mut self, stages: &[StagePlan]) {
        let Some(old) = &mut self.stages else { return };
        if stages.len() != old.len() {
            return;
        }
        old.clone_from_slice(stages);
        let mut t = Duration::ZERO;
        for (end, s) in self.throughput.ends.iter_mut().zip(stages) {
            t += s.duration;
            *end = t;
        }
    }

    /// The arrivals stopped at `at` (the first call counts).
    pub fn stop(&mut self, at: Duration) {
        self.stopped = true;
        self.throughput.stop(at);
    }

    /// Count the second `iv`; `step_names` names its steps.
    pub fn add(&mut self, iv: &Interval, step_names: &[String]) {
        if self.stages.is_none() {
            return;
        }
        for (key, stats) in &iv.parts {
            let name = step_name(step_names, key.step);
            if let Some(s) = self.per_stage.get_mut(usize::from(key.stage)) {
                s.merge(stats);
                self.per_stage_step[usize::from(key.stage)].entry(name.clone()).or_default().merge(stats);
            }
            self.steps.entry(name).or_default().merge(stats);
        }
        self.note_first_lag(iv);
        let at = Duration::from_secs(u64::from(iv.index));
        // Arrivals answered (their first request), not flows ended: a flow's
        // pauses and later steps end it a flow's length later, in the next
        // stage's seconds, and a 5 s warm-up of 10/s read 9.2/s (#32).
        self.throughput.add_second(at, iv.length, iv.stats.arrivals_answered);
        self.dropped.push((self.offset_s + at.as_secs_f64(), iv.stats.dropped));
        if iv.in_flight == 0 {
            self.idle_at = Some(at + iv.length);
        }
    }

    /// The stages that closed by the second starting at `at`, each once, in
    /// order, as measured: a stage closes when its arrivals ended and their
    /// responses are in, which the seconds counted so far (those before
    /// `at`) show as either `grace` (the requests' timeout) past its end, or
    /// a second ending after its end with nothing in flight. Responses to a
    /// stage's arrivals are counted in it whenever they come (by when the
    /// arrivals were due), so judging it at its end would miss its slowest:
    ///
    /// ```text
    ///   stages   |---- A ----|---- B ------------|
    ///   seconds  | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
    ///                        |<- grace ->|            A closes with second 5 (grace 2 s),
    ///                            ^ in flight 0        or with second 4 if second 3 ended idle
    /// ```
    ///
    /// A stage that never ran (after a stop) does not close here; the load's
    /// end judges every stage again, on everything.
    pub fn closing(&mut self, at: Duration, grace: Duration) -> Vec<StageResult> {
        let Some(stages) = &self.stages else { return Vec::new() };
        let mut out = Vec::new();
        while self.closed < stages.len() {
            let i = self.closed;
            let end = self.throughput.ends[i].min(self.throughput.active_end());
            let answered = self.idle_at.is_some_and(|idle| idle >= end);
            if self.throughput.ran(i).is_zero() || !(at >= end + grace || (answered && at >= end)) {
                break;
            }
            out.push(self.result(i, self.per_stage[i].clone(), self.per_stage_step[i].clone()));
            self.closed += 1;
        }
        out
    }

    /// Stage `i` as measured so far, with `stats` and `steps` its figures.
    fn result(&self, i: usize, stats: Stats, steps: BTreeMap<String, Stats>) -> StageResult {
        let plan = self.stages.as_ref().and_then(|s| s.get(i)).cloned().unwrap_or_else(|| StagePlan {
            name: String::new(),
            target_rate: None,
            start_rate: None,
            duration: Duration::ZERO,
        });
        let start = if i == 0 { Duration::ZERO } else { self.throughput.ends[i - 1] };
        let ran = self.throughput.ran(i).as_secs_f64();
        StageResult {
            plan,
            from_s: self.offset_s + start.as_secs_f64(),
            to_s: self.offset_s + start.as_secs_f64() + ran,
            ran_s: ran,
            achieved_rate: self.throughput.rate(i),
            first_lag_s: self.first_lag[i],
            stats,
            steps,
        }
    }

    /// Lower each stage's first-request lag to this second's median latency
    /// of the first requests of its arrivals (the parts that answered
    /// arrivals: only a flow's first step does).
    ///
    /// Subtleness ahead: the lowest second, not the stage's median. A server
    /// whose queue grows answers later and later; over the whole stage its
    /// median latency grows with the backlog, and an allowance of that much
    /// lag forgave the backlog itself: a first stage answered at 95% of its
    /// target held (#32). A server that holds answers as fast in each second.
    fn note_first_lag(&mut self, iv: &Interval) {
        for (stage, lag) in self.first_lag.iter_mut().enumerate() {
            let mut firsts = iv.parts.iter().filter(|(k, s)| usize::from(k.stage) == stage && s.arrivals_answered > 0);
            let median = match (firsts.next(), firsts.next()) {
                (None, _) => continue,
                (Some((_, one)), None) => one.latency.quantile(0.5),
                (Some((_, a)), Some((_, b))) => {
                    let mut h = a.latency.clone();
                    h.merge(&b.latency);
                    for (_, s) in firsts {
                        h.merge(&s.latency);
                    }
                    h.quantile(0.5)
                }
            };
            let median = median.as_secs_f64();
            *lag = Some(lag.map_or(median, |l| l.min(median)));
        }
    }

    /// Each stage as measured, and the rest.
    pub fn finish(mut self) -> Measured {
        let n = self.stages.as_ref().map_or(0, Vec::len);
        let stages = (0..n)
            .map(|i| {
                let (stats, steps) =
                    (std::mem::take(&mut self.per_stage[i]), std::mem::take(&mut self.per_stage_step[i]));
                self.result(i, stats, steps)
            })
            .collect();
        Measured { stages, steps: self.steps, dropped: self.dropped, stopped: self.stopped, events: Vec::new() }
    }
}

/// Throughput per stage, from per-second counts.
///
/// A second that straddles a stage boundary is split by overlap (counts are
/// assumed even within a second), and a stage's rate is over the time it
/// actually ran, so a stage cut short by Ctrl-C or `abort_when` is not
/// divided by its planned length:
///
/// ```text
///   stages  |--- A (1.5 s) ---|--- B (1.5 s) ---|
///   seconds |  0   |   1  |   2  |
///   second 1's count: half to A, half to B
/// ```
#[derive(Debug, Clone)]
pub struct StageThroughput {
    ends: Vec<Duration>,
    counts: Vec<f64>,
    stopped_at: Option<Duration>,
}

impl StageThroughput {
    /// Stages ending at `ends` (offsets from the start, increasing).
    pub fn new(ends: Vec<Duration>) -> StageThroughput {
        StageThroughput { counts: vec![0.0; ends.len()], ends, stopped_at: None }
    }

    /// Arrivals stopped at `at` (the first call counts).
    pub fn stop(&mut self, at: Duration) {
        self.stopped_at.get_or_insert(at);
    }

    /// When arrivals ended: the schedule's end, or the stop.
    pub fn active_end(&self) -> Duration {
        let end = self.ends.last().copied().unwrap_or_default();
        self.stopped_at.map_or(end, |s| s.min(end))
    }

    /// Count `n` events in the second `[start, start + length)`.
    pub fn add_second(&mut self, start: Duration, length: Duration, n: u64) {
        let (from, to) = (start.as_secs_f64(), (start + length).min(self.active_end()).as_secs_f64());
        let span = length.as_secs_f64();
        if to <= from || span <= 0.0 {
            return;
        }
        let mut stage_start = 0.0;
        for (i, end) in self.ends.iter().enumerate() {
            let overlap = (to.min(end.as_secs_f64()) - from.max(stage_start)).max(0.0);
            self.counts[i] += n as f64 * overlap / span;
            stage_start = end.as_secs_f64();
        }
    }

    /// How long stage `i` ran.
    pub fn ran(&self, i: usize) -> Duration {
        let start = if i == 0 { Duration::ZERO } else { self.ends[i - 1] };
        self.active_end().min(self.ends[i]).saturating_sub(start)
    }

    /// Events per second while stage `i` ran (0 if it never ran).
    pub fn rate(&self, i: usize) -> f64 {
        let ran = self.ran(i).as_secs_f64();
        if ran > 0.0 { self.counts[i] / ran } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stage was asked for over the part of it that ran (#review-2:
    /// a ramp cut short was judged against its whole mean and failed on rate).
    #[test]
    fn a_stages_target_is_over_the_time_it_ran() {
        let ramp = StagePlan {
            name: "ramp".into(),
            target_rate: Some(80.0),
            start_rate: Some(10.0),
            duration: Duration::from_secs(60),
        };
        let constant = StagePlan { start_rate: None, target_rate: Some(100.0), ..ramp.clone() };
        // (plan, seconds it ran, mean target over them, rate at that point)
        let cases = [
            (&ramp, 60.0, 80.0, 150.0),      // whole: the plan's mean; it ends at 150/s
            (&ramp, 30.0, 45.0, 80.0),       // stopped half-way: 10 -> 80/s, mean 45
            (&ramp, 0.0, 10.0, 10.0),        // not started: its first rate
            (&ramp, 90.0, 80.0, 150.0),      // never past its end
            (&constant, 30.0, 100.0, 100.0), // a constant stage: the same, cut or not
        ];
        for (plan, ran, mean, at) in cases {
            let got = (plan.target_over(ran).unwrap(), plan.rate_at(ran).unwrap());
            assert!((got.0 - mean).abs() < 1e-9 && (got.1 - at).abs() < 1e-9, "{} after {ran} s: {got:?}", plan.name);
        }
        let closed = StagePlan { target_rate: None, start_rate: None, ..ramp };
        assert_eq!((closed.target_over(10.0), closed.rate_at(10.0)), (None, None), "a closed stage has no target");
    }

    /// The stall diagnosis reads the steps that did not stream: a stream's
    /// length is its server's pace, not a delayed ACK.
    #[test]
    fn a_stage_without_its_streamed_steps() {
        let ms = Duration::from_millis;
        let mut plain = Stats::default();
        plain.service_ok.record(ms(10));
        let mut feed = Stats::default();
        feed.service_ok.record(ms(80));
        feed.events.record_count(3);
        // A streamed step that sent nothing has no events: it is no stream.
        let idle = Stats::default();
        let stage = |steps: &[(&str, &Stats)]| {
            let mut stats = Stats::default();
            for (_, s) in steps {
                stats.merge(s);
            }
            let plan =
                StagePlan { name: "s".into(), target_rate: None, start_rate: None, duration: Duration::from_secs(1) };
            StageResult {
                plan,
                from_s: 0.0,
                to_s: 1.0,
                ran_s: 1.0,
                achieved_rate: 0.0,
                first_lag_s: None,
                stats,
                steps: steps.iter().map(|(n, s)| (n.to_string(), (*s).clone())).collect(),
            }
        };
        // (the stage's steps, the service times the diagnosis reads)
        let cases: [(&[(&str, &Stats)], u64); 4] = [
            (&[("orders", &plain), ("feed", &feed)], 1), // the stream left out
            (&[("orders", &plain), ("idle", &idle)], 1), // nothing streamed: all of it
            (&[("feed", &feed)], 0),                     // only a stream: nothing to read
            (&[], 0),                                    // nothing at all
        ];
        for (i, (steps, want)) in cases.into_iter().enumerate() {
            let s = stage(steps);
            let got = s.unstreamed();
            assert_eq!(got.service_ok.len(), want, "case {i}");
            assert!(got.events.is_empty(), "case {i}: no stream in it");
        }
    }

    /// Which second closes a stage: the first that starts once its responses
    /// are in (a second after its end ended with nothing in flight) or the
    /// grace is past its end; a response that came late is in its figures.
    #[test]
    fn a_stage_closes_once_its_responses_are_in_or_the_grace_is_past() {
        use crate::measure::Key;
        let plan = |name: &str, s: u64| StagePlan {
            name: name.into(),
            target_rate: Some(10.0),
            start_rate: None,
            duration: Duration::from_secs(s),
        };
        // A: 0-2 s, B: 2-6 s; grace 2 s. Every second answers 10 of A's or
        // B's arrivals; second 2 also the last of A's (its stage's, late).
        let second = |k: u32, in_flight: u64| {
            let done = Stats { completed: 10, arrivals_answered: 10, ..Stats::default() };
            let mut parts = vec![(Key { stage: u16::from(k >= 2), step: 0 }, done.clone())];
            if k == 2 {
                parts.push((Key { stage: 0, step: 0 }, Stats { completed: 1, ..Stats::default() }));
            }
            Interval { index: k, length: Duration::from_secs(1), in_flight, parts, ..Interval::empty(k) }
        };
        // (in flight at the end of each second, a stop at, the second that closes A, then B)
        type Case<'a> = (&'a [u64], Option<u64>, Option<u32>, Option<u32>);
        let cases: [Case; 5] = [
            (&[3; 8], None, Some(4), None), // always busy: A at its end + grace; B's grace not past by 8
            (&[3, 3, 0, 3, 3, 3, 3, 3], None, Some(3), None), // idle at 3 s: A's responses are in
            (&[3, 0, 3, 3, 3, 3, 3, 3], None, Some(2), None), // idle exactly at A's end: closes with its next second
            (&[0; 8], None, Some(2), Some(6)), // idle throughout: each with the second after its end
            (&[3; 8], Some(1), Some(3), None), // stopped at 1 s: A ends there; B never ran, never closes
        ];
        for (busy, stop, want_a, want_b) in cases {
            let mut ledger = StageLedger::new(&[plan("A", 2), plan("B", 4)], 0.0);
            if let Some(s) = stop {
                ledger.stop(secs(s as f64));
            }
            let mut closed = Vec::new();
            for (k, &in_flight) in busy.iter().enumerate() {
                let k = k as u32;
                for r in ledger.closing(secs(f64::from(k)), secs(2.0)) {
                    closed.push((r.plan.name.clone(), k, r.stats.completed));
                }
                ledger.add(&second(k, in_flight), &[]);
            }
            let when = |name: &str| closed.iter().find(|c| c.0 == name).map(|c| c.1);
            assert_eq!((when("A"), when("B")), (want_a, want_b), "{busy:?} stop {stop:?}: {closed:?}");
            // A's figures hold what was answered by its close: its own two
            // seconds and, when it closed after second 2, the late one.
            let a = closed.iter().find(|c| c.0 == "A").map(|c| c.2);
            let late = want_a.is_some_and(|k| k > 2);
            assert_eq!(a, Some(20 + u64::from(late)), "{busy:?}");
        }
    }

    #[test]
    fn a_second_is_placed_in_the_stage_it_starts_in() {
        let plan = |name: &str, secs: f64| StagePlan {
            name: name.into(),
            target_rate: None,
            start_rate: None,
            duration: Duration::from_secs_f64(secs),
        };
        let stages = [plan("warm", 1.5), plan("peak", 2.0)];
        let mut stopped = StageLedger::new(&stages, 0.0);
        stopped.stop(secs(2.0));
        let cases = [
            // The first second.
            (StageLedger::new(&stages, 0.0), 0.0, ("warm", false)),
            // Starts in warm, ends in peak: placed where it starts.
            (StageLedger::new(&stages, 0.0), 1.0, ("warm", false)),
            (StageLedger::new(&stages, 0.0), 2.0, ("peak", false)),
            // From the end of the schedule on, responses drain.
            (StageLedger::new(&stages, 0.0), 3.5, ("(draining)", true)),
            // A stop ends the arrivals early.
            (stopped.clone(), 1.0, ("warm", false)),
            (stopped, 2.0, ("(draining)", true)),
            // No stages (`quick`): one label, never draining.
            (StageLedger::unstaged("quick"), 99.0, ("quick", false)),
        ];
        for (ledger, at, want) in cases {
            assert_eq!(ledger.place(secs(at)), want, "at {at} s");
        }
    }

    fn secs(v: f64) -> Duration {
        Duration::from_secs_f64(v)
    }

    #[test]
    fn seconds_straddling_a_boundary_are_split() {
        // Two 1.5 s stages at a steady 100/s: 100 events in each whole second.
        let mut t = StageThroughput::new(vec![secs(1.5), secs(3.0)]);
        for k in 0..3 {
            t.add_second(secs(k as f64), secs(1.0), 100);
        }
        assert!((t.rate(0) - 100.0).abs() < 1e-9, "{}", t.rate(0));
        assert!((t.rate(1) - 100.0).abs() < 1e-9, "{}", t.rate(1));
    }

    #[test]
    fn a_stage_cut_short_is_divided_by_the_time_it_ran() {
        // A 20 s stage at 100/s, stopped after 2 s; a later stage never ran.
        let mut t = StageThroughput::new(vec![secs(20.0), secs(30.0)]);
        t.stop(secs(2.0));
        for k in 0..4 {
            t.add_second(secs(k as f64), secs(1.0), if k < 2 { 100 } else { 7 }); // drain seconds not counted
        }
        assert_eq!(t.ran(0), secs(2.0));
        assert!((t.rate(0) - 100.0).abs() < 1e-9);
        assert_eq!((t.ran(1), t.rate(1)), (Duration::ZERO, 0.0));
    }

    #[test]
    fn drain_after_the_schedule_is_no_stage_s() {
        let mut t = StageThroughput::new(vec![secs(2.0)]);
        t.add_second(secs(0.0), secs(1.0), 50);
        t.add_second(secs(1.0), secs(1.0), 50);
        t.add_second(secs(2.0), secs(0.4), 30); // responses after the last arrival
        assert!((t.rate(0) - 50.0).abs() < 1e-9);
    }
}
