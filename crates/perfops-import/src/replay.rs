//! The replay file (format 1, `perfops_core::model::replay`) as the
//! importers write it: one row per recorded request, in time order, its
//! offset in ms from the first. `import access-log --replay` and `import har
//! --replay` both write through [`Writer`]; which flow and which values a
//! request fills is each importer's.
//!
//! ```text
//!   log (nginx logs at a response's end, so nearly in order):
//!     t=10.0  t=12.0  t=9.5  t=75.0  t=11.0          <- read order
//!   window 60 s: a row is written once a line 60 s later has been read
//!     9.5 10.0 12.0 | read t=75.0: written up to 15.0 | t=11.0 < 12.0 written
//!   rows: offset_ms = t - first = 0, 500, 2500, 65500   out of order: 1
//! ```
//!
//! A request earlier than a row already written cannot be put in its place:
//! it is counted and left out. The window holds at most [`MAX_PENDING`] rows
//! (past it the earliest is written early), so memory is bounded by the
//! window, never by the input. The rows are at most the replay model's cap
//! ([`MAX_ARRIVALS`]); past it the writing stops with an error. The file
//! (temporary, renamed once whole) is the caller's.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use perfops_core::model::replay::{MAX_ARRIVALS, MAX_OFFSET_MS, REPLAY_MAGIC};

/// How far back in time a line may be from the latest one read and still be
/// put in its place: 60 s, a slow response's lateness in nginx's log.
pub const WINDOW_US: i64 = 60_000_000;

/// Rows held in the window at most (past it, the earliest is written early).
pub const MAX_PENDING: usize = 1_000_000;

/// Why the file could not be written whole.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// More rows than the replay model reads.
    #[error(
        "more than {MAX_ARRIVALS} requests: past the replay model's cap (import a part of the recording: e.g. `head -n {MAX_ARRIVALS}` of a log)"
    )]
    TooMany,
    /// An offset past u32 milliseconds.
    #[error("the recording spans more than {} days: past a replay file's offsets", MAX_OFFSET_MS / 86_400_000)]
    TooLong,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Rows (arrivals) written.
    pub rows: u64,
    /// Lines earlier than a row already written: left out.
    pub out_of_order: u64,
    /// Requests to endpoints the scenario has no flow for: left out.
    pub untracked: u64,
    /// The last row's offset.
    pub last_ms: u32,
}

/// The rows in time order, through the window (see the module doc).
pub struct Writer<W: Write> {
    out: W,
    columns: usize,
    /// (time, arrival order, the row after its offset: `,flow,values`).
    pending: BinaryHeap<Reverse<(i64, u64, String)>>,
    seq: u64,
    latest_us: i64,
    first_us: Option<i64>,
    written_us: i64,
    /// Rows written at most: the replay model's cap (smaller in tests).
    cap: u64,
    /// The counts so far.
    pub written: Written,
}

impl<W: Write> Writer<W> {
    /// A writer of a file with these value `columns`; the two header lines are written now.
    pub fn new(mut out: W, columns: &[String]) -> std::io::Result<Writer<W>> {
        let mut header = vec!["offset_ms".to_string(), "flow".to_string()];
        header.extend(columns.iter().map(|c| field(c)));
        writeln!(out, "{REPLAY_MAGIC}\n{}", header.join(","))?;
        Ok(Writer {
            out,
            columns: columns.len(),
            pending: BinaryHeap::new(),
            seq: 0,
            latest_us: i64::MIN,
            first_us: None,
            written_us: i64::MIN,
            cap: MAX_ARRIVALS as u64,
            written: Written::default(),
        })
    }

    /// One request at `time_us` of `flow`, its `values` by column index
    /// (`(column, value)`; the other columns empty).
    pub fn push(&mut self, time_us: i64, flow: &str, values: &[(usize, &str)]) -> Result<(), WriteError> {
        if time_us < self.written_us {
            self.written.out_of_order += 1;
            return Ok(());
        }
        let mut cells = vec![""; self.columns];
        for (c, v) in values {
            cells[*c] = v;
        }
        let mut tail = format!(",{}", field(flow));
        for c in cells {
            tail.push(',');
            tail.push_str(&field(c));
        }
        self.pending.push(Reverse((time_us, self.seq, tail)));
        self.seq += 1;
        self.latest_us = self.latest_us.max(time_us);
        while let Some(Reverse((t, _, _))) = self.pending.peek() {
            if *t <= self.latest_us.saturating_sub(WINDOW_US) || self.pending.len() > MAX_PENDING {
                self.emit()?;
            } else {
                break;
            }
        }
        Ok(())
    }

    fn emit(&mut self) -> Result<(), WriteError> {
        let Some(Reverse((t, _, tail))) = self.pending.pop() else { return Ok(()) };
        if self.written.rows >= self.cap {
            return Err(WriteError::TooMany);
        }
        let first = *self.first_us.get_or_insert(t);
        let ms = u32::try_from((t - first) / 1000).map_err(|_| WriteError::TooLong)?;
        writeln!(self.out, "{ms}{tail}")?;
        self.written_us = t;
        self.written.rows += 1;
        self.written.last_ms = ms;
        Ok(())
    }

    /// Write what the window still holds; the output, flushed.
    pub fn finish(mut self) -> Result<(W, Written), WriteError> {
        while !self.pending.is_empty() {
            self.emit()?;
        }
        self.out.flush()?;
        Ok((self.out, self.written))
    }
}

/// One CSV field (RFC 4180 quoting where needed).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with([' ', '#']) || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use perfops_core::model::replay::Recording;

    use super::*;

    const S: i64 = 1_000_000;

    /// A request as the writer is given it: its time, its flow, its values by column.
    type Row<'a> = (i64, &'a str, Vec<(usize, &'a str)>);
    /// (what, value columns, rows in read order, the file's rows after its header, out of order).
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<Row<'a>>, Vec<&'a str>, u64);

    /// Rows written from `(time_us, flow, values)`, and the counts.
    fn write(columns: &[&str], rows: &[Row<'_>]) -> (String, Written) {
        let columns: Vec<String> = columns.iter().map(|c| (*c).to_string()).collect();
        let mut w = Writer::new(Vec::new(), &columns).expect("in memory");
        for (t, flow, values) in rows {
            w.push(*t, flow, values).expect("in memory");
        }
        let (out, written) = w.finish().expect("in memory");
        (String::from_utf8(out).expect("text"), written)
    }

    #[test]
    fn table() {
        let a = "GET /orders/{id}";
        let b = "POST /auth";
        // (what, columns, rows in read order, the file's rows after its two header lines, out of order)
        let cases: Vec<Case<'_>> = vec![
            // lines in order: offsets from the first, in ms
            (
                "in order",
                vec![],
                vec![(10 * S, b, vec![]), (10 * S + 1500, b, vec![]), (12 * S, b, vec![])],
                vec!["0,POST /auth", "1,POST /auth", "2000,POST /auth"],
                0,
            ),
            // a line 0.5 s earlier than the one before (a slow response): put in its place,
            // and the first in time is the offsets' zero
            (
                "within the window",
                vec![],
                vec![(10 * S, b, vec![]), (12 * S, b, vec![]), (9 * S + S / 2, b, vec![])],
                vec!["0,POST /auth", "500,POST /auth", "2500,POST /auth"],
                0,
            ),
            // a line at 75 s writes every row up to 15 s; then one at 11 s, earlier than the
            // 12 s already written, is counted and left out
            (
                "out of the window",
                vec![],
                vec![(10 * S, b, vec![]), (12 * S, b, vec![]), (75 * S, b, vec![]), (11 * S, b, vec![])],
                vec!["0,POST /auth", "2000,POST /auth", "65000,POST /auth"],
                1,
            ),
            // value columns: each row fills its own, the others empty; a value with a comma quoted
            (
                "value columns",
                vec!["id", "query"],
                vec![(0, a, vec![(0, "17"), (1, "page=1,2")]), (S, b, vec![]), (2 * S, a, vec![(0, "42")])],
                vec!["0,GET /orders/{id},17,\"page=1,2\"", "1000,POST /auth,,", "2000,GET /orders/{id},42,"],
                0,
            ),
            // an endpoint without placeholders in a file without value columns
            ("no placeholders", vec![], vec![(5 * S, b, vec![])], vec!["0,POST /auth"], 0),
            // lines at the same instant keep their read order
            (
                "same instant",
                vec!["id"],
                vec![(S, a, vec![(0, "1")]), (S, a, vec![(0, "2")])],
                vec!["0,GET /orders/{id},1", "0,GET /orders/{id},2"],
                0,
            ),
        ];
        for (what, columns, rows, want, late) in cases {
            let (text, written) = write(&columns, &rows);
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some(REPLAY_MAGIC), "{what}");
            let header = std::iter::once("offset_ms,flow").chain(columns.iter().copied()).collect::<Vec<_>>().join(",");
            assert_eq!(lines.next(), Some(header.as_str()), "{what}");
            assert_eq!(lines.collect::<Vec<_>>(), want, "{what}");
            assert_eq!(written.out_of_order, late, "{what}");
            assert_eq!(written.rows, want.len() as u64, "{what}");
            // Exactly what `run` reads.
            let rec = Recording::parse(&text, &[a, b]).unwrap_or_else(|e| panic!("{what}: {e:?}\n{text}"));
            assert_eq!(rec.len(), want.len(), "{what}");
        }
    }

    /// Past the cap the writing stops with an error, not a file cut short in silence.
    #[test]
    fn cap() {
        let mut w = Writer::new(Vec::new(), &[]).expect("in memory");
        w.cap = 2;
        for t in 0..3 {
            w.push(t * S, "GET /", &[]).expect("held in the window");
        }
        assert!(matches!(w.finish(), Err(WriteError::TooMany)));
    }
}
