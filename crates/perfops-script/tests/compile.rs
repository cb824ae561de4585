//! Compiling scripts: every file's error at file:line:column, the functions found, and no
//! source text that panics.

use perfops_script::{Clock, Limits, Runtime, ScriptError, Scripts};
use proptest::prelude::*;

#[test]
fn every_files_error_with_its_place() {
    let files = [
        ("ok.js", "function sign(req) { return req; }\n"),
        // A syntax error on line 3.
        ("bad.js", "function a() {\n  return 1;\n  let = ;\n}\n"),
        // Top-level code that throws: an error of the file, at its line.
        ("throws.js", "\n\nnull.x;\n"),
        // A second syntax error, in another file: both are reported.
        ("worse.js", "var x = ;\n"),
    ];
    let errors = Scripts::compile(&files).expect_err("three bad files");
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{lines:#?}");
    let places: Vec<(String, u32)> = errors
        .iter()
        .map(|e| match e {
            ScriptError::Compile { at: Some(at), .. } => (at.file.clone(), at.line),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(places, [("bad.js".to_string(), 3), ("throws.js".to_string(), 3), ("worse.js".to_string(), 1)]);
    // One line each, starting with the place.
    assert!(lines[0].starts_with("bad.js:3:"), "{}", lines[0]);
    assert!(lines[1].starts_with("throws.js:3:") && lines[1].contains("TypeError"), "{}", lines[1]);
    assert!(lines.iter().all(|l| !l.contains('\n')));
}

#[test]
fn functions_are_found_across_files() {
    let scripts = Scripts::compile(&[
        ("a.js", "function sign(req) {}\nvar helper = function () {};\nconst hidden = () => 1;\n"),
        // A later file may use an earlier file's functions at top level.
        ("b.js", "function check(res) { return helper(); }\nvar ready = typeof sign;\n"),
    ])
    .expect("compiles");
    assert_eq!(scripts.functions(), ["sign", "helper", "check"]);
    // Top-level const is not on the global object: not a hook.
    assert!(!scripts.has("hidden"));
    // Library names are not the script's.
    assert!(!scripts.has("perfops") && !scripts.has("parseInt"));
    assert!(scripts.has("check"));
    assert_eq!(scripts.name(scripts.hook("check").unwrap()), "check");
    assert_eq!(scripts.files().map(|(n, _)| n).collect::<Vec<_>>(), ["a.js", "b.js"]);
    // Equal when the files are; a clone shares them.
    assert_eq!(scripts.clone(), scripts);
    assert_ne!(Scripts::compile(&[("a.js", "function sign(req) {}")]).unwrap(), scripts);
}

#[test]
fn endless_top_level_code_is_a_compile_error() {
    let errors = Scripts::compile(&[("loop.js", "for (;;) {}")]).expect_err("never ends");
    assert!(errors[0].to_string().contains("call time limit"), "{}", errors[0]);
}

#[test]
fn scripts_are_shared_between_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let scripts = Scripts::compile(&[("a.js", "function f() { vars.t = 'ok'; }")]).unwrap();
    send_sync(&scripts);
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let scripts = scripts.clone();
            std::thread::spawn(move || {
                let mut rt = Runtime::new(&scripts, Limits::default(), i, Clock::frozen(0)).unwrap();
                let mut state = perfops_script::FlowState::default();
                rt.step(scripts.hook("f").unwrap(), &mut state).unwrap();
                state.vars["t"].clone()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), "ok");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any text compiles or errors, never panics; errors are one line.
    #[test]
    fn any_source_compiles_or_errors(src in ".{0,200}") {
        if let Err(errors) = Scripts::compile(&[("p.js", src.as_str())]) {
            prop_assert!(!errors.is_empty());
            for e in errors {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }

    /// Text made of JS's own tokens (more likely to get past the parser and run).
    #[test]
    fn token_soup_compiles_or_errors(tokens in proptest::collection::vec(
        prop::sample::select(vec!["function", "f", "(", ")", "{", "}", "return", "var", "x", "=", ";",
            "1", "'s'", "+", "[", "]", "throw", "null", ".", "new", "Error", "while", "false", "=>", ","]), 0..40)) {
        let src = tokens.join(" ");
        let _ = Scripts::compile(&[("t.js", src.as_str())]);
    }
}
