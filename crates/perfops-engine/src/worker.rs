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
//! from a pool) owns one timer that is moved to the new deadline per request
//! ([`within`]), and the clock is read twice per request (after the write, and
//! when the response's last bytes are read), the end of one closed-loop request
//! being the start of the next. An open-model arrival reads it once more when
//! its task starts: the send time of a request on a kept connection. A new
//! connection's send time is when its connect (and TLS handshake) ended, an
//! instant [`Worker::connect`] reads anyway to time them.
//!
//! HTTP/2 (`http2`) takes another road from [`Worker::perform`]: its
//! connections are the worker's, shared by every request in flight on it
//! (a `Pool`), not a slot of the caller's; a request takes a stream on one
//! of them. What it hands the [`Recorder`] is the same `Answer` or
//! `Failure`, so latency, service time and every sink mean the same. The
//! choice is one branch per request on the run's protocol, decided before
//! the run: the HTTP/1.1 path is as it was.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::task::Poll;
use std::time::Duration;

use perfops_core::measure::{FailureKind, Stats};
use perfops_core::model::{LoadModel, Schedule, Shard, Turn};
use perfops_core::scenario::extract::ParsedBody;
use perfops_core::scenario::grpc::GrpcCode;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, coop};
use tokio::time::{Instant, Sleep, sleep_until, timeout, timeout_at};
use tokio_rustls::TlsConnector;

mod websocket;

use crate::coalesce;
use crate::h2::answer::Captured;
use crate::h2::stamped::H2Io;
use crate::http1::{Conn, Response, Stream, connect_failure, remaining, tune};
use crate::http2::{self, H2Request, Http2, Indexing, Lease, Pool as H2Pool, Take};
use crate::record::{Answer, Due, Failure, Key, Pool, Recorder, mean_service};
use crate::target::{Protocol, Target};
use crate::timer::PreciseTimer;
use crate::work::{ArrivalVars, FlowPlan, StepPlan, Work};

/// What a worker sends to the collector.
pub(crate) enum Msg {
    /// Stats of interval `index` (second `index` of the run) from one worker;
    /// `last`: its final, possibly partial, second (a `Done` follows).
    Interval { worker: usize, index: u32, parts: Vec<(Key, Stats)>, in_flight: u64, last: bool },
    /// The worker has sent its last interval; `naps`: wake-ups it coalesced
    /// ([`coalesce`](crate::coalesce)), and the longest nap.
    Done { worker: usize, end: Instant, naps: u64, longest_nap: Duration },
}

/// How this worker generates load.
pub(crate) enum WorkerLoad {
    Open {
        schedule: Arc<Schedule>,
        shard: Shard,
        max_in_flight: u64,
    },
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
    pub(crate) target: Target,
    pub(crate) work: Arc<Work>,
    pub(crate) tls: Option<(TlsConnector, ServerName<'static>)>,
    /// WebSocket sessions' TLS when `tls` offers h2 alone: http/1.1 alone
    /// (`None`: `tls` already offers http/1.1).
    pub(crate) ws_tls: Option<(TlsConnector, ServerName<'static>)>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// When requests still in flight are cut, from the start (`None`: never,
    /// they are waited for).
    pub(crate) end: Option<Duration>,
    pub(crate) stop: Arc<AtomicBool>,
    /// End offset of each stage (empty: one stage).
    pub(crate) stage_ends: Vec<Duration>,
    /// The protocol of every connection: [`Protocol::Http1`] or [`Protocol::H2`].
    pub(crate) protocol: Protocol,
    /// HTTP/2's knobs.
    pub(crate) http2: Http2,
    /// HTTP/2: the literal steps' requests, by step index (empty for HTTP/1.1).
    pub(crate) h2_requests: Vec<Option<H2Request>>,
    /// HTTP/2: which fields of each step's requests may be indexed, by step index.
    pub(crate) h2_indexing: Vec<Indexing>,
}

impl Shared {
    fn stage_at(&self, offset: Duration) -> u16 {
        self.stage_ends.iter().position(|&end| offset < end).unwrap_or(self.stage_ends.len().saturating_sub(1)) as u16
    }
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

/// The failure of a gRPC answer (HTTP 200) with status `code` (`None`: no
/// `grpc-status` at all, not a gRPC answer), given the codes the step's
/// `expect: { grpc_status }` lets pass (`None`: OK alone).
fn grpc_failure(code: Option<u32>, expected: Option<&[GrpcCode]>) -> Option<FailureKind> {
    let Some(code) = code else { return Some(FailureKind::Protocol) };
    match expected {
        None => FailureKind::of_grpc_status(code),
        Some(codes) if codes.iter().any(|c| c.0 == code) => None,
        // Not what was expected: an error status counts as itself, an
        // unexpected OK as a failed check.
        Some(_) => FailureKind::of_grpc_status(code).or(Some(FailureKind::CheckFailed)),
    }
}

/// A timer for [`within`], its deadline to be set before use.
fn new_timer() -> Sleep {
    sleep_until(Instant::now() + Duration::from_secs(86_400))
}

struct Worker {
    id: usize,
    start: Instant,
    shared: Arc<Shared>,
    rec: RefCell<Recorder>,
    in_flight: Cell<u64>,
    spares: RefCell<Spares>,
    /// Variables saved so far (setup's, then this worker's flows').
    vars: RefCell<HashMap<String, String>>,
    rng: RefCell<fastrand::Rng>,
    stopping: Cell<bool>,
    stop_notify: Notify,
    drained: Notify,
    /// The interval the ticker is filling.
    interval: Cell<u32>,
    /// HTTP/2: this worker's connections (`None` for HTTP/1.1).
    h2: Option<H2Pool>,
    /// Open model: HTTP/1.1 responses are dated by the kernel's receive time
    /// (`http1::stamp_receives`), which lets the pacer leave them waiting
    /// until its next arrival (`coalesce::pace`).
    stamped: bool,
}

/// What finished requests leave for the next ones, so that the hot path
/// allocates nothing in steady state.
#[derive(Default)]
struct Spares {
    /// Idle keep-alive connections (open model) and since when each was
    /// idle, most recently used last: taken from the end, so the oldest sink
    /// to the front, where [`Spares::close_idle`] closes them. Boxed as
    /// everywhere (see [`Worker::connect`]).
    conns: VecDeque<(Instant, Box<Conn>)>,
    /// Request buffers (body scratch, rendered request).
    buffers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Request timers of finished open-model arrivals (see [`within`]).
    timers: Vec<Pin<Box<Sleep>>>,
}

/// How long a kept connection of the open model may stay idle before the
/// worker closes it.
///
/// Why close at all: the open model opens a connection for every arrival
/// that finds none idle, so a stall of the target (or of this machine) opens
/// as many as arrive during it, and nothing would ever close them: the soak
/// (#12) kept 2,000 connections, and their memory, after two such stalls at
/// 5,000/s. Taken most recently used first, the connections the rate needs
/// stay busy and the surplus sinks, idle, to the front of the pool.
/// Why 4 s: below the shortest keep-alive timeouts servers use (Node's 5 s),
/// so a connection is seldom closed by the server while we still count on
/// it, and far above the gaps between requests of any rate worth measuring.
const IDLE_CLOSE: Duration = Duration::from_secs(4);

impl Spares {
    /// Close the kept connections idle since before `cutoff`, and let go of
    /// the request timers and buffers a stall left beyond what the kept
    /// connections can use: each arrival takes one of each with a connection,
    /// so after a stall's hundreds of arrivals in flight, hundreds of them
    /// would otherwise be kept for the rest of the run (the soak's RSS stayed
    /// 3 MiB up after a 115 ms stall at 5,000/s).
    fn close_idle(&mut self, cutoff: Instant) {
        while self.conns.front().is_some_and(|(since, _)| *since < cutoff) {
            self.conns.pop_front();
        }
        let keep = self.conns.len() + 16;
        if self.timers.len() > keep || self.buffers.len() > keep {
            self.timers.truncate(keep);
            self.buffers.truncate(keep);
            self.timers.shrink_to(keep);
            self.buffers.shrink_to(keep);
            self.conns.shrink_to(keep);
        }
    }
}

/// What the closed-loop users of one worker share: the model, whose time
/// rules say when each user stops, and this worker's share of its request
/// count.
struct Users {
    model: Arc<LoadModel>,
    /// Requests left to send (`max_requests`).
    budget: Cell<Option<u64>>,
    /// Between a response and the user's next request.
    think: Duration,
}

impl Users {
    /// Take one request from the budget; `false`: none left, the user stops.
    fn take_one(&self) -> bool {
        match self.budget.get() {
            Some(0) => false,
            Some(left) => {
                self.budget.set(Some(left - 1));
                true
            }
            None => true,
        }
    }
}

/// An arrival to run: its number (`${seq}`), the stage it counts in, when
/// its first step was due and when it started.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    seq: u64,
    stage: u16,
    due: Due,
    start: Instant,
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
    /// The flow's last step: its answer completes an iteration.
    last: bool,
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
        let _ = tx.send(Msg::Done { worker: id, end: Instant::now(), naps: 0, longest_nap: Duration::ZERO });
        return;
    };
    let local = tokio::task::LocalSet::new();
    let keys = shared.work.flows.iter().map(|f| f.steps.len()).sum();
    let closed = matches!(load, WorkerLoad::Closed { .. });
    let w = Rc::new(Worker { stamped: !closed, ..Worker::new(id, start, shared, h2_connections) });
    *w.rec.borrow_mut() = Recorder::with_pool(pool);
    w.rec.borrow_mut().warm(keys);
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
        ticker.abort();
        watcher.abort();
    });
    // Dropping the tasks still running (arrivals, users) cuts their requests
    // in flight: each records itself as cut ([`InFlight`]) and closes its
    // connection.
    drop(local);
    let end = Instant::now();
    let parts = w.rec.borrow_mut().take();
    let _ = tx.send(Msg::Interval { worker: w.id, index: w.interval.get(), parts, in_flight: 0, last: true });
    let (naps, longest_nap) = coalesce::taken();
    let _ = tx.send(Msg::Done { worker: w.id, end, naps, longest_nap });
}

impl Worker {
    /// Generate this worker's `load` and wait for its last request.
    async fn load(self: Rc<Self>, load: WorkerLoad) {
        let w = self;
        match load {
            WorkerLoad::Open { schedule, shard, max_in_flight } => {
                w.clone().open_loop(&schedule, shard, max_in_flight).await
            }
            WorkerLoad::Closed { shard, users, requests, model } => {
                let think = match *model {
                    LoadModel::Closed { think, .. } => think,
                    LoadModel::Open { .. } => Duration::ZERO,
                };
                let rules = Rc::new(Users { model, budget: Cell::new(requests), think });
                let users: Vec<JoinHandle<()>> = (0..users)
                    .map(|k| {
                        // The global number of this user: users join in this order.
                        let global = u64::from(shard.index) + k * u64::from(shard.count);
                        tokio::task::spawn_local(w.clone().user_loop(global, rules.clone()))
                    })
                    .collect();
                for u in users {
                    let _ = u.await;
                }
            }
        }
        while w.in_flight.get() > 0 {
            w.drained.notified().await;
        }
    }

    /// When the requests still in flight are cut: [`GRACE`] after the run's
    /// end (unless they are waited for), or after a stop.
    async fn cut_time(&self) {
        let end = self.shared.end.map(|e| self.start + e + GRACE);
        loop {
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
        for step in &shared.work.flows[0].steps {
            let key = Key { stage: 0, step: step.index };
            let req = Request { step, key, due: Due::OnSend, start: Instant::now(), seq: 0, rows: &rows, last: false };
            if w.step(&mut conn, timer.as_mut(), req).await.failed {
                let kind = w.rec.borrow_mut().first_failure(key);
                return Err(format!("setup step `{}` failed: {}", step.step.name, kind.map_or("?", |k| k.name())));
            }
            for (name, _) in &step.step.save {
                if !w.vars.borrow().contains_key(name) {
                    return Err(format!("setup step `{}` saved nothing into `{name}`", step.step.name));
                }
            }
        }
        Ok(w.vars.take())
    })
}

impl Worker {
    fn new(id: usize, start: Instant, shared: Arc<Shared>, h2_connections: u32) -> Worker {
        Worker {
            h2: (shared.protocol == Protocol::H2).then(|| H2Pool::new(shared.http2, h2_connections)),
            id,
            start,
            vars: RefCell::new(shared.work.globals.clone()),
            shared,
            rec: RefCell::default(),
            in_flight: Cell::new(0),
            spares: RefCell::default(),
            rng: RefCell::new(fastrand::Rng::with_seed(0x5eed ^ id as u64)),
            stopping: Cell::new(false),
            stop_notify: Notify::new(),
            drained: Notify::new(),
            interval: Cell::new(0),
            stamped: false,
        }
    }

    /// Ship a snapshot at every whole second of the run; in a `closed` loop,
    /// set the next second's nap from this one ([`coalesce`]).
    async fn tick(self: Rc<Self>, tx: Sender<Msg>, closed: bool) {
        loop {
            let k = self.interval.get();
            sleep_until(self.start + Duration::from_secs(u64::from(k) + 1)).await;
            let parts = self.rec.borrow_mut().take();
            self.interval.set(k + 1);
            if let Some(cutoff) = Instant::now().checked_sub(IDLE_CLOSE) {
                self.spares.borrow_mut().close_idle(cutoff);
                if let Some(h2) = &self.h2 {
                    h2.close_idle(cutoff);
                }
            }
            if closed {
                coalesce::set(coalesce::nap_for(mean_service(&parts), parts.iter().map(|(_, s)| s.completed).sum()));
            }
            if tx
                .send(Msg::Interval { worker: self.id, index: k, parts, in_flight: self.in_flight.get(), last: false })
                .is_err()
            {
                return;
            }
        }
    }

    /// Turn the process-wide stop flag (SIGINT, autostop) into a local wake-up.
    async fn watch_stop(self: Rc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if self.shared.stop.load(Ordering::Relaxed) {
                self.stopping.set(true);
                self.stop_notify.notify_one();
                return;
            }
        }
    }

    /// Open model: dispatch arrival n at `start + due(n)`, whatever the server does.
    ///
    /// Where every response is dated by the kernel (plain-TCP HTTP/1.1: no TLS
    /// record to decrypt, no WebSocket message timed by its read), the pacer
    /// waits for an arrival due within `coalesce::PACE_MAX` in the park hook,
    /// deaf to the sockets, and reads the responses that came meanwhile in
    /// the same wake-up: one wake-up per arrival instead of about two
    /// (`coalesce`'s module doc has the figures).
    async fn open_loop(self: Rc<Self>, schedule: &Schedule, shard: Shard, max_in_flight: u64) {
        let shared = &*self.shared;
        let dated = self.stamped && shared.protocol == Protocol::Http1 && shared.tls.is_none();
        let websocket = shared.work.flows.iter().flat_map(|f| &f.steps).any(|s| s.step.websocket.is_some());
        let mut timer = if dated && !websocket { PreciseTimer::paced() } else { PreciseTimer::new() };
        let mut late_in_a_row = 0u32;
        let step = u64::from(shard.count.max(1));
        // Until when the arrivals are gathered into the current wake-up.
        let mut gathered = self.start;
        for n in shard.arrivals(schedule.total_arrivals()) {
            let Some(offset) = schedule.due(n) else { break };
            let due = self.start + offset;
            if due > gathered && due > Instant::now() {
                late_in_a_row = 0;
                // Wait for the arrivals due within the window too: they go out
                // together, none early, each charged its lateness from its due time.
                let next = (1..).map(|k| schedule.due(n.saturating_add(k * step)));
                gathered = self.start + coalesce::gather(offset, next, coalesce::GATHER);
                tokio::select! {
                    _ = timer.sleep_until(gathered) => {}
                    _ = self.stop_notify.notified() => {}
                }
            } else if due > gathered {
                // Behind schedule: send at once (the lateness shows as latency),
                // but let responses be read now and then. (Due at or before
                // `gathered`: one of this wake-up's arrivals, sent with it.)
                late_in_a_row += 1;
                if late_in_a_row.is_multiple_of(16) {
                    tokio::task::yield_now().await;
                }
            }
            if self.stopping.get() {
                break;
            }
            let stage = self.shared.stage_at(offset);
            if self.in_flight.get() >= max_in_flight {
                self.drop_arrival(&self.shared.work.flows[self.shared.work.pick(n)], stage);
                continue;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            let me = self.clone();
            let mut task = Box::pin(async move {
                let (mut conn, mut timer) = {
                    let mut spares = me.spares.borrow_mut();
                    (
                        spares.conns.pop_back().map(|(_, c)| c),
                        spares.timers.pop().unwrap_or_else(|| Box::pin(new_timer())),
                    )
                };
                let arrival = Arrival { seq: n, stage, due: Due::At(due), start: Instant::now() };
                let ended = me.arrival(&mut conn, timer.as_mut(), arrival).await;
                let mut spares = me.spares.borrow_mut();
                if let Some(conn) = conn {
                    spares.conns.push_back((ended, conn));
                }
                spares.timers.push(timer);
                drop(spares);
                me.end();
            });
            // Sent now, in this poll: spawned, the arrival would start after
            // every task this wake-up woke (the responses that came since the
            // last one), each read and recorded before it, and be late by all
            // of them (#18). Its first poll takes a kept connection, writes the
            // request and waits for the response; the task it becomes reads
            // it. Boxed, the future moves into its task as a pointer, not as
            // its whole state.
            if std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx).is_pending())).await {
                tokio::task::spawn_local(task);
            }
        }
    }

    /// Closed model: one user looping through flows on its connection, until
    /// one of the `users`' stop rules says so.
    async fn user_loop(self: Rc<Self>, global: u64, users: Rc<Users>) {
        let mut conn = None;
        let mut timer = std::pin::pin!(new_timer());
        let mut seq = global;
        // The end of one iteration (when its last response byte was read) is the
        // start of the next: the few hundred nanoseconds of bookkeeping between
        // them count as the next request's, as they would for any client.
        let mut now = Instant::now();
        loop {
            if self.stopping.get() {
                return;
            }
            let offset = now.saturating_duration_since(self.start);
            match users.model.turn(global, offset) {
                Turn::Send => {}
                Turn::Stop => return,
                // Not (yet, or any more) one of the active users: wait and look again.
                Turn::Wait => {
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    now = Instant::now();
                    continue;
                }
            }
            if !users.take_one() {
                return;
            }
            let stage = self.shared.stage_at(offset);
            self.in_flight.set(self.in_flight.get() + 1);
            now = self.arrival(&mut conn, timer.as_mut(), Arrival { seq, stage, due: Due::OnSend, start: now }).await;
            self.end();
            seq += 1 << 20; // distinct per user, for ${seq} and flow picks
            if !users.think.is_zero() {
                tokio::time::sleep(users.think).await;
                now = Instant::now();
            }
        }
    }

    fn end(&self) {
        let left = self.in_flight.get() - 1;
        self.in_flight.set(left);
        if left == 0 {
            self.drained.notify_one();
        }
    }

    /// One arrival: its flow's steps in order, on the connection in `conn`
    /// (if any; a new one is left there). A failed step ends the flow (later
    /// steps depend on what earlier ones saved). Returns when it ended.
    async fn arrival(&self, conn: &mut Option<Box<Conn>>, mut timer: Pin<&mut Sleep>, a: Arrival) -> Instant {
        let work = &*self.shared.work;
        let flow = &work.flows[work.pick(a.seq)];
        // One row of each feeder for the whole arrival. A `once` feeder that
        // has run out ends the arrivals: they are dropped and counted.
        let rows = self.rows(a.seq);
        if rows.iter().any(Option::is_none) {
            self.drop_arrival(flow, a.stage);
            return Instant::now();
        }
        let (mut due, mut start) = (a.due, a.start);
        let mut end_at = start;
        for (i, step) in flow.steps.iter().enumerate() {
            let key = Key { stage: a.stage, step: step.index };
            let last = i + 1 == flow.steps.len();
            let req = Request { step, key, due, start, seq: a.seq, rows: &rows, last };
            let ended = self.step(conn, timer.as_mut(), req).await;
            end_at = ended.at;
            if ended.failed {
                break;
            }
            let pause = step.step.pause;
            // The next step is due when this one ended plus its pause; a closed
            // loop's user sends it as soon as it can, so without a pause it is
            // due when sent, like the flow's first.
            due = if a.due == Due::OnSend && pause.is_zero() { Due::OnSend } else { Due::At(ended.at + pause) };
            start = ended.at;
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
                start = Instant::now();
            }
        }
        end_at
    }

    /// Count an arrival of `flow` that is not sent: the generator's limit.
    fn drop_arrival(&self, flow: &FlowPlan, stage: u16) {
        let step = flow.steps.first().map_or(0, |s| s.index);
        self.rec.borrow_mut().dropped(Key { stage, step });
    }

    /// The feeders' rows for arrival `seq` (`None`: a `once` feeder ran out).
    fn rows(&self, seq: u64) -> Vec<Option<&[String]>> {
        let work = &*self.shared.work;
        work.feeders.iter().map(|f| f.row(seq, &mut self.rng.borrow_mut())).collect()
    }

    /// Run one step: an HTTP request ([`Worker::perform`]) or a WebSocket
    /// session (`websocket.rs`: boxed, so that the future of every arrival
    /// does not carry a session's state).
    async fn step(&self, conn: &mut Option<Box<Conn>>, timer: Pin<&mut Sleep>, req: Request<'_>) -> Ended {
        if req.step.step.websocket.is_some() {
            Box::pin(self.session(timer, req)).await
        } else {
            self.perform(conn, timer, req).await
        }
    }

    /// Send `req` on the connection in `conn` or a new one, timed out by
    /// `timer`, and record everything under its key (its iteration too when it
    /// is its flow's last step or failed with an answer). Leaves the
    /// connection in `conn` when it can be reused.
    async fn perform(&self, conn: &mut Option<Box<Conn>>, mut timer: Pin<&mut Sleep>, req: Request<'_>) -> Ended {
        if let Some(pool) = &self.h2 {
            // Boxed: inline, HTTP/2's future (its connect, handshake and
            // stream) would make every HTTP/1.1 request's future as large,
            // and the #12 budget of 10,000 connections in 100 MiB is per
            // task. One allocation per HTTP/2 request.
            return Box::pin(self.perform_h2(pool, timer, req)).await;
        }
        let shared = &*self.shared;
        let step = req.step;
        let (mut body_buf, mut rendered) = self.spares.borrow_mut().buffers.pop().unwrap_or_default();
        let request: &[u8] = match &step.cached {
            Some(bytes) => bytes,
            None => {
                let work = &*shared.work;
                let vars = self.vars.borrow();
                let av =
                    ArrivalVars { saved: &vars, env: &work.env, seq: req.seq, feeders: &work.feeders, rows: req.rows };
                // A missing value renders empty; the server's answer says the rest.
                let _ = work.render(step, &av, &mut self.rng.borrow_mut(), &mut body_buf, &mut rendered);
                &rendered
            }
        };
        self.rec.borrow_mut().sent(req.key);
        let due = match req.due {
            Due::At(due) => due,
            Due::OnSend => req.start,
        };
        let mut in_flight = InFlight { rec: &self.rec, key: req.key, due, bytes_out: 0, done: false };
        // Later than the previous request's deadline on this timer, except after
        // a longer pause: then tokio re-registers it, correct either way.
        timer.as_mut().reset(req.start + shared.timeout);
        let mut outcome = self.exchange(conn, timer.as_mut(), request, &req, &mut in_flight.bytes_out).await;
        // Redirects, only when asked and only within the target: one request,
        // measured to the final response, from its first send.
        let mut hops = shared.work.redirects;
        while hops > 0 {
            let Ok((resp, sent)) = &outcome else { break };
            let Some(c) = conn.as_deref() else { break };
            let Some(next) = shared.work.redirect(resp.status, &c.head, &shared.target, step.head) else { break };
            hops -= 1;
            if !c.keep_alive {
                *conn = None;
            }
            let (earlier_bytes, sent) = (resp.bytes_in, *sent);
            outcome = self
                .exchange(conn, timer.as_mut(), &next, &req, &mut in_flight.bytes_out)
                .await
                .map(|(mut r, _)| {
                    r.bytes_in += earlier_bytes;
                    (r, sent)
                })
                .map_err(|(kind, _)| (kind, Some(sent)));
        }
        self.spares.borrow_mut().buffers.push((body_buf, rendered));
        in_flight.done = true;
        let bytes_out = in_flight.bytes_out;
        match outcome {
            Ok((response, sent)) => {
                let mut failure = status_failure(step, response.status);
                if failure.is_none()
                    && step.capture
                    && !conn.as_deref().is_some_and(|c| self.check_and_save_h1(step, response.status, c))
                {
                    failure = Some(FailureKind::CheckFailed);
                }
                if conn.as_ref().is_some_and(|c| !c.keep_alive) {
                    *conn = None;
                }
                self.answered(&req, sent, response, bytes_out, failure)
            }
            Err((kind, sent)) => self.failed(&req, kind, sent, bytes_out),
        }
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
        let ends_iteration = req.last || failure.is_some();
        let answer = Answer { due: req.due, sent, response, bytes_out, failure, ends_iteration };
        self.rec.borrow_mut().answered(req.key, &answer);
        Ended { at: response.last_byte, failed: failure.is_some() }
    }

    /// Record `req`'s failure of `kind`, now (`sent`: when it went out, if it did).
    fn failed(&self, req: &Request<'_>, kind: FailureKind, sent: Option<Instant>, bytes_out: u64) -> Ended {
        let at = Instant::now();
        let failure = Failure { due: req.due, start: req.start, sent, at, kind, bytes_out };
        self.rec.borrow_mut().failed(req.key, &failure);
        Ended { at, failed: true }
    }

    /// Send `request` on the connection in `conn` (or a new one, left there)
    /// and read the response before `timer` fires, retrying once on a fresh
    /// connection when a kept one was found closed. Adds the bytes written to
    /// `bytes_out`. Returns the response and when the request was sent:
    /// `req.start` on a kept connection, or when a new one was ready (connect
    /// and TLS are phases of their own, not service time); or the failure and
    /// when it was sent, if it was (not when the connect failed).
    async fn exchange(
        &self,
        conn: &mut Option<Box<Conn>>,
        mut timer: Pin<&mut Sleep>,
        request: &[u8],
        req: &Request<'_>,
        bytes_out: &mut u64,
    ) -> Result<(Response, Instant), (FailureKind, Option<Instant>)> {
        let mut retried = false;
        let mut sent = req.start;
        loop {
            let c = match conn {
                Some(c) => c,
                // Boxed: connecting (and the TLS handshake) is a future of over
                // a KiB that every request's future would otherwise carry, for
                // the whole exchange (#12: 10,000 connections in < 100 MiB).
                // One allocation per new connection, none per request.
                None => match within(timer.as_mut(), Box::pin(self.connect(req.key))).await {
                    Some(Ok((c, ready))) => {
                        sent = ready;
                        conn.insert(c)
                    }
                    Some(Err(kind)) => return Err((kind, None)),
                    None => return Err((FailureKind::Timeout, None)),
                },
            };
            *bytes_out += request.len() as u64;
            let result = within(timer.as_mut(), c.exchange(request, req.step.head, req.step.capture)).await;
            match result {
                Some(Ok(resp)) => return Ok((resp, sent)),
                // A keep-alive connection the server closed while it was idle:
                // retry once on a new one, as browsers and HTTP clients do.
                Some(Err(e)) if e.nothing_received && c.reused && !retried => retried = true,
                Some(Err(e)) => {
                    *conn = None;
                    return Err((e.kind, Some(sent)));
                }
                None => {
                    *conn = None;
                    return Err((FailureKind::Timeout, Some(sent)));
                }
            }
            *conn = None;
        }
    }

    /// [`Worker::perform`] over HTTP/2: the request goes out on a stream of
    /// one of the worker's connections (`pool`), whoever opened it.
    async fn perform_h2(&self, pool: &H2Pool, mut timer: Pin<&mut Sleep>, req: Request<'_>) -> Ended {
        let shared = &*self.shared;
        let step = req.step;
        let rendered_request;
        let request = match shared.h2_requests.get(usize::from(step.index)).and_then(Option::as_ref) {
            Some(r) => Some(r),
            None => {
                let (mut body_buf, mut rendered) = self.spares.borrow_mut().buffers.pop().unwrap_or_default();
                let work = &*shared.work;
                {
                    let vars = self.vars.borrow();
                    let av = ArrivalVars {
                        saved: &vars,
                        env: &work.env,
                        seq: req.seq,
                        feeders: &work.feeders,
                        rows: req.rows,
                    };
                    // A missing value renders empty; the server's answer says the rest.
                    let _ = work.render(step, &av, &mut self.rng.borrow_mut(), &mut body_buf, &mut rendered);
                }
                let none = Indexing::default();
                let indexing = shared.h2_indexing.get(usize::from(step.index)).unwrap_or(&none);
                rendered_request =
                    H2Request::from_http1(&rendered, shared.target.scheme(), indexing).ok().and_then(|r| {
                        match &step.grpc {
                            Some(m) => r.into_grpc(m, shared.timeout).ok(),
                            None => Some(r),
                        }
                    });
                self.spares.borrow_mut().buffers.push((body_buf, rendered));
                rendered_request.as_ref()
            }
        };
        self.rec.borrow_mut().sent(req.key);
        let due = match req.due {
            Due::At(due) => due,
            Due::OnSend => req.start,
        };
        // Counts the bytes written as it goes: a request cut at the run's end counts them too.
        let mut in_flight = InFlight { rec: &self.rec, key: req.key, due, bytes_out: 0, done: false };
        timer.as_mut().reset(req.start + shared.timeout);
        let mut captured = step.capture.then(Captured::default);
        let outcome = match request {
            Some(request) => {
                let bytes_out = &mut in_flight.bytes_out;
                self.exchange_h2(pool, timer.as_mut(), request, &req, captured.as_mut(), bytes_out).await
            }
            // A header HTTP/2 cannot carry (a templated value that renders badly).
            None => Err((FailureKind::Protocol, None)),
        };
        let bytes_out = in_flight.bytes_out;
        in_flight.done = true;
        match outcome {
            Ok((response, grpc_status, sent)) => {
                let mut failure = status_failure(step, response.status);
                if failure.is_none()
                    && let Some(m) = &step.grpc
                {
                    failure =
                        grpc_failure(grpc_status, step.step.expect.as_ref().and_then(|e| e.grpc_status.as_deref()));
                    if let Some(c) = captured.as_mut() {
                        // `save` and `expect` read the answer's first message as JSON.
                        c.body = m.first_as_json(&c.body).unwrap_or_default();
                    }
                }
                if failure.is_none()
                    && let Some(c) = &captured
                    && !self.check_and_save(step, response.status, &c.fields(), &c.body)
                {
                    failure = Some(FailureKind::CheckFailed);
                }
                self.answered(&req, sent, response, bytes_out, failure)
            }
            Err((kind, sent)) => self.failed(&req, kind, sent, bytes_out),
        }
    }

    /// Send `request` on a stream (see [`Worker::h2_stream`]) and read the
    /// response before `timer` fires. A request the server did not process
    /// (its connection went away first) goes again on another connection,
    /// twice at most. Returns the response and when the request was sent:
    /// `req.start`, or when its stream was ready if it waited for one or for
    /// a new connection (connect, TLS and the wait are not service time).
    async fn exchange_h2(
        &self,
        pool: &H2Pool,
        mut timer: Pin<&mut Sleep>,
        request: &H2Request,
        req: &Request<'_>,
        mut captured: Option<&mut Captured>,
        bytes_out: &mut u64,
    ) -> Result<(Response, Option<u32>, Instant), (FailureKind, Option<Instant>)> {
        let mut sent = req.start;
        let mut again = 0;
        loop {
            let lease = match within(timer.as_mut(), self.h2_stream(pool, req.key)).await {
                Some(Ok((lease, ready))) => {
                    if let Some(ready) = ready {
                        sent = ready;
                    }
                    lease
                }
                Some(Err(kind)) => return Err((kind, None)),
                None => return Err((FailureKind::Timeout, None)),
            };
            *bytes_out += request.bytes_out();
            if let Some(c) = captured.as_deref_mut() {
                c.body.clear();
            }
            match within(timer.as_mut(), http2::exchange(&lease, request, captured.as_deref_mut())).await {
                Some(Ok((response, grpc_status))) => return Ok((response, grpc_status, sent)),
                Some(Err(e)) if e.again && again < 2 => again += 1,
                Some(Err(e)) => return Err((e.kind, Some(sent))),
                None => return Err((FailureKind::Timeout, Some(sent))),
            }
        }
    }

    /// A stream for a request of `key`: on a connection with room, on a new
    /// one, or after waiting for one (see `http2`'s sketch). Returns when it
    /// was ready, if it was not at once.
    async fn h2_stream(&self, pool: &H2Pool, key: Key) -> Result<(Lease, Option<Instant>), FailureKind> {
        let mut waited = false;
        loop {
            let goaways = pool.prune();
            if goaways > 0 {
                self.rec.borrow_mut().goaways(key, goaways);
            }
            match pool.take() {
                Take::Stream(lease) => return Ok((lease, waited.then(Instant::now))),
                Take::AwaitOpening => {
                    let _waiting = pool.awaiting_open();
                    pool.changed().await;
                }
                Take::Full => {
                    if !waited {
                        waited = true;
                        self.rec.borrow_mut().stream_wait(key);
                    }
                    pool.changed().await;
                }
                Take::Open => {
                    // Boxed: connect, TLS and the h2 handshake make a future of
                    // several KiB that every request's future would carry
                    // inline, and move (memcpy) when it is boxed per request
                    // in `perform`: ~530 of ~31,700 instructions per request
                    // (callgrind, quick -c 50 -p 10 against nginx). One
                    // allocation per new connection instead.
                    let lease = Box::pin(self.open_h2(pool, key)).await?;
                    return Ok((lease, Some(Instant::now())));
                }
            }
        }
    }

    /// Open a connection for `pool` (connect, TLS, the h2 handshake and the
    /// server's SETTINGS) and take a stream on it.
    async fn open_h2(&self, pool: &H2Pool, key: Key) -> Result<Lease, FailureKind> {
        let opening = pool.opening();
        let (stream, _, deadline) = self.connect_stream(key, false).await?;
        if let Stream::Tls(tls) = &stream
            && tls.get_ref().1.alpn_protocol() != Some(b"h2")
        {
            // Asked for h2 alone, and the server would not speak it.
            return Err(FailureKind::Protocol);
        }
        // An open-model worker's plain-TCP reads are dated by the kernel (`h2/stamped.rs`).
        let io = H2Io::new(stream, self.stamped);
        let handshake = http2::handshake(io, &pool.settings, pool.notifier(), pool.new_state());
        let (send, state) = match timeout_at(deadline, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(kind)) => return Err(kind),
            Err(_) => return Err(FailureKind::ConnectTimeout),
        };
        drop(opening);
        Ok(pool.add(send, state))
    }

    /// Run the step's `expect` and `save` on the response captured on `c`.
    fn check_and_save_h1(&self, step: &StepPlan, status: u16, c: &Conn) -> bool {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let _ = resp.parse(&c.head);
        let pairs: Vec<(&str, &[u8])> = resp.headers.iter().map(|h| (h.name, h.value)).collect();
        self.check_and_save(step, status, &pairs, &c.body)
    }

    /// Run the step's `expect` and `save` on a response's header fields
    /// (`pairs`) and body.
    fn check_and_save(&self, step: &StepPlan, status: u16, pairs: &[(&str, &[u8])], body: &[u8]) -> bool {
        let body = ParsedBody::new(body);
        if let Some(expect) = &step.step.expect
            && expect.check_from(status, pairs, &body).is_some()
        {
            return false;
        }
        let mut ok = true;
        for (name, extractor) in &step.step.save {
            match extractor.extract_from(pairs, &body) {
                Some(v) => {
                    self.vars.borrow_mut().insert(name.clone(), v);
                }
                None => ok = false,
            }
        }
        ok
    }

    /// Open a connection (and TLS session), recording how long each took;
    /// returns it and when it was ready (an instant read to time it anyway).
    /// Boxed: a connection moves through every request's futures and their
    /// results, and a pointer is cheaper to move than the whole `Conn`.
    async fn connect(&self, key: Key) -> Result<(Box<Conn>, Instant), FailureKind> {
        let (stream, ready, _) = self.connect_stream(key, false).await?;
        let conn = if self.stamped { Conn::stamped(stream) } else { Conn::new(stream) };
        Ok((Box::new(conn), ready))
    }

    /// Open a TCP connection (and TLS session), recording how long each
    /// took; returns it, when it was ready and the connect's deadline.
    /// HTTP/1.1's [`Conn`], HTTP/2's connections and a WebSocket session
    /// (`websocket.rs`) start from here.
    /// A WebSocket session's (`websocket`) offers http/1.1 alone over TLS.
    async fn connect_stream(&self, key: Key, websocket: bool) -> Result<(Stream, Instant, Instant), FailureKind> {
        let shared = &*self.shared;
        let t0 = Instant::now();
        let deadline = t0 + shared.connect_timeout;
        let tcp = match timeout_at(deadline, TcpStream::connect(shared.target.addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(connect_failure(&e)),
            Err(_) => return Err(FailureKind::ConnectTimeout),
        };
        tune(&tcp).map_err(|_| FailureKind::ConnectError)?;
        let t1 = Instant::now();
        self.rec.borrow_mut().connected(key, t1 - t0);
        let tls = if websocket { shared.ws_tls.as_ref().or(shared.tls.as_ref()) } else { shared.tls.as_ref() };
        let (stream, ready) = match tls {
            None => (Stream::Tcp(tcp), t1),
            Some((connector, name)) => {
                let handshake = connector.connect(name.clone(), tcp);
                match timeout(remaining(deadline).max(Duration::from_millis(1)), handshake).await {
                    Ok(Ok(tls)) => {
                        let t2 = Instant::now();
                        self.rec.borrow_mut().handshake(key, t2 - t1);
                        (Stream::Tls(Box::new(tls)), t2)
                    }
                    Ok(Err(_)) => return Err(FailureKind::Tls),
                    Err(_) => return Err(FailureKind::ConnectTimeout),
                }
            }
        };
        Ok((stream, ready, deadline))
    }
}

/// The failure a response's status counts as: none for a status the step's
/// `expect.status` lists (a 404 the scenario asks for is its answer), else
/// `http_4xx`/`http_5xx` for those.
fn status_failure(step: &StepPlan, status: u16) -> Option<FailureKind> {
    if step.step.expect.as_ref().is_some_and(|e| e.lists_status(status)) {
        None
    } else {
        FailureKind::of_status(status)
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

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

    /// A gRPC answer's status against what the step expects.
    #[test]
    fn grpc_statuses_fail_as_their_kind_unless_expected() {
        use FailureKind::*;
        let (ok, unavailable) = (GrpcCode(0), GrpcCode(14));
        // (grpc-status, expected codes, failure)
        type Case<'a> = (Option<u32>, Option<&'a [GrpcCode]>, Option<FailureKind>);
        let cases: [Case<'_>; 7] = [
            (Some(0), None, None),                              // OK, nothing said: passes
            (Some(14), None, Some(GrpcUnavailable)),            // an error status counts as itself
            (Some(99), None, Some(GrpcUnknown)),                // an unknown code, as gRPC reads it
            (None, None, Some(Protocol)),                       // no grpc-status: not a gRPC answer
            (Some(14), Some(&[ok, unavailable]), None),         // expected: passes
            (Some(5), Some(&[ok]), Some(GrpcNotFound)),         // not expected: its own kind
            (Some(0), Some(&[unavailable]), Some(CheckFailed)), // an unexpected OK: a failed check
        ];
        for (i, (code, expected, want)) in cases.into_iter().enumerate() {
            assert_eq!(grpc_failure(code, expected), want, "case {i}");
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
