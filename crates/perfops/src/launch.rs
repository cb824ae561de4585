//! What every command that puts load on a target sets up the same way
//! (`quick`, and the session behind `run`, `limit` and `sweep`): the engine's
//! [`Plan`] (written here once), the stop flag that SIGINT and SIGTERM set,
//! whether the live line shows and in colour, and the engine run whose
//! seconds go through a [`Pipeline`] of sinks.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use perfops_core::model::{LoadModel, Shard};
use perfops_core::pipeline::{Measured, Pipeline};
use perfops_engine::{Outcome, Plan, Target, Work};

/// What every load of one command shares.
#[derive(Debug, Clone)]
pub(crate) struct PlanBase {
    pub(crate) target: Target,
    /// Whole-request timeout (connect included).
    pub(crate) timeout: Duration,
    /// Connect (and TLS handshake) timeout.
    pub(crate) connect_timeout: Duration,
    /// Accept any TLS certificate.
    pub(crate) insecure: bool,
    /// Worker threads; 0 = one per available core.
    pub(crate) workers: usize,
}

impl PlanBase {
    /// The plan of `load` doing `work`: one stage, no stop but the load's
    /// own, the whole schedule, started as soon as the workers are ready.
    /// Callers set what differs (`stage_ends`, `duration`, `start_at`...).
    pub(crate) fn plan(&self, work: Arc<Work>, load: LoadModel) -> Plan {
        Plan {
            target: self.target.clone(),
            work,
            stage_ends: Vec::new(),
            load,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            insecure: self.insecure,
            workers: self.workers,
            shard: Shard::WHOLE,
            start_at: None,
        }
    }
}

/// The stop flag: the first Ctrl-C (or SIGTERM) sets it, so the load stops
/// and what was measured is kept; a second one exits at once (130). Also
/// raises the open-files limit: every in-flight request may need a socket.
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    perfops_engine::raise_fd_limit();
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())
            .context("installing signal handlers")?;
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    Ok(stop)
}

/// The live line: shown on a terminal unless `--quiet`; in colour unless
/// `NO_COLOR` is set (to anything but the empty string).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terminal {
    pub(crate) live: bool,
    pub(crate) color: bool,
}

impl Terminal {
    pub(crate) fn new(quiet: bool) -> Terminal {
        let live = !quiet && std::io::stderr().is_terminal();
        Terminal { live, color: live && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }
}

/// Run `plan` on this machine's engine, each second through `pipeline`,
/// whose notices (an abort, a failed sink) go to stderr as they happen.
pub(crate) fn run(plan: &Plan, stop: Arc<AtomicBool>, mut pipeline: Pipeline<'_>) -> Result<(Outcome, Measured)> {
    let outcome = perfops_engine::run(plan, stop, |iv| pipeline.second(iv, &mut |n| eprintln!("perfops: {n}")))?;
    Ok((outcome, pipeline.finish()))
}
