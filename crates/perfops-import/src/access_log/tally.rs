//! What an access log adds up to, kept in bounded memory whatever its size:
//! per-endpoint counts and statuses, a sample of each endpoint's values, the
//! requests per second around the time being read, the sessions in flight
//! and the shapes of the sessions that ended.
//!
//! Every collection here has a cap ([`Limits`]), and what does not fit is
//! counted, never dropped silently: an endpoint past the cap is counted as
//! untracked; a client past the cap, and every request of a session longer
//! than a flow would be, goes to the single-request counts; the seconds are
//! a sliding window (a log is written in time order, nginx's with at most
//! its slowest request's lateness) and a line older than the window is
//! counted as late. So a 1 GB log costs what its distinct endpoints,
//! sampled values and clients in flight cost, not what its lines do.
//!
//! This module owns the counting; `build.rs` turns a finished tally into a
//! scenario, `line.rs` reads the lines.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use super::endpoint::{Part, template};
use super::line::{Format, Record, Skip};

/// The caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Distinct endpoints counted (method + templated path).
    pub endpoints: usize,
    /// Distinct value rows kept per endpoint (its feeder's rows).
    pub samples: usize,
    /// Clients with a session in flight.
    pub clients: usize,
    /// Requests in a session that can still become a flow.
    pub steps: usize,
    /// Distinct session shapes counted.
    pub shapes: usize,
    /// A gap longer than this, in microseconds, ends a client's session.
    pub session_gap_us: i64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            endpoints: 10_000,
            samples: 1000,
            clients: 100_000,
            steps: 8,
            shapes: 10_000,
            session_gap_us: 60_000_000,
        }
    }
}

/// One endpoint's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its method.
    pub method: &'static str,
    /// Its templated path.
    pub parts: Vec<Part>,
    /// Requests.
    pub count: u64,
    /// Responses by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that carried an `Authorization` value.
    pub authorized: u64,
    /// Requests with a query string.
    pub with_query: u64,
    /// Distinct (placeholder values..., query) rows, first seen first.
    pub samples: Vec<(Vec<String>, String)>,
    /// Requests whose query had a parameter named like a credential (left out of the samples).
    pub secret_queries: u64,
    /// Those parameters' names (the first few).
    pub secret_names: Vec<String>,
    seen: HashSet<u64>,
}

/// A session being read.
#[derive(Debug, Clone)]
struct Open {
    last_us: i64,
    /// (endpoint, gap before it in microseconds).
    steps: Vec<(u32, i64)>,
    /// Longer than a flow: its requests are counted as single requests.
    long: bool,
}

/// How often a session shape was seen, and its gaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Sessions of this shape.
    pub count: u64,
    /// Sum over those sessions of the gap before each step (the first is 0).
    pub gap_sum_us: Vec<i64>,
}

/// A line that was not read, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Its number, from 1.
    pub line: u64,
    /// Why.
    pub skip: Skip,
    /// Its first characters.
    pub excerpt: String,
}

/// Seconds kept before they are folded into the peak.
const WINDOW_S: i64 = 300;

/// The whole count.
#[derive(Debug, Clone)]
pub struct Tally {
    limits: Limits,
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Requests read.
    pub requests: u64,
    /// Per format read.
    pub formats: BTreeMap<&'static str, u64>,
    /// Lines not read, by reason.
    pub skipped: BTreeMap<Skip, u64>,
    /// The first lines not read.
    pub examples: Vec<Example>,
    /// Endpoints, in the order first seen.
    pub endpoints: Vec<Endpoint>,
    index: HashMap<(&'static str, Vec<Part>), u32>,
    /// Requests to endpoints past the cap.
    pub untracked: u64,
    /// The first and last request, microseconds since the epoch.
    pub first_us: i64,
    /// See `first_us`.
    pub last_us: i64,
    seconds: HashMap<i64, u64>,
    flushed_before: i64,
    /// The busiest second (unix seconds) and its requests.
    pub peak: (i64, u64),
    /// Lines older than the seconds window when read (not in the peak).
    pub late: u64,
    clients: HashMap<u64, Open>,
    /// Session shapes (sequences of endpoints) of 2 or more requests.
    pub shapes: HashMap<Vec<u32>, Shape>,
    /// Requests counted alone, per endpoint index.
    pub singles: Vec<u64>,
    /// Sessions ended.
    pub sessions: u64,
    /// Sessions longer than a flow (their requests are in `singles`).
    pub long_sessions: u64,
    /// Requests of clients past the cap (in `singles`).
    pub crowded: u64,
    /// Requests without a client (in `singles`).
    pub anonymous: u64,
    /// Requests of shapes past the cap (in `singles`).
    pub shapes_full: u64,
    /// Why reading stopped early (a truncated gzip stream), if it did.
    pub cut_short: Option<String>,
}

fn hash_row(values: &[String], query: &str) -> u64 {
    let mut h = DefaultHasher::new();
    values.hash(&mut h);
    query.hash(&mut h);
    h.finish()
}

/// `query` without its parameters whose names look like credentials
/// (`access_token`, `api_key`, `password`: perfops' one rule of it); they are
/// counted on `e`, and their values are never kept.
fn scrub_query(query: &str, e: &mut Endpoint) -> String {
    if query.is_empty() {
        return String::new();
    }
    let mut secret = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(n, _)| n);
            if perfops_core::scenario::redact::credential_name(name) {
                secret = true;
                if e.secret_names.len() < 4 && !e.secret_names.iter().any(|n| n == name) {
                    e.secret_names.push(name.chars().take(40).collect());
                }
                false
            } else {
                true
            }
        })
        .collect();
    e.secret_queries += u64::from(secret);
    kept.join("&")
}

impl Tally {
    /// An empty tally.
    pub fn new(limits: Limits) -> Tally {
        Tally {
            limits,
            lines: 0,
            requests: 0,
            formats: BTreeMap::new(),
            skipped: BTreeMap::new(),
            examples: Vec::new(),
            endpoints: Vec::new(),
            index: HashMap::new(),
            untracked: 0,
            first_us: i64::MAX,
            last_us: i64::MIN,
            seconds: HashMap::new(),
            flushed_before: i64::MIN,
            peak: (0, 0),
            late: 0,
            clients: HashMap::new(),
            shapes: HashMap::new(),
            singles: Vec::new(),
            sessions: 0,
            long_sessions: 0,
            crowded: 0,
            anonymous: 0,
            shapes_full: 0,
            cut_short: None,
        }
    }

    /// A line that is not a record.
    pub fn skip(&mut self, line: u64, skip: Skip, text: &str) {
        *self.skipped.entry(skip).or_default() += 1;
        if self.examples.len() < 3 {
            let excerpt: String = text.chars().take(100).collect();
            self.examples.push(Example { line, skip, excerpt });
        }
    }

    /// Lines not read, in all.
    pub fn skipped_lines(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// Count one request.
    pub fn add(&mut self, r: Record) {
        self.requests += 1;
        let format = match r.format {
            Format::Combined => "combined",
            Format::Common => "common",
            Format::Json => "JSON lines",
            Format::Auto => "auto",
        };
        *self.formats.entry(format).or_default() += 1;
        self.first_us = self.first_us.min(r.time_us);
        self.last_us = self.last_us.max(r.time_us);
        self.second(r.time_us.div_euclid(1_000_000));

        let (parts, values) = template(&r.path);
        let key = (r.method, parts);
        let idx = match self.index.get(&key) {
            Some(i) => *i,
            None if self.endpoints.len() < self.limits.endpoints => {
                let i = self.endpoints.len() as u32;
                self.endpoints.push(Endpoint {
                    method: r.method,
                    parts: key.1.clone(),
                    count: 0,
                    statuses: BTreeMap::new(),
                    authorized: 0,
                    with_query: 0,
                    samples: Vec::new(),
                    secret_queries: 0,
                    secret_names: Vec::new(),
                    seen: HashSet::new(),
                });
                self.singles.push(0);
                self.index.insert(key, i);
                i
            }
            None => {
                self.untracked += 1;
                return;
            }
        };
        let e = &mut self.endpoints[idx as usize];
        e.count += 1;
        *e.statuses.entry(r.status).or_default() += 1;
        e.authorized += u64::from(r.authorized);
        e.with_query += u64::from(!r.query.is_empty());
        let query = scrub_query(&r.query, e);
        if e.samples.len() < self.limits.samples && (!values.is_empty() || !query.is_empty()) {
            let h = hash_row(&values, &query);
            if e.seen.insert(h) {
                e.samples.push((values, query));
            }
        }
        self.session(idx, r.client, r.time_us);
    }

    /// Count a request in its second; fold seconds out of the window into the peak.
    fn second(&mut self, s: i64) {
        if s < self.flushed_before {
            self.late += 1;
            return;
        }
        *self.seconds.entry(s).or_default() += 1;
        if self.seconds.len() > 2 * WINDOW_S as usize {
            let keep_from = self.last_us.div_euclid(1_000_000) - WINDOW_S;
            self.fold_seconds(keep_from);
        }
    }

    fn fold_seconds(&mut self, before: i64) {
        let mut peak = self.peak;
        self.seconds.retain(|&s, &mut n| {
            if s < before {
                if n > peak.1 || (n == peak.1 && s < peak.0) {
                    peak = (s, n);
                }
                false
            } else {
                true
            }
        });
        self.peak = peak;
        self.flushed_before = self.flushed_before.max(before);
    }

    fn session(&mut self, idx: u32, client: Option<u64>, t: i64) {
        let Some(client) = client else {
            self.anonymous += 1;
            self.singles[idx as usize] += 1;
            return;
        };
        if self.requests.is_multiple_of(65_536) {
            self.sweep(self.last_us - self.limits.session_gap_us);
        }
        let gap_limit = self.limits.session_gap_us;
        if let Some(open) = self.clients.get_mut(&client) {
            let gap = (t - open.last_us).max(0);
            if gap <= gap_limit {
                open.last_us = open.last_us.max(t);
                if open.long {
                    self.singles[idx as usize] += 1;
                } else if open.steps.len() >= self.limits.steps {
                    open.long = true;
                    for (e, _) in open.steps.drain(..) {
                        self.singles[e as usize] += 1;
                    }
                    self.singles[idx as usize] += 1;
                } else {
                    open.steps.push((idx, gap));
                }
                return;
            }
            if let Some(ended) = self.clients.remove(&client) {
                self.close(ended);
            }
        }
        if self.clients.len() >= self.limits.clients {
            self.sweep(self.last_us - gap_limit);
        }
        if self.clients.len() >= self.limits.clients {
            self.crowded += 1;
            self.singles[idx as usize] += 1;
            return;
        }
        self.clients.insert(client, Open { last_us: t, steps: vec![(idx, 0)], long: false });
    }

    /// End the sessions whose last request came before `idle_before`.
    fn sweep(&mut self, idle_before: i64) {
        let ended: Vec<u64> = self.clients.iter().filter(|(_, o)| o.last_us < idle_before).map(|(k, _)| *k).collect();
        for k in ended {
            if let Some(o) = self.clients.remove(&k) {
                self.close(o);
            }
        }
    }

    fn close(&mut self, o: Open) {
        self.sessions += 1;
        if o.long {
            self.long_sessions += 1;
            return;
        }
        if o.steps.len() == 1 {
            self.singles[o.steps[0].0 as usize] += 1;
            return;
        }
        let key: Vec<u32> = o.steps.iter().map(|(e, _)| *e).collect();
        let full = self.shapes.len() >= self.limits.shapes && !self.shapes.contains_key(&key);
        if full {
            self.shapes_full += o.steps.len() as u64;
            for (e, _) in o.steps {
                self.singles[e as usize] += 1;
            }
            return;
        }
        let shape = self.shapes.entry(key).or_insert_with(|| Shape { count: 0, gap_sum_us: vec![0; o.steps.len()] });
        shape.count += 1;
        for (sum, (_, gap)) in shape.gap_sum_us.iter_mut().zip(&o.steps) {
            *sum += gap;
        }
    }

    /// The end of the log: every session ends, every second is folded.
    pub fn finish(&mut self) {
        let open: Vec<Open> = self.clients.drain().map(|(_, o)| o).collect();
        for o in open {
            self.close(o);
        }
        self.fold_seconds(i64::MAX);
    }

    /// Mean requests per second: the intervals between the first and the
    /// last request over the time between them. (Requests over the seconds
    /// they touch would count the first and last second whole: 1000
    /// requests in 10 s at 100/s touch 11 seconds of a log and read 91/s.)
    pub fn mean_rate(&self) -> f64 {
        if self.requests < 2 || self.last_us <= self.first_us {
            return self.requests as f64;
        }
        (self.requests - 1) as f64 / self.span_s()
    }

    /// Seconds from the first request to the last.
    pub fn span_s(&self) -> f64 {
        if self.requests == 0 { 0.0 } else { (self.last_us - self.first_us) as f64 / 1e6 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t_ms: i64, method: &'static str, path: &str, client: u64) -> Record {
        Record {
            time_us: t_ms * 1000,
            method,
            path: path.into(),
            query: String::new(),
            status: 200,
            client: Some(client),
            authorized: false,
            format: Format::Combined,
        }
    }

    /// Three clients log in and list twice; one client hammers without a
    /// pause past a flow's length: the three sessions are one shape with their
    /// mean gaps, the hammering one's requests are single requests.
    #[test]
    fn sessions_become_shapes() {
        let mut t = Tally::new(Limits::default());
        for c in 0..3 {
            let base = c * 1000;
            t.add(rec(base, "POST", "/auth", c as u64));
            t.add(rec(base + 100 + c, "GET", "/orders", c as u64));
            t.add(rec(base + 300, "GET", "/orders/7", c as u64));
        }
        for i in 0..20 {
            t.add(rec(5000 + i, "GET", "/orders", 99));
        }
        t.finish();
        assert_eq!(t.endpoints.len(), 3);
        assert_eq!(t.shapes.len(), 1);
        let shape = t.shapes.values().next().expect("one shape");
        assert_eq!(shape.count, 3);
        // gaps: 100, 101, 102 ms to the list; 200, 199, 198 to the order
        assert_eq!(shape.gap_sum_us, vec![0, 303_000, 597_000]);
        assert_eq!(t.long_sessions, 1);
        assert_eq!(t.singles, vec![0, 20, 0]);
        assert_eq!(t.sessions, 4);
    }

    /// A gap over the session gap starts a new session.
    #[test]
    fn gap_splits_sessions() {
        let mut t = Tally::new(Limits { session_gap_us: 1_000_000, ..Limits::default() });
        t.add(rec(0, "GET", "/a", 1));
        t.add(rec(500, "GET", "/b", 1));
        t.add(rec(5000, "GET", "/a", 1));
        t.finish();
        assert_eq!(t.sessions, 2);
        assert_eq!(t.shapes.len(), 1);
        assert_eq!(t.singles, vec![1, 0]);
    }

    /// Caps: endpoints past the cap are counted as untracked, clients past it
    /// as single requests, the samples stop at their cap; nothing is lost
    /// from the request count.
    #[test]
    fn caps_count_what_does_not_fit() {
        let limits = Limits { endpoints: 2, clients: 2, samples: 3, ..Limits::default() };
        let mut t = Tally::new(limits);
        for i in 0..10 {
            t.add(rec(i, "GET", &format!("/o/{i}"), i as u64));
        }
        t.add(rec(20, "GET", "/x", 50));
        t.add(rec(21, "GET", "/y", 51));
        t.finish();
        assert_eq!(t.requests, 12);
        assert_eq!(t.endpoints.len(), 2);
        assert_eq!(t.untracked, 1);
        assert_eq!(t.endpoints[0].samples.len(), 3);
        assert_eq!(t.crowded, 9);
    }

    /// The busiest second, across the window's folds and with a late line.
    #[test]
    fn peak_second() {
        let mut t = Tally::new(Limits::default());
        // 1 request/s for 2000 s, 7 in second 100, 5 in second 1500
        for s in 0..2000 {
            let n = match s {
                100 => 7,
                1500 => 5,
                _ => 1,
            };
            for _ in 0..n {
                t.add(rec(s * 1000, "GET", "/", 1));
            }
        }
        // a line from second 3, read long after its window
        t.add(rec(3000, "GET", "/", 1));
        t.finish();
        assert_eq!(t.peak, (100, 7));
        assert_eq!(t.late, 1);
        assert!((t.mean_rate() - 2010.0 / 1999.0).abs() < 1e-9);
    }
}
