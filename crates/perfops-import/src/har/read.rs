//! A HAR 1.2 file read into the entries an import can use: each one's
//! request (method, URL, headers, body), response (status, headers, MIME
//! type, text) and when it started and ended.
//!
//! This module owns reading and its errors; it does not decide what is kept
//! (`select.rs`) or what flows between requests (`correlate.rs`).
//!
//! A HAR is untrusted input, read with three bounds: the file's size
//! ([`MAX_HAR_BYTES`], checked before it is read, since serde holds the whole
//! document at once and a 200 MB recording of a long session is about the
//! largest a browser writes), text that is not JSON or ends early (refused with
//! its line and column and a hint, never a panic), and entries that lack what a
//! step needs (a method, an `http(s)` URL, a response the browser got):
//! skipped, counted, and the first few named, so that one odd entry (a
//! `data:` URL, a request the page aborted) does not lose the recording.
//! Entries are decoded one by one from `serde_json::Value`s for that reason:
//! a strict schema would refuse the whole file for one entry.

use std::path::Path;

use serde_json::Value;

/// The largest HAR read: 256 MiB.
pub const MAX_HAR_BYTES: u64 = 256 << 20;

/// How many skipped entries are named as examples.
const EXAMPLES: usize = 5;

/// Why a HAR could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HarError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Larger than [`MAX_HAR_BYTES`].
    #[error("{path}: {size_bytes} bytes is more than the {limit_bytes} bytes a HAR may have")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// Not JSON, or JSON cut short.
    #[error("{path}:{line}:{column}: {message}\n  hint: {hint}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// JSON, but not a HAR (no `log.entries` list).
    #[error(
        "{path}: {message}\n  hint: a HAR is {{\"log\": {{\"entries\": [...]}}}}, as a browser's DevTools \"Save all as HAR\" writes it"
    )]
    NotHar {
        /// The file.
        path: String,
        /// What is missing.
        message: String,
    },
}

/// One recorded exchange, as the import uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its index in `log.entries` (0-based), to name it in messages.
    pub index: usize,
    /// When the request started, in milliseconds since the Unix epoch; `None`: not recorded
    /// (hand-written HARs), so no think time is taken around it.
    pub started_ms: Option<f64>,
    /// How long the exchange took (HAR `time`), in milliseconds.
    pub time_ms: f64,
    /// `pageref`, when the browser gave one.
    pub page: Option<String>,
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URL as recorded.
    pub url: url::Url,
    /// Request header fields, in order, as recorded.
    pub request_headers: Vec<(String, String)>,
    /// The request body, when there was one.
    pub post: Option<PostData>,
    /// The response status; `None`: the file has no response for it (a hand-written HAR).
    /// A recorded status 0 (the browser got no answer) is skipped instead.
    pub status: Option<u16>,
    /// Response header fields, in order.
    pub response_headers: Vec<(String, String)>,
    /// The response's MIME type (`content.mimeType`, else its `Content-Type`), lowercase, without parameters.
    pub mime: String,
    /// The response body as text, when the recording kept it and it is text.
    pub response_text: Option<String>,
}

impl Entry {
    /// When the response ended, in milliseconds since the Unix epoch.
    pub fn ended_ms(&self) -> Option<f64> {
        self.started_ms.map(|s| s + self.time_ms.max(0.0))
    }

    /// The first request header named `name` (case-insensitive).
    pub fn request_header(&self, name: &str) -> Option<&str> {
        self.request_headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub struct PostData {
    /// Its MIME type, lowercase, without parameters (may be empty).
    pub mime: String,
    /// The body as text.
    pub text: String,
}

/// A HAR read: its usable entries in order of their start, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Har {
    /// The entries, sorted by start time (a HAR lists them in that order, but not always).
    pub entries: Vec<Entry>,
    /// Page titles by page id (`log.pages`).
    pub pages: Vec<(String, String)>,
    /// What wrote it (`log.creator.name` and `version`).
    pub creator: Option<String>,
    /// How many entries were skipped.
    pub skipped: usize,
    /// The first few skipped, each with its index and why.
    pub skipped_examples: Vec<String>,
}

/// Read the HAR at `path`, refusing one larger than [`MAX_HAR_BYTES`] before reading it.
pub fn read_file(path: &Path) -> Result<Har, HarError> {
    let name = path.display().to_string();
    let io = |source| HarError::Io { path: name.clone(), source };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_HAR_BYTES {
        return Err(HarError::TooLarge { path: name, size_bytes: size, limit_bytes: MAX_HAR_BYTES });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    parse(&name, &bytes)
}

/// Read a HAR from `bytes`; `name` is the file named in errors.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Har, HarError> {
    if bytes.len() as u64 > MAX_HAR_BYTES {
        return Err(HarError::TooLarge {
            path: name.into(),
            size_bytes: bytes.len() as u64,
            limit_bytes: MAX_HAR_BYTES,
        });
    }
    // A UTF-8 byte-order mark, which some Windows tools write, is not JSON.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| {
        let (message, hint) = match e.classify() {
            serde_json::error::Category::Eof => (
                "the file ends in the middle of the JSON".to_string(),
                "the HAR is truncated: save it again from the browser (the recording may still have been writing)",
            ),
            _ => (
                e.to_string().split(" at line ").next().unwrap_or("not JSON").to_string(),
                "a HAR is a JSON file; this one is not (a binary file, or another format?)",
            ),
        };
        HarError::Syntax { path: name.into(), line: e.line(), column: e.column(), message, hint }
    })?;
    let not_har = |message: &str| HarError::NotHar { path: name.into(), message: message.into() };
    let log = doc.get("log").ok_or_else(|| not_har("no `log` object at the top"))?;
    let raw = log.get("entries").and_then(Value::as_array).ok_or_else(|| not_har("no `log.entries` list"))?;
    let mut har = Har {
        pages: log
            .get("pages")
            .and_then(Value::as_array)
            .map(|pages| {
                pages
                    .iter()
                    .filter_map(|p| Some((str_of(p, "id")?.to_string(), str_of(p, "title").unwrap_or("").to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        creator: log.get("creator").and_then(|c| {
            let name = str_of(c, "name")?;
            Some(match str_of(c, "version") {
                Some(v) if !v.is_empty() => format!("{name} {v}"),
                _ => name.to_string(),
            })
        }),
        ..Har::default()
    };
    for (index, value) in raw.iter().enumerate() {
        match entry(index, value) {
            Ok(e) => har.entries.push(e),
            Err(why) => {
                har.skipped += 1;
                if har.skipped_examples.len() < EXAMPLES {
                    har.skipped_examples.push(format!("entry {index}: {why}"));
                }
            }
        }
    }
    // Stable: entries that started in the same millisecond keep the file's order, and so do
    // all of them when some have no time.
    if har.entries.iter().all(|e| e.started_ms.is_some()) {
        har.entries.sort_by(|a, b| a.started_ms.unwrap_or(0.0).total_cmp(&b.started_ms.unwrap_or(0.0)));
    }
    Ok(har)
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// One entry, or why it cannot be a step.
fn entry(index: usize, v: &Value) -> Result<Entry, String> {
    let req = v.get("request").filter(|r| r.is_object()).ok_or("no `request`")?;
    let no_response = Value::Object(serde_json::Map::new());
    let resp = match v.get("response") {
        None | Some(Value::Null) => &no_response,
        Some(r) if r.is_object() => r,
        Some(_) => return Err("`response` is not an object".into()),
    };
    let method = str_of(req, "method").filter(|m| is_method(m)).ok_or("no request method (or not a method)")?;
    let raw_url = str_of(req, "url").ok_or("no request URL")?;
    let url = url::Url::parse(raw_url).map_err(|e| format!("URL `{}`: {e}", clip(raw_url)))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("URL `{}` is not http(s)", clip(raw_url)));
    }
    let status = match resp.get("status").map(Value::as_u64) {
        None => None,
        Some(Some(s @ 100..=599)) => Some(s as u16),
        Some(s) => {
            let s = s.map_or("?".to_string(), |s| s.to_string());
            return Err(format!("{method} {}: status {s} (the browser got no answer)", clip(raw_url)));
        }
    };
    let started_ms = match str_of(v, "startedDateTime") {
        None => None,
        Some(t) => Some(
            parse_rfc3339_ms(t)
                .ok_or_else(|| format!("{method} {}: `startedDateTime` {t:?} is not RFC 3339", clip(raw_url)))?,
        ),
    };
    let post = req.get("postData").and_then(|p| {
        let text = match str_of(p, "text") {
            Some(t) => t.to_string(),
            // Browsers write a form's fields as `params` only, at times.
            None => p
                .get("params")
                .and_then(Value::as_array)?
                .iter()
                .filter_map(|kv| Some(format!("{}={}", str_of(kv, "name")?, str_of(kv, "value").unwrap_or(""))))
                .collect::<Vec<_>>()
                .join("&"),
        };
        Some(PostData { mime: bare_mime(str_of(p, "mimeType").unwrap_or("")), text })
    });
    let response_headers = headers(resp);
    let content = resp.get("content");
    let mime = content
        .and_then(|c| str_of(c, "mimeType"))
        .filter(|m| !m.is_empty())
        .or_else(|| {
            response_headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.as_str())
        })
        .map(bare_mime)
        .unwrap_or_default();
    let response_text = content.and_then(|c| {
        let text = str_of(c, "text")?;
        if str_of(c, "encoding") == Some("base64") {
            String::from_utf8(base64_decode(text)?).ok()
        } else {
            Some(text.to_string())
        }
    });
    Ok(Entry {
        index,
        started_ms,
        time_ms: v.get("time").and_then(Value::as_f64).filter(|t| t.is_finite() && *t >= 0.0).unwrap_or(0.0),
        page: str_of(v, "pageref").map(str::to_string),
        method: method.to_ascii_uppercase(),
        url,
        request_headers: headers(req),
        post,
        status,
        response_headers,
        mime,
        response_text,
    })
}

/// A token of letters only, as HTTP methods are.
fn is_method(m: &str) -> bool {
    !m.is_empty() && m.len() <= 16 && m.bytes().all(|b| b.is_ascii_alphabetic())
}

fn headers(v: &Value) -> Vec<(String, String)> {
    v.get("headers")
        .and_then(Value::as_array)
        .map(|hs| {
            hs.iter().filter_map(|h| Some((str_of(h, "name")?.to_string(), str_of(h, "value")?.to_string()))).collect()
        })
        .unwrap_or_default()
}

/// `Application/JSON; charset=utf-8` -> `application/json`.
fn bare_mime(m: &str) -> String {
    m.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

/// At most 80 characters of `s`, for a message.
/// A URL as a message shows it: without its query, fragment and user info (where recorded tokens
/// and passwords ride), at most 80 characters. `data:` URLs are cut the same way.
fn clip(url: &str) -> String {
    let s = url.split(['?', '#']).next().unwrap_or("");
    let s = match (s.find("://"), s.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !s[scheme + 3..at].contains('/') => {
            format!("{}{}", &s[..scheme + 3], &s[at + 1..])
        }
        _ => s.to_string(),
    };
    let s = s.as_str();
    match s.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

/// Standard base64 (padding optional); `None` when it is not.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `2024-05-01T12:00:00.123Z` or `...+02:00` -> milliseconds since the Unix epoch.
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<f64> {
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.iter().all(u8::is_ascii_digit) { std::str::from_utf8(part).ok()?.parse().ok() } else { None }
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        frac = format!("0.{}", std::str::from_utf8(&b[start..i]).ok()?).parse().ok()?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if sign == b'+' { m } else { -m }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs as f64 * 1000.0 + frac * 1000.0)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_entry(entry: &str) -> String {
        format!(r#"{{"log":{{"version":"1.2","creator":{{"name":"t","version":"1"}},"entries":[{entry}]}}}}"#)
    }

    const GOOD: &str = r#"{"startedDateTime":"2024-05-01T12:00:00.000Z","time":12.5,
        "request":{"method":"GET","url":"http://127.0.0.1:8080/orders?page=2","headers":[{"name":"Accept","value":"*/*"}]},
        "response":{"status":200,"headers":[{"name":"Content-Type","value":"application/json; charset=utf-8"}],
                    "content":{"mimeType":"application/json; charset=utf-8","text":"eyJhIjoxfQ==","encoding":"base64"}}}"#;

    #[test]
    fn reads_an_entry() {
        let har = parse("t.har", one_entry(GOOD).as_bytes()).unwrap();
        assert_eq!(har.skipped, 0);
        let e = &har.entries[0];
        assert_eq!((e.method.as_str(), e.url.path(), e.status), ("GET", "/orders", Some(200)));
        assert_eq!(e.mime, "application/json");
        // base64 content is decoded.
        assert_eq!(e.response_text.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(e.started_ms, Some(1_714_564_800_000.0));
        assert_eq!(e.ended_ms(), Some(1_714_564_800_012.5));
        assert_eq!(har.creator.as_deref(), Some("t 1"));
    }

    #[test]
    fn bad_files_are_errors_with_their_position() {
        let cases: &[(&str, &[u8], &str)] = &[
            // Cut short: the end of the file, and a hint that it is truncated.
            (
                "truncated",
                b"{\"log\":{\"entries\":[{\"request\":",
                "t.har:1:30: the file ends in the middle of the JSON",
            ),
            // Binary garbage: not JSON, at its first byte.
            ("garbage", b"\x89PNG\r\n\x1a\n\0\0", "t.har:1:1: expected value"),
            // Invalid UTF-8 inside a string.
            ("not utf-8", b"{\"log\":\"\xff\xfe\"}", "t.har:1:9: invalid unicode"),
            // JSON, but not a HAR.
            ("no log", b"[1,2,3]", "t.har: no `log` object at the top"),
            ("no entries", b"{\"log\":{\"pages\":[]}}", "t.har: no `log.entries` list"),
            // Empty file.
            ("empty", b"", "t.har:1:0: the file ends in the middle of the JSON"),
        ];
        for (what, bytes, want) in cases {
            let err = parse("t.har", bytes).expect_err(what).to_string();
            assert!(err.starts_with(want), "{what}: {err}");
            assert!(err.contains("hint:"), "{what}: {err}");
        }
    }

    #[test]
    fn entries_without_what_a_step_needs_are_skipped_and_named() {
        let bad = [
            // A data: URL (an inlined image).
            r#"{"startedDateTime":"2024-05-01T12:00:00Z","request":{"method":"GET","url":"data:image/png;base64,AAAA"},"response":{"status":200}}"#,
            // Aborted by the page: status 0.
            r#"{"startedDateTime":"2024-05-01T12:00:00Z","request":{"method":"GET","url":"http://h/x"},"response":{"status":0}}"#,
            // No request at all.
            r#"{"startedDateTime":"2024-05-01T12:00:00Z","response":{"status":200}}"#,
            // A response that is not an object.
            r#"{"request":{"method":"GET","url":"http://h/x"},"response":"200 OK"}"#,
            // Aborted, with a token in its query and a password in its user info.
            r#"{"startedDateTime":"2024-05-01T12:00:00Z","request":{"method":"GET","url":"http://u:pw-secret@h/x?token=sekrit-42"},"response":{"status":0}}"#,
            // A start time that is not RFC 3339.
            r#"{"startedDateTime":"yesterday","request":{"method":"GET","url":"http://h/x"},"response":{"status":200}}"#,
            // A method that is not a token.
            r#"{"startedDateTime":"2024-05-01T12:00:00Z","request":{"method":"GET /x","url":"http://h/x"},"response":{"status":200}}"#,
            // An entry that is not an object.
            r#"42"#,
        ];
        let text = one_entry(&format!("{GOOD},{}", bad.join(",")));
        let har = parse("t.har", text.as_bytes()).unwrap();
        assert_eq!(har.entries.len(), 1);
        assert_eq!(har.skipped, 8);
        assert_eq!(har.skipped_examples.len(), EXAMPLES);
        assert!(har.skipped_examples[0].starts_with("entry 1: URL `data:image/png;base64,AAAA` is not http(s)"));
        assert!(har.skipped_examples[1].contains("status 0"), "{:?}", har.skipped_examples);
        // A URL in a message has no query or user info: recorded secrets ride there.
        assert_eq!(har.skipped_examples[4], "entry 5: GET http://h/x: status 0 (the browser got no answer)");
        assert_eq!(har.skipped_examples[2], "entry 3: no `request`");
    }

    #[test]
    fn hand_written_entries_without_response_or_time_are_kept_in_order() {
        // As har-to-k6's examples are written: a request and nothing else.
        let text = one_entry(
            r#"{"request":{"method":"post","url":"http://h/b"}},{"request":{"method":"GET","url":"http://h/a"},"response":null}"#,
        );
        let har = parse("t.har", text.as_bytes()).unwrap();
        let got: Vec<(&str, &str, Option<u16>, Option<f64>)> =
            har.entries.iter().map(|e| (e.method.as_str(), e.url.path(), e.status, e.started_ms)).collect();
        assert_eq!(got, [("POST", "/b", None, None), ("GET", "/a", None, None)]);
    }

    #[test]
    fn a_byte_order_mark_is_not_an_error() {
        let text = format!("\u{feff}{}", one_entry(GOOD));
        assert_eq!(parse("t.har", text.as_bytes()).unwrap().entries.len(), 1);
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let path = std::env::temp_dir().join(format!("perfops-import-big-{}.har", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        // Sparse: no disk is used for the hole.
        f.set_len(MAX_HAR_BYTES + 1).unwrap();
        let err = read_file(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert!(matches!(err, HarError::TooLarge { size_bytes, .. } if size_bytes == MAX_HAR_BYTES + 1), "{err}");
    }

    #[test]
    fn rfc3339_times() {
        let cases = [
            // UTC with milliseconds.
            ("1970-01-01T00:00:00.250Z", Some(250.0)),
            // An offset: 01:00 at +01:00 is midnight UTC.
            ("1970-01-01T01:00:00+01:00", Some(0.0)),
            // Microseconds, as Chromium writes them.
            ("2024-05-01T12:00:00.123456Z", Some(1_714_564_800_123.456)),
            // A leap year's last day.
            ("2024-12-31T00:00:00Z", Some(1_735_603_200_000.0)),
            // No zone: refused, a local time cannot be placed.
            ("2024-05-01T12:00:00", None),
            // Not a date.
            ("2024-13-01T00:00:00Z", None),
            ("", None),
        ];
        for (text, want) in cases {
            let got = parse_rfc3339_ms(text);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 0.01, "{text}: {g} != {w}"),
                _ => assert_eq!(got, want, "{text}"),
            }
        }
    }
}
