//! The results directory of a run, written while the run goes.
//!
//! ```text
//! runs/20261122T043000Z-orders/
//!   meta.json        version, host, command, start time         (at start)
//!   scenario.yaml    the scenario, secrets redacted              (at start)
//!   series.jsonl     one JSON line per second                    (appended, flushed every second)
//!   latency.hlog     HdrHistogram interval log, tags latency, service and latency_ok (likewise)
//!   watch.jsonl      watched metrics, one line per sample        (appended, flushed per line)
//!   probe.jsonl      probe checks, one line per check            (likewise)
//!   summary.json     stages, verdict, diagnostics                (at the end, atomically)
//! ```
//!
//! Every second is flushed before the next one starts, so a killed run keeps
//! all its completed seconds; whole files (`meta.json`, `summary.json`) are
//! written to a temporary name and renamed, so a reader never sees half of one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use perfops_core::measure::Histogram;
use serde::Serialize;

/// Version of every file in a results directory.
///
/// 2 (#11): `latency_ms` and `service_ms` count every request that ended,
/// failures at the time they took; `latency_ok_ms` and `service_ok_ms` (and
/// the `latency_ok` tag of `latency.hlog`) hold the successes alone. In
/// version 1, `latency_ms` counted the answered requests (5xx included,
/// timeouts and refused connections not) and there was no `ok` figure: it
/// reads as absent (a count of 0, shown as "-").
pub const RESULTS_VERSION: u32 = 2;

/// An open results directory.
pub struct RunDir {
    path: PathBuf,
    series: BufWriter<File>,
    hlog: BufWriter<File>,
    serializer: V2DeflateSerializer,
    /// Other JSON-lines streams, opened on first use.
    streams: JsonLines,
}

/// JSON-lines files of one directory, each opened (for appending) on first
/// use and flushed after every line. Several may write one directory, each
/// its own files: the watch store its samples, the run its other streams.
pub struct JsonLines {
    dir: PathBuf,
    streams: Vec<(String, BufWriter<File>)>,
}

impl JsonLines {
    /// Streams in `dir`, none open yet.
    pub fn new(dir: &Path) -> JsonLines {
        JsonLines { dir: dir.to_path_buf(), streams: Vec::new() }
    }

    /// Append `line` to the file `name` (created on first use) and flush it.
    pub fn append(&mut self, name: &str, line: &impl Serialize) -> io::Result<()> {
        let i = match self.streams.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                let f = OpenOptions::new().create(true).append(true).open(self.dir.join(name))?;
                self.streams.push((name.to_string(), BufWriter::new(f)));
                self.streams.len() - 1
            }
        };
        let w = &mut self.streams[i].1;
        serde_json::to_writer(&mut *w, line).map_err(io::Error::other)?;
        w.write_all(b"\n")?;
        w.flush()
    }
}

impl RunDir {
    /// Create `base/<UTC stamp>-<name>/` (with a numeric suffix if it exists)
    /// and open the streams.
    pub fn create(base: &Path, name: &str, started: SystemTime) -> io::Result<RunDir> {
        fs::create_dir_all(base)?;
        let safe: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
        let stamp = utc_stamp(started);
        let mut path = base.join(format!("{stamp}-{safe}"));
        let mut n = 2;
        while let Err(e) = fs::create_dir(&path) {
            if e.kind() != io::ErrorKind::AlreadyExists || n > 999 {
                return Err(e);
            }
            path = base.join(format!("{stamp}-{safe}-{n}"));
            n += 1;
        }
        let open = |file: &str| OpenOptions::new().create_new(true).append(true).open(path.join(file));
        let series = BufWriter::new(open("series.jsonl")?);
        let mut hlog = BufWriter::new(open("latency.hlog")?);
        let since_epoch = started.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        writeln!(hlog, "#[perfops latency log, format version {RESULTS_VERSION}; values in microseconds]")?;
        writeln!(hlog, "#[StartTime: {since_epoch:.3} (seconds since epoch), {}]", utc_rfc3339(started))?;
        writeln!(hlog, "#[BaseTime: {since_epoch:.3} (seconds since epoch)]")?;
        writeln!(hlog, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
        hlog.flush()?;
        let streams = JsonLines::new(&path);
        Ok(RunDir { path, series, hlog, serializer: V2DeflateSerializer::new(), streams })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write a whole file atomically (temporary name, then rename).
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(format!(".{name}.tmp"));
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
        fs::rename(tmp, self.path.join(name))
    }

    /// Write `value` as pretty JSON to `name`, atomically.
    pub fn write_json(&self, name: &str, value: &impl Serialize) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        bytes.push(b'\n');
        self.write_file(name, &bytes)
    }

    /// Append `line` to the JSON-lines file `name` (created on first use) and flush it.
    pub fn append_jsonl(&mut self, name: &str, line: &impl Serialize) -> io::Result<()> {
        self.streams.append(name, line)
    }

    /// Append one second: a series line and its histograms, then flush both.
    pub fn append_second(
        &mut self,
        line: &impl Serialize,
        start: Duration,
        length: Duration,
        histograms: &[(&str, &Histogram)],
    ) -> io::Result<()> {
        serde_json::to_writer(&mut self.series, line).map_err(io::Error::other)?;
        self.series.write_all(b"\n")?;
        self.series.flush()?;
        {
            // A header-less writer per call: the headers went out at creation.
            let mut log = IntervalLogWriterBuilder::new().begin_log_with(&mut self.hlog, &mut self.serializer)?;
            for (tag, h) in histograms {
                if h.is_empty() {
                    continue;
                }
                log.write_histogram(h.inner(), start, length, Tag::new(tag))
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
        }
        self.hlog.flush()
    }
}

/// `20261122T043000Z`
pub fn utc_stamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// `2026-11-22T04:30:00Z`
pub fn utc_rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// UTC calendar fields of `t` (Howard Hinnant's civil-from-days).
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),           // the epoch
            (951_782_400, "2000-02-29T00:00:00Z"), // a leap day
            (1_795_321_800, "2026-11-22T04:30:00Z"),
        ];
        for (secs, want) in cases {
            assert_eq!(utc_rfc3339(UNIX_EPOCH + Duration::from_secs(secs)), want);
        }
        assert_eq!(utc_stamp(UNIX_EPOCH + Duration::from_secs(1_795_321_800)), "20261122T043000Z");
    }

    #[test]
    fn seconds_are_on_disk_as_soon_as_they_are_appended() {
        let base = std::env::temp_dir().join(format!("perfops-results-{}", std::process::id()));
        let mut dir = RunDir::create(&base, "a b/c", UNIX_EPOCH + Duration::from_secs(1_795_321_800)).unwrap();
        assert!(dir.path().ends_with("20261122T043000Z-a-b-c"), "{}", dir.path().display());
        let mut h = Histogram::new();
        h.record(Duration::from_millis(12));
        dir.append_second(&serde_json::json!({"t": 0}), Duration::ZERO, Duration::from_secs(1), &[("latency", &h)])
            .unwrap();
        // Read while the writer is still open, as `perfops report` would after a kill.
        let series = fs::read_to_string(dir.path().join("series.jsonl")).unwrap();
        assert_eq!(series, "{\"t\":0}\n");
        let hlog = fs::read(dir.path().join("latency.hlog")).unwrap();
        let lines: Vec<_> = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&hlog)
            .filter_map(|l| match l {
                Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(i)) => {
                    Some(i.tag().map(|t| t.as_str().to_string()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(lines, vec![Some("latency".to_string())]);
        dir.write_json("summary.json", &serde_json::json!({"ok": true})).unwrap();
        assert!(dir.path().join("summary.json").exists());
        fs::remove_dir_all(base).unwrap();
    }
}
