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
                let (shown, caret) = shown_line(text, d.column);
                out.push_str(&format!("{} | {shown}\n", gutter));
                out.push_str(&format!("{} | {}^\n", " ".repeat(gutter.len()), " ".repeat(caret)));
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

/// How much of a source line a diagnostic shows, in characters, around its column.
const SHOWN_LINE: usize = 100;

/// `text`, a source line, as a diagnostic shows it with its caret under `column` (1-based,
/// in characters): at most [`SHOWN_LINE`] characters around the column, `...` where it was
/// cut, a control character (a tab, an escape sequence's ESC) as one space or `?` so that
/// the caret still lines up and the terminal takes nothing from the file. Returns the
/// shown text and the caret's offset in it. Before, a 200 KB line was printed whole.
fn shown_line(text: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = text.chars().collect();
    let at = column.saturating_sub(1).min(chars.len());
    let from = at.saturating_sub(SHOWN_LINE / 2).min(chars.len().saturating_sub(SHOWN_LINE));
    let to = (from + SHOWN_LINE).min(chars.len());
    let clean = |c: &char| match c {
        '\t' => ' ',
        c if c.is_control() => '?',
        c => *c,
    };
    let mut shown: String = chars[from..to].iter().map(clean).collect();
    let mut caret = at - from;
    if from > 0 {
        shown.insert_str(0, "...");
        caret += 3;
    }
    if to < chars.len() {
        shown.push_str("...");
    }
    (shown, caret)
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

    /// A source line as shown under a diagnostic: around its column, bounded, its caret in place.
    #[test]
    fn long_and_odd_lines_are_shown_bounded() {
        let long = format!("json: {}", "[".repeat(200_000));
        // (line, column, shown, caret offset)
        let cases: [(&str, usize, String, usize); 4] = [
            // a short line: whole
            ("  - rampto: 3", 5, "  - rampto: 3".into(), 4),
            // a 200 KB line: 100 characters around the column, cut both sides
            (&long, 1000, format!("...{}...", "[".repeat(100)), 53),
            // its start: cut at its end only
            (&long, 3, format!("{}...", &long[..100]), 2),
            // a tab and an escape: one column each, nothing for the terminal
            ("a\tb\x1b[31mc", 9, "a b?[31mc".into(), 8),
        ];
        for (i, (line, column, shown, caret)) in cases.into_iter().enumerate() {
            assert_eq!(shown_line(line, column), (shown, caret), "case {i}");
        }
    }
}
