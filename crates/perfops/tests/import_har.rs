//! `perfops import har` end to end, on a recording made here: a real headless
//! Chromium (Debian's, over its DevTools pipe: `common/har_record.py`) logs
//! in on a small web app with a login form (`common/shop_front.py`: the page,
//! its stylesheet, and the demo's API on the same origin), and its `Network`
//! events become the HAR. The scenario imported from it must carry the token
//! from `/auth`'s JSON to the `Authorization` of the requests after it, read
//! the typed password from the environment, pass `perfops check`, and run
//! against the same app with no unexpected 4xx: the demo answers every
//! `GET /orders` and `GET /me` with 200 only when the token is its own and
//! fresh, so a hard-coded or missing token shows as 401s; and the app opens a
//! session in two cookies at login and refuses those requests without both,
//! so the recorded `Cookie` fields must be left to the run's cookie jar.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Demo, Workdir, shared, spawn_perfops, temp_path};

const LIMIT: Duration = Duration::from_secs(60);

/// `shop_front.py` in front of `upstream`, stopped by its PID when dropped.
struct ShopFront {
    child: Child,
    url: String,
}

impl ShopFront {
    fn start(upstream: &str) -> ShopFront {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/shop_front.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(upstream.trim_start_matches("http://"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shop_front.py (python3)");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line).expect("its first line");
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let url = line.trim().strip_prefix("listening ").expect("`listening URL`").to_string();
        ShopFront { child, url }
    }
}

impl Drop for ShopFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Record `url` in Chromium into `har`: open the page, wait like a person, log in, wait for the orders.
fn record(url: &str, har: &Path, password: &str) {
    assert!(Path::new("/usr/bin/chromium").exists(), "/usr/bin/chromium is missing (.ci/run installs it)");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/har_record.py");
    let profile = temp_path("har-chromium", "d");
    let steps = serde_json::json!([
        ["open", format!("{url}/")],
        ["until", "document.readyState == 'complete' && !!document.getElementById('go')", 20],
        ["wait", 0.4],
        [
            "eval",
            format!(
                "document.getElementById('user').value = 'ana'; document.getElementById('password').value = {}; \
             document.getElementById('go').click(); 1",
                serde_json::Value::String(password.into())
            )
        ],
        ["until", "document.body.getAttribute('data-orders') || document.body.getAttribute('data-error')", 20],
        ["eval", "document.body.getAttribute('data-statuses') + ' ' + document.body.getAttribute('data-error')"],
    ]);
    let out = Command::new("python3")
        .arg(script)
        .args(["/usr/bin/chromium", &profile.display().to_string(), &har.display().to_string(), &steps.to_string()])
        .output()
        .expect("run har_record.py");
    let _ = std::fs::remove_dir_all(&profile);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "har_record.py failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The page itself saw its three API calls answered 200.
    assert!(stdout.contains("\"200,200,200 null\""), "{stdout}");
}

#[test]
fn a_chromium_recording_of_a_login_imports_and_runs_without_unexpected_4xx() {
    let _g = shared();
    let demo = Demo::start(&["--model", "async"]);
    let front = ShopFront::start(&demo.url);
    let work = Workdir::new("import-har");
    let har = work.path.join("shop.har");
    let password = "typed-Secret-77";
    record(&front.url, &har, password);

    let scenario = work.path.join("shop.yaml");
    let out =
        spawn_perfops(&["import", "har", &har.display().to_string(), "--out", &scenario.display().to_string()], |_| {})
            .wait(LIMIT);
    out.assert_exit(0);
    let yaml = std::fs::read_to_string(&scenario).expect("the scenario");
    // The correlation: saved from /auth's JSON, sent as the bearer token of /orders and /me.
    assert!(yaml.contains("save: { \"token\": \"$.token\" }"), "{yaml}");
    assert_eq!(yaml.matches("\"Authorization\": \"Bearer ${token}\"").count(), 2, "{yaml}");
    // The session's cookies: in the recording, and left to the jar (no Cookie field written).
    let recorded = std::fs::read_to_string(&har).unwrap();
    assert!(recorded.contains("front_check="), "the login set its two cookies: {recorded}");
    assert!(!yaml.contains("\"Cookie\":") && !yaml.contains("front_session="), "{yaml}");
    assert_eq!(yaml.matches("sent by the cookie jar").count(), 2, "{yaml}");
    // The password typed is read from the environment, and is nowhere in the file.
    assert!(yaml.contains("${env.PASSWORD}") && !yaml.contains(password), "{yaml}");
    let at = recorded.find("\\\"token\\\":\\\"").expect("a token in the recording") + 12;
    let token = &recorded[at..at + recorded[at..].find("\\\"").unwrap()];
    assert!(token.len() > 20 && !yaml.contains(token), "the recorded token is in the scenario");
    // Said to the person: what was found, and what to set.
    assert!(
        out.stderr.contains("saves token ($.token)") || out.stdout.contains("saves token ($.token)"),
        "{}",
        out.dump()
    );
    assert!(out.stderr.contains("PASSWORD") || out.stdout.contains("PASSWORD"), "{}", out.dump());

    let with_env = |c: &mut Command| {
        c.env("PASSWORD", password);
    };
    let check = spawn_perfops(&["check", &scenario.display().to_string()], with_env).wait(LIMIT);
    check.assert_exit(0);

    // Against the same server, and against the same app restarted: a restarted demo refuses
    // the tokens of the one before, so a token hard-coded from the recording would be 401s there.
    let fresh = Demo::start(&["--model", "async"]);
    let fresh_front = ShopFront::start(&fresh.url);
    for (server, target) in [(&demo, None), (&fresh, Some(fresh_front.url.as_str()))] {
        let before = (server.answered("/orders"), server.answered("/me"));
        let mut sets =
            vec!["--set".to_string(), "load.stages[0].rate=5".into(), "--set".into(), "load.stages[0].hold=3s".into()];
        if let Some(t) = target {
            sets.extend(["--set".to_string(), format!("target={t}")]);
        }
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let runs = Workdir::new("import-har-run");
        let run = runs.spawn("run", &scenario, &sets, with_env).wait(LIMIT);
        run.assert_exit(0);
        let s = runs.summary(&run);
        let failures = &s["total"]["failures"];
        let kinds: Vec<&String> = failures.as_object().expect("failures").keys().filter(|k| *k != "cut").collect();
        assert!(kinds.is_empty(), "failures against {target:?}: {failures}\n{}", run.dump());
        // Each arrival got its own token and used it: /orders and /me answered 200 about once per
        // visit (15 due; the last visits' steps may be cut at the end of the run).
        let after = (server.answered("/orders"), server.answered("/me"));
        assert!(after.0 - before.0 >= 10 && after.1 - before.1 >= 10, "{target:?}: {before:?} -> {after:?}");
    }
}

/// `--replay`: the recording's requests at their recorded offsets. The replay file holds a row
/// per kept request at its `startedDateTime` less the first's, in ms; the login whose token the
/// later requests send runs once in setup; run against the same app, each recorded API request
/// reaches the demo once (the login twice: setup's and its own arrival's), with no failure.
#[test]
fn a_chromium_recording_replays_at_its_recorded_offsets() {
    let _g = shared();
    let demo = Demo::start(&["--model", "async"]);
    let front = ShopFront::start(&demo.url);
    let work = Workdir::new("import-har-replay");
    let har = work.path.join("shop.har");
    let password = "typed-Secret-78";
    record(&front.url, &har, password);

    let scenario = work.path.join("replay.yaml");
    let args =
        ["import", "har", &har.display().to_string(), "--replay", "rec.csv", "--out", &scenario.display().to_string()];
    spawn_perfops(&args, |_| {}).wait(LIMIT).assert_exit(0);
    let yaml = std::fs::read_to_string(&scenario).expect("the scenario");
    assert!(yaml.contains("model: replay\n  file: \"rec.csv\""), "{yaml}");
    assert!(!yaml.contains(password), "{yaml}");
    let rec = std::fs::read_to_string(work.path.join("rec.csv")).expect("the replay file");
    // The rows' offsets are the recorded starts of the kept requests, from the first.
    let recorded = perfops_import::har::read::read_file(&har).expect("the recording");
    let starts: Vec<i64> = recorded // in µs
        .entries
        .iter()
        .filter(|e| !e.url.path().ends_with(".css") && !e.url.path().ends_with(".ico"))
        .map(|e| (e.started_ms.expect("Chromium records each start") * 1000.0).round() as i64)
        .collect();
    let offsets: Vec<i64> = rec.lines().skip(2).map(|l| l.split(',').next().unwrap().parse().unwrap()).collect();
    // In whole ms from the first start, cut as the replay file's offsets are.
    let mut want: Vec<i64> = starts.iter().map(|s| (s - starts.iter().min().unwrap()) / 1000).collect();
    want.sort_unstable();
    assert_eq!(offsets, want, "{rec}");
    assert!(
        offsets.len() >= 4 && *offsets.last().unwrap() >= 400,
        "the page, the login and two API calls, 0.4 s apart at least: {rec}"
    );

    let with_env = |c: &mut Command| {
        c.env("PASSWORD", password);
    };
    spawn_perfops(&["check", &scenario.display().to_string()], with_env).wait(LIMIT).assert_exit(0);
    let before = (demo.answered("/auth"), demo.answered("/orders"), demo.answered("/me"));
    let runs = Workdir::new("import-har-replay-run");
    let run = runs.spawn("run", &scenario, &[], with_env).wait(LIMIT);
    run.assert_exit(0);
    let s = runs.summary(&run);
    assert_eq!(s["total"]["failures"], serde_json::json!({}), "{}", run.dump());
    assert_eq!(s["total"]["sent"].as_u64(), Some(offsets.len() as u64), "each recorded request once: {s:#}");
    let after = (demo.answered("/auth"), demo.answered("/orders"), demo.answered("/me"));
    assert_eq!((after.0 - before.0, after.1 - before.1, after.2 - before.2), (2, 1, 1), "{rec}");
}

/// A recording of an API that checks an HMAC per request (perfops-testkit's `scripted` API:
/// python3's `hmac` over METHOD, PATH, TIMESTAMP and BODY): its `X-Timestamp` and
/// `X-Signature` changed with every request and no answer carried them, so the import writes a
/// request hook that sets them, names it on the steps, and `perfops check` passes as written.
/// With the signing key put in place of its placeholder (the one line a person must write when
/// the page signs this way), the server's own check accepts every request the run sends.
#[test]
fn a_recording_with_a_signature_per_request_imports_a_request_hook_that_signs() {
    let _g = shared();
    let server = perfops_testkit::scripted::api("demo-secret", 1, 1);
    let work = Workdir::new("import-har-signed");
    let url = server.url(0);
    let entry = |i: u32| {
        serde_json::json!({
            // 100 ms apart: no think time between the steps.
            "startedDateTime": format!("2026-11-29T10:00:00.{i}00Z"),
            "time": 15,
            "request": {
                "method": "POST",
                "url": format!("{url}/signed/orders?shop=7"),
                "headers": [
                    { "name": "Content-Type", "value": "application/json" },
                    { "name": "X-Timestamp", "value": format!("176441040{i}123") },
                    { "name": "X-Signature", "value": format!("{i}").repeat(64) },
                ],
                "postData": { "mimeType": "application/json", "text": format!("{{\"item\":\"sku-{i}\"}}") },
            },
            "response": { "status": 200, "content": { "mimeType": "application/json", "text": "{\"ok\":true}" } },
        })
    };
    let har = serde_json::json!({ "log": { "version": "1.2", "entries": [entry(1), entry(2), entry(3)] } });
    let har_path = work.path.join("shop.har");
    std::fs::write(&har_path, har.to_string()).unwrap();

    let scenario = work.path.join("shop.yaml");
    let out = spawn_perfops(
        &["import", "har", &har_path.display().to_string(), "--out", &scenario.display().to_string()],
        |_| {},
    )
    .wait(LIMIT);
    out.assert_exit(0);
    let yaml = std::fs::read_to_string(&scenario).expect("the scenario");
    assert!(yaml.contains("scripts: \"shop-hooks.js\""), "{yaml}");
    assert_eq!(yaml.matches("before: \"computed_headers\"").count(), 3, "{yaml}");
    assert!(!yaml.contains("\"X-Signature\"") && !yaml.contains("111111"), "{yaml}");
    let hooks = work.path.join("shop-hooks.js");
    let js = std::fs::read_to_string(&hooks).expect("the script beside the scenario");
    assert!(out.dump().contains("computed per request by the page: X-Timestamp, X-Signature"), "{}", out.dump());
    spawn_perfops(&["check", &scenario.display().to_string()], |_| {}).wait(LIMIT).assert_exit(0);

    // The key in place of its placeholder: every request the run sends passes the server's check.
    assert!(js.contains("const SIGNING_KEY = \"replace-me\";"), "{js}");
    std::fs::write(&hooks, js.replace("\"replace-me\"", "\"demo-secret\"")).unwrap();
    let sets = ["--set", "load.stages[0].rate=5", "--set", "load.stages[0].hold=2s"];
    let run = work.spawn("run", &scenario, &sets, |_| {}).wait(LIMIT);
    let stats = perfops_testkit::scripted::stats(server.addr());
    let ok = stats["signed_ok"].as_u64().unwrap_or(0);
    // 10 arrivals of 3 steps; the last ones' may be cut at the end of the run.
    assert!(ok >= 20 && stats["signed_bad"] == 0, "{stats}\n{}", run.dump());
}
