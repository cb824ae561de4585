//! HTTP/1.1 framing shared by both models: one request out of a byte buffer (httparse for the
//! head, `Content-Length` for the body) and one response into bytes.
//!
//! It owns no socket and no clock, so both the blocking pool and the tokio tasks call it on their
//! own buffers; it does not know the routes. Deliberately small: no chunked request bodies (a
//! `Transfer-Encoding` request is answered 400 and the connection closed, since its framing cannot
//! be followed), responses always carry `Content-Length`.

use std::fmt::Write as _;

/// The largest request head accepted; a longer one is answered 431 and closed.
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The largest request body accepted; a longer one is answered 413 and closed.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;
/// Headers httparse has room for; a request with more is malformed here.
const MAX_HEADERS: usize = 32;

/// The request methods the routes tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: routed as `GET`, answered without a body.
    Head,
    /// `POST`.
    Post,
    /// Anything else (routed to 404).
    Other,
}

/// One parsed request, owning what the routes need.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: Method,
    /// The path without its query string.
    pub(crate) path: String,
    pub(crate) authorization: Option<String>,
    pub(crate) body: Vec<u8>,
    /// Whether the client lets the connection stay open after the response.
    pub(crate) keep_alive: bool,
    /// HTTP/1.0 needs `Connection: keep-alive` spelled out in the response to stay open.
    pub(crate) http10: bool,
}

/// Why a request could not be framed; the connection is closed after the error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpError {
    /// Not HTTP/1.x, or a header we cannot frame by (bad or duplicated length, transfer coding).
    Malformed(&'static str),
    /// The head grew past [`MAX_HEAD_BYTES`] without ending.
    HeadTooLarge,
    /// `Content-Length` is larger than [`MAX_BODY_BYTES`].
    BodyTooLarge,
}

impl HttpError {
    /// The response that tells the client; it always closes the connection.
    pub(crate) fn response(self) -> Response {
        let (status, message) = match self {
            HttpError::Malformed(why) => (400, why),
            HttpError::HeadTooLarge => (431, "request head too large"),
            HttpError::BodyTooLarge => (413, "request body too large"),
        };
        let mut response = Response::json_error(status, message);
        response.close = true;
        response
    }
}

/// Parses the first request in `buf`: `Ok(None)` while more bytes are needed, otherwise the request
/// and how many bytes of `buf` it used (pipelined bytes after it stay for the next call).
pub(crate) fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let head_len = match head.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => return Err(HttpError::HeadTooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::Malformed("too many headers")),
        Err(_) => return Err(HttpError::Malformed("malformed request")),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(HttpError::HeadTooLarge);
    }
    let http10 = head.version == Some(0);
    let mut keep_alive = !http10;
    let mut content_length: Option<usize> = None;
    let mut authorization = None;
    for header in head.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(HttpError::Malformed("invalid content-length"))?;
            // Two different lengths are the classic smuggling vector: refuse rather than pick one.
            if content_length.is_some_and(|previous| previous != value) {
                return Err(HttpError::Malformed("conflicting content-length"));
            }
            content_length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::Malformed("transfer-encoding is not supported"));
        } else if name.eq_ignore_ascii_case("connection") {
            let value = String::from_utf8_lossy(header.value);
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && http10 {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(String::from_utf8_lossy(header.value).into_owned());
        }
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_BODY_BYTES {
        return Err(HttpError::BodyTooLarge);
    }
    let total = head_len + body_len;
    if buf.len() < total {
        return Ok(None);
    }
    let method = match head.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        Some("POST") => Method::Post,
        _ => Method::Other,
    };
    let target = head.path.unwrap_or("/");
    let path = target.split(['?', '#']).next().unwrap_or("/").to_owned();
    let body = buf[head_len..total].to_vec();
    Ok(Some((Request { method, path, authorization, body, keep_alive, http10 }, total)))
}

/// One response; always framed by `Content-Length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
    /// Close the connection after this response whatever the client asked.
    pub(crate) close: bool,
    /// One extra header (`WWW-Authenticate` on 401).
    pub(crate) extra_header: Option<(&'static str, &'static str)>,
}

impl Response {
    /// A response with `body` of type `content_type`.
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response { status, content_type, body: body.into(), close: false, extra_header: None }
    }

    /// A `text/plain` response.
    pub(crate) fn text(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response::new(status, "text/plain; charset=utf-8", body)
    }

    /// An `application/json` response.
    pub(crate) fn json(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response::new(status, "application/json", body)
    }

    /// `{"error":"<message>"}` with `status`.
    pub(crate) fn json_error(status: u16, message: &str) -> Response {
        let body = serde_json::json!({ "error": message }).to_string();
        Response::json(status, body)
    }

    /// Appends the response's bytes to `out`. `keep_alive` is the connection's fate as decided by
    /// the caller; `head_only` leaves the body out (a `HEAD` request) but keeps its length.
    pub(crate) fn encode(&self, keep_alive: bool, http10: bool, head_only: bool, out: &mut Vec<u8>) {
        let mut head = String::with_capacity(160);
        // Writing into a String cannot fail.
        let _ = write!(
            head,
            "HTTP/1.1 {} {}\r\nServer: perfops-demo\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        if let Some((name, value)) = self.extra_header {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        } else if http10 {
            head.push_str("Connection: keep-alive\r\n");
        }
        head.push_str("\r\n");
        out.extend_from_slice(head.as_bytes());
        if !head_only {
            out.extend_from_slice(&self.body);
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_cases() {
        // A complete GET with a query string: the path loses the query, keep-alive by default.
        let (req, used) = parse(b"GET /orders?page=2 HTTP/1.1\r\nHost: x\r\n\r\nGET").unwrap().unwrap();
        assert_eq!((req.method, req.path.as_str(), req.keep_alive, used), (Method::Get, "/orders", true, 40));
        // A head cut in the middle needs more bytes.
        assert!(parse(b"GET / HTTP/1.1\r\nHo").unwrap().is_none());
        // A body shorter than its Content-Length needs more bytes.
        assert!(parse(b"POST /auth HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}").unwrap().is_none());
        // The body is taken by Content-Length.
        let (req, _) = parse(b"POST /auth HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}").unwrap().unwrap();
        assert_eq!(req.body, b"{}");
        // Connection: close is honoured; HTTP/1.0 closes unless asked to keep alive.
        let (req, _) = parse(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap().unwrap();
        assert!(!req.keep_alive);
        let (req, _) = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!req.keep_alive && req.http10);
        let (req, _) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert!(req.keep_alive);
        // Garbage, bad lengths and transfer codings are malformed.
        assert!(matches!(parse(b"\x00\x01garbage\r\n\r\n"), Err(HttpError::Malformed(_))));
        assert!(matches!(parse(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), Err(HttpError::Malformed(_))));
        let conflicting = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
        assert!(matches!(parse(conflicting), Err(HttpError::Malformed(_))));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse(chunked), Err(HttpError::Malformed(_))));
        // An endless head is refused once it passes the limit.
        let mut long = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(parse(&long).unwrap_err(), HttpError::HeadTooLarge);
    }

    #[test]
    fn encoding() {
        let mut out = Vec::new();
        Response::text(200, "ok").encode(false, false, false, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Content-Length: 2\r\n") && text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nok"));
        let mut out = Vec::new();
        Response::text(200, "ok").encode(true, false, true, &mut out);
        assert!(out.ends_with(b"Content-Length: 2\r\n\r\n"));
    }
}
