//! What a value may be once it lands in a request's head (issue #31 point 5).
//!
//! This module owns the two rules, as byte classes, and nothing else: which
//! bytes are refused outright anywhere in a head (CR, LF and NUL: a CR or LF
//! ends the request line or the header, and what follows would be read as a
//! header or a whole request of the attacker's; a NUL is cut or kept
//! differently by different servers), and how the request target (path and
//! query) is percent-encoded so that a space or a `"` in a value goes out as
//! `%20` or `%22` instead of ending the request line or breaking its parse.
//! Where it is applied is the template's ([`super::Template::render_head`])
//! and the scenario decoder's (literal text, refused at load with its
//! line and column).
//!
//! The target rule is RFC 9112's origin-form (RFC 3986 §3.3/§3.4): what
//! `pchar`, `/` and `?` allow stays, every other byte becomes `%XX`, and a
//! `%` stays only when it already starts a `%XX` escape. So a value that is
//! already percent-encoded is not encoded twice, and the bytes the WHATWG URL
//! standard encodes in a path (space, `"`, `<`, `>`, `` ` ``, `{`, `}`,
//! controls, non-ASCII) are encoded here too, with `\`, `|`, `^`, `[`, `]`
//! and `#` (a `#` would start a fragment, which a request target has none).

/// How a byte of rendered text fares in a request target.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Allowed as is.
    Keep,
    /// Not allowed: written as `%XX`.
    Encode,
    /// `%`: kept when it starts a `%XX` escape, else encoded.
    Percent,
    /// CR, LF or NUL: never sent.
    Refuse,
}

const fn class(b: u8) -> Class {
    match b {
        b'\r' | b'\n' | 0 => Class::Refuse,
        b'%' => Class::Percent,
        // unreserved
        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => Class::Keep,
        // sub-delims, `:` and `@` (pchar), `/` and `?` (path and query)
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@' | b'/' | b'?' => {
            Class::Keep
        }
        _ => Class::Encode,
    }
}

/// [`class`] of every byte, looked up once per byte on the hot path.
static CLASS: [Class; 256] = {
    let mut table = [Class::Keep; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = class(b as u8);
        b += 1;
    }
    table
};

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// True for the bytes that never go into a request head: CR, LF and NUL.
#[inline]
pub fn is_refused(b: u8) -> bool {
    matches!(b, b'\r' | b'\n' | 0)
}

/// The index of the first CR, LF or NUL in `bytes`, if any.
pub fn first_refused(bytes: &[u8]) -> Option<usize> {
    // memchr's vectorised search: a bearer token in every request's header
    // costs a few nanoseconds, where a byte loop cost tens (measured).
    memchr::memchr3(b'\r', b'\n', 0, bytes)
}

/// How a refused byte is named in messages: `CR (\r)`, `LF (\n)`, `NUL (\0)`.
pub fn refused_name(b: u8) -> &'static str {
    match b {
        b'\r' => "CR (\\r)",
        b'\n' => "LF (\\n)",
        _ => "NUL (\\0)",
    }
}

/// True when `bytes` go into a request target exactly as they are: no byte
/// to encode, no `%` outside a `%XX` escape, nothing refused. Decided once
/// per literal, at parse time, so that a literal path costs no scan per
/// request.
pub fn target_clean(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().all(|(i, &b)| match CLASS[usize::from(b)] {
        Class::Keep => true,
        Class::Percent => escape_at(bytes, i),
        Class::Encode | Class::Refuse => false,
    })
}

/// Does `bytes[i]` (a `%`) start a `%XX` escape?
fn escape_at(bytes: &[u8], i: usize) -> bool {
    matches!(bytes.get(i + 1..i + 3), Some([a, b]) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit())
}

/// Append `bytes` to `out` as request-target text (see the module doc), in
/// one pass: runs of allowed bytes are copied at once. On a CR, LF or NUL
/// nothing more is written and its index is returned: the request must not
/// be sent, so what is already in `out` does not matter.
pub fn write_target(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), usize> {
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match CLASS[usize::from(b)] {
            Class::Keep => continue,
            Class::Percent if escape_at(bytes, i) => continue,
            Class::Refuse => return Err(i),
            Class::Percent | Class::Encode => {}
        }
        out.extend_from_slice(&bytes[run..i]);
        run = i + 1;
        out.extend_from_slice(&[b'%', HEX_UPPER[usize::from(b >> 4)], HEX_UPPER[usize::from(b & 0xf)]]);
    }
    out.extend_from_slice(&bytes[run..]);
    Ok(())
}

/// Append `bytes` to `out` as a header value (or gRPC metadata): as they
/// are, unless they hold a CR, LF or NUL: then nothing is written and its
/// index is returned.
pub fn write_header_value(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), usize> {
    match first_refused(bytes) {
        Some(i) => Err(i),
        None => {
            out.extend_from_slice(bytes);
            Ok(())
        }
    }
}

/// True when `name` is a header name: an RFC 9110 token (`!#$%&'*+-.^_`|~`,
/// letters and digits), not empty. Anything else (a space, a `:`, a CR or
/// LF) would end or forge the header.
pub fn is_token(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn target(text: &[u8]) -> Result<String, usize> {
        let mut out = Vec::new();
        write_target(&mut out, text).map(|()| String::from_utf8(out).expect("the output is ASCII"))
    }

    #[test]
    fn request_targets_are_percent_encoded() {
        // (rendered bytes, what goes on the request line)
        let cases: &[(&[u8], &str)] = &[
            // A plain path and query: as they are.
            (b"/orders?page=2&sort=-date", "/orders?page=2&sort=-date"),
            // Every sub-delim, `:` and `@` are pchars: kept.
            (b"/a:b@c!$&'()*+,;=", "/a:b@c!$&'()*+,;="),
            // A space would end the request target: %20 (not `+`, which a path reads as itself).
            (b"/search?q=two words", "/search?q=two%20words"),
            // An already encoded value is not encoded twice.
            (b"/a%20b?x=%2F%2f", "/a%20b?x=%2F%2f"),
            // A `%` that starts no escape is itself encoded.
            (b"/100%?x=%zz&y=%4", "/100%25?x=%25zz&y=%254"),
            // A `%` at the very end.
            (b"/a%", "/a%25"),
            // The characters the brief names: quote, angle brackets, backslash, braces, bar, caret, backquote.
            (b"/\"<>\\{}|^`", "/%22%3C%3E%5C%7B%7D%7C%5E%60"),
            // Brackets and `#` are not allowed in a path or query either.
            (b"/a[0]#frag", "/a%5B0%5D%23frag"),
            // Control characters other than CR, LF and NUL (tab, DEL, ESC) are encoded.
            (b"/a\tb\x7fc\x1bd", "/a%09b%7Fc%1Bd"),
            // Non-ASCII bytes (UTF-8 of é) are encoded byte by byte.
            ("/caf\u{e9}".as_bytes(), "/caf%C3%A9"),
            // Nothing: nothing.
            (b"", ""),
        ];
        for (text, want) in cases {
            assert_eq!(target(text).as_deref(), Ok(*want), "{:?}", String::from_utf8_lossy(text));
            assert_eq!(target_clean(text), text == &want.as_bytes(), "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn crlf_and_nul_are_refused_with_their_place() {
        // (rendered bytes, index of the refused byte)
        let cases: &[(&[u8], usize)] = &[
            // The smuggling of issue #31: a header and a second request after the path.
            (b"/a\r\nX-Evil: 1\r\n\r\nGET /other HTTP/1.1", 2),
            // A bare LF ends a line for lenient servers.
            (b"/a\nb", 2),
            // A bare CR too.
            (b"/a\rb", 2),
            // NUL, at the start.
            (b"\0/a", 0),
            // Encodable bytes before it do not hide it.
            (b"/a b\"c\n", 6),
        ];
        for (text, at) in cases {
            assert_eq!(target(text), Err(*at), "{:?}", String::from_utf8_lossy(text));
            assert!(!target_clean(text));
            assert_eq!(write_header_value(&mut Vec::new(), text), Err(*at));
            assert_eq!(first_refused(text), Some(*at));
        }
    }

    #[test]
    fn header_values_pass_everything_but_crlf_and_nul() {
        // (value, accepted)
        let cases: &[(&[u8], bool)] = &[
            // A bearer token.
            (b"Bearer abc.def-ghi", true),
            // Spaces, quotes and non-ASCII are a header's business, not a smuggle.
            ("a \"b\" \u{e9}\t".as_bytes(), true),
            // The smuggle: refused.
            (b"abc\r\nX-Evil: 1", false),
            // A bare LF (obsolete line folding for some servers).
            (b"abc\n continued", false),
            // NUL.
            (b"ab\0c", false),
        ];
        for (value, ok) in cases {
            let mut out = Vec::new();
            assert_eq!(write_header_value(&mut out, value).is_ok(), *ok, "{:?}", String::from_utf8_lossy(value));
            assert_eq!(out.as_slice(), if *ok { *value } else { &b""[..] }, "nothing is written for a refused value");
        }
    }

    #[test]
    fn header_names_are_tokens() {
        // (name, is a token)
        let cases: &[(&str, bool)] = &[
            // Ordinary names.
            ("Authorization", true),
            ("X-Request-Id", true),
            // Every tchar that is not a letter or digit.
            ("!#$%&'*+-.^_`|~", true),
            // Empty.
            ("", false),
            // A space, a colon: the name would end early.
            ("X Evil", false),
            ("X:Evil", false),
            // CR/LF: a header of the attacker's.
            ("X\r\nEvil", false),
            // NUL and non-ASCII.
            ("X\0", false),
            ("X-\u{e9}", false),
        ];
        for (name, ok) in cases {
            assert_eq!(is_token(name.as_bytes()), *ok, "{name:?}");
        }
    }

    proptest! {
        /// Whatever the bytes, what is written is a valid origin-form target (only kept bytes and
        /// `%XX` escapes), or nothing is sent because the input held CR, LF or NUL.
        #[test]
        fn target_output_is_always_valid(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut out = Vec::new();
            match write_target(&mut out, &bytes) {
                Ok(()) => {
                    prop_assert!(first_refused(&bytes).is_none());
                    prop_assert!(target_clean(&out), "{:?}", String::from_utf8_lossy(&out));
                    // Encoding is idempotent: a clean target goes out as it is.
                    let mut again = Vec::new();
                    prop_assert!(write_target(&mut again, &out).is_ok());
                    prop_assert_eq!(again, out);
                }
                Err(i) => prop_assert_eq!(first_refused(&bytes), Some(i)),
            }
        }
    }
}
