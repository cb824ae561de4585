//! The watcher against real loopback servers and real processes (this test's own): Prometheus and
//! JSON scrapes, the process found by its port with its listen queue, Kubernetes-style probes, and
//! a prompt stop. Servers are std threads in this file (or perfops-testkit's); nothing is mocked.
//!
//! Timing assertions are loose on purpose: these tests share two cores with whole builds. They
//! check order, grid alignment within a wide margin and rates within 20%, never a tight bound.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::socket::{AddressFamily, Backlog, SockFlag, SockType, SockaddrStorage, bind as nix_bind, listen, socket};
use perfops_core::scenario::extract::Extractor;
use perfops_engine::watch::{
    JsonSource, ProbeKind, ProbeResult, ProbeSpec, ProcessSel, Sample, WatchEvent, WatchPlan, Watcher,
};

/// Longest any test waits for an event before failing: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// A small HTTP/1.1 server: one thread per connection, one request per connection.
// ---------------------------------------------------------------------------------------------

/// What the server does with a request for a path.
enum Reply {
    /// Status and body, framed by Content-Length.
    Body(u16, String),
    /// `200`, the body sent in chunks of `n` bytes.
    Chunked(String, usize),
    /// Read the request, never answer; hold the connection until the client leaves.
    Silent,
}

struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl TestServer {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> TestServer {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(handler);
    let accept = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (handler, stop) = (handler.clone(), stop.clone());
                std::thread::spawn(move || answer(conn, &*handler, &stop));
            }
        })
    };
    TestServer { addr, stop, accept: Some(accept) }
}

fn answer(mut conn: TcpStream, handler: &dyn Fn(&str) -> Reply, stop: &AtomicBool) {
    conn.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(_) if stop.load(Ordering::Relaxed) => return,
            Err(_) => {}
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
    let out = match handler(&path) {
        Reply::Body(status, body) => {
            format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
        }
        Reply::Chunked(body, n) => {
            let mut out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_string();
            for piece in body.as_bytes().chunks(n) {
                out.push_str(&format!("{:x}\r\n{}\r\n", piece.len(), String::from_utf8_lossy(piece)));
            }
            out + "0\r\n\r\n"
        }
        Reply::Silent => {
            // Until the client closes (read gives 0) or the server stops.
            loop {
                match conn.read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(_) if stop.load(Ordering::Relaxed) => return,
                    Err(_) => {}
                }
            }
        }
    };
    let _ = conn.write_all(out.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Plans and events
// ---------------------------------------------------------------------------------------------

fn plan(every: Duration) -> WatchPlan {
    WatchPlan {
        every,
        timeout: Duration::from_secs(2),
        prometheus: Vec::new(),
        json: Vec::new(),
        process: None,
        generator: false,
        probes: Vec::new(),
        promql: None,
        insecure: false,
    }
}

fn probe(kind: ProbeKind, url: String, period: Duration, timeout: Duration, failure_threshold: u32) -> ProbeSpec {
    ProbeSpec { kind, url, period, timeout, failure_threshold, success_threshold: 1, initial_delay: Duration::ZERO }
}

/// Receive events until `done` says so, failing after [`PATIENCE`]; returns all of them.
fn collect(rx: &Receiver<WatchEvent>, mut done: impl FnMut(&[WatchEvent]) -> bool) -> Vec<WatchEvent> {
    let deadline = Instant::now() + PATIENCE;
    let mut events = Vec::new();
    while !done(&events) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) => events.push(e),
            Err(e) => panic!("{e:?} waiting; got so far: {events:#?}"),
        }
    }
    events
}

fn samples<'a>(events: &'a [WatchEvent], source: &str) -> Vec<&'a Sample> {
    events
        .iter()
        .filter_map(|e| if let WatchEvent::Sample(s) = e { Some(s) } else { None })
        .filter(|s| s.source == source)
        .collect()
}

fn problems<'a>(events: &'a [WatchEvent], from: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Problem { source, message, .. } if source == from => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

fn probes(events: &[WatchEvent]) -> Vec<&ProbeResult> {
    events.iter().filter_map(|e| if let WatchEvent::Probe(p) = e { Some(p) } else { None }).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// ---------------------------------------------------------------------------------------------
// Prometheus
// ---------------------------------------------------------------------------------------------

#[test]
fn a_scraped_gauge_follows_the_target_on_the_sampling_grid() {
    let gauge = Arc::new(AtomicU64::new(1));
    let server = {
        let gauge = gauge.clone();
        serve(move |_| {
            let g = gauge.load(Ordering::Relaxed);
            Reply::Body(200, format!("# TYPE test_busy gauge\ntest_busy{{pool=\"b\",model=\"threads\"}} {g}\n"))
        })
    };
    let url = server.url("/metrics");
    let source = format!("prometheus {url}");
    let every = Duration::from_millis(300);
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let watcher = Watcher::start(WatchPlan { prometheus: vec![url], ..plan(every) }, start, tx).unwrap();
    let key = r#"test_busy{model="threads",pool="b"}"#;
    let mut events = Vec::new();
    // The test changes the gauge once the watcher has seen the previous value.
    for want in [1.0, 2.0, 3.0] {
        gauge.store(want as u64, Ordering::Relaxed);
        events.extend(collect(&rx, |ev| samples(ev, &source).iter().any(|s| s.value(key) == Some(want))));
    }
    watcher.stop();

    let seen = samples(&events, &source);
    let values: Vec<f64> = seen.iter().map(|s| s.value(key).expect("every sample has the gauge")).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "in the order the test set them: {values:?}");
    for want in [1.0, 2.0, 3.0] {
        assert!(values.contains(&want), "{want} seen: {values:?}");
    }
    // Due at start + k * every: each time near its own k, and the k strictly increasing.
    let every_s = every.as_secs_f64();
    let ks: Vec<f64> = seen.iter().map(|s| (s.t / every_s).round()).collect();
    assert!(ks.windows(2).all(|w| w[0] < w[1]), "one sample per slot: {ks:?}");
    let late: Vec<f64> = seen.iter().zip(&ks).map(|(s, k)| s.t - k * every_s).collect();
    assert!(late.iter().all(|d| *d > -0.001), "never before its due time: {late:?}");
    let on_grid = late.iter().filter(|d| **d < 0.1).count();
    assert!(on_grid + 1 >= late.len(), "within 100 ms of k * every, one straggler allowed: {late:?}");
}

#[test]
fn a_counter_becomes_its_rate_and_buckets_are_left_out() {
    // The counter grows at 100 per second of wall time, whenever it is read.
    let born = Instant::now();
    let server = serve(move |_| {
        let n = born.elapsed().as_secs_f64() * 100.0;
        Reply::Body(
            200,
            format!(
                "# TYPE test_requests_total counter\ntest_requests_total{{code=\"200\"}} {n}\n\
                 # TYPE test_latency histogram\ntest_latency_bucket{{le=\"+Inf\"}} {n}\n\
                 test_latency_sum 1\ntest_latency_count {n}\n"
            ),
        )
    });
    let url = server.url("/metrics");
    let source = format!("prometheus {url}");
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { prometheus: vec![url], ..plan(Duration::from_millis(250)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let key = r#"test_requests_total{code="200"}"#;
    let events = collect(&rx, |ev| samples(ev, &source).iter().filter(|s| s.value(key).is_some()).count() >= 5);
    watcher.stop();

    let seen = samples(&events, &source);
    let rates: Vec<f64> = seen.iter().filter_map(|s| s.value(key)).collect();
    let m = median(rates.clone());
    assert!((80.0..=120.0).contains(&m), "about 100/s: median {m}, all {rates:?}");
    for s in &seen {
        assert!(s.values.iter().all(|(n, _)| !n.contains("_bucket")), "buckets left out: {:?}", s.values);
    }
    assert!(seen.iter().any(|s| s.value("test_latency_count").is_some()), "a histogram's _count is a rate");
}

#[test]
fn a_failed_scrape_is_a_problem_and_the_loop_goes_on() {
    let calls = Arc::new(AtomicU64::new(0));
    let server = {
        let calls = calls.clone();
        // Fails with a 500 the first two times, then answers.
        serve(move |_| match calls.fetch_add(1, Ordering::Relaxed) {
            0 | 1 => Reply::Body(500, "oops".into()),
            _ => Reply::Body(200, "up 1\n".into()),
        })
    };
    let refused = format!("http://{}/metrics", perfops_testkit::refused_addr());
    let url = server.url("/metrics");
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { prometheus: vec![url.clone(), refused.clone()], ..plan(Duration::from_millis(100)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| {
        !samples(ev, &format!("prometheus {url}")).is_empty()
            && !problems(ev, &format!("prometheus {refused}")).is_empty()
    });
    watcher.stop();
    let bad = problems(&events, &format!("prometheus {url}"));
    assert_eq!(bad, ["scrape failed: HTTP 500", "scrape failed: HTTP 500"], "then it recovered");
    assert_eq!(problems(&events, &format!("prometheus {refused}"))[0], "scrape failed: connection refused");
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

#[test]
fn json_stats_fields_are_sampled_and_a_missing_one_is_said_once() {
    // Sent chunked, in 7-byte pieces: the fetch de-chunks before the JSONPaths look.
    let server = serve(|_| Reply::Chunked(r#"{"pool":{"busy":3,"max":"10"},"up":true,"name":"api"}"#.to_string(), 7));
    let url = server.url("/stats");
    let source = format!("json {url}");
    let field = |name: &str, path: &str| (name.to_string(), Extractor::parse(path).unwrap());
    let fields =
        vec![field("busy", "$.pool.busy"), field("max", "$.pool.max"), field("up", "$.up"), field("queue", "$.queue")];
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { json: vec![JsonSource { url, fields }], ..plan(Duration::from_millis(100)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| samples(ev, &source).len() >= 3);
    watcher.stop();
    for s in samples(&events, &source) {
        let want = [("busy".to_string(), 3.0), ("max".to_string(), 10.0), ("up".to_string(), 1.0)];
        assert_eq!(s.values, want, "number, numeric string, bool; the missing field skipped");
    }
    let said = problems(&events, &source);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("`queue` ($.queue): not found"), "{said:?}");
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

#[test]
fn the_process_is_found_by_its_port_and_the_generator_by_itself() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Three connections of the "generator" (to another listener, whose queue is not watched).
    let other = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let conns: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(other.local_addr().unwrap()).unwrap()).collect();
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { process: Some(ProcessSel::Port(port)), generator: true, ..plan(Duration::from_millis(200)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| {
        samples(ev, "process").iter().any(|s| s.value("process_cpu_cores").is_some())
            && samples(ev, "generator").iter().any(|s| s.value("generator_cpu_cores").is_some())
    });
    watcher.stop();
    drop(listener);

    let s = samples(&events, "process").into_iter().find(|s| s.value("process_cpu_cores").is_some()).unwrap();
    assert_eq!(s.value("process_pid"), Some(f64::from(std::process::id())), "this test process owns the port");
    for name in ["process_threads", "process_rss_bytes", "process_open_fds", "listen_queue_max"] {
        assert!(s.value(name).is_some_and(|v| v > 0.0), "{name}: {:?}", s.values);
    }
    assert_eq!(s.value("listen_queue"), Some(0.0), "nobody is waiting to be accepted");
    let share = s.value("process_cpu_share").unwrap();
    assert!(share >= 0.0 && share.is_finite(), "{share}");
    assert!(s.value("process_ctx_switches_per_s").is_some_and(|v| v >= 0.0), "{:?}", s.values);
    assert!(s.value("listen_overflows_per_s").is_some(), "TcpExt is readable: {:?}", s.values);

    let g = samples(&events, "generator").into_iter().find(|s| s.value("generator_cpu_cores").is_some()).unwrap();
    for name in ["generator_threads", "generator_rss_bytes", "generator_open_fds"] {
        assert!(g.value(name).is_some_and(|v| v > 0.0), "{name}: {:?}", g.values);
    }
    // Two listeners and three connections, at least (the harness may hold more).
    let sockets = g.value("generator_sockets").unwrap_or(0.0);
    assert!(sockets >= 5.0 && sockets <= g.value("generator_open_fds").unwrap(), "{:?}", g.values);
    drop(conns);
    assert!(g.value("generator_cpu_share").is_some());
    assert!(g.value("process_pid").is_none() && g.value("listen_queue").is_none(), "the generator gets the short list");
}

/// #11: a pre-forking server (gunicorn, Puma cluster, nginx) listens in a
/// master that does no work; its workers are its children. Found by its port,
/// the target is the whole tree: the workers' CPU is seen, not the idle
/// master's, and their count is said.
#[test]
fn a_pre_forking_server_is_watched_as_its_whole_process_tree() {
    // Two workers, 4 ms of CPU per request; four keep-alive clients keep both busy.
    let server = perfops_testkit::python::prefork(2, 4.0);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<JoinHandle<u64>> = (0..4)
        .map(|_| {
            let (addr, stop) = (server.addr(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut conn = TcpStream::connect(addr).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let (mut n, deadline) = (0, Instant::now() + Duration::from_secs(6));
                let mut buf = [0u8; 256];
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    conn.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                    let mut got = Vec::new();
                    while !got.ends_with(b"ok\n") {
                        let k = conn.read(&mut buf).unwrap();
                        assert!(k > 0, "the server closed");
                        got.extend_from_slice(&buf[..k]);
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { process: Some(ProcessSel::Port(server.port(0))), ..plan(Duration::from_millis(500)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| {
        samples(ev, "process").iter().filter(|s| s.value("process_cpu_cores").is_some()).count() >= 4
    });
    watcher.stop();
    stop.store(true, Ordering::Relaxed);
    let served: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();

    let rated: Vec<&Sample> =
        samples(&events, "process").into_iter().filter(|s| s.value("process_cpu_cores").is_some()).collect();
    for s in &rated {
        assert_eq!(s.value("process_pid"), Some(f64::from(server.pid())), "the master owns the port: {:?}", s.values);
        assert_eq!(s.value("process_workers"), Some(2.0), "{:?}", s.values);
        // Master and workers: three python3 processes, one thread each at least.
        assert!(s.value("process_threads").is_some_and(|t| t >= 3.0), "{:?}", s.values);
    }
    // Both workers burn CPU flat out (on a shared 2-core machine, at least a
    // third of a core in all); the master alone would read about 0.
    let cores = median(rated.iter().filter_map(|s| s.value("process_cpu_cores")).collect());
    assert!(cores >= 0.3, "{cores} cores for two busy workers ({served} requests): {rated:#?}");
}

#[test]
fn a_listener_that_never_accepts_shows_its_queue_full() {
    // listen(4) by hand: std always asks for 128.
    let fd = socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
    nix_bind(fd.as_raw_fd(), &SockaddrStorage::from(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))).unwrap();
    listen(&fd, Backlog::new(4).unwrap()).unwrap();
    let listener = TcpListener::from(fd);
    let addr = listener.local_addr().unwrap();
    // The kernel completes backlog + 1 handshakes, then drops SYNs: the sixth connect hangs and
    // gives up; the five others sit in the accept queue.
    let clients: Vec<TcpStream> =
        (0..6).filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()).collect();
    assert!(clients.len() >= 4, "{} connected", clients.len());

    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { process: Some(ProcessSel::Port(addr.port())), ..plan(Duration::from_millis(200)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| samples(ev, "process").iter().any(|s| s.value("listen_queue").is_some()));
    watcher.stop();
    let s = samples(&events, "process").into_iter().find(|s| s.value("listen_queue").is_some()).unwrap();
    assert!(s.value("listen_queue").unwrap() >= 4.0, "{:?}", s.values);
    assert_eq!(s.value("listen_queue_max"), Some(4.0), "the backlog given to listen()");
    drop(clients);
}

#[test]
fn a_port_nobody_listens_on_is_a_problem_said_once() {
    let port = perfops_testkit::refused_addr().port();
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { process: Some(ProcessSel::Port(port)), ..plan(Duration::from_millis(50)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    watcher.stop();
    let events: Vec<WatchEvent> = rx.try_iter().collect();
    let said = problems(&events, "process");
    assert_eq!(said, [format!("nothing listens on port {port}")], "a state, said when it changes");
}

// ---------------------------------------------------------------------------------------------
// Probes
// ---------------------------------------------------------------------------------------------

#[test]
fn a_liveness_probe_that_times_out_restarts_once_at_the_threshold() {
    // Answers the first two requests, then accepts and never answers (a hung server).
    let served = Arc::new(AtomicU64::new(0));
    let server = {
        let served = served.clone();
        serve(move |path| {
            assert_eq!(path, "/health");
            if served.fetch_add(1, Ordering::Relaxed) < 2 { Reply::Body(200, "ok".into()) } else { Reply::Silent }
        })
    };
    let spec =
        probe(ProbeKind::Liveness, server.url("/health"), Duration::from_millis(400), Duration::from_millis(300), 3);
    let (tx, rx) = mpsc::channel();
    let watcher =
        Watcher::start(WatchPlan { probes: vec![spec], ..plan(Duration::from_secs(1)) }, Instant::now(), tx).unwrap();
    // Until the restart and two failures after it (short of a second restart).
    let events = collect(&rx, |ev| {
        let p = probes(ev);
        p.iter().position(|r| r.restart).is_some_and(|i| p.len() >= i + 3)
    });
    watcher.stop();

    let results = probes(&events);
    let last_ok = results.iter().rposition(|r| r.ok).expect("the server answered at first");
    let ok = results[last_ok];
    assert!(ok.status == Some(200) && ok.error.is_none() && ok.failures == 0, "{ok:?}");
    let after: Vec<&&ProbeResult> = results[last_ok + 1..].iter().collect();
    let failures: Vec<u32> = after.iter().map(|r| r.failures).collect();
    assert_eq!(failures, [1, 2, 3, 1, 2], "consecutive, reset after the restart");
    let restarts: Vec<usize> = after.iter().enumerate().filter(|(_, r)| r.restart).map(|(i, _)| i).collect();
    assert_eq!(restarts, [2], "exactly one restart, at the third consecutive failure");
    for r in &after {
        assert!(!r.ok && r.status.is_none() && r.error.as_deref() == Some("timeout"), "{r:?}");
        assert!(r.ms >= 250.0, "a timeout takes about the timeout: {r:?}");
        assert!(!r.unready, "liveness never unreadies");
    }
    let ts: Vec<f64> = results.iter().map(|r| r.t).collect();
    assert!(ts.windows(2).all(|w| w[1] - w[0] > 0.1), "one check per period, never a burst: {ts:?}");
}

#[test]
fn a_refused_probe_is_a_failure_and_readiness_goes_unready() {
    let url = format!("http://{}/ready", perfops_testkit::refused_addr());
    let spec = ProbeSpec {
        failure_threshold: 2,
        ..probe(ProbeKind::Readiness, url, Duration::from_millis(100), Duration::from_millis(500), 2)
    };
    let (tx, rx) = mpsc::channel();
    let watcher =
        Watcher::start(WatchPlan { probes: vec![spec], ..plan(Duration::from_secs(1)) }, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| probes(ev).len() >= 3);
    watcher.stop();
    let results = probes(&events);
    for r in &results {
        assert!(!r.ok && r.status.is_none(), "{r:?}");
        assert_eq!(r.error.as_deref(), Some("connection refused"));
        assert_eq!(r.probe, ProbeKind::Readiness);
    }
    let unready: Vec<bool> = results.iter().map(|r| r.unready).collect();
    assert_eq!(unready[..3], [false, true, false], "unready once, when the threshold is reached");
}

#[test]
fn probes_over_tls_and_to_error_statuses() {
    let tls = perfops_testkit::tls_fixed_delay(Duration::ZERO);
    let unavailable = perfops_testkit::status(503);
    let every = Duration::from_millis(100);
    let specs = vec![
        probe(ProbeKind::Liveness, tls.url(), every, Duration::from_secs(2), 3),
        probe(ProbeKind::Readiness, unavailable.url(), every, Duration::from_secs(2), 3),
    ];
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan { probes: specs, insecure: true, ..plan(Duration::from_secs(1)) };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    let events = collect(&rx, |ev| {
        let p = probes(ev);
        p.iter().any(|r| r.probe == ProbeKind::Liveness) && p.iter().any(|r| r.probe == ProbeKind::Readiness)
    });
    watcher.stop();
    let results = probes(&events);
    let live = results.iter().find(|r| r.probe == ProbeKind::Liveness).unwrap();
    assert!(live.ok && live.status == Some(200), "https with --insecure: {live:?}");
    let ready = results.iter().find(|r| r.probe == ProbeKind::Readiness).unwrap();
    assert!(!ready.ok && ready.status == Some(503) && ready.error.as_deref() == Some("HTTP 503"), "{ready:?}");
}

// ---------------------------------------------------------------------------------------------
// Start and stop
// ---------------------------------------------------------------------------------------------

#[test]
fn stop_is_prompt_even_in_the_middle_of_slow_reads() {
    let silent = perfops_testkit::never_answers();
    let (tx, rx) = mpsc::channel();
    let plan = WatchPlan {
        timeout: Duration::from_secs(30),
        prometheus: vec![format!("{}metrics", silent.url())],
        json: vec![JsonSource { url: silent.url(), fields: Vec::new() }],
        process: Some(ProcessSel::Pid(std::process::id())),
        generator: true,
        probes: vec![probe(ProbeKind::Liveness, silent.url(), Duration::from_secs(10), Duration::from_secs(30), 3)],
        ..plan(Duration::from_millis(100))
    };
    let watcher = Watcher::start(plan, Instant::now(), tx).unwrap();
    // Let every thread get into its read: the scrapes and the probe are now waiting on the server.
    let deadline = Instant::now() + PATIENCE;
    while silent.requests() < 3 {
        assert!(Instant::now() < deadline, "the reads never reached the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    let asked = Instant::now();
    watcher.stop();
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    // Every thread has ended and dropped its sender: the channel closes.
    let _: Vec<WatchEvent> = rx.iter().collect();
}

#[test]
fn unusable_plans_are_refused_at_start() {
    let (tx, _rx) = mpsc::channel();
    let second = Duration::from_secs(1);
    let zero_timeout = probe(ProbeKind::Liveness, "http://127.0.0.1:1/".into(), second, Duration::ZERO, 3);
    let cases: [(WatchPlan, &str); 4] = [
        (WatchPlan { prometheus: vec!["/metrics".into()], ..plan(second) }, "relative URL"),
        (WatchPlan { prometheus: vec!["ftp://h/metrics".into()], ..plan(second) }, "http(s)"),
        (WatchPlan { generator: true, ..plan(Duration::ZERO) }, "`every` must be more than 0"),
        (WatchPlan { probes: vec![zero_timeout], ..plan(second) }, "liveness probe: the period and the timeout"),
    ];
    for (plan, needle) in cases {
        let e = Watcher::start(plan, Instant::now(), tx.clone()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(needle), "{e}");
    }
}
