//! Request header fields the browser computed per request (a signature, a
//! timestamp, a nonce), found in a recording, and the request hook that
//! must compute them in a run: a script file with one function and a
//! `before:` on the steps that carried them.
//!
//! This module owns what counts as computed and what the script file says;
//! `mod.rs` puts the hook on the steps and the file beside the scenario.
//!
//! A field counts as computed when it was sent by at least
//! [`MIN_REQUESTS`] requests, each with a value no other request sent
//! (it changes per request), and no earlier answer carried it (correlation
//! made no `save` for it: a token a login answered is saved, never
//! computed). Sent as recorded, such a field is a stale copy that a server
//! which checks it refuses (an HMAC over the body and a timestamp, a
//! one-time nonce). A field sent once tells nothing about whether it
//! changes, and stays as recorded.
//!
//! The script never holds a recorded value (a signature can be replayed; a
//! header of a signing scheme may name a key): each field's shape is said
//! (`64 hex digits`, `13 digits`), with a first guess that computes a value
//! of that shape (the run's clock for a timestamp, `perfops.uuid()`, an
//! HMAC under a placeholder key for a digest, random text of the same
//! length and alphabet for anything else), and what the hook must compute
//! in its place. `perfops check` compiles it as it is.

use std::fmt::Write as _;

use super::correlate::{Piece, Request, Templated};

/// The fewest requests that must carry a field for it to count as changing per request.
pub const MIN_REQUESTS: usize = 2;

/// The hook's function name, as the steps' `before:` name it.
pub const FUNCTION: &str = "computed_headers";

/// A request header field the browser computed per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Computed {
    /// The field's name, as the first request that carried it wrote it.
    pub name: String,
    /// The steps (indexes) that carried it.
    pub steps: Vec<usize>,
    /// What its recorded values look like.
    pub shape: Shape,
}

/// What a computed field's recorded values look like (all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// 10 digits: seconds since 1970.
    UnixSeconds,
    /// 13 digits: milliseconds since 1970.
    UnixMillis,
    /// An ISO 8601 instant, `2026-11-29T14:00:00.000Z`.
    IsoInstant,
    /// A UUID, `8-4-4-4-12` hex digits.
    Uuid,
    /// Hex digits of a digest's length (32, 40, 64, 96 or 128).
    HexDigest(usize),
    /// Base64 of a digest's length (28, 44, 64 or 88 characters with their padding).
    Base64Digest(usize),
    /// Anything else, of at most this many characters.
    Other(usize),
}

/// A field as recorded: its name as first written, its lower-case name, and each (step, value)
/// that sent it.
type Sent<'a> = (String, String, Vec<(usize, &'a str)>);

/// The fields of `recorded` (requests as sent, in order) that the browser
/// computed per request, in the order first sent. `templated` is the same
/// requests after correlation: a field with a reference to a saved value in
/// any of them was answered earlier, not computed.
pub fn computed(recorded: &[Request], templated: &[Templated]) -> Vec<Computed> {
    // (name as first written, lower-case name, [(step, value)]), in the order first sent.
    let mut fields: Vec<Sent<'_>> = Vec::new();
    for (step, r) in recorded.iter().enumerate() {
        for (name, value) in &r.headers {
            let lower = name.to_ascii_lowercase();
            // Cookies are the run's jar's (correlate.rs).
            if lower == "cookie" {
                continue;
            }
            match fields.iter_mut().find(|(_, l, _)| *l == lower) {
                Some((_, _, sent)) => sent.push((step, value.as_str())),
                None => fields.push((name.clone(), lower, vec![(step, value.as_str())])),
            }
        }
    }
    let saved = |step: usize, lower: &str| -> bool {
        templated.get(step).is_some_and(|t| {
            t.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(lower)).any(|(_, tpl)| {
                // `${env.NAME}` is a credential read from the environment, not an answer's value.
                tpl.iter().any(|p| matches!(p, Piece::Var(v) if !v.starts_with("env.")))
            })
        })
    };
    fields
        .into_iter()
        .filter(|(_, lower, sent)| {
            sent.len() >= MIN_REQUESTS
                && sent.iter().enumerate().all(|(i, (_, v))| !v.is_empty() && sent[..i].iter().all(|(_, w)| w != v))
                && !sent.iter().any(|(step, _)| saved(*step, lower))
        })
        .map(|(name, _, sent)| {
            let values: Vec<&str> = sent.iter().map(|(_, v)| *v).collect();
            let mut steps: Vec<usize> = sent.iter().map(|(s, _)| *s).collect();
            steps.dedup();
            Computed { name, steps, shape: shape(&values) }
        })
        .collect()
}

/// The shape all of `values` share.
pub fn shape(values: &[&str]) -> Shape {
    let all = |f: &dyn Fn(&str) -> bool| values.iter().all(|v| f(v));
    let digits = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    let hex = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_hexdigit());
    let same_len = |n: usize| all(&|v: &str| v.len() == n);
    let len = values.first().map_or(0, |v| v.len());
    if all(&|v| digits(v) && v.len() == 10) {
        Shape::UnixSeconds
    } else if all(&|v| digits(v) && v.len() == 13) {
        Shape::UnixMillis
    } else if all(&is_iso_instant) {
        Shape::IsoInstant
    } else if all(&is_uuid) {
        Shape::Uuid
    } else if same_len(len) && [32, 40, 64, 96, 128].contains(&len) && all(&|v| hex(v)) {
        Shape::HexDigest(len)
    } else if same_len(len) && [28, 44, 64, 88].contains(&len) && all(&is_base64) {
        Shape::Base64Digest(len)
    } else {
        Shape::Other(values.iter().map(|v| v.chars().count()).max().unwrap_or(0))
    }
}

/// `2026-11-29T14:00:00Z`, with or without fractions or an offset.
fn is_iso_instant(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b.iter().all(|c| c.is_ascii_digit() || b"-:T.Z+".contains(c))
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    parts.len() == 5
        && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Standard base64 with its padding.
fn is_base64(v: &str) -> bool {
    let body = v.trim_end_matches('=');
    v.len().is_multiple_of(4)
        && v.len() - body.len() <= 2
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

impl Shape {
    /// What the recorded values were, for a comment.
    fn said(self) -> String {
        match self {
            Shape::UnixSeconds => "10 digits: seconds since 1970".into(),
            Shape::UnixMillis => "13 digits: milliseconds since 1970".into(),
            Shape::IsoInstant => "an ISO 8601 instant".into(),
            Shape::Uuid => "a UUID".into(),
            Shape::HexDigest(32) => "32 hex digits: a digest or an HMAC (MD5's length)".into(),
            Shape::HexDigest(n) => format!("{n} hex digits: a digest or an HMAC ({}'s length)", alg(n, true)),
            Shape::Base64Digest(n) => {
                format!("{n} base64 characters: a digest or an HMAC ({}'s length)", alg(n, false))
            }
            Shape::Other(n) => format!("up to {n} characters that no rule here recognises"),
        }
    }

    /// The JavaScript expression of the first guess (reads `req` and `now`); `time` is the
    /// expression of the request's time as a signature would cover it.
    fn guess(self, time: &str) -> String {
        let hmac = |alg: &str, enc: &str| {
            format!(
                "perfops.hmac(\"{alg}\", vars.signing_key || SIGNING_KEY, [req.method, req.path, {time}, req.body].join(\"\\n\"), \"{enc}\")"
            )
        };
        match self {
            Shape::UnixSeconds => "String(Math.floor(now / 1000))".into(),
            Shape::UnixMillis => "String(now)".into(),
            Shape::IsoInstant => "new Date(now).toISOString()".into(),
            Shape::Uuid => "perfops.uuid()".into(),
            // As long as MD5's: SHA-256 cut to its length (the library has no MD5).
            Shape::HexDigest(32) => format!("{}.slice(0, 32)", hmac("sha256", "hex")),
            Shape::HexDigest(n) => hmac(alg(n, true), "hex"),
            Shape::Base64Digest(n) => hmac(alg(n, false), "base64"),
            Shape::Other(n) => format!("random_text({})", n.max(1)),
        }
    }

    /// Whether it is the request's time.
    fn is_time(self) -> bool {
        matches!(self, Shape::UnixSeconds | Shape::UnixMillis | Shape::IsoInstant)
    }

    /// What a run must compute in its place.
    fn must(self) -> &'static str {
        match self {
            Shape::UnixSeconds | Shape::UnixMillis | Shape::IsoInstant => {
                "the time of the request: the run's clock (Date.now()) is right if the server only checks it is recent"
            }
            Shape::Uuid => "a fresh UUID per request, if the server only checks that it is new",
            Shape::HexDigest(_) | Shape::Base64Digest(_) => {
                "what the page's code signed or hashed, and with which key: the guess below signs method, path, \
                 time and body, one per line, under a placeholder key that a server which checks it refuses"
            }
            Shape::Other(_) => {
                "what the page's code computed; the guess below is random text of the same length, \
                 enough for a nonce the server only checks is new"
            }
        }
    }
}

/// The SHA-2 (or SHA-1) whose digest is `n` hex digits (`hex`) or base64 characters long.
fn alg(n: usize, hex: bool) -> &'static str {
    match (n, hex) {
        (40, true) | (28, false) => "sha1",
        (96, true) | (64, false) => "sha384",
        (128, true) | (88, false) => "sha512",
        _ => "sha256",
    }
}

/// The script file: one request hook that sets every field of `computed`,
/// and a comment for each that says what was recorded and what it must
/// compute. `file` names the recording.
pub fn script(file: &str, computed: &[Computed]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "// The request hook `perfops import har` wrote for {}.", one_line(file));
    out.push_str(
        "//\n\
         // The header fields below changed with every recorded request that sent them, and no\n\
         // earlier answer carried their values: the page's own code computed them (a signature,\n\
         // a timestamp, a nonce). Sent as recorded, a server that checks them refuses the copies.\n\
         // `computed_headers` is called just before each step that sent them (`before:` in the\n\
         // scenario) with the request as it will go: req.method, req.path (with its query),\n\
         // req.headers, req.body. What it sets is sent. Each field has a first guess of the\n\
         // recorded shape: make it compute what the page computed (docs/guide/scripting.md: the\n\
         // library's HMAC, hashes, base64, hex, UUIDs and seeded random numbers).\n\n",
    );
    let shapes: Vec<Shape> = computed.iter().map(|c| c.shape).collect();
    if shapes.iter().any(|s| matches!(s, Shape::HexDigest(_) | Shape::Base64Digest(_))) {
        out.push_str(
            "// The signing key: never the recording's (it is not in it). A setup step that fetches\n\
             // one and saves it as `signing_key` is read first.\n\
             const SIGNING_KEY = \"replace-me\";\n\n",
        );
    }
    if shapes.iter().any(|s| matches!(s, Shape::Other(_))) {
        out.push_str(
            "// `n` characters drawn from the run's seeded stream.\n\
             function random_text(n) {\n\
             \x20 const alphabet = \"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789\";\n\
             \x20 let s = \"\";\n\
             \x20 for (let i = 0; i < n; i++) s += alphabet[perfops.randomInt(0, alphabet.length - 1)];\n\
             \x20 return s;\n\
             }\n\n",
        );
    }
    let _ = writeln!(out, "function {FUNCTION}(req) {{");
    out.push_str("  const now = Date.now(); // the run's clock\n");
    // The first field that is the request's time is the time a signature covers (a common
    // scheme signs METHOD, PATH, TIME and BODY, one per line); without one, the clock's.
    let time = computed.iter().find(|c| c.shape.is_time());
    if let Some(t) = time {
        let _ = writeln!(out, "  const time = {};", t.shape.guess(""));
    }
    let time_expr = if time.is_some() { "time" } else { "String(now)" };
    for c in computed {
        let steps: Vec<String> = c.steps.iter().map(|s| (s + 1).to_string()).collect();
        let _ = writeln!(
            out,
            "  // {}: sent by step{} {}, {}.",
            one_line(&c.name),
            if steps.len() == 1 { "" } else { "s" },
            steps.join(", "),
            c.shape.said()
        );
        let _ = writeln!(out, "  // To compute: {}.", c.shape.must());
        let value = if time.is_some_and(|t| t.name == c.name) { "time".to_string() } else { c.shape.guess(time_expr) };
        let _ = writeln!(out, "  req.headers[{}] = {value};", js_string(&c.name));
    }
    out.push_str("}\n");
    out
}

/// `s` as a JavaScript string literal (JSON's escapes are JavaScript's).
fn js_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// `s` with line breaks made spaces: it goes into a `//` comment.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() || c == '\u{2028}' || c == '\u{2029}' { ' ' } else { c }).collect()
}
