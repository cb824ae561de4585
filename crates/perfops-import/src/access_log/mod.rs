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
//! The log is read once, as a stream, into a tally whose every collection
//! has a cap (`tally.rs` says what happens past each); a 1 GB log costs the
//! memory of its distinct endpoints and clients in flight, not of its lines.

mod build;
pub mod endpoint;
pub mod line;
pub mod tally;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
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

/// Tally every line of `input` (gzip'd or not).
pub fn read(input: impl Read, options: &Options, limits: Limits) -> std::io::Result<tally::Tally> {
    let mut plain = BufReader::with_capacity(256 * 1024, input);
    let gzip = plain.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    let mut tally = tally::Tally::new(limits);
    if gzip {
        let mut inflated = BufReader::with_capacity(256 * 1024, flate2::bufread::MultiGzDecoder::new(plain));
        lines(&mut inflated, options, &mut tally, true)?;
    } else {
        lines(&mut plain, options, &mut tally, false)?;
    }
    tally.finish();
    Ok(tally)
}

/// Read lines of at most [`MAX_LINE_BYTES`] (a longer one is skipped as it
/// streams by, never held whole) into `tally`.
fn lines(r: &mut impl BufRead, options: &Options, tally: &mut tally::Tally, gzip: bool) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(4096);
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A gzip stream that ends early (a log copied while written) or
            // whose bytes are damaged: what came before it is kept, and said.
            Err(e) if gzip => {
                tally.cut_short =
                    Some(format!("the gzip stream is damaged or cut short after line {}: {e}", tally.lines));
                break;
            }
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if !line.is_empty() || too_long {
                one(&line, too_long, options, tally);
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
            one(&line, too_long, options, tally);
            line.clear();
            too_long = false;
        }
    }
    Ok(())
}

/// One line (without its `\n`).
fn one(bytes: &[u8], too_long: bool, options: &Options, tally: &mut tally::Tally) {
    tally.lines += 1;
    let n = tally.lines;
    if too_long {
        tally.skip(n, line::Skip::TooLong, &String::from_utf8_lossy(&bytes[..bytes.len().min(100)]));
        return;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        tally.skip(n, line::Skip::NotText, &String::from_utf8_lossy(&bytes[..bytes.len().min(100)]));
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
