//! A raw fleet client for the tests: TLS to a coordinator on loopback (its
//! certificate not verified, as an agent without `--tls-ca` does), frames
//! written and read by hand, proofs made as `src/fleet/auth.rs` makes them.
//! With it a test can be the stranger, the hostile peer or the man in the
//! middle that the real agent never is.

// Each test binary that includes this module uses a subset of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

/// A TLS stream to a coordinator.
pub type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A token strong enough for the coordinator (32 hex characters: `openssl rand -hex 16`).
pub const TOKEN: &str = "9b1f3ac47e2d8065f1c3a9be47d20c58";

/// A client configuration that takes any certificate, as the agent's without `--tls-ca` (the
/// builder the agent itself uses).
pub fn client_config() -> Arc<rustls::ClientConfig> {
    perfops_engine::tls::client(perfops_engine::tls::Trust::Any, &[]).expect("TLS configuration")
}

/// A server configuration with a fresh self-signed certificate (a relay's).
pub fn server_config() -> Arc<rustls::ServerConfig> {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .expect("cert and key");
    Arc::new(config)
}

/// TLS over `tcp`, the handshake done within `wait`; `Err` if the peer closed or failed it.
pub fn tls_over(tcp: TcpStream, wait: Duration) -> std::io::Result<Tls> {
    tcp.set_read_timeout(Some(wait))?;
    tcp.set_write_timeout(Some(wait))?;
    let name = ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(client_config(), name).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// What both sides of this session bind their proofs to.
pub fn binding(conn: &rustls::ClientConnection) -> [u8; 32] {
    let mut b = [0u8; 32];
    conn.export_keying_material(&mut b, b"EXPORTER-perfops-fleet-v4", None).expect("exporter");
    b
}

/// An agent's proof, as `auth::prove(token, Role::Agent, binding, nonce_c, nonce_a)` makes it.
pub fn agent_proof(token: &str, binding: &[u8; 32], nonce_c: &str, nonce_a: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    let mut m = b"perfops fleet v4 agent\0".to_vec();
    m.extend_from_slice(binding);
    m.extend_from_slice(nonce_c.as_bytes());
    m.push(0);
    m.extend_from_slice(nonce_a.as_bytes());
    ring::hmac::sign(&key, &m).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// One control frame with `json` as its body.
pub fn frame(json: &str) -> Vec<u8> {
    let mut f = ((json.len() + 1) as u32).to_be_bytes().to_vec();
    f.push(1);
    f.extend_from_slice(json.as_bytes());
    f
}

/// Send a control message.
pub fn send(s: &mut impl Write, json: &str) -> std::io::Result<()> {
    s.write_all(&frame(json))?;
    s.flush()
}

/// Read one frame's JSON (a control message), or the error.
pub fn recv(s: &mut impl Read) -> std::io::Result<serde_json::Value> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    assert!(n <= 1 << 20, "a frame of {n} bytes");
    let mut body = vec![0u8; n];
    s.read_exact(&mut body)?;
    serde_json::from_slice(&body[1..]).map_err(std::io::Error::other)
}

/// A hello as an agent of this protocol sends it.
pub fn hello(nonce: &str, name: &str) -> String {
    let protocol = perfops_core::fleet::wire::PROTOCOL;
    let names = perfops_core::fleet::wire::Names::local();
    serde_json::json!({
        "type": "hello", "protocol": protocol, "nonce": nonce, "index": null, "name": name,
        "counters": names.counters, "kinds": names.kinds,
    })
    .to_string()
}

/// 64 hex characters, as a nonce is.
pub fn nonce(seed: u8) -> String {
    format!("{seed:02x}").repeat(32)
}
