//! End to end, issue #31 point 5: values that cannot smuggle into a request.
//! A value saved from a response, an `${env.X}` value or a CSV field holding
//! CR/LF goes into a request line or a header: the request is refused
//! (`unsafe_value`), counted, shown, and nothing of it reaches the server; a
//! space in a path arrives percent-encoded; `check` points at a literal
//! `\r\n` in a header. The target is a small python3 HTTP/1.1 server on
//! 127.0.0.1 that records every byte it receives, and answers `POST /login`
//! with a token that carries a header and a whole second request (the
//! finding of #31); HTTP/2 and gRPC go to the testkit's nginx.

mod common;

use common::{Finished, RUN_LIMIT, Workdir, shared, spawn_perfops};
use perfops_testkit as kit;
use serde_json::json;
use std::path::PathBuf;

/// The token of the finding: a header, then a second request.
const EVIL: &str = "abc\r\nX-Evil: 1\r\n\r\nGET /other HTTP/1.1\r\nHost: x\r\n\r\n";

/// Serves HTTP/1.1 keep-alive on 127.0.0.1 (port on the first line), appends
/// every byte received to the file `argv[1]`; `POST /login` answers
/// `{"token": EVIL}`, anything else `ok`.
const RECORDER: &str = r#"
import json, socket, sys, threading
log = open(sys.argv[1], 'ab', buffering=0)
lock = threading.Lock()
token = json.dumps({'token': sys.argv[2]}).encode()
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
            with lock:
                log.write(data)
            buf += data
            while b'\r\n\r\n' in buf:
                head, rest = buf.split(b'\r\n\r\n', 1)
                n = 0
                for line in head.split(b'\r\n')[1:]:
                    if line.lower().startswith(b'content-length:'):
                        n = int(line.split(b':')[1])
                if len(rest) < n:
                    break
                buf = rest[n:]
                body = token if head.startswith(b'POST /login ') else b'ok\n'
                c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n'
                          % len(body) + body)
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// The recording server and the file it writes what it received to;
/// dropping it stops it by its PID.
struct Recorder {
    server: kit::python::Python,
    log: PathBuf,
}

impl Recorder {
    fn start(wd: &Workdir) -> Recorder {
        let log = wd.path.join("received.bin");
        Recorder { server: kit::python::script(RECORDER, &[log.display().to_string(), EVIL.to_string()]), log }
    }

    /// Every byte received so far, on every connection.
    fn received(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }
}

/// `perfops run FILE` in `wd` with `envs`, to completion.
fn run(wd: &Workdir, file: &str, yaml: &str, envs: &[(&str, &str)]) -> Finished {
    let path = wd.scenario(file, yaml);
    let envs: Vec<(String, String)> = envs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    // Not -q: the end summary is part of what is checked.
    let out = wd.runs().display().to_string();
    spawn_perfops(&["run", &path.display().to_string(), "--out", &out], move |c| {
        c.envs(envs);
    })
    .wait(RUN_LIMIT)
}

fn context(out: &Finished, received: &str) -> String {
    format!("exit {:?}\nstdout:\n{}\nstderr:\n{}\nthe server received:\n{received:?}", out.code, out.stdout, out.stderr)
}

/// The finding of #31: a token saved from a response, holding
/// "\r\nX-Evil: 1\r\n\r\nGET /other ...", went into a header and a path as is
/// (a smuggled header and a second request) and the run reported 0 % errors.
/// Now each such request is refused as `unsafe_value`, counted in the errors
/// (the run fails its `errors < 1%`), shown in the end summary, and the
/// server receives the login and nothing else: no header, no second request,
/// no refused request at all.
#[test]
fn a_saved_value_with_crlf_is_refused_and_never_reaches_the_server() {
    let _cpu = shared();
    let wd = Workdir::new("smuggle-saved");
    let server = Recorder::start(&wd);
    let yaml = format!(
        "name: smuggle\ntarget: http://127.0.0.1:{}\n\
         setup:\n  - {{ name: login, request: POST /login, json: {{ user: u }}, save: {{ token: $.token }} }}\n\
         flows:\n\
         \x20 header: {{ steps: [ {{ name: orders, request: GET /orders, headers: {{ Authorization: \"Bearer ${{token}}\" }} }} ] }}\n\
         \x20 path: {{ steps: [ {{ name: search, request: \"GET /search?t=${{token}}\" }} ] }}\n\
         load: {{ stages: [ {{ rate: 10, hold: 1s }} ] }}\n",
        server.server.port(0)
    );
    let out = run(&wd, "saved.yaml", &yaml, &[]);
    let received = server.received();
    let ctx = context(&out, &received);
    out.assert_exit(1);
    let s = wd.summary(&out);
    assert_eq!(s["total"]["failures"], json!({ "unsafe_value": 10 }), "{ctx}");
    assert_eq!(s["total"]["sent"], 10, "{ctx}");
    assert_eq!(s["slo"][0]["passed"], false, "errors < 1% fails: 100 % of the requests were refused\n{ctx}");
    for step in ["orders", "search"] {
        let st = s["steps"].as_array().unwrap().iter().find(|x| x["name"] == step).expect(step);
        assert_eq!(st["failures"], json!({ "unsafe_value": 5 }), "{step}\n{ctx}");
    }
    assert!(format!("{}{}", out.stdout, out.stderr).contains("unsafe_value"), "the summary shows the kind\n{ctx}");
    // Setup's login, once, and nothing else.
    assert_eq!(received.matches("POST /login HTTP/1.1\r\n").count(), 1, "{ctx}");
    for never in ["X-Evil", "/other", "/orders", "/search"] {
        assert!(!received.contains(never), "`{never}` reached the server\n{ctx}");
    }
}

/// `${env.X}` and a CSV field with CR/LF, in a header and in a WebSocket
/// upgrade's path, are refused like a saved value; the CSV's clean rows go
/// out; a path with a space (literal and from a value) arrives
/// percent-encoded.
#[test]
fn env_and_csv_values_are_refused_and_spaces_arrive_encoded() {
    let _cpu = shared();
    let wd = Workdir::new("smuggle-env-csv");
    let server = Recorder::start(&wd);
    std::fs::write(wd.path.join("users.csv"), "name\nalice\n\"bob\r\nX-Evil: 1\"\n").unwrap();
    let yaml = format!(
        "name: smuggle-env\ntarget: http://127.0.0.1:{}\n\
         data: {{ users: {{ csv: users.csv, mode: cycle }} }}\n\
         flows:\n\
         \x20 env: {{ steps: [ {{ name: env, request: GET /env, headers: {{ X-Token: \"${{env.TOKEN}}\" }} }} ] }}\n\
         \x20 csv: {{ steps: [ {{ name: csv, request: GET /csv, headers: {{ X-User: \"${{users.name}}\" }} }} ] }}\n\
         \x20 space: {{ steps: [ {{ name: space, request: \"GET /a b/search?q=${{env.Q}}\" }} ] }}\n\
         \x20 ws: {{ steps: [ {{ name: ws, websocket: \"/ws?t=${{env.TOKEN}}\" }} ] }}\n\
         load: {{ stages: [ {{ rate: 12, hold: 1s }} ] }}\n",
        server.server.port(0)
    );
    let out = run(&wd, "env.yaml", &yaml, &[("TOKEN", "t\r\nX-Evil: 1"), ("Q", "two words")]);
    let received = server.received();
    let ctx = context(&out, &received);
    let s = wd.summary(&out);
    // 12 arrivals, 3 per flow: env 3, ws 3 and csv's one `bob` row (of alice, bob, alice) refused.
    assert_eq!(s["total"]["failures"], json!({ "unsafe_value": 7 }), "{ctx}");
    let step = |name: &str| s["steps"].as_array().unwrap().iter().find(|x| x["name"] == name).expect(name).clone();
    assert_eq!(step("csv")["failures"], json!({ "unsafe_value": 1 }), "{ctx}");
    assert_eq!(step("ws")["failures"], json!({ "unsafe_value": 3 }), "{ctx}");
    assert_eq!(received.matches("GET /csv HTTP/1.1\r\n").count(), 2, "{ctx}");
    assert_eq!(received.matches("X-User: alice\r\n").count(), 2, "{ctx}");
    assert_eq!(
        received.matches("GET /a%20b/search?q=two%20words HTTP/1.1\r\n").count(),
        3,
        "the space in the literal path and in the value, encoded\n{ctx}"
    );
    for never in ["X-Evil", "/env", "/ws", "Upgrade", "bob"] {
        assert!(!received.contains(never), "`{never}` reached the server\n{ctx}");
    }
}

/// Over HTTP/2 (where HPACK would carry the CR/LF as it is) and as gRPC
/// metadata, an `${env.X}` value with CR/LF is refused before any stream:
/// nginx logs the clean requests and none of the others.
#[test]
fn http2_headers_and_grpc_metadata_refuse_crlf_too() {
    let _cpu = shared();
    let nginx = kit::nginx_h2(&kit::H2Config::default());
    let wd = Workdir::new("smuggle-h2");
    let port = nginx.addr().port();
    let yaml = format!(
        "name: smuggle-h2\ntarget: h2c://127.0.0.1:{port}\n\
         flows:\n\
         \x20 f: {{ steps: [ {{ name: ok, request: GET /ok }}, {{ name: evil, request: GET /evil, headers: {{ x-token: \"${{env.TOKEN}}\" }} }} ] }}\n\
         load: {{ stages: [ {{ rate: 5, hold: 1s }} ] }}\n"
    );
    let out = run(&wd, "h2.yaml", &yaml, &[("TOKEN", "t\r\nx-evil: 1")]);
    let log = kit::access_log(&nginx);
    let ctx = context(&out, &format!("{log:?}"));
    let s = wd.summary(&out);
    assert_eq!(s["total"]["failures"], json!({ "unsafe_value": 5 }), "{ctx}");
    assert_eq!(log.len(), 5, "the five clean requests, none of the refused\n{ctx}");

    let wd2 = Workdir::new("smuggle-grpc");
    std::fs::write(wd2.path.join("echo.proto"), kit::grpc::ECHO_PROTO).unwrap();
    let yaml = format!(
        "name: smuggle-grpc\ntarget: grpc://127.0.0.1:{port}\n\
         flows:\n\
         \x20 f: {{ steps: [ {{ name: say, grpc: bench.Echo/Say, proto: echo.proto, message: {{ text: hi }}, metadata: {{ authorization: \"Bearer ${{env.TOKEN}}\" }} }} ] }}\n\
         load: {{ stages: [ {{ rate: 5, hold: 1s }} ] }}\n"
    );
    let out = run(&wd2, "grpc.yaml", &yaml, &[("TOKEN", "t\r\nx-evil: 1")]);
    let after = kit::access_log(&nginx);
    let ctx = context(&out, &format!("{after:?}"));
    let s = wd2.summary(&out);
    assert_eq!(s["total"]["failures"], json!({ "unsafe_value": 5 }), "{ctx}");
    assert_eq!(after.len(), 5, "no gRPC call reached nginx\n{ctx}");
}

/// `perfops check` refuses a literal CR/LF in a header value at the column
/// of its escape, with a hint on YAML's double quotes; `quick -H` refuses a
/// header name that is not a token (a space, non-ASCII), before sending.
#[test]
fn check_and_quick_refuse_literal_crlf_where_it_is_written() {
    let _cpu = shared();
    let wd = Workdir::new("smuggle-check");
    let server = Recorder::start(&wd);
    let yaml = format!(
        "name: literal\ntarget: http://127.0.0.1:{}\nflows:\n  f:\n    steps:\n      - request: GET /\n        headers: {{ X-A: \"a\\r\\nX-Evil: 1\" }}\n\
         load: {{ stages: [ {{ rate: 1, hold: 1s }} ] }}\n",
        server.server.port(0)
    );
    let file = wd.scenario("literal.yaml", &yaml).display().to_string();
    let check = spawn_perfops(&["check", &file], |_| {}).wait(RUN_LIMIT);
    check.assert_exit(2);
    // `        headers: { X-A: "a\r\n...`: the quote is column 25, `\r` column 27.
    assert!(check.stderr.contains("literal.yaml:7:27: error: a header value cannot hold CR (\\r)"), "{}", check.stderr);
    assert!(check.stderr.contains("hint: in double quotes YAML turns"), "{}", check.stderr);

    let url = format!("http://127.0.0.1:{}/", server.server.port(0));
    for header in ["X Evil: 1", "X-\u{e9}: 1"] {
        let out = spawn_perfops(&["quick", &url, "-n", "1", "-H", header], |_| {}).wait(RUN_LIMIT);
        out.assert_exit(2);
    }
    assert_eq!(server.received(), "", "nothing was sent");
}
