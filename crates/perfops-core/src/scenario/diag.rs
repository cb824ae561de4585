//! Diagnostics: an error in a scenario file, with where it is and what to do.
//!
//! Rendered like a compiler's: `file:line:column: error: message`, the source
//! line with a caret under the column, the field path, and a hint.

use std::fmt;

/// One problem found in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it (or `--set` for overrides).
    pub file: String,
    /// 1-based line; 0 when unknown.
    pub line: usize,
    /// 1-based column; 0 when unknown.
    pub column: usize,
    /// The field path, e.g. `flows.list-orders.steps[0].request`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: error: {}", self.file, self.line, self.column, self.message)?;
        if !self.path.is_empty() {
            write!(f, " (at `{}`)", self.path)?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Every problem found in a file, in source order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Render all, each with its source line and a caret, for a terminal.
    pub fn render(&self, source: &str) -> String {
        self.render_as(source, "error")
    }

    /// Render all as warnings: what a valid file will surely do wrong when it runs (`check`'s
    /// warnings, issue #32).
    pub fn render_warnings(&self, source: &str) -> String {
        self.render_as(source, "warning")
    }

    fn render_as(&self, source: &str, what: &str) -> String {
        let lines: Vec<&str> = source.lines().collect();
        let mut out = String::new();
        for d in &self.0 {
            out.push_str(&format!("{}:{}:{}: {what}: {}\n", d.file, d.line, d.column, d.message));
            if d.file != "--set"
                && let Some(text) = d.line.checked_sub(1).and_then(|i| lines.get(i))
            {
                let gutter = d.line.to_string();
                out.push_str(&format!("{} | {text}\n", gutter));
                out.push_str(&format!("{} | {}^\n", " ".repeat(gutter.len()), " ".repeat(d.column.saturating_sub(1))));
            }
            if !d.path.is_empty() {
                out.push_str(&format!("  at: {}\n", d.path));
            }
            if let Some(h) = &d.hint {
                out.push_str(&format!("  hint: {h}\n"));
            }
        }
        let n = self.0.len();
        out.push_str(&format!("{n} {what}{} found\n", if n == 1 { "" } else { "s" }));
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1) || c.contains(word) && word.len() >= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting a swap of two neighbours as one edit (optimal
/// string alignment): `hodl` is one typo away from `hold`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = ["rate", "hold", "ramp_to", "over", "name"];
        let cases = [
            ("rampto", Some("ramp_to")), // missing underscore
            ("hodl", Some("hold")),      // transposition
            ("ovre", Some("over")),      // transposition
            ("zzzzzz", None),            // nothing close
        ];
        for (word, want) in cases {
            assert_eq!(did_you_mean(word, &keys), want, "{word}");
        }
    }

    #[test]
    fn renders_with_caret() {
        let d = Diagnostics(vec![Diagnostic {
            file: "s.yaml".into(),
            line: 2,
            column: 5,
            path: "load.stages[0]".into(),
            message: "unknown field `rampto`".into(),
            hint: Some("did you mean `ramp_to`?".into()),
        }]);
        let text = d.render("load:\n  - rampto: 3\n");
        assert!(text.contains("s.yaml:2:5: error: unknown field `rampto`\n2 |   - rampto: 3\n  |     ^\n"), "{text}");
        assert!(text.ends_with("hint: did you mean `ramp_to`?\n1 error found\n"), "{text}");
    }
}
