//! The scrape loops: a Prometheus endpoint or a JSON stats endpoint, fetched every `every` on its
//! own thread, and what their bodies become as sample values.
//!
//! It owns the naming of values (a Prometheus series as `SeriesKey` displays it, PromQL-style; a
//! JSON field by the name the plan gives it), which series are kept (gauges and untyped as they
//! are, counters and the `_sum`/`_count` of histograms and summaries as per-second rates, buckets
//! left out) and when a problem is worth an event. The grammar and the rate arithmetic are
//! `perfops_core::telemetry::prometheus`'s; the JSONPath evaluation is the scenario's
//! [`Extractor`]'s.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use perfops_core::scenario::extract::{Extractor, ParsedBody};
use perfops_core::telemetry::prometheus::{Family, gauges, parse_lenient, rates};
use url::Url;

use super::fetch::{self, FetchError, Request, Response};
use super::{Ctx, Sample, Slots, Tls, WatchEvent};

/// How every scrape is made.
#[derive(Clone)]
pub(super) struct Reads {
    pub every: Duration,
    pub timeout: Duration,
    pub tls: Tls,
}

const USER_AGENT: &str = concat!("perfops/", env!("CARGO_PKG_VERSION"));
/// The text format perfops parses; a target that also speaks OpenMetrics or protobuf picks this.
const PROMETHEUS_ACCEPT: &str = "text/plain;version=0.0.4;q=1,*/*;q=0.1";

/// Scrape `url` until stopped.
pub(super) fn prometheus(ctx: &Ctx, reads: &Reads, url: &Url) {
    let source = format!("prometheus {url}");
    let mut state = Prometheus::default();
    scrape_loop(ctx, reads, url, &source, PROMETHEUS_ACCEPT, |t, resp| {
        let (values, problem) = state.update(&String::from_utf8_lossy(&resp.body), t);
        if let Some(message) = problem
            && !ctx.problem(t, &source, message)
        {
            return false;
        }
        values.is_empty() || ctx.send(WatchEvent::Sample(Sample { t, source: source.clone(), values }))
    });
}

/// Fetch `url` every `every` and read the named fields until stopped.
pub(super) fn json(ctx: &Ctx, reads: &Reads, url: &Url, fields: &[(String, Extractor)]) {
    let source = format!("json {url}");
    let mut state = Json::default();
    scrape_loop(ctx, reads, url, &source, "application/json", |t, resp| {
        let (values, problems) = state.read(fields, resp);
        for message in problems {
            if !ctx.problem(t, &source, message) {
                return false;
            }
        }
        values.is_empty() || ctx.send(WatchEvent::Sample(Sample { t, source: source.clone(), values }))
    });
}

/// The common loop: due times, fetch, failures as problems. `on_body` gets each 2xx response and
/// says whether to go on (false: nobody listens any more).
fn scrape_loop(
    ctx: &Ctx,
    reads: &Reads,
    url: &Url,
    source: &str,
    accept: &str,
    mut on_body: impl FnMut(f64, &Response) -> bool,
) {
    let headers = [("User-Agent", USER_AGENT), ("Accept", accept)];
    let req = Request { url, timeout: reads.timeout, headers: &headers, tls: reads.tls.as_ref() };
    let mut slots = Slots::new(ctx.start, reads.every);
    loop {
        if !ctx.sleep_until(slots.next_due(Instant::now())) {
            return;
        }
        // Stamped when the scrape starts, as Prometheus stamps its own: the target's values are
        // from some moment of the exchange, and the start is the moment that is on the grid.
        let t = ctx.t(Instant::now());
        let go_on = match fetch::get(&req, &ctx.stop) {
            Ok(resp) if (200..300).contains(&resp.status) => on_body(t, &resp),
            Ok(resp) => ctx.problem(t, source, format!("scrape failed: HTTP {}", resp.status)),
            Err(FetchError::Stopped) => return,
            Err(e) => ctx.problem(t, source, format!("scrape failed: {e}")),
        };
        if !go_on {
            return;
        }
    }
}

/// What a Prometheus source remembers between scrapes.
#[derive(Default)]
pub(super) struct Prometheus {
    /// The last scrape and when it began, for rates.
    prev: Option<(Vec<Family>, f64)>,
    /// Lines skipped in the last scrape: a problem is raised when this changes, not every time.
    warnings: usize,
}

impl Prometheus {
    /// The values of the scrape `text` taken at `t`: gauges (and untyped, and summary quantiles)
    /// first, in the order written, then counter rates since the previous scrape (none on the
    /// first). Non-finite values are left out: they are not numbers a chart or a threshold can
    /// use. The problem, if any, is about lines that were skipped.
    pub(super) fn update(&mut self, text: &str, t: f64) -> (Vec<(String, f64)>, Option<String>) {
        let parsed = parse_lenient(text);
        let problem = (parsed.warnings.len() != self.warnings).then(|| match parsed.warnings.first() {
            Some(first) => format!("{} lines not understood, skipped (first: {first})", parsed.warnings.len()),
            None => "all lines understood again".to_string(),
        });
        self.warnings = parsed.warnings.len();
        let mut values: Vec<(String, f64)> =
            gauges(&parsed.families).into_iter().map(|(key, v)| (key.to_string(), v)).collect();
        if let Some((prev, prev_t)) = &self.prev {
            values.extend(rates(prev, *prev_t, &parsed.families, t).into_iter().map(|(key, v)| (key.to_string(), v)));
        }
        values.retain(|(_, v)| v.is_finite());
        self.prev = Some((parsed.families, t));
        (values, problem)
    }
}

/// What a JSON source remembers: the fields already reported as missing or not numbers, so each is
/// said once, not every period.
#[derive(Default)]
pub(super) struct Json {
    warned: HashSet<String>,
}

impl Json {
    /// The numeric fields of one response, and the problems not yet reported.
    pub(super) fn read(
        &mut self,
        fields: &[(String, Extractor)],
        resp: &Response,
    ) -> (Vec<(String, f64)>, Vec<String>) {
        let body = ParsedBody::new(&resp.body);
        let headers: Vec<(&str, &[u8])> = resp.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
        let mut values = Vec::new();
        let mut problems = Vec::new();
        if fields.iter().any(|(_, e)| matches!(e, Extractor::JsonPath { .. })) && body.json().is_none() {
            if self.warned.insert(String::new()) {
                problems.push("the body is not JSON".to_string());
            }
            return (values, problems);
        }
        for (name, extractor) in fields {
            let problem = match extractor.extract_from(&headers, &body) {
                None => format!("`{name}` ({extractor}): not found, skipped"),
                Some(text) => match number(&text) {
                    Some(v) => {
                        values.push((name.clone(), v));
                        continue;
                    }
                    None => format!("`{name}` ({extractor}) is {text:?}, not a number: skipped"),
                },
            };
            if self.warned.insert(name.clone()) {
                problems.push(problem);
            }
        }
        (values, problems)
    }
}

/// A JSON value as [`Extractor`] renders it, as a number: numbers as they are, `true`/`false` as
/// 1/0, strings that hold a finite number parsed (`"12"`, `" 0.5 "`).
fn number(text: &str) -> Option<f64> {
    match text.trim() {
        "true" => Some(1.0),
        "false" => Some(0.0),
        t => t.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(spec: &str) -> Extractor {
        Extractor::parse(spec).unwrap()
    }

    const SCRAPE_1: &str = r#"# TYPE busy gauge
busy{pool="b",model="threads"} 3
# TYPE up untyped
up 1
# TYPE req_total counter
req_total{code="200"} 100
# TYPE lat histogram
lat_bucket{le="0.1"} 4
lat_bucket{le="+Inf"} 5
lat_sum 0.5
lat_count 5
# TYPE q summary
q{quantile="0.5"} 0.2
q_sum 1
q_count 10
nan_gauge NaN
"#;

    const SCRAPE_2: &str = r#"# TYPE busy gauge
busy{pool="b",model="threads"} 4
# TYPE up untyped
up 1
# TYPE req_total counter
req_total{code="200"} 150
req_total{code="500"} 2
# TYPE lat histogram
lat_bucket{le="0.1"} 9
lat_bucket{le="+Inf"} 10
lat_sum 1.5
lat_count 10
# TYPE q summary
q{quantile="0.5"} 0.3
q_sum 2
q_count 20
nan_gauge NaN
"#;

    #[test]
    fn prometheus_names_and_rates() {
        let mut p = Prometheus::default();
        let (first, problem) = p.update(SCRAPE_1, 10.0);
        assert_eq!(problem, None);
        let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
        // Labels sorted as SeriesKey displays them; no rates yet; the NaN gauge left out.
        assert_eq!(names, [r#"busy{model="threads",pool="b"}"#, "up", r#"q{quantile="0.5"}"#]);

        let (second, _) = p.update(SCRAPE_2, 12.0);
        let want: &[(&str, f64)] = &[
            (r#"busy{model="threads",pool="b"}"#, 4.0),
            ("up", 1.0),
            (r#"q{quantile="0.5"}"#, 0.3),
            (r#"req_total{code="200"}"#, 25.0), // (150 - 100) / 2 s
            (r#"req_total{code="500"}"#, 1.0),  // new series of a known family: counted from 0
            ("lat_sum", 0.5),                   // histogram _sum and _count as rates, no buckets
            ("lat_count", 2.5),
            ("q_sum", 0.5),
            ("q_count", 5.0),
        ];
        let got: Vec<(&str, f64)> = second.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn prometheus_warnings_are_reported_when_they_change() {
        let mut p = Prometheus::default();
        let bad = "ok 1\nthis is not a sample\n";
        let (values, problem) = p.update(bad, 0.0);
        assert_eq!(values, [("ok".to_string(), 1.0)], "the good line is kept");
        assert!(problem.unwrap().starts_with("1 lines not understood, skipped (first: line 2:"));
        assert_eq!(p.update(bad, 1.0).1, None, "the same again: not repeated");
        assert_eq!(p.update("ok 1\n", 2.0).1.as_deref(), Some("all lines understood again"));
    }

    fn response(body: &str) -> Response {
        Response {
            status: 200,
            headers: vec![("X-Queue".into(), b"7".to_vec())],
            body: body.as_bytes().to_vec(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn json_fields_become_numbers() {
        let fields = vec![
            ("busy".to_string(), ex("$.pool.busy")),     // a number
            ("max".to_string(), ex("$.pool.max")),       // a numeric string
            ("up".to_string(), ex("$.up")),              // a bool
            ("gone".to_string(), ex("$.nope")),          // missing
            ("name".to_string(), ex("$.name")),          // not a number
            ("queue".to_string(), ex("header:X-Queue")), // a header works too
        ];
        let mut j = Json::default();
        let body = r#"{"pool":{"busy":3,"max":"10"},"up":true,"name":"api"}"#;
        let (values, problems) = j.read(&fields, &response(body));
        assert_eq!(
            values,
            [("busy".to_string(), 3.0), ("max".to_string(), 10.0), ("up".to_string(), 1.0), ("queue".to_string(), 7.0)]
        );
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("`gone` ($.nope): not found"), "{problems:?}");
        assert!(problems[1].contains("not a number"), "{problems:?}");
        assert!(j.read(&fields, &response(body)).1.is_empty(), "each problem once");
        let (values, problems) = j.read(&fields, &response("<html>"));
        assert!(values.is_empty());
        assert_eq!(problems, ["the body is not JSON"]);
    }

    #[test]
    fn numbers_from_json_text() {
        let cases: [(&str, Option<f64>); 7] = [
            ("42", Some(42.0)),
            ("-1.5e3", Some(-1500.0)),
            ("true", Some(1.0)),
            ("false", Some(0.0)),
            (" 7 ", Some(7.0)), // a string with blanks
            ("null", None),
            ("NaN", None), // a string that parses but is no number to chart
        ];
        for (text, want) in cases {
            assert_eq!(number(text), want, "{text:?}");
        }
    }
}
