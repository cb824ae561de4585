//! gRPC in a scenario (#14): a call (`grpc: package.Service/Method`, its
//! `.proto` files) and the status codes by name, as `expect: { grpc_status:
//! OK }` writes them and results count them (`grpc_unavailable`, ...).
//! Pure data: the engine compiles the `.proto` files, encodes the message
//! and reads the status from the trailers.

use std::fmt;

/// A gRPC method to call, as a step names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcCall {
    /// `package.Service`.
    pub service: String,
    /// `Method`.
    pub method: String,
    /// `.proto` files that define it, as written (relative to the scenario file).
    pub protos: Vec<String>,
}

impl GrpcCall {
    /// Parse `package.Service/Method` (a leading `/` is allowed).
    pub fn parse(text: &str, protos: Vec<String>) -> Result<GrpcCall, String> {
        let t = text.trim().trim_start_matches('/');
        let Some((service, method)) = t.split_once('/') else {
            return Err(format!("`{text}` is not `package.Service/Method`"));
        };
        let ident = |s: &str| !s.is_empty() && s.split('.').all(is_ident);
        if !ident(service) || !is_ident(method) {
            return Err(format!("`{text}` is not `package.Service/Method`"));
        }
        Ok(GrpcCall { service: service.to_string(), method: method.to_string(), protos })
    }

    /// The request path: `/package.Service/Method`.
    pub fn path(&self) -> String {
        format!("/{}/{}", self.service, self.method)
    }
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The gRPC status codes (grpc/doc/statuscodes.md), by number.
pub const GRPC_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// A gRPC status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrpcCode(pub u32);

impl GrpcCode {
    /// `OK`, `UNAVAILABLE` (any case), or the number.
    pub fn parse(text: &str) -> Option<GrpcCode> {
        let t = text.trim();
        if let Ok(n) = t.parse::<u32>() {
            return (n < GRPC_CODES.len() as u32).then_some(GrpcCode(n));
        }
        GRPC_CODES.iter().position(|c| c.eq_ignore_ascii_case(t)).map(|i| GrpcCode(i as u32))
    }

    /// Its name (`UNAVAILABLE`), or its number if it has none.
    pub fn name(self) -> String {
        GRPC_CODES.get(self.0 as usize).map_or_else(|| self.0.to_string(), |n| (*n).to_string())
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_codes_parse() {
        // (text, service and method, or none)
        let cases = [
            ("bench.Echo/Say", Some(("bench.Echo", "Say"))),  // the usual
            ("/bench.Echo/Say", Some(("bench.Echo", "Say"))), // as a path
            ("Echo/Say", Some(("Echo", "Say"))),              // no package
            ("bench.Echo", None),                             // no method
            ("bench..Echo/Say", None),                        // an empty package part
            ("bench.Echo/Say/x", None),                       // too many parts
        ];
        for (text, want) in cases {
            let got = GrpcCall::parse(text, Vec::new()).ok().map(|c| (c.service, c.method));
            assert_eq!(got, want.map(|(s, m)| (s.to_string(), m.to_string())), "{text}");
        }
        assert_eq!(GrpcCall::parse("a.B/C", Vec::new()).map(|c| c.path()), Ok("/a.B/C".to_string()));
        // (text, code)
        let codes = [("OK", Some(0)), ("unavailable", Some(14)), ("14", Some(14)), ("17", None), ("NOPE", None)];
        for (text, want) in codes {
            assert_eq!(GrpcCode::parse(text).map(|c| c.0), want, "{text}");
        }
        assert_eq!(GrpcCode(16).name(), "UNAUTHENTICATED");
    }
}
