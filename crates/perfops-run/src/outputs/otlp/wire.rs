//! A [`Batch`] as an OTLP `ExportMetricsServiceRequest`: the protobuf
//! messages (the fields perfops sends and reads, declared with prost's
//! derive at the upstream field numbers) and the one function that fills
//! them ([`request`]).
//!
//! ```text
//!   ExportMetricsServiceRequest
//!     resource_metrics[1]: Resource { Pushed::resource() }
//!       scope_metrics[1]: scope { name "perfops", version }
//!         metrics: one per family present, in FAMILIES' order
//!           Sum { monotonic, DELTA | CUMULATIVE }       counters   (as_int)
//!           Gauge                                       gauges     (as_double)
//!           ExponentialHistogram { DELTA | CUMULATIVE } histograms: scale = schema,
//!             positive { offset: first OTel index, bucket_counts: dense }, zero 0
//! ```
//!
//! **Indices.** perfops' [`Exponential`] numbers its buckets as Prometheus
//! does (bucket i holds (base^(i-1), base^i]); OpenTelemetry's bucket k
//! holds (base^k, base^(k+1)], so the same bucket is k = i - 1, and the
//! `offset` is the first populated bucket's i - 1. Buckets are dense on
//! the wire: the empty ones between two populated ones are zeros (at schema
//! 5 a second from 0.1 ms to 1 s spans at most 426).
//!
//! The field numbers are those of opentelemetry-proto v1.11.0
//! (`opentelemetry/proto/collector/metrics/v1/metrics_service.proto`,
//! `metrics/v1/metrics.proto`, `common/v1/common.proto`,
//! `resource/v1/resource.proto`); fields perfops never sets (exemplars,
//! negative buckets, entity refs, metadata) are left out: absent and
//! default are the same bytes in proto3. No build script, no `protoc`.
//!
//! This module owns the messages and the mapping; it does no I/O (the
//! transports, `otlp.rs` and `otlp/grpc.rs`, send the bytes) and decides no
//! name or label (the batch says them: `perfops_report::push`).

use perfops_core::measure::exponential::Exponential;
use perfops_report::push::{Batch, Kind, Temporality, Value};

/// `collector/metrics/v1`: `ExportMetricsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `collector/metrics/v1`: `ExportMetricsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportMetricsPartialSuccess>,
}

/// `collector/metrics/v1`: `ExportMetricsPartialSuccess`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_data_points: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `metrics/v1`: `ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `resource/v1`: `Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `metrics/v1`: `ScopeMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

/// `common/v1`: `InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `common/v1`: `KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `common/v1`: `AnyValue`, the string case (every attribute perfops sends).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1")]
    pub value: Option<any_value::Value>,
}

/// `AnyValue`'s `value` oneof.
pub mod any_value {
    /// The cases perfops sends.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
    }
}

/// `metrics/v1`: `Metric`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(oneof = "metric::Data", tags = "5, 7, 10")]
    pub data: Option<metric::Data>,
}

/// `Metric`'s `data` oneof.
pub mod metric {
    /// The kinds perfops sends (never `Histogram` nor `Summary`).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Data {
        #[prost(message, tag = "5")]
        Gauge(super::Gauge),
        #[prost(message, tag = "7")]
        Sum(super::Sum),
        #[prost(message, tag = "10")]
        ExponentialHistogram(super::ExponentialHistogram),
    }
}

/// `metrics/v1`: `AggregationTemporality`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum AggregationTemporality {
    Unspecified = 0,
    Delta = 1,
    Cumulative = 2,
}

/// `metrics/v1`: `Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// `metrics/v1`: `Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(enumeration = "AggregationTemporality", tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

/// `metrics/v1`: `ExponentialHistogram`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<ExponentialHistogramDataPoint>,
    #[prost(enumeration = "AggregationTemporality", tag = "2")]
    pub aggregation_temporality: i32,
}

/// `metrics/v1`: `NumberDataPoint`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "number_data_point::Value", tags = "4, 6")]
    pub value: Option<number_data_point::Value>,
}

/// `NumberDataPoint`'s `value` oneof.
pub mod number_data_point {
    /// A double (gauges) or an integer (counters).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(double, tag = "4")]
        AsDouble(f64),
        #[prost(sfixed64, tag = "6")]
        AsInt(i64),
    }
}

/// `metrics/v1`: `ExponentialHistogramDataPoint`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogramDataPoint {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    pub sum: Option<f64>,
    #[prost(sint32, tag = "6")]
    pub scale: i32,
    #[prost(fixed64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, optional, tag = "8")]
    pub positive: Option<Buckets>,
    #[prost(double, optional, tag = "12")]
    pub min: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub max: Option<f64>,
    #[prost(double, tag = "14")]
    pub zero_threshold: f64,
}

/// `ExponentialHistogramDataPoint.Buckets`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Buckets {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint64, repeated, tag = "2")]
    pub bucket_counts: Vec<u64>,
}

/// The instrumentation scope every push names.
pub const SCOPE: &str = "perfops";

/// `batches` (seconds, oldest first) as one request: `resource`
/// (`Pushed::resource`) on its one `ResourceMetrics`, one scope
/// (`perfops`, `version`), one metric per family present in the order
/// first met, each with the points of every batch, sums and histograms
/// marked with `temporality`.
pub fn request(
    batches: &[&Batch],
    resource: &[(&'static str, String)],
    version: &str,
    temporality: Temporality,
) -> ExportMetricsServiceRequest {
    let aggregation = match temporality {
        Temporality::Delta => AggregationTemporality::Delta,
        Temporality::Cumulative => AggregationTemporality::Cumulative,
    } as i32;
    let mut metrics: Vec<Metric> = Vec::new();
    for batch in batches {
        let time = unix_nano(batch.time_ms);
        for point in &batch.points {
            let family = point.family;
            // One metric per family, whatever the order its points come in.
            let at = match metrics.iter().position(|m| m.name == family.otel) {
                Some(at) => at,
                None => {
                    let data = match family.kind {
                        Kind::Counter => metric::Data::Sum(Sum {
                            data_points: Vec::new(),
                            aggregation_temporality: aggregation,
                            is_monotonic: true,
                        }),
                        Kind::Gauge => metric::Data::Gauge(Gauge { data_points: Vec::new() }),
                        Kind::Histogram => metric::Data::ExponentialHistogram(ExponentialHistogram {
                            data_points: Vec::new(),
                            aggregation_temporality: aggregation,
                        }),
                    };
                    metrics.push(Metric {
                        name: family.otel.to_string(),
                        description: family.help.to_string(),
                        unit: family.unit.to_string(),
                        data: Some(data),
                    });
                    metrics.len() - 1
                }
            };
            let attributes = attributes(&point.labels);
            let start = unix_nano(point.start_ms);
            let number = |attributes, value| NumberDataPoint {
                attributes,
                start_time_unix_nano: start,
                time_unix_nano: time,
                value: Some(value),
            };
            // A value whose kind is not its family's is not sent: the model
            // makes none, and a metric of two kinds would be refused whole.
            match (&mut metrics[at].data, &point.value) {
                (Some(metric::Data::Sum(sum)), Value::Counter(n)) => {
                    let n = i64::try_from(*n).unwrap_or(i64::MAX);
                    sum.data_points.push(number(attributes, number_data_point::Value::AsInt(n)))
                }
                (Some(metric::Data::Gauge(gauge)), Value::Gauge(v)) => {
                    gauge.data_points.push(number(attributes, number_data_point::Value::AsDouble(*v)))
                }
                (Some(metric::Data::ExponentialHistogram(h)), Value::Histogram(e)) => {
                    h.data_points.push(exponential_point(e, attributes, start, time))
                }
                _ => {}
            }
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource { attributes: attributes(resource) }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope { name: SCOPE.to_string(), version: version.to_string() }),
                metrics,
            }],
        }],
    }
}

/// What an `ExportMetricsServiceResponse` says was rejected (partial
/// success): the data points and the receiver's message, when any were.
/// An answer that does not decode says nothing: the receiver took the
/// request (2xx, or gRPC's OK).
pub fn partial(body: &[u8]) -> Option<(u64, String)> {
    use prost::Message;
    let partial = ExportMetricsServiceResponse::decode(body).ok()?.partial_success?;
    let points = u64::try_from(partial.rejected_data_points).ok().filter(|&n| n > 0)?;
    Some((points, partial.error_message))
}

/// One exponential histogram point: OTel's indices (Prometheus' minus one),
/// dense from the first populated bucket to the last.
fn exponential_point(e: &Exponential, attributes: Vec<KeyValue>, start: u64, time: u64) -> ExponentialHistogramDataPoint {
    let positive = e.buckets.first().map(|&(first, _)| {
        let last = e.buckets.last().map_or(first, |&(i, _)| i);
        let mut counts = vec![0u64; (i64::from(last) - i64::from(first) + 1) as usize];
        for &(i, n) in &e.buckets {
            counts[(i64::from(i) - i64::from(first)) as usize] += n;
        }
        Buckets { offset: first - 1, bucket_counts: counts }
    });
    let seen = e.count > 0;
    ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: time,
        count: e.count,
        sum: Some(e.sum_s),
        scale: i32::from(e.schema),
        zero_count: 0,
        positive,
        min: seen.then_some(e.min_s),
        max: seen.then_some(e.max_s),
        zero_threshold: 0.0,
    }
}

fn attributes(labels: &[(&'static str, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| KeyValue {
            key: (*k).to_string(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.clone())) }),
        })
        .collect()
}

/// Milliseconds since the epoch as OTLP's nanoseconds (0 before the epoch:
/// "unknown" on the wire, never a wrapped date).
fn unix_nano(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use perfops_core::measure::Histogram;
    use perfops_core::measure::exponential::{SCHEMA, upper_bound};
    use perfops_report::push::{LATENCY, Point, REQUESTS, SENT, TARGET};
    use prost::Message;

    use super::*;

    fn labels(stage: &str) -> Vec<(&'static str, String)> {
        vec![("run", "r".into()), ("scenario", "s".into()), ("stage", stage.into()), ("step", "orders".into())]
    }

    fn batch(e: Exponential) -> Batch {
        Batch {
            time_ms: 1_795_321_801_500,
            points: vec![
                Point { family: &LATENCY, labels: labels("warm"), start_ms: 1_795_321_800_500, value: Value::Histogram(e) },
                Point { family: &SENT, labels: labels("warm"), start_ms: 1_795_321_800_500, value: Value::Counter(12) },
                Point { family: &SENT, labels: labels("peak"), start_ms: 1_795_321_800_500, value: Value::Counter(3) },
                Point {
                    family: &TARGET,
                    labels: labels("warm")[..3].to_vec(),
                    start_ms: 1_795_321_800_500,
                    value: Value::Gauge(10.5),
                },
            ],
        }
    }

    /// What is encoded decodes back to the same message with the same
    /// types: one resource, one scope, one metric per family present (the
    /// points of one family, of both seconds, in one metric), kinds, temporality and times as
    /// the batch and the choice say.
    #[test]
    fn a_batch_encodes_and_decodes_back() {
        let mut h = Histogram::new();
        h.record(Duration::from_millis(5));
        let e = Exponential::from_hdr(&h, SCHEMA);
        let resource = [("service.name", "perfops".to_string()), ("service.instance.id", "r".to_string())];
        for (temporality, want) in
            [(Temporality::Delta, AggregationTemporality::Delta), (Temporality::Cumulative, AggregationTemporality::Cumulative)]
        {
            let (first, mut second) = (batch(e.clone()), batch(e.clone()));
            second.time_ms += 1000;
            let req = request(&[&first, &second], &resource, "0.9.0", temporality);
            let bytes = req.encode_to_vec();
            let back = ExportMetricsServiceRequest::decode(bytes.as_slice()).expect("decodes");
            assert_eq!(back, req);
            let rm = &back.resource_metrics[..];
            assert_eq!(rm.len(), 1);
            let attrs = &rm[0].resource.as_ref().expect("a resource").attributes;
            assert_eq!(attrs[0].key, "service.name");
            assert_eq!(attrs[0].value, Some(AnyValue { value: Some(any_value::Value::StringValue("perfops".into())) }));
            let scope = &rm[0].scope_metrics[0];
            assert_eq!(scope.scope, Some(InstrumentationScope { name: "perfops".into(), version: "0.9.0".into() }));
            let names: Vec<&str> = scope.metrics.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, ["perfops.latency", "perfops.requests.sent", "perfops.target_arrivals"]);
            assert_eq!(scope.metrics[0].unit, "s");
            assert_eq!(scope.metrics[0].description, LATENCY.help);
            match &scope.metrics[1].data {
                Some(metric::Data::Sum(sum)) => {
                    assert!(sum.is_monotonic);
                    assert_eq!(sum.aggregation_temporality, want as i32);
                    let values: Vec<_> = sum.data_points.iter().map(|p| p.value.clone()).collect();
                    let (twelve, three) =
                        (Some(number_data_point::Value::AsInt(12)), Some(number_data_point::Value::AsInt(3)));
                    // Both seconds' points, in order, in one metric.
                    assert_eq!(values, [twelve.clone(), three.clone(), twelve, three]);
                    let p = &sum.data_points[1];
                    assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (1_795_321_800_500_000_000, 1_795_321_801_500_000_000));
                    assert_eq!(sum.data_points[3].time_unix_nano, 1_795_321_802_500_000_000, "the second batch's end");
                    let stage = &p.attributes[2];
                    assert_eq!(
                        (stage.key.as_str(), &stage.value),
                        ("stage", &Some(AnyValue { value: Some(any_value::Value::StringValue("peak".into())) }))
                    );
                }
                other => panic!("a sum, not {other:?}"),
            }
            match &scope.metrics[2].data {
                Some(metric::Data::Gauge(g)) => {
                    assert_eq!(g.data_points[0].value, Some(number_data_point::Value::AsDouble(10.5)))
                }
                other => panic!("a gauge, not {other:?}"),
            }
            match &scope.metrics[0].data {
                Some(metric::Data::ExponentialHistogram(h)) => {
                    assert_eq!(h.aggregation_temporality, want as i32);
                    assert_eq!(h.data_points[0].count, 1);
                }
                other => panic!("an exponential histogram, not {other:?}"),
            }
        }
        // A family's name and unit on the wire are the model's.
        assert_eq!((REQUESTS.otel, REQUESTS.unit), ("perfops.requests", "{request}"));
    }

    /// A golden point, worked by hand. At scale 5 the base is 2^(1/32);
    /// OTel's bucket k holds (2^(k/32), 2^((k+1)/32)].
    /// - 1 ms: log2(0.001) = -9.9658, x 32 = -318.9 → OTel k = -319
    ///   (2^(-319/32) = 0.000999... < 0.001 <= 2^(-318/32) = 0.001021).
    /// - 1.01 ms: log2 x 32 = -318.46 → k = -319 as well (same bucket).
    /// - 1.05 ms: log2(0.00105) x 32 = -316.65 → k = -317.
    ///
    /// So offset -319, counts [2, 0, 1]: the empty bucket -318 is a zero.
    #[test]
    fn an_exponential_point_has_otels_offset_and_dense_counts() {
        let mut h = Histogram::new();
        for us in [1000, 1010, 1050] {
            h.record(Duration::from_micros(us));
        }
        let e = Exponential::from_hdr(&h, SCHEMA);
        let p = exponential_point(&e, Vec::new(), 1, 2);
        let b = p.positive.as_ref().expect("positive buckets");
        assert_eq!(b.offset, -319);
        assert_eq!(b.bucket_counts, [2, 0, 1]);
        // OTel's bucket -319 is (base^-319, base^-318]: it holds 1 ms (the
        // same bucket is Prometheus' -318, whose upper bound is base^-318).
        assert!(upper_bound(b.offset, 5) < 0.001 && 0.001 <= upper_bound(b.offset + 1, 5));
        assert_eq!((p.scale, p.zero_count, p.zero_threshold), (5, 0, 0.0));
        assert_eq!(p.count, 3);
        assert!((p.sum.expect("a sum") - 0.00306).abs() < 1e-5);
        assert_eq!((p.min, p.max), (Some(0.001), Some(0.00105)));
        // An empty histogram: no buckets, no min or max, a count of 0.
        let empty = exponential_point(&Exponential::empty(SCHEMA), Vec::new(), 1, 2);
        assert_eq!((empty.positive, empty.min, empty.max, empty.count), (None, None, None, 0));
    }

    /// A partial success, written field by field as a receiver sends it.
    #[test]
    fn a_partial_success_is_read() {
        // (answer, what is read)
        type Case<'a> = (&'a [u8], Option<(u64, &'a str)>);
        let cases: [Case<'_>; 5] = [
            // partial_success (1) { rejected_data_points (1): 3, error_message (2): "nan" }
            (&[0x0a, 7, 0x08, 3, 0x12, 3, b'n', b'a', b'n'], Some((3, "nan"))),
            (&[], None),                        // an empty answer: all taken
            (&[0x0a, 2, 0x08, 0], None),        // 0 rejected: all taken
            (&[0x0a, 11, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], None), // -1: nonsense, not counted
            (&[0xff], None),                    // not protobuf: the receiver still said OK
        ];
        for (body, want) in cases {
            assert_eq!(partial(body), want.map(|(n, m)| (n, m.to_string())), "{body:?}");
        }
    }

    /// The bytes of a point are the upstream field numbers: a tiny point
    /// written field by field, as a receiver reads it.
    #[test]
    fn a_number_point_has_the_upstream_field_numbers() {
        let p = NumberDataPoint {
            attributes: vec![KeyValue {
                key: "a".into(),
                value: Some(AnyValue { value: Some(any_value::Value::StringValue("b".into())) }),
            }],
            start_time_unix_nano: 1,
            time_unix_nano: 2,
            value: Some(number_data_point::Value::AsInt(3)),
        };
        // prost writes the fields in the order of their numbers.
        let want = [
            &[0x11, 1, 0, 0, 0, 0, 0, 0, 0][..], // start_time_unix_nano (2), fixed64
            &[0x19, 2, 0, 0, 0, 0, 0, 0, 0],     // time_unix_nano (3), fixed64
            &[0x31, 3, 0, 0, 0, 0, 0, 0, 0],     // as_int (6), sfixed64
            &[0x3a, 8, 0x0a, 1, b'a', 0x12, 3, 0x0a, 1, b'b'], // attributes (7) { key (1), value (2) { string_value (1) } }
        ]
        .concat();
        assert_eq!(p.encode_to_vec(), want);
    }
}
