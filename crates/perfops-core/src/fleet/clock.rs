//! An agent's clock offset from the coordinator's, NTP-style, from a few
//! round trips (RFC 5905's on-wire arithmetic, and its rule of trusting the
//! quickest exchanges).
//!
//! ```text
//!  coordinator  t0 ──Ping──┐                ┌──> t3
//!                           \              /
//!  agent                     └─> t1 ... t2 ┘        (each side reads its own wall clock)
//!
//!  offset = ((t1 - t0) + (t2 - t3)) / 2      the agent's clock minus the coordinator's
//!  rtt    = (t3 - t0) - (t2 - t1)            time on the wire, both ways
//! ```
//!
//! The offset is exact when the two legs take equally long; otherwise it is
//! off by at most half the round trip. Queues (a busy coordinator, a
//! retransmission) lengthen one leg, so the samples with the shortest round
//! trips are the honest ones: keep the quickest few, take their median.

/// One round trip: coordinator send, agent receive, agent reply, coordinator
/// receive, each in nanoseconds of its own side's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Coordinator's clock at sending.
    pub t0: i64,
    /// Agent's clock at receipt.
    pub t1: i64,
    /// Agent's clock at replying.
    pub t2: i64,
    /// Coordinator's clock at receipt of the reply.
    pub t3: i64,
}

impl Sample {
    /// The agent's clock minus the coordinator's, by this sample (ns).
    pub fn offset(&self) -> i64 {
        ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2
    }

    /// Time on the wire, both ways (ns).
    pub fn rtt(&self) -> i64 {
        (self.t3 - self.t0) - (self.t2 - self.t1)
    }
}

/// What the round trips say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The agent's clock minus the coordinator's (ns).
    pub offset_ns: i64,
    /// The shortest round trip seen (ns); the offset is good to half of it.
    pub rtt_ns: i64,
}

impl Estimate {
    /// The worst the offset can be, given the round trip: |offset| + rtt/2 (ns).
    pub fn bound_ns(&self) -> i64 {
        self.offset_ns.saturating_abs().saturating_add(self.rtt_ns / 2)
    }
}

/// How many of the quickest samples are kept.
pub const KEEP: usize = 3;

/// The offset from `samples`: the median offset of the [`KEEP`] quickest
/// round trips. Samples with a negative round trip (a clock stepped while
/// measuring) are ignored; `None` when none is left.
pub fn estimate(samples: &[Sample]) -> Option<Estimate> {
    let mut good: Vec<&Sample> = samples.iter().filter(|s| s.rtt() >= 0 && s.t3 >= s.t0).collect();
    good.sort_by_key(|s| s.rtt());
    good.truncate(KEEP);
    let rtt_ns = good.first()?.rtt();
    let mut offsets: Vec<i64> = good.iter().map(|s| s.offset()).collect();
    offsets.sort_unstable();
    Some(Estimate { offset_ns: offsets[offsets.len() / 2], rtt_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round trip with legs `up` and `down` (ns) to an agent whose clock is `offset` ahead,
    /// which takes `hold` to answer; sent at coordinator time `at`.
    fn trip(at: i64, offset: i64, up: i64, hold: i64, down: i64) -> Sample {
        let t1 = at + up + offset;
        Sample { t0: at, t1, t2: t1 + hold, t3: at + up + hold + down }
    }

    #[test]
    fn offsets_from_round_trips() {
        let ms = 1_000_000;
        // (samples, expected offset, expected rtt): each a situation the estimate must survive.
        let cases: Vec<(Vec<Sample>, i64, i64)> = vec![
            // Symmetric legs: the offset is exact, whatever the agent's own delay.
            (vec![trip(0, 25 * ms, ms, 5 * ms, ms)], 25 * ms, 2 * ms),
            // An agent behind the coordinator: a negative offset.
            (vec![trip(0, -40 * ms, ms, 0, ms)], -40 * ms, 2 * ms),
            // One slow, lopsided sample (a queue on the way up) among quick ones: ignored.
            (
                vec![
                    trip(0, 10 * ms, ms, 0, ms),
                    trip(100 * ms, 10 * ms, 80 * ms, 0, ms),
                    trip(200 * ms, 10 * ms, ms, 0, ms),
                    trip(300 * ms, 10 * ms, ms, 0, ms),
                ],
                10 * ms,
                2 * ms,
            ),
            // Quick but asymmetric samples disagree by a little: their median.
            (vec![trip(0, 0, 2 * ms, 0, 0), trip(10 * ms, 0, 0, 0, 2 * ms), trip(20 * ms, 0, ms, 0, ms)], 0, 2 * ms),
            // A clock stepped back mid-sample (negative round trip): not used.
            (vec![Sample { t0: 0, t1: 5, t2: 100 * ms, t3: 10 }, trip(0, 3 * ms, ms, 0, ms)], 3 * ms, 2 * ms),
        ];
        for (i, (samples, offset, rtt)) in cases.into_iter().enumerate() {
            let e = estimate(&samples).unwrap();
            assert_eq!((e.offset_ns, e.rtt_ns), (offset, rtt), "case {i}");
        }
        assert_eq!(estimate(&[]), None, "no samples, no estimate");
        assert_eq!(Estimate { offset_ns: -30, rtt_ns: 10 }.bound_ns(), 35);
    }
}
