//! Issue #12, point 3: property tests of what reads the target's bytes on the
//! hot path: the response head parse ([`parse_head`] and its [`HeadCache`]),
//! the body framing rules ([`Fields`]) and the chunked decoder
//! ([`ChunkedDecoder`]), and the whole of [`Conn::exchange`] over a real
//! loopback socket, the server writing the response in generated pieces.
//!
//! Two properties, whatever the bytes and wherever they are split:
//! - nothing panics or hangs, and what does not parse is a classified
//!   failure (`Protocol`, or `Reset` when the server closed mid-response);
//! - a response the test generates (status, version, `Connection`,
//!   Content-Length / chunked / until-close bodies, extensions, trailers,
//!   a `100 Continue` first, HEAD requests, 204 and 304) parses to what was
//!   generated: status, framing, keep-alive, the body byte for byte, and
//!   every byte counted. The expectations are computed from the generator's
//!   choices, not by the code under test.
//!
//! Cases are few (hundreds for the pure parts, dozens over sockets) so that
//! the suite stays in seconds; the corpus of `tests/corpus/http1/` (inputs
//! worth keeping, named by what they must give) is replayed by
//! `corpus_responses_are_classified`.

use std::time::Duration;

use perfops_core::measure::FailureKind;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Conn, Head, HeadCache, Stream, parse_head};
use crate::chunked::ChunkedDecoder;
use crate::framing::Framing;

/// A response as generated, with what it must parse to.
#[derive(Debug, Clone)]
struct Generated {
    bytes: Vec<u8>,
    head_len: usize,
    head_request: bool,
    status: u16,
    framing: Framing,
    keep_alive: bool,
    body: Vec<u8>,
}

/// How the body is delimited, as the generator chose.
#[derive(Debug, Clone)]
enum Body {
    Length,
    /// Chunk sizes (cut points of the body), upper-case hex, extensions, a trailer.
    Chunked {
        cuts: Vec<prop::sample::Index>,
        upper: bool,
        ext: bool,
        trailer: bool,
        bare_lf: bool,
    },
    UntilClose,
}

fn body_kind() -> impl Strategy<Value = Body> {
    prop_oneof![
        Just(Body::Length),
        (
            prop::collection::vec(any::<prop::sample::Index>(), 0..5),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(cuts, upper, ext, trailer, bare_lf)| Body::Chunked {
                cuts,
                upper,
                ext,
                trailer,
                bare_lf
            }),
        Just(Body::UntilClose),
    ]
}

prop_compose! {
    fn generated()(
        http11 in any::<bool>(),
        status in prop::sample::select(vec![200u16, 201, 204, 301, 304, 404, 429, 500, 503]),
        head_request in prop::bool::weighted(0.15),
        body in prop::collection::vec(any::<u8>(), 0..400),
        kind in body_kind(),
        connection in prop::sample::select(vec![None, Some("close"), Some("keep-alive"), Some("Keep-Alive, Upgrade")]),
        continue_first in prop::bool::weighted(0.2),
        extra in prop::collection::vec(
            (prop::sample::select(vec!["Server", "Date", "X-Request-Id", "Cache-Control", "Set-Cookie", "Vary"]),
             "[ -~]{0,24}"),
            0..6),
    ) -> Generated {
        let mut h = Vec::new();
        if continue_first {
            h.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        h.extend_from_slice(format!("HTTP/1.{} {status} Whatever\r\n", u8::from(http11)).as_bytes());
        for (name, value) in &extra {
            h.extend_from_slice(format!("{name}: {}\r\n", value.trim()).as_bytes());
        }
        if let Some(c) = connection {
            h.extend_from_slice(format!("Connection: {c}\r\n").as_bytes());
        }
        match &kind {
            Body::Length => h.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes()),
            Body::Chunked { .. } => h.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            Body::UntilClose => {}
        }
        h.extend_from_slice(b"\r\n");
        let head_len = h.len();
        let no_body = head_request || status == 204 || status == 304;
        let framing = match (&kind, no_body) {
            (_, true) => Framing::None,
            (Body::Length, _) => Framing::Length(body.len() as u64),
            (Body::Chunked { .. }, _) => Framing::Chunked,
            (Body::UntilClose, _) => Framing::UntilClose,
        };
        let mut bytes = h;
        match (&kind, no_body) {
            (_, true) => {}
            (Body::Length | Body::UntilClose, _) => bytes.extend_from_slice(&body),
            (Body::Chunked { cuts, upper, ext, trailer, bare_lf }, _) => {
                bytes.extend_from_slice(&chunked(&body, cuts, *upper, *ext, *trailer, *bare_lf));
            }
        }
        let closes = match connection {
            Some(c) => c.to_ascii_lowercase().split(',').any(|t| t.trim() == "close"),
            None => false,
        };
        let keeps = connection.is_some_and(|c| c.to_ascii_lowercase().split(',').any(|t| t.trim() == "keep-alive"));
        let keep_alive = if http11 { !closes } else { keeps && !closes } && framing != Framing::UntilClose;
        let body = if framing == Framing::None { Vec::new() } else { body };
        Generated { bytes, head_len, head_request, status, framing, keep_alive, body }
    }
}

/// `body` in chunks cut at `cuts`, then the last chunk and the end.
fn chunked(body: &[u8], cuts: &[prop::sample::Index], upper: bool, ext: bool, trailer: bool, bare_lf: bool) -> Vec<u8> {
    let eol: &[u8] = if bare_lf { b"\n" } else { b"\r\n" };
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
    at.push(0);
    at.push(body.len());
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    for w in at.windows(2) {
        let part = &body[w[0]..w[1]];
        let size = if upper { format!("{:X}", part.len()) } else { format!("{:x}", part.len()) };
        out.extend_from_slice(size.as_bytes());
        if ext {
            out.extend_from_slice(b";name=\"va;lue\"");
        }
        out.extend_from_slice(eol);
        out.extend_from_slice(part);
        out.extend_from_slice(eol);
    }
    out.extend_from_slice(b"0");
    out.extend_from_slice(eol);
    if trailer {
        out.extend_from_slice(b"X-Checksum: 1234");
        out.extend_from_slice(eol);
    }
    out.extend_from_slice(eol);
    out
}

/// Pieces of `bytes`, cut at `cuts`.
fn pieces<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

/// What [`Conn::exchange`] made of `pieces`, written one by one (a pause
/// between them, so each tends to arrive in its own read) by a loopback
/// server that then closes; at most 5 s (a hang fails the test).
fn exchange_over_loopback(
    pieces: Vec<Vec<u8>>,
    head_request: bool,
) -> (Result<super::Response, super::ExchangeError>, Vec<u8>, bool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut req = [0u8; 256];
            let _ = s.read(&mut req).await;
            for p in pieces {
                if s.write_all(&p).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_micros(300)).await;
            }
            let _ = s.shutdown().await;
            // Hold the socket until the client is done: a close now could
            // reset what the client has not read yet.
            let _ = s.read(&mut req).await;
        });
        let tcp = TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut conn = Conn::new(Stream::Tcp(tcp));
        let request: &[u8] =
            if head_request { b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n" } else { b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" };
        let out = tokio::time::timeout(Duration::from_secs(5), conn.exchange(request, head_request, true, None))
            .await
            .expect("exchange hung (5 s)");
        let keep = conn.keep_alive;
        let body = std::mem::take(&mut conn.body);
        drop(conn);
        let _ = server.await;
        (out, body, keep)
    })
}

fn classified(e: &super::ExchangeError) -> bool {
    matches!(e.kind, FailureKind::Protocol | FailureKind::Reset)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any bytes, any head request flag: the head parse answers (never
    /// panics), and once a prefix is a complete head every longer prefix is
    /// the same head; the per-connection cache answers what a fresh parse does.
    #[test]
    fn any_bytes_parse_or_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..300), head in any::<bool>()) {
        let mut cache = HeadCache::default();
        let mut complete: Option<Head> = None;
        for k in 0..=bytes.len() {
            let fresh = parse_head(&bytes[..k], head).ok();
            prop_assert_eq!(cache.parse(&bytes[..k], head).ok(), fresh, "cache vs fresh at {}", k);
            if let Some(c) = complete {
                prop_assert_eq!(fresh, Some(c), "a complete head changed at {}", k);
            } else if let Some(h @ (Head::Complete { .. } | Head::Informational(_))) = fresh {
                complete = Some(h);
            }
        }
    }

    /// A generated response: every strict prefix of its head is partial (or,
    /// past a `100 Continue`, that informational response), the whole head
    /// parses to the generated status, framing and keep-alive; a chunked body
    /// fed in any pieces decodes to the generated body and ends exactly at
    /// its last byte.
    #[test]
    fn generated_heads_and_bodies_parse_to_what_was_generated(
        g in generated(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut start = 0;
        loop {
            let parsed = parse_head(&g.bytes[start..], g.head_request);
            let len = match parsed {
                Ok(Head::Informational(len) | Head::Complete { len, .. }) => len,
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            };
            let this = &g.bytes[start..start + len];
            for k in 0..len {
                match parse_head(&this[..k], g.head_request) {
                    Ok(Head::Partial) => {}
                    other => prop_assert!(false, "prefix {} of {:?}: {:?}", k, String::from_utf8_lossy(this), other),
                }
            }
            if let Ok(Head::Complete { status, framing, keep_alive, .. }) = parsed {
                prop_assert_eq!((start + len, status, framing, keep_alive), (g.head_len, g.status, g.framing, g.keep_alive));
                break;
            }
            start += len;
        }
        if g.framing == Framing::Chunked {
            let encoded = &g.bytes[g.head_len..];
            // The next response's bytes follow: the decoder must stop before them.
            let mut stream = encoded.to_vec();
            stream.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            let (mut d, mut body, mut used, mut done) = (ChunkedDecoder::new(), Vec::new(), 0, false);
            for p in pieces(&stream, &cuts) {
                if done {
                    break;
                }
                let (n, end) = d.feed_into(p, &mut body).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                prop_assert!(end || n == p.len(), "an unfinished body consumes all it is given");
                used += n;
                done = end;
            }
            prop_assert!(done);
            prop_assert_eq!(used, encoded.len());
            prop_assert_eq!(body, g.body);
        }
    }

    /// Any bytes split anywhere: the chunked decoder never panics, and the
    /// pieces say what the whole says (refused, or done after the same bytes).
    #[test]
    fn chunked_any_bytes_any_split(
        bytes in prop::collection::vec(prop::sample::select(b"0123456789abcdefABCDEFxz;= \r\n\t".to_vec()), 0..120),
        noise in prop::collection::vec(any::<u8>(), 0..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut bytes = bytes;
        bytes.extend_from_slice(&noise);
        let whole = ChunkedDecoder::new().feed(&bytes);
        let mut d = ChunkedDecoder::new();
        let mut split: Result<(usize, bool), ()> = Ok((0, false));
        for p in pieces(&bytes, &cuts) {
            let Ok((used, false)) = split else { break };
            split = d.feed(p).map(|(n, done)| (used + n, done)).map_err(|_| ());
        }
        match whole {
            Err(_) => prop_assert!(split.is_err()),
            Ok((n, true)) => prop_assert_eq!(split, Ok((n, true))),
            Ok((n, false)) => prop_assert_eq!(split, Ok((n, false))),
        }
    }
}

proptest! {
    // A socket pair per case: fewer cases, each bounded by the 5 s timeout.
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// A generated response written in generated pieces over loopback reads
    /// back as generated: status, every byte counted, the body, keep-alive.
    #[test]
    fn generated_responses_read_over_loopback(
        g in generated(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let parts: Vec<Vec<u8>> = pieces(&g.bytes, &cuts).into_iter().map(<[u8]>::to_vec).collect();
        let (out, body, keep) = exchange_over_loopback(parts, g.head_request);
        let r = out.map_err(|e| TestCaseError::fail(format!("{e:?} for {:?}", String::from_utf8_lossy(&g.bytes))))?;
        prop_assert_eq!(r.status, g.status);
        prop_assert_eq!(r.bytes_in, g.bytes.len() as u64);
        prop_assert_eq!(body, g.body);
        prop_assert_eq!(keep, g.keep_alive);
    }

    /// Any bytes in any pieces, then a close: an answer or a classified
    /// failure, within the bound.
    #[test]
    fn any_bytes_over_loopback_are_classified(
        prefix in prop::sample::select(vec![&b""[..], b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                                            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\n"]),
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        head in any::<bool>(),
    ) {
        let mut all = prefix.to_vec();
        all.extend_from_slice(&bytes);
        let parts: Vec<Vec<u8>> = pieces(&all, &cuts).into_iter().map(<[u8]>::to_vec).collect();
        let (out, _, _) = exchange_over_loopback(parts, head);
        if let Err(e) = &out {
            prop_assert!(classified(e), "{:?}", e);
        }
    }
}

/// The corpus (`crates/perfops-engine/tests/corpus/http1/*.bin`): responses
/// worth keeping, each written over loopback in pieces of 1, 7 and all bytes;
/// each is an answer or a classified failure, never a panic or a hang, and
/// the same answer whatever the pieces.
#[test]
fn corpus_responses_are_classified() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/http1");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "corpus in {}", dir.display());
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let head = name.starts_with("head-");
        let mut seen = Vec::new();
        for size in [1, 7, bytes.len().max(1)] {
            let parts: Vec<Vec<u8>> = bytes.chunks(size).map(<[u8]>::to_vec).collect();
            let (out, body, _) = exchange_over_loopback(parts, head);
            let said = match &out {
                // Not bytes_in nor keep-alive: bytes past the response (a server
                // that sends more than asked) count, and forbid reuse, only when
                // they came in the same read.
                Ok(r) => format!("ok {} body {}", r.status, body.len()),
                Err(e) => {
                    assert!(classified(e), "{name}: {e:?}");
                    format!("{:?}", e.kind)
                }
            };
            seen.push(said);
        }
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "{name}: the answer depends on the pieces: {seen:?}");
        // `NAME--ok_200.bin`: an answer with status 200; `NAME--Protocol.bin`: that failure.
        let want = name.split("--").nth(1).unwrap_or("").trim_end_matches(".bin").replace('_', " ");
        assert!(seen[0].starts_with(&want), "{name}: {} (the name says {want})", seen[0]);
    }
}

/// #12: a huge body with `save`/`expect` is read whole and counted, but only
/// its first `CAPTURE_MAX` bytes are kept, whatever its framing: an endless or
/// 10 GB body must not grow a connection's memory until the timeout.
#[test]
fn a_captured_body_is_capped_in_every_framing() {
    let size = 3 * super::CAPTURE_MAX;
    let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let pieces = |head: &str, body: Vec<u8>| {
        let mut out = vec![head.as_bytes().to_vec()];
        out.extend(body.chunks(256 * 1024).map(<[u8]>::to_vec));
        out
    };
    let mut chunked = Vec::new();
    for c in body.chunks(100_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        chunked.extend_from_slice(c);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let cases = [
        ("length", pieces(&format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n"), body.clone())),
        ("chunked", pieces("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunked)),
        ("until close", pieces("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", body.clone())),
    ];
    for (name, pieces) in cases {
        let sent: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let (out, kept, _) = exchange_over_loopback(pieces, false);
        let response = out.unwrap_or_else(|e| panic!("{name}: {:?}", e.kind));
        assert_eq!(response.bytes_in, sent, "{name}: every byte read and counted");
        assert_eq!(kept.len(), super::CAPTURE_MAX, "{name}");
        assert_eq!(kept[..], body[..super::CAPTURE_MAX], "{name}: the body's first bytes");
    }
}
