//! One coordinator–agent connection: a TCP stream (or rustls over it, with
//! `--tls-cert/--tls-key`) carrying the frames of `perfops_core::fleet::wire`.
//!
//! Used two ways: step by step during the handshake ([`Conn::recv`] with a
//! deadline), then by threads of its own ([`Conn::pump`]) for the rest of
//! the run: what the owner queues is written, every frame read is handed on
//! as an [`Event`], a heartbeat goes out after a second of quiet, and the
//! close is reported. Over plain TCP a reader blocks in `read` and a writer
//! on its queue: an idle connection wakes nobody but for its heartbeat, and
//! the generator's workers keep the cores (a 20 ms poll is 50 wake-ups a
//! second per agent beside its workers; not measured apart). A rustls stream
//! cannot be read and written from two threads, so over TLS one thread
//! reads with a short timeout and writes between reads: what is queued
//! waits at most [`AGENT_POLL`] on an agent (its seconds) or
//! [`COORDINATOR_POLL`] on the coordinator (rare orders: start, stop).

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use perfops_core::fleet::wire::{self, Control, Message};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// How long an agent's pump waits for a frame before it looks at its outbox.
pub(crate) const AGENT_POLL: Duration = Duration::from_millis(20);

/// How long a coordinator's pump waits for a frame before it looks at its outbox.
pub(crate) const COORDINATOR_POLL: Duration = Duration::from_millis(100);

/// Quiet this long, a pump sends a heartbeat.
const HEARTBEAT: Duration = Duration::from_secs(1);

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A framed connection.
pub(crate) struct Conn {
    stream: Box<dyn Stream>,
    /// The socket under the stream, for its timeouts.
    tcp: TcpStream,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    inbox: VecDeque<Message>,
    /// Over rustls (one thread must do both the reading and the writing).
    tls: bool,
    /// The peer's address.
    pub(crate) peer: SocketAddr,
}

/// What a pump hands its owner.
pub(crate) enum Event {
    /// Connection `id` sent a frame.
    Frame(usize, Message),
    /// Connection `id` closed or failed, and why.
    Closed(usize, String),
}

impl Conn {
    /// A plain connection over `tcp`.
    pub(crate) fn plain(tcp: TcpStream) -> io::Result<Conn> {
        Conn::over(tcp.try_clone()?, tcp, false)
    }

    /// The server side of TLS over `tcp` (the handshake happens on first use).
    pub(crate) fn tls_server(tcp: TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<Conn> {
        let session = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
        Conn::over(tcp.try_clone()?, rustls::StreamOwned::new(session, tcp), true)
    }

    /// The client side of TLS over `tcp` to `host`.
    pub(crate) fn tls_client(tcp: TcpStream, config: Arc<rustls::ClientConfig>, host: &str) -> io::Result<Conn> {
        let name = ServerName::try_from(host.to_string()).map_err(io::Error::other)?;
        let session = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        Conn::over(tcp.try_clone()?, rustls::StreamOwned::new(session, tcp), true)
    }

    fn over(tcp: TcpStream, stream: impl Stream + 'static, tls: bool) -> io::Result<Conn> {
        tcp.set_nodelay(true)?;
        // A peer that stops reading must not hang its other side for ever.
        tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
        let peer = tcp.peer_addr()?;
        Ok(Conn {
            stream: Box::new(stream),
            tcp,
            buf: Vec::new(),
            chunk: vec![0; 64 << 10],
            inbox: VecDeque::new(),
            tls,
            peer,
        })
    }

    /// Send one message.
    pub(crate) fn send(&mut self, msg: &Message) -> io::Result<()> {
        self.stream.write_all(&wire::encode(msg))?;
        self.stream.flush()
    }

    /// Send one control message.
    pub(crate) fn control(&mut self, c: Control) -> io::Result<()> {
        self.send(&Message::Control(c))
    }

    /// The next frame, waiting at most `wait`: `None` if none came. A close is an error.
    pub(crate) fn recv(&mut self, wait: Duration) -> io::Result<Option<Message>> {
        if let Some(m) = self.inbox.pop_front() {
            return Ok(Some(m));
        }
        self.tcp.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match self.stream.read(&mut self.chunk) {
            Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")),
            Ok(n) => {
                self.buf.extend_from_slice(&self.chunk[..n]);
                let frames =
                    wire::take_frames(&mut self.buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                self.inbox.extend(frames);
                Ok(self.inbox.pop_front())
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The next control message within `wait` (heartbeats skipped); a
    /// second, silence or a close is an error naming `what` was awaited.
    pub(crate) fn expect(&mut self, wait: Duration, what: &str) -> io::Result<Control> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, format!("no {what} within {wait:?}")));
            }
            match self.recv(left)? {
                Some(Message::Control(Control::Heartbeat)) | None => {}
                Some(Message::Control(c)) => return Ok(c),
                Some(Message::Second(_) | Message::Received(_)) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a second instead of {what}")));
                }
            }
        }
    }

    /// Hand the connection to a thread of its own: frames go to `events`
    /// tagged `id`, messages queued on the returned sender go out in order,
    /// at the latest `poll` after they were queued.
    /// Dropping the sender closes the connection once its queue is sent.
    pub(crate) fn pump(mut self, id: usize, events: Sender<Event>, poll: Duration) -> Sender<Message> {
        let (tx, rx) = mpsc::channel::<Message>();
        if !self.tls
            && let Ok(writer) = self.tcp.try_clone()
        {
            self.split(id, events, writer, rx);
            return tx;
        }
        std::thread::spawn(move || {
            let mut sent = Instant::now();
            loop {
                loop {
                    match rx.try_recv() {
                        Ok(m) => {
                            if let Err(e) = self.send(&m) {
                                let _ = events.send(Event::Closed(id, e.to_string()));
                                return;
                            }
                            sent = Instant::now();
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            let _ = self.tcp.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                    }
                }
                if sent.elapsed() >= HEARTBEAT {
                    if let Err(e) = self.control(Control::Heartbeat) {
                        let _ = events.send(Event::Closed(id, e.to_string()));
                        return;
                    }
                    sent = Instant::now();
                }
                if !forward(self.recv(poll), id, &events) {
                    return;
                }
            }
        });
        tx
    }
}

impl Conn {
    /// Plain TCP: a reader blocked in `read` and a writer blocked on its
    /// queue, so that an idle connection wakes nobody but for the heartbeat
    /// (a generator's workers share the machine's cores with these threads).
    fn split(mut self, id: usize, events: Sender<Event>, mut writer: TcpStream, rx: mpsc::Receiver<Message>) {
        let closed = events.clone();
        std::thread::spawn(move || {
            loop {
                match rx.recv_timeout(HEARTBEAT) {
                    Ok(m) => {
                        if let Err(e) = writer.write_all(&wire::encode(&m)) {
                            let _ = closed.send(Event::Closed(id, e.to_string()));
                            return;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Err(e) = writer.write_all(&wire::encode(&Message::Control(Control::Heartbeat))) {
                            let _ = closed.send(Event::Closed(id, e.to_string()));
                            return;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let _ = writer.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                }
            }
        });
        std::thread::spawn(move || {
            loop {
                if !forward(self.recv(Duration::from_secs(24 * 3600)), id, &events) {
                    return;
                }
            }
        });
    }
}

/// The coordinator's TLS configuration from PEM files.
pub(crate) fn server_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key")?;
    Ok(Arc::new(config))
}

/// An agent's TLS configuration: the CA in `ca` (PEM), or the system's roots.
pub(crate) fn client_tls(ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let text = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            for cert in CertificateDer::pem_slice_iter(&text) {
                roots.add(cert.with_context(|| format!("reading {}", path.display()))?)?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Hand what one `recv` got to the coordinator's event queue: a frame, or
/// the connection's end. `false`: this connection's reading is over.
fn forward(got: io::Result<Option<Message>>, id: usize, events: &Sender<Event>) -> bool {
    match got {
        Ok(Some(m)) => events.send(Event::Frame(id, m)).is_ok(),
        Ok(None) => true,
        Err(e) => {
            let _ = events.send(Event::Closed(id, e.to_string()));
            false
        }
    }
}
