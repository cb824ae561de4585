//! Issue #32, want 4: failures shown with what was expected and what came.
//! The real binary runs against a real server on loopback (the testkit's
//! Python shop, whose refusals say why): a step that gets a 422, one whose
//! JSON check fails and one whose server echoes the request's secret
//! `Authorization` back. The terminal summary, `summary.json` and the report
//! name the step, the status, expected vs found and the body's first bytes;
//! the `${env.*}` secret is nowhere in what the run printed or wrote. And a
//! failed setup says the same of its step instead of `check_failed`.

mod common;

use std::path::Path;

use common::{RUN_LIMIT, Workdir, shared};

/// The environment value sent as the bearer token: finding it anywhere is a leak.
const SECRET: &str = "sekret-env-32a7f";

const SCENARIO: &str = r#"name: failures
target: TARGET
defaults:
  headers: { Authorization: "Bearer ${env.SHOP_SECRET}" }
flows:
  order:
    steps:
      - name: create-order
        request: POST /orders
        json: { qty: "3" }
        expect: { status: 201 }
  look:
    steps:
      - name: get-order
        request: GET /orders/7
        expect: { json: { "$.status": shipped } }
  echo:
    steps:
      - name: echo
        request: GET /echo
load:
  stages: [ { rate: 30, hold: 2s } ]
"#;

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read the results directory") {
        let p = e.expect("an entry").path();
        if p.is_dir() { out.extend(files(&p)) } else { out.push(p) }
    }
    out
}

/// #32: a 422, a failed JSON check and a 5xx are each shown with their
/// step, status, expected vs found and body head, in the terminal,
/// `summary.json` and the report; the secret is in none of them.
#[test]
fn failures_say_what_was_expected_and_what_came_without_secrets() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("failures");
    let scenario = wd.scenario("failures.yaml", &SCENARIO.replace("TARGET", &shop.url(0)));
    let out = wd
        .spawn("run", &scenario, &[], |c| {
            c.env("SHOP_SECRET", SECRET);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(1);

    // The terminal: each step with its count, expected vs found and the body head.
    let said = &out.stdout;
    for line in [
        r#"create-order: 20 http_4xx, e.g. status: expected 201, found 422 (body: {"error":"qty must be a number","got":"3"})"#,
        r#"get-order: 20 check_failed, e.g. $.status: expected "shipped", found "new" (status 200) (body: {"id":7,"status":"new"})"#,
        r#"echo: 20 http_5xx, e.g. http_5xx (status 500) (body: {"error":"you sent Bearer <redacted>"})"#,
    ] {
        assert!(said.lines().any(|l| l.trim() == line), "want {line:?} in stdout:\n{said}");
    }

    // summary.json: every (step, kind) with its count and its first three samples.
    let summary = wd.summary(&out);
    let failures = summary["failures"].as_array().unwrap_or_else(|| panic!("no failures in {summary:#}"));
    let group = |step: &str| {
        failures.iter().find(|g| g["step"] == step).unwrap_or_else(|| panic!("no {step} in {failures:#?}"))
    };
    let order = group("create-order");
    assert_eq!((order["kind"].as_str(), order["count"].as_u64()), (Some("http_4xx"), Some(20)), "{order:#}");
    let samples = order["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 3, "the first three by time: {order:#}");
    assert_eq!(samples[0]["status"], 422);
    assert_eq!(samples[0]["check"], "status: expected 201, found 422");
    assert_eq!(samples[0]["body"], r#"{"error":"qty must be a number","got":"3"}"#);
    let times: Vec<f64> = samples.iter().map(|s| s["t"].as_f64().expect("t")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "first by time: {times:?}");
    assert_eq!(group("get-order")["samples"][0]["check"], r#"$.status: expected "shipped", found "new""#);
    assert_eq!(group("echo")["samples"][0]["body"], r#"{"error":"you sent Bearer <redacted>"}"#);

    // The report: a failures table with the same.
    let dir = wd.result_dir(&out);
    let report = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(report.contains("<h2>Failures</h2>"), "no failures table in the report");
    assert!(report.contains("status: expected 201, found 422"), "no expected vs found in the report");
    assert!(report.contains("qty must be a number"), "no body head in the report");

    // The secret: in nothing printed, in no file written.
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET), "the secret was printed");
    for f in files(&dir) {
        let bytes = std::fs::read(&f).expect("read a result file");
        let leaked = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
        assert!(!leaked, "the secret is in {}", f.display());
    }
}

/// #32: a failed setup says what its step expected and what came, with the
/// body's first bytes, instead of the bare kind (`check_failed`).
#[test]
fn a_failed_setup_says_what_was_expected_and_what_came() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("failed-setup");
    let yaml = r#"name: failed-setup
target: TARGET
setup:
  - name: login
    request: POST /login
    json: { user: bob, password: wrong }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  orders:
    steps:
      - { request: "GET /orders/7", headers: { Authorization: "Bearer ${token}" } }
load:
  stages: [ { rate: 1, hold: 1s } ]
"#;
    let scenario = wd.scenario("failed-setup.yaml", &yaml.replace("TARGET", &shop.url(0)));
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    let want = r#"setup step `login` failed: status: expected 200, found 401 (body: {"error":"bad password"})"#;
    assert!(out.stderr.contains(want), "want {want:?} in stderr:\n{}", out.stderr);
    assert_ne!(out.code, Some(0), "a failed setup fails the run");
}

/// #32: `run --debug` runs setup, then each flow once, and prints each
/// exchange once (request, response, what was saved, the outcome), with the
/// `${env.*}` secret and the saved token redacted; a failed exchange makes
/// it exit 1; it writes no results directory.
#[test]
fn debug_prints_each_exchange_once_with_secrets_redacted() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("debug");
    let yaml = r#"name: debug
target: TARGET
defaults:
  headers: { Authorization: "Bearer ${env.SHOP_SECRET}" }
setup:
  - name: login
    request: POST /login
    json: { user: bob, password: right }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  buy:
    steps:
      - name: create-order
        request: POST /orders
        json: { qty: 3 }
        expect: { status: 201 }
        save: { id: $.id }
      - name: get-order
        request: GET /orders/${id}
        expect: { json: { "$.status": new } }
  echo:
    weight: 5
    steps:
      - name: echo
        request: GET /echo
load:
  stages: [ { rate: 50, hold: 10s } ]
"#;
    let scenario = wd.scenario("debug.yaml", &yaml.replace("TARGET", &shop.url(0)));
    let out = wd
        .spawn("run", &scenario, &["--debug"], |c| {
            c.env("SHOP_SECRET", SECRET);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(1);
    let said = &out.stdout;
    // Each exchange once, in order: setup, then each flow once whatever its weight.
    let heads: Vec<&str> = said.lines().filter(|l| l.starts_with("== ")).collect();
    let names: Vec<String> = heads.iter().map(|l| l.split("  ").next().unwrap_or("").to_string()).collect();
    assert_eq!(
        names,
        ["== setup / login", "== buy / create-order", "== buy / get-order", "== echo / echo"],
        "stdout:\n{said}"
    );
    assert!(heads[1].ends_with("ok") && heads[2].ends_with("ok"), "{heads:?}");
    assert!(heads[3].ends_with("FAILED http_5xx"), "{heads:?}");
    for want in [
        "> POST /orders HTTP/1.1",
        r#"> {"qty":3}"#,
        "> Authorization: <redacted>",
        "< HTTP/1.1 201 Created",
        r#"< {"id":7}"#,
        "  saved id = 7",
        "  saved token = <redacted>",
        "> GET /orders/7 HTTP/1.1",
        r#"< {"error":"you sent Bearer <redacted>"}"#,
        "4 exchange(s), 1 failed (each failed step ends its flow)",
    ] {
        assert!(said.lines().any(|l| l == want), "want the line {want:?} in stdout:\n{said}");
    }
    for secret in [SECRET, "tok-from-login-5f3"] {
        assert!(!said.contains(secret) && !out.stderr.contains(secret), "{secret} was printed:\n{said}");
    }
    assert!(wd.result_dirs().is_empty(), "--debug writes no results directory");
}
