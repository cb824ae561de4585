//! The flags of `perfops coordinator`.

use std::path::PathBuf;
use std::time::Duration;

use super::session::SessionFlags;
use clap::Args;
use perfops_core::units::parse_duration;

/// Flags of `perfops coordinator`.
#[derive(Debug, Args)]
pub(crate) struct CoordinatorFlags {
    #[command(flatten)]
    session: SessionFlags,
    /// How many agents run the load; each runs 1/N of it.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    agents: u32,
    /// Where agents join (`perfops agent --join https://THIS`; the channel is always TLS).
    #[arg(long, default_value = "0.0.0.0:7070", value_name = "ADDR")]
    listen: String,
    /// The shared secret, at least 128 bits (`openssl rand -hex 16`; else the environment
    /// variable PERFOPS_TOKEN; neither: one is generated and printed once). Never sent, only proved.
    #[arg(long, env = "PERFOPS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Refuse an agent whose clock is further off than this.
    #[arg(long, value_parser = parse_duration, default_value = "20ms")]
    max_clock_offset: Duration,
    /// Wait this long for every agent; then exit 3 naming the missing shards.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    join_timeout: Duration,
    /// An agent silent this long during the load is lost.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    agent_timeout: Duration,
    /// Serve agents with this certificate chain (PEM; agents verify it with --tls-ca); without it,
    /// a self-signed certificate made at start, its SHA-256 fingerprint printed.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl From<CoordinatorFlags> for perfops_run::fleet::coordinator::CoordinatorArgs {
    fn from(f: CoordinatorFlags) -> Self {
        Self {
            session: f.session.into(),
            agents: f.agents,
            listen: f.listen,
            token: f.token,
            max_clock_offset: f.max_clock_offset,
            join_timeout: f.join_timeout,
            agent_timeout: f.agent_timeout,
            tls_cert: f.tls_cert,
            tls_key: f.tls_key,
        }
    }
}
