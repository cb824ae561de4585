//! A target that is down, said at once (issue #32 want 6): a run against a port where nothing
//! listens used to run its whole length and then fail on its error rate. The rule: over the load's
//! first [`TargetDown::WINDOW`] seconds, requests ended and every one of them failed to connect
//! (refused, timed out, or another connect error) with no response at all: the target is down, and the
//! load stops there. One response, or one failure of another kind, and the target is up: the rule
//! says nothing for the rest of the run (a server that goes down later is the verdict's business, not
//! this rule's). It owns the rule; stopping the load and the exit code are the caller's.
//!
//! A connection that opened says the host is there: from then on the rule says nothing (a server
//! that accepts and answers late, or never, is the verdict's business). A host that drops
//! connections (a firewall, a listener whose queue is full) fails them only at their connect
//! timeout, 5 s by default: past the window. So a window in which requests waited to connect
//! and not one connection opened says it too; when nothing was even tried in it (a low rate), the
//! first seconds in which requests end decide. Before, such a target ran the whole run and exited
//! 1, as if it had been judged (a new user's review).
//!
//! ```text
//!   second     0            1          | 2 ...
//!   ended      5 refused    5 refused  | -> "target down: connection refused at 127.0.0.1:PORT"
//!   ended      5 refused    1 answered | -> up: nothing said, the run goes on
//!   opened     0            0          |
//!   waiting    5            10         | -> "target down: no connection opened at 127.0.0.1:PORT"
//!   opened     1            0          | -> up: a connection opened (a slow server's, or a
//!                                            listener's queue): nothing said
//! ```

use crate::analysis::verdict::CONNECT_FAILURES;
use crate::measure::Interval;

/// The rule's state over the first seconds of a load.
#[derive(Debug, Clone)]
pub struct TargetDown {
    address: String,
    seconds: u32,
    /// Connect failures so far, by kind (refused, timed out, other).
    failed: [u64; 3],
    up: bool,
    reason: Option<String>,
}

impl TargetDown {
    /// How many seconds from the load's start the rule judges (more when nothing ended in them).
    pub const WINDOW: u32 = 2;

    /// The rule for a target whose connections go to `address` (`127.0.0.1:8080`).
    pub fn new(address: impl Into<String>) -> TargetDown {
        TargetDown { address: address.into(), seconds: 0, failed: [0; 3], up: false, reason: None }
    }

    /// Why the load was stopped, once the rule found the target down.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// How many seconds the rule judged (when it found the target down: after how many).
    pub fn seconds(&self) -> u32 {
        self.seconds
    }

    /// Take the load's next second; the reason on the second that finds the target down (once).
    pub fn second(&mut self, iv: &Interval) -> Option<String> {
        if self.up || self.reason.is_some() {
            return None;
        }
        self.seconds += 1;
        let failures = iv.stats.failures.nonzero();
        let mut connect = 0;
        for (kind, n) in &failures {
            if let Some(i) = CONNECT_FAILURES.iter().position(|k| k == kind) {
                self.failed[i] += n;
                connect += n;
            }
        }
        let others = failures.iter().map(|(_, n)| n).sum::<u64>() - connect;
        // An answer, another failure, or a connection that opened: the host is there.
        if iv.stats.completed > 0 || others > 0 || iv.stats.connects > 0 {
            self.up = true;
            return None;
        }
        let total: u64 = self.failed.iter().sum();
        if self.seconds < Self::WINDOW {
            return None;
        }
        if total == 0 {
            // Nothing ended: down if requests wait to connect (none ever opened); with nothing
            // tried yet, the first seconds in which requests end decide.
            if iv.in_flight == 0 {
                return None;
            }
            let reason = format!(
                "target down: no connection opened at {} in the first {} s ({} request{} waiting to connect, none answered)",
                self.address,
                self.seconds,
                iv.in_flight,
                if iv.in_flight == 1 { "" } else { "s" }
            );
            self.reason = Some(reason.clone());
            return Some(reason);
        }
        // The kind most seen names it: a port where nothing listens refuses; a host that drops
        // packets times out.
        let (i, _) = self.failed.iter().enumerate().max_by_key(|(_, n)| **n).unwrap_or((0, &0));
        let what = ["connection refused", "connect timed out", "cannot connect"][i];
        let reason = format!(
            "target down: {what} at {} ({total} connection attempt{} in the first {} s, none answered)",
            self.address,
            if total == 1 { "" } else { "s" },
            self.seconds
        );
        self.reason = Some(reason.clone());
        Some(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::FailureKind;

    fn second(t: u32, refused: u64, timeouts: u64, completed: u64, http5xx: u64) -> Interval {
        let mut iv = Interval::empty(t);
        iv.stats.failures.add_n(FailureKind::ConnectRefused, refused);
        iv.stats.failures.add_n(FailureKind::ConnectTimeout, timeouts);
        iv.stats.failures.add_n(FailureKind::Http5xx, http5xx);
        iv.stats.completed = completed + http5xx;
        iv
    }

    /// Issue #32 want 6: which first seconds say the target is down, and when.
    #[test]
    fn down_only_when_every_attempt_of_the_first_seconds_failed_to_connect() {
        // (seconds as (refused, timeouts, answered, 5xx), the second (0-based) that says it, its words)
        // A second as (refused, timed out, answered, 5xx, in flight at its end, connections opened).
        type Seconds = &'static [(u64, u64, u64, u64, u64, u64)];
        let cases: &[(Seconds, Option<(usize, &str)>)] = &[
            // Refused twice: said on the second second, naming the address and the count.
            (
                &[(5, 0, 0, 0, 0, 0), (5, 0, 0, 0, 0, 0)],
                Some((1, "target down: connection refused at 127.0.0.1:9 (10 connection attempts in the first 2 s")),
            ),
            // One answer in the window: up, nothing said, even if refusals follow.
            (&[(5, 0, 0, 0, 0, 0), (4, 0, 1, 0, 0, 0), (5, 0, 0, 0, 0, 0)], None),
            // A 5xx is an answer: the server is there.
            (&[(5, 0, 0, 0, 0, 0), (0, 0, 0, 1, 0, 0)], None),
            // Up from the first second, down later: not this rule's to say.
            (&[(0, 0, 3, 0, 0, 0), (5, 0, 0, 0, 0, 0), (5, 0, 0, 0, 0, 0)], None),
            // Nothing tried in the window (a low rate): the first second in which requests end
            // decides, here refusals alone.
            (
                &[(0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0), (5, 0, 0, 0, 0, 0)],
                Some((2, "target down: connection refused at 127.0.0.1:9 (5 connection attempts in the first 3 s")),
            ),
            // A connection opened (a slow server's, or a listener's queue that took one) and the
            // rest time out at their connect timeout: up to this rule, whatever comes after.
            (&[(0, 0, 0, 0, 6, 1), (0, 0, 0, 0, 11, 0), (0, 5, 0, 0, 6, 0), (0, 5, 0, 0, 6, 0)], None),
            // ... also when the timeouts end within the window (a connect timeout of 1 s).
            (&[(0, 0, 0, 0, 5, 1), (0, 5, 0, 0, 5, 0)], None),
            // Timeouts: a host that drops packets is down too, said as such.
            (
                &[(0, 2, 0, 0, 0, 0), (1, 3, 0, 0, 0, 0)],
                Some((1, "target down: connect timed out at 127.0.0.1:9 (6 connection attempts")),
            ),
            // Requests waiting to connect and none opened (a listener that never accepts): said
            // at the window's end, though nothing ended.
            (
                &[(0, 0, 0, 0, 5, 0), (0, 0, 0, 0, 10, 0)],
                Some((1, "target down: no connection opened at 127.0.0.1:9 in the first 2 s (10 requests waiting")),
            ),
            // Waiting, but a connection opened (a server slow to answer): up to this rule.
            (&[(0, 0, 0, 0, 5, 1), (0, 0, 0, 0, 10, 0)], None),
            // A single attempt is enough in the window (a rate of 1/s over 2 s).
            (
                &[(1, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0)],
                Some((1, "target down: connection refused at 127.0.0.1:9 (1 connection attempt in")),
            ),
        ];
        for (seconds, want) in cases {
            let mut rule = TargetDown::new("127.0.0.1:9");
            let mut said = None;
            for (t, (r, to, a, e, waiting, opened)) in seconds.iter().enumerate() {
                let mut iv = second(t as u32, *r, *to, *a, *e);
                (iv.in_flight, iv.stats.connects) = (*waiting, *opened);
                if let Some(reason) = rule.second(&iv) {
                    assert!(said.is_none(), "said once");
                    said = Some((t, reason));
                }
            }
            match (want, &said) {
                (None, None) => {}
                (Some((t, words)), Some((got_t, reason))) => {
                    assert_eq!(t, got_t, "{seconds:?}");
                    assert!(reason.starts_with(words), "{seconds:?}: {reason}");
                    assert_eq!(rule.reason(), Some(reason.as_str()));
                }
                _ => panic!("{seconds:?}: want {want:?}, said {said:?}"),
            }
        }
    }
}
