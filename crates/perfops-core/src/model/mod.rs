//! Load models: the plan of a run, apart from its execution (k6's
//! `ExecutorConfig` vs `Executor`). Pure values; the engine turns them into
//! traffic.

mod rate;
mod schedule;

pub use rate::{Rate, RateError};
pub use schedule::{Schedule, ScheduleError, Segment, Shard};

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
