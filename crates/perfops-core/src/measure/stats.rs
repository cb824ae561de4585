//! Statistics of a span of a run (one second, one stage, the whole run), as one
//! worker or many measured them.

use super::{FailureCounts, FailureKind, Histogram};

/// Counters and histograms for a span of a run. Merging is field-wise addition.
///
/// Definitions (one request = one arrival of the open model, or one loop of a
/// closed-model user):
/// - `sent`: requests started; `completed`: responses received (any status);
/// - `arrivals_answered`: arrivals whose first request was answered (any
///   status), counted when that answer came: what the server was asked for
///   at the open model's rate. The flow's later steps follow the server
///   (each due when the one before ended, plus its pause) and may end a whole
///   flow's duration later, in another stage's seconds (#32); they are judged
///   by the latency and error lines. `iterations`: flows whose last step was
///   answered (completed flows). For a one-step flow the two are equal;
///   `failures`: by kind, including responses that were 4xx/5xx;
/// - `dropped`: open-model arrivals not sent because `max_in_flight` was reached:
///   the generator, not the server, was the limit;
/// - `latency`: from the intended start (the due time) to the end of the
///   request: its response's last byte, or the moment it failed; `service`:
///   from the actual send to the same end. The send is on a ready connection:
///   a new connection's connect and TLS handshake precede it (they are
///   `connect` and `tls`). So the two differ when the generator was late or
///   had to connect (open model); in a closed loop, where a request is due
///   when it is sent, they are equal;
/// - every request that ended counts in `latency`, a failure at the time it
///   took to fail (a connect timeout its 2 s, a refused connection its few
///   µs), as k6 and JMeter count; in `service` too if it was sent (a refused
///   connection never was). `latency_ok` and `service_ok` hold the
///   successes alone (see docs/coordinated-omission.md, "Failed requests");
/// - `connect`, `tls`: per new connection; `ttfb`: from the request written to
///   the first response byte ("waiting" in ab's words).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Requests started.
    pub sent: u64,
    /// Arrivals (flows) whose last step was answered, whatever the status:
    /// completed flows.
    pub iterations: u64,
    /// Arrivals whose first request was answered, whatever the status: the
    /// achieved rate, comparable with a target in arrivals per second (#32).
    pub arrivals_answered: u64,
    /// Responses received, whatever their status.
    pub completed: u64,
    /// Open-model arrivals dropped at the `max_in_flight` cap.
    pub dropped: u64,
    /// Failures by kind.
    pub failures: FailureCounts,
    /// Response bytes read (head and body).
    pub bytes_in: u64,
    /// Request bytes written.
    pub bytes_out: u64,
    /// Connections opened.
    pub connects: u64,
    /// HTTP/2: connections the server sent away (`GOAWAY`), replaced by new ones.
    pub goaways: u64,
    /// HTTP/2: requests that found every stream of every connection they
    /// may use busy (the `streams` per connection, or fewer if the server's
    /// SETTINGS said so) and waited for one. The wait is in their latency,
    /// not their service time.
    pub stream_waits: u64,
    /// Intended start to the end of every request that ended, failures included.
    pub latency: Histogram,
    /// Actual send (on a ready connection) to the end, for every request sent.
    pub service: Histogram,
    /// `latency` of the successes alone.
    pub latency_ok: Histogram,
    /// `service` of the successes alone.
    pub service_ok: Histogram,
    /// TCP connect time of new connections.
    pub connect: Histogram,
    /// TLS handshake time of new connections.
    pub tls: Histogram,
    /// Request written to first response byte.
    pub ttfb: Histogram,
}

impl Stats {
    /// Add everything of `other` to `self`. Associative and commutative.
    pub fn merge(&mut self, other: &Stats) {
        self.sent += other.sent;
        self.iterations += other.iterations;
        self.arrivals_answered += other.arrivals_answered;
        self.completed += other.completed;
        self.dropped += other.dropped;
        self.failures += &other.failures;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.connects += other.connects;
        self.goaways += other.goaways;
        self.stream_waits += other.stream_waits;
        self.latency.merge(&other.latency);
        self.service.merge(&other.service);
        self.latency_ok.merge(&other.latency_ok);
        self.service_ok.merge(&other.service_ok);
        self.connect.merge(&other.connect);
        self.tls.merge(&other.tls);
        self.ttfb.merge(&other.ttfb);
    }

    /// Empty it, keeping the histograms' memory: what a fresh `Stats` is,
    /// without the ~1.3 MB of new histograms (#12: the soak's RSS moved by
    /// 4 MiB within each second while new ones were made every second).
    pub fn clear(&mut self) {
        // Destructured, so that a new field cannot be forgotten here.
        let Stats {
            sent,
            iterations,
            arrivals_answered,
            completed,
            dropped,
            failures,
            bytes_in,
            bytes_out,
            connects,
            goaways,
            stream_waits,
            latency,
            service,
            latency_ok,
            service_ok,
            connect,
            tls,
            ttfb,
        } = self;
        for n in [
            sent,
            iterations,
            arrivals_answered,
            completed,
            dropped,
            bytes_in,
            bytes_out,
            connects,
            goaways,
            stream_waits,
        ] {
            *n = 0;
        }
        *failures = FailureCounts::default();
        for h in [latency, service, latency_ok, service_ok, connect, tls, ttfb] {
            h.clear();
        }
    }

    /// Requests that got a response and no failure.
    pub fn succeeded(&self) -> u64 {
        let with_response: u64 =
            FailureKind::ALL.into_iter().filter(|k| k.has_response()).map(|k| self.failures[k]).sum();
        self.completed.saturating_sub(with_response)
    }

    /// Failures as a share of finished requests (succeeded + failed), 0..=1.
    pub fn error_ratio(&self) -> f64 {
        let failed = self.failures.total();
        let finished = self.succeeded() + failed;
        if finished == 0 { 0.0 } else { failed as f64 / finished as f64 }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn stats_from(values: &[(u16, u8)]) -> Stats {
        let mut s = Stats::default();
        for &(us, kind) in values {
            s.sent += 1;
            let kind = FailureKind::ALL[kind as usize % FailureKind::ALL.len()];
            let (latency, service) = (Duration::from_micros(u64::from(us) * 7), Duration::from_micros(u64::from(us)));
            let failed = us % 5 == 0;
            if kind.has_response() || us % 3 == 0 {
                s.completed += 1;
                s.bytes_in += u64::from(us);
            }
            s.latency.record(latency);
            s.service.record(service);
            if failed {
                s.failures.add(kind);
            } else {
                s.latency_ok.record(latency);
                s.service_ok.record(service);
            }
            s.dropped += u64::from(us % 2);
            s.iterations += u64::from(us % 7 == 0);
            s.arrivals_answered += u64::from(us % 3 == 0);
            s.goaways += u64::from(us % 11 == 0);
            s.stream_waits += u64::from(us % 13 == 0);
        }
        s
    }

    fn merged(parts: &[&Stats]) -> Stats {
        let mut out = Stats::default();
        for p in parts {
            out.merge(p);
        }
        out
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_order_free(
            a in prop::collection::vec((1u16..60000, 0u8..10), 0..40),
            b in prop::collection::vec((1u16..60000, 0u8..10), 0..40),
            c in prop::collection::vec((1u16..60000, 0u8..10), 0..40),
        ) {
            let (a, b, c) = (stats_from(&a), stats_from(&b), stats_from(&c));
            let mut ab = a.clone();
            ab.merge(&b);
            let mut bc = b.clone();
            bc.merge(&c);
            let left = merged(&[&ab, &c]);   // (a + b) + c
            let right = merged(&[&a, &bc]);  // a + (b + c)
            prop_assert_eq!(&left, &right);
            prop_assert_eq!(&left, &merged(&[&c, &b, &a]));
            prop_assert_eq!(&left, &merged(&[&b, &a, &c]));
            prop_assert_eq!(left.latency.len(), a.latency.len() + b.latency.len() + c.latency.len());
            prop_assert_eq!(left.latency_ok.len(), a.latency_ok.len() + b.latency_ok.len() + c.latency_ok.len());
        }
    }

    /// A cleared `Stats` is a fresh one, whatever it held.
    #[test]
    fn clear_makes_it_new() {
        let mut s = stats_from(&[(120, 1), (35_000, 4), (7, 9), (65_000, 0)]);
        s.connect.record(Duration::from_micros(80));
        s.tls.record(Duration::from_micros(900));
        s.ttfb.record(Duration::from_micros(300));
        s.bytes_out = 77;
        s.connects = 2;
        s.arrivals_answered = 5;
        s.clear();
        assert_eq!(s, Stats::default());
    }

    #[test]
    fn succeeded_excludes_error_responses() {
        let mut s = Stats { completed: 10, ..Stats::default() };
        s.failures.add_n(FailureKind::Http5xx, 2); // two of the ten responses were 5xx
        s.failures.add_n(FailureKind::Timeout, 3); // three more never answered
        assert_eq!(s.succeeded(), 8);
        assert!((s.error_ratio() - 5.0 / 13.0).abs() < 1e-12);
    }
}
