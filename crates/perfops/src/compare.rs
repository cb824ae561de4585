//! `perfops compare RUN_A RUN_B [...]`: glue between the command line and
//! `perfops_report::compare`. The text goes to stdout (or the JSON with
//! `--json`), the HTML page to `-o FILE` (default `compare.html` in the
//! current directory; `--no-html` for none), and where it went to stderr, so
//! stdout stays the comparison alone. A missing directory, one that is not a
//! results directory, or one of a newer results format is an input error
//! (exit 2); otherwise the exit code is 0: a comparison passes no judgement.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use perfops_report::compare::{self, CompareError, Options};

use crate::exit::{Exit, UsageError};
use crate::report::write_atomically;

/// Flags of `perfops compare`.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Results directories; the first is the baseline every delta is against.
    #[arg(value_name = "RUN_DIR", num_args = 2.., required = true)]
    runs: Vec<PathBuf>,
    /// The JSON of the comparison on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Where to write the HTML page.
    #[arg(short = 'o', long = "output", value_name = "FILE", default_value = "compare.html")]
    output: PathBuf,
    /// Write no HTML page.
    #[arg(long, conflicts_with = "output")]
    no_html: bool,
    /// Compare throughput at this p95, in ms (default: the baseline's SLO
    /// p95, else its p95 at its capacity stage).
    #[arg(long, value_name = "MS")]
    at_p95: Option<f64>,
}

pub(crate) fn run(args: CompareArgs) -> Result<Exit> {
    if let Some(l) = args.at_p95.filter(|l| !(l.is_finite() && *l > 0.0)) {
        return Err(UsageError(format!("--at-p95 {l}: give a latency in ms above 0")).into());
    }
    // Every error of loading is about the directories given.
    let runs = compare::load(&args.runs).map_err(|e: CompareError| anyhow::Error::new(UsageError(e.to_string())))?;
    let c = runs.compare(Options { at_p95_ms: args.at_p95 });
    if !args.no_html {
        let page = runs.html(&c);
        write_atomically(&args.output, page.as_bytes())
            .with_context(|| format!("writing {}", args.output.display()))?;
        eprintln!("perfops: comparison page written to {}", args.output.display());
    }
    if args.json {
        perfops_run::say::out(&format!("{}\n", serde_json::to_string_pretty(&c)?));
    } else {
        perfops_run::say::out(&compare::table(&c));
    }
    Ok(Exit::Passed)
}
