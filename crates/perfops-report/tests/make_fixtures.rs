//! Writes the fixture results directories under `tests/fixtures/` (run it
//! with `cargo test -p perfops-report --test make_fixtures -- --ignored`).
//! The files are committed; this is how they were made, so they can be made
//! again when the results format grows.
//!
//! `orders-stepped` simulates the seed scenario against a thread pool of 10
//! threads at ~49 ms a request (about 205 requests/s): steps of 50 to
//! 300/s, 10 s each. Up to 200/s it keeps up; at 250/s the queue grows
//! 45/s, latency climbs towards the 2 s timeout and the liveness probe,
//! queued behind the orders, times out (a restart at the third failure);
//! at 300/s requests time out and the generator's `max_in_flight` of 500 is
//! reached, so arrivals are dropped. Its summary carries the parts another
//! engineer is adding (verdict, per-stage verdict and SLO, diagnostics),
//! written as that format is specified.
//!
//! `orders-killed` is the same run killed 23 s in: no summary, and a last
//! line cut short mid-write.
//!
//! Deterministic: a fixed-seed generator, fixed start times.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use perfops_core::measure::Histogram;
use perfops_report::results::RunDir;
use serde_json::{Value, json};

/// xorshift64*: enough randomness for plausible jitter, the same every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with mean `m`.
    fn exp(&mut self, m: f64) -> f64 {
        -m * (1.0 - self.next()).ln()
    }
}

const SCENARIO: &str = r#"# Seed scenario A against a thread pool: 10 threads, ~49 ms a request.
name: orders
target: http://127.0.0.1:8080
defaults:
  timeout: 2s
  headers: { Accept: application/json }
setup:
  - name: login
    request: POST /auth
    json: { user: "load-test" }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  list-orders:
    steps:
      - name: orders
        request: GET /orders
        headers: { Authorization: "Bearer ${token}" }
        expect: { status: 200 }
load:
  model: open
  steps: { from: 50, to: 300, by: 50, hold: 10s }
  max_in_flight: 500
slo:
  - p95 < 500ms
  - p99 < 1s
  - errors < 1%
watch:
  prometheus: [ http://127.0.0.1:8080/metrics ]
  process: { port: 8080 }
  every: 2s
probe:
  liveness: { path: /health, period: 2s, timeout: 1s, failure_threshold: 3 }
"#;

const CAPACITY: f64 = 205.0;
const SERVICE_MS: f64 = 48.8;
const TIMEOUT_MS: f64 = 2000.0;
const MAX_IN_FLIGHT: f64 = 500.0;
const HOLD: u32 = 10;

/// One simulated second.
struct Second {
    stage: usize,
    target: f64,
    achieved: f64,
    completed: u64,
    failed: BTreeMap<&'static str, u64>,
    dropped: u64,
    in_flight: u64,
    queue: f64,
    latency: Histogram,
    service: Histogram,
}

fn simulate(seconds: u32, rng: &mut Rng) -> Vec<Second> {
    let mut queue: f64 = 0.0;
    let mut out = Vec::new();
    for t in 0..seconds {
        let stage = (t / HOLD).min(5) as usize;
        let draining = t >= 6 * HOLD;
        let target = if draining { 0.0 } else { 50.0 * (stage as f64 + 1.0) };
        let arrivals = (target + (rng.next() - 0.5) * 2.0).max(0.0).round();
        // Little's law: in flight = arrivals x time in the system. What would
        // exceed the generator's cap is dropped before it is sent.
        let in_system_s = (SERVICE_MS + queue / CAPACITY * 1000.0).min(TIMEOUT_MS) / 1000.0;
        let dropped = (arrivals - (MAX_IN_FLIGHT / in_system_s).floor()).max(0.0);
        let admitted = arrivals - dropped;
        let served = (queue + admitted).min(CAPACITY + (rng.next() - 0.5) * 4.0).round();
        queue = (queue + admitted - served).max(0.0);
        let dropped = dropped as u64;
        let in_flight = (admitted * in_system_s).round() as u64;
        // Anything that would wait past the timeout fails as one.
        let wait_ms = queue / CAPACITY * 1000.0;
        let timeouts = if wait_ms > TIMEOUT_MS - SERVICE_MS {
            let over = (queue - (TIMEOUT_MS - SERVICE_MS) / 1000.0 * CAPACITY).max(0.0);
            queue -= over;
            over.round() as u64
        } else {
            0
        };
        let resets = if timeouts > 0 { (rng.next() * 4.0) as u64 } else { 0 };
        let (mut latency, mut service) = (Histogram::new(), Histogram::new());
        let n = served.round() as u64;
        for i in 0..n {
            // Waits spread over the second as the queue grew through it.
            let w = wait_ms * (i as f64 + 0.5) / n as f64;
            let ms = SERVICE_MS * (0.9 + 0.2 * rng.next()) + rng.exp(1.5) + w;
            latency.record_us((ms * 1000.0) as u64, 1);
            service.record_us(((ms - 0.08 - rng.exp(0.05)) * 1000.0).max(1.0) as u64, 1);
        }
        let mut failed = BTreeMap::new();
        if timeouts > 0 {
            failed.insert("timeout", timeouts);
        }
        if resets > 0 {
            failed.insert("reset", resets);
        }
        out.push(Second {
            stage,
            target,
            achieved: served,
            completed: n,
            failed,
            dropped,
            in_flight,
            queue,
            latency,
            service,
        });
    }
    out
}

fn stage_name(i: usize) -> String {
    format!("{}/s", 50 * (i + 1))
}

fn meta(started: &str) -> Value {
    json!({
        "format": "perfops.meta", "version": 1, "perfops_version": "0.1.0", "host": "loadgen-1",
        "command": ["perfops", "run", "examples/orders.yaml", "--set", "load.max_in_flight=500"],
        "started_at": started, "name": "orders", "target": "http://127.0.0.1:8080", "model": "open",
        "stages": (0..6).map(|i| json!({"name": stage_name(i), "from": 50.0 * (i as f64 + 1.0), "to": 50.0 * (i as f64 + 1.0), "duration_s": f64::from(HOLD)})).collect::<Vec<_>>(),
        "steps": ["login", "orders"], "shard": null,
    })
}

fn write_seconds(dir: &mut RunDir, secs: &[Second]) {
    for (t, s) in secs.iter().enumerate() {
        let finished = s.completed + s.failed.values().sum::<u64>();
        let label = if t as u32 >= 6 * HOLD { "(draining)".to_string() } else { stage_name(s.stage) };
        let line = json!({
            "t": t, "length_s": 1.0, "stage": label,
            "target_rate": (s.target > 0.0).then_some(s.target),
            "achieved_rate": s.achieved.round(), "iterations": s.completed, "sent": finished + s.in_flight / 50,
            "completed": s.completed, "succeeded": s.completed, "failed": s.failed.values().sum::<u64>(),
            "dropped": s.dropped, "in_flight": s.in_flight, "failures": s.failed,
            "latency_ms": s.latency.summary(), "service_ms": s.service.summary(),
            "bytes_in": s.completed * 412, "bytes_out": s.completed * 188,
            "steps": {"orders": {"completed": s.completed, "failed": s.failed.values().sum::<u64>(),
                "p50": s.latency.summary().p50, "p95": s.latency.summary().p95, "p99": s.latency.summary().p99}},
        });
        let at = Duration::from_secs(t as u64);
        dir.append_second(&line, at, Duration::from_secs(1), &[("latency", &s.latency), ("service", &s.service)])
            .expect("append a second");
    }
}

fn watch_lines(secs: &[Second], rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut total = 0.0;
    for t in (0..secs.len()).step_by(2) {
        let s = &secs[t];
        total += s.achieved * 2.0;
        let busy = (s.achieved * SERVICE_MS / 1000.0 + s.queue).min(10.0).round();
        let cpu = (0.04 + 0.0021 * s.achieved + rng.next() * 0.02).min(0.47);
        let lines = [
            json!({"t": t as f64, "source": "process", "values": {
                "process_cpu_share": (cpu * 1000.0).round() / 1000.0,
                "process_rss_bytes": 41_000_000.0 + 12_000.0 * t as f64,
                "process_threads": 14, "process_open_fds": 22.0 + s.in_flight.min(128) as f64,
                "listen_queue": s.queue.min(128.0).round(),
            }}),
            json!({"t": t as f64 + 0.2, "source": "prometheus http://127.0.0.1:8080/metrics", "values": {
                "demo_workers_busy": busy, "demo_workers_max": 10,
                "demo_queue_depth": s.queue.round(),
                "demo_requests_total{path=\"/orders\",code=\"200\"}": total,
                "demo_requests_total{path=\"/health\",code=\"200\"}": (t / 2) as f64,
            }}),
            json!({"t": t as f64 + 0.1, "source": "generator", "values": {
                "generator_cpu_share": ((0.02 + s.achieved * 0.0003 + rng.next() * 0.01) * 1000.0).round() / 1000.0,
            }}),
        ];
        for l in lines {
            out.push_str(&l.to_string());
            out.push('\n');
        }
    }
    out
}

fn probe_lines(secs: &[Second], rng: &mut Rng) -> (String, Vec<f64>) {
    let (mut out, mut restarts, mut fails) = (String::new(), Vec::new(), 0u32);
    for t in (1..secs.len()).step_by(2) {
        // /health waits in the same queue as the orders.
        let ms = secs[t].queue / CAPACITY * 1000.0 + 1.2 + rng.exp(0.4);
        let ok = ms < 1000.0;
        fails = if ok { 0 } else { fails + 1 };
        let restart = fails == 3;
        if restart {
            restarts.push(t as f64);
            fails = 0;
        }
        let line = json!({
            "t": t as f64, "probe": "liveness", "ok": ok,
            "status": if ok { json!(200) } else { Value::Null },
            "ms": if ok { (ms * 10.0).round() / 10.0 } else { 1000.2 },
            "error": if ok { Value::Null } else { json!("timeout") },
            "failures": if ok { 0 } else if restart { 3 } else { fails }, "restart": restart, "unready": !ok,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    (out, restarts)
}

fn figures(name: &str, secs: &[&Second], target: Option<f64>, duration_s: f64) -> Value {
    let (mut lat, mut svc) = (Histogram::new(), Histogram::new());
    let mut failures: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut completed, mut dropped, mut answered) = (0, 0, 0.0);
    for s in secs {
        lat.merge(&s.latency);
        svc.merge(&s.service);
        completed += s.completed;
        dropped += s.dropped;
        answered += s.achieved;
        for (k, n) in &s.failed {
            *failures.entry(k).or_default() += n;
        }
    }
    let failed: u64 = failures.values().sum();
    json!({
        "name": name, "duration_s": duration_s, "target_rate": target,
        "achieved_rate": (answered / duration_s * 10.0).round() / 10.0,
        "sent": completed + failed, "completed": completed, "succeeded": completed, "failed": failed,
        "dropped": dropped, "error_ratio": if completed + failed == 0 { 0.0 } else { failed as f64 / (completed + failed) as f64 },
        "failures": failures, "latency_ms": lat.summary(), "service_ms": svc.summary(),
    })
}

fn slo(fig: &Value) -> Vec<Value> {
    let p95 = fig["latency_ms"]["p95"].as_f64().unwrap_or(0.0);
    let p99 = fig["latency_ms"]["p99"].as_f64().unwrap_or(0.0);
    let err = fig["error_ratio"].as_f64().unwrap_or(0.0) * 100.0;
    vec![
        json!({"slo": "p95 < 500ms", "value": p95, "passed": p95 < 500.0}),
        json!({"slo": "p99 < 1s", "value": p99, "passed": p99 < 1000.0}),
        json!({"slo": "errors < 1%", "value": (err * 1000.0).round() / 1000.0, "passed": err < 1.0}),
    ]
}

fn stepped(base: &Path) {
    let mut rng = Rng(0x5eed_0f0f_1234_9876);
    let secs = simulate(62, &mut rng);
    let started = UNIX_EPOCH + Duration::from_secs(1_795_321_800); // 2026-11-22T04:30:00Z
    let mut dir = RunDir::create(base, "orders-stepped", started).expect("create the fixture directory");
    dir.write_json("meta.json", &meta("2026-11-22T04:30:00Z")).unwrap();
    dir.write_file("scenario.yaml", SCENARIO.as_bytes()).unwrap();
    write_seconds(&mut dir, &secs);
    dir.write_file("watch.jsonl", watch_lines(&secs, &mut rng).as_bytes()).unwrap();
    let (probe, restarts) = probe_lines(&secs, &mut rng);
    dir.write_file("probe.jsonl", probe.as_bytes()).unwrap();

    let mut stages = Vec::new();
    for i in 0..6 {
        // Drain seconds count with the last stage's arrivals.
        let mine: Vec<&Second> =
            secs.iter().enumerate().filter(|(t, s)| s.stage == i && (*t < 60 || i == 5)).map(|(_, s)| s).collect();
        let ran: Vec<&Second> = mine.iter().copied().filter(|s| s.target > 0.0).collect();
        let mut f = figures(&stage_name(i), &mine, Some(50.0 * (i as f64 + 1.0)), f64::from(HOLD));
        f["achieved_rate"] =
            json!((ran.iter().map(|s| s.achieved).sum::<f64>() / f64::from(HOLD) * 10.0).round() / 10.0);
        let slo = slo(&f);
        let (verdict, reasons): (&str, Vec<String>) = match i {
            0..=3 => ("holds", vec![]),
            4 => (
                "fails",
                slo.iter()
                    .filter(|s| s["passed"] == false)
                    .map(|s| {
                        let (slo, v) = (s["slo"].as_str().unwrap(), s["value"].as_f64().unwrap());
                        if slo.ends_with('%') {
                            format!("{slo} (measured {v:.1}%)")
                        } else {
                            format!("{slo} (measured {v:.0} ms)")
                        }
                    })
                    .chain([format!("liveness probe failed; restart at {}s", restarts.first().copied().unwrap_or(0.0))])
                    .collect(),
            ),
            _ => {
                ("inconclusive", vec![format!("the generator dropped {} arrivals at max_in_flight 500", f["dropped"])])
            }
        };
        f["from_s"] = json!(f64::from(HOLD) * i as f64);
        f["verdict"] = json!(verdict);
        f["reasons"] = json!(reasons);
        f["slo"] = json!(slo);
        stages.push(f);
    }
    let all: Vec<&Second> = secs.iter().collect();
    let mut total = figures("total", &all, None, 62.0);
    total["achieved_rate"] = json!((secs.iter().map(|s| s.achieved).sum::<f64>() / 62.0 * 10.0).round() / 10.0);
    let run_slo = slo(&total);
    let busy_at = secs.iter().position(|s| s.stage == 4 && s.queue > 0.0).unwrap_or(40) as f64;
    let summary = json!({
        "format": "perfops.summary", "version": 1, "name": "orders", "target": "http://127.0.0.1:8080", "model": "open",
        "started_at": "2026-11-22T04:30:00Z", "elapsed_s": 61.4, "interrupted": false, "aborted": null,
        "stages": stages, "steps": [], "total": total, "slo": run_slo,
        "probes": {"liveness": {
            "checks": probe.lines().count(), "failures": probe.matches("\"ok\":false").count(), "trips": restarts,
        }},
        "generator": {"workers": 2, "cores": 2, "cpu_user_s": 3.1, "cpu_sys_s": 1.9, "max_rss_kib": 38_912, "naps": 0, "longest_nap_us": 0.0},
        "warnings": [format!("{} arrivals were dropped at max_in_flight: the generator, not the server, was the limit in those seconds", total["dropped"])],
        "verdict": {
            "result": "failed", "capacity_rps": 200.0, "breaks_at_rps": 250.0, "breaks_at_stage": "250/s",
            "headline": "holds 200/s; breaks at 250/s: all 10 workers busy while the CPU stays under half used — the thread pool is the limit",
        },
        "diagnostics": [
            {"kind": "pool_bound", "title": "Worker pool full, CPU idle",
             "detail": "From 250/s every worker was busy (10 of 10) while the target used under half a core: requests queued for a thread, not for CPU. More threads (or an async server) would raise capacity; more CPU would not.",
             "stage": "250/s",
             "evidence": [{"metric": "demo_workers_busy", "value": 10.0, "t": busy_at + 1.0}, {"metric": "process_cpu_share", "value": 0.45, "t": busy_at + 1.0}]},
            {"kind": "liveness_failing", "title": "Liveness probe timed out",
             "detail": format!("/health waited behind the orders queue and timed out 3 times in a row: Kubernetes would have restarted the target at t = {}s, in the middle of the load.", restarts.first().copied().unwrap_or(0.0)),
             "stage": "250/s",
             "evidence": [{"metric": "probe liveness", "value": 1000.2, "t": restarts.first().copied().unwrap_or(0.0)}]},
            {"kind": "generator_limit", "title": "The generator dropped arrivals",
             "detail": "At 300/s, in-flight requests reached max_in_flight (500): the generator, not the server, was the limit, so that stage is inconclusive.",
             "stage": "300/s", "evidence": [{"metric": "in_flight", "value": 500.0, "t": 55.0}]},
        ],
    });
    dir.write_json("summary.json", &summary).unwrap();
}

fn killed(base: &Path) {
    let mut rng = Rng(0x0bad_cafe_0000_0001);
    let secs = simulate(23, &mut rng);
    let started = UNIX_EPOCH + Duration::from_secs(1_795_425_300); // 2026-11-23T09:15:00Z
    let mut dir = RunDir::create(base, "orders-killed", started).expect("create the fixture directory");
    dir.write_json("meta.json", &meta("2026-11-23T09:15:00Z")).unwrap();
    dir.write_file("scenario.yaml", SCENARIO.as_bytes()).unwrap();
    write_seconds(&mut dir, &secs);
    dir.write_file("watch.jsonl", watch_lines(&secs, &mut rng).as_bytes()).unwrap();
    dir.write_file("probe.jsonl", probe_lines(&secs, &mut rng).0.as_bytes()).unwrap();
    let path = dir.path().to_path_buf();
    drop(dir);
    // The kill came mid-write of second 23.
    let mut series = std::fs::read_to_string(path.join("series.jsonl")).unwrap();
    series.push_str("{\"t\":23,\"length_s\":1.0,\"stage\":\"150/s\",\"target_ra");
    std::fs::write(path.join("series.jsonl"), series).unwrap();
}

#[test]
#[ignore = "writes the committed fixtures; run by hand when the format grows"]
fn regenerate() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for name in ["20261122T043000Z-orders-stepped", "20261123T091500Z-orders-killed"] {
        let _ = std::fs::remove_dir_all(base.join(name));
    }
    stepped(&base);
    killed(&base);
}
