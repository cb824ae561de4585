//! `--output jsonl=-` (standard output) or `--output jsonl=FILE`: the run as
//! JSON lines, each with a `"type"`:
//!
//! ```text
//!   {"type":"start","meta":{...meta.json...}}
//!   {"type":"second","t":0,"stage":"warm","sent":100,"completed":100,...}   one per second,
//!   ...                                                                     as series.jsonl's lines
//!   {"type":"failure","step":"orders","kind":"http_4xx","request":...}     a failing exchange kept
//!                                                                          in that second, as
//!                                                                          failures.jsonl's lines
//!   {"type":"finish","summary":{...summary.json, or quick's --json...}}
//! ```
//!
//! The example of an output: this file and its line in the registry. A
//! reader of the pipe may stop reading and leave it full, so it is written
//! through `Detached`, on a thread of its own: a slow reader costs seconds
//! dropped (said at the end), never the run's measurement. On standard
//! output the end-of-run text goes to stderr, so that the stream is JSON
//! lines alone.

use std::fs::File;
use std::io::{BufWriter, Write};

use perfops_core::pipeline::{Second, SinkError};
use perfops_report::detach::{CAPACITY, Detached, Whole};
use perfops_report::failures::FailureLine;
use perfops_report::output::{End, Output};
use perfops_report::run::{RunMeta, SeriesLine};
use perfops_report::sink::series_line;
use serde::Serialize;

/// Writes each line to `out`, flushed: a reader sees each second as it ends.
struct Jsonl<W: Write> {
    out: W,
    /// The reader went away (`| head`): it has what it wanted, and the run
    /// goes on, as a closed stdout ends nothing else.
    closed: bool,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line<'a> {
    Start { meta: &'a RunMeta },
    Second(&'a SeriesLine),
    Failure(&'a FailureLine),
    Finish { summary: &'a End<'a> },
}

impl<W: Write> Jsonl<W> {
    fn write(&mut self, line: &Line<'_>) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        let mut text = serde_json::to_vec(line).map_err(|e| SinkError(e.to_string()))?;
        text.push(b'\n');
        match self.out.write_all(&text).and_then(|()| self.out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            result => result.map_err(|e| SinkError(e.to_string())),
        }
    }
}

impl<W: Write> Output for Jsonl<W> {
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        self.write(&Line::Start { meta })
    }

    /// On its own thread, from the adapter's copy of the second: the line's
    /// figures (percentiles of every step) cost as much as the copy, and
    /// are not the collector's to compute.
    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        self.write(&Line::Second(&series_line(second)))?;
        // The exchanges the workers kept in this second (few: the first of each step and kind).
        for (key, samples) in second.interval.samples.iter() {
            for sample in samples {
                self.write(&Line::Failure(&FailureLine::of(second.step_names, key, sample)))?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        self.write(&Line::Finish { summary: end })
    }
}

/// `jsonl=-` or `jsonl=FILE`.
pub(crate) const ENTRY: super::Entry = super::Entry {
    name: "jsonl",
    help: "jsonl=-|FILE: one JSON object per second, with a start and a finish line",
    make,
    arg: super::Arg::File,
};

/// `jsonl=-` or `jsonl=FILE` (created, or emptied).
fn make(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let detach = |inner| Detached::new("jsonl", Whole(inner), CAPACITY).map_err(|e| e.to_string());
    match arg {
        None | Some("") => Err("say where: jsonl=- (standard output) or jsonl=FILE".into()),
        Some("-") => {
            crate::say::results_to_tell();
            Ok(Box::new(detach(Jsonl { out: Box::new(std::io::stdout()) as Box<dyn Write + Send>, closed: false })?))
        }
        Some(path) => {
            let file = File::create(path).map_err(|e| format!("cannot create {path}: {e}"))?;
            Ok(Box::new(detach(Jsonl { out: Box::new(BufWriter::new(file)) as Box<dyn Write + Send>, closed: false })?))
        }
    }
}
