//! Reading a results directory for the report, the comparison, the run
//! listing and `merge` ([`crate::parts::read_seconds`]), through the types
//! that wrote it: [`RunMeta`], [`RunSummary`] and [`SeriesLine`] from
//! `run.rs`, and [`Sample`] / [`ProbeResult`] for the watcher's streams
//! (`perfops_core::telemetry::watched`, the types the engine writes them with).
//! Every file is optional; a missing file means "not available". It stands
//! below every module that reads a directory back (`html`, `compare`,
//! `runs`, `parts`), which is why it is not inside `html`.
//!
//! Versions are handled explicitly: each whole file's `version` is read
//! first and kept ([`RunFiles::versions`]), so a caller can refuse a format
//! newer than this perfops (`compare` does) before trusting what was read.
//! Older files of this format read through the types' serde defaults. A
//! file or line that does not read (not JSON, a run killed mid-write, a
//! newer shape) is left out and said in the report's notes. Only a
//! directory with nothing to report in it is an error.
//!
//! Every file is opened through [`perfops_core::input`] (#31): inside the
//! directory (a symbolic link out of it, to `/etc/passwd` or `/dev/zero`,
//! is refused), a regular file only (a FIFO is refused without waiting on
//! it), under a size cap per kind far above what a 24 h run writes. A
//! refused file is treated as one that does not read: left out, and said,
//! with the rule, in the notes (the report renders without it and
//! `perfops report` prints the note on stderr); a directory left with
//! nothing to report is an error that says why. A damaged line is named by
//! its place in the file, `series.jsonl:3:37`, never by the JSON parser's
//! place inside the line alone.
//!
//! It does not interpret what it reads: that is `html/model.rs`.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use perfops_core::input::{self, Cap, InputError};
use perfops_core::pipeline::control::ControlEvent;
use perfops_core::telemetry::watched::{ProbeResult, Sample};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::results::RESULTS_VERSION;
use crate::run::{RunMeta, RunSummary, SeriesLine};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The path is a file, not a results directory.
    #[error("{0} is not a directory (give the results directory of a run, e.g. runs/20261122T043000Z-orders)")]
    NotADirectory(PathBuf),
    /// The directory is missing or cannot be listed.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither `series.jsonl` nor `summary.json` is there.
    #[error("{0} holds no results (neither series.jsonl nor summary.json): is it the results directory of a run?")]
    NothingToReport(PathBuf),
    /// Nothing to report is left once the files that do not read are left
    /// out (a `series.jsonl` that is a FIFO, a link out of the directory).
    #[error("{} holds no results that can be read: {}", path.display(), why.join("; "))]
    NothingReadable {
        /// The directory.
        path: PathBuf,
        /// What could not be read, each with why.
        why: Vec<String>,
    },
}

/// What every whole results file starts with: its format's version.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    version: Option<u64>,
}

/// Everything a results directory holds, as read.
#[derive(Debug, Default)]
pub(crate) struct RunFiles {
    /// The directory's own name (`20261122T043000Z-orders`), never its path:
    /// a shared report must not leak where it was made.
    pub dir_name: String,
    /// `meta.json`, when there and readable.
    pub meta: Option<RunMeta>,
    /// `summary.json`: absent while a run goes and after a kill.
    pub summary: Option<RunSummary>,
    /// The failures by step and kind, with their exchanges: `summary.json`'s
    /// when it is there, else those `failures.jsonl` kept (a killed run).
    pub failures: Vec<crate::failures::FailureGroup>,
    /// `series.jsonl`, one line per second.
    pub series: Vec<SeriesLine>,
    /// `watch.jsonl`, one line per sample of a source.
    pub watch: Vec<Sample>,
    /// `probe.jsonl`, one line per probe check.
    pub probe: Vec<ProbeResult>,
    /// `events.jsonl`, the actions by hand (none in results from before them).
    pub events: Vec<ControlEvent>,
    /// `latency.hlog`, undecoded (decoding is streamed: see [`for_each_interval`]).
    pub hlog: Option<Vec<u8>>,
    /// `scenario.yaml`.
    pub scenario: Option<String>,
    /// The results format version each whole file states (`meta.json`,
    /// `summary.json`), read before the file itself.
    pub versions: Vec<(&'static str, u64)>,
    /// What could not be read, for the report's notes.
    pub notes: Vec<String>,
}

impl RunFiles {
    /// Read `dir`.
    pub fn read(dir: &Path) -> Result<RunFiles, ReportError> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(ReportError::NotADirectory(dir.to_path_buf())),
            Err(e) => return Err(ReportError::Unreadable { path: dir.to_path_buf(), source: e }),
        }
        // An unreadable directory (permissions) shows up here rather than as
        // five missing files.
        std::fs::read_dir(dir).map_err(|e| ReportError::Unreadable { path: dir.to_path_buf(), source: e })?;
        let mut f = RunFiles {
            dir_name: dir
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_default(),
            ..RunFiles::default()
        };
        f.meta = f.json(dir, "meta.json");
        f.summary = f.json(dir, "summary.json");
        f.series = f.lines(dir, "series.jsonl");
        f.watch = f.lines(dir, "watch.jsonl");
        f.probe = f.lines(dir, "probe.jsonl");
        // Written by anyone who could write the directory: kept only as a
        // run would have written them (a merge prints them in its verdict).
        let events: Vec<ControlEvent> = f.lines(dir, crate::sink::EVENTS);
        let read = events.len();
        f.events = events.into_iter().filter_map(ControlEvent::checked).collect();
        if f.events.len() < read {
            f.notes.push(format!(
                "{}: {} line(s) that are no action left out",
                crate::sink::EVENTS,
                read - f.events.len()
            ));
        }
        f.hlog = f.bytes(dir, "latency.hlog");
        f.scenario = f.bytes(dir, "scenario.yaml").map(|b| String::from_utf8_lossy(&b).into_owned());
        f.failures = match &f.summary {
            Some(s) => s.failures.clone(),
            // Written with the seconds: what a killed run had failed, without a summary.
            None => f
                .bytes(dir, crate::failures::FAILURES_FILE)
                .map(|b| crate::failures::read_failures(&String::from_utf8_lossy(&b)))
                .unwrap_or_default(),
        };
        if f.series.is_empty() && f.summary.is_none() {
            if f.notes.is_empty() {
                return Err(ReportError::NothingToReport(dir.to_path_buf()));
            }
            return Err(ReportError::NothingReadable { path: dir.to_path_buf(), why: f.notes });
        }
        Ok(f)
    }

    fn bytes(&mut self, dir: &Path, name: &str) -> Option<Vec<u8>> {
        read_file(dir, name, &mut self.notes)
    }

    /// A whole file: its version first, then the file as `T`.
    fn json<T: DeserializeOwned>(&mut self, dir: &Path, name: &'static str) -> Option<T> {
        let bytes = self.bytes(dir, name)?;
        if !is_object(&bytes) {
            self.notes.push(format!("{name} is not a JSON object; ignored"));
            return None;
        }
        let header = match serde_json::from_slice::<Header>(&bytes) {
            Ok(h) => h,
            Err(e) if e.classify() == Category::Data => {
                self.notes.push(format!("{name} is not a JSON object; ignored"));
                return None;
            }
            Err(e) => {
                self.notes.push(format!("{name} is not valid JSON ({e}); ignored"));
                return None;
            }
        };
        if let Some(v) = header.version {
            self.versions.push((name, v));
        }
        match serde_json::from_slice::<T>(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                let newer = header.version.filter(|v| *v > u64::from(RESULTS_VERSION));
                self.notes.push(match newer {
                    Some(v) => format!(
                        "{name} is of results format version {v}, newer than this perfops reads ({RESULTS_VERSION}); ignored"
                    ),
                    None => format!("{name} is not what perfops writes ({e}); ignored"),
                });
                None
            }
        }
    }

    fn lines<T: DeserializeOwned>(&mut self, dir: &Path, name: &str) -> Vec<T> {
        let Some(bytes) = self.bytes(dir, name) else { return Vec::new() };
        let text = String::from_utf8_lossy(&bytes);
        let (lines, skipped) = json_lines(name, &text);
        self.notes.extend(skipped.notes(name));
        lines
    }
}

/// The bytes of `dir/name` (a results file, under its kind's cap): none when
/// it is not there; when it is there but cannot be read (refused by the
/// rule of [`perfops_core::input`], or unreadable), none and a note naming
/// it and why.
pub(crate) fn read_file(dir: &Path, name: &str, notes: &mut Vec<String>) -> Option<Vec<u8>> {
    match input::read(dir, Path::new(name), cap(name)) {
        Ok(b) => Some(b),
        Err(e) if e.is_not_found() => None,
        // The error names the file by its path; the notes name it by its name.
        Err(InputError::Io { source, .. }) => {
            notes.push(format!("{name} could not be read ({source})"));
            None
        }
        Err(e) => {
            notes.push(format!("{name} was not read: {e}"));
            None
        }
    }
}

/// The size cap of a results file, by its name.
fn cap(name: &str) -> Cap {
    match name {
        "latency.hlog" => Cap::RESULTS_HLOG,
        n if n.ends_with(".jsonl") => Cap::RESULTS_STREAM,
        _ => Cap::RESULTS_DOCUMENT,
    }
}

/// The lines of a JSON-lines file that do not read, counted, the first of
/// each kind named by its place in the file.
#[derive(Debug, Default)]
pub(crate) struct Skipped {
    /// Lines that are not JSON objects (not JSON, cut by a kill, an array).
    pub not_objects: usize,
    /// The first of them, `series.jsonl:3:37: what`.
    pub first_not_object: Option<String>,
    /// JSON objects that are not what perfops writes.
    pub unread: usize,
    /// The first of them, `series.jsonl:3:37: what`.
    pub first_unread: Option<String>,
}

impl Skipped {
    /// The notes to say, none when nothing was skipped.
    pub(crate) fn notes(&self, name: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if self.not_objects > 0 {
            let first = self.first_not_object.as_deref().unwrap_or_default();
            notes.push(format!(
                "{name}: {} line(s) that are not JSON objects were skipped (the first: {first})",
                self.not_objects
            ));
        }
        if self.unread > 0 {
            let first = self.first_unread.as_deref().unwrap_or_default();
            notes.push(format!(
                "{name}: {} line(s) that are not what perfops writes were skipped (the first: {first})",
                self.unread
            ));
        }
        notes
    }
}

/// Each line of `text` (the file `name`) that reads as `T`, and what was
/// skipped. Lines are numbered from 1 as an editor numbers them, blank lines
/// included, so that `series.jsonl:3:37` is the third line of the file and
/// the 37th character of it, whatever the parser calls it (for one line it
/// says "line 1").
pub(crate) fn json_lines<T: DeserializeOwned>(name: &str, text: &str) -> (Vec<T>, Skipped) {
    let mut skipped = Skipped::default();
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let number = i + 1;
        match serde_json::from_str::<T>(l) {
            // See `is_object`: `[]` would read as a line of defaults.
            Ok(_) if !is_object(l.as_bytes()) => {
                skipped.not_objects += 1;
                skipped.first_not_object.get_or_insert_with(|| {
                    let column = l.len() - l.trim_start().len() + 1;
                    format!("{name}:{number}:{column}: not a JSON object")
                });
            }
            Ok(v) => out.push(v),
            Err(e) if e.classify() == Category::Data && l.trim_start().starts_with('{') => {
                skipped.unread += 1;
                skipped.first_unread.get_or_insert_with(|| at(name, number, &e));
            }
            // Valid JSON but no object (`[]`, `3`): said as the arm above says it, whether
            // `T` refused it (a line with flattened fields reads maps only) or not.
            Err(e) if e.classify() == Category::Data => {
                skipped.not_objects += 1;
                skipped.first_not_object.get_or_insert_with(|| {
                    let column = l.len() - l.trim_start().len() + 1;
                    format!("{name}:{number}:{column}: not a JSON object")
                });
            }
            Err(e) => {
                skipped.not_objects += 1;
                skipped.first_not_object.get_or_insert_with(|| at(name, number, &e));
            }
        }
    }
    (out, skipped)
}

/// `series.jsonl:3:37: invalid type: ...`: the parser's error on line
/// `number` of the file, its message without its own "at line 1 column 37".
fn at(name: &str, number: usize, e: &serde_json::Error) -> String {
    let message = e.to_string();
    let own = format!(" at line {} column {}", e.line(), e.column());
    let message = message.strip_suffix(&own).unwrap_or(&message);
    format!("{name}:{number}:{}: {message}", e.column())
}

/// Whether `bytes` hold a JSON object (or start like one). Serde reads a
/// struct from an array too, field by field, and the lenient types (every
/// field defaulted) from `[]`: a `meta.json` or a series line damaged into
/// an array would read as one of defaults, a phantom second 0 (#12).
pub(crate) fn is_object(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().first() == Some(&b'{')
}

/// One histogram of `latency.hlog`.
pub(crate) struct Interval {
    /// `latency`, `service`, or another tag (`None`: untagged).
    pub tag: Option<String>,
    /// Offset from the run's start, seconds.
    pub start_s: f64,
    /// Values in microseconds.
    pub histogram: Histogram<u64>,
}

/// Call `f` with each interval of an HdrHistogram interval log, decoded one
/// at a time: an hour of seconds is thousands of histograms of ~200 KiB each,
/// too many to hold at once. Returns how many intervals could not be decoded.
///
/// Timestamps are taken relative to the log's `BaseTime` (as perfops writes
/// them); absolute ones (seconds since the epoch, as other writers do) are
/// made relative to `StartTime`.
pub(crate) fn for_each_interval(log: &[u8], mut f: impl FnMut(Interval)) -> usize {
    let mut start_time: Option<f64> = None;
    let mut bad = 0;
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(log) {
        match entry {
            Ok(LogEntry::StartTime(t)) => start_time = Some(t.as_secs_f64()),
            Ok(LogEntry::BaseTime(t)) => {
                start_time.get_or_insert(t.as_secs_f64());
            }
            Ok(LogEntry::Interval(iv)) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(iv.encoded_histogram())
                    .ok()
                    .and_then(|bytes| deserializer.deserialize::<u64, _>(&mut Cursor::new(bytes)).ok());
                let Some(histogram) = decoded else {
                    bad += 1;
                    continue;
                };
                let mut start_s = iv.start_timestamp().as_secs_f64();
                // Anything past a year is an absolute time, not an offset.
                if start_s > 365.0 * 86_400.0 {
                    start_s -= start_time.unwrap_or(start_s);
                }
                f(Interval { tag: iv.tag().map(|t| t.as_str().to_string()), start_s, histogram });
            }
            // A log cut mid-line by a kill: keep what came before.
            Err(_) => {
                bad += 1;
                break;
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each damaged line is named by its number in the file (blank lines
    /// counted, as an editor counts them) and its column in that line.
    #[test]
    fn damaged_lines_are_named_by_their_place_in_the_file() {
        // (the file, the notes it gives)
        let cases: [(&str, &[&str]); 5] = [
            // A good file: nothing to say.
            ("{\"t\": 0}\n{\"t\": 1}\n", &[]),
            // The third line holds a string where a number goes: line 3, not the parser's "line 1".
            (
                "{\"t\": 0}\n{\"t\": 1}\n{\"t\": 2, \"achieved_rate\": \"fast\"}\n",
                &["x.jsonl: 1 line(s) that are not what perfops writes were skipped (the first: \
                   x.jsonl:3:32: invalid type: string \"fast\", expected f64)"],
            ),
            // A line cut by a kill, after a blank line: line 4.
            (
                "{\"t\": 0}\n{\"t\": 1}\n\n{\"t\": 2, \"ach",
                &["x.jsonl: 1 line(s) that are not JSON objects were skipped (the first: \
                   x.jsonl:4:13: EOF while parsing a string)"],
            ),
            // An array where an object goes, indented: its first character.
            (
                "{\"t\": 0}\n  []\n",
                &[
                    "x.jsonl: 1 line(s) that are not JSON objects were skipped (the first: x.jsonl:2:3: not a JSON object)",
                ],
            ),
            // Two kinds, each named by its first.
            (
                "nonsense\n{\"t\": \"x\"}\n{\"t\": \"y\"}\n",
                &[
                    "x.jsonl: 1 line(s) that are not JSON objects were skipped (the first: x.jsonl:1:2: expected ident)",
                    "x.jsonl: 2 line(s) that are not what perfops writes were skipped (the first: \
                     x.jsonl:2:9: invalid type: string \"x\", expected u32)",
                ],
            ),
        ];
        for (text, want) in cases {
            let (lines, skipped) = json_lines::<SeriesLine>("x.jsonl", text);
            assert_eq!(skipped.notes("x.jsonl"), want, "{text:?}");
            assert_eq!(
                lines.len(),
                text.lines().filter(|l| l.starts_with("{\"t\": 0") || l.starts_with("{\"t\": 1")).count()
            );
        }
    }

    /// A results file that is a link out of the directory, or a FIFO, is
    /// left out and named with the rule; a directory left with nothing is
    /// an error that says why.
    #[test]
    fn refused_files_are_left_out_and_named() {
        let dir = std::env::temp_dir().join(format!("perfops-read-refused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/20261122T043000Z-orders-stepped");
        std::fs::copy(fixture.join("summary.json"), dir.join("summary.json")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("scenario.yaml")).unwrap();
        let made = std::process::Command::new("mkfifo").arg(dir.join("series.jsonl")).status().unwrap();
        assert!(made.success());
        let f = RunFiles::read(&dir).expect("summary.json is there");
        assert!(f.scenario.is_none(), "scenario.yaml was read through the link");
        assert!(
            f.notes.iter().any(|n| n.starts_with("scenario.yaml was not read: ") && n.contains("symbolic link")),
            "{:?}",
            f.notes
        );
        assert!(
            f.notes.iter().any(|n| n.starts_with("series.jsonl was not read: ") && n.contains("is a FIFO")),
            "{:?}",
            f.notes
        );
        std::fs::remove_file(dir.join("summary.json")).unwrap();
        let err = RunFiles::read(&dir).unwrap_err().to_string();
        assert!(err.contains("holds no results that can be read: ") && err.contains("is a FIFO"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
