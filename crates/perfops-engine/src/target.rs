//! The target of a run and the bytes of the request sent to it.

use std::net::{SocketAddr, ToSocketAddrs};

use url::Url;

/// Why a target or request cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not a URL.
    #[error("`{url}` is not a valid URL: {reason}")]
    BadUrl {
        /// The text given.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// A scheme other than http or https.
    #[error("`{0}`: only http:// and https:// URLs are supported")]
    Scheme(String),
    /// The host name does not resolve.
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve {
        /// Host name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// A header that would break the request framing.
    #[error("header `{0}` is not `Name: value` or contains a line break")]
    BadHeader(String),
}

/// Where requests go: a resolved address, and what the request line and
/// `Host` header carry.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: Url,
    /// The resolved address connections go to.
    pub addr: SocketAddr,
    /// True for https.
    pub tls: bool,
    /// Host name for SNI and certificate checks.
    pub host: String,
    /// `host[:port]` for the Host header (port only when not the default).
    pub authority: String,
    /// Path and query of the request line.
    pub path: String,
}

impl Target {
    /// Parse and resolve `url` (resolution happens once, before the run).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let parsed = Url::parse(url).map_err(|e| TargetError::BadUrl { url: url.into(), reason: e.to_string() })?;
        let tls = match parsed.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(TargetError::Scheme(url.into())),
        };
        let host =
            parsed.host_str().ok_or_else(|| TargetError::BadUrl { url: url.into(), reason: "no host".into() })?;
        let port = parsed.port_or_known_default().unwrap_or(if tls { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let addr = (bare.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| TargetError::Resolve { host: bare.clone(), reason: e.to_string() })?
            .next()
            .ok_or_else(|| TargetError::Resolve { host: bare.clone(), reason: "no address".into() })?;
        let authority = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let mut path = parsed.path().to_string();
        if let Some(q) = parsed.query() {
            path.push('?');
            path.push_str(q);
        }
        Ok(Target { addr, tls, host: bare, authority, path, url: parsed })
    }
}

/// A complete HTTP/1.1 request, rendered once into the bytes written by one
/// `write` per request.
#[derive(Debug, Clone)]
pub struct Request {
    bytes: Vec<u8>,
    /// True for HEAD: its response has a Content-Length but no body.
    pub head: bool,
}

impl Request {
    /// Render `method path` for `target` with extra `headers` ("Name: value")
    /// and `body`. `Host`, `User-Agent` and `Content-Length` are added unless given.
    pub fn new(method: &str, target: &Target, headers: &[String], body: &[u8]) -> Result<Request, TargetError> {
        let mut out = format!("{method} {} HTTP/1.1\r\n", target.path);
        let has = |name: &str| {
            headers.iter().any(|h| h.split(':').next().is_some_and(|n| n.trim().eq_ignore_ascii_case(name)))
        };
        let (host, ua, len) = (has("host"), has("user-agent"), has("content-length"));
        if !host {
            out.push_str(&format!("Host: {}\r\n", target.authority));
        }
        if !ua {
            out.push_str(concat!("User-Agent: perfops/", env!("CARGO_PKG_VERSION"), "\r\n"));
        }
        for h in headers {
            let Some((name, value)) = h.split_once(':') else {
                return Err(TargetError::BadHeader(h.clone()));
            };
            if name.trim().is_empty() || h.contains(['\r', '\n']) {
                return Err(TargetError::BadHeader(h.clone()));
            }
            out.push_str(&format!("{}: {}\r\n", name.trim(), value.trim()));
        }
        let wants_length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
        if wants_length && !len {
            out.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(body);
        Ok(Request { bytes, head: method.eq_ignore_ascii_case("HEAD") })
    }

    /// The bytes on the wire.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_buffer_with_host_and_length() {
        let t = Target::parse("http://127.0.0.1:8080/orders?page=2").unwrap();
        let r = Request::new("POST", &t, &["Authorization: Bearer x".into()], b"{}").unwrap();
        let text = String::from_utf8(r.bytes().to_vec()).unwrap();
        assert!(text.starts_with("POST /orders?page=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"), "{text}");
        assert!(text.contains("Authorization: Bearer x\r\n"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
    }

    #[test]
    fn default_ports_and_ipv6() {
        let t = Target::parse("https://[::1]/").unwrap();
        assert!(t.tls);
        assert_eq!(t.addr.port(), 443);
        assert_eq!(t.authority, "[::1]");
        assert_eq!(t.host, "::1");
        assert!(matches!(Target::parse("ftp://x/"), Err(TargetError::Scheme(_))));
        assert!(matches!(Target::parse("nope"), Err(TargetError::BadUrl { .. })));
    }

    #[test]
    fn rejects_header_injection() {
        let t = Target::parse("http://127.0.0.1:1/").unwrap();
        assert!(Request::new("GET", &t, &["X: a\r\nEvil: 1".into()], b"").is_err());
        assert!(Request::new("GET", &t, &["no colon".into()], b"").is_err());
        let custom_host = Request::new("GET", &t, &["host: example".into()], b"").unwrap();
        assert_eq!(String::from_utf8_lossy(custom_host.bytes()).matches("ost:").count(), 1);
    }
}
