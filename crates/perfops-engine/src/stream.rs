//! A streamed answer read as its events: the split of a body into events
//! (Server-Sent Events, or lines), the instants they arrived at, and the
//! consumer the readers hand them to. A step opts in (`stream:`); a step
//! that does not never reaches this module.
//!
//! The contract, for whoever consumes a stream (the stream histograms here,
//! an LLM step's tokens):
//!
//! ```text
//!   send        first byte        event 1      event 2 ...   event n     end (last byte)
//!    |--- ttfb ---|                  |            |             |           |
//!  due (intended start) --first_event-->|<- gap ->|<-  gaps   ->|           |
//!                 |<------------------------- stream ---------------------->|
//! ```
//!
//! - The reader (HTTP/1.1: `http1::Conn::exchange` with a consumer) frames
//!   the body as it always does (Content-Length, chunked, until the close),
//!   gives the decoded bytes of each read to a [`Split`], which calls
//!   [`Events::event`] once per complete event, in order, with an [`Event`]
//!   whose `at` is the receive instant of the read that completed it: the
//!   kernel's (`SO_TIMESTAMPNS`) on an open-model worker's plain-TCP
//!   connection, as every answer there is dated, else when the read
//!   returned. Events that arrive in one read share its instant: a server
//!   that writes two events back to back, or a worker late to read, gives
//!   a gap of 0 between them, as a capture of the wire would if the two
//!   came in one segment.
//! - HTTP/2 (`http2::exchange` with a consumer): the connection task keeps a
//!   streamed stream's DATA bytes as its reads bring them, each run dated
//!   as every HTTP/2 answer is (the kernel's date of the read on an
//!   open-model worker's plain TCP, else the connection task's turn; never
//!   before the request was handed over): `h2/conn.rs`'s `Conn::flow` and
//!   `Conn::poll_streamed`. The request splits them here as HTTP/1.1's
//!   reader does, with the same consumer and stall limit; the mode comes
//!   from the answer's `content-type` field. What waits for the request is
//!   bounded per connection (`conn.rs`' `PENDING_MAX`): past it the
//!   connection reads no more until the request has taken it.
//! - [`Timeline`] is the default consumer: first and last event instants,
//!   the count, every gap (bounded), what `expect`/`save` read of the events.
//!   Another consumer (an LLM step's) embeds a `Timeline` and forwards to it,
//!   so that the stream histograms mean the same whatever reads them.
//! - The worker records a stream once it has ended, good or failed
//!   ([`crate::record::Recorder::streamed`]): the histograms of `Stats` are
//!   declared in `perfops_core::measure::stats`' table, one row each
//!   (`first_event`, `event_gap`, `events`, `stream`); a consumer that
//!   measures more (time to first token, inter-token latency) adds rows
//!   there and records them in the same place.
//!
//! What an event is:
//! - `text/event-stream` (WHATWG HTML, "Server-sent events", 9.2.6): a
//!   block of lines ended by a blank line, whose `data:` lines are joined
//!   with LF; `event:` names it (else `message`), `id:` sets the last event
//!   id (kept across events), `retry:` and unknown fields are ignored, a
//!   line starting with `:` is a comment, a block without data dispatches
//!   nothing (a keep-alive comment is no event). Lines end with CRLF, LF
//!   or CR; one leading BOM is dropped.
//! - any other body: a line (ended by LF, a CR before it dropped; blank
//!   lines skipped; a last line without LF counts at the end). Not a chunk
//!   of HTTP/1.1's chunked encoding: HTTP/2 has no chunks, intermediaries
//!   re-chunk, and the streams people send this way (NDJSON, a log tail)
//!   are line-delimited.
//!
//! Nothing that arrives is trusted: a line or an event's data is kept up to
//! [`FIELD_MAX`] bytes (the rest is read and dropped, the event still
//! counted), the gaps in a [`Gaps`] of bounded size whatever their number;
//! the step's timeout bounds an endless stream.

use tokio::time::Instant;

/// The most of a line, and of an event's data, kept: an event is still
/// counted when longer, its data cut.
pub(crate) const FIELD_MAX: usize = 64 * 1024;
/// Gaps kept as they came (4 bytes each) before a [`Gaps`] folds them.
const GAPS_RAW: usize = 1024;

/// The gaps between a streamed answer's events (or tokens), µs, as the
/// histograms they go to will hold them, in bounded memory.
///
/// The first [`GAPS_RAW`] are kept as they came; then they are folded into
/// counts by the histogram bucket each falls in (its lowest equivalent
/// value, 3 significant digits: `perfops_core::measure::Histogram`'s), which
/// records them exactly as the raw values would be. Before, every gap was
/// kept, up to a million an answer: a server sending `a\n` lines held
/// 4 MiB per open stream (100 streams, 416 MB; attacker review). Now a
/// regular stream's gaps take a few buckets, and the most a stream can
/// take is one count per bucket of the values a timeout allows.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    raw: Vec<u32>,
    /// (a bucket's lowest value, its count), sorted by value.
    folded: Vec<(u32, u32)>,
}

impl Gaps {
    /// One more gap.
    #[inline]
    pub(crate) fn push(&mut self, gap: std::time::Duration) {
        if self.raw.len() == GAPS_RAW {
            self.fold();
        }
        self.raw.push(u32::try_from(gap.as_micros()).unwrap_or(u32::MAX));
    }

    /// Every gap so far, as (µs, how many).
    pub(crate) fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let raw = self.raw.iter().map(|&g| (u64::from(g), 1));
        raw.chain(self.folded.iter().map(|&(g, n)| (u64::from(g), u64::from(n))))
    }

    /// How many gaps.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.counts().map(|(_, n)| n).sum()
    }

    /// Fold the raw gaps into the bucket counts.
    #[cold]
    fn fold(&mut self) {
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.folded.len() + self.raw.len());
        let mut raw: Vec<u32> = self.raw.drain(..).map(bucket).collect();
        raw.sort_unstable();
        let mut folded = std::mem::take(&mut self.folded).into_iter().peekable();
        let mut raw = raw.into_iter().peekable();
        loop {
            let next = match (folded.peek(), raw.peek()) {
                (Some(&(f, _)), Some(&r)) if r < f => raw.next().map(|r| (r, 1)),
                (Some(_), _) => folded.next(),
                (None, Some(_)) => raw.next().map(|r| (r, 1)),
                (None, None) => break,
            };
            let Some((v, n)) = next else { break };
            match merged.last_mut() {
                Some((last, count)) if *last == v => *count = count.saturating_add(n),
                _ => merged.push((v, n)),
            }
        }
        self.folded = merged;
    }
}

/// The lowest value of the bucket `us` falls in, in a histogram of 3
/// significant digits from 1 µs (HdrHistogram's layout: 2,048 sub-buckets,
/// the bucket's width a power of two above them).
fn bucket(us: u32) -> u32 {
    let shift = 21u32.saturating_sub((us | 2047).leading_zeros());
    (us >> shift) << shift
}

/// One event of a streamed answer, as a consumer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event<'a> {
    /// The SSE event type (`event:`), `message` if none; a line's: empty.
    pub(crate) name: &'a [u8],
    /// The SSE `data:` lines joined with LF; a line's: the line.
    pub(crate) data: &'a [u8],
    /// The last event id (`id:`), empty if none was set.
    pub(crate) id: &'a [u8],
    /// When the bytes that completed it were received.
    pub(crate) at: Instant,
}

/// What a stream reader hands its events to.
pub(crate) trait Events {
    /// One complete event, in order.
    fn event(&mut self, event: &Event<'_>);
}

/// A consumer, and the latest event handed to it: what a stall limit
/// counts from (both readers' `stream: { stall }`).
pub(crate) struct Latest<'a> {
    pub(crate) to: &'a mut dyn Events,
    pub(crate) at: Option<Instant>,
}

impl Events for Latest<'_> {
    fn event(&mut self, e: &Event<'_>) {
        self.at = Some(e.at);
        self.to.event(e);
    }
}

/// How a body is split into events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `text/event-stream`.
    Sse,
    /// Anything else: one event per line.
    Lines,
}

impl Mode {
    /// The mode of an answer whose `Content-Type` is `content_type` (none: lines).
    pub(crate) fn of(content_type: Option<&[u8]>) -> Mode {
        let essence = content_type.map(|v| v.split(|&b| b == b';').next().unwrap_or(v).trim_ascii());
        match essence {
            Some(e) if e.eq_ignore_ascii_case(b"text/event-stream") => Mode::Sse,
            _ => Mode::Lines,
        }
    }
}

/// A body's bytes, in any split, into events.
#[derive(Debug)]
pub(crate) struct Split {
    mode: Mode,
    /// The line being read (up to [`FIELD_MAX`]).
    line: Vec<u8>,
    /// The current line is longer than what `line` kept.
    line_cut: bool,
    /// The last byte fed was a CR (a LF right after it ends nothing more).
    after_cr: bool,
    /// At the body's very beginning (a BOM may come).
    start: bool,
    /// SSE: the event being built.
    name: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    id: Vec<u8>,
}

impl Split {
    pub(crate) fn new(mode: Mode) -> Split {
        Split {
            mode,
            line: Vec::new(),
            line_cut: false,
            after_cr: false,
            start: true,
            name: Vec::new(),
            data: Vec::new(),
            has_data: false,
            id: Vec::new(),
        }
    }

    /// Feed `bytes`, received at `at`; each event they complete goes to `to`.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], at: Instant, to: &mut dyn Events) {
        if self.start && !bytes.is_empty() {
            // One BOM at the beginning, whole in the first bytes (a server
            // that sends one sends it first, in its first write).
            if let Some(rest) = bytes.strip_prefix("\u{feff}".as_bytes()) {
                bytes = rest;
            }
            self.start = false;
        }
        while !bytes.is_empty() {
            if self.after_cr && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                self.after_cr = false;
                continue;
            }
            self.after_cr = false;
            let end = match self.mode {
                Mode::Sse => bytes.iter().position(|&b| b == b'\n' || b == b'\r'),
                // A lone CR is not a line end in a plain stream.
                Mode::Lines => bytes.iter().position(|&b| b == b'\n'),
            };
            match end {
                None => {
                    self.keep(bytes);
                    return;
                }
                Some(i) => {
                    self.keep(&bytes[..i]);
                    self.after_cr = bytes[i] == b'\r';
                    bytes = &bytes[i + 1..];
                    self.line_end(at, to);
                }
            }
        }
    }

    /// The body ended at `at`: a plain stream's last line without LF is an
    /// event; an SSE block not ended by a blank line is dropped, as a
    /// browser's `EventSource` drops it.
    pub(crate) fn finish(&mut self, at: Instant, to: &mut dyn Events) {
        if self.mode == Mode::Lines && (!self.line.is_empty() || self.line_cut) {
            self.line_end(at, to);
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        let room = FIELD_MAX.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.line_cut |= bytes.len() > room;
    }

    fn line_end(&mut self, at: Instant, to: &mut dyn Events) {
        match self.mode {
            Mode::Lines => {
                let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
                if !line.is_empty() || self.line_cut {
                    to.event(&Event { name: b"", data: line, id: b"", at });
                }
            }
            Mode::Sse => self.sse_line(at, to),
        }
        self.line.clear();
        self.line_cut = false;
    }

    fn sse_line(&mut self, at: Instant, to: &mut dyn Events) {
        let line = &self.line[..];
        if line.is_empty() {
            if self.has_data {
                let name: &[u8] = if self.name.is_empty() { b"message" } else { &self.name };
                to.event(&Event { name, data: &self.data, id: &self.id, at });
            }
            self.name.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return; // a comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => {
                self.name.clear();
                self.name.extend_from_slice(value);
            }
            b"data" => {
                if self.has_data && self.data.len() < FIELD_MAX {
                    self.data.push(b'\n');
                }
                let room = FIELD_MAX.saturating_sub(self.data.len());
                self.data.extend_from_slice(&value[..value.len().min(room)]);
                self.has_data = true;
            }
            b"id" if !value.contains(&0) => {
                self.id.clear();
                self.id.extend_from_slice(value);
            }
            _ => {} // retry, and fields the spec says to ignore
        }
    }
}

/// One event kept whole (bounded by [`FIELD_MAX`] per field) for `expect`
/// and `save`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) name: Vec<u8>,
    pub(crate) data: Vec<u8>,
    pub(crate) id: Vec<u8>,
}

impl Kept {
    fn set(&mut self, e: &Event<'_>) {
        for (into, from) in [(&mut self.name, e.name), (&mut self.data, e.data), (&mut self.id, e.id)] {
            into.clear();
            into.extend_from_slice(from);
        }
    }
}

/// The default consumer: what the stream histograms and the step's checks
/// need of a stream.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// The first event's instant.
    pub(crate) first_event: Option<Instant>,
    /// The latest event's instant.
    pub(crate) last_event: Option<Instant>,
    /// Events so far.
    pub(crate) events: u64,
    /// Each gap between an event and the next.
    pub(crate) gaps: Gaps,
    /// The first and the latest event, when the step's checks read them.
    pub(crate) first: Option<Kept>,
    pub(crate) last: Option<Kept>,
    /// Keep the first and last events (the step has `expect`/`save` on them).
    pub(crate) keep: bool,
    /// `event_contains`: the text some event's data must hold, and whether
    /// one did.
    pub(crate) want: Option<Vec<u8>>,
    pub(crate) matched: bool,
}

impl Timeline {
    /// A timeline that keeps the first and last events when `keep`.
    pub(crate) fn new(keep: bool) -> Timeline {
        Timeline { keep, ..Timeline::default() }
    }
}

impl Events for Timeline {
    fn event(&mut self, e: &Event<'_>) {
        if let Some(last) = self.last_event {
            self.gaps.push(e.at.saturating_duration_since(last));
        }
        self.first_event.get_or_insert(e.at);
        self.last_event = Some(e.at);
        self.events += 1;
        if !self.matched
            && let Some(want) = &self.want
        {
            self.matched = want.is_empty() || e.data.windows(want.len()).any(|w| w == &want[..]);
        }
        if self.keep {
            if self.first.is_none() {
                self.first.get_or_insert_with(Kept::default).set(e);
            }
            self.last.get_or_insert_with(Kept::default).set(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;
    /// Folded, the gaps go into a histogram exactly as the raw values would
    /// (the bucket is the histogram's own), and any number of them takes
    /// memory bounded by their buckets, not their count.
    #[test]
    fn folded_gaps_record_as_the_raw_gaps_would() {
        use perfops_core::measure::Histogram;
        let mut rng = fastrand::Rng::with_seed(7);
        // (what the gaps are, how many)
        type Gap = fn(&mut fastrand::Rng) -> u64;
        let cases: [(&str, Gap, usize); 4] = [
            ("a regular stream", |r| 20_000 + r.u64(0..50), 10_000),
            ("every scale", |r| 1 << r.u32(0..32), 5_000),
            ("anything", |r| r.u64(0..u64::from(u32::MAX) + 100), 20_000),
            ("a flood of nothing", |_| 0, 100_000),
        ];
        for (name, gap, n) in cases {
            let (mut gaps, mut want) = (Gaps::default(), Histogram::new());
            for _ in 0..n {
                let us = gap(&mut rng);
                gaps.push(std::time::Duration::from_micros(us));
                want.record_us(us.min(u64::from(u32::MAX)), 1);
            }
            let mut got = Histogram::new();
            for (us, count) in gaps.counts() {
                got.record_us(us, count);
            }
            assert_eq!(gaps.len(), n as u64, "{name}");
            assert_eq!(got, want, "{name}");
            // Bounded: the raw ones and at most one count per bucket met.
            assert!(gaps.raw.len() <= GAPS_RAW && gaps.folded.len() <= 24 * 2048, "{name}");
        }
        // A regular stream's million gaps: a few buckets.
        let mut gaps = Gaps::default();
        for i in 0..1_000_000u64 {
            gaps.push(std::time::Duration::from_micros(20_000 + i % 40));
        }
        assert!(gaps.folded.len() <= 40, "{} buckets", gaps.folded.len());
    }

    use super::*;

    /// Every event as (name, data, id, ms after t0).
    #[derive(Default)]
    struct All(Vec<(String, String, String, u64)>, Option<Instant>);

    impl Events for All {
        fn event(&mut self, e: &Event<'_>) {
            let t0 = *self.1.get_or_insert(e.at);
            let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            self.0.push((s(e.name), s(e.data), s(e.id), (e.at - t0).as_millis() as u64));
        }
    }

    /// An event as (name, data, id).
    type Ev = (String, String, String);

    fn events(mode: Mode, reads: &[&[u8]]) -> Vec<Ev> {
        let t0 = Instant::now();
        let mut split = Split::new(mode);
        let mut all = All::default();
        for (i, r) in reads.iter().enumerate() {
            split.feed(r, t0 + Duration::from_millis(i as u64), &mut all);
        }
        split.finish(t0 + Duration::from_millis(reads.len() as u64), &mut all);
        all.0.into_iter().map(|(n, d, i, _)| (n, d, i)).collect()
    }

    fn ev(name: &str, data: &str, id: &str) -> Ev {
        (name.into(), data.into(), id.into())
    }

    #[test]
    fn server_sent_events_as_the_spec_reads_them() {
        // (reads, events)
        let cases: Vec<(Vec<&[u8]>, Vec<Ev>)> = vec![
            // The usual event.
            (vec![b"data: hello\n\n"], vec![ev("message", "hello", "")]),
            // data: lines joined with LF, one leading space dropped, not two.
            (vec![b"data: a\ndata:  b\n\n"], vec![ev("message", "a\n b", "")]),
            // event: names it, id: is kept for the events after it.
            (vec![b"event: tick\nid: 7\ndata: 1\n\ndata: 2\n\n"], vec![ev("tick", "1", "7"), ev("message", "2", "7")]),
            // A comment, retry: and an unknown field are no event; a block of
            // them alone dispatches nothing (a keep-alive).
            (vec![b": ping\nretry: 10\nfoo: bar\n\ndata: x\n\n"], vec![ev("message", "x", "")]),
            // CRLF and lone CR end lines too; a CRLF split over two reads.
            (vec![b"data: a\r", b"\n\r\ndata: b\r\r"], vec![ev("message", "a", ""), ev("message", "b", "")]),
            // A field without a colon: its value is empty (data: an empty line).
            (vec![b"data\n\n"], vec![ev("message", "", "")]),
            // Split in the middle of a field name, and a BOM first.
            (vec!["\u{feff}da".as_bytes(), b"ta: z\n", b"\n"], vec![ev("message", "z", "")]),
            // An id with NUL is ignored.
            (vec![b"id: a\0b\ndata: q\n\n"], vec![ev("message", "q", "")]),
            // A last block without its blank line is dropped at the end.
            (vec![b"data: whole\n\ndata: half\n"], vec![ev("message", "whole", "")]),
        ];
        for (i, (reads, want)) in cases.into_iter().enumerate() {
            assert_eq!(events(Mode::Sse, &reads), want, "case {i}");
        }
    }

    #[test]
    fn plain_streams_are_lines() {
        // (reads, events' data)
        let cases: [(&[&[u8]], &[&str]); 4] = [
            // NDJSON, split mid-line; CRLF's CR dropped.
            (&[b"{\"a\":1}\r\n{\"b\"", b":2}\n"], &["{\"a\":1}", "{\"b\":2}"]),
            // Blank lines are no event; a lone CR is part of a line.
            (&[b"x\n\n\ny\rz\n"], &["x", "y\rz"]),
            // The last line without LF counts at the end.
            (&[b"one\ntwo"], &["one", "two"]),
            // Nothing: no event.
            (&[b""], &[]),
        ];
        for (i, (reads, want)) in cases.into_iter().enumerate() {
            let got: Vec<String> = events(Mode::Lines, reads).into_iter().map(|(_, d, _)| d).collect();
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn mode_from_content_type() {
        // (Content-Type, mode)
        let cases: [(Option<&[u8]>, Mode); 4] = [
            (Some(b"text/event-stream"), Mode::Sse),
            (Some(b"Text/Event-Stream; charset=utf-8"), Mode::Sse), // any case, parameters
            (Some(b"application/x-ndjson"), Mode::Lines),
            (None, Mode::Lines),
        ];
        for (ct, want) in cases {
            assert_eq!(Mode::of(ct), want, "{ct:?}");
        }
    }

    /// A hostile server's endless line or event costs at most FIELD_MAX,
    /// and the event is still counted.
    #[test]
    fn long_fields_are_cut_not_kept() {
        let t = Instant::now();
        let mut split = Split::new(Mode::Sse);
        let mut tl = Timeline::new(true);
        split.feed(b"data: ", t, &mut tl);
        let chunk = vec![b'x'; 10_000];
        for _ in 0..100 {
            split.feed(&chunk, t, &mut tl);
        }
        assert!(split.line.len() <= FIELD_MAX);
        split.feed(b"\n\n", t, &mut tl);
        assert_eq!(tl.events, 1);
        assert!(tl.last.as_ref().is_some_and(|k| k.data.len() <= FIELD_MAX));
    }

    /// Gaps are between consecutive events' receive instants; events of one
    /// read share it (a gap of 0).
    #[test]
    fn the_timeline_dates_events_by_their_read() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut split = Split::new(Mode::Sse);
        let mut tl = Timeline::new(true);
        // (bytes, read at ms)
        let reads: [(&[u8], u64); 4] = [
            (b"data: 1\n\ndata: 2\n\n", 5), // two events in one read
            (b"data: 3\n", 25),             // 3 not complete yet
            (b"\n", 27),                    // completes 3: dated 27
            (b": keep-alive\n\ndata: 4\n\n", 47),
        ];
        for (bytes, at) in reads {
            split.feed(bytes, ms(at), &mut tl);
        }
        assert_eq!(tl.events, 4);
        assert_eq!(tl.gaps.counts().collect::<Vec<_>>(), [(0, 1), (22_000, 1), (20_000, 1)]);
        assert_eq!((tl.first_event, tl.last_event), (Some(ms(5)), Some(ms(47))));
        assert_eq!(tl.first.as_ref().map(|k| &k.data[..]), Some(&b"1"[..]));
        assert_eq!(tl.last.as_ref().map(|k| &k.data[..]), Some(&b"4"[..]));
    }
}
