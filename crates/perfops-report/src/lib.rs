//! perfops' outputs, from measured statistics to what people read: the live
//! line printed every second, the ab-style summary of `quick`, its JSON, the
//! results directory of a run, its JUnit verdict, the HTML report and run
//! listing made from such directories, the comparison of several runs, and the
//! generator's own metrics in the Prometheus text format (`--metrics-listen`);
//! the results writer and the live line are outputs ([`output::Output`]) of
//! the per-second pipeline, and [`detach`] runs a slow output off its thread.
//!
//! Formatting is pure; the only files read or written here are results
//! directories (`results`, `html`, `runs`, `compare`). Where text goes is the binary's
//! business.

pub mod compare;
pub mod detach;
pub mod exposition;
pub mod failures;
pub mod format;
pub mod html;
pub mod junit;
pub mod live;
pub mod lttb;
pub mod output;
pub mod parts;
pub mod push;
pub mod quick;
mod read;
pub mod results;
pub mod run;
pub mod runs;
pub mod sink;
mod sweep;
