//! What the measurements mean: verdicts per stage and for the run
//! ([`verdict`]), and why a server broke ([`diagnose`]). Pure functions of
//! figures the engine already measured; nothing here reads a clock or a socket.

pub mod diagnose;
pub mod verdict;
