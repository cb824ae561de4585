//! The PromQL source: instant queries against the team's Prometheus, every `every`, on a thread of
//! their own, when the target runs where no `/metrics` of it can be reached (pods in a cluster).
//!
//! It owns the request (`GET {url}/api/v1/query?query=Q&time=T`, every query of a period at one
//! evaluation time `T`, the wall clock at the period's start, so that the values of one sample are
//! of one instant), the credentials header, and the naming of what comes back: the query's name,
//! alone or with the labels of each series (`busy{pod="orders-1"}`): a query that returns several
//! pods keeps them apart. Every period gives one [`Sample`] stamped, like a scrape, when the period
//! began, with one more value, `promql_errors`, the number of queries that failed in it (0 when
//! all answered), so that a failing Prometheus is counted on the run's time axis and can be judged
//! (`metric(promql_errors) < 1`). A failure is a [`WatchEvent::Problem`] naming the query, never
//! the credentials; the loop goes on. The JSON is read by `perfops_core::telemetry::promql`; the
//! exchange, its deadline and its stop flag by [`super::fetch`].
//!
//! ```text
//!   t=0 (start)          t=every                 t=2*every
//!    |-- busy --|-- restarts --|  ... |-- busy (timeout 2s) --|-- restarts --| ...
//!    one Sample { t: 0, busy, restarts{pod=..}, promql_errors: 0 }   one at t=every, errors: 1
//! ```
//!
//! Each query has its own deadline (`timeout`); queries that overrun a period make the loop skip
//! the due times they missed, as every watch source does.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use perfops_core::telemetry::promql::parse_answer;
use url::Url;

use super::fetch::{self, FetchError, Request};
use super::{Ctx, Sample, Slots, Tls, WatchEvent};

/// The value counting the queries of a period that failed.
pub const ERRORS: &str = "promql_errors";

const USER_AGENT: &str = concat!("perfops/", env!("CARGO_PKG_VERSION"));

/// One PromQL source, ready to run: credentials already read from the environment.
pub(super) struct Run {
    /// The server's base URL.
    pub base: Url,
    pub every: Duration,
    pub timeout: Duration,
    /// (name, expression).
    pub queries: Vec<(String, String)>,
    /// The `Authorization` header's value, if any. Never printed.
    pub authorization: Option<String>,
    pub tls: Tls,
}

/// `{base}/api/v1/query?query=Q&time=T`, the base's own path kept (a Prometheus behind a prefix).
pub(super) fn query_url(base: &Url, query: &str, time_s: f64) -> Url {
    let mut url = base.clone();
    let path = format!("{}/api/v1/query", base.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url.query_pairs_mut().append_pair("query", query).append_pair("time", &format!("{time_s:.3}"));
    url
}

/// Query until stopped.
pub(super) fn run(ctx: &Ctx, r: &Run) {
    let source = format!("promql {}", r.base);
    let mut slots = Slots::new(ctx.start, r.every);
    // Queries that answered with no series: said once, and again when they come back.
    let mut empty: HashSet<String> = HashSet::new();
    let mut failing: HashSet<String> = HashSet::new();
    loop {
        if !ctx.sleep_until(slots.next_due(Instant::now())) {
            return;
        }
        let t = ctx.t(Instant::now());
        let now_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let mut values = Vec::new();
        let mut errors = 0u32;
        for (name, query) in &r.queries {
            let url = query_url(&r.base, query, now_s);
            let mut headers = vec![("User-Agent", USER_AGENT), ("Accept", "application/json")];
            if let Some(a) = &r.authorization {
                headers.push(("Authorization", a.as_str()));
            }
            let req = Request { url: &url, timeout: r.timeout, headers: &headers, tls: r.tls.as_ref() };
            let failure = match fetch::get(&req, &ctx.stop) {
                Err(FetchError::Stopped) => return,
                Err(e) => Some(e.to_string()),
                // Prometheus answers its errors (400, 422, 503) with the same JSON envelope: read it
                // whatever the status, and fall back on the status when it is not there.
                Ok(resp) => match parse_answer(&resp.body) {
                    Ok(answer) => {
                        for w in &answer.warnings {
                            if !ctx.problem(t, &source, format!("query `{name}`: {w}")) {
                                return;
                            }
                        }
                        let before = values.len();
                        values.extend(
                            answer
                                .series
                                .iter()
                                .filter(|s| s.value.is_finite())
                                .map(|s| (s.key(name).to_string(), s.value)),
                        );
                        let message = match (values.len() == before, empty.contains(name)) {
                            (true, false) => Some(format!("query `{name}` returned no series")),
                            (false, true) => Some(format!("query `{name}` returns series again")),
                            _ => None,
                        };
                        if let Some(m) = message {
                            if values.len() == before {
                                empty.insert(name.clone());
                            } else {
                                empty.remove(name);
                            }
                            if !ctx.problem(t, &source, m) {
                                return;
                            }
                        }
                        None
                    }
                    Err(_) if !(200..300).contains(&resp.status) => Some(format!("HTTP {}", resp.status)),
                    Err(e) => Some(e.to_string()),
                },
            };
            let listened = match failure {
                Some(message) => {
                    errors += 1;
                    failing.insert(name.clone());
                    ctx.problem(t, &source, format!("query `{name}` failed: {message}"))
                }
                None if failing.remove(name) => ctx.problem(t, &source, format!("query `{name}` answers again")),
                None => true,
            };
            if !listened {
                return;
            }
        }
        values.push((ERRORS.to_string(), f64::from(errors)));
        if !ctx.send(WatchEvent::Sample(Sample { t, source: source.clone(), values })) {
            return;
        }
    }
}

/// `Basic base64(user:password)`.
pub(super) fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_urls_keep_the_prefix_and_escape_the_query() {
        let cases = [
            // the usual: a server's root
            ("http://127.0.0.1:9090", "up", "http://127.0.0.1:9090/api/v1/query?query=up&time=12.500"),
            // behind a prefix, a trailing slash
            ("https://h/prom/", "sum(x)", "https://h/prom/api/v1/query?query=sum%28x%29&time=12.500"),
            // braces, quotes, spaces, a regex
            (
                "http://p:9090",
                r#"sum(kube{pod=~"a-.*"}) by (pod)"#,
                "http://p:9090/api/v1/query?query=sum%28kube%7Bpod%3D%7E%22a-.*%22%7D%29+by+%28pod%29&time=12.500",
            ),
        ];
        for (base, query, want) in cases {
            assert_eq!(query_url(&Url::parse(base).unwrap(), query, 12.5).as_str(), want, "{base} {query}");
        }
    }

    #[test]
    fn basic_credentials() {
        // RFC 7617's example.
        assert_eq!(basic("Aladdin", "open sesame"), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }
}
