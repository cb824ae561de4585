//! End to end, issue #32 want 7: `perfops check` finds every error in one
//! pass (an unknown CSV column beside the file's own errors, no false
//! follow-up error from a mistyped feeder `mode`), and warns, without failing,
//! of what will surely go wrong when the scenario runs.

mod common;

use common::{RUN_LIMIT, Workdir, spawn_perfops};

/// The finding: `check` reported `${users.mail}` only after every
/// other error was fixed, and a mistyped `mode` made a second, false
/// "unknown feeder" error. Five independent errors: five reported, each at
/// its line and column with a hint, and no sixth.
#[test]
fn five_independent_errors_are_reported_in_one_pass() {
    let wd = Workdir::new("check-five");
    std::fs::write(wd.path.join("users.csv"), "id,email\n1,a@example.com\n").unwrap();
    let file = wd.scenario(
        "five.yaml",
        "name: five\n\
         target: http://127.0.0.1:8080\n\
         data:\n\
         \x20 users: { csv: users.csv, mode: cylce }\n\
         flows:\n\
         \x20 browse:\n\
         \x20   steps:\n\
         \x20     - name: login\n\
         \x20       request: POST /login\n\
         \x20       json: { user: \"${users.mail}\" }\n\
         \x20       timout: 2s\n\
         load:\n\
         \x20 stages:\n\
         \x20   - { rate: 5, hold: 10q }\n\
         slo:\n\
         \x20 - p95(checkout) < 500ms\n",
    );
    let out = spawn_perfops(&["check", &file.display().to_string()], |_| {}).wait(RUN_LIMIT);
    let ctx = out.dump();
    out.assert_exit(2);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains(": error: ")).collect();
    // (line:column, message fragment)
    let want = [
        ("4:34", "unknown mode `cylce`"),
        ("10:24", "users.csv has no column `mail`"),
        ("11:9", "unknown field `timout`"),
        ("14:24", "`10q` is not a duration"),
        ("16:9", "no step is named `checkout`"),
    ];
    assert_eq!(errors.len(), want.len(), "five errors, no sixth:\n{ctx}");
    for ((at, message), line) in want.iter().zip(&errors) {
        assert!(
            line.contains(&format!("five.yaml:{at}: error: ")) && line.contains(message),
            "want {at} {message}\n{ctx}"
        );
    }
    for hint in ["did you mean `cycle`?", "did you mean `${users.email}`?"] {
        assert!(out.stderr.contains(hint), "hint {hint:?}\n{ctx}");
    }
    assert!(out.stderr.contains("5 errors found"), "{ctx}");
    assert!(!out.stderr.contains("unknown feeder"), "no false follow-up error\n{ctx}");
}

/// A valid file whose plan will surely fail is warned of, at its place, and
/// still passes `check` (exit 0): 40/s with 0.6 s of pauses keeps 24
/// arrivals in flight beyond `max_in_flight: 20`, and a `once` feeder of 3
/// rows is read by 80 arrivals.
#[test]
fn warnings_say_what_will_surely_fail_without_failing_check() {
    let wd = Workdir::new("check-warn");
    std::fs::write(wd.path.join("users.csv"), "email\na@x\nb@x\nc@x\n").unwrap();
    let file = wd.scenario(
        "warn.yaml",
        "target: http://127.0.0.1:8080\n\
         data: { users: { csv: users.csv, mode: once } }\n\
         flows:\n\
         \x20 buy:\n\
         \x20   steps:\n\
         \x20     - { request: \"GET /login?u=${users.email}\", pause: 300ms }\n\
         \x20     - { request: GET /products, pause: 300ms }\n\
         load:\n\
         \x20 max_in_flight: 20\n\
         \x20 stages: [ { rate: 40, hold: 2s } ]\n",
    );
    let out = spawn_perfops(&["check", &file.display().to_string()], |_| {}).wait(RUN_LIMIT);
    let ctx = out.dump();
    out.assert_exit(0);
    assert!(out.stdout.contains("warn.yaml: ok"), "{ctx}");
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains(": warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{ctx}");
    assert!(warnings[0].contains("warn.yaml:2:34: warning: feeder `users` (mode: once)"), "{ctx}");
    assert!(warnings[0].contains("has 3 rows, but about 80 arrivals read it"), "{ctx}");
    assert!(warnings[1].contains("warn.yaml:9:3: warning: at 40 arrivals/s"), "{ctx}");
    assert!(warnings[1].contains("more than max_in_flight 20"), "{ctx}");
    assert!(out.stderr.contains("2 warnings found"), "{ctx}");
}
