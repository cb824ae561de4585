//! One blocking HTTP/1.1 `GET` (or `POST`) on a new connection: the watcher's scrapes and probes,
//! and the pushing outputs' deliveries (Prometheus remote-write, OTLP over HTTP).
//!
//! It owns the whole exchange: resolve, connect, TLS when the URL is `https`, one request with
//! `Connection: close`, the response head (`httparse`), the body framed by `Content-Length`,
//! `Transfer-Encoding: chunked` or the end of the connection (by [`crate::framing`]'s rules, the
//! load client's too), and the classification of what went wrong into a short [`FetchError`] a
//! report can show. Everything happens before one deadline
//! (`timeout` after the call), and every blocking step waits at most [`SLICE`] at a time so the
//! stop flag is seen promptly even in the middle of a slow answer. It is not the load's client
//! (that is `http1`, async and keep-alive): this one is plain, slow and careful, and never shares
//! a connection, because a Kubernetes probe does not either. A push makes one request a second at
//! most: a new connection each time costs a handshake a second, which is nothing beside the
//! load's, and a receiver that hangs or resets costs the next request nothing.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrStorage, connect, getsockopt, socket, sockopt};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use url::Url;

use crate::chunked::ChunkedDecoder;
use crate::framing::{Fields, Framing};

/// The largest body kept; a bigger one is an error, not a truncated scrape.
pub const MAX_BODY_BYTES: usize = 16 << 20;
/// The largest response head accepted.
const MAX_HEAD_BYTES: usize = 64 << 10;
/// The longest any single blocking call waits before the stop flag and the deadline are looked at.
pub const SLICE: Duration = Duration::from_millis(50);

/// Header fields as received: (name, value).
pub type Headers = Vec<(String, Vec<u8>)>;

/// What to fetch and how.
pub struct Request<'a> {
    /// An absolute `http` or `https` URL.
    pub url: &'a Url,
    /// Connect, TLS, request and the whole response must fit in this.
    pub timeout: Duration,
    /// Extra header lines (`Host` and `Connection` are always written).
    pub headers: &'a [(&'a str, &'a str)],
    /// Needed for `https` URLs.
    pub tls: Option<&'a Arc<ClientConfig>>,
}

/// A complete response.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header fields as received.
    pub headers: Headers,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// From the call to the end of the body.
    pub elapsed: Duration,
}

/// Why there is no response. The messages are short: they end up in a probe's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL cannot be fetched (scheme, host).
    #[error("bad URL: {0}")]
    Url(String),
    /// The host name does not resolve.
    #[error("cannot resolve host: {0}")]
    Resolve(String),
    /// Nothing listens there (RST to the SYN).
    #[error("connection refused")]
    Refused,
    /// The deadline passed (connect or response).
    #[error("timeout")]
    Timeout,
    /// The peer reset the connection.
    #[error("connection reset")]
    Reset,
    /// The peer closed the connection before the response was complete.
    #[error("connection closed before the response ended")]
    Closed,
    /// The bytes are not an HTTP/1.1 response.
    #[error("malformed response: {0}")]
    Protocol(String),
    /// The TLS handshake or a TLS record failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The body is larger than [`MAX_BODY_BYTES`].
    #[error("body over {} MiB", MAX_BODY_BYTES >> 20)]
    TooLarge,
    /// Any other socket error, as the OS words it.
    #[error("{0}")]
    Io(String),
    /// The stop flag was set: nobody wants the answer any more.
    #[error("stopped")]
    Stopped,
}

/// A request's body, for [`post`].
#[derive(Debug, Clone, Copy)]
pub struct Body<'a> {
    /// Its `Content-Type`.
    pub content_type: &'a str,
    /// Its bytes, sent with a `Content-Length`.
    pub bytes: &'a [u8],
}

/// `GET` `req.url`, giving up when `stop` is set.
pub fn get(req: &Request<'_>, stop: &AtomicBool) -> Result<Response, FetchError> {
    send(req, None, stop)
}

/// `POST` `body` to `req.url`, giving up when `stop` is set: the same exchange as [`get`], the
/// body written after the head (with `Content-Type` and `Content-Length`; other fields such as
/// `Content-Encoding` are the caller's, in `req.headers`).
pub fn post(req: &Request<'_>, body: &Body<'_>, stop: &AtomicBool) -> Result<Response, FetchError> {
    send(req, Some(body), stop)
}

fn send(req: &Request<'_>, body: Option<&Body<'_>>, stop: &AtomicBool) -> Result<Response, FetchError> {
    let began = Instant::now();
    let deadline = began + req.timeout;
    let url = req.url;
    let host = url.host_str().ok_or_else(|| FetchError::Url(format!("{url} has no host")))?;
    let tls = match url.scheme() {
        "http" => None,
        "https" => Some(req.tls.ok_or_else(|| FetchError::Url("https without a TLS configuration".into()))?),
        other => return Err(FetchError::Url(format!("scheme `{other}` (http or https)"))),
    };
    // Blocking getaddrinfo: not interruptible, but a watched target is normally an address or a
    // name the resolver answers at once.
    let addrs = url.socket_addrs(|| None).map_err(|e| FetchError::Resolve(e.to_string()))?;
    let stream = connect_any(&addrs, deadline, stop)?;
    let _ = stream.set_nodelay(true);
    let mut head = request_head(url, req.headers, body);
    if let Some(body) = body {
        head.extend_from_slice(body.bytes);
    }
    let (status, headers, body) = match tls {
        None => exchange(&mut Plain(stream), &head, deadline, stop)?,
        Some(config) => {
            // url gives IPv6 literals in brackets; rustls wants the bare address.
            let name = host.trim_start_matches('[').trim_end_matches(']').to_string();
            let name = ServerName::try_from(name).map_err(|e| FetchError::Url(e.to_string()))?;
            let conn = ClientConnection::new(Arc::clone(config), name).map_err(|e| FetchError::Tls(e.to_string()))?;
            exchange(&mut Tls(StreamOwned::new(conn, stream)), &head, deadline, stop)?
        }
    };
    Ok(Response { status, headers, body, elapsed: began.elapsed() })
}

/// The request: origin-form target, `Host` as the URL has it (port only when not the default);
/// `POST` with the body's type and length when there is one (the body itself is not included).
fn request_head(url: &Url, headers: &[(&str, &str)], body: Option<&Body<'_>>) -> Vec<u8> {
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let host = url.host_str().unwrap_or_default();
    let method = if body.is_some() { "POST" } else { "GET" };
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {host}");
    if let Some(port) = url.port() {
        head.push_str(&format!(":{port}"));
    }
    head.push_str("\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Type: {}\r\nContent-Length: {}\r\n", body.content_type, body.bytes.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    head.into_bytes()
}

/// The first address that accepts; a refusal moves on to the next, a timeout ends it all.
fn connect_any(addrs: &[SocketAddr], deadline: Instant, stop: &AtomicBool) -> Result<TcpStream, FetchError> {
    let mut last = FetchError::Resolve("no address".into());
    for addr in addrs {
        match connect_one(*addr, deadline, stop) {
            Ok(s) => return Ok(s),
            Err(e @ (FetchError::Timeout | FetchError::Stopped)) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A non-blocking connect waited for in slices: std's `connect_timeout` cannot be interrupted, and
/// a SYN to a host that drops it would hold `stop()` for the whole timeout.
fn connect_one(addr: SocketAddr, deadline: Instant, stop: &AtomicBool) -> Result<TcpStream, FetchError> {
    let family = if addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK, None)
        .map_err(errno_error)?;
    match connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => {}
        Err(Errno::EINPROGRESS | Errno::EINTR) => loop {
            let wait = slice_before(deadline, stop)?;
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
            // Whole milliseconds, at least one: a zero timeout would spin.
            let ms = u16::try_from(wait.as_millis().max(1)).unwrap_or(u16::MAX);
            match poll(&mut fds, ms) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => break,
                Err(e) => return Err(errno_error(e)),
            }
        },
        Err(e) => return Err(errno_error(e)),
    }
    match getsockopt(&fd, sockopt::SocketError).map_err(errno_error)? {
        0 => {}
        code => return Err(errno_error(Errno::from_raw(code))),
    }
    let stream = TcpStream::from(fd);
    stream.set_nonblocking(false).map_err(io_error)?;
    Ok(stream)
}

/// How long the next blocking call may wait: a slice, or what is left before the deadline.
fn slice_before(deadline: Instant, stop: &AtomicBool) -> Result<Duration, FetchError> {
    if stop.load(Ordering::Relaxed) {
        return Err(FetchError::Stopped);
    }
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(left.min(SLICE)),
        _ => Err(FetchError::Timeout),
    }
}

/// A connection the exchange can read, write and put socket timeouts on.
trait Conn: Read + Write {
    fn socket(&self) -> &TcpStream;
}

struct Plain(TcpStream);

impl Read for Plain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Plain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Conn for Plain {
    fn socket(&self) -> &TcpStream {
        &self.0
    }
}

struct Tls(StreamOwned<ClientConnection, TcpStream>);

impl Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            // A server that closes after a `Connection: close` response without close_notify is
            // common and harmless here: the framing below says whether the body was complete.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
            r => r,
        }
    }
}

impl Write for Tls {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Conn for Tls {
    fn socket(&self) -> &TcpStream {
        &self.0.sock
    }
}

/// Run `op` until it does not time out, one slice at a time. A socket timeout only means the slice
/// ended: rustls keeps its state across a `WouldBlock`, so retrying is safe for TLS too.
fn retry<C: Conn, T>(
    c: &mut C,
    deadline: Instant,
    stop: &AtomicBool,
    mut op: impl FnMut(&mut C) -> io::Result<T>,
) -> Result<T, FetchError> {
    loop {
        let wait = slice_before(deadline, stop)?;
        // Both: a TLS write may need to read (the handshake) and a read may need to write.
        c.socket().set_read_timeout(Some(wait)).map_err(io_error)?;
        c.socket().set_write_timeout(Some(wait)).map_err(io_error)?;
        match op(c) {
            Ok(v) => return Ok(v),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(io_error(e)),
        }
    }
}

type Parts = (u16, Headers, Vec<u8>);

/// Write the request (its head and body, in one buffer), read the response.
fn exchange<C: Conn>(c: &mut C, head: &[u8], deadline: Instant, stop: &AtomicBool) -> Result<Parts, FetchError> {
    let mut sent = 0;
    while sent < head.len() {
        match retry(c, deadline, stop, |c| c.write(&head[sent..]))? {
            0 => return Err(FetchError::Closed),
            n => sent += n,
        }
    }
    retry(c, deadline, stop, |c| c.flush())?;

    let mut buf = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 16 << 10];
    let read = |c: &mut C, chunk: &mut [u8]| retry(c, deadline, stop, |c| c.read(chunk));
    let (status, headers, head_len) = 'head: loop {
        let n = read(c, &mut chunk)?;
        if n == 0 {
            return Err(FetchError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        // 1xx interim responses (100 Continue, 103 Early Hints) precede the real one, possibly
        // in the same read.
        while let Some(parsed) = parse_head(&buf)? {
            if (100..200).contains(&parsed.0) && parsed.0 != 101 {
                buf.drain(..parsed.2);
            } else {
                break 'head parsed;
            }
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(FetchError::Protocol(format!("head over {} KiB", MAX_HEAD_BYTES >> 10)));
        }
    };
    let rest = buf.split_off(head_len);
    let framing = framing(status, &headers)?;
    let mut body = Vec::new();
    match framing {
        Framing::None => {}
        Framing::Length(len) => {
            if len > MAX_BODY_BYTES as u64 {
                return Err(FetchError::TooLarge);
            }
            let len = len as usize;
            body = rest;
            while body.len() < len {
                let n = read(c, &mut chunk)?;
                if n == 0 {
                    return Err(FetchError::Closed);
                }
                body.extend_from_slice(&chunk[..n]);
            }
            body.truncate(len);
        }
        Framing::Chunked => {
            let mut decoder = ChunkedDecoder::new();
            let mut input = rest;
            loop {
                let (_, done) = decoder
                    .feed_into(&input, &mut body)
                    .map_err(|_| FetchError::Protocol("bad chunked encoding".into()))?;
                if body.len() > MAX_BODY_BYTES {
                    return Err(FetchError::TooLarge);
                }
                if done {
                    break;
                }
                let n = read(c, &mut chunk)?;
                if n == 0 {
                    return Err(FetchError::Closed);
                }
                input.clear();
                input.extend_from_slice(&chunk[..n]);
            }
        }
        Framing::UntilClose => {
            body = rest;
            loop {
                if body.len() > MAX_BODY_BYTES {
                    return Err(FetchError::TooLarge);
                }
                match read(c, &mut chunk)? {
                    0 => break,
                    n => body.extend_from_slice(&chunk[..n]),
                }
            }
        }
    }
    Ok((status, headers, body))
}

/// The status, headers and head length once the head is complete; `None` while it is not.
fn parse_head(buf: &[u8]) -> Result<Option<(u16, Headers, usize)>, FetchError> {
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut slots);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let status = resp.code.unwrap_or(0);
            let headers = resp.headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect();
            Ok(Some((status, headers, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(FetchError::Protocol(e.to_string())),
    }
}

/// How the body of a response to `GET` or `POST` ends: the engine's one set of rules ([`crate::framing`]).
fn framing(status: u16, headers: &[(String, Vec<u8>)]) -> Result<Framing, FetchError> {
    let mut fields = Fields::default();
    for (name, value) in headers {
        fields.see(name, value).map_err(|e| FetchError::Protocol(e.to_string()))?;
    }
    Ok(fields.framing(status, false))
}

fn errno_error(e: Errno) -> FetchError {
    match e {
        Errno::ECONNREFUSED => FetchError::Refused,
        Errno::ETIMEDOUT => FetchError::Timeout,
        Errno::ECONNRESET | Errno::ECONNABORTED | Errno::EPIPE => FetchError::Reset,
        other => FetchError::Io(other.desc().to_lowercase()),
    }
}

fn io_error(e: io::Error) -> FetchError {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => FetchError::Refused,
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe => {
            FetchError::Reset
        }
        io::ErrorKind::UnexpectedEof => FetchError::Closed,
        // rustls reports its errors (certificates, alerts, bad records) as InvalidData.
        io::ErrorKind::InvalidData => FetchError::Tls(e.to_string()),
        _ => FetchError::Io(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let cases: [(u16, Headers, Framing); 6] = [
            (200, h(&[("Content-Length", "12")]), Framing::Length(12)), // the usual
            (200, h(&[("Transfer-Encoding", "gzip, chunked"), ("Content-Length", "3")]), Framing::Chunked), // TE wins
            (200, h(&[("transfer-encoding", "gzip")]), Framing::UntilClose), // not chunked last: read to close
            (200, h(&[]), Framing::UntilClose),                         // no framing: read to close
            (204, h(&[("Content-Length", "5")]), Framing::None),        // never a body
            (200, h(&[("Content-Length", "4"), ("Content-Length", "4")]), Framing::Length(4)), // repeated, same
        ];
        for (status, headers, want) in cases {
            assert_eq!(framing(status, &headers), Ok(want), "{status} {headers:?}");
        }
        assert!(framing(200, &h(&[("Content-Length", "4"), ("Content-Length", "5")])).is_err());
        assert!(framing(200, &h(&[("Content-Length", "-1")])).is_err());
    }

    #[test]
    fn request_head_names_the_host_and_closes() {
        let url = Url::parse("http://example.invalid:8080/metrics?x=1").unwrap();
        let head = request_head(&url, &[("User-Agent", "kube-probe/perfops")], None);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /metrics?x=1 HTTP/1.1\r\nHost: example.invalid:8080\r\nUser-Agent: kube-probe/perfops\r\nConnection: close\r\n\r\n"
        );
        let url = Url::parse("https://[::1]/").unwrap();
        assert!(
            String::from_utf8(request_head(&url, &[], None)).unwrap().contains("Host: [::1]\r\n"),
            "default port left out"
        );
    }

    /// A push: `POST`, the caller's fields, then the body's type and length.
    #[test]
    fn request_head_of_a_post_says_the_body_type_and_length() {
        let url = Url::parse("http://127.0.0.1:9090/api/v1/write").unwrap();
        let body = Body { content_type: "application/x-protobuf", bytes: b"12345" };
        let head = request_head(&url, &[("Content-Encoding", "snappy")], Some(&body));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /api/v1/write HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nContent-Encoding: snappy\r\n\
             Content-Type: application/x-protobuf\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
    }
}
