//! The receivers of `perfops_testkit::receivers` (a current Prometheus and an OpenTelemetry
//! Collector), proven with pushes made by hand, with no perfops code: the known-good baseline the
//! push outputs' end-to-end tests build on. An OTLP/HTTP JSON export with a base-2 exponential
//! histogram of delta temporality, whose quantiles, count, `rate()` and names are computed here
//! by hand, sent to Prometheus' OTLP endpoint, through the Collector (OTLP/HTTP in), and through
//! a second Collector that forwards it to the first over OTLP/gRPC; and a remote-write
//! 1.0 request encoded here byte by byte, with the 1.0-only option refusing a 2.0 request.
//!
//! Skipped, saying why, when `bench/receivers/install.sh` has not built the receivers, unless
//! `PERFOPS_RECEIVERS=required` (as `scripts/test` sets it): then it fails.

// A skipped test says so on stderr.
#![allow(clippy::print_stderr)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use perfops_testkit::receivers::{self, CollectorOptions, PrometheusOptions};
use serde_json::{Value, json};

/// The OTLP/HTTP JSON encoding.
const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];

/// How long a push may take to become visible through the Collector.
const VISIBLE: Duration = Duration::from_secs(20);

/// Now, in milliseconds since the epoch.
fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit in i64")
}

/// An OTLP string attribute.
fn attr(key: &str, value: &str) -> Value {
    json!({ "key": key, "value": { "stringValue": value } })
}

/// Scale 3: bucket `i` holds (2^(i/8), 2^((i+1)/8)]. The first export: 10 observations in
/// bucket 0 (1 s to 1.09 s), 20 in bucket 8 (2 s to 2.18 s), 10 in bucket 16 (4 s to 4.36 s).
const FIRST: [(usize, u64); 3] = [(0, 10), (8, 20), (16, 10)];
/// The second export (delta: only what came since): 20 more in bucket 8.
const SECOND: [(usize, u64); 1] = [(8, 20)];

/// One OTLP/JSON export of resource `service` (instance `box-1`, host `h1`) holding one delta
/// point from `start_ms` to `end_ms` of the exponential histogram `perfops.latency` (unit `s`,
/// scale 3, `buckets` as (index, count) at offset 0) and of the monotonic sum
/// `perfops.requests` (unit `{request}`) counting the same observations.
fn export(service: &str, start_ms: i64, end_ms: i64, buckets: &[(usize, u64)], sum_s: f64) -> Vec<u8> {
    let mut counts = [0u64; 17];
    for &(i, n) in buckets {
        counts[i] = n;
    }
    let count: u64 = counts.iter().sum();
    // OTLP/JSON: 64-bit integers are strings, times are nanoseconds, 1 is DELTA.
    let ns = |ms: i64| (i128::from(ms) * 1_000_000).to_string();
    let body = json!({ "resourceMetrics": [{
        "resource": { "attributes": [attr("service.name", service), attr("service.instance.id", "box-1"), attr("host.name", "h1")] },
        "scopeMetrics": [{
            "scope": { "name": "perfops-testkit" },
            "metrics": [
                { "name": "perfops.latency", "unit": "s", "exponentialHistogram": {
                    "aggregationTemporality": 1,
                    "dataPoints": [{
                        "attributes": [attr("http.request.method", "GET")],
                        "startTimeUnixNano": ns(start_ms), "timeUnixNano": ns(end_ms),
                        "count": count.to_string(), "sum": sum_s, "scale": 3, "zeroCount": "0",
                        "positive": { "offset": 0, "bucketCounts": counts.iter().map(u64::to_string).collect::<Vec<_>>() },
                    }],
                }},
                { "name": "perfops.requests", "unit": "{request}", "sum": {
                    "aggregationTemporality": 1, "isMonotonic": true,
                    "dataPoints": [{ "startTimeUnixNano": ns(start_ms), "timeUnixNano": ns(end_ms), "asInt": count.to_string() }],
                }},
            ],
        }],
    }]});
    serde_json::to_vec(&body).expect("JSON")
}

/// The one value of an instant query's single series, or why there is none.
fn value(prom: &receivers::Prometheus, query: &str, at_ms: i64) -> f64 {
    let answer = prom.query(query, Some(at_ms as f64 / 1000.0)).unwrap_or_else(|e| panic!("{query}: {e}"));
    let result = answer["data"]["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(result.len(), 1, "{query} at {at_ms}: {answer}");
    result[0]["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{query}: {answer}"))
}

/// Within a relative 1e-9 of each other (the query API prints 17 digits).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= want.abs() * 1e-9
}

#[test]
fn otlp_json_exponential_histogram_reads_back_direct_and_through_the_collector() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let prom = receivers::prometheus();
    let collector = receivers::collector_with(&prom.otlp_url(), CollectorOptions { debug: true });
    assert!(collector.metrics_url().ends_with("/v1/metrics") && collector.grpc_url().starts_with("http://127.0.0.1:"));
    // A second Collector sending to the first one's gRPC receiver: the gRPC path, proven.
    let forwarder = receivers::collector_forwarding(&collector, CollectorOptions::default());

    // Two delta exports 10 s apart, in the recent past (the head of the TSDB takes them).
    let t0 = now_ms() - 30_000;
    let (t1, t2) = (t0 + 10_000, t0 + 20_000);
    let paths = [
        ("direct", prom.otlp_url()),
        ("via-collector", collector.metrics_url()),
        ("via-grpc", forwarder.metrics_url()),
    ];
    for (service, url) in &paths {
        let service = *service;
        let sent = receivers::post_to(url, JSON, &export(service, t0, t1, &FIRST, 94.5));
        assert!(matches!(sent, Ok((200, _))), "{service}: {sent:?}");
        // The second only once the first is stored: the Collector's exporter may otherwise
        // deliver them out of order, and the delta conversion drops an older point.
        let first = format!("histogram_count(perfops_latency_seconds{{job=\"{service}\"}}) == 40");
        prom.wait_for_data(&first, VISIBLE)
            .unwrap_or_else(|e| panic!("{e}; logs:\n{}\n{}", collector.log(), forwarder.log()));
        let sent = receivers::post_to(url, JSON, &export(service, t1, t2, &SECOND, 42.0));
        assert!(matches!(sent, Ok((200, _))), "{service}: {sent:?}");
        let both = format!("histogram_count(perfops_latency_seconds{{job=\"{service}\"}}) == 60");
        prom.wait_for_data(&both, VISIBLE)
            .unwrap_or_else(|e| panic!("{e}; logs:\n{}\n{}", collector.log(), forwarder.log()));
    }

    for (job, _) in &paths {
        let sel = format!("{{job=\"{job}\",instance=\"box-1\",http_request_method=\"GET\"}}");
        // (query, at, the value computed by hand)
        let cases = [
            // The median of the first export: rank 20 of 40, half-way into bucket 8; Prometheus
            // interpolates exponential buckets on a log scale: 2^(1 + 0.5/8).
            (format!("histogram_quantile(0.5, perfops_latency_seconds{sel})"), t1, 2f64.powf(1.0 + 0.5 / 8.0)),
            // p90: rank 36, 6 of the 10 into bucket 16: 2^(2 + 0.6/8).
            (format!("histogram_quantile(0.9, perfops_latency_seconds{sel})"), t1, 2f64.powf(2.0 + 0.6 / 8.0)),
            (format!("histogram_count(perfops_latency_seconds{sel})"), t1, 40.0),
            (format!("histogram_sum(perfops_latency_seconds{sel})"), t1, 94.5),
            // The delta conversion: the second point is the sum of both exports.
            (format!("histogram_count(perfops_latency_seconds{sel})"), t2, 60.0),
            (format!("histogram_sum(perfops_latency_seconds{sel})"), t2, 136.5),
            // p90 of both: buckets 0, 8, 16 hold 10, 40, 10; rank 54 is 4 of the 10 into
            // bucket 16: 2^(2 + 0.4/8).
            (format!("histogram_quantile(0.9, perfops_latency_seconds{sel})"), t2, 2f64.powf(2.0 + 0.4 / 8.0)),
            // rate() works on the converted series: over [15s] at t2 the samples at t1 and t2
            // (20 more in 10 s), extrapolated by 5 s to the window's start: 30 / 15 s = 2/s.
            (format!("histogram_count(rate(perfops_latency_seconds{sel}[15s]))"), t2, 2.0),
            // The sum: `{request}` is dropped, `_total` added; cumulative 40 then 60.
            (format!("perfops_requests_total{{job=\"{job}\",instance=\"box-1\"}}"), t1, 40.0),
            (format!("perfops_requests_total{{job=\"{job}\",instance=\"box-1\"}}"), t2, 60.0),
            (format!("rate(perfops_requests_total{{job=\"{job}\"}}[15s])"), t2, 2.0),
            // The other resource attributes are on target_info, host.name as host_name.
            (format!("target_info{{job=\"{job}\",instance=\"box-1\",host_name=\"h1\"}}"), t2, 1.0),
        ];
        for (query, at, want) in cases {
            let got = value(&prom, &query, at);
            assert!(close(got, want), "{query} at {at}: {got}, computed {want}");
        }
    }
    // A range query over both points: the API's matrix, one value per step.
    let range = prom
        .query_range(
            "perfops_requests_total{job=\"direct\"}",
            t1 as f64 / 1000.0,
            t2 as f64 / 1000.0,
            Duration::from_secs(10),
        )
        .expect("range query");
    let values: Vec<&str> = range["data"]["result"][0]["values"]
        .as_array()
        .map(|v| v.iter().filter_map(|p| p[1].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(values, ["40", "60"], "{range}");
    // The debug exporter printed what went through the Collector, under its OTLP name.
    let log = collector.log();
    assert!(log.contains("perfops.latency") && log.contains("ExponentialHistogram"), "{log}");
    // The names, exactly: no other series came of the pushes.
    let names = prom.query("count by (__name__) ({__name__=~\".+\"})", None).expect("names");
    let mut names: Vec<String> = names["data"]["result"]
        .as_array()
        .map(|r| r.iter().filter_map(|s| s["metric"]["__name__"].as_str().map(String::from)).collect())
        .unwrap_or_default();
    names.sort();
    assert_eq!(names, ["perfops_latency_seconds", "perfops_requests_total", "target_info"]);
}

/// Appends `value` as a protobuf varint.
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends field `field` of wire type 2 (length-delimited) holding `bytes`.
fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A remote-write 1.0 `WriteRequest` with one series (`labels`, sorted by name) and one sample,
/// in protobuf, framed as one snappy block of a single literal (valid snappy: the format lets
/// a compressor emit literals only).
fn write_request_v1(labels: &[(&str, &str)], value: f64, timestamp_ms: i64) -> Vec<u8> {
    let mut series = Vec::new();
    for (name, value) in labels {
        let mut label = Vec::new();
        bytes_field(&mut label, 1, name.as_bytes());
        bytes_field(&mut label, 2, value.as_bytes());
        bytes_field(&mut series, 1, &label);
    }
    let mut sample = vec![1 << 3 | 1]; // value: double, fixed 64 bits
    sample.extend_from_slice(&value.to_le_bytes());
    sample.push(2 << 3); // timestamp: int64, varint
    varint(&mut sample, timestamp_ms as u64);
    bytes_field(&mut series, 2, &sample);
    let mut request = Vec::new();
    bytes_field(&mut request, 1, &series);

    let mut block = Vec::new();
    varint(&mut block, request.len() as u64);
    let n = request.len() - 1;
    assert!(n < 256, "one literal of up to 256 bytes here");
    if n < 60 {
        block.push((n as u8) << 2);
    } else {
        block.extend_from_slice(&[60 << 2, n as u8]);
    }
    block.extend_from_slice(&request);
    block
}

/// What remote write 1.0 and 2.0 send: `Content-Type` and `Content-Encoding`.
const V1: &[(&str, &str)] =
    &[("Content-Type", "application/x-protobuf;proto=prometheus.WriteRequest"), ("Content-Encoding", "snappy")];
const V2: &[(&str, &str)] =
    &[("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request"), ("Content-Encoding", "snappy")];

#[test]
fn remote_write_1_0_made_by_hand_reads_back_and_the_1_0_only_option_refuses_2_0() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let prom = receivers::prometheus();
    let v1_only = receivers::prometheus_with(PrometheusOptions { remote_write_v1_only: true });
    let at = now_ms() - 5_000;
    let body = write_request_v1(&[("__name__", "handmade_total"), ("job", "rw")], 42.5, at);
    // Both take a 1.0 request: 204, and the sample reads back.
    for p in [&prom, &v1_only] {
        let sent = receivers::post_to(&p.remote_write_url(), V1, &body);
        assert!(matches!(sent, Ok((204, _))), "{sent:?}; log:\n{}", p.log());
        assert!(close(value(p, "handmade_total{job=\"rw\"}", at), 42.5));
    }
    // An empty 2.0 request (snappy of nothing: one zero byte) is valid: the default server
    // takes it, the 1.0-only one answers 415 naming what it accepts, which is what makes a
    // 2.0 sender fall back to 1.0.
    let sent = receivers::post_to(&prom.remote_write_url(), V2, &[0]);
    assert!(matches!(sent, Ok((204, _))), "{sent:?}");
    let sent = receivers::post_to(&v1_only.remote_write_url(), V2, &[0]);
    assert!(matches!(&sent, Ok((415, body)) if body.contains("only accepts prometheus.WriteRequest")), "{sent:?}");
    // Dropped, a server is gone at once: its port refuses, its process is reaped.
    let (addr, pid) = (v1_only.addr(), v1_only.pid());
    drop(v1_only);
    assert!(std::net::TcpStream::connect(addr).is_err(), "{addr} still answers");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "process {pid} still there");
}

/// One OTLP/JSON export of one delta point of the monotonic sum `perfops.requests` (service
/// `retry`) from `start_ms` to `end_ms`.
fn delta_sum(start_ms: i64, end_ms: i64, count: u64) -> Vec<u8> {
    let ns = |ms: i64| (i128::from(ms) * 1_000_000).to_string();
    let body = json!({ "resourceMetrics": [{
        "resource": { "attributes": [attr("service.name", "retry")] },
        "scopeMetrics": [{ "metrics": [{ "name": "perfops.requests", "unit": "{request}", "sum": {
            "aggregationTemporality": 1, "isMonotonic": true,
            "dataPoints": [{ "startTimeUnixNano": ns(start_ms), "timeUnixNano": ns(end_ms), "asInt": count.to_string() }],
        }}]}],
    }]});
    serde_json::to_vec(&body).expect("JSON")
}

#[test]
fn a_repeated_or_late_push_is_dropped_by_otlp_and_refused_by_remote_write() {
    if let Some(why) = receivers::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let prom = receivers::prometheus();
    let t0 = now_ms() - 40_000;
    // (start, end, count): each answered 200; what the series holds afterwards is checked below.
    let pushes = [
        // The first point: 40.
        (t0, t0 + 10_000, 40),
        // The same point again (a retry of a push that was taken): dropped, not 80.
        (t0, t0 + 10_000, 40),
        // The next second: 60.
        (t0 + 10_000, t0 + 20_000, 20),
        // A late point, ending before the last one: dropped without a word.
        (t0 + 5_000, t0 + 15_000, 7),
        // After a gap (its start after the previous end): added on, 65.
        (t0 + 25_000, t0 + 30_000, 5),
    ];
    for (start, end, count) in pushes {
        let sent = receivers::post_to(&prom.otlp_url(), JSON, &delta_sum(start, end, count));
        assert!(matches!(sent, Ok((200, _))), "{start}..{end}: {sent:?}");
    }
    prom.wait_for_data("perfops_requests_total{job=\"retry\"} == 65", VISIBLE).expect("the gap's point");
    for (at, want) in [(t0 + 10_000, 40.0), (t0 + 20_000, 60.0), (t0 + 30_000, 65.0)] {
        let got = value(&prom, "perfops_requests_total{job=\"retry\"}", at);
        assert!(close(got, want), "at {at}: {got}, want {want}");
    }

    // Remote write 1.0: (value, timestamp, status, what the answer says)
    let at = now_ms() - 5_000;
    let cases = [
        (1.0, at, 204, ""),
        // The same sample again: taken.
        (1.0, at, 204, ""),
        // Same timestamp, another value: refused.
        (2.0, at, 400, "duplicate sample for timestamp"),
        // Older than the series' last sample: refused.
        (3.0, at - 1_000, 400, "out of order sample"),
    ];
    for (v, t, status, says) in cases {
        let body = write_request_v1(&[("__name__", "retried_total"), ("job", "rw")], v, t);
        let sent = receivers::post_to(&prom.remote_write_url(), V1, &body);
        assert!(matches!(&sent, Ok((s, body)) if *s == status && body.contains(says)), "{v} at {t}: {sent:?}");
    }
}
