//! What failed, said with what was expected and what came (#32):
//! `summary.json`'s `failures` (one [`FailureGroup`] per step and failure
//! kind: its count and its first few samples), the terminal's "top
//! failures" lines ([`failures_text`]) and the one line a verdict's "why"
//! can quote ([`top_failure`]).
//!
//! It also owns `failures.jsonl` ([`FailureLine`]): each failing exchange
//! kept, one per line, written with its second by the results writer
//! (`crate::sink`) so that a killed run keeps them, and read back
//! ([`read_failures`]) when a run left no `summary.json`.
//!
//! The samples are made, redacted and bounded by the engine
//! (`perfops_core::measure::samples`); this module only groups and shows
//! them. The HTML report's table is `html::page`'s.

use std::fmt::Write;

use perfops_core::measure::{FailureKind, FailureSample, FailureSamples, SampleKey, step_name};
use perfops_core::printable;
use serde::{Deserialize, Serialize};

/// The failures of one step of one kind: `summary.json`'s `failures[]`
/// (absent from summaries before #32).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureGroup {
    /// The step's name.
    pub step: String,
    /// The failure kind's name (`http_4xx`, `check_failed`, ...).
    pub kind: String,
    /// How many failed so, over the run.
    pub count: u64,
    /// The first few of them by time (at most three), with the exchange as
    /// it was (a fleet's too: agents send theirs with their seconds).
    #[serde(default)]
    pub samples: Vec<FailureSample>,
}

impl FailureGroup {
    /// One line for this group: `create-order: 523 http_4xx, e.g. status:
    /// expected 201, found 422 (body: ...)`, printable (names and bodies
    /// escaped). What a verdict's "why" can say of a step's failing answers.
    pub fn line(&self) -> String {
        let name = printable::escape(&self.step);
        let example = match (self.samples.first(), FailureKind::from_name(&self.kind)) {
            // A sample with nothing but its kind (a timeout, a refused
            // connection) adds nothing: "orders: 84 connect_timeout, e.g.
            // connect_timeout" said it twice.
            (Some(s), _) if s.status.is_none() && s.check.is_none() && s.body.is_none() => String::new(),
            (Some(s), Some(kind)) => format!(", e.g. {}", s.describe(kind)),
            _ => String::new(),
        };
        printable::escape(&format!("{name}: {} {}{example}", self.count, self.kind)).into_owned()
    }
}

/// The file of a results directory that holds the failing exchanges.
pub const FAILURES_FILE: &str = "failures.jsonl";

/// A line of `failures.jsonl`: one failing exchange, with its step's name
/// and its failure kind's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureLine {
    /// The step's name.
    pub step: String,
    /// The failure kind's name (`http_4xx`, `timeout`, ...).
    pub kind: String,
    /// The exchange.
    #[serde(flatten)]
    pub sample: FailureSample,
}

impl FailureLine {
    /// The line of `sample`, of `key`, its step named by `step_names`.
    pub fn of(step_names: &[String], (step, kind): SampleKey, sample: &FailureSample) -> FailureLine {
        FailureLine { step: step_name(step_names, step), kind: kind.name().to_string(), sample: sample.clone() }
    }
}

/// The failures `failures.jsonl` in `text` shows, grouped by step and kind
/// as `summary.json` groups them: what `report` shows of a run that left no
/// summary (killed). The counts are those of the samples (the file keeps
/// samples, not counts). A line that does not read is skipped (the last,
/// cut by a kill); each sample is held to a kept one's bounds, since the
/// file may come from anywhere.
pub fn read_failures(text: &str) -> Vec<FailureGroup> {
    let mut groups: Vec<FailureGroup> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut kept = FailureSamples::default();
    for (name, kind, sample) in failure_lines(text).flatten() {
        let step = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name);
                names.len() - 1
            }
        };
        let Ok(step) = u16::try_from(step) else { continue };
        kept.add((step, kind), sample);
    }
    for ((step, kind), list) in kept.iter() {
        groups.push(FailureGroup {
            step: printable::escape(&names[usize::from(step)]).into_owned(),
            kind: kind.name().to_string(),
            count: list.len() as u64,
            samples: list.to_vec(),
        });
    }
    groups
}

/// Each line of a `failures.jsonl` in `text`: its step's name, its kind and
/// its exchange held to a kept one's bounds (the file may come from
/// anywhere); `None` for a line that does not read or names no kind this
/// perfops knows (the last, cut by a kill).
pub(crate) fn failure_lines(text: &str) -> impl Iterator<Item = Option<(String, FailureKind, FailureSample)>> + '_ {
    text.lines().map(|line| {
        let l = serde_json::from_str::<FailureLine>(line).ok()?;
        let kind = FailureKind::from_name(&l.kind)?;
        Some((l.step, kind, l.sample.bounded()))
    })
}

/// The group that failed most, in `step` when given: what a stage's or a
/// run's "why" names for its failing answers (#32, for the verdict's why).
pub fn top_failure<'a>(groups: &'a [FailureGroup], step: Option<&str>) -> Option<&'a FailureGroup> {
    groups.iter().filter(|g| step.is_none_or(|s| g.step == s)).max_by_key(|g| g.count)
}

/// The most lines the terminal gives failures; the rest are in `summary.json`.
const SHOWN: usize = 10;

/// The terminal's failures, most frequent first: one line per step and kind
/// with its count and its first sample (empty without failures).
pub fn failures_text(groups: &[FailureGroup]) -> String {
    let mut sorted: Vec<&FailureGroup> = groups.iter().collect();
    sorted.sort_by_key(|g| std::cmp::Reverse(g.count));
    let mut o = String::new();
    if sorted.is_empty() {
        return o;
    }
    let _ = writeln!(o, "failures (by step; the first of each in summary.json's `failures`):");
    for g in sorted.iter().take(SHOWN) {
        let _ = writeln!(o, "  {}", g.line());
    }
    if sorted.len() > SHOWN {
        let _ = writeln!(o, "  ... and {} more in summary.json", sorted.len() - SHOWN);
    }
    o
}

/// Each group's exchanges as they were, for a terminal (`quick
/// --failures`): a head line per group, then per exchange its time and
/// timings, the request (`>`), the response (`<`) and its body head (`|`).
/// Every string was escaped when kept; the step's name is escaped here.
pub fn exchanges_text(groups: &[FailureGroup]) -> String {
    let mut o = String::new();
    if groups.is_empty() {
        let _ = writeln!(o, "Failures: none");
        return o;
    }
    let _ = writeln!(o, "Failures, the first of each kind as they were (secrets redacted):");
    for g in groups {
        let _ = writeln!(o, "  {} {}: {} failed", printable::escape(&g.step), g.kind, g.count);
        for s in &g.samples {
            let mut head = format!("    t={:.3}s", s.t);
            if let Some(t) = &s.timings {
                let sent = t.sent.map_or("never sent".to_string(), |x| format!("sent {x:.3}s"));
                let service = t.service_ms.map_or(String::new(), |x| format!(", service {x:.1} ms"));
                head.push_str(&format!(": due {:.3}s, {sent}, latency {:.1} ms{service}", t.due, t.latency_ms));
            }
            let _ = writeln!(o, "{head}");
            if let Some(check) = &s.check {
                let _ = writeln!(o, "      ! {check}");
            }
            if let Some(line) = &s.request {
                let _ = writeln!(o, "      > {line}");
            }
            for (name, value) in &s.request_headers {
                let _ = writeln!(o, "      > {name}: {value}");
            }
            if let Some(status) = s.status {
                let _ = writeln!(o, "      < status {status}");
            }
            for (name, value) in &s.response_headers {
                let _ = writeln!(o, "      < {name}: {value}");
            }
            if let Some(body) = &s.body {
                let _ = writeln!(o, "      | {body}");
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(step: &str, kind: &str, count: u64, sample: Option<FailureSample>) -> FailureGroup {
        FailureGroup { step: step.into(), kind: kind.into(), count, samples: sample.into_iter().collect() }
    }

    /// #32: the terminal names the step, the count, the failed check with
    /// expected vs found and the body head; most frequent first.
    #[test]
    fn failures_are_shown_most_frequent_first_with_their_example() {
        let s422 = FailureSample {
            t: 1.2,
            status: Some(422),
            check: Some("status: expected 201, found 422".into()),
            body: Some(r#"{"error":"qty must be a number"}"#.into()),
            ..FailureSample::default()
        };
        let groups =
            vec![group("get-order", "check_failed", 30, None), group("create-order", "http_4xx", 523, Some(s422))];
        let text = failures_text(&groups);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            r#"  create-order: 523 http_4xx, e.g. status: expected 201, found 422 (body: {"error":"qty must be a number"})"#
        );
        assert_eq!(lines[2], "  get-order: 30 check_failed");
        assert_eq!(top_failure(&groups, None).map(|g| g.step.as_str()), Some("create-order"));
        assert_eq!(top_failure(&groups, Some("get-order")).map(|g| g.count), Some(30));
        assert_eq!(failures_text(&[]), "", "no failures: nothing said");
        // A step name from the scenario cannot forge a line.
        let bare = FailureSample { t: 2.0, ..FailureSample::default() };
        assert_eq!(
            group("orders", "connect_timeout", 84, Some(bare)).line(),
            "orders: 84 connect_timeout",
            "a sample of nothing but its kind says it once"
        );
        let evil = failures_text(&[group("a\nb", "http_5xx", 1, None)]);
        assert_eq!(evil.lines().count(), 2, "{evil}");
    }
}
