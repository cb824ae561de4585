//! What a run pushes to a team's metrics store, whatever the wire: one
//! [`Batch`] of [`Point`]s per second, which the remote-write and OTLP
//! outputs encode each in their own format. The names, the labels, what is
//! cumulative and the histograms' resolution are decided here, once.
//!
//! ```text
//!   Second (merged over workers, or over a fleet's agents)
//!     parts by (stage of the arrival, step) ──> per (stage, step): counters and 4 histograms
//!     the second's own gauges               ──> in flight, target and achieved rate
//!                                               │
//!   Temporality::Delta       each point is the second alone        (start = the second's start)
//!   Temporality::Cumulative  each point adds up its (stage, step)  (start = its first second's)
//!                                               │
//!                                   Batch { time_ms: the second's end, points }
//! ```
//!
//! **Exact, then bucketed once.** A part's histograms are perfops' own HDR
//! histograms (exact merges across workers and agents); each is converted
//! once per second to a base-2 exponential histogram at
//! [`perfops_core::measure::exponential::SCHEMA`] (buckets 2.19 % wide: the
//! most a receiver's `histogram_quantile` can be off, see that module), and
//! added up exactly from there. A stage's last cumulative point is the
//! stage's own distribution, as `summary.json`'s stage figures are: a part is
//! labelled with the stage its arrival was due in (`Second::stage_of`), not
//! the second's, so a late answer counts where the summary counts it.
//!
//! **Names.** Each family has its Prometheus name and an OpenTelemetry name
//! and unit chosen so that Prometheus' OTLP translation (dots to
//! underscores, the unit as a suffix, `_total` on a monotonic sum) gives the
//! same Prometheus name: one dashboard reads either push. They are those of
//! `--metrics-listen` (`crate::exposition`) where both have one.
//!
//! **Labels.** `run` (the results directory's name), `scenario`, and per
//! point `stage`, `step` and `protocol` (what the step is as planned:
//! `http`, `grpc` or `websocket`; which HTTP it spoke is known only once
//! connected, and a label must not change under a series), and `outcome`
//! on requests. The OTLP output
//! also sends [`Pushed::resource`] (`service.name` = `perfops`,
//! `service.instance.id` = the run).
//!
//! This module owns the model and the arithmetic; it does no I/O, and
//! knows nothing of protobuf.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use perfops_core::measure::exponential::{Exponential, SCHEMA};
use perfops_core::measure::{FailureKind, Stats, step_name};
use perfops_core::pipeline::Second;

use crate::results::{parse_time, utc_stamp};
use crate::run::RunMeta;

/// What kind of metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic: a count of things (requests, bytes, arrivals).
    Counter,
    /// A value at the second's end (in flight, a rate).
    Gauge,
    /// A distribution of durations, seconds.
    Histogram,
}

/// A metric family pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Its Prometheus name (`perfops_latency_seconds`).
    pub name: &'static str,
    /// Its OpenTelemetry name (`perfops.latency`).
    pub otel: &'static str,
    /// Its OpenTelemetry unit (UCUM: `s`, `By`, `{request}`, `1/s`).
    pub unit: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// What it counts, in a sentence.
    pub help: &'static str,
}

const fn family(name: &'static str, otel: &'static str, unit: &'static str, kind: Kind, help: &'static str) -> Family {
    Family { name, otel, unit, kind, help }
}

/// Latency from the intended start, every request that ended (failures at the time they took).
pub const LATENCY: Family = family(
    "perfops_latency_seconds",
    "perfops.latency",
    "s",
    Kind::Histogram,
    "Latency from the intended start (the arrival's due time) to the end, failures included: no coordinated omission.",
);
/// Service time from the actual send, every request sent.
pub const SERVICE: Family = family(
    "perfops_service_time_seconds",
    "perfops.service_time",
    "s",
    Kind::Histogram,
    "Service time from the actual send to the end, failures included.",
);
/// Latency of the successes alone.
pub const LATENCY_OK: Family = family(
    "perfops_success_latency_seconds",
    "perfops.success.latency",
    "s",
    Kind::Histogram,
    "Latency from the intended start of the requests that succeeded.",
);
/// Service time of the successes alone.
pub const SERVICE_OK: Family = family(
    "perfops_success_service_time_seconds",
    "perfops.success.service_time",
    "s",
    Kind::Histogram,
    "Service time of the requests that succeeded.",
);
/// Finished requests by outcome (`ok`, or the failure kind).
pub const REQUESTS: Family = family(
    "perfops_requests_total",
    "perfops.requests",
    "{request}",
    Kind::Counter,
    "Requests finished, by outcome: ok, or the failure kind (http_5xx, timeout, cut, ...).",
);
/// Requests started.
pub const SENT: Family =
    family("perfops_requests_sent_total", "perfops.requests.sent", "{request}", Kind::Counter, "Requests started.");
/// Responses received, whatever their status.
pub const RESPONSES: Family = family(
    "perfops_responses_total",
    "perfops.responses",
    "{response}",
    Kind::Counter,
    "Responses received, whatever their status.",
);
/// Arrivals whose first request was answered.
pub const ANSWERED: Family = family(
    "perfops_arrivals_answered_total",
    "perfops.arrivals_answered",
    "{arrival}",
    Kind::Counter,
    "Arrivals whose first request was answered: the achieved rate's count.",
);
/// Flows whose last step was answered.
pub const ITERATIONS: Family = family(
    "perfops_iterations_total",
    "perfops.iterations",
    "{iteration}",
    Kind::Counter,
    "Arrivals (flows) whose last step was answered: completed flows.",
);
/// Arrivals dropped at `max_in_flight`.
pub const DROPPED: Family = family(
    "perfops_dropped_arrivals_total",
    "perfops.dropped_arrivals",
    "{arrival}",
    Kind::Counter,
    "Open-model arrivals not sent because max_in_flight was reached: the generator, not the server, was the limit.",
);
/// Request bytes written.
pub const BYTES_OUT: Family =
    family("perfops_sent_bytes_total", "perfops.sent", "By", Kind::Counter, "Request bytes written.");
/// Response bytes read.
pub const BYTES_IN: Family =
    family("perfops_received_bytes_total", "perfops.received", "By", Kind::Counter, "Response bytes read.");
/// Requests in flight at the second's end.
pub const IN_FLIGHT: Family = family(
    "perfops_in_flight_requests",
    "perfops.in_flight_requests",
    "{request}",
    Kind::Gauge,
    "Requests in flight at the end of the second.",
);
/// The schedule's arrivals in the second, per second (open model, not draining).
pub const TARGET: Family = family(
    "perfops_target_arrivals_per_second",
    "perfops.target_arrivals",
    "1/s",
    Kind::Gauge,
    "Open model: arrivals the schedule put in the second, per second.",
);
/// Arrivals answered in the second, per second.
pub const ACHIEVED: Family = family(
    "perfops_achieved_arrivals_per_second",
    "perfops.achieved_arrivals",
    "1/s",
    Kind::Gauge,
    "Arrivals answered in the second, per second.",
);

/// The stage of the second, by name (1).
pub const STAGE_INFO: Family = family(
    "perfops_stage_info",
    "perfops.stage_info",
    "{stage}",
    Kind::Gauge,
    "The stage of the second (1, labelled with its name; `(draining)` after the last arrival).",
);

/// A watched metric of the target (`watch:`), when an output is asked to push them.
pub const WATCHED: Family = family(
    "perfops_watched",
    "perfops.watched",
    "{value}",
    Kind::Gauge,
    "A metric watched beside the load (the scenario's watch:), by source and metric, at the time it was read.",
);

/// Every family pushed, in the order a batch holds them.
pub const FAMILIES: [Family; 16] = [
    LATENCY, SERVICE, LATENCY_OK, SERVICE_OK, REQUESTS, SENT, RESPONSES, ANSWERED, ITERATIONS, DROPPED, BYTES_OUT,
    BYTES_IN, IN_FLIGHT, TARGET, ACHIEVED, STAGE_INFO,
];

/// The outcome of a request that did not fail.
pub const OK: &str = "ok";

/// How a point's value relates to the seconds before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Temporality {
    /// The second alone (OpenTelemetry's default here).
    #[default]
    Delta,
    /// Everything of its (stage, step) so far (Prometheus' counters).
    Cumulative,
}

/// A point's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A count.
    Counter(u64),
    /// A value.
    Gauge(f64),
    /// A distribution, seconds.
    Histogram(Exponential),
}

/// One value of one series at one time.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Its family.
    pub family: &'static Family,
    /// Its labels, in a fixed order: `run`, `scenario`, then `stage`,
    /// `step`, `protocol` (`http`, `grpc`, `websocket`: the step as planned)
    /// and `outcome` where they apply.
    pub labels: Vec<(&'static str, String)>,
    /// The start of what it counts, ms since the Unix epoch: the second's
    /// start (delta) or its series' first second's (cumulative); for a
    /// gauge, the second's start.
    pub start_ms: i64,
    /// The value.
    pub value: Value,
}

/// One second's points, all at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The second's end, ms since the Unix epoch.
    pub time_ms: i64,
    /// Its points.
    pub points: Vec<Point>,
}

/// A (stage, step)'s figures so far (cumulative) or in the second (delta).
#[derive(Debug, Clone)]
struct Part {
    start_ms: i64,
    /// `run`, `scenario`, `stage`, `step` and `protocol` when known.
    labels: Vec<(&'static str, String)>,
    stats: Stats,
    histograms: [Exponential; 4],
}

/// The model of one run's pushes: fed each second, gives its batch.
#[derive(Debug)]
pub struct Pushed {
    temporality: Temporality,
    /// Wall clock of the session's second 0, ms since the epoch.
    zero_ms: i64,
    run: String,
    scenario: String,
    resource: Vec<(&'static str, String)>,
    /// What each step is, by its key (`RunMeta::protocols`).
    protocols: Vec<String>,
    /// Cumulative state by (stage, step).
    parts: BTreeMap<(String, String), Part>,
    /// The last batch's time: each next one is later.
    last_ms: i64,
}

impl Pushed {
    /// The pushes of the run `meta` describes.
    pub fn new(meta: &RunMeta, temporality: Temporality) -> Pushed {
        let zero = meta.start.as_deref().or(Some(meta.started_at.as_str())).and_then(parse_time);
        let zero_ms = zero.map_or_else(|| unix_ms(SystemTime::now()), unix_ms);
        let started = parse_time(&meta.started_at).unwrap_or(UNIX_EPOCH);
        let safe: String = meta
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
            .collect();
        let run = format!("{}-{safe}", utc_stamp(started));
        let mut resource = vec![
            ("service.name", "perfops".to_string()),
            ("service.instance.id", run.clone()),
            ("service.version", meta.perfops_version.clone()),
        ];
        if let Some(host) = &meta.host {
            resource.push(("host.name", host.clone()));
        }
        Pushed {
            temporality,
            zero_ms,
            run,
            scenario: meta.name.clone(),
            resource,
            protocols: meta.protocols.clone(),
            parts: BTreeMap::new(),
            last_ms: i64::MIN,
        }
    }

    /// The run's name as its labels carry it (the results directory's name).
    pub fn run(&self) -> &str {
        &self.run
    }

    /// OpenTelemetry resource attributes for the run.
    pub fn resource(&self) -> &[(&'static str, String)] {
        &self.resource
    }

    /// The labels Prometheus gives every series of an OTLP push from its
    /// resource (`service.name` becomes `job`, `service.instance.id`
    /// `instance`): a remote-write push adds them to each series, so that
    /// one query (and the dashboard's `job` variable) reads either push.
    pub fn target_labels(&self) -> [(&'static str, String); 2] {
        [("job", "perfops".to_string()), ("instance", self.run.clone())]
    }

    /// The watched samples read in `s` (the scenario's `watch:`), each a
    /// batch at the time it was read: one [`WATCHED`] gauge a value, labelled
    /// `run`, `scenario`, `source` (its URL redacted) and `metric`. Values
    /// that are not finite are left out.
    pub fn watched(&self, s: &Second<'_>) -> Vec<Batch> {
        s.watched
            .iter()
            .map(|sample| {
                let time_ms = self.zero_ms + (sample.t * 1000.0).round() as i64;
                let source = perfops_core::scenario::redact::redact_text(&sample.source).into_owned();
                let points = sample
                    .values
                    .iter()
                    .filter(|(_, v)| v.is_finite())
                    .map(|(name, v)| Point {
                        family: &WATCHED,
                        labels: vec![
                            ("run", self.run.clone()),
                            ("scenario", self.scenario.clone()),
                            ("source", source.clone()),
                            ("metric", name.clone()),
                        ],
                        start_ms: time_ms,
                        value: Value::Gauge(*v),
                    })
                    .collect();
                Batch { time_ms, points }
            })
            .collect()
    }

    /// The points of `s`.
    pub fn second(&mut self, s: &Second<'_>) -> Batch {
        let iv = s.interval;
        let start_ms = self.zero_ms + duration_ms(s.start);
        // A last second shorter than a millisecond would end, in whole
        // milliseconds, where the one before it ended: the same series at the
        // same time with another value, which a receiver refuses (Prometheus:
        // "duplicate sample for timestamp"). Each batch is at least 1 ms later.
        let time_ms = (start_ms + duration_ms(iv.length)).max(self.last_ms.saturating_add(1));
        self.last_ms = time_ms;
        let mut points = Vec::new();
        let mut touched = Vec::new();
        for (key, stats) in &iv.parts {
            let id = (s.stage_of(*key).to_string(), step_name(s.step_names, key.step));
            let mut labels = vec![
                ("run", self.run.clone()),
                ("scenario", self.scenario.clone()),
                ("stage", id.0.clone()),
                ("step", id.1.clone()),
            ];
            if let Some(protocol) = self.protocols.get(usize::from(key.step)) {
                labels.push(("protocol", protocol.clone()));
            }
            let second = Part { start_ms, labels, stats: stats.clone(), histograms: histograms(stats) };
            match self.temporality {
                Temporality::Delta => part_points(&second, &mut points),
                Temporality::Cumulative => {
                    let part = self.parts.entry(id.clone()).or_insert_with(|| Part {
                        start_ms,
                        labels: second.labels.clone(),
                        stats: Stats::default(),
                        histograms: std::array::from_fn(|_| Exponential::empty(SCHEMA)),
                    });
                    part.stats.merge(&second.stats);
                    for (kept, new) in part.histograms.iter_mut().zip(&second.histograms) {
                        kept.merge(new);
                    }
                    if !touched.contains(&id) {
                        touched.push(id);
                    }
                }
            }
        }
        for id in touched {
            if let Some(part) = self.parts.get(&id) {
                part_points(part, &mut points);
            }
        }
        // The second's own gauges carry no stage: a receiver keeps a series'
        // last value for minutes (Prometheus' lookback), and a sum over
        // stages would add the last stage's in-flight to this one's.
        // `perfops_stage_info` names the stage (a dashboard takes the
        // newest of its series).
        let gauge = |family: &'static Family, v: f64| Point {
            family,
            labels: vec![("run", self.run.clone()), ("scenario", self.scenario.clone())],
            start_ms,
            value: Value::Gauge(v),
        };
        let mut info = gauge(&STAGE_INFO, 1.0);
        info.labels.push(("stage", s.stage.to_string()));
        points.push(info);
        points.push(gauge(&IN_FLIGHT, iv.in_flight as f64));
        if let Some(target) = s.target() {
            points.push(gauge(&TARGET, target));
        }
        let length = iv.length.as_secs_f64();
        if length > 0.0 {
            points.push(gauge(&ACHIEVED, iv.stats.arrivals_answered as f64 / length));
        }
        Batch { time_ms, points }
    }
}

/// A (stage, step)'s points: its histograms and counters.
fn part_points(part: &Part, out: &mut Vec<Point>) {
    let point = |family: &'static Family, value: Value| Point {
        family,
        labels: part.labels.clone(),
        start_ms: part.start_ms,
        value,
    };
    for (family, h) in [&LATENCY, &SERVICE, &LATENCY_OK, &SERVICE_OK].into_iter().zip(&part.histograms) {
        out.push(point(family, Value::Histogram(h.clone())));
    }
    let st = &part.stats;
    let outcome = |name: &str, n: u64| {
        let mut labels = part.labels.clone();
        labels.push(("outcome", name.to_string()));
        Point { family: &REQUESTS, labels, start_ms: part.start_ms, value: Value::Counter(n) }
    };
    out.push(outcome(OK, st.succeeded()));
    // A kind that never happened in this (stage, step) is not a series:
    // sixteen zero series a step would outnumber the real ones.
    for kind in FailureKind::ALL {
        let n = st.failures[kind];
        if n > 0 {
            out.push(outcome(kind.name(), n));
        }
    }
    for (family, n) in [
        (&SENT, st.sent),
        (&RESPONSES, st.completed),
        (&ANSWERED, st.arrivals_answered),
        (&ITERATIONS, st.iterations),
        (&DROPPED, st.dropped),
        (&BYTES_OUT, st.bytes_out),
        (&BYTES_IN, st.bytes_in),
    ] {
        out.push(point(family, Value::Counter(n)));
    }
}

/// The four histograms pushed, in [`LATENCY`], [`SERVICE`], [`LATENCY_OK`],
/// [`SERVICE_OK`] order.
fn histograms(st: &Stats) -> [Exponential; 4] {
    [&st.latency, &st.service, &st.latency_ok, &st.service_ok].map(|h| Exponential::from_hdr(h, SCHEMA))
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, duration_ms)
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use perfops_core::measure::{Interval, Key};

    use super::*;

    fn meta() -> RunMeta {
        RunMeta {
            name: "orders".into(),
            started_at: "2026-11-22T04:30:00Z".into(),
            start: Some("2026-11-22T04:30:00.500Z".into()),
            protocols: vec!["grpc".into()],
            ..RunMeta::default()
        }
    }

    /// A part of `n` requests of `ms` each, `failed` of them timeouts.
    fn stats(n: u64, ms: u64, failed: u64) -> Stats {
        let mut st = Stats { sent: n, completed: n - failed, arrivals_answered: n, ..Stats::default() };
        for _ in 0..n {
            st.latency.record(Duration::from_millis(ms));
            st.service.record(Duration::from_millis(ms));
        }
        for _ in 0..failed {
            st.failures.add(FailureKind::Timeout);
        }
        st
    }

    fn interval(index: u32, parts: Vec<(Key, Stats)>) -> Interval {
        let mut total = Stats::default();
        for (_, p) in &parts {
            total.merge(p);
        }
        Interval { length: Duration::from_secs(1), stats: total, parts, target: Some(10.0), ..Interval::empty(index) }
    }

    fn find<'a>(b: &'a Batch, family: &Family, stage: &str, outcome: Option<&str>) -> Option<&'a Value> {
        b.points
            .iter()
            .find(|p| {
                p.family.name == family.name
                    && p.labels.iter().any(|(k, v)| *k == "stage" && v == stage)
                    && outcome.is_none_or(|o| p.labels.iter().any(|(k, v)| *k == "outcome" && v == o))
            })
            .map(|p| &p.value)
    }

    /// Cumulative: a (stage, step)'s point is everything so far, histograms
    /// added exactly; a part is labelled with its arrival's stage, even in a
    /// later stage's second; times are the second's end on the wall clock.
    #[test]
    fn cumulative_points_add_up_by_the_arrivals_stage() {
        let names = ["orders".to_string()];
        let stages = ["warm".to_string(), "peak".to_string()];
        let mut pushed = Pushed::new(&meta(), Temporality::Cumulative);
        assert_eq!(pushed.run(), "20261122T043000Z-orders");
        let first = interval(0, vec![(Key { stage: 0, step: 0 }, stats(10, 5, 0))]);
        let second = interval(
            1,
            vec![(Key { stage: 0, step: 0 }, stats(2, 900, 2)), (Key { stage: 1, step: 0 }, stats(4, 7, 0))],
        );
        let s = |iv| Second { step_names: &names, stage_names: &stages, ..Second::new(iv, "warm") };
        let b0 = pushed.second(&s(&first));
        assert_eq!(b0.time_ms, 1_795_321_800_500 + 1000);
        let b1 = pushed.second(&Second { stage: "peak", ..s(&second) });
        let Some(Value::Histogram(warm)) = find(&b1, &LATENCY, "warm", None) else { panic!("warm latency") };
        assert_eq!(warm.count, 12, "10 of the first second and the 2 late ones, in their arrival's stage");
        assert_eq!(find(&b1, &REQUESTS, "warm", Some("timeout")), Some(&Value::Counter(2)));
        assert_eq!(find(&b1, &REQUESTS, "warm", Some(OK)), Some(&Value::Counter(10)));
        assert_eq!(find(&b1, &SENT, "peak", None), Some(&Value::Counter(4)));
        let start = b1.points.iter().find(|p| p.family.name == SENT.name).map(|p| p.start_ms);
        assert_eq!(start, Some(1_795_321_800_500), "a cumulative series starts at its first second");
        let labels = &b1.points.iter().find(|p| p.family.name == SENT.name).expect("sent").labels;
        let want = ["run", "scenario", "stage", "step", "protocol"];
        assert_eq!(labels.iter().map(|l| l.0).collect::<Vec<_>>(), want, "labels in their fixed order");
        assert_eq!(labels[4].1, "grpc", "the step's kind, from meta.json's protocols");
        // The second's own gauges have no stage; its stage is named by stage_info.
        let target = b1.points.iter().find(|p| p.family.name == TARGET.name).expect("a target");
        assert_eq!((target.labels.len(), &target.value), (2, &Value::Gauge(10.0)));
        assert_eq!(find(&b1, &STAGE_INFO, "peak", None), Some(&Value::Gauge(1.0)));
    }

    /// A last second shorter than a millisecond still ends after the one
    /// before it: a receiver refuses two values of a series at one time.
    #[test]
    fn a_batch_is_always_later_than_the_one_before() {
        let mut pushed = Pushed::new(&meta(), Temporality::Cumulative);
        let full = interval(0, Vec::new());
        let b0 = pushed.second(&Second::new(&full, "a"));
        let tiny = Interval { length: Duration::from_micros(400), ..interval(1, Vec::new()) };
        let b1 = pushed.second(&Second { start: Duration::from_secs(1), ..Second::new(&tiny, "a") });
        assert_eq!(b1.time_ms, b0.time_ms + 1, "1 ms after, not at the same millisecond");
    }

    /// Delta: each point is the second alone, starting at its start.
    #[test]
    fn delta_points_are_the_second_alone() {
        let names = ["orders".to_string()];
        let mut pushed = Pushed::new(&meta(), Temporality::Delta);
        let key = Key { stage: 0, step: 0 };
        pushed.second(&Second { step_names: &names, ..Second::new(&interval(0, vec![(key, stats(10, 5, 0))]), "a") });
        let b = pushed
            .second(&Second { step_names: &names, ..Second::new(&interval(1, vec![(key, stats(3, 5, 0))]), "a") });
        assert_eq!(find(&b, &SENT, "a", None), Some(&Value::Counter(3)));
        let p = b.points.iter().find(|p| p.family.name == SENT.name).expect("sent");
        assert_eq!((p.start_ms, b.time_ms), (1_795_321_801_500, 1_795_321_802_500));
        // No failure happened: no failure series.
        assert_eq!(b.points.iter().filter(|p| p.family.name == REQUESTS.name).count(), 1);
    }

    /// Watched samples: one gauge a finite value, at the time it was read,
    /// the source's credentials redacted.
    #[test]
    fn watched_samples_are_gauges_at_their_own_time() {
        use perfops_core::telemetry::watched::Sample;
        let pushed = Pushed::new(&meta(), Temporality::Cumulative);
        let watched = [Sample {
            t: 2.25,
            source: "prometheus http://u:pw@127.0.0.1:8080/metrics".into(),
            values: vec![("busy".into(), 3.0), ("broken".into(), f64::NAN)],
        }];
        let iv = interval(2, Vec::new());
        let b = pushed.watched(&Second { watched: &watched, ..Second::new(&iv, "a") });
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].time_ms, 1_795_321_800_500 + 2250);
        assert_eq!(b[0].points.len(), 1, "NaN left out");
        let p = &b[0].points[0];
        assert_eq!((p.family.name, &p.value), ("perfops_watched", &Value::Gauge(3.0)));
        assert_eq!(p.labels[2], ("source", "prometheus http://u:<redacted>@127.0.0.1:8080/metrics".to_string()));
        assert_eq!(p.labels[3], ("metric", "busy".to_string()));
    }

    /// Every family's OpenTelemetry name and unit translate to its
    /// Prometheus name the way Prometheus' OTLP receiver does (dots to
    /// underscores, `s` to `_seconds`, `By` to `_bytes`, `1/s` to
    /// `_per_second`, `_total` on counters, `{...}` dropped).
    #[test]
    fn otel_names_translate_to_the_prometheus_names() {
        for f in FAMILIES.into_iter().chain([WATCHED]) {
            let mut name = f.otel.replace('.', "_");
            let unit = match f.unit {
                "s" => "_seconds",
                "By" => "_bytes",
                "1/s" => "_per_second",
                u if u.starts_with('{') => "",
                u => panic!("unit {u} of {}", f.name),
            };
            if !name.ends_with(unit) {
                name.push_str(unit);
            }
            if f.kind == Kind::Counter {
                name.push_str("_total");
            }
            assert_eq!(name, f.name, "{}", f.otel);
        }
    }
}
