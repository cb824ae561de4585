//! `perfops agent --join URL`: one generator of a coordinated run. It
//! connects over TLS (retrying for a bounded time: the coordinator's Service
//! may come up after the agent's pod, and a coordinator busy with other
//! handshakes closes a connection at once), proves it knows the token and
//! checks that the coordinator does too before it takes a word from it
//! (until then, frames of a few KiB at most), answers the clock probes, claims its shard
//! (`--index`, or `JOB_COMPLETION_INDEX` in a Kubernetes Indexed Job, or
//! the first free one), builds its plan from the assignment, starts at the
//! instant given, and sends every second as it completes. A Stop from the
//! coordinator, or losing it, stops the arrivals at once: nobody drives a
//! generator without the token, and nobody leaves one running unwatched.
//!
//! It writes no results of its own: the coordinator writes the run's.

use std::collections::HashMap;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use perfops_core::fleet::wire::{self, Assignment, Control, Message, PROTOCOL, PacerWord};
use perfops_core::measure::{Interval, Stats};
use perfops_core::model::Shard;
use perfops_core::scenario::{Override, Step, sources};
use perfops_engine::{Plan, Target, Work};
use perfops_report::run::ProtocolUse;

use super::auth::{self, Role};
use super::conn::{self, Conn, Event};
use super::gate::{REASON_CHARS, sanitize};
use crate::control::{Steered, Steering};
use crate::exit::Exit;
use crate::launch::{self, PlanBase};
use crate::source::{Engine, Feed, IntervalSource, Produced};

/// Flags of `perfops agent`.
#[derive(Debug, Clone)]
pub struct AgentArgs {
    /// The coordinator: `https://HOST:PORT` or `HOST:PORT` (the channel is always TLS).
    pub join: String,
    /// The shared secret, as the coordinator has it (else the environment variable PERFOPS_TOKEN);
    /// never sent, only proved.
    pub token: Option<String>,
    /// The shard this agent claims (else JOB_COMPLETION_INDEX; else the first free one).
    pub index: Option<u32>,
    /// Keep trying to reach the coordinator this long.
    pub connect_timeout: Duration,
    /// Verify the coordinator's certificate chain and host name against this CA (PEM); without it,
    /// the certificate is taken unverified and the token handshake (bound to the TLS session)
    /// proves the coordinator.
    pub tls_ca: Option<PathBuf>,
    /// A name for the coordinator's logs and results (default: the host name).
    pub name: Option<String>,
    /// Tests only: pretend this machine's wall clock is off by this many milliseconds.
    pub clock_offset_for_tests: Option<i64>,
    /// Benchmarks only (bench/fleet.sh): also append every second sent to FILE, as wire frames.
    pub record_seconds: Option<PathBuf>,
    /// Benchmarks and tests only: send no request; replay the seconds of FILE (made with
    /// --record-seconds; one per second, in a loop, for the load's duration) or of a shard's
    /// results directory (each once).
    pub replay_seconds: Option<PathBuf>,
}

/// A coordinator silent this long during the load is taken for lost.
const SILENCE: Duration = Duration::from_secs(5);

/// This agent's wall clock in ns since the epoch (shifted for tests).
#[derive(Debug, Clone, Copy)]
struct Clock {
    shift_ns: i64,
}

impl Clock {
    fn now(self) -> i64 {
        wall_ns() + self.shift_ns
    }

    /// The local instant at which this clock will read `at`.
    fn instant_at(self, at: i64) -> Instant {
        let (now_i, now) = (Instant::now(), self.now());
        let ahead = at - now;
        if ahead >= 0 { now_i + Duration::from_nanos(ahead as u64) } else { now_i }
    }
}

/// Nanoseconds since the epoch on the system's wall clock.
pub(crate) fn wall_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// Why an agent ends without having run its part: said on stderr, exit 3.
fn refused(message: String) -> Result<Exit> {
    note!("agent: {message}");
    Ok(Exit::Runtime)
}

/// `perfops agent`: join a coordinator and run the share of the load it assigns.
pub fn run(args: AgentArgs) -> Result<Exit> {
    let token = super::token(args.token.as_deref())?;
    let clock = Clock { shift_ns: args.clock_offset_for_tests.unwrap_or(0) * 1_000_000 };
    let name = args.name.clone().unwrap_or_else(|| {
        nix::unistd::gethostname().ok().map_or_else(|| "agent".into(), |h| h.to_string_lossy().into_owned())
    });
    let (host, port) = parse_join(&args.join)?;
    let tls = conn::client_tls(args.tls_ca.as_deref())?;
    let stop = launch::stop_flag()?;

    // A coordinator busy with other handshakes closes a connection at once: try again
    // until --connect-timeout, as for a coordinator not up yet.
    let deadline = Instant::now() + args.connect_timeout;
    let mut said_busy = false;
    let (c, index, count) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(tcp) = connect(&host, port, left, &stop)? else {
            if stop.load(Ordering::Relaxed) {
                return refused(format!("interrupted while waiting for the coordinator at {}", args.join));
            }
            return refused(format!(
                "could not reach the coordinator at {} within {:?}",
                args.join, args.connect_timeout
            ));
        };
        match join(tcp, &tls, &host, &token, &name, &args, clock) {
            Ok(Joined::In(c, index, count)) => break (c, index, count),
            Ok(Joined::Refused(message)) => return refused(message),
            Err(Attempt::Busy(e)) if Instant::now() < deadline && !stop.load(Ordering::Relaxed) => {
                if !said_busy {
                    note!("agent: the coordinator at {} closed the connection ({e}); trying again", args.join);
                    said_busy = true;
                }
                std::thread::sleep(Duration::from_millis(300 + u64::from(std::process::id() % 400)));
            }
            Err(Attempt::Busy(e) | Attempt::Failed(e)) => return Err(e),
        }
    };
    let (events_tx, events) = mpsc::channel();
    let out = conn::Hub::start()?.pump(c, 0, events_tx);
    let assignment = match next(&events, &stop)? {
        Some(Control::Assign(a)) => a,
        Some(Control::Bye) => return refused("the coordinator ended the run before it started".into()),
        Some(other) => bail!("the coordinator said {other:?} instead of an assignment"),
        None => return refused("lost the coordinator before the assignment".into()),
    };
    let (mut plan, stages) = match build(&assignment, Shard { index, count }) {
        Ok(p) => p,
        Err(e) => {
            let _ = out.send(Message::Control(Control::Failed { reason: format!("{e:#}") }));
            return Err(e);
        }
    };
    let _ = out.send(Message::Control(Control::Ready));
    let at = match next(&events, &stop)? {
        Some(Control::Start { at }) => at,
        Some(Control::Bye) => return refused("the coordinator ended the run before it started".into()),
        Some(other) => bail!("the coordinator said {other:?} instead of the start"),
        None => return refused("lost the coordinator before the start".into()),
    };
    plan.start_at = Some(clock.instant_at(at));
    // Actions by hand, relayed by the coordinator with the second they take
    // effect at: this agent re-plans as every other does, from the same stages.
    let steering = Arc::new(Steering::default());
    if let (Some(staged), Some(start)) = (crate::control::staged(&plan.load, stages), plan.start_at) {
        let engine = perfops_engine::Replan::new();
        plan.replan = Some(engine.clone());
        steering.begin(Steered {
            plan: staged,
            model: plan.load.clone(),
            start,
            offset: 0,
            share: f64::from(count.max(1)).recip(),
            engine,
            pipeline: Default::default(),
            lead: crate::control::LEAD,
            relay: None,
        });
    }

    // Stop orders and the coordinator's loss stop the arrivals while the engine runs.
    let lost = Arc::new(AtomicBool::new(false));
    let ordered = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, lost, ordered) = (stop.clone(), lost.clone(), ordered.clone());
        let (steering, start) = (steering.clone(), plan.start_at.unwrap_or_else(Instant::now));
        std::thread::Builder::new().name("perfops-agent-watch".into()).spawn(move || {
            loop {
                // The coordinator says something at least every second (a heartbeat):
                // silent for longer than SILENCE, it hangs or is cut off, and nobody watches this load.
                match events.recv_timeout(SILENCE) {
                    Ok(Event::Frame(_, Message::Control(Control::Stop { reason }))) => {
                        note!("agent: stopped by the coordinator: {}", sanitize(&reason, REASON_CHARS));
                        ordered.store(true, Ordering::Relaxed);
                        stop.store(true, Ordering::Relaxed);
                    }
                    Ok(Event::Frame(_, Message::Control(Control::Steer { action, at_s, by }))) => {
                        let _ = steer(&steering, start, &action, at_s, &by);
                    }
                    Ok(Event::Frame(_, Message::Control(Control::Bye))) => return events,
                    Ok(Event::Frame(..)) => {}
                    Ok(Event::Closed(..)) | Err(_) => {
                        lost.store(true, Ordering::Relaxed);
                        stop.store(true, Ordering::Relaxed);
                        return events;
                    }
                }
            }
        })?
    };
    let step_names = plan.work.step_names.clone();
    let outcome = match &args.replay_seconds {
        Some(file) => replay(file, &plan, &stop, &out)?,
        None => {
            let record = args.record_seconds.as_ref().map(std::fs::File::create).transpose()?;
            Engine::new(plan).produce(&stop, &mut Wire { out: &out, record })?
        }
    };
    steering.end();
    // What each step spoke, by step index, as the coordinator groups it again.
    let spoke: Vec<String> = step_names
        .iter()
        .map(|n| {
            ProtocolUse::pairs(&outcome.protocols).find(|(s, _)| s == n).map_or_else(String::new, |(_, p)| p.into())
        })
        .collect();
    let _ = out.send(Message::Control(Control::Done {
        elapsed_ns: outcome.elapsed.as_nanos() as u64,
        workers: outcome.workers as u64,
        naps: outcome.naps.0,
        longest_nap_ns: outcome.naps.1.as_nanos() as u64,
        interrupted: outcome.interrupted,
        late_ns: outcome.late.as_nanos() as u64,
        protocols: spoke,
        pacer: outcome.pacer.as_ref().map(|p| {
            Box::new(match p {
                perfops_engine::Pacer::Kernel => PacerWord { name: "io_uring".into(), refused: None },
                perfops_engine::Pacer::Timer(why) => PacerWord { name: "timerfd".into(), refused: why.clone() },
            })
        }),
        cpu_wait_ns: outcome.cpu_wait.as_nanos() as u64,
    }));
    if lost.load(Ordering::Relaxed) {
        return refused("lost the coordinator during the run: stopped the load".into());
    }
    if outcome.interrupted && !ordered.load(Ordering::Relaxed) {
        // A signal here (a pod deleted or evicted: SIGTERM): the coordinator has our
        // Done and marks the rest of this shard as missing. Waiting for its Bye would
        // hold the pod in Terminating until the run's end; and a shard not run to its
        // end is no success.
        drop(out);
        std::thread::sleep(Duration::from_millis(100));
        note!(
            "agent {name}: interrupted: shard {index}/{count} stopped after {:.1} s ({} requests sent); \
             the coordinator marks its seconds from then on as missing",
            outcome.elapsed.as_secs_f64(),
            outcome.total.sent
        );
        return Ok(Exit::ThresholdsFailed);
    }
    // The coordinator says Bye once every agent is done; wait for it a while.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !watcher.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(out);
    if lost.load(Ordering::Relaxed) {
        // Done was queued before: the coordinator may have it. Nothing more to do either way.
        note!("agent {name}: the coordinator closed the connection after the load");
    }
    note!(
        "agent {name}: shard {index}/{count} done: {} requests sent in {:.1} s",
        outcome.total.sent,
        outcome.elapsed.as_secs_f64()
    );
    Ok(Exit::Passed)
}

/// How one attempt to join ended well.
enum Joined {
    /// In, as shard `index` of `count`.
    In(Conn, u32, u32),
    /// Refused or not to be trusted: why, for stderr (exit 3).
    Refused(String),
}

/// How one attempt to join failed.
enum Attempt {
    /// The coordinator closed the connection before it said a word (busy with
    /// other handshakes, or just starting): worth another try.
    Busy(anyhow::Error),
    /// Anything else: a certificate not verified, a protocol error.
    Failed(anyhow::Error),
}

/// TLS, the token both ways (the agent first: issue #31), the clock
/// probes, over `tcp`.
fn join(
    tcp: TcpStream,
    tls: &Arc<rustls::ClientConfig>,
    host: &str,
    token: &str,
    name: &str,
    args: &AgentArgs,
    clock: Clock,
) -> Result<Joined, Attempt> {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    let wait = Duration::from_secs(30);
    let busy = |e: std::io::Error| {
        if matches!(e.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe) {
            Attempt::Busy(e.into())
        } else {
            Attempt::Failed(anyhow::Error::new(e).context(format!("TLS with the coordinator at {}", args.join)))
        }
    };
    let failed = |e: std::io::Error| Attempt::Failed(e.into());
    let (mut c, session) = Conn::tls_client(tcp, tls.clone(), host, wait).map_err(busy)?;
    let own = auth::nonce().map_err(Attempt::Failed)?;
    let wire::Names { counters, kinds } = wire::Names::local();
    c.control(Control::Hello {
        protocol: PROTOCOL,
        nonce: own.clone(),
        index: args.index,
        name: name.to_string(),
        counters,
        kinds,
    })
    .map_err(busy)?;
    // Until the coordinator proved the token, what it says is a stranger's: small frames
    // (the connection's limit), reasons escaped before they are printed.
    let told =
        |reason: String| Joined::Refused(format!("refused by the coordinator: {}", sanitize(&reason, REASON_CHARS)));
    let their = match c.expect(wait, "challenge").map_err(busy)? {
        Control::Challenge { nonce } if auth::is_nonce(&nonce) => nonce,
        Control::Refused { reason } => return Ok(told(reason)),
        other => {
            return Err(Attempt::Failed(anyhow!("the coordinator said {} instead of its challenge", other.kind())));
        }
    };
    c.control(Control::Proof { proof: auth::prove(token, Role::Agent, &session.binding, &their, &own) })
        .map_err(failed)?;
    match c.expect(wait, "the coordinator's proof").map_err(failed)? {
        Control::Accepted { proof }
            if auth::check(token, Role::Coordinator, &session.binding, &own, &their, &proof) => {}
        Control::Accepted { .. } => {
            let _ = c.control(Control::Refused { reason: "the coordinator's token proof is wrong".into() });
            return Ok(Joined::Refused(format!(
                "the coordinator at {} does not know the token: refusing to take load orders from it",
                args.join
            )));
        }
        Control::Refused { reason } => return Ok(told(reason)),
        other => {
            return Err(Attempt::Failed(anyhow!("the coordinator said {} instead of its proof", other.kind())));
        }
    }
    c.trust();
    if args.tls_ca.is_none() {
        note!(
            "agent {name}: the coordinator's certificate (SHA-256 {}) is not verified (no --tls-ca); the \
             coordinator proved the token over this TLS session",
            session.fingerprint
        );
    }

    // Clock probes until the coordinator decides.
    loop {
        match c.expect(wait, "clock probe or welcome").map_err(failed)? {
            Control::Ping { t0 } => {
                let t1 = clock.now();
                c.control(Control::Pong { t0, t1, t2: clock.now() }).map_err(failed)?;
            }
            Control::Welcome { index, count, offset_ns } => {
                note!(
                    "agent {name}: joined {} as shard {index}/{count} (clock offset {:+.1} ms)",
                    args.join,
                    offset_ns as f64 / 1e6
                );
                return Ok(Joined::In(c, index, count));
            }
            Control::Refused { reason } => return Ok(told(reason)),
            other => {
                return Err(Attempt::Failed(anyhow!("the coordinator said {} during the clock probes", other.kind())));
            }
        }
    }
}

/// The next control message from the pump (heartbeats skipped), `None` if
/// the connection closed; a local Ctrl-C ends the wait as an error.
fn next(events: &Receiver<Event>, stop: &AtomicBool) -> Result<Option<Control>> {
    loop {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted before the start");
        }
        match events.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Frame(_, Message::Control(Control::Heartbeat))) => {}
            Ok(Event::Frame(_, Message::Control(c))) => return Ok(Some(c)),
            Ok(Event::Frame(_, Message::Second(_) | Message::Received(_))) => bail!("the coordinator sent a second"),
            Ok(Event::Closed(..)) | Err(RecvTimeoutError::Disconnected) => return Ok(None),
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Send recorded seconds as if they were measured now, one per second
/// from the plan's start, and make no request.
///
/// `path` is either a file of wire frames (`--record-seconds`): its whole
/// seconds renumbered and looped for the load's duration (bench/fleet.sh's
/// simulated agents: what a coordinator receives, without the load that
/// made it); or a shard's results directory (`run --shard`): its seconds
/// as they are, each once, partial ones too (a test compares the
/// coordinator's merge of them with `perfops merge`'s).
fn replay(path: &Path, plan: &Plan, stop: &AtomicBool, out: &conn::Outbox) -> Result<Produced> {
    let (recorded, looped): (Vec<Message>, bool) = if path.is_dir() {
        let read = perfops_report::parts::read_seconds(path).map_err(|e| anyhow!("{e}"))?;
        (read.seconds.into_iter().map(|iv| Message::Second(Box::new(iv))).collect(), false)
    } else {
        let mut bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let frames = wire::take_frames(&mut bytes).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let whole =
            frames.into_iter().filter(|m| matches!(m, Message::Received(raw) if raw.length == Duration::from_secs(1)));
        (whole.collect(), true)
    };
    if recorded.is_empty() {
        bail!("{}: no whole second recorded", path.display());
    }
    let start = plan.start_at.unwrap_or_else(Instant::now);
    let seconds = if looped { plan.end.map_or(10, |d| d.as_secs().max(1)) as u32 } else { recorded.len() as u32 };
    let total = Stats::default();
    for k in 0..seconds {
        let due = start + Duration::from_secs(u64::from(k) + 1);
        while Instant::now() < due && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(due.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // Sent as recorded (a loop renumbered): the coordinator does all the work it would do.
        let mut m = recorded[k as usize % recorded.len()].clone();
        if let Message::Received(raw) = &mut m {
            raw.index = k;
        }
        let _ = out.send(m);
    }
    // A directory's load lasted what its seconds say, not how long they took to replay.
    let elapsed = if looped {
        Instant::now().saturating_duration_since(start)
    } else {
        recorded.iter().map(|m| if let Message::Second(iv) = m { iv.length } else { Duration::ZERO }).sum()
    };
    // Nothing ran here: no worker, no protocol negotiated, no failure sampled.
    Ok(Produced { total, elapsed, interrupted: stop.load(Ordering::Relaxed), ..Produced::default() })
}

/// `https://host:port` or `host:port` (default port 7070). `http://` is
/// refused: the fleet channel is always TLS (issue #31), and a URL that
/// says otherwise would mislead whoever reads it.
fn parse_join(url: &str) -> Result<(String, u16)> {
    let usage = |m: String| anyhow::Error::new(crate::exit::UsageError(m));
    let rest = match url.split_once("://") {
        Some(("https" | "tls", r)) => r,
        Some(("http" | "tcp", r)) => {
            return Err(usage(format!(
                "--join {url}: the fleet channel is always TLS, there is no plain-text mode: use https://{} \
                 (or just {})",
                r.trim_end_matches('/'),
                r.trim_end_matches('/')
            )));
        }
        Some((s, _)) => return Err(usage(format!("--join {url}: scheme `{s}` is not https"))),
        None => url,
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h, p.parse::<u16>().map_err(|_| usage(format!("--join {url}: bad port `{p}`")))?)
        }
        _ => (rest, 7070),
    };
    if host.is_empty() {
        return Err(usage(format!("--join {url}: no host")));
    }
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

/// Connect to `host:port`, retrying every half second until `within` passed
/// (name resolution included: a Service's DNS name may not exist yet).
fn connect(host: &str, port: u16, within: Duration, stop: &AtomicBool) -> Result<Option<TcpStream>> {
    let deadline = Instant::now() + within;
    let mut said = false;
    loop {
        let attempt = (host, port).to_socket_addrs().map_err(|e| e.to_string()).and_then(|addrs| {
            let mut last = "no address".to_string();
            for a in addrs {
                match TcpStream::connect_timeout(&a, Duration::from_secs(3)) {
                    Ok(s) => return Ok(s),
                    Err(e) => last = e.to_string(),
                }
            }
            Err(last)
        });
        match attempt {
            Ok(s) => return Ok(Some(s)),
            Err(e) => {
                if !said {
                    note!("agent: waiting for the coordinator at {host}:{port} ({e})");
                    said = true;
                }
            }
        }
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// This agent's plan: the scenario as the coordinator read it, its resolved
/// values, and this shard of the load.
/// The plan of `a` for `shard`, and its stages' names and lengths (for
/// actions by hand).
fn build(a: &Assignment, shard: Shard) -> Result<(Plan, Vec<(String, Duration)>)> {
    let overrides: Vec<Override> =
        a.overrides.iter().map(|(p, v)| Override { path: p.clone(), value: v.clone() }).collect();
    let mut scenario = perfops_core::scenario::parse(&a.path, &a.scenario, &overrides)
        .map_err(|d| anyhow!("the scenario does not validate here:\n{}", d.render(&a.scenario)))?;
    // The files the scenario reads beside itself as the coordinator sent them (CSV, .proto, the
    // recording), put back at their paths relative to it and read from there as `run` reads
    // them; in memory once the plan is built, and the folder removed.
    let unpacked = crate::shipped::Unpacked::new(&a.files)?;
    let folder = unpacked.path();
    let env: HashMap<String, String> = a.env.clone().into_iter().collect();
    let feeders = sources::feeders(&scenario, folder, |p| crate::loading::read_csv(folder, p))
        .map_err(|e| anyhow!("{}", e.render(&a.scenario)))?;
    // A replay's recording: this agent sends arrivals k mod N of it, as a shard of `run` does.
    crate::loading::read_replay(&mut scenario, folder, &a.scenario).map_err(|e| anyhow!("{e}"))?;
    let target = Target::parse(&a.target).map_err(|e| anyhow!("target `{}`: {e}", a.target))?;
    let flows: Vec<(String, u32, Vec<Step>)> =
        scenario.flows.iter().map(|f| (f.name.clone(), f.weight, f.steps.clone())).collect();
    let work = Work::new(&target, flows, scenario.defaults.headers.clone(), env, feeders)
        .with_cookies(scenario.defaults.cookies);
    let mut work = crate::loading::replaying(work, &scenario.load);
    let base =
        PlanBase::of_scenario(target.clone(), &scenario.defaults, a.insecure, a.workers as usize, a.wait_in_flight);
    // gRPC's .proto files at their paths (none sent: steps without proto: ask reflection).
    work.resolve_grpc(folder, &[], Some(base.reflection())).map_err(|e| anyhow!("{e}"))?;
    // The scripts, compiled here from the files sent: the hooks run on this agent's workers.
    if let Some(spec) = &scenario.scripts {
        let plan = crate::scripts::compile(spec, folder, &a.scenario).map_err(|p| anyhow!("{}", p.render()))?;
        work.attach_scripts(plan).map_err(|e| anyhow!("{e}"))?;
    }
    drop(unpacked);
    let globals: HashMap<String, String> = a.globals.clone().into_iter().collect();
    crate::shard::check_setup_values(&scenario, &globals, "the coordinator's setup values")?;
    work.globals = globals;
    // The engine divides the arrivals (k mod N), max_in_flight and the closed model's users by the shard.
    let model = crate::loading::load_model(&scenario.load).context("the load profile")?;
    let mut plan = base.plan(Arc::new(work), model);
    plan.stage_ends = a.stage_ends_ns.iter().map(|&n| Duration::from_nanos(n)).collect();
    plan.shard = shard;
    // Every agent on one schedule: a start heard late sends at once what is due in the stage under
    // way, as `--start-at` does (stages already over are not sent: counted unsent).
    plan.keep_start = true;
    let stages = scenario.load.stages().iter().map(|s| (s.name.clone(), s.segment.duration)).collect();
    Ok((plan, stages))
}

/// An action by hand its coordinator relayed: checked (words, an instant
/// still ahead and not too far), then taken at its second, or refused and
/// said; never trusted as it came.
pub(crate) fn steer(
    steering: &Steering,
    start: Instant,
    action: &str,
    at_s: u32,
    by: &str,
) -> Result<perfops_core::pipeline::control::ControlEvent, String> {
    let now = Instant::now().saturating_duration_since(start);
    let by = sanitize(by, REASON_CHARS);
    let taken = crate::control::check_relayed(action, at_s, now).and_then(|(a, at)| steering.act_at(a, at, &by));
    match &taken {
        // The load's own second: the coordinator's session clock may have begun before it.
        Ok(e) => note!(
            "agent: {} from second {:.0} of the load (stage {}), by {by}",
            sanitize(&a_words(e), REASON_CHARS),
            e.t,
            sanitize(&e.stage, REASON_CHARS)
        ),
        Err(why) => note!("agent: refused an action from the coordinator: {}", sanitize(why, REASON_CHARS)),
    }
    taken
}

/// An event's action in its words (`rate 300`).
fn a_words(e: &perfops_core::pipeline::control::ControlEvent) -> String {
    match e.value {
        Some(v) => format!("{} {v}", e.action),
        None => e.action.clone(),
    }
}

/// The coordinator as this agent's feed: each second goes out on the wire
/// as the engine hands it on (and into `--record-seconds`' file).
struct Wire<'a> {
    out: &'a conn::Outbox,
    record: Option<std::fs::File>,
}

impl Feed for Wire<'_> {
    fn second(&mut self, interval: &Interval) {
        let msg = Message::Second(Box::new(interval.clone()));
        if let Some(f) = &mut self.record {
            let _ = f.write_all(&wire::encode(&msg));
        }
        let _ = self.out.send(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_urls() {
        // (--join, host, port): the forms a user or a manifest writes.
        let cases = [
            ("https://perfops-coordinator.load.svc:7070", "perfops-coordinator.load.svc", 7070),
            ("https://10.0.0.5:9000/", "10.0.0.5", 9000),
            ("127.0.0.1:7171", "127.0.0.1", 7171),
            ("coordinator", "coordinator", 7070),
            ("https://[::1]:7070", "::1", 7070),
        ];
        for (url, host, port) in cases {
            assert_eq!(parse_join(url).unwrap(), (host.to_string(), port), "{url}");
        }
        // (--join, what the error says): refused, with the way out.
        let bad = [
            ("ftp://x:1", "not https"),                              // another scheme
            ("https://:7070", "no host"),                            // no host
            ("https://x:notaport", "bad port"),                      // no port
            ("http://coordinator:7070", "https://coordinator:7070"), // issue #31: no plain text any more
            ("tcp://10.0.0.5:7070", "always TLS"),                   // the other plain-text spelling
        ];
        for (url, want) in bad {
            let e = parse_join(url).unwrap_err().to_string();
            assert!(e.contains(want), "{url}: {e}");
        }
    }
}
