//! The lines of `watch.jsonl` and `probe.jsonl`: one type per file format, the one the engine's
//! watcher sends and the results writer writes ([`Sample`], [`ProbeResult`]), and the one the
//! report, `merge` and `compare` read back.
//!
//! It owns the shape of those lines and nothing else: what is watched and when is the engine's
//! (`perfops_engine::watch`), what a value means is the analysis'. It lives here, below both the
//! engine and the report, because they must not each declare the format: two types converted into
//! one another drift (the reader once took `ms` and `failures` as optional, the writer as always
//! there, and the conversion between them filled in zeros).
//!
//! Reading is lenient where files written by earlier versions may differ: a missing `source`,
//! `values`, `ok`, `status`, `ms`, `error`, `failures`, `restart` or `unready` reads as its
//! default, and a value written as `null` (a value that was not a finite number: serde_json writes
//! NaN and the infinities as `null`) reads as NaN, so that it is written back as `null` and a
//! chart shows a gap there. Writing is exact: a line read and written again is the same bytes
//! (the test below holds that against lines written by a real run).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One line of `watch.jsonl`: the values read from one source at one time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run's start when the read began (negative before it).
    pub t: f64,
    /// `"process"`, `"generator"`, `"prometheus <url>"`, `"json <url>"` or `"promql <url>"`.
    #[serde(default = "unnamed_source")]
    pub source: String,
    /// (name, value), written as a JSON object in this order; a value that is not a finite number
    /// is written as `null` and reads back as NaN.
    #[serde(default, serialize_with = "values_out", deserialize_with = "values_in")]
    pub values: Vec<(String, f64)>,
}

impl Sample {
    /// The value named `name`, if this sample has it.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.values.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }
}

/// What a line without a `source` is called: it was watched, from somewhere.
fn unnamed_source() -> String {
    "watch".into()
}

fn values_out<S: Serializer>(values: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(values.len()))?;
    for (name, value) in values {
        map.serialize_entry(name, value)?;
    }
    map.end()
}

fn values_in<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
    struct Values;
    impl<'de> Visitor<'de> for Values {
        type Value = Vec<(String, f64)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of numbers by name")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some((name, value)) = map.next_entry::<String, Option<f64>>()? {
                out.push((name, value.unwrap_or(f64::NAN)));
            }
            Ok(out)
        }
    }
    d.deserialize_map(Values)
}

/// The two probes that change what Kubernetes does with a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// Failing `failure_threshold` times in a row restarts the container.
    Liveness,
    /// Failing `failure_threshold` times in a row takes the pod out of its Services' endpoints.
    Readiness,
}

impl ProbeKind {
    /// `"liveness"` or `"readiness"`.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
        }
    }
}

/// One line of `probe.jsonl`: one probe check, and what Kubernetes would do after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Seconds since the run's start when the check began.
    pub t: f64,
    /// Which probe.
    pub probe: ProbeKind,
    /// Status 200..=399 within the timeout.
    #[serde(default)]
    pub ok: bool,
    /// The status, when a response came.
    #[serde(default)]
    pub status: Option<u16>,
    /// How long the check took, in milliseconds (at most about the timeout); 0 when not known.
    #[serde(default)]
    pub ms: f64,
    /// Why it failed, short: `timeout`, `connection refused`, `HTTP 503`, ...
    #[serde(default)]
    pub error: Option<String>,
    /// Consecutive failures, this one included (0 after a success, or when not known).
    #[serde(default)]
    pub failures: u32,
    /// Liveness: this failure reached the threshold; Kubernetes would restart the container now.
    #[serde(default)]
    pub restart: bool,
    /// Readiness: this failure reached the threshold; Kubernetes would stop sending it traffic.
    #[serde(default)]
    pub unready: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of a real run (`perfops run` of the day this type was made one, with `watch:`
    /// and two probes, one failing): every line reads, and written again says the same, values
    /// in the same order, so that results directories written before still read and `merge`
    /// writes what it read. (The same to the last bit but for serde_json's float parsing, which
    /// is not exact in its last bit without its `float_roundtrip` feature.)
    #[test]
    fn lines_of_a_real_run_read_and_write_back_unchanged() {
        let watch = include_str!("../../tests/fixtures/watched/watch.jsonl");
        let probe = include_str!("../../tests/fixtures/watched/probe.jsonl");
        for line in watch.lines() {
            let s: Sample = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(!s.values.is_empty(), "{line}");
            let at: Vec<usize> = s.values.iter().map(|(n, _)| line.find(&format!("{n:?}:")).unwrap()).collect();
            assert!(at.is_sorted(), "values out of their order: {line}");
            same(line, &serde_json::to_string(&s).unwrap());
        }
        let mut kinds = Vec::new();
        for line in probe.lines() {
            let p: ProbeResult = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            kinds.push((p.probe, p.ok));
            same(line, &serde_json::to_string(&p).unwrap());
        }
        assert!(kinds.contains(&(ProbeKind::Liveness, true)) && kinds.contains(&(ProbeKind::Readiness, false)));
    }

    /// Two JSON texts say the same: the same fields with the same values, numbers to 1e-12.
    fn same(want: &str, got: &str) {
        fn eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
            use serde_json::Value as V;
            match (a, b) {
                (V::Number(x), V::Number(y)) => {
                    let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                    (x - y).abs() <= 1e-12 * x.abs().max(1.0)
                }
                (V::Object(x), V::Object(y)) => {
                    x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| eq(v, w)))
                }
                _ => a == b,
            }
        }
        let (a, b): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(want).unwrap(), serde_json::from_str(got).unwrap());
        assert!(eq(&a, &b), "read {want}\nwrote {got}");
    }

    #[test]
    fn samples_read_leniently_and_write_in_order() {
        // (a line as read, its values, the line written back)
        type Values = Vec<(&'static str, f64)>;
        let cases: [(&str, Values, &str); 4] = [
            // Values in their order, not sorted: the writer's order is the watcher's.
            (
                r#"{"t":1.5,"source":"process","values":{"b":2.0,"a":0.5}}"#,
                vec![("b", 2.0), ("a", 0.5)],
                r#"{"t":1.5,"source":"process","values":{"b":2.0,"a":0.5}}"#,
            ),
            // An integer reads as a number (hand-made fixtures write `10`).
            (
                r#"{"t":0,"source":"x","values":{"workers":10}}"#,
                vec![("workers", 10.0)],
                r#"{"t":0.0,"source":"x","values":{"workers":10.0}}"#,
            ),
            // null, a value that was not finite, is NaN, and null again once written.
            (
                r#"{"t":2.0,"source":"x","values":{"a":null,"b":1.0}}"#,
                vec![("a", f64::NAN), ("b", 1.0)],
                r#"{"t":2.0,"source":"x","values":{"a":null,"b":1.0}}"#,
            ),
            // No source, no values: a line of an older writer still reads.
            (r#"{"t":3.0}"#, vec![], r#"{"t":3.0,"source":"watch","values":{}}"#),
        ];
        for (line, values, back) in cases {
            let s: Sample = serde_json::from_str(line).unwrap();
            let got: Vec<(&str, f64)> = s.values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            assert_eq!(got.len(), values.len(), "{line}");
            for ((gn, gv), (wn, wv)) in got.iter().zip(&values) {
                assert!(gn == wn && (gv == wv || gv.is_nan() && wv.is_nan()), "{line}: {got:?}");
            }
            assert_eq!(serde_json::to_string(&s).unwrap(), back);
        }
        // A value that is not a number is not a sample: the reader skips the line and says so.
        assert!(serde_json::from_str::<Sample>(r#"{"t":1,"values":{"a":"fast"}}"#).is_err());
    }

    #[test]
    fn probe_lines_read_leniently() {
        // A line with only what an older writer surely wrote: the rest is defaults.
        let p: ProbeResult = serde_json::from_str(r#"{"t":2.0,"probe":"readiness"}"#).unwrap();
        assert_eq!(
            p,
            ProbeResult {
                t: 2.0,
                probe: ProbeKind::Readiness,
                ok: false,
                status: None,
                ms: 0.0,
                error: None,
                failures: 0,
                restart: false,
                unready: false
            }
        );
        // A probe this perfops does not know is not read as another one.
        assert!(serde_json::from_str::<ProbeResult>(r#"{"t":2.0,"probe":"startup"}"#).is_err());
    }
}
