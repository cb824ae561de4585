//! What an HTTP/2 connection runs on ([`Transport`]): any byte stream, and
//! on an open-model worker's plain TCP a stream whose reads the kernel dates
//! ([`Stamped`], `SO_TIMESTAMPNS` read with `recvmsg`, as HTTP/1.1's
//! `http1::stamp_receives`).
//!
//! Why: a response's last byte was dated when the connection task read it,
//! so a worker late to read (woken late at normal priority, or busy with
//! the arrivals and responses of the same wake-up) counted its own delay as
//! the server's, in service time and in latency from the intended start
//! alike. Dated by the kernel, a response is measured as a capture of the
//! wire would see it (bench/README.md, "gRPC's open model at normal
//! priority"). A read that brings several responses dates them all by the
//! kernel's time of its last bytes, never earlier than the truth; and no
//! response is dated before its request was handed to the connection
//! (`conn.rs` clamps it).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::http1::{self, Stream};

/// A connection's byte stream, and when its last read's bytes arrived if
/// the kernel said.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// The kernel's receive time of the last read's bytes (the last of
    /// them), on the worker's clock; `None` where reads are not dated.
    fn last_received(&self) -> Option<Instant> {
        None
    }
    /// Its reads are dated by the kernel.
    fn dated(&self) -> bool {
        false
    }
}

impl Transport for Stream {}

#[cfg(test)]
impl Transport for tokio::io::DuplexStream {}

/// An HTTP/2 connection's stream: dated by the kernel, or not.
pub(crate) enum H2Io {
    Plain(Stream),
    Stamped(Stamped),
}

impl H2Io {
    /// `stream`, dated by the kernel if `stamp` and it is plain TCP whose
    /// kernel agrees (TLS records are read whole by rustls: not dated).
    pub(crate) fn new(stream: Stream, stamp: bool) -> H2Io {
        match stream {
            Stream::Tcp(tcp) if stamp && http1::stamp_receives(&tcp) => {
                H2Io::Stamped(Stamped { tcp, last: None, since: Instant::now() })
            }
            other => H2Io::Plain(other),
        }
    }
}

impl Transport for H2Io {
    fn last_received(&self) -> Option<Instant> {
        match self {
            H2Io::Plain(_) => None,
            H2Io::Stamped(s) => s.last,
        }
    }
    fn dated(&self) -> bool {
        matches!(self, H2Io::Stamped(_))
    }
}

impl AsyncRead for H2Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H2Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            H2Io::Stamped(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            H2Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            H2Io::Stamped(s) => Pin::new(&mut s.tcp).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H2Io::Plain(s) => Pin::new(s).poll_flush(cx),
            H2Io::Stamped(s) => Pin::new(&mut s.tcp).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            H2Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            H2Io::Stamped(s) => Pin::new(&mut s.tcp).poll_shutdown(cx),
        }
    }
}

/// A plain TCP stream with `SO_TIMESTAMPNS` on, read with `recvmsg`.
pub(crate) struct Stamped {
    tcp: TcpStream,
    /// The last read's date.
    last: Option<Instant>,
    /// When the connection was made: nothing read on it is dated before.
    since: Instant,
}

impl AsyncRead for Stamped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            ready!(me.tcp.poll_read_ready(cx))?;
            match http1::try_read_stamped(&me.tcp, buf.initialize_unfilled(), me.since) {
                Ok((n, at)) => {
                    me.last = Some(at);
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Readiness cleared by `try_io`: the next poll waits for epoll.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}
