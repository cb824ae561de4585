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
//! Glue: each load's seconds go through the pipeline `crate::outputs`
//! assembles (the judge, then the outputs chosen by name, the results
//! writer, the live line), in [`Session::load_from`]; the outputs hear the
//! run's meta when the session opens and its summary in `conclude::finish`;
//! the per-stage accounting and `abort_when` are in that
//! pipeline, variable sources and redaction in `perfops_core::scenario`, and
//! judging (verdicts, diagnostics) in `perfops_core::analysis`; this module
//! opens what they need and hands back what they measured. Reading the
//! scenario and its inputs, and its load as a model, is `crate::loading`'s;
//! what a load measured (`Loaded`) and concluding from it, `crate::conclude`'s:
//! the commands call down into the session, the session into those two.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use perfops_core::analysis::diagnose::Diagnostic;
use perfops_core::analysis::verdict::Judged;
use perfops_core::model::{LoadModel, Shard};
use perfops_core::pipeline::{AbortWhen, Replans, Sink, StageLedger, TargetDown};
use perfops_core::scenario::redact::{redact, redact_command, redact_text};
use perfops_core::scenario::{Override, Scenario, Step, TargetSpec};
use perfops_engine::watch::{WatchEvent, Watcher};
use perfops_engine::{Plan, Replan, Target, Work};
use perfops_report::live::LiveLine;
use perfops_report::results::{JsonLines, RESULTS_VERSION, RunDir, utc_rfc3339, utc_rfc3339_ms};
use perfops_report::run::{MetaStage, ResolvedTarget, RunMeta};
use perfops_report::sink::ResultsWriter;

use crate::conclude::{Judging, Loaded};
use crate::control::{Steered, Steering};
use crate::demo::DemoChild;
use crate::exit::UsageError;
use crate::launch::{self, PlanBase, Terminal};
use crate::loading::{Inputs, inputs, load_model, load_scenario};
use crate::outputs::{self, Chosen, OutputArgs, Stations};
use crate::shard::Placement;
use crate::source::{self, Engine, IntervalSource};
use crate::watching::{self, Judge, Store};
use perfops_core::pipeline::control::Action;

/// Stages as planned and measured: the pipeline's per-stage accounting.
pub(crate) use perfops_core::pipeline::{StagePlan, StageResult};

/// `--set` and `--target` as the overrides they are: `--target URL` is
/// `--set target=URL`, applied last.
pub(crate) fn overrides(set: &[Override], target: Option<&str>) -> Vec<Override> {
    let target = target.map(|t| Override { path: "target".into(), value: t.to_string() });
    set.iter().cloned().chain(target).collect()
}

/// Flags shared by `run`, `limit` and `sweep`.
#[derive(Debug, Clone)]
pub struct SessionArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    /// Override a field before validation, e.g. `--set load.max_in_flight=100` or
    /// `--set 'slo=[p95 < 300ms]'` (a YAML flow list or mapping replaces the whole field; repeatable).
    pub set: Vec<Override>,
    /// Override the scenario's target (a URL, or demo:threads / demo:async).
    pub target: Option<String>,
    /// Where results directories are created.
    pub out: PathBuf,
    /// Worker threads (default: one per available core).
    pub workers: usize,
    /// Accept any TLS certificate.
    pub insecure: bool,
    /// No live line on stderr.
    pub quiet: bool,
    /// Also write each SLO line per stage as a JUnit test case to FILE.
    pub junit: Option<PathBuf>,
    /// The outputs chosen by name (`--output`, `--metrics-listen`).
    pub outputs: OutputArgs,
    /// At the end of each load, and after Ctrl-C, wait for the requests in
    /// flight (each within the scenario's timeout) instead of cutting them and
    /// counting them as `cut`.
    pub wait_in_flight: bool,
}

/// An open session.
pub(crate) struct Session {
    pub(crate) scenario: Scenario,
    pub(crate) target_label: String,
    /// The socket address the target resolved to, once, before the load.
    pub(crate) target_addr: String,
    pub(crate) url: String,
    pub(crate) dir: RunDir,
    pub(crate) started: SystemTime,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) store: Store,
    pub(crate) step_names: Vec<String>,
    base: PlanBase,
    work: Arc<Work>,
    t0: Instant,
    events: Receiver<WatchEvent>,
    watcher: Option<Watcher>,
    demo: Option<DemoChild>,
    /// The outputs chosen by name (`--output`, `--metrics-listen`, the
    /// scenario's `outputs:`), started with the meta, finished by `conclude::finish`.
    pub(crate) outputs: Chosen,
    terminal: Terminal,
    /// A write of `series.jsonl` failed: said once, nothing more written.
    write_error: bool,
    /// This generator's part of each load.
    shard: Shard,
    /// Write each second's parts by key, for `merge` (a shard).
    parts: bool,
    /// The first load starts at `t0` even if that has passed (`--start-at`).
    keep_start: bool,
    /// Loads run so far.
    loads: u32,
    /// The early stop on a target that is down ([`Session::stop_if_down`], #32).
    down: Option<TargetDown>,
    /// The address connections go to, as the early stop names it.
    address: String,
    /// Actions by hand on the running load (`crate::control`), handed to the
    /// chosen outputs that offer control.
    pub(crate) steering: Arc<Steering>,
    /// How far ahead an action takes effect, at least, and (a coordinator)
    /// where its agents hear of it: taken by the next load.
    steer_lead: Duration,
    relay: Option<crate::control::Relay>,
}

impl Session {
    /// Validate the scenario, start the target if it is the demo, run the
    /// setup, create the results directory and start watching. `None`: the
    /// scenario had errors, already printed.
    ///
    /// `placement` says where this load sits among generators: its shard,
    /// its start instant, the setup values to use instead of running the
    /// setup (a generator alone: [`Placement::default`]).
    pub(crate) fn open(args: &SessionArgs, command: &str, placement: &Placement) -> Result<Option<Session>> {
        let overrides = overrides(&args.set, args.target.as_deref());
        let Some((scenario, text)) = load_scenario(&args.scenario, &overrides)? else { return Ok(None) };
        let usage = |m: String| anyhow::Error::new(UsageError(m));

        let Some(inputs) = inputs(&scenario, &args.scenario, &text)? else { return Ok(None) };
        if let Some(start) = placement.start_at {
            crate::shard::check_start(start, SystemTime::now(), scenario.load.duration())?;
        }

        // Made before anything starts, so a busy address is a usage error
        // that costs nothing; the steps are known after the setup (the meta).
        let mut chosen = Chosen::choose(&args.outputs, &scenario.outputs)?;

        // The demo target lives as long as the session.
        // A URL's host was resolved with the inputs: once, not again here.
        let (demo, url, target) = match (&inputs.target, inputs.url_target()) {
            (TargetSpec::Url(u), Some(target)) => (None, u.clone(), target.map_err(usage)?),
            (TargetSpec::Url(u), None) => (None, u.clone(), Target::parse(u).map_err(|e| usage(e.to_string()))?),
            (TargetSpec::Demo(model, options), _) => {
                let name = demo_name(model);
                let child = DemoChild::start(name, options)?;
                let url = child.url.clone();
                note!("started the demo target ({name}) at {url}");
                let target = Target::parse(&url).map_err(|e| usage(e.to_string()))?;
                (Some(child), url, target)
            }
        };
        // As written: an environment value (`${env.PORT}`) never reaches the results; a password in
        // the URL (`http://user:password@host`) neither (#31).
        let target_label = match &scenario.target {
            TargetSpec::Url(u) => redact_text(u).into_owned(),
            TargetSpec::Demo(model, _) => format!("demo:{} ({url})", demo_name(model)),
        };
        // And as resolved (#32): the file's `${env.PORT}` says nothing of which port a run hit.
        let target_addr = target.addr.to_string();
        let resolved = ResolvedTarget { url: redact_text(&url).into_owned(), address: target_addr.clone() };
        if demo.is_none() {
            note!("target {}", resolved.shown());
        }

        let stop = launch::stop_flag()?;
        let base =
            PlanBase::of_scenario(target.clone(), &scenario.defaults, args.insecure, args.workers, args.wait_in_flight);
        // Setup once: here, or (shards) once for all and handed to each.
        let globals = match &placement.setup_values {
            Some(values) => {
                crate::shard::check_setup_values(&scenario, values, "--setup-values")?;
                values.clone()
            }
            None => crate::shard::run_setup(&scenario, &inputs, &target, &base)?,
        };
        let flows: Vec<(String, u32, Vec<Step>)> =
            scenario.flows.iter().map(|f| (f.name.clone(), f.weight, f.steps.clone())).collect();
        let Inputs { env, feeders, folder, scripts, .. } = inputs;
        let work = Work::new(&target, flows, scenario.defaults.headers.clone(), env, feeders)
            .with_cookies(scenario.defaults.cookies);
        let mut work = crate::loading::replaying(work, &scenario.load);
        work.resolve_grpc(&folder, &[], Some(base.reflection())).map_err(|e| usage(e.to_string()))?;
        if let Some(plan) = scripts {
            work.attach_scripts(plan).map_err(usage)?;
        }
        work.globals = globals;
        let step_names = work.step_names.clone();

        // Second 0 of the session clock, on the wall clock and on this
        // machine's monotonic clock: a little ahead, so the watchers and the
        // first load begin on it together; or the instant every shard shares,
        // which may have passed (a late start).
        let (started, t0) = match placement.start_at {
            Some(at) => {
                let (wall, mono) = (SystemTime::now(), Instant::now());
                let t0 = match at.duration_since(wall) {
                    Ok(ahead) => mono + ahead,
                    Err(e) => mono.checked_sub(e.duration()).unwrap_or(mono),
                };
                (at, t0)
            }
            None => (SystemTime::now() + Duration::from_millis(100), Instant::now() + Duration::from_millis(100)),
        };
        // Before the results directory exists: a run refused for the file
        // limit leaves nothing behind.
        let mut model = load_model(&scenario.load)?;
        if let (LoadModel::Closed { connections, .. }, Some(shard)) = (&mut model, placement.shard) {
            *connections = shard.share(u64::from(*connections)) as u32;
        }
        launch::check_fd_room(&model)?;
        let dir = RunDir::create(&args.out, &scenario.name, started)
            .with_context(|| format!("creating a results directory under {}", args.out.display()))?;
        let redacted = redact(&text);
        let meta = RunMeta {
            format: "perfops.meta".into(),
            version: RESULTS_VERSION,
            perfops_version: env!("CARGO_PKG_VERSION").into(),
            host: nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned()),
            command: redact_command(&std::env::args().collect::<Vec<_>>()),
            kind: command.into(),
            started_at: utc_rfc3339(started),
            name: scenario.name.clone(),
            target: target_label.clone(),
            // `sweep` runs the closed model whatever the scenario says.
            model: if scenario.load.is_open() && command != "sweep" { "open" } else { "closed" }.into(),
            // `limit` and `sweep` plan no stages ahead: each attempt or level
            // is a load of its own, chosen as they go (the summary's stages).
            stages: if matches!(command, "limit" | "sweep") { &[][..] } else { scenario.load.stages() }
                .iter()
                .map(|s| MetaStage {
                    name: s.name.clone(),
                    from: s.segment.from.as_f64(),
                    to: s.segment.to.as_f64(),
                    duration_s: s.segment.duration.as_secs_f64(),
                })
                .collect(),
            steps: step_names.clone(),
            protocols: perfops_engine::step_kinds(&work).into_iter().map(String::from).collect(),
            shard: placement.shard.map(crate::shard::shard_text),
            start: Some(utc_rfc3339_ms(started)),
            scenario_fingerprint: Some(crate::shard::fingerprint(&redacted, &overrides)),
            merged: Vec::new(),
            resolved: Some(resolved),
        };
        dir.write_json("meta.json", &meta)?;
        let steering = Arc::new(Steering::default());
        chosen.steer(steering.clone());
        chosen.start(&meta)?;
        dir.write_file("scenario.yaml", redacted.as_bytes())?;
        let (tx, events) = mpsc::channel();
        let demo_watch = demo.as_ref().map(|d| (d.pid(), d.metrics_url.clone()));
        let plan = watching::plan(&scenario, &url, demo_watch, args.insecure);
        let watcher = Watcher::start(plan, t0, tx).map_err(|e| usage(format!("watch: {e}")))?;

        let store = Store::new(JsonLines::new(dir.path()));
        Ok(Some(Session {
            scenario,
            target_label,
            target_addr,
            url,
            dir,
            started,
            stop,
            store,
            step_names,
            base,
            work: Arc::new(work),
            t0,
            events,
            watcher: Some(watcher),
            demo,
            outputs: chosen,
            terminal: Terminal::new(args.quiet),
            write_error: false,
            shard: placement.shard(),
            parts: placement.shard.is_some(),
            keep_start: placement.start_at.is_some(),
            loads: 0,
            down: None,
            address: target.addr.to_string(),
            steering,
            steer_lead: crate::control::LEAD,
            relay: None,
        }))
    }

    /// What the scenario's `setup` saved, every load's starting values.
    pub(crate) fn globals(&self) -> &HashMap<String, String> {
        &self.work.globals
    }

    /// The `${env.X}` values the scenario read, once, when the session opened.
    pub(crate) fn env(&self) -> &HashMap<String, String> {
        &self.work.env
    }

    /// Seconds on the session clock.
    pub(crate) fn now(&self) -> f64 {
        Instant::now().saturating_duration_since(self.t0).as_secs_f64()
    }

    /// Take what the watchers reported so far.
    pub(crate) fn drain(&mut self) {
        self.store.drain(&self.events);
    }

    /// Accept any TLS certificate?
    pub(crate) fn insecure(&self) -> bool {
        self.base.insecure
    }

    /// Stop the next load when its first seconds find the target down: every connection refused,
    /// timed out or failed, none answered ([`TargetDown`], #32). `run` asks for it, unless
    /// `--keep-going`.
    pub(crate) fn stop_if_down(&mut self) {
        self.down = Some(TargetDown::new(self.address.clone()));
    }

    /// Why the load stopped early on a target that is down, if it did.
    pub(crate) fn down(&self) -> Option<&str> {
        self.down.as_ref().and_then(TargetDown::reason)
    }

    /// After how many seconds the rule found the target down (or judged so far).
    pub(crate) fn down_after(&self) -> u32 {
        self.down.as_ref().map_or(0, TargetDown::seconds)
    }

    /// The demo target's or the scenario's URL joined with `path`.
    pub(crate) fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Run one load of `stages` (their durations must add up to the load's)
    /// on this machine's engine, starting on the next whole second of the
    /// session clock. Each second goes to the judge (watched metrics, then
    /// `abort`'s rules, which may stop the load), the outputs chosen by name,
    /// the results directory and the live line, in that order.
    pub(crate) fn load(
        &mut self,
        model: LoadModel,
        stages: &[StagePlan],
        abort: Option<&mut AbortWhen>,
    ) -> Result<Loaded> {
        self.load_from(model, stages, abort, Duration::ZERO, |plan, _| Engine::new(plan))
    }

    /// [`Session::load`] from another [`IntervalSource`] (the coordinator's
    /// agents): `source` is made from the plan (its `start_at` the load's
    /// first second) and that second's number on the session clock. A source that needs `lead` to
    /// pass the start on starts on the first whole second of the session
    /// clock at least that far ahead.
    pub(crate) fn load_from<S: IntervalSource>(
        &mut self,
        model: LoadModel,
        stages: &[StagePlan],
        abort: Option<&mut AbortWhen>,
        lead: Duration,
        source: impl FnOnce(Plan, u32) -> S,
    ) -> Result<Loaded> {
        // A whole second of the session clock.
        let first = self.loads == 0;
        self.loads += 1;
        let keep_start = first && self.keep_start;
        // The first load is second 0 of the session clock: if opening took
        // longer than the clock's lead (a slow disk's fsyncs), the engine
        // starts it as soon as it can, unless the instant is shared.
        let offset = if lead.is_zero() && (first || Instant::now() < self.t0) {
            0.0
        } else {
            (self.now() + 0.05 + lead.as_secs_f64()).ceil()
        };
        let ledger = StageLedger::new(stages, offset);
        let replans = self.steer(&model, stages, offset);
        let mut plan = self.base.plan(self.work.clone(), model);
        plan.stage_ends = ledger.ends().to_vec();
        plan.start_at = Some(self.t0 + Duration::from_secs_f64(offset));
        plan.replan = replans.as_ref().map(|(engine, _)| engine.clone());
        plan.keep_start = keep_start;
        plan.shard = self.shard;
        if keep_start {
            let now = Instant::now();
            if now > self.t0 {
                note!(
                    "the start at {} has passed: started {} ms late; what was due in the stage under way is sent at once, the stages already over are not",
                    utc_rfc3339_ms(self.started),
                    now.duration_since(self.t0).as_millis()
                );
            } else if self.t0 - now > Duration::from_secs(1) {
                note!(
                    "waiting {:.1} s for the start at {}",
                    (self.t0 - now).as_secs_f64(),
                    utc_rfc3339_ms(self.started)
                );
            }
        }

        let mut judge = Judge::new(&mut self.store, &self.events, abort, self.down.as_mut()).stages(&self.scenario);
        let results = ResultsWriter::new(&mut self.dir, &mut self.write_error).with_parts(self.parts);
        let live = self.terminal.live.then(|| LiveLine::new(std::io::stderr(), self.terminal.color, true));
        let stations = Stations {
            decisions: vec![&mut judge as &mut dyn Sink],
            chosen: Some(&mut self.outputs),
            results: Some(Box::new(results)),
            live: live.map(|l| Box::new(l) as _),
            tally: None,
        };
        let mut pipeline = outputs::pipeline(ledger, offset as u32, &self.step_names, self.stop.clone(), stations);
        if let Some((_, replans)) = replans {
            pipeline = pipeline.steered(replans);
        }
        // Each stage judged once its arrivals' responses are in: at the
        // latest a request's timeout after its end.
        pipeline = pipeline.judging(self.scenario.defaults.timeout);
        let driven = source::drive(&mut source(plan, offset as u32), &self.stop, pipeline);
        self.steering.end();
        let (produced, measured) = driven?;
        // A stop by hand ends the command, not only this load (`limit`'s
        // search, `sweep`'s levels stop as on Ctrl-C); set once its load is
        // over, so the arrivals ended at its instant, not before.
        if measured.events.iter().any(|(_, e)| e.action == Action::Stop.name()) {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.drain();
        Ok(Loaded::of(produced, measured, self.base.insecure))
    }

    /// Point the steering at the load of `model` in `stages` that starts
    /// `offset` seconds into the session: the engine's and the pipeline's
    /// ends of its re-plans. `None`: a load whose stages are not its
    /// schedule's pieces (a closed model without a profile) is not steered.
    fn steer(&mut self, model: &LoadModel, stages: &[StagePlan], offset: f64) -> Option<(Arc<Replan>, Replans)> {
        let plan = crate::control::staged(model, stages.iter().map(|s| (s.name.clone(), s.duration)))?;
        let (engine, pipeline) = (Replan::new(), Replans::default());
        self.steering.begin(Steered {
            plan,
            model: model.clone(),
            start: self.t0 + Duration::from_secs_f64(offset),
            offset: offset as u32,
            share: f64::from(self.shard.count).recip(),
            engine: engine.clone(),
            pipeline: pipeline.clone(),
            lead: self.steer_lead,
            relay: self.relay.take(),
        });
        Some((engine, pipeline))
    }

    /// The next load is a fleet's: actions take effect at least `lead`
    /// ahead, and `relay` sends each to the agents.
    pub(crate) fn relayed(&mut self, lead: Duration, relay: crate::control::Relay) {
        (self.steer_lead, self.relay) = (lead, Some(relay));
    }

    /// What judging this session's loads needs besides their seconds.
    pub(crate) fn judging(&self) -> Judging<'_> {
        Judging {
            scenario: &self.scenario,
            store: &self.store,
            step_names: &self.step_names,
            target_label: &self.target_label,
            target_addr: &self.target_addr,
            started: self.started,
        }
    }

    /// Judge each stage of `stages` against the scenario's SLO.
    pub(crate) fn judge(&self, stages: &[StageResult]) -> Vec<Judged> {
        self.judging().judge(stages)
    }

    /// Why it broke: the diagnostics over `stages` and their verdicts.
    pub(crate) fn diagnose(
        &self,
        stages: &[StageResult],
        judged: &[Judged],
        dropped: &[(f64, u64)],
    ) -> Vec<Diagnostic> {
        self.judging().diagnose(stages, judged, dropped)
    }

    /// Stop the watchers and the demo target; keep the directory for the
    /// summary and the outputs for their finish.
    pub(crate) fn close(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.stop();
        }
        self.drain();
        self.demo.take();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

pub(crate) fn demo_name(model: &perfops_core::scenario::DemoModel) -> &'static str {
    match model {
        perfops_core::scenario::DemoModel::Threads => "threads",
        perfops_core::scenario::DemoModel::Async => "async",
    }
}
