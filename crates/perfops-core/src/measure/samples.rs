//! The first few failing exchanges of each (step, failure kind), kept as
//! examples of what a count counts (#32): when `create-order` failed 523
//! times as `http_4xx`, one of them says `status: expected 201, found 422`
//! and shows the exchange as it was: the request line and header fields
//! (redacted), the response's status, header fields and the first KiB of
//! its body, and when it was due, sent and answered.
//!
//! This module owns the bound and the merge; it does not own what a sample
//! holds (the engine fills it, redacted and escaped before it leaves the
//! worker) nor how it is shown (perfops-report).
//!
//! Bounded twice, so that 100,000 failing requests cost no more memory than
//! ten: each worker keeps its first [`PER_KEY`] samples of each key (and
//! [`MAX_KEYS`] keys), and asks [`Sampler::wants`] before it builds one, so a
//! failure past the bound costs a short search and nothing else; a success
//! costs nothing at all. The collector merges the workers' samples at the
//! edge ([`FailureSamples::merge`]) and keeps, per key, the first
//! [`PER_KEY`] by time: merging is associative and order-free, like
//! [`Stats::merge`](super::Stats::merge), whatever worker or second a sample
//! came from.
//!
//! Samples travel with their second ([`Interval::samples`](super::Interval)),
//! so that every output sees them in the second they happened; merged per
//! second they stay bounded the same way (at most [`PER_KEY`] of a key and
//! [`MAX_KEYS`] keys in any [`FailureSamples`]). What one sample holds is
//! bounded too ([`BODY_HEAD_BYTES`], [`MAX_HEADERS`], [`HEADER_BYTES`]), and
//! [`FailureSample::bounded`] cuts and re-escapes one that came from
//! elsewhere (an agent) before it is kept.

use serde::{Deserialize, Serialize};

use super::FailureKind;
use crate::printable;

/// Samples kept of each (step, failure kind).
pub const PER_KEY: usize = 3;

/// Keys (step, failure kind) that keep samples; failures of keys beyond
/// these are counted, not sampled (a scenario of 40 steps that fail in 5
/// ways each still keeps 3 x 64 samples at most).
pub const MAX_KEYS: usize = 64;

/// Bytes of a response body a sample keeps: a KiB, enough for a JSON error
/// or the title and first lines of an HTML error page.
pub const BODY_HEAD_BYTES: usize = 1024;

/// Bytes of a body the one-line [`FailureSample::describe`] quotes: a line
/// of the terminal, not the whole head.
pub const BODY_LINE_BYTES: usize = 200;

/// Header fields a sample keeps of a request or a response (the first ones).
pub const MAX_HEADERS: usize = 32;

/// Bytes of header fields (names and values) a sample keeps of a request or
/// a response, all fields together; a longer value is cut at
/// [`HEADER_VALUE_BYTES`].
pub const HEADER_BYTES: usize = 4096;

/// Bytes of one header value a sample keeps (`…` when cut).
pub const HEADER_VALUE_BYTES: usize = 256;

/// Bytes of a request line a sample keeps (`…` when cut).
pub const REQUEST_LINE_BYTES: usize = 1024;

/// Bytes of a failed check's text a sample keeps (`…` when cut).
pub const CHECK_BYTES: usize = 512;

/// When a failing exchange happened on its load's clock, and what it took.
/// All in seconds from the start of the load (`due`, `sent`) or in
/// milliseconds (`latency_ms`, `service_ms`), to the microsecond.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// When it was due: the schedule's time for an open model's arrival,
    /// the start of the request for a closed model's user.
    pub due: f64,
    /// When it went out; none when it never did (the connection failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<f64>,
    /// From when it was due to its end: what the latency counted.
    pub latency_ms: f64,
    /// From when it went out to its end: what the service time counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ms: Option<f64>,
}

/// One failing exchange, as results show it: `summary.json`'s
/// `failures[].samples[]` and a line of `failures.jsonl`. Every string is
/// printable-escaped and redacted before it is kept; the fields after
/// `body` are absent from results written before they were kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailureSample {
    /// When it ended, seconds from the start of its load (the run's, for
    /// `run`; each try's, for `limit`), to the millisecond.
    pub t: f64,
    /// The response's status (HTTP, or gRPC's code); none without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The check or save that failed, expected vs found
    /// (`status: expected 201, found 422`, `save id: $.id matched nothing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The first [`BODY_HEAD_BYTES`] bytes of the response body,
    /// printable-escaped, secrets redacted (`…` when there was more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The request line as sent, secrets redacted: `GET /orders?key=<redacted>
    /// HTTP/1.1`; for HTTP/2 and gRPC `POST /pkg.Svc/Method HTTP/2`, for
    /// WebSocket the upgrade's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The request's header fields as sent (name, value), values that are
    /// not harmless redacted (`Authorization`, `Cookie`, a secret variable's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_headers: Vec<(String, String)>,
    /// The response's header fields (name, value), `Set-Cookie` and
    /// credential-like ones redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub response_headers: Vec<(String, String)>,
    /// When it was due and sent, and what it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

impl FailureSample {
    /// One line saying what failed and what came, for a failure of `kind`
    /// (a failed setup, the terminal's top failures):
    /// `status: expected 200, found 401 (body: {"error":"bad password"})`,
    /// `body_contains "ok": not found (status 200)`, `http_5xx (status 503)`,
    /// `connect_refused`.
    pub fn describe(&self, kind: FailureKind) -> String {
        let mut out = match (&self.check, self.status) {
            (Some(check), Some(status)) if !check.starts_with("status:") => format!("{check} (status {status})"),
            (Some(check), _) => check.clone(),
            (None, Some(status)) => format!("{} (status {status})", kind.name()),
            (None, None) => kind.name().to_string(),
        };
        if let Some(body) = &self.body {
            out.push_str(&format!(" (body: {})", cut(body, BODY_LINE_BYTES)));
        }
        out
    }

    /// This sample within the bounds a kept one has, every string
    /// printable-escaped: what a sample from elsewhere (an agent, a file)
    /// becomes before it is kept. A sample the engine made is unchanged
    /// (it was made within them, and escaping an escaped string changes
    /// nothing: `\` and `\u{..}` are printable).
    pub fn bounded(mut self) -> FailureSample {
        let t = |x: f64| if x.is_finite() { x } else { 0.0 };
        self.t = t(self.t);
        self.check = self.check.map(|c| cut(&printable::escape(&c), CHECK_BYTES));
        self.body = self.body.map(|b| cut(&printable::escape(&b), BODY_HEAD_BYTES));
        self.request = self.request.map(|r| cut(&printable::escape(&r), REQUEST_LINE_BYTES));
        self.request_headers = bounded_fields(&self.request_headers);
        self.response_headers = bounded_fields(&self.response_headers);
        self.timings = self.timings.map(|x| Timings {
            due: t(x.due),
            sent: x.sent.map(t),
            latency_ms: t(x.latency_ms),
            service_ms: x.service_ms.map(t),
        });
        self
    }
}

/// `text` cut to at most `bytes` bytes at a character boundary, `…` added
/// when cut (its three bytes within the bound).
pub fn cut(text: &str, bytes: usize) -> String {
    if text.len() <= bytes {
        return text.to_string();
    }
    let mut end = bytes.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Header fields within a sample's bounds: the first [`MAX_HEADERS`], each
/// name and value escaped (a name cut like a value), values cut at
/// [`HEADER_VALUE_BYTES`], until [`HEADER_BYTES`] are kept.
pub fn bounded_fields<N: AsRef<str>, V: AsRef<str>>(fields: &[(N, V)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut bytes = 0;
    for (name, value) in fields.iter().take(MAX_HEADERS) {
        let name = cut(&printable::escape(name.as_ref()), HEADER_VALUE_BYTES);
        let value = cut(&printable::escape(value.as_ref()), HEADER_VALUE_BYTES);
        bytes += name.len() + value.len();
        if bytes > HEADER_BYTES {
            break;
        }
        out.push((name, value));
    }
    out
}

/// What samples are keyed by: a step (its global index) and a failure kind.
pub type SampleKey = (u16, FailureKind);

/// A worker's side: which keys have had their [`PER_KEY`] samples over the
/// whole run, and the samples taken since the last [`Sampler::take`].
#[derive(Debug, Default)]
pub struct Sampler {
    /// Samples taken of each key so far (at most [`MAX_KEYS`] keys).
    taken: Vec<(SampleKey, u8)>,
    fresh: Vec<(SampleKey, FailureSample)>,
}

impl Sampler {
    /// True when a failure of `key` should be sampled: build the sample
    /// then, and [`Sampler::keep`] it. Never allocates.
    pub fn wants(&self, key: SampleKey) -> bool {
        match self.taken.iter().find(|(k, _)| *k == key) {
            Some((_, n)) => usize::from(*n) < PER_KEY,
            None => self.taken.len() < MAX_KEYS,
        }
    }

    /// Keep `sample` of `key` (when [`Sampler::wants`] it; else it is let go).
    pub fn keep(&mut self, key: SampleKey, sample: FailureSample) {
        if !self.wants(key) {
            return;
        }
        match self.taken.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => self.taken.push((key, 1)),
        }
        self.fresh.push((key, sample));
    }

    /// The samples taken since the last call (an empty `Vec`, which
    /// allocates nothing, when none were).
    pub fn take(&mut self) -> Vec<(SampleKey, FailureSample)> {
        std::mem::take(&mut self.fresh)
    }
}

/// The collector's side: the first [`PER_KEY`] samples of each key by time,
/// over every worker (and, merged again, every generator).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailureSamples {
    /// By key, in order of key; each key's samples in order of time.
    keys: Vec<(SampleKey, Vec<FailureSample>)>,
}

impl FailureSamples {
    /// Add one sample, keeping the first [`PER_KEY`] of its key by time
    /// (ties: the one already kept).
    pub fn add(&mut self, key: SampleKey, sample: FailureSample) {
        let at = match self.keys.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => i,
            Err(i) => {
                if self.keys.len() >= MAX_KEYS {
                    return;
                }
                self.keys.insert(i, (key, Vec::new()));
                i
            }
        };
        let list = &mut self.keys[at].1;
        let pos = list.partition_point(|s| s.t <= sample.t);
        if pos < PER_KEY {
            list.insert(pos, sample);
            list.truncate(PER_KEY);
        }
    }

    /// Merge `other` in: the first [`PER_KEY`] of each key by time.
    pub fn merge(&mut self, other: &FailureSamples) {
        for (key, list) in &other.keys {
            for s in list {
                self.add(*key, s.clone());
            }
        }
    }

    /// Every key with its samples, in order of key (step, then kind).
    pub fn iter(&self) -> impl Iterator<Item = (SampleKey, &[FailureSample])> {
        self.keys.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// The samples of `key`, first by time.
    pub fn of(&self, key: SampleKey) -> &[FailureSample] {
        self.keys.iter().find(|(k, _)| *k == key).map_or(&[], |(_, v)| v.as_slice())
    }

    /// Samples kept, all keys together.
    pub fn len(&self) -> usize {
        self.keys.iter().map(|(_, v)| v.len()).sum()
    }

    /// No sample kept.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every sample, taken out (the keys too): what a second hands on.
    pub fn drain(&mut self) -> impl Iterator<Item = (SampleKey, FailureSample)> + '_ {
        self.keys.drain(..).flat_map(|(k, v)| v.into_iter().map(move |s| (k, s)))
    }
}

/// What a stream of samples over a whole run keeps (the lines of
/// `failures.jsonl`, written as the seconds come): the first [`PER_KEY`] of
/// each key as they come, and [`MAX_KEYS`] keys, so that the file is
/// bounded whatever the failure rate and however long the run. Seconds come
/// in order, so "as they come" is first by time but for samples of one
/// second, which are in order of time among themselves.
#[derive(Debug, Default)]
pub struct SampleBound {
    taken: Vec<(SampleKey, u8)>,
}

impl SampleBound {
    /// True (and counted) when a sample of `key` is still wanted.
    pub fn admit(&mut self, key: SampleKey) -> bool {
        let full = self.taken.len() >= MAX_KEYS;
        match self.taken.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) if usize::from(*n) < PER_KEY => {
                *n += 1;
                true
            }
            Some(_) => false,
            None if !full => {
                self.taken.push((key, 1));
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample(t: f64) -> FailureSample {
        FailureSample { t, status: Some(422), ..FailureSample::default() }
    }

    /// #32: 100,000 failing requests of one key keep `PER_KEY` samples on
    /// the worker, and failures of more keys than `MAX_KEYS` keep none of
    /// the extra keys: memory bounded whatever the count.
    #[test]
    fn a_hundred_thousand_failures_keep_a_bounded_number_of_samples() {
        let mut sampler = Sampler::default();
        let mut merged = FailureSamples::default();
        for i in 0..100_000u32 {
            // Steps 0..200 in turn, two kinds: 400 keys in all.
            let key = ((i % 200) as u16, if i % 2 == 0 { FailureKind::Http4xx } else { FailureKind::CheckFailed });
            if sampler.wants(key) {
                sampler.keep(key, sample(f64::from(i)));
            }
            if i % 1000 == 999 {
                for (k, s) in sampler.take() {
                    merged.add(k, s);
                }
            }
        }
        assert_eq!(merged.iter().count(), MAX_KEYS, "keys beyond the bound are counted, not sampled");
        assert_eq!(merged.len(), MAX_KEYS * PER_KEY, "each key keeps its first few");
        assert!(sampler.take().is_empty(), "nothing taken past the bound");
        assert!(!sampler.wants((0, FailureKind::Http4xx)), "a full key is not sampled again");
    }

    /// #32: a sample says what failed and what came, in one line.
    #[test]
    fn a_sample_describes_itself() {
        let s = |status: Option<u16>, check: Option<&str>, body: Option<&str>| FailureSample {
            t: 0.0,
            status,
            check: check.map(String::from),
            body: body.map(String::from),
            ..FailureSample::default()
        };
        use FailureKind::*;
        // (sample, kind, line)
        let cases = [
            // a status the step did not expect: the check says it all, with the body
            (
                s(Some(401), Some("status: expected 200, found 401"), Some(r#"{"error":"bad password"}"#)),
                Http4xx,
                r#"status: expected 200, found 401 (body: {"error":"bad password"})"#,
            ),
            // a body check that failed: its status beside it
            (
                s(Some(200), Some(r#"body_contains "ok": not found"#), None),
                CheckFailed,
                r#"body_contains "ok": not found (status 200)"#,
            ),
            // a 5xx with no `expect`: the kind and the status
            (s(Some(503), None, Some("busy")), Http5xx, "http_5xx (status 503) (body: busy)"),
            // no answer at all: the kind alone
            (s(None, None, None), ConnectRefused, "connect_refused"),
        ];
        for (i, (sample, kind, want)) in cases.into_iter().enumerate() {
            assert_eq!(sample.describe(kind), want, "case {i}");
        }
    }

    /// A sample from elsewhere (an agent, a file) is held to a kept one's
    /// bounds and escaped before it is kept; one within them is unchanged.
    #[test]
    fn a_sample_from_elsewhere_is_bounded_and_escaped() {
        let big = "x".repeat(10 * BODY_HEAD_BYTES);
        let many: Vec<(String, String)> = (0..1000).map(|i| (format!("X-{i}"), "v".repeat(100))).collect();
        let hostile = FailureSample {
            t: f64::NAN,
            status: Some(500),
            check: Some(big.clone()),
            body: Some(format!("<script>\x1b[2J{big}")),
            request: Some(format!("GET /\r\nX-Forged: 1 {big}")),
            request_headers: many.clone(),
            response_headers: vec![("Set-Cookie\n".into(), "a\u{202e}b".into())],
            timings: Some(Timings { due: f64::INFINITY, sent: Some(1.0), latency_ms: -0.0, service_ms: None }),
        };
        let b = hostile.bounded();
        assert_eq!(b.t, 0.0, "a time that is no number reads as 0");
        assert!(b.check.as_ref().unwrap().len() <= CHECK_BYTES);
        let body = b.body.as_ref().unwrap();
        assert!(body.len() <= BODY_HEAD_BYTES && body.ends_with('…'), "cut and marked");
        assert!(body.starts_with("<script>\\u{1b}[2J"), "escaped, not dropped (HTML escapes it later): {body}");
        let line = b.request.as_ref().unwrap();
        assert!(!line.contains('\r') && !line.contains('\n') && line.len() <= REQUEST_LINE_BYTES, "{line}");
        assert!(b.request_headers.len() <= MAX_HEADERS);
        let bytes: usize = b.request_headers.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(bytes <= HEADER_BYTES, "{bytes} bytes of fields");
        assert_eq!(b.response_headers, vec![("Set-Cookie\\n".to_string(), "a\\u{202e}b".to_string())]);
        assert_eq!(b.timings.unwrap().due, 0.0);
        // Within the bounds and printable already: unchanged.
        let fine = FailureSample {
            t: 1.5,
            status: Some(404),
            body: Some("not found".into()),
            request: Some("GET /missing HTTP/1.1".into()),
            request_headers: vec![("Authorization".into(), "<redacted>".into())],
            ..FailureSample::default()
        };
        assert_eq!(fine.clone().bounded(), fine);
        // A cut never splits a character, and keeps the mark within the bound.
        assert_eq!(cut("ééé", 5), "é…");
        assert_eq!(cut("abcdef", 5), "ab…");
        assert_eq!(cut("abc", 5), "abc");
    }

    /// `failures.jsonl` keeps the first few of each key as they come, and
    /// no more keys than a generator keeps, however many come.
    #[test]
    fn a_run_long_bound_admits_the_first_few_of_each_key() {
        let mut bound = SampleBound::default();
        let mut admitted = 0;
        for i in 0..100_000u32 {
            let key = ((i % 500) as u16, FailureKind::Http4xx);
            admitted += usize::from(bound.admit(key));
        }
        assert_eq!(admitted, MAX_KEYS * PER_KEY);
        assert!(!bound.admit((0, FailureKind::Http4xx)), "a full key");
        assert!(!bound.admit((499, FailureKind::Timeout)), "a key past the bound");
    }

    /// The merge keeps the first `PER_KEY` by time, case by case.
    #[test]
    fn the_merge_keeps_the_first_by_time() {
        let key = (1, FailureKind::Http4xx);
        // (times added, times kept)
        let cases: [(&[f64], &[f64]); 4] = [
            // fewer than the bound: all, in order of time
            (&[2.0, 1.0], &[1.0, 2.0]),
            // more: the first three by time, wherever they came in
            (&[5.0, 4.0, 3.0, 2.0, 1.0], &[1.0, 2.0, 3.0]),
            // a late worker's early sample still counts
            (&[1.0, 2.0, 3.0, 0.5], &[0.5, 1.0, 2.0]),
            // ties keep the one already kept (and the bound)
            (&[1.0, 1.0, 1.0, 1.0], &[1.0, 1.0, 1.0]),
        ];
        for (i, (added, kept)) in cases.iter().enumerate() {
            let mut m = FailureSamples::default();
            for &t in *added {
                m.add(key, sample(t));
            }
            let got: Vec<f64> = m.of(key).iter().map(|s| s.t).collect();
            assert_eq!(got, *kept, "case {i}");
        }
    }

    proptest! {
        /// Merging is associative and order-free: per worker, per second or
        /// per generator gives the same samples.
        #[test]
        fn merging_is_order_free(
            parts in prop::collection::vec(prop::collection::vec((0u16..3, 0u32..50), 0..8), 1..5),
        ) {
            let build = |list: &[(u16, u32)]| {
                let mut m = FailureSamples::default();
                for &(step, t) in list {
                    m.add((step, FailureKind::Http5xx), sample(f64::from(t)));
                }
                m
            };
            let built: Vec<FailureSamples> = parts.iter().map(|p| build(p)).collect();
            let mut forward = FailureSamples::default();
            for b in &built {
                forward.merge(b);
            }
            let mut backward = FailureSamples::default();
            for b in built.iter().rev() {
                backward.merge(b);
            }
            let all: Vec<(u16, u32)> = parts.concat();
            let times = |m: &FailureSamples| -> Vec<(u16, Vec<f64>)> {
                m.iter().map(|(k, v)| (k.0, v.iter().map(|s| s.t).collect())).collect()
            };
            prop_assert_eq!(times(&forward), times(&backward));
            prop_assert_eq!(times(&forward), times(&build(&all)));
        }
    }
}
