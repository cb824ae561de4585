//! Load models: the plan of a run, apart from its execution (k6's
//! `ExecutorConfig` vs `Executor`). Pure values; the engine turns them into
//! traffic.

mod rate;
pub mod replay;
mod schedule;
mod steered;

pub use rate::{Rate, RateError};
pub use replay::{Recording, ReplayError};
pub use schedule::{Schedule, ScheduleError, Segment, Shard};
pub use steered::{HOLD_MAX, StagedPlan, SteeredStage, Units};

use std::time::Duration;

/// How arrivals are generated.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadModel {
    /// Arrivals follow a schedule whatever the server does; in-flight requests
    /// beyond `max_in_flight` are dropped and counted, never delayed.
    Open {
        /// When each arrival is due.
        schedule: Schedule,
        /// The most requests in flight at once (across all workers).
        max_in_flight: u32,
    },
    /// `connections` users each loop request -> response, until the first of
    /// its stop rules says so: `duration`, `max_requests`, the end of
    /// `profile` (or the run's stop flag). With none of them, it runs until
    /// stopped.
    Closed {
        /// Most concurrent users, each with its own connection.
        connections: u32,
        /// Think time between a response and the user's next request.
        think: Duration,
        /// Users over time (the schedule's "rate" is a user count); `None`:
        /// all `connections` users for the whole run.
        profile: Option<Schedule>,
        /// Stop starting requests this long after the start.
        duration: Option<Duration>,
        /// Stop after this many requests in total (across all workers).
        max_requests: Option<u64>,
    },
}

/// What a closed-model user does next (see [`LoadModel::turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Start its next request now.
    Send,
    /// Not one of the active users at this time (the profile has fewer):
    /// look again a little later, holding no connection.
    Wait,
    /// Its run is over: the model's `duration` or `profile` has ended.
    Stop,
}

impl LoadModel {
    /// When the load's time is up, from its start: the schedule's end
    /// (open), or the closed model's `duration` or the end of its `profile`.
    /// `None`: it ends by a count (`max_requests`) or a stop only.
    pub fn end(&self) -> Option<Duration> {
        match self {
            LoadModel::Open { schedule, .. } => Some(schedule.duration()),
            LoadModel::Closed { duration, profile, .. } => match (duration, profile) {
                (Some(d), Some(p)) => Some((*d).min(p.duration())),
                (Some(d), None) => Some(*d),
                (None, p) => p.as_ref().map(Schedule::duration),
            },
        }
    }

    /// Closed model: what user `user` (numbered from 0 in the order users
    /// join) does `offset` into the run, by the model's time rules. Its
    /// `max_requests` is a count, kept by whoever sends (the engine, each
    /// worker its share). An open model has no users: [`Turn::Stop`].
    pub fn turn(&self, user: u64, offset: Duration) -> Turn {
        let LoadModel::Closed { duration, profile, .. } = self else { return Turn::Stop };
        if duration.is_some_and(|d| offset >= d) {
            return Turn::Stop;
        }
        if let Some(p) = profile {
            if offset >= p.duration() {
                return Turn::Stop;
            }
            // The profile's "rate" is a user count; the epsilon keeps a ramp
            // that reaches n exactly from counting n - 1 users.
            if (p.rate_at(offset).as_f64() + 1e-9).floor() as u64 <= user {
                return Turn::Wait;
            }
        }
        Turn::Send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn closed(duration: Option<Duration>, profile: Option<Schedule>) -> LoadModel {
        LoadModel::Closed { connections: 4, think: Duration::ZERO, profile, duration, max_requests: None }
    }

    #[test]
    fn closed_users_stop_by_the_models_rules() {
        // 2 users for 10 s, then 2 -> 4 over 10 s.
        let (two, four) = (Rate::per_second(2.0).unwrap(), Rate::per_second(4.0).unwrap());
        let profile = Schedule::new(vec![
            Segment { duration: secs(10), from: two, to: two },
            Segment { duration: secs(10), from: two, to: four },
        ])
        .unwrap();
        let open = LoadModel::Open { schedule: Schedule::constant(two, secs(1)).unwrap(), max_in_flight: 1 };
        // (model, user, offset, turn)
        let cases = [
            (closed(None, None), 49, secs(3600), Turn::Send), // no rule: until stopped
            (closed(Some(secs(5)), None), 0, secs(4), Turn::Send), // within the duration
            (closed(Some(secs(5)), None), 0, secs(5), Turn::Stop), // at its end: no new request
            (closed(None, Some(profile.clone())), 1, secs(0), Turn::Send), // one of the 2 first users
            (closed(None, Some(profile.clone())), 2, secs(3), Turn::Wait), // the third: not yet
            (closed(None, Some(profile.clone())), 2, secs(15), Turn::Send), // halfway up the ramp: 3 users
            (closed(None, Some(profile.clone())), 3, secs(15), Turn::Wait), // but not 4
            (closed(None, Some(profile.clone())), 0, secs(20), Turn::Stop), // the profile ended
            (closed(Some(secs(5)), Some(profile)), 0, secs(6), Turn::Stop), // the first rule to end wins
            (open, 0, secs(0), Turn::Stop),                   // an open model has no users
        ];
        for (i, (model, user, offset, want)) in cases.into_iter().enumerate() {
            assert_eq!(model.turn(user, offset), want, "case {i}");
        }
    }

    /// #12: when a load's time is up (its requests in flight are cut then).
    #[test]
    fn a_load_ends_when_its_time_rules_say() {
        let two = Rate::per_second(2.0).unwrap();
        let profile = Schedule::constant(two, secs(20)).unwrap();
        let open = |schedule| LoadModel::Open { schedule, max_in_flight: 1 };
        // (model, end)
        let cases = [
            (open(Schedule::constant(two, secs(7)).unwrap()), Some(secs(7))), // the schedule's end
            (closed(Some(secs(5)), None), Some(secs(5))),                     // -d
            (closed(None, Some(profile.clone())), Some(secs(20))),            // the profile's end
            (closed(Some(secs(5)), Some(profile)), Some(secs(5))),            // the first to end
            (closed(None, None), None),                                       // a count (or nothing): no time is up
        ];
        for (i, (model, want)) in cases.into_iter().enumerate() {
            assert_eq!(model.end(), want, "case {i}");
        }
    }
}
