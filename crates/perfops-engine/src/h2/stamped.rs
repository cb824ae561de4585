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
//!
//! On an open-model worker a read also steps behind the pacer when an
//! arrival is due (`coalesce::pacer_first`), as HTTP/1.1's reads do: a
//! burst of answers read first would send that arrival late; dated by the
//! kernel, the answers lose nothing by waiting one turn.

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
                H2Io::Stamped(Stamped { tcp, last: None, since: Instant::now(), stepped: false })
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
    /// This read stepped behind the pacer already: it reads when polled
    /// again (once per read, so that a pacer gone at the run's end never
    /// stalls it).
    stepped: bool,
}

impl AsyncRead for Stamped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            ready!(me.tcp.poll_read_ready(cx))?;
            // An arrival due goes out before this read: this task runs again
            // after the pacer, which `pacer_first` woke (tokio runs a task
            // woken by itself after those woken before).
            if !me.stepped && crate::coalesce::pacer_first() {
                me.stepped = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            me.stepped = false;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::task::{Wake, Waker};

    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::coalesce;

    struct Count(AtomicU32);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A read with bytes waiting steps behind a pacer whose arrival is due,
    /// once: it wakes itself and the pacer, and reads when polled again;
    /// with no arrival due it reads at once.
    #[tokio::test(flavor = "current_thread")]
    async fn a_read_steps_behind_a_pacer_that_is_due_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
        let client = TcpStream::connect(listener.local_addr().expect("address")).await.expect("connect");
        let (mut server, _) = listener.accept().await.expect("accept");
        let H2Io::Stamped(mut stamped) = H2Io::new(Stream::Tcp(client), true) else {
            panic!("this kernel dates no receive (SO_TIMESTAMPNS)")
        };
        let (pacer, me) = (Arc::new(Count(AtomicU32::new(0))), Arc::new(Count(AtomicU32::new(0))));
        let (pacer_waker, my_waker) = (Waker::from(pacer.clone()), Waker::from(me.clone()));
        let mut cx = Context::from_waker(&my_waker);
        let mut bytes = [0u8; 64];
        let mut poll = |stamped: &mut Stamped| {
            let mut buf = ReadBuf::new(&mut bytes);
            let ready = Pin::new(&mut *stamped).poll_read(&mut cx, &mut buf).is_ready();
            (ready, buf.filled().len())
        };
        coalesce::pacer_runs();

        // Nothing due: the answer is read at once.
        server.write_all(b"first").await.expect("write");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(poll(&mut stamped), (true, 5));

        // Due: one turn behind the pacer, then the read.
        server.write_all(b"second").await.expect("write");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        coalesce::pace(std::time::Instant::now(), &pacer_waker);
        assert_eq!(poll(&mut stamped), (false, 0), "steps behind the due pacer");
        assert_eq!(pacer.0.load(Ordering::Relaxed), 1, "the pacer woken");
        assert_eq!(me.0.load(Ordering::Relaxed), 1, "and itself, to read after it");
        // The pacer has not run (its flag still set): the read goes on all the same.
        assert_eq!(poll(&mut stamped), (true, 6), "once per read");
        coalesce::pacer_runs();
    }
}
