//! End to end, issue #2: the real `perfops quick` binary against real servers
//! on 127.0.0.1 (`perfops-testkit`), judged by its `--json` summary, its exit
//! code and its terminal output.
//!
//! Timing-sensitive tests take [`common::exclusive`] so the rest of the suite
//! does not run beside them on a small machine; their bounds leave room for a
//! busy neighbour process but stay far from what the bug they guard would
//! produce.

mod common;

use std::time::{Duration, Instant};

use common::{exclusive, quick, quick_with, shared, spawn_quick, spawn_quick_with, temp_path};
use perfops_testkit as kit;
use serde_json::json;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Arrivals the server saw inside `[from, to)`.
fn arrivals_between(server: &kit::Server, from: Instant, to: Instant) -> usize {
    server.arrivals().into_iter().filter(|t| (from..to).contains(t)).count()
}

/// Issue #2, accuracy of the open model: at 500/s for 3 s against a server
/// that answers in exactly 10 ms, perfops sends exactly 1500 requests, the
/// server sees them arrive at 500/s (within 1%), nothing fails or is dropped,
/// and the median latency is the server's 10 ms plus well under a
/// millisecond of generator overhead (pacer lateness, parsing).
#[test]
fn open_model_is_accurate_in_rate_and_latency() {
    let _cpu = exclusive();
    let server = kit::fixed_delay(ms(10));
    let run = quick(&[&server.url(), "-r", "500", "-d", "3s", "-q"]);
    run.assert_exit(0);
    let j = run.json();
    assert_eq!(j["format"], "perfops.quick");
    assert_eq!(j["version"], 2);
    assert_eq!(j["model"], "open");
    assert_eq!(j["url"], server.url());
    assert_eq!(j["method"], "GET");
    assert_eq!(j["target_rate"], 500.0);
    assert_eq!(j["max_in_flight"], 10_000);
    assert_eq!(j["connections"], json!(null));
    assert_eq!(j["interrupted"], false);

    assert_eq!(run.u64("/sent"), 1500, "{}", run.dump());
    assert_eq!(run.u64("/completed"), 1500, "{}", run.dump());
    assert_eq!(run.u64("/succeeded"), 1500, "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(run.u64("/dropped"), 0, "{}", run.dump());
    assert_eq!(j["failures"], json!({}));
    assert_eq!(server.requests(), 1500);

    let p50 = run.f64("/latency_ms/p50");
    assert!((10.0..=10.8).contains(&p50), "latency p50 {p50} ms, want 10.0..=10.8\n{}", run.dump());
    assert_eq!(run.u64("/latency_ms/count"), 1500);
    // No arrival may be charged less than the server's own delay.
    assert!(run.f64("/latency_ms/min") >= 10.0, "{}", run.dump());

    // The rate the server observed: gaps between first and last arrival.
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 1500);
    let span = arrivals[arrivals.len() - 1] - arrivals[0];
    let observed = (arrivals.len() - 1) as f64 / span.as_secs_f64();
    assert!((observed / 500.0 - 1.0).abs() <= 0.01, "server saw {observed:.2}/s, want 500/s ± 1%");
    // And the rate perfops reports (elapsed runs to the last response, ~10 ms past 3 s).
    let reported = run.f64("/requests_per_s");
    assert!((reported / 500.0 - 1.0).abs() <= 0.01, "perfops reports {reported:.2}/s, want 500/s ± 1%");
    let elapsed = run.f64("/elapsed_s");
    assert!((3.0..3.2).contains(&elapsed), "elapsed {elapsed} s for a 3 s schedule");
}

/// Issue #18, the open model at a rate whose arrivals are under 250 µs apart
/// on one worker: the pacer then waits for each in the park hook and reads
/// the responses that came meanwhile in the same wake-up, each dated by the
/// kernel's receive time. At 5,000/s for 2 s against a server that answers at
/// once (the test server's delays end in a busy-wait, and a thousand a second
/// of them would make it the bottleneck): every arrival sent at the rate (the
/// server's count and clock), none dropped, each on time (latency from the
/// intended start at most 0.3 ms over service time at the median: an arrival
/// is sent before the responses of its wake-up are read), and the median
/// within a millisecond: a response left waiting for the next arrival is not
/// charged the wait.
#[test]
fn open_model_at_a_high_rate_reads_responses_on_arrival_wake_ups_truthfully() {
    let _cpu = exclusive();
    let server = kit::fixed_delay(Duration::ZERO);
    let run = quick(&[&server.url(), "-r", "5000", "-d", "2s", "--workers", "1", "-q"]);
    run.assert_exit(0);
    assert_eq!((run.u64("/sent"), run.u64("/completed"), run.u64("/dropped")), (10_000, 10_000, 0), "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(server.requests(), 10_000);
    let arrivals = server.arrivals();
    let observed = (arrivals.len() - 1) as f64 / (arrivals[arrivals.len() - 1] - arrivals[0]).as_secs_f64();
    assert!((observed / 5000.0 - 1.0).abs() <= 0.01, "server saw {observed:.1}/s, want 5,000/s ± 1%");
    let (p50, service_p50) = (run.f64("/latency_ms/p50"), run.f64("/service_ms/p50"));
    assert!(p50 - service_p50 <= 0.3, "sent {:.3} ms late at the median\n{}", p50 - service_p50, run.dump());
    assert!(p50 < 1.0, "latency p50 {p50} ms against a server that answers at once\n{}", run.dump());
}

/// Issue #18, arrivals gathered by the timerfd pacer (the default): at 10,000/s on one worker arrivals are
/// 100 µs apart, and the pacer wakes for the first of each pair and sends the
/// second with it, up to 100 µs early (`coalesce::gather`): never late on
/// purpose. Against a server that answers at once, for 1 s: every arrival
/// sent and answered, none dropped, the server sees the rate (its own clock)
/// and the arrivals in pairs (at least 30 % of its gaps under 50 µs), and an
/// arrival sent early counts from its send, not from its due time still to
/// come: latency is never below service time (at its least, on average, at
/// the median and at p90: half the requests would lose up to 100 µs), and at
/// most 0.3 ms above it at the median (the wake-up's own lateness, and a
/// loaded test machine's).
#[test]
fn open_model_gathering_arrivals_keeps_the_rate_and_sends_none_late() {
    let _cpu = exclusive();
    let server = kit::fixed_delay(Duration::ZERO);
    let run = quick(&[&server.url(), "-r", "10000", "-d", "1s", "--workers", "1", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.json()["generator"]["pacer"], "timerfd", "{}", run.dump());
    assert_eq!((run.u64("/sent"), run.u64("/completed"), run.u64("/dropped")), (10_000, 10_000, 0), "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(server.requests(), 10_000);
    let arrivals = server.arrivals();
    let observed = (arrivals.len() - 1) as f64 / (arrivals[arrivals.len() - 1] - arrivals[0]).as_secs_f64();
    assert!((observed / 10_000.0 - 1.0).abs() <= 0.01, "server saw {observed:.1}/s, want 10,000/s ± 1%");
    // Pairs: the server reads the second of a pair within a few tens of µs of
    // the first (the first's `sendto` wakes the server). Half its gaps would be
    // so with every pair intact; without gathering, at most 10 % of the gaps of
    // a schedule 100 µs apart are under 50 µs (arrivals bunch only when the
    // machine delays the pacer).
    let close = arrivals.windows(2).filter(|w| w[1] - w[0] < Duration::from_micros(50)).count();
    assert!(
        close * 10 >= arrivals.len() * 3,
        "{close} of {} arrivals within 50 µs of the previous one",
        arrivals.len()
    );
    for p in ["min", "mean", "p50", "p90"] {
        let (latency, service) = (run.f64(&format!("/latency_ms/{p}")), run.f64(&format!("/service_ms/{p}")));
        assert!(latency >= service, "latency {p} {latency} ms below service time's {service} ms\n{}", run.dump());
    }
    let (p50, service_p50) = (run.f64("/latency_ms/p50"), run.f64("/service_ms/p50"));
    assert!(p50 - service_p50 <= 0.3, "sent {:.3} ms late at the median\n{}", p50 - service_p50, run.dump());
}

/// The kernel pacer (`PERFOPS_PACER=io_uring`): at 10,000/s on one worker
/// each arrival's request is queued in io_uring ahead of time and sent by
/// the kernel at its due time,
/// so the server sees them 100 µs apart, not in the timerfd pacer's pairs
/// (the test above: at least 30 % of the gaps under 50 µs; here at most
/// 25 %, what a loaded machine bunches), at the rate, every one answered;
/// latency never below service time and at most 0.3 ms above it at the
/// median; and the summary says which pacer ran. Where io_uring is refused
/// (a sandbox), the summary says `timerfd` and there is nothing more to see.
#[allow(clippy::print_stderr)] // a note when io_uring is refused, shown with the output
#[test]
#[ignore = "the kernel pacer (not the default) bunches its sends and loses the rate when other processes \
            hold the CPUs (at load 8-12 on 2 cores: 6,900-9,808/s of 10,000/s, or 28-40 % of the gaps \
            under 50 µs): run it on a quiet machine with --ignored"]
fn open_model_on_the_kernel_pacer_sends_each_arrival_at_its_due_time() {
    let _cpu = exclusive();
    let server = kit::fixed_delay(Duration::ZERO);
    let run = quick_with(&[&server.url(), "-r", "10000", "-d", "1s", "--workers", "1", "-q"], |c| {
        c.env("PERFOPS_PACER", "io_uring");
    });
    run.assert_exit(0);
    if run.json()["generator"]["pacer"] == "timerfd" {
        eprintln!("io_uring refused here: the kernel pacer is not tested\n{}", run.stderr);
        return;
    }
    assert_eq!(run.json()["generator"]["pacer"], "io_uring", "{}", run.dump());
    assert_eq!((run.u64("/sent"), run.u64("/completed"), run.u64("/dropped")), (10_000, 10_000, 0), "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(server.requests(), 10_000);
    // The rate once the first connections are open (the first arrivals each
    // open one: no kept connection to send on ahead).
    let arrivals = server.arrivals();
    let warm = &arrivals[100..];
    let observed = (warm.len() - 1) as f64 / (warm[warm.len() - 1] - warm[0]).as_secs_f64();
    assert!((observed / 10_000.0 - 1.0).abs() <= 0.01, "server saw {observed:.1}/s, want 10,000/s ± 1%");
    // 14.5 % of the gaps were under 50 µs on a 2-core machine at load 12
    // (sends that waited for the thread to run go out together); about
    // none on a quiet one.
    let close = arrivals.windows(2).filter(|w| w[1] - w[0] < Duration::from_micros(50)).count();
    assert!(
        close * 4 <= arrivals.len(),
        "{close} of {} arrivals within 50 µs of the previous one: sent in bunches",
        arrivals.len()
    );
    for p in ["min", "mean", "p50", "p90"] {
        let (latency, service) = (run.f64(&format!("/latency_ms/{p}")), run.f64(&format!("/service_ms/{p}")));
        assert!(latency >= service, "latency {p} {latency} ms below service time's {service} ms\n{}", run.dump());
    }
    let (p50, service_p50) = (run.f64("/latency_ms/p50"), run.f64("/service_ms/p50"));
    assert!(p50 - service_p50 <= 0.3, "sent {:.3} ms late at the median\n{}", p50 - service_p50, run.dump());
}

/// The kernel pacer after a stall of its own: at 10,000/s on one worker
/// against a server that answers at once, the generator is stopped for
/// 50 ms half a second in; when it resumes, 500 arrivals are owed at once
/// and go out late from user space, each on a kept connection if one is
/// free. Those whose answers came meanwhile must be read in between, or
/// every late arrival connects, which makes the pacer later still: the
/// kernel pacer, run beside the timerfd pacer under the same stall, opens
/// at most half as many connections again (and 60 more: a loaded machine
/// stalls either on its own); here it opened 48-134 where the timerfd
/// pacer opened 67-143. Before, the kernel pacer read them every 64
/// arrivals sent late and opened 189-956 connections in this test where
/// the timerfd pacer opened 47-132, or had not caught up when the run ended
/// (a busy 2-core machine; against the peers' Go delay server, 2,400-2,900
/// against 200-650). Where io_uring is refused there is nothing to compare.
#[allow(clippy::print_stderr)] // a note when io_uring is refused, shown with the output
#[test]
fn the_kernel_pacer_recovers_from_a_stall_on_the_connections_it_has() {
    let _cpu = exclusive();
    let stalled = |pacer: &str| {
        let server = kit::fixed_delay(Duration::ZERO);
        let running = spawn_quick_with(&[&server.url(), "-r", "10000", "-d", "1s", "--workers", "1", "-q"], |c| {
            c.env("PERFOPS_PACER", pacer);
        });
        let pid = running.pid().to_string();
        let signal = |sig: &str| {
            let status = std::process::Command::new("kill").args([sig, &pid]).status().expect("run kill(1)");
            assert!(status.success(), "kill {sig} {pid} failed");
        };
        std::thread::sleep(ms(600));
        signal("-STOP");
        std::thread::sleep(ms(50));
        signal("-CONT");
        let run = running.wait(Duration::from_secs(20));
        run.assert_exit(0);
        assert_eq!((run.u64("/sent"), run.u64("/completed")), (10_000, 10_000), "{}", run.dump());
        // Counted by the server: what it accepted, whatever the summary says.
        let opened = server.connections();
        (run, opened)
    };
    let (_, on_timerfd) = stalled("timerfd");
    let (kernel, on_kernel) = stalled("io_uring");
    if kernel.json()["generator"]["pacer"] != "io_uring" {
        eprintln!("io_uring refused here: the kernel pacer is not tested\n{}", kernel.stderr);
        return;
    }
    eprintln!("after a 50 ms stall: {on_kernel} connections on the kernel pacer, {on_timerfd} on the timerfd pacer");
    assert!(
        on_kernel <= on_timerfd * 3 / 2 + 60,
        "after a 50 ms stall the kernel pacer opened {on_kernel} connections, the timerfd pacer {on_timerfd}\n{}",
        kernel.dump()
    );
}

/// Issue #2, `-r` with `-n`: exactly N arrivals at the rate, so the run
/// lasts N / rate.
#[test]
fn open_model_with_a_count_sends_exactly_that_many_at_the_rate() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-r", "200", "-n", "100", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.json()["model"], "open");
    assert_eq!((run.u64("/sent"), run.u64("/completed"), run.u64("/dropped")), (100, 100, 0), "{}", run.dump());
    assert_eq!(server.requests(), 100);
    // Arrival 99 is due at 495 ms and answered 1 ms later; the schedule of
    // 100 arrivals at 200/s lasts 500 ms, and so did the run: 200/s, not 100
    // over the 496 ms to the last answer (201.6/s).
    let elapsed = run.f64("/elapsed_s");
    assert!((0.5..0.6).contains(&elapsed), "100 arrivals at 200/s took {elapsed} s");
    let reported = run.f64("/requests_per_s");
    assert!((199.0..=200.0).contains(&reported), "perfops reports {reported:.2}/s for 200/s");
    let arrivals = server.arrivals();
    let observed = 99.0 / (arrivals[99] - arrivals[0]).as_secs_f64();
    assert!((observed / 200.0 - 1.0).abs() < 0.05, "server saw {observed:.1}/s, want 200/s");
}

/// Issue #2, dropped arrivals: at the `--max-in-flight` cap the open model
/// drops an arrival and counts it, never delays it. Against a silent server
/// with 5 slots and a 400 ms timeout, about 5 requests go out per 400 ms,
/// every other arrival of the 100 scheduled is dropped, and the summary says
/// that the generator, not the server, was the limit.
#[test]
fn arrivals_beyond_max_in_flight_are_dropped_and_counted() {
    let _cpu = shared();
    let server = kit::never_answers();
    let args = ["-r", "100", "-d", "1s", "--max-in-flight", "5", "--timeout", "400ms", "-q"];
    let run = quick(&[&[server.url().as_str()][..], &args].concat());
    run.assert_exit(1);
    let (sent, dropped) = (run.u64("/sent"), run.u64("/dropped"));
    assert_eq!(sent + dropped, 100, "every scheduled arrival is sent or dropped\n{}", run.dump());
    assert!((10..=20).contains(&sent), "{sent} sent with 5 slots freed every 400 ms\n{}", run.dump());
    assert_eq!(run.json()["failures"], json!({ "timeout": sent }), "{}", run.dump());
    assert_eq!(server.requests(), sent);
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("dropped"), "no warning about dropped arrivals: {warnings}");
    assert!(run.stdout.contains(&format!("Dropped arrivals:       {dropped} (in-flight cap 5)")), "{}", run.stdout);
}

/// Issue #2, coordinated omission. The server freezes once for 500 ms, one
/// second after it starts.
///
/// Open model at 200/s: the generator keeps sending during the freeze
/// (~100 arrivals fall into it), and each of them is charged the time it
/// waited, so the stall dominates the tail: p99 >= 400 ms, p90 far above the
/// 2 ms base delay, while the median stays near it.
///
/// Closed model, one connection: the only request in flight waits out the
/// freeze and no other is sent meanwhile, so exactly one request is slow:
/// max >= 450 ms while p99.9 (of >= 1000 requests: below the slowest one)
/// stays fast.
///
/// Both are the truth about their model. An open schedule that paused while
/// responses were outstanding would hide the stall behind one slow request,
/// as the closed model rightly does. (Charging a late *generator*, not the
/// server, is [`generator_stall_counts_as_latency_not_service_time`].)
#[test]
fn a_server_stall_hits_every_open_arrival_but_one_closed_request() {
    let _cpu = exclusive();

    let before = Instant::now();
    let server = kit::freeze_once(ms(2), ms(1000), ms(500));
    let run = quick(&[&server.url(), "-r", "200", "-d", "3s", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/sent"), 600, "{}", run.dump());
    assert_eq!(run.u64("/completed"), 600, "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(run.u64("/dropped"), 0, "{}", run.dump());
    // The window opened 1 s after the server started (a little after `before`);
    // 5 ms margins cover that offset.
    let frozen = arrivals_between(&server, before + ms(1005), before + ms(1495));
    assert!((88..=100).contains(&frozen), "{frozen} arrivals during the freeze, want ~98: the schedule must not pause");
    let (p50, p90, p99, max) = (
        run.f64("/latency_ms/p50"),
        run.f64("/latency_ms/p90"),
        run.f64("/latency_ms/p99"),
        run.f64("/latency_ms/max"),
    );
    assert!(p99 >= 400.0, "open-model p99 {p99} ms: the freeze must show in the tail\n{}", run.dump());
    assert!(p90 >= 100.0, "open-model p90 {p90} ms: one arrival in six waited\n{}", run.dump());
    assert!((480.0..700.0).contains(&max), "open-model max {max} ms\n{}", run.dump());
    assert!(p50 < 10.0, "open-model p50 {p50} ms: most arrivals never met the freeze\n{}", run.dump());
    drop(server);

    let before = Instant::now();
    let server = kit::freeze_once(ms(1), ms(1000), ms(500));
    let run = quick(&[&server.url(), "-c", "1", "-d", "3s", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(
        arrivals_between(&server, before + ms(1005), before + ms(1495)),
        0,
        "one closed-loop connection cannot send while its request is stuck"
    );
    let count = run.u64("/latency_ms/count");
    assert!(count >= 1000, "only {count} requests: too few for p99.9 to exclude the single slowest one");
    let (p99, p999, max) = (run.f64("/latency_ms/p99"), run.f64("/latency_ms/p99_9"), run.f64("/latency_ms/max"));
    assert!(max >= 450.0, "closed-model max {max} ms: the stalled request\n{}", run.dump());
    assert!(p99 < 50.0, "closed-model p99 {p99} ms: the stall hit one request only\n{}", run.dump());
    assert!(p999 < 50.0, "closed-model p99.9 {p999} ms: more than one request was stalled\n{}", run.dump());
    assert_eq!(run.json()["model"], "closed");
}

/// Issue #2, coordinated omission on the generator's side: when the
/// generator itself stalls (here: SIGSTOP for 300 ms), the arrivals it owed
/// meanwhile go out late, and their latency counts from when they were due
/// while their service time counts from the actual send. So latency p99 shows
/// the stall, service time does not, and the summary warns that the
/// generator sent late.
#[test]
fn generator_stall_counts_as_latency_not_service_time() {
    let _cpu = exclusive();
    // No server delay: a delay's final busy-wait on 30 connection threads at
    // once would slow the server itself, muddying the service time.
    let server = kit::fixed_delay(Duration::ZERO);
    let running = spawn_quick(&[&server.url(), "-r", "100", "-d", "2s", "-q"]);
    let pid = running.pid().to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill").args([sig, &pid]).status().expect("run kill(1)");
        assert!(status.success(), "kill {sig} {pid} failed");
    };
    std::thread::sleep(ms(800));
    signal("-STOP");
    std::thread::sleep(ms(300));
    signal("-CONT");
    let run = running.wait(Duration::from_secs(15));
    run.assert_exit(0);
    assert_eq!((run.u64("/sent"), run.u64("/completed"), run.u64("/failed")), (200, 200, 0), "{}", run.dump());
    // ~30 of 200 arrivals were owed during the stall, late by up to 300 ms.
    let (latency_p99, latency_max) = (run.f64("/latency_ms/p99"), run.f64("/latency_ms/max"));
    let service_p99 = run.f64("/service_ms/p99");
    assert!(latency_p99 >= 200.0, "latency p99 {latency_p99} ms must include the 300 ms stall\n{}", run.dump());
    assert!(latency_max >= 280.0, "latency max {latency_max} ms\n{}", run.dump());
    assert!(service_p99 < 50.0, "service p99 {service_p99} ms counts from the actual send\n{}", run.dump());
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("sent requests late"), "no lateness warning: {warnings}");
    // ... and the stall's own figures: how long, how many arrivals left late.
    assert!(
        warnings.contains("the generator stalled for 0.") && warnings.contains("went out more than 200 ms late"),
        "{warnings}"
    );
}

/// Issue #10, service time from the actual send: a new connection's connect
/// and TLS handshake are phases of their own (`connect_ms`, `tls_ms`) and
/// count in latency, from the intended start, never in service time, which
/// starts once the connection is ready. One open-model arrival over TLS (a
/// handshake of a millisecond or more in a debug build) against a server that
/// answers in 1 ms: its latency exceeds its service time by at least its
/// connect and handshake. (Until issue #10 the service time counted from
/// before the connect, so the two differed by the pacer's microseconds.)
#[test]
fn service_time_starts_after_connect_and_tls() {
    let _cpu = shared();
    let server = kit::tls_fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-k", "-r", "10", "-n", "1", "-q"]);
    run.assert_exit(0);
    assert_eq!((run.u64("/completed"), run.u64("/connects")), (1, 1), "{}", run.dump());
    assert_eq!(run.u64("/tls_ms/count"), 1, "{}", run.dump());
    let setup = run.f64("/connect_ms/max") + run.f64("/tls_ms/max");
    let (latency, service) = (run.f64("/latency_ms/max"), run.f64("/service_ms/max"));
    // The histograms keep 3 significant digits: a few µs of rounding either way.
    assert!(
        latency - service >= setup * 0.99 - 0.02,
        "latency {latency} ms - service {service} ms must include connect + TLS {setup} ms\n{}",
        run.dump()
    );
    assert!(service >= 1.0, "service {service} ms still includes the server's 1 ms\n{}", run.dump());
}

/// Issue #2, failure kinds: nothing listening is `connect_refused`, counted
/// per request, and with the default `--max-errors 0` the run exits 1.
#[test]
fn refused_connections_are_connect_refused_and_exit_1() {
    let _cpu = shared();
    let addr = kit::refused_addr();
    let run = quick(&[&format!("http://{addr}/"), "-n", "5", "-c", "1", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"connect_refused": 5}), "{}", run.dump());
    assert_eq!(run.u64("/sent"), 5);
    assert_eq!(run.u64("/completed"), 0);
    assert_eq!(run.u64("/failed"), 5);
    assert!(run.stdout.contains("(connect_refused: 5)"), "{}", run.stdout);
}

/// `quick -d 10s` against a closed port stops after its first 2 s, as `run` does: target down,
/// exit 3. Before, it hammered the port for the whole run (119,504 refusals in 2 s, 1.8 M in
/// 30 s) and exited 1 (a new user's review).
#[test]
fn a_target_that_is_down_stops_quick_after_two_seconds() {
    let _cpu = shared();
    let addr = kit::refused_addr();
    let started = Instant::now();
    let run = quick(&[&format!("http://{addr}/"), "-d", "10s", "-c", "2", "-q"]);
    let took = started.elapsed();
    run.assert_exit(3);
    assert!(took < Duration::from_secs(6), "stopped early, not after its 10 s: {took:?}\n{}", run.dump());
    let said = format!("target down: connection refused at {addr}");
    assert!(run.stderr.contains(&said), "{said}\n{}", run.dump());
    assert!(run.json()["warnings"].to_string().contains(&said), "{}", run.dump());
}

/// The generator's CPU share is judged only over a window long beside what its reading may hold
/// that is not the load's (`perfops_core::analysis::generator`): `quick -n 5` against a closed
/// port ran ~1 ms after ~7 ms of start-up and said "the generator used 836% of its 2 core(s): it
/// may have limited this run", which was untrue.
#[test]
fn a_run_of_a_few_milliseconds_does_not_blame_the_generators_cpu() {
    let _cpu = shared();
    let addr = kit::refused_addr();
    let run = quick(&[&format!("http://{addr}/"), "-n", "5", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.u64("/failed"), 5, "{}", run.dump());
    let warnings = run.json()["warnings"].to_string();
    assert!(!warnings.contains("the generator used"), "{warnings}\n{}", run.dump());
    assert!(!run.stdout.contains("may have limited this run"), "{}", run.stdout);
    // Nor does the Generator line print a share ("604% of 2 core(s)").
    let line = run.stdout.lines().find(|l| l.starts_with("Generator:")).unwrap_or_default();
    assert!(line.contains("too short a run for a share") && !line.contains('%'), "{line}");
}

/// The other side of the rule above: a generator kept busy for seconds (one worker sending to a
/// closed port as fast as the refusals come back, a loop with nothing to wait for) is still
/// warned about. Its share depends on the CPU the machine leaves it, so each attempt checks
/// that the warning says exactly what the figures show, and one of a few must find the
/// generator over its ceiling (on a quiet machine the first does).
#[test]
fn a_generator_busy_for_seconds_is_still_warned_about() {
    let _cpu = exclusive();
    let addr = kit::refused_addr();
    let mut shares = Vec::new();
    for _ in 0..5 {
        let run = quick(&[&format!("http://{addr}/"), "-c", "4", "-d", "2s", "--workers", "1", "-q", "--keep-going"]);
        run.assert_exit(1);
        let g = &run.json()["generator"];
        let cpu = g["cpu_user_s"].as_f64().unwrap_or(0.0) + g["cpu_sys_s"].as_f64().unwrap_or(0.0);
        let share = cpu / run.f64("/elapsed_s");
        let warned = run.json()["warnings"].to_string().contains("the generator used");
        assert_eq!(warned, share > 0.9, "a share of {share:.2} over 2 s on 1 core\n{}", run.dump());
        if warned {
            assert!(run.stdout.contains("may have limited this run"), "{}", run.stdout);
            assert!(run.stdout.contains("% of 1 core(s))"), "the Generator line gives the share: {}", run.stdout);
            return;
        }
        shares.push(share);
    }
    panic!("the generator never used over 90% of its core in five 2 s runs (shares {shares:.2?}): a busy machine?");
}

/// Issue #2, failure kinds: a TCP RST in the middle of a response body is
/// `reset`, not a success and not a protocol error.
#[test]
fn reset_mid_response_is_reset() {
    let _cpu = shared();
    let server = kit::reset_mid_response();
    let run = quick(&[&server.url(), "-n", "5", "-c", "1", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"reset": 5}), "{}", run.dump());
    assert_eq!((run.u64("/completed"), run.u64("/succeeded")), (0, 0));
    assert_eq!(server.requests(), 5, "each failed request was sent once, not retried");
}

/// Issue #2, failure kinds: a server that never answers makes each request
/// end at `--timeout` as `timeout`, one after the other, and the run ends.
#[test]
fn silence_is_timeout_after_the_request_timeout() {
    let _cpu = shared();
    let server = kit::never_answers();
    let run = quick(&[&server.url(), "--timeout", "500ms", "-n", "3", "-c", "1", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"timeout": 3}), "{}", run.dump());
    assert_eq!(server.requests(), 3);
    let elapsed = run.f64("/elapsed_s");
    assert!((1.45..2.5).contains(&elapsed), "3 sequential 500 ms timeouts took {elapsed} s");
    assert!(run.wall < Duration::from_secs(5), "{:?}", run.wall);
}

/// The request timeout is one timer per connection, moved to each request's
/// deadline (worker.rs `within`), not a timer per request: after thousands of
/// fast requests have moved it forward on one reused connection, it must still
/// fire at the current request's deadline. The server freezes for 700 ms at
/// 1 s: the request caught at ~1.0 s and the next (on a new connection, at
/// ~1.25 s) time out at 250 ms each; the one sent at ~1.5 s is answered when
/// the freeze ends, ~200 ms later, within its timeout.
#[test]
fn a_timeout_still_fires_after_many_fast_requests_on_one_connection() {
    let _cpu = exclusive();
    let server = kit::freeze_once(Duration::ZERO, ms(1000), ms(700));
    let run = quick(&[&server.url(), "-c", "1", "-d", "2500ms", "--timeout", "250ms", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"timeout": 2}), "{}", run.dump());
    assert!(
        run.u64("/completed") >= 1000,
        "too few fast requests before the freeze
{}",
        run.dump()
    );
    // The successes alone (#11: the two timeouts count in the latency at 250 ms).
    let max = run.f64("/latency_ok_ms/max");
    assert!(
        (150.0..250.0).contains(&max),
        "slowest answered request {max} ms: the freeze's last
{}",
        run.dump()
    );
    assert!(run.f64("/latency_ms/max") >= 250.0, "the timeouts, at their 250 ms\n{}", run.dump());
    assert_eq!(server.connections(), 3, "the first and each timed-out connection");
}

/// Issue #2, failure kinds: bytes that are not HTTP are `protocol`. They
/// were received, and count in the bytes in (they counted 0: "Total
/// transferred: 0 bytes received" from a server that answered every request).
#[test]
fn garbage_is_protocol() {
    let _cpu = shared();
    let server = kit::garbage();
    let run = quick(&[&server.url(), "-n", "3", "-c", "1", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"protocol": 3}), "{}", run.dump());
    assert_eq!(run.u64("/succeeded"), 0);
    let answer = b"SSH-2.0-OpenSSH_9.2\r\ngarbage\r\n\r\n".len() as u64;
    assert_eq!(run.u64("/bytes_in"), 3 * answer, "{}", run.dump());
}

/// Issue #2, failure kinds: 5xx and 4xx responses are failures of their kind,
/// yet they are responses (`completed`, with latency recorded); and
/// `--max-errors 100` accepts them (exit 0).
#[test]
fn error_statuses_are_completed_failures_of_their_class() {
    let _cpu = shared();
    for (code, kind) in [(503, "http_5xx"), (404, "http_4xx")] {
        let server = kit::status(code);
        let run = quick(&[&server.url(), "-n", "10", "-c", "2", "-q"]);
        run.assert_exit(1);
        assert_eq!(run.json()["failures"], json!({ kind: 10 }), "{}", run.dump());
        assert_eq!(run.u64("/completed"), 10, "{}", run.dump());
        assert_eq!(run.u64("/succeeded"), 0, "{}", run.dump());
        assert_eq!(run.u64("/failed"), 10, "{}", run.dump());
        assert_eq!(run.u64("/latency_ms/count"), 10, "a status is a response: its latency counts");

        let run = quick(&[&server.url(), "-n", "10", "-c", "2", "-q", "--max-errors", "100"]);
        run.assert_exit(0);
        assert_eq!(run.failures(kind), 10, "{}", run.dump());
    }
}

/// Issue #2: `--max-errors` is a percentage of finished requests, and the
/// bound is inclusive: 100% failed fails `--max-errors 99` (exit 1) and
/// passes `--max-errors 100` (exit 0).
#[test]
fn max_errors_is_a_percentage() {
    let _cpu = shared();
    let addr = kit::refused_addr();
    let run = quick(&[&format!("http://{addr}/"), "-n", "4", "-c", "1", "-q", "--max-errors", "99"]);
    run.assert_exit(1);
    let run = quick(&[&format!("http://{addr}/"), "-n", "4", "-c", "1", "-q", "--max-errors", "100"]);
    run.assert_exit(0);
    assert_eq!(run.failures("connect_refused"), 4);
}

/// Issue #2, framing: a chunked response (with a chunk extension and a
/// trailer) is read to its exact end, so every one succeeds and the
/// connection is reused: 2 connections for 50 requests.
#[test]
fn chunked_responses_are_read_exactly() {
    let _cpu = shared();
    // What `kit::chunked()` sends per response.
    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\
        Trailer: X-Checksum\r\n\r\n5\r\nhello\r\n6;note=\"second chunk\"\r\n world\r\n1\r\n\n\r\n0\r\n\
        X-Checksum: 42\r\n\r\n";
    let server = kit::chunked();
    let run = quick(&[&server.url(), "-n", "50", "-c", "2", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!((run.u64("/sent"), run.u64("/completed")), (50, 50), "{}", run.dump());
    assert_eq!(server.requests(), 50);
    assert_eq!(run.u64("/bytes_in"), 50 * RESPONSE.len() as u64, "{}", run.dump());
    assert_eq!(run.u64("/connects"), 2, "keep-alive after a chunked body\n{}", run.dump());
    assert_eq!(server.connections(), 2);
}

/// Issue #2, framing: a body delimited by the close of the connection is read
/// to EOF and succeeds, and the next request opens a new connection.
#[test]
fn close_delimited_responses_succeed_on_fresh_connections() {
    let _cpu = shared();
    // What `kit::close_delimited()` sends per response.
    const RESPONSE: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nclose-delimited body\n";
    let server = kit::close_delimited();
    let run = quick(&[&server.url(), "-n", "20", "-c", "2", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!((run.u64("/sent"), run.u64("/completed")), (20, 20), "{}", run.dump());
    assert_eq!(run.u64("/bytes_in"), 20 * RESPONSE.len() as u64, "{}", run.dump());
    assert_eq!(run.u64("/connects"), run.u64("/completed"), "one connection per request\n{}", run.dump());
    assert_eq!(server.connections(), 20);
}

/// Issue #2, HTTPS: with `--insecure` a self-signed server works, one TLS
/// handshake per connection is measured; without it, the certificate is
/// rejected as `tls` and the run exits 1.
#[test]
fn https_with_and_without_insecure() {
    let _cpu = shared();
    let server = kit::tls_fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-k", "-n", "20", "-c", "2", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert_eq!(run.u64("/completed"), 20, "{}", run.dump());
    assert_eq!(run.u64("/connects"), 2, "{}", run.dump());
    assert_eq!(run.u64("/tls_ms/count"), 2, "one handshake per connection\n{}", run.dump());
    assert!(run.f64("/tls_ms/min") > 0.0, "{}", run.dump());
    assert!(run.stdout.contains("TLS:"), "{}", run.stdout);
    assert_eq!(server.requests(), 20);

    let run = quick(&[&server.url(), "-n", "2", "-c", "1", "-q"]);
    run.assert_exit(1);
    assert_eq!(run.json()["failures"], json!({"tls": 2}), "{}", run.dump());
    assert_eq!(run.u64("/completed"), 0);
    assert_eq!(server.requests(), 20, "no request may go out over an unverified connection");
    // Said once, with the way out, and no protocol claimed that no server
    // chose (review 2's tester, P2: "Protocol: http/1.1 (ALPN)", 50 `tls`, no word).
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("the TLS handshake with the target failed (its certificate "), "{warnings}");
    assert!(warnings.contains("accepted with -k (--insecure)"), "{warnings}");
    assert_eq!(run.json()["protocol"], "unknown (the TLS handshake failed)", "{}", run.dump());
}

/// `-p` is HTTP/2's: over HTTP/1.1 it is said what it did, not taken
/// silently (review 2's tester): `-c 2 -p 3` is 6 users on 6 connections.
#[test]
fn parallel_streams_over_http1_are_warned_about() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-c", "2", "-p", "3", "-n", "60", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/connects"), 6, "{}", run.dump());
    let warnings = run.json()["warnings"].to_string();
    assert!(warnings.contains("-p 3 is HTTP/2's streams per connection; over http/1.1"), "{warnings}");
    assert_eq!(run.json()["connections"], 6, "the header's count is what was opened\n{}", run.dump());
}

/// Issue #2, closed model: `-n 200 -c 4` sends exactly 200 requests on
/// exactly 4 keep-alive connections.
#[test]
fn closed_model_sends_exactly_n_on_c_connections() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-n", "200", "-c", "4", "-q"]);
    run.assert_exit(0);
    let j = run.json();
    assert_eq!(j["model"], "closed");
    assert_eq!(j["connections"], 4);
    assert_eq!(j["target_rate"], json!(null));
    assert_eq!(j["max_in_flight"], json!(null));
    assert_eq!(run.u64("/sent"), 200, "{}", run.dump());
    assert_eq!(run.u64("/completed"), 200, "{}", run.dump());
    assert_eq!(run.u64("/succeeded"), 200, "{}", run.dump());
    assert_eq!(run.u64("/connects"), 4, "{}", run.dump());
    assert_eq!(server.requests(), 200);
    assert_eq!(server.connections(), 4, "keep-alive: one connection per user");
}

/// `-n 3` with the default `-c 50`: three requests open three connections,
/// and the summary says 3, not 50 (ab and hey refuse such a `-c`).
#[test]
fn fewer_requests_than_connections_say_how_many_connected() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-n", "3", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.json()["connections"], 3, "{}", run.dump());
    assert_eq!(run.u64("/connects"), 3, "{}", run.dump());
    assert_eq!(server.connections(), 3);
}

/// Issue #2, closed model: a closed loop has no schedule to be late for, so
/// latency *is* service time, to the microsecond (`Stats` documents "in a
/// closed loop they are equal"): the user's next request starts when the
/// previous one ended, and that one instant is both its due and its send time.
///
/// Regression test (a bug found while writing this suite, since fixed): since the engine's
/// flow/step refactor, `Worker::arrival` (now in crates/perfops-engine/src/worker/arrival.rs)
/// reads the clock again for the send time (`let mut sent = Instant::now();`)
/// instead of using the user loop's `now`, so latency exceeds service time by
/// the few microseconds of picking the flow, and the two histograms differ.
#[test]
fn closed_model_latency_is_service_time() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-n", "200", "-c", "4", "-q"]);
    run.assert_exit(0);
    let j = run.json();
    assert_eq!(j["latency_ms"], j["service_ms"], "closed model: latency and service time must be one histogram");
}

/// Issue #2, wake-up coalescing (the engine's `coalesce` module): a closed
/// loop of 100 users against nginx naps before parking so that one wake-up
/// reads several responses, and each nap stays within its bound: at most
/// 20 µs and a fiftieth of the mean latency, the most by which a response read
/// after a nap can be counted late. The summary says so. A loop of 4 users,
/// whose naps would gather nothing, and the open model, whose wake-ups are
/// the schedule's, never nap.
#[test]
fn closed_loop_coalesces_wake_ups_within_the_bound() {
    let _cpu = exclusive();
    let server = kit::nginx();
    let url = server.url();
    let run = quick(&[&url, "-c", "100", "--workers", "1", "-d", "3s"]);
    run.assert_exit(0);
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    let (naps, longest_us) = (run.u64("/generator/naps"), run.f64("/generator/longest_nap_us"));
    let mean_us = run.f64("/latency_ms/mean") * 1e3;
    assert!(naps > 0, "100 users against nginx: the worker should nap\n{}", run.dump());
    assert!((5.0..=20.0).contains(&longest_us), "naps of 5..=20 µs, got {longest_us}\n{}", run.dump());
    // The nap follows the previous second's mean; the run's mean is within a few % of it.
    assert!(longest_us <= mean_us / 50.0 * 1.25, "nap {longest_us} µs vs mean latency {mean_us} µs");
    assert!(run.stdout.contains(&format!("Wake-ups:               {naps} coalesced")), "{}", run.stdout);

    let few = quick(&[&url, "-c", "4", "--workers", "1", "-d", "1500ms", "-q"]);
    few.assert_exit(0);
    assert_eq!(few.u64("/generator/naps"), 0, "4 users: a nap would gather nothing\n{}", few.dump());
    assert!(!few.stdout.contains("Wake-ups:"), "{}", few.stdout);
    let open = quick(&[&url, "-r", "20000", "--workers", "1", "-d", "1500ms", "-q"]);
    open.assert_exit(0);
    assert_eq!(open.u64("/generator/naps"), 0, "the open model never naps\n{}", open.dump());
}

/// Issue #2, one write per request with `TCP_NODELAY`: a POST with a 2 KB
/// body. Were head and body written separately on a socket with Nagle's
/// algorithm on, the body would wait for the server's delayed ACK (~40 ms on
/// Linux) on every request.
#[test]
fn post_with_a_body_has_no_nagle_stall() {
    let _cpu = exclusive();
    let body_path = temp_path("body", "bin");
    let body: Vec<u8> = (0..2048u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&body_path, &body).expect("write the body file");
    let server = kit::fixed_delay(Duration::ZERO);
    let body_arg = format!("@{}", body_path.display());
    let run = quick(&[
        &server.url(),
        "-m",
        "POST",
        "-b",
        &body_arg,
        "-H",
        "Content-Type: text/plain",
        "-c",
        "1",
        "-n",
        "200",
        "-q",
    ]);
    let _ = std::fs::remove_file(&body_path);
    run.assert_exit(0);
    assert_eq!(run.json()["method"], "POST");
    assert_eq!(run.u64("/completed"), 200, "{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    // The server answers only once the whole body (by Content-Length) arrived.
    assert_eq!(server.requests(), 200);
    let per_request = run.u64("/bytes_out") / 200;
    assert!(per_request > 2048 && per_request < 2048 + 200, "{per_request} bytes per request");
    let (p50, p99) = (run.f64("/service_ms/p50"), run.f64("/service_ms/p99"));
    assert!(p50 < 5.0, "service p50 {p50} ms\n{}", run.dump());
    assert!(p99 < 25.0, "service p99 {p99} ms: a 40 ms Nagle / delayed-ACK stall?\n{}", run.dump());
}

/// #11: a server that writes headers and body in two sends without
/// `TCP_NODELAY` (a real python3 socket server): the body waits for our
/// delayed ACK of the headers, ~40 ms on Linux, on every request of a
/// keep-alive connection. `quick` names it, one connection or several; a
/// server answering in one write at once does not get it.
#[test]
fn quick_names_a_delayed_ack_stall_on_every_request() {
    let _cpu = exclusive();
    let server = kit::python::two_sends();
    let url = format!("{}/", server.url(0));
    for args in [["-c", "1", "-n", "60"], ["-c", "4", "-n", "200"]] {
        let run = quick(&[&url, args[0], args[1], args[2], args[3], "-m", "POST", "-b", "x=1", "-q"]);
        run.assert_exit(0);
        // The stall is real: the first byte at once, the last ~40 ms later.
        let (ttfb, total) = (run.f64("/ttfb_ms/p50"), run.f64("/service_ms/p50"));
        assert!(ttfb < 5.0 && (36.0..60.0).contains(&total), "ttfb {ttfb} ms, total {total} ms\n{}", run.dump());
        let stalls = &run.json()["stalls"];
        assert_eq!(stalls["every"], true, "{args:?}: {}", run.dump());
        assert_eq!(stalls["quantum_ms"], 40.0, "{}", run.dump());
        let line = run.stdout.lines().find(|l| l.starts_with("Stalls:")).unwrap_or_else(|| panic!("{}", run.stdout));
        assert!(line.contains("every request stalled ~4") && line.contains("delayed ACK"), "{line}");
    }
    let steady = kit::fixed_delay(Duration::ZERO);
    let run = quick(&[&steady.url(), "-c", "4", "-n", "200", "-q"]);
    run.assert_exit(0);
    assert_eq!(run.json()["stalls"], json!(null), "{}", run.dump());
    assert!(!run.stdout.contains("Stalls:"), "{}", run.stdout);
}

/// Issue #2, usage errors exit 2 with a message that names the problem, on
/// stderr, and nothing runs.
#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let _cpu = shared();
    let addr = kit::refused_addr();
    let url = format!("http://{addr}/");
    let missing_body = format!("@{}", temp_path("missing", "bin").display());
    let cases: [(&[&str], &str); 10] = [
        (&["not a url", "-n", "1"], "not a valid URL"),
        // Sent as the request line `GE T / HTTP/1.1` (session 14's tester).
        (&[&url, "-m", "GE T", "-n", "1"], "`GE T` is not an HTTP method"),
        (&["ftp://127.0.0.1/", "-n", "1"], "only http://, https://, h2c://, grpc://, grpcs://, ws:// and wss://"),
        (&[&url, "-d", "nonsense"], "is not a duration"),
        (&[&url, "-d", "0s", "-c", "1"], "nothing to do"),
        (&[&url, "-c", "0", "-n", "1"], "-c must be at least 1"),
        (&[&url, "-r", "0", "-d", "1s"], "-r 0/s"),
        // Not echoed: a value typed without its name may be a secret (#31).
        (&[&url, "-H", "NoColonHere", "-n", "1"], "header `<redacted>` is not `Name: value`"),
        (&[&url, "-b", &missing_body, "-n", "1"], "cannot read body file"),
        (&[&url, "-c", "2", "-r", "10"], "cannot be used with"),
    ];
    for (args, needle) in cases {
        let run = quick(args);
        run.assert_exit(2);
        assert!(run.stderr.contains(needle), "perfops {args:?}: stderr lacks {needle:?}:\n{}", run.stderr);
        assert!(run.stdout.is_empty(), "perfops {args:?} printed on stdout:\n{}", run.stdout);
        assert!(run.json.is_none(), "perfops {args:?} wrote a summary");
    }
}

/// Issue #2, Ctrl-C: SIGINT stops the arrivals, lets in-flight requests
/// finish, and still writes the summary (marked `interrupted`), exit 0.
#[test]
fn sigint_stops_the_run_and_keeps_what_was_measured() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let running = spawn_quick(&[&server.url(), "-r", "100", "-d", "20s", "-q"]);
    std::thread::sleep(ms(1500));
    let kill =
        std::process::Command::new("kill").args(["-INT", &running.pid().to_string()]).status().expect("run kill(1)");
    assert!(kill.success(), "kill -INT failed");
    let signalled = Instant::now();
    let run = running.wait(Duration::from_secs(15));
    let stopped_in = signalled.elapsed();
    assert!(stopped_in < Duration::from_secs(2), "exited {stopped_in:?} after SIGINT");
    run.assert_exit(0);
    assert_eq!(run.json()["interrupted"], true, "{}", run.dump());
    let completed = run.u64("/completed");
    assert!((50..400).contains(&completed), "{completed} completed in ~1.5 s at 100/s\n{}", run.dump());
    assert_eq!(run.u64("/sent"), completed, "in-flight requests finish\n{}", run.dump());
    assert_eq!(run.u64("/failed"), 0, "{}", run.dump());
    assert!(run.f64("/elapsed_s") < 3.0, "{}", run.dump());
    assert!(run.stdout.contains("interrupted"), "{}", run.stdout);
}

/// Issue #2, terminal output: with stderr not a terminal there is no live
/// line even without `-q`, and stdout carries the ab-style summary.
#[test]
fn summary_on_stdout_and_no_live_line_when_not_a_tty() {
    let _cpu = shared();
    let server = kit::fixed_delay(ms(1));
    let run = quick(&[&server.url(), "-n", "20", "-c", "2"]);
    run.assert_exit(0);
    assert!(run.stderr.is_empty(), "stderr is a pipe, yet perfops wrote:\n{}", run.stderr);
    for needle in [
        "Requests per second:",
        "Connection Times (ms)",
        "Percentage of the requests served within a certain time",
        "Complete requests:      20",
        "Failed requests:        0",
    ] {
        assert!(run.stdout.contains(needle), "stdout lacks {needle:?}:\n{}", run.stdout);
    }
}

/// Exit codes are documented: a closed stdout (`perfops ... | head`) exits 0,
/// without a panic message (found with `perfops run ... | head`).
#[test]
fn closed_stdout_exits_zero_without_a_panic() {
    for args in [vec!["schema"], vec!["check", concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/orders.yaml")]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_perfops"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away before anything is written
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
