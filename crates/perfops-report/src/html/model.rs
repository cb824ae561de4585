//! What the report says, decided from what was read: the run's identity, its
//! verdict, its stages with their figures and SLO lines, its diagnostics, and
//! the latency histograms merged from `latency.hlog`.
//!
//! `summary.json` is preferred wherever it speaks; where it is missing (a
//! killed run) or silent (an older format), figures are recomputed from
//! `series.jsonl` and `latency.hlog`, and the verdict is derived from the SLO
//! or reported as incomplete. Nothing here formats but the headline of an
//! incomplete run: the page is `page.rs`.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use perfops_core::analysis::diagnose::Diagnostic;
use perfops_core::analysis::verdict::{RunResult, SloCheck, StageVerdict};
use perfops_core::measure::{Counter, FailureKind, HistogramSummary};
use serde::Serialize;

use crate::format::clock;
use crate::read::{RunFiles, for_each_interval};
use crate::run::{Figures, ProtocolUse, RunMeta, RunSummary, SeriesLine, StageSummary, slo_value};

/// What a report, a comparison or a listing says of a run as a whole: its
/// verdict when it has one, or why it has none. Written as `passed`,
/// `failed`, `inconclusive`, `incomplete` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every stage that ran held (or, in an older summary, every SLO line).
    Passed,
    /// A stage failed, an SLO line was missed, or the run was aborted.
    Failed,
    /// None failed, some were generator-limited.
    Inconclusive,
    /// No `summary.json`: killed, or still running.
    Incomplete,
    /// No SLO was set, so nothing was judged.
    #[serde(rename = "none")]
    NoSlo,
}

impl Outcome {
    /// As written: `passed`, `failed`, `inconclusive`, `incomplete`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Inconclusive => "inconclusive",
            Outcome::Incomplete => "incomplete",
            Outcome::NoSlo => "none",
        }
    }

    /// As the pages show it, in capitals.
    pub fn badge(self) -> &'static str {
        match self {
            Outcome::Passed => "PASSED",
            Outcome::Failed => "FAILED",
            Outcome::Inconclusive => "INCONCLUSIVE",
            Outcome::Incomplete => "INCOMPLETE",
            Outcome::NoSlo => "NO SLO",
        }
    }
}

impl From<RunResult> for Outcome {
    fn from(r: RunResult) -> Outcome {
        match r {
            RunResult::Passed => Outcome::Passed,
            RunResult::Failed => Outcome::Failed,
            RunResult::Inconclusive => Outcome::Inconclusive,
        }
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Percentiles {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    /// From a summary's `latency_ms`; `None` when it counted nothing. A
    /// percentile of 0 is one the file did not carry (an older or
    /// hand-made summary): a request answered takes at least a microsecond.
    pub fn from_summary(h: &HistogramSummary) -> Option<Percentiles> {
        if h.count == 0 {
            return None;
        }
        let known = |v: f64| Some(v).filter(|v| *v > 0.0 && v.is_finite());
        let p = Percentiles {
            p50: known(h.p50),
            p90: known(h.p90),
            p95: known(h.p95),
            p99: known(h.p99),
            p999: known(h.p99_9),
            max: known(h.max),
        };
        (p != Percentiles::default()).then_some(p)
    }

    /// From a histogram of microseconds; `None` when empty.
    pub fn from_histogram(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let ms = |q: f64| Some(h.value_at_quantile(q) as f64 / 1000.0);
        Some(Percentiles {
            p50: ms(0.5),
            p90: ms(0.9),
            p95: ms(0.95),
            p99: ms(0.99),
            p999: ms(0.999),
            max: Some(h.max() as f64 / 1000.0),
        })
    }
}

/// A stage (or the whole run) and its figures; `None` is "not available".
#[derive(Debug, Clone, Default)]
pub(crate) struct Stage {
    pub name: String,
    /// Offset of the planned start from the run's start, seconds.
    pub start_s: f64,
    /// Offset of the planned end, seconds.
    pub end_s: f64,
    pub target: Option<f64>,
    pub achieved: Option<f64>,
    /// Every request that ended, failures at the time they took.
    pub latency: Option<Percentiles>,
    /// The successes alone (none in results of format 1).
    pub latency_ok: Option<Percentiles>,
    pub error_ratio: Option<f64>,
    /// Of the answered requests, the share that failed (a 5xx, a failed
    /// check): what the achieved rate, which counts answered arrivals,
    /// carries that is no good answer. Refused connects and timeouts are
    /// not in the achieved rate to begin with.
    pub answered_failed_ratio: Option<f64>,
    pub failed: Option<u64>,
    pub dropped: Option<u64>,
    /// None: not judged (an incomplete run, an older summary, the total).
    pub verdict: Option<StageVerdict>,
    pub reasons: Vec<String>,
    pub slo: Vec<SloCheck>,
    /// Whether any second of it was recorded.
    pub ran: bool,
    /// How long it ran, seconds (less than planned when a stop cut it short).
    pub ran_s: f64,
    /// Changed by hand (held, re-rated, cut by `next` or `stop`): it judges nothing.
    pub by_hand: bool,
}

/// The run's verdict, as the summary states it or as derived here.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub result: Outcome,
    pub headline: String,
    pub capacity_rps: Option<f64>,
    pub breaks_at_rps: Option<f64>,
    /// Why it failed, tied to the rule that failed; none when it passed.
    pub why: Option<String>,
}

/// Histograms merged from `latency.hlog`, microseconds.
#[derive(Default)]
pub(crate) struct Merged {
    pub latency: Option<Histogram<u64>>,
    pub service: Option<Histogram<u64>>,
    /// Latency of the seconds within each stage (drain seconds with the last).
    pub latency_by_stage: Vec<Option<Histogram<u64>>>,
    /// The successes' latency (tag `latency_ok`), whole run and by stage.
    pub latency_ok: Option<Histogram<u64>>,
    pub latency_ok_by_stage: Vec<Option<Histogram<u64>>>,
}

/// Everything the page shows besides the per-second data.
pub(crate) struct Model {
    pub files: RunFiles,
    pub name: String,
    pub target: Option<String>,
    /// What the steps spoke (from the summary; empty when unknown).
    pub protocols: Vec<ProtocolUse>,
    pub model: Option<String>,
    pub started_at: Option<String>,
    /// From the first arrival to the last response (or the last second recorded).
    pub elapsed_s: f64,
    /// False when `summary.json` is missing: the run was killed or still goes.
    pub complete: bool,
    pub interrupted: bool,
    pub aborted: Option<String>,
    pub verdict: Verdict,
    pub stages: Vec<Stage>,
    pub total: Stage,
    pub run_slo: Vec<SloCheck>,
    pub diagnostics: Vec<Diagnostic>,
    pub warnings: Vec<String>,
    pub merged: Merged,
}

/// When the last recorded second ends (0 without any).
pub(crate) fn recorded_s(series: &[SeriesLine]) -> f64 {
    series.iter().map(SeriesLine::end_s).fold(0.0, f64::max)
}

impl Model {
    /// Decide everything from `files`.
    pub fn new(mut files: RunFiles) -> Model {
        let (meta, summary) = (files.meta.as_ref(), files.summary.as_ref());
        // meta.json first (a killed run has only it), then the summary.
        let pick = |m: Option<&String>, s: Option<&String>| {
            m.filter(|v| !v.is_empty()).or(s.filter(|v| !v.is_empty())).cloned()
        };
        let name = pick(meta.map(|m| &m.name), summary.map(|s| &s.name)).unwrap_or_else(|| files.dir_name.clone());
        // As resolved when meta.json says (#32: two runs against two ports show two ports).
        let shown = meta.map(RunMeta::target_shown);
        let target = pick(shown.as_ref(), summary.map(|s| &s.target));
        let model = pick(meta.map(|m| &m.model), summary.map(|s| &s.model));
        let started_at = pick(meta.map(|m| &m.started_at), summary.map(|s| &s.started_at));
        let recorded_s = recorded_s(&files.series);
        let elapsed_s = summary.map_or(recorded_s, |s| s.elapsed_s);

        let mut stages = plan(&files, model.as_deref() != Some("closed"));
        let merged = merge_hlog(&mut files, &stages);
        let summary = files.summary.as_ref();
        let summary_stages = summary.map_or(&[][..], |s| s.stages.as_slice());
        for (i, stage) in stages.iter_mut().enumerate() {
            match summary_stages.get(i) {
                Some(s) => from_summary(stage, s),
                None => from_series(
                    stage,
                    &files.series,
                    merged.latency_by_stage.get(i).and_then(Option::as_ref),
                    merged.latency_ok_by_stage.get(i).and_then(Option::as_ref),
                ),
            }
        }
        let mut total = Stage { name: "whole run".into(), end_s: elapsed_s, ..Stage::default() };
        match summary {
            Some(s) => {
                from_figures(&mut total, &s.total);
                total.ran = s.total.duration_s > 0.0;
            }
            None => {
                total.end_s = f64::INFINITY;
                from_series(&mut total, &files.series, merged.latency.as_ref(), merged.latency_ok.as_ref());
                total.end_s = elapsed_s;
            }
        }
        // The run's target rate is the mean of the stages that ran, weighted
        // by the time they ran: with the stages an interrupt kept from
        // running, an interrupted run read "175/s" beside an achieved 67.9/s,
        // in red, as if the server had kept up with 39% of it.
        if total.target.is_none() {
            let (w, sum) = stages
                .iter()
                .filter(|s| s.ran)
                .filter_map(|s| Some((s.ran_s, s.target?)))
                .fold((0.0, 0.0), |(w, sum), (d, t)| (w + d, sum + d * t));
            total.target = (w > 0.0).then(|| sum / w);
        }

        let run_slo = summary.map(|s| s.slo.clone()).unwrap_or_default();
        let complete = summary.is_some();
        let interrupted = summary.is_some_and(|s| s.interrupted);
        let aborted = summary.and_then(|s| s.aborted.clone());
        let mut verdict = verdict(summary);
        if !complete {
            let last = files
                .series
                .last()
                .and_then(|l| Some(l.stage.as_str()).filter(|s| !s.is_empty()))
                .map_or(String::new(), |s| format!(", during stage {s}"));
            verdict.headline = format!("No verdict: the run stopped {} in{last}.", clock(recorded_s));
        }
        let diagnostics = summary.map(|s| s.diagnostics.clone()).unwrap_or_default();
        let protocols = summary.map(|s| s.protocols.clone()).unwrap_or_default();
        let warnings = summary.map(|s| s.warnings.clone()).unwrap_or_default();
        Model {
            name,
            target,
            protocols,
            model,
            started_at,
            elapsed_s,
            complete,
            interrupted,
            aborted,
            verdict,
            stages,
            total,
            run_slo,
            diagnostics,
            warnings,
            merged,
            files,
        }
    }
}

fn stage_index(stages: &[Stage], t: f64) -> Option<usize> {
    if stages.is_empty() {
        return None;
    }
    // The last stage begun by `t` (a little slack: a second that starts a
    // hair before a boundary is the next stage's): a drain second after one
    // load of `limit` or `sweep` is its stage's, not the next attempt's.
    Some(stages.iter().rposition(|s| s.start_s <= t + 1e-6).unwrap_or(0))
}

/// The stages and when they ran. A single load (`run`): the plan in
/// `meta.json` (a killed run has only it), else the summary's stages end to
/// end, else the stage labels of the series. `limit` and `sweep` run one
/// load per attempt or level, each followed by its drain and a cool-down,
/// so only the series knows when each ran: its labels first (their
/// `meta.json` plans the scenario's stages, which the report once showed in
/// place of the attempts). Only an open model's planned stages have a target.
fn plan(files: &RunFiles, open: bool) -> Vec<Stage> {
    let multi_load = files.meta.as_ref().is_some_and(|m| matches!(m.kind.as_str(), "limit" | "sweep"));
    if multi_load {
        let stages = series_stages(&files.series);
        return if stages.is_empty() { summary_stages(files) } else { stages };
    }
    // The load's first second: 0 for a `run`; later for a coordinator, whose
    // agents are given a lead to start together (its report drew every stage
    // a second before its data). A killed coordinator's is its first second.
    let coordinated = files.meta.as_ref().is_some_and(|m| m.kind == "coordinator");
    let mut t = files
        .summary
        .as_ref()
        .and_then(|s| s.stages.first())
        .map(|s| s.from_s)
        .or_else(|| coordinated.then(|| files.series.first().map(|l| f64::from(l.t))).flatten())
        .unwrap_or(0.0);
    let mut stages = Vec::new();
    for s in files.meta.as_ref().map_or(&[][..], |m| m.stages.as_slice()) {
        let d = s.duration_s;
        let target = open.then_some((s.from + s.to) / 2.0);
        let name = if s.name.is_empty() { format!("stage {}", stages.len() + 1) } else { s.name.clone() };
        stages.push(Stage { name, start_s: t, end_s: t + d, target, ..Stage::default() });
        t += d;
    }
    if stages.is_empty() {
        stages = summary_stages(files);
    }
    if stages.is_empty() {
        stages = series_stages(&files.series);
    }
    stages
}

/// The summary's stages, end to end from 0.
fn summary_stages(files: &RunFiles) -> Vec<Stage> {
    let mut t = 0.0;
    let mut stages = Vec::new();
    for s in files.summary.as_ref().map_or(&[][..], |s| s.stages.as_slice()) {
        let d = s.figures.duration_s;
        stages.push(Stage { name: s.figures.name.clone(), start_s: t, end_s: t + d, ..Stage::default() });
        t += d;
    }
    stages
}

/// Consecutive seconds of one stage label; a drain second ends a stage (two
/// attempts at one rate are two stages).
fn series_stages(series: &[SeriesLine]) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut in_stage = false;
    for l in series {
        let Some(label) = l.stage_name() else {
            in_stage = false;
            continue;
        };
        match stages.last_mut() {
            Some(s) if in_stage && s.name == label => s.end_s = l.end_s(),
            _ => stages.push(Stage {
                name: label.to_string(),
                start_s: f64::from(l.t),
                end_s: l.end_s(),
                ..Stage::default()
            }),
        }
        in_stage = true;
    }
    stages
}

/// A stage's (or the run's) figures as the summary states them.
fn from_figures(stage: &mut Stage, f: &Figures) {
    stage.target = f.target_rate.or(stage.target);
    stage.achieved = Some(f.achieved_rate);
    stage.latency = Percentiles::from_summary(&f.latency_ms);
    stage.latency_ok = f.latency_ok_ms.as_ref().and_then(Percentiles::from_summary);
    stage.error_ratio = Some(f.error_ratio);
    stage.answered_failed_ratio = Some(answered_failed_ratio(f.succeeded, &f.failures));
    stage.failed = Some(f.failed);
    stage.dropped = Some(f.counters[Counter::Dropped]);
}

/// Of `succeeded` and the failures by kind that came with a response, the
/// share of those failures.
fn answered_failed_ratio(succeeded: u64, failures: &BTreeMap<String, u64>) -> f64 {
    let answered_failed: u64 = failures
        .iter()
        .filter(|(kind, _)| FailureKind::from_name(kind).is_some_and(FailureKind::has_response))
        .map(|(_, n)| n)
        .sum();
    let answered = succeeded + answered_failed;
    if answered == 0 { 0.0 } else { answered_failed as f64 / answered as f64 }
}

fn from_summary(stage: &mut Stage, s: &StageSummary) {
    from_figures(stage, &s.figures);
    stage.verdict = s.verdict;
    stage.reasons.clone_from(&s.reasons);
    stage.by_hand = !s.by_hand.is_empty();
    stage.slo.clone_from(&s.slo);
    stage.ran = s.figures.duration_s > 0.0 && s.verdict != Some(StageVerdict::NotRun);
    stage.ran_s = s.figures.duration_s;
}

/// A stage's figures recomputed from its seconds (and its merged histogram).
fn from_series(
    stage: &mut Stage,
    series: &[SeriesLine],
    latency: Option<&Histogram<u64>>,
    latency_ok: Option<&Histogram<u64>>,
) {
    let (mut secs, mut answered, mut target_sum, mut target_secs) = (0.0, 0.0, 0.0, 0.0);
    let (mut failed, mut ok, mut dropped) = (0_u64, 0_u64, 0_u64);
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    for l in series {
        let t = f64::from(l.t);
        if t + 1e-6 < stage.start_s || t + 1e-6 >= stage.end_s || l.is_drain() {
            continue;
        }
        let len = l.length_s;
        secs += len;
        answered += l.achieved_rate * len;
        if let Some(r) = l.target_rate {
            target_sum += r * len;
            target_secs += len;
        }
        failed += l.failed;
        ok += l.succeeded;
        dropped += l.counters[Counter::Dropped];
        for (kind, n) in &l.failures {
            *failures.entry(kind.clone()).or_default() += n;
        }
    }
    stage.ran = secs > 0.0;
    stage.ran_s = secs;
    if !stage.ran {
        return;
    }
    stage.achieved = Some(answered / secs);
    if target_secs > 0.0 {
        stage.target = stage.target.or(Some(target_sum / target_secs));
    }
    stage.failed = Some(failed);
    stage.dropped = Some(dropped);
    stage.error_ratio = Some(if failed + ok == 0 { 0.0 } else { failed as f64 / (failed + ok) as f64 });
    stage.answered_failed_ratio = Some(answered_failed_ratio(ok, &failures));
    stage.latency = latency.and_then(Percentiles::from_histogram);
    stage.latency_ok = latency_ok.and_then(Percentiles::from_histogram);
}

fn merge_hlog(files: &mut RunFiles, stages: &[Stage]) -> Merged {
    let mut m = Merged {
        latency_by_stage: vec![None; stages.len()],
        latency_ok_by_stage: vec![None; stages.len()],
        ..Merged::default()
    };
    let Some(log) = files.hlog.take() else { return m };
    let add = |into: &mut Option<Histogram<u64>>, h: &Histogram<u64>| {
        // Auto-resizing, so a histogram with other bounds always fits.
        let acc = into.get_or_insert_with(|| Histogram::new(3).expect("3 significant digits is valid"));
        let _ = acc.add(h);
    };
    let bad = for_each_interval(&log, |iv| match iv.tag.as_deref() {
        Some("latency") | None => {
            add(&mut m.latency, &iv.histogram);
            if let Some(i) = stage_index(stages, iv.start_s) {
                add(&mut m.latency_by_stage[i], &iv.histogram);
            }
        }
        Some("service") => add(&mut m.service, &iv.histogram),
        Some("latency_ok") => {
            add(&mut m.latency_ok, &iv.histogram);
            if let Some(i) = stage_index(stages, iv.start_s) {
                add(&mut m.latency_ok_by_stage[i], &iv.histogram);
            }
        }
        Some(_) => {}
    });
    if bad > 0 {
        files.notes.push(format!("latency.hlog: {bad} interval(s) could not be decoded and were left out"));
    }
    files.hlog = Some(log);
    m
}

/// The verdict of a run from its `summary.json` (none: incomplete): as the
/// summary states it, or, for an older summary without one, from its SLO
/// lines over the whole run.
pub(crate) fn verdict(summary: Option<&RunSummary>) -> Verdict {
    let Some(summary) = summary else {
        // The headline is said by the caller, which knows where the run stopped.
        return Verdict {
            result: Outcome::Incomplete,
            headline: String::new(),
            capacity_rps: None,
            breaks_at_rps: None,
            why: None,
        };
    };
    if let Some(v) = &summary.verdict {
        return Verdict {
            result: v.verdict.result.into(),
            headline: v.headline.clone(),
            capacity_rps: v.verdict.capacity_rps,
            breaks_at_rps: v.verdict.breaks_at_rps,
            // A summary from before #32 names no why: its first diagnostic was
            // the why of a failure, and is no more than a finding beside a pass.
            why: v.why.clone().or_else(|| {
                (v.verdict.result == RunResult::Failed).then(|| summary.diagnostics.first().map(|d| d.title.clone()))?
            }),
        };
    }
    let slo = &summary.slo;
    let (result, headline) = if let Some(reason) = &summary.aborted {
        (Outcome::Failed, format!("Aborted: {reason}"))
    } else if slo.is_empty() {
        (Outcome::NoSlo, "No SLO was set: no verdict, only the figures below.".to_string())
    } else {
        let failed: Vec<&SloCheck> = slo.iter().filter(|c| !c.passed).collect();
        if failed.is_empty() {
            (Outcome::Passed, format!("Every SLO line held over the whole run ({}).", join_slo(slo)))
        } else {
            (Outcome::Failed, format!("SLO not met over the whole run: {}.", join_slo(failed)))
        }
    };
    Verdict { result, headline, capacity_rps: None, breaks_at_rps: None, why: None }
}

fn join_slo<'a>(cells: impl IntoIterator<Item = &'a SloCheck>) -> String {
    cells
        .into_iter()
        .map(|c| match c.value {
            Some(v) => format!("{} (measured {})", c.slo, slo_value(&c.slo, v)),
            None => format!("{} (not measured)", c.slo),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
