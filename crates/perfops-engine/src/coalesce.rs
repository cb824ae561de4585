//! Wake-up coalescing for closed loops: interrupt moderation, in user space.
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

use std::cell::Cell;
use std::time::Duration;

/// The longest nap, whatever the latency.
pub(crate) const MAX_NAP: Duration = Duration::from_micros(20);
/// The shortest nap worth a timer.
pub(crate) const MIN_NAP: Duration = Duration::from_micros(5);

thread_local! {
    /// This worker thread's nap before each park; zero: none.
    static NAP: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// Naps taken on this thread, and the longest.
    static TAKEN: Cell<(u64, Duration)> = const { Cell::new((0, Duration::ZERO)) };
}

/// The nap for the next second of a closed-loop worker that completed
/// `completed` responses at a mean latency of `mean` in the last second
/// (zero: no nap).
pub(crate) fn nap_for(mean: Duration, completed: u64) -> Duration {
    let nap = (mean / 50).min(MAX_NAP);
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
    let nap = NAP.with(Cell::get);
    if !nap.is_zero() {
        std::thread::sleep(nap);
        TAKEN.with(|t| {
            let (n, longest) = t.get();
            t.set((n + 1, longest.max(nap)));
        });
    }
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
            assert_eq!(nap_for(mean, completed), want, "mean {mean:?}, {completed}/s");
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
}
