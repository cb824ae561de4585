//! CSV feeders: tables of test data (`data: { users: { csv: users.csv, mode: cycle } }`) whose rows
//! are handed to arrivals, so `${users.email}` differs per request. This module owns parsing the CSV
//! text (first row = column names) and choosing the row for an arrival. It does not read files (the
//! caller reads the file and passes its text) and keeps no cursor: the row is a pure function of the
//! arrival number (or of the caller's `Rng`), so shards and workers need no shared state.

use std::fmt;

/// How a feeder hands out rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeedMode {
    /// Row `seq % len`: every row in turn, then again from the first.
    #[default]
    Cycle,
    /// A row chosen at random for each arrival (rows may repeat).
    Random,
    /// Row `seq` while there are rows; then the feeder is exhausted and the engine stops that flow.
    Once,
}

impl FeedMode {
    /// Every mode, in the order hints list them.
    pub const ALL: [FeedMode; 3] = [FeedMode::Cycle, FeedMode::Random, FeedMode::Once];

    /// The mode as written in a scenario: `cycle`, `random` or `once`.
    pub fn name(self) -> &'static str {
        match self {
            FeedMode::Cycle => "cycle",
            FeedMode::Random => "random",
            FeedMode::Once => "once",
        }
    }

    /// The mode written `name` (exact, lowercase), if any.
    pub fn from_name(name: &str) -> Option<FeedMode> {
        FeedMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for FeedMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A feeder's CSV text could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FeederError {
    /// The 1-based line of the CSV text where the problem is.
    pub line: u64,
    /// What is wrong, in one line.
    pub message: String,
}

/// A parsed CSV feeder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feeder {
    name: String,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
    mode: FeedMode,
}

impl Feeder {
    /// Parse `csv_text` (RFC 4180: commas, `"` quoting; the first row names the columns). Column names
    /// are trimmed and must be unique and non-empty; values are kept as they are. Every row must have
    /// as many fields as the header, and there must be at least one row. A leading UTF-8 byte order
    /// mark (spreadsheet exports) is ignored; blank lines are skipped.
    pub fn from_csv(name: &str, csv_text: &str, mode: FeedMode) -> Result<Feeder, FeederError> {
        let text = csv_text.strip_prefix('\u{feff}').unwrap_or(csv_text);
        let mut reader =
            csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::Headers).from_reader(text.as_bytes());
        let header = reader.headers().map_err(|err| csv_error(text, &err))?;
        if header.is_empty() {
            return Err(FeederError {
                line: 1,
                message: "no header: the first row must name the columns, e.g. `email,password`".to_owned(),
            });
        }
        let columns: Vec<String> = header.iter().map(str::to_owned).collect();
        for (i, column) in columns.iter().enumerate() {
            let line = header.position().map_or(1, |p| line_at(text, p.byte()));
            if column.is_empty() {
                return Err(FeederError { line, message: format!("column {} has no name", i + 1) });
            }
            if columns[..i].contains(column) {
                return Err(FeederError { line, message: format!("column `{column}` is named twice") });
            }
        }
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|err| csv_error(text, &err))?;
            rows.push(record.iter().map(str::to_owned).collect());
        }
        if rows.is_empty() {
            return Err(FeederError { line: 2, message: format!("feeder `{name}` has a header but no rows") });
        }
        Ok(Feeder { name: name.to_owned(), columns, rows, mode })
    }

    /// A feeder of `rows` already read, each with a value per column (a
    /// replay's value columns, one row per arrival); `None` without rows or
    /// with a row of another width.
    pub fn of_rows(name: &str, columns: Vec<String>, rows: Vec<Vec<String>>, mode: FeedMode) -> Option<Feeder> {
        if rows.is_empty() || rows.iter().any(|r| r.len() != columns.len()) {
            return None;
        }
        Some(Feeder { name: name.to_owned(), columns, rows, mode })
    }

    /// The feeder's name, as used in `${name.column}`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How rows are handed out.
    pub fn mode(&self) -> FeedMode {
        self.mode
    }

    /// The column names, in file order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Every data row, in file order (values in [`Feeder::columns`] order).
    pub fn rows(&self) -> impl Iterator<Item = &[String]> {
        self.rows.iter().map(Vec::as_slice)
    }

    /// The number of data rows (the header not counted); at least 1.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Always false: [`Feeder::from_csv`] rejects a feeder without rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row for arrival `seq`: [`FeedMode::Cycle`] gives row `seq % len`, [`FeedMode::Once`] row
    /// `seq` while `seq < len` (then `None`: exhausted, the engine stops that flow), [`FeedMode::Random`]
    /// a row drawn from `rng`. Values are in [`Feeder::columns`] order.
    pub fn row(&self, seq: u64, rng: &mut fastrand::Rng) -> Option<&[String]> {
        let len = self.rows.len();
        let index = match self.mode {
            // `len` fits in u64, and the remainder is below `len`, so both casts are lossless.
            FeedMode::Cycle => (seq % len as u64) as usize,
            FeedMode::Once => usize::try_from(seq).ok().filter(|&i| i < len)?,
            FeedMode::Random => rng.usize(..len),
        };
        self.rows.get(index).map(Vec::as_slice)
    }

    /// The position of `column` in [`Feeder::columns`] (and so in every row).
    pub fn column_index(&self, column: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == column)
    }
}

/// A [`FeederError`] from a csv error, with the line counted in `text`.
fn csv_error(text: &str, err: &csv::Error) -> FeederError {
    let line = err.position().map_or(1, |p| line_at(text, p.byte()));
    let message = match err.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("row has {len} fields, the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".to_owned(),
        _ => err.to_string(),
    };
    FeederError { line, message }
}

/// The 1-based line of the record that starts at `byte`. The csv crate's own line number counts the
/// blank lines it skipped before the record as if the record began there; skip them too.
fn line_at(text: &str, byte: u64) -> u64 {
    let start = usize::try_from(byte).unwrap_or(usize::MAX).min(text.len());
    let rest = &text.as_bytes()[start..];
    let skipped = rest.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
    let record = start + skipped;
    1 + text.as_bytes()[..record].iter().filter(|&&b| b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const USERS: &str = "email,password\na@x.io,pa\nb@x.io,pb\nc@x.io,pc\n";

    fn feeder(mode: FeedMode) -> Feeder {
        Feeder::from_csv("users", USERS, mode).unwrap()
    }

    fn first(row: Option<&[String]>) -> Option<&str> {
        row.map(|r| r[0].as_str())
    }

    #[test]
    fn parses_header_and_rows() {
        let f = feeder(FeedMode::Cycle);
        assert_eq!(f.name(), "users");
        assert_eq!(f.columns(), ["email", "password"]);
        assert_eq!(f.len(), 3);
        assert!(!f.is_empty());
        assert_eq!(f.column_index("password"), Some(1));
        assert_eq!(f.column_index("nope"), None);
    }

    #[test]
    fn modes() {
        let mut rng = fastrand::Rng::with_seed(1);
        // (mode, seq, expected first column)
        let cases: &[(FeedMode, u64, Option<&str>)] = &[
            // Cycle starts at the first row.
            (FeedMode::Cycle, 0, Some("a@x.io")),
            // Cycle wraps around.
            (FeedMode::Cycle, 3, Some("a@x.io")),
            (FeedMode::Cycle, 5, Some("c@x.io")),
            // Cycle at the largest arrival number.
            (FeedMode::Cycle, u64::MAX, Some("a@x.io")),
            // Once hands out each row once...
            (FeedMode::Once, 0, Some("a@x.io")),
            (FeedMode::Once, 2, Some("c@x.io")),
            // ...then is exhausted.
            (FeedMode::Once, 3, None),
            (FeedMode::Once, u64::MAX, None),
        ];
        for (mode, seq, want) in cases {
            assert_eq!(first(feeder(*mode).row(*seq, &mut rng)), *want, "{mode} {seq}");
        }
    }

    #[test]
    fn random_mode_uses_the_rng() {
        let f = feeder(FeedMode::Random);
        let draw = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..30).map(|seq| first(f.row(seq, &mut rng)).unwrap().to_owned()).collect::<Vec<_>>()
        };
        let a = draw(5);
        assert_eq!(a, draw(5), "same seed, same rows");
        for email in ["a@x.io", "b@x.io", "c@x.io"] {
            assert!(a.iter().any(|e| e == email), "{email} drawn");
        }
    }

    #[test]
    fn csv_details() {
        // Quoted fields with commas, quotes and newlines; blanks around header names; a BOM; CRLF.
        let text = "\u{feff} id , note \r\n1,\"a, \"\"b\"\"\nc\"\r\n\r\n2, x \r\n";
        let f = Feeder::from_csv("notes", text, FeedMode::Cycle).unwrap();
        assert_eq!(f.columns(), ["id", "note"]);
        assert_eq!(f.len(), 2);
        let mut rng = fastrand::Rng::with_seed(0);
        assert_eq!(f.row(0, &mut rng).unwrap(), ["1", "a, \"b\"\nc"]);
        // Values keep their blanks.
        assert_eq!(f.row(1, &mut rng).unwrap(), ["2", " x "]);
    }

    #[test]
    fn bad_csv() {
        // (text, line, message contains)
        let cases: &[(&str, u64, &str)] = &[
            // A row with too many fields, on line 3.
            ("a,b\n1,2\n3,4,5\n", 3, "3 fields, the header has 2"),
            // Too few, after a blank line: the line is the row's own.
            ("a,b\n1,2\n\n3\n", 4, "1 fields, the header has 2"),
            // Empty text: no header.
            ("", 1, "no header"),
            // A header and no rows.
            ("a,b\n", 2, "no rows"),
            // A column without a name.
            ("a,,c\n1,2,3\n", 1, "column 2 has no name"),
            // A duplicate column (after trimming).
            ("a, a\n1,2\n", 1, "named twice"),
        ];
        for (text, line, message) in cases {
            let err = Feeder::from_csv("f", text, FeedMode::Cycle).expect_err(text);
            assert_eq!(err.line, *line, "{text:?}: {err}");
            assert!(err.message.contains(message), "{text:?}: {err}");
        }
    }

    #[test]
    fn mode_names() {
        for mode in FeedMode::ALL {
            assert_eq!(FeedMode::from_name(mode.name()), Some(mode));
        }
        assert_eq!(FeedMode::from_name("sequential"), None);
        assert_eq!(FeedMode::default(), FeedMode::Cycle);
    }
}
