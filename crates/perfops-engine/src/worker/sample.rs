//! A failing exchange kept as an example of its count (#32): its step,
//! failure kind, status, the check that failed (expected vs found) and the
//! first bytes of its body, redacted and escaped here, before it leaves the
//! worker. Which failures are kept (the first few of each step and kind) and
//! how the workers' are merged is `perfops_core::measure::samples`'s.
//!
//! Only a failure comes here, and [`Sampler::wants`] is asked first: past its
//! first few, a failure costs a short search; a success costs nothing.

use perfops_core::measure::{BODY_HEAD_BYTES, FailureKind, FailureSample};
use perfops_core::printable;
use perfops_core::scenario::extract::ParsedBody;
use perfops_core::scenario::redact::redact_values;
use tokio::time::Instant;

use super::Worker;
use crate::work::StepPlan;

/// How much of a body is redacted before its head is cut: a secret that
/// straddles the cut is still found whole (cut first, its first half would
/// show).
const REDACT_WINDOW: usize = 4096;

/// What came back for a failed request: its status, header fields and body
/// (as captured: the body is kept for a 4xx/5xx or a step with checks).
pub(super) struct Answered<'a> {
    pub(super) status: u16,
    pub(super) pairs: &'a [(&'a str, &'a [u8])],
    pub(super) body: &'a [u8],
}

impl Worker {
    /// Whether a failure of `kind` in `step` would be kept: asked before a
    /// protocol gathers what a sample needs (HTTP/1.1 parses the head again,
    /// HTTP/2 lists its fields), so that a failure past the first few costs
    /// that short search and nothing more.
    pub(super) fn wants_sample(&self, step: &StepPlan, kind: FailureKind) -> bool {
        self.samples.borrow().wants((step.index, kind))
    }

    /// Keep `step`'s failure of `kind`, ended at `at`, as a sample if its
    /// key wants one: `check`, the failed check as the checks said it;
    /// `answer`, what came back, if anything did.
    pub(super) fn sample(
        &self,
        step: &StepPlan,
        kind: FailureKind,
        at: Instant,
        check: Option<String>,
        answer: Option<Answered<'_>>,
    ) {
        if !self.wants_sample(step, kind) {
            return;
        }
        let key = (step.index, kind);
        let secrets = self.shared.work.secrets(&self.vars.borrow());
        let (status, check, body) = match answer {
            Some(a) => {
                // A status the step's `expect` did not list: say what it expected.
                let check = check.or_else(|| {
                    step.step.expect.as_ref().and_then(|e| e.check_from(a.status, a.pairs, &ParsedBody::new(a.body)))
                });
                (Some(a.status), check, body_head(a.body, &secrets))
            }
            None => (None, check, None),
        };
        let check = check.map(|c| printable::escape(&redact_values(&c, &secrets)).into_owned());
        // To the millisecond: the sample's time places it, it measures nothing.
        let t = (at.saturating_duration_since(self.start).as_secs_f64() * 1e3).round() / 1e3;
        self.samples.borrow_mut().keep(key, FailureSample { t, status, check, body });
    }
}

/// The first [`BODY_HEAD_BYTES`] of `body` as results show it: secrets
/// redacted, control characters escaped, `…` when there was more; none for
/// an empty body.
pub(super) fn body_head(body: &[u8], secrets: &[String]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let window = String::from_utf8_lossy(&body[..body.len().min(REDACT_WINDOW)]);
    let redacted = redact_values(&window, secrets);
    let escaped = printable::escape(&redacted);
    let mut head: String = String::new();
    for c in escaped.chars() {
        if head.len() + c.len_utf8() > BODY_HEAD_BYTES {
            head.push('…');
            return Some(head);
        }
        head.push(c);
    }
    if body.len() > REDACT_WINDOW {
        head.push('…');
    }
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #32: a body head is cut after redaction (a secret across the cut is
    /// still hidden), escaped, and marked when cut.
    #[test]
    fn a_body_head_is_redacted_escaped_and_cut() {
        let secrets = vec!["tok-0123456789".to_string()];
        let long = format!("{}tok-0123456789 and more", "x".repeat(BODY_HEAD_BYTES - 5));
        // (body, head)
        let cases: Vec<(Vec<u8>, Option<String>)> = vec![
            // nothing came: no head
            (b"".to_vec(), None),
            // a short JSON error, as is
            (br#"{"error":"qty must be a number"}"#.to_vec(), Some(r#"{"error":"qty must be a number"}"#.into())),
            // a control character, escaped
            (b"bad\x1b[2Jinput".to_vec(), Some("bad\\u{1b}[2Jinput".into())),
            // a secret across the cut: redacted first, then cut, never half shown
            (long.into_bytes(), Some(format!("{}<reda…", "x".repeat(BODY_HEAD_BYTES - 5)))),
        ];
        for (i, (body, want)) in cases.into_iter().enumerate() {
            let got = body_head(&body, &secrets);
            assert_eq!(got, want, "case {i}");
            if let Some(g) = got {
                assert!(!g.contains("tok-01"), "case {i}: no part of the secret");
            }
        }
    }
}
