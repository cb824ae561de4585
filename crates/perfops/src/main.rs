//! The `perfops` command: flags, commands and live progress. Glue only: the
//! work is in `perfops-core`, `perfops-engine` and `perfops-report`.
//!
//! Exit codes: 0 passed, 1 thresholds failed (for `quick`: more failed
//! requests than `--max-errors` allows), 2 usage or input error, 3 runtime
//! failure. A closed stdout (broken pipe) exits 0.

#![allow(clippy::print_stdout, clippy::print_stderr)]

/// mimalloc keeps freed blocks for reuse. With glibc's allocator, the five
/// 188 KiB histograms made for every second and key were mmap'd and munmap'd
/// each time: ~0.8 ms of page faults and TLB shootdowns per second that, with
/// the generator pinned to one core, stalled the worker mid-measurement
/// (visible as p99.9 and max). Measured: the collector's per-second work
/// went from ~850 µs to ~60 µs.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod compare;
mod conclude;
mod debug;
mod demo;
mod exit;
mod fleet;
mod help;
mod k8s;
mod launch;
mod limit;
mod loading;
mod merge;
mod metrics;
mod protos;
mod quick;
mod reference;
mod report;
mod run;
mod session;
mod shard;
mod sweep;
mod watching;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use exit::{Exit, UsageError};

/// How much traffic does one instance of your HTTP service hold, where does it
/// break, and why.
#[derive(Debug, Parser)]
#[command(name = "perfops", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario's load profile; results go to runs/<time>-<name>/.
    #[command(after_help = help::RUN)]
    Run(run::RunArgs),
    /// Find the highest arrival rate that meets the scenario's SLO, and why it breaks above it.
    #[command(after_help = help::LIMIT)]
    Limit(limit::LimitArgs),
    /// Closed-model sweep over concurrency levels, with a Universal Scalability Law fit.
    #[command(after_help = help::SWEEP)]
    Sweep(sweep::SweepArgs),
    /// Run a scenario's setup once and write what it saved (for `run --setup-values` on every shard).
    #[command(after_help = help::SETUP)]
    Setup(shard::SetupArgs),
    /// One run over N agents: live merge of their seconds, global SLO and abort, one results directory.
    #[command(after_help = help::COORDINATOR)]
    Coordinator(fleet::coordinator::CoordinatorArgs),
    /// A generator of a coordinated run: `perfops agent --join https://COORDINATOR:7070`.
    #[command(after_help = help::AGENT)]
    Agent(fleet::agent::AgentArgs),
    /// Validate scenario files only; every error with file:line:column and a hint.
    #[command(after_help = help::CHECK)]
    Check(run::CheckArgs),
    /// One URL, ab/hey/oha style: `perfops quick -c 50 -d 10s URL` (closed) or `-r 500` (open).
    #[command(after_help = help::QUICK)]
    Quick(quick::QuickArgs),
    /// (Re)render the HTML report of a results directory: RUN_DIR/report.html, or -o FILE.
    #[command(after_help = help::REPORT)]
    Report(report::ReportArgs),
    /// List the runs under a results folder, newest first, with verdict and capacity.
    #[command(after_help = help::RUNS)]
    Runs(report::RunsArgs),
    /// Runs side by side, the first as baseline: capacity, throughput at equal p95, per-stage deltas; HTML with overlaid charts.
    #[command(after_help = help::COMPARE)]
    Compare(compare::CompareArgs),
    /// Merge the results of `run --shard I/N` on several machines into one results directory, exactly.
    #[command(after_help = help::MERGE)]
    Merge(merge::MergeArgs),
    /// The built-in target server (what `target: demo:threads` starts).
    #[command(after_help = help::DEMO)]
    Demo(demo::DemoArgs),
    /// Print the JSON Schema of scenario files (for editor completion), or its Markdown reference.
    #[command(after_help = help::SCHEMA)]
    Schema(reference::SchemaArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    #[command(after_help = help::COMPLETIONS)]
    Completions(help::CompletionsArgs),
    /// Print the man page (roff), of perfops or of one command.
    #[command(after_help = help::MAN)]
    Man(help::ManArgs),
    /// Kubernetes manifests for a distributed run (coordinator + N agents), and the kubectl commands to drive it.
    #[command(after_help = help::K8S)]
    K8s(k8s::K8sArgs),
    /// A folder as a tar archive on stdout (results out of the shell-less image, through `kubectl exec`).
    #[command(hide = true)]
    Tar(k8s::tar::TarArgs),
}

fn main() -> ExitCode {
    // No transparent huge pages for this process (and the demo it may start).
    // mimalloc asks for them on its arenas, and the first touch of each one
    // zeroes 2 MiB at once: a fault of ~1 ms on whichever thread touched it,
    // often a worker mid-run, charged to the server as latency; and a huge
    // page stays resident while any object in it lives. Measured on the soak's
    // scenario at 5,000/s (bench/surge.sh): RSS 54 -> 36 MiB before any surge.
    // Failing only costs that.
    let _ = nix::sys::prctl::set_thp_disable(true);
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Limit(args) => limit::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Coordinator(args) => fleet::coordinator::run(args),
        Command::Agent(args) => fleet::agent::run(args),
        Command::Check(args) => run::check(args),
        Command::Setup(args) => shard::setup(args),
        Command::Quick(args) => quick::run(args),
        Command::Report(args) => report::report(args),
        Command::Runs(args) => report::list(args),
        Command::Compare(args) => compare::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Demo(args) => demo::run(args),
        Command::K8s(args) => k8s::run(args),
        Command::Tar(args) => k8s::tar::run(args),
        Command::Schema(args) => reference::run(args),
        Command::Completions(args) => help::completions(args),
        Command::Man(args) => help::man(args),
    };
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            // Input errors carry their own exit code; anything else is a runtime failure.
            let code = e.downcast_ref::<UsageError>().map_or(Exit::Runtime, |_| Exit::Usage);
            // Errors quote names and lines from files: no terminal escape gets through (#31).
            eprintln!("perfops: {}", perfops_core::printable::lines(&format!("{e:#}")));
            ExitCode::from(code as u8)
        }
    }
}
