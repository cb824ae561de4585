//! Real HTTP/1.1 servers on 127.0.0.1 with controlled behaviour, for
//! perfops' integration tests (which talk to real sockets, never to mocks).
//!
//! This crate owns the [`Server`] handle and its constructors: each one binds
//! an ephemeral port on 127.0.0.1, accepts on its own thread, serves every
//! connection on a thread of its own (plain std threads, no async runtime),
//! counts connections and requests, records when each request head arrived,
//! and stops when the handle is dropped. The behaviours range from a
//! precisely delayed keep-alive `200` to resets, silence and garbage; one
//! constructor serves over TLS with a self-signed certificate. Where a test
//! needs a server faster than the generator, [`nginx`] starts Debian's; where
//! it needs the shape of a real server (pre-forked workers, a thread pool
//! with Puma's metrics, a response in two packets), [`python`] starts one;
//! where it needs a real Prometheus to scrape and query, [`prometheus`] starts
//! Debian's; where it needs a WebSocket server, [`ws`] runs one
//! (tokio-tungstenite) and [`python::websocket`] Debian's python3-websockets;
//! where it needs gRPC, [`grpc`] starts python3-grpcio's and [`grpc_go`]
//! grpc-go's, with server reflection; where it needs the metrics receivers a
//! push output sends to, [`receivers`] starts a current Prometheus and an
//! OpenTelemetry Collector, and [`refusing`], [`stalling`] and
//! [`refused_addr`] stand in for one that refuses, hangs or is down.

mod client;
pub mod grpc;
pub mod grpc_go;
mod http;
pub mod llm;
mod nginx;
pub mod prometheus;
pub mod python;
pub mod receivers;
pub mod schema;
pub mod scripted;
mod serve;
mod tls;
pub mod ws;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::ServerConfig;

pub use crate::nginx::{
    Guard, H2Config, Nginx, access_log, nginx, nginx_cookies, nginx_guarding, nginx_h2, nginx_h2_streaming,
    nginx_holding, nginx_proxy_logging,
};
use crate::serve::{Behaviour, POLL};

/// How long a blocked write waits for a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// State shared by a server's accept thread and its connection threads.
pub(crate) struct Shared {
    /// When the server started listening (origin of `freeze_once`'s window).
    pub(crate) start: Instant,
    stop: AtomicBool,
    requests: AtomicU64,
    connections: AtomicU64,
    /// Connections accepted and not yet closed by either side.
    open: AtomicU64,
    arrivals: Mutex<Vec<Instant>>,
    /// From when `restart_counter`'s counter reads 1 (never until [`Server::restart_at`]).
    pub(crate) restarted: Mutex<Option<Instant>>,
    /// Whether request heads and body sizes are kept ([`refusing`], [`stalling`]): only the
    /// servers that stand in for a metrics receiver do, so that the load tests' servers keep
    /// no per-request memory.
    record: bool,
    /// The request heads read so far, as text, when `record` is set.
    heads: Mutex<Vec<String>>,
    /// Body bytes of the requests read so far, when `record` is set.
    body_bytes: AtomicU64,
}

impl Shared {
    /// True once the server handle was dropped.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Counts a complete request head that arrived at `at`, announcing a body of `body_bytes`.
    pub(crate) fn record_request(&self, at: Instant, head: &[u8], body_bytes: usize) {
        if self.record {
            self.heads.lock().unwrap_or_else(PoisonError::into_inner).push(String::from_utf8_lossy(head).into_owned());
            self.body_bytes.fetch_add(body_bytes as u64, Ordering::Release);
        }
        self.arrivals.lock().unwrap_or_else(PoisonError::into_inner).push(at);
        self.requests.fetch_add(1, Ordering::Release);
    }
}

/// A running test server on 127.0.0.1; dropping it stops the server.
///
/// Drop closes the listening socket before it returns; connection threads
/// notice within about 100 ms and close their sockets.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    cert_pem: Option<String>,
}

impl Server {
    /// The address the server listens on (127.0.0.1 and an ephemeral port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`, or `https://…` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.cert_pem.is_some() { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }

    /// Complete request heads read so far, on all connections (including
    /// requests that were never answered).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Acquire)
    }

    /// The heads of the requests read so far (request line and header fields, as text, in the
    /// order they were read), for the servers that keep them ([`refusing`], [`stalling`]);
    /// empty for the others.
    pub fn request_heads(&self) -> Vec<String> {
        self.shared.heads.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The body bytes (by `Content-Length`) of the requests read so far, for the servers that
    /// keep them ([`refusing`], [`stalling`]); 0 for the others.
    pub fn body_bytes(&self) -> u64 {
        self.shared.body_bytes.load(Ordering::Acquire)
    }

    /// Makes `restart_counter`'s counter read 1 from `at` on.
    pub fn restart_at(&self, at: Instant) {
        *self.shared.restarted.lock().unwrap_or_else(PoisonError::into_inner) = Some(at);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Acquire)
    }

    /// Connections open now: accepted and not yet closed (a connection
    /// thread sees the client's close within about 100 ms).
    pub fn open_connections(&self) -> u64 {
        self.shared.open.load(Ordering::Acquire)
    }

    /// When each request head was fully read, in the order the server saw
    /// them (pipelined heads read together share one instant), for
    /// computing the arrival rate the server observed.
    pub fn arrivals(&self) -> Vec<Instant> {
        let mut arrivals = self.shared.arrivals.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // Connection threads push concurrently; present them in time order.
        arrivals.sort_unstable();
        arrivals
    }

    /// PEM of the self-signed certificate of a TLS server (`None` for plain
    /// HTTP servers). It is valid for `localhost` and `127.0.0.1`.
    pub fn cert_pem(&self) -> Option<&str> {
        self.cert_pem.as_deref()
    }

    /// Binds 127.0.0.1:0 and starts the accept thread.
    fn start(behaviour: Behaviour, tls: Option<tls::Identity>) -> Self {
        Self::start_with(behaviour, tls, false)
    }

    /// [`Server::start`], keeping request heads and body sizes when `record`.
    fn start_with(behaviour: Behaviour, tls: Option<tls::Identity>, record: bool) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("listener address");
        let shared = Arc::new(Shared {
            start: Instant::now(),
            stop: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            open: AtomicU64::new(0),
            arrivals: Mutex::new(Vec::new()),
            restarted: Mutex::new(None),
            record,
            heads: Mutex::new(Vec::new()),
            body_bytes: AtomicU64::new(0),
        });
        let (cert_pem, config) = match tls {
            Some(identity) => (Some(identity.cert_pem), Some(identity.config)),
            None => (None, None),
        };
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("testkit-accept-{}", addr.port()))
                .spawn(move || accept_loop(&listener, behaviour, config, &shared))
                .expect("spawn accept thread")
        };
        Self { addr, shared, accept: Some(accept), cert_pem }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("url", &self.url())
            .field("connections", &self.connections())
            .field("requests", &self.requests())
            .finish_non_exhaustive()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept; it sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Accepts until the stop flag is set; one thread per connection.
fn accept_loop(listener: &TcpListener, behaviour: Behaviour, tls: Option<Arc<ServerConfig>>, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping() {
            return;
        }
        let Ok(stream) = stream else {
            // EMFILE and the like: back off instead of spinning.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let number = shared.connections.fetch_add(1, Ordering::Release);
        let behaviour = match behaviour {
            Behaviour::StallSome { every, stall } if number.is_multiple_of(every.max(1)) => Behaviour::Delay(stall),
            Behaviour::StallSome { .. } => Behaviour::Delay(Duration::ZERO),
            other => other,
        };
        let shared = Arc::clone(shared);
        let tls = tls.clone();
        shared.open.fetch_add(1, Ordering::AcqRel);
        let spawned = std::thread::Builder::new().name("testkit-conn".to_string()).spawn({
            let shared = Arc::clone(&shared);
            move || {
                connection(stream, behaviour, tls, &shared);
                shared.open.fetch_sub(1, Ordering::AcqRel);
            }
        });
        if spawned.is_err() {
            shared.open.fetch_sub(1, Ordering::AcqRel);
        }
        // If no thread can be had, the stream is dropped: the client sees a
        // closed connection, which is all a test server can do.
    }
}

/// Prepares an accepted socket and serves it.
fn connection(stream: TcpStream, behaviour: Behaviour, tls: Option<Arc<ServerConfig>>, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    if matches!(behaviour, Behaviour::Reset) {
        // Closing with a zero linger time sends RST instead of FIN.
        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    }
    match tls {
        Some(config) => {
            if let Some(stream) = tls::accept(&config, stream) {
                serve::serve(stream, behaviour, shared);
            }
        }
        None => serve::serve(stream, behaviour, shared),
    }
}

/// Keep-alive HTTP/1.1 server that answers every request `200 OK` with body
/// `ok\n` once `delay` has passed since the request head was fully read.
///
/// The delay is precise: the thread sleeps until 1 ms before the deadline,
/// then busy-spins until it, so a 10 ms delay lasts 10.0–10.1 ms.
/// Pipelined requests are answered in order; each one's delay counts from
/// when its own head arrived.
pub fn fixed_delay(delay: Duration) -> Server {
    Server::start(Behaviour::Delay(delay), None)
}

/// Keep-alive server on which every `every`-th connection (the first, then
/// the `every+1`-th, ...) answers each request `stall` late and the others at
/// once: the latency signature of Nagle's algorithm meeting delayed ACK on
/// the connections whose writes were split.
pub fn stall_some_connections(every: u64, stall: Duration) -> Server {
    Server::start(Behaviour::StallSome { every, stall }, None)
}

/// Like [`fixed_delay`], but once, `freeze_after` after the server started,
/// the whole server freezes for `freeze_for`, like a stop-the-world GC pause.
///
/// The server's clock stands still during the window
/// `[start + freeze_after, start + freeze_after + freeze_for)`: a request
/// arriving inside it is answered `delay` after the window ends, and one
/// whose delay was running when the window opened is answered `freeze_for`
/// later than it would have been. Requests are still read (and their arrival
/// recorded) during the window.
pub fn freeze_once(delay: Duration, freeze_after: Duration, freeze_for: Duration) -> Server {
    Server::start(Behaviour::Freeze { delay, after: freeze_after, length: freeze_for }, None)
}

/// Keep-alive server that answers every request, whatever its path, with a Prometheus
/// exposition of one counter, `test_restarts_total`: 0 until the instant given to
/// [`Server::restart_at`], then 1. A pod's restart counter as the cluster's Prometheus sees
/// it, stepping up mid-run (#15): Prometheus scrapes it at `/metrics` while the load gets the
/// same `200`. The test picks the instant once Prometheus is up, so that a slow start of
/// Prometheus never eats into the run.
pub fn restart_counter() -> Server {
    Server::start(Behaviour::Restarts, None)
}

/// Reads a request, writes `HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n`
/// and 10 of the promised 1000 body bytes, waits 10 ms, then closes with
/// `SO_LINGER=0` so that the client sees a TCP RST mid-response.
pub fn reset_mid_response() -> Server {
    Server::start(Behaviour::Reset, None)
}

/// Accepts and reads requests (counting them) but never answers; each
/// connection stays open until the client closes it or the server is dropped.
pub fn never_answers() -> Server {
    Server::start(Behaviour::Silent, None)
}

/// Answers the first request on each connection with bytes that are not HTTP,
/// `SSH-2.0-OpenSSH_9.2\r\ngarbage\r\n\r\n`, then closes the connection.
pub fn garbage() -> Server {
    Server::start(Behaviour::Garbage, None)
}

/// Keep-alive server answering `200` with `Transfer-Encoding: chunked`: body
/// `hello world\n` in the chunks `hello`, ` world` (carrying a chunk
/// extension) and `\n`, then the last chunk with the trailer field
/// `X-Checksum: 42` (announced by a `Trailer` header).
pub fn chunked() -> Server {
    Server::start(Behaviour::Chunked, None)
}

/// Answers the first request on each connection with `200`,
/// `Connection: close` and no `Content-Length`: the body
/// `close-delimited body\n` ends when the server closes the connection.
pub fn close_delimited() -> Server {
    Server::start(Behaviour::CloseDelimited, None)
}

/// Keep-alive server answering every request with status `code` (e.g. 404,
/// 503) and body `status\n`.
pub fn status(code: u16) -> Server {
    Server::start(Behaviour::Status { code, retry_after: None }, None)
}

/// A metrics receiver that refuses: a keep-alive server answering every request (a push's
/// `POST`) with status `code` (400, 429, 500, 503, ...) and body `status\n`, with a
/// `Retry-After: SECONDS` field when `retry_after` is given. It keeps what it received:
/// [`Server::requests`], [`Server::request_heads`] (to check what a client sent: its
/// `Content-Type`, `Content-Encoding`, version headers) and [`Server::body_bytes`].
pub fn refusing(code: u16, retry_after: Option<u32>) -> Server {
    Server::start_with(Behaviour::Status { code, retry_after }, None, true)
}

/// A metrics receiver that stalls: reads each request whole (head and body) and never answers,
/// keeping the connection open, like [`never_answers`]; it keeps the request heads and body
/// sizes like [`refusing`]. For a receiver that is down, see [`refused_addr`].
pub fn stalling() -> Server {
    Server::start_with(Behaviour::Silent, None, true)
}

/// Answers the first request on each connection with a chunked `200` whose
/// body never ends: 4 KiB chunks as fast as the client reads them, until it
/// closes the connection or the server is dropped (#12).
pub fn endless_chunked() -> Server {
    Server::start(Behaviour::EndlessChunked, None)
}

/// Answers the first request on each connection with `200` and
/// `Content-Length: 1000000`, then sends the body one byte per `every`: a
/// response that is always arriving and never done (#12).
pub fn drip_feed(every: Duration) -> Server {
    Server::start(Behaviour::Drip { every }, None)
}

/// Like [`fixed_delay`], over TLS (rustls with the ring provider, ALPN
/// `http/1.1`) with a self-signed certificate for `localhost` and
/// `127.0.0.1` generated at start; [`Server::cert_pem`] gives it to clients
/// and [`Server::url`] is `https://127.0.0.1:PORT/`.
pub fn tls_fixed_delay(delay: Duration) -> Server {
    Server::start(Behaviour::Delay(delay), Some(tls::self_signed()))
}

/// An address on 127.0.0.1 where nothing listens: an ephemeral port that was
/// bound and released again, so connecting to it is refused (unless some
/// other process happens to take the port in between).
pub fn refused_addr() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("listener address")
}
