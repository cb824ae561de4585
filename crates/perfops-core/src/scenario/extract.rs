//! What a step takes from a response and what it checks in it: `save:` extractors (a JSONPath,
//! `header:NAME`, `cookie:NAME` or `regex:PATTERN`; on a streamed answer, an event's: `first_event`,
//! `last_event`, `event:$.path`) and `expect:` checks (status, body substring, JSON values).
//! This module owns their syntax (parsed once, when the scenario is validated) and their evaluation on
//! a response already received. It does not own the response: the engine passes the status, the
//! headers as received and the body bytes, and decides which failure kind a failed check is counted as.
//!
//! A JSON body is parsed at most once per response, however many JSONPaths look at it: wrap it in a
//! [`ParsedBody`] and hand that to [`Extractor::extract_from`] and [`Expect::check_from`] (the
//! `&[u8]` forms are conveniences that build one for a single call).

use std::cell::OnceCell;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use serde_json_path::JsonPath;

/// An extractor or a status could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExtractError {
    /// Byte offset in the spec text where the problem is (0 when it is the whole spec).
    pub offset: usize,
    /// What is wrong, in one line.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    pub hint: Option<String>,
}

impl ExtractError {
    fn new(offset: usize, message: impl Into<String>, hint: impl Into<String>) -> ExtractError {
        ExtractError { offset, message: message.into(), hint: Some(hint.into()) }
    }
}

const FORMS: &str = "use a JSONPath like `$.token`, `header:NAME`, `cookie:NAME` or `regex:PATTERN`";

/// A response body, with its JSON parsed on first use and kept for the next JSONPath.
#[derive(Debug)]
pub struct ParsedBody<'a> {
    bytes: &'a [u8],
    json: OnceCell<Option<Value>>,
}

impl<'a> ParsedBody<'a> {
    /// Wrap `bytes`; nothing is parsed yet.
    pub fn new(bytes: &'a [u8]) -> ParsedBody<'a> {
        ParsedBody { bytes, json: OnceCell::new() }
    }

    /// The body as received.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The body as JSON, parsed on the first call; `None` when it is not JSON.
    pub fn json(&self) -> Option<&Value> {
        self.json.get_or_init(|| serde_json::from_slice(self.bytes).ok()).as_ref()
    }
}

/// Where a `save:` value comes from in a response.
#[derive(Debug, Clone)]
pub enum Extractor {
    /// A JSONPath (RFC 9535) on the JSON body: `$.token`, `$.items[0].id`.
    JsonPath {
        /// The compiled path.
        path: JsonPath,
        /// The path as written.
        source: String,
    },
    /// A response header: `header:Authorization`. Names compare case-insensitively.
    Header {
        /// The header name, lowercase.
        name: String,
        /// The spec as written (`header:Authorization`).
        source: String,
    },
    /// A cookie the response sets: `cookie:csrf`, the value of the last `Set-Cookie` field of that
    /// name (names compare exactly, as cookies' do), whatever other fields come before it.
    Cookie {
        /// The cookie's name.
        name: String,
        /// The spec as written (`cookie:csrf`).
        source: String,
    },
    /// A regular expression on the body: `regex:token=([a-z0-9]+)`. The value is the first capture
    /// group, or the whole match when the pattern has no group.
    Regex {
        /// The compiled pattern. A bytes regex: bodies need not be UTF-8, and are not copied to check.
        regex: regex::bytes::Regex,
        /// The spec as written (`regex:...`).
        source: String,
    },
    /// A value from the events of a streamed answer (a step with `stream:`), beside the
    /// `expect` checks on them (`first_event_contains`, `last_event_contains`, `event_contains`):
    /// `first_event` and `last_event` save that event's data whole; `first_event:X` and
    /// `last_event:X` what X (a JSONPath or `regex:`) finds in it; `event:X` what X finds in the
    /// first event whose data it matches, tried on each event as it comes (the event that says
    /// `"result"` among progress events, an LLM stream's chunk that carries `usage`). The engine
    /// reads the events ([`Extractor::extract_event`]); a body holds none.
    Event {
        /// Which event.
        pick: EventPick,
        /// What is taken of its data; `None`: the data whole.
        inner: Option<Box<Extractor>>,
        /// The spec as written (`event:$.id`).
        source: String,
    },
}

/// Which event of a streamed answer an [`Extractor::Event`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPick {
    /// The first event (`first_event`).
    First,
    /// The last event (`last_event`).
    Last,
    /// The first event whose data the extractor matches (`event:X`).
    Match,
}

/// The prefixes of event extractors; `first_event` before `event` is no matter: neither is a
/// prefix of the other.
const EVENT_PREFIXES: [(&str, EventPick); 3] =
    [("first_event", EventPick::First), ("last_event", EventPick::Last), ("event", EventPick::Match)];

impl Extractor {
    /// Parse `"$.token"` (a JSONPath; must start with `$`), `"header:Authorization"` or
    /// `"regex:token=([a-z0-9]+)"`. Blanks around a header name are ignored; a pattern is taken as is.
    pub fn parse(spec: &str) -> Result<Extractor, ExtractError> {
        if let Some(name) = spec.strip_prefix("header:") {
            let lead = name.len() - name.trim_start().len();
            let name = name.trim();
            if name.is_empty() {
                return Err(ExtractError::new(7, "empty header name", "write `header:NAME`, e.g. `header:Location`"));
            }
            if let Some(bad) = name.bytes().position(|b| !is_tchar(b)) {
                return Err(ExtractError::new(
                    7 + lead + bad,
                    format!("{:?} is not allowed in a header name", name[bad..].chars().next().unwrap_or(' ')),
                    "header names are letters, digits and `!#$%&'*+-.^_`|~`",
                ));
            }
            return Ok(Extractor::Header { name: name.to_ascii_lowercase(), source: spec.to_owned() });
        }
        if let Some(name) = spec.strip_prefix("cookie:") {
            let lead = name.len() - name.trim_start().len();
            let name = name.trim();
            if name.is_empty() {
                return Err(ExtractError::new(7, "empty cookie name", "write `cookie:NAME`, e.g. `cookie:csrf_token`"));
            }
            if let Some(bad) = name.bytes().position(|b| !is_tchar(b)) {
                return Err(ExtractError::new(
                    7 + lead + bad,
                    format!("{:?} is not allowed in a cookie name", name[bad..].chars().next().unwrap_or(' ')),
                    "cookie names are letters, digits and `!#$%&'*+-.^_`|~`",
                ));
            }
            return Ok(Extractor::Cookie { name: name.to_owned(), source: spec.to_owned() });
        }
        if let Some(pattern) = spec.strip_prefix("regex:") {
            return match regex::bytes::Regex::new(pattern) {
                Ok(regex) => Ok(Extractor::Regex { regex, source: spec.to_owned() }),
                Err(err) => {
                    let (offset, message) = describe_regex_error(pattern, &err);
                    Err(ExtractError::new(
                        6 + offset,
                        message,
                        "the pattern is a Rust regex (https://docs.rs/regex); the first group `(...)` is saved",
                    ))
                }
            };
        }
        for (prefix, pick) in EVENT_PREFIXES {
            let Some(rest) = spec.strip_prefix(prefix) else { continue };
            let inner = match rest.strip_prefix(':') {
                None if !rest.is_empty() => continue, // `events`, `last_events`: not ours
                None if pick == EventPick::Match => {
                    return Err(ExtractError::new(
                        spec.len(),
                        "`event` needs what to find in an event: `event:$.path` or `event:regex:PATTERN`",
                        "the first event whose data it matches is read; `first_event` and `last_event` save an event's data whole",
                    ));
                }
                None => None,
                Some(inner) => {
                    let start = prefix.len() + 1;
                    match Extractor::parse(inner) {
                        Ok(x @ (Extractor::JsonPath { .. } | Extractor::Regex { .. })) => Some(Box::new(x)),
                        Ok(_) => {
                            return Err(ExtractError::new(
                                start,
                                format!("`{inner}` cannot read an event: its data is read by a JSONPath or `regex:`"),
                                "e.g. `event:$.id`, `last_event:regex:id=(\\d+)`",
                            ));
                        }
                        Err(mut e) => {
                            e.offset += start;
                            return Err(e);
                        }
                    }
                }
            };
            return Ok(Extractor::Event { pick, inner, source: spec.to_owned() });
        }
        if !spec.starts_with('$') {
            let message =
                if spec.is_empty() { "empty extractor".to_owned() } else { format!("unknown extractor `{spec}`") };
            return Err(ExtractError::new(0, message, FORMS));
        }
        match JsonPath::parse(spec) {
            Ok(path) => Ok(Extractor::JsonPath { path, source: spec.to_owned() }),
            Err(err) => Err(ExtractError::new(
                err.position().min(spec.len()),
                format!("invalid JSONPath: {}", err.message()),
                "JSONPath as in RFC 9535, e.g. `$.token`, `$.items[0].id`, `$['a key']`",
            )),
        }
    }

    /// The spec as written.
    pub fn source(&self) -> &str {
        match self {
            Extractor::JsonPath { source, .. }
            | Extractor::Header { source, .. }
            | Extractor::Cookie { source, .. }
            | Extractor::Regex { source, .. }
            | Extractor::Event { source, .. } => source,
        }
    }

    /// Which event an [`Extractor::Event`] reads; `None` for one that reads a response.
    pub fn event_pick(&self) -> Option<EventPick> {
        match self {
            Extractor::Event { pick, .. } => Some(*pick),
            _ => None,
        }
    }

    /// What an [`Extractor::Event`] takes from one event's `data`: the data whole (bytes that are
    /// not UTF-8 become U+FFFD), or what its JSONPath or pattern finds there (`None`: nothing).
    /// `None` for any other extractor.
    pub fn extract_event(&self, data: &[u8]) -> Option<String> {
        match self {
            Extractor::Event { inner: None, .. } => Some(String::from_utf8_lossy(data).into_owned()),
            Extractor::Event { inner: Some(x), .. } => x.extract_from(&[], &ParsedBody::new(data)),
            _ => None,
        }
    }

    /// The value in a response: `headers` are (name, value) pairs as received, `body` the body bytes.
    /// `None` when nothing matched. See [`Extractor::extract_from`].
    pub fn extract(&self, headers: &[(&str, &[u8])], body: &[u8]) -> Option<String> {
        self.extract_from(headers, &ParsedBody::new(body))
    }

    /// The value in a response whose body may already be parsed. For a JSONPath, the first match:
    /// strings without quotes, numbers, booleans and `null` as their JSON text, objects and arrays as
    /// compact JSON. For a header, the first one with that name. Bytes that are not UTF-8 become U+FFFD.
    pub fn extract_from(&self, headers: &[(&str, &[u8])], body: &ParsedBody<'_>) -> Option<String> {
        match self {
            Extractor::JsonPath { path, .. } => path.query(body.json()?).first().map(|value| match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            Extractor::Header { name, .. } => headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, value)| String::from_utf8_lossy(value).into_owned()),
            Extractor::Cookie { name, .. } => headers
                .iter()
                .rev()
                .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
                .filter_map(|(_, value)| crate::cookie::SetCookie::parse(value))
                .find(|c| c.name == name)
                .map(|c| c.value.to_owned()),
            Extractor::Regex { regex, .. } => {
                let found = if regex.captures_len() > 1 {
                    regex.captures(body.bytes())?.get(1)?
                } else {
                    regex.find(body.bytes())?
                };
                Some(String::from_utf8_lossy(found.as_bytes()).into_owned())
            }
            // Events are not in a body: the engine reads them (`extract_event`).
            Extractor::Event { .. } => None,
        }
    }

    /// True when this extractor needs the body (so the engine keeps it).
    pub fn needs_body(&self) -> bool {
        !matches!(self, Extractor::Header { .. } | Extractor::Cookie { .. } | Extractor::Event { .. })
    }

    /// Why `save: { name: self }` saved nothing from a response whose body is `body`, for a
    /// failure's sample (#32): `save token: $.token matched nothing`, and why when the body could
    /// not be searched (`(the body is not JSON)`, `(no body)`).
    pub fn missed(&self, name: &str, body: &ParsedBody<'_>) -> String {
        let source = self.source();
        let why = match self {
            Extractor::Header { .. } | Extractor::Cookie { .. } => "",
            Extractor::Event { .. } => " (in the stream's events)",
            _ if body.bytes().is_empty() => " (no body)",
            Extractor::JsonPath { .. } if body.json().is_none() => " (the body is not JSON)",
            _ => "",
        };
        format!("save {name}: {source} matched nothing{why}")
    }
}

/// Two extractors are equal when they are of the same kind and written the same.
impl PartialEq for Extractor {
    fn eq(&self, other: &Extractor) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.source() == other.source()
    }
}

impl fmt::Display for Extractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

/// An expected status: an exact code (`200`) or a class (`2xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusRange {
    /// Exactly this code (100..=599).
    Exact(u16),
    /// Any code of this class: `2` for `2xx` (1..=5).
    Class(u8),
}

impl StatusRange {
    /// Parse `"200"` or `"2xx"` (also `"2XX"`).
    pub fn parse(text: &str) -> Result<StatusRange, ExtractError> {
        let hint = "a status is a code from 100 to 599 like `200`, or a class like `2xx`";
        let t = text.trim();
        let bytes = t.as_bytes();
        let class = match bytes {
            [c @ b'1'..=b'5', x, y] if x.eq_ignore_ascii_case(&b'x') && y.eq_ignore_ascii_case(&b'x') => Some(c - b'0'),
            _ => None,
        };
        if let Some(class) = class {
            return Ok(StatusRange::Class(class));
        }
        match t.parse::<u16>() {
            Ok(code) if (100..=599).contains(&code) && bytes.len() == 3 => Ok(StatusRange::Exact(code)),
            _ => Err(ExtractError::new(0, format!("`{text}` is not an HTTP status"), hint)),
        }
    }

    /// True when `status` is in this range.
    pub fn contains(self, status: u16) -> bool {
        match self {
            StatusRange::Exact(code) => status == code,
            StatusRange::Class(class) => status / 100 == u16::from(class),
        }
    }
}

impl From<u16> for StatusRange {
    /// The exact code (not validated: `From` cannot fail; [`StatusRange::parse`] checks the range).
    fn from(code: u16) -> StatusRange {
        StatusRange::Exact(code)
    }
}

impl FromStr for StatusRange {
    type Err = ExtractError;

    fn from_str(text: &str) -> Result<StatusRange, ExtractError> {
        StatusRange::parse(text)
    }
}

impl fmt::Display for StatusRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusRange::Exact(code) => write!(f, "{code}"),
            StatusRange::Class(class) => write!(f, "{class}xx"),
        }
    }
}

/// The `expect:` checks of a step. All present checks must pass; the default checks nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// The status must be in one of these ranges.
    pub status: Option<Vec<StatusRange>>,
    /// The body must contain this text.
    pub body_contains: Option<String>,
    /// A WebSocket reply must contain this text (checked on the message as
    /// `body_contains` is on a body).
    pub message_contains: Option<String>,
    /// Each extractor's value must equal the expected JSON value. A JSONPath compares JSON values
    /// (numbers by value: `1` equals `1.0`); a header or regex compares its text with a string, or with
    /// the JSON text of any other value.
    pub json: Vec<(Extractor, Value)>,
    /// gRPC: the status codes that pass (`grpc_status: OK`); the engine
    /// reads the status from the trailers. `None`: OK passes, any other
    /// code fails as its kind.
    pub grpc_status: Option<Vec<super::grpc::GrpcCode>>,
    /// A step with `stream:`: some event's data must contain this text
    /// (`event_contains`), the first event's (`first_event_contains`), the
    /// last's (`last_event_contains`). The engine checks them on the events
    /// as they came, not on the body.
    pub events: EventExpect,
}

/// What a streamed answer's events must contain ([`Expect::events`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventExpect {
    /// Some event's data contains it.
    pub any: Option<String>,
    /// The first event's data contains it.
    pub first: Option<String>,
    /// The last event's data contains it.
    pub last: Option<String>,
}

impl EventExpect {
    /// No check on events.
    pub fn is_empty(&self) -> bool {
        self.any.is_none() && self.first.is_none() && self.last.is_none()
    }

    /// Why a stream whose first and last events' data are `first` and
    /// `last` (none: no event) and in which an event matched `any` (`matched`)
    /// fails these checks, if it does.
    pub fn check(&self, first: Option<&[u8]>, last: Option<&[u8]>, matched: bool) -> Option<String> {
        if let Some(needle) = &self.any
            && !matched
        {
            return Some(format!("event_contains {:?}: no event's data has it", shorten(needle)));
        }
        for (key, needle, data) in
            [("first_event_contains", &self.first, first), ("last_event_contains", &self.last, last)]
        {
            if let Some(needle) = needle
                && !data.is_some_and(|d| contains(d, needle.as_bytes()))
            {
                let found = if data.is_none() { "no event" } else { "not in its data" };
                return Some(format!("{key} {:?}: {found}", shorten(needle)));
            }
        }
        None
    }
}

impl Expect {
    /// Whether `status` is one the step lists (`status: [200, 404]`): such a
    /// status is an answer the scenario expects, not the `http_4xx`/`http_5xx`
    /// failure it would otherwise count as (k6's `expectedStatuses`).
    pub fn lists_status(&self, status: u16) -> bool {
        self.status.as_ref().is_some_and(|ranges| ranges.iter().any(|r| r.contains(status)))
    }

    /// `None` when the response passes; `Some(reason)` when it fails, short, for the first failed
    /// check, as "what: expected X, found Y" (#32, Gatling's "but actually found"):
    /// `status: expected 200, found 404`, `$.id: expected 1, matched nothing`,
    /// `body_contains "ok": not found`.
    pub fn check(&self, status: u16, headers: &[(&str, &[u8])], body: &[u8]) -> Option<String> {
        self.check_from(status, headers, &ParsedBody::new(body))
    }

    /// [`Expect::check`] on a body that may already be parsed (shared with the `save:` extractors).
    pub fn check_from(&self, status: u16, headers: &[(&str, &[u8])], body: &ParsedBody<'_>) -> Option<String> {
        if let Some(ranges) = &self.status
            && !ranges.iter().any(|r| r.contains(status))
        {
            let list: Vec<String> = ranges.iter().map(StatusRange::to_string).collect();
            return Some(format!("status: expected {}, found {status}", list.join(" or ")));
        }
        if let Some(needle) = &self.body_contains
            && !contains(body.bytes(), needle.as_bytes())
        {
            return Some(format!("body_contains {:?}: not found", shorten(needle)));
        }
        if let Some(needle) = &self.message_contains
            && !contains(body.bytes(), needle.as_bytes())
        {
            return Some(format!("message_contains {:?}: not found", shorten(needle)));
        }
        for (extractor, expected) in &self.json {
            if let Some(reason) = check_value(extractor, expected, headers, body) {
                return Some(reason);
            }
        }
        None
    }

    /// True when some check needs the body (so the engine keeps it).
    pub fn needs_body(&self) -> bool {
        self.body_contains.is_some() || self.message_contains.is_some() || self.json.iter().any(|(e, _)| e.needs_body())
    }
}

fn check_value(
    extractor: &Extractor,
    expected: &Value,
    headers: &[(&str, &[u8])],
    body: &ParsedBody<'_>,
) -> Option<String> {
    let source = extractor.source();
    if let Extractor::JsonPath { path, .. } = extractor {
        let Some(json) = body.json() else {
            return Some(format!(
                "{source}: expected {}, found a body that is not JSON",
                shorten(&expected.to_string())
            ));
        };
        return match path.query(json).first() {
            None => Some(format!("{source}: expected {}, matched nothing", shorten(&expected.to_string()))),
            Some(actual) if json_eq(actual, expected) => None,
            Some(actual) => Some(format!(
                "{source}: expected {}, found {}",
                shorten(&expected.to_string()),
                shorten(&actual.to_string())
            )),
        };
    }
    let Some(actual) = extractor.extract_from(headers, body) else {
        return Some(format!("{source}: expected {}, matched nothing", shorten(&expected.to_string())));
    };
    // A header or regex value is text: compare it with a string as is, with anything else as JSON text.
    let equal = match expected {
        Value::String(s) => actual == *s,
        other => actual.as_str() == other.to_string().as_str(),
    };
    (!equal).then(|| format!("{source}: expected {}, found {:?}", shorten(&expected.to_string()), shorten(&actual)))
}

/// JSON equality with numbers compared by value (`1 == 1.0`), since the expected value comes from
/// YAML and the actual one from the server, which may spell the same number differently.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(x), Some(y), _, _) => x == y,
            (_, _, Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// At most 60 characters, so a failure reason stays one short line.
fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// RFC 9110 `tchar`: what a header name is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A one-line message and a byte offset in `pattern` from the regex crate's multi-line error (the
/// pattern, a line with `^` under the problem, then `error: ...`).
fn describe_regex_error(pattern: &str, err: &regex::Error) -> (usize, String) {
    let text = err.to_string();
    let message = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("invalid pattern");
    let message = format!("invalid regex: {}", message.trim().trim_start_matches("error: "));
    // The caret column only maps onto the pattern when it is on one line.
    let offset = (!pattern.contains('\n'))
        .then(|| text.lines().find(|l| l.trim_start().starts_with('^')))
        .flatten()
        .and_then(|caret| {
            let column = caret.find('^')?.checked_sub(4)?;
            pattern.char_indices().nth(column).map(|(i, _)| i)
        })
        .unwrap_or(0);
    (offset, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream's event checks: some event, the first, the last; a stream
    /// without events fails each; the reasons say which check and why.
    #[test]
    fn event_checks() {
        let e = |any: Option<&str>, first: Option<&str>, last: Option<&str>| EventExpect {
            any: any.map(Into::into),
            first: first.map(Into::into),
            last: last.map(Into::into),
        };
        let (first, last): (Option<&[u8]>, Option<&[u8]>) = (Some(b"tick 0"), Some(b"done"));
        // (checks, first event's data, last's, some event matched, failure reason)
        let cases = [
            (e(Some("tick 3"), None, None), first, last, true, None), // one matched as they came
            (
                e(Some("tick 9"), None, None),
                first,
                last,
                false,
                Some("event_contains \"tick 9\": no event's data has it"),
            ),
            (e(None, Some("tick 0"), Some("done")), first, last, false, None), // first and last hold
            (e(None, None, Some("tick")), first, last, false, Some("last_event_contains \"tick\": not in its data")),
            (e(None, Some("x"), None), None, None, false, Some("first_event_contains \"x\": no event")), // no events
            (EventExpect::default(), None, None, false, None), // nothing asked
        ];
        for (i, (checks, f, l, matched, want)) in cases.into_iter().enumerate() {
            assert_eq!(checks.check(f, l, matched).as_deref(), want, "case {i}");
        }
    }
    use serde_json::json;

    const BODY: &[u8] = br#"{"token":"abc","n":42,"f":1.5,"ok":true,"nil":null,"user":{"id":7,"tags":["a","b"]},"items":[{"id":1},{"id":2}]}"#;

    fn headers() -> Vec<(&'static str, &'static [u8])> {
        vec![
            ("Content-Type", b"application/json"),
            ("X-Token", b"t-1"),
            ("x-token", b"t-2"),
            ("Set-Cookie", b"sid=9f"),
            ("set-cookie", b"csrf=c1; Path=/; HttpOnly"),
            ("Set-Cookie", b"junk"),
            ("Set-Cookie", b"csrf=c2; Path=/app"),
            ("Set-Cookie", b"Sid=upper"),
        ]
    }

    #[test]
    fn extraction() {
        // (spec, body, expected)
        let cases: &[(&str, &[u8], Option<&str>)] = &[
            // A string comes without its quotes.
            ("$.token", BODY, Some("abc")),
            // A number as its JSON text.
            ("$.n", BODY, Some("42")),
            // A float as its JSON text.
            ("$.f", BODY, Some("1.5")),
            // A boolean.
            ("$.ok", BODY, Some("true")),
            // A null is matched, as `null`.
            ("$.nil", BODY, Some("null")),
            // An object as compact JSON.
            ("$.user", BODY, Some(r#"{"id":7,"tags":["a","b"]}"#)),
            // An array as compact JSON.
            ("$.user.tags", BODY, Some(r#"["a","b"]"#)),
            // Several matches: the first.
            ("$.items[*].id", BODY, Some("1")),
            // A filter.
            ("$.items[?@.id == 2].id", BODY, Some("2")),
            // No match.
            ("$.missing", BODY, None),
            // Not JSON: no match, no panic.
            ("$.token", b"<html>", None),
            // Header names compare case-insensitively; the first wins.
            ("header:x-TOKEN", BODY, Some("t-1")),
            // Blanks around a header name are ignored.
            ("header: set-cookie ", BODY, Some("sid=9f")),
            // A missing header.
            ("header:Location", BODY, None),
            // A cookie from the first Set-Cookie field: its value alone, no attributes.
            ("cookie:sid", BODY, Some("9f")),
            // Set twice: the last field's value (what the jar keeps), past a field that is no cookie.
            ("cookie: csrf", BODY, Some("c2")),
            // Cookie names are exact: `Sid` is another cookie.
            ("cookie:Sid", BODY, Some("upper")),
            // A cookie no field sets.
            ("cookie:none", BODY, None),
            // Regex with a group: the group.
            (r#"regex:"token":"([a-z]+)""#, BODY, Some("abc")),
            // Regex without a group: the whole match.
            (r#"regex:"n":\d+"#, BODY, Some(r#""n":42"#)),
            // A group that did not take part in the match: nothing.
            ("regex:tok(x)?en", BODY, None),
            // No match.
            ("regex:nope=(\\d+)", BODY, None),
            // A regex on a body that is not UTF-8.
            ("regex:id=(\\d+)", b"\xff\xfeid=12;", Some("12")),
        ];
        for (spec, body, want) in cases {
            let e = Extractor::parse(spec).unwrap_or_else(|err| panic!("{spec}: {err:?}"));
            assert_eq!(e.extract(&headers(), body).as_deref(), *want, "{spec}");
            assert_eq!(e.source(), *spec);
        }
    }

    /// `save` from a streamed answer's events: which event, and what of its data.
    #[test]
    fn event_extractors() {
        use EventPick::*;
        let json = br#"{"id":"r-7","usage":{"completion_tokens":12}}"#;
        // (spec, which event, an event's data, the value taken of it)
        let cases: &[(&str, EventPick, &[u8], Option<&str>)] = &[
            // The first or last event's data, whole.
            ("first_event", First, b"tick 0", Some("tick 0")),
            ("last_event", Last, b"done", Some("done")),
            // Bytes that are not UTF-8 are replaced, not refused.
            ("last_event", Last, b"\xffok", Some("\u{fffd}ok")),
            // A JSONPath on the event's data: a string without quotes, a number as its text.
            ("first_event:$.id", First, json, Some("r-7")),
            ("last_event:$.usage.completion_tokens", Last, json, Some("12")),
            // A pattern's first group.
            ("first_event:regex:tick (\\d+)", First, b"tick 12", Some("12")),
            // `event:` takes the first event it matches: on one that does not, nothing (the next is tried).
            ("event:$.usage.completion_tokens", Match, json, Some("12")),
            ("event:$.usage", Match, br#"{"choices":[]}"#, None),
            ("event:regex:^done$", Match, b"tick 3", None),
            // Data that is not JSON: no match, no panic.
            ("event:$.id", Match, b"[DONE]", None),
        ];
        for (spec, pick, data, want) in cases {
            let x = Extractor::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
            assert_eq!(x.event_pick(), Some(*pick), "{spec}");
            assert_eq!(x.extract_event(data).as_deref(), *want, "{spec}");
            assert_eq!(x.source(), *spec);
            // A body holds no events: the engine reads them.
            assert_eq!(x.extract(&headers(), BODY), None, "{spec}");
            assert!(!x.needs_body(), "{spec}");
        }
        // Other extractors read no event.
        assert_eq!(Extractor::parse("$.token").unwrap().event_pick(), None);
        assert_eq!(Extractor::parse("$.token").unwrap().extract_event(BODY), None);
        // (spec, offset, message contains): an event's data is read by a JSONPath or a pattern.
        let errors: &[(&str, usize, &str)] = &[
            // `event` alone says nothing of which event.
            ("event", 5, "`event` needs what to find"),
            // A header is not in an event.
            ("last_event:header:x", 11, "cannot read an event"),
            // Nested.
            ("event:first_event", 6, "cannot read an event"),
            // The inner extractor's own error, placed in the whole spec.
            ("first_event:$.a[", 15, "invalid JSONPath"),
            ("event:", 6, "empty extractor"),
            // Not an event extractor at all.
            ("events", 0, "unknown extractor"),
        ];
        for (spec, offset, message) in errors {
            let err = Extractor::parse(spec).expect_err(spec);
            assert_eq!(err.offset, *offset, "{spec}: {err:?}");
            assert!(err.message.contains(message), "{spec}: {err:?}");
        }
    }

    #[test]
    fn extractor_parse_errors() {
        // (spec, offset, message contains)
        let cases: &[(&str, usize, &str)] = &[
            // Neither a JSONPath nor a prefix.
            ("token", 0, "unknown extractor"),
            // Empty.
            ("", 0, "empty extractor"),
            // A JSONPath syntax error, at the bracket.
            ("$.a[", 3, "invalid JSONPath"),
            // An empty header name.
            ("header: ", 7, "empty header name"),
            // A space inside a header name, at the space.
            ("header:X Token", 8, "not allowed in a header name"),
            // An empty cookie name.
            ("cookie:", 7, "empty cookie name"),
            // A `=` in a cookie name, at the `=`.
            ("cookie:a=b", 8, "not allowed in a cookie name"),
            // A regex syntax error, at the unclosed group.
            ("regex:a(b", 7, "unclosed group"),
        ];
        for (spec, offset, message) in cases {
            let err = Extractor::parse(spec).expect_err(spec);
            assert_eq!(err.offset, *offset, "{spec}: {err:?}");
            assert!(err.message.contains(message), "{spec}: {err:?}");
            assert!(err.hint.is_some(), "{spec}");
        }
    }

    #[test]
    fn needs_body() {
        assert!(Extractor::parse("$.a").unwrap().needs_body());
        assert!(Extractor::parse("regex:a").unwrap().needs_body());
        assert!(!Extractor::parse("header:a").unwrap().needs_body());
        assert!(!Extractor::parse("cookie:a").unwrap().needs_body());
        let header_only = Expect {
            status: Some(vec![StatusRange::Class(2)]),
            json: vec![(Extractor::parse("header:a").unwrap(), json!("x"))],
            ..Expect::default()
        };
        assert!(!header_only.needs_body());
        assert!(Expect { body_contains: Some("x".into()), ..Expect::default() }.needs_body());
        assert!(Expect { message_contains: Some("x".into()), ..Expect::default() }.needs_body());
    }

    #[test]
    fn status_ranges() {
        // (text, parsed or None for an error)
        let cases: &[(&str, Option<StatusRange>)] = &[
            // An exact code.
            ("200", Some(StatusRange::Exact(200))),
            // A class, either case.
            ("2xx", Some(StatusRange::Class(2))),
            ("5XX", Some(StatusRange::Class(5))),
            // Out of range.
            ("600", None),
            ("099", None),
            // Not a class.
            ("6xx", None),
            ("2x", None),
            // Not a number.
            ("ok", None),
            ("+200", None),
        ];
        for (text, want) in cases {
            assert_eq!(StatusRange::parse(text).ok(), *want, "{text}");
        }
        assert!(StatusRange::Class(2).contains(204));
        assert!(!StatusRange::Class(2).contains(301));
        assert!(StatusRange::from(404).contains(404));
        assert_eq!(StatusRange::Class(4).to_string(), "4xx");
    }

    #[test]
    fn expect_checks() {
        let status = |codes: &[&str]| Expect {
            status: Some(codes.iter().map(|c| StatusRange::parse(c).unwrap()).collect()),
            ..Expect::default()
        };
        let jsonpath = |path: &str, value: Value| Expect {
            json: vec![(Extractor::parse(path).unwrap(), value)],
            ..Expect::default()
        };
        // (expect, status, body, failure reason)
        let cases: Vec<(Expect, u16, &[u8], Option<&str>)> = vec![
            // Nothing expected: anything passes.
            (Expect::default(), 500, b"", None),
            // Exact status passes.
            (status(&["200"]), 200, BODY, None),
            // Exact status fails, with the list in the reason.
            (status(&["200"]), 404, BODY, Some("status: expected 200, found 404")),
            // A class passes.
            (status(&["2xx"]), 204, BODY, None),
            // Any of several ranges.
            (status(&["200", "3xx"]), 302, BODY, None),
            (status(&["200", "3xx"]), 500, BODY, Some("status: expected 200 or 3xx, found 500")),
            // Body contains.
            (Expect { body_contains: Some("\"ok\":true".into()), ..Expect::default() }, 200, BODY, None),
            (
                Expect { body_contains: Some("welcome".into()), ..Expect::default() },
                200,
                BODY,
                Some("body_contains \"welcome\": not found"),
            ),
            // A WebSocket reply (given as the body, status 101) contains the text.
            (Expect { message_contains: Some("\"ok\":true".into()), ..Expect::default() }, 101, BODY, None),
            (
                Expect { message_contains: Some("hello".into()), ..Expect::default() },
                101,
                BODY,
                Some("message_contains \"hello\": not found"),
            ),
            // JSON equality on a string.
            (jsonpath("$.token", json!("abc")), 200, BODY, None),
            (jsonpath("$.token", json!("xyz")), 200, BODY, Some("$.token: expected \"xyz\", found \"abc\"")),
            // Numbers compare by value.
            (jsonpath("$.n", json!(42.0)), 200, BODY, None),
            // A string is not a number.
            (jsonpath("$.n", json!("42")), 200, BODY, Some("$.n: expected \"42\", found 42")),
            // Whole objects, numbers by value inside.
            (jsonpath("$.user", json!({"tags": ["a", "b"], "id": 7.0})), 200, BODY, None),
            // No match.
            (jsonpath("$.nope", json!(1)), 200, BODY, Some("$.nope: expected 1, matched nothing")),
            // Not JSON.
            (jsonpath("$.a", json!(1)), 200, b"oops", Some("$.a: expected 1, found a body that is not JSON")),
            // A header compared with a string.
            (
                Expect { json: vec![(Extractor::parse("header:x-token").unwrap(), json!("t-1"))], ..Expect::default() },
                200,
                BODY,
                None,
            ),
            // A header that differs: expected vs found, as text.
            (
                Expect { json: vec![(Extractor::parse("header:x-token").unwrap(), json!("t-2"))], ..Expect::default() },
                200,
                BODY,
                Some("header:x-token: expected \"t-2\", found \"t-1\""),
            ),
            // A header that is not there.
            (
                Expect { json: vec![(Extractor::parse("header:x-none").unwrap(), json!("t-1"))], ..Expect::default() },
                200,
                BODY,
                Some("header:x-none: expected \"t-1\", matched nothing"),
            ),
            // Status is checked first.
            (
                Expect { status: Some(vec![StatusRange::Exact(201)]), ..jsonpath("$.a", json!(1)) },
                200,
                b"oops",
                Some("status: expected 201, found 200"),
            ),
        ];
        for (i, (expect, code, body, want)) in cases.iter().enumerate() {
            assert_eq!(expect.check(*code, &headers(), body).as_deref(), *want, "case {i}");
        }
    }

    /// #32: a `save` that found nothing says what it looked for, and why when the body could
    /// not be searched.
    #[test]
    fn a_save_that_found_nothing_says_what_it_looked_for() {
        // (extractor, body, description)
        let cases: [(&str, &[u8], &str); 5] = [
            // a JSONPath that matches nothing in a JSON body
            ("$.id", BODY, "save x: $.id matched nothing"),
            // a JSONPath in a body that is not JSON
            ("$.id", b"<html>oops</html>", "save x: $.id matched nothing (the body is not JSON)"),
            // an empty body
            ("$.id", b"", "save x: $.id matched nothing (no body)"),
            // a header that did not come
            ("header:Location", BODY, "save x: header:Location matched nothing"),
            // a regex that did not match
            ("regex:id=(\\d+)", BODY, "save x: regex:id=(\\d+) matched nothing"),
        ];
        for (i, (spec, body, want)) in cases.into_iter().enumerate() {
            let e = Extractor::parse(spec).unwrap();
            assert_eq!(e.missed("x", &ParsedBody::new(body)), want, "case {i}");
        }
    }

    #[test]
    fn parsed_body_is_shared() {
        let body = ParsedBody::new(BODY);
        let token = Extractor::parse("$.token").unwrap();
        let expect = Expect { json: vec![(Extractor::parse("$.n").unwrap(), json!(42))], ..Expect::default() };
        assert_eq!(expect.check_from(200, &[], &body), None);
        let first = body.json().unwrap() as *const Value;
        assert_eq!(token.extract_from(&[], &body).as_deref(), Some("abc"));
        assert_eq!(body.json().unwrap() as *const Value, first, "parsed once");
    }

    #[test]
    fn long_reasons_are_shortened() {
        let needle = "x".repeat(100);
        let expect = Expect { body_contains: Some(needle), ..Expect::default() };
        let reason = expect.check(200, &[], b"").unwrap();
        assert!(reason.chars().count() < 90, "{reason}");
        assert!(reason.contains('…'));
    }
}
