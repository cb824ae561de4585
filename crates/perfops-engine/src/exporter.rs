//! `--metrics-listen`: a tiny HTTP/1.1 server on a thread of its own that
//! answers `GET /metrics` with the latest page the collector published.
//!
//! It owns the socket and the protocol, nothing else: the page is made once
//! per second by the caller (from the merged interval, see
//! `perfops_report::exposition`) and handed over with [`Exporter::publish`],
//! which swaps one pointer under a lock no worker ever takes. A scrape reads
//! that pointer and writes the bytes; workers never know it happened.
//!
//! One request per connection (`Connection: close`). Connections are served
//! together by one thread that polls them all (non-blocking sockets), each
//! with a deadline for the whole exchange ([`REQUEST_DEADLINE`], request read
//! and answer written), and at most [`MAX_CONNECTIONS`] held (#31). Before,
//! they were answered in turn with a 2 s timeout per read: a client sending
//! a byte a second renewed it forever and every scraper waited behind it.
//! Now a slow or silent client is dropped at its deadline and delays nobody
//! meanwhile; a flood of them beyond the bound closes the oldest first, so a
//! scraper that has just connected is the last to go. No thread per
//! connection: a flood costs a few KiB each, not a stack.
//!
//! On a loopback address it answers loopback names only (`Host:
//! 127.0.0.1:9464`, `localhost`, `[::1]`; none, HTTP/1.0): a web page whose
//! name its owner rebinds to 127.0.0.1 (DNS rebinding) read the run's figures
//! from any browser on the machine (attacker review), as the live page refuses.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};

/// The content type of the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A request head larger than this is refused: a scrape is one short line.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request and read the answer, in
/// all: a scrape on loopback or a cluster's network takes milliseconds.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections held at once; one more closes the oldest. A Prometheus or
/// two scrape one connection each every few seconds.
pub const MAX_CONNECTIONS: usize = 64;
/// How often the loop looks at the stop flag and the deadlines.
const STOP_POLL_MS: u16 = 100;

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExporterError {
    /// The address does not resolve.
    #[error("--metrics-listen {0}: not an address to listen on ({1})")]
    Resolve(String, io::Error),
    /// Resolved to nothing.
    #[error("--metrics-listen {0}: resolves to no address")]
    NoAddress(String),
    /// Taken, not ours, or not on this machine.
    #[error("--metrics-listen {0}: cannot listen ({1})")]
    Bind(String, io::Error),
    /// The server thread could not be started.
    #[error("cannot start the metrics server thread: {0}")]
    Thread(io::Error),
}

/// The running endpoint. Dropping it stops the server.
#[derive(Debug)]
pub struct Exporter {
    addr: SocketAddr,
    page: Arc<Mutex<Arc<str>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Bind `addr` (`host:port`; port 0 picks a free one) and serve `page`
    /// until [`Exporter::publish`] replaces it. Binding happens here, so a
    /// busy or foreign address fails before any load starts.
    pub fn start(addr: &str, page: String) -> Result<Exporter, ExporterError> {
        let candidates: Vec<SocketAddr> =
            addr.to_socket_addrs().map_err(|e| ExporterError::Resolve(addr.to_string(), e))?.collect();
        let first = *candidates.first().ok_or_else(|| ExporterError::NoAddress(addr.to_string()))?;
        let listener = TcpListener::bind(first).map_err(|e| ExporterError::Bind(addr.to_string(), e))?;
        let local = listener.local_addr().map_err(|e| ExporterError::Bind(addr.to_string(), e))?;
        let page = Arc::new(Mutex::new(Arc::<str>::from(page)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (page, stop) = (page.clone(), stop.clone());
            std::thread::Builder::new()
                .name("perfops-metrics".into())
                .spawn(move || serve(&listener, &page, &stop, local.ip().is_loopback()))
                .map_err(ExporterError::Thread)?
        };
        Ok(Exporter { addr: local, page, stop, thread: Some(thread) })
    }

    /// Where it listens (with the port picked when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve `text` from now on.
    pub fn publish(&self, text: String) {
        *self.page.lock().unwrap_or_else(PoisonError::into_inner) = Arc::from(text);
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, page: &Mutex<Arc<str>>, stop: &AtomicBool, loopback: bool) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    // Oldest first: the front is the first to go when the bound is reached.
    let mut conns: VecDeque<Conn> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        conns.retain(|c| now.duration_since(c.since) < REQUEST_DEADLINE);
        // Wait for a connection or a client, but never longer than it takes
        // to see the stop flag or a deadline pass.
        let ready: Vec<bool> = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
            for c in &conns {
                let wants = if c.out.is_empty() { PollFlags::POLLIN } else { PollFlags::POLLOUT };
                fds.push(PollFd::new(c.stream.as_fd(), wants));
            }
            match poll(&mut fds, STOP_POLL_MS) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => {}
                Err(_) => return,
            }
            fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect()
        };
        let mut i = 0;
        conns.retain_mut(|c| {
            i += 1;
            !ready[i] || c.step(loopback, || page.lock().unwrap_or_else(PoisonError::into_inner).clone())
        });
        if ready[0] {
            accept(listener, &mut conns);
        }
    }
}

/// Take every waiting connection; beyond [`MAX_CONNECTIONS`], close the oldest.
fn accept(listener: &TcpListener, conns: &mut VecDeque<Conn>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= MAX_CONNECTIONS {
                    conns.pop_front();
                }
                conns.push_back(Conn { stream, since: Instant::now(), head: Vec::new(), out: Vec::new(), sent: 0 });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors, or the peer gone before it was taken: try
            // again at the next poll, after a pause rather than a spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(u64::from(STOP_POLL_MS) / 10));
                return;
            }
        }
    }
}

/// One client: its request as read so far, then the answer as sent so far.
struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The whole answer, once the request is read; empty until then.
    out: Vec<u8>,
    sent: usize,
}

impl Conn {
    /// Move the exchange on as far as the socket allows without waiting;
    /// `false`: it is over (answered, gone or broken), drop it.
    fn step(&mut self, loopback: bool, page: impl FnOnce() -> Arc<str>) -> bool {
        if self.out.is_empty() {
            let mut buf = [0u8; 1024];
            match self.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.head.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => return true,
                Err(_) => return false,
            }
            // The bound holds wherever the head ends: one read may bring a
            // whole head past it, its end included.
            let end = self.head.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
            if end.unwrap_or(self.head.len()) > MAX_HEAD_BYTES {
                self.out = respond("431 Request Header Fields Too Large", "text/plain", b"too large\n", true);
            } else if end.is_some() {
                self.out = answer(&self.head, loopback, &page());
            } else {
                return true;
            }
        }
        loop {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.sent += n;
                    if self.sent == self.out.len() {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

/// The answer to a complete request head; `loopback`: the endpoint listens
/// on loopback, and answers loopback names only.
fn answer(head: &[u8], loopback: bool, page: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let host = text.split("\r\n").skip(1).find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("host").then(|| value.trim())
    });
    if loopback && host.is_some_and(|h| !loopback_host(h)) {
        return respond(
            "403 Forbidden",
            "text/plain",
            b"this endpoint, on loopback, answers loopback names only\n",
            true,
        );
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => respond("200 OK", CONTENT_TYPE, page.as_bytes(), method == "GET"),
        (_, "/metrics") => respond("405 Method Not Allowed", "text/plain", b"GET /metrics\n", true),
        _ => respond("404 Not Found", "text/plain", b"perfops serves GET /metrics\n", true),
    }
}

/// Whether `host` (a Host header's value) names this machine's loopback:
/// `localhost` or a loopback address, with or without a port.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn respond(status: &str, content_type: &str, body: &[u8], with_body: bool) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    if with_body {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_the_latest_page_and_nothing_else() {
        let e = Exporter::start("127.0.0.1:0", "a 1\n".into()).expect("bind");
        let addr = e.local_addr();
        let first = get(addr, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains(CONTENT_TYPE) && first.ends_with("\r\n\r\na 1\n"), "{first}");
        e.publish("a 2\n".into());
        assert!(get(addr, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").ends_with("\r\n\r\na 2\n"));
        let head = get(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.contains("Content-Length: 4\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        assert!(get(addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        // DNS rebinding: a name of another's that resolves to 127.0.0.1 is refused.
        let rebound = get(addr, "GET /metrics HTTP/1.1\r\nHost: evil.example:9464\r\n\r\n");
        assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
        for host in ["localhost:9464", "[::1]:9464", "127.0.0.1"] {
            let ok = get(addr, &format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n"));
            assert!(ok.starts_with("HTTP/1.1 200"), "{host}: {ok}");
        }
        drop(e);
        // Stopped with its owner: the port is free again.
        assert!(TcpStream::connect(addr).is_err(), "still listening after drop");
    }

    /// A scrape with its own deadline: the answer, or a panic saying how long it waited.
    fn scrape_within(addr: SocketAddr, limit: Duration) -> String {
        let started = Instant::now();
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(limit)).expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap_or_else(|e| panic!("no answer within {limit:?} ({e}): {out:?}"));
        assert!(started.elapsed() < limit, "answered after {:?}", started.elapsed());
        out
    }

    /// #31: a client that sends a byte a second, and a crowd of silent ones
    /// beyond the bound, delay no scraper; the slow one is dropped at its
    /// deadline. Before: answered in turn with a timeout per read, the slow
    /// client held the only thread for as long as it kept sending.
    #[test]
    fn slow_and_silent_clients_block_no_scraper() {
        let e = Exporter::start("127.0.0.1:0", "a 1\n".into()).expect("bind");
        let addr = e.local_addr();
        // Silent connections, more than are held: the oldest are closed.
        let silent: Vec<TcpStream> =
            (0..MAX_CONNECTIONS + 8).map(|_| TcpStream::connect(addr).expect("connect")).collect();
        let mut slow = TcpStream::connect(addr).expect("connect");
        let mut slow_reader = slow.try_clone().expect("clone");
        let opened = Instant::now();
        let trickle = std::thread::spawn(move || {
            for b in b"GET /metrics HTTP/1.1\r\nHost: x".iter().take(9) {
                if slow.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        for _ in 0..3 {
            let got = scrape_within(addr, Duration::from_secs(1));
            assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with("\r\n\r\na 1\n"), "{got}");
            std::thread::sleep(Duration::from_millis(500));
        }
        // The slow client is cut off at its deadline, while it still sends.
        slow_reader.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut buf = [0u8; 64];
        let read = slow_reader.read(&mut buf);
        let cut = opened.elapsed();
        assert!(matches!(read, Ok(0) | Err(_)), "the slow client got an answer: {read:?}");
        assert!(
            cut >= REQUEST_DEADLINE - Duration::from_millis(200) && cut < REQUEST_DEADLINE + Duration::from_secs(2),
            "the slow client was cut off after {cut:?}, its deadline is {REQUEST_DEADLINE:?}"
        );
        trickle.join().expect("trickle");
        drop(silent);
    }

    /// A head past the bound is refused even when its end came with it in
    /// one read (before, only a head still without its end was measured).
    #[test]
    fn a_head_past_the_bound_is_refused_wherever_it_ends() {
        let e = Exporter::start("127.0.0.1:0", "a 1\n".into()).expect("bind");
        let big = format!("GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "p".repeat(MAX_HEAD_BYTES));
        assert!(get(e.local_addr(), &big).starts_with("HTTP/1.1 431"));
        let fits = format!("GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "p".repeat(MAX_HEAD_BYTES / 2));
        assert!(get(e.local_addr(), &fits).starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn a_busy_port_fails_at_start() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr").to_string();
        let err = Exporter::start(&addr, String::new()).expect_err("the port is taken");
        assert!(matches!(err, ExporterError::Bind(..)), "{err}");
        assert!(err.to_string().contains("in use"), "{err}");
        assert!(matches!(Exporter::start("no-port", String::new()), Err(ExporterError::Resolve(..))));
    }
}
