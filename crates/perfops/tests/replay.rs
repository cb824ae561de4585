//! The replay model end to end: the real binary replays a recording (a
//! generated file with a burst) against a demo target the test starts on a
//! free loopback port. The demo's own `/metrics` counters are the witness of
//! what was sent; the results' series of what each second was asked for.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Demo, Finished, Workdir, shared, spawn_perfops};
use serde_json::Value;

/// A 3 s recording: 20 order lists in second 0, a burst of 200 arrivals in
/// second 1 (4 of them logins, each with its own user), 20 in second 2. None
/// is due within a few ms of a second's start: an arrival may go out up to
/// 100 µs early (gathered with the one before it), into the second before.
fn recording() -> String {
    let mut lines = vec!["# perfops replay v1".to_string(), "offset_ms,flow,user".to_string()];
    lines.extend((0..20).map(|i| format!("{},orders,", i * 50)));
    lines.extend((0..200).map(|i| {
        let flow = if i % 50 == 0 { "login" } else { "orders" };
        format!("{},{flow},user-{i}", 1010 + i * 2)
    }));
    lines.extend((0..20).map(|i| format!("{},orders,", 2010 + i * 50)));
    lines.join("\n") + "\n"
}

/// The scenario of [`recording`] against `url`: a login per recorded login
/// (its user the recording's), order lists with setup's token.
fn scenario(w: &Workdir, url: &str, load: &str) -> PathBuf {
    scenario_of(w, url, load, &recording())
}

/// The scenario of [`scenario`] with the recording `rec`.
fn scenario_of(w: &Workdir, url: &str, load: &str, rec: &str) -> PathBuf {
    std::fs::write(w.path.join("rec.csv"), rec).expect("the recording");
    let yaml = format!(
        r#"name: replay
target: {url}
defaults: {{ timeout: 2s }}
setup:
  - {{ name: login, request: POST /auth, json: {{ user: load-test }}, save: {{ token: $.token }} }}
flows:
  login:
    steps:
      - {{ name: auth, request: POST /auth, json: {{ user: "${{replay.user}}" }}, expect: {{ status: 200 }} }}
  orders:
    weight: 1000
    steps:
      - {{ name: orders, request: GET /orders, headers: {{ Authorization: "Bearer ${{token}}" }}, expect: {{ status: 200 }} }}
load: {load}
"#
    );
    w.scenario("replay.yaml", &yaml)
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each second of `series.jsonl` that was asked for something: (target, arrivals started).
fn seconds(dir: &Path) -> Vec<(f64, u64)> {
    std::fs::read_to_string(dir.join("series.jsonl"))
        .expect("series.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a series line"))
        .filter(|s| s["target_rate"].as_f64().is_some_and(|t| t > 0.0))
        .map(|s| (s["target_rate"].as_f64().unwrap(), s["iterations"].as_u64().unwrap()))
        .collect()
}

fn run(w: &Workdir, scenario: &Path, out: &str, extra: &[&str]) -> Finished {
    let out = w.path.join(out).display().to_string();
    let mut args = vec!["run", scenario.to_str().unwrap(), "--out", &out, "-q", "--workers", "1"];
    args.extend_from_slice(extra);
    spawn_perfops(&args, |_| {}).wait(Duration::from_secs(60))
}

/// The one results directory under `base`.
fn only_dir(base: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> =
        std::fs::read_dir(base).map(|d| d.map(|e| e.expect("entry").path()).collect()).unwrap_or_default();
    assert_eq!(dirs.len(), 1, "{}: {dirs:?}", base.display());
    dirs[0].clone()
}

/// The recording is sent as recorded: each second's target is its count (the burst second
/// 200), each arrival runs its recorded flow (4 logins, whatever the weights say) with its
/// recorded values, and the demo counted exactly the recording. At `speed: 2` the same
/// arrivals take half the time.
#[test]
fn a_replay_sends_the_recording_at_its_times_and_speed() {
    let _cpu = shared();
    let w = Workdir::new("replay");
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms", "--cpu-work", "0s"]);
    let scenario = scenario(&w, &demo.url, "{ model: replay, file: rec.csv }");

    let f = run(&w, &scenario, "runs-1", &[]);
    f.assert_exit(0);
    let dir = only_dir(&w.path.join("runs-1"));
    assert_eq!(seconds(&dir), [(20.0, 20), (200.0, 200), (20.0, 20)], "{}", f.stderr);
    // The recording's 4 logins (and setup's one), not the 1:1000 of the weights.
    assert_eq!(demo.answered("/auth"), 1 + 4);
    assert_eq!(demo.answered("/orders"), 236);
    let s = json(&dir.join("summary.json"));
    assert_eq!(s["total"]["sent"], 240);
    assert_eq!(s["total"]["dropped"], 0);
    assert_eq!(s["stages"][0]["name"], "replay");
    assert_eq!(s["stages"][0]["target_rate"], 80.0, "the recording's 240 arrivals over its 3 s");

    // Twice as fast: the 3 s of the recording in 1.5 s, so in two seconds of the series.
    let f = run(&w, &scenario, "runs-2", &["--set", "load.speed=2"]);
    f.assert_exit(0);
    let dir = only_dir(&w.path.join("runs-2"));
    assert_eq!(seconds(&dir), [(220.0, 220), (20.0, 20)], "{}", f.stderr);
    assert_eq!(demo.answered("/orders"), 2 * 236);
    let s = json(&dir.join("summary.json"));
    assert!(s["elapsed_s"].as_f64().unwrap() < 2.5, "{s:#}");

    // A cap on the requests in flight drops arrivals of the burst, counted as in the open model.
    run(&w, &scenario, "runs-3", &["--set", "load.max_in_flight=2"]);
    let s = json(&only_dir(&w.path.join("runs-3")).join("summary.json"));
    let dropped = s["total"]["dropped"].as_u64().unwrap();
    assert!(dropped > 0 && s["total"]["sent"].as_u64().unwrap() + dropped == 240, "{s:#}");
}

/// `--shard 0/2` and `1/2` at one instant send the recording between them, each arrival once
/// (k mod 2), and their merge is judged as the recording: its seconds' targets are the
/// recording's counts.
#[test]
fn two_shards_send_exactly_the_recording() {
    let _cpu = shared();
    let w = Workdir::new("replay-shards");
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms", "--cpu-work", "0s"]);
    let scenario = scenario(&w, &demo.url, "{ model: replay, file: rec.csv, stage_every: 1s }");
    let values = w.path.join("values.json");
    spawn_perfops(&["setup", scenario.to_str().unwrap(), "--out", values.to_str().unwrap()], |_| {})
        .wait(Duration::from_secs(30))
        .assert_exit(0);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970") + Duration::from_millis(1500);
    let start = format!("{:.3}", t.as_secs_f64());
    let running: Vec<_> = (0..2)
        .map(|i| {
            let (shard, out) = (format!("{i}/2"), w.path.join(format!("runs-{i}")).display().to_string());
            let args = [
                "run",
                scenario.to_str().unwrap(),
                "--out",
                &out,
                "-q",
                "--workers",
                "1",
                "--shard",
                &shard,
                "--start-at",
                &start,
                "--setup-values",
                values.to_str().unwrap(),
            ];
            spawn_perfops(&args, |_| {})
        })
        .collect();
    let mut dirs = Vec::new();
    for (i, r) in running.into_iter().enumerate() {
        let f = r.wait(Duration::from_secs(60));
        f.assert_exit(0);
        let dir = only_dir(&w.path.join(format!("runs-{i}")));
        // Each shard is asked for half of each second, and sends its half of the recording.
        assert_eq!(seconds(&dir), [(10.0, 10), (100.0, 100), (10.0, 10)], "shard {i}: {}", f.stderr);
        dirs.push(dir);
    }
    assert_eq!(demo.answered("/auth"), 1 + 4, "setup once, and the recording's 4 logins");
    assert_eq!(demo.answered("/orders"), 236);

    let merged = w.path.join("merged");
    let args = ["merge", dirs[0].to_str().unwrap(), dirs[1].to_str().unwrap(), "--out", merged.to_str().unwrap()];
    let f = spawn_perfops(&args, |_| {}).wait(Duration::from_secs(30));
    f.assert_exit(0);
    assert_eq!(seconds(&merged), [(20.0, 20), (200.0, 200), (20.0, 20)]);
    let s = json(&merged.join("summary.json"));
    assert_eq!(s["total"]["sent"], 240);
    let stages: Vec<(&str, f64)> = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| (st["name"].as_str().unwrap(), st["target_rate"].as_f64().unwrap()))
        .collect();
    assert_eq!(stages, [("replay 0-1s", 20.0), ("replay 1-2s", 200.0), ("replay 2-3s", 20.0)], "{s:#}");
}

/// A 3 s recording of 300 arrivals (50, 200, 50 a second) whose 5 logins are
/// arrivals 7, 20, 101, 150 and 233: 3 odd, 2 even, so that two agents that
/// both sent shard 0's half (or both shard 1's) would show 4 (or 6) logins,
/// not 5, even where the total looks right.
fn fleet_recording() -> String {
    let mut offsets: Vec<u32> = (0..50).map(|i| 10 + i * 19).collect();
    offsets.extend((0..200).map(|i| 1010 + i * 4));
    offsets.extend((0..50).map(|i| 2010 + i * 19));
    let mut lines = vec!["# perfops replay v1".to_string(), "offset_ms,flow,user".to_string()];
    lines.extend(offsets.iter().enumerate().map(|(k, ms)| match k {
        7 | 20 | 101 | 150 | 233 => format!("{ms},login,user-{k}"),
        _ => format!("{ms},orders,"),
    }));
    lines.join("\n") + "\n"
}

/// A coordinator with 2 agents replays a recording: the agents get the
/// recording in their assignment (their working directory has none of it),
/// each sends its shard (arrival k to agent k mod 2), and the demo's own
/// counters see each recorded request once: 5 logins with their users, 295
/// order lists; the run's seconds are asked for and sent as recorded.
#[test]
fn a_coordinator_s_agents_send_the_recording_each_arrival_once() {
    let _cpu = shared();
    let w = Workdir::new("replay-fleet");
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms", "--cpu-work", "0s"]);
    let scenario = scenario_of(&w, &demo.url, "{ model: replay, file: rec.csv }", &fleet_recording());
    let (coordinator, agents) = w.fleet(&scenario, 2, "5f0c2a9e7d41b3866e1d0c9a2b7f4e35", &[]);
    let f = coordinator.wait(Duration::from_secs(90));
    for a in agents {
        a.wait(Duration::from_secs(30)).assert_exit(0);
    }
    f.assert_exit(0);
    let dir = w.result_dir(&f);
    assert_eq!(seconds(&dir), [(50.0, 50), (200.0, 200), (50.0, 50)], "{}", f.stderr);
    assert_eq!(demo.answered("/auth"), 1 + 5, "setup once, and the recording's 5 logins, each once");
    assert_eq!(demo.answered("/orders"), 295);
    let s = json(&dir.join("summary.json"));
    assert_eq!(s["total"]["sent"], 300);
    assert_eq!(s["stages"][0]["target_rate"], 100.0, "the recording's 300 arrivals over its 3 s");
}

/// `perfops check` reads the replay file: each error at its line of that file, the scenario's
/// `${replay.NAME}` against its columns, and exit 2.
#[test]
fn check_reports_a_bad_recording_by_its_lines() {
    let w = Workdir::new("replay-check");
    let scenario = scenario(&w, "http://127.0.0.1:9", "{ model: replay, file: rec.csv }");
    let check = || spawn_perfops(&["check", scenario.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    let f = check();
    f.assert_exit(0);
    assert!(f.stdout.contains("3 s"), "{}", f.stdout);

    let bad = "# perfops replay v1\noffset_ms,flow,user\n0,orders,\n5,logout,\n9,orders,\n3,orders,\nx,orders,\n";
    std::fs::write(w.path.join("rec.csv"), bad).unwrap();
    let f = check();
    f.assert_exit(2);
    let rec = w.path.join("rec.csv").display().to_string();
    for want in [
        format!("{rec}:4:1: error: unknown flow `logout`"),
        format!("{rec}:6:1: error: offset 3 ms comes before the 9 ms of line 5"),
        format!("{rec}:7:1: error: offset `x`"),
    ] {
        assert!(f.stderr.contains(&want), "{want}\n{}", f.stderr);
    }
    assert!(f.stderr.contains("4 | 5,logout,"), "the file's own line is shown: {}", f.stderr);

    // A column the recording does not have.
    std::fs::write(w.path.join("rec.csv"), "# perfops replay v1\noffset_ms,flow\n0,login\n").unwrap();
    let f = check();
    f.assert_exit(2);
    assert!(f.stderr.contains("has no value column `user`"), "{}", f.stderr);

    // No file at all.
    std::fs::remove_file(w.path.join("rec.csv")).unwrap();
    let f = check();
    f.assert_exit(2);
    assert!(f.stderr.contains("replay file"), "{}", f.stderr);
}
