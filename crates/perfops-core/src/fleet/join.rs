//! The coordinator's join of its agents' seconds: the run's second `k` is
//! whole once every live agent has sent its `k` (or finished), and it is
//! then the merge of what they sent, exactly as the engine's collector
//! merges its workers.
//!
//! ```text
//!  agent 0   0 1 2 3 4 5 done
//!  agent 1   0 1 2 ✗ (closed, or silent past the limit: lost at 3)
//!  agent 2   0 1 2 3 4 5 done
//!  run       0 1 2 3' 4' 5'       ' = agent 1 missing: marked, never filled in
//! ```
//!
//! An agent is lost when its connection closes, it has been silent longer
//! than the limit, or it sent a second the join refuses; what it sent
//! stays in the seconds it sent, the seconds after are emitted without it
//! and say so ([`Joined::missing`]). A lost agent never comes back. Time
//! enters as a value ([`Join::tick`]), so the whole state machine is
//! tested without a clock.
//!
//! Trust nothing that arrives (#31): an agent holds the token, not the
//! plan. A second is checked whole against the plan ([`Limits`]: the keys
//! that exist, the seconds the load lasts, how far ahead of the slowest
//! agent) and against what an engine can count, before anything of it is
//! added; the sum of every count accepted stays within a `u64`, so no total
//! downstream wraps. So whatever an agent sends, the join holds at most
//! `ahead` seconds of at most `stages x steps` parts, and a refused second
//! leaves no trace in the run ([`Join::received`] lists the refusals).

use std::collections::BTreeMap;
use std::time::Duration;

use super::wire::{Counts, Layout, Message, RawSecond, WireError, decode, encode};
use crate::measure::{FailureSamples, Interval, Key, Stats};

/// Where an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// Sending seconds.
    Live,
    /// Sent its last second and said so.
    Done,
    /// Closed, silent or refused: its seconds from [`Join::next_of`] on are missing.
    Lost,
}

/// One second of the run, merged over the agents that sent it.
#[derive(Debug, Clone)]
pub struct Joined {
    /// The merged second.
    pub interval: Interval,
    /// Agents lost before sending it: their share is missing from it.
    pub missing: Vec<usize>,
}

/// What the plan lets an agent send: the (stage, step) keys that exist, the
/// seconds the load can last, and how far one agent may run ahead of the
/// slowest. The join's memory is bounded by them: at most `ahead` seconds
/// wait, each with at most `stages x steps` parts (7 HDR histograms each,
/// ~1.3 MB), whatever an agent sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Stages of the plan: a key's stage is below this (1 for a plan of one stage).
    pub stages: u16,
    /// Measured steps of the scenario (a WebSocket step's messages row
    /// counts): a key's step is below this.
    pub steps: u16,
    /// A second's index is below this (`u32::MAX`: a plan with no planned end).
    pub seconds: u32,
    /// A second's index is below the slowest live agent's next second plus this.
    pub ahead: u32,
}

impl Limits {
    /// The limits of a plan whose stages end at `stage_ends` (empty: one
    /// stage), with `steps` measured steps, whose load ends at `end` (`None`:
    /// when its last request does, no planned end), after which an agent may
    /// still send for `tail` (its requests' timeout, the wait for them, a
    /// margin); one agent at most `ahead` ahead of the slowest.
    ///
    /// ```text
    ///  0 ─────── stage_ends ──────── end ── tail ──|  seconds = ceil(end + tail) + 1
    ///  slowest live agent's next ──── ahead ──────|  (whichever is sooner)
    /// ```
    pub fn of_plan(
        stage_ends: &[Duration],
        steps: usize,
        end: Option<Duration>,
        tail: Duration,
        ahead: Duration,
    ) -> Limits {
        let secs = |d: Duration| {
            u32::try_from(d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))).unwrap_or(u32::MAX)
        };
        Limits {
            stages: u16::try_from(stage_ends.len().max(1)).unwrap_or(u16::MAX),
            steps: u16::try_from(steps).unwrap_or(u16::MAX),
            seconds: end.map_or(u32::MAX, |e| secs(e.saturating_add(tail)).saturating_add(1)),
            ahead: secs(ahead).max(1),
        }
    }

    /// How many (stage, step) keys can exist.
    pub fn keys(&self) -> u32 {
        u32::from(self.stages) * u32::from(self.steps)
    }
}

/// Why an agent's second was refused: the agent is lost (see [`Join::received`]).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("agent {agent}'s second {index} refused: {why}")]
pub struct Refused {
    /// The agent, by its index.
    pub agent: usize,
    /// The second's index, as it sent it.
    pub index: u32,
    /// What was wrong.
    pub why: Why,
}

/// What was wrong with a refused second.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Why {
    /// An index it sent already, or below one it sent: seconds of one agent
    /// come in order, each once.
    #[error("it was due to send second {next} or later (an index repeated or going backwards)")]
    Backwards {
        /// The first index it may send.
        next: u32,
    },
    /// Past the seconds the plan can last.
    #[error("the plan lasts {seconds} seconds at most")]
    BeyondPlan {
        /// [`Limits::seconds`].
        seconds: u32,
    },
    /// Too far ahead of the slowest live agent.
    #[error("more than {ahead} s ahead of the slowest live agent (at second {slowest})")]
    TooFarAhead {
        /// The slowest live agent's next second.
        slowest: u32,
        /// [`Limits::ahead`].
        ahead: u32,
    },
    /// More parts than the plan has keys.
    #[error("{parts} parts, more than the {keys} (stage, step) keys the plan has")]
    TooManyParts {
        /// Parts in the second.
        parts: u16,
        /// [`Limits::keys`].
        keys: u32,
    },
    /// A key the scenario does not have.
    #[error("stage {stage} step {step} is not in the plan ({stages} stages, {steps} steps)")]
    UnknownKey {
        /// The key's stage.
        stage: u16,
        /// The key's step.
        step: u16,
        /// [`Limits::stages`].
        stages: u16,
        /// [`Limits::steps`].
        steps: u16,
    },
    /// A key twice in one second (an engine sends each once).
    #[error("stage {stage} step {step} twice")]
    DuplicateKey {
        /// The key's stage.
        stage: u16,
        /// The key's step.
        step: u16,
    },
    /// A length or a target no engine gives a second.
    #[error("{0}")]
    Head(String),
    /// What it counted would take the run's total past a `u64`.
    #[error("its counts would take the run's total past u64::MAX")]
    Overflow,
    /// A part that does not decode, or whose counts no engine can produce
    /// (stage and step named).
    #[error("stage {stage} step {step}: {error}")]
    Part {
        /// The key's stage.
        stage: u16,
        /// The key's step.
        step: u16,
        /// What the wire or the checks said.
        error: WireError,
    },
}

#[derive(Debug, Clone)]
struct Agent {
    state: AgentState,
    /// The next second it will send.
    next: u32,
    /// When it was last heard of.
    heard: Duration,
    /// How its seconds' counters and kinds read here (its `Hello` named them).
    layout: Layout,
}

#[derive(Default)]
struct Pending {
    parts: BTreeMap<Key, Stats>,
    samples: FailureSamples,
    in_flight: u64,
    target: Option<f64>,
    length: Duration,
}

/// The join state machine of one run.
pub struct Join {
    agents: Vec<Agent>,
    silence: Duration,
    limits: Limits,
    pending: BTreeMap<u32, Pending>,
    /// Every second below this was emitted.
    emitted: u32,
    /// Every count accepted so far, of every field, added up. Each total the
    /// coordinator and the report compute (a part, a second, a stage, the
    /// run, failures of all kinds) is a part of it: kept within a `u64`, no
    /// sum downstream can wrap, and none needs a check of its own.
    counted: u64,
    /// The keys of the second being checked (reused).
    seen: Vec<Key>,
}

/// What the join made of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The second was added.
    Added,
    /// Ignored: from an agent that is not live (lost, done) or that does not exist (named).
    Ignored(&'static str),
}

impl Join {
    /// The plan was re-planned by hand (a hold moves its end): its seconds
    /// are held to `limits` from now on; never fewer than before, so that
    /// nothing taken so far is past them.
    pub fn replanned(&mut self, limits: Limits) {
        self.limits.seconds = self.limits.seconds.max(limits.seconds);
    }

    /// `agents` agents, all live and heard of at `now`; one silent for
    /// longer than `silence` is lost; their seconds are held to `limits`.
    pub fn new(agents: usize, silence: Duration, now: Duration, limits: Limits) -> Join {
        Join {
            agents: vec![Agent { state: AgentState::Live, next: 0, heard: now, layout: Layout::local() }; agents],
            silence,
            limits,
            pending: BTreeMap::new(),
            emitted: 0,
            counted: 0,
            seen: Vec::new(),
        }
    }

    /// Agent `agent`'s seconds hold what `layout` says (from its `Hello`;
    /// without this, what this build sends).
    pub fn set_layout(&mut self, agent: usize, layout: Layout) {
        if let Some(a) = self.agents.get_mut(agent) {
            a.layout = layout;
        }
    }

    /// Agent `agent` was heard of at `now` (any frame, a heartbeat too).
    pub fn heard(&mut self, agent: usize, now: Duration) {
        if let Some(a) = self.agents.get_mut(agent) {
            a.heard = a.heard.max(now);
        }
    }

    /// Agent `agent` sent second `iv` at `now`: as [`Join::received`], through
    /// the wire's encoding (what a coordinator gets).
    pub fn second(&mut self, agent: usize, iv: &Interval, now: Duration) -> Result<Taken, Refused> {
        let frame = encode(&Message::Second(Box::new(iv.clone())));
        let Ok(Message::Received(raw)) = decode(&frame[4..]) else { unreachable!("a second encoded here decodes") };
        self.received(agent, &raw, now, &mut Vec::new()).map(|(t, _)| t)
    }

    /// Agent `agent` sent `raw` at `now`: checked against the plan and the
    /// run so far, then its parts added straight into the second being
    /// assembled (`scratch`: reused inflate space), and what it counted.
    ///
    /// A second is refused whole, before anything of it is added, when its
    /// index repeats or goes backwards, passes the plan's seconds or runs
    /// too far ahead of the slowest live agent; when it holds more parts
    /// than the plan has keys, a key the plan does not have, or one twice;
    /// when a part does not decode or counts what no engine can
    /// ([`crate::fleet::wire::RawPart::check`]); when its counts would take the run's total past
    /// a `u64`. The agent is then lost: what it sent before stays, its
    /// seconds from [`Join::next_of`] on are missing; the caller closes it.
    pub fn received(
        &mut self,
        agent: usize,
        raw: &RawSecond,
        now: Duration,
        scratch: &mut Vec<u8>,
    ) -> Result<(Taken, Counts), Refused> {
        let Some(a) = self.agents.get(agent) else { return Ok((Taken::Ignored("no such agent"), Counts::default())) };
        if a.state != AgentState::Live {
            return Ok((Taken::Ignored("not live"), Counts::default()));
        }
        let (counted, counts) = match self.check(agent, raw, scratch) {
            Ok(c) => c,
            Err(why) => {
                self.agents[agent].state = AgentState::Lost;
                return Err(Refused { agent, index: raw.index, why });
            }
        };
        self.counted = counted;
        let a = &mut self.agents[agent];
        a.heard = a.heard.max(now);
        a.next = raw.index + 1;
        let a = &self.agents[agent];
        let p = self.pending.entry(raw.index).or_default();
        for part in raw.parts(&a.layout) {
            // Both read and checked whole by `check`: neither can fail now.
            let Ok(part) = part else { unreachable!("checked") };
            let Ok(()) = part.add_to(p.parts.entry(part.key).or_default(), scratch) else { unreachable!("checked") };
        }
        p.in_flight += raw.in_flight;
        p.target = match (p.target, raw.target) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        p.length = p.length.max(raw.length);
        // Bounded and escaped when read (`wire`); merged first by time, bounded again.
        p.samples.merge(&raw.samples);
        Ok((Taken::Added, counts))
    }

    /// Everything [`Join::received`] refuses, nothing added: the run's new
    /// total and what the second counted.
    fn check(&mut self, agent: usize, raw: &RawSecond, scratch: &mut Vec<u8>) -> Result<(u64, Counts), Why> {
        let (limits, index) = (self.limits, raw.index);
        let next = self.agents[agent].next.max(self.emitted);
        if index < next {
            return Err(Why::Backwards { next });
        }
        if index >= limits.seconds {
            return Err(Why::BeyondPlan { seconds: limits.seconds });
        }
        let slowest = self.agents.iter().filter(|a| a.state == AgentState::Live).map(|a| a.next).min().unwrap_or(next);
        if index >= slowest.saturating_add(limits.ahead) {
            return Err(Why::TooFarAhead { slowest, ahead: limits.ahead });
        }
        if raw.length > Duration::from_secs(1) {
            return Err(Why::Head(format!("a second of {:?}", raw.length)));
        }
        // A schedule's arrivals in one second: finite, and exact as an f64 (2^53),
        // so that the fleet's sum of them stays finite too.
        if let Some(t) = raw.target
            && !(0.0..=9_007_199_254_740_992.0).contains(&t)
        {
            return Err(Why::Head(format!("a target of {t} arrivals")));
        }
        if let Some(((step, _), _)) = raw.samples.iter().find(|((step, _), _)| *step >= limits.steps) {
            return Err(Why::Head(format!("a failure sample of step {step}, where the plan has {}", limits.steps)));
        }
        if u32::from(raw.part_count()) > limits.keys() {
            return Err(Why::TooManyParts { parts: raw.part_count(), keys: limits.keys() });
        }
        // The keys first, sorted to find one twice: a hostile second of ~40,000
        // parts (what a frame holds) costs a sort, not a quadratic search.
        self.seen.clear();
        let layout = &self.agents[agent].layout;
        for part in raw.parts(layout) {
            let part = part.map_err(|error| Why::Part { stage: 0, step: 0, error })?;
            let Key { stage, step } = part.key;
            if stage >= limits.stages || step >= limits.steps {
                return Err(Why::UnknownKey { stage, step, stages: limits.stages, steps: limits.steps });
            }
            self.seen.push(part.key);
        }
        self.seen.sort_unstable();
        if let Some(w) = self.seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(Why::DuplicateKey { stage: w[0].stage, step: w[0].step });
        }
        // The in-flight count is summed over agents: it counts in the total as any count.
        let mut total = u128::from(self.counted) + u128::from(raw.in_flight);
        let mut counts = Counts::default();
        for part in raw.parts(layout) {
            let part = part.map_err(|error| Why::Part { stage: 0, step: 0, error })?;
            let Key { stage, step } = part.key;
            let tally = part.check(scratch).map_err(|error| Why::Part { stage, step, error })?;
            total += tally.sum;
            if total > u128::from(u64::MAX) {
                return Err(Why::Overflow);
            }
            let c = tally.counts;
            // Within the run's total, so within a u64.
            counts.sent += c.sent;
            counts.completed += c.completed;
            counts.failed += c.failed;
            counts.dropped += c.dropped;
            counts.latency_count += c.latency_count;
        }
        let total = u64::try_from(total).map_err(|_| Why::Overflow)?;
        Ok((total, counts))
    }

    /// Agent `agent` finished: everything it had to send was sent.
    pub fn done(&mut self, agent: usize) {
        if let Some(a) = self.agents.get_mut(agent)
            && a.state == AgentState::Live
        {
            a.state = AgentState::Done;
        }
    }

    /// Agent `agent` is lost (its connection closed or failed). True if it was live.
    pub fn lost(&mut self, agent: usize) -> bool {
        match self.agents.get_mut(agent) {
            Some(a) if a.state == AgentState::Live => {
                a.state = AgentState::Lost;
                true
            }
            _ => false,
        }
    }

    /// The time is `now`: agents silent for longer than the limit are lost; they are returned.
    pub fn tick(&mut self, now: Duration) -> Vec<usize> {
        let mut lost = Vec::new();
        for (i, a) in self.agents.iter_mut().enumerate() {
            if a.state == AgentState::Live && now.saturating_sub(a.heard) > self.silence {
                a.state = AgentState::Lost;
                lost.push(i);
            }
        }
        lost
    }

    /// Where agent `agent` is.
    pub fn state(&self, agent: usize) -> Option<AgentState> {
        self.agents.get(agent).map(|a| a.state)
    }

    /// The next second agent `agent` would send (for a lost one: the first it missed).
    pub fn next_of(&self, agent: usize) -> Option<u32> {
        self.agents.get(agent).map(|a| a.next)
    }

    /// What waits to be emitted: seconds, and (stage, step) parts in them.
    /// Bounded by the [`Limits`] (once [`Join::ready`] has run): at most
    /// `ahead` seconds of at most `stages x steps` parts each.
    pub fn held(&self) -> (usize, usize) {
        (self.pending.len(), self.pending.values().map(|p| p.parts.len()).sum())
    }

    /// No agent is live any more: the run's seconds are all in.
    pub fn finished(&self) -> bool {
        self.agents.iter().all(|a| a.state != AgentState::Live)
    }

    /// The seconds that are whole now, in order: those every live agent is
    /// past. Once [`Join::finished`], every second still pending.
    pub fn ready(&mut self) -> Vec<Joined> {
        let below = self.agents.iter().filter(|a| a.state == AgentState::Live).map(|a| a.next).min();
        let mut out = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            let k = *entry.key();
            if below.is_some_and(|b| k >= b) {
                break;
            }
            let p = entry.remove();
            let mut stats = Stats::default();
            for s in p.parts.values() {
                stats.merge(s);
            }
            let missing = self
                .agents
                .iter()
                .enumerate()
                .filter(|(_, a)| a.state == AgentState::Lost && a.next <= k)
                .map(|(i, _)| i)
                .collect();
            let interval = Interval {
                index: k,
                length: p.length,
                in_flight: p.in_flight,
                target: p.target,
                stats,
                parts: p.parts.into_iter().collect(),
                samples: p.samples,
            };
            self.emitted = k + 1;
            out.push(Joined { interval, missing });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::FailureKind;

    /// A plan of 2 stages of 2 steps, 100 s long; 30 s ahead at most.
    const LIMITS: Limits = Limits { stages: 2, steps: 2, seconds: 100, ahead: 30 };

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// Agent `from`'s second `k`: `sent` requests, one latency each of `sent` µs.
    fn iv(k: u32, sent: u64) -> Interval {
        let mut st = Stats { sent, completed: sent, iterations: sent, arrivals_answered: sent, ..Stats::default() };
        for _ in 0..sent {
            st.latency.record(Duration::from_micros(sent * 100));
        }
        st.failures.add(FailureKind::Timeout);
        Interval {
            index: k,
            length: s(1),
            in_flight: 1,
            target: Some(sent as f64),
            stats: st.clone(),
            parts: vec![(Key { stage: 0, step: 0 }, st)],
            samples: FailureSamples::default(),
        }
    }

    fn indices(j: &[Joined]) -> Vec<(u32, Vec<usize>)> {
        j.iter().map(|j| (j.interval.index, j.missing.clone())).collect()
    }

    #[test]
    fn a_second_is_whole_when_every_live_agent_sent_it() {
        let mut j = Join::new(3, s(5), s(0), LIMITS);
        // (agent, second, seconds that become whole after it): a table of arrivals in a
        // realistic order, agents racing each other.
        let steps: Vec<(usize, u32, Vec<u32>)> = vec![
            (0, 0, vec![]),  // one of three
            (2, 0, vec![]),  // two of three
            (0, 1, vec![]),  // agent 0 ahead: second 1 waits too
            (1, 0, vec![0]), // the last of second 0
            (1, 1, vec![]),  // second 1 still lacks agent 2
            (2, 1, vec![1]), // whole
        ];
        for (agent, k, want) in steps {
            assert_eq!(j.second(agent, &iv(k, 10 + agent as u64), s(1)), Ok(Taken::Added));
            let got: Vec<u32> = j.ready().iter().map(|r| r.interval.index).collect();
            assert_eq!(got, want, "after agent {agent} sent {k}");
        }
    }

    #[test]
    fn a_merged_second_is_the_sum_of_the_agents() {
        let mut j = Join::new(2, s(5), s(0), LIMITS);
        // Each agent failed twice in step 1: the second keeps the first three of both, by time.
        let with_samples = |sent: u64, times: [f64; 2]| {
            let mut i = iv(0, sent);
            for t in times {
                i.samples.add((1, FailureKind::Timeout), crate::measure::FailureSample { t, ..Default::default() });
            }
            i
        };
        j.second(0, &with_samples(3, [0.4, 0.9]), s(0)).unwrap();
        j.second(1, &with_samples(5, [0.1, 0.5]), s(0)).unwrap();
        let r = j.ready();
        let m = &r[0].interval;
        assert_eq!(m.stats.sent, 8);
        assert_eq!(m.stats.latency.len(), 8, "histogram counts add up");
        assert_eq!(m.stats.failures[FailureKind::Timeout], 2);
        assert_eq!((m.in_flight, m.target), (2, Some(8.0)));
        assert_eq!(m.parts.len(), 1, "the same key merged, not listed twice");
        assert_eq!(m.stats.latency.max(), Duration::from_micros(500), "each agent's values kept exactly");
        let times: Vec<f64> = m.samples.of((1, FailureKind::Timeout)).iter().map(|x| x.t).collect();
        assert_eq!(times, [0.1, 0.4, 0.5], "the agents' samples, first by time, bounded");
    }

    #[test]
    fn a_lost_agent_is_missing_from_the_seconds_after_its_last() {
        let mut j = Join::new(3, s(5), s(0), LIMITS);
        for k in 0..2 {
            for a in 0..3 {
                j.second(a, &iv(k, 1), s(u64::from(k))).unwrap();
            }
        }
        j.second(0, &iv(2, 1), s(2)).unwrap();
        j.second(2, &iv(2, 1), s(2)).unwrap();
        assert_eq!(indices(&j.ready()), vec![(0, vec![]), (1, vec![])], "second 2 waits for agent 1");
        // Agent 1's connection closes: second 2 is whole without it.
        assert!(j.lost(1));
        assert!(!j.lost(1), "lost once");
        assert_eq!(indices(&j.ready()), vec![(2, vec![1])]);
        // Later seconds are marked too, and what it might still send is ignored.
        assert_eq!(j.second(1, &iv(3, 1), s(3)), Ok(Taken::Ignored("not live")));
        j.second(0, &iv(3, 1), s(3)).unwrap();
        j.second(2, &iv(3, 1), s(3)).unwrap();
        let r = j.ready();
        assert_eq!(indices(&r), vec![(3, vec![1])]);
        assert_eq!(r[0].interval.stats.sent, 2, "only what was sent");
        assert_eq!(j.next_of(1), Some(2), "its first missed second");
    }

    #[test]
    fn silence_past_the_limit_loses_an_agent() {
        let mut j = Join::new(2, s(5), s(0), LIMITS);
        j.second(0, &iv(0, 1), s(1)).unwrap();
        j.heard(1, s(1));
        // (now, agents lost at this tick): agent 1 heard at 1 s, agent 0 kept alive by heartbeats.
        let ticks = [(s(3), vec![]), (s(6), vec![]), (s(7), vec![1]), (s(20), vec![])];
        for (now, want) in ticks {
            j.heard(0, now);
            assert_eq!(j.tick(now), want, "at {now:?}");
        }
        assert_eq!(j.state(1), Some(AgentState::Lost));
        assert_eq!(indices(&j.ready()), vec![(0, vec![1])], "second 0 whole without the silent agent");
    }

    #[test]
    fn finished_agents_flush_every_pending_second() {
        let mut j = Join::new(2, s(5), s(0), LIMITS);
        // Agent 1 stopped early (its last second is partial, and shorter).
        j.second(0, &iv(0, 1), s(0)).unwrap();
        j.second(1, &iv(0, 1), s(0)).unwrap();
        let mut part = iv(1, 1);
        part.length = Duration::from_millis(400);
        j.second(1, &part, s(1)).unwrap();
        j.done(1);
        j.second(0, &iv(1, 1), s(1)).unwrap();
        j.second(0, &iv(2, 1), s(2)).unwrap();
        assert!(!j.finished());
        assert_eq!(indices(&j.ready()), vec![(0, vec![]), (1, vec![]), (2, vec![])], "a done agent holds nothing");
        j.second(0, &iv(3, 1), s(3)).unwrap();
        j.done(0);
        assert!(j.finished());
        let r = j.ready();
        assert_eq!(indices(&r), vec![(3, vec![])]);
        assert_eq!(j.second(0, &iv(4, 1), s(4)), Ok(Taken::Ignored("not live")));
        assert_eq!(j.tick(s(100)), Vec::<usize>::new(), "done agents are never lost");
    }

    /// The coordinator's path: encoded seconds added without a copy per agent give what
    /// decoded seconds merged give, and each agent's counts.
    #[test]
    fn received_seconds_merge_as_decoded_ones() {
        use crate::fleet::wire::{Message, encode, take_frames};
        let (mut raw, mut decoded) = (Join::new(2, s(5), s(0), LIMITS), Join::new(2, s(5), s(0), LIMITS));
        let mut scratch = Vec::new();
        for (agent, sent) in [(0, 3), (1, 5)] {
            let mut bytes = encode(&Message::Second(Box::new(iv(0, sent))));
            let Ok(msgs) = take_frames(&mut bytes) else { panic!("frames") };
            let [Message::Received(r)] = &msgs[..] else { panic!("one second") };
            let (taken, counts) = raw.received(agent, r, s(0), &mut scratch).unwrap();
            assert_eq!(taken, Taken::Added);
            assert_eq!((counts.sent, counts.latency_count, counts.failed), (sent, sent, 1));
            decoded.second(agent, &iv(0, sent), s(0)).unwrap();
        }
        let (a, b) = (raw.ready(), decoded.ready());
        assert_eq!(a[0].interval.stats, b[0].interval.stats);
        assert_eq!(a[0].interval.parts, b[0].interval.parts);
        assert_eq!((a[0].interval.target, a[0].interval.in_flight), (Some(8.0), 2));
    }

    #[test]
    fn a_second_already_emitted_is_refused_not_emitted_again() {
        let mut j = Join::new(2, s(5), s(0), LIMITS);
        j.second(0, &iv(0, 1), s(0)).unwrap();
        j.lost(1);
        assert_eq!(indices(&j.ready()), vec![(0, vec![1])]);
        // Sent again: refused (an agent's seconds come in order, each once), and the agent lost.
        let refused = j.second(0, &iv(0, 1), s(0)).unwrap_err();
        assert_eq!(refused.why, Why::Backwards { next: 1 });
        assert_eq!(j.state(0), Some(AgentState::Lost));
        assert!(j.ready().is_empty());
    }

    /// A second like `iv`'s, its one part's stats changed by `f`.
    fn with(k: u32, f: impl Fn(&mut Stats)) -> Interval {
        let mut i = iv(k, 2);
        f(&mut i.parts[0].1);
        i.stats = i.parts[0].1.clone();
        i
    }

    /// #31 point 4: every way a second can be refused, each named, each
    /// leaving no trace of itself, the agent lost and the other agent's
    /// seconds still whole.
    #[test]
    fn seconds_outside_the_plan_or_the_engine_are_refused() {
        let key = |stage, step| Key { stage, step };
        let two_parts = |k: u32, a: Key, b: Key| {
            let mut i = iv(k, 1);
            i.parts = vec![(a, i.stats.clone()), (b, i.stats.clone())];
            i
        };
        type Case = (&'static str, Vec<(usize, Interval)>, Interval, fn(&Why) -> bool);
        let cases: Vec<Case> = vec![
            // Second 0 twice: an engine sends each second once.
            ("repeated", vec![(0, iv(0, 1))], iv(0, 1), |w| *w == Why::Backwards { next: 1 }),
            // Second 1 after second 2: seconds of one agent come in order.
            ("backwards", vec![(0, iv(2, 1))], iv(1, 1), |w| *w == Why::Backwards { next: 3 }),
            // The plan lasts 100 s: second 100 cannot exist (checked before how far ahead it is).
            ("past the plan", vec![], iv(100, 1), |w| *w == Why::BeyondPlan { seconds: 100 }),
            // Second 4,000,000,000: far past the plan.
            ("far index", vec![], iv(4_000_000_000, 1), |w| matches!(w, Why::BeyondPlan { .. })),
            // Agent 1 is at second 0: second 30 is 30 s ahead of it.
            ("ahead", vec![], iv(30, 1), |w| *w == Why::TooFarAhead { slowest: 0, ahead: 30 }),
            // Stage 2 of a plan of 2 stages (0 and 1).
            ("unknown stage", vec![], two_parts(0, key(0, 0), key(2, 0)), |w| {
                *w == Why::UnknownKey { stage: 2, step: 0, stages: 2, steps: 2 }
            }),
            // Step 7 of a scenario of 2 steps.
            ("unknown step", vec![], two_parts(0, key(0, 0), key(1, 7)), |w| {
                matches!(w, Why::UnknownKey { step: 7, .. })
            }),
            // A failure sample of step 9 of a scenario of 2 steps: no row to show it under.
            (
                "sample of an unknown step",
                vec![],
                {
                    let mut i = iv(0, 1);
                    i.samples.add((9, FailureKind::Timeout), crate::measure::FailureSample::default());
                    i
                },
                |w| matches!(w, Why::Head(h) if h.contains("step 9")),
            ),
            // (0, 1) twice in one second: its counts would be added twice.
            ("key twice", vec![], two_parts(0, key(0, 1), key(0, 1)), |w| {
                *w == Why::DuplicateKey { stage: 0, step: 1 }
            }),
            // Five parts where 2 x 2 keys exist, whatever the keys.
            (
                "too many parts",
                vec![],
                {
                    let mut i = iv(0, 1);
                    i.parts = (0..5).map(|n| (key(0, n % 2), i.stats.clone())).collect();
                    i
                },
                |w| *w == Why::TooManyParts { parts: 5, keys: 4 },
            ),
            // A second of 2 s: an engine's last second is shorter, never longer.
            (
                "long second",
                vec![],
                {
                    let mut i = iv(0, 1);
                    i.length = s(2);
                    i
                },
                |w| matches!(w, Why::Head(_)),
            ),
            // A target that is not a number poisons every rate summed with it.
            (
                "NaN target",
                vec![],
                {
                    let mut i = iv(0, 1);
                    i.target = Some(f64::NAN);
                    i
                },
                |w| matches!(w, Why::Head(_)),
            ),
            // A negative target.
            (
                "negative target",
                vec![],
                {
                    let mut i = iv(0, 1);
                    i.target = Some(-1.0);
                    i
                },
                |w| matches!(w, Why::Head(_)),
            ),
            // Agent 1 counted u64::MAX - 10 requests: 20 more would wrap the run's count.
            ("sent wraps", vec![(1, with(0, |st| st.sent = u64::MAX - 10))], with(0, |st| st.sent = 20), |w| {
                *w == Why::Overflow
            }),
            // Bytes alone past u64::MAX over the run.
            (
                "bytes wrap",
                vec![(1, with(0, |st| st.bytes_in = u64::MAX / 2 + 1))],
                with(0, |st| st.bytes_out = u64::MAX / 2 + 1),
                |w| *w == Why::Overflow,
            ),
            // Failures of two kinds that fit one by one but not added up.
            (
                "failures wrap",
                vec![],
                with(0, |st| {
                    st.failures.add_n(FailureKind::Reset, u64::MAX / 2 + 1);
                    st.failures.add_n(FailureKind::Http5xx, u64::MAX / 2 + 1);
                }),
                |w| matches!(w, Why::Part { error: WireError::Counts(_), .. }),
            ),
            // More iterations than responses: `answered` alone counts both.
            (
                "iterations",
                vec![],
                with(0, |st| st.iterations = st.completed + 1),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("iterations")),
            ),
            // More arrivals answered than responses (#32): `answered` counts both.
            (
                "arrivals answered",
                vec![],
                with(0, |st| st.arrivals_answered = st.completed + 1),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("arrivals answered")),
            ),
            // A success's latency without its service time: `answered` records both.
            (
                "ok without service",
                vec![],
                with(0, |st| st.latency_ok.record(Duration::from_millis(1))),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("service times differ")),
            ),
            // More latencies than requests that ended (responses, failures, cuts).
            (
                "latencies",
                vec![],
                with(0, |st| st.latency.record_us(50, 1000)),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("ended")),
            ),
            // A first-byte time with no response.
            (
                "ttfb",
                vec![],
                with(0, |st| {
                    st.completed = 0;
                    st.iterations = 0;
                    st.arrivals_answered = 0;
                    st.ttfb.record(Duration::from_millis(1));
                }),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("first-byte")),
            ),
            // A connect time with no connection.
            (
                "connect",
                vec![],
                with(0, |st| st.connect.record(Duration::from_millis(1))),
                |w| matches!(w, Why::Part { error: WireError::Counts(m), .. } if m.contains("connect")),
            ),
        ];
        for (name, before, bad, want) in cases {
            let mut j = Join::new(2, s(5), s(0), LIMITS);
            for (agent, good) in &before {
                assert_eq!(j.second(*agent, good, s(0)), Ok(Taken::Added), "{name}: setup");
            }
            let held = j.held();
            let refused = j.second(0, &bad, s(0)).expect_err(name);
            assert!(want(&refused.why), "{name}: {refused}");
            assert_eq!((refused.agent, refused.index), (0, bad.index), "{name}");
            assert!(refused.to_string().starts_with(&format!("agent 0's second {}", bad.index)), "{name}: {refused}");
            assert_eq!(j.held(), held, "{name}: nothing of it added");
            assert_eq!(j.state(0), Some(AgentState::Lost), "{name}: lost");
            // The other agent's seconds are emitted whole, agent 0 marked missing from its next on.
            j.done(1);
            let out = j.ready();
            assert_eq!(
                out.iter().map(|r| r.interval.index).collect::<Vec<_>>(),
                {
                    let mut ks: Vec<u32> = before.iter().map(|(_, i)| i.index).collect();
                    ks.sort_unstable();
                    ks.dedup();
                    ks
                },
                "{name}"
            );
            let next = j.next_of(0).unwrap_or(0);
            for r in &out {
                assert_eq!(r.missing.contains(&0), r.interval.index >= next, "{name}: second {}", r.interval.index);
            }
        }
    }

    /// A histogram that does not decode is a refusal of the whole second, named by its key.
    #[test]
    fn a_damaged_histogram_refuses_the_second_whole() {
        use crate::fleet::wire::{Message, decode, encode};
        let mut j = Join::new(1, s(5), s(0), LIMITS);
        let mut second = iv(0, 3);
        second.parts.insert(0, (Key { stage: 0, step: 0 }, iv(0, 1).stats));
        second.parts[1].0 = Key { stage: 1, step: 1 };
        let mut frame = encode(&Message::Second(Box::new(second)));
        // The last histogram of the last part (its ttfb, empty) made 4 bytes long and garbage:
        // the first part is fine, and must not be added either.
        let n = frame.len();
        frame[n - 4..].copy_from_slice(&4u32.to_le_bytes());
        frame.extend([0xde, 0xad, 0xbe, 0xef]);
        let Ok(Message::Received(raw)) = decode(&frame[4..]) else { panic!("the shape is right") };
        let refused = j.received(0, &raw, s(0), &mut Vec::new()).unwrap_err();
        assert!(matches!(refused.why, Why::Part { stage: 1, step: 1, error: WireError::Histogram(_) }), "{refused}");
        assert_eq!(j.held(), (0, 0), "not even the good part");
        assert!(j.finished());
        assert!(j.ready().is_empty());
    }

    /// A plan's limits: its keys, its seconds with the tail, how far ahead.
    #[test]
    fn limits_follow_the_plan() {
        let ms = Duration::from_millis;
        // (stage ends, steps, end, tail, ahead, want): one line per shape of plan.
        let cases = [
            // One stage (no stage ends), 2 steps, 60 s and a 10.5 s tail: second 71 is its last.
            (vec![], 2, Some(s(60)), ms(10_500), s(30), Limits { stages: 1, steps: 2, seconds: 72, ahead: 30 }),
            // Three stages; a WebSocket step's messages row is a step of its own (3 names).
            (
                vec![s(10), s(20), s(30)],
                3,
                Some(s(30)),
                s(0),
                s(30),
                Limits { stages: 3, steps: 3, seconds: 31, ahead: 30 },
            ),
            // A count of requests: no planned end, only `ahead` bounds the seconds held.
            (vec![s(1)], 1, None, s(10), s(30), Limits { stages: 1, steps: 1, seconds: u32::MAX, ahead: 30 }),
            // An end past what a u32 of seconds holds saturates; an `ahead` of 0 is 1.
            (vec![], 1, Some(Duration::MAX), s(0), s(0), Limits { stages: 1, steps: 1, seconds: u32::MAX, ahead: 1 }),
        ];
        for (ends, steps, end, tail, ahead, want) in cases {
            assert_eq!(Limits::of_plan(&ends, steps, end, tail, ahead), want, "{ends:?} {end:?}");
        }
    }

    /// Second `index` as received, with an empty part (no counts, no
    /// histograms: what an idle engine sends) under each of `keys`: built as
    /// bytes, so that thousands of parts cost kilobytes, not the 1.3 MB of
    /// histograms a `Stats` holds.
    fn raw(index: u32, keys: impl IntoIterator<Item = Key>) -> RawSecond {
        use crate::fleet::wire::{Message, decode};
        let keys: Vec<Key> = keys.into_iter().collect();
        let mut body = vec![2u8];
        body.extend(index.to_le_bytes());
        body.extend(1_000_000_000u64.to_le_bytes()); // length: 1 s
        body.extend(0u64.to_le_bytes()); // in flight
        body.push(0); // no target
        body.push(crate::measure::Counter::COUNT as u8); // counters per part, as Names::local()
        body.push(crate::measure::FailureKind::COUNT as u8); // failure kinds per part
        body.extend((keys.len() as u16).to_le_bytes());
        for k in keys {
            body.extend(k.stage.to_le_bytes());
            body.extend(k.step.to_le_bytes());
            // Every histogram empty: a length of 0 each.
            body.extend(vec![
                0u8;
                8 * (crate::measure::Counter::COUNT + crate::measure::FailureKind::COUNT)
                    + 4 * crate::measure::HistogramKind::COUNT
            ]);
        }
        let Ok(Message::Received(r)) = decode(&body) else { panic!("a valid second") };
        r
    }

    /// #31: an agent that sends thousands of bogus keys or far indexes, or
    /// the most a valid agent may send, never makes the join hold more than
    /// the limits allow.
    #[test]
    fn a_hostile_agent_cannot_grow_what_waits() {
        let limits = Limits { stages: 3, steps: 4, seconds: 1_000_000, ahead: 10 };
        let scratch = &mut Vec::new();
        let every_key = || (0..3).flat_map(|stage| (0..4).map(move |step| Key { stage, step }));
        // Thousands of bogus keys, as many as a frame holds: refused, nothing held.
        let mut j = Join::new(2, s(60), s(0), limits);
        let bogus = raw(0, (0..40_000u32).map(|n| Key { stage: (n % 7) as u16, step: (n / 7) as u16 }));
        assert!(matches!(j.received(0, &bogus, s(0), scratch).unwrap_err().why, Why::TooManyParts { .. }));
        assert_eq!(j.held(), (0, 0));
        // Keys outside the plan, fewer than the plan's count: refused at the first unknown one.
        let bogus = raw(0, (0..12).map(|n| Key { stage: n, step: 100 + n }));
        assert!(matches!(j.received(1, &bogus, s(0), scratch).unwrap_err().why, Why::UnknownKey { .. }));
        assert_eq!(j.held(), (0, 0));
        // Far indexes: refused.
        let mut j = Join::new(3, s(60), s(0), limits);
        assert!(matches!(
            j.received(1, &raw(999_999, every_key()), s(0), scratch).unwrap_err().why,
            Why::TooFarAhead { .. }
        ));
        assert!(matches!(
            j.received(2, &raw(u32::MAX, every_key()), s(0), scratch).unwrap_err().why,
            Why::BeyondPlan { .. }
        ));
        // The most an agent may send while agent 2 stays at second 0: every key of every
        // second it may, and then a thousand more. Held: 10 seconds of 12 parts at most.
        let mut j = Join::new(3, s(60), s(0), limits);
        let mut refused = 0;
        for k in 0..1000 {
            if let Err(e) = j.received(0, &raw(k, every_key()), s(1), scratch) {
                assert!(matches!(e.why, Why::TooFarAhead { slowest: 0, ahead: 10 }), "{e}");
                refused += 1;
            }
            j.ready();
            let (seconds, parts) = j.held();
            assert!(seconds <= 10 && parts <= 10 * 12, "held {seconds} s, {parts} parts after {k}");
        }
        assert_eq!(refused, 1, "refused once, then lost: the rest ignored");
        assert_eq!(j.held(), (10, 120));
    }
}
