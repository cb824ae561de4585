//! The WebSocket client connection (RFC 6455): the upgrade, one message's
//! round trip, a held connection's idle time, the close, and which
//! [`FailureKind`] each way of ending is. The session a `websocket:` step
//! runs on it, and what it records, is the worker's (`worker/websocket.rs`).
//!
//! Framing is tungstenite's (`tokio-tungstenite`, its handshake feature only)
//! over the worker's own [`Stream`]: the TCP connect and the TLS handshake
//! stay the worker's (timed as for HTTP/1.1, with the same `TCP_NODELAY`
//! socket), and this module only speaks WebSocket on what they produced.
//!
//! What a held connection costs is what lets a generator hold 10,000 of them
//! (#14, the same figure as #12's for HTTP/1.1). tungstenite's defaults read
//! into a 128 KiB buffer allocated when the connection is made and kept for
//! its life: 1.25 GiB for 10,000 connections. Here its read buffer is 1 KiB
//! (a frame larger than that still arrives whole: the buffer reserves the
//! frame's length as its header announces it, as http1.rs's buffer grows for
//! a large body), and frames are written when sent (`write_buffer_size: 0`),
//! not gathered in a 128 KiB write buffer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use perfops_core::measure::FailureKind;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Error, Message};

use crate::http1::Stream;

/// The read buffer a connection starts with and keeps while idle.
const READ_BUF: usize = 1024;
/// The largest message accepted (as http1.rs's `CAPTURE_MAX` for a body kept
/// for `expect`): a larger one is a protocol failure, not a reason for memory.
const MAX_MESSAGE: usize = 1024 * 1024;
/// How long a close waits for the peer's close frame before the connection is
/// dropped anyway.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// A [`Stream`] that counts the bytes read and written through it, so that a
/// WebSocket step's `bytes_in`/`bytes_out` are what crossed the socket
/// (upgrade head, frame headers and masks included), as for HTTP/1.1.
pub(crate) struct Counted {
    inner: Stream,
    pub(crate) read: u64,
    pub(crate) written: u64,
}

impl Counted {
    pub(crate) fn new(inner: Stream) -> Counted {
        Counted { inner, read: 0, written: 0 }
    }
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

fn config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUF)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// Upgrade `stream` to a WebSocket connection to `url` (`ws://host/path`;
/// for a TLS stream, `wss://`), sending `headers` (name, value) with the
/// request beside the handshake's own.
pub(crate) async fn upgrade(stream: Stream, url: &str, headers: &[(String, Vec<u8>)]) -> Result<Ws, Refused> {
    let mut request = url.into_client_request().map_err(|_| Refused::Failed(FailureKind::Protocol))?;
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) else {
            // A header that cannot be sent (a line break rendered into it):
            // the request is refused before it leaves, as a protocol error.
            return Err(Refused::Failed(FailureKind::Protocol));
        };
        request.headers_mut().insert(name, value);
    }
    if !request.headers().contains_key("user-agent") {
        request
            .headers_mut()
            .insert("user-agent", HeaderValue::from_static(concat!("perfops/", env!("CARGO_PKG_VERSION"))));
    }
    match tokio_tungstenite::client_async_with_config(request, Counted::new(stream), Some(config())).await {
        Ok((ws, _response)) => Ok(ws),
        Err(Error::Http(response)) => Err(Refused::Status(response.status().as_u16())),
        Err(e) => Err(Refused::Failed(upgrade_failure(&e))),
    }
}

/// The failure kind of an error before the upgrade was answered: HTTP's.
fn upgrade_failure(e: &Error) -> FailureKind {
    match e {
        Error::Io(e) if e.kind() == io::ErrorKind::InvalidData => FailureKind::Protocol,
        Error::Io(_) | Error::ConnectionClosed | Error::AlreadyClosed => FailureKind::Reset,
        _ => FailureKind::Protocol,
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

/// Close `ws` normally (1000): send the close frame and wait a little for
/// the peer's, then drop the connection whatever came back.
pub(crate) async fn close(mut ws: Ws) {
    let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        if ws.close(Some(frame)).await.is_err() {
            return;
        }
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
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
        // Before the upgrade was answered, HTTP's kinds.
        assert_eq!(upgrade_failure(&io(io::ErrorKind::ConnectionReset)), FailureKind::Reset);
        assert_eq!(
            upgrade_failure(&Error::Protocol(ProtocolError::SecWebSocketAcceptKeyMismatch)),
            FailureKind::Protocol
        );
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
}
