//! perfops' engine: it runs a [`Plan`] against a real target and reports what
//! it measured, one [`Interval`] per second, then the totals.
//!
//! One worker per core, each a single-threaded tokio runtime with its own
//! connections and statistics ([`worker`]); the collector on the calling thread
//! merges their per-second snapshots in order. The HTTP/1.1 hot path is in
//! [`http1`]; the open-model pacer sleeps on a precise timer ([`timer`]).
//! While the load runs, [`watch`] watches the target on threads of its own,
//! and [`exporter`] serves the generator's own metrics (`--metrics-listen`).

mod chunked;
mod coalesce;
mod collect;
pub mod exporter;
mod framing;
mod grpc;
mod h2;
mod hook;
mod http1;
mod http2;
mod llm;
mod record;
mod reflection;
mod steer;
mod stream;
mod target;
mod timer;
mod uring;
pub use uring::Pacer;
pub mod tls;
pub mod unary;
pub mod watch;
mod work;
mod worker;
mod ws;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use perfops_core::measure::{FailureSamples, Stats};
use perfops_core::model::{LoadModel, Shard};
use rustls::pki_types::ServerName;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::collect::Seconds;

pub use grpc::{GrpcError, GrpcMethod, proto_sources};
pub use h2::conn::LARGE_WINDOW;
pub use http2::Http2;
/// One second of a run and where its measurements belong: pure data, in
/// perfops-core, so that what reads a second does not depend on this engine.
pub use perfops_core::measure::{Interval, Key};
pub use reflection::Reflection;
pub use steer::{Current, Replan};
pub use target::{Protocol, Target, TargetError};
pub use tls::TlsSetupError;
pub use work::{FlowPlan, ScriptPlan, StepPlan, Work, check_grpc, missing_function, parse_header};

use worker::{Msg, Shared, WorkerLoad};

/// A run, fully decided before it starts.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where requests go.
    pub target: Target,
    /// What each arrival does.
    pub work: Arc<Work>,
    /// End offset of each stage, for attributing arrivals (empty: one stage).
    pub stage_ends: Vec<Duration>,
    /// Open or closed model, with its stop rules.
    pub load: LoadModel,
    /// Whole-request timeout (connect included), whatever the body's framing.
    pub timeout: Duration,
    /// When the run ends, from its start ([`LoadModel::end`]): requests still
    /// in flight half a second later are cut and counted as `cut`, unless
    /// `wait_in_flight`.
    /// `None`: the run ends when its last request does (a count of requests).
    pub end: Option<Duration>,
    /// At `end`, and after a stop, wait for the requests in flight (each
    /// within its timeout) instead of cutting them (oha's
    /// `--wait-ongoing-requests-after-deadline`).
    pub wait_in_flight: bool,
    /// Connect (and TLS handshake) timeout.
    pub connect_timeout: Duration,
    /// Accept any TLS certificate.
    pub insecure: bool,
    /// Worker threads; 0 = one per available core.
    pub workers: usize,
    /// This machine's share of the schedule.
    pub shard: Shard,
    /// When arrival 0 is due (default: as soon as the workers are ready), so a
    /// caller can put the run on its own clock. An instant already past when
    /// the workers are ready is moved to "now", unless `keep_start`.
    pub start_at: Option<std::time::Instant>,
    /// `start_at` is shared with other generators (`--start-at`, #13): keep
    /// it even when it has passed. That is a late start: what was due is sent
    /// at once, its latency counted from when it was due ([`Outcome::late`]).
    pub keep_start: bool,
    /// HTTP/2: streams per connection, connections, windows (used when the
    /// target speaks it).
    pub http2: Http2,
    /// Where the load's plan may be re-planned by hand while it runs
    /// (`None`: it runs as planned).
    pub replan: Option<Arc<Replan>>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// TLS could not be configured.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// A host name unusable for TLS.
    #[error("`{0}` is not a valid TLS server name")]
    ServerName(String),
    /// A worker thread could not be started.
    #[error("cannot start a worker thread: {0}")]
    Thread(std::io::Error),
    /// The plan asks for nothing.
    #[error("nothing to run: {0}")]
    Empty(&'static str),
    /// gRPC steps against a target that does not speak HTTP/2.
    #[error("gRPC needs HTTP/2, and {0} speaks HTTP/1.1: use grpc:// or grpcs:// (or defaults.protocol: h2)")]
    GrpcOverHttp1(String),
    /// A gRPC step whose method was not resolved (`Work::resolve_grpc`).
    #[error("gRPC step `{0}`: its method was not resolved from a .proto file")]
    GrpcUnresolved(String),
}

/// What a finished run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Totals over the run.
    pub total: Stats,
    /// From the start of the load to the last response, or to the end of
    /// its schedule ([`LoadModel::end`]) if that is later and no stop cut
    /// it short.
    pub elapsed: Duration,
    /// Workers that ran.
    pub workers: usize,
    /// Stopped early by the stop flag (SIGINT).
    pub interrupted: bool,
    /// Closed model: times a worker napped before parking, to collect several
    /// responses per wake-up (see the engine's `coalesce` module).
    pub naps: u64,
    /// The longest such nap: a response read after a nap may have waited
    /// this long in its socket, so its latency is over-stated by at most this.
    pub longest_nap: Duration,
    /// How long the workers waited, runnable, for a CPU that other threads
    /// held (summed over the workers): requests sent late for it are the
    /// machine's lateness, not the pacer's.
    pub cpu_wait: Duration,
    /// How long after the planned start the workers were let go (a kept
    /// `start_at` already past: [`Plan::keep_start`]); zero when on time.
    pub late: Duration,
    /// The HTTP the requests went out in: [`Protocol::Http1`] or
    /// [`Protocol::H2`] (`https://` is decided by ALPN before the run).
    pub protocol: Protocol,
    /// What each step spoke, by step index ([`Work::step_names`]), as
    /// results name it: `http/1.1`, `h2 (ALPN)`, `h2c`, `grpc over h2c`,
    /// `websocket (TLS)`, ... (the run's protocol as its connections
    /// negotiated it, and what the step carried over it).
    pub step_protocols: Vec<&'static str>,
    /// `https://`: the server was reached but the TLS handshake of the ALPN
    /// probe before the run failed, and why (a certificate not trusted here,
    /// most often): every request then fails as `tls`, and the protocol
    /// named is no server's choice.
    pub tls_refused: Option<String>,
    /// The first few failing exchanges of each (step, failure kind), merged
    /// over the workers (#32).
    pub failures: FailureSamples,
    /// Open model: the pacer its arrivals were sent by (a worker on the
    /// timerfd pacer makes it the timerfd's); `None` for a closed model.
    pub pacer: Option<Pacer>,
}

/// The collector's view of one second being assembled.
#[derive(Default)]
struct Pending {
    /// By key: the `Stats` and the worker it came from (and goes back to).
    parts: BTreeMap<Key, (usize, Stats)>,
    in_flight: u64,
    /// The failing exchanges the workers kept in it.
    samples: FailureSamples,
}

/// Run `plan` to completion. `on_interval` sees every second, in order, as
/// soon as every worker has reported it. Setting `stop` ends the run early:
/// no new request starts, and those in flight get a short grace to finish
/// before they are cut, whatever the server does.
pub fn run(plan: &Plan, stop: Arc<AtomicBool>, mut on_interval: impl FnMut(&Interval)) -> Result<Outcome, EngineError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workers = if plan.workers == 0 { cores } else { plan.workers };
    if let LoadModel::Closed { connections, .. } = plan.load {
        // This machine's users (its shard's share), at least one worker even with none.
        workers = workers.min(plan.shard.share(u64::from(connections)).max(1) as usize);
    }
    let shared = shared(plan, stop.clone())?;
    let protocol = shared.protocol;
    let step_protocols = step_protocols(&plan.work, &plan.target, protocol);
    let closed = matches!(plan.load, LoadModel::Closed { .. }).then(|| Arc::new(plan.load.clone()));
    // The plan as it stands: re-planned by hand, or as it was given.
    let current = || plan.replan.as_ref().and_then(|r| r.current()).unwrap_or_else(|| shared.initial.clone());

    // Workers build their runtimes, then all start from one instant a little
    // ahead, so due times are shared and no worker starts cold.
    let (tx, rx) = mpsc::channel();
    let ready = Arc::new(Barrier::new(workers + 1));
    let (start_tx, start_rx): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::channel::<Instant>()).unzip();
    let mut handles = Vec::with_capacity(workers);
    let pools: Vec<record::Pool> = (0..workers).map(|_| record::Pool::default()).collect();
    for (id, start_rx) in start_rx.into_iter().enumerate() {
        // Machines, then workers: arrival, user and unit numbers stay global (#13).
        let shard = plan.shard.split(id as u32, workers as u32);
        let load = match &plan.load {
            LoadModel::Open { max_in_flight, .. } => {
                WorkerLoad::Open { shard, max_in_flight: shard.share(u64::from(*max_in_flight)).max(1) }
            }
            LoadModel::Closed { connections, max_requests, .. } => WorkerLoad::Closed {
                shard,
                users: shard.share(u64::from(*connections)),
                requests: max_requests.map(|n| shard.share(n)),
                model: closed.clone().ok_or(EngineError::Empty("no closed model"))?,
            },
        };
        // HTTP/2: this worker's share of the connections (0: as many as needed).
        let h2_connections = match plan.http2.connections {
            0 => 0,
            n => shard.share(u64::from(n)).max(1) as u32,
        };
        let (shared, tx, ready, pool) = (shared.clone(), tx.clone(), ready.clone(), pools[id].clone());
        let handle = std::thread::Builder::new()
            .name(format!("perfops-worker-{id}"))
            .spawn(move || {
                ready.wait();
                let Ok(start) = start_rx.recv() else { return };
                worker::run(id, shared, load, start, tx, pool, h2_connections);
            })
            .map_err(EngineError::Thread)?;
        handles.push(handle);
    }
    drop(tx);
    ready.wait();
    let soon = Instant::now() + Duration::from_millis(5);
    let start = match plan.start_at.map(Instant::from_std) {
        Some(s) if plan.keep_start => s,
        Some(s) => s.max(Instant::now()),
        None => soon,
    };
    let late = Instant::now().saturating_duration_since(start);
    for s in &start_tx {
        let _ = s.send(start);
    }

    // Which seconds are whole: `collect.rs`.
    let mut seconds: Seconds<Pending> = Seconds::new(workers);
    let mut end = start;
    let (mut naps, mut longest_nap) = (0u64, Duration::ZERO);
    let mut cpu_wait = Duration::ZERO;
    let mut pacer: Option<uring::Pacer> = None;
    let mut total = Stats::default();
    let mut failures = FailureSamples::default();
    // The merged second's `Stats`, reused from one second to the next.
    let mut spare: Option<Stats> = None;
    let recycle = |worker: usize, mut stats: Stats| {
        stats.clear();
        let mut pool = pools[worker].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < record::POOL_MAX {
            pool.push(stats);
        }
    };
    let mut emit = |index: u32, p: Pending, length: Duration| {
        let now = current();
        let target = now.schedule().map(|s| {
            let from = Duration::from_secs(u64::from(index));
            let share = f64::from(plan.shard.count).recip();
            (s.arrivals_before(from + length) - s.arrivals_before(from)) * share
        });
        let mut stats = spare.take().unwrap_or_default();
        for (_, part) in p.parts.values() {
            stats.merge(part);
        }
        total.merge(&stats);
        let (parts, owners): (Vec<_>, Vec<_>) = p.parts.into_iter().map(|(k, (w, s))| ((k, s), w)).unzip();
        let iv = Interval { index, length, in_flight: p.in_flight, target, stats, parts, samples: p.samples };
        on_interval(&iv);
        for ((_, s), w) in iv.parts.into_iter().zip(owners) {
            recycle(w, s);
        }
        let mut stats = iv.stats;
        stats.clear();
        spare = Some(stats);
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Msg::Interval { worker, index, parts, samples, in_flight, last }) => {
                // A worker's last second may be partial: it is emitted with its
                // true length once everybody is done, never as a whole second.
                let p = seconds.shipped(worker, index, last);
                // Kept for the run's end and handed on with their second, so
                // that outputs see a failure in the second it happened.
                for (key, sample) in samples {
                    failures.add(key, sample.clone());
                    p.samples.add(key, sample);
                }
                for (key, stats) in parts {
                    // The first report of a key is moved in, not merged into a
                    // new one; every `Stats` goes back to its worker once merged.
                    match p.parts.entry(key) {
                        std::collections::btree_map::Entry::Vacant(e) => {
                            e.insert((worker, stats));
                        }
                        std::collections::btree_map::Entry::Occupied(mut e) => {
                            e.get_mut().1.merge(&stats);
                            recycle(worker, stats);
                        }
                    }
                }
                p.in_flight += in_flight;
            }
            Ok(Msg::Done { worker, end: e, naps: n, longest_nap: l, pacer: p, cpu_wait: w }) => {
                cpu_wait += w;
                // Workers that paced differently: the timerfd's says so.
                if pacer.is_none() || matches!(p, Some(uring::Pacer::Timer(_))) {
                    pacer = p.or(pacer);
                }
                seconds.done(worker);
                end = end.max(e);
                naps += n;
                longest_nap = longest_nap.max(l);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if seconds.all_done() {
            break;
        }
        // Seconds every worker is past are whole: show them now.
        while let Some((k, p)) = seconds.whole() {
            emit(k, p, Duration::from_secs(1));
        }
    }
    for h in handles {
        let _ = h.join();
    }
    let interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    // A schedule's last arrival is due before its end, and answered maybe
    // sooner still: a run not stopped early lasted its schedule all the same.
    // 15 arrivals of 5/s over 3 s are 5/s, not 15 over the 2.8 s to the last
    // answer (5.4/s), and the last second is a whole one of 5, not 6.2/s.
    // The schedule's own end (re-planned by hand or not), not `Plan::end`,
    // which is none for a count of requests (`-n 100 -r 200` lasts 0.5 s).
    if let Some(planned) = current().load.end()
        && !interrupted
    {
        end = end.max(start + planned);
    }
    // The last seconds, possibly partial, once everybody is done.
    let elapsed = end.saturating_duration_since(start);
    while let Some((k, p, length)) = seconds.rest(elapsed) {
        emit(k, p, length);
    }
    let tls_refused = shared.tls_refused.clone();
    Ok(Outcome {
        total,
        elapsed,
        workers,
        interrupted,
        naps,
        longest_nap,
        cpu_wait,
        late,
        protocol,
        step_protocols,
        tls_refused,
        failures,
        pacer,
    })
}

/// What each step of `work` speaks once the run's protocol is `decided`,
/// by step index (a WebSocket step's messages row speaks what its upgrade
/// did).
fn step_protocols(work: &Work, target: &Target, decided: Protocol) -> Vec<&'static str> {
    step_kinds_of(work).into_iter().map(|kind| target::step_protocol(decided, target, kind)).collect()
}

/// What each step of `work` is, by step index, before any connection
/// decided its HTTP: `http`, `grpc` or `websocket` (the labels a pushed
/// series carries from the run's first second).
pub fn step_kinds(work: &Work) -> Vec<&'static str> {
    step_kinds_of(work).into_iter().map(target::StepKind::family).collect()
}

fn step_kinds_of(work: &Work) -> Vec<target::StepKind> {
    let mut kinds = vec![target::StepKind::Http; work.step_names.len()];
    for step in work.flows.iter().flat_map(|f| f.steps.iter()) {
        let kind = if step.step.websocket.is_some() {
            target::StepKind::WebSocket
        } else if step.step.grpc.is_some() {
            target::StepKind::Grpc
        } else {
            target::StepKind::Http
        };
        for i in std::iter::once(step.index).chain(step.messages) {
            if let Some(k) = kinds.get_mut(usize::from(i)) {
                *k = kind;
            }
        }
    }
    kinds
}

/// What workers share, built once per run: the protocol decided (ALPN asked
/// once, before the run, for `https://`), the TLS set up for it, and the
/// literal steps' requests ready in that protocol.
fn shared(plan: &Plan, stop: Arc<AtomicBool>) -> Result<Arc<Shared>, EngineError> {
    let name = || {
        ServerName::try_from(plan.target.host.clone()).map_err(|_| EngineError::ServerName(plan.target.host.clone()))
    };
    let trust = tls::Trust::target(plan.insecure, None)?;
    let (protocol, tls_refused) = match plan.target.protocol {
        Protocol::Alpn if plan.target.tls => {
            let offer = TlsConnector::from(tls::client(trust.clone(), tls::ALPN_H2_OR_H1)?);
            negotiate(&plan.target, offer, name()?, plan.connect_timeout.min(plan.timeout))
        }
        Protocol::Alpn => (Protocol::Http1, None),
        p => (p, None),
    };
    let tls = if plan.target.tls {
        let alpn = if protocol == Protocol::H2 { tls::ALPN_H2 } else { tls::ALPN_H1 };
        Some((TlsConnector::from(tls::client(trust.clone(), alpn)?), name()?))
    } else {
        None
    };
    // WebSocket's upgrade is HTTP/1.1 (RFC 6455; RFC 8441's over h2 is not
    // spoken here): a `websocket:` step's connections offer http/1.1 alone,
    // even when the run's HTTP steps speak h2.
    let websocket = plan.work.flows.iter().flat_map(|f| f.steps.iter()).any(|s| s.step.websocket.is_some());
    let ws_tls = match &tls {
        Some((_, name)) if protocol == Protocol::H2 && websocket => {
            Some((TlsConnector::from(tls::client(trust, tls::ALPN_H1)?), name.clone()))
        }
        _ => None,
    };
    let steps = || plan.work.flows.iter().flat_map(|f| f.steps.iter());
    if let Some(step) = steps().find(|s| s.step.grpc.is_some()) {
        if protocol != Protocol::H2 {
            return Err(EngineError::GrpcOverHttp1(plan.target.url.to_string()));
        }
        if step.grpc.is_none() || steps().any(|s| s.step.grpc.is_some() && s.grpc.is_none()) {
            return Err(EngineError::GrpcUnresolved(step.step.name.clone()));
        }
    }
    let mut h2_indexing = Vec::new();
    let h2_requests = if protocol == Protocol::H2 {
        let mut by_step = vec![None; plan.work.step_names.len()];
        h2_indexing = vec![http2::Indexing::default(); plan.work.step_names.len()];
        for step in steps() {
            h2_indexing[usize::from(step.index)] = http2::Indexing::of(&plan.work, step);
            if let Some(bytes) = &step.cached {
                // A request that cannot be HTTP/2 is rendered per request
                // instead, and fails there as a protocol error.
                by_step[usize::from(step.index)] =
                    http2::H2Request::from_http1(bytes, plan.target.scheme(), &http2::Indexing::all()).ok().and_then(
                        |r| match &step.grpc {
                            Some(m) => r.into_grpc(m, plan.timeout).ok(),
                            None => Some(r),
                        },
                    );
            }
        }
        by_step
    } else {
        Vec::new()
    };
    Ok(Arc::new(Shared {
        protocol,
        tls_refused,
        http2: plan.http2,
        h2_requests,
        h2_indexing,
        target: plan.target.clone(),
        work: plan.work.clone(),
        tls,
        ws_tls,
        timeout: plan.timeout,
        connect_timeout: plan.connect_timeout.min(plan.timeout),
        wait_in_flight: plan.wait_in_flight,
        stop,
        initial: Arc::new(Current { load: plan.load.clone(), stage_ends: plan.stage_ends.clone(), end: plan.end }),
        replan: plan.replan.clone(),
    }))
}

/// Which protocol a TLS server picks by ALPN among `h2` and `http/1.1`: one
/// handshake before the run, so that every connection of the run speaks the
/// same (a server's choice does not change between connections). A server
/// that cannot be reached is HTTP/1.1's: the run's own connects will say
/// what is wrong with it. A server reached whose handshake failed is too,
/// and why it failed is returned: its certificate, most often, which no
/// request of the run will get past.
fn negotiate(
    target: &Target,
    connector: TlsConnector,
    name: ServerName<'static>,
    within: Duration,
) -> (Protocol, Option<String>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return (Protocol::Http1, None);
    };
    rt.block_on(async {
        let handshake = async {
            let Ok(tcp) = tokio::net::TcpStream::connect(target.addr).await else { return Ok(false) };
            let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
            Ok(tls.get_ref().1.alpn_protocol() == Some(b"h2"))
        };
        match tokio::time::timeout(within, handshake).await {
            Ok(Ok(true)) => (Protocol::H2, None),
            Ok(Err(why)) => (Protocol::Http1, Some(why)),
            _ => (Protocol::Http1, None),
        }
    })
}

/// Run the steps of `plan.work`'s first flow once, in order, on one
/// connection: a scenario's `setup`. Returns the variables they saved, or
/// why a step failed.
pub fn run_setup(plan: &Plan) -> Result<std::collections::HashMap<String, String>, SetupError> {
    let shared = shared(plan, Arc::new(AtomicBool::new(false))).map_err(|e| SetupError(e.to_string()))?;
    worker::run_setup(shared).map_err(SetupError)
}

/// `perfops run --debug` (#32): run `plan.work`'s flows once each, in
/// order (with `setup`, the first flow is the scenario's setup, and its
/// saved values go to the others), one arrival per flow and no load model,
/// every response read whole; `on` sees each exchange as it ends, redacted.
/// HTTP/1.1 exchanges show their wire bytes; others their outcome alone.
pub fn run_debug(plan: &Plan, setup: bool, on: impl FnMut(DebugExchange)) -> Result<(), SetupError> {
    let mut plan = plan.clone();
    let mut work = (*plan.work).clone();
    for step in work.flows.iter_mut().flat_map(|f| f.steps.iter_mut()) {
        // Every response read whole, to show it.
        step.capture = true;
    }
    plan.work = Arc::new(work);
    let shared = shared(&plan, Arc::new(AtomicBool::new(false))).map_err(|e| SetupError(e.to_string()))?;
    worker::debug::run(shared, setup, on).map_err(SetupError)
}

pub use worker::debug::{BODY_SHOWN, DebugExchange};

/// A setup step failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

/// Raise the open-files soft limit to the hard limit: every connection (every
/// in-flight request of the open model) needs a descriptor of its own.
/// Returns the soft limit in force afterwards (`None`: unknown).
pub fn raise_fd_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}
