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

/// One precise one-shot timer, owned by one worker.
pub(crate) struct PreciseTimer {
    /// `None` where no timerfd could be made: tokio's timer serves instead.
    fd: Option<AsyncFd<Fd>>,
    /// Near deadlines are waited for in the park hook ([`coalesce::pace`]).
    paced: bool,
}

impl PreciseTimer {
    /// A timer registered with the current tokio runtime.
    pub(crate) fn new() -> PreciseTimer {
        let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC);
        PreciseTimer { fd: fd.ok().and_then(register), paced: false }
    }

    /// A timer that waits for deadlines at most [`coalesce::PACE_MAX`] away
    /// in the runtime's park hook, which must be [`coalesce::before_park`].
    pub(crate) fn paced() -> PreciseTimer {
        PreciseTimer { paced: true, ..PreciseTimer::new() }
    }

    /// Wait until `deadline` (returns at once when it has passed).
    pub(crate) async fn sleep_until(&mut self, deadline: Instant) -> io::Result<()> {
        let now = Instant::now();
        if deadline <= now + SPIN_UNDER {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            return Ok(());
        }
        if self.paced && deadline - now <= coalesce::PACE_MAX {
            // Ready once the deadline has passed, whoever polls: the park hook
            // wakes it at the deadline, or the runtime polls it earlier.
            let at = deadline.into_std();
            return std::future::poll_fn(|cx| {
                if std::time::Instant::now() >= at {
                    Poll::Ready(Ok(()))
                } else {
                    coalesce::pace(at, cx.waker());
                    Poll::Pending
                }
            })
            .await;
        }
        let Some(fd) = &self.fd else {
            tokio::time::sleep_until(deadline).await;
            return Ok(());
        };
        // A relative timer: std's Instant has no public CLOCK_MONOTONIC value
        // to arm an absolute one with. The few ns between `now` and the syscall
        // are a rounding error next to tokio's millisecond.
        let ts = TimeSpec::from_duration(deadline - now);
        fd.get_ref().0.set(Expiration::OneShot(ts), TimerSetTimeFlags::empty())?;
        loop {
            let mut guard = fd.readable().await?;
            match guard.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }
}
