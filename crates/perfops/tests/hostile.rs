//! End to end, issue #12: the real `perfops` binary where servers, fleets of
//! connections and disks push back. Connections must cost little memory.
//!
//! Each test is bounded to a few seconds; the memory test takes
//! [`common::exclusive`] (10,000 connections are the whole machine's).

// A skipped test says why on stderr (the harness shows it with --nocapture).
#![allow(clippy::print_stderr)]

mod common;

use std::time::{Duration, Instant};

use common::{exclusive, spawn_quick};
use perfops_testkit as kit;

/// The open-files hard limit of this process (what a child may raise to).
fn fd_hard_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("a `Max open files` line");
    // `Max open files   1024   524288   files`: soft, hard.
    let hard = line.split_whitespace().nth(4).expect("the hard limit");
    hard.parse().unwrap_or(u64::MAX) // "unlimited"
}

/// `VmHWM` (peak resident set) of process `pid`, in KiB, while it lives.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// #12, point 2: 10,000 open keep-alive connections (a closed loop of
/// 10,000 users against nginx) fit in under 100 MiB. Before: 16 KiB of read
/// buffer per connection, 230 MiB in all.
#[test]
fn ten_thousand_connections_fit_in_100_mib() {
    const CONNECTIONS: u32 = 10_000;
    // perfops and nginx each need a descriptor per connection (plus a few):
    // both raise their soft limit to the hard one, which must allow it.
    let hard = fd_hard_limit();
    if hard < u64::from(CONNECTIONS) * 9 / 8 + 200 {
        eprintln!(
            "SKIPPED ten_thousand_connections_fit_in_100_mib: the open-files hard limit is {hard}, \
             below the {} this test needs (raise it with `ulimit -Hn`)",
            CONNECTIONS * 9 / 8 + 200
        );
        return;
    }
    let _cpu = exclusive();
    let server = kit::nginx_holding(CONNECTIONS);
    let running = spawn_quick(&[&server.url(), "-c", &CONNECTIONS.to_string(), "-n", "20000", "-q"]);
    let pid = running.pid();
    // VmHWM is gone with the process: sample it while it lives; the last
    // sample before the exit is the peak (VmHWM never decreases).
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            match peak_rss_kib(pid) {
                Some(kib) => peak = peak.max(kib),
                None if peak > 0 => break,
                None => {}
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let run = running.wait(Duration::from_secs(30));
    let sampled_kib = sampler.join().expect("the sampler");
    run.assert_exit(0);
    assert_eq!(run.u64("/connects"), u64::from(CONNECTIONS), "every user opened its connection\n{}", run.dump());
    assert_eq!(run.u64("/completed"), 20_000, "{}", run.dump());
    // The process's own peak (getrusage), which /proc's samples may miss by a few ms.
    let own_kib = run.u64("/generator/max_rss_kib");
    let peak_mib = sampled_kib.max(own_kib) as f64 / 1024.0;
    assert!(sampled_kib > 0, "no VmHWM sample of the perfops child");
    assert!(
        peak_mib < 100.0,
        "{CONNECTIONS} connections peaked at {peak_mib:.1} MiB (VmHWM {sampled_kib} KiB, getrusage {own_kib} KiB)"
    );
}

/// #12, point 2: a closed loop with more users than the process may open
/// files is refused at once, saying why (exit 2), instead of failing its
/// connections one by one.
#[test]
fn more_connections_than_files_is_a_usage_error() {
    let _cpu = common::shared();
    let hard = fd_hard_limit();
    let Ok(too_many) = u32::try_from(hard + 1) else {
        eprintln!("SKIPPED more_connections_than_files_is_a_usage_error: no finite open-files hard limit");
        return;
    };
    let server = kit::fixed_delay(Duration::ZERO);
    let run = common::quick(&[&server.url(), "-c", &too_many.to_string(), "-n", "10", "-q"]);
    run.assert_exit(2);
    assert!(run.stderr.contains("do not fit") && run.stderr.contains("ulimit -Hn"), "{}", run.stderr);
    assert_eq!(server.connections(), 0, "nothing was sent");
}
