//! Failure kinds: a small `Copy` enum counted in a fixed array, never keyed by
//! a string (oha's wart), so counting a failure on the hot path is one add.
//!
//! Every kind is declared once, in the table of `failure_kinds!` below:
//! its variant, its name in results files and on the wire, whether a
//! response arrived with it, whether it is a failure of the target, and its
//! gRPC status if it is one. The enum, [`FailureKind::ALL`], the names, the
//! counts' array and everything that lists kinds (the series lines, the
//! summary, the report's columns, the fleet's handshake) follow from it, so
//! a new kind is one row here; `schema/summary.schema.json`'s list of kinds
//! is then refreshed with `UPDATE_GOLDEN=1` (a test compares it), and the
//! table of kinds in `docs/guide/results.md` says what it means. The build
//! with `--features extra-kind-for-tests` adds one row and nothing else,
//! and `perfops-report/tests/extra_kind.rs` follows it through merge, the
//! wire, the series line and the summary.

use std::fmt;
use std::ops::{AddAssign, Index};

/// The table of failure kinds, and what is derived from it.
///
/// Each row: `Variant = "name", answered: bool, failure: bool[, grpc: code];`
/// - `name`: stable snake_case, in results files, the terminal and the
///   fleet's handshake; never renamed (old results directories read by it);
/// - `answered`: a response arrived (its latency is a response's), so it is
///   among the `completed` and not among the successes;
/// - `failure`: a failure of the target, counted in [`FailureCounts::total`]
///   (only `cut` is not: the generator cut it);
/// - `grpc`: the gRPC status code it stands for.
macro_rules! failure_kinds {
    ($(
        $(#[doc = $doc:literal])*
        $(#[cfg($cfg:meta)])?
        $variant:ident = $name:literal, answered: $answered:literal, failure: $failure:literal
        $(, grpc: $grpc:literal)?;
    )*) => {
        /// Why a request did not succeed.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FailureKind {
            $( $(#[doc = $doc])* $(#[cfg($cfg)])? $variant, )*
        }

        /// Every kind, in declaration (and discriminant) order.
        const KINDS: &[FailureKind] = &[ $( $(#[cfg($cfg)])? FailureKind::$variant, )* ];

        impl FailureKind {
            /// How many kinds this build declares.
            pub const COUNT: usize = KINDS.len();

            /// Every kind, in the order of [`FailureCounts`].
            pub const ALL: [FailureKind; FailureKind::COUNT] = {
                let mut all = [FailureKind::ConnectRefused; FailureKind::COUNT];
                let mut i = 0;
                while i < FailureKind::COUNT {
                    all[i] = KINDS[i];
                    i += 1;
                }
                all
            };

            /// The stable snake_case name used in results files and the terminal.
            pub fn name(self) -> &'static str {
                match self {
                    $( $(#[cfg($cfg)])? FailureKind::$variant => $name, )*
                }
            }

            /// True for kinds where a response arrived (its latency is recorded).
            pub fn has_response(self) -> bool {
                match self {
                    $( $(#[cfg($cfg)])? FailureKind::$variant => $answered, )*
                }
            }

            /// True for failures of the target: every kind but those the
            /// generator caused itself ([`FailureKind::Cut`]).
            pub fn is_failure(self) -> bool {
                match self {
                    $( $(#[cfg($cfg)])? FailureKind::$variant => $failure, )*
                }
            }

            /// The gRPC status code this kind stands for, if it is one.
            pub fn grpc_status(self) -> Option<u32> {
                match self {
                    $( $(#[cfg($cfg)])? FailureKind::$variant => failure_kinds!(@opt $($grpc)?), )*
                }
            }

            /// The failure kind of a gRPC status code (`grpc-status`), if it is one
            /// (0 is OK; a code past the table is `grpc_unknown`, as gRPC reads it).
            pub fn of_grpc_status(code: u32) -> Option<FailureKind> {
                match code {
                    0 => None,
                    $( $( $grpc => Some(FailureKind::$variant), )? )*
                    _ => Some(FailureKind::GrpcUnknown),
                }
            }
        }
    };
    (@opt $v:literal) => { Some($v) };
    (@opt) => { None };
}

failure_kinds! {
    /// The target refused the connection (nothing listens, or the backlog is full
    /// and the kernel answered RST).
    ConnectRefused = "connect_refused", answered: false, failure: true;
    /// The connection was not established within the connect timeout (SYNs
    /// dropped: a full listen queue often looks like this).
    ConnectTimeout = "connect_timeout", answered: false, failure: true;
    /// Any other error while connecting (address unavailable, unreachable, ...).
    ConnectError = "connect_error", answered: false, failure: true;
    /// The TLS handshake failed (certificate, protocol).
    Tls = "tls", answered: false, failure: true;
    /// The peer reset or closed the connection before the response was complete.
    Reset = "reset", answered: false, failure: true;
    /// No complete response within the request timeout.
    Timeout = "timeout", answered: false, failure: true;
    /// A streamed answer (a step with `stream: { stall: ... }`) went longer
    /// than its stall limit without an event (from the send to the first
    /// event, or between two): the server stopped sending while the stream
    /// was open.
    StreamStall = "stream_stall", answered: false, failure: true;
    /// The peer answered something that is not valid HTTP (HTTP/1.x framing,
    /// an HTTP/2 protocol error).
    Protocol = "protocol", answered: false, failure: true;
    /// HTTP/2: the server refused the stream (`RST_STREAM` with
    /// `REFUSED_STREAM`): it did not process the request.
    RefusedStream = "refused_stream", answered: false, failure: true;
    /// HTTP/2: the server reset the stream (`RST_STREAM` with any other code)
    /// before the response was complete.
    ResetStream = "reset_stream", answered: false, failure: true;
    /// HTTP/2: the connection went away (`GOAWAY`) with the request on it,
    /// and it could not be sent again on another (an error code, or the
    /// retries were used up). A graceful `GOAWAY` is no failure: the
    /// requests it did not process are sent again, and it is counted in
    /// `goaways`.
    GoAway = "goaway", answered: false, failure: true;
    /// A response with status 400-499.
    Http4xx = "http_4xx", answered: true, failure: true;
    /// A response with status 500-599.
    Http5xx = "http_5xx", answered: true, failure: true;
    /// A response arrived but a check on it failed (status, body, extraction).
    CheckFailed = "check_failed", answered: true, failure: true;
    /// gRPC status 1 (`CANCELLED`) in the response's trailers.
    GrpcCancelled = "grpc_cancelled", answered: true, failure: true, grpc: 1;
    /// gRPC status 2 (`UNKNOWN`) in the response's trailers.
    GrpcUnknown = "grpc_unknown", answered: true, failure: true, grpc: 2;
    /// gRPC status 3 (`INVALID_ARGUMENT`) in the response's trailers.
    GrpcInvalidArgument = "grpc_invalid_argument", answered: true, failure: true, grpc: 3;
    /// gRPC status 4 (`DEADLINE_EXCEEDED`) in the response's trailers.
    GrpcDeadlineExceeded = "grpc_deadline_exceeded", answered: true, failure: true, grpc: 4;
    /// gRPC status 5 (`NOT_FOUND`) in the response's trailers.
    GrpcNotFound = "grpc_not_found", answered: true, failure: true, grpc: 5;
    /// gRPC status 6 (`ALREADY_EXISTS`) in the response's trailers.
    GrpcAlreadyExists = "grpc_already_exists", answered: true, failure: true, grpc: 6;
    /// gRPC status 7 (`PERMISSION_DENIED`) in the response's trailers.
    GrpcPermissionDenied = "grpc_permission_denied", answered: true, failure: true, grpc: 7;
    /// gRPC status 8 (`RESOURCE_EXHAUSTED`) in the response's trailers.
    GrpcResourceExhausted = "grpc_resource_exhausted", answered: true, failure: true, grpc: 8;
    /// gRPC status 9 (`FAILED_PRECONDITION`) in the response's trailers.
    GrpcFailedPrecondition = "grpc_failed_precondition", answered: true, failure: true, grpc: 9;
    /// gRPC status 10 (`ABORTED`) in the response's trailers.
    GrpcAborted = "grpc_aborted", answered: true, failure: true, grpc: 10;
    /// gRPC status 11 (`OUT_OF_RANGE`) in the response's trailers.
    GrpcOutOfRange = "grpc_out_of_range", answered: true, failure: true, grpc: 11;
    /// gRPC status 12 (`UNIMPLEMENTED`) in the response's trailers.
    GrpcUnimplemented = "grpc_unimplemented", answered: true, failure: true, grpc: 12;
    /// gRPC status 13 (`INTERNAL`) in the response's trailers.
    GrpcInternal = "grpc_internal", answered: true, failure: true, grpc: 13;
    /// gRPC status 14 (`UNAVAILABLE`) in the response's trailers.
    GrpcUnavailable = "grpc_unavailable", answered: true, failure: true, grpc: 14;
    /// gRPC status 15 (`DATA_LOSS`) in the response's trailers.
    GrpcDataLoss = "grpc_data_loss", answered: true, failure: true, grpc: 15;
    /// gRPC status 16 (`UNAUTHENTICATED`) in the response's trailers.
    GrpcUnauthenticated = "grpc_unauthenticated", answered: true, failure: true, grpc: 16;
    /// Still in flight when the run ended (its duration, or a stop): cut by
    /// the generator, not failed by the target, so not among the failures
    /// of [`FailureCounts::total`] (oha's default; #12). Its latency so far
    /// is recorded, a lower bound: the slowest requests must not vanish.
    Cut = "cut", answered: false, failure: false;
    /// A WebSocket connection ended without a close frame (close code 1006:
    /// the peer dropped or reset the TCP connection), while a reply was
    /// awaited or while the connection was held.
    WsAbnormalClose = "ws_abnormal_close", answered: false, failure: true;
    /// A WebSocket peer sent a close frame: with a code other than 1000
    /// (normal) or 1001 (going away), e.g. 1011 (server error), or with any
    /// code while a reply was still awaited.
    WsClose = "ws_close", answered: false, failure: true;
    /// A value that would have gone into the request's head (its line or a
    /// header, gRPC metadata, a WebSocket upgrade) held CR, LF or NUL: a
    /// value saved from a response, `${env.X}`, a CSV field. The request was
    /// not sent (nothing was written for it), since it would have smuggled a
    /// header or a second request onto the connection (issue #31). A
    /// failure of the scenario's data, counted like the target's so that a
    /// run full of them cannot pass.
    UnsafeValue = "unsafe_value", answered: false, failure: true;
    /// A value forced to a number in a `json:` body (`${orders.qty:number}`)
    /// was not one (`abc`, ``): the request was not sent, since the server
    /// would have received a body its author said it must not (issue #32). A
    /// failure of the scenario's data, counted like `unsafe_value`.
    BadValue = "bad_value", answered: false, failure: true;
    /// A response hook (`after:`) failed the step, with its reason: the
    /// scenario's own check, written in JavaScript.
    ScriptFailed = "script_failed", answered: true, failure: true;
    /// A script could not do its part: it threw, ran past its time limit
    /// (`scripts.timeout`) or its runtime's memory (`scripts.memory`), or
    /// returned what the step cannot use. The failure's sample says which,
    /// with the script's file:line:column; the flow ends unless
    /// `scripts.on_error: continue`.
    ScriptError = "script_error", answered: false, failure: true;
    /// A failure of a kind this perfops does not declare, counted by a
    /// fleet agent of a newer (or older) build that does: the handshake
    /// named it, the coordinator does not know it, so it is counted here
    /// and said once on the coordinator's terminal, never left out. Taken
    /// as a failure of the target without a response (what most kinds are).
    Other = "other", answered: false, failure: true;
    /// Test builds only (`--features extra-kind-for-tests`): a kind declared
    /// in this row and nowhere else, to show that a new kind reaches merge,
    /// the wire, the series lines and the summary by itself.
    #[cfg(feature = "extra-kind-for-tests")]
    ExtraForTests = "extra_for_tests", answered: false, failure: true;
}

impl FailureKind {
    /// The kind named `name` (as written by [`FailureKind::name`]).
    pub fn from_name(name: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// A gRPC status other than OK.
    pub fn is_grpc(self) -> bool {
        self.grpc_status().is_some()
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
        FailureKind::ALL.into_iter().filter(|k| k.is_failure()).map(|k| self[k]).sum()
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
