//! A sub-millisecond timer for the open-model pacer.
//!
//! tokio's timer wheel ticks in whole milliseconds and `epoll_wait` takes its
//! timeout in milliseconds, so `sleep_until` wakes on average ~1 ms late. The
//! pacer measures latency from the due time, so that lateness would be charged
//! to the server. A `timerfd` armed with a nanosecond deadline wakes the same
//! epoll loop within microseconds (the worker lowers its thread's timer slack
//! to 1 µs).
//!
//! A *paced* timer (`PreciseTimer::paced`) waits for a deadline at most
//! [`PACE_MAX`](coalesce::PACE_MAX) away in the worker's park hook instead
//! ([`coalesce`]'s open-model policy): the thread sleeps to the deadline
//! without listening to its sockets, and reads every response that came
//! meanwhile in the same wake-up. No timerfd is armed or read for it.
//!
//! **Aimed early by how late this machine wakes** (#18): a sleeping thread is
//! woken after its deadline by the time its CPU takes to leave idle and switch
//! to it. On this project's VM, whose idle CPUs halt, that is 37-57 µs at
//! p10-p50 and ~100 µs at p99 (`clock_nanosleep` of a bare C loop, any gap
//! from 100 µs to 1 ms), so every arrival went out ~50 µs late, each charged
//! to the latency it reports. A timer therefore learns the median of its own
//! lateness ([`aim`]) and is armed that much before each deadline: its
//! wake-ups center on the deadlines, half a little early, half a little late.
//! An open-model arrival sent before its due time counts from its send
//! (`worker/open_loop.rs`), so an early wake-up moves the schedule by a few
//! µs and hides nothing. Measured on that VM, one worker against a server
//! that answers at once, latency p50 minus service-time p50 (the pacer's
//! lateness at the median): 0.061 -> 0.012 ms at 2,000/s and 0.036 -> 0.002
//! ms at 10,000/s.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::task::Poll;
use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use crate::coalesce;

/// Gaps shorter than this are not worth a timer round trip: the arrival is
/// dispatched at once if it is this close (waiting is cheaper than the
/// syscalls of arming, polling and reading the timerfd).
const SPIN_UNDER: Duration = Duration::from_micros(5);

struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Register a timerfd with the current runtime's reactor.
#[allow(unsafe_code)]
fn register(fd: TimerFd) -> Option<AsyncFd<Fd>> {
    // SAFETY: `AsyncFd::register` requires the descriptor to stay open while it
    // is registered. `Fd` owns the `TimerFd` (an `OwnedFd`), and the `AsyncFd`
    // owns the `Fd`, deregistering it before dropping it, so it cannot be closed
    // or reused under the reactor.
    unsafe { AsyncFd::register(Fd(fd)) }.ok()
}

/// The most a timer is armed ahead of its deadline: a machine that wakes
/// later than this at the median is overloaded, not slow to leave idle.
const MAX_EARLY: Duration = Duration::from_micros(100);

/// How much the estimate moves per wake-up: a median estimate (it rises when
/// a wake-up was later than it, falls otherwise), a few µs of noise around
/// the median, which it reaches within ~100 wake-ups from zero.
const STEP: Duration = Duration::from_micros(1);

/// A timer armed `early` before its deadlines woke `late` after the instant
/// it was armed for: the next `early`. It tracks the median of the
/// wake-ups' lateness, so that half of them come a little before the
/// deadline and half a little after, and never exceeds [`MAX_EARLY`].
pub(crate) fn aim(early: Duration, late: Duration) -> Duration {
    if late > early { (early + STEP).min(MAX_EARLY) } else { early.saturating_sub(STEP) }
}

/// One precise one-shot timer, owned by one worker.
pub(crate) struct PreciseTimer {
    /// `None` where no timerfd could be made: tokio's timer serves instead.
    fd: Option<AsyncFd<Fd>>,
    /// Near deadlines are waited for in the park hook ([`coalesce::pace`]).
    paced: bool,
    /// How long before a deadline it is armed ([`aim`]): zero until it has
    /// woken once.
    early: Duration,
}

impl PreciseTimer {
    /// A timer registered with the current tokio runtime.
    pub(crate) fn new() -> PreciseTimer {
        let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC);
        PreciseTimer { fd: fd.ok().and_then(register), paced: false, early: Duration::ZERO }
    }

    /// A timer that waits for deadlines at most [`coalesce::PACE_MAX`] away
    /// in the runtime's park hook, which must be [`coalesce::before_park`].
    pub(crate) fn paced() -> PreciseTimer {
        PreciseTimer { paced: true, ..PreciseTimer::new() }
    }

    /// How long before its deadlines this timer is armed now.
    #[cfg(test)]
    pub(crate) fn early(&self) -> Duration {
        self.early
    }

    /// Wait until about `deadline`: armed [`aim`]'s estimate of this
    /// machine's wake-up lateness before it, so it may return a few µs
    /// early (returns at once when that has passed).
    pub(crate) async fn sleep_until(&mut self, deadline: Instant) -> io::Result<()> {
        let now = Instant::now();
        let at = deadline.checked_sub(self.early).unwrap_or(deadline);
        if at <= now + SPIN_UNDER {
            while Instant::now() < at {
                std::hint::spin_loop();
            }
            return Ok(());
        }
        if self.paced && at - now <= coalesce::PACE_MAX {
            // Ready once the instant has passed, whoever polls: the park hook
            // wakes it then, or the runtime polls it earlier.
            let wake = at.into_std();
            std::future::poll_fn(|cx| {
                coalesce::pacer_runs();
                if std::time::Instant::now() >= wake {
                    Poll::Ready(())
                } else {
                    coalesce::pace(wake, cx.waker());
                    Poll::Pending
                }
            })
            .await;
            self.early = aim(self.early, Instant::now() - at);
            return Ok(());
        }
        let Some(fd) = &self.fd else {
            // A millisecond timer: its lateness is its tick's, not the machine's.
            tokio::time::sleep_until(deadline).await;
            return Ok(());
        };
        // A relative timer: std's Instant has no public CLOCK_MONOTONIC value
        // to arm an absolute one with. The few ns between `now` and the syscall
        // are a rounding error next to tokio's millisecond.
        let ts = TimeSpec::from_duration(at - now);
        fd.get_ref().0.set(Expiration::OneShot(ts), TimerSetTimeFlags::empty())?;
        loop {
            let mut guard = fd.readable().await?;
            match guard.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
                Ok(result) => {
                    self.early = aim(self.early, Instant::now() - at);
                    return result;
                }
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// The aim follows the median of the wake-ups' lateness, a µs at a time,
    /// within [0, MAX_EARLY].
    #[test]
    fn aim_tracks_the_median_lateness() {
        // (armed this early, woke this late after the instant armed for, next)
        let cases = [
            (Duration::ZERO, us(50), us(1)),                  // later than the aim: one step up
            (us(40), us(10), us(39)),                         // earlier: one step down
            (us(40), us(40), us(39)),                         // exactly on it: down (ties fall)
            (Duration::ZERO, Duration::ZERO, Duration::ZERO), // never below zero
            (MAX_EARLY, us(5_000), MAX_EARLY),                // an overloaded machine: capped
        ];
        for (i, (early, late, want)) in cases.into_iter().enumerate() {
            assert_eq!(aim(early, late), want, "case {i}");
        }
        // Wake-ups 30-70 µs late at random: the aim settles near their median, 50 µs.
        let mut rng = fastrand::Rng::with_seed(7);
        let mut early = Duration::ZERO;
        for _ in 0..2_000 {
            early = aim(early, us(rng.u64(30..=70)));
        }
        assert!(early.abs_diff(us(50)) <= us(3), "settled at {early:?}");
    }

    /// On a real runtime, after a few hundred wake-ups 300 µs apart, the
    /// timer's wake-ups center on the deadlines: at least a tenth of them
    /// come before their deadline (half would on an idle machine; none
    /// unaimed: a timerfd never fires early, as the first, unaimed, wake-up
    /// shows).
    #[test]
    fn an_aimed_timer_wakes_around_its_deadlines() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _ = nix::sys::prctl::set_timerslack(1_000);
        rt.block_on(async {
            let mut timer = PreciseTimer::new();
            let start = Instant::now() + Duration::from_millis(1);
            let mut early = Vec::new();
            for k in 0..600u32 {
                let deadline = start + us(300) * k;
                timer.sleep_until(deadline).await.unwrap();
                early.push(Instant::now() < deadline);
            }
            assert!(!early[0], "unaimed, a timer never fires early");
            let settled = early[300..].iter().filter(|&&e| e).count();
            assert!(settled * 10 >= 300, "{settled} of 300 wake-ups before their deadline (aim {:?})", timer.early());
        });
    }
}
