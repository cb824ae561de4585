//! The open model: arrival n is sent at `start + due(n)` whatever the server
//! does (wrk2's rule: absolute due times, never a sum of sleeps), and counted
//! as dropped, never delayed, when `max_in_flight` requests are already out.
//! "At" within a few µs either way (the timer is aimed at the machine's
//! wake-up lateness, `timer.rs`), or up to `coalesce::GATHER` early when it
//! goes out with the arrival before it; an arrival sent early counts from
//! its send.
//!
//! Owns the pacing: which timer the worker sleeps on (the timerfd, or the
//! park hook's nap where every response is dated by the kernel), the
//! arrivals gathered into one wake-up (`coalesce::gather`), and the first
//! poll of each arrival, made here so that its request goes out before the
//! responses of the same wake-up are read (#18; docs/architecture.md, "The
//! open model's wake-ups", has the figures). Not here: what an arrival does
//! (`arrival.rs`), nor when arrivals are due (`perfops_core::model::schedule`).

use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use perfops_core::model::Shard;
use tokio::time::Instant;

use perfops_core::analysis::generator;

use super::arrival::Arrival;
use super::{Key, Worker, new_timer};
use crate::coalesce;
use crate::record::Due;
use crate::steer::Current;
use crate::target::Protocol;
use crate::timer::PreciseTimer;
use crate::uring::{self, Pacer, Sent};

impl Worker {
    /// Open model: dispatch arrival n at `start + due(n)`, whatever the server does.
    ///
    /// Where every response is dated by the kernel (plain TCP, HTTP/1.1's
    /// connections and HTTP/2's and gRPC's alike: no TLS record to decrypt,
    /// no WebSocket message timed by its read), the pacer waits for an
    /// arrival due within `coalesce::PACE_MAX` in the park hook, deaf to the
    /// sockets, and reads the responses that came meanwhile in the same
    /// wake-up: one wake-up per arrival instead of about two (`coalesce`'s
    /// module doc has the figures; docs/architecture.md, "HTTP/2 and gRPC in
    /// the open model", HTTP/2's).
    ///
    /// A plan re-planned by hand (`steer.rs`) is taken at the next wake-up,
    /// or at once by a pacer asleep: arrival n again under the new plan,
    /// which is the old one before its instant.
    pub(super) async fn open_loop(self: Rc<Self>, shard: Shard, max_in_flight: u64) {
        let shared = &*self.shared;
        // Plain TCP: HTTP/1.1 (`http1::stamp_receives`), HTTP/2 and gRPC
        // (`h2/stamped.rs`) read with the kernel's dates. HTTP/2 and gRPC were
        // left on the timerfd when their answers came to be dated: a wake-up
        // for the arrivals and another for their answers.
        let dated = self.stamped && shared.tls.is_none();
        let websocket = shared.work.flows.iter().flat_map(|f| &f.steps).any(|s| s.step.websocket.is_some());
        // The kernel pacer prepares HTTP/1.1 requests on kept connections only.
        if dated && !websocket && shared.protocol == Protocol::Http1 && uring::asked() {
            match uring::start(shared.work.clone()) {
                Ok(()) => {
                    uring::ran(Pacer::Kernel);
                    return self.kernel_loop(shard, max_in_flight).await;
                }
                Err(why) => uring::ran(Pacer::Timer(Some(why.0))),
            }
        } else {
            uring::ran(Pacer::Timer(None));
        }
        let mut timer = if dated && !websocket { PreciseTimer::paced() } else { PreciseTimer::new() };
        // Arrivals sent since the pacer last waited.
        let mut since_wait = 0u32;
        let mut pace = Pace::new(self.plan.borrow().clone(), self.generation.get(), shard);
        while let Some((n, offset, wakes, stage)) = pace.next() {
            self.progress.set(n);
            let due = self.start + offset;
            if wakes {
                if pace.generation != self.generation.get() {
                    pace.switch(self.plan.borrow().clone(), self.generation.get(), n);
                    continue;
                }
                // The first arrival of a wake-up: the arrivals due within the
                // window after it go out with it, early (each counts from its
                // send, `Arrival::due` below), none later than its due time.
                if due > Instant::now() {
                    let woken = tokio::select! {
                        _ = timer.sleep_until(due) => false,
                        _ = self.stop_notify.notified() => true,
                    };
                    // Woken, not stopping: a re-plan (the stop watcher wakes
                    // the pacer for both), or the permit one left while the
                    // pacer was awake. Arrival n again, under the plan as it
                    // is now: never sent before its due time.
                    if woken && !self.stopping.get() {
                        pace.switch(self.plan.borrow().clone(), self.generation.get(), n);
                        continue;
                    }
                    since_wait = 0;
                }
            }
            // Arrivals that go out without a wait between them (a wake-up's
            // gathered ones, or all of them when behind schedule: the lateness
            // shows as latency) let the responses be read now and then.
            since_wait += 1;
            if since_wait.is_multiple_of(READ_EVERY) {
                tokio::task::yield_now().await;
            }
            if self.stopping.get() {
                break;
            }
            self.progress.set(pace.after(n));
            if self.in_flight.get() >= max_in_flight {
                self.drop_arrival(&self.shared.work.flows[self.shared.work.pick(n)], stage);
                continue;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            let me = self.clone();
            let mut task = Box::pin(async move {
                // Sent early (with its wake-up's first arrival, or by the
                // timer's aim), it waited for nothing: its latency counts from
                // its send, never from a due time still to come (which would
                // understate it).
                let start = Instant::now();
                if me.overdue(n, stage, due, start) {
                    me.end();
                    return;
                }
                let (mut conn, mut timer) = {
                    let mut spares = me.spares.borrow_mut();
                    (
                        spares.conns.pop_back().map(|(_, c)| c),
                        spares.timers.pop().unwrap_or_else(|| Box::pin(new_timer())),
                    )
                };
                let arrival = Arrival { seq: n, stage, due: Due::At(counted_from(due, start)), start };
                let ended = me.arrival(&mut conn, timer.as_mut(), arrival).await;
                let mut spares = me.spares.borrow_mut();
                if let Some(conn) = conn {
                    spares.conns.push_back((ended, conn));
                }
                spares.timers.push(timer);
                drop(spares);
                me.end();
            });
            // Sent now, in this poll: spawned, the arrival would start after
            // every task this wake-up woke (the responses that came since the
            // last one), each read and recorded before it, and be late by all
            // of them (#18). Its first poll takes a kept connection, writes the
            // request and waits for the response; the task it becomes reads
            // it. Boxed, the future moves into its task as a pointer, not as
            // its whole state.
            if std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx).is_pending())).await {
                tokio::task::spawn_local(task);
            }
        }
    }
}

impl Worker {
    /// The open model on the kernel pacer (`uring.rs`): an arrival whose
    /// next is due within [`uring::AHEAD`] after it is prepared up to that
    /// long ahead, its first request queued to go out at its due time; the
    /// pacer wakes at most once per [`uring::WINDOW`] and prepares every such
    /// arrival then within reach, submitted in one call. An arrival alone in
    /// its window (the ring would save it no wake-up: below 2,000/s on a
    /// worker), or one that cannot be prepared (no kept connection, a step
    /// rendered per arrival), is sent by the pacer itself at its due time, as
    /// the timerfd pacer sends it, while the prepared ones go out in the ring.
    async fn kernel_loop(self: Rc<Self>, shard: Shard, max_in_flight: u64) {
        let work = &*self.shared.work;
        // Whose first request can go ahead: a literal HTTP/1.1 request, its
        // bytes cached at plan time; not with feeders (a `once` feeder that
        // ran out drops the arrival before its request).
        let ahead: Vec<bool> = work
            .flows
            .iter()
            .map(|f| {
                f.steps.first().is_some_and(|s| {
                    s.cached.is_some()
                        && s.step.stream.is_none()
                        && s.step.websocket.is_none()
                        && s.step.script.call.is_none()
                })
            })
            .map(|literal| literal && work.feeders.is_empty())
            .collect();
        let mut timer = PreciseTimer::paced();
        let mut pace = Pace::new(self.plan.borrow().clone(), self.generation.get(), shard);
        let mut next = pace.next();
        let mut woke = Instant::now();
        // Prepared since the last submission; arrivals since the last wait.
        let (mut queued, mut since_wait) = (0u32, 0u32);
        while let Some((n, offset, _, stage)) = next {
            self.progress.set(n);
            if pace.generation != self.generation.get() {
                pace.switch(self.plan.borrow().clone(), self.generation.get(), n);
                next = pace.next();
                continue;
            }
            let due = self.start + offset;
            let flow = work.pick(n);
            let following = pace.peek_due();
            let now = Instant::now();
            // Due already (the pacer is behind), it goes out now, from here.
            let prepare = ahead[flow] && following.is_some_and(|o| self.start + o < due + uring::AHEAD) && due > now;
            let wait = match prepare {
                true => (due > now + uring::AHEAD).then(|| (due - uring::AHEAD).max(woke + uring::WINDOW)),
                false => (due > now).then_some(due),
            };
            if let Some(at) = wait {
                if queued > 0 {
                    uring::submit();
                    queued = 0;
                }
                let woken = tokio::select! {
                    _ = timer.sleep_until(at) => false,
                    _ = self.stop_notify.notified() => true,
                };
                woke = Instant::now();
                since_wait = 0;
                // Woken, not stopping: a re-plan, or the permit one left:
                // arrival n again, under the plan as it is now.
                if woken && !self.stopping.get() {
                    pace.switch(self.plan.borrow().clone(), self.generation.get(), n);
                    next = pace.next();
                    continue;
                }
            }
            if self.stopping.get() {
                break;
            }
            next = pace.next();
            // Arrivals that go out without a wait between them (behind
            // schedule) let the responses be read now and then, as often as
            // on the timerfd pacer (`READ_EVERY`).
            since_wait += 1;
            if since_wait.is_multiple_of(READ_EVERY) {
                uring::submit();
                queued = 0;
                tokio::task::yield_now().await;
            }
            self.progress.set(pace.after(n));
            // Behind by a stall: late (charged), or never sent once its stage
            // is over. `now` was read before any wait, which only an arrival
            // not yet due takes.
            if due <= now && self.overdue(n, stage, due, now) {
                continue;
            }
            if self.in_flight.get() >= max_in_flight {
                self.drop_arrival(&work.flows[flow], stage);
                continue;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            let kept = if prepare { self.spares.borrow_mut().conns.pop_back() } else { None };
            let sent = match kept {
                Some((since, conn)) => match uring::send_at(conn, flow, due) {
                    Ok(sent) => Some(sent),
                    Err(conn) => {
                        self.spares.borrow_mut().conns.push_back((since, conn));
                        None
                    }
                },
                None => None,
            };
            if sent.is_some() {
                queued += 1;
                // Due within LEAST: submitted now, so that it is not late
                // for want of a submission.
                if due <= Instant::now() + uring::LEAST {
                    uring::submit();
                    queued = 0;
                }
            } else if due > Instant::now() {
                // Sent from here, at its due time (the timer aimed as the
                // timerfd pacer's: a few µs early counts from its send); what
                // was prepared before it goes out in the ring meanwhile.
                if queued > 0 {
                    uring::submit();
                    queued = 0;
                }
                let _ = timer.sleep_until(due).await;
                // Among prepared ones (it found no kept connection, a rare
                // arrival), never before its due time, as they: the few µs
                // of the timer's aim are spun.
                while prepare && Instant::now() < due {
                    std::hint::spin_loop();
                }
            }
            self.launch(n, stage, due, sent).await;
        }
        // What was prepared goes out (the park hook waits in the ring for it).
        uring::submit();
    }

    /// Arrival `n`, due at `due`: its first request already prepared
    /// (`sent`), or sent now.
    async fn launch(self: &Rc<Self>, n: u64, stage: u16, due: Instant, sent: Option<Sent>) {
        let me = self.clone();
        let mut task = Box::pin(async move {
            let mut timer = me.spares.borrow_mut().timers.pop().unwrap_or_else(|| Box::pin(new_timer()));
            let (mut conn, start) = match sent {
                Some(sent) => match sent.await {
                    (mut c, Some(at)) => {
                        c.sent_at(at);
                        (Some(c), at)
                    }
                    // Not sent whole (the connection was closed meanwhile):
                    // closed, and the request goes out on a new one, late,
                    // charged from its due time.
                    (_, None) => (None, Instant::now()),
                },
                None => (me.spares.borrow_mut().conns.pop_back().map(|(_, c)| c), Instant::now()),
            };
            let arrival = Arrival { seq: n, stage, due: Due::At(counted_from(due, start)), start };
            let ended = me.arrival(&mut conn, timer.as_mut(), arrival).await;
            let mut spares = me.spares.borrow_mut();
            // A request sent ahead whose exchange never ran would be read
            // as the next one's answer: that connection is closed.
            if let Some(conn) = conn.filter(|c| !c.is_sent()) {
                spares.conns.push_back((ended, conn));
            }
            spares.timers.push(timer);
            drop(spares);
            me.end();
        });
        // Polled here once, as the timerfd pacer does: an arrival sent now
        // goes out before the responses of this wake-up are read; a prepared
        // one waits for its send's completion.
        if std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx).is_pending())).await {
            tokio::task::spawn_local(task);
        }
    }
}

impl Worker {
    /// Whether arrival `n` of `stage`, due at `due` and about to go out at
    /// `now`, is not sent: due in a stage already over, the generator too far
    /// behind (it stalled) to send it in the stage it was planned for. It is
    /// counted unsent. One sent `generator::LATE` or more after its due time
    /// is counted late, its lateness in its latency (from its due time).
    ///
    /// ```text
    ///   stage 1                       | stage 2
    ///   due: a  b  c  d  e  f         |  g  h  i
    ///   [---- generator stopped --------------]  now: a..f unsent (their stage
    ///                                 |           is over, never a burst of
    ///                                 |           stage 1's load in stage 2),
    ///                                 |           g..i sent late, counted late
    /// ```
    ///
    /// Why not send them all late: the design sends an arrival late only
    /// within its own stage (the catch-up after a short stall, charged in
    /// latency); sent after its stage, a stage's load would land in the next
    /// one's seconds, on top of its own (the issue's t=4 s: 181 sent at once).
    #[inline]
    pub(super) fn overdue(&self, n: u64, stage: u16, due: Instant, now: Instant) -> bool {
        now >= due + generator::LATE && self.held_back(n, stage, now)
    }

    /// [`Worker::overdue`]'s count, off the hot path: unsent (`true`) or late.
    #[cold]
    fn held_back(&self, n: u64, stage: u16, now: Instant) -> bool {
        let key = Key { stage, step: self.shared.work.flows[self.shared.work.pick(n)].first_step() };
        let over = self.plan.borrow().stage_end(stage).is_some_and(|end| now >= self.start + end);
        if over {
            self.rec.borrow_mut().unsent(key);
        } else {
            self.rec.borrow_mut().late(key);
        }
        over
    }

    /// Count as unsent the arrivals of `shard` the pacer never reached
    /// (from [`Worker::progress`] on) that were due before the run was cut
    /// or stopped: the pacer was behind, stalled, when it ended. At a stop,
    /// those due within `generator::LATE` before it were about to go out,
    /// not held back: the stop ended them.
    pub(super) fn count_unsent(&self, shard: Shard) {
        let plan = self.plan.borrow().clone();
        let now = Instant::now().saturating_duration_since(self.start);
        let until = match self.stopped_at.get() {
            Some(at) => at.saturating_duration_since(self.start).saturating_sub(generator::LATE),
            None => now,
        };
        let until = plan.end.map_or(until, |end| until.min(end));
        let mut pace = Pace::new(plan.clone(), self.generation.get(), shard);
        pace.switch(plan, self.generation.get(), self.progress.get());
        let work = &*self.shared.work;
        let mut rec = self.rec.borrow_mut();
        for (n, offset, _, stage) in pace {
            if offset >= until {
                break;
            }
            rec.unsent(Key { stage, step: work.flows[work.pick(n)].first_step() });
        }
    }
}

/// Arrivals a pacer sends without a wait between them (gathered, or
/// behind schedule) before it lets the tasks it woke run: the responses
/// read then free the connections the next arrivals go out on. Why not
/// more: behind schedule every arrival that finds no kept connection
/// connects, which makes the pacer later still. The kernel pacer read them
/// every 64: after its worker was stopped for 50 ms at 10,000/s against a
/// server that answers at once, it opened 2,400-2,900 connections in a 1 s
/// run and never caught up (latency p50 150-280 ms), where the timerfd
/// pacer, reading them every 16, opened 200-650 and did (p50 3-150 ms;
/// three runs each on a busy 2-core machine).
const READ_EVERY: u32 = 16;

/// The open model's arrivals of one worker's shard, in order: each with its due time (an offset
/// from the run's start, the schedule's), whether the pacer wakes for it (`true`) or sends it
/// in the wake-up before, being due within `coalesce::GATHER` after that wake-up's first arrival,
/// and its stage. Ends where the schedule does.
///
/// ```text
///   due:     a0 a1     a2  a3       a4        (a worker's arrivals; window = GATHER)
///   wakes:   W  -      W   -        W         a1, a3 go out with the arrival before them, early
///            |<-w->|   |<-w->|
/// ```
///
/// The pacer's own arithmetic, kept out of its loop to be tested alone; one call per arrival,
/// inlined into the loop, which it leaves as it was. [`Pace::switch`] goes on under a plan
/// re-planned by hand from a given arrival.
pub(super) struct Pace {
    plan: Arc<Current>,
    /// The worker's re-plan generation `plan` is of.
    pub(super) generation: u64,
    /// The next arrival number of this shard.
    next: u64,
    /// Arrival numbers between two of this shard's.
    step: u64,
    /// The due time of the last arrival gathered into the current wake-up.
    gathered: Duration,
}

impl Pace {
    /// The arrivals of `shard` of `plan`'s schedule.
    pub(super) fn new(plan: Arc<Current>, generation: u64, shard: Shard) -> Pace {
        Pace {
            plan,
            generation,
            next: u64::from(shard.index),
            step: u64::from(shard.count.max(1)),
            gathered: Duration::ZERO,
        }
    }

    /// When the arrival [`Iterator::next`] gives next is due, without
    /// taking it (`None`: the schedule ends before it).
    pub(super) fn peek_due(&self) -> Option<Duration> {
        self.plan.schedule()?.due(self.next)
    }

    /// The arrival of this shard after `n`.
    pub(super) fn after(&self, n: u64) -> u64 {
        n.saturating_add(self.step)
    }

    /// Go on under `plan` from arrival `n` (one of this shard's), which is
    /// paced again.
    pub(super) fn switch(&mut self, plan: Arc<Current>, generation: u64, n: u64) {
        (self.plan, self.generation, self.next) = (plan, generation, n);
    }
}

impl Iterator for Pace {
    /// (arrival number, due offset, whether the pacer wakes for it, its stage)
    type Item = (u64, Duration, bool, u16);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let n = self.next;
        let schedule = self.plan.schedule()?;
        let offset = schedule.due(n)?;
        self.next = n.saturating_add(self.step);
        let wakes = offset > self.gathered;
        if wakes {
            let step = self.step;
            let next = (1..).map(|k: u64| schedule.due(n.saturating_add(k * step)));
            self.gathered = coalesce::gather(offset, next, coalesce::gather_window());
        }
        Some((n, offset, wakes, self.plan.stage_at(offset)))
    }
}

/// Where an arrival's latency counts from: its due time, or its send when it went out before it
/// (gathered into an earlier wake-up, or by the timer's aim): it waited for nothing, and counting
/// from a due time still to come would understate it. An arrival sent late is charged its
/// lateness (wrk2's rule: the server's queue, or ours, is in the latency).
#[inline]
fn counted_from(due: Instant, sent: Instant) -> Instant {
    due.min(sent)
}

#[cfg(test)]
mod tests {
    use perfops_core::model::{LoadModel, Rate, Schedule, Segment};

    use super::*;

    /// `schedule` as a worker's plan, in one stage.
    fn plan(schedule: &Schedule) -> Arc<Current> {
        let load = LoadModel::Open { schedule: schedule.clone(), max_in_flight: 1 };
        Arc::new(Current { load, stage_ends: Vec::new(), end: Some(schedule.duration()) })
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A constant rate for a while.
    fn constant(per_s: f64, ms: u64) -> Schedule {
        Schedule::constant(Rate::per_second(per_s).unwrap(), Duration::from_millis(ms)).unwrap()
    }

    /// (arrival, due in µs, wakes).
    type Paced = (u64, u64, bool);

    /// What the pacer does with a shard's arrivals, due times to the nearest microsecond.
    fn paced(schedule: &Schedule, shard: Shard) -> Vec<Paced> {
        Pace::new(plan(schedule), 0, shard)
            .map(|(n, d, w, _)| (n, (d.as_nanos() as f64 / 1000.0).round() as u64, w))
            .collect()
    }

    /// The due times are the schedule's, for the shard's arrivals only, and the pacer wakes for
    /// the first arrival of each window of `GATHER` (100 µs): a worker's arrivals further apart
    /// are each woken for, closer ones go out in pairs or more.
    #[test]
    fn due_times_and_wake_ups_follow_the_schedule() {
        assert_eq!(coalesce::GATHER, us(100), "the cases below are written for a 100 µs window");
        let whole = Shard::WHOLE;
        // (schedule, shard, what the pacer does)
        let cases: Vec<(Schedule, Shard, Vec<Paced>)> = vec![
            // 1,000/s over 3 ms: 1 ms apart, each woken for; arrival 0 is due at the start itself,
            // which the pacer does not wait for.
            (constant(1000.0, 3), whole, vec![(0, 0, false), (1, 1000, true), (2, 2000, true)]),
            // 10,000/s: 100 µs apart, the window: pairs, the second sent 100 µs early.
            (
                constant(10_000.0, 1),
                whole,
                vec![
                    (0, 0, false),
                    (1, 100, true),
                    (2, 200, false),
                    (3, 300, true),
                    (4, 400, false),
                    (5, 500, true),
                    (6, 600, false),
                    (7, 700, true),
                    (8, 800, false),
                    (9, 900, true),
                ],
            ),
            // 20,000/s on 2 workers: each worker's own arrivals (even numbers, odd numbers) are
            // 100 µs apart and paired among themselves, never with another worker's.
            (constant(20_000.0, 1), whole.split(0, 2), (0..10).map(|k| (2 * k, 100 * k, k % 2 == 1)).collect()),
            (
                constant(20_000.0, 1),
                whole.split(1, 2),
                vec![
                    (1, 50, true),
                    (3, 150, false),
                    (5, 250, true),
                    (7, 350, false),
                    (9, 450, true),
                    (11, 550, false),
                    (13, 650, true),
                    (15, 750, false),
                    (17, 850, true),
                    (19, 950, false),
                ],
            ),
            // 5,000/s: 200 µs apart, past the window: each woken for.
            (constant(5000.0, 1), whole, (0..5).map(|n| (n, n * 200, n > 0)).collect()),
        ];
        for (i, (schedule, shard, want)) in cases.into_iter().enumerate() {
            assert_eq!(paced(&schedule, shard), want, "case {i}");
        }
    }

    /// A ramp: the gaps shrink below the window and the pacer starts pairing arrivals where they
    /// do, and every arrival of the schedule is paced once, in order, at its due time.
    #[test]
    fn a_ramp_pairs_arrivals_once_they_are_closer_than_the_window() {
        let ramp = Schedule::new(vec![Segment {
            duration: Duration::from_millis(100),
            from: Rate::per_second(1000.0).unwrap(),
            to: Rate::per_second(30_000.0).unwrap(),
        }])
        .unwrap();
        let got: Vec<(u64, Duration, bool)> =
            Pace::new(plan(&ramp), 0, Shard::WHOLE).map(|(n, d, w, _)| (n, d, w)).collect();
        assert_eq!(got.len() as u64, ramp.total_arrivals());
        for (i, &(n, due, _)) in got.iter().enumerate() {
            assert_eq!((n, Some(due)), (i as u64, ramp.due(i as u64)));
        }
        // Each arrival sent without a wake of its own is due within the window after the last
        // wake-up's first arrival: never more than GATHER early.
        let mut woke = Duration::ZERO;
        for &(n, due, wakes) in &got {
            if wakes {
                woke = due;
            } else {
                assert!(due.saturating_sub(woke) <= coalesce::GATHER + Duration::from_nanos(100), "arrival {n}");
            }
        }
        // Early in the ramp (~1,000/s) every arrival is a wake-up; late (~30,000/s) most are not.
        let early = got.iter().take(20).filter(|a| a.2).count();
        let late = got.iter().rev().take(300).filter(|a| a.2).count();
        assert_eq!(early, 19, "all but arrival 0, due at the start");
        assert!(late < 150, "{late} wake-ups for the last 300 arrivals");
    }

    /// A replay is paced as any schedule: its arrivals at their recorded offsets (over the
    /// speed), a burst at one instant sent in one wake-up, and a shard its arrivals k mod N.
    #[test]
    fn a_replay_is_paced_at_its_recorded_offsets() {
        let text = "# perfops replay v1\noffset_ms,flow\n0,a\n5,a\n5,a\n5,a\n12,a\n";
        let rec = perfops_core::model::Recording::parse(text, &["a"]).unwrap();
        // (speed, shard, what the pacer does)
        let cases: Vec<(f64, Shard, Vec<Paced>)> = vec![
            // The burst at 5 ms: woken for once, the two others go out with it.
            (
                1.0,
                Shard::WHOLE,
                vec![(0, 0, false), (1, 5000, true), (2, 5000, false), (3, 5000, false), (4, 12_000, true)],
            ),
            // Twice as fast: half the offsets.
            (
                2.0,
                Shard::WHOLE,
                vec![(0, 0, false), (1, 2500, true), (2, 2500, false), (3, 2500, false), (4, 6000, true)],
            ),
            // Shard 1 of 2: arrivals 1 and 3, at their own due times.
            (1.0, Shard::WHOLE.split(1, 2), vec![(1, 5000, true), (3, 5000, false)]),
        ];
        for (i, (speed, shard, want)) in cases.into_iter().enumerate() {
            assert_eq!(paced(&rec.schedule(speed).unwrap(), shard), want, "case {i}");
        }
    }

    /// Latency counts from the due time, or from the send when that came first.
    #[test]
    fn lateness_is_charged_and_earliness_is_not() {
        let due = Instant::now() + Duration::from_millis(10);
        // (sent, counted from)
        let cases = [
            // On time: its due time.
            (due, due),
            // Late by 2 ms (a busy worker, or the timer's wake-up): its due time, the 2 ms in
            // its latency.
            (due + Duration::from_millis(2), due),
            // 80 µs early (gathered with the arrival before): its send; counted from the due time
            // its latency would be 80 µs short of what it waited.
            (due - us(80), due - us(80)),
        ];
        for (sent, want) in cases {
            assert_eq!(counted_from(due, sent), want);
        }
    }
}
