//! The answer of Prometheus' HTTP API to an instant query (`GET /api/v1/query?query=Q&time=T`),
//! as the series a watch keeps: one value per label set.
//!
//! It owns the reading of the JSON envelope (`status`, `data.resultType`, `data.result`,
//! `errorType`/`error`, `warnings`) and of the values in it: Prometheus writes sample values as
//! strings (`"12"`, `"NaN"`, `"+Inf"`, `"-Inf"`) beside a float timestamp, because JSON has no
//! non-finite numbers. A `vector` gives one series per label set; a `scalar` one series without
//! labels; a `matrix` (a range selector in an instant query) its series' last values. A series
//! that carries a native `histogram` instead of a `value` is skipped with a warning: it is no
//! single number. It does not own the request (the engine builds the URL, sends it and times it
//! out) nor the naming of series in `watch.jsonl` ([`Series::key`] gives the key; the caller picks
//! the name). It never panics, whatever the bytes; a property test and a corpus say so.
//!
//! ```text
//!   {"status":"success","data":{"resultType":"vector","result":[
//!       {"metric":{"__name__":"puma_busy_threads","pod":"orders-1"},"value":[1700000000.5,"3"]}]}}
//!   -> [ Series { labels: [pod=orders-1], t: 1700000000.5, value: 3.0 } ]   (__name__ dropped)
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::prometheus::SeriesKey;

/// One series of an instant query's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its labels, sorted by name, without `__name__` (the query's name stands for it).
    pub labels: Vec<(String, String)>,
    /// The evaluation timestamp Prometheus gives, unix seconds.
    pub t: f64,
    /// The value; may be NaN or infinite, as Prometheus said.
    pub value: f64,
}

impl Series {
    /// The key of this series under the query's `name`: `name` alone, or `name{pod="a"}`.
    pub fn key(&self, name: &str) -> SeriesKey {
        SeriesKey::new(name, self.labels.iter().cloned())
    }
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The series, in the order Prometheus gave them.
    pub series: Vec<Series>,
    /// Prometheus' own warnings, and the parts of the answer that were skipped.
    pub warnings: Vec<String>,
}

/// Why an answer holds no values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromqlError {
    /// The body is not the API's JSON envelope.
    #[error("not a Prometheus API answer: {0}")]
    NotJson(String),
    /// `"status":"error"`: Prometheus refused or failed the query.
    #[error("{error_type}: {error}")]
    Query {
        /// `bad_data`, `execution`, `timeout`, `canceled`, `internal`, `unavailable`, ...
        error_type: String,
        /// Prometheus' message.
        error: String,
    },
    /// A result type that holds no number (`string`) or that this version does not know.
    #[error("result type `{0}` holds no number")]
    ResultType(String),
    /// The envelope is JSON but its parts are not where the API puts them.
    #[error("malformed answer: {0}")]
    Malformed(String),
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Value,
}

#[derive(Deserialize)]
struct Instant {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<(f64, String)>,
    #[serde(default)]
    values: Option<Vec<(f64, String)>>,
    #[serde(default)]
    histogram: Option<Value>,
    #[serde(default)]
    histograms: Option<Value>,
}

/// Parse the body of an instant query's answer (whatever the HTTP status: Prometheus answers
/// errors with the same envelope and a 400, 422 or 503).
pub fn parse_answer(body: &[u8]) -> Result<Answer, PromqlError> {
    let env: Envelope = serde_json::from_slice(body).map_err(|e| PromqlError::NotJson(short(&e.to_string())))?;
    let mut warnings = env.warnings;
    if env.status != "success" {
        return Err(PromqlError::Query {
            error_type: env.error_type.unwrap_or_else(|| env.status.clone()),
            error: env.error.unwrap_or_else(|| "no message".into()),
        });
    }
    let data = env.data.ok_or_else(|| PromqlError::Malformed("no `data`".into()))?;
    let malformed = |e: serde_json::Error| PromqlError::Malformed(short(&e.to_string()));
    let mut series = Vec::new();
    match data.result_type.as_str() {
        "scalar" => {
            let (t, v): (f64, String) = serde_json::from_value(data.result).map_err(malformed)?;
            series.push(Series { labels: Vec::new(), t, value: value(&v)? });
        }
        "vector" | "matrix" => {
            let items: Vec<Instant> = serde_json::from_value(data.result).map_err(malformed)?;
            for item in items {
                let labels: Vec<(String, String)> = item.metric.into_iter().filter(|(k, _)| k != "__name__").collect();
                let last = match (item.value, item.values) {
                    (Some(v), _) => Some(v),
                    (None, Some(vs)) => vs.into_iter().last(),
                    (None, None) => None,
                };
                match last {
                    Some((t, v)) => series.push(Series { labels, t, value: value(&v)? }),
                    None if item.histogram.is_some() || item.histograms.is_some() => {
                        let key = SeriesKey::new("", labels);
                        warnings.push(format!("{key}: a native histogram, not a number: skipped"));
                    }
                    // A matrix series with no points in its range: nothing to say.
                    None => {}
                }
            }
        }
        other => return Err(PromqlError::ResultType(other.to_string())),
    }
    Ok(Answer { series, warnings })
}

/// A sample value as Prometheus writes it: a Go float (`"1e+06"`, `"NaN"`, `"+Inf"`, `"-Inf"`).
fn value(text: &str) -> Result<f64, PromqlError> {
    // Rust reads every one of Go's spellings (`inf` and `NaN` in any case, an explicit `+`); what
    // it reads beyond them (`infinity`) Prometheus never writes and is harmless.
    text.trim().parse::<f64>().map_err(|_| PromqlError::Malformed(format!("value {:?} is not a number", short(text))))
}

/// At most 200 characters of `text`: an error line, not a page.
fn short(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> Result<Vec<(String, f64)>, PromqlError> {
        let a = parse_answer(body.as_bytes())?;
        Ok(a.series.iter().map(|s| (s.key("q").to_string(), s.value)).collect())
    }

    #[test]
    fn answers_become_series() {
        // (what, body, the series wanted: key and value)
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, f64)]);
        let cases: &[Case] = &[
            // one series without labels (sum(...)): the query's name alone
            (
                "sum",
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"3"]}]}}"#,
                &[("q", 3.0)],
            ),
            // several pods kept apart, __name__ dropped, labels sorted
            (
                "pods",
                r#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"__name__":"x","pod":"b","ns":"p"},"value":[1,"1"]},
                {"metric":{"__name__":"x","pod":"a","ns":"p"},"value":[1,"2.5"]}]}}"#,
                &[(r#"q{ns="p",pod="b"}"#, 1.0), (r#"q{ns="p",pod="a"}"#, 2.5)],
            ),
            // an empty vector: nothing, not an error
            ("empty", r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#, &[]),
            // a scalar (`time()`, `scalar(...)`)
            (
                "scalar",
                r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"42"]}}"#,
                &[("q", 42.0)],
            ),
            // a range selector: the last point of each series
            (
                "matrix",
                r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"job":"j"},"values":[[1,"1"],[2,"7"]]}]}}"#,
                &[(r#"q{job="j"}"#, 7.0)],
            ),
            // Go's exponent form and extra fields (stats, infos) ignored
            (
                "exp",
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1e+06"]}],"stats":{}},"infos":[]}"#,
                &[("q", 1e6)],
            ),
        ];
        for (what, body, want) in cases {
            let got = one(body).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want: Vec<(String, f64)> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn special_values_are_read_as_go_writes_them() {
        for (text, want) in [("+Inf", f64::INFINITY), ("-Inf", f64::NEG_INFINITY), ("0", 0.0), ("-1.5", -1.5)] {
            assert_eq!(value(text), Ok(want), "{text}");
        }
        assert!(value("NaN").unwrap().is_nan());
        assert!(value("twelve").is_err());
    }

    #[test]
    fn errors_and_warnings() {
        // Prometheus refused the query (HTTP 400 with this body)
        let e = parse_answer(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#);
        assert_eq!(e.unwrap_err().to_string(), "bad_data: parse error at char 5");
        // a proxy's HTML page
        assert!(matches!(parse_answer(b"<html>502</html>"), Err(PromqlError::NotJson(_))));
        // a string result holds no number
        let s = br#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#;
        assert_eq!(parse_answer(s), Err(PromqlError::ResultType("string".into())));
        // success without data
        assert!(matches!(parse_answer(br#"{"status":"success"}"#), Err(PromqlError::Malformed(_))));
        // a value that is no float
        let bad = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#;
        assert!(matches!(parse_answer(bad), Err(PromqlError::Malformed(_))));
        // Prometheus' warnings kept; a native histogram skipped with one
        let w = br#"{"status":"success","warnings":["PromQL info: metric might not be a counter"],
            "data":{"resultType":"vector","result":[{"metric":{"a":"b"},"histogram":[1,{"count":"2"}]}]}}"#;
        let a = parse_answer(w).unwrap();
        assert!(a.series.is_empty());
        assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
        assert!(a.warnings[1].contains("native histogram"), "{:?}", a.warnings);
    }
}
