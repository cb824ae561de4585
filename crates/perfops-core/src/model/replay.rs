//! A recording replayed at its recorded times: the replay file read into a
//! [`Recording`] (each arrival's offset, its flow, its values), and the open
//! schedule it plays as ([`Recording::schedule`]: arrival n due at
//! `offset[n] / speed`).
//!
//! ```text
//!   recording (ms):  0   40 40 45          1300      2000 2010
//!   speed 2 (s):     0   .02 .02 .0225     .65       1.0  1.005
//!   per second:      [ 4 arrivals     ... ][ 2 arrivals ...]     the target each second shows
//! ```
//!
//! A replay is an open schedule like any other: the engine's pacer asks it
//! "when is arrival n due" and shards take arrivals `k mod N`, so the shards of
//! a fleet send the recording between them, each arrival once. What differs is
//! the flow: arrival n runs the flow the recording names for it, not one drawn
//! by weight (the engine's `Work::pick` reads [`Recording::flows`]), and its
//! values are row n of the recording's value columns (`${replay.NAME}`).
//!
//! The file (format 1, docs/guide/load-models.md, "Replay"): a first line
//! `# perfops replay v1`, then CSV (RFC 4180) whose header is
//! `offset_ms,flow[,NAME...]`, one arrival a row, in time order; `#` lines are
//! comments. Kept per arrival: 4 bytes of offset and 4 of flow (shared with
//! the engine, not copied), and the values' strings when there are value
//! columns. Not here: reading the file from disk (size caps, links: the
//! caller's `input` module), the scenario's `load:` syntax (`scenario/load.rs`).

use std::sync::Arc;
use std::time::Duration;

use super::schedule::{Schedule, ScheduleError};
use super::{Rate, Segment};

/// The first line of a replay file of the format this version reads.
pub const REPLAY_MAGIC: &str = "# perfops replay v1";

/// The most arrivals a recording may hold: 20 million, ~160 MB of offsets and
/// flows (8 bytes each) before any value column.
pub const MAX_ARRIVALS: usize = 20_000_000;

/// The latest offset a recording may hold: u32 milliseconds, ~49.7 days.
pub const MAX_OFFSET_MS: u32 = u32::MAX;

/// A problem at one line of a replay file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ReplayError {
    /// 1-based line of the file.
    pub line: u64,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

/// The most errors one reading reports, line by line; the rest are counted.
const MAX_ERRORS: usize = 20;

/// A recording's arrivals, in time order (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    offsets_ms: Arc<[u32]>,
    flows: Arc<[u32]>,
    columns: Vec<String>,
    /// Row n: arrival n's values, in `columns` order (empty without columns).
    values: Vec<Vec<String>>,
}

impl Recording {
    /// Read a replay file's `text`, its flows named among `flow_names` (the
    /// scenario's, in order). Every problem is reported with its line (the
    /// first [`MAX_ERRORS`], and how many more).
    pub fn parse(text: &str, flow_names: &[&str]) -> Result<Recording, Vec<ReplayError>> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let first = text.lines().next().unwrap_or_default().trim_end();
        if first != REPLAY_MAGIC {
            let message = if first.starts_with("# perfops replay") {
                format!("`{}`: a replay format this perfops does not read", first.escape_debug())
            } else {
                "not a replay file: the first line must be `# perfops replay v1`".to_owned()
            };
            let hint = "line 1 `# perfops replay v1`, line 2 `offset_ms,flow`, then one arrival a line";
            return Err(vec![ReplayError { line: 1, message, hint: Some(hint.into()) }]);
        }
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .comment(Some(b'#'))
            .trim(csv::Trim::Headers)
            .from_reader(text.as_bytes());
        let err = |line: u64, message: String, hint: Option<&str>| ReplayError {
            line,
            message,
            hint: hint.map(str::to_owned),
        };
        // Lines counted once, from one record to the next: counting from the file's start for
        // each record took minutes for a million lines.
        let mut lines = Lines { text: text.as_bytes(), at: 0, line: 1 };
        let header = match reader.headers() {
            Ok(h) => h.clone(),
            Err(e) => return Err(vec![csv_error(&mut lines, &e)]),
        };
        let header_line = header.position().map_or(2, |p| lines.of(p.byte()));
        let names: Vec<&str> = header.iter().collect();
        if names.len() < 2 || names[0] != "offset_ms" || names[1] != "flow" {
            return Err(vec![err(
                header_line,
                format!("the header is `{}`", names.join(",").escape_debug()),
                Some("it starts `offset_ms,flow`, then the names of value columns (`${replay.NAME}`), if any"),
            )]);
        }
        let columns: Vec<String> = names[2..].iter().map(|s| (*s).to_owned()).collect();
        for (i, c) in columns.iter().enumerate() {
            if c.is_empty() || columns[..i].contains(c) || c == "offset_ms" || c == "flow" {
                return Err(vec![err(
                    header_line,
                    format!("value column {} `{}` is empty or named twice", i + 3, c.escape_debug()),
                    Some("each value column has a name of its own"),
                )]);
            }
        }
        let (mut offsets, mut flows, mut values) = (Vec::new(), Vec::new(), Vec::new());
        let (mut errors, mut more) = (Vec::new(), 0u64);
        let mut push = |e: ReplayError, errors: &mut Vec<ReplayError>| {
            if errors.len() < MAX_ERRORS {
                errors.push(e);
            } else {
                more += 1;
            }
        };
        let mut last = (0u32, header_line);
        for record in reader.records() {
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    push(csv_error(&mut lines, &e), &mut errors);
                    continue;
                }
            };
            let line = record.position().map_or(0, |p| lines.of(p.byte()));
            if offsets.len() == MAX_ARRIVALS {
                push(
                    err(line, format!("more than {MAX_ARRIVALS} arrivals"), Some("split the recording in parts")),
                    &mut errors,
                );
                break;
            }
            let offset = match offset_ms(&record[0]) {
                Ok(ms) => ms,
                Err(why) => {
                    let hint = "milliseconds from the recording's start: `0`, `1250`, `1250.5`";
                    push(err(line, format!("offset `{}`: {why}", record[0].escape_debug()), Some(hint)), &mut errors);
                    continue;
                }
            };
            if offset < last.0 {
                push(
                    err(
                        line,
                        format!("offset {offset} ms comes before the {} ms of line {}", last.0, last.1),
                        Some("the arrivals are in time order: sort the file by its first column"),
                    ),
                    &mut errors,
                );
                continue;
            }
            let Some(flow) = flow_names.iter().position(|f| *f == &record[1]) else {
                let hint = format!("the scenario's flows: {}", flow_names.join(", "));
                push(err(line, format!("unknown flow `{}`", record[1].escape_debug()), Some(&hint)), &mut errors);
                continue;
            };
            last = (offset, line);
            offsets.push(offset);
            flows.push(flow as u32);
            if !columns.is_empty() {
                values.push(record.iter().skip(2).map(str::to_owned).collect());
            }
        }
        if more > 0 {
            let line = errors.last().map_or(0, |e| e.line);
            errors.push(err(line, format!("and {more} more lines with errors"), None));
        }
        if errors.is_empty() && offsets.is_empty() {
            errors.push(err(
                header_line,
                "no arrivals: the recording is empty".into(),
                Some("one arrival a line after the header"),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Recording { offsets_ms: offsets.into(), flows: flows.into(), columns, values })
    }

    /// How many arrivals it holds.
    pub fn len(&self) -> usize {
        self.offsets_ms.len()
    }

    /// Always false: [`Recording::parse`] refuses an empty recording.
    pub fn is_empty(&self) -> bool {
        self.offsets_ms.is_empty()
    }

    /// Each arrival's flow, by its index among the scenario's flows.
    pub fn flows(&self) -> Arc<[u32]> {
        self.flows.clone()
    }

    /// The names of its value columns (`${replay.NAME}`).
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Each arrival's values, in [`Recording::columns`] order (none without
    /// value columns).
    pub fn values(&self) -> &[Vec<String>] {
        &self.values
    }

    /// Its schedule played `speed` times as fast (> 0; 2: in half the time).
    pub fn schedule(&self, speed: f64) -> Result<Schedule, ScheduleError> {
        Schedule::recorded(self.offsets_ms.clone(), speed)
    }

    /// The arrivals due in each second of its schedule at `speed`: the
    /// target each second shows, from which its stages are cut ([`stages`]).
    pub fn per_second(&self, speed: f64) -> Vec<f64> {
        self.schedule(speed).map(|s| s.segments().iter().map(|seg| seg.from.as_f64()).collect()).unwrap_or_default()
    }
}

/// A replay's stages from the arrivals due in each second (`per_second`, the
/// recording's or, for `merge`, the sum of the shards' targets): one stage
/// `replay`, or with `every` seconds one stage per `every` seconds of the
/// replay (`replay 0-10s`, ...), the last one shorter. Each stage's rate is
/// its mean, so a stage is judged on the arrivals the recording sent in it.
pub fn stages(per_second: &[f64], every: Option<u32>) -> Vec<(String, Segment)> {
    let len = per_second.len();
    let every = every.map_or(len, |e| (e as usize).max(1)).max(1);
    let mut out = Vec::new();
    let mut from = 0;
    while from < len {
        let to = (from + every).min(len);
        let seconds = (to - from) as f64;
        let mean = per_second[from..to].iter().sum::<f64>() / seconds;
        let rate = Rate::per_second(mean).unwrap_or(Rate::ZERO);
        let name = if every >= len { "replay".to_owned() } else { format!("replay {from}-{to}s") };
        out.push((name, Segment { duration: Duration::from_secs((to - from) as u64), from: rate, to: rate }));
        from = to;
    }
    out
}

/// An offset in milliseconds: a decimal number >= 0, rounded to the
/// millisecond, at most [`MAX_OFFSET_MS`].
fn offset_ms(field: &str) -> Result<u32, &'static str> {
    let field = field.trim();
    let plain = !field.is_empty() && field.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !plain {
        return Err("not a number of milliseconds");
    }
    let ms: f64 = field.parse().map_err(|_| "not a number of milliseconds")?;
    let ms = ms.round();
    if ms > f64::from(MAX_OFFSET_MS) {
        return Err("past ~49.7 days (2^32 ms), the longest recording");
    }
    Ok(ms as u32)
}

/// A [`ReplayError`] from a csv error, at its line.
fn csv_error(lines: &mut Lines<'_>, err: &csv::Error) -> ReplayError {
    let line = err.position().map_or(1, |p| lines.of(p.byte()));
    let (message, hint) = match err.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => (
            format!("{len} fields, the header has {expected_len}"),
            Some("every line has `offset_ms,flow` and a value (maybe empty) for each value column".to_owned()),
        ),
        csv::ErrorKind::Utf8 { .. } => ("not valid UTF-8".to_owned(), None),
        _ => (err.to_string(), None),
    };
    ReplayError { line, message, hint }
}

/// The lines of a text read in order: [`Lines::of`] counts from the last record asked for.
struct Lines<'t> {
    text: &'t [u8],
    /// Counted up to here...
    at: usize,
    /// ... where this line is.
    line: u64,
}

impl Lines<'_> {
    /// The 1-based line of the record that starts at `byte` (blank and comment lines before it
    /// skipped, as the csv reader skips them). Records are asked for in order; one before the
    /// last asked for is counted from the start.
    fn of(&mut self, byte: u64) -> u64 {
        let bytes = self.text;
        let mut at = usize::try_from(byte).unwrap_or(usize::MAX).min(bytes.len());
        loop {
            while at < bytes.len() && matches!(bytes[at], b'\r' | b'\n') {
                at += 1;
            }
            if at < bytes.len() && bytes[at] == b'#' {
                at += bytes[at..].iter().position(|&b| b == b'\n').unwrap_or(bytes.len() - at);
                continue;
            }
            break;
        }
        if at < self.at {
            (self.at, self.line) = (0, 1);
        }
        self.line += memchr::memchr_iter(b'\n', &bytes[self.at..at]).count() as u64;
        self.at = at;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::Shard;

    const FLOWS: &[&str] = &["login", "orders"];

    fn file(lines: &[&str]) -> String {
        let mut s = format!("{REPLAY_MAGIC}\noffset_ms,flow,user\n");
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    fn us(d: Duration) -> u128 {
        d.as_micros()
    }

    /// Due times are the recorded offsets over the speed; each arrival's flow
    /// and values are its line's; a second's target is its count.
    #[test]
    fn arrivals_are_due_at_their_offsets_with_their_flows() {
        let rec = Recording::parse(&file(&["0,login,alice", "40,orders,", "40,orders,", "1300.4,orders,bob"]), FLOWS)
            .unwrap();
        assert_eq!(&*rec.flows(), &[0, 1, 1, 1]);
        assert_eq!(rec.columns(), ["user"]);
        assert_eq!(rec.values()[3], ["bob"]);
        // (speed, arrival, due in µs)
        let cases = [
            (1.0, 0, Some(0)),         // the first arrival at the start
            (1.0, 1, Some(40_000)),    // at its offset
            (1.0, 2, Some(40_000)),    // two at one instant: both due then
            (1.0, 3, Some(1_300_000)), // 1300.4 ms rounds to the millisecond
            (1.0, 4, None),            // past the last: the schedule ends
            (2.0, 3, Some(650_000)),   // twice as fast: half the offset
            (0.5, 1, Some(80_000)),    // half as fast: twice the offset
        ];
        for (i, (speed, n, want)) in cases.into_iter().enumerate() {
            assert_eq!(rec.schedule(speed).unwrap().due(n).map(us), want, "case {i}");
        }
        // The target of each second is what the recording sent in it; the schedule lasts to the
        // end of its last arrival's second.
        let s = rec.schedule(1.0).unwrap();
        assert_eq!(rec.per_second(1.0), [3.0, 1.0]);
        assert_eq!((s.duration(), s.total_arrivals()), (Duration::from_secs(2), 4));
        assert!((s.arrivals_before(Duration::from_secs(1)) - 3.0).abs() < 1e-9);
        assert_eq!(rec.per_second(2.0), [4.0], "twice as fast, all in the first second");
        let curve = Schedule::constant(Rate::per_second(1.0).unwrap(), Duration::from_secs(1)).unwrap();
        assert!(s.is_recorded() && !curve.is_recorded());
    }

    /// Every problem of a file is reported with its line, and the lines that
    /// are right are not blamed.
    #[test]
    fn bad_files_say_what_and_where() {
        // (file, the errors' lines and a word of each)
        let cases: Vec<(String, Vec<(u64, &str)>)> = vec![
            // No magic line: not a replay file at all.
            ("offset_ms,flow\n0,login\n".into(), vec![(1, "not a replay file")]),
            // A later format: said as such.
            ("# perfops replay v2\noffset_ms,flow\n0,login\n".into(), vec![(1, "does not read")]),
            // A wrong header.
            (format!("{REPLAY_MAGIC}\ntime,flow\n0,login\n"), vec![(2, "the header")]),
            // A header and no arrival.
            (format!("{REPLAY_MAGIC}\noffset_ms,flow\n"), vec![(2, "no arrivals")]),
            // Bad offsets, an unknown flow, a line out of order and a short line, each at its line;
            // a comment line between them is counted.
            (
                file(&[
                    "0,login,a",
                    "-5,login,a",
                    "1e3,login,a",
                    "# a note",
                    "x,orders,",
                    "20,logout,",
                    "30,orders,",
                    "10,orders,",
                    "40,orders",
                ]),
                vec![
                    (4, "offset `-5`"),
                    (5, "offset `1e3`"),
                    (7, "offset `x`"),
                    (8, "unknown flow `logout`"),
                    (10, "comes before the 30 ms of line 9"),
                    (11, "2 fields"),
                ],
            ),
            // Past 2^32 ms.
            (file(&["5000000000,login,"]), vec![(3, "49.7 days")]),
        ];
        for (i, (text, want)) in cases.into_iter().enumerate() {
            let got = Recording::parse(&text, FLOWS).unwrap_err();
            let got: Vec<(u64, String)> = got.into_iter().map(|e| (e.line, e.message)).collect();
            assert_eq!(got.len(), want.len(), "case {i}: {got:?}");
            for ((line, message), (want_line, word)) in got.iter().zip(&want) {
                assert!(line == want_line && message.contains(word), "case {i}: {got:?}");
            }
        }
        // Many bad lines: the first 20 and a count of the rest.
        let many: Vec<String> = (0..50).map(|_| "x,login,".to_string()).collect();
        let errors = Recording::parse(&file(&many.iter().map(String::as_str).collect::<Vec<_>>()), FLOWS).unwrap_err();
        assert_eq!(errors.len(), 21);
        assert!(errors[20].message.contains("30 more"), "{:?}", errors[20]);
    }

    /// Stages: one for the whole replay, or one per `every` seconds, each at
    /// the mean of its seconds.
    #[test]
    fn stages_cut_the_replay_by_its_seconds() {
        let per_second = [10.0, 20.0, 30.0, 0.0, 5.0];
        let rates = |every| -> Vec<(String, u64, f64)> {
            stages(&per_second, every).into_iter().map(|(n, s)| (n, s.duration.as_secs(), s.from.as_f64())).collect()
        };
        // One stage: the whole replay at its mean.
        assert_eq!(rates(None), [("replay".to_owned(), 5, 13.0)]);
        // Every 2 s: the last stage is the 1 s left.
        assert_eq!(
            rates(Some(2)),
            [
                ("replay 0-2s".to_owned(), 2, 15.0),
                ("replay 2-4s".to_owned(), 2, 15.0),
                ("replay 4-5s".to_owned(), 1, 5.0)
            ]
        );
        // `every` longer than the replay: one stage.
        assert_eq!(rates(Some(60)), [("replay".to_owned(), 5, 13.0)]);
    }

    proptest! {
        /// Arrival k belongs to shard k mod N: the shards' arrivals, with their due times and
        /// flows, are disjoint and together are the recording, whatever the speed.
        #[test]
        fn shards_send_the_recording_between_them(
            gaps in proptest::collection::vec(0u32..3000, 1..200),
            shards in 1u32..6,
            speed in prop_oneof![Just(1.0), Just(2.0), Just(0.5), 0.1f64..10.0],
        ) {
            let mut t = 0u32;
            let mut lines = Vec::new();
            for (i, g) in gaps.iter().enumerate() {
                t += g;
                lines.push(format!("{t},{},{i}", FLOWS[i % 2]));
            }
            let rec = Recording::parse(&file(&lines.iter().map(String::as_str).collect::<Vec<_>>()), FLOWS).unwrap();
            let schedule = rec.schedule(speed).unwrap();
            let whole: Vec<(u64, Duration)> =
                Shard::WHOLE.arrivals(schedule.total_arrivals()).map(|n| (n, schedule.due(n).unwrap())).collect();
            prop_assert_eq!(whole.len(), gaps.len());
            let mut union = Vec::new();
            for i in 0..shards {
                let shard = Shard::WHOLE.split(i, shards);
                union.extend(shard.arrivals(schedule.total_arrivals()).map(|n| (n, schedule.due(n).unwrap())));
            }
            union.sort_unstable();
            prop_assert_eq!(&union, &whole, "each arrival once, at its due time");
            // Due times never go back, and every arrival is inside the schedule.
            prop_assert!(whole.windows(2).all(|w| w[0].1 <= w[1].1));
            prop_assert!(whole.iter().all(|a| a.1 < schedule.duration()));
            // The seconds' targets add up to the recording.
            prop_assert!((rec.per_second(speed).iter().sum::<f64>() - gaps.len() as f64).abs() < 1e-6);
        }
    }
}
