//! The "why" of a stage that failed (and so of the run's headline): one
//! sentence tied to the rule that failed, with what is known of its cause.
//! Every other diagnostic is a *finding*, listed as such, never this why.
//!
//! ```text
//!   the stage holds, or it never ran          -> no why (a passed run shows none)
//!   nearly every request failed to connect    -> "the target is down (connection refused at ADDR)"
//!   an `errors` line failed                   -> the line, then the steps whose answers failed:
//!                                                step, how many of how many, by failure kind
//!                                                (status class, check), and, for timeouts, resets
//!                                                and 5xx, the server's saturation if watched
//!   a probe tripped                           -> the probe, when, what Kubernetes would do
//!   the rate fell short                       -> the shortfall, then what limited it: arrivals
//!                                                dropped at max_in_flight, the generator's CPU,
//!                                                connections that failed, the server's CPU, pool
//!                                                or listen queue; or that nothing watched shows
//!   a latency line failed                     -> the line, then the server's saturation if
//!                                                watched, else the steps that failed
//!   a watched metric's line failed            -> the line
//!   inconclusive (the generator the limit)    -> the cap or the CPU that made it so
//! ```
//!
//! A Nagle stall, memory or GC growth, a queue outside the stage: findings.
//! A diagnostic is a cause only when it is of a saturation kind
//! ([`CAUSES`]) and was seen in the stage being explained.
//!
//! This module owns the choice and the words. It does not judge (that is
//! `verdict`), nor diagnose (`diagnose`), nor capture failing exchanges: it
//! names the step and kind from the per-step counts, and says more where
//! [`StepFailures::detail`] is given (what was expected and what came).

use std::collections::BTreeMap;

use serde::Serialize;

use super::diagnose::Diagnostic;
use super::verdict::{Broke, Judged, StageVerdict, connect_failures};
use crate::measure::{FailureKind, Stats};
use crate::scenario::{Condition, Metric};

/// Share of a stage's ended requests that failed to connect at or above
/// which the target is said to be down, whatever else failed.
pub const DOWN_SHARE: f64 = 0.9;

/// Diagnostic kinds that can cause a stage to fail (saturation, a probe, a
/// restart); any other kind is a finding only.
pub const CAUSES: [&str; 9] = [
    "generator_saturated",
    "cpu_saturated",
    "pool_bound",
    "inference_queue",
    "listen_queue_full",
    "listen_queue_high",
    "probe_failed",
    "pod_restarted",
    "process_restarted",
];

/// Which rule a why explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhyKind {
    /// Nearly every request failed to connect.
    TargetDown,
    /// An `errors` line: answers that failed.
    FailingAnswers,
    /// A liveness or readiness probe tripped.
    Probe,
    /// The rate fell short.
    Rate,
    /// A latency line.
    Latency,
    /// A watched metric's line.
    Watched,
    /// The generator was the limit: the stage judges nothing.
    Generator,
}

/// A stage's why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Why {
    /// The rule it explains.
    pub kind: WhyKind,
    /// One sentence.
    pub text: String,
}

/// One step's failures in a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFailures {
    /// The step's name.
    pub step: String,
    /// Its requests that failed.
    pub failed: u64,
    /// Its requests that ended (succeeded or failed).
    pub of: u64,
    /// Failures by kind, most first.
    pub kinds: Vec<(FailureKind, u64)>,
    /// What was expected and what came, when known (a captured failing
    /// exchange: `status 422, expected 201`); `None`: the kinds say it all.
    pub detail: Option<String>,
}

impl StepFailures {
    /// `create-order: 523 of 600 failed (http_4xx 523)`, with the detail
    /// after the kinds when there is one.
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{} {n}", k.name())).collect();
        let detail = self.detail.as_ref().map_or(String::new(), |d| format!(": {d}"));
        format!("step {}: {} of {} failed ({}{detail})", self.step, self.failed, self.of, kinds.join(", "))
    }
}

/// The steps of `steps` that failed, most failures first (then by name).
/// The hook for what failing exchanges tell: a caller that captured them
/// fills each [`StepFailures::detail`] before [`why`] words them.
pub fn step_failures(steps: &BTreeMap<String, Stats>) -> Vec<StepFailures> {
    let mut out: Vec<StepFailures> = steps
        .iter()
        .filter(|(_, s)| s.failures.total() > 0)
        .map(|(name, s)| {
            let mut kinds: Vec<(FailureKind, u64)> =
                s.failures.nonzero().into_iter().filter(|(k, _)| *k != FailureKind::Cut).collect();
            kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let failed = s.failures.total();
            StepFailures { step: name.clone(), failed, of: s.succeeded() + failed, kinds, detail: None }
        })
        .collect();
    out.sort_by(|a, b| b.failed.cmp(&a.failed).then_with(|| a.step.cmp(&b.step)));
    out
}

/// A stage to explain.
#[derive(Debug, Clone, Copy)]
pub struct Stage<'a> {
    /// Its name, as diagnostics name the stage they were seen in.
    pub name: &'a str,
    /// Its verdict and the rules it failed.
    pub judged: &'a Judged,
    /// The scenario's SLO lines (what [`Broke::Slo`] indexes).
    pub slo: &'a [Condition],
    /// Its requests.
    pub stats: &'a Stats,
    /// Its failing steps ([`step_failures`], perhaps with details).
    pub failing: &'a [StepFailures],
}

/// The why of stage `s`: none when it held or never ran. `diagnostics` are
/// the run's (those of a [`CAUSES`] kind seen in this stage may be named as
/// its cause); `target` is the target as the run names it (its address is
/// quoted when it was down).
pub fn why(s: &Stage<'_>, diagnostics: &[Diagnostic], target: &str) -> Option<Why> {
    let j = s.judged;
    if !matches!(j.verdict, StageVerdict::Fails | StageVerdict::Inconclusive) {
        return None;
    }
    let cause = diagnostics
        .iter()
        .find(|d| is_cause(d) && d.kind != "generator_saturated" && d.stage.as_deref() == Some(s.name));
    let ended = s.stats.completed + s.stats.failures.total();
    let connect = connect_failures(s.stats);
    if ended > 0 && connect as f64 >= DOWN_SHARE * ended as f64 {
        let refused = s.stats.failures[FailureKind::ConnectRefused];
        let how = if refused * 2 >= connect {
            "connection refused"
        } else if s.stats.failures[FailureKind::ConnectTimeout] * 2 >= connect {
            "connections timed out"
        } else {
            "could not connect"
        };
        return Some(Why {
            kind: WhyKind::TargetDown,
            text: format!(
                "the target is down ({how} at {}: {connect} of {ended} requests never connected)",
                address(target)
            ),
        });
    }
    if j.verdict == StageVerdict::Inconclusive {
        // The verdict's own first reason names the cap or the CPU already.
        return j.generator_limited.then(|| Why {
            kind: WhyKind::Generator,
            text: j.reasons.first().cloned().unwrap_or_else(|| {
                format!("the generator was the limit: {} arrivals dropped at max_in_flight", s.stats.dropped)
            }),
        });
    }
    let line = |i: usize| s.slo.get(i);
    let reason_of = |i: usize| -> String {
        let text = line(i).map_or("", |c| c.text.as_str());
        j.reasons.iter().find(|r| r.starts_with(text)).cloned().unwrap_or_else(|| text.to_string())
    };
    let steps =
        |n: usize| -> String { s.failing.iter().take(n).map(StepFailures::describe).collect::<Vec<_>>().join("; ") };
    let saturation_kinds = [
        FailureKind::Timeout,
        FailureKind::ConnectTimeout,
        FailureKind::Reset,
        FailureKind::Http5xx,
        FailureKind::RefusedStream,
    ];
    let broke = |want: fn(&Metric) -> bool| {
        j.broke.iter().find_map(|b| match b {
            Broke::Slo(i) if line(*i).is_some_and(|c| want(&c.metric)) => Some(*i),
            _ => None,
        })
    };
    if let Some(i) = broke(|m| matches!(m, Metric::Errors)) {
        let mut text = reason_of(i);
        if !s.failing.is_empty() {
            text.push_str(&format!(": {}", steps(2)));
        }
        let saturated =
            s.failing.first().and_then(|f| f.kinds.first()).is_some_and(|(k, _)| saturation_kinds.contains(k));
        if let Some(d) = cause.filter(|_| saturated) {
            text.push_str(&format!(" — {}", d.title));
        }
        return Some(Why { kind: WhyKind::FailingAnswers, text });
    }
    let probe = j.broke.iter().find_map(|b| match b {
        Broke::Liveness(t) => {
            Some(format!("the liveness probe tripped at t={t:.0}s: Kubernetes would restart the pod"))
        }
        Broke::Readiness(t) => {
            Some(format!("the readiness probe tripped at t={t:.0}s: Kubernetes would stop sending it traffic"))
        }
        _ => None,
    });
    if let Some(text) = probe {
        return Some(Why { kind: WhyKind::Probe, text });
    }
    // The rate rule, or an SLO line on the rate (`rate >= 97%`).
    let rate_line = broke(|m| matches!(m, Metric::Rate));
    if j.broke.contains(&Broke::Rate) || rate_line.is_some() {
        let shortfall = match rate_line {
            Some(i) => reason_of(i),
            None => j
                .reasons
                .iter()
                .find(|r| r.starts_with("achieved "))
                .cloned()
                .unwrap_or_else(|| "the rate fell short".into()),
        };
        let generator =
            diagnostics.iter().find(|d| d.kind == "generator_saturated" && d.stage.as_deref() == Some(s.name));
        let limited = if s.stats.dropped > 0 {
            format!("limited by max_in_flight: {} arrivals dropped at the generator's cap", s.stats.dropped)
        } else if let Some(d) = generator {
            format!("limited by the generator: {}", d.title)
        } else if connect > 0 && connect as f64 >= 0.1 * ended as f64 {
            format!("limited by connections: {connect} of {ended} requests could not connect")
        } else if let Some(d) = cause {
            format!("limited by the server: {}", d.title)
        } else if !s.failing.is_empty() {
            format!("answers failed: {}", steps(2))
        } else {
            "nothing watched shows what limited it (no saturation of the target's CPU, pool or queue was seen \
             in the stage)"
                .into()
        };
        return Some(Why { kind: WhyKind::Rate, text: format!("{shortfall} — {limited}") });
    }
    if let Some(i) = broke(Metric::is_latency) {
        let mut text = reason_of(i);
        if let Some(d) = cause {
            text.push_str(&format!(" — {}", d.title));
        } else if !s.failing.is_empty() {
            text.push_str(&format!(": {}", steps(2)));
        }
        return Some(Why { kind: WhyKind::Latency, text });
    }
    if let Some(i) = j.broke.iter().find_map(|b| match b {
        Broke::Slo(i) => Some(*i),
        _ => None,
    }) {
        return Some(Why { kind: WhyKind::Watched, text: reason_of(i) });
    }
    // A failure whose rule this version does not know: its reason as said.
    j.reasons.first().map(|r| Why { kind: WhyKind::Watched, text: r.clone() })
}

/// Whether diagnostic `d` can be a failure's cause: of a [`CAUSES`] kind,
/// and, for listen overflows, with the target's own queue seen deep (the
/// namespace's counters are every listener's: "its own queue at most 0 of
/// 128" is another server's, a finding).
pub fn is_cause(d: &Diagnostic) -> bool {
    let at = |m: &str| d.evidence.iter().find(|e| e.metric == m).map(|e| e.value);
    let shallow = match (at("listen_queue"), at("listen_queue_max")) {
        (Some(q), Some(max)) => q < 0.5 * max,
        _ => false,
    };
    CAUSES.contains(&d.kind.as_str()) && !(d.kind == "listen_queue_full" && shallow)
}

/// The `host:port` of the first URL in `target` (`demo:threads
/// (http://127.0.0.1:8080)` names its URL in parentheses); the whole text
/// when it has none.
pub fn address(target: &str) -> &str {
    match target.find("://") {
        Some(at) => {
            let rest = &target[at + 3..];
            let end = rest.find(['/', ' ', ')', '?', '#']).unwrap_or(rest.len());
            &rest[..end]
        }
        None => target,
    }
}

#[cfg(test)]
mod tests;
