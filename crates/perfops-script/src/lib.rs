//! perfops' JavaScript hatch: what a scenario's YAML cannot say (a signature over the body and a
//! timestamp, a next step chosen from the last answer, a value computed from several saved
//! ones), said in a script file the scenario names.
//!
//! What this crate owns: the engine (QuickJS through `rquickjs`), the sandbox, the standard
//! library, the typed calls of the hooks and their errors. What it does not: the scenario's
//! syntax, `check`, when the engine calls which hook, shipping files to agents (the engine and
//! the scenario crates). No tokio, no sockets, nothing that prints.
//!
//! ```text
//!   scenario load          Scripts::compile(files) ── every file's error at file:line:column
//!        │                        │  (Send + Sync: the sources, shared by every worker)
//!   each worker thread     Runtime::new(&scripts, limits, stream_seed(run, shard, worker), clock)
//!        │                        │  (one QuickJS runtime per worker, not per user)
//!   each flow instance     FlowState { vars, arrival, rows }   (owned by the caller)
//!        │
//!   its steps              runtime.before_request(hook, &mut state, &mut request)
//!                          runtime.after_response(hook, &mut state, response) -> Verdict
//!                          runtime.step(hook, &mut state) -> StepOutcome { next }
//!   once                   runtime.setup(hook, &mut state)
//!   each second            runtime.take_spent()  -> the scripts' share of the worker's CPU
//!   --debug                runtime.take_log()    -> what the scripts' console.log wrote
//! ```
//!
//! A hostile script ends in a typed [`ScriptError`] and the runtime stays usable: an endless
//! loop is interrupted at [`Limits::call_time`] ([`ScriptError::Timeout`], the runtime kept: the
//! interrupt unwinds the JS stack and no catch can swallow it), a huge allocation fails at
//! [`Limits::memory_bytes`] ([`ScriptError::OutOfMemory`], the runtime rebuilt from the
//! scripts, since a heap at its limit may fail the next call's first allocation), deep
//! recursion is a `RangeError` and any throw an [`ScriptError::Exception`] (runtime kept).
#![doc = include_str!("../README.md")]

pub mod error;
mod exchange;
mod runtime;
mod sandbox;
mod scripts;
mod stdlib;

pub use error::{Place, ScriptError};
pub use exchange::{FlowState, Next, RequestParts, ResponseView, StepOutcome, Verdict};
pub use runtime::{Clock, LOG_LINES, Limits, Runtime, stream_seed};
pub use scripts::{Hook, Scripts};
