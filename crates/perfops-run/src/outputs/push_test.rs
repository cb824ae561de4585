//! The push policy against a scripted wire: an in-process fake of
//! [`Deliver`] that answers as told and records what each request held. The
//! protocols themselves are tested against real receivers
//! (crates/perfops/tests/push_rw.rs).

use std::collections::VecDeque;

use super::*;

/// Answers each request with the next scripted result (then success), and
/// records the seconds each request held.
#[derive(Default)]
struct Script {
    answers: VecDeque<Result<(), Failure>>,
    requests: Vec<Vec<u32>>,
    formats: Vec<&'static str>,
    /// The header fields of every success (none: as a 1.0 receiver answers).
    fields: Vec<(String, Vec<u8>)>,
    rejected: Rejected,
}

impl Deliver for Script {
    fn deliver(&mut self, payload: &Payload, _timeout: Duration) -> Result<(), Failure> {
        self.requests.push(payload.body.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        self.formats.push(payload.content_type);
        self.answers.pop_front().unwrap_or(Ok(()))
    }
    fn target(&self) -> &str {
        "http://127.0.0.1:9/api/v1/write"
    }
    fn answer(&self) -> &[(String, Vec<u8>)] {
        &self.fields
    }
    fn notes(&self) -> Vec<String> {
        self.rejected.note(self.target()).into_iter().collect()
    }
}

/// Seconds are their numbers; a request is their bytes, in the format of
/// the moment ("v2" until a 415, then "v1").
#[derive(Default)]
struct Numbers {
    v1: bool,
}

impl Encode for Numbers {
    type Item = u32;
    fn start(&mut self, _: &RunMeta) {}
    fn second(&mut self, s: &Second<'_>) -> u32 {
        s.t
    }
    fn request(&mut self, items: &[&u32]) -> Payload {
        Payload {
            body: items.iter().flat_map(|n| n.to_le_bytes()).collect(),
            content_type: if self.v1 { "v1" } else { "v2" },
            headers: Vec::new(),
        }
    }
    fn refused(&mut self, status: u16) -> bool {
        if status == 415 && !self.v1 {
            self.v1 = true;
            return true;
        }
        false
    }
    fn taken(&mut self, answer: &[(String, Vec<u8>)]) -> bool {
        if !self.v1 && !answer.iter().any(|(n, _)| n == "written") {
            self.v1 = true;
            return true;
        }
        false
    }
}

fn retry(reason: &str) -> Result<(), Failure> {
    Err(Failure::Retry { reason: reason.into(), after: None })
}

fn refused(status: u16, reason: &str) -> Result<(), Failure> {
    Err(Failure::Refused { status, reason: reason.into() })
}

/// Short waits, so that a test's drain takes milliseconds.
const QUICK: Policy = Policy {
    backlog: 300,
    per_request: 30,
    request_bytes: 1 << 20,
    first_backoff: Duration::from_millis(2),
    max_backoff: Duration::from_millis(10),
    max_retry_after: Duration::from_millis(50),
    timeout: Duration::from_millis(100),
    drain: Duration::from_millis(200),
};

fn push(answers: Vec<Result<(), Failure>>, policy: Policy) -> Pushing<Numbers, Script> {
    // A receiver of the "v2" format: it says what it wrote.
    let fields = vec![("written".to_string(), b"1".to_vec())];
    let script = Script { answers: answers.into(), fields, ..Script::default() };
    Pushing::new("prometheus-rw", Numbers::default(), script, policy)
}

/// Tick until nothing waits, sleeping as asked (bounded).
fn settle(p: &mut Pushing<Numbers, Script>) {
    for _ in 0..1000 {
        match p.tick(Instant::now()) {
            None => return,
            Some(wait) => std::thread::sleep(wait),
        }
    }
    panic!("never settled");
}

#[test]
fn backoff_doubles_to_its_bound_with_jitter_and_honours_retry_after() {
    let mut b = Backoff::new(&Policy::DEFAULT);
    // (Retry-After, random unit, wait) in turn
    let cases = [
        (None, 0.999_999, 250),     // the first wait, jitter at its top
        (None, 0.0, 250),           // 0.5 s, halved by the jitter's bottom
        (None, 0.5, 750),           // 1 s × 0.75
        (Some(3), 0.0, 3000),       // 2 s × 0.5 = 1 s, but the receiver asked for 3 s
        (Some(1), 0.999_999, 4000), // 4 s: a shorter Retry-After does not shorten the backoff
        (None, 0.999_999, 5000),    // doubled to 8 s, held at 5 s
        (Some(3600), 0.0, 60_000),  // an hour asked: 60 s at most (the backlog is bounded anyway)
    ];
    for (i, (after, unit, ms)) in cases.into_iter().enumerate() {
        let wait = b.failed(after.map(Duration::from_secs), unit);
        assert!(wait.as_millis().abs_diff(ms) <= 1, "case {i}: waited {wait:?}, not {ms} ms");
    }
    b.reset();
    assert_eq!(b.failed(None, 0.999_999).as_millis(), 249, "a success starts over at 0.25 s");
}

/// A receiver down for three tries: each try waits longer, nothing is
/// sent before its time, and when it is back, everything waiting goes in
/// one request, oldest first; all delivered, nothing to say.
#[test]
fn a_receiver_back_from_down_gets_the_backlog_in_one_request() {
    let mut p =
        push(vec![retry("connection refused"), retry("connection refused"), retry("connection refused")], QUICK);
    let t0 = Instant::now();
    p.add(0);
    assert!(p.tick(t0).is_some(), "failed: a wait before the next try");
    // Not yet time: no request.
    p.add(1);
    assert!(p.tick(t0).is_some());
    assert_eq!(p.wire().requests.len(), 1, "a tick before the backoff's time sends nothing");
    p.add(2);
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0], vec![0, 1, 2], vec![0, 1, 2], vec![0, 1, 2]]);
    assert_eq!((p.tally().delivered, p.tally().failed_tries), (3, 3));
    p.drain(Instant::now() + QUICK.drain);
    assert_eq!(p.notes(), Vec::<String>::new(), "all delivered: nothing to say");
}

/// The backlog keeps the newest `backlog` seconds: the oldest go first, counted.
#[test]
fn a_full_backlog_drops_the_oldest_and_counts_them() {
    let mut p = push(vec![retry("HTTP 503 Service Unavailable")], Policy { backlog: 3, ..QUICK });
    p.add(0);
    p.tick(Instant::now());
    for t in 1..6 {
        p.add(t);
    }
    settle(&mut p);
    assert_eq!(p.wire().requests.last(), Some(&vec![3, 4, 5]), "the three newest");
    assert_eq!((p.tally().evicted, p.tally().delivered), (3, 3));
    assert_eq!(
        p.notes(),
        vec![
            "output prometheus-rw: 3 of 6 seconds not delivered to http://127.0.0.1:9/api/v1/write \
             (HTTP 503 Service Unavailable, 1 try; 3 dropped, more than 3 waiting)"
                .to_string()
        ]
    );
}

/// Catching up goes `per_request` seconds at a time, and a body over the
/// byte bound goes in halves.
#[test]
fn requests_are_bounded_in_seconds_and_in_bytes() {
    let mut p = push(Vec::new(), Policy { per_request: 3, ..QUICK });
    for t in 0..7 {
        p.add(t);
    }
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    // 4 bytes a second, 12 bytes at most: 8 waiting are halved to 4, then 2;
    // the 6 left to 3, which fit; then the last 3.
    let mut p = push(Vec::new(), Policy { request_bytes: 12, ..QUICK });
    for t in 0..8 {
        p.add(t);
    }
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0, 1], vec![2, 3, 4], vec![5, 6, 7]]);
}

/// A 4xx other than the format's: those seconds are given up at once
/// (never retried), the reason kept, and the next seconds go on.
#[test]
fn a_refused_request_is_given_up_and_said_with_its_reason() {
    let mut p = push(vec![refused(400, "HTTP 400: out of order sample")], QUICK);
    p.add(0);
    p.add(1);
    p.tick(Instant::now());
    p.add(2);
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0, 1], vec![2]], "refused seconds are not sent again");
    p.drain(Instant::now() + QUICK.drain);
    assert_eq!(
        p.notes(),
        vec![
            "output prometheus-rw: 2 of 3 seconds not delivered to http://127.0.0.1:9/api/v1/write \
             (2 refused: HTTP 400: out of order sample)"
                .to_string()
        ]
    );
}

/// What a wire says besides delivered or not (OTLP's partial success:
/// points rejected in requests it took) is said with the output's name,
/// with no second lost; the receiver's reason is its first line, redacted
/// of the push's secrets, the last one kept.
#[test]
fn a_wires_rejected_points_are_said_with_the_outputs_name() {
    let mut p = push(Vec::new(), QUICK);
    p.add(0);
    settle(&mut p);
    p.drain(Instant::now() + QUICK.drain);
    assert_eq!(p.notes(), Vec::<String>::new(), "nothing rejected: nothing said");
    let secrets = ["Bearer s3cr3t-t0ken".to_string()];
    p.deliver.rejected.add(2, "2 points for Bearer s3cr3t-t0ken\nmore", &secrets);
    let notes = p.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("output prometheus-rw: http://127.0.0.1:9/api/v1/write rejected 2 data points"));
    assert!(!notes[0].contains("s3cr3t") && !notes[0].contains("more"), "{notes:?}");
    p.deliver.rejected.add(0, "nothing", &secrets);
    p.deliver.rejected.add(1, "NaN in perfops.latency", &secrets);
    assert_eq!(
        p.notes(),
        ["output prometheus-rw: http://127.0.0.1:9/api/v1/write rejected 3 data points of what it took \
          (NaN in perfops.latency)"]
    );
}

/// A 415 the format can answer (remote-write 2.0 -> 1.0): the same seconds
/// again at once in the other format, which stays; nothing lost. A second
/// 415 in the new format is a refusal as any other.
#[test]
fn a_415_switches_the_format_once_and_loses_nothing() {
    let mut p = push(vec![refused(415, "HTTP 415 Unsupported Media Type")], QUICK);
    p.add(0);
    settle(&mut p);
    p.add(1);
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0], vec![0], vec![1]]);
    assert_eq!(p.wire().formats, vec!["v2", "v1", "v1"], "1.0 for the rest of the run");
    assert_eq!((p.tally().delivered, p.tally().refused), (2, 0));
    let mut p = push(vec![refused(415, "a"), refused(415, "HTTP 415 Unsupported Media Type")], QUICK);
    p.add(0);
    settle(&mut p);
    assert_eq!(p.tally().refused, 1, "refused in both formats");
}

/// A success whose answer shows the format was not read (a 1.0 receiver
/// taking a 2.0 request as an empty one): the same seconds again at once in
/// the other format, which stays; counted once as delivered.
#[test]
fn a_success_the_format_says_was_not_read_is_sent_again_in_the_other() {
    let mut p = push(Vec::new(), QUICK);
    p.deliver.fields.clear();
    p.add(0);
    p.add(1);
    settle(&mut p);
    p.add(2);
    settle(&mut p);
    assert_eq!(p.wire().requests, vec![vec![0, 1], vec![0, 1], vec![2]]);
    assert_eq!(p.wire().formats, vec!["v2", "v1", "v1"]);
    assert_eq!((p.tally().delivered, p.tally().seconds), (3, 3));
}

/// A receiver that never answers well: the drain gives up at its bound,
/// says how many seconds and why, and the run is not held longer.
#[test]
fn the_drain_is_bounded_and_says_what_is_left() {
    let answers = (0..1000).map(|_| retry("HTTP 503 Service Unavailable")).collect();
    let mut p = push(answers, QUICK);
    for t in 0..5 {
        p.add(t);
    }
    let began = Instant::now();
    p.drain(Instant::now() + QUICK.drain);
    let took = began.elapsed();
    assert!(took < QUICK.drain + QUICK.timeout, "drained for {took:?}");
    assert!(took >= QUICK.drain - QUICK.max_backoff - Duration::from_millis(5), "gave up early: {took:?}");
    let tries = p.tally().failed_tries;
    assert!(tries >= 10, "retried during the drain: {tries} tries");
    assert_eq!(p.tally().left, 5);
    assert_eq!(
        p.notes(),
        vec![format!(
            "output prometheus-rw: 5 of 5 seconds not delivered to http://127.0.0.1:9/api/v1/write \
             (HTTP 503 Service Unavailable, {tries} tries)"
        )]
    );
}

#[test]
fn statuses_are_retried_or_refused() {
    let h = |pairs: &[(&str, &str)]| -> Vec<(String, Vec<u8>)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect()
    };
    let none: Vec<String> = Vec::new();
    // (status, headers, body, what it is)
    let cases = [
        // a receiver restarting: retried, no wait asked
        (503, h(&[]), "", Failure::Retry { reason: "HTTP 503 Service Unavailable".into(), after: None }),
        // rate-limited with a wait in seconds: honoured; what it said is the reason
        (
            429,
            h(&[("Retry-After", " 7 ")]),
            "slow down",
            Failure::Retry { reason: "HTTP 429: slow down".into(), after: Some(Duration::from_secs(7)) },
        ),
        // a Retry-After date (IMF-fixdate) 90 s after now: waited from now
        (
            503,
            h(&[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")]),
            "",
            Failure::Retry { reason: "HTTP 503 Service Unavailable".into(), after: Some(Duration::from_secs(90)) },
        ),
        // a date already past: retried at once (the backoff still applies)
        (
            503,
            h(&[("Retry-After", "Wed, 21 Oct 2026 07:00:00 GMT")]),
            "",
            Failure::Retry { reason: "HTTP 503 Service Unavailable".into(), after: Some(Duration::ZERO) },
        ),
        // neither seconds nor a date: not read, the backoff waits instead
        (
            503,
            h(&[("Retry-After", "soon")]),
            "",
            Failure::Retry { reason: "HTTP 503 Service Unavailable".into(), after: None },
        ),
        // an unusual 5xx is retried too, by its number
        (599, h(&[]), "", Failure::Retry { reason: "HTTP 599".into(), after: None }),
        // Prometheus 2.x without native histograms: retried, and the note says why
        (
            500,
            h(&[]),
            "native histograms are disabled\n",
            Failure::Retry { reason: "HTTP 500: native histograms are disabled".into(), after: None },
        ),
        // Prometheus refusing a sample: the body's first line is the reason
        (
            400,
            h(&[]),
            "\nout of order sample\nmore\n",
            Failure::Refused { status: 400, reason: "HTTP 400: out of order sample".into() },
        ),
        // no body: the status's phrase
        (404, h(&[]), "", Failure::Refused { status: 404, reason: "HTTP 404 Not Found".into() }),
        // a body with control characters is made printable
        (
            400,
            h(&[]),
            "bad\u{1b}[2J label",
            Failure::Refused { status: 400, reason: "HTTP 400: bad\\u{1b}[2J label".into() },
        ),
        // a redirect is not followed: refused
        (302, h(&[("Location", "/x")]), "", Failure::Refused { status: 302, reason: "HTTP 302".into() }),
    ];
    // 2026-10-21T07:26:30Z, the instant the dates above are read against
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_792_567_590);
    for (i, (status, headers, body, want)) in cases.into_iter().enumerate() {
        assert_eq!(failure(status, &headers, body.as_bytes(), &none, now), want, "case {i}");
    }
    // The reason is bounded, and a receiver echoing a header's value does not show it.
    let long = "x".repeat(10_000);
    let Failure::Refused { reason, .. } = failure(400, &[], long.as_bytes(), &none, now) else { panic!("refused") };
    assert_eq!(reason.len(), "HTTP 400: ".len() + REASON_CHARS);
    let secrets = vec!["Bearer s3cr3t-token".to_string()];
    let Failure::Refused { reason, .. } = failure(401, &[], b"bad token Bearer s3cr3t-token", &secrets, now) else {
        panic!("refused")
    };
    assert!(!reason.contains("s3cr3t"), "{reason}");
}

#[test]
fn headers_from_the_environment_are_parsed_as_opentelemetry_says_and_checked() {
    let ok = |text: &str| parse_headers("VAR", text).expect("valid");
    let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
    // (text, headers)
    let cases: [(&str, Vec<(String, String)>); 5] = [
        ("", pairs(&[])),                                                                  // nothing
        ("api-key=abc", pairs(&[("api-key", "abc")])),                                     // one
        (" a = 1 , b=2,", pairs(&[("a", "1"), ("b", "2")])), // spaces trimmed, empty entries skipped
        ("Authorization=Bearer%20tok%3D%3D", pairs(&[("Authorization", "Bearer tok==")])), // percent-decoded
        ("X-Scope-OrgID=tenant=1", pairs(&[("X-Scope-OrgID", "tenant=1")])), // the first `=` splits
    ];
    for (text, want) in cases {
        assert_eq!(ok(text), want, "{text:?}");
    }
    // (text, error) — an error names the variable and the header, never the value
    let errors = [
        ("Authorization=Bearer x%0D%0AHost: evil", "VAR: the value of header `Authorization` holds a byte"), // CR/LF
        ("Authorization=a%00b", "VAR: the value of header `Authorization` holds a byte"),                    // NUL
        ("k=v%4", "VAR: the value of header `k` has a `%` not followed by two hex digits"), // cut escape
        ("k=v%+1", "VAR: the value of header `k` has a `%` not followed by two hex digits"), // not hex
        ("secret-without-equals", "VAR: entry 1 is not name=value"),                        // no `=`
        ("a=1,bad name=2", "VAR: entry 2 has no valid header name"),                        // space in a name
        ("Content-Length=0", "VAR: header `Content-Length` is written by perfops itself"),  // framing
    ];
    for (text, want) in errors {
        let e = parse_headers("VAR", text).expect_err(text);
        assert!(e.starts_with(want), "{text:?}: {e}");
        assert!(!e.contains("evil") && !e.contains("secret"), "{e}");
    }
}

/// A URL's `user:password@` is basic auth, and the URL is shown redacted.
#[test]
fn a_url_with_credentials_is_basic_auth_and_shown_redacted() {
    let http = Http::new("http://alice:p%40ss@127.0.0.1:9090/api/v1/write", &[]).expect("valid");
    assert_eq!(http.target(), "http://alice:<redacted>@127.0.0.1:9090/api/v1/write");
    assert_eq!(http.url.as_str(), "http://127.0.0.1:9090/api/v1/write", "no credentials on the wire's URL");
    // alice:p@ss
    assert_eq!(http.headers, vec![("Authorization".to_string(), "Basic YWxpY2U6cEBzcw==".to_string())]);
    assert!(!format!("{http:?}").contains("YWxp"), "not in a debug print");
    for (url, want) in [
        ("ftp://127.0.0.1/", "scheme `ftp`"), // not HTTP
        ("not a url", "is not a URL"),        // not a URL
    ] {
        let e = Http::new(url, &[]).expect_err(url);
        assert!(e.contains(want), "{url}: {e}");
    }
}
