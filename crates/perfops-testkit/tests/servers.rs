//! Each test server, checked with a plain std `TcpStream` client (and a
//! rustls client for the TLS server): the exact bytes it sends, its timing,
//! its counters, and that it stops when dropped.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfops_testkit as testkit;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const GET_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

fn connect(server: &testkit::Server) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream
}

/// Reads one response with a `Content-Length` body; returns head and body.
fn read_response(stream: &mut impl Read) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("response head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .expect("content-length");
    let mut body = vec![0; length];
    stream.read_exact(&mut body).expect("response body");
    (head, body)
}

/// Reads until the peer closes; the error (if any) ends the read.
fn read_all(stream: &mut TcpStream) -> (Vec<u8>, Option<std::io::Error>) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// Polls `cond` for up to a second.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
fn fixed_delay_is_precise_on_keep_alive() {
    let server = testkit::fixed_delay(Duration::from_millis(10));
    assert!(server.url().starts_with("http://127.0.0.1:"));
    assert_eq!(server.cert_pem(), None);
    let mut stream = connect(&server);
    let mut times = Vec::new();
    for _ in 0..20 {
        let sent = Instant::now();
        stream.write_all(GET).unwrap();
        let (head, body) = read_response(&mut stream);
        times.push(ms(sent.elapsed()));
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Content-Type: text/plain\r\n"));
        assert_eq!(body, b"ok\n");
    }
    times.sort_by(f64::total_cmp);
    let median = times[10];
    assert!((10.0..=10.5).contains(&median), "median {median} ms: {times:?}");
    assert_eq!(server.requests(), 20);
    assert_eq!(server.connections(), 1);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 20);
    assert!(arrivals.windows(2).all(|w| w[1] - w[0] >= Duration::from_millis(10)));
}

#[test]
fn pipelined_requests_with_bodies_and_client_close() {
    let server = testkit::fixed_delay(Duration::ZERO);
    let mut stream = connect(&server);
    let mut batch = Vec::new();
    batch.extend_from_slice(GET);
    batch.extend_from_slice(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello\r\n\r\nxx");
    batch.extend_from_slice(GET);
    batch.extend_from_slice(GET_CLOSE);
    stream.write_all(&batch).unwrap();
    for _ in 0..3 {
        let (head, body) = read_response(&mut stream);
        assert!(!head.contains("Connection: close"));
        assert_eq!(body, b"ok\n");
    }
    let (head, body) = read_response(&mut stream);
    assert!(head.contains("Connection: close\r\n"));
    assert_eq!(body, b"ok\n");
    let (rest, err) = read_all(&mut stream);
    assert!(rest.is_empty() && err.is_none(), "{rest:?} {err:?}");
    assert_eq!(server.requests(), 4);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 4);
    assert!(arrivals[3] - arrivals[0] < Duration::from_millis(5));
}

#[test]
fn request_body_split_across_writes() {
    let server = testkit::fixed_delay(Duration::ZERO);
    let mut stream = connect(&server);
    stream.write_all(b"POST / HTTP/1.1\r\nContent-Length: 6\r\n\r\nabc").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(server.requests(), 1); // the head counts as soon as it is read
    stream.write_all(b"def").unwrap();
    stream.write_all(GET).unwrap();
    assert_eq!(read_response(&mut stream).1, b"ok\n");
    assert_eq!(read_response(&mut stream).1, b"ok\n");
    assert_eq!(server.requests(), 2);
}

#[test]
fn freeze_once_holds_requests_until_the_window_ends() {
    let delay = Duration::from_millis(5);
    let (after, length) = (Duration::from_millis(200), Duration::from_millis(300));
    let before = Instant::now();
    let server = testkit::freeze_once(delay, after, length);
    let started = Instant::now();
    let mut stream = connect(&server);
    let time_one = |stream: &mut TcpStream| {
        let sent = Instant::now();
        stream.write_all(GET).unwrap();
        assert_eq!(read_response(stream).1, b"ok\n");
        (sent, Instant::now())
    };
    // Before the window: the normal delay.
    let (sent, done) = time_one(&mut stream);
    assert!(done - sent >= delay && done - sent < Duration::from_millis(100));
    // Inside the window: answered `delay` after it ends.
    std::thread::sleep((started + Duration::from_millis(300)).saturating_duration_since(Instant::now()));
    let (_, done) = time_one(&mut stream);
    let end = after + length + delay;
    assert!(done >= before + end, "{:?} early", (before + end) - done);
    assert!(done < started + end + Duration::from_millis(50), "{:?} late", done - (started + end));
    // After the window: normal again.
    let (sent, done) = time_one(&mut stream);
    assert!(done - sent >= delay && done - sent < Duration::from_millis(100));
    assert_eq!(server.requests(), 3);
}

#[test]
fn reset_mid_response_sends_rst_after_partial_body() {
    let server = testkit::reset_mid_response();
    let mut stream = connect(&server);
    stream.write_all(GET).unwrap();
    let (bytes, err) = read_all(&mut stream);
    assert_eq!(bytes, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
    let err = err.expect("the read must fail, not see EOF");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
}

#[test]
fn never_answers_holds_the_connection_until_drop() {
    let server = testkit::never_answers();
    let mut stream = connect(&server);
    stream.write_all(GET).unwrap();
    stream.write_all(GET).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 64];
    let err = stream.read(&mut buf).expect_err("no answer expected");
    assert!(matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
    assert!(eventually(|| server.requests() == 2));
    // Half-closing does not make it answer or close either.
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let err = stream.read(&mut buf).expect_err("still no answer, no EOF");
    assert!(matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
    let dropped = Instant::now();
    drop(server);
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let (bytes, _) = read_all(&mut stream);
    assert!(bytes.is_empty());
    assert!(dropped.elapsed() < Duration::from_millis(500), "{:?}", dropped.elapsed());
}

#[test]
fn garbage_answers_with_non_http_and_closes() {
    let server = testkit::garbage();
    let mut stream = connect(&server);
    stream.write_all(GET).unwrap();
    let (bytes, err) = read_all(&mut stream);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(bytes, b"SSH-2.0-OpenSSH_9.2\r\ngarbage\r\n\r\n");
}

#[test]
fn chunked_body_with_extension_and_trailer() {
    let server = testkit::chunked();
    let mut stream = connect(&server);
    let expected: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n5\r\nhello\r\n6;note=\"second chunk\"\r\n world\r\n1\r\n\n\r\n0\r\nX-Checksum: 42\r\n\r\n";
    for _ in 0..2 {
        stream.write_all(GET).unwrap();
        let mut got = vec![0; expected.len()];
        stream.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
    }
    assert_eq!(server.connections(), 1);
}

#[test]
fn close_delimited_body_ends_with_the_connection() {
    let server = testkit::close_delimited();
    let mut stream = connect(&server);
    stream.write_all(GET).unwrap();
    let (bytes, err) = read_all(&mut stream);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nclose-delimited body\n"
    );
}

#[test]
fn status_codes_on_keep_alive() {
    for (code, line) in [(404, "HTTP/1.1 404 Not Found\r\n"), (503, "HTTP/1.1 503 Service Unavailable\r\n")] {
        let server = testkit::status(code);
        let mut stream = connect(&server);
        for _ in 0..2 {
            stream.write_all(GET).unwrap();
            let (head, body) = read_response(&mut stream);
            assert!(head.starts_with(line), "{head}");
            assert_eq!(body, b"status\n");
        }
        assert_eq!((server.connections(), server.requests()), (1, 2));
    }
}

/// A push as a metrics client sends it: a POST with a protobuf body.
fn push(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST /api/v1/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n\
         Content-Encoding: snappy\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[test]
fn refusing_answers_every_push_with_its_status_and_keeps_what_it_got() {
    // (status, Retry-After, the head it must answer with)
    let cases = [
        // A client error without advice: the sender must drop the batch.
        (400, None, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\n"),
        // Throttled, with the seconds to wait.
        (
            429,
            Some(3),
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nRetry-After: 3\r\n\r\n",
        ),
        // A server error: retryable.
        (500, None, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\n"),
        // Unavailable, with the seconds to wait.
        (
            503,
            Some(1),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nRetry-After: 1\r\n\r\n",
        ),
    ];
    for (code, retry_after, want) in cases {
        let server = testkit::refusing(code, retry_after);
        let mut stream = connect(&server);
        // Two pushes on one keep-alive connection, bodies of 5 and 300 bytes.
        for body in [&b"hello"[..], &[7u8; 300][..]] {
            stream.write_all(&push(body)).unwrap();
            let (head, body) = read_response(&mut stream);
            assert_eq!(head, want, "{code}");
            assert_eq!(body, b"status\n");
        }
        assert_eq!((server.connections(), server.requests(), server.body_bytes()), (1, 2, 305), "{code}");
        let heads = server.request_heads();
        assert_eq!(heads.len(), 2);
        assert!(heads[0].starts_with("POST /api/v1/write HTTP/1.1\r\n"), "{}", heads[0]);
        assert!(heads[1].contains("Content-Encoding: snappy\r\n") && heads[1].contains("Content-Length: 300\r\n"));
    }
}

#[test]
fn stalling_reads_the_push_whole_and_never_answers() {
    let server = testkit::stalling();
    let mut stream = connect(&server);
    stream.write_all(&push(&[1u8; 1000])).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 64];
    let err = stream.read(&mut buf).expect_err("no answer expected");
    assert!(matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
    // The whole body was read (counted), yet nothing came back.
    assert!(eventually(|| server.body_bytes() == 1000), "{}", server.body_bytes());
    assert_eq!((server.requests(), server.request_heads().len()), (1, 1));
}

#[test]
fn servers_that_stand_for_no_receiver_keep_no_heads() {
    // Only `refusing` and `stalling` keep what they read: the load tests' servers keep no
    // per-request memory beyond their arrival times.
    let server = testkit::status(503);
    let mut stream = connect(&server);
    stream.write_all(&push(b"x")).unwrap();
    let _ = read_response(&mut stream);
    assert_eq!((server.requests(), server.request_heads().len(), server.body_bytes()), (1, 0, 0));
}

#[test]
fn tls_server_handshakes_with_a_client_trusting_its_cert() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let server = testkit::tls_fixed_delay(Duration::from_millis(5));
    assert!(server.url().starts_with("https://127.0.0.1:"));
    let pem = server.cert_pem().expect("TLS server has a certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    for name in ["localhost", "127.0.0.1"] {
        let name = ServerName::try_from(name).unwrap();
        let conn = rustls::ClientConnection::new(Arc::clone(&config), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, connect(&server));
        for _ in 0..2 {
            let sent = Instant::now();
            tls.write_all(GET).unwrap();
            let (head, body) = read_response(&mut tls);
            assert!(sent.elapsed() >= Duration::from_millis(5));
            assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
            assert_eq!(body, b"ok\n");
        }
    }
    assert_eq!((server.connections(), server.requests()), (2, 4));
}

#[test]
fn refused_addr_refuses() {
    let addr = testkit::refused_addr();
    assert!(addr.ip().is_loopback());
    let err = TcpStream::connect(addr).expect_err("nothing listens");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn drop_stops_listening() {
    let server = testkit::status(200);
    let addr = server.addr();
    let _idle = connect(&server);
    assert!(eventually(|| server.connections() == 1));
    drop(server);
    let err = TcpStream::connect(addr).expect_err("server dropped");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}
