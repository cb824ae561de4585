//! The flags of `perfops agent`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use perfops_core::units::parse_duration;

/// Flags of `perfops agent`.
#[derive(Debug, Args)]
pub(crate) struct AgentFlags {
    /// The coordinator: `https://HOST:PORT` or `HOST:PORT` (the channel is always TLS).
    #[arg(long, value_name = "URL")]
    join: String,
    /// The shared secret, as the coordinator has it (else the environment variable PERFOPS_TOKEN);
    /// never sent, only proved.
    #[arg(long, env = "PERFOPS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The shard this agent claims (else JOB_COMPLETION_INDEX; else the first free one).
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    index: Option<u32>,
    /// Keep trying to reach the coordinator this long.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    connect_timeout: Duration,
    /// Verify the coordinator's certificate chain and host name against this CA (PEM); without it,
    /// the certificate is taken unverified and the token handshake (bound to the TLS session)
    /// proves the coordinator.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// A name for the coordinator's logs and results (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Tests only: pretend this machine's wall clock is off by this many milliseconds.
    #[arg(long, hide = true, allow_negative_numbers = true)]
    clock_offset_for_tests: Option<i64>,
    /// Benchmarks only (bench/fleet.sh): also append every second sent to FILE, as wire frames.
    #[arg(long, hide = true, value_name = "FILE")]
    record_seconds: Option<PathBuf>,
    /// Benchmarks and tests only: send no request; replay the seconds of FILE (made with
    /// --record-seconds; one per second, in a loop, for the load's duration) or of a shard's
    /// results directory (each once).
    #[arg(long, hide = true, value_name = "FILE|DIR")]
    replay_seconds: Option<PathBuf>,
}

impl From<AgentFlags> for perfops_run::fleet::agent::AgentArgs {
    fn from(f: AgentFlags) -> Self {
        Self {
            join: f.join,
            token: f.token,
            index: f.index,
            connect_timeout: f.connect_timeout,
            tls_ca: f.tls_ca,
            name: f.name,
            clock_offset_for_tests: f.clock_offset_for_tests,
            record_seconds: f.record_seconds,
            replay_seconds: f.replay_seconds,
        }
    }
}
