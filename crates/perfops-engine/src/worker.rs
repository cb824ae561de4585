//! One worker: a single-threaded tokio runtime that owns its connections,
//! counters and histograms, and ships a snapshot of them once per second.
//!
//! Workers share nothing (wrk2, oha): no lock, no atomic and no channel send
//! per request. State lives in `Cell`/`RefCell` on the worker's own thread and
//! is never borrowed across an `.await`. What is measured goes to the
//! worker's [`Recorder`] (the `record` module); what a request is, to a
//! [`Request`] value; the connection it goes out on, to a slot the caller
//! owns (`&mut Option<Box<Conn>>`: emptied when the connection cannot be
//! reused, filled when a new one is opened).
//!
//! Per request the hot path also avoids what a request timeout and a clock
//! cost when done naively: each closed-loop user (and each open-model arrival,
//! from a pool) owns one timer that is moved to the new deadline when it has
//! moved past a grain (a hundredth of the timeout, at most 10 ms: [`arm`],
//! [`within`]), and the clock is read twice per request (after the write, and
//! when the response's last bytes are read), the end of one closed-loop request
//! being the start of the next. An open-model arrival reads it once more when
//! its task starts: the send time of a request on a kept connection. A new
//! connection's send time is when its connect (and TLS handshake) ended, an
//! instant [`Worker::connect`] reads anyway to time them.
//!
//! This file owns the worker's life (its start, the ticker's seconds, the
//! stop, when the requests still in flight are cut, the scenario's `setup`),
//! what its parts share ([`Worker`], [`Request`], [`Ended`], [`within`]) and
//! the one place where a request's end is recorded, whatever its protocol:
//! [`Worker::answered`] and [`Worker::failed`] (latency from the due time,
//! service time from the send, both histograms at once), and [`InFlight`]
//! for a request cut at the run's end. Each of its parts is one concept:
//!
//! ```text
//!   open_loop.rs    the open model: arrival n sent at start + due(n), or dropped
//!   closed_loop.rs  the closed model: users looping on their connections
//!   arrival.rs      one arrival: its flow's steps in order
//!   http1.rs        a step over HTTP/1.1 (the hot path), and the turn to HTTP/2
//!   http2.rs        a step over HTTP/2: a stream on the worker's pool, gRPC's status
//!   websocket.rs    a `websocket:` step's session
//!   checks.rs       a response against its step: status, `expect`, `save`
//!   sample.rs       a failing exchange kept as an example (#32), redacted
//!   debug.rs        `run --debug`: each flow once, every exchange shown (#32)
//!   connect.rs      TCP connect and TLS handshake, timed
//!   cookies.rs      a flow instance's cookie jar: Cookie sent, Set-Cookie kept
//!   scope.rs        a flow instance's saved values, over setup's
//!   spares.rs       what finished requests leave for the next ones
//! ```
//!
//! The parts import from this file, never the other way (it imports nothing
//! of theirs but `spares.rs`'s [`Spares`] and [`IDLE_CLOSE`] and
//! `scope.rs`'s [`Scope`], which need nothing of it): the loops, the
//! arrival and the exchanges are methods of [`Worker`] in their own files,
//! called here by name alone.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::task::Poll;
use std::time::Duration;

use perfops_core::analysis::generator;
use perfops_core::cookie::Jar;
use perfops_core::measure::{FailureKind, FailureSample, SampleKey, Sampler, Stats};
use perfops_core::model::{LoadModel, Shard};
use rustls::pki_types::ServerName;
use tokio::sync::Notify;
use tokio::task::coop;
use tokio::time::{Instant, Sleep, sleep_until};
use tokio_rustls::TlsConnector;

mod arrival;
mod checks;
mod closed_loop;
mod connect;
mod cookies;
pub(crate) mod debug;
mod http1;
mod http2;
mod open_loop;
mod sample;
mod scope;
mod scripted;
mod spares;
mod websocket;

use self::scope::Scope;
use self::spares::{IDLE_CLOSE, Spares};
use crate::coalesce;
use crate::http1::Response;
use crate::http2::{H2Request, Http2, Indexing, Pool as H2Pool};
use crate::record::{Answer, Due, Failure, Key, Pool, Recorder, mean_service};
use crate::steer::{Current, Replan};
use crate::target::{Protocol, Target};
use crate::timer::PreciseTimer;
use crate::work::{FlowPlan, StepPlan, Work};

/// What a worker sends to the collector.
pub(crate) enum Msg {
    /// Stats of interval `index` (second `index` of the run) from one worker;
    /// `last`: its final, possibly partial, second (a `Done` follows).
    /// `samples`: the failures it sampled in that second (#32; empty, and
    /// unallocated, when none).
    Interval {
        worker: usize,
        index: u32,
        parts: Vec<(Key, Stats)>,
        samples: Vec<(SampleKey, FailureSample)>,
        in_flight: u64,
        last: bool,
    },
    /// The worker has sent its last interval; `naps`: wake-ups it coalesced
    /// ([`coalesce`](crate::coalesce)), and the longest nap.
    /// `pacer`: the one its open loop ran on (`None`: a closed loop).
    /// `cpu_wait`: how long the thread waited, runnable, for a CPU
    /// ([`run_queue_wait`]).
    Done {
        worker: usize,
        end: Instant,
        naps: u64,
        longest_nap: Duration,
        pacer: Option<crate::uring::Pacer>,
        cpu_wait: Duration,
    },
}

/// How this worker generates load.
pub(crate) enum WorkerLoad {
    /// The schedule is the worker's plan's ([`Worker::plan`]).
    Open { shard: Shard, max_in_flight: u64 },
    /// The closed model's users of this worker, and its share of the model's
    /// stop rules.
    Closed {
        shard: Shard,
        users: u64,
        /// This worker's share of `max_requests`.
        requests: Option<u64>,
        /// The model, whose time rules each user asks ([`LoadModel::turn`]).
        model: Arc<LoadModel>,
    },
}

/// Everything a worker needs, shared read-only between workers.
pub(crate) struct Shared {
    /// Why the TLS handshake of the ALPN probe failed, if it did ([`crate::Outcome::tls_refused`]).
    pub(crate) tls_refused: Option<String>,
    pub(crate) target: Target,
    pub(crate) work: Arc<Work>,
    pub(crate) tls: Option<(TlsConnector, ServerName<'static>)>,
    /// WebSocket sessions' TLS when `tls` offers h2 alone: http/1.1 alone
    /// (`None`: `tls` already offers http/1.1).
    pub(crate) ws_tls: Option<(TlsConnector, ServerName<'static>)>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// Never cut the requests in flight, at the end or after a stop: each
    /// ends within its timeout.
    pub(crate) wait_in_flight: bool,
    pub(crate) stop: Arc<AtomicBool>,
    /// The load's plan as given: its model, stage ends and end.
    pub(crate) initial: Arc<Current>,
    /// Where a re-plan by hand is published (`None`: none will be).
    pub(crate) replan: Option<Arc<Replan>>,
    /// The protocol of every connection: [`Protocol::Http1`] or [`Protocol::H2`].
    pub(crate) protocol: Protocol,
    /// HTTP/2's knobs.
    pub(crate) http2: Http2,
    /// HTTP/2: the literal steps' requests, by step index (empty for HTTP/1.1).
    pub(crate) h2_requests: Vec<Option<H2Request>>,
    /// HTTP/2: which fields of each step's requests may be indexed, by step index.
    pub(crate) h2_indexing: Vec<Indexing>,
}

/// `timeout_at(timer's deadline, fut)` on a timer that outlives the request.
///
/// Why not `timeout_at`: its `Sleep` registers in the runtime's timer wheel
/// (under the driver's mutex) on first poll and deregisters (the mutex again)
/// when dropped, twice per request. A timer kept across requests and
/// `reset` to a *later* deadline only stores the new deadline (tokio's
/// lock-free `extend_expiration`); the wheel moves it when its old slot comes
/// up. Like `Timeout`, the request is polled first, so a response already
/// there wins over a deadline that passed at the same time.
///
/// Subtleness ahead (#12): a body that keeps arriving (an endless chunked
/// one) makes every read ready at once, so the request uses up the task's
/// cooperative budget (128 operations) each time it is polled, and a `Sleep`
/// polled without budget answers `Pending` even when it has fired: a plain
/// `select!` never saw the deadline and the request ran until the server
/// stopped. Like `Timeout`, the timer is then polled outside the budget.
async fn within<F: Future>(mut timer: Pin<&mut Sleep>, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let had_budget = coop::has_budget_remaining();
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let fired = if had_budget && !coop::has_budget_remaining() {
            std::pin::pin!(coop::unconstrained(timer.as_mut())).poll(cx)
        } else {
            timer.as_mut().poll(cx)
        };
        fired.map(|()| None)
    })
    .await
}

/// Once the run's time is up, or after a stop (Ctrl-C, SIGTERM, an
/// `abort_when` rule), how long requests in flight may still finish before
/// they are cut: the run ends within a second of either, whatever the
/// server does, and the answers of a healthy server (sent just before the
/// end, due in milliseconds) are still measured, not cut.
const GRACE: Duration = Duration::from_millis(500);

/// How often a worker looks at the stop flag and at a re-plan, and over
/// which its first worker times the generator's stalls (`watch_stop`).
const WATCH: Duration = Duration::from_millis(20);

/// A request in flight, for the worker's recorder: dropped before it was
/// answered or failed (its task dropped at the run's end, see [`run`]), it
/// records itself as cut, with the latency it had reached (from `due`) and
/// the bytes it had written. Costs a flag per request, and a clock read per
/// cut request.
struct InFlight<'w> {
    rec: &'w RefCell<Recorder>,
    key: Key,
    due: Instant,
    bytes_out: u64,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.rec.borrow_mut().cut(self.key, self.due.elapsed(), self.bytes_out);
        }
    }
}

/// A timer for [`within`], its deadline to be set before use.
fn new_timer() -> Sleep {
    sleep_until(Instant::now() + Duration::from_secs(86_400))
}

/// The most a request's timeout may fire after its deadline ([`arm`]).
const GRAIN_MAX: Duration = Duration::from_millis(10);

/// How late a request of `timeout` may be timed out, so that its timer need
/// not move for every request ([`arm`]): a hundredth of the timeout, at most
/// [`GRAIN_MAX`]. Tokio's timer wheel already fires up to a millisecond late.
fn grain_of(timeout: Duration) -> Duration {
    (timeout / 100).min(GRAIN_MAX)
}

/// Set `timer` for a request whose timeout falls at `deadline`: left as it
/// is when it fires within `[deadline, deadline + grain]`, else moved to
/// `deadline + grain`. Never early; at most `grain` late.
///
/// Why: moving a tokio timer (`Sleep::reset`: the deadline's tick, a clone
/// of the runtime's handle, an atomic exchange) was ~200 instructions of a
/// closed-loop request's ~4,700 in user space, and a user's deadlines move
/// by its latency per request (~0.5 ms against nginx). Set a grain ahead,
/// the timer moves once in every grain's worth of requests.
#[inline]
fn arm(timer: Pin<&mut Sleep>, deadline: Instant, grain: Duration) {
    let late = deadline + grain;
    let at = timer.deadline();
    if at < deadline || at > late {
        timer.reset(late);
    }
}

struct Worker {
    id: usize,
    start: Instant,
    shared: Arc<Shared>,
    rec: RefCell<Recorder>,
    /// The first few failures of each step and kind, as examples (#32).
    samples: RefCell<Sampler>,
    /// `run --debug` only: the wire bytes of the last exchange (`debug.rs`).
    trace: Option<RefCell<debug::Wire>>,
    in_flight: Cell<u64>,
    spares: RefCell<Spares>,
    rng: RefCell<fastrand::Rng>,
    stopping: Cell<bool>,
    /// When the stop was seen (`watch_stop`): the arrivals due later were never due.
    stopped_at: Cell<Option<Instant>>,
    stop_notify: Notify,
    /// When the stop watch last woke (`watch_stop`), to time stalls.
    watched: Cell<Instant>,
    /// Open model: the first of this worker's arrivals not yet sent,
    /// dropped or counted unsent; those left at the run's end are counted
    /// unsent ([`Worker::count_unsent`]).
    progress: Cell<u64>,
    /// The load's plan, as re-planned by hand (`steer.rs`), and how many
    /// re-plans it has seen; `stop_notify` wakes the pacer when it changes.
    plan: RefCell<Arc<Current>>,
    generation: Cell<u64>,
    drained: Notify,
    /// The interval the ticker is filling.
    interval: Cell<u32>,
    /// HTTP/2: this worker's connections (`None` for HTTP/1.1).
    h2: Option<H2Pool>,
    /// How late a request's timeout may fire ([`grain_of`] the timeout).
    grain: Duration,
    /// Open model: responses on plain TCP are dated by the kernel's receive
    /// time (HTTP/1.1's `http1::stamp_receives`, HTTP/2's and gRPC's
    /// `h2/stamped.rs`), which lets the pacer leave them waiting until its
    /// next arrival (`coalesce::pace`).
    stamped: bool,
    /// The scenario's scripts' runtime, one per worker (`scripted.rs`);
    /// `None` without scripts.
    script: Option<scripted::Scripted>,
}

/// One request of an arrival: what the hot path needs to send and record it.
struct Request<'a> {
    step: &'a StepPlan,
    key: Key,
    /// When it was meant to start (latency counts from here).
    due: Due,
    /// When it started: its timeout counts from here, and it is its send time
    /// unless a connection has to be opened first.
    start: Instant,
    /// The arrival's number and its feeders' rows, for templates.
    seq: u64,
    rows: &'a [Option<&'a [String]>],
    /// The flow's last step: its answer completes an iteration (never in a
    /// scripted flow, whose end its scripts decide: `arrival.rs`).
    last: bool,
    /// The flow's first step: its answer is the arrival answered, what the
    /// open model's rate judges (#32).
    first: bool,
    /// The flow instance's cookie jar (`None`: `defaults.cookies: false`).
    jar: Option<&'a RefCell<Jar>>,
    /// A scripted flow instance's state (`scripted.rs`): `None` without scripts.
    flow: Option<&'a RefCell<scripted::Flow>>,
    /// The flow instance's saved values (`scope.rs`), over setup's.
    scope: &'a Scope,
}

/// How one request ended, and when (its response's last byte read, or the failure seen).
struct Ended {
    at: Instant,
    /// No answer, a 4xx/5xx or a failed check: the flow ends.
    failed: bool,
}

/// Run one worker to completion on the current thread.
pub(crate) fn run(
    id: usize,
    shared: Arc<Shared>,
    load: WorkerLoad,
    start: Instant,
    tx: Sender<Msg>,
    pool: Pool,
    h2_connections: u32,
) {
    // Lower this thread's timer slack (default 50 µs) so the kernel does not
    // stretch the open-model pacer's timer or a closed loop's naps. A failure
    // only costs precision.
    let _ = nix::sys::prctl::set_timerslack(1_000);
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().on_thread_park(coalesce::before_park).build();
    let Ok(rt) = runtime else {
        // Nothing was sent: report an empty worker rather than hang the collector.
        let done = Msg::Done {
            worker: id,
            end: Instant::now(),
            naps: 0,
            longest_nap: Duration::ZERO,
            pacer: None,
            cpu_wait: Duration::ZERO,
        };
        let _ = tx.send(done);
        return;
    };
    let local = tokio::task::LocalSet::new();
    let keys = shared.work.flows.iter().map(|f| f.steps.len()).sum();
    let streams = shared.work.flows.iter().any(|f| f.steps.iter().any(|s| s.step.stream.is_some()));
    let closed = matches!(load, WorkerLoad::Closed { .. });
    let shard = match &load {
        WorkerLoad::Open { shard, .. } | WorkerLoad::Closed { shard, .. } => shard.index,
    };
    let open = match &load {
        WorkerLoad::Open { shard, .. } => Some(*shard),
        WorkerLoad::Closed { .. } => None,
    };
    let mut w = Worker { stamped: !closed, ..Worker::new(id, start, shared, h2_connections) };
    // Each shard's workers draw their own random streams.
    if shard != 0 {
        w.script = w.shared.work.scripts.as_deref().map(|plan| scripted::runtime(plan, shard, id));
    }
    let w = Rc::new(w);
    *w.rec.borrow_mut() = Recorder::with_pool(pool);
    w.rec.borrow_mut().warm(keys, streams);
    local.block_on(&rt, async {
        let ticker = tokio::task::spawn_local(w.clone().tick(tx.clone(), closed));
        let watcher = tokio::task::spawn_local(w.clone().watch_stop());
        // To the microsecond, as every arrival after it: tokio's timer would
        // start the load up to a millisecond late, and differently on every
        // generator of a fleet sharing one start instant (timer.rs).
        let _ = PreciseTimer::new().sleep_until(start).await;
        // The load ends by itself (every arrival sent and answered, every
        // user done), or its requests in flight are cut: at the run's end, or
        // a grace after a stop.
        tokio::select! {
            () = w.clone().load(load) => {}
            () = w.cut_time() => {}
        }
        // A stall that lasted past the run's end cut it as soon as the
        // process ran again: timed here, the watch never woke after it.
        if !watcher.is_finished() {
            w.watch_stall(Instant::now());
        }
        // The arrivals the pacer never reached (it was behind when the run
        // was cut: a stall) are counted, not lost.
        if let Some(shard) = open {
            w.count_unsent(shard);
        }
        ticker.abort();
        watcher.abort();
    });
    // Dropping the tasks still running (arrivals, users) cuts their requests
    // in flight: each records itself as cut ([`InFlight`]) and closes its
    // connection.
    drop(local);
    // The kernel pacer's sends still in its ring are done or cancelled
    // before their connections and buffers go.
    crate::uring::finish();
    let end = Instant::now();
    let parts = w.rec.borrow_mut().take();
    let samples = w.samples.borrow_mut().take();
    let _ = tx.send(Msg::Interval { worker: w.id, index: w.interval.get(), parts, samples, in_flight: 0, last: true });
    let (naps, longest_nap) = coalesce::taken();
    let pacer = crate::uring::take_ran();
    let _ = tx.send(Msg::Done { worker: w.id, end, naps, longest_nap, pacer, cpu_wait: run_queue_wait() });
}

/// How long this thread has waited, runnable, for a CPU (the scheduler's
/// `run_delay`, `/proc/thread-self/schedstat`'s second field, ns): what
/// other processes on its cores took from it. A late arrival is then the
/// machine's, not the pacer's; zero where the kernel does not say.
fn run_queue_wait() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

impl Worker {
    /// Generate this worker's `load` and wait for its last request.
    async fn load(self: Rc<Self>, load: WorkerLoad) {
        let w = self;
        match load {
            WorkerLoad::Open { shard, max_in_flight } => w.clone().open_loop(shard, max_in_flight).await,
            WorkerLoad::Closed { shard, users, requests, model } => {
                w.clone().closed_loop(shard, users, requests, model).await
            }
        }
        while w.in_flight.get() > 0 {
            w.drained.notified().await;
        }
    }

    /// When the requests still in flight are cut: [`GRACE`] after the run's
    /// end or after a stop, unless they are waited for (a second Ctrl-C then
    /// exits the process).
    async fn cut_time(&self) {
        if self.shared.wait_in_flight {
            return std::future::pending().await;
        }
        loop {
            // Read again each time: a re-plan by hand moves the end.
            let end = self.plan.borrow().end.map(|e| self.start + e + GRACE);
            if self.stopping.get() {
                return tokio::time::sleep(GRACE).await;
            }
            // The stop flag is seen within 20 ms (`watch_stop`), so this looks as often.
            let next = Instant::now() + Duration::from_millis(20);
            match end {
                Some(end) if end <= next => return sleep_until(end).await,
                _ => sleep_until(next).await,
            }
        }
    }
}

/// Run `steps` once, in order, on one connection, before the load: the
/// scenario's `setup`. Returns the variables saved, or why it failed.
pub(crate) fn run_setup(shared: Arc<Shared>) -> Result<HashMap<String, String>, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let w = Rc::new(Worker::new(0, Instant::now(), shared.clone(), 1));
        let mut conn = None;
        let mut timer = std::pin::pin!(new_timer());
        let rows = w.rows(0);
        // Setup is a flow instance of its own: its cookies stay with it, and
        // what it saves becomes every flow's globals.
        let jar = shared.work.cookies.then(RefCell::default);
        let scope = Scope::default();
        // A setup `script:` step saves into the setup's flow, and from it into setup's scope.
        let flow = w.flow(0, &rows, &scope);
        for step in &shared.work.flows[0].steps {
            let key = Key { stage: 0, step: step.index };
            // Setup is no arrival: it counts in no rate.
            let req = Request {
                step,
                key,
                due: Due::OnSend,
                start: Instant::now(),
                seq: 0,
                rows: &rows,
                last: false,
                first: false,
                jar: jar.as_ref(),
                flow: flow.as_ref(),
                scope: &scope,
            };
            let failed = w.step(&mut conn, timer.as_mut(), req).await.failed;
            // Its scripts' saves are in its scope already (`scripted.rs`);
            // its YAML saves reach its flow's state for a later script.
            if let Some(f) = &flow {
                w.saved_into(f, step, &scope);
            }
            if failed {
                // Its sample says what was expected and what came (#32),
                // not only the kind it counts as.
                let why = match w.samples.borrow_mut().take().into_iter().find(|((s, _), _)| *s == step.index) {
                    Some(((_, kind), sample)) => sample.describe(kind),
                    None => w.rec.borrow_mut().first_failure(key).map_or("?", |k| k.name()).to_string(),
                };
                return Err(format!("setup step `{}` failed: {why}", step.step.name));
            }
            for (name, _) in &step.step.save {
                if scope.get(name, &shared.work.globals).is_none() {
                    return Err(format!("setup step `{}` saved nothing into `{name}`", step.step.name));
                }
            }
        }
        Ok(scope.into_globals(&shared.work.globals))
    })
}

impl Worker {
    fn new(id: usize, start: Instant, shared: Arc<Shared>, h2_connections: u32) -> Worker {
        // Shard 0's streams; `run` builds it again for another shard.
        let script = shared.work.scripts.as_deref().map(|plan| scripted::runtime(plan, 0, id));
        let grain = grain_of(shared.timeout);
        Worker {
            h2: (shared.protocol == Protocol::H2).then(|| H2Pool::new(shared.http2, h2_connections)),
            id,
            start,
            plan: RefCell::new(shared.initial.clone()),
            shared,
            rec: RefCell::default(),
            samples: RefCell::default(),
            trace: None,
            in_flight: Cell::new(0),
            spares: RefCell::default(),
            rng: RefCell::new(fastrand::Rng::with_seed(0x5eed ^ id as u64)),
            stopping: Cell::new(false),
            stopped_at: Cell::new(None),
            stop_notify: Notify::new(),
            progress: Cell::new(0),
            watched: Cell::new(start),
            generation: Cell::new(0),
            drained: Notify::new(),
            interval: Cell::new(0),
            grain,
            stamped: false,
            script,
        }
    }

    /// Ship a snapshot at every whole second of the run; in a `closed` loop,
    /// set the next second's nap from this one ([`coalesce`]).
    async fn tick(self: Rc<Self>, tx: Sender<Msg>, closed: bool) {
        loop {
            let k = self.interval.get();
            sleep_until(self.start + Duration::from_secs(u64::from(k) + 1)).await;
            let parts = self.rec.borrow_mut().take();
            let samples = self.samples.borrow_mut().take();
            self.interval.set(k + 1);
            if let Some(cutoff) = Instant::now().checked_sub(IDLE_CLOSE) {
                self.spares.borrow_mut().close_idle(cutoff);
                if let Some(h2) = &self.h2 {
                    h2.close_idle(cutoff);
                }
            }
            if closed {
                let completed = parts.iter().map(|(_, s)| s.completed).sum();
                coalesce::set(coalesce::nap_for(mean_service(&parts), completed, coalesce::max_nap()));
            }
            if tx
                .send(Msg::Interval {
                    worker: self.id,
                    index: k,
                    parts,
                    samples,
                    in_flight: self.in_flight.get(),
                    last: false,
                })
                .is_err()
            {
                return;
            }
        }
    }

    /// Turn the process-wide stop flag (SIGINT, autostop) into a local
    /// wake-up, and a plan re-planned by hand into the worker's own
    /// (`steer.rs`): both looked at every 20 ms, never per request.
    ///
    /// The first worker's watch also times the generator's stalls: woken
    /// `generator::LATE` or more after it was due, no thread of the process
    /// ran (SIGSTOP, a VM paused, its CPU taken), and the time is counted
    /// in the stages it fell in ([`Worker::stalled`]).
    async fn watch_stop(self: Rc<Self>) {
        self.watched.set(Instant::now());
        loop {
            tokio::time::sleep(WATCH).await;
            let now = Instant::now();
            self.watch_stall(now);
            if let Some(replan) = &self.shared.replan {
                let generation = replan.generation();
                if generation != self.generation.get()
                    && let Some(plan) = replan.current()
                {
                    *self.plan.borrow_mut() = plan;
                    self.generation.set(generation);
                    // The pacer, asleep until a due time of the old plan,
                    // looks again (it tells a re-plan from a stop).
                    self.stop_notify.notify_one();
                }
            }
            if self.shared.stop.load(Ordering::Relaxed) {
                self.stopped_at.set(Some(now));
                self.stopping.set(true);
                self.stop_notify.notify_one();
                return;
            }
        }
    }

    /// The first worker's watch, woken at `now`: a stall since it last
    /// woke is counted ([`Worker::stalled`]). Also called once the load is
    /// over: a stall that outlasted the run's end (and its grace) cuts the
    /// load at once, before the watch would wake again.
    fn watch_stall(&self, now: Instant) {
        // Only once the load has started: the wait for its start is no stall.
        let due = self.watched.replace(now).max(self.start) + WATCH;
        if self.id == 0 && now >= due + generator::LATE {
            self.stalled(due, now);
        }
    }

    /// Count the time from `from` to `to` the generator did not run, in
    /// the stages it fell in (their first flow's first step).
    fn stalled(&self, from: Instant, to: Instant) {
        let plan = self.plan.borrow().clone();
        let step = self.shared.work.flows.first().map_or(0, FlowPlan::first_step);
        let mut at = from.saturating_duration_since(self.start);
        let to = to.saturating_duration_since(self.start);
        let mut rec = self.rec.borrow_mut();
        while at < to {
            let stage = plan.stage_at(at);
            // The last stage (or one without an end) takes the rest.
            let end = plan.stage_end(stage).filter(|&e| e > at && usize::from(stage) + 1 < plan.stage_ends.len());
            let upto = end.map_or(to, |e| e.min(to));
            rec.stalled(Key { stage, step }, upto - at);
            at = upto;
        }
    }

    fn end(&self) {
        let left = self.in_flight.get() - 1;
        self.in_flight.set(left);
        if left == 0 {
            self.drained.notify_one();
        }
    }

    /// `key`'s request going out, started at `start` (due at `due`, or at
    /// `start` in a closed loop): counted as sent, its timeout set on
    /// `timer` ([`arm`]: moved only when the deadline has moved past its
    /// grain), and in flight until it ends (cut at the run's end if it has
    /// not). Later than the previous request's deadline on this timer, except
    /// after a longer pause: then tokio re-registers it, correct either way.
    fn in_flight(&self, key: Key, due: Due, start: Instant, timer: Pin<&mut Sleep>) -> InFlight<'_> {
        self.rec.borrow_mut().sent(key);
        arm(timer, start + self.shared.timeout, self.grain);
        let due = match due {
            Due::At(due) => due,
            Due::OnSend => start,
        };
        InFlight { rec: &self.rec, key, due, bytes_out: 0, done: false }
    }

    /// Record `req`'s response, sent at `sent` (`failure`: the kind its
    /// status or checks make it), for HTTP/1.1 and HTTP/2 alike.
    fn answered(
        &self,
        req: &Request<'_>,
        sent: Instant,
        response: Response,
        bytes_out: u64,
        failure: Option<FailureKind>,
    ) -> Ended {
        // A failure ends an unscripted flow; a scripted one's end is counted where it ends
        // (`arrival.rs`: its scripts may go on after a failure, or loop back to this step).
        let ends_iteration = req.last || (failure.is_some() && req.flow.is_none());
        let answer = Answer { due: req.due, sent, response, bytes_out, failure, ends_iteration, first: req.first };
        self.rec.borrow_mut().answered(req.key, &answer);
        Ended { at: response.last_byte, failed: failure.is_some() }
    }

    /// Record `req`'s failure of `kind`, now (`sent`: when it went out, if
    /// it did; `bytes_in`: what was read of a broken answer).
    fn failed(
        &self,
        req: &Request<'_>,
        kind: FailureKind,
        out: sample::Sent<'_>,
        bytes_out: u64,
        bytes_in: u64,
    ) -> Ended {
        let at = Instant::now();
        let failure = Failure { due: req.due, start: req.start, sent: out.sent, at, kind, bytes_out, bytes_in };
        self.rec.borrow_mut().failed(req.key, &failure);
        self.sample(req.step, kind, at, None, None, out);
        Ended { at, failed: true }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use tokio::time::timeout;

    use super::*;

    /// The request timer is reset, not recreated, per request: after many
    /// requests answered in time have moved its deadline forward (tokio's
    /// lock-free path), it still fires exactly at the current deadline, and
    /// again after it has fired once (tokio's re-registering path).
    #[tokio::test(start_paused = true)]
    async fn a_reused_timer_fires_at_each_new_deadline() {
        let timeout = Duration::from_millis(100);
        let mut timer = pin!(new_timer());
        for _ in 0..1000 {
            timer.as_mut().reset(Instant::now() + timeout);
            // Answered in 1 ms: the request wins.
            let answer = within(timer.as_mut(), tokio::time::sleep(Duration::from_millis(1))).await;
            assert_eq!(answer, Some(()));
        }
        for round in 0..2 {
            let start = Instant::now();
            timer.as_mut().reset(start + timeout);
            assert_eq!(within(timer.as_mut(), std::future::pending::<()>()).await, None, "round {round}");
            assert_eq!(Instant::now() - start, timeout, "round {round}: fired at the deadline");
        }
        // A response ready when the deadline has already passed still wins,
        // as with `tokio::time::timeout`: the request is polled first.
        timer.as_mut().reset(Instant::now());
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(within(timer.as_mut(), std::future::ready(7)).await, Some(7));
    }

    /// A request's timer is moved only when its deadline leaves the grain
    /// ahead of it (`arm`): a closed-loop user's deadlines move by its
    /// latency per request, and a timer moved for each cost ~200
    /// instructions. It never fires before the request's deadline.
    #[tokio::test(start_paused = true)]
    async fn a_request_timer_moves_only_past_its_grain_and_never_fires_early() {
        let us = Duration::from_micros;
        let (timeout, grain) = (Duration::from_millis(100), Duration::from_millis(1));
        let mut timer = pin!(new_timer());
        let t0 = Instant::now();
        // (the request's start after t0, where its timer is left, after t0), each after the one before
        let cases = [
            // A new timer (a day away): moved, a grain past the deadline.
            (us(0), timeout + grain),
            // The next request 0.4 ms later: its deadline within the grain, the timer left.
            (us(400), timeout + grain),
            // Exactly a grain later: still within it, left.
            (us(1000), timeout + grain),
            // Past it: moved, a grain past this deadline.
            (us(1500), us(1500) + timeout + grain),
            // An earlier deadline than the timer's less its grain (a WebSocket step's hold
            // left it further ahead): moved back, or it would fire late by more than a grain.
            (us(0), timeout + grain),
        ];
        for (i, (start, left)) in cases.into_iter().enumerate() {
            arm(timer.as_mut(), t0 + start + timeout, grain);
            assert_eq!(timer.deadline(), t0 + left, "case {i}");
        }
        // A request whose deadline is 0.5 ms after the timer's was set: it times out after
        // its own deadline, and at most a grain (and tokio's millisecond tick) after it.
        let deadline = t0 + us(500) + timeout;
        arm(timer.as_mut(), deadline, grain);
        assert_eq!(within(timer.as_mut(), std::future::pending::<()>()).await, None);
        let fired = Instant::now();
        assert!(fired >= deadline, "fired {:?} early", deadline - fired);
        assert!(fired <= deadline + grain + Duration::from_millis(1), "fired {:?} late", fired - deadline);
    }

    /// How late a timeout may fire: a hundredth of it, at most 10 ms.
    #[test]
    fn a_timeouts_grain() {
        let ms = Duration::from_millis;
        let cases = [
            (Duration::from_secs(30), ms(10)),    // a long timeout: capped at 10 ms
            (Duration::from_secs(1), ms(10)),     // exactly where the cap begins
            (ms(100), ms(1)),                     // a tight one: 1 ms
            (ms(10), Duration::from_micros(100)), // tighter: 0.1 ms, below tokio's tick
            (Duration::ZERO, Duration::ZERO),     // none: fired at its deadline
        ];
        for (timeout, want) in cases {
            assert_eq!(grain_of(timeout), want, "{timeout:?}");
        }
    }

    /// #12: a request whose every read is ready at once (an endless body
    /// arriving faster than it is read) uses up the task's budget on every
    /// poll; the deadline still ends it. Real time: paused time only moves
    /// when the runtime is idle, which this request never lets it be.
    #[tokio::test]
    async fn a_request_that_is_always_ready_still_times_out() {
        let mut timer = pin!(new_timer());
        let start = Instant::now();
        timer.as_mut().reset(start + Duration::from_millis(50));
        // Each read of a socket with bytes waiting costs a unit of budget, as this does.
        let endless = async {
            loop {
                coop::consume_budget().await;
            }
        };
        let out = timeout(Duration::from_secs(2), within(timer.as_mut(), endless)).await;
        assert_eq!(out, Ok(None), "the request timer fired");
        assert!(start.elapsed() < Duration::from_millis(500), "at its deadline, not {:?} later", start.elapsed());
    }
}
