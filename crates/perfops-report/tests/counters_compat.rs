//! Results written before the counters were declared once (in
//! `perfops-core`'s `Stats`) read and write back the same: files that
//! perfops' binary wrote from the commit before that change, kept in
//! `tests/counters/`:
//! - `shard/`: `perfops run s.yaml --shard 0/1` (its lines have `parts`),
//!   2 s at 40/s against `demo:async`, a quarter of the arrivals 401;
//! - `plain-series.jsonl`: the same without `--shard` (no `parts`);
//! - `quick.json`: `perfops quick http://127.0.0.1:1/ -n 3 --json` (every
//!   request refused).
//!
//! Regression guard: a counter's JSON name or place (a series line's
//! top level, a part, `quick --json`) must not change when the table that
//! declares it does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use perfops_core::measure::{Counter, FailureKind, Stats};
use perfops_report::quick::{QuickSetup, QuickSummary};
use perfops_report::run::{GeneratorUse, RunSummary, SeriesLine};
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/counters")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap().lines().map(str::to_string).collect()
}

/// Each line read as a `SeriesLine` and written again is the same JSON:
/// every key, every value, nothing added.
#[test]
fn series_lines_of_before_round_trip_exactly() {
    for file in [dir().join("shard/series.jsonl"), dir().join("plain-series.jsonl")] {
        let lines = lines(&file);
        assert!(!lines.is_empty(), "{}", file.display());
        for l in lines {
            let line: SeriesLine = serde_json::from_str(&l).unwrap();
            let before: Value = serde_json::from_str(&l).unwrap();
            let after = serde_json::to_value(&line).unwrap();
            assert_eq!(after, before, "{}", file.display());
            // The counters are where they were, with their values.
            for c in ["sent", "completed", "dropped", "iterations", "bytes_in", "bytes_out"] {
                let counter = Counter::from_name(c).unwrap();
                assert_eq!(before[c].as_u64(), Some(line.counters[counter]), "{c}");
            }
        }
    }
}

/// `summary.json` reads and writes back the same.
#[test]
fn a_summary_of_before_round_trips_exactly() {
    let text = std::fs::read_to_string(dir().join("shard/summary.json")).unwrap();
    let summary: RunSummary = serde_json::from_str(&text).unwrap();
    let before: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&summary).unwrap(), before);
}

/// The shard's directory read back for a merge: each second's parts give
/// the counters its line had, `arrivals_answered` included, and the
/// failures by kind.
#[test]
fn a_shard_of_before_reads_back_for_a_merge() {
    let read = perfops_report::parts::read_seconds(&dir().join("shard")).unwrap();
    let lines = lines(&dir().join("shard/series.jsonl"));
    assert_eq!(read.seconds.len(), lines.len());
    for (iv, l) in read.seconds.iter().zip(&lines) {
        let before: Value = serde_json::from_str(l).unwrap();
        let st = &iv.stats;
        for c in ["sent", "completed", "dropped", "iterations", "bytes_in", "bytes_out"] {
            assert_eq!(Some(st.counter(Counter::from_name(c).unwrap())), before[c].as_u64(), "{c}");
        }
        let answered = before["parts"].as_array().unwrap().iter().map(|p| p["arrivals_answered"].as_u64().unwrap());
        assert_eq!(st.arrivals_answered, answered.sum::<u64>());
        assert_eq!(Some(st.failures[FailureKind::Http4xx]), before["failures"]["http_4xx"].as_u64());
        assert!(!st.latency.is_empty(), "the histograms of latency.hlog joined the counters");
    }
}

/// `quick --json` writes the keys it wrote (and no other), counters where
/// they were.
#[test]
fn quick_json_keeps_its_keys() {
    let before: Value = serde_json::from_str(&std::fs::read_to_string(dir().join("quick.json")).unwrap()).unwrap();
    let mut total = Stats { sent: 3, ..Stats::default() };
    total.failures.add_n(FailureKind::ConnectRefused, 3);
    for _ in 0..3 {
        total.latency.record(Duration::from_micros(50));
    }
    let setup = QuickSetup {
        url: "http://127.0.0.1:1/".into(),
        method: "GET".into(),
        connections: Some(3),
        target_rate: None,
        max_in_flight: None,
        protocol: "http/1.1".into(),
    };
    let now = QuickSummary::new(setup, &total, Duration::from_micros(383), GeneratorUse::default(), false);
    let now = serde_json::to_value(&now).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&now), keys(&before));
    for c in ["sent", "completed", "dropped", "bytes_in", "bytes_out", "connects"] {
        assert_eq!(now[c], before[c], "{c}");
    }
    assert_eq!(now["failures"], before["failures"]);
}
