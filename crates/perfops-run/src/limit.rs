//! `perfops limit SCENARIO`: the highest arrival rate the target holds under
//! the scenario's SLO (its capacity), and what broke just above it.
//!
//! Which rate to try next, and when the search is done, is decided by
//! [`perfops_core::analysis::capacity`] (geometric steps, bisection, the
//! confirmation, a failed confirmation searching on below); this module only
//! runs the attempts it is told to, prints them, and builds the summary and
//! headline from the outcome.
//!
//! Each attempt is one open-model stage of the scenario's flows at a constant
//! rate, judged like a stage of `perfops run` (SLO, 97% of target, probes).
//! Between attempts the target cools down: the health path must answer fast
//! again, so one attempt's backlog does not sink the next.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use perfops_core::analysis::capacity::{CapacitySearch, SearchPlan, Step, Stop};
use perfops_core::analysis::verdict::{RunResult, StageVerdict};
use perfops_core::model::{LoadModel, Rate, Schedule, Segment};
use perfops_core::scenario::Load;
use perfops_report::run::{LimitAttempt, LimitSearch};

use crate::conclude::Ending;
use crate::exit::{Exit, UsageError};
use crate::session::{Session, SessionArgs, StagePlan};
use crate::shard::{Placement, RefusedShardArgs};

/// Flags of `perfops limit`.
#[derive(Debug, Clone)]
pub struct LimitArgs {
    /// The scenario and how to run it.
    pub session: SessionArgs,
    /// Shard flags this command refuses.
    pub refused: RefusedShardArgs,
    /// First rate tried, arrivals/s (default: the scenario's first stage).
    pub from: Option<f64>,
    /// Never try above this rate.
    pub max: f64,
    /// Each attempt holds its rate this long.
    pub hold: Duration,
    /// Step-up factor until the first failure.
    pub factor: f64,
    /// Stop bisecting when the failing rate is within this fraction above the holding one.
    pub precision: f64,
    /// Give the target at most this long to recover between attempts.
    pub cooldown: Duration,
    /// At most this many attempts (the confirmation included).
    pub attempts: usize,
}

/// `perfops limit`: search the highest rate that holds the SLO.
pub fn run(args: LimitArgs) -> Result<Exit> {
    if args.factor.is_nan()
        || args.factor <= 1.0
        || args.precision.is_nan()
        || args.precision <= 0.0
        || args.hold.is_zero()
    {
        bail!(UsageError("--factor must be > 1, --precision > 0 and --hold > 0s".into()));
    }
    args.refused.refuse("limit")?;
    let Some(mut s) = Session::open(&args.session, "limit", &Placement::default())? else { return Ok(Exit::Usage) };
    if s.scenario.load.replay().is_some() {
        bail!(UsageError("`limit` searches arrival rates: a replay's rate is its recording's (run it with `perfops run`, `speed` to scale it)".into()));
    }
    let Load::Open { stages, max_in_flight, .. } = &s.scenario.load else {
        bail!(UsageError("`limit` searches arrival rates: the scenario's load must be the open model".into()));
    };
    let max_in_flight = *max_in_flight;
    let first = stages.first().map_or(10.0, |st| st.segment.from.as_f64().max(st.segment.to.as_f64()));
    let plan = SearchPlan {
        from: args.from.unwrap_or(first),
        max: args.max,
        factor: args.factor,
        precision: args.precision,
        attempts: args.attempts,
    };
    let mut step = CapacitySearch::start(plan).map_err(|e| UsageError(e.to_string()))?;
    let health = s.url_of(
        &s.scenario
            .probe
            .liveness
            .as_ref()
            .or(s.scenario.probe.readiness.as_ref())
            .map_or("/health".into(), |p| p.path.clone()),
    );
    note!(
        "limit {} — from {}/s, x{} up, bisect to {:.0}%, {:.0} s per attempt; results in {}",
        s.scenario.name,
        plan.first_rate(),
        args.factor,
        args.precision * 100.0,
        args.hold.as_secs_f64(),
        s.dir.path().display()
    );
    let baseline = settle(&health, &s, Duration::from_secs(10), None);

    let mut results = Vec::new();
    let mut judged = Vec::new();
    // The rate of the attempt the user cut short, if one was.
    let mut cut = None;
    let outcome = loop {
        let attempt = match step {
            Step::Try(attempt) => attempt,
            Step::Done(outcome) => break outcome,
        };
        if !results.is_empty() {
            settle(&health, &s, args.cooldown, baseline);
        }
        // Stopped before this attempt or while the target cooled down.
        if stopped(&s) {
            break attempt.interrupted();
        }
        let rate = attempt.rate;
        let name = if attempt.confirming { format!("confirm {}/s", round(rate)) } else { format!("{}/s", round(rate)) };
        let stage = StagePlan { name, target_rate: Some(rate), start_rate: None, duration: args.hold };
        let r = Rate::per_second(rate).map_err(|e| anyhow::anyhow!("{e}"))?;
        let schedule = Schedule::new(vec![Segment { duration: args.hold, from: r, to: r }])?;
        let loaded = s.load(LoadModel::Open { schedule, max_in_flight }, &[stage], None)?;
        if stopped(&s) {
            // Cut short by the user: it judges nothing (an attempt stopped a
            // few ms in read "achieved 0/s: fails"), so the search does not
            // hear of it. Its seconds stay in the results files as written.
            cut = Some(rate);
            break attempt.interrupted();
        }
        let verdict = s.judge(&loaded.stages)[0].clone();
        let st = &loaded.stages[0];
        note!(
            "{:>12}: achieved {:.1}/s, p95 {}, errors {:.2}% -> {}{}",
            st.plan.name,
            st.achieved_rate,
            perfops_report::format::ms_compact(st.stats.latency.quantile(0.95).as_secs_f64() * 1000.0),
            st.stats.error_ratio() * 100.0,
            verdict.verdict.name(),
            verdict.reasons.first().map_or(String::new(), |r| format!(" ({r})"))
        );
        step = attempt.next(verdict.verdict);
        results.push(loaded);
        judged.push(verdict);
    };
    let (lo, hi, confirmed, inconclusive) =
        (outcome.capacity_rps, outcome.breaks_at_rps, outcome.confirmed, outcome.inconclusive_rps);
    s.close();

    // One summary over every attempt, in the order tried; diagnostics look
    // at the failing attempt closest above the capacity.
    let merged = crate::conclude::Loaded::merged(&results);
    let mut summary = s.judging().summarize(&merged, Ending::local(&merged, merged.stopped || stopped(&s), None));
    if let Some(v) = summary.verdict.as_mut() {
        v.verdict.capacity_rps = lo;
        v.verdict.breaks_at_rps = hi;
        v.verdict.breaks_at_stage = hi.map(|h| format!("{}/s", round(h)));
        v.verdict.result = outcome.result();
    }
    // The diagnosis of the break: the lowest failing attempt.
    let breaking =
        results.iter().zip(&judged).enumerate().filter(|(_, (_, j))| j.verdict == StageVerdict::Fails).min_by(
            |a, b| {
                let ra = a.1.0.stages[0].plan.target_rate.unwrap_or(0.0);
                let rb = b.1.0.stages[0].plan.target_rate.unwrap_or(0.0);
                ra.total_cmp(&rb)
            },
        );
    // ... and its why, tied to the rule it failed (the diagnostics are findings).
    let mut why = None;
    if let Some((_, (l, j))) = breaking {
        summary.diagnostics = s.diagnose(&l.stages, std::slice::from_ref(j), &l.dropped);
        why = s.judging().why(&l.stages[0], j, &summary.diagnostics, &summary.failures);
    }
    let because = why.as_ref().map_or(String::new(), |w| format!(": {w}"));
    let attempts: Vec<LimitAttempt> = results
        .iter()
        .zip(&judged)
        .map(|(l, j)| {
            let st = &l.stages[0];
            LimitAttempt {
                rate: st.plan.target_rate.unwrap_or(0.0),
                achieved: st.achieved_rate,
                p50_ms: st.stats.latency.quantile(0.5).as_secs_f64() * 1000.0,
                p95_ms: st.stats.latency.quantile(0.95).as_secs_f64() * 1000.0,
                p99_ms: st.stats.latency.quantile(0.99).as_secs_f64() * 1000.0,
                error_ratio: st.stats.error_ratio(),
                verdict: j.verdict,
            }
        })
        .collect();
    let so_far = || match (lo, hi) {
        (Some(l), Some(h)) => format!("so far {}/s held and {}/s failed", round(l), round(h)),
        (Some(l), None) => format!("so far {}/s held", round(l)),
        (None, Some(h)) => format!("so far nothing held, and {}/s failed", round(h)),
        (None, None) => "no attempt had ended".into(),
    };
    let headline = match (lo, hi, inconclusive) {
        _ if outcome.stop == Stop::Interrupted => format!(
            "INCONCLUSIVE: interrupted {} before the search ended: {}",
            cut.map_or("between attempts".into(), |r| format!("during the attempt at {}/s", round(r))),
            so_far()
        ),
        (_, _, Some(r)) => format!(
            "INCONCLUSIVE: at {}/s the generator was the limit{}",
            round(r),
            lo.map_or(String::new(), |l| format!("; the target held {}/s", round(l)))
        ),
        (Some(l), Some(h), None) => format!(
            "capacity {}/s{}; breaks at {}/s{}",
            round(l),
            match confirmed {
                Some(true) => " (confirmed)",
                Some(false) => " (NOT confirmed: it failed when tried again)",
                None => "",
            },
            round(h),
            because
        ),
        (Some(l), None, None) => format!("holds at least {}/s (the highest rate tried)", round(l)),
        // The lowest rate tried, which failed; not where the search stood
        // (`last_rps`: the rate it would have tried next, never sent).
        (None, Some(h), None) => format!("no rate held, down to {}/s{}", round(h), because),
        (None, None, None) => "no attempt was made".into(),
    };
    if let Some(v) = summary.verdict.as_mut() {
        v.headline = headline;
        v.why = why.filter(|_| v.verdict.result != RunResult::Passed);
    }
    summary.limit =
        Some(LimitSearch { capacity_rps: lo, breaks_at_rps: hi, confirmed, precision: args.precision, attempts });
    crate::conclude::finish(&s.dir, &mut summary, args.session.junit.as_deref(), &mut s.outputs)
}

/// Wait until `url` answers quickly again (3 fast answers in a row), at most
/// `limit`; returns the typical answer time seen. "Fast" is within 50 ms or
/// three times the `baseline` measured before the first attempt.
fn settle(url: &str, s: &Session, limit: Duration, baseline: Option<Duration>) -> Option<Duration> {
    let fast = baseline.map_or(Duration::from_millis(50), |b| (b * 3).max(Duration::from_millis(50)));
    let until = Instant::now() + limit;
    let mut streak = Vec::new();
    while Instant::now() < until && !stopped(s) {
        match perfops_engine::watch::check(url, Duration::from_secs(1), s.insecure()) {
            Ok(took) if took <= fast => {
                streak.push(took);
                if streak.len() >= 3 {
                    streak.sort();
                    return Some(streak[1]);
                }
            }
            _ => streak.clear(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !stopped(s) {
        note!("the target did not recover within {:.0} s; going on", limit.as_secs_f64());
    }
    None
}

/// Whether the user stopped perfops (Ctrl-C, a signal).
fn stopped(s: &Session) -> bool {
    s.stop.load(std::sync::atomic::Ordering::Relaxed)
}

/// A rate as every output says it (#32: the headline said "capacity 24/s"
/// and the report's card "23.8/s"), without its unit.
fn round(r: f64) -> String {
    perfops_report::format::rate_number(r)
}
