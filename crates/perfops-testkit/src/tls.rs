//! TLS for the test servers: a self-signed certificate made with rcgen for
//! `localhost` and `127.0.0.1`, the rustls server configuration that serves
//! it, and the TLS flavour of a server-side connection.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::serve::Conn;

/// A freshly generated certificate and the server configuration using it.
pub(crate) struct Identity {
    /// PEM of the self-signed certificate, for clients to trust.
    pub(crate) cert_pem: String,
    /// rustls configuration (ring provider, HTTP/1.1 ALPN).
    pub(crate) config: Arc<ServerConfig>,
}

/// Makes a self-signed certificate for `localhost` and `127.0.0.1`.
///
/// # Panics
/// If rcgen or rustls reject what they are given (a bug, not a runtime
/// condition): this crate only runs in tests.
pub(crate) fn self_signed() -> Identity {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("rcgen: self-signed certificate");
    let cert: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("rustls: ring supports the default protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("rustls: rcgen certificate and key match");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Identity { cert_pem: certified.cert.pem(), config: Arc::new(config) }
}

/// A server-side TLS connection; the handshake happens on the first read.
pub(crate) type TlsStream = StreamOwned<ServerConnection, TcpStream>;

/// Wraps an accepted socket in a server-side TLS session.
pub(crate) fn accept(config: &Arc<ServerConfig>, sock: TcpStream) -> Option<TlsStream> {
    let conn = ServerConnection::new(Arc::clone(config)).ok()?;
    Some(StreamOwned::new(conn, sock))
}

impl Conn for TlsStream {
    fn finish(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
        let _ = self.sock.shutdown(Shutdown::Write);
    }
}
