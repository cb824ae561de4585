//! The adapter that moves a slow output off the collector thread: k6's
//! "helpers that buffer and flush", with a bound.
//!
//! ```text
//!  collector thread                           the output's own thread
//!  second(s) ── copy(s) ── try_send ──> [ bounded buffer, CAPACITY ] ──> inner.second(copy)
//!               (never waits)   full? drop it, count it                 (may take its time)
//!               (nothing came for what tick() asked) ─────────────────> inner.tick(): a retry
//!  drain() ── send, wait at most the bound ────────────────────────────> inner.drain(until): the rest
//!  notes() ── "output jsonl: 3 seconds dropped, the output was slower than the run"
//!             and the inner output's notes, as it left them after its drain
//!  finish(end) ── send, wait at most DRAIN ──────────────────────────────> inner.finish(end)
//! ```
//!
//! It owns the thread, the buffer and the count of what it dropped; the
//! wrapped output ([`Detachable`]) owns what it writes, and says what it
//! needs of a second: the collector makes that copy, the output's thread
//! does the rest. Its histograms are never the collector's, which go back to
//! the workers; the output's thread hands each copy back when it is done,
//! and the next is made in its memory. What the copy of a whole second
//! ([`Whole`], [`Copied`]: 7 histograms of 188 KiB for the total and for
//! each step) costs the collector, with 5 steps whose histograms hold values
//! spread to 0.9 s (a test build with the binary's allocator, a 2-core
//! machine under load, three runs of `cargo test -p perfops --bin perfops
//! copy_cost -- --ignored --nocapture`): 0.20 to 0.22 ms into a reused copy,
//! 0.54 to 0.75 ms into new memory, where the `series.jsonl` line of that
//! second took 1.13 to 1.22 ms to compute: copying is cheaper than
//! computing what an output writes, so that is done on the output's thread.
//! In a run (5 steps at 200/s for 10 s, the collector thread's CPU time in
//! the pipeline, median of each run): 1.5 to 1.8 ms a second without an
//! output chosen, 2.7 to 3.1 ms with `--output jsonl=FILE`. It is paid only
//! when a detached output is chosen. An output that needs less (a few
//! counters) copies less, with its own [`Detachable::copy`].
//!
//! A second the buffer has no room for is dropped, counted and said, never
//! waited for: a full buffer means the output is slower than the run, and
//! waiting would pass that slowness on to the measurement. An error of the
//! wrapped output is reported once, on the collector's next call, and stops
//! the load as any failing output does; nothing more is sent to it.
//!
//! **Outputs that deliver elsewhere** (a push to a metrics store) need two
//! more things of the thread, and get them from [`Detachable::tick`] and
//! [`Detachable::drain`]: to be woken when nothing arrives (a retry after a
//! backoff shorter than a second), and to deliver what they still hold once
//! the seconds are over and before the summary is written, so that what
//! they could not deliver is in its warnings ([`Detachable::notes`], read
//! after the drain).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use perfops_core::pipeline::{Second, SinkError};

use crate::output::{Copied, End, Output, OwnedEnd};
use crate::run::RunMeta;

/// Seconds the buffer holds: a minute of a run behind before one is dropped.
pub const CAPACITY: usize = 60;
/// How long a finish waits for the output to write what it holds.
pub const DRAIN: Duration = Duration::from_secs(5);

/// An output that runs on a thread of its own ([`Detached`]).
pub trait Detachable: Send + 'static {
    /// What it needs of a second, owned.
    type Copy: Send + 'static;

    /// Make that copy: on the collector thread, so it must be quick and
    /// keep nothing of the second's. `old` is a copy the output is done with,
    /// whose memory it may reuse.
    fn copy(second: &Second<'_>, old: Option<Self::Copy>) -> Self::Copy;

    /// As [`Output::start`].
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        let _ = meta;
        Ok(())
    }

    /// As [`Output::second`], but on its own thread: it may take its time.
    fn second(&mut self, copy: &Self::Copy) -> Result<(), SinkError>;

    /// As [`Output::finish`].
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        let _ = end;
        Ok(())
    }

    /// On its own thread, after each message and whenever nothing arrived
    /// for as long as it last asked: do what is due (a retry), and say how
    /// long until the next call is wanted (`None`: only with the next
    /// second). The default wants none.
    fn tick(&mut self) -> Option<Duration> {
        None
    }

    /// As [`Output::drain`]: the seconds are over; deliver what is held,
    /// and be done by `until` (the adapter's bound, from when it was asked).
    fn drain(&mut self, until: Instant) {
        let _ = until;
    }

    /// As [`Output::notes`], read on its own thread after [`Detachable::drain`]
    /// (and after each second), and said with the adapter's own.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Any output, detached with a copy of the whole second ([`Copied`]).
pub struct Whole<O>(pub O);

impl<O: Output + Send + 'static> Detachable for Whole<O> {
    type Copy = Copied;

    fn copy(second: &Second<'_>, old: Option<Copied>) -> Copied {
        Copied::of(second, old)
    }
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        self.0.start(meta)
    }
    fn second(&mut self, copy: &Copied) -> Result<(), SinkError> {
        self.0.second(&copy.second())
    }
    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        self.0.finish(end)
    }
}

enum Msg<C> {
    Start(Box<RunMeta>),
    Second(C),
    Drain(Instant),
    Finish(OwnedEnd),
}

/// An output run on its own thread behind a bounded buffer.
pub struct Detached<D: Detachable> {
    name: String,
    tx: Option<SyncSender<Msg<D::Copy>>>,
    /// Copies the output is done with, for the next ones to reuse.
    back: Receiver<D::Copy>,
    done: Receiver<()>,
    /// Said when a drain is over.
    drained: Receiver<()>,
    /// The wrapped output's first error, set on its thread.
    error: Arc<Mutex<Option<String>>>,
    /// The wrapped output's notes, as its thread last read them.
    inner_notes: Arc<Mutex<Vec<String>>>,
    reported: bool,
    dropped: u64,
    drain: Duration,
    /// The drain was not done within its bound.
    late_drain: bool,
}

impl<D: Detachable> Detached<D> {
    /// Run `inner` (called `name` in what is said of it) on a thread of its
    /// own, behind a buffer of `capacity` seconds.
    pub fn new(name: &str, inner: D, capacity: usize) -> std::io::Result<Detached<D>> {
        Detached::with_drain(name, inner, capacity, DRAIN)
    }

    /// [`Detached::new`], waiting at most `drain` at the finish.
    pub fn with_drain(name: &str, mut inner: D, capacity: usize, drain: Duration) -> std::io::Result<Detached<D>> {
        let (tx, rx) = mpsc::sync_channel::<Msg<D::Copy>>(capacity.max(1));
        let (done_tx, done) = mpsc::sync_channel(1);
        let (drained_tx, drained) = mpsc::sync_channel(1);
        let inner_notes = Arc::new(Mutex::new(Vec::new()));
        let notes = inner_notes.clone();
        // A few copies in turn are enough: beyond them, one is freed on the output's thread.
        let (back_tx, back) = mpsc::sync_channel(2);
        let error = Arc::new(Mutex::new(None));
        let failed = error.clone();
        thread::Builder::new().name(format!("output {name}")).spawn(move || {
            let mut ok = true;
            // How long the output wants to wait for the next message before its tick.
            let mut wait: Option<Duration> = None;
            let mut tick_due = false;
            loop {
                // What is waiting is handled before the output's tick: a drain
                // asked for is not held behind a retry that the tick would start.
                let msg = match rx.try_recv() {
                    Ok(msg) => msg,
                    Err(TryRecvError::Disconnected) => break,
                    Err(TryRecvError::Empty) => {
                        if tick_due && ok {
                            wait = inner.tick();
                        }
                        let next = match wait {
                            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                            Some(wait_for) => rx.recv_timeout(wait_for),
                        };
                        match next {
                            Ok(msg) => msg,
                            Err(RecvTimeoutError::Timeout) => {
                                tick_due = true;
                                continue;
                            }
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                    }
                };
                let result = match msg {
                    Msg::Finish(end) => {
                        let result = if ok { inner.finish(&end.end()) } else { Ok(()) };
                        if let Err(e) = &result {
                            failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.0.clone());
                        }
                        let _ = done_tx.send(());
                        break;
                    }
                    Msg::Drain(until) => {
                        if ok {
                            inner.drain(until);
                        }
                        *notes.lock().unwrap_or_else(|p| p.into_inner()) = inner.notes();
                        let _ = drained_tx.try_send(());
                        Ok(())
                    }
                    _ if !ok => Ok(()),
                    Msg::Start(meta) => inner.start(&meta),
                    Msg::Second(copy) => {
                        let result = inner.second(&copy);
                        let _ = back_tx.try_send(copy);
                        result
                    }
                };
                if let Err(e) = result {
                    ok = false;
                    failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.0);
                }
                tick_due = true;
            }
        })?;
        Ok(Detached {
            name: name.to_string(),
            tx: Some(tx),
            back,
            done,
            drained,
            error,
            inner_notes,
            reported: false,
            dropped: 0,
            drain,
            late_drain: false,
        })
    }

    /// Seconds dropped so far: the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The wrapped output's error, once.
    fn failure(&mut self) -> Option<SinkError> {
        if self.reported {
            return None;
        }
        let e = self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        self.reported = true;
        Some(SinkError(format!("output {}: {e}", self.name)))
    }

    /// The finish did not end within the bound: its thread is left to end on its own.
    fn late(&self) -> SinkError {
        SinkError(format!(
            "output {}: still writing after {:.0} s; what it had not written is lost",
            self.name,
            self.drain.as_secs_f64()
        ))
    }
}

impl<D: Detachable> Output for Detached<D> {
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        // The buffer is empty before the first second: this does not wait.
        if let Some(tx) = &self.tx
            && let Err(TrySendError::Full(_)) = tx.try_send(Msg::Start(Box::new(meta.clone())))
        {
            return Err(SinkError(format!("output {}: could not start", self.name)));
        }
        Ok(())
    }

    fn second(&mut self, second: &Second<'_>) -> Result<(), SinkError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let Some(tx) = &self.tx else { return Ok(()) };
        match tx.try_send(Msg::Second(D::copy(second, self.back.try_recv().ok()))) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.dropped += 1;
                Ok(())
            }
            // Its thread ended: its error says why.
            Err(TrySendError::Disconnected(_)) => {
                self.tx = None;
                self.failure().map_or(Ok(()), Err)
            }
        }
    }

    fn finish(&mut self, end: &End<'_>) -> Result<(), SinkError> {
        let Some(tx) = self.tx.take() else { return self.failure().map_or(Ok(()), Err) };
        let deadline = Instant::now() + self.drain;
        let mut msg = Msg::Finish(end.owned());
        // Wait for room behind the seconds still buffered, within the bound.
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    msg = back;
                    thread::sleep(Duration::from_millis(5));
                }
                Err(TrySendError::Full(_)) => return Err(self.late()),
                Err(TrySendError::Disconnected(_)) => return self.failure().map_or(Ok(()), Err),
            }
        }
        match self.done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => self.failure().map_or(Ok(()), Err),
            Err(RecvTimeoutError::Timeout) => Err(self.late()),
            Err(RecvTimeoutError::Disconnected) => self.failure().map_or(Ok(()), Err),
        }
    }

    /// Ask the output's thread to drain, behind the seconds it still has,
    /// by the adapter's bound, and wait for it that long (and a little
    /// more); one that is not done by then is said to be.
    fn drain(&mut self) {
        let Some(tx) = &self.tx else { return };
        let deadline = Instant::now() + self.drain;
        let mut msg = Msg::Drain(deadline);
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    msg = back;
                    thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
        let grace = deadline + Duration::from_millis(500);
        if self.drained.recv_timeout(grace.saturating_duration_since(Instant::now())).is_err() {
            self.late_drain = true;
        }
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = match self.dropped {
            0 => Vec::new(),
            n => vec![format!(
                "output {}: {n} second{} dropped, the output was slower than the run",
                self.name,
                if n == 1 { "" } else { "s" }
            )],
        };
        notes.extend(self.inner_notes.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned());
        if self.late_drain {
            notes.push(format!(
                "output {}: still delivering after {:.0} s; what it had not delivered then is not counted here",
                self.name,
                self.drain.as_secs_f64()
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use perfops_core::measure::{Interval, Stats};

    use super::*;
    use crate::quick::{QuickSetup, QuickSummary};

    /// Sleeps `each` in every second; counts what it got and whether it finished.
    struct Slow {
        each: Duration,
        seconds: Arc<AtomicU32>,
        finished: Arc<AtomicU32>,
    }

    impl Output for Slow {
        fn second(&mut self, _: &Second<'_>) -> Result<(), SinkError> {
            thread::sleep(self.each);
            self.seconds.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn finish(&mut self, _: &End<'_>) -> Result<(), SinkError> {
            self.finished.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn summary() -> QuickSummary {
        let setup = QuickSetup {
            url: "http://127.0.0.1:1/".into(),
            method: "GET".into(),
            connections: Some(1),
            target_rate: None,
            max_in_flight: None,
            protocol: "http/1.1".into(),
        };
        QuickSummary::new(setup, &Stats::default(), Duration::from_secs(1), Default::default(), false)
    }

    fn place(iv: &Interval) -> Second<'_> {
        Second {
            interval: iv,
            t: iv.index,
            start: Duration::ZERO,
            stage: "a",
            draining: false,
            step_names: &[],
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        }
    }

    /// An output that takes 50 ms a second behind a buffer of 2: the
    /// collector's 10 calls return at once, the seconds with no room are
    /// dropped, counted and said, and the finish waits for what was kept.
    #[test]
    fn a_slow_output_never_holds_the_collector_drops_what_has_no_room_and_drains_at_finish() {
        let (seconds, finished) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let slow = Slow { each: Duration::from_millis(50), seconds: seconds.clone(), finished: finished.clone() };
        let mut out = Detached::new("slow", Whole(slow), 2).expect("a thread");
        let began = Instant::now();
        for k in 0..10 {
            let iv = Interval::empty(k);
            out.second(&place(&iv)).expect("no error");
        }
        let took = began.elapsed();
        assert!(took < Duration::from_millis(40), "10 calls took {took:?}: the collector waited for the output");
        // At most one in the output's hands and 2 in the buffer: 7 or more had no room.
        assert!(out.dropped() >= 7, "dropped {}", out.dropped());
        let kept = 10 - out.dropped() as u32;
        assert_eq!(
            out.notes(),
            vec![format!("output slow: {} seconds dropped, the output was slower than the run", out.dropped())]
        );
        let s = summary();
        out.finish(&End::Quick(&s)).expect("drained within the bound");
        assert_eq!(seconds.load(Ordering::SeqCst), kept, "every second kept was written before the finish");
        assert_eq!(finished.load(Ordering::SeqCst), 1);
    }

    /// An output stuck longer than the bound: the finish gives up and says so.
    #[test]
    fn a_finish_waits_no_longer_than_its_bound() {
        let (seconds, finished) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let stuck = Slow { each: Duration::from_secs(2), seconds, finished: finished.clone() };
        let mut out = Detached::with_drain("stuck", Whole(stuck), 4, Duration::from_millis(100)).expect("a thread");
        let iv = Interval::empty(0);
        out.second(&place(&iv)).expect("no error");
        let began = Instant::now();
        let s = summary();
        let e = out.finish(&End::Quick(&s)).expect_err("it could not finish");
        assert!(began.elapsed() < Duration::from_secs(1), "{:?}", began.elapsed());
        assert!(e.0.starts_with("output stuck: still writing after"), "{e}");
        assert_eq!(finished.load(Ordering::SeqCst), 0);
    }

    /// An output that delivers elsewhere: woken when nothing arrives, for as
    /// long as it asks (a retry), drained on request behind the seconds it
    /// has, and its notes read after its drain, with the adapter's own.
    #[test]
    fn a_pushing_output_is_ticked_drained_and_heard() {
        #[derive(Default)]
        struct Retrying {
            seconds: u32,
            ticks: Arc<AtomicU32>,
            drained: bool,
        }
        impl Detachable for Retrying {
            type Copy = ();
            fn copy(_: &Second<'_>, _: Option<()>) {}
            fn second(&mut self, _: &()) -> Result<(), SinkError> {
                self.seconds += 1;
                Ok(())
            }
            fn tick(&mut self) -> Option<Duration> {
                // Wants 4 wake-ups 5 ms apart after each message, then none.
                let n = self.ticks.fetch_add(1, Ordering::SeqCst);
                (n % 5 < 4).then_some(Duration::from_millis(5))
            }
            fn drain(&mut self, _: Instant) {
                self.drained = true;
            }
            fn notes(&self) -> Vec<String> {
                vec![format!("{} seconds, drained: {}", self.seconds, self.drained)]
            }
        }
        let ticks = Arc::new(AtomicU32::new(0));
        let mut out =
            Detached::new("push", Retrying { ticks: ticks.clone(), ..Retrying::default() }, 4).expect("a thread");
        let iv = Interval::empty(0);
        out.second(&place(&iv)).expect("no error");
        let deadline = Instant::now() + Duration::from_secs(5);
        while ticks.load(Ordering::SeqCst) < 5 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(ticks.load(Ordering::SeqCst), 5, "woken with no second coming, as long as it asked");
        out.second(&place(&iv)).expect("no error");
        assert_eq!(out.notes(), Vec::<String>::new(), "nothing heard before the drain");
        out.drain();
        assert_eq!(out.notes(), vec!["2 seconds, drained: true".to_string()]);
        let s = summary();
        out.finish(&End::Quick(&s)).expect("finished");
    }

    /// A tick that takes long (a push's request to a stalled receiver):
    /// the seconds and the drain waiting behind it are handled in a row
    /// once it returns, not each after another tick, so the drain is done
    /// within its bound and its notes count every second.
    #[test]
    fn a_drain_waits_behind_one_slow_tick_at_most() {
        struct Stalled(u32);
        impl Detachable for Stalled {
            type Copy = ();
            fn copy(_: &Second<'_>, _: Option<()>) {}
            fn second(&mut self, _: &()) -> Result<(), SinkError> {
                self.0 += 1;
                Ok(())
            }
            fn tick(&mut self) -> Option<Duration> {
                thread::sleep(Duration::from_millis(400));
                Some(Duration::ZERO)
            }
            fn notes(&self) -> Vec<String> {
                vec![format!("{} seconds", self.0)]
            }
        }
        let mut out = Detached::with_drain("stalled", Stalled(0), 8, Duration::from_millis(900)).expect("a thread");
        let iv = Interval::empty(0);
        for _ in 0..4 {
            out.second(&place(&iv)).expect("no error");
        }
        out.drain();
        assert_eq!(out.notes(), vec!["4 seconds".to_string()], "drained in time, every second counted");
    }

    /// A failing output: its error reaches the collector once, on the next call.
    #[test]
    fn an_error_of_the_output_is_reported_once() {
        struct Broken;
        impl Output for Broken {
            fn second(&mut self, _: &Second<'_>) -> Result<(), SinkError> {
                Err(SinkError("broken pipe".into()))
            }
        }
        let mut out = Detached::new("broken", Whole(Broken), 4).expect("a thread");
        let iv = Interval::empty(0);
        out.second(&place(&iv)).expect("the error is not known yet");
        let deadline = Instant::now() + Duration::from_secs(5);
        let e = loop {
            thread::sleep(Duration::from_millis(5));
            match out.second(&place(&iv)) {
                Err(e) => break e,
                Ok(()) if Instant::now() < deadline => {}
                Ok(()) => panic!("the error never came"),
            }
        };
        assert_eq!(e.0, "output broken: broken pipe");
        assert_eq!(out.second(&place(&iv)), Ok(()), "said once");
    }
}
