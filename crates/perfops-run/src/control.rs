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

use perfops_core::model::{LoadModel, StagedPlan};
use perfops_core::pipeline::control::{Action, ControlEvent, Steer};
use perfops_core::pipeline::{Replanned, Replans};
use perfops_engine::{Current, Replan};

/// How far ahead of the asking an action takes effect, at least: the
/// workers look for a new plan every 20 ms, and must have it before the
/// instant.
pub(crate) const LEAD: Duration = Duration::from_millis(200);

/// The longest `by` kept in the results.
const BY_MAX: usize = 40;

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
}

impl Steer for Steering {
    fn act(&self, action: Action, by: &str) -> Result<ControlEvent, String> {
        let mut load = self.load.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(load) = load.as_mut() else { return Err("no load is running".into()) };
        let at = instant(Instant::now().saturating_duration_since(load.start));
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

/// The instant an action asked `now` into a load takes effect: the next
/// whole second at least [`LEAD`] away.
pub(crate) fn instant(now: Duration) -> Duration {
    Duration::from_secs((now + LEAD).as_secs_f64().ceil() as u64)
}

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
            assert_eq!(instant(Duration::from_millis(ms)), Duration::from_secs(want), "{ms} ms");
        }
    }
}
