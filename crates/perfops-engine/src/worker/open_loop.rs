//! The open model: arrival n is sent at `start + due(n)` whatever the server
//! does (wrk2's rule: absolute due times, never a sum of sleeps), and counted
//! as dropped, never delayed, when `max_in_flight` requests are already out.
//! "At" within a few µs either way (the timer is aimed at the machine's
//! wake-up lateness, `timer.rs`), or up to `coalesce::GATHER` early when it
//! goes out with the arrival before it; an arrival sent early counts from
//! its send.
//!
//! Owns the pacing: which timer the worker sleeps on (the timerfd, or the
//! park hook's nap where every response is dated by the kernel), the
//! arrivals gathered into one wake-up (`coalesce::gather`), and the first
//! poll of each arrival, made here so that its request goes out before the
//! responses of the same wake-up are read (#18; docs/architecture.md, "The
//! open model's wake-ups", has the figures). Not here: what an arrival does
//! (`arrival.rs`), nor when arrivals are due (`perfops_core::model::schedule`).

use std::rc::Rc;
use std::task::Poll;

use perfops_core::model::{Schedule, Shard};
use tokio::time::Instant;

use super::arrival::Arrival;
use super::{Worker, new_timer};
use crate::coalesce;
use crate::record::Due;
use crate::target::Protocol;
use crate::timer::PreciseTimer;

impl Worker {
    /// Open model: dispatch arrival n at `start + due(n)`, whatever the server does.
    ///
    /// Where every response is dated by the kernel (plain-TCP HTTP/1.1: no TLS
    /// record to decrypt, no WebSocket message timed by its read), the pacer
    /// waits for an arrival due within `coalesce::PACE_MAX` in the park hook,
    /// deaf to the sockets, and reads the responses that came meanwhile in
    /// the same wake-up: one wake-up per arrival instead of about two
    /// (`coalesce`'s module doc has the figures).
    pub(super) async fn open_loop(self: Rc<Self>, schedule: &Schedule, shard: Shard, max_in_flight: u64) {
        let shared = &*self.shared;
        let dated = self.stamped && shared.protocol == Protocol::Http1 && shared.tls.is_none();
        let websocket = shared.work.flows.iter().flat_map(|f| &f.steps).any(|s| s.step.websocket.is_some());
        let mut timer = if dated && !websocket { PreciseTimer::paced() } else { PreciseTimer::new() };
        // Arrivals sent since the pacer last waited.
        let mut since_wait = 0u32;
        let step = u64::from(shard.count.max(1));
        // The due time of the last arrival gathered into the current wake-up.
        let mut gathered = self.start;
        for n in shard.arrivals(schedule.total_arrivals()) {
            let Some(offset) = schedule.due(n) else { break };
            let due = self.start + offset;
            if due > gathered {
                // The first arrival of a wake-up: the arrivals due within the
                // window after it go out with it, early (each counts from its
                // send, `Arrival::due` below), none later than its due time.
                let next = (1..).map(|k| schedule.due(n.saturating_add(k * step)));
                gathered = self.start + coalesce::gather(offset, next, coalesce::GATHER);
                if due > Instant::now() {
                    tokio::select! {
                        _ = timer.sleep_until(due) => {}
                        _ = self.stop_notify.notified() => {}
                    }
                    since_wait = 0;
                }
            }
            // Arrivals that go out without a wait between them (a wake-up's
            // gathered ones, or all of them when behind schedule: the lateness
            // shows as latency) let the responses be read now and then.
            since_wait += 1;
            if since_wait.is_multiple_of(16) {
                tokio::task::yield_now().await;
            }
            if self.stopping.get() {
                break;
            }
            let stage = self.shared.stage_at(offset);
            if self.in_flight.get() >= max_in_flight {
                self.drop_arrival(&self.shared.work.flows[self.shared.work.pick(n)], stage);
                continue;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            let me = self.clone();
            let mut task = Box::pin(async move {
                let (mut conn, mut timer) = {
                    let mut spares = me.spares.borrow_mut();
                    (
                        spares.conns.pop_back().map(|(_, c)| c),
                        spares.timers.pop().unwrap_or_else(|| Box::pin(new_timer())),
                    )
                };
                // Sent early (with its wake-up's first arrival, or by the
                // timer's aim), it waited for nothing: its latency counts from
                // its send, never from a due time still to come (which would
                // understate it).
                let start = Instant::now();
                let arrival = Arrival { seq: n, stage, due: Due::At(due.min(start)), start };
                let ended = me.arrival(&mut conn, timer.as_mut(), arrival).await;
                let mut spares = me.spares.borrow_mut();
                if let Some(conn) = conn {
                    spares.conns.push_back((ended, conn));
                }
                spares.timers.push(timer);
                drop(spares);
                me.end();
            });
            // Sent now, in this poll: spawned, the arrival would start after
            // every task this wake-up woke (the responses that came since the
            // last one), each read and recorded before it, and be late by all
            // of them (#18). Its first poll takes a kept connection, writes the
            // request and waits for the response; the task it becomes reads
            // it. Boxed, the future moves into its task as a pointer, not as
            // its whole state.
            if std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx).is_pending())).await {
                tokio::task::spawn_local(task);
            }
        }
    }
}
