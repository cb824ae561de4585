//! The open model's pacer seen from a server on loopback: when each request
//! arrived against when it was due.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use perfops_core::model::{LoadModel, Rate, Schedule, Shard};
use perfops_engine::{Http2, Pacer, Plan, Target, Work};

/// A server that answers every request at once and notes when it read
/// each one whole (its clock is the engine's: one process, one
/// `CLOCK_MONOTONIC`). Stops accepting when `stop` is set.
fn server(stop: Arc<AtomicBool>) -> (std::net::SocketAddr, Arc<Mutex<Vec<Instant>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let read = Arc::new(Mutex::new(Vec::new()));
    let seen = read.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let seen = seen.clone();
                    std::thread::spawn(move || answer(conn, &seen));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    });
    (addr, read)
}

/// One connection: each request (a head, no body) answered with an empty 200.
fn answer(mut conn: TcpStream, seen: &Mutex<Vec<Instant>>) {
    conn.set_nonblocking(false).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = conn.read(&mut chunk) {
        if n == 0 {
            return;
        }
        let at = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            seen.lock().unwrap().push(at);
            if conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
                return;
            }
        }
    }
}

/// 10,000 arrivals/s on one worker for half a second: no request reaches
/// the server before its due time. By the time of each request the server
/// read, it has read no more requests than were due by then (a count that
/// lateness cannot break, only an early send). The timerfd pacer sends
/// arrivals due within 100 µs of each other together, the second early
/// (`PERFOPS_PACER=timerfd` runs this check on it, and it fails); the kernel
/// pacer (`PERFOPS_PACER=io_uring`, which this test sets) sends each at its
/// due time.
#[allow(clippy::print_stderr)] // a note when io_uring is refused, shown with the output
#[test]
#[allow(unsafe_code)]
fn no_request_reaches_the_server_before_its_due_time() {
    // The kernel pacer is asked for (`PERFOPS_PACER=timerfd` in the
    // environment runs this check on the timerfd pacer instead).
    if std::env::var_os("PERFOPS_PACER").is_none() {
        // SAFETY: the only test of this binary, before it starts a thread.
        unsafe { std::env::set_var("PERFOPS_PACER", "io_uring") };
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, read) = server(stop.clone());
    let target = Target::parse(&format!("http://{addr}/")).unwrap();
    let work = Arc::new(Work::single(&target, "GET", &[], b"").unwrap());
    let schedule = Schedule::constant(Rate::per_second(10_000.0).unwrap(), Duration::from_millis(500)).unwrap();
    let start = Instant::now() + Duration::from_millis(100);
    let plan = Plan {
        target,
        work,
        stage_ends: Vec::new(),
        load: LoadModel::Open { schedule: schedule.clone(), max_in_flight: 1_000 },
        timeout: Duration::from_secs(2),
        end: Some(schedule.duration()),
        wait_in_flight: false,
        connect_timeout: Duration::from_secs(1),
        insecure: false,
        workers: 1,
        shard: Shard::WHOLE,
        start_at: Some(start),
        keep_start: false,
        http2: Http2::default(),
        replan: None,
    };
    let outcome = perfops_engine::run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    match &outcome.pacer {
        Some(Pacer::Kernel) => {}
        // A sandbox that refuses io_uring: the timerfd pacer ran, as it should.
        Some(Pacer::Timer(Some(why))) => {
            eprintln!("io_uring refused here ({why}): the kernel pacer is not tested");
            return;
        }
        other => eprintln!("pacer {other:?}: checked all the same"),
    }
    let dues: Vec<Instant> = (0..schedule.total_arrivals()).map_while(|n| schedule.due(n)).map(|d| start + d).collect();
    let mut got = read.lock().unwrap().clone();
    got.sort();
    assert!(got.len() as u64 >= schedule.total_arrivals() * 9 / 10, "{} of {} requests read", got.len(), dues.len());
    for (k, at) in got.iter().enumerate() {
        // Requests due by `at`: every one read by then, if none was early.
        let due_by = dues.partition_point(|d| d <= at);
        assert!(
            k < due_by,
            "the {}th request read came before its due time: {} read by then, {due_by} due ({:?})",
            k + 1,
            k + 1,
            outcome.pacer
        );
    }
}
