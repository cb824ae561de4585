//! One access-log line -> one [`Record`], or the reason it is not one.
//!
//! Formats: nginx's and Apache's `combined` (`%h %l %u [%t] "%r" %>s %b
//! "%{Referer}i" "%{User-agent}i"`, with any fields after it, as nginx
//! `log_format`s that extend `combined` add), `common` (the same without the
//! referer and agent), and JSON lines (nginx `log_format ... escape=json`,
//! or any JSON object per line) read through a [`FieldMap`].
//!
//! This module owns the text of a line; it keeps nothing from one line to
//! the next. The values a record carries are what the import needs and no
//! more: the client and the `Authorization` value are hashed here, so no
//! credential leaves this function.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// The formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Each line as it comes: a `{` starts JSON, anything else is tried as `combined`, then `common`.
    Auto,
    /// nginx/Apache `combined` (extra fields after the user agent are allowed).
    Combined,
    /// nginx/Apache `common` (`combined` lines are read too: the extra fields are ignored).
    Common,
    /// One JSON object per line.
    Json,
}

/// What a JSON line's keys are called. Each field lists the keys tried in
/// order; a key with dots is also looked up as a path into nested objects
/// (`http.request.method`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMap {
    /// When the request came: ISO 8601, `10/Oct/2000:13:55:36 -0700`, or
    /// seconds (or milliseconds) since the epoch.
    pub time: Vec<String>,
    /// The method.
    pub method: Vec<String>,
    /// The path with its query (`request_uri`).
    pub path: Vec<String>,
    /// The whole request line (`GET /x HTTP/1.1`), used when method or path is absent.
    pub request: Vec<String>,
    /// The query string, appended when the path has none (`args`).
    pub query: Vec<String>,
    /// The response status.
    pub status: Vec<String>,
    /// The client's address.
    pub client: Vec<String>,
    /// The client's user agent.
    pub agent: Vec<String>,
    /// The `Authorization` value (hashed on reading, never kept).
    pub auth: Vec<String>,
}

fn keys(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| (*s).to_string()).collect()
}

impl Default for FieldMap {
    /// The names of nginx's variables (`log_format json escape=json '{"time":"$time_iso8601",...}'`
    /// is usually written with them or without their `$`), then common alternatives (Elastic
    /// Common Schema's dotted names, Caddy's, Traefik's).
    fn default() -> FieldMap {
        FieldMap {
            // `msec` first: nginx logs it in milliseconds where its other times are whole seconds,
            // and a log that has it beside them (as nginx's JSON examples do) has it for that.
            time: keys(&["msec", "time", "time_iso8601", "time_local", "timestamp", "@timestamp", "ts", "StartUTC"]),
            method: keys(&["request_method", "method", "http.request.method", "RequestMethod"]),
            path: keys(&["request_uri", "uri", "path", "url", "url.original", "RequestPath"]),
            request: keys(&["request", "request_line"]),
            query: keys(&["args", "query_string", "query", "url.query"]),
            status: keys(&["status", "status_code", "http.response.status_code", "DownstreamStatus"]),
            client: keys(&["remote_addr", "client_ip", "client", "ip", "source.address", "ClientHost"]),
            agent: keys(&["http_user_agent", "user_agent", "agent", "user_agent.original", "request_User-Agent"]),
            auth: keys(&["http_authorization", "authorization", "auth"]),
        }
    }
}

impl FieldMap {
    /// Apply `field=key,field=key` (a key given replaces that field's list).
    pub fn set(&mut self, spec: &str) -> Result<(), String> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((field, key)) = part.split_once('=') else {
                return Err(format!("`{part}` is not FIELD=KEY (e.g. path=request_uri)"));
            };
            let slot = match field.trim() {
                "time" => &mut self.time,
                "method" => &mut self.method,
                "path" => &mut self.path,
                "request" => &mut self.request,
                "query" => &mut self.query,
                "status" => &mut self.status,
                "client" => &mut self.client,
                "agent" => &mut self.agent,
                "auth" => &mut self.auth,
                other => {
                    return Err(format!(
                        "unknown field `{other}`: one of time, method, path, request, query, status, client, agent, auth"
                    ));
                }
            };
            *slot = vec![key.trim().to_string()];
        }
        Ok(())
    }
}

/// One request, as the import uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// When, in microseconds since the Unix epoch.
    pub time_us: i64,
    /// The method (one perfops sends).
    pub method: &'static str,
    /// The path, from `/`, without the query.
    pub path: String,
    /// The query string, without `?` (empty: none).
    pub query: String,
    /// The response status.
    pub status: u16,
    /// Which client sent it, hashed: the `Authorization` value's hash when
    /// the line has one, else the address and user agent's; `None` when the
    /// line says neither.
    pub client: Option<u64>,
    /// Whether the request carried an `Authorization` value (JSON lines that log it).
    pub authorized: bool,
    /// The format it was read as.
    pub format: Format,
}

/// Why a line is not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// Not UTF-8 (nginx and Apache escape non-ASCII bytes: this is not their text).
    NotText,
    /// Longer than the longest line read.
    TooLong,
    /// Neither `combined`/`common` nor a JSON object.
    UnknownFormat,
    /// A JSON line without a field the import needs (after the field map).
    MissingField,
    /// The request line is not `METHOD /path PROTOCOL` (`-`, a TLS handshake, a scanner's bytes).
    BadRequest,
    /// A method perfops does not send (`CONNECT`, `PROPFIND`, ...).
    Method,
    /// A time that is not one of the formats read.
    BadTime,
    /// A status that is not a number from 100 to 999.
    BadStatus,
}

impl Skip {
    /// Every reason, in the order the summary lists them.
    pub const ALL: [Skip; 8] = [
        Skip::UnknownFormat,
        Skip::NotText,
        Skip::TooLong,
        Skip::MissingField,
        Skip::BadRequest,
        Skip::Method,
        Skip::BadTime,
        Skip::BadStatus,
    ];

    /// What the summary says.
    pub fn why(self) -> &'static str {
        match self {
            Skip::NotText => "not UTF-8 text",
            Skip::TooLong => "longer than 64 KiB",
            Skip::UnknownFormat => "not combined, common or a JSON object",
            Skip::MissingField => "a JSON line without time, status, method or path (see --field)",
            Skip::BadRequest => "the request is not `METHOD /path PROTOCOL`",
            Skip::Method => "a method perfops does not send",
            Skip::BadTime => "a time in no format read",
            Skip::BadStatus => "a status that is not a number",
        }
    }
}

/// Methods perfops sends (the scenario decoder's list).
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// Read one line (without its line break).
pub fn parse(line: &str, format: Format, fields: &FieldMap) -> Result<Record, Skip> {
    let json = line.trim_start().starts_with('{');
    match format {
        Format::Json => json_line(line, fields),
        Format::Combined | Format::Common => clf(line),
        Format::Auto if json => json_line(line, fields),
        Format::Auto => clf(line),
    }
}

fn hash(parts: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// `combined` or `common`.
fn clf(line: &str) -> Result<Record, Skip> {
    let mut rest = line.trim_end_matches('\r');
    let mut word = || -> Option<&str> {
        let r = rest.trim_start_matches(' ');
        let end = r.find(' ')?;
        let (w, after) = r.split_at(end);
        rest = after;
        Some(w)
    };
    let (Some(addr), Some(_ident), Some(_user)) = (word(), word(), word()) else {
        return Err(Skip::UnknownFormat);
    };
    let r = rest.trim_start_matches(' ');
    let Some(r) = r.strip_prefix('[') else { return Err(Skip::UnknownFormat) };
    let Some(close) = r.find(']') else { return Err(Skip::UnknownFormat) };
    let time = &r[..close];
    let r = r[close + 1..].trim_start_matches(' ');
    let (request, r) = quoted(r).ok_or(Skip::UnknownFormat)?;
    let r = r.trim_start_matches(' ');
    let (status, r) = r.split_once(' ').unwrap_or((r, ""));
    let (_bytes, r) = r.trim_start_matches(' ').split_once(' ').unwrap_or((r, ""));
    // combined: the referer and the agent; anything after them is another format's extra.
    let agent = quoted(r.trim_start_matches(' ')).and_then(|(_referer, r)| quoted(r.trim_start_matches(' ')));
    let format = if agent.is_some() { Format::Combined } else { Format::Common };
    let time_us = clf_time(time).ok_or(Skip::BadTime)?;
    let status = status_code(status)?;
    let (method, target) = request_line(&request)?;
    let (path, query) = split_target(target)?;
    let agent = agent.map_or(String::new(), |(a, _)| a);
    Ok(Record {
        time_us,
        method,
        path,
        query,
        status,
        client: Some(hash(&[addr, "\0", &agent])),
        authorized: false,
        format,
    })
}

/// A `"..."` field at the start of `s`: its text (with `\"` and `\\` undone) and what follows.
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => match chars.next() {
                Some((_, e @ ('"' | '\\'))) => out.push(e),
                Some((_, e)) => {
                    out.push('\\');
                    out.push(e);
                }
                None => return None,
            },
            c => out.push(c),
        }
    }
    None
}

fn status_code(s: &str) -> Result<u16, Skip> {
    match s.trim().parse::<u16>() {
        Ok(n) if (100..=999).contains(&n) => Ok(n),
        _ => Err(Skip::BadStatus),
    }
}

/// `GET /path HTTP/1.1` -> (method, target).
fn request_line(r: &str) -> Result<(&'static str, &str), Skip> {
    let mut parts = r.split(' ').filter(|p| !p.is_empty());
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return Err(Skip::BadRequest) };
    let method = known_method(method)?;
    Ok((method, target))
}

fn known_method(m: &str) -> Result<&'static str, Skip> {
    if let Some(known) = METHODS.iter().find(|k| **k == m) {
        return Ok(known);
    }
    // A method is a token of capitals; anything else is not a request at all.
    if !m.is_empty() && m.len() <= 20 && m.bytes().all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_') {
        Err(Skip::Method)
    } else {
        Err(Skip::BadRequest)
    }
}

/// A request target -> (path from `/`, query). An absolute URL (a proxy's
/// request) loses its scheme and host; `*` and anything else is not a path.
fn split_target(target: &str) -> Result<(String, String), Skip> {
    let t = match target.find("://") {
        Some(i) if target[..i].bytes().all(|b| b.is_ascii_alphabetic()) => {
            let after = &target[i + 3..];
            after.find('/').map_or("/", |j| &after[j..])
        }
        _ => target,
    };
    if !t.starts_with('/') {
        return Err(Skip::BadRequest);
    }
    let (path, query) = t.split_once('?').unwrap_or((t, ""));
    let path = path.split_once('#').map_or(path, |(p, _)| p);
    Ok((unescape_hex(path), unescape_hex(query)))
}

/// nginx and Apache write a byte they will not print as `\xHH`; on the
/// wire it was that byte, which a request line carries percent-encoded.
fn unescape_hex(s: &str) -> String {
    if !s.contains("\\x") {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'x')
            && b.len() > i + 3
            && b[i + 2].is_ascii_hexdigit()
            && b[i + 3].is_ascii_hexdigit()
        {
            out.push('%');
            out.push(char::from(b[i + 2].to_ascii_uppercase()));
            out.push(char::from(b[i + 3].to_ascii_uppercase()));
            i += 4;
        } else {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// One JSON object.
fn json_line(line: &str, fields: &FieldMap) -> Result<Record, Skip> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|_| Skip::UnknownFormat)?;
    if !v.is_object() {
        return Err(Skip::UnknownFormat);
    }
    let get = |keys: &[String]| -> Option<serde_json::Value> {
        keys.iter().find_map(|k| {
            let direct = v.get(k.as_str());
            let nested = || k.split('.').try_fold(&v, |node, part| node.get(part));
            // Only a scalar is a value (ECS's `url` is an object holding `original`); nginx writes `-` for none.
            let value =
                |x: &&serde_json::Value| (x.is_string() || x.is_number()) && !matches!(x.as_str(), Some("" | "-"));
            direct.filter(value).or_else(|| nested().filter(value)).cloned()
        })
    };
    let text = |x: &serde_json::Value| x.as_str().map_or_else(|| x.to_string(), str::to_string);
    let time = get(&fields.time).ok_or(Skip::MissingField)?;
    let time_us = match &time {
        serde_json::Value::Number(n) => n.as_f64().and_then(epoch_us),
        serde_json::Value::String(s) => any_time(s),
        _ => None,
    }
    .ok_or(Skip::BadTime)?;
    let status = status_code(&text(&get(&fields.status).ok_or(Skip::MissingField)?))?;
    let request = get(&fields.request).map(|r| text(&r));
    let (method, target) = match (get(&fields.method), get(&fields.path)) {
        (Some(m), Some(p)) => (known_method(&text(&m))?, text(&p)),
        _ => {
            let r = request.ok_or(Skip::MissingField)?;
            let (m, t) = request_line(&r)?;
            (m, t.to_string())
        }
    };
    let (path, mut query) = split_target(&target)?;
    if query.is_empty()
        && !target.contains('?')
        && let Some(q) = get(&fields.query)
    {
        query = text(&q).trim_start_matches('?').to_string();
    }
    let auth = get(&fields.auth).map(|a| text(&a));
    let client = match (&auth, get(&fields.client)) {
        (Some(a), _) => Some(hash(&["auth\0", a])),
        (None, Some(c)) => {
            let agent = get(&fields.agent).map(|a| text(&a)).unwrap_or_default();
            Some(hash(&[&text(&c), "\0", &agent]))
        }
        (None, None) => None,
    };
    Ok(Record { time_us, method, path, query, status, client, authorized: auth.is_some(), format: Format::Json })
}

/// Seconds (or, from 1e11 on, milliseconds; from 1e14 on, microseconds) since the epoch.
fn epoch_us(x: f64) -> Option<i64> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    let us = if x >= 1e14 {
        x
    } else if x >= 1e11 {
        x * 1e3
    } else {
        x * 1e6
    };
    (us < 4e18).then_some(us as i64)
}

/// A time as a string: epoch seconds, ISO 8601 / RFC 3339, or the common log format's.
fn any_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(x) = s.parse::<f64>() {
        return epoch_us(x);
    }
    if s.as_bytes().get(2) == Some(&b'/') {
        return clf_time(s);
    }
    iso_time(s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Microseconds since the epoch of a civil time and its offset east of UTC, in seconds.
fn civil_us((y, mo, d): (i64, i64, i64), (h, mi, s): (i64, i64, i64), frac_us: i64, offset_s: i64) -> Option<i64> {
    let valid = (1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && s <= 60;
    valid.then(|| ((days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset_s) * 1_000_000) + frac_us)
}

/// `10/Oct/2000:13:55:36 -0700`.
fn clf_time(t: &str) -> Option<i64> {
    let (dt, zone) = t.trim().split_once(' ').unwrap_or((t.trim(), "+0000"));
    let mut p = dt.split(['/', ':']);
    let d = num(p.next()?)?;
    let mo = match p.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let y = num(p.next()?)?;
    let h = num(p.next()?)?;
    let mi = num(p.next()?)?;
    let (s, frac) = seconds(p.next()?)?;
    if p.next().is_some() {
        return None;
    }
    civil_us((y, mo, d), (h, mi, s), frac, offset(zone)?)
}

/// `36` or `36.123` -> (seconds, microseconds).
fn seconds(s: &str) -> Option<(i64, i64)> {
    let (whole, frac) = s.split_once(['.', ',']).unwrap_or((s, ""));
    let digits: String = frac.chars().take(6).collect();
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_us = if digits.is_empty() { 0 } else { num(&digits)? * 10_i64.pow(6 - digits.len() as u32) };
    Some((num(whole)?, frac_us))
}

/// `Z`, `+0200`, `-07:00` -> seconds east of UTC.
fn offset(z: &str) -> Option<i64> {
    if z == "Z" || z == "z" || z.is_empty() {
        return Some(0);
    }
    let sign = match z.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = z[1..].replace(':', "");
    // Digits checked before slicing: `+1é2` is four bytes too.
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(sign * (num(&digits[..2])? * 3600 + num(&digits[2..])? * 60))
}

/// `2000-10-10T13:55:36.123-07:00` (also with a space for `T`, without an offset: UTC).
fn iso_time(t: &str) -> Option<i64> {
    let (date, rest) = t.split_at_checked(10)?;
    let mut d = date.split('-');
    let (y, mo, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let zone_at = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (clock, zone) = rest.split_at(zone_at);
    let mut c = clock.split(':');
    let (h, mi) = (num(c.next()?)?, num(c.next()?)?);
    let (s, frac) = seconds(c.next()?)?;
    civil_us((y, mo, day), (h, mi, s), frac, offset(zone)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 971_211_336_000_000; // 2000-10-10T20:55:36Z

    /// Table: lines and what they read as.
    #[test]
    fn lines() {
        let f = FieldMap::default();
        // (line, want: Ok((method, path, query, status, format)) or the reason)
        type Want<'a> = Result<(&'a str, &'a str, &'a str, u16, Format), Skip>;
        let cases: Vec<(&str, Want)> = vec![
            // Apache's documented combined example
            (
                r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#,
                Ok(("GET", "/apache_pb.gif", "", 200, Format::Combined)),
            ),
            // common: no referer, no agent
            (
                r#"127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /orders/7?page=2 HTTP/1.1" 404 -"#,
                Ok(("GET", "/orders/7", "page=2", 404, Format::Common)),
            ),
            // combined with nginx extras after the agent, and an escaped quote in the agent
            (
                r#"10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "POST /auth HTTP/1.1" 200 31 "-" "curl \"x\"" "1.2.3.4" rt=0.004"#,
                Ok(("POST", "/auth", "", 200, Format::Combined)),
            ),
            // a byte nginx escaped in its log is sent percent-encoded
            (
                r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /caf\xC3\xA9?q=\xff HTTP/1.1" 200 1"#,
                Ok(("GET", "/caf%C3%A9", "q=%FF", 200, Format::Common)),
            ),
            // a proxy's absolute URL loses scheme and host
            (
                r#"::1 - - [10/Oct/2000:13:55:36 -0700] "GET http://example.com/a?b=1 HTTP/1.1" 200 1 "-" "-""#,
                Ok(("GET", "/a", "b=1", 200, Format::Combined)),
            ),
            // nginx JSON with its variables' names and $msec
            (
                r#"{"msec":"971211336.000","request_method":"GET","request_uri":"/x?q=1","status":"200","remote_addr":"1.2.3.4","http_user_agent":"ua"}"#,
                Ok(("GET", "/x", "q=1", 200, Format::Json)),
            ),
            // JSON with a request line, ISO time, numeric status
            (
                r#"{"time":"2000-10-10T13:55:36-07:00","request":"DELETE /o/1 HTTP/2.0","status":204}"#,
                Ok(("DELETE", "/o/1", "", 204, Format::Json)),
            ),
            // ECS-like nested fields
            (
                r#"{"@timestamp":"2000-10-10T20:55:36Z","http":{"request":{"method":"PUT"},"response":{"status_code":201}},"url":{"original":"/p"}}"#,
                Ok(("PUT", "/p", "", 201, Format::Json)),
            ),
            // nginx's `400` for a TLS handshake on a plain port: the request is bytes
            (r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03\x01\x00" 400 157 "-" "-""#, Err(Skip::BadRequest)),
            // an empty request
            (r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "-" 400 0 "-" "-""#, Err(Skip::BadRequest)),
            // a WebDAV method
            (r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "PROPFIND / HTTP/1.1" 405 0"#, Err(Skip::Method)),
            // a month that is not one
            (r#"1.2.3.4 - - [10/Foo/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 0"#, Err(Skip::BadTime)),
            // a status that is not a number
            (r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" abc 0"#, Err(Skip::BadStatus)),
            // syslog, not an access log
            ("Oct 10 13:55:36 host sshd[42]: Accepted publickey", Err(Skip::UnknownFormat)),
            // a JSON line without a status
            (r#"{"time":"2000-10-10T20:55:36Z","request":"GET / HTTP/1.1"}"#, Err(Skip::MissingField)),
            // a JSON array is not a record
            ("[1,2]", Err(Skip::UnknownFormat)),
            // a truncated JSON line
            (r#"{"time":"2000-10-10T20:55"#, Err(Skip::UnknownFormat)),
        ];
        for (line, want) in cases {
            let got =
                parse(line, Format::Auto, &f).map(|r| (r.method, r.path.clone(), r.query.clone(), r.status, r.format));
            let want = want.map(|(m, p, q, s, fm)| (m, p.to_string(), q.to_string(), s, fm));
            assert_eq!(got, want, "{line}");
        }
    }

    /// A JSON line with nginx's `msec` beside its whole-second times is read
    /// to the millisecond (a replay's offsets are then the log's own).
    #[test]
    fn msec_beside_whole_seconds() {
        let f = FieldMap::default();
        let line = r#"{"msec":"971211336.679","time_iso8601":"2000-10-10T20:55:36+00:00","time_local":"10/Oct/2000:13:55:36 -0700","request_method":"GET","request_uri":"/x","status":"200"}"#;
        assert_eq!(parse(line, Format::Auto, &f).map(|r| r.time_us), Ok(T + 679_000));
    }

    /// Table: times, all the same instant but the last ones.
    #[test]
    fn times() {
        let cases = [
            // the common log format with an offset
            ("10/Oct/2000:13:55:36 -0700", Some(T)),
            // ISO 8601 with an offset with a colon
            ("2000-10-10T13:55:36-07:00", Some(T)),
            // UTC, fractional seconds
            ("2000-10-10T20:55:36.250Z", Some(T + 250_000)),
            // a space for T, no zone: UTC
            ("2000-10-10 20:55:36", Some(T)),
            // nginx's $msec
            ("971211336.5", Some(T + 500_000)),
            // milliseconds
            ("971211336000", Some(T)),
            // a leap day
            ("2024-02-29T00:00:00Z", Some(1_709_164_800_000_000)),
            // not a time
            ("yesterday", None),
            // month 13
            ("2000-13-10T20:55:36Z", None),
            // an offset of four bytes that are not four digits (sliced, it once panicked)
            ("10/Oct/2000:13:55:36 +1é2", None),
        ];
        for (text, want) in cases {
            assert_eq!(any_time(text), want, "{text}");
        }
    }

    /// The client is the Authorization value's hash where one is logged (two
    /// agents, one token: one client), else address + agent.
    #[test]
    fn clients() {
        let f = FieldMap::default();
        let line = |ua: &str, auth: &str| {
            format!(
                r#"{{"msec":1,"request":"GET / HTTP/1.1","status":200,"remote_addr":"a","http_user_agent":"{ua}"{auth}}}"#
            )
        };
        let client = |l: String| parse(&l, Format::Json, &f).map(|r| r.client);
        assert_eq!(
            client(line("x", r#","http_authorization":"Bearer t""#)),
            client(line("y", r#","http_authorization":"Bearer t""#))
        );
        assert_ne!(client(line("x", "")), client(line("y", "")));
        assert_ne!(client(line("x", r#","http_authorization":"Bearer t""#)), client(line("x", "")));
    }

    proptest::proptest! {
        /// No line panics the reader: any text, and any text in each field
        /// of a combined line and of a JSON line (the offset `+1é2` once did).
        #[test]
        fn never_panics(s in ".*", t in "[0-9a-zA-Z/:+é .-]{0,30}") {
            let f = FieldMap::default();
            let _ = parse(&s, Format::Auto, &f);
            let _ = parse(&format!(r#"1.2.3.4 - - [{t}] "GET {s} HTTP/1.1" 200 1 "{s}" "{s}""#), Format::Auto, &f);
            let _ = parse(&format!(r#"1.2.3.4 - - [10/Oct/2000:13:55:36 {t}] "{s}" {t} 1"#), Format::Auto, &f);
            let json = serde_json::json!({ "time": t, "request": s, "status": t, "remote_addr": s });
            let _ = parse(&json.to_string(), Format::Auto, &f);
            let _ = any_time(&t);
            let _ = any_time(&s);
        }
    }

    /// `--field`: a field set replaces its keys; a bad spec says what it wants.
    #[test]
    fn field_map() {
        let mut f = FieldMap::default();
        f.set("path=req_path, status=code").expect("valid");
        assert_eq!(f.path, vec!["req_path".to_string()]);
        let r = parse(r#"{"msec":1,"method":"GET","req_path":"/a","code":"200"}"#, Format::Json, &f);
        assert_eq!(r.map(|r| r.path), Ok("/a".to_string()));
        assert!(f.set("colour=x").unwrap_err().contains("unknown field"));
        assert!(f.set("path").unwrap_err().contains("FIELD=KEY"));
    }
}
