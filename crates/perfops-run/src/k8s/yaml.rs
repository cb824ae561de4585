//! YAML text for Kubernetes objects: a JSON value (what the typed objects
//! serialize to) written in block style, readable by `kubectl` and by the API
//! server's own decoder.
//!
//! Why not a YAML serializer crate: Kubernetes reads YAML 1.1 (goyaml v2 under
//! `sigs.k8s.io/yaml`), where plain `yes`, `on`, `0b101`, `1_000` or
//! `0o17`-looking scalars are not the strings they are in YAML 1.2, and the
//! emitters at hand decide quoting by the YAML 1.2 rules. Here a string is
//! written plain only when it cannot be anything but a string in either
//! version (it starts with a letter and holds only letters, digits and
//! `. _ / -`, and is not a boolean or null word); otherwise it is double-quoted
//! with JSON-style escapes (a subset of YAML's), or, when it spans lines, as a
//! literal block (`|`) so that a scenario in a Secret's `stringData` stays readable.
//! This module owns the text only; what the objects hold is `manifest.rs`'s.

use serde_json::Value;

/// `value` as a YAML document (no `---` marker), ending in a newline.
pub(crate) fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        scalar => {
            inline(&mut out, scalar, 0);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A block mapping at indentation `n`; every line starts with the indentation.
fn mapping(out: &mut String, m: &serde_json::Map<String, Value>, n: usize) {
    for (k, v) in m {
        indent(out, n);
        string(out, k, n, false);
        out.push(':');
        value_after_key(out, v, n);
    }
}

/// A block sequence at indentation `n`. An item that is a mapping starts on
/// the dash's line (`- name: x`), the usual Kubernetes style.
fn sequence(out: &mut String, a: &[Value], n: usize) {
    for v in a {
        indent(out, n);
        out.push('-');
        match v {
            Value::Object(m) if !m.is_empty() => {
                // The first key on the dash's line, the others under it.
                let mut first = true;
                for (k, v) in m {
                    if first {
                        out.push(' ');
                        first = false;
                    } else {
                        indent(out, n + 2);
                    }
                    string(out, k, n + 2, false);
                    out.push(':');
                    value_after_key(out, v, n + 2);
                }
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                sequence(out, inner, n + 2);
            }
            scalar => {
                out.push(' ');
                inline(out, scalar, n + 2);
                out.push('\n');
            }
        }
    }
}

/// What follows `key:` for a key at indentation `n`.
fn value_after_key(out: &mut String, v: &Value, n: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            mapping(out, m, n + 2);
        }
        // Kubernetes style: a list under a key is not indented further.
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            sequence(out, a, n);
        }
        scalar => {
            out.push(' ');
            inline(out, scalar, n + 2);
            out.push('\n');
        }
    }
}

/// A scalar (or an empty collection) on the current line; a literal block's
/// lines are indented by `n`.
fn inline(out: &mut String, v: &Value, n: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(x) => out.push_str(&x.to_string()),
        Value::String(s) => string(out, s, n, true),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A string: plain, literal block (values only) or double-quoted.
fn string(out: &mut String, s: &str, n: usize, block_ok: bool) {
    if plain(s) {
        out.push_str(s);
    } else if block_ok && literal_ok(s) {
        literal(out, s, n);
    } else {
        quoted(out, s);
    }
}

/// Whether `s` reads as this same string, unquoted, in YAML 1.1 and 1.2.
fn plain(s: &str) -> bool {
    const WORDS: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !WORDS.contains(&s.to_ascii_lowercase().as_str())
}

/// A character that may stand as itself in YAML text. The line breaks
/// YAML 1.1 knows beside `\n` (NEL, LS, PS) and the byte-order mark are left
/// out: a reader would take them for structure.
fn printable(c: char) -> bool {
    matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// A multi-line string that a literal block gives back exactly: printable
/// lines (tabs allowed), no carriage return, and a first line that starts
/// with neither a space nor a tab (which would set the block's indentation).
fn literal_ok(s: &str) -> bool {
    s.contains('\n') && !s.starts_with([' ', '\t', '\n']) && s.chars().all(|c| c == '\n' || c == '\t' || printable(c))
}

/// `|` (one final newline), `|-` (none) or `|+` (several), then the lines
/// indented by `n`; empty lines are left empty.
fn literal(out: &mut String, s: &str, n: usize) {
    let body = s.trim_end_matches('\n');
    let chomp = match s.len() - body.len() {
        0 => "-",
        1 => "",
        _ => "+",
    };
    out.push('|');
    out.push_str(chomp);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            indent(out, n);
            out.push_str(line);
        }
    }
    // Kept trailing newlines (`|+`) are empty lines after the last one.
    for _ in 1..(s.len() - body.len()) {
        out.push('\n');
    }
}

/// A double-quoted scalar; anything not printable is escaped.
fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use yaml_rust2::{Yaml, YamlLoader};

    use super::*;

    /// Strings written one way or another, and what the text looks like.
    #[test]
    fn strings() {
        let cases: &[(&str, &str)] = &[
            // A name: plain.
            ("perfops-orders", "perfops-orders"),
            // Label keys with a prefix: plain.
            ("app.kubernetes.io/name", "app.kubernetes.io/name"),
            // An environment variable: plain.
            ("PERFOPS_TOKEN", "PERFOPS_TOKEN"),
            // YAML 1.1 booleans, any case: quoted.
            ("yes", "\"yes\""),
            ("On", "\"On\""),
            ("n", "\"n\""),
            // null: quoted.
            ("Null", "\"Null\""),
            // Numbers and number-like strings (YAML 1.1 reads 1_000 as 1000): quoted.
            ("1", "\"1\""),
            ("1_000", "\"1_000\""),
            ("0b101", "\"0b101\""),
            ("1e3", "\"1e3\""),
            ("1Gi", "\"1Gi\""),
            (".inf", "\".inf\""),
            // A colon (an image with a tag, a listen address): quoted.
            ("perfops:dev", "\"perfops:dev\""),
            ("0.0.0.0:7070", "\"0.0.0.0:7070\""),
            // The empty string: quoted.
            ("", "\"\""),
            // Quotes and backslashes: escaped.
            ("a\"b\\c", "\"a\\\"b\\\\c\""),
            // A control character and the YAML 1.1 line breaks: escaped.
            ("a\u{1}b\u{85}c\u{2028}", "\"a\\u0001b\\u0085c\\u2028\""),
            // A carriage return in a multi-line string: quoted, not a block.
            ("a\r\nb\n", "\"a\\r\\nb\\n\""),
            // A block whose first line starts with a space would set the indentation: quoted.
            ("  a\nb\n", "\"  a\\nb\\n\""),
            // Non-ASCII letters: as they are.
            ("café x", "\"café x\""),
        ];
        for (s, want) in cases {
            let text = to_yaml(&json!({ "k": s }));
            assert_eq!(text, format!("k: {want}\n"), "{s:?}");
        }
    }

    /// Multi-line strings become literal blocks with the right chomping.
    #[test]
    fn literal_blocks() {
        let cases: &[(&str, &str)] = &[
            // One final newline: `|`.
            ("a: 1\nb: 2\n", "k: |\n  a: 1\n  b: 2\n"),
            // None: `|-`.
            ("x\ny", "k: |-\n  x\n  y\n"),
            // Several: `|+`, kept as empty lines.
            ("x\n\n\n", "k: |+\n  x\n\n\n"),
            // Empty lines inside and indented lines: as they are.
            ("a\n\n  b\n", "k: |\n  a\n\n    b\n"),
        ];
        for (s, want) in cases {
            assert_eq!(to_yaml(&json!({ "k": s })), *want, "{s:?}");
        }
    }

    /// The shapes Kubernetes objects have, in Kubernetes' own style.
    #[test]
    fn layout() {
        let v = json!({
            "apiVersion": "v1",
            "metadata": { "name": "x", "labels": {} },
            "spec": {
                "containers": [ { "name": "c", "args": ["agent", "--join"] , "env": [] } ],
                "parallelism": 3,
                "suspend": false,
                "nested": [[1, 2], []]
            }
        });
        let want = "\
apiVersion: v1
metadata:
  labels: {}
  name: x
spec:
  containers:
  - args:
    - agent
    - \"--join\"
    env: []
    name: c
  nested:
  -
    - 1
    - 2
  - []
  parallelism: 3
  suspend: false
";
        assert_eq!(to_yaml(&v), want);
    }

    /// Whatever the strings, a YAML parser reads back the same value.
    #[test]
    fn round_trip() {
        let strings = [
            "plain",
            "yes",
            "1_000",
            "x: y",
            "- a",
            "# c",
            "multi\nline\n",
            "multi\n\n",
            "tab\tin",
            "\ttab first\n",
            "trailing \nspace \n",
            "--- \n...\n",
            "'single'",
            "&anchor",
            "*alias",
            "!tag",
            "%dir",
            "@at",
            "`tick",
            "{a}",
            "[b]",
            "ünï\ncödé\n",
            "\u{0}\u{7f}\u{9f}",
            "\u{1F600}",
            "key: |\n  x\n",
        ];
        for s in strings {
            let v = json!({ "a": { "b": [ { "s": s, "n": s }, s ] }, s: s });
            let text = to_yaml(&v);
            let docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"));
            assert_eq!(docs.len(), 1, "{text}");
            assert_eq!(to_json(&docs[0]), v, "{s:?}:\n{text}");
        }
    }

    /// yaml-rust2's tree as JSON, strings staying strings.
    fn to_json(y: &Yaml) -> Value {
        match y {
            Yaml::Hash(h) => Value::Object(
                h.iter().map(|(k, v)| (k.as_str().expect("string keys").to_string(), to_json(v))).collect(),
            ),
            Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
            Yaml::String(s) => Value::String(s.clone()),
            Yaml::Integer(i) => json!(i),
            Yaml::Boolean(b) => json!(b),
            Yaml::Null => Value::Null,
            other => panic!("unexpected {other:?}"),
        }
    }
}
