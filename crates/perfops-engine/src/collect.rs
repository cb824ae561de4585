//! The collector's ledger of seconds: the parts of each second shipped so far by the workers, and
//! the rule that says when second k is whole and may be handed on.
//!
//! ```text
//!   worker 0:  ships 0, 1, 2, 3            next[0] = 4
//!   worker 1:  ships 0, 1 ......(late)     next[1] = 2    -> seconds 0 and 1 are whole; 2, 3 wait
//!   worker 2:  ships 0, 1, 2, Done                        -> a done worker holds nothing back
//! ```
//!
//! A worker ships second k when it is past it, and its messages arrive in order, so second k is
//! whole once every worker still running has shipped it (`next` of each is past k); a worker that
//! is done holds nothing back.
//! A worker's last second may be partial (the run stopped within it): it does not move its
//! `next`, so that second waits for the end of the run, where it is handed on with its true length
//! ([`Seconds::rest`]), never as a whole second. Workers' seconds arrive interleaved in any order
//! between workers; whole seconds are handed on in order of their index.
//!
//! It owns the bookkeeping only, once per second and worker, never per request: what a part is
//! and how parts merge is the caller's (`lib.rs`: histograms added, `Stats` given back to their
//! worker).

use std::collections::BTreeMap;
use std::time::Duration;

/// The seconds in progress, of `P` each (the parts shipped so far).
#[derive(Debug)]
pub(crate) struct Seconds<P> {
    pending: BTreeMap<u32, P>,
    /// The next second each worker will ship.
    next: Vec<u32>,
    done: Vec<bool>,
}

impl<P: Default> Seconds<P> {
    /// The ledger of a run of `workers` workers, nothing shipped yet.
    pub(crate) fn new(workers: usize) -> Seconds<P> {
        Seconds { pending: BTreeMap::new(), next: vec![0; workers], done: vec![false; workers] }
    }

    /// `worker` shipped its part of second `index` (`last`: its last, maybe partial): the second's
    /// parts so far, to add it to.
    pub(crate) fn shipped(&mut self, worker: usize, index: u32, last: bool) -> &mut P {
        if !last && let Some(next) = self.next.get_mut(worker) {
            *next = index + 1;
        }
        self.pending.entry(index).or_default()
    }

    /// `worker` has ended: it ships nothing more.
    pub(crate) fn done(&mut self, worker: usize) {
        if let Some(d) = self.done.get_mut(worker) {
            *d = true;
        }
    }

    /// Every worker has ended.
    pub(crate) fn all_done(&self) -> bool {
        self.done.iter().all(|d| *d)
    }

    /// The first second every worker still running is past, taken out; none while the first
    /// second in progress may still get parts, and none once every worker is done (what is left
    /// then is [`Seconds::rest`], with its true length).
    pub(crate) fn whole(&mut self) -> Option<(u32, P)> {
        if self.all_done() {
            return None;
        }
        let running = self.next.iter().zip(&self.done).filter(|(_, d)| !**d);
        let below = running.map(|(n, _)| *n).min().unwrap_or(u32::MAX);
        let entry = self.pending.first_entry()?;
        if *entry.key() >= below {
            return None;
        }
        let k = *entry.key();
        Some((k, entry.remove()))
    }

    /// Once every worker is done, the seconds left, in order, each with its length in a run of
    /// `elapsed`: a second the run ended within is as long as the run was in it.
    pub(crate) fn rest(&mut self, elapsed: Duration) -> Option<(u32, P, Duration)> {
        let (k, p) = self.pending.pop_first()?;
        let from = Duration::from_secs(u64::from(k));
        Some((k, p, elapsed.saturating_sub(from).min(Duration::from_secs(1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second's parts, by who shipped them.
    type Parts = Vec<&'static str>;
    /// The seconds one event let through, with their parts.
    type Handed = Vec<(u32, Parts)>;

    /// What one ship or end does to the ledger, and the seconds handed on after it.
    enum Event {
        /// (worker, second, last, its name in the parts)
        Ship(usize, u32, bool, &'static str),
        Done(usize),
    }
    use Event::{Done, Ship};

    /// Plays `events` into a ledger of `workers`, as the collector's loop does: after each, the
    /// whole seconds handed on. Returns what each event let through, and the ledger.
    fn play(workers: usize, events: &[Event]) -> (Vec<Handed>, Seconds<Parts>) {
        let mut s: Seconds<Parts> = Seconds::new(workers);
        let mut out = Vec::new();
        for e in events {
            match *e {
                Ship(w, k, last, name) => s.shipped(w, k, last).push(name),
                Done(w) => s.done(w),
            }
            out.push(std::iter::from_fn(|| s.whole()).collect());
        }
        (out, s)
    }

    #[test]
    fn a_second_is_handed_on_once_every_worker_is_past_it() {
        // (what happens, what each step hands on)
        let cases: Vec<(&str, usize, Vec<Event>, Vec<Handed>)> = vec![
            (
                // One worker: each second is whole as soon as it ships it.
                "one worker",
                1,
                vec![Ship(0, 0, false, "a0"), Ship(0, 1, false, "a1")],
                vec![vec![(0, vec!["a0"])], vec![(1, vec!["a1"])]],
            ),
            (
                // Worker 1 is late with second 1: worker 0's seconds 1 and 2 wait for it, then go
                // on in order, one by one as worker 1 catches up.
                "a worker late with second k",
                2,
                vec![
                    Ship(0, 0, false, "a0"),
                    Ship(1, 0, false, "b0"),
                    Ship(0, 1, false, "a1"),
                    Ship(0, 2, false, "a2"),
                    Ship(1, 1, false, "b1"),
                    Ship(1, 2, false, "b2"),
                ],
                vec![
                    vec![],
                    vec![(0, vec!["a0", "b0"])],
                    vec![],
                    vec![],
                    vec![(1, vec!["a1", "b1"])],
                    vec![(2, vec!["a2", "b2"])],
                ],
            ),
            (
                // Worker 1 runs ahead: its seconds wait for worker 0's, and once worker 0 ships
                // second 1 the seconds it completes go on together, in order.
                "seconds arriving out of order between workers",
                2,
                vec![
                    Ship(1, 0, false, "b0"),
                    Ship(1, 1, false, "b1"),
                    Ship(1, 2, false, "b2"),
                    Ship(0, 0, false, "a0"),
                    Ship(0, 1, false, "a1"),
                ],
                vec![vec![], vec![], vec![], vec![(0, vec!["b0", "a0"])], vec![(1, vec!["b1", "a1"])]],
            ),
            (
                // A worker that ends (its share of the requests spent) holds nothing back: seconds
                // 1 and 2, which it never shipped, go on with the other's parts alone.
                "a worker that ends",
                2,
                vec![
                    Ship(0, 0, false, "a0"),
                    Ship(1, 0, false, "b0"),
                    Ship(0, 1, false, "a1"),
                    Ship(0, 2, false, "a2"),
                    Done(1),
                ],
                vec![vec![], vec![(0, vec!["a0", "b0"])], vec![], vec![], vec![(1, vec!["a1"]), (2, vec!["a2"])]],
            ),
            (
                // A worker that stops within second 1 (its share of `max_requests` spent) while the
                // other goes through it: the run's second 1 is whole once both are past it.
                "a worker ending within a second the other goes through",
                2,
                vec![
                    Ship(0, 0, false, "a0"),
                    Ship(0, 1, true, "a1 (last)"),
                    Done(0),
                    Ship(1, 0, false, "b0"),
                    Ship(1, 1, false, "b1"),
                ],
                vec![vec![], vec![], vec![], vec![(0, vec!["a0", "b0"])], vec![(1, vec!["a1 (last)", "b1"])]],
            ),
            (
                // A worker's last second may be partial (the run stopped within it): shipping it
                // does not count as being past it, so it is never handed on as a whole second,
                // even once the worker is done; the end of the run gives it its true length.
                "a last, partial second",
                1,
                vec![Ship(0, 0, false, "a0"), Ship(0, 1, true, "a1 (last)"), Done(0)],
                vec![vec![(0, vec!["a0"])], vec![], vec![]],
            ),
        ];
        for (what, workers, events, want) in cases {
            let (got, _) = play(workers, &events);
            assert_eq!(got, want, "{what}");
        }
    }

    /// At the end, the seconds left go on in order, each as long as the run was in it: a run of
    /// 2.4 s has a second 2 of 400 ms; a second past the end (a part shipped as the run was cut)
    /// is empty, never negative.
    #[test]
    fn the_seconds_left_at_the_end_have_their_true_length() {
        let ms = Duration::from_millis;
        let (handed, mut s) = play(
            2,
            &[
                Ship(0, 0, false, "a0"),
                Ship(0, 1, false, "a1"),
                Ship(0, 2, true, "a2 (last)"),
                Ship(1, 0, false, "b0"),
                Ship(1, 1, false, "b1"),
                Ship(1, 2, true, "b2 (last)"),
                Done(0),
                Done(1),
            ],
        );
        assert_eq!(handed.concat().iter().map(|(k, _)| *k).collect::<Vec<_>>(), [0, 1]);
        assert!(s.all_done());
        let rest: Vec<(u32, Parts, Duration)> = std::iter::from_fn(|| s.rest(ms(2400))).collect();
        assert_eq!(rest, vec![(2, vec!["a2 (last)", "b2 (last)"], ms(400))]);
        // A part of a second the run never reached (cut as it began): empty.
        let (_, mut s) = play(1, &[Ship(0, 0, false, "a0"), Ship(0, 1, true, "a1 (last)"), Done(0)]);
        assert_eq!(s.rest(ms(800)), Some((1, vec!["a1 (last)"], ms(0))));
        // A run that lasted whole seconds: its last second is whole.
        let (_, mut s) = play(1, &[Ship(0, 0, true, "a0"), Done(0)]);
        assert_eq!(s.rest(ms(1000)), Some((0, vec!["a0"], ms(1000))));
        assert_eq!(s.rest(ms(1000)), None);
    }

    #[test]
    fn all_done_only_when_every_worker_ended() {
        let mut s: Seconds<Parts> = Seconds::new(3);
        s.done(0);
        s.done(2);
        assert!(!s.all_done());
        s.done(1);
        assert!(s.all_done());
        // A worker number out of range (none is sent) changes nothing rather than panicking.
        s.done(7);
        s.shipped(9, 0, false).push("x");
        assert_eq!(s.whole(), None, "all done: what is left goes at the end, with its length");
        assert_eq!(s.rest(Duration::from_secs(5)), Some((0, vec!["x"], Duration::from_secs(1))));
    }
}
