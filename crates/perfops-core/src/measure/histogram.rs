//! A latency histogram: HdrHistogram with microsecond units, 3 significant
//! digits, from 1 µs to one hour. Values past the range are clamped to it (and
//! stay visible as the maximum), never lost.

use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Highest trackable value, in microseconds (one hour).
const MAX_US: u64 = 3_600_000_000;

/// An HDR histogram of durations, recorded in microseconds.
#[derive(Debug, Clone)]
pub struct Histogram(hdrhistogram::Histogram<u64>);

/// The usual figures of a histogram, in milliseconds. A figure missing when
/// read back (a hand-made or older file) reads as 0, as an empty histogram's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct HistogramSummary {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Largest value.
    pub max: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        // Bounds are constants that hdrhistogram accepts; this cannot fail.
        Histogram(hdrhistogram::Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"))
    }

    /// Record one duration.
    #[inline]
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_US);
        // In range by the clamp above, so this never errs.
        let _ = self.0.record(us);
    }

    /// Record one count (a histogram of [`Unit::Count`](super::Unit)):
    /// 0 is a value as any other, unlike a duration's floor of 1 µs.
    #[inline]
    pub fn record_count(&mut self, n: u64) {
        let _ = self.0.record(n.min(MAX_US));
    }

    /// Record one value given in microseconds.
    pub fn record_us(&mut self, us: u64, count: u64) {
        let _ = self.0.record_n(us.clamp(1, MAX_US), count);
    }

    /// Empty it, keeping its memory (a worker reuses its histograms every
    /// second instead of allocating new ones: see the engine's collector).
    pub fn clear(&mut self) {
        // Most histograms of most seconds hold nothing (a stream's, in a
        // run that streams nothing): no need to zero their ~190 KB.
        if !self.0.is_empty() {
            self.0.reset();
        }
    }

    /// Add every value of `other` (same bounds: never fails).
    pub fn merge(&mut self, other: &Histogram) {
        if other.is_empty() {
            return;
        }
        let _ = self.0.add(&other.0);
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value at quantile `q` (0..=1).
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.0.value_at_quantile(q))
    }

    /// Largest value.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.0.max())
    }

    /// Smallest value.
    pub fn min(&self) -> Duration {
        Duration::from_micros(self.0.min())
    }

    /// Mean, in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        self.0.mean() / 1000.0
    }

    /// Standard deviation, in milliseconds.
    pub fn stdev_ms(&self) -> f64 {
        self.0.stdev() / 1000.0
    }

    /// Number of values at or below `d`.
    pub fn count_at_or_below(&self, d: Duration) -> u64 {
        self.0.count_between(0, d.as_micros() as u64)
    }

    /// Bucket counts (value in µs, count) with values, for spectra and diagnostics.
    pub fn recorded(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value()))
    }

    /// The usual figures in milliseconds (all zero when empty).
    pub fn summary(&self) -> HistogramSummary {
        if self.is_empty() {
            return HistogramSummary::default();
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        HistogramSummary {
            count: self.len(),
            min: ms(self.min()),
            mean: self.mean_ms(),
            stdev: self.stdev_ms(),
            p50: ms(self.quantile(0.5)),
            p90: ms(self.quantile(0.9)),
            p95: ms(self.quantile(0.95)),
            p99: ms(self.quantile(0.99)),
            p99_9: ms(self.quantile(0.999)),
            max: ms(self.max()),
        }
    }

    /// The usual figures in the histogram's own unit: ms for durations
    /// ([`Histogram::summary`]), the values themselves for counts.
    pub fn summary_in(&self, unit: super::Unit) -> HistogramSummary {
        let s = self.summary();
        match unit {
            super::Unit::Micros => s,
            // A count n was recorded as n "µs", which `summary` gave as n / 1000 ms.
            super::Unit::Count => HistogramSummary {
                count: s.count,
                min: s.min * 1000.0,
                mean: s.mean * 1000.0,
                stdev: s.stdev * 1000.0,
                p50: s.p50 * 1000.0,
                p90: s.p90 * 1000.0,
                p95: s.p95 * 1000.0,
                p99: s.p99 * 1000.0,
                p99_9: s.p99_9 * 1000.0,
                max: s.max * 1000.0,
            },
        }
    }

    /// Add every value of `other`, a histogram read back from a log (any
    /// bounds): `false` if a value did not fit this one's range, which a
    /// histogram that perfops wrote never has.
    pub fn merge_hdr(&mut self, other: &hdrhistogram::Histogram<u64>) -> bool {
        self.0.add(other).is_ok()
    }

    /// The bytes its counts take (the bounds fix them: ~190 KB), its memory but a few words.
    pub fn heap_bytes(&self) -> usize {
        self.0.distinct_values() * std::mem::size_of::<u64>()
    }

    /// The underlying HdrHistogram, for serialisation.
    pub fn inner(&self) -> &hdrhistogram::Histogram<u64> {
        &self.0
    }
}

/// A histogram most spans never fill (a stream's, an LLM step's): no memory
/// until its first value, and read as an empty [`Histogram`] until then.
///
/// Why: a `Stats` held all of its histograms allocated, ~190 KB each (the
/// bounds of [`Histogram`]), so the nine rows that only streamed and LLM
/// steps fill cost every `Stats` of every run ~1.7 MB that a run which
/// streams nothing never wrote to. Allocated on the first record (or merge of
/// a filled one), it stays allocated: a worker's reused `Stats` (the engine's
/// pool) pay the allocation once, as the eager ones do.
#[derive(Debug, Clone, Default)]
pub struct LazyHistogram(Option<Histogram>);

/// The one empty histogram an absent [`LazyHistogram`] reads as.
fn empty() -> &'static Histogram {
    static EMPTY: OnceLock<Histogram> = OnceLock::new();
    EMPTY.get_or_init(Histogram::new)
}

impl LazyHistogram {
    /// The histogram, to read: an empty one while none was allocated.
    pub fn get(&self) -> &Histogram {
        self.0.as_ref().unwrap_or_else(|| empty())
    }

    /// The histogram, to change: allocated now if it was not.
    pub fn get_mut(&mut self) -> &mut Histogram {
        self.0.get_or_insert_with(Histogram::new)
    }

    /// Whether its memory was allocated (something was recorded in it once).
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }

    /// Record one duration ([`Histogram::record`]).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.get_mut().record(d);
    }

    /// Record one count ([`Histogram::record_count`]).
    #[inline]
    pub fn record_count(&mut self, n: u64) {
        self.get_mut().record_count(n);
    }

    /// Record one value given in microseconds ([`Histogram::record_us`]).
    pub fn record_us(&mut self, us: u64, count: u64) {
        self.get_mut().record_us(us, count);
    }

    /// Empty it, keeping its memory if it has some.
    pub fn clear(&mut self) {
        if let Some(h) = &mut self.0 {
            h.clear();
        }
    }

    /// Add every value of `other`; nothing is allocated for an empty one.
    pub fn merge(&mut self, other: &LazyHistogram) {
        if !other.get().is_empty() {
            self.get_mut().merge(other.get());
        }
    }
}

impl std::ops::Deref for LazyHistogram {
    type Target = Histogram;
    fn deref(&self) -> &Histogram {
        self.get()
    }
}

impl PartialEq for LazyHistogram {
    /// As histograms: an absent one equals an allocated empty one.
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = Histogram::new();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        // (quantile, expected ms): HDR keeps 3 significant digits, so equal to 0.1%.
        let cases = [(0.5, 50.0), (0.9, 90.0), (0.99, 99.0), (1.0, 100.0)];
        for (q, want) in cases {
            let got = h.quantile(q).as_secs_f64() * 1000.0;
            assert!((got - want).abs() <= want * 0.001, "q={q}: {got} vs {want}");
        }
        assert_eq!(h.len(), 100);
        assert!((h.mean_ms() - 50.5).abs() < 0.1);
        assert_eq!(h.count_at_or_below(Duration::from_millis(10)), 10);
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut h = Histogram::new();
        h.record(Duration::ZERO); // below 1 µs
        h.record(Duration::from_secs(10_000)); // beyond one hour
        assert_eq!(h.len(), 2);
        assert!(h.max() >= Duration::from_secs(3599));
    }
}
