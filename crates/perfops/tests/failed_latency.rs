//! End to end, issue #11 point 1: every request that ended counts in the
//! latency at the time it took to end, failures included (a timeout its
//! timeout, a refused connection its few µs), and the successes' latency
//! stays beside it (`latency_ok_ms`, `p99(ok)`, the tables' "p99 ok").
//!
//! The server: `perfops-testkit`'s `stall_some_connections(2, 2 s)`, where
//! every other connection answers 2 s late. With `Connection: close` each
//! request opens its own connection, so about half of them stall and are
//! cut by a 100 ms timeout, and the other half are answered at once. Before
//! #11 the latency counted the fast half only: p99 well under 50 ms in a
//! stage where half the requests timed out.

mod common;

use common::{Workdir, quick, shared};
use perfops_testkit as kit;
use serde_json::Value;
use std::time::Duration;

/// An open stage of 40 arrivals, one connection each, against a server that
/// stalls every other connection past the 100 ms timeout.
const HALF_STALLED: &str = r#"name: half-stalled
target: @URL@
defaults:
  timeout: 100ms
  headers: { Connection: close }
flows:
  root: { steps: [ { request: GET / } ] }
load:
  stages: [ { rate: 20, hold: 2s } ]
slo:
  - p99 < 50ms
  - p99(ok) < 50ms
"#;

fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number at {ptr} in {v}"))
}

/// #11: a stage where half the requests time out shows them in its p99 and
/// max (and fails `p99 < 50ms`), while `p99(ok)` and `latency_ok_ms` judge
/// the fast half; every ended request is counted once in `latency_ms`.
#[test]
fn timed_out_requests_count_in_the_latency_and_ok_keeps_the_successes() {
    let _cpu = shared();
    let server = kit::stall_some_connections(2, Duration::from_secs(2));
    let wd = Workdir::new("failed-latency");
    let yaml = HALF_STALLED.replace("@URL@", server.url().trim_end_matches('/'));
    let scenario = wd.scenario("half.yaml", &yaml);
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(common::RUN_LIMIT);
    let s = wd.summary(&out);
    let ctx = format!("stdout:\n{}\nstderr:\n{}\nsummary:\n{s:#}", out.stdout, out.stderr);
    assert_eq!(out.code, Some(1), "the p99 line fails\n{ctx}");

    let stage = &s["stages"][0];
    let timeouts = num(stage, "/failures/timeout");
    let (failed, succeeded) = (num(stage, "/failed"), num(stage, "/succeeded"));
    assert!((10.0..=30.0).contains(&timeouts) && failed == timeouts, "about half of 40 time out\n{ctx}");
    // Every request that ended, once: the answered and the timed out.
    assert_eq!(num(stage, "/latency_ms/count"), succeeded + failed, "{ctx}");
    assert_eq!(num(stage, "/latency_ok_ms/count"), succeeded, "{ctx}");
    // The timeouts are the tail: at their 100 ms (from the due time), not under 50 ms.
    assert!(num(stage, "/latency_ms/p99") >= 99.0, "{ctx}");
    assert!((99.0..1000.0).contains(&num(stage, "/latency_ms/max")), "{ctx}");
    // They were sent (on their new connection): service time counts them too.
    assert_eq!(num(stage, "/service_ms/count"), succeeded + failed, "{ctx}");
    // The successes alone were fast.
    assert!(num(stage, "/latency_ok_ms/p99") < 50.0, "{ctx}");
    assert!(num(stage, "/latency_ok_ms/max") < 50.0, "{ctx}");

    let line = |slo: &str| {
        let checks = stage["slo"].as_array().unwrap_or_else(|| panic!("no SLO in the stage\n{ctx}"));
        checks.iter().find(|c| c["slo"] == slo).unwrap_or_else(|| panic!("no `{slo}`\n{ctx}")).clone()
    };
    assert_eq!(line("p99 < 50ms")["passed"], false, "{ctx}");
    assert!(num(&line("p99 < 50ms"), "/value") >= 99.0, "{ctx}");
    assert_eq!(line("p99(ok) < 50ms")["passed"], true, "{ctx}");
    assert_eq!(stage["verdict"], "fails", "{ctx}");

    // The terminal table says what it shows, and shows both.
    assert!(out.stdout.contains("p99 ok"), "{ctx}");
    assert!(out.stdout.contains("every request that ended"), "{ctx}");
}

/// #11, `quick`: against a port where nothing listens every request is
/// refused in a few µs, and each counts in the latency at that time (no
/// success to count among the successes); against the half-stalled server
/// the JSON has both figures and the table an "ok" column.
#[test]
fn quick_counts_refused_and_timed_out_requests_in_the_latency() {
    let _cpu = shared();
    let refused = format!("http://{}/", kit::refused_addr());
    let out = quick(&["-c", "1", "-n", "20", "-q", &refused]);
    assert_eq!(out.failures("connect_refused"), 20, "{}", out.dump());
    assert_eq!(out.u64("/latency_ms/count"), 20, "{}", out.dump());
    assert!(out.f64("/latency_ms/max") < 50.0, "refused at once\n{}", out.dump());
    assert_eq!(out.u64("/latency_ok_ms/count"), 0, "{}", out.dump());
    assert_eq!(out.u64("/service_ms/count"), 0, "never sent\n{}", out.dump());

    let server = kit::stall_some_connections(2, Duration::from_secs(2));
    let out = quick(&["-c", "1", "-n", "20", "-q", "--timeout", "100ms", "-H", "Connection: close", &server.url()]);
    // A closed loop on one connection at a time: strictly every other request stalls.
    assert_eq!(out.failures("timeout"), 10, "{}", out.dump());
    assert_eq!(out.u64("/latency_ms/count"), 20, "{}", out.dump());
    assert_eq!(out.u64("/latency_ok_ms/count"), 10, "{}", out.dump());
    assert!(out.f64("/latency_ms/max") >= 99.0, "{}", out.dump());
    assert!(out.f64("/latency_ok_ms/max") < 50.0, "{}", out.dump());
    assert!(out.stdout.contains("latency ok"), "{}", out.stdout);
}
