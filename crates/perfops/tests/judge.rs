//! Watching and judging, end to end (issue #4): the real binary against the
//! demo target and testkit servers on loopback. Verdicts per stage, exit codes
//! and JUnit; watched metrics aligned with the load; the probe and the listen
//! queue above capacity; `limit` finding the thread pool's capacity and naming
//! the pool; `sweep` fitting the Universal Scalability Law; the Nagle
//! diagnostic on quantized stalls and not on a steady server; a real
//! server's pool recognised by its exporter's names (#11).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Workdir, exclusive, spawn_perfops};
use serde_json::Value;

/// A scenario file with `body` and a fresh results base directory, in a
/// [`Workdir`] that the caller keeps until the test ends (it is removed then,
/// kept if the test failed).
fn scenario(tag: &str, body: &str) -> (Workdir, PathBuf, PathBuf) {
    let wd = Workdir::new(tag);
    let path = wd.scenario("scenario.yaml", body);
    let out = wd.runs();
    (wd, path, out)
}

/// The one results directory under `out`.
fn run_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out).expect("results base").map(|e| e.expect("entry").path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

fn kinds(summary: &Value) -> Vec<String> {
    summary["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The demo's flow: one login in setup, then order lists with its token.
const ORDERS: &str = r#"
setup:
  - { request: POST /auth, json: { user: t }, save: { token: $.token } }
flows:
  orders:
    steps:
      - { name: orders, request: GET /orders, headers: { Authorization: "Bearer ${token}" }, expect: { status: 200 } }
"#;

#[test]
fn watched_metrics_follow_the_load_on_the_series_clock() {
    let _cpu = exclusive();
    let (_wd, path, out) = scenario(
        "watch",
        &format!(
            "name: watch\ntarget: demo:threads?workers=2&threads=5&io_wait=20ms\n{ORDERS}\
             load: {{ stages: [ {{ rate: 50, hold: 3s }}, {{ rate: 250, hold: 3s }} ] }}\nwatch: {{ every: 500ms }}\n"
        ),
    );
    let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
        .wait(Duration::from_secs(40));
    f.assert_exit(0);
    let dir = run_dir(&out);
    let watch = lines(&dir.join("watch.jsonl"));
    // The demo's own request counter, scraped from /metrics, turned into a rate.
    let orders = "demo_requests_total{code=\"200\",path=\"/orders\"}";
    let rate_in = |from: f64, to: f64| {
        let v: Vec<f64> = watch
            .iter()
            .filter(|s| s["t"].as_f64().is_some_and(|t| t > from && t < to))
            .filter_map(|s| s["values"][orders].as_f64())
            .collect();
        assert!(!v.is_empty(), "no `{orders}` samples in {from}..{to}s: {watch:?}");
        v.iter().sum::<f64>() / v.len() as f64
    };
    // The server's view agrees with the schedule, stage by stage: the clocks line up.
    // Stage windows on the session clock, from the summary; skip each stage's first half second.
    let summary = json(&dir.join("summary.json"));
    let window = |i: usize| {
        let from = summary["stages"][i]["from_s"].as_f64().expect("from_s");
        (from + 0.6, from + summary["stages"][i]["duration_s"].as_f64().expect("duration_s") - 0.1)
    };
    let ((a, b), (c, d)) = (window(0), window(1));
    let (low, high) = (rate_in(a, b), rate_in(c, d));
    assert!((40.0..60.0).contains(&low), "the server saw {low}/s while the schedule said 50/s");
    assert!((210.0..290.0).contains(&high), "the server saw {high}/s while the schedule said 250/s");
    // The process was watched too, and the generator itself.
    let sources: Vec<&str> = watch.iter().filter_map(|s| s["source"].as_str()).collect();
    assert!(sources.contains(&"process") && sources.contains(&"generator"), "{sources:?}");
    // The run is the session's first load: both start at 0.
    let series = lines(&dir.join("series.jsonl"));
    assert_eq!(series[0]["t"], 0);
    assert_eq!(summary["verdict"]["result"], "passed", "{summary:#}");
    assert_eq!(summary["stages"][1]["verdict"], "holds");
}

#[test]
fn above_capacity_the_pool_is_blamed_the_queue_fills_and_the_probe_fails() {
    let _cpu = exclusive();
    let (wd, path, out) = scenario(
        "break",
        &format!(
            "name: break\ntarget: demo:threads?workers=2&threads=5&io_wait=20ms&backlog=8\n{ORDERS}\
             load: {{ stages: [ {{ rate: 900, hold: 6s }} ], max_in_flight: 3000 }}\n\
             defaults: {{ timeout: 3s }}\n\
             slo: [ p95 < 500ms ]\nwatch: {{ every: 500ms }}\n\
             probe: {{ liveness: {{ path: /health, period: 1s, timeout: 300ms, failure_threshold: 2 }} }}\n"
        ),
    );
    let junit = wd.path.join("junit.xml");
    let f = spawn_perfops(
        &["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q", "--junit", junit.to_str().unwrap()],
        |_| {},
    )
    .wait(Duration::from_secs(40));
    f.assert_exit(1);
    let dir = run_dir(&out);
    let summary = json(&dir.join("summary.json"));
    assert_eq!(summary["stages"][0]["verdict"], "fails", "{summary:#}");
    let k = kinds(&summary);
    assert_eq!(k.first().map(String::as_str), Some("pool_bound"), "the pool, not the CPU: {k:?}\n{}", f.stdout);
    assert!(!k.contains(&"cpu_saturated".to_string()), "{k:?}");
    assert!(k.contains(&"listen_queue_full".to_string()), "{k:?}\n{summary:#}");
    assert!(k.contains(&"probe_failed".to_string()), "{k:?}\n{summary:#}");
    // The evidence is on disk: a full accept queue in watch.jsonl, a restart in probe.jsonl.
    let watch = lines(&dir.join("watch.jsonl"));
    assert!(
        watch.iter().any(|s| {
            let (q, max) = (s["values"]["listen_queue"].as_f64(), s["values"]["listen_queue_max"].as_f64());
            matches!((q, max), (Some(q), Some(m)) if m == 8.0 && q >= m)
        }),
        "no full listen queue in watch.jsonl"
    );
    let probes = lines(&dir.join("probe.jsonl"));
    assert!(probes.iter().any(|p| p["restart"] == true), "{probes:?}");
    assert!(f.stdout.contains("Kubernetes would have restarted the pod"), "{}", f.stdout);
    let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
    assert!(xml.contains("<testcase classname=\"perfops.break.900/s\" name=\"p95 &lt; 500ms\"><failure"), "{xml}");
    // The measured value says its unit, in JUnit and on the terminal.
    let case = xml.lines().find(|l| l.contains("name=\"p95 &lt; 500ms\"")).expect("the p95 case");
    assert!(case.contains("<failure message=\"measured ") && case.ends_with("ms\"/></testcase>"), "{xml}");
    let line = f.stdout.lines().find(|l| l.starts_with("SLO (whole run) p95 < 500ms")).expect("the SLO line");
    assert!(line.contains("FAILED (measured ") && line.ends_with("ms)"), "{}", f.stdout);
}

#[test]
fn slo_verdicts_set_the_exit_code_and_junit_lists_every_line() {
    let _cpu = exclusive();
    let base = format!(
        "target: demo:async?io_wait=5ms\n{ORDERS}\
         load: {{ stages: [ {{ name: calm, rate: 20, hold: 1s }}, {{ name: busier, rate: 40, hold: 1s }} ] }}\n"
    );
    for (slo, code, failures) in [("[ p95 < 2s, errors < 1% ]", 0, 0), ("[ p50 < 1ms, errors < 1% ]", 1, 2)] {
        let (wd, path, out) = scenario("slo", &format!("name: slo\n{base}slo: {slo}\n"));
        let junit = wd.path.join("junit.xml");
        let f = spawn_perfops(
            &["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q", "--junit", junit.to_str().unwrap()],
            |_| {},
        )
        .wait(Duration::from_secs(30));
        f.assert_exit(code);
        let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
        // Two stages, two SLO lines and one stage verdict each.
        assert_eq!(xml.matches("<testcase ").count(), 6, "{xml}");
        assert_eq!(xml.matches("<failure").count(), failures * 2, "{xml}");
        assert!(xml.contains("<testsuite name=\"busier\""), "{xml}");
    }
}

/// A scenario that writes no `slo:` is judged by `errors < 1%`: a run whose every request
/// came back 404 used to read "PASSED: every stage held" and exit 0. `slo: []` opts out.
#[test]
fn without_an_slo_a_run_whose_requests_all_failed_does_not_pass() {
    let _cpu = exclusive();
    let server = perfops_testkit::status(404);
    for (slo, code, verdict) in [("", 1, "fails"), ("slo: []\n", 0, "holds")] {
        let (_wd, path, out) = scenario(
            "no-slo",
            &format!(
                "name: no-slo\ntarget: {}\nflows: {{ root: {{ steps: [ {{ request: GET /missing }} ] }} }}\n\
                 load: {{ stages: [ {{ rate: 20, hold: 1s }} ] }}\n{slo}",
                server.url().trim_end_matches('/')
            ),
        );
        let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
            .wait(Duration::from_secs(30));
        f.assert_exit(code);
        let summary = json(&run_dir(&out).join("summary.json"));
        assert_eq!(summary["stages"][0]["verdict"], verdict, "{slo:?}: {summary}");
        if slo.is_empty() {
            assert_eq!(summary["slo"][0]["slo"], "errors < 1%", "the default line is in the summary: {summary}");
            let headline = summary["verdict"]["headline"].as_str().unwrap_or_default();
            assert!(headline.starts_with("FAILED") && headline.contains("errors < 1%"), "{headline}");
        }
    }
}

/// #32: a target where nothing listens. Everything was refused: the why is
/// that the target was down, with its address; it does not lead with an SLO
/// line measured on nothing, and a latency line over refused connections is
/// no "passed" (it read "p95 < 300ms passed (measured 0.33ms)").
#[test]
fn a_target_that_refused_everything_is_said_to_be_down() {
    let _cpu = exclusive();
    // A port where nothing listens: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (_wd, path, out) = scenario(
        "down",
        "name: down\ntarget: http://127.0.0.1:${env.DOWN_PORT}\n\
         flows: { f: { steps: [ { name: create-order, request: POST /orders, json: { qty: 3 } } ] } }\n\
         load: { stages: [ { rate: 20, hold: 1s } ] }\n\
         slo: [ \"p99(create-order, ok) < 500ms\", p95 < 300ms, errors < 1% ]\n",
    );
    // The port through the environment: the why names the address the run
    // resolved, never the file's `${env.DOWN_PORT}` (it did, at first).
    let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |c| {
        c.env("DOWN_PORT", port.to_string());
    })
    .wait(Duration::from_secs(30));
    f.assert_exit(1);
    let summary = json(&run_dir(&out).join("summary.json"));
    let down = format!("the target is down (connection refused at 127.0.0.1:{port}");
    let why = summary["verdict"]["why"].as_str().unwrap_or_default();
    assert!(why.starts_with(&down), "{summary:#}");
    let headline = summary["verdict"]["headline"].as_str().unwrap_or_default();
    assert!(headline.contains(&format!(": {down}")) && !headline.contains("nothing measured"), "{headline}");
    let reasons = summary["stages"][0]["reasons"].as_array().unwrap();
    assert!(reasons[0].as_str().unwrap().starts_with(&down), "the stage's first reason: {reasons:?}");
    // No latency line passes on refusals, in the summary or on the terminal.
    for c in summary["slo"].as_array().unwrap() {
        assert_eq!(c["passed"], false, "{c}");
    }
    let p95 = f.stdout.lines().find(|l| l.starts_with("SLO (whole run) p95 < 300ms")).expect(&f.stdout);
    assert!(p95.ends_with("not measured"), "{p95}");
}

/// #32: a run that failed on 4xx answers says so, naming the step, the
/// status class and, from its first failing exchange, the status that came.
#[test]
fn the_why_of_4xx_answers_names_the_step() {
    let _cpu = exclusive();
    let server = perfops_testkit::status(422);
    let (_wd, path, out) = scenario(
        "why-4xx",
        &format!(
            "name: why\ntarget: {}\nflows: {{ f: {{ steps: [ {{ name: create-order, request: POST /orders }} ] }} }}\n\
             load: {{ stages: [ {{ rate: 20, hold: 1s }} ] }}\n",
            server.url().trim_end_matches('/')
        ),
    );
    let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
        .wait(Duration::from_secs(30));
    f.assert_exit(1);
    let summary = json(&run_dir(&out).join("summary.json"));
    let why = summary["verdict"]["why"].as_str().unwrap_or_default();
    let n = summary["total"]["failed"].as_u64().unwrap();
    assert!(
        why.starts_with("errors < 1% (measured 100.00%): step create-order: ")
            && why.contains(&format!("{n} of {n} failed (http_4xx {n}: e.g. "))
            && why.contains("422"),
        "{summary:#}"
    );
    assert!(f.stdout.contains(&format!("breaks at 20/s: {why}")), "{}", f.stdout);
}

#[test]
fn limit_finds_the_thread_pool_capacity_and_names_the_pool() {
    let _cpu = exclusive();
    // 2 workers x 5 threads, 20 ms of I/O per request: about 500 requests/s.
    // From 250/s the first step up (500/s) is already at the edge, so the
    // search bisects from there instead of first overloading the pool at 800/s.
    let (_wd, path, out) = scenario(
        "limit",
        &format!(
            "name: limit\ntarget: demo:threads?workers=2&threads=5&io_wait=20ms\n{ORDERS}\
             load: {{ stages: [ {{ rate: 250, hold: 3s }} ] }}\nslo: [ p99 < 250ms, errors < 1% ]\nwatch: {{ every: 500ms }}\n"
        ),
    );
    let f = spawn_perfops(
        &["limit", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q", "--hold", "3s", "--cooldown", "15s"],
        |_| {},
    )
    .wait(Duration::from_secs(120));
    let summary = json(&run_dir(&out).join("summary.json"));
    let capacity = summary["limit"]["capacity_rps"].as_f64().unwrap_or_else(|| panic!("{summary:#}\n{}", f.stderr));
    assert!((450.0..=550.0).contains(&capacity), "capacity {capacity}/s, want 500 ± 10%\n{}", f.stderr);
    let k = kinds(&summary);
    assert!(k.contains(&"pool_bound".to_string()) && !k.contains(&"cpu_saturated".to_string()), "{k:?}\n{summary:#}");
    assert!(f.stdout.contains("capacity"), "{}", f.stdout);
    f.assert_exit(0);

    // The async model on the same settings is bound by the CPU only: at least 2.5x more.
    // The search starts and stops at 2.5x: holding it (and its confirmation) is
    // the claim; the CPU-bound ceiling above it is not, and bisecting for it
    // would cost most of this test's time. That ceiling, a debug build of the
    // generator and the demo on one core each, is near 3x here: in a CI run
    // with clippy beside it, 3x a pool measured at 453/s (1,359/s) reached 95%
    // and failed, while 1,317/s held and was confirmed (session 14).
    let (_wd, path, out) = scenario(
        "limit-async",
        &format!(
            "name: limit-async\ntarget: demo:async?io_wait=20ms\n{ORDERS}\
             load: {{ stages: [ {{ rate: 400, hold: 3s }} ] }}\nslo: [ p99 < 250ms, errors < 1% ]\n"
        ),
    );
    let at_least = (2.5 * capacity).to_string();
    let f = spawn_perfops(
        &[
            "limit",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--hold",
            "2s",
            "--from",
            &at_least,
            "--max",
            &at_least,
        ],
        |_| {},
    )
    .wait(Duration::from_secs(90));
    let summary = json(&run_dir(&out).join("summary.json"));
    let async_capacity = summary["limit"]["capacity_rps"].as_f64().unwrap_or(0.0);
    assert!(async_capacity >= 2.5 * capacity, "async {async_capacity}/s vs threads {capacity}/s\n{}", f.stderr);
}

/// `limit` against a target where nothing holds says how low it went: the
/// lowest rate it tried, not the one it would have tried next ("down to
/// 1.6/s" after attempts at 50 ... 3.1/s, session 14's tester).
#[test]
fn limit_where_nothing_holds_names_the_lowest_rate_tried() {
    let _cpu = common::shared();
    let server = perfops_testkit::status(503);
    let (_wd, path, out) = scenario(
        "limit-none",
        &format!(
            "name: none\ntarget: {}\nflows: {{ a: {{ steps: [ {{ request: GET / }} ] }} }}\n\
             load: {{ stages: [ {{ rate: 40, hold: 1s }} ] }}\nslo: [ errors < 1% ]\n",
            server.url().trim_end_matches('/')
        ),
    );
    let args = ["limit", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q", "--hold", "1s"];
    let f = spawn_perfops(&[&args[..], &["--cooldown", "1s", "--attempts", "2"]].concat(), |_| {})
        .wait(Duration::from_secs(60));
    f.assert_exit(1);
    let summary = json(&run_dir(&out).join("summary.json"));
    let rates: Vec<f64> =
        summary["limit"]["attempts"].as_array().unwrap().iter().filter_map(|a| a["rate"].as_f64()).collect();
    assert_eq!(rates, [40.0, 20.0], "{summary:#}");
    assert_eq!(summary["limit"]["breaks_at_rps"].as_f64(), Some(20.0));
    let headline = summary["verdict"]["headline"].as_str().unwrap_or_default();
    assert!(headline.starts_with("no rate held, down to 20/s"), "{headline}");
}

#[test]
fn sweep_fits_the_universal_scalability_law() {
    let _cpu = exclusive();
    // 1 ms of CPU per request on one core: the async demo tops out near 1000/s.
    let (_wd, path, out) = scenario(
        "sweep",
        "name: sweep\ntarget: demo:async?io_wait=20ms&cpu_work=1ms\n\
         flows: { home: { steps: [ { request: GET /orders } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
    );
    let f = spawn_perfops(
        &[
            "sweep",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--concurrency",
            "1,2,5,10,20,40",
            "--hold",
            "2s",
        ],
        |_| {},
    )
    .wait(Duration::from_secs(60));
    let summary = json(&run_dir(&out).join("summary.json"));
    let sweep = &summary["sweep"];
    let levels = sweep["levels"].as_array().expect("levels");
    assert_eq!(levels.len(), 6, "{sweep:#}");
    let best = levels.iter().filter_map(|l| l["throughput"].as_f64()).fold(0.0, f64::max);
    let predicted = sweep["predicted_peak_throughput"].as_f64().unwrap_or_else(|| panic!("no peak: {sweep:#}"));
    assert!((predicted - best).abs() <= 0.2 * best, "USL peak {predicted}/s vs best measured {best}/s\n{sweep:#}");
    assert!(f.stdout.contains("USL fit"), "{}", f.stdout);
}

#[test]
fn quantized_stalls_raise_the_nagle_diagnostic_and_a_steady_server_does_not() {
    let _cpu = exclusive();
    let body = |url: &str| {
        format!(
            "name: nagle\ntarget: {url}\nflows: {{ a: {{ steps: [ {{ request: GET /, pause: 50ms }} ] }} }}\n\
             load: {{ model: closed, stages: [ {{ users: 4, hold: 5s }} ] }}\n"
        )
    };
    let stalling = perfops_testkit::stall_some_connections(2, Duration::from_millis(200));
    let steady = perfops_testkit::fixed_delay(Duration::from_millis(20));
    for (server, want) in [(&stalling, true), (&steady, false)] {
        let (_wd, path, out) = scenario("nagle", &body(server.url().trim_end_matches('/')));
        let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
            .wait(Duration::from_secs(30));
        let summary = json(&run_dir(&out).join("summary.json"));
        let k = kinds(&summary);
        assert_eq!(k.contains(&"quantized_stalls".to_string()), want, "{k:?}\n{}", f.stdout);
        if want {
            assert!(f.stdout.contains("Nagle"), "{}", f.stdout);
        }
    }
}

/// #11: a Puma-like pool (4 threads that accept only when free, 50 ms each:
/// 80 requests/s) publishing Puma's exporter names on its own /metrics, no
/// `pool:` in the scenario: at 150/s the verdict names the pool by those
/// names, with the CPU of its process (idle: it sleeps).
#[test]
fn a_real_servers_pool_is_named_from_its_exporters_metric_names() {
    let _cpu = exclusive();
    let server = perfops_testkit::python::puma_pool(4, 50.0, 64);
    let (_wd, path, out) = scenario(
        "puma",
        &format!(
            "name: puma\ntarget: {}\nflows: {{ a: {{ steps: [ {{ request: GET / }} ] }} }}\n\
             load: {{ stages: [ {{ rate: 150, hold: 3s }} ] }}\ndefaults: {{ timeout: 3s }}\n\
             slo: [ p95 < 200ms ]\n\
             watch: {{ prometheus: [ {}/metrics ], process: {{ port: {} }}, every: 500ms }}\n",
            server.url(0),
            server.url(1),
            server.port(0)
        ),
    );
    let f = spawn_perfops(&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
        .wait(Duration::from_secs(40));
    f.assert_exit(1);
    let summary = json(&run_dir(&out).join("summary.json"));
    let k = kinds(&summary);
    assert_eq!(k.first().map(String::as_str), Some("pool_bound"), "{k:?}\n{}", f.stdout);
    let title = summary["diagnostics"][0]["title"].as_str().unwrap();
    assert!(title.starts_with("pool-bound: 4 of 4 workers busy with the CPU at "), "{title}");
    assert_eq!(summary["diagnostics"][0]["evidence"][0]["metric"], "puma_busy_threads", "{summary:#}");
    assert!(f.stdout.contains("pool-bound: 4 of 4"), "{}", f.stdout);
}

/// #11: a 10-slot pool (the demo, 2 workers x 5 threads) swept up to 50
/// closed users queues: latencies at multiples of the service time, which
/// are no delayed-ACK timer. Judged per level against the requests in
/// flight, nothing is named Nagle; the server that stalls half its
/// connections 200 ms (above) still is, and so is every level of a server
/// whose responses all wait for a delayed ACK.
#[test]
fn a_queue_in_a_sweep_is_not_named_nagle_and_a_two_send_server_is() {
    let _cpu = exclusive();
    let (_wd, path, out) = scenario(
        "sweep-pool",
        &format!(
            "name: sweep-pool\ntarget: demo:threads?workers=2&threads=5&io_wait=50ms\n{ORDERS}\
             load: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n"
        ),
    );
    let f = spawn_perfops(
        &[
            "sweep",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--concurrency",
            "1,10,50",
            "--hold",
            "3s",
        ],
        |_| {},
    )
    .wait(Duration::from_secs(60));
    let summary = json(&run_dir(&out).join("summary.json"));
    let levels = summary["sweep"]["levels"].as_array().expect("levels");
    // The pool queued: 50 users waited about 5 service times.
    let p50 = levels[2]["p50_ms"].as_f64().unwrap();
    assert!(p50 > 150.0, "50 users on 10 slots of 50 ms: p50 {p50} ms\n{summary:#}\n{}", f.stderr);
    let k = kinds(&summary);
    assert!(!k.contains(&"quantized_stalls".to_string()), "{k:?}\n{}", f.stdout);
    assert!(!f.stdout.contains("Nagle"), "{}", f.stdout);

    let server = perfops_testkit::python::two_sends();
    let (_wd, path, out) = scenario(
        "sweep-nagle",
        &format!(
            "name: sweep-nagle\ntarget: {}\nflows: {{ a: {{ steps: [ {{ request: GET / }} ] }} }}\n\
             load: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n",
            server.url(0)
        ),
    );
    let f = spawn_perfops(
        &[
            "sweep",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--concurrency",
            "1,8",
            "--hold",
            "2s",
        ],
        |_| {},
    )
    .wait(Duration::from_secs(40));
    let summary = json(&run_dir(&out).join("summary.json"));
    let d = summary["diagnostics"].as_array().expect("diagnostics");
    let stall = d.iter().find(|d| d["kind"] == "quantized_stalls").unwrap_or_else(|| panic!("{summary:#}"));
    assert!(stall["title"].as_str().unwrap().starts_with("every request stalled ~4"), "{stall:#}");
    assert_eq!(stall["stage"], "1 users", "{stall:#}");
    assert!(f.stdout.contains("Nagle"), "{}", f.stdout);
}
