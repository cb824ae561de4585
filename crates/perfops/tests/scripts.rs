//! Scripts end to end, against perfops-testkit's scripted API (python3's
//! `http.server` and `hmac`): `check` reports a script's syntax error at its
//! file:line:column with the scenario's own errors; hostile scripts (an
//! endless loop, a huge allocation, an exception) end their calls cleanly,
//! counted as `script_error` with the script's place, and the run goes on;
//! a fleet's agent runs the hook the coordinator shipped to it. The guide's
//! examples are run by tests/examples.rs.

mod common;

use std::time::Duration;

use common::{RUN_LIMIT, Workdir, shared, spawn_perfops};
use serde_json::Value;

/// `perfops check` on a scenario with a mistake of its own, a hook that names a function
/// the scripts do not define, and a script with a syntax error: all said in one pass,
/// each at its place, exit 2.
#[test]
fn check_reports_script_errors_with_the_scenarios() {
    let w = Workdir::new("scripts-check");
    std::fs::write(w.path.join("auth.js"), "function sign(req) {\n  req.headers.X = 1;\n}\n").unwrap();
    std::fs::write(w.path.join("broken.js"), "function ok() {}\nfunction bad() { return 1 +; }\n").unwrap();
    let good = "target: http://127.0.0.1:9\nscripts: auth.js\nflows: { f: { steps: [ { request: GET /, before: sgin } ] } }\n\
                load: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let path = w.scenario("s.yaml", good);
    let f = spawn_perfops(&["check", path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    f.assert_exit(2);
    assert!(
        f.stderr.contains("s.yaml:3:50: error: no function `sgin` in auth.js; did you mean `sign`?"),
        "{}",
        f.stderr
    );
    // A syntax error in a script, beside an error of the scenario itself.
    let both = "target: http://127.0.0.1:9\nscripts: [auth.js, broken.js]\nflows: { f: { steps: [ { request: GET /, befor: sign } ] } }\n\
                load: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let path = w.scenario("both.yaml", both);
    let f = spawn_perfops(&["check", path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    f.assert_exit(2);
    assert!(f.stderr.contains("both.yaml:3:42: error: unknown field `befor`"), "{}", f.stderr);
    let at = f.stderr.lines().find(|l| l.starts_with("broken.js:2:")).unwrap_or_else(|| panic!("{}", f.stderr));
    assert!(at.contains(": error: ") && at.contains("SyntaxError"), "{at}");
    // The script's own line under it, not the scenario's.
    assert!(f.stderr.contains("function bad() { return 1 +; }"), "{}", f.stderr);
    // Fixed, it passes.
    let fixed = good.replace("sgin", "sign");
    let path = w.scenario("fixed.yaml", &fixed);
    spawn_perfops(&["check", path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30)).assert_exit(0);
}

const HOSTILE: &str = "// Three hooks that must not take the generator down.
function spin(req) {
  for (;;) {}
}
function hog(req) {
  const parts = [];
  for (;;) { parts.push('x'.repeat(1 << 20) + parts.length); }
}
function thrower(req) {
  throw new Error('no token for ' + req.path);
}
function fine(req) {
  req.headers['X-Fine'] = 'yes';
}
";

/// An endless loop, a huge allocation and an exception, each a request hook of its own
/// flow: every call ends within the limits, counted as `script_error` with the script's
/// place in failures.jsonl, and the good flow beside them runs on (its requests reach the
/// server); the run ends by itself with its results, exit 1 (the errors fail the SLO).
#[test]
fn hostile_scripts_end_cleanly_and_the_run_goes_on() {
    let _cpu = shared();
    let server = perfops_testkit::scripted::api("s", 1, 1);
    let w = Workdir::new("scripts-hostile");
    std::fs::write(w.path.join("hostile.js"), HOSTILE).unwrap();
    let yaml = format!(
        "target: {}\nscripts: {{ files: [hostile.js], timeout: 30ms, memory: 16MiB }}\n\
         flows:\n\
         \x20 spin: {{ steps: [ {{ name: spin, request: GET /items?page=1, before: spin }} ] }}\n\
         \x20 hog: {{ steps: [ {{ name: hog, request: GET /items?page=1, before: hog }} ] }}\n\
         \x20 thrower: {{ steps: [ {{ name: thrower, request: GET /items?page=1, before: thrower }} ] }}\n\
         \x20 fine: {{ steps: [ {{ name: fine, request: GET /items?page=1, before: fine }} ] }}\n\
         load: {{ stages: [ {{ rate: 8, hold: 2s }} ] }}\n",
        server.url(0)
    );
    let path = w.scenario("hostile.yaml", &yaml);
    let f = w.spawn("run", &path, &[], |_| {}).wait(RUN_LIMIT);
    f.assert_exit(1);
    let dir = w.result_dir(&f);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let step = |name: &str| s["steps"].as_array().unwrap().iter().find(|x| x["name"] == name).cloned().unwrap();
    for name in ["spin", "hog", "thrower"] {
        assert_eq!(step(name)["failures"]["script_error"], 4, "{name}: each of its 4 arrivals\n{}", f.dump());
        assert_eq!(step(name)["completed"], 0, "{name}: nothing sent");
    }
    assert_eq!(step("fine")["succeeded"], 4, "{}", f.dump());
    // Only the good flow's requests reached the server.
    assert_eq!(perfops_testkit::scripted::stats(server.addr())["pages"], 4);
    let failures = std::fs::read_to_string(dir.join("failures.jsonl")).expect("failures.jsonl");
    let reason = |step: &str| -> String {
        failures
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["step"] == step)
            .and_then(|v| v["check"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("no sample for {step}:\n{failures}"))
    };
    let spin = reason("spin");
    // Where the engine stopped it: at the loop in `spin` that never yields (line 3), not at
    // the function's own line.
    assert!(spin.starts_with("hostile.js:3:3: spin: interrupted after 30 ms"), "{spin}");
    let hog = reason("hog");
    assert!(hog.contains("out of memory"), "{hog}");
    let thrower = reason("thrower");
    assert!(thrower.starts_with("hostile.js:10:") && thrower.contains("no token for /items?page=1"), "{thrower}");
}

/// A coordinator and one agent: the agent gets the script with the scenario and signs
/// every request it sends; the server's own HMAC check passes them all.
#[test]
fn a_fleet_agent_runs_the_hook_it_was_sent() {
    let _cpu = shared();
    let server = perfops_testkit::scripted::api("demo-secret", 1, 1);
    let w = Workdir::new("scripts-fleet");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripts");
    std::fs::copy(examples.join("signed.js"), w.path.join("signed.js")).unwrap();
    let yaml = std::fs::read_to_string(examples.join("signed.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", &server.url(0))
        .replace("hold: 10s", "hold: 2s");
    let path = w.scenario("signed.yaml", &yaml);
    let (coordinator, agents) = w.fleet(&path, 1, "0c4f1e9a7d2b3856e1d0c9a2b7f4e35a", &[]);
    let f = coordinator.wait(Duration::from_secs(90));
    for a in agents {
        a.wait(Duration::from_secs(30)).assert_exit(0);
    }
    f.assert_exit(0);
    let stats = perfops_testkit::scripted::stats(server.addr());
    assert_eq!((stats["signed_ok"].as_u64(), stats["signed_bad"].as_u64()), (Some(80), Some(0)), "{stats}");
}

/// Inline code where a function name goes, with no script file: a request hook that signs
/// (the server's own HMAC check passes every request), a response hook that judges, and a
/// script step that loops the flow three times; each in the same sandbox as a file's.
#[test]
fn inline_code_signs_judges_and_loops_without_a_file() {
    let _cpu = shared();
    let server = perfops_testkit::scripted::api("demo-secret", 1, 1);
    let w = Workdir::new("scripts-inline");
    let yaml = format!(
        r#"target: {}
flows:
  orders:
    steps:
      - name: create
        request: POST /signed/orders?shop=7
        json: {{ item: "sku-${{seq}}" }}
        before: |
          const ts = String(Date.now());
          req.headers["X-Timestamp"] = ts;
          req.headers["X-Signature"] = perfops.hmac("sha256", "demo-secret", [req.method, req.path, ts, req.body].join("\n"));
        after: 'return res.status === 200 || {{ ok: false, reason: "status " + res.status }}'
      - script: vars.n = Number(vars.n || 0) + 1; if (Number(vars.n) < 3) return "create"
load: {{ stages: [ {{ rate: 10, hold: 2s }} ] }}
"#,
        server.url(0)
    );
    let path = w.scenario("inline.yaml", &yaml);
    spawn_perfops(&["check", path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30)).assert_exit(0);
    let f = w.spawn("run", &path, &[], |_| {}).wait(RUN_LIMIT);
    f.assert_exit(0);
    let stats = perfops_testkit::scripted::stats(server.addr());
    // 20 arrivals, each sending `create` three times, every one signed right.
    assert_eq!(
        (stats["signed_ok"].as_u64(), stats["signed_bad"].as_u64()),
        (Some(60), Some(0)),
        "{stats}\n{}",
        f.dump()
    );

    // A response hook that wants another status fails each step with its reason.
    let judged = yaml.replace("res.status === 200", "res.status === 299");
    let w = Workdir::new("scripts-inline-judged");
    let path = w.scenario("judged.yaml", &judged);
    let f = w.spawn("run", &path, &[], |_| {}).wait(RUN_LIMIT);
    f.assert_exit(1);
    let failures = std::fs::read_to_string(w.result_dir(&f).join("failures.jsonl")).expect("failures.jsonl");
    assert!(failures.contains("script_failed") && failures.contains("status 200"), "{failures}");
}

/// A syntax error in inline code is placed at the scenario's line and column of the code,
/// beside the scenario's own errors; a name the scripts do not define is still a name.
#[test]
fn check_places_inline_codes_errors_in_the_scenario() {
    let w = Workdir::new("scripts-inline-check");
    let yaml = "target: http://127.0.0.1:9\nflows:\n  f:\n    steps:\n      - { request: GET /, before: \"req.headers.X = 1 +\" }\n\
                \x20     - { request: GET /x, befor: sign }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let path = w.scenario("bad.yaml", yaml);
    let f = spawn_perfops(&["check", path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    f.assert_exit(2);
    // Just past the unfinished expression: its quote at column 35, then the code's 19 characters.
    let at = f.stderr.lines().find(|l| l.contains("bad.yaml:5:55: error: ")).unwrap_or_else(|| panic!("{}", f.stderr));
    assert!(at.contains("SyntaxError"), "{at}");
    assert!(f.stderr.contains("bad.yaml:6:"), "the scenario's own error too:\n{}", f.stderr);
    // The scenario's line under it, with the hint.
    assert!(f.stderr.contains("before: \"req.headers.X = 1 +\""), "{}", f.stderr);
    assert!(f.stderr.contains("inline code is the body of a function"), "{}", f.stderr);
}
