//! A path -> its endpoint: the segments that are identifiers (numbers,
//! UUIDs, hex digests, opaque tokens) become placeholders, so that
//! `/orders/17` and `/orders/42` are one endpoint `/orders/{id}` whose
//! values (`17`, `42`) feed the scenario.
//!
//! This module owns the rules that tell an identifier from a name; it keeps
//! nothing. The rules are the conservative ones: a segment becomes a
//! placeholder only when its shape says it is an identifier, never because
//! it is rare (a slug such as `/blog/how-we-scaled` stays a path of its own:
//! the import caps the endpoints it keeps rather than guess).

/// What kind of identifier a placeholder stands for; its name is the CSV column's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Digits only.
    Id,
    /// `8-4-4-4-12` hexadecimal digits.
    Uuid,
    /// 16 or more hexadecimal digits with at least one digit (an ObjectId, a SHA).
    Hex,
    /// 20 or more characters of `[A-Za-z0-9_-]` mixing letters and digits (an opaque token).
    Token,
}

impl Kind {
    /// The column and placeholder name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Id => "id",
            Kind::Uuid => "uuid",
            Kind::Hex => "hex",
            Kind::Token => "token",
        }
    }
}

/// What kind of identifier `segment` is, if it is one.
pub fn classify(segment: &str) -> Option<Kind> {
    let b = segment.as_bytes();
    if b.is_empty() {
        return None;
    }
    if b.iter().all(u8::is_ascii_digit) {
        return Some(Kind::Id);
    }
    if is_uuid(b) {
        return Some(Kind::Uuid);
    }
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    if b.len() >= 16 && digits > 0 && b.iter().all(u8::is_ascii_hexdigit) {
        return Some(Kind::Hex);
    }
    let letters = b.iter().filter(|c| c.is_ascii_alphabetic()).count();
    let token_chars = b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-');
    // A slug has words between its dashes; a token has digits throughout.
    if b.len() >= 20 && token_chars && letters > 0 && digits * 5 >= b.len() {
        return Some(Kind::Token);
    }
    None
}

fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter()
            .enumerate()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { *c == b'-' } else { c.is_ascii_hexdigit() })
}

/// One piece of an endpoint's path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    /// Literal text (with its `/`s).
    Lit(String),
    /// A placeholder.
    Hole(Kind),
}

/// What a piece between dots of a file name is: a digest, or a number of 8
/// digits or more (a timestamp; a hex digest can be all digits); a shorter
/// number is a version's (`1.2.3`) and stays.
fn dotted(piece: &str) -> Option<Kind> {
    classify(piece).filter(|k| *k != Kind::Id || piece.len() >= 8)
}

/// `path` -> (its endpoint's parts, the values of its placeholders in order).
pub fn template(path: &str) -> (Vec<Part>, Vec<String>) {
    let mut parts = Vec::new();
    let mut values = Vec::new();
    let mut lit = String::new();
    for (i, seg) in path.split('/').enumerate() {
        if i > 0 {
            lit.push('/');
        }
        match classify(seg) {
            Some(kind) => {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Hole(kind));
                values.push(seg.to_string());
            }
            // A fingerprinted file name (`app.3f9a1c0b7d2e4f61.js`): the digest between
            // the dots is a placeholder, or every build of an asset is an endpoint.
            None if seg.contains('.') && seg.split('.').any(|p| dotted(p).is_some()) => {
                for (j, piece) in seg.split('.').enumerate() {
                    if j > 0 {
                        lit.push('.');
                    }
                    match dotted(piece) {
                        Some(kind) => {
                            if !lit.is_empty() {
                                parts.push(Part::Lit(std::mem::take(&mut lit)));
                            }
                            parts.push(Part::Hole(kind));
                            values.push(piece.to_string());
                        }
                        None => lit.push_str(piece),
                    }
                }
            }
            None => lit.push_str(seg),
        }
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    (parts, values)
}

/// The endpoint as people write it: `/orders/{id}`.
pub fn display(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| match p {
            Part::Lit(s) => s.clone(),
            Part::Hole(k) => format!("{{{}}}", k.name()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table: segments and what they are.
    #[test]
    fn classify_segments() {
        let cases = [
            // a numeric id
            ("17", Some(Kind::Id)),
            // a UUID, any case
            ("3F2504E0-4F89-11D3-9A0C-0305E82C3301", Some(Kind::Uuid)),
            // a MongoDB ObjectId (24 hex)
            ("507f1f77bcf86cd799439011", Some(Kind::Hex)),
            // a SHA-1
            ("da39a3ee5e6b4b0d3255bfef95601890afd80709", Some(Kind::Hex)),
            // a short hex-looking word is a name (`cafe`, `beef`, `deadbeef`)
            ("deadbeef", None),
            // 16 hex letters without a digit: a word, not a digest
            ("abcdefabcdefabcd", None),
            // an opaque token: long, mixed, digits throughout
            ("aZ3kQ9xL2mN8pR4tV7wY1b", Some(Kind::Token)),
            // a slug: long, dashes, few digits
            ("how-we-scaled-to-2-regions", None),
            // a plain name
            ("orders", None),
            // an empty segment (`//` or the leading one)
            ("", None),
            // a version
            ("v2", None),
        ];
        for (seg, want) in cases {
            assert_eq!(classify(seg), want, "{seg}");
        }
    }

    /// Table: paths and their endpoints and values.
    #[test]
    fn templates() {
        let cases = [
            // nothing to template
            ("/orders", "/orders", vec![]),
            // the root
            ("/", "/", vec![]),
            // an id in the middle and at the end
            ("/users/7/orders/42", "/users/{id}/orders/{id}", vec!["7", "42"]),
            // a UUID then a trailing slash
            (
                "/carts/3f2504e0-4f89-11d3-9a0c-0305e82c3301/",
                "/carts/{uuid}/",
                vec!["3f2504e0-4f89-11d3-9a0c-0305e82c3301"],
            ),
            // a version segment stays
            ("/api/v2/items/9", "/api/v2/items/{id}", vec!["9"]),
            // a fingerprinted asset: the digest between the dots
            ("/static/app.3f9a1c0b7d2e4f61.js", "/static/app.{hex}.js", vec!["3f9a1c0b7d2e4f61"]),
            // a digest that happens to be all digits, or a timestamp
            ("/static/app.5892998448834141.js", "/static/app.{id}.js", vec!["5892998448834141"]),
            // short numbers between dots stay (a version)
            ("/dl/tool-1.2.3.tar.gz", "/dl/tool-1.2.3.tar.gz", vec![]),
        ];
        for (path, want, values) in cases {
            let (parts, got) = template(path);
            assert_eq!(display(&parts), want, "{path}");
            assert_eq!(got, values, "{path}");
        }
    }
}
