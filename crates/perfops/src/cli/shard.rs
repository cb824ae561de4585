//! The flags of `perfops shard`.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::Args;
use perfops_core::model::Shard;
use perfops_core::scenario::Override;
use perfops_run::shard::{parse_shard, parse_start};

/// `--shard`, `--start-at` and `--setup-values` (`perfops run` only).
#[derive(Debug, Args)]
pub(crate) struct ShardFlags {
    /// Run part I of N of the load (0 <= I < N): open-model arrival k is shard
    /// k mod N's, closed-model users and max_in_flight are divided exactly.
    /// Merge the shards' results with `perfops merge`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<Shard>,
    /// Start the schedule at this wall-clock instant (RFC 3339, e.g.
    /// 2026-11-24T18:00:00Z, or unix seconds), the same for every shard. A
    /// start already past sends at once what is due in the stage under way,
    /// latency from when it was due; stages already over are not sent.
    #[arg(long, value_name = "TIME", value_parser = parse_start)]
    start_at: Option<SystemTime>,
    /// Skip the scenario's setup and use the values it saved, from FILE (a
    /// JSON object, as `perfops setup --out FILE` writes it).
    #[arg(long, value_name = "FILE")]
    setup_values: Option<PathBuf>,
}

impl From<ShardFlags> for perfops_run::shard::ShardArgs {
    fn from(f: ShardFlags) -> Self {
        Self { shard: f.shard, start_at: f.start_at, setup_values: f.setup_values }
    }
}

/// The same flags, hidden, in commands that refuse them (`limit`, `sweep`):
/// a clear usage error rather than clap's "unexpected argument".
#[derive(Debug, Args)]
pub(crate) struct RefusedShardFlags {
    #[arg(long, value_name = "I/N", hide = true)]
    shard: Option<String>,
    #[arg(long, value_name = "TIME", hide = true)]
    start_at: Option<String>,
    #[arg(long, value_name = "FILE", hide = true)]
    setup_values: Option<PathBuf>,
}

impl From<RefusedShardFlags> for perfops_run::shard::RefusedShardArgs {
    fn from(f: RefusedShardFlags) -> Self {
        Self { shard: f.shard, start_at: f.start_at, setup_values: f.setup_values }
    }
}

/// Flags of `perfops setup`.
#[derive(Debug, Args)]
pub(crate) struct SetupFlags {
    /// The scenario file (YAML).
    scenario: PathBuf,
    /// Where to write what the setup saved (JSON, mode 0600: it holds tokens).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Override a field before validation (repeatable), as for `run`.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    /// Override the scenario's target (a URL).
    #[arg(long)]
    target: Option<String>,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
}

impl From<SetupFlags> for perfops_run::shard::SetupArgs {
    fn from(f: SetupFlags) -> Self {
        Self { scenario: f.scenario, out: f.out, set: f.set, target: f.target, insecure: f.insecure }
    }
}
