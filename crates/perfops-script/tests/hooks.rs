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
