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
//!   failures.jsonl   failing exchanges, the first few of each step and kind (appended with their second)
//!   events.jsonl     actions by hand (stop, hold, next, rate), one line each, as in the second
//!                    they took effect (absent: none, and in results from before control)
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
use perfops_core::measure::{Histogram, SampleBound};
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
    /// The samples `failures.jsonl` has taken, over every load of the run.
    pub(crate) failures: SampleBound,
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
        RunDir::open(path, started)
    }

    /// Create the directory `path` itself (`merge --out DIR`); one that
    /// exists must be empty, so no run's results are mixed with another's.
    pub fn create_at(path: &Path, started: SystemTime) -> io::Result<RunDir> {
        match fs::create_dir(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if fs::read_dir(path)?.next().is_some() {
                    return Err(io::Error::new(io::ErrorKind::AlreadyExists, "it exists and is not empty"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir_all(path)?,
            Err(e) => return Err(e),
        }
        RunDir::open(path.to_path_buf(), started)
    }

    /// Open the streams of the new directory `path`.
    fn open(path: PathBuf, started: SystemTime) -> io::Result<RunDir> {
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
        Ok(RunDir {
            path,
            series,
            hlog,
            serializer: V2DeflateSerializer::new(),
            streams,
            failures: SampleBound::default(),
        })
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

/// `2026-11-22T04:30:00.250Z`: to the millisecond, for instants that several
/// generators share (`--start-at`, a shard's start in `meta.json`).
pub fn utc_rfc3339_ms(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_millis());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// An instant written as RFC 3339 (`2026-11-22T04:30:00Z`, with fractions
/// and an offset `+02:00` if need be) or as seconds since the Unix epoch
/// (`1795321800.25`). `None`: neither, or before the epoch.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| UNIX_EPOCH + Duration::from_secs_f64(secs));
    }
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(&x.to_ascii_uppercase()));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"T ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d, h, mi, s) = (num(0, 4)?, num(5, 2)?, num(8, 2)?, num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u64;
    if sep(i, b".") {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let frac = &text[i + 1..i + 1 + digits.min(9)];
        nanos = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
        i += 1 + digits;
    }
    let offset_s = match text.get(i..)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && (tz.starts_with('+') || tz.starts_with('-')) && sep(i + 3, b":") => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + s - offset_s;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
}

/// Days since the epoch of a UTC calendar date (Howard Hinnant's days-from-civil).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn times_are_read_as_rfc_3339_or_unix_seconds() {
        let at = |secs: f64| Some(UNIX_EPOCH + Duration::from_secs_f64(secs));
        // (text, instant)
        let cases = [
            ("2026-11-22T04:30:00Z", at(1_795_321_800.0)),      // plain UTC
            ("2026-11-22T04:30:00.250Z", at(1_795_321_800.25)), // milliseconds, as meta.json writes
            ("2026-11-22 04:30:00.5z", at(1_795_321_800.5)),    // a space and a lower-case z
            ("2026-11-22T06:30:00+02:00", at(1_795_321_800.0)), // an offset east of UTC
            ("2026-11-22T00:30:00-04:00", at(1_795_321_800.0)), // and west
            ("2000-02-29T00:00:00Z", at(951_782_400.0)),        // a leap day
            ("1795321800", at(1_795_321_800.0)),                // unix seconds
            ("1795321800.125", at(1_795_321_800.125)),          // with fractions
            ("2026-11-22T04:30:00", None),                      // no offset: ambiguous
            ("2026-13-22T04:30:00Z", None),                     // month 13
            ("2026-11-22T04:30:00.Z", None),                    // a point without digits
            ("tomorrow", None),                                 // not a time
            ("-5", None),                                       // before the epoch
        ];
        for (text, want) in cases {
            assert_eq!(parse_time(text), want, "{text}");
        }
        let t = UNIX_EPOCH + Duration::from_millis(1_795_321_800_250);
        assert_eq!(utc_rfc3339_ms(t), "2026-11-22T04:30:00.250Z");
        assert_eq!(parse_time(&utc_rfc3339_ms(t)), Some(t), "what is written reads back");
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
