//! The live page's HTTP/1.1 server: one thread that polls every connection
//! (non-blocking sockets), as `perfops_engine::exporter` does and for its
//! reasons (a slow or silent client delays nobody; no thread or stack per
//! connection), with the same guards: a request-head limit, a deadline for
//! each exchange, a bound on connections held.
//!
//! ```text
//!   GET  /          the page (meta, planned stages, empty charts, live.js)
//!   GET  /events    Server-Sent Events: the log from Last-Event-ID on, then each new one
//!   GET  /report    the final report, once the results writer made it
//!   POST /control   `stop`, `hold`, `next`, `rate N` -> the run's Steer (a thread of its own)
//! ```
//!
//! Event streams are not buffered per client: each has a cursor into the
//! shared log (`super::log`) and is written as its socket takes it. A page
//! that stops reading is dropped after [`STALLED`] without progress,
//! rather than anything kept for it. New events are seen within
//! [`POLL_MS`]: the collector thread only appends to the log and never
//! touches a socket.
//!
//! Who may ask is decided here (`Gate`): off loopback, every route needs
//! the token (`Authorization: Bearer`, or `?token=` on GET: an
//! `EventSource` cannot set a header, and the page's first load comes from
//! the printed address); compared in constant time. On loopback without a
//! token, a request from a web page of another origin (`Origin` set and not
//! this server's) and a `Host` that is not a loopback name (DNS
//! rebinding) are refused: any site open in the same browser could
//! otherwise stop the run.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};
use perfops_core::pipeline::control::{Action, ControlEvent, MAX_ACTION_BYTES};
use perfops_engine::exporter::loopback_host;

use super::Shared;

/// A request head larger than this is refused.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request (and its body).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How long a plain answer (the page, the report: a few MB) may take to go.
const ANSWER_DEADLINE: Duration = Duration::from_secs(60);
/// An event stream that took nothing for this long, while it had events
/// to take, is closed: its page stopped reading.
pub const STALLED: Duration = Duration::from_secs(10);
/// A comment on an idle event stream, so that a gone peer is noticed and
/// proxies keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Connections held at once (20 browsers hold one stream each).
pub const MAX_CONNECTIONS: usize = 128;
/// Actions being taken at once; more are answered 503.
const MAX_ACTING: usize = 2;
/// How often the loop looks at the log, the stop flag and the deadlines.
pub const POLL_MS: u16 = 50;

/// Where a connection is.
enum State {
    /// Reading the request.
    Head,
    /// An action is being taken on another thread; its answer lands here.
    Acting(Arc<Mutex<Option<Vec<u8>>>>),
    /// Writing a plain answer, then closing.
    Answer { out: Vec<u8>, sent: usize },
    /// An event stream: the next event id to send, and what is being sent.
    Stream { next: u64, out: Arc<[u8]>, sent: usize, progress: Instant },
}

struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    state: State,
}

/// Serve until `shared.stop`.
pub(super) fn serve(listener: &TcpListener, shared: &Shared) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut conns: VecDeque<Conn> = VecDeque::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        conns.retain(|c| match &c.state {
            State::Head => now.duration_since(c.since) < REQUEST_DEADLINE,
            State::Answer { .. } => now.duration_since(c.since) < ANSWER_DEADLINE,
            State::Acting(_) => true,
            State::Stream { progress, .. } => now.duration_since(*progress) < STALLED,
        });
        // Streams with something to send are filled before polling, so
        // that the poll waits on their sockets' room.
        let over = {
            let log = shared.log.lock().unwrap_or_else(PoisonError::into_inner);
            for c in &mut conns {
                if let State::Stream { next, out, sent, progress } = &mut c.state
                    && *sent == out.len()
                {
                    if let Some(e) = log.from(*next) {
                        (*next, *out, *sent) = (e.id + 1, e.wire.clone(), 0);
                    } else if now.duration_since(*progress) > KEEPALIVE {
                        (*out, *sent, *progress) = (Arc::from(&b": keepalive\n\n"[..]), 0, now);
                    }
                }
            }
            log.over
        };
        let streams = conns.iter().filter(|c| matches!(c.state, State::Stream { .. })).count();
        shared.streams.store(streams, Ordering::Relaxed);
        let ready: Vec<bool> = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
            for c in &conns {
                let wants = match &c.state {
                    State::Head => PollFlags::POLLIN,
                    State::Acting(_) => PollFlags::empty(),
                    State::Answer { .. } => PollFlags::POLLOUT,
                    State::Stream { out, sent, .. } if *sent < out.len() => PollFlags::POLLOUT,
                    // Nothing to send: readable means the peer closed.
                    State::Stream { .. } => PollFlags::POLLIN,
                };
                fds.push(PollFd::new(c.stream.as_fd(), wants));
            }
            match poll(&mut fds, POLL_MS) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return,
            }
            fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect()
        };
        let mut i = 0;
        conns.retain_mut(|c| {
            i += 1;
            let acting_done = matches!(&c.state, State::Acting(slot) if slot.lock().unwrap_or_else(PoisonError::into_inner).is_some());
            !(ready[i] || acting_done) || step(c, shared, over)
        });
        if ready[0] {
            accept(listener, &mut conns);
        }
    }
}

/// Take every waiting connection; beyond [`MAX_CONNECTIONS`], close the
/// oldest that is still sending its request (a flood of silent sockets),
/// else the oldest event stream (a browser's `EventSource` comes back by
/// itself, with `Last-Event-ID`), else refuse the new one. Before, 128
/// streams held open by any local process locked every page out (attacker
/// review).
fn accept(listener: &TcpListener, conns: &mut VecDeque<Conn>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= MAX_CONNECTIONS {
                    let head = conns.iter().position(|c| matches!(c.state, State::Head));
                    match head.or_else(|| conns.iter().position(|c| matches!(c.state, State::Stream { .. }))) {
                        Some(i) => drop(conns.remove(i)),
                        None => continue,
                    }
                }
                conns.push_back(Conn { stream, since: Instant::now(), head: Vec::new(), state: State::Head });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                std::thread::sleep(Duration::from_millis(u64::from(POLL_MS) / 5));
                return;
            }
        }
    }
}

/// Move a connection on as far as its socket allows; `false`: close it.
fn step(c: &mut Conn, shared: &Shared, over: bool) -> bool {
    match &mut c.state {
        State::Head => {
            let mut buf = [0u8; 2048];
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => c.head.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => return true,
                Err(_) => return false,
            }
            let Some(end) = c.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                if c.head.len() > MAX_HEAD_BYTES {
                    c.state = answer(431, "text/plain", b"request head too large\n");
                }
                return true;
            };
            // A head past the limit is refused even when it came whole in one read.
            if end > MAX_HEAD_BYTES {
                c.state = answer(431, "text/plain", b"request head too large\n");
                return true;
            }
            let request = match Request::parse(&c.head[..end]) {
                Ok(r) => r,
                Err(why) => {
                    c.state = answer(400, "text/plain", why.as_bytes());
                    return true;
                }
            };
            let body = &c.head[end + 4..];
            if request.method == "POST" && body.len() < request.length {
                if request.length > MAX_ACTION_BYTES {
                    c.state = answer(
                        400,
                        "text/plain",
                        format!("an action is at most {MAX_ACTION_BYTES} bytes\n").as_bytes(),
                    );
                }
                // The rest of the body is still coming.
                return true;
            }
            let body = body[..request.length.min(body.len())].to_vec();
            c.state = route(&request, &body, shared);
            step(c, shared, over)
        }
        State::Acting(slot) => {
            let answered = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            match answered {
                Some(out) => {
                    c.state = State::Answer { out, sent: 0 };
                    step(c, shared, over)
                }
                None => true,
            }
        }
        State::Answer { out, sent } => loop {
            match c.stream.write(&out[*sent..]) {
                Ok(0) => return false,
                Ok(n) => {
                    *sent += n;
                    if *sent == out.len() {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        },
        State::Stream { next, out, sent, progress } => {
            if *sent == out.len() {
                // Nothing to send and the socket is readable: the page left
                // (or sent bytes we never asked for).
                let mut buf = [0u8; 256];
                return matches!(c.stream.read(&mut buf),
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted));
            }
            loop {
                match c.stream.write(&out[*sent..]) {
                    Ok(0) => return false,
                    Ok(n) => {
                        *sent += n;
                        *progress = Instant::now();
                        if *sent < out.len() {
                            continue;
                        }
                        // The whole log is sent and no more will come: done.
                        let log = shared.log.lock().unwrap_or_else(PoisonError::into_inner);
                        match log.from(*next) {
                            Some(e) => (*next, *out, *sent) = (e.id + 1, e.wire.clone(), 0),
                            None => return !(over || log.over),
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
        }
    }
}

/// A request head, as far as this server reads it.
#[derive(Debug, Default)]
pub(super) struct Request {
    method: String,
    path: String,
    query_token: Option<String>,
    bearer: Option<String>,
    last_event_id: Option<u64>,
    length: usize,
    by: Option<String>,
    origin: Option<String>,
    host: Option<String>,
}

impl Request {
    /// Parse the head (without its blank line); an error is said as a 400.
    pub(super) fn parse(head: &[u8]) -> Result<Request, String> {
        let head = std::str::from_utf8(head).map_err(|_| "a request head is text\n".to_string())?;
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or("");
        let mut parts = line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if method.is_empty() || !target.starts_with('/') {
            return Err("not an HTTP request\n".into());
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut r = Request { method: method.to_string(), path: path.to_string(), ..Request::default() };
        r.query_token = query.split('&').find_map(|kv| kv.strip_prefix("token=")).map(percent_decode);
        for l in lines {
            let Some((name, value)) = l.split_once(':') else { continue };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "authorization" => r.bearer = value.strip_prefix("Bearer ").map(|t| t.trim().to_string()),
                "last-event-id" => r.last_event_id = value.parse().ok(),
                "content-length" => r.length = value.parse().map_err(|_| "a bad Content-Length\n".to_string())?,
                "x-perfops-by" => r.by = Some(value.to_string()),
                "origin" => r.origin = Some(value.to_string()),
                "host" => r.host = Some(value.to_string()),
                _ => {}
            }
        }
        Ok(r)
    }
}

/// `%XX` and `+` in a query value (a token is hex, but a user's own may not be).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Equal in time that does not depend on where they differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Who may ask: `None`, go on; `Some(answer)`, refused.
fn gate(r: &Request, shared: &Shared) -> Option<State> {
    match &shared.token {
        Some(token) => {
            let given = r.bearer.as_deref().or(if r.method == "GET" { r.query_token.as_deref() } else { None });
            match given {
                Some(g) if same(g, token) => None,
                _ => Some(answer(401, "text/plain", b"this live page needs its token: the address perfops printed, or Authorization: Bearer (PERFOPS_LIVE_TOKEN)\n")),
            }
        }
        None => {
            if r.host.as_deref().is_some_and(|h| !loopback_host(h)) {
                return Some(answer(403, "text/plain", b"this live page answers loopback names only\n"));
            }
            let own = |o: &str| o.strip_prefix("http://").is_some_and(|rest| r.host.as_deref() == Some(rest));
            if r.origin.as_deref().is_some_and(|o| !own(o)) {
                return Some(answer(403, "text/plain", b"not from another site's page\n"));
            }
            None
        }
    }
}

fn route(r: &Request, body: &[u8], shared: &Shared) -> State {
    if let Some(refused) = gate(r, shared) {
        return refused;
    }
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/") => match shared.page.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            Some(page) => answer(200, "text/html; charset=utf-8", page.as_bytes()),
            None => answer(503, "text/plain", b"the run has not started yet: reload in a moment\n"),
        },
        ("GET", "/events") => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
                        X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\nretry: 1000\n\n";
            State::Stream {
                next: r.last_event_id.map_or(1, |id| id.saturating_add(1)),
                out: Arc::from(head.as_bytes()),
                sent: 0,
                progress: Instant::now(),
            }
        }
        ("GET", "/report") => match shared.report.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            Some(page) => {
                shared.taken.fetch_add(1, Ordering::Relaxed);
                answer(200, "text/html; charset=utf-8", page.as_bytes())
            }
            None => {
                answer(404, "text/plain", b"no report yet: it is served once the run is over and its results written\n")
            }
        },
        ("POST", "/control") => control(r, body, shared),
        (_, "/" | "/events" | "/report") => answer(405, "text/plain", b"GET\n"),
        (_, "/control") => answer(405, "text/plain", b"POST\n"),
        _ => answer(404, "text/plain", b"perfops live serves GET /, /events, /report and POST /control\n"),
    }
}

/// `POST /control`: parsed here, taken by the run's steering on a thread
/// of its own (a fleet's action waits for an instant every agent agrees
/// on: the event streams must not wait with it).
fn control(r: &Request, body: &[u8], shared: &Shared) -> State {
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(_) => return answer(400, "text/plain", b"an action is text: stop, hold, next or rate N\n"),
    };
    let action = match Action::parse(text) {
        Ok(a) => a,
        Err(why) => return answer(400, "text/plain", format!("{why}\n").as_bytes()),
    };
    let Some(steer) = shared.steer.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
        return answer(409, "text/plain", b"this run takes no control\n");
    };
    if shared.acting.fetch_add(1, Ordering::AcqRel) >= MAX_ACTING {
        shared.acting.fetch_sub(1, Ordering::AcqRel);
        return answer(503, "text/plain", b"another action is being taken: try again\n");
    }
    let by = ControlEvent::who(r.by.as_deref().unwrap_or("http"));
    let slot = Arc::new(Mutex::new(None));
    let (out, acting) = (slot.clone(), shared.acting.clone());
    let spawned = std::thread::Builder::new().name("perfops-live-act".into()).spawn(move || {
        let answered = match steer.act(action, &by) {
            Ok(event) => respond(200, "application/json", serde_json::to_string(&event).unwrap_or_default().as_bytes()),
            Err(why) => respond(409, "text/plain", format!("{}\n", why.trim_end()).as_bytes()),
        };
        acting.fetch_sub(1, Ordering::AcqRel);
        *out.lock().unwrap_or_else(PoisonError::into_inner) = Some(answered);
    });
    match spawned {
        Ok(_) => State::Acting(slot),
        Err(_) => {
            shared.acting.fetch_sub(1, Ordering::AcqRel);
            answer(503, "text/plain", b"cannot take an action now\n")
        }
    }
}

fn answer(status: u16, content_type: &str, body: &[u8]) -> State {
    State::Answer { out: respond(status, content_type, body), sent: 0 }
}

fn respond(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let auth = if status == 401 { "WWW-Authenticate: Bearer\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\n{auth}Connection: close\r\n\r\n",
        body.len()
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a request head says, as far as the routes need it.
    #[test]
    fn a_request_head_parses() {
        // (head, path, token in the query, bearer token, Last-Event-ID)
        type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, Option<u64>);
        let cases: &[Case<'_>] = &[
            // The event stream resumed, its token in the query (EventSource sets no headers).
            ("GET /events?token=a%2Bb HTTP/1.1\r\nLast-Event-ID: 41", "/events", Some("a+b"), None, Some(41)),
            // A control request with its bearer token; header names in any case.
            (
                "POST /control HTTP/1.1\r\nauthorization: Bearer s3cret\r\nContent-Length: 4",
                "/control",
                None,
                Some("s3cret"),
                None,
            ),
            // A Last-Event-ID that is not a number is none.
            ("GET / HTTP/1.1\r\nLast-Event-ID: x", "/", None, None, None),
        ];
        for (head, path, query, bearer, last) in cases {
            let r = Request::parse(head.as_bytes()).expect(head);
            assert_eq!(
                (r.path.as_str(), r.query_token.as_deref(), r.bearer.as_deref(), r.last_event_id),
                (*path, *query, *bearer, *last),
                "{head}"
            );
        }
        // Not HTTP, and a Content-Length that is not a number: refused.
        assert!(Request::parse(b"hello").is_err());
        assert!(Request::parse(b"POST /control HTTP/1.1\r\nContent-Length: -1").is_err());
    }

    /// Host names this server answers without a token.
    #[test]
    fn loopback_hosts() {
        for (host, ok) in [
            ("127.0.0.1:5665", true),
            ("localhost:5666", true),
            ("[::1]:5665", true),
            ("127.0.0.1", true),
            // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
            ("evil.example:5665", false),
            ("10.0.0.1:5665", false),
        ] {
            assert_eq!(loopback_host(host), ok, "{host}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
