//! What one stream comes to: its [`Answer`] (with what was [`Captured`] of
//! it for `expect` and `save`), or a [`StreamError`]. A connection
//! (`conn.rs`) fills them as its frames arrive; `http2.rs` hands them to the
//! worker, and `reflection.rs` reads its own calls' answers from them.
//!
//! Apart from `conn.rs` so that those who read an answer import it from
//! below the connection, not the connection from the pool above it: the
//! type of a captured answer used to live in `http2.rs`, which made
//! `conn.rs` import the module that drives it.

use perfops_core::measure::FailureKind;
use tokio::time::Instant;

/// A failed exchange on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamError {
    pub(crate) kind: FailureKind,
    /// The server did not process it (the connection went away before it):
    /// it may be sent again on another connection.
    pub(crate) again: bool,
}

impl StreamError {
    pub(super) fn of(kind: FailureKind) -> StreamError {
        StreamError { kind, again: false }
    }
}

/// A stream's answer, complete.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Header fields as decoded (name, value and 4 bytes each, 16 for the
    /// status), body and trailers.
    pub(crate) bytes_in: u64,
    pub(crate) first_byte: Instant,
    pub(crate) last_byte: Instant,
    /// `grpc-status`, from the trailers or a trailers-only answer.
    pub(crate) grpc_status: Option<u32>,
    pub(crate) captured: Option<Box<Captured>>,
    /// The values of its `Set-Cookie` fields (trailers' too), for the
    /// flow's cookie jar: empty, and unallocated, when it sets none.
    pub(crate) set_cookies: Vec<Vec<u8>>,
}

/// What a captured answer holds for `expect` and `save`.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    pub(crate) body: Vec<u8>,
    pub(crate) trailers: Vec<(String, Vec<u8>)>,
}

impl Captured {
    /// Header fields then trailers, as `expect` and `save` read them.
    pub(crate) fn fields(&self) -> Vec<(&str, &[u8])> {
        self.headers.iter().chain(self.trailers.iter()).map(|(n, v)| (n.as_str(), v.as_slice())).collect()
    }
}
