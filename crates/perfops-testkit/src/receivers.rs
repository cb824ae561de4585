//! The real metrics receivers perfops' push outputs are tested against: a current Prometheus
//! (3.16.0, with its remote-write and OTLP receivers) and an OpenTelemetry Collector (0.165.0:
//! the OTLP receiver over gRPC and HTTP, exporting to that Prometheus). Both are built from
//! source once by `bench/receivers/install.sh` into `~/.cache/perfops-receivers/bin`
//! (`PERFOPS_RECEIVERS_HOME` moves it); `scripts/test` runs it and sets
//! `PERFOPS_RECEIVERS=required`. Debian's Prometheus ([`crate::prometheus`]) is 2.42: it has
//! no remote-write 2.0 and no OTLP receiver (it came with 2.47), hence these.
//!
//! This module owns starting them (each on free loopback ports, with its own temporary
//! directory, stopped by its PID when dropped), their configuration and flags, the wait until
//! they are ready, and [`unavailable`], the skip-or-fail rule for a machine without the
//! binaries. The refusing and stalling receivers of the fault tests are plain test servers of
//! this crate ([`crate::refusing`], [`crate::stalling`]), and a receiver that is down is
//! [`crate::refused_addr`].
//!
//! # Prometheus: flags
//!
//! ```text
//! prometheus --config.file=DIR/prometheus.yml --storage.tsdb.path=DIR/data
//!   --web.listen-address=127.0.0.1:PORT --web.enable-remote-write-receiver
//!   --web.enable-otlp-receiver --enable-feature=otlp-deltatocumulative
//!   --storage.tsdb.retention.time=1h --log.level=warn
//!   [--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest]
//! ```
//!
//! - Native histograms need no flag in 3.16 to be ingested by remote write or OTLP (the
//!   `native-histograms` feature is a no-op there; it only concerned scraping, now the
//!   `scrape_native_histograms` setting).
//! - `otlp-deltatocumulative` makes the OTLP receiver turn delta sums and delta (exponential)
//!   histograms into cumulative series, so that `rate()` and `increase()` work on them as on
//!   any counter. Its alternative, `otlp-native-delta-ingestion`, stores the raw deltas with
//!   an unknown type (and the two refuse to be enabled together).
//! - Remote write accepts both 1.0 (`prometheus.WriteRequest`) and 2.0
//!   (`io.prometheus.write.v2.Request`) by default; [`PrometheusOptions::remote_write_v1_only`]
//!   accepts only 1.0, and Prometheus then answers a 2.0 request `415 Unsupported Media Type`,
//!   which is what a 2.0 sender falls back on.
//! - The configuration has no scrape job and the default `otlp:` block: nothing is promoted.
//!
//! # What Prometheus' OTLP translation makes of a push
//!
//! (The default translation strategy of 3.16 is `UnderscoreEscapingWithSuffixes`. Starred:
//! checked by `tests/receivers.rs`; the others seen once by hand.)
//!
//! - (*) `perfops.latency`, unit `s`, an exponential histogram: the native histogram
//!   `perfops_latency_seconds` (dots become underscores, the unit becomes a suffix; no
//!   `_bucket`, `_sum` or `_count` series). Query it with `histogram_quantile(0.5, ...)`,
//!   `histogram_count(...)`, `histogram_sum(...)`.
//! - (*) `perfops.requests`, unit `{request}`, a monotonic sum: `perfops_requests_total` (a
//!   unit in braces is an annotation and is dropped; a monotonic sum gets `_total`).
//! - A gauge `perfops.in_flight`, unit `{request}`: `perfops_in_flight`. Unit `By` gives
//!   `_bytes`, unit `1` on a gauge `_ratio`, neither repeated when the name ends with it
//!   (`perfops.bytes`, a monotonic sum in `By`: `perfops_bytes_total`).
//! - (*) Resource attribute `service.name` becomes `job`, `service.instance.id` `instance`.
//!   (*) The other resource attributes are not on the series but on one `target_info` series
//!   per resource, with the same `job` and `instance` (`host.name` as `host_name`). (*) Data
//!   point attributes become labels, dots made underscores (`http.request.method` as
//!   `http_request_method`). By hand: with `service.namespace` set, `job` is
//!   `NAMESPACE/NAME`; without other resource attributes there is no `target_info`; the
//!   scope's name and version are not labels.
//! - (*) Delta temporality (sums and exponential histograms) is accepted and converted to
//!   cumulative: a first delta point is stored as it is, each next one added to it; `rate()`
//!   of the series then works, for the counters and for the histograms
//!   (`histogram_count(rate(perfops_latency_seconds[1m]))`).
//!
//! # What the receivers answer to a push (measured on 3.16.0; `tests/receivers.rs` checks the
//! starred ones)
//!
//! OTLP (`/api/v1/otlp/v1/metrics`, `application/x-protobuf` or `application/json`; `200` with
//! an empty body when taken):
//! - (*) a delta point whose time is not after the last one of its series (a retry of a point
//!   that was taken, or a late one) is dropped, and the request still answered `200`: a retry
//!   never counts twice, and deltas sent out of order are lost without a word. A point whose
//!   start is after the previous end (a gap) is added on.
//!
//! Remote write (`/api/v1/write`):
//! - 1.0 (`application/x-protobuf`, with or without `;proto=prometheus.WriteRequest`) and 2.0
//!   (`;proto=io.prometheus.write.v2.Request`) answer `204`; a 2.0 answer carries
//!   `X-Prometheus-Remote-Write-Samples-Written`, `-Histograms-Written` and
//!   `-Exemplars-Written`. A body without `Content-Encoding` is read as snappy;
//!   `Content-Encoding: zstd` is answered `415`.
//! - (*) the same sample again (same timestamp, same value) is taken (`204`); the same timestamp
//!   with another value is `400` (`duplicate sample for timestamp`), an older one than the
//!   series' last `400` (`out of order sample`), one from before the head's window (2 h old
//!   on a fresh server) `400` (`out of bounds`).
//!
//! # The Collector: configuration
//!
//! The `otlp` receiver on `127.0.0.1:G` (gRPC) and `127.0.0.1:H` (HTTP, `/v1/metrics`, both
//! protobuf and JSON); one metrics pipeline to the `otlp_http` exporter (the release renamed
//! `otlphttp` to `otlp_http`, the old name is a deprecated alias) with `metrics_endpoint` set
//! to Prometheus' `/api/v1/otlp/v1/metrics`, and optionally the `debug` exporter (detailed,
//! with its own logger, since the collector's logs only warnings: into [`Collector::log`]).
//! [`collector_forwarding`] exports with `otlp_grpc` (renamed from `otlp` likewise) to another
//! Collector's gRPC receiver instead: a gRPC sender that is not perfops. Its own telemetry is off (no port 8888) and
//! it logs warnings only.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{PromApi, get, post};

/// The Prometheus release `bench/receivers/install.sh` builds (module v0.316.0).
pub const PROMETHEUS_VERSION: &str = "3.16.0";
/// The OpenTelemetry Collector release `bench/receivers/install.sh` builds.
pub const COLLECTOR_VERSION: &str = "0.165.0";

/// How long a receiver may take to become ready (a loaded 2-core CI machine).
const START_LIMIT: Duration = Duration::from_secs(30);

/// Where `bench/receivers/install.sh` puts the binaries:
/// `$PERFOPS_RECEIVERS_HOME/bin`, by default `~/.cache/perfops-receivers/bin`.
pub fn bin_dir() -> PathBuf {
    let home = std::env::var_os("PERFOPS_RECEIVERS_HOME").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/perfops-receivers")
    });
    home.join("bin")
}

/// Why the receivers cannot run here (a binary missing), if they cannot.
pub fn missing() -> Option<String> {
    let bin = bin_dir();
    for name in ["prometheus", "perfops-otelcol"] {
        if !bin.join(name).is_file() {
            return Some(format!("{} is missing: run bench/receivers/install.sh", bin.join(name).display()));
        }
    }
    None
}

/// Whether `PERFOPS_RECEIVERS=required` (as `scripts/test` sets it): a missing receiver fails.
pub fn required() -> bool {
    std::env::var("PERFOPS_RECEIVERS").is_ok_and(|v| v == "required")
}

/// The rule for a test that needs the receivers: `None` when they are built (run the test);
/// `Some(why)` when they are not and `PERFOPS_RECEIVERS` is not `required` (the test prints
/// why and returns: skipped); a panic when they are not and it is `required`.
///
/// ```no_run
/// if let Some(why) = perfops_testkit::receivers::unavailable() {
///     eprintln!("skipped: {why}");
///     return;
/// }
/// ```
pub fn unavailable() -> Option<String> {
    let why = missing()?;
    assert!(!required(), "PERFOPS_RECEIVERS=required, but {why}");
    Some(why)
}

/// A port of 127.0.0.1 that was free a moment ago (another process may take it before the
/// server binds it: the starts below try again).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A new temporary directory for one server.
fn temp_dir(what: &str, port: u16, attempt: u32) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("perfops-{what}-{}-{port}-{attempt}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// A started process and its directory; killed (by PID) and removed when dropped.
struct Process {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, its stdout and stderr into `dir/log_name`.
    fn spawn(program: &Path, args: &[String], dir: PathBuf, log_name: &str) -> Process {
        let log = dir.join(log_name);
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let err = out.try_clone().expect("log file handle");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} ({e}): run bench/receivers/install.sh", program.display()));
        Process { child, dir, log }
    }

    /// Polls `ready` until it holds (true), the process exits or [`START_LIMIT`] passes (false).
    fn wait_ready(&mut self, ready: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + START_LIMIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false; // exited: a port was taken, or the configuration refused
            }
            if ready() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How to start the current Prometheus.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrometheusOptions {
    /// Accept only remote-write 1.0 messages (`prometheus.WriteRequest`): a 2.0 request is
    /// answered `415`, as by a receiver that predates 2.0.
    pub remote_write_v1_only: bool,
}

/// A running current Prometheus; dropping it stops it (by its PID) and removes its files.
pub struct Prometheus {
    process: Process,
    addr: SocketAddr,
}

/// Starts the current Prometheus (defaults: remote write 1.0 and 2.0, OTLP with delta
/// conversion) and waits until it is ready. Panics, saying how to build it, when it is not
/// built: call [`unavailable`] first.
pub fn prometheus() -> Prometheus {
    prometheus_with(PrometheusOptions::default())
}

/// [`prometheus`] with `options`.
pub fn prometheus_with(options: PrometheusOptions) -> Prometheus {
    let program = bin_dir().join("prometheus");
    let mut last = String::new();
    for attempt in 0..3 {
        let port = free_port();
        let dir = temp_dir("prometheus3", port, attempt);
        std::fs::write(dir.join("prometheus.yml"), "global:\n  evaluation_interval: 1s\n").expect("prometheus.yml");
        let mut args = vec![
            format!("--config.file={}", dir.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--web.enable-remote-write-receiver".into(),
            "--web.enable-otlp-receiver".into(),
            "--enable-feature=otlp-deltatocumulative".into(),
            "--storage.tsdb.retention.time=1h".into(),
            "--log.level=warn".into(),
        ];
        if options.remote_write_v1_only {
            args.push("--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest".into());
        }
        let mut process = Process::spawn(&program, &args, dir, "prometheus.log");
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        if process.wait_ready(|| matches!(get(addr, "/-/ready"), Ok((200, _)))) {
            return Prometheus { process, addr };
        }
        last = process.log();
    }
    panic!("prometheus {PROMETHEUS_VERSION} did not start on 127.0.0.1; its log:\n{last}");
}

impl Prometheus {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the base URL of its API.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its remote-write receiver: `http://127.0.0.1:PORT/api/v1/write`.
    pub fn remote_write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr)
    }

    /// Its OTLP metrics receiver (HTTP, protobuf or JSON):
    /// `http://127.0.0.1:PORT/api/v1/otlp/v1/metrics`.
    pub fn otlp_url(&self) -> String {
        format!("http://{}/api/v1/otlp/v1/metrics", self.addr)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// What it logged (warnings and errors), for a failing test's message.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// An instant query at `time` (unix seconds; now when `None`): the API's JSON answer.
    pub fn query(&self, query: &str, time: Option<f64>) -> Result<Value, String> {
        PromApi(self.addr).query(query, time)
    }

    /// A range query from `start` to `end` (unix seconds) every `step`: the API's JSON answer.
    pub fn query_range(&self, query: &str, start: f64, end: f64, step: Duration) -> Result<Value, String> {
        PromApi(self.addr).query_range(query, start, end, step)
    }

    /// The result array of `query` (now), empty on an error.
    pub fn series(&self, query: &str) -> Vec<Value> {
        PromApi(self.addr).series(query)
    }

    /// Wait until `query` returns at least one series, for at most `limit`; the series.
    pub fn wait_for_data(&self, query: &str, limit: Duration) -> Result<Vec<Value>, String> {
        PromApi(self.addr).wait_for_data(query, limit)
    }
}

/// How to start the Collector.
#[derive(Debug, Clone, Copy, Default)]
pub struct CollectorOptions {
    /// Also export to the `debug` exporter (verbosity `detailed`) into [`Collector::log`].
    pub debug: bool,
}

/// A running OpenTelemetry Collector; dropping it stops it (by its PID) and removes its files.
pub struct Collector {
    process: Process,
    grpc: SocketAddr,
    http: SocketAddr,
}

/// Starts the Collector, receiving OTLP on free loopback ports and exporting metrics with
/// `otlp_http` to `otlp_metrics_url` (a [`Prometheus::otlp_url`]), and waits until both
/// receivers accept connections. Panics, saying how to build it, when it is not built: call
/// [`unavailable`] first.
pub fn collector(otlp_metrics_url: &str) -> Collector {
    collector_with(otlp_metrics_url, CollectorOptions::default())
}

/// [`collector`] with `options`.
pub fn collector_with(otlp_metrics_url: &str, options: CollectorOptions) -> Collector {
    start_collector(&Export::Http(otlp_metrics_url.to_string()), options)
}

/// A Collector that forwards what it receives to `next`'s gRPC receiver with the `otlp_grpc`
/// exporter (plaintext HTTP/2): a known-good OTLP/gRPC sender that is not perfops, to prove
/// `next`'s gRPC path (`collector_forwarding(&collector(&prom.otlp_url()))` and a push to
/// its HTTP receiver reach Prometheus through gRPC).
pub fn collector_forwarding(next: &Collector, options: CollectorOptions) -> Collector {
    start_collector(&Export::Grpc(next.grpc), options)
}

/// Where a Collector sends the metrics it receives.
#[derive(Debug)]
enum Export {
    /// `otlp_http` to this metrics URL.
    Http(String),
    /// `otlp_grpc` to this address, plaintext.
    Grpc(SocketAddr),
}

fn start_collector(export: &Export, options: CollectorOptions) -> Collector {
    let program = bin_dir().join("perfops-otelcol");
    let mut last = String::new();
    for attempt in 0..3 {
        let (grpc, http) = (free_port(), free_port());
        let dir = temp_dir("otelcol", http, attempt);
        let config = collector_config(grpc, http, export, options);
        std::fs::write(dir.join("otelcol.yaml"), config).expect("otelcol.yaml");
        let args = vec![format!("--config=file:{}", dir.join("otelcol.yaml").display())];
        let mut process = Process::spawn(&program, &args, dir, "otelcol.log");
        let grpc = SocketAddr::from((Ipv4Addr::LOCALHOST, grpc));
        let http = SocketAddr::from((Ipv4Addr::LOCALHOST, http));
        // The HTTP receiver answers a GET of /v1/metrics `405` once it serves; the gRPC one
        // is ready when it accepts connections.
        let ready = || {
            matches!(get(http, "/v1/metrics"), Ok((405, _)))
                && TcpStream::connect_timeout(&grpc, Duration::from_secs(1)).is_ok()
        };
        if process.wait_ready(ready) {
            return Collector { process, grpc, http };
        }
        last = process.log();
    }
    panic!("the OpenTelemetry Collector {COLLECTOR_VERSION} did not start on 127.0.0.1; its log:\n{last}");
}

/// The Collector's configuration: OTLP in on `grpc` and `http`, metrics out to `export`.
fn collector_config(grpc: u16, http: u16, export: &Export, options: CollectorOptions) -> String {
    let (name, exporter) = match export {
        Export::Http(url) => ("otlp_http", format!("  otlp_http:\n    metrics_endpoint: {url}\n")),
        Export::Grpc(addr) => {
            ("otlp_grpc", format!("  otlp_grpc:\n    endpoint: {addr}\n    tls:\n      insecure: true\n"))
        }
    };
    let exporters = if options.debug { format!("[{name}, debug]") } else { format!("[{name}]") };
    format!(
        "receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
{exporter}  debug:
    verbosity: detailed
    use_internal_logger: false
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: {exporters}
"
    )
}

impl Collector {
    /// Its OTLP/gRPC receiver: `127.0.0.1:G`.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
    }

    /// Its OTLP/gRPC receiver as a URL: `http://127.0.0.1:G`.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Its OTLP/HTTP receiver's base URL: `http://127.0.0.1:H` (metrics at `/v1/metrics`).
    pub fn http_url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Its OTLP/HTTP metrics endpoint: `http://127.0.0.1:H/v1/metrics`.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/v1/metrics", self.http)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// What it logged: warnings and errors, and the metrics the `debug` exporter printed.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// `POST` of `body` with `headers` (name, value: `Content-Type` at least) to `url` (an
/// `http://127.0.0.1:PORT/path` of one of these receivers), over HTTP/1.0 with timeouts: the
/// status and the body of the answer. For the tests' own known-good pushes, which use no
/// perfops code.
pub fn post_to(url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<(u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("not an http:// URL: {url}"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let addr: SocketAddr = authority.parse().map_err(|e| format!("not IP:PORT in {url}: {e}"))?;
    post(addr, &path, headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collector_config_lists_the_exporters_asked_for() {
        let prom = Export::Http("http://127.0.0.1:3/api/v1/otlp/v1/metrics".into());
        // To Prometheus, without debug: otlp_http alone in the pipeline (debug is defined but
        // unused, which the collector accepts).
        let c = collector_config(1, 2, &prom, CollectorOptions::default());
        assert!(c.contains("exporters: [otlp_http]\n"), "{c}");
        assert!(c.contains("  otlp_http:\n    metrics_endpoint: http://127.0.0.1:3/api/v1/otlp/v1/metrics\n"), "{c}");
        assert!(c.contains("endpoint: 127.0.0.1:1\n") && c.contains("endpoint: 127.0.0.1:2\n"), "{c}");
        // With debug: both.
        let c = collector_config(1, 2, &prom, CollectorOptions { debug: true });
        assert!(c.contains("exporters: [otlp_http, debug]\n"), "{c}");
        // Forwarding over gRPC, plaintext: otlp_grpc instead.
        let c =
            collector_config(1, 2, &Export::Grpc(SocketAddr::from(([127, 0, 0, 1], 4))), CollectorOptions::default());
        assert!(c.contains("  otlp_grpc:\n    endpoint: 127.0.0.1:4\n    tls:\n      insecure: true\n"), "{c}");
        assert!(c.contains("exporters: [otlp_grpc]\n") && !c.contains("otlp_http"), "{c}");
    }

    #[test]
    fn post_to_refuses_what_is_not_a_loopback_http_url() {
        // Not http: refused before any connection.
        assert!(post_to("https://127.0.0.1:1/x", &[], b"").unwrap_err().contains("not an http:// URL"));
        // A host name: refused (the receivers are only ever on an IP of the loopback).
        assert!(post_to("http://localhost:1/x", &[], b"").unwrap_err().contains("not IP:PORT"));
    }
}
