//! The coordinator's door: accepting connections and running their
//! handshakes (TLS, then the token, then the clock probes) as tasks on the
//! hub's event loop ([`Hub`]), so that what a stranger costs before it
//! proved the token is bounded (issue #31):
//!
//! - no thread per connection: a handshake is a task of a few KiB;
//! - at most [`HANDSHAKES`] at once, [`PER_ADDRESS`] from one address;
//!   beyond, a connection is closed as soon as it is accepted;
//! - one deadline for the whole handshake ([`DEADLINE`]);
//! - frames of at most [`wire::HANDSHAKE_FRAME`] until the proof held;
//! - accept errors (out of file descriptors: EMFILE, ENFILE) backed off,
//!   100 ms doubling to 1 s, never a spin;
//! - lines about refused peers rate-limited ([`Hush`]), with a count of
//!   what was held back.
//!
//! Measured with bench/fleet-hostile.sh (1000 hostile connections): see
//! bench/README.md ("Figures (2026-11-28): `fleet-hostile.sh`"): before, 803 MiB and 530
//! threads; after, 26 MiB and 4.
//!
//! What the handshake decides is [`Gate`]'s (pure, property-tested); a
//! peer that passes is handed to the coordinator's `gather` as an
//! [`Arrival`], its connection ready for the hub's pump.

use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use perfops_core::fleet::clock::Estimate;
use perfops_core::fleet::wire::{self, Control, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::agent::wall_ns;
use super::auth;
use super::conn::{Conn, Hub};
use super::gate::{Admission, Gate, Hush, Next};

/// Handshakes at once, in all.
pub(crate) const HANDSHAKES: usize = 64;

/// Handshakes at once from one address.
pub(crate) const PER_ADDRESS: usize = 8;

/// From accept to the last clock probe, at most.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// An agent that passed the handshake, not yet placed.
pub(crate) struct Arrival {
    pub(crate) conn: Conn,
    /// Its name, sanitised.
    pub(crate) name: String,
    pub(crate) claim: Option<u32>,
    pub(crate) estimate: Estimate,
    /// How its seconds read here (its `Hello` named their counters and kinds).
    pub(crate) layout: wire::Layout,
}

/// What the door hands on: an agent, or a refused peer and why (sanitised).
pub(crate) type Arrived = Result<Arrival, (SocketAddr, String)>;

/// What every handshake shares.
struct Door {
    token: String,
    tls: tokio_rustls::TlsAcceptor,
    max_offset: Duration,
    admission: Mutex<Admission>,
    hush: Mutex<Hush>,
    began: Instant,
    arrivals: Sender<Arrived>,
}

impl Door {
    /// Say that `addr` was refused, unless the flood's quota of lines is spent.
    fn refuse(&self, addr: SocketAddr, reason: String) {
        if reason.is_empty() {
            return;
        }
        // What a peer put in a message can reach a reason (a JSON error quotes it): escaped here, whatever it says.
        let reason = super::gate::sanitize(&reason, super::gate::REASON_CHARS);
        let allowed = self.hush.lock().map_or(Some(0), |mut h| h.allow(self.began.elapsed()));
        if let Some(held) = allowed {
            let reason =
                if held > 0 { format!("{reason} (and {held} more refused peer(s) not shown)") } else { reason };
            let _ = self.arrivals.send(Err((addr, reason)));
        }
    }
}

/// The coordinator's hold on its door, to say at the end what the rate
/// limit kept quiet.
pub(crate) struct Opened(Arc<Door>);

impl Opened {
    /// Say how many lines about refused peers were held back and not yet
    /// counted in a later line (a flood that ended, or the run that did).
    pub(crate) fn say_unsaid(&self) {
        let held = self.0.hush.lock().map_or(0, |mut h| h.take_held());
        if held > 0 {
            note!("{held} more refused peer(s) not shown (rate-limited)");
        }
    }
}

/// Accept agents on `listener` with the hub's event loop; each that passes
/// goes to `arrivals`. The listener must already be bound (a bad `--listen`
/// is a usage error before anything starts).
pub(crate) fn open(
    hub: &Hub,
    listener: std::net::TcpListener,
    token: String,
    tls: Arc<rustls::ServerConfig>,
    max_offset: Duration,
    arrivals: Sender<Arrived>,
) -> std::io::Result<Opened> {
    let listener = hub.listener(listener)?;
    let door = Arc::new(Door {
        token,
        tls: tokio_rustls::TlsAcceptor::from(tls),
        max_offset,
        admission: Mutex::new(Admission::new(HANDSHAKES, PER_ADDRESS)),
        hush: Mutex::new(Hush::new(10, Duration::from_secs(1))),
        began: Instant::now(),
        arrivals,
    });
    hub.spawn(accept(listener, door.clone()));
    Ok(Opened(door))
}

/// Releases a handshake's place in the admission when its task ends, however it ends.
struct Place<'a>(&'a Door, SocketAddr);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Ok(mut a) = self.0.admission.lock() {
            a.leave(self.1.ip());
        }
    }
}

async fn accept(listener: tokio::net::TcpListener, door: Arc<Door>) {
    let mut backoff = Duration::ZERO;
    loop {
        let (tcp, addr) = match listener.accept().await {
            Ok(pair) => {
                backoff = Duration::ZERO;
                pair
            }
            Err(e) => {
                // Out of file descriptors, the same error comes back at once: wait, do not spin.
                backoff = (backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(1));
                let any = SocketAddr::from(([0, 0, 0, 0], 0));
                door.refuse(any, format!("cannot accept a connection ({e}); trying again in {backoff:?}"));
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        let admitted = door.admission.lock().is_ok_and(|mut a| a.enter(addr.ip()));
        if !admitted {
            drop(tcp);
            door.refuse(
                addr,
                format!(
                    "closed at once: {HANDSHAKES} handshakes at once in all, {PER_ADDRESS} from one address, at most"
                ),
            );
            continue;
        }
        let door = door.clone();
        tokio::spawn(async move {
            let _place = Place(&door, addr);
            let arrived = match tokio::time::timeout(DEADLINE, handshake(tcp, &door)).await {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(reason)) => Err(reason),
                Err(_) => Err(format!("no complete handshake within {DEADLINE:?}")),
            };
            match arrived {
                Ok(a) => {
                    let _ = door.arrivals.send(Ok(a));
                }
                Err(reason) => door.refuse(addr, reason),
            }
        });
    }
}

/// TLS, the token, the clock: an [`Arrival`], or why not (empty: a probe
/// that connected and closed without a word, not worth a line).
async fn handshake(tcp: tokio::net::TcpStream, door: &Door) -> Result<Arrival, String> {
    let _ = tcp.set_nodelay(true);
    let mut tls = match door.tls.accept(tcp).await {
        Ok(t) => t,
        // Kubernetes' tcpSocket readiness check connects and closes.
        Err(e) if matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset) => {
            return Err(String::new());
        }
        Err(e) => return Err(format!("no TLS handshake ({e}): agents join with https://HOST:PORT")),
    };
    let mut binding = [0u8; 32];
    tls.get_ref().1.export_keying_material(&mut binding, auth::BINDING_LABEL, None).map_err(|e| e.to_string())?;
    let mut gate = Gate::new(&door.token, binding, auth::nonce().map_err(|e| e.to_string())?, door.max_offset);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let mut inbox = std::collections::VecDeque::new();
    loop {
        while inbox.is_empty() {
            let n = match tls.read(&mut chunk).await {
                Ok(0) => return Err("closed the connection during the handshake".into()),
                Ok(n) => n,
                Err(e) => return Err(format!("the handshake failed ({e})")),
            };
            buf.extend_from_slice(&chunk[..n]);
            let frames = wire::take_frames_within(&mut buf, wire::HANDSHAKE_FRAME)
                .map_err(|e| format!("sent a bad frame during the handshake ({e})"))?;
            inbox.extend(frames);
        }
        let Some(msg) = inbox.pop_front() else { continue };
        let Message::Control(c) = msg else { return Err("sent a second during the handshake".into()) };
        match gate.on(c, wall_ns()) {
            Next::Say(said) => {
                for c in said {
                    send(&mut tls, c).await?;
                }
            }
            Next::Refuse { tell, log } => {
                if let Some(reason) = tell {
                    let _ = send(&mut tls, Control::Refused { reason }).await;
                    let _ = tls.shutdown().await;
                }
                return Err(log);
            }
            Next::Passed { name, claim, estimate, layout } => {
                if !inbox.is_empty() {
                    return Err(format!("agent {name}: spoke out of turn after the clock probes"));
                }
                let (tcp, session) = tls.into_inner();
                let conn = tcp.into_std().and_then(|tcp| Conn::server(tcp, session, buf)).map_err(|e| e.to_string())?;
                return Ok(Arrival { conn, name, claim, estimate, layout });
            }
        }
    }
}

async fn send(tls: &mut tokio_rustls::server::TlsStream<tokio::net::TcpStream>, c: Control) -> Result<(), String> {
    let frame = wire::encode(&Message::Control(c));
    tls.write_all(&frame).await.map_err(|e| format!("the handshake failed ({e})"))?;
    tls.flush().await.map_err(|e| format!("the handshake failed ({e})"))
}
