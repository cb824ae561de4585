//! `perfops coordinator SCENARIO --agents N`: one run over N agents, as if
//! one generator had run it.
//!
//! ```text
//!  listen ── agents join: token proved both ways, clock offset measured (refused above the
//!  │         bound), shard claimed (a taken one refused); --join-timeout: exit 3 naming who is missing
//!  session ─ setup runs ONCE here, results directory, watchers, --metrics-listen
//!  assign ── scenario, shard, setup values, target ──> every agent builds its plan, says Ready
//!  start ─── one instant, sent to each agent on its own clock (the offset corrected)
//!  load ──── agents' seconds ──> Join (second k whole when every live agent sent it)
//!            ──> the session's Pipeline: judge (SLO watch, abort_when), exporter, results, live line
//!            a rule trips or Ctrl-C: Stop to every agent at once; an agent lost: named, marked
//!  summary ─ the same judging and files as `run`; a lost agent makes the verdict inconclusive
//! ```
//!
//! The coordinator is an interval source for [`Session::load_from`]: what
//! comes after the merge (files, verdict, report) is `conclude`'s, as for `run`.
//! `agents.jsonl` in the results adds the fleet's own lines: joins with
//! clock offsets, each agent's counts per second, losses and missed seconds.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::Result;
use perfops_core::fleet::clock::Estimate;
use perfops_core::fleet::join::{Join, Limits, Taken};
use perfops_core::fleet::wire::{self, Assignment, Control, Message};
use perfops_core::measure::Stats;
use perfops_core::model::Shard;
use perfops_core::pipeline::AbortWhen;
use perfops_core::scenario::Override;
use perfops_engine::Plan;
use perfops_report::results::JsonLines;
use perfops_report::run::ProtocolUse;
use serde::Serialize;

use super::accept::{self, Arrived};
use super::agent::wall_ns;
use super::conn::{self, Event, Hub, Outbox};
use super::gate::{REASON_CHARS, sanitize};
use crate::conclude::{self, Ending};
use crate::exit::{Exit, UsageError};
use crate::loading::load_scenario;
use crate::session::{Session, SessionArgs};
use crate::shard::Placement;
use crate::shipped::Shipped;
use crate::source::{Feed, IntervalSource, Produced};

/// Flags of `perfops coordinator`.
#[derive(Debug, Clone)]
pub struct CoordinatorArgs {
    /// The scenario and how to run it.
    pub session: SessionArgs,
    /// How many agents run the load; each runs 1/N of it.
    pub agents: u32,
    /// Where agents join (`perfops agent --join https://THIS`; the channel is always TLS).
    pub listen: String,
    /// The shared secret, at least 128 bits (`openssl rand -hex 16`; else the environment
    /// variable PERFOPS_TOKEN; neither: one is generated and printed once). Never sent, only proved.
    pub token: Option<String>,
    /// Refuse an agent whose clock is further off than this.
    pub max_clock_offset: Duration,
    /// Wait this long for every agent; then exit 3 naming the missing shards.
    pub join_timeout: Duration,
    /// An agent silent this long during the load is lost.
    pub agent_timeout: Duration,
    /// Serve agents with this certificate chain (PEM; agents verify it with --tls-ca); without it,
    /// a self-signed certificate made at start, its SHA-256 fingerprint printed.
    pub tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    pub tls_key: Option<PathBuf>,
}

/// A placed agent.
struct Member {
    name: String,
    addr: SocketAddr,
    /// Its pump's connection id.
    conn: usize,
    estimate: Estimate,
    out: Outbox,
    done: Option<Done>,
    /// Lost: at which second of the session clock, and why.
    lost: Option<(u32, String)>,
    /// How its seconds read here (the counters and kinds its `Hello` named).
    layout: wire::Layout,
}

/// What an agent said when it finished.
struct Done {
    elapsed: Duration,
    workers: u64,
    naps: u64,
    longest_nap: Duration,
    late: Duration,
    /// What each step spoke on this agent, by step index.
    protocols: Vec<String>,
    /// The pacer its open model ran on, as it said (`None`: no open model, or
    /// an agent that does not say).
    pacer: Option<perfops_engine::Pacer>,
    /// How long its workers waited for a CPU that others held.
    cpu_wait: Duration,
}

/// One line of `agents.jsonl`.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum AgentLine {
    /// Agent `agent` joined, with its clock offset (its clock minus the coordinator's).
    Joined { agent: u32, name: String, addr: String, clock_offset_ms: f64, rtt_ms: f64 },
    /// A peer was refused.
    Refused { addr: String, reason: String },
    /// Agent `agent`'s second `t` (session clock), as it sent it.
    Second { agent: u32, t: u32, sent: u64, completed: u64, failed: u64, dropped: u64, latency_count: u64 },
    /// Agent `agent` was lost at second `t`: its seconds from `t` on are missing.
    Lost { agent: u32, name: String, t: u32, reason: String },
    /// The run's second `t` lacks agent `agent`'s share.
    Missed { agent: u32, t: u32 },
    /// Agent `agent` finished.
    Done { agent: u32, elapsed_s: f64, interrupted: bool },
}

/// The fleet during a run.
struct Fleet {
    members: Vec<Member>,
    events: Receiver<Event>,
    arrivals: Receiver<Arrived>,
    lines: Vec<AgentLine>,
    out: Option<JsonLines>,
    silence: Duration,
}

impl Fleet {
    fn log(&mut self, line: AgentLine) {
        match &mut self.out {
            Some(out) => {
                if let Err(e) = out.append("agents.jsonl", &line) {
                    note!("cannot write agents.jsonl ({e})");
                    self.out = None;
                }
            }
            None => self.lines.push(line),
        }
    }

    /// Write what was said before the results directory existed, then write as it comes.
    fn open(&mut self, dir: &Path) {
        let mut out = JsonLines::new(dir);
        for line in self.lines.drain(..) {
            if let Err(e) = out.append("agents.jsonl", &line) {
                note!("cannot write agents.jsonl ({e})");
                return;
            }
        }
        self.out = Some(out);
    }

    fn index_of(&self, conn: usize) -> Option<usize> {
        self.members.iter().position(|m| m.conn == conn)
    }

    fn say_all(&self, c: &Control) {
        for m in &self.members {
            let _ = m.out.send(Message::Control(c.clone()));
        }
    }

    /// Late comers are refused, each with a line saying why.
    fn refuse_late(&mut self) {
        while let Ok(a) = self.arrivals.try_recv() {
            match a {
                Ok(mut a) => {
                    let reason = match a.claim {
                        Some(i) => format!("the run has started: shard {i} is already running (not run twice)"),
                        None => "the run has started with every shard taken".to_string(),
                    };
                    note!("refused agent {} ({}): {reason}", a.name, a.conn.peer);
                    let _ = a.conn.control(Control::Refused { reason: reason.clone() });
                    self.log(AgentLine::Refused { addr: a.conn.peer.to_string(), reason });
                }
                Err((addr, reason)) => self.refused(addr, reason),
            }
        }
    }

    fn refused(&mut self, addr: SocketAddr, reason: String) {
        if addr.port() == 0 {
            // Not a peer: the listener itself (out of file descriptors).
            note!("{reason}");
            return;
        }
        note!("refused a peer from {addr}: {reason}");
        self.log(AgentLine::Refused { addr: addr.to_string(), reason });
    }
}

/// `perfops coordinator`: one run over N agents, merged live into one results directory.
pub fn run(args: CoordinatorArgs) -> Result<Exit> {
    let (token, generated) = match args.token.as_deref() {
        None | Some("") => (super::auth::generate_token()?, true),
        Some(t) => (super::token(Some(t))?, false),
    };
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    // Checked before anyone joins: a scenario with errors costs no agent its time.
    let mut overrides = args.session.set.clone();
    if let Some(t) = &args.session.target {
        overrides.push(Override { path: "target".into(), value: t.clone() });
    }
    let Some((_, text)) = load_scenario(&args.session.scenario, &overrides)? else { return Ok(Exit::Usage) };
    // The channel is always TLS (issue #31): with the user's certificate, or one made now.
    let (tls, made) = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => (conn::server_tls(c, k).map_err(|e| usage(format!("{e:#}")))?, None),
        _ => {
            let (config, print) = conn::ephemeral_tls()?;
            (config, Some(print))
        }
    };
    let listener = TcpListener::bind(&args.listen).map_err(|e| usage(format!("--listen {}: {e}", args.listen)))?;
    let addr = listener.local_addr()?;
    let n = args.agents as usize;
    note!("coordinator listening on {addr} (TLS): waiting up to {:?} for {n} agent(s)", args.join_timeout);
    if let Some(print) = &made {
        note!(
            "TLS with a self-signed certificate made for this run, SHA-256 {print} (agents need no \
             --tls-ca: the token handshake is bound to the TLS session)"
        );
    }
    if generated {
        // Once, here, and nowhere else: not in the results, meta.json or agents.jsonl.
        note!(
            "no --token or PERFOPS_TOKEN: generated one for this run. Start each agent with:\n  \
             PERFOPS_TOKEN={token} perfops agent --join https://{}",
            join_address(addr)
        );
    }

    let (arrive_tx, arrivals) = mpsc::channel();
    let hub = Hub::start()?;
    let door = accept::open(&hub, listener, token.clone(), tls, args.max_clock_offset, arrive_tx)?;
    let (events_tx, events) = mpsc::channel();
    let mut fleet =
        Fleet { members: Vec::new(), events, arrivals, lines: Vec::new(), out: None, silence: args.agent_timeout };
    let Some(members) = gather(&mut fleet, &hub, n, args.join_timeout, &events_tx)? else {
        door.say_unsaid();
        return Ok(Exit::Runtime);
    };
    fleet.members = members;

    // The setup runs once, here; its values go to every agent.
    let Some(mut s) = Session::open(&args.session, "coordinator", &Placement::default())? else {
        fleet.say_all(&Control::Bye);
        linger(fleet.members);
        return Ok(Exit::Usage);
    };
    fleet.open(s.dir.path());
    let stages = crate::loading::stage_plans(&s.scenario.load, Shard::WHOLE);
    let model = crate::loading::load_model(&s.scenario.load)?;
    let ends = perfops_core::pipeline::StageLedger::new(&stages, 0.0).ends().to_vec();
    let assignment = match assignment(&s, &args, text, overrides, &ends) {
        Ok(a) => a,
        Err(e) => {
            fleet.say_all(&Control::Bye);
            linger(fleet.members);
            return Err(e);
        }
    };
    fleet.say_all(&Control::Assign(Box::new(assignment)));
    if let Err(e) = ready(&mut fleet) {
        fleet.say_all(&Control::Bye);
        note!("{e:#}");
        door.say_unsaid();
        linger(fleet.members);
        return Ok(Exit::Runtime);
    }
    note!(
        "{} — {} stage(s), {:.0} s on {n} agent(s); results in {}",
        s.scenario.name,
        stages.len(),
        s.scenario.load.duration().as_secs_f64(),
        s.dir.path().display()
    );
    let mut abort = AbortWhen::new(&s.scenario.abort_when);
    // The start goes to every agent: on the first whole second at least this far ahead.
    let lead = Duration::from_millis(500);
    // Actions by hand reach every agent with the second they take effect
    // at, as the start does: at least the start's lead ahead.
    let outs: Vec<_> = fleet.members.iter().map(|m| m.out.clone()).collect();
    s.relayed(
        lead,
        Box::new(move |action, at_s, by| {
            for out in &outs {
                let _ = out.send(Message::Control(Control::Steer { action: action.to_string(), at_s, by: by.into() }));
            }
        }),
    );
    let loaded =
        s.load_from(model, &stages, Some(&mut abort), lead, |plan, offset| Agents { fleet: &mut fleet, plan, offset });
    fleet.say_all(&Control::Bye);
    let loaded = loaded?;
    s.close();
    // A stop by hand is said as one (`stopped by hand at t=...`), not as an interruption.
    let by_hand = loaded.events.iter().any(|(_, e)| e.action == "stop");
    let interrupted = loaded.stopped && abort.reason().is_none() && !by_hand;
    let mut ending = Ending::local(&loaded, interrupted, abort.reason().map(str::to_string));
    let (gaps, first_loss) = losses(&fleet.members);
    ending.gaps = gaps;
    ending.short_from = first_loss.map(|t| (f64::from(t), format!("a generator was lost at t={t}s")));
    let mut summary = s.judging().summarize(&loaded, ending);
    door.say_unsaid();
    let exit = conclude::finish(&s.dir, &mut summary, args.session.junit.as_deref(), &mut s.outputs);
    linger(fleet.members);
    exit
}

/// What an agent is told to join: the listening address, with the host's
/// name in place of an unspecified address (0.0.0.0, ::).
fn join_address(addr: SocketAddr) -> String {
    if !addr.ip().is_unspecified() {
        return addr.to_string();
    }
    let host = nix::unistd::gethostname().ok().map_or_else(|| "HOST".into(), |h| h.to_string_lossy().into_owned());
    format!("{host}:{}", addr.port())
}

/// Close the agents' connections and give their pumps a moment to send
/// what is queued (a Bye) before the process exits under them.
fn linger<T>(members: T) {
    drop(members);
    std::thread::sleep(Duration::from_millis(100));
}

/// Place agents in shards as they arrive, until all `n` are in or
/// `within` passed (`None`: said who is missing; the joined were sent away).
fn gather(
    fleet: &mut Fleet,
    hub: &Hub,
    n: usize,
    within: Duration,
    events: &Sender<Event>,
) -> Result<Option<Vec<Member>>> {
    let deadline = Instant::now() + within;
    let mut slots: Vec<Option<Member>> = (0..n).map(|_| None).collect();
    let mut next_conn = 0usize;
    while slots.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let missing: Vec<String> =
                slots.iter().enumerate().filter(|(_, m)| m.is_none()).map(|(i, _)| i.to_string()).collect();
            note!(
                "{} of {n} agent(s) did not join within {within:?}: shard(s) {} missing",
                missing.len(),
                missing.join(", ")
            );
            for m in slots.iter().flatten() {
                let _ = m.out.send(Message::Control(Control::Bye));
            }
            linger(slots);
            return Ok(None);
        }
        // An agent gone before the start frees its shard for a replacement.
        while let Ok(ev) = fleet.events.try_recv() {
            if let Event::Closed(id, why) = ev
                && let Some(i) = slots.iter().position(|m| m.as_ref().is_some_and(|m| m.conn == id))
                && let Some(m) = slots[i].take()
            {
                note!("agent {} (shard {i}) left before the start ({why}); shard {i} is free", m.name);
            }
        }
        let arrival = match fleet.arrivals.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(a) => a,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("the listener stopped"),
        };
        let mut a = match arrival {
            Ok(a) => a,
            Err((addr, reason)) => {
                fleet.refused(addr, reason);
                continue;
            }
        };
        let taken = |i: usize| slots[i].as_ref().map(|m| format!("{} ({})", m.name, m.addr));
        let placed = match a.claim {
            Some(i) if i as usize >= n => Err(format!("shard index {i} is out of range: this run has {n} agents")),
            Some(i) => match taken(i as usize) {
                Some(by) => {
                    Err(format!("shard index {i} is already taken by {by}: refused, so that no shard runs twice"))
                }
                None => Ok(i as usize),
            },
            None => slots.iter().position(Option::is_none).ok_or_else(|| "every shard is taken".to_string()),
        };
        let i = match placed {
            Ok(i) => i,
            Err(reason) => {
                note!("refused agent {} ({}): {reason}", a.name, a.conn.peer);
                let _ = a.conn.control(Control::Refused { reason: reason.clone() });
                fleet.log(AgentLine::Refused { addr: a.conn.peer.to_string(), reason });
                continue;
            }
        };
        let e = a.estimate;
        if a.conn.control(Control::Welcome { index: i as u32, count: n as u32, offset_ns: e.offset_ns }).is_err() {
            continue;
        }
        let (offset_ms, rtt_ms) = (e.offset_ns as f64 / 1e6, e.rtt_ns as f64 / 1e6);
        note!(
            "agent {} ({}) joined as shard {i}/{n}: clock offset {offset_ms:+.2} ms, round trip {rtt_ms:.2} ms",
            a.name,
            a.conn.peer
        );
        // Said once, here: an agent of another build counts kinds this one does not know.
        if let Some(note) = a.layout.note() {
            note!("agent {} is {note}", a.name);
        }
        fleet.log(AgentLine::Joined {
            agent: i as u32,
            name: a.name.clone(),
            addr: a.conn.peer.to_string(),
            clock_offset_ms: offset_ms,
            rtt_ms,
        });
        let addr = a.conn.peer;
        let out = hub.pump(a.conn, next_conn, events.clone());
        slots[i] = Some(Member {
            name: a.name,
            addr,
            conn: next_conn,
            estimate: e,
            out,
            done: None,
            lost: None,
            layout: a.layout,
        });
        next_conn += 1;
    }
    Ok(Some(slots.into_iter().flatten().collect()))
}

/// What every agent gets: the scenario as written and what this side resolved.
fn assignment(
    s: &Session,
    args: &CoordinatorArgs,
    text: String,
    overrides: Vec<Override>,
    ends: &[Duration],
) -> Result<Assignment> {
    let path = &args.session.scenario;
    let folder = path.parent().unwrap_or(Path::new("."));
    // What the scenario reads beside itself (CSV, .proto, the recording): an agent's working
    // directory need not have them.
    let files = Shipped::gather(&s.scenario, folder)?;
    let assignment = Assignment {
        path: path.display().to_string(),
        scenario: text,
        overrides: overrides.into_iter().map(|o| (o.path, o.value)).collect(),
        target: s.url.clone(),
        // As the session read them: the inputs are read (and the target resolved) once.
        env: s.env().clone().into_iter().collect(),
        files: files.into_map(),
        globals: s.globals().clone().into_iter().collect(),
        stage_ends_ns: ends.iter().map(|d| d.as_nanos() as u64).collect(),
        insecure: s.insecure(),
        wait_in_flight: args.session.wait_in_flight,
        workers: args.session.workers as u64,
    };
    // An agent takes no frame larger than this: said here, with the way out, rather than as a
    // refused frame there.
    let bytes = wire::encode(&Message::Control(Control::Assign(Box::new(assignment.clone())))).len();
    if bytes > wire::MAX_FRAME {
        return Err(anyhow::Error::new(crate::exit::UsageError(format!(
            "the scenario and the files it reads (CSV, .proto, a replay's recording) are {:.1} MiB, more than \
             the {} MiB an assignment carries to agents: run `perfops run --shard I/N --start-at T` on each \
             machine with the files beside the scenario, then `perfops merge`",
            bytes as f64 / 1048576.0,
            wire::MAX_FRAME >> 20
        ))));
    }
    Ok(assignment)
}

/// Wait until every agent built its plan.
fn ready(fleet: &mut Fleet) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ready = vec![false; fleet.members.len()];
    while ready.iter().any(|r| !r) {
        fleet.refuse_late();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let slow: Vec<&str> =
                fleet.members.iter().zip(&ready).filter(|(_, r)| !**r).map(|(m, _)| m.name.as_str()).collect();
            anyhow::bail!("agent(s) {} did not get ready within 60 s", slow.join(", "));
        }
        match fleet.events.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(Event::Frame(id, Message::Control(c))) => {
                let Some(i) = fleet.index_of(id) else { continue };
                let name = &fleet.members[i].name;
                match c {
                    Control::Ready => ready[i] = true,
                    Control::Failed { reason } => {
                        anyhow::bail!("agent {name} (shard {i}) cannot run: {}", sanitize(&reason, REASON_CHARS))
                    }
                    _ => {}
                }
            }
            Ok(Event::Closed(id, why)) => {
                if let Some(i) = fleet.index_of(id) {
                    anyhow::bail!("agent {} (shard {i}) left before the start: {why}", fleet.members[i].name);
                }
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("every agent is gone"),
        }
    }
    Ok(())
}

/// The load as the agents run it: an [`IntervalSource`] that starts them at
/// `plan.start_at`, joins their seconds and hands each whole one on, and
/// stops them all when the feed (or Ctrl-C) says so. `offset`: the load's
/// first second on the session clock, as the agents' lines name seconds.
struct Agents<'f> {
    fleet: &'f mut Fleet,
    plan: Plan,
    offset: u32,
}

impl IntervalSource for Agents<'_> {
    fn produce(&mut self, stop: &Arc<AtomicBool>, feed: &mut dyn Feed) -> Result<Produced> {
        drive(self.fleet, &self.plan, self.offset, stop, feed)
    }
}

fn drive(fleet: &mut Fleet, plan: &Plan, offset: u32, stop: &AtomicBool, feed: &mut dyn Feed) -> Result<Produced> {
    let start = plan.start_at.unwrap_or_else(Instant::now);
    let start_wall = wall_ns() + start.saturating_duration_since(Instant::now()).as_nanos() as i64;
    for m in &fleet.members {
        let _ = m.out.send(Message::Control(Control::Start { at: start_wall + m.estimate.offset_ns }));
    }
    let began = Instant::now();
    // An agent still live this long after the planned end (plus its requests' timeout) is lost.
    let tail = plan.timeout + Duration::from_secs(10) + fleet.silence;
    let overdue = plan.end.map(|e| e + tail);
    // #31: an agent's seconds are held to the plan (its keys, its seconds: none can
    // come after `overdue`), and to 30 s ahead of the slowest agent, so what waits
    // for the slowest stays bounded whatever an agent with the token sends.
    let limits = Limits::of_plan(&plan.stage_ends, plan.work.step_names.len(), plan.end, tail, Duration::from_secs(30));
    let mut join = Join::new(fleet.members.len(), fleet.silence, Duration::ZERO, limits);
    // A re-plan by hand (a hold) moves the end: the agents' seconds are held to the new one.
    let (mut overdue, mut replans) = (overdue, 0);
    for (i, m) in fleet.members.iter().enumerate() {
        join.set_layout(i, m.layout.clone());
    }
    let (mut total, mut stop_sent) = (Stats::default(), false);
    let mut failures = perfops_core::measure::FailureSamples::default();
    let mut scratch = Vec::new();
    loop {
        let received = fleet.events.recv_timeout(Duration::from_millis(200));
        let now = began.elapsed();
        match received {
            Ok(Event::Frame(id, msg)) => {
                let Some(i) = fleet.index_of(id) else { continue };
                join.heard(i, now);
                match msg {
                    Message::Received(raw) => match join.received(i, &raw, now, &mut scratch) {
                        Ok((Taken::Added, c)) => fleet.log(AgentLine::Second {
                            agent: i as u32,
                            t: offset + raw.index,
                            sent: c.sent,
                            completed: c.completed,
                            failed: c.failed,
                            dropped: c.dropped,
                            latency_count: c.latency_count,
                        }),
                        Ok((Taken::Ignored(_), _)) => {}
                        // Refused whole (the join marked it lost): what it sent before is kept.
                        Err(e) => lose(fleet, &join, i, offset, e.to_string()),
                    },
                    Message::Second(_) => {}
                    Message::Control(Control::Done {
                        elapsed_ns,
                        interrupted,
                        workers,
                        naps,
                        longest_nap_ns,
                        late_ns,
                        protocols,
                        pacer,
                        cpu_wait_ns,
                    }) => {
                        // Stopped on its own (a signal: a pod deleted or evicted): lost, so that
                        // the seconds after its last lack its share, marked as a closed one's are.
                        if interrupted && !stop_sent {
                            join.lost(i);
                        } else {
                            join.done(i);
                        }
                        fleet.log(AgentLine::Done { agent: i as u32, elapsed_s: elapsed_ns as f64 / 1e9, interrupted });
                        if interrupted && !stop_sent {
                            // Its seconds after this one lack its share as a lost agent's do.
                            let t = offset + join.next_of(i).unwrap_or(0);
                            let m = &mut fleet.members[i];
                            let why = "stopped on its own (a signal on the agent)".to_string();
                            note!("agent {} (shard {i}, {}) {why} at t={t}s", m.name, m.addr);
                            m.lost = Some((t, why.clone()));
                            let name = m.name.clone();
                            fleet.log(AgentLine::Lost { agent: i as u32, name, t, reason: why });
                        }
                        fleet.members[i].done = Some(Done {
                            elapsed: Duration::from_nanos(elapsed_ns),
                            workers,
                            naps,
                            longest_nap: Duration::from_nanos(longest_nap_ns),
                            late: Duration::from_nanos(late_ns),
                            protocols,
                            pacer: pacer.and_then(|w| agent_pacer(Some(&w.name), w.refused.as_deref())),
                            cpu_wait: Duration::from_nanos(cpu_wait_ns),
                        });
                    }
                    Message::Control(Control::Failed { reason }) => {
                        if join.lost(i) {
                            lose(fleet, &join, i, offset, format!("failed: {}", sanitize(&reason, REASON_CHARS)));
                        }
                    }
                    Message::Control(_) => {}
                }
            }
            Ok(Event::Closed(id, why)) => {
                if let Some(i) = fleet.index_of(id)
                    && join.lost(i)
                {
                    // `why` is the connection's own end ("connection closed", a reset, an error).
                    lose(fleet, &join, i, offset, why);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("every agent's connection is gone"),
        }
        for i in join.tick(now) {
            lose(fleet, &join, i, offset, format!("silent for more than {:?}", fleet.silence));
        }
        if let Some(replan) = &plan.replan
            && replan.generation() != replans
            && let Some(current) = replan.current()
        {
            replans = replan.generation();
            let steps = plan.work.step_names.len();
            join.replanned(Limits::of_plan(&current.stage_ends, steps, current.end, tail, Duration::from_secs(30)));
            overdue = current.end.map(|e| e + tail);
        }
        if overdue.is_some_and(|o| now > o) {
            for i in 0..fleet.members.len() {
                if join.lost(i) {
                    lose(fleet, &join, i, offset, "still running long after the planned end".into());
                }
            }
        }
        for r in join.ready() {
            for &i in &r.missing {
                fleet.log(AgentLine::Missed { agent: i as u32, t: offset + r.interval.index });
            }
            total.merge(&r.interval.stats);
            failures.merge(&r.interval.samples);
            feed.second(&r.interval);
        }
        if stop.load(Ordering::Relaxed) && !stop_sent {
            let why = feed.stopping().map_or_else(|| "interrupted on the coordinator".into(), str::to_string);
            note!("stopping every agent ({why})");
            fleet.say_all(&Control::Stop { reason: why });
            stop_sent = true;
        }
        fleet.refuse_late();
        if join.finished() {
            break;
        }
    }
    let done: Vec<&Done> = fleet.members.iter().filter_map(|m| m.done.as_ref()).collect();
    // The latest agent's lateness: the fleet's start is as late as its last generator's.
    Ok(Produced {
        total,
        elapsed: done
            .iter()
            .map(|d| d.elapsed)
            .max()
            .unwrap_or_else(|| Instant::now().saturating_duration_since(start)),
        workers: done.iter().map(|d| d.workers as usize).sum(),
        interrupted: stop.load(Ordering::Relaxed),
        naps: (done.iter().map(|d| d.naps).sum(), done.iter().map(|d| d.longest_nap).max().unwrap_or_default()),
        late: done.iter().map(|d| d.late).max().unwrap_or_default(),
        cpu_wait: done.iter().map(|d| d.cpu_wait).sum(),
        // Each agent decides (ALPN) for itself: what they negotiated is in their Done messages.
        protocols: fleet_protocols(&fleet.members, &plan.work.step_names),
        // Each agent's own handshake: their runs say so.
        tls_refused: None,
        // The agents' samples came with their seconds, checked and bounded by the join.
        failures,
        pacer: fleet_pacer(done.iter().map(|d| d.pacer.as_ref())),
    })
}

/// An agent's word on its pacer, read as untrusted input: an unknown name says
/// nothing, and a reason is cut to what a note may carry.
fn agent_pacer(name: Option<&str>, refused: Option<&str>) -> Option<perfops_engine::Pacer> {
    match name? {
        "io_uring" => Some(perfops_engine::Pacer::Kernel),
        "timerfd" => Some(perfops_engine::Pacer::Timer(refused.map(|r| sanitize(r, REASON_CHARS)))),
        _ => None,
    }
}

/// The fleet's pacer, as the engine decides its workers': one agent on the
/// timerfd pacer makes the fleet's the timerfd's (the first that says why
/// io_uring was refused wins the note), else the kernel's if any agent said so.
fn fleet_pacer<'a>(agents: impl Iterator<Item = Option<&'a perfops_engine::Pacer>>) -> Option<perfops_engine::Pacer> {
    use perfops_engine::Pacer;
    let rank = |p: &Pacer| match p {
        Pacer::Kernel => 0,
        Pacer::Timer(None) => 1,
        Pacer::Timer(Some(_)) => 2,
    };
    agents.flatten().fold(None, |fleet, p| match fleet {
        Some(f) if rank(&f) >= rank(p) => Some(f),
        _ => Some(p.clone()),
    })
}

/// What the fleet's steps spoke: every agent's own negotiation (its Done),
/// grouped; a step is under two names if agents differed. A lost agent
/// that sent no Done says nothing.
fn fleet_protocols(members: &[Member], step_names: &[String]) -> Vec<ProtocolUse> {
    let pairs = members
        .iter()
        .filter_map(|m| m.done.as_ref())
        .flat_map(|d| step_names.iter().map(String::as_str).zip(d.protocols.iter().map(String::as_str)));
    ProtocolUse::group(step_names, pairs)
}

/// Agent `i` is lost: say so, note it, close its connection.
fn lose(fleet: &mut Fleet, join: &Join, i: usize, offset: u32, why: String) {
    let why = sanitize(&why, REASON_CHARS);
    let t = offset + join.next_of(i).unwrap_or(0);
    let m = &mut fleet.members[i];
    note!(
        "agent {} (shard {i}, {}) lost at t={t}s: {why}; what it sent is kept, its seconds from t={t}s \
         on are missing",
        m.name,
        m.addr
    );
    m.lost = Some((t, why.clone()));
    let name = m.name.clone();
    // Dropping the sender closes the connection: a silent agent that wakes up finds it gone and stops.
    m.out = Outbox::gone();
    fleet.log(AgentLine::Lost { agent: i as u32, name, t, reason: why });
}

/// The agents lost, each named with when and why (the summary's gaps: the
/// verdict is inconclusive), and the first loss on the session clock.
fn losses(members: &[Member]) -> (Vec<String>, Option<u32>) {
    let lost: Vec<(u32, String)> = members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            m.lost.as_ref().map(|(t, why)| {
                let gap = format!(
                    "agent {} (shard {i}) lost at t={t}s: {why}; its seconds from then on are missing (agents.jsonl \
                     marks them), the figures after it hold the other agents' share only",
                    m.name
                );
                (*t, gap)
            })
        })
        .collect();
    let first = lost.iter().map(|(t, _)| *t).min();
    (lost.into_iter().map(|(_, g)| g).collect(), first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfops_engine::Pacer;

    #[test]
    fn the_fleets_pacer_is_the_timerfds_if_any_agent_ran_on_it() {
        let kernel = Pacer::Kernel;
        let plain = Pacer::Timer(None);
        let refused = Pacer::Timer(Some("io_uring_setup: Operation not permitted".into()));
        let other = Pacer::Timer(Some("another reason".into()));
        let cases: [(&[Option<&Pacer>], Option<Pacer>); 6] = [
            // no agent ran an open model (or none said)
            (&[None, None], None),
            // every agent on the kernel pacer
            (&[Some(&kernel), Some(&kernel)], Some(Pacer::Kernel)),
            // one on the timerfd pacer makes the fleet's the timerfd's, whatever the order
            (&[Some(&kernel), Some(&plain)], Some(Pacer::Timer(None))),
            (&[Some(&plain), Some(&kernel)], Some(Pacer::Timer(None))),
            // a refusal's reason is kept over a plain timerfd
            (&[Some(&plain), Some(&refused), Some(&kernel)], Some(refused.clone())),
            // the first reason wins
            (&[Some(&refused), None, Some(&other)], Some(refused.clone())),
        ];
        for (agents, want) in cases {
            assert_eq!(fleet_pacer(agents.iter().copied()), want, "{agents:?}");
        }
    }

    #[test]
    fn an_agents_word_on_its_pacer_is_read_as_untrusted() {
        assert_eq!(agent_pacer(Some("io_uring"), None), Some(Pacer::Kernel));
        assert_eq!(agent_pacer(Some("timerfd"), None), Some(Pacer::Timer(None)));
        // an unknown name says nothing
        assert_eq!(agent_pacer(Some("warp drive"), Some("x")), None);
        assert_eq!(agent_pacer(None, None), None);
        // a reason is cut and cleaned as any reason from a peer
        let long = format!("\u{1b}[31m{}", "x".repeat(10_000));
        let Some(Pacer::Timer(Some(why))) = agent_pacer(Some("timerfd"), Some(&long)) else {
            panic!("a timerfd pacer")
        };
        assert!(why.len() <= REASON_CHARS * 4 && !why.contains('\u{1b}'), "{why:?}");
    }
}
