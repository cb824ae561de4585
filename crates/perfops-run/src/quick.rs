//! `perfops quick`: one URL, with the habits of ab, hey and oha. Its seconds
//! go through the pipeline `crate::outputs` assembles (the outputs chosen by
//! name, the live line, its tally by step), with no results directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use perfops_core::measure::{Counter, Stats};
use perfops_core::model::{LoadModel, Rate, Schedule};
use perfops_core::pipeline::{Flow, Second, Sink, SinkError, StageLedger, TargetDown};
use perfops_core::scenario::grpc::GrpcCall;
use perfops_core::scenario::template::Template;
use perfops_core::scenario::{Body, JsonPart, Step};
use perfops_engine::{Http2, Protocol, Reflection, Target, Work};
use perfops_report::failures::FailureGroup;
use perfops_report::live::LiveLine;
use perfops_report::output::{End, Output};
use perfops_report::quick::{QuickSetup, QuickSummary};
use perfops_report::results::{RESULTS_VERSION, utc_rfc3339};
use perfops_report::run::RunMeta;

use crate::exit::{Exit, UsageError};
use crate::launch::{self, PlanBase, Terminal};
use crate::outputs::{self, Chosen, OutputArgs, Stations};
use crate::source::{self, Engine};

/// Flags of `perfops quick`.
#[derive(Debug, Clone)]
pub struct QuickArgs {
    /// The URL to load (http://, https:// where ALPN picks h2 or http/1.1,
    /// h2c:// for HTTP/2 in clear text, grpc:// and grpcs:// with --proto,
    /// ws:// and wss://).
    pub url: String,
    /// Closed model: this many connections, each looping request -> response
    /// (with HTTP/2, each carrying -p streams). Default 50, and no more than -n.
    pub connections: Option<u32>,
    /// Speak HTTP/2 whatever the scheme says: h2c with prior knowledge over
    /// http://, ALPN h2 alone over https://.
    pub http2: bool,
    /// Speak HTTP/1.1 even where ALPN would pick h2.
    pub http1: bool,
    /// HTTP/2: streams in flight per connection (oha's -p). Closed model:
    /// -c connections x -p streams users. Default 1 closed (as oha), 100 open.
    pub parallel: Option<u32>,
    /// Open model: this many requests per second, whatever the server does (e.g. 500, 30000/m, 2k).
    pub rate: Option<Rate>,
    /// How long to run (e.g. 30s, 2m). Default 10s unless -n is given.
    pub duration: Option<Duration>,
    /// How many requests to send in total.
    pub requests: Option<u64>,
    /// HTTP method.
    pub method: String,
    /// A request header, `Name: value` (repeatable).
    pub headers: Vec<String>,
    /// Request body, or @FILE to read it from a file (gRPC: the message as JSON).
    pub body: Option<String>,
    /// gRPC (grpc:// or grpcs://host:port/package.Service/Method): a .proto
    /// file that defines the method (repeatable), compiled at run time;
    /// without it, the server's reflection is asked for the descriptors.
    pub protos: Vec<PathBuf>,
    /// Whole-request timeout (connect included), however the body arrives.
    pub timeout: Duration,
    /// At the end of -d, and after Ctrl-C, wait for the requests in flight
    /// (each within --timeout) instead of cutting them and counting them as `cut`.
    pub wait_in_flight: bool,
    /// Connect timeout (TCP and TLS handshake).
    pub connect_timeout: Duration,
    /// Follow up to N redirects within the target (default: none; a 3xx is the answer).
    pub redirects: u8,
    /// Accept any TLS certificate (self-signed test servers).
    pub insecure: bool,
    /// Open model: the most requests in flight at once; arrivals beyond it are dropped and counted.
    pub max_in_flight: u32,
    /// Exit 1 when more than this percentage of requests failed.
    pub max_errors: f64,
    /// Go on when the first seconds find the target down.
    pub keep_going: bool,
    /// Worker threads (default: one per available core).
    pub workers: usize,
    /// Also write the summary as JSON to this file.
    pub json: Option<PathBuf>,
    /// Print the failing exchanges of each kind after the summary (the
    /// first few, as they were, secrets redacted).
    pub failures: bool,
    /// No live line on stderr.
    pub quiet: bool,
    /// The outputs chosen by name (`--output`, `--metrics-listen`).
    pub outputs: OutputArgs,
}

/// `perfops quick`: one URL, ab/hey/oha style.
pub fn run(args: QuickArgs) -> Result<Exit> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let mut target = Target::parse(&args.url).map_err(|e| usage(e.to_string()))?;
    if args.http2 {
        target = target.force(Protocol::H2);
    } else if args.http1 {
        target = target.force(Protocol::Http1);
    }
    let target_is_websocket = target.websocket;
    if args.parallel == Some(0) {
        return Err(usage("-p must be at least 1".into()));
    }
    let body = match &args.body {
        Some(b) if b.starts_with('@') => {
            std::fs::read(&b[1..]).map_err(|e| usage(format!("cannot read body file `{}`: {e}", &b[1..])))?
        }
        Some(b) => b.clone().into_bytes(),
        None => Vec::new(),
    };
    let method = args.method.to_ascii_uppercase();
    // Any method a server may know (PURGE, PROPFIND), but a token (RFC 9110):
    // `-m 'GE T'` went out as the request line `GE T / HTTP/1.1`.
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
        return Err(usage(format!("`{}` is not an HTTP method: a method is one word (GET, POST, PURGE)", args.method)));
    }
    let work = match target.grpc_method() {
        Some(call) => grpc_work(&target, call, &args, &body).map_err(|e| usage(e.to_string()))?,
        None => Work::single(&target, &method, &args.headers, &body)
            .map_err(|e| usage(e.to_string()))?
            .with_redirects(args.redirects),
    };
    let method = if target.grpc_method().is_some() { "gRPC".to_string() } else { method };
    let duration = match (args.duration, args.requests) {
        (None, None) => Some(Duration::from_secs(10)),
        (d, _) => d,
    };
    if duration.is_some_and(|d| d.is_zero()) || args.requests == Some(0) {
        return Err(usage("nothing to do: give -d a positive duration or -n a positive count".into()));
    }
    // `-n 10` with the default `-c 50` opens 10 connections, and says so
    // (ab and hey refuse a concurrency above the count).
    let at_most = args.requests.map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX));
    let connections = args.connections.unwrap_or(50).min(at_most);
    let load = match args.rate {
        Some(rate) => {
            let schedule = match (args.requests, duration) {
                (Some(n), _) => Schedule::count_at(rate, n),
                (None, Some(d)) => Schedule::constant(rate, d),
                (None, None) => unreachable!("a duration is defaulted above"),
            }
            .map_err(|e| usage(format!("-r {rate}: {e}")))?;
            LoadModel::Open { schedule, max_in_flight: args.max_in_flight.max(1) }
        }
        None => {
            if connections == 0 {
                return Err(usage("-c must be at least 1".into()));
            }
            LoadModel::Closed {
                // Users: -p streams on each of the -c connections (HTTP/2;
                // HTTP/1.1 has one request in flight per connection), no
                // more than there are requests.
                connections: connections.saturating_mul(args.parallel.unwrap_or(1)).min(at_most),
                think: Duration::ZERO,
                profile: None,
                duration,
                max_requests: args.requests,
            }
        }
    };
    let open = matches!(load, LoadModel::Open { .. });
    let step_names = work.step_names.clone();
    // Made before anything starts: a busy address is a usage error that costs nothing.
    let mut chosen = Chosen::choose(&args.outputs, &[])?;
    let base = PlanBase {
        target,
        timeout: args.timeout,
        connect_timeout: args.connect_timeout,
        insecure: args.insecure,
        workers: args.workers,
        wait_in_flight: args.wait_in_flight,
        http2: match (open, args.parallel) {
            (true, p) => Http2 { streams: p.unwrap_or(Http2::default().streams), ..Http2::default() },
            // -c connections x -p streams: users fill the connections in turn.
            (false, p) => Http2 { streams: p.unwrap_or(1), connections, ..Http2::default() },
        },
    };
    let mut plan = base.plan(Arc::new(work), load);
    if args.requests.is_some() {
        // A count of requests: the run ends with its last response (or timeout).
        plan.end = None;
    }

    // A second Ctrl-C exits at once; the first stops arrivals and prints what was measured.
    let stop = launch::stop_flag()?;
    let terminal = Terminal::new(args.quiet);
    let live = terminal.live.then(|| LiveLine::new(std::io::stderr(), terminal.color, false));
    chosen.start(&meta(&args, open, &step_names))?;
    // `quick ws://`: its sessions and messages are two steps, told apart.
    let mut by_step = ByStep::default();
    // A target that is down stops the load, as `run`'s (#32's rule): a closed port was
    // hammered for the whole run (119,504 refusals in 2 s; a new user's review).
    let mut down = Down(TargetDown::new(plan.target.addr.to_string()));
    let stations = Stations {
        decisions: if args.keep_going { Vec::new() } else { vec![&mut down as &mut dyn Sink] },
        chosen: Some(&mut chosen),
        live: live.map(|l| Box::new(l) as _),
        tally: target_is_websocket.then_some(&mut by_step as &mut dyn Output),
        ..Stations::default()
    };
    // One stretch, no stages: every second is "quick", never draining.
    let pipeline = outputs::pipeline(StageLedger::unstaged("quick"), 0, &step_names, stop.clone(), stations);
    let mut engine = Engine::new(plan.clone());
    let (outcome, _) = source::drive(&mut engine, &stop, pipeline)?;
    let down = down.0.reason().map(|why| (why.to_string(), down.0.seconds()));
    if let Some((why, after)) = &down {
        note!("stopped after {after} s: {why} (--keep-going runs on)");
    }
    let spoke = engine.protocol();

    let generator = launch::generator_use(outcome.workers, outcome.naps, outcome.cpu_wait, outcome.pacer.as_ref());
    let setup = QuickSetup {
        // The JSON summary and the terminal show it: without a password or a query key (#31).
        url: perfops_core::scenario::redact::redact_text(&args.url).into_owned(),
        method,
        // Over HTTP/1.1 each of the -c x -p users has a connection of its own.
        connections: (!open).then_some(match spoke {
            Protocol::H2 => connections,
            _ => connections.saturating_mul(args.parallel.unwrap_or(1)).min(at_most),
        }),
        target_rate: args.rate.map(Rate::as_f64),
        max_in_flight: open.then_some(args.max_in_flight),
        // As the connections negotiated it, and what the step carried: `h2
        // (ALPN)`, `grpc over h2c`, `websocket (TLS)`, ...
        protocol: {
            let name = outcome.protocols.first().map_or(spoke.name(), |u| u.protocol.as_str());
            match spoke {
                // No server chose it: the handshake that would have asked failed.
                _ if outcome.tls_refused.is_some() => "unknown (the TLS handshake failed)".to_string(),
                Protocol::H2 => format!("{name} ({} streams per connection at most)", plan.http2.streams),
                _ => name.to_string(),
            }
        },
    };
    let mut summary = QuickSummary::new(setup, &outcome.total, outcome.elapsed, generator, outcome.interrupted);
    if let Some((why, after)) = &down {
        summary.warnings.insert(0, format!("stopped after {after} s: {why}"));
    }
    // A generator that stalled says so, as `run`'s summary does.
    if let Some(why) = perfops_core::analysis::generator::stalled(&outcome.total) {
        let late = if outcome.total.late > 0 { "; the late ones' latency counts their lateness" } else { "" };
        summary.warnings.push(format!("{why}{late}"));
    }
    if let Some(why) = &outcome.tls_refused {
        summary.warnings.insert(0, crate::conclude::tls_note(why, args.insecure));
    }
    // -p is HTTP/2's: said, not silently taken (review 2's tester).
    if let Some(p) = args.parallel.filter(|&p| p > 1)
        && spoke != Protocol::H2
        && outcome.tls_refused.is_none()
    {
        summary.warnings.push(format!(
            "-p {p} is HTTP/2's streams per connection; over {} a connection carries one request at a time{}",
            spoke.name(),
            if open { " (-p did nothing)" } else { ": -c x -p users had as many connections" }
        ));
    }
    if target_is_websocket {
        // Its one step's rows: the upgrade, then its messages (if it sends one).
        let empty = Stats::default();
        summary = summary.with_websocket(by_step.0.first().unwrap_or(&empty), by_step.0.get(1));
    }

    // The failing exchanges, by step and kind: counted by step where the
    // tally has them (WebSocket's two rows), else over the run (one step).
    for ((step, kind), samples) in outcome.failures.iter() {
        let count = by_step.0.get(usize::from(step)).unwrap_or(&outcome.total).failures[kind];
        let step = perfops_core::measure::step_name(&step_names, step);
        summary.exchanges.push(FailureGroup { step, kind: kind.name().to_string(), count, samples: samples.to_vec() });
    }
    summary.show_exchanges = args.failures;
    summary.warnings.extend(chosen.notes());
    // The outputs hear the summary, and close (the endpoint stops with the load).
    chosen.finish(&End::Quick(&summary));

    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&summary)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    crate::say::out(&summary.text());
    if down.is_some() {
        return Ok(Exit::Runtime);
    }
    let finished = summary.succeeded + summary.failed;
    let error_pct = if finished == 0 { 0.0 } else { summary.failed as f64 * 100.0 / finished as f64 };
    // Requests went out and not one ended (all still in flight when the run
    // ended: cut, which is no failure of the server): a run that measured
    // nothing passed nothing. Failures are `--max-errors`' business.
    if summary.counters[Counter::Sent] > 0 && summary.counters[Counter::Completed] == 0 && summary.failed == 0 {
        note!("no request was answered in {:.1} s", summary.elapsed_s);
        return Ok(Exit::ThresholdsFailed);
    }
    Ok(if summary.failed > 0 && error_pct > args.max_errors { Exit::ThresholdsFailed } else { Exit::Passed })
}

/// `quick grpc://host:port/package.Service/Method --proto FILE -b JSON`:
/// one call, its metadata from `-H`, its message `-b` (`{}` when none).
fn grpc_work(target: &Target, call: &str, args: &QuickArgs, body: &[u8]) -> Result<Work> {
    let call = GrpcCall::parse(call, Vec::new())
        .map_err(|e| anyhow::anyhow!("{e}: a gRPC URL is grpc://host:port/package.Service/Method"))?;
    let mut headers = vec![
        ("content-type".to_string(), Template::literal("application/grpc")),
        ("te".to_string(), Template::literal("trailers")),
    ];
    for h in &args.headers {
        // Metadata is headers: the same rule, a token name and no CR, LF or NUL (#31).
        let (name, value) = perfops_engine::parse_header(h)?;
        headers.push((name.to_ascii_lowercase(), value));
    }
    let message = if body.is_empty() { "{}".to_string() } else { String::from_utf8_lossy(body).into_owned() };
    let step = Step {
        name: format!("{}/{}", call.service, call.method),
        method: "POST".into(),
        path: Template::literal(&call.path()),
        headers,
        body: Body::Json(vec![JsonPart::Literal(message)]),
        expect: None,
        save: Vec::new(),
        pause: Duration::ZERO,
        grpc: Some(call),
        websocket: None,
        stream: None,
        script: Default::default(),
        llm: None,
    };
    let mut work =
        Work::new(target, vec![("request".into(), 1, vec![step])], Vec::new(), Default::default(), Vec::new());
    // No --proto: the server's reflection gives the descriptors (#14).
    let reflection = Reflection {
        target: target.clone(),
        insecure: args.insecure,
        timeout: args.connect_timeout.max(args.timeout).min(Duration::from_secs(30)),
    };
    work.resolve_grpc(std::path::Path::new("."), &args.protos, Some(reflection))?;
    Ok(work)
}

/// `quick`'s early stop on a target that is down ([`TargetDown`]).
struct Down(TargetDown);

impl Sink for Down {
    fn second(&mut self, second: &Second<'_>) -> Result<Flow, SinkError> {
        Ok(self.0.second(second.interval).map_or(Flow::Continue, Flow::Stop))
    }
}

/// Totals by step index over the whole load (a quick run has no stages to
/// count them by).
#[derive(Default)]
struct ByStep(Vec<Stats>);

impl Output for ByStep {
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        for (key, stats) in &second.interval.parts {
            let i = usize::from(key.step);
            if self.0.len() <= i {
                self.0.resize_with(i + 1, Stats::default);
            }
            self.0[i].merge(stats);
        }
        Ok(())
    }
}

/// What an output hears at the start of a quick run: the meta a results
/// directory would hold, for the one URL.
fn meta(args: &QuickArgs, open: bool, steps: &[String]) -> RunMeta {
    RunMeta {
        format: "perfops.meta".into(),
        version: RESULTS_VERSION,
        perfops_version: env!("CARGO_PKG_VERSION").into(),
        host: nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned()),
        command: perfops_core::scenario::redact::redact_command(&std::env::args().collect::<Vec<_>>()),
        kind: "quick".into(),
        started_at: utc_rfc3339(std::time::SystemTime::now()),
        name: "quick".into(),
        target: perfops_core::scenario::redact::redact_text(&args.url).into_owned(),
        model: if open { "open" } else { "closed" }.into(),
        stages: Vec::new(),
        steps: steps.to_vec(),
        ..RunMeta::default()
    }
}
