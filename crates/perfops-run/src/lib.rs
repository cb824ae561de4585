//! perfops' runs as a library: everything between a command's flags and its
//! exit code. A [`session`] opens a scenario (its inputs, the demo target,
//! the setup, a results directory, the watchers) and runs loads against it;
//! [`launch`] starts the engine; [`conclude`] judges what a load measured and
//! writes the summary; [`run`], [`limit`], [`sweep`] and [`quick`] are the
//! commands that put load on a target; [`shard`] and [`merge`] split a run
//! over machines and join their results; [`fleet`] is the live coordinator
//! and its agents; [`k8s`] writes the manifests that start them.
//!
//! The `perfops` binary is a thin layer over this crate: clap's flags (each
//! command's `*Args` here is what its flags parse into), the help pages, and
//! the exit codes ([`exit::Exit`]). The pure parts (scenarios, load models,
//! measures, judging) are `perfops_core`'s, the hot path `perfops_engine`'s,
//! the files and renderings `perfops_report`'s. docs/architecture.md draws
//! the crates and their seams.
//!
//! Errors are `anyhow` chains: each says to a person what failed and where
//! (a file, a flag, a peer); an error in what the user gave is marked
//! [`exit::UsageError`] (exit 2), anything else is a runtime failure.

/// Say a note to the person running it: `note!("started {x}")` is the line
/// `perfops: started ...` (see [`say`]).
macro_rules! note {
    ($($arg:tt)*) => { $crate::say::tell(&format!("perfops: {}\n", format_args!($($arg)*))) };
}

/// Say a line as it is, with its newline (see [`say`]).
macro_rules! tell {
    ($($arg:tt)*) => { $crate::say::tell(&format!("{}\n", format_args!($($arg)*))) };
}

pub mod conclude;
pub mod control;
pub mod ctl;
pub mod debug;
pub mod demo;
pub mod exit;
pub mod fleet;
pub mod k8s;
pub mod launch;
pub mod limit;
pub mod live;
pub mod loading;
pub mod merge;
pub mod outputs;
pub mod quick;
pub mod run;
pub mod say;
mod scripts;
pub mod session;
pub mod shard;
pub mod shipped;
pub mod source;
pub mod sweep;
pub mod watching;

#[cfg(test)]
mod loads_test;
