//! Cookies handled as a browser session would: the real binary against a
//! real nginx (`perfops_testkit::nginx_cookies`) that sets a session in two
//! `Set-Cookie` fields and a third cookie whose path is `/shop`, refuses
//! (401/403) a request that lacks them, 409s one that carries a cookie it
//! should not (outside its path, or after the logout deleted it), and checks
//! a value taken with `cookie:NAME` against the cookie itself. Each flow
//! instance has its own jar (the nginx access log shows each arrival's own
//! session), over HTTP/1.1 and HTTP/2; `defaults.cookies: false` turns it
//! off; cookie values never reach what a run writes or `--debug` prints.

mod common;

use std::collections::HashSet;

use common::{RUN_LIMIT, Workdir, shared};
use perfops_testkit::{Nginx, nginx_cookies};
use serde_json::Value;

/// A browser's session: log in, use the app under /shop, go outside it,
/// log out (which deletes `a`), then a page that wants `a` gone and `b` kept.
const SESSION: &str = r#"name: cookies
target: TARGET
flows:
  session:
    steps:
      - { name: fresh, request: GET /fresh }
      - { name: login, request: GET /shop/login }
      - { name: app, request: GET /shop/app }
      - { name: outside, request: GET /outside }
      - { name: logout, request: GET /logout }
      - { name: gone, request: GET /gone }
load:
  stages: [ { rate: 20, hold: 2s } ]
"#;

/// The access log of `n`: (status, uri, the Cookie header as received).
fn log(n: &Nginx) -> Vec<(u16, String, String)> {
    let text = std::fs::read_to_string(n.dir().join("access.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (status, rest) = l.split_once(' ')?;
            let (uri, cookie) = rest.split_once(' ')?;
            Some((status.parse().ok()?, uri.to_string(), cookie.trim_matches('"').to_string()))
        })
        .collect()
}

/// The summary's entry for step `name`.
fn step<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no step {name} in {summary:#}"))
}

/// Run the session against nginx (`h2c`: over HTTP/2), with `extra` flags:
/// the summary, the access log and the exit code.
fn session(h2c: bool, extra: &[&str]) -> (Value, Vec<(u16, String, String)>, Option<i32>) {
    let nginx = nginx_cookies(h2c);
    let wd = Workdir::new("cookies");
    let target = if h2c { format!("h2c://{}", nginx.addr()) } else { format!("http://{}", nginx.addr()) };
    let scenario = wd.scenario("cookies.yaml", &SESSION.replace("TARGET", &target));
    let out = wd.spawn("run", &scenario, extra, |_| {}).wait(RUN_LIMIT);
    let summary = wd.summary(&out);
    (summary, log(&nginx), out.code)
}

/// Each arrival logs in, and its later requests carry its own two session
/// cookies (one `Cookie:` field, the `/shop` cookie first, the longer
/// path), the `/shop` cookie only under `/shop`, and `a` no more once the
/// logout deleted it: not one failure. Fails without a jar: every `app` is
/// refused with 401.
fn the_session_holds(h2c: bool) {
    let (summary, log, code) = session(h2c, &[]);
    assert_eq!(summary["total"]["failed"], 0, "h2c {h2c}: {summary:#}\n{log:?}");
    assert_eq!(code, Some(0), "h2c {h2c}: {summary:#}");
    let logins = step(&summary, "login")["completed"].as_u64().unwrap_or(0);
    assert!(logins >= 30, "h2c {h2c}: ~40 arrivals in 2 s at 20/s: {summary:#}");
    let apps: Vec<&str> = log.iter().filter(|(_, uri, _)| uri == "/shop/app").map(|(_, _, c)| c.as_str()).collect();
    assert_eq!(apps.len() as u64, logins, "h2c {h2c}: {log:?}");
    let mut sessions = HashSet::new();
    for cookie in &apps {
        // `c=C1; a=A<id>; b=B<id>`: the longer path first, then in the order set; one id per login.
        let parts: Vec<&str> = cookie.split("; ").collect();
        assert_eq!(parts.len(), 3, "h2c {h2c}: {cookie:?}");
        assert_eq!(parts[0], "c=C1", "h2c {h2c}: {cookie:?}");
        let (a, b) = (&parts[1]["a=A".len()..], &parts[2]["b=B".len()..]);
        assert!(parts[1].starts_with("a=A") && parts[2].starts_with("b=B") && a == b, "h2c {h2c}: {cookie:?}");
        sessions.insert(a.to_string());
    }
    assert_eq!(sessions.len(), apps.len(), "h2c {h2c}: each arrival its own session: {apps:?}");
    // The logout's deletion: `gone` came with `b` alone.
    for (_, _, cookie) in log.iter().filter(|(_, uri, _)| uri == "/gone") {
        assert!(cookie.starts_with("b=B") && !cookie.contains("a="), "h2c {h2c}: {cookie:?}");
    }
}

/// Over HTTP/1.1.
#[test]
fn each_arrival_keeps_its_session_cookies_over_http1() {
    let _cpu = shared();
    the_session_holds(false);
}

/// Over HTTP/2 (h2c): the answers' `Set-Cookie` fields read from HPACK, the
/// `cookie` field sent in the request's header block.
#[test]
fn each_arrival_keeps_its_session_cookies_over_http2() {
    let _cpu = shared();
    the_session_holds(true);
}

/// A closed-loop user's iterations are sessions of their own, as k6's are:
/// each starts with an empty jar (its `/fresh` came with no cookie), logs in
/// again and runs as the first did.
#[test]
fn each_closed_loop_iteration_starts_a_new_session() {
    let _cpu = shared();
    let closed = "load:\n  model: closed\n  stages: [ { users: 2, hold: 1s } ]\n";
    let nginx = nginx_cookies(false);
    let wd = Workdir::new("cookies-closed");
    let yaml = SESSION.replace("TARGET", &format!("http://{}", nginx.addr()));
    let yaml = format!("{}{closed}", &yaml[..yaml.find("load:").unwrap_or(yaml.len())]);
    let scenario = wd.scenario("closed.yaml", &yaml);
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    let summary = wd.summary(&out);
    let log = log(&nginx);
    let fresh = log.iter().filter(|(_, uri, _)| uri == "/fresh").count();
    assert!(fresh >= 10, "two users loop for 1 s: {summary:#}");
    assert_eq!(summary["total"]["failed"], 0, "{summary:#}\n{log:?}");
    assert!(log.iter().filter(|(_, uri, _)| uri == "/fresh").all(|(s, _, c)| *s == 200 && c == "-"), "{log:?}");
}

/// `defaults.cookies: false`: no jar, the app refuses every arrival (401)
/// and the run fails its default SLO (`errors < 1%`).
#[test]
fn without_the_jar_the_session_is_refused() {
    let _cpu = shared();
    let (summary, log, code) = session(false, &["--set", "defaults.cookies=false"]);
    assert_eq!(code, Some(1), "{summary:#}");
    let app = step(&summary, "app");
    assert!(app["completed"].as_u64().unwrap_or(0) >= 30, "{summary:#}");
    assert!(log.iter().filter(|(_, uri, _)| uri == "/shop/app").all(|(s, _, c)| *s == 401 && c == "-"), "{log:?}");
}

/// `cookie:NAME` takes a cookie's value from the answer's `Set-Cookie`
/// fields (the first of three here) for use elsewhere than in a cookie (a
/// header the server compares with the cookie, as a CSRF check does); the
/// value is a secret: a failing exchange's sample, every results file and
/// `--debug`'s output show neither it nor any cookie's value.
#[test]
fn a_cookie_value_is_saved_for_a_header_and_never_shown() {
    let _cpu = shared();
    let nginx = nginx_cookies(false);
    let wd = Workdir::new("cookie-save");
    let yaml = format!(
        r#"name: cookie-save
target: http://{}
flows:
  csrf:
    steps:
      - {{ name: login, request: GET /shop/login, save: {{ a: "cookie:a" }} }}
      - {{ name: echo, request: GET /echo, headers: {{ X-A: "${{a}}" }} }}
      - {{ name: app, request: GET /shop/app, expect: {{ status: 201 }} }}
load:
  model: closed
  stages: [ {{ users: 1, hold: 1s }} ]
"#,
        nginx.addr()
    );
    let scenario = wd.scenario("save.yaml", &yaml);
    let out = wd.spawn("run", &scenario, &[], |_| {}).wait(RUN_LIMIT);
    let summary = wd.summary(&out);
    // `echo` passed: the header held cookie `a`'s value; `app` failed on purpose, with cookies.
    assert!(step(&summary, "echo")["completed"].as_u64().unwrap_or(0) > 0, "{summary:#}");
    assert_eq!(step(&summary, "echo")["failed"], 0, "{summary:#}");
    assert_eq!(step(&summary, "login")["failed"], 0, "{summary:#}");
    let app = step(&summary, "app");
    assert_eq!(app["failed"], app["completed"], "{summary:#}");
    let ids: HashSet<String> = log(&nginx)
        .iter()
        .filter(|(_, uri, _)| uri == "/shop/app")
        .flat_map(|(_, _, c)| c.split("; ").filter_map(|p| p.split_once('=')).map(|(_, v)| v.to_string()))
        .filter(|v| v.len() > 8)
        .collect();
    assert!(!ids.is_empty(), "the app got cookies");
    let sample = serde_json::to_string(&summary["failures"]).unwrap_or_default();
    assert!(sample.contains("Cookie"), "the sample shows the request's fields: {sample}");
    for dir in [wd.runs()] {
        for file in walk(&dir) {
            let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned();
            for id in &ids {
                assert!(!text.contains(id.as_str()), "cookie value {id} in {}", file.display());
            }
        }
    }
    // `--debug`: each exchange shown, the saved `a` and every cookie redacted.
    let out = wd.spawn("run", &scenario, &["--debug"], |_| {}).wait(RUN_LIMIT);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("== csrf / echo"), "{said}");
    assert!(said.contains("saved a = <redacted>"), "the saved cookie value: {said}");
    for line in said.lines() {
        let leaks = line.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
            w.len() == 33 && (w.starts_with('A') || w.starts_with('B')) && w[1..].bytes().all(|b| b.is_ascii_hexdigit())
        });
        assert!(!leaks, "a cookie value in --debug's {line:?}");
    }
}

/// Every file under `dir`, recursively.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
