//! A real WebSocket server on 127.0.0.1 (tokio-tungstenite), for the tests
//! of perfops' `websocket:` steps: it echoes each text or binary message
//! after a precise delay, or misbehaves on purpose after a number of
//! messages on a connection: drops the TCP connection without a close frame
//! (an abnormal closure, 1006 at the client), or closes with a code
//! (1011, a server error), or answers a client's close late. It counts
//! connections (accepted, open now, the most open at once) and messages,
//! so a test can compare what the generator reports with what the server
//! saw. [`WsServer::start_tls`]
//! serves `wss://` with the testkit's self-signed certificate.
//!
//! One thread runs a single-threaded tokio runtime; every connection is a
//! task on it, so thousands of held connections cost a few KiB each, not a
//! thread each. Dropping the handle stops it: the runtime, its listener and
//! every connection go with the thread. [`WsServer::serve_forever`] runs one
//! in the foreground for `bench/ws.sh` (the `ws-echo` binary).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};

/// What the server does with the messages of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsBehaviour {
    /// Echo each message once `delay` has passed since it was read.
    Echo {
        /// Between a message read and its echo written.
        delay: Duration,
    },
    /// Echo `n - 1` messages, then on the `n`-th drop the TCP connection
    /// without a close frame (no reply to it).
    DropAfter(u64),
    /// Echo `n - 1` messages, then on the `n`-th send a close frame with
    /// `code` (no reply to it).
    CloseAfter {
        /// The message that is answered with a close.
        n: u64,
        /// Its close code.
        code: u16,
    },
    /// Upgrade, then drop the TCP connection after `after` without a word:
    /// for a held connection that the server loses.
    DropIdleAfter(Duration),
    /// Echo each message at once, but answer the client's close frame only
    /// after `delay`, the connection counted open until then: a server busy
    /// with many connections' closes at once, as python3-websockets is when
    /// thousands close together.
    SlowClose(Duration),
    /// Echo each message at once, answer the client's close frame at once,
    /// but keep the TCP connection open `after` that, as a server that waits
    /// for the client to end it first (RFC 6455 lets a server wait so).
    OpenAfterClose(Duration),
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    open: AtomicU64,
    max_open: AtomicU64,
    messages: AtomicU64,
    /// Upgrades on a TLS connection whose ALPN had settled on h2: a client
    /// that offered h2 for a WebSocket (RFC 6455 needs HTTP/1.1).
    upgraded_over_h2: AtomicU64,
}

/// A running WebSocket server; dropping it stops it.
pub struct WsServer {
    addr: SocketAddr,
    cert_pem: Option<String>,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl WsServer {
    /// Start on 127.0.0.1 and an ephemeral port.
    pub fn start(behaviour: WsBehaviour) -> WsServer {
        WsServer::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), behaviour)
    }

    /// Start on 127.0.0.1 and an ephemeral port, over TLS (`wss://`) with a
    /// self-signed certificate for `localhost` and `127.0.0.1`.
    pub fn start_tls(behaviour: WsBehaviour) -> WsServer {
        let identity = crate::tls::self_signed();
        let acceptor = TlsAcceptor::from(identity.config);
        let mut server = WsServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), behaviour, Some(acceptor));
        server.cert_pem = Some(identity.cert_pem);
        server
    }

    /// [`WsServer::start_tls`] whose TLS offers `h2` and `http/1.1` by
    /// ALPN, preferring h2, as a server of both HTTP/2 and WebSockets does:
    /// a client that offers h2 gets it ([`WsServer::upgraded_over_h2`]
    /// counts the WebSockets it then upgraded).
    pub fn start_tls_offering_h2(behaviour: WsBehaviour) -> WsServer {
        let identity = crate::tls::self_signed();
        let mut config = Arc::unwrap_or_clone(identity.config);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let mut server = WsServer::start_with(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), behaviour, Some(acceptor));
        server.cert_pem = Some(identity.cert_pem);
        server
    }

    /// Start on `addr` (port 0: an ephemeral one).
    pub fn start_on(addr: SocketAddr, behaviour: WsBehaviour) -> WsServer {
        WsServer::start_with(addr, behaviour, None)
    }

    fn start_with(addr: SocketAddr, behaviour: WsBehaviour, tls: Option<TlsAcceptor>) -> WsServer {
        let listener = std::net::TcpListener::bind(addr).expect("bind the WebSocket server");
        let addr = listener.local_addr().expect("listener address");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = oneshot::channel();
        let thread = {
            let counters = Arc::clone(&counters);
            std::thread::Builder::new()
                .name(format!("testkit-ws-{}", addr.port()))
                .spawn(move || serve(listener, behaviour, tls, &counters, stopped))
                .expect("spawn the WebSocket server thread")
        };
        WsServer { addr, cert_pem: None, counters, stop: Some(stop), thread: Some(thread) }
    }

    /// Serve on `addr` in this thread until the process is killed.
    pub fn serve_forever(addr: SocketAddr, behaviour: WsBehaviour) {
        let listener = std::net::TcpListener::bind(addr).expect("bind the WebSocket server");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let (_stop, stopped) = oneshot::channel();
        serve(listener, behaviour, None, &Arc::new(Counters::default()), stopped);
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://127.0.0.1:PORT`, or `wss://` over TLS (no trailing slash).
    pub fn url(&self) -> String {
        let scheme = if self.cert_pem.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.addr)
    }

    /// PEM of the self-signed certificate of a TLS server.
    pub fn cert_pem(&self) -> Option<&str> {
        self.cert_pem.as_deref()
    }

    /// Connections upgraded so far.
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Acquire)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        self.counters.open.load(Ordering::Acquire)
    }

    /// The most connections open at once so far.
    pub fn max_open_connections(&self) -> u64 {
        self.counters.max_open.load(Ordering::Acquire)
    }

    /// WebSocket upgrades on TLS connections that had negotiated h2 by ALPN.
    pub fn upgraded_over_h2(&self) -> u64 {
        self.counters.upgraded_over_h2.load(Ordering::Acquire)
    }

    /// Data messages (text or binary) read so far, on all connections.
    pub fn messages(&self) -> u64 {
        self.counters.messages.load(Ordering::Acquire)
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    listener: std::net::TcpListener,
    behaviour: WsBehaviour,
    tls: Option<TlsAcceptor>,
    counters: &Arc<Counters>,
    stopped: oneshot::Receiver<()>,
) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::from_std(listener).expect("a tokio listener");
        let accept = async {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // EMFILE and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let counters = Arc::clone(counters);
                match &tls {
                    None => {
                        tokio::task::spawn_local(connection(stream, behaviour, counters, false));
                    }
                    Some(acceptor) => {
                        let accept = acceptor.accept(stream);
                        tokio::task::spawn_local(async move {
                            if let Ok(stream) = accept.await {
                                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                                connection(stream, behaviour, counters, h2).await;
                            }
                        });
                    }
                }
            }
        };
        tokio::select! {
            () = accept => {}
            _ = stopped => {}
        }
    });
}

/// Counts a connection open while it lives.
struct Open(Arc<Counters>);

impl Open {
    fn new(counters: Arc<Counters>) -> Open {
        counters.connections.fetch_add(1, Ordering::AcqRel);
        let now = counters.open.fetch_add(1, Ordering::AcqRel) + 1;
        counters.max_open.fetch_max(now, Ordering::AcqRel);
        Open(counters)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    behaviour: WsBehaviour,
    counters: Arc<Counters>,
    alpn_h2: bool,
) {
    // Small buffers: the server holds as many connections as the generator.
    let config = WebSocketConfig::default().read_buffer_size(1024).write_buffer_size(0);
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(stream, Some(config)).await else { return };
    if alpn_h2 {
        counters.upgraded_over_h2.fetch_add(1, Ordering::AcqRel);
    }
    let open = Open::new(Arc::clone(&counters));
    if let WsBehaviour::DropIdleAfter(after) = behaviour {
        // Read (and answer pings) until the time is up, then vanish.
        let _ = tokio::time::timeout(after, async { while let Some(Ok(_)) = ws.next().await {} }).await;
        drop(ws);
        drop(open);
        return;
    }
    let mut seen = 0u64;
    while let Some(Ok(message)) = ws.next().await {
        if let (WsBehaviour::SlowClose(delay), true) = (behaviour, message.is_close()) {
            // The reply tungstenite queued goes out with the next read.
            tokio::time::sleep(delay).await;
        }
        if let (WsBehaviour::OpenAfterClose(after), true) = (behaviour, message.is_close()) {
            let _ = ws.flush().await;
            drop(open);
            // Not read: tungstenite would end the connection at the next read.
            tokio::time::sleep(after).await;
            return;
        }
        if !(message.is_text() || message.is_binary()) {
            continue; // pings are answered by tungstenite, closes end the loop
        }
        counters.messages.fetch_add(1, Ordering::AcqRel);
        seen += 1;
        match behaviour {
            WsBehaviour::Echo { delay } if !delay.is_zero() => tokio::time::sleep(delay).await,
            WsBehaviour::DropAfter(n) if seen >= n => return, // the socket closes without a close frame
            WsBehaviour::CloseAfter { n, code } if seen >= n => {
                let frame = CloseFrame { code: CloseCode::from(code), reason: "testkit".into() };
                let _ = ws.send(Message::Close(Some(frame))).await;
                // Read until the client's close answers ours.
                while let Some(Ok(_)) = ws.next().await {}
                return;
            }
            _ => {}
        }
        if ws.send(message).await.is_err() {
            return;
        }
    }
    drop(open);
}
