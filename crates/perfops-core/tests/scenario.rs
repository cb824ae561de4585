//! Scenario parsing: good files decode to the right values; each kind of
//! mistake is reported at its line and column with a hint, all at once; and
//! no input makes the parser panic (issue #3).

use std::time::Duration;

use perfops_core::scenario::{
    Body, DemoModel, HttpVersion, Load, Override, PoolMax, ProcessWatch, PromqlAuth, TargetSpec, parse,
};
use proptest::prelude::*;

const SEED_A: &str = include_str!("../../../examples/orders.yaml");

#[test]
fn seed_scenario_a_decodes() {
    let s = parse("orders.yaml", SEED_A, &[]).unwrap_or_else(|d| panic!("{}", d.render(SEED_A)));
    assert_eq!(s.name, "orders");
    let settings =
        |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    assert_eq!(
        s.target,
        TargetSpec::Demo(DemoModel::Threads, settings(&[("workers", "2"), ("threads", "5"), ("io_wait", "50ms")]))
    );
    assert_eq!(s.setup.len(), 1);
    assert_eq!(s.setup[0].save[0].0, "token");
    let weights: Vec<(&str, u32)> = s.flows.iter().map(|f| (f.name.as_str(), f.weight)).collect();
    assert_eq!(weights, vec![("refresh-token", 1), ("list-orders", 1000)], "1 login per 1000 order lists");
    let orders = &s.flows[1].steps[0];
    assert_eq!((orders.method.as_str(), orders.path.source()), ("GET", "/orders"));
    assert_eq!(orders.headers[0].1.source(), "Bearer ${token}");
    assert!(matches!(s.flows[0].steps[0].body, Body::Json(_)));
    let Load::Open { stages, max_in_flight, .. } = &s.load else { panic!("open model expected") };
    assert_eq!(*max_in_flight, 1000);
    let rates: Vec<f64> = stages.iter().map(|st| st.segment.from.as_f64()).collect();
    assert_eq!(rates, vec![50.0, 100.0, 150.0, 200.0, 250.0, 300.0]);
    assert_eq!(s.load.duration(), Duration::from_secs(30));
    assert_eq!(s.slo.len(), 3);
    assert_eq!(s.abort_when[0].window, Duration::from_secs(5));
}

/// #14: `target: h2c://`, `defaults.protocol` and `defaults.http2` decode.
#[test]
fn http2_defaults_decode() {
    let text = r#"
target: h2c://127.0.0.1:8080
defaults:
  protocol: h2
  http2: { streams: 10, connections: 50, stream_window: 1048576, connection_window: 16777216 }
flows: { home: { steps: [ { request: GET / } ] } }
load: { stages: [ { rate: 10, hold: 1s } ] }
"#;
    let s = parse("h2.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    assert_eq!(s.target, TargetSpec::Url("h2c://127.0.0.1:8080".into()));
    assert_eq!(s.defaults.protocol, Some(HttpVersion::H2));
    let h = s.defaults.http2;
    assert_eq!(
        (h.streams, h.connections, h.stream_window, h.connection_window),
        (Some(10), Some(50), Some(1 << 20), Some(16 << 20))
    );
    let plain = "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let s = parse("p.yaml", plain, &[]).unwrap_or_else(|d| panic!("{}", d.render(plain)));
    assert_eq!(s.defaults.protocol, None, "the scheme decides when nothing is said");
    assert_eq!(s.defaults.http2.streams, None);
}

/// `defaults.cookies`: on unless said false, a word other than true or false refused where it is.
#[test]
fn cookies_are_on_unless_turned_off() {
    let scenario = |defaults: &str| {
        format!(
            "target: http://h:1\n{defaults}flows: {{ a: {{ steps: [ {{ request: GET / }} ] }} }}\nload: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n"
        )
    };
    // (defaults line, cookies on)
    let cases = [
        ("", true),                                // nothing said: on, as in browsers and k6
        ("defaults: { cookies: true }\n", true),   // said
        ("defaults: { cookies: false }\n", false), // turned off
        ("defaults: { timeout: 2s }\n", true),     // other defaults leave it on
    ];
    for (line, on) in cases {
        let text = scenario(line);
        let s = parse("c.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
        assert_eq!(s.defaults.cookies, on, "{line:?}");
    }
    let text = scenario("defaults: { cookies: sometimes }\n");
    let d = parse("c.yaml", &text, &[]).expect_err("not a boolean").render(&text);
    assert!(d.contains("2:22") && d.contains("`sometimes` is not true or false"), "{d}");
}

#[test]
fn stages_ramps_and_closed_users() {
    let text = r#"
target: http://127.0.0.1:8080
flows: { home: { steps: [ { request: GET / } ] } }
load:
  stages:
    - { rate: 10, hold: 10s }            # 10/s
    - { ramp_to: 100, over: 1m }         # from the previous rate
    - { name: peak, rate: 100, hold: 30s }
    - { rate: 5, ramp_to: 20, over: 10s } # explicit start
"#;
    let s = parse("ramps.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let stages = s.load.stages();
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["10/s", "ramp 10→100/s", "peak", "ramp 5→20/s"]);
    assert_eq!((stages[1].segment.from.as_f64(), stages[1].segment.to.as_f64()), (10.0, 100.0));
    assert_eq!(s.name, "ramps", "the file name is the default scenario name");

    let closed = r#"
target: https://127.0.0.1:8443
flows: { home: { steps: [ { request: GET /, pause: 200ms } ] } }
load: { model: closed, think: 1s, stages: [ { users: 5, hold: 10s }, { ramp_to: 20, over: 10s } ] }
"#;
    let s = parse("closed.yaml", closed, &[]).unwrap_or_else(|d| panic!("{}", d.render(closed)));
    let Load::Closed { stages, think } = &s.load else { panic!("closed model expected") };
    assert_eq!(*think, Duration::from_secs(1));
    assert_eq!(stages[1].name, "ramp 5→20 users");
    assert_eq!(s.flows[0].steps[0].pause, Duration::from_millis(200));
}

#[test]
fn overrides_replace_fields_and_are_validated() {
    let over = |p: &str| p.parse::<Override>().unwrap();
    let s = parse("orders.yaml", SEED_A, &[over("load.max_in_flight=100"), over("target=http://127.0.0.1:9")]).unwrap();
    assert!(matches!(s.load, Load::Open { max_in_flight: 100, .. }));
    assert_eq!(s.target, TargetSpec::Url("http://127.0.0.1:9".into()));
    let err = parse("orders.yaml", SEED_A, &[over("load.max_in_flight=lots")]).unwrap_err();
    assert_eq!(err.0[0].file, "--set");
    assert!(err.0[0].message.contains("`lots` is not a whole number"), "{}", err.0[0].message);
    assert!("no-equals".parse::<Override>().is_err());
}

/// (file text, expected "line:column: message fragment" for each error, in order)
#[test]
fn every_error_at_once_with_its_position() {
    let cases: &[(&str, &[&str])] = &[
        // a typo in a field name, with a suggestion
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 5, hodl: 1s } ] }\n",
            &["3:30: unknown field `hodl`"],
        ),
        // several problems in one file: all reported, in source order
        (
            "target: nowhere\nflows: { a: { weight: 0, steps: [ { request: FETCH / } ] } }\nload: { stages: [ { rate: -1, hold: 1s } ] }\n",
            &[
                "1:9: `nowhere` is not a target",
                "2:23: a weight of 0",
                "2:46: unknown method `FETCH`",
                "3:27: rate must be",
            ],
        ),
        // required fields missing
        ("name: x\n", &["1:1: missing field `target`", "1:1: missing field `flows`", "1:1: missing field `load`"]),
        // a variable never saved, pointed at inside its string
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: \"GET /o/${id}\" } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:43: `${id}` is never saved"],
        ),
        // a value saved only by another flow: that flow's arrival keeps it to itself
        (
            "target: http://h:1\nflows:\n  a: { steps: [ { request: GET /l, save: { t: $.t } } ] }\n  b: { steps: [ { request: \"GET /o/${t}\" } ] }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["4:36: `${t}` is saved only by flow `a`: each arrival of a flow has its own saved values"],
        ),
        // used by the step that saves it, and before the step of its flow that saves it
        (
            "target: http://h:1\nflows:\n  a: { steps: [ { request: \"GET /${t}\", save: { t: $.t } }, { request: GET /, save: { u: $.u } } ] }\n  b: { steps: [ { request: \"GET /${u}\" }, { request: GET /, save: { u: $.u } } ] }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &[
                "3:34: `${t}` is saved from this step's own answer",
                "4:34: `${u}` is used before it is saved: flows.b.steps[1] saves it",
            ],
        ),
        // setup runs before the flows: it reads only its own earlier steps
        (
            "target: http://h:1\nsetup: [ { request: \"GET /${t}\" } ]\nflows:\n  a: { steps: [ { request: GET /l, save: { t: $.t } } ] }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:27: setup runs before any flow: `${t}` is saved only by flow `a`"],
        ),
        // YAML syntax errors stop early but still have a position
        ("target: [unclosed\n", &["2:1: YAML syntax"]),
        // a duplicate key
        ("target: http://h:1\ntarget: http://h:2\n", &["2:1: `target` appears twice"]),
        // SLO lines are checked too
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\nslo: [ \"p95 < 500\" ]\n",
            &["4:15: `500` needs a unit"],
        ),
        // demo settings are checked
        (
            "target: demo:threads?io_wiat=5ms\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["1:9: unknown demo setting `io_wiat`"],
        ),
        // a watched metric with nothing watched could never fail: refused (issue #4)
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\nslo: [ \"metric(backlog) < 5\" ]\n",
            &["4:9: `metric(backlog)` needs watched metrics"],
        ),
        // a step name that no step has could never be measured: refused, in the SLO and in abort_when
        (
            "target: http://h:1\nflows: { a: { steps: [ { name: home, request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\nslo: [ \"p99(hmoe) < 1s\", \"p99(home, ok) < 1s\" ]\nabort_when: [ \"errors(nope) > 5% for 5s\" ]\n",
            &["4:13: no step is named `hmoe`", "5:23: no step is named `nope`"],
        ),
        // watch: and probe: are checked like the rest
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\nwatch: { prometheus: [ metrics ], process: { pid: 1, port: 2 }, evry: 1s }\nprobe: { liveness: { path: /h, failure_treshold: 2 } }\n",
            &[
                "4:24: `metrics` is neither a URL nor a path",
                "4:44: give the process by `pid` or by `port`",
                "4:65: unknown field `evry`",
                "5:32: unknown field `failure_treshold`",
            ],
        ),
        // #15: watch.promql is checked like the rest: a URL, queries by plain names, one way to
        // authenticate, an aggregate this version knows
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\nwatch: { promql: { url: prometheus:9090, queries: { 'a{b}': up, c: '' }, bearer_env: T, user: u } }\nslo: [ \"avg(metric(c)) < 1\" ]\n",
            &[
                "4:18: give either `bearer_env`, or `user` with `password_env`",
                "4:25: `prometheus:9090` is not an absolute http(s) URL",
                "4:53: `a{b}` cannot name a series",
                "4:68: an empty query",
                "5:9: `avg(metric(...))`: unknown aggregate",
            ],
        ),
        // #14: the HTTP knobs: a protocol this version knows, streams and windows in HTTP/2's bounds
        (
            "target: h2c://h:1\ndefaults: { protocol: h3, http2: { streams: 0, stream_window: 10, conections: 5 } }\nflows: { a: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &[
                "2:23: unknown protocol `h3`",
                "2:45: 0 is out of range",
                "2:63: 10 is out of range (65535",
                "2:67: unknown field `conections`",
            ],
        ),
        // #14: gRPC steps: a method that is not package.Service/Method, HTTP fields in a gRPC
        // step, an unknown status, gRPC fields in an HTTP step
        (
            "target: grpc://h:1\nflows: { a: { steps: [ { grpc: bench.Echo, headers: { a: b } } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:32: `bench.Echo` is not `package.Service/Method`", "2:44: `headers` is not part of a gRPC step"],
        ),
        // a malformed method still has the step's other fields checked
        (
            "target: grpc://h:1\nflows: { a: { steps: [ { grpc: bench.Echo, pause: soon } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:32: `bench.Echo` is not `package.Service/Method`", "2:51: `soon` is not a duration"],
        ),
        (
            "target: grpc://h:1\nflows: { a: { steps: [ { grpc: bench.Echo/Say, message: { t: \"${seq}\" }, expect: { grpc_status: UNAVAILABL } }, { request: GET /, metadata: { a: b } } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:97: unknown gRPC status `UNAVAILABL`", "2:131: `metadata` belongs to a gRPC step"],
        ),
        // `stream:` reads an HTTP answer as events: on a gRPC step it was silently ignored
        (
            "target: grpc://h:1\nflows: { a: { steps: [ { grpc: bench.Echo/Say, stream: true } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:48: `stream` does not belong to a gRPC step"],
        ),
        // `save` from events needs a step that reads them; with `stream:` it is one
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: GET /, save: { a: last_event } }, { request: GET /, stream: true, save: { b: 'event:$.id' } } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:53: `last_event` reads the events of a streamed answer, and this step has no `stream:`"],
        ),
        // a step whose request line is malformed or missing still has its other fields
        // checked: the pause and the status are reported with it
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: FETCH, pause: 2 parsecs }, { expect: { status: 20O } } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &[
                "2:35: `FETCH` is not `METHOD /path`",
                "2:49: `2 parsecs` is not a duration",
                "2:64: missing field `request`",
                "2:82: `20O` is not an HTTP status",
            ],
        ),
        // bodies are exclusive
        (
            "target: http://h:1\nflows: { a: { steps: [ { request: POST /, json: {a: 1}, body: x } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &["2:24: a step has one body"],
        ),
    ];
    for (text, want) in cases {
        let errors = parse("t.yaml", text, &[]).expect_err(text).0;
        let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
        assert_eq!(got.len(), want.len(), "for\n{text}\ngot {got:#?}");
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(g.starts_with(w), "for\n{text}\ngot {g:?}, want it to start with {w:?}");
        }
        assert!(errors.iter().all(|e| e.file == "t.yaml"));
    }
}

/// #14: a `websocket:` step decodes its path, messages, hold and period;
/// its mistakes are reported at their line and column, all at once.
#[test]
fn websocket_steps_decode_and_their_mistakes_are_placed() {
    let text = "target: ws://127.0.0.1:9/\nflows:\n  chat:\n    steps:\n      - { name: chat, websocket: /ws, send: [\"hello ${seq}\", bye], expect: { message_contains: hello }, hold: 30s, every: 10s }\n      - { websocket: /one, send: ping }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let s = parse("t.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let chat = &s.flows[0].steps[0];
    let ws = chat.websocket.as_ref().expect("a websocket step");
    assert_eq!((chat.name.as_str(), chat.method.as_str(), chat.path.source()), ("chat", "GET", "/ws"));
    let sent: Vec<&str> = ws.send.iter().map(|t| t.source()).collect();
    assert_eq!(sent, vec!["hello ${seq}", "bye"]);
    assert_eq!((ws.hold, ws.every), (Duration::from_secs(30), Some(Duration::from_secs(10))));
    assert_eq!(chat.expect.as_ref().and_then(|e| e.message_contains.as_deref()), Some("hello"));
    let one = &s.flows[0].steps[1];
    assert_eq!(one.name, "websocket /one", "named after its path by default");
    let ws = one.websocket.as_ref().expect("a websocket step");
    assert_eq!((ws.send.len(), ws.hold, ws.every), (1, Duration::ZERO, None), "one message, closed once answered");

    let head = "target: ws://h:1/\nload: { stages: [ { rate: 1, hold: 1s } ] }\nflows: { a: { steps: [ ";
    let cases: &[(&str, &[&str])] = &[
        // a request and a websocket in one step
        ("{ websocket: /ws, request: GET / }", &["3:42: `request` does not belong to a `websocket:` step"]),
        // a bad hold, and an `every` without a hold
        ("{ websocket: /ws, send: x, hold: soon }", &["3:57: `soon`"]),
        ("{ websocket: /ws, send: x, every: 1s }", &["3:58: `every` repeats the messages during `hold`"]),
        // a path that is not one
        ("{ websocket: ws }", &["3:37: `ws`: the path must start with `/`"]),
        // WebSocket fields on an HTTP step, and an HTTP check on a WebSocket step
        ("{ request: GET /, hold: 5s }", &["3:42: `hold` belongs to a `websocket:` step"]),
        ("{ websocket: /ws, send: x, expect: { status: 200 } }", &["3:61: `status` does not fit this step"]),
        // `stream:` reads an HTTP answer as events: on a WebSocket step it was silently ignored
        ("{ websocket: /ws, send: x, stream: true }", &["3:51: `stream` does not belong to a `websocket:` step"]),
        // an expectation with nothing to expect it of
        ("{ websocket: /ws, expect: { message_contains: x } }", &["3:42: `expect` looks at the replies"]),
    ];
    for (step, want) in cases {
        let text = format!("{head}{step} ] }} }}\n");
        let errors = parse("t.yaml", &text, &[]).expect_err(&text).0;
        let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
        assert_eq!(got.len(), want.len(), "for\n{text}\ngot {got:#?}");
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(g.starts_with(w), "for\n{text}\ngot {g:?}, want it to start with {w:?}");
        }
    }
}

#[test]
fn watch_and_probe_decode_with_kubernetes_defaults() {
    let text = r#"
target: http://127.0.0.1:8080
flows: { home: { steps: [ { request: GET / } ] } }
load: { stages: [ { rate: 10, hold: 10s } ] }
slo: [ "metric(puma_backlog) < 100" ]
watch:
  prometheus: /metrics                  # one, without a list
  json: [ { url: "http://127.0.0.1:9000/stats", fields: { gvl: $.avg_gvl_vs_running } } ]
  process: { port: 8080 }
  pool: { busy: puma_busy_threads, max: 10 }
  every: 1s
probe:
  liveness: { path: /health, timeout: 2s }
"#;
    let s = parse("w.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let w = s.watch.expect("watch");
    assert_eq!(w.prometheus, vec!["/metrics"]);
    assert_eq!((w.json[0].url.as_str(), w.json[0].fields[0].0.as_str()), ("http://127.0.0.1:9000/stats", "gvl"));
    assert_eq!(w.process, Some(ProcessWatch::Port(8080)));
    assert_eq!(w.pool.expect("pool").max, PoolMax::Value(10.0));
    assert_eq!(w.every, Duration::from_secs(1));
    let l = s.probe.liveness.expect("liveness");
    // Kubernetes' defaults where the file says nothing.
    assert_eq!(
        (l.period, l.timeout, l.failure_threshold, l.success_threshold),
        (Duration::from_secs(10), Duration::from_secs(2), 3, 1)
    );
    assert!(s.probe.readiness.is_none());
}

#[test]
fn promql_watch_decodes() {
    let text = r#"
target: http://127.0.0.1:8080
flows: { home: { steps: [ { request: GET / } ] } }
load: { stages: [ { rate: 10, hold: 10s } ] }
slo: [ "max(metric(busy)) < 10" ]
abort_when: [ "increase(metric(restarts)) > 0 for 1s" ]
watch:
  promql:
    url: https://prometheus.example:9090/
    every: 5s
    queries: { busy: 'sum(puma_busy_threads)', restarts: 'sum(kube_pod_container_status_restarts_total{pod=~"orders-.*"})' }
    user: perfops
    password_env: PROM_PASSWORD
    ca_file: ca.pem
  chart: busy
"#;
    let s = parse("p.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let w = s.watch.expect("watch");
    let p = w.promql.expect("promql");
    assert_eq!(p.url, "https://prometheus.example:9090", "the trailing slash is dropped");
    assert_eq!((p.every, p.timeout), (Some(Duration::from_secs(5)), None));
    assert_eq!(p.queries[1].0, "restarts");
    assert!(p.queries[1].1.contains(r#"pod=~"orders-.*""#));
    assert_eq!(p.auth, PromqlAuth::Basic { user: "perfops".into(), password_env: "PROM_PASSWORD".into() });
    assert_eq!(p.ca_file.as_deref(), Some("ca.pem"));
    assert_eq!(w.chart, ["busy"], "one name without a list");
    assert_eq!(perfops_core::scenario::chart_picks(text), ["busy"], "the report reads the same");
}

#[test]
fn hints_name_the_likely_fix() {
    let text = "target: http://h:1\nflows: { a: { steps: [ { request: GET /, heders: {} } ] } }\nload: { stages: [ { rampto: 5, over: 1s } ] }\n";
    let errors = parse("t.yaml", text, &[]).unwrap_err().0;
    let hints: Vec<&str> = errors.iter().filter_map(|e| e.hint.as_deref()).collect();
    assert_eq!(hints, vec!["did you mean `headers`?", "did you mean `ramp_to`?"]);
    assert_eq!(errors[0].path, "flows.a.steps[0].heders");
}

proptest! {
    /// Whatever the bytes, the parser answers with a scenario or diagnostics.
    #[test]
    fn never_panics_on_arbitrary_text(text in "\\PC{0,300}") {
        let _ = parse("fuzz.yaml", &text, &[]);
    }

    /// Mutations of a valid file (a character replaced) never panic either.
    #[test]
    fn never_panics_on_mutated_scenarios(at in 0usize..1500, c in prop::char::any()) {
        let mut text: Vec<char> = SEED_A.chars().collect();
        let i = at % text.len();
        text[i] = c;
        let text: String = text.into_iter().collect();
        let _ = parse("fuzz.yaml", &text, &[]);
    }
}

/// #31 point 5: YAML turns `\r`, `\n`, `\0` (and `\x0a`, `\u000d`...) in double quotes into control
/// characters; in a path, a header value or gRPC metadata they would end the line and smuggle a
/// header or a request. `check` refuses them at the column of their escape, with a hint.
#[test]
fn crlf_and_nul_in_a_request_head_are_refused_where_written() {
    const LOAD: &str = "load: { stages: [ { rate: 1, hold: 1s } ] }\n";
    // (target, line 2 of the file, "line:column: message fragment")
    let cases: &[(&str, &str, &str)] = &[
        // A header value: points at the `\r`, not at the quote.
        (
            "http://h:1",
            r#"flows: { a: { steps: [ { request: GET /, headers: { X-A: "a\r\nX-Evil: 1" } } ] } }"#,
            "2:60: a header value cannot hold CR (\\r)",
        ),
        // The request's path: the whole `METHOD /path` is one scalar; the column is the escape's.
        (
            "http://h:1",
            r#"flows: { a: { steps: [ { request: "GET /o?t=x\r\nX-Evil: 1" } ] } }"#,
            "2:46: a request's path cannot hold CR (\\r)",
        ),
        // A WebSocket path, with NUL written as `\x00`.
        (
            "http://h:1",
            r#"flows: { a: { steps: [ { websocket: "/ws\x00" } ] } }"#,
            "2:41: a WebSocket path cannot hold NUL",
        ),
        // A default header; the escapes before it (`\u263a`, 6 columns) are counted as written.
        (
            "http://h:1",
            r#"defaults: { headers: { X-B: "\u263a \x0ab" } }"#,
            "2:37: a header value cannot hold LF (\\n)",
        ),
        // gRPC metadata is headers.
        (
            "grpc://h:1",
            r#"flows: { a: { steps: [ { grpc: bench.Echo/Say, metadata: { k: "v\0" } } ] } }"#,
            "2:65: a header value cannot hold NUL",
        ),
    ];
    for (target, line, want) in cases {
        let flows = if line.starts_with("flows") { "" } else { "flows: { a: { steps: [ { request: GET / } ] } }\n" };
        let text = format!("target: {target}\n{line}\n{flows}{LOAD}");
        let errors = parse("t.yaml", &text, &[]).expect_err(&text).0;
        let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
        assert!(got.len() == 1 && got[0].starts_with(want), "for\n{text}\ngot {got:#?}\nwant {want}");
        let hint = errors[0].hint.as_deref().unwrap_or_default();
        assert!(hint.contains("double quotes"), "{hint}");
    }
    // Single quotes keep a backslash as text: `'a\r\nb'` is six plain characters, and accepted.
    let text = format!(
        "target: http://h:1\nflows: {{ a: {{ steps: [ {{ request: GET /, headers: {{ X-A: 'a\\r\\nb' }} }} ] }} }}\n{LOAD}"
    );
    let s = parse("t.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
    assert_eq!(s.flows[0].steps[0].headers[0].1.source(), "a\\r\\nb");
    // A form body is not in the head: its values are percent-encoded, a line break is data.
    let text = format!(
        "target: http://h:1\nflows: {{ a: {{ steps: [ {{ request: POST /, form: {{ note: \"two\\nlines\" }} }} ] }} }}\n{LOAD}"
    );
    parse("t.yaml", &text, &[]).unwrap_or_else(|d| panic!("{}", d.render(&text)));
}

/// Issue #32 want 5: a `json:` leaf that is one `${...}` (quoted or not) is a whole value, typed when
/// sent; a conversion is checked where it is written: unknown, or where it would change nothing (a
/// path, a header, text around it), an error at its line and column with a hint.
#[test]
fn typed_values_decode_and_misplaced_conversions_are_placed() {
    use perfops_core::scenario::JsonPart;
    let text = "target: http://h:1\ndata: { orders: { csv: o.csv } }\nflows:\n  a:\n    steps:\n      - request: POST /o\n        json:\n          qty: ${orders.qty}\n          q2: \"${orders.qty:number}\"\n          id: \"n-${seq}\"\nload: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let s = parse("t.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let Body::Json(parts) = &s.flows[0].steps[0].body else { panic!("a json body") };
    let kinds: Vec<&str> = parts
        .iter()
        .map(|p| match p {
            JsonPart::Literal(_) => "lit",
            JsonPart::String(_) => "string",
            JsonPart::Value(_) => "value",
        })
        .collect();
    // qty and q2 are whole values; `n-${seq}` is text around a reference: a string.
    assert_eq!(kinds, ["lit", "value", "lit", "value", "lit", "string", "lit"]);
    // (line 2 of the file, "line:column: message fragment")
    let cases: &[(&str, &str)] = &[
        // An unknown conversion, in a json body: at its name.
        (
            r#"flows: { a: { steps: [ { request: POST /o, json: { q: "${seq:int}" } } ] } }"#,
            "2:62: unknown conversion `:int`",
        ),
        // A conversion in a path changes nothing there: at its `$`.
        (
            r#"flows: { a: { steps: [ { request: "GET /o/${seq:number}" } ] } }"#,
            "2:43: a conversion (`:string`, `:number`) only applies",
        ),
        // ... nor in a header value.
        (r#"flows: { a: { steps: [ { request: GET /, headers: { X-N: "${seq:string}" } } ] } }"#, "2:59: a conversion"),
    ];
    for (line, want) in cases {
        let text = format!("target: http://h:1\n{line}\nload: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n");
        let errors = parse("t.yaml", &text, &[]).expect_err(&text).0;
        let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
        assert!(got.len() == 1 && got[0].starts_with(want), "for\n{text}\ngot {got:#?}\nwant {want}");
        assert!(errors[0].hint.is_some(), "{:?}", errors[0]);
    }
}

/// Issue #32 want 7: a step with an error of its own (a misspelled `request`, a broken extractor)
/// still has its name and what it saves: an SLO line naming it and a later `${token}` it saves are not
/// second, false errors. Every real error is still reported.
#[test]
fn a_broken_step_does_not_make_its_references_errors() {
    // (the login step's broken line, the errors wanted as "line:column: message start")
    let cases: &[(&str, &[&str])] = &[
        // `reqest`: the step has no request; its name and its save still count.
        ("reqest: POST /login", &["5:9: missing field `request`", "6:9: unknown field `reqest`"]),
        // A request line without a path.
        ("request: POST login", &["6:18: `login`: the path must start with `/`"]),
    ];
    for (line, want) in cases {
        for save in ["$.token", "\"regex:(\""] {
            let text = format!(
                "target: http://h:1\nflows:\n  browse:\n    steps:\n      - name: login\n        {line}\n        save: {{ token: {save} }}\n      - {{ name: me, request: GET /me, headers: {{ Authorization: \"Bearer ${{token}}\" }} }}\nload: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\nslo: [ \"p95(login) < 500ms\", \"p95(me) < 500ms\" ]\n"
            );
            let errors = parse("t.yaml", &text, &[]).expect_err(&text).0;
            let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
            // A broken extractor is one more real error, at its place.
            let extra = usize::from(save.contains('('));
            assert_eq!(got.len(), want.len() + extra, "for\n{text}\ngot {got:#?}");
            for (g, w) in got.iter().zip(want.iter()) {
                assert!(g.starts_with(w), "for\n{text}\ngot {got:#?}\nwant {w}");
            }
            assert!(!got.iter().any(|g| g.contains("never saved") || g.contains("no step is named")), "{got:#?}");
        }
    }
}

/// An `openai: chat` step's body as JSON text, each template written as its source (`${seq}`
/// in a string stays a string; a whole-value template is quoted so the text parses).
fn llm_body(step: &perfops_core::scenario::Step) -> serde_json::Value {
    use perfops_core::scenario::JsonPart;
    let Body::Json(parts) = &step.body else { panic!("a json body") };
    let text: String = parts
        .iter()
        .map(|p| match p {
            JsonPart::Literal(l) => l.clone(),
            JsonPart::String(t) => t.source().to_string(),
            JsonPart::Value(t) => format!("\"{}\"", t.source()),
        })
        .collect();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn llm_steps_decode_to_a_chat_completion_and_their_mistakes_are_placed() {
    use perfops_core::scenario::{Llm, LlmApi};
    let text = "target: http://127.0.0.1:9\ndata: { q: { csv: q.csv } }\nflows:\n  chat:\n    steps:\n      - { name: ask, openai: chat, model: tiny, messages: [ { role: system, content: be brief }, { role: user, content: \"hello ${seq} ${q.text}\" } ], max_tokens: 32, params: { temperature: 0, seed: 7 }, headers: { Authorization: \"Bearer ${env.KEY}\" } }\n      - { openai: chat, model: \"${q.model}\", messages: [ { role: user, content: hi } ], stream: false, path: /openai/v1/chat/completions }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n";
    let s = parse("t.yaml", text, &[]).unwrap_or_else(|d| panic!("{}", d.render(text)));
    let ask = &s.flows[0].steps[0];
    assert_eq!((ask.name.as_str(), ask.method.as_str(), ask.path.source()), ("ask", "POST", "/v1/chat/completions"));
    assert_eq!(ask.llm, Some(Llm { api: LlmApi::Chat, stream: true, max_tokens: Some(32) }));
    // Streamed by default, asking for the usage in the last event; params after the step's own.
    assert_eq!(
        llm_body(ask),
        serde_json::json!({
            "model": "tiny",
            "messages": [ { "role": "system", "content": "be brief" }, { "role": "user", "content": "hello ${seq} ${q.text}" } ],
            "max_tokens": 32, "stream": true, "stream_options": { "include_usage": true },
            "temperature": 0, "seed": 7
        })
    );
    let heads: Vec<(&str, &str)> = ask.headers.iter().map(|(n, t)| (n.as_str(), t.source())).collect();
    assert_eq!(
        heads,
        [("content-type", "application/json"), ("accept", "text/event-stream"), ("Authorization", "Bearer ${env.KEY}")]
    );
    // Not streamed: one answer; a model from a feeder; its own path; named after its API.
    let one = &s.flows[0].steps[1];
    assert_eq!((one.name.as_str(), one.path.source()), ("openai chat", "/openai/v1/chat/completions"));
    assert_eq!(one.llm.map(|l| (l.stream, l.max_tokens)), Some((false, None)));
    assert_eq!(llm_body(one)["stream"], serde_json::json!(false));
    assert_eq!(llm_body(one)["model"], serde_json::json!("${q.model}"));

    let head = "target: http://h:1\nload: { stages: [ { rate: 1, hold: 1s } ] }\nflows: { a: { steps: [ ";
    let m = "messages: [ { role: user, content: hi } ]";
    let cases: Vec<(String, &[&str])> = vec![
        // an API that is not one
        (format!("{{ openai: embeddings, model: x, {m} }}"), &["3:34: unknown API `embeddings`"]),
        // no model, no messages
        ("{ openai: chat }".into(), &["3:26: missing field `model`", "3:26: missing field `messages`"]),
        // a role that is none, a message without content
        (
            "{ openai: chat, model: x, messages: [ { role: robot, content: hi }, { role: user } ] }".into(),
            &["3:70: unknown role `robot`", "3:92: a message needs a `content`"],
        ),
        // messages that are no list
        ("{ openai: chat, model: x, messages: hello }".into(), &["3:60: expected a list of messages"]),
        // no tokens asked for
        (format!("{{ openai: chat, model: x, {m}, max_tokens: 0 }}"), &["3:105: `max_tokens: 0` asks for no token"]),
        // a field of the step's own in params, and a request's field in an LLM step
        (
            format!("{{ openai: chat, model: x, {m}, params: {{ stream: false }} }}"),
            &["3:103: `stream` is the step's own field"],
        ),
        (
            format!("{{ openai: chat, model: x, {m}, request: GET / }}"),
            &["3:93: `request` is not part of an `openai:` step"],
        ),
        // an LLM step's field on an HTTP step
        ("{ request: GET /, max_tokens: 8 }".into(), &["3:42: `max_tokens` belongs to an `openai:` step"]),
    ];
    for (step, want) in cases {
        let text = format!("{head}{step} ] }} }}\n");
        let errors = parse("t.yaml", &text, &[]).expect_err(&text).0;
        let got: Vec<String> = errors.iter().map(|e| format!("{}:{}: {}", e.line, e.column, e.message)).collect();
        assert_eq!(got.len(), want.len(), "for\n{text}\ngot {got:#?}");
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(g.starts_with(w), "for\n{text}\ngot {g:?}, want it to start with {w:?}");
        }
    }
}
