//! Connecting: the TCP connect (tuned for the hot path: `http1::tune`) and
//! the TLS handshake, under one deadline, each timed into its own
//! histogram. HTTP/1.1's [`Conn`], HTTP/2's connections and a WebSocket
//! session all start here. Not here: what runs on the stream afterwards.

use std::time::Duration;

use perfops_core::measure::FailureKind;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};

use super::Worker;
use crate::http1::{Conn, Stream, connect_failure, remaining, tune};
use crate::record::Key;

impl Worker {
    /// Open a connection (and TLS session), recording how long each took;
    /// returns it and when it was ready (an instant read to time it anyway).
    /// Boxed: a connection moves through every request's futures and their
    /// results, and a pointer is cheaper to move than the whole `Conn`.
    pub(super) async fn connect(&self, key: Key) -> Result<(Box<Conn>, Instant), FailureKind> {
        let (stream, ready, _) = self.connect_stream(key, false).await?;
        let conn = if self.stamped { Conn::stamped(stream) } else { Conn::new(stream) };
        Ok((Box::new(conn), ready))
    }

    /// Open a TCP connection (and TLS session), recording how long each
    /// took; returns it, when it was ready and the connect's deadline.
    /// HTTP/1.1's [`Conn`], HTTP/2's connections and a WebSocket session
    /// (`websocket.rs`) start from here.
    /// A WebSocket session's (`websocket`) offers http/1.1 alone over TLS.
    pub(super) async fn connect_stream(
        &self,
        key: Key,
        websocket: bool,
    ) -> Result<(Stream, Instant, Instant), FailureKind> {
        let shared = &*self.shared;
        let t0 = Instant::now();
        let deadline = t0 + shared.connect_timeout;
        let tcp = match timeout_at(deadline, TcpStream::connect(shared.target.addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(connect_failure(&e)),
            Err(_) => return Err(FailureKind::ConnectTimeout),
        };
        tune(&tcp).map_err(|_| FailureKind::ConnectError)?;
        let t1 = Instant::now();
        self.rec.borrow_mut().connected(key, t1 - t0);
        let tls = if websocket { shared.ws_tls.as_ref().or(shared.tls.as_ref()) } else { shared.tls.as_ref() };
        let (stream, ready) = match tls {
            None => (Stream::Tcp(tcp), t1),
            Some((connector, name)) => {
                let handshake = connector.connect(name.clone(), tcp);
                match timeout(remaining(deadline).max(Duration::from_millis(1)), handshake).await {
                    Ok(Ok(tls)) => {
                        let t2 = Instant::now();
                        self.rec.borrow_mut().handshake(key, t2 - t1);
                        (Stream::Tls(Box::new(tls)), t2)
                    }
                    Ok(Err(_)) => return Err(FailureKind::Tls),
                    Err(_) => return Err(FailureKind::ConnectTimeout),
                }
            }
        };
        Ok((stream, ready, deadline))
    }
}
