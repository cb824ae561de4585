//! The protobuf messages of Prometheus remote-write that perfops sends, by
//! `prost` derive (no build script, no protoc): only the fields it writes,
//! each with the number of the upstream `.proto` files (Prometheus v0.316.0,
//! `prompb/`), so that what is encoded here is what a receiver decodes.
//!
//! - [`v1`], from `prompb/remote.proto` (`prometheus.WriteRequest`) and
//!   `prompb/types.proto` (`TimeSeries`, `Label`, `Sample`, `Histogram`,
//!   `BucketSpan`, `MetricMetadata`).
//! - [`v2`], from `prompb/io/prometheus/write/v2/types.proto`
//!   (`io.prometheus.write.v2.Request`, `TimeSeries`, `Sample`,
//!   `Histogram`, `BucketSpan`, `Metadata`): labels and metadata as
//!   references into the request's `symbols`, which start with "".
//!
//! The native histogram (the same fields in both, numbered alike) is
//! integer-counted: `count_int`, `zero_count_int`, and the positive buckets
//! as spans (a first offset, then gaps) with their counts delta-encoded.
//! Fields perfops never sets (negative buckets, float counts, exemplars,
//! custom bucket bounds) are left out: an absent field is the default.

/// Remote-write 1.0 (`X-Prometheus-Remote-Write-Version: 0.1.0`).
pub(crate) mod v1 {
    /// `prometheus.WriteRequest` (remote.proto).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct WriteRequest {
        #[prost(message, repeated, tag = "1")]
        pub(crate) timeseries: Vec<TimeSeries>,
        // 2 is reserved (Cortex's `source`).
        #[prost(message, repeated, tag = "3")]
        pub(crate) metadata: Vec<MetricMetadata>,
    }

    /// `prometheus.TimeSeries` (types.proto).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TimeSeries {
        #[prost(message, repeated, tag = "1")]
        pub(crate) labels: Vec<Label>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) samples: Vec<Sample>,
        // 3: exemplars, not sent.
        #[prost(message, repeated, tag = "4")]
        pub(crate) histograms: Vec<super::Histogram>,
    }

    /// `prometheus.Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Label {
        #[prost(string, tag = "1")]
        pub(crate) name: String,
        #[prost(string, tag = "2")]
        pub(crate) value: String,
    }

    /// `prometheus.Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        #[prost(double, tag = "1")]
        pub(crate) value: f64,
        #[prost(int64, tag = "2")]
        pub(crate) timestamp: i64,
    }

    /// `prometheus.MetricMetadata`: a family's type, help and unit.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct MetricMetadata {
        /// `MetricType`: UNKNOWN 0, COUNTER 1, GAUGE 2, HISTOGRAM 3 (as v2's).
        #[prost(int32, tag = "1")]
        pub(crate) r#type: i32,
        #[prost(string, tag = "2")]
        pub(crate) metric_family_name: String,
        #[prost(string, tag = "4")]
        pub(crate) help: String,
        #[prost(string, tag = "5")]
        pub(crate) unit: String,
    }
}

/// Remote-write 2.0 (`X-Prometheus-Remote-Write-Version: 2.0.0`).
pub(crate) mod v2 {
    /// `io.prometheus.write.v2.Request`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Request {
        // 1 to 3 are reserved (1.0's fields: a 1.0 decoder sees an empty request).
        #[prost(string, repeated, tag = "4")]
        pub(crate) symbols: Vec<String>,
        #[prost(message, repeated, tag = "5")]
        pub(crate) timeseries: Vec<TimeSeries>,
    }

    /// `io.prometheus.write.v2.TimeSeries`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TimeSeries {
        /// Name and value references into `symbols`, in pairs, sorted by name.
        #[prost(uint32, repeated, tag = "1")]
        pub(crate) labels_refs: Vec<u32>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) samples: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) histograms: Vec<super::Histogram>,
        // 4: exemplars, not sent.
        #[prost(message, optional, tag = "5")]
        pub(crate) metadata: Option<Metadata>,
        // 6 is reserved (the experimental period's created timestamp).
    }

    /// `io.prometheus.write.v2.Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        #[prost(double, tag = "1")]
        pub(crate) value: f64,
        #[prost(int64, tag = "2")]
        pub(crate) timestamp: i64,
        /// When a counter started counting (0: not set).
        #[prost(int64, tag = "3")]
        pub(crate) start_timestamp: i64,
    }

    /// `io.prometheus.write.v2.Metadata`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Metadata {
        /// `MetricType`: UNSPECIFIED 0, COUNTER 1, GAUGE 2, HISTOGRAM 3.
        #[prost(int32, tag = "1")]
        pub(crate) r#type: i32,
        #[prost(uint32, tag = "3")]
        pub(crate) help_ref: u32,
        #[prost(uint32, tag = "4")]
        pub(crate) unit_ref: u32,
    }
}

/// A native histogram: `prometheus.Histogram` and
/// `io.prometheus.write.v2.Histogram`, numbered alike (v2 adds
/// `start_timestamp`, 17, which a 1.0 decoder skips as unknown: perfops
/// sends it only in 2.0).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Histogram {
    /// `oneof count { uint64 count_int = 1; double count_float = 2; }`: perfops counts in integers.
    #[prost(uint64, optional, tag = "1")]
    pub(crate) count_int: Option<u64>,
    #[prost(double, tag = "3")]
    pub(crate) sum: f64,
    #[prost(sint32, tag = "4")]
    pub(crate) schema: i32,
    #[prost(double, tag = "5")]
    pub(crate) zero_threshold: f64,
    /// `oneof zero_count { uint64 zero_count_int = 6; double zero_count_float = 7; }`.
    #[prost(uint64, optional, tag = "6")]
    pub(crate) zero_count_int: Option<u64>,
    // 8 to 10: negative buckets, never (no duration is negative).
    #[prost(message, repeated, tag = "11")]
    pub(crate) positive_spans: Vec<BucketSpan>,
    /// Each bucket's count less the one before it (the first: less 0).
    #[prost(sint64, repeated, tag = "12")]
    pub(crate) positive_deltas: Vec<i64>,
    // 13: float counts, never.
    /// `ResetHint`: UNKNOWN 0, YES 1, NO 2, GAUGE 3.
    #[prost(int32, tag = "14")]
    pub(crate) reset_hint: i32,
    #[prost(int64, tag = "15")]
    pub(crate) timestamp: i64,
    // 16: custom bucket bounds, never.
    /// 2.0 only: when the histogram started counting (0: not set).
    #[prost(int64, tag = "17")]
    pub(crate) start_timestamp: i64,
}

/// `BucketSpan`: `length` consecutive buckets, `offset` after the previous
/// span's end (the first span's: its first bucket's index).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub(crate) offset: i32,
    #[prost(uint32, tag = "2")]
    pub(crate) length: u32,
}

/// `MetricType` (v1's `MetricMetadata.MetricType`, v2's `Metadata.MetricType`: the same numbers).
pub(crate) const COUNTER: i32 = 1;
/// A gauge.
pub(crate) const GAUGE: i32 = 2;
/// A histogram (native, here).
pub(crate) const HISTOGRAM: i32 = 3;

/// `ResetHint::UNKNOWN`: the receiver tests for a reset itself.
pub(crate) const RESET_UNKNOWN: i32 = 0;
/// `ResetHint::NO`: no reset since the histogram before.
pub(crate) const RESET_NO: i32 = 2;
