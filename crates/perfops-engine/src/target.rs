//! The target of a run: a URL resolved once, before the run.

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
    /// A scheme other than http, https, ws or wss.
    #[error("`{0}`: only http://, https://, ws:// and wss:// URLs are supported")]
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
    /// True for https and wss.
    pub tls: bool,
    /// True for ws and wss: `quick` opens WebSocket sessions.
    pub websocket: bool,
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
        let (tls, websocket) = match parsed.scheme() {
            "http" => (false, false),
            "https" => (true, false),
            "ws" => (false, true),
            "wss" => (true, true),
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
        Ok(Target { addr, tls, websocket, host: bare, authority, path, url: parsed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ports_and_ipv6() {
        let t = Target::parse("https://[::1]/").unwrap();
        assert!(t.tls);
        assert_eq!(t.addr.port(), 443);
        assert_eq!(t.authority, "[::1]");
        assert_eq!(t.host, "::1");
        assert!(matches!(Target::parse("ftp://x/"), Err(TargetError::Scheme(_))));
        // WebSocket URLs: their default ports, TLS for wss.
        let ws = Target::parse("ws://127.0.0.1/chat?room=1").unwrap();
        assert!(ws.websocket && !ws.tls);
        assert_eq!((ws.addr.port(), ws.path.as_str()), (80, "/chat?room=1"));
        let wss = Target::parse("wss://127.0.0.1/").unwrap();
        assert!(wss.websocket && wss.tls);
        assert_eq!(wss.addr.port(), 443);
        assert!(matches!(Target::parse("nope"), Err(TargetError::BadUrl { .. })));
    }
}
