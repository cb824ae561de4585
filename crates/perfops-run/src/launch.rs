//! What every command that puts load on a target sets up the same way
//! (`quick`, and the session behind `run`, `limit` and `sweep`): the engine's
//! [`Plan`] (written here once), the stop flag that SIGINT and SIGTERM set,
//! whether the live line shows and in colour, whether the process may open
//! the load's connections ([`check_fd_room`]), and what a run cost this
//! process ([`generator_use`], which `quick`'s summary and a run's
//! conclusion print). Running the plan is [`crate::source::Engine`]'s.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use perfops_core::model::{LoadModel, Shard};
use perfops_core::scenario::{Defaults, HttpVersion};
use perfops_engine::{Http2, Plan, Protocol, Reflection, Target, Work};
use perfops_report::run::{GeneratorUse, Pacer};

/// What every load of one command shares.
#[derive(Debug, Clone)]
pub(crate) struct PlanBase {
    pub(crate) target: Target,
    /// Whole-request timeout (connect included).
    pub(crate) timeout: Duration,
    /// Connect (and TLS handshake) timeout.
    pub(crate) connect_timeout: Duration,
    /// Accept any TLS certificate.
    pub(crate) insecure: bool,
    /// Worker threads; 0 = one per available core.
    pub(crate) workers: usize,
    /// At the load's end, wait for the requests in flight instead of cutting them.
    pub(crate) wait_in_flight: bool,
    /// HTTP/2's knobs (used when the target speaks it).
    pub(crate) http2: Http2,
}

impl PlanBase {
    /// The plan of `load` doing `work`: one stage, no stop but the load's
    /// own (its requests in flight cut when its time is up, unless
    /// `wait_in_flight`), the whole schedule, started as soon as the workers
    /// are ready.
    /// Callers set what differs (`stage_ends`, `duration`, `start_at`...).
    pub(crate) fn plan(&self, work: Arc<Work>, load: LoadModel) -> Plan {
        let end = load.end();
        Plan {
            target: self.target.clone(),
            work,
            stage_ends: Vec::new(),
            load,
            timeout: self.timeout,
            end,
            wait_in_flight: self.wait_in_flight,
            connect_timeout: self.connect_timeout,
            insecure: self.insecure,
            workers: self.workers,
            shard: Shard::WHOLE,
            start_at: None,
            keep_start: false,
            replan: None,
            http2: self.http2,
        }
    }

    /// Where a gRPC step without `.proto` files asks for its descriptors:
    /// the target's reflection, within the connect timeout and the request
    /// timeout together.
    pub(crate) fn reflection(&self) -> Reflection {
        Reflection {
            target: self.target.clone(),
            insecure: self.insecure,
            timeout: self.connect_timeout + self.timeout,
        }
    }

    /// What every load of a scenario shares: its `defaults.timeout` for the
    /// whole request, `defaults.connect_timeout` (5 s unless it says) of it to
    /// connect, and its `defaults`' protocol and HTTP/2 knobs ([`PlanBase::with_http`]). One rule for
    /// `run`, `setup`, `--debug` and an agent.
    pub(crate) fn of_scenario(
        target: Target,
        defaults: &Defaults,
        insecure: bool,
        workers: usize,
        wait_in_flight: bool,
    ) -> PlanBase {
        let timeout = defaults.timeout;
        PlanBase {
            target,
            timeout,
            connect_timeout: defaults.connect_timeout(),
            insecure,
            workers,
            wait_in_flight,
            http2: Http2::default(),
        }
        .with_http(defaults)
    }

    /// With a scenario's `defaults.protocol` (forcing the target's) and
    /// `defaults.http2` (each knob given replacing the default).
    pub(crate) fn with_http(mut self, defaults: &Defaults) -> PlanBase {
        if let Some(p) = defaults.protocol {
            let forced = match p {
                HttpVersion::Http1 => Protocol::Http1,
                HttpVersion::H2 => Protocol::H2,
            };
            self.target = self.target.force(forced);
        }
        let o = &defaults.http2;
        let d = Http2::default();
        self.http2 = Http2 {
            streams: o.streams.unwrap_or(d.streams),
            connections: o.connections.unwrap_or(d.connections),
            stream_window: o.stream_window.unwrap_or(d.stream_window),
            connection_window: o.connection_window.unwrap_or(d.connection_window),
        };
        self
    }
}

/// A signal this long after the first is a second Ctrl-C; sooner, it is
/// the first one delivered again. One keypress can arrive twice within
/// microseconds: `timeout -s INT` signals perfops and then its whole process
/// group, as do wrappers that forward signals to their child; read as two
/// presses, that exited at once (130) and left no `summary.json`.
const AGAIN: Duration = Duration::from_millis(250);

/// The stop flag: the first Ctrl-C (or SIGTERM) sets it, so the load stops
/// and what was measured is kept; a second one, [`AGAIN`] or more later,
/// exits at once (130).
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing signal handlers")?;
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("perfops-signals".into())
        .spawn(move || {
            let mut first: Option<Instant> = None;
            for signal in signals.forever() {
                match first {
                    None => {
                        first = Some(Instant::now());
                        flag.store(true, Ordering::SeqCst);
                        let again = if signal == SIGTERM { "a second SIGTERM" } else { "Ctrl-C again" };
                        note!("stopping; {again} exits at once (what was measured so far is kept)");
                    }
                    Some(at) if at.elapsed() >= AGAIN => std::process::exit(130),
                    Some(_) => {}
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(stop)
}

/// The live line: shown on a terminal unless `--quiet`; in colour unless
/// `NO_COLOR` is set (to anything but the empty string).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terminal {
    pub(crate) live: bool,
    pub(crate) color: bool,
}

impl Terminal {
    pub(crate) fn new(quiet: bool) -> Terminal {
        let live = !quiet && std::io::stderr().is_terminal();
        Terminal { live, color: live && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }
}

/// Descriptors the generator keeps beside its connections: stdio, results
/// files, each worker's epoll and timers, the watchers' sockets.
const FD_RESERVE: u64 = 64;

/// Raise the open-files limit to the hard limit and say whether `load`'s
/// connections fit in it (#12): a closed loop's users each hold one, so more
/// than fit is a usage error; the open model's `max_in_flight` is a cap, not
/// a promise, so beyond it is a warning.
pub(crate) fn check_fd_room(load: &LoadModel) -> Result<()> {
    let Some(limit) = perfops_engine::raise_fd_limit() else { return Ok(()) };
    let room = limit.saturating_sub(FD_RESERVE);
    match *load {
        LoadModel::Closed { connections, .. } if u64::from(connections) > room => {
            Err(anyhow::Error::new(crate::exit::UsageError(format!(
                "{connections} connections do not fit: this process may open {limit} files at most \
                 (the hard limit, `ulimit -Hn`), {room} of them for connections; \
                 use fewer connections or raise the hard limit"
            ))))
        }
        LoadModel::Open { max_in_flight, .. } if u64::from(max_in_flight) > room => {
            // Said once: a command checks before its results directory and again per load.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                note!(
                    "warning: this process may open {limit} files at most (`ulimit -Hn`): beyond \
                 {room} requests in flight, new connections will fail (connect_error), before max_in_flight \
                 ({max_in_flight}) drops arrivals"
                )
            });
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The generator's CPU and memory so far (this process), with the naps its
/// closed loops took (count, longest), how long its workers waited for a CPU
/// and the pacer its open model ran on.
pub(crate) fn generator_use(
    workers: usize,
    (naps, longest_nap): (u64, Duration),
    cpu_wait: Duration,
    pacer: Option<&perfops_engine::Pacer>,
) -> GeneratorUse {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok();
    let secs = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    GeneratorUse {
        workers,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_user_s: usage.map_or(0.0, |u| secs(u.user_time())),
        cpu_sys_s: usage.map_or(0.0, |u| secs(u.system_time())),
        max_rss_kib: usage.map_or(0, |u| u.max_rss().max(0) as u64),
        naps,
        longest_nap_us: longest_nap.as_secs_f64() * 1e6,
        cpu_wait_s: cpu_wait.as_secs_f64(),
        pacer: pacer.map(|p| match p {
            perfops_engine::Pacer::Kernel => Pacer::IoUring,
            perfops_engine::Pacer::Timer(_) => Pacer::Timerfd,
        }),
    }
}

/// Why the open model did not run on the kernel pacer, where io_uring was
/// refused: a note for the end of the run.
pub(crate) fn pacer_note(pacer: Option<&perfops_engine::Pacer>) -> Option<String> {
    match pacer? {
        perfops_engine::Pacer::Timer(Some(why)) => {
            Some(format!("arrivals were paced by the timerfd pacer: io_uring was refused ({why})"))
        }
        _ => None,
    }
}
