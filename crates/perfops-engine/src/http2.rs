//! The HTTP/2 client: a worker's pool of connections, each carrying many
//! streams, and one exchange on a stream (the `h2` crate speaks the
//! protocol; this module decides which connection a request goes out on,
//! when to open another, when to wait, and what a failure is).
//!
//! ```text
//!   request ──> a connection with a free stream? ──yes──> send on it
//!                  │ no
//!                  ├─ one is being opened, with room for us ──> wait for it
//!                  ├─ fewer than `connections` open ──> open one (connect,
//!                  │                                    TLS, SETTINGS)
//!                  └─ else: wait for a stream to free (counted in
//!                     `stream_waits`; the wait is latency, not service time)
//! ```
//!
//! A connection's free streams are `min(streams, the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS)`: a new connection is used once the
//! server's SETTINGS have arrived (a PING round trip after the preface,
//! part of its connect time), so a server that allows one stream is never
//! sent two. Connections are filled one after the other, so `connections` x
//! `streams` users hold exactly `connections` connections.
//!
//! Everything here lives on one worker's thread (a current-thread runtime):
//! the `h2` crate's per-connection mutex (h2 #531) is never contended, and a
//! connection's driver is a task of that worker. Streams are spread over a
//! worker's connections, connections over workers.
//!
//! A `GOAWAY` ends a connection for new streams: the requests it did not
//! process (streams above its last stream id, or sent after it) go out again
//! on another connection, the connection is replaced and the `GOAWAY` counted
//! once (`goaways`). `RST_STREAM` is a failure of its request:
//! `refused_stream` for `REFUSED_STREAM` (not processed, but counted: the
//! server said no), `reset_stream` for any other code.
//!
//! Bytes: HTTP/2 compresses headers (HPACK); `bytes_in` and `bytes_out` count
//! them as decoded (name, value and 4 bytes each, as an HTTP/1.1 head would),
//! plus the bodies.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use h2::client::SendRequest;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use perfops_core::measure::FailureKind;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::grpc::{self, GrpcMethod};
use crate::http1::Response;

/// HTTP/2 knobs of a run (`defaults.http2`, `quick -p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2 {
    /// Streams in flight per connection, at most (the server's SETTINGS may
    /// allow fewer).
    pub streams: u32,
    /// Connections over the whole run, at most (0: as many as the requests
    /// in flight need, `streams` to a connection).
    pub connections: u32,
    /// Each stream's receive window, bytes (SETTINGS_INITIAL_WINDOW_SIZE).
    pub stream_window: u32,
    /// The connection's receive window, bytes.
    pub connection_window: u32,
}

/// Large windows, as h2load's defaults: flow control never holds a
/// response back, so what is measured is the server, not the window.
pub const LARGE_WINDOW: u32 = (1 << 30) - 1;

impl Default for Http2 {
    fn default() -> Http2 {
        Http2 { streams: 100, connections: 0, stream_window: LARGE_WINDOW, connection_window: LARGE_WINDOW }
    }
}

/// A request ready for HTTP/2: its head (pseudo-headers from the method
/// and URI) and body.
#[derive(Debug, Clone)]
pub(crate) struct H2Request {
    head: Request<()>,
    body: Bytes,
    /// Head as decoded plus body.
    bytes_out: u64,
}

/// Why an HTTP/1.1 request could not become an HTTP/2 one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot send as HTTP/2: {0}")]
pub(crate) struct ConvertError(pub(crate) String);

/// Header fields that HTTP/2 forbids (RFC 9113 §8.2.2), or carries as a
/// pseudo-header (`host`: `:authority`).
const CONNECTION_SPECIFIC: [&str; 6] =
    ["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

impl H2Request {
    /// As a gRPC call of `method`: the body (the message as JSON) encoded
    /// and framed, `grpc-timeout` from the request's `timeout`.
    pub(crate) fn into_grpc(mut self, method: &GrpcMethod, timeout: Duration) -> Result<H2Request, ConvertError> {
        let body = method.encode(&self.body).map_err(ConvertError)?;
        let headers = self.head.headers_mut();
        headers.remove(http::header::CONTENT_LENGTH);
        let value = HeaderValue::from_str(&grpc::timeout_header(timeout)).map_err(|e| ConvertError(e.to_string()))?;
        headers.insert("grpc-timeout", value);
        self.bytes_out = self.bytes_out - self.body.len() as u64 + body.len() as u64 + 16;
        self.body = body;
        Ok(self)
    }

    /// The HTTP/1.1 request `bytes` (as `work.rs` renders it) as an HTTP/2
    /// one on `scheme`: one renderer for both protocols, so a step means the
    /// same whatever the server speaks. Literal steps are converted once,
    /// before the run.
    pub(crate) fn from_http1(bytes: &[u8], scheme: &str) -> Result<H2Request, ConvertError> {
        let bad = |m: &str| ConvertError(m.to_string());
        let mut headers = [httparse::EMPTY_HEADER; 100];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(bytes) {
            Ok(httparse::Status::Complete(len)) => len,
            _ => return Err(bad("not a complete request head")),
        };
        let method = Method::from_bytes(req.method.unwrap_or("GET").as_bytes()).map_err(|e| bad(&e.to_string()))?;
        let path = req.path.unwrap_or("/");
        let authority = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .unwrap_or("localhost");
        let uri: Uri =
            format!("{scheme}://{authority}{path}").parse().map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let mut map = HeaderMap::with_capacity(req.headers.len());
        let mut head_bytes = method.as_str().len() + path.len() + authority.len() + 16;
        for h in req.headers.iter() {
            if CONNECTION_SPECIFIC.iter().any(|c| h.name.eq_ignore_ascii_case(c))
                || (h.name.eq_ignore_ascii_case("te") && !h.value.eq_ignore_ascii_case(b"trailers"))
            {
                continue;
            }
            let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|e| bad(&e.to_string()))?;
            let value = HeaderValue::from_bytes(h.value).map_err(|e| bad(&e.to_string()))?;
            head_bytes += h.name.len() + h.value.len() + 4;
            map.append(name, value);
        }
        let mut head = Request::new(());
        *head.method_mut() = method;
        *head.uri_mut() = uri;
        *head.headers_mut() = map;
        *head.version_mut() = http::Version::HTTP_2;
        let body = Bytes::copy_from_slice(&bytes[len..]);
        let bytes_out = (head_bytes + body.len()) as u64;
        Ok(H2Request { head, body, bytes_out })
    }

    /// Head as decoded plus body, bytes.
    pub(crate) fn bytes_out(&self) -> u64 {
        self.bytes_out
    }
}

/// What a connection's driver task and its users share (the driver must
/// not hold the connection's `SendRequest`: the connection closes once the
/// last one is dropped).
#[derive(Debug, Default)]
pub(crate) struct State {
    /// No new stream may go on it (its driver ended, or a request saw a `GOAWAY`).
    gone: Cell<bool>,
    /// It was the server that ended it (`GOAWAY`, graceful or not).
    goaway: Cell<bool>,
    /// The pool's flag that some connection is gone: [`Pool::prune`] looks
    /// only then, not per request.
    pool_ended: Rc<Cell<bool>>,
}

impl State {
    fn end(&self, goaway: bool) {
        self.gone.set(true);
        if goaway {
            self.goaway.set(true);
        }
        self.pool_ended.set(true);
    }
}

/// One HTTP/2 connection of a worker.
pub(crate) struct H2Conn {
    send: RefCell<SendRequest<Bytes>>,
    state: Rc<State>,
    /// Streams in flight on it.
    busy: Cell<u32>,
    /// Our own limit (`streams`).
    streams: u32,
    /// When its last stream ended (for closing idle connections).
    idle_since: Cell<Instant>,
}

impl H2Conn {
    /// A connection whose handshake is done, its driver running elsewhere
    /// (see [`drive`]).
    fn new(send: SendRequest<Bytes>, state: Rc<State>, streams: u32) -> H2Conn {
        H2Conn { send: RefCell::new(send), state, busy: Cell::new(0), streams, idle_since: Cell::new(Instant::now()) }
    }

    /// How many streams may be in flight on it now: ours, or fewer if the
    /// server's SETTINGS say so.
    fn capacity(&self) -> u32 {
        let server = self.send.borrow().current_max_send_streams();
        self.streams.min(u32::try_from(server).unwrap_or(u32::MAX))
    }

    /// The cheap tests first: the server's limit takes h2's lock.
    fn has_room(&self) -> bool {
        let busy = self.busy.get();
        !self.state.gone.get() && busy < self.streams && busy < self.capacity()
    }

    /// A request on this connection saw it go away.
    fn went_away(&self) {
        self.state.end(true);
    }
}

/// Run a connection's I/O until it ends, then mark it so that the pool
/// replaces it and wakes whoever waits for a stream.
pub(crate) async fn drive<T>(conn: h2::client::Connection<T, Bytes>, state: Rc<State>, freed: Rc<Notify>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let ended = conn.await;
    // Ok: the server ended it gracefully (a GOAWAY, every stream done); a
    // connection this side closes is out of the pool before it ends.
    state.end(ended.as_ref().map_or_else(|e| e.is_go_away() && e.is_remote(), |()| true));
    freed.notify_waiters();
}

/// A stream taken on a connection; given back when dropped (the request
/// ended, failed, or was cut), waking one request that waits for a stream.
pub(crate) struct Lease {
    conn: Rc<H2Conn>,
    freed: Rc<Notify>,
}

impl Lease {
    pub(crate) fn conn(&self) -> &H2Conn {
        &self.conn
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let busy = self.conn.busy.get() - 1;
        self.conn.busy.set(busy);
        if busy == 0 {
            self.conn.idle_since.set(Instant::now());
        }
        self.freed.notify_one();
    }
}

/// A worker's HTTP/2 connections.
pub(crate) struct Pool {
    conns: RefCell<Vec<Rc<H2Conn>>>,
    /// Connections being opened.
    opening: Cell<u32>,
    /// Requests waiting for those.
    waiting_on_open: Cell<u32>,
    /// A stream was given back, or a connection opened or ended.
    freed: Rc<Notify>,
    /// Some connection is gone since the last [`Pool::prune`].
    ended: Rc<Cell<bool>>,
    /// Connections this worker may hold (0: no limit).
    limit: u32,
    pub(crate) settings: Http2,
}

/// What [`Pool::take`] found.
pub(crate) enum Take {
    /// A stream on an open connection.
    Stream(Lease),
    /// Wait for a connection being opened.
    AwaitOpening,
    /// Open a new connection.
    Open,
    /// Every stream is busy and no connection may be added: wait.
    Full,
}

/// Undoes a count when a waiting or opening request ends, however it ends
/// (it may be dropped at its timeout or at the run's end); an opening that
/// ends wakes those who waited for it (its connection, or its failure: one
/// of them opens another).
pub(crate) struct CountGuard<'a> {
    cell: &'a Cell<u32>,
    wake: Option<&'a Notify>,
}

impl<'a> CountGuard<'a> {
    fn new(cell: &'a Cell<u32>, wake: Option<&'a Notify>) -> CountGuard<'a> {
        cell.set(cell.get() + 1);
        CountGuard { cell, wake }
    }
}

impl Drop for CountGuard<'_> {
    fn drop(&mut self) {
        self.cell.set(self.cell.get() - 1);
        if let Some(n) = self.wake {
            n.notify_waiters();
        }
    }
}

impl Pool {
    /// A pool of at most `limit` connections (0: no limit).
    pub(crate) fn new(settings: Http2, limit: u32) -> Pool {
        Pool {
            conns: RefCell::default(),
            opening: Cell::new(0),
            waiting_on_open: Cell::new(0),
            freed: Rc::new(Notify::new()),
            ended: Rc::default(),
            limit,
            settings,
        }
    }

    /// Remove the connections that ended; returns how many the server sent away.
    pub(crate) fn prune(&self) -> u64 {
        if !self.ended.replace(false) {
            return 0;
        }
        let mut goaways = 0;
        self.conns.borrow_mut().retain(|c| {
            if c.state.gone.get() {
                goaways += u64::from(c.state.goaway.get());
                false
            } else {
                true
            }
        });
        goaways
    }

    /// A stream for a request, or what to do to get one.
    pub(crate) fn take(&self) -> Take {
        let conns = self.conns.borrow();
        // The first with room: connections fill one after the other.
        if let Some(c) = conns.iter().find(|c| c.has_room()) {
            c.busy.set(c.busy.get() + 1);
            return Take::Stream(Lease { conn: c.clone(), freed: self.freed.clone() });
        }
        let opening = self.opening.get();
        if opening > 0 && self.waiting_on_open.get() < opening * self.settings.streams {
            return Take::AwaitOpening;
        }
        if self.limit == 0 || (conns.len() as u32) + opening < self.limit {
            return Take::Open;
        }
        Take::Full
    }

    /// Count a wait for a connection being opened, until dropped.
    pub(crate) fn awaiting_open(&self) -> CountGuard<'_> {
        CountGuard::new(&self.waiting_on_open, None)
    }

    /// Count a connection being opened, until dropped.
    pub(crate) fn opening(&self) -> CountGuard<'_> {
        CountGuard::new(&self.opening, Some(&self.freed))
    }

    /// Wait until a stream is given back or a connection opens or ends.
    pub(crate) async fn changed(&self) {
        self.freed.notified().await;
    }

    /// Add a connection just opened, and take a stream on it.
    pub(crate) fn add(&self, send: SendRequest<Bytes>, state: Rc<State>) -> Lease {
        let conn = Rc::new(H2Conn::new(send, state, self.settings.streams));
        conn.busy.set(1);
        self.conns.borrow_mut().push(conn.clone());
        self.freed.notify_waiters();
        Lease { conn, freed: self.freed.clone() }
    }

    /// The notifier the drivers wake.
    pub(crate) fn notifier(&self) -> Rc<Notify> {
        self.freed.clone()
    }

    /// A new connection's state, tied to this pool.
    pub(crate) fn new_state(&self) -> Rc<State> {
        Rc::new(State { pool_ended: self.ended.clone(), ..State::default() })
    }

    /// Close the connections idle since before `cutoff` (as HTTP/1.1's
    /// idle connections are, see the worker's `IDLE_CLOSE`).
    pub(crate) fn close_idle(&self, cutoff: Instant) {
        self.conns.borrow_mut().retain(|c| c.busy.get() > 0 || c.idle_since.get() >= cutoff);
    }
}

/// Handshake HTTP/2 on `io` with `settings`' windows, start its driver on
/// this worker's thread, and wait for the server's SETTINGS (a PING round
/// trip: the server sends its SETTINGS first), so that the first requests
/// already honour its stream limit.
pub(crate) async fn handshake<T>(
    io: T,
    settings: &Http2,
    freed: Rc<Notify>,
    state: Rc<State>,
) -> Result<(SendRequest<Bytes>, Rc<State>), FailureKind>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (send, mut conn) = h2::client::Builder::new()
        .initial_window_size(settings.stream_window)
        .initial_connection_window_size(settings.connection_window)
        .enable_push(false)
        .handshake::<T, Bytes>(io)
        .await
        .map_err(|e| classify(&e))?;
    let ping = conn.ping_pong();
    tokio::task::spawn_local(drive(conn, state.clone(), freed));
    if let Some(mut ping) = ping {
        ping.ping(h2::Ping::opaque()).await.map_err(|e| classify(&e))?;
    }
    Ok((send, state))
}

/// A failed exchange on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamError {
    pub(crate) kind: FailureKind,
    /// The server did not process it (the connection went away before it):
    /// it may be sent again on another connection.
    pub(crate) again: bool,
}

/// The failure kind of an `h2` error, and whether the request may go again.
pub(crate) fn classify_stream(e: &h2::Error) -> StreamError {
    let kind = classify(e);
    StreamError { kind, again: kind == FailureKind::GoAway }
}

/// The failure kind of an `h2` error.
fn classify(e: &h2::Error) -> FailureKind {
    if e.is_go_away() && e.is_remote() {
        FailureKind::GoAway
    } else if e.is_reset() && e.is_remote() {
        if e.reason() == Some(Reason::REFUSED_STREAM) { FailureKind::RefusedStream } else { FailureKind::ResetStream }
    } else if let Some(io) = e.get_io() {
        match io.kind() {
            // rustls reports bad records as InvalidData
            std::io::ErrorKind::InvalidData => FailureKind::Protocol,
            _ => FailureKind::Reset,
        }
    } else {
        // Errors h2 found in what the server sent (a protocol error it
        // answered with GOAWAY or RST_STREAM of its own), or a broken connection.
        FailureKind::Protocol
    }
}

/// What a captured HTTP/2 response holds for `expect` and `save`.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) trailers: HeaderMap,
}

/// The most of a body kept for `save`/`expect` (as HTTP/1.1's).
const CAPTURE_MAX: usize = 1024 * 1024;

/// Send `req` on a stream of `lease`'s connection and read its whole
/// response; with `capture`, keep its headers, body and trailers there.
pub(crate) async fn exchange(
    lease: &Lease,
    req: &H2Request,
    mut capture: Option<&mut Captured>,
) -> Result<(Response, Option<u32>), StreamError> {
    let conn = lease.conn();
    let fail = |e: h2::Error| {
        let err = classify_stream(&e);
        if err.again {
            conn.went_away();
        }
        err
    };
    let sent = conn.send.borrow_mut().send_request(req.head.clone(), req.body.is_empty());
    let (response, mut stream) = match sent {
        Ok(pair) => pair,
        Err(e) => {
            // Refused before a stream was opened: the connection is ending
            // (a GOAWAY, or its driver ended): another may take it.
            let mut err = fail(e);
            if conn.state.gone.get() {
                err.again = true;
            }
            return Err(err);
        }
    };
    if !req.body.is_empty() {
        stream.send_data(req.body.clone(), true).map_err(fail)?;
    }
    // As HTTP/1.1's: the request is handed over (h2 queues its frames for
    // the connection's driver, which writes them at its next turn).
    let sent_at = Instant::now();
    let response = response.await.map_err(fail)?;
    let first_byte = Instant::now();
    let status = response.status().as_u16();
    let (parts, mut body) = response.into_parts();
    let mut bytes_in = 16 + parts.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>() as u64;
    let mut last_byte = first_byte;
    loop {
        // The clock is read again only if a chunk had to be waited for.
        let mut waited = false;
        let next = std::future::poll_fn(|cx| {
            let p = body.poll_data(cx);
            waited |= p.is_pending();
            p
        })
        .await;
        if waited {
            last_byte = Instant::now();
        }
        match next {
            None => break,
            Some(Ok(chunk)) => {
                bytes_in += chunk.len() as u64;
                // Given back at once: the window never closes on a response.
                let _ = body.flow_control().release_capacity(chunk.len());
                if let Some(c) = capture.as_deref_mut() {
                    let keep = chunk.len().min(CAPTURE_MAX.saturating_sub(c.body.len()));
                    c.body.extend_from_slice(&chunk[..keep]);
                }
            }
            Some(Err(e)) => return Err(fail(e)),
        }
    }
    let mut waited = false;
    let trailers = std::future::poll_fn(|cx| {
        let p = body.poll_trailers(cx);
        waited |= p.is_pending();
        p
    })
    .await
    .map_err(fail)?;
    if waited {
        last_byte = Instant::now();
    }
    if let Some(t) = &trailers {
        bytes_in += t.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>() as u64;
    }
    let grpc_status = grpc::status(&parts.headers, trailers.as_ref());
    if let Some(c) = capture {
        c.headers = parts.headers;
        c.trailers = trailers.unwrap_or_default();
    }
    Ok((Response { status, bytes_in, sent_at, first_byte, last_byte }, grpc_status))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One renderer for both protocols: the HTTP/1.1 bytes of a step become
    /// the same request in HTTP/2, less what HTTP/2 forbids.
    #[test]
    fn http1_requests_become_http2_ones() {
        /// (HTTP/1.1 request, scheme, method, URI, headers kept, body)
        type Case = (
            &'static [u8],
            &'static str,
            &'static str,
            &'static str,
            &'static [(&'static str, &'static str)],
            &'static [u8],
        );
        let cases: [Case; 4] = [
            // a GET: Host becomes the authority, User-Agent stays
            (
                b"GET /orders?page=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: perfops\r\n\r\n",
                "http",
                "GET",
                "http://127.0.0.1:8080/orders?page=2",
                &[("user-agent", "perfops")],
                b"",
            ),
            // a POST over TLS: the body follows, Content-Length is kept, names lowercased
            (
                b"POST /auth HTTP/1.1\r\nHost: a.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                "https",
                "POST",
                "https://a.example/auth",
                &[("content-type", "application/json"), ("content-length", "2")],
                b"{}",
            ),
            // connection-specific fields are dropped (RFC 9113 8.2.2), TE: trailers kept
            (
                b"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n",
                "http",
                "GET",
                "http://h/",
                &[("te", "trailers")],
                b"",
            ),
            // any other TE is dropped too
            (b"GET / HTTP/1.1\r\nHost: h\r\nTE: gzip\r\n\r\n", "http", "GET", "http://h/", &[], b""),
        ];
        for (i, (bytes, scheme, method, uri, headers, body)) in cases.into_iter().enumerate() {
            let r = H2Request::from_http1(bytes, scheme).unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(r.head.method().as_str(), method, "case {i}");
            assert_eq!(r.head.uri().to_string(), uri, "case {i}");
            let got: Vec<(String, String)> = r
                .head
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("?").to_string()))
                .collect();
            let want: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            assert_eq!(got, want, "case {i}");
            assert_eq!(&r.body[..], body, "case {i}");
        }
        assert!(H2Request::from_http1(b"GET / HTTP/1.1\r\nHost: h\r\n", "http").is_err(), "an unfinished head");
    }

    /// A pool fills its connections one after the other, asks for a new one
    /// only when none has room and the limit allows, and waits otherwise.
    #[tokio::test(flavor = "current_thread")]
    async fn a_pool_fills_connections_in_turn_then_waits() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let settings = Http2 { streams: 2, ..Http2::default() };
                let pool = Pool::new(settings, 1);
                assert!(matches!(pool.take(), Take::Open), "nothing open: open one");
                {
                    let _opening = pool.opening();
                    let _waiting = pool.awaiting_open();
                    assert!(matches!(pool.take(), Take::AwaitOpening), "the one on its way has a second stream");
                    let _waiting2 = pool.awaiting_open();
                    assert!(matches!(pool.take(), Take::Full), "both of its streams are spoken for");
                }
                // A real connection to a real (in-process) HTTP/2 server.
                let (client, server) = tokio::io::duplex(64 * 1024);
                tokio::task::spawn_local(async move {
                    let mut srv = h2::server::handshake(server).await.expect("server handshake");
                    while let Some(Ok((_req, mut respond))) = srv.accept().await {
                        let _ = respond.send_response(http::Response::new(()), true);
                    }
                });
                let (send, state) =
                    handshake(client, &settings, pool.notifier(), pool.new_state()).await.expect("handshake");
                let first = pool.add(send, state);
                let Take::Stream(second) = pool.take() else { panic!("a second stream on the same connection") };
                assert!(matches!(pool.take(), Take::Full), "two streams busy, one connection allowed");
                drop(first);
                let Take::Stream(third) = pool.take() else { panic!("a stream was given back") };
                let req = H2Request::from_http1(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "http").unwrap();
                let (resp, _) = exchange(&third, &req, None).await.expect("an answer");
                assert_eq!(resp.status, 200);
                drop((second, third));
            })
            .await;
    }
}
