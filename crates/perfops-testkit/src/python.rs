//! Small python3 servers on 127.0.0.1 shaped like the real servers perfops
//! must understand (issue #11), where the testkit's own std-thread servers
//! cannot be: a pre-forking master whose workers do the work (gunicorn, Puma
//! cluster, nginx), a thread pool whose threads accept only when free and
//! publish Puma's metric names, and a server that writes headers and body in
//! two sends without `TCP_NODELAY`. Each script prints its port(s) on its
//! first line; the handle stops it by its PID when dropped (the forked
//! workers die with their master: `PR_SET_PDEATHSIG`). `scripts/test`
//! installs python3.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};

/// A running python3 server; dropping it kills it (by its PID).
pub struct Python {
    child: Child,
    ports: Vec<u16>,
}

impl Python {
    /// The PID of the process that listens (for a pre-forking server, the master).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The `i`-th port the script printed (0: where it serves requests).
    pub fn port(&self, i: usize) -> u16 {
        self.ports[i]
    }

    /// 127.0.0.1 and the first port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports[0]))
    }

    /// `http://127.0.0.1:PORT` (no trailing slash) of the `i`-th port.
    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `script` with `args`; returns once it printed its ports. Panics,
/// saying how to install it, when there is no python3.
fn start(script: &str, args: &[String]) -> Python {
    start_with("python3", script, args, &[])
}

/// A test's own `script`, run with `args`: like every script here, it
/// prints its port(s) on its first line; the handle stops it by its PID.
pub fn script(script: &str, args: &[String]) -> Python {
    start(script, args)
}

/// [`start`] with the interpreter `python` (Debian's `/usr/bin/python3`,
/// where Debian's Python packages are) and environment variables `envs`.
pub(crate) fn start_with(python: &str, script: &str, args: &[String], envs: &[(&str, &str)]) -> Python {
    let mut child = Command::new(python)
        .envs(envs.iter().copied())
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} ({e}): install it (apt-get install python3)"));
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line);
    let ports: Vec<u16> = line.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    if read.is_err() || ports.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the python3 server did not say its port: {line:?} {read:?}");
    }
    Python { child, ports }
}

/// The HTTP/1.1 request reading the scripts share: `read(f)` returns the
/// path of the next request on the buffered reader `f` (body skipped), or
/// None at the end of the connection.
const READ_REQUEST: &str = r#"
import ctypes, os, signal, socket, sys, threading, time
def read(f):
    line = f.readline()
    if not line:
        return None
    n = 0
    while True:
        h = f.readline()
        if h in (b'\r\n', b'\n', b''):
            break
        if h.lower().startswith(b'content-length:'):
            n = int(h.split(b':')[1])
    if n:
        f.read(n)
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else '/'
def reply(c, body, close):
    extra = b'Connection: close\r\n' if close else b''
    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n' + extra
              + b'Content-Length: %d\r\n\r\n' % len(body) + body)
"#;

const PREFORK: &str = r#"
workers, cpu_ms = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0))
s.listen(256)
def work():
    # Die with the master, as a real server's workers do.
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    while True:
        c, _ = s.accept()
        f = c.makefile('rb')
        while read(f) is not None:
            end = time.process_time() + cpu_ms / 1000.0
            while time.process_time() < end:
                pass
            reply(c, b'ok\n', False)
        c.close()
for _ in range(workers):
    if os.fork() == 0:
        work()
        os._exit(0)
print(s.getsockname()[1], flush=True)
while True:
    signal.pause()
"#;

/// A pre-forking server: the master listens and forks `workers` processes
/// that accept and serve keep-alive requests, each burning `cpu_ms` of CPU
/// per request. The master itself does nothing, as gunicorn's and nginx's.
pub fn prefork(workers: u32, cpu_ms: f64) -> Python {
    start(&format!("{READ_REQUEST}{PREFORK}"), &[workers.to_string(), cpu_ms.to_string()])
}

const PUMA_POOL: &str = r#"
threads, io_ms, backlog = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0))
s.listen(backlog)
m = socket.socket()
m.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
m.bind(('127.0.0.1', 0))
m.listen(16)
busy = [0]
lock = threading.Lock()
def worker():
    # A thread accepts only when it is free: the rest wait in the listen queue.
    while True:
        c, _ = s.accept()
        with lock:
            busy[0] += 1
        try:
            f = c.makefile('rb')
            if read(f) is not None:
                time.sleep(io_ms / 1000.0)
                reply(c, b'ok\n', True)
        except OSError:
            pass
        finally:
            c.close()
            with lock:
                busy[0] -= 1
def metrics():
    while True:
        c, _ = m.accept()
        f = c.makefile('rb')
        if read(f) is not None:
            with lock:
                b = busy[0]
            text = ('# TYPE puma_busy_threads gauge\npuma_busy_threads %d\n'
                    '# TYPE puma_max_threads gauge\npuma_max_threads %d\n' % (b, threads))
            reply(c, text.encode(), True)
        c.close()
for _ in range(threads):
    threading.Thread(target=worker, daemon=True).start()
threading.Thread(target=metrics, daemon=True).start()
print(s.getsockname()[1], m.getsockname()[1], flush=True)
while True:
    time.sleep(3600)
"#;

/// A Puma-like thread pool: `threads` threads, each accepting a connection
/// only when free and answering its one request after `io_ms` of sleep
/// (`Connection: close`); beyond them, connections wait in a listen queue of
/// `backlog`. Port 1 serves `/metrics` outside the pool with the names of
/// Puma's exporters, `puma_busy_threads` and `puma_max_threads`.
pub fn puma_pool(threads: u32, io_ms: f64, backlog: u32) -> Python {
    start(&format!("{READ_REQUEST}{PUMA_POOL}"), &[threads.to_string(), io_ms.to_string(), backlog.to_string()])
}

const TWO_SENDS: &str = r#"
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0))
s.listen(256)
def serve(c):
    f = c.makefile('rb')
    while read(f) is not None:
        body = b'hello world\n'
        # Two small writes, Nagle on: the second waits for the ACK of the first.
        c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n' % len(body))
        c.sendall(body)
    c.close()
def accept():
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
print(s.getsockname()[1], flush=True)
while True:
    time.sleep(3600)
"#;

/// A keep-alive server (a thread per connection) that writes each response's
/// headers and body in two sends without `TCP_NODELAY`: on Linux the body
/// waits for the client's delayed ACK of the headers, about 40 ms, on every
/// request of a connection that sends the next request after the response.
pub fn two_sends() -> Python {
    start(&format!("{READ_REQUEST}{TWO_SENDS}"), &[])
}

const SHOP: &str = r#"
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Shop(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *args):
        pass
    def answer(self, status, doc):
        body = json.dumps(doc, separators=(',', ':')).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        n = int(self.headers.get('Content-Length') or 0)
        try:
            doc = json.loads(self.rfile.read(n) or b'null')
        except ValueError:
            doc = None
        if self.path == '/login':
            if isinstance(doc, dict) and doc.get('password') == 'right':
                self.answer(200, {'token': 'tok-from-login-5f3'})
            else:
                self.answer(401, {'error': 'bad password'})
        elif self.path == '/orders':
            if isinstance(doc, dict) and isinstance(doc.get('qty'), int):
                self.answer(201, {'id': 7})
            else:
                self.answer(422, {'error': 'qty must be a number', 'got': doc.get('qty') if isinstance(doc, dict) else None})
        else:
            self.answer(404, {'error': 'no such page'})
    def do_GET(self):
        if self.path.startswith('/orders/'):
            self.answer(200, {'id': 7, 'status': 'new'})
        elif self.path == '/echo':
            self.answer(500, {'error': 'you sent ' + (self.headers.get('Authorization') or 'nothing')})
        else:
            self.answer(404, {'error': 'no such page'})
server = ThreadingHTTPServer(('127.0.0.1', 0), Shop)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A small shop (Python's own `http.server`, a thread per connection,
/// keep-alive) whose answers say why they refuse, as a real API does (#32):
/// `POST /login` answers 200 `{"token": ...}` for `{"password": "right"}`,
/// else 401 `{"error":"bad password"}`; `POST /orders` 201 `{"id":7}` when
/// `qty` is a JSON number, else 422 `{"error":"qty must be a number",...}`;
/// `GET /orders/ID` 200 `{"id":7,"status":"new"}`; `GET /echo` 500 with the
/// request's `Authorization` echoed in its body (a server that leaks what it
/// was sent); anything else 404.
pub fn shop() -> Python {
    start(SHOP, &[])
}

const WEBSOCKET: &str = r#"
import sys
# Debian's python3-websockets, also when python3 on PATH is another build.
sys.path.append('/usr/lib/python3/dist-packages')
import asyncio, websockets
close_after = int(sys.argv[1])
async def serve(ws, path=None):
    n = 0
    async for message in ws:
        n += 1
        if close_after and n >= close_after:
            await ws.close(code=1011, reason='python says no')
            return
        await ws.send(message)
async def main():
    async with websockets.serve(serve, '127.0.0.1', 0) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"#;

/// Debian's python3-websockets (an implementation independent of the
/// generator's tungstenite): echoes every message, or, when `close_after`
/// is not 0, answers that many-th message of a connection with a close
/// frame of code 1011. `scripts/test` installs python3-websockets.
pub fn websocket(close_after: u32) -> Python {
    start(WEBSOCKET, &[close_after.to_string()])
}

const WEBSOCKET_COOKIES: &str = r#"
import sys
sys.path.append('/usr/lib/python3/dist-packages')
import asyncio, http, websockets
def cookie(headers, name):
    for line in headers.get_all('Cookie'):
        for pair in line.split(';'):
            key, _, value = pair.strip().partition('=')
            if key == name:
                return value
    return None
def answer(ok, why):
    status = http.HTTPStatus.OK if ok else http.HTTPStatus.UNAUTHORIZED
    return (status, [('Content-Type', 'text/plain')], b'ok\n' if ok else why)
def process_request(path, headers):
    if path == '/login':
        return (http.HTTPStatus.OK, [('Set-Cookie', 'session=s3cret; Path=/; HttpOnly')], b'welcome\n')
    if path == '/login?stale':
        return (http.HTTPStatus.OK, [('Set-Cookie', 'session=st4le; Path=/')], b'welcome back\n')
    if path == '/after':
        return answer(cookie(headers, 'socket') == 'w5-0pen3d', b'no socket cookie\n')
    if cookie(headers, 'session') != 's3cret':
        return answer(False, b'no session cookie\n')
    return None
def extra_headers(path, headers):
    return [('Set-Cookie', 'socket=w5-0pen3d; Path=/')]
async def serve(ws, path=None):
    async for message in ws:
        await ws.send(message)
async def main():
    async with websockets.serve(serve, '127.0.0.1', 0, process_request=process_request,
                                extra_headers=extra_headers) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"#;

/// Debian's python3-websockets behind a session cookie: `GET /login`
/// answers 200 with `Set-Cookie: session=s3cret` (`GET /login?stale`, with
/// `session=st4le`); an upgrade without that cookie is answered 401, with it 101 (an echo) with `Set-Cookie:
/// socket=w5-0pen3d`; `GET /after` answers 200 when that second cookie comes
/// back, else 401.
pub fn websocket_cookies() -> Python {
    start(WEBSOCKET_COOKIES, &[])
}

/// Where `scripts/test` installs the SSE server's PyPI packages (aiohttp and
/// aiohttp-sse, pinned there), in a virtual environment of Debian's python3.
pub const SSE_VENV: &str = ".cache/perfops-testkit/sse-venv";

const SSE: &str = include_str!("sse_app.py");

/// A real Server-Sent Events server: aiohttp with aiohttp-sse from PyPI
/// (chunked `text/event-stream` over HTTP/1.1), events named `tick` with
/// ids 0, 1, ... and data `tick I` (the last: `done`), paced at absolute
/// instants:
/// - `/events?n=N&every=MS`: N events, MS apart, then the end;
/// - `/stall?k=K&every=MS`: K events, then silence with the stream open;
/// - `/forever?every=MS`: events until the client goes;
/// - `/json?n=N&every=MS`: N unnamed events of JSON data `{"i":I}`, the
///   last `{"i":N-1,"result":"rN-1"}`;
/// - `/equal?a=X&b=Y`: 200 when X is Y, else 409 (a value a scenario saved,
///   sent back and checked).
///
/// Panics, saying to run `scripts/test`, when its packages are not installed.
pub fn sse() -> Python {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let python = format!("{home}/{SSE_VENV}/bin/python");
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} is missing: scripts/test installs aiohttp and aiohttp-sse there"
    );
    start_with(&python, SSE, &[], &[])
}
