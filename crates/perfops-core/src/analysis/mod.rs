//! What perfops concludes from what it measured, as pure functions of finished measurements:
//! numbers in, findings out.
//!
//! This module owns the arithmetic of the conclusions: how a system scales across a concurrency
//! sweep ([`usl`], the Universal Scalability Law) and what the shape of a latency distribution
//! gives away ([`modes`]: its modes, and the quantized stalls of Nagle's algorithm meeting
//! delayed ACK). It does not own gathering the measurements (the engine does) nor wording the
//! findings for a reader (the report does); nothing here reads a clock or does I/O, and every
//! function returns an answer, or an error, for any input.

pub mod modes;
pub mod usl;
