//! The API that the scripting tests and examples run against: what a
//! scenario cannot say in YAML, checked by a real implementation that is
//! not perfops' own (python3's standard library: `http.server`'s
//! `ThreadingHTTPServer`, `hmac`, `hashlib`, `json`).
//!
//! One server, four routes, each counting what it served (`GET /stats`, a
//! JSON object), so a test compares what perfops says with what the server
//! saw:
//! - `/signed/...` (any method): `X-Timestamp` and `X-Signature`, the hex
//!   HMAC-SHA256 with the secret over `METHOD\nPATH\nTIMESTAMP\nBODY` (the
//!   path with its query, as sent); 200 when it matches, 401 when not
//!   (`signed_ok`, `signed_bad`);
//! - `GET /items?page=N`: `{"items": [...], "next": N+1}`, `"next": null`
//!   on the last of `pages` pages (`pages`: every page served);
//! - `POST /login`: `{"token": "tK"}`, a new token good for `uses` requests
//!   (`logins`);
//! - `GET /private` with `Authorization: Bearer TOKEN`: 200 while the token
//!   has uses left, else 401 (`private_ok`, `private_401`).
//!
//! The handle stops the server by its PID when dropped.

use std::net::SocketAddr;

use serde_json::Value;

use crate::python::{Python, script};

const API: &str = r#"
import hashlib, hmac, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SECRET, PAGES, USES = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
counts = dict(signed_ok=0, signed_bad=0, pages=0, logins=0, private_ok=0, private_401=0, other=0)
tokens = {}

class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    # Head and body in one send (the handler flushes after each request): unbuffered,
    # they went in two, and Nagle's algorithm met the client's delayed ACK (40 ms).
    wbufsize = 1 << 16

    def log_message(self, *args):
        pass

    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def count(self, key):
        with lock:
            counts[key] += 1

    def serve(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else b''
        url = urlsplit(self.path)
        if url.path == '/stats':
            with lock:
                return self.answer(200, dict(counts))
        if url.path.startswith('/signed'):
            ts = self.headers.get('X-Timestamp', '')
            sig = self.headers.get('X-Signature', '')
            message = b'\n'.join([self.command.encode(), self.path.encode(), ts.encode(), body])
            want = hmac.new(SECRET, message, hashlib.sha256).hexdigest()
            if ts and hmac.compare_digest(want, sig):
                self.count('signed_ok')
                return self.answer(200, {'ok': True})
            self.count('signed_bad')
            return self.answer(401, {'error': 'bad signature'})
        if url.path == '/items':
            try:
                page = int(parse_qs(url.query).get('page', ['1'])[0])
            except ValueError:
                self.count('other')
                return self.answer(400, {'error': 'page is not a number'})
            self.count('pages')
            following = page + 1 if page < PAGES else None
            return self.answer(200, {'items': [page * 10 + i for i in range(3)], 'next': following})
        if url.path == '/login' and self.command == 'POST':
            with lock:
                counts['logins'] += 1
                token = 't%d' % counts['logins']
                tokens[token] = USES
            return self.answer(200, {'token': token})
        if url.path == '/private':
            auth = self.headers.get('Authorization', '')
            token = auth[len('Bearer '):] if auth.startswith('Bearer ') else ''
            with lock:
                left = tokens.get(token, 0)
                if left > 0:
                    tokens[token] = left - 1
                    counts['private_ok'] += 1
                else:
                    counts['private_401'] += 1
            return self.answer(200 if left > 0 else 401, {'ok': left > 0})
        self.count('other')
        return self.answer(404, {'error': 'no such path'})

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = serve

server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The scripting API on 127.0.0.1: signatures checked with `secret`, `pages`
/// pages of items, tokens good for `uses` requests each.
pub fn api(secret: &str, pages: u32, uses: u32) -> Python {
    script(API, &[secret.to_string(), pages.to_string(), uses.to_string()])
}

/// What the server at `addr` counted (`GET /stats`): `signed_ok`,
/// `signed_bad`, `pages`, `logins`, `private_ok`, `private_401`, `other`.
pub fn stats(addr: SocketAddr) -> Value {
    let (status, body) = crate::client::get(addr, "/stats").unwrap_or_else(|e| panic!("GET /stats: {e}"));
    assert_eq!(status, 200, "GET /stats: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET /stats is not JSON ({e}): {body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server itself: a signature it computes the same way passes, a
    /// wrong one does not; pages end with `null`; a token runs out.
    #[test]
    fn the_api_checks_what_it_says() {
        use hmac_check::sign;
        let server = api("s3cret", 2, 1);
        let addr = server.addr();
        let post = |target: &str, headers: &[(&str, &str)], body: &str| {
            crate::client::post(addr, target, headers, body.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
        };
        let sig = sign("s3cret", "POST", "/signed/x?a=1", "17", "{}");
        assert_eq!(post("/signed/x?a=1", &[("X-Timestamp", "17"), ("X-Signature", &sig)], "{}").0, 200);
        // Another body under the same signature.
        assert_eq!(post("/signed/x?a=1", &[("X-Timestamp", "17"), ("X-Signature", &sig)], "{ }").0, 401);
        let (_, page) = crate::client::get(addr, "/items?page=2").expect("page");
        assert!(page.contains("\"next\": null"), "{page}");
        let (_, login) = post("/login", &[], "");
        let token: Value = serde_json::from_str(&login).expect("token");
        let auth = format!("Bearer {}", token["token"].as_str().expect("a token"));
        let private = |auth: &str| {
            let req = format!("GET /private HTTP/1.0\r\nAuthorization: {auth}\r\n\r\n");
            crate::client::request(addr, req.as_bytes()).expect("private").0
        };
        assert_eq!((private(&auth), private(&auth)), (200, 401), "one use, then 401");
        let s = stats(addr);
        let got: Vec<u64> = ["signed_ok", "signed_bad", "pages", "logins", "private_ok", "private_401"]
            .iter()
            .map(|k| s[k].as_u64().expect(k))
            .collect();
        assert_eq!(got, vec![1, 1, 1, 1, 1, 1]);
    }

    /// HMAC-SHA256 in the test alone, to ask the server something it can
    /// check (the server's own is python's `hmac`).
    mod hmac_check {
        /// Hex HMAC-SHA256 of `METHOD\nPATH\nTS\nBODY` with `key`, by python3 in a process of its own.
        pub(super) fn sign(key: &str, method: &str, path: &str, ts: &str, body: &str) -> String {
            let message = format!("{method}\n{path}\n{ts}\n{body}");
            let out = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import hmac,hashlib,sys;print(hmac.new(sys.argv[1].encode(),sys.argv[2].encode(),hashlib.sha256).hexdigest())",
                    key,
                    &message,
                ])
                .output()
                .expect("python3");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    }
}
