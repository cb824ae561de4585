//! Issue #31, point 8: the fleet wire's seconds fuzzed the way the HTTP
//! parsers are (`perfops-engine`'s `http1/props.rs`): property tests from
//! arbitrary bytes, in CI as ordinary tests.
//!
//! What must hold, whatever an agent (or anyone who reaches the port) sends:
//! - [`take_frames`] and [`decode`] never panic, and never allocate more than
//!   the bytes they were given allow (a length prefix claiming 16 MiB over a
//!   few bytes costs nothing): measured by a counting allocator, per thread;
//! - a second from arbitrary bytes parses or errs, and so does each of its
//!   parts, read to its end;
//! - a valid second (counted as an engine counts: the rules of
//!   `perfops-engine`'s `record.rs`, replayed here) round-trips exactly;
//! - a [`Join`] fed any sequence of agents' seconds, valid, hostile or from
//!   raw bytes, never panics, never holds more than its limits allow, and
//!   every second it emits is exactly the merge of the seconds it accepted.
//!
//! Case counts are set so that the whole file runs in a few seconds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use perfops_core::fleet::join::{Join, Limits, Taken};
use perfops_core::fleet::wire::{
    Layout as WireLayout, MAX_FRAME, Message, Names, decode, encode, encode_second_as, take_frames,
};
use perfops_core::measure::{Counter, FailureKind, Interval, Key, Stats};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// A counting allocator: how much a call had allocated at once, on its own thread.
// ---------------------------------------------------------------------------------------------

struct Counting;

thread_local! {
    // Const initialisers and no destructor: reading them never allocates, so
    // the allocator may use them.
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn note(delta: i64) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// wrapper only adds the sizes up in thread-locals that never allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as i64));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as i64 - layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `f` returned, and the most it had allocated at once beyond what was
/// live when it began (what it returns included).
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, usize::try_from(peak).unwrap_or(0))
}

// ---------------------------------------------------------------------------------------------
// Seconds as an engine counts them
// ---------------------------------------------------------------------------------------------

/// One thing a worker's recorder counts (`record.rs`'s methods).
#[derive(Debug, Clone)]
enum Event {
    /// `answered`: a response, a failure kind if it failed, the flow ended or not.
    Answered {
        latency_us: u64,
        service_us: u64,
        ttfb_us: u64,
        failure: Option<usize>,
        ends: bool,
        bytes: u64,
    },
    /// `failed`: no answer; sent (a service time) or not.
    Failed {
        latency_us: u64,
        sent: Option<u64>,
        kind: usize,
        bytes: u64,
    },
    /// `cut` at the end of the run.
    Cut {
        waited_us: u64,
    },
    /// `closed`: a WebSocket held open ended badly.
    Closed {
        kind: usize,
    },
    /// `connected`, with a TLS `handshake` or not.
    Connected {
        us: u64,
        tls: Option<u64>,
    },
    /// `sent`, `dropped`, `goaways`, `stream_wait`.
    Sent,
    Dropped,
    GoAways(u64),
    StreamWait,
}

fn event() -> impl Strategy<Value = Event> {
    let us = 1u64..5_000_000_000;
    let kind = 0usize..FailureKind::ALL.len();
    prop_oneof![
        (us.clone(), us.clone(), us.clone(), prop::option::of(kind.clone()), any::<bool>(), 0u64..1 << 20).prop_map(
            |(latency_us, service_us, ttfb_us, failure, ends, bytes)| Event::Answered {
                latency_us,
                service_us,
                ttfb_us,
                failure,
                ends,
                bytes
            }
        ),
        (us.clone(), prop::option::of(us.clone()), kind.clone(), 0u64..1 << 16)
            .prop_map(|(latency_us, sent, kind, bytes)| Event::Failed { latency_us, sent, kind, bytes }),
        us.clone().prop_map(|waited_us| Event::Cut { waited_us }),
        kind.prop_map(|kind| Event::Closed { kind }),
        (us.clone(), prop::option::of(us)).prop_map(|(us, tls)| Event::Connected { us, tls }),
        Just(Event::Sent),
        Just(Event::Dropped),
        (1u64..4).prop_map(Event::GoAways),
        Just(Event::StreamWait),
    ]
}

/// Count `e` into `st` as `record.rs` does.
fn count(st: &mut Stats, e: &Event) {
    let d = Duration::from_micros;
    match *e {
        Event::Answered { latency_us, service_us, ttfb_us, failure, ends, bytes } => {
            st.completed += 1;
            st.bytes_in += bytes;
            st.bytes_out += bytes / 3;
            st.latency.record(d(latency_us));
            st.service.record(d(service_us));
            st.ttfb.record(d(ttfb_us));
            match failure {
                Some(k) => st.failures.add(FailureKind::ALL[k]),
                None => {
                    st.latency_ok.record(d(latency_us));
                    st.service_ok.record(d(service_us));
                }
            }
            st.iterations += u64::from(ends);
        }
        Event::Failed { latency_us, sent, kind, bytes } => {
            st.bytes_out += bytes;
            st.failures.add(FailureKind::ALL[kind]);
            st.latency.record(d(latency_us));
            if let Some(s) = sent {
                st.service.record(d(s));
            }
        }
        Event::Cut { waited_us } => {
            st.failures.add(FailureKind::Cut);
            st.latency.record(d(waited_us));
        }
        Event::Closed { kind } => st.failures.add(FailureKind::ALL[kind]),
        Event::Connected { us, tls } => {
            st.connects += 1;
            st.connect.record(d(us));
            if let Some(t) = tls {
                st.tls.record(d(t));
            }
        }
        Event::Sent => st.sent += 1,
        Event::Dropped => st.dropped += 1,
        Event::GoAways(n) => st.goaways += n,
        Event::StreamWait => st.stream_waits += 1,
    }
}

/// A second of one agent: `events` counted under their keys, as its engine would send it.
fn second(index: u32, length_ms: u64, in_flight: u64, target: Option<f64>, events: &[(Key, Event)]) -> Interval {
    let mut parts: BTreeMap<Key, Stats> = BTreeMap::new();
    for (key, e) in events {
        count(parts.entry(*key).or_default(), e);
    }
    let mut stats = Stats::default();
    for s in parts.values() {
        stats.merge(s);
    }
    Interval {
        index,
        length: Duration::from_millis(length_ms),
        in_flight,
        target,
        stats,
        parts: parts.into_iter().collect(),
        samples: Default::default(),
    }
}

fn valid_second() -> impl Strategy<Value = Interval> {
    (
        0u32..50,
        0u64..=1000,
        0u64..10_000,
        prop::option::of(0.0f64..1e6),
        prop::collection::vec(((0u16..2, 0u16..3).prop_map(|(stage, step)| Key { stage, step }), event()), 0..40),
    )
        .prop_map(|(index, length_ms, in_flight, target, events)| second(index, length_ms, in_flight, target, &events))
}

/// The body of a second frame (kind byte first), from `interval`.
fn body_of(iv: &Interval) -> Vec<u8> {
    encode(&Message::Second(Box::new(iv.clone())))[4..].to_vec()
}

// ---------------------------------------------------------------------------------------------
// Frames and seconds from arbitrary bytes
// ---------------------------------------------------------------------------------------------

/// Bytes that look like a stream of frames often enough to reach past the
/// length check: pieces of valid frames, length prefixes claiming anything
/// up to past [`MAX_FRAME`], and noise, spliced.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (any::<u32>(), 0u8..4, prop::collection::vec(any::<u8>(), 0..256)).prop_map(|(len, kind, body)| {
            // A length prefix that claims anything, a kind, a body of whatever length.
            let mut f = (len % (MAX_FRAME as u32 + 1024)).to_be_bytes().to_vec();
            f.push(kind);
            f.extend(body);
            f
        }),
        prop::collection::vec(any::<u8>(), 0..256).prop_map(|body| {
            // An honest length over a second's kind and noise.
            let mut f = ((body.len() + 1) as u32).to_be_bytes().to_vec();
            f.push(2);
            f.extend(body);
            f
        }),
        (valid_second(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(iv, at, x)| {
            // A valid second with one byte changed.
            let mut f = encode(&Message::Second(Box::new(iv)));
            let i = at.index(f.len());
            f[i] ^= x;
            f
        }),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|ps| ps.concat())
}

/// A counter: small, near a power of two, or anywhere in a u64.
fn counter() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..16, (0u32..64).prop_map(|b| 1u64 << b), any::<u64>(), (u64::MAX - 16)..=u64::MAX]
}

/// A histogram as a part carries it: absent, HdrHistogram's own V2 deflate
/// encoding of some values (possibly with one byte changed), or noise.
fn histogram_bytes() -> impl Strategy<Value = Vec<u8>> {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let encoded =
        (prop::collection::vec((1u64..4_000_000_000, 1u64..1000), 0..20), any::<prop::sample::Index>(), any::<u8>())
            .prop_map(|(values, at, x)| {
                let mut h = perfops_core::measure::Histogram::new();
                for (us, n) in values {
                    h.record_us(us, n);
                }
                let mut b = Vec::new();
                V2DeflateSerializer::new().serialize(h.inner(), &mut b).unwrap();
                // One in eight damaged.
                if x < 32 {
                    let i = at.index(b.len());
                    b[i] ^= x | 1;
                }
                b
            });
    prop_oneof![Just(Vec::new()), encoded, prop::collection::vec(any::<u8>(), 0..48)]
}

/// The body of a second frame as an agent lays it out, its fields anything.
fn second_bytes() -> impl Strategy<Value = Vec<u8>> {
    let part = (
        any::<u16>(),
        any::<u16>(),
        prop::collection::vec(counter(), Counter::COUNT + FailureKind::COUNT),
        prop::collection::vec(histogram_bytes(), 7),
    );
    (any::<u32>(), counter(), counter(), prop::option::of(any::<f64>()), prop::collection::vec(part, 0..4), any::<u8>())
        .prop_map(|(index, length_ns, in_flight, target, parts, lie)| {
            let mut b = vec![2u8];
            b.extend(index.to_le_bytes());
            b.extend(length_ns.to_le_bytes());
            b.extend(in_flight.to_le_bytes());
            match target {
                Some(t) => {
                    b.push(1);
                    b.extend(t.to_le_bytes());
                }
                None => b.push(0),
            }
            // Counters and failure kinds per part, as this build names them.
            b.push(Counter::COUNT as u8);
            b.push(FailureKind::COUNT as u8);
            // Now and then, a part count that is not the parts' number.
            let count = if lie < 16 { parts.len() as u16 + u16::from(lie) } else { parts.len() as u16 };
            b.extend(count.to_le_bytes());
            for (stage, step, counters, histograms) in parts {
                b.extend(stage.to_le_bytes());
                b.extend(step.to_le_bytes());
                for c in counters {
                    b.extend(c.to_le_bytes());
                }
                for h in histograms {
                    b.extend((h.len() as u32).to_le_bytes());
                    b.extend(h);
                }
            }
            b
        })
}

proptest! {
    // A case costs a few ms (each key's seconds holds 7 HDR histograms of 188 KiB, made,
    // encoded and read in a debug build): these counts keep the file near 10 s.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any bytes: frames come out or an error does, never a panic, and what
    /// it allocated is bounded by what it was given, not by what a length
    /// prefix claims. Each second's parts read to their end (histograms
    /// inflated) cost at most the inflate bound.
    #[test]
    fn frames_from_any_bytes_never_panic_nor_allocate_past_their_input(bytes in stream()) {
        let given = bytes.len();
        let mut buf = bytes;
        let (got, peak) = peak_of(|| take_frames(&mut buf));
        prop_assert!(peak <= 16 * given + (64 << 10), "{peak} bytes for {given} given");
        prop_assert!(buf.len() <= given);
        let mut scratch = Vec::new();
        for m in got.unwrap_or_default() {
            let Message::Received(raw) = m else { continue };
            for part in raw.parts(&WireLayout::local()) {
                let Ok(part) = part else { break };
                // The inflate bound (1 MiB) and zlib's state.
                let (_, peak) = peak_of(|| part.check(&mut scratch));
                prop_assert!(peak <= (1 << 20) + (256 << 10), "{peak} bytes to check a part");
            }
        }
    }

    /// A second's body from any bytes parses or errs; parsed, its parts and
    /// the whole second decode or err, never panic. The bytes are built as a
    /// second is (so that most parse and reach the parts' checks), from
    /// counters anywhere in a u64 and histograms valid, damaged or noise.
    #[test]
    fn a_second_from_any_bytes_parses_or_errs(bytes in second_bytes(), cut in any::<prop::sample::Index>(), whole in any::<bool>()) {
        let bytes = if whole { bytes } else { bytes[..cut.index(bytes.len() + 1)].to_vec() };
        if let Ok(Message::Received(raw)) = decode(&bytes) {
            let mut scratch = Vec::new();
            // Parts read until one does not (a part count that lies), each checked.
            for p in raw.parts(&WireLayout::local()).map_while(Result::ok) {
                let _ = p.check(&mut scratch);
            }
            let _ = raw.decode();
        }
    }

    /// A second as an engine counts it comes back exactly: every counter,
    /// every histogram bucket, the head.
    #[test]
    fn a_valid_second_round_trips_exactly(iv in valid_second()) {
        let mut buf = encode(&Message::Second(Box::new(iv.clone())));
        let got = take_frames(&mut buf).unwrap();
        prop_assert!(buf.is_empty());
        let [Message::Received(raw)] = &got[..] else { panic!("one second") };
        let back = raw.decode().unwrap();
        prop_assert_eq!((back.index, back.length, back.in_flight), (iv.index, iv.length, iv.in_flight));
        prop_assert_eq!(back.target.map(f64::to_bits), iv.target.map(f64::to_bits));
        prop_assert_eq!(&back.parts, &iv.parts);
        prop_assert_eq!(&back.stats, &iv.stats);
    }
}

// ---------------------------------------------------------------------------------------------
// The join, fed anything
// ---------------------------------------------------------------------------------------------

/// What happens next in a run, to one of 3 agents.
#[derive(Debug, Clone)]
enum Step {
    /// A valid second, its index the agent's next (mostly), a little past it, or one it sent.
    Valid(usize, Interval, u8),
    /// A valid second with a hostile change: a far index, a key outside the
    /// plan, counters near u64::MAX, counts no engine makes.
    Hostile(usize, Interval, u8, u64),
    /// A second's body from raw bytes, if they parse.
    Raw(usize, Vec<u8>),
    /// The agent said it is done.
    Done(usize),
    /// Its connection closed.
    Lost(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let agent = 0usize..3;
    prop_oneof![
        24 => (agent.clone(), valid_second(), any::<u8>()).prop_map(|(a, iv, jump)| Step::Valid(a, iv, jump)),
        3 => (agent.clone(), valid_second(), any::<u8>(), any::<u64>()).prop_map(|(a, iv, how, n)| Step::Hostile(a, iv, how, n)),
        2 => (agent.clone(), second_bytes()).prop_map(|(a, b)| Step::Raw(a, b)),
        1 => agent.clone().prop_map(Step::Done),
        1 => agent.prop_map(Step::Lost),
    ]
}

/// `iv` made hostile in one of a few ways (`how`), with `n` as its value.
fn hostile(mut iv: Interval, how: u8, n: u64) -> Interval {
    match how % 7 {
        0 => iv.index = n as u32,
        1 => iv.parts.push((Key { stage: (n % 9) as u16, step: (n >> 8) as u16 % 9 }, Stats::default())),
        2 => {
            if let Some((_, s)) = iv.parts.first_mut() {
                s.bytes_in = u64::MAX - n % 1000;
            }
        }
        3 => {
            if let Some((_, s)) = iv.parts.first_mut() {
                s.sent = n;
            }
        }
        4 => iv.in_flight = n,
        5 => {
            // Counts no engine makes: more iterations than responses.
            if let Some((_, s)) = iv.parts.first_mut() {
                s.iterations = s.completed + 1 + n % 3;
            }
        }
        _ => {
            if let Some((_, s)) = iv.parts.first_mut() {
                s.failures.add_n(FailureKind::Cut, n);
            }
        }
    }
    iv
}

fn same_merge(got: &Interval, want: &Interval) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.index, want.index);
    prop_assert_eq!(got.length, want.length);
    prop_assert_eq!(got.in_flight, want.in_flight);
    prop_assert_eq!(&got.parts, &want.parts, "second {}", got.index);
    prop_assert_eq!(&got.stats, &want.stats);
    match (got.target, want.target) {
        // Sums of floats in another order: equal to their last bits is not promised.
        (Some(a), Some(b)) => prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{a} vs {b}"),
        (a, b) => prop_assert_eq!(a, b),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// #31 points 4 and 8: whatever three agents send, the join never
    /// panics, never holds more than `ahead` seconds of `stages x steps`
    /// parts once it has emitted what is whole, and what it emits is
    /// exactly the merge of what it accepted, second by second.
    #[test]
    fn the_join_fed_anything_emits_exactly_what_it_accepted(steps in prop::collection::vec(step(), 0..48)) {
        let limits = Limits { stages: 2, steps: 3, seconds: 60, ahead: 12 };
        let mut j = Join::new(3, Duration::from_secs(5), Duration::ZERO, limits);
        let mut accepted: BTreeMap<u32, Interval> = BTreeMap::new();
        let mut emitted: Vec<Interval> = Vec::new();
        let mut scratch = Vec::new();
        for step in steps {
            let (agent, body) = match step {
                Step::Valid(a, mut iv, jump) => {
                    let next = j.next_of(a).unwrap_or(0);
                    iv.index = match jump {
                        0..200 => next,
                        200..250 => next + u32::from(jump - 199),
                        _ => next.saturating_sub(1),
                    };
                    (a, body_of(&iv))
                }
                Step::Hostile(a, mut iv, how, n) => {
                    iv.index = j.next_of(a).unwrap_or(0);
                    (a, body_of(&hostile(iv, how, n)))
                }
                Step::Raw(a, b) => (a, b),
                Step::Done(a) => {
                    j.done(a);
                    emitted.extend(j.ready().into_iter().map(|r| r.interval));
                    continue;
                }
                Step::Lost(a) => {
                    j.lost(a);
                    emitted.extend(j.ready().into_iter().map(|r| r.interval));
                    continue;
                }
            };
            let Ok(Message::Received(raw)) = decode(&body) else { continue };
            if let Ok((Taken::Added, _)) = j.received(agent, &raw, Duration::ZERO, &mut scratch) {
                // The model: what was accepted, merged by second (an accepted second decodes).
                let iv = raw.decode().unwrap();
                accepted.entry(iv.index).or_insert_with(|| Interval::empty(iv.index)).merge(&iv);
            }
            emitted.extend(j.ready().into_iter().map(|r| r.interval));
            let (seconds, parts) = j.held();
            prop_assert!(seconds <= limits.ahead as usize, "{seconds} seconds held");
            prop_assert!(parts <= seconds * limits.keys() as usize, "{parts} parts held");
        }
        for a in 0..3 {
            j.done(a);
        }
        emitted.extend(j.ready().into_iter().map(|r| r.interval));
        prop_assert_eq!(j.held(), (0, 0));
        let indices: Vec<u32> = emitted.iter().map(|iv| iv.index).collect();
        prop_assert_eq!(&indices, &accepted.keys().copied().collect::<Vec<_>>(), "each accepted second once, in order");
        for got in &emitted {
            same_merge(got, &accepted[&got.index])?;
        }
    }
}

/// A second of one part whose failures are `kinds`, as an engine counts them
/// (each failure ended, so each has a latency).
fn second_failing(kinds: &[(FailureKind, u64)]) -> Interval {
    let mut s = Stats { sent: 10, completed: 4, ..Stats::default() };
    for &(k, n) in kinds {
        s.failures.add_n(k, n);
    }
    for _ in 0..(4 + kinds.iter().map(|(_, n)| n).sum::<u64>()) {
        s.latency.record(Duration::from_millis(3));
    }
    let key = Key { stage: 0, step: 0 };
    Interval {
        index: 0,
        length: Duration::from_secs(1),
        in_flight: 0,
        target: None,
        stats: s.clone(),
        parts: vec![(key, s)],
        samples: Default::default(),
    }
}

/// Mixed builds in one fleet: an agent whose build declares a failure kind
/// the coordinator's does not (here `bad_value`, as if the coordinator were
/// built before it). It joins (its names pass), and its kind is counted as
/// `other`, said in the layout's note, never left out: the run's failures
/// add up to what the agent counted. Before the handshake named the kinds,
/// the frame was one count longer than the coordinator read, and refused.
#[test]
fn an_agent_with_a_kind_more_joins_and_its_kind_counts_as_other() {
    let older: Vec<FailureKind> = FailureKind::ALL.into_iter().filter(|&k| k != FailureKind::BadValue).collect();
    let layout = WireLayout::of(&Names::local(), &older).unwrap();
    assert_eq!(layout.unknown_kinds, vec!["bad_value".to_string()]);
    assert!(layout.note().unwrap().contains("failure kinds it counts as `other`: bad_value"), "{:?}", layout.note());
    let iv = second_failing(&[(FailureKind::BadValue, 3), (FailureKind::Timeout, 2)]);
    let mut join =
        Join::new(1, Duration::from_secs(5), Duration::ZERO, Limits { stages: 1, steps: 1, seconds: 10, ahead: 5 });
    join.set_layout(0, layout);
    let frame = encode(&Message::Second(Box::new(iv)));
    let Ok(Message::Received(raw)) = decode(&frame[4..]) else { panic!("a second") };
    let (taken, counts) = join.received(0, &raw, Duration::ZERO, &mut Vec::new()).unwrap();
    assert_eq!((taken, counts.failed), (Taken::Added, 5));
    join.done(0);
    let got = join.ready();
    let [joined] = &got[..] else { panic!("{}", got.len()) };
    let f = &joined.interval.stats.failures;
    assert_eq!((f[FailureKind::Other], f[FailureKind::Timeout], f.total()), (3, 2, 5));
}

/// The other way: an agent whose build lacks a kind the coordinator has
/// (it names one kind fewer). Its seconds are one count shorter per part;
/// read by its names, every count lands where it belongs and the kind it
/// lacks is 0.
#[test]
fn an_agent_with_a_kind_less_joins() {
    let mut fewer = Names::local();
    fewer.kinds.retain(|k| k != "bad_value");
    let layout = WireLayout::of(&fewer, &FailureKind::ALL).unwrap();
    assert!(layout.unknown_kinds.is_empty() && layout.note().is_none());
    let iv = second_failing(&[(FailureKind::Timeout, 2), (FailureKind::UnsafeValue, 1)]);
    let frame = encode_second_as(&iv, &fewer);
    assert_eq!(frame.len(), encode(&Message::Second(Box::new(iv.clone()))).len() - 8, "one count fewer");
    let Ok(Message::Received(raw)) = decode(&frame[4..]) else { panic!("a second") };
    let back = raw.decode_with(&layout).unwrap();
    assert_eq!(back.stats, iv.stats, "every count where it belongs");
    // Read as this build's own (the names the agent did not send), the shape is refused, not misread.
    assert!(raw.decode().is_err());
}

/// A counter the coordinator does not know is left out (and named in the
/// note); the counters both know still land by name, whatever the order.
#[test]
fn counters_are_read_by_name_not_by_place() {
    let mut names = Names::local();
    names.counters.reverse();
    names.counters.insert(0, "early_hints".into());
    let layout = WireLayout::of(&names, &FailureKind::ALL).unwrap();
    assert!(layout.note().unwrap().contains("counters it leaves out: early_hints"));
    let iv = second_failing(&[(FailureKind::Http5xx, 1)]);
    let Ok(Message::Received(raw)) = decode(&encode_second_as(&iv, &names)[4..]) else { panic!("a second") };
    let back = raw.decode_with(&layout).unwrap();
    for &c in Counter::ALL {
        assert_eq!(back.stats.counter(c), iv.stats.counter(c), "{}", c.name());
    }
}
