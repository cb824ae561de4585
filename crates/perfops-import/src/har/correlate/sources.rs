//! What a response offers as candidates for a correlation: its JSON leaves by
//! JSONPath, its headers but the standard ones, the cookie of each
//! `Set-Cookie` (`cookie:NAME`), its HTML form fields and meta tags, each with the extractor
//! that reads it back; and which values are too trivial to be one. The finder
//! (`correlate.rs`) decides which are used.

use serde_json::Value;

use super::Response;

/// The name and value a `Set-Cookie` field sets, as the run's jar will read them
/// (`perfops_core::cookie`); `None` for one it ignores. The value's quotes are
/// part of it, as the jar sends it back.
pub(super) fn set_cookie_pair(field: &str) -> Option<(&str, &str)> {
    perfops_core::cookie::SetCookie::parse(field.as_bytes()).map(|c| (c.name, c.value))
}

/// How a candidate's value is read from its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    Json,
    Html,
    Header,
    /// The cookie NAME, from any of the answer's `Set-Cookie` fields (`cookie:NAME` reads it).
    Cookie {
        name: String,
    },
}

impl Kind {
    /// Lower is more specific.
    pub(super) fn rank(&self) -> u8 {
        match self {
            Kind::Json => 0,
            Kind::Html => 1,
            Kind::Header => 2,
            Kind::Cookie { .. } => 3,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) value: String,
    pub(super) step: usize,
    pub(super) kind: Kind,
    pub(super) extractor: String,
    pub(super) hint: String,
    /// Sent by a request no later than its response: the client's own.
    pub(super) clients: bool,
    pub(super) used_by: Vec<usize>,
    pub(super) name: Option<String>,
}

/// Most leaves read from one JSON response; past them a huge listing adds nothing a later request uses.
const MAX_LEAVES: usize = 10_000;
/// Deepest JSON nesting walked.
const MAX_DEPTH: usize = 64;

/// Response headers that describe the answer, not a value to reuse.
const STANDARD_HEADERS: &[&str] = &[
    "date",
    "content-type",
    "content-length",
    "content-encoding",
    "content-language",
    "server",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "vary",
    "cache-control",
    "expires",
    "last-modified",
    "age",
    "accept-ranges",
    "strict-transport-security",
    "x-content-type-options",
    "x-frame-options",
    "x-xss-protection",
    "content-security-policy",
    "referrer-policy",
    "permissions-policy",
    "via",
    "alt-svc",
    "www-authenticate",
    "set-cookie",
    "pragma",
    "report-to",
    "nel",
];

/// Whether a value recurs by chance too easily to be a correlation (see the module doc).
pub fn trivial(v: &str) -> bool {
    let v = v.trim();
    // A date or a time stamp.
    let b = v.as_bytes();
    if b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-' {
        return true;
    }
    if v.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'.') {
        return v.bytes().filter(u8::is_ascii_digit).count() < 5;
    }
    if v.chars().count() < 6 {
        return true;
    }
    let lower = v.to_ascii_lowercase();
    if matches!(lower.as_str(), "true" | "false" | "null" | "undefined") {
        return true;
    }
    // A word: letters only, at most one capital at the start (`Shipped`, `pending`).
    let mut chars = v.chars();
    let first_ok = chars.next().is_some_and(char::is_alphabetic);
    first_ok && chars.all(|c| c.is_lowercase() || c == ' ' || c == '_' || c == '-') && v.len() <= 24
}

/// The name hint of a JSON leaf: its key, with its parent's when the key alone says little (`order_id`).
fn json_hint(keys: &[String]) -> String {
    let Some(last) = keys.last() else { return "value".into() };
    let generic =
        matches!(last.to_ascii_lowercase().as_str(), "id" | "value" | "key" | "uuid" | "code" | "name" | "ref");
    match keys.len().checked_sub(2).map(|i| &keys[i]) {
        Some(parent) if generic => {
            let parent = if parent.len() > 3 { parent.strip_suffix('s').unwrap_or(parent) } else { parent };
            format!("{parent}_{last}")
        }
        _ => last.clone(),
    }
}

/// A JSONPath member selector: `.key`, or `['a key']`.
fn member(key: &str) -> Option<String> {
    if key.chars().any(char::is_control) {
        return None;
    }
    let mut chars = key.chars();
    if chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        Some(format!(".{key}"))
    } else {
        Some(format!("['{}']", key.replace('\\', "\\\\").replace('\'', "\\'")))
    }
}

/// The JSON leaves of `v`: (value text, JSONPath, keys on the way).
pub(super) fn json_leaves(
    v: &Value,
    path: &mut String,
    keys: &mut Vec<String>,
    depth: usize,
    out: &mut Vec<(String, String, String)>,
) {
    if out.len() >= MAX_LEAVES || depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::String(s) => out.push((s.clone(), path.clone(), json_hint(keys))),
        Value::Number(n) => out.push((n.to_string(), path.clone(), json_hint(keys))),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                json_leaves(item, path, keys, depth + 1, out);
                path.truncate(len);
            }
        }
        Value::Object(fields) => {
            for (k, item) in fields {
                let Some(sel) = member(k) else { continue };
                let len = path.len();
                path.push_str(&sel);
                keys.push(k.clone());
                json_leaves(item, path, keys, depth + 1, out);
                keys.pop();
                path.truncate(len);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// Escape what a regular expression would read as syntax.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The attributes of one HTML tag's text (after its name, up to `>`), with their order.
fn attributes(tag: &str) -> Vec<(String, String, char)> {
    let b = tag.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let name = tag[start..i].to_ascii_lowercase();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            let q = b.get(i).copied().unwrap_or(b' ');
            if q == b'"' || q == b'\'' {
                let vs = i + 1;
                let ve = tag[vs..].find(char::from(q)).map_or(tag.len(), |e| vs + e);
                out.push((name, tag[vs..ve].to_string(), char::from(q)));
                i = ve + 1;
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                out.push((name, tag[vs..i].to_string(), ' '));
            }
        } else if start == i {
            i += 1;
        }
    }
    out
}

/// `<input name value>` and `<meta name content>` of a page: (value, `regex:...`, name).
fn html_fields(html: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let lower = html.to_ascii_lowercase();
    for (tag, value_attr) in [("<input", "value"), ("<meta", "content")] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(tag) {
            let start = from + at + tag.len();
            let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
            from = end;
            let attrs = attributes(&html[start..end]);
            let name = attrs.iter().position(|(n, _, q)| n == "name" && *q != ' ');
            let value = attrs.iter().position(|(n, v, q)| n == value_attr && *q != ' ' && !v.is_empty());
            let (Some(ni), Some(vi)) = (name, value) else { continue };
            let (nq, vq) = (attrs[ni].2, attrs[vi].2);
            let field = format!("\\s{value_attr}={vq}([^{vq}]*){vq}");
            let named = format!("\\sname={nq}{}{nq}", regex_escape(&attrs[ni].1));
            let pattern = if ni < vi {
                format!("regex:{tag}[^>]*{named}[^>]*{field}")
            } else {
                format!("regex:{tag}[^>]*{field}[^>]*{named}")
            };
            out.push((attrs[vi].1.clone(), pattern, attrs[ni].1.clone()));
        }
    }
    out
}

/// The candidates of one response, step `step`.
pub(super) fn candidates_of(step: usize, resp: &Response<'_>, out: &mut Vec<Candidate>) {
    let mut push = |value: String, kind: Kind, extractor: String, hint: String| {
        if !trivial(&value) && value.contains(|c: char| c.is_alphanumeric()) {
            out.push(Candidate { value, step, kind, extractor, hint, clients: false, used_by: Vec::new(), name: None });
        }
    };
    if let Some(text) = resp.text {
        let is_json = resp.mime == "application/json" || resp.mime.ends_with("+json");
        if is_json || text.trim_start().starts_with(['{', '[']) {
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                let mut leaves = Vec::new();
                json_leaves(&v, &mut "$".to_string(), &mut Vec::new(), 0, &mut leaves);
                for (value, path, hint) in leaves {
                    push(value, Kind::Json, path, hint);
                }
            }
        } else if resp.mime == "text/html" || resp.mime == "application/xhtml+xml" {
            for (value, pattern, name) in html_fields(text) {
                push(value, Kind::Html, pattern, name);
            }
        }
    }
    for (name, value) in resp.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "set-cookie" {
            if let Some((cookie, v)) = set_cookie_pair(value) {
                push(
                    v.to_string(),
                    Kind::Cookie { name: cookie.to_string() },
                    format!("cookie:{cookie}"),
                    cookie.into(),
                );
            }
        } else if !STANDARD_HEADERS.contains(&lower.as_str()) && !lower.starts_with("access-control-") {
            push(
                value.trim().to_string(),
                Kind::Header,
                format!("header:{name}"),
                lower.trim_start_matches("x-").to_string(),
            );
        }
    }
}
