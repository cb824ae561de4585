//! End to end, issue #11 point 5: small things that cost trust. `check`
//! accepts exactly what `run` accepts (here: `${env.X}` in `target`, which
//! `run` resolves before it parses the URL), and `quick`'s "Connection
//! Times (ms)" has ab's Processing row. Real servers on 127.0.0.1 from
//! `perfops-testkit`.

mod common;

use common::{Finished, RUN_LIMIT, Workdir, quick, shared, spawn_perfops};
use perfops_testkit as kit;
use std::path::Path;
use std::time::Duration;

/// A short open load against `target` (as written), no SLO.
fn scenario(target: &str) -> String {
    format!(
        "name: env-target\ntarget: {target}\nflows:\n  root: {{ steps: [ {{ request: GET / }} ] }}\n\
         load:\n  stages: [ {{ rate: 10, hold: 1s }} ]\n"
    )
}

/// `perfops check FILE` and `perfops run FILE`, each with `PORT` set to
/// `port` (or unset).
fn check_and_run(wd: &Workdir, file: &str, port: Option<&str>) -> (Finished, Finished) {
    let runs = wd.runs().display().to_string();
    let env = |c: &mut std::process::Command| {
        match port {
            Some(p) => c.env("PORT", p),
            None => c.env_remove("PORT"),
        };
    };
    let check = spawn_perfops(&["check", file], env).wait(RUN_LIMIT);
    let run = spawn_perfops(&["run", file, "--out", &runs, "-q"], env).wait(RUN_LIMIT);
    (check, run)
}

/// #11 point 5: `target: http://127.0.0.1:${env.PORT}` passed `check` and
/// failed `run` with "invalid port number". Now `run` resolves it, and on
/// the same file `check` and `run` agree: both accept it with PORT set, both
/// refuse it (exit 2, the same reason) with PORT unset or not a port, and
/// both refuse a variable that is not known before the load.
#[test]
fn check_accepts_exactly_what_run_accepts_with_env_in_target() {
    let _cpu = shared();
    let server = kit::fixed_delay(Duration::from_millis(1));
    let port = server.addr().port().to_string();
    let wd = Workdir::new("env-target");
    let file = wd.scenario("env.yaml", &scenario("http://127.0.0.1:${env.PORT}")).display().to_string();

    let (check, run) = check_and_run(&wd, &file, Some(&port));
    check.assert_exit(0);
    run.assert_exit(0);
    assert!(server.requests() >= 9, "{} requests reached the server\n{}", server.requests(), run.stderr);
    // The environment's value is not written to the results: the target as written.
    let meta = std::fs::read_to_string(wd.result_dir(&run).join("meta.json")).expect("meta.json");
    assert!(meta.contains("http://127.0.0.1:${env.PORT}"), "{meta}");

    // (PORT, what both say)
    let cases = [
        (None, "PORT is not set"),             // unset: an input error, not an empty port
        (Some("http"), "invalid port number"), // set, but the URL it makes is not one
    ];
    for (value, why) in cases {
        let (check, run) = check_and_run(&wd, &file, value);
        for (what, out) in [("check", &check), ("run", &run)] {
            out.assert_exit(2);
            assert!(out.stderr.contains(why), "{what} with PORT={value:?}: {}", out.stderr);
        }
    }

    // Only the environment is known before the load: `check` and `run` alike refuse the rest.
    let seq = wd.scenario("seq.yaml", &scenario("http://127.0.0.1:${seq}")).display().to_string();
    let (check, run) = check_and_run(&wd, &seq, Some(&port));
    for (what, out) in [("check", &check), ("run", &run)] {
        out.assert_exit(2);
        assert!(out.stderr.contains("only `${env.NAME}` can be used in target"), "{what}: {}", out.stderr);
    }
}

/// #11 point 5: ab users look for "Processing" (Total - Connect) in
/// "Connection Times (ms)"; with one new connection per request its row is
/// the service time, and the rows say what each counts from.
#[test]
fn quick_has_ab_processing_row() {
    let _cpu = shared();
    let server = kit::fixed_delay(Duration::from_millis(5));
    let out = quick(&["-c", "1", "-n", "20", "-q", "-H", "Connection: close", &server.url()]);
    out.assert_exit(0);
    let row = |name: &str| -> Vec<f64> {
        let line =
            out.stdout.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}\n{}", out.stdout));
        line[name.len()..].split_whitespace().take(5).map(|v| v.parse().expect("a number")).collect()
    };
    let (processing, waiting, total) = (row("Processing:"), row("Waiting:"), row("Total:"));
    // min, mean, sd, median, max: the 5 ms delay is in each, from the send.
    assert!(processing[0] >= 5.0 && processing[4] < 100.0, "{}", out.stdout);
    assert!(waiting[0] >= 5.0 && waiting[0] <= processing[0], "first byte before the last\n{}", out.stdout);
    // A closed loop counts from the send: Total is Processing, Connect apart.
    assert_eq!(total, processing, "{}", out.stdout);
    assert!(out.stdout.contains("(from the send to the end)"), "{}", out.stdout);
    assert!(out.stdout.contains("(from the send: Connect is apart)"), "{}", out.stdout);
    assert_eq!(out.u64("/connects"), 20, "one connection per request\n{}", out.dump());
}

/// `check` takes `run`'s `--set` and `--target`, so a CI job checks the
/// scenario it is about to run; an error in what `--set` adds is `--set`'s
/// (`--set nosuch=1` was reported at `FILE:0:0`), and `load.stages` replaces
/// a file's `steps` (the guide's own example failed with "give `stages` or
/// `steps`, not both"). Session 14's tester, F10.
#[test]
fn check_takes_the_overrides_run_takes() {
    let orders = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/orders.yaml").display().to_string();
    let check =
        |extra: &[&str]| spawn_perfops(&[&["check", orders.as_str()][..], extra].concat(), |_| {}).wait(RUN_LIMIT);
    let ok = check(&["--set", "load.stages=[{rate: 50, hold: 10s}]", "--target", "http://127.0.0.1:9"]);
    ok.assert_exit(0);
    assert!(ok.stdout.contains("orders.yaml: ok (2 flows, 1 stages, 10 s)"), "{}", ok.stdout);
    let bad = check(&["--set", "nosuch=1"]);
    bad.assert_exit(2);
    assert!(bad.stderr.starts_with("--set:1:1: error: unknown field `nosuch`"), "{}", bad.stderr);
    let bad = check(&["--target", "ftp://127.0.0.1:9/"]);
    bad.assert_exit(2);
}
