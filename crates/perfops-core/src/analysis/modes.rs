//! The modes of a latency distribution, and the one shape among them that names its cause:
//! a narrow mode a fixed timer quantum above the main one, the stall of Nagle's algorithm
//! meeting delayed ACK.
//!
//! ```text
//!   density on a log-time axis (bins 5% wide)
//!     │  █
//!     │ ███                                    █          base:    where unstalled requests sit
//!     │ ███                                   ███         stalled: base + one delayed-ACK timeout
//!     │█████                                  ███
//!     └──────────┬─────────┬─────────┬─────────┬────── latency
//!      0.3 ms   1 ms      10 ms    100 ms    200.3 ms
//!       └──────────── 200 ms: the stall quantum ───┘
//! ```
//!
//! A sender with Nagle's algorithm on holds a small second segment until the first is
//! acknowledged; a receiver that delays its ACK sends it only when its delayed-ACK timer fires
//! (Linux: 40 ms at least; Windows, macOS and older stacks: about 200 ms). Requests that hit the
//! pair wait one timeout, or a small multiple, so their latencies form a copy of the base mode
//! shifted by that quantum. Where *every* request hits it (a server writing headers and body in
//! two sends without `TCP_NODELAY`, to a client that sends its next request after the whole
//! response), there is no unstalled mode to be shifted from: the distribution is one narrow mode
//! a quantum above the time to first byte, since the first packet came at once and the second
//! waited.
//!
//! ```text
//!   every request stalled: the first byte on time, the rest one delayed ACK later
//!     │ ttfb                                    total
//!     │  █                                      █
//!     │ ███                                    ███
//!     └──────────┬─────────┬─────────┬─────────┬────── time
//!      0.1 ms   1 ms      10 ms    100 ms    44 ms
//!       └──────────── ~40 ms: the stall quantum ─┘
//! ```
//!
//! Queueing makes the same shapes (#11: 50 users on a pool of 10 showed "12% stalled ~120 ms"),
//! so a stall is never named where the requests in flight explain it: by Little's law a stage
//! had `L = throughput x mean service time` requests in flight on average, and a request that
//! queued behind the others waited at most `(L - 1) x base`, the others' service times one after
//! another. A gap that long or shorter may be a queue; only a longer one is a timer. The rule is
//! applied per stage (or per concurrency level of a sweep), where the in-flight count is one
//! figure: a whole run mixes levels whose modes are no stall of anyone's.
//!
//! This module owns finding modes in a [`Histogram`] and recognising those shapes; it does not
//! own measuring (the engine), nor advising (the report), and it cannot prove the cause: a
//! service with a 40 ms slow path looks the same. It is a signature to point at, named with its
//! evidence.

use std::time::Duration;

use serde::Serialize;

use crate::measure::Histogram;

/// A peak of the latency density, with its extent and how many samples it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mode {
    /// Where the density peaks.
    pub at: Duration,
    /// Lower end of the peak: where the density first falls below half its height (or the
    /// valley that bounds the mode, if that comes first).
    pub low: Duration,
    /// Upper end of the peak, likewise.
    pub high: Duration,
    /// Fraction of all samples in the mode's basin (from the valley below it to the valley
    /// above it), 0..=1.
    pub share: f64,
}

/// Quantized stalls: a narrow mode a whole number of delayed-ACK timeouts above the base mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stalls {
    /// The timeout that matched: 200 ms or 40 ms.
    pub quantum: Duration,
    /// How many timeouts the stalled mode sits above the base: 1..=3 for 200 ms, 1..=5 for 40 ms.
    pub multiple: u32,
    /// Where unstalled requests sit: the fastest mode of the service time with a substantial
    /// share; when every request stalled, the main mode of the time to first byte.
    pub base: Mode,
    /// The mode of the stalled requests (of the service time).
    pub stalled: Mode,
    /// Every request stalled (nearly: the stalled mode holds 80% or more) after its first byte.
    pub every: bool,
    /// Requests in flight on average, by Little's law: what queueing could have explained.
    pub in_flight: f64,
}

/// What a stage's (or a level's) stalls are judged from.
#[derive(Debug, Clone, Copy)]
pub struct StallInputs<'a> {
    /// Service time, from the actual send to the last byte.
    pub service: &'a Histogram,
    /// From the send to the first byte of the response, of the same requests as
    /// `service`; `None` when it holds others (a fast 503's first byte would
    /// pass for the base the successes stalled above): the "every request
    /// stalled" finding is then not made.
    pub ttfb: Option<&'a Histogram>,
    /// Requests answered per second over the stage.
    pub throughput: f64,
}

impl<'a> StallInputs<'a> {
    /// The answered successes of `stats`, `throughput` answered per second.
    pub fn answered(stats: &'a crate::measure::Stats, throughput: f64) -> Self {
        let ttfb = (stats.completed == stats.service_ok.len()).then_some(&stats.ttfb);
        StallInputs { service: &stats.service_ok, ttfb, throughput }
    }

    /// Little's law: requests in flight on average = throughput x mean time in the system.
    pub fn in_flight(&self) -> f64 {
        (self.throughput * self.service.mean_ms() / 1000.0).max(0.0)
    }
}

/// ln(1.05): each bin of the log-time axis is 5% wide, so a mode's position is known to a
/// few percent, well inside the ±15% that matching a quantum allows, while a bin at 0.3 ms
/// (15 µs wide) still gathers enough samples to be smooth.
const LN_BIN: f64 = 0.048_790_164_169_432;

/// Smoothing kernel over neighbouring bins: light, it turns a single bin into a 3-bin-wide
/// peak at half height, and removes the bin-to-bin noise of a few hundred samples.
const KERNEL: [f64; 5] = [1.0 / 9.0, 2.0 / 9.0, 3.0 / 9.0, 2.0 / 9.0, 1.0 / 9.0];

/// Two neighbouring peaks are one mode when the density between them stays above this
/// fraction of the smaller peak: a shoulder, not a separate population.
const MERGE_VALLEY: f64 = 0.5;

/// ...or when the dip between them is within what counting noise makes: two smoothed Poisson
/// counts of height h differ with a standard deviation of about 0.69·√h, so a dip of less than
/// 2·√h is within three of them.
const NOISE_DIP: f64 = 2.0;

/// Modes holding less than this fraction of the samples are not listed.
const MIN_SHARE: f64 = 0.01;

/// The base mode must hold at least this fraction: the unstalled requests are a population,
/// not a few cache hits ahead of it.
const BASE_SHARE: f64 = 0.10;

/// A stalled mode needs this many samples, whatever its share, to be more than chance.
const STALL_MIN_SAMPLES: f64 = 20.0;

/// A stalled mode is narrow: from half height to half height it spans at most this ratio.
/// A timer stall copies the base mode shifted by a constant, so on a log axis it is narrower
/// than the base; a slow path with its own variance is usually broader.
const STALL_MAX_WIDTH: f64 = 1.5;

/// How far below a whole number k of quanta the stall may be, relatively: a timer never fires
/// early, but the modes' peaks have the spread of the base.
const QUANTUM_EARLY: f64 = 0.10;

/// How far above k quanta, in quanta: timers fire on clock ticks (4 ms at HZ=250), and Linux
/// lengthens its delayed-ACK timeout from 40 ms as it sees the peer's pace; on loopback a
/// two-send server's responses took 44-52 ms (kernel 6.x, HZ=250).
const QUANTUM_LATE: f64 = 0.30;

/// Every request stalled when the stalled mode holds at least this share.
const EVERY_SHARE: f64 = 0.80;

/// Slack on the queueing bound `(in flight - 1) x base`: the base mode has its spread.
const QUEUE_SLACK: f64 = 0.15;

/// Quanta to try, in order of preference, with the largest multiple of each: 200 ms first,
/// since 200 ms is also 5 × 40 ms and the longer timer is the likelier reading of it.
const QUANTA: [(Duration, u32); 2] = [(Duration::from_millis(200), 3), (Duration::from_millis(40), 5)];

/// The modes of `h`: peaks of its density on a log-time axis, ordered by `at`, each holding at
/// least 1% of the samples. Empty for an empty histogram.
pub fn modes(h: &Histogram) -> Vec<Mode> {
    let raw = log_density(h);
    let total: f64 = raw.iter().sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let smooth = smoothed(&raw);
    let mut basins = basins(&smooth);
    merge_shallow(&mut basins, &smooth);
    basins
        .iter()
        .map(|b| (b, raw[b.start..b.end].iter().sum::<f64>() / total))
        .filter(|&(_, share)| share >= MIN_SHARE)
        .map(|(b, share)| describe(b, &smooth, share))
        .collect()
}

/// Quantized stalls in a stage's service time, if it shows them and queueing does not explain
/// them.
///
/// The rule: the *base* is the fastest mode of the service time holding at least 10% of the
/// samples (where unstalled requests sit). A *stalled* mode is a later one holding at least 1%
/// and 20 samples, narrow (at most 1.5x from half height to half height), whose distance above
/// the base is within -10% / +0.3 quantum of k x 200 ms (k = 1..=3), or else of k x 40 ms
/// (k = 1..=5). Of several, the one with the largest share is reported. When there is none and
/// one narrow mode holds 80% of the service times or more, the base is the main mode of the
/// time to first byte instead: every request stalled after its first byte. Either way, a gap
/// of at most `(in flight - 1) x base` (+15%) is not named: requests queued behind one
/// another that long (see the module docs). `None` for an empty histogram, a single broad
/// mode, or modes at any other distance.
pub fn quantized_stalls(i: &StallInputs<'_>) -> Option<Stalls> {
    let modes = modes(i.service);
    let samples = i.service.len() as f64;
    let in_flight = i.in_flight();
    let base = modes.iter().find(|m| m.share >= BASE_SHARE)?;
    let narrow = |m: &Mode| m.high.as_secs_f64() <= STALL_MAX_WIDTH * m.low.as_secs_f64();
    let mut found: Option<Stalls> = None;
    // Every mode listed holds at least MIN_SHARE already.
    for m in modes.iter().filter(|m| m.at > base.at) {
        if m.share * samples < STALL_MIN_SAMPLES || !narrow(m) {
            continue;
        }
        let gap = m.at - base.at;
        let Some((quantum, multiple)) = quantum_of(gap) else {
            continue;
        };
        if queued(base.at, gap, in_flight) {
            continue;
        }
        // Several candidates: the most populous is the stall; on a tie, the earlier one.
        if found.as_ref().is_none_or(|f| m.share > f.stalled.share) {
            found = Some(Stalls { quantum, multiple, base: base.clone(), stalled: m.clone(), every: false, in_flight });
        }
    }
    if found.is_some() {
        return found;
    }
    // Every request stalled: one narrow mode, a quantum above the first byte.
    let main = modes.iter().max_by(|a, b| a.share.total_cmp(&b.share))?;
    if main.share < EVERY_SHARE || !narrow(main) || samples < STALL_MIN_SAMPLES {
        return None;
    }
    let first = modes_of_first_byte(i.ttfb?)?;
    let gap = main.at.checked_sub(first.at)?;
    let (quantum, multiple) = quantum_of(gap)?;
    (!queued(first.at, gap, in_flight)).then(|| Stalls {
        quantum,
        multiple,
        base: first,
        stalled: main.clone(),
        every: true,
        in_flight,
    })
}

/// The fastest mode of the time to first byte holding a substantial share.
fn modes_of_first_byte(ttfb: &Histogram) -> Option<Mode> {
    modes(ttfb).into_iter().find(|m| m.share >= BASE_SHARE)
}

/// Could `in_flight` requests on average, each taking about `base` when not waiting, have made
/// a request wait `gap` behind the others? At most `(in_flight - 1) x base` (one at a time, the
/// narrowest server), with some slack for the base's spread.
fn queued(base: Duration, gap: Duration, in_flight: f64) -> bool {
    let ahead = (in_flight - 1.0).max(0.0);
    gap.as_secs_f64() <= ahead * base.as_secs_f64() * (1.0 + QUEUE_SLACK)
}

/// The quantum and multiple that `gap` is within tolerance of, preferring 200 ms.
fn quantum_of(gap: Duration) -> Option<(Duration, u32)> {
    let gap = gap.as_secs_f64();
    QUANTA.iter().find_map(|&(quantum, max_multiple)| {
        let q = quantum.as_secs_f64();
        (1..=max_multiple).find_map(|k| {
            let want = q * f64::from(k);
            (gap >= want * (1.0 - QUANTUM_EARLY) && gap <= want + QUANTUM_LATE * q).then_some((quantum, k))
        })
    })
}

/// Samples per log bin. Bin `i` spans [1.05^i, 1.05^(i+1)) µs.
///
/// Subtleness ahead: an HDR bucket below 2 ms is 1 µs wide, narrower than a 5% bin above 20 µs
/// but far wider than one below it (a 1 µs bucket at 3 µs spans 6 bins). Putting each count in
/// the bin of its bucket's value would leave most low bins empty and every filled one a "peak";
/// spreading it over the bucket's whole range, in proportion to log-overlap, keeps the density
/// honest at every scale.
fn log_density(h: &Histogram) -> Vec<f64> {
    let inner = h.inner();
    let mut bins: Vec<f64> = Vec::new();
    for (value, count) in h.recorded() {
        let lo = inner.lowest_equivalent(value).max(1) as f64;
        let hi = (inner.next_non_equivalent(value) as f64).max(lo + 1.0);
        let (a, b) = (lo.ln() / LN_BIN, hi.ln() / LN_BIN);
        let last = b.ceil() as usize;
        if bins.len() < last + 1 {
            bins.resize(last + 1, 0.0);
        }
        for (i, bin) in bins.iter_mut().enumerate().take(last).skip(a.floor() as usize) {
            let overlap = b.min(i as f64 + 1.0) - a.max(i as f64);
            if overlap > 0.0 {
                *bin += count as f64 * overlap / (b - a);
            }
        }
    }
    bins
}

fn smoothed(raw: &[f64]) -> Vec<f64> {
    let half = KERNEL.len() / 2;
    (0..raw.len())
        .map(|i| {
            KERNEL
                .iter()
                .enumerate()
                .filter_map(|(k, w)| (i + k).checked_sub(half).and_then(|j| raw.get(j)).map(|v| v * w))
                .sum()
        })
        .collect()
}

/// A peak and the bins that drain to it: `start..end`, bounded by the valleys either side.
#[derive(Debug, Clone, Copy)]
struct Basin {
    peak: usize,
    start: usize,
    end: usize,
}

/// One basin per local maximum of `s`, split at the lowest point between neighbouring peaks.
fn basins(s: &[f64]) -> Vec<Basin> {
    let mut peaks = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] > 0.0 && (i == 0 || s[i] > s[i - 1]) {
            // A flat top counts once, at its middle.
            let mut j = i;
            while j + 1 < s.len() && s[j + 1] == s[i] {
                j += 1;
            }
            if j + 1 == s.len() || s[j + 1] < s[i] {
                peaks.push((i + j) / 2);
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    let mut out: Vec<Basin> = Vec::with_capacity(peaks.len());
    for (k, &peak) in peaks.iter().enumerate() {
        let start = out.last().map_or(0, |b| b.end);
        let end = match peaks.get(k + 1) {
            Some(&next) => valley(s, peak, next),
            None => s.len(),
        };
        out.push(Basin { peak, start, end });
    }
    out
}

/// Index of the lowest point of `s` strictly after `from` and at or before `to` (the first one
/// when several are equally low).
fn valley(s: &[f64], from: usize, to: usize) -> usize {
    (from + 1..=to).min_by(|&a, &b| s[a].total_cmp(&s[b])).unwrap_or(to)
}

/// Merge neighbouring basins whose dividing dip is shallow (see [`MERGE_VALLEY`] and
/// [`NOISE_DIP`]), the shallowest first, until every dip left is a real valley.
fn merge_shallow(basins: &mut Vec<Basin>, s: &[f64]) {
    loop {
        let mut shallowest: Option<(usize, f64)> = None;
        for k in 0..basins.len().saturating_sub(1) {
            let (a, b) = (basins[k], basins[k + 1]);
            let smaller = s[a.peak].min(s[b.peak]);
            let low = s[a.peak..=b.peak].iter().copied().fold(f64::INFINITY, f64::min);
            // The dip relative to what would make it real: below 1 it is not.
            let threshold = ((1.0 - MERGE_VALLEY) * smaller).max(NOISE_DIP * smaller.sqrt());
            let depth = (smaller - low) / threshold;
            if depth < 1.0 && shallowest.is_none_or(|(_, d)| depth < d) {
                shallowest = Some((k, depth));
            }
        }
        let Some((k, _)) = shallowest else { return };
        let (a, b) = (basins[k], basins.remove(k + 1));
        let peak = if s[b.peak] > s[a.peak] { b.peak } else { a.peak };
        basins[k] = Basin { peak, start: a.start, end: b.end };
    }
}

/// The [`Mode`] of a basin: its peak refined between bins, and its half-height extent.
fn describe(b: &Basin, s: &[f64], share: f64) -> Mode {
    let p = b.peak;
    let top = s[p];
    // A parabola through the peak bin and its neighbours places the top between bin centres.
    let offset = match (p.checked_sub(1).map(|i| s[i]), s.get(p + 1)) {
        (Some(left), Some(&right)) if left - 2.0 * top + right < 0.0 => {
            (0.5 * (left - right) / (left - 2.0 * top + right)).clamp(-0.5, 0.5)
        }
        _ => 0.0,
    };
    let at = p as f64 + 0.5 + offset;

    // Walk out from the peak while the density stays at half height or more, then interpolate
    // the crossing between bin centres; a basin edge reached first bounds the extent.
    let half = top / 2.0;
    let mut j = p;
    while j > b.start && s[j - 1] >= half {
        j -= 1;
    }
    let low = if j > b.start { j as f64 + 0.5 - (s[j] - half) / (s[j] - s[j - 1]) } else { b.start as f64 };
    let mut k = p;
    while k + 1 < b.end && s[k + 1] >= half {
        k += 1;
    }
    let high = if k + 1 < b.end { k as f64 + 0.5 + (s[k] - half) / (s[k] - s[k + 1]) } else { b.end as f64 };

    let time = |bin: f64| Duration::from_nanos(((bin * LN_BIN).exp() * 1000.0).round() as u64);
    Mode { at: time(at), low: time(low.min(at)), high: time(high.max(at)), share }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A tiny deterministic generator (Knuth's MMIX LCG): test data with jitter, not a lone value.
    struct Lcg(u64);

    impl Lcg {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }

        /// Roughly standard normal (Irwin–Hall: twelve uniforms less six).
        fn normal(&mut self) -> f64 {
            (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
        }

        /// A latency around `median_ms`, log-normal with `spread` (0.1 ≈ ±10%): server
        /// latencies are skewed right.
        fn latency_ms(&mut self, median_ms: f64, spread: f64) -> f64 {
            median_ms * (spread * self.normal()).exp()
        }
    }

    fn record_ms(h: &mut Histogram, ms: f64) {
        h.record(Duration::from_secs_f64(ms / 1000.0));
    }

    /// `n` requests around `base_ms`, of which `stalled` of every 1000 wait `quantum_ms` more
    /// (plus up to one 4 ms timer tick): the base distribution copied and shifted.
    fn nagle(seed: u64, n: u32, base_ms: f64, spread: f64, stalled: u32, quantum_ms: f64) -> Histogram {
        let mut rng = Lcg(seed);
        let mut h = Histogram::new();
        for i in 0..n {
            let mut ms = rng.latency_ms(base_ms, spread);
            if i % 1000 < stalled {
                ms += quantum_ms + 4.0 * rng.uniform();
            }
            record_ms(&mut h, ms);
        }
        h
    }

    /// `n` requests around one median.
    fn single(seed: u64, n: u32, median_ms: f64, spread: f64) -> Histogram {
        nagle(seed, n, median_ms, spread, 0, 0.0)
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }

    #[test]
    fn modes_of_known_distributions() {
        let mut two = single(1, 7000, 1.0, 0.1);
        two.merge(&single(2, 3000, 10.0, 0.1));
        let mut outliers = single(3, 9950, 5.0, 0.1);
        outliers.merge(&single(4, 50, 300.0, 0.05));
        // (histogram, expected (at ms, share) per mode)
        let cases: [(Histogram, &[(f64, f64)]); 6] = [
            // Nothing recorded: no modes.
            (Histogram::new(), &[]),
            // One steady server at 20 ms.
            (single(6, 10_000, 20.0, 0.1), &[(20.0, 1.0)]),
            // A very fast one at 50 µs, where HDR buckets are 1 µs, i.e. 2% wide.
            (single(7, 10_000, 0.05, 0.1), &[(0.05, 1.0)]),
            // Cache hits at 1 ms and misses at 10 ms, 70/30.
            (two, &[(1.0, 0.7), (10.0, 0.3)]),
            // 0.5% outliers near 300 ms are not a mode.
            (outliers, &[(5.0, 0.995)]),
            // Few samples still make one mode, not one per sample.
            (single(8, 100, 3.0, 0.2), &[(3.0, 1.0)]),
        ];
        for (h, want) in cases {
            let got = modes(&h);
            assert_eq!(got.len(), want.len(), "{want:?}: {got:#?}");
            for (m, &(at, share)) in got.iter().zip(want) {
                assert!((ms(m.at) - at).abs() <= 0.06 * at, "{want:?}: {got:#?}");
                assert!((m.share - share).abs() <= 0.03, "{want:?}: {got:#?}");
                assert!(m.low <= m.at && m.at <= m.high, "{m:?}");
            }
        }
    }

    #[test]
    fn a_smear_is_one_broad_mode() {
        // Uniform over 1..400 ms, from a few hundred samples to many: on a log axis the density
        // rises toward 400 ms, so one mode near the top, wider than any stall; the sparse
        // bottom's noise makes no mode of its own.
        for (seed, n) in [(5, 300), (6, 3000), (7, 30_000)] {
            let mut smear = Histogram::new();
            let mut rng = Lcg(seed);
            for _ in 0..n {
                record_ms(&mut smear, 1.0 + 399.0 * rng.uniform());
            }
            let got = modes(&smear);
            assert_eq!(got.len(), 1, "{n}: {got:#?}");
            assert!(ms(got[0].at) > 300.0 && got[0].share > 0.999, "{n}: {got:#?}");
            // Half height is at 200 ms in theory (the log-density grows like the latency).
            assert!(got[0].high.as_secs_f64() > STALL_MAX_WIDTH * got[0].low.as_secs_f64(), "{n}: {got:#?}");
        }
    }

    #[test]
    fn a_jittered_mode_has_its_width() {
        // ±10% log-normal: half height at about e^(±1.18·0.1), i.e. 0.89..1.12 of the median,
        // widened a little by the bins and the smoothing.
        let m = &modes(&single(9, 20_000, 10.0, 0.1))[0];
        assert!(ms(m.low) > 8.0 && ms(m.low) < 9.2, "{m:?}");
        assert!(ms(m.high) > 10.8 && ms(m.high) < 12.5, "{m:?}");
    }

    /// `service` judged with `ttfb` at `in_flight` requests in flight on average (the
    /// throughput Little's law needs for it).
    fn judged(service: &Histogram, ttfb: &Histogram, in_flight: f64) -> Option<Stalls> {
        let throughput = in_flight / (service.mean_ms() / 1000.0).max(1e-9);
        let got = quantized_stalls(&StallInputs { service, ttfb: Some(ttfb), throughput });
        if let Some(s) = &got {
            assert!((s.in_flight - in_flight).abs() < 1e-6 * in_flight.max(1.0), "{s:?}");
        }
        got
    }

    #[test]
    fn quantized_stalls_table() {
        let mut smear = Histogram::new();
        let mut rng = Lcg(10);
        for _ in 0..10_000 {
            record_ms(&mut smear, 1.0 + 399.0 * rng.uniform());
        }
        let mut broad = single(11, 8000, 2.0, 0.1);
        broad.merge(&single(12, 2000, 202.0, 0.35));
        let mut few = single(13, 5000, 1.0, 0.1);
        few.merge(&single(14, 10, 201.0, 0.01));
        let mut cache_hits = single(15, 500, 0.1, 0.1);
        cache_hits.merge(&nagle(16, 9500, 5.0, 0.05, 100, 40.0));
        let fast = single(40, 10_000, 0.1, 0.1);
        // (service time, time to first byte or None for the same, requests in flight,
        //  expected (quantum ms, multiple, every request), or None)
        type Case = (Histogram, Option<Histogram>, f64, Option<(u64, u32, bool)>);
        let cases: [Case; 26] = [
            // 2/3 at ~0.3 ms, 1/3 a 200 ms delayed ACK later: the classic.
            (nagle(20, 9000, 0.3, 0.1, 333, 200.0), None, 1.0, Some((200, 1, false))),
            // Base 5 ms, 10% at ~45 ms: Linux's 40 ms minimum delayed ACK.
            (nagle(21, 10_000, 5.0, 0.1, 100, 40.0), None, 1.0, Some((40, 1, false))),
            // Two Linux timeouts: 80 ms above a 0.5 ms base.
            (nagle(22, 10_000, 0.5, 0.1, 150, 80.0), None, 1.0, Some((40, 2, false))),
            // Two 200 ms timeouts above a 1 ms base.
            (nagle(23, 10_000, 1.0, 0.1, 200, 400.0), None, 1.0, Some((200, 2, false))),
            // Most requests stall: the 30% unstalled still make the base.
            (nagle(24, 10_000, 2.0, 0.1, 700, 200.0), None, 1.0, Some((200, 1, false))),
            // A few very fast cache hits (5%) are not the base: the 5 ms mode is.
            (cache_hits, None, 1.0, Some((40, 1, false))),
            // A slow but steady server at 20 ms, 40 ms or 200 ms: one mode, no stall.
            (single(25, 10_000, 20.0, 0.1), None, 1.0, None),
            (single(26, 10_000, 40.0, 0.1), None, 1.0, None),
            (single(27, 10_000, 200.0, 0.1), None, 1.0, None),
            // A broad smear, uniform over 1..400 ms.
            (smear, None, 1.0, None),
            // Nothing recorded.
            (Histogram::new(), None, 1.0, None),
            // A second mode 60 ms up is no multiple of either timeout.
            (nagle(28, 10_000, 1.0, 0.1, 200, 60.0), None, 1.0, None),
            // A second mode ~200 ms up but broad (a slow path with its own variance).
            (broad, None, 1.0, None),
            // A narrow mode 200 ms up, but of 10 samples: chance, not a pattern.
            (few, None, 1.0, None),
            // A 44 ms pool of ten past capacity: half the requests queue behind one
            // other (~87 ms). 43 ms late is one more service time, not a timer.
            (nagle(29, 10_000, 44.0, 0.03, 500, 41.0), None, 12.0, None),
            // The README's demo past capacity: a 52 ms pool, 60% of the requests
            // ~42-44 ms up, waiting out the rest of another's service time.
            (nagle(31, 10_000, 52.0, 0.02, 600, 40.0), None, 14.0, None),
            // #11: the same shape with one request in flight cannot be a queue: a timer.
            (nagle(31, 10_000, 52.0, 0.02, 600, 40.0), None, 1.0, Some((40, 1, false))),
            // #11: 50 users on 10 slots, "12% stalled ~120 ms": a queue, not three timeouts...
            (nagle(32, 10_000, 100.0, 0.03, 120, 120.0), None, 50.0, None),
            // ...which it would be with nobody to queue behind.
            (nagle(32, 10_000, 100.0, 0.03, 120, 120.0), None, 1.0, Some((40, 3, false))),
            // #11: every request stalled ~44 ms after a first byte at 0.1 ms (two sends).
            (single(33, 5000, 44.0, 0.03), Some(fast.clone()), 1.0, Some((40, 1, true))),
            // ...on 10 connections at once: still no queue (9 x 0.1 ms is not 44 ms).
            (single(34, 5000, 46.0, 0.03), Some(fast.clone()), 10.0, Some((40, 1, true))),
            // ...and elsewhere than Linux, every request ~200 ms late.
            (single(35, 5000, 201.0, 0.02), Some(fast.clone()), 1.0, Some((200, 1, true))),
            // A handler that takes 44 ms: the first byte comes as late as the last.
            (single(36, 5000, 44.0, 0.03), Some(single(37, 5000, 43.9, 0.03)), 1.0, None),
            // 40 users on 10 slots of 50 ms: every request at ~200 ms, all of it before
            // the first byte: a queue.
            (single(38, 5000, 200.0, 0.02), Some(single(39, 5000, 199.8, 0.02)), 40.0, None),
            // Every request ~44 ms after its first byte but spread wide: no timer's shape.
            (single(41, 5000, 44.0, 0.25), Some(fast.clone()), 1.0, None),
            // A first byte 30 ms before the last: not a delayed ACK's distance.
            (single(42, 5000, 30.3, 0.02), Some(fast), 1.0, None),
        ];
        for (i, (h, ttfb, in_flight, want)) in cases.into_iter().enumerate() {
            let ttfb = ttfb.unwrap_or_else(|| h.clone());
            let got = judged(&h, &ttfb, in_flight);
            let summary = got.as_ref().map(|s| (s.quantum.as_millis() as u64, s.multiple, s.every));
            assert_eq!(summary, want, "case {i}: {got:#?}\nmodes: {:#?}", modes(&h));
        }
    }

    #[test]
    fn stalls_report_their_modes() {
        let h = nagle(30, 9000, 0.3, 0.1, 333, 200.0);
        let s = judged(&h, &h, 1.3).unwrap();
        assert!((ms(s.base.at) - 0.3).abs() < 0.02, "{s:#?}");
        assert!((ms(s.stalled.at) - 202.3).abs() < 6.0, "{s:#?}");
        assert!((s.base.share - 0.667).abs() < 0.02 && (s.stalled.share - 0.333).abs() < 0.02, "{s:#?}");
        assert!(!s.every && (s.in_flight - 1.3).abs() < 1e-6, "{s:#?}");
        // Every request: the base is where the first byte came.
        let every = judged(&single(43, 5000, 44.0, 0.03), &single(44, 5000, 0.1, 0.1), 1.0).unwrap();
        assert!(every.every && (ms(every.base.at) - 0.1).abs() < 0.01, "{every:#?}");
        assert!((ms(every.stalled.at) - 44.0).abs() < 1.5 && every.stalled.share > 0.99, "{every:#?}");
    }

    proptest! {
        #[test]
        fn any_histogram_gives_ordered_modes_without_panicking(
            values in prop::collection::vec((1u64..5_000_000_000, 1u64..1000), 0..60),
        ) {
            let mut h = Histogram::new();
            for (us, count) in values {
                h.record_us(us, count);
            }
            let got = modes(&h);
            let mut total = 0.0;
            for pair in got.windows(2) {
                prop_assert!(pair[0].at < pair[1].at, "{:?}", got);
            }
            for m in &got {
                prop_assert!(m.share >= MIN_SHARE && m.share <= 1.0 + 1e-9, "{:?}", m);
                prop_assert!(m.low <= m.at && m.at <= m.high, "{:?}", m);
                total += m.share;
            }
            prop_assert!(total <= 1.0 + 1e-9);
            let _ = quantized_stalls(&StallInputs { service: &h, ttfb: Some(&h), throughput: 10.0 });
        }
    }
}
