//! What every pushing output shares (Prometheus remote-write, OTLP): a
//! backlog of seconds not yet delivered, retries, the wire they go out on,
//! the auth headers, and what is said at the end about what did not arrive.
//!
//! ```text
//!  collector ─ Second ─> Detached (its own thread, 60 s buffer, drops said)
//!                          │ Encode::second: the second as the wire's item (a Batch)
//!                          v
//!                        backlog: up to 300 seconds, oldest dropped first (counted)
//!                          │ tick(): the oldest ≤ 30 seconds, one request ≤ 4 MiB (Encode::request)
//!                          v
//!                        Deliver::deliver ──ok──> gone
//!                          │ Failure::Retry (network, timeout, 5xx, 429 + Retry-After)
//!                          │     wait 0.25 s, 0.5 s, ... 5 s (each × [0.5, 1) at random), or Retry-After
//!                          │ Failure::Refused (other 4xx): those seconds given up, the reason kept
//!                          │     (unless Encode::refused switches format: a 415 to remote-write 1.0)
//!                          │ taken, but Encode::taken says not read (2.0 answered as 1.0 does): again
//!  the seconds are over ── drain(): the rest, for 10 s at most; then notes():
//!     "output prometheus-rw: 12 of 61 seconds not delivered to URL (HTTP 503 Service Unavailable, 7 tries)"
//! ```
//!
//! It owns the policy ([`Pushing`], [`Backoff`], [`Policy`]), the wire seam
//! ([`Deliver`], [`Failure`]; [`Http`] is the HTTP(S) `POST` on the
//! engine's plain blocking client, `perfops_engine::watch::fetch`, one new
//! connection a request) and the headers read from the environment
//! ([`headers_from_env`]). It does not own any format: an output gives its
//! [`Encode`] (what a second becomes, what a request of several is, and
//! whether a refusal means another format), and its `ENTRY` in the
//! registry. Nothing here runs on the collector thread but the copy of the
//! second `Detached` makes; a receiver that is down, slow or refusing
//! costs the run nothing but the seconds said at the end.
//!
//! **Why so.** A second pushed late is worth as much as one pushed on
//! time (it carries its own timestamp), so a receiver that comes back gets
//! the backlog in a few requests of up to 30 seconds each; 300 seconds is
//! five minutes of a receiver's restart, and a few hundred kilobytes of
//! batches. Backoff starts at 0.25 s so that one lost request costs less
//! than the next second, and stops at 5 s so that a receiver back from a
//! restart is found within a few seconds; the jitter keeps a fleet's
//! coordinators, or several runs, from retrying in step. A request waits 5 s
//! at most: a stalled receiver holds this thread, never the run (the
//! `Detached` buffer takes the seconds meanwhile). The drain's 10 s is what
//! a user waits at most at the end for a receiver that is gone.
//!
//! **Cost** (bench/push-cost.sh, `quick -r 20000` against nginx, the
//! threads' own CPU by schedstat): 0.75-0.9 ms a second on the push's
//! thread (encoding, snappy, one `POST` on a new connection) and ~0.5 ms a
//! second on the collector for the copy it hands over: 0.13-0.14 % of a
//! core. A kept-alive connection would save a handshake a second that the
//! figure does not show; a new one each time means a receiver that hung up
//! or reset costs the next request nothing.
//!
//! **Auth** is never a flag (it would be in the shell's history, `ps`, and
//! `meta.json`'s command): headers come from the environment, in the
//! OpenTelemetry specification's format (`key=value,key2=value2`, values
//! percent-decoded), checked when the output is made (a byte a header may
//! not hold, CR or LF above all, is a usage error), and are never written
//! anywhere: not in results, notes or errors (a body a receiver echoes is
//! redacted of them). A URL's `user:password@` becomes basic auth, and the
//! URL is shown redacted.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use perfops_core::pipeline::{Second, SinkError};
use perfops_core::scenario::redact::{redact_text, redact_values};
use perfops_engine::tls::{Trust, client};
use perfops_engine::watch::fetch::{self, Body, FetchError, Request};
use perfops_report::detach::{CAPACITY, Detachable, Detached};
use perfops_report::output::{Copied, Output};
use perfops_report::run::RunMeta;
use rustls::ClientConfig;
use url::Url;

/// The bounds of a push: how much waits, how long it waits, how much goes at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// Seconds waiting to be delivered; beyond them the oldest is dropped.
    pub(crate) backlog: usize,
    /// Seconds in one request at most.
    pub(crate) per_request: usize,
    /// A request's body at most, bytes (above it, fewer seconds go at once).
    pub(crate) request_bytes: usize,
    /// The first wait after a failure.
    pub(crate) first_backoff: Duration,
    /// The longest wait between tries.
    pub(crate) max_backoff: Duration,
    /// The longest `Retry-After` honoured: the backlog is bounded anyway.
    pub(crate) max_retry_after: Duration,
    /// One request's deadline (connect, send, the whole answer).
    pub(crate) timeout: Duration,
    /// How long the end waits at most for what is left.
    pub(crate) drain: Duration,
}

impl Policy {
    /// The policy of every push (the module doc says why).
    pub(crate) const DEFAULT: Policy = Policy {
        backlog: 300,
        per_request: 30,
        request_bytes: 4 << 20,
        first_backoff: Duration::from_millis(250),
        max_backoff: Duration::from_secs(5),
        max_retry_after: Duration::from_secs(60),
        timeout: Duration::from_secs(5),
        drain: Duration::from_secs(10),
    };
}

/// A request, encoded: its body and the fields that say what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Payload {
    /// The bytes (already compressed where the format says so).
    pub(crate) body: Vec<u8>,
    /// Its `Content-Type`.
    pub(crate) content_type: &'static str,
    /// Other fields of the format (`Content-Encoding`, a version).
    pub(crate) headers: Vec<(&'static str, &'static str)>,
}

/// Why a request was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Worth another try: the network, a timeout, a 5xx, a 429.
    Retry {
        /// What happened, in a few words (`HTTP 503 Service Unavailable`, `connection refused`).
        reason: String,
        /// How long the receiver asked to wait (`Retry-After`).
        after: Option<Duration>,
    },
    /// Never worth another try as it is: another 4xx. Those seconds are given up.
    Refused {
        /// Its status (a gRPC receiver maps its code onto one).
        status: u16,
        /// What the receiver said (`HTTP 400: out of order sample`), bounded and printable.
        reason: String,
    },
}

/// A wire a push goes out on.
pub(crate) trait Deliver: Send + 'static {
    /// Send `payload`, waiting at most `timeout`.
    fn deliver(&mut self, payload: &Payload, timeout: Duration) -> Result<(), Failure>;
    /// Where it goes, as it may be shown (credentials redacted).
    fn target(&self) -> &str;
    /// The header fields of the answer to the last request delivered (none
    /// where the wire has none), for [`Encode::taken`].
    fn answer(&self) -> &[(String, Vec<u8>)] {
        &[]
    }
    /// What the receiver said besides delivered or not (OTLP's partial
    /// success: data points it rejected), for the end of the run, without
    /// the output's name (the push puts it first).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A format's reader of a 2xx answer: the data points the receiver
/// rejected and its reason, when it rejected any.
pub(crate) type ReadPartial = fn(&[u8]) -> Option<(u64, String)>;

/// Data points a receiver rejected in requests it took (OTLP's partial
/// success), counted for the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rejected {
    /// Data points rejected.
    pub(crate) points: u64,
    /// What the receiver said, the last time (bounded, printable, no secret).
    pub(crate) reason: Option<String>,
}

impl Rejected {
    /// `points` rejected, with the receiver's `reason`; `secrets` are
    /// redacted from it.
    pub(crate) fn add(&mut self, points: u64, reason: &str, secrets: &[String]) {
        if points == 0 {
            return;
        }
        self.points += points;
        let line = perfops_core::printable::lines(reason.lines().next().unwrap_or(""));
        let line: String = line.chars().take(REASON_CHARS).collect();
        self.reason = Some(redact_values(&line, secrets).into_owned()).filter(|r| !r.is_empty());
    }

    /// What is said of them at the end, if any were.
    pub(crate) fn note(&self, target: &str) -> Option<String> {
        (self.points > 0).then(|| {
            format!(
                "{target} rejected {} data point{} of what it took ({})",
                self.points,
                if self.points == 1 { "" } else { "s" },
                self.reason.as_deref().unwrap_or("no reason given")
            )
        })
    }
}

/// A format: what a second becomes, and a request of several.
pub(crate) trait Encode: Send + 'static {
    /// A second as the format keeps it until it is delivered.
    type Item: Send + 'static;
    /// The run begins.
    fn start(&mut self, meta: &RunMeta);
    /// One second (on the output's thread).
    fn second(&mut self, second: &Second<'_>) -> Self::Item;
    /// One request of these seconds, oldest first.
    fn request(&mut self, items: &[&Self::Item]) -> Payload;
    /// A request was refused with `status`: `true` if the format changed so
    /// that the same seconds are worth sending again at once (a 415 to
    /// remote-write 2.0: 1.0 next, for the rest of the run).
    fn refused(&mut self, status: u16) -> bool {
        let _ = status;
        false
    }
    /// A request was answered with success and these header fields:
    /// `true` if the answer shows the receiver did not read the format
    /// (a 2.0 request answered without 2.0's `...-Written` fields: a 1.0
    /// receiver that read an empty request), and the format changed so that
    /// the same seconds are worth sending again at once.
    fn taken(&mut self, answer: &[(String, Vec<u8>)]) -> bool {
        let _ = answer;
        false
    }
}

/// Exponential backoff with jitter: `first`, doubling to `max`, each wait
/// taken at random in [0.5, 1) of it, or the receiver's `Retry-After`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    max_after: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(policy: &Policy) -> Backoff {
        Backoff {
            first: policy.first_backoff,
            max: policy.max_backoff,
            max_after: policy.max_retry_after,
            next: policy.first_backoff,
        }
    }

    /// A try failed: how long to wait, with `unit` a random number in [0, 1).
    /// A `Retry-After` is waited as asked (up to `max_retry_after`), and the
    /// doubling goes on beneath it.
    pub(crate) fn failed(&mut self, after: Option<Duration>, unit: f64) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jittered = base.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0));
        match after {
            Some(after) => after.min(self.max_after).max(jittered),
            None => jittered,
        }
    }

    /// A try succeeded: the next failure waits `first` again.
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

/// What happened to the seconds handed to a push.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Seconds handed to it.
    pub(crate) seconds: u64,
    /// Seconds a receiver took.
    pub(crate) delivered: u64,
    /// Seconds dropped because the backlog was full (the oldest first).
    pub(crate) evicted: u64,
    /// Seconds a receiver refused (a 4xx).
    pub(crate) refused: u64,
    /// What it said, the last time.
    pub(crate) refusal: Option<String>,
    /// Seconds still waiting when the drain's time was up.
    pub(crate) left: u64,
    /// Tries that failed and were worth another.
    pub(crate) failed_tries: u64,
    /// The last of those failures.
    pub(crate) last_failure: Option<String>,
}

/// A push: the backlog, the retries, the tally (see the module doc).
pub(crate) struct Pushing<E: Encode, D: Deliver> {
    name: &'static str,
    encode: E,
    deliver: D,
    policy: Policy,
    backlog: VecDeque<E::Item>,
    backoff: Backoff,
    /// When the next try may go; `None`: now.
    next_try: Option<Instant>,
    tally: Tally,
}

impl<E: Encode, D: Deliver> Pushing<E, D> {
    /// A push called `name` in what is said of it, of `encode`'s format on `deliver`'s wire.
    pub(crate) fn new(name: &'static str, encode: E, deliver: D, policy: Policy) -> Self {
        Pushing {
            name,
            encode,
            deliver,
            backoff: Backoff::new(&policy),
            policy,
            backlog: VecDeque::new(),
            next_try: None,
            tally: Tally::default(),
        }
    }

    /// What happened so far.
    #[cfg(test)]
    pub(crate) fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The wire, for a test to look at.
    #[cfg(test)]
    pub(crate) fn wire(&self) -> &D {
        &self.deliver
    }

    /// A second to deliver: at the back of the backlog, the oldest dropped if it is full.
    pub(crate) fn add(&mut self, item: E::Item) {
        self.tally.seconds += 1;
        if self.backlog.len() >= self.policy.backlog.max(1) {
            self.backlog.pop_front();
            self.tally.evicted += 1;
        }
        self.backlog.push_back(item);
    }

    /// One request of the oldest seconds, waiting at most `timeout`.
    fn attempt(&mut self, now: Instant, timeout: Duration) {
        let mut n = self.backlog.len().min(self.policy.per_request.max(1));
        let mut formats = 0;
        loop {
            let items: Vec<&E::Item> = self.backlog.iter().take(n).collect();
            let payload = self.encode.request(&items);
            if payload.body.len() > self.policy.request_bytes && n > 1 {
                n /= 2;
                continue;
            }
            match self.deliver.deliver(&payload, timeout) {
                // Taken, but not read: the same seconds again in the format now chosen.
                Ok(()) if formats == 0 && self.encode.taken(self.deliver.answer()) => {
                    formats += 1;
                    continue;
                }
                Ok(()) => {
                    self.backlog.drain(..n);
                    self.tally.delivered += n as u64;
                    self.backoff.reset();
                    self.next_try = None;
                }
                Err(Failure::Retry { reason, after }) => {
                    self.tally.failed_tries += 1;
                    self.tally.last_failure = Some(reason);
                    self.next_try = Some(now + self.backoff.failed(after, fastrand::f64()));
                }
                // Another format, at once (once per request: a receiver
                // that refuses both is refused as any other 4xx).
                Err(Failure::Refused { status, .. }) if formats == 0 && self.encode.refused(status) => {
                    formats += 1;
                    continue;
                }
                Err(Failure::Refused { reason, .. }) => {
                    self.backlog.drain(..n);
                    self.tally.refused += n as u64;
                    self.tally.refusal = Some(reason);
                    self.next_try = None;
                }
            }
            return;
        }
    }

    /// Deliver what is due at `now` (one request at most) and say when the
    /// next call is wanted (`None`: nothing waits).
    pub(crate) fn tick(&mut self, now: Instant) -> Option<Duration> {
        if self.backlog.is_empty() {
            return None;
        }
        if let Some(at) = self.next_try.filter(|at| *at > now) {
            return Some(at - now);
        }
        self.attempt(now, self.policy.timeout);
        if self.backlog.is_empty() {
            return None;
        }
        Some(self.next_try.map_or(Duration::ZERO, |at| at.saturating_duration_since(Instant::now())))
    }

    /// The seconds are over: deliver the rest, waiting as the backoff says,
    /// until `deadline` at most; what is still waiting then is counted as left.
    pub(crate) fn drain(&mut self, deadline: Instant) {
        while !self.backlog.is_empty() {
            let now = Instant::now();
            let at = self.next_try.unwrap_or(now).max(now);
            if at >= deadline {
                break;
            }
            std::thread::sleep(at - now);
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                break;
            }
            self.attempt(now, left.min(self.policy.timeout));
        }
        self.tally.left += self.backlog.len() as u64;
        self.backlog.clear();
    }

    /// What could not be delivered, and why; nothing when all was.
    pub(crate) fn notes(&self) -> Vec<String> {
        let t = &self.tally;
        let lost = t.evicted + t.refused + t.left;
        let wire = self.deliver.notes().into_iter().map(|n| format!("output {}: {n}", self.name));
        if lost == 0 {
            return wire.collect();
        }
        let mut why = Vec::new();
        if t.left + t.evicted > 0 {
            let tries = match t.failed_tries {
                1 => "1 try".to_string(),
                n => format!("{n} tries"),
            };
            why.push(match &t.last_failure {
                Some(reason) => format!("{reason}, {tries}"),
                None => format!("not sent within {} s", self.policy.drain.as_secs()),
            });
        }
        if t.evicted > 0 {
            why.push(format!("{} dropped, more than {} waiting", t.evicted, self.policy.backlog));
        }
        if let Some(refusal) = &t.refusal {
            why.push(format!("{} refused: {refusal}", t.refused));
        }
        vec![format!(
            "output {}: {lost} of {} second{} not delivered to {} ({})",
            self.name,
            t.seconds,
            if t.seconds == 1 { "" } else { "s" },
            self.deliver.target(),
            why.join("; ")
        )]
        .into_iter()
        .chain(wire)
        .collect()
    }
}

impl<E: Encode, D: Deliver> Detachable for Pushing<E, D> {
    type Copy = Copied;

    fn copy(second: &Second<'_>, old: Option<Copied>) -> Copied {
        Copied::of(second, old)
    }

    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        self.encode.start(meta);
        Ok(())
    }

    fn second(&mut self, copy: &Copied) -> Result<(), SinkError> {
        let item = self.encode.second(&copy.second());
        self.add(item);
        Ok(())
    }

    fn tick(&mut self) -> Option<Duration> {
        Pushing::tick(self, Instant::now())
    }

    fn drain(&mut self, until: Instant) {
        Pushing::drain(self, until)
    }

    fn notes(&self) -> Vec<String> {
        Pushing::notes(self)
    }
}

/// A push as an output: on its own thread behind `Detached`, drained for
/// the policy's bound from when the seconds are over (a request in flight
/// then ends within its own timeout, shorter).
pub(crate) fn output<E: Encode, D: Deliver>(
    name: &'static str,
    encode: E,
    deliver: D,
) -> Result<Box<dyn Output>, String> {
    let policy = Policy::DEFAULT;
    let pushing = Pushing::new(name, encode, deliver, policy);
    let detached = Detached::with_drain(name, pushing, CAPACITY, policy.drain)
        .map_err(|e| format!("cannot start its thread: {e}"))?;
    Ok(Box::new(detached))
}

/// The most of a refusal's body kept: its first line, this many characters.
const REASON_CHARS: usize = 200;

/// HTTP(S) `POST`, one new connection a request (`perfops_engine::watch::fetch`).
pub(crate) struct Http {
    /// The URL without its credentials.
    url: Url,
    /// The URL as shown (credentials redacted).
    shown: String,
    /// Auth headers (from the environment, or basic auth from the URL): never shown.
    headers: Vec<(String, String)>,
    tls: Option<Arc<ClientConfig>>,
    /// Never set: a push is bounded by its timeout, not stopped.
    stop: AtomicBool,
    /// The header fields of the last answer that took a request.
    answer: Vec<(String, Vec<u8>)>,
    /// The format's reader of a 2xx answer: data points rejected, and why.
    partial: Option<ReadPartial>,
    rejected: Rejected,
}

impl std::fmt::Debug for Http {
    // The headers are secrets: never in a debug print either.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").field("url", &self.shown).finish_non_exhaustive()
    }
}

impl Http {
    /// A `POST` to `url` (`http://` or `https://`, the system's roots
    /// trusted), with the headers of the environment variables `vars`
    /// (later ones override earlier ones: the most specific last) and
    /// basic auth from the URL's `user:password@`.
    pub(crate) fn new(url: &str, vars: &[&str]) -> Result<Http, String> {
        let shown = redact_text(url).into_owned();
        let mut parsed = Url::parse(url).map_err(|e| format!("{shown} is not a URL: {e}"))?;
        match parsed.scheme() {
            "http" | "https" => {}
            other => return Err(format!("{shown}: scheme `{other}`, not http or https")),
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(format!("{shown} names no host"));
        }
        let mut headers = headers_from_env(vars)?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            let user = percent_decode(parsed.username().as_bytes()).ok_or("the URL's user is not percent-encoded")?;
            let password = percent_decode(parsed.password().unwrap_or("").as_bytes())
                .ok_or("the URL's password is not percent-encoded")?;
            let mut pair = user;
            pair.push(b':');
            pair.extend_from_slice(&password);
            let basic = base64::engine::general_purpose::STANDARD.encode(pair);
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".into(), format!("Basic {basic}")));
            // Infallible for http(s) URLs, which have a host.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
        }
        let tls = match parsed.scheme() {
            "https" => Some(client(Trust::Platform(Vec::new()), &[b"http/1.1"]).map_err(|e| e.to_string())?),
            _ => None,
        };
        Ok(Http {
            url: parsed,
            shown,
            headers,
            tls,
            stop: AtomicBool::new(false),
            partial: None,
            rejected: Rejected::default(),
            answer: Vec::new(),
        })
    }

    /// Read each 2xx answer with `read` (OTLP's partial success): what it
    /// says was rejected is counted and said at the end.
    pub(crate) fn reading(mut self, read: ReadPartial) -> Http {
        self.partial = Some(read);
        self
    }
}

impl Deliver for Http {
    fn deliver(&mut self, payload: &Payload, timeout: Duration) -> Result<(), Failure> {
        let mut headers: Vec<(&str, &str)> = payload.headers.clone();
        headers.extend(self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        let req = Request { url: &self.url, timeout, headers: &headers, tls: self.tls.as_ref() };
        let body = Body { content_type: payload.content_type, bytes: &payload.body };
        match fetch::post(&req, &body, &self.stop) {
            Ok(r) if (200..300).contains(&r.status) => {
                if let Some((points, reason)) = self.partial.and_then(|read| read(&r.body)) {
                    let secrets: Vec<String> = self.headers.iter().map(|(_, v)| v.clone()).collect();
                    self.rejected.add(points, &reason, &secrets);
                }
                self.answer = r.headers;
                Ok(())
            }
            Ok(r) => {
                let secrets: Vec<String> = self.headers.iter().map(|(_, v)| v.clone()).collect();
                Err(failure(r.status, &r.headers, &r.body, &secrets, SystemTime::now()))
            }
            Err(e) => Err(Failure::Retry { reason: fetch_reason(&e), after: None }),
        }
    }

    fn target(&self) -> &str {
        &self.shown
    }

    fn answer(&self) -> &[(String, Vec<u8>)] {
        &self.answer
    }

    fn notes(&self) -> Vec<String> {
        self.rejected.note(&self.shown).into_iter().collect()
    }
}

fn fetch_reason(e: &FetchError) -> String {
    e.to_string()
}

/// What a status means for a push: 429 and 5xx are worth another try (with
/// the `Retry-After`, in seconds or as an HTTP date read against `now`),
/// any other status is refused; the reason is the body's first line
/// (bounded, printable, the auth headers' values redacted) or the status's
/// phrase.
pub(crate) fn failure(
    status: u16,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
    secrets: &[String],
    now: SystemTime,
) -> Failure {
    let line = String::from_utf8_lossy(body);
    let line = line.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let line: String = line.chars().take(REASON_CHARS).collect();
    let line = redact_values(&line, secrets);
    let line = perfops_core::printable::escape(&line);
    // What the receiver said, when it said something (Prometheus: "out of order sample",
    // "native histograms are disabled"), else the status's phrase.
    let reason = match (line.is_empty(), reason_phrase(status)) {
        (false, _) => format!("HTTP {status}: {line}"),
        (true, Some(phrase)) => format!("HTTP {status} {phrase}"),
        (true, None) => format!("HTTP {status}"),
    };
    if status == 429 || (500..600).contains(&status) {
        let after = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
            .and_then(|(_, v)| retry_after(std::str::from_utf8(v).ok()?.trim(), now));
        return Failure::Retry { reason, after };
    }
    Failure::Refused { status, reason }
}

/// A `Retry-After` value (RFC 9110 10.2.3): delay-seconds, or an HTTP date
/// (IMF-fixdate, or the obsolete forms `httpdate` also reads) turned into
/// the wait from `now`; a date already past asks for no wait. Anything else
/// is not read: the backoff waits instead.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The standard phrase of the statuses a receiver answers a push with.
fn reason_phrase(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}

/// Fields a push writes itself, which a header from the environment must not replace.
const OWN_FIELDS: [&str; 6] =
    ["host", "content-length", "content-type", "content-encoding", "connection", "transfer-encoding"];

/// The headers of the environment variables `vars`, in the OpenTelemetry
/// specification's format; a later variable's header replaces an earlier's
/// of the same name. An unset or empty variable gives none.
pub(crate) fn headers_from_env(vars: &[&str]) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for var in vars {
        let Some(text) = std::env::var_os(var) else { continue };
        let text = text.into_string().map_err(|_| format!("{var} is not UTF-8"))?;
        for (name, value) in parse_headers(var, &text)? {
            out.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            out.push((name, value));
        }
    }
    Ok(out)
}

/// `key=value,key2=value2` (spaces around each trimmed, values
/// percent-decoded), each checked: a name is an HTTP token and not one of
/// the push's own fields, a value holds no CR, LF, NUL or other control
/// byte. Errors name the variable and the header, never a value.
pub(crate) fn parse_headers(var: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((name, value)) = entry.split_once('=') else {
            return Err(format!("{var}: entry {} is not name=value", i + 1));
        };
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!("{var}: entry {} has no valid header name (letters, digits, -_.!#$%&'*+^`|~)", i + 1));
        }
        if OWN_FIELDS.iter().any(|own| own.eq_ignore_ascii_case(name)) {
            return Err(format!("{var}: header `{name}` is written by perfops itself"));
        }
        let value = percent_decode(value.trim().as_bytes())
            .ok_or_else(|| format!("{var}: the value of header `{name}` has a `%` not followed by two hex digits"))?;
        if !value.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80) {
            return Err(format!(
                "{var}: the value of header `{name}` holds a byte a header may not hold (CR, LF, NUL or another control character)"
            ));
        }
        let value =
            String::from_utf8(value).map_err(|_| format!("{var}: the value of header `{name}` is not UTF-8"))?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// RFC 9110's token characters.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `%XX` decoded; `None` for a `%` without two hex digits after it.
fn percent_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            // from_str_radix alone would take `%+1`.
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "push_test.rs"]
mod tests;
