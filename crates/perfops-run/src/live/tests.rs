//! The live server against real sockets on loopback: routes, replay and
//! resume, the control API with a test `Steer`, the token, and what
//! `second` costs the collector thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use perfops_core::measure::{Interval, Stats};
use perfops_core::pipeline::Second;
use perfops_core::pipeline::control::{Action, ControlEvent, Steer};
use perfops_report::run::{MetaStage, RunMeta};

use super::*;

fn meta() -> RunMeta {
    RunMeta {
        name: "orders".into(),
        kind: "run".into(),
        model: "open".into(),
        stages: vec![MetaStage { name: "steady".into(), from: 50.0, to: 50.0, duration_s: 10.0 }],
        ..RunMeta::default()
    }
}

fn second(live: &mut Live, t: u32) {
    let mut stats = Stats { completed: 50, arrivals_answered: 50, ..Stats::default() };
    stats.latency.record(Duration::from_millis(3));
    let iv = Interval { stats, length: Duration::from_secs(1), target: Some(50.0), ..Interval::empty(t) };
    let s = Second {
        interval: &iv,
        t,
        start: Duration::from_secs(t.into()),
        stage: "steady",
        draining: false,
        step_names: &[],
        stage_names: &[],
        events: &[],
        stages: &[],
        watched: &[],
        probes: &[],
    };
    live.second(&s).expect("second");
}

/// A live server on a free loopback port, its run started and its first
/// second published.
fn started() -> (Live, SocketAddr) {
    let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
    let addr = live.local_addr();
    live.start(&meta()).expect("start");
    second(&mut live, 0);
    (live, addr)
}

/// One exchange: the status line's code and the body.
fn ask(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(request.as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (code, body)
}

fn post(addr: SocketAddr, body: &str, extra: &str) -> (u16, String) {
    ask(
        addr,
        &format!("POST /control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{extra}\r\n{body}", body.len()),
    )
}

/// Read an event stream until `until` is in what came, or 5 s.
fn events(addr: SocketAddr, head: &str, until: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    s.write_all(format!("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n").as_bytes()).expect("send");
    let (mut out, started) = (Vec::new(), Instant::now());
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&out).contains(until) && started.elapsed() < Duration::from_secs(5) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The page once the run started; a late stream gets every second so far,
/// a resumed one only what it missed, and both go on with the new ones.
#[test]
fn a_late_page_gets_the_run_so_far_and_a_resumed_one_what_it_missed() {
    let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
    let addr = live.local_addr();
    let (code, _) = ask(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(code, 503, "no page before the run starts");
    live.start(&meta()).expect("start");
    let (code, page) = ask(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(code, 200);
    assert!(page.contains("perfops live") && page.contains("EventSource"), "the live page with live.js");
    for t in 0..3 {
        second(&mut live, t);
    }
    let late = events(addr, "", "id: 3\n");
    assert!(late.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"), "{late}");
    for id in 1..=3 {
        assert!(late.contains(&format!("id: {id}\nevent: second\ndata: {{")), "event {id} replayed: {late}");
    }
    // Resumed after id 2: only 3, then a new one as it comes.
    let mut resumed = TcpStream::connect(addr).expect("connect");
    resumed.write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 2\r\n\r\n").expect("send");
    std::thread::sleep(Duration::from_millis(300));
    second(&mut live, 3);
    resumed.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    let mut got = Vec::new();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("id: 4\n") && started.elapsed() < Duration::from_secs(5) {
        if let Ok(n) = resumed.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains("id: 3\n") && got.contains("id: 4\n"), "{got}");
    assert!(!got.contains("id: 1\n") && !got.contains("id: 2\n"), "what it had seen is not sent again: {got}");
}

/// A Steer that takes everything but `next`, which it refuses as a run
/// with no stage after this one would.
struct Test(Mutex<Vec<String>>);

impl Steer for Test {
    fn act(&self, action: Action, by: &str) -> Result<ControlEvent, String> {
        self.0.lock().unwrap().push(format!("{action} by {by}"));
        match action {
            Action::Next => Err("no stage after \"steady\"".into()),
            a => Ok(ControlEvent {
                t: 42.0,
                action: a.name().into(),
                value: a.value(),
                stage: "steady".into(),
                by: by.into(),
            }),
        }
    }
}

/// The control API: 409 before the run hands its steering over; then the
/// event as JSON, a refusal as 409 with its reason, 400 for a bad action,
/// 404 and 405 elsewhere; another site's page is refused on loopback.
#[test]
fn the_control_api_answers_as_its_contract_says() {
    let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
    let addr = live.local_addr();
    assert_eq!(post(addr, "stop", ""), (409, "this run takes no control\n".into()));
    let steer = Arc::new(Test(Mutex::default()));
    live.steer(steer.clone());
    let (code, body) = post(addr, "rate 300", "X-Perfops-By: ctl\r\n");
    assert_eq!(code, 200, "{body}");
    let event: ControlEvent = serde_json::from_str(&body).expect("a ControlEvent");
    assert_eq!((event.action.as_str(), event.value, event.by.as_str()), ("rate", Some(300.0), "ctl"));
    assert_eq!(post(addr, "next", ""), (409, "no stage after \"steady\"\n".into()));
    let (code, body) = post(addr, "pause", "");
    assert_eq!(code, 400);
    assert!(body.starts_with("unknown action `pause`"), "{body}");
    let (code, _) = post(addr, &"rate 1 ".repeat(20), "");
    assert_eq!(code, 400, "a body past 64 bytes");
    assert_eq!(ask(addr, "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 404);
    assert_eq!(ask(addr, "GET /control HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 405);
    assert_eq!(ask(addr, "GET /report HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 404, "no report before the end");
    // A page of another site, in the same browser: refused, and not acted on.
    assert_eq!(post(addr, "stop", "Origin: http://evil.example\r\n").0, 403);
    // A name that resolves to loopback but is not one (DNS rebinding).
    let (code, _) = ask(addr, "GET / HTTP/1.1\r\nHost: evil.example:5665\r\n\r\n");
    assert_eq!(code, 403);
    assert_eq!(*steer.0.lock().unwrap(), ["rate 300 by ctl", "next by http"]);
}

/// With a token, every route without it (or with a wrong one) is 401; the
/// page and the stream take it as `?token=`, control only as a header.
#[test]
fn off_loopback_every_route_needs_the_token() {
    let mut live = Live::bind_as("127.0.0.1:0", Some("s3cret".into()), true).expect("bind");
    let addr = live.local_addr();
    live.start(&meta()).expect("start");
    live.steer(Arc::new(Test(Mutex::default())));
    for (request, what) in [
        ("GET / HTTP/1.1\r\n\r\n", "the page"),
        ("GET /events HTTP/1.1\r\n\r\n", "the events"),
        ("GET /report HTTP/1.1\r\n\r\n", "the report"),
        ("GET /nothing HTTP/1.1\r\n\r\n", "a route that does not exist (no hint it does not)"),
        ("GET /?token=wrong HTTP/1.1\r\n\r\n", "a wrong token"),
        ("GET /?token=s3cre HTTP/1.1\r\n\r\n", "a prefix of the token"),
        ("GET / HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n", "a wrong bearer"),
        ("POST /control HTTP/1.1\r\nContent-Length: 4\r\n\r\nstop", "control without it"),
        ("POST /control?token=s3cret HTTP/1.1\r\nContent-Length: 4\r\n\r\nstop", "control with it in the query"),
    ] {
        assert_eq!(ask(addr, request).0, 401, "{what}");
    }
    assert_eq!(ask(addr, "GET /?token=s3cret HTTP/1.1\r\n\r\n").0, 200);
    assert_eq!(ask(addr, "GET / HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n").0, 200);
    assert_eq!(post(addr, "stop", "Authorization: Bearer s3cret\r\n").0, 200);
    assert!(events(addr, "Authorization: Bearer s3cret\r\n", "retry:").contains("200 OK"));
}

/// A token is made when none is given off loopback: 64 hex digits, never the same.
#[test]
fn a_made_token_is_random() {
    let (a, b) = (random_token().unwrap(), random_token().unwrap());
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

/// The end: the verdicts and `final` go out, the report is served, and
/// finish waits for the open page to take it (not for the whole 10 s).
#[test]
fn the_end_hands_the_report_to_the_open_pages() {
    let (mut live, addr) = started();
    // A page: reads the stream until `final`, then takes the report.
    let page = std::thread::spawn(move || {
        let got = events(addr, "", "event: final");
        let report = ask(addr, "GET /report HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        (got, report)
    });
    std::thread::sleep(Duration::from_millis(300));
    live.report("<html>the report</html>");
    let summary: perfops_report::run::RunSummary = serde_json::from_str(include_str!(
        "../../../perfops-report/tests/fixtures/20261122T043000Z-orders-stepped/summary.json"
    ))
    .expect("a summary");
    let began = Instant::now();
    live.finish(&End::Run(&summary)).expect("finish");
    assert!(began.elapsed() < Duration::from_secs(5), "finish waited {:?}", began.elapsed());
    let (got, report) = page.join().expect("page");
    assert!(got.contains("event: stages\n") && got.contains("event: final\ndata: {\"report\":\"/report\"}"), "{got}");
    assert_eq!(report, (200, "<html>the report</html>".into()));
}

/// Nothing that arrives holds the server: a head past its limit is 431, a
/// crowd of silent connections past the bound is closed oldest first, and
/// meanwhile the page and an open event stream are served at once.
#[test]
fn silent_crowds_and_big_heads_hold_nobody() {
    let (mut live, addr) = started();
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9 * 1024));
    assert_eq!(ask(addr, &big).0, 431);
    // The stream is open (served its first second) before the crowd comes:
    // a connection still sending its request is one the crowd may push out.
    let (began_streaming, streaming) = std::sync::mpsc::channel();
    let stream = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
        s.write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
        let mut out = Vec::new();
        let mut read_until = |s: &mut TcpStream, until: &str| {
            let (started, mut buf) = (Instant::now(), [0u8; 4096]);
            while !String::from_utf8_lossy(&out).contains(until) && started.elapsed() < Duration::from_secs(5) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
        };
        read_until(&mut s, "id: 1\n");
        let _ = began_streaming.send(());
        read_until(&mut s, "id: 2\n");
        String::from_utf8_lossy(&out).into_owned()
    });
    streaming.recv_timeout(Duration::from_secs(5)).expect("the event stream began");
    let silent: Vec<TcpStream> =
        (0..server::MAX_CONNECTIONS + 16).map(|_| TcpStream::connect(addr).expect("connect")).collect();
    let began = Instant::now();
    assert_eq!(ask(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 200);
    assert!(began.elapsed() < Duration::from_secs(2), "the page waited {:?} behind silent sockets", began.elapsed());
    // A second published while the crowd sits reaches the open stream.
    second(&mut live, 1);
    assert!(stream.join().expect("stream").contains("id: 2\n"), "the event stream was served meanwhile");
    drop(silent);
}

/// Event streams held open past the bound (by any local process) lock no
/// page out: a new connection closes the oldest stream (a browser's comes
/// back by itself). Before, 128 streams left every page unanswered.
#[test]
fn a_crowd_of_event_streams_locks_no_page_out() {
    let (_live, addr) = started();
    let crowd: Vec<TcpStream> = (0..server::MAX_CONNECTIONS + 8)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
            s
        })
        .collect();
    // Every stream of the crowd has been answered (its head read) before the page is asked.
    std::thread::sleep(Duration::from_millis(300));
    let began = Instant::now();
    assert_eq!(ask(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").0, 200);
    assert!(began.elapsed() < Duration::from_secs(2), "the page waited {:?} behind the streams", began.elapsed());
    assert!(events(addr, "", "id: 1\n").contains("id: 1\n"), "a new stream is served too");
    drop(crowd);
}

/// What `second` costs the collector thread with the server running and
/// browsers reading (the module doc's figure).
#[test]
#[ignore = "a measurement, not a check"]
#[allow(clippy::print_stdout)] // what it measured is its output
fn second_cost() {
    let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
    live.start(&meta()).expect("start");
    // Five steps of 20,000 requests each: a busy second of a real scenario.
    let mut stats = Stats { completed: 20_000, arrivals_answered: 20_000, ..Stats::default() };
    for v in 1..=20_000u64 {
        stats.latency.record(Duration::from_micros(v * 37 % 900_000));
    }
    let parts: Vec<(perfops_core::measure::Key, Stats)> =
        (0..5).map(|step| (perfops_core::measure::Key { stage: 0, step }, stats.clone())).collect();
    let iv = Interval { parts, stats, length: Duration::from_secs(1), target: Some(100_000.0), ..Interval::empty(0) };
    let names: Vec<String> = (0..5).map(|i| format!("step {i}")).collect();
    let n = 2000;
    let began = Instant::now();
    for t in 0..n {
        let s = Second {
            interval: &iv,
            t,
            start: Duration::ZERO,
            stage: "steady",
            draining: false,
            step_names: &names,
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        };
        live.second(&s).expect("second");
    }
    println!("second, 5 steps: {:?}, log {:?}", began.elapsed() / n, live.log_size());
    // The same with what a watched run adds each second: the generator's
    // sample and a scraped one (12 values each), and three failing
    // exchanges of one step and kind (sent the first second only: the
    // first few over the run).
    let sample = |source: &str| perfops_core::telemetry::watched::Sample {
        t: 1.0,
        source: source.into(),
        values: (0..12).map(|i| (format!("metric_{i}"), f64::from(i) * 1.5)).collect(),
    };
    let watched = [sample("generator"), sample("prometheus http://127.0.0.1:8080/metrics")];
    let mut samples = perfops_core::measure::FailureSamples::default();
    for i in 0..3 {
        let failure = perfops_core::measure::FailureSample {
            t: f64::from(i),
            status: Some(503),
            body: Some("x".repeat(1024)),
            request: Some("GET /orders HTTP/1.1".into()),
            ..Default::default()
        };
        samples.add((0, perfops_core::measure::FailureKind::Http5xx), failure);
    }
    let iv = Interval { samples, ..iv };
    let mut live = Live::bind("127.0.0.1:0", None).expect("bind");
    live.start(&meta()).expect("start");
    let began = Instant::now();
    for t in 0..n {
        let s = Second {
            interval: &iv,
            t,
            start: Duration::ZERO,
            stage: "steady",
            draining: false,
            step_names: &names,
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &watched,
            probes: &[],
        };
        live.second(&s).expect("second");
    }
    println!("second, 5 steps, watched: {:?}, log {:?}", began.elapsed() / n, live.log_size());
}
