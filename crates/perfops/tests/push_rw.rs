//! End to end: `--output prometheus-rw=URL` (and a scenario's `outputs:`)
//! against a real, current Prometheus (`perfops_testkit::receivers`, built
//! by bench/receivers/install.sh), through the real binary, with the demo
//! as the target on loopback. What a receiver computes from the push is
//! compared with `summary.json`: `histogram_quantile` of the last cumulative
//! native histograms within a bucket (2.19 % at schema 5) and HDR's 0.1 %,
//! counts exactly; per stage too, for one run and for a coordinator of three
//! agents (which pushes once: the agents push nothing). Receivers that are
//! down, refusing, failing or stalling cost the run nothing but the seconds
//! said at the end. Skipped (said on stderr) where the receivers are not
//! built, unless `PERFOPS_RECEIVERS=required`.

// The figures read back are printed beside perfops' own (with --nocapture), and a skip is said.
#![allow(clippy::print_stderr)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Demo, Finished, RUN_LIMIT, Running, Workdir, shared};
use perfops_testkit::receivers::{self, Prometheus, PrometheusOptions};
use serde_json::Value;

/// The fleet's token, as tests/fleet.rs has it (strong enough: 128 bits).
const TOKEN: &str = "9b1f3ac47e2d8065f1c3a9be47d20c58";

/// How far a receiver's quantile may be from perfops' own: a bucket at
/// schema 5 (2^(1/32) - 1 = 2.19 %), plus HDR's 0.1 % (the value perfops
/// reports for a bucket is its highest equivalent), plus the query API's
/// printing.
const QUANTILE_ERROR: f64 = 0.0219 + 0.001 + 1e-6;

/// Two stages and two steps against the demo: a setup login, then 1 of 10
/// arrivals logs in again and 9 list orders (5 ms of I/O wait each).
const SCENARIO: &str = r#"name: @NAME@
target: @URL@
defaults: { timeout: 2s }
setup:
  - name: login
    request: POST /auth
    json: { user: "load-test" }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  refresh-token:
    weight: 1
    steps:
      - { name: auth, request: POST /auth, json: { user: "u-${seq}" }, expect: { status: 200 } }
  list-orders:
    weight: 9
    steps:
      - name: orders
        request: GET /orders
        headers: { Authorization: "Bearer ${token}" }
        expect: { status: 200 }
load:
  model: open
  stages:
    - { name: warm, rate: 100, hold: 2s }
    - { name: peak, rate: 200, hold: 2s }
@EXTRA@"#;

fn scenario(name: &str, url: &str, extra: &str) -> String {
    SCENARIO.replace("@NAME@", name).replace("@URL@", url).replace("@EXTRA@", extra)
}

/// The run's label: its results directory's name.
fn run_label(dir: &Path) -> String {
    dir.file_name().and_then(|n| n.to_str()).expect("a directory name").to_string()
}

/// The one value of `query` now, waiting (2 s at most) for it to appear.
fn value(prom: &Prometheus, query: &str) -> f64 {
    let result = prom.wait_for_data(query, Duration::from_secs(2)).unwrap_or_else(|e| panic!("{query}: {e}"));
    assert_eq!(result.len(), 1, "{query}: {result:?}");
    result[0]["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{query}: {result:?}"))
}

/// Each series' value of `query` now, by the label `by`.
fn values_by(prom: &Prometheus, query: &str, by: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = prom
        .series(query)
        .iter()
        .map(|s| {
            let label = s["metric"][by].as_str().unwrap_or_default().to_string();
            (label, s["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The last cumulative sample of each series of `metric` for the run, added up (by `by`).
fn last(metric: &str, run: &str, by: &str) -> String {
    format!("sum by ({by}) (last_over_time({metric}{{run=\"{run}\"}}[10m]))")
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary.json")).expect("JSON")
}

/// perfops' figure (ms) beside the receiver's (s), within the stated error.
#[track_caller]
fn assert_quantile(what: &str, perfops_ms: f64, receiver_s: f64) -> String {
    let receiver_ms = receiver_s * 1000.0;
    let off = (receiver_ms - perfops_ms).abs() / perfops_ms;
    let line = format!("{what}: perfops {perfops_ms:.3} ms, Prometheus {receiver_ms:.3} ms ({:+.2} %)", off * 100.0);
    assert!(off <= QUANTILE_ERROR, "{line}: more than {:.2} % apart", QUANTILE_ERROR * 100.0);
    line
}

/// What the receiver has of `run` against its `summary.json`: the whole
/// run's and each stage's p50 and p99 within a bucket, the counts exactly.
/// Returns the figures side by side, for the test's output.
fn check_against_summary(prom: &Prometheus, run: &str, s: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    let latency = "perfops_latency_seconds";
    // The whole run: every stage's and step's last cumulative histogram, added.
    let count = value(prom, &format!("histogram_count({})", last(latency, run, "")));
    assert_eq!(count as u64, s["total"]["latency_ms"]["count"].as_u64().expect("count"), "latency count");
    for (q, field) in [(0.5, "p50"), (0.99, "p99")] {
        let got = value(prom, &format!("histogram_quantile({q}, {})", last(latency, run, "")));
        let want = s["total"]["latency_ms"][field].as_f64().expect("a percentile");
        lines.push(assert_quantile(&format!("run {field}"), want, got));
    }
    // Each stage: its arrivals' last cumulative histograms.
    for stage in s["stages"].as_array().expect("stages") {
        let name = stage["name"].as_str().expect("a name");
        for (q, field) in [(0.5, "p50"), (0.99, "p99")] {
            let by_stage =
                values_by(prom, &format!("histogram_quantile({q}, {})", last(latency, run, "stage")), "stage");
            let got = by_stage.iter().find(|(s, _)| s == name).map(|(_, v)| *v).unwrap_or(f64::NAN);
            let want = stage["latency_ms"][field].as_f64().expect("a percentile");
            lines.push(assert_quantile(&format!("stage {name} {field}"), want, got));
        }
        let sent = values_by(prom, &last("perfops_requests_sent_total", run, "stage"), "stage");
        let got = sent.iter().find(|(s, _)| s == name).map(|(_, v)| *v as u64);
        assert_eq!(got, stage["sent"].as_u64(), "stage {name}: sent");
    }
    // Counters: exactly the summary's.
    let total = &s["total"];
    for (metric, field) in [("perfops_requests_sent_total", "sent"), ("perfops_responses_total", "completed")] {
        assert_eq!(value(prom, &last(metric, run, "")) as u64, total[field].as_u64().expect(field), "{metric}");
    }
    let ok = value(prom, &format!("sum(last_over_time(perfops_requests_total{{run=\"{run}\",outcome=\"ok\"}}[10m]))"));
    assert_eq!(ok as u64, total["succeeded"].as_u64().expect("succeeded"), "requests ok");
    lines
}

/// One run, two stages: what Prometheus computes from the push is what
/// `summary.json` says, and `#watched` pushes the demo's own metrics.
#[test]
fn a_run_pushed_to_prometheus_reads_back_as_its_summary() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = shared();
    let prom = receivers::prometheus();
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms"]);
    let w = Workdir::new("push-rw");
    let watch = format!("watch:\n  prometheus: [ {}/metrics ]\n  every: 1s\n", demo.url);
    let file = w.scenario("s.yaml", &scenario("push", &demo.url, &watch));
    let arg = format!("prometheus-rw={}#watched", prom.remote_write_url());
    let out = w.spawn("run", &file, &["--output", &arg], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    assert!(!out.stderr.contains("output prometheus-rw"), "nothing to say when all arrived: {}", out.dump());
    let dir = w.result_dir(&out);
    let run = run_label(&dir);
    let s = summary(&dir);
    for line in check_against_summary(&prom, &run, &s) {
        eprintln!("{line}");
    }
    // Two steps, two stages: four (stage, step) series of latency.
    let series = prom.series(&format!("last_over_time(perfops_latency_seconds{{run=\"{run}\"}}[10m])"));
    assert_eq!(series.len(), 4, "{series:?}");
    assert_eq!(series[0]["metric"]["scenario"], "push");
    // The watched metrics (#watched): every value watch.jsonl has, under its name, at its time.
    let watched = prom.series(&format!("perfops_watched{{run=\"{run}\"}}[10m]"));
    let text = std::fs::read_to_string(dir.join("watch.jsonl")).expect("watch.jsonl");
    let mut lines = 0;
    for line in text.lines() {
        let sample: Value = serde_json::from_str(line).expect("a watch line");
        let Some(values) = sample["values"].as_object() else { continue };
        for (name, v) in values {
            let Some(v) = v.as_f64() else { continue };
            let pushed = watched
                .iter()
                .find(|s| s["metric"]["metric"] == name.as_str())
                .unwrap_or_else(|| panic!("{name} of watch.jsonl was not pushed: {} series", watched.len()));
            let at = (sample["t"].as_f64().expect("t") * 1000.0).round();
            let points = pushed["values"].as_array().expect("a range");
            // The API prints 17 digits, not the shortest form watch.jsonl has.
            let same = |x: f64| (x - v).abs() <= v.abs() * 1e-12;
            let found = points.iter().any(|p| p[1].as_str().and_then(|x| x.parse::<f64>().ok()).is_some_and(same));
            assert!(found, "{name} = {v} at t={at} ms not among {points:?}");
            lines += 1;
        }
    }
    assert!(lines > 0, "the demo was watched: {text}");
    // 2.0 was spoken: the metadata came with the series.
    let meta = prom.query("perfops_latency_seconds", None).expect("a query");
    assert_eq!(meta["status"], "success");
}

/// A Prometheus that takes 1.0 only answers 2.0 with 415: the push falls
/// back to 1.0 and everything arrives.
#[test]
fn a_prometheus_of_remote_write_1_0_only_still_gets_everything() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = shared();
    let prom = receivers::prometheus_with(PrometheusOptions { remote_write_v1_only: true });
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms"]);
    let w = Workdir::new("push-rw-v1");
    let file = w.scenario("s.yaml", &scenario("push-v1", &demo.url, ""));
    let arg = format!("prometheus-rw={}", prom.remote_write_url());
    let out = w.spawn("run", &file, &["--output", &arg], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    assert!(!out.stderr.contains("output prometheus-rw"), "nothing lost: {}", out.dump());
    let dir = w.result_dir(&out);
    check_against_summary(&prom, &run_label(&dir), &summary(&dir));
}

/// Debian's Prometheus 2.42 predates remote-write 2.0 and ignores the
/// content type: it reads a 2.0 request as an empty 1.0 one and answers 204,
/// without 2.0's `...-Written` fields. The push sees that, falls back to
/// 1.0, sends the same seconds again: everything arrives.
#[test]
fn a_prometheus_2_that_takes_2_0_as_an_empty_request_still_gets_everything() {
    let _cpu = shared();
    let prom = perfops_testkit::prometheus::prometheus_with(
        &[],
        &["--web.enable-remote-write-receiver", "--enable-feature=native-histograms"],
    );
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms"]);
    let w = Workdir::new("push-rw-p2");
    let file = w.scenario("s.yaml", &scenario("push-p2", &demo.url, ""));
    let arg = format!("prometheus-rw={}/api/v1/write", prom.url().trim_end_matches('/'));
    let out = w.spawn("run", &file, &["--output", &arg], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    assert!(!out.stderr.contains("output prometheus-rw"), "nothing lost: {}", out.dump());
    let dir = w.result_dir(&out);
    let run = run_label(&dir);
    let s = summary(&dir);
    let sent = prom
        .wait_for_data(
            &format!("sum(last_over_time(perfops_requests_sent_total{{run=\"{run}\"}}[10m]))"),
            Duration::from_secs(2),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        sent[0]["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()),
        s["total"]["sent"].as_f64(),
        "{sent:?}"
    );
    for (q, field) in [(0.5, "p50"), (0.99, "p99")] {
        // 2.42 has no last_over_time of native histograms: the instant selector takes each
        // series' last sample within its 5 minutes' lookback, the same here.
        let query = format!("histogram_quantile({q}, sum(perfops_latency_seconds{{run=\"{run}\"}}))");
        let got = prom.wait_for_data(&query, Duration::from_secs(2)).unwrap_or_else(|e| panic!("{e}"));
        let got: f64 = got[0]["value"][1].as_str().and_then(|v| v.parse().ok()).expect("a value");
        let line = assert_quantile(
            &format!("Prometheus 2.42 run {field}"),
            s["total"]["latency_ms"][field].as_f64().expect("p"),
            got,
        );
        eprintln!("{line}");
    }
}

/// Receivers that are down, refuse (400), fail (503, with a Retry-After)
/// or stall: each run goes on and exits with its own verdict's code, ends
/// within the drain's bound, and says on stderr and in `summary.json`'s
/// warnings how many seconds were not delivered, where and why.
#[test]
fn a_receiver_down_refusing_failing_or_stalling_costs_the_run_nothing_and_is_said() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let down = perfops_testkit::refused_addr();
    let refusing = perfops_testkit::refusing(400, None);
    let failing = perfops_testkit::refusing(503, Some(1));
    let stalling = perfops_testkit::stalling();
    // (receiver, why the note says it was not delivered)
    let cases = [
        (format!("http://{down}/api/v1/write"), "connection refused"), // down: nothing listens
        (format!("{}/api/v1/write", refusing.url().trim_end_matches('/')), "refused: HTTP 400"), // refusing: given up at once
        (format!("{}/api/v1/write", failing.url().trim_end_matches('/')), "HTTP 503"),           // failing: retried
        (format!("{}/api/v1/write", stalling.url().trim_end_matches('/')), "timeout"), // stalling: each try times out
    ];
    // All four at once: each waits out its own drain.
    let runs: Vec<(Workdir, Running, Instant, &str, &String)> = cases
        .iter()
        .enumerate()
        .map(|(i, (url, why))| {
            let w = Workdir::new(&format!("push-rw-fault{i}"));
            let file = w.scenario("s.yaml", &scenario(&format!("fault{i}"), &demo.url, ""));
            let arg = format!("prometheus-rw={url}");
            let running = w.spawn("run", &file, &["--output", &arg], |_| {});
            (w, running, Instant::now(), *why, url)
        })
        .collect();
    for (w, running, began, why, url) in runs {
        let out: Finished = running.wait(RUN_LIMIT);
        let took = began.elapsed();
        out.assert_exit(0);
        // 4 s of load, then at most the drain's 10 s.
        assert!(took < Duration::from_secs(20), "{url}: took {took:?}\n{}", out.dump());
        let note = out
            .stderr
            .lines()
            .find(|l| l.contains("output prometheus-rw: "))
            .unwrap_or_else(|| panic!("{url}: nothing said\n{}", out.dump()));
        eprintln!("{note} [run took {took:.1?}]");
        assert!(note.contains(&format!("seconds not delivered to {url} (")), "{note}");
        assert!(note.contains(why), "{url}: {note}");
        assert!(!out.stderr.contains("panicked"), "{}", out.dump());
        let warnings = w.summary(&out)["warnings"].to_string();
        assert!(warnings.contains("seconds not delivered to"), "{url}: summary.json's warnings: {warnings}");
    }
    assert!(refusing.requests() >= 1 && failing.requests() >= 2, "refused once a request, retried on 503");
}

/// A coordinator and three agents, the scenario naming the push: the
/// coordinator pushes the merged seconds once (one `run` in the receiver,
/// the coordinator's counts), the agents nothing; the fleet's p50 and p99
/// read back match its summary.
#[test]
fn a_fleet_pushes_once_from_its_coordinator() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let _cpu = shared();
    let prom = receivers::prometheus();
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms"]);
    let w = Workdir::new("push-rw-fleet");
    let outputs = format!("outputs: [ \"prometheus-rw={}\" ]\n", prom.remote_write_url());
    let file = w.scenario("fleet.yaml", &scenario("fleet", &demo.url, &outputs));
    let (coord, agents) = w.fleet(&file, 3, TOKEN, &[]);
    let out = coord.wait(RUN_LIMIT);
    let agents: Vec<Finished> = agents.into_iter().map(|a| a.wait(RUN_LIMIT)).collect();
    out.assert_exit(0);
    for a in &agents {
        a.assert_exit(0);
        assert!(!a.stderr.contains("prometheus-rw"), "an agent pushes nothing: {}", a.stderr);
    }
    let dir = w.result_dir(&out);
    let run = run_label(&dir);
    // One run in the receiver: the coordinator's.
    let runs = values_by(&prom, "count by (run) (last_over_time(perfops_requests_sent_total[10m]))", "run");
    assert_eq!(runs.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), vec![run.as_str()], "{runs:?}");
    for line in check_against_summary(&prom, &run, &summary(&dir)) {
        eprintln!("fleet {line}");
    }
}

/// Every file of the results directory `dir`, read.
fn results_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).expect("the results directory") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).expect("a results file")));
        }
    }
    text
}

/// Auth: headers from PERFOPS_REMOTE_WRITE_HEADERS (percent-decoded) and a
/// URL's `user:password@` (basic auth) reach the receiver with the
/// protocol's own fields, and nowhere else: not stderr, not one results
/// file (the URL is shown redacted). A header with CR/LF is a usage error
/// (exit 2) that does not show its value, before anything runs.
#[test]
fn auth_headers_come_from_the_environment_and_never_reach_the_results() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    // 204 without 2.0's Written fields: taken as a 1.0 receiver, so both versions are seen.
    let receiver = perfops_testkit::refusing(204, None);
    let base = receiver.url().trim_end_matches('/').to_string();
    let url = base.replacen("http://", "http://alice:pw-s3cr3t@", 1) + "/api/v1/write";
    let w = Workdir::new("push-rw-auth");
    let file = w.scenario("s.yaml", &scenario("push-auth", &demo.url, ""));
    let arg = format!("prometheus-rw={url}");
    let out = w
        .spawn("run", &file, &["--output", &arg], |c| {
            c.env("PERFOPS_REMOTE_WRITE_HEADERS", "X-Scope-OrgID=tenant-1,X-Api-Key=key%20s3cr3t-2");
        })
        .wait(RUN_LIMIT);
    out.assert_exit(0);
    let heads = receiver.request_heads();
    assert!(heads.len() >= 2, "{heads:?}");
    let first = heads[0].to_ascii_lowercase();
    for field in [
        "x-scope-orgid: tenant-1",
        "x-api-key: key s3cr3t-2",
        // alice:pw-s3cr3t
        "authorization: basic ywxpy2u6chctcznjcjn0",
        "content-encoding: snappy",
        "content-type: application/x-protobuf;proto=io.prometheus.write.v2.request",
        "x-prometheus-remote-write-version: 2.0.0",
    ] {
        assert!(first.contains(field), "{field} not in {first}");
    }
    assert!(heads[1].contains("X-Prometheus-Remote-Write-Version: 0.1.0"), "then 1.0: {}", heads[1]);
    assert!(!out.stderr.contains("s3cr3t"), "{}", out.dump());
    let results = results_text(&w.result_dir(&out));
    assert!(!results.contains("s3cr3t"), "a secret in the results");
    assert!(results.contains("alice:<redacted>@"), "the command in meta.json, redacted");

    // CR/LF in a header's value: exit 2 before anything runs, the value not shown.
    let out = w
        .spawn("run", &file, &["--output", &arg], |c| {
            c.env("PERFOPS_REMOTE_WRITE_HEADERS", "Authorization=Bearer%20x%0D%0AEvil:%20s3cr3t");
        })
        .wait(RUN_LIMIT);
    out.assert_exit(2);
    assert!(out.stderr.contains("PERFOPS_REMOTE_WRITE_HEADERS: the value of header `Authorization`"), "{}", out.dump());
    assert!(!out.stderr.contains("s3cr3t") && !out.stderr.contains("Evil"), "{}", out.dump());
}
