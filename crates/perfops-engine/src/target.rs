//! The target of a run: a URL resolved once, before the run, and the
//! protocol its scheme asks for (`http://` HTTP/1.1, `https://` HTTP/2 or
//! HTTP/1.1 as ALPN decides, `h2c://` HTTP/2 in clear text with prior
//! knowledge), which `defaults.protocol` or `quick --http2` may force.

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
    /// A scheme other than http, https, h2c, grpc, grpcs, ws or wss.
    #[error("`{0}`: only http://, https://, h2c://, grpc://, grpcs://, ws:// and wss:// URLs are supported")]
    Scheme(String),
    /// The host name does not resolve.
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve {
        /// Host name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// A header that would break the request framing. Shown redacted (#31): a value typed without
    /// its name (`-H TOKEN`) is a secret echoed into a log.
    #[error(
        "header `{}` is not `Name: value` with a token for a name (letters, digits, `-`...), or holds CR, LF or NUL",
        perfops_core::scenario::redact::redact_header_line(.0)
    )]
    BadHeader(String),
}

/// Which HTTP a target speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (`http://`, or forced).
    Http1,
    /// HTTPS: HTTP/2 if the server's ALPN picks `h2`, else HTTP/1.1.
    Alpn,
    /// HTTP/2: over TLS (ALPN `h2` alone), or in clear text with prior
    /// knowledge (`h2c://`).
    H2,
}

impl Protocol {
    /// The name results and summaries give it: `http/1.1`, `h2`, or
    /// `h2 or http/1.1` before ALPN has decided.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::Alpn => "h2 or http/1.1",
            Protocol::H2 => "h2",
        }
    }
}

/// What a step's requests are, for the name of the protocol it spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepKind {
    /// An HTTP request: in the run's protocol.
    Http,
    /// A gRPC call: over HTTP/2.
    Grpc,
    /// A WebSocket session (its upgrade and its messages): over HTTP/1.1.
    WebSocket,
}

impl StepKind {
    /// Its name before the run decided its HTTP: `http`, `grpc`, `websocket`.
    pub(crate) fn family(self) -> &'static str {
        match self {
            StepKind::Http => "http",
            StepKind::Grpc => "grpc",
            StepKind::WebSocket => "websocket",
        }
    }
}

/// The name results give to what a step spoke: the run's protocol as its
/// connections negotiated it (`decided`, [`Protocol::Http1`] or
/// [`Protocol::H2`]), how it was chosen (ALPN, prior knowledge, TLS
/// forced) and what the step carried over it. A name is data in
/// `summary.json`, `compare` and the report: stable once released.
pub(crate) fn step_protocol(decided: Protocol, target: &Target, kind: StepKind) -> &'static str {
    // ALPN chose among h2 and http/1.1 (`https://`), or offered one alone.
    let alpn = target.protocol == Protocol::Alpn;
    match (kind, decided == Protocol::H2, target.tls, alpn) {
        (StepKind::WebSocket, _, false, _) => "websocket",
        (StepKind::WebSocket, _, true, _) => "websocket (TLS)",
        (StepKind::Grpc, _, false, _) => "grpc over h2c",
        (StepKind::Grpc, _, true, true) => "grpc over h2 (ALPN)",
        (StepKind::Grpc, _, true, false) => "grpc over h2 (TLS)",
        (StepKind::Http, false, false, _) => "http/1.1",
        (StepKind::Http, false, true, true) => "http/1.1 (ALPN)",
        (StepKind::Http, false, true, false) => "http/1.1 (TLS)",
        (StepKind::Http, true, false, _) => "h2c",
        (StepKind::Http, true, true, true) => "h2 (ALPN)",
        (StepKind::Http, true, true, false) => "h2 (TLS)",
    }
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
    /// The HTTP it speaks, from its scheme (see [`Target::force`]).
    pub protocol: Protocol,
}

impl Target {
    /// Parse and resolve `url` (resolution happens once, before the run).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let parsed = Url::parse(url).map_err(|e| TargetError::BadUrl { url: url.into(), reason: e.to_string() })?;
        // WebSocket's upgrade is HTTP/1.1 (over TLS, ALPN offers http/1.1 alone).
        let (tls, protocol, websocket) = match parsed.scheme() {
            "http" => (false, Protocol::Http1, false),
            "https" => (true, Protocol::Alpn, false),
            "h2c" | "grpc" => (false, Protocol::H2, false),
            "grpcs" => (true, Protocol::H2, false),
            "ws" => (false, Protocol::Http1, true),
            "wss" => (true, Protocol::Http1, true),
            _ => return Err(TargetError::Scheme(url.into())),
        };
        let host =
            parsed.host_str().ok_or_else(|| TargetError::BadUrl { url: url.into(), reason: "no host".into() })?;
        let port = parsed.port_or_known_default().unwrap_or(if tls { 443 } else { 80 });
        // `Target::grpc_method` reads the path of a `grpc://` URL.
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
        Ok(Target { addr, tls, websocket, host: bare, authority, path, url: parsed, protocol })
    }

    /// The same target in `protocol` (`defaults.protocol`, `quick
    /// --http2`): HTTP/2 over `http://` is h2c with prior knowledge, over
    /// `https://` ALPN offers `h2` alone; HTTP/1.1 over `https://` offers
    /// `http/1.1` alone.
    pub fn force(mut self, protocol: Protocol) -> Target {
        self.protocol = protocol;
        self
    }

    /// A `grpc://host:port/package.Service/Method` URL's method (`quick`).
    pub fn grpc_method(&self) -> Option<&str> {
        matches!(self.url.scheme(), "grpc" | "grpcs").then(|| self.path.trim_start_matches('/'))
    }

    /// The `:scheme` of its HTTP/2 requests.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
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
        // (URL, TLS, protocol): the scheme says both
        let cases = [
            ("http://127.0.0.1:1/", false, Protocol::Http1), // HTTP/1.1 in clear
            ("https://127.0.0.1:1/", true, Protocol::Alpn),  // ALPN decides
            ("h2c://127.0.0.1:1/", false, Protocol::H2),     // HTTP/2 with prior knowledge
            ("grpc://127.0.0.1:1/", false, Protocol::H2),    // gRPC in clear text: h2c
            ("grpcs://127.0.0.1:1/", true, Protocol::H2),    // gRPC over TLS: ALPN h2 alone
        ];
        for (url, tls, protocol) in cases {
            let t = Target::parse(url).unwrap();
            assert_eq!((t.tls, t.protocol), (tls, protocol), "{url}");
        }
        assert_eq!(Target::parse("h2c://127.0.0.1/").unwrap().addr.port(), 80, "h2c's default port is 80");

        // WebSocket URLs: their default ports, TLS for wss.
        let ws = Target::parse("ws://127.0.0.1/chat?room=1").unwrap();
        assert!(ws.websocket && !ws.tls);
        assert_eq!((ws.addr.port(), ws.path.as_str()), (80, "/chat?room=1"));
        let wss = Target::parse("wss://127.0.0.1/").unwrap();
        assert!(wss.websocket && wss.tls);
        assert_eq!(wss.addr.port(), 443);
        assert!(matches!(Target::parse("nope"), Err(TargetError::BadUrl { .. })));
    }

    #[test]
    fn protocol_names_say_how_it_was_chosen() {
        use StepKind::*;
        // (URL, what the connections negotiated, step kind, the name results give)
        let cases = [
            ("http://127.0.0.1:1/", Protocol::Http1, Http, "http/1.1"), // plain HTTP/1.1
            ("https://127.0.0.1:1/", Protocol::H2, Http, "h2 (ALPN)"),  // the server's ALPN chose h2
            ("https://127.0.0.1:1/", Protocol::Http1, Http, "http/1.1 (ALPN)"), // ... or http/1.1
            ("h2c://127.0.0.1:1/", Protocol::H2, Http, "h2c"),          // prior knowledge, clear text
            ("grpc://127.0.0.1:1/", Protocol::H2, Grpc, "grpc over h2c"), // gRPC in clear text
            ("grpcs://127.0.0.1:1/", Protocol::H2, Grpc, "grpc over h2 (TLS)"), // ALPN offered h2 alone
            ("https://127.0.0.1:1/", Protocol::H2, Grpc, "grpc over h2 (ALPN)"), // a grpc: step on https://
            ("https://127.0.0.1:1/", Protocol::H2, WebSocket, "websocket (TLS)"), // its own http/1.1 connections
            ("ws://127.0.0.1:1/", Protocol::Http1, WebSocket, "websocket"), // quick ws://
        ];
        for (url, decided, kind, want) in cases {
            assert_eq!(step_protocol(decided, &Target::parse(url).unwrap(), kind), want, "{url} {kind:?}");
        }
        // `defaults.protocol` forces one over https://: TLS, no choice.
        let forced = Target::parse("https://127.0.0.1:1/").unwrap().force(Protocol::H2);
        assert_eq!(step_protocol(Protocol::H2, &forced, Http), "h2 (TLS)");
        let forced = Target::parse("https://127.0.0.1:1/").unwrap().force(Protocol::Http1);
        assert_eq!(step_protocol(Protocol::Http1, &forced, Http), "http/1.1 (TLS)");
    }
}
