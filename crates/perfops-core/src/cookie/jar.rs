//! A flow instance's cookies: what its answers set, and the `Cookie:` field its later requests
//! carry. One target, so one host: what a browser keys by domain is keyed here by name and path.
//!
//! ```text
//!   answer: Set-Cookie: sid=1; Path=/        Jar::store   ->  [sid=1 /]
//!   answer: Set-Cookie: cart=2; Path=/shop   Jar::store   ->  [cart=2 /shop] [sid=1 /]   longest path first
//!   request GET /shop/list                   Jar::apply   ->  Cookie: cart=2; sid=1
//!   request GET /about                       Jar::apply   ->  Cookie: sid=1
//!   answer: Set-Cookie: sid=; Max-Age=0      Jar::store   ->  [cart=2 /shop]           deleted
//! ```

use super::parse::SetCookie;

/// The most cookies a jar holds (RFC 6265 section 6.1 asks a browser for at least 50 per
/// domain; one target is one domain).
pub const MAX_COOKIES: usize = 50;
/// The most bytes of one cookie's name and value (RFC 6265 section 6.1's 4096).
pub const MAX_COOKIE_BYTES: usize = 4096;
/// The most bytes of all names and values together: the `Cookie:` field stays under the 8 KiB
/// header line that nginx (`large_client_header_buffers`) and others accept by default.
pub const MAX_JAR_BYTES: usize = 7 * 1024;

/// One stored cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    path: String,
    /// Unix seconds after which it is gone (`None`: lives as long as the flow).
    expires: Option<i64>,
    secure: bool,
}

/// A flow instance's cookies, bounded ([`MAX_COOKIES`], [`MAX_COOKIE_BYTES`],
/// [`MAX_JAR_BYTES`]). Empty costs nothing: no allocation until a cookie is stored.
#[derive(Debug, Clone, Default)]
pub struct Jar {
    /// Longest path first, then in the order they were first set (what RFC 6265 section 5.4
    /// asks the `Cookie:` field's order to be).
    cookies: Vec<Cookie>,
    /// Names and values, all told.
    bytes: usize,
}

impl Jar {
    /// Nothing stored: requests go out as written.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// Keep what one `Set-Cookie` field says, for an answer to a request for `path` (its
    /// default path) from `host` (over TLS: `tls`) at unix second `now`. A field a browser would
    /// ignore, a `Domain` that is not the host's, a `Secure` cookie over clear text or one past
    /// a bound is dropped; an expired one deletes the cookie of its name and path.
    pub fn store(&mut self, field: &[u8], host: &str, path: &str, tls: bool, now: i64) {
        let Some(c) = SetCookie::parse(field) else { return };
        if c.domain.is_some_and(|d| !domain_matches(host, d)) || (c.secure && !tls) {
            return;
        }
        let cookie_path = c.path.map_or_else(|| default_path(path), str::to_string);
        let at = self.cookies.iter().position(|k| k.name == c.name && k.path == cookie_path);
        let expires = match c.max_age {
            Some(age) => Some(now.saturating_add(age.max(0))),
            None => c.expires,
        };
        if expires.is_some_and(|t| t <= now) {
            if let Some(i) = at {
                self.remove(i);
            }
            return;
        }
        let size = c.name.len() + c.value.len();
        let held = at.map_or(0, |i| self.cookies[i].name.len() + self.cookies[i].value.len());
        if size > MAX_COOKIE_BYTES
            || self.bytes - held + size > MAX_JAR_BYTES
            || (at.is_none() && self.cookies.len() >= MAX_COOKIES)
        {
            return;
        }
        self.bytes = self.bytes - held + size;
        match at {
            // A cookie set again keeps its place (RFC 6265 5.3 step 11: its creation time).
            Some(i) => {
                let k = &mut self.cookies[i];
                k.value.clear();
                k.value.push_str(c.value);
                k.expires = expires;
                k.secure = c.secure;
            }
            None => {
                let i =
                    self.cookies.iter().position(|k| k.path.len() < cookie_path.len()).unwrap_or(self.cookies.len());
                let cookie = Cookie {
                    name: c.name.to_string(),
                    value: c.value.to_string(),
                    path: cookie_path,
                    expires,
                    secure: c.secure,
                };
                self.cookies.insert(i, cookie);
            }
        }
    }

    fn remove(&mut self, i: usize) {
        let k = self.cookies.remove(i);
        self.bytes -= k.name.len() + k.value.len();
    }

    /// The value of the cookie `name` sent to `path` (the one with the longest path).
    pub fn get(&self, name: &str, path: &str) -> Option<&str> {
        self.cookies.iter().find(|k| k.name == name && path_matches(path, &k.path)).map(|k| k.value.as_str())
    }

    /// Every value held: secrets that a failure's sample must not show.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.cookies.iter().map(|k| k.value.as_str())
    }

    /// Write into `out` the HTTP/1.1 `request` with the cookies it carries: those whose path
    /// matches its path, unexpired at `now`, `Secure` ones over TLS alone. A `Cookie:` field the
    /// request has (a step's own header) keeps its pairs and wins for the names it gives; the
    /// jar's others are added to it, so the request has one `Cookie:` field. `false` (and
    /// `out` as it was): nothing to add, send `request` as it is.
    pub fn apply(&mut self, request: &[u8], tls: bool, now: i64, out: &mut Vec<u8>) -> bool {
        self.cookies.retain(|k| k.expires.is_none_or(|t| t > now));
        self.bytes = self.cookies.iter().map(|k| k.name.len() + k.value.len()).sum();
        let Some(head_end) = request.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
        let head = &request[..head_end];
        let path = request_path(head);
        // The step's own `Cookie:` line, if any: where its value ends, and the names it gives.
        let mut own: Option<(usize, &[u8])> = None;
        let mut at = 0;
        for line in head.split(|&b| b == b'\n') {
            let end = at + line.len();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(colon) = line.iter().position(|&b| b == b':')
                && line[..colon].trim_ascii().eq_ignore_ascii_case(b"cookie")
                && own.is_none()
            {
                own = Some((at + line.len(), &line[colon + 1..]));
            }
            at = end + 1;
        }
        let given = |name: &str| {
            own.is_some_and(|(_, value)| {
                value
                    .split(|&b| b == b';')
                    .any(|p| p.split(|&b| b == b'=').next().is_some_and(|n| n.trim_ascii() == name.as_bytes()))
            })
        };
        let mut sending = self
            .cookies
            .iter()
            .filter(|k| (tls || !k.secure) && path_matches(path, &k.path) && !given(&k.name))
            .peekable();
        if sending.peek().is_none() {
            return false;
        }
        out.clear();
        out.reserve(request.len() + self.bytes + 2 * self.cookies.len() + 10);
        let (insert_at, mut first) = match own {
            Some((end, value)) => (end, value.trim_ascii().is_empty()),
            None => (head_end, true),
        };
        out.extend_from_slice(&request[..insert_at]);
        if own.is_none() {
            out.extend_from_slice(b"\r\nCookie: ");
        }
        for k in sending {
            if !first {
                out.extend_from_slice(b"; ");
            }
            first = false;
            out.extend_from_slice(k.name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(k.value.as_bytes());
        }
        out.extend_from_slice(&request[insert_at..]);
        true
    }
}

/// The path of an HTTP/1.1 request head's request line, without its query (`/` when it has
/// none that starts with `/`).
pub fn request_path(head: &[u8]) -> &str {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or(&[]);
    let target = line.split(|&b| b == b' ').nth(1).unwrap_or(b"/");
    let target = target.split(|&b| b == b'?' || b == b'#').next().unwrap_or(b"/");
    match std::str::from_utf8(target) {
        Ok(t) if t.starts_with('/') => t,
        _ => "/",
    }
}

/// RFC 6265 5.1.4: the directory of the request's path (`/a/b` -> `/a`, `/a` -> `/`).
fn default_path(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// RFC 6265 5.1.4: whether a request for `path` carries a cookie of `cookie_path`.
fn path_matches(path: &str, cookie_path: &str) -> bool {
    path == cookie_path
        || (path.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || path.as_bytes().get(cookie_path.len()) == Some(&b'/')))
}

/// RFC 6265 5.1.3: whether `host` is `domain` or a name under it (an address only itself).
fn domain_matches(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host.eq_ignore_ascii_case(domain) {
        return true;
    }
    let is_address = host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[');
    !is_address
        && host.len() > domain.len()
        && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
        && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_800_000_000;

    /// A `GET path` request with `headers`, and what the jar makes of it (`None`: unchanged).
    fn sent(jar: &mut Jar, path: &str, headers: &str, tls: bool) -> Option<String> {
        let request = format!("GET {path} HTTP/1.1\r\nHost: shop.example.com\r\n{headers}\r\nbody");
        let mut out = Vec::new();
        jar.apply(request.as_bytes(), tls, NOW, &mut out).then(|| String::from_utf8(out).unwrap())
    }

    /// The `Cookie:` line a request to `path` would carry (`None`: none).
    fn cookie_line(jar: &mut Jar, path: &str, tls: bool) -> Option<String> {
        let r = sent(jar, path, "", tls)?;
        r.lines().find_map(|l| l.strip_prefix("Cookie: ").map(str::to_string))
    }

    /// What each answer's fields leave in the jar, seen from the requests that follow.
    #[test]
    fn the_jar_keeps_and_sends_cookies_as_a_browser_would() {
        // (fields set, in order, each answered to `GET /shop/cart`; the request path; TLS; the Cookie line)
        type Case = (&'static [&'static str], &'static str, bool, Option<&'static str>);
        let cases: &[Case] = &[
            // Nothing set: nothing sent, the request untouched.
            (&[], "/", false, None),
            // Two cookies in two fields: both sent, in the order set.
            (&["a=1; Path=/", "b=2; Path=/"], "/x", false, Some("a=1; b=2")),
            // The default path is the request's directory: /shop, sent under it, not beside it.
            (&["a=1"], "/shop/item", false, Some("a=1")),
            (&["a=1"], "/shopping", false, None),
            (&["a=1"], "/", false, None),
            // The longer path first.
            (&["a=1; Path=/", "b=2; Path=/shop"], "/shop/x", false, Some("b=2; a=1")),
            // Set again: the new value, the old place.
            (&["a=1; Path=/", "b=2; Path=/", "a=3; Path=/"], "/", false, Some("a=3; b=2")),
            // Max-Age=0 deletes; so does an Expires in the past.
            (&["a=1; Path=/", "b=2; Path=/", "a=x; Path=/; Max-Age=0"], "/", false, Some("b=2")),
            (&["a=1; Path=/", "a=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"], "/", false, None),
            // A deletion for another path deletes nothing.
            (&["a=1; Path=/", "a=; Path=/shop; Max-Age=0"], "/", false, Some("a=1")),
            // Max-Age wins over Expires (a past Expires with a Max-Age keeps the cookie).
            (&["a=1; Path=/; Max-Age=60; Expires=Thu, 01 Jan 1970 00:00:00 GMT"], "/", false, Some("a=1")),
            // A future Expires keeps it.
            (&["a=1; Path=/; Expires=Fri, 01 Jan 2100 00:00:00 GMT"], "/", false, Some("a=1")),
            // Secure: kept and sent over TLS only.
            (&["s=1; Path=/; Secure"], "/", true, Some("s=1")),
            (&["s=1; Path=/; Secure"], "/", false, None),
            // Domain: the host's or a parent's is kept; another's is refused.
            (
                &["a=1; Path=/; Domain=example.com", "b=2; Path=/; Domain=shop.example.com"],
                "/",
                false,
                Some("a=1; b=2"),
            ),
            (&["a=1; Path=/; Domain=other.com", "b=2; Path=/; Domain=hop.example.com"], "/", false, None),
            // A field that is no cookie is ignored.
            (&["nonsense", "a=1; Path=/"], "/", false, Some("a=1")),
            // The query is not part of the path.
            (&["a=1; Path=/q"], "/q?x=/y", false, Some("a=1")),
        ];
        for (i, (fields, path, tls, want)) in cases.iter().enumerate() {
            let mut jar = Jar::default();
            for f in *fields {
                jar.store(f.as_bytes(), "shop.example.com", "/shop/cart", *tls, NOW);
            }
            assert_eq!(cookie_line(&mut jar, path, *tls).as_deref(), *want, "case {i}: {fields:?} to {path}");
        }
    }

    /// A request's own `Cookie:` field: its pairs stay, win for their names, and the jar's
    /// others join the same field; the rest of the request is as it was.
    #[test]
    fn a_steps_own_cookie_header_merges_and_wins() {
        let mut jar = Jar::default();
        for f in ["a=jar; Path=/", "b=jar; Path=/"] {
            jar.store(f.as_bytes(), "shop.example.com", "/", false, NOW);
        }
        // (the step's headers, the request the jar makes of it)
        let cases = [
            // No field of its own: one added before the blank line, the body untouched.
            ("X: 1\r\n", "GET / HTTP/1.1\r\nHost: shop.example.com\r\nX: 1\r\nCookie: a=jar; b=jar\r\n\r\nbody"),
            // Its own names another cookie: the jar's added to it.
            (
                "cookie: c=own\r\n",
                "GET / HTTP/1.1\r\nHost: shop.example.com\r\ncookie: c=own; a=jar; b=jar\r\n\r\nbody",
            ),
            // Its own gives `a`: the step's value wins, `b` joins.
            (
                "Cookie: a=own\r\nX: 1\r\n",
                "GET / HTTP/1.1\r\nHost: shop.example.com\r\nCookie: a=own; b=jar\r\nX: 1\r\n\r\nbody",
            ),
        ];
        for (headers, want) in cases {
            assert_eq!(sent(&mut jar, "/", headers, false).as_deref(), Some(want), "{headers:?}");
        }
        // It gives both: nothing to add, the request goes as written.
        assert_eq!(sent(&mut jar, "/", "Cookie: a=1; b=2\r\n", false), None);
    }

    /// The bounds: a cookie too large, one past the count, past the bytes: dropped.
    #[test]
    fn the_jar_is_bounded() {
        let mut jar = Jar::default();
        // One cookie over the per-cookie bound: dropped.
        let huge = format!("big={}; Path=/", "x".repeat(MAX_COOKIE_BYTES));
        jar.store(huge.as_bytes(), "h", "/", false, NOW);
        assert!(jar.is_empty());
        // MAX_COOKIES small ones, then one more: the last is dropped.
        for i in 0..=MAX_COOKIES {
            jar.store(format!("c{i}=v; Path=/").as_bytes(), "h", "/", false, NOW);
        }
        assert_eq!(jar.cookies.len(), MAX_COOKIES);
        assert_eq!(jar.get(&format!("c{MAX_COOKIES}"), "/"), None);
        // A set again of one held is still taken (no new cookie).
        jar.store(b"c0=w; Path=/", "h", "/", false, NOW);
        assert_eq!(jar.get("c0", "/"), Some("w"));
        // Past the bytes: 2 cookies of 4000 bytes do not fit in 7 KiB together.
        let mut jar = Jar::default();
        for n in ["a", "b"] {
            jar.store(format!("{n}={}; Path=/", "v".repeat(4000)).as_bytes(), "h", "/", false, NOW);
        }
        assert_eq!((jar.get("a", "/").map(str::len), jar.get("b", "/")), (Some(4000), None));
    }

    /// A cookie that expires while the flow runs is no longer sent.
    #[test]
    fn a_cookie_expires_while_the_flow_runs() {
        let mut jar = Jar::default();
        jar.store(b"a=1; Path=/; Max-Age=10", "h", "/", false, NOW);
        let mut out = Vec::new();
        assert!(jar.apply(b"GET / HTTP/1.1\r\n\r\n", false, NOW + 9, &mut out));
        assert!(!jar.apply(b"GET / HTTP/1.1\r\n\r\n", false, NOW + 10, &mut out));
        assert!(jar.is_empty());
    }

    /// The paths of request lines.
    #[test]
    fn request_paths_come_from_the_request_line() {
        let cases = [
            ("GET /a/b?x=1 HTTP/1.1", "/a/b"),       // the query cut
            ("GET / HTTP/1.1", "/"),                 // the root
            ("GET * HTTP/1.1", "/"),                 // not a path: the root
            ("garbage", "/"),                        // no request line at all
            ("POST /x#frag HTTP/1.1\r\nH: 1", "/x"), // a fragment cut, the head's rest ignored
        ];
        for (head, want) in cases {
            assert_eq!(request_path(head.as_bytes()), want, "{head:?}");
        }
    }

    proptest! {
        /// Whatever the fields, the jar stays within its bounds, never panics, and what it sends
        /// has no byte that could end the header line.
        #[test]
        fn any_fields_keep_the_jar_bounded(fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..80)) {
            let mut jar = Jar::default();
            for f in &fields {
                jar.store(f, "h.example", "/a/b", true, NOW);
            }
            prop_assert!(jar.cookies.len() <= MAX_COOKIES);
            prop_assert!(jar.bytes <= MAX_JAR_BYTES);
            let mut out = Vec::new();
            if jar.apply(b"GET /a/b HTTP/1.1\r\nHost: h\r\n\r\n", true, NOW, &mut out) {
                let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                prop_assert_eq!(head_end + 4, out.len(), "one blank line, at the end");
                prop_assert!(!out[..head_end].iter().any(|&b| b == 0 || b == 0x7f));
            }
        }
    }
}
