//! `perfops run SCENARIO` and `perfops check SCENARIO`: glue between the
//! scenario file, the engine and the results directory.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use clap::Args;
use perfops_core::measure::Stats;
use perfops_core::model::{LoadModel, Schedule, Shard};
use perfops_core::scenario::condition::Metric;
use perfops_core::scenario::feeder::Feeder;
use perfops_core::scenario::template::{Template, VarRef};
use perfops_core::scenario::{Body, Condition, JsonPart, Load, Override, Scenario, Step, TargetSpec};
use perfops_engine::{Interval, Plan, Target, Work};
use perfops_report::live::{self, LiveSecond};
use perfops_report::results::{RESULTS_VERSION, RunDir, utc_rfc3339};
use perfops_report::run::{
    Figures, RunSummary, SeriesLine, SloResult, StageThroughput, StepSecond, failures, stage_table,
};
use serde_json::json;

use crate::demo::DemoChild;
use crate::{Exit, UsageError};

/// Flags of `perfops run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The scenario file (YAML).
    scenario: PathBuf,
    /// Override a field before validation, e.g. `--set load.max_in_flight=100` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    /// Override the scenario's target (a URL, or demo:threads / demo:async).
    #[arg(long)]
    target: Option<String>,
    /// Where results directories are created.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// Worker threads (default: one per available core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// No live line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// Flags of `perfops check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Scenario files to validate.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Read and validate a scenario; on errors, print them all and return `None`.
fn load(path: &Path, overrides: &[Override]) -> Result<Option<(Scenario, String)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::Error::new(UsageError(format!("cannot read {}: {e}", path.display()))))?;
    match perfops_core::scenario::parse(&path.display().to_string(), &text, overrides) {
        Ok(s) => Ok(Some((s, text))),
        Err(diagnostics) => {
            eprint!("{}", diagnostics.render(&text));
            Ok(None)
        }
    }
}

pub(crate) fn check(args: CheckArgs) -> Result<Exit> {
    let mut ok = true;
    for path in &args.files {
        match load(path, &[])? {
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

/// Every template of the scenario, for finding `${env.X}` uses.
fn templates(s: &Scenario) -> Vec<&Template> {
    let mut out: Vec<&Template> = s.defaults.headers.iter().map(|(_, t)| t).collect();
    for step in s.setup.iter().chain(s.flows.iter().flat_map(|f| f.steps.iter())) {
        out.push(&step.path);
        out.extend(step.headers.iter().map(|(_, t)| t));
        match &step.body {
            Body::Raw(t) => out.push(t),
            Body::Form(f) => out.extend(f.iter().map(|(_, t)| t)),
            Body::Json(parts) => out.extend(parts.iter().filter_map(|p| match p {
                JsonPart::String(t) => Some(t),
                JsonPart::Literal(_) => None,
            })),
            Body::None => {}
        }
    }
    out
}

/// Replace header values that may carry secrets with `<redacted>`, unless
/// they are pure references (`Bearer ${token}` is no secret itself).
pub(crate) fn redact(text: &str) -> String {
    let re = redaction_regex(
        r#"(?i)((?:authorization|proxy-authorization|cookie|x-api-key)["']?\s*:\s*)("[^"\n]*"|'[^'\n]*'|[^,}\n#]+)"#,
    );
    re.replace_all(text, |c: &regex::Captures<'_>| {
        let value = &c[2];
        if value.contains("${") { c[0].to_string() } else { format!("{}\"<redacted>\"", &c[1]) }
    })
    .into_owned()
}

fn redaction_regex(pattern: &str) -> regex::Regex {
    // A constant pattern: tested below, so this cannot fail at run time.
    regex::Regex::new(pattern).expect("valid redaction pattern")
}

pub(crate) fn run(args: RunArgs) -> Result<Exit> {
    let mut overrides = args.set.clone();
    if let Some(t) = &args.target {
        overrides.push(Override { path: "target".into(), value: t.clone() });
    }
    let Some((scenario, text)) = load(&args.scenario, &overrides)? else { return Ok(Exit::Usage) };
    let usage = |m: String| anyhow::Error::new(UsageError(m));

    // ${env.X}: read once; a missing variable is an input error, not an empty string.
    let mut env = HashMap::new();
    for t in templates(&scenario) {
        for v in t.vars() {
            if let VarRef::Env(name) = v {
                let value = std::env::var(name).map_err(|_| {
                    usage(format!("`${{env.{name}}}` is used in `{}` but {name} is not set", t.source()))
                })?;
                env.insert(name.clone(), value);
            }
        }
    }
    let base = args.scenario.parent().unwrap_or(Path::new("."));
    let mut feeders = Vec::new();
    for spec in &scenario.data {
        let path = base.join(&spec.csv);
        let csv = std::fs::read_to_string(&path)
            .map_err(|e| usage(format!("data `{}`: cannot read {}: {e}", spec.name, path.display())))?;
        feeders.push(
            Feeder::from_csv(&spec.name, &csv, spec.mode).map_err(|e| usage(format!("{}: {e}", path.display())))?,
        );
    }

    // The demo target lives as long as this run.
    let (demo, url) = match &scenario.target {
        TargetSpec::Url(u) => (None, u.clone()),
        TargetSpec::Demo(model, options) => {
            let name = match model {
                perfops_core::scenario::DemoModel::Threads => "threads",
                perfops_core::scenario::DemoModel::Async => "async",
            };
            let child = DemoChild::start(name, options)?;
            let url = child.url.clone();
            eprintln!("perfops: started the demo target ({name}) at {url}");
            (Some(child), url)
        }
    };
    let target = Target::parse(&url).map_err(|e| usage(e.to_string()))?;

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    perfops_engine::raise_fd_limit();

    let (load, stage_ends) = plan_load(&scenario.load)?;
    let plan_with = |work: Work, load: LoadModel| Plan {
        target: target.clone(),
        work: Arc::new(work),
        load,
        stage_ends: stage_ends.clone(),
        duration: None,
        max_requests: None,
        timeout: scenario.defaults.timeout,
        connect_timeout: scenario.defaults.timeout.min(Duration::from_secs(5)),
        insecure: args.insecure,
        workers: args.workers,
        shard: Shard::WHOLE,
    };

    let mut globals = HashMap::new();
    if !scenario.setup.is_empty() {
        let work = Work::new(
            &target,
            vec![("setup".into(), 1, scenario.setup.clone())],
            scenario.defaults.headers.clone(),
            env.clone(),
            feeders.clone(),
        );
        let setup_plan = plan_with(work, LoadModel::Closed { connections: 1, think: Duration::ZERO, profile: None });
        globals = perfops_engine::run_setup(&setup_plan)?;
    }
    let flows: Vec<(String, u32, Vec<Step>)> =
        scenario.flows.iter().map(|f| (f.name.clone(), f.weight, f.steps.clone())).collect();
    let mut work = Work::new(&target, flows, scenario.defaults.headers.clone(), env, feeders);
    work.globals = globals;
    let step_names = work.step_names.clone();
    let plan = plan_with(work, load);

    let started = SystemTime::now();
    let mut dir = RunDir::create(&args.out, &scenario.name, started)
        .with_context(|| format!("creating a results directory under {}", args.out.display()))?;
    let target_label = match &scenario.target {
        TargetSpec::Url(u) => u.clone(),
        TargetSpec::Demo(..) => format!("{} ({url})", text_target(&scenario)),
    };
    let model = if matches!(scenario.load, Load::Open { .. }) { "open" } else { "closed" };
    let argv: Vec<String> = std::env::args().map(|a| redact_arg(&a)).collect();
    dir.write_json("meta.json", &json!({
        "format": "perfops.meta", "version": RESULTS_VERSION, "perfops_version": env!("CARGO_PKG_VERSION"),
        "host": nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned()),
        "command": argv, "started_at": utc_rfc3339(started), "name": scenario.name, "target": target_label,
        "model": model, "stages": scenario.load.stages().iter().map(|s| json!({
            "name": s.name, "from": s.segment.from.as_f64(), "to": s.segment.to.as_f64(), "duration_s": s.segment.duration.as_secs_f64()
        })).collect::<Vec<_>>(), "steps": step_names, "shard": null,
    }))?;
    dir.write_file("scenario.yaml", redact(&text).as_bytes())?;
    eprintln!(
        "perfops: {} — {} stage(s), {:.0} s; results in {}",
        scenario.name,
        scenario.load.stages().len(),
        scenario.load.duration().as_secs_f64(),
        dir.path().display()
    );

    let live_on = !args.quiet && std::io::stderr().is_terminal();
    let color = live_on && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let stages = scenario.load.stages();
    let mut per_stage: Vec<Stats> = vec![Stats::default(); stages.len()];
    let mut per_step: Vec<Stats> = vec![Stats::default(); step_names.len()];
    // Throughput is counted when responses arrive (latency by when arrivals
    // were due): a stage past capacity must not look faster because its
    // backlog drained later.
    let mut throughput = StageThroughput::new(stage_ends.clone());
    let mut abort = Abort::new(&scenario);
    let mut write_error: Option<std::io::Error> = None;
    let outcome = perfops_engine::run(&plan, stop.clone(), |iv: &Interval| {
        for (key, stats) in &iv.parts {
            if let Some(s) = per_stage.get_mut(key.stage as usize) {
                s.merge(stats);
            }
            if let Some(s) = per_step.get_mut(key.step as usize) {
                s.merge(stats);
            }
        }
        let at = Duration::from_secs(u64::from(iv.index));
        let stage = stage_ends.iter().position(|&e| at < e).unwrap_or(stages.len() - 1);
        if stop.load(Ordering::Relaxed) {
            // Ctrl-C or an abort: arrivals stopped within this second.
            throughput.stop(at + iv.length);
        }
        throughput.add_second(at, iv.length, iv.stats.iterations);
        let draining = at >= throughput.active_end();
        let label = if draining { "(draining)" } else { stages[stage].name.as_str() };
        let line = series_line(iv, label, &step_names);
        if write_error.is_none()
            && let Err(e) = dir.append_second(
                &line,
                at,
                iv.length,
                &[("latency", &iv.stats.latency), ("service", &iv.stats.service)],
            )
        {
            // A full disk must not kill the run: say so, keep measuring, keep what was written.
            eprintln!("perfops: cannot write results ({e}); the run goes on, the summary will be printed");
            write_error = Some(e);
        }
        if live_on {
            let target = if draining { None } else { iv.target };
            let s =
                LiveSecond { index: iv.index, length: iv.length, target, in_flight: iv.in_flight, stats: &iv.stats };
            eprintln!("{} [{label}]", live::line(&s, color));
        }
        if let Some(reason) = abort.second(iv) {
            eprintln!("perfops: aborting: {reason}");
            stop.store(true, Ordering::Relaxed);
        }
    })?;
    drop(demo);

    let generator = crate::quick::generator_use(outcome.workers);
    let stage_figures: Vec<Figures> = stages
        .iter()
        .zip(&per_stage)
        .enumerate()
        .map(|(i, (st, s))| {
            let target = matches!(scenario.load, Load::Open { .. })
                .then(|| (st.segment.from.as_f64() + st.segment.to.as_f64()) / 2.0);
            Figures::new(&st.name, s, throughput.ran(i).as_secs_f64(), target, throughput.rate(i))
        })
        .collect();
    let elapsed = outcome.elapsed.as_secs_f64();
    let per_second = |n: u64| if elapsed > 0.0 { n as f64 / elapsed } else { 0.0 };
    // A step's achieved rate is its responses per second; the run's, its arrivals answered.
    let step_figures: Vec<Figures> = step_names
        .iter()
        .zip(&per_step)
        .map(|(n, s)| Figures::new(n, s, elapsed, None, per_second(s.completed)))
        .collect();
    let total = Figures::new("total", &outcome.total, elapsed, None, per_second(outcome.total.iterations));
    let slo: Vec<SloResult> =
        scenario.slo.iter().map(|c| evaluate(c, &outcome.total, &per_step, &step_names, &stage_figures)).collect();
    let mut warnings = Vec::new();
    if outcome.total.dropped > 0 {
        warnings.push(format!(
            "{} arrivals were dropped at max_in_flight: the generator, not the server, was the limit in those seconds",
            outcome.total.dropped
        ));
    }
    let summary = RunSummary {
        format: "perfops.summary".into(),
        version: RESULTS_VERSION,
        name: scenario.name.clone(),
        target: target_label,
        model: model.into(),
        started_at: utc_rfc3339(started),
        elapsed_s: outcome.elapsed.as_secs_f64(),
        interrupted: outcome.interrupted && abort.reason.is_none(),
        aborted: abort.reason.clone(),
        stages: stage_figures,
        steps: step_figures,
        total,
        slo,
        generator,
        warnings,
    };
    if let Err(e) = dir.write_json("summary.json", &summary) {
        eprintln!("perfops: cannot write summary.json ({e})");
    }
    crate::out(&format!("\n{}results: {}\n", stage_table(&summary), dir.path().display()));
    // An abort rule is a threshold too: a run it stopped did not pass.
    let passed = summary.slo.iter().all(|s| s.passed) && summary.aborted.is_none();
    Ok(if passed { Exit::Passed } else { Exit::ThresholdsFailed })
}

fn text_target(s: &Scenario) -> &'static str {
    match s.target {
        TargetSpec::Demo(perfops_core::scenario::DemoModel::Threads, _) => "demo:threads",
        TargetSpec::Demo(perfops_core::scenario::DemoModel::Async, _) => "demo:async",
        TargetSpec::Url(_) => "url",
    }
}

fn redact_arg(a: &str) -> String {
    let lower = a.to_ascii_lowercase();
    if ["authorization", "cookie", "token", "password", "secret"].iter().any(|w| lower.contains(w)) {
        match a.split_once(['=', ':']) {
            Some((k, _)) => format!("{k}=<redacted>"),
            None => "<redacted>".into(),
        }
    } else {
        a.to_string()
    }
}

/// The engine's load model and the stage boundaries from a scenario's `load`.
fn plan_load(load: &Load) -> Result<(LoadModel, Vec<Duration>)> {
    let segments: Vec<_> = load.stages().iter().map(|s| s.segment).collect();
    let mut ends = Vec::new();
    let mut t = Duration::ZERO;
    for s in &segments {
        t += s.duration;
        ends.push(t);
    }
    let schedule = Schedule::new(segments.clone()).context("the load profile")?;
    Ok(match load {
        Load::Open { max_in_flight, .. } => (LoadModel::Open { schedule, max_in_flight: *max_in_flight }, ends),
        Load::Closed { think, .. } => {
            let max = segments.iter().map(|s| s.from.as_f64().max(s.to.as_f64())).fold(0.0, f64::max).ceil() as u32;
            (LoadModel::Closed { connections: max.max(1), think: *think, profile: Some(schedule) }, ends)
        }
    })
}

fn series_line(iv: &Interval, stage: &str, step_names: &[String]) -> SeriesLine {
    let secs = iv.length.as_secs_f64().max(1e-9);
    let mut steps = std::collections::BTreeMap::new();
    let mut by_step: HashMap<u16, Stats> = HashMap::new();
    for (key, s) in &iv.parts {
        by_step.entry(key.step).or_default().merge(s);
    }
    for (step, s) in by_step {
        let ms = |q: f64| s.latency.quantile(q).as_secs_f64() * 1000.0;
        let name = step_names.get(step as usize).cloned().unwrap_or_else(|| step.to_string());
        steps.insert(
            name,
            StepSecond {
                completed: s.completed,
                failed: s.failures.total(),
                p50: ms(0.5),
                p95: ms(0.95),
                p99: ms(0.99),
            },
        );
    }
    let st = &iv.stats;
    SeriesLine {
        t: iv.index,
        length_s: iv.length.as_secs_f64(),
        stage: stage.to_string(),
        target_rate: iv.target.map(|t| t / secs),
        achieved_rate: st.iterations as f64 / secs,
        iterations: st.iterations,
        sent: st.sent,
        completed: st.completed,
        succeeded: st.succeeded(),
        failed: st.failures.total(),
        dropped: st.dropped,
        in_flight: iv.in_flight,
        failures: failures(st),
        latency_ms: st.latency.summary(),
        service_ms: st.service.summary(),
        bytes_in: st.bytes_in,
        bytes_out: st.bytes_out,
        steps,
    }
}

/// The value a condition looks at in `stats`, in the threshold's unit.
fn measure(c: &Condition, stats: &Stats, achieved_share: Option<f64>) -> Option<f64> {
    Some(match &c.metric {
        Metric::Quantile(q) => stats.latency.quantile(*q).as_secs_f64(),
        Metric::Mean => stats.latency.mean_ms() / 1000.0,
        Metric::Max => stats.latency.max().as_secs_f64(),
        Metric::Errors => stats.error_ratio(),
        Metric::Rate => achieved_share?,
        // Watched metrics arrive with `watch:` (issue #4).
        Metric::Watched(_) => return None,
    })
    .filter(|_| !stats.latency.is_empty() || matches!(c.metric, Metric::Errors))
}

fn display(c: &Condition, v: f64) -> f64 {
    if c.metric.is_latency() {
        v * 1000.0
    } else if matches!(c.metric, Metric::Errors | Metric::Rate) {
        v * 100.0
    } else {
        v
    }
}

/// An SLO line over the whole run (per-stage verdicts come with `limit`, issue #4).
fn evaluate(c: &Condition, total: &Stats, per_step: &[Stats], step_names: &[String], stages: &[Figures]) -> SloResult {
    let stats = match &c.step {
        Some(name) => step_names.iter().position(|n| n == name).and_then(|i| per_step.get(i)).unwrap_or(total),
        None => total,
    };
    let share = {
        let (t, a): (f64, f64) = stages
            .iter()
            .filter_map(|s| s.target_rate.map(|r| (r * s.duration_s, s.achieved_rate * s.duration_s)))
            .fold((0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
        (t > 0.0).then(|| a / t)
    };
    let value = measure(c, stats, share);
    SloResult { slo: c.text.clone(), value: value.map(|v| display(c, v)), passed: value.is_some_and(|v| c.holds(v)) }
}

/// `abort_when` rules, checked every second.
struct Abort {
    rules: Vec<(perfops_core::scenario::AbortRule, u32)>,
    reason: Option<String>,
}

impl Abort {
    fn new(s: &Scenario) -> Abort {
        Abort { rules: s.abort_when.iter().map(|r| (r.clone(), 0)).collect(), reason: None }
    }

    /// Count consecutive seconds each rule held; the reason once one held for its window.
    fn second(&mut self, iv: &Interval) -> Option<String> {
        if self.reason.is_some() {
            return None;
        }
        for (rule, held) in &mut self.rules {
            let share = iv.target.filter(|t| *t > 0.0).map(|t| iv.stats.iterations as f64 / t);
            let holds = measure(&rule.condition, &iv.stats, share).is_some_and(|v| rule.condition.holds(v));
            *held = if holds { *held + 1 } else { 0 };
            if u64::from(*held) >= rule.window.as_secs().max(1) {
                let from = iv.index + 1 - *held;
                let reason = format!("`{}` held for {} s (t={}s..{}s)", rule_text(rule), held, from, iv.index + 1);
                self.reason = Some(reason.clone());
                return Some(reason);
            }
        }
        None
    }
}

fn rule_text(rule: &perfops_core::scenario::AbortRule) -> String {
    format!("{} for {}s", rule.condition.text, rule.window.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_references_kept() {
        let cases = [
            ("headers: { Authorization: \"Bearer abc123\" }", "headers: { Authorization: \"<redacted>\" }"),
            ("  Cookie: session=xyz", "  Cookie: \"<redacted>\""),
            ("headers: { Authorization: \"Bearer ${token}\" }", "headers: { Authorization: \"Bearer ${token}\" }"),
            ("x-api-key: 'k-1', Accept: json", "x-api-key: \"<redacted>\", Accept: json"),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want);
        }
        assert_eq!(redact_arg("Authorization: Bearer x"), "Authorization=<redacted>");
        assert_eq!(redact_arg("--quiet"), "--quiet");
    }
}
