//! What travels between a coordinator and its agents: length-prefixed frames,
//! each either a control message (JSON: small, rare, readable in a capture)
//! or one second of measurements (binary: every second from every agent, so
//! it must be small and cheap to merge).
//!
//! ```text
//!  frame   = len:u32be  kind:u8  body[len-1]
//!  kind 1  = control: JSON of [`Control`]
//!  kind 2  = second:  index:u32 length_ns:u64 in_flight:u64 target:(0 | 1 f64)
//!                     counters:u8 kinds:u8 parts:u16 { stage:u16 step:u16 stats }*
//!                     [ samples_len:u32 JSON of [`WireSample`]s ]   (none: no sample)
//!  stats   = `counters` counts:u64, in the order of the sender's Hello `counters`
//!            `kinds` failure counts:u64, in the order of its Hello `kinds`
//!            7 histograms, each len:u32 then HdrHistogram V2 deflate bytes (len 0: empty)
//! ```
//!
//! The counters and failure kinds are named once, in the agent's `Hello`
//! ([`Names`]: what `Stats` and `FailureKind` declare, in order); the
//! coordinator maps them by name ([`Layout`]), so an agent whose build has a
//! failure kind more or less still joins: a kind the coordinator does not
//! know is counted as `other` (and said once), a kind the agent lacks is
//! 0, a counter it does not know is left out (and said once). The names are
//! checked before use (how many, how long, which characters, none twice),
//! and they arrive within the handshake's frame limit.
//!
//! All integers little-endian but the frame length (network order, as a
//! reader sees it first). The histograms are HdrHistogram's own
//! interchange encoding (the one `latency.hlog` holds), so nothing is
//! rounded on the way: a merged second is exactly the sum of the agents'.
//! A frame larger than [`MAX_FRAME`] is refused before it is read, so a
//! peer cannot make the other side allocate without bound.
//!
//! A second is read in two steps, so that nothing a peer sends is added
//! before all of it was checked (#31): [`RawSecond::parts`] reads each
//! part's counters, [`RawPart::check`] reads its histograms to their end
//! and holds its counts against what an engine can count; only then are
//! they added (the join, `fleet::join`, also holds them to the plan).
//! Property tests from arbitrary bytes: `tests/fleet_wire.rs`.
//!
//! A second's failing exchanges ([`Interval::samples`]) ride after its
//! parts, as JSON: they are rare (the first few of each step and kind over
//! the run), and text anyway. They are held to the bounds of a kept sample
//! on arrival ([`MAX_SAMPLES`], [`MAX_SAMPLE_BYTES`], each re-escaped and
//! cut by [`FailureSample::bounded`], a kind by its name), so that a hostile
//! agent can make the coordinator keep no more than one of its own would.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use super::hdr;
use crate::measure::{
    Counter, FailureKind, FailureSample, FailureSamples, HistogramKind, Interval, Key, MAX_KEYS, PER_KEY, Stats,
};

/// An agent's word on the pacer its open model ran on ([`Control::Done`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacerWord {
    /// `io_uring` or `timerfd` (another name says nothing).
    pub name: String,
    /// Why io_uring was refused, where the open model wanted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Version of this protocol; a coordinator refuses an agent of another.
/// 2 (#14): the HTTP/2, gRPC and WebSocket failure kinds, and HTTP/2's counters
/// (`goaways`, `stream_waits`). 3 (#14): an agent says in `Done` what its
/// steps spoke (`protocols`), and an assignment carries the scenario's
/// `.proto` files (`protos`). 4 (#31): the channel is always TLS and the
/// handshake is bound to the TLS session; the agent proves first and the
/// coordinator answers with its own proof in `Accepted` only then (a
/// `Challenge` carries no proof: a stranger gets nothing to guess the token
/// from offline). A 3 and a 4 cannot understand each other's handshake.
/// 5 (#32): a part's counters end with `arrivals_answered` (arrivals whose
/// first request was answered: the achieved rate), so its seconds are 8
/// bytes longer. 6: `Hello` names the counters and failure kinds the agent
/// sends ([`Names`]) and a second says how many of each its parts hold; the
/// coordinator maps them by name, so a kind added or removed no longer
/// changes the protocol. 7: a second carries its failing exchanges after
/// its parts ([`WireSample`]). 8: `Steer`, an action by hand relayed to
/// every agent with the second of the load it takes effect at. 9: an
/// assignment's `files` are every file the scenario ships (a replay's
/// recording too), by path relative to the scenario's folder; `protos` is gone;
/// and a part's histograms add a stream's four (`first_event`, `event_gap`,
/// `events`, `stream`), read in [`HistogramKind::ALL`]'s order. 10: and an LLM
/// step's five (`ttft`, `ttft_sent`, `itl`, `tpot`, `output_tps`); its counters
/// `tokens_in` and `tokens_out` go by name as any counter.
pub const PROTOCOL: u32 = 10;

/// The most samples one second may carry: as many as a generator keeps.
pub const MAX_SAMPLES: usize = MAX_KEYS * PER_KEY;

/// The most bytes of samples one second may carry (a sample within its
/// bounds is at most ~11 KiB: a KiB of body, 4 KiB of header fields each
/// way, its request line and check).
pub const MAX_SAMPLE_BYTES: usize = 4 << 20;

/// One failing exchange of a second, as it travels: its step (global
/// index), its failure kind by name, and the sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireSample {
    /// The step's global index.
    pub step: u16,
    /// The failure kind's name (`http_4xx`).
    pub kind: String,
    /// The exchange.
    pub sample: FailureSample,
}

/// The largest frame either side accepts once the peer proved the token (a
/// second with many steps and stages stays far below it).
pub const MAX_FRAME: usize = 16 << 20;

/// The largest frame either side accepts before the peer proved the token:
/// the handshake's messages (`Hello`, `Challenge`, `Proof`, `Accepted`, the
/// clock probes, a refusal) are a few hundred bytes, so a stranger can make
/// the other side hold no more than this per connection.
pub const HANDSHAKE_FRAME: usize = 4 << 10;

const KIND_CONTROL: u8 = 1;
const KIND_SECOND: u8 = 2;

/// A frame's body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The frame ended before its fields did.
    #[error("truncated frame")]
    Truncated,
    /// A kind this side does not know.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// A frame longer than [`MAX_FRAME`], or of length 0.
    #[error("frame of {0} bytes refused")]
    Size(usize),
    /// The control message is not what this version sends.
    #[error("bad control message: {0}")]
    Control(String),
    /// A histogram that HdrHistogram cannot read, or out of perfops' range.
    #[error("bad histogram: {0}")]
    Histogram(String),
    /// Counts that no engine can produce, or that add up past a `u64`.
    #[error("impossible counts: {0}")]
    Counts(String),
}

/// What one frame carries.
#[derive(Debug, Clone)]
pub enum Message {
    /// A control message.
    Control(Control),
    /// One second of an agent's load, to send.
    Second(Box<Interval>),
    /// One second of an agent's load, as received (see [`RawSecond`]).
    Received(RawSecond),
}

/// The control messages, in the order a run uses them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Agent -> coordinator, first: who it is, the shard it claims, a fresh nonce (hex).
    Hello {
        /// [`PROTOCOL`] of the agent.
        protocol: u32,
        /// The agent's nonce, hex.
        nonce: String,
        /// The shard index it claims (`--index`, `JOB_COMPLETION_INDEX`), or any free one.
        index: Option<u32>,
        /// A name for logs and results (its host name).
        name: String,
        /// The counters its seconds hold, in order (absent before protocol 6:
        /// such an agent is refused on its protocol).
        #[serde(default)]
        counters: Vec<String>,
        /// The failure kinds its seconds hold, in order (as `counters`).
        #[serde(default)]
        kinds: Vec<String>,
    },
    /// Coordinator -> agent: its nonce, and nothing else: no proof before the agent proved.
    Challenge {
        /// The coordinator's nonce, hex.
        nonce: String,
    },
    /// Agent -> coordinator: the agent's proof that it knows the token.
    Proof {
        /// HMAC proof over the TLS session and both nonces, hex.
        proof: String,
    },
    /// Coordinator -> agent, once the agent's proof held: the coordinator's own proof.
    Accepted {
        /// HMAC proof over the TLS session and both nonces, hex.
        proof: String,
    },
    /// Coordinator -> agent: a clock probe, the coordinator's wall clock at sending (ns since the epoch).
    Ping {
        /// Coordinator's send time.
        t0: i64,
    },
    /// Agent -> coordinator: the probe's answer, with the agent's wall clock at receipt and reply.
    Pong {
        /// The ping's `t0`.
        t0: i64,
        /// Agent's receive time.
        t1: i64,
        /// Agent's reply time.
        t2: i64,
    },
    /// Coordinator -> agent: you are in, with this shard; wait for your assignment.
    Welcome {
        /// The shard index given.
        index: u32,
        /// How many shards.
        count: u32,
        /// The agent's clock minus the coordinator's, as measured (ns).
        offset_ns: i64,
    },
    /// Coordinator -> agent: what to run.
    Assign(Box<Assignment>),
    /// Agent -> coordinator: the plan is built, ready to start.
    Ready,
    /// Coordinator -> agent: start arrival 0 at this instant of the agent's own wall clock (ns since the epoch).
    Start {
        /// The start, on the agent's clock.
        at: i64,
    },
    /// Either way: nothing else to say for a while, but alive.
    Heartbeat,
    /// Coordinator -> agent: an action by hand (`stop`, `hold`, `next`,
    /// `rate N`: `pipeline::control::Action`'s words), to take effect at
    /// second `at_s` of the load (from the start every agent shares: a
    /// whole second, so no clock is converted). The agent checks it: words
    /// it does not know, an instant already past or too far ahead, are
    /// refused and said.
    Steer {
        /// The action's words.
        action: String,
        /// The second of the load it takes effect at.
        at_s: u32,
        /// Who asked (`page`, `ctl`): for the agent's log.
        by: String,
    },
    /// Coordinator -> agent: stop the arrivals now (a rule tripped, Ctrl-C).
    Stop {
        /// Why.
        reason: String,
    },
    /// Agent -> coordinator: the load ended; every second was sent before this.
    Done {
        /// From the start to the last response (ns).
        elapsed_ns: u64,
        /// Worker threads that ran.
        workers: u64,
        /// Closed model's naps to coalesce wake-ups, and the longest (ns).
        naps: u64,
        /// The longest nap (ns).
        longest_nap_ns: u64,
        /// Stopped before its end.
        interrupted: bool,
        /// How late its first arrival could go out after the start (ns; 0: on time).
        #[serde(default)]
        late_ns: u64,
        /// What each step spoke, by step index, as its connections
        /// negotiated it (`h2 (ALPN)`, `grpc over h2c`, ...).
        #[serde(default)]
        protocols: Vec<String>,
        /// The pacer its open model ran on (absent: no open model, or an
        /// agent from before it said so). Optional, so that agents and
        /// coordinators of protocol 10 still understand each other; boxed,
        /// so that a message stays small.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pacer: Option<Box<PacerWord>>,
        /// How long its workers waited, runnable, for a CPU that others
        /// held (ns, summed over them; absent: 0).
        #[serde(default)]
        cpu_wait_ns: u64,
    },
    /// Either way: the peer is refused (wrong token, index taken, clock too far off), and why.
    Refused {
        /// Why, for the log.
        reason: String,
    },
    /// Agent -> coordinator: it cannot run the assignment.
    Failed {
        /// Why.
        reason: String,
    },
    /// Coordinator -> agent: the run is over; leave.
    Bye,
}

impl Control {
    /// The message's name as it travels (`hello`, `proof`, ...): what a log
    /// line says of an unexpected message, without a word of what the peer put in it.
    pub fn kind(&self) -> &'static str {
        match self {
            Control::Hello { .. } => "hello",
            Control::Challenge { .. } => "challenge",
            Control::Proof { .. } => "proof",
            Control::Accepted { .. } => "accepted",
            Control::Ping { .. } => "ping",
            Control::Pong { .. } => "pong",
            Control::Welcome { .. } => "welcome",
            Control::Assign(_) => "assign",
            Control::Ready => "ready",
            Control::Start { .. } => "start",
            Control::Heartbeat => "heartbeat",
            Control::Steer { .. } => "steer",
            Control::Stop { .. } => "stop",
            Control::Done { .. } => "done",
            Control::Refused { .. } => "refused",
            Control::Failed { .. } => "failed",
            Control::Bye => "bye",
        }
    }
}

/// Everything an agent needs to run its shard exactly as the coordinator
/// would have run the whole: the scenario as written, what the coordinator
/// resolved (target URL, `${env.X}` values, CSV files, setup values) and the
/// plan's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The scenario file's name, for error messages.
    pub path: String,
    /// The scenario file's text.
    pub scenario: String,
    /// `--set` overrides, as `path=value`.
    pub overrides: Vec<(String, String)>,
    /// The target's URL (the demo's, when the coordinator started it).
    pub target: String,
    /// `${env.X}` values, as the coordinator read them.
    pub env: BTreeMap<String, String>,
    /// The files the scenario reads beside itself (CSV feeders, `.proto`
    /// files and their imports, a replay's recording), by their path
    /// relative to the scenario's folder: an agent puts them back in a
    /// folder of its own and reads them there as the coordinator did,
    /// whatever its own working directory holds.
    pub files: BTreeMap<String, String>,
    /// What `setup` saved: every agent starts with these.
    pub globals: BTreeMap<String, String>,
    /// End of each stage from the load's start (ns).
    pub stage_ends_ns: Vec<u64>,
    /// Accept any TLS certificate of the target.
    pub insecure: bool,
    /// At the end, wait for requests in flight instead of cutting them.
    pub wait_in_flight: bool,
    /// Worker threads per agent (0: one per core).
    pub workers: u64,
}

/// The body of `msg` as a frame (length prefix included).
pub fn encode(msg: &Message) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    match msg {
        Message::Control(c) => {
            out.push(KIND_CONTROL);
            // A derive of plain data: serialising cannot fail.
            out.extend(serde_json::to_vec(c).unwrap_or_default());
        }
        Message::Second(iv) => {
            out.push(KIND_SECOND);
            encode_interval(iv, None, &mut out);
        }
        Message::Received(raw) => {
            out.push(KIND_SECOND);
            out.extend(raw.index.to_le_bytes());
            out.extend((raw.length.as_nanos() as u64).to_le_bytes());
            out.extend(raw.in_flight.to_le_bytes());
            match raw.target {
                Some(t) => {
                    out.push(1);
                    out.extend(t.to_le_bytes());
                }
                None => out.push(0),
            }
            out.push(raw.counters);
            out.push(raw.kinds);
            out.extend(raw.parts.to_le_bytes());
            out.extend_from_slice(&raw.body);
            encode_samples(&raw.samples, &mut out);
        }
    }
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// The frame of second `iv` as a build that names `names` sends it: the
/// counters and kinds it names, in its order, those this build does not
/// have as 0. What an agent of another build puts on the wire, for the
/// tests of a coordinator that meets one.
pub fn encode_second_as(iv: &Interval, names: &Names) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    out.push(KIND_SECOND);
    encode_interval(iv, Some(names), &mut out);
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// The length of the frame whose 4-byte prefix is `prefix`, if acceptable.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, WireError> {
    frame_len_within(prefix, MAX_FRAME)
}

/// The length of the frame whose 4-byte prefix is `prefix`, if at most `max`.
pub fn frame_len_within(prefix: [u8; 4], max: usize) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len == 0 || len > max {
        return Err(WireError::Size(len));
    }
    Ok(len)
}

/// Split complete frames off the front of `buf`: what they carry, in order.
/// A partial frame stays in `buf` for the next read.
pub fn take_frames(buf: &mut Vec<u8>) -> Result<Vec<Message>, WireError> {
    take_frames_within(buf, MAX_FRAME)
}

/// [`take_frames`] with frames of at most `max` bytes (before
/// authentication: [`HANDSHAKE_FRAME`]). A longer one is refused on its
/// length prefix, before its body is waited for, so `buf` never holds more
/// than `max` and one read.
pub fn take_frames_within(buf: &mut Vec<u8>, max: usize) -> Result<Vec<Message>, WireError> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 4 {
        let len = frame_len_within([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]], max)?;
        if buf.len() - at - 4 < len {
            break;
        }
        out.push(decode(&buf[at + 4..at + 4 + len])?);
        at += 4 + len;
    }
    buf.drain(..at);
    Ok(out)
}

/// Read one frame's body (without its length prefix).
pub fn decode(body: &[u8]) -> Result<Message, WireError> {
    let (&kind, rest) = body.split_first().ok_or(WireError::Truncated)?;
    match kind {
        KIND_CONTROL => {
            serde_json::from_slice(rest).map(Message::Control).map_err(|e| WireError::Control(e.to_string()))
        }
        KIND_SECOND => RawSecond::parse(&mut Reader(rest)).map(Message::Received),
        k => Err(WireError::Kind(k)),
    }
}

fn encode_interval(iv: &Interval, names: Option<&Names>, out: &mut Vec<u8>) {
    out.extend(iv.index.to_le_bytes());
    out.extend((iv.length.as_nanos() as u64).to_le_bytes());
    out.extend(iv.in_flight.to_le_bytes());
    match iv.target {
        Some(t) => {
            out.push(1);
            out.extend(t.to_le_bytes());
        }
        None => out.push(0),
    }
    // What the names count: this build's are within MAX_NAMES (asserted where MAX_NAMES is).
    let (counters, kinds) = names.map_or((Counter::COUNT, FailureKind::COUNT), |n| (n.counters.len(), n.kinds.len()));
    out.push(counters.min(MAX_NAMES) as u8);
    out.push(kinds.min(MAX_NAMES) as u8);
    // More than 65535 (stage, step) keys cannot be: both are u16 and a scenario has few.
    out.extend((iv.parts.len().min(usize::from(u16::MAX)) as u16).to_le_bytes());
    let mut ser = V2DeflateSerializer::new();
    for (key, stats) in iv.parts.iter().take(usize::from(u16::MAX)) {
        out.extend(key.stage.to_le_bytes());
        out.extend(key.step.to_le_bytes());
        match names {
            None => encode_stats(stats, &mut ser, out),
            Some(names) => encode_stats_as(stats, names, &mut ser, out),
        }
    }
    encode_samples(&iv.samples, out);
}

/// A second's samples after its parts; nothing when it has none (most seconds).
fn encode_samples(samples: &FailureSamples, out: &mut Vec<u8>) {
    if samples.is_empty() {
        return;
    }
    let list: Vec<WireSample> = samples
        .iter()
        .flat_map(|((step, kind), v)| {
            v.iter().map(move |s| WireSample { step, kind: kind.name().to_string(), sample: s.clone() })
        })
        .collect();
    // A derive of plain data: serialising cannot fail.
    let json = serde_json::to_vec(&list).unwrap_or_default();
    out.extend((json.len() as u32).to_le_bytes());
    out.extend(json);
}

/// A second's samples as sent, held to the bounds before anything is kept:
/// too many or too many bytes, a kind this build does not know or a sample
/// that is not JSON refuse the second; each sample is cut and re-escaped
/// ([`FailureSample::bounded`]) and kept through [`FailureSamples::add`],
/// which keeps the first few of each key and no more keys than a
/// generator would.
fn parse_samples(r: &mut Reader<'_>) -> Result<FailureSamples, WireError> {
    let mut out = FailureSamples::default();
    if r.0.is_empty() {
        return Ok(out);
    }
    let len = r.u32()? as usize;
    if len > MAX_SAMPLE_BYTES {
        return Err(WireError::Control(format!("{len} bytes of samples (at most {MAX_SAMPLE_BYTES})")));
    }
    let bytes = r.take(len)?;
    let list: Vec<WireSample> =
        serde_json::from_slice(bytes).map_err(|e| WireError::Control(format!("samples: {e}")))?;
    if list.len() > MAX_SAMPLES {
        return Err(WireError::Control(format!("{} samples in a second (at most {MAX_SAMPLES})", list.len())));
    }
    for w in list {
        let Some(kind) = FailureKind::from_name(&w.kind) else {
            return Err(WireError::Control(format!("a sample of an unknown failure kind ({} bytes)", w.kind.len())));
        };
        out.add((w.step, kind), w.sample.bounded());
    }
    Ok(out)
}

fn encode_stats(s: &Stats, ser: &mut V2DeflateSerializer, out: &mut Vec<u8>) {
    for c in s.counters() {
        out.extend(c.to_le_bytes());
    }
    for k in FailureKind::ALL {
        out.extend(s.failures[k].to_le_bytes());
    }
    encode_histograms(s, ser, out);
}

fn encode_stats_as(s: &Stats, names: &Names, ser: &mut V2DeflateSerializer, out: &mut Vec<u8>) {
    for n in names.counters.iter().take(MAX_NAMES) {
        out.extend(Counter::from_name(n).map_or(0, |c| s.counter(c)).to_le_bytes());
    }
    for n in names.kinds.iter().take(MAX_NAMES) {
        out.extend(FailureKind::from_name(n).map_or(0, |k| s.failures[k]).to_le_bytes());
    }
    encode_histograms(s, ser, out);
}

fn encode_histograms(s: &Stats, ser: &mut V2DeflateSerializer, out: &mut Vec<u8>) {
    for &h in HistogramKind::ALL {
        let h = s.histogram(h);
        let at = out.len();
        out.extend(0u32.to_le_bytes());
        if h.is_empty() {
            continue;
        }
        // Into a Vec: cannot fail for lack of room; a histogram perfops made always encodes.
        if let Ok(n) = ser.serialize(h.inner(), out) {
            out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

/// The most names of either list a `Hello` may give (the frame's count of
/// each is a `u8`).
pub const MAX_NAMES: usize = 255;

/// The longest name a `Hello` may give, in bytes.
pub const MAX_NAME_LEN: usize = 64;

// A build that declares more counters or kinds than a frame's `u8` counts does not compile.
const _: () = assert!(Counter::COUNT <= MAX_NAMES && FailureKind::COUNT <= MAX_NAMES);

/// What an agent's seconds hold, by name, in order: its build's
/// [`Counter::ALL`] and [`FailureKind::ALL`]. Sent once, in `Hello`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The counters of each part, in order.
    pub counters: Vec<String>,
    /// The failure kinds of each part, in order.
    pub kinds: Vec<String>,
}

impl Names {
    /// What this build sends.
    pub fn local() -> Names {
        Names {
            counters: Counter::ALL.iter().map(|c| c.name().to_string()).collect(),
            kinds: FailureKind::ALL.iter().map(|k| k.name().to_string()).collect(),
        }
    }
}

/// A `Hello`'s list of names refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamesError {
    /// More names than [`MAX_NAMES`].
    #[error("{count} {what}, more than {MAX_NAMES}")]
    TooMany {
        /// `counters` or `failure kinds`.
        what: &'static str,
        /// How many it gave.
        count: usize,
    },
    /// A name empty, longer than [`MAX_NAME_LEN`] or not snake_case ASCII.
    #[error("a malformed {what} name")]
    Malformed {
        /// `counter` or `failure kind`.
        what: &'static str,
    },
    /// A name twice.
    #[error("the {what} `{name}` twice")]
    Twice {
        /// `counter` or `failure kind`.
        what: &'static str,
        /// The name (checked: short and plain).
        name: String,
    },
}

/// How the receiver reads a sender's parts: for each counter and each kind
/// the sender names, where it goes here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Each sender counter's counter here (`None`: not known, left out).
    counters: Vec<Option<Counter>>,
    /// Each sender kind's kind here ([`FailureKind::Other`] for one not known).
    kinds: Vec<FailureKind>,
    /// The sender's counters not known here.
    pub unknown_counters: Vec<String>,
    /// The sender's failure kinds not known here (counted as `other`).
    pub unknown_kinds: Vec<String>,
}

impl Layout {
    /// A sender of this very build.
    pub fn local() -> Layout {
        Layout::of(&Names::local(), &FailureKind::ALL).unwrap_or_else(|_| unreachable!("the declarations are valid"))
    }

    /// The layout of a sender that names `names`, for a receiver that
    /// knows the kinds `known` (in a coordinator, [`FailureKind::ALL`]; a
    /// test gives fewer, to be a build without one). Each list checked
    /// first: at most [`MAX_NAMES`], each of at most [`MAX_NAME_LEN`]
    /// bytes of `[a-z0-9_]`, none twice.
    pub fn of(names: &Names, known: &[FailureKind]) -> Result<Layout, NamesError> {
        check_names(&names.counters, "counters", "counter")?;
        check_names(&names.kinds, "failure kinds", "failure kind")?;
        let counters: Vec<Option<Counter>> = names.counters.iter().map(|n| Counter::from_name(n)).collect();
        let kinds: Vec<Option<FailureKind>> =
            names.kinds.iter().map(|n| known.iter().copied().find(|k| k.name() == n.as_str())).collect();
        let unknown = |names: &[String], known: Vec<bool>| -> Vec<String> {
            names.iter().zip(known).filter(|(_, k)| !k).map(|(n, _)| n.clone()).collect()
        };
        Ok(Layout {
            unknown_counters: unknown(&names.counters, counters.iter().map(Option::is_some).collect()),
            unknown_kinds: unknown(&names.kinds, kinds.iter().map(Option::is_some).collect()),
            counters,
            kinds: kinds.into_iter().map(|k| k.unwrap_or(FailureKind::Other)).collect(),
        })
    }

    /// What the coordinator says once of an agent of this layout, if
    /// anything: what it counts that this build does not know.
    pub fn note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.unknown_kinds.is_empty() {
            parts.push(format!("failure kinds it counts as `other`: {}", self.unknown_kinds.join(", ")));
        }
        if !self.unknown_counters.is_empty() {
            parts.push(format!("counters it leaves out: {}", self.unknown_counters.join(", ")));
        }
        (!parts.is_empty()).then(|| format!("another perfops build ({})", parts.join("; ")))
    }
}

fn check_names(names: &[String], many: &'static str, one: &'static str) -> Result<(), NamesError> {
    if names.len() > MAX_NAMES {
        return Err(NamesError::TooMany { what: many, count: names.len() });
    }
    let plain = |n: &str| {
        !n.is_empty()
            && n.len() <= MAX_NAME_LEN
            && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    if !names.iter().all(|n| plain(n)) {
        return Err(NamesError::Malformed { what: one });
    }
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(NamesError::Twice { what: one, name: w[0].to_string() });
    }
    Ok(())
}

/// A second as received: its head read, its parts checked for shape and
/// kept encoded until they are merged (see [`RawSecond::parts`]): the
/// coordinator adds each agent's histograms straight into the second it
/// assembles, never building an agent's own copy first.
#[derive(Debug, Clone)]
pub struct RawSecond {
    /// Second number, from 0.
    pub index: u32,
    /// Its length (1 s but the last).
    pub length: Duration,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// This agent's scheduled arrivals in it (open model).
    pub target: Option<f64>,
    /// Counters per part, as the sender's `Hello` named them.
    counters: u8,
    /// Failure kinds per part, as the sender's `Hello` named them.
    kinds: u8,
    parts: u16,
    body: Vec<u8>,
    /// The failing exchanges it carried, checked and bounded.
    pub samples: FailureSamples,
}

/// What one agent's second counted, for `agents.jsonl`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests started.
    pub sent: u64,
    /// Responses received.
    pub completed: u64,
    /// Failures of the target (not `cut`).
    pub failed: u64,
    /// Arrivals dropped at `max_in_flight`.
    pub dropped: u64,
    /// Values in its latency histograms.
    pub latency_count: u64,
}

const HISTOGRAMS: usize = HistogramKind::COUNT;

impl RawSecond {
    fn parse(r: &mut Reader<'_>) -> Result<RawSecond, WireError> {
        let index = r.u32()?;
        let length = Duration::from_nanos(r.u64()?);
        let in_flight = r.u64()?;
        let target = match r.u8()? {
            0 => None,
            _ => Some(f64::from_bits(r.u64()?)),
        };
        let (counters, kinds) = (r.u8()?, r.u8()?);
        let parts = r.u16()?;
        let all = r.0;
        let fixed = 4 + 8 * (usize::from(counters) + usize::from(kinds));
        // Walk the parts once: every length is in bounds.
        for _ in 0..parts {
            r.take(fixed)?;
            for _ in 0..HISTOGRAMS {
                let len = r.u32()? as usize;
                r.take(len)?;
            }
        }
        let body = all[..all.len() - r.0.len()].to_vec();
        let samples = parse_samples(r)?;
        if !r.0.is_empty() {
            return Err(WireError::Control(format!("{} bytes after the second", r.0.len())));
        }
        Ok(RawSecond { index, length, in_flight, target, counters, kinds, parts, body, samples })
    }

    /// How many (stage, step) parts it holds, as its head says.
    pub fn part_count(&self) -> u16 {
        self.parts
    }

    /// Its parts, in the order sent, read by the sender's `layout`:
    /// counters and failure counts mapped to this build's, histograms
    /// still encoded (see [`RawPart::check`] and [`RawPart::add_to`]). A
    /// second whose parts hold more or fewer counts than the layout names
    /// is refused.
    pub fn parts<'a>(&'a self, layout: &'a Layout) -> impl Iterator<Item = Result<RawPart<'a>, WireError>> + 'a {
        let mut r = Reader(&self.body);
        let fits = usize::from(self.counters) == layout.counters.len() && usize::from(self.kinds) == layout.kinds.len();
        (0..self.parts).map(move |_| {
            if !fits {
                return Err(WireError::Counts(format!(
                    "parts of {} counters and {} failure kinds, where the handshake named {} and {}",
                    self.counters,
                    self.kinds,
                    layout.counters.len(),
                    layout.kinds.len()
                )));
            }
            RawPart::read(&mut r, layout)
        })
    }

    /// The whole second, as an agent of this build had it: every part
    /// checked ([`RawPart::check`]), and its counts, added up, within a
    /// `u64`. Each distinct key costs 7 histograms (~1.3 MB), as many as the
    /// second names: for a second of one's own (tests, tools). A
    /// coordinator goes through its join, which holds an agent's keys to the
    /// plan's.
    pub fn decode(&self) -> Result<Interval, WireError> {
        self.decode_with(&Layout::local())
    }

    /// [`RawSecond::decode`], for a sender of `layout`.
    pub fn decode_with(&self, layout: &Layout) -> Result<Interval, WireError> {
        let mut map: BTreeMap<Key, Stats> = BTreeMap::new();
        let (mut scratch, mut sum) = (Vec::new(), 0u128);
        for part in self.parts(layout) {
            let part = part?;
            sum += part.check(&mut scratch)?.sum;
            // Every total below (a key's, the second's) is a part of this sum: none can wrap.
            if sum > u128::from(u64::MAX) {
                return Err(WireError::Counts("its counts add up past u64::MAX".into()));
            }
            part.add_to(map.entry(part.key).or_default(), &mut scratch)?;
        }
        let mut stats = Stats::default();
        for s in map.values() {
            stats.merge(s);
        }
        Ok(Interval {
            index: self.index,
            length: self.length,
            in_flight: self.in_flight,
            target: self.target,
            stats,
            parts: map.into_iter().collect(),
            samples: self.samples.clone(),
        })
    }
}

/// One (stage, step) part of a received second: its counters read into
/// this build's, its histograms still encoded.
#[derive(Debug, Clone)]
pub struct RawPart<'a> {
    /// Where it belongs.
    pub key: Key,
    counters: [u64; Counter::COUNT],
    failures: [u64; FailureKind::COUNT],
    histograms: [&'a [u8]; HISTOGRAMS],
}

/// What a part holds, its histograms read to their end ([`RawPart::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Values in each histogram, in [`HistogramKind::ALL`]'s order.
    pub histograms: [u64; HISTOGRAMS],
    /// Every count of the part added up: counters, failures and histogram
    /// values (in a `u128`, so the sum itself cannot wrap).
    pub sum: u128,
    /// What `agents.jsonl` says of it.
    pub counts: Counts,
}

impl<'a> RawPart<'a> {
    fn read(r: &mut Reader<'a>, layout: &Layout) -> Result<RawPart<'a>, WireError> {
        let key = Key { stage: r.u16()?, step: r.u16()? };
        let mut counters = [0u64; Counter::COUNT];
        for &slot in &layout.counters {
            let n = r.u64()?;
            if let Some(c) = slot {
                counters[c as usize] = n;
            }
        }
        let mut failures = [0u64; FailureKind::COUNT];
        for &k in &layout.kinds {
            // Several unknown kinds share `other`: their sum must fit.
            let f = &mut failures[k as usize];
            *f = f.checked_add(r.u64()?).ok_or_else(|| WireError::Counts("more failures than a u64 holds".into()))?;
        }
        let mut histograms: [&[u8]; HISTOGRAMS] = [&[]; HISTOGRAMS];
        for h in &mut histograms {
            let len = r.u32()? as usize;
            *h = r.take(len)?;
        }
        Ok(RawPart { key, counters, failures, histograms })
    }

    /// Read every histogram to its end (each bucket in range, each total
    /// within a `u64`) and hold what the part claims against what an
    /// engine can count ([`impossible`]). Nothing is added anywhere: a part
    /// refused here leaves no trace.
    pub fn check(&self, scratch: &mut Vec<u8>) -> Result<Tally, WireError> {
        let mut t = Tally::default();
        for (n, bytes) in t.histograms.iter_mut().zip(self.histograms) {
            if !bytes.is_empty() {
                *n = hdr::count_encoded(bytes, scratch).map_err(WireError::Histogram)?;
            }
        }
        let failures: u128 = self.failures.iter().map(|&n| u128::from(n)).sum();
        if let Some(what) = impossible(&self.counters, failures, &t.histograms) {
            return Err(WireError::Counts(what.into()));
        }
        let counted = self.counters.iter().chain(&t.histograms).map(|&n| u128::from(n)).sum::<u128>();
        t.sum = counted + failures;
        let not_failed: u128 = FailureKind::ALL
            .into_iter()
            .filter(|k| !k.is_failure())
            .map(|k| u128::from(self.failures[k as usize]))
            .sum();
        t.counts = Counts {
            sent: self.counters[Counter::Sent as usize],
            completed: self.counters[Counter::Completed as usize],
            dropped: self.counters[Counter::Dropped as usize],
            // The sum of the kinds fits: `impossible` found no more failures than a u64 holds.
            failed: (failures - not_failed) as u64,
            latency_count: t.histograms[HistogramKind::Latency as usize],
        };
        Ok(t)
    }

    /// Add the part to `into`, histograms bucket by bucket (`scratch`: reused
    /// inflate space). For a part that passed [`RawPart::check`] and a
    /// caller that keeps the sums within a `u64` (the join's run total):
    /// then nothing can overflow.
    pub(crate) fn add_to(&self, into: &mut Stats, scratch: &mut Vec<u8>) -> Result<(), WireError> {
        for &c in Counter::ALL {
            *into.counter_mut(c) += self.counters[c as usize];
        }
        for k in FailureKind::ALL {
            into.failures.add_n(k, self.failures[k as usize]);
        }
        for (&h, bytes) in HistogramKind::ALL.iter().zip(self.histograms) {
            if !bytes.is_empty() {
                hdr::add_encoded(bytes, into.histogram_mut(h), scratch).map_err(WireError::Histogram)?;
            }
        }
        Ok(())
    }
}

/// The first thing in one part (one key of one agent's second) that no
/// engine can count, if any. Each rule follows from `perfops-engine`'s
/// `record.rs`, the one place where a second is counted:
/// - `answered` alone counts `completed`, and with it a `latency`, a
///   `service` and a `ttfb`, the success's `latency_ok` and `service_ok`
///   together, an iteration if the flow ended and an arrival answered if it
///   was the flow's first request;
/// - `failed` counts a failure with a `latency` (and a `service` if it was
///   sent), `cut` a failure with a `latency`, `closed` (a WebSocket) a
///   failure alone;
/// - `connected` counts a connection with its `connect` time.
///
/// Every rule is linear, so it holds for a worker's second, an agent's (its
/// workers merged) and any merge of them: cut requests, failed ones and
/// closed-model iterations included. What is recorded elsewhere (`tls`
/// without a connection in the same second, `dropped`, `goaways`, bytes)
/// has no rule: nothing ties it to the rest within a second.
fn impossible(c: &[u64; Counter::COUNT], failures: u128, h: &[u64; HISTOGRAMS]) -> Option<&'static str> {
    let c = |counter: Counter| c[counter as usize];
    let h = |kind: HistogramKind| h[kind as usize];
    use HistogramKind::{Connect, Latency, LatencyOk, Service, ServiceOk, Ttfb};
    let completed = c(Counter::Completed);
    let rules: [(bool, &'static str); 10] = [
        (failures > u128::from(u64::MAX), "more failures than a u64 holds"),
        (c(Counter::Iterations) > completed, "more iterations than responses"),
        (c(Counter::ArrivalsAnswered) > completed, "more arrivals answered than responses"),
        (h(Ttfb) > completed, "more first-byte times than responses"),
        (h(LatencyOk) > completed, "more successes than responses"),
        (h(LatencyOk) != h(ServiceOk), "successes' latencies and service times differ in number"),
        (h(Service) > h(Latency), "more service times than latencies"),
        (h(LatencyOk) > h(Latency), "more successes' latencies than latencies"),
        (u128::from(h(Latency)) > u128::from(completed) + failures, "more latencies than requests that ended"),
        (h(Connect) > c(Counter::Connects), "more connect times than connections"),
    ];
    rules.into_iter().find(|(broken, _)| *broken).map(|(_, what)| what)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stats(seed: u64) -> Stats {
        let mut s = Stats {
            sent: 10 + seed,
            completed: 9,
            iterations: 8,
            arrivals_answered: 7,
            dropped: seed,
            ..Stats::default()
        };
        s.bytes_in = 1234;
        s.bytes_out = 567;
        s.connects = 2;
        s.goaways = seed;
        s.stream_waits = 3 * seed;
        s.failures.add_n(FailureKind::Http5xx, 1);
        s.failures.add_n(FailureKind::Cut, seed);
        for us in [150, 900, 12_000, 2_000_000 + seed] {
            s.latency.record(Duration::from_micros(us));
            s.service.record(Duration::from_micros(us / 2));
        }
        s.latency_ok.record(Duration::from_micros(150));
        s.service_ok.record(Duration::from_micros(75));
        s.ttfb.record(Duration::from_micros(80));
        s
    }

    fn interval(index: u32) -> Interval {
        let parts = vec![(Key { stage: 0, step: 0 }, stats(1)), (Key { stage: 1, step: 2 }, stats(2))];
        let mut all = Stats::default();
        for (_, s) in &parts {
            all.merge(s);
        }
        Interval {
            index,
            length: Duration::from_millis(1000),
            in_flight: 7,
            target: Some(33.5),
            stats: all,
            parts,
            samples: FailureSamples::default(),
        }
    }

    #[test]
    fn a_second_round_trips_exactly() {
        let iv = interval(4);
        let mut buf = encode(&Message::Second(Box::new(iv.clone())));
        let got = take_frames(&mut buf).unwrap();
        assert!(buf.is_empty());
        let [Message::Received(raw)] = &got[..] else { panic!("{got:?}") };
        let back = raw.decode().unwrap();
        assert_eq!((back.index, back.length, back.in_flight, back.target), (4, iv.length, 7, Some(33.5)));
        assert_eq!(back.parts, iv.parts, "every counter and every histogram bucket");
        assert_eq!(back.stats, iv.stats, "the total is the merge of the parts");
    }

    /// A second's failing exchanges travel with it, and again when the
    /// coordinator re-sends what it received (a recording).
    #[test]
    fn a_second_carries_its_samples() {
        let mut iv = interval(4);
        let sample = FailureSample {
            t: 3.25,
            status: Some(404),
            body: Some("not found".into()),
            request: Some("GET /missing HTTP/1.1".into()),
            request_headers: vec![("Authorization".into(), "<redacted>".into())],
            ..FailureSample::default()
        };
        iv.samples.add((1, FailureKind::Http4xx), sample.clone());
        let mut buf = encode(&Message::Second(Box::new(iv.clone())));
        let got = take_frames(&mut buf).unwrap();
        let [Message::Received(raw)] = &got[..] else { panic!("{got:?}") };
        assert_eq!(raw.decode().unwrap().samples, iv.samples);
        let mut again = encode(&Message::Received(raw.clone()));
        let got = take_frames(&mut again).unwrap();
        let [Message::Received(raw)] = &got[..] else { panic!("{got:?}") };
        assert_eq!(raw.samples.of((1, FailureKind::Http4xx)), [sample]);
        assert_eq!(raw.decode().unwrap().parts, iv.parts, "the parts are as they were");
    }

    /// The frame of `iv` with `json` (any bytes) as its samples.
    fn with_samples(iv: &Interval, json: &[u8]) -> Vec<u8> {
        let mut frame = encode(&Message::Second(Box::new(iv.clone())));
        frame.extend((json.len() as u32).to_le_bytes());
        frame.extend(json);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        frame
    }

    /// A hostile agent's samples: too many, too big, of a kind no engine
    /// has, not JSON, are refused with the second; unescaped bytes and an
    /// oversized body are escaped and cut; more than a key's few, or more
    /// keys than a generator keeps, are not kept.
    #[test]
    fn a_hostile_agents_samples_are_bounded_or_refused() {
        let iv = interval(0);
        let one = |step: u16, kind: &str, t: f64, body: &str| json!({"step": step, "kind": kind, "sample": {"t": t, "body": body}});
        let decode = |json: &[u8]| -> Result<RawSecond, WireError> {
            let mut frame = with_samples(&iv, json);
            match take_frames(&mut frame)?.pop() {
                Some(Message::Received(raw)) => Ok(raw),
                other => panic!("{other:?}"),
            }
        };
        // (samples sent, refused)
        let too_many: Vec<_> = (0..=MAX_SAMPLES).map(|i| one(0, "http_4xx", i as f64, "x")).collect();
        let cases: Vec<(Vec<u8>, bool)> = vec![
            // one more than a generator can keep in a second
            (serde_json::to_vec(&too_many).unwrap(), true),
            // a kind no engine counts
            (serde_json::to_vec(&[one(0, "pwned", 0.0, "x")]).unwrap(), true),
            // not JSON
            (b"\xff\xfe not json".to_vec(), true),
            // a fine sample
            (serde_json::to_vec(&[one(0, "http_5xx", 0.5, "busy")]).unwrap(), false),
        ];
        for (i, (json, refused)) in cases.iter().enumerate() {
            assert_eq!(decode(json).is_err(), *refused, "case {i}");
        }
        // More bytes than a second may carry: refused on the length alone.
        let mut frame = encode(&Message::Second(Box::new(iv.clone())));
        frame.extend(((MAX_SAMPLE_BYTES + 1) as u32).to_le_bytes());
        frame.extend(vec![b' '; MAX_SAMPLE_BYTES + 1]);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        assert!(take_frames(&mut frame).is_err(), "too many bytes of samples");
        // Unescaped and oversized: escaped and cut; many of one key: the first few by time.
        let evil = format!("\u{1b}]0;owned\u{7}<script>{}", "A".repeat(10_000));
        let list: Vec<_> = (0..MAX_SAMPLES).map(|i| one(0, "http_4xx", (MAX_SAMPLES - i) as f64, &evil)).collect();
        let raw = decode(&serde_json::to_vec(&list).unwrap()).unwrap();
        let kept = raw.samples.of((0, FailureKind::Http4xx));
        assert_eq!(kept.len(), PER_KEY, "a key's first few, no more");
        assert_eq!(kept.iter().map(|s| s.t).collect::<Vec<_>>(), [1.0, 2.0, 3.0], "first by time");
        let body = kept[0].body.as_deref().unwrap();
        assert!(body.len() <= crate::measure::BODY_HEAD_BYTES, "{} bytes", body.len());
        assert!(!body.chars().any(char::is_control), "{body:?}");
        // Many keys: no more than a generator keeps.
        let keys: Vec<_> = (0..MAX_SAMPLES).map(|i| one(i as u16, "timeout", 1.0, "")).collect();
        let raw = decode(&serde_json::to_vec(&keys).unwrap()).unwrap();
        assert_eq!(raw.samples.iter().count(), MAX_KEYS);
    }

    #[test]
    fn this_builds_names_pass_their_own_checks() {
        let layout = Layout::of(&Names::local(), &FailureKind::ALL).unwrap();
        assert!(layout.unknown_kinds.is_empty() && layout.unknown_counters.is_empty());
        assert_eq!(layout.note(), None, "nothing to say of a peer of the same build");
    }

    #[test]
    fn names_from_a_peer_are_checked_before_use() {
        let ok = Names::local();
        let with = |kinds: Vec<String>| Names { counters: ok.counters.clone(), kinds };
        // (the kinds a peer names, the error): each a way a peer can send garbage.
        let cases: Vec<(Vec<String>, NamesError)> = vec![
            // More names than a frame's count holds.
            ((0..256).map(|i| format!("k{i}")).collect(), NamesError::TooMany { what: "failure kinds", count: 256 }),
            // A name too long to be a kind (and to print).
            (vec!["x".repeat(MAX_NAME_LEN + 1)], NamesError::Malformed { what: "failure kind" }),
            // A name with what a terminal would interpret.
            (vec!["a\u{1b}[2J".into()], NamesError::Malformed { what: "failure kind" }),
            // An empty name.
            (vec![String::new()], NamesError::Malformed { what: "failure kind" }),
            // A name twice: which count would be its?
            (
                vec!["timeout".into(), "timeout".into()],
                NamesError::Twice { what: "failure kind", name: "timeout".into() },
            ),
        ];
        for (kinds, want) in cases {
            assert_eq!(Layout::of(&with(kinds.clone()), &FailureKind::ALL).err(), Some(want), "{kinds:?}");
        }
        // The longest name allowed passes, and is a kind this build does not know.
        let long = "y".repeat(MAX_NAME_LEN);
        let layout = Layout::of(&with(vec![long.clone()]), &FailureKind::ALL).unwrap();
        assert_eq!(layout.unknown_kinds, vec![long]);
    }

    #[test]
    fn frames_split_anywhere_are_reassembled() {
        let mut stream = encode(&Message::Control(Control::Heartbeat));
        stream.extend(encode(&Message::Second(Box::new(interval(0)))));
        stream.extend(encode(&Message::Control(Control::Stop { reason: "p99".into() })));
        // Every cut point: what is complete comes out, the rest waits.
        for cut in 0..stream.len() {
            let mut buf = stream[..cut].to_vec();
            let mut got = take_frames(&mut buf).unwrap();
            buf.extend_from_slice(&stream[cut..]);
            got.extend(take_frames(&mut buf).unwrap());
            assert_eq!(got.len(), 3, "cut at {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        // (bytes, expected error): each a way a peer can send garbage.
        let cases: Vec<(Vec<u8>, WireError)> = vec![
            // A zero-length frame.
            (vec![0, 0, 0, 0], WireError::Size(0)),
            // A frame claiming 1 GiB: refused before anything is allocated.
            (vec![0x40, 0, 0, 0], WireError::Size(1 << 30)),
            // An unknown kind.
            (vec![0, 0, 0, 1, 9], WireError::Kind(9)),
            // A second cut short.
            (vec![0, 0, 0, 3, KIND_SECOND, 1, 2], WireError::Truncated),
        ];
        for (bytes, want) in cases {
            let mut buf = bytes.clone();
            assert_eq!(take_frames(&mut buf).err(), Some(want), "{bytes:?}");
        }
        // JSON that is no control message.
        let mut buf = vec![0, 0, 0, 3, KIND_CONTROL, b'{', b'}'];
        assert!(matches!(take_frames(&mut buf), Err(WireError::Control(_))));
        // A histogram that is not HdrHistogram's encoding.
        let mut body = vec![KIND_SECOND];
        encode_interval(&interval(0), None, &mut body);
        let first_hist = 1 + 4 + 8 + 8 + 9 + 2 + 2 + 4 + 8 * Counter::COUNT + 8 * FailureKind::COUNT + 4;
        body[first_hist] ^= 0xff;
        let Ok(Message::Received(raw)) = decode(&body) else { panic!("the shape is right") };
        assert!(matches!(raw.decode(), Err(WireError::Histogram(_))));
    }

    #[test]
    fn before_authentication_a_frame_is_refused_on_its_length() {
        // Issue #31: a stranger's frame announcing more than HANDSHAKE_FRAME is refused
        // on its 4-byte prefix: nothing of its body is waited for or held.
        // (prefix, accepted under the handshake limit)
        let cases: [(u32, bool); 4] = [
            (1, true),                           // the smallest frame
            (HANDSHAKE_FRAME as u32, true),      // exactly the limit
            (HANDSHAKE_FRAME as u32 + 1, false), // one byte above it
            ((MAX_FRAME - 1) as u32, false),     // what the issue's attacker sent: a near-full frame
        ];
        for (len, ok) in cases {
            // The prefix alone: accepted means waiting for the body, refused means refused at once.
            let mut buf = len.to_be_bytes().to_vec();
            let got = take_frames_within(&mut buf, HANDSHAKE_FRAME);
            assert_eq!(got.is_ok(), ok, "{len}");
            if !ok {
                assert_eq!(got.err(), Some(WireError::Size(len as usize)));
            }
        }
        // After authentication the full limit holds, as before.
        assert!(take_frames(&mut ((MAX_FRAME - 1) as u32).to_be_bytes().to_vec()).is_ok());
    }

    proptest::proptest! {
        /// Issue #31 point 8: arbitrary bytes, cut anywhere, under the
        /// handshake limit: an error or frames, never a panic, and what
        /// stays buffered is less than one frame of the limit.
        #[test]
        fn arbitrary_bytes_never_panic_and_stay_bounded(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9000),
            cut in 0usize..9000,
        ) {
            let cut = cut.min(bytes.len());
            let mut buf = bytes[..cut].to_vec();
            if take_frames_within(&mut buf, HANDSHAKE_FRAME).is_ok() {
                buf.extend_from_slice(&bytes[cut..]);
                if take_frames_within(&mut buf, HANDSHAKE_FRAME).is_ok() {
                    proptest::prop_assert!(buf.len() < 4 + HANDSHAKE_FRAME);
                }
            }
        }
    }

    #[test]
    fn control_messages_round_trip() {
        let a = Assignment {
            path: "s.yaml".into(),
            scenario: "name: x".into(),
            overrides: vec![("load.max_in_flight".into(), "10".into())],
            target: "http://127.0.0.1:1".into(),
            env: BTreeMap::from([("A".into(), "b".into())]),
            files: BTreeMap::from([
                ("protos/echo.proto".into(), "syntax = \"proto3\";".into()),
                ("rec.csv".into(), "# perfops replay v1\noffset_ms,flow\n0,a\n".into()),
            ]),
            globals: BTreeMap::from([("token".into(), "t".into())]),
            stage_ends_ns: vec![1_000_000_000],
            insecure: false,
            wait_in_flight: true,
            workers: 1,
        };
        for c in [
            Control::Hello {
                protocol: PROTOCOL,
                nonce: "00ff".into(),
                index: Some(2),
                name: "h".into(),
                counters: Names::local().counters,
                kinds: Names::local().kinds,
            },
            Control::Challenge { nonce: "ab".into() },
            Control::Accepted { proof: "cd".into() },
            Control::Pong { t0: -1, t1: 2, t2: i64::MAX },
            Control::Assign(Box::new(a)),
            Control::Done {
                elapsed_ns: 1,
                workers: 2,
                naps: 0,
                longest_nap_ns: 0,
                interrupted: false,
                late_ns: 0,
                protocols: vec!["grpc over h2c".into(), "http/1.1".into()],
                pacer: Some(Box::new(PacerWord {
                    name: "timerfd".into(),
                    refused: Some("io_uring_setup: Operation not permitted".into()),
                })),
                cpu_wait_ns: 12_345,
            },
            Control::Steer { action: "rate 300".into(), at_s: 12, by: "ctl".into() },
            Control::Bye,
        ] {
            let mut buf = encode(&Message::Control(c.clone()));
            let got = take_frames(&mut buf).unwrap();
            assert!(matches!(&got[..], [Message::Control(back)] if *back == c), "{c:?}");
        }
    }
}
