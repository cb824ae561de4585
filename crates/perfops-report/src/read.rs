//! Reading a results directory for the report, the comparison, the run
//! listing and `merge` ([`crate::parts::read_seconds`]), through the types
//! that wrote it: [`RunMeta`], [`RunSummary`] and [`SeriesLine`] from
//! `run.rs`, and [`WatchLine`] / [`ProbeLine`] for the watcher's streams.
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
//! It does not interpret what it reads: that is `html/model.rs`.

use std::collections::BTreeMap;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::results::RESULTS_VERSION;
use crate::run::{RunMeta, RunSummary, SeriesLine};

/// One line of `watch.jsonl`: the values read from one source at one time,
/// as the engine's `watch::Sample` writes it (perfops-report does not
/// depend on the engine, so the reader's type is declared here).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WatchLine {
    /// Seconds since the run's start.
    pub t: f64,
    /// `process`, `generator`, `prometheus <url>`, ...
    #[serde(default = "watch_source")]
    pub source: String,
    /// By metric name; null is a value that was not a finite number.
    #[serde(default)]
    pub values: BTreeMap<String, Option<f64>>,
}

fn watch_source() -> String {
    "watch".into()
}

/// One line of `probe.jsonl`: one probe check, as the engine's
/// `watch::ProbeResult` writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProbeLine {
    /// Seconds since the run's start.
    pub t: f64,
    /// `liveness` or `readiness`.
    #[serde(default = "probe_name")]
    pub probe: String,
    /// Answered 200..=399 within the timeout.
    #[serde(default)]
    pub ok: bool,
    /// The status, when a response came.
    #[serde(default)]
    pub status: Option<u16>,
    /// How long the check took, ms.
    #[serde(default)]
    pub ms: Option<f64>,
    /// Why it failed, short.
    #[serde(default)]
    pub error: Option<String>,
    /// Consecutive failures, this one included.
    #[serde(default)]
    pub failures: Option<u32>,
    /// Liveness: Kubernetes would restart the container now.
    #[serde(default)]
    pub restart: bool,
    /// Readiness: Kubernetes would stop sending it traffic.
    #[serde(default)]
    pub unready: bool,
}

fn probe_name() -> String {
    "probe".into()
}

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
    /// `series.jsonl`, one line per second.
    pub series: Vec<SeriesLine>,
    /// `watch.jsonl`, one line per sample of a source.
    pub watch: Vec<WatchLine>,
    /// `probe.jsonl`, one line per probe check.
    pub probe: Vec<ProbeLine>,
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
        let (mut not_objects, mut unread) = (0, Vec::new());
        let lines = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| match serde_json::from_str::<T>(l) {
                // See `is_object`: `[]` would read as a line of defaults.
                Ok(_) if !is_object(l.as_bytes()) => {
                    not_objects += 1;
                    None
                }
                Ok(v) => Some(v),
                Err(e) if e.classify() == Category::Data && l.trim_start().starts_with('{') => {
                    unread.push(e);
                    None
                }
                Err(_) => {
                    not_objects += 1;
                    None
                }
            })
            .collect();
        if not_objects > 0 {
            self.notes.push(format!("{name}: {not_objects} line(s) that are not JSON objects were skipped"));
        }
        if let Some(first) = unread.first() {
            self.notes.push(format!(
                "{name}: {} line(s) that are not what perfops writes were skipped (the first: {first})",
                unread.len()
            ));
        }
        lines
    }
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
