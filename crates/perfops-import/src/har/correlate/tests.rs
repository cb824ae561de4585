//! The finder on small recordings, one case per rule, and every `save` it
//! writes checked by perfops' own extractor on the recorded response.

use super::*;
use perfops_core::scenario::extract::Extractor;

/// One recorded exchange, written shortly.
struct Ex {
    method: &'static str,
    target: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Body<String>,
    resp_headers: Vec<(String, String)>,
    mime: &'static str,
    text: Option<&'static str>,
}

fn get(target: &'static str) -> Ex {
    Ex { method: "GET", target, headers: Vec::new(), body: Body::None, resp_headers: Vec::new(), mime: "", text: None }
}

impl Ex {
    fn post_json(mut self, body: &str) -> Ex {
        self.method = "POST";
        self.body = Body::Json(serde_json::from_str(body).unwrap());
        self
    }
    fn form(mut self, fields: &[(&str, &str)]) -> Ex {
        self.method = "POST";
        self.body = Body::Form(fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        self
    }
    fn header(mut self, name: &'static str, value: &'static str) -> Ex {
        self.headers.push((name, value));
        self
    }
    fn json(mut self, text: &'static str) -> Ex {
        self.mime = "application/json";
        self.text = Some(text);
        self
    }
    fn html(mut self, text: &'static str) -> Ex {
        self.mime = "text/html";
        self.text = Some(text);
        self
    }
    fn resp_header(mut self, name: &str, value: &str) -> Ex {
        self.resp_headers.push((name.into(), value.into()));
        self
    }
}

fn run(exs: &[Ex]) -> Found {
    let pairs: Vec<(Request, Response<'_>)> = exs
        .iter()
        .map(|e| {
            (
                Request {
                    method: e.method.into(),
                    target: e.target.into(),
                    headers: e.headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
                    body: e.body.clone(),
                },
                Response { headers: &e.resp_headers, mime: e.mime, text: e.text },
            )
        })
        .collect();
    let found = correlate(&pairs);
    // Every save is a real extractor that finds, in the response recorded, the value it replaced.
    for (step, saves) in found.saves.iter().enumerate() {
        for s in saves {
            let ex = Extractor::parse(&s.extractor).unwrap_or_else(|e| panic!("{}: {e}", s.extractor));
            let headers: Vec<(&str, &[u8])> =
                exs[step].resp_headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect();
            let got = ex.extract(&headers, exs[step].text.unwrap_or("").as_bytes());
            assert!(got.is_some(), "{} finds nothing in step {step}'s response", s.extractor);
        }
    }
    found
}

/// Step `i`'s saves as `name=extractor`.
fn saves(f: &Found, i: usize) -> Vec<String> {
    f.saves[i].iter().map(|s| format!("{}={}", s.name, s.extractor)).collect()
}

fn header(f: &Found, step: usize, name: &str) -> Option<String> {
    f.requests[step].headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, t)| render(t))
}

fn target(f: &Found, step: usize) -> String {
    render(&f.requests[step].target)
}

fn json_body(f: &Found, step: usize) -> String {
    match &f.requests[step].body {
        Body::Json(v) => v.to_string(),
        other => panic!("not JSON: {other:?}"),
    }
}

const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LTEifQ.c2lnbmF0dXJl";

#[test]
fn a_login_token_used_as_bearer() {
    // The demo's shape: POST /auth answers a JWT, GET /orders sends it.
    let f = run(&[
        get("/auth")
            .post_json(r#"{"user":"load-tester"}"#)
            .json(r#"{"token":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LTEifQ.c2lnbmF0dXJl"}"#),
        get("/orders").header("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LTEifQ.c2lnbmF0dXJl"),
        get("/me").header("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LTEifQ.c2lnbmF0dXJl"),
    ]);
    assert_eq!(saves(&f, 0), ["token=$.token"]);
    assert_eq!(f.saves[0][0].used_by, [1, 2]);
    assert_eq!(header(&f, 1, "Authorization").as_deref(), Some("Bearer ${token}"));
    assert_eq!(header(&f, 2, "authorization").as_deref(), Some("Bearer ${token}"));
    // The user name is not a credential: kept.
    assert_eq!(json_body(&f, 0), r#"{"user":"load-tester"}"#);
    assert!(f.env.is_empty());
    let _ = JWT;
}

#[test]
fn ids_in_paths_queries_and_bodies() {
    let f = run(&[
        // A created order's id (a JSON number), nested: `order_id`.
        get("/orders")
            .post_json(r#"{"sku":"SKU-00042","qty":2}"#)
            .json(r#"{"order":{"id":100001,"status":"pending"},"cart":"c-7f3a9e21"}"#),
        // In the path.
        get("/orders/100001"),
        // In the query, and a second value in the same request.
        get("/track?order=100001&cart=c-7f3a9e21&page=2"),
        // In a JSON body, as a number: the reference alone keeps the number's type.
        get("/pay").post_json(r#"{"order":100001,"note":"for c-7f3a9e21"}"#),
    ]);
    assert_eq!(saves(&f, 0), ["order_id=$.order.id", "cart=$.cart"]);
    assert_eq!(target(&f, 1), "/orders/${order_id}");
    assert_eq!(target(&f, 2), "/track?order=${order_id}&cart=${cart}&page=2");
    assert_eq!(json_body(&f, 3), r#"{"note":"for ${cart}","order":"${order_id}"}"#);
}

#[test]
fn what_is_not_a_correlation() {
    let f = run(&[
        // The client's own value: typed at login, echoed by /me, sent again later.
        get("/auth").post_json(r#"{"user":"marguerite-42"}"#).json(r#"{"ok":true}"#),
        get("/me").json(r#"{"user":"marguerite-42","page":2,"status":"pending","total":1234,"at":"2024-05-01T12:00:00Z","lang":"Deutsch"}"#),
        // Trivial values: a small number, a status word, a count under 5 digits, a date, a word.
        get("/orders?user=marguerite-42&page=2&status=pending&min=1234&since=2024-05-01T12:00:00Z&lang=Deutsch"),
    ]);
    assert!(f.saves.iter().all(Vec::is_empty), "{:?}", f.saves);
    assert_eq!(
        target(&f, 2),
        "/orders?user=marguerite-42&page=2&status=pending&min=1234&since=2024-05-01T12:00:00Z&lang=Deutsch"
    );
}

#[test]
fn a_match_stands_on_its_own() {
    let f = run(&[
        get("/a").json(r#"{"id":"123456"}"#),
        // Inside a longer number: not the value.
        get("/b/91234567"),
        // Standing alone, after a `-`: the value.
        get("/c/item-123456"),
    ]);
    assert_eq!(target(&f, 1), "/b/91234567");
    assert_eq!(target(&f, 2), "/c/item-${id}");
    assert_eq!(f.saves[0][0].used_by, [2]);
}

#[test]
fn the_earliest_and_most_specific_source() {
    let f = run(&[
        // Carried twice in one response: the JSON field wins over the header.
        get("/a").resp_header("X-Session", "s-9b8c7d6e5f").json(r#"{"session":"s-9b8c7d6e5f"}"#),
        // Carried again later: the first response stays the source.
        get("/b").json(r#"{"again":"s-9b8c7d6e5f"}"#),
        get("/c").header("X-Session", "s-9b8c7d6e5f"),
    ]);
    assert_eq!(saves(&f, 0), ["session=$.session"]);
    assert!(f.saves[1].is_empty());
    assert_eq!(header(&f, 2, "X-Session").as_deref(), Some("${session}"));
}

#[test]
fn a_header_value_and_unique_names() {
    let f = run(&[
        // An ETag sent back in If-Match: `header:ETag`.
        get("/doc").resp_header("ETag", "\"v-5d41402abc\"").json(r#"{"token":"tok-aaaa-1111"}"#),
        // A second token under the same field name: `token_2`.
        get("/refresh").json(r#"{"token":"tok-bbbb-2222"}"#),
        get("/doc")
            .header("If-Match", "\"v-5d41402abc\"")
            .header("X-A", "tok-aaaa-1111")
            .header("X-B", "tok-bbbb-2222"),
    ]);
    assert_eq!(saves(&f, 0), ["token=$.token", "etag=header:ETag"]);
    assert_eq!(saves(&f, 1), ["token_2=$.token"]);
    // The quotes are part of the value saved.
    assert_eq!(header(&f, 2, "If-Match").as_deref(), Some("${etag}"));
    assert_eq!(header(&f, 2, "X-B").as_deref(), Some("${token_2}"));
}

#[test]
fn cookies_as_a_session_would_send_them() {
    let f = run(&[
        // Two cookies in two Set-Cookie fields.
        get("/login")
            .resp_header("Set-Cookie", "sid=Qm9vMTIzNDU2; Path=/; HttpOnly")
            .resp_header("Set-Cookie", "csrf=Zm9vYmFyYmF6; Path=/"),
        // `sid` and `csrf` in the Cookie field: the run's jar sends them, so
        // they are left out (no save for that); `_ga`, set before the
        // recording: left out, said so. `csrf` echoed in a header: saved
        // with `cookie:csrf`, from the second field.
        get("/orders")
            .header("Cookie", "_ga=GA1.2.3456789; sid=Qm9vMTIzNDU2; csrf=Zm9vYmFyYmF6")
            .header("X-CSRF-Token", "Zm9vYmFyYmF6"),
        // A cookie the jar sends, alone: no Cookie field at all.
        get("/me").header("Cookie", "sid=Qm9vMTIzNDU2"),
    ]);
    assert_eq!(saves(&f, 0), ["csrf=cookie:csrf"]);
    assert_eq!(header(&f, 1, "Cookie"), None);
    assert_eq!(header(&f, 1, "X-CSRF-Token").as_deref(), Some("${csrf}"));
    assert_eq!(header(&f, 2, "Cookie"), None);
    assert!(f.notes[1][0].starts_with("cookie sid, csrf: sent by the cookie jar"), "{:?}", f.notes);
    assert!(f.notes[1][1].starts_with("cookie _ga left out"), "{:?}", f.notes);
    assert!(f.notes[2][0].starts_with("cookie sid: sent by the cookie jar"), "{:?}", f.notes);
}

#[test]
fn a_hidden_form_field() {
    let f = run(&[
        // A login page with a CSRF input (value before name, single quotes) and a meta tag.
        get("/login").html(
            "<html><head><meta name=\"csrf-token\" content=\"m3t4-t0k3n-8899\"></head><form>\
             <input type=hidden value='Zx9-csrf-77aa' name='authenticity_token'>\
             <input name=\"user\"><input type=\"password\" name=\"password\"></form></html>",
        ),
        // Sent back in the form, with the password typed.
        get("/session").form(&[("authenticity_token", "Zx9-csrf-77aa"), ("user", "ana"), ("password", "hunter2")]),
        get("/api").header("X-CSRF-Token", "m3t4-t0k3n-8899"),
    ]);
    assert_eq!(
        saves(&f, 0),
        // In the order of their first use.
        [
            r#"authenticity_token=regex:<input[^>]*\svalue='([^']*)'[^>]*\sname='authenticity_token'"#,
            r#"csrf_token=regex:<meta[^>]*\sname="csrf\-token"[^>]*\scontent="([^"]*)""#,
        ]
    );
    let Body::Form(fields) = &f.requests[1].body else { panic!() };
    let fields: Vec<(String, String)> = fields.iter().map(|(k, v)| (k.clone(), render(v))).collect();
    assert_eq!(
        fields,
        [
            ("authenticity_token".into(), "${authenticity_token}".into()),
            ("user".into(), "ana".into()),
            // The password typed: an environment variable, never the literal.
            ("password".into(), "${env.PASSWORD}".into()),
        ]
    );
    assert_eq!(header(&f, 2, "X-CSRF-Token").as_deref(), Some("${csrf_token}"));
}

#[test]
fn credentials_become_environment_variables() {
    let f = run(&[
        // A password in a JSON login body.
        get("/auth").post_json(r#"{"user":"ana","password":"correct horse battery"}"#).json(r#"{"ok":1}"#),
        // Basic auth, an API key header, a token from before the recording, a key in the query.
        get("/admin?api_key=k-123456789&page=1")
            .header("Authorization", "Basic YW5hOmNvcnJlY3QgaG9yc2U=")
            .header("X-Api-Key", "ak_live_0011223344")
            .header("X-Other", "the password again: correct horse battery"),
        get("/legacy").header("Authorization", "Bearer 0ld-t0ken-from-before"),
    ]);
    assert_eq!(json_body(&f, 0), r#"{"password":"${env.PASSWORD}","user":"ana"}"#);
    assert_eq!(target(&f, 1), "/admin?api_key=${env.API_KEY}&page=1");
    assert_eq!(header(&f, 1, "Authorization").as_deref(), Some("Basic ${env.BASIC_AUTH}"));
    assert_eq!(header(&f, 1, "X-Api-Key").as_deref(), Some("${env.X_API_KEY}"));
    // The same password sent again elsewhere: the same reference there.
    assert_eq!(header(&f, 1, "X-Other").as_deref(), Some("the password again: ${env.PASSWORD}"));
    assert_eq!(header(&f, 2, "Authorization").as_deref(), Some("Bearer ${env.BEARER_TOKEN}"));
    let names: Vec<&str> = f.env.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["PASSWORD", "BASIC_AUTH", "X_API_KEY", "API_KEY", "BEARER_TOKEN"]);
    assert_eq!(f.env[0].found, "step 1, JSON field password");
}

#[test]
fn percent_encoded_values_and_literal_dollar_braces() {
    let f = run(&[
        get("/a").json(r#"{"next":"cursor 42/xyz+1"}"#),
        // The value percent-encoded in the query.
        get("/b?after=cursor%2042%2Fxyz%2B1"),
        // A recorded `${` stays text.
        get("/c?q=$%7Bx%7D").header("X-T", "${not-a-var}"),
    ]);
    assert_eq!(target(&f, 1), "/b?after=${next}");
    assert_eq!(header(&f, 2, "X-T").as_deref(), Some("$${not-a-var}"));
}

#[test]
fn trivial_values() {
    let cases = [
        // Short.
        ("abc12", true),
        // Numbers of fewer than 5 digits: pages, quantities, years.
        ("2024", true),
        ("12.50", true),
        // Five digits and more: ids.
        ("10001", false),
        // Words and booleans.
        ("pending", true),
        ("Shipped", true),
        ("true", true),
        ("application", true),
        // Dates.
        ("2024-05-01", true),
        ("2024-05-01T12:00:00Z", true),
        // Tokens, ids with letters and digits, mixed case.
        ("c-7f3a9e21", false),
        ("SKU-00042", false),
        ("correctHorse", false),
    ];
    for (v, want) in cases {
        assert_eq!(trivial(v), want, "{v}");
    }
}

#[test]
fn names() {
    let cases = [
        // A key as it is.
        ("token", "token"),
        // Dashes and case.
        ("X-Request-Id", "x_request_id"),
        // A leading digit.
        ("2fa", "v_2fa"),
        // Reserved names of perfops' variables.
        ("seq", "seq_value"),
        ("env", "env_value"),
        // Nothing usable.
        ("--", "value"),
    ];
    for (hint, want) in cases {
        assert_eq!(ident(hint), want, "{hint}");
    }
}

#[test]
fn unique_names() {
    let mut names = Names::new("_");
    let cases = [
        // Free: as it is.
        ("a", "a"),
        // Taken: numbered from 2.
        ("a", "a_2"),
        // A numbered name asked for by itself ...
        ("a_3", "a_3"),
        // ... is skipped when its base comes again.
        ("a", "a_4"),
        // A numbered name taken: numbered in its turn.
        ("a_2", "a_2_2"),
    ];
    for (base, want) in cases {
        assert_eq!(names.unique(base.to_string()), want, "{base}");
    }
    // Twenty thousand alike (a long recording's steps): each lookup is constant, not a search
    // from `_2` (which took minutes).
    let mut names = Names::new("-");
    let all: std::collections::HashSet<String> = (0..20_000).map(|_| names.unique("orders".into())).collect();
    assert_eq!(all.len(), 20_000);
}
