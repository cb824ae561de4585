//! `contrib/grafana/perfops.json` reads only what `--metrics-listen` serves
//! and what a run pushes: every metric name its queries reference is a
//! sample name of a real exposition (parsed with the project's Prometheus
//! parser) or a family of `perfops_report::push`, and every label they
//! select or group by is one they write (or one Prometheus adds). A metric
//! renamed on one side without the other fails here.

use std::collections::BTreeSet;
use std::time::Duration;

use perfops_core::measure::{FailureKind, Stats};
use perfops_core::telemetry::prometheus;
use perfops_report::exposition::{Exposition, Second};
use serde_json::Value;

const DASHBOARD: &str = include_str!("../../../contrib/grafana/perfops.json");

/// Labels Prometheus itself attaches to every scraped series, and the bucket bound.
const SCRAPE_LABELS: [&str; 3] = ["job", "instance", "le"];

/// Sample names and label names of an exposition that has seen a second.
fn exposed() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut e = Exposition::new(&["orders"]);
    let mut s = Stats { sent: 2, completed: 1, iterations: 1, dropped: 1, ..Stats::default() };
    s.latency.record(Duration::from_millis(12));
    s.service.record(Duration::from_millis(10));
    s.failures.add(FailureKind::Timeout);
    e.add_second(&Second {
        stage: "50/s",
        length: Duration::from_secs(1),
        target: Some(50.0),
        in_flight: 3,
        total: &s,
        steps: vec![("orders", &s)],
    });
    let families = prometheus::parse(&e.render()).expect("a valid exposition");
    let samples = families.iter().flat_map(|f| &f.samples);
    let names = samples.clone().map(|s| s.name.clone()).collect();
    let labels = samples.flat_map(|s| s.labels.iter().map(|(k, _)| k.clone())).collect();
    (names, labels)
}

/// Metric and label names a run pushes (`perfops_report::push`), from a
/// real batch: a second with a failure, so that `outcome` is there.
fn pushed() -> (BTreeSet<String>, BTreeSet<String>) {
    use perfops_core::measure::{Interval, Key};
    use perfops_report::push::{Pushed, Temporality};
    let mut s = Stats { sent: 2, completed: 1, ..Stats::default() };
    s.latency.record(Duration::from_millis(12));
    s.failures.add(FailureKind::Timeout);
    let iv = Interval { parts: vec![(Key { stage: 0, step: 0 }, s.clone())], stats: s, ..Interval::empty(0) };
    let meta = perfops_report::run::RunMeta { protocols: vec!["http".into()], ..Default::default() };
    let names = ["orders".to_string()];
    let second = perfops_core::pipeline::Second { step_names: &names, ..perfops_core::pipeline::Second::new(&iv, "a") };
    let batch = Pushed::new(&meta, Temporality::Cumulative).second(&second);
    let metrics = batch.points.iter().map(|p| p.family.name.to_string()).collect();
    let labels = batch.points.iter().flat_map(|p| p.labels.iter().map(|l| l.0.to_string())).collect();
    (metrics, labels)
}

/// Every PromQL string of the dashboard: panel targets and template variable queries.
fn queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition", Value::String(q)) => out.push(q.clone()),
                    ("query", Value::String(q)) if q.contains("perfops_") => out.push(q.clone()),
                    _ => queries(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| queries(i, out)),
        _ => {}
    }
}

/// Words of `q` that start with `perfops_`.
fn metric_names(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = q;
    while let Some(i) = rest.find("perfops_") {
        let word: String = rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        rest = &rest[i + word.len()..];
        out.push(word);
    }
    out
}

/// Label names in `{k="v", k2=~"..."}` selectors and `by (a, b)` clauses.
fn label_names(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('{', '}'), ('(', ')')] {
        for (i, _) in q.match_indices(open) {
            let Some(len) = q[i + 1..].find(close) else { continue };
            let inner = &q[i + 1..i + 1 + len];
            let is_by = open == '(' && q[..i].trim_end().ends_with(" by");
            for part in inner.split(',') {
                let part = part.trim();
                if open == '{' {
                    if let Some(k) = part.split(['=', '!']).next().filter(|k| !k.is_empty()) {
                        out.push(k.trim().to_string());
                    }
                } else if is_by {
                    out.push(part.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_metric_and_label_the_dashboard_queries_is_exposed() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let mut all = Vec::new();
    queries(&dashboard, &mut all);
    assert!(all.len() >= 10, "found only {} queries", all.len());
    let (mut names, mut labels) = exposed();
    let (pushed_names, pushed_labels) = pushed();
    names.extend(pushed_names);
    labels.extend(pushed_labels);
    let mut used = BTreeSet::new();
    for q in &all {
        for name in metric_names(q) {
            assert!(
                names.contains(&name),
                "the dashboard queries `{name}`, which is not exposed:\n{q}\nexposed: {names:?}"
            );
            used.insert(name);
        }
        for label in label_names(q) {
            assert!(
                labels.contains(&label) || SCRAPE_LABELS.contains(&label.as_str()),
                "the dashboard uses label `{label}`, which is not exposed:\n{q}"
            );
        }
    }
    // What the dashboard is for: rate vs target, latency quantiles, failures, in flight, dropped, stage.
    for must in [
        "perfops_target_arrivals_per_second",
        "perfops_achieved_arrivals_per_second",
        "perfops_latency_seconds_bucket",
        "perfops_service_time_seconds_bucket",
        // The pushed native histograms.
        "perfops_latency_seconds",
        "perfops_service_time_seconds",
        "perfops_requests_total",
        "perfops_in_flight_requests",
        "perfops_dropped_arrivals_total",
        "perfops_stage_info",
    ] {
        assert!(used.contains(must), "the dashboard does not show {must}");
    }
}

#[test]
fn the_scanners_find_names_and_labels() {
    let q = r#"histogram_quantile(0.95, sum by (le, step) (rate(perfops_latency_seconds_bucket{job=~"$job", outcome!="ok"}[1m])))"#;
    assert_eq!(metric_names(q), vec!["perfops_latency_seconds_bucket"]);
    let mut labels = label_names(q);
    labels.sort();
    assert_eq!(labels, vec!["job", "le", "outcome", "step"]);
}
