//! `--metrics-listen`: a tiny HTTP/1.1 server on a thread of its own that
//! answers `GET /metrics` with the latest page the collector published.
//!
//! It owns the socket and the protocol, nothing else: the page is made once
//! per second by the caller (from the merged interval, see
//! `perfops_report::exposition`) and handed over with [`Exporter::publish`],
//! which swaps one pointer under a lock no worker ever takes. A scrape reads
//! that pointer and writes the bytes; workers never know it happened.
//!
//! One request per connection (`Connection: close`), answered in turn: a
//! Prometheus server scrapes every few seconds, and a slow client is cut off
//! by a 2 s socket timeout rather than holding the thread forever.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};

/// The content type of the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A request head larger than this is refused: a scrape is one short line.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the accept loop looks at the stop flag.
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
                .spawn(move || serve(&listener, &page, &stop))
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

fn serve(listener: &TcpListener, page: &Mutex<Arc<str>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        // Wait for a connection, but never longer than it takes to see the stop flag.
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, STOP_POLL_MS) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        let Ok((stream, _)) = listener.accept() else { continue };
        let current = page.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // A client that goes away mid-answer is its own business.
        let _ = answer(stream, &current);
    }
}

/// Read one request head and answer it.
fn answer(mut stream: TcpStream, page: &str) -> io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD_BYTES {
            return respond(&mut stream, "431 Request Header Fields Too Large", "text/plain", b"too large\n", true);
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => respond(&mut stream, "200 OK", CONTENT_TYPE, page.as_bytes(), method == "GET"),
        (_, "/metrics") => respond(&mut stream, "405 Method Not Allowed", "text/plain", b"GET /metrics\n", true),
        _ => respond(&mut stream, "404 Not Found", "text/plain", b"perfops serves GET /metrics\n", true),
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &[u8], with_body: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    if with_body {
        out.extend_from_slice(body);
    }
    stream.write_all(&out)?;
    stream.flush()
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
        let first = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains(CONTENT_TYPE) && first.ends_with("\r\n\r\na 1\n"), "{first}");
        e.publish("a 2\n".into());
        assert!(get(addr, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").ends_with("\r\n\r\na 2\n"));
        let head = get(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.contains("Content-Length: 4\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        assert!(get(addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        drop(e);
        // Stopped with its owner: the port is free again.
        assert!(TcpStream::connect(addr).is_err(), "still listening after drop");
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
