//! The figures in the crate's README: the cost of a request hook that HMAC-signs a request,
//! a runtime's memory and build time. Run in release:
//!
//! ```text
//! cargo run --release -p perfops-script --example sign_bench
//! ```
#![allow(clippy::print_stdout)] // a benchmark prints its figures
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use perfops_script::{Clock, FlowState, Limits, RequestParts, Runtime, Scripts};

/// The hook the figures are of: a signature over method, path, timestamp and body, as an
/// HMAC-signing API asks for it.
const SIGN: &str = r#"
function sign(req) {
  const ts = String(Date.now());
  const payload = req.method + "\n" + req.path + "\n" + ts + "\n" + req.body;
  req.headers["X-Signature"] = "t=" + ts + ",v1=" + perfops.hmac("sha256", vars.secret, payload, "hex");
}
function nothing(req) {}
"#;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn request(i: u64) -> RequestParts {
    RequestParts {
        method: "POST".into(),
        path: format!("/api/orders/{i}"),
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Authorization".into(), "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl".into()),
        ],
        body: format!(
            r#"{{"user":"u-{i:06}","items":[{{"sku":"A-1","qty":2}},{{"sku":"B-7","qty":1}}],"note":"{}"}}"#,
            "x".repeat(60)
        )
        .into_bytes(),
    }
}

/// This thread's CPU time: on a shared machine, wall time counts the other processes' turns.
fn cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).map(Duration::from).unwrap_or_default()
}

/// (wall, CPU) time of one call, over `n` calls.
fn per_call(rt: &mut Runtime, hook: &str, n: u64) -> (Duration, Duration) {
    per_call_between(rt, hook, n, &mut [], Duration::ZERO)
}

/// (wall, CPU) time of one call, over `n` calls, with `between` (its cache lines) written
/// once between two calls (what a running generator's network work does to the caches the
/// interpreter left warm), and a sleep of `nap` (where the machine has nothing else to run,
/// what an idle CPU does to them). Only the calls are timed.
fn per_call_between(rt: &mut Runtime, hook: &str, n: u64, between: &mut [u8], nap: Duration) -> (Duration, Duration) {
    let hook = rt.scripts().hook(hook).expect("hook");
    let mut state = FlowState { arrival: 0, ..FlowState::default() };
    state.vars.insert("secret".into(), "s3cr3t-0123456789abcdef".into());
    state.vars.insert("token".into(), "eyJhbGciOiJIUzI1NiJ9".into());
    state.vars.insert("user".into(), "u-000001".into());
    let requests: Vec<RequestParts> = (0..64).map(request).collect();
    if between.is_empty() && nap.is_zero() {
        let started = Instant::now();
        let cpu_started = cpu();
        for i in 0..n {
            let mut req = requests[(i % 64) as usize].clone();
            state.arrival = i;
            rt.before_request(hook, &mut state, &mut req).expect("signs");
            black_box(&req);
        }
        return (started.elapsed() / n as u32, (cpu() - cpu_started) / n as u32);
    }
    let (mut wall, mut on_cpu) = (Duration::ZERO, Duration::ZERO);
    for i in 0..n {
        for line in between.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        black_box(&between);
        if !nap.is_zero() {
            std::thread::sleep(nap);
        }
        let mut req = requests[(i % 64) as usize].clone();
        state.arrival = i;
        let (started, cpu_started) = (Instant::now(), cpu());
        rt.before_request(hook, &mut state, &mut req).expect("signs");
        on_cpu += cpu() - cpu_started;
        wall += started.elapsed();
        black_box(&req);
    }
    (wall / n as u32, on_cpu / n as u32)
}

fn main() {
    // `sign_bench HOOK N`: only N calls of HOOK (for a profiler).
    let args: Vec<String> = std::env::args().collect();
    // One runtime on a frozen clock, for the profiler's modes below.
    let frozen = || {
        let scripts = Scripts::compile(&[("sign.js", SIGN)]).expect("compiles");
        Runtime::new(&scripts, Limits::default(), 1, Clock::frozen(0)).expect("runtime")
    };
    if let [_, hook, n] = args.as_slice() {
        let mut rt = frozen();
        let (wall, cpu) = per_call(&mut rt, hook, n.parse().expect("a count"));
        println!("{hook}: {} ns of CPU a call, wall {} ns", cpu.as_nanos(), wall.as_nanos());
        return;
    }
    // `sign_bench HOOK N KIB NAP_US`: N calls, KIB KiB of memory written and a sleep of
    // NAP_US µs between two calls.
    if let [_, hook, n, kib, nap] = args.as_slice() {
        let nap = Duration::from_micros(nap.parse().expect("µs"));
        let mut rt = frozen();
        let mut between = vec![0u8; kib.parse::<usize>().expect("KiB") << 10];
        let n: u64 = n.parse().expect("a count");
        per_call_between(&mut rt, hook, n / 10, &mut between, nap); // warm-up
        let (wall, cpu) = per_call_between(&mut rt, hook, n, &mut between, nap);
        println!(
            "{hook}, {kib} KiB written and {} µs slept between calls: {} ns of CPU a call, wall {} ns",
            nap.as_micros(),
            cpu.as_nanos(),
            wall.as_nanos()
        );
        return;
    }
    let scripts = Scripts::compile(&[("sign.js", SIGN)]).expect("compiles");
    let clock = Clock::run(std::time::SystemTime::now(), Instant::now());

    // Memory: 64 runtimes, as 64 workers would hold them.
    let before = rss_kib();
    let started = Instant::now();
    let runtimes: Vec<Runtime> =
        (0..64).map(|i| Runtime::new(&scripts, Limits::default(), i, clock).expect("runtime")).collect();
    let build = started.elapsed() / 64;
    let after = rss_kib();
    println!(
        "runtime: {} KiB RSS each (64 runtimes: {} KiB), QuickJS heap {} KiB, built in {} µs",
        (after - before) / 64,
        after - before,
        runtimes[0].memory_bytes() / 1024,
        build.as_micros()
    );
    drop(runtimes);

    let mut rt = Runtime::new(&scripts, Limits::default(), 1, clock).expect("runtime");
    let body_len = request(1).body.len();
    let request_len = "POST".len() + "/api/orders/000001".len() + body_len + 13;
    println!("signed payload: ~{request_len} bytes (body {body_len})");
    per_call(&mut rt, "sign", 20_000); // warm-up
    let _ = rt.take_spent();
    let mut sign: Vec<(Duration, Duration)> = (0..5).map(|_| per_call(&mut rt, "sign", 100_000)).collect();
    let spent = rt.take_spent();
    let mut empty: Vec<(Duration, Duration)> = (0..5).map(|_| per_call(&mut rt, "nothing", 100_000)).collect();
    sign.sort_by_key(|t| t.1);
    empty.sort_by_key(|t| t.1);

    // The same HMAC and hex in Rust alone: the floor of any engine.
    let key = b"s3cr3t-0123456789abcdef";
    let reqs: Vec<RequestParts> = (0..64).map(request).collect();
    let started = cpu();
    let n = 200_000u32;
    for i in 0..n {
        let r = &reqs[(i % 64) as usize];
        let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("any key");
        mac.update(format!("{}\n{}\n{}\n", r.method, r.path, 1_764_400_000_000u64).as_bytes());
        mac.update(&r.body);
        black_box(hex::encode(mac.finalize().into_bytes()));
    }
    let native = (cpu() - started) / n;

    println!(
        "signing hook: {} ns of CPU a call (median of 5 x 100,000; min {}, max {}); wall {} ns",
        sign[2].1.as_nanos(),
        sign[0].1.as_nanos(),
        sign[4].1.as_nanos(),
        sign[2].0.as_nanos()
    );
    println!(
        "empty request hook: {} ns of CPU a call (the call and the conversions alone); wall {} ns",
        empty[2].1.as_nanos(),
        empty[2].0.as_nanos()
    );
    println!("the HMAC-SHA-256 and hex in Rust alone: {} ns of CPU", native.as_nanos());
    println!(
        "take_spent over the 500,000 signing calls: {} ms ({} ns a call)",
        spent.as_millis(),
        spent.as_nanos() / 500_000
    );
}
