//! `perfops sweep SCENARIO --concurrency 1,2,5,10,20,50`: the closed model at
//! each concurrency level in turn: throughput and latency per level, their
//! ratio to the lowest level, and the Universal Scalability Law fitted to
//! the curve (how much contention and coherency cost the target pays, and
//! where its throughput peaks).
//!
//! A hidden cap (a pool of 10 threads, an HTTP agent limited to 50 sockets)
//! shows as throughput that stops growing while latency grows in proportion
//! to the users (Little's law); the cap is about the plateau's throughput
//! times the latency at the lowest level.

use std::time::Duration;

use anyhow::{Result, bail};
use perfops_core::analysis::usl::{self, Observation};
use perfops_core::model::LoadModel;
use perfops_core::scenario::Load;
use perfops_report::run::{SweepLevel, SweepResult};

use crate::conclude::{Ending, Loaded};
use crate::exit::{Exit, UsageError};
use crate::session::{Session, SessionArgs, StagePlan};
use crate::shard::{Placement, RefusedShardArgs};

/// Flags of `perfops sweep`.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    /// The scenario and how to run it.
    pub session: SessionArgs,
    /// Shard flags this command refuses.
    pub refused: RefusedShardArgs,
    /// Concurrency levels (users looping request -> response), in order.
    pub concurrency: Vec<u32>,
    /// How long each level runs.
    pub hold: Duration,
}

/// `perfops sweep`: the closed model at each concurrency level, and the USL fit.
pub fn run(args: SweepArgs) -> Result<Exit> {
    if args.concurrency.is_empty() || args.concurrency.contains(&0) || args.hold.is_zero() {
        bail!(UsageError("--concurrency takes levels of 1 or more, --hold more than 0s".into()));
    }
    args.refused.refuse("sweep")?;
    let Some(mut s) = Session::open(&args.session, "sweep", &Placement::default())? else { return Ok(Exit::Usage) };
    if s.scenario.load.replay().is_some() {
        bail!(UsageError(
            "`sweep` runs users in a closed loop: a replay's arrivals are its recording's (run it with `perfops run`)"
                .into()
        ));
    }
    let think = match &s.scenario.load {
        Load::Closed { think, .. } => *think,
        Load::Open { .. } => Duration::ZERO,
    };
    note!(
        "sweep {} — concurrency {:?}, {:.0} s each; results in {}",
        s.scenario.name,
        args.concurrency,
        args.hold.as_secs_f64(),
        s.dir.path().display()
    );
    let llm = s.scenario.flows.iter().any(|f| f.steps.iter().any(|st| st.llm.is_some()));
    let mut loads: Vec<Loaded> = Vec::new();
    // The level the user cut short, if one was.
    let mut cut = None;
    let stop = s.stop.clone();
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    for &n in &args.concurrency {
        if stopped() {
            break;
        }
        let stage = StagePlan { name: format!("{n} users"), target_rate: None, start_rate: None, duration: args.hold };
        let model =
            LoadModel::Closed { connections: n, think, profile: None, duration: Some(args.hold), max_requests: None };
        let loaded = s.load(model, &[stage], None)?;
        if stopped() {
            // Cut short by the user: a level of a few ms would bend the
            // curve and the USL fit, so it is not one of the levels. Its
            // seconds stay in the results files as written.
            cut = Some(n);
            break;
        }
        let st = &loaded.stages[0];
        // The level table's figures: p50 of the answered requests (see `levels`).
        // An LLM step's answers: their output tokens per second too.
        let tokens = match llm && st.ran_s > 0.0 {
            true => format!(", {:.1} tokens out/s", st.stats.tokens_out as f64 / st.ran_s),
            false => String::new(),
        };
        note!(
            "{n:>5} users: {:.1}/s, p50 {}, p99 {}, errors {:.2}%{tokens}",
            st.achieved_rate,
            perfops_report::format::ms_compact(st.stats.latency_ok.quantile(0.5).as_secs_f64() * 1000.0),
            perfops_report::format::ms_compact(st.stats.latency.quantile(0.99).as_secs_f64() * 1000.0),
            st.stats.error_ratio() * 100.0
        );
        loads.push(loaded);
    }
    s.close();

    let levels = levels(&args.concurrency, &loads, llm);
    let obs: Vec<Observation> = levels
        .iter()
        .filter(|l| l.throughput > 0.0)
        .map(|l| Observation { concurrency: f64::from(l.concurrency), throughput: l.throughput })
        .collect();
    let fit = usl::fit(&obs).ok();
    let cap = concurrency_cap(&levels);
    let best_level = levels.iter().max_by(|a, b| a.throughput.total_cmp(&b.throughput)).map(|b| b.concurrency);
    let result = SweepResult {
        usl: fit,
        predicted_peak_concurrency: fit.as_ref().and_then(|f| f.peak_concurrency()),
        predicted_peak_throughput: fit.as_ref().and_then(|f| f.peak_throughput()),
        best_level,
        concurrency_cap: cap,
        levels,
    };

    let merged = Loaded::merged(&loads);
    let interrupted = stopped();
    let mut summary = s.judging().summarize(&merged, Ending::local(&merged, merged.stopped || interrupted, None));
    let mut text = format!("\n{}", result.table());
    for line in result.findings() {
        text.push_str(&line);
        text.push('\n');
    }
    let headline = result.headline();
    let headline = if interrupted && loads.len() < args.concurrency.len() {
        format!(
            "INCONCLUSIVE: interrupted {} before the sweep ended: {headline}",
            cut.map_or("between levels".into(), |n| format!("during {n} users"))
        )
    } else {
        headline
    };
    if let Some(v) = summary.verdict.as_mut() {
        v.headline = headline;
        // Throughput at a concurrency is no capacity (a rate that holds the
        // SLO, which `limit` finds): the best level read "capacity 184/s" in
        // the report, `runs` and `compare`, beside a `limit` run's.
        v.verdict.capacity_rps = None;
        v.verdict.breaks_at_rps = None;
        v.verdict.breaks_at_stage = None;
    }
    // Each level is the closed model, whatever the scenario's load says.
    summary.model = "closed".into();
    summary.sweep = Some(result);
    crate::say::out(&text);
    crate::conclude::finish(&s.dir, &mut summary, args.session.junit.as_deref(), &mut s.outputs)
}

/// Each level's figures; with `llm` (the scenario has an LLM step), its tokens per second too.
fn levels(concurrency: &[u32], loads: &[Loaded], llm: bool) -> Vec<SweepLevel> {
    let mut out: Vec<SweepLevel> = Vec::new();
    for (&n, l) in concurrency.iter().zip(loads) {
        let st = &l.stages[0];
        // Over the level's seconds, as its throughput is: tokens of the answers it counted.
        let tokens = |n: u64| llm.then(|| if st.ran_s > 0.0 { n as f64 / st.ran_s } else { 0.0 });
        // The answered requests' median: a refused connection fails in
        // microseconds and loops again, so an overloaded level's median over
        // every request would fall as the server gets worse, and so would the
        // ratios and the cap read from it. p99 keeps every request (#11).
        let p50 = st.stats.latency_ok.quantile(0.5).as_secs_f64() * 1000.0;
        let (t0, p0) = out.first().map_or((st.achieved_rate, p50), |f| (f.throughput, f.p50_ms));
        out.push(SweepLevel {
            concurrency: n,
            throughput: st.achieved_rate,
            p50_ms: p50,
            p99_ms: st.stats.latency.quantile(0.99).as_secs_f64() * 1000.0,
            p50_ratio: if p0 > 0.0 { p50 / p0 } else { 0.0 },
            throughput_ratio: if t0 > 0.0 { st.achieved_rate / t0 } else { 0.0 },
            error_ratio: st.stats.error_ratio(),
            tokens_in_per_s: tokens(st.stats.tokens_in),
            tokens_out_per_s: tokens(st.stats.tokens_out),
        });
    }
    out
}

/// When throughput stops growing (the last level within 10% of the one
/// before it, though it has at least 1.5x the users), the target serves
/// about `throughput x latency at the lowest level` requests at once.
fn concurrency_cap(levels: &[SweepLevel]) -> Option<f64> {
    let [.., a, b] = levels else { return None };
    let first = levels.first()?;
    let plateau = f64::from(b.concurrency) >= 1.5 * f64::from(a.concurrency) && b.throughput <= a.throughput * 1.10;
    // Little's law: requests in service = throughput x the time each takes
    // unqueued (the lowest level's), whatever users that level had.
    let cap = b.throughput * first.p50_ms / 1000.0;
    // A cap above the users tried is no cap of the target's.
    (plateau && first.p50_ms > 0.0 && cap < f64::from(b.concurrency)).then_some(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(concurrency: u32, throughput: f64, p50_ms: f64) -> SweepLevel {
        SweepLevel {
            concurrency,
            throughput,
            p50_ms,
            p99_ms: p50_ms,
            p50_ratio: 1.0,
            throughput_ratio: 1.0,
            error_ratio: 0.0,
            tokens_in_per_s: None,
            tokens_out_per_s: None,
        }
    }

    #[test]
    fn a_plateau_reveals_the_cap() {
        // 10 threads at 20 ms: 500/s from 10 users on.
        let pool = [level(1, 50.0, 20.0), level(10, 495.0, 20.2), level(20, 500.0, 40.0), level(50, 500.0, 100.0)];
        let cap = concurrency_cap(&pool).expect("a cap");
        assert!((cap - 10.0).abs() < 0.5, "{cap}");
        // The same pool swept from 4 users (it divided by them: "about 2 at once").
        let from_four =
            [level(4, 200.0, 20.0), level(10, 495.0, 20.2), level(20, 500.0, 40.0), level(50, 500.0, 100.0)];
        let cap = concurrency_cap(&from_four).expect("a cap");
        assert!((cap - 10.0).abs() < 0.5, "{cap}");
        // Still growing: no cap.
        let linear = [level(1, 50.0, 20.0), level(10, 500.0, 20.0), level(50, 2400.0, 20.5)];
        assert_eq!(concurrency_cap(&linear), None);
    }
}
