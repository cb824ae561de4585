//! `perfops compare RUN_A RUN_B [...]`: runs side by side, the first one as
//! the baseline — capacity against capacity, throughput at equal p95, and per
//! matched stage the achieved rate, p50/p95/p99, errors and verdict of each
//! run with its deltas against the baseline.
//!
//! It reads only results directories, as the report does (`html::read`,
//! through the types that wrote them: older formats and killed runs compare
//! from what they hold; a run without `summary.json` is marked incomplete
//! and has no capacity). A format newer than this perfops knows is an error
//! rather than a guess: versions are checked before anything read is used.
//! Stages are paired in `matching`, throughput at equal latency is defined
//! in `equal_latency`; `text` and `page` only present. Writing files is the
//! caller's business.

mod equal_latency;
mod matching;
mod page;
pub(crate) mod text;

use std::path::{Path, PathBuf};

use perfops_core::analysis::verdict::StageVerdict;
use serde::Serialize;

use crate::html::model::{Model, Outcome, Stage};
use crate::read::{ReportError, RunFiles};
use crate::results::RESULTS_VERSION;
use crate::run::ProtocolUse;
pub use equal_latency::{ThroughputAt, p95_threshold_ms, throughput_at};
pub use matching::{MatchedBy, MatchedRow, RATE_TOLERANCE, StageKey, match_stages};
pub use text::table;

/// Version of the comparison's JSON (`--json`).
pub const COMPARE_VERSION: u32 = 1;

/// Why runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A directory is missing, unreadable or holds no results.
    #[error(transparent)]
    Input(#[from] ReportError),
    /// A file says it is of a results format newer than this perfops reads.
    #[error(
        "{} has {file} of results format version {version}; this perfops reads up to version {known}: compare with a newer perfops",
        dir.display()
    )]
    NewerFormat {
        /// The results directory.
        dir: PathBuf,
        /// `meta.json` or `summary.json`.
        file: &'static str,
        /// The version it states.
        version: u64,
        /// The newest this build reads.
        known: u32,
    },
    /// Fewer than two runs.
    #[error("compare needs at least two results directories")]
    TooFew,
}

/// The runs, read: what a comparison, its text and its page are made from.
pub struct Runs {
    models: Vec<Model>,
}

/// Read each results directory in `dirs` (the first is the baseline).
pub fn load(dirs: &[PathBuf]) -> Result<Runs, CompareError> {
    if dirs.len() < 2 {
        return Err(CompareError::TooFew);
    }
    let models = dirs
        .iter()
        .map(|dir| {
            let files = RunFiles::read(dir)?;
            check_version(dir, &files)?;
            Ok(Model::new(files))
        })
        .collect::<Result<Vec<Model>, CompareError>>()?;
    Ok(Runs { models })
}

fn check_version(dir: &Path, files: &RunFiles) -> Result<(), CompareError> {
    match files.versions.iter().find(|(_, v)| *v > u64::from(RESULTS_VERSION)) {
        Some(&(file, version)) => {
            Err(CompareError::NewerFormat { dir: dir.to_path_buf(), file, version, known: RESULTS_VERSION })
        }
        None => Ok(()),
    }
}

/// Choices of the comparison.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The p95 at which to compare throughput, ms (default: see [`equal_latency`]).
    pub at_p95_ms: Option<f64>,
}

/// One run as the comparison names it.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    /// `A`, `B`, ... in the order given; `A` is the baseline.
    pub label: String,
    /// The scenario's name.
    pub name: String,
    /// The results directory's name.
    pub dir: String,
    /// The target, as recorded.
    pub target: Option<String>,
    /// What its steps spoke (`h2 (ALPN)`, `http/1.1`, each protocol with
    /// its steps when several); none when its results do not say (#14).
    pub protocol: Option<String>,
    /// RFC 3339 UTC start time.
    pub started_at: Option<String>,
    /// False when the run left no `summary.json` (killed, or still running).
    pub complete: bool,
    /// `passed`, `failed`, `inconclusive`, `none` (no SLO) or `incomplete`.
    pub result: Outcome,
    /// The highest arrival rate that held.
    pub capacity_rps: Option<f64>,
    /// The first rate that did not hold.
    pub breaks_at_rps: Option<f64>,
    /// Why it failed, as its own verdict says (tied to the rule that
    /// failed: `errors < 1% (measured 3.20%): step orders: ...`); none for a
    /// run that passed. Two servers are compared for where each breaks and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Whether any of its stages held (after the break, if it broke): "no
    /// stage held" is said only when none did.
    #[serde(skip)]
    pub any_held: bool,
    /// The command that made it (`run`, `limit`, `sweep`, `coordinator`), as `meta.json` says.
    pub kind: Option<String>,
}

impl RunInfo {
    /// `A threads`: the label and the name, as tables show it.
    pub fn title(&self) -> String {
        format!("{} {}", self.label, self.name)
    }
}

/// A difference against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delta {
    /// This run's value minus the baseline's.
    pub abs: f64,
    /// The same, in % of the baseline's (`None` when the baseline's is 0).
    pub pct: Option<f64>,
}

impl Delta {
    fn of(base: Option<f64>, this: Option<f64>) -> Option<Delta> {
        let (a, b) = (base?, this?);
        Some(Delta { abs: b - a, pct: (a != 0.0).then(|| (b - a) / a * 100.0) })
    }
}

/// A run's deltas in one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Deltas {
    /// Achieved rate, arrivals per second.
    pub achieved_rate: Option<Delta>,
    /// Latency p50, ms.
    pub p50_ms: Option<Delta>,
    /// Latency p95, ms.
    pub p95_ms: Option<Delta>,
    /// Latency p99, ms.
    pub p99_ms: Option<Delta>,
    /// Latency p99 of the successes alone, ms.
    pub p99_ok_ms: Option<Delta>,
    /// Error ratio (a difference of ratios: 0.01 is one percentage point).
    pub error_ratio: Option<Delta>,
}

/// One run's stage in a row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The stage's name in this run.
    pub stage: String,
    /// How it joined the row.
    pub matched_by: MatchedBy,
    /// Target arrivals per second.
    pub target_rate: Option<f64>,
    /// Achieved arrivals per second.
    pub achieved_rate: Option<f64>,
    /// Latency p50, ms.
    pub p50_ms: Option<f64>,
    /// Latency p95, ms.
    pub p95_ms: Option<f64>,
    /// Latency p99, ms (every request that ended, failures included).
    pub p99_ms: Option<f64>,
    /// Latency p99 of the successes alone, ms (none from results format 1).
    pub p99_ok_ms: Option<f64>,
    /// Failed / finished requests.
    pub error_ratio: Option<f64>,
    /// `holds`, `fails`, `inconclusive`, `not run` (none: not judged).
    pub verdict: Option<StageVerdict>,
    /// Changed by hand in this run (so its verdict judges nothing); written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub by_hand: bool,
    /// Against the baseline's cell in the row (none for the baseline, or
    /// when the baseline has no stage there).
    pub delta: Option<Deltas>,
}

/// One row: a stage and its counterparts.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The name of the stage that opened the row.
    pub name: String,
    /// Per run, in order (none: that run has no such stage).
    pub cells: Vec<Option<Cell>>,
}

/// A sentence and the number it rests on.
#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    /// The run compared with the baseline (its index).
    pub run: usize,
    /// The sentence.
    pub text: String,
    /// Capacity: this run's over the baseline's; throughput: likewise at L.
    pub ratio: Option<f64>,
}

/// Throughput at equal p95 (see [`equal_latency`] for the definition).
#[derive(Debug, Clone, Serialize)]
pub struct EqualP95 {
    /// The definition, in words, as the output states it.
    pub definition: &'static str,
    /// The p95 compared at, ms.
    pub p95_ms: Option<f64>,
    /// Where that p95 came from.
    pub source: String,
    /// What each run carried at it.
    pub runs: Vec<ThroughputAt>,
    /// One per run after the baseline.
    pub statements: Vec<Statement>,
}

/// The definition of throughput at equal p95, as printed.
pub const EQUAL_P95_DEFINITION: &str = "throughput at equal p95 = the most each run carried while its p95 stayed \
     at or under L: stage points (p95, achieved rate less its answered failures) sorted by p95, the rate made \
     non-decreasing, read linearly between the two stages around L";

/// The comparison (what `--json` prints).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Always `perfops.compare`.
    pub format: &'static str,
    /// [`COMPARE_VERSION`].
    pub version: u32,
    /// The runs, baseline first.
    pub runs: Vec<RunInfo>,
    /// A run that spoke another protocol than the baseline, said first:
    /// the deltas are then as much the protocol's as the server's (#14).
    pub protocols: Vec<Statement>,
    /// Capacity against the baseline's, one per other run.
    pub capacity: Vec<Statement>,
    /// Throughput at equal p95.
    pub equal_p95: EqualP95,
    /// Matched and unmatched stages, baseline's order first.
    pub stages: Vec<Row>,
    /// The whole runs.
    pub total: Row,
    /// Per step of the baseline, each histogram its summary shows beside
    /// latency (a stream's first event, gaps, events, duration), in every
    /// run; none when no run has one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<HistogramRow>,
    /// Files that could not be read, unmatched stages and incomplete runs, in words.
    pub notes: Vec<String>,
}

/// One step's histogram (`first_event_ms`, `events`, ...) in each run.
#[derive(Debug, Clone, Serialize)]
pub struct HistogramRow {
    /// The step's name.
    pub step: String,
    /// The histogram's key in `summary.json` (`first_event_ms`, `events`).
    pub figure: String,
    /// It is a count, not a duration in ms.
    pub count: bool,
    /// Per run, in the runs' order: its p50, p95 and p99 (none where the run
    /// has no such step or no such figure).
    pub runs: Vec<Option<[f64; 3]>>,
}

/// [`Comparison::histograms`] of `models`: the steps in the order of the
/// first run that has them, the figures in their declaration's.
fn histogram_rows(models: &[Model]) -> Vec<HistogramRow> {
    let mut rows: Vec<HistogramRow> = Vec::new();
    for m in models {
        let Some(summary) = &m.files.summary else { continue };
        for f in &summary.steps {
            for (h, _) in f.histograms.iter() {
                if rows.iter().any(|r| r.step == f.name && r.figure == h.summary_key()) {
                    continue;
                }
                let runs = models
                    .iter()
                    .map(|m| {
                        let s = m.files.summary.as_ref()?.steps.iter().find(|s| s.name == f.name)?;
                        s.histograms.get(h).map(|x| [x.p50, x.p95, x.p99])
                    })
                    .collect();
                rows.push(HistogramRow {
                    step: f.name.clone(),
                    figure: h.summary_key(),
                    count: h.unit() == perfops_core::measure::Unit::Count,
                    runs,
                });
            }
        }
    }
    rows
}

impl Runs {
    /// Compare the runs.
    pub fn compare(&self, opts: Options) -> Comparison {
        compare_models(&self.models, opts)
    }

    /// The HTML page of comparison `c` of these runs.
    pub fn html(&self, c: &Comparison) -> String {
        page::page(&self.models, c)
    }
}

fn label(i: usize) -> String {
    let letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if i < letters.len() { char::from(letters[i]).to_string() } else { format!("R{}", i + 1) }
}

fn cell(s: &Stage, matched_by: MatchedBy) -> Cell {
    let l = s.latency.unwrap_or_default();
    Cell {
        stage: s.name.clone(),
        matched_by,
        target_rate: s.target,
        achieved_rate: if s.ran { s.achieved } else { None },
        p50_ms: l.p50,
        p95_ms: l.p95,
        p99_ms: l.p99,
        p99_ok_ms: s.latency_ok.and_then(|l| l.p99),
        error_ratio: s.error_ratio,
        verdict: s.verdict.or((!s.ran).then_some(StageVerdict::NotRun)),
        by_hand: s.by_hand,
        delta: None,
    }
}

fn with_deltas(mut cells: Vec<Option<Cell>>) -> Vec<Option<Cell>> {
    let base = cells.first().cloned().flatten();
    for c in cells.iter_mut().skip(1).flatten() {
        if let Some(a) = &base {
            c.delta = Some(Deltas {
                achieved_rate: Delta::of(a.achieved_rate, c.achieved_rate),
                p50_ms: Delta::of(a.p50_ms, c.p50_ms),
                p95_ms: Delta::of(a.p95_ms, c.p95_ms),
                p99_ms: Delta::of(a.p99_ms, c.p99_ms),
                p99_ok_ms: Delta::of(a.p99_ok_ms, c.p99_ok_ms),
                error_ratio: Delta::of(a.error_ratio, c.error_ratio),
            });
        }
    }
    cells
}

fn compare_models(models: &[Model], opts: Options) -> Comparison {
    let runs: Vec<RunInfo> = models
        .iter()
        .enumerate()
        .map(|(i, m)| RunInfo {
            label: label(i),
            name: m.name.clone(),
            dir: m.files.dir_name.clone(),
            target: m.target.clone(),
            protocol: Some(ProtocolUse::line(&m.protocols)).filter(|l| !l.is_empty()),
            started_at: m.started_at.clone(),
            complete: m.complete,
            result: m.verdict.result,
            capacity_rps: m.verdict.capacity_rps,
            breaks_at_rps: m.verdict.breaks_at_rps,
            why: m.verdict.why.clone().filter(|_| m.verdict.result != Outcome::Passed),
            any_held: m.stages.iter().any(|s| s.verdict == Some(StageVerdict::Holds)),
            kind: m.files.meta.as_ref().map(|meta| meta.kind.clone()).filter(|k| !k.is_empty()),
        })
        .collect();
    let keys: Vec<Vec<StageKey>> = models
        .iter()
        .map(|m| m.stages.iter().map(|s| StageKey { name: s.name.clone(), target_rate: s.target }).collect())
        .collect();
    let matched = match_stages(&keys);
    let mut notes = Vec::new();
    let stages: Vec<Row> = matched
        .iter()
        .map(|row| {
            let cells: Vec<Option<Cell>> = row
                .members
                .iter()
                .enumerate()
                .map(|(r, m)| m.map(|(s, by)| cell(&models[r].stages[s], by)))
                .collect();
            let opener = cells.iter().flatten().next().map_or(String::new(), |c| c.stage.clone());
            if row.unmatched() {
                let r = cells.iter().position(Option::is_some).unwrap_or(0);
                notes.push(format!(
                    "stage {opener} of {} has no counterpart (no stage of that name, nor within {:.0}% of its target rate)",
                    runs[r].title(),
                    RATE_TOLERANCE * 100.0
                ));
            }
            Row { name: opener, cells: with_deltas(cells) }
        })
        .collect();
    let total = Row {
        name: "whole run".into(),
        cells: with_deltas(
            models
                .iter()
                .enumerate()
                .map(|(i, m)| Some(cell(&m.total, if i == 0 { MatchedBy::Own } else { MatchedBy::Name })))
                .collect(),
        ),
    };
    // #11: format 1 left failed requests out of the latency; say so rather
    // than let a delta read as a change of the server.
    // Said of every old run, mixed or not: the page's legend describes format 2.
    let old = |m: &Model| m.files.versions.iter().any(|(_, v)| *v < 2);
    let mixed = models.iter().any(old) && !models.iter().all(old);
    for (r, m) in runs.iter().zip(models) {
        if old(m) {
            notes.push(format!(
                "{} was recorded before results format 2: its latency counts the answered requests only (timeouts and \
                 refused connections left out) and it has no p99 ok{}",
                r.title(),
                if mixed { ", so its latency is not measured like the others'" } else { "" }
            ));
        }
    }
    // What could not be read, named per run, as the report names it (#12):
    // a comparison of a damaged directory says which file it did without.
    for (r, m) in runs.iter().zip(models) {
        notes.extend(m.files.notes.iter().map(|n| format!("{}: {n}", r.title())));
    }
    for (r, m) in runs.iter().zip(models).filter(|(r, _)| !r.complete) {
        let why = if m.files.notes.iter().any(|n| n.starts_with("summary.json")) {
            "its summary.json could not be read"
        } else {
            "it left no summary.json (killed, or still running)"
        };
        notes.push(format!(
            "{} is incomplete: {why}, so it has no verdict and no capacity; \
             its stages are rebuilt from the seconds it recorded",
            r.title()
        ));
    }
    let protocols = (1..runs.len()).filter_map(|i| protocol_statement(&runs[0], &runs[i], i)).collect();
    let capacity = (1..runs.len()).map(|i| capacity_statement(&runs[0], &runs[i], i)).collect();
    let equal_p95 = equal_p95(models, &runs, opts);
    let histograms = histogram_rows(models);
    Comparison {
        format: "perfops.compare",
        version: COMPARE_VERSION,
        runs,
        protocols,
        capacity,
        equal_p95,
        stages,
        total,
        histograms,
        notes,
    }
}

/// `B spoke h2 (ALPN), A http/1.1: ...` when run `b` spoke another
/// protocol than the baseline `a` (the usual HTTP/2 A/B); nothing when they
/// spoke the same or either's results do not say.
fn protocol_statement(a: &RunInfo, b: &RunInfo, i: usize) -> Option<Statement> {
    let (pa, pb) = (a.protocol.as_deref()?, b.protocol.as_deref()?);
    (pa != pb).then(|| Statement {
        run: i,
        text: format!(
            "{} spoke {pb}, {} {pa}: the deltas below are the protocols' as much as the target's",
            b.title(),
            a.title()
        ),
        ratio: None,
    })
}

/// Whether capacities `ratio` = B / A apart rank the two runs, when A or B
/// did not break (`a_open`, `b_open`): its capacity is then a lower bound,
/// which ranks them only where it points the way the sentence would say.
/// Two sweeps of other levels, neither breaking, read "B holds 52% less
/// capacity than A" when neither had found its capacity.
fn ranks(a_open: bool, b_open: bool, ratio: f64) -> bool {
    match (a_open, b_open) {
        (false, false) => true,
        // B holds at least its figure: more than A's, or no telling.
        (false, true) => ratio > 1.02,
        // A holds at least its figure: more than B's, or no telling.
        (true, false) => ratio < 0.98,
        (true, true) => false,
    }
}

fn capacity_statement(a: &RunInfo, b: &RunInfo, i: usize) -> Statement {
    let (an, bn) = (a.title(), b.title());
    let rate = |r: f64| format!("{}/s", text::rate(r));
    let lower_bound = |r: &RunInfo| {
        if r.breaks_at_rps.is_none() && r.capacity_rps.is_some() {
            format!(" ({} did not break: its capacity is at least that)", r.title())
        } else {
            String::new()
        }
    };
    let no_capacity = |r: &RunInfo| match r.result {
        Outcome::Incomplete => format!("{} is incomplete (no summary.json)", r.title()),
        _ if r.kind.as_deref() == Some("sweep") => {
            format!("{} is a sweep: throughput at each concurrency, not a capacity (`limit` finds one)", r.title())
        }
        Outcome::NoSlo => format!("{} has no SLO, so no verdict", r.title()),
        _ if r.breaks_at_rps.is_some() && r.any_held => format!("{} held no stage before the break", r.title()),
        _ if r.breaks_at_rps.is_some() => format!("{} held no stage", r.title()),
        // An older summary.json may judge the run without naming a capacity.
        _ => format!("{} states no capacity (its summary.json has no verdict per stage)", r.title()),
    };
    let (text, ratio) = match (a.capacity_rps, b.capacity_rps) {
        // A run that did not break gives a lower bound (see [`ranks`]).
        (Some(ca), Some(cb)) if ca > 0.0 && !ranks(a.breaks_at_rps.is_none(), b.breaks_at_rps.is_none(), cb / ca) => {
            let held = |r: &RunInfo, c: f64| match r.breaks_at_rps {
                None => format!("{} did not break at {} (its capacity is at least that)", r.title(), rate(c)),
                Some(x) => format!("{} holds {} and breaks at {}", r.title(), rate(c), rate(x)),
            };
            (format!("no capacity ranking: {}; {}; run higher to find out", held(b, cb), held(a, ca)), None)
        }
        (Some(ca), Some(cb)) if ca > 0.0 => {
            let ratio = cb / ca;
            let figures = format!("{} vs {}", rate(cb), rate(ca));
            let s = if ratio >= 1.5 {
                format!("{bn} holds {ratio:.1}x the capacity of {an}: {figures}")
            } else if ratio > 1.02 {
                format!("{bn} holds {:.0}% more capacity than {an}: {figures}", (ratio - 1.0) * 100.0)
            } else if ratio >= 0.98 {
                format!("{bn} and {an} hold the same capacity: {figures}")
            } else {
                format!("{bn} holds {:.0}% less capacity than {an}: {figures}", (1.0 - ratio) * 100.0)
            };
            (format!("{s}{}{}", lower_bound(b), lower_bound(a)), Some(ratio))
        }
        (None, Some(cb)) => (format!("{bn} holds {}; {}", rate(cb), no_capacity(a)), None),
        (Some(ca), None) => (format!("{}; {an} holds {}", no_capacity(b), rate(ca)), None),
        _ => (format!("no capacity to compare: {}; {}", no_capacity(a), no_capacity(b)), None),
    };
    Statement { run: i, text, ratio }
}

/// Points (p95, good throughput) of a run's stages that ran: the achieved
/// rate less its answered failures, since a server that answers fast with
/// errors carries nothing at that latency. The achieved rate counts answered
/// arrivals only: a refused connect or a timeout is not in it, and taking
/// the whole error share off again counted it twice (30% refused at 300/s
/// plotted 147/s where 210 were answered well; review 2).
fn points(m: &Model) -> Vec<(f64, f64)> {
    m.stages
        .iter()
        .filter(|s| s.ran)
        .filter_map(|s| {
            let bad = s.answered_failed_ratio.or(s.error_ratio).unwrap_or(0.0).clamp(0.0, 1.0);
            Some((s.latency?.p95?, s.achieved? * (1.0 - bad)))
        })
        .collect()
}

fn equal_p95(models: &[Model], runs: &[RunInfo], opts: Options) -> EqualP95 {
    let base = &models[0];
    let from_slo = base
        .run_slo
        .iter()
        .chain(base.stages.iter().flat_map(|s| s.slo.iter()))
        .find_map(|c| Some((c.slo.clone(), p95_threshold_ms(&c.slo)?)));
    let at_capacity = || {
        let cap = base.verdict.capacity_rps;
        let stage = match cap {
            // An open model's capacity is a stage's target; a closed model's, its achieved rate.
            Some(c) => base
                .stages
                .iter()
                .filter(|s| s.ran)
                .find(|s| s.target.or(s.achieved).is_some_and(|t| (t - c).abs() < 1e-6)),
            None => base
                .stages
                .iter()
                .filter(|s| s.ran)
                .max_by(|a, b| a.achieved.unwrap_or(0.0).total_cmp(&b.achieved.unwrap_or(0.0))),
        }?;
        let what = if cap.is_some() { "at its capacity stage" } else { "at its busiest stage" };
        Some((format!("the p95 of {} {what} ({})", runs[0].title(), stage.name), stage.latency?.p95?))
    };
    let chosen = match opts.at_p95_ms {
        Some(l) => Some(("--at-p95".to_string(), l)),
        None => from_slo.map(|(line, l)| (format!("the SLO `{line}` of {}", runs[0].title()), l)).or_else(at_capacity),
    };
    let Some((source, l)) = chosen else {
        return EqualP95 {
            definition: EQUAL_P95_DEFINITION,
            p95_ms: None,
            source: format!("none: {} has no stage with a p95", runs[0].title()),
            runs: vec![ThroughputAt::NoData; models.len()],
            statements: Vec::new(),
        };
    };
    let at: Vec<ThroughputAt> = models.iter().map(|m| throughput_at(&points(m), l)).collect();
    let statements = (1..models.len())
        .map(|i| {
            let ratio = match (at[0], at[i]) {
                (ThroughputAt::At { rate: a }, ThroughputAt::At { rate: b }) if a > 0.0 => Some(b / a),
                _ => None,
            };
            let complete = (runs[0].complete, runs[i].complete);
            let text = equal_latency::sentence((&runs[0].title(), at[0]), (&runs[i].title(), at[i]), l, complete);
            Statement { run: i, text, ratio }
        })
        .collect();
    EqualP95 { definition: EQUAL_P95_DEFINITION, p95_ms: Some(l), source, runs: at, statements }
}

#[cfg(test)]
mod tests;
