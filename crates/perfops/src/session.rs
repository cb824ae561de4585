//! A measuring session: one scenario, one target (the demo started when the
//! scenario asks for it), one results directory, the watchers, and one or
//! more loads run against it: `run` runs the scenario's profile once, `limit`
//! one attempt per rate it tries, `sweep` one closed-model level per
//! concurrency. Every load's seconds land in the same `series.jsonl` on the
//! session's clock, the one watched metrics and probes are stamped with:
//!
//! ```text
//!   session t0 ──┬─ load 1 (stages A, B) ─┬─ cool-down ─┬─ load 2 (stage C) ─┬──>
//!   series.jsonl │ t=0,1,2,...            │             │ t=k, k+1, ...      │
//!   watch.jsonl  ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   ·   (every `every`)
//! ```
//!
//! Judging (verdicts, diagnostics) is in `perfops-core::analysis`; this module
//! collects what it needs.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use clap::Args;
use perfops_core::analysis::diagnose::{self, Diagnostic, StallFinding, Window};
use perfops_core::analysis::verdict::{self, Judged, StageFacts};
use perfops_core::measure::Stats;
use perfops_core::model::{LoadModel, Shard};
use perfops_core::scenario::feeder::Feeder;
use perfops_core::scenario::template::{Template, VarRef};
use perfops_core::scenario::{Body, JsonPart, Override, Scenario, Step, TargetSpec};
use perfops_engine::watch::{WatchEvent, Watcher};
use perfops_engine::{Interval, Plan, Target, Work};
use perfops_report::live::{self, LiveSecond};
use perfops_report::results::{RESULTS_VERSION, RunDir, utc_rfc3339};
use perfops_report::run::{MetaStage, RunMeta, SeriesLine, StageThroughput, StepSecond, failures};

use crate::UsageError;
use crate::demo::DemoChild;
use crate::metrics::Metrics;
use crate::watching::{self, Store};

/// Flags shared by `run`, `limit` and `sweep`.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// The scenario file (YAML).
    pub(crate) scenario: PathBuf,
    /// Override a field before validation, e.g. `--set load.max_in_flight=100` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub(crate) set: Vec<Override>,
    /// Override the scenario's target (a URL, or demo:threads / demo:async).
    #[arg(long)]
    pub(crate) target: Option<String>,
    /// Where results directories are created.
    #[arg(long, default_value = "runs")]
    pub(crate) out: PathBuf,
    /// Worker threads (default: one per available core).
    #[arg(long, default_value_t = 0)]
    pub(crate) workers: usize,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    pub(crate) insecure: bool,
    /// No live line on stderr.
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
    /// Also write each SLO line per stage as a JUnit test case to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Serve the generator's own metrics for Prometheus at http://ADDR/metrics
    /// while it runs (e.g. 127.0.0.1:9464; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_listen: Option<String>,
}

/// Read and validate a scenario; on errors, print them all and return `None`.
pub(crate) fn load_scenario(path: &Path, overrides: &[Override]) -> Result<Option<(Scenario, String)>> {
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

/// A stage of one load, as planned.
#[derive(Debug, Clone)]
pub(crate) struct StagePlan {
    /// Its name.
    pub(crate) name: String,
    /// Open model: mean scheduled arrivals per second.
    pub(crate) target_rate: Option<f64>,
    /// How long it lasts.
    pub(crate) duration: Duration,
}

/// A stage of one load, as measured.
#[derive(Debug, Clone)]
pub(crate) struct StageResult {
    pub(crate) plan: StagePlan,
    /// Start and end on the session clock, seconds (end: planned, or the stop).
    pub(crate) from_s: f64,
    pub(crate) to_s: f64,
    /// How long it ran.
    pub(crate) ran_s: f64,
    /// Arrivals answered per second while it ran.
    pub(crate) achieved_rate: f64,
    /// Requests of the arrivals due in it.
    pub(crate) stats: Stats,
    /// The same by step name.
    pub(crate) steps: BTreeMap<String, Stats>,
}

/// One load, measured.
pub(crate) struct Loaded {
    pub(crate) stages: Vec<StageResult>,
    pub(crate) total: Stats,
    /// Per step name over the load.
    pub(crate) steps: BTreeMap<String, Stats>,
    pub(crate) elapsed: Duration,
    pub(crate) workers: usize,
    /// Per second on the session clock: arrivals dropped.
    pub(crate) dropped: Vec<(f64, u64)>,
    /// Stopped by a signal or a hook.
    pub(crate) stopped: bool,
    /// Closed loops: naps taken to coalesce wake-ups, and the longest.
    pub(crate) naps: (u64, Duration),
}

impl Loaded {
    /// Several loads as one (`limit`'s attempts, `sweep`'s levels), in order.
    pub(crate) fn merged(loads: &[Loaded]) -> Loaded {
        let mut m = Loaded {
            stages: Vec::new(),
            total: Stats::default(),
            steps: BTreeMap::new(),
            elapsed: Duration::ZERO,
            workers: 0,
            dropped: Vec::new(),
            stopped: false,
            naps: (0, Duration::ZERO),
        };
        for l in loads {
            m.stages.extend(l.stages.iter().cloned());
            m.total.merge(&l.total);
            for (k, v) in &l.steps {
                m.steps.entry(k.clone()).or_default().merge(v);
            }
            m.elapsed += l.elapsed;
            m.workers = m.workers.max(l.workers);
            m.dropped.extend(l.dropped.iter().copied());
            m.stopped |= l.stopped;
            m.naps = (m.naps.0 + l.naps.0, m.naps.1.max(l.naps.1));
        }
        m
    }
}

/// Called once per second of a load, with what was watched so far;
/// returning a reason stops the load.
pub(crate) type Hook<'a> = &'a mut dyn FnMut(&Interval, &Store) -> Option<String>;

/// An open session.
pub(crate) struct Session {
    pub(crate) scenario: Scenario,
    pub(crate) target_label: String,
    pub(crate) url: String,
    pub(crate) dir: RunDir,
    pub(crate) started: SystemTime,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) store: Store,
    pub(crate) step_names: Vec<String>,
    target: Target,
    work: Arc<Work>,
    timeout: Duration,
    t0: Instant,
    events: Receiver<WatchEvent>,
    watcher: Option<Watcher>,
    demo: Option<DemoChild>,
    metrics: Option<Metrics>,
    live_on: bool,
    color: bool,
    workers: usize,
    insecure: bool,
    write_error: bool,
}

impl Session {
    /// Validate the scenario, start the target if it is the demo, run the
    /// setup, create the results directory and start watching. `None`: the
    /// scenario had errors, already printed.
    pub(crate) fn open(args: &SessionArgs, command: &str) -> Result<Option<Session>> {
        let mut overrides = args.set.clone();
        if let Some(t) = &args.target {
            overrides.push(Override { path: "target".into(), value: t.clone() });
        }
        let Some((scenario, text)) = load_scenario(&args.scenario, &overrides)? else { return Ok(None) };
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

        // Bound before anything starts, so a busy address is a usage error
        // that costs nothing; the steps are known after the setup.
        let mut metrics = args.metrics_listen.as_deref().map(|a| Metrics::start(a, &[])).transpose()?;

        // The demo target lives as long as the session.
        let (demo, url) = match &scenario.target {
            TargetSpec::Url(u) => (None, u.clone()),
            TargetSpec::Demo(model, options) => {
                let name = demo_name(model);
                let child = DemoChild::start(name, options)?;
                let url = child.url.clone();
                eprintln!("perfops: started the demo target ({name}) at {url}");
                (Some(child), url)
            }
        };
        let target = Target::parse(&url).map_err(|e| usage(e.to_string()))?;
        let target_label = match &scenario.target {
            TargetSpec::Url(u) => u.clone(),
            TargetSpec::Demo(model, _) => format!("demo:{} ({url})", demo_name(model)),
        };

        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // A second Ctrl-C exits at once; the first stops the load and keeps the results.
            signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())?;
            signal_hook::flag::register(signal, stop.clone())?;
        }
        perfops_engine::raise_fd_limit();

        let timeout = scenario.defaults.timeout;
        let plan_for = |work: Work| Plan {
            target: target.clone(),
            work: Arc::new(work),
            load: LoadModel::Closed {
                connections: 1,
                think: Duration::ZERO,
                profile: None,
                duration: None,
                max_requests: None,
            },
            stage_ends: Vec::new(),
            timeout,
            connect_timeout: timeout.min(Duration::from_secs(5)),
            insecure: args.insecure,
            workers: args.workers,
            shard: Shard::WHOLE,
            start_at: None,
        };
        let mut globals = HashMap::new();
        if !scenario.setup.is_empty() {
            let setup = vec![("setup".to_string(), 1, scenario.setup.clone())];
            let work = Work::new(&target, setup, scenario.defaults.headers.clone(), env.clone(), feeders.clone());
            globals = perfops_engine::run_setup(&plan_for(work))?;
        }
        let flows: Vec<(String, u32, Vec<Step>)> =
            scenario.flows.iter().map(|f| (f.name.clone(), f.weight, f.steps.clone())).collect();
        let mut work = Work::new(&target, flows, scenario.defaults.headers.clone(), env, feeders);
        work.globals = globals;
        let step_names = work.step_names.clone();
        if let Some(m) = &mut metrics {
            m.declare(&step_names);
        }

        let started = SystemTime::now();
        let dir = RunDir::create(&args.out, &scenario.name, started)
            .with_context(|| format!("creating a results directory under {}", args.out.display()))?;
        let meta = RunMeta {
            format: "perfops.meta".into(),
            version: RESULTS_VERSION,
            perfops_version: env!("CARGO_PKG_VERSION").into(),
            host: nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned()),
            command: std::env::args().map(|a| redact_arg(&a)).collect(),
            kind: command.into(),
            started_at: utc_rfc3339(started),
            name: scenario.name.clone(),
            target: target_label.clone(),
            model: if scenario.load.is_open() { "open" } else { "closed" }.into(),
            stages: scenario
                .load
                .stages()
                .iter()
                .map(|s| MetaStage {
                    name: s.name.clone(),
                    from: s.segment.from.as_f64(),
                    to: s.segment.to.as_f64(),
                    duration_s: s.segment.duration.as_secs_f64(),
                })
                .collect(),
            steps: step_names.clone(),
            shard: None,
        };
        dir.write_json("meta.json", &meta)?;
        dir.write_file("scenario.yaml", redact(&text).as_bytes())?;

        // The session clock starts a little ahead, so the watchers and the
        // first load begin on it together.
        let t0 = Instant::now() + Duration::from_millis(100);
        let (tx, events) = mpsc::channel();
        let demo_watch = demo.as_ref().map(|d| (d.pid(), d.metrics_url.clone()));
        let plan = watching::plan(&scenario, &url, demo_watch, args.insecure);
        let watcher = Watcher::start(plan, t0, tx).map_err(|e| usage(format!("watch: {e}")))?;

        let live_on = !args.quiet && std::io::stderr().is_terminal();
        let color = live_on && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Ok(Some(Session {
            scenario,
            target_label,
            url,
            dir,
            started,
            stop,
            store: Store::default(),
            step_names,
            target,
            work: Arc::new(work),
            timeout,
            t0,
            events,
            watcher: Some(watcher),
            demo,
            metrics,
            live_on,
            color,
            workers: args.workers,
            insecure: args.insecure,
            write_error: false,
        }))
    }

    /// Seconds on the session clock.
    pub(crate) fn now(&self) -> f64 {
        Instant::now().saturating_duration_since(self.t0).as_secs_f64()
    }

    /// Take what the watchers reported so far.
    pub(crate) fn drain(&mut self) {
        self.store.drain(&self.events, &mut self.dir);
    }

    /// Accept any TLS certificate?
    pub(crate) fn insecure(&self) -> bool {
        self.insecure
    }

    /// The demo target's or the scenario's URL joined with `path`.
    pub(crate) fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Run one load of `stages` (their durations must add up to the load's),
    /// starting on the next whole second of the session clock. `hook` sees
    /// each second and may stop the load. `duration`, when given, is a closed
    /// model's stop rule (its `duration`).
    pub(crate) fn load(
        &mut self,
        mut model: LoadModel,
        stages: &[StagePlan],
        duration: Option<Duration>,
        hook: Hook<'_>,
    ) -> Result<Loaded> {
        if let (LoadModel::Closed { duration: stop_after, .. }, Some(d)) = (&mut model, duration) {
            *stop_after = Some(d);
        }
        // A whole second of the session clock; the first load starts at 0
        // (the clock was set a little ahead for it).
        let offset = if Instant::now() < self.t0 { 0.0 } else { (self.now() + 0.05).ceil() };
        let mut ends = Vec::new();
        let mut t = Duration::ZERO;
        for s in stages {
            t += s.duration;
            ends.push(t);
        }
        let plan = Plan {
            target: self.target.clone(),
            work: self.work.clone(),
            load: model,
            stage_ends: ends.clone(),
            timeout: self.timeout,
            connect_timeout: self.timeout.min(Duration::from_secs(5)),
            insecure: self.insecure,
            workers: self.workers,
            shard: Shard::WHOLE,
            start_at: Some(self.t0 + Duration::from_secs_f64(offset)),
        };
        let mut per_stage = vec![Stats::default(); stages.len()];
        let mut per_stage_step: Vec<BTreeMap<String, Stats>> = vec![BTreeMap::new(); stages.len()];
        let mut steps: BTreeMap<String, Stats> = BTreeMap::new();
        // Throughput is counted when responses arrive (latency by when arrivals
        // were due): a stage past capacity must not look faster because its
        // backlog drained later.
        let mut throughput = StageThroughput::new(ends.clone());
        let mut dropped = Vec::new();
        let mut stopped = false;
        let stop = self.stop.clone();
        let step_names = self.step_names.clone();
        let outcome = perfops_engine::run(&plan, stop.clone(), |iv: &Interval| {
            for (key, stats) in &iv.parts {
                let name = step_names.get(key.step as usize).cloned().unwrap_or_else(|| key.step.to_string());
                if let Some(s) = per_stage.get_mut(key.stage as usize) {
                    s.merge(stats);
                    per_stage_step[key.stage as usize].entry(name.clone()).or_default().merge(stats);
                }
                steps.entry(name).or_default().merge(stats);
            }
            let at = Duration::from_secs(u64::from(iv.index));
            self.store.drain(&self.events, &mut self.dir);
            if let Some(reason) = hook(iv, &self.store) {
                eprintln!("perfops: aborting: {reason}");
                stop.store(true, Ordering::Relaxed);
            }
            if stop.load(Ordering::Relaxed) {
                stopped = true;
                // Arrivals stopped within this second.
                throughput.stop(at + iv.length);
            }
            throughput.add_second(at, iv.length, iv.stats.iterations);
            dropped.push((offset + at.as_secs_f64(), iv.stats.dropped));
            let draining = at >= throughput.active_end();
            let stage = ends.iter().position(|&e| at < e).unwrap_or(stages.len() - 1);
            let label = if draining { "(draining)" } else { stages[stage].name.as_str() };
            if let Some(m) = &mut self.metrics {
                m.second(iv, label, if draining { None } else { iv.target }, &step_names);
            }
            let line = series_line(iv, offset as u32, label, &step_names);
            if !self.write_error
                && let Err(e) = self.dir.append_second(
                    &line,
                    Duration::from_secs_f64(offset) + at,
                    iv.length,
                    &[("latency", &iv.stats.latency), ("service", &iv.stats.service)],
                )
            {
                // A full disk must not kill the run: say so, keep measuring, keep what was written.
                eprintln!("perfops: cannot write results ({e}); the run goes on, the summary will be printed");
                self.write_error = true;
            }
            if self.live_on {
                let target = if draining { None } else { iv.target };
                let s = LiveSecond {
                    index: iv.index + offset as u32,
                    length: iv.length,
                    target,
                    in_flight: iv.in_flight,
                    stats: &iv.stats,
                };
                eprintln!("{} [{label}]", live::line(&s, self.color));
            }
        })?;
        self.drain();
        let results = stages
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let start = if i == 0 { Duration::ZERO } else { ends[i - 1] };
                StageResult {
                    plan: st.clone(),
                    from_s: offset + start.as_secs_f64(),
                    to_s: offset + start.as_secs_f64() + throughput.ran(i).as_secs_f64(),
                    ran_s: throughput.ran(i).as_secs_f64(),
                    achieved_rate: throughput.rate(i),
                    stats: std::mem::take(&mut per_stage[i]),
                    steps: std::mem::take(&mut per_stage_step[i]),
                }
            })
            .collect();
        Ok(Loaded {
            stages: results,
            total: outcome.total,
            steps,
            elapsed: outcome.elapsed,
            workers: outcome.workers,
            dropped,
            stopped: stopped || outcome.interrupted,
            naps: (outcome.naps, outcome.longest_nap),
        })
    }

    /// Judge each stage of `loaded` against the scenario's SLO.
    pub(crate) fn judge(&self, stages: &[StageResult]) -> Vec<Judged> {
        stages
            .iter()
            .map(|s| {
                // Samples are read at `t`; a stage owns those within it, and
                // a watched metric seen a little after its end (the queue it
                // left behind) still belongs to it.
                let watched = self.store.ranges(s.from_s, s.to_s);
                let generator_cpu = watched.get("generator_cpu_share").map(|r| r.max);
                let restarts = self.store.trips_in(s.from_s, s.to_s, "liveness");
                let unready = self.store.trips_in(s.from_s, s.to_s, "readiness");
                verdict::judge(
                    &self.scenario.slo,
                    &StageFacts {
                        ran_s: s.ran_s,
                        stats: &s.stats,
                        steps: &s.steps,
                        target_rate: s.plan.target_rate,
                        achieved_rate: s.achieved_rate,
                        watched: &watched,
                        restarts: &restarts,
                        unready: &unready,
                        generator_cpu,
                    },
                )
            })
            .collect()
    }

    /// Why it broke: the diagnostics over `stages` and their verdicts.
    pub(crate) fn diagnose(
        &self,
        stages: &[StageResult],
        judged: &[Judged],
        latency: &Stats,
        dropped: &[(f64, u64)],
    ) -> Vec<Diagnostic> {
        let windows: Vec<Window> = stages
            .iter()
            .zip(judged)
            .map(|(s, j)| Window { name: s.plan.name.clone(), from: s.from_s, to: s.to_s, verdict: j.verdict })
            .collect();
        let pool = watching::pool(&self.scenario, &self.store);
        let stalls = perfops_core::analysis::modes::quantized_stalls(&latency.latency).map(|s| StallFinding {
            quantum_ms: s.quantum.as_secs_f64() * 1000.0,
            base_ms: s.base.at.as_secs_f64() * 1000.0,
            stalled_ms: s.stalled.at.as_secs_f64() * 1000.0,
            share: s.stalled.share,
        });
        diagnose::diagnose(&diagnose::Inputs {
            stages: &windows,
            watched: &self.store.series,
            pool: pool.as_ref(),
            trips: &self.store.trips,
            dropped,
            stalls: stalls.as_ref(),
        })
    }

    /// Stop the watchers, the metrics endpoint and the demo target; keep the
    /// directory for the summary.
    pub(crate) fn close(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.stop();
        }
        self.metrics.take();
        self.drain();
        self.demo.take();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

fn demo_name(model: &perfops_core::scenario::DemoModel) -> &'static str {
    match model {
        perfops_core::scenario::DemoModel::Threads => "threads",
        perfops_core::scenario::DemoModel::Async => "async",
    }
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

fn series_line(iv: &Interval, offset: u32, stage: &str, step_names: &[String]) -> SeriesLine {
    let secs = iv.length.as_secs_f64().max(1e-9);
    let mut steps = BTreeMap::new();
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
        t: iv.index + offset,
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
