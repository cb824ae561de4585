//! The import on real recordings: the Chromium recording of the demo shop
//! committed beside the tests, and other tools' HAR fixtures. Every
//! scenario written is read back by perfops' own decoder.

use std::path::{Path, PathBuf};

use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/har")
}

/// Import `path` and check that perfops reads the scenario; its YAML and summary.
fn import_ok(path: &Path, options: &HarOptions) -> (String, Vec<String>) {
    let imported = import(path, options).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let yaml = imported.draft.render();
    if let Err(d) = perfops_core::scenario::parse("imported.yaml", &yaml, &[]) {
        panic!("{}: perfops does not read the scenario:\n{d:?}\n{yaml}", path.display());
    }
    (yaml, imported.summary)
}

/// The value of `"key":"..."` in `text`.
fn json_string(text: &str, key: &str) -> String {
    let at = text.find(&format!("\\\"{key}\\\":\\\"")).unwrap_or_else(|| panic!("no {key}")) + key.len() + 7;
    text[at..at + text[at..].find("\\\"").unwrap()].to_string()
}

#[test]
fn the_chromium_recording_of_the_demo_shop() {
    let path = fixtures().join("chromium-shop.har");
    let raw = std::fs::read_to_string(&path).unwrap();
    let (yaml, summary) = import_ok(&path, &HarOptions::default());
    // The token is saved from /auth's JSON and sent as a Bearer token by the next two steps.
    let auth = &yaml[yaml.find("- request: \"POST /auth\"").expect("an auth step")..];
    assert!(
        auth[..auth.find("- request: \"GET /orders\"").unwrap()].contains("save: { \"token\": \"$.token\" }"),
        "{yaml}"
    );
    assert_eq!(yaml.matches("\"Authorization\": \"Bearer ${token}\"").count(), 2, "{yaml}");
    // The password typed in the form is read from the environment.
    assert!(yaml.contains("\"password\": \"${env.PASSWORD}\""), "{yaml}");
    assert!(summary.iter().any(|l| l.starts_with("  PASSWORD (step 2, JSON field password)")), "{summary:?}");
    // Neither the recorded token nor the password is in the file.
    let token = json_string(&raw, "token");
    assert!(token.len() > 20 && !yaml.contains(&token), "the recorded token is in the scenario");
    assert!(!yaml.contains("s3cret-pw"));
    // The stylesheet and the browser's own icon request are left out, and said so.
    assert!(
        !yaml.contains("/app.css")
            || yaml.contains("left out before this step: 2 static (GET /app.css, GET /favicon.ico)")
    );
    assert!(!yaml.contains("request: \"GET /app.css\""), "{yaml}");
    // Browser headers are gone.
    for noise in ["sec-ch-ua", "User-Agent", "Accept-Encoding", "Referer", "Host:", "Sec-Fetch"] {
        assert!(!yaml.contains(noise), "{noise} in\n{yaml}");
    }
    // The person's pause between the page and the login: think time on the page's step.
    let home = &yaml[yaml.find("name: \"home\"").unwrap()..yaml.find("name: \"post-auth\"").unwrap()];
    assert!(home.contains("pause: \""), "{home}");
}

#[test]
fn peers_fixtures_import_and_check() {
    let dir = fixtures().join("peers");
    let mut seen = 0;
    for tool in ["mitmproxy", "har-to-k6"] {
        for entry in std::fs::read_dir(dir.join(tool)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("har") {
                continue;
            }
            seen += 1;
            if path.file_name().and_then(|n| n.to_str()) == Some("brokenfile.har") {
                // Broken on purpose: a clear error, with its place.
                let err = import(&path, &HarOptions::default()).unwrap_err().to_string();
                assert!(err.contains("brokenfile.har:") && err.contains("hint:"), "{err}");
                continue;
            }
            let (yaml, _) = import_ok(&path, &HarOptions { include_static: true, ..HarOptions::default() });
            assert!(yaml.contains("request: "), "{}: no step\n{yaml}", path.display());
        }
    }
    assert_eq!(seen, 15);
}

#[test]
fn peers_recordings_leave_out_what_a_browser_adds() {
    // mitmproxy's Chrome recording: a page, then Google's page (aborted: status 0) and logo.
    let path = fixtures().join("peers/mitmproxy/chrome.har");
    let google = HarOptions { include_hosts: vec!["www.google.com".into()], ..HarOptions::default() };
    let (all, _) = import_ok(&path, &HarOptions { include_static: true, ..google.clone() });
    let (some, summary) = import_ok(&path, &google);
    // The logo only with --include-static; the aborted request never.
    assert_eq!((all.matches("request: ").count(), some.matches("request: ").count()), (2, 1), "{all}\n{some}");
    assert!(summary.iter().any(|l| l.starts_with("left out: 1 static asset(s) (GET /images/")), "{summary:?}");
    assert!(
        summary
            .iter()
            .any(|l| l.starts_with("skipped: 1 entry skipped, e.g. entry 1: GET https://www.google.com/: status 0")),
        "{summary:?}"
    );
    // A recorded 304 (the browser's cache) expects the full answer.
    assert!(some.contains("expect: { status: [200] }"), "{some}");
    // Its other host, httpbin.org, left out by default and named.
    let (_, summary) = import_ok(&fixtures().join("peers/mitmproxy/successful_log.har"), &HarOptions::default());
    assert!(summary.iter().any(|l| l.contains("1 request(s) to other hosts (httpbin.org: 1)")), "{summary:?}");
    // har-to-k6's hand-written entries hold k6's own `${...}`: text to perfops, so a recorded
    // bearer value is a credential from the environment, and another `${` is sent as text.
    let (full, _) = import_ok(&fixtures().join("peers/har-to-k6/full.har"), &HarOptions::default());
    assert!(full.contains("\"Bearer ${env.BEARER_TOKEN}\""), "{full}");
    assert!(full.contains("http://example.com/image/$${first}"), "{full}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("perfops-import-har-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let raw = std::fs::read(fixtures().join("chromium-shop.har")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // Cut in the middle: where it ends, and that it is truncated.
        ("truncated.har", raw[..raw.len() / 2].to_vec(), "the file ends in the middle of the JSON"),
        // Binary garbage.
        ("garbage.har", (0..=255u8).cycle().take(4096).collect(), ":1:1: "),
        // A HAR whose every request is static: nothing to import, and how to keep them.
        (
            "static.har",
            br#"{"log":{"entries":[{"startedDateTime":"2024-05-01T12:00:00Z","request":{"method":"GET","url":"http://h/a.png"},"response":{"status":200,"content":{"mimeType":"image/png"}}}]}}"#.to_vec(),
            "nothing left to import on h: 1 static asset(s) (--include-static keeps them)",
        ),
        // No entries at all.
        ("empty.har", br#"{"log":{"entries":[]}}"#.to_vec(), "no request to import"),
    ];
    for (name, bytes, want) in cases {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        let err = import(&path, &HarOptions::default()).expect_err(name).to_string();
        assert!(err.contains(want), "{name}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn step_names() {
    use correlate::Piece::{Lit, Var};
    let mut taken = correlate::Names::new("-");
    let lit = |s: &str| vec![Lit(s.to_string())];
    let cases = [
        // The root.
        ("GET", lit("/"), "home"),
        // The last segment that is a word, not an id.
        ("GET", lit("/orders/100001"), "orders"),
        // Again: numbered.
        ("GET", lit("/orders/100002"), "orders-2"),
        // Another method: prefixed.
        ("POST", lit("/auth"), "post-auth"),
        // An extension dropped, the query no part of it.
        ("GET", lit("/index.html?x=1"), "index"),
        // Nothing that reads as a word: the method.
        ("DELETE", lit("/42"), "delete"),
        // A correlated value names nothing, though it reads as a word (a token was the name).
        ("GET", vec![Lit("/items/".into()), Var("token".into())], "items"),
        ("PUT", vec![Lit("/".into()), Var("token".into()), Lit("?a=b".into())], "put"),
    ];
    for (method, target, want) in cases {
        assert_eq!(step_name(method, &target, &mut taken), want, "{method} {target:?}");
    }
}

/// A recording of an API that signs each request: `X-Signature` (an HMAC, 64 hex digits) and
/// `X-Timestamp` change with every request and no answer carried them, so a request hook sets
/// them; the fields that do not change, that were sent once, or that an answer carried (a
/// cursor) stay as they were, or are saved.
fn signed_har() -> String {
    let entry = |i: usize, method: &str, path: &str, headers: &[(&str, &str)], answer: &str| {
        let headers: Vec<serde_json::Value> =
            headers.iter().map(|(n, v)| serde_json::json!({ "name": n, "value": v })).collect();
        let mut request =
            serde_json::json!({ "method": method, "url": format!("http://api.test:8080{path}"), "headers": headers });
        if method == "POST" {
            request["postData"] = serde_json::json!({ "mimeType": "application/json", "text": "{\"item\":\"sku-1\"}" });
        }
        serde_json::json!({
            "startedDateTime": format!("2026-11-29T10:00:0{i}.000Z"),
            "time": 20,
            "request": request,
            "response": { "status": 200, "content": { "mimeType": "application/json", "text": answer } },
        })
    };
    let sig = |c: char| c.to_string().repeat(64);
    let entries = vec![
        entry(0, "GET", "/catalog", &[("X-Client", "web-1.2")], r#"{"next":"cur-000111"}"#),
        entry(
            1,
            "POST",
            "/orders?shop=7",
            &[
                ("X-Client", "web-1.2"),
                ("X-Signature", &sig('a')),
                ("X-Timestamp", "1764410401"),
                ("X-Cursor", "cur-000111"),
                ("X-Once", "n0nce-7f3a91"),
            ],
            r#"{"next":"cur-000222"}"#,
        ),
        entry(
            2,
            "POST",
            "/orders?shop=7",
            &[
                ("X-Client", "web-1.2"),
                ("X-Signature", &sig('b')),
                ("X-Timestamp", "1764410402"),
                ("X-Cursor", "cur-000222"),
            ],
            r#"{"next":null}"#,
        ),
        entry(3, "GET", "/me", &[("X-Signature", &sig('c')), ("X-Timestamp", "1764410403")], "{}"),
    ];
    serde_json::json!({ "log": { "version": "1.2", "entries": entries } }).to_string()
}

#[test]
fn a_field_computed_per_request_becomes_a_request_hook() {
    let har = read::parse("signed.har", signed_har().as_bytes()).expect("reads");
    let imported = from_har(&har, "signed.har", "signed", &HarOptions::default()).expect("imports");
    let yaml = imported.draft.render();
    if let Err(d) = perfops_core::scenario::parse("imported.yaml", &yaml, &[]) {
        panic!("perfops does not read the scenario:\n{d:?}\n{yaml}");
    }
    // The hook is named on the three steps that sent the fields, and the file beside it.
    assert!(yaml.contains("scripts: \"signed-hooks.js\""), "{yaml}");
    assert_eq!(yaml.matches("before: \"computed_headers\"").count(), 3, "{yaml}");
    let catalog = &yaml[yaml.find("name: \"catalog\"").unwrap()..yaml.find("name: \"post-orders\"").unwrap()];
    assert!(!catalog.contains("before:"), "{catalog}");
    // The hook sets them: no recorded signature or timestamp is sent.
    for gone in ["X-Signature", "X-Timestamp", "aaaaaaaa", "1764410401"] {
        assert!(!yaml.contains(&format!("\"{gone}")), "{gone} in\n{yaml}");
    }
    // A field that does not change stays; one an answer carried is saved; one sent once stays as recorded.
    assert_eq!(yaml.matches("\"X-Client\": \"web-1.2\"").count(), 3, "{yaml}");
    assert!(yaml.contains("\"X-Cursor\": \"${next}\""), "{yaml}");
    assert!(yaml.contains("\"X-Once\": \"n0nce-7f3a91\""), "{yaml}");
    assert!(
        imported
            .summary
            .iter()
            .any(|l| l.starts_with("computed per request by the page: X-Signature, X-Timestamp (step(s) 2, 3, 4)")),
        "{:?}",
        imported.summary
    );

    // The script: each field's shape and its first guess, no recorded value.
    let [file] = imported.files.as_slice() else { panic!("{:?}", imported.files) };
    assert_eq!(file.name, "signed-hooks.js");
    let js = &file.text;
    assert!(js.contains("// X-Signature: sent by steps 2, 3, 4, 64 hex digits"), "{js}");
    // The signature's guess covers the time the request sends.
    assert!(js.contains("const time = String(Math.floor(now / 1000));"), "{js}");
    assert!(js.contains("req.headers[\"X-Timestamp\"] = time;"), "{js}");
    assert!(
        js.contains(
            "req.headers[\"X-Signature\"] = perfops.hmac(\"sha256\", vars.signing_key || SIGNING_KEY, \
             [req.method, req.path, time, req.body].join(\"\\n\"), \"hex\");"
        ),
        "{js}"
    );
    assert!(!js.contains("aaaaaaaa") && !js.contains("1764410401"), "{js}");
    // It compiles, defines the hook, and the hook runs: both fields set, of the recorded shapes.
    let scripts = perfops_script::Scripts::compile(&[(file.name.as_str(), js.as_str())])
        .unwrap_or_else(|e| panic!("{e:?}\n{js}"));
    let hook = scripts.hook(hooks::FUNCTION).expect("the hook is defined");
    let clock = perfops_script::Clock::frozen(1_764_410_400_000);
    let mut rt = perfops_script::Runtime::new(&scripts, perfops_script::Limits::default(), 1, clock).expect("runtime");
    let mut req = perfops_script::RequestParts {
        method: "POST".into(),
        path: "/orders?shop=7".into(),
        headers: vec![("X-Client".into(), "web-1.2".into())],
        body: b"{}".to_vec(),
    };
    rt.before_request(hook, &mut perfops_script::FlowState::default(), &mut req).expect("the hook runs");
    let header = |n: &str| req.headers.iter().find(|(m, _)| m == n).map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(header("X-Timestamp"), "1764410400");
    let signature = header("X-Signature");
    assert!(signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit()), "{signature}");
}

/// Table: what a computed field's recorded values look like, and so the hook's first guess.
#[test]
fn computed_field_shapes() {
    let cases: &[(&[&str], hooks::Shape)] = &[
        // Seconds since 1970.
        (&["1764410401", "1764410402"], hooks::Shape::UnixSeconds),
        // Milliseconds.
        (&["1764410401123", "1764410402456"], hooks::Shape::UnixMillis),
        // ISO 8601 instants, with and without fractions.
        (&["2026-11-29T10:00:01Z", "2026-11-29T10:00:02.123Z"], hooks::Shape::IsoInstant),
        // UUIDs.
        (&["0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7"], hooks::Shape::Uuid),
        // A SHA-256 in hex.
        (&[&"ab".repeat(32), &"cd".repeat(32)], hooks::Shape::HexDigest(64)),
        // A SHA-256 in base64 (32 bytes: 44 characters with one `=`).
        (
            &["q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=", "ze8BI0VniavN7wEjRWeJq83vASNFZ4mrze8BI0VniaE="],
            hooks::Shape::Base64Digest(44),
        ),
        // Hex of no digest's length: something else.
        (&["abc123", "def4567"], hooks::Shape::Other(7)),
        // Shapes that differ between values: something else.
        (&["1764410401", "2026-11-29T10:00:01Z"], hooks::Shape::Other(20)),
    ];
    for (values, want) in cases {
        assert_eq!(hooks::shape(values), *want, "{values:?}");
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// A HAR of two exchanges whose every recorded string is arbitrary text: the second request
    /// sends back what the first response carried, in a header, a JSON body and the query.
    fn har_of(path: &str, header: (&str, &str), value: &str, body_key: &str) -> String {
        let s = |x: &str| serde_json::Value::String(x.to_string()).to_string();
        let url2 =
            format!("http://h.test/b?x={}", url::form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>());
        let resp = serde_json::json!({ "v": value, body_key: value }).to_string();
        format!(
            r#"{{"log":{{"entries":[
            {{"startedDateTime":"2024-05-01T12:00:00Z","time":5,"request":{{"method":"POST","url":{u1},
              "headers":[{{"name":{hn},"value":{hv}}}],"postData":{{"mimeType":"application/json","text":{b1}}}}},
              "response":{{"status":200,"headers":[{{"name":"Set-Cookie","value":{ck}}}],"content":{{"mimeType":"application/json","text":{r1}}}}}}},
            {{"startedDateTime":"2024-05-01T12:00:01Z","time":5,"request":{{"method":"GET","url":{u2},
              "headers":[{{"name":"X-V","value":{v}}},{{"name":"Cookie","value":{ck}}},{{"name":{hn},"value":{hv}}}]}},
              "response":{{"status":200,"content":{{"mimeType":"text/html","text":{html}}}}}}}]}}}}"#,
            u1 = s(&format!(
                "http://h.test/{}",
                url::form_urlencoded::byte_serialize(path.as_bytes()).collect::<String>()
            )),
            hn = s(header.0),
            hv = s(header.1),
            b1 = s(&serde_json::json!({ body_key: value, "password": header.1 }).to_string()),
            ck = s(&format!("{body_key}={value}; Path=/")),
            r1 = s(&resp),
            u2 = s(&url2),
            v = s(&format!("x {value} y")),
            html = s(&format!("<input type=hidden name=\"{body_key}\" value=\"{value}\">")),
        )
    }

    /// A password typed both in a credential-like header and in the JSON body is one variable,
    /// named after the header that carried it first; neither place keeps the recorded value.
    /// (Found by the property below: it once expected the name `PASSWORD` whatever came first.)
    #[test]
    fn one_credential_in_two_places_is_one_variable() {
        let text = har_of("login", ("Apwd", "hunter22"), "v-1", "k");
        let har = read::parse("p.har", text.as_bytes()).expect("a HAR");
        let yaml = from_har(&har, "p.har", "p", &HarOptions::default()).expect("imported").draft.render();
        assert!(yaml.contains("\"password\": \"${env.APWD}\""), "{yaml}");
        assert!(yaml.contains("\"Apwd\": \"${env.APWD}\""), "{yaml}");
        assert!(!yaml.contains("hunter22"), "{yaml}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Arbitrary bytes never panic the reader.
        #[test]
        fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = read::parse("p.har", &bytes);
        }

        /// Whatever text a recording holds, the scenario written is one perfops reads, and a
        /// credential typed in it is never written as it is.
        #[test]
        fn any_recording_gives_a_scenario_perfops_reads(
            path in "\\PC{0,12}",
            header in ("[A-Za-z][A-Za-z0-9-]{0,10}", "\\PC{0,16}"),
            value in "\\PC{0,24}",
            key in "\\PC{1,10}",
        ) {
            let text = har_of(&path, (&header.0, &header.1), &value, &key);
            let har = read::parse("p.har", text.as_bytes()).expect("a HAR");
            let imported = from_har(&har, "p.har", "p", &HarOptions::default());
            let imported = match imported { Ok(i) => i, Err(e) => panic!("{e}") };
            let yaml = imported.draft.render();
            if let Err(d) = perfops_core::scenario::parse("p.yaml", &yaml, &[]) {
                panic!("{d:?}\n{yaml}");
            }
            // The password typed is read from the environment. Its variable is named after the
            // first place it was found: a credential-like header carrying the same value (`Apwd`)
            // names it `APWD`, and the JSON field then reads that same variable.
            if !header.1.is_empty() {
                prop_assert!(yaml.contains("\"password\": \"${env."), "{yaml}");
            }
        }
    }
}
