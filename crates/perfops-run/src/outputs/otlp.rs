//! `--output otlp=URL` and `--output otlp-grpc=URL`: the run's seconds as
//! OpenTelemetry metrics over OTLP, with base-2 exponential histograms, to
//! a Collector or any OTLP receiver (Prometheus' own included).
//!
//! ```text
//!   Second ─> Pushed::second (perfops_report::push: names, labels, delta or cumulative)
//!          ─> Batch ─> backlog (push.rs) ─> wire::request: ExportMetricsServiceRequest, protobuf
//!                                              │
//!      otlp=URL       POST URL (http://host:4318 gets /v1/metrics), application/x-protobuf
//!                     on push.rs' HTTP wire: 5xx, 429 and the network retried, other 4xx refused
//!      otlp-grpc=URL  /opentelemetry.proto.collector.metrics.v1.MetricsService/Export, unary,
//!                     on the engine's own HTTP/2 client (h2c for http://, TLS + ALPN h2 for
//!                     https://): UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, ABORTED
//!                     and the network retried, other statuses refused; partial success counted
//! ```
//!
//! **Temporality.** Delta by default: each point is its second alone, what
//! OpenTelemetry's exporters send by default and the least state at either
//! end. `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=cumulative` (the
//! specification's variable) sends each (stage, step) added up since its
//! first second instead, for a receiver that takes only cumulative series
//! (Prometheus without its delta conversion); `delta` and `lowmemory` are
//! delta here (perfops' counters and histograms are all delta-friendly).
//! perfops sends its seconds in order, one request at a time, so a receiver
//! that adds deltas up (Prometheus' `otlp-deltatocumulative`) gets them in
//! order; a Collector in between answers once a push is queued, and its
//! exporter may hand on two seconds in the other order, when Prometheus
//! drops the older: through a Collector into Prometheus, cumulative is the
//! safe choice (tests/push_otlp.rs pushes so).
//!
//! **Auth.** Headers from `OTEL_EXPORTER_OTLP_HEADERS`, then
//! `OTEL_EXPORTER_OTLP_METRICS_HEADERS` (the more specific wins a name), in
//! the specification's `key=value,...` format; over gRPC they are the call's
//! metadata. Never a flag, never written anywhere (push.rs).
//!
//! **Cost, measured.** At 20,000 requests/s (`bench/push-cost.sh` with
//! `OUTPUT=otlp` and `OUTPUT=otlp-grpc`, bench/README.md), the push's own
//! thread spends 1.1-1.2 ms a second over HTTP and 1.3-1.5 ms over gRPC
//! (the batch, protobuf, one request on a new connection), and the
//! collector 0.4-0.7 ms copying the second it hands over: under 0.25 % of a
//! core, against a goal of 1 %. So each request opens its own connection
//! (over gRPC, its own HTTP/2 connection and current-thread runtime turn):
//! a kept connection would save a handshake a second, at the price of
//! state a receiver may close at any moment; and nothing here is tuned
//! further.
//!
//! This module owns the two registry entries, the endpoint rule, the
//! temporality choice, the format ([`Otlp`], an `Encode` of push.rs) and the
//! gRPC wire ([`Grpc`], a `Deliver`). The messages and the mapping from a
//! batch are `otlp/wire.rs`'s; the backlog, retries, the HTTP wire and what
//! is said of a loss are push.rs's, shared with `prometheus-rw`; the call
//! itself is `perfops_engine::unary`'s.

mod wire;

use std::time::Duration;

use perfops_core::pipeline::Second;
use perfops_core::scenario::redact::{redact_text, redact_values};
use perfops_engine::Target;
use perfops_engine::unary::{self, UnaryError};
use perfops_report::push::{Batch, Pushed, Temporality};
use perfops_report::run::RunMeta;
use prost::Message;

use super::push::{self, Deliver, Encode, Failure, Http, Payload, Rejected};
use super::{Arg, Entry};
use perfops_report::output::Output;

/// `otlp=URL`: OTLP over HTTP, protobuf.
pub(crate) const ENTRY: Entry = Entry {
    name: "otlp",
    help: "otlp=URL: OpenTelemetry metrics (OTLP/HTTP protobuf, exponential histograms) to URL \
           (http://HOST:4318 gets /v1/metrics); delta unless \
           OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=cumulative; auth headers from OTEL_EXPORTER_OTLP_HEADERS",
    make,
    arg: Arg::Address,
};

/// `otlp-grpc=URL`: OTLP over gRPC.
pub(crate) const GRPC_ENTRY: Entry = Entry {
    name: "otlp-grpc",
    help: "otlp-grpc=URL: the same over gRPC to URL (http://HOST:4317, h2c; https:// for TLS)",
    make: make_grpc,
    arg: Arg::Address,
};

/// The variables auth headers come from, the most specific last.
const HEADER_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"];

/// The specification's choice of temporality.
const TEMPORALITY_VAR: &str = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";

/// The gRPC method of every push.
const EXPORT: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

fn make(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let url = endpoint(arg.unwrap_or(""))?;
    let encode = Otlp::new(temporality(std::env::var(TEMPORALITY_VAR).ok().as_deref())?);
    push::output("otlp", encode, Http::new(&url, &HEADER_VARS)?.reading(wire::partial))
}

fn make_grpc(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let encode = Otlp::new(temporality(std::env::var(TEMPORALITY_VAR).ok().as_deref())?);
    push::output("otlp-grpc", encode, Grpc::new(arg.unwrap_or(""))?)
}

/// The specification's `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` rule: a URL
/// with a path is used as it is; one without (`http://host:4318`) gets
/// `/v1/metrics`.
fn endpoint(url: &str) -> Result<String, String> {
    let shown = redact_text(url);
    let parsed = url::Url::parse(url).map_err(|e| format!("{shown} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{shown}: scheme `{}`, not http or https", parsed.scheme()));
    }
    if parsed.path().is_empty() || parsed.path() == "/" {
        let mut with = parsed;
        with.set_path("/v1/metrics");
        return Ok(with.to_string());
    }
    Ok(url.to_string())
}

/// What `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` asks for
/// (case-insensitive); unset or empty: delta. Another value is a usage
/// error rather than a silent default: a user who set it wants to know.
fn temporality(var: Option<&str>) -> Result<Temporality, String> {
    match var.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("delta") | Some("lowmemory") => Ok(Temporality::Delta),
        Some("cumulative") => Ok(Temporality::Cumulative),
        Some(other) => Err(format!(
            "{TEMPORALITY_VAR}={}: not cumulative, delta or lowmemory",
            perfops_core::printable::lines(other)
        )),
    }
}

/// The OTLP format: each second a [`Batch`], a request of several one
/// `ExportMetricsServiceRequest` (the same bytes over HTTP and gRPC).
struct Otlp {
    temporality: Temporality,
    /// Made at the start, from the run's meta.
    pushed: Option<Pushed>,
    version: String,
}

impl Otlp {
    fn new(temporality: Temporality) -> Otlp {
        Otlp { temporality, pushed: None, version: String::new() }
    }
}

impl Encode for Otlp {
    type Item = Batch;

    fn start(&mut self, meta: &RunMeta) {
        self.pushed = Some(Pushed::new(meta, self.temporality));
        self.version = meta.perfops_version.clone();
    }

    fn second(&mut self, second: &Second<'_>) -> Batch {
        match &mut self.pushed {
            Some(pushed) => pushed.second(second),
            // `start` always comes first (Detached sends it before any second).
            None => Batch { time_ms: 0, points: Vec::new() },
        }
    }

    fn request(&mut self, items: &[&Batch]) -> Payload {
        let resource = self.pushed.as_ref().map_or(&[][..], Pushed::resource);
        let request = wire::request(items, resource, &self.version, self.temporality);
        Payload { body: request.encode_to_vec(), content_type: "application/x-protobuf", headers: Vec::new() }
    }
}

/// gRPC's status codes a push tries again (the OTLP specification's
/// retryable ones).
const RETRYABLE: [(u32, &str); 4] =
    [(4, "DEADLINE_EXCEEDED"), (8, "RESOURCE_EXHAUSTED"), (10, "ABORTED"), (14, "UNAVAILABLE")];

/// The unary `Export` call on the engine's HTTP/2 client, one new
/// connection a request, on a current-thread runtime of its own (the
/// push's thread is no tokio thread).
struct Grpc {
    target: Target,
    shown: String,
    /// Auth metadata (names lower-case): secrets, never shown.
    metadata: Vec<(String, String)>,
    rt: tokio::runtime::Runtime,
    /// Data points the receiver said it rejected (partial success).
    rejected: Rejected,
}

impl Grpc {
    fn new(url: &str) -> Result<Grpc, String> {
        let shown = redact_text(url).into_owned();
        let parsed = url::Url::parse(url).map_err(|e| format!("{shown} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("{shown}: scheme `{}`, not http (h2c) or https", parsed.scheme()));
        }
        if !(parsed.path().is_empty() || parsed.path() == "/") {
            return Err(format!("{shown}: a gRPC endpoint has no path (the method is the path)"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!("{shown}: credentials go in {}, not the URL", HEADER_VARS[1]));
        }
        let target = Target::parse(url).map_err(|e| e.to_string())?;
        let mut metadata = Vec::new();
        for (name, value) in push::headers_from_env(&HEADER_VARS)? {
            let name = name.to_ascii_lowercase();
            // HTTP/2 forbids connection-specific fields; gRPC owns its own.
            if name.starts_with("grpc-") || ["te", "connection", "keep-alive", "upgrade", "transfer-encoding", "host"].contains(&name.as_str()) {
                return Err(format!("header `{name}` cannot be gRPC metadata"));
            }
            metadata.push((name, value));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        Ok(Grpc { target, shown, metadata, rt, rejected: Rejected::default() })
    }

    fn secrets(&self) -> Vec<String> {
        self.metadata.iter().map(|(_, v)| v.clone()).collect()
    }

    /// The receiver's words, bounded and printable, with no secret of ours.
    fn said(&self, text: &str) -> String {
        let line = perfops_core::printable::lines(text.lines().next().unwrap_or(""));
        let line: String = line.chars().take(200).collect();
        redact_values(&line, &self.secrets()).into_owned()
    }
}

impl Deliver for Grpc {
    fn deliver(&mut self, payload: &Payload, timeout: Duration) -> Result<(), Failure> {
        let call = unary::call(&self.target, false, EXPORT, &self.metadata, &payload.body, timeout);
        match self.rt.block_on(call) {
            Ok(reply) if reply.status == 0 => {
                if let Some((points, reason)) = reply.body.as_deref().and_then(wire::partial) {
                    let secrets = self.secrets();
                    self.rejected.add(points, &reason, &secrets);
                }
                Ok(())
            }
            Ok(reply) => Err(status_failure(reply.status, &self.said(&reply.message))),
            // gRPC's mapping of an HTTP status with no gRPC status: 429,
            // 502, 503 and 504 are UNAVAILABLE, the rest are not retried.
            Err(UnaryError::Http(status)) if matches!(status, 429 | 502 | 503 | 504) => {
                Err(Failure::Retry { reason: format!("HTTP {status}"), after: None })
            }
            Err(UnaryError::Http(status)) => Err(Failure::Refused { status, reason: format!("HTTP {status}") }),
            Err(UnaryError::Unreachable(why)) => Err(Failure::Retry { reason: unreachable(&why), after: None }),
            Err(e) => Err(Failure::Retry { reason: e.to_string(), after: None }),
        }
    }

    fn target(&self) -> &str {
        &self.shown
    }

    fn notes(&self) -> Vec<String> {
        self.rejected.note(&self.shown).into_iter().collect()
    }
}

/// A connection error as the HTTP wire says it (`connection refused`), not
/// as the OS spells it (`Connection refused (os error 111)`).
fn unreachable(why: &str) -> String {
    let why = why.split(" (os error").next().unwrap_or(why);
    let mut chars = why.chars();
    chars.next().map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect())
}

/// A gRPC status other than OK: the retryable ones tried again, the others
/// refused (with the HTTP status gRPC maps them from, for the tally).
fn status_failure(code: u32, message: &str) -> Failure {
    let name = RETRYABLE.iter().find(|(c, _)| *c == code).map(|(_, n)| *n);
    let reason = |name: &str| format!("gRPC {name}{}{message}", if message.is_empty() { "" } else { ": " });
    match name {
        Some(name) => Failure::Retry { reason: reason(name), after: None },
        None => {
            let (status, name) = match code {
                3 => (400, "INVALID_ARGUMENT"),
                5 => (404, "NOT_FOUND"),
                7 => (403, "PERMISSION_DENIED"),
                12 => (404, "UNIMPLEMENTED"),
                16 => (401, "UNAUTHENTICATED"),
                _ => (400, ""),
            };
            let name = if name.is_empty() { format!("status {code}") } else { name.to_string() };
            Failure::Refused { status, reason: reason(&name) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoint rule of `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`.
    #[test]
    fn an_endpoint_without_a_path_gets_v1_metrics() {
        // (given, used)
        let cases = [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"), // no path: the default one
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"), // "/" is no path either
            ("http://h:9090/api/v1/otlp/v1/metrics", "http://h:9090/api/v1/otlp/v1/metrics"), // as given
            ("https://h/custom", "https://h/custom"),                      // any path, as given
        ];
        for (given, want) in cases {
            assert_eq!(endpoint(given).as_deref(), Ok(want), "{given}");
        }
        // Not HTTP: refused, saying which scheme.
        assert!(endpoint("grpc://h:4317").is_err_and(|e| e.contains("grpc")));
        assert!(endpoint("h:4318").is_err());
    }

    /// The specification's variable chooses; unset is delta; a typo is said.
    #[test]
    fn temporality_follows_the_specifications_variable() {
        // (value, choice)
        let cases = [
            (None, Some(Temporality::Delta)),                 // unset: delta, OTel's exporters' default
            (Some(""), Some(Temporality::Delta)),             // empty is unset
            (Some("cumulative"), Some(Temporality::Cumulative)), // asked for
            (Some("Cumulative"), Some(Temporality::Cumulative)), // case-insensitive, as the spec says
            (Some("delta"), Some(Temporality::Delta)),
            (Some("lowmemory"), Some(Temporality::Delta)), // every perfops instrument is delta there
            (Some("cumulativ"), None),                     // a typo: a usage error
        ];
        for (value, want) in cases {
            assert_eq!(temporality(value).ok(), want, "{value:?}");
        }
    }

    /// gRPC statuses: the OTLP specification's retryable ones are retried,
    /// the rest refused, each said with its name and the receiver's words.
    #[test]
    fn grpc_statuses_are_retried_or_refused() {
        // (code, retried, reason)
        let cases = [
            (14, true, "gRPC UNAVAILABLE: down"),        // the receiver is restarting
            (8, true, "gRPC RESOURCE_EXHAUSTED: down"),  // it sheds load
            (4, true, "gRPC DEADLINE_EXCEEDED: down"),   // it was too slow
            (10, true, "gRPC ABORTED: down"),            // it gave up on this one
            (3, false, "gRPC INVALID_ARGUMENT: down"),   // it will never take these bytes
            (16, false, "gRPC UNAUTHENTICATED: down"),   // wrong or missing token
            (12, false, "gRPC UNIMPLEMENTED: down"),     // no metrics service there
            (2, false, "gRPC status 2: down"),           // UNKNOWN: not retried
        ];
        for (code, retried, reason) in cases {
            match status_failure(code, "down") {
                Failure::Retry { reason: r, after } => {
                    assert!(retried, "{code}");
                    assert_eq!((r.as_str(), after), (reason, None));
                }
                Failure::Refused { reason: r, .. } => {
                    assert!(!retried, "{code}");
                    assert_eq!(r, reason);
                }
            }
        }
    }
}
