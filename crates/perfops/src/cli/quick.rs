//! The flags of `perfops quick`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use perfops_core::model::Rate;
use perfops_core::units::parse_duration;

/// Flags of `perfops quick`.
#[derive(Debug, Args)]
pub(crate) struct QuickFlags {
    /// The URL to load (http://, https:// where ALPN picks h2 or http/1.1,
    /// h2c:// for HTTP/2 in clear text, grpc:// and grpcs:// with --proto,
    /// ws:// and wss://).
    url: String,
    /// Closed model: this many connections, each looping request -> response
    /// (with HTTP/2, each carrying -p streams). Default 50, and no more than -n.
    #[arg(short = 'c', long = "connections", conflicts_with = "rate")]
    connections: Option<u32>,
    /// Speak HTTP/2 whatever the scheme says: h2c with prior knowledge over
    /// http://, ALPN h2 alone over https://.
    #[arg(long, conflicts_with = "http1")]
    http2: bool,
    /// Speak HTTP/1.1 even where ALPN would pick h2.
    #[arg(long)]
    http1: bool,
    /// HTTP/2: streams in flight per connection (oha's -p). Closed model:
    /// -c connections x -p streams users. Default 1 closed (as oha), 100 open.
    #[arg(short = 'p', long = "parallel", value_name = "STREAMS")]
    parallel: Option<u32>,
    /// Open model: this many requests per second, whatever the server does (e.g. 500, 30000/m, 2k).
    #[arg(short = 'r', long = "rate")]
    rate: Option<Rate>,
    /// How long to run (e.g. 30s, 2m). Default 10s unless -n is given.
    #[arg(short = 'd', long = "duration", value_parser = parse_duration, conflicts_with = "requests")]
    duration: Option<Duration>,
    /// How many requests to send in total.
    #[arg(short = 'n', long = "requests")]
    requests: Option<u64>,
    /// HTTP method.
    #[arg(short = 'm', long = "method", default_value = "GET")]
    method: String,
    /// A request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Request body, or @FILE to read it from a file (gRPC: the message as JSON).
    #[arg(short = 'b', long = "body")]
    body: Option<String>,
    /// gRPC (grpc:// or grpcs://host:port/package.Service/Method): a .proto
    /// file that defines the method (repeatable), compiled at run time;
    /// without it, the server's reflection is asked for the descriptors.
    #[arg(long = "proto", value_name = "FILE")]
    protos: Vec<PathBuf>,
    /// Whole-request timeout (connect included), however the body arrives.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    timeout: Duration,
    /// At the end of -d, and after Ctrl-C, wait for the requests in flight
    /// (each within --timeout) instead of cutting them and counting them as `cut`.
    #[arg(long, alias = "wait-ongoing-requests-after-deadline")]
    wait_in_flight: bool,
    /// Connect timeout (TCP and TLS handshake).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    connect_timeout: Duration,
    /// Follow up to N redirects within the target (default: none; a 3xx is the answer).
    #[arg(long, default_value_t = 0)]
    redirects: u8,
    /// Accept any TLS certificate (self-signed test servers).
    #[arg(short = 'k', long)]
    insecure: bool,
    /// Open model: the most requests in flight at once; arrivals beyond it are dropped and counted.
    #[arg(long, default_value_t = 10_000)]
    max_in_flight: u32,
    /// Exit 1 when more than this percentage of requests failed.
    #[arg(long, default_value_t = 0.0)]
    max_errors: f64,
    /// Go on when the first seconds find the target down (every connection
    /// refused or timed out, none opened or answered); by default the run
    /// stops there and exits 3.
    #[arg(long)]
    keep_going: bool,
    /// Worker threads (default: one per available core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Also write the summary as JSON to this file (it holds the failing exchanges too).
    #[arg(long)]
    json: Option<PathBuf>,
    /// After the summary, print the first failing exchanges of each kind as
    /// they were: request line and header fields (secrets redacted), status,
    /// response header fields, the first KiB of the body, timings.
    #[arg(long)]
    failures: bool,
    /// No live line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    #[command(flatten)]
    outputs: super::outputs::OutputFlags,
}

impl From<QuickFlags> for perfops_run::quick::QuickArgs {
    fn from(f: QuickFlags) -> Self {
        Self {
            url: f.url,
            connections: f.connections,
            http2: f.http2,
            http1: f.http1,
            parallel: f.parallel,
            rate: f.rate,
            duration: f.duration,
            requests: f.requests,
            method: f.method,
            headers: f.headers,
            body: f.body,
            protos: f.protos,
            timeout: f.timeout,
            wait_in_flight: f.wait_in_flight,
            connect_timeout: f.connect_timeout,
            redirects: f.redirects,
            insecure: f.insecure,
            max_in_flight: f.max_in_flight,
            max_errors: f.max_errors,
            keep_going: f.keep_going,
            workers: f.workers,
            json: f.json,
            failures: f.failures,
            quiet: f.quiet,
            outputs: f.outputs.into(),
        }
    }
}
