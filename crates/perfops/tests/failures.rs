//! Issue #32, want 4: failures shown with what was expected and what came.
//! The real binary runs against a real server on loopback (the testkit's
//! Python shop, whose refusals say why): a step that gets a 422, one whose
//! JSON check fails and one whose server echoes the request's secret
//! `Authorization` back. The terminal summary, `summary.json` and the report
//! name the step, the status, expected vs found and the body's first bytes;
//! the `${env.*}` secret is nowhere in what the run printed or wrote. And a
//! failed setup says the same of its step instead of `check_failed`.

mod common;

use std::path::Path;

use common::{RUN_LIMIT, Workdir, shared};

/// The environment value sent as the bearer token: finding it anywhere is a leak.
const SECRET: &str = "sekret-env-32a7f";

const SCENARIO: &str = r#"name: failures
target: TARGET
defaults:
  headers: { Authorization: "Bearer ${env.SHOP_SECRET}" }
flows:
  order:
    steps:
      - name: create-order
        request: POST /orders
        json: { qty: "3" }
        expect: { status: 201 }
  look:
    steps:
      - name: get-order
        request: GET /orders/7
        expect: { json: { "$.status": shipped } }
  echo:
    steps:
      - name: echo
        request: GET /echo
load:
  stages: [ { rate: 30, hold: 2s } ]
"#;

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read the results directory") {
        let p = e.expect("an entry").path();
        if p.is_dir() { out.extend(files(&p)) } else { out.push(p) }
    }
    out
}

/// #32: a 422, a failed JSON check and a 5xx are each shown with their
/// step, status, expected vs found and body head, in the terminal,
/// `summary.json` and the report; the secret is in none of them.
#[test]
fn failures_say_what_was_expected_and_what_came_without_secrets() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("failures");
    let scenario = wd.scenario("failures.yaml", &SCENARIO.replace("TARGET", &shop.url(0)));
    let out = wd
        .spawn("run", &scenario, &[], |c| {
            c.env("SHOP_SECRET", SECRET);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(1);

    // The terminal: each step with its count, expected vs found and the body head.
    let said = &out.stdout;
    for line in [
        r#"create-order: 20 http_4xx, e.g. status: expected 201, found 422 (body: {"error":"qty must be a number","got":"3"})"#,
        r#"get-order: 20 check_failed, e.g. $.status: expected "shipped", found "new" (status 200) (body: {"id":7,"status":"new"})"#,
        r#"echo: 20 http_5xx, e.g. http_5xx (status 500) (body: {"error":"you sent Bearer <redacted>"})"#,
    ] {
        assert!(said.lines().any(|l| l.trim() == line), "want {line:?} in stdout:\n{said}");
    }

    // summary.json: every (step, kind) with its count and its first three samples.
    let summary = wd.summary(&out);
    let failures = summary["failures"].as_array().unwrap_or_else(|| panic!("no failures in {summary:#}"));
    let group = |step: &str| {
        failures.iter().find(|g| g["step"] == step).unwrap_or_else(|| panic!("no {step} in {failures:#?}"))
    };
    let order = group("create-order");
    assert_eq!((order["kind"].as_str(), order["count"].as_u64()), (Some("http_4xx"), Some(20)), "{order:#}");
    let samples = order["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 3, "the first three by time: {order:#}");
    assert_eq!(samples[0]["status"], 422);
    assert_eq!(samples[0]["check"], "status: expected 201, found 422");
    assert_eq!(samples[0]["body"], r#"{"error":"qty must be a number","got":"3"}"#);
    let times: Vec<f64> = samples.iter().map(|s| s["t"].as_f64().expect("t")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "first by time: {times:?}");
    assert_eq!(group("get-order")["samples"][0]["check"], r#"$.status: expected "shipped", found "new""#);
    assert_eq!(group("echo")["samples"][0]["body"], r#"{"error":"you sent Bearer <redacted>"}"#);

    // The report: a failures table with the same.
    let dir = wd.result_dir(&out);
    let report = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(report.contains("<h2>Failures</h2>"), "no failures table in the report");
    assert!(report.contains("status: expected 201, found 422"), "no expected vs found in the report");
    assert!(report.contains("qty must be a number"), "no body head in the report");

    // The secret: in nothing printed, in no file written.
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET), "the secret was printed");
    for f in files(&dir) {
        let bytes = std::fs::read(&f).expect("read a result file");
        let leaked = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
        assert!(!leaked, "the secret is in {}", f.display());
    }
}

/// #32: a failed setup says what its step expected and what came, with the
/// body's first bytes, instead of the bare kind (`check_failed`).
#[test]
fn a_failed_setup_says_what_was_expected_and_what_came() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("failed-setup");
    let yaml = r#"name: failed-setup
target: TARGET
setup:
  - name: login
    request: POST /login
    json: { user: bob, password: wrong }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  orders:
    steps:
      - { request: "GET /orders/7", headers: { Authorization: "Bearer ${token}" } }
load:
  stages: [ { rate: 1, hold: 1s } ]
"#;
    let scenario = wd.scenario("failed-setup.yaml", &yaml.replace("TARGET", &shop.url(0)));
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    let want = r#"setup step `login` failed: status: expected 200, found 401 (body: {"error":"bad password"})"#;
    assert!(out.stderr.contains(want), "want {want:?} in stderr:\n{}", out.stderr);
    assert_ne!(out.code, Some(0), "a failed setup fails the run");
}

/// #32: `run --debug` runs setup, then each flow once, and prints each
/// exchange once (request, response, what was saved, the outcome), with the
/// `${env.*}` secret and the saved token redacted, setup's values in the
/// flows after it; a failed exchange makes
/// it exit 1; it writes no results directory.
#[test]
fn debug_prints_each_exchange_once_with_secrets_redacted() {
    let _cpu = shared();
    let shop = perfops_testkit::python::shop();
    let wd = Workdir::new("debug");
    let yaml = r#"name: debug
target: TARGET
defaults:
  headers: { Authorization: "Bearer ${env.SHOP_SECRET}" }
setup:
  - name: login
    request: POST /login
    json: { user: bob, password: right }
    expect: { status: 200 }
    save: { token: $.token }
flows:
  buy:
    steps:
      - name: create-order
        request: POST /orders
        json: { qty: 3 }
        expect: { status: 201 }
        save: { id: $.id }
      - name: get-order
        request: GET /orders/${id}?t=${token}
        expect: { json: { "$.status": new } }
  echo:
    weight: 5
    steps:
      - name: echo
        request: GET /echo
load:
  stages: [ { rate: 50, hold: 10s } ]
"#;
    let scenario = wd.scenario("debug.yaml", &yaml.replace("TARGET", &shop.url(0)));
    let out = wd
        .spawn("run", &scenario, &["--debug"], |c| {
            c.env("SHOP_SECRET", SECRET);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(1);
    let said = &out.stdout;
    // Each exchange once, in order: setup, then each flow once whatever its weight.
    let heads: Vec<&str> = said.lines().filter(|l| l.starts_with("== ")).collect();
    let names: Vec<String> = heads.iter().map(|l| l.split("  ").next().unwrap_or("").to_string()).collect();
    assert_eq!(
        names,
        ["== setup / login", "== buy / create-order", "== buy / get-order", "== echo / echo"],
        "stdout:\n{said}"
    );
    assert!(heads[1].ends_with("ok") && heads[2].ends_with("ok"), "{heads:?}");
    assert!(heads[3].ends_with("FAILED http_5xx"), "{heads:?}");
    for want in [
        "> POST /orders HTTP/1.1",
        r#"> {"qty":3}"#,
        "> Authorization: <redacted>",
        "< HTTP/1.1 201 Created",
        r#"< {"id":7}"#,
        "  saved id = 7",
        "  saved token = <redacted>",
        // setup's token went with the flows (before, it rendered empty: `?t=`)
        "> GET /orders/7?t=<redacted> HTTP/1.1",
        r#"< {"error":"you sent Bearer <redacted>"}"#,
        "4 exchange(s), 1 failed (each failed step ends its flow)",
    ] {
        assert!(said.lines().any(|l| l == want), "want the line {want:?} in stdout:\n{said}");
    }
    for secret in [SECRET, "tok-from-login-5f3"] {
        assert!(!said.contains(secret) && !out.stderr.contains(secret), "{secret} was printed:\n{said}");
    }
    assert!(wd.result_dirs().is_empty(), "--debug writes no results directory");
}

/// A server whose failures show what an exchange holds: `POST /login`
/// answers a token; `GET /slow` answers after 3 s (past the scenario's
/// timeout); anything else is a 400 with a cookie set, a trace header and a
/// hostile HTML body of 3 KiB whose scripts would mark the page that shows
/// it (`pwned`) if they ran.
const EXCHANGES: &str = r#"
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *args):
        pass
    def send(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self.send(200, [('Content-Type', 'application/json')], b'{"token":"tok-login-9d2c71"}')
    def do_GET(self):
        if self.path.startswith('/slow'):
            time.sleep(3)
            self.send(200, [], b'late')
            return
        body = ('<script>document.title="pwned";parent.pwned=1</script>'
                '<img src=x onerror="parent.pwned=2">' + 'x' * 3000).encode()
        self.send(400, [('Content-Type', 'text/html'), ('Set-Cookie', 'sid=cookie-secret-77; HttpOnly'),
                        ('X-Trace', 'trace-1')], body)
server = ThreadingHTTPServer(('127.0.0.1', 0), H)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The saved token and the cookie the server set: secrets too.
const TOKEN: &str = "tok-login-9d2c71";
const COOKIE: &str = "cookie-secret-77";

const EXCHANGES_SCENARIO: &str = r#"name: exchanges
target: TARGET
defaults:
  timeout: 500ms
  headers: { Authorization: "Bearer ${env.SHOP_SECRET}" }
setup:
  - name: login
    request: POST /login
    json: { user: bob }
    save: { token: $.token }
flows:
  bad:
    steps:
      - name: bad
        request: GET /bad?session=${token}&page=2
        headers: { X-Session: "${token}" }
  slow:
    steps:
      - name: slow
        request: GET /slow
load:
  stages: [ { rate: 20, hold: 2s } ]
"#;

/// The lines of `failures.jsonl` in `dir`.
fn failure_lines(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("failures.jsonl")).expect("failures.jsonl");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Whether `fields` ([[name, value], ...]) holds `name` with `value`.
fn has_field(fields: &serde_json::Value, name: &str, value: &str) -> bool {
    fields.as_array().is_some_and(|a| a.iter().any(|f| f[0] == name && f[1] == value))
}

/// Want 4 of the live-report issue: each failure kind of each step keeps
/// its first exchanges as they were, in `failures.jsonl` (written with their
/// second), `summary.json` and the report: the request line with the saved
/// token gone from the query, `Authorization` and a header holding the
/// token redacted, the status, the response's header fields with
/// `Set-Cookie` redacted, the first KiB of the body, and the timings; a
/// timeout too (no answer: its request and timings). In Chromium the
/// report's exchanges open and show the hostile body as text, and none of
/// its scripts runs. Without `summary.json` (a killed run), `report` shows
/// them from `failures.jsonl`.
#[test]
fn failing_exchanges_are_kept_as_they_were() {
    let _cpu = shared();
    let server = perfops_testkit::python::script(EXCHANGES, &[]);
    let wd = Workdir::new("exchanges");
    let scenario = wd.scenario("exchanges.yaml", &EXCHANGES_SCENARIO.replace("TARGET", &server.url(0)));
    let out = wd
        .spawn("run", &scenario, &[], |c| {
            c.env("SHOP_SECRET", SECRET);
        })
        .wait(RUN_LIMIT);
    out.assert_exit(1);
    let dir = wd.result_dir(&out);

    // failures.jsonl: the first few of each step and kind, with the exchange.
    let lines = failure_lines(&dir);
    let of = |step: &str, kind: &str| -> Vec<&serde_json::Value> {
        lines.iter().filter(|l| l["step"] == step && l["kind"] == kind).collect()
    };
    let (bad, slow) = (of("bad", "http_4xx"), of("slow", "timeout"));
    assert!((1..=3).contains(&bad.len()) && (1..=3).contains(&slow.len()), "{lines:#?}");
    assert_eq!(lines.len(), bad.len() + slow.len(), "nothing else failed: {lines:#?}");
    let b = bad[0];
    assert_eq!(b["request"], "GET /bad?session=<redacted>&page=2 HTTP/1.1", "{b:#}");
    assert!(has_field(&b["request_headers"], "Authorization", "<redacted>"), "{b:#}");
    assert!(has_field(&b["request_headers"], "X-Session", "<redacted>"), "a saved secret's header: {b:#}");
    assert!(has_field(&b["request_headers"], "Host", &server.url(0).replace("http://", "")), "{b:#}");
    assert_eq!(b["status"], 400);
    assert!(has_field(&b["response_headers"], "Set-Cookie", "<redacted>"), "{b:#}");
    assert!(has_field(&b["response_headers"], "X-Trace", "trace-1"), "{b:#}");
    let body = b["body"].as_str().expect("a body head");
    assert!(body.starts_with("<script>document.title=") && body.ends_with('…'), "{body}");
    assert!(body.len() <= 1024 && body.len() > 900, "the first KiB: {} bytes", body.len());
    let t = &b["timings"];
    let (due, sent) = (t["due"].as_f64().expect("due"), t["sent"].as_f64().expect("sent"));
    assert!(due >= 0.0 && sent >= due - 0.001 && sent < 2.5, "{t:#}");
    assert!(t["latency_ms"].as_f64().expect("latency") >= t["service_ms"].as_f64().expect("service") - 0.01, "{t:#}");
    // The timeout: no answer, its request as sent and the time it took.
    let s = slow[0];
    assert_eq!(s["request"], "GET /slow HTTP/1.1", "{s:#}");
    assert!(s.get("status").is_none() && s.get("body").is_none(), "{s:#}");
    let latency = s["timings"]["latency_ms"].as_f64().expect("latency");
    assert!((450.0..1500.0).contains(&latency), "timed out at 500 ms: {latency}");

    // summary.json: the same exchanges in its groups.
    let summary = wd.summary(&out);
    let group = summary["failures"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["step"] == "bad"))
        .unwrap_or_else(|| panic!("{summary:#}"));
    assert_eq!(group["samples"][0]["request"], b["request"]);
    assert_eq!(group["samples"][0]["response_headers"], b["response_headers"]);

    // Secrets: in no file written, nothing printed.
    for secret in [SECRET, TOKEN, COOKIE] {
        assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret), "{secret} was printed");
        for f in files(&dir) {
            let bytes = std::fs::read(&f).expect("read a result file");
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} in {}", f.display());
        }
    }

    // The report in Chromium: the exchanges open and show text; no script of the body ran.
    let report = dir.join("report.html");
    let seen = exchanges_in_browser(&wd, &report);
    assert_eq!(seen["pwned"], "no", "a script of the hostile body ran: {seen:#}");
    assert_eq!(seen["title"], "clean", "{seen:#}");
    let opened = seen["opened"].as_str().unwrap_or("").parse::<usize>().unwrap_or(0);
    assert_eq!(opened, bad.len() + slow.len(), "one <details> per exchange, all open: {seen:#}");
    let text = seen["text"].as_str().unwrap_or("");
    for want in [
        "GET /bad?session=<redacted>&page=2 HTTP/1.1",
        "Authorization: <redacted>",
        "Set-Cookie: <redacted>",
        "X-Trace: trace-1",
        "<script>document.title=",
        "GET /slow HTTP/1.1",
        "latency",
    ] {
        assert!(text.contains(want), "want {want:?} shown as text in the opened exchanges:\n{text}");
    }

    // A killed run leaves no summary.json: `report` shows failures.jsonl's exchanges.
    std::fs::remove_file(dir.join("summary.json")).expect("remove summary.json");
    let again = common::spawn_perfops(&["report", dir.to_str().expect("a UTF-8 path")], |_| {}).wait(RUN_LIMIT);
    again.assert_exit(0);
    let html = std::fs::read_to_string(&report).expect("report.html");
    assert!(html.contains("No summary.json (the run was killed)"), "{}", again.stderr);
    assert!(html.contains("GET /bad?session=&lt;redacted&gt;&amp;page=2 HTTP/1.1"), "escaped as text");
}

/// Open `report` in Chromium inside a wrapper page that opens every
/// exchange's `<details>` and records, on its own `<body>`, how many it
/// opened, their text, whether a hostile script set `pwned` on it, and
/// whether the report's title was changed.
fn exchanges_in_browser(wd: &Workdir, report: &Path) -> serde_json::Value {
    let wrapper = wd.path.join("exchanges-wrapper.html");
    std::fs::write(
        &wrapper,
        format!(
            r#"<!doctype html><html><body><iframe id="r" src="file://{}" style="width:1200px;height:2000px"></iframe>
<script>
window.pwned = undefined;
setTimeout(function () {{
  var d = document.getElementById("r").contentDocument;
  var all = d.querySelectorAll(".exchanges details");
  all.forEach(function (x) {{ x.open = true; }});
  var text = "";
  d.querySelectorAll(".exchanges details").forEach(function (x) {{ text += x.innerText + "\n"; }});
  document.body.setAttribute("data-opened", String(all.length));
  document.body.setAttribute("data-text", text);
  document.body.setAttribute("data-pwned", window.pwned === undefined ? "no" : String(window.pwned));
  document.body.setAttribute("data-title", d.title === "pwned" ? "pwned" : "clean");
}}, 1500);
</script></body></html>"#,
            report.display()
        ),
    )
    .expect("write the wrapper");
    let dom = common::browser::chromium(
        &format!("file://{}", wrapper.display()),
        &["--allow-file-access-from-files", "--window-size=1300,2100", "--dump-dom"],
    );
    // The DOM's attributes are HTML-escaped: read back as the page's text.
    let attr = |a: &str| {
        let raw = common::browser::attr(&dom, "<body", a).unwrap_or_default();
        raw.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&")
    };
    serde_json::json!({
        "opened": attr("data-opened"),
        "text": attr("data-text"),
        "pwned": attr("data-pwned"),
        "title": attr("data-title"),
    })
}

/// A run that fails every request for 20 s (a 404 path of the demo, 100/s)
/// keeps the first three exchanges in failures.jsonl and summary.json, not
/// one more: bounded on disk whatever the failure rate.
#[test]
fn a_run_that_always_fails_keeps_a_bounded_number_of_exchanges() {
    let _cpu = shared();
    let demo = common::Demo::start(&[]);
    let wd = Workdir::new("always-fails");
    let yaml = format!(
        "name: always-fails\ntarget: {}\nflows:\n  f:\n    steps:\n      - {{ name: nope, request: GET /nope }}\n\
         load:\n  stages: [ {{ rate: 100, hold: 20s }} ]\n",
        demo.url
    );
    let scenario = wd.scenario("always-fails.yaml", &yaml);
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(std::time::Duration::from_secs(60));
    out.assert_exit(1);
    let dir = wd.result_dir(&out);
    let lines = failure_lines(&dir);
    assert_eq!(lines.len(), 3, "the first three of the one step and kind: {lines:#?}");
    assert!(lines.iter().all(|l| l["step"] == "nope" && l["kind"] == "http_4xx" && l["status"] == 404));
    let bytes = std::fs::metadata(dir.join("failures.jsonl")).expect("failures.jsonl").len();
    assert!(bytes < 8 * 1024, "failures.jsonl is {bytes} bytes");
    let summary = wd.summary(&out);
    let g = &summary["failures"][0];
    assert!(g["count"].as_u64().unwrap_or(0) >= 1900, "every failure counted: {g:#}");
    assert_eq!(g["samples"].as_array().map(Vec::len), Some(3), "{g:#}");
}

/// `quick --failures` prints each failing kind's exchanges after the
/// summary; `--json` holds them whatever the flag.
#[test]
fn quick_prints_the_failing_exchanges_on_request() {
    let _cpu = shared();
    let demo = common::Demo::start(&[]);
    let url = format!("{}/nope?page=2", demo.url);
    let out = common::quick(&[&url, "-n", "20", "-c", "2", "-H", "Authorization: Bearer quick-secret-5", "--failures"]);
    assert_eq!(out.code, Some(1), "{}", out.dump());
    let said = &out.stdout;
    let from = said.find("Failures, the first of each kind as they were").unwrap_or_else(|| panic!("{said}"));
    let block = &said[from..];
    for want in [
        "  GET /nope?page=2 http_4xx: 20 failed",
        "      > GET /nope?page=2 HTTP/1.1",
        "      > Authorization: <redacted>",
        "      < status 404",
    ] {
        assert!(block.lines().any(|l| l == want), "want {want:?} in:\n{block}");
    }
    assert!(!said.contains("quick-secret-5"), "{said}");
    let json = out.json();
    let samples = &json["exchanges"][0]["samples"];
    assert_eq!(samples.as_array().map(Vec::len), Some(3), "{json:#}");
    assert_eq!(samples[0]["request"], "GET /nope?page=2 HTTP/1.1");
    // Without the flag: the summary alone on the terminal, the exchanges still in the JSON.
    let plain = common::quick(&[&url, "-n", "5", "-c", "1"]);
    assert!(!plain.stdout.contains("Failures, the first"), "{}", plain.stdout);
    assert_eq!(plain.json()["exchanges"][0]["kind"], "http_4xx");
}

/// 128 bits, as a strong fleet token is.
const FLEET_TOKEN: &str = "7d3e0b9a4c1f6e2850a9d7c3b1e4f609";

/// A coordinator of `agents` for `scenario` on a free loopback port, and its join URL.
fn coordinator(wd: &Workdir, scenario: &Path, agents: usize) -> (common::Running, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let listen = format!("127.0.0.1:{port}");
    let n = agents.to_string();
    let args = ["--agents", n.as_str(), "--listen", listen.as_str(), "--workers", "1", "--join-timeout", "20s"];
    let running = wd.spawn("coordinator", scenario, &args, |c| {
        c.env("PERFOPS_TOKEN", FLEET_TOKEN);
    });
    (running, format!("https://{listen}"))
}

/// `perfops agent --join URL EXTRA...`.
fn agent(url: &str, extra: &[&str]) -> common::Running {
    let mut args = vec!["agent", "--join", url, "--connect-timeout", "20s"];
    args.extend_from_slice(extra);
    common::spawn_perfops(&args, |c| {
        c.env("PERFOPS_TOKEN", FLEET_TOKEN).env_remove("JOB_COMPLETION_INDEX");
    })
}

/// A fleet of two agents failing every request: the agents send their
/// exchanges with their seconds, so the coordinator's failures.jsonl and
/// summary have them (before, its summary had counts only).
#[test]
fn a_fleets_summary_has_its_agents_exchanges() {
    let _cpu = shared();
    let demo = common::Demo::start(&[]);
    let wd = Workdir::new("fleet-exchanges");
    let yaml = format!(
        "name: fleet-exchanges\ntarget: {}\nflows:\n  f:\n    steps:\n      - {{ name: nope, request: GET /nope }}\n\
         load:\n  stages: [ {{ rate: 20, hold: 2s }} ]\n",
        demo.url
    );
    let scenario = wd.scenario("fleet.yaml", &yaml);
    let (coord, url) = coordinator(&wd, &scenario, 2);
    let agents: Vec<common::Running> = (0..2).map(|_| agent(&url, &[])).collect();
    let out = coord.wait(RUN_LIMIT);
    let said: Vec<String> = agents.into_iter().map(|a| a.wait(RUN_LIMIT).stderr).collect();
    assert_eq!(out.code, Some(1), "{}\n{said:#?}", out.dump());
    let summary = wd.summary(&out);
    let g = &summary["failures"][0];
    assert_eq!((g["step"].as_str(), g["count"].as_u64()), (Some("nope"), Some(40)), "{g:#}");
    let samples = g["samples"].as_array().unwrap_or_else(|| panic!("no samples: {g:#}"));
    assert_eq!(samples.len(), 3, "the fleet's first three by time: {g:#}");
    assert!(samples.iter().all(|s| s["request"] == "GET /nope HTTP/1.1" && s["status"] == 404), "{g:#}");
    let lines = failure_lines(&wd.result_dir(&out));
    assert!((1..=3).contains(&lines.len()), "{lines:#?}");
}

/// A replayed agent (`--replay-seconds`) whose second carries a failure
/// sample of a step the plan does not have is refused and named by the
/// coordinator, like any second outside the plan; the honest agent's sample
/// is kept, escaped as it was sent.
#[test]
fn an_agents_sample_outside_the_plan_is_refused() {
    use perfops_core::fleet::wire::{Message, encode};
    use perfops_core::measure::{FailureKind, FailureSample, Interval, Key, Stats};
    let _cpu = shared();
    let wd = Workdir::new("fleet-samples");
    let yaml = "name: fleet-samples\ntarget: http://127.0.0.1:9\nflows:\n  f:\n    steps:\n      \
                - { name: only, request: GET / }\nload:\n  stages: [ { rate: 10, hold: 2s } ]\n";
    let scenario = wd.scenario("s.yaml", yaml);
    let second = |step: u16| {
        let mut st = Stats { sent: 5, completed: 5, iterations: 5, arrivals_answered: 5, ..Stats::default() };
        st.failures.add_n(FailureKind::Http5xx, 5);
        for _ in 0..5 {
            let d = std::time::Duration::from_millis(3);
            st.latency.record(d);
            st.service.record(d);
        }
        let mut iv = Interval {
            length: std::time::Duration::from_secs(1),
            stats: st.clone(),
            parts: vec![(Key { stage: 0, step: 0 }, st)],
            ..Interval::empty(0)
        };
        let sample = FailureSample {
            t: 0.5,
            status: Some(503),
            body: Some("busy \u{1b}[2J".into()),
            request: Some("GET / HTTP/1.1".into()),
            ..FailureSample::default()
        };
        iv.samples.add((step, FailureKind::Http5xx), sample);
        encode(&Message::Second(Box::new(iv)))
    };
    let (honest, rogue) = (wd.path.join("honest.frames"), wd.path.join("rogue.frames"));
    std::fs::write(&honest, second(0)).expect("write frames");
    std::fs::write(&rogue, second(9)).expect("write frames");
    let (coord, url) = coordinator(&wd, &scenario, 2);
    let agents: Vec<common::Running> = [&honest, &rogue]
        .iter()
        .enumerate()
        .map(|(i, f)| agent(&url, &["--index", &i.to_string(), "--replay-seconds", f.to_str().expect("UTF-8")]))
        .collect();
    let out = coord.wait(RUN_LIMIT);
    let said: Vec<String> = agents.into_iter().map(|a| a.wait(RUN_LIMIT).stderr).collect();
    let ctx = format!("{}\n{said:#?}", out.dump());
    assert_eq!(out.code, Some(1), "{ctx}");
    assert!(out.stderr.contains("a failure sample of step 9, where the plan has 1"), "{ctx}");
    let summary = wd.summary(&out);
    assert_eq!(summary["verdict"]["result"], "inconclusive", "{ctx}");
    let g = &summary["failures"][0];
    // The honest agent's sample, once per second it replayed (its frame loops for the load).
    let samples = g["samples"].as_array().unwrap_or_else(|| panic!("no samples: {g:#}"));
    assert!(!samples.is_empty() && samples.len() <= 3, "{g:#}");
    assert!(samples.iter().all(|s| s["body"] == "busy \\u{1b}[2J"), "escaped: {g:#}");
}

/// A run killed (SIGKILL) in the middle keeps the exchanges its seconds
/// had written to failures.jsonl, and `perfops report` shows them from
/// there, since the run wrote no summary.json.
#[test]
fn a_killed_run_keeps_its_exchanges_and_its_report_shows_them() {
    let _cpu = shared();
    let demo = common::Demo::start(&[]);
    let wd = Workdir::new("killed-exchanges");
    let yaml = format!(
        "name: killed\ntarget: {}\nflows:\n  f:\n    steps:\n      - {{ name: nope, request: GET /nope }}\n\
         load:\n  stages: [ {{ rate: 50, hold: 60s }} ]\n",
        demo.url
    );
    let scenario = wd.scenario("killed.yaml", &yaml);
    let running = wd.spawn("run", &scenario, &[], |_| {});
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let file = loop {
        let found = wd.result_dirs().first().map(|d| d.join("failures.jsonl")).filter(|f| f.exists());
        if let Some(f) = found {
            break f;
        }
        if std::time::Instant::now() > deadline {
            // Not left running past the test: it would load the demo for a minute.
            common::send_signal("-KILL", running.pid());
            panic!("no failures.jsonl after 20 s: {}", running.wait(RUN_LIMIT).dump());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    common::send_signal("-KILL", running.pid());
    let out = running.wait(RUN_LIMIT);
    assert_eq!(out.code, None, "killed by a signal: {}", out.dump());
    let dir = file.parent().expect("the results directory").to_path_buf();
    assert!(!dir.join("summary.json").exists(), "a killed run writes no summary");
    let lines = failure_lines(&dir);
    assert!(!lines.is_empty() && lines.iter().all(|l| l["request"] == "GET /nope HTTP/1.1"), "{lines:#?}");
    let report = common::spawn_perfops(&["report", dir.to_str().expect("UTF-8")], |_| {}).wait(RUN_LIMIT);
    report.assert_exit(0);
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(html.contains("No summary.json (the run was killed)"), "{}", report.stderr);
    assert!(html.contains("<details class=\"exchange\"><summary>nope · http_4xx"), "the exchanges shown");
}
