//! HTTP/1.1 response body framing (RFC 9112 §6.3): from a response's status
//! and header fields, where its body ends, and whether the connection may
//! carry another request.
//!
//! One set of rules for both clients of the engine: the load's hot path
//! ([`http1`](crate::http1), async, keep-alive) and the watcher's probes and
//! scrapes (`watch::fetch`, blocking, one request per connection). They read
//! their bodies differently, but a response both of them receive must end at
//! the same byte for both: two copies of these rules had already drifted on a
//! malformed `Content-Length`. It does not read bytes, decode chunks
//! ([`chunked`](crate::chunked)) or parse heads (`httparse`, done by each
//! caller in its own way: the hot path without allocating, the fetch into
//! owned fields).
//!
//! Hot path: the fields are seen one by one as the caller walks its parsed
//! head (no collection), and only after a head that the per-connection cache
//! has not seen before ([`http1`](crate::http1)'s `HeadCache`).

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body whatever the headers say (HEAD, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`, up to its last chunk and trailers.
    Chunked,
    /// Up to the close of the connection.
    UntilClose,
}

/// A header field that makes the framing impossible to trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FramingError {
    /// A `Content-Length` that is not a non-negative integer.
    #[error("bad Content-Length")]
    BadLength,
    /// Two `Content-Length` fields that differ: a request-smuggling hazard.
    #[error("conflicting Content-Length")]
    ConflictingLength,
}

/// The framing-relevant header fields of one response, seen one at a time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fields {
    length: Option<u64>,
    /// A `Transfer-Encoding` was present, and whether `chunked` is the last
    /// coding of the last one.
    transfer_encoding: bool,
    chunked: bool,
    /// `Connection: close` / `Connection: keep-alive` tokens seen.
    close: bool,
    keep_alive: bool,
    /// A `Set-Cookie` was present: the flow's cookie jar reads the head.
    pub(crate) set_cookie: bool,
}

impl Fields {
    /// Take one header field into account (any field: the others are ignored).
    #[inline]
    pub(crate) fn see(&mut self, name: &str, value: &[u8]) -> Result<(), FramingError> {
        if name.eq_ignore_ascii_case("content-length") {
            let v: u64 =
                std::str::from_utf8(value).ok().and_then(|s| s.trim().parse().ok()).ok_or(FramingError::BadLength)?;
            // Differing duplicates are a request-smuggling hazard: refuse them.
            if self.length.is_some_and(|l| l != v) {
                return Err(FramingError::ConflictingLength);
            }
            self.length = Some(v);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked must be the last coding; anything else is delimited by the close.
            self.transfer_encoding = true;
            self.chunked = value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("set-cookie") {
            self.set_cookie = true;
        }
        Ok(())
    }

    /// Where the body of a `status` response ends (to a HEAD request:
    /// `head_request`). 1xx responses have no body either, but are the
    /// caller's to skip: they are not the response.
    pub(crate) fn framing(&self, status: u16, head_request: bool) -> Framing {
        if head_request || status == 204 || status == 304 {
            Framing::None
        } else if self.transfer_encoding {
            // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3).
            if self.chunked { Framing::Chunked } else { Framing::UntilClose }
        } else if let Some(l) = self.length {
            Framing::Length(l)
        } else {
            Framing::UntilClose
        }
    }

    /// Whether the connection may carry another request after this response
    /// (HTTP/1.1: unless `close`; HTTP/1.0: only with `keep-alive`), given its
    /// `framing`: a body delimited by the close ends the connection too.
    pub(crate) fn keep_alive(&self, http11: bool, framing: Framing) -> bool {
        let keep = if http11 { !self.close } else { self.keep_alive && !self.close };
        keep && framing != Framing::UntilClose
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header fields of one test response.
    type Pairs = &'static [(&'static str, &'static str)];

    fn fields(pairs: Pairs) -> Result<Fields, FramingError> {
        let mut f = Fields::default();
        for (name, value) in pairs {
            f.see(name, value.as_bytes())?;
        }
        Ok(f)
    }

    #[test]
    fn framing_follows_rfc_9112() {
        use Framing::*;
        // (status, HEAD request?, fields, framing)
        let cases: [(u16, bool, Pairs, Framing); 10] = [
            (200, false, &[("Content-Length", "12")], Length(12)), // the usual
            (200, false, &[("content-length", " 7 ")], Length(7)), // any case, white space trimmed
            (200, false, &[("Transfer-Encoding", "gzip, chunked"), ("Content-Length", "3")], Chunked), // TE wins
            (200, false, &[("transfer-encoding", "gzip")], UntilClose), // not chunked last: read to close
            (200, false, &[("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "gzip")], UntilClose), // the last TE counts
            (200, false, &[], UntilClose),                  // no framing: read to close
            (204, false, &[("Content-Length", "5")], None), // never a body
            (304, false, &[("Transfer-Encoding", "chunked")], None), // nor here
            (200, true, &[("Content-Length", "5")], None),  // a HEAD's answer has none
            (200, false, &[("Content-Length", "4"), ("Content-Length", "4")], Length(4)), // repeated, same
        ];
        for (i, (status, head, pairs, want)) in cases.into_iter().enumerate() {
            assert_eq!(fields(pairs).map(|f| f.framing(status, head)), Ok(want), "case {i}: {status} {pairs:?}");
        }
        // Refused whatever else the head says (a Transfer-Encoding included).
        let bad: [(Pairs, FramingError); 4] = [
            (&[("Content-Length", "4"), ("Content-Length", "5")], FramingError::ConflictingLength), // smuggling hazard
            (&[("Content-Length", "-1")], FramingError::BadLength),                                 // negative
            (&[("Content-Length", "1e3")], FramingError::BadLength),                                // not an integer
            (&[("Transfer-Encoding", "chunked"), ("Content-Length", "x")], FramingError::BadLength), // with TE too
        ];
        for (pairs, want) in bad {
            assert_eq!(fields(pairs).err(), Some(want), "{pairs:?}");
        }
    }

    #[test]
    fn keep_alive_by_version_and_framing() {
        // (HTTP/1.1?, fields, framing, keep-alive)
        let cases: [(bool, Pairs, Framing, bool); 7] = [
            (true, &[], Framing::Length(1), true), // 1.1: persistent by default
            (true, &[("Connection", "close")], Framing::Length(1), false), // unless closed
            (true, &[("Connection", "Keep-Alive, Close")], Framing::Length(1), false), // close wins among tokens
            (false, &[], Framing::Length(1), false), // 1.0: closes by default
            (false, &[("Connection", "keep-alive")], Framing::Length(1), true), // unless kept
            (true, &[], Framing::UntilClose, false), // the close ends the body
            (true, &[], Framing::None, true),      // no body: reusable
        ];
        for (i, (http11, pairs, framing, want)) in cases.into_iter().enumerate() {
            assert_eq!(fields(pairs).unwrap().keep_alive(http11, framing), want, "case {i}");
        }
    }
}
