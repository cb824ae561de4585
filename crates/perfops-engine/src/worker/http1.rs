//! A step over HTTP/1.1, the hot path: the request's bytes (cached at plan
//! time for a literal step, else rendered into a reused buffer), one timer
//! moved to its deadline, the exchange on a kept connection or a new one
//! (retried once when a kept one was found closed), redirects within the
//! target, then the step's checks and one record of its answer or failure
//! (`worker.rs`). The bytes on the wire and their framing are
//! `crate::http1`'s.
//!
//! [`Worker::perform`] is also where a run over HTTP/2 turns off to
//! `http2.rs`: one branch per request at its top, so the HTTP/1.1 path is
//! as it was.

use std::pin::Pin;

use perfops_core::measure::FailureKind;
use perfops_core::scenario::extract::{EventPick, Expect, Extractor};
use perfops_core::scenario::template::RenderError;
use perfops_core::scenario::{Step, StreamRead};
use tokio::time::{Instant, Sleep};

use super::checks::{EventValues, status_failure};
use super::sample::{Answered, Sent};
use super::{Ended, Request, Worker, within};
use crate::http1::{Conn, Response, StreamTo};
use crate::llm::Tokens;
use crate::stream::{Event, Events, Timeline};
use crate::work::ArrivalVars;

impl Worker {
    /// Record `req` as refused before anything was written for it: a value
    /// held CR, LF or NUL where it would have gone into the request's head
    /// (issue #31; HTTP/1.1, HTTP/2, gRPC and WebSocket upgrades alike).
    /// Counted as sent and failed as `unsafe_value`, so the error rate shows
    /// it; its flow ends, as after any failure. A value `:number` could not
    /// send (#32) is refused the same way, as `bad_value`.
    /// A varying step's request rendered into `rendered` (its body built in
    /// `body`) from the arrival's values, then changed by its request hook if
    /// it names one: what HTTP/1.1 sends, and what HTTP/2 converts. `Err`: the
    /// request is not sent (a value it must not carry, or the hook failed),
    /// and what that ended as.
    #[inline]
    pub(super) fn render_varying(
        &self,
        req: &Request<'_>,
        body: &mut Vec<u8>,
        rendered: &mut Vec<u8>,
    ) -> Result<(), Ended> {
        let step = req.step;
        let work = &*self.shared.work;
        // A missing value renders empty; the server's answer says the rest.
        // The scope's and flow's borrows end here: the request hook below saves.
        let r = {
            let saved = req.scope.saved();
            let av = work.vars(saved.as_deref(), req.seq, req.rows);
            let f = req.flow.map(|f| f.borrow());
            let av = ArrivalVars { flow: f.as_ref().map(|f| &f.state.vars), ..av };
            work.render(step, &av, &mut self.rng.borrow_mut(), body, rendered)
        };
        // CR/LF in a value: never sent, whatever the protocol (HTTP/1.1 would
        // split it into a header of its own, HPACK would carry it).
        if let Err(e) = r.as_ref()
            && e.refuses()
        {
            return Err(self.refused(req, e));
        }
        // The request hook changes what was rendered (a varying step, never cached).
        if let Some(hook) = step.hooks.and_then(|h| h.before)
            && let Err(why) = self.before_hook(req, hook, rendered)
        {
            return Err(self.script_failure(req, why));
        }
        Ok(())
    }

    pub(super) fn refused(&self, req: &Request<'_>, why: &RenderError) -> Ended {
        let kind = match why {
            RenderError::NotANumber(_) => FailureKind::BadValue,
            _ => FailureKind::UnsafeValue,
        };
        self.rec.borrow_mut().sent(req.key);
        self.failed(req, kind, Sent::of(req, None, None), 0, 0)
    }

    /// Send `req` on the connection in `conn` or a new one, timed out by
    /// `timer`, and record everything under its key (its iteration too when it
    /// is its flow's last step or failed with an answer). Leaves the
    /// connection in `conn` when it can be reused.
    ///
    /// `slot` is where a streamed answer's events go: `()` for a step
    /// without `stream:` (the function made for it has no code for them),
    /// a [`Streaming`] for one with (`Worker::step` boxes that future).
    pub(super) async fn perform<S: Slot>(
        &self,
        conn: &mut Option<Box<Conn>>,
        mut timer: Pin<&mut Sleep>,
        req: Request<'_>,
        mut slot: S,
    ) -> Ended {
        if let Some(pool) = &self.h2 {
            // Boxed: inline, HTTP/2's future (its connect, handshake and
            // stream) would make every HTTP/1.1 request's future as large,
            // and the #12 budget of 10,000 connections in 100 MiB is per
            // task. One allocation per HTTP/2 request.
            return Box::pin(self.perform_h2(pool, timer, req, slot)).await;
        }
        let shared = &*self.shared;
        let step = req.step;
        let (mut body_buf, mut rendered) = self.spares.borrow_mut().buffers.pop().unwrap_or_default();
        let request: &[u8] = match &step.cached {
            Some(bytes) => bytes,
            None => {
                if let Err(ended) = self.render_varying(&req, &mut body_buf, &mut rendered) {
                    self.spares.borrow_mut().buffers.push((body_buf, rendered));
                    return ended;
                }
                &rendered
            }
        };
        // The flow's cookies, if its jar holds any (its bytes, then, in `cookied`).
        let mut cookied;
        let request = match req.cookies() {
            Some(jar) => {
                cookied = Vec::new();
                self.with_cookies(jar, request, &mut cookied)
            }
            None => request,
        };
        let mut in_flight = self.in_flight(req.key, req.due, req.start, timer.as_mut());
        // What a broken answer had sent before it failed.
        let mut bytes_in = 0;
        let mut outcome = self
            .exchange(conn, timer.as_mut(), request, &req, &mut in_flight.bytes_out, &mut bytes_in, slot.to().as_mut())
            .await;
        if outcome.is_ok() {
            self.set_cookies(conn.as_deref(), &req, request);
        }
        // Redirects, only when asked and only within the target: one request,
        // measured to the final response, from its first send.
        let mut hops = shared.work.redirects;
        while hops > 0 {
            let Ok((resp, sent)) = &outcome else { break };
            let Some(c) = conn.as_deref() else { break };
            let Some(next) = shared.work.redirect(resp.status, &c.head, &shared.target, step.head) else { break };
            hops -= 1;
            if !c.keep_alive {
                *conn = None;
            }
            let (earlier_bytes, sent) = (resp.bytes_in, *sent);
            // A hop carries the cookies the answers so far set (a login's
            // 302 sets the session the page it points to needs).
            let mut cookied = Vec::new();
            let next = match req.cookies() {
                Some(jar) => self.with_cookies(jar, &next, &mut cookied),
                None => &next,
            };
            // The redirects read count with the final answer, good or not.
            outcome = match self
                .exchange(conn, timer.as_mut(), next, &req, &mut in_flight.bytes_out, &mut bytes_in, None)
                .await
            {
                Ok((mut r, _)) => {
                    self.set_cookies(conn.as_deref(), &req, next);
                    r.bytes_in += earlier_bytes;
                    Ok((r, sent))
                }
                Err((kind, _)) => {
                    bytes_in += earlier_bytes;
                    Err((kind, Some(sent)))
                }
            };
        }
        // `run --debug` only: one test of a `None` on every other run.
        if self.trace.is_some() {
            self.trace(request, conn.as_deref());
        }
        in_flight.done = true;
        let bytes_out = in_flight.bytes_out;
        if let Some(t) = slot.timeline() {
            // A stream that failed once sent (stalled, cut by the timeout, reset)
            // still had its events; its duration is an answered stream's alone.
            let (sent, answer) = match &outcome {
                Ok((r, sent)) => (Some(*sent), Some((r.first_byte, r.last_byte))),
                Err((_, sent)) => (*sent, None),
            };
            if let Some(sent) = sent {
                let mut rec = self.rec.borrow_mut();
                rec.streamed(req.key, req.due, sent, answer, t);
                if let Some(tokens) = slot.tokens() {
                    rec.tokens(req.key, req.due, sent, answer.map(|(_, end)| end), tokens);
                }
            }
        }
        // The buffers go back after the match: a failure's sample reads the request's bytes.
        let ended = match outcome {
            Ok((response, sent)) => {
                let mut failure = status_failure(step, response.status);
                let mut check = None;
                if failure.is_none() && step.capture {
                    // A non-streamed LLM answer: its tokens from its `usage` (its body is
                    // captured for it). Here, where only capturing steps come: a step that
                    // saves and checks nothing never tests it.
                    if step.step.llm.is_some_and(|l| !l.stream)
                        && let Some(c) = conn.as_deref()
                        && let (_, Some(usage)) = crate::llm::read_chunk(&c.body)
                    {
                        self.rec.borrow_mut().usage(req.key, usage);
                    }
                    match conn.as_deref().map(|c| {
                        with_fields(c, |pairs| {
                            self.check_response(&req, response.status, pairs, &c.body, slot.values())
                        })
                    }) {
                        Some(Ok(())) => {}
                        Some(Err((kind, why))) => {
                            failure = Some(kind);
                            check = Some(why);
                        }
                        None => failure = Some(FailureKind::CheckFailed),
                    }
                }
                // A streamed answer's checks on its events (none made for `()`).
                if failure.is_none()
                    && let Some(why) = slot.check(step.step.expect.as_ref())
                {
                    failure = Some(FailureKind::CheckFailed);
                    check = Some(why);
                }
                // Only a failure is sampled (#32): a success never comes here.
                if let Some(kind) = failure
                    && self.wants_sample(step, kind)
                {
                    let out = Sent::of(&req, Some(request), Some(sent));
                    match conn.as_deref() {
                        Some(c) => with_fields(c, |pairs| {
                            let answer = Answered { status: response.status, pairs, body: &c.body };
                            self.sample(step, kind, response.last_byte, check, Some(answer), out);
                        }),
                        None => self.sample(step, kind, response.last_byte, check, None, out),
                    }
                }
                if conn.as_ref().is_some_and(|c| !c.keep_alive) {
                    *conn = None;
                }
                self.answered(&req, sent, response, bytes_out, failure)
            }
            Err((kind, sent)) => self.failed(&req, kind, Sent::of(&req, Some(request), sent), bytes_out, bytes_in),
        };
        self.spares.borrow_mut().buffers.push((body_buf, rendered));
        ended
    }

    /// Send `request` on the connection in `conn` (or a new one, left there)
    /// and read the response before `timer` fires, retrying once on a fresh
    /// connection when a kept one was found closed. Adds the bytes written to
    /// `bytes_out`, and those read of an answer that then failed to
    /// `bytes_in` (a good answer counts its own). Returns the response and when the request was sent:
    /// `req.start` on a kept connection, or when a new one was ready (connect
    /// and TLS are phases of their own, not service time); or the failure and
    /// when it was sent, if it was (not when the connect failed). With
    /// `stream`, the answer's events go to it as they come.
    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        conn: &mut Option<Box<Conn>>,
        mut timer: Pin<&mut Sleep>,
        request: &[u8],
        req: &Request<'_>,
        bytes_out: &mut u64,
        bytes_in: &mut u64,
        mut stream: Option<&mut StreamTo<'_>>,
    ) -> Result<(Response, Instant), (FailureKind, Option<Instant>)> {
        let mut retried = false;
        let mut sent = req.start;
        loop {
            let c = match conn {
                Some(c) => c,
                // Boxed: connecting (and the TLS handshake) is a future of over
                // a KiB that every request's future would otherwise carry, for
                // the whole exchange (#12: 10,000 connections in < 100 MiB).
                // One allocation per new connection, none per request.
                None => match within(timer.as_mut(), Box::pin(self.connect(req.key))).await {
                    Some(Ok((c, ready))) => {
                        sent = ready;
                        conn.insert(c)
                    }
                    Some(Err(kind)) => return Err((kind, None)),
                    None => return Err((FailureKind::Timeout, None)),
                },
            };
            *bytes_out += request.len() as u64;
            let before = c.received;
            let result =
                within(timer.as_mut(), c.exchange(request, req.step.head, req.step.capture, stream.as_deref_mut()))
                    .await;
            if !matches!(result, Some(Ok(_))) {
                *bytes_in += c.received - before;
            }
            match result {
                Some(Ok(resp)) => return Ok((resp, sent)),
                // A keep-alive connection the server closed while it was idle:
                // retry once on a new one, as browsers and HTTP clients do.
                Some(Err(e)) if e.nothing_received && c.reused && !retried => retried = true,
                Some(Err(e)) => {
                    *conn = None;
                    return Err((e.kind, Some(sent)));
                }
                None => {
                    *conn = None;
                    return Err((FailureKind::Timeout, Some(sent)));
                }
            }
            *conn = None;
        }
    }
}

impl Worker {
    /// The answer on `c` to `request` set cookies: into `req`'s jar with
    /// them. One test when the flow has no jar, two when the answer set none.
    #[inline]
    fn set_cookies(&self, c: Option<&Conn>, req: &Request<'_>, request: &[u8]) {
        if let Some(jar) = req.jar
            && let Some(c) = c
            && c.set_cookie
        {
            let path = perfops_core::cookie::request_path(request);
            with_fields(c, |pairs| self.keep_cookies(jar, path.as_bytes(), pairs.iter().copied()));
        }
    }
}

/// `f` on the header fields of the response captured on `c`.
fn with_fields<R>(c: &Conn, f: impl FnOnce(&[(&str, &[u8])]) -> R) -> R {
    let mut headers = [httparse::EMPTY_HEADER; crate::http1::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let _ = resp.parse(&c.head);
    let pairs: Vec<(&str, &[u8])> = resp.headers.iter().map(|h| (h.name, h.value)).collect();
    f(&pairs)
}

/// Where [`Worker::perform_on`] hands a streamed answer's events: nowhere
/// (`()`, a step without `stream:`), a [`Streaming`], or an LLM step's
/// [`LlmStreaming`].
pub(super) trait Slot {
    /// The consumer and stall limit for the exchange.
    fn to(&mut self) -> Option<StreamTo<'_>>;
    /// What the stream came to, for the recorder.
    fn timeline(&self) -> Option<&Timeline>;
    /// Why its events fail the step's `expect`, if they do.
    fn check(&self, expect: Option<&Expect>) -> Option<String>;
    /// An LLM step's tokens, for the recorder.
    fn tokens(&self) -> Option<&Tokens>;
    /// What its events give the step's `save`s that read them.
    fn values(&self) -> Option<&dyn EventValues> {
        None
    }
}

impl Slot for () {
    #[inline(always)]
    fn check(&self, _: Option<&Expect>) -> Option<String> {
        None
    }
    #[inline(always)]
    fn to(&mut self) -> Option<StreamTo<'_>> {
        None
    }
    #[inline(always)]
    fn timeline(&self) -> Option<&Timeline> {
        None
    }
    #[inline(always)]
    fn tokens(&self) -> Option<&Tokens> {
        None
    }
}

/// The timeline of a stream read for `step`: its `expect`'s checks on
/// events, and the first and last events kept when a check or a `save`
/// reads them.
fn timeline_for(step: &Step) -> Timeline {
    let events = step.expect.as_ref().map(|e| &e.events).filter(|e| !e.is_empty());
    let keep = events.is_some_and(|e| e.first.is_some() || e.last.is_some())
        || step.save.iter().any(|(_, x)| matches!(x.event_pick(), Some(EventPick::First | EventPick::Last)));
    let mut timeline = Timeline::new(keep);
    timeline.want = events.and_then(|e| e.any.as_ref()).map(|t| t.as_bytes().to_vec());
    timeline
}

/// Why the events of a stream's timeline `t` fail `expect`, if they do.
fn check_events(t: &Timeline, expect: Option<&Expect>) -> Option<String> {
    let (first, last) = (t.first.as_ref().map(|k| &k.data[..]), t.last.as_ref().map(|k| &k.data[..]));
    expect?.events.check(first, last, t.matched)
}

/// What a step's `save`s take from its stream's events: those that read the
/// first event that matches (`event:$.id`), tried on each event as it comes
/// (the first and last events are its timeline's).
struct Saves<'a> {
    /// (its place in the step's `save`, its extractor, the value once found);
    /// empty, unallocated, for a step that has none.
    matching: Vec<(usize, &'a Extractor, Option<String>)>,
}

impl<'a> Saves<'a> {
    fn of(step: &'a Step) -> Saves<'a> {
        let matching = step
            .save
            .iter()
            .enumerate()
            .filter(|(_, (_, x))| x.event_pick() == Some(EventPick::Match))
            .map(|(i, (_, x))| (i, x, None))
            .collect();
        Saves { matching }
    }

    fn event(&mut self, e: &Event<'_>) {
        for (_, x, found) in &mut self.matching {
            if found.is_none() {
                *found = x.extract_event(e.data);
            }
        }
    }

    /// The value of `x`, the step's `at`-th save, from the stream `t`.
    fn value(&self, t: &Timeline, at: usize, x: &Extractor) -> Option<String> {
        match x.event_pick()? {
            EventPick::First => x.extract_event(&t.first.as_ref()?.data),
            EventPick::Last => x.extract_event(&t.last.as_ref()?.data),
            EventPick::Match => self.matching.iter().find(|(i, _, _)| *i == at)?.2.clone(),
        }
    }
}

/// A step with `stream:`: its answer's timeline and stall limit, and what
/// its `save`s find in the events as they come.
pub(super) struct Streaming<'a> {
    timeline: Timeline,
    stall: Option<std::time::Duration>,
    saves: Saves<'a>,
}

impl<'a> Streaming<'a> {
    /// A stream read as `read` says, for `step`'s `expect` (its checks on
    /// events) and `save` (what it takes of them).
    pub(super) fn new(read: StreamRead, step: &'a Step) -> Streaming<'a> {
        Streaming { timeline: timeline_for(step), stall: read.stall, saves: Saves::of(step) }
    }
}

impl Events for Streaming<'_> {
    fn event(&mut self, e: &Event<'_>) {
        self.timeline.event(e);
        self.saves.event(e);
    }
}

impl EventValues for Streaming<'_> {
    fn value(&self, at: usize, x: &Extractor) -> Option<String> {
        self.saves.value(&self.timeline, at, x)
    }
}

impl Slot for Streaming<'_> {
    fn to(&mut self) -> Option<StreamTo<'_>> {
        let stall = self.stall;
        Some(StreamTo { events: self, stall })
    }
    fn timeline(&self) -> Option<&Timeline> {
        Some(&self.timeline)
    }
    fn check(&self, expect: Option<&Expect>) -> Option<String> {
        check_events(&self.timeline, expect)
    }
    fn tokens(&self) -> Option<&Tokens> {
        None
    }
    fn values(&self) -> Option<&dyn EventValues> {
        Some(self)
    }
}

/// An LLM step's streamed answer (`openai:`): its tokens (which keep the
/// stream's timeline, and so its checks on events), stall limit, and what
/// its `save`s find in the events (an LLM stream's `usage` chunk, say).
pub(super) struct LlmStreaming<'a> {
    tokens: Tokens,
    stall: Option<std::time::Duration>,
    saves: Saves<'a>,
}

impl<'a> LlmStreaming<'a> {
    /// A token stream read as `read` says, for `step`'s `expect` and `save`.
    pub(super) fn new(read: StreamRead, step: &'a Step) -> LlmStreaming<'a> {
        LlmStreaming { tokens: Tokens::over(timeline_for(step)), stall: read.stall, saves: Saves::of(step) }
    }
}

impl Events for LlmStreaming<'_> {
    fn event(&mut self, e: &Event<'_>) {
        self.tokens.event(e);
        self.saves.event(e);
    }
}

impl EventValues for LlmStreaming<'_> {
    fn value(&self, at: usize, x: &Extractor) -> Option<String> {
        self.saves.value(&self.tokens.timeline, at, x)
    }
}

impl Slot for LlmStreaming<'_> {
    fn to(&mut self) -> Option<StreamTo<'_>> {
        let stall = self.stall;
        Some(StreamTo { events: self, stall })
    }
    fn timeline(&self) -> Option<&Timeline> {
        Some(&self.tokens.timeline)
    }
    fn check(&self, expect: Option<&Expect>) -> Option<String> {
        check_events(&self.tokens.timeline, expect)
    }
    fn tokens(&self) -> Option<&Tokens> {
        Some(&self.tokens)
    }
    fn values(&self) -> Option<&dyn EventValues> {
        Some(self)
    }
}
