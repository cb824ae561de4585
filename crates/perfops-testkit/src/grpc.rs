//! A gRPC server from another implementation than ours (#14): Debian's
//! `python3-grpcio` (gRPC's C core), so that perfops' gRPC client is not only
//! tested against itself. `scripts/test` installs it. It serves
//! [`ECHO_PROTO`]'s `bench.Echo` without generated code (grpcio's generic
//! handlers, the request's bytes echoed as they came: request and reply are
//! the same message type):
//! - `Say`: the message back, after `delay`; every `unavailable_every`-th call
//!   (if not 0) ends with `UNAVAILABLE` instead;
//! - `Count`: a server stream of the message, three times;
//! - `Private`: the message back if the metadata carry
//!   `authorization: Bearer t0k`, else `UNAUTHENTICATED`;
//! - `Deadline`: answers with the seconds the call had left when it began
//!   (`grpc-timeout` as the server saw it), as `n`, and the text;
//! - `Collect`: a client stream, answered once with how many messages it
//!   carried, as `n`;
//! - `Chat`: a bidirectional stream, each message echoed as it comes.

use std::time::Duration;

use crate::python::{Python, start_with};

/// The `.proto` of the test service.
pub const ECHO_PROTO: &str = r#"syntax = "proto3";
package bench;
service Echo {
  rpc Say (Msg) returns (Msg);
  rpc Count (Msg) returns (stream Msg);
  rpc Private (Msg) returns (Msg);
  rpc Deadline (Msg) returns (Msg);
  rpc Collect (stream Msg) returns (Msg);
  rpc Chat (stream Msg) returns (stream Msg);
}
message Msg {
  string text = 1;
  int64 n = 2;
}
"#;

const SERVER: &str = r#"
import sys, threading, time
from concurrent import futures
import grpc
every, delay = int(sys.argv[1]), float(sys.argv[2])
lock = threading.Lock()
calls = [0]
same = lambda b: b
def say(req, ctx):
    with lock:
        calls[0] += 1
        k = calls[0]
    if delay:
        time.sleep(delay)
    if every and k % every == 0:
        ctx.abort(grpc.StatusCode.UNAVAILABLE, 'shedding load')
    return req
def count(req, ctx):
    for _ in range(3):
        yield req
def private(req, ctx):
    if dict(ctx.invocation_metadata()).get('authorization') != 'Bearer t0k':
        ctx.abort(grpc.StatusCode.UNAUTHENTICATED, 'no token')
    return req
def varint(n):
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
def deadline(req, ctx):
    left = ctx.time_remaining()
    n = int(left) if left is not None else 0
    return req + b'\x10' + varint(n)
def collect(reqs, ctx):
    return b'\x10' + varint(sum(1 for _ in reqs))
def chat(reqs, ctx):
    for r in reqs:
        yield r
def handler(f, stream=False, make=None):
    make = make or (grpc.unary_stream_rpc_method_handler if stream else grpc.unary_unary_rpc_method_handler)
    return make(f, request_deserializer=same, response_serializer=same)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler('bench.Echo', {
    'Say': handler(say), 'Count': handler(count, True), 'Private': handler(private),
    'Deadline': handler(deadline), 'Collect': handler(collect, make=grpc.stream_unary_rpc_method_handler),
    'Chat': handler(chat, make=grpc.stream_stream_rpc_method_handler)}),))
if len(sys.argv) > 4:
    key, cert = open(sys.argv[3], 'rb').read(), open(sys.argv[4], 'rb').read()
    port = server.add_secure_port('127.0.0.1:0', grpc.ssl_server_credentials([(key, cert)]))
else:
    port = server.add_insecure_port('127.0.0.1:0')
server.start()
print(port, flush=True)
server.wait_for_termination()
"#;

/// Start the grpcio server on 127.0.0.1 (h2c). Panics, saying how to
/// install it, when Debian's python3-grpcio is missing.
pub fn grpcio_echo(unavailable_every: u32, delay: Duration) -> Python {
    start(unavailable_every, delay, &[])
}

/// [`grpcio_echo`] over TLS (grpcs: ALPN h2), with a fresh self-signed
/// certificate for `127.0.0.1` and `localhost` written beside it in `dir`.
pub fn grpcio_echo_tls(unavailable_every: u32, delay: Duration, dir: &std::path::Path) -> Python {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("rcgen: self-signed certificate");
    let (key, cert) = (dir.join("grpc-key.pem"), dir.join("grpc-cert.pem"));
    std::fs::write(&key, certified.key_pair.serialize_pem()).expect("write the key");
    std::fs::write(&cert, certified.cert.pem()).expect("write the certificate");
    start(unavailable_every, delay, &[key.display().to_string(), cert.display().to_string()])
}

fn start(unavailable_every: u32, delay: Duration, tls: &[String]) -> Python {
    let ok = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import grpc"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "no grpcio for /usr/bin/python3: install it (apt-get install python3-grpcio)");
    let mut args = vec![unavailable_every.to_string(), delay.as_secs_f64().to_string()];
    args.extend_from_slice(tls);
    // grpcio logs each refused TLS handshake (a test's purpose) at error level.
    start_with("/usr/bin/python3", SERVER, &args, &[("GRPC_VERBOSITY", "NONE")])
}
