//! `perfops run --debug` (#32): each flow once, one arrival per flow in
//! order, no load model, and every exchange handed back as it went (the
//! request, the response, each check and save with its outcome, the time),
//! for writing a scenario. k6's `--iterations 1 --http-debug`, in one flag.
//!
//! The steps go through the same code as a run's ([`Worker::step`]): what
//! `--debug` shows is what a run sends and judges. The hot path pays one
//! test of an `Option` that is `None` outside `--debug` ([`Worker::trace`]);
//! the wire bytes are copied only here.
//!
//! What it shows is redacted here, before it leaves the engine, by the
//! scenario's rules ([`perfops_core::scenario::redact`]): header values that
//! are not harmless, every `${env.*}` value and credential-like saved value
//! wherever it appears, credential-like JSON and query pairs.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use perfops_core::measure::FailureKind;
use perfops_core::printable;
use perfops_core::scenario::redact::{REDACTED, credential_name, redact_header_line, redact_values};
use tokio::time::Instant;

use super::scope::Scope;
use super::{Due, Key, Request, Shared, Worker, new_timer};

/// How much of a request's or response's body `--debug` shows.
pub const BODY_SHOWN: usize = 1024;

/// The wire bytes of one HTTP/1.1 exchange, as the worker sent and read
/// them (the response's, when it had one).
#[derive(Default)]
pub(crate) struct Wire {
    pub(crate) request: Vec<u8>,
    pub(crate) response_head: Vec<u8>,
    pub(crate) response_body: Vec<u8>,
}

/// One exchange of `--debug`, redacted, ready to print.
#[derive(Debug, Clone, PartialEq)]
pub struct DebugExchange {
    /// The flow (`setup` for the scenario's setup).
    pub flow: String,
    /// The step's name.
    pub step: String,
    /// The request's head (request line and header fields, one per line)
    /// and the first [`BODY_SHOWN`] bytes of its body; none for a step whose
    /// protocol `--debug` does not trace (HTTP/2, gRPC, WebSocket).
    pub request: Option<String>,
    /// The response's head and first [`BODY_SHOWN`] bytes of its body, the
    /// same; none without an answer.
    pub response: Option<String>,
    /// How it failed, if it did: the kind, and the check or save that
    /// failed as expected vs found.
    pub failure: Option<(FailureKind, Option<String>)>,
    /// What the step saved (`name`, value; a credential-like name's value
    /// redacted).
    pub saved: Vec<(String, String)>,
    /// From its start to its answer (or failure).
    pub took: Duration,
}

impl Worker {
    /// `--debug` only: keep the wire bytes of this exchange.
    pub(super) fn trace(&self, request: &[u8], conn: Option<&crate::http1::Conn>) {
        if let Some(t) = &self.trace {
            let mut t = t.borrow_mut();
            t.request = request.to_vec();
            t.response_head = conn.map(|c| c.head.clone()).unwrap_or_default();
            t.response_body = conn.map(|c| c.body.clone()).unwrap_or_default();
        }
    }
}

/// Run each of `shared.work`'s flows once, in order, one arrival each on its
/// own connection, and hand every exchange to `on`. With `setup`, the first
/// flow is setup: what it saved goes to every other flow, over the run's
/// globals, as in a run (before, it was dropped: `${token}` rendered empty).
/// A failed step ends its flow, as in a run.
pub(crate) fn run(shared: Arc<Shared>, setup: bool, mut on: impl FnMut(DebugExchange)) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut w = Worker::new(0, Instant::now(), shared.clone(), 1);
        w.trace = Some(Default::default());
        let w = Rc::new(w);
        let mut timer = std::pin::pin!(new_timer());
        let globals = &shared.work.globals;
        // What setup saved, for every flow after it.
        let mut from_setup: Vec<(String, String)> = Vec::new();
        for (seq, flow) in shared.work.flows.iter().enumerate() {
            let mut conn = None;
            let rows = w.rows(seq as u64);
            // Each flow once, each with its own cookie jar, as in a run.
            let jar = shared.work.cookies.then(std::cell::RefCell::default);
            // ... and its own saved values, over setup's, as in a run.
            let scope = Scope::default();
            for (name, value) in &from_setup {
                scope.save(name, value.clone());
            }
            let scripted = w.flow(seq as u64, &rows, &scope);
            for (i, step) in flow.steps.iter().enumerate() {
                let key = Key { stage: 0, step: step.index };
                let before: HashMap<String, String> =
                    step.step.save.iter().filter_map(|(n, _)| Some((n.clone(), scope.get(n, globals)?))).collect();
                if let Some(t) = &w.trace {
                    *t.borrow_mut() = Wire::default();
                }
                let start = Instant::now();
                let last = i + 1 == flow.steps.len();
                let (seq, first, jar, state) = (seq as u64, i == 0, jar.as_ref(), scripted.as_ref());
                let scope = &scope;
                let req = Request {
                    step,
                    key,
                    due: Due::OnSend,
                    start,
                    seq,
                    rows: &rows,
                    last,
                    first,
                    jar,
                    flow: state,
                    scope,
                };
                let ended = w.step(&mut conn, timer.as_mut(), req).await;
                if let Some(f) = &scripted {
                    w.saved_into(f, step, scope);
                }
                let took = ended.at.saturating_duration_since(start);
                let secrets = shared.work.secrets(scope.saved().as_deref(), jar.map(|j| j.borrow()).as_deref());
                let failure = ended.failed.then(|| {
                    let sample = w.samples.borrow_mut().take().into_iter().find(|((s, _), _)| *s == step.index);
                    match sample {
                        Some(((_, kind), s)) => (kind, s.check),
                        None => (w.rec.borrow_mut().first_failure(key).unwrap_or(FailureKind::CheckFailed), None),
                    }
                });
                let _ = w.samples.borrow_mut().take();
                let mut saved: Vec<(String, String)> = step
                    .step
                    .save
                    .iter()
                    .filter_map(|(name, _)| {
                        let now = scope.get(name, globals)?;
                        (before.get(name) != Some(&now) || !ended.failed).then(|| {
                            let shown = if credential_name(name) {
                                REDACTED.to_string()
                            } else {
                                printable::escape(&redact_values(&now, &secrets)).into_owned()
                            };
                            (name.clone(), shown)
                        })
                    })
                    .collect();
                saved.sort();
                let (request, response) = match w.trace.as_ref().map(|t| std::mem::take(&mut *t.borrow_mut())) {
                    Some(wire) if !wire.request.is_empty() => {
                        let response = (!wire.response_head.is_empty())
                            .then(|| shown(&wire.response_head, &wire.response_body, &secrets, false));
                        (Some(shown_request(&wire.request, &secrets)), response)
                    }
                    _ => (None, None),
                };
                on(DebugExchange {
                    flow: flow.name.clone(),
                    step: step.step.name.clone(),
                    request,
                    response,
                    failure,
                    saved,
                    took,
                });
                if ended.failed {
                    break;
                }
                if !step.step.pause.is_zero() {
                    tokio::time::sleep(step.step.pause).await;
                }
            }
            if setup && seq == 0 {
                from_setup = scope.saved().iter().flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone()))).collect();
            }
        }
        Ok(())
    })
}

/// A request's wire bytes as `--debug` shows them: its head, then its body.
fn shown_request(wire: &[u8], secrets: &[String]) -> String {
    let split = wire.windows(4).position(|w| w == b"\r\n\r\n").map_or(wire.len(), |i| i + 4);
    shown(&wire[..split], &wire[split..], secrets, true)
}

/// A head and a body as `--debug` shows them: a `request`'s header fields
/// redacted by the scenario's rule for headers (any value that is not
/// harmless: what was sent is the rendered value), a response's when their
/// name looks like a credential (`Set-Cookie`); the request or status line
/// by the rule for text; then the first [`BODY_SHOWN`] bytes of the body
/// with every known secret and credential-like pair redacted (before the
/// cut), control characters escaped but for line breaks.
pub(crate) fn shown(head: &[u8], body: &[u8], secrets: &[String], request: bool) -> String {
    let head = String::from_utf8_lossy(head);
    let mut out = String::new();
    for (i, line) in head.split("\r\n").filter(|l| !l.is_empty()).enumerate() {
        let line = match line.split_once(':') {
            _ if i == 0 => redact_values(line, secrets).into_owned(),
            _ if request => redact_header_line(line),
            Some((name, _)) if credential_name(name) => format!("{name}: {REDACTED}"),
            _ => line.to_string(),
        };
        out.push_str(&printable::escape(&redact_values(&line, secrets)));
        out.push('\n');
    }
    if !body.is_empty() {
        let window = String::from_utf8_lossy(&body[..body.len().min(4 * BODY_SHOWN)]);
        let redacted = redact_values(&window, secrets);
        let mut cut: String = redacted
            .chars()
            .scan(0, |n, c| {
                *n += c.len_utf8();
                (*n <= BODY_SHOWN).then_some(c)
            })
            .collect();
        if cut.len() < redacted.len() || body.len() > 4 * BODY_SHOWN {
            cut.push('…');
        }
        out.push('\n');
        out.push_str(&printable::lines(&cut));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #32: `--debug` shows a request's head with secret header values
    /// redacted (harmless ones kept), known secrets gone wherever they are,
    /// and the body's first KiB.
    #[test]
    fn an_exchange_is_shown_redacted() {
        let secrets = vec!["env-secret-99".to_string()];
        let wire = b"POST /orders?key=env-secret-99 HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer env-secret-99\r\n\
                     Content-Type: application/json\r\nCookie: sid=abc\r\n\r\n{\"qty\":\"3\",\"password\":\"hunter2\"}";
        let got = shown_request(wire, &secrets);
        assert_eq!(
            got,
            "POST /orders?key=<redacted> HTTP/1.1\nHost: shop\nAuthorization: <redacted>\n\
             Content-Type: application/json\nCookie: <redacted>\n\n{\"qty\":\"3\",\"password\":\"<redacted>\"}\n"
        );
        // A response: its harmless fields kept, a cookie set and a known secret redacted.
        let head = b"HTTP/1.1 401 Unauthorized\r\nDate: Sat\r\nSet-Cookie: sid=abc\r\nX-Echo: env-secret-99\r\n\r\n";
        assert_eq!(
            shown(head, b"", &secrets, false),
            "HTTP/1.1 401 Unauthorized\nDate: Sat\nSet-Cookie: <redacted>\nX-Echo: <redacted>\n"
        );
        // A long body: its first KiB, marked as cut.
        let long = [b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), &[b'a'; 3000]].concat();
        let got = shown_request(&long, &secrets);
        assert!(got.ends_with("a…\n") && got.len() < BODY_SHOWN + 40, "{} bytes", got.len());
    }
}
