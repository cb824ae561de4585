//! One unary gRPC call outside a run, on perfops' own HTTP/2 client
//! (`h2/conn.rs`): a connection to a [`Target`] (h2c for `http://`, TLS with
//! ALPN `h2` for `https://`), a request of one framed message with the
//! caller's metadata, and what came back: the gRPC status (from the
//! trailers, or the headers of a trailers-only answer), its message, and
//! the first message of the answer.
//!
//! ```text
//!   connect (TCP, TLS + ALPN h2 when the target is https)   ─┐
//!   HEADERS  :method POST :path /pkg.Service/Method           │ all within
//!            content-type application/grpc, te trailers,      │ the deadline
//!            grpc-timeout, the caller's metadata              │ (grpc-timeout
//!   DATA     0 | len u32 | message            END_STREAM      │  tells the
//!   <- :status 200, DATA (framed), trailers grpc-status       │  server too)
//!      or a trailers-only answer (grpc-status in the headers)─┘
//! ```
//!
//! Two callers: server reflection before a run (`reflection.rs`, several
//! calls on one connection, through [`connect`] and [`ask`]) and the OTLP
//! gRPC output (`perfops_run`, one call per second on a new connection,
//! through [`call`]). Not here: the run's own gRPC steps (`http2.rs`, a pool
//! of connections on the workers' hot path), and what a status means to a
//! caller (retry or not is the caller's).
//!
//! The connection task is driven inside the call's own future, not spawned:
//! a caller needs no `LocalSet`, a current-thread runtime that blocks on the
//! call is enough (the output's thread is no tokio thread).

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::h2::conn::{Block, Conn, LARGE_WINDOW, Windows};
use crate::h2::hpack;
use crate::http1::Stream;
use crate::target::Target;
use crate::tls;

/// The most of an answer read, bytes.
pub const ANSWER_MAX: usize = 64 << 20;

/// What a call came to: the server answered (whatever its status).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The gRPC status (0: OK).
    pub status: u32,
    /// `grpc-message`, as sent (empty when none).
    pub message: String,
    /// The answer's first message, when whole and uncompressed.
    pub body: Option<Bytes>,
}

/// Why a call has no [`Reply`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnaryError {
    /// No connection: refused, unreachable.
    #[error("{0}")]
    Unreachable(String),
    /// The server answered with an HTTP status other than 200 and no gRPC
    /// status (a proxy, or not a gRPC server).
    #[error("HTTP status {0}")]
    Http(u16),
    /// TLS, HTTP/2 or a malformed answer.
    #[error("{0}")]
    Failed(String),
    /// Nothing whole within the deadline.
    #[error("no answer within {0:?}")]
    Deadline(Duration),
}

/// One unary call of `path` (`/package.Service/Method`) with `message` (the
/// protobuf bytes, framed here) and `metadata` (lower-case names), on a new
/// connection to `target`, all within `deadline`. `insecure` accepts any
/// TLS certificate.
pub async fn call(
    target: &Target,
    insecure: bool,
    path: &str,
    metadata: &[(String, String)],
    message: &[u8],
    deadline: Duration,
) -> Result<Reply, UnaryError> {
    let work = async {
        let io = connect(target, insecure).await?;
        let conn = Conn::new(Windows { stream: LARGE_WINDOW, connection: LARGE_WINDOW });
        let timeout = grpc_timeout(deadline);
        let mut fields: Vec<(&str, &str)> = vec![("grpc-timeout", &timeout)];
        fields.extend(metadata.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        // The connection ends with this future: dropped, its socket closed.
        with_driver(&conn, io, async {
            std::future::poll_fn(|cx| conn.poll_ready(cx))
                .await
                .map_err(|kind| UnaryError::Failed(format!("HTTP/2: {}", kind.name())))?;
            ask(&conn, target, path, &fields, message).await
        })
        .await
    };
    tokio::time::timeout(deadline, work).await.unwrap_or(Err(UnaryError::Deadline(deadline)))
}

/// `fut` polled with the connection's task beside it, in one future: the
/// connection runs as long as `fut` does.
pub(crate) async fn with_driver<T>(conn: &Conn, io: Stream, fut: impl Future<Output = T>) -> T {
    let mut drive = pin!(conn.drive(io));
    let mut fut = pin!(fut);
    let mut driven = false;
    std::future::poll_fn(|cx| {
        // The connection first: what it reads completes the streams that
        // `fut` then finds done. Once it ended, its streams have failed.
        if !driven && drive.as_mut().poll(cx).is_ready() {
            driven = true;
        }
        match fut.as_mut().poll(cx) {
            Poll::Ready(t) => Poll::Ready(t),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A connection to `target`: TCP with `TCP_NODELAY`, then TLS offering
/// ALPN `h2` alone when the target is `https`.
pub(crate) async fn connect(target: &Target, insecure: bool) -> Result<Stream, UnaryError> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| UnaryError::Unreachable(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return Ok(Stream::Tcp(tcp));
    }
    let config = tls::Trust::target(insecure, None)
        .and_then(|trust| tls::client(trust, tls::ALPN_H2))
        .map_err(|e| UnaryError::Failed(e.to_string()))?;
    let name = ServerName::try_from(target.host.clone())
        .map_err(|_| UnaryError::Failed(format!("`{}` is not a valid TLS server name", target.host)))?;
    let tls =
        TlsConnector::from(config).connect(name, tcp).await.map_err(|e| UnaryError::Failed(format!("TLS: {e}")))?;
    Ok(Stream::Tls(Box::new(tls)))
}

/// One call on `conn`, ready: `fields` after the pseudo-headers and gRPC's
/// own, `message` framed. The status from a trailers-only answer's headers
/// is read before the HTTP status, as gRPC says.
pub(crate) async fn ask(
    conn: &Conn,
    target: &Target,
    path: &str,
    fields: &[(&str, &str)],
    message: &[u8],
) -> Result<Reply, UnaryError> {
    let failed = |kind: perfops_core::measure::FailureKind| UnaryError::Failed(format!("HTTP/2: {}", kind.name()));
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", target.scheme()),
        (":authority", target.authority.as_str()),
        (":path", path),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    .into_iter()
    .chain(fields.iter().copied())
    {
        hpack::encode_field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let id = conn.open(Block::Raw(&block), &frame(message), Some(ANSWER_MAX)).map_err(|e| failed(e.kind))?;
    let answer = std::future::poll_fn(|cx| conn.poll_answer(id, cx)).await.map_err(|e| failed(e.kind))?;
    let got = answer.captured.unwrap_or_default();
    let reply = |status, fields: &[(String, Vec<u8>)], body| Reply {
        status,
        message: field(fields, "grpc-message").unwrap_or("").to_string(),
        body,
    };
    if let Some(code) = grpc_status(&got.headers) {
        return Ok(reply(code, &got.headers, None));
    }
    if answer.status != 200 {
        return Err(UnaryError::Http(answer.status));
    }
    if got.body.len() >= ANSWER_MAX {
        return Err(UnaryError::Failed("an answer over 64 MiB".into()));
    }
    let code = grpc_status(&got.trailers).ok_or_else(|| UnaryError::Failed("an answer without grpc-status".into()))?;
    let mut data = Bytes::from(got.body);
    Ok(reply(code, &got.trailers, unframe(&mut data)))
}

/// `grpc-timeout` for `d`: milliseconds, at most 8 digits as gRPC allows
/// (a day and more is said in seconds).
fn grpc_timeout(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms < 100_000_000 { format!("{ms}m") } else { format!("{}S", d.as_secs().min(99_999_999)) }
}

/// A field of a captured answer's headers or trailers, as text.
fn field<'a>(fields: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
}

fn grpc_status(fields: &[(String, Vec<u8>)]) -> Option<u32> {
    field(fields, "grpc-status").and_then(|v| v.trim().parse().ok())
}

/// A message framed for gRPC: uncompressed, its length, its bytes.
pub(crate) fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    out.put_slice(message);
    out.freeze()
}

/// The first framed message of `data`, if whole and uncompressed.
pub(crate) fn unframe(data: &mut Bytes) -> Option<Bytes> {
    if data.len() < 5 || data[0] != 0 {
        return None;
    }
    data.advance(1);
    let len = data.get_u32() as usize;
    (data.len() >= len).then(|| data.split_to(len))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::Instant;

    use perfops_testkit::grpc::grpcio_echo;

    use super::*;

    fn block_on<T>(f: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(f)
    }

    /// `Msg { text }` as bytes: field 1, a string.
    fn msg(text: &str) -> Vec<u8> {
        [&[0x0a, text.len() as u8][..], text.as_bytes()].concat()
    }

    /// Against grpcio (gRPC's C core), each case one call on a new
    /// connection; the answers are the server's, not ours.
    #[test]
    fn a_unary_call_against_a_real_grpc_server() {
        // Every 2nd `Say` is UNAVAILABLE; each waits 0 s.
        let server = grpcio_echo(2, Duration::ZERO);
        let target = Target::parse(&server.url(0)).expect("a target");
        let metadata = |v: &str| vec![("authorization".to_string(), v.to_string())];
        let go = |path: &str, md: Vec<(String, String)>| {
            block_on(call(&target, false, path, &md, &msg("hi"), Duration::from_secs(10))).expect("an answer")
        };
        // (path, metadata, status, message, body)
        type Case = (&'static str, Vec<(String, String)>, u32, &'static str, Option<Vec<u8>>);
        let cases: [Case; 5] = [
            // The message echoed: OK, its bytes back.
            ("/bench.Echo/Say", vec![], 0, "", Some(msg("hi"))),
            // The server's second call: UNAVAILABLE (14), its message from the trailers.
            ("/bench.Echo/Say", vec![], 14, "shedding load", None),
            // Metadata reach the server: the right token is let in...
            ("/bench.Echo/Private", metadata("Bearer t0k"), 0, "", Some(msg("hi"))),
            // ...and a wrong one is UNAUTHENTICATED (16).
            ("/bench.Echo/Private", metadata("Bearer no"), 16, "no token", None),
            // No such method: UNIMPLEMENTED (12), a trailers-only answer.
            ("/bench.Echo/Nope", vec![], 12, "Method not found!", None),
        ];
        for (path, md, status, message, body) in cases {
            let reply = go(path, md);
            assert_eq!(reply.status, status, "{path}: {reply:?}");
            assert_eq!(reply.message, message, "{path}");
            assert_eq!(reply.body.map(|b| b.to_vec()), body, "{path}");
        }
    }

    /// Over TLS (`https://`, ALPN `h2` alone) against grpcio's own TLS: the
    /// call goes through with a self-signed certificate when asked to
    /// accept any, and is refused without that, as any certificate check.
    #[test]
    fn a_unary_call_over_tls_with_alpn_h2() {
        let dir = std::env::temp_dir().join(format!("perfops-unary-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let server = perfops_testkit::grpc::grpcio_echo_tls(0, Duration::ZERO, &dir);
        let target = Target::parse(&format!("https://127.0.0.1:{}", server.port(0))).expect("a target");
        let deadline = Duration::from_secs(10);
        let reply = block_on(call(&target, true, "/bench.Echo/Say", &[], &msg("tls"), deadline)).expect("an answer");
        assert_eq!((reply.status, reply.body.map(|b| b.to_vec())), (0, Some(msg("tls"))));
        let refused = block_on(call(&target, false, "/bench.Echo/Say", &[], &msg("tls"), deadline));
        assert!(matches!(&refused, Err(UnaryError::Failed(why)) if why.starts_with("TLS")), "{refused:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// No server: unreachable, at once; a server that never answers: the
    /// deadline, kept.
    #[test]
    fn a_call_ends_when_nobody_listens_or_at_its_deadline() {
        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let target = Target::parse(&format!("http://127.0.0.1:{port}")).expect("a target");
        let got = block_on(call(&target, false, "/a.B/C", &[], b"", Duration::from_secs(5)));
        assert!(matches!(got, Err(UnaryError::Unreachable(_))), "{got:?}");
        // Accepts, reads, never answers.
        let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = Target::parse(&format!("http://{}", silent.local_addr().expect("addr"))).expect("a target");
        let began = Instant::now();
        let got = block_on(call(&target, false, "/a.B/C", &[], b"", Duration::from_millis(300)));
        assert_eq!(got, Err(UnaryError::Deadline(Duration::from_millis(300))));
        assert!(began.elapsed() < Duration::from_secs(3), "{:?}", began.elapsed());
    }

    /// `grpc-timeout` is at most 8 digits: milliseconds, else seconds.
    #[test]
    fn grpc_timeout_fits_in_eight_digits() {
        // (deadline, header)
        let cases = [
            (Duration::from_secs(10), "10000m"),
            (Duration::from_micros(10), "1m"),         // never 0: that would be expired
            (Duration::from_secs(200_000), "200000S"), // over 8 digits of ms
        ];
        for (d, want) in cases {
            assert_eq!(grpc_timeout(d), want, "{d:?}");
        }
    }
}
