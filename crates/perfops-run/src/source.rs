//! The interval-source seam: whatever produces a load's seconds. This
//! machine's engine ([`Engine`]), a coordinator's agents
//! (`fleet::coordinator`), seconds read back from results directories
//! ([`Replay`]: `merge`'s shards) each implement [`IntervalSource`]: they
//! hand each whole second, in order, to a [`Feed`], and say what they know
//! of the load besides its seconds in their own [`Produced`] — no source
//! pretends to be the engine.
//!
//! ```text
//!   Engine ──┐
//!   agents ──┼──Interval──> Feed ──> Pipeline (judge, outputs) ──> Measured
//!   Replay ──┘                 └──> "stopping, because..." back to the source
//!      └──────────────Produced (totals, generator's use, protocols)──────> Loaded
//! ```
//!
//! [`drive`] is the one loop around them: it runs a source through a
//! pipeline, says each abort as it happens, and turns a failed sink (a full
//! disk under the results writer) into this load's error once the source
//! has stopped. What the seconds become (stages, verdicts, the summary) is
//! `crate::conclude`'s.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Result;
use perfops_core::measure::{FailureSamples, Interval, Stats};
use perfops_core::pipeline::{Measured, Notice, Pipeline, SinkError};
use perfops_engine::{Plan, Protocol};
use perfops_report::run::ProtocolUse;

/// What a source says of its load besides the seconds it handed on.
#[derive(Debug, Clone, Default)]
pub struct Produced {
    /// Totals over the load: every second's stats added.
    pub total: Stats,
    /// From the start of the load to its last response (or the end of its
    /// schedule); for seconds read back, what their lengths add up to.
    pub elapsed: Duration,
    /// Generators' worker threads that ran it (0: none ran here).
    pub workers: usize,
    /// Stopped before its end by the stop flag.
    pub interrupted: bool,
    /// Closed loops: naps taken to coalesce wake-ups, and the longest.
    pub naps: (u64, Duration),
    /// How long its workers waited, runnable, for a CPU that others held.
    pub cpu_wait: Duration,
    /// How late after the planned start the load began (zero: on time).
    pub late: Duration,
    /// What its steps spoke, as its connections negotiated it (empty: not known).
    pub protocols: Vec<ProtocolUse>,
    /// The TLS handshake before the load failed, and why.
    pub tls_refused: Option<String>,
    /// The first few failing exchanges of each step and kind (none from
    /// seconds read back or an agent's wire).
    pub failures: FailureSamples,
    /// Open model on this machine: the pacer that sent its arrivals;
    /// `None` where not known.
    pub pacer: Option<perfops_engine::Pacer>,
}

/// Where a source hands its seconds.
pub trait Feed {
    /// Take the next whole second, in order. Returns at once: what is slow
    /// is an output's business (and off this thread).
    fn second(&mut self, interval: &Interval);
    /// Why the load is stopping, if a consumer decided so (an `abort_when`
    /// rule): a source that steers other generators tells them.
    fn stopping(&self) -> Option<&str> {
        None
    }
}

/// Something that produces a load's seconds. A source is made with what it
/// runs (the engine and the agents with their [`Plan`], whose `start_at` is
/// the first second's start; a replay with its seconds).
pub trait IntervalSource {
    /// Hand each whole second to `feed`, in order, as soon as it is whole,
    /// until the load ends or `stop` is set; then say what else was learnt.
    fn produce(&mut self, stop: &Arc<AtomicBool>, feed: &mut dyn Feed) -> Result<Produced>;
}

/// A [`Pipeline`] as a feed: each second placed and handed to its sinks;
/// aborts said on stderr as they happen; the first failed sink kept.
struct PipelineFeed<'p> {
    pipeline: Pipeline<'p>,
    aborted: Option<String>,
    failed: Option<SinkError>,
}

impl Feed for PipelineFeed<'_> {
    fn second(&mut self, interval: &Interval) {
        let (aborted, failed) = (&mut self.aborted, &mut self.failed);
        self.pipeline.second(interval, &mut |n| match n {
            Notice::Failed(e) => {
                failed.get_or_insert_with(|| e.clone());
            }
            Notice::Abort(why) => {
                note!("{n}");
                aborted.get_or_insert_with(|| why.clone());
            }
        });
    }

    fn stopping(&self) -> Option<&str> {
        self.aborted.as_deref()
    }
}

/// Run `source` on `plan`, every second through `pipeline`. A sink that
/// failed has stopped the load: that is this load's error (exit 3), said
/// once the source is done.
pub fn drive(
    source: &mut dyn IntervalSource,
    stop: &Arc<AtomicBool>,
    pipeline: Pipeline<'_>,
) -> Result<(Produced, Measured)> {
    let mut feed = PipelineFeed { pipeline, aborted: None, failed: None };
    let produced = source.produce(stop, &mut feed)?;
    let measured = feed.pipeline.finish();
    if let Some(e) = feed.failed {
        anyhow::bail!("{e}: the load was stopped; the seconds written before stay readable (`perfops report`)");
    }
    Ok((produced, measured))
}

/// This machine's engine, running a plan.
#[derive(Debug, Clone)]
pub struct Engine {
    plan: Plan,
    spoke: Option<Protocol>,
}

impl Engine {
    /// The engine, to run `plan`.
    pub fn new(plan: Plan) -> Engine {
        Engine { plan, spoke: None }
    }

    /// The HTTP its requests went out in, once it ran (HTTP/1.1 before).
    pub fn protocol(&self) -> Protocol {
        self.spoke.unwrap_or(Protocol::Http1)
    }
}

impl IntervalSource for Engine {
    fn produce(&mut self, stop: &Arc<AtomicBool>, feed: &mut dyn Feed) -> Result<Produced> {
        let plan = &self.plan;
        crate::launch::check_fd_room(&plan.load)?;
        let o = perfops_engine::run(plan, stop.clone(), |iv| feed.second(iv))?;
        self.spoke = Some(o.protocol);
        let names = &plan.work.step_names;
        Ok(Produced {
            total: o.total,
            elapsed: o.elapsed,
            workers: o.workers,
            interrupted: o.interrupted,
            naps: (o.naps, o.longest_nap),
            cpu_wait: o.cpu_wait,
            late: o.late,
            protocols: ProtocolUse::group(
                names,
                names.iter().map(String::as_str).zip(o.step_protocols.iter().copied()),
            ),
            tls_refused: o.tls_refused,
            failures: o.failures,
            pacer: o.pacer,
        })
    }
}

/// Seconds already measured (read back from results directories, merged),
/// handed on as fast as the feed takes them: no clock, no stop.
pub struct Replay<I> {
    seconds: Option<I>,
    workers: usize,
}

impl<I: IntoIterator<Item = Interval>> Replay<I> {
    /// `seconds` in order; `workers` generated them.
    pub fn new(seconds: I, workers: usize) -> Replay<I> {
        Replay { seconds: Some(seconds), workers }
    }
}

impl<I: IntoIterator<Item = Interval>> IntervalSource for Replay<I> {
    fn produce(&mut self, _: &Arc<AtomicBool>, feed: &mut dyn Feed) -> Result<Produced> {
        let mut p = Produced { workers: self.workers, ..Produced::default() };
        for iv in self.seconds.take().into_iter().flatten() {
            p.total.merge(&iv.stats);
            // The exchanges kept with the seconds (a shard's `failures.jsonl`, an agent's):
            // the first few of each step and kind over the run, as a worker keeps them.
            p.failures.merge(&iv.samples);
            p.elapsed = p.elapsed.max(Duration::from_secs(u64::from(iv.index)) + iv.length);
            feed.second(&iv);
        }
        Ok(p)
    }
}
