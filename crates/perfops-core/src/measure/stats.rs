//! Statistics of a span of a run (one second, one stage, the whole run), as one
//! worker or many measured them: its counters and histograms declared once.
//!
//! The table at `stats!` below is the one place a counter is written out:
//! its field, its name in [`Counter`], and where the results files show it.
//! From it come the struct, merge, clear, access by name, the fleet wire
//! (read by name, `fleet::wire`) and the counters' JSON in series lines,
//! parts, summaries and `quick --json` (`counters.rs`). A table of fields
//! rather than an array indexed by name, so that the engine keeps writing
//! fields (`stats.goaways += 1`: one add, no lookup per request) and merge
//! stays field-wise code. Adding a counter: a row here, and the line in the
//! engine that counts it. What stays by hand is what people read (`quick`'s
//! terminal rows, the Prometheus endpoint's help texts) and the rules that
//! tie counters together (`fleet::wire`'s `impossible`).

use super::{FailureCounts, FailureKind, Histogram, LazyHistogram};

/// What a histogram's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A duration, recorded in µs ([`Histogram::record`]); its figures are
    /// given in ms.
    Micros,
    /// A count ([`Histogram::record_count`]), given as it is.
    Count,
}

/// Where a counter appears in a JSON file of the results (see
/// [`super::Counters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Always written.
    Always,
    /// Written when not zero (a counter most runs never see, e.g. HTTP/2's).
    NonZero,
    /// Not in this file.
    Never,
}

/// The table of [`Stats`]' counters and histograms, and what is derived
/// from it: the struct itself, [`Counter`], [`HistogramKind`], merge, clear
/// and access by name.
///
/// A counter's row: `field: Variant, series: S, part: P, quick: Q, summary: F[, absent: Other];`
/// where S, P, Q, F say how it appears in a `series.jsonl` line, in a line's
/// `parts`, in `quick --json` and in `summary.json`'s figures ([`Shown`]), and `absent` what a file
/// written before the counter existed reads it as (another counter's value).
/// A histogram's row: `field: Variant, unit: U, summary: F[, lazy];` where U says what
/// a value is ([`Unit`]: a duration in µs, or a count) and F whether
/// `summary.json`'s figures show it (and `compare` and the report's rows):
/// `Never` for the request's own (latency and service time have fields of
/// their own there), `NonZero` for those most runs never fill (a stream's).
/// `lazy`: its memory comes with its first value, not with the `Stats`
/// ([`LazyHistogram`]; read as an empty histogram until then, merged and
/// written as one): each histogram is ~190 KB of counts, and the nine rows of
/// streams and LLM steps made a `Stats` 3.0 MB instead of 1.3 MB in runs that
/// never fill them. The rows every request fills stay allocated up front, so
/// their record is the plain one.
macro_rules! stats {
    (
        counters { $(
            $(#[doc = $cdoc:literal])*
            $counter:ident : $Counter:ident, series: $series:ident, part: $part:ident, quick: $quick:ident, summary: $summary:ident
            $(, absent: $absent:ident)?;
        )* }
        histograms { $(
            $(#[doc = $hdoc:literal])*
            $histogram:ident : $Histogram:ident, unit: $unit:ident, summary: $hsummary:ident $(, $lazy:ident)?;
        )* }
    ) => {
        /// Counters and histograms for a span of a run. Merging is field-wise addition.
        ///
        /// Definitions (one request = one arrival of the open model, or one loop of a
        /// closed-model user):
        /// - `sent`: requests started; `completed`: responses received (any status);
        /// - `arrivals_answered`: arrivals whose first request was answered (any
        ///   status), counted when that answer came: what the server was asked for
        ///   at the open model's rate. The flow's later steps follow the server
        ///   (each due when the one before ended, plus its pause) and may end a whole
        ///   flow's duration later, in another stage's seconds; they are judged
        ///   by the latency and error lines. `iterations`: flows whose last step was
        ///   answered (completed flows). For a one-step flow the two are equal;
        ///   `failures`: by kind, including responses that were 4xx/5xx;
        /// - `dropped`: open-model arrivals not sent because `max_in_flight` was reached:
        ///   the generator, not the server, was the limit; `unsent`: those due but never
        ///   sent because the generator was behind when their stage ended (it stalled);
        ///   `late`: those sent far behind their due time (the same cause);
        /// - `latency`: from the intended start (the due time) to the end of the
        ///   request: its response's last byte, or the moment it failed; `service`:
        ///   from the actual send to the same end. The send is on a ready connection:
        ///   a new connection's connect and TLS handshake precede it (they are
        ///   `connect` and `tls`). So the two differ when the generator was late or
        ///   had to connect (open model); in a closed loop, where a request is due
        ///   when it is sent, they are equal;
        /// - every request that ended counts in `latency`, a failure at the time it
        ///   took to fail (a connect timeout its 2 s, a refused connection its few
        ///   µs), as k6 and JMeter count; in `service` too if it was sent (a refused
        ///   connection never was). `latency_ok` and `service_ok` hold the
        ///   successes alone (see docs/coordinated-omission.md, "Failed requests");
        /// - `connect`, `tls`: per new connection; `ttfb`: from the request written to
        ///   the first response byte ("waiting" in ab's words).
        ///
        /// The fields are declared once, in the table of `stats!` in this
        /// file, with how each appears in the results files: merge, clear,
        /// the names, the fleet wire and the counters of the series lines,
        /// the parts and `quick --json` follow from it. The engine writes
        /// the fields directly (`stats.goaways += 1`): nothing derived runs
        /// per request.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Stats {
            $( $(#[doc = $cdoc])* pub $counter: u64, )*
            /// Failures by kind.
            pub failures: FailureCounts,
            $( $(#[doc = $hdoc])* pub $histogram: stats!(@row $($lazy)?), )*
        }

        /// A plain counter of [`Stats`], by name: what the results files and
        /// the fleet's wire list.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Counter {
            $( $(#[doc = $cdoc])* $Counter, )*
        }

        /// A histogram of [`Stats`], by name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum HistogramKind {
            $( $(#[doc = $hdoc])* $Histogram, )*
        }

        impl Counter {
            /// Every counter, in declaration order (the wire's and the files').
            pub const ALL: &[Counter] = &[ $( Counter::$Counter, )* ];
            /// How many counters.
            pub const COUNT: usize = Counter::ALL.len();

            /// Its field name: the key in the results files, the name on the wire.
            pub fn name(self) -> &'static str {
                match self { $( Counter::$Counter => stringify!($counter), )* }
            }

            /// The counter named `name`.
            pub fn from_name(name: &str) -> Option<Counter> {
                Counter::ALL.iter().copied().find(|c| c.name() == name)
            }

            /// How it appears in a `series.jsonl` line.
            pub fn in_series(self) -> Shown {
                match self { $( Counter::$Counter => Shown::$series, )* }
            }

            /// How it appears in a series line's `parts`.
            pub fn in_part(self) -> Shown {
                match self { $( Counter::$Counter => Shown::$part, )* }
            }

            /// How it appears in `quick --json`.
            pub fn in_quick(self) -> Shown {
                match self { $( Counter::$Counter => Shown::$quick, )* }
            }

            /// How it appears in `summary.json`'s figures (a stage's, a step's, the total's).
            pub fn in_summary(self) -> Shown {
                match self { $( Counter::$Counter => Shown::$summary, )* }
            }

            /// What a file written before this counter existed reads it as.
            pub fn when_absent(self) -> Option<Counter> {
                match self { $( Counter::$Counter => stats!(@absent $($absent)?), )* }
            }
        }

        impl HistogramKind {
            /// Every histogram, in declaration order (the wire's).
            pub const ALL: &[HistogramKind] = &[ $( HistogramKind::$Histogram, )* ];
            /// How many histograms.
            pub const COUNT: usize = HistogramKind::ALL.len();

            /// Its field name.
            pub fn name(self) -> &'static str {
                match self { $( HistogramKind::$Histogram => stringify!($histogram), )* }
            }

            /// The histogram named `name`.
            pub fn from_name(name: &str) -> Option<HistogramKind> {
                HistogramKind::ALL.iter().copied().find(|h| h.name() == name)
            }

            /// Whether its memory is allocated on its first value ([`LazyHistogram`]:
            /// a row most runs never fill) rather than with the `Stats`.
            pub fn lazy(self) -> bool {
                match self { $( HistogramKind::$Histogram => stats!(@lazy $($lazy)?), )* }
            }

            /// What one of its values is.
            pub fn unit(self) -> Unit {
                match self { $( HistogramKind::$Histogram => Unit::$unit, )* }
            }

            /// Whether `summary.json`'s figures show it (and so `compare`
            /// and the report's step rows).
            pub fn in_summary(self) -> Shown {
                match self { $( HistogramKind::$Histogram => Shown::$hsummary, )* }
            }

            /// Its key in `summary.json`'s figures: `NAME_ms` for a duration
            /// (its figures in ms, as `latency_ms`), `NAME` for a count.
            pub fn summary_key(self) -> String {
                match self.unit() {
                    Unit::Micros => format!("{}_ms", self.name()),
                    Unit::Count => self.name().to_string(),
                }
            }
        }

        impl Stats {
            /// The value of counter `c`.
            pub fn counter(&self, c: Counter) -> u64 {
                match c { $( Counter::$Counter => self.$counter, )* }
            }

            /// The counter `c`, to change.
            pub fn counter_mut(&mut self, c: Counter) -> &mut u64 {
                match c { $( Counter::$Counter => &mut self.$counter, )* }
            }

            /// Every counter's value, in [`Counter::ALL`]'s order.
            pub fn counters(&self) -> [u64; Counter::COUNT] {
                [ $( self.$counter, )* ]
            }

            /// The histogram `h`.
            pub fn histogram(&self, h: HistogramKind) -> &Histogram {
                match h { $( HistogramKind::$Histogram => Row::read(&self.$histogram), )* }
            }

            /// The histogram `h`, to change (a lazy one is allocated now).
            pub fn histogram_mut(&mut self, h: HistogramKind) -> &mut Histogram {
                match h { $( HistogramKind::$Histogram => Row::write(&mut self.$histogram), )* }
            }

            /// The bytes its histograms' counts hold, of those allocated: nearly all of
            /// a `Stats`' memory.
            pub fn histogram_bytes(&self) -> usize {
                0 $( + Row::bytes(&self.$histogram) )*
            }

            /// Add everything of `other` to `self`. Associative and commutative.
            pub fn merge(&mut self, other: &Stats) {
                $( self.$counter += other.$counter; )*
                self.failures += &other.failures;
                $( self.$histogram.merge(&other.$histogram); )*
            }

            /// Empty it, keeping the histograms' memory (a lazy one's too, once
            /// allocated): what a fresh `Stats` is, without the ~1.3 MB of new histograms (the soak's RSS moved by
            /// 4 MiB within each second while new ones were made every second).
            pub fn clear(&mut self) {
                $( self.$counter = 0; )*
                self.failures = FailureCounts::default();
                $( self.$histogram.clear(); )*
            }
        }
    };
    (@absent $c:ident) => { Some(Counter::$c) };
    (@absent) => { None };
    (@row lazy) => { LazyHistogram };
    (@row) => { Histogram };
    (@lazy lazy) => { true };
    (@lazy) => { false };
}

/// A row's histogram as `stats!` reaches it, whether its memory comes with the
/// `Stats` ([`Histogram`]) or with its first value ([`LazyHistogram`]).
trait Row {
    fn read(&self) -> &Histogram;
    fn write(&mut self) -> &mut Histogram;
    fn bytes(&self) -> usize;
}

impl Row for Histogram {
    fn read(&self) -> &Histogram {
        self
    }
    fn write(&mut self) -> &mut Histogram {
        self
    }
    fn bytes(&self) -> usize {
        self.heap_bytes()
    }
}

impl Row for LazyHistogram {
    fn read(&self) -> &Histogram {
        self.get()
    }
    fn write(&mut self) -> &mut Histogram {
        self.get_mut()
    }
    fn bytes(&self) -> usize {
        if self.is_allocated() { self.get().heap_bytes() } else { 0 }
    }
}

stats! {
    counters {
        /// Requests started.
        sent: Sent, series: Always, part: Always, quick: Always, summary: Always;
        /// Arrivals (flows) whose last step was answered, whatever the status:
        /// completed flows.
        iterations: Iterations, series: Always, part: Always, quick: Never, summary: Never;
        /// Arrivals whose first request was answered, whatever the status: the
        /// achieved rate, comparable with a target in arrivals per second (a
        /// series line gives it as `achieved_rate`). Parts written before it
        /// existed read it as `iterations` (what "achieved" counted then).
        arrivals_answered: ArrivalsAnswered, series: Never, part: Always, quick: Never, summary: Never, absent: Iterations;
        /// Responses received, whatever their status.
        completed: Completed, series: Always, part: Always, quick: Always, summary: Always;
        /// Open-model arrivals dropped at the `max_in_flight` cap.
        dropped: Dropped, series: Always, part: Always, quick: Always, summary: Always;
        /// Open-model arrivals due that were never sent: the generator was
        /// behind (stalled, or out of CPU) when their stage or the run ended.
        /// sent + dropped + unsent is every arrival due (a flow's first step).
        unsent: Unsent, series: NonZero, part: NonZero, quick: NonZero, summary: NonZero;
        /// Open-model arrivals sent at least `analysis::generator::LATE` after
        /// their due time: the generator, not the server, made them wait.
        late: Late, series: NonZero, part: NonZero, quick: NonZero, summary: NonZero;
        /// Microseconds the generator itself was stopped (no thread of it ran
        /// for `analysis::generator::LATE` or more: SIGSTOP, a VM paused, its
        /// CPU taken), as its first worker saw it, in the stage it fell in.
        stalled_us: StalledUs, series: NonZero, part: NonZero, quick: NonZero, summary: NonZero;
        /// Response bytes read (head and body).
        bytes_in: BytesIn, series: Always, part: Always, quick: Always, summary: Never;
        /// Request bytes written.
        bytes_out: BytesOut, series: Always, part: Always, quick: Always, summary: Never;
        /// Connections opened.
        connects: Connects, series: Never, part: Always, quick: Always, summary: Never;
        /// HTTP/2: connections the server sent away (`GOAWAY`), replaced by new ones.
        goaways: Goaways, series: NonZero, part: NonZero, quick: NonZero, summary: Never;
        /// HTTP/2: requests that found every stream of every connection they
        /// may use busy (the `streams` per connection, or fewer if the server's
        /// SETTINGS said so) and waited for one. The wait is in their latency,
        /// not their service time.
        stream_waits: StreamWaits, series: NonZero, part: NonZero, quick: NonZero, summary: Never;
        /// CPU time the worker spent in scripts (hooks and `script:` steps),
        /// nanoseconds of its thread's clock: divided by the generator's CPU,
        /// the share of it that went to scripts. Zero, and absent from
        /// every file, for a scenario without scripts.
        script_ns: ScriptNs, series: NonZero, part: NonZero, quick: Never, summary: NonZero;
        /// LLM steps: prompt tokens, from the answer's `usage` (none there: 0).
        tokens_in: TokensIn, series: NonZero, part: NonZero, quick: NonZero, summary: NonZero;
        /// LLM steps: completion tokens, from the answer's `usage`, else the content deltas counted.
        tokens_out: TokensOut, series: NonZero, part: NonZero, quick: NonZero, summary: NonZero;
    }
    histograms {
        /// Intended start to the end of every request that ended, failures included.
        latency: Latency, unit: Micros, summary: Never;
        /// Actual send (on a ready connection) to the end, for every request sent.
        service: Service, unit: Micros, summary: Never;
        /// `latency` of the successes alone.
        latency_ok: LatencyOk, unit: Micros, summary: Never;
        /// `service` of the successes alone.
        service_ok: ServiceOk, unit: Micros, summary: Never;
        /// TCP connect time of new connections.
        connect: Connect, unit: Micros, summary: Never;
        /// TLS handshake time of new connections.
        tls: Tls, unit: Micros, summary: Never;
        /// Request written to first response byte.
        ttfb: Ttfb, unit: Micros, summary: Never;
        /// A streamed answer (a step with `stream:`): from the intended start
        /// (as `latency`) to its first event, per answer that had one.
        first_event: FirstEvent, unit: Micros, summary: NonZero, lazy;
        /// A streamed answer: between each event and the next (an answer of n
        /// events gives n - 1), each dated by the kernel's receive time of
        /// the read that completed it.
        event_gap: EventGap, unit: Micros, summary: NonZero, lazy;
        /// A streamed answer: its events, per answer (0 included).
        events: Events, unit: Count, summary: NonZero, lazy;
        /// A streamed answer: from its first byte to its end (its last byte).
        stream: Stream, unit: Micros, summary: NonZero, lazy;
        /// LLM steps: from the intended start (as `latency`) to the first token's arrival.
        ttft: Ttft, unit: Micros, summary: NonZero, lazy;
        /// LLM steps: from the actual send (as `service`) to the first token's arrival.
        ttft_sent: TtftSent, unit: Micros, summary: NonZero, lazy;
        /// LLM steps: each gap between a token's arrival and the next's (tokens that came in
        /// one read share its instant: a gap of 0).
        itl: Itl, unit: Micros, summary: NonZero, lazy;
        /// LLM steps: per answer of two tokens or more, (last token - first token) / (tokens - 1).
        tpot: Tpot, unit: Micros, summary: NonZero, lazy;
        /// LLM steps: per answer, its output tokens per second from the send to its end,
        /// recorded as a count (tokens/s, whole).
        output_tps: OutputTps, unit: Count, summary: NonZero, lazy;
    }
}

impl Stats {
    /// Requests that got a response and no failure.
    pub fn succeeded(&self) -> u64 {
        let with_response: u64 =
            FailureKind::ALL.into_iter().filter(|k| k.has_response()).map(|k| self.failures[k]).sum();
        self.completed.saturating_sub(with_response)
    }

    /// Failures as a share of finished requests (succeeded + failed), 0..=1.
    pub fn error_ratio(&self) -> f64 {
        let failed = self.failures.total();
        let finished = self.succeeded() + failed;
        if finished == 0 { 0.0 } else { failed as f64 / finished as f64 }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn stats_from(values: &[(u16, u8)]) -> Stats {
        let mut s = Stats::default();
        for &(us, kind) in values {
            s.sent += 1;
            let kind = FailureKind::ALL[kind as usize % FailureKind::ALL.len()];
            let (latency, service) = (Duration::from_micros(u64::from(us) * 7), Duration::from_micros(u64::from(us)));
            let failed = us % 5 == 0;
            if kind.has_response() || us % 3 == 0 {
                s.completed += 1;
                s.bytes_in += u64::from(us);
            }
            s.latency.record(latency);
            s.service.record(service);
            if failed {
                s.failures.add(kind);
            } else {
                s.latency_ok.record(latency);
                s.service_ok.record(service);
            }
            // Every declared counter, whatever it counts: one added to the
            // table is covered here without a line of its own.
            for (i, &c) in Counter::ALL.iter().enumerate() {
                *s.counter_mut(c) += u64::from(us % (i as u16 + 2));
            }
        }
        s
    }

    fn merged(parts: &[&Stats]) -> Stats {
        let mut out = Stats::default();
        for p in parts {
            out.merge(p);
        }
        out
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_order_free(
            a in prop::collection::vec((1u16..60000, any::<u8>()), 0..40),
            b in prop::collection::vec((1u16..60000, any::<u8>()), 0..40),
            c in prop::collection::vec((1u16..60000, any::<u8>()), 0..40),
        ) {
            let (a, b, c) = (stats_from(&a), stats_from(&b), stats_from(&c));
            let mut ab = a.clone();
            ab.merge(&b);
            let mut bc = b.clone();
            bc.merge(&c);
            let left = merged(&[&ab, &c]);   // (a + b) + c
            let right = merged(&[&a, &bc]);  // a + (b + c)
            prop_assert_eq!(&left, &right);
            prop_assert_eq!(&left, &merged(&[&c, &b, &a]));
            prop_assert_eq!(&left, &merged(&[&b, &a, &c]));
            prop_assert_eq!(left.latency.len(), a.latency.len() + b.latency.len() + c.latency.len());
            prop_assert_eq!(left.latency_ok.len(), a.latency_ok.len() + b.latency_ok.len() + c.latency_ok.len());
            // Every declared counter and kind adds up (equality above holds for sums that are
            // all wrong in the same way; this does not).
            for &k in Counter::ALL {
                prop_assert_eq!(left.counter(k), a.counter(k) + b.counter(k) + c.counter(k), "{}", k.name());
            }
            for k in FailureKind::ALL {
                prop_assert_eq!(left.failures[k], a.failures[k] + b.failures[k] + c.failures[k], "{}", k.name());
            }
        }
    }

    /// A cleared `Stats` is a fresh one, whatever it held.
    #[test]
    fn clear_makes_it_new() {
        let mut s = stats_from(&[(120, 1), (35_000, 4), (7, 9), (65_000, 0)]);
        s.connect.record(Duration::from_micros(80));
        s.tls.record(Duration::from_micros(900));
        s.ttfb.record(Duration::from_micros(300));
        s.bytes_out = 77;
        s.connects = 2;
        s.arrivals_answered = 5;
        s.clear();
        assert_eq!(s, Stats::default());
    }

    /// A `Stats` holds the memory of the histograms every request fills, and of
    /// a stream's or an LLM step's only from their first value: a run that
    /// streams nothing paid ~1.7 MB more per `Stats` for rows it never wrote.
    #[test]
    fn histograms_most_runs_never_fill_cost_nothing_until_filled() {
        let one = Histogram::new().heap_bytes();
        let eager = HistogramKind::ALL.iter().filter(|h| h.in_summary() == Shown::Never).count();
        assert_eq!(eager, 7, "the request's own: latency, service, their ok, connect, tls, ttfb");
        let mut s = Stats::default();
        assert_eq!(s.histogram_bytes(), eager * one, "a fresh Stats");
        // Merging and clearing empty ones allocates nothing.
        s.merge(&Stats::default());
        s.clear();
        assert_eq!(s.histogram_bytes(), eager * one, "merged with an empty one, cleared");
        // A stream's first event: its row alone is allocated, and stays so (a worker reuses it).
        s.first_event.record(Duration::from_millis(3));
        assert_eq!(s.histogram_bytes(), (eager + 1) * one);
        s.clear();
        assert_eq!(s.histogram_bytes(), (eager + 1) * one, "cleared, its memory kept");
        // Merged into a fresh one: the filled row comes along, the empty ones do not.
        let mut t = Stats::default();
        t.ttft.record(Duration::from_millis(40));
        s.merge(&t);
        assert_eq!(s.histogram_bytes(), (eager + 2) * one);
        assert_eq!(s.ttft.len(), 1);
        // An absent row reads as an empty histogram, equal to a cleared one.
        assert!(Stats::default().itl.is_empty() && Stats::default().histogram(HistogramKind::Tpot).is_empty());
        let mut cleared = Stats::default();
        cleared.events.record_count(2);
        cleared.clear();
        assert_eq!(cleared, Stats::default());
    }

    #[test]
    fn succeeded_excludes_error_responses() {
        let mut s = Stats { completed: 10, ..Stats::default() };
        s.failures.add_n(FailureKind::Http5xx, 2); // two of the ten responses were 5xx
        s.failures.add_n(FailureKind::Timeout, 3); // three more never answered
        assert_eq!(s.succeeded(), 8);
        assert!((s.error_ratio() - 5.0 / 13.0).abs() < 1e-12);
    }
}
