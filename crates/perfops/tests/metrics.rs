//! End to end, issue #5 ("Integrations"): `--metrics-listen` serves the
//! generator's own metrics while the real `perfops` binary runs against the
//! demo target it starts itself, and `summary.json` (of `run`, `limit` and
//! `sweep`) matches `schema/summary.schema.json`.
//!
//! Scrapes are plain HTTP/1.1 over a `TcpStream`, parsed with the project's
//! own Prometheus parser (`perfops_core::telemetry::prometheus`), so a page a
//! Prometheus server would refuse fails here too.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{RUN_LIMIT, Workdir, shared, spawn_perfops};
use perfops_core::telemetry::prometheus::{self, Family};
use serde_json::Value;

/// 100 arrivals/s for 3 s against the async demo: one step, no failures expected.
const STEADY: &str = r#"name: metrics
target: demo:async
defaults: { timeout: 2s }
flows:
  health:
    steps:
      - { name: ping, request: GET /health, expect: { status: 200 } }
load:
  model: open
  stages: [ { rate: 100, hold: 3s } ]
"#;

/// A loopback port free a moment ago.
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

/// `GET /metrics`; `None` when nothing listens (yet, or any more).
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    Some(body.to_string())
}

/// Every value of samples named `name` whose labels include `labels`.
fn values(families: &[Family], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    families
        .iter()
        .flat_map(|f| &f.samples)
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v)))
        .map(|s| s.value)
        .collect()
}

fn sum(families: &[Family], name: &str, labels: &[(&str, &str)]) -> f64 {
    values(families, name, labels).iter().sum()
}

/// The histogram `name` of step `step` is one: buckets cumulative in `le`
/// order, `+Inf` equal to `_count`.
#[track_caller]
fn assert_histogram(families: &[Family], name: &str, step: &str) {
    let family = families.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no family {name}"));
    let mut buckets: Vec<(f64, f64)> = family
        .samples
        .iter()
        .filter(|s| s.name == format!("{name}_bucket") && s.labels.iter().any(|(k, v)| k == "step" && v == step))
        .map(|s| {
            let le = s.labels.iter().find(|(k, _)| k == "le").expect("an le label");
            (le.1.parse::<f64>().expect("le is a float"), s.value)
        })
        .collect();
    assert!(buckets.len() > 5, "{name}: buckets {buckets:?}");
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in buckets.windows(2) {
        assert!(pair[0].1 <= pair[1].1, "{name}: not cumulative at le={}: {buckets:?}", pair[1].0);
    }
    let (last_le, inf) = *buckets.last().expect("buckets");
    assert!(last_le.is_infinite(), "{name}: no +Inf bucket");
    assert_eq!(values(families, &format!("{name}_count"), &[("step", step)]), vec![inf], "{name}: +Inf vs _count");
}

/// Issue #5: a scrape mid-run shows requests counted by step and outcome,
/// rising from one scrape to the next; the latency and service-time
/// histograms are consistent (cumulative, `+Inf` = `_count` = responses);
/// target and achieved rate, in flight and the stage are there; the
/// endpoint stops with the run; the last scrape agrees with `summary.json`
/// within one second's worth of requests; and that summary matches the
/// schema.
#[test]
fn metrics_endpoint_follows_the_run_and_agrees_with_the_summary() {
    let _cpu = shared();
    let wd = Workdir::new("metrics");
    let scenario = wd.scenario("scenario.yaml", STEADY);
    let addr = free_port();
    let run = wd.spawn("run", &scenario, &["--metrics-listen", &addr.to_string()], |_| {});

    // Scrape every 200 ms until the endpoint goes away with the run.
    let deadline = Instant::now() + RUN_LIMIT;
    let mut pages: Vec<Vec<Family>> = Vec::new();
    while Instant::now() < deadline {
        match scrape(addr) {
            Some(text) => pages.push(prometheus::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))),
            None if !pages.is_empty() => break,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = run.wait(RUN_LIMIT);
    out.assert_exit(0);
    assert!(out.stderr.contains(&format!("http://{addr}/metrics")), "{}", out.stderr);
    assert!(pages.len() >= 8, "{} scrapes in a 3 s run", pages.len());

    let finished = |p: &Vec<Family>| sum(p, "perfops_requests_total", &[("step", "ping")]);
    let counts: Vec<f64> = pages.iter().map(finished).collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "a counter went down: {counts:?}");
    let mid: Vec<&Vec<Family>> = pages.iter().filter(|p| finished(p) > 0.0).collect();
    assert!(mid.len() >= 3, "requests rose in too few scrapes: {counts:?}");
    assert!(finished(mid[0]) < finished(mid[mid.len() - 1]), "requests did not rise: {counts:?}");

    for page in &mid {
        assert_histogram(page, "perfops_latency_seconds", "ping");
        assert_histogram(page, "perfops_service_time_seconds", "ping");
        // Every response has a latency; an answered request is ok or an HTTP/check failure.
        let answered: f64 = ["ok", "http_4xx", "http_5xx", "check_failed"]
            .iter()
            .map(|o| sum(page, "perfops_requests_total", &[("step", "ping"), ("outcome", o)]))
            .sum();
        assert_eq!(values(page, "perfops_latency_seconds_count", &[("step", "ping")]), vec![answered]);
        assert_eq!(values(page, "perfops_in_flight_requests", &[]).len(), 1);
        assert_eq!(values(page, "perfops_stage_info", &[]), vec![1.0]);
        assert_eq!(values(page, "perfops_dropped_arrivals_total", &[]), vec![0.0]);
    }
    // While the stage runs, its target is 100/s and it is met.
    let running = mid
        .iter()
        .find(|p| !values(p, "perfops_stage_info", &[("stage", "100/s")]).is_empty())
        .expect("a scrape during stage 100/s");
    let target = values(running, "perfops_target_arrivals_per_second", &[]);
    assert_eq!(target.len(), 1, "one target sample");
    assert!((target[0] - 100.0).abs() < 1.0, "target {target:?}");
    let achieved = values(running, "perfops_achieved_arrivals_per_second", &[])[0];
    assert!((80.0..=120.0).contains(&achieved), "achieved {achieved}");

    // The end: the last scrape is at most one second (100 requests, with slack) behind the summary.
    let summary = wd.summary(&out);
    let total = summary["total"]["succeeded"].as_u64().expect("succeeded") as f64
        + summary["total"]["failed"].as_u64().expect("failed") as f64;
    let last = pages.last().expect("pages");
    let scraped = finished(last);
    assert!(total >= 280.0 && scraped <= total && total - scraped <= 120.0, "scraped {scraped}, summary {total}");
    assert_eq!(sum(last, "perfops_requests_total", &[("outcome", "ok")]), scraped, "all ok");
    let measured = values(last, "perfops_measured_seconds_total", &[])[0];
    assert!((2.0..=4.5).contains(&measured), "measured {measured} s");
    assert_matches_schema(&summary, "run");
}

/// Issue #5: `quick` serves the same metrics; a target answering 503 shows
/// as the `http_5xx` outcome of its one step, named as `quick` names it.
#[test]
fn quick_serves_failures_by_kind() {
    let _cpu = shared();
    let server = perfops_testkit::status(503);
    let addr = free_port();
    let url = server.url();
    let run = spawn_perfops(&["quick", "-r", "50", "-d", "2s", "--metrics-listen", &addr.to_string(), &url], |_| {});
    let deadline = Instant::now() + RUN_LIMIT;
    let mut last = None;
    while Instant::now() < deadline {
        match scrape(addr) {
            Some(text) => last = Some(prometheus::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))),
            None if last.is_some() => break,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = run.wait(RUN_LIMIT);
    out.assert_exit(1);
    let page = last.expect("at least one scrape");
    let failed = sum(&page, "perfops_requests_total", &[("step", "GET /"), ("outcome", "http_5xx")]);
    assert!(failed >= 50.0, "http_5xx {failed}");
    assert_eq!(sum(&page, "perfops_requests_total", &[("outcome", "ok")]), 0.0);
    assert_eq!(values(&page, "perfops_stage_info", &[("stage", "quick")]), vec![1.0]);
}

/// Issue #5: a busy or unusable `--metrics-listen` address is a usage error
/// (exit 2) that says which flag and why, before any load: no results
/// directory, no demo target started.
#[test]
fn a_busy_metrics_port_is_a_usage_error() {
    let _cpu = shared();
    let wd = Workdir::new("metrics-busy");
    let scenario = wd.scenario("scenario.yaml", STEADY);
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let started = Instant::now();
    let out = wd.spawn("run", &scenario, &["--metrics-listen", &addr], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(2);
    assert!(out.stderr.contains("--metrics-listen") && out.stderr.contains("in use"), "{}", out.stderr);
    assert!(!out.stderr.contains("started the demo target"), "{}", out.stderr);
    assert!(wd.result_dirs().is_empty(), "a results directory was made: {:?}", wd.result_dirs());
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());

    let bad = wd.spawn("run", &scenario, &["--metrics-listen", "not-an-address"], |_| {}).wait(RUN_LIMIT);
    bad.assert_exit(2);
    assert!(bad.stderr.contains("--metrics-listen not-an-address"), "{}", bad.stderr);
    let quick =
        spawn_perfops(&["quick", "-n", "1", "--metrics-listen", &addr, "http://127.0.0.1:9/"], |_| {}).wait(RUN_LIMIT);
    quick.assert_exit(2);
    assert!(quick.stderr.contains("in use"), "{}", quick.stderr);
}

/// Issue #5: the summaries of `sweep` and `limit` (with their `sweep` and
/// `limit` objects) match the schema too; both commands take
/// `--metrics-listen`.
#[test]
fn sweep_and_limit_summaries_match_the_schema() {
    let _cpu = shared();
    let sweep = Workdir::new("sweep-schema");
    let scenario = sweep.scenario("scenario.yaml", STEADY);
    let args = ["--concurrency", "1,2,3", "--hold", "1s", "--metrics-listen", "127.0.0.1:0"];
    let out = sweep.spawn("sweep", &scenario, &args, |_| {}).wait(RUN_LIMIT);
    // Passed or not (a loaded machine may judge a level inconclusive): the schema is the point.
    assert!(matches!(out.code, Some(0 | 1)), "sweep exited {:?}: {}", out.code, out.stderr);
    let summary = sweep.summary(&out);
    assert_eq!(summary["sweep"]["levels"].as_array().map(Vec::len), Some(3), "{summary:#}");
    assert_matches_schema(&summary, "sweep");

    let limit = Workdir::new("limit-schema");
    let scenario = limit.scenario("scenario.yaml", STEADY);
    let args = ["--from", "20", "--max", "40", "--hold", "1s", "--attempts", "3", "--cooldown", "2s"];
    let args = [&args[..], &["--metrics-listen", "127.0.0.1:0"]].concat();
    let out = limit.spawn("limit", &scenario, &args, |_| {}).wait(RUN_LIMIT);
    assert!(matches!(out.code, Some(0 | 1)), "limit exited {:?}: {}", out.code, out.stderr);
    let summary = limit.summary(&out);
    assert!(summary["limit"]["attempts"].as_array().is_some_and(|a| !a.is_empty()), "{summary:#}");
    assert_matches_schema(&summary, "limit");
}

/// `summary` is valid against `schema/summary.schema.json`.
#[track_caller]
fn assert_matches_schema(summary: &Value, what: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/summary.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the schema")).expect("JSON");
    let errors = perfops_testkit::schema::errors(&schema, summary);
    assert!(errors.is_empty(), "{what} summary.json does not match the schema:\n{}\n{summary:#}", errors.join("\n"));
}
