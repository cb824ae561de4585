//! What `perfops run` writes and prints: the per-second series line, the
//! per-stage summary (`summary.json`) and the stage table on the terminal.

use std::collections::BTreeMap;
use std::fmt::Write;

use perfops_core::measure::{HistogramSummary, Stats};
use serde::{Deserialize, Serialize};

use crate::live::group;
use crate::quick::GeneratorUse;

/// One step's figures in one second.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepSecond {
    /// Responses received.
    pub completed: u64,
    /// Failures of any kind.
    pub failed: u64,
    /// Latency median, ms.
    pub p50: f64,
    /// Latency p95, ms.
    pub p95: f64,
    /// Latency p99, ms.
    pub p99: f64,
}

/// One line of `series.jsonl`: one second of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesLine {
    /// Second number, from 0.
    pub t: u32,
    /// Length of the second (shorter at the end), seconds.
    pub length_s: f64,
    /// Stage at the start of the second.
    pub stage: String,
    /// Open model: scheduled arrivals per second.
    pub target_rate: Option<f64>,
    /// Responses per second.
    pub achieved_rate: f64,
    /// Requests started.
    pub sent: u64,
    /// Responses received.
    pub completed: u64,
    /// Requests without failure.
    pub succeeded: u64,
    /// Requests failed.
    pub failed: u64,
    /// Arrivals dropped at the in-flight cap.
    pub dropped: u64,
    /// Requests in flight at the end of the second.
    pub in_flight: u64,
    /// Failures by kind.
    pub failures: BTreeMap<String, u64>,
    /// Latency from the intended start, ms.
    pub latency_ms: HistogramSummary,
    /// Service time from the send, ms.
    pub service_ms: HistogramSummary,
    /// Response bytes.
    pub bytes_in: u64,
    /// Request bytes.
    pub bytes_out: u64,
    /// By step name.
    pub steps: BTreeMap<String, StepSecond>,
}

/// A stage's (or a step's, or the run's) figures in `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figures {
    /// Name.
    pub name: String,
    /// Length, seconds.
    pub duration_s: f64,
    /// Open model: scheduled arrivals per second, on average.
    pub target_rate: Option<f64>,
    /// Responses per second received while this stage ran (throughput).
    pub achieved_rate: f64,
    /// Requests started by this stage's arrivals.
    pub sent: u64,
    /// Responses received for this stage's arrivals (some maybe after it ended).
    pub completed: u64,
    /// Requests without failure.
    pub succeeded: u64,
    /// Requests failed.
    pub failed: u64,
    /// Arrivals dropped at the in-flight cap.
    pub dropped: u64,
    /// Failed / finished.
    pub error_ratio: f64,
    /// Failures by kind.
    pub failures: BTreeMap<String, u64>,
    /// Latency from the intended start, ms.
    pub latency_ms: HistogramSummary,
    /// Service time, ms.
    pub service_ms: HistogramSummary,
}

impl Figures {
    /// Figures of `stats` over `duration_s` seconds.
    pub fn new(name: &str, stats: &Stats, duration_s: f64, target_rate: Option<f64>) -> Figures {
        Figures {
            name: name.to_string(),
            duration_s,
            target_rate,
            achieved_rate: if duration_s > 0.0 { stats.completed as f64 / duration_s } else { 0.0 },
            sent: stats.sent,
            completed: stats.completed,
            succeeded: stats.succeeded(),
            failed: stats.failures.total(),
            dropped: stats.dropped,
            error_ratio: stats.error_ratio(),
            failures: failures(stats),
            latency_ms: stats.latency.summary(),
            service_ms: stats.service.summary(),
        }
    }
}

/// Failures by kind name.
pub fn failures(stats: &Stats) -> BTreeMap<String, u64> {
    stats.failures.nonzero().into_iter().map(|(k, n)| (k.name().to_string(), n)).collect()
}

/// Whether an SLO line held.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SloResult {
    /// The line as written.
    pub slo: String,
    /// The measured value, in the threshold's unit (ms for latency, % for ratios).
    pub value: Option<f64>,
    /// Held?
    pub passed: bool,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// Always `perfops.summary`.
    pub format: String,
    /// Results format version.
    pub version: u32,
    /// Scenario name.
    pub name: String,
    /// The target (URL, or `demo:threads` with its URL).
    pub target: String,
    /// `open` or `closed`.
    pub model: String,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// From the first arrival to the last response, seconds.
    pub elapsed_s: f64,
    /// Stopped by Ctrl-C or a signal.
    pub interrupted: bool,
    /// Stopped early by an `abort_when` rule: which, and when.
    pub aborted: Option<String>,
    /// Per stage, in order.
    pub stages: Vec<Figures>,
    /// Per step, in order.
    pub steps: Vec<Figures>,
    /// The whole run.
    pub total: Figures,
    /// The SLO over the whole run.
    pub slo: Vec<SloResult>,
    /// The generator's own use.
    pub generator: GeneratorUse,
    /// Doubts about the truthfulness of the figures (the generator as a limit).
    pub warnings: Vec<String>,
}

fn ms(v: f64) -> String {
    if v == 0.0 {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2}ms")
    } else if v < 1000.0 {
        format!("{v:.1}ms")
    } else {
        format!("{:.2}s", v / 1000.0)
    }
}

/// The per-stage table printed at the end of a run.
pub fn stage_table(summary: &RunSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}  top failures",
        "stage", "target/s", "achieved", "p50", "p90", "p95", "p99", "max", "errors", "dropped"
    );
    for f in summary.stages.iter().chain(std::iter::once(&summary.total)) {
        let top: Vec<String> = {
            let mut v: Vec<(&String, &u64)> = f.failures.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1));
            v.iter().take(2).map(|(k, n)| format!("{k} {n}")).collect()
        };
        let l = &f.latency_ms;
        let _ = writeln!(
            o,
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6.1}% {:>8}  {}",
            truncate(&f.name, 16),
            f.target_rate.map_or("-".into(), |r| format!("{r:.1}")),
            format!("{:.1}", f.achieved_rate),
            ms(l.p50),
            ms(l.p90),
            ms(l.p95),
            ms(l.p99),
            ms(l.max),
            f.error_ratio * 100.0,
            group(f.dropped as f64),
            top.join(", ")
        );
    }
    for s in &summary.slo {
        let _ = writeln!(
            o,
            "SLO {:<28} {}{}",
            s.slo,
            if s.passed { "passed" } else { "FAILED" },
            s.value.map_or(String::new(), |v| format!(" (measured {v:.2})"))
        );
    }
    if let Some(a) = &summary.aborted {
        let _ = writeln!(o, "aborted: {a}");
    }
    for w in &summary.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { s.chars().take(n - 1).chain(std::iter::once('…')).collect() }
}
