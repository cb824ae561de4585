//! End to end: outputs chosen by name (`--output NAME[=ARG]`, a scenario's
//! `outputs:`) against the demo target on loopback, through the real binary.
//! What only a process shows: the JSON lines on stdout (and the end-of-run
//! text moved off it), a file written by `quick`, and the usage errors.

mod common;

use common::{Demo, RUN_LIMIT, Workdir, shared, spawn_perfops};
use serde_json::Value;

/// 100 arrivals/s for 3 s against the demo the run starts itself.
const STEADY: &str = r#"name: outputs
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

/// JSON lines, each an object with a `type`.
#[track_caller]
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"));
            assert!(v["type"].is_string(), "no type: {l}");
            v
        })
        .collect()
}

/// The lines' per-second `field`, added up.
fn sum(lines: &[Value], field: &str) -> u64 {
    lines.iter().filter(|l| l["type"] == "second").map(|l| l[field].as_u64().expect("a count")).sum()
}

/// `run --output jsonl=-`: stdout is JSON lines alone, a start, one line a
/// second, a finish whose totals are the seconds added up (and the results
/// directory's summary); the end-of-run text went to stderr.
#[test]
fn run_streams_json_lines_whose_seconds_add_up_to_the_summary() {
    let _cpu = shared();
    let w = Workdir::new("jsonl-run");
    let scenario = w.scenario("s.yaml", STEADY);
    let out = w.spawn("run", &scenario, &["--output", "jsonl=-"], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let lines = lines(&out.stdout);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap_or_default()).collect();
    assert_eq!(types.first(), Some(&"start"), "{types:?}");
    assert_eq!(types.last(), Some(&"finish"), "{types:?}");
    assert!(types[1..types.len() - 1].iter().all(|t| *t == "second") && types.len() >= 5, "{types:?}");
    assert_eq!(lines[0]["meta"]["name"], "outputs");
    assert_eq!(lines[0]["meta"]["steps"], serde_json::json!(["ping"]));
    let total = &lines.last().expect("a finish")["summary"]["total"];
    for field in ["sent", "completed", "succeeded", "failed", "dropped"] {
        assert_eq!(Some(sum(&lines, field)), total[field].as_u64(), "{field}: {}", out.dump());
    }
    assert!(sum(&lines, "completed") >= 250, "{}", out.dump());
    assert_eq!(&w.summary(&out)["total"], total, "the finish line is summary.json");
    assert!(out.stderr.contains("verdict: PASSED"), "the end-of-run text is on stderr: {}", out.dump());
}

/// `quick --output jsonl=FILE` writes the file: its seconds add up to
/// quick's own summary; stdout keeps the ab-like text.
#[test]
fn quick_writes_json_lines_to_a_file() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let w = Workdir::new("jsonl-quick");
    let file = w.path.join("quick.jsonl");
    let arg = format!("jsonl={}", file.display());
    let url = format!("{}/health", demo.url);
    let out = common::quick(&["-c", "2", "-d", "2s", "-q", "--output", &arg, &url]);
    out.assert_exit(0);
    let lines = lines(&std::fs::read_to_string(&file).expect("the file was written"));
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["meta"]["kind"], "quick");
    let finish = lines.last().expect("lines");
    assert_eq!(finish["type"], "finish");
    assert_eq!(Some(sum(&lines, "completed")), out.json()["completed"].as_u64());
    assert_eq!(finish["summary"]["completed"], out.json()["completed"]);
    assert!(out.stdout.contains("Requests per second:"), "quick's text stays on stdout: {}", out.dump());
}

/// An unknown name is a usage error (exit 2) that lists the known outputs;
/// so is a known one without what it needs.
#[test]
fn an_unknown_output_is_a_usage_error_listing_the_known_ones() {
    let _cpu = shared();
    let w = Workdir::new("unknown-output");
    let scenario = w.scenario("s.yaml", STEADY);
    let out = w.spawn("run", &scenario, &["--output", "kafka=x"], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(2);
    assert!(out.stderr.contains("unknown output `kafka`"), "{}", out.dump());
    assert!(out.stderr.contains("prometheus=ADDR") && out.stderr.contains("jsonl=-|FILE"), "{}", out.dump());
    let out = spawn_perfops(&["quick", "--output", "jsonl", "http://127.0.0.1:9/"], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(2);
    assert!(out.stderr.contains("--output jsonl: say where"), "{}", out.dump());
    assert!(w.result_dirs().is_empty(), "nothing ran");
}

/// The scenario's `outputs:` chooses outputs as `--output` does, and a name
/// the registry does not know is an error of the file, at its line and
/// column, with the known ones as a hint (`check` says it too).
#[test]
fn a_scenario_chooses_outputs_and_an_unknown_one_is_an_error_at_its_place() {
    let _cpu = shared();
    let w = Workdir::new("scenario-outputs");
    // Relative to the folder perfops runs in.
    let file = w.path.join("from-scenario.jsonl");
    let yaml = format!("{STEADY}outputs: [ jsonl=from-scenario.jsonl ]\n");
    let scenario = w.scenario("s.yaml", &yaml.replace("hold: 3s", "hold: 1s"));
    let out = w
        .spawn("run", &scenario, &[], |c| {
            c.current_dir(&w.path);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(0);
    let lines = lines(&std::fs::read_to_string(&file).expect("the scenario's output was written"));
    assert_eq!(lines.last().expect("lines")["type"], "finish");
    assert!(out.stdout.contains("verdict: PASSED"), "a file output leaves stdout alone: {}", out.dump());

    let bad = w.scenario("bad.yaml", &format!("{STEADY}outputs: [ jsonl=-, influx=http://x ]\n"));
    let shown = bad.display().to_string();
    let check = spawn_perfops(&["check", &shown], |_| {}).wait(RUN_LIMIT);
    let run = w.spawn("run", &bad, &[], |_| {}).wait(RUN_LIMIT);
    for out in [check, run] {
        out.assert_exit(2);
        assert!(out.stderr.contains(&format!("{shown}:11:21: error: unknown output `influx`")), "{}", out.dump());
        assert!(out.stderr.contains("known outputs: prometheus=ADDR"), "{}", out.dump());
    }
    assert_eq!(w.result_dirs().len(), 1, "the bad file ran nothing");

    // A file from elsewhere must not write outside the folder perfops runs in
    // (`jsonl=../../.bashrc` would truncate a user's shell start-up file): refused at its place, by
    // `check` too; the command line may still choose any file.
    let victim = w.path.join("victim.txt");
    std::fs::write(&victim, "kept").expect("a file to keep");
    for (name, arg) in [("abs.yaml", victim.display().to_string()), ("up.yaml", "../victim.txt".into())] {
        let poisoned = w.scenario(name, &format!("{STEADY}outputs: [ \"jsonl={arg}\" ]\n"));
        let shown = poisoned.display().to_string();
        let check = spawn_perfops(&["check", &shown], |_| {}).wait(RUN_LIMIT);
        let run = w.spawn("run", &poisoned, &[], |_| {}).wait(RUN_LIMIT);
        for out in [check, run] {
            out.assert_exit(2);
            assert!(out.stderr.contains(&format!("{shown}:11:12: error: output `jsonl=")), "{}", out.dump());
            assert!(out.stderr.contains("writes outside the folder perfops runs in"), "{}", out.dump());
        }
    }
    assert_eq!(std::fs::read_to_string(&victim).expect("still there"), "kept");

    // An output without its ARG: `run` would refuse it; `check` says so too, at its place.
    let bare = w.scenario("bare.yaml", &format!("{STEADY}outputs: [ jsonl ]\n"));
    let shown = bare.display().to_string();
    let check = spawn_perfops(&["check", &shown], |_| {}).wait(RUN_LIMIT);
    check.assert_exit(2);
    assert!(
        check.stderr.contains(&format!("{shown}:11:12: error: output `jsonl` needs to be told where")),
        "{}",
        check.dump()
    );
    assert_eq!(w.result_dirs().len(), 1, "the poisoned files ran nothing");
}
