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

/// What the closed-loop users of one worker share: the model, whose time
/// rules say when each user stops, and this worker's share of its request
/// count.
struct Users {
    model: Arc<LoadModel>,
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
        let rules = Rc::new(Users { model, budget: Cell::new(requests), think });
        let users: Vec<JoinHandle<()>> = (0..users)
            .map(|k| {
                // The global number of this user: users join in this order.
                let global = u64::from(shard.index) + k * u64::from(shard.count);
                tokio::task::spawn_local(self.clone().user_loop(global, rules.clone()))
            })
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
            match users.model.turn(global, offset) {
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
            let stage = self.shared.stage_at(offset);
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
