//! The runs kept under a results folder (`perfops runs`): one entry per
//! results directory, newest first, with what a person scans for — when, which
//! scenario, the verdict, the capacity, how long it ran — or "incomplete"
//! when the run left no `summary.json`.
//!
//! Reads only `meta.json`, `summary.json` and the length of `series.jsonl`,
//! through the types that wrote them, as the report does (a file that does
//! not read counts as missing, and is named in the entry's notes); a folder
//! that holds none of them is not a run and is left out. Files are opened as
//! the report opens them (`read::read_file`): a link out of the directory or
//! a FIFO is named in the notes, never followed or waited on (#31).
//!
//! The table escapes every control character of what it prints
//! ([`perfops_core::printable`]): a run's name comes from a file.

use std::fmt::Write;
use std::path::Path;

use perfops_core::printable::escape;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::format::{clock, per_second};
use crate::html::model::{self, Outcome, recorded_s};
use crate::read::{ReportError, is_object, json_lines, read_file};
use crate::run::{RunMeta, RunSummary, SeriesLine};

/// One run in the listing.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunEntry {
    /// The directory's name (`20261122T043000Z-orders`).
    pub dir: String,
    /// The directory, as found under the folder listed.
    pub path: String,
    /// The scenario's name.
    pub name: String,
    /// The target as the run resolved it, else as written ([`RunMeta::target_shown`], #32).
    pub target: Option<String>,
    /// RFC 3339 UTC start time.
    pub started_at: Option<String>,
    /// `passed`, `failed`, `inconclusive`, `none` (no SLO) or `incomplete`
    /// (no `summary.json`: killed, or still running).
    pub result: Outcome,
    /// The highest arrival rate that held, when the verdict says.
    pub capacity_rps: Option<f64>,
    /// The first rate that did not hold, when the verdict says.
    pub breaks_at_rps: Option<f64>,
    /// How long it ran (for an incomplete run: the seconds it recorded).
    pub duration_s: Option<f64>,
    /// Whether `summary.json` is there.
    pub complete: bool,
    /// Files that are there but could not be read, each named; the entry is
    /// made from the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The runs under `base`, newest first.
pub fn list(base: &Path) -> Result<Vec<RunEntry>, ReportError> {
    let entries =
        std::fs::read_dir(base).map_err(|e| ReportError::Unreadable { path: base.to_path_buf(), source: e })?;
    let mut runs: Vec<RunEntry> = entries.filter_map(|e| entry(&e.ok()?.path())).collect();
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.dir.cmp(&a.dir)));
    Ok(runs)
}

/// The bytes of `dir/name`, opened as the report opens them (inside the
/// directory, a regular file, under a cap: #31): none when it is not there;
/// when it is there but cannot be read, none and a note naming it.
fn read_bytes(dir: &Path, name: &str, notes: &mut Vec<String>) -> Option<Vec<u8>> {
    read_file(dir, name, notes)
}

/// `dir/name` as `T`; a file there that does not read is named in `notes`
/// and counts as missing (#12: a damaged run is listed, and says why).
fn read_json<T: DeserializeOwned>(dir: &Path, name: &str, notes: &mut Vec<String>) -> Option<T> {
    let bytes = read_bytes(dir, name, notes)?;
    if !is_object(&bytes) {
        notes.push(format!("{name} is not a JSON object; listed without it"));
        return None;
    }
    serde_json::from_slice::<T>(&bytes)
        .inspect_err(|e| notes.push(format!("{name} is not what perfops writes ({e}); listed without it")))
        .ok()
}

fn entry(dir: &Path) -> Option<RunEntry> {
    if !dir.is_dir() {
        return None;
    }
    let mut notes = Vec::new();
    let meta: Option<RunMeta> = read_json(dir, "meta.json", &mut notes);
    let summary: Option<RunSummary> = read_json(dir, "summary.json", &mut notes);
    // As the report reads it: bytes that are not UTF-8 cost their line, not the file.
    let series = read_bytes(dir, "series.jsonl", &mut notes).map(|b| String::from_utf8_lossy(&b).into_owned());
    if meta.is_none() && summary.is_none() && series.is_none() && notes.is_empty() {
        return None;
    }
    let dir_name = dir.file_name()?.to_string_lossy().into_owned();
    // meta.json first (a killed run has only it), then the summary.
    let field = |m: fn(&RunMeta) -> &String, s: fn(&RunSummary) -> &String| {
        meta.as_ref().map(m).filter(|v| !v.is_empty()).or_else(|| summary.as_ref().map(s)).cloned()
    };
    // An incomplete run ran as long as the seconds it recorded.
    let recorded = series.as_deref().map(|s| {
        // A damaged line costs its second; the report names it, the listing only counts.
        let (lines, _) = json_lines::<SeriesLine>("series.jsonl", s);
        recorded_s(&lines)
    });
    let verdict = model::verdict(summary.as_ref());
    Some(RunEntry {
        path: dir.display().to_string(),
        name: field(|m| &m.name, |s| &s.name).unwrap_or_else(|| dir_name.clone()),
        started_at: field(|m| &m.started_at, |s| &s.started_at),
        target: meta
            .as_ref()
            .map(RunMeta::target_shown)
            .filter(|t| !t.is_empty())
            .or_else(|| summary.as_ref().map(|s| s.target.clone()).filter(|t| !t.is_empty())),
        result: verdict.result,
        capacity_rps: verdict.capacity_rps,
        breaks_at_rps: verdict.breaks_at_rps,
        duration_s: summary.as_ref().map(|s| s.elapsed_s).or(recorded),
        complete: summary.is_some(),
        dir: dir_name,
        notes,
    })
}

/// One line per run, under a header; a line saying so when there are none.
pub fn table(runs: &[RunEntry]) -> String {
    if runs.is_empty() {
        return "no runs\n".into();
    }
    // As the run's own summary says them (#32: "breaks at 1/s" for a search
    // whose lowest try was 0.6/s).
    let rate = |v: Option<f64>| v.map_or("-".into(), per_second);
    let width = runs.iter().map(|r| escape(&r.name).chars().count()).max().unwrap_or(0).clamp(4, 32);
    let target = |r: &RunEntry| escape(r.target.as_deref().unwrap_or("-")).into_owned();
    let t_width = runs.iter().map(|r| target(r).chars().count()).max().unwrap_or(0).clamp(6, 60);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16}  {:<width$}  {:<12}  {:>9}  {:>9}  {:>7}  {:<t_width$}  dir",
        "started (UTC)", "name", "result", "capacity", "breaks at", "ran", "target"
    );
    for r in runs {
        let when: String =
            r.started_at.as_deref().map_or("-".into(), |s| s.replace('T', " ").chars().take(16).collect());
        let _ = writeln!(
            o,
            "{:<16}  {:<width$}  {:<12}  {:>9}  {:>9}  {:>7}  {:<t_width$}  {}",
            escape(&when),
            escape(&r.name),
            r.result.name(),
            rate(r.capacity_rps),
            rate(r.breaks_at_rps),
            r.duration_s.map_or("-".into(), clock),
            target(r),
            escape(&r.path)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines() {
        let run = |dir: &str, result: Outcome, cap: Option<f64>| RunEntry {
            dir: dir.into(),
            path: format!("runs/{dir}"),
            name: "orders".into(),
            target: Some(format!(
                "http://127.0.0.1:{} (127.0.0.1:{})",
                8080 + cap.is_some() as u16,
                8080 + cap.is_some() as u16
            )),
            started_at: Some("2026-11-22T04:30:00Z".into()),
            result,
            capacity_rps: cap,
            breaks_at_rps: cap.map(|c| c + 50.0),
            duration_s: Some(61.4),
            complete: result != Outcome::Incomplete,
            notes: Vec::new(),
        };
        let t = table(&[run("a", Outcome::Failed, Some(200.0)), run("b", Outcome::Incomplete, None)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[1].starts_with("2026-11-22 04:30  orders"), "{t}");
        assert!(lines[1].contains("failed") && lines[1].contains("200/s") && lines[1].contains("250/s"), "{t}");
        assert!(lines[1].contains("1:01") && lines[1].ends_with("runs/a"), "{t}");
        assert!(lines[2].contains("incomplete"), "{t}");
        // #32: each run's target as it resolved, under its header.
        assert!(lines[0].contains("target") && lines[1].contains("http://127.0.0.1:8081 (127.0.0.1:8081)"), "{t}");
        assert!(lines[2].contains("http://127.0.0.1:8080 (127.0.0.1:8080)"), "{t}");
        assert_eq!(table(&[]), "no runs\n");
        // #31: a name from a file, with terminal escapes, is printed escaped.
        let mut evil = run("c", Outcome::Passed, None);
        evil.name = "x\u{1b}[2J\ry".into();
        let t = table(&[evil]);
        assert!(t.contains("x\\u{1b}[2J\\ry") && !t.contains('\u{1b}') && !t.contains('\r'), "{t}");
    }
}
