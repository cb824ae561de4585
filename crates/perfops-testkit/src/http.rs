//! The HTTP/1.1 wire format as the test servers speak it: reading request
//! heads (and discarding `Content-Length` bodies) from a keep-alive,
//! possibly pipelined byte stream, and building the canned response bytes.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::time::Instant;

use crate::Shared;

/// Largest request head accepted before the connection is dropped.
const MAX_HEAD: usize = 64 * 1024;

/// One complete request (head plus body) read from a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    /// When the bytes completing the request head were read.
    pub(crate) arrival: Instant,
    /// The client asked for the connection to be closed after the response.
    pub(crate) close: bool,
}

/// A request whose head is complete but whose body is still arriving.
struct PartialRequest {
    /// Offset in the buffer one past the request's last body byte.
    end: usize,
    request: Request,
}

/// Splits a connection's byte stream into requests.
///
/// Every read is timestamped: all request heads completed by that read get
/// its time as arrival (so pipelined requests are not stamped late) and are
/// counted in [`Shared`] at once, before any of them is answered.
pub(crate) struct RequestReader {
    buf: Vec<u8>,
    partial: Option<PartialRequest>,
    ready: VecDeque<Request>,
}

impl RequestReader {
    /// An empty reader.
    pub(crate) fn new() -> Self {
        Self { buf: Vec::with_capacity(4096), partial: None, ready: VecDeque::new() }
    }

    /// The next complete request, or `None` on EOF, I/O error, a malformed
    /// head, or once the server is stopping. Read timeouts on `conn` are
    /// expected (they are how the stop flag gets polled) and retried.
    pub(crate) fn next(&mut self, conn: &mut impl Read, shared: &Shared) -> Option<Request> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if shared.stopping() {
                return None;
            }
            if let Some(request) = self.ready.pop_front() {
                return Some(request);
            }
            match conn.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => {
                    let now = Instant::now();
                    self.buf.extend_from_slice(&chunk[..n]);
                    if !self.scan(now, shared) {
                        return None;
                    }
                }
                Err(e) if is_retryable(e.kind()) => {}
                Err(_) => return None,
            }
        }
    }

    /// Moves every complete request in the buffer to `ready`. Returns false
    /// if the stream is not acceptable HTTP.
    fn scan(&mut self, now: Instant, shared: &Shared) -> bool {
        loop {
            if self.partial.is_none() {
                // RFC 9112 §2.2: ignore empty lines before a request line.
                let blank = self.buf.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
                self.buf.drain(..blank);
                let Some(head_len) = find_head_end(&self.buf) else {
                    return self.buf.len() <= MAX_HEAD;
                };
                let Some(head) = parse_head(&self.buf[..head_len]) else {
                    return false;
                };
                shared.record_request(now, &self.buf[..head_len], head.content_length);
                self.partial = Some(PartialRequest {
                    end: head_len + head.content_length,
                    request: Request { arrival: now, close: head.close },
                });
            }
            let Some(partial) = self.partial.take_if(|p| self.buf.len() >= p.end) else {
                return true;
            };
            self.buf.drain(..partial.end);
            self.ready.push_back(partial.request);
        }
    }
}

/// Timeouts and interruptions: try the read again.
pub(crate) fn is_retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// Length of the head including its terminating blank line, if complete.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// What the servers need to know from a request head.
struct Head {
    content_length: usize,
    close: bool,
}

/// Parses the request line's version plus the `Content-Length` and
/// `Connection` headers. `None` for a head that is not HTTP/1.x.
fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?;
    let version = request_line.rsplit(' ').next()?;
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return None,
    };
    let mut content_length = 0;
    let mut close = http10;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") && http10 {
                    close = false;
                }
            }
        }
    }
    Some(Head { content_length, close })
}

/// A complete response with a `Content-Length` body.
pub(crate) fn response(code: u16, body: &[u8], close: bool) -> Vec<u8> {
    response_retry_after(code, None, body, close)
}

/// [`response`] with a `Retry-After: SECONDS` field when `retry_after` is given.
pub(crate) fn response_retry_after(code: u16, retry_after: Option<u32>, body: &[u8], close: bool) -> Vec<u8> {
    let mut out =
        format!("HTTP/1.1 {code} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n", reason(code), body.len())
            .into_bytes();
    if let Some(seconds) = retry_after {
        out.extend_from_slice(format!("Retry-After: {seconds}\r\n").as_bytes());
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// `hello world\n` in three chunks, one with a chunk extension, followed by
/// a trailer field.
pub(crate) fn chunked_response(close: bool) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n"
            .to_vec();
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(
        b"\r\n5\r\nhello\r\n6;note=\"second chunk\"\r\n world\r\n1\r\n\n\r\n0\r\nX-Checksum: 42\r\n\r\n",
    );
    out
}

/// Reason phrase for the status codes tests are likely to ask for.
fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_connection() {
        let h = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 12\r\nConnection: Close\r\n\r\n").unwrap();
        assert_eq!((h.content_length, h.close), (12, true));
        let h = parse_head(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert!(!h.close);
        assert!(parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap().close);
        assert!(parse_head(b"SSH-2.0-x\r\n\r\n").is_none());
        assert!(parse_head(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_none());
    }

    #[test]
    fn response_bytes() {
        assert_eq!(
            response(404, b"status\n", false),
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\nstatus\n"
        );
        assert_eq!(
            response_retry_after(429, Some(7), b"", true),
            b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nRetry-After: 7\r\nConnection: close\r\n\r\n"
        );
    }
}
