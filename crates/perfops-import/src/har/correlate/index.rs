//! Where candidate values stand in a request's text: an index of the
//! candidates (each value, and its percent-encoded form) by their first word
//! and the few characters after it, so that a recording with thousands of
//! JSON leaves and thousands of requests costs one pass over each request's
//! text, and a match stands on its own (no letter or digit on either side).
//!
//! The characters after the first word are part of the key because values
//! share first words (`SKU-00042`, `c-0001f3`: `SKU`, `c`): keyed by the word
//! alone, each `c` in a request was compared with every cursor of the
//! recording. With [`TAIL`] more characters, a place in the text is looked up
//! `TAIL + 1` times and meets only the values that start as it does.

use std::collections::HashMap;

use super::sources::Candidate;

/// The leading run of letters and digits of `s`: a candidate's key in the index.
pub(super) fn first_word(s: &str) -> &str {
    let end = s.find(|c: char| !c.is_alphanumeric()).unwrap_or(s.len());
    &s[..end]
}

/// How many bytes of `s` come before its first letter or digit (the `"` of an ETag).
fn lead(s: &str) -> usize {
    s.find(|c: char| c.is_alphanumeric()).unwrap_or(s.len())
}

/// How many characters after a value's first word are part of its key.
const TAIL: usize = 8;

/// The key of a value starting with `word` and going on with `after`: the word and at most `k`
/// characters after it.
fn key(word: &str, after: &str, k: usize) -> Option<String> {
    let end = match after.char_indices().nth(k) {
        Some((at, _)) => at,
        None if after.chars().count() == k => after.len(),
        None => return None,
    };
    Some(format!("{word}\u{0}{}", &after[..end]))
}

/// Candidates by their key (each value, and its percent-encoded form when it differs).
pub(super) struct Index {
    by_key: HashMap<String, Vec<(usize, String)>>,
}

impl Index {
    pub(super) fn new(cands: &[Candidate]) -> Index {
        let mut by_key: HashMap<String, Vec<(usize, String)>> = HashMap::new();
        for (i, c) in cands.iter().enumerate() {
            let encoded = percent_encode(&c.value);
            let forms = if encoded == c.value { vec![encoded] } else { vec![c.value.clone(), encoded] };
            for form in forms {
                let body = &form[lead(&form)..];
                let word = first_word(body);
                let after = &body[word.len()..];
                let k = after.chars().count().min(TAIL);
                if let Some(k) = key(word, after, k) {
                    by_key.entry(k).or_default().push((i, form));
                }
            }
        }
        Index { by_key }
    }

    /// Each standing match in `text`: (start, end, candidate), the longest at each place that `take` accepts.
    pub(super) fn matches(&self, text: &str, mut take: impl FnMut(usize) -> bool) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        let mut last_end = 0;
        let b = text.as_bytes();
        while i < text.len() {
            let starts = text[i..].starts_with(|c: char| c.is_alphanumeric())
                && !text[..i].ends_with(|c: char| c.is_alphanumeric());
            if !starts {
                i += text[i..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let word = first_word(&text[i..]);
            let after = &text[i + word.len()..];
            let mut found: Vec<&(usize, String)> =
                (0..=TAIL).filter_map(|k| self.by_key.get(&key(word, after, k)?)).flatten().collect();
            // The longest first: a value that another one starts with loses to it.
            found.sort_by_key(|(_, form)| std::cmp::Reverse(form.len()));
            let mut matched = None;
            {
                for (c, form) in found {
                    // The value may start before the word (`"v-1"`), never before the last match.
                    let Some(start) = i.checked_sub(lead(form)).filter(|s| *s >= last_end) else { continue };
                    let end = start + form.len();
                    let stands = text.is_char_boundary(start)
                        && text[start..].starts_with(form.as_str())
                        && !text[..start].ends_with(|c: char| c.is_alphanumeric())
                        && (end == b.len() || !text[end..].starts_with(|c: char| c.is_alphanumeric()));
                    if stands && take(*c) {
                        matched = Some((start, end, *c));
                        break;
                    }
                }
            }
            match matched {
                Some(m) => {
                    out.push(m);
                    i = m.1;
                    last_end = m.1;
                }
                None => i += word.len().max(1),
            }
        }
        out
    }
}

/// Percent-encode what a query or path would carry encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
