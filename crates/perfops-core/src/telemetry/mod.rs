//! What perfops reads about the target while it runs, as pure parsers: text in, values out.
//!
//! This module owns the *meaning* of the texts the engine collects: a Prometheus exposition
//! ([`prometheus`]), a Prometheus server's answer to a PromQL query ([`promql`]), the kernel's view
//! of a local process and its listen socket ([`procfs`]), and
//! the sock_diag netlink answer that is the only place the kernel reports a listen socket's
//! accept-queue maximum ([`sockdiag`]); and the lines perfops writes of what it watched,
//! `watch.jsonl` and `probe.jsonl` ([`watched`]), one type for the writer and every reader. It
//! does not own reading them: no file is opened, no socket
//! is made and no clock is read here; the engine fetches the bytes on its own schedule and passes
//! them in, with the time it took them where a rate needs one. Every parser returns an error (or a
//! warning) for input it does not understand and never panics, whatever the input; property tests
//! say so.

pub mod procfs;
pub mod prometheus;
pub mod promql;
pub mod sockdiag;
pub mod watched;
