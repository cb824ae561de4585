//! A failing exchange kept as an example of its count (#32): its step,
//! failure kind, the request line and header fields as sent, the status,
//! the check that failed (expected vs found), the response's header fields
//! and the first KiB of its body, and when it was due, sent and ended,
//! redacted, escaped and bounded here, before it leaves the worker. Which failures are kept (the first few of each step and kind) and
//! how the workers' are merged is `perfops_core::measure::samples`'s.
//!
//! Only a failure comes here, and [`Sampler::wants`] is asked first: past its
//! first few, a failure costs a short search; a success costs nothing. An
//! HTTP/1.1 request is shown from its wire bytes (the request line and
//! header fields as rendered); HTTP/2, gRPC and WebSocket requests, whose
//! fields are not kept as bytes, from the step as written (its templates
//! unrendered, so no value of a variable shows), which costs nothing per
//! request either.
//!
//! [`Sampler::wants`]: perfops_core::measure::Sampler::wants

use perfops_core::measure::{
    BODY_HEAD_BYTES, FailureKind, FailureSample, REQUEST_LINE_BYTES, Timings, bounded_fields, cut,
};
use perfops_core::printable;
use perfops_core::scenario::extract::ParsedBody;
use perfops_core::scenario::redact::{REDACTED, credential_name, redact_header_line, redact_values};
use tokio::time::Instant;

use super::{Due, Request, Worker};
use crate::work::StepPlan;

/// How much of a body is redacted before its head is cut: a secret that
/// straddles the cut is still found whole (cut first, its first half would
/// show).
const REDACT_WINDOW: usize = 4096;

/// What came back for a failed request: its status, header fields and body
/// (as captured: the body is kept for a 4xx/5xx or a step with checks).
pub(super) struct Answered<'a> {
    pub(super) status: u16,
    pub(super) pairs: &'a [(&'a str, &'a [u8])],
    pub(super) body: &'a [u8],
}

/// What went out for a failed request, and when: the HTTP/1.1 wire bytes
/// (none for another protocol, or before anything was rendered), when it
/// was due and when it was sent (none if it never was).
#[derive(Clone, Copy)]
pub(super) struct Sent<'a> {
    pub(super) wire: Option<&'a [u8]>,
    pub(super) due: Due,
    pub(super) start: Instant,
    pub(super) sent: Option<Instant>,
    /// The flow's cookie jar: its values are secrets.
    pub(super) jar: Option<&'a std::cell::RefCell<perfops_core::cookie::Jar>>,
    /// The flow instance's saved values: those of secret names are secrets.
    pub(super) scope: &'a super::scope::Scope,
    /// Whether the jar's cookies went with a request shown from its step
    /// (a WebSocket upgrade): its `Cookie` field is shown, redacted.
    pub(super) cookie: bool,
}

impl<'a> Sent<'a> {
    /// `req`'s, sent at `sent`, its wire bytes `wire`.
    pub(super) fn of(req: &Request<'a>, wire: Option<&'a [u8]>, sent: Option<Instant>) -> Sent<'a> {
        Sent { wire, due: req.due, start: req.start, sent, jar: req.jar, scope: req.scope, cookie: false }
    }

    /// This, with the jar's cookies sent (`cookie`) or not.
    pub(super) fn with_cookie(self, cookie: bool) -> Sent<'a> {
        Sent { cookie, ..self }
    }
}

impl Worker {
    /// Whether a failure of `kind` in `step` would be kept: asked before a
    /// protocol gathers what a sample needs (HTTP/1.1 parses the head again,
    /// HTTP/2 lists its fields), so that a failure past the first few costs
    /// that short search and nothing more.
    pub(super) fn wants_sample(&self, step: &StepPlan, kind: FailureKind) -> bool {
        self.samples.borrow().wants((step.index, kind))
    }

    /// Keep `step`'s failure of `kind`, ended at `at`, as a sample if its
    /// key wants one: `check`, the failed check as the checks said it;
    /// `answer`, what came back, if anything did; `sent`, what went out.
    pub(super) fn sample(
        &self,
        step: &StepPlan,
        kind: FailureKind,
        at: Instant,
        check: Option<String>,
        answer: Option<Answered<'_>>,
        sent: Sent<'_>,
    ) {
        if !self.wants_sample(step, kind) {
            return;
        }
        let key = (step.index, kind);
        let saved = sent.scope.saved();
        let secrets = self.shared.work.secrets(saved.as_deref(), sent.jar.map(|j| j.borrow()).as_deref());
        let (status, check, body, response_headers) = match answer {
            Some(a) => {
                // A status the step's `expect` did not list: say what it expected.
                let check = check.or_else(|| {
                    step.step.expect.as_ref().and_then(|e| e.check_from(a.status, a.pairs, &ParsedBody::new(a.body)))
                });
                (Some(a.status), check, body_head(a.body, &secrets), response_fields(a.pairs, &secrets))
            }
            None => (None, check, None, Vec::new()),
        };
        let check = check.map(|c| printable::escape(&redact_values(&c, &secrets)).into_owned());
        let (request, request_headers) = match sent.wire {
            Some(wire) => request_of_wire(wire, &secrets),
            None => request_of_step(step, self.shared.work.headers_of(&step.step), sent.cookie),
        };
        // To the millisecond: the sample's time places it, it measures nothing.
        let secs = |i: Instant| (i.saturating_duration_since(self.start).as_secs_f64() * 1e6).round() / 1e6;
        let ms = |d: std::time::Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        let t = (at.saturating_duration_since(self.start).as_secs_f64() * 1e3).round() / 1e3;
        let due = match sent.due {
            Due::At(due) => due,
            Due::OnSend => sent.start,
        };
        // Latency from the due time, or from the send when it went out before it (the recorder's rule).
        let from = sent.sent.map_or(due, |s| s.min(due));
        let timings = Timings {
            due: secs(due),
            sent: sent.sent.map(secs),
            latency_ms: ms(at.saturating_duration_since(from)),
            service_ms: sent.sent.map(|s| ms(at.saturating_duration_since(s))),
        };
        let sample = FailureSample {
            t,
            status,
            check,
            body,
            request,
            request_headers,
            response_headers,
            timings: Some(timings),
        };
        self.samples.borrow_mut().keep(key, sample);
    }
}

/// The request line and header fields of an HTTP/1.1 request's wire bytes:
/// the line with every known secret and credential-like query pair
/// redacted, each field's value redacted unless the header is harmless
/// (what was sent is the rendered value: `Authorization`, `Cookie`, a
/// secret variable's all go), then bounded.
fn request_of_wire(wire: &[u8], secrets: &[String]) -> (Option<String>, Vec<(String, String)>) {
    let end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(wire.len());
    let head = String::from_utf8_lossy(&wire[..end]);
    let mut lines = head.split("\r\n");
    let line = lines.next().map(|l| cut(&printable::escape(&redact_values(l, secrets)), REQUEST_LINE_BYTES));
    let fields: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let shown = redact_values(&redact_header_line(l), secrets).into_owned();
            match shown.split_once(':') {
                Some((name, value)) => (name.to_string(), value.trim_start().to_string()),
                None => (shown, String::new()),
            }
        })
        .collect();
    (line, bounded_fields(&fields))
}

/// The request line and header fields of a step as written (HTTP/2, gRPC,
/// WebSocket): its method and path, the defaults' and the step's header
/// fields, templates unrendered, values that are not harmless redacted
/// anyway (a literal token in a scenario is a secret too); with `cookie`,
/// the jar's `Cookie` field, redacted, last (where the jar puts it).
fn request_of_step<'a>(
    step: &StepPlan,
    headers: impl Iterator<Item = &'a (String, perfops_core::scenario::template::Template)>,
    cookie: bool,
) -> (Option<String>, Vec<(String, String)>) {
    let s = &step.step;
    let protocol = match (&step.grpc, &s.websocket) {
        (Some(_), _) => "HTTP/2 (gRPC)",
        (None, Some(_)) => "HTTP/1.1 (WebSocket upgrade)",
        (None, None) => "HTTP/2",
    };
    let line = format!("{} {} {protocol}", s.method, s.path.source());
    let mut fields: Vec<(String, String)> = headers
        .map(|(name, value)| {
            let shown = redact_header_line(&format!("{name}: {}", value.source()));
            match shown.split_once(':') {
                Some((n, v)) => (n.to_string(), v.trim_start().to_string()),
                None => (name.clone(), REDACTED.to_string()),
            }
        })
        .collect();
    if cookie {
        fields.push(("Cookie".to_string(), REDACTED.to_string()));
    }
    (Some(cut(&printable::escape(&line), REQUEST_LINE_BYTES)), bounded_fields(&fields))
}

/// A response's header fields as results show them: a credential-like
/// name's value (`Set-Cookie`) redacted, every known secret redacted in the
/// rest, bounded.
fn response_fields(pairs: &[(&str, &[u8])], secrets: &[String]) -> Vec<(String, String)> {
    let fields: Vec<(String, String)> = pairs
        .iter()
        .take(perfops_core::measure::MAX_HEADERS)
        .map(|(name, value)| {
            let value = if credential_name(name) {
                REDACTED.to_string()
            } else {
                let v =
                    String::from_utf8_lossy(&value[..value.len().min(4 * perfops_core::measure::HEADER_VALUE_BYTES)]);
                redact_values(&v, secrets).into_owned()
            };
            (name.to_string(), value)
        })
        .collect();
    bounded_fields(&fields)
}

/// The first [`BODY_HEAD_BYTES`] of `body` as results show it: secrets
/// redacted, control characters escaped, `…` when there was more (within
/// the bound, so that a coordinator's [`FailureSample::bounded`] finds
/// nothing to cut); none for an empty body.
pub(super) fn body_head(body: &[u8], secrets: &[String]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let window = String::from_utf8_lossy(&body[..body.len().min(REDACT_WINDOW)]);
    let redacted = redact_values(&window, secrets);
    // Escaping never shortens, so a window past the bound is always cut (and marked).
    Some(cut(&printable::escape(&redacted), BODY_HEAD_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #32: a body head is cut after redaction (a secret across the cut is
    /// still hidden), escaped, and marked when cut.
    #[test]
    fn a_body_head_is_redacted_escaped_and_cut() {
        let secrets = vec!["tok-0123456789".to_string()];
        let long = format!("{}tok-0123456789 and more", "x".repeat(BODY_HEAD_BYTES - 5));
        // (body, head)
        let cases: Vec<(Vec<u8>, Option<String>)> = vec![
            // nothing came: no head
            (b"".to_vec(), None),
            // a short JSON error, as is
            (br#"{"error":"qty must be a number"}"#.to_vec(), Some(r#"{"error":"qty must be a number"}"#.into())),
            // a control character, escaped
            (b"bad\x1b[2Jinput".to_vec(), Some("bad\\u{1b}[2Jinput".into())),
            // a secret across the cut: redacted first, then cut, never half shown
            (long.into_bytes(), Some(format!("{}<r…", "x".repeat(BODY_HEAD_BYTES - 5)))),
        ];
        for (i, (body, want)) in cases.into_iter().enumerate() {
            let got = body_head(&body, &secrets);
            assert_eq!(got, want, "case {i}");
            if let Some(g) = got {
                assert!(!g.contains("tok-01"), "case {i}: no part of the secret");
                assert!(g.len() <= BODY_HEAD_BYTES, "case {i}: within the bound, its mark too");
            }
        }
    }

    /// A failing request as a sample shows it: the request line with a
    /// secret query value gone, `Authorization`, `Cookie` and a header
    /// holding a secret variable's value redacted, harmless fields kept;
    /// the response's `Set-Cookie` redacted, a secret echoed back too.
    #[test]
    fn a_request_and_a_response_are_shown_redacted() {
        let secrets = vec!["sekrit-token-42".to_string()];
        let wire = b"GET /orders?id=7&api_key=sekrit-token-42 HTTP/1.1\r\nHost: shop\r\n\
                     Authorization: Bearer sekrit-token-42\r\nCookie: sid=abc\r\nX-Session: sekrit-token-42\r\n\
                     Accept: application/json\r\n\r\n{\"q\":1}";
        let (line, fields) = request_of_wire(wire, &secrets);
        assert_eq!(line.as_deref(), Some("GET /orders?id=7&api_key=<redacted> HTTP/1.1"));
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        // (field, as shown)
        let want = pairs(&[
            // harmless: kept
            ("Host", "shop"),
            // credentials: gone
            ("Authorization", "<redacted>"),
            ("Cookie", "<redacted>"),
            // a header holding a secret variable's value
            ("X-Session", "<redacted>"),
            ("Accept", "application/json"),
        ]);
        assert_eq!(fields, want);
        let response: [(&str, &[u8]); 3] =
            [("Content-Type", b"text/plain"), ("Set-Cookie", b"sid=xyz"), ("X-Echo", b"sekrit-token-42")];
        let want = pairs(&[("Content-Type", "text/plain"), ("Set-Cookie", "<redacted>"), ("X-Echo", "<redacted>")]);
        assert_eq!(response_fields(&response, &secrets), want);
        // A request line that forges a line is escaped; no head at all is no field.
        let (line, fields) = request_of_wire(b"GET /a\x1b[2J HTTP/1.1", &secrets);
        assert_eq!(line.as_deref(), Some("GET /a\\u{1b}[2J HTTP/1.1"));
        assert!(fields.is_empty());
    }

    /// A request HTTP/2, gRPC or WebSocket sent is shown from its step as
    /// written (no wire bytes are kept): the method, the path and the
    /// protocol, a header value that is not harmless redacted.
    #[test]
    fn a_request_of_another_protocol_is_shown_from_its_step() {
        let headers = ["Authorization: Bearer abc123".to_string(), "Accept: text/plain".to_string()];
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        // (URL, request line)
        let cases = [
            // HTTP/2 (h2c, or ALPN over https): the step's method and path
            ("h2c://127.0.0.1:1/orders?page=2", "GET /orders?page=2 HTTP/2"),
            // a WebSocket session: its upgrade's
            ("ws://127.0.0.1:1/chat", "GET /chat HTTP/1.1 (WebSocket upgrade)"),
        ];
        for (i, (url, want)) in cases.into_iter().enumerate() {
            let target = crate::target::Target::parse(url).unwrap_or_else(|e| panic!("case {i}: {e}"));
            let work = crate::work::Work::single(&target, "GET", &headers, b"").expect("a work");
            let step = &work.flows[0].steps[0];
            let (line, fields) = request_of_step(step, work.headers_of(&step.step), false);
            assert_eq!(line.as_deref(), Some(want), "case {i}");
            assert_eq!(fields, pairs(&[("Authorization", "<redacted>"), ("Accept", "text/plain")]), "case {i}");
            // The jar's cookies, when they went (a WebSocket upgrade's): shown, never their values.
            let (_, fields) = request_of_step(step, work.headers_of(&step.step), true);
            assert_eq!(fields.last(), Some(&("Cookie".to_string(), "<redacted>".to_string())), "case {i}");
        }
    }
}
