//! One `Set-Cookie` field value read as RFC 6265 section 5.2 says a user agent reads it: the
//! name and value before the first `;`, then attributes whose unknown names and bad values are
//! ignored, never an error. A field that cannot be a cookie (no `=`, an empty name, a byte that
//! must never reach a request) is `None`: a browser ignores it too.

/// A parsed `Set-Cookie` field: what the jar needs of it, borrowed from the field's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetCookie<'a> {
    /// The cookie's name (a token: no blank, control byte, `;` or `=`).
    pub name: &'a str,
    /// Its value as sent (quotes kept, as a browser keeps them).
    pub value: &'a str,
    /// `Domain`, without a leading dot (`None`: host-only, or empty).
    pub domain: Option<&'a str>,
    /// `Path` when it starts with `/` (`None`: the request's default path).
    pub path: Option<&'a str>,
    /// `Max-Age` in seconds (wins over `Expires`; zero or less deletes).
    pub max_age: Option<i64>,
    /// `Expires` as unix seconds.
    pub expires: Option<i64>,
    /// `Secure`: sent over TLS only.
    pub secure: bool,
}

/// A byte no name or value may hold: it could end the header line (CR, LF), or cut the
/// `Cookie:` field's list (`;`), or is a control byte no server meant.
fn forbidden(b: u8) -> bool {
    b < 0x20 && b != b'\t' || b == 0x7f || b == b';'
}

impl<'a> SetCookie<'a> {
    /// Parse one `Set-Cookie` field value; `None` when a browser would ignore it.
    pub fn parse(field: &'a [u8]) -> Option<SetCookie<'a>> {
        let field = std::str::from_utf8(field).ok()?;
        let mut parts = field.split(';');
        let pair = parts.next()?;
        let (name, value) = pair.split_once('=')?;
        let (name, value) = (name.trim_matches([' ', '\t']), value.trim_matches([' ', '\t']));
        if name.is_empty()
            || name.bytes().any(|b| forbidden(b) || b == b' ' || b == b'\t')
            || value.bytes().any(|b| forbidden(b) || b == b'\t')
        {
            return None;
        }
        let mut out = SetCookie { name, value, domain: None, path: None, max_age: None, expires: None, secure: false };
        for attr in parts {
            let (key, val) = attr.split_once('=').unwrap_or((attr, ""));
            let (key, val) = (key.trim_matches([' ', '\t']), val.trim_matches([' ', '\t']));
            if key.eq_ignore_ascii_case("expires") {
                // An unreadable date is ignored (the cookie lives for the session).
                if let Some(t) = cookie_date(val) {
                    out.expires = Some(t);
                }
            } else if key.eq_ignore_ascii_case("max-age") {
                out.max_age = max_age(val).or(out.max_age);
            } else if key.eq_ignore_ascii_case("domain") {
                let d = val.strip_prefix('.').unwrap_or(val);
                out.domain = (!d.is_empty()).then_some(d);
            } else if key.eq_ignore_ascii_case("path") {
                out.path = val.starts_with('/').then_some(val);
            } else if key.eq_ignore_ascii_case("secure") {
                out.secure = true;
            }
        }
        Some(out)
    }
}

/// `Max-Age`'s value: digits with an optional leading `-` (section 5.2.2); anything else is
/// ignored. Past `i64`, the largest (a cookie that does not expire in any run).
fn max_age(v: &str) -> Option<i64> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.parse::<i64>().unwrap_or(i64::MAX);
    Some(if v.starts_with('-') { -n } else { n })
}

/// A cookie date (`Expires`) as unix seconds, by RFC 6265 section 5.1.1's algorithm: tokens
/// between delimiters, the first that reads as a time, a day of month, a month and a year
/// each taken once, in any order (so `Sun, 06 Nov 1994 08:49:37 GMT`, the RFC 850
/// `Sunday, 06-Nov-94 08:49:37 GMT` and asctime's `Sun Nov  6 08:49:37 1994` all read). `None`
/// when a part is missing or out of range.
pub fn cookie_date(text: &str) -> Option<i64> {
    let delimiter = |c: char| {
        c == '\t'
            || (' '..='/').contains(&c)
            || (';'..='@').contains(&c)
            || ('['..='`').contains(&c)
            || ('{'..='~').contains(&c)
    };
    let (mut time, mut day, mut month, mut year) = (None, None, None, None);
    for token in text.split(delimiter).filter(|t| !t.is_empty()) {
        if time.is_none()
            && let Some(t) = clock(token)
        {
            time = Some(t);
        } else if day.is_none()
            && let Some(d) = leading_digits(token, 1, 2)
        {
            day = Some(d);
        } else if month.is_none()
            && let Some(m) = month_of(token)
        {
            month = Some(m);
        } else if year.is_none()
            && let Some(y) = leading_digits(token, 2, 4)
        {
            year = Some(y);
        }
    }
    let ((h, mi, s), day, month, mut year) = (time?, day?, month?, year?);
    if (70..=99).contains(&year) {
        year += 1900;
    } else if year <= 69 {
        year += 2000;
    }
    if !(1..=31).contains(&day) || year < 1601 || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, i64::from(day));
    Some(days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s))
}

/// `min` to `max` digits at the start of `token`, followed by nothing or a non-digit.
fn leading_digits(token: &str, min: usize, max: usize) -> Option<u32> {
    let n = token.bytes().take_while(u8::is_ascii_digit).count();
    if n < min || n > max {
        return None;
    }
    token[..n].parse().ok()
}

/// `hh:mm:ss` (one or two digits each) at the start of `token`.
fn clock(token: &str) -> Option<(u32, u32, u32)> {
    let mut parts = token.splitn(3, ':');
    let h = parts.next()?;
    let m = parts.next()?;
    let s = parts.next()?;
    let whole = |p: &str| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    if !whole(h) || !whole(m) {
        return None;
    }
    Some((h.parse().ok()?, m.parse().ok()?, leading_digits(s, 1, 2)?))
}

/// The month a token starts with (`Nov`, `november`), 1 to 12.
fn month_of(token: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let head = token.get(..3)?;
    MONTHS.iter().position(|m| head.eq_ignore_ascii_case(m)).map(|i| i as u32 + 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
/// A day past its month's end (31 Feb) runs into the next, as browsers' date arithmetic does.
fn days_from_civil(y: i64, m: u32, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fields as servers send them, and what a browser makes of each.
    #[test]
    fn set_cookie_fields_parse_as_a_browser_reads_them() {
        let plain = |name, value| SetCookie {
            name,
            value,
            domain: None,
            path: None,
            max_age: None,
            expires: None,
            secure: false,
        };
        let cases: Vec<(&str, Option<SetCookie<'_>>)> = vec![
            // The simplest: a name and a value.
            ("a=1", Some(plain("a", "1"))),
            // Blanks around the name and value are not theirs.
            ("  sid = abc  ", Some(plain("sid", "abc"))),
            // An empty value is a cookie (sent back as `e=`).
            ("e=", Some(plain("e", ""))),
            // A value may hold `=` (base64 padding): only the first `=` splits.
            ("t=YWJj==", Some(plain("t", "YWJj=="))),
            // Quotes are part of the value, as browsers keep them.
            ("q=\"x y\"", Some(plain("q", "\"x y\""))),
            // No `=`: not a cookie (RFC 6265 5.2 step 2).
            ("justaname", None),
            // An empty name: ignored.
            ("=v", None),
            // A blank inside the name: not a token.
            ("a b=1", None),
            // A NUL or control byte in the value would reach a request: refused.
            ("a=x\u{0}y", None),
            // Every attribute, in any case, with blanks; HttpOnly and SameSite are ignored.
            (
                "sid=42; Path=/app; DOMAIN=.Example.com; Max-Age=60; Secure; HttpOnly; SameSite=Lax",
                Some(SetCookie {
                    path: Some("/app"),
                    domain: Some("Example.com"),
                    max_age: Some(60),
                    secure: true,
                    ..plain("sid", "42")
                }),
            ),
            // A path that does not start with `/` is the default path's to decide.
            ("a=1; Path=app", Some(plain("a", "1"))),
            // Max-Age zero or negative: the deleting forms.
            ("a=1; Max-Age=0", Some(SetCookie { max_age: Some(0), ..plain("a", "1") })),
            ("a=1; Max-Age=-5", Some(SetCookie { max_age: Some(-5), ..plain("a", "1") })),
            // A Max-Age that is not a number is ignored, not an error.
            ("a=1; Max-Age=soon", Some(plain("a", "1"))),
            // Expires in the IMF-fixdate form.
            (
                "a=1; Expires=Sun, 06 Nov 1994 08:49:37 GMT",
                Some(SetCookie { expires: Some(784_111_777), ..plain("a", "1") }),
            ),
            // An unreadable date is ignored: a session cookie.
            ("a=1; Expires=tomorrow", Some(plain("a", "1"))),
            // An empty Domain is no Domain (host-only).
            ("a=1; Domain=", Some(plain("a", "1"))),
        ];
        for (field, want) in cases {
            assert_eq!(SetCookie::parse(field.as_bytes()), want, "{field:?}");
        }
    }

    /// The date forms RFC 6265 5.1.1's algorithm reads, and those it refuses.
    #[test]
    fn cookie_dates_read_in_every_form_servers_send() {
        let cases = [
            // IMF-fixdate (RFC 9110).
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(784_111_777)),
            // RFC 850, two-digit year: 94 is 1994.
            ("Sunday, 06-Nov-94 08:49:37 GMT", Some(784_111_777)),
            // asctime: the parts in another order.
            ("Sun Nov  6 08:49:37 1994", Some(784_111_777)),
            // A two-digit year under 70 is 20xx.
            ("Thu, 01 Jan 30 00:00:00 GMT", Some(1_893_456_000)),
            // The epoch.
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            // A leap day.
            ("Thu, 29 Feb 2024 12:00:00 GMT", Some(1_709_208_000)),
            // No time: refused.
            ("Sun, 06 Nov 1994", None),
            // Hour 24: out of range.
            ("Sun, 06 Nov 1994 24:00:00 GMT", None),
            // Day 32: out of range.
            ("Sun, 32 Nov 1994 08:49:37 GMT", None),
            // Before 1601: refused.
            ("Sun, 06 Nov 1600 08:49:37 GMT", None),
            // Nothing at all.
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(cookie_date(text), want, "{text:?}");
        }
    }

    proptest! {
        /// Whatever a server sends, parsing never panics, and a cookie it keeps has nothing that
        /// could break a request's head.
        #[test]
        fn any_field_parses_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Some(c) = SetCookie::parse(&bytes) {
                prop_assert!(!c.name.is_empty());
                prop_assert!(!c.name.bytes().chain(c.value.bytes()).any(|b| b < 0x20 || b == 0x7f || b == b';'));
            }
        }

        /// Dates of any text never panic.
        #[test]
        fn any_date_reads_without_panic(text in "\\PC{0,60}") {
            let _ = cookie_date(&text);
        }
    }
}
