//! What `perfops run` writes and prints: the per-second series line (with
//! its parts by key for shards, [`PartLine`]), the per-stage summary
//! (`summary.json`, with the generator's own use, [`GeneratorUse`], which
//! `quick --json` writes too) and the stage table on the terminal. The
//! serde types of the results files live here, below every module that
//! renders or reads them back (`read`, `parts`, `html`, `compare`, `runs`).
//!
//! The same types read those files back (the report, `compare`, `runs`), so a
//! renamed field is a compile error or a failed read, never a silent "n/a".
//! Files of older perfops versions read through serde defaults: each field
//! added after the first release says so where it is declared. Version 2
//! changed what `latency_ms` counts (every request that ended, failures
//! included) and added `latency_ok_ms` (see `results::RESULTS_VERSION`).
//! `schema/summary.schema.json` describes what is written today; `tests/summary_schema.rs` checks it
//! against both the writer and this reader.

use std::collections::BTreeMap;
use std::fmt::Write;

use perfops_core::measure::{
    Counter, HistogramFigures, HistogramSummary, PartCounters, SeriesCounters, Stats, SummaryCounters,
};
use perfops_core::pipeline::control::ControlEvent;
use serde::{Deserialize, Serialize};

use perfops_core::analysis::diagnose::Diagnostic;
use perfops_core::analysis::usl::UslFit;
use perfops_core::analysis::verdict::{RunVerdict, SloCheck, StageVerdict, with_unit};
use perfops_core::scenario::Condition;

use crate::failures::{FailureGroup, failures_text};
use crate::format::rate_number;
use crate::live::group;

/// One step's figures in one second.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepSecond {
    /// Responses received.
    pub completed: u64,
    /// Failures of every kind but `cut` (still in flight when the run ended: in `failures` only).
    pub failed: u64,
    /// Latency median, ms.
    pub p50: f64,
    /// Latency p95, ms.
    pub p95: f64,
    /// Latency p99, ms.
    pub p99: f64,
}

/// The shortest second a rate is given for (the live line's req/s, the
/// report's time charts): over a few ms, a few answers make no rate (the
/// drain after a load's last arrival, 1 answer in 4 ms, read 235/s above
/// every rate the load had).
pub const SHORTEST_RATE_WINDOW_S: f64 = 0.25;

/// One line of `series.jsonl`: one second of the run.
///
/// Read leniently (a line is a second a killed run may have cut short, or a
/// hand-made file): a missing count reads as 0, a missing stage as none (an
/// empty name), a missing length as a whole second.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct SeriesLine {
    /// Second number, from 0.
    pub t: u32,
    /// Length of the second (shorter at the end), seconds.
    #[serde(default = "one_second")]
    pub length_s: f64,
    /// Stage at the start of the second (drain seconds: in parentheses).
    pub stage: String,
    /// Open model: scheduled arrivals per second.
    pub target_rate: Option<f64>,
    /// Arrivals answered per second (their first request answered, #32):
    /// comparable with `target_rate`.
    pub achieved_rate: f64,
    /// The second's counters (`sent`, `completed`, `dropped`, bytes, ...):
    /// those `Stats`' declaration puts in a series line, under their names.
    #[serde(flatten)]
    pub counters: SeriesCounters,
    /// Requests without failure.
    pub succeeded: u64,
    /// Requests failed.
    pub failed: u64,
    /// Requests in flight at the end of the second.
    pub in_flight: u64,
    /// Failures by kind.
    pub failures: BTreeMap<String, u64>,
    /// Latency from the intended start of every request that ended
    /// (failures at the time they took), ms.
    pub latency_ms: HistogramSummary,
    /// The same, of the successes alone (absent before format 2).
    pub latency_ok_ms: HistogramSummary,
    /// Service time from the send, ms.
    pub service_ms: HistogramSummary,
    /// The figures of the histograms a summary shows beside latency, those the
    /// second filled (a stream's `first_event_ms`, `event_gap_ms`, ...; an LLM
    /// step's `ttft_ms`, `itl_ms`, ...), under the summary's keys: the report's
    /// per-second chart of them. None in a second that streamed nothing, and in
    /// lines written before them.
    #[serde(flatten)]
    pub histograms: HistogramFigures,
    /// By step name.
    pub steps: BTreeMap<String, StepSecond>,
    /// Shards and merges only (#13): the second by (stage, step) key, its
    /// histograms in `latency.hlog` (see [`crate::parts`]), so that seconds
    /// of several generators add up exactly. Absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartLine>,
}

/// One (stage, step) part of a second: its counters (histograms are in
/// `latency.hlog`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct PartLine {
    /// Stage index of the arrivals.
    pub stage: u16,
    /// Step index (`meta.json`'s `steps` name them).
    pub step: u16,
    /// Every counter of the part, under its name (`Stats`' declaration
    /// says which are left out when zero, and what a part written before a
    /// counter existed reads it as: `arrivals_answered` as `iterations`).
    #[serde(flatten)]
    pub counters: PartCounters,
    /// Failures by kind name.
    pub failures: BTreeMap<String, u64>,
}

fn one_second() -> f64 {
    1.0
}

impl SeriesLine {
    /// The stage it belongs to: none for a drain second (`(drain)`) or a
    /// line that names none.
    pub fn stage_name(&self) -> Option<&str> {
        Some(self.stage.as_str()).filter(|s| !s.is_empty() && !s.starts_with('('))
    }

    /// Whether it is a drain second: responses after the last arrival.
    pub fn is_drain(&self) -> bool {
        self.stage.starts_with('(')
    }

    /// When it ends, seconds from the start.
    pub fn end_s(&self) -> f64 {
        f64::from(self.t) + self.length_s
    }

    /// `n` events of this second, per second (a short last second counts
    /// for its length).
    pub fn per_s(&self, n: u64) -> f64 {
        n as f64 / if self.length_s > 0.0 { self.length_s } else { 1.0 }
    }
}

/// `meta.json`: what a run is, written when it starts (a killed run keeps it).
///
/// Every field is optional when read: the report names a run by its
/// directory when the file or a field is missing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct RunMeta {
    /// Always `perfops.meta`.
    pub format: String,
    /// Results format version.
    pub version: u32,
    /// The perfops that wrote it.
    pub perfops_version: String,
    /// The generator's host name.
    pub host: Option<String>,
    /// The command line, secrets redacted.
    pub command: Vec<String>,
    /// `run`, `limit` or `sweep`.
    pub kind: String,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// Scenario name.
    pub name: String,
    /// The target (URL, or `demo:threads` with its URL).
    pub target: String,
    /// `open` or `closed`.
    pub model: String,
    /// The planned stages, in order: a `run`'s; none for `limit` and
    /// `sweep`, whose attempts and levels are chosen as they go (the
    /// summary's stages, timed by the series).
    pub stages: Vec<MetaStage>,
    /// Step names, in the order of their keys.
    pub steps: Vec<String>,
    /// What each step is, by its key, as planned: `http`, `grpc` or
    /// `websocket` (the summary's `protocols` say which HTTP each spoke).
    /// Absent before pushes labelled series with it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
    /// This generator's share of a distributed run (`I/N`); none when alone.
    pub shard: Option<String>,
    /// The wall clock of second 0 (`t = 0` in `series.jsonl` and `latency.hlog`),
    /// RFC 3339 UTC to the millisecond: the `--start-at` instant shared by
    /// shards, which `merge` aligns them on (absent before #13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// A hash of the redacted scenario text and its `--set` overrides: shards
    /// of different scenarios are refused by `merge` (absent before #13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario_fingerprint: Option<String>,
    /// Written by `merge`: the shard directories it merged, in shard order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<String>,
    /// The target as the run resolved it, where `target` is as written (`${env.PORT}` and all):
    /// two runs of one file against two ports show two ports (absent before #32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<ResolvedTarget>,
}

/// Where a run's connections went, in `meta.json` (#32).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct ResolvedTarget {
    /// The URL after `${env.X}`, `--set` and `--target`, or the demo's: a password in it and
    /// credential-like query parameters redacted, as everywhere in the results.
    pub url: String,
    /// The socket address its host resolved to, once, before the load (`127.0.0.1:8080`).
    pub address: String,
}

impl ResolvedTarget {
    /// `http://localhost:8080 (127.0.0.1:8080)`: how `run`, the report, `compare` and `runs` show it.
    pub fn shown(&self) -> String {
        format!("{} ({})", self.url, self.address)
    }
}

impl RunMeta {
    /// The target as the run resolved it when it says (a demo's model kept in front:
    /// `demo:async http://127.0.0.1:37077 (127.0.0.1:37077)`), else as written.
    pub fn target_shown(&self) -> String {
        match &self.resolved {
            Some(r) => match self.target.strip_prefix("demo:").and_then(|t| t.split_whitespace().next()) {
                Some(model) => format!("demo:{model} {}", r.shown()),
                None => r.shown(),
            },
            None => self.target.clone(),
        }
    }
}

/// A planned stage in `meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct MetaStage {
    /// Its name.
    pub name: String,
    /// Rate (open) or users (closed) at its start.
    pub from: f64,
    /// The same at its end.
    pub to: f64,
    /// How long it lasts, seconds.
    pub duration_s: f64,
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
    /// Per second: arrivals answered while a stage ran (comparable with its
    /// target); for a step, its responses; for the total, arrivals answered.
    pub achieved_rate: f64,
    /// The counters `Stats`' declaration puts in a summary: `sent`
    /// (requests started by this stage's arrivals), `completed` (responses
    /// received for them, some maybe after it ended), `dropped` (arrivals
    /// dropped at the in-flight cap).
    #[serde(flatten)]
    pub counters: SummaryCounters,
    /// Requests without failure.
    pub succeeded: u64,
    /// Requests failed.
    pub failed: u64,
    /// Failed / finished.
    pub error_ratio: f64,
    /// Failures by kind.
    pub failures: BTreeMap<String, u64>,
    /// Latency from the intended start of every request that ended
    /// (failures at the time they took), ms.
    pub latency_ms: HistogramSummary,
    /// Service time of every request sent, ms.
    pub service_ms: HistogramSummary,
    /// Latency of the successes alone, ms; none in a summary of format 1,
    /// which had no such figure (and is written back without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ok_ms: Option<HistogramSummary>,
    /// Service time of the successes alone, ms (none in format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ok_ms: Option<HistogramSummary>,
    /// The other histograms `Stats`' declaration puts in a summary, when
    /// they hold anything: a stream's `first_event_ms`, `event_gap_ms`,
    /// `events` (per answer, a count) and `stream_ms`.
    #[serde(flatten)]
    pub histograms: HistogramFigures,
}

impl Figures {
    /// Figures of `stats` over `duration_s` seconds; what "achieved" counts
    /// depends on what the figures are for, so the caller says.
    pub fn new(name: &str, stats: &Stats, duration_s: f64, target_rate: Option<f64>, achieved_rate: f64) -> Figures {
        Figures {
            name: name.to_string(),
            duration_s,
            target_rate,
            achieved_rate,
            counters: SummaryCounters::of(stats),
            succeeded: stats.succeeded(),
            failed: stats.failures.total(),
            error_ratio: stats.error_ratio(),
            failures: failures(stats),
            latency_ms: stats.latency.summary(),
            service_ms: stats.service.summary(),
            latency_ok_ms: Some(stats.latency_ok.summary()),
            service_ok_ms: Some(stats.service_ok.summary()),
            histograms: HistogramFigures::of(stats),
        }
    }
}

/// Failures by kind name.
pub fn failures(stats: &Stats) -> BTreeMap<String, u64> {
    stats.failures.nonzero().into_iter().map(|(k, n)| (k.name().to_string(), n)).collect()
}

/// A stage in `summary.json`: its figures and its verdict.
///
/// Summaries written before stages were judged have the figures only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// Start, seconds since the start of the run (0 in older summaries).
    #[serde(default)]
    pub from_s: f64,
    /// Always written; none only in summaries from before verdicts.
    #[serde(default)]
    pub verdict: Option<StageVerdict>,
    /// Why it fails or is inconclusive.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Each SLO line over this stage.
    #[serde(default)]
    pub slo: Vec<SloCheck>,
    /// The actions by hand that changed it (held, re-rated, cut by `next`
    /// or `stop`), in order: such a stage judges nothing. Absent: none (and
    /// in summaries from before control).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_hand: Vec<ControlEvent>,
}

/// The run's verdict in `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictSummary {
    /// Capacity, breaks-at and the overall result.
    #[serde(flatten)]
    pub verdict: RunVerdict,
    /// One sentence: what held, where it broke and why.
    pub headline: String,
    /// Why it failed (or judged nothing), tied to the rule that failed
    /// (`perfops_core::analysis::why`); none for a run that passed. Absent
    /// from summaries written before #32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A protocol a run spoke, and the steps that spoke it (`summary.json`'s
/// `protocols`, #14).
///
/// Named as the engine's connections negotiated it: `http/1.1`,
/// `http/1.1 (ALPN)`, `h2 (ALPN)`, `h2 (TLS)`, `h2c`, `grpc over h2c`,
/// `grpc over h2 (TLS)`, `websocket`, `websocket (TLS)`. A run speaks
/// several when its scenario mixes HTTP, gRPC and WebSocket steps; a step
/// is under two names when the generators of a fleet or the shards of a
/// merge did not all negotiate the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolUse {
    /// Its name.
    pub protocol: String,
    /// The steps that spoke it, in the order of the run's steps.
    pub steps: Vec<String>,
}

impl ProtocolUse {
    /// Group `(step, protocol)` pairs, from any number of generators in any
    /// order, by protocol: protocols in the order of their first step in
    /// `step_names`, steps in that order too, each once. Steps missing from
    /// `step_names` come after them, by name.
    pub fn group<'a>(step_names: &[String], pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<ProtocolUse> {
        let order = |step: &str| step_names.iter().position(|n| n == step).unwrap_or(usize::MAX);
        let mut pairs: Vec<(usize, &str, &str)> = pairs.into_iter().map(|(s, p)| (order(s), s, p)).collect();
        pairs.sort();
        pairs.dedup();
        let mut uses: Vec<ProtocolUse> = Vec::new();
        for (_, step, protocol) in pairs {
            match uses.iter_mut().find(|u| u.protocol == protocol) {
                Some(u) => u.steps.push(step.to_string()),
                None => uses.push(ProtocolUse { protocol: protocol.to_string(), steps: vec![step.to_string()] }),
            }
        }
        uses
    }

    /// Back to `(step, protocol)` pairs, to group again with others'.
    pub fn pairs(uses: &[ProtocolUse]) -> impl Iterator<Item = (&str, &str)> {
        uses.iter().flat_map(|u| u.steps.iter().map(move |s| (s.as_str(), u.protocol.as_str())))
    }

    /// One line: `h2 (ALPN)` when the run spoke one; else each with its
    /// steps, `h2 (ALPN): orders, auth; websocket: chat, chat messages`.
    /// Empty when unknown (results from before #14).
    pub fn line(uses: &[ProtocolUse]) -> String {
        match uses {
            [one] => one.protocol.clone(),
            _ => uses.iter().map(|u| format!("{}: {}", u.protocol, u.steps.join(", "))).collect::<Vec<_>>().join("; "),
        }
    }

    /// The protocols' names alone, in order: what a comparison sets side by side.
    pub fn names(uses: &[ProtocolUse]) -> String {
        uses.iter().map(|u| u.protocol.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// One attempt of `perfops limit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitAttempt {
    /// Target arrivals per second.
    pub rate: f64,
    /// Achieved arrivals per second.
    pub achieved: f64,
    /// Latency median, ms.
    pub p50_ms: f64,
    /// Latency p95, ms.
    pub p95_ms: f64,
    /// Latency p99, ms.
    pub p99_ms: f64,
    /// Failed / finished requests.
    pub error_ratio: f64,
    /// As a stage's: `holds`, `fails`, `inconclusive`.
    pub verdict: StageVerdict,
}

/// What `perfops limit` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitSearch {
    /// The highest rate that held.
    pub capacity_rps: Option<f64>,
    /// The lowest rate that failed.
    pub breaks_at_rps: Option<f64>,
    /// Did the capacity hold again when confirmed?
    pub confirmed: Option<bool>,
    /// The bisection's stopping width (0.05 = 5%).
    pub precision: f64,
    /// In the order tried.
    pub attempts: Vec<LimitAttempt>,
}

/// One concurrency level of `perfops sweep`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepLevel {
    /// Users (connections), each looping request -> response.
    pub concurrency: u32,
    /// Arrivals answered per second.
    pub throughput: f64,
    /// Latency median of the answered requests, ms (fast failures would pull it down).
    pub p50_ms: f64,
    /// Latency p99 of every request that ended, failures included, ms.
    pub p99_ms: f64,
    /// p50 over p50 at the lowest level.
    pub p50_ratio: f64,
    /// Throughput over throughput at the lowest level.
    pub throughput_ratio: f64,
    /// Failed / finished requests.
    pub error_ratio: f64,
    /// A scenario with an LLM step: prompt tokens per second at this level (its
    /// answers' `usage`; 0 where the server gives none). Absent otherwise, and
    /// in summaries written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in_per_s: Option<f64>,
    /// A scenario with an LLM step: completion tokens per second at this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out_per_s: Option<f64>,
}

/// What `perfops sweep` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// Per level, in order.
    pub levels: Vec<SweepLevel>,
    /// The Universal Scalability Law fit, when one could be made.
    pub usl: Option<UslFit>,
    /// Predicted concurrency of peak throughput.
    pub predicted_peak_concurrency: Option<f64>,
    /// Predicted peak throughput.
    pub predicted_peak_throughput: Option<f64>,
    /// The level with the highest measured throughput.
    pub best_level: Option<u32>,
    /// A hidden concurrency cap, when throughput stops growing: about how
    /// many requests the target serves at once.
    pub concurrency_cap: Option<f64>,
}

/// One probe's checks over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Checks made.
    pub checks: u64,
    /// Checks failed.
    pub failures: u64,
    /// When it tripped (liveness: Kubernetes would restart the pod), seconds.
    pub trips: Vec<f64>,
}

/// The generator's own resource use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, Default)]
pub struct GeneratorUse {
    /// Worker threads.
    pub workers: usize,
    /// CPU cores it could use.
    pub cores: usize,
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_sys_s: f64,
    /// Peak resident memory, KiB.
    pub max_rss_kib: u64,
    /// Closed loops: naps a worker took before parking, to read several
    /// responses per wake-up (absent from summaries written before naps).
    #[serde(default)]
    pub naps: u64,
    /// The longest of those naps, µs: a response may have been read this much
    /// late, which over-states its latency by at most as much.
    #[serde(default)]
    pub longest_nap_us: f64,
    /// Seconds its workers waited, runnable, for a CPU that other processes
    /// (or threads) held, summed over the workers: a request sent late for
    /// it is the machine's lateness, not the pacer's (0 in summaries
    /// written before it, where the kernel does not say, and when none).
    #[serde(default, skip_serializing_if = "no_wait")]
    pub cpu_wait_s: f64,
    /// Open model: the pacer that sent its arrivals; absent for a closed
    /// model, and from summaries written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer: Option<Pacer>,
}

/// The pacer that sent an open model's arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacer {
    /// The kernel sent each prepared request at its due time (io_uring).
    IoUring,
    /// A timer wake-up per arrival, or per arrivals due within 100 µs.
    Timerfd,
}

/// No wait for a CPU worth writing (serde's `skip_serializing_if` takes a reference).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn no_wait(s: &f64) -> bool {
    *s <= 0.0
}

impl GeneratorUse {
    /// What the naps were, for a summary's `Wake-ups:` line; `None` without naps.
    pub fn naps_line(&self) -> Option<String> {
        (self.naps > 0).then(|| {
            format!(
                "{} coalesced by naps of at most {:.1} µs (a response read after a nap counts up to that much late)",
                self.naps, self.longest_nap_us
            )
        })
    }
}

impl RunSummary {
    /// What the scenario's scripts cost the generator, for the report and the end of a run:
    /// their CPU seconds and that share of the generator's; `None` without scripts.
    pub fn scripts_line(&self) -> Option<String> {
        let ns = self.total.counters[perfops_core::measure::Counter::ScriptNs];
        (ns > 0).then(|| {
            let script_s = ns as f64 / 1e9;
            let cpu_s = self.generator.cpu_user_s + self.generator.cpu_sys_s;
            match script_s / cpu_s {
                share if cpu_s > 0.0 && share.is_finite() => {
                    format!("{script_s:.3} CPU-s in scripts, {:.1}% of the generator's CPU", share * 100.0)
                }
                _ => format!("{script_s:.3} CPU-s in scripts"),
            }
        })
    }
}

/// `summary.json`.
///
/// Fields added after the first release read as absent from older
/// summaries: the verdict, diagnostics and probes (and, in stages, the
/// verdict, reasons and SLO).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Always `perfops.summary`.
    pub format: String,
    /// Results format version; a summary that states none is of the first.
    #[serde(default = "first_version")]
    pub version: u32,
    /// Scenario name.
    pub name: String,
    /// The target (URL, or `demo:threads` with its URL).
    pub target: String,
    /// What the steps spoke, as their connections negotiated it (absent
    /// before #14, and when unknown: a fleet of older agents).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<ProtocolUse>,
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
    /// The verdict (capacity, breaks at, headline). Always written; none
    /// only in summaries from before verdicts.
    #[serde(default)]
    pub verdict: Option<VerdictSummary>,
    /// Per stage, in order.
    pub stages: Vec<StageSummary>,
    /// Per step, in order.
    pub steps: Vec<Figures>,
    /// The whole run.
    pub total: Figures,
    /// The SLO over the whole run (the verdict judges each stage).
    pub slo: Vec<SloCheck>,
    /// Why it broke, most fundamental first, each with its evidence.
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
    /// Probe checks, by probe (`liveness`, `readiness`).
    #[serde(default)]
    pub probes: BTreeMap<String, ProbeSummary>,
    /// `perfops limit`: the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitSearch>,
    /// `perfops sweep`: the levels and the fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResult>,
    /// The generator's own use.
    pub generator: GeneratorUse,
    /// Doubts about the truthfulness of the figures (the generator as a limit).
    pub warnings: Vec<String>,
    /// What failed, by step and kind, with the first few failing exchanges
    /// (#32; absent before, and when nothing failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureGroup>,
}

fn first_version() -> u32 {
    1
}

/// A latency in the stage table; `-` for none (a stage where nothing was answered).
fn ms(v: f64) -> String {
    if v == 0.0 { "-".into() } else { crate::format::ms_compact(v) }
}

/// An error ratio for the stage table, one place: a few failures are never
/// "0.0%" (0.04% beside FAILS of `errors < 0.01%` read as none; review 2).
fn error_percent(ratio: f64) -> String {
    if ratio > 0.0 && ratio < 0.0005 { "<0.1%".into() } else { format!("{:.1}%", ratio * 100.0) }
}

/// The end-of-run text: the per-stage table with verdicts, the SLO over the
/// whole run, the verdict and why it broke.
pub fn stage_table(summary: &RunSummary) -> String {
    let mut o = String::new();
    if !summary.protocols.is_empty() {
        let _ = writeln!(o, "protocol: {}", ProtocolUse::line(&summary.protocols));
    }
    // Latency of every request that ended (a timeout at the time it took),
    // and the successes' p99 beside it (#11).
    let _ = writeln!(
        o,
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}  {:<12} why / top failures",
        "stage", "target/s", "achieved", "p50", "p90", "p95", "p99", "max", "p99 ok", "errors", "dropped", "verdict"
    );
    let rows = summary.stages.iter().map(|s| (&s.figures, s.verdict, s.reasons.as_slice()));
    for (f, verdict, reasons) in rows.chain(std::iter::once((&summary.total, None, &[][..]))) {
        let top: Vec<String> = {
            let mut v: Vec<(&String, &u64)> = f.failures.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1));
            // Cut requests (in flight at the end) are no failure: named as such.
            v.iter()
                .take(2)
                .map(|(k, n)| if *k == "cut" { format!("{n} cut at the end") } else { format!("{k} {n}") })
                .collect()
        };
        let why = if reasons.is_empty() { top.join(", ") } else { reasons.join("; ") };
        let l = &f.latency_ms;
        let _ = writeln!(
            o,
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}  {:<12} {}",
            truncate(&f.name, 16),
            // Rates as every output says them (#32).
            f.target_rate.map_or("-".into(), rate_number),
            rate_number(f.achieved_rate),
            ms(l.p50),
            ms(l.p90),
            ms(l.p95),
            ms(l.p99),
            ms(l.max),
            ms(f.latency_ok_ms.map_or(0.0, |l| l.p99)),
            error_percent(f.error_ratio),
            group(f.counters[Counter::Dropped] as f64),
            match verdict {
                Some(StageVerdict::Fails) => "FAILS",
                v => v.map_or("", StageVerdict::name),
            },
            why
        );
    }
    let _ =
        writeln!(o, "latency: every request that ended, failures at the time they took; p99 ok: the successes alone");
    for s in &summary.slo {
        let _ = writeln!(
            o,
            "SLO (whole run) {:<24} {}{}",
            s.slo,
            // Nothing to measure (a watched metric whose source was down) is
            // no failure: the stages say inconclusive (the retest of W1).
            match (s.passed, s.value) {
                (true, _) => "passed",
                (false, None) => "not measured",
                (false, Some(_)) => "FAILED",
            },
            s.value.map_or(String::new(), |v| format!(" (measured {})", slo_value(&s.slo, v)))
        );
    }
    if let Some(a) = &summary.aborted {
        let _ = writeln!(o, "aborted: {a}");
    }
    if let Some(naps) = summary.generator.naps_line() {
        let _ = writeln!(o, "wake-ups: {naps}");
    }
    if let Some(scripts) = summary.scripts_line() {
        let _ = writeln!(o, "scripts: {scripts}");
    }
    for w in &summary.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o.push_str(&failures_text(&summary.failures));
    if let Some(v) = &summary.verdict {
        let _ = writeln!(o, "\nverdict: {}", v.headline);
    }
    // What was seen, each with its evidence: findings, not the why (the
    // headline's, tied to the rule that failed; #32).
    if !summary.diagnostics.is_empty() {
        let _ = writeln!(o, "findings:");
    }
    for d in &summary.diagnostics {
        let evidence: Vec<String> =
            d.evidence.iter().map(|e| format!("{}={} at t={:.0}s", e.metric, short(e.value), e.t)).collect();
        let _ = writeln!(
            o,
            "  - {}{}",
            d.title,
            if evidence.is_empty() { String::new() } else { format!("  [{}]", evidence.join(", ")) }
        );
    }
    for (name, p) in &summary.probes {
        let _ = writeln!(
            o,
            "probe {name}: {} checks, {} failed{}",
            p.checks,
            p.failures,
            if p.trips.is_empty() {
                String::new()
            } else {
                format!(", tripped at {}", p.trips.iter().map(|t| format!("t={t:.0}s")).collect::<Vec<_>>().join(", "))
            }
        );
    }
    o
}

/// The measured value of SLO line `slo` (a [`SloCheck`]) with its unit, the
/// same in the terminal, JUnit and the HTML report. A line that does not
/// parse (a `summary.json` edited by hand) shows the bare number.
pub(crate) fn slo_value(slo: &str, v: f64) -> String {
    Condition::parse(slo).map_or_else(|_| format!("{v}"), |c| with_unit(&c, v))
}

/// A metric value, short: `10`, `0.35`, `1.2e6`.
fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e6 {
        format!("{v:.0}")
    } else if v.abs() >= 1e6 {
        format!("{v:.3e}")
    } else {
        format!("{v:.2}")
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { s.chars().take(n - 1).chain(std::iter::once('…')).collect() }
}

/// Throughput per stage (moved to perfops-core with the rest of the per-stage accounting).
pub use perfops_core::pipeline::StageThroughput;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_failures_never_read_as_none() {
        // (ratio, as the stage table shows it)
        let cases = [(0.0, "0.0%"), (0.0004, "<0.1%"), (0.0005, "0.1%"), (0.0123, "1.2%"), (1.0, "100.0%")];
        for (ratio, want) in cases {
            assert_eq!(error_percent(ratio), want, "{ratio}");
        }
    }

    #[test]
    fn slo_values_carry_the_unit_of_their_line() {
        for (slo, v, want) in [
            // Latency lines: milliseconds, whatever unit the threshold was written in.
            ("p95 < 500ms", 101.89, "101.9ms"),
            ("p99(orders) < 1s", 1657.855, "1657.9ms"),
            // Written without spaces: the unit still follows the metric.
            ("p99<1s", 1657.855, "1657.9ms"),
            ("mean < 200ms", 12.0, "12.0ms"),
            // Below 10 ms, two places: a fast service's p95 is not rounded onto its threshold.
            ("p95 < 1ms", 0.96, "0.96ms"),
            // Ratios: percent.
            ("errors < 1%", 0.42, "0.42%"),
            ("rate >= 97%", 96.96, "96.96%"),
            // A watched metric: its own unit, unknown here, so the number as measured.
            ("metric(listen_queue) < 8", 8.0, "8"),
            // Not an SLO line (a hand-edited summary): the number alone.
            ("latency ok", 1.5, "1.5"),
        ] {
            assert_eq!(slo_value(slo, v), want, "{slo}");
        }
    }

    #[test]
    fn protocols_group_by_name_in_step_order() {
        let steps: Vec<String> = ["auth", "orders", "chat", "chat messages"].map(String::from).to_vec();
        let names = |uses: &[ProtocolUse]| -> Vec<(String, Vec<String>)> {
            uses.iter().map(|u| (u.protocol.clone(), u.steps.clone())).collect()
        };
        /// (why, (step, protocol) pairs, the groups wanted, the line wanted)
        type Case =
            (&'static str, Vec<(&'static str, &'static str)>, Vec<(&'static str, Vec<&'static str>)>, &'static str);
        let cases: [Case; 4] = [
            // One protocol for every step: the line is its name alone.
            (
                "one",
                vec![("orders", "h2 (ALPN)"), ("auth", "h2 (ALPN)")],
                vec![("h2 (ALPN)", vec!["auth", "orders"])],
                "h2 (ALPN)",
            ),
            // A mixed scenario: each protocol with its steps, in step order.
            (
                "mixed",
                vec![
                    ("chat", "websocket"),
                    ("chat messages", "websocket"),
                    ("auth", "http/1.1"),
                    ("orders", "http/1.1"),
                ],
                vec![("http/1.1", vec!["auth", "orders"]), ("websocket", vec!["chat", "chat messages"])],
                "http/1.1: auth, orders; websocket: chat, chat messages",
            ),
            // Two generators said the same: once.
            ("agents agree", vec![("orders", "h2c"), ("orders", "h2c")], vec![("h2c", vec!["orders"])], "h2c"),
            // Two generators negotiated differently: the step under both names.
            (
                "agents differ",
                vec![("orders", "h2 (ALPN)"), ("orders", "http/1.1 (ALPN)")],
                vec![("h2 (ALPN)", vec!["orders"]), ("http/1.1 (ALPN)", vec!["orders"])],
                "h2 (ALPN): orders; http/1.1 (ALPN): orders",
            ),
        ];
        for (why, pairs, want, line) in cases {
            let uses = ProtocolUse::group(&steps, pairs.iter().copied());
            let want: Vec<(String, Vec<String>)> =
                want.into_iter().map(|(p, s)| (p.to_string(), s.into_iter().map(String::from).collect())).collect();
            assert_eq!(names(&uses), want, "{why}");
            assert_eq!(ProtocolUse::line(&uses), line, "{why}");
            // Grouping again what was grouped changes nothing (a merge of merges).
            assert_eq!(ProtocolUse::group(&steps, ProtocolUse::pairs(&uses)), uses, "{why}");
        }
        assert_eq!(ProtocolUse::line(&[]), "", "unknown: nothing to say");
    }
}
