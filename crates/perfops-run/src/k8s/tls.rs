//! The TLS material of one distributed run (#31, point 3): a fresh key and a
//! self-signed certificate for the coordinator's Service names, made once per
//! `perfops k8s`. The coordinator serves with both (`--tls-cert`,
//! `--tls-key`); the agents get the certificate alone and trust nothing else
//! (`--tls-ca`), so they pin this one coordinator: a pod that takes over the
//! Service's name or address without the key cannot complete a handshake.
//!
//! It owns the certificate's names and validity, not where the files go in
//! the pods (`manifest.rs`) nor the clock and the writing (`mod.rs`).
//!
//! No CA stands between the agents and the certificate: a CA key would be one
//! more secret to keep or throw away, and a leaf the agents trust directly
//! cannot be used to sign another name. The validity is a year from the day
//! before it is made (a node's clock a little behind still accepts it):
//! manifests are written shortly before they are applied, and running
//! `perfops k8s` again makes new ones.

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, date_time_ymd};

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Material {
    /// The certificate (the agents' trust anchor and the coordinator's chain).
    pub(crate) cert_pem: String,
    /// The coordinator's private key: in its Secret, mounted by the coordinator only.
    pub(crate) key_pem: String,
}

/// The DNS names a pod in the cluster may use for the Service `service` in
/// namespace `ns`: the short name (same namespace), with the namespace, the
/// `.svc` name the manifests' join URL uses, and the fully qualified one of
/// the default cluster domain.
pub(crate) fn service_names(service: &str, ns: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{ns}"),
        format!("{service}.{ns}.svc"),
        format!("{service}.{ns}.svc.cluster.local"),
    ]
}

/// A civil date (year, month, day) from days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`), so that the validity needs no date crate.
pub(crate) fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

/// A fresh key and a certificate for `names`, valid from the day before
/// `today_days` (days since the epoch) for a year.
pub(crate) fn material(names: &[String], today_days: i64) -> Result<Material, rcgen::Error> {
    let mut params = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
    params.distinguished_name = dn;
    let (y, m, d) = civil_from_days(today_days - 1);
    params.not_before = date_time_ymd(y, m, d);
    let (y, m, d) = civil_from_days(today_days + 365);
    params.not_after = date_time_ymd(y, m, d);
    // ECDSA P-256 (rcgen's default): small, and every rustls provider takes it.
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Material { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

    use super::*;

    /// Days since the epoch to dates, around the edges that break naive code.
    #[test]
    fn civil_dates() {
        let cases: &[(i64, (i32, u8, u8))] = &[
            (0, (1970, 1, 1)),        // the epoch
            (-1, (1969, 12, 31)),     // before it
            (59, (1970, 3, 1)),       // March after a common February
            (11_016, (2000, 2, 29)),  // a leap day of a century divisible by 400
            (20_785, (2026, 11, 28)), // the day this was written
            (20_819, (2027, 1, 1)),   // a new year
        ];
        for (days, want) in cases {
            assert_eq!(civil_from_days(*days), *want, "{days}");
        }
    }

    /// A handshake between a coordinator serving `m` and an agent that
    /// trusts the certificate `pinned` alone, over memory, as a pod would
    /// name the Service: `name`. An error when the agent refuses.
    fn handshake(m: &Material, pinned: &str, name: &str, now: UnixTime) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cert = CertificateDer::from_pem_slice(m.cert_pem.as_bytes()).unwrap();
        let key = PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone().into_owned()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(pinned.as_bytes()).unwrap()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        // The verifier, asked directly at `now`, then a real handshake.
        let server_name = ServerName::try_from(name.to_string()).unwrap();
        rustls::client::danger::ServerCertVerifier::verify_server_cert(&*verifier, &cert, &[], &server_name, &[], now)?;
        // The handshake with the agent's own configuration (`--tls-ca`: this certificate alone).
        let pinned = CertificateDer::from_pem_slice(pinned.as_bytes()).unwrap().into_owned();
        let client = perfops_engine::tls::client(perfops_engine::tls::Trust::Only(vec![pinned]), &[]).unwrap();
        let mut c = rustls::ClientConnection::new(client, server_name).unwrap();
        let mut s = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            s.read_tls(&mut &buf[..]).unwrap();
            s.process_new_packets()?;
            buf.clear();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            c.read_tls(&mut &buf[..]).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not end");
    }

    /// #31, point 3: the certificate is good for every name a pod may give
    /// the Service, for a year, and for nothing else.
    #[test]
    fn agents_pin_the_coordinators_certificate() {
        let today = 20_785; // 2026-11-28
        let names = service_names("perfops-orders-coordinator", "load");
        let m = material(&names, today).unwrap();
        assert!(m.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", m.cert_pem);
        assert!(m.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let at = |days: i64| UnixTime::since_unix_epoch(std::time::Duration::from_secs((days * 86_400 + 3600) as u64));
        let cases: &[(&str, i64, bool)] = &[
            // The join URL's name, today.
            ("perfops-orders-coordinator.load.svc", today, true),
            // The short name, from a pod in the namespace.
            ("perfops-orders-coordinator", today, true),
            // With the namespace only.
            ("perfops-orders-coordinator.load", today, true),
            // Fully qualified, the default cluster domain.
            ("perfops-orders-coordinator.load.svc.cluster.local", today, true),
            // A node whose clock is a little behind.
            ("perfops-orders-coordinator.load.svc", today - 1, true),
            // The same Service name in another namespace: refused.
            ("perfops-orders-coordinator.other.svc", today, false),
            // Another Service: refused.
            ("perfops-orders-agents.load.svc", today, false),
            // Expired after a year and a day.
            ("perfops-orders-coordinator.load.svc", today + 367, false),
        ];
        for (name, day, ok) in cases {
            let got = handshake(&m, &m.cert_pem, name, at(*day));
            assert_eq!(got.is_ok(), *ok, "{name} on day {day}: {got:?}");
        }
        // Another run, another key, the same names: an agent pinned to one
        // refuses a coordinator serving the other.
        let other = material(&names, today).unwrap();
        assert_ne!(other.key_pem, m.key_pem);
        let got = handshake(&other, &m.cert_pem, "perfops-orders-coordinator.load.svc", at(today));
        assert!(got.is_err(), "{got:?}");
    }
}
