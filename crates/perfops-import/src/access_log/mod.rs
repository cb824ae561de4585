//! `perfops import access-log FILE`: a service's access log becomes a
//! scenario that reproduces its workload.
//!
//! ```text
//!   file ──(gzip? by its magic bytes)──> lines (capped at 64 KiB each)
//!        ──line.rs──> Record | Skip(reason)          one line at a time
//!        ──tally.rs─> endpoints, samples, seconds,   bounded: see Limits
//!                     sessions in flight, shapes
//!        ──build.rs─> Draft + CSV feeders + summary
//! ```
//!
//! What the scenario says, and where it comes from:
//! - **endpoints**: method + path with its identifiers templated
//!   (`endpoint.rs`); each one's values (and query strings) from the log go
//!   to a CSV feeder beside the scenario;
//! - **flows**: the sessions of a client (its hashed `Authorization` value
//!   when the log has one, else address + user agent), a session ending at a
//!   gap longer than `session_gap`; the most frequent session shapes of 2 to
//!   8 requests become flows, with the mean gaps as pauses, and every other
//!   request is a single-request flow of its endpoint. Every request of the
//!   log is in exactly one flow, so each endpoint's share of the requests
//!   is the log's;
//! - **weights**: the count of each flow's sessions (or requests), reduced
//!   by their common divisor, so `1 POST /auth : 1000 GET /orders` comes out
//!   as it was;
//! - **stages**: the log's mean rate and its busiest second, as arrivals
//!   per second (a flow of 3 requests is one arrival), times `scale`.
//!
//! With `replay` (`--replay FILE`), the scenario is instead one
//! single-request flow per endpoint and a replay load, and a second pass
//! over the log writes every request as a row of the replay file
//! (`replay.rs`: the time order, its window, the columns).
//!
//! The log is read once, as a stream, into a tally whose every collection
//! has a cap (`tally.rs` says what happens past each); a 1 GB log costs the
//! memory of its distinct endpoints and clients in flight, not of its lines.

mod build;
pub mod endpoint;
pub mod line;
pub mod replay;
pub mod tally;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::Duration;

pub use line::{FieldMap, Format};
pub use tally::Limits;

use crate::{ImportError, Imported};

/// The longest line read; a longer one is skipped (and counted) without being held.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What `perfops import access-log` is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The scenario's `name:` (default: the log file's name without its extensions).
    pub name: Option<String>,
    /// `target:` (the log does not say which host it served).
    pub target: String,
    /// The line format.
    pub format: Format,
    /// JSON lines' field names.
    pub fields: FieldMap,
    /// The stages' rates are the log's times this.
    pub scale: f64,
    /// A gap longer than this ends a client's session.
    pub session_gap: Duration,
    /// Keep query strings (as a feeder column, the values from the log); else drop them.
    pub keep_query: bool,
    /// Headers sent with every request (templates as given: `Authorization: Bearer ${env.TOKEN}`).
    pub headers: Vec<(String, String)>,
    /// The CSV feeders' file names start with this (the scenario file's stem).
    pub data_prefix: String,
    /// Flows written at most (the least frequent endpoints past it are left out, and said so).
    pub max_flows: usize,
    /// `--replay`: the replay file's name (beside the scenario); the scenario
    /// replays it, one single-request flow per endpoint (`replay.rs`).
    pub replay: Option<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            name: None,
            target: "http://127.0.0.1:8080".into(),
            format: Format::Auto,
            fields: FieldMap::default(),
            scale: 1.0,
            session_gap: Duration::from_secs(60),
            keep_query: true,
            headers: Vec::new(),
            data_prefix: "scenario".into(),
            max_flows: 100,
            replay: None,
        }
    }
}

/// Read the log at `path` into a scenario.
pub fn import(path: &Path, options: &Options) -> Result<Imported, ImportError> {
    let read_err = |source| ImportError::Read { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(read_err)?;
    let limits = Limits {
        session_gap_us: i64::try_from(options.session_gap.as_micros()).unwrap_or(i64::MAX),
        ..Limits::default()
    };
    let tally = read(file, options, limits).map_err(read_err)?;
    let file_name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    build::build(&tally, options, &file_name)
}

/// Read the log at `path` into a scenario that replays it, and its requests
/// into `out` as a replay file (format 1; see `replay.rs`). The log is read
/// twice: once for its endpoints (the flows and the file's columns), once for
/// the rows, so that neither pass holds its lines.
pub fn import_replay(
    path: &Path,
    options: &Options,
    out: impl Write,
) -> Result<(Imported, replay::Written), ImportError> {
    let read_err = |source| ImportError::Read { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(read_err)?;
    let limits = Limits {
        session_gap_us: i64::try_from(options.session_gap.as_micros()).unwrap_or(i64::MAX),
        ..Limits::default()
    };
    let tally = read(file, options, limits).map_err(read_err)?;
    let file_name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let (mut imported, plan) = build::build_replay(&tally, options, &file_name)?;
    let file = File::open(path).map_err(read_err)?;
    let written = write_rows(file, options, &plan, out).map_err(|e| match e {
        RowsError::Read(source) => read_err(source),
        RowsError::Write(e) => ImportError::Replay(e.to_string()),
    })?;
    imported.summary.push(format!(
        "replay: {} rows over {}; {} lines out of order by more than the {} s window left out{}",
        written.rows,
        build::fmt_span(f64::from(written.last_ms) / 1000.0),
        written.out_of_order,
        replay::WINDOW_US / 1_000_000,
        if written.untracked > 0 {
            format!(", {} requests of endpoints without a flow", written.untracked)
        } else {
            String::new()
        }
    ));
    Ok((imported, written))
}

enum RowsError {
    Read(std::io::Error),
    Write(replay::WriteError),
}

/// The second pass of [`import_replay`]: every request of `input` as a row.
fn write_rows(
    input: impl Read,
    options: &Options,
    plan: &replay::Plan,
    out: impl Write,
) -> Result<replay::Written, RowsError> {
    let mut w = replay::Writer::new(out, &plan.columns).map_err(|e| RowsError::Write(e.into()))?;
    let mut failed = None;
    let mut each = |bytes: &[u8], too_long: bool| {
        if too_long || failed.is_some() {
            return;
        }
        let Ok(text) = std::str::from_utf8(bytes) else { return };
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            return;
        }
        let Ok(r) = line::parse(text, options.format, &options.fields) else { return };
        let (parts, values) = endpoint::template(&r.path);
        let Some(route) = plan.routes.get(&(r.method, parts)) else {
            w.written.untracked += 1;
            return;
        };
        let mut cells: Vec<(usize, &str)> = route.holes.iter().zip(&values).map(|(c, v)| (*c, v.as_str())).collect();
        let query = route.query.map(|c| (c, replay::without_credentials(&r.query)));
        if let Some((c, q)) = &query {
            cells.push((*c, q.as_str()));
        }
        if let Err(e) = w.push(r.time_us, &route.flow, &cells) {
            failed = Some(e);
        }
    };
    stream(input, &mut each).map_err(RowsError::Read)?;
    if let Some(e) = failed {
        return Err(RowsError::Write(e));
    }
    let (_, written) = w.finish().map_err(RowsError::Write)?;
    Ok(written)
}

/// Every line of `input` (gzip'd or not) to `each`; a gzip stream damaged or
/// cut short ends it, and its error is returned (what came before is read).
fn stream(input: impl Read, each: &mut impl FnMut(&[u8], bool)) -> std::io::Result<Option<std::io::Error>> {
    let mut plain = BufReader::with_capacity(256 * 1024, input);
    let gzip = plain.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    if gzip {
        let mut inflated = BufReader::with_capacity(256 * 1024, flate2::bufread::MultiGzDecoder::new(plain));
        lines(&mut inflated, each, true)
    } else {
        lines(&mut plain, each, false)
    }
}

/// Tally every line of `input` (gzip'd or not).
pub fn read(input: impl Read, options: &Options, limits: Limits) -> std::io::Result<tally::Tally> {
    let mut tally = tally::Tally::new(limits);
    let cut = stream(input, &mut |bytes, too_long| one(bytes, too_long, options, &mut tally))?;
    if let Some(e) = cut {
        tally.cut_short = Some(format!("the gzip stream is damaged or cut short after line {}: {e}", tally.lines));
    }
    tally.finish();
    Ok(tally)
}

/// Read lines of at most [`MAX_LINE_BYTES`] (a longer one is skipped as it
/// streams by, never held whole) into `each` (the line, and whether it was too long).
fn lines(
    r: &mut impl BufRead,
    each: &mut impl FnMut(&[u8], bool),
    gzip: bool,
) -> std::io::Result<Option<std::io::Error>> {
    let mut line = Vec::with_capacity(4096);
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A gzip stream that ends early (a log copied while written) or
            // whose bytes are damaged: what came before it is kept, and said.
            Err(e) if gzip => return Ok(Some(e)),
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if !line.is_empty() || too_long {
                each(&line, too_long);
            }
            break;
        }
        let (take, end) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if line.len() + take > MAX_LINE_BYTES {
            too_long = true;
        } else {
            line.extend_from_slice(&chunk[..take]);
        }
        r.consume(take + usize::from(end));
        if end {
            each(&line, too_long);
            line.clear();
            too_long = false;
        }
    }
    Ok(None)
}

/// One line (without its `\n`).
fn one(bytes: &[u8], too_long: bool, options: &Options, tally: &mut tally::Tally) {
    tally.lines += 1;
    let n = tally.lines;
    // Bytes that are not text are shown escaped (`\xff`), never as they are.
    let excerpt = || bytes[..bytes.len().min(60)].escape_ascii().to_string();
    if too_long {
        tally.skip(n, line::Skip::TooLong, &excerpt());
        return;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        tally.skip(n, line::Skip::NotText, &excerpt());
        return;
    };
    let text = text.trim_end_matches('\r');
    if text.trim().is_empty() {
        return;
    }
    match line::parse(text, options.format, &options.fields) {
        Ok(r) => tally.add(r),
        Err(skip) => tally.skip(n, skip, text),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn clf(t: i64, client: u32, request: &str, status: u16) -> String {
        let secs = t.rem_euclid(60);
        let mins = t / 60;
        format!(
            "10.0.0.{client} - - [29/Nov/2026:08:{mins:02}:{secs:02} +0000] \"{request} HTTP/1.1\" {status} 12 \"-\" \"agent {client}\""
        )
    }

    /// A log of 1 login per 1000 order lists from many clients (each
    /// client's requests far apart: every one its own session): the import
    /// finds both endpoints, the 1:1000 weights, the mean and the peak.
    fn thousand_to_one() -> String {
        let mut lines = Vec::new();
        for i in 0..20_020i64 {
            let request = if i % 1001 == 0 { "POST /auth" } else { "GET /orders" };
            // 40 requests a second, 100 in second 300
            let t = if (12_000..12_100).contains(&i) {
                300
            } else if i < 12_000 {
                i / 40
            } else {
                i / 40 + 1
            };
            lines.push(clf(t, (i % 200) as u32 + 1, request, 200));
        }
        lines.join("\n")
    }

    fn import_text(text: &[u8], o: &Options) -> Result<Imported, ImportError> {
        let gap = i64::try_from(o.session_gap.as_micros()).expect("a short gap");
        let tally = read(text, o, Limits { session_gap_us: gap, ..Limits::default() }).expect("in memory");
        build::build(&tally, o, "test.log")
    }

    fn weights(d: &crate::Draft) -> Vec<(String, u64)> {
        d.flows.iter().map(|f| (f.name.clone(), f.weight)).collect()
    }

    /// The 1:1000 ratio is found, and the scenario passes perfops' decoder.
    #[test]
    fn ratio_found() {
        let imported = import_text(thousand_to_one().as_bytes(), &Options::default()).expect("imported");
        assert_eq!(weights(&imported.draft), vec![("GET /orders".into(), 1000), ("POST /auth".into(), 1)]);
        let yaml = imported.draft.render();
        perfops_core::scenario::parse("imported.yaml", &yaml, &[]).unwrap_or_else(|e| panic!("{yaml}\n{e}"));
        let stages = &imported.draft.load.as_ref().expect("load").stages;
        // 20,020 requests from second 0 to second 501; 100 in the busiest
        assert!(
            matches!(stages[0].kind, crate::draft::StageKind::Hold { rate, .. } if (rate - 20_019.0 / 501.0).abs() < 1e-9)
        );
        assert!(matches!(stages[2].kind, crate::draft::StageKind::Hold { rate, .. } if rate == 100.0));
    }

    /// `--scale 3` triples both rates and nothing else.
    #[test]
    fn scale() {
        let o = Options { scale: 3.0, ..Options::default() };
        let imported = import_text(thousand_to_one().as_bytes(), &o).expect("imported");
        let stages = &imported.draft.load.as_ref().expect("load").stages;
        assert!(matches!(stages[2].kind, crate::draft::StageKind::Hold { rate, .. } if rate == 300.0));
        assert_eq!(weights(&imported.draft)[1].1, 1);
    }

    /// Sessions: clients that log in, list and open an order, with ~2 s
    /// between, become one flow of three steps with those pauses; the ids
    /// are a feeder with the logged values, the query a column.
    #[test]
    fn sessions_become_flows() {
        let mut lines = Vec::new();
        for c in 0..30i64 {
            let t = c * 120; // two minutes apart: separate sessions
            lines.push(clf(t, c as u32, "POST /auth", 200));
            lines.push(clf(t + 2, c as u32, "GET /orders?page=1", 200));
            lines.push(clf(t + 4, c as u32, &format!("GET /orders/{}", 1000 + c), 200));
        }
        let imported = import_text(
            lines.join("\n").as_bytes(),
            &Options { session_gap: Duration::from_secs(60), ..Options::default() },
        )
        .expect("imported");
        let d = &imported.draft;
        assert_eq!(d.flows.len(), 1, "{}", d.render());
        let f = &d.flows[0];
        assert_eq!(f.steps.len(), 3);
        assert_eq!(f.steps[0].pause, Some(Duration::from_secs(2)));
        assert_eq!(f.steps[1].path.as_template(), "/orders?${orders.query}");
        assert_eq!(f.steps[2].path.as_template(), "/orders/${orders_id.id}");
        let ids = imported.files.iter().find(|f| f.name == "scenario-orders_id.csv").expect("the ids' feeder");
        assert!(ids.text.starts_with("id\n1000\n1001\n"), "{}", ids.text);
        perfops_core::scenario::parse("imported.yaml", &d.render(), &[]).expect("valid");
    }

    /// A query parameter named like a credential never reaches a feeder or
    /// the summary: its name is said, its value is nowhere.
    #[test]
    fn credentials_in_queries_are_left_out() {
        let lines = [
            clf(0, 1, "GET /search?q=shoes&access_token=s3cr3t-1", 200),
            clf(1, 2, "GET /search?apiKey=s3cr3t-2&q=hats", 200),
            clf(2, 3, "GET /search?q=socks", 200),
        ];
        let imported = import_text(lines.join("\n").as_bytes(), &Options::default()).expect("imported");
        let feeder = &imported.files[0].text;
        assert_eq!(feeder, "query\nq=shoes\nq=hats\nq=socks\n");
        let said = imported.summary.join("\n");
        assert!(said.contains("access_token, apiKey") && said.contains("in 2 requests"), "{said}");
        let all = format!("{said}{}{feeder}", imported.draft.render());
        assert!(!all.contains("s3cr3t"), "{all}");
    }

    /// `--replay`: one flow per endpoint, a replay load, and every request a
    /// row in time order (the log's slightly late lines put in their place),
    /// the ids as a column; the file is what `run` reads, the scenario what
    /// `check` reads; no credential reaches either.
    #[test]
    fn replay_file() {
        let lines = [
            clf(0, 1, "POST /auth", 200),
            clf(2, 2, "GET /orders/17?page=1&access_token=s3cr3t", 200),
            clf(1, 3, "GET /orders/42", 200), // logged late (a slow response): written before
            clf(3, 1, "GET /health", 200),
        ];
        let dir = std::env::temp_dir().join(format!("perfops-import-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("access.log");
        std::fs::write(&log, lines.join("\n")).expect("written");
        let o = Options { replay: Some("rec.csv".into()), ..Options::default() };
        let mut out = Vec::new();
        let (imported, written) = import_replay(&log, &o, &mut out).expect("imported");
        std::fs::remove_dir_all(&dir).expect("removed");
        let text = String::from_utf8(out).expect("text");
        assert_eq!(
            text,
            "# perfops replay v1\noffset_ms,flow,id,query\n0,POST /auth,,\n1000,GET /orders/{id},42,\n\
             2000,GET /orders/{id},17,page=1\n3000,GET /health,,\n"
        );
        assert_eq!((written.rows, written.out_of_order), (4, 0));
        let flows: Vec<&str> = imported.draft.flows.iter().map(|f| f.name.as_str()).collect();
        perfops_core::model::replay::Recording::parse(&text, &flows).expect("run reads it");
        let yaml = imported.draft.render();
        assert!(yaml.contains("model: replay\n  file: \"rec.csv\""), "{yaml}");
        assert!(yaml.contains("/orders/${replay.id}?${replay.query}"), "{yaml}");
        assert!(imported.files.is_empty());
        perfops_core::scenario::parse("imported.yaml", &yaml, &[]).unwrap_or_else(|e| panic!("{yaml}\n{e}"));
        assert!(!format!("{yaml}{text}").contains("s3cr3t"));
    }

    /// Bad input, each a count with examples or a clear error, never a panic.
    #[test]
    fn bad_input() {
        let good = clf(0, 1, "GET /a", 200);
        // (what, bytes, Ok(skipped lines) or Err(part of the message))
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(thousand_to_one().as_bytes()).expect("in memory");
        let gz = gz.finish().expect("in memory");
        let cases: Vec<(&str, Vec<u8>, Result<u64, &str>)> = vec![
            // binary garbage: nothing read, the error says what was seen
            (
                "garbage",
                (0..50_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
                Err("no line is an access-log request"),
            ),
            // an empty file
            ("empty", Vec::new(), Err("no line is an access-log request")),
            // a line in an unknown format among good ones
            ("unknown line", format!("{good}\nsyslog: hello\n{good}\n").into_bytes(), Ok(1)),
            // a line of 100 KiB without a break, then a good one
            ("too long", format!("{}\n{good}", "x".repeat(100 * 1024)).into_bytes(), Ok(1)),
            // the whole gzip'd log
            ("gzip", gz.clone(), Ok(0)),
            // the same, cut in the middle: the lines before the cut are read, and it says so
            ("truncated gzip", gz[..gz.len() / 2].to_vec(), Ok(0)),
        ];
        for (what, bytes, want) in cases {
            match (import_text(&bytes, &Options::default()), want) {
                (Ok(i), Ok(skipped)) => {
                    let said = i.summary.join("\n");
                    assert!(said.contains(&format!("{skipped} not read")), "{what}: {said}");
                    if what == "truncated gzip" {
                        assert!(said.contains("cut short"), "{what}: {said}");
                    }
                }
                (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{what}: {e}"),
                (got, want) => panic!("{what}: got {:?}, want {want:?}", got.map(|i| i.summary)),
            }
        }
    }
}
