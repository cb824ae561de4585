//! Open-model arrival schedules: a piecewise-linear rate curve, and the answer
//! to "when is arrival n due".
//!
//! Arrival `n` (counting from 0) is due at the time `t` where the number of
//! arrivals so far, the integral of the rate, reaches `n`:
//!
//! ```text
//!   rate                                  Λ(t) = ∫₀ᵗ rate(s) ds
//!    r1 |          ______                 due(n) = min { t : Λ(t) = n }
//!       |         /      |
//!    r0 |  ______/       |                constant segment:  τ = m / r
//!       | |      |       |                linear segment:    r0·τ + (r1-r0)/(2T)·τ² = m
//!       +-+------+-------+---> t            (m = n - Λ(segment start), τ = t - segment start)
//!         hold   ramp    hold
//! ```
//!
//! Due times are offsets from the start of the run, never a sum of sleeps
//! (wrk2's rule): the engine waits until `start + due(n)` and measures latency
//! from there, so a late generator shows up as latency instead of vanishing.

use std::sync::Arc;
use std::time::Duration;

use super::Rate;

/// One piece of the rate curve: linear from `from` to `to` over `duration`
/// (`from == to` is a constant rate, `0` a pause).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Length of this piece.
    pub duration: Duration,
    /// Rate at the start of the piece.
    pub from: Rate,
    /// Rate at the end of the piece.
    pub to: Rate,
}

/// A schedule that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// No segments, or all of zero length.
    #[error("the schedule is empty: give it at least one stage with a duration")]
    Empty,
    /// Every segment has rate 0: no arrival would ever be due.
    #[error("the schedule never sends anything: every stage has rate 0")]
    NoArrivals,
}

/// A validated open-model schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    segments: Vec<Segment>,
    /// Start offset of each segment, in seconds.
    starts_s: Vec<f64>,
    /// Λ at the start of each segment, plus Λ at the end as the last element.
    cumulative: Vec<f64>,
    total: u64,
    /// A replay's recorded due times (`replay.rs`); `None` for a rate curve.
    /// Then the segments are the recording's count in each second, so the
    /// target a second shows, Λ and re-plans read the curve as for any
    /// schedule, and only [`Schedule::due`] reads the offsets.
    recorded: Option<Arc<Recorded>>,
}

/// The due times of a recording: offsets in milliseconds from its start,
/// in order, played `speed` times as fast.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Recorded {
    pub(super) offsets_ms: Arc<[u32]>,
    pub(super) speed: f64,
}

impl Recorded {
    /// Arrival `n`'s due time in seconds from the start, at the speed. The one
    /// formula both the due time and the second it is counted in come from.
    #[inline]
    pub(super) fn due_s(&self, n: usize) -> Option<f64> {
        self.offsets_ms.get(n).map(|&ms| f64::from(ms) / (1000.0 * self.speed))
    }
}

impl Schedule {
    /// A constant `rate` for `duration`.
    pub fn constant(rate: Rate, duration: Duration) -> Result<Schedule, ScheduleError> {
        Schedule::new(vec![Segment { duration, from: rate, to: rate }])
    }

    /// Exactly `count` arrivals at a constant `rate` (`-n` with `-r`).
    pub fn count_at(rate: Rate, count: u64) -> Result<Schedule, ScheduleError> {
        if rate.as_f64() <= 0.0 || count == 0 {
            return Err(ScheduleError::NoArrivals);
        }
        let duration = Duration::from_secs_f64(count as f64 / rate.as_f64());
        let mut s = Schedule::constant(rate, duration)?;
        s.total = count;
        Ok(s)
    }

    /// A schedule from consecutive segments.
    pub fn new(segments: Vec<Segment>) -> Result<Schedule, ScheduleError> {
        let segments: Vec<Segment> = segments.into_iter().filter(|s| !s.duration.is_zero()).collect();
        if segments.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let mut starts_s = Vec::with_capacity(segments.len());
        let mut cumulative = Vec::with_capacity(segments.len() + 1);
        let (mut t, mut lambda) = (0.0, 0.0);
        for s in &segments {
            starts_s.push(t);
            cumulative.push(lambda);
            let d = s.duration.as_secs_f64();
            lambda += d * (s.from.as_f64() + s.to.as_f64()) / 2.0;
            t += d;
        }
        cumulative.push(lambda);
        if lambda <= 0.0 {
            return Err(ScheduleError::NoArrivals);
        }
        // Arrival n exists when due(n) < end, i.e. n < Λ(end). The epsilon keeps
        // 500/s x 3 s at 1500 arrivals despite floating-point dust.
        let total = (lambda - 1e-9).ceil().max(0.0) as u64;
        Ok(Schedule { segments, starts_s, cumulative, total, recorded: None })
    }

    /// A recording's arrivals at their offsets (milliseconds from its start,
    /// in order), `speed` times as fast (2: in half the time). Its rate curve
    /// is the count of arrivals due in each second (so a second's target is
    /// what the recording sent in it); its length runs to the end of the
    /// second of its last arrival.
    pub(super) fn recorded(offsets_ms: Arc<[u32]>, speed: f64) -> Result<Schedule, ScheduleError> {
        let recorded = Recorded { offsets_ms, speed };
        let Some(last) = recorded.offsets_ms.len().checked_sub(1).and_then(|n| recorded.due_s(n)) else {
            return Err(ScheduleError::NoArrivals);
        };
        let seconds = last.floor() as usize + 1;
        let mut counts = vec![0u32; seconds];
        for n in 0..recorded.offsets_ms.len() {
            let second = recorded.due_s(n).unwrap_or_default().floor() as usize;
            counts[second.min(seconds - 1)] += 1;
        }
        let segments = counts
            .into_iter()
            .map(|c| {
                let rate = Rate::per_second(f64::from(c)).unwrap_or(Rate::ZERO);
                Segment { duration: Duration::from_secs(1), from: rate, to: rate }
            })
            .collect();
        let mut schedule = Schedule::new(segments)?;
        schedule.total = recorded.offsets_ms.len() as u64;
        schedule.recorded = Some(Arc::new(recorded));
        Ok(schedule)
    }

    /// Whether its due times are a recording's (a replay), not a rate curve's.
    pub fn is_recorded(&self) -> bool {
        self.recorded.is_some()
    }

    /// The segments, as validated.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Length of the whole schedule.
    pub fn duration(&self) -> Duration {
        self.segments.iter().map(|s| s.duration).sum()
    }

    /// Number of arrivals in the whole schedule.
    pub fn total_arrivals(&self) -> u64 {
        self.total
    }

    /// When arrival `n` (from 0) is due, as an offset from the start; `None`
    /// past the end of the schedule.
    pub fn due(&self, n: u64) -> Option<Duration> {
        if n >= self.total {
            return None;
        }
        if let Some(r) = &self.recorded {
            return r.due_s(n as usize).map(Duration::from_secs_f64);
        }
        let n = n as f64;
        // The segment whose [Λ start, Λ end) holds n; flat (rate 0) segments have
        // an empty range and are skipped, so an arrival never lands in a pause.
        let i = self.cumulative[1..].partition_point(|&end| end <= n).min(self.segments.len() - 1);
        let seg = &self.segments[i];
        let m = n - self.cumulative[i];
        let (r0, r1) = (seg.from.as_f64(), seg.to.as_f64());
        let tau = if m <= 0.0 {
            0.0
        } else if r0 == r1 {
            m / r0
        } else {
            // r0·τ + a·τ² = m with a = (r1-r0)/2T; the root written as
            // 2m / (r0 + sqrt(r0² + 4am)) stays exact when a is tiny or r0 is 0.
            let a = (r1 - r0) / (2.0 * seg.duration.as_secs_f64());
            2.0 * m / (r0 + (r0 * r0 + 4.0 * a * m).max(0.0).sqrt())
        };
        let tau = tau.min(seg.duration.as_secs_f64());
        Some(Duration::from_secs_f64(self.starts_s[i] + tau))
    }

    /// Λ(t): arrivals due before `t` as a real number (the expected count).
    pub fn arrivals_before(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        let i = self.starts_s.partition_point(|&s| s <= t);
        if i == 0 {
            return 0.0;
        }
        let i = i - 1;
        let seg = &self.segments[i];
        let d = seg.duration.as_secs_f64();
        let tau = (t - self.starts_s[i]).min(d);
        let (r0, r1) = (seg.from.as_f64(), seg.to.as_f64());
        self.cumulative[i] + r0 * tau + (r1 - r0) * tau * tau / (2.0 * d)
    }

    /// The scheduled rate at offset `t` (0 past the end).
    pub fn rate_at(&self, t: Duration) -> Rate {
        let ts = t.as_secs_f64();
        let i = self.starts_s.partition_point(|&s| s <= ts);
        if i == 0 || t >= self.duration() {
            return Rate::ZERO;
        }
        let seg = &self.segments[i - 1];
        let frac = (ts - self.starts_s[i - 1]) / seg.duration.as_secs_f64();
        let (r0, r1) = (seg.from.as_f64(), seg.to.as_f64());
        Rate::per_second(r0 + (r1 - r0) * frac).unwrap_or(Rate::ZERO)
    }
}

/// A deterministic share of a schedule's arrivals: those with
/// `n % count == index` (k6's execution segments, in their simplest form).
/// Shards of shards compose, so machines and their workers split one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard's position, `0 <= index < count`.
    pub index: u32,
    /// How many shards share the schedule.
    pub count: u32,
}

impl Shard {
    /// The whole schedule.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Part `index` of `count` of this shard.
    pub fn split(self, index: u32, count: u32) -> Shard {
        assert!(index < count, "shard index {index} out of {count}");
        Shard { index: self.index + self.count * index, count: self.count * count }
    }

    /// The arrival numbers of this shard, in order.
    pub fn arrivals(self, total: u64) -> impl Iterator<Item = u64> {
        (u64::from(self.index)..total).step_by(self.count as usize)
    }

    /// This shard's share of `n` indivisible units (closed-model users,
    /// `max_requests`, `max_in_flight`): how many of the numbers `0..n` are
    /// its own (`u % count == index`), as with arrivals. The shares of all
    /// shards add up to `n`, the remainder going to the first shards (10
    /// users over 3 shards: 4 + 3 + 3), and they compose: a machine's share
    /// split over its workers is exactly the machine's, and its users' global
    /// numbers are those its arrivals would have.
    pub fn share(self, n: u64) -> u64 {
        let (i, c) = (u64::from(self.index), u64::from(self.count));
        if n > i { (n - i - 1) / c + 1 } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(v: f64) -> Rate {
        Rate::per_second(v).unwrap()
    }
    fn secs(v: f64) -> Duration {
        Duration::from_secs_f64(v)
    }
    fn close(a: Duration, b: f64) -> bool {
        (a.as_secs_f64() - b).abs() < 1e-6
    }

    #[test]
    fn constant_rate_due_times() {
        let s = Schedule::constant(r(500.0), secs(3.0)).unwrap();
        let cases = [
            (0, Some(0.0)),      // first arrival at the start, not after one gap
            (1, Some(0.002)),    // 1/500 s apart
            (250, Some(0.5)),    //
            (1499, Some(2.998)), // the last one inside the 3 s
            (1500, None),        // 1500 would be due at 3.0 s: past the end
        ];
        for (n, want) in cases {
            match (s.due(n), want) {
                (Some(d), Some(w)) => assert!(close(d, w), "due({n}) = {d:?}, want {w}"),
                (None, None) => {}
                (got, want) => panic!("due({n}) = {got:?}, want {want:?}"),
            }
        }
        assert_eq!(s.total_arrivals(), 1500);
    }

    #[test]
    fn ramp_follows_the_integral_of_the_rate() {
        // 0 -> 100/s over 10 s: Λ(t) = 5 t², so arrival n is due at sqrt(n / 5).
        let s = Schedule::new(vec![Segment { duration: secs(10.0), from: r(0.0), to: r(100.0) }]).unwrap();
        assert_eq!(s.total_arrivals(), 500); // area of the triangle
        for n in [0u64, 1, 5, 20, 125, 499] {
            assert!(close(s.due(n).unwrap(), (n as f64 / 5.0).sqrt()), "n={n}");
        }
        // A ramp down mirrors it: 100 -> 0/s, Λ(t) = 100 t - 5 t².
        let down = Schedule::new(vec![Segment { duration: secs(10.0), from: r(100.0), to: r(0.0) }]).unwrap();
        let want = |n: f64| (100.0 - (10000.0 - 20.0 * n).sqrt()) / 10.0;
        for n in [0u64, 1, 250, 499] {
            assert!(close(down.due(n).unwrap(), want(n as f64)), "n={n}");
        }
    }

    #[test]
    fn stages_chain_and_pauses_hold_no_arrival() {
        let s = Schedule::new(vec![
            Segment { duration: secs(1.0), from: r(10.0), to: r(10.0) }, // arrivals 0..10
            Segment { duration: secs(2.0), from: r(0.0), to: r(0.0) },   // a pause
            Segment { duration: secs(1.0), from: r(20.0), to: r(20.0) }, // arrivals 10..30
        ])
        .unwrap();
        assert_eq!(s.total_arrivals(), 30);
        assert!(close(s.due(9).unwrap(), 0.9));
        assert!(close(s.due(10).unwrap(), 3.0)); // skips the pause entirely
        assert!(close(s.due(11).unwrap(), 3.05));
        assert_eq!(s.rate_at(secs(1.5)), Rate::ZERO);
        assert_eq!(s.rate_at(secs(3.5)).as_f64(), 20.0);
        assert!((s.arrivals_before(secs(3.5)) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn due_times_are_monotonic_across_a_stepped_ramp() {
        let s = Schedule::new(vec![
            Segment { duration: secs(5.0), from: r(50.0), to: r(50.0) },
            Segment { duration: secs(7.0), from: r(50.0), to: r(300.0) },
            Segment { duration: secs(3.0), from: r(300.0), to: r(10.0) },
        ])
        .unwrap();
        let mut last = Duration::ZERO;
        for n in 0..s.total_arrivals() {
            let d = s.due(n).unwrap();
            assert!(d >= last, "due({n}) went back in time");
            assert!(d < s.duration());
            last = d;
        }
    }

    #[test]
    fn count_at_sends_exactly_n() {
        let s = Schedule::count_at(r(300.0), 1000).unwrap();
        assert_eq!(s.total_arrivals(), 1000);
        assert!(s.due(999).is_some() && s.due(1000).is_none());
    }

    #[test]
    fn invalid_schedules() {
        assert_eq!(Schedule::new(vec![]), Err(ScheduleError::Empty));
        assert_eq!(Schedule::constant(r(0.0), secs(5.0)), Err(ScheduleError::NoArrivals));
        assert_eq!(Schedule::constant(r(10.0), Duration::ZERO), Err(ScheduleError::Empty));
    }

    #[test]
    fn shards_partition_arrivals_and_shares() {
        let whole: Vec<u64> = Shard::WHOLE.arrivals(20).collect();
        let mut union: Vec<u64> = Vec::new();
        for machine in 0..2 {
            for worker in 0..3 {
                union.extend(Shard::WHOLE.split(machine, 2).split(worker, 3).arrivals(20));
            }
        }
        union.sort_unstable();
        assert_eq!(union, whole, "every arrival once, across machines and workers");
        let shares: u64 = (0..3).map(|i| Shard::WHOLE.split(i, 3).share(50)).sum();
        assert_eq!(shares, 50);
        assert_eq!(Shard::WHOLE.split(0, 3).share(50), 17);
    }

    /// #13: units (users, requests, in-flight slots) divide exactly over
    /// machines and then workers, the remainder placed on the first shards.
    #[test]
    fn shares_of_units_are_exact_and_compose() {
        // (shard, units, share)
        let cases = [
            (Shard::WHOLE, 10, 10),                        // alone: everything
            (Shard::WHOLE.split(0, 3), 10, 4),             // 10 users over 3 machines: 4 + 3 + 3
            (Shard::WHOLE.split(1, 3), 10, 3),             //
            (Shard::WHOLE.split(2, 3), 10, 3),             //
            (Shard::WHOLE.split(2, 3), 2, 0),              // fewer units than shards: the last has none
            (Shard::WHOLE.split(1, 3).split(1, 2), 10, 1), // machine 1's users 1, 4, 7: worker 1 has 4
        ];
        for (i, (shard, n, want)) in cases.into_iter().enumerate() {
            assert_eq!(shard.share(n), want, "case {i}");
            assert_eq!(shard.share(n), shard.arrivals(n).count() as u64, "case {i}: as its arrivals");
        }
        for n in 0..40u64 {
            for machines in 1..5u32 {
                let mut total = 0;
                for m in 0..machines {
                    let machine = Shard::WHOLE.split(m, machines);
                    let workers: u64 = (0..3).map(|w| machine.split(w, 3).share(n)).sum();
                    assert_eq!(workers, machine.share(n), "{n} over {machines}: workers add up to their machine");
                    total += workers;
                }
                assert_eq!(total, n, "{n} over {machines} machines");
            }
        }
    }
}
