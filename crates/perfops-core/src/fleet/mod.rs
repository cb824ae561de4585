//! One run over many generators, the pure parts: what a coordinator and its
//! agents say to each other ([`wire`]: frames, control messages, one second
//! of measurements with its HDR histograms in the V2 deflate encoding), how
//! the coordinator reads an agent's clock ([`clock`]: NTP-style round trips,
//! the lowest round trips kept) and how it joins the agents' seconds into
//! the run's seconds ([`join`]: a state machine, second `k` is whole when
//! every live agent sent it; a lost agent is named and its missed seconds
//! marked).
//!
//! No sockets and no clock here: the binary's `fleet` module owns the
//! connections, the token proofs and the threads, and hands time in as
//! values. The merge of seconds is [`crate::measure::Stats::merge`], the
//! same associative merge that joins one machine's workers, so a second
//! merged from agents is the second one generator would have measured.

pub mod clock;
mod hdr;
pub mod join;
pub mod wire;
