//! What perfops concludes from what it measured, as pure functions of finished measurements:
//! numbers in, findings out.
//!
//! This module owns the arithmetic of the conclusions: whether each stage held and what the run's
//! capacity is ([`verdict`]), which rate `perfops limit` tries next and when its search is done
//! ([`capacity`]), whether the generator ran out of CPU ([`generator`], the one rule that
//! `quick`, the verdict and the diagnosis share), why a server broke ([`diagnose`]; an inference server's queue, [`inference`]), which rule
//! a failed stage's "why" names, with its cause ([`why`]: other diagnostics are findings), how a
//! system scales across a concurrency sweep ([`usl`], the Universal Scalability Law) and what the shape of a latency
//! distribution gives away ([`modes`]: its modes, and the quantized stalls of Nagle's algorithm
//! meeting delayed ACK). It does not own gathering the measurements (the engine does) nor wording
//! them for a reader beyond one line each (the report does); nothing here reads a clock or does
//! I/O, and every function returns an answer, or an error, for any input.

pub mod capacity;
pub mod diagnose;
pub mod generator;
pub mod inference;
pub mod modes;
pub mod usl;
pub mod verdict;
pub mod why;
