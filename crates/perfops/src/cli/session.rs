//! The flags of `perfops session`.

use std::path::PathBuf;

use clap::Args;
use perfops_core::scenario::Override;

/// Flags shared by `run`, `limit` and `sweep`.
#[derive(Debug, Args)]
pub(crate) struct SessionFlags {
    /// The scenario file (YAML).
    scenario: PathBuf,
    /// Override a field before validation, e.g. `--set load.max_in_flight=100` or
    /// `--set 'slo=[p95 < 300ms]'` (a YAML flow list or mapping replaces the whole field; repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<Override>,
    /// Override the scenario's target (a URL, or demo:threads / demo:async).
    #[arg(long)]
    target: Option<String>,
    /// Where results directories are created.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// Worker threads (default: one per available core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Accept any TLS certificate.
    #[arg(short = 'k', long)]
    insecure: bool,
    /// No live line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Also write each SLO line per stage as a JUnit test case to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    #[command(flatten)]
    outputs: super::outputs::OutputFlags,
    /// At the end of each load, and after Ctrl-C, wait for the requests in
    /// flight (each within the scenario's timeout) instead of cutting them and
    /// counting them as `cut`.
    #[arg(long, alias = "wait-ongoing-requests-after-deadline")]
    wait_in_flight: bool,
}

impl From<SessionFlags> for perfops_run::session::SessionArgs {
    fn from(f: SessionFlags) -> Self {
        Self {
            scenario: f.scenario,
            set: f.set,
            target: f.target,
            out: f.out,
            workers: f.workers,
            insecure: f.insecure,
            quiet: f.quiet,
            junit: f.junit,
            outputs: f.outputs.into(),
            wait_in_flight: f.wait_in_flight,
        }
    }
}
