//! The generator's own metrics in the Prometheus text format (0.0.4), for
//! `--metrics-listen`: what a Grafana dashboard shows while a run goes.
//!
//! It owns the metric names, their help and type, and the arithmetic that
//! turns one merged second after another into cumulative counters and
//! histograms. It does not own serving them (the engine's `exporter` does)
//! and is fed once per second from the collector's merged interval, never
//! per request: a scrape costs the hot path nothing.
//!
//! Histograms are derived from the second's HDR histograms: each recorded
//! HDR bucket (3 significant digits) is counted in the first Prometheus
//! bucket whose `le` bound it does not exceed, and `_sum` adds up
//! value x count, so both are exact to HDR's 0.1%.
//!
//! ```text
//!   second k (merged over workers) ──> add_second ──> cumulative state ──> render (text)
//!   requests_total{step,outcome} += per-second counts
//!   latency_seconds_bucket{le}    += per-second HDR counts binned at the bounds below
//! ```

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use crate::run::SHORTEST_RATE_WINDOW_S;
use perfops_core::measure::{FailureKind, Histogram, Stats};

/// The `le` bounds of the latency histograms, seconds: about 1-2-5 steps
/// from 0.1 ms (a loopback answer) to 60 s (past any request timeout).
pub const BUCKETS_S: [f64; 19] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0,
    60.0,
];

/// The outcome of a request that did not fail.
pub const OK: &str = "ok";

/// A metric family this module writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDef {
    /// The family name (a histogram's samples add `_bucket`, `_sum`, `_count`).
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
}

const fn def(name: &'static str, kind: &'static str, help: &'static str) -> MetricDef {
    MetricDef { name, kind, help }
}

const REQUESTS: MetricDef = def(
    "perfops_requests_total",
    "counter",
    "Requests finished, by step and outcome (ok, or the failure kind: http_4xx, http_5xx, timeout, connect_refused, ...).",
);
const SENT: MetricDef = def("perfops_requests_sent_total", "counter", "Requests started, by step.");
const ITERATIONS: MetricDef =
    def("perfops_iterations_total", "counter", "Arrivals (flows) whose last step was answered: completed flows.");
const ANSWERED: MetricDef = def(
    "perfops_arrivals_answered_total",
    "counter",
    "Arrivals whose first request was answered: the achieved rate, comparable with the target rate.",
);
const DROPPED: MetricDef = def(
    "perfops_dropped_arrivals_total",
    "counter",
    "Open-model arrivals not sent because max_in_flight was reached: the generator, not the server, was the limit.",
);
const BYTES_IN: MetricDef = def("perfops_received_bytes_total", "counter", "Response bytes read (head and body).");
const BYTES_OUT: MetricDef = def("perfops_sent_bytes_total", "counter", "Request bytes written.");
const LATENCY: MetricDef = def(
    "perfops_latency_seconds",
    "histogram",
    "Latency from the intended start (the arrival's due time) to the last response byte, by step: no coordinated omission.",
);
const SERVICE: MetricDef = def(
    "perfops_service_time_seconds",
    "histogram",
    "Service time from the actual send to the last response byte, by step.",
);
const IN_FLIGHT: MetricDef =
    def("perfops_in_flight_requests", "gauge", "Requests in flight at the end of the last second.");
const TARGET: MetricDef = def(
    "perfops_target_arrivals_per_second",
    "gauge",
    "Open model: arrivals the schedule put in the last second, per second (absent in the closed model and while draining).",
);
const ACHIEVED: MetricDef =
    def("perfops_achieved_arrivals_per_second", "gauge", "Arrivals answered in the last second, per second.");
const STAGE: MetricDef =
    def("perfops_stage_info", "gauge", "The stage of the last second (1 for the current stage, by name).");
const SECONDS: MetricDef = def(
    "perfops_measured_seconds_total",
    "counter",
    "Seconds of load measured so far (the last second of a load may be partial).",
);

/// Every family written, in the order written.
pub const METRICS: [MetricDef; 14] = [
    REQUESTS, SENT, ITERATIONS, ANSWERED, DROPPED, BYTES_IN, BYTES_OUT, LATENCY, SERVICE, IN_FLIGHT, TARGET, ACHIEVED,
    STAGE, SECONDS,
];

/// One merged second, as the collector sees it.
#[derive(Debug, Clone)]
pub struct Second<'a> {
    /// The stage the second belongs to (`(draining)` after the last arrival).
    pub stage: &'a str,
    /// Its length (1 s, except at the end of a load).
    pub length: Duration,
    /// Open model: arrivals scheduled in it (`None`: closed model, or draining).
    pub target: Option<f64>,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// Everything in it.
    pub total: &'a Stats,
    /// The same by step name (a name may come more than once: it is added up).
    pub steps: Vec<(&'a str, &'a Stats)>,
}

/// Cumulative bucket counts of one histogram.
#[derive(Debug, Clone, Default)]
struct Buckets {
    /// Non-cumulative: values in `(BUCKETS_S[i-1], BUCKETS_S[i]]`; the last is `+Inf`.
    bins: [u64; BUCKETS_S.len() + 1],
    sum_s: f64,
    count: u64,
}

impl Buckets {
    fn add(&mut self, h: &Histogram) {
        for (us, n) in h.recorded() {
            let s = us as f64 / 1e6;
            let i = BUCKETS_S.iter().position(|&b| s <= b).unwrap_or(BUCKETS_S.len());
            self.bins[i] += n;
            self.sum_s += s * n as f64;
        }
        self.count += h.len();
    }
}

/// What one step did so far.
#[derive(Debug, Clone)]
struct StepCounters {
    /// By outcome: [`OK`] first, then [`FailureKind::ALL`] in order.
    outcomes: [u64; FailureKind::ALL.len() + 1],
    sent: u64,
    latency: Buckets,
    service: Buckets,
}

// By hand: the standard library derives `Default` for arrays of at most 32.
impl Default for StepCounters {
    fn default() -> StepCounters {
        StepCounters {
            outcomes: [0; FailureKind::ALL.len() + 1],
            sent: 0,
            latency: Buckets::default(),
            service: Buckets::default(),
        }
    }
}

/// The cumulative state behind the exposition: counters since the exporter
/// started (over every load of a session) and the last second's gauges.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    steps: BTreeMap<String, StepCounters>,
    iterations: u64,
    arrivals_answered: u64,
    dropped: u64,
    bytes_in: u64,
    bytes_out: u64,
    measured_s: f64,
    in_flight: u64,
    target_rate: Option<f64>,
    achieved_rate: f64,
    stage: Option<String>,
}

impl Exposition {
    /// An exposition with every outcome of `steps` at 0, so each series exists
    /// from the first scrape and `rate()` sees where it started.
    pub fn new<S: AsRef<str>>(steps: &[S]) -> Exposition {
        let mut e = Exposition::default();
        e.declare(steps);
        e
    }

    /// Give every outcome of `steps` a series at 0 (those already counted are kept).
    pub fn declare<S: AsRef<str>>(&mut self, steps: &[S]) {
        for s in steps {
            self.steps.entry(s.as_ref().to_string()).or_default();
        }
    }

    /// Add one merged second.
    pub fn add_second(&mut self, s: &Second<'_>) {
        for (name, stats) in &s.steps {
            let c = self.steps.entry((*name).to_string()).or_default();
            c.outcomes[0] += stats.succeeded();
            for k in FailureKind::ALL {
                c.outcomes[k as usize + 1] += stats.failures[k];
            }
            c.sent += stats.sent;
            c.latency.add(&stats.latency);
            c.service.add(&stats.service);
        }
        let t = s.total;
        self.iterations += t.iterations;
        self.arrivals_answered += t.arrivals_answered;
        self.dropped += t.dropped;
        self.bytes_in += t.bytes_in;
        self.bytes_out += t.bytes_out;
        self.measured_s += s.length.as_secs_f64();
        self.in_flight = s.in_flight;
        let secs = s.length.as_secs_f64().max(1e-3);
        self.target_rate = s.target.map(|n| n / secs);
        // A second of a few ms (the drain at a load's end) is no rate: 1
        // answer in 4 ms read 250/s, and stayed on the gauge through limit's
        // cool-downs (review 2). During the load the last rate stands; after
        // it, nothing arrives any more.
        if secs >= SHORTEST_RATE_WINDOW_S {
            // Arrivals answered, not flows ended: a flow's later steps and
            // pauses end it in later seconds (#32).
            self.achieved_rate = t.arrivals_answered as f64 / secs;
        } else if s.target.is_none() {
            self.achieved_rate = 0.0;
        }
        self.stage = Some(s.stage.to_string());
    }

    /// The text of a scrape.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(4096 + self.steps.len() * 4096);
        let outcome_names = std::iter::once(OK).chain(FailureKind::ALL.into_iter().map(FailureKind::name));

        header(&mut o, &REQUESTS);
        for (step, c) in &self.steps {
            for (outcome, n) in outcome_names.clone().zip(c.outcomes) {
                let _ = writeln!(o, "{}{{step=\"{}\",outcome=\"{outcome}\"}} {n}", REQUESTS.name, escape(step));
            }
        }
        header(&mut o, &SENT);
        for (step, c) in &self.steps {
            let _ = writeln!(o, "{}{{step=\"{}\"}} {}", SENT.name, escape(step), c.sent);
        }
        for (d, v) in [(&ITERATIONS, self.iterations), (&ANSWERED, self.arrivals_answered), (&DROPPED, self.dropped)] {
            header(&mut o, d);
            let _ = writeln!(o, "{} {v}", d.name);
        }
        for (d, v) in [(&BYTES_IN, self.bytes_in), (&BYTES_OUT, self.bytes_out)] {
            header(&mut o, d);
            let _ = writeln!(o, "{} {v}", d.name);
        }
        for (d, pick) in [(&LATENCY, 0), (&SERVICE, 1)] {
            header(&mut o, d);
            for (step, c) in &self.steps {
                let b = if pick == 0 { &c.latency } else { &c.service };
                histogram(&mut o, d.name, &escape(step), b);
            }
        }
        header(&mut o, &IN_FLIGHT);
        let _ = writeln!(o, "{} {}", IN_FLIGHT.name, self.in_flight);
        header(&mut o, &TARGET);
        if let Some(r) = self.target_rate {
            let _ = writeln!(o, "{} {}", TARGET.name, float(r));
        }
        header(&mut o, &ACHIEVED);
        let _ = writeln!(o, "{} {}", ACHIEVED.name, float(self.achieved_rate));
        header(&mut o, &STAGE);
        if let Some(stage) = &self.stage {
            let _ = writeln!(o, "{}{{stage=\"{}\"}} 1", STAGE.name, escape(stage));
        }
        header(&mut o, &SECONDS);
        let _ = writeln!(o, "{} {}", SECONDS.name, float(self.measured_s));
        o
    }
}

fn header(o: &mut String, d: &MetricDef) {
    let _ = writeln!(o, "# HELP {} {}", d.name, d.help);
    let _ = writeln!(o, "# TYPE {} {}", d.name, d.kind);
}

fn histogram(o: &mut String, name: &str, step: &str, b: &Buckets) {
    let mut cumulative = 0;
    for (bound, n) in BUCKETS_S.iter().zip(b.bins) {
        cumulative += n;
        let _ = writeln!(o, "{name}_bucket{{step=\"{step}\",le=\"{}\"}} {cumulative}", float(*bound));
    }
    // Every recorded value is in some bin, so +Inf is the count.
    let _ = writeln!(o, "{name}_bucket{{step=\"{step}\",le=\"+Inf\"}} {}", b.count);
    let _ = writeln!(o, "{name}_sum{{step=\"{step}\"}} {}", float(b.sum_s));
    let _ = writeln!(o, "{name}_count{{step=\"{step}\"}} {}", b.count);
}

/// A float as Prometheus' Go client writes it: shortest round-trip, no exponent noise for bounds.
fn float(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else {
        "+Inf".into()
    }
}

/// A label value escaped as the text format wants: `\`, `"` and newlines.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use perfops_core::telemetry::prometheus::{self, Kind};

    use super::*;

    fn stats(latencies_ms: &[u64], failures: &[(FailureKind, u64)]) -> Stats {
        let mut s = Stats::default();
        for &ms in latencies_ms {
            s.sent += 1;
            s.completed += 1;
            s.iterations += 1;
            s.arrivals_answered += 1;
            s.latency.record(Duration::from_millis(ms));
            s.service.record(Duration::from_millis(ms / 2));
        }
        for &(k, n) in failures {
            s.failures.add_n(k, n);
        }
        s
    }

    fn value(families: &[prometheus::Family], name: &str, labels: &[(&str, &str)]) -> f64 {
        families
            .iter()
            .flat_map(|f| &f.samples)
            .find(|s| {
                s.name == name
                    && labels.iter().all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
                    && s.labels.len() == labels.len()
            })
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
            .value
    }

    #[test]
    fn a_scrape_parses_and_declares_every_family_once() {
        let e = Exposition::new(&["login", "orders"]);
        let text = e.render();
        let families = prometheus::parse(&text).expect("valid exposition");
        let names: Vec<&str> = families.iter().map(|f| f.name.as_str()).collect();
        let want: Vec<&str> = METRICS.iter().map(|d| d.name).collect();
        assert_eq!(names, want);
        for (f, d) in families.iter().zip(METRICS) {
            assert_eq!(f.kind, Kind::from_name(d.kind).expect("a known kind"), "{}", d.name);
            assert_eq!(f.help.as_deref(), Some(d.help));
            // Conventions: counters end in _total; nothing but counters does.
            assert_eq!(d.kind == "counter", d.name.ends_with("_total"), "{}", d.name);
            assert!(d.name.starts_with("perfops_"), "{}", d.name);
        }
        // Every step and outcome exists from the start, at 0.
        assert_eq!(value(&families, "perfops_requests_total", &[("step", "orders"), ("outcome", "ok")]), 0.0);
        assert_eq!(value(&families, "perfops_requests_total", &[("step", "login"), ("outcome", "http_5xx")]), 0.0);
    }

    #[test]
    fn seconds_add_up_into_counters_and_cumulative_histograms() {
        let mut e = Exposition::new(&["orders"]);
        // Second 1: 3 ok (1, 30, 700 ms), 2 timeouts; 10 arrivals scheduled.
        let s1 = stats(&[1, 30, 700], &[(FailureKind::Timeout, 2)]);
        // Second 2: one 5xx response (120 ms) and one 90 s outlier past the last bound.
        let mut s2 = stats(&[120, 90_000], &[(FailureKind::Http5xx, 1)]);
        s2.dropped = 4;
        // #32: its two arrivals were answered, their flows go on in later
        // seconds (a pause, more steps): achieved counts them, iterations not.
        s2.iterations = 0;
        for (s, target) in [(&s1, Some(10.0)), (&s2, None)] {
            e.add_second(&Second {
                stage: "100/s",
                length: Duration::from_secs(1),
                target,
                in_flight: 7,
                total: s,
                steps: vec![("orders", s)],
            });
        }
        let families = prometheus::parse(&e.render()).expect("valid exposition");
        let req = |o: &str| value(&families, "perfops_requests_total", &[("step", "orders"), ("outcome", o)]);
        assert_eq!((req("ok"), req("timeout"), req("http_5xx")), (4.0, 2.0, 1.0));
        assert_eq!(value(&families, "perfops_dropped_arrivals_total", &[]), 4.0);
        assert_eq!(value(&families, "perfops_iterations_total", &[]), 3.0);
        assert_eq!(value(&families, "perfops_arrivals_answered_total", &[]), 5.0);
        assert_eq!(value(&families, "perfops_in_flight_requests", &[]), 7.0);
        // The last second was draining: no target sample, the achieved rate of that second.
        let target = families.iter().find(|f| f.name == "perfops_target_arrivals_per_second").expect("declared");
        assert!(target.samples.is_empty());
        assert_eq!(value(&families, "perfops_achieved_arrivals_per_second", &[]), 2.0);
        assert_eq!(value(&families, "perfops_stage_info", &[("stage", "100/s")]), 1.0);
        // A drain of 4 ms, 1 answer: no 250/s; nothing arrives any more (review 2).
        let one = stats(&[22], &[]);
        let drain = Second { length: Duration::from_millis(4), target: None, total: &one, steps: vec![], ..last(&s2) };
        e.add_second(&drain);
        let families = prometheus::parse(&e.render()).expect("valid exposition");
        assert_eq!(value(&families, "perfops_achieved_arrivals_per_second", &[]), 0.0);

        let bucket = |le: &str| value(&families, "perfops_latency_seconds_bucket", &[("step", "orders"), ("le", le)]);
        // (le, values at or below it): 1 ms; +30 ms at 0.05; +120 ms at 0.2; +700 ms at 1; 90 s only in +Inf.
        let cases =
            [("0.0005", 0.0), ("0.001", 1.0), ("0.05", 2.0), ("0.2", 3.0), ("1", 4.0), ("60", 4.0), ("+Inf", 5.0)];
        for (le, want) in cases {
            assert_eq!(bucket(le), want, "le={le}");
        }
        assert_eq!(value(&families, "perfops_latency_seconds_count", &[("step", "orders")]), 5.0);
        let sum = value(&families, "perfops_latency_seconds_sum", &[("step", "orders")]);
        assert!((sum - 90.851).abs() < 90.851 * 0.001, "{sum}");
        let service = value(&families, "perfops_service_time_seconds_sum", &[("step", "orders")]);
        assert!((service - 45.425).abs() < 45.425 * 0.001, "{service}");
    }

    /// A second of the load that ran, 1 s long.
    fn last(s: &Stats) -> Second<'_> {
        Second { stage: "100/s", length: Duration::from_secs(1), target: None, in_flight: 0, total: s, steps: vec![] }
    }

    #[test]
    fn label_values_are_escaped() {
        let e = Exposition::new(&["say \"hi\"\\\n"]);
        let families = prometheus::parse(&e.render()).expect("valid exposition");
        assert_eq!(value(&families, "perfops_requests_sent_total", &[("step", "say \"hi\"\\\n")]), 0.0);
    }
}
