//! End to end: a flow's saved values belong to its flow instance (an
//! arrival; a closed-loop user's iteration), not to the worker that runs
//! it. Each arrival creates a cart and reads it back by the id it saved; the
//! server holds each create 50 ms and the flow pauses 50 ms after it, so
//! that many arrivals of one worker are between their create and their read
//! at once. Every create is tagged with the arrival's `${seq}`, and the read
//! sends the id and the tag again: the server answers 409 when the id is a
//! cart another arrival created, 404 when it is no cart at all, so a value
//! that crossed from one arrival to another is seen where it lands. Saved
//! values kept per worker sent most reads with another arrival's id.
//! Setup's login, saved once, still reaches every arrival (401 without it).

mod common;

use common::{Finished, RUN_LIMIT, Workdir, shared, spawn_perfops};
use perfops_testkit::python::{self, Python};
use serde_json::json;
use std::path::PathBuf;

/// HTTP/1.1 keep-alive on 127.0.0.1, a thread per connection (port on the
/// first line). `POST /login` gives the token; with it, `POST /carts?tag=T`
/// (held 50 ms) creates a cart for tag T and answers its id, and `GET
/// /carts/ID?tag=T` answers 200 if cart ID was created for tag T, 409 if for
/// another, 404 if there is no cart ID. Each answer's status, by route, is
/// appended to the file `argv[1]`.
const CARTS: &str = r#"
import itertools, json, socket, sys, threading, time
log = open(sys.argv[1], 'ab', buffering=0)
lock = threading.Lock()
carts = {}
ids = itertools.count(1)
TOKEN = b'tk-7f3a'
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0))
s.listen(512)
print(s.getsockname()[1], flush=True)
def answer(method, target, headers):
    path, _, query = target.partition(b'?')
    q = dict(p.split(b'=', 1) for p in query.split(b'&') if b'=' in p)
    if method == b'POST' and path == b'/login':
        return 200, b'{"token": "' + TOKEN + b'"}', None
    if headers.get(b'authorization') != b'Bearer ' + TOKEN:
        return 401, b'', b'unauthorized'
    if method == b'POST' and path == b'/carts':
        time.sleep(0.05)
        with lock:
            cid = b'c%d' % next(ids)
            carts[cid] = q.get(b'tag')
        return 201, b'{"id": "' + cid + b'"}', b'create'
    if method == b'GET' and path.startswith(b'/carts/'):
        cid = path[len(b'/carts/'):]
        with lock:
            known, tag = cid in carts, carts.get(cid)
        if not known:
            return 404, b'', b'unknown'
        return (200, b'', b'read') if tag == q.get(b'tag') else (409, b'', b'crossed')
    return 404, b'', b'route'
def serve(c):
    buf = b''
    try:
        while True:
            data = c.recv(65536)
            if not data:
                return
            buf += data
            while b'\r\n\r\n' in buf:
                head, rest = buf.split(b'\r\n\r\n', 1)
                lines = head.split(b'\r\n')
                method, target = lines[0].split(b' ')[:2]
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(b':')
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get(b'content-length', b'0'))
                if len(rest) < n:
                    break
                buf = rest[n:]
                status, body, what = answer(method, target, headers)
                if what:
                    with lock:
                        log.write(what + b'\n')
                c.sendall(b'HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' % (status, len(body)) + body)
    except (OSError, ValueError):
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// The cart server and where it logs what each answer was.
struct Carts {
    server: Python,
    log: PathBuf,
}

impl Carts {
    fn start(wd: &Workdir) -> Carts {
        let log = wd.path.join("answers.log");
        Carts { server: python::script(CARTS, &[log.display().to_string()]), log }
    }

    /// How many answers of each kind the server gave: `create`, `read`
    /// (the arrival's own cart), `crossed` (another arrival's), `unknown`
    /// (no cart), `unauthorized`, `route`.
    fn count(&self, what: &str) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().filter(|l| *l == what).count()
    }

    fn counts(&self) -> String {
        let kinds = ["create", "read", "crossed", "unknown", "unauthorized", "route"];
        kinds.iter().map(|k| format!("{k}: {}", self.count(k))).collect::<Vec<_>>().join(", ")
    }
}

/// The scenario: setup logs in once; each flow instance creates a cart
/// tagged with its `${seq}`, saves the id, waits, and reads the cart back.
fn scenario(port: u16, load: &str) -> String {
    format!(
        "name: carts\ntarget: http://127.0.0.1:{port}\n\
         setup:\n\
         \x20 - {{ name: login, request: POST /login, expect: {{ status: 200 }}, save: {{ token: $.token }} }}\n\
         defaults: {{ headers: {{ Authorization: \"Bearer ${{token}}\" }} }}\n\
         flows:\n\
         \x20 cart:\n\
         \x20   steps:\n\
         \x20     - {{ name: create, request: \"POST /carts?tag=${{seq}}\", expect: {{ status: 201 }},\n\
         \x20         save: {{ cart_id: $.id }}, pause: 50ms }}\n\
         \x20     - {{ name: read, request: \"GET /carts/${{cart_id}}?tag=${{seq}}\", expect: {{ status: 200 }} }}\n\
         {load}"
    )
}

fn run(wd: &Workdir, yaml: &str) -> Finished {
    let path = wd.scenario("carts.yaml", yaml);
    let out = wd.runs().display().to_string();
    spawn_perfops(&["run", &path.display().to_string(), "--out", &out], |_| {}).wait(RUN_LIMIT)
}

/// Open model, 200 arrivals/s for 2 s: ~20 arrivals of a worker are between
/// their create and their read at any time. Every read carries the id its
/// own arrival saved (no 409, no 404), and every arrival was authorised by
/// setup's token. With values kept per worker, most reads were 409s.
#[test]
fn each_arrival_reads_the_id_it_saved_while_arrivals_overlap() {
    let _cpu = shared();
    let wd = Workdir::new("flow-vars-open");
    let carts = Carts::start(&wd);
    let yaml = scenario(carts.server.port(0), "load: { stages: [ { rate: 200, hold: 2s } ] }\n");
    let out = run(&wd, &yaml);
    let ctx = format!("{}\nserver: {}", out.dump(), carts.counts());
    assert_eq!(carts.count("crossed"), 0, "a read sent another arrival's cart id\n{ctx}");
    assert_eq!(carts.count("unknown"), 0, "a read sent no cart's id\n{ctx}");
    assert_eq!(carts.count("unauthorized"), 0, "setup's token reaches every arrival\n{ctx}");
    // Every arrival was sent (none dropped at this rate) and read its cart.
    assert!(carts.count("create") >= 380, "{ctx}");
    assert_eq!(carts.count("read"), carts.count("create"), "{ctx}");
    out.assert_exit(0);
    assert_eq!(wd.summary(&out)["total"]["failures"], json!({}), "{ctx}");
}

/// Closed model: 20 users on their connections, each iteration a flow
/// instance of its own; users of one worker interleave through the pause
/// as arrivals do.
#[test]
fn each_closed_loop_iteration_reads_the_id_it_saved() {
    let _cpu = shared();
    let wd = Workdir::new("flow-vars-closed");
    let carts = Carts::start(&wd);
    let yaml = scenario(carts.server.port(0), "load: { model: closed, stages: [ { users: 20, hold: 2s } ] }\n");
    let out = run(&wd, &yaml);
    let ctx = format!("{}\nserver: {}", out.dump(), carts.counts());
    assert_eq!(carts.count("crossed"), 0, "a read sent another iteration's cart id\n{ctx}");
    assert_eq!(carts.count("unknown"), 0, "a read sent no cart's id\n{ctx}");
    assert_eq!(carts.count("unauthorized"), 0, "setup's token reaches every iteration\n{ctx}");
    // 20 users, ~0.1 s per iteration, 2 s: a few hundred reads.
    assert!(carts.count("read") >= 100, "{ctx}");
    out.assert_exit(0);
    assert_eq!(wd.summary(&out)["total"]["failures"], json!({}), "{ctx}");
}
