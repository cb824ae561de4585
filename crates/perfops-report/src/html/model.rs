//! What the report says, decided from what was read: the run's identity, its
//! verdict, its stages with their figures and SLO lines, its diagnostics, and
//! the latency histograms merged from `latency.hlog`.
//!
//! `summary.json` is preferred wherever it speaks; where it is missing (a
//! killed run) or silent (an older format), figures are recomputed from
//! `series.jsonl` and `latency.hlog`, and the verdict is derived from the SLO
//! or reported as incomplete. Nothing here formats: that is `page.rs`.

use hdrhistogram::Histogram;
use serde_json::Value;

use super::read::{RunFiles, for_each_interval};
use crate::run::slo_value;

/// A number at `key` of `v`.
pub(crate) fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// A string at `key` of `v`.
pub(crate) fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The array at `key` of `v` (empty when missing).
pub(crate) fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
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
    /// From a `latency_ms` object; `None` when it counted nothing.
    fn from_json(v: &Value) -> Option<Percentiles> {
        if num(v, "count") == Some(0.0) {
            return None;
        }
        let p = Percentiles {
            p50: num(v, "p50"),
            p90: num(v, "p90"),
            p95: num(v, "p95"),
            p99: num(v, "p99"),
            p999: num(v, "p99_9").or_else(|| num(v, "p999")),
            max: num(v, "max"),
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

/// One SLO line's outcome in one stage or over the run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SloCell {
    pub slo: String,
    pub value: Option<f64>,
    pub passed: Option<bool>,
}

fn slo_cells(v: &Value, key: &str) -> Vec<SloCell> {
    list(v, key)
        .iter()
        .filter_map(|s| {
            Some(SloCell {
                slo: text(s, "slo")?.to_string(),
                value: num(s, "value"),
                passed: s.get("passed").and_then(Value::as_bool),
            })
        })
        .collect()
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
    pub latency: Option<Percentiles>,
    pub error_ratio: Option<f64>,
    pub failed: Option<u64>,
    pub dropped: Option<u64>,
    /// `holds`, `fails`, `inconclusive`, `not run`.
    pub verdict: Option<String>,
    pub reasons: Vec<String>,
    pub slo: Vec<SloCell>,
    /// Whether any second of it was recorded.
    pub ran: bool,
}

/// The run's verdict, as the summary states it or as derived here.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// `passed`, `failed`, `inconclusive`, `incomplete` or `none` (no SLO).
    pub result: String,
    pub headline: String,
    pub capacity_rps: Option<f64>,
    pub breaks_at_rps: Option<f64>,
}

/// A diagnostic: why it broke, with evidence.
#[derive(Debug, Clone)]
pub(crate) struct Diagnostic {
    pub kind: String,
    pub title: String,
    pub detail: String,
    pub stage: Option<String>,
    /// (metric, value, t)
    pub evidence: Vec<(String, Option<f64>, Option<f64>)>,
}

/// Histograms merged from `latency.hlog`, microseconds.
#[derive(Default)]
pub(crate) struct Merged {
    pub latency: Option<Histogram<u64>>,
    pub service: Option<Histogram<u64>>,
    /// Latency of the seconds within each stage (drain seconds with the last).
    pub latency_by_stage: Vec<Option<Histogram<u64>>>,
}

/// Everything the page shows besides the per-second data.
pub(crate) struct Model {
    pub files: RunFiles,
    pub name: String,
    pub target: Option<String>,
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
    pub run_slo: Vec<SloCell>,
    pub diagnostics: Vec<Diagnostic>,
    pub warnings: Vec<String>,
    pub merged: Merged,
}

impl Model {
    /// Decide everything from `files`.
    pub fn new(mut files: RunFiles) -> Model {
        let (meta, summary) = (&files.meta, files.summary.as_ref());
        let pick = |key: &str| {
            text(meta, key).or_else(|| summary.and_then(|s| text(s, key))).map(str::to_string).filter(|s| !s.is_empty())
        };
        let name = pick("name").unwrap_or_else(|| files.dir_name.clone());
        let (target, model, started_at) = (pick("target"), pick("model"), pick("started_at"));
        let recorded_s = files
            .series
            .iter()
            .filter_map(|l| Some(num(l, "t")? + num(l, "length_s").unwrap_or(1.0)))
            .fold(0.0, f64::max);
        let elapsed_s = summary.and_then(|s| num(s, "elapsed_s")).unwrap_or(recorded_s);

        let mut stages = plan(&files);
        let merged = merge_hlog(&mut files, &stages);
        let summary = files.summary.as_ref();
        let summary_stages = summary.map_or(&[][..], |s| list(s, "stages"));
        for (i, stage) in stages.iter_mut().enumerate() {
            match summary_stages.get(i) {
                Some(v) => from_summary(stage, v),
                None => from_series(stage, &files.series, merged.latency_by_stage.get(i).and_then(Option::as_ref)),
            }
        }
        let mut total = Stage { name: "whole run".into(), end_s: elapsed_s, ..Stage::default() };
        match summary.and_then(|s| s.get("total")) {
            Some(v) => from_summary(&mut total, v),
            None => {
                total.end_s = f64::INFINITY;
                from_series(&mut total, &files.series, merged.latency.as_ref());
                total.end_s = elapsed_s;
            }
        }
        // The run's target rate is the stages' mean weighted by time.
        if total.target.is_none() {
            let (w, sum) = stages
                .iter()
                .filter_map(|s| Some((s.end_s - s.start_s, s.target?)))
                .fold((0.0, 0.0), |(w, sum), (d, t)| (w + d, sum + d * t));
            total.target = (w > 0.0).then(|| sum / w);
        }

        let run_slo = summary.map(|s| slo_cells(s, "slo")).unwrap_or_default();
        let complete = summary.is_some();
        let interrupted = summary.and_then(|s| s.get("interrupted")).and_then(Value::as_bool).unwrap_or(false);
        let aborted = summary.and_then(|s| text(s, "aborted")).map(str::to_string);
        let mut verdict = verdict(summary, &run_slo, aborted.as_deref());
        if !complete {
            let last = files
                .series
                .last()
                .and_then(|l| text(l, "stage"))
                .map_or(String::new(), |s| format!(", during stage {s}"));
            verdict.headline = format!("No verdict: the run stopped {} in{last}.", super::page::clock(recorded_s));
        }
        let diagnostics = summary.map_or(&[][..], |s| list(s, "diagnostics")).iter().filter_map(diagnostic).collect();
        let warnings = summary
            .map_or(&[][..], |s| list(s, "warnings"))
            .iter()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect();
        Model {
            name,
            target,
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
    // A little slack: a second that starts a hair before a boundary is the next stage's.
    Some(stages.iter().position(|s| t + 1e-6 < s.end_s).unwrap_or(stages.len() - 1))
}

/// The planned stages: from `meta.json`, else the summary's, else the
/// stage labels of the series.
fn plan(files: &RunFiles) -> Vec<Stage> {
    let open =
        text(&files.meta, "model").or_else(|| files.summary.as_ref().and_then(|s| text(s, "model"))) != Some("closed");
    let mut t = 0.0;
    let mut stages = Vec::new();
    for s in list(&files.meta, "stages") {
        let d = num(s, "duration_s").unwrap_or(0.0);
        let target = match (num(s, "from"), num(s, "to")) {
            (Some(a), Some(b)) if open => Some((a + b) / 2.0),
            _ => None,
        };
        let name = text(s, "name").map_or_else(|| format!("stage {}", stages.len() + 1), str::to_string);
        stages.push(Stage { name, start_s: t, end_s: t + d, target, ..Stage::default() });
        t += d;
    }
    if !stages.is_empty() {
        return stages;
    }
    if let Some(summary) = &files.summary {
        for s in list(summary, "stages") {
            let d = num(s, "duration_s").unwrap_or(0.0);
            let name = text(s, "name").unwrap_or("stage").to_string();
            stages.push(Stage { name, start_s: t, end_s: t + d, ..Stage::default() });
            t += d;
        }
        if !stages.is_empty() {
            return stages;
        }
    }
    // Consecutive runs of one label, drain seconds excluded.
    for l in &files.series {
        let (Some(label), Some(t)) = (text(l, "stage"), num(l, "t")) else { continue };
        let end = t + num(l, "length_s").unwrap_or(1.0);
        if label.starts_with('(') {
            continue;
        }
        match stages.last_mut() {
            Some(s) if s.name == label => s.end_s = end,
            _ => stages.push(Stage { name: label.to_string(), start_s: t, end_s: end, ..Stage::default() }),
        }
    }
    stages
}

fn from_summary(stage: &mut Stage, v: &Value) {
    stage.target = num(v, "target_rate").or(stage.target);
    stage.achieved = num(v, "achieved_rate");
    stage.latency = v.get("latency_ms").and_then(Percentiles::from_json);
    stage.error_ratio = num(v, "error_ratio");
    stage.failed = v.get("failed").and_then(Value::as_u64);
    stage.dropped = v.get("dropped").and_then(Value::as_u64);
    stage.verdict = text(v, "verdict").map(str::to_string);
    stage.reasons = list(v, "reasons").iter().filter_map(|r| r.as_str().map(str::to_string)).collect();
    stage.slo = slo_cells(v, "slo");
    let ran_s = num(v, "duration_s");
    stage.ran = ran_s.is_none_or(|d| d > 0.0) && stage.verdict.as_deref() != Some("not run");
}

/// A stage's figures recomputed from its seconds (and its merged histogram).
fn from_series(stage: &mut Stage, series: &[Value], latency: Option<&Histogram<u64>>) {
    let (mut secs, mut answered, mut target_sum, mut target_secs) = (0.0, 0.0, 0.0, 0.0);
    let (mut failed, mut ok, mut dropped) = (0_u64, 0_u64, 0_u64);
    for l in series {
        let Some(t) = num(l, "t") else { continue };
        if t + 1e-6 < stage.start_s || t + 1e-6 >= stage.end_s || text(l, "stage").is_some_and(|s| s.starts_with('(')) {
            continue;
        }
        let len = num(l, "length_s").unwrap_or(1.0);
        secs += len;
        answered += num(l, "achieved_rate").unwrap_or(0.0) * len;
        if let Some(r) = num(l, "target_rate") {
            target_sum += r * len;
            target_secs += len;
        }
        let count = |k: &str| l.get(k).and_then(Value::as_u64).unwrap_or(0);
        failed += count("failed");
        ok += l
            .get("succeeded")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| count("completed").saturating_sub(count("failed")));
        dropped += count("dropped");
    }
    stage.ran = secs > 0.0;
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
    stage.latency = latency.and_then(Percentiles::from_histogram);
}

fn merge_hlog(files: &mut RunFiles, stages: &[Stage]) -> Merged {
    let mut m = Merged { latency_by_stage: vec![None; stages.len()], ..Merged::default() };
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
        Some(_) => {}
    });
    if bad > 0 {
        files.notes.push(format!("latency.hlog: {bad} interval(s) could not be decoded and were left out"));
    }
    files.hlog = Some(log);
    m
}

/// The verdict of a complete run from its `summary.json` alone.
pub(crate) fn summary_verdict(summary: &Value) -> Verdict {
    verdict(Some(summary), &slo_cells(summary, "slo"), text(summary, "aborted"))
}

fn verdict(summary: Option<&Value>, slo: &[SloCell], aborted: Option<&str>) -> Verdict {
    if let Some(v) = summary.and_then(|s| s.get("verdict")).filter(|v| v.is_object()) {
        return Verdict {
            result: text(v, "result").unwrap_or("inconclusive").to_string(),
            headline: text(v, "headline").unwrap_or_default().to_string(),
            capacity_rps: num(v, "capacity_rps"),
            breaks_at_rps: num(v, "breaks_at_rps"),
        };
    }
    let (result, headline) = if summary.is_none() {
        // Said by the caller, which knows where the run stopped.
        ("incomplete", String::new())
    } else if let Some(reason) = aborted {
        ("failed", format!("Aborted: {reason}"))
    } else if slo.is_empty() {
        ("none", "No SLO was set: no verdict, only the figures below.".to_string())
    } else {
        let failed: Vec<&SloCell> = slo.iter().filter(|c| c.passed != Some(true)).collect();
        if failed.is_empty() {
            ("passed", format!("Every SLO line held over the whole run ({}).", join_slo(slo)))
        } else {
            ("failed", format!("SLO not met over the whole run: {}.", join_slo(failed)))
        }
    };
    Verdict { result: result.to_string(), headline, capacity_rps: None, breaks_at_rps: None }
}

fn join_slo<'a>(cells: impl IntoIterator<Item = &'a SloCell>) -> String {
    cells
        .into_iter()
        .map(|c| match c.value {
            Some(v) => format!("{} (measured {})", c.slo, slo_value(&c.slo, v)),
            None => format!("{} (not measured)", c.slo),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn diagnostic(v: &Value) -> Option<Diagnostic> {
    let title = text(v, "title").or_else(|| text(v, "kind"))?.to_string();
    Some(Diagnostic {
        kind: text(v, "kind").unwrap_or("diagnostic").to_string(),
        title,
        detail: text(v, "detail").unwrap_or_default().to_string(),
        stage: text(v, "stage").map(str::to_string),
        evidence: list(v, "evidence")
            .iter()
            .filter_map(|e| Some((text(e, "metric")?.to_string(), num(e, "value"), num(e, "t"))))
            .collect(),
    })
}
