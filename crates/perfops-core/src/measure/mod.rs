//! What a run measures: failure kinds, HDR histograms and per-interval
//! statistics.
//!
//! Each worker owns its [`Stats`] and ships a snapshot per interval; the
//! snapshots are merged at the edge with [`Stats::merge`], which is associative
//! and order-free (a property test below says so), so merging per worker, per
//! second or per shard gives the same totals.

mod counters;
pub mod exponential;
mod failure;
mod figures;
mod histogram;
mod interval;
mod samples;
mod stats;

pub use counters::{
    Counters, PartCounters, PartPlace, Place, QuickCounters, QuickPlace, SeriesCounters, SeriesPlace, SummaryCounters,
    SummaryPlace,
};
pub use exponential::Exponential;
pub use failure::{FailureCounts, FailureKind};
pub use figures::HistogramFigures;
pub use histogram::{Histogram, HistogramSummary, LazyHistogram};
pub use interval::{Interval, Key, step_name};
pub use samples::{
    BODY_HEAD_BYTES, BODY_LINE_BYTES, CHECK_BYTES, FailureSample, FailureSamples, HEADER_BYTES, HEADER_VALUE_BYTES,
    MAX_HEADERS, MAX_KEYS, PER_KEY, REQUEST_LINE_BYTES, SampleBound, SampleKey, Sampler, Timings, bounded_fields, cut,
};
pub use stats::{Counter, HistogramKind, Shown, Stats, Unit};
