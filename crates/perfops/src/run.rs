//! `perfops run SCENARIO` and `perfops check SCENARIO`: the scenario's load
//! profile run once in a [`Session`], each stage judged, the run summarised.
//! The summary (with its verdict, diagnostics and JUnit cases) is built here
//! and also used by `limit`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use perfops_core::analysis::diagnose::Diagnostic;
use perfops_core::analysis::verdict::{self, Judged, RunResult, RunVerdict, StageVerdict};
use perfops_core::model::{LoadModel, Schedule};
use perfops_core::pipeline::AbortWhen;
use perfops_core::scenario::Load;
use perfops_report::results::{RESULTS_VERSION, utc_rfc3339};
use perfops_report::run::{Figures, RunSummary, StageSummary, VerdictSummary, stage_table};

use crate::Exit;
use crate::session::{Loaded, Session, SessionArgs, StagePlan, inputs, load_scenario};

/// Flags of `perfops run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    session: SessionArgs,
}

/// Flags of `perfops check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Scenario files to validate.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub(crate) fn check(args: CheckArgs) -> Result<Exit> {
    let mut ok = true;
    for path in &args.files {
        match load_scenario(path, &[])? {
            // What `run` reads besides the file (environment, CSV files, the
            // target's URL), read alike: `check` passes what `run` accepts (#11).
            Some((s, _)) if let Err(e) = inputs(&s, path) => {
                eprintln!("{}: {e:#}", path.display());
                ok = false;
            }
            Some((s, _)) => crate::out(&format!(
                "{}: ok ({} flows, {} stages, {:.0} s)\n",
                path.display(),
                s.flows.len(),
                s.load.stages().len(),
                s.load.duration().as_secs_f64()
            )),
            None => ok = false,
        }
    }
    Ok(if ok { Exit::Passed } else { Exit::Usage })
}

pub(crate) fn run(args: RunArgs) -> Result<Exit> {
    let Some(mut s) = Session::open(&args.session, "run")? else { return Ok(Exit::Usage) };
    let model = load_model(&s.scenario.load)?;
    let open = s.scenario.load.is_open();
    let stages: Vec<StagePlan> = s
        .scenario
        .load
        .stages()
        .iter()
        .map(|st| StagePlan {
            name: st.name.clone(),
            target_rate: open.then(|| (st.segment.from.as_f64() + st.segment.to.as_f64()) / 2.0),
            duration: st.segment.duration,
        })
        .collect();
    eprintln!(
        "perfops: {} — {} stage(s), {:.0} s; results in {}",
        s.scenario.name,
        stages.len(),
        s.scenario.load.duration().as_secs_f64(),
        s.dir.path().display()
    );
    let mut abort = AbortWhen::new(&s.scenario.abort_when);
    let loaded = s.load(model, &stages, Some(&mut abort))?;
    // The last samples (the queue the load left behind) before judging.
    s.close();
    let interrupted = loaded.stopped && abort.reason().is_none();
    let summary = summarize(&s, &loaded, interrupted, abort.reason().map(str::to_string));
    finish(&mut s, &summary, args.session.junit.as_deref())
}

/// Write the summary (and JUnit), print the end-of-run text, and say the exit code.
pub(crate) fn finish(s: &mut Session, summary: &RunSummary, junit: Option<&std::path::Path>) -> Result<Exit> {
    if let Err(e) = s.dir.write_json("summary.json", summary) {
        eprintln!("perfops: cannot write summary.json ({e})");
    }
    if let Some(path) = junit {
        std::fs::write(path, perfops_report::junit::render(summary))
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    // The report is made from the files just written, as `perfops report` would.
    let report = match perfops_report::html::render(s.dir.path()) {
        Ok(page) => match s.dir.write_file("report.html", page.as_bytes()) {
            Ok(()) => format!("report:  {}\n", s.dir.path().join("report.html").display()),
            Err(e) => format!("report:  not written ({e})\n"),
        },
        Err(e) => format!("report:  not made ({e})\n"),
    };
    crate::out(&format!("\n{}results: {}\n{report}", stage_table(summary), s.dir.path().display()));
    // An abort rule is a threshold too: a run it stopped did not pass; nor did
    // an inconclusive one, which proves nothing about the server.
    let passed =
        summary.verdict.as_ref().is_some_and(|v| v.verdict.result == RunResult::Passed) && summary.aborted.is_none();
    Ok(if passed { Exit::Passed } else { Exit::ThresholdsFailed })
}

/// The summary of `loaded` in session `s`: figures, verdicts, diagnostics.
pub(crate) fn summarize(s: &Session, loaded: &Loaded, interrupted: bool, aborted: Option<String>) -> RunSummary {
    let judged = s.judge(&loaded.stages);
    let diagnostics = s.diagnose(&loaded.stages, &judged, &loaded.dropped);
    let stages: Vec<StageSummary> = loaded
        .stages
        .iter()
        .zip(&judged)
        .map(|(st, j)| StageSummary {
            figures: Figures::new(&st.plan.name, &st.stats, st.ran_s, st.plan.target_rate, st.achieved_rate),
            from_s: st.from_s,
            verdict: Some(j.verdict),
            reasons: j.reasons.clone(),
            slo: j.slo.clone(),
        })
        .collect();
    let mut run_verdict = verdict::run_verdict(
        &loaded
            .stages
            .iter()
            .zip(&judged)
            .map(|(st, j)| (j.verdict, st.plan.target_rate.unwrap_or(st.achieved_rate), st.plan.name.as_str()))
            .collect::<Vec<_>>(),
    );
    // A run stopped before its end proved nothing about what it did not run:
    // the stages that ran may all have held, but "passed" would claim the profile.
    if interrupted && run_verdict.result == RunResult::Passed {
        run_verdict.result = RunResult::Inconclusive;
    }
    let headline = headline(&run_verdict, &judged, &diagnostics, loaded, interrupted);
    let elapsed = loaded.elapsed.as_secs_f64();
    let per_second = |n: u64| if elapsed > 0.0 { n as f64 / elapsed } else { 0.0 };
    // A step's achieved rate is its responses per second; the run's, its arrivals answered.
    let step_figures: Vec<Figures> = s
        .step_names
        .iter()
        .map(|n| {
            let st = loaded.steps.get(n).cloned().unwrap_or_default();
            Figures::new(n, &st, elapsed, None, per_second(st.completed))
        })
        .collect();
    let total = Figures::new("total", &loaded.total, elapsed, None, per_second(loaded.total.iterations));
    // The SLO over the whole run, for k6 habits; the verdict judges stages.
    let whole_share = {
        let (t, a) = loaded
            .stages
            .iter()
            .filter_map(|st| st.plan.target_rate.map(|r| (r * st.ran_s, st.achieved_rate * st.ran_s)))
            .fold((0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
        (t > 0.0).then(|| a / t)
    };
    let watched = s.store.ranges(f64::NEG_INFINITY, f64::INFINITY);
    let slo =
        s.scenario.slo.iter().map(|c| verdict::check(c, &loaded.total, &loaded.steps, whole_share, &watched)).collect();
    let mut warnings = Vec::new();
    if loaded.total.dropped > 0 {
        warnings.push(format!(
            "{} arrivals were dropped at max_in_flight: the generator, not the server, was the limit in those seconds",
            loaded.total.dropped
        ));
    }
    RunSummary {
        format: "perfops.summary".into(),
        version: RESULTS_VERSION,
        name: s.scenario.name.clone(),
        target: s.target_label.clone(),
        model: if s.scenario.load.is_open() { "open" } else { "closed" }.into(),
        started_at: utc_rfc3339(s.started),
        elapsed_s: elapsed,
        interrupted,
        aborted,
        verdict: Some(VerdictSummary { verdict: run_verdict, headline }),
        stages,
        steps: step_figures,
        total,
        slo,
        diagnostics,
        probes: s.store.probes.clone(),
        limit: None,
        sweep: None,
        generator: crate::quick::generator_use(loaded.workers, loaded.naps),
        warnings,
    }
}

/// One sentence: what held, where it broke, and the top diagnostic.
fn headline(
    v: &RunVerdict,
    judged: &[Judged],
    diagnostics: &[Diagnostic],
    loaded: &Loaded,
    interrupted: bool,
) -> String {
    let rate = |r: f64| format!("{}/s", trim(r));
    let first_not_run = judged.iter().position(|j| j.verdict == StageVerdict::NotRun);
    let mut text = match (v.result, interrupted, first_not_run) {
        (RunResult::Failed, ..) => "FAILED".into(),
        (_, true, _) => format!(
            "INCONCLUSIVE: interrupted at t={:.0}s, {}: the stages that ran {}",
            loaded.elapsed.as_secs_f64(),
            first_not_run
                .and_then(|i| loaded.stages.get(i))
                .map_or("in its last stage".to_string(), |s| format!("before stage {}", s.plan.name)),
            if v.result == RunResult::Inconclusive && judged.iter().any(|j| j.verdict == StageVerdict::Inconclusive) {
                "judge nothing where the generator was the limit"
            } else {
                "held"
            }
        ),
        (RunResult::Passed, ..) => "PASSED: every stage held".to_string(),
        (RunResult::Inconclusive, ..) => {
            "INCONCLUSIVE: the generator was the limit in some stages, so they judge nothing".into()
        }
    };
    if let Some(c) = v.capacity_rps {
        text.push_str(&format!("; holds {}", rate(c)));
    } else if v.breaks_at_rps.is_some() {
        text.push_str("; no stage held");
    }
    if let (Some(b), Some(stage)) = (v.breaks_at_rps, &v.breaks_at_stage) {
        let named = if *stage == rate(b) { String::new() } else { format!(" ({stage})") };
        text.push_str(&format!("; breaks at {}{named}", rate(b)));
        let i = loaded.stages.iter().position(|s| &s.plan.name == stage).unwrap_or(0);
        if let Some(reason) = judged.get(i).and_then(|j| j.reasons.first()) {
            text.push_str(&format!(": {reason}"));
        }
    }
    if let Some(d) = diagnostics.first() {
        text.push_str(&format!(" — why: {}", d.title));
    }
    if first_not_run.is_some() && !interrupted {
        text.push_str(" (some stages did not run)");
    }
    text
}

fn trim(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 { format!("{:.0}", v) } else { format!("{v:.1}") }
}

/// The engine's load model from a scenario's `load`.
pub(crate) fn load_model(load: &Load) -> Result<LoadModel> {
    let segments: Vec<_> = load.stages().iter().map(|s| s.segment).collect();
    let schedule = Schedule::new(segments.clone()).context("the load profile")?;
    Ok(match load {
        Load::Open { max_in_flight, .. } => LoadModel::Open { schedule, max_in_flight: *max_in_flight },
        Load::Closed { think, .. } => {
            let max = segments.iter().map(|s| s.from.as_f64().max(s.to.as_f64())).fold(0.0, f64::max).ceil() as u32;
            LoadModel::Closed {
                connections: max.max(1),
                think: *think,
                profile: Some(schedule),
                duration: None,
                max_requests: None,
            }
        }
    })
}
