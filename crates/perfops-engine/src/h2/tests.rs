//! The connection (`conn.rs`) against a real HTTP/2 server (the `h2`
//! crate's, in process over a pipe: its encoder indexes every field, splits
//! large blocks into CONTINUATIONs and holds our request bodies to its
//! 64 KiB windows), and against a hostile peer that sends what RFC 9113
//! forbids, byte by byte: each such frame must fail the connection's
//! streams as its failure kind, never panic or hang.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use perfops_core::measure::FailureKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::answer::{Answer, StreamError};
use super::conn::{Block, Conn, Windows};
use super::encoder::Fields;
use super::frame::{self, kind};
use super::hpack;
use super::stamped::{H2Io, Transport};

const LARGE: Windows = Windows { stream: (1 << 30) - 1, connection: (1 << 30) - 1 };

/// A request's header block, as `http2.rs` makes one.
fn block(method: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in [(":method", method), (":scheme", "http"), (":authority", "test"), (":path", path)] {
        hpack::encode_field(&mut out, n.as_bytes(), v.as_bytes());
    }
    out
}

/// A connection on `io`, its task running, the server's SETTINGS in.
async fn connect<T: Transport + 'static>(io: T, windows: Windows) -> Result<Rc<Conn>, FailureKind> {
    let conn = Rc::new(Conn::new(windows));
    let task = conn.clone();
    tokio::task::spawn_local(async move { task.drive(io).await });
    std::future::poll_fn(|cx| conn.poll_ready(cx)).await?;
    Ok(conn)
}

async fn answer(conn: &Conn, method: &str, path: &str, body: &[u8], capture: bool) -> Result<Answer, StreamError> {
    let id = conn.open(Block::Raw(&block(method, path)), &Bytes::copy_from_slice(body), capture.then_some(1 << 20))?;
    let got = tokio::time::timeout(Duration::from_secs(10), std::future::poll_fn(|cx| conn.poll_answer(id, cx))).await;
    got.expect("an answer within 10 s")
}

fn local<F: std::future::Future<Output = ()>>(f: F) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(tokio::task::LocalSet::new().run_until(f));
}

/// The `h2` crate's server: `/trailers` answers with a body and gRPC
/// trailers, `/headers` with 60 fields of 400 bytes (a 24 KB block:
/// CONTINUATIONs; its encoder indexes them, so a second answer is mostly
/// references into the dynamic table), `/echo` with the request body's
/// length and a 200 KiB body, `/fields` with `x-seen`: the request's
/// authority and header fields as the server decoded them, `/sse` with five
/// Server-Sent Events 20 ms apart (a DATA frame each), `/flood` with 2 MiB
/// of `text/plain` lines at once, `/refuse` with RST_STREAM(REFUSED_STREAM).
fn h2_server(io: DuplexStream) {
    h2_server_with_table(io, None)
}

/// [`h2_server`] whose SETTINGS_HEADER_TABLE_SIZE is `table` (`None`: the
/// default, unsaid).
fn h2_server_with_table(io: DuplexStream, table: Option<u32>) {
    tokio::task::spawn_local(async move {
        let mut builder = h2::server::Builder::new();
        if let Some(t) = table {
            builder.header_table_size(t);
        }
        let mut srv = builder.handshake(io).await.expect("server handshake");
        while let Some(Ok((req, mut respond))) = srv.accept().await {
            tokio::task::spawn_local(async move {
                let path = req.uri().path().to_string();
                let mut seen = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
                for (n, v) in req.headers() {
                    seen.push_str(&format!(";{n}={}", String::from_utf8_lossy(v.as_bytes())));
                }
                let mut body = req.into_body();
                let mut got = 0usize;
                while let Some(Ok(chunk)) = body.data().await {
                    got += chunk.len();
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                match path.as_str() {
                    "/trailers" => {
                        let mut send = respond.send_response(http::Response::new(()), false).expect("headers");
                        send.send_data(Bytes::from_static(b"hello"), false).expect("data");
                        let mut t = http::HeaderMap::new();
                        t.insert("grpc-status", http::HeaderValue::from_static("3"));
                        t.insert("grpc-message", http::HeaderValue::from_static("bad"));
                        send.send_trailers(t).expect("trailers");
                    }
                    "/headers" => {
                        let mut r = http::Response::builder().status(203);
                        for i in 0..60 {
                            r = r.header(format!("x-h{i}"), "v".repeat(400));
                        }
                        let _ = respond.send_response(r.body(()).expect("response"), true);
                    }
                    "/fields" => {
                        let r = http::Response::builder().header("x-seen", seen).body(()).expect("response");
                        let _ = respond.send_response(r, true);
                    }
                    "/sse" => {
                        let r = http::Response::builder().header("content-type", "text/event-stream").body(());
                        let mut send = respond.send_response(r.expect("response"), false).expect("headers");
                        for i in 0..5 {
                            if i > 0 {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            let _ = send.send_data(Bytes::from(format!("data: tick {i}\n\n")), i == 4);
                        }
                    }
                    "/flood" => {
                        let r = http::Response::builder().header("content-type", "text/plain").body(());
                        let mut send = respond.send_response(r.expect("response"), false).expect("headers");
                        for i in 0..2048 {
                            let _ = send.send_data(Bytes::from_static(FLOOD_LINE), i == 2047);
                        }
                    }
                    "/echo" => {
                        let r = http::Response::builder().header("x-got", got.to_string()).body(()).expect("response");
                        let mut send = respond.send_response(r, false).expect("headers");
                        send.send_data(Bytes::from(vec![b'x'; 200 * 1024]), true).expect("data");
                    }
                    _ => respond.send_reset(h2::Reason::REFUSED_STREAM),
                }
            });
        }
    });
}

/// One line of `/flood`: 1 KiB with its LF.
const FLOOD_LINE: &[u8; 1024] = &{
    let mut line = [b'x'; 1024];
    line[1023] = b'\n';
    line
};

/// A streamed answer ([`Conn::flow`]) is handed to its request as its DATA
/// frames come, each run dated by the read that brought it, with the mode
/// its `content-type` says: five events a server sends 20 ms apart arrive
/// apart, in order, none after the answer's end. A server that streams
/// faster than the request takes the bytes costs a bounded buffer: past
/// `PENDING_MAX` the connection reads no more until they are taken, then
/// every byte comes, in order.
#[test]
fn a_streamed_answer_comes_as_its_frames_come() {
    use crate::stream::Mode;
    local(async {
        let (client, server) = tokio::io::duplex(64 * 1024);
        h2_server(server);
        let conn = connect(client, LARGE).await.expect("handshake");
        let id = conn.open(Block::Raw(&block("GET", "/sse")), &Bytes::new(), None).expect("open");
        conn.flow(id);
        let mut runs: Vec<(Mode, Vec<u8>, tokio::time::Instant)> = Vec::new();
        let a = std::future::poll_fn(|cx| {
            conn.poll_streamed(id, cx, &mut |mode, bytes, at| runs.push((mode, bytes.to_vec(), at)))
        })
        .await
        .expect("an answer");
        assert_eq!(a.status, 200);
        assert!(runs.iter().all(|(mode, _, _)| *mode == Mode::Sse), "text/event-stream: SSE");
        let all: Vec<u8> = runs.iter().flat_map(|(_, b, _)| b.iter().copied()).collect();
        let want: String = (0..5).map(|i| format!("data: tick {i}\n\n")).collect();
        assert_eq!(String::from_utf8_lossy(&all), want, "every byte, in order");
        // Four gaps of 20 ms between the first event's read and the last's
        // (each a read of its own: read whole at the end, they would share one instant).
        let (first, last) = (runs[0].2, runs[runs.len() - 1].2);
        assert!(last - first >= Duration::from_millis(60), "the events' reads {:?} apart", last - first);
        assert!(runs.windows(2).all(|w| w[0].2 <= w[1].2) && last <= a.last_byte && first >= a.first_byte);

        let id = conn.open(Block::Raw(&block("GET", "/flood")), &Bytes::new(), None).expect("open");
        conn.flow(id);
        // The request does not take its bytes for a while: the connection stops.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = conn.pending();
        assert!(held > 0 && held <= 96 * 1024, "{held} bytes held for the request");
        let mut got = Vec::new();
        let a = std::future::poll_fn(|cx| {
            conn.poll_streamed(id, cx, &mut |mode, bytes, _| {
                assert_eq!(mode, Mode::Lines, "text/plain: lines");
                got.extend_from_slice(bytes);
            })
        })
        .await
        .expect("the flood's answer");
        assert_eq!((a.status, got.len()), (200, 2048 * 1024));
        assert!(got.chunks(1024).all(|c| c == FLOOD_LINE), "in order, whole");
        assert_eq!(conn.pending(), 0, "nothing left behind");
    });
}

/// Trailers, CONTINUATION, the dynamic table, flow control both ways and a
/// refused stream, against a server we did not write.
#[test]
fn a_real_server_is_understood() {
    local(async {
        for windows in [LARGE, Windows { stream: 65_535, connection: 65_535 }] {
            let (client, server) = tokio::io::duplex(64 * 1024);
            h2_server(server);
            let conn = connect(client, windows).await.expect("handshake");
            // body then trailers: grpc-status from the trailers, both captured
            let a = answer(&conn, "POST", "/trailers", b"", true).await.expect("trailers");
            assert_eq!((a.status, a.grpc_status), (200, Some(3)));
            let c = a.captured.expect("captured");
            assert_eq!(c.body, b"hello");
            assert!(c.trailers.iter().any(|(n, v)| n == "grpc-message" && v == b"bad"), "{:?}", c.trailers);
            // a block in CONTINUATIONs, twice: the second from the dynamic table
            for round in 0..2 {
                let a = answer(&conn, "GET", "/headers", b"", true).await.expect("headers");
                assert_eq!(a.status, 203, "round {round}");
                let c = a.captured.expect("captured");
                assert_eq!(c.headers.len(), 60, "round {round}");
                assert!(c.headers.iter().all(|(_, v)| v.len() == 400), "round {round}");
                assert!(a.bytes_in > 24_000, "round {round}: counted as decoded");
            }
            // 300 KiB up (the server's windows are 64 KiB), 200 KiB down
            let a = answer(&conn, "POST", "/echo", &vec![b'u'; 300 * 1024], true).await.expect("echo");
            let c = a.captured.expect("captured");
            assert!(c.headers.iter().any(|(n, v)| n == "x-got" && v == b"307200"), "{:?}", c.headers);
            assert_eq!(c.body.len(), 200 * 1024);
            // many streams at once on the same connection
            let ids: Vec<u32> = (0..20)
                .map(|_| conn.open(Block::Raw(&block("GET", "/trailers")), &Bytes::new(), None).expect("open"))
                .collect();
            for id in ids {
                let a = std::future::poll_fn(|cx| conn.poll_answer(id, cx)).await.expect("answer");
                assert_eq!(a.grpc_status, Some(3));
            }
            // refused: its own kind, and the connection carries on
            let e = answer(&conn, "GET", "/refuse", b"", false).await.expect_err("refused");
            assert_eq!(e.kind, FailureKind::RefusedStream);
            assert!(answer(&conn, "GET", "/headers", b"", false).await.is_ok());
        }
    });
}

/// Our requests' blocks indexed in the server's table, against a decoder
/// we did not write (the `h2` crate's fails the connection on a reference
/// to an entry it does not have): its default table, a table too small for
/// every field, and none; literal requests (their block kept) and rendered
/// ones (a field that varies) in turn, 50 at a time on one connection.
#[test]
fn indexed_blocks_are_decoded_whatever_the_servers_table() {
    local(async {
        // (the server's SETTINGS_HEADER_TABLE_SIZE)
        for table in [None, Some(80), Some(0)] {
            let (client, server) = tokio::io::duplex(64 * 1024);
            h2_server_with_table(server, table);
            let conn = connect(client, LARGE).await.expect("handshake");
            let fields = |seq: Option<usize>| {
                let mut f = Fields::default();
                for (n, v) in [(":method", "GET"), (":scheme", "http"), (":authority", "test:1"), (":path", "/fields")]
                {
                    f.push(n.as_bytes(), v.as_bytes(), true);
                }
                f.push(b"user-agent", b"perfops-test", true);
                f.push(b"x-long", "v".repeat(40).as_bytes(), true);
                if let Some(seq) = seq {
                    f.push(b"x-seq", seq.to_string().as_bytes(), false);
                }
                f
            };
            let (literal, other) = (fields(None), {
                let mut f = fields(None);
                f.push(b"x-other", b"1", true);
                f
            });
            let want = format!("test:1;user-agent=perfops-test;x-long={}", "v".repeat(40));
            for round in 0..4 {
                let rendered: Vec<Fields> = (0..50).map(|i| fields(Some(round * 50 + i))).collect();
                let ids: Vec<(u32, String)> = (0..50)
                    .map(|i| {
                        let (block, seen) = match i % 3 {
                            0 => (Block::Fields(&literal, 7), want.clone()),
                            1 => (Block::Fields(&other, 8), format!("{want};x-other=1")),
                            _ => (Block::Fields(&rendered[i], 0), format!("{want};x-seq={}", round * 50 + i)),
                        };
                        (conn.open(block, &Bytes::new(), Some(1 << 20)).expect("open"), seen)
                    })
                    .collect();
                for (id, want) in ids {
                    let a = std::future::poll_fn(|cx| conn.poll_answer(id, cx)).await;
                    let a = a.unwrap_or_else(|e| panic!("table {table:?} round {round}: {e:?}"));
                    let c = a.captured.expect("captured");
                    let seen =
                        c.headers.iter().find(|(n, _)| n == "x-seen").map(|(_, v)| v.clone()).unwrap_or_default();
                    assert_eq!(String::from_utf8_lossy(&seen), want, "table {table:?} round {round}");
                }
            }
        }
    });
}

/// #14: on an open-model worker's plain TCP the kernel dates each read
/// (`stamped.rs`): an answer that waited 100 ms in the socket while the
/// worker's thread was busy is dated when it arrived, not when it was
/// read; unstamped (TLS, a closed loop) it is dated by the read. Either
/// way no byte is dated before its request was handed over.
#[test]
fn a_stamped_connection_dates_answers_by_their_arrival() {
    use std::io::{Read, Write};
    local(async {
        // (stamped?)
        for stamp in [true, false] {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let (heard_tx, heard) = std::sync::mpsc::channel();
            // A minimal HTTP/2 server of our own, on a thread: SETTINGS, then
            // once our HEADERS are in, 5 ms later, a 200 that ends the stream.
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().expect("accept");
                let mut settings = Vec::new();
                frame::put_settings(&mut settings, &[]);
                s.write_all(&settings).expect("settings");
                let mut seen = Vec::new();
                let mut buf = vec![0u8; 4096];
                while !seen.windows(6).any(|w| w == [kind::HEADERS, 0x5, 0, 0, 0, 1]) {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = heard_tx.send(());
                std::thread::sleep(Duration::from_millis(5));
                let mut answer = Vec::new();
                frame::put_headers(&mut answer, 1, &[0x88], true, frame::DEFAULT_MAX_FRAME);
                s.write_all(&answer).expect("answer");
            });
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let io = H2Io::new(crate::http1::Stream::Tcp(tcp), stamp);
            assert_eq!(matches!(io, H2Io::Stamped(_)), stamp, "SO_TIMESTAMPNS refused");
            let conn = connect(io, LARGE).await.expect("handshake");
            let opened = tokio::time::Instant::now();
            let id = conn.open(Block::Raw(&block("GET", "/")), &Bytes::new(), None).expect("open");
            // Let the connection task write the request; once the server has
            // it, keep this thread (the worker) busy for 100 ms.
            let heard_at = loop {
                tokio::task::yield_now().await;
                if heard.recv_timeout(Duration::from_millis(50)).is_ok() {
                    break tokio::time::Instant::now();
                }
            };
            std::thread::sleep(Duration::from_millis(100));
            let a = std::future::poll_fn(|cx| conn.poll_answer(id, cx)).await.expect("answer");
            let dated = a.last_byte.saturating_duration_since(heard_at);
            assert!(a.first_byte >= opened && a.last_byte >= a.first_byte, "stamped {stamp}: dated before its send");
            if stamp {
                assert!(dated < Duration::from_millis(60), "stamped: dated by its arrival (~5 ms), got {dated:?}");
            } else {
                assert!(dated >= Duration::from_millis(100), "unstamped: dated by the read, got {dated:?}");
            }
            conn.release();
            let _ = server.join();
        }
    });
}

/// When a frame read ends its stream: the read's date, never before the
/// stream's request was handed over.
#[test]
fn an_answer_is_never_dated_before_its_request() {
    let opened = tokio::time::Instant::now();
    let ms = Duration::from_millis;
    // (the read's date, when the answer is dated)
    let cases = [
        // a read after the send: its date
        (Some(opened + ms(3)), opened + ms(3)),
        // a kernel date converted between clocks to before the send: the send
        (Some(opened - ms(1)), opened),
        // not dated yet: now, read once for the whole turn (not before the send)
        (None, opened),
    ];
    // a connection not dated by the kernel reads no clock at open: the read's date as it is
    assert_eq!(super::conn::at(&mut Some(opened - ms(1)), None), opened - ms(1));
    for (i, (read, want)) in cases.into_iter().enumerate() {
        let mut now = read;
        let got = super::conn::at(&mut now, Some(opened));
        if read.is_some() {
            assert_eq!(got, want, "case {i}");
        } else {
            assert!(got >= want && now == Some(got), "case {i}: {got:?}");
        }
    }
}

/// A hostile peer: its SETTINGS, then, once our request is in, `bytes`
/// (none: it closes the socket).
async fn hostile(bytes: Vec<u8>) -> (Result<Answer, StreamError>, bool) {
    peer(bytes, false).await
}

/// [`hostile`], closing its socket after `bytes` if `close`.
async fn peer(bytes: Vec<u8>, close: bool) -> (Result<Answer, StreamError>, bool) {
    let (client, mut server) = tokio::io::duplex(64 * 1024);
    tokio::task::spawn_local(async move {
        let mut settings = Vec::new();
        frame::put_settings(&mut settings, &[]);
        let _ = server.write_all(&settings).await;
        // the preface, our SETTINGS and our request's HEADERS (stream 1, END_STREAM | END_HEADERS)
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 4096];
        while !seen.windows(6).any(|w| w == [kind::HEADERS, 0x5, 0, 0, 0, 1]) {
            match server.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        if bytes.is_empty() {
            return; // the socket closes
        }
        let _ = server.write_all(&bytes).await;
        if close {
            return;
        }
        // drain until the client closes
        while let Ok(n) = server.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    });
    let conn = connect(client, LARGE).await.expect("handshake");
    let got = answer(&conn, "GET", "/", b"", false).await;
    (got, conn.accepting())
}

fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

/// What a server must not send, and the failure our stream 1 sees
/// (`accepting`: whether the connection stays up for other streams).
#[test]
fn a_hostile_server_fails_streams_as_their_kind() {
    use frame::flag::*;
    let long = {
        let mut out = Vec::new();
        frame::put_head(&mut out, 20_000, kind::DATA, 0, 1);
        out.extend(std::iter::repeat_n(0, 20_000));
        out
    };
    let cases: Vec<(&str, Vec<u8>, FailureKind, bool)> = vec![
        // an HPACK index of no entry
        ("bad HPACK", raw(kind::HEADERS, END_HEADERS, 1, &[0xbe]), FailureKind::Protocol, false),
        // a table size update above our 4096
        ("size update", raw(kind::HEADERS, END_HEADERS, 1, &[0x3f, 0xe2, 0x1f, 0x88]), FailureKind::Protocol, false),
        // DATA on a stream we never opened
        ("idle stream", raw(kind::DATA, END_STREAM, 3, b"x"), FailureKind::Protocol, false),
        // a frame above our SETTINGS_MAX_FRAME_SIZE
        ("frame size", long, FailureKind::Protocol, false),
        // the connection's send window past 2^31-1
        (
            "window overflow",
            raw(kind::WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
            FailureKind::Protocol,
            false,
        ),
        // CONTINUATION with no HEADERS before it
        ("lone CONTINUATION", raw(kind::CONTINUATION, END_HEADERS, 1, &[0x88]), FailureKind::Protocol, false),
        // a header block interrupted by another frame
        (
            "interrupted block",
            [raw(kind::HEADERS, 0, 1, &[0x88]), raw(kind::PING, 0, 0, &[0; 8])].concat(),
            FailureKind::Protocol,
            false,
        ),
        // a push with push disabled
        ("push", raw(kind::PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x88]), FailureKind::Protocol, false),
        // SETTINGS_MAX_FRAME_SIZE below 16384
        ("max frame", raw(kind::SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 100]), FailureKind::Protocol, false),
        // DATA before the headers
        ("data first", raw(kind::DATA, END_STREAM, 1, b"x"), FailureKind::Protocol, true),
        // trailers without END_STREAM
        (
            "open trailers",
            [raw(kind::HEADERS, END_HEADERS, 1, &[0x88]), raw(kind::HEADERS, END_HEADERS, 1, &[0x88])].concat(),
            FailureKind::Protocol,
            true,
        ),
        // a refused stream: the connection stays
        ("refused", raw(kind::RST_STREAM, 0, 1, &7u32.to_be_bytes()), FailureKind::RefusedStream, true),
        // any other reset
        ("reset", raw(kind::RST_STREAM, 0, 1, &2u32.to_be_bytes()), FailureKind::ResetStream, true),
        // GOAWAY below our stream: not processed, may go again
        ("goaway", raw(kind::GOAWAY, 0, 0, &[0; 8]), FailureKind::GoAway, false),
        // the socket closed under the stream
        ("eof", Vec::new(), FailureKind::Reset, false),
    ];
    local(async {
        for (name, bytes, want, up) in cases {
            let (got, accepting) = hostile(bytes).await;
            let e = got.expect_err(name);
            assert_eq!(e.kind, want, "{name}");
            assert_eq!(e.again, want == FailureKind::GoAway, "{name}");
            assert_eq!(accepting, up, "{name}");
        }
    });
}

/// A server that floods PINGs or SETTINGS and reads nothing (CVE-2019-9512,
/// -9515) costs a bounded buffer: the connection stops reading while its
/// acknowledgements wait past 64 KiB, and its request times out. Before,
/// it read on and queued an acknowledgement of every frame (a real
/// server's flood took one request's connection to 1.4 GB in 2 s).
#[test]
fn a_flood_of_pings_or_settings_costs_a_bounded_buffer() {
    // (what is flooded, one frame of it)
    let cases =
        [("PING", raw(kind::PING, 0, 0, b"12345678")), ("SETTINGS", raw(kind::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]))];
    local(async {
        for (name, one) in cases {
            let (client, mut server) = tokio::io::duplex(64 * 1024);
            tokio::task::spawn_local(async move {
                let mut settings = Vec::new();
                frame::put_settings(&mut settings, &[]);
                let _ = server.write_all(&settings).await;
                let mut buf = vec![0u8; 4096];
                let _ = server.read(&mut buf).await;
                // 8 MiB of frames, never reading again: their acknowledgements
                // would be 8 MiB too.
                let burst = one.repeat(64 * 1024 / one.len());
                for _ in 0..128 {
                    if server.write_all(&burst).await.is_err() {
                        return;
                    }
                }
                std::future::pending::<()>().await;
            });
            let conn = connect(client, LARGE).await.expect("handshake");
            let id = conn.open(Block::Raw(&block("GET", "/")), &Bytes::new(), None).expect("a stream");
            let answer = std::future::poll_fn(|cx| conn.poll_answer(id, cx));
            let waited = tokio::time::timeout(Duration::from_millis(300), answer).await;
            assert!(waited.is_err(), "{name}: no answer comes");
            // What waits to go: the duplex's 64 KiB are full, the rest is ours.
            let unwritten = conn.unwritten();
            assert!(unwritten < 96 * 1024, "{name}: {unwritten} bytes queued");
            conn.cancel(id);
            conn.release();
        }
    });
}

/// A valid response to stream 1 (status 200, one DATA ending it), to mix
/// into arbitrary bytes.
fn fine_answer() -> Vec<u8> {
    [raw(kind::HEADERS, frame::flag::END_HEADERS, 1, &[0x88]), raw(kind::DATA, frame::flag::END_STREAM, 1, b"ok")]
        .concat()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Whatever a server sends after its SETTINGS (random frames of random
    /// types, flags and payloads, or plain noise) before it closes the
    /// socket, the stream ends, as an answer or a failure, and nothing
    /// panics.
    #[test]
    fn arbitrary_server_bytes_end_the_stream_without_panic(
        frames in proptest::collection::vec(
            (0u8..12, proptest::prelude::any::<u8>(), 0u32..6, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)),
            0..8,
        ),
        noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        answer_last in proptest::prelude::any::<bool>(),
    ) {
        let mut bytes: Vec<u8> = frames.iter().flat_map(|(k, f, s, p)| raw(*k, *f, *s, p)).collect();
        bytes.extend_from_slice(&noise);
        if answer_last {
            bytes.extend_from_slice(&fine_answer());
        }
        if bytes.is_empty() {
            bytes = fine_answer();
        }
        local(async move {
            // ends: an answer, or a failure of a known kind (EOF at worst)
            let _ = peer(bytes, true).await;
        });
    }
}
