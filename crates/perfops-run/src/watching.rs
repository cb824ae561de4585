//! The scenario's `watch:` and `probe:` turned into the engine's watch plan,
//! and what the watchers report kept for judging: every sample and probe
//! check goes to `watch.jsonl` / `probe.jsonl` as it arrives, and into a
//! per-metric time series that verdicts and diagnostics read. [`Judge`] is
//! the pipeline's sink that takes them each second and checks `abort_when`.

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use perfops_core::analysis::diagnose::{Pool, ProbeTrip};
use perfops_core::analysis::generator::{CpuClock, CpuWindow};
use perfops_core::analysis::verdict::Judged;
use perfops_core::analysis::verdict::Range;
use perfops_core::pipeline::control::ControlEvent;
use perfops_core::pipeline::{AbortWhen, Flow, Second, Sink, SinkError, StageResult, TargetDown};
use perfops_core::scenario::{PoolMax, ProcessWatch, Scenario, TargetSpec};
use perfops_core::telemetry::watched::{ProbeResult, Sample};
use perfops_engine::watch::{JsonSource, ProbeKind, ProbeSpec, ProcessSel, PromqlSource, WatchEvent, WatchPlan};
use perfops_report::results::JsonLines;
use perfops_report::run::ProbeSummary;

/// Pools perfops recognises without being told: (busy, size) metric names, as
/// the usual exporters publish them (#11), each checked against the
/// exporter's source; label sets (Puma's worker `index`, Tomcat's connector
/// `name`) are summed. The first pair seen in the samples is the pool.
const KNOWN_POOLS: &[(&str, &str)] = &[
    // perfops' own demo target.
    ("demo_workers_busy", "demo_workers_max"),
    // Puma through yabeda-puma-plugin (lib/puma/plugin/yabeda.rb: group :puma,
    // gauges busy_threads and max_threads, tag index).
    ("puma_busy_threads", "puma_max_threads"),
    // Tomcat through Micrometer's TomcatMetrics (Spring Boot's
    // /actuator/prometheus): tomcat.threads.busy and tomcat.threads.config.max
    // with base unit "threads"; older Micrometer set no unit, hence the short names.
    ("tomcat_threads_busy_threads", "tomcat_threads_config_max_threads"),
    ("tomcat_threads_busy", "tomcat_threads_config_max"),
    // Jetty through Micrometer's JettyServerThreadPoolMetrics: jetty.threads.busy
    // and jetty.threads.config.max, no unit.
    ("jetty_threads_busy", "jetty_threads_config_max"),
];

/// The engine's watch plan for `scenario` against `url`; `demo` is the demo
/// target's process and its metrics URL (outside its pool), watched unless
/// the scenario says otherwise. The generator always watches itself.
pub(crate) fn plan(scenario: &Scenario, url: &str, demo: Option<(u32, Option<String>)>, insecure: bool) -> WatchPlan {
    let absolute = |u: &str| if u.starts_with('/') { format!("{url}{u}") } else { u.to_string() };
    let w = scenario.watch.clone().unwrap_or_default();
    let every = if w.every.is_zero() { Duration::from_secs(1) } else { w.every };
    let mut prometheus: Vec<String> = w.prometheus.iter().map(|u| absolute(u)).collect();
    let mut process = w.process.map(|p| match p {
        ProcessWatch::Pid(pid) => ProcessSel::Pid(pid),
        ProcessWatch::Port(port) => ProcessSel::Port(port),
    });
    if let (TargetSpec::Demo(..), Some((pid, metrics))) = (&scenario.target, demo) {
        if prometheus.is_empty() {
            prometheus.push(metrics.unwrap_or_else(|| absolute("/metrics")));
        }
        process.get_or_insert(ProcessSel::Pid(pid));
    }
    let mut probes = Vec::new();
    for (kind, p) in
        [(ProbeKind::Liveness, &scenario.probe.liveness), (ProbeKind::Readiness, &scenario.probe.readiness)]
    {
        if let Some(p) = p {
            probes.push(ProbeSpec {
                kind,
                url: absolute(&p.path),
                period: p.period,
                timeout: p.timeout,
                failure_threshold: p.failure_threshold,
                success_threshold: p.success_threshold,
                initial_delay: p.initial_delay,
            });
        }
    }
    let promql = w.promql.as_ref().map(|p| {
        let every = p.every.unwrap_or(every);
        PromqlSource {
            url: p.url.clone(),
            every,
            timeout: p.timeout.unwrap_or_else(|| every.min(Duration::from_secs(5))),
            queries: p.queries.clone(),
            auth: p.auth.clone(),
            ca_file: p.ca_file.as_ref().map(Into::into),
        }
    });
    WatchPlan {
        every,
        timeout: every.min(Duration::from_secs(5)),
        prometheus,
        json: w.json.iter().map(|j| JsonSource { url: absolute(&j.url), fields: j.fields.clone() }).collect(),
        process,
        generator: true,
        probes,
        promql,
        insecure,
    }
}

/// The pool gauges to judge "pool-bound" by: the scenario's `pool:`, or a busy/max pair of names
/// the scenario gives its PromQL queries or JSON fields (`busy` and `max`, `puma_busy` and
/// `puma_max`: "busy" and "max" in the same place), or a known pair seen in the samples.
pub(crate) fn pool(scenario: &Scenario, store: &Store) -> Option<Pool> {
    if let Some(p) = scenario.watch.as_ref().and_then(|w| w.pool.as_ref()) {
        return Some(match &p.max {
            PoolMax::Metric(m) => Pool { busy: p.busy.clone(), max_metric: Some(m.clone()), size: None },
            PoolMax::Value(v) => Pool { busy: p.busy.clone(), max_metric: None, size: Some(*v) },
        });
    }
    if let Some(w) = &scenario.watch {
        let named: Vec<&str> = w
            .promql
            .iter()
            .flat_map(|p| p.queries.iter().map(|(n, _)| n.as_str()))
            .chain(w.json.iter().flat_map(|j| j.fields.iter().map(|(n, _)| n.as_str())))
            .collect();
        if let Some((busy, max)) = busy_max_pair(&named) {
            return Some(Pool { busy: busy.to_string(), max_metric: Some(max), size: None });
        }
    }
    KNOWN_POOLS
        .iter()
        .find(|(b, m)| store.series.contains_key(*b) && store.series.contains_key(*m))
        .map(|(b, m)| Pool { busy: b.to_string(), max_metric: Some(m.to_string()), size: None })
}

/// The first name with `busy` in it whose `max` twin is named too.
fn busy_max_pair<'a>(names: &[&'a str]) -> Option<(&'a str, String)> {
    names.iter().find_map(|n| {
        let max = n.replacen("busy", "max", 1);
        (n.contains("busy") && names.contains(&max.as_str())).then_some((*n, max))
    })
}

/// Lines drained that no second has carried yet: samples and probe checks.
pub(crate) type Fresh = (Vec<Sample>, Vec<ProbeResult>);

/// Everything watched so far.
pub(crate) struct Store {
    /// Metric name -> (t, value), in arrival order (each source's in time order).
    pub(crate) series: BTreeMap<String, Vec<(f64, f64)>>,
    /// Checks by probe name.
    pub(crate) probes: BTreeMap<String, ProbeSummary>,
    /// Probes that reached their failure threshold.
    pub(crate) trips: Vec<ProbeTrip>,
    /// Problems already reported, so a dead endpoint is said once, not every 2 s.
    said: Vec<String>,
    /// `watch.jsonl` and `probe.jsonl`, written as events arrive.
    out: JsonLines,
    write_failed: bool,
    /// Whether the generator's CPU share is judged over its window (one generator's readings,
    /// in order); not in [`Store::merged`], whose generators' readings interleave.
    windows_known: bool,
    /// When the generator's latest reading was taken: its CPU share's window ends at the next.
    generator_t: Option<f64>,
}

impl Store {
    /// Nothing watched yet; events will be written to `out`. The events are one
    /// generator's, in order (a session's watchers).
    pub(crate) fn new(out: JsonLines) -> Store {
        Store { windows_known: true, ..Store::merged(out) }
    }

    /// The same for the samples of several generators under one source name, interleaved
    /// (`merge`): the window of a generator's CPU share cannot be told from the reading before
    /// it, which may be another shard's, so each share is kept as read (each shard's own run
    /// judged its own).
    pub(crate) fn merged(out: JsonLines) -> Store {
        Store {
            series: BTreeMap::new(),
            probes: BTreeMap::new(),
            trips: Vec::new(),
            said: Vec::new(),
            out,
            write_failed: false,
            windows_known: false,
            generator_t: None,
        }
    }

    /// Take every event waiting in `rx`: write it to the results and keep it.
    pub(crate) fn drain(&mut self, rx: &Receiver<WatchEvent>) {
        self.drain_into(rx, &mut Fresh::default());
    }

    /// [`Store::drain`], and add the lines drained to `fresh`, as they were
    /// written to `watch.jsonl` and `probe.jsonl` (for the outputs of this second).
    pub(crate) fn drain_into(&mut self, rx: &Receiver<WatchEvent>, fresh: &mut Fresh) {
        while let Ok(ev) = rx.try_recv() {
            match &ev {
                WatchEvent::Sample(s) => fresh.0.push(s.clone()),
                WatchEvent::Probe(p) => fresh.1.push(p.clone()),
                WatchEvent::Problem { .. } => {}
            }
            let written = match &ev {
                WatchEvent::Sample(s) => self.out.append("watch.jsonl", s),
                WatchEvent::Probe(p) => self.out.append("probe.jsonl", p),
                WatchEvent::Problem { .. } => Ok(()),
            };
            if let Err(e) = written
                && !self.write_failed
            {
                note!("cannot write watched metrics ({e}); they are still judged");
                self.write_failed = true;
            }
            self.keep(ev);
        }
    }

    fn keep(&mut self, ev: WatchEvent) {
        match ev {
            WatchEvent::Sample(mut s) => {
                // The generator's CPU share is judged only over a window long enough for /proc's
                // ticks (perfops_core::analysis::generator); watch.jsonl has it as read.
                if self.windows_known && s.source == "generator" {
                    let since = self.generator_t.replace(s.t).map(|previous| s.t - previous);
                    if !generator_share_judged(&s.values, since) {
                        s.values.retain(|(name, _)| name != "generator_cpu_share");
                    }
                }
                // `name{labels}` series are also summed under `name`, so a
                // condition or a pool can name a metric without its labels.
                let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
                for (name, v) in &s.values {
                    if let Some((base, _)) = name.split_once('{') {
                        *sums.entry(base).or_default() += v;
                    }
                }
                for (base, v) in sums {
                    if !s.values.iter().any(|(n, _)| n == base) {
                        self.series.entry(base.to_string()).or_default().push((s.t, v));
                    }
                }
                for (name, v) in s.values {
                    self.series.entry(name).or_default().push((s.t, v));
                }
            }
            WatchEvent::Probe(p) => {
                let entry = self.probes.entry(p.probe.name().to_string()).or_default();
                entry.checks += 1;
                entry.failures += u64::from(!p.ok);
                if p.restart || p.unready {
                    entry.trips.push(p.t);
                    self.trips.push(ProbeTrip {
                        t: p.t,
                        probe: p.probe.name(),
                        failures: p.failures,
                        error: p.error.clone(),
                    });
                }
            }
            WatchEvent::Problem { t, source, message } => {
                let key = format!("{source}: {message}");
                if !self.said.contains(&key) {
                    note!("watch: {key} (t={t:.0}s)");
                    self.said.push(key);
                }
            }
        }
    }

    /// A metric's samples so far, as a range (lowest, highest, first, latest).
    pub(crate) fn range(&self, name: &str) -> Option<Range> {
        let mut points = self.series.get(name)?.iter();
        let mut r = Range::of(points.next()?.1);
        points.for_each(|&(_, v)| r.include(v));
        Some(r)
    }

    /// Each metric's range over `[from, to]` (seconds).
    pub(crate) fn ranges(&self, from: f64, to: f64) -> BTreeMap<String, Range> {
        let mut out: BTreeMap<String, Range> = BTreeMap::new();
        for (name, points) in &self.series {
            for &(_, v) in points.iter().filter(|(t, _)| *t >= from && *t <= to) {
                out.entry(name.clone()).and_modify(|r| r.include(v)).or_insert_with(|| Range::of(v));
            }
        }
        out
    }

    /// Probe trips in `[from, to)`, by kind.
    pub(crate) fn trips_in(&self, from: f64, to: f64, probe: &str) -> Vec<f64> {
        self.trips.iter().filter(|t| t.probe == probe && t.t >= from && t.t < to).map(|t| t.t).collect()
    }
}

/// Whether the generator's `generator_cpu_share` among `values`, read `window_s` after its
/// previous reading, is over a window its /proc ticks can judge. Its CPUs are its cores used
/// over its share; a share of 0 blames nothing and stays.
fn generator_share_judged(values: &[(String, f64)], window_s: Option<f64>) -> bool {
    let value = |name: &str| values.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let Some(share) = value("generator_cpu_share").filter(|s| *s > 0.0) else { return true };
    let (Some(used), Some(wall_s)) = (value("generator_cpu_cores"), window_s) else { return false };
    CpuWindow { cpu_s: used * wall_s, wall_s, cores: used / share, clock: CpuClock::Proc }.judged()
}

/// The judge of each second: it takes what the watchers reported so far
/// (so a watched metric is judged on its latest sample), then checks the
/// `abort_when` rules, if the command has any; and, with a scenario
/// ([`Judge::stages`]), judges each stage as it closes, as the run's end
/// judges it (`crate::conclude::judge_stage`) on what was watched by then.
pub(crate) struct Judge<'a> {
    store: &'a mut Store,
    scenario: Option<&'a Scenario>,
    /// Drained, not yet handed on with a second ([`Sink::watched`]).
    fresh: Fresh,
    events: &'a Receiver<WatchEvent>,
    abort: Option<&'a mut AbortWhen>,
    /// `run`'s early stop on a target that is down (#32); none for the other commands and with
    /// `--keep-going`.
    down: Option<&'a mut TargetDown>,
}

impl<'a> Judge<'a> {
    pub(crate) fn new(
        store: &'a mut Store,
        events: &'a Receiver<WatchEvent>,
        abort: Option<&'a mut AbortWhen>,
        down: Option<&'a mut TargetDown>,
    ) -> Self {
        Judge { store, events, abort, down, scenario: None, fresh: Fresh::default() }
    }

    /// Judge stages as they close against `scenario`'s SLO.
    pub(crate) fn stages(mut self, scenario: &'a Scenario) -> Self {
        self.scenario = Some(scenario);
        self
    }
}

impl Sink for Judge<'_> {
    fn second(&mut self, s: &Second<'_>) -> Result<Flow, SinkError> {
        self.store.drain_into(self.events, &mut self.fresh);
        // The first reason to stop is the one: seconds still in the pipeline after a stop must
        // not find a second one (an `abort_when` rule that held on second 0, refusals on second 1).
        let aborted = self.abort.as_deref().is_some_and(|a| a.reason().is_some());
        if !aborted && let Some(reason) = self.down.as_deref_mut().and_then(|d| d.second(s.interval)) {
            return Ok(Flow::Stop(reason));
        }
        if self.down.as_deref().is_some_and(|d| d.reason().is_some()) {
            return Ok(Flow::Continue);
        }
        let Some(abort) = self.abort.as_deref_mut() else { return Ok(Flow::Continue) };
        let store = &*self.store;
        Ok(abort.second_over(s.interval, &|name| store.range(name)).map_or(Flow::Continue, Flow::Stop))
    }

    fn judge(&mut self, stages: &[StageResult], new: usize, events: &[(usize, ControlEvent)]) -> Option<Vec<Judged>> {
        let scenario = self.scenario?;
        self.store.drain_into(self.events, &mut self.fresh);
        let first = stages.len().saturating_sub(new);
        let mut judged: Vec<Judged> =
            (first..stages.len()).map(|i| crate::conclude::judge_stage(scenario, self.store, stages, i)).collect();
        let by_hand = crate::conclude::by_hand(stages.len(), events);
        crate::conclude::mark_by_hand(&mut judged, &by_hand[first..]);
        Some(judged)
    }

    /// Once a second, before it is handed on: a few lines, each moved here
    /// once (the store keeps its own).
    fn watched(&mut self) -> Option<Fresh> {
        self.store.drain_into(self.events, &mut self.fresh);
        Some(std::mem::take(&mut self.fresh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generators_share_is_kept_only_over_a_window_its_ticks_can_judge() {
        let values = |share: f64, cores: f64| {
            vec![("generator_cpu_share".to_string(), share), ("generator_cpu_cores".to_string(), cores)]
        };
        // (values, seconds since the previous reading, kept for judging)
        let cases = [
            (values(0.99, 1.98), Some(1.0), true), // 1 s on 2 CPUs: 0.2 s of error room, 20 ms of ticks
            (values(0.95, 1.9), Some(0.1), true),  // `every: 100ms` on 2 CPUs: exactly enough
            (values(0.95, 0.95), Some(0.1), false), // the same on 1 CPU: 2 ticks are 20 points
            (values(0.99, 1.98), None, false),     // no previous reading: no window to judge over
            (values(0.0, 0.0), Some(0.1), true),   // nothing used: nothing to blame, kept
            (vec![("generator_threads".to_string(), 9.0)], None, true), // no share at all
        ];
        for (values, since, want) in cases {
            assert_eq!(generator_share_judged(&values, since), want, "{values:?} {since:?}");
        }
    }

    #[test]
    fn busy_and_max_pairs_from_the_names_given() {
        // (the names given, the pair wanted: busy and max)
        type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a str)>);
        let cases: [Case; 5] = [
            (&["busy", "max", "restarts"], Some(("busy", "max"))), // the plain pair
            (&["puma_busy", "heap", "puma_max"], Some(("puma_busy", "puma_max"))), // a prefix
            (&["busy_threads", "max_threads"], Some(("busy_threads", "max_threads"))), // a suffix
            (&["busy", "pool_size"], None),                        // no twin named `max`
            (&["heap", "gc"], None),                               // nothing busy
        ];
        for (names, want) in cases {
            let got = busy_max_pair(names);
            assert_eq!(got.as_ref().map(|(b, m)| (*b, m.as_str())), want, "{names:?}");
        }
    }
}
