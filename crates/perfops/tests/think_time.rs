//! The rate rule on flows with think time, end to end (#32): the real binary
//! against the demo's thread pool on loopback, with a paused multi-step flow
//! (a login that saves a token, three order lists, `pause: 300ms` after the
//! login and after the second list).
//!
//! The pool is 1 worker x 4 threads with 40 ms of I/O per `GET /orders`: 100
//! requests/s, and a flow holds a thread for 3 x 40 ms (the login costs
//! microseconds; a pause holds no thread: the connection waits in the
//! poller). Theory: 4 / 0.120 s = 33.3 flows/s.
//!
//! Before #32 the achieved rate counted flows whose last step was answered,
//! a flow's length (~0.7 s) after its arrival: a 10/s warm-up read 88% and
//! failed, and `limit` on this flow walked down to "no rate held, down to
//! 0.6/s" with no error at all.

mod common;

use std::time::Duration;

use common::{Workdir, exclusive};
use serde_json::Value;

/// 1 worker x 4 threads, 40 ms per order list.
const TARGET: &str = "demo:threads?workers=1&threads=4&io_wait=40ms";
/// Flows per second the pool can serve: 4 threads / (3 lists x 40 ms).
const THEORY: f64 = 4.0 / (3.0 * 0.040);

const FLOW: &str = r#"
flows:
  shop:
    steps:
      - { name: login, request: POST /auth, json: { user: "u-${seq}" }, save: { token: $.token }, pause: 300ms }
      - { name: me, request: GET /orders, headers: { Authorization: "Bearer ${token}" }, expect: { status: 200 } }
      - name: products
        request: GET /orders
        headers: { Authorization: "Bearer ${token}" }
        expect: { status: 200 }
        pause: 300ms
      - { name: order, request: GET /orders, headers: { Authorization: "Bearer ${token}" }, expect: { status: 200 } }
"#;

fn scenario(wd: &Workdir, name: &str, load: &str) -> std::path::PathBuf {
    wd.scenario("scenario.yaml", &format!("name: {name}\ntarget: {TARGET}\n{FLOW}load:\n{load}"))
}

fn stages(summary: &Value) -> Vec<(String, String, f64, String)> {
    summary["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| {
            let share = s["achieved_rate"].as_f64().unwrap_or(0.0) / s["target_rate"].as_f64().unwrap_or(f64::NAN);
            let reasons = s["reasons"].as_array().map(|r| format!("{r:?}")).unwrap_or_default();
            (
                s["name"].as_str().unwrap_or("").to_string(),
                s["verdict"].as_str().unwrap_or("").to_string(),
                share,
                reasons,
            )
        })
        .collect()
}

/// A short warm-up, a ramp and holds at rates from 15% to 75% of the pool's
/// capacity: every stage holds, though every flow ends in a later second
/// than its arrival (and the last stage's in the drain).
#[test]
fn a_paused_flow_below_capacity_holds_every_stage() {
    let _cpu = exclusive();
    let wd = Workdir::new("think-time");
    let load = "  stages:\n    - { name: warm-up, rate: 5, hold: 2s }\n    - { name: ramp, ramp_to: 15, over: 3s }\n    \
                - { name: hold 15, rate: 15, hold: 2s }\n    - { name: hold 25, rate: 25, hold: 3s }\n";
    let path = scenario(&wd, "think-time", load);
    let f = wd.spawn("run", &path, &[], |_| {}).wait(Duration::from_secs(40));
    let summary = wd.summary(&f);
    let judged = stages(&summary);
    assert_eq!(judged.len(), 4, "{summary:#}");
    for (name, verdict, share, reasons) in &judged {
        assert_eq!(verdict, "holds", "{name}: achieved {:.1}% of target, {reasons}\n{}", share * 100.0, f.stderr);
    }
    assert_eq!(summary["verdict"]["result"], "passed", "{}", summary["verdict"]);
    f.assert_exit(0);
}

/// #32's regression: with the same flow, a rate 1.5x what the pool can serve
/// still fails on rate (its backlog grows; the later steps' pauses do not
/// hide it).
#[test]
fn a_paused_flow_past_capacity_still_fails_on_rate() {
    let _cpu = exclusive();
    let wd = Workdir::new("think-time-over");
    let over = (1.5 * THEORY).round();
    let load = format!(
        "  stages:\n    - {{ name: warm-up, rate: 10, hold: 2s }}\n    - {{ name: over, rate: {over}, hold: 3s }}\n"
    );
    let path = scenario(&wd, "think-time-over", &load);
    let f = wd.spawn("run", &path, &[], |_| {}).wait(Duration::from_secs(40));
    let summary = wd.summary(&f);
    let judged = stages(&summary);
    assert_eq!(judged[0].1, "holds", "{judged:?}\n{}", f.stderr);
    let (name, verdict, share, reasons) = &judged[1];
    assert_eq!(verdict, "fails", "{name} at {over}/s: {:.1}% of target, {reasons}\n{}", share * 100.0, f.stderr);
    assert!(reasons.contains("achieved"), "it fails on rate: {reasons}");
    f.assert_exit(1);
}

/// `limit` on the paused flow finds the capacity theory gives: within the
/// search's 5% precision, and a further 10% below for a debug build sharing
/// the machine's cores with the demo (judged as a ratio, not a time). Above
/// theory, 5% more: a 3 s hold 5% past the pool builds a backlog of about
/// five flows, which the rule's allowance for the first requests' latency
/// may absorb (measured: 35/s held, 36.2/s and 37.5/s failed on rate; with
/// 5 s holds on a pool of 8 the search found 0.975 of theory).
#[test]
fn limit_on_a_paused_flow_finds_the_pool_capacity() {
    let _cpu = exclusive();
    let wd = Workdir::new("think-time-limit");
    let path = scenario(&wd, "think-time-limit", "  stages: [ { rate: 20, hold: 3s } ]\n");
    let f = wd.spawn("limit", &path, &["--hold", "3s", "--cooldown", "5s"], |_| {}).wait(Duration::from_secs(90));
    let summary = wd.summary(&f);
    let capacity = summary["limit"]["capacity_rps"].as_f64().unwrap_or_else(|| panic!("{summary:#}\n{}", f.stderr));
    let ratio = capacity / THEORY;
    assert!(
        (0.85..=1.10).contains(&ratio),
        "capacity {capacity}/s is {ratio:.3} of the {THEORY:.1}/s theory gives\n{}",
        f.stderr
    );
    f.assert_exit(0);
}
