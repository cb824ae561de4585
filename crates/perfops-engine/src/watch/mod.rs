//! Watching the target while the load runs: its Prometheus metrics, a JSON stats endpoint, PromQL
//! queries against the team's Prometheus (a target in a cluster), its process (CPU, memory,
//! threads, descriptors, cgroup throttling, listen queue), the generator's own process, and
//! simulated Kubernetes probes.
//!
//! This module owns the [`WatchPlan`] (what to watch, already validated by the caller), the
//! [`Watcher`] that runs it on plain std threads of its own, off the load's hot path, and the
//! [`WatchEvent`]s it sends: samples, probe results and problems, each stamped in seconds since the
//! `start` instant the caller gives, the clock of the load's per-second series. It does not parse
//! what it reads (that is `perfops_core::telemetry`), does not store or judge anything (the caller
//! writes `watch.jsonl` and `probe.jsonl` and the analysis draws the verdict), and never panics or
//! stops on a failed read: a failure is a [`WatchEvent::Problem`] and the loop goes on.
//!
//! Timing follows the load's rule: reads are due at absolute times, never after a sum of sleeps.
//!
//! ```text
//!   start        start+every   start+2*every        start+3*every
//!     |  scrape ->   |  scrape ----(slow)------------>  |(missed: skipped) ...  start+4*every
//!     t=0            t=1*every                                                 t=4*every
//! ```
//!
//! A read that overruns its period skips the due times it missed instead of catching up in a
//! burst. Every thread sleeps in slices of at most 50 ms and every socket wait is sliced too, so
//! [`Watcher::stop`] is seen within about that long.

pub mod fetch;
mod netlink;
mod probe;
mod process;
mod promql;
mod scrape;

pub use promql::ERRORS as PROMQL_ERRORS;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use perfops_core::scenario::extract::Extractor;
use rustls::ClientConfig;
use url::Url;

/// What to watch, and how often.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    /// Sampling period for scrapes and process samples.
    pub every: Duration,
    /// Per scrape (connect and whole response).
    pub timeout: Duration,
    /// Prometheus endpoints: absolute `http(s)` URLs.
    pub prometheus: Vec<String>,
    /// JSON stats endpoints.
    pub json: Vec<JsonSource>,
    /// The target's process, when it runs on this machine.
    pub process: Option<ProcessSel>,
    /// Also sample this process, the generator (`/proc/self`).
    pub generator: bool,
    /// Simulated Kubernetes probes.
    pub probes: Vec<ProbeSpec>,
    /// PromQL queries against a Prometheus server.
    pub promql: Option<PromqlSource>,
    /// `https`: accept any certificate.
    pub insecure: bool,
}

/// Instant PromQL queries against a Prometheus server, all of them each `every`.
#[derive(Debug, Clone)]
pub struct PromqlSource {
    /// The server's base URL, absolute `http(s)` (`http://prometheus:9090`).
    pub url: String,
    /// Query period.
    pub every: Duration,
    /// Per query (connect and whole answer).
    pub timeout: Duration,
    /// (name in the samples, PromQL expression).
    pub queries: Vec<(String, String)>,
    /// Credentials, by the environment variables that hold them.
    pub auth: PromqlAuth,
    /// A PEM file of CA certificates trusted besides the system's (`https`).
    pub ca_file: Option<std::path::PathBuf>,
}

/// Where a [`PromqlSource`]'s credentials are: environment variables read once, when the watch
/// starts, and sent in an `Authorization` header; never written anywhere else. The scenario's own
/// type, taken as the scenario says it.
pub use perfops_core::scenario::PromqlAuth;

/// A JSON endpoint and the numbers to take from it.
#[derive(Debug, Clone)]
pub struct JsonSource {
    /// An absolute `http(s)` URL.
    pub url: String,
    /// (name to report, where the value is: `$.path`, or `header:`/`regex:` as in `save:`).
    pub fields: Vec<(String, Extractor)>,
}

/// Which process is the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessSel {
    /// This process id.
    Pid(u32),
    /// The process that owns the socket listening on this TCP port; looked up again when it exits.
    Port(u16),
}

/// An HTTP probe, with the meaning and defaults of Kubernetes' `httpGet` probe fields.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    /// Liveness or readiness.
    pub kind: ProbeKind,
    /// Absolute `http(s)` URL to `GET`.
    pub url: String,
    /// Time between checks (`periodSeconds`).
    pub period: Duration,
    /// Connect and whole response (`timeoutSeconds`).
    pub timeout: Duration,
    /// Consecutive failures that restart (liveness) or unready (readiness) (`failureThreshold`).
    pub failure_threshold: u32,
    /// Consecutive successes that make it ready again (`successThreshold`; 1 for liveness).
    pub success_threshold: u32,
    /// Wait before the first check (`initialDelaySeconds`), counted from `start`.
    pub initial_delay: Duration,
}

/// What the watcher reports.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// Values read from one source at one time.
    Sample(Sample),
    /// One probe check.
    Probe(ProbeResult),
    /// A read that failed or was partly understood; the watcher goes on.
    Problem {
        /// Seconds since `start`.
        t: f64,
        /// The source, as in [`Sample::source`], or `"probe <kind>"`.
        source: String,
        /// What went wrong, in one line.
        message: String,
    },
}

/// The lines of `watch.jsonl` and `probe.jsonl`, which the watcher sends as they are written: one
/// type for the writer and every reader (`perfops_core::telemetry::watched`).
pub use perfops_core::telemetry::watched::{ProbeKind, ProbeResult, Sample};

/// The running watch; [`Watcher::stop`] (or dropping it) stops and joins every thread.
#[derive(Debug)]
pub struct Watcher {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Watcher {
    /// Start watching. Times in events are seconds since `start` (which may be a little in the
    /// future: nothing is read before it). Fails on an unusable plan (a URL that is not absolute
    /// `http(s)`, a zero period or timeout) or when a thread cannot be started; nothing keeps
    /// running then.
    pub fn start(plan: WatchPlan, start: Instant, tx: Sender<WatchEvent>) -> io::Result<Watcher> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let has_sources =
            !plan.prometheus.is_empty() || !plan.json.is_empty() || plan.process.is_some() || plan.generator;
        if has_sources && plan.every.is_zero() {
            return Err(invalid("watch: `every` must be more than 0".into()));
        }
        if (!plan.prometheus.is_empty() || !plan.json.is_empty()) && plan.timeout.is_zero() {
            return Err(invalid("watch: the scrape timeout must be more than 0".into()));
        }
        let prometheus = plan.prometheus.iter().map(|u| parse_url(u)).collect::<io::Result<Vec<_>>>()?;
        let json = plan.json.iter().map(|j| parse_url(&j.url)).collect::<io::Result<Vec<_>>>()?;
        let probes = plan.probes.iter().map(|p| parse_url(&p.url)).collect::<io::Result<Vec<_>>>()?;
        if let Some(p) = plan.probes.iter().find(|p| p.period.is_zero() || p.timeout.is_zero()) {
            return Err(invalid(format!("{} probe: the period and the timeout must be more than 0", p.kind.name())));
        }
        let any_https = prometheus.iter().chain(&json).chain(&probes).any(|u| u.scheme() == "https");
        let tls = match any_https {
            true => Some(https(plan.insecure, None).map_err(io::Error::other)?),
            false => None,
        };
        let promql = plan.promql.as_ref().map(|p| promql_run(p, plan.insecure)).transpose()?;

        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Ctx { start, stop: Arc::clone(&stop), tx };
        // Built before the first spawn: if a later spawn fails, dropping it stops the earlier ones.
        let mut watcher = Watcher { stop, threads: Vec::new() };
        let reads = scrape::Reads { every: plan.every, timeout: plan.timeout, tls: tls.clone() };
        for url in prometheus {
            let (ctx, reads) = (ctx.clone(), reads.clone());
            watcher.spawn("perfops-watch-prom", move || scrape::prometheus(&ctx, &reads, &url))?;
        }
        for (url, source) in json.into_iter().zip(plan.json) {
            let (ctx, reads) = (ctx.clone(), reads.clone());
            watcher.spawn("perfops-watch-json", move || scrape::json(&ctx, &reads, &url, &source.fields))?;
        }
        if let Some(sel) = plan.process {
            let (ctx, every) = (ctx.clone(), plan.every);
            watcher.spawn("perfops-watch-proc", move || process::run(&ctx, every, process::Which::Target(sel)))?;
        }
        if plan.generator {
            let (ctx, every) = (ctx.clone(), plan.every);
            watcher.spawn("perfops-watch-self", move || process::run(&ctx, every, process::Which::Generator))?;
        }
        if let Some(run) = promql {
            let ctx = ctx.clone();
            watcher.spawn("perfops-watch-promql", move || promql::run(&ctx, &run))?;
        }
        for (url, spec) in probes.into_iter().zip(plan.probes) {
            let (ctx, tls) = (ctx.clone(), tls.clone());
            watcher.spawn("perfops-watch-probe", move || probe::run(&ctx, &spec, &url, tls.as_ref()))?;
        }
        Ok(watcher)
    }

    /// Stop every thread (each sees the flag within about 50 ms, even in the middle of a read) and
    /// wait for them.
    pub fn stop(self) {
        drop(self);
    }

    fn spawn(&mut self, name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let handle = std::thread::Builder::new().name(name.to_string()).spawn(f)?;
        self.threads.push(handle);
        Ok(())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One health check, as a probe makes it (a new connection, `GET`, status
/// 200..=399 within `timeout`): how long it took, or why it failed. For
/// callers between loads, such as `perfops limit` waiting for the target to
/// recover.
pub fn check(url: &str, timeout: Duration, insecure: bool) -> Result<Duration, String> {
    let url = parse_url(url).map_err(|e| e.to_string())?;
    let tls = match url.scheme() {
        "https" => Some(https(insecure, None).map_err(|e| e.to_string())?),
        _ => None,
    };
    let headers = [("User-Agent", "kube-probe/perfops")];
    let req = fetch::Request { url: &url, timeout, headers: &headers, tls: tls.as_ref() };
    match fetch::get(&req, &AtomicBool::new(false)) {
        Ok(r) if (200..400).contains(&r.status) => Ok(r.elapsed),
        Ok(r) => Err(format!("HTTP {}", r.status)),
        Err(e) => Err(e.to_string()),
    }
}

/// A PromQL source checked and its credentials read: an unset variable is an error now, not a
/// run of 401s.
fn promql_run(p: &PromqlSource, insecure: bool) -> io::Result<promql::Run> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let base = parse_url(&p.url)?;
    if p.every.is_zero() || p.timeout.is_zero() {
        return Err(invalid("promql: the period and the timeout must be more than 0".into()));
    }
    if p.queries.is_empty() {
        return Err(invalid("promql: no queries".into()));
    }
    let var = |name: &str| match std::env::var(name) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(invalid(format!("promql: the environment variable {name} (credentials) is not set"))),
    };
    let authorization = match &p.auth {
        PromqlAuth::None => None,
        PromqlAuth::Bearer { token_env } => Some(format!("Bearer {}", var(token_env)?.trim())),
        PromqlAuth::Basic { user, password_env } => Some(promql::basic(user, &var(password_env)?)),
    };
    let tls = match (base.scheme(), &p.ca_file) {
        ("https", ca) => Some(https(insecure, ca.as_deref()).map_err(|e| invalid(format!("promql: {e}")))?),
        _ => None,
    };
    Ok(promql::Run { base, every: p.every, timeout: p.timeout, queries: p.queries.clone(), authorization, tls })
}

/// The TLS of an `https` read: the target's trust (`--insecure`, a cluster's CA file), HTTP/1.1.
fn https(insecure: bool, ca_file: Option<&std::path::Path>) -> Result<Arc<ClientConfig>, crate::TlsSetupError> {
    crate::tls::client(crate::tls::Trust::target(insecure, ca_file)?, crate::tls::ALPN_H1)
}

fn parse_url(text: &str) -> io::Result<Url> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let url = Url::parse(text).map_err(|e| invalid(format!("watch: `{text}`: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(format!("watch: `{text}` is not an absolute http(s) URL")));
    }
    Ok(url)
}

/// What every watch thread shares: the run's clock, the stop flag and the way out.
#[derive(Clone)]
struct Ctx {
    start: Instant,
    stop: Arc<AtomicBool>,
    tx: Sender<WatchEvent>,
}

impl Ctx {
    /// Seconds since `start`; negative before it.
    fn t(&self, at: Instant) -> f64 {
        match at.checked_duration_since(self.start) {
            Some(d) => d.as_secs_f64(),
            None => -self.start.duration_since(at).as_secs_f64(),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// False when nobody listens any more: the thread may as well end.
    fn send(&self, event: WatchEvent) -> bool {
        self.tx.send(event).is_ok()
    }

    fn problem(&self, t: f64, source: &str, message: impl Into<String>) -> bool {
        self.send(WatchEvent::Problem { t, source: source.to_string(), message: message.into() })
    }

    /// Sleep until `due` in slices, so a stop is seen within one; false when stopped.
    fn sleep_until(&self, due: Instant) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= due {
                return true;
            }
            std::thread::sleep((due - now).min(fetch::SLICE));
        }
    }
}

/// Due times `origin + k * every`, k = 0, 1, 2, ...: absolute, so a late wake-up or a slow read
/// does not shift the ones after it.
struct Slots {
    origin: Instant,
    every: Duration,
    next: u64,
}

impl Slots {
    fn new(origin: Instant, every: Duration) -> Slots {
        Slots { origin, every, next: 0 }
    }

    /// The next due time not yet passed at `now` (the slots missed meanwhile are skipped). The
    /// first call is the exception: the slot in progress is served at once, a little late, rather
    /// than skipped, so that watching starts with a reading (the baseline for every rate) and not
    /// a whole period after `start`, which the caller took a moment before the thread ran.
    fn next_due(&mut self, now: Instant) -> Instant {
        let elapsed = now.saturating_duration_since(self.origin);
        let k =
            if self.next == 0 { slot_at_or_before(elapsed, self.every) } else { slot_at_or_after(elapsed, self.every) };
        let k = k.max(self.next);
        self.next = k + 1;
        self.origin + mul(self.every, k)
    }
}

/// The first k with `k * every >= elapsed`.
fn slot_at_or_after(elapsed: Duration, every: Duration) -> u64 {
    let every = every.as_nanos().max(1);
    u64::try_from(elapsed.as_nanos().div_ceil(every)).unwrap_or(u64::MAX)
}

/// The last k with `k * every <= elapsed`.
fn slot_at_or_before(elapsed: Duration, every: Duration) -> u64 {
    let every = every.as_nanos().max(1);
    u64::try_from(elapsed.as_nanos() / every).unwrap_or(u64::MAX)
}

fn mul(d: Duration, k: u64) -> Duration {
    Duration::from_nanos(u64::try_from(d.as_nanos().saturating_mul(u128::from(k))).unwrap_or(u64::MAX))
}

/// The TLS configuration shared by the threads that fetch `https` URLs.
type Tls = Option<Arc<ClientConfig>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_absolute_and_skip_what_was_missed() {
        let ms = Duration::from_millis;
        let cases: [(Duration, Duration, u64); 5] = [
            (ms(0), ms(100), 0),       // at the origin: slot 0 is due now
            (ms(1), ms(100), 1),       // just after: the next one
            (ms(100), ms(100), 1),     // exactly on a slot: that slot
            (ms(350), ms(100), 4),     // a read overran 2.5 periods: 1, 2, 3 are skipped
            (ms(5), ms(0), 5_000_000), // a zero period does not divide by zero
        ];
        for (elapsed, every, want) in cases {
            assert_eq!(slot_at_or_after(elapsed, every), want, "{elapsed:?} / {every:?}");
        }
        assert_eq!(slot_at_or_before(ms(250), ms(100)), 2);
        let origin = Instant::now();
        let mut s = Slots::new(origin, ms(100));
        assert_eq!(s.next_due(origin + ms(3)), origin, "the first read is not put off to the next slot");
        // Woken a little late for slot 1: slot 1 is not served again, slot 2 comes next.
        assert_eq!(s.next_due(origin + ms(101)), origin + ms(200));
        assert_eq!(s.next_due(origin + ms(150)), origin + ms(300), "never a slot already handed out");
    }
}
