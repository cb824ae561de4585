//! A step over HTTP/2. HTTP/2 (`crate::http2`) takes another road from
//! [`Worker::perform`]: its connections are the worker's, shared by every
//! request in flight on it (a `Pool`), not a slot of the caller's; a request
//! takes a stream on one of them. What it hands the `Recorder` is the same
//! `Answer` or `Failure`, so latency, service time and every sink mean the
//! same. The choice is one branch per request on the run's protocol,
//! decided before the run: the HTTP/1.1 path is as it was.
//!
//! Owns, per request: its HTTP/2 form (a literal step's made before the run,
//! a templated one's converted from the HTTP/1.1 rendering, and a gRPC
//! call's body encoded), the stream (taken, waited for, or on a connection
//! opened for it), sending again what a `GOAWAY` left unprocessed, and
//! gRPC's status against the step's `expect`; and a streamed answer
//! (`stream:`) handed to the same slot as HTTP/1.1's (`http1.rs`'s
//! [`Slot`]: its events, checks, saves and record mean the same whatever
//! the protocol). Not here: the pool and its connections (`crate::http2`,
//! `crate::h2`).

use std::pin::Pin;

use perfops_core::measure::FailureKind;
use perfops_core::scenario::grpc::GrpcCode;
use tokio::time::{Instant, Sleep, timeout_at};

use super::checks::status_failure;
use super::http1::Slot;
use super::sample::{Answered, Sent};
use super::{Ended, Request, Worker, within};
use crate::h2::answer::Captured;
use crate::h2::stamped::H2Io;
use crate::http1::{Response, Stream};
use crate::http2::{self, H2Request, Indexing, Lease, Pool as H2Pool, Take};
use crate::record::{Due, Key};

/// The failure of a gRPC answer (HTTP 200) with status `code` (`None`: no
/// `grpc-status` at all, not a gRPC answer), given the codes the step's
/// `expect: { grpc_status }` lets pass (`None`: OK alone).
fn grpc_failure(code: Option<u32>, expected: Option<&[GrpcCode]>) -> Option<FailureKind> {
    let Some(code) = code else { return Some(FailureKind::Protocol) };
    match expected {
        None => FailureKind::of_grpc_status(code),
        Some(codes) if codes.iter().any(|c| c.0 == code) => None,
        // Not what was expected: an error status counts as itself, an
        // unexpected OK as a failed check.
        Some(_) => FailureKind::of_grpc_status(code).or(Some(FailureKind::CheckFailed)),
    }
}

impl Worker {
    /// [`Worker::perform`] over HTTP/2: the request goes out on a stream of
    /// one of the worker's connections (`pool`), whoever opened it; a
    /// streamed answer's events go to `slot` as they come.
    pub(super) async fn perform_h2<S: Slot>(
        &self,
        pool: &H2Pool,
        mut timer: Pin<&mut Sleep>,
        mut req: Request<'_>,
        mut slot: S,
    ) -> Ended {
        let shared = &*self.shared;
        let step = req.step;
        let rendered_request;
        // A request that carries the flow's cookies is converted per request,
        // a literal one too (its kept form has no `cookie` field).
        let cookies = req.cookies();
        let prepared = shared.h2_requests.get(usize::from(step.index)).and_then(Option::as_ref);
        let request = match prepared.filter(|_| cookies.is_none()) {
            Some(r) => Some(r),
            None => {
                let (mut body_buf, mut rendered) = self.spares.borrow_mut().buffers.pop().unwrap_or_default();
                // Rendered (and hooked) as HTTP/1.1's, before HTTP/2 converts it.
                if step.cached.is_none()
                    && let Err(ended) = self.render_varying(&req, &mut body_buf, &mut rendered)
                {
                    self.spares.borrow_mut().buffers.push((body_buf, rendered));
                    return ended;
                }
                let http1 = step.cached.as_deref().unwrap_or(&rendered);
                let mut cookied = Vec::new();
                let http1 = match cookies {
                    Some(jar) => self.with_cookies(jar, http1, &mut cookied),
                    None => http1,
                };
                let none = Indexing::default();
                let indexing = shared.h2_indexing.get(usize::from(step.index)).unwrap_or(&none);
                rendered_request = H2Request::from_http1(http1, shared.target.scheme(), indexing).ok().and_then(|r| {
                    match &step.grpc {
                        Some(m) => r.into_grpc(m, shared.timeout).ok(),
                        None => Some(r),
                    }
                });
                self.spares.borrow_mut().buffers.push((body_buf, rendered));
                rendered_request.as_ref()
            }
        };
        // Counts the bytes written as it goes: a request cut at the run's end counts them too.
        let mut in_flight = self.in_flight(req.key, req.due, req.start, timer.as_mut());
        let mut captured = step.capture.then(Captured::default);
        let mut set_cookies = Vec::new();
        let outcome = match request {
            Some(request) => {
                let bytes_out = &mut in_flight.bytes_out;
                let answer = (captured.as_mut(), &mut set_cookies, &mut slot);
                let outcome = self.exchange_h2(pool, timer.as_mut(), request, &mut req, answer, bytes_out).await;
                if !set_cookies.is_empty()
                    && let Some(jar) = req.jar
                {
                    let fields = set_cookies.iter().map(|v| ("set-cookie", v.as_slice()));
                    self.keep_cookies(jar, request.path(), fields);
                }
                outcome
            }
            // A header HTTP/2 cannot carry (a templated value that renders badly).
            None => Err((FailureKind::Protocol, None)),
        };
        let bytes_out = in_flight.bytes_out;
        in_flight.done = true;
        if let Some(t) = slot.timeline() {
            // As over HTTP/1.1: a stream that failed once sent still had its
            // events; its duration is an answered stream's alone.
            let (sent, answer) = match &outcome {
                Ok((r, _, sent)) => (Some(*sent), Some((r.first_byte, r.last_byte))),
                Err((_, sent)) => (*sent, None),
            };
            if let Some(sent) = sent {
                let mut rec = self.rec.borrow_mut();
                rec.streamed(req.key, req.due, sent, answer, t);
                // An LLM step's tokens, as over HTTP/1.1.
                if let Some(tokens) = slot.tokens() {
                    rec.tokens(req.key, req.due, sent, answer.map(|(_, end)| end), tokens);
                }
            }
        }
        match outcome {
            Ok((response, grpc_status, sent)) => {
                let mut failure = status_failure(step, response.status);
                // A non-streamed LLM answer: its tokens from its `usage` (captured for it).
                if step.step.llm.is_some_and(|l| !l.stream)
                    && let Some(c) = &captured
                    && let (_, Some(usage)) = crate::llm::read_chunk(&c.body)
                {
                    self.rec.borrow_mut().usage(req.key, usage);
                }
                if failure.is_none()
                    && let Some(m) = &step.grpc
                {
                    failure =
                        grpc_failure(grpc_status, step.step.expect.as_ref().and_then(|e| e.grpc_status.as_deref()));
                    if let Some(c) = captured.as_mut() {
                        // `save` and `expect` read the answer's first message as JSON.
                        c.body = m.first_as_json(&c.body).unwrap_or_default();
                    }
                }
                let mut check = None;
                if failure.is_none()
                    && let Some(c) = &captured
                    && let Err((kind, why)) =
                        self.check_response(&req, response.status, &c.fields(), &c.body, slot.values())
                {
                    failure = Some(kind);
                    check = Some(why);
                }
                // A streamed answer's checks on its events (none made for `()`).
                if failure.is_none()
                    && let Some(why) = slot.check(step.step.expect.as_ref())
                {
                    failure = Some(FailureKind::CheckFailed);
                    check = Some(why);
                }
                // Only a failure is sampled (#32); gRPC's code is its status there.
                if let Some(kind) = failure
                    && self.wants_sample(step, kind)
                {
                    let status = match (&step.grpc, grpc_status) {
                        (Some(_), Some(code)) => u16::try_from(code).unwrap_or(u16::MAX),
                        _ => response.status,
                    };
                    let fields = captured.as_ref().map(|c| c.fields()).unwrap_or_default();
                    let body = captured.as_ref().map_or(&[][..], |c| &c.body[..]);
                    let answer = Answered { status, pairs: &fields, body };
                    self.sample(step, kind, response.last_byte, check, Some(answer), Sent::of(&req, None, Some(sent)));
                }
                self.answered(&req, sent, response, bytes_out, failure)
            }
            Err((kind, sent)) => self.failed(&req, kind, Sent::of(&req, None, sent), bytes_out, 0),
        }
    }

    /// Send `request` on a stream (see [`Worker::h2_stream`]) and read the
    /// response before `timer` fires (what was captured of it, and its
    /// `Set-Cookie` values, into `answer`; with a stream consumer there, the
    /// body's events go to it as they come). A request the server did not process
    /// (its connection went away first) goes again on another connection,
    /// twice at most. Returns the response and when the request was sent:
    /// `req.start`, or when its stream was ready if it waited for one or for
    /// a new connection (connect, TLS and the wait are not service time).
    /// A closed loop's request that waited for a stream is due from when its
    /// user was ready (`req.start`): the wait is latency, as the README says;
    /// due on its send, 64 users on a server's 16 streams read as 16, their
    /// waits nowhere (review 2's tester, P3).
    async fn exchange_h2<S: Slot>(
        &self,
        pool: &H2Pool,
        mut timer: Pin<&mut Sleep>,
        request: &H2Request,
        req: &mut Request<'_>,
        (mut captured, set_cookies, slot): (Option<&mut Captured>, &mut Vec<Vec<u8>>, &mut S),
        bytes_out: &mut u64,
    ) -> Result<(Response, Option<u32>, Instant), (FailureKind, Option<Instant>)> {
        let mut sent = req.start;
        let mut again = 0;
        loop {
            let lease = match within(timer.as_mut(), self.h2_stream(pool, req.key)).await {
                Some(Ok((lease, ready, waited))) => {
                    if let Some(ready) = ready {
                        sent = ready;
                    }
                    if waited && req.due == Due::OnSend {
                        req.due = Due::At(req.start);
                    }
                    lease
                }
                Some(Err(kind)) => return Err((kind, None)),
                None => return Err((FailureKind::Timeout, None)),
            };
            *bytes_out += request.bytes_out();
            if let Some(c) = captured.as_deref_mut() {
                c.body.clear();
            }
            let capture = captured.as_deref_mut();
            // `()`'s `to` is `None`: a step without `stream:` runs the exchange as it was.
            let result = match slot.to() {
                None => within(timer.as_mut(), http2::exchange(&lease, request, capture, set_cookies)).await,
                Some(mut to) => {
                    let streamed = http2::exchange_streamed(&lease, request, capture, set_cookies, &mut to);
                    // Boxed: its split and stall timer stay out of every other request's future.
                    within(timer.as_mut(), Box::pin(streamed)).await
                }
            };
            match result {
                Some(Ok((response, grpc_status))) => return Ok((response, grpc_status, sent)),
                Some(Err(e)) if e.again && again < 2 => again += 1,
                Some(Err(e)) => return Err((e.kind, Some(sent))),
                None => return Err((FailureKind::Timeout, Some(sent))),
            }
        }
    }

    /// A stream for a request of `key`: on a connection with room, on a new
    /// one, or after waiting for one (see `http2`'s sketch). Returns when it
    /// was ready, if it was not at once, and whether it waited for a stream.
    async fn h2_stream(&self, pool: &H2Pool, key: Key) -> Result<(Lease, Option<Instant>, bool), FailureKind> {
        // In the queue for a stream once it found every stream busy: served in turn.
        let mut waiting = None;
        loop {
            let goaways = pool.prune();
            if goaways > 0 {
                self.rec.borrow_mut().goaways(key, goaways);
            }
            let waited = waiting.is_some();
            match pool.take(waiting.as_ref()) {
                Take::Stream(lease) => return Ok((lease, waited.then(Instant::now), waited)),
                Take::AwaitOpening => {
                    let _waiting = pool.awaiting_open();
                    pool.changed().await;
                }
                Take::Full => {
                    if !waited {
                        waiting = Some(pool.waiting());
                        self.rec.borrow_mut().stream_wait(key);
                    }
                    pool.changed().await;
                }
                Take::Open => {
                    // Boxed: connect, TLS and the h2 handshake make a future of
                    // several KiB that every request's future would carry
                    // inline, and move (memcpy) when it is boxed per request
                    // in `perform`: ~530 of ~31,700 instructions per request
                    // (callgrind, quick -c 50 -p 10 against nginx). One
                    // allocation per new connection instead.
                    let lease = Box::pin(self.open_h2(pool, key)).await?;
                    return Ok((lease, Some(Instant::now()), waited));
                }
            }
        }
    }

    /// Open a connection for `pool` (connect, TLS, the h2 handshake and the
    /// server's SETTINGS) and take a stream on it.
    async fn open_h2(&self, pool: &H2Pool, key: Key) -> Result<Lease, FailureKind> {
        let opening = pool.opening();
        let (stream, _, deadline) = self.connect_stream(key, false).await?;
        if let Stream::Tls(tls) = &stream
            && tls.get_ref().1.alpn_protocol() != Some(b"h2")
        {
            // Asked for h2 alone, and the server would not speak it.
            return Err(FailureKind::Protocol);
        }
        // An open-model worker's plain-TCP reads are dated by the kernel (`h2/stamped.rs`).
        let io = H2Io::new(stream, self.stamped);
        let handshake = http2::handshake(io, &pool.settings, pool.notifier(), pool.new_state());
        let (send, state) = match timeout_at(deadline, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(kind)) => return Err(kind),
            Err(_) => return Err(FailureKind::ConnectTimeout),
        };
        drop(opening);
        Ok(pool.add(send, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gRPC answer's status against what the step expects.
    #[test]
    fn grpc_statuses_fail_as_their_kind_unless_expected() {
        use FailureKind::*;
        let (ok, unavailable) = (GrpcCode(0), GrpcCode(14));
        // (grpc-status, expected codes, failure)
        type Case<'a> = (Option<u32>, Option<&'a [GrpcCode]>, Option<FailureKind>);
        let cases: [Case<'_>; 7] = [
            (Some(0), None, None),                              // OK, nothing said: passes
            (Some(14), None, Some(GrpcUnavailable)),            // an error status counts as itself
            (Some(99), None, Some(GrpcUnknown)),                // an unknown code, as gRPC reads it
            (None, None, Some(Protocol)),                       // no grpc-status: not a gRPC answer
            (Some(14), Some(&[ok, unavailable]), None),         // expected: passes
            (Some(5), Some(&[ok]), Some(GrpcNotFound)),         // not expected: its own kind
            (Some(0), Some(&[unavailable]), Some(CheckFailed)), // an unexpected OK: a failed check
        ];
        for (i, (code, expected, want)) in cases.into_iter().enumerate() {
            assert_eq!(grpc_failure(code, expected), want, "case {i}");
        }
    }
}
