//! The capacity search of `perfops limit`: which arrival rate to try next,
//! given how the attempts so far were judged, and when the search is done.
//!
//! ```text
//!   rate  ▲                 ✗ 800
//!         │                      ✗ 600
//!         │             ✓ 400         ✗ 500       ✗ 487.5
//!         │         ✓ 200                 ✓ 450 ✓ 475     ✓ 475 confirmed
//!         │     ✓ 100
//!         └──────────────────────────────────────────────────────> attempts
//!           x factor up       bisect (lo+hi)/2 until hi <= lo·(1 + precision),
//!           to the 1st ✗      then try the best rate that held once more
//! ```
//!
//! Until the first failure the rate grows by `factor` (capped at `max`);
//! after it, the search bisects between the highest rate that held (`lo`) and
//! the lowest that failed (`hi`); nothing holding yet, it divides by `factor`.
//! When `hi` is within `precision` above `lo`, or `lo` reached `max` with
//! nothing failing, `lo` is tried once more: the confirmation. A confirmation
//! that fails makes its rate the lowest failing one, and the search goes on
//! below it from the best rate that held there (then confirms that): a
//! capacity on the very edge is not reported as one. A generator-limited
//! (inconclusive) attempt ends the search: it says nothing about the server.
//!
//! This module owns those decisions, as a state machine fed one verdict at a
//! time: [`CapacitySearch::start`] gives the first [`Step`], and each
//! [`Attempt::next`] the one after; and what the search proves, as a run's
//! result ([`Outcome::result`]). It does not run loads, judge them (see
//! [`super::verdict`]), cool the target down or word the result: the binary
//! does, and only does what the steps tell it.

use super::verdict::{RunResult, StageVerdict};

/// The lowest rate the search starts at, arrivals/s.
pub const LOWEST_START: f64 = 0.1;
/// Below this next rate with nothing held yet, the search gives up: nothing
/// holds even at a trickle.
pub const TRICKLE: f64 = 0.5;

/// The search's knobs, as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPlan {
    /// The first rate to try, arrivals/s (clamped to [`LOWEST_START`]..=`max`).
    pub from: f64,
    /// Never try above this rate.
    pub max: f64,
    /// Step-up factor until the first failure (> 1).
    pub factor: f64,
    /// Stop bisecting when the failing rate is within this fraction above the holding one (> 0).
    pub precision: f64,
    /// At most this many attempts, the confirmations included.
    pub attempts: usize,
}

impl SearchPlan {
    /// The rate of the first attempt: `from`, within [`LOWEST_START`]..=`max`.
    pub fn first_rate(&self) -> f64 {
        self.from.clamp(LOWEST_START, self.max.max(LOWEST_START))
    }
}

/// A plan the search cannot follow.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The rate would never grow.
    #[error("--factor must be > 1 (got {0})")]
    Factor(f64),
    /// Bisection would never end.
    #[error("--precision must be > 0 (got {0})")]
    Precision(f64),
    /// No rate could be tried.
    #[error("--max must be at least {LOWEST_START}/s (got {0})")]
    Max(f64),
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The confirmation held: the capacity is confirmed.
    Confirmed,
    /// The confirmation was inconclusive (or never ran): the capacity stands
    /// unconfirmed, and no further rate is tried.
    ConfirmationInconclusive,
    /// A (non-confirming) attempt was generator-limited.
    Inconclusive,
    /// The attempt cap was reached.
    Attempts,
    /// Nothing held, and the next rate would be below [`TRICKLE`].
    NothingHolds,
    /// The caller stopped the search ([`Attempt::interrupted`]).
    Interrupted,
}

/// The result of a search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The highest rate that held (after a failed confirmation: the highest below it).
    pub capacity_rps: Option<f64>,
    /// The lowest rate that failed.
    pub breaks_at_rps: Option<f64>,
    /// Whether the last confirmation held; `None` if none was tried.
    pub confirmed: Option<bool>,
    /// The rate of the attempt that was generator-limited, if one was.
    pub inconclusive_rps: Option<f64>,
    /// Where the search stood: the rate it would have tried next, or the
    /// rate of the attempt that ended it (a confirmation, an inconclusive
    /// one). With nothing held, the rate it got down to.
    pub last_rps: f64,
    /// Why it ended.
    pub stop: Stop,
}

impl Outcome {
    /// What the search proves about the target: passed when it found a
    /// capacity (not left unconfirmed by a failed confirmation); failed when
    /// nothing held or the capacity did not hold again; inconclusive when an
    /// attempt was generator-limited or the user stopped the search before it
    /// ended (what held and failed so far bounds the capacity, but the search
    /// did not narrow it to its precision, nor confirm it).
    pub fn result(&self) -> RunResult {
        if self.stop == Stop::Interrupted || self.inconclusive_rps.is_some() {
            return RunResult::Inconclusive;
        }
        match self.capacity_rps {
            Some(_) if self.confirmed != Some(false) => RunResult::Passed,
            _ => RunResult::Failed,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run this attempt, judge it, and hand the verdict to [`Attempt::next`].
    Try(Attempt),
    /// The search is over.
    Done(Outcome),
}

/// One attempt to run: a constant `rate` for the hold time.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Arrivals/s to hold.
    pub rate: f64,
    /// Whether this tries the best rate that held once more.
    pub confirming: bool,
    search: CapacitySearch,
}

/// The search's state between attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySearch {
    plan: SearchPlan,
    /// The rate the bisection or step-up arrived at (a confirmation tries `lo` instead).
    rate: f64,
    /// Highest rate that held.
    lo: Option<f64>,
    /// Lowest rate that failed.
    hi: Option<f64>,
    confirmed: Option<bool>,
    /// Every rate that held, in the order tried.
    held: Vec<f64>,
    tried: usize,
}

impl CapacitySearch {
    /// Starts a search: its first step (already `Done` with no attempts allowed).
    pub fn start(plan: SearchPlan) -> Result<Step, PlanError> {
        if plan.factor.is_nan() || plan.factor <= 1.0 {
            return Err(PlanError::Factor(plan.factor));
        }
        if plan.precision.is_nan() || plan.precision <= 0.0 {
            return Err(PlanError::Precision(plan.precision));
        }
        if plan.max.is_nan() || plan.max < LOWEST_START {
            return Err(PlanError::Max(plan.max));
        }
        let search = CapacitySearch {
            plan,
            rate: plan.first_rate(),
            lo: None,
            hi: None,
            confirmed: None,
            held: Vec::new(),
            tried: 0,
        };
        Ok(search.step())
    }

    /// The next attempt, or done when the cap is reached.
    fn step(self) -> Step {
        if self.tried >= self.plan.attempts {
            return Step::Done(self.outcome(Stop::Attempts, None));
        }
        let confirming = match (self.lo, self.hi) {
            (Some(lo), Some(hi)) => hi <= lo * (1.0 + self.plan.precision),
            (Some(lo), None) => lo >= self.plan.max,
            (None, _) => false,
        };
        let rate = if confirming { self.lo.unwrap_or(self.rate) } else { self.rate };
        Step::Try(Attempt { rate, confirming, search: self })
    }

    fn outcome(&self, stop: Stop, inconclusive_rps: Option<f64>) -> Outcome {
        Outcome {
            capacity_rps: self.lo,
            breaks_at_rps: self.hi,
            confirmed: self.confirmed,
            inconclusive_rps,
            last_rps: self.rate,
            stop,
        }
    }
}

impl Attempt {
    /// Feeds this attempt's verdict to the search: the step after it.
    pub fn next(self, verdict: StageVerdict) -> Step {
        let Attempt { rate, confirming, mut search } = self;
        let plan = search.plan;
        search.rate = rate;
        search.tried += 1;
        if confirming {
            search.confirmed = Some(verdict == StageVerdict::Holds);
            if verdict != StageVerdict::Fails {
                let stop =
                    if verdict == StageVerdict::Holds { Stop::Confirmed } else { Stop::ConfirmationInconclusive };
                return Step::Done(search.outcome(stop, None));
            }
            // Not confirmed: the rate sits on the edge. It fails now (below);
            // search on under it, from the best rate that held there.
            search.lo = search.held.iter().copied().filter(|&r| r < rate).reduce(f64::max);
        }
        match verdict {
            StageVerdict::Holds => {
                search.lo = Some(rate);
                search.held.push(rate);
            }
            StageVerdict::Fails => search.hi = Some(rate),
            StageVerdict::Inconclusive | StageVerdict::NotRun => {
                return Step::Done(search.outcome(Stop::Inconclusive, Some(rate)));
            }
        }
        search.rate = match (search.lo, search.hi) {
            (Some(lo), Some(hi)) => (lo + hi) / 2.0,
            (Some(lo), None) => (lo * plan.factor).min(plan.max),
            (None, Some(hi)) => hi / plan.factor,
            (None, None) => rate,
        };
        if search.lo.is_none() && search.rate < TRICKLE {
            return Step::Done(search.outcome(Stop::NothingHolds, None));
        }
        search.step()
    }

    /// The search as it stands if this attempt is never run (the user
    /// stopped perfops): what held and failed so far.
    pub fn interrupted(&self) -> Outcome {
        self.search.outcome(Stop::Interrupted, None)
    }
}

#[cfg(test)]
mod tests {
    use super::StageVerdict::{Fails as F, Holds as H, Inconclusive as I, NotRun as N};
    use super::*;

    /// The default flags of `perfops limit`, starting at `from`.
    fn plan(from: f64) -> SearchPlan {
        SearchPlan { from, max: 100_000.0, factor: 2.0, precision: 0.05, attempts: 20 }
    }

    /// Runs a search, answering each attempt with the next scripted verdict
    /// (stopping when the script runs out), and returns the attempts tried
    /// as `(rate, confirming)` with the outcome.
    fn run(plan: SearchPlan, verdicts: &[StageVerdict]) -> (Vec<(f64, bool)>, Outcome) {
        let mut step = CapacitySearch::start(plan).unwrap();
        let mut tried = Vec::new();
        let mut script = verdicts.iter();
        loop {
            match step {
                Step::Done(outcome) => return (tried, outcome),
                Step::Try(attempt) => match script.next() {
                    Some(&verdict) => {
                        tried.push((attempt.rate, attempt.confirming));
                        step = attempt.next(verdict);
                    }
                    None => return (tried, attempt.interrupted()),
                },
            }
        }
    }

    /// What a case expects: the rates tried (`c` marks a confirmation), then
    /// capacity, breaks at, confirmed, inconclusive at, last rate and why it stopped.
    struct Want {
        tried: &'static [(f64, bool)],
        capacity: Option<f64>,
        breaks_at: Option<f64>,
        confirmed: Option<bool>,
        inconclusive: Option<f64>,
        last: f64,
        stop: Stop,
    }

    const C: bool = true;
    const T: bool = false;

    #[test]
    fn search_decisions() {
        let cases: Vec<(&str, SearchPlan, &[StageVerdict], Want)> = vec![
            (
                // The module sketch: doubling to the first failure, bisecting to 5%
                // (487.5 <= 475 * 1.05), then 475 once more, and it holds.
                "edge capacity, confirmed",
                plan(100.0),
                &[H, H, H, F, F, F, H, H, F, H],
                Want {
                    tried: &[
                        (100.0, T),
                        (200.0, T),
                        (400.0, T),
                        (800.0, T),
                        (600.0, T),
                        (500.0, T),
                        (450.0, T),
                        (475.0, T),
                        (487.5, T),
                        (475.0, C),
                    ],
                    capacity: Some(475.0),
                    breaks_at: Some(487.5),
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 475.0,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // Noisy confirmation: 475 fails when tried again, so it becomes the
                // lowest failing rate; the search goes on from 450 (the best that held
                // below it), bisects to 462.5 and confirms that.
                "noisy confirmation searches on below",
                plan(100.0),
                &[H, H, H, F, F, F, H, H, F, F, H, H],
                Want {
                    tried: &[
                        (100.0, T),
                        (200.0, T),
                        (400.0, T),
                        (800.0, T),
                        (600.0, T),
                        (500.0, T),
                        (450.0, T),
                        (475.0, T),
                        (487.5, T),
                        (475.0, C),
                        (462.5, T),
                        (462.5, C),
                    ],
                    capacity: Some(462.5),
                    breaks_at: Some(475.0),
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 462.5,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // A failed confirmation is what the search last learned when the
                // attempt cap stops it before the next one: reported unconfirmed.
                "noisy confirmation, then out of attempts",
                SearchPlan { attempts: 4, precision: 0.5, ..plan(100.0) },
                &[H, F, F, F],
                Want {
                    // 200 <= 100 * 1.5? no: bisect to 150, which fails, and
                    // 150 <= 150 asks to confirm 100; it fails, nothing held
                    // below it, so the next rate would be 100 / 2.
                    tried: &[(100.0, T), (200.0, T), (150.0, T), (100.0, C)],
                    capacity: None,
                    breaks_at: Some(100.0),
                    confirmed: Some(false),
                    inconclusive: None,
                    last: 50.0,
                    stop: Stop::Attempts,
                },
            ),
            (
                // A failed confirmation with nothing held below: divide by the factor
                // and step up again from what holds there.
                "failed confirmation with nothing below",
                SearchPlan { precision: 1.0, ..plan(100.0) },
                &[H, F, F, H, H],
                Want {
                    // 200 <= 100 * 2: confirm 100 at once; it fails; 50 holds;
                    // 100 <= 50 * 2: confirm 50, which holds.
                    tried: &[(100.0, T), (200.0, T), (100.0, C), (50.0, T), (50.0, C)],
                    capacity: Some(50.0),
                    breaks_at: Some(100.0),
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 50.0,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // A generator-limited attempt ends the search: what held stands, nothing broke.
                "generator-limited stage",
                plan(100.0),
                &[H, H, I],
                Want {
                    tried: &[(100.0, T), (200.0, T), (400.0, T)],
                    capacity: Some(200.0),
                    breaks_at: None,
                    confirmed: None,
                    inconclusive: Some(400.0),
                    last: 400.0,
                    stop: Stop::Inconclusive,
                },
            ),
            (
                // An attempt that never ran (stopped before it started) counts as inconclusive.
                "not run",
                plan(100.0),
                &[F, N],
                Want {
                    tried: &[(100.0, T), (50.0, T)],
                    capacity: None,
                    breaks_at: Some(100.0),
                    confirmed: None,
                    inconclusive: Some(50.0),
                    last: 50.0,
                    stop: Stop::Inconclusive,
                },
            ),
            (
                // An inconclusive confirmation ends the search too, but as today it
                // marks the capacity unconfirmed rather than the search inconclusive.
                "inconclusive confirmation",
                SearchPlan { precision: 1.0, ..plan(100.0) },
                &[H, F, I],
                Want {
                    tried: &[(100.0, T), (200.0, T), (100.0, C)],
                    capacity: Some(100.0),
                    breaks_at: Some(200.0),
                    confirmed: Some(false),
                    inconclusive: None,
                    last: 100.0,
                    stop: Stop::ConfirmationInconclusive,
                },
            ),
            (
                // --max reached with nothing failing: the step-up is capped at max,
                // and max is confirmed like any capacity.
                "--max reached",
                SearchPlan { max: 300.0, ..plan(100.0) },
                &[H, H, H, H],
                Want {
                    tried: &[(100.0, T), (200.0, T), (300.0, T), (300.0, C)],
                    capacity: Some(300.0),
                    breaks_at: None,
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 300.0,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // --max not confirmed: it becomes the break, and the search bisects below.
                "--max reached, confirmation fails",
                SearchPlan { max: 300.0, ..plan(100.0) },
                &[H, H, H, F, H, F, H, H],
                Want {
                    // 300 fails; lo = 200: 250 holds, 275 fails, 262.5 holds;
                    // 275 <= 262.5 * 1.05 = 275.6: confirm 262.5.
                    tried: &[
                        (100.0, T),
                        (200.0, T),
                        (300.0, T),
                        (300.0, C),
                        (250.0, T),
                        (275.0, T),
                        (262.5, T),
                        (262.5, C),
                    ],
                    capacity: Some(262.5),
                    breaks_at: Some(275.0),
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 262.5,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // --from above --max starts at max.
                "--from above --max",
                SearchPlan { from: 500.0, max: 300.0, ..plan(100.0) },
                &[H, H],
                Want {
                    tried: &[(300.0, T), (300.0, C)],
                    capacity: Some(300.0),
                    breaks_at: None,
                    confirmed: Some(true),
                    inconclusive: None,
                    last: 300.0,
                    stop: Stop::Confirmed,
                },
            ),
            (
                // Nothing holds: divide by the factor until the next rate is under a
                // trickle (0.3125 < 0.5); the last rate is where it got down to.
                "nothing holds",
                plan(10.0),
                &[F, F, F, F, F],
                Want {
                    tried: &[(10.0, T), (5.0, T), (2.5, T), (1.25, T), (0.625, T)],
                    capacity: None,
                    breaks_at: Some(0.625),
                    confirmed: None,
                    inconclusive: None,
                    last: 0.3125,
                    stop: Stop::NothingHolds,
                },
            ),
            (
                // A tiny --from is raised to the lowest start, 0.1/s, which fails at once.
                "--from below the lowest start",
                plan(0.01),
                &[F],
                Want {
                    tried: &[(0.1, T)],
                    capacity: None,
                    breaks_at: Some(0.1),
                    confirmed: None,
                    inconclusive: None,
                    last: 0.05,
                    stop: Stop::NothingHolds,
                },
            ),
            (
                // The attempt cap stops a search still stepping up; nothing is confirmed.
                "--attempts reached",
                SearchPlan { attempts: 3, ..plan(100.0) },
                &[H, H, H],
                Want {
                    tried: &[(100.0, T), (200.0, T), (400.0, T)],
                    capacity: Some(400.0),
                    breaks_at: None,
                    confirmed: None,
                    inconclusive: None,
                    last: 800.0,
                    stop: Stop::Attempts,
                },
            ),
            (
                // The cap counts the confirmation: at 9 attempts the search that the
                // sketch confirms at the 10th ends with the capacity unconfirmed.
                "--attempts reached before the confirmation",
                SearchPlan { attempts: 9, ..plan(100.0) },
                &[H, H, H, F, F, F, H, H, F],
                Want {
                    tried: &[
                        (100.0, T),
                        (200.0, T),
                        (400.0, T),
                        (800.0, T),
                        (600.0, T),
                        (500.0, T),
                        (450.0, T),
                        (475.0, T),
                        (487.5, T),
                    ],
                    capacity: Some(475.0),
                    breaks_at: Some(487.5),
                    confirmed: None,
                    inconclusive: None,
                    // the bisection's next midpoint, never tried
                    last: 481.25,
                    stop: Stop::Attempts,
                },
            ),
            (
                // No attempt allowed: done before starting, at the first rate.
                "--attempts 0",
                SearchPlan { attempts: 0, ..plan(100.0) },
                &[],
                Want {
                    tried: &[],
                    capacity: None,
                    breaks_at: None,
                    confirmed: None,
                    inconclusive: None,
                    last: 100.0,
                    stop: Stop::Attempts,
                },
            ),
            (
                // Failing first, then holding: divide by the factor, then bisect up.
                "breaks below the first rate",
                plan(100.0),
                &[F, H, H, H, F, H],
                Want {
                    // 50 holds, 75 holds, 87.5 holds, 93.75 fails;
                    // 93.75 <= 87.5 * 1.05 = 91.875? no: 90.625 holds;
                    // 93.75 <= 95.16 would confirm 90.625, but the script ends
                    // first: where it stood is the next midpoint.
                    tried: &[(100.0, T), (50.0, T), (75.0, T), (87.5, T), (93.75, T), (90.625, T)],
                    capacity: Some(90.625),
                    breaks_at: Some(93.75),
                    confirmed: None,
                    inconclusive: None,
                    last: 92.1875,
                    stop: Stop::Interrupted,
                },
            ),
            (
                // Interrupted before the confirmation: the outcome so far, with the
                // bisection's rate (not the confirmation's) as where it stood.
                "interrupted before the confirmation",
                SearchPlan { precision: 1.0, ..plan(100.0) },
                &[H, F],
                Want {
                    tried: &[(100.0, T), (200.0, T)],
                    capacity: Some(100.0),
                    breaks_at: Some(200.0),
                    confirmed: None,
                    inconclusive: None,
                    last: 150.0,
                    stop: Stop::Interrupted,
                },
            ),
        ];
        for (name, plan, verdicts, want) in cases {
            let (tried, outcome) = run(plan, verdicts);
            assert_eq!(tried, want.tried, "{name}: rates tried");
            let want = Outcome {
                capacity_rps: want.capacity,
                breaks_at_rps: want.breaks_at,
                confirmed: want.confirmed,
                inconclusive_rps: want.inconclusive,
                last_rps: want.last,
                stop: want.stop,
            };
            assert_eq!(outcome, want, "{name}: outcome");
        }
    }

    #[test]
    fn plans_that_cannot_be_followed() {
        let cases = [
            // the rate would never grow
            (SearchPlan { factor: 1.0, ..plan(100.0) }, PlanError::Factor(1.0)),
            // bisection would never end
            (SearchPlan { precision: 0.0, ..plan(100.0) }, PlanError::Precision(0.0)),
            // not even the lowest start is allowed
            (SearchPlan { max: 0.05, ..plan(100.0) }, PlanError::Max(0.05)),
        ];
        for (plan, want) in cases {
            assert_eq!(CapacitySearch::start(plan), Err(want), "{plan:?}");
        }
        // NaN compares unequal to itself: match the variant
        let nan = CapacitySearch::start(SearchPlan { factor: f64::NAN, ..plan(100.0) });
        assert!(matches!(nan, Err(PlanError::Factor(_))), "{nan:?}");
    }

    /// Whatever the verdicts, the search ends within the attempt cap, never
    /// tries above max or below the lowest start, and confirms only a rate that held.
    #[test]
    fn any_verdicts_end_within_bounds() {
        let all = [H, F, I, N];
        // every script of 6 verdicts over {holds, fails} plus one of each other at each position
        for bits in 0u32..(1 << 12) {
            let script: Vec<StageVerdict> = (0..6).map(|i| all[((bits >> (2 * i)) & 3) as usize]).collect();
            let plan = SearchPlan { max: 1000.0, attempts: 6, ..plan(100.0) };
            let (tried, outcome) = run(plan, &script);
            assert!(tried.len() <= 6, "{script:?}");
            for &(rate, _) in &tried {
                assert!((LOWEST_START..=1000.0).contains(&rate), "{script:?}: {rate}");
            }
            for (i, &(rate, confirming)) in tried.iter().enumerate() {
                if confirming {
                    assert!(tried[..i].iter().zip(&script).any(|(t, v)| t.0 == rate && *v == H), "{script:?}");
                }
            }
            if let (Some(lo), Some(hi)) = (outcome.capacity_rps, outcome.breaks_at_rps) {
                assert!(lo < hi, "{script:?}: {outcome:?}");
            }
        }
    }

    /// What each way a search ends proves, as a run's result.
    #[test]
    fn results_of_outcomes() {
        let o = |capacity: Option<f64>, confirmed: Option<bool>, inconclusive: Option<f64>, stop: Stop| Outcome {
            capacity_rps: capacity,
            breaks_at_rps: Some(200.0),
            confirmed,
            inconclusive_rps: inconclusive,
            last_rps: 150.0,
            stop,
        };
        let cases = [
            // a capacity, confirmed
            (o(Some(100.0), Some(true), None, Stop::Confirmed), RunResult::Passed),
            // the attempts ran out before a confirmation: the capacity stands
            (o(Some(100.0), None, None, Stop::Attempts), RunResult::Passed),
            // the confirmation failed and nothing below it held again
            (o(Some(100.0), Some(false), None, Stop::Attempts), RunResult::Failed),
            // nothing held, down to a trickle
            (o(None, None, None, Stop::NothingHolds), RunResult::Failed),
            // the generator was the limit at 150/s: proves nothing
            (o(Some(100.0), None, Some(150.0), Stop::Inconclusive), RunResult::Inconclusive),
            // stopped by the user between 100/s (held) and 200/s (failed): bounded, not found
            (o(Some(100.0), None, None, Stop::Interrupted), RunResult::Inconclusive),
            // stopped by the user before anything held
            (o(None, None, None, Stop::Interrupted), RunResult::Inconclusive),
        ];
        for (outcome, want) in cases {
            assert_eq!(outcome.result(), want, "{outcome:?}");
        }
    }
}
