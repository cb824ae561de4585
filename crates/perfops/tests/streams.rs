//! End to end: steps with `stream:` run by the real `perfops` binary against
//! a real Server-Sent Events server on 127.0.0.1 (aiohttp with aiohttp-sse
//! from PyPI: `perfops_testkit::python::sse`, chunked `text/event-stream`
//! over HTTP/1.1), judged by the results directory: events counted exactly,
//! the gaps of a paced server, a stall counted as its own kind, an endless
//! stream cut at the step's timeout.
//!
//! Each run is bounded to a few seconds at a few streams a second.

mod common;

use std::path::PathBuf;

use common::{Finished, RUN_LIMIT, Workdir, exclusive, shared};
use perfops_testkit as kit;
use serde_json::Value;

/// A run's exit, output and results directory.
struct Run {
    out: Finished,
    dir: PathBuf,
}

impl Run {
    /// `perfops run` on one step `step` against `url`, at `rate`/s for `secs`,
    /// with the step timeout `timeout`, waiting for the requests in flight.
    fn new(wd: &Workdir, url: &str, step: &str, rate: u32, secs: u32, timeout: &str) -> Run {
        let yaml = format!(
            "name: sse\ntarget: {url}\ndefaults: {{ timeout: {timeout} }}\nflows:\n  read:\n    steps:\n      - {step}\nload:\n  stages: [ {{ rate: {rate}, hold: {secs}s }} ]\n"
        );
        let file = wd.scenario("sse.yaml", &yaml);
        let out = wd.spawn("run", &file, &["--wait-in-flight"], |_| {}).wait(RUN_LIMIT);
        let dir = wd.result_dir(&out);
        Run { out, dir }
    }

    /// The figures of step `name` in the summary.
    #[track_caller]
    fn step(&self, name: &str) -> Value {
        let text = std::fs::read_to_string(self.dir.join("summary.json")).expect("summary.json");
        let s: Value = serde_json::from_str(&text).expect("summary.json is JSON");
        s["steps"]
            .as_array()
            .and_then(|steps| steps.iter().find(|st| st["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no step {name:?} in\n{s:#}\n{}", self.context()))
    }

    fn context(&self) -> String {
        format!("perfops {:?} exited {:?}\nstderr:\n{}", self.out.args, self.out.code, self.out.stderr)
    }
}

fn count(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr).and_then(Value::as_u64).unwrap_or(0)
}

#[track_caller]
fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number at {ptr} in {v:#}"))
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
