//! Reading a results directory for the report, leniently: every file is
//! optional and read as generic JSON, so one report reads the directories of
//! older and newer perfops versions alike. A missing file or field means "not
//! available"; a line that is not JSON (a run killed mid-write) is skipped and
//! said in the report's notes. Only a directory with nothing to report in it
//! is an error.
//!
//! It does not interpret what it reads: that is `model.rs`.

use std::io::{self, Cursor};
use std::path::Path;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::Value;

use super::ReportError;

/// Everything a results directory holds, as read.
#[derive(Debug, Default)]
pub(crate) struct RunFiles {
    /// The directory's own name (`20261122T043000Z-orders`), never its path:
    /// a shared report must not leak where it was made.
    pub dir_name: String,
    /// `meta.json` (`Null` when missing).
    pub meta: Value,
    /// `summary.json`: absent while a run goes and after a kill.
    pub summary: Option<Value>,
    /// `series.jsonl`, one object per second.
    pub series: Vec<Value>,
    /// `watch.jsonl`, one object per sample of a source.
    pub watch: Vec<Value>,
    /// `probe.jsonl`, one object per probe attempt.
    pub probe: Vec<Value>,
    /// `latency.hlog`, undecoded (decoding is streamed: see [`for_each_interval`]).
    pub hlog: Option<Vec<u8>>,
    /// `scenario.yaml`.
    pub scenario: Option<String>,
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
        f.meta = f.json(dir, "meta.json").unwrap_or(Value::Null);
        f.summary = f.json(dir, "summary.json");
        f.series = f.lines(dir, "series.jsonl");
        f.watch = f.lines(dir, "watch.jsonl");
        f.probe = f.lines(dir, "probe.jsonl");
        f.hlog = f.bytes(dir, "latency.hlog");
        f.scenario = f.bytes(dir, "scenario.yaml").map(|b| String::from_utf8_lossy(&b).into_owned());
        if f.series.is_empty() && f.summary.is_none() {
            return Err(ReportError::NothingToReport(dir.to_path_buf()));
        }
        Ok(f)
    }

    fn bytes(&mut self, dir: &Path, name: &str) -> Option<Vec<u8>> {
        match std::fs::read(dir.join(name)) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.notes.push(format!("{name} could not be read ({e})"));
                None
            }
        }
    }

    fn json(&mut self, dir: &Path, name: &str) -> Option<Value> {
        let bytes = self.bytes(dir, name)?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                self.notes.push(format!("{name} is not a JSON object; ignored"));
                None
            }
            Err(e) => {
                self.notes.push(format!("{name} is not valid JSON ({e}); ignored"));
                None
            }
        }
    }

    fn lines(&mut self, dir: &Path, name: &str) -> Vec<Value> {
        let Some(bytes) = self.bytes(dir, name) else { return Vec::new() };
        let text = String::from_utf8_lossy(&bytes);
        let mut bad = 0;
        let lines = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| match serde_json::from_str::<Value>(l) {
                Ok(v) if v.is_object() => Some(v),
                _ => {
                    bad += 1;
                    None
                }
            })
            .collect();
        if bad > 0 {
            self.notes.push(format!("{name}: {bad} line(s) that are not JSON objects were skipped"));
        }
        lines
    }
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
