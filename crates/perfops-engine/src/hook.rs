//! A request as a request hook sees it, and back: the HTTP/1.1 bytes the
//! step's templates rendered, read into method, path, headers and body
//! ([`parts`]), and the hook's result written again as the bytes that are
//! sent ([`write`]) and that HTTP/2 converts as it converts any rendering.
//!
//! Why through the rendered bytes rather than beside the renderer: the
//! hook must sign exactly what goes on the wire (the path as encoded, the
//! headers `defaults:` added, the body as rendered), and the renderer is
//! the one place that decides those. It costs a step that names a hook
//! only, and little of that: reading the rendered request back and writing
//! it again were a few thousand instructions per signed request at most
//! under callgrind (bench/script-callgrind.sh), of the ~52,000 the hook
//! cost whole (65,000 before perfops-script's crossing was cut); the rest
//! is the crossing into JavaScript and the script itself (perfops-script).
//!
//! What a hook returns is not trusted (issue #31's rule): a method that is
//! not a token, a path with a space or a control byte, a header name that
//! is not a token or a value with CR, LF or NUL is refused with a message
//! that names the field, and nothing is sent. The path is sent as the hook
//! wrote it, not encoded again: a signature over it must stay true.
//! `Content-Length` is the body's own, whatever the hook says.

use std::io::Write as _;

use perfops_core::scenario::template::head::{first_refused, is_token};
use perfops_script::RequestParts;

/// The rendered HTTP/1.1 request `bytes` as a hook's request. `None` when
/// they do not parse (the renderer's output always does).
pub(crate) fn parts(bytes: &[u8]) -> Option<RequestParts> {
    let mut headers = [httparse::EMPTY_HEADER; crate::http1::MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = req.parse(bytes).ok()? else { return None };
    let headers = req
        .headers
        .iter()
        // Its own length is written back from the body the hook returns.
        .filter(|h| !h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
        .collect();
    Some(RequestParts {
        method: req.method?.to_string(),
        path: req.path?.to_string(),
        headers,
        body: bytes[head_len..].to_vec(),
    })
}

/// Write `r` as an HTTP/1.1 request into `out` (cleared first). `Err`: what
/// in it cannot be sent, by field.
pub(crate) fn write(r: &RequestParts, out: &mut Vec<u8>) -> Result<(), String> {
    if !is_token(r.method.as_bytes()) {
        return Err(format!("the request hook's method `{}` is not a method", r.method.escape_debug()));
    }
    if !r.path.starts_with('/') || r.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "the request hook's path `{}` cannot be sent: it must start with `/` and hold no space or control character",
            r.path.escape_debug()
        ));
    }
    out.clear();
    out.extend_from_slice(r.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &r.headers {
        if name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        if !is_token(name.as_bytes()) {
            return Err(format!("the request hook's header name `{}` is not a token", name.escape_debug()));
        }
        if first_refused(value.as_bytes()).is_some() {
            return Err(format!("the request hook's header `{name}` holds CR, LF or NUL"));
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let wants_length = !r.body.is_empty() || matches!(r.method.as_str(), "POST" | "PUT" | "PATCH");
    if wants_length {
        // Into `out`, not through a `String` of its own.
        let _ = write!(out, "Content-Length: {}\r\n", r.body.len());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&r.body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> RequestParts {
        RequestParts {
            method: method.into(),
            path: path.into(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// Rendered bytes read and written back are the same bytes.
    #[test]
    fn a_request_goes_round_and_comes_back_the_same() {
        let bytes = b"POST /orders?x=%20 HTTP/1.1\r\nHost: h:1\r\nX-A: b\r\nContent-Length: 2\r\n\r\n{}";
        let p = parts(bytes).expect("parses");
        assert_eq!(p, req("POST", "/orders?x=%20", &[("Host", "h:1"), ("X-A", "b")], "{}"));
        let mut out = Vec::new();
        write(&p, &mut out).expect("writes");
        assert_eq!(out, bytes);
    }

    /// What a hook may and may not return, a case each.
    #[test]
    fn what_a_hook_returns_is_checked_before_it_is_sent() {
        let cases: &[(RequestParts, Result<&str, &str>)] = &[
            // A signature added, the body changed: its length follows the body, not the hook's header.
            (
                req("PUT", "/a", &[("X-Sig", "abc"), ("Content-Length", "99")], "xyz"),
                Ok("PUT /a HTTP/1.1\r\nX-Sig: abc\r\nContent-Length: 3\r\n\r\nxyz"),
            ),
            // A GET without a body has no length.
            (req("GET", "/", &[], ""), Ok("GET / HTTP/1.1\r\n\r\n")),
            // A header value that would end the head and start another header.
            (req("GET", "/", &[("X", "a\r\nEvil: 1")], ""), Err("holds CR, LF or NUL")),
            // A header name that is not a token.
            (req("GET", "/", &[("X Y", "1")], ""), Err("is not a token")),
            // A path with a space would end the request line.
            (req("GET", "/a b", &[], ""), Err("no space or control character")),
            // A path that is not origin-form.
            (req("GET", "http://elsewhere/", &[], ""), Err("must start with `/`")),
            // A method with a space.
            (req("GE T", "/", &[], ""), Err("is not a method")),
        ];
        for (r, want) in cases {
            let mut out = Vec::new();
            match (write(r, &mut out), want) {
                (Ok(()), Ok(bytes)) => assert_eq!(String::from_utf8_lossy(&out), *bytes, "{r:?}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{r:?}: {e}"),
                (got, want) => panic!("{r:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
