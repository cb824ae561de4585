//! End to end, issue #32 want 5: typed values. A whole `json:` value that is
//! one `${...}` keeps its value's type, so a CSV column of numbers reaches the
//! server as numbers (`"qty": 3`, not `"qty": "3"`); `:number` forces a
//! number and a row that is not one is refused (`bad_value`) without being
//! sent. The target is a small python3 server on 127.0.0.1 that, like the
//! issue's shop, answers `POST /orders` 201 when `qty` is a JSON integer and
//! 422 when it is not, and records every body it receives.

mod common;

use common::{Finished, RUN_LIMIT, Workdir, shared, spawn_perfops};
use perfops_testkit::python::{self, Python};
use serde_json::{Value, json};
use std::path::PathBuf;

/// HTTP/1.1 keep-alive on 127.0.0.1 (port on the first line); each request's
/// body, one per line, appended to the file `argv[1]`.
const SHOP: &str = r#"
import json, socket, sys, threading
log = open(sys.argv[1], 'ab', buffering=0)
lock = threading.Lock()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0))
s.listen(128)
print(s.getsockname()[1], flush=True)
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
                n = 0
                for line in head.split(b'\r\n')[1:]:
                    if line.lower().startswith(b'content-length:'):
                        n = int(line.split(b':')[1])
                if len(rest) < n:
                    break
                body, buf = rest[:n], rest[n:]
                with lock:
                    log.write(body.replace(b'\n', b' ') + b'\n')
                try:
                    ok = type(json.loads(body).get('qty')) is int
                except Exception:
                    ok = False
                status = b'201 Created' if ok else b'422 Unprocessable Entity'
                c.sendall(b'HTTP/1.1 ' + status + b'\r\nContent-Length: 0\r\n\r\n')
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// The shop and where it writes the bodies it received; dropping it stops it.
struct Shop {
    server: Python,
    log: PathBuf,
}

impl Shop {
    fn start(wd: &Workdir) -> Shop {
        let log = wd.path.join("bodies.jsonl");
        Shop { server: python::script(SHOP, &[log.display().to_string()]), log }
    }

    /// Every body received so far, parsed.
    fn bodies(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
    }
}

fn run(wd: &Workdir, yaml: &str) -> Finished {
    let path = wd.scenario("orders.yaml", yaml);
    let out = wd.runs().display().to_string();
    spawn_perfops(&["run", &path.display().to_string(), "--out", &out], |_| {}).wait(RUN_LIMIT)
}

/// Issue #32: `qty: "${orders.qty}"` sent `"3"` and the shop answered 422.
/// Now the quoted form (flow style needs it) and the unquoted one (block
/// style) both send the number, `${seq}` too, text stays text, and a CSV
/// field that tries to add a field arrives as one string.
#[test]
fn numbers_from_a_csv_reach_the_server_as_numbers() {
    let _cpu = shared();
    let wd = Workdir::new("typed-values");
    let shop = Shop::start(&wd);
    std::fs::write(wd.path.join("orders.csv"), "sku,qty,note\nA-1,3,\"1, \"\"admin\"\": true\"\nB-2,12,plain\n")
        .unwrap();
    let yaml = format!(
        "name: typed\ntarget: http://127.0.0.1:{}\n\
         data: {{ orders: {{ csv: orders.csv, mode: cycle }} }}\n\
         flows:\n\
         \x20 quoted: {{ steps: [ {{ name: quoted, request: POST /orders, expect: {{ status: 201 }},\n\
         \x20     json: {{ sku: \"${{orders.sku}}\", qty: \"${{orders.qty}}\", n: \"${{seq}}\", note: \"${{orders.note}}\" }} }} ] }}\n\
         \x20 plain:\n\
         \x20   steps:\n\
         \x20     - name: plain\n\
         \x20       request: POST /orders\n\
         \x20       expect: {{ status: 201 }}\n\
         \x20       json:\n\
         \x20         qty: ${{orders.qty}}\n\
         \x20         sku: ${{orders.sku}}\n\
         load: {{ stages: [ {{ rate: 8, hold: 1s }} ] }}\n",
        shop.server.port(0)
    );
    let out = run(&wd, &yaml);
    let bodies = shop.bodies();
    let ctx = format!("{}\nbodies: {bodies:?}", out.dump());
    out.assert_exit(0);
    assert_eq!(wd.summary(&out)["total"]["failures"], json!({}), "{ctx}");
    assert_eq!(bodies.len(), 8, "{ctx}");
    for b in &bodies {
        assert!(matches!(b["qty"].as_u64(), Some(3 | 12)), "qty is a number: {b}\n{ctx}");
        assert!(b["sku"].is_string(), "a text column stays a string: {b}\n{ctx}");
        if let Some(obj) = b.as_object().filter(|o| o.contains_key("n")) {
            assert!(obj["n"].is_u64(), "${{seq}} is a number: {b}");
            assert_eq!(obj.len(), 4, "no field added: {b}");
            assert!(obj["note"] == "plain" || obj["note"] == "1, \"admin\": true", "{b}");
            assert!(!obj.contains_key("admin"), "{b}");
        }
    }
}

/// `:number` forces a number; a row that is not one (`abc`) is refused as
/// `bad_value` and never sent, and the run fails on it.
#[test]
fn a_value_forced_to_a_number_that_is_not_one_is_refused() {
    let _cpu = shared();
    let wd = Workdir::new("typed-values-forced");
    let shop = Shop::start(&wd);
    std::fs::write(wd.path.join("orders.csv"), "qty\n3\nabc\n").unwrap();
    let yaml = format!(
        "name: forced\ntarget: http://127.0.0.1:{}\n\
         data: {{ orders: {{ csv: orders.csv, mode: cycle }} }}\n\
         flows:\n\
         \x20 f: {{ steps: [ {{ name: order, request: POST /orders, json: {{ qty: \"${{orders.qty:number}}\" }} }} ] }}\n\
         load: {{ stages: [ {{ rate: 4, hold: 1s }} ] }}\n",
        shop.server.port(0)
    );
    let out = run(&wd, &yaml);
    let bodies = shop.bodies();
    let ctx = format!("{}\nbodies: {bodies:?}", out.dump());
    out.assert_exit(1);
    assert_eq!(wd.summary(&out)["total"]["failures"], json!({ "bad_value": 2 }), "{ctx}");
    assert_eq!(bodies, vec![json!({ "qty": 3 }); 2], "only the rows that are numbers were sent\n{ctx}");
    assert!(format!("{}{}", out.stdout, out.stderr).contains("bad_value"), "the summary shows the kind\n{ctx}");
}
