//! TLS client configuration, the one builder every TLS client of perfops uses: the load's
//! connections, the watcher's scrapes and probes, PromQL, gRPC reflection, and the fleet's agent.
//! What differs between them is which server certificates they trust, and that is a choice made
//! explicitly by the caller ([`Trust`]), never a flag read here: the system's roots (with a
//! cluster's own CA besides), given certificates alone (a private CA, or one pinned certificate),
//! or any certificate (`--insecure`; an agent without `--tls-ca`, whose coordinator is proved by
//! the token instead). It does not connect: callers hand the configuration to rustls.

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

/// Which server certificates a client trusts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// The system's roots, and these certificates besides (a cluster's own CA): a target or a
    /// watched endpoint named by a URL.
    Platform(Vec<CertificateDer<'static>>),
    /// These certificates alone, the system's roots not at all: a private CA, or the one
    /// certificate of a server pinned (the agent's `--tls-ca`).
    Only(Vec<CertificateDer<'static>>),
    /// Any certificate, though the handshake's signatures are still checked ([`AnyCertificate`]).
    Any,
}

impl Trust {
    /// What a client of the target (or of an endpoint watched beside it) trusts: any certificate
    /// with `insecure`, else the system's roots and the certificates of `ca_file` (a PEM file
    /// that must hold at least one; it is read, and must read, even with `insecure`).
    pub fn target(insecure: bool, ca_file: Option<&Path>) -> Result<Trust, TlsSetupError> {
        let mut extra = Vec::new();
        if let Some(path) = ca_file {
            extra = pem_certificates(path)?;
            if extra.is_empty() {
                return Err(TlsSetupError::CaFile {
                    path: path.display().to_string(),
                    message: "no certificate in it".into(),
                });
            }
        }
        Ok(if insecure { Trust::Any } else { Trust::Platform(extra) })
    }
}

/// The certificates of a PEM file, in order (none when it holds none).
pub fn pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let ca_error = |message: String| TlsSetupError::CaFile { path: path.display().to_string(), message };
    CertificateDer::pem_file_iter(path)
        .map_err(|e| ca_error(e.to_string()))?
        .map(|cert| cert.map_err(|e| ca_error(e.to_string())))
        .collect()
}

/// A client configuration (rustls with ring) that trusts `trust` and offers the protocols of
/// `alpn` in that order of preference (none: no ALPN extension).
pub fn client(trust: Trust, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let roots = |system: bool, extra: Vec<CertificateDer<'static>>| -> Result<RootCertStore, rustls::Error> {
        let mut roots = RootCertStore::empty();
        if system {
            // Unreadable certificates are skipped, as browsers do. With no roots at all (no
            // ca-certificates), every handshake fails and is counted as a `tls` failure: the
            // run still says what happened.
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
        for cert in extra {
            roots.add(cert)?;
        }
        Ok(roots)
    };
    let mut config = match trust {
        Trust::Any => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        Trust::Platform(extra) => builder.with_root_certificates(roots(true, extra)?).with_no_client_auth(),
        Trust::Only(certs) => builder.with_root_certificates(roots(false, certs)?).with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// ALPN: HTTP/2 first, HTTP/1.1 if the server prefers it (`https://`).
pub(crate) const ALPN_H2_OR_H1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN: HTTP/2 alone (`defaults.protocol: h2` over `https://`).
pub(crate) const ALPN_H2: &[&[u8]] = &[b"h2"];
/// ALPN: HTTP/1.1 alone: the load over HTTP/1.1, and every `https` read of the watcher.
pub(crate) const ALPN_H1: &[&[u8]] = &[b"http/1.1"];

/// Accepts every server certificate, but still checks that the peer holds
/// its key (the handshake's signatures): `--insecure` against a target, and
/// a fleet agent without `--tls-ca`, whose coordinator is proved by the
/// token over the session instead of by a CA.
#[derive(Debug)]
pub struct AnyCertificate(Arc<CryptoProvider>);

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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::Duration;

    use super::*;

    /// A handshake with a real TLS server on loopback, as `name`: the protocol ALPN chose, or
    /// why the client refused.
    fn handshake(config: Arc<ClientConfig>, url: &str, name: &str) -> Result<Option<Vec<u8>>, String> {
        let addr = url.trim_start_matches("https://").trim_end_matches('/');
        let mut sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
        let name = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
        let mut conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).map_err(|e| e.to_string())?;
        }
        let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
        conn.send_close_notify();
        let _ = conn.complete_io(&mut sock);
        let _ = sock.flush();
        Ok(alpn)
    }

    fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().unwrap()
    }

    /// Each trust rule against two servers with self-signed certificates for `localhost` and
    /// `127.0.0.1` (neither in the system's roots): `ours` is the server connected to, `other`
    /// another one, as a coordinator of another run is.
    #[test]
    fn each_trust_rule_accepts_and_refuses_what_it_says() {
        let ours = perfops_testkit::tls_fixed_delay(Duration::ZERO);
        let other = perfops_testkit::tls_fixed_delay(Duration::ZERO);
        let (mine, theirs) = (certs(ours.cert_pem().unwrap()), certs(other.cert_pem().unwrap()));
        // (the rule, the name the client asks for, whether the handshake completes)
        let cases: Vec<(Trust, &str, bool)> = vec![
            // `--insecure`, or an agent without `--tls-ca`: any certificate.
            (Trust::Any, "localhost", true),
            // ... whatever name it is for.
            (Trust::Any, "example.com", true),
            // An agent's `--tls-ca` holding this coordinator's certificate: pinned, taken.
            (Trust::Only(mine.clone()), "localhost", true),
            // ... by its address too (the certificate names 127.0.0.1).
            (Trust::Only(mine.clone()), "127.0.0.1", true),
            // ... but not for a name the certificate does not have.
            (Trust::Only(mine.clone()), "example.com", false),
            // Another run's certificate pinned: refused (a server that took the name).
            (Trust::Only(theirs.clone()), "localhost", false),
            // Nothing pinned: nothing is trusted, not even the system's roots.
            (Trust::Only(Vec::new()), "localhost", false),
            // The system's roots alone: a self-signed certificate is refused.
            (Trust::Platform(Vec::new()), "localhost", false),
            // The system's roots and a cluster's CA file that holds it: taken.
            (Trust::Platform(mine.clone()), "localhost", true),
            // ... a CA file that holds another: refused.
            (Trust::Platform(theirs.clone()), "localhost", false),
        ];
        for (i, (trust, name, ok)) in cases.into_iter().enumerate() {
            let what = format!("case {i}: {trust:?} as {name}");
            let config = client(trust, ALPN_H1).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = handshake(config, &ours.url(), name);
            assert_eq!(got.is_ok(), ok, "{what}: {got:?}");
            if ok {
                assert_eq!(got.unwrap().as_deref(), Some(&b"http/1.1"[..]), "{what}: ALPN");
            }
        }
    }

    /// The protocols offered are the caller's, in its order; none means no ALPN at all (the
    /// fleet's channel).
    #[test]
    fn alpn_is_what_the_caller_offers() {
        type Offered = Vec<Vec<u8>>;
        let cases: [(&[&[u8]], Offered); 3] = [
            // `https://`: h2 first, HTTP/1.1 if the server prefers it.
            (ALPN_H2_OR_H1, vec![b"h2".to_vec(), b"http/1.1".to_vec()]),
            // The watcher's reads.
            (ALPN_H1, vec![b"http/1.1".to_vec()]),
            // The fleet's agent.
            (&[], vec![]),
        ];
        for (alpn, want) in cases {
            assert_eq!(client(Trust::Any, alpn).unwrap().alpn_protocols, want);
        }
    }

    /// A target's trust from its flags: `--insecure` takes any certificate, but a CA file named
    /// must still read and hold a certificate.
    #[test]
    fn a_targets_trust_from_its_flags() {
        let dir = std::env::temp_dir().join(format!("perfops-tls-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let server = perfops_testkit::tls_fixed_delay(Duration::ZERO);
        let (ca, empty, missing) = (dir.join("ca.pem"), dir.join("empty.pem"), dir.join("missing.pem"));
        std::fs::write(&ca, server.cert_pem().unwrap()).unwrap();
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let is = |t: Result<Trust, TlsSetupError>| match t {
            Ok(Trust::Any) => "any".to_string(),
            Ok(Trust::Platform(c)) => format!("platform+{}", c.len()),
            Ok(Trust::Only(c)) => format!("only {}", c.len()),
            Err(e) => e.to_string().replace(&dir.display().to_string(), "DIR"),
        };
        // (insecure, the CA file, the rule or the error)
        let cases: [(bool, Option<&Path>, &str); 6] = [
            // The default: the system's roots.
            (false, None, "platform+0"),
            // `--insecure`.
            (true, None, "any"),
            // A cluster's CA: the system's roots and its certificate.
            (false, Some(&ca), "platform+1"),
            // `--insecure` wins, the file read all the same.
            (true, Some(&ca), "any"),
            // A file with no certificate in it is an error now, not a run of `tls` failures.
            (false, Some(&empty), "CA file DIR/empty.pem: no certificate in it"),
            // Nor one that is not there, even with `--insecure`.
            (true, Some(&missing), "CA file DIR/missing.pem: I/O error: No such file or directory (os error 2)"),
        ];
        for (insecure, file, want) in cases {
            assert_eq!(is(Trust::target(insecure, file)), want, "{insecure} {file:?}");
        }
        // Read alone (the agent's `--tls-ca`), a file without certificates is an empty list.
        assert_eq!(pem_certificates(&empty).unwrap().len(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
