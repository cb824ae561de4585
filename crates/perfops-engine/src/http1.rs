//! The HTTP/1.1 client hot path: one connection, one request at a time.
//!
//! A request goes out in one `write` (the socket has `TCP_NODELAY`, so Nagle's
//! algorithm never holds a second segment back waiting for a delayed ACK); the
//! response is parsed in place from a per-connection buffer with `httparse`,
//! and its body is framed by Content-Length, chunked encoding or the close of the
//! connection ([`framing`](crate::framing)), then discarded. Nothing is allocated per request.
//!
//! What a connection costs is what lets a generator hold 10,000 of them
//! (#12): its read buffer starts at 1 KiB, doubles while reads fill it (a
//! large body) and shrinks back after a response that needed less, so it
//! is sized to the last response, never to the longest one seen. Measured
//! with `quick -c 10000 -n 20000` against nginx: 230 MiB peak RSS with a
//! 16 KiB buffer, 65-74 MiB now (about 4 KiB per connection, of which the
//! user's task is 1.4 KiB; the rest is this struct, its buffer and tokio's).
//!
//! A load test asks one endpoint the same question many times, and servers
//! answer it with the same head byte for byte (nginx's changes once a second,
//! with `Date`). Parsing that head was a third of the client's user-space CPU
//! per request, so each connection remembers the last head it parsed and what
//! it said: a response that starts with exactly those bytes has exactly that
//! parse (the parse of a head depends on its bytes alone), so it costs one
//! comparison instead ([`HeadCache`]).
//!
//! An open-model worker's plain-TCP connection is *stamped* ([`Conn::stamped`],
//! #18): it reads with `recvmsg` and `SO_TIMESTAMPNS`, so a response is dated
//! by when the kernel received it, not by when the worker read it. The pacer
//! relies on that to leave responses in their sockets until its next arrival
//! (`coalesce`); the date is also what a capture of the wire shows (service
//! time within 0.01 ms of the wire's at p50 and p99 at 10,000 and 20,000/s,
//! against +0.04 / +0.3 to +2.4 ms when dated by the read: bench/README.md).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use nix::sys::time::TimeSpec;
use nix::time::{ClockId, clock_gettime};
use perfops_core::measure::FailureKind;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use crate::chunked::ChunkedDecoder;
use crate::framing::{Fields, Framing};
use crate::stream::{Events, Latest, Mode, Split};

/// A new connection's read buffer: a small response (an API's JSON, nginx's
/// `200 ok`) in one read. 16 KiB here made `-c 10000` cost 230 MiB (#12).
const BUF_MIN: usize = 1024;
/// The most a body read grows the buffer to: more per read saves no
/// measurable CPU on loopback (a 1 MiB body is read in 16 reads).
const BUF_MAX: usize = 64 * 1024;
/// The most of a body kept for `save`/`expect`: the rest is read, counted and
/// dropped, so an endless or huge body costs no memory (#12). A value to save
/// beyond it is not found, and the check fails.
const CAPTURE_MAX: usize = 1024 * 1024;
/// A response head larger than this is a protocol error, not a reason to grow.
const MAX_HEAD: usize = 256 * 1024;
/// httparse needs a fixed array of header slots: the reader, `expect` and
/// `save` (worker/http1.rs) and redirects (work.rs) parse with as many.
pub(crate) const MAX_HEADERS: usize = 100;

/// A plain or TLS byte stream.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A response as far as a load generator cares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Response {
    pub(crate) status: u16,
    /// Bytes read for this response (head and body).
    pub(crate) bytes_in: u64,
    /// When the request was fully written.
    pub(crate) sent_at: Instant,
    /// When the first response byte arrived (the read that returned it).
    pub(crate) first_byte: Instant,
    /// When the last response byte arrived: the response is complete. For the
    /// usual small response, one read brings all of it and this is `first_byte`
    /// (one clock read, not two).
    pub(crate) last_byte: Instant,
}

/// A failed exchange.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExchangeError {
    pub(crate) kind: FailureKind,
    /// Nothing at all came back: on a reused keep-alive connection this is the
    /// server having closed it while idle, and the request may be retried.
    pub(crate) nothing_received: bool,
}

/// One client connection.
pub(crate) struct Conn {
    stream: Stream,
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Has completed at least one exchange (so a silent close may be stale).
    pub(crate) reused: bool,
    /// The server allows another request on this connection.
    pub(crate) keep_alive: bool,
    /// With `capture`, the last response's head and body (for `save`/`expect`);
    /// the head also when it has a `Set-Cookie` field.
    pub(crate) head: Vec<u8>,
    /// The last response's head has a `Set-Cookie` field (kept in `head`).
    pub(crate) set_cookie: bool,
    pub(crate) body: Vec<u8>,
    heads: HeadCache,
    /// Reads take the kernel's receive time of their bytes ([`stamp_receives`]).
    stamped: bool,
    /// Bytes read on this connection, all told: what a failed exchange
    /// had received is the difference across it.
    pub(crate) received: u64,
    /// The next exchange's request already went out, at this instant: the
    /// kernel pacer sent it (`uring.rs`).
    sent: Option<Instant>,
}

/// The outcome of parsing buffered bytes as a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    Partial,
    /// A 1xx response of `len` bytes to skip.
    Informational(usize),
    Complete {
        len: usize,
        status: u16,
        framing: Framing,
        keep_alive: bool,
        /// It has a `Set-Cookie` field: the head is kept for the flow's jar.
        set_cookie: bool,
    },
}

fn protocol() -> ExchangeError {
    ExchangeError { kind: FailureKind::Protocol, nothing_received: false }
}

/// Map an I/O error on an established connection to a failure kind.
fn io_failure(e: &io::Error, nothing_received: bool) -> ExchangeError {
    let kind = match e.kind() {
        // rustls reports bad records as InvalidData
        io::ErrorKind::InvalidData => FailureKind::Protocol,
        _ => FailureKind::Reset,
    };
    ExchangeError { kind, nothing_received }
}

fn parse_head(bytes: &[u8], head_request: bool) -> Result<Head, ExchangeError> {
    // Uninitialised slots: zeroing 100 headers per response showed in profiles.
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, bytes, &mut headers)
    {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(Head::Partial),
        Err(_) => return Err(protocol()),
    };
    let status = resp.code.ok_or_else(protocol)?;
    if (100..200).contains(&status) {
        // 101 would switch protocols, which we never ask for.
        return if status == 101 { Err(protocol()) } else { Ok(Head::Informational(len)) };
    }
    let mut fields = Fields::default();
    for h in resp.headers.iter() {
        fields.see(h.name, h.value).map_err(|_| protocol())?;
    }
    let framing = fields.framing(status, head_request);
    let keep_alive = fields.keep_alive(resp.version == Some(1), framing);
    Ok(Head::Complete { len, status, framing, keep_alive, set_cookie: fields.set_cookie })
}

/// Heads longer than this are not remembered (it bounds the memory per connection).
const MAX_CACHED_HEAD: usize = 1024;

/// The last complete head parsed on a connection, and its parse.
///
/// Sound because `parse_head(bytes, h)` depends only on `h` and on
/// `bytes[..len]`, where `len` is where the head ends (its first empty line):
/// bytes that start with the same `len` bytes have their head end at the same
/// place, so they parse the same. A head that differs (another `Date`, a new
/// cookie) is parsed and remembered instead: a miss costs a comparison that
/// stops at the first difference and a copy of the head.
#[derive(Default)]
struct HeadCache {
    bytes: Vec<u8>,
    /// `(head_request, parse)` of `bytes`; `None`: nothing remembered yet.
    parsed: Option<(bool, Head)>,
}

impl HeadCache {
    /// `parse_head(bytes, head_request)`, from memory when it can be.
    #[inline]
    fn parse(&mut self, bytes: &[u8], head_request: bool) -> Result<Head, ExchangeError> {
        if let Some((h, head)) = self.parsed
            && h == head_request
            && bytes.starts_with(&self.bytes)
        {
            return Ok(head);
        }
        let head = parse_head(bytes, head_request)?;
        if let Head::Complete { len, .. } = head
            && len <= MAX_CACHED_HEAD
        {
            self.bytes.clear();
            self.bytes.extend_from_slice(&bytes[..len]);
            self.parsed = Some((head_request, head));
        }
        Ok(head)
    }
}

impl Conn {
    pub(crate) fn new(stream: Stream) -> Conn {
        Conn {
            stream,
            buf: vec![0; BUF_MIN],
            start: 0,
            end: 0,
            reused: false,
            keep_alive: true,
            head: Vec::new(),
            set_cookie: false,
            body: Vec::new(),
            heads: HeadCache::default(),
            stamped: false,
            received: 0,
            sent: None,
        }
    }

    /// A connection whose reads are dated by the kernel's receive time
    /// (`SO_TIMESTAMPNS`), when its stream is plain TCP and the kernel agrees;
    /// see [`stamp_receives`].
    pub(crate) fn stamped(stream: Stream) -> Conn {
        let stamped = matches!(&stream, Stream::Tcp(tcp) if stamp_receives(tcp));
        Conn { stamped, ..Conn::new(stream) }
    }

    /// The descriptor of a stamped plain-TCP connection, which the kernel
    /// pacer may send on (`uring.rs`).
    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        match &self.stream {
            Stream::Tcp(tcp) if self.stamped => Some(tcp.as_raw_fd()),
            _ => None,
        }
    }

    /// The next exchange's request went out at `at` (the kernel pacer sent
    /// it): [`Conn::exchange`] only reads its response.
    pub(crate) fn sent_at(&mut self, at: Instant) {
        self.sent = Some(at);
    }

    /// Whether a request sent by the kernel pacer awaits its exchange.
    pub(crate) fn is_sent(&self) -> bool {
        self.sent.is_some()
    }

    /// Read more bytes into the buffer; EOF is an error (the response is not done).
    /// `read_at` records when the first and the latest read's bytes came
    /// (when the read returned them, or on a stamped connection when the
    /// kernel received them, never before `sent_at`).
    async fn fill(
        &mut self,
        bytes_in: &mut u64,
        read_at: &mut Option<(Instant, Instant)>,
        sent_at: Instant,
    ) -> Result<(), ExchangeError> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_HEAD {
                self.buf.resize(self.buf.len() * 2, 0);
            } else {
                return Err(protocol());
            }
        }
        let read = match &mut self.stream {
            Stream::Tcp(tcp) if self.stamped => read_stamped(tcp, &mut self.buf[self.end..], sent_at).await,
            stream => stream.read(&mut self.buf[self.end..]).await.map(|n| (n, Instant::now())),
        };
        match read {
            Ok((0, _)) => Err(ExchangeError { kind: FailureKind::Reset, nothing_received: *bytes_in == 0 }),
            Ok((n, at)) => {
                *read_at = Some(read_at.map_or((at, at), |(first, _)| (first, at)));
                self.end += n;
                *bytes_in += n as u64;
                self.received += n as u64;
                Ok(())
            }
            Err(e) => Err(io_failure(&e, *bytes_in == 0)),
        }
    }

    /// Every buffered byte is consumed: the next read starts at the buffer's
    /// beginning. A read that filled the whole buffer left more in the
    /// socket, so the buffer doubles (up to [`BUF_MAX`]): a large body takes
    /// fewer reads. [`Conn::settle`] gives the memory back.
    #[inline]
    fn restart(&mut self) {
        if self.end == self.buf.len() && self.buf.len() < BUF_MAX {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        (self.start, self.end) = (0, 0);
    }

    /// After a response of `bytes_in` bytes: a buffer more than twice the
    /// size this one needed shrinks to it, so a connection holds what its
    /// last response needed, never what its longest one did. Steady traffic
    /// (the same response again and again) neither grows nor shrinks it.
    #[inline]
    fn settle(&mut self, bytes_in: u64) {
        let want = usize::try_from(bytes_in).unwrap_or(BUF_MAX).clamp(BUF_MIN, BUF_MAX).next_power_of_two();
        if self.buf.len() > 2 * want && self.start == self.end {
            self.buf.truncate(want);
            self.buf.shrink_to_fit();
        }
    }

    /// Send `request` (for a HEAD request, `head_request`) and read its whole
    /// response; with `capture`, keep its head and body in `self.head`/`self.body`.
    /// A 4xx or 5xx is kept whatever `capture` says: its body is what a
    /// failure's sample shows (#32), and a success never pays for it.
    ///
    /// With `stream` (a step with `stream:`), the body is read as events
    /// handed to its consumer as they come ([`Conn::read_events`]); without,
    /// this is the hot path as it was: one branch.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        capture: bool,
        stream: Option<&mut StreamTo<'_>>,
    ) -> Result<Response, ExchangeError> {
        // Bytes left over from the previous response mean the server sent more
        // than it was asked; such connections are never reused (see below).
        self.start = 0;
        self.end = 0;
        // Always emptied (two stores): a 4xx/5xx may have filled them last time.
        self.head.clear();
        self.body.clear();
        if capture {
            // A huge body once must not be kept for every later request.
            self.head.shrink_to(BUF_MAX);
            self.body.shrink_to(BUF_MAX);
        }
        let sent_at = match self.sent.take() {
            // The kernel pacer sent it, then (`uring.rs`).
            Some(at) => at,
            None => {
                if let Err(e) = self.stream.write_all(request).await {
                    return Err(io_failure(&e, true));
                }
                if let Err(e) = self.stream.flush().await {
                    return Err(io_failure(&e, true));
                }
                // One of the two clock reads per request (the other: the read that
                // brings the response). Kept so that ttfb means what ab's "Waiting"
                // means, from the request written to the first byte; the caller's
                // start time would add the write (on loopback, the kernel's whole
                // transmit path) to it. A read costs ~80 ns on the bench VM.
                Instant::now()
            }
        };
        let mut bytes_in = 0u64;
        let mut read_at = None;

        let (status, framing, keep_alive, capture, head_len) = loop {
            if self.end > self.start {
                match self.heads.parse(&self.buf[self.start..self.end], head_request)? {
                    Head::Partial => {}
                    Head::Informational(len) => {
                        self.start += len;
                        continue;
                    }
                    Head::Complete { len, status, framing, keep_alive, set_cookie } => {
                        let capture = capture || status >= 400;
                        // A head that sets cookies is kept for the flow's jar
                        // (its body is not): one test of a flag the parse set.
                        if capture || set_cookie {
                            self.head.extend_from_slice(&self.buf[self.start..self.start + len]);
                        }
                        self.set_cookie = set_cookie;
                        self.start += len;
                        break (status, framing, keep_alive, capture, len);
                    }
                }
            }
            self.fill(&mut bytes_in, &mut read_at, sent_at).await?;
        };

        if let Some(to) = stream {
            let head = &self.buf[self.start - head_len..self.start];
            let mode = Mode::of(content_type(head).as_deref());
            // Boxed: its reader (a split, a decoder, a stall timer) would otherwise
            // make every request's future larger (#12: 10,000 connections in
            // < 100 MiB); one allocation per streamed answer.
            Box::pin(self.read_events(framing, capture, mode, to, &mut bytes_in, &mut read_at, sent_at)).await?;
        } else {
            match framing {
                Framing::None => {}
                Framing::Length(mut remaining) => loop {
                    let take = ((self.end - self.start) as u64).min(remaining);
                    if capture {
                        let keep = (take as usize).min(CAPTURE_MAX.saturating_sub(self.body.len()));
                        self.body.extend_from_slice(&self.buf[self.start..self.start + keep]);
                    }
                    self.start += take as usize;
                    remaining -= take;
                    if remaining == 0 {
                        break;
                    }
                    self.restart();
                    self.fill(&mut bytes_in, &mut read_at, sent_at).await?;
                },
                Framing::Chunked => {
                    let mut decoder = ChunkedDecoder::new();
                    loop {
                        let chunk = &self.buf[self.start..self.end];
                        let (used, done) = match capture {
                            true => decoder.feed_into(chunk, &mut self.body),
                            false => decoder.feed(chunk),
                        }
                        .map_err(|_| protocol())?;
                        // At most one buffer's worth past the cap, then cut back to it.
                        self.body.truncate(CAPTURE_MAX);
                        self.start += used;
                        if done {
                            break;
                        }
                        self.restart();
                        self.fill(&mut bytes_in, &mut read_at, sent_at).await?;
                    }
                }
                Framing::UntilClose => loop {
                    // What the buffer holds (the body's first bytes, which may have
                    // come with the head (#12), or the last read) is captured here,
                    // once, before the buffer is reused.
                    if capture {
                        let keep = (self.end - self.start).min(CAPTURE_MAX.saturating_sub(self.body.len()));
                        self.body.extend_from_slice(&self.buf[self.start..self.start + keep]);
                    }
                    self.restart();
                    match self.stream.read(&mut self.buf).await {
                        Ok(0) => {
                            // The close is the response's last "byte".
                            let now = Instant::now();
                            read_at = read_at.map(|(first, _)| (first, now));
                            break;
                        }
                        Ok(n) => {
                            bytes_in += n as u64;
                            self.received += n as u64;
                            self.end = n;
                        }
                        Err(e) => return Err(io_failure(&e, false)),
                    }
                },
            }
        }
        self.keep_alive = keep_alive && self.start == self.end;
        self.reused = true;
        self.settle(bytes_in);
        // A head always takes at least one read, so `read_at` is set.
        let (first_byte, last_byte) = read_at.unwrap_or((sent_at, sent_at));
        Ok(Response { status, bytes_in, sent_at, first_byte, last_byte })
    }

    /// Read a streamed body, framed by `framing`, to its end: its decoded
    /// bytes split into events (`mode`) and handed to `to` as each read
    /// completes them, dated by that read (the kernel's receive time on a
    /// stamped connection; a body read to the close is stamped here too).
    /// With a stall limit, each read waits at most until the limit runs out
    /// after the latest event (or the send): then `stream_stall`.
    #[allow(clippy::too_many_arguments)]
    async fn read_events(
        &mut self,
        framing: Framing,
        capture: bool,
        mode: Mode,
        to: &mut StreamTo<'_>,
        bytes_in: &mut u64,
        read_at: &mut Option<(Instant, Instant)>,
        sent_at: Instant,
    ) -> Result<(), ExchangeError> {
        let mut split = Split::new(mode);
        let mut last = Latest { to: &mut *to.events, at: None };
        let mut decoder = ChunkedDecoder::new();
        let mut decoded = Vec::new();
        let mut remaining = match framing {
            Framing::Length(n) => n,
            Framing::None => return Ok(()),
            Framing::Chunked | Framing::UntilClose => 0,
        };
        loop {
            let at = read_at.map_or(sent_at, |(_, latest)| latest);
            let (from, to_end) = (self.start, self.end);
            let done = match framing {
                Framing::Length(_) => {
                    let take = ((to_end - from) as u64).min(remaining);
                    remaining -= take;
                    self.start += take as usize;
                    split.feed(&self.buf[from..self.start], at, &mut last);
                    remaining == 0
                }
                Framing::Chunked => {
                    decoded.clear();
                    let (used, done) =
                        decoder.feed_into(&self.buf[from..to_end], &mut decoded).map_err(|_| protocol())?;
                    self.start += used;
                    split.feed(&decoded, at, &mut last);
                    done
                }
                Framing::UntilClose | Framing::None => {
                    self.start = to_end;
                    split.feed(&self.buf[from..to_end], at, &mut last);
                    false
                }
            };
            if capture {
                let bytes = if framing == Framing::Chunked { &decoded[..] } else { &self.buf[from..self.start] };
                let keep = bytes.len().min(CAPTURE_MAX.saturating_sub(self.body.len()));
                self.body.extend_from_slice(&bytes[..keep]);
            }
            if done {
                split.finish(at, &mut last);
                return Ok(());
            }
            self.restart();
            let read = self.read_more(bytes_in, read_at, sent_at);
            let more = match to.stall {
                Some(stall) => {
                    let deadline = last.at.unwrap_or(sent_at) + stall;
                    match tokio::time::timeout_at(deadline, read).await {
                        Ok(more) => more?,
                        Err(_) => {
                            return Err(ExchangeError { kind: FailureKind::StreamStall, nothing_received: false });
                        }
                    }
                }
                None => read.await?,
            };
            if !more {
                // The close: the end of a body read to it, else a cut answer.
                if framing != Framing::UntilClose {
                    return Err(ExchangeError { kind: FailureKind::Reset, nothing_received: false });
                }
                let now = Instant::now();
                *read_at = read_at.map(|(first, _)| (first, now));
                split.finish(now, &mut last);
                return Ok(());
            }
        }
    }

    /// One read into the buffer's free room (see [`Conn::fill`]); `false`
    /// at the close. Apart from `fill` so that the hot path's read stays as
    /// it is.
    async fn read_more(
        &mut self,
        bytes_in: &mut u64,
        read_at: &mut Option<(Instant, Instant)>,
        sent_at: Instant,
    ) -> Result<bool, ExchangeError> {
        let read = match &mut self.stream {
            Stream::Tcp(tcp) if self.stamped => read_stamped(tcp, &mut self.buf[self.end..], sent_at).await,
            stream => stream.read(&mut self.buf[self.end..]).await.map(|n| (n, Instant::now())),
        };
        match read {
            Ok((0, _)) => Ok(false),
            Ok((n, at)) => {
                *read_at = Some(read_at.map_or((at, at), |(first, _)| (first, at)));
                self.end += n;
                *bytes_in += n as u64;
                self.received += n as u64;
                Ok(true)
            }
            Err(e) => Err(io_failure(&e, false)),
        }
    }
}

/// Where a streamed answer's events go, and its stall limit.
pub(crate) struct StreamTo<'a> {
    /// The consumer.
    pub(crate) events: &'a mut dyn Events,
    /// The longest wait for an event ([`perfops_core::scenario::StreamRead::stall`]).
    pub(crate) stall: Option<Duration>,
}

/// The `Content-Type` of a complete response head (a streamed answer's
/// only: the hot path never asks).
fn content_type(head: &[u8]) -> Option<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    resp.parse(head).ok()?;
    resp.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-type")).map(|h| h.value.to_vec())
}

/// Map a connect error to its failure kind.
pub(crate) fn connect_failure(e: &io::Error) -> FailureKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => FailureKind::ConnectRefused,
        io::ErrorKind::TimedOut => FailureKind::ConnectTimeout,
        _ => FailureKind::ConnectError,
    }
}

/// Set up a plain TCP connection for the hot path.
pub(crate) fn tune(tcp: &TcpStream) -> io::Result<()> {
    tcp.set_nodelay(true)
}

/// Ask the kernel to date what `tcp` receives (`SO_TIMESTAMPNS`): each read
/// then says when its bytes arrived, however late the worker reads them.
///
/// Why: the open model's pacer lets responses wait in their sockets until its
/// next arrival is due (`coalesce`, at most `PACE_MAX`), so that one wake-up
/// serves both; dated by the read, they would count that wait as the
/// server's. The kernel's date is also what a capture of the wire shows. It
/// costs a `recvmsg` with a control message instead of a `recvfrom`, and the
/// kernel's clock read per packet received. `false`: not dated (the reads'
/// own time serves).
pub(crate) fn stamp_receives(tcp: &TcpStream) -> bool {
    setsockopt(tcp, sockopt::ReceiveTimestampns, &true).is_ok()
}

/// Read what `tcp` has into `buf`; returns how many bytes and when the
/// kernel received the last of them (or now, if it did not say), never
/// before `not_before` (the request's send: the clocks of the two dates
/// differ, see [`received_at`]).
async fn read_stamped(tcp: &TcpStream, buf: &mut [u8], not_before: Instant) -> io::Result<(usize, Instant)> {
    loop {
        tcp.readable().await?;
        // An arrival due goes out before this read (`coalesce::pacer_first`).
        if crate::coalesce::pacer_first() {
            tokio::task::yield_now().await;
        }
        match try_read_stamped(tcp, buf, not_before) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            read => return read,
        }
    }
}

/// One attempt of [`read_stamped`], for a caller that waits for readiness
/// itself (`h2::stamped`): `WouldBlock` when there was nothing to read, the
/// readiness then cleared so that the next wait goes to epoll.
pub(crate) fn try_read_stamped(tcp: &TcpStream, buf: &mut [u8], not_before: Instant) -> io::Result<(usize, Instant)> {
    let (n, stamp) = tcp.try_io(Interest::READABLE, || recv_stamped(tcp.as_raw_fd(), buf))?;
    let now = Instant::now();
    if 0 < n && n < buf.len() {
        // As tokio's own read does: a short read emptied the socket, so
        // the next read waits for epoll rather than fail a syscall first.
        let _ = tcp.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
    }
    Ok((n, stamp.map_or(now, |s| received_at(s, now, not_before))))
}

/// One `recvmsg` on a socket with `SO_TIMESTAMPNS`: bytes read and the
/// kernel's receive time of the last of them (`CLOCK_REALTIME`).
fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<TimeSpec>)> {
    let mut iov = [io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!(TimeSpec);
    let msg = recvmsg::<()>(fd, &mut iov, Some(&mut space), MsgFlags::MSG_DONTWAIT).map_err(io::Error::from)?;
    let stamp = msg.cmsgs().ok().and_then(|mut c| {
        c.find_map(|m| match m {
            ControlMessageOwned::ScmTimestampns(ts) => Some(ts),
            _ => None,
        })
    });
    Ok((msg.bytes, stamp))
}

/// The instant on the worker's clock (`CLOCK_MONOTONIC`) of a kernel receive
/// time `stamp` (`CLOCK_REALTIME`): the stamp's age on the realtime clock,
/// taken from a monotonic instant of the same moment ([`clock_pair`]). The
/// two clocks differ by a fixed offset that only NTP moves (slewing by parts
/// per million of the age: ns); a stamp from the future (the realtime clock
/// stepped back) counts as `now` (the read's own time), and nothing is dated
/// before `not_before`.
fn received_at(stamp: TimeSpec, now: Instant, not_before: Instant) -> Instant {
    let Some((mono, real)) = clock_pair() else { return now };
    let age = real.saturating_sub(Duration::from(stamp));
    mono.checked_sub(age).map_or(not_before, |at| at.max(not_before)).min(now)
}

/// The monotonic and the realtime clock at one moment: the realtime clock
/// read on both sides of the monotonic one, its middle kept, the tightest of
/// up to three tries. Read one after the other, a thread preempted between
/// the two reads dated the response early by the whole preemption: 16 µs on
/// a loaded machine made a 10 ms server's answer 9.984 ms (tests/quick.rs,
/// `open_model_is_accurate_in_rate_and_latency`). Bracketed, the error is at
/// most half the bracket, which a preemption inside makes wide, and a retry
/// replaces. Three vDSO clock reads: tens of ns.
fn clock_pair() -> Option<(Instant, Duration)> {
    let mut best: Option<(Duration, Instant, Duration)> = None;
    for _ in 0..3 {
        let before = Duration::from(clock_gettime(ClockId::CLOCK_REALTIME).ok()?);
        let mono = Instant::now();
        let after = Duration::from(clock_gettime(ClockId::CLOCK_REALTIME).ok()?);
        let gap = after.saturating_sub(before);
        if best.is_none_or(|(g, ..)| gap < g) {
            best = Some((gap, mono, before + gap / 2));
        }
        if gap < Duration::from_micros(2) {
            break;
        }
    }
    best.map(|(_, mono, real)| (mono, real))
}

/// Time left until `deadline` (zero once it has passed).
pub(crate) fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 13\r\n\r\nHello, world\n";

    fn complete(status: u16, framing: Framing, keep_alive: bool, len: usize) -> Head {
        Head::Complete { len, status, framing, keep_alive, set_cookie: false }
    }

    /// The cache answers exactly what a fresh parse answers, case by case.
    #[test]
    fn remembered_heads_parse_as_fresh_ones() {
        let mut cache = HeadCache::default();
        let head_len = OK.len() - 13;
        let ok = complete(200, Framing::Length(13), true, head_len);
        // (bytes, HEAD request?, expected), in order: each case sees what the
        // previous ones left in the cache.
        let close = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 13\r\nConnection: close\r\n\r\n";
        let cookie = b"HTTP/1.1 200 OK\r\nset-COOKIE: a=1\r\nContent-Length: 13\r\n\r\n";
        let with_cookie = Head::Complete {
            len: cookie.len(),
            status: 200,
            framing: Framing::Length(13),
            keep_alive: true,
            set_cookie: true,
        };
        let cases: [(&[u8], bool, Head); 9] = [
            (OK, false, ok),                                                        // parsed, remembered
            (OK, false, ok),                                                        // from memory
            (&OK[..head_len], false, ok),                                           // the body not yet read
            (&OK[..20], false, Head::Partial), // a prefix of the head: parsed, partial
            (OK, true, complete(200, Framing::None, true, head_len)), // same bytes, HEAD: parsed again
            (close, false, complete(200, Framing::Length(13), false, close.len())), // another head
            (OK, false, ok),                   // back to the first
            (cookie, false, with_cookie),      // a Set-Cookie (any case): flagged for the jar
            (OK, false, ok),                   // and the next head without one is not
        ];
        for (i, (bytes, head_request, want)) in cases.into_iter().enumerate() {
            let got = cache.parse(bytes, head_request).ok();
            assert_eq!(got, Some(want), "case {i}");
            assert_eq!(parse_head(bytes, head_request).ok(), Some(want), "case {i}: fresh parse");
        }
        assert!(cache.parse(b"SSH-2.0-OpenSSH\r\n\r\n", false).is_err(), "garbage is still refused");
        assert_eq!(cache.parse(OK, false).ok(), Some(ok), "and leaves the cache as it was");
    }

    /// A streamed answer over each framing the reader knows, from a real
    /// socket written in pieces 30 ms apart: its events counted and dated
    /// by the read that completed them (the gap is the server's pause), a
    /// head and first event in one read included, a plain body split into
    /// lines; and a server that stops sending fails as `stream_stall` once
    /// the limit runs out after the last event.
    #[tokio::test]
    async fn streamed_answers_over_every_framing() {
        use crate::stream::Timeline;
        let sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
        // (what: the answer's pieces, written 30 ms apart; the stall limit;
        //  events, gaps of at least 10 ms (a pause, not a read's share:
        //  a loaded machine reads late), or the failure)
        // Events and long gaps, or the failure.
        type Want = Result<(u64, usize), FailureKind>;
        let cases: [(&str, Vec<String>, Option<u64>, Want); 4] = [
            (
                "chunked SSE, two events in the head's read, one after a pause",
                vec![
                    format!("{sse}Transfer-Encoding: chunked\r\n\r\n12\r\ndata: a\n\ndata: b\n\n\r\n"),
                    "9\r\ndata: c\n\n\r\n0\r\n\r\n".into(),
                ],
                None,
                Ok((3, 1)),
            ),
            (
                "Content-Length, an event split over the pause",
                vec![format!("{sse}Content-Length: 18\r\n\r\ndata: x\n\ndata"), ": y\n\n".into()],
                None,
                Ok((2, 1)),
            ),
            (
                "lines read to the close",
                vec!["HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n{}\n".into(), "{}\n{}".into()],
                None,
                Ok((3, 1)),
            ),
            (
                "a stall: two events, then nothing within 100 ms",
                vec![format!("{sse}Content-Length: 99\r\n\r\ndata: 1\n\ndata: 2\n\n"), String::new()],
                Some(100),
                Err(FailureKind::StreamStall),
            ),
        ];
        for (what, pieces, stall, want) in cases {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let server = std::thread::spawn(move || {
                use std::io::{Read, Write};
                let (mut s, _) = listener.accept().expect("accept");
                let mut req = [0u8; 1024];
                let _ = s.read(&mut req);
                for (i, p) in pieces.iter().enumerate() {
                    if i > 0 {
                        std::thread::sleep(Duration::from_millis(if p.is_empty() { 400 } else { 30 }));
                    }
                    let _ = s.write_all(p.as_bytes());
                }
            });
            let mut conn = Conn::new(Stream::Tcp(TcpStream::connect(addr).await.expect("connect")));
            let mut timeline = Timeline::new(false);
            let mut to = StreamTo { events: &mut timeline, stall: stall.map(Duration::from_millis) };
            let got = conn.exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, false, Some(&mut to)).await;
            let long_gaps = timeline.gaps.counts().filter(|&(g, _)| g >= 10_000).map(|(_, n)| n).sum::<u64>() as usize;
            match want {
                Ok(want) => {
                    assert!(got.is_ok(), "{what}: {:?}", got.err());
                    assert_eq!((timeline.events, long_gaps), want, "{what}: gaps {:?}", timeline.gaps);
                }
                Err(kind) => {
                    assert_eq!(got.err().map(|e| e.kind), Some(kind), "{what}");
                    assert_eq!(timeline.events, 2, "{what}: the events before the stall count");
                }
            }
            let _ = server.join();
        }
    }

    /// #18: a stamped connection dates the bytes it reads by when the kernel
    /// received them, not by when the worker got round to reading them: bytes
    /// left 30 ms in the socket read as sent (between the server's clock
    /// readings around its write); unstamped, they read as 30 ms later. And
    /// nothing is dated before the floor it is given (the request's send).
    #[tokio::test]
    async fn a_stamped_read_dates_bytes_by_their_arrival_not_by_the_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut open = Vec::new();
            for _ in 0..4 {
                let (mut s, _) = listener.accept().expect("accept");
                let before = Instant::now();
                s.write_all(OK).expect("write");
                let _ = tx.send((before, Instant::now()));
                open.push(s);
            }
            std::thread::sleep(Duration::from_millis(500));
        });
        // The kernel turns its receive timestamps on a moment after the first
        // socket asks (a deferred static key): bytes received before are not
        // dated, and read as now. Ask once and give it that moment.
        let first = TcpStream::connect(addr).await.expect("connect");
        assert!(stamp_receives(&first), "SO_TIMESTAMPNS refused");
        let _ = rx.recv().expect("the server wrote");
        std::thread::sleep(Duration::from_millis(100));
        let wait = Duration::from_millis(30);
        // (stamped?, floor: before the bytes came, or just before the read)
        for (stamped, early_floor) in [(true, true), (false, true), (true, false)] {
            let mut tcp = TcpStream::connect(addr).await.expect("connect");
            assert!(!stamped || stamp_receives(&tcp), "SO_TIMESTAMPNS refused");
            let floor = Instant::now();
            // The response written, then left in the socket, unread, for 30 ms.
            let (before, after) = rx.recv().expect("the server wrote");
            std::thread::sleep((after + wait).saturating_duration_since(Instant::now()));
            let late_floor = Instant::now();
            let mut buf = [0u8; 256];
            let (n, at) = if stamped {
                read_stamped(&tcp, &mut buf, if early_floor { floor } else { late_floor }).await.expect("read")
            } else {
                (tcp.read(&mut buf).await.expect("read"), Instant::now())
            };
            assert_eq!(&buf[..n], OK);
            let case = format!("stamped {stamped}, early floor {early_floor}");
            match (stamped, early_floor) {
                // Received in the write, or in the softirq right after it on a busy machine.
                // The two clocks' offset moves with NTP's slewing (at most 500 ppm:
                // 15 µs in 30 ms), hence a millisecond's leeway before the write.
                (true, true) => assert!(
                    before - Duration::from_millis(1) <= at && at < after + wait / 3,
                    "{case}: dated {:+.1} µs from the write",
                    (at.into_std().duration_since(before.into_std()).as_secs_f64()
                        - before.into_std().duration_since(at.into_std()).as_secs_f64())
                        * 1e6
                ),
                (false, _) => assert!(at >= after + wait, "{case}: dated by the read"),
                (true, false) => assert_eq!(at, late_floor, "{case}: never before the floor"),
            }
        }
    }
}
