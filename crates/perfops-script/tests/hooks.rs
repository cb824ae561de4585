//! The hooks' contract, end to end through the public API: what each kind of hook receives,
//! what it may change, and what it decides.

use perfops_script::{Clock, FlowState, Limits, Next, RequestParts, ResponseView, Runtime, Scripts, Verdict};

const NOW_MS: u64 = 1_764_400_000_000;

fn runtime(src: &str) -> Runtime {
    let scripts = Scripts::compile(&[("hooks.js", src)]).expect("compiles");
    Runtime::new(&scripts, Limits::default(), 7, Clock::frozen(NOW_MS)).expect("runtime")
}

fn request() -> RequestParts {
    RequestParts {
        method: "POST".into(),
        path: "/orders".into(),
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: br#"{"qty":2}"#.to_vec(),
    }
}

#[test]
fn request_hook_signs_and_saves() {
    let mut rt = runtime(
        r#"
        function sign(req) {
          const ts = String(Date.now());
          req.headers["X-Signature"] = perfops.hmac("sha256", vars.key, req.method + req.path + ts + req.body, "hex");
          req.headers["X-Timestamp"] = ts;
          vars.signed = arrival;
        }
        "#,
    );
    let hook = rt.scripts().hook("sign").expect("hook");
    let mut state = FlowState { arrival: 42, ..FlowState::default() };
    state.vars.insert("key".into(), "k".into());
    let mut req = request();
    rt.before_request(hook, &mut state, &mut req).expect("call");
    let ts = NOW_MS.to_string();
    assert!(req.headers.contains(&("X-Timestamp".into(), ts)));
    assert_eq!(req.body, br#"{"qty":2}"#);
    assert_eq!(state.vars.get("signed").map(String::as_str), Some("42"));
    assert!(req.headers.iter().any(|(n, v)| n == "X-Signature" && v.len() == 64));
}

#[test]
fn response_hook_verdicts() {
    let mut rt = runtime(
        r#"
        function check(res) {
          const page = JSON.parse(res.body);
          vars.next = page.next;
          if (res.status !== 200) return { ok: false, reason: "status " + res.status };
          return page.items.length > 0;
        }
        "#,
    );
    let hook = rt.scripts().hook("check").expect("hook");
    let cases: &[(u16, &str, Verdict, Option<&str>)] = &[
        // A page with items: success, and its `next` saved.
        (200, r#"{"items":[1],"next":"p2"}"#, Verdict { ok: true, reason: None }, Some("p2")),
        // An empty page: `false` fails without a reason; a null `next` removes the name.
        (200, r#"{"items":[],"next":null}"#, Verdict { ok: false, reason: None }, None),
        // An object verdict carries its reason.
        (503, r#"{"items":[],"next":"p9"}"#, Verdict { ok: false, reason: Some("status 503".into()) }, Some("p9")),
    ];
    for (status, body, want, next) in cases {
        let mut state = FlowState::default();
        let headers = [("Content-Type", "application/json")];
        let view = ResponseView { status: *status, headers: &headers, body: body.as_bytes() };
        let got = rt.after_response(hook, &mut state, view).expect("call");
        assert_eq!(&got, want, "{body}");
        assert_eq!(state.vars.get("next").map(String::as_str), *next, "{body}");
    }
}

#[test]
fn step_hook_picks_the_next_step() {
    let mut rt = runtime(
        r#"
        function route() {
          if (vars.cart === "0") return false;
          if (vars.cart === "1") return "pay";
        }
        "#,
    );
    let hook = rt.scripts().hook("route").expect("hook");
    let cases = [
        // An empty cart ends the flow.
        ("0", Next::End),
        // A full one goes to the named step.
        ("1", Next::Goto("pay".into())),
        // Anything else goes on.
        ("2", Next::Continue),
    ];
    for (cart, want) in cases {
        let mut state = FlowState::default();
        state.vars.insert("cart".into(), cart.into());
        assert_eq!(rt.step(hook, &mut state).expect("call").next, want, "cart {cart}");
    }
}

#[test]
fn what_a_request_hook_may_change() {
    let mut rt = runtime(
        r#"
        function fresh(req) { return { method: "PUT", path: "/v2" + req.path, headers: { A: ["1", 2] }, body: "new" }; }
        function keep(req) { req.headers["X-Seen"] = String(req.body.length); }
        function crlf(req) { req.headers["X-Evil"] = "a\r\nInjected: 1"; }
        function spaced(req) { req.path = "/a b"; }
        function method(req) { req.method = "GE T"; }
        function number(req) { req.body = 5; }
        "#,
    );
    let call = |rt: &mut Runtime, name: &str, req: &mut RequestParts| {
        let hook = rt.scripts().hook(name).expect(name);
        rt.before_request(hook, &mut FlowState::default(), req)
    };
    // A returned object replaces the request; an array value sends the header once per element.
    let mut req = request();
    call(&mut rt, "fresh", &mut req).unwrap();
    assert_eq!(
        req,
        RequestParts {
            method: "PUT".into(),
            path: "/v2/orders".into(),
            headers: vec![("A".into(), "1".into()), ("A".into(), "2".into())],
            body: b"new".to_vec(),
        }
    );
    // A body that is not UTF-8 and that the hook leaves alone keeps its bytes.
    let mut req = RequestParts { body: vec![0xff, 0xfe, b'x'], ..request() };
    call(&mut rt, "keep", &mut req).unwrap();
    assert_eq!(req.body, [0xff, 0xfe, b'x']);
    assert!(req.headers.contains(&("X-Seen".into(), "3".into())));
    // Values that would split a request line or a header are refused, and the request is left
    // as it was.
    for name in ["crlf", "spaced", "method", "number"] {
        let mut req = request();
        let err = call(&mut rt, name, &mut req).expect_err(name);
        assert!(matches!(err, perfops_script::ScriptError::BadReturn { .. }), "{name}: {err}");
        assert_eq!(req, request(), "{name}");
    }
}

#[test]
fn vars_rows_and_arrival() {
    let mut rt = runtime(
        r#"
        function save() {
          vars.n = 5; vars.b = true; vars.o = { a: [1, "x"] }; vars.user = row.users.email;
          vars.seq = arrival; delete vars.gone; vars.cleared = null;
        }
        function bad() { vars.f = function () {}; }
        function replaced() { vars = { only: "this" }; }
        "#,
    );
    let mut state = FlowState {
        arrival: 9,
        rows: vec![("users".into(), vec![("email".into(), "a@example.test".into())])],
        ..FlowState::default()
    };
    state.vars.insert("gone".into(), "x".into());
    state.vars.insert("cleared".into(), "x".into());
    state.vars.insert("kept".into(), "k".into());
    let hook = rt.scripts().hook("save").unwrap();
    rt.step(hook, &mut state).unwrap();
    let want: Vec<(&str, &str)> = vec![
        // A boolean and a number as JS writes them.
        ("b", "true"),
        // Untouched values stay.
        ("kept", "k"),
        ("n", "5"),
        // An object as JSON.
        ("o", r#"{"a":[1,"x"]}"#),
        ("seq", "9"),
        // A feeder's column.
        ("user", "a@example.test"),
    ];
    let got: Vec<(&str, &str)> = state.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, want);
    // A function cannot be saved: the call fails and saves nothing.
    let before = state.clone();
    let err = rt.step(rt.scripts().hook("bad").unwrap(), &mut state).unwrap_err();
    assert!(err.to_string().contains("vars.f"), "{err}");
    assert_eq!(state, before);
    // `vars` replaced by another object: that object is what is saved.
    rt.step(rt.scripts().hook("replaced").unwrap(), &mut state).unwrap();
    assert_eq!(state.vars.len(), 1);
}

#[test]
fn take_spent_counts_the_time_in_calls() {
    let mut rt = runtime("function busy() { let x = 0; for (let i = 0; i < 200000; i++) x += i; vars.x = x; }");
    let hook = rt.scripts().hook("busy").unwrap();
    assert_eq!(rt.take_spent(), std::time::Duration::ZERO);
    let started = std::time::Instant::now();
    rt.step(hook, &mut FlowState::default()).unwrap();
    let outside = started.elapsed();
    let spent = rt.take_spent();
    assert!(spent > std::time::Duration::ZERO && spent <= outside, "{spent:?} of {outside:?}");
    // Taking resets.
    assert_eq!(rt.take_spent(), std::time::Duration::ZERO);
}

#[test]
fn console_output_is_kept_for_the_caller_and_bounded() {
    let mut rt = runtime(
        "function talk() { console.log('arrival', arrival, { a: 1 }); console.error(new Error('x').message); }\nfunction chatty() { for (let i = 0; i < 150; i++) console.log(i); }",
    );
    let talk = rt.scripts().hook("talk").unwrap();
    rt.step(talk, &mut FlowState { arrival: 3, ..FlowState::default() }).unwrap();
    // Values as console.log shows them: text as is, objects as JSON.
    assert_eq!(rt.take_log(), (vec!["arrival 3 {\"a\":1}".to_string(), "x".to_string()], 0));
    // Taken: empty again.
    assert_eq!(rt.take_log(), (vec![], 0));
    // Past the bound, lines are counted, not kept.
    rt.step(rt.scripts().hook("chatty").unwrap(), &mut FlowState::default()).unwrap();
    let (lines, dropped) = rt.take_log();
    assert_eq!((lines.len(), dropped), (perfops_script::LOG_LINES, 50));
}

/// 15,000 calls of `sign`, each of a flow instance of its own: the heap after 15k is at most
/// 64 KiB above what it was after 5k.
fn assert_heap_flat(rt: &mut Runtime) {
    let hook = rt.scripts().hook("sign").unwrap();
    let mut sizes = Vec::new();
    for round in 0..3 {
        for i in 0..5_000u64 {
            let mut state = FlowState { arrival: round * 5_000 + i, ..FlowState::default() };
            rt.before_request(hook, &mut state, &mut request()).unwrap();
        }
        sizes.push(rt.memory_bytes());
    }
    assert!(sizes[2] <= sizes[0] + (64 << 10), "heap after 5k, 10k, 15k calls: {sizes:?}");
}

#[test]
fn memory_does_not_grow_with_calls() {
    // Many flow instances, each with its own state, through one runtime: the heap stays flat.
    let mut rt = runtime(
        "function sign(req) { vars.sig = perfops.hmac('sha256', 'k', req.body + arrival); req.headers.x = vars.sig; }",
    );
    assert_heap_flat(&mut rt);
}

#[test]
fn names_new_on_every_call_do_not_grow_the_heap() {
    // A runtime keeps the object shapes of the property names its calls show, a bounded number
    // of sequences: a hook whose header and saved names differ on every call must not grow it.
    let mut rt = runtime("function sign(req) { vars['v' + arrival] = 1; req.headers['X-' + arrival] = 'a'; }");
    assert_heap_flat(&mut rt);
}

#[test]
fn changes_to_vars_are_seen_however_small() {
    let mut rt = runtime(
        r#"
        function swap() { delete vars.a; vars.b = "2"; }
        function same_text() { vars.a = "1"; }
        function reads() { return vars.a === "1" ? undefined : false; }
        function repeated(req) { vars.h = JSON.stringify(req.headers.A) + JSON.stringify(req.headers.B); }
        "#,
    );
    let start = || {
        let mut state = FlowState::default();
        state.vars.insert("a".into(), "1".into());
        state
    };
    let cases: &[(&str, &[(&str, &str)])] = &[
        // One name deleted and another added: as many keys as before, still a change.
        ("swap", &[("b", "2")]),
        // The same text written again: the value is the same.
        ("same_text", &[("a", "1")]),
        // Only read: nothing changes.
        ("reads", &[("a", "1")]),
    ];
    for (name, want) in cases {
        let mut state = start();
        rt.step(rt.scripts().hook(name).unwrap(), &mut state).unwrap();
        let got: Vec<(&str, &str)> = state.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, *want, "{name}");
    }
    // A repeated request header reaches JS as an array of its values, in order.
    let mut state = FlowState::default();
    let mut req = RequestParts {
        headers: vec![("A".into(), "1".into()), ("B".into(), "x".into()), ("A".into(), "2".into())],
        ..request()
    };
    rt.before_request(rt.scripts().hook("repeated").unwrap(), &mut state, &mut req).unwrap();
    assert_eq!(state.vars["h"], r#"["1","2"]"x""#);
    // The hook changed no header: they go back as they came, grouped by name.
    assert_eq!(req.headers, [("A".to_string(), "1".to_string()), ("A".into(), "2".into()), ("B".into(), "x".into())]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any saved values (any text, any names but with NUL) cross into JS and back unchanged,
    /// whether the hook leaves `vars` alone or rewrites every value with a copy. (A name is cut
    /// at a NUL on its way back: QuickJS hands property names out as C strings. The scenario's
    /// names are letters, digits and `_`.)
    #[test]
    fn vars_cross_unchanged(vars in proptest::collection::btree_map("[^\\x00]{0,12}", ".{0,40}", 0..8)) {
        let mut rt = runtime("function leave() {}\nfunction rewrite() { for (const k of Object.keys(vars)) vars[k] = (' ' + vars[k]).slice(1); }");
        for name in ["leave", "rewrite"] {
            let mut state = FlowState { vars: vars.clone(), ..FlowState::default() };
            rt.step(rt.scripts().hook(name).unwrap(), &mut state).unwrap();
            proptest::prop_assert_eq!(&state.vars, &vars, "{}", name);
        }
    }
}
