//! One arrival: its flow (picked from its global number), one row of each
//! feeder for all its steps, and the steps in order on one connection, each
//! due when the one before it ended (plus its pause). A failed step ends the
//! flow: later steps read what earlier ones saved, in the arrival's own
//! scope (`scope.rs`). Both models run it: the
//! open loop once per arrival, a closed-loop user once per iteration. Not
//! here: how a step goes over the wire (`http1.rs`, `http2.rs`,
//! `websocket.rs`).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;

use perfops_core::cookie::Jar;
use perfops_core::scenario::StreamRead;
use tokio::time::{Instant, Sleep};

use super::http1::{LlmStreaming, Streaming};
use super::scope::Scope;
use super::{Ended, Request, Worker};
use crate::http1::Conn;
use crate::record::{Due, Key};
use crate::work::FlowPlan;

/// An arrival to run: its number (`${seq}`), the stage it counts in, when
/// its first step was due and when it started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    pub(super) seq: u64,
    pub(super) stage: u16,
    pub(super) due: Due,
    pub(super) start: Instant,
}

impl Worker {
    /// One arrival: its flow's steps in order, on the connection in `conn`
    /// (if any; a new one is left there). A failed step ends the flow (later
    /// steps depend on what earlier ones saved). Returns when it ended.
    pub(super) async fn arrival(
        &self,
        conn: &mut Option<Box<Conn>>,
        mut timer: Pin<&mut Sleep>,
        a: Arrival,
    ) -> Instant {
        let work = &*self.shared.work;
        let flow = &work.flows[work.pick(a.seq)];
        // One row of each feeder for the whole arrival. A `once` feeder that
        // has run out ends the arrivals: they are dropped and counted.
        let rows = self.rows(a.seq);
        if rows.iter().any(Option::is_none) {
            self.drop_arrival(flow, a.stage);
            return Instant::now();
        }
        // The flow instance's cookies (a closed-loop user's iteration is one:
        // its jar starts empty, as k6's does, so that every iteration runs
        // the flow as a new session would and both models measure the same
        // requests). Empty, it allocates nothing.
        let jar = work.cookies.then(RefCell::<Jar>::default);
        // Its saved values, over setup's (`scope.rs`): what this instance's
        // steps save, no other arrival reads. Empty, it allocates nothing.
        let scope = Scope::default();
        let (mut due, mut start) = (a.due, a.start);
        let mut end_at = start;
        // Scripts only: the flow instance's state, and how many steps it took.
        let scripted = self.flow(a.seq, &rows, &scope);
        let (mut i, mut taken, mut sent) = (0, 0, false);
        while let Some(step) = flow.steps.get(i) {
            let key = Key { stage: a.stage, step: step.index };
            // A scripted flow's scripts decide where it ends (a `script:` step may end it or
            // send it back): its iteration is counted at its end, not by a step's place.
            let last = i + 1 == flow.steps.len() && scripted.is_none();
            let call = step.hooks.is_some_and(|h| h.call.is_some());
            // The arrival is answered with its first request, a `script:` step is none.
            let (first, jar, state, scope) = (!sent && !call, jar.as_ref(), scripted.as_ref(), &scope);
            let req = Request { step, key, due, start, seq: a.seq, rows: &rows, last, first, jar, flow: state, scope };
            let ended = self.step(conn, timer.as_mut(), req).await;
            end_at = ended.at;
            sent |= !call;
            i += 1;
            let goes_on = match &scripted {
                None => !ended.failed,
                Some(f) => {
                    if !call {
                        // Kept in the flow's state, not in this future: a flow without
                        // scripts carries nothing more across its awaits.
                        f.borrow_mut().last_request = Some(key);
                    }
                    self.next_step(f, scope, flow, step, key, &mut i, &mut taken, ended.failed)
                }
            };
            if !goes_on {
                break;
            }
            let pause = step.step.pause;
            // The next step is due when this one ended plus its pause; a closed
            // loop's user sends it as soon as it can, so without a pause it is
            // due when sent, like the flow's first.
            due = if a.due == Due::OnSend && pause.is_zero() { Due::OnSend } else { Due::At(ended.at + pause) };
            start = ended.at;
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
                start = Instant::now();
            }
        }
        if let Some(key) = scripted.as_ref().and_then(|f| f.borrow().last_request) {
            self.rec.borrow_mut().iteration(key);
        }
        end_at
    }

    /// Count an arrival of `flow` that is not sent: the generator's limit.
    pub(super) fn drop_arrival(&self, flow: &FlowPlan, stage: u16) {
        self.rec.borrow_mut().dropped(Key { stage, step: flow.first_step() });
    }

    /// The feeders' rows for arrival `seq` (`None`: a `once` feeder its flow
    /// uses ran out; an empty row for a feeder its flow does not use).
    pub(super) fn rows(&self, seq: u64) -> Vec<Option<&[String]>> {
        let work = &*self.shared.work;
        let mut rng = self.rng.borrow_mut();
        let mut rows = Vec::with_capacity(work.feeders.len());
        for (i, f) in work.feeders.iter().enumerate() {
            rows.push(work.feeder_seq(i, seq).map_or(Some(&[][..]), |n| f.row(n, &mut rng)));
        }
        rows
    }

    /// A streamed step's request, boxed. Apart, and never inlined, so that
    /// the streamed future is built in this function's frame, not in the
    /// frame of every request's `step`.
    #[inline(never)]
    #[cold]
    fn streamed<'a>(
        &'a self,
        conn: &'a mut Option<Box<Conn>>,
        timer: Pin<&'a mut Sleep>,
        req: Request<'a>,
        read: StreamRead,
    ) -> Pin<Box<dyn Future<Output = Ended> + 'a>> {
        if req.step.step.llm.is_some() {
            // An LLM step's events are read as tokens (`llm.rs`), beside the stream's timeline.
            let tokens = LlmStreaming::new(read, &req.step.step);
            return Box::pin(self.perform(conn, timer, req, tokens));
        }
        let streaming = Streaming::new(read, &req.step.step);
        Box::pin(self.perform(conn, timer, req, streaming))
    }

    /// Run one step: an HTTP request ([`Worker::perform`]), a WebSocket
    /// session (`websocket.rs`: boxed, so that the future of every arrival
    /// does not carry a session's state) or a `script:` step's call.
    pub(super) async fn step(&self, conn: &mut Option<Box<Conn>>, timer: Pin<&mut Sleep>, req: Request<'_>) -> Ended {
        if req.step.step.script.call.is_some() {
            self.script_step(req)
        } else if req.step.step.websocket.is_some() {
            Box::pin(self.session(timer, req)).await
        } else if let Some(read) = req.step.step.stream {
            // Boxed, and `perform` made for a `Streaming`: a stream's state
            // inline made every request's future larger and its code longer
            // (callgrind: ~25 instructions per request of steps that do not
            // stream; behind a wrapper of its own, ~50). One allocation per
            // streamed request.
            self.streamed(conn, timer, req, read).await
        } else {
            self.perform(conn, timer, req, ()).await
        }
    }
}
