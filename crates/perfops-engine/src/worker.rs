//! One worker: a single-threaded tokio runtime that owns its connections,
//! counters and histograms, and ships a snapshot of them once per second.
//!
//! Workers share nothing (wrk2, oha): no lock, no atomic and no channel send
//! per request. State lives in `Cell`/`RefCell` on the worker's own thread and
//! is never borrowed across an `.await`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use perfops_core::measure::{FailureKind, Stats};
use perfops_core::model::{Schedule, Shard};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_rustls::TlsConnector;

use crate::http1::{Conn, Stream, connect_failure, remaining, tune};
use crate::target::{Request, Target};
use crate::timer::PreciseTimer;

/// What a worker sends to the collector.
pub(crate) enum Msg {
    /// Stats of interval `index` (second `index` of the run) from one worker.
    Interval { worker: usize, index: u32, stats: Box<Stats>, in_flight: u64 },
    /// The worker has sent its last interval.
    Done { worker: usize, end: Instant },
}

/// How this worker generates load.
pub(crate) enum WorkerLoad {
    Open { schedule: Arc<Schedule>, shard: Shard, max_in_flight: u64 },
    Closed { users: u64, requests: Option<u64>, until: Option<Instant>, think: Duration },
}

/// Everything a worker needs, shared read-only between workers.
pub(crate) struct Shared {
    pub(crate) target: Target,
    pub(crate) request: Request,
    pub(crate) tls: Option<(TlsConnector, ServerName<'static>)>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) stop: Arc<AtomicBool>,
}

struct Worker {
    id: usize,
    start: Instant,
    shared: Arc<Shared>,
    stats: RefCell<Stats>,
    in_flight: Cell<u64>,
    /// Idle keep-alive connections (open model), most recently used last.
    idle: RefCell<Vec<Conn>>,
    /// Requests left to send (closed model with `-n`).
    budget: Cell<Option<u64>>,
    stopping: Cell<bool>,
    stop_notify: Notify,
    drained: Notify,
    /// The interval the ticker is filling.
    interval: Cell<u32>,
}

/// Run one worker to completion on the current thread.
pub(crate) fn run(id: usize, shared: Arc<Shared>, load: WorkerLoad, start: Instant, tx: Sender<Msg>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(_) => {
            // Nothing was sent: report an empty worker rather than hang the collector.
            let _ = tx.send(Msg::Done { worker: id, end: Instant::now() });
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let w = Rc::new(Worker {
            id,
            start,
            shared,
            stats: RefCell::default(),
            in_flight: Cell::new(0),
            idle: RefCell::default(),
            budget: Cell::new(None),
            stopping: Cell::new(false),
            stop_notify: Notify::new(),
            drained: Notify::new(),
            interval: Cell::new(0),
        });
        let ticker = tokio::task::spawn_local(w.clone().tick(tx.clone()));
        let watcher = tokio::task::spawn_local(w.clone().watch_stop());
        sleep_until(start).await;
        match load {
            WorkerLoad::Open { schedule, shard, max_in_flight } => {
                w.clone().open_loop(&schedule, shard, max_in_flight).await
            }
            WorkerLoad::Closed { users, requests, until, think } => {
                w.budget.set(requests);
                let users: Vec<JoinHandle<()>> =
                    (0..users).map(|_| tokio::task::spawn_local(w.clone().user_loop(until, think))).collect();
                for u in users {
                    let _ = u.await;
                }
            }
        }
        while w.in_flight.get() > 0 {
            w.drained.notified().await;
        }
        ticker.abort();
        watcher.abort();
        let end = Instant::now();
        let stats = Box::new(std::mem::take(&mut *w.stats.borrow_mut()));
        let _ = tx.send(Msg::Interval { worker: w.id, index: w.interval.get(), stats, in_flight: 0 });
        let _ = tx.send(Msg::Done { worker: w.id, end });
    });
}

impl Worker {
    /// Ship a snapshot at every whole second of the run.
    async fn tick(self: Rc<Self>, tx: Sender<Msg>) {
        loop {
            let k = self.interval.get();
            sleep_until(self.start + Duration::from_secs(u64::from(k) + 1)).await;
            let stats = Box::new(std::mem::take(&mut *self.stats.borrow_mut()));
            self.interval.set(k + 1);
            if tx.send(Msg::Interval { worker: self.id, index: k, stats, in_flight: self.in_flight.get() }).is_err() {
                return;
            }
        }
    }

    /// Turn the process-wide stop flag (SIGINT) into a local wake-up.
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
    async fn open_loop(self: Rc<Self>, schedule: &Schedule, shard: Shard, max_in_flight: u64) {
        let mut timer = PreciseTimer::new();
        let mut late_in_a_row = 0u32;
        for n in shard.arrivals(schedule.total_arrivals()) {
            let Some(offset) = schedule.due(n) else { break };
            let due = self.start + offset;
            if due > Instant::now() {
                late_in_a_row = 0;
                tokio::select! {
                    _ = timer.sleep_until(due) => {}
                    _ = self.stop_notify.notified() => {}
                }
            } else {
                // Behind schedule: send at once (the lateness shows as latency),
                // but let responses be read now and then.
                late_in_a_row += 1;
                if late_in_a_row.is_multiple_of(16) {
                    tokio::task::yield_now().await;
                }
            }
            if self.stopping.get() {
                break;
            }
            if self.in_flight.get() >= max_in_flight {
                self.stats.borrow_mut().dropped += 1;
                continue;
            }
            self.begin();
            let me = self.clone();
            tokio::task::spawn_local(async move {
                let conn = me.idle.borrow_mut().pop();
                if let (Some(conn), _) = me.perform(conn, due, Instant::now()).await {
                    me.idle.borrow_mut().push(conn);
                }
                me.end();
            });
        }
    }

    /// Closed model: one user looping request -> response on its connection.
    async fn user_loop(self: Rc<Self>, until: Option<Instant>, think: Duration) {
        let mut conn = None;
        // The end of one request is the start of the next: one clock read saved per loop.
        let mut now = Instant::now();
        loop {
            if self.stopping.get() || until.is_some_and(|t| now >= t) {
                return;
            }
            if let Some(left) = self.budget.get() {
                if left == 0 {
                    return;
                }
                self.budget.set(Some(left - 1));
            }
            self.begin();
            let done;
            (conn, done) = self.perform(conn, now, now).await;
            self.end();
            now = done;
            if !think.is_zero() {
                tokio::time::sleep(think).await;
                now = Instant::now();
            }
        }
    }

    fn begin(&self) {
        self.in_flight.set(self.in_flight.get() + 1);
        self.stats.borrow_mut().sent += 1;
    }

    fn end(&self) {
        let left = self.in_flight.get() - 1;
        self.in_flight.set(left);
        if left == 0 {
            self.drained.notify_one();
        }
    }

    /// One request, due at `due` and started at `sent`, on `conn` or a new
    /// connection. Records everything; returns the connection when it can be
    /// reused, and when the request ended.
    async fn perform(&self, mut conn: Option<Conn>, due: Instant, sent: Instant) -> (Option<Conn>, Instant) {
        let shared = &*self.shared;
        let deadline = sent + shared.timeout;
        let mut retried = false;
        let outcome = loop {
            let mut c = match conn.take() {
                Some(c) => c,
                None => match timeout_at(deadline, self.connect()).await {
                    Ok(Ok(c)) => c,
                    Ok(Err(kind)) => break Err(kind),
                    Err(_) => break Err(FailureKind::Timeout),
                },
            };
            self.stats.borrow_mut().bytes_out += shared.request.bytes().len() as u64;
            match timeout_at(deadline, c.exchange(&shared.request)).await {
                Ok(Ok(resp)) => break Ok((resp, c)),
                // A keep-alive connection the server closed while it was idle:
                // retry once on a new one, as browsers and HTTP clients do.
                Ok(Err(e)) if e.nothing_received && c.reused && !retried => retried = true,
                Ok(Err(e)) => break Err(e.kind),
                Err(_) => break Err(FailureKind::Timeout),
            }
        };
        let done = Instant::now();
        let mut st = self.stats.borrow_mut();
        match outcome {
            Ok((resp, c)) => {
                st.completed += 1;
                st.bytes_in += resp.bytes_in;
                st.latency.record(done - due);
                st.service.record(done - sent);
                st.ttfb.record(resp.first_byte - resp.sent_at);
                if let Some(kind) = FailureKind::of_status(resp.status) {
                    st.failures.add(kind);
                }
                (c.keep_alive.then_some(c), done)
            }
            Err(kind) => {
                st.failures.add(kind);
                (None, done)
            }
        }
    }

    /// Open a connection (and TLS session), recording how long each took.
    async fn connect(&self) -> Result<Conn, FailureKind> {
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
        {
            let mut st = self.stats.borrow_mut();
            st.connects += 1;
            st.connect.record(t1 - t0);
        }
        let stream = match &shared.tls {
            None => Stream::Tcp(tcp),
            Some((connector, name)) => {
                let handshake = connector.connect(name.clone(), tcp);
                match timeout(remaining(deadline).max(Duration::from_millis(1)), handshake).await {
                    Ok(Ok(tls)) => {
                        self.stats.borrow_mut().tls.record(Instant::now() - t1);
                        Stream::Tls(Box::new(tls))
                    }
                    Ok(Err(_)) => return Err(FailureKind::Tls),
                    Err(_) => return Err(FailureKind::ConnectTimeout),
                }
            }
        };
        Ok(Conn::new(stream))
    }
}
