//! perfops' pure core: what a load test *plans* and what it *measures*, with no
//! sockets, no async runtime and no clock of its own.
//!
//! - [`model`]: load models as validated types. An open schedule answers "when is
//!   arrival n due"; a closed model answers "how many users". The engine runs them.
//! - [`measure`]: failure kinds, HDR histograms and per-interval statistics, and
//!   their merge (associative and order-free, so per-worker shards combine exactly).
//! - [`analysis`]: conclusions from finished measurements: verdicts, capacity, diagnostics, a
//!   sweep's scalability, latency modes.
//! - [`fleet`]: one run over many generators: the wire, clock offsets, the join of agents' seconds.
//! - [`pipeline`]: each second of a load handed to one ordered list of sinks
//!   (results, judge, live line, exporter), with the per-stage accounting.
//!
//! - [`cookie`]: a flow's cookies as a browser session keeps them (parse, jar, the `Cookie:` field).
//! - [`input`]: files someone else prepared (results, feeders, `.proto`), opened inside their
//!   folder, regular only, with a size cap: the one module that touches the file system.
//! - [`printable`]: text from such files, made safe to print on a terminal.
//!
//! Everything here is testable without a clock: time enters as `Duration` offsets
//! from the start of a run.

pub mod analysis;
pub mod cookie;
pub mod fleet;
pub mod input;
pub mod measure;
pub mod model;
pub mod pipeline;
pub mod printable;
pub mod scenario;
pub mod telemetry;
pub mod units;
