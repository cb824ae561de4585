//! The flags of `perfops merge`.

use std::path::PathBuf;

use clap::Args;

/// Flags of `perfops merge`.
#[derive(Debug, Args)]
pub(crate) struct MergeFlags {
    /// The shards' results directories (of `perfops run --shard I/N`).
    #[arg(required = true, value_name = "SHARD_DIR")]
    dirs: Vec<PathBuf>,
    /// The results directory to write (created; if it exists, it must be empty).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Also write each SLO line per stage as a JUnit test case to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

impl From<MergeFlags> for perfops_run::merge::MergeArgs {
    fn from(f: MergeFlags) -> Self {
        Self { dirs: f.dirs, out: f.out, junit: f.junit }
    }
}
