//! A `websocket:` step's session, as a worker runs and records it: what one
//! "request" is for a WebSocket, and where each of its times goes.
//!
//! The open model's arrival is the session. Its step has two rows in the
//! results: the step's own (named as the step) measures the **upgrade**,
//! and `NAME messages` measures each **message round trip**:
//!
//! ```text
//!  due     start   connect  TLS    upgrade written      101 read = t0
//!   |--late--|-------|-------|------------|----------------|
//!   |<------------------ step row: latency ------------------>|   connect, tls: their histograms
//!                                         |<--- service ----->|   ttfb: the upgrade's wait
//!
//!  round r is due at t0 + r * every (absolute, never a sum of sleeps):
//!   round due   m1 written        reply 1   m2 written       reply 2
//!       |--late--|-----------------|---------|----------------|
//!       |<-------- latency m1 ----->|<------- latency m2 ----->|   messages row
//!                |<-- service m1 -->|        |<-- service m2 ->|
//!  ... rounds while due < t0 + hold; then the connection idles until t0 + hold, and closes (1000).
//! ```
//!
//! - The upgrade is one request of the step's row, due when the arrival
//!   was: latency from the due time to the `101` read, service time from the
//!   connection being ready (connect and TLS are phases of their own) to the
//!   same instant; the session counts as an iteration when it is upgraded
//!   (the achieved rate is sessions opened per second, comparable with the
//!   target rate, not sessions that ended their hold).
//! - Each message sent and the next data message read back is one request
//!   of the messages row. The first of a round is due at the round's due
//!   time, each next one when the previous reply arrived (as a flow's steps
//!   are); in a closed loop, when it is sent. A reply that fails `expect` is
//!   `check_failed`; `save` reads the reply (JSONPath, regex).
//! - A connection dropped while a reply is awaited is `ws_abnormal_close`,
//!   a close frame then is `ws_close`, both at the latency they took; while
//!   the connection idles, a drop or a close with an error code (1011) is
//!   counted on the messages row (the step's, if it sends nothing) with no
//!   latency: nobody waited for it. A normal close (1000, 1001) by the
//!   server during the hold just ends the session early.
//! - A refused upgrade (any status but 101) is the step's failure: a 4xx or
//!   5xx as HTTP counts it, anything else (a 200, a redirect) `protocol`.
//! - A session ends when its connection is closed: the close frame sent
//!   (1000) or the server's answered, the server's close frame read within
//!   the step's timeout, then its end of the TCP connection, a second at
//!   most (`ws::close`). A closed-loop user's next session opens then, not
//!   before: waiting a fixed second for the server's close frame, 10,000
//!   users closing together against python3-websockets reopened while the
//!   server still held their last connections (it counted 15,300 open).
//!
//! While it idles, a session is a task waiting on its socket and its timer:
//! no clock read, no allocation, a 1 KiB read buffer (see `ws`). The run's
//! end cuts a message awaiting its reply like any request (`cut`), and drops
//! a session that is only being held: its hold was the run's to end.

use std::pin::Pin;

use perfops_core::measure::FailureKind;
use perfops_core::scenario::template::{HeadPlace, RenderError, UnsafeValue};
use tokio::time::{Instant, Sleep};

use super::sample::{Answered, Sent};
use super::scope::Scope;
use super::{Ended, Request, Worker, within};
use crate::http1::Response;
use crate::record::{Answer, Due, Failure, Key};
use crate::work::StepPlan;
use crate::ws::{self, Idle, Refused};

/// An upgrade's rendered path and headers (name, value).
type UpgradeRequest = (Vec<u8>, Vec<(String, Vec<u8>)>);

/// Bytes through a session's socket, counted from the last record on.
struct Marks {
    read: u64,
    written: u64,
}

impl Marks {
    /// The bytes (in, out) since the last call, on `ws`.
    fn take(&mut self, ws: &ws::Ws) -> (u64, u64) {
        let c = ws.get_ref();
        let out = (c.read - self.read, c.written - self.written);
        (self.read, self.written) = (c.read, c.written);
        out
    }
}

impl Worker {
    /// Run the WebSocket session of `req`'s step (see the module doc),
    /// timed out by `timer` per upgrade and per message.
    pub(super) async fn session(&self, mut timer: Pin<&mut Sleep>, req: Request<'_>) -> Ended {
        let shared = &*self.shared;
        let step = req.step;
        let Some(spec) = step.step.websocket.as_ref() else {
            return Ended { at: Instant::now(), failed: true };
        };
        let msgs = Key { stage: req.key.stage, step: step.messages.unwrap_or(req.key.step) };
        // Boxed, and apart: what the upgrade needs (its request, the
        // handshake's state, its result) is gone before the hold starts, so a
        // held session's future carries the connection and the message loop
        // alone (#14: 10,000 held connections in < 100 MiB).
        let (mut ws, t0) = match Box::pin(self.upgrade(timer.as_mut(), &req)).await {
            Ok(upgraded) => upgraded,
            Err(ended) => return ended,
        };
        let mut marks = Marks { read: ws.get_ref().read, written: ws.get_ref().written };

        // The messages, round after round, then the rest of the hold.
        let hold_end = t0 + spec.hold;
        let mut round = 0u32;
        let mut text = Vec::new();
        loop {
            let round_due = match spec.every {
                Some(every) if round > 0 => t0 + every * round,
                _ => t0,
            };
            if round > 0 {
                if round_due >= hold_end {
                    break;
                }
                timer.as_mut().reset(round_due);
                match ws::idle(&mut ws, timer.as_mut()).await {
                    Ok(Idle::Elapsed) => {}
                    Ok(Idle::Closed) => return Box::pin(self.close(timer, ws, false)).await,
                    Err(kind) => {
                        self.rec.borrow_mut().closed(msgs, kind);
                        return Ended { at: Instant::now(), failed: true };
                    }
                }
            }
            let mut due = match req.due {
                Due::OnSend => Due::OnSend,
                Due::At(_) => Due::At(round_due),
            };
            for message in &spec.send {
                text.clear();
                {
                    let work = &*shared.work;
                    let saved = req.scope.saved();
                    let av = work.vars(saved.as_deref(), req.seq, req.rows);
                    // A missing value renders empty; the server's answer says the rest.
                    let _ = message.render(&av, &mut self.rng.borrow_mut(), &mut text);
                }
                let start = Instant::now();
                let mut in_flight = self.in_flight(msgs, due, start, timer.as_mut());
                let message = String::from_utf8_lossy(&text).into_owned();
                let result = within(timer.as_mut(), ws::round_trip(&mut ws, message)).await;
                in_flight.done = true;
                let (bytes_in, bytes_out) = marks.take(&ws);
                let rt = match result {
                    Some(Ok(rt)) => rt,
                    Some(Err(kind)) => {
                        let at = Instant::now();
                        let f = Failure { due, start, sent: Some(start), at, kind, bytes_out, bytes_in: 0 };
                        self.rec.borrow_mut().failed(msgs, &f);
                        return Ended { at, failed: true };
                    }
                    None => {
                        let at = Instant::now();
                        let f = Failure {
                            due,
                            start,
                            sent: Some(start),
                            at,
                            kind: FailureKind::Timeout,
                            bytes_out,
                            bytes_in: 0,
                        };
                        self.rec.borrow_mut().failed(msgs, &f);
                        return Ended { at, failed: true };
                    }
                };
                let check = if step.capture { self.check_reply(step, req.scope, &rt.reply).err() } else { None };
                let failure = check.is_some().then_some(FailureKind::CheckFailed);
                if let Some(kind) = failure {
                    let answer = Answered { status: 101, pairs: &[], body: &rt.reply };
                    let out = Sent {
                        wire: None,
                        due,
                        start,
                        sent: Some(rt.sent_at),
                        jar: req.jar,
                        scope: req.scope,
                        cookie: false,
                    };
                    self.sample(step, kind, rt.reply_at, check, Some(answer), out);
                }
                let response = Response {
                    status: 101,
                    bytes_in,
                    sent_at: rt.sent_at,
                    first_byte: rt.reply_at,
                    last_byte: rt.reply_at,
                };
                // A message's round trip: never its arrival's first request (the upgrade was).
                let answer =
                    Answer { due, sent: start, response, bytes_out, failure, ends_iteration: false, first: false };
                self.rec.borrow_mut().answered(msgs, &answer);
                if failure.is_some() {
                    return Box::pin(self.close(timer, ws, true)).await;
                }
                due = match due {
                    Due::OnSend => Due::OnSend,
                    Due::At(_) => Due::At(rt.reply_at),
                };
            }
            round += 1;
            if spec.every.is_none() {
                break;
            }
        }
        if Instant::now() < hold_end {
            timer.as_mut().reset(hold_end);
            match ws::idle(&mut ws, timer.as_mut()).await {
                Ok(Idle::Elapsed) => {}
                Ok(Idle::Closed) => return Box::pin(self.close(timer, ws, false)).await,
                Err(kind) => {
                    self.rec.borrow_mut().closed(msgs, kind);
                    return Ended { at: Instant::now(), failed: true };
                }
            }
        }
        Box::pin(self.close(timer, ws, false)).await
    }

    /// Close the session's connection ([`ws::close`]: the closing handshake,
    /// then the server's end of the TCP connection), waiting at most the
    /// step's timeout in all, and end it (`failed`: its flow ends). It has ended
    /// when its connection is closed: a closed-loop user's next session
    /// opens then, and not before.
    ///
    /// Boxed where it is called: inline, its state (the connection moved
    /// in, a frame written, reads) made every held session's future larger.
    async fn close(&self, mut timer: Pin<&mut Sleep>, ws: ws::Ws, failed: bool) -> Ended {
        timer.as_mut().reset(Instant::now() + self.shared.timeout);
        let _ = within(timer, ws::close(ws)).await;
        Ended { at: Instant::now(), failed }
    }

    /// The upgrade of `req`'s session: one request of the step's row,
    /// recorded here. Returns the connection and when its `101` was read,
    /// or how the flow ends.
    async fn upgrade(&self, mut timer: Pin<&mut Sleep>, req: &Request<'_>) -> Result<(ws::Ws, Instant), Ended> {
        let shared = &*self.shared;
        let up = req.key;
        let (path, headers) = match self.upgrade_request(req.step, req) {
            Ok(request) => request,
            Err(unsafe_value) => return Err(self.refused(req, &unsafe_value.into())),
        };
        let Some(mut request) = ws::Upgrade::new(&shared.target.authority, &path, &headers) else {
            return Err(self.session_failed(up, req, Sent::of(req, None, None), FailureKind::Protocol, (0, 0)));
        };
        drop(headers);
        // The flow's cookies go with the upgrade, as with any request (a
        // login's session cookie is what lets a socket open).
        let mut cookie = false;
        if let Some(jar) = req.cookies() {
            // `with_cookies` leaves `cookied` empty when the jar had nothing for it.
            let mut cookied = Vec::new();
            self.with_cookies(jar, &request.bytes, &mut cookied);
            if !cookied.is_empty() {
                request.bytes = cookied;
                cookie = true;
            }
        }
        // What a failure's sample shows went out: the step, and the jar's `Cookie` if it went.
        let out = |sent| Sent::of(req, None, sent).with_cookie(cookie);
        let mut in_flight = self.in_flight(up, req.due, req.start, timer.as_mut());
        let (stream, ready, _) = match within(timer.as_mut(), Box::pin(self.connect_stream(up, true))).await {
            Some(Ok(opened)) => opened,
            Some(Err(kind)) => {
                in_flight.done = true;
                return Err(self.session_failed(up, req, out(None), kind, (0, 0)));
            }
            None => {
                in_flight.done = true;
                return Err(self.session_failed(up, req, out(None), FailureKind::Timeout, (0, 0)));
            }
        };
        let mut hs = ws::Handshake::default();
        // Boxed: inline, the handshake's state took room more than once in
        // every upgrade waiting for its answer (`within` keeps its argument
        // and a pinned copy of it).
        let handshake = Box::pin(ws::upgrade(stream, request, &mut hs));
        let upgraded = within(timer.as_mut(), handshake).await;
        let t0 = Instant::now();
        in_flight.done = true;
        if let Some(jar) = req.jar
            && !hs.set_cookies.is_empty()
        {
            let set = hs.set_cookies.iter().map(|v| ("set-cookie", v.as_slice()));
            self.keep_cookies(jar, &path, set);
        }
        let first_byte = hs.first_byte.unwrap_or(t0);
        let (response, failure) = match upgraded {
            Some(Ok(ws)) => {
                let c = ws.get_ref();
                let response = Response { status: 101, bytes_in: c.read, sent_at: ready, first_byte, last_byte: t0 };
                let ends_iteration = req.last;
                let (bytes_out, first) = (c.written, req.first);
                let answer =
                    Answer { due: req.due, sent: ready, response, bytes_out, failure: None, ends_iteration, first };
                self.rec.borrow_mut().answered(up, &answer);
                return Ok((ws, t0));
            }
            // Answered, with an error status: counted as HTTP counts it.
            Some(Err(Refused::Status(status))) if FailureKind::of_status(status).is_some() => (
                Response { status, bytes_in: hs.bytes_in, sent_at: ready, first_byte, last_byte: t0 },
                FailureKind::of_status(status),
            ),
            // What the server sent counts (a 200 to an upgrade read "0 bytes
            // received" for 20 answers; review 2's tester).
            Some(Err(refused)) => {
                let kind = refused.kind();
                return Err(self.session_failed(up, req, out(Some(ready)), kind, (hs.bytes_out, hs.bytes_in)));
            }
            None => {
                return Err(self.session_failed(
                    up,
                    req,
                    out(Some(ready)),
                    FailureKind::Timeout,
                    (hs.bytes_out, hs.bytes_in),
                ));
            }
        };
        // Kept as a failing exchange, as an HTTP answer's error status is
        // (a 401 for a missing session cookie is what a user looks for).
        if let Some(kind) = failure {
            let answered = Answered { status: response.status, pairs: &[], body: &[] };
            self.sample(req.step, kind, t0, None, Some(answered), out(Some(ready)));
        }
        let (bytes_out, first) = (hs.bytes_out, req.first);
        let answer = Answer { due: req.due, sent: ready, response, bytes_out, failure, ends_iteration: true, first };
        self.rec.borrow_mut().answered(up, &answer);
        Err(Ended { at: t0, failed: true })
    }

    /// The upgrade's path (percent-encoded) and headers, rendered for this
    /// arrival; `Err` when a value held CR, LF or NUL (#31): not sent.
    fn upgrade_request(&self, step: &StepPlan, req: &Request<'_>) -> Result<UpgradeRequest, UnsafeValue> {
        let shared = &*self.shared;
        let work = &*shared.work;
        let saved = req.scope.saved();
        let av = work.vars(saved.as_deref(), req.seq, req.rows);
        let mut rng = self.rng.borrow_mut();
        // A missing value renders empty; the server's answer says the rest.
        let refused = |r: Result<(), RenderError>| match r {
            Err(RenderError::Unsafe(u)) => Err(u),
            _ => Ok(()),
        };
        let mut path = Vec::new();
        refused(step.step.path.render_head(&av, &mut rng, &mut path, HeadPlace::Target))?;
        let headers = work
            .headers_of(&step.step)
            .map(|(name, value)| {
                let mut v = Vec::new();
                refused(value.render_head(&av, &mut rng, &mut v, HeadPlace::HeaderValue))?;
                Ok((name.clone(), v))
            })
            .collect::<Result<_, _>>()?;
        Ok((path, headers))
    }

    /// Record a session's upgrade that got no answer, and end the flow.
    fn session_failed(
        &self,
        key: Key,
        req: &Request<'_>,
        out: Sent<'_>,
        kind: FailureKind,
        (bytes_out, bytes_in): (u64, u64),
    ) -> Ended {
        let at = Instant::now();
        let failure = Failure { due: req.due, start: req.start, sent: out.sent, at, kind, bytes_out, bytes_in };
        self.rec.borrow_mut().failed(key, &failure);
        self.sample(req.step, kind, at, None, None, out);
        Ended { at, failed: true }
    }

    /// Run the step's `expect` and `save` on a reply; `Err`: why a check
    /// failed or a value to save was not found.
    fn check_reply(&self, step: &StepPlan, scope: &Scope, reply: &[u8]) -> Result<(), String> {
        self.check_and_save(step, scope, 101, &[], reply, None)
    }
}
