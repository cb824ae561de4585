//! Failure kinds: a small `Copy` enum counted in a fixed array, never keyed by
//! a string (oha's wart), so counting a failure on the hot path is one add.

use std::fmt;
use std::ops::{AddAssign, Index};

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// The target refused the connection (nothing listens, or the backlog is full
    /// and the kernel answered RST).
    ConnectRefused,
    /// The connection was not established within the connect timeout (SYNs
    /// dropped: a full listen queue often looks like this).
    ConnectTimeout,
    /// Any other error while connecting (address unavailable, unreachable, ...).
    ConnectError,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The peer reset or closed the connection before the response was complete.
    Reset,
    /// No complete response within the request timeout.
    Timeout,
    /// The peer answered something that is not valid HTTP (HTTP/1.x framing,
    /// an HTTP/2 protocol error).
    Protocol,
    /// HTTP/2: the server refused the stream (`RST_STREAM` with
    /// `REFUSED_STREAM`): it did not process the request.
    RefusedStream,
    /// HTTP/2: the server reset the stream (`RST_STREAM` with any other code)
    /// before the response was complete.
    ResetStream,
    /// HTTP/2: the connection went away (`GOAWAY`) with the request on it,
    /// and it could not be sent again on another (an error code, or the
    /// retries were used up). A graceful `GOAWAY` is no failure: the
    /// requests it did not process are sent again, and it is counted in
    /// `goaways`.
    GoAway,
    /// A response with status 400-499.
    Http4xx,
    /// A response with status 500-599.
    Http5xx,
    /// A response arrived but a check on it failed (status, body, extraction).
    CheckFailed,
    /// gRPC status 1 (`CANCELLED`) in the response's trailers.
    GrpcCancelled,
    /// gRPC status 2 (`UNKNOWN`) in the response's trailers.
    GrpcUnknown,
    /// gRPC status 3 (`INVALID_ARGUMENT`) in the response's trailers.
    GrpcInvalidArgument,
    /// gRPC status 4 (`DEADLINE_EXCEEDED`) in the response's trailers.
    GrpcDeadlineExceeded,
    /// gRPC status 5 (`NOT_FOUND`) in the response's trailers.
    GrpcNotFound,
    /// gRPC status 6 (`ALREADY_EXISTS`) in the response's trailers.
    GrpcAlreadyExists,
    /// gRPC status 7 (`PERMISSION_DENIED`) in the response's trailers.
    GrpcPermissionDenied,
    /// gRPC status 8 (`RESOURCE_EXHAUSTED`) in the response's trailers.
    GrpcResourceExhausted,
    /// gRPC status 9 (`FAILED_PRECONDITION`) in the response's trailers.
    GrpcFailedPrecondition,
    /// gRPC status 10 (`ABORTED`) in the response's trailers.
    GrpcAborted,
    /// gRPC status 11 (`OUT_OF_RANGE`) in the response's trailers.
    GrpcOutOfRange,
    /// gRPC status 12 (`UNIMPLEMENTED`) in the response's trailers.
    GrpcUnimplemented,
    /// gRPC status 13 (`INTERNAL`) in the response's trailers.
    GrpcInternal,
    /// gRPC status 14 (`UNAVAILABLE`) in the response's trailers.
    GrpcUnavailable,
    /// gRPC status 15 (`DATA_LOSS`) in the response's trailers.
    GrpcDataLoss,
    /// gRPC status 16 (`UNAUTHENTICATED`) in the response's trailers.
    GrpcUnauthenticated,
    /// Still in flight when the run ended (its duration, or a stop): cut by
    /// the generator, not failed by the target, so not among the failures
    /// of [`FailureCounts::total`] (oha's default; #12). Its latency so far
    /// is recorded, a lower bound: the slowest requests must not vanish.
    Cut,
    /// A WebSocket connection ended without a close frame (close code 1006:
    /// the peer dropped or reset the TCP connection), while a reply was
    /// awaited or while the connection was held.
    WsAbnormalClose,
    /// A WebSocket peer sent a close frame: with a code other than 1000
    /// (normal) or 1001 (going away), e.g. 1011 (server error), or with any
    /// code while a reply was still awaited.
    WsClose,
    /// A value that would have gone into the request's head (its line or a
    /// header, gRPC metadata, a WebSocket upgrade) held CR, LF or NUL: a
    /// value saved from a response, `${env.X}`, a CSV field. The request was
    /// not sent (nothing was written for it), since it would have smuggled a
    /// header or a second request onto the connection (issue #31). A
    /// failure of the scenario's data, counted like the target's so that a
    /// run full of them cannot pass.
    UnsafeValue,
    /// A value forced to a number in a `json:` body (`${orders.qty:number}`)
    /// was not one (`abc`, ``): the request was not sent, since the server
    /// would have received a body its author said it must not (issue #32). A
    /// failure of the scenario's data, counted like `unsafe_value`.
    BadValue,
}

impl FailureKind {
    /// Every kind, in the order of [`FailureCounts`].
    pub const ALL: [FailureKind; 34] = [
        FailureKind::ConnectRefused,
        FailureKind::ConnectTimeout,
        FailureKind::ConnectError,
        FailureKind::Tls,
        FailureKind::Reset,
        FailureKind::Timeout,
        FailureKind::Protocol,
        FailureKind::RefusedStream,
        FailureKind::ResetStream,
        FailureKind::GoAway,
        FailureKind::Http4xx,
        FailureKind::Http5xx,
        FailureKind::CheckFailed,
        FailureKind::GrpcCancelled,
        FailureKind::GrpcUnknown,
        FailureKind::GrpcInvalidArgument,
        FailureKind::GrpcDeadlineExceeded,
        FailureKind::GrpcNotFound,
        FailureKind::GrpcAlreadyExists,
        FailureKind::GrpcPermissionDenied,
        FailureKind::GrpcResourceExhausted,
        FailureKind::GrpcFailedPrecondition,
        FailureKind::GrpcAborted,
        FailureKind::GrpcOutOfRange,
        FailureKind::GrpcUnimplemented,
        FailureKind::GrpcInternal,
        FailureKind::GrpcUnavailable,
        FailureKind::GrpcDataLoss,
        FailureKind::GrpcUnauthenticated,
        FailureKind::Cut,
        FailureKind::WsAbnormalClose,
        FailureKind::WsClose,
        FailureKind::UnsafeValue,
        FailureKind::BadValue,
    ];

    /// The stable snake_case name used in results files and the terminal.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::ConnectRefused => "connect_refused",
            FailureKind::ConnectTimeout => "connect_timeout",
            FailureKind::ConnectError => "connect_error",
            FailureKind::Tls => "tls",
            FailureKind::Reset => "reset",
            FailureKind::Timeout => "timeout",
            FailureKind::Protocol => "protocol",
            FailureKind::RefusedStream => "refused_stream",
            FailureKind::ResetStream => "reset_stream",
            FailureKind::GoAway => "goaway",
            FailureKind::Http4xx => "http_4xx",
            FailureKind::Http5xx => "http_5xx",
            FailureKind::CheckFailed => "check_failed",
            FailureKind::GrpcCancelled => "grpc_cancelled",
            FailureKind::GrpcUnknown => "grpc_unknown",
            FailureKind::GrpcInvalidArgument => "grpc_invalid_argument",
            FailureKind::GrpcDeadlineExceeded => "grpc_deadline_exceeded",
            FailureKind::GrpcNotFound => "grpc_not_found",
            FailureKind::GrpcAlreadyExists => "grpc_already_exists",
            FailureKind::GrpcPermissionDenied => "grpc_permission_denied",
            FailureKind::GrpcResourceExhausted => "grpc_resource_exhausted",
            FailureKind::GrpcFailedPrecondition => "grpc_failed_precondition",
            FailureKind::GrpcAborted => "grpc_aborted",
            FailureKind::GrpcOutOfRange => "grpc_out_of_range",
            FailureKind::GrpcUnimplemented => "grpc_unimplemented",
            FailureKind::GrpcInternal => "grpc_internal",
            FailureKind::GrpcUnavailable => "grpc_unavailable",
            FailureKind::GrpcDataLoss => "grpc_data_loss",
            FailureKind::GrpcUnauthenticated => "grpc_unauthenticated",
            FailureKind::Cut => "cut",
            FailureKind::WsAbnormalClose => "ws_abnormal_close",
            FailureKind::WsClose => "ws_close",
            FailureKind::UnsafeValue => "unsafe_value",
            FailureKind::BadValue => "bad_value",
        }
    }

    /// The kind named `name` (as written by [`FailureKind::name`]).
    pub fn from_name(name: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// True for kinds where a response arrived (its latency is recorded).
    pub fn has_response(self) -> bool {
        matches!(self, FailureKind::Http4xx | FailureKind::Http5xx | FailureKind::CheckFailed) || self.is_grpc()
    }

    /// A gRPC status other than OK.
    pub fn is_grpc(self) -> bool {
        (FailureKind::GrpcCancelled..=FailureKind::GrpcUnauthenticated).contains(&self)
    }

    /// The failure kind of a gRPC status code (`grpc-status`), if it is one
    /// (0 is OK; a code past 16 is `grpc_unknown`, as gRPC reads it).
    pub fn of_grpc_status(code: u32) -> Option<FailureKind> {
        const GRPC: [FailureKind; 16] = [
            FailureKind::GrpcCancelled,
            FailureKind::GrpcUnknown,
            FailureKind::GrpcInvalidArgument,
            FailureKind::GrpcDeadlineExceeded,
            FailureKind::GrpcNotFound,
            FailureKind::GrpcAlreadyExists,
            FailureKind::GrpcPermissionDenied,
            FailureKind::GrpcResourceExhausted,
            FailureKind::GrpcFailedPrecondition,
            FailureKind::GrpcAborted,
            FailureKind::GrpcOutOfRange,
            FailureKind::GrpcUnimplemented,
            FailureKind::GrpcInternal,
            FailureKind::GrpcUnavailable,
            FailureKind::GrpcDataLoss,
            FailureKind::GrpcUnauthenticated,
        ];
        match code {
            0 => None,
            1..=16 => Some(GRPC[code as usize - 1]),
            _ => Some(FailureKind::GrpcUnknown),
        }
    }

    /// The failure kind of an HTTP status, if it is one.
    pub fn of_status(status: u16) -> Option<FailureKind> {
        match status {
            400..=499 => Some(FailureKind::Http4xx),
            500..=599 => Some(FailureKind::Http5xx),
            _ => None,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A count per [`FailureKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureCounts([u64; FailureKind::ALL.len()]);

// By hand: the standard library derives `Default` for arrays of at most 32.
impl Default for FailureCounts {
    fn default() -> FailureCounts {
        FailureCounts([0; FailureKind::ALL.len()])
    }
}

impl FailureCounts {
    /// Count one failure of `kind`.
    #[inline]
    pub fn add(&mut self, kind: FailureKind) {
        self.0[kind as usize] += 1;
    }

    /// Count `n` failures of `kind`.
    pub fn add_n(&mut self, kind: FailureKind, n: u64) {
        self.0[kind as usize] += n;
    }

    /// All failures of the target: every kind but [`FailureKind::Cut`]
    /// (requests the generator cut at the end did not fail).
    pub fn total(&self) -> u64 {
        self.0.iter().sum::<u64>() - self[FailureKind::Cut]
    }

    /// The kinds with a non-zero count, most frequent first.
    pub fn nonzero(&self) -> Vec<(FailureKind, u64)> {
        let mut v: Vec<_> = FailureKind::ALL.into_iter().map(|k| (k, self[k])).filter(|&(_, n)| n > 0).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

impl Index<FailureKind> for FailureCounts {
    type Output = u64;
    fn index(&self, kind: FailureKind) -> &u64 {
        &self.0[kind as usize]
    }
}

impl AddAssign<&FailureCounts> for FailureCounts {
    fn add_assign(&mut self, other: &FailureCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for k in FailureKind::ALL {
            assert_eq!(FailureKind::from_name(k.name()), Some(k));
            assert_eq!(FailureKind::ALL[k as usize], k, "ALL is in discriminant order");
        }
    }

    #[test]
    fn counts_sort_most_frequent_first() {
        let mut c = FailureCounts::default();
        c.add(FailureKind::Timeout);
        c.add_n(FailureKind::Http5xx, 3);
        assert_eq!(c.total(), 4);
        c.add(FailureKind::Cut);
        assert_eq!(c.total(), 4, "cut at the end: not a failure of the target");
        assert_eq!(
            c.nonzero(),
            vec![(FailureKind::Http5xx, 3), (FailureKind::Timeout, 1), (FailureKind::Cut, 1)],
            "but shown by kind"
        );
        assert_eq!(FailureKind::of_status(404), Some(FailureKind::Http4xx));
        assert_eq!(FailureKind::of_status(302), None);
        // (gRPC status, kind)
        let grpc = [
            (0, None),                                    // OK
            (1, Some(FailureKind::GrpcCancelled)),        // the first
            (14, Some(FailureKind::GrpcUnavailable)),     // the one servers shed load with
            (16, Some(FailureKind::GrpcUnauthenticated)), // the last
            (99, Some(FailureKind::GrpcUnknown)),         // past the table: unknown, as gRPC reads it
        ];
        for (code, want) in grpc {
            assert_eq!(FailureKind::of_grpc_status(code), want, "{code}");
        }
        assert!(FailureKind::GrpcUnavailable.has_response() && FailureKind::GrpcUnavailable.is_grpc());
        assert!(!FailureKind::Http5xx.is_grpc() && !FailureKind::Cut.is_grpc());
        assert_eq!(FailureKind::GrpcUnavailable.name(), "grpc_unavailable");
        // #31: a value refused before sending is a failure of its own, counted in the errors.
        c.add(FailureKind::UnsafeValue);
        assert_eq!(c.total(), 5);
        assert_eq!(FailureKind::from_name("unsafe_value"), Some(FailureKind::UnsafeValue));
        assert!(!FailureKind::UnsafeValue.has_response(), "nothing was sent, nothing answered");
        // #32: a value that `:number` could not send is one too.
        c.add(FailureKind::BadValue);
        assert_eq!(c.total(), 6);
        assert_eq!(FailureKind::from_name("bad_value"), Some(FailureKind::BadValue));
        assert!(!FailureKind::BadValue.has_response());
    }
}
