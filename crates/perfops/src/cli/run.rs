//! The flags of `perfops run`.

use std::path::PathBuf;

use super::session::SessionFlags;
use super::shard::ShardFlags;
use clap::Args;
use perfops_core::scenario::Override;

/// Flags of `perfops run`.
#[derive(Debug, Args)]
pub(crate) struct RunFlags {
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    shard: ShardFlags,
    /// Run setup, then each flow once (one arrival per flow, in file order,
    /// no load model) and print every exchange: the request, the response
    /// (the first KiB of each body), each check and save with expected vs
    /// found, the time; secrets redacted. Writes no results. Exit 0 when
    /// every exchange passed its checks, 1 otherwise (k6's
    /// `--iterations 1 --http-debug`).
    #[arg(long)]
    debug: bool,
    /// Go on when the first seconds find the target down (every connection
    /// refused or timed out, none answered); by default the run stops there
    /// and exits 3.
    #[arg(long)]
    keep_going: bool,
}

impl From<RunFlags> for perfops_run::run::RunArgs {
    fn from(f: RunFlags) -> Self {
        Self { session: f.session.into(), shard: f.shard.into(), debug: f.debug, keep_going: f.keep_going }
    }
}

/// Flags of `perfops check`.
#[derive(Debug, Args)]
pub(crate) struct CheckFlags {
    /// Scenario files to validate.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Check with this field overridden, as `run --set` would run it
    /// (repeatable; applied to every file).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    /// Check with this target, as `run --target` would run it.
    #[arg(long)]
    target: Option<String>,
}

impl From<CheckFlags> for perfops_run::run::CheckArgs {
    fn from(f: CheckFlags) -> Self {
        Self { files: f.files, set: f.set, target: f.target }
    }
}
