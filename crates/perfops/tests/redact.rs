//! Issue #31, point 6: no secret of a scenario or of its command line reaches the results directory,
//! the report, the JUnit file or the run's output. The real binary runs a scenario full of literal
//! secrets (in the places a list of header names missed) against a real nginx on loopback, with a
//! secret `--set` into a header and into a body, saved values from `--setup-values` and an
//! environment value; then every file it wrote and everything it printed is searched for each secret.

mod common;

use common::{RUN_LIMIT, Workdir, files_under, shared};

/// Each secret, unique enough that finding it anywhere is a leak.
const SECRETS: &[&str] = &[
    // A header outside any list of names.
    "lit-xauth-7c1",
    // A password in a json body.
    "lit-pass-7c2",
    // A key in a query string.
    "lit-query-7c3",
    // A literal beside a reference ("Bearer abc ${seq}").
    "lit-mixed-7c4",
    // A folded block's lines.
    "lit-folded-7c5a",
    "lit-folded-7c5b",
    // A cookie in a flow mapping.
    "lit-cookie-7c6",
    // `--set` into a header.
    "lit-set-7c7",
    // `--set` into a body's credential-like field.
    "lit-set-pass-7c8",
    // A value saved by setup, given with --setup-values.
    "lit-setup-7c9",
    // An environment value.
    "lit-env-7d0",
    // A literal block (`|-`) in a step's header.
    "lit-block-7d1",
    // A password in the target's URL.
    "lit-url-7d4",
    // An environment value with spaces, as it went into a request line, a form and JSON (attacker review).
    "lit space 7d2",
    "lit%20space%207d2",
    "lit+space+7d2",
    // A key in the query of a step with no name: its name is its request line.
    "lit-noname-7d3",
    // A value saved under a plain name that goes into a header, and into a query.
    "lit-plain-7d5",
];

const SCENARIO: &str = r#"name: redact-e2e
target: TARGET
defaults:
  headers:
    X-Auth-Token: lit-xauth-7c1
    Accept: application/json
setup:
  - name: login
    request: POST /
    json: { user: bob }
    save: { token: $.token, plain: $.plain }
flows:
  root:
    steps:
      - name: query
        request: GET /?api_key=lit-query-7c3&page=1
        headers:
          Authorization: "Bearer lit-mixed-7c4 ${seq}"
          X-Folded: >-
            lit-folded-7c5a
            lit-folded-7c5b
          X-Block: |-
            lit-block-7d1
          X-Saved: "Bearer ${token}"
          X-Env: "${env.REDACT_E2E_KEY}"
      - name: login
        request: POST /
        json: { user: bob, password: lit-pass-7c2 }
        headers: { Cookie: "sid=lit-cookie-7c6", Content-Type: application/json }
  echo:
    steps:
      - request: GET /?api_key=lit-noname-7d3
      - name: encoded
        request: GET /nowhere/${env.REDACT_E2E_SPACE}?x=${plain}
        headers: { X-Plain: "${plain}" }
        expect: { status: 201 }
load:
  stages: [ { rate: 20, hold: 1s } ]
slo: []
"#;

#[test]
fn no_secret_reaches_results_report_junit_or_output() {
    let _cpu = shared();
    let server = perfops_testkit::nginx();
    let wd = Workdir::new("redact-e2e");
    let target = server.url().trim_end_matches('/').replace("http://", "http://bob:lit-url-7d4@");
    let scenario = wd.scenario("redact.yaml", &SCENARIO.replace("TARGET", &target));
    let setup_values = wd.path.join("setup.json");
    std::fs::write(&setup_values, r#"{"token": "lit-setup-7c9", "plain": "lit-plain-7d5"}"#)
        .expect("write setup values");
    let junit = wd.path.join("junit.xml");
    let (setup_values, junit) = (setup_values.display().to_string(), junit.display().to_string());
    let out = wd
        .spawn(
            "run",
            &scenario,
            &[
                "--set",
                "defaults.headers.X-Secret=lit-set-7c7",
                "--set",
                "flows.root.steps[1].json={user: bob, password: lit-set-pass-7c8}",
                "--setup-values",
                &setup_values,
                "--junit",
                &junit,
            ],
            |c| {
                c.env("REDACT_E2E_KEY", "lit-env-7d0").env("REDACT_E2E_SPACE", "lit space 7d2");
            },
        )
        .wait(RUN_LIMIT);
    // Answered or not (nginx refuses a POST to `/`), the run completes: `slo: []` judges rate only.
    assert!(matches!(out.code, Some(0 | 1)), "exit {:?}\n{}", out.code, out.stderr);
    let dir = wd.result_dir(&out);
    let summary = wd.summary(&out);
    assert!(summary["total"]["completed"].as_u64() > Some(0), "nothing was answered: {summary:#}");
    // The step whose request line holds the encoded secret failed its check: its sample is kept.
    let failures = std::fs::read_to_string(dir.join("failures.jsonl")).expect("failures.jsonl");
    assert!(failures.contains("GET /nowhere/<redacted>?x=<redacted> HTTP/1.1"), "{failures}");

    // The files a run writes; each must exist, so that a missing one cannot pass the search.
    for name in ["meta.json", "scenario.yaml", "summary.json", "report.html", "series.jsonl"] {
        assert!(dir.join(name).is_file(), "{name} is missing in {}", dir.display());
    }
    let meta = std::fs::read_to_string(dir.join("meta.json")).expect("meta.json");
    // The command line is recorded, with what was redacted in it.
    assert!(meta.contains("defaults.headers.X-Secret=<redacted>"), "{meta}");
    let copy = std::fs::read_to_string(dir.join("scenario.yaml")).expect("scenario.yaml");
    // The copy keeps the file's lines and what is no secret.
    assert_eq!(copy.lines().count(), SCENARIO.lines().count(), "{copy}");
    for kept in ["Accept: application/json", "X-Saved: \"Bearer ${token}\"", "${env.REDACT_E2E_KEY}", "page=1"] {
        assert!(copy.contains(kept), "scenario.yaml lost {kept:?}:\n{copy}");
    }

    let mut places: Vec<(String, Vec<u8>)> = vec![
        ("stdout".into(), out.stdout.clone().into_bytes()),
        ("stderr".into(), out.stderr.clone().into_bytes()),
        (junit.clone(), std::fs::read(&junit).expect("the JUnit file")),
    ];
    files_under(&dir, &mut places);
    for (place, bytes) in &places {
        for secret in SECRETS {
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "{place} holds {secret:?}:\n{}", String::from_utf8_lossy(bytes));
        }
    }
}

/// `perfops report` of a directory that an older perfops wrote, its secrets in the clear: the report
/// shows the scenario and the command line redacted all the same.
#[test]
fn the_report_redacts_what_an_older_perfops_left_in_the_clear() {
    let _cpu = shared();
    let wd = Workdir::new("redact-report");
    let scenario = wd.scenario(
        "old.yaml",
        "name: old\ntarget: demo:async\nflows:\n  f:\n    steps:\n      - request: GET /\nload:\n  stages: [ { rate: 5, hold: 1s } ]\nslo: []\n",
    );
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let dir = wd.result_dir(&out);
    // What an older perfops kept: a literal X-Auth-Token, and the value after --token.
    let old = "name: old\ntarget: demo:async\ndefaults:\n  headers: { X-Auth-Token: lit-old-7e1 }\nflows:\n  f:\n    steps:\n      - request: GET /\nload:\n  stages: [ { rate: 5, hold: 1s } ]\nslo: []\n";
    std::fs::write(dir.join("scenario.yaml"), old).expect("write scenario.yaml");
    let meta_path = dir.join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["command"] = serde_json::json!(["perfops", "coordinator", "old.yaml", "--token", "lit-old-7e2"]);
    std::fs::write(&meta_path, meta.to_string()).expect("write meta.json");

    let html = wd.path.join("again.html");
    let (d, h) = (dir.display().to_string(), html.display().to_string());
    let out = common::spawn_perfops(&["report", &d, "-o", &h], |_| {}).wait(RUN_LIMIT);
    out.assert_exit(0);
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(page.contains("--token &lt;redacted&gt;") || page.contains("--token <redacted>"), "the command is gone");
    for secret in ["lit-old-7e1", "lit-old-7e2"] {
        assert!(!page.contains(secret), "the report shows {secret}");
    }
}

/// `quick -H` refused for its form: the message names the header, never its value, and a value typed
/// without its name (`-H TOKEN`) is not echoed at all. Nothing is sent: the address refuses anyway.
#[test]
fn a_refused_header_is_not_echoed() {
    let url = format!("http://{}/", perfops_testkit::refused_addr());
    let cases: [(&str, &str); 2] = [
        // No colon: the whole value may be a token.
        ("lit-quick-7d2", "is not `Name: value`"),
        // A line break: the value is not shown (whatever refuses it: the message may change).
        ("Authorization: lit-quick-7d3\r\nX-Forged: 1", ""),
    ];
    for (header, needle) in cases {
        let run = common::quick(&[&url, "-H", header, "-n", "1"]);
        run.assert_exit(2);
        assert!(run.stderr.contains(needle), "-H {header:?}: stderr lacks {needle:?}:\n{}", run.stderr);
        for secret in ["lit-quick-7d2", "lit-quick-7d3"] {
            assert!(
                !run.stderr.contains(secret) && !run.stdout.contains(secret),
                "-H {header:?} echoed:\n{}",
                run.stderr
            );
        }
    }
}
