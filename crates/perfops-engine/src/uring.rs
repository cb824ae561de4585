//! The kernel pacer: an open-model arrival's first request handed to the
//! kernel ahead of its due time, and sent by the kernel at that time.
//!
//! Each prepared request is three io_uring operations, hard-linked: a
//! poll that never completes by itself (an eventfd nobody writes), an
//! absolute `IORING_OP_LINK_TIMEOUT` on `CLOCK_MONOTONIC` at the arrival's
//! due time that cancels it then, and the `SEND` of the request's bytes on
//! a kept connection, which a hard link runs once the poll is cancelled.
//! Why not the plain `IORING_OP_TIMEOUT` linked to the send: every expiry
//! of one ends any wait in the ring (`io_should_wake`: "for timeouts, we
//! always want to return to userspace"), so the thread came back to user
//! space once per arrival (the test below saw 5 to 10 returns for 10
//! sends); a linked timeout's expiry does not. The pacer prepares every
//! arrival due within [`AHEAD`] in one wake-up, at most once per
//! [`WINDOW`], and submits them in one `io_uring_enter`; the worker's thread
//! then waits in the ring ([`wait_until`], from the runtime's park hook)
//! instead of in `clock_nanosleep`. Each timeout's expiry runs its send as
//! task work of this thread: inside that wait without a return to user
//! space; on the way back to user space when the thread is busy (the
//! kernel's default task running: `IORING_SETUP_DEFER_TASKRUN` ran them only
//! in the next `io_uring_enter`, and a busy thread sent them hundreds of µs
//! late, tried and measured). The sends' completions are reaped in bulk
//! after the wait and hand each arrival its connection back ([`Sent`]); the
//! response is read and dated by the kernel as before
//! (`http1::stamp_receives`).
//!
//! ```text
//!   user space:  |prepare a1..a5, submit|.....(in the ring's wait).....|reap, read, prepare a6..|
//!   kernel:              timeout->send a1  a2  a3  a4  a5 (each at its due time)
//! ```
//!
//! What it changes in the measurement: a prepared request leaves at its due
//! time, never early (the timerfd pacer sends arrivals gathered within 100
//! µs early, `coalesce::gather`), and its latency counts from its due time.
//! So does its service time: the kernel does not say when it sent it, so
//! its timer's lateness (a few µs; more when another process holds the CPU)
//! falls in the service time, over-stating the server's, never hiding any.
//! One already due when the pacer reaches it (the pacer is behind) is not
//! prepared: the pacer sends it at once itself, and its service time counts
//! from that send.

//! What it does not do: prepare anything but an arrival's first request,
//! and only a literal HTTP/1.1 one (its bytes cached at plan time) on a
//! kept plain-TCP connection. Every other arrival (no connection idle, a
//! templated step, a feeder that may run out) is sent by the pacer at its
//! due time, as with the timerfd pacer, while the prepared ones go out in
//! the ring meanwhile. A flow's later steps are sent when their previous
//! answer is read, as always.
//!
//! Asked for with `PERFOPS_PACER=io_uring` ([`asked`] says why it is not
//! the default). Where io_uring is missing or refused (an old kernel, a
//! seccomp filter, `kernel.io_uring_disabled`), [`start`] says why and the
//! timerfd pacer runs: the run's summary says which pacer ran
//! (`generator.pacer`) and its notes why. The variants measured and not
//! kept (the kernel's submission thread making the sends, a wait that ends
//! when the window's sends are done) stay behind environment variables, for
//! `bench/pacer-mech.sh` ([`Mode`]).
//!
//! The one place the engine calls io_uring, hence `unsafe`: the kernel reads
//! a send's buffer and descriptor after the call that submitted it returns.
//! Both are kept alive here until the send's completion is reaped: the
//! connection (its descriptor) is owned by the ring's table meanwhile, and
//! the buffer is a literal step's cached bytes, in the run's `Work`, of
//! which the ring holds an `Arc`.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use io_uring::{IoUring, opcode, squeue, types};
use nix::time::{ClockId, clock_gettime};
use tokio::time::Instant;

use crate::http1::Conn;
use crate::work::Work;

/// How far ahead of its due time an arrival is prepared: the longest the
/// worker's thread waits in the ring, deaf to its sockets, while a prepared
/// request is due (a response meanwhile waits in its socket, dated by the
/// kernel; a flow's next step starts up to this late, charged to it).
pub(crate) const AHEAD: Duration = Duration::from_micros(500);

/// The least time between two of the pacer's wake-ups while arrivals come
/// closer than [`AHEAD`]: each wake-up prepares the arrivals of about this
/// long.
pub(crate) const WINDOW: Duration = Duration::from_micros(250);

/// An arrival prepared this close to its due time is submitted at once,
/// not with the rest of its wake-up's batch.
pub(crate) const LEAST: Duration = Duration::from_micros(30);

/// Operations in the ring's submission queue; a larger batch is submitted
/// in several calls.
const ENTRIES: u32 = 256;

/// The user data of a send's poll and linked timeout: the send's slot with
/// this bit. Their completions are reaped, not read; but a linked timeout
/// cancels its poll by the poll's user data, so that must be the poll's
/// own (with one for all, the first timeout sent another arrival's request).
const WAITING: u64 = 1 << 63;

/// Operations per prepared send: the poll, its linked timeout, the send.
const PER_SEND: usize = 3;

/// Why the kernel pacer did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) String);

/// How the ring is set up and waited in: the kernel pacer as measured
/// (`Mode::default()`), or a variant asked for by environment variables
/// for the measurements of `bench/pacer-mech.sh` (docs/architecture.md,
/// "The kernel pacer", has what each cost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mode {
    /// `IORING_SETUP_SQPOLL`: the kernel's submission thread takes the
    /// batches and makes the sends (`PERFOPS_URING_SQPOLL=IDLE_MS[@CPU]`:
    /// its idle time before it sleeps, and the CPU it is pinned to).
    sqpoll: Option<(u32, Option<u32>)>,
    /// The wait in the ring ends once the sends prepared have completed
    /// (`min_complete`: `PERFOPS_URING_WAIT=sends`), not at the pacer's next
    /// wake-up; the rest of the wait is in `epoll_wait`, awake to the sockets.
    until_sent: bool,
}

impl Mode {
    /// The mode the environment asks for; `Err` says what it could not read.
    fn from_env() -> Result<Mode, Refused> {
        let mut mode = Mode::default();
        if let Some(v) = std::env::var_os("PERFOPS_URING_SQPOLL") {
            let v = v.to_string_lossy();
            let (idle, cpu) = match v.split_once('@') {
                Some((idle, cpu)) => (idle, Some(cpu)),
                None => (&*v, None),
            };
            let bad = || Refused(format!("PERFOPS_URING_SQPOLL={v}: want IDLE_MS or IDLE_MS@CPU"));
            let idle = idle.parse().map_err(|_| bad())?;
            let cpu = cpu.map(str::parse).transpose().map_err(|_| bad())?;
            mode.sqpoll = Some((idle, cpu));
        }
        mode.until_sent = std::env::var_os("PERFOPS_URING_WAIT").is_some_and(|v| v == "sends");
        Ok(mode)
    }
}

/// One prepared send, by its slot in [`Ring::ops`].
enum Op {
    Free,
    Sending {
        /// The connection it goes out on, kept here until the kernel is
        /// done with its descriptor.
        conn: Option<Box<Conn>>,
        due: Instant,
        /// The send's result and when it went out, once reaped.
        done: Option<(i32, Instant)>,
        waker: Option<Waker>,
        /// Its arrival was dropped (the run's end): the connection goes
        /// when the completion comes.
        abandoned: bool,
    },
}

/// A worker's ring.
pub(crate) struct Ring {
    ring: IoUring,
    ops: Vec<Op>,
    free: Vec<u32>,
    /// Sends prepared, not yet reaped, and the latest due time among them.
    sending: u32,
    last_due: Option<Instant>,
    /// The timeouts' deadlines of the batch not yet submitted: the kernel
    /// reads them when it takes the batch, so they stay here until then.
    stamps: Box<[types::Timespec]>,
    queued: usize,
    /// `CLOCK_MONOTONIC` at an `Instant`: absolute timeouts are armed on it.
    clock: (Instant, Duration),
    /// An eventfd nobody writes: the poll each send waits behind until its
    /// linked timeout cancels it.
    never: std::os::fd::OwnedFd,
    /// The run's plan: the sends read its literal steps' cached bytes.
    work: Arc<Work>,
    mode: Mode,
}

thread_local! {
    /// This worker thread's ring, while its open loop runs on the kernel pacer.
    static RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
}

/// An `Instant`, and `CLOCK_MONOTONIC` read just after it: a deadline
/// converted with the pair is never earlier than the instant it stands for
/// (by the few ns between the two reads, it is later).
fn clock_pair() -> io::Result<(Instant, Duration)> {
    let now = Instant::now();
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).map_err(io::Error::from)?;
    Ok((now, Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32)))
}

/// An eventfd nobody writes.
#[allow(unsafe_code)]
fn never() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: eventfd takes two integers and returns a new descriptor or -1.
    let fd = unsafe { nix::libc::eventfd(0, nix::libc::EFD_CLOEXEC | nix::libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made for us, and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

impl Ring {
    /// A ring for this thread, if the kernel offers what the pacer needs:
    /// deferred task running, waits with a timeout, absolute timeouts that
    /// let a linked send go when they expire. Tried for real: a timeout
    /// linked to a no-op.
    fn new(work: Arc<Work>, mode: Mode) -> Result<Ring, Refused> {
        let refused = |what: &str, e: io::Error| Refused(format!("{what}: {e}"));
        let mut builder = IoUring::builder();
        builder.setup_single_issuer().setup_cqsize(4 * ENTRIES);
        if let Some((idle, cpu)) = mode.sqpoll {
            builder.setup_sqpoll(idle);
            if let Some(cpu) = cpu {
                builder.setup_sqpoll_cpu(cpu);
            }
        }
        let ring = builder.build(ENTRIES).map_err(|e| refused("io_uring_setup", e))?;
        if !ring.params().is_feature_ext_arg() {
            return Err(Refused("io_uring: no timed waits (kernel before 5.11)".into()));
        }
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe).map_err(|e| refused("io_uring probe", e))?;
        for (code, name) in [
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::LinkTimeout::CODE, "LINK_TIMEOUT"),
            (opcode::Send::CODE, "SEND"),
        ] {
            if !probe.is_supported(code) {
                return Err(Refused(format!("io_uring: no {name}")));
            }
        }
        let mut ring = Ring {
            ring,
            ops: Vec::new(),
            free: Vec::new(),
            sending: 0,
            last_due: None,
            stamps: vec![types::Timespec::new(); ENTRIES as usize / PER_SEND].into_boxed_slice(),
            queued: 0,
            clock: clock_pair().map_err(|e| refused("clock_gettime", e))?,
            never: never().map_err(|e| refused("eventfd", e))?,
            work,
            mode,
        };
        ring.link_test()?;
        Ok(ring)
    }

    #[allow(unsafe_code)]
    /// The chain a send goes out in, tried with a no-op and a timeout
    /// already expired: the no-op must run (hard links: 5.5; linked
    /// timeouts: 5.5; an absolute one: 5.15).
    fn link_test(&mut self) -> Result<(), Refused> {
        let ts = types::Timespec::new();
        let [poll, timeout] = self.waits(u32::MAX, &ts);
        let nop = opcode::Nop::new().build().user_data(0);
        // SAFETY: the linked timeout's timespec is read when the entries
        // are submitted, below, while `ts` lives; the poll's eventfd is
        // `self.never`'s; a no-op reads nothing.
        let pushed = unsafe { self.ring.submission().push_multiple(&[poll, timeout, nop]) };
        pushed.map_err(|_| Refused("io_uring: queue full".into()))?;
        self.ring.submit_and_wait(3).map_err(|e| Refused(format!("io_uring_enter: {e}")))?;
        let mut nop = None;
        for cqe in self.ring.completion() {
            if cqe.user_data() == 0 {
                nop = Some(cqe.result());
            }
        }
        match nop {
            Some(0) => Ok(()),
            Some(e) => Err(Refused(format!(
                "io_uring: a send behind a linked timeout would not go ({})",
                io::Error::from_raw_os_error(-e)
            ))),
            None => Err(Refused("io_uring: a linked operation did not complete".into())),
        }
    }

    /// What the send in `slot` waits behind: a poll on `never`, hard-linked,
    /// and the timeout at `at` that cancels it, hard-linked to what follows.
    fn waits(&self, slot: u32, at: &types::Timespec) -> [squeue::Entry; 2] {
        use std::os::fd::AsRawFd;
        let poll = opcode::PollAdd::new(types::Fd(self.never.as_raw_fd()), nix::libc::POLLIN as u32)
            .build()
            .flags(squeue::Flags::IO_HARDLINK)
            .user_data(WAITING | u64::from(slot));
        let timeout = opcode::LinkTimeout::new(at)
            .flags(types::TimeoutFlags::ABS)
            .build()
            .flags(squeue::Flags::IO_HARDLINK)
            .user_data(WAITING | u64::from(slot));
        [poll, timeout]
    }

    #[allow(unsafe_code)]
    /// Queue `flow`'s first request to go out on `conn` (descriptor `fd`) at `due`.
    fn send_at(&mut self, conn: Box<Conn>, fd: RawFd, flow: usize, due: Instant) -> Result<Sent, Box<Conn>> {
        let work = Arc::clone(&self.work);
        let Some(bytes) = work.flows.get(flow).and_then(|f| f.steps.first()).and_then(|s| s.cached.as_deref()) else {
            return Err(conn);
        };
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if self.queued == self.stamps.len() || room < PER_SEND {
            self.submit();
            if self.queued != 0 {
                return Err(conn);
            }
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.ops.push(Op::Free);
                (self.ops.len() - 1) as u32
            }
        };
        let at = self.clock.1 + due.saturating_duration_since(self.clock.0);
        self.stamps[self.queued] = types::Timespec::from(at);
        let [poll, timeout] = self.waits(slot, &self.stamps[self.queued]);
        let send = opcode::Send::new(types::Fd(fd), bytes.as_ptr(), bytes.len() as u32)
            .flags(nix::libc::MSG_NOSIGNAL)
            .build()
            .user_data(u64::from(slot));
        // SAFETY: the kernel reads the timeout's timespec when the batch is
        // submitted (`Ring::submit`, before `stamps` is written again), the
        // poll's eventfd (`self.never`, the ring's own) while it waits, and
        // the send's buffer and descriptor when its timeout expires, until
        // its completion is reaped: the buffer is a cached step's bytes in
        // `self.work`, never changed while shared and held until the ring
        // is closed (`close` waits for every send), and the descriptor is
        // `conn`'s, which `ops[slot]` holds until that completion.
        if unsafe { self.ring.submission().push_multiple(&[poll, timeout, send]) }.is_err() {
            self.free.push(slot);
            return Err(conn);
        }
        self.queued += 1;
        self.ops[slot as usize] = Op::Sending { conn: Some(conn), due, done: None, waker: None, abandoned: false };
        self.sending += 1;
        self.last_due = Some(self.last_due.map_or(due, |d| d.max(due)));
        Ok(Sent { slot, len: bytes.len(), taken: false })
    }

    /// Hand the queued operations to the kernel, in one call (none when
    /// nothing is queued), and reap what completed.
    fn submit(&mut self) {
        if self.ring.submission().is_empty() || (self.ring.submit().is_ok() && self.taken()) {
            self.queued = 0;
        }
        self.reap();
    }

    /// Whether the kernel took the batch submitted, so that the timeouts'
    /// deadlines in `stamps` may be written again: at once, but under
    /// `SQPOLL`, where the kernel's thread takes it when it next runs (a
    /// few µs while it polls; woken by the submission when it slept).
    fn taken(&mut self) -> bool {
        if self.mode.sqpoll.is_none() {
            return true;
        }
        let give_up = std::time::Instant::now() + Duration::from_millis(10);
        while !self.ring.submission().is_empty() {
            if std::time::Instant::now() > give_up {
                return false;
            }
            // The kernel's thread may be on this CPU.
            std::thread::yield_now();
        }
        true
    }

    /// Wait in the ring until `deadline`, the prepared sends going out at
    /// their due times meanwhile, then reap.
    fn wait(&mut self, deadline: std::time::Instant) {
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || (self.mode.until_sent && self.sending == 0) {
                return self.submit();
            }
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            // More completions than the queue holds: the wait ends at its
            // timeout (or a signal), the sends running in it as their
            // timeouts expire. Or, asked for, once every prepared send
            // completed.
            // (Each send completes with its poll's and timeout's entries.)
            let want = if self.mode.until_sent { PER_SEND * self.sending as usize } else { 4 * ENTRIES as usize + 1 };
            let _ = self.ring.submitter().submit_with_args(want, &args);
            #[cfg(test)]
            WAITS.with(|w| w.set(w.get() + 1));
            self.reap();
        }
    }

    /// Reap every completion: a send's result goes to its arrival; one
    /// abandoned frees its slot and closes its connection now.
    fn reap(&mut self) {
        for cqe in self.ring.completion() {
            let data = cqe.user_data();
            if data & WAITING != 0 {
                continue;
            }
            let slot = data as usize;
            let Some(op) = self.ops.get_mut(slot) else { continue };
            if let Op::Sending { due, done, waker, abandoned, .. } = op {
                self.sending = self.sending.saturating_sub(1);
                *done = Some((cqe.result(), *due));
                if *abandoned {
                    *op = Op::Free;
                    self.free.push(slot as u32);
                } else if let Some(w) = waker.take() {
                    w.wake();
                }
            }
        }
        if self.sending == 0 {
            self.last_due = None;
        }
    }
}

impl Drop for Ring {
    /// Wait for every prepared send to go out (each at its due time, at
    /// most [`AHEAD`] from now), so that no descriptor or buffer goes while
    /// the kernel may read it. Not cancelled: a cancelled poll would send
    /// at once (hard links), before its due time.
    fn drop(&mut self) {
        let give_up = std::time::Instant::now() + Duration::from_secs(1);
        while self.sending > 0 && std::time::Instant::now() < give_up {
            self.wait(std::time::Instant::now() + Duration::from_millis(1));
        }
        if self.sending > 0 {
            // The kernel still holds a send after a second: what it may
            // read stays where it is (the process ends soon after a run).
            std::mem::forget(Arc::clone(&self.work));
            for op in &mut self.ops {
                if let Op::Sending { conn, done: None, .. } = op {
                    std::mem::forget(conn.take());
                }
            }
        }
    }
}

/// Whether `PERFOPS_PACER=io_uring` asks for the kernel pacer. Not the
/// default: each prepared send is task work that wakes the worker's thread,
/// so it costs about the timerfd pacer's CPU per request (whose pairs share
/// a wake-up), and a send due while that thread waits for a CPU goes out
/// only when it runs (docs/architecture.md, "The kernel pacer", has the
/// figures).
pub(crate) fn asked() -> bool {
    std::env::var_os("PERFOPS_PACER").is_some_and(|v| v == "io_uring")
}

/// Run this worker's open loop on the kernel pacer, if the kernel offers
/// it: `Err` says why not.
pub(crate) fn start(work: Arc<Work>) -> Result<(), Refused> {
    start_in(work, Mode::from_env()?)
}

/// [`start`], the ring set up and waited in as `mode` says.
fn start_in(work: Arc<Work>, mode: Mode) -> Result<(), Refused> {
    let ring = Ring::new(work, mode)?;
    RING.with(|r| *r.borrow_mut() = Some(ring));
    Ok(())
}

/// Stop the kernel pacer on this thread (every send done or cancelled).
pub(crate) fn finish() {
    drop(RING.with(|r| r.borrow_mut().take()));
}

/// The first request of `flow` (its first step's cached bytes) to go out
/// on `conn` at `due`; `Err` gives the connection back when it cannot be
/// prepared (not a plain-TCP connection, no cached bytes, no ring).
pub(crate) fn send_at(conn: Box<Conn>, flow: usize, due: Instant) -> Result<Sent, Box<Conn>> {
    let Some(fd) = conn.raw_fd() else { return Err(conn) };
    RING.with(|r| match &mut *r.borrow_mut() {
        Some(ring) => ring.send_at(conn, fd, flow, due),
        None => Err(conn),
    })
}

/// Submit what was prepared, and run and reap what is due, in one call.
pub(crate) fn submit() {
    RING.with(|r| {
        if let Some(ring) = &mut *r.borrow_mut() {
            ring.submit();
        }
    });
}

/// The park hook's wait ([`crate::coalesce`]): in the ring, deaf to the
/// sockets, until `deadline` (the pacer's next wake-up), or until the last
/// prepared send is due when the pacer sleeps longer. `false`: this thread
/// has no ring, or nothing to send and no deadline.
pub(crate) fn wait_until(deadline: Option<std::time::Instant>) -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        let Some(ring) = &mut *r else { return false };
        if ring.mode.until_sent && ring.sending == 0 {
            return false;
        }
        let until = match (deadline, ring.last_due) {
            (Some(d), _) => d,
            (None, Some(last)) => last.into_std(),
            (None, None) => return false,
        };
        ring.wait(until);
        true
    })
}

/// A prepared send: resolves to its connection, with when the request went
/// out, or `None` for the time when the kernel did not send it whole (the
/// connection is then given back to be closed).
pub(crate) struct Sent {
    slot: u32,
    /// The request's length: a shorter send did not send it.
    len: usize,
    taken: bool,
}

impl std::future::Future for Sent {
    type Output = (Box<Conn>, Option<Instant>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (slot, len) = (self.slot as usize, self.len);
        let out = RING.with(|r| {
            let mut r = r.borrow_mut();
            let ring = r.as_mut()?;
            let op = ring.ops.get_mut(slot)?;
            let Op::Sending { conn, done, waker, .. } = op else { return None };
            match *done {
                Some((res, at)) => {
                    let conn = conn.take()?;
                    *op = Op::Free;
                    ring.free.push(slot as u32);
                    let whole = usize::try_from(res).is_ok_and(|n| n == len);
                    Some(Poll::Ready((conn, whole.then_some(at))))
                }
                None => {
                    *waker = Some(cx.waker().clone());
                    Some(Poll::Pending)
                }
            }
        });
        match out {
            Some(Poll::Ready(out)) => {
                self.taken = true;
                Poll::Ready(out)
            }
            Some(Poll::Pending) => Poll::Pending,
            // The ring is gone (the worker ends): nothing will come.
            None => Poll::Pending,
        }
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let slot = self.slot as usize;
        RING.with(|r| {
            let mut r = r.borrow_mut();
            let Some(ring) = r.as_mut() else { return };
            let Some(op) = ring.ops.get_mut(slot) else { return };
            match op {
                Op::Sending { done: Some(_), .. } => {
                    *op = Op::Free;
                    ring.free.push(slot as u32);
                }
                Op::Sending { abandoned, .. } => *abandoned = true,
                Op::Free => {}
            }
        });
    }
}

/// The pacer an open model's arrivals were sent by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pacer {
    /// The kernel's: each prepared request sent by io_uring at its due time.
    Kernel,
    /// The timerfd pacer (a wake-up per arrival, or per arrivals gathered),
    /// and why not the kernel's where it was refused (`None`: it does not
    /// apply, as to TLS, HTTP/2 or WebSocket).
    Timer(Option<String>),
}

thread_local! {
    /// The pacer this worker thread's open loop ran on.
    static RAN: RefCell<Option<Pacer>> = const { RefCell::new(None) };
}

/// This thread's open loop runs on `pacer`.
pub(crate) fn ran(pacer: Pacer) {
    RAN.with(|r| *r.borrow_mut() = Some(pacer));
}

/// The pacer this thread's open loop ran on (`None`: no open loop ran).
pub(crate) fn take_ran() -> Option<Pacer> {
    RAN.with(|r| r.borrow_mut().take())
}

#[cfg(test)]
thread_local! {
    /// The ring's waits on this thread: each a return to user space.
    static WAITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use std::future::Future;

    use super::*;
    use crate::http1::Stream;
    use crate::target::Target;

    /// Ten requests prepared on ten loopback connections, due 100 µs apart
    /// from 2 ms on, go out in one wait in the ring: none before its due
    /// time (the server reads each after it), each sent whole, and the
    /// thread back in user space once or twice, not once per request.
    #[test]
    fn prepared_requests_go_out_at_their_due_times_in_one_wait() {
        prepared_requests_go_out_at_their_due_times(Mode::default());
    }

    /// The same with the kernel's submission thread taking the batches and
    /// making the sends (`SQPOLL`, idle after 1 ms): the batch is taken
    /// before the timeouts' deadlines are written again, and the sends are
    /// never early.
    #[test]
    fn under_sqpoll_prepared_requests_go_out_at_their_due_times() {
        prepared_requests_go_out_at_their_due_times(Mode { sqpoll: Some((1, None)), until_sent: false });
    }

    /// The same with the wait ending once every prepared send completed
    /// (`min_complete`), not at its deadline.
    #[test]
    fn waiting_until_sent_prepared_requests_go_out_at_their_due_times() {
        prepared_requests_go_out_at_their_due_times(Mode { sqpoll: None, until_sent: true });
    }

    /// Sends prepared on this thread's ring and not yet reaped.
    fn pending() -> u32 {
        RING.with(|r| r.borrow().as_ref().map_or(0, |ring| ring.sending))
    }

    #[allow(clippy::print_stderr)] // a note when io_uring is refused, shown with the output
    fn prepared_requests_go_out_at_their_due_times(mode: Mode) {
        const N: usize = 10;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Target::parse(&format!("http://{addr}/")).unwrap();
        let work = Arc::new(Work::single(&target, "GET", &[], b"").unwrap());
        let len = work.flows[0].steps[0].cached.as_ref().map(Vec::len).expect("a literal step is cached");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            if let Err(why) = start_in(work.clone(), mode) {
                eprintln!("io_uring refused on this machine ({}): the kernel pacer is not tested", why.0);
                return;
            }
            let mut conns = Vec::new();
            let mut readers = Vec::new();
            for _ in 0..N {
                let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                let (mut server, _) = listener.accept().unwrap();
                conns.push(Box::new(Conn::stamped(Stream::Tcp(tcp))));
                // Each connection's server side: when the request was read whole.
                readers.push(std::thread::spawn(move || {
                    let mut got = vec![0u8; len];
                    server.read_exact(&mut got).map(|()| std::time::Instant::now())
                }));
            }
            let first = Instant::now() + Duration::from_millis(2);
            let dues: Vec<Instant> = (0..N as u32).map(|k| first + Duration::from_micros(100) * k).collect();
            let mut sent: Vec<Sent> = Vec::new();
            for (conn, &due) in conns.into_iter().zip(&dues) {
                sent.push(send_at(conn, 0, due).map_err(|_| "not prepared").unwrap());
            }
            submit();
            let before = WAITS.with(std::cell::Cell::get);
            assert!(wait_until(Some(dues[N - 1].into_std() + Duration::from_micros(300))));
            let waits = WAITS.with(std::cell::Cell::get) - before;
            assert!(waits <= 3, "{waits} returns to user space for {N} sends");
            // Under SQPOLL the kernel's thread makes the sends when it runs,
            // not this one inside its wait: on a busy machine the last may
            // complete after the wait (late, never early).
            let give_up = std::time::Instant::now() + Duration::from_millis(200);
            while mode.sqpoll.is_some() && pending() > 0 && std::time::Instant::now() < give_up {
                wait_until(Some(std::time::Instant::now() + Duration::from_millis(1)));
            }
            for (k, (s, reader)) in sent.into_iter().zip(readers).enumerate() {
                let mut s = std::pin::pin!(s);
                let (_, at) = match std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))).await {
                    Poll::Ready(out) => out,
                    Poll::Pending => panic!("request {k}: its send was not reaped in the wait"),
                };
                let at = at.unwrap_or_else(|| panic!("request {k} was not sent whole"));
                assert!(at >= dues[k], "request {k}: counted as sent before its due time");
                let read = reader.join().unwrap().unwrap();
                assert!(
                    read >= dues[k].into_std(),
                    "request {k} was read {:?} before its due time",
                    dues[k].into_std() - read
                );
            }
            finish();
        });
    }
}
