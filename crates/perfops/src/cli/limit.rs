//! The flags of `perfops limit`.

use std::time::Duration;

use super::session::SessionFlags;
use super::shard::RefusedShardFlags;
use clap::Args;
use perfops_core::units::parse_duration;

/// Flags of `perfops limit`.
#[derive(Debug, Args)]
pub(crate) struct LimitFlags {
    #[command(flatten)]
    session: SessionFlags,
    #[command(flatten)]
    refused: RefusedShardFlags,
    /// First rate tried, arrivals/s (default: the scenario's first stage).
    #[arg(long)]
    from: Option<f64>,
    /// Never try above this rate.
    #[arg(long, default_value_t = 100_000.0)]
    max: f64,
    /// Each attempt holds its rate this long.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hold: Duration,
    /// Step-up factor until the first failure.
    #[arg(long, default_value_t = 2.0)]
    factor: f64,
    /// Stop bisecting when the failing rate is within this fraction above the holding one.
    #[arg(long, default_value_t = 0.05)]
    precision: f64,
    /// Give the target at most this long to recover between attempts.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    cooldown: Duration,
    /// At most this many attempts (the confirmation included).
    #[arg(long, default_value_t = 20)]
    attempts: usize,
}

impl From<LimitFlags> for perfops_run::limit::LimitArgs {
    fn from(f: LimitFlags) -> Self {
        Self {
            session: f.session.into(),
            refused: f.refused.into(),
            from: f.from,
            max: f.max,
            hold: f.hold,
            factor: f.factor,
            precision: f.precision,
            cooldown: f.cooldown,
            attempts: f.attempts,
        }
    }
}
