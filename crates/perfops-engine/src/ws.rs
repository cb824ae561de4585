//! The WebSocket client connection (RFC 6455): the upgrade, one message's
//! round trip, a held connection's idle time, the close, and which
//! [`FailureKind`] each way of ending is. The session a `websocket:` step
//! runs on it, and what it records, is the worker's (`worker/websocket.rs`).
//!
//! Framing is tungstenite's (`tokio-tungstenite`) over the worker's own
//! [`Stream`]: the TCP connect and the TLS handshake stay the worker's (timed
//! as for HTTP/1.1, on the same `TCP_NODELAY` socket); the upgrade handshake
//! is this module's (see [`upgrade`]), and tungstenite frames what follows.
//!
//! What a held connection costs is what lets a generator hold 10,000 of them
//! (#14, the figure #12 set for HTTP/1.1). tungstenite's defaults read into a
//! 128 KiB buffer allocated with the connection and kept for its life
//! (1.25 GiB for 10,000 connections), and its handshake leaves a 4 KiB one.
//! Here the read buffer is 512 bytes (a frame announced larger still arrives
//! whole: the buffer reserves the frame's length, as http1.rs's grows for a
//! large body; it is not shrunk afterwards, so a connection that once read a
//! large message keeps that much), and frames are written when sent
//! (`write_buffer_size: 0`), never gathered in a 128 KiB write buffer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use perfops_core::measure::FailureKind;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Error, Message};

use crate::http1::Stream;

/// The read buffer a connection starts with and keeps while idle (a frame
/// announced larger reserves its length).
const READ_BUF: usize = 512;
/// The buffer an upgrade's answer is read into first, doubled while the head
/// does not fit: a 101's head is 130-200 bytes (tungstenite's, Python's), and
/// every upgrade waiting for its answer holds one.
const HEAD_BUF: usize = 256;
/// An upgrade response head larger than this is a protocol error.
const MAX_HEAD: usize = 64 * 1024;
/// How long a close waits for the server to end the TCP connection once
/// both close frames have crossed (see [`close`]).
const END_WAIT: Duration = Duration::from_secs(1);
/// The largest message accepted (as http1.rs's `CAPTURE_MAX` for a body kept
/// for `expect`): a larger one is a protocol failure, not a reason for memory.
const MAX_MESSAGE: usize = 1024 * 1024;

/// A [`Stream`] that counts the bytes read and written through it, so that a
/// WebSocket step's `bytes_in`/`bytes_out` are what crossed the socket
/// (upgrade head, frame headers and masks included), as for HTTP/1.1.
pub(crate) struct Counted {
    inner: Stream,
    pub(crate) read: u64,
    pub(crate) written: u64,
}

impl AsyncRead for Counted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let out = Pin::new(&mut me.inner).poll_read(cx, buf);
        me.read += (buf.filled().len() - before) as u64;
        out
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let out = Pin::new(&mut me.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = out {
            me.written += n as u64;
        }
        out
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// An upgraded connection.
pub(crate) type Ws = WebSocketStream<Counted>;

/// Why an upgrade did not give a WebSocket connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The server answered with this status instead of 101.
    Status(u16),
    /// Anything else: reset, garbage, a bad `Sec-WebSocket-Accept`.
    Failed(FailureKind),
}

impl Refused {
    /// The failure kind counted: an HTTP status's (4xx, 5xx), or `protocol`
    /// for an answer that is neither 101 nor an error status (a 200, a 302).
    pub(crate) fn kind(self) -> FailureKind {
        match self {
            Refused::Status(status) => FailureKind::of_status(status).unwrap_or(FailureKind::Protocol),
            Refused::Failed(kind) => kind,
        }
    }
}

/// What an upgrade measured, whether it succeeded or not.
#[derive(Debug, Default)]
pub(crate) struct Handshake {
    /// Bytes of the upgrade request written.
    pub(crate) bytes_out: u64,
    /// Bytes of the response read (its head, and any frame that came with it).
    pub(crate) bytes_in: u64,
    /// When the response's first bytes were read.
    pub(crate) first_byte: Option<Instant>,
    /// The `Set-Cookie` values of the answer's head, whatever its status
    /// (as HTTP/1.1's answers, and browsers, keep them), for the flow's jar.
    pub(crate) set_cookies: Vec<Vec<u8>>,
}

fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUF)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// An upgrade request as it goes out, and the key its answer must accept.
pub(crate) struct Upgrade {
    /// The request's bytes (the worker adds the flow's cookies).
    pub(crate) bytes: Vec<u8>,
    key: String,
}

impl Upgrade {
    /// The upgrade request of `path` on `authority` with the step's
    /// `headers`, under a new key; `None` when a rendered path or header
    /// would break its framing.
    pub(crate) fn new(authority: &str, path: &[u8], headers: &[(String, Vec<u8>)]) -> Option<Upgrade> {
        let key = generate_key();
        let bytes = upgrade_request(authority, path, headers, &key)?;
        Some(Upgrade { bytes, key })
    }
}

/// Headers the handshake sets itself: a step's are not sent twice.
const OWN_HEADERS: &[&str] = &["upgrade", "connection", "sec-websocket-key", "sec-websocket-version"];

/// The upgrade request of `path` on `authority` with the step's `headers`
/// and `key`; `None` when a rendered path or header would break its framing.
fn upgrade_request(authority: &str, path: &[u8], headers: &[(String, Vec<u8>)], key: &str) -> Option<Vec<u8>> {
    if path.iter().any(|&b| b == b' ' || b == b'\r' || b == b'\n') {
        return None;
    }
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(path);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !has("host") {
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    if !has("user-agent") {
        out.extend_from_slice(concat!("User-Agent: perfops/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes());
    }
    out.extend_from_slice(b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n");
    out.extend_from_slice(format!("Sec-WebSocket-Key: {key}\r\n").as_bytes());
    for (name, value) in headers {
        if OWN_HEADERS.iter().any(|own| name.eq_ignore_ascii_case(own)) {
            continue;
        }
        // A line break rendered into a header would forge another: refused.
        if name.contains(['\r', '\n', ':']) || value.iter().any(|&b| b == b'\r' || b == b'\n') {
            return None;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some(out)
}

/// Does response head `resp` accept the upgrade asked with `key` (RFC 6455
/// §4.1: `Upgrade: websocket`, `Connection: upgrade`, the right
/// `Sec-WebSocket-Accept`)?
fn accepts(resp: &httparse::Response<'_, '_>, key: &str) -> bool {
    let value = |name: &str| resp.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
    let has_token = |v: Option<&[u8]>, token: &[u8]| {
        v.is_some_and(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token)))
    };
    has_token(value("upgrade"), b"websocket")
        && has_token(value("connection"), b"upgrade")
        && value("sec-websocket-accept").is_some_and(|v| v.trim_ascii() == derive_accept_key(key.as_bytes()).as_bytes())
}

/// Upgrade `stream` to a WebSocket connection (RFC 6455 §4): send the
/// `request` (from [`Upgrade::new`], with the flow's cookies), read the
/// answer, and check that it accepts the request's key. What it measured
/// goes to `hs`, also when it fails.
///
/// The handshake is ours, not tungstenite's: tungstenite's reads into a
/// 4 KiB buffer that the connection then keeps as its read buffer for its
/// life (4 KiB of every held connection), and it does not say when the
/// answer's first byte came. Here the head is read into a buffer dropped
/// once it is parsed, and the connection's own starts at [`READ_BUF`].
pub(crate) async fn upgrade(mut stream: Stream, request: Upgrade, hs: &mut Handshake) -> Result<Ws, Refused> {
    let Upgrade { bytes: request, key } = request;
    let io = |e: &io::Error| match e.kind() {
        io::ErrorKind::InvalidData => Refused::Failed(FailureKind::Protocol),
        _ => Refused::Failed(FailureKind::Reset),
    };
    stream.write_all(&request).await.map_err(|e| io(&e))?;
    stream.flush().await.map_err(|e| io(&e))?;
    hs.bytes_out = request.len() as u64;
    drop(request);
    let mut buf = vec![0; HEAD_BUF];
    let mut end = 0;
    loop {
        if end == buf.len() {
            if buf.len() >= MAX_HEAD {
                return Err(Refused::Failed(FailureKind::Protocol));
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = match stream.read(&mut buf[end..]).await {
            Ok(0) => return Err(Refused::Failed(FailureKind::Reset)),
            Ok(n) => n,
            Err(e) => return Err(io(&e)),
        };
        hs.first_byte.get_or_insert_with(Instant::now);
        end += n;
        hs.bytes_in += n as u64;
        let Some(len) = answer(&buf[..end], &key, &mut hs.set_cookies)? else { continue };
        let counted = Counted { inner: stream, read: hs.bytes_in, written: hs.bytes_out };
        // A frame the server sent at once, read with the head, is the
        // connection's first bytes.
        let rest = (len < end).then(|| buf[len..end].to_vec());
        drop(buf);
        let ws = match rest {
            None => WebSocketStream::from_raw_socket(counted, Role::Client, Some(config())).await,
            Some(rest) => WebSocketStream::from_partially_read(counted, rest, Role::Client, Some(config())).await,
        };
        return Ok(ws);
    }
}

/// What the head of an upgrade's answer in `head` says to the request sent
/// with `key`: `Ok(None)`, not whole yet; `Ok(Some(len))`, the upgrade
/// accepted by a head of `len` bytes; or why it was refused. The
/// `Set-Cookie` values of a whole head go to `set_cookies`.
///
/// Apart from [`upgrade`], so that its 64 header slots (2 KiB) are on this
/// call's stack: in `upgrade`, they were in the state of every upgrade
/// waiting for its answer (2.7 KiB of it; the worker's whole upgrade, 8.6
/// KiB), which 10,000 closed-loop users opening sessions at once against a
/// slow server all were (a peak of 164 MiB, 16 KiB per user, where a held
/// session costs 8 KiB).
fn answer(head: &[u8], key: &str, set_cookies: &mut Vec<Vec<u8>>) -> Result<Option<usize>, Refused> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut fields);
    let len = match resp.parse(head) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Refused::Failed(FailureKind::Protocol)),
    };
    let cookies = resp.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("set-cookie"));
    set_cookies.extend(cookies.map(|h| h.value.to_vec()));
    match resp.code {
        Some(101) if accepts(&resp, key) => Ok(Some(len)),
        Some(101) | None => Err(Refused::Failed(FailureKind::Protocol)),
        Some(status) => Err(Refused::Status(status)),
    }
}

/// The failure kind of an error on an upgraded connection.
fn failure(e: &Error) -> FailureKind {
    match e {
        // rustls reports bad records as InvalidData.
        Error::Io(e) if e.kind() == io::ErrorKind::InvalidData => FailureKind::Protocol,
        // The peer dropped or reset the connection: code 1006, abnormal.
        Error::Io(_) | Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => FailureKind::WsAbnormalClose,
        // The closing handshake was done (the peer's close frame was read).
        Error::ConnectionClosed | Error::AlreadyClosed => FailureKind::WsClose,
        _ => FailureKind::Protocol,
    }
}

/// The failure kind of a close frame with `code` (`None`: none given, 1005):
/// none for a normal closure or a peer going away.
fn close_failure(code: Option<CloseCode>) -> Option<FailureKind> {
    match code {
        Some(CloseCode::Normal | CloseCode::Away) | None => None,
        Some(_) => Some(FailureKind::WsClose),
    }
}

/// One message answered.
pub(crate) struct RoundTrip {
    /// When the message was written (after its flush).
    pub(crate) sent_at: Instant,
    /// When the reply was read.
    pub(crate) reply_at: Instant,
    /// The reply's payload (text or binary).
    pub(crate) reply: Bytes,
}

/// Send `text` and read frames until a data message comes back: the reply.
/// Pings are answered on the way (tungstenite queues the pong, written with
/// the next write or flush); a close frame, whatever its code, means the
/// reply will never come (`ws_close`), the connection dropped means
/// `ws_abnormal_close`.
pub(crate) async fn round_trip(ws: &mut Ws, text: String) -> Result<RoundTrip, FailureKind> {
    ws.send(Message::text(text)).await.map_err(|e| failure(&e))?;
    let sent_at = Instant::now();
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return Ok(RoundTrip { sent_at, reply_at: Instant::now(), reply: t.into() }),
            Some(Ok(Message::Binary(b))) => return Ok(RoundTrip { sent_at, reply_at: Instant::now(), reply: b }),
            Some(Ok(Message::Close(_))) => return Err(FailureKind::WsClose),
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                // A pong queued by tungstenite goes out with a flush.
                let _ = ws.flush().await;
            }
            Some(Err(e)) => return Err(failure(&e)),
            None => return Err(FailureKind::WsAbnormalClose),
        }
    }
}

/// How a held connection's idle time ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// The timer fired: the connection is still open.
    Elapsed,
    /// The peer closed it normally (1000, 1001 or no code).
    Closed,
}

/// Keep `ws` open until `timer` fires, reading what arrives: pings are
/// answered, messages the server pushes are read and let go (their bytes
/// are counted), and a close or a drop ends the wait. Nothing is allocated
/// while nothing arrives: the task waits on the socket and the timer.
pub(crate) async fn idle(ws: &mut Ws, mut timer: Pin<&mut Sleep>) -> Result<Idle, FailureKind> {
    loop {
        tokio::select! {
            biased;
            () = timer.as_mut() => return Ok(Idle::Elapsed),
            frame = ws.next() => match frame {
                Some(Ok(Message::Close(frame))) => {
                    return match close_failure(frame.map(|f| f.code)) {
                        Some(kind) => Err(kind),
                        None => Ok(Idle::Closed),
                    };
                }
                Some(Ok(Message::Ping(_))) => {
                    let _ = ws.flush().await;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(failure(&e)),
                None => return Err(FailureKind::WsAbnormalClose),
            },
        }
    }
}

/// Close `ws` normally (1000), or answer the server's close: send the close
/// frame and read until the server's comes back (the caller bounds that
/// wait: the session's timer, its request timeout), then until the server
/// ends the TCP connection (RFC 6455 §7.1.1: the server closes it first,
/// once both close frames have crossed), at most [`END_WAIT`], and drop it.
///
/// Why wait for the server's answer, and that long: a closed-loop user
/// opens its next session when this returns. Waiting a fixed second,
/// 10,000 users closing at once against python3-websockets (a server that
/// takes seconds to answer that many closes) reopened while the server
/// still held their last connections: it counted 15,300 open for 10,000
/// users. Why not as long for the end of the connection: a server that
/// waits for the client to close it first (the RFC allows either) would
/// then hold every session a whole timeout.
pub(crate) async fn close(mut ws: Ws) {
    let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    match ws.close(Some(frame)).await {
        Ok(()) => {}
        // The server closed first (its close frame was read): the reply
        // tungstenite queued goes out with the next read, below.
        Err(Error::Protocol(ProtocolError::SendAfterClosing)) => {}
        Err(_) => return,
    }
    loop {
        match ws.next().await {
            Some(Ok(Message::Close(_))) => break,
            Some(Ok(_)) => {}
            // The connection ended (after the server's close frame, when it
            // closed first), or broke.
            Some(Err(_)) | None => return,
        }
    }
    let _ = tokio::time::timeout(END_WAIT, async { while let Some(Ok(_)) = ws.next().await {} }).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a WebSocket connection can end, and the kind it counts as.
    #[test]
    fn endings_are_classified() {
        let io = |kind: io::ErrorKind| Error::Io(io::Error::from(kind));
        // (error on an upgraded connection, kind)
        let cases = [
            // the peer reset the TCP connection: 1006
            (io(io::ErrorKind::ConnectionReset), FailureKind::WsAbnormalClose),
            // EOF without a close frame, as tungstenite reports it: 1006
            (Error::Protocol(ProtocolError::ResetWithoutClosingHandshake), FailureKind::WsAbnormalClose),
            // a bad TLS record: not a closure
            (io(io::ErrorKind::InvalidData), FailureKind::Protocol),
            // the close handshake already happened
            (Error::ConnectionClosed, FailureKind::WsClose),
            // a masked frame from a server breaks the protocol
            (Error::Protocol(ProtocolError::MaskedFrameFromServer), FailureKind::Protocol),
        ];
        for (i, (e, kind)) in cases.iter().enumerate() {
            assert_eq!(failure(e), *kind, "case {i}: {e}");
        }
        // (close code, failure): normal endings are none
        let codes = [
            (None, None),
            (Some(CloseCode::Normal), None),
            (Some(CloseCode::Away), None),
            (Some(CloseCode::Error), Some(FailureKind::WsClose)), // 1011
            (Some(CloseCode::Policy), Some(FailureKind::WsClose)), // 1008
            (Some(CloseCode::from(4000)), Some(FailureKind::WsClose)), // an application's code
        ];
        for (code, kind) in codes {
            assert_eq!(close_failure(code), kind, "{code:?}");
        }
        // A refused upgrade: an error status counts as HTTP's, anything else as a protocol error.
        let refused = [(404, FailureKind::Http4xx), (503, FailureKind::Http5xx), (200, FailureKind::Protocol)];
        for (status, kind) in refused {
            assert_eq!(Refused::Status(status).kind(), kind, "{status}");
        }
    }

    /// The upgrade request carries the handshake's fields and the step's
    /// headers (never a second copy of the handshake's own), and refuses
    /// what would break its framing.
    #[test]
    fn upgrade_requests_are_framed() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let headers = vec![("Authorization".to_string(), b"Bearer t".to_vec()), ("Upgrade".into(), b"h2c".to_vec())];
        let req = String::from_utf8(upgrade_request("127.0.0.1:9", b"/chat?r=1", &headers, key).unwrap()).unwrap();
        assert!(req.starts_with("GET /chat?r=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: perfops/"), "{req}");
        assert!(req.contains("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"));
        assert!(
            req.contains(&format!("Sec-WebSocket-Key: {key}\r\n")) && req.ends_with("Authorization: Bearer t\r\n\r\n")
        );
        assert_eq!(req.matches("Upgrade:").count(), 1, "the step's Upgrade is not sent: {req}");
        // (path, headers): a rendered line break or space would forge the request
        type Headers = Vec<(String, Vec<u8>)>;
        let bad: [(&[u8], Headers); 3] = [
            (b"/a b", Vec::new()),
            (b"/", vec![("X".into(), b"1\r\nEvil: 2".to_vec())]),
            (b"/", vec![("X: y".into(), b"1".to_vec())]),
        ];
        for (i, (path, headers)) in bad.iter().enumerate() {
            assert!(upgrade_request("h", path, headers, key).is_none(), "case {i}");
        }
    }

    /// An upgrade waiting for its answer keeps little more than its
    /// connection and its buffer's pointer: the answer head's 64 header
    /// slots (2 KiB) were in its state (2,744 bytes), and 10,000 closed-loop
    /// users opening sessions at once against a slow server all waited
    /// there (16 KiB per user at the peak, against 8 KiB held).
    #[tokio::test]
    async fn an_upgrade_waiting_for_its_answer_is_small() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
        let tcp = tokio::net::TcpStream::connect(listener.local_addr().expect("address")).await.expect("connect");
        let mut hs = Handshake::default();
        let request = Upgrade::new("127.0.0.1", b"/", &[]).expect("a request");
        let waiting = upgrade(Stream::Tcp(tcp), request, &mut hs);
        let size = std::mem::size_of_val(&waiting);
        assert!(size <= 1024, "an upgrade's future is {size} bytes");
    }

    /// Every `Set-Cookie` of a whole answer's head is collected for the
    /// flow's jar, whatever the status and the name's case; a head not yet
    /// whole gives none (it is parsed again when more comes).
    #[test]
    fn set_cookies_of_an_answer_are_collected() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
        // (head, what answer() says, the Set-Cookie values collected)
        type Case = (String, Result<Option<usize>, Refused>, Vec<&'static str>);
        let cases: [Case; 3] = [
            (
                format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSet-Cookie: a=1; Path=/\r\nset-cookie: b=2\r\n\r\n"
                ),
                Ok(Some(0)), // the head's length, filled in below
                vec!["a=1; Path=/", "b=2"],
            ),
            (
                "HTTP/1.1 401 Unauthorized\r\nSET-COOKIE: session=; Max-Age=0\r\n\r\n".into(),
                Err(Refused::Status(401)),
                vec!["session=; Max-Age=0"],
            ),
            ("HTTP/1.1 101 Switching Protocols\r\nSet-Cookie: c=3\r\n".into(), Ok(None), vec![]), // not whole yet
        ];
        for (i, (head, want, cookies)) in cases.into_iter().enumerate() {
            let want = match want {
                Ok(Some(_)) => Ok(Some(head.len())),
                other => other,
            };
            let mut got = Vec::new();
            assert_eq!(answer(head.as_bytes(), key, &mut got), want, "case {i}");
            let got: Vec<&str> = got.iter().map(|v| std::str::from_utf8(v).expect("utf-8")).collect();
            assert_eq!(got, cookies, "case {i}");
        }
    }

    /// RFC 6455 §1.3's example key and accept value, and what a 101 must say.
    #[test]
    fn upgrade_answers_are_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let answer = |upgrade: &str, connection: &str, accept: &str| {
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: {upgrade}\r\nConnection: {connection}\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            )
        };
        let good = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
        // (response head, accepted)
        let cases = [
            (answer("websocket", "Upgrade", good), true),
            (answer("WebSocket", "keep-alive, upgrade", good), true), // tokens, any case
            (answer("websocket", "Upgrade", "AAAA"), false),          // another key's accept
            (answer("h2c", "Upgrade", good), false),                  // another protocol
            (answer("websocket", "close", good), false),              // no Connection: upgrade
        ];
        for (i, (head, want)) in cases.iter().enumerate() {
            let mut fields = [httparse::EMPTY_HEADER; 16];
            let mut resp = httparse::Response::new(&mut fields);
            assert!(resp.parse(head.as_bytes()).unwrap().is_complete());
            assert_eq!(accepts(&resp, key), *want, "case {i}");
        }
    }
}
