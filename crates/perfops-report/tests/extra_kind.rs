//! A new failure kind is one row in `perfops-core`'s table of kinds
//! (`measure/failure.rs`): built with `--features extra-kind-for-tests`,
//! that table has one row more (`extra_for_tests`) and nothing else in the
//! workspace names it. This file follows it through everything that lists
//! kinds: merge, the fleet's wire (with a peer of a build without it, both
//! ways), a series line and its parts, the summary's figures. `scripts/test`
//! runs it:
//!
//! ```text
//! cargo test -p perfops-report --features extra-kind-for-tests --test extra_kind
//! ```
#![cfg(feature = "extra-kind-for-tests")]

use std::time::Duration;

use perfops_core::fleet::wire::{Layout, Message, Names, decode, encode, encode_second_as};
use perfops_core::measure::{FailureKind, Interval, Key, Stats};
use perfops_core::pipeline::Second;
use perfops_report::run::{Figures, PartLine, SeriesLine};

const EXTRA: FailureKind = FailureKind::ExtraForTests;

/// A part as an engine counts it: `n` failures of the new kind (each with
/// its latency) and a timeout.
fn stats(n: u64) -> Stats {
    let mut s = Stats { sent: n + 1, ..Stats::default() };
    s.failures.add_n(EXTRA, n);
    s.failures.add(FailureKind::Timeout);
    for _ in 0..=n {
        s.latency.record(Duration::from_millis(2));
    }
    s
}

fn second(n: u64) -> Interval {
    let s = stats(n);
    Interval {
        index: 0,
        length: Duration::from_secs(1),
        in_flight: 0,
        target: Some(10.0),
        stats: s.clone(),
        parts: vec![(Key { stage: 0, step: 0 }, s)],
        samples: Default::default(),
    }
}

#[test]
fn the_new_kind_is_declared_named_and_counted_as_a_failure() {
    assert_eq!(FailureKind::from_name("extra_for_tests"), Some(EXTRA));
    assert!(FailureKind::ALL.contains(&EXTRA));
    assert!(Names::local().kinds.iter().any(|k| k == "extra_for_tests"), "the handshake names it");
    let mut a = stats(2);
    a.merge(&stats(3));
    assert_eq!((a.failures[EXTRA], a.failures.total()), (5, 7), "merged, and among the failures");
}

#[test]
fn it_crosses_the_wire_and_meets_builds_without_it() {
    let iv = second(4);
    // Same build both sides: exactly.
    let frame = encode(&Message::Second(Box::new(iv.clone())));
    let Ok(Message::Received(raw)) = decode(&frame[4..]) else { panic!("a second") };
    assert_eq!(raw.decode().unwrap().stats, iv.stats);

    // An agent with it, a coordinator without it: counted as `other`, said, not lost.
    let without: Vec<FailureKind> = FailureKind::ALL.into_iter().filter(|&k| k != EXTRA).collect();
    let layout = Layout::of(&Names::local(), &without).unwrap();
    assert_eq!(layout.unknown_kinds, vec!["extra_for_tests".to_string()]);
    let back = raw.decode_with(&layout).unwrap();
    assert_eq!((back.stats.failures[FailureKind::Other], back.stats.failures.total()), (4, 5));

    // An agent without it (its names lack the kind, so it counted none), a coordinator
    // with it: one count fewer per part on the wire, every count where it belongs.
    let mut older = Names::local();
    older.kinds.retain(|k| k != "extra_for_tests");
    let iv = second(0);
    let frame = encode_second_as(&iv, &older);
    let Ok(Message::Received(raw)) = decode(&frame[4..]) else { panic!("a second") };
    let back = raw.decode_with(&Layout::of(&older, &FailureKind::ALL).unwrap()).unwrap();
    assert_eq!(back.stats, iv.stats);
    assert_eq!((back.stats.failures[EXTRA], back.stats.failures[FailureKind::Timeout]), (0, 1));
}

#[test]
fn it_reaches_the_series_line_its_parts_and_the_summary() {
    let iv = second(3);
    let names = ["step".to_string()];
    let s = Second {
        interval: &iv,
        t: 0,
        start: Duration::ZERO,
        stage: "10/s",
        draining: false,
        step_names: &names,
        stage_names: &[],
        events: &[],
        stages: &[],
        watched: &[],
        probes: &[],
    };
    let line = perfops_report::sink::series_line(&s);
    let json = serde_json::to_string(&line).unwrap();
    let back: SeriesLine = serde_json::from_str(&json).unwrap();
    assert_eq!(back.failures.get("extra_for_tests"), Some(&3), "{json}");
    assert_eq!(back.failed, 4);

    // A part (what merge reads back) keeps it by name.
    let parts = perfops_report::parts::part_lines(&iv);
    let part: PartLine = serde_json::from_str(&serde_json::to_string(&parts[0]).unwrap()).unwrap();
    assert_eq!(part.failures.get("extra_for_tests"), Some(&3));

    // The summary's figures list it among the failures by kind.
    let f = Figures::new("total", &iv.stats, 1.0, Some(10.0), 10.0);
    assert_eq!((f.failures.get("extra_for_tests"), f.failed), (Some(&3), 4));
}
