//! TLS client configuration: rustls with the system's roots, or, with
//! `--insecure`, a verifier that accepts any certificate (signatures are still
//! checked, so the handshake itself is real).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// A CA file that cannot be read or holds no certificate.
    #[error("CA file {path}: {message}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

/// A client configuration for HTTP/1.1 over TLS.
pub fn client_config(insecure: bool) -> Result<Arc<ClientConfig>, TlsSetupError> {
    client_config_with(insecure, None)
}

/// ALPN: HTTP/2 first, HTTP/1.1 if the server prefers it (`https://`).
pub(crate) const ALPN_H2_OR_H1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN: HTTP/2 alone (`defaults.protocol: h2` over `https://`).
pub(crate) const ALPN_H2: &[&[u8]] = &[b"h2"];
/// ALPN: HTTP/1.1 alone.
pub(crate) const ALPN_H1: &[&[u8]] = &[b"http/1.1"];

/// [`client_config`] offering the protocols of `alpn`, in that order of preference.
pub(crate) fn client_config_alpn(insecure: bool, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let config = client_config_with(insecure, None)?;
    let mut config = Arc::unwrap_or_clone(config);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// [`client_config`], also trusting the certificates of a PEM file (a cluster's own CA).
pub fn client_config_with(insecure: bool, ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let mut extra = Vec::new();
    if let Some(path) = ca_file {
        let ca_error = |message: String| TlsSetupError::CaFile { path: path.display().to_string(), message };
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| ca_error(e.to_string()))? {
            extra.push(cert.map_err(|e| ca_error(e.to_string()))?);
        }
        if extra.is_empty() {
            return Err(ca_error("no certificate in it".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let mut config = if insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider))).with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        // Unreadable certificates are skipped, as browsers do. With no roots at
        // all (no ca-certificates), every handshake fails and is counted as a
        // `tls` failure: the run still says what happened.
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        for cert in extra {
            roots.add(cert)?;
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts every server certificate, but still checks that the peer holds
/// its key (the handshake's signatures): `--insecure` against a target, and
/// a fleet agent without `--tls-ca`, whose coordinator is proved by the
/// token over the session instead of by a CA.
#[derive(Debug)]
pub struct AnyCertificate(Arc<CryptoProvider>);

impl AnyCertificate {
    /// The verifier, checking signatures with `provider`'s algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> AnyCertificate {
        AnyCertificate(provider)
    }
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
