"""A small web app with a login, in front of `perfops demo`, for a browser to
use while it is recorded (tests/import_har.rs): one origin serves the page
and proxies the demo's API, so the page's script calls `/auth`, `/orders`
and `/me` on its own origin as a real single-page app does (the demo sends
no CORS headers, and a page on another origin could not read its answers).

    shop_front.py UPSTREAM_HOST:PORT

Listens on 127.0.0.1 (a free port), prints `listening http://127.0.0.1:PORT`
as its first line, and serves:
    GET /          the login page: a form (user, password) whose script
                   POSTs /auth as JSON, then GETs /orders and /me with
                   `Authorization: Bearer <token>`, and writes what came on <body>
    GET /app.css   a stylesheet (a static asset the import leaves out)
    anything else  passed to the demo as it came, answered as the demo answered;
                   a login the demo accepts (`/auth`, 200) also opens a session
                   in two cookies (`front_session`, `front_check`: two
                   `Set-Cookie` fields), and `/orders` and `/me` are answered
                   401 unless they carry both, as issued together (what a
                   browser does by itself; a client without a jar cannot)
HTTP/1.1 with keep-alive; a thread per connection; stopped by its PID.
"""

import http.client, secrets, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from http.cookies import SimpleCookie

UPSTREAM = sys.argv[1]

# The sessions opened: front_session -> front_check.
SESSIONS = {}
LOCK = threading.Lock()

PAGE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Shop</title><link rel="stylesheet" href="/app.css"></head>
<body>
<form id="login">
  <input id="user" name="user" value="">
  <input id="password" name="password" type="password" value="">
  <button id="go" type="submit">Log in</button>
</form>
<p id="out"></p>
<script>
document.getElementById("login").addEventListener("submit", async function (ev) {
  ev.preventDefault();
  try {
    var user = document.getElementById("user").value, password = document.getElementById("password").value;
    var auth = await fetch("/auth", { method: "POST", headers: { "Content-Type": "application/json" },
                                      body: JSON.stringify({ user: user, password: password }) });
    var token = (await auth.json()).token;
    var orders = await fetch("/orders", { headers: { "Accept": "application/json", "Authorization": "Bearer " + token } });
    var page = await orders.json();
    var me = await fetch("/me", { headers: { "Accept": "application/json", "Authorization": "Bearer " + token } });
    var who = await me.json();
    document.getElementById("out").textContent = who.user + ": " + page.count + " orders";
    document.body.setAttribute("data-orders", String(page.count));
    document.body.setAttribute("data-statuses", [auth.status, orders.status, me.status].join(","));
  } catch (e) {
    document.body.setAttribute("data-error", String(e));
  }
});
</script>
</body></html>
"""

CSS = b"body { font-family: sans-serif; margin: 2em; } #out { color: #063; }\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, ctype, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def session_ok(self):
        jar = SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie") or "")
        except Exception:
            return False
        sid, check = jar.get("front_session"), jar.get("front_check")
        with LOCK:
            return sid is not None and check is not None and SESSIONS.get(sid.value) == check.value

    def proxy(self):
        path = self.path.split("?")[0]
        if path in ("/orders", "/me") and not self.session_ok():
            self.answer(401, "application/json", b'{"error":"no session"}')
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        conn = http.client.HTTPConnection(UPSTREAM, timeout=10)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            extra = [(k, v) for k, v in r.getheaders() if k.lower() in ("www-authenticate",)]
            if path == "/auth" and r.status == 200:
                sid, check = secrets.token_hex(16), secrets.token_hex(16)
                with LOCK:
                    SESSIONS[sid] = check
                extra.append(("Set-Cookie", "front_session=%s; Path=/; HttpOnly; SameSite=Lax" % sid))
                extra.append(("Set-Cookie", "front_check=%s; Path=/; SameSite=Lax" % check))
            self.answer(r.status, r.getheader("Content-Type") or "application/octet-stream", data, extra)
        finally:
            conn.close()

    def route(self):
        if self.path == "/" and self.command in ("GET", "HEAD"):
            self.answer(200, "text/html; charset=utf-8", PAGE)
        elif self.path == "/app.css" and self.command in ("GET", "HEAD"):
            self.answer(200, "text/css", CSS, [("Cache-Control", "max-age=3600")])
        else:
            self.proxy()

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = route


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("listening http://127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
