//! `perfops report RUN_DIR` and `perfops runs`: glue between the command
//! line and `perfops_report::{html, runs}`, which read the results
//! directories. A missing or unreadable directory is an input error (exit 2).
//! A file of the directory that is not read (damaged, or refused: a link out
//! of the directory, a FIFO, over its size cap) is left out of the page and
//! named on stderr, escaped; the exit code stays 0 unless nothing is left.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use perfops_core::printable::escape;
use perfops_report::html::{self, ReportError};
use perfops_report::runs;

use crate::exit::{Exit, UsageError};

/// Flags of `perfops report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The results directory of a run (e.g. runs/20261122T043000Z-orders).
    run_dir: PathBuf,
    /// Where to write the HTML (default: RUN_DIR/report.html).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Flags of `perfops runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// The folder results directories are created in (`run --out`).
    #[arg(long, default_value = "runs")]
    dir: PathBuf,
    /// A JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Errors about the directory given are the user's to fix (exit 2).
fn usage(e: ReportError) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

pub(crate) fn report(args: ReportArgs) -> Result<Exit> {
    let (page, notes) = html::render_noting(&args.run_dir).map_err(usage)?;
    // Also in the page; here so that a file left out (a link out of the
    // directory, a FIFO) is not said only where nobody may look.
    for n in &notes {
        eprintln!("perfops: {}: {}", args.run_dir.display(), escape(n));
    }
    let out = args.output.unwrap_or_else(|| args.run_dir.join("report.html"));
    write_atomically(&out, page.as_bytes()).with_context(|| format!("writing {}", out.display()))?;
    perfops_run::say::out(&format!("{}\n", out.display()));
    Ok(Exit::Passed)
}

/// A temporary file beside `path`, then a rename: a browser reloading the
/// report never sees half of one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map_or_else(|| "report.html".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

pub(crate) fn list(args: RunsArgs) -> Result<Exit> {
    let found = runs::list(&args.dir).map_err(usage)?;
    // On stderr, so that stdout stays the table (or the JSON, which has them too).
    for r in &found {
        for n in &r.notes {
            eprintln!("perfops: {}: {}", escape(&r.path), escape(n));
        }
    }
    if args.json {
        perfops_run::say::out(&format!("{}\n", serde_json::to_string_pretty(&found)?));
    } else {
        perfops_run::say::out(&runs::table(&found));
    }
    Ok(Exit::Passed)
}
