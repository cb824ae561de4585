//! One HTTP/2 client connection: its streams, flow control, settings, and
//! the task that does its I/O. What each frame read does to the streams is
//! `conn/receive.rs`'s; which connection a request goes on, and when to open
//! one, is `http2.rs`'s.
//!
//! ```text
//!   request task                        connection task (one per connection)
//!   open(): HEADERS (+DATA) appended ─┐
//!     to the connection's buffer      ├─> wake once ─> read: frames to streams ─┐
//!   poll(): its stream done? <────────┘                write the buffer (all     │
//!     (woken by the connection task) <─────────────── streams' frames) ──────────┘
//! ```
//!
//! Why not the `h2` crate: under callgrind it took ~20,000 of perfops'
//! ~27,900 user-space instructions per request against nginx, where h2load
//! spends ~19,300 in all (bench/README.md, "Where an HTTP/2 request's CPU
//! goes"): a `HeaderMap` built per response, a `Bytes` per frame, streams
//! in a SipHash map behind a mutex, a task per connection and wakers at
//! every hop. Here a stream is a slot in a slab found from its id by
//! arithmetic (ids grow by 2: a deque of slab indices from the oldest id
//! still known), header blocks are decoded into what the request needs
//! (`hpack.rs`), frames are read in place from one 16 KiB buffer, and every
//! stream's frames go out in one write per turn of the connection task.
//! Everything lives on one worker's thread (`RefCell`, no lock).
//!
//! What the server may do, and what it costs the requests: `GOAWAY` fails
//! the streams above its last stream id as `GoAway` (sent again on another
//! connection by the caller) and the others finish; `RST_STREAM` fails its
//! stream (`refused_stream` for `REFUSED_STREAM`, `reset_stream` else); a
//! frame that breaks the protocol (a bad length, a header block HPACK
//! cannot decode, a window overflow, DATA on a stream never opened) ends the
//! connection with our `GOAWAY` and fails its streams as `Protocol`; a
//! closed socket fails them as `Reset`. Memory is bounded whatever the
//! server sends: frames by our SETTINGS_MAX_FRAME_SIZE (16 KiB), a header
//! block across CONTINUATIONs by [`MAX_BLOCK`], decoded lists by
//! `hpack::MAX_LIST`, captured bodies by the caller's limit, what reading
//! queues to write back (a PING flood's acknowledgements) by [`REPLIES_MAX`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use perfops_core::measure::FailureKind;
use tokio::io::ReadBuf;
use tokio::time::Instant;

use super::answer::{Answer, Captured, StreamError};
pub(crate) use super::encoder::Block;
use super::encoder::Blocks;
use super::frame::{self, FrameError, code, setting};
use super::hpack::{self, Decoder};
use super::stamped::Transport;
use crate::stream::Mode;

mod receive;

/// The most a header block may take across its CONTINUATIONs, bytes.
pub(crate) const MAX_BLOCK: usize = 256 * 1024;

/// The read buffer: one frame of the largest we accept, or many small
/// responses per read (at 50 x 10 streams a read brings ~1 KiB). Not
/// more: it is per connection, and 10,000 connections of 64 KiB would be
/// 640 MiB.
const READ_BUF: usize = frame::DEFAULT_MAX_FRAME + frame::HEAD_LEN;

/// The most of streamed answers' bytes a connection keeps for their
/// requests (see [`Flowing`]): past it, it reads nothing more until they
/// took them, so a server that streams faster than a worker splits costs a
/// bounded buffer and TCP's own flow control, not memory.
const PENDING_MAX: usize = 64 * 1024;

/// The most of what reading queues to write back (PING and SETTINGS
/// acknowledgements, WINDOW_UPDATEs, resets) that waits unwritten: past it,
/// the connection reads nothing more until the server took it. A server
/// that floods PINGs or SETTINGS and reads nothing (CVE-2019-9512, -9515)
/// had one request's connection queue 1.4 GB of acknowledgements in 2 s;
/// now it costs this, a read's worth more, and its requests' timeouts.
const REPLIES_MAX: usize = 64 * 1024;

/// The largest window (§6.9.1).
const MAX_WINDOW: i64 = (1 << 31) - 1;

/// The first stream id we may not use.
const MAX_STREAM_ID: u32 = 1 << 31;

/// No slot (a stream freed, its id still in the deque).
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Done,
    Failed(StreamError),
}

/// A stream's state.
#[derive(Debug)]
struct Slot {
    id: u32,
    phase: Phase,
    waker: Option<Waker>,
    status: u16,
    /// The final (non-1xx) headers arrived: a next block is trailers.
    headers_done: bool,
    grpc_status: Option<u32>,
    bytes_in: u64,
    first_byte: Option<Instant>,
    last_byte: Option<Instant>,
    /// On a connection dated by the kernel, when its request was handed
    /// over: no byte of its answer is dated before (a kernel's date
    /// converted between clocks could be). `None` elsewhere: no clock read.
    opened: Option<Instant>,
    /// Bytes received and not yet given back by a WINDOW_UPDATE.
    unacked: i64,
    /// What we may still send on it.
    send_window: i64,
    /// The request body, sent from `body_at` as the windows allow.
    body: Bytes,
    body_at: usize,
    captured: Option<Box<Captured>>,
    /// Its `Set-Cookie` fields' values, captured or not, for the flow's
    /// cookie jar (empty, unallocated, from a server that sets none).
    set_cookies: Vec<Vec<u8>>,
    /// The most of the body `captured` keeps.
    capture_max: usize,
    /// A streamed answer's bytes not yet taken by its request
    /// ([`Conn::flow`]); `None` for every other stream.
    flowing: Option<Box<Flowing>>,
}

/// A streamed answer's body as its DATA frames came, for the request to
/// split into events (`stream.rs`): the bytes, and where each read's run of
/// them ends with the instant that read is dated by.
#[derive(Debug, Default)]
pub(super) struct Flowing {
    bytes: Vec<u8>,
    /// (end in `bytes`, the read's date), in order.
    runs: Vec<(usize, Instant)>,
    /// How the body splits, from its `content-type`: known at its first bytes.
    mode: Option<Mode>,
}

impl Flowing {
    /// `data` of a DATA frame read at `at`: frames of one read are one run.
    pub(super) fn push(&mut self, data: &[u8], at: Instant) {
        self.bytes.extend_from_slice(data);
        match self.runs.last_mut() {
            Some((end, t)) if *t == at => *end = self.bytes.len(),
            _ => self.runs.push((self.bytes.len(), at)),
        }
    }
}

impl Slot {
    fn new(id: u32, send_window: i64, capture: Option<usize>, opened: Option<Instant>) -> Slot {
        Slot {
            id,
            phase: Phase::Open,
            waker: None,
            status: 0,
            headers_done: false,
            grpc_status: None,
            bytes_in: 0,
            first_byte: None,
            last_byte: None,
            opened,
            unacked: 0,
            send_window,
            body: Bytes::new(),
            body_at: 0,
            captured: capture.map(|_| Box::default()),
            set_cookies: Vec::new(),
            capture_max: capture.unwrap_or(0),
            flowing: None,
        }
    }

    fn end(&mut self, phase: Phase) {
        if self.phase == Phase::Open {
            self.phase = phase;
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }
}

/// Our windows (SETTINGS_INITIAL_WINDOW_SIZE and the connection's), bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Windows {
    pub(crate) stream: u32,
    pub(crate) connection: u32,
}

/// Large windows, as h2load's defaults: flow control never holds a
/// response back, so what is measured is the server, not the window.
pub const LARGE_WINDOW: u32 = (1 << 30) - 1;

/// The connection's state, shared by its task and its requests.
struct Inner {
    /// Frames not yet written, of every stream; `written` of them are.
    wbuf: Vec<u8>,
    written: usize,
    /// The connection task, and whether it was woken since its last turn.
    task: Option<Waker>,
    woken: bool,
    /// The server's SETTINGS arrived ([`Conn::poll_ready`]).
    settings_seen: bool,
    ready_waker: Option<Waker>,
    peer_max_streams: u32,
    peer_window: i64,
    peer_max_frame: usize,
    /// What we may still send on the connection.
    send_window: i64,
    next_id: u32,
    /// The id of `ids[0]`; `ids[(id - base) / 2]` is a slab index or NONE.
    base: u32,
    ids: VecDeque<u32>,
    slab: Vec<Slot>,
    free: Vec<u32>,
    /// Slots in use (open, or done and not yet collected).
    live: usize,
    /// Streams whose body waits for a window.
    blocked: Vec<u32>,
    decoder: Decoder,
    /// Our requests' blocks, indexed in the server's table.
    blocks: Blocks,
    /// A header block waiting for CONTINUATIONs: (stream, END_STREAM).
    cont: Option<(u32, bool)>,
    cont_buf: Vec<u8>,
    ours: Windows,
    /// Connection bytes received and not yet given back.
    unacked: i64,
    /// The server's GOAWAY: its last stream id.
    goaway: Option<u32>,
    /// The connection is over: why its streams failed.
    closed: Option<FailureKind>,
    /// Nobody will open streams on it any more (the pool let it go).
    released: bool,
    /// Its reads are dated by the kernel (`stamped.rs`).
    dated: bool,
    /// Streamed answers' bytes kept for their requests, over all its
    /// streams (at most about [`PENDING_MAX`] and a read).
    pending: usize,
    /// Bytes that reading queued in `wbuf` since it was last written whole
    /// (at most about [`REPLIES_MAX`] and a read's).
    replies: usize,
}

/// One HTTP/2 connection of a worker (shared by its requests; its task
/// runs [`Conn::drive`]).
pub(crate) struct Conn {
    inner: RefCell<Inner>,
}

impl Conn {
    /// A connection whose preface and SETTINGS are queued, with our windows.
    pub(crate) fn new(ours: Windows) -> Conn {
        let mut wbuf = Vec::with_capacity(1024);
        wbuf.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut wbuf,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, ours.stream.min(MAX_WINDOW as u32)),
                (setting::MAX_HEADER_LIST_SIZE, hpack::MAX_LIST as u32),
            ],
        );
        let extra = i64::from(ours.connection).min(MAX_WINDOW) - 65_535;
        if extra > 0 {
            frame::put_window_update(&mut wbuf, 0, extra as u32);
        }
        Conn {
            inner: RefCell::new(Inner {
                wbuf,
                written: 0,
                task: None,
                woken: false,
                settings_seen: false,
                ready_waker: None,
                peer_max_streams: u32::MAX,
                peer_window: 65_535,
                peer_max_frame: frame::DEFAULT_MAX_FRAME,
                send_window: 65_535,
                next_id: 1,
                base: 1,
                ids: VecDeque::new(),
                slab: Vec::new(),
                free: Vec::new(),
                live: 0,
                blocked: Vec::new(),
                decoder: Decoder::default(),
                blocks: Blocks::default(),
                cont: None,
                cont_buf: Vec::new(),
                ours: Windows {
                    stream: ours.stream.min(MAX_WINDOW as u32),
                    connection: ours.connection.clamp(65_535, MAX_WINDOW as u32),
                },
                unacked: 0,
                goaway: None,
                closed: None,
                released: false,
                dated: false,
                pending: 0,
                replies: 0,
            }),
        }
    }

    /// Streamed answers' bytes waiting for their requests.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.inner.borrow().pending
    }

    /// Bytes queued to write and not yet written (for tests of its bound).
    #[cfg(test)]
    pub(crate) fn unwritten(&self) -> usize {
        let i = self.inner.borrow();
        i.wbuf.len() - i.written
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
    pub(crate) fn max_streams(&self) -> u32 {
        self.inner.borrow().peer_max_streams
    }

    /// New streams may go on it.
    pub(crate) fn accepting(&self) -> bool {
        let i = self.inner.borrow();
        i.goaway.is_none() && i.closed.is_none() && i.next_id < MAX_STREAM_ID
    }

    /// Ready once the server's SETTINGS arrived (the first requests then
    /// honour its stream limit), or failed.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), FailureKind>> {
        let mut i = self.inner.borrow_mut();
        if let Some(kind) = i.closed {
            return Poll::Ready(Err(kind));
        }
        if i.settings_seen {
            return Poll::Ready(Ok(()));
        }
        i.ready_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Open a stream: its header block and body queued for the connection
    /// task; with `capture`, its answer's fields and up to that many bytes
    /// of its body are kept. Returns its id.
    pub(crate) fn open(&self, block: Block<'_>, body: &Bytes, capture: Option<usize>) -> Result<u32, StreamError> {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        if i.goaway.is_some() || i.closed.is_some() || i.next_id >= MAX_STREAM_ID {
            return Err(StreamError { kind: i.closed.unwrap_or(FailureKind::GoAway), again: true });
        }
        let id = i.next_id;
        i.next_id += 2;
        let slot = Slot::new(id, i.peer_window, capture, i.dated.then(Instant::now));
        let index = match i.free.pop() {
            Some(x) => {
                i.slab[x as usize] = slot;
                x
            }
            None => {
                i.slab.push(slot);
                (i.slab.len() - 1) as u32
            }
        };
        if i.ids.is_empty() {
            i.base = id;
        }
        i.ids.push_back(index);
        i.live += 1;
        let block = i.blocks.block(block);
        frame::put_headers(&mut i.wbuf, id, block, body.is_empty(), i.peer_max_frame);
        if !body.is_empty() {
            i.slab[index as usize].body = body.clone();
            i.send_body(index);
        }
        i.wake_task();
        Ok(id)
    }

    /// The answer on stream `id`, once complete; its slot is freed then.
    pub(crate) fn poll_answer(&self, id: u32, cx: &mut Context<'_>) -> Poll<Result<Answer, StreamError>> {
        let mut i = self.inner.borrow_mut();
        let Some(x) = i.index_of(id) else { return Poll::Ready(Err(StreamError::of(FailureKind::Protocol))) };
        let slot = &mut i.slab[x];
        match slot.phase {
            Phase::Open => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            Phase::Failed(e) => {
                i.free_slot(id, x);
                Poll::Ready(Err(e))
            }
            Phase::Done => {
                let answer = Answer {
                    status: slot.status,
                    bytes_in: slot.bytes_in,
                    first_byte: slot.first_byte.unwrap_or_else(Instant::now),
                    last_byte: slot.last_byte.unwrap_or_else(Instant::now),
                    grpc_status: slot.grpc_status,
                    captured: slot.captured.take(),
                    set_cookies: std::mem::take(&mut slot.set_cookies),
                };
                i.free_slot(id, x);
                Poll::Ready(Ok(answer))
            }
        }
    }

    /// Read stream `id`'s answer as it comes (a step with `stream:`): its
    /// body's bytes are kept, each read's dated, for
    /// [`Conn::poll_streamed`], and its header fields for the
    /// `content-type` that says how it splits (captured whatever the step
    /// captures; its body only as the step asked). Called right after
    /// [`Conn::open`], before the connection task can read a byte of it.
    pub(crate) fn flow(&self, id: u32) {
        let mut i = self.inner.borrow_mut();
        if let Some(x) = i.index_of(id) {
            let slot = &mut i.slab[x];
            slot.flowing = Some(Box::default());
            slot.captured.get_or_insert_with(Box::default);
        }
    }

    /// [`Conn::poll_answer`] for a stream read as it comes ([`Conn::flow`]):
    /// first each run of body bytes received since the last call, handed to
    /// `feed` with how the body splits and the instant of the read that
    /// brought it, in order; then the answer, once complete (or the failure:
    /// what came before it was handed over all the same).
    pub(crate) fn poll_streamed(
        &self,
        id: u32,
        cx: &mut Context<'_>,
        feed: &mut dyn FnMut(Mode, &[u8], Instant),
    ) -> Poll<Result<Answer, StreamError>> {
        {
            let mut guard = self.inner.borrow_mut();
            let i = &mut *guard;
            if let Some(x) = i.index_of(id) {
                let slot = &mut i.slab[x];
                if let Some(f) = slot.flowing.as_deref_mut()
                    && !f.runs.is_empty()
                {
                    let mode = *f.mode.get_or_insert_with(|| {
                        let headers = slot.captured.as_ref().map(|c| &c.headers[..]).unwrap_or_default();
                        Mode::of(headers.iter().find(|(n, _)| n == "content-type").map(|(_, v)| &v[..]))
                    });
                    let mut from = 0;
                    for &(end, at) in &f.runs {
                        feed(mode, &f.bytes[from..end], at);
                        from = end;
                    }
                    let taken = f.bytes.len();
                    f.bytes.clear();
                    f.runs.clear();
                    let held = i.pending > PENDING_MAX;
                    i.pending -= taken;
                    if held && i.pending <= PENDING_MAX {
                        i.wake_task();
                    }
                }
            }
        }
        self.poll_answer(id, cx)
    }

    /// The request on stream `id` is given up (its timeout, the run's end):
    /// `RST_STREAM` (CANCEL) if it is still open, and its slot freed; what
    /// the server still sends on it is read and dropped.
    pub(crate) fn cancel(&self, id: u32) {
        let mut i = self.inner.borrow_mut();
        let Some(x) = i.index_of(id) else { return };
        if i.slab[x].phase == Phase::Open && i.closed.is_none() {
            frame::put_reset(&mut i.wbuf, id, code::CANCEL);
            i.wake_task();
        }
        i.free_slot(id, x);
    }

    /// Nobody will open a stream on it any more: it ends once its streams did.
    pub(crate) fn release(&self) {
        let mut i = self.inner.borrow_mut();
        i.released = true;
        i.wake_task();
    }

    /// Run the connection's I/O on `io` until it ends; returns whether the
    /// server sent a GOAWAY (a graceful end, or not).
    pub(crate) async fn drive<T: Transport>(&self, mut io: T) -> bool {
        self.inner.borrow_mut().dated = io.dated();
        let mut rbuf = vec![0u8; READ_BUF];
        let mut filled = 0usize;
        std::future::poll_fn(|cx| self.poll_drive(&mut io, &mut rbuf, &mut filled, cx)).await;
        self.inner.borrow().goaway.is_some()
    }

    fn poll_drive<T: Transport>(
        &self,
        io: &mut T,
        rbuf: &mut [u8],
        filled: &mut usize,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        if !i.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            i.task = Some(cx.waker().clone());
        }
        i.woken = false;
        // Read until the socket has nothing more: each read takes as many
        // frames (of as many streams) as it brings.
        let mut now = None;
        // Not while streamed answers' bytes wait for their requests past
        // PENDING_MAX: the request that takes them wakes this task. Nor
        // while replies wait past REPLIES_MAX: writing them all wakes it.
        let mut held = false;
        while i.closed.is_none() && i.pending <= PENDING_MAX {
            if i.replies > REPLIES_MAX {
                held = true;
                break;
            }
            let mut buf = ReadBuf::new(&mut rbuf[*filled..]);
            match Pin::new(&mut *io).poll_read(cx, &mut buf) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => i.close(io_failure(&e), None),
                Poll::Ready(Ok(())) if buf.filled().is_empty() => i.close(FailureKind::Reset, None),
                Poll::Ready(Ok(())) => {
                    *filled += buf.filled().len();
                    // Dated by the kernel (`stamped.rs`): this read's frames end then.
                    if let Some(at) = io.last_received() {
                        now = Some(at);
                    }
                    let mut at = 0;
                    let queued = i.wbuf.len();
                    loop {
                        match frame::read(&rbuf[at..*filled], frame::DEFAULT_MAX_FRAME) {
                            Ok(Some((f, n))) => {
                                at += n;
                                if let Err(e) = i.on_frame(f, &mut now) {
                                    i.close(FailureKind::Protocol, Some(e.code));
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                i.close(FailureKind::Protocol, Some(e.code));
                                break;
                            }
                        }
                    }
                    rbuf.copy_within(at..*filled, 0);
                    *filled -= at;
                    // Give back what was read, in one WINDOW_UPDATE per half window.
                    if i.unacked >= i64::from(i.ours.connection / 2) {
                        frame::put_window_update(&mut i.wbuf, 0, i.unacked as u32);
                        i.unacked = 0;
                    }
                    i.replies += i.wbuf.len().saturating_sub(queued);
                }
            }
        }
        // Write every stream's frames at once.
        let mut wrote = false;
        while i.written < i.wbuf.len() {
            match Pin::new(&mut *io).poll_write(cx, &i.wbuf[i.written..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    i.close(FailureKind::Reset, None);
                    i.written = i.wbuf.len();
                }
                Poll::Ready(Ok(n)) => {
                    i.written += n;
                    wrote = true;
                }
                Poll::Pending => break,
            }
        }
        if i.written == i.wbuf.len() {
            i.wbuf.clear();
            i.written = 0;
            i.replies = 0;
            // Reading stopped for the replies, now written: read on.
            if held {
                cx.waker().wake_by_ref();
            }
        }
        if wrote && let Poll::Ready(Err(_)) = Pin::new(&mut *io).poll_flush(cx) {
            i.close(FailureKind::Reset, None);
        }
        if i.closed.is_some() {
            return Poll::Ready(());
        }
        if i.live == 0 && (i.released || i.goaway.is_some() || i.next_id >= MAX_STREAM_ID) {
            if i.goaway.is_none() {
                // Ours, NO_ERROR; written if the socket takes it now.
                let mut bye = Vec::new();
                frame::put_goaway(&mut bye, code::NO_ERROR);
                let _ = Pin::new(&mut *io).poll_write(cx, &bye);
                let _ = Pin::new(&mut *io).poll_flush(cx);
            }
            i.closed = Some(FailureKind::Reset);
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// When a frame read now ends, for a stream opened at `opened` (known on a
/// connection dated by the kernel): the read's date (the kernel's, or the
/// first clock reading of this turn), never before the stream's request
/// was handed over.
pub(super) fn at(now: &mut Option<Instant>, opened: Option<Instant>) -> Instant {
    let at = *now.get_or_insert_with(Instant::now);
    opened.map_or(at, |o| at.max(o))
}

/// The failure kind of an I/O error on an open connection.
fn io_failure(e: &io::Error) -> FailureKind {
    match e.kind() {
        // rustls reports bad records as InvalidData
        io::ErrorKind::InvalidData => FailureKind::Protocol,
        _ => FailureKind::Reset,
    }
}

fn proto(what: &'static str) -> FrameError {
    FrameError { code: code::PROTOCOL_ERROR, what }
}

impl Inner {
    fn wake_task(&mut self) {
        if !self.woken {
            self.woken = true;
            if let Some(w) = &self.task {
                w.wake_by_ref();
            }
        }
    }

    /// The slab index of stream `id`, if it is still known.
    fn index_of(&self, id: u32) -> Option<usize> {
        let off = id.checked_sub(self.base)?;
        match self.ids.get((off / 2) as usize) {
            Some(&x) if x != NONE && off % 2 == 0 => Some(x as usize),
            _ => None,
        }
    }

    fn free_slot(&mut self, id: u32, x: usize) {
        let off = ((id - self.base) / 2) as usize;
        self.ids[off] = NONE;
        while self.ids.front() == Some(&NONE) {
            self.ids.pop_front();
            self.base += 2;
        }
        let slot = &mut self.slab[x];
        slot.body = Bytes::new();
        slot.waker = None;
        if let Some(f) = slot.flowing.take() {
            self.pending -= f.bytes.len();
        }
        self.free.push(x as u32);
        self.live -= 1;
        if self.live == 0 && (self.released || self.goaway.is_some()) {
            self.wake_task();
        }
    }

    /// Fail every open stream and end the connection (with our GOAWAY if
    /// it was the server's fault).
    fn close(&mut self, kind: FailureKind, goaway_code: Option<u32>) {
        if self.closed.is_some() {
            return;
        }
        self.closed = Some(kind);
        if let Some(c) = goaway_code {
            frame::put_goaway(&mut self.wbuf, c);
        }
        for x in self.ids.iter().copied().filter(|&x| x != NONE) {
            self.slab[x as usize].end(Phase::Failed(StreamError::of(kind)));
        }
        if let Some(w) = self.ready_waker.take() {
            w.wake();
        }
    }

    /// End stream `x` on an error of its own: RST_STREAM with `code`.
    fn stream_error(&mut self, x: usize, code: u32) {
        let id = self.slab[x].id;
        frame::put_reset(&mut self.wbuf, id, code);
        self.slab[x].end(Phase::Failed(StreamError::of(FailureKind::Protocol)));
    }

    /// A frame on a stream: its slot, `None` for one that was closed, an
    /// error for one never opened (§5.1: idle).
    fn stream_of(&self, id: u32) -> Result<Option<usize>, FrameError> {
        if id.is_multiple_of(2) || id >= self.next_id {
            return Err(proto("frame on a stream never opened"));
        }
        Ok(self.index_of(id).filter(|&x| self.slab[x].phase == Phase::Open))
    }

    /// Send what the windows allow of stream `x`'s body; the rest waits in
    /// `blocked` for a WINDOW_UPDATE or SETTINGS.
    fn send_body(&mut self, x: u32) {
        let max = self.peer_max_frame;
        let slot = &mut self.slab[x as usize];
        while slot.body_at < slot.body.len() {
            let n =
                (slot.body.len() - slot.body_at).min(max).min(slot.send_window.min(self.send_window).max(0) as usize);
            if n == 0 {
                if !self.blocked.contains(&x) {
                    self.blocked.push(x);
                }
                return;
            }
            let end = slot.body_at + n == slot.body.len();
            frame::put_data(&mut self.wbuf, slot.id, &slot.body[slot.body_at..slot.body_at + n], end);
            slot.body_at += n;
            slot.send_window -= n as i64;
            self.send_window -= n as i64;
        }
    }

    fn send_blocked(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let blocked = std::mem::take(&mut self.blocked);
        for x in blocked {
            let slot = &self.slab[x as usize];
            if slot.phase == Phase::Open && slot.body_at < slot.body.len() {
                self.send_body(x);
            }
        }
    }
}
