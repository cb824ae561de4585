//! One coordinator–agent connection: rustls over TCP (always: issue #31;
//! the coordinator's own certificate or an ephemeral self-signed one)
//! carrying the frames of `perfops_core::fleet::wire`.
//!
//! Used two ways: step by step during the agent's handshake ([`Conn::recv`]
//! with a deadline, on a blocking socket; the coordinator's handshakes are
//! async tasks on its hub, `accept.rs`), then handed to a [`Hub`] for the rest of
//! the run: what the owner queues on the connection's [`Outbox`] is written,
//! every frame read is handed on as an [`Event`], a heartbeat goes out after
//! a second of quiet, and the close is reported.
//!
//! A hub is one thread with one event loop (a current-thread tokio runtime,
//! each connection a task woken by its socket's readiness), whatever the
//! number of connections. It replaced a reader and a writer thread per
//! connection: with 200 agents those 400 threads each grew a heap of their
//! own in the allocator (mimalloc keeps per-thread pages), and the
//! coordinator peaked at 231 MiB; with the hub, see bench/README.md
//! ("fleet"). rustls is driven over the non-blocking socket as it is: a
//! read that finds no whole record says `WouldBlock`, and what it could not
//! flush stays queued in the session until the socket is writable.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use perfops_core::fleet::wire::{self, Control, Message};
use perfops_engine::tls::{self, Trust};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

use super::auth::{self, Binding};

/// Quiet this long, a connection sends a heartbeat.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Output the peer has not taken for this long: it stopped reading, and the
/// connection is given up (a blocking write used to time out the same way).
const STUCK: Duration = Duration::from_secs(10);

/// What one read asks of the socket at most. On the stack: a connection
/// costs no buffer of its own but what its unread frames need.
const READ_CHUNK: usize = 16 << 10;

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A framed connection.
pub(crate) struct Conn {
    stream: Box<dyn Stream>,
    /// The socket under the stream, for its timeouts and readiness.
    tcp: TcpStream,
    /// Bytes read and not yet a whole frame.
    buf: Vec<u8>,
    /// Frames read and not yet handed on.
    inbox: VecDeque<Message>,
    /// Encoded frames the stream has not taken yet (non-blocking use only).
    out: Vec<u8>,
    /// The largest frame taken from the peer: [`wire::HANDSHAKE_FRAME`]
    /// until it proved the token ([`Conn::trust`]), then [`wire::MAX_FRAME`].
    limit: usize,
    /// The peer's address.
    pub(crate) peer: SocketAddr,
}

/// What the agent learned of the coordinator's TLS session.
pub(crate) struct Session {
    /// The session's exported keying material, for the proofs.
    pub(crate) binding: Binding,
    /// SHA-256 of the coordinator's certificate, hex with colons.
    pub(crate) fingerprint: String,
}

/// What a hub hands its owner.
pub(crate) enum Event {
    /// Connection `id` sent a frame.
    Frame(usize, Message),
    /// Connection `id` closed or failed, and why.
    Closed(usize, String),
}

impl Conn {
    /// The coordinator's side of a connection whose TLS handshake and token
    /// handshake are done (`accept.rs`): the session as it stands, and the
    /// bytes read past the last whole frame.
    pub(crate) fn server(tcp: TcpStream, session: rustls::ServerConnection, rest: Vec<u8>) -> io::Result<Conn> {
        tcp.set_nonblocking(false)?;
        let mut c = Conn::over(tcp.try_clone()?, rustls::StreamOwned::new(session, tcp))?;
        c.buf = rest;
        c.trust();
        Ok(c)
    }

    /// The client side of TLS over `tcp` to `host`, its TLS handshake done
    /// within `wait`: the connection, untrusted (small frames only) until
    /// [`Conn::trust`], and what the session says.
    pub(crate) fn tls_client(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        host: &str,
        wait: Duration,
    ) -> io::Result<(Conn, Session)> {
        let name = ServerName::try_from(host.to_string()).map_err(io::Error::other)?;
        let session = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut s = rustls::StreamOwned::new(session, tcp);
        s.sock.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        s.sock.set_write_timeout(Some(wait.max(Duration::from_millis(1))))?;
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        let mut binding = [0u8; 32];
        s.conn.export_keying_material(&mut binding, auth::BINDING_LABEL, None).map_err(io::Error::other)?;
        let fingerprint = s.conn.peer_certificates().and_then(|c| c.first()).map_or_else(String::new, fingerprint);
        let conn = Conn::over(s.sock.try_clone()?, s)?;
        Ok((conn, Session { binding, fingerprint }))
    }

    fn over(tcp: TcpStream, stream: impl Stream + 'static) -> io::Result<Conn> {
        tcp.set_nodelay(true)?;
        // A peer that stops reading must not hang its other side for ever.
        tcp.set_write_timeout(Some(STUCK))?;
        let peer = tcp.peer_addr()?;
        Ok(Conn {
            stream: Box::new(stream),
            tcp,
            buf: Vec::new(),
            inbox: VecDeque::new(),
            out: Vec::new(),
            limit: wire::HANDSHAKE_FRAME,
            peer,
        })
    }

    /// The peer proved the token: frames up to [`wire::MAX_FRAME`] from now on.
    pub(crate) fn trust(&mut self) {
        self.limit = wire::MAX_FRAME;
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
        match self.fill() {
            Ok(()) => Ok(self.inbox.pop_front()),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One read from the stream, its whole frames to the inbox. A close is an error.
    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; READ_CHUNK];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        let frames = wire::take_frames_within(&mut self.buf, self.limit)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.inbox.extend(frames);
        if self.buf.is_empty() && self.buf.capacity() > READ_CHUNK {
            // A large frame passed: its room is not kept for the quiet seconds after it.
            self.buf = Vec::new();
        }
        Ok(())
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

    /// Write what is queued until the stream takes no more: `true` once all
    /// of it is on the socket (rustls' own queue flushed too).
    fn push(&mut self) -> io::Result<bool> {
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out.capacity() > READ_CHUNK {
            self.out = Vec::new();
        }
        match self.stream.flush() {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Where the owner of a pumped connection queues what it sends. Dropping
/// every clone closes the connection once its queue is written.
#[derive(Clone)]
pub(crate) struct Outbox(tokio::sync::mpsc::UnboundedSender<Message>);

impl Outbox {
    /// An outbox with no connection behind it: what is sent to it is dropped.
    pub(crate) fn gone() -> Outbox {
        Outbox(tokio::sync::mpsc::unbounded_channel().0)
    }

    /// Queue `m`; an error if the connection is gone.
    pub(crate) fn send(&self, m: Message) -> Result<(), Message> {
        self.0.send(m).map_err(|e| e.0)
    }
}

/// One thread that runs every pumped connection of this process.
pub(crate) struct Hub {
    runtime: tokio::runtime::Handle,
}

impl Hub {
    /// Start the hub's thread.
    pub(crate) fn start() -> io::Result<Hub> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        std::thread::Builder::new().name("perfops-fleet-io".into()).spawn(move || {
            // Tasks run while this thread is in `block_on`: for as long as the process lives.
            runtime.block_on(std::future::pending::<()>());
        })?;
        Ok(Hub { runtime: handle })
    }

    /// Run `task` on the hub's event loop.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.runtime.spawn(task);
    }

    /// `listener` (non-blocking) registered with the hub's event loop.
    pub(crate) fn listener(&self, listener: std::net::TcpListener) -> io::Result<tokio::net::TcpListener> {
        let _in = self.runtime.enter();
        listener.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(listener)
    }

    /// Hand `conn` to the hub: its frames go to `events` tagged `id`, and
    /// what is queued on the returned outbox goes out in order.
    pub(crate) fn pump(&self, conn: Conn, id: usize, events: Sender<Event>) -> Outbox {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.runtime.spawn(async move {
            let why = match serve(conn, id, &events, rx).await {
                Ok(()) => return,
                Err(e) => e.to_string(),
            };
            let _ = events.send(Event::Closed(id, why));
        });
        Outbox(tx)
    }
}

/// The life of a pumped connection; `Ok` when its owner closed it, an
/// error (reported as [`Event::Closed`]) when the peer or the socket did.
async fn serve(
    mut c: Conn,
    id: usize,
    events: &Sender<Event>,
    mut outbox: tokio::sync::mpsc::UnboundedReceiver<Message>,
) -> io::Result<()> {
    use tokio::io::Interest;
    use tokio::time::{Instant as TokioInstant, sleep_until};

    let hand_on = |c: &mut Conn| -> io::Result<()> {
        while let Some(m) = c.inbox.pop_front() {
            events.send(Event::Frame(id, m)).map_err(|_| io::Error::other("nobody listens"))?;
        }
        Ok(())
    };
    // Frames that came with the handshake's last read go first.
    hand_on(&mut c)?;
    c.tcp.set_nonblocking(true)?;
    // Tokio watches the socket's readiness; the reads and writes are
    // `Conn`'s own (rustls over the same socket), through `try_io` so that
    // a `WouldBlock` clears the readiness it consumed.
    let sock = tokio::net::TcpStream::from_std(c.tcp.try_clone()?)?;
    let mut quiet = TokioInstant::now() + HEARTBEAT;
    let mut stuck: Option<TokioInstant> = None;
    let mut closing = false;
    loop {
        let pending = stuck.is_some();
        let wake = stuck.map_or(quiet, |s| s + STUCK);
        tokio::select! {
            ready = sock.readable(), if !closing => {
                ready?;
                loop {
                    match sock.try_io(Interest::READABLE, || c.fill()) {
                        Ok(()) => hand_on(&mut c)?,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            m = outbox.recv(), if !closing => match m {
                Some(m) => {
                    c.out.extend_from_slice(&wire::encode(&m));
                    while let Ok(m) = outbox.try_recv() {
                        c.out.extend_from_slice(&wire::encode(&m));
                    }
                    stuck = if c.push()? { None } else { stuck.or(Some(TokioInstant::now())) };
                    quiet = TokioInstant::now() + HEARTBEAT;
                }
                None => closing = true,
            },
            ready = sock.writable(), if pending => {
                ready?;
                let all_out = || if c.push()? { Ok(()) } else { Err(io::Error::from(io::ErrorKind::WouldBlock)) };
                match sock.try_io(Interest::WRITABLE, all_out) {
                    Ok(()) => stuck = None,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            () = sleep_until(wake) => {
                if pending {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, format!("the peer took nothing for {STUCK:?}")));
                }
                c.out.extend_from_slice(&wire::encode(&Message::Control(Control::Heartbeat)));
                stuck = if c.push()? { None } else { Some(TokioInstant::now()) };
                quiet = TokioInstant::now() + HEARTBEAT;
            }
        }
        if closing && stuck.is_none() {
            let _ = c.tcp.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
    }
}

/// The coordinator's TLS configuration from PEM files.
pub(crate) fn server_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    server_config(certs, key)
}

/// The coordinator's TLS configuration without `--tls-cert`: a self-signed
/// certificate made now, for this process only, and its fingerprint.
/// Agents do not verify it (they have nothing to verify it against); the
/// token handshake, bound to the TLS session, is what keeps a machine in
/// the middle out (see `auth.rs`).
pub(crate) fn ephemeral_tls() -> Result<(Arc<rustls::ServerConfig>, String)> {
    let made = rcgen::generate_simple_self_signed(vec!["perfops-coordinator".to_string(), "localhost".to_string()])
        .context("making the coordinator's self-signed certificate")?;
    let cert = made.cert.der().clone();
    let print = fingerprint(&cert);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
    Ok((server_config(vec![cert], key)?, print))
}

fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key")?;
    Ok(Arc::new(config))
}

/// SHA-256 of a certificate (DER), hex bytes joined by colons (as `openssl x509 -fingerprint -sha256` prints it).
pub(crate) fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    d.as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// An agent's TLS configuration: with `ca` (PEM), the coordinator's chain
/// and host name verified against it; without, its certificate taken
/// unverified (the token handshake proves the coordinator: `auth.rs`).
pub(crate) fn client_tls(ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let trust = match ca {
        // The file's certificates alone, the system's roots not at all: a
        // certificate of the public web is no coordinator.
        Some(path) => Trust::Only(tls::pem_certificates(path).with_context(|| format!("reading {}", path.display()))?),
        None => Trust::Any,
    };
    Ok(tls::client(trust, &[])?)
}
