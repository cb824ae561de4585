//! A load's stages as they are re-planned by hand while it runs (the live
//! page's buttons, `perfops ctl`): what an action at an instant makes of the
//! plan, as data. The engine runs the [`Schedule`] it yields, the stage
//! ledger places seconds by its [`StagedPlan::ends`].
//!
//! One rule makes it safe to switch plans under running workers (the house's
//! rule: absolute due times, one plan): a re-plan at `T` is equal to the old
//! plan before `T`, and only after `T` does it differ. Arrival numbers and due
//! times before `T` are unchanged, so a worker may take the new plan at any
//! moment before `T` and numbering goes on without a gap or a repeat.
//!
//! ```text
//!   rate                 T (a whole second of the session clock)
//!    300 |               |______               rate 300: the rest of the stage at 300/s
//!    100 |  ____________ |      |___           hold: the rate at T, up to HOLD_MAX
//!        |               |          |          next: the stage ends at T, the next ones follow
//!        +---------------+----------+--> t     stop: the arrivals end at T
//!          before T: the old plan, piece for piece
//! ```
//!
//! Not here: when `T` is (the steering in `perfops-run`, the next whole
//! second every generator can reach), nor what is recorded of an action
//! (`pipeline::control`).

use std::time::Duration;

use super::{Rate, Schedule, ScheduleError, Segment};
use crate::pipeline::StagePlan;
use crate::pipeline::control::Action;

/// The longest a `hold` keeps a stage going: a forgotten run still ends by itself.
pub const HOLD_MAX: Duration = Duration::from_secs(3600);

/// One stage: its name and its pieces of the rate curve (one as planned; a
/// held or re-rated stage has more).
#[derive(Debug, Clone, PartialEq)]
pub struct SteeredStage {
    /// Its name.
    pub name: String,
    /// Its pieces, in order.
    pub pieces: Vec<Segment>,
    /// Changed by hand (held, re-rated, or cut by `next` or `stop`).
    pub by_hand: bool,
}

impl SteeredStage {
    fn duration(&self) -> Duration {
        self.pieces.iter().map(|p| p.duration).sum()
    }
}

/// What a closed model's users may be re-rated to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Units {
    /// Arrivals per second: any rate above 0.
    Arrivals,
    /// Users: whole, from 1 to the most the model has connections for.
    Users {
        /// The most users (the model's connections).
        most: u32,
    },
}

/// A load's stages, re-planned by hand (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct StagedPlan {
    stages: Vec<SteeredStage>,
    /// The arrivals end here (a `stop`); `None`: at the end of the last stage.
    stopped_at: Option<Duration>,
    units: Units,
}

impl StagedPlan {
    /// The plan as written: one piece per stage.
    pub fn new(stages: impl IntoIterator<Item = (String, Segment)>, units: Units) -> StagedPlan {
        let stages = stages
            .into_iter()
            .map(|(name, segment)| SteeredStage { name, pieces: vec![segment], by_hand: false })
            .collect();
        StagedPlan { stages, stopped_at: None, units }
    }

    /// The stages.
    pub fn stages(&self) -> &[SteeredStage] {
        &self.stages
    }

    /// Where the arrivals end: the stop, or the end of the last stage.
    pub fn end(&self) -> Duration {
        let planned: Duration = self.stages.iter().map(SteeredStage::duration).sum();
        self.stopped_at.map_or(planned, |s| s.min(planned))
    }

    /// Each stage's end, from the load's start (for the engine's stage of an
    /// arrival and the ledger's placement of a second).
    pub fn ends(&self) -> Vec<Duration> {
        let mut t = Duration::ZERO;
        self.stages
            .iter()
            .map(|s| {
                t += s.duration();
                t
            })
            .collect()
    }

    /// Whether a stop ended the arrivals early.
    pub fn stopped(&self) -> Option<Duration> {
        self.stopped_at
    }

    /// The stage running at `at` (from the load's start), or `None` past the end.
    pub fn stage_at(&self, at: Duration) -> Option<usize> {
        if at >= self.end() {
            return None;
        }
        self.ends().iter().position(|&e| at < e)
    }

    /// The rate curve as one schedule (every piece of every stage, cut at a stop).
    pub fn schedule(&self) -> Result<Schedule, ScheduleError> {
        let end = self.end();
        let mut t = Duration::ZERO;
        let mut out = Vec::new();
        for piece in self.stages.iter().flat_map(|s| &s.pieces) {
            if t >= end {
                break;
            }
            out.push(if t + piece.duration > end { cut(piece, end - t) } else { *piece });
            t += piece.duration;
        }
        Schedule::new(out)
    }

    /// The stage plans the ledger judges and shows, each stage's rates as
    /// `share` of them (a shard's): a re-planned stage's mean over its
    /// pieces, and its first rate.
    pub fn stage_plans(&self, share: f64, open: bool) -> Vec<StagePlan> {
        self.stages
            .iter()
            .map(|s| {
                let d = s.duration();
                let area: f64 =
                    s.pieces.iter().map(|p| p.duration.as_secs_f64() * (p.from.as_f64() + p.to.as_f64()) / 2.0).sum();
                let mean = if d.is_zero() { 0.0 } else { area / d.as_secs_f64() };
                let first = s.pieces.first().map_or(0.0, |p| p.from.as_f64());
                StagePlan {
                    name: s.name.clone(),
                    target_rate: open.then_some(mean * share),
                    start_rate: open.then_some(first * share),
                    duration: d,
                }
            })
            .collect()
    }

    /// The plan with `action` taken at `at` (from the load's start), and the
    /// index of the stage it changed; or why it cannot be taken.
    pub fn apply(&self, action: Action, at: Duration) -> Result<(StagedPlan, usize), String> {
        let Some(i) = self.stage_at(at) else {
            return Err(format!(
                "the load's arrivals end at {:.0} s, before the action could take effect",
                self.end().as_secs_f64()
            ));
        };
        let mut next = self.clone();
        let start: Duration = self.stages[..i].iter().map(SteeredStage::duration).sum();
        let into = at - start;
        let rate_now = rate_in(&self.stages[i].pieces, into);
        let rest = self.stages[i].duration() - into;
        let stage = &mut next.stages[i];
        match action {
            Action::Stop => next.stopped_at = Some(at),
            Action::Next => {
                if i + 1 == self.stages.len() {
                    return Err(format!(
                        "`{}` is the last stage: there is no next one (stop ends the run)",
                        stage.name
                    ));
                }
                stage.pieces = cut_pieces(&stage.pieces, into);
            }
            Action::Hold => {
                // A closed model's users are whole: a ramp of users holds those it has.
                let rate = match self.units {
                    Units::Arrivals => rate_now,
                    Units::Users { .. } => (rate_now + 1e-9).floor(),
                };
                stage.pieces = cut_pieces(&stage.pieces, into);
                stage.pieces.push(constant(rate, HOLD_MAX));
            }
            Action::Rate(n) => {
                if let Units::Users { most } = self.units {
                    if n.fract() != 0.0 {
                        return Err(format!("a closed model's users are whole: not {n}"));
                    }
                    if n > f64::from(most) {
                        return Err(format!("at most {most} users: the load was opened with that many connections"));
                    }
                }
                stage.pieces = cut_pieces(&stage.pieces, into);
                stage.pieces.push(constant(n, rest));
            }
        }
        stage.by_hand = true;
        Ok((next, i))
    }
}

/// A constant piece.
fn constant(rate: f64, duration: Duration) -> Segment {
    let rate = Rate::per_second(rate).unwrap_or(Rate::ZERO);
    Segment { duration, from: rate, to: rate }
}

/// `piece` up to `d` into it: the same line, shorter.
fn cut(piece: &Segment, d: Duration) -> Segment {
    let to = rate_in(std::slice::from_ref(piece), d);
    Segment { duration: d, from: piece.from, to: Rate::per_second(to).unwrap_or(piece.to) }
}

/// `pieces` up to `d` into them.
fn cut_pieces(pieces: &[Segment], d: Duration) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    for p in pieces {
        if t >= d {
            break;
        }
        out.push(if t + p.duration > d { cut(p, d - t) } else { *p });
        t += p.duration;
    }
    out
}

/// The rate `d` into `pieces` (the last piece's end rate past them).
fn rate_in(pieces: &[Segment], d: Duration) -> f64 {
    let mut t = Duration::ZERO;
    for p in pieces {
        if d < t + p.duration {
            let frac = (d - t).as_secs_f64() / p.duration.as_secs_f64();
            return p.from.as_f64() + (p.to.as_f64() - p.from.as_f64()) * frac;
        }
        t += p.duration;
    }
    pieces.last().map_or(0.0, |p| p.to.as_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }
    fn seg(from: f64, to: f64, s: u64) -> Segment {
        Segment { duration: secs(s), from: Rate::per_second(from).unwrap(), to: Rate::per_second(to).unwrap() }
    }
    /// warm-up 10/s for 10 s, a ramp 10 -> 50/s over 10 s, 50/s for 10 s.
    fn three() -> StagedPlan {
        StagedPlan::new(
            [
                ("warm".to_string(), seg(10.0, 10.0, 10)),
                ("ramp".into(), seg(10.0, 50.0, 10)),
                ("top".into(), seg(50.0, 50.0, 10)),
            ],
            Units::Arrivals,
        )
    }

    /// (action, at s, changed stage, ends in s, arrivals end s, rate at `at` + 0.5 s)
    type Replanned = (Action, u64, usize, [u64; 3], u64, f64);

    /// Each action at an instant: the stage it changed, the stage ends after
    /// it, where the arrivals end and the rate just after the instant.
    #[test]
    fn each_action_replans_from_its_instant() {
        let cases: &[Replanned] = &[
            // rate 300 in the warm-up: the rest of the warm-up at 300/s, its end as planned.
            (Action::Rate(300.0), 4, 0, [10, 20, 30], 30, 300.0),
            // next in the ramp: it ends at 15 s, the top stage follows 5 s earlier.
            (Action::Next, 15, 1, [10, 15, 25], 25, 50.0),
            // hold half-way up the ramp: 30/s for an hour, then the top stage.
            (Action::Hold, 15, 1, [10, 3615, 3625], 3625, 30.0),
            // stop in the top stage: the stages stay, the arrivals end at 22 s.
            (Action::Stop, 22, 2, [10, 20, 30], 22, 0.0),
        ];
        for (i, &(action, at, stage, ends, end, rate)) in cases.iter().enumerate() {
            let (plan, changed) = three().apply(action, secs(at)).unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(changed, stage, "case {i}");
            assert_eq!(plan.ends(), ends.map(secs).to_vec(), "case {i}");
            assert_eq!(plan.end(), secs(end), "case {i}");
            let got = plan.schedule().unwrap().rate_at(Duration::from_millis(at * 1000 + 500)).as_f64();
            assert!((got - rate).abs() < 1e-6, "case {i}: {got}/s after the action");
            assert!(plan.stages()[stage].by_hand, "case {i}: the stage is marked");
            assert_eq!(plan.stages().iter().filter(|s| s.by_hand).count(), 1, "case {i}: and only it");
        }
    }

    /// What is refused, and why.
    #[test]
    fn actions_that_cannot_be_taken_are_refused() {
        let closed = StagedPlan::new([("users".to_string(), seg(4.0, 4.0, 10))], Units::Users { most: 8 });
        // (plan, action, at s, the reason starts with)
        let cases = [
            // No stage after the last: next is refused, stop says it.
            (three(), Action::Next, 25, "`top` is the last stage"),
            // The load is over by then.
            (three(), Action::Rate(5.0), 30, "the load's arrivals end at 30 s"),
            // Users are whole, and no more than the connections opened.
            (closed.clone(), Action::Rate(2.5), 3, "a closed model's users are whole"),
            (closed, Action::Rate(9.0), 3, "at most 8 users"),
        ];
        for (i, (plan, action, at, want)) in cases.into_iter().enumerate() {
            let got = plan.apply(action, secs(at)).expect_err("refused");
            assert!(got.starts_with(want), "case {i}: {got}");
        }
    }

    /// A closed model's ramp of users holds the users it has: whole.
    #[test]
    fn a_held_ramp_of_users_keeps_whole_users() {
        let ramp = StagedPlan::new([("up".to_string(), seg(0.0, 10.0, 10))], Units::Users { most: 10 });
        let (held, _) = ramp.apply(Action::Hold, Duration::from_millis(4500)).unwrap();
        assert_eq!(held.schedule().unwrap().rate_at(secs(100)).as_f64(), 4.0, "4.5 users are 4");
    }

    /// The house's rule: before the instant, the re-planned schedule is the
    /// old one arrival for arrival (numbers and due times); after it, the
    /// numbering goes on where it was, at the new rate.
    #[test]
    fn due_times_before_the_instant_are_unchanged_and_numbering_goes_on() {
        for (i, (action, at)) in [
            (Action::Rate(300.0), 4),
            (Action::Next, 15),
            (Action::Hold, 13),
            (Action::Stop, 22),
            (Action::Rate(1.0), 27),
        ]
        .into_iter()
        .enumerate()
        {
            let old = three().schedule().unwrap();
            let (plan, _) = three().apply(action, secs(at)).unwrap();
            let new = plan.schedule().unwrap();
            let before = (0..).take_while(|&n| old.due(n).is_some_and(|d| d < secs(at))).count() as u64;
            for n in 0..before {
                let (a, b) = (old.due(n).unwrap(), new.due(n).unwrap());
                assert!(a.abs_diff(b) < Duration::from_nanos(10), "case {i}: arrival {n} moved from {a:?} to {b:?}");
            }
            // The first arrival of the new plan after the instant is the next number, at or after it.
            match new.due(before) {
                Some(d) => assert!(d >= secs(at) - Duration::from_nanos(10), "case {i}: {d:?}"),
                None => assert_eq!(action, Action::Stop, "case {i}: only a stop ends the arrivals"),
            }
            let mut last = Duration::ZERO;
            for n in 0..new.total_arrivals() {
                let d = new.due(n).unwrap();
                assert!(d >= last, "case {i}: arrival {n} went back in time");
                last = d;
            }
        }
    }

    /// After `rate 300` at 4 s in a 10/s warm-up, the warm-up's 6 seconds
    /// left bring 1,800 arrivals; the stage plans say the warm-up's new mean.
    #[test]
    fn a_rerated_stage_has_its_new_arrivals_and_mean() {
        let (plan, _) = three().apply(Action::Rate(300.0), secs(4)).unwrap();
        let s = plan.schedule().unwrap();
        let warm = s.arrivals_before(secs(10)) - s.arrivals_before(secs(4));
        assert!((warm - 1800.0).abs() < 1e-6, "{warm}");
        let plans = plan.stage_plans(0.5, true);
        // (4 x 10 + 6 x 300) / 10 = 184/s, half of it for a shard of 2.
        assert!((plans[0].target_rate.unwrap() - 92.0).abs() < 1e-9);
        assert_eq!(plans[0].start_rate, Some(5.0));
        assert_eq!(plans[2].target_rate, Some(25.0), "untouched");
        assert_eq!(plan.stage_plans(1.0, false)[0].target_rate, None, "closed: no target");
    }
}
