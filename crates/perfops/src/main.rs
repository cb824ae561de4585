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

mod cli;
mod compare;
mod console;
mod help;
mod import;
mod reference;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use perfops_run::exit::{self, Exit, UsageError};
use perfops_run::{fleet, k8s};

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
    Run(cli::run::RunFlags),
    /// Find the highest arrival rate that meets the scenario's SLO, and why it breaks above it.
    #[command(after_help = help::LIMIT)]
    Limit(cli::limit::LimitFlags),
    /// Closed-model sweep over concurrency levels, with a Universal Scalability Law fit.
    #[command(after_help = help::SWEEP)]
    Sweep(cli::sweep::SweepFlags),
    /// Run a scenario's setup once and write what it saved (for `run --setup-values` on every shard).
    #[command(after_help = help::SETUP)]
    Setup(cli::shard::SetupFlags),
    /// One run over N agents: live merge of their seconds, global SLO and abort, one results directory.
    #[command(after_help = help::COORDINATOR)]
    Coordinator(cli::fleet_coordinator::CoordinatorFlags),
    /// A generator of a coordinated run: `perfops agent --join https://COORDINATOR:7070`.
    #[command(after_help = help::AGENT)]
    Agent(cli::fleet_agent::AgentFlags),
    /// Validate scenario files only; every error with file:line:column and a hint.
    #[command(after_help = help::CHECK)]
    Check(cli::run::CheckFlags),
    /// One URL, ab/hey/oha style: `perfops quick -c 50 -d 10s URL` (closed) or `-r 500` (open).
    #[command(after_help = help::QUICK)]
    Quick(cli::quick::QuickFlags),
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
    Merge(cli::merge::MergeFlags),
    /// The built-in target server (what `target: demo:threads` starts).
    #[command(after_help = help::DEMO)]
    Demo(cli::demo::DemoFlags),
    /// Print the JSON Schema of scenario files (for editor completion), or its Markdown reference.
    #[command(after_help = help::SCHEMA)]
    Schema(reference::SchemaArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    #[command(after_help = help::COMPLETIONS)]
    Completions(help::CompletionsArgs),
    /// Print the man page (roff), of perfops or of one command.
    #[command(after_help = help::MAN)]
    Man(help::ManArgs),
    /// A scenario from real traffic: `perfops import access-log FILE` or `perfops import har FILE`.
    #[command(after_help = help::IMPORT)]
    Import(cli::import::ImportFlags),
    /// Steer a live run (one started with --live): `perfops ctl 127.0.0.1:5665 stop|hold|next|rate 300`.
    #[command(after_help = help::CTL)]
    Ctl(cli::ctl::CtlFlags),
    /// Kubernetes manifests for a distributed run (coordinator + N agents), and the kubectl commands to drive it.
    #[command(after_help = help::K8S)]
    K8s(cli::k8s::K8sFlags),
    /// A folder as a tar archive on stdout (results out of the shell-less image, through `kubectl exec`).
    #[command(hide = true)]
    Tar(cli::k8s_tar::TarFlags),
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
    perfops_run::say::set_console(Box::new(console::Terminal));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => perfops_run::run::run(args.into()),
        Command::Limit(args) => perfops_run::limit::run(args.into()),
        Command::Sweep(args) => perfops_run::sweep::run(args.into()),
        Command::Coordinator(args) => fleet::coordinator::run(args.into()),
        Command::Agent(args) => fleet::agent::run(args.into()),
        Command::Check(args) => perfops_run::run::check(args.into()),
        Command::Setup(args) => perfops_run::shard::setup(args.into()),
        Command::Quick(args) => perfops_run::quick::run(args.into()),
        Command::Report(args) => report::report(args),
        Command::Runs(args) => report::list(args),
        Command::Compare(args) => compare::run(args),
        Command::Merge(args) => perfops_run::merge::run(args.into()),
        Command::Demo(args) => perfops_run::demo::run(args.into()),
        Command::K8s(args) => k8s::run(args.into()),
        Command::Import(args) => import::run(args),
        Command::Ctl(args) => perfops_run::ctl::run(args.into()),
        Command::Tar(args) => k8s::tar::run(args.into()),
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
