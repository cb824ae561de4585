//! The encoding, decoded back with the same messages; the protocol itself
//! is tested against a real Prometheus (crates/perfops/tests/push_rw.rs).

use std::time::Duration;

use perfops_core::measure::exponential::{Exponential, SCHEMA};
use perfops_core::measure::{FailureKind, Interval, Key, Stats};
use prost::Message;

use super::*;

fn meta() -> RunMeta {
    RunMeta {
        name: "orders".into(),
        started_at: "2026-11-22T04:30:00Z".into(),
        start: Some("2026-11-22T04:30:00.500Z".into()),
        ..RunMeta::default()
    }
}

/// A second of `n` requests of 5 ms and 9 ms in turn, one a timeout.
fn interval(index: u32, n: u64) -> Interval {
    let mut st = Stats { sent: n, completed: n - 1, arrivals_answered: n, ..Stats::default() };
    for k in 0..n {
        let d = Duration::from_millis(if k % 2 == 0 { 5 } else { 9 });
        st.latency.record(d);
        st.service.record(d);
        if k > 0 {
            st.latency_ok.record(d);
            st.service_ok.record(d);
        }
    }
    st.failures.add(FailureKind::Timeout);
    Interval {
        length: Duration::from_secs(1),
        stats: st.clone(),
        parts: vec![(Key { stage: 0, step: 0 }, st)],
        target: Some(10.0),
        ..Interval::empty(index)
    }
}

/// Two seconds, encoded as the output would (cumulative, from its start).
fn two_seconds(rw: &mut RemoteWrite) -> Vec<Item> {
    let names = ["orders".to_string()];
    let stages = ["warm".to_string()];
    rw.start(&meta());
    let ivs = [interval(0, 10), interval(1, 4)];
    ivs.iter()
        .enumerate()
        .map(|(k, iv)| {
            let s = Second {
                step_names: &names,
                stage_names: &stages,
                start: Duration::from_secs(k as u64),
                ..Second::new(iv, "warm")
            };
            rw.second(&s)
        })
        .collect()
}

fn unsnap(p: &Payload) -> Vec<u8> {
    snap::raw::Decoder::new().decompress_vec(&p.body).expect("snappy block format")
}

/// 2.0: the request decodes to what the batches say; labels through the
/// symbols (which start with ""), sorted; a series' two seconds in one
/// TimeSeries, oldest first; histograms native, cumulative; metadata on
/// every series; the version's headers.
#[test]
fn a_v2_request_decodes_back_to_the_batches() {
    let mut rw = RemoteWrite::new(false);
    let items = two_seconds(&mut rw);
    let payload = rw.request(&items.iter().collect::<Vec<_>>());
    assert_eq!(payload.content_type, "application/x-protobuf;proto=io.prometheus.write.v2.Request");
    assert_eq!(
        payload.headers,
        vec![("Content-Encoding", "snappy"), ("X-Prometheus-Remote-Write-Version", "2.0.0")]
    );
    let req = v2::Request::decode(unsnap(&payload).as_slice()).expect("a v2 request");
    assert_eq!(req.symbols[0], "", "symbols start with the empty string");
    let sym = |r: u32| req.symbols[r as usize].as_str();
    let labels = |ts: &v2::TimeSeries| -> Vec<(String, String)> {
        ts.labels_refs.chunks(2).map(|p| (sym(p[0]).to_string(), sym(p[1]).to_string())).collect()
    };
    let find = |name: &str, extra: Option<(&str, &str)>| {
        req.timeseries
            .iter()
            .find(|ts| {
                let l = labels(ts);
                l.contains(&("__name__".into(), name.into()))
                    && extra.is_none_or(|(k, v)| l.contains(&(k.to_string(), v.to_string())))
            })
            .unwrap_or_else(|| panic!("{name} {extra:?}"))
    };
    let latency = find("perfops_latency_seconds", None);
    assert_eq!(
        labels(latency),
        vec![
            ("__name__".to_string(), "perfops_latency_seconds".to_string()),
            ("instance".into(), "20261122T043000Z-orders".into()),
            ("job".into(), "perfops".into()),
            ("run".into(), "20261122T043000Z-orders".into()),
            ("scenario".into(), "orders".into()),
            ("stage".into(), "warm".into()),
            ("step".into(), "orders".into()),
        ],
        "sorted by name, with the job and instance an OTLP push gets"
    );
    assert_eq!(latency.histograms.len(), 2, "both seconds in one series");
    let (h0, h1) = (&latency.histograms[0], &latency.histograms[1]);
    assert_eq!((h0.count_int, h1.count_int), (Some(10), Some(14)), "cumulative");
    assert_eq!((h0.timestamp, h1.timestamp), (1_795_321_801_500, 1_795_321_802_500), "each second's end");
    assert_eq!((h0.reset_hint, h1.reset_hint), (prompb::RESET_UNKNOWN, prompb::RESET_NO));
    assert_eq!(h1.start_timestamp, 1_795_321_800_500, "counting since the series' first second");
    assert_eq!((h1.schema, h1.zero_threshold, h1.zero_count_int), (i32::from(SCHEMA), 0.0, Some(0)));
    // 5 ms and 9 ms: two buckets apart, so two spans; 7 and 7 of them.
    assert_eq!(h1.positive_spans.len(), 2);
    assert_eq!(h1.positive_deltas, vec![7, 0]);
    assert!((h1.sum - (7.0 * 0.005 + 7.0 * 0.009)).abs() < 1e-4, "{}", h1.sum);
    let md = latency.metadata.as_ref().expect("metadata");
    assert_eq!((md.r#type, sym(md.unit_ref)), (prompb::HISTOGRAM, "seconds"));
    assert!(sym(md.help_ref).starts_with("Latency from the intended start"));

    let sent = find("perfops_requests_sent_total", None);
    let values: Vec<(f64, i64)> = sent.samples.iter().map(|s| (s.value, s.start_timestamp)).collect();
    assert_eq!(values, vec![(10.0, 1_795_321_800_500), (14.0, 1_795_321_800_500)]);
    assert_eq!(sent.metadata.as_ref().map(|m| m.r#type), Some(prompb::COUNTER));
    let timeouts = find("perfops_requests_total", Some(("outcome", "timeout")));
    assert_eq!(timeouts.samples.iter().map(|s| s.value).collect::<Vec<_>>(), vec![1.0, 2.0]);
    let target = find("perfops_target_arrivals_per_second", None);
    assert_eq!(target.samples[0].start_timestamp, 0, "a gauge has no start");
    assert_eq!(target.metadata.as_ref().map(|m| m.r#type), Some(prompb::GAUGE));
}

/// After a 415 the same seconds go as 1.0: labels by value, metadata once
/// a family, histograms without 2.0's start; a second 415 is a refusal.
#[test]
fn a_415_falls_back_to_v1_which_decodes_back_to_the_batches() {
    let mut rw = RemoteWrite::new(false);
    let items = two_seconds(&mut rw);
    assert!(rw.refused(415), "2.0 -> 1.0");
    assert!(!rw.refused(415), "1.0 refused too: nothing else to try");
    assert!(!RemoteWrite::new(false).refused(400), "a 400 is no matter of format");
    let payload = rw.request(&items.iter().collect::<Vec<_>>());
    assert_eq!(payload.content_type, "application/x-protobuf");
    assert_eq!(payload.headers[1], ("X-Prometheus-Remote-Write-Version", "0.1.0"));
    let req = v1::WriteRequest::decode(unsnap(&payload).as_slice()).expect("a v1 request");
    let latency = req
        .timeseries
        .iter()
        .find(|ts| ts.labels.iter().any(|l| l.name == "__name__" && l.value == "perfops_latency_seconds"))
        .expect("latency");
    let names: Vec<&str> = latency.labels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["__name__", "instance", "job", "run", "scenario", "stage", "step"]);
    assert_eq!(latency.histograms.iter().map(|h| h.count_int).collect::<Vec<_>>(), vec![Some(10), Some(14)]);
    assert_eq!(latency.histograms[1].start_timestamp, 0, "not a 1.0 field");
    let families: Vec<&str> = req.metadata.iter().map(|m| m.metric_family_name.as_str()).collect();
    let mut unique = families.clone();
    unique.dedup();
    assert_eq!(families, unique, "each family once");
    let md = req.metadata.iter().find(|m| m.metric_family_name == "perfops_requests_total").expect("requests");
    assert_eq!((md.r#type, md.unit.as_str()), (prompb::COUNTER, ""));
}

/// A success without 2.0's Written fields is a 1.0 receiver that read an
/// empty request: 1.0 from then on; with them, 2.0 stays.
#[test]
fn a_v2_success_without_the_written_fields_falls_back_to_v1() {
    let written = vec![("x-prometheus-remote-write-samples-written".to_string(), b"12".to_vec())];
    let mut rw = RemoteWrite::new(false);
    assert!(!rw.taken(&written), "a 2.0 receiver's answer");
    assert_eq!(rw.version, Version::V2);
    assert!(rw.taken(&[]), "Prometheus 2.42's 204, no fields: again in 1.0");
    assert_eq!(rw.version, Version::V1);
    assert!(!rw.taken(&[]), "1.0 answers have no such fields");
}

/// The golden native histogram, by hand: buckets -3, -2, -1, 4 and 6
/// holding 2, 5, 1, 7 and 1 are three spans (from -3, 3 long; 4 after -1's
/// end, 1 long; 1 after 4, 1 long) and the deltas 2, +3, -4, +6, -6.
#[test]
fn native_histogram_spans_and_deltas_by_hand() {
    let e = Exponential {
        schema: 5,
        count: 16,
        sum_s: 1.5,
        min_s: 0.9,
        max_s: 1.2,
        buckets: vec![(-3, 2), (-2, 5), (-1, 1), (4, 7), (6, 1)],
    };
    let h = native(&e, 1_000, prompb::RESET_NO, 500);
    let spans: Vec<(i32, u32)> = h.positive_spans.iter().map(|s| (s.offset, s.length)).collect();
    assert_eq!(spans, vec![(-3, 3), (4, 1), (1, 1)]);
    assert_eq!(h.positive_deltas, vec![2, 3, -4, 6, -6]);
    assert_eq!((h.count_int, h.sum, h.schema, h.timestamp), (Some(16), 1.5, 5, 1_000));
    // An empty histogram (a part whose requests all failed: no successes) is no spans at all.
    let h = native(&Exponential::empty(5), 1_000, prompb::RESET_UNKNOWN, 0);
    assert!(h.positive_spans.is_empty() && h.positive_deltas.is_empty());
    assert_eq!(h.count_int, Some(0));
}

/// What ARG may be: a URL, and `#watched`; nothing else.
#[test]
fn arg_is_a_url_and_one_option() {
    // (arg, error or none)
    let cases = [
        (None, Some("say where")),                                                // nothing
        (Some("http://127.0.0.1:9/api/v1/write#nope"), Some("unknown option `#nope`")), // an option unknown
        (Some("localhost:9090"), Some("scheme `localhost`")),                       // no scheme: the host is taken for one
        (Some("http://127.0.0.1:9/api/v1/write"), None),                            // the usual
        (Some("http://127.0.0.1:9/api/v1/write#watched"), None),                    // with the watched metrics
    ];
    for (arg, want) in cases {
        match (make(arg), want) {
            (Ok(_), None) => {}
            (Err(e), Some(w)) => assert!(e.contains(w), "{arg:?}: {e}"),
            (Ok(_), Some(w)) => panic!("{arg:?}: made, not `{w}`"),
            (Err(e), None) => panic!("{arg:?}: {e}"),
        }
    }
}
