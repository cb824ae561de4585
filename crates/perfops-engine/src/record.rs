//! A worker's record of the second it is in: counters and histograms by
//! [`Key`], and the one place where an answered request's latency and service
//! time are recorded ([`Recorder::answered`]), so that the two histograms
//! cannot drift apart in meaning.
//!
//! ```text
//!   due        start    connect, TLS     sent                       last byte
//!    |--late-----|-------(if new)-------|--- write, wait, read ----|
//!    |<------------------------ latency ------------------------->|
//!                                       |<----- service time ---->|
//! ```
//!
//! Latency counts from the intended start (`due`: the schedule's, or after a
//! step's pause), service time from the actual send: after a new connection's
//! connect and TLS handshake, which are phases of their own (the `connect` and
//! `tls` histograms). A closed loop's request is due when it is sent
//! ([`Due::OnSend`]), so there the two are one measure.
//!
//! Every request that ends is counted in the latency (and, if it was sent, the
//! service-time) histogram at the time it took to end, a failure too: a
//! connect timeout at its 2 s, a refused connection at its few µs, as k6 and
//! JMeter count. A stage that collapses into timeouts then shows it in its
//! p99 (#11). The successes are recorded a second time in `latency_ok` and
//! `service_ok`, for `p99(ok)` and the tables that show both: two more
//! records per success, a few ns against the µs a request costs.
//!
//! It owns no clock and no socket: the worker reads the clock and hands over
//! instants. Per request it costs a short search among this second's few keys,
//! and no allocation once each key has been seen in the second.

use std::time::Duration;

use perfops_core::measure::{FailureKind, HistogramKind, Stats};
use tokio::time::Instant;

use crate::http1::Response;

/// Where a measurement belongs: pure data, in perfops-core (sinks need no engine).
pub use perfops_core::measure::Key;

/// When a request was meant to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// At this instant: an open-model arrival's due time, or the end of a
    /// step's pause. Lateness from here counts as latency.
    At(Instant),
    /// When it is actually sent: a closed-loop user sends as soon as it can,
    /// so it has nothing to be late for, and latency is service time.
    OnSend,
}

/// What one answered request measured (whatever its status).
pub(crate) struct Answer {
    pub(crate) due: Due,
    /// When the request was sent: once its connection was ready (after
    /// connect and TLS on a new one), before the write.
    pub(crate) sent: Instant,
    /// The final response (after redirects, if followed).
    pub(crate) response: Response,
    /// Request bytes written, redirects included.
    pub(crate) bytes_out: u64,
    /// A 4xx/5xx or a failed check.
    pub(crate) failure: Option<FailureKind>,
    /// It completes an arrival's flow (its last step, or a failure that ends it).
    pub(crate) ends_iteration: bool,
    /// It is its arrival's first request: its answer is what the open model's
    /// rate asked of the server (`Stats::arrivals_answered`, #32).
    pub(crate) first: bool,
}

/// What one request that got no answer measured.
pub(crate) struct Failure {
    pub(crate) due: Due,
    /// When it started (before any connect).
    pub(crate) start: Instant,
    /// When it was sent on a ready connection; none if it never was (the
    /// connect failed or timed out).
    pub(crate) sent: Option<Instant>,
    /// When it was given up.
    pub(crate) at: Instant,
    pub(crate) kind: FailureKind,
    /// Request bytes written, redirects included.
    pub(crate) bytes_out: u64,
    /// Bytes read before it failed (a malformed or cut-off answer): they
    /// were received, and count in the bytes in as a peer's would.
    pub(crate) bytes_in: u64,
}

/// This second's statistics, split by key (at most a few keys per second).
#[derive(Default)]
pub(crate) struct Recorder {
    parts: Vec<(Key, Stats)>,
    /// Emptied `Stats` to fill next (see [`Pool`]).
    spare: Vec<Stats>,
    /// Where the collector returns this worker's `Stats` once merged.
    pool: Option<Pool>,
}

/// `Stats` a worker shipped, emptied and handed back by the collector for
/// the worker to fill again (#12). A second's `Stats` holds seven HDR
/// histograms, ~1.3 MB; made new for every key every second and freed by the
/// collector, they moved the soak's RSS by 4 MiB within each second and cost
/// the page faults of fresh memory. The lock is taken once per second on
/// each side, never per request.
pub(crate) type Pool = std::sync::Arc<std::sync::Mutex<Vec<Stats>>>;

/// At most this many emptied `Stats` wait in a pool: a second with many keys
/// (many stages and steps) does not keep its memory for the rest of the run.
pub(crate) const POOL_MAX: usize = 16;

impl Recorder {
    /// A recorder whose `Stats` come back through `pool`.
    pub(crate) fn with_pool(pool: Pool) -> Recorder {
        Recorder { pool: Some(pool), ..Recorder::default() }
    }

    /// Before the load starts: make the first second's `Stats` (`keys`, one
    /// per step) and write every page of them. A fresh `Stats` is ~1.3 MB of
    /// memory the kernel has not handed over yet: made on first use, after
    /// the start instant, its pages faulted in on the worker for 5-15 ms
    /// (zeroing transparent huge pages among them), so the first arrivals of
    /// a run went out that much late (#13: the start spread of a fleet).
    ///
    /// Not done for later stages: keeping a stage's `Stats` spare for the
    /// second a new stage starts would hold ~1.3 MB per step for the whole
    /// run (the soak's RSS: +10 MiB); that second's first request pays the
    /// faults instead, and its latency shows them.
    ///
    /// `streams`: the run has streamed (or LLM) steps, whose histograms a
    /// `Stats` allocates on their first value (`LazyHistogram`): made now with
    /// the others, not on the worker when the first stream is recorded. Any
    /// other run never allocates them.
    pub(crate) fn warm(&mut self, keys: usize, streams: bool) {
        for _ in 0..keys.min(POOL_MAX) {
            let mut fresh = Stats::default();
            if streams {
                for &h in HistogramKind::ALL.iter().filter(|h| h.lazy()) {
                    fresh.histogram_mut(h);
                }
            }
            fresh.clear();
            self.spare.push(fresh);
        }
    }

    fn at(&mut self, key: Key) -> &mut Stats {
        match self.parts.iter().position(|(k, _)| *k == key) {
            Some(i) => &mut self.parts[i].1,
            None => {
                let fresh = self.spare.pop().unwrap_or_default();
                self.parts.push((key, fresh));
                &mut self.parts.last_mut().unwrap_or_else(|| unreachable!("just pushed")).1
            }
        }
    }

    /// A request started.
    pub(crate) fn sent(&mut self, key: Key) {
        self.at(key).sent += 1;
    }

    /// An arrival not sent: the generator's limit (`max_in_flight`, a `once`
    /// feeder run out).
    pub(crate) fn dropped(&mut self, key: Key) {
        self.at(key).dropped += 1;
    }

    /// An arrival due and never sent: the generator was behind when its
    /// stage (or the run) ended (`worker/open_loop.rs`).
    pub(crate) fn unsent(&mut self, key: Key) {
        self.at(key).unsent += 1;
    }

    /// An arrival sent `perfops_core::analysis::generator::LATE` or more
    /// after its due time.
    pub(crate) fn late(&mut self, key: Key) {
        self.at(key).late += 1;
    }

    /// The generator did not run for `took` (its watch woke that late).
    pub(crate) fn stalled(&mut self, key: Key, took: Duration) {
        self.at(key).stalled_us += took.as_micros() as u64;
    }

    /// A new TCP connection, `took` to connect.
    pub(crate) fn connected(&mut self, key: Key, took: Duration) {
        let st = self.at(key);
        st.connects += 1;
        st.connect.record(took);
    }

    /// HTTP/2: `n` connections the server sent away (`GOAWAY`), seen by a
    /// request of `key`.
    pub(crate) fn goaways(&mut self, key: Key, n: u64) {
        self.at(key).goaways += n;
    }

    /// HTTP/2: a request found every stream busy and waited for one.
    pub(crate) fn stream_wait(&mut self, key: Key) {
        self.at(key).stream_waits += 1;
    }

    /// Time spent in scripts (hooks, `script:` steps) for a request of `key`.
    pub(crate) fn scripted(&mut self, key: Key, took: Duration) {
        self.at(key).script_ns += u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
    }

    /// A TLS handshake that `took` this long.
    pub(crate) fn handshake(&mut self, key: Key, took: Duration) {
        self.at(key).tls.record(took);
    }

    /// A request answered: the one place latency and service time are recorded.
    pub(crate) fn answered(&mut self, key: Key, a: &Answer) {
        let st = self.at(key);
        let r = &a.response;
        st.completed += 1;
        st.bytes_in += r.bytes_in;
        st.bytes_out += a.bytes_out;
        // The response was complete when its last bytes were read: no clock
        // read of its own (parsing after it is the generator's time).
        let done = r.last_byte;
        let service = done - a.sent;
        let latency = match a.due {
            Due::At(due) => done - due,
            Due::OnSend => service,
        };
        st.latency.record(latency);
        st.service.record(service);
        st.ttfb.record(r.first_byte - r.sent_at);
        match a.failure {
            Some(kind) => st.failures.add(kind),
            None => {
                st.latency_ok.record(latency);
                st.service_ok.record(service);
            }
        }
        if a.ends_iteration {
            st.iterations += 1;
        }
        if a.first {
            st.arrivals_answered += 1;
        }
    }

    /// A streamed answer that ended (well, or failed once it had begun):
    /// its events counted, its first event timed from the intended start
    /// (as latency is: what a user waits for), each gap between events,
    /// and, when it was answered whole, its duration from its first byte to
    /// its last (`answer`: first byte, end). The histograms' rows are
    /// declared in `perfops_core::measure::stats`.
    pub(crate) fn streamed(
        &mut self,
        key: Key,
        due: Due,
        sent: Instant,
        answer: Option<(Instant, Instant)>,
        t: &crate::stream::Timeline,
    ) {
        let st = self.at(key);
        st.events.record_count(t.events);
        if let Some(first) = t.first_event {
            let from = match due {
                Due::At(due) => due,
                Due::OnSend => sent,
            };
            st.first_event.record(first.saturating_duration_since(from));
        }
        for (gap, n) in t.gaps.counts() {
            st.event_gap.record_us(gap, n);
        }
        if let Some((first_byte, end)) = answer {
            st.stream.record(end.saturating_duration_since(first_byte));
        }
    }

    /// An LLM step's streamed answer, beside its stream ([`Recorder::streamed`]): its time to
    /// first token from the intended start and from the send, each gap between tokens, its
    /// time per output token and output tokens per second (`end`: its last byte, when it was
    /// answered whole), and its tokens in and out. See `llm.rs` for what a token is.
    pub(crate) fn tokens(&mut self, key: Key, due: Due, sent: Instant, end: Option<Instant>, t: &crate::llm::Tokens) {
        let st = self.at(key);
        let completion = t.completion();
        st.tokens_in += t.prompt();
        st.tokens_out += completion;
        let Some(first) = t.first else { return };
        let from = match due {
            Due::At(due) => due,
            Due::OnSend => sent,
        };
        st.ttft.record(first.saturating_duration_since(from));
        st.ttft_sent.record(first.saturating_duration_since(sent));
        for (gap, n) in t.gaps.counts() {
            st.itl.record_us(gap, n);
        }
        let Some(end) = end else { return };
        if completion >= 2 {
            st.tpot.record(end.saturating_duration_since(first) / (completion - 1).min(u64::from(u32::MAX)) as u32);
        }
        let took = end.saturating_duration_since(sent).as_secs_f64();
        if took > 0.0 {
            st.output_tps.record_count((completion as f64 / took).round() as u64);
        }
    }

    /// A non-streamed LLM answer's tokens, from its `usage` (none: nothing to count).
    pub(crate) fn usage(&mut self, key: Key, usage: crate::llm::Usage) {
        let st = self.at(key);
        st.tokens_in += usage.prompt_tokens;
        st.tokens_out += usage.completion_tokens;
    }

    /// A scripted flow instance that ended after its last request (`key`):
    /// one iteration. Its scripts decided it ended after that request was
    /// answered (a `script:` step that ends the flow or sends it round
    /// again), so it is counted now, in the second that holds that answer,
    /// unless this second's answers of `key` are all counted already: an
    /// iteration is never counted without an answer (a second's parts say
    /// `iterations <= completed`, and the fleet's wire refuses one that does
    /// not). So a flow whose last request got no answer, or that ended a
    /// second after it (a long pause), counts only where this second holds
    /// an answer of `key` not counted yet.
    pub(crate) fn iteration(&mut self, key: Key) {
        let st = self.at(key);
        if st.iterations < st.completed {
            st.iterations += 1;
        }
    }

    /// A request that got no answer: counted in the latency at the time it
    /// took to fail, and in the service time if it was sent.
    pub(crate) fn failed(&mut self, key: Key, f: &Failure) {
        let st = self.at(key);
        st.bytes_out += f.bytes_out;
        st.bytes_in += f.bytes_in;
        st.failures.add(f.kind);
        let service = f.sent.map(|sent| f.at - sent);
        st.latency.record(match f.due {
            Due::At(due) => f.at - due,
            // A closed loop's request that was never sent ended its connect
            // attempt: that is what its user waited.
            Due::OnSend => service.unwrap_or(f.at - f.start),
        });
        if let Some(service) = service {
            st.service.record(service);
        }
    }

    /// A WebSocket connection held open (no message awaiting its reply)
    /// that ended badly (`kind`: dropped, or closed with an error code):
    /// counted as a failure with no latency, since no request waited for it.
    pub(crate) fn closed(&mut self, key: Key, kind: FailureKind) {
        self.at(key).failures.add(kind);
    }

    /// A request still in flight when the run ended, `waited` after it was
    /// due: cut. Its latency is at least `waited`, and it is recorded so:
    /// in an overloaded open model the requests in flight at the end are the
    /// slowest, and leaving them out would make the percentiles lie (the
    /// coordinated omission a cut would otherwise reintroduce). No service
    /// time: it was never answered. The bytes it wrote were sent, and count.
    pub(crate) fn cut(&mut self, key: Key, waited: Duration, bytes_out: u64) {
        let st = self.at(key);
        st.failures.add(FailureKind::Cut);
        st.bytes_out += bytes_out;
        st.latency.record(waited);
    }

    /// The first failure kind recorded under `key`, if any.
    pub(crate) fn first_failure(&mut self, key: Key) -> Option<FailureKind> {
        self.at(key).failures.nonzero().first().map(|(k, _)| *k)
    }

    /// This second's statistics, leaving the recorder empty for the next,
    /// with what the collector has handed back ready to be filled.
    ///
    /// Subtleness ahead: it keeps as many emptied `Stats` as this second
    /// used keys, and lets the others go. When the collector is late to hand
    /// a second's back, the next second makes new ones; kept as well, every
    /// such delay added its `Stats` for good (the soak's RSS went 42 -> 60 MiB
    /// in steps of 4-8 MiB over the hour).
    pub(crate) fn take(&mut self) -> Vec<(Key, Stats)> {
        if let Some(pool) = &self.pool {
            let want = self.parts.len();
            self.spare.truncate(want);
            let mut returned = pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = want.saturating_sub(self.spare.len()).min(returned.len());
            self.spare.extend(returned.drain(..n));
            let surplus = std::mem::take(&mut *returned);
            drop(returned);
            drop(surplus); // freed outside the lock the collector takes
        }
        std::mem::take(&mut self.parts)
    }
}

/// The mean service time of the successes over `parts` (zero when none):
/// one 20 s timeout must not stretch the next second's naps.
pub(crate) fn mean_service(parts: &[(Key, Stats)]) -> Duration {
    let (n, sum_ms) = parts.iter().fold((0u64, 0.0), |(n, sum), (_, s)| {
        (n + s.service_ok.len(), sum + s.service_ok.mean_ms() * s.service_ok.len() as f64)
    });
    if n == 0 { Duration::ZERO } else { Duration::from_secs_f64(sum_ms / n as f64 / 1e3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// #13: a warmed recorder makes no `Stats` in its first second (fresh
    /// ones page-faulted on the worker, and its first arrivals went out
    /// 5-15 ms late), and keeps no more than its seconds use.
    #[test]
    fn a_warmed_recorder_makes_no_stats_in_its_first_second() {
        let pool = Pool::default();
        let mut rec = Recorder::with_pool(pool.clone());
        rec.warm(2, false);
        assert_eq!(rec.spare.len(), 2, "made before the start");
        rec.sent(Key { stage: 0, step: 0 });
        rec.sent(Key { stage: 0, step: 1 });
        assert_eq!(rec.spare.len(), 0, "second 0's two keys came from the spares");
        let second0 = rec.take();
        pool.lock().unwrap().extend(second0.into_iter().map(|(_, s)| s));
        rec.sent(Key { stage: 0, step: 0 });
        let _second1 = rec.take();
        assert_eq!(rec.spare.len(), 1, "one key in second 1: one kept of the two handed back");
        assert!(pool.lock().unwrap().is_empty(), "the other let go");
    }

    /// Latency from the intended start, service time from the actual send,
    /// case by case.
    #[test]
    fn latency_counts_from_the_due_time_and_service_from_the_send() {
        let t0 = Instant::now();
        let key = Key { stage: 0, step: 0 };
        // (due, sent, last byte, latency, service)
        let cases = [
            (Due::At(t0), t0, t0 + ms(10), ms(10), ms(10)), // on time, kept connection: one measure
            (Due::At(t0), t0 + ms(3), t0 + ms(13), ms(13), ms(10)), // 3 ms late (or connecting): latency only
            (Due::OnSend, t0 + ms(3), t0 + ms(13), ms(10), ms(10)), // a closed loop: due when sent
        ];
        for (i, (due, sent, done, latency, service)) in cases.into_iter().enumerate() {
            let mut rec = Recorder::default();
            let response = Response { status: 200, bytes_in: 1, sent_at: sent, first_byte: done, last_byte: done };
            let answer = Answer { due, sent, response, bytes_out: 1, failure: None, ends_iteration: true, first: true };
            rec.answered(key, &answer);
            let parts = rec.take();
            let st = &parts[0].1;
            // Whole milliseconds: the histograms keep 3 significant digits.
            let got = (st.latency.max().as_millis(), st.service.max().as_millis());
            assert_eq!(got, (latency.as_millis(), service.as_millis()), "case {i}");
            assert_eq!((st.completed, st.iterations, st.arrivals_answered), (1, 1, 1), "case {i}");
            assert_eq!((st.latency_ok.len(), st.service_ok.len()), (1, 1), "case {i}: a success counts in both");
        }
    }

    /// #11: a request that failed counts in the latency at the time it took
    /// to fail (in the service time if it was sent), never among the
    /// successes; a 5xx answer likewise.
    #[test]
    fn failures_count_in_the_latency_at_the_time_they_took() {
        let t0 = Instant::now();
        let key = Key { stage: 0, step: 0 };
        use FailureKind::*;
        // (due, start, sent, failed at, kind, latency, service)
        let cases = [
            // an open arrival whose connect timed out after 2 s: 2 s of latency, never sent
            (Due::At(t0), t0, None, t0 + ms(2000), ConnectTimeout, ms(2000), None),
            // started 5 ms late, refused at once: the lateness is latency too
            (Due::At(t0), t0 + ms(5), None, t0 + ms(5), ConnectRefused, ms(5), None),
            // sent on a kept connection, no answer within the 1 s timeout
            (Due::At(t0), t0, Some(t0), t0 + ms(1000), Timeout, ms(1000), Some(ms(1000))),
            // a closed loop's user whose connect timed out: the attempt is what it waited
            (Due::OnSend, t0, None, t0 + ms(2000), ConnectTimeout, ms(2000), None),
            // a closed loop's request reset 30 ms after its send, 3 ms after its start
            (Due::OnSend, t0, Some(t0 + ms(3)), t0 + ms(33), Reset, ms(30), Some(ms(30))),
        ];
        for (i, (due, start, sent, at, kind, latency, service)) in cases.into_iter().enumerate() {
            let mut rec = Recorder::default();
            rec.failed(key, &Failure { due, start, sent, at, kind, bytes_out: 0, bytes_in: 0 });
            let parts = rec.take();
            let st = &parts[0].1;
            assert_eq!(st.latency.max().as_millis(), latency.as_millis(), "case {i}");
            assert_eq!(st.service.len(), u64::from(service.is_some()), "case {i}");
            if let Some(service) = service {
                assert_eq!(st.service.max().as_millis(), service.as_millis(), "case {i}");
            }
            assert!(st.latency_ok.is_empty() && st.service_ok.is_empty(), "case {i}: not a success");
            assert_eq!(st.failures[kind], 1, "case {i}");
        }
        // A 5xx answer: in the latency, not among the successes.
        let mut rec = Recorder::default();
        let response =
            Response { status: 503, bytes_in: 1, sent_at: t0, first_byte: t0 + ms(4), last_byte: t0 + ms(4) };
        let failure = Some(Http5xx);
        rec.answered(
            key,
            &Answer { due: Due::At(t0), sent: t0, response, bytes_out: 1, failure, ends_iteration: true, first: true },
        );
        let parts = rec.take();
        assert_eq!((parts[0].1.latency.len(), parts[0].1.latency_ok.len()), (1, 0));
    }
}
