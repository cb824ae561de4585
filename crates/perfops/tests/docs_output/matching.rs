//! The comparisons of `docs_output.rs`, apart from running anything: a line's
//! skeleton (numbers and durations masked), a block against an output (whole
//! or an excerpt) with a diff, JSON keys against a file, and a quoted message
//! against its format string. Pure functions, tested by
//! `comparison_masks_numbers_and_catches_drift` there.

use serde_json::Value;

/// A line as it is compared: numbers as `#`, blanks as one, no trailing blank.
pub fn skeleton(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A sign is part of its number: `-8.22ms` and `+2.5` are deltas whichever way they went.
        let signed = matches!(c, '+' | '-')
            && chars.get(i + 1).is_some_and(char::is_ascii_digit)
            && (i == 0 || !chars[i - 1].is_alphanumeric());
        if signed {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            // 329.2, 1,000 and 20261124T233656Z's runs of digits: one `#` per number.
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',') && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push('#');
            // A duration's unit follows its size (`85.7ms`, `1.55s`, `950µs`): the same column
            // reads in either, so the unit of a duration is masked too (`#t`); `#/s`, `#%`,
            // `#pp` and the like are kept.
            let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
            for unit in ["ms", "µs", "us", "ns", "s"] {
                let boundary = chars.get(i + unit.chars().count()).is_none_or(|c| !c.is_alphanumeric());
                if rest.starts_with(unit) && boundary {
                    i += unit.chars().count();
                    out.push('t');
                    break;
                }
            }
            continue;
        }
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            out.push(' ');
            continue;
        }
        out.push(c);
        i += 1;
    }
    out.trim().to_string()
}

/// Where the block differs from `actual` (`None`: it does not): a diff to read.
/// For an excerpt, also the output lines that each block line stands for.
pub fn compare(expected: &[String], actual: &[String], excerpt: bool) -> (Option<String>, Vec<Option<usize>>) {
    let trim = |v: &[String]| -> Vec<String> {
        let mut v: Vec<String> = v.to_vec();
        while v.last().is_some_and(|l| l.trim().is_empty()) {
            v.pop();
        }
        while v.first().is_some_and(|l| l.trim().is_empty()) {
            v.remove(0);
        }
        v
    };
    let (expected, actual) = (trim(expected), trim(actual));
    let a: Vec<String> = actual.iter().map(|l| skeleton(l)).collect();
    if !excerpt {
        let e: Vec<String> = expected.iter().map(|l| skeleton(l)).collect();
        if e == a {
            return (None, (0..expected.len()).map(Some).collect());
        }
        let mut diff = String::new();
        for i in 0..e.len().max(a.len()) {
            match (e.get(i), a.get(i)) {
                (Some(x), Some(y)) if x == y => diff.push_str(&format!("  {}\n", expected[i])),
                (x, y) => {
                    if x.is_some() {
                        diff.push_str(&format!("- {}\n", expected[i]));
                    }
                    if y.is_some() {
                        diff.push_str(&format!("+ {}\n", actual[i]));
                    }
                }
            }
        }
        return (Some(diff), (0..expected.len()).map(|i| (i < actual.len()).then_some(i)).collect());
    }
    // An excerpt: each line (but `...`) found after the one before it.
    let mut next = 0;
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for line in &expected {
        if line.trim() == "..." {
            found.push(None);
            continue;
        }
        let s = skeleton(line);
        // A line that ends in `...` is cut short: it stands for a line that starts so.
        let cut = s.strip_suffix("...").filter(|head| !head.is_empty());
        let same = |j: usize| cut.map_or(a[j] == s, |head| a[j].starts_with(head));
        match (next..a.len()).find(|&j| same(j)) {
            Some(j) => {
                found.push(Some(j));
                next = j + 1;
            }
            None => {
                // The line it most likely stands for: the next with the longest common start.
                let common = |j: usize| a[j].chars().zip(s.chars()).take_while(|(x, y)| x == y).count();
                let best = (next..a.len()).max_by_key(|&j| common(j)).filter(|&j| common(j) >= s.len().min(8));
                missing.push(match best {
                    Some(j) => format!("- {line}\n+ {}", actual[j]),
                    None => format!("- {line}\n+ (no such line)"),
                });
                found.push(best);
                if let Some(j) = best {
                    next = j + 1;
                }
            }
        }
    }
    if missing.is_empty() {
        return (None, found);
    }
    let diff = format!(
        "{}\n--- the output, whole:\n{}",
        missing.join("\n"),
        actual.iter().map(|l| format!("  {l}\n")).collect::<String>()
    );
    (Some(diff), found)
}

/// The set of `path: type` of every key in `v` (array items under `[]`).
pub fn key_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let p = format!("{prefix}.{k}");
                out.push(format!("{p}: {}", kind(x)));
                key_paths(x, &p, out);
            }
        }
        Value::Array(items) => {
            for x in items {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// JSON values of a block or file: one value, or one per line.
pub fn json_values(text: &str) -> Result<Vec<Value>, String> {
    // `{...}` in a block: an object the docs do not spell out.
    let text = &text.replace("{...}", "{}");
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(vec![v]);
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}")))
        .collect()
}

/// Every key a block's JSON values show is in a value of the file, with its type.
pub fn compare_keys(block: &str, file: &str) -> Option<String> {
    let shown = match json_values(block) {
        Ok(v) => v,
        Err(e) => return Some(format!("the block is no JSON: {e}")),
    };
    let written = match json_values(file) {
        Ok(v) => v,
        Err(e) => return Some(format!("the file is no JSON: {e}")),
    };
    let mut bad = Vec::new();
    for v in &shown {
        let mut want = Vec::new();
        key_paths(v, "", &mut want);
        // The file's value that has the most of them (a JSON line per second or per source).
        let best = written
            .iter()
            .map(|w| {
                let mut have = Vec::new();
                key_paths(w, "", &mut have);
                want.iter().filter(|k| !have.contains(k)).cloned().collect::<Vec<_>>()
            })
            .min_by_key(Vec::len)
            .unwrap_or_else(|| want.clone());
        bad.extend(best);
    }
    (!bad.is_empty())
        .then(|| format!("keys the docs show that the program does not write: {bad:?}\n--- the file:\n{file}"))
}

/// The literal parts of a format string, `{{`/`}}` unescaped.
pub fn literals(format: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                parts.last_mut().expect("a part").push(c);
            }
            ('{', _) => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                parts.push(String::new());
            }
            _ => parts.last_mut().expect("a part").push(c),
        }
    }
    parts
}

/// Whether `quote` is something `format` prints: its literal parts in order, the first at the
/// start and the last at the end, each placeholder standing for at least one character.
pub fn fits(format: &str, quote: &str) -> bool {
    let parts = literals(format);
    let last = parts.len() - 1;
    let mut rest = quote;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part.as_str()) else { return false };
            rest = r;
        } else if i == last && !part.is_empty() {
            return rest.len() > part.len() && rest.ends_with(part.as_str());
        } else if i == last {
            // A placeholder ends the format: it may be empty (an optional suffix).
            return true;
        } else {
            // Skip at least one character for the placeholder before this part.
            let Some(pos) = rest.char_indices().nth(1).and_then(|(k, _)| rest[k..].find(part.as_str()).map(|p| p + k))
            else {
                return false;
            };
            rest = &rest[pos + part.len()..];
        }
    }
    rest.is_empty()
}
