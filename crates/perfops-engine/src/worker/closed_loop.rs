//! The closed model: a worker's users, each a task looping through flows on
//! its own connection, the end of one iteration the start of the next, until
//! the model's time rules ([`LoadModel::turn`]), the request budget
//! (`max_requests`, this worker's share of it) or a stop ends it. Not here:
//! what an iteration does (`arrival.rs`); the naps that let a closed loop's
//! responses gather are set by the ticker (`coalesce::nap_for`, `worker.rs`).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use perfops_core::model::{LoadModel, Shard, Turn};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::arrival::Arrival;
use super::{Worker, new_timer};
use crate::record::Due;

/// What the closed-loop users of one worker share: the model's think time
/// (its time rules are asked of the worker's plan, which a re-plan by hand
/// changes), and this worker's share of its request count.
struct Users {
    /// Requests left to send (`max_requests`).
    budget: Cell<Option<u64>>,
    /// Between a response and the user's next request.
    think: Duration,
}

impl Users {
    /// Take one request from the budget; `false`: none left, the user stops.
    fn take_one(&self) -> bool {
        match self.budget.get() {
            Some(0) => false,
            Some(left) => {
                self.budget.set(Some(left - 1));
                true
            }
            None => true,
        }
    }
}

impl Worker {
    /// Closed model: this worker's `users` (numbered in the whole model from
    /// `shard`), each looping on its connection until the stop rules of
    /// `model` or this worker's share of `max_requests` (`requests`) say so.
    pub(super) async fn closed_loop(
        self: Rc<Self>,
        shard: Shard,
        users: u64,
        requests: Option<u64>,
        model: Arc<LoadModel>,
    ) {
        let think = match *model {
            LoadModel::Closed { think, .. } => think,
            LoadModel::Open { .. } => Duration::ZERO,
        };
        let rules = Rc::new(Users { budget: Cell::new(requests), think });
        let users: Vec<JoinHandle<()>> = user_numbers(shard, users)
            .map(|global| tokio::task::spawn_local(self.clone().user_loop(global, rules.clone())))
            .collect();
        for u in users {
            let _ = u.await;
        }
    }

    /// Closed model: one user looping through flows on its connection, until
    /// one of the `users`' stop rules says so.
    async fn user_loop(self: Rc<Self>, global: u64, users: Rc<Users>) {
        let mut conn = None;
        let mut timer = std::pin::pin!(new_timer());
        let mut seq = global;
        // The end of one iteration (when its last response byte was read) is the
        // start of the next: the few hundred nanoseconds of bookkeeping between
        // them count as the next request's, as they would for any client.
        let mut now = Instant::now();
        loop {
            if self.stopping.get() {
                return;
            }
            let offset = now.saturating_duration_since(self.start);
            // The worker's plan, re-planned by hand or as given (`steer.rs`):
            // its users over time and its stages.
            let (turn, stage) = {
                let plan = self.plan.borrow();
                (plan.load.turn(global, offset), plan.stage_at(offset))
            };
            match turn {
                Turn::Send => {}
                Turn::Stop => return,
                // Not (yet, or any more) one of the active users: wait and look again.
                Turn::Wait => {
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    now = Instant::now();
                    continue;
                }
            }
            if !users.take_one() {
                return;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            now = self.arrival(&mut conn, timer.as_mut(), Arrival { seq, stage, due: Due::OnSend, start: now }).await;
            self.end();
            seq += 1 << 20; // distinct per user, for ${seq} and flow picks
            if !users.think.is_zero() {
                tokio::time::sleep(users.think).await;
                now = Instant::now();
            }
        }
    }
}

/// The global numbers of a worker's `users` (numbered in the whole model from `shard`): users
/// join in the order of their numbers, so that a machine's and a worker's users are those their
/// arrivals would have been, and every user of the model is run exactly once, by one worker.
fn user_numbers(shard: Shard, users: u64) -> impl Iterator<Item = u64> {
    (0..users).map(move |k| u64::from(shard.index) + k * u64::from(shard.count))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every user of a closed model is run once, on one worker of one machine, whatever the
    /// machines and workers: the users of each are its share of the model's.
    #[test]
    fn users_are_numbered_once_across_machines_and_workers() {
        // (users in the model, machines, workers per machine)
        let cases = [
            // One machine, one worker: all of them, in order.
            (5, 1, 1),
            // 10 users on 3 machines of 2 workers: 4 + 3 + 3 per machine, split again.
            (10, 3, 2),
            // Fewer users than workers: some workers have none.
            (3, 2, 4),
            // A single user on many.
            (1, 4, 4),
        ];
        for (n, machines, workers) in cases {
            let mut seen = Vec::new();
            for m in 0..machines {
                let machine = Shard::WHOLE.split(m, machines);
                for w in 0..workers {
                    let worker = machine.split(w, workers);
                    let mine: Vec<u64> = user_numbers(worker, worker.share(n)).collect();
                    assert!(mine.is_sorted(), "users join in order: {mine:?}");
                    seen.extend(mine);
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} users on {machines} x {workers}");
        }
    }

    /// The request budget (`max_requests`, a worker's share): taken one at a time, none past it.
    #[test]
    fn the_request_budget_stops_the_users_at_its_end() {
        let users = Users { budget: Cell::new(Some(2)), think: Duration::ZERO };
        assert_eq!([users.take_one(), users.take_one(), users.take_one()], [true, true, false]);
        let unbounded = Users { budget: Cell::new(None), ..users };
        assert!((0..1000).all(|_| unbounded.take_one()));
    }
}
