//! End to end: `--live` as a user meets it, in a real headless Chromium
//! driven in real time (`common::browser::drive`, the DevTools protocol on
//! a pipe). The page of a `run` against `perfops demo` updates second by
//! second, a page opened late shows the earlier seconds, and both become
//! the final report at the end; a coordinator of 3 agents serves the
//! merged seconds; `quick`'s page freezes with its figures; `perfops ctl`
//! and the control API answer as documented. A screenshot of the live page
//! goes to `target/tmp/`, and to `docs/guide/live.png` with
//! `UPDATE_SCREENSHOT=1`. Every wait is bounded; servers stop by PID.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::browser::drive;
use common::{Demo, RUN_LIMIT, Running, Workdir, free_port, shared, spawn_perfops};
use serde_json::{Value, json};

/// One exchange with the live server: status code and body.
fn ask(addr: &str, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(request.as_bytes()).expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string())
}

/// Wait until the live page answers 200 (the run started), at most 20 s.
fn wait_for_page(addr: &str, run: &mut Running) {
    let started = Instant::now();
    loop {
        if TcpStream::connect(addr).is_ok() && ask(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0 == 200 {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no live page at {addr} after 20 s");
        let _ = run;
        std::thread::sleep(Duration::from_millis(100));
    }
}

const ATTR: &str = "document.body.getAttribute";

fn seconds_at_least(n: u32) -> String {
    format!("document.body && {ATTR}('data-live-seconds') >= {n}")
}

const TWO_STAGES: &str = r#"
name: live-orders
target: @URL@
flows:
  orders:
    steps:
      - { request: GET /health, expect: { status: 200 } }
load:
  model: open
  stages:
    - { name: warm, rate: 40, hold: 4s }
    - { name: steady, rate: 80, hold: 4s }
slo:
  - p99 < 1s
"#;

/// The page of a run updates second by second; one opened late shows the
/// seconds before it; at the end both become the run's report, and the run
/// said it waited for them.
#[test]
fn the_live_page_follows_a_run_and_becomes_its_report() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-run");
    let scenario = wd.scenario("live.yaml", &TWO_STAGES.replace("@URL@", &demo.url));
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let url = format!("http://{addr}/");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("live.png");
    let got = drive(&json!([
        ["open", url],
        ["until", seconds_at_least(2), 20],
        ["eval", format!("+{ATTR}('data-live-seconds')")],
        ["wait", 2.5],
        ["eval", format!("+{ATTR}('data-live-seconds')")],
        [
            "eval",
            format!(
                "[{ATTR}('data-errors'), {ATTR}('data-error-messages'), {ATTR}('data-live-state'), +{ATTR}('data-charts-drawn'), \
                  !!document.querySelector('.chart[data-chart=\"streams\"]')]"
            )
        ],
        [
            "eval",
            "document.querySelector('#live-steps tbody th') && document.querySelector('#live-steps tbody th').textContent"
        ],
        ["shot", shot.display().to_string(), 1280, 1500],
        // A second tab, opened late: it gets the run from its first second.
        ["open", format!("http://{addr}/")],
        ["until", seconds_at_least(5), 20],
        [
            "eval",
            format!(
                "[+{ATTR}('data-live-seconds'), +{ATTR}('data-live-last-t'), perfopsReport.timeCharts[0].data[0][0]]"
            )
        ],
        // The end: the page replaces itself with the report.
        [
            "until",
            "document.querySelector('.brand') && document.querySelector('.brand').textContent === 'perfops report'",
            40
        ],
        ["eval", format!("[{ATTR}('data-errors'), +{ATTR}('data-charts-drawn'), document.title]")],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("exit {:?}\nstderr:\n{}", out.code, out.stderr);
    let (first, later) = (got[0].as_u64().unwrap(), got[1].as_u64().unwrap());
    assert!(later > first, "the open page showed {first} seconds, then {later} 2.5 s later\n{ctx}");
    assert_eq!(got[2][0], "0", "no script error on the live page: {}\n{ctx}", got[2][1]);
    assert_eq!(got[2][2], "live", "{ctx}");
    // And the watched metrics' chart, once the generator's first sample came.
    assert!(got[2][3].as_u64().unwrap() >= 4, "the four time charts drew\n{ctx}");
    assert_eq!(got[2][4], false, "a run that streams nothing shows no streams chart\n{ctx}");
    assert_eq!(got[3], "GET /health", "the steps' table names the step");
    let late = &got[4];
    assert_eq!(late[2], 0, "the late page's charts start at the run's first second: {late}");
    assert!(late[0].as_u64().unwrap() >= late[1].as_u64().unwrap(), "every second up to the last is there: {late}");
    assert_eq!(got[5][0], "0", "the final report drew without error: {}", got[5]);
    assert!(got[5][1].as_u64().unwrap() >= 4, "the final report's charts drew: {}", got[5]);
    assert!(got[5][2].as_str().unwrap().contains("perfops report"), "{}", got[5]);
    assert_eq!(out.code, Some(0), "{ctx}");
    assert!(out.stderr.contains(&format!("live page: http://{addr}/")), "the address said once\n{ctx}");
    assert!(out.stderr.contains("live page: waiting for"), "the end waits for the open pages\n{ctx}");
    // The live page is never in the results: no token, no address in meta.json's command beyond the flag.
    let dir = wd.result_dir(&out);
    assert!(dir.join("report.html").exists());
    if std::env::var_os("UPDATE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/live.png");
        std::fs::copy(&shot, docs).expect("docs/guide/live.png");
    }
}

/// A stage's verdict fills in once its responses are in, before the run
/// ends: with a 1 s timeout, warm (0-3 s) is judged by its fifth second at
/// the latest, while steady still runs; marked provisional until the end's
/// verdicts replace it.
#[test]
fn a_stages_verdict_shows_before_the_run_ends() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-verdicts");
    let text = TWO_STAGES
        .replace("@URL@", &demo.url)
        .replace("rate: 40, hold: 4s", "rate: 20, hold: 3s")
        .replace("rate: 80, hold: 4s", "rate: 20, hold: 10s")
        .replace("flows:", "defaults: { timeout: 1s }\nflows:");
    let scenario = wd.scenario("live.yaml", &text);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let cells = "Array.prototype.map.call(document.querySelectorAll('#live-stages tbody .live-v'), function (c) { return c.textContent; })";
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        ["until", format!("document.body && {ATTR}('data-live-verdicts') >= 1"), 30],
        ["eval", format!("[{cells}, +{ATTR}('data-live-last-t'), {ATTR}('data-live-state'), {ATTR}('data-errors')]")],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("exit {:?}\nstderr:\n{}", out.code, out.stderr);
    let v = &got[0];
    assert_eq!(v[0][0], "holds (provisional)", "warm's verdict, before the end: {v}\n{ctx}");
    assert_eq!(v[0][1], "…", "steady is not judged yet: {v}\n{ctx}");
    assert!(v[1].as_u64().unwrap() <= 6, "warm was judged by its end + the timeout (+1 s): {v}\n{ctx}");
    assert_eq!(v[2], "live", "the run still went: {v}\n{ctx}");
    assert_eq!(v[3], "0", "no script error: {v}");
    assert_eq!(out.code, Some(0), "{ctx}");
}

/// Failing exchanges show on the page while the run goes, as the report
/// shows them: a collapsed `<details>` per exchange, text only, the first
/// few of each step and kind (the demo's `/orders` without a token: 401).
#[test]
fn failing_exchanges_show_before_the_run_ends() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-failing");
    let text = TWO_STAGES
        .replace("@URL@", &demo.url)
        .replace("GET /health", "GET /orders")
        .replace("rate: 40, hold: 4s", "rate: 20, hold: 3s")
        .replace("rate: 80, hold: 4s", "rate: 20, hold: 6s");
    let scenario = wd.scenario("live.yaml", &text);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        ["until", format!("document.body && {ATTR}('data-live-failing') >= 1 && {ATTR}('data-live-seconds') >= 3"), 30],
        [
            "eval",
            format!(
                "var d = document.querySelectorAll('#live-failing details.exchange'); \
                 [d.length, d[0].open, d[0].querySelector('summary').textContent, d[0].textContent, \
                  {ATTR}('data-live-state'), {ATTR}('data-errors'), document.querySelectorAll('#live-failing script, #live-failing a').length]"
            )
        ],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("exit {:?}\nstderr:\n{}", out.code, out.stderr);
    let v = &got[0];
    let n = v[0].as_u64().unwrap();
    // The first few of the one step and kind (3 at most), not every one of 20/s.
    assert!((1..=3).contains(&n), "the first few, not every failure: {v}\n{ctx}");
    assert_eq!(v[1], false, "collapsed: {v}");
    let summary = v[2].as_str().unwrap();
    assert!(summary.starts_with("GET /orders · http_4xx · t=") && summary.ends_with("status 401"), "{v}");
    assert!(v[3].as_str().unwrap().contains("GET /orders"), "the request line: {v}");
    assert_eq!(v[4], "live", "before the run ended: {v}\n{ctx}");
    assert_eq!(v[5], "0", "no script error: {v}");
    assert_eq!(v[6], 0, "text only: {v}");
    assert!(out.code.is_some(), "the run ended\n{ctx}");
}

/// Streamed answers get their chart on the live page once a second carries
/// their figures, after the latency chart as in the report, and it draws
/// before the run ends: a `stream:` step against the aiohttp-sse server,
/// 10 streams a second of 5 events 20 ms apart, for 5 s. (A run that
/// streams nothing shows no such chart: the first test.)
#[test]
fn streamed_answers_chart_before_the_run_ends() {
    let _cpu = shared();
    let sse = perfops_testkit::python::sse();
    let wd = Workdir::new("live-streams");
    let text = format!(
        "name: live-streams\ntarget: http://{}\nflows:\n  events:\n    steps:\n      - {{ name: events, request: GET /events?n=5&every=20, stream: true }}\nload:\n  stages: [ {{ rate: 10, hold: 5s }} ]\n",
        sse.addr()
    );
    let scenario = wd.scenario("live.yaml", &text);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let chart = "document.querySelector('.chart[data-chart=\"streams\"]')";
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        [
            "until",
            format!(
                "document.body && {chart} && {chart}.hasAttribute('data-drawn') && {ATTR}('data-live-seconds') >= 2"
            ),
            30
        ],
        [
            "eval",
            format!(
                "var c = {chart}, u = perfopsReport.timeCharts.filter(function (u) {{ return u.root.parentNode === c; }})[0]; \
                 [+c.getAttribute('data-series-ink'), document.getElementById('box-streams').previousElementSibling.id, \
                  u.series.map(function (s) {{ return s.label; }}), u.data[1].filter(function (v) {{ return v != null; }}).length, \
                  {ATTR}('data-live-state'), {ATTR}('data-errors')]"
            )
        ],
        // Fed every second after: more of its points two seconds later.
        ["wait", 2.0],
        [
            "eval",
            format!(
                "var c = {chart}, u = perfopsReport.timeCharts.filter(function (u) {{ return u.root.parentNode === c; }})[0]; \
                 u.data[1].filter(function (v) {{ return v != null; }}).length"
            )
        ],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("exit {:?}\nstderr:\n{}", out.code, out.stderr);
    let v = &got[0];
    assert!(got[1].as_u64() > v[3].as_u64(), "fed as seconds come: {} then {}", v[3], got[1]);
    assert!(v[0].as_u64().unwrap() > 0, "the streams chart has ink: {v}\n{ctx}");
    assert_eq!(v[1], "box-latency", "after the latency chart: {v}");
    assert_eq!(v[2], json!(["time", "first event p95", "ttft p95", "itl p99"]), "{v}");
    assert!(v[3].as_u64().unwrap() >= 2, "drawn once two seconds carried figures: {v}");
    assert_eq!(v[4], "live", "before the run ended: {v}\n{ctx}");
    assert_eq!(v[5], "0", "no script error: {v}");
    assert_eq!(out.code, Some(0), "{ctx}");
}

/// Watched metrics reach the page with the second they were read in, on
/// the run's time axis: the demo's `/metrics` (`demo_workers_busy`) is a
/// choice of the watched chart, which draws before the run ends.
#[test]
fn watched_metrics_show_before_the_run_ends() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-watch");
    let text = TWO_STAGES
        .replace("@URL@", &demo.url)
        .replace("rate: 40, hold: 4s", "rate: 20, hold: 3s")
        .replace("rate: 80, hold: 4s", "rate: 20, hold: 6s")
        .replace("slo:", &format!("watch: {{ prometheus: [ \"{}/metrics\" ], every: 1s }}\nslo:", demo.url));
    let scenario = wd.scenario("live.yaml", &text);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let names = "Array.prototype.map.call(document.querySelectorAll('#watch-select option'), function (o) { return o.textContent; })";
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        [
            "until",
            format!("document.body && {names}.indexOf('demo_workers_busy') >= 0 && {ATTR}('data-live-seconds') >= 3"),
            30
        ],
        [
            "eval",
            format!(
                "var c = document.querySelector('.chart[data-chart=\"watch\"]'); \
                 [c.getAttribute('data-drawn'), +c.getAttribute('data-series-ink'), {names}.length, \
                  {ATTR}('data-live-state'), {ATTR}('data-errors'), +{ATTR}('data-live-watched')]"
            )
        ],
        // Pick the demo's metric: its points are on the run's time axis.
        [
            "eval",
            "var s = document.getElementById('watch-select'); \
             s.value = Array.prototype.filter.call(s.options, function (o) { return o.textContent === 'demo_workers_busy'; })[0].value; \
             s.dispatchEvent(new Event('change')); \
             var u = perfopsReport.timeCharts[perfopsReport.timeCharts.length - 1]; [u.data[0].length, u.data[0][0] >= 0 && u.data[0][0] < 5]"
        ],
        // uPlot sets its scales after the script's turn.
        ["wait", 0.3],
        ["eval", "perfopsReport.timeCharts[perfopsReport.timeCharts.length - 1].scales.x.max"],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("exit {:?}\nstderr:\n{}", out.code, out.stderr);
    let v = &got[0];
    assert!(!v[0].is_null(), "the watched chart drew: {v}\n{ctx}");
    assert!(v[1].as_u64().unwrap() > 0, "with ink: {v}");
    assert!(v[2].as_u64().unwrap() > 1, "the generator's and the demo's metrics to pick from: {v}");
    assert_eq!(v[3], "live", "before the run ended: {v}\n{ctx}");
    assert_eq!(v[4], "0", "no script error: {v}");
    let picked = &got[1];
    assert!(picked[0].as_u64().unwrap() >= 2, "the demo's samples so far: {picked}");
    assert_eq!(picked[1], true, "on the run's clock, from its start: {picked}");
    assert!(got[2].as_f64().unwrap() >= 9.0, "the axis is the run's planned 9 s: {}", got[2]);
    assert_eq!(out.code, Some(0), "{ctx}");
}

/// `quick --live`: the page freezes with its final figures (no results
/// directory, no report); its Stop button reaches the control API and
/// shows the answer. `perfops ctl` and the control API meanwhile: the
/// run takes no control until the session hands the output its steering
/// (409, exit 1), a bad action is the user's (exit 2), and nothing
/// listening is exit 3; unknown routes are 404, a bad body 400.
#[test]
fn quick_live_freezes_and_ctl_answers_as_documented() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let addr = format!("127.0.0.1:{}", free_port());
    let target = format!("{}/health", demo.url);
    let mut run = spawn_perfops(&["quick", "-r", "30", "-d", "5s", &format!("--live={addr}"), &target], |_| {});
    wait_for_page(&addr, &mut run);
    let ctl = |args: &[&str]| spawn_perfops(&[&["ctl"][..], args].concat(), |_| {}).wait(RUN_LIMIT);
    let refused = ctl(&[&addr, "stop"]);
    // When the session hands the live output the run's Steer (the control
    // part of this work), this is exit 0 and `stop at t=...`.
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(refused.stderr.contains("refused by the run: this run takes no control"), "{}", refused.stderr);
    let bad = ctl(&[&addr, "rate", "zero"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("rate needs a number above 0, not `zero`"), "{}", bad.stderr);
    let nobody = ctl(&[&format!("127.0.0.1:{}", free_port()), "hold"]);
    assert_eq!(nobody.code, Some(3), "{}", nobody.stderr);
    assert!(nobody.stderr.contains("cannot reach a live page at 127.0.0.1:"), "{}", nobody.stderr);
    let host = "Host: 127.0.0.1\r\n";
    assert_eq!(ask(&addr, &format!("GET /nothing HTTP/1.1\r\n{host}\r\n")).0, 404);
    assert_eq!(ask(&addr, &format!("POST /control HTTP/1.1\r\n{host}Content-Length: 5\r\n\r\npause")).0, 400);
    assert_eq!(ask(&addr, &format!("GET /report HTTP/1.1\r\n{host}\r\n")).0, 404, "quick has no report");

    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        ["until", format!("document.body && {ATTR}('data-live-state') === 'live'"), 20],
        // The page's Stop button goes to POST /control, and says the run's answer.
        ["eval", "document.querySelector('#live-controls button[data-action=stop]').click(), true"],
        ["until", "document.getElementById('live-answer').textContent.indexOf('takes no control') >= 0", 10],
        ["eval", "document.getElementById('live-answer').textContent"],
        ["until", format!("{ATTR}('data-live-state') === 'frozen'"), 30],
        [
            "eval",
            format!(
                "[+{ATTR}('data-live-seconds'), {ATTR}('data-errors'), document.getElementById('live-badge').textContent]"
            )
        ],
    ]));
    let out = run.wait(RUN_LIMIT);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(got[1], "stop: this run takes no control", "the button's answer, as the page shows it");
    assert!(got[2][0].as_u64().unwrap() >= 5, "the frozen page has the whole run: {}", got[2]);
    assert_eq!(got[2][1], "0", "{}", got[2]);
    assert_eq!(got[2][2], "OVER");
}

const LONG_STAGE: &str = r#"
name: live-steered
target: @URL@
flows:
  orders:
    steps:
      - { request: GET /health, expect: { status: 200 } }
load:
  model: open
  stages:
    - { name: steady, rate: 20, hold: 30s }
slo:
  - p99 < 1s
"#;

/// The page's buttons steer a real run: its rate field and Set re-rate the
/// stage, its Stop ends the run long before its 30 s; each answer is shown
/// on the page, and the results record both, by the page, at their seconds
/// (events.jsonl, the seconds' targets, a verdict changed by hand, exit 1).
#[test]
fn the_pages_buttons_re_rate_and_stop_a_run_and_the_results_record_it() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-steered");
    let scenario = wd.scenario("live.yaml", &LONG_STAGE.replace("@URL@", &demo.url));
    let addr = format!("127.0.0.1:{}", free_port());
    let mut run = wd.spawn("run", &scenario, &[&format!("--live={addr}")], |_| {});
    wait_for_page(&addr, &mut run);
    let started = Instant::now();
    let answer = "document.getElementById('live-answer').textContent";
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        ["until", seconds_at_least(1), 20],
        [
            "eval",
            "document.getElementById('live-rate').value = '60', document.querySelector('#live-controls button[data-action=rate]').click(), true"
        ],
        ["until", format!("{answer}.indexOf('rate 60 at t=') === 0"), 10],
        ["eval", answer],
        // A few seconds at the new rate, then Stop.
        ["until", seconds_at_least(5), 20],
        ["eval", "document.querySelector('#live-controls button[data-action=stop]').click(), true"],
        ["until", format!("{answer}.indexOf('stop at t=') === 0"), 10],
        ["eval", answer],
        [
            "until",
            "document.querySelector('.brand') && document.querySelector('.brand').textContent === 'perfops report'",
            40
        ],
    ]));
    let out = run.wait(RUN_LIMIT);
    let ctx = format!("page said {got:?}\nexit {:?}\nstderr:\n{}", out.code, out.stderr);
    assert!(started.elapsed() < Duration::from_secs(25), "stopped by hand, not after its 30 s\n{ctx}");
    // Changed by hand: judged by nobody, exit 1.
    assert_eq!(out.code, Some(1), "{ctx}");
    assert!(out.stdout.contains("stopped by hand at t="), "the headline says the stop\n{ctx}\n{}", out.stdout);
    let at = |said: &Value| -> f64 {
        let said = said.as_str().unwrap_or_default();
        said.split("at t=").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(-1.0)
    };
    let (rated_at, stopped_at) = (at(&got[1]), at(&got[3]));
    let dir = wd.result_dir(&out);
    let events: Vec<Value> = std::fs::read_to_string(dir.join("events.jsonl"))
        .expect("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let said: Vec<(String, Option<f64>, String, f64)> = events
        .iter()
        .map(|e| {
            let f = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (f("action"), e["value"].as_f64(), f("by"), e["t"].as_f64().unwrap_or(-1.0))
        })
        .collect();
    assert_eq!(
        said,
        [("rate".into(), Some(60.0), "page".into(), rated_at), ("stop".into(), None, "page".into(), stopped_at)],
        "{ctx}"
    );
    // The seconds after the rate's instant were asked 60 a second, those before 20.
    let series = std::fs::read_to_string(dir.join("series.jsonl")).expect("series.jsonl");
    for line in series.lines().map(|l| serde_json::from_str::<Value>(l).expect("a JSON line")) {
        let (t, target) = (line["t"].as_f64().unwrap_or(-1.0), line["target_rate"].as_f64());
        match target {
            Some(target) if t + 1.0 <= rated_at => assert_eq!(target, 20.0, "second {t}\n{ctx}"),
            Some(target) if t >= rated_at && t + 1.0 <= stopped_at => assert_eq!(target, 60.0, "second {t}\n{ctx}"),
            _ => {}
        }
    }
}

/// A busy address is a usage error (exit 2) before any load.
#[test]
fn a_busy_live_address_is_a_usage_error() {
    let _cpu = shared();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out =
        spawn_perfops(&["quick", "-n", "5", &format!("--live={addr}"), "http://127.0.0.1:9/"], |_| {}).wait(RUN_LIMIT);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("--live {addr}: cannot listen")), "{}", out.stderr);
}

const FLEET: &str = r#"
name: live-fleet
target: @URL@
flows:
  health:
    steps:
      - { request: GET /health }
load:
  model: open
  stages:
    - { rate: 150, hold: 6s }
"#;

/// A coordinator of 3 agents serves its live page with the merged seconds:
/// the whole fleet's 150/s, not one agent's 50/s.
#[test]
fn a_coordinator_of_three_agents_serves_the_merged_seconds() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("live-fleet");
    let scenario = wd.scenario("fleet.yaml", &FLEET.replace("@URL@", &demo.url));
    let addr = format!("127.0.0.1:{}", free_port());
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let live = format!("--live={addr}");
    let (mut coord, agents) = wd.fleet(&scenario, 3, TOKEN, &[&live]);
    wait_for_page(&addr, &mut coord);
    let got = drive(&json!([
        ["open", format!("http://{addr}/")],
        ["until", seconds_at_least(4), 30],
        // The rate chart's achieved series, whole seconds in the stage.
        ["eval", "perfopsReport.timeCharts[0].data[2]"],
        ["eval", format!("{ATTR}('data-errors')")],
    ]));
    let out = coord.wait(RUN_LIMIT);
    for a in agents {
        let a = a.wait(RUN_LIMIT);
        assert_eq!(a.code, Some(0), "agent: {}", a.stderr);
    }
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let achieved: Vec<f64> = got[0].as_array().unwrap().iter().filter_map(Value::as_f64).collect();
    // Past the first second (partial): every second is the fleet's whole rate.
    let whole: Vec<f64> = achieved.iter().copied().skip(1).take(3).collect();
    assert!(
        !whole.is_empty() && whole.iter().all(|r| (r - 150.0).abs() <= 15.0),
        "merged seconds at 150/s: {achieved:?}"
    );
    assert_eq!(got[1], "0");
}
