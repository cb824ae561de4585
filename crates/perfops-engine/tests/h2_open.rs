//! HTTP/2 and gRPC in the open model, seen from the worker's thread: how
//! often it sleeps (and so is woken) per request.
//!
//! Over plain TCP every answer is dated by the kernel, HTTP/1.1's and
//! HTTP/2's alike (`h2/stamped.rs`), so the pacer waits for its next
//! arrival in the runtime's park hook, deaf to its sockets, and the answers
//! that came meanwhile are read on that arrival's wake-up. At 10,000/s on
//! one worker the arrivals go out in pairs (`coalesce::GATHER`): one wake-up
//! per pair, fewer when the worker runs behind. On the timerfd, as HTTP/2
//! and gRPC were, the worker woke for each pair and again for the answers
//! that came between two pairs: 1.47 wake-ups per request over h2c against
//! 0.41 over HTTP/1.1 in the run before the change, 0.32-0.44 after it
//! (three runs on a loaded 2-core VM).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use perfops_core::model::{LoadModel, Rate, Schedule, Shard};
use perfops_engine::{Http2, Plan, Target, Work};
use perfops_testkit::{H2Config, nginx, nginx_h2};

/// The voluntary context switches of this process's worker thread (each a
/// sleep, ended by a wake-up), read from /proc; `None` while there is none.
fn worker_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // "perfops-worker-0", cut to the kernel's 15 characters.
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("perfops-worker") {
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            return status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse().ok());
        }
    }
    None
}

/// `url` at `per_s` arrivals a second for `ms` on one worker: the worker's
/// voluntary context switches per request answered (sampled every 2 ms
/// until the worker ends; the last 2 ms are not seen), and the requests.
fn switches_per_request(url: &str, per_s: f64, ms: u64) -> (f64, u64, u64) {
    let target = Target::parse(url).unwrap();
    let work = Arc::new(Work::single(&target, "GET", &[], b"").unwrap());
    let schedule = Schedule::constant(Rate::per_second(per_s).unwrap(), Duration::from_millis(ms)).unwrap();
    let plan = Plan {
        target,
        work,
        stage_ends: Vec::new(),
        load: LoadModel::Open { schedule: schedule.clone(), max_in_flight: 1_000 },
        timeout: Duration::from_secs(2),
        end: Some(schedule.duration()),
        wait_in_flight: true,
        connect_timeout: Duration::from_secs(1),
        insecure: false,
        workers: 1,
        shard: Shard::WHOLE,
        start_at: Some(Instant::now() + Duration::from_millis(100)),
        keep_start: false,
        http2: Http2::default(),
        replan: None,
    };
    let done = Arc::new(AtomicBool::new(false));
    let watching = done.clone();
    let watcher = std::thread::spawn(move || {
        let mut last = None;
        while !watching.load(Ordering::Relaxed) {
            last = worker_switches().or(last);
            std::thread::sleep(Duration::from_millis(2));
        }
        last
    });
    let outcome = perfops_engine::run(&plan, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    done.store(true, Ordering::Relaxed);
    let switches = watcher.join().unwrap().expect("the worker thread was seen");
    let total = &outcome.total;
    (switches as f64 / total.completed.max(1) as f64, total.completed, total.succeeded())
}

/// 10,000 arrivals/s for a second on one worker against nginx: at most
/// about one wake-up per gathered pair of arrivals (0.5 per request), their
/// answers read on it, whatever the protocol (see the module doc for what
/// the timerfd cost HTTP/2).
#[allow(clippy::print_stderr)] // each case's figure, shown with the output
#[test]
fn answers_are_read_on_the_arrivals_wake_ups_over_http2_as_over_http1() {
    let h1 = nginx();
    let h2c = nginx_h2(&H2Config::default());
    // (what, URL)
    let cases = [
        // HTTP/1.1 on plain TCP: paced in the park hook since #18, the reference.
        ("http/1.1", h1.url()),
        // HTTP/2 with prior knowledge, plain TCP: its answers dated by the kernel too.
        ("h2c", format!("h2c://{}/", h2c.addr())),
    ];
    for (what, url) in cases {
        let (per_request, completed, succeeded) = switches_per_request(&url, 10_000.0, 1_000);
        eprintln!("{what}: {per_request:.3} voluntary context switches per request, {completed} answered");
        assert_eq!((completed, succeeded), (10_000, 10_000), "{what}: every arrival answered");
        assert!(per_request < 0.75, "{what}: {per_request:.3} wake-ups per request, not one per pair");
    }
}
