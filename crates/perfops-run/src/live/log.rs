//! The live page's event log: every Server-Sent Event of the run, framed
//! once (`id:`, `event:`, `data:`), in order, so that a browser opening late
//! is sent the whole run so far and one that reconnects with
//! `Last-Event-ID` only what it missed, without any per-client copy.
//!
//! Bounded whatever the run's length: past [`MAX_SECONDS`] second events
//! (or [`MAX_BYTES`] in all), every other second of the oldest half is
//! dropped, so old seconds thin out as the report's charts do (an hour at
//! one second a second keeps its last ~40 minutes whole and the rest at 2,
//! 4, 8 s... apart). Other events (verdicts, the end) are always kept.
//! With 5 steps a second event is ~650 bytes (`tests::second_cost`): at
//! most ~3.1 MB a run.
//!
//! This module owns the log and its bound; the server (`super::server`)
//! reads it through a client's cursor (the next id to send).

use std::collections::VecDeque;
use std::sync::Arc;

/// Second events kept before the oldest half is thinned.
pub const MAX_SECONDS: usize = 4800;
/// Bytes of events kept before the oldest half of the seconds is thinned.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;

/// What an event is, as the page listens for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One measured second.
    Second,
    /// The stages' verdicts and SLO lines, once the run concluded.
    Stages,
    /// The run is over: the report's address, or `null` (freeze).
    Final,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Second => "second",
            Kind::Stages => "stages",
            Kind::Final => "final",
        }
    }
}

/// One event, framed as it goes on the wire.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its `id:`, from 1, increasing.
    pub id: u64,
    kind: Kind,
    /// `id: N\nevent: K\ndata: JSON\n\n`.
    pub wire: Arc<[u8]>,
}

/// The run's events so far.
#[derive(Debug, Default)]
pub struct Log {
    events: VecDeque<Event>,
    next: u64,
    bytes: usize,
    seconds: usize,
    /// No more events will come (the `final` event is in).
    pub over: bool,
}

impl Log {
    /// Add an event whose data is `json` (one line: the caller's JSON has
    /// no raw newline); thin the oldest seconds past the bound.
    pub fn push(&mut self, kind: Kind, json: &str) {
        self.next += 1;
        let id = self.next;
        // A newline would end the `data:` field: never from serde_json, but
        // the wire must not depend on it.
        let json = json.replace(['\n', '\r'], " ");
        let wire: Arc<[u8]> = format!("id: {id}\nevent: {}\ndata: {json}\n\n", kind.name()).into_bytes().into();
        self.bytes += wire.len();
        if kind == Kind::Second {
            self.seconds += 1;
        }
        if kind == Kind::Final {
            self.over = true;
        }
        self.events.push_back(Event { id, kind, wire });
        if self.seconds > MAX_SECONDS || self.bytes > MAX_BYTES {
            self.thin();
        }
    }

    /// Drop every other second event of the oldest half of the seconds.
    fn thin(&mut self) {
        let half = self.seconds / 2;
        let (mut seen, mut bytes, mut seconds) = (0, 0, 0);
        self.events.retain(|e| {
            if e.kind != Kind::Second {
                bytes += e.wire.len();
                return true;
            }
            seen += 1;
            // The odd ones: the run's first second is never dropped.
            let keep = seen > half || seen % 2 == 1;
            if keep {
                bytes += e.wire.len();
                seconds += 1;
            }
            keep
        });
        (self.bytes, self.seconds) = (bytes, seconds);
    }

    /// The first event whose id is `from` or more (a client's next).
    pub fn from(&self, from: u64) -> Option<&Event> {
        let i = self.events.partition_point(|e| e.id < from);
        self.events.get(i)
    }

    /// The id the next event will have.
    pub fn next_id(&self) -> u64 {
        self.next + 1
    }

    /// Events kept, bytes they take.
    pub fn size(&self) -> (usize, usize) {
        (self.events.len(), self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client at `from` is sent the events from there on, in order; one
    /// that has them all waits.
    #[test]
    fn a_cursor_reads_from_where_it_was() {
        let mut log = Log::default();
        for t in 0..5 {
            log.push(Kind::Second, &format!("{{\"t\":{t}}}"));
        }
        // A late browser (no Last-Event-ID): from the first.
        assert_eq!(log.from(1).map(|e| e.id), Some(1));
        // A resumed one that saw id 3: from 4.
        let e = log.from(4).expect("an event");
        assert_eq!(std::str::from_utf8(&e.wire).unwrap(), "id: 4\nevent: second\ndata: {\"t\":3}\n\n");
        // Up to date: nothing yet.
        assert!(log.from(6).is_none());
        assert_eq!(log.next_id(), 6);
    }

    /// Whatever the run's length, the log stays under its bound; the
    /// newest seconds stay whole, verdicts and the end are never dropped.
    #[test]
    fn the_log_is_bounded_and_keeps_the_newest_seconds_whole() {
        let mut log = Log::default();
        log.push(Kind::Stages, "{}");
        let hour = 3 * MAX_SECONDS;
        for t in 0..hour {
            log.push(Kind::Second, &format!("{{\"t\":{t}}}"));
        }
        log.push(Kind::Final, "{}");
        let (events, _) = log.size();
        assert!(events <= MAX_SECONDS + 2, "{events} events kept");
        assert_eq!(log.from(1).map(|e| e.kind), Some(Kind::Stages), "a verdict event is never thinned");
        assert!(log.over);
        // The last MAX_SECONDS / 2 seconds are all there, consecutive.
        let ids: Vec<u64> = log.events.iter().filter(|e| e.kind == Kind::Second).map(|e| e.id).collect();
        let tail = &ids[ids.len() - MAX_SECONDS / 2..];
        assert!(tail.windows(2).all(|w| w[1] == w[0] + 1), "the newest seconds are whole");
        // And the run's first second (id 2, after the stages' event) is still there.
        assert_eq!(ids[0], 2, "the oldest second kept");
    }

    /// A byte bound too: big seconds (many steps) thin sooner.
    #[test]
    fn big_seconds_are_bounded_by_bytes() {
        let mut log = Log::default();
        let big = format!("{{\"x\":\"{}\"}}", "a".repeat(16 * 1024));
        for _ in 0..2000 {
            log.push(Kind::Second, &big);
        }
        assert!(log.size().1 <= MAX_BYTES, "{} bytes", log.size().1);
    }

    /// A newline in the data would end the field: it cannot get there.
    #[test]
    fn data_is_one_line() {
        let mut log = Log::default();
        log.push(Kind::Final, "{\"a\":\n1}");
        assert_eq!(&*log.from(1).unwrap().wire, b"id: 1\nevent: final\ndata: {\"a\": 1}\n\n");
    }
}
