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
//! An agent is lost when its connection closes or it has been silent longer
//! than the limit; what it sent stays in the seconds it sent, the seconds
//! after are emitted without it and say so ([`Joined::missing`]). A lost
//! agent never comes back. Time enters as a value ([`Join::tick`]), so the
//! whole state machine is tested without a clock.

use std::collections::BTreeMap;
use std::time::Duration;

use super::wire::{Counts, RawSecond, WireError};
use crate::measure::{Interval, Key, Stats};

/// Where an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// Sending seconds.
    Live,
    /// Sent its last second and said so.
    Done,
    /// Closed or silent: its seconds from [`Join::next_of`] on are missing.
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

#[derive(Debug, Clone)]
struct Agent {
    state: AgentState,
    /// The next second it will send.
    next: u32,
    /// When it was last heard of.
    heard: Duration,
}

#[derive(Default)]
struct Pending {
    parts: BTreeMap<Key, Stats>,
    in_flight: u64,
    target: Option<f64>,
    length: Duration,
}

impl Pending {
    fn add_head(&mut self, in_flight: u64, target: Option<f64>, length: Duration) {
        self.in_flight += in_flight;
        self.target = match (self.target, target) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.length = self.length.max(length);
    }
}

/// The join state machine of one run.
pub struct Join {
    agents: Vec<Agent>,
    silence: Duration,
    pending: BTreeMap<u32, Pending>,
    /// Every second below this was emitted.
    emitted: u32,
}

/// What the join made of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The second was added.
    Added,
    /// Ignored: from a lost agent, or a second it already sent or emitted (named).
    Ignored(&'static str),
}

impl Join {
    /// `agents` agents, all live and heard of at `now`; one silent for
    /// longer than `silence` is lost.
    pub fn new(agents: usize, silence: Duration, now: Duration) -> Join {
        Join {
            agents: vec![Agent { state: AgentState::Live, next: 0, heard: now }; agents],
            silence,
            pending: BTreeMap::new(),
            emitted: 0,
        }
    }

    /// Agent `agent` was heard of at `now` (any frame, a heartbeat too).
    pub fn heard(&mut self, agent: usize, now: Duration) {
        if let Some(a) = self.agents.get_mut(agent) {
            a.heard = a.heard.max(now);
        }
    }

    /// Agent `agent` sent second `iv` at `now`. Seconds of one agent come in order.
    pub fn second(&mut self, agent: usize, iv: &Interval, now: Duration) -> Taken {
        let p = match self.admit(agent, iv.index, now) {
            Ok(p) => p,
            Err(t) => return t,
        };
        for (key, stats) in &iv.parts {
            p.parts.entry(*key).or_default().merge(stats);
        }
        p.add_head(iv.in_flight, iv.target, iv.length);
        Taken::Added
    }

    /// Agent `agent` sent `raw` at `now`: its parts are added straight into
    /// the second being assembled (`scratch`: reused inflate space). A
    /// second that does not decode is an error: drop that agent.
    pub fn received(
        &mut self,
        agent: usize,
        raw: &RawSecond,
        now: Duration,
        scratch: &mut Vec<u8>,
    ) -> Result<(Taken, Counts), WireError> {
        let p = match self.admit(agent, raw.index, now) {
            Ok(p) => p,
            Err(t) => return Ok((t, Counts::default())),
        };
        let counts = raw.merge_into(&mut p.parts, scratch)?;
        p.add_head(raw.in_flight, raw.target, raw.length);
        Ok((Taken::Added, counts))
    }

    /// The pending second `index`, if agent `agent` may add to it now.
    fn admit(&mut self, agent: usize, index: u32, now: Duration) -> Result<&mut Pending, Taken> {
        let Some(a) = self.agents.get_mut(agent) else { return Err(Taken::Ignored("no such agent")) };
        if a.state != AgentState::Live {
            return Err(Taken::Ignored("not live"));
        }
        if index < a.next || index < self.emitted {
            return Err(Taken::Ignored("already had"));
        }
        a.heard = a.heard.max(now);
        a.next = index + 1;
        Ok(self.pending.entry(index).or_default())
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

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// Agent `from`'s second `k`: `sent` requests, one latency each of `sent` µs.
    fn iv(k: u32, sent: u64) -> Interval {
        let mut st = Stats { sent, completed: sent, iterations: sent, ..Stats::default() };
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
        }
    }

    fn indices(j: &[Joined]) -> Vec<(u32, Vec<usize>)> {
        j.iter().map(|j| (j.interval.index, j.missing.clone())).collect()
    }

    #[test]
    fn a_second_is_whole_when_every_live_agent_sent_it() {
        let mut j = Join::new(3, s(5), s(0));
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
            assert_eq!(j.second(agent, &iv(k, 10 + agent as u64), s(1)), Taken::Added);
            let got: Vec<u32> = j.ready().iter().map(|r| r.interval.index).collect();
            assert_eq!(got, want, "after agent {agent} sent {k}");
        }
    }

    #[test]
    fn a_merged_second_is_the_sum_of_the_agents() {
        let mut j = Join::new(2, s(5), s(0));
        j.second(0, &iv(0, 3), s(0));
        j.second(1, &iv(0, 5), s(0));
        let r = j.ready();
        let m = &r[0].interval;
        assert_eq!(m.stats.sent, 8);
        assert_eq!(m.stats.latency.len(), 8, "histogram counts add up");
        assert_eq!(m.stats.failures[FailureKind::Timeout], 2);
        assert_eq!((m.in_flight, m.target), (2, Some(8.0)));
        assert_eq!(m.parts.len(), 1, "the same key merged, not listed twice");
        assert_eq!(m.stats.latency.max(), Duration::from_micros(500), "each agent's values kept exactly");
    }

    #[test]
    fn a_lost_agent_is_missing_from_the_seconds_after_its_last() {
        let mut j = Join::new(3, s(5), s(0));
        for k in 0..2 {
            for a in 0..3 {
                j.second(a, &iv(k, 1), s(u64::from(k)));
            }
        }
        j.second(0, &iv(2, 1), s(2));
        j.second(2, &iv(2, 1), s(2));
        assert_eq!(indices(&j.ready()), vec![(0, vec![]), (1, vec![])], "second 2 waits for agent 1");
        // Agent 1's connection closes: second 2 is whole without it.
        assert!(j.lost(1));
        assert!(!j.lost(1), "lost once");
        assert_eq!(indices(&j.ready()), vec![(2, vec![1])]);
        // Later seconds are marked too, and what it might still send is ignored.
        assert_eq!(j.second(1, &iv(3, 1), s(3)), Taken::Ignored("not live"));
        j.second(0, &iv(3, 1), s(3));
        j.second(2, &iv(3, 1), s(3));
        let r = j.ready();
        assert_eq!(indices(&r), vec![(3, vec![1])]);
        assert_eq!(r[0].interval.stats.sent, 2, "only what was sent");
        assert_eq!(j.next_of(1), Some(2), "its first missed second");
    }

    #[test]
    fn silence_past_the_limit_loses_an_agent() {
        let mut j = Join::new(2, s(5), s(0));
        j.second(0, &iv(0, 1), s(1));
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
        let mut j = Join::new(2, s(5), s(0));
        // Agent 1 stopped early (its last second is partial, and shorter).
        j.second(0, &iv(0, 1), s(0));
        j.second(1, &iv(0, 1), s(0));
        let mut part = iv(1, 1);
        part.length = Duration::from_millis(400);
        j.second(1, &part, s(1));
        j.done(1);
        j.second(0, &iv(1, 1), s(1));
        j.second(0, &iv(2, 1), s(2));
        assert!(!j.finished());
        assert_eq!(indices(&j.ready()), vec![(0, vec![]), (1, vec![]), (2, vec![])], "a done agent holds nothing");
        j.second(0, &iv(3, 1), s(3));
        j.done(0);
        assert!(j.finished());
        let r = j.ready();
        assert_eq!(indices(&r), vec![(3, vec![])]);
        assert_eq!(j.second(0, &iv(4, 1), s(4)), Taken::Ignored("not live"));
        assert_eq!(j.tick(s(100)), Vec::<usize>::new(), "done agents are never lost");
    }

    /// The coordinator's path: encoded seconds added without a copy per agent give what
    /// decoded seconds merged give, and each agent's counts.
    #[test]
    fn received_seconds_merge_as_decoded_ones() {
        use crate::fleet::wire::{Message, encode, take_frames};
        let (mut raw, mut decoded) = (Join::new(2, s(5), s(0)), Join::new(2, s(5), s(0)));
        let mut scratch = Vec::new();
        for (agent, sent) in [(0, 3), (1, 5)] {
            let mut bytes = encode(&Message::Second(Box::new(iv(0, sent))));
            let Ok(msgs) = take_frames(&mut bytes) else { panic!("frames") };
            let [Message::Received(r)] = &msgs[..] else { panic!("one second") };
            let (taken, counts) = raw.received(agent, r, s(0), &mut scratch).unwrap();
            assert_eq!(taken, Taken::Added);
            assert_eq!((counts.sent, counts.latency_count, counts.failed), (sent, sent, 1));
            decoded.second(agent, &iv(0, sent), s(0));
        }
        let (a, b) = (raw.ready(), decoded.ready());
        assert_eq!(a[0].interval.stats, b[0].interval.stats);
        assert_eq!(a[0].interval.parts, b[0].interval.parts);
        assert_eq!((a[0].interval.target, a[0].interval.in_flight), (Some(8.0), 2));
    }

    #[test]
    fn a_second_already_emitted_is_not_emitted_again() {
        let mut j = Join::new(2, s(5), s(0));
        j.second(0, &iv(0, 1), s(0));
        j.lost(1);
        assert_eq!(indices(&j.ready()), vec![(0, vec![1])]);
        assert_eq!(j.second(0, &iv(0, 1), s(0)), Taken::Ignored("already had"));
        assert!(j.ready().is_empty());
    }
}
