//! The run's steering: actions by hand (the live page's buttons, `perfops
//! ctl`) on the load that is running, through the
//! [`Steer`](perfops_core::pipeline::control::Steer) seam.
//!
//! An action takes effect at the next instant every generator can agree on:
//! the start of the next whole second of the session clock at least
//! [`LEAD`] away (a fleet's coordinator takes the same with the wire's lead).
//! Whole seconds keep the stage ledger's placement exact: a second is never
//! split between two plans. At that instant:
//!
//! ```text
//!   act(rate 300) at t=12.7 s ──> T = 13 s (12.7 + 0.2, up to a whole second)
//!     StagedPlan::apply(T) ──> the engine's Replan (workers switch before T)
//!                          └─> the pipeline's Replans (the ledger, Second::events, events.jsonl)
//! ```
//!
//! Owns the instant and who hears of a re-plan; what a re-plan is, is
//! `perfops_core::model::StagedPlan`'s. Refused, with the reason said to the
//! asker: no load running (between `limit`'s attempts, before the first),
//! a load whose arrivals end before the instant, `next` in the last stage
//! (`stop` ends the run), a closed model's users that are not whole or more
//! than its connections.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use perfops_core::model::{LoadModel, StagedPlan, Units};
use perfops_core::pipeline::control::{Action, ControlEvent, Steer};
use perfops_core::pipeline::{Replanned, Replans};
use perfops_engine::{Current, Replan};

/// How far ahead of the asking an action takes effect, at least: the
/// workers look for a new plan every 20 ms, and must have it before the
/// instant.
pub(crate) const LEAD: Duration = Duration::from_millis(200);

/// The longest `by` kept in the results.
const BY_MAX: usize = 40;

/// Where a fleet's coordinator sends an action on to its agents: the
/// action, the second of the load it takes effect at, and who asked.
pub(crate) type Relay = Box<dyn Fn(Action, u32, &str) + Send>;

/// A session's steering: one for the whole session, pointed at each load
/// while it runs.
#[derive(Default)]
pub(crate) struct Steering {
    load: Mutex<Option<Steered>>,
}

/// The load being steered.
pub(crate) struct Steered {
    /// Its stages as re-planned so far.
    pub(crate) plan: StagedPlan,
    /// Its model as it began (max_in_flight, think, connections kept).
    pub(crate) model: LoadModel,
    /// When its second 0 is, and which second of the session clock that is.
    pub(crate) start: Instant,
    pub(crate) offset: u32,
    /// This machine's share of each stage's rate (for the stage plans).
    pub(crate) share: f64,
    /// Where the engine's workers take a new plan.
    pub(crate) engine: Arc<Replan>,
    /// Where the pipeline takes it.
    pub(crate) pipeline: Replans,
    /// How far ahead an action takes effect, at least: [`LEAD`] on one
    /// machine, the start's lead on a fleet (the wire's time).
    pub(crate) lead: Duration,
    /// A fleet's coordinator: where its agents hear of each action.
    pub(crate) relay: Option<Relay>,
}

impl Steering {
    /// Steer `load` from now until [`Steering::end`].
    pub(crate) fn begin(&self, load: Steered) {
        *self.load.lock().unwrap_or_else(PoisonError::into_inner) = Some(load);
    }

    /// The load is over: actions are refused until the next one begins.
    pub(crate) fn end(&self) {
        self.load.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// An agent: take `action` at second `at` of the load, as its
    /// coordinator decided (checked by the caller: see `fleet::agent`).
    pub(crate) fn act_at(&self, action: Action, at: Duration, by: &str) -> Result<ControlEvent, String> {
        let mut load = self.load.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(load) = load.as_mut() else { return Err("no load is running".into()) };
        load.apply(action, at, by)
    }
}

impl Steer for Steering {
    fn act(&self, action: Action, by: &str) -> Result<ControlEvent, String> {
        let mut load = self.load.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(load) = load.as_mut() else { return Err("no load is running".into()) };
        let at = instant(Instant::now().saturating_duration_since(load.start), load.lead);
        let event = load.apply(action, at, by)?;
        if let Some(relay) = &load.relay {
            relay(action, at.as_secs() as u32, &event.by);
        }
        Ok(event)
    }
}

impl Steered {
    /// Take `action` at `at` into the load: the new plan published to the
    /// engine and to the pipeline.
    fn apply(&mut self, action: Action, at: Duration, by: &str) -> Result<ControlEvent, String> {
        let load = self;
        let (plan, stage) = load.plan.apply(action, at)?;
        let schedule = plan.schedule().map_err(|e| format!("{action} at {} s: {e}", at.as_secs()))?;
        let model = match &load.model {
            LoadModel::Open { max_in_flight, .. } => LoadModel::Open { schedule, max_in_flight: *max_in_flight },
            LoadModel::Closed { connections, think, max_requests, .. } => LoadModel::Closed {
                connections: *connections,
                think: *think,
                profile: Some(schedule),
                duration: None,
                max_requests: *max_requests,
            },
        };
        let event = ControlEvent {
            t: f64::from(load.offset) + at.as_secs_f64(),
            action: action.name().into(),
            value: action.value(),
            stage: plan.stages()[stage].name.clone(),
            by: perfops_core::printable::escape(by).chars().take(BY_MAX).collect(),
        };
        let end = model.end();
        load.engine.publish(Current { load: model, stage_ends: plan.ends(), end });
        let open = matches!(load.model, LoadModel::Open { .. });
        load.pipeline.lock().unwrap_or_else(PoisonError::into_inner).push(Replanned {
            event: event.clone(),
            at,
            stage,
            stages: plan.stage_plans(load.share, open),
            stop: action == Action::Stop,
        });
        load.plan = plan;
        Ok(event)
    }
}

/// The stages of a load of `model`, named and timed by `stages`, as a plan
/// to steer; `None` when its stages are not its schedule's pieces one for
/// one (a closed model without a profile, a count of requests): such a
/// load is not steered.
pub(crate) fn staged(model: &LoadModel, stages: impl IntoIterator<Item = (String, Duration)>) -> Option<StagedPlan> {
    let (schedule, units) = match model {
        LoadModel::Open { schedule, .. } => (schedule, Units::Arrivals),
        LoadModel::Closed { profile: Some(p), connections, duration: None, .. } => {
            (p, Units::Users { most: *connections })
        }
        LoadModel::Closed { .. } => return None,
    };
    // A replay's pieces are its seconds' counts, not its stages: its due times are the
    // recording's, which no re-plan keeps.
    if schedule.is_recorded() {
        return None;
    }
    let stages: Vec<(String, Duration)> = stages.into_iter().collect();
    let pieces = schedule.segments();
    if pieces.len() != stages.len() || pieces.iter().zip(&stages).any(|(p, s)| p.duration != s.1) {
        return None;
    }
    Some(StagedPlan::new(stages.into_iter().map(|s| s.0).zip(pieces.iter().copied()), units))
}

/// The instant an action asked `now` into a load takes effect: the next
/// whole second at least `lead` away.
pub(crate) fn instant(now: Duration, lead: Duration) -> Duration {
    Duration::from_secs((now + lead).as_secs_f64().ceil() as u64)
}

/// Whether an agent takes an action its coordinator relayed, `now` into
/// the load: words it knows, to take effect at `at_s`, a second still
/// ahead (by at least the time a worker takes to see a new plan) and no
/// more than [`RELAY_AHEAD_MAX`] ahead. Anything else is refused, and why.
pub(crate) fn check_relayed(action: &str, at_s: u32, now: Duration) -> Result<(Action, Duration), String> {
    let action = Action::parse(action)?;
    let at = Duration::from_secs(u64::from(at_s));
    if at < now + Duration::from_millis(50) {
        return Err(format!(
            "{action} at {at_s} s: that instant has passed ({:.1} s into the load)",
            now.as_secs_f64()
        ));
    }
    if at > now + RELAY_AHEAD_MAX {
        return Err(format!(
            "{action} at {at_s} s: too far ahead ({:.1} s into the load; at most {} s ahead)",
            now.as_secs_f64(),
            RELAY_AHEAD_MAX.as_secs()
        ));
    }
    Ok((action, at))
}

/// The furthest ahead a relayed action may take effect: the coordinator's
/// lead is well under it.
pub(crate) const RELAY_AHEAD_MAX: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    /// The next whole second at least 200 ms away.
    #[test]
    fn an_action_takes_effect_on_the_next_whole_second_far_enough() {
        // (asked at ms into the load, takes effect at s)
        let cases = [
            (0, 1),    // at the start: 1 s (0.2 s is not whole)
            (500, 1),  // half-way: the end of this second
            (800, 1),  // exactly 200 ms before it: still it
            (801, 2),  // less than 200 ms before it: the next
            (1000, 2), // on a second: the next
        ];
        for (ms, want) in cases {
            assert_eq!(instant(Duration::from_millis(ms), LEAD), Duration::from_secs(want), "{ms} ms");
        }
    }

    /// A replay is not steered by hand: its due times are its recording's, which a re-plan (a
    /// rate curve) would not keep, even where its stages are its pieces one for one (a stage a
    /// second); the same curve as an open model's stages is.
    #[test]
    fn a_replay_is_not_steered() {
        let text = "# perfops replay v1\noffset_ms,flow\n0,a\n10,a\n1500,a\n";
        let recording = perfops_core::model::Recording::parse(text, &["a"]).unwrap();
        let schedule = recording.schedule(1.0).unwrap();
        let seconds = || (0..2).map(|i| (format!("replay {i}-{}s", i + 1), Duration::from_secs(1)));
        let replay = LoadModel::Open { schedule: schedule.clone(), max_in_flight: 10 };
        assert_eq!(staged(&replay, seconds()), None);
        let curve = perfops_core::model::Schedule::new(schedule.segments().to_vec()).unwrap();
        let open = LoadModel::Open { schedule: curve, max_in_flight: 10 };
        assert!(staged(&open, seconds()).is_some(), "the same pieces as a rate curve");
    }

    /// What an agent takes from its coordinator's wire, and what it refuses.
    #[test]
    fn a_relayed_action_is_checked_before_it_is_taken() {
        let now = Duration::from_millis(12_300);
        // (words, at s, taken or the refusal starts with)
        let cases: &[(&str, u32, Result<Action, &str>)] = &[
            ("rate 300", 13, Ok(Action::Rate(300.0))), // the next second: taken
            ("stop", 22, Ok(Action::Stop)),            // 9.7 s ahead: still within 10 s
            ("hold", 12, Err("hold at 12 s: that instant has passed")),
            ("next", 23, Err("next at 23 s: too far ahead")),
            ("rate NaN", 13, Err("rate needs a number above 0")),
            ("rate 1e999", 13, Err("rate needs a number above 0")),
            ("\u{1b}[2Jstop", 13, Err("unknown action")),
        ];
        for (i, (words, at, want)) in cases.iter().enumerate() {
            match (check_relayed(words, *at, now), want) {
                (Ok((got, at_d)), Ok(want)) => assert_eq!((got, at_d.as_secs()), (*want, u64::from(*at)), "case {i}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "case {i}: {got}"),
                (got, want) => panic!("case {i}: {got:?}, wanted {want:?}"),
            }
        }
    }
}
