//! perfops' built-in target server: what the examples, the README's first command and the tests
//! run against, so that a new user sees a thread-pool server break with nothing else installed.
//!
//! This module owns the public surface: the [`DemoConfig`] (which [`Model`], where to listen, the
//! pool's shape, the simulated I/O wait and CPU work), [`serve`] (blocking, stops on a flag) and
//! [`spawn`] (the same on a background thread, for callers that run load against it in-process).
//! It does not parse flags (the binary owns them) and never prints.
//!
//! Routes, the same in both models (see `app.rs`):
//!
//! ```text
//! POST /auth     {"user":"x"} (body optional)  -> 200 {"token":"<header>.<payload>.<signature>"}
//! GET  /orders   Authorization: Bearer <token> -> 200 25 orders (~2 KB) after io_wait + cpu_work
//!                missing or forged token       -> 401 {"error":...}
//! GET  /me           (token) -> 200 {"user":...}                       after io_wait + cpu_work
//! GET  /products     (token) -> 200 {"count":20,"products":[...]}      after io_wait + cpu_work
//! POST /orders       (token) {"sku":"SKU-00042","qty":3}
//!                            -> 201 {"id":100001,...}                  after io_wait + cpu_work
//!                            -> 422 {"error":"field `qty` must be a JSON integer, found \"3\""} at once
//! GET  /orders/{id}  (token) -> 200 {"order":{...}} (an order POSTed)  after io_wait + cpu_work
//!                            -> 404 an id never created (or forgotten: the last 150 000 are kept)
//!                every shop route without a valid token -> 401, as /orders
//! GET  /health   -> 200 ok      (served by the same pool: slow when the pool is)
//! GET  /metrics  -> Prometheus text 0.0.4 (also served by the pool)
//! GET  /         -> 200 "perfops demo target (model threads)"
//! anything else  -> 404; malformed request -> 400 and close
//! ```
//!
//! The two models:
//!
//! ```text
//! threads: listen(backlog) -> accept only while a handler thread is free -> ready queue -> W x T
//!          blocking threads, one request per turn; idle keep-alive connections wait in epoll.
//!          Capacity ~ W*T / (io_wait + cpu_work); beyond it the queue grows, then the kernel's
//!          accept queue fills and new connections stall (SYNs dropped, /health slow).
//! async:   tokio, one task per connection, io_wait is a timer: capacity is bounded by CPU.
//! ```

mod app;
mod async_model;
mod control;
mod cpu;
mod http;
mod listener;
mod metrics;
mod poller;
mod threads;
mod token;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often every blocking loop of the server looks at the stop flag.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(100);
/// How long a keep-alive connection may sit idle between requests before the server closes it.
pub(crate) const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(5);
/// How long writing one response may block on a client that does not read.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the demo server schedules requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Model {
    /// A fixed pool of blocking threads (`workers` x `threads`) behind a listen backlog, like Puma
    /// or a servlet container: the I/O wait occupies a thread.
    #[default]
    Threads,
    /// A tokio runtime with one task per connection: the I/O wait is a timer and occupies nothing.
    Async,
}

impl Model {
    /// The model's name as flags and targets spell it (`threads`, `async`).
    pub fn name(self) -> &'static str {
        match self {
            Model::Threads => "threads",
            Model::Async => "async",
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Model {
    type Err = DemoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "threads" => Ok(Model::Threads),
            "async" => Ok(Model::Async),
            other => Err(DemoError::UnknownModel(other.to_owned())),
        }
    }
}

/// Everything the demo server needs to know; [`Default`] is the README's `perfops demo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoConfig {
    /// Which scheduling model serves the requests.
    pub model: Model,
    /// Where to listen; port 0 picks an ephemeral port (reported to `on_ready`).
    pub listen: SocketAddr,
    /// Worker "processes" (threads model): each has its own accept loop, ready queue and pool.
    /// Ignored by the async model.
    pub workers: usize,
    /// Handler threads per worker (threads model), or tokio worker threads (async model; 0 means
    /// one per core).
    pub threads: usize,
    /// The listen(2) backlog: connections the kernel completes before anyone accepts them.
    pub backlog: u32,
    /// Simulated I/O wait (a database call) per `GET /orders`.
    pub io_wait: Duration,
    /// Real CPU work (hashing, calibrated at start-up to take this long) per `GET /orders`.
    pub cpu_work: Duration,
    /// Also serve `/metrics` on this address, outside the pool (a control port, as Puma's).
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            model: Model::Threads,
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            workers: 2,
            threads: 5,
            backlog: 16,
            io_wait: Duration::from_millis(20),
            cpu_work: Duration::from_micros(500),
            metrics_listen: None,
        }
    }
}

impl DemoConfig {
    /// The largest number of requests handled at once in the threads model (`workers * threads`).
    pub fn pool_size(&self) -> usize {
        self.workers.saturating_mul(self.threads)
    }

    /// The async model's runtime worker threads: `threads`, or one per core when it is 0.
    pub(crate) fn worker_threads(&self) -> usize {
        if self.threads > 0 { self.threads } else { std::thread::available_parallelism().map_or(1, |n| n.get()) }
    }

    fn validate(&self) -> Result<(), DemoError> {
        if self.model == Model::Threads && (self.workers == 0 || self.threads == 0) {
            return Err(DemoError::EmptyPool { workers: self.workers, threads: self.threads });
        }
        Ok(())
    }
}

/// Why the demo server could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The model name is neither `threads` nor `async`.
    #[error("unknown demo model {0:?} (expected \"threads\" or \"async\")")]
    UnknownModel(String),
    /// The threads model needs at least one worker and one thread.
    #[error("the threads model needs workers >= 1 and threads >= 1 (got {workers} x {threads})")]
    EmptyPool {
        /// Workers asked for.
        workers: usize,
        /// Threads per worker asked for.
        threads: usize,
    },
    /// The backlog is larger than the kernel accepts.
    #[error("listen backlog {0} is out of range (1..=SOMAXCONN)")]
    Backlog(u32),
    /// Creating, binding or listening on the socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the kernel said.
        source: io::Error,
    },
    /// Starting a thread, an epoll instance or the tokio runtime failed.
    #[error("cannot start the demo server: {0}")]
    Start(io::Error),
    /// A server thread panicked.
    #[error("a demo server thread panicked")]
    Panicked,
}

/// Binds, then serves until `stop` is set (looked at every 100 ms); calls `on_ready(bound_addr,
/// metrics_addr)` once listening, so that port 0 can be used. Returns after every server thread
/// has finished.
pub fn serve(
    config: &DemoConfig,
    stop: Arc<AtomicBool>,
    on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
) -> Result<(), DemoError> {
    config.validate()?;
    let listener = listener::bind(config.listen, config.backlog)?;
    let addr = listener.local_addr().map_err(|source| DemoError::Bind { addr: config.listen, source })?;
    let app = Arc::new(app::App::new(config));
    let control = match config.metrics_listen {
        Some(at) => {
            let l = std::net::TcpListener::bind(at).map_err(|source| DemoError::Bind { addr: at, source })?;
            let bound = l.local_addr().map_err(|source| DemoError::Bind { addr: at, source })?;
            let (app, stop) = (Arc::clone(&app), Arc::clone(&stop));
            let thread = std::thread::Builder::new()
                .name("demo-control".into())
                .spawn(move || control::run(l, app, stop))
                .map_err(DemoError::Start)?;
            Some((bound, thread))
        }
        None => None,
    };
    let metrics_addr = control.as_ref().map(|c| c.0);
    let served = match config.model {
        Model::Threads => threads::run(config, listener, app, &stop, || on_ready(addr, metrics_addr)),
        Model::Async => async_model::run(config, listener, app, &stop, || on_ready(addr, metrics_addr)),
    };
    stop.store(true, Ordering::Relaxed);
    if let Some((_, thread)) = control {
        thread.join().map_err(|_| DemoError::Panicked)?;
    }
    served
}

/// A demo server running on a background thread; stops when [`RunningDemo::stop`] is called or
/// when dropped.
#[derive(Debug)]
pub struct RunningDemo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), DemoError>>>,
}

impl RunningDemo {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits for its threads (at most a few hundred milliseconds).
    pub fn stop(mut self) -> Result<(), DemoError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), DemoError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(thread) => thread.join().map_err(|_| DemoError::Panicked)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningDemo {
    fn drop(&mut self) {
        // Subtleness: the error, if any, was already observable through `stop()`; a drop has
        // nowhere to report it.
        let _ = self.shutdown();
    }
}

/// Starts [`serve`] on a background thread and returns once it listens.
///
/// ```
/// use perfops_demo::{DemoConfig, Model};
///
/// let config = DemoConfig { model: Model::Async, listen: "127.0.0.1:0".parse().unwrap(), ..DemoConfig::default() };
/// let demo = perfops_demo::spawn(config)?;
/// let base_url = format!("http://{}/", demo.addr()); // what the load is pointed at
/// # assert!(base_url.starts_with("http://127.0.0.1:"));
/// demo.stop()?;
/// # Ok::<(), perfops_demo::DemoError>(())
/// ```
pub fn spawn(config: DemoConfig) -> Result<RunningDemo, DemoError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let thread_stop = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name(format!("demo-{}", config.model))
        .spawn(move || {
            serve(&config, thread_stop, |addr, _| {
                // The receiver waits for exactly this message; it cannot be gone yet.
                let _ = ready_tx.send(addr);
            })
        })
        .map_err(DemoError::Start)?;
    match ready_rx.recv() {
        Ok(addr) => Ok(RunningDemo { addr, stop, thread: Some(thread) }),
        // serve returned before listening: its error is the answer.
        Err(_) => match thread.join() {
            Ok(Ok(())) => Err(DemoError::Start(io::Error::other("the demo server stopped before listening"))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(DemoError::Panicked),
        },
    }
}
