//! End to end: steps with `stream:` run by the real `perfops` binary against
//! a real Server-Sent Events server on 127.0.0.1 (aiohttp with aiohttp-sse
//! from PyPI: `perfops_testkit::python::sse`, chunked `text/event-stream`
//! over HTTP/1.1; over HTTP/2, Debian's nginx in front of it passing each
//! piece on as it comes), judged by the results directory: events counted
//! exactly, the gaps of a paced server, a stall counted as its own kind, an
//! endless stream cut at the step's timeout, values saved from events, no
//! delayed ACK read into a paced stream.
//!
//! Each run is bounded to a few seconds at a few streams a second.

mod common;

use std::net::SocketAddr;

use common::{RUN_LIMIT, Run, Workdir, count, exclusive, num, shared};
use perfops_testkit as kit;
use serde_json::Value;

impl Run {
    /// `perfops run` on one step `step` against `url`, at `rate`/s for `secs`,
    /// with the step timeout `timeout`, waiting for the requests in flight.
    fn new(wd: &Workdir, url: &str, step: &str, rate: u32, secs: u32, timeout: &str) -> Run {
        Run::steps(wd, url, &[step], rate, secs, timeout, &[])
    }

    /// [`Run::new`] with a flow of `steps`, and `flags` for `perfops run`.
    fn steps(wd: &Workdir, url: &str, steps: &[&str], rate: u32, secs: u32, timeout: &str, flags: &[&str]) -> Run {
        let steps: String = steps.iter().map(|s| format!("      - {s}\n")).collect();
        let yaml = format!(
            "name: sse\ntarget: {url}\ndefaults: {{ timeout: {timeout} }}\nflows:\n  read:\n    steps:\n{steps}load:\n  stages: [ {{ rate: {rate}, hold: {secs}s }} ]\n"
        );
        let file = wd.scenario("sse.yaml", &yaml);
        let mut args = vec!["--wait-in-flight"];
        args.extend_from_slice(flags);
        Run::of(wd, wd.spawn("run", &file, &args, |_| {}).wait(RUN_LIMIT))
    }
}

/// Ten events 20 ms apart per answer: each answer counts exactly ten (not
/// its chunks, not its lines), the gaps' median is the server's 20 ms
/// within 5 ms, the first event comes at once and the stream lasts the nine
/// gaps; `expect` finds the last event in the body kept.
#[test]
fn events_are_counted_exactly_and_gaps_follow_the_server() {
    let _cpu = exclusive();
    let server = kit::python::sse();
    let wd = Workdir::new("sse-paced");
    // `expect` reads the stream's body as it came (chunks decoded): its last event's data.
    let step =
        "{ name: events, request: GET /events?n=10&every=20, stream: true, expect: { body_contains: 'data: done' } }";
    let run = Run::new(&wd, &server.url(0), step, 5, 2, "5s");
    assert!(matches!(run.out.code, Some(0 | 1)), "{}", run.context());
    let st = run.step("events");
    let ctx = format!("{st:#}\n{}", run.context());
    let answered = count(&st, "/completed");
    assert!(answered >= 8 && count(&st, "/failed") == 0, "{ctx}");
    // One value per answered stream, each exactly 10.
    assert_eq!(count(&st, "/events/count"), answered, "{ctx}");
    assert_eq!((num(&st, "/events/min"), num(&st, "/events/max")), (10.0, 10.0), "{ctx}");
    // Nine gaps per answer.
    assert_eq!(count(&st, "/event_gap_ms/count"), 9 * answered, "{ctx}");
    let gap = num(&st, "/event_gap_ms/p50");
    assert!((15.0..=25.0).contains(&gap), "median gap {gap} ms, the server's is 20 ms\n{ctx}");
    assert!(num(&st, "/first_event_ms/p50") < 15.0, "the first event is sent at once\n{ctx}");
    let stream = num(&st, "/stream_ms/p50");
    assert!((170.0..=230.0).contains(&stream), "a stream of nine 20 ms gaps lasted {stream} ms\n{ctx}");
}

/// A server that sends three events and then nothing, with the stream
/// open, fails each answer as `stream_stall` once 300 ms pass without an
/// event (not as a timeout: the step's is 5 s), and its three events count.
#[test]
fn a_stall_is_a_failure_of_its_own_kind() {
    let _cpu = shared();
    let server = kit::python::sse();
    let wd = Workdir::new("sse-stall");
    let step = "{ name: stalls, request: GET /stall?k=3&every=20, stream: { stall: 300ms } }";
    let run = Run::new(&wd, &server.url(0), step, 4, 2, "5s");
    let st = run.step("stalls");
    let ctx = format!("{st:#}\n{}", run.context());
    let sent = count(&st, "/sent");
    assert!(sent >= 6, "{ctx}");
    assert_eq!(count(&st, "/failures/stream_stall"), sent, "every stream stalled\n{ctx}");
    assert_eq!(count(&st, "/failures/timeout"), 0, "{ctx}");
    assert_eq!((num(&st, "/events/min"), num(&st, "/events/max")), (3.0, 3.0), "{ctx}");
    // Failed when the limit ran out after the third event, not at the timeout.
    let latency = num(&st, "/latency_ms/max");
    assert!((300.0..1500.0).contains(&latency), "a stall of 300 ms failed after {latency} ms\n{ctx}");
}

/// A server that never ends its stream is cut at the step's timeout and
/// counted so, its events counted up to the cut.
#[test]
fn an_endless_stream_is_cut_at_the_timeout() {
    let _cpu = shared();
    let server = kit::python::sse();
    let wd = Workdir::new("sse-forever");
    let step = "{ name: endless, request: GET /forever?every=20, stream: true }";
    let run = Run::new(&wd, &server.url(0), step, 3, 2, "1s");
    let st = run.step("endless");
    let ctx = format!("{st:#}\n{}", run.context());
    let sent = count(&st, "/sent");
    assert!(sent >= 4, "{ctx}");
    assert_eq!(count(&st, "/failures/timeout"), sent, "{ctx}");
    // About 50 events in a second at one per 20 ms.
    let events = num(&st, "/events/p50");
    assert!((35.0..=52.0).contains(&events), "{events} events in 1 s\n{ctx}");
}

/// `expect` on the events as they came: some event, the first and the last
/// hold on the server's ten (`tick 3`, `tick 0`, `done`); a last event that
/// must say what it does not fails every answer as `check_failed`.
#[test]
fn expectations_on_events() {
    let _cpu = shared();
    let server = kit::python::sse();
    let wd = Workdir::new("sse-expect");
    let holds = "{ name: holds, request: GET /events?n=10&every=5, stream: true, expect: { event_contains: 'tick 3', first_event_contains: 'tick 0', last_event_contains: done } }";
    let run = Run::new(&wd, &server.url(0), holds, 5, 1, "5s");
    let st = run.step("holds");
    let ctx = format!("{st:#}\n{}", run.context());
    assert!(count(&st, "/completed") >= 4 && count(&st, "/failed") == 0, "{ctx}");
    let wd = Workdir::new("sse-expect-fails");
    let fails =
        "{ name: fails, request: GET /events?n=10&every=5, stream: true, expect: { last_event_contains: 'tick 9' } }";
    let run = Run::new(&wd, &server.url(0), fails, 5, 1, "5s");
    let st = run.step("fails");
    let ctx = format!("{st:#}\n{}", run.context());
    let sent = count(&st, "/sent");
    assert!(sent >= 4 && count(&st, "/failures/check_failed") == sent, "{ctx}");
}

/// The testkit's SSE server, and its address for a proxy.
fn sse_server() -> (kit::python::Python, SocketAddr) {
    let server = kit::python::sse();
    let addr = server.addr();
    (server, addr)
}

/// Over HTTP/2, in clear text (h2c, prior knowledge) and by ALPN over TLS:
/// the server's ten events 20 ms apart, passed on by nginx as they come,
/// are read as they come, as over HTTP/1.1: counted exactly, their gaps the
/// server's, the stream nine gaps long, the last event checked. Before, an
/// HTTP/2 answer was read whole: no events at all.
#[test]
fn events_stream_over_http2_as_over_http1() {
    let _cpu = exclusive();
    let (_server, upstream) = sse_server();
    // (over TLS?)
    for tls in [false, true] {
        let proxy = kit::nginx_h2_streaming(upstream, tls);
        let (url, flags): (String, &[&str]) = match tls {
            true => (format!("https://127.0.0.1:{}", proxy.addr().port()), &["--insecure"]),
            false => (format!("h2c://{}", proxy.addr()), &[]),
        };
        let wd = Workdir::new(if tls { "sse-h2" } else { "sse-h2c" });
        let step =
            "{ name: events, request: GET /events?n=10&every=20, stream: true, expect: { last_event_contains: done } }";
        let run = Run::steps(&wd, &url, &[step], 5, 2, "5s", flags);
        let st = run.step("events");
        let ctx = format!("tls {tls}\n{st:#}\n{}", run.context());
        let answered = count(&st, "/completed");
        assert!(answered >= 8 && count(&st, "/failed") == 0, "{ctx}");
        assert_eq!(count(&st, "/events/count"), answered, "{ctx}");
        assert_eq!((num(&st, "/events/min"), num(&st, "/events/max")), (10.0, 10.0), "{ctx}");
        assert_eq!(count(&st, "/event_gap_ms/count"), 9 * answered, "{ctx}");
        let gap = num(&st, "/event_gap_ms/p50");
        assert!((15.0..=25.0).contains(&gap), "median gap {gap} ms, the server's is 20 ms\n{ctx}");
        assert!(num(&st, "/first_event_ms/p50") < 15.0, "the first event is sent at once\n{ctx}");
        let stream = num(&st, "/stream_ms/p50");
        assert!((170.0..=230.0).contains(&stream), "a stream of nine 20 ms gaps lasted {stream} ms\n{ctx}");
        // And it was HTTP/2 that nginx spoke to us.
        let log = std::fs::read_to_string(proxy.dir().join("access.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        assert!(
            lines.len() as u64 >= answered && lines.iter().all(|l| *l == "HTTP/2.0 200"),
            "nginx's log: {lines:?}\n{ctx}"
        );
    }
}

/// `save` from a stream's events: the first event's data (by a pattern), the
/// last's whole, the first that matches a pattern, and of JSON events the
/// first one that has a field and the first's and last's by JSONPath; a
/// later step sends them all back and the server answers 409 to any value
/// that is not what it sent. Over HTTP/1.1, and over HTTP/2 through nginx.
#[test]
fn values_are_saved_from_events() {
    let _cpu = shared();
    let (server, upstream) = sse_server();
    let proxy = kit::nginx_h2_streaming(upstream, false);
    let ticks = r"{ name: ticks, request: GET /events?n=10&every=5, stream: true, save: { first: 'first_event:regex:tick (\d+)', last: last_event, some: 'event:regex:tick ([3-9])' } }";
    let json = "{ name: json, request: GET /json?n=5&every=5, stream: true, save: { result: 'event:$.result', i0: 'first_event:$.i', il: 'last_event:$.i' } }";
    let check =
        "{ name: check, request: 'GET /equal?a=${first},${last},${some},${result},${i0},${il}&b=0,done,3,r4,0,4' }";
    // (target, what it is)
    for (url, what) in [(server.url(0), "http/1.1"), (format!("h2c://{}", proxy.addr()), "h2c")] {
        let wd = Workdir::new(&format!("sse-save-{what}"));
        let run = Run::steps(&wd, &url, &[ticks, json, check], 5, 1, "5s", &[]);
        let ctx = |st: &Value| format!("{what}\n{st:#}\n{}", run.context());
        for name in ["ticks", "json"] {
            let st = run.step(name);
            assert!(count(&st, "/completed") >= 4 && count(&st, "/failed") == 0, "{}", ctx(&st));
        }
        let st = run.step("check");
        assert!(count(&st, "/completed") >= 4, "{}", ctx(&st));
        assert_eq!(count(&st, "/failed"), 0, "a value saved from events was not the server's\n{}", ctx(&st));
    }
}

/// Events a server paces 40 ms apart put every stream's service time at a
/// multiple of 40 ms above its first byte: no Nagle / delayed-ACK stall,
/// and the diagnosis, which reads the steps that do not stream, names none.
/// Before, it named "every request stalled ~40 ms" (a stream of three
/// events is two quanta long).
#[test]
fn paced_events_are_not_named_a_delayed_ack() {
    let _cpu = exclusive();
    let server = kit::python::sse();
    let wd = Workdir::new("sse-paced-40");
    let step = "{ name: paced, request: GET /events?n=3&every=40, stream: true }";
    let run = Run::new(&wd, &server.url(0), step, 20, 3, "5s");
    let st = run.step("paced");
    let ctx = format!("{st:#}\n{}", run.context());
    assert!(count(&st, "/completed") >= 40 && count(&st, "/failed") == 0, "{ctx}");
    let summary = run.summary();
    let kinds: Vec<&str> = summary["diagnostics"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["kind"].as_str()).collect())
        .unwrap_or_default();
    assert!(!kinds.contains(&"quantized_stalls"), "{kinds:?}\n{:#}\n{ctx}", summary["diagnostics"]);
    assert!(!run.out.stdout.contains("Nagle"), "{}\n{ctx}", run.out.stdout);
}
