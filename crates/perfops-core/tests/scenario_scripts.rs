//! Scenario syntax of scripts: `scripts:` in its three shapes, `script:`
//! steps, request and response hooks (per step and in `defaults:`), and
//! each mistake reported at its line and column with a hint, all at once.

use std::time::Duration;

use perfops_core::scenario::parse;
use perfops_core::scenario::script::{DEFAULT_SCRIPT_MEMORY_BYTES, DEFAULT_SCRIPT_TIMEOUT, OnScriptError};

const LOAD: &str = "load: { stages: [ { rate: 1, hold: 1s } ] }\n";

#[test]
fn scripts_hooks_and_script_steps_decode() {
    let text = format!(
        r#"target: http://127.0.0.1:8080
scripts: auth.js
defaults:
  before: sign
setup:
  - {{ script: login }}
flows:
  pages:
    steps:
      - {{ name: page, request: "GET /items?page=${{page}}", after: check_page }}
      - {{ script: next_page, pause: 10ms }}
      - {{ request: GET /own, before: sign_other, after: check }}
{LOAD}"#
    );
    let s = parse("s.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
    let scripts = s.scripts.as_ref().expect("scripts");
    assert_eq!(scripts.files.len(), 1);
    assert_eq!((scripts.files[0].0.as_str(), scripts.files[0].1.line, scripts.files[0].1.column), ("auth.js", 2, 10));
    assert_eq!((scripts.timeout, scripts.memory_bytes), (DEFAULT_SCRIPT_TIMEOUT, DEFAULT_SCRIPT_MEMORY_BYTES));
    assert_eq!(scripts.on_error, OnScriptError::EndFlow);
    // Setup's script step: a call, no request, no hooks of defaults.
    assert_eq!(s.setup[0].script.call.as_deref(), Some("login"));
    assert_eq!(s.setup[0].script.before, None);
    assert_eq!(s.setup[0].name, "script login");
    let steps = &s.flows[0].steps;
    // The default request hook, and the step's own response hook.
    assert_eq!(
        (steps[0].script.before.as_deref(), steps[0].script.after.as_deref()),
        (Some("sign"), Some("check_page"))
    );
    // `${page}` is saved by no step: a script may save it, so it is no error.
    assert_eq!(steps[1].script.call.as_deref(), Some("next_page"));
    assert_eq!(steps[1].pause, Duration::from_millis(10));
    // A step's own hook replaces the default's.
    assert_eq!(
        (steps[2].script.before.as_deref(), steps[2].script.after.as_deref()),
        (Some("sign_other"), Some("check"))
    );
    // Every use, where, for `check`'s "no function" errors.
    let uses: Vec<(&str, usize)> = scripts.uses.iter().map(|u| (u.function.as_str(), u.at.line)).collect();
    assert_eq!(
        uses,
        vec![("sign", 4), ("login", 6), ("check_page", 10), ("next_page", 11), ("sign_other", 12), ("check", 12)]
    );
}

#[test]
fn scripts_as_a_list_and_as_a_mapping() {
    let list = format!(
        "target: http://h:1\nscripts: [a.js, lib/b.js]\nflows: {{ f: {{ steps: [ {{ script: go }} ] }} }}\n{LOAD}"
    );
    let s = parse("s.yaml", &list, &[]).unwrap_or_else(|d| panic!("{}", d.render(&list)));
    let files: Vec<&str> =
        s.scripts.as_ref().map(|x| x.files.iter().map(|(f, _)| f.as_str()).collect()).unwrap_or_default();
    assert_eq!(files, vec!["a.js", "lib/b.js"]);
    let map = format!(
        "target: http://h:1\nscripts: {{ files: [a.js], timeout: 20ms, memory: 16MiB, on_error: continue }}\nflows: {{ f: {{ steps: [ {{ script: go }} ] }} }}\n{LOAD}"
    );
    let s = parse("s.yaml", &map, &[]).unwrap_or_else(|d| panic!("{}", d.render(&map)));
    let x = s.scripts.expect("scripts");
    assert_eq!((x.timeout, x.memory_bytes, x.on_error), (Duration::from_millis(20), 16 << 20, OnScriptError::Continue));
    // Without `scripts:` a scenario names no function and pays nothing.
    let plain = format!("target: http://h:1\nflows: {{ f: {{ steps: [ {{ request: GET / }} ] }} }}\n{LOAD}");
    let s = parse("s.yaml", &plain, &[]).unwrap_or_else(|d| panic!("{}", d.render(&plain)));
    assert!(s.scripts.is_none());
    assert!(s.flows[0].steps[0].script.is_empty());
}

/// Each mistake at its line and column, with its hint, all in one pass.
#[test]
fn script_mistakes_are_placed_with_hints() {
    let cases: &[(&str, &str, (usize, usize), &str)] = &[
        // A hook with no `scripts:` to live in.
        (
            "flows: { f: { steps: [ { request: GET /, before: sign } ] } }\n",
            "`sign` names a script function, and the scenario has no `scripts:`",
            (2, 50),
            "scripts: auth.js",
        ),
        // Neither a name nor code.
        (
            "scripts: a.js\nflows: { f: { steps: [ { script: \" \" } ] } }\n",
            "no function name and no code",
            // At its opening quote, as every quoted value's error.
            (3, 34),
            "e.g. `sign`, or a line of JavaScript",
        ),
        // A script step carries no request.
        (
            "scripts: a.js\nflows: { f: { steps: [ { script: go, request: GET / } ] } }\n",
            "unknown field `request`",
            (3, 38),
            "fields here: name, script, pause",
        ),
        // Hooks belong to HTTP steps.
        (
            "scripts: a.js\nflows: { f: { steps: [ { websocket: /ws, after: check } ] } }\n",
            "`after` is a hook of an HTTP step",
            (3, 42),
            "`script:` step",
        ),
        // A typo in on_error.
        (
            "scripts: { files: [a.js], on_error: contnue }\nflows: { f: { steps: [ { script: go } ] } }\n",
            "unknown `on_error` `contnue`",
            (2, 37),
            "did you mean `continue`?",
        ),
        // A memory limit no runtime could live in.
        (
            "scripts: { files: [a.js], memory: 1KiB }\nflows: { f: { steps: [ { script: go } ] } }\n",
            "`1KiB` is too little for a JavaScript runtime",
            (2, 35),
            "1MiB at least",
        ),
        // A mapping without its files.
        (
            "scripts: { timeout: 10ms }\nflows: { f: { steps: [ { script: go } ] } }\n",
            "missing field `files`",
            (2, 12),
            "files: [auth.js]",
        ),
        // The same file twice.
        (
            "scripts: [a.js, a.js]\nflows: { f: { steps: [ { script: go } ] } }\n",
            "`a.js` is named twice",
            (2, 17),
            "name each file once",
        ),
        // A typo in defaults' hook field.
        (
            "scripts: a.js\ndefaults: { befor: sign }\nflows: { f: { steps: [ { request: GET / } ] } }\n",
            "unknown field `befor`",
            (3, 13),
            "did you mean `before`?",
        ),
    ];
    for (body, message, (line, column), hint) in cases {
        let text = format!("target: http://h:1\n{body}{LOAD}");
        let errors = parse("s.yaml", &text, &[]).map(|_| ()).expect_err(message).0;
        let e = errors.iter().find(|e| e.message == *message).unwrap_or_else(|| panic!("{message}: got {errors:?}"));
        assert_eq!((e.line, e.column), (*line, *column), "{message}");
        assert!(e.hint.as_deref().unwrap_or("").contains(hint), "{message}: hint {:?}", e.hint);
    }
}

/// Without scripts, an unsaved `${name}` is still an error: scripts relax the check, nothing else does.
#[test]
fn unsaved_variables_are_still_errors_without_scripts() {
    let text =
        format!("target: http://h:1\nflows: {{ f: {{ steps: [ {{ request: \"GET /${{page}}\" }} ] }} }}\n{LOAD}");
    let errors = parse("s.yaml", &text, &[]).map(|_| ()).expect_err("unsaved").0;
    assert!(errors.iter().any(|e| e.message == "`${page}` is never saved"), "{errors:?}");
}

/// Inline code where a name goes: each a function of its own (named apart
/// from anything a scenario can name), taking `req`, `res` or nothing, with
/// its place; a scenario with inline code and no `scripts:` needs no file.
#[test]
fn inline_code_is_a_function_of_its_own() {
    use perfops_core::scenario::script::INLINE_PREFIX;
    let text = format!(
        r#"target: http://127.0.0.1:8080
flows:
  pages:
    steps:
      - name: page
        request: GET /items
        before: "req.headers['X-Ts'] = String(Date.now())"
        after: return res.status === 200
      - script: |
          vars.n = Number(vars.n || 0) + 1;
          if (Number(vars.n) < 3) return "page";
      - {{ name: total, script: "vars.total = Number(vars.a) * 2" }}
{LOAD}"#
    );
    let s = parse("s.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
    let scripts = s.scripts.as_ref().expect("a spec of inline code alone, without `scripts:`");
    assert!(scripts.files.is_empty() && scripts.uses.is_empty());
    assert_eq!((scripts.timeout, scripts.memory_bytes), (DEFAULT_SCRIPT_TIMEOUT, DEFAULT_SCRIPT_MEMORY_BYTES));
    let inline: Vec<(&str, &str, usize, usize)> =
        scripts.inline.iter().map(|c| (c.function.as_str(), c.param, c.at.line, c.at.column)).collect();
    let f = |i: usize| format!("{INLINE_PREFIX}{i}");
    let (f0, f1, f2, f3) = (f(0), f(1), f(2), f(3));
    assert_eq!(
        inline,
        // A block scalar's place is its first line of code; a quoted one's its quote.
        vec![
            (f0.as_str(), "req", 7, 17),
            (f1.as_str(), "res", 8, 16),
            (f2.as_str(), "", 10, 11),
            (f3.as_str(), "", 12, 32)
        ]
    );
    assert_eq!(scripts.inline[1].code, "return res.status === 200");
    assert!(scripts.inline[2].code.contains("return \"page\";"), "{:?}", scripts.inline[2].code);
    // The function that is compiled: the code from its second line on.
    assert_eq!(scripts.inline[1].source(), format!("function {f1}(res) {{\nreturn res.status === 200\n}}\n"));
    assert_eq!(scripts.inline[1].file_name(), "s.yaml:8:16 (inline)");
    let steps = &s.flows[0].steps;
    assert_eq!(
        (steps[0].script.before.as_deref(), steps[0].script.after.as_deref()),
        (Some(f0.as_str()), Some(f1.as_str()))
    );
    assert_eq!(steps[1].script.call.as_deref(), Some(f2.as_str()));
    // An unnamed step of inline code is named by its place; a named one keeps its name.
    assert_eq!((steps[1].name.as_str(), steps[2].name.as_str()), ("script at line 9", "total"));
}
