//! `--output prometheus-rw=URL`: every second pushed to a Prometheus
//! remote-write receiver (Prometheus with `--web.enable-remote-write-receiver`,
//! Mimir, Thanos Receive, VictoriaMetrics, an OpenTelemetry Collector's
//! `prometheusremotewrite` receiver), latency as native histograms.
//!
//! ```text
//!   Second ─> perfops_report::push::Pushed (Cumulative) ─> Batch { time_ms, points }
//!     ─> (push.rs: backlog, retries) ─> request of 1..30 batches:
//!          2.0: io.prometheus.write.v2.Request, symbols + refs, metadata per series
//!          1.0: prometheus.WriteRequest, labels by value, metadata listed once a family
//!        protobuf (prompb.rs) ─> snappy (block format) ─> POST URL
//!   2.0 first; an HTTP 415 answer, or a success without 2.0's Written fields
//!   (a receiver that read it as an empty 1.0 request), switches to 1.0 for the run
//! ```
//!
//! It owns the encoding of the push model's batches in both versions of the
//! protocol and the choice between them; what is pushed (names, labels,
//! cumulative sums, the histograms' schema) is the model's
//! (`perfops_report::push`), and the backlog, the retries and the HTTP wire
//! are `push.rs`'s.
//!
//! **Labels**: the model's (`run`, `scenario`, `stage`, `step`, `protocol`,
//! `outcome`), and `job="perfops"` and `instance` = the run on every
//! series, as Prometheus' OTLP receiver makes them from an OTLP push's
//! resource: one query reads either push.
//!
//! **Cumulative**, as Prometheus' own counters: each (stage, step)'s
//! counters and histograms add up from their first second, so a receiver's
//! `rate()` and `increase()` work, a lost request loses no count (the next
//! second carries it), and the last sample of a stage is the stage's whole
//! distribution: `histogram_quantile(0.99, sum(last_over_time(...)))` is
//! the stage's p99 as `summary.json` has it, within a bucket (2.19 % at
//! schema 5; see `perfops_core::measure::exponential`).
//!
//! **Native histograms**: the exponential buckets as spans (runs of
//! populated buckets) and delta-encoded counts, zero threshold 0 (perfops
//! records nothing under 1 µs), the reset hint `NO` after a series' first
//! second (it only grows) and `UNKNOWN` on its first, where the receiver
//! tests. Counters and gauges are float samples; 2.0 also carries each
//! counter's and histogram's start (`start_timestamp`) and its type, help
//! and unit on every series.
//!
//! **The watched target metrics, if asked** (`URL#watched`: a URL's
//! fragment is never sent to the server): each sample the watchers read
//! (`watch:` in the scenario) as a gauge `perfops_watched{source, metric}`
//! at the time it was read.

mod prompb;

use std::collections::HashMap;

use perfops_core::pipeline::Second;
use perfops_report::output::Output;
use perfops_report::push::{Batch, Family, Kind, Point, Pushed, Temporality, Value};
use perfops_report::run::RunMeta;

use self::prompb::{BucketSpan, Histogram, v1, v2};
use super::push::{self, Encode, Http, Payload};

/// The field every 2.0 receiver answers with (2.0 specification, "Required Written Response Headers").
const WRITTEN: &str = "X-Prometheus-Remote-Write-Samples-Written";

/// Where auth headers for remote-write come from (`Authorization=Bearer%20...`).
pub(crate) const HEADERS_VAR: &str = "PERFOPS_REMOTE_WRITE_HEADERS";

/// `prometheus-rw=URL[#watched]`.
pub(crate) const ENTRY: super::Entry = super::Entry {
    name: "prometheus-rw",
    help: "prometheus-rw=URL[#watched]: push every second to a Prometheus remote-write URL \
           (2.0, else 1.0; native histograms; #watched adds the watched metrics; \
           auth headers from PERFOPS_REMOTE_WRITE_HEADERS)",
    make,
    arg: super::Arg::Address,
};

fn make(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let arg = arg.filter(|a| !a.is_empty()).ok_or("say where: prometheus-rw=http://HOST:9090/api/v1/write")?;
    let (url, watched) = match arg.rsplit_once('#') {
        Some((url, "watched")) => (url, true),
        Some((_, other)) => {
            return Err(format!(
                "unknown option `#{}` (the one option is #watched)",
                perfops_core::printable::escape(other)
            ));
        }
        None => (arg, false),
    };
    let http = Http::new(url, &[HEADERS_VAR])?;
    push::output(ENTRY.name, RemoteWrite::new(watched), http)
}

/// Which version of the protocol a request is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// `io.prometheus.write.v2.Request`.
    V2,
    /// `prometheus.WriteRequest`.
    V1,
}

/// The remote-write format of the push model's batches.
pub(crate) struct RemoteWrite {
    pushed: Option<Pushed>,
    version: Version,
    watched: bool,
    /// `job` and `instance` on every series, as an OTLP push gets them from its resource.
    target: Vec<(&'static str, String)>,
}

impl RemoteWrite {
    pub(crate) fn new(watched: bool) -> RemoteWrite {
        RemoteWrite { pushed: None, version: Version::V2, watched, target: Vec::new() }
    }
}

/// A second as it waits to be delivered: its batch, and the watched
/// samples read in it (each a batch at its own time).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    batch: Batch,
    watched: Vec<Batch>,
}

impl Encode for RemoteWrite {
    type Item = Item;

    fn start(&mut self, meta: &RunMeta) {
        let pushed = Pushed::new(meta, Temporality::Cumulative);
        self.target = pushed.target_labels().to_vec();
        self.pushed = Some(pushed);
    }

    fn second(&mut self, second: &Second<'_>) -> Item {
        // `start` comes first on the output's thread; a push without one
        // (none is made so) starts its clock at the first second.
        let pushed = self.pushed.get_or_insert_with(|| Pushed::new(&RunMeta::default(), Temporality::Cumulative));
        if self.target.is_empty() {
            self.target = pushed.target_labels().to_vec();
        }
        let batch = pushed.second(second);
        let watched = if self.watched { pushed.watched(second) } else { Vec::new() };
        Item { batch, watched }
    }

    fn request(&mut self, items: &[&Item]) -> Payload {
        let batches = items.iter().flat_map(|i| std::iter::once(&i.batch).chain(&i.watched));
        let (bytes, content_type, version) = match self.version {
            Version::V2 => (
                prost::Message::encode_to_vec(&encode_v2(batches, &self.target)),
                "application/x-protobuf;proto=io.prometheus.write.v2.Request",
                "2.0.0",
            ),
            Version::V1 => {
                (prost::Message::encode_to_vec(&encode_v1(batches, &self.target)), "application/x-protobuf", "0.1.0")
            }
        };
        // Snappy's block format fails only above 4 GiB; a request holds 4 MiB at most.
        let body = snap::raw::Encoder::new().compress_vec(&bytes).unwrap_or_default();
        Payload {
            body,
            content_type,
            headers: vec![("Content-Encoding", "snappy"), ("X-Prometheus-Remote-Write-Version", version)],
        }
    }

    /// A receiver that does not speak 2.0 answers 415 (Unsupported Media
    /// Type), as the 2.0 specification asks: 1.0 from then on.
    fn refused(&mut self, status: u16) -> bool {
        if status == 415 && self.version == Version::V2 {
            self.version = Version::V1;
            return true;
        }
        false
    }

    /// A receiver that predates 2.0 and ignores the content type (Prometheus
    /// 2.x: Debian's 2.42 answers 204) reads a 2.0 request as an empty 1.0
    /// one (2.0 reserved 1.0's fields for that): it takes nothing, says
    /// nothing, and its answer lacks the `X-Prometheus-Remote-Write-*-Written`
    /// fields every 2.0 receiver sends. Such an answer is a 1.0 receiver:
    /// the same seconds again in 1.0, and 1.0 from then on. (A 2.0 receiver
    /// that left the fields out gets those samples twice, same times and
    /// values, which Prometheus takes as they are.)
    fn taken(&mut self, answer: &[(String, Vec<u8>)]) -> bool {
        let written = answer.iter().any(|(n, _)| n.eq_ignore_ascii_case(WRITTEN));
        if self.version == Version::V2 && !written {
            self.version = Version::V1;
            return true;
        }
        false
    }
}

/// A point's labels as a series has them, with `target`'s (`job`,
/// `instance`) and `__name__`, sorted by name (the order both versions ask for).
fn series_labels<'a>(point: &'a Point, target: &'a [(&'static str, String)]) -> Vec<(&'a str, &'a str)> {
    let mut labels: Vec<(&str, &str)> =
        point.labels.iter().chain(target).map(|(k, v)| (*k, v.as_str())).collect();
    labels.push(("__name__", point.family.name));
    labels.sort_unstable_by(|a, b| a.0.cmp(b.0));
    labels
}

fn metric_type(kind: Kind) -> i32 {
    match kind {
        Kind::Counter => prompb::COUNTER,
        Kind::Gauge => prompb::GAUGE,
        Kind::Histogram => prompb::HISTOGRAM,
    }
}

/// The unit as Prometheus' metadata names it (the suffix of the name).
fn unit(family: &Family) -> &'static str {
    match family.unit {
        "s" => "seconds",
        "By" => "bytes",
        _ => "",
    }
}

/// Whether a cumulative point is its series' first (its start is within
/// the second it ends): the receiver is then left to test for a reset.
fn first_of_series(point: &Point, time_ms: i64) -> bool {
    time_ms - point.start_ms <= 1000
}

/// A native histogram of `e` at `time_ms`: spans of consecutive populated
/// buckets (the first's offset is its index, the others' the gap after the
/// span before) and each bucket's count less the previous one's.
pub(crate) fn native(
    e: &perfops_core::measure::exponential::Exponential,
    time_ms: i64,
    reset_hint: i32,
    start_ms: i64,
) -> Histogram {
    let mut spans: Vec<BucketSpan> = Vec::new();
    let mut deltas = Vec::with_capacity(e.buckets.len());
    let (mut last_index, mut last_count): (Option<i32>, i64) = (None, 0);
    for &(i, n) in &e.buckets {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        match (last_index, spans.last_mut()) {
            (Some(last), Some(span)) if i == last + 1 => span.length += 1,
            (Some(last), _) => spans.push(BucketSpan { offset: i - last - 1, length: 1 }),
            (None, _) => spans.push(BucketSpan { offset: i, length: 1 }),
        }
        deltas.push(n - last_count);
        last_index = Some(i);
        last_count = n;
    }
    Histogram {
        count_int: Some(e.count),
        sum: e.sum_s,
        schema: i32::from(e.schema),
        zero_threshold: 0.0,
        zero_count_int: Some(0),
        positive_spans: spans,
        positive_deltas: deltas,
        reset_hint,
        timestamp: time_ms,
        start_timestamp: start_ms,
    }
}

/// One request in 2.0: symbols shared by every series; a series' samples of
/// several seconds in one `TimeSeries`, oldest first.
pub(crate) fn encode_v2<'a>(batches: impl Iterator<Item = &'a Batch>, target: &[(&'static str, String)]) -> v2::Request {
    let mut symbols = vec![String::new()];
    let mut refs: HashMap<String, u32> = HashMap::from([(String::new(), 0)]);
    let mut symbol = |s: &str| -> u32 {
        if let Some(&r) = refs.get(s) {
            return r;
        }
        let r = u32::try_from(symbols.len()).unwrap_or(u32::MAX);
        symbols.push(s.to_string());
        refs.insert(s.to_string(), r);
        r
    };
    let mut series: Vec<v2::TimeSeries> = Vec::new();
    let mut by_labels: HashMap<Vec<u32>, usize> = HashMap::new();
    for batch in batches {
        for point in &batch.points {
            let labels_refs: Vec<u32> =
                series_labels(point, target).into_iter().flat_map(|(k, v)| [symbol(k), symbol(v)]).collect();
            let index = *by_labels.entry(labels_refs.clone()).or_insert_with(|| {
                let metadata = v2::Metadata {
                    r#type: metric_type(point.family.kind),
                    help_ref: symbol(point.family.help),
                    unit_ref: symbol(unit(point.family)),
                };
                series.push(v2::TimeSeries { labels_refs, metadata: Some(metadata), ..Default::default() });
                series.len() - 1
            });
            let ts = &mut series[index];
            let start = match point.family.kind {
                Kind::Gauge => 0,
                _ => point.start_ms,
            };
            match &point.value {
                Value::Counter(n) => {
                    ts.samples.push(v2::Sample { value: *n as f64, timestamp: batch.time_ms, start_timestamp: start })
                }
                Value::Gauge(v) => {
                    ts.samples.push(v2::Sample { value: *v, timestamp: batch.time_ms, start_timestamp: 0 })
                }
                Value::Histogram(e) => {
                    let hint =
                        if first_of_series(point, batch.time_ms) { prompb::RESET_UNKNOWN } else { prompb::RESET_NO };
                    ts.histograms.push(native(e, batch.time_ms, hint, start));
                }
            }
        }
    }
    v2::Request { symbols, timeseries: series }
}

/// One request in 1.0: labels by value, the families' metadata listed once.
pub(crate) fn encode_v1<'a>(
    batches: impl Iterator<Item = &'a Batch>,
    target: &[(&'static str, String)],
) -> v1::WriteRequest {
    let mut series: Vec<v1::TimeSeries> = Vec::new();
    let mut by_labels: HashMap<Vec<(&str, &str)>, usize> = HashMap::new();
    let mut metadata: Vec<v1::MetricMetadata> = Vec::new();
    for batch in batches {
        for point in &batch.points {
            let labels = series_labels(point, target);
            let index = *by_labels.entry(labels.clone()).or_insert_with(|| {
                let labels =
                    labels.iter().map(|(k, v)| v1::Label { name: k.to_string(), value: v.to_string() }).collect();
                series.push(v1::TimeSeries { labels, ..Default::default() });
                series.len() - 1
            });
            if !metadata.iter().any(|m| m.metric_family_name == point.family.name) {
                metadata.push(v1::MetricMetadata {
                    r#type: metric_type(point.family.kind),
                    metric_family_name: point.family.name.to_string(),
                    help: point.family.help.to_string(),
                    unit: unit(point.family).to_string(),
                });
            }
            let ts = &mut series[index];
            match &point.value {
                Value::Counter(n) => ts.samples.push(v1::Sample { value: *n as f64, timestamp: batch.time_ms }),
                Value::Gauge(v) => ts.samples.push(v1::Sample { value: *v, timestamp: batch.time_ms }),
                Value::Histogram(e) => {
                    let hint =
                        if first_of_series(point, batch.time_ms) { prompb::RESET_UNKNOWN } else { prompb::RESET_NO };
                    // 1.0's Histogram has no start_timestamp: 0 is not encoded.
                    ts.histograms.push(native(e, batch.time_ms, hint, 0));
                }
            }
        }
    }
    v1::WriteRequest { timeseries: series, metadata }
}

#[cfg(test)]
mod tests;
