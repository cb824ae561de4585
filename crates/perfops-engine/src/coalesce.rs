//! Wake-up coalescing: interrupt moderation, in user space, for closed loops
//! (naps) and for the open model (responses read on the arrivals' wake-ups).
//!
//! A closed loop that is faster than its server runs out of work after almost
//! every response and parks in `epoll_wait`; the server's next response then
//! has to wake it. On loopback that costs both sides: the client pays a
//! context switch and an idle exit per wake-up, and the server, whose `send`
//! does the wake-up, pays a cross-CPU interrupt (a VM exit on a virtual
//! machine). Against nginx with 50 connections, perfops was woken ~11,000
//! times a second where wrk, busier per request, was woken ~2,300 times; nginx
//! then served ~5 % fewer requests a second, and perfops could not go below
//! ~0.87 CPU s per 100k requests (`bench/wakeups.sh`, bench/README.md).
//!
//! So, as a network card moderates its interrupts, a closed-loop worker that
//! runs out of work with enough requests outstanding first naps briefly (the
//! runtime's park hook), and then collects every response that came in
//! meanwhile in one wake-up:
//!
//! ```text
//!   responses:   r1   r2 r3    r4            without: 4 wake-ups
//!   worker:  ----|nap ·· ·· ···|-collect r1..r4, send 4 requests-|nap ...
//! ```
//!
//! What it costs the measurement, and why that is bounded: a response that
//! arrives during a nap is read at most one nap late, so its latency (and the
//! start of that user's next request) is over-stated by at most the nap. The
//! nap is a fiftieth of the worker's mean latency in the previous second,
//! at most [`MAX_NAP`], so the error is at most 2 % of the mean plus the
//! kernel's timer overshoot (a few µs; the thread's timer slack is 1 µs);
//! a nap shorter than [`MIN_NAP`] would not be worth its timer, so there is
//! none below a 250 µs mean. A nap is only taken where it is expected to
//! gather responses: at the previous second's completion rate, at least half
//! a response per nap (in practice, 25 or more users in flight on the
//! worker). Open-model workers never nap: their wake-ups are the schedule's,
//! and a nap could make an arrival late.
//!
//! Why not longer (#18): naps of a tenth of the latency (~50 µs against
//! nginx), on connections dated by the kernel so that latency stayed true,
//! left nginx without requests 10 % of the time: 1.00x wrk's rps against
//! 1.18x with these, and more client CPU per request (0.78 against 0.71 CPU s
//! per 100k), its `sendto` now waking a sleeping nginx (bench/README.md,
//! "the closed loop against wrk").
//!
//! **The open model** (#18) pays the same wake-ups twice over: every arrival
//! is a timer wake-up of its own (the `timerfd` pacer), and against a 10 ms
//! server every response comes in between two arrivals and wakes the worker
//! again. On this project's VM a wake-up (a context switch, an idle exit, the
//! timer's interrupt and its `epoll_wait`/`timerfd` syscalls) costs more than
//! the request's own work. So where the next arrival is due within
//! [`PACE_MAX`], the pacer waits for it here, in the park hook: the thread
//! sleeps to the due time deaf to its sockets, then polls them without
//! blocking, and the arrival and every response that came meanwhile share
//! one wake-up:
//!
//! ```text
//!   due:        a1          a2          a3
//!   responses:       r1          r2   r3           before: 6 wake-ups
//!   worker:     |a1|-sleep--|r1 a2|-sleep--|r2 r3 a3|    now: 3
//! ```
//!
//! What it costs the measurement: nothing for a response, which the kernel
//! dates when it arrives (`http1::stamp_receives`: the pacer is used only
//! where every read is so dated), so it is measured as if read at once; a
//! flow's next step starts at most [`PACE_MAX`] later, and that wait is
//! charged to it from its due time; a connection goes back to the pool that
//! much later (a few more connections open). The sleep ends at the due time
//! less what this machine takes to wake a thread, as the timerfd's does
//! (`timer.rs`: a timer is aimed at the median of its own lateness). A worker
//! whose arrivals are further apart (below 4,000/s per worker) uses its
//! timerfd as before.
//!
//! **Arrivals gathered** ([`gather`], [`GATHER`]): one wake-up per arrival
//! was still the largest cost left, and it is paid twice. On this VM a
//! wake-up is a halt and an injected timer interrupt (8 µs per request at
//! 10,000/s); and the server, idle since the previous request, must be woken
//! by our `sendto` (`sock_def_readable`: 6.8 µs per request against 1.1 µs
//! for oha, which sends several requests per wake-up; the server woke 2.6
//! times per request against oha's 0.34: `bench/open-profile.sh`,
//! bench/README.md). So the pacer wakes for an arrival and sends with it
//! every arrival due within [`GATHER`] after it, early:
//!
//! ```text
//!   due:      a1    a2    a3    a4          (10,000/s: 100 µs apart)
//!   sent:     a1a2        a3a4              a2, a4 early by 100 µs: they count from their send
//! ```
//!
//! What it costs the measurement: nothing in latency. No arrival is sent
//! late on purpose, and one sent early counts from its send (it waited for
//! nothing; counting from its due time still to come would understate it,
//! `worker/open_loop.rs`). What changes is the schedule's fine grain: the
//! server sees pairs 200 µs apart instead of arrivals 100 µs apart (the rate
//! holds over any span longer than the window), and a pair is real load: its
//! second request may wait behind the first in the server, which the server's
//! own clock of its handler does not see but perfops does.
//!
//! Why early and not late, measured: the first design waited for the later
//! arrivals and sent the pair at the second's due time, the first late and
//! charged for it. Against a server whose own time is narrow that lateness
//! shows whole in p50: pairs at 10,000/s cut CPU per request 30 % (3.48 ->
//! 2.44 CPU s per 100k, below oha's 2.77) but moved p50 from +0.088 to
//! +0.196 ms over the server's clock (open-model-20261125T060257Z), past the
//! issue's +0.15 ms budget (#18), so only arrivals 50 µs apart were paired.
//! Sent early, pairs at 10,000/s cost perfops 4.38 CPU s per 100k against
//! oha's 4.59 and the exact pacer's 5.26 in one run, with p50 +0.262 ms
//! against +0.769 and oha's +1.179 (open-model-20261128T160545Z, a VM twice
//! as slow as the one above; bench/README.md). Arrivals further apart than
//! the window (below 10,000/s on a worker) are each waited for alone.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;
use std::task::Waker;
use std::time::{Duration, Instant};

/// The longest nap, whatever the latency.
pub(crate) const MAX_NAP: Duration = Duration::from_micros(20);

/// The longest nap in this process: [`MAX_NAP`], or `PERFOPS_NAP_MAX_US`
/// microseconds where that is set (0: no naps). A knob for benchmarks, which
/// compare nap policies with one binary in alternation (`bench/vs-wrk.sh`,
/// `PNAPS`): read once, never per request.
pub(crate) fn max_nap() -> Duration {
    static MAX: OnceLock<Duration> = OnceLock::new();
    *MAX.get_or_init(|| micros_or(std::env::var("PERFOPS_NAP_MAX_US").ok().as_deref(), MAX_NAP))
}

/// A knob's value: whole microseconds, or `default` when unset or
/// unreadable.
fn micros_or(value: Option<&str>, default: Duration) -> Duration {
    value.and_then(|v| v.trim().parse::<u64>().ok()).map_or(default, Duration::from_micros)
}
/// The shortest nap worth a timer.
pub(crate) const MIN_NAP: Duration = Duration::from_micros(5);

thread_local! {
    /// This worker thread's nap before each park; zero: none.
    static NAP: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// Naps taken on this thread, and the longest.
    static TAKEN: Cell<(u64, Duration)> = const { Cell::new((0, Duration::ZERO)) };
}

/// The nap for the next second of a closed-loop worker that completed
/// `completed` responses at a mean latency of `mean` in the last second,
/// at most `max` (zero: no nap).
pub(crate) fn nap_for(mean: Duration, completed: u64, max: Duration) -> Duration {
    let nap = (mean / 50).min(max);
    // Responses expected per nap: completed per second times the nap.
    let gathered = completed as f64 * nap.as_secs_f64();
    if nap < MIN_NAP || gathered < 0.5 { Duration::ZERO } else { nap }
}

/// Set this thread's nap (see [`nap_for`]).
pub(crate) fn set(nap: Duration) {
    NAP.with(|n| n.set(nap));
}

/// Naps this thread has taken, and the longest of them.
pub(crate) fn taken() -> (u64, Duration) {
    TAKEN.with(Cell::get)
}

/// The runtime's park hook: called when the worker has nothing left to run,
/// just before it parks in `epoll_wait`.
pub(crate) fn before_park() {
    pace_before_park();
    let nap = NAP.with(Cell::get);
    if !nap.is_zero() {
        std::thread::sleep(nap);
        TAKEN.with(|t| {
            let (n, longest) = t.get();
            t.set((n + 1, longest.max(nap)));
        });
    }
}

// ---------------------------------------------------------------- open model

/// The longest wait the open-model pacer takes in the park hook, deaf to its
/// sockets (see the module doc): responses and tokio's timers wait at most
/// this long, and so does a flow's next step after a response.
pub(crate) const PACE_MAX: Duration = Duration::from_micros(250);

thread_local! {
    /// Open model: when the pacer's next arrival is due, and its waker.
    static PACE: RefCell<Option<(Instant, Waker)>> = const { RefCell::new(None) };
    /// Arrivals whose wait the park hook took on this thread.
    static PACED: Cell<u64> = const { Cell::new(0) };
    /// The pacer was woken by [`pacer_first`] and has not run since: the
    /// responses polled before it step behind it.
    static WOKEN: Cell<bool> = const { Cell::new(false) };
}

/// The pacer waits for `due` (at most [`PACE_MAX`] away): the park hook
/// sleeps to it and wakes `waker`.
pub(crate) fn pace(due: Instant, waker: &Waker) {
    WOKEN.with(|w| w.set(false));
    PACE.with(|p| {
        let mut p = p.borrow_mut();
        match &mut *p {
            Some((at, w)) if w.will_wake(waker) => *at = due,
            _ => *p = Some((due, waker.clone())),
        }
    });
}

/// The pacer runs (is polled): the responses polled after it no longer
/// step behind it.
pub(crate) fn pacer_runs() {
    WOKEN.with(|w| w.set(false));
}

/// Whether a response about to be read should step behind the pacer (the
/// caller then yields once, and reads when it is polled again): the pacer's
/// arrival is due, or it was woken for one and has not run yet.
///
/// Why: the runtime runs the tasks woken together in order, and the park
/// hook, where the pacer waits, comes only when none is left. A burst of
/// responses (a server that stalled, then answered every request at once)
/// was read whole before the arrivals due meanwhile went out: at 20,000/s
/// against the 10 ms server sharing its core with a capture, 1 % of the
/// arrivals left more than 1.5 ms late in one run (`bench/open-wire.sh`'s
/// lateness table). The first response that finds an arrival due wakes the
/// pacer, and it and every response polled before the pacer runs yield
/// (tokio runs a yielded task after the others, and after those the I/O
/// driver woke meanwhile): the pacer goes next. Nothing is measured
/// differently: the responses are dated by the kernel (`http1::stamp_receives`).
/// A response yields at most once per read, so a pacer that is gone (the
/// run's end) costs each read one poll, and never stalls it.
pub(crate) fn pacer_first() -> bool {
    if WOKEN.with(Cell::get) {
        return true;
    }
    let due = PACE.with(|p| {
        let mut p = p.borrow_mut();
        if p.as_ref().is_some_and(|(due, _)| *due <= Instant::now()) { p.take() } else { None }
    });
    let Some((_, waker)) = due else { return false };
    WOKEN.with(|w| w.set(true));
    waker.wake();
    true
}

/// Waits the park hook took for the pacer on this thread.
#[cfg(test)]
pub(crate) fn paced() -> u64 {
    PACED.with(Cell::get)
}

/// The pacer's wait, in the park hook: sleep to its due time, then wake it.
/// The runtime then polls its sockets without blocking and runs the pacer
/// and every response that came in meanwhile, in one wake-up.
fn pace_before_park() {
    let pace = PACE.with(|p| p.borrow_mut().take());
    // Bounded by PACE_MAX when it was set; no longer should the clock have
    // been read oddly.
    let until = pace.as_ref().map(|(due, _)| (*due).min(Instant::now() + PACE_MAX));
    // On the kernel pacer the wait is in its ring, where the prepared
    // requests go out at their due times (`uring.rs`); it also waits there
    // for the last of them when the pacer itself sleeps longer.
    if !crate::uring::wait_until(until)
        && let Some(until) = until
    {
        let now = Instant::now();
        if until > now {
            std::thread::sleep(until - now);
        }
    }
    let Some((_, waker)) = pace else { return };
    PACED.with(|n| n.set(n.get() + 1));
    waker.wake();
}

/// How far ahead of a wake-up's first arrival the arrivals that go out with
/// it may be due (see the module doc): the most any arrival is sent early.
/// None is sent late on purpose. Zero turns gathering off.
pub(crate) const GATHER: Duration = Duration::from_micros(100);

/// The gathering window in this process: [`GATHER`], or
/// `PERFOPS_GATHER_US` microseconds where that is set (0: no gathering). A
/// knob for benchmarks, which measure what a wider window would save
/// (`bench/open-model.sh`, `GATHERS`), never a setting: the contract is
/// [`GATHER`]. Read once, never per arrival.
pub(crate) fn gather_window() -> Duration {
    static WINDOW: OnceLock<Duration> = OnceLock::new();
    *WINDOW.get_or_init(|| micros_or(std::env::var("PERFOPS_GATHER_US").ok().as_deref(), GATHER))
}

/// What the schedule's rounding may add to a gap between two due times.
const ROUNDING: Duration = Duration::from_nanos(100);

/// The most arrivals after the first that one wake-up waits for: at rates
/// so high that many are due within the window, the pacer is behind anyway.
const GATHER_MOST: usize = 16;

/// Open model: the pacer wakes for an arrival due at `first`; given the due
/// times of the arrivals after it in order (`None`: the schedule ends), the
/// due time of the last of them within `window` of `first`: every arrival due
/// up to then goes out in that wake-up, none later than its due time and
/// none more than `window` early. Arrivals further apart than `window` are
/// waited for one by one, as without gathering.
pub(crate) fn gather(first: Duration, next: impl IntoIterator<Item = Option<Duration>>, window: Duration) -> Duration {
    let mut wake = first;
    for due in next.into_iter().take(GATHER_MOST).map_while(|d| d) {
        // Due times are rounded to the nanosecond: arrivals exactly `window`
        // apart (10,000/s on one worker, 100 µs) may be a few ns further.
        if due.saturating_sub(first) > window + ROUNDING {
            break;
        }
        wake = wake.max(due);
    }
    wake
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn nap_policy() {
        let cases = [
            // nginx on loopback, 50 users: ~100k/s at ~480 µs: a 9.6 µs nap gathers ~1.
            (us(480), 100_000, us(9) + Duration::from_nanos(600)),
            // A slow service: the nap is capped; 200 users at 10 ms gather 0.4 per nap.
            (us(10_000), 20_000, Duration::ZERO),
            // 2,000 users at 10 ms: capped at 20 µs, gathering 4.
            (us(10_000), 200_000, MAX_NAP),
            // A fast service (100 µs): a 2 µs nap is not worth its timer.
            (us(100), 400_000, Duration::ZERO),
            // Exactly 250 µs: the 5 µs floor itself.
            (us(250), 100_000, MIN_NAP),
            // Few users (8 at 500 µs = 16k/s): a 10 µs nap gathers 0.16.
            (us(500), 16_000, Duration::ZERO),
            // Nothing completed (first second, or a stalled server): no nap.
            (us(480), 0, Duration::ZERO),
            (Duration::ZERO, 0, Duration::ZERO),
        ];
        for (mean, completed, want) in cases {
            assert_eq!(nap_for(mean, completed, MAX_NAP), want, "mean {mean:?}, {completed}/s");
        }
        // A benchmark's cap (`PERFOPS_NAP_MAX_US`): (mean, completed per second, cap, nap).
        let capped = [
            // nginx's 50 users under a cap of 0: no nap at all.
            (us(480), 100_000, Duration::ZERO, Duration::ZERO),
            // A cap of 5 µs: the nap is cut to it, still worth its timer.
            (us(480), 100_000, MIN_NAP, MIN_NAP),
            // A cap above the policy's: the policy's own nap, a fiftieth of the mean.
            (us(480), 100_000, us(1000), us(9) + Duration::from_nanos(600)),
        ];
        for (mean, completed, max, want) in capped {
            assert_eq!(nap_for(mean, completed, max), want, "mean {mean:?}, {completed}/s, at most {max:?}");
        }
    }

    /// A knob's value (`PERFOPS_NAP_MAX_US`, `PERFOPS_GATHER_US`): whole
    /// microseconds; anything else leaves the default.
    #[test]
    fn knobs_from_the_environment() {
        let cases = [
            (None, MAX_NAP),             // unset: the policy's cap
            (Some("0"), Duration::ZERO), // no naps
            (Some(" 5 "), us(5)),        // spaces around it are no error
            (Some("50"), us(50)),        // above MAX_NAP: allowed, for a benchmark
            (Some("ten"), MAX_NAP),      // not a number: ignored
            (Some("-1"), MAX_NAP),       // negative: ignored
            (Some(""), MAX_NAP),         // set but empty: ignored
        ];
        for (value, want) in cases {
            assert_eq!(micros_or(value, MAX_NAP), want, "{value:?}");
        }
    }

    /// The open model's gathering: the pacer wakes at the first arrival's due
    /// time; given the due times after it, up to which due time the arrivals
    /// go out with it. Never past the window after the first (the most any
    /// arrival is sent early); none is late on purpose.
    #[test]
    fn gather_policy() {
        let due = |v: &[u64]| v.iter().map(|&n| Some(us(n))).collect::<Vec<_>>();
        // (first due, the dues after it, window, the last due sent with the first)
        let cases = [
            // 10,000/s on one worker (100 µs apart), a 100 µs window: pairs, the second 100 µs early.
            (us(1000), due(&[1100, 1200, 1300]), us(100), us(1100)),
            // The same, the second due a few ns past the window (the schedule's rounding): still a pair.
            (us(1000), vec![Some(us(1100) + Duration::from_nanos(3))], us(100), us(1100) + Duration::from_nanos(3)),
            // 20,000/s (50 µs apart): three in one wake-up, the last 100 µs early.
            (us(1000), due(&[1050, 1100, 1150]), us(100), us(1100)),
            // 5,000/s (200 µs apart): nothing within 100 µs, each waited for alone.
            (us(1000), due(&[1200, 1400]), us(100), us(1000)),
            // 2,000/s: unchanged, whatever the window.
            (us(1000), due(&[1500]), us(100), us(1000)),
            // A window of zero: no gathering, only arrivals due at the same instant.
            (us(1000), due(&[1000, 1001]), Duration::ZERO, us(1000)),
            // The schedule ends within the window: up to its last arrival.
            (us(1000), vec![Some(us(1020)), None, Some(us(1030))], us(100), us(1020)),
            // Nothing after it.
            (us(1000), vec![], us(100), us(1000)),
            // Arrivals due together beyond GATHER_MOST: the wake-up stops at the 16th.
            (us(1000), (1..=40).map(|k| Some(us(1000 + k))).collect(), us(100), us(1016)),
        ];
        for (i, (first, next, window, want)) in cases.into_iter().enumerate() {
            assert_eq!(gather(first, next, window), want, "case {i}");
        }
    }

    #[test]
    fn park_hook_naps_only_when_set() {
        set(Duration::ZERO);
        before_park();
        assert_eq!(taken(), (0, Duration::ZERO));
        for nap in [MIN_NAP, MAX_NAP, MIN_NAP] {
            set(nap);
            let t = std::time::Instant::now();
            before_park();
            assert!(t.elapsed() >= nap);
        }
        assert_eq!(taken(), (3, MAX_NAP));
        set(Duration::ZERO);
        before_park();
        assert_eq!(taken(), (3, MAX_NAP));
    }

    /// A waker that counts its wake-ups.
    struct Count(std::sync::atomic::AtomicU32);

    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The open model's pacer, waited for in the park hook: the hook sleeps to
    /// the due time (never longer than PACE_MAX), then wakes the pacer once;
    /// with nothing to wait for, it neither sleeps nor wakes anyone.
    #[test]
    fn park_hook_sleeps_to_the_pacers_due_time_then_wakes_it() {
        let count = std::sync::Arc::new(Count(std::sync::atomic::AtomicU32::new(0)));
        let waker = Waker::from(count.clone());
        let woken = || count.0.load(std::sync::atomic::Ordering::Relaxed);
        // (wait asked, least time the hook may take, most it may take), each case after the previous.
        let cases = [
            (us(200), us(200), Duration::from_millis(50)), // due in 200 µs: slept to it
            (Duration::ZERO, Duration::ZERO, Duration::from_millis(50)), // already due: woken at once
            (Duration::from_secs(5), PACE_MAX, Duration::from_millis(50)), // never beyond PACE_MAX
        ];
        let paced_before = paced();
        for (i, (wait, least, most)) in cases.into_iter().enumerate() {
            let t = Instant::now();
            pace(t + wait, &waker);
            // Registered again by the same pacer (a spurious poll): still one wake-up.
            pace(t + wait, &waker);
            before_park();
            let took = t.elapsed();
            assert!(took >= least && took < most, "case {i}: the hook took {took:?}");
            assert_eq!(woken(), i as u32 + 1, "case {i}: woken once");
        }
        assert_eq!(paced() - paced_before, 3);
        let t = Instant::now();
        before_park();
        assert!(t.elapsed() < Duration::from_millis(50), "nothing to wait for: no sleep");
        assert_eq!(woken(), 3, "and no wake-up");
    }

    /// A response about to be read steps behind a pacer whose arrival is
    /// due: the first such response wakes the pacer (once), every response
    /// polled until the pacer runs steps behind it too, and none does when
    /// the arrival is not due or no pacer waits.
    #[test]
    fn responses_step_behind_a_pacer_that_is_due() {
        let count = std::sync::Arc::new(Count(std::sync::atomic::AtomicU32::new(0)));
        let waker = Waker::from(count.clone());
        let woken = || count.0.load(std::sync::atomic::Ordering::Relaxed);
        pacer_runs();
        PACE.with(|p| p.borrow_mut().take());
        assert!(!pacer_first(), "no pacer waits: read at once");
        pace(Instant::now() + Duration::from_secs(5), &waker);
        assert!(!pacer_first(), "its arrival is not due: read at once");
        assert_eq!(woken(), 0);
        pace(Instant::now(), &waker);
        assert!(pacer_first(), "due: the first response steps behind it");
        assert_eq!(woken(), 1, "and wakes it");
        assert!(pacer_first() && pacer_first(), "the responses after it, until it runs, too");
        assert_eq!(woken(), 1, "woken once");
        before_park();
        assert_eq!(woken(), 1, "the park hook has nothing left to wake");
        pacer_runs();
        assert!(!pacer_first(), "it ran: the responses are read");
        pace(Instant::now(), &waker);
        assert!(pacer_first());
        pace(Instant::now() + Duration::from_secs(5), &waker);
        assert!(!pacer_first(), "it ran and waits again (pace): nothing steps behind it");
        PACE.with(|p| p.borrow_mut().take());
    }
}
