//! The flags of `perfops k8s tar`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use perfops_core::units::parse_duration;

/// Flags of `perfops tar`.
#[derive(Debug, Args)]
pub(crate) struct TarFlags {
    /// The folder whose contents to archive.
    dir: PathBuf,
    /// Write nothing: wait this long, or until SIGTERM, for `kubectl exec
    /// POD -- perfops tar DIR` (the main process of the fetch pod).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    hold: Option<Duration>,
}

impl From<TarFlags> for perfops_run::k8s::tar::TarArgs {
    fn from(f: TarFlags) -> Self {
        Self { dir: f.dir, hold: f.hold }
    }
}
