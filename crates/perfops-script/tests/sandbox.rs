//! Hostile and careless scripts: each ends in a clean, typed error, and the runtime serves the
//! next call. Also what the sandbox leaves out (files, network, modules, timers, eval) and the
//! clock it puts in.

use std::time::{Duration, Instant};

use perfops_script::{Clock, FlowState, Limits, RequestParts, ResponseView, Runtime, ScriptError, Scripts};

const SRC: &str = r#"function ok() { vars.ok = "yes"; }
function spin() { while (true) {} }
function spin_caught() { try { while (true) {} } catch (e) { vars.caught = "1"; } }
function spin_later() { Promise.resolve().then(() => { while (true) {} }); }
function big() { return "x".repeat(1 << 28).length; }
function grow() { const a = []; for (;;) a.push({ n: a.length, s: "y".repeat(64) }); }
function deep(n) { return deep(n + 1) + 1; }
function boom() { vars.half = "saved?"; throw new Error("boom"); }
function text() { throw "no token"; }
function thing() { throw { code: 7 }; }
function five() { return 5; }
async function later() { vars.x = "1"; }
function queued() { Promise.resolve().then(() => { vars.then = "ran"; }); }
function regex() { return /(a+)+b/.test("a".repeat(40)); }
function fill() { return new Array(1e9).fill(0).length; }
function caps() {
  const probe = (f) => { try { return String(f()); } catch (e) { return e.name; } };
  vars.require = typeof require;
  vars.fetch = typeof fetch;
  vars.timer = typeof setTimeout;
  vars.eval = typeof eval;
  vars.fn = probe(() => Function("return 1")());
  vars.ctor = probe(() => (function () {}).constructor("return 1")());
  vars.asyncCtor = probe(() => (async function () {}).constructor("return 1"));
  vars.importing = probe(() => { import("fs"); return "queued"; });
  vars.now = String(Date.now());
  vars.date = String(new Date().getTime());
  vars.dateArg = String(new Date(5).getTime());
  vars.perf = String(performance.now());
}
function hoard() { vars.big = "y".repeat(2 << 20); }
function keep() { vars.page = "y".repeat(512 << 10); }
"#;

const NOW_MS: u64 = 1_764_400_000_000;

fn runtime(limits: Limits) -> Runtime {
    let scripts = Scripts::compile(&[("hostile.js", SRC)]).expect("compiles");
    Runtime::new(&scripts, limits, 1, Clock::frozen(NOW_MS)).expect("runtime")
}

fn call(rt: &mut Runtime, name: &str, state: &mut FlowState) -> Result<(), ScriptError> {
    let hook = rt.scripts().hook(name).expect(name);
    rt.step(hook, state).map(|_| ())
}

/// After whatever happened, the runtime still runs a plain hook.
fn still_usable(rt: &mut Runtime) {
    let mut state = FlowState::default();
    call(rt, "ok", &mut state).expect("the next call works");
    assert_eq!(state.vars.get("ok").map(String::as_str), Some("yes"));
}

/// The line of a place (columns depend on QuickJS's counting; lines are what a person reads).
fn line_of(e: &ScriptError) -> Option<u32> {
    match e {
        ScriptError::Exception { at, .. } | ScriptError::Timeout { at, .. } | ScriptError::Compile { at, .. } => {
            at.as_ref().map(|p| p.line)
        }
        _ => None,
    }
}

#[test]
fn endless_loops_time_out_and_the_runtime_goes_on() {
    let limits = Limits { call_time: Duration::from_millis(50), ..Limits::default() };
    let mut rt = runtime(limits);
    let cases = [
        // A plain endless loop.
        ("spin", Some(2)),
        // A catch cannot swallow the interrupt: the call still times out, and the catch block
        // never runs.
        ("spin_caught", Some(3)),
        // A loop in a promise callback, run before the call returns: the same deadline (its
        // place is lost: rquickjs drops a job's error).
        ("spin_later", None),
        // Catastrophic backtracking inside the regex engine (native code): it polls the same
        // interrupt handler.
        ("regex", Some(14)),
    ];
    for (name, line) in cases {
        let mut state = FlowState::default();
        let started = Instant::now();
        let err = call(&mut rt, name, &mut state).expect_err(name);
        let took = started.elapsed();
        assert!(
            matches!(&err, ScriptError::Timeout { function, limit, .. } if function == name && *limit == limits.call_time),
            "{name}: {err}"
        );
        assert_eq!(line_of(&err), line, "{name}: {err}");
        if let Some(line) = line {
            assert!(err.to_string().starts_with(&format!("hostile.js:{line}:")), "{err}");
        }
        assert!(took >= limits.call_time && took < Duration::from_secs(2), "{name}: {took:?}");
        assert!(state.vars.is_empty(), "{name} saved nothing");
        still_usable(&mut rt);
    }
}

#[test]
fn memory_limits_end_in_out_of_memory_and_a_rebuilt_runtime() {
    let limits = Limits { call_time: Duration::from_secs(5), memory_bytes: 16 << 20 };
    let mut rt = runtime(limits);
    // One huge string, many small objects, a huge array: each reaches the limit.
    for (i, name) in ["big", "grow", "fill"].into_iter().enumerate() {
        let err = call(&mut rt, name, &mut FlowState::default()).expect_err(name);
        assert_eq!(err, ScriptError::OutOfMemory { function: name.into(), limit_bytes: 16 << 20 }, "{name}");
        assert_eq!(rt.rebuilt(), i as u64 + 1);
        still_usable(&mut rt);
        assert!(rt.memory_bytes() < 4 << 20, "the rebuilt heap is small: {}", rt.memory_bytes());
    }
}

#[test]
fn throws_are_exceptions_with_their_place() {
    let mut rt = runtime(Limits::default());
    let cases: &[(&str, &str, Option<u32>)] = &[
        // Deep recursion: QuickJS's stack check, a RangeError, not a crash.
        ("deep", "RangeError: Maximum call stack size exceeded", Some(7)),
        // An Error: its name, message and line.
        ("boom", "Error: boom", Some(8)),
        // A thrown string: as it is, no place.
        ("text", "no token", None),
        // A thrown object: as JSON.
        ("thing", r#"threw {"code":7}"#, None),
    ];
    for (name, message, line) in cases {
        let mut state = FlowState::default();
        let err = call(&mut rt, name, &mut state).expect_err(name);
        match &err {
            ScriptError::Exception { function, message: m, .. } => {
                assert_eq!(function, name);
                assert_eq!(m, message);
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(line_of(&err), *line, "{name}: {err}");
        // A hook that throws saves nothing, not even what it wrote before throwing.
        assert!(state.vars.is_empty(), "{name}: {:?}", state.vars);
        still_usable(&mut rt);
    }
}

#[test]
fn misshapen_returns_are_bad_returns() {
    let mut rt = runtime(Limits::default());
    let five = rt.scripts().hook("five").unwrap();
    let later = rt.scripts().hook("later").unwrap();
    let headers: [(&str, &str); 0] = [];
    let view = ResponseView { status: 200, headers: &headers, body: b"" };
    // A number from a response hook.
    let err = rt.after_response(five, &mut FlowState::default(), view).unwrap_err();
    assert!(matches!(err, ScriptError::BadReturn { .. }), "{err}");
    // A number from a request hook.
    let mut req = RequestParts { method: "GET".into(), path: "/".into(), ..RequestParts::default() };
    let err = rt.before_request(five, &mut FlowState::default(), &mut req).unwrap_err();
    assert!(matches!(err, ScriptError::BadReturn { .. }), "{err}");
    // An async hook: its promise is not awaited, and what it saved is dropped with it.
    let mut state = FlowState::default();
    let err = rt.step(later, &mut state).unwrap_err();
    assert!(err.to_string().contains("synchronous"), "{err}");
    assert!(state.vars.is_empty());
    still_usable(&mut rt);
}

/// What a script copies out of its heap into `vars` is bounded too (1 MiB a flow): a hook
/// saving a 50 MiB string in each flow took a run to 940 MB in 3 s (attacker review). A value
/// of half a MiB is kept.
#[test]
fn vars_past_a_mib_are_refused() {
    let mut rt = runtime(Limits::default());
    let mut state = FlowState::default();
    let err = call(&mut rt, "hoard", &mut state).unwrap_err();
    assert!(matches!(err, ScriptError::BadReturn { .. }) && err.to_string().contains("more than 1 MiB"), "{err}");
    assert!(state.vars.is_empty(), "nothing of it kept");
    call(&mut rt, "keep", &mut state).expect("half a MiB is kept");
    assert_eq!(state.vars.get("page").map(String::len), Some(512 << 10));
    still_usable(&mut rt);
}

#[test]
fn promise_callbacks_run_before_the_call_returns() {
    let mut rt = runtime(Limits::default());
    let mut state = FlowState::default();
    call(&mut rt, "queued", &mut state).unwrap();
    assert_eq!(state.vars.get("then").map(String::as_str), Some("ran"));
}

#[test]
fn the_sandbox_leaves_out_files_network_timers_and_eval() {
    let mut rt = runtime(Limits::default());
    let mut state = FlowState::default();
    call(&mut rt, "caps", &mut state).unwrap();
    let var = |name: &str| state.vars.get(name).map(String::as_str).unwrap_or("<unset>");
    let cases = [
        // No module system: nothing to load files or sockets with.
        ("require", "undefined"),
        // No network API.
        ("fetch", "undefined"),
        // No timers that could outlive a call.
        ("timer", "undefined"),
        // No eval of strings, by either constructor.
        ("eval", "undefined"),
        ("fn", "EvalError"),
        ("ctor", "EvalError"),
        ("asyncCtor", "EvalError"),
        // The run's clock, whatever the machine's says.
        ("now", "1764400000000"),
        ("date", "1764400000000"),
        // A Date of a given time is that time.
        ("dateArg", "5"),
        // performance.now() counts from the run's clock's origin: frozen here.
        ("perf", "0"),
    ];
    for (name, want) in cases {
        assert_eq!(var(name), want, "{name}");
    }
}

#[test]
fn dynamic_import_has_no_loader() {
    let scripts = Scripts::compile(&[("imp.js", "function f() { return import('fs'); }")]).unwrap();
    let mut rt = Runtime::new(&scripts, Limits::default(), 1, Clock::frozen(0)).unwrap();
    // import() returns a promise: a hook may not return one, and the import itself failed.
    let err = rt.step(scripts.hook("f").unwrap(), &mut FlowState::default()).unwrap_err();
    assert!(matches!(err, ScriptError::BadReturn { .. } | ScriptError::Exception { .. }), "{err}");
}

/// A timeout is placed at the loop that was running, not at the function's first line, in
/// functions over several lines (QuickJS dates a loop's interrupt by what it located before the
/// loop: see `error::loop_after`).
#[test]
fn a_timeout_is_placed_at_the_loop_that_ran() {
    const LOOPS: &str = "function empty_for() {
  var a = 1;
  for (;;) {}
}
function empty_while() {
  while (true) {}
}
function body_call() {
  var a = 1;
  for (;;) { a = Math.max(a, 2); }
}
function body_prop() {
  const o = { n: 0 };
  while (true) { o.n++; }
}
function after_a_loop() {
  for (let i = 0; i < 3; i++) {}
  let j = 0;
  while (true) { j++; }
}
";
    let scripts = Scripts::compile(&[("loops.js", LOOPS)]).expect("compiles");
    let limits = Limits { call_time: Duration::from_millis(20), ..Limits::default() };
    let mut rt = Runtime::new(&scripts, limits, 1, Clock::frozen(NOW_MS)).expect("runtime");
    let cases = [
        // An empty loop after a statement QuickJS does not locate: the loop, not line 1.
        ("empty_for", "loops.js:3:3"),
        // A loop first in its function.
        ("empty_while", "loops.js:6:3"),
        // A loop whose body calls: the loop.
        ("body_call", "loops.js:10:3"),
        // A loop whose body assigns a property.
        ("body_prop", "loops.js:14:3"),
        // After a loop that ended: QuickJS names the last place it located before the endless
        // one (the first loop's increment), which is kept: the function's lines, not its first.
        ("after_a_loop", "loops.js:17:26"),
    ];
    for (name, place) in cases {
        let hook = scripts.hook(name).expect(name);
        let err = rt.step(hook, &mut FlowState::default()).expect_err(name);
        assert!(matches!(err, ScriptError::Timeout { .. }), "{name}: {err}");
        assert!(err.to_string().starts_with(&format!("{place}: {name}: interrupted")), "{name}: {err}");
    }
}
