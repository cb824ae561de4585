//! The flags of `perfops sweep`.

use std::time::Duration;

use super::session::SessionFlags;
use super::shard::RefusedShardFlags;
use clap::Args;
use perfops_core::units::parse_duration;

/// Flags of `perfops sweep`.
#[derive(Debug, Args)]
pub(crate) struct SweepFlags {
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    refused: RefusedShardFlags,
    /// Concurrency levels (users looping request -> response), in order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10,20,50")]
    concurrency: Vec<u32>,
    /// How long each level runs.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hold: Duration,
}

impl From<SweepFlags> for perfops_run::sweep::SweepArgs {
    fn from(f: SweepFlags) -> Self {
        Self { session: f.session.into(), refused: f.refused.into(), concurrency: f.concurrency, hold: f.hold }
    }
}
