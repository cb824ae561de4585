//! End to end, issue #5: `perfops compare`. Two short real runs of the same
//! stepped load (200/s then 800/s, 2 s each) against the thread-pool demo
//! (2 workers x 5 threads, 20 ms of I/O: about 500/s) and the async demo
//! (the same I/O, no pool): the pool breaks at 800/s, async holds. Then
//! `perfops runs` lists both, `perfops compare` says async holds the higher
//! capacity with the deltas of the two `summary.json`, its JSON agrees, and
//! its HTML page draws every chart in headless Chromium.

mod common;

use std::path::{Path, PathBuf};

use common::browser::check_in_browser;
use common::{Finished, RUN_LIMIT, exclusive, shared, spawn_perfops, temp_path};
use serde_json::Value;

fn perfops(args: &[&str]) -> Finished {
    spawn_perfops(args, |_| {}).wait(RUN_LIMIT)
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The results directory of the run named `name` under `runs`.
fn run_dir(runs: &Path, name: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().ends_with(&format!("-{name}")))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// A stepped load of the demo's order listing; the SLO decides each stage.
fn scenario(dir: &Path, name: &str, target: &str) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            r#"name: {name}
target: {target}
defaults: {{ timeout: 1s }}
setup:
  - {{ request: POST /auth, json: {{ user: t }}, save: {{ token: $.token }} }}
flows:
  orders:
    steps:
      - {{ name: orders, request: GET /orders, headers: {{ Authorization: "Bearer ${{token}}" }}, expect: {{ status: 200 }} }}
load:
  stages: [ {{ rate: 200, hold: 2s }}, {{ rate: 800, hold: 2s }} ]
  max_in_flight: 2000
slo: [ p95 < 250ms, errors < 1% ]
"#
        ),
    )
    .unwrap();
    path
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn async_holds_more_than_the_thread_pool() {
    let base = temp_path("compare", "d");
    std::fs::create_dir_all(&base).unwrap();
    let runs = base.join("runs");
    let runs_s = runs.display().to_string();
    {
        // Both runs' verdicts depend on timing: nothing else runs meanwhile.
        let _cpu = exclusive();
        for (name, target) in
            [("threads", "demo:threads?workers=2&threads=5&io_wait=20ms"), ("async", "demo:async?io_wait=20ms")]
        {
            let s = scenario(&base, name, target).display().to_string();
            let run = perfops(&["run", &s, "--out", &runs_s, "-q"]);
            assert!(matches!(run.code, Some(0 | 1)), "perfops run {name} exited {:?}\n{}", run.code, run.stderr);
        }
    }
    let _cpu = shared();
    let (threads, asynch) = (run_dir(&runs, "threads"), run_dir(&runs, "async"));
    let (st, sa) = (json(&threads.join("summary.json")), json(&asynch.join("summary.json")));
    let capacity = |s: &Value| s["verdict"]["capacity_rps"].as_f64();
    // The premise: the pool (about 500/s) holds 200/s and breaks at 800/s; async holds both.
    assert_eq!(capacity(&st), Some(200.0), "threads:\n{st:#}");
    assert_eq!(capacity(&sa), Some(800.0), "async:\n{sa:#}");

    // `runs` lists both.
    let listed = perfops(&["runs", "--dir", &runs_s]);
    listed.assert_exit(0);
    assert_eq!(listed.stdout.lines().count(), 3, "{}", listed.stdout);
    for (name, cap) in [("threads", "200/s"), ("async", "800/s")] {
        assert!(
            listed.stdout.lines().any(|l| l.contains(&format!(" {name} ")) && l.contains(cap)),
            "{name} {cap}:\n{}",
            listed.stdout
        );
    }

    // The text: async has the higher capacity, and each stage's deltas are
    // those of the two summaries.
    let (t, a) = (threads.display().to_string(), asynch.display().to_string());
    let page = base.join("compare.html");
    let out = perfops(&["compare", &t, &a, "-o", &page.display().to_string()]);
    out.assert_exit(0);
    let text = &out.stdout;
    assert!(
        text.contains("capacity: B async holds 4.0x the capacity of A threads: 800/s vs 200/s"),
        "{text}\n{}",
        out.stderr
    );
    assert!(text.contains("L = p95 250.0ms, from the SLO `p95 < 250ms` of A threads"), "{text}");
    assert!(out.stderr.contains(&page.display().to_string()), "says where the page went: {}", out.stderr);

    let stage = |s: &Value, i: usize, k: &str| s["stages"][i].pointer(k).and_then(Value::as_f64);
    for (i, name) in ["200/s", "800/s"].iter().enumerate() {
        let d = stage(&sa, i, "/achieved_rate").unwrap() - stage(&st, i, "/achieved_rate").unwrap();
        let line = text
            .lines()
            .skip_while(|l| !l.starts_with(name))
            .find(|l| l.trim_start().starts_with("Δ vs A"))
            .unwrap_or_else(|| panic!("no delta line for {name}:\n{text}"));
        assert!(line.contains(&format!("{d:+.1} (")), "{name}: achieved delta {d:+.1} not in {line:?}\n{text}");
    }
    // At 800/s the pool fell short of its target, so async carried more there.
    assert!(stage(&sa, 1, "/achieved_rate").unwrap() > stage(&st, 1, "/achieved_rate").unwrap());

    // The JSON: the same comparison, deltas exactly those of the summaries.
    let out = perfops(&["compare", &t, &a, "--json", "--no-html"]);
    out.assert_exit(0);
    let c: Value = serde_json::from_str(&out.stdout).expect("--json prints JSON");
    assert_eq!(c["format"], "perfops.compare");
    assert_eq!((c["runs"][0]["name"].as_str(), c["runs"][1]["name"].as_str()), (Some("threads"), Some("async")));
    assert_eq!(c["capacity"][0]["ratio"].as_f64(), Some(4.0));
    // At the SLO's p95, async carried at least what the pool did (exactly,
    // or as a lower bound when it never got that slow).
    let at = |i: usize| c["equal_p95"]["runs"][i]["rate"].as_f64();
    let (at_t, at_a) = (at(0).expect("threads at 250 ms"), at(1).expect("async at 250 ms"));
    assert!(at_a > at_t, "async {at_a}/s vs threads {at_t}/s at p95 250 ms\n{c:#}");
    assert_eq!(c["stages"].as_array().map(Vec::len), Some(2), "{c:#}");
    for i in 0..2 {
        let cell = &c["stages"][i]["cells"][1];
        assert_eq!(cell["matched_by"], "name");
        for (field, pointer) in
            [("achieved_rate", "/achieved_rate"), ("p95_ms", "/latency_ms/p95"), ("p99_ms", "/latency_ms/p99")]
        {
            let (va, vt) = (stage(&sa, i, pointer).unwrap(), stage(&st, i, pointer).unwrap());
            let got = cell["delta"][field]["abs"].as_f64().unwrap();
            assert!(close(got, va - vt), "stage {i} {field}: {got} vs {va} - {vt}");
            let pct = cell["delta"][field]["pct"].as_f64().unwrap();
            assert!(close(pct, (va - vt) / vt * 100.0), "stage {i} {field} %: {pct}");
        }
    }

    // Bad input is exit 2, with the reason.
    let missing = base.join("nowhere").display().to_string();
    let out = perfops(&["compare", &t, &missing, "--no-html"]);
    out.assert_exit(2);
    assert!(out.stderr.contains("nowhere"), "{}", out.stderr);
    let out = perfops(&["compare", &t, &base.display().to_string(), "--no-html"]);
    out.assert_exit(2);
    assert!(out.stderr.contains("holds no results"), "{}", out.stderr);
    perfops(&["compare", &t]).assert_exit(2);

    // The page: rate, latency and failures over time, and the hockey sticks.
    check_in_browser(&page, "compare", 4);
    let _ = std::fs::remove_dir_all(&base);
}
