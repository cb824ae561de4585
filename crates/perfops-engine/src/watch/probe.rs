//! Simulated Kubernetes HTTP probes: one thread per probe, checking as the kubelet does, and the
//! state machine that says what the kubelet would do after each check.
//!
//! It owns the check (after `initial_delay`, every `period` on absolute due times, a new TCP
//! connection each time because the kubelet disables keep-alive, `GET` with `Host`,
//! `User-Agent: kube-probe/perfops` and `Connection: close`; success is a status in 200..=399
//! within `timeout`, connect and whole response included) and [`ProbeState`], a pure type fed
//! outcomes. It does not restart or unready anything: it says when Kubernetes would, and the
//! analysis cites it.
//!
//! Judgement calls, where a simulation must differ from a kubelet:
//! - after a liveness restart the counter starts again from 0, but checks go on at the same pace
//!   without a new `initial_delay`: the container was not really restarted, and what the target
//!   does next under the same load is what the report needs to show;
//! - readiness starts *ready*: the target was serving before the load began, so the first run of
//!   `failure_threshold` failures is the moment it would leave the Service's endpoints;
//! - liveness ignores `success_threshold` (Kubernetes requires it to be 1 there).

use std::sync::Arc;
use std::time::Instant;

use rustls::ClientConfig;
use url::Url;

use super::fetch::{self, FetchError, Request};
use super::{Ctx, ProbeKind, ProbeResult, ProbeSpec, Slots, WatchEvent};

/// What one probe knows between checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeState {
    kind: ProbeKind,
    failure_threshold: u32,
    success_threshold: u32,
    /// Consecutive failures so far.
    failures: u32,
    /// Consecutive successes so far (readiness).
    successes: u32,
    /// Readiness: in the Service's endpoints.
    ready: bool,
}

/// What Kubernetes would make of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Consecutive failures, this check included.
    pub failures: u32,
    /// Liveness: the threshold is reached now.
    pub restart: bool,
    /// Readiness: the threshold is reached now, and it was ready.
    pub unready: bool,
}

impl ProbeState {
    /// A fresh probe; thresholds below 1 count as 1, as the API server would refuse them.
    pub(crate) fn new(kind: ProbeKind, failure_threshold: u32, success_threshold: u32) -> ProbeState {
        ProbeState {
            kind,
            failure_threshold: failure_threshold.max(1),
            success_threshold: success_threshold.max(1),
            failures: 0,
            successes: 0,
            ready: true,
        }
    }

    /// Readiness: in the endpoints now. Always true for liveness.
    #[cfg(test)]
    pub(crate) fn ready(&self) -> bool {
        self.ready
    }

    /// Take one check's outcome.
    pub(crate) fn observe(&mut self, ok: bool) -> Verdict {
        let mut v = Verdict { failures: 0, restart: false, unready: false };
        if ok {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if self.kind == ProbeKind::Readiness && !self.ready && self.successes >= self.success_threshold {
                self.ready = true;
            }
            return v;
        }
        self.successes = 0;
        self.failures = self.failures.saturating_add(1);
        v.failures = self.failures;
        match self.kind {
            ProbeKind::Liveness if self.failures >= self.failure_threshold => {
                v.restart = true;
                // A restarted container starts with a clean record.
                self.failures = 0;
            }
            ProbeKind::Readiness if self.ready && self.failures >= self.failure_threshold => {
                v.unready = true;
                self.ready = false;
            }
            _ => {}
        }
        v
    }
}

/// Check `url` as `spec` says until stopped.
pub(super) fn run(ctx: &Ctx, spec: &ProbeSpec, url: &Url, tls: Option<&Arc<ClientConfig>>) {
    // The kubelet's own Accept, and the User-Agent it would send with the version left out.
    let headers = [("User-Agent", "kube-probe/perfops"), ("Accept", "*/*")];
    let req = Request { url, timeout: spec.timeout, headers: &headers, tls };
    let mut state = ProbeState::new(spec.kind, spec.failure_threshold, spec.success_threshold);
    let mut slots = Slots::new(ctx.start + spec.initial_delay, spec.period);
    loop {
        if !ctx.sleep_until(slots.next_due(Instant::now())) {
            return;
        }
        let began = Instant::now();
        let (ok, status, error, took) = match fetch::get(&req, &ctx.stop) {
            Ok(r) if (200..400).contains(&r.status) => (true, Some(r.status), None, r.elapsed),
            Ok(r) => (false, Some(r.status), Some(format!("HTTP {}", r.status)), r.elapsed),
            Err(FetchError::Stopped) => return,
            Err(e) => (false, None, Some(e.to_string()), began.elapsed()),
        };
        let v = state.observe(ok);
        let result = ProbeResult {
            t: ctx.t(began),
            probe: spec.kind,
            ok,
            status,
            ms: took.as_secs_f64() * 1000.0,
            error,
            failures: v.failures,
            restart: v.restart,
            unready: v.unready,
        };
        if !ctx.send(WatchEvent::Probe(result)) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed outcomes (`+` success, `-` failure); the verdicts as (failures, restart, unready).
    fn run_pattern(state: &mut ProbeState, pattern: &str) -> Vec<(u32, bool, bool)> {
        pattern
            .chars()
            .map(|c| {
                let v = state.observe(c == '+');
                (v.failures, v.restart, v.unready)
            })
            .collect()
    }

    #[test]
    fn liveness_restarts_at_the_threshold_and_starts_again() {
        let mut s = ProbeState::new(ProbeKind::Liveness, 3, 1);
        let got = run_pattern(&mut s, "+--+-------");
        let want = [
            (0, false, false), // ok
            (1, false, false),
            (2, false, false),
            (0, false, false), // a success resets the count
            (1, false, false),
            (2, false, false),
            (3, true, false),  // the third in a row: Kubernetes restarts now
            (1, false, false), // counted from 0 again, as after a restart
            (2, false, false),
            (3, true, false), // and again
            (1, false, false),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn readiness_goes_unready_once_and_needs_successes_to_come_back() {
        let mut s = ProbeState::new(ProbeKind::Readiness, 2, 3);
        assert!(s.ready(), "a serving target starts ready");
        let got = run_pattern(&mut s, "---");
        assert_eq!(
            got,
            [(1, false, false), (2, false, true), (3, false, false)],
            "unready once; failures go on counting"
        );
        assert!(!s.ready());
        run_pattern(&mut s, "++-++");
        assert!(!s.ready(), "a failure breaks the run of successes");
        run_pattern(&mut s, "+");
        assert!(s.ready(), "three successes in a row");
        assert_eq!(run_pattern(&mut s, "--"), [(1, false, false), (2, false, true)], "and it can go again");
    }

    #[test]
    fn thresholds_below_one_count_as_one() {
        let mut s = ProbeState::new(ProbeKind::Liveness, 0, 0);
        assert_eq!(run_pattern(&mut s, "-"), [(1, true, false)]);
    }
}
