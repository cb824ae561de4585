//! What finished requests leave for the next ones (kept connections,
//! request buffers, request timers), so that the hot path allocates nothing
//! in steady state; and when the worker lets go of them: connections idle
//! for [`IDLE_CLOSE`], and the buffers and timers a stall left beyond what
//! the kept connections can use. Not here: HTTP/2's connections, which are
//! the worker's pool's (`crate::http2`), closed idle on the same tick.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::http1::Conn;

/// What finished requests leave for the next ones, so that the hot path
/// allocates nothing in steady state.
#[derive(Default)]
pub(super) struct Spares {
    /// Idle keep-alive connections (open model) and since when each was
    /// idle, most recently used last: taken from the end, so the oldest sink
    /// to the front, where [`Spares::close_idle`] closes them. Boxed as
    /// everywhere (see `Worker::connect`).
    pub(super) conns: VecDeque<(Instant, Box<Conn>)>,
    /// Request buffers (body scratch, rendered request).
    pub(super) buffers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Request timers of finished open-model arrivals (see `within`).
    pub(super) timers: Vec<Pin<Box<Sleep>>>,
}

/// How long a kept connection of the open model may stay idle before the
/// worker closes it.
///
/// Why close at all: the open model opens a connection for every arrival
/// that finds none idle, so a stall of the target (or of this machine) opens
/// as many as arrive during it, and nothing would ever close them: the soak
/// (#12) kept 2,000 connections, and their memory, after two such stalls at
/// 5,000/s. Taken most recently used first, the connections the rate needs
/// stay busy and the surplus sinks, idle, to the front of the pool.
/// Why 4 s: below the shortest keep-alive timeouts servers use (Node's 5 s),
/// so a connection is seldom closed by the server while we still count on
/// it, and far above the gaps between requests of any rate worth measuring.
pub(super) const IDLE_CLOSE: Duration = Duration::from_secs(4);

impl Spares {
    /// Close the kept connections idle since before `cutoff`, and let go of
    /// the request timers and buffers a stall left beyond what the kept
    /// connections can use: each arrival takes one of each with a connection,
    /// so after a stall's hundreds of arrivals in flight, hundreds of them
    /// would otherwise be kept for the rest of the run (the soak's RSS stayed
    /// 3 MiB up after a 115 ms stall at 5,000/s).
    pub(super) fn close_idle(&mut self, cutoff: Instant) {
        while self.conns.front().is_some_and(|(since, _)| *since < cutoff) {
            self.conns.pop_front();
        }
        let keep = self.conns.len() + 16;
        if self.timers.len() > keep || self.buffers.len() > keep {
            self.timers.truncate(keep);
            self.buffers.truncate(keep);
            self.timers.shrink_to(keep);
            self.buffers.shrink_to(keep);
            self.conns.shrink_to(keep);
        }
    }
}
