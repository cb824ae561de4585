//! Where candidate values stand in a request's text: an index of the
//! candidates by their first word (each value, and its percent-encoded form),
//! so that a recording with thousands of JSON leaves and hundreds of requests
//! costs one pass over each request's text, and a match stands on its own
//! (no letter or digit on either side).

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

/// Candidates by their first word (each value, and its percent-encoded form when it differs),
/// with what comes before that word in the value.
pub(super) struct Index {
    by_word: HashMap<String, Vec<(usize, String)>>,
}

impl Index {
    pub(super) fn new(cands: &[Candidate]) -> Index {
        let mut by_word: HashMap<String, Vec<(usize, String)>> = HashMap::new();
        for (i, c) in cands.iter().enumerate() {
            let encoded = percent_encode(&c.value);
            for form in [c.value.clone(), encoded] {
                let list = by_word.entry(first_word(&form[lead(&form)..]).to_string()).or_default();
                if !list.iter().any(|(j, f)| *j == i && *f == form) {
                    list.push((i, form));
                }
            }
        }
        for list in by_word.values_mut() {
            list.sort_by_key(|(_, form)| std::cmp::Reverse(form.len()));
        }
        Index { by_word }
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
            let mut matched = None;
            if let Some(list) = self.by_word.get(word) {
                for (c, form) in list {
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
