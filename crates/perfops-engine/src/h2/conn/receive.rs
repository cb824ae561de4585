//! What each frame the server sends does to a connection's streams: DATA
//! and header blocks fill a stream's answer, RST_STREAM and GOAWAY end
//! streams, SETTINGS and WINDOW_UPDATE change what may be sent. A frame
//! that breaks the protocol is an error for the caller (`Inner::poll_drive`
//! in `conn.rs`), which ends the connection; a stream's own error ends that
//! stream alone. Reading, writing and the streams' life are `conn.rs`'s.

use perfops_core::measure::FailureKind;
use tokio::time::Instant;

use super::super::answer::StreamError;
use super::super::frame::{self, Frame, FrameError, code, setting};
use super::{Inner, MAX_BLOCK, MAX_WINDOW, NONE, Phase, at, proto};

/// The most `Set-Cookie` fields kept of one answer: twice what a jar holds
/// (`perfops_core::cookie::MAX_COOKIES`), so that a server's flood costs a
/// bounded copy; each value is bounded by the header list's own limit.
const MAX_SET_COOKIES: usize = 2 * perfops_core::cookie::MAX_COOKIES;

impl Inner {
    /// One frame from the server, in the order they were read.
    pub(super) fn on_frame(&mut self, f: Frame<'_>, now: &mut Option<Instant>) -> Result<(), FrameError> {
        if let Some((stream, _)) = self.cont
            && !matches!(f, Frame::Continuation { stream: s, .. } if s == stream)
        {
            return Err(proto("a header block interrupted"));
        }
        match f {
            Frame::Data { stream, data, end, flow } => {
                let flow = flow as i64;
                self.unacked += flow;
                if self.unacked > i64::from(self.ours.connection) {
                    return Err(FrameError { code: code::FLOW_CONTROL_ERROR, what: "connection window overrun" });
                }
                let Some(x) = self.stream_of(stream)? else { return Ok(()) };
                let window = i64::from(self.ours.stream);
                let slot = &mut self.slab[x];
                slot.unacked += flow;
                if slot.unacked > window {
                    self.stream_error(x, code::FLOW_CONTROL_ERROR);
                    return Ok(());
                }
                if !slot.headers_done {
                    self.stream_error(x, code::PROTOCOL_ERROR);
                    return Ok(());
                }
                slot.bytes_in += data.len() as u64;
                if let Some(c) = slot.captured.as_deref_mut() {
                    let keep = data.len().min(slot.capture_max.saturating_sub(c.body.len()));
                    c.body.extend_from_slice(&data[..keep]);
                }
                // A streamed answer: its bytes wait for its request, dated by this read.
                if let Some(f) = slot.flowing.as_deref_mut()
                    && !data.is_empty()
                {
                    f.push(data, at(now, slot.opened));
                    self.pending += data.len();
                    if let Some(w) = &slot.waker {
                        w.wake_by_ref();
                    }
                }
                if end {
                    slot.last_byte = Some(at(now, slot.opened));
                    slot.end(Phase::Done);
                } else if slot.unacked >= window / 2 {
                    let inc = slot.unacked as u32;
                    slot.unacked = 0;
                    frame::put_window_update(&mut self.wbuf, stream, inc);
                }
            }
            Frame::Headers { stream, block, end_stream, end_headers } => {
                if end_headers {
                    self.on_block(stream, block, end_stream, now)?;
                } else {
                    self.cont = Some((stream, end_stream));
                    self.cont_buf.clear();
                    self.cont_buf.extend_from_slice(block);
                }
            }
            Frame::Continuation { block, end_headers, .. } => {
                let Some((s, end_stream)) = self.cont else { return Err(proto("CONTINUATION without HEADERS")) };
                if self.cont_buf.len() + block.len() > MAX_BLOCK {
                    return Err(proto("header block too large"));
                }
                self.cont_buf.extend_from_slice(block);
                if end_headers {
                    self.cont = None;
                    let whole = std::mem::take(&mut self.cont_buf);
                    let r = self.on_block(s, &whole, end_stream, now);
                    self.cont_buf = whole;
                    r?;
                }
            }
            Frame::Reset { stream, code: c } => {
                if let Some(x) = self.stream_of(stream)? {
                    let kind =
                        if c == code::REFUSED_STREAM { FailureKind::RefusedStream } else { FailureKind::ResetStream };
                    self.slab[x].end(Phase::Failed(StreamError::of(kind)));
                }
            }
            Frame::Settings { ack: true, .. } => {}
            Frame::Settings { ack: false, pairs } => {
                for (id, value) in frame::settings(pairs) {
                    match id {
                        setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = value,
                        setting::INITIAL_WINDOW_SIZE => {
                            if i64::from(value) > MAX_WINDOW {
                                return Err(FrameError { code: code::FLOW_CONTROL_ERROR, what: "window above 2^31-1" });
                            }
                            let delta = i64::from(value) - self.peer_window;
                            self.peer_window = i64::from(value);
                            for x in self.ids.iter().copied().filter(|&x| x != NONE) {
                                let w = &mut self.slab[x as usize].send_window;
                                *w += delta;
                                if *w > MAX_WINDOW {
                                    return Err(FrameError { code: code::FLOW_CONTROL_ERROR, what: "window overflow" });
                                }
                            }
                        }
                        setting::MAX_FRAME_SIZE => {
                            if !(16_384..=16_777_215).contains(&value) {
                                return Err(proto("SETTINGS_MAX_FRAME_SIZE out of range"));
                            }
                            self.peer_max_frame = value as usize;
                        }
                        setting::ENABLE_PUSH if value > 1 => return Err(proto("SETTINGS_ENABLE_PUSH above 1")),
                        // Our encoder's table: evicted now, the update sent first in the next block.
                        setting::HEADER_TABLE_SIZE => self.blocks.encoder.set_max_size(value),
                        // Unknown ones are ignored (§6.5.2).
                        _ => {}
                    }
                }
                frame::put_settings_ack(&mut self.wbuf);
                self.settings_seen = true;
                if let Some(w) = self.ready_waker.take() {
                    w.wake();
                }
                self.send_blocked();
            }
            Frame::Ping { ack: false, data } => frame::put_ping_ack(&mut self.wbuf, data),
            Frame::Ping { ack: true, .. } | Frame::Ignored => {}
            Frame::GoAway { last_stream, .. } => {
                self.goaway = Some(self.goaway.map_or(last_stream, |l| l.min(last_stream)));
                for x in self.ids.iter().copied().filter(|&x| x != NONE) {
                    let slot = &mut self.slab[x as usize];
                    if slot.id > last_stream {
                        slot.end(Phase::Failed(StreamError { kind: FailureKind::GoAway, again: true }));
                    }
                }
                if let Some(w) = self.ready_waker.take() {
                    w.wake();
                }
            }
            Frame::WindowUpdate { stream: 0, increment } => {
                if increment == 0 {
                    return Err(proto("WINDOW_UPDATE of 0"));
                }
                self.send_window += i64::from(increment);
                if self.send_window > MAX_WINDOW {
                    return Err(FrameError { code: code::FLOW_CONTROL_ERROR, what: "window overflow" });
                }
                self.send_blocked();
            }
            Frame::WindowUpdate { stream, increment } => {
                let Some(x) = self.stream_of(stream)? else { return Ok(()) };
                let w = &mut self.slab[x].send_window;
                *w += i64::from(increment);
                if increment == 0 {
                    self.stream_error(x, code::PROTOCOL_ERROR);
                } else if *w > MAX_WINDOW {
                    self.stream_error(x, code::FLOW_CONTROL_ERROR);
                } else {
                    self.send_blocked();
                }
            }
            Frame::PushPromise { .. } => return Err(proto("PUSH_PROMISE with push disabled")),
        }
        Ok(())
    }

    /// A whole header block on `stream`: response headers (after any 1xx)
    /// or trailers. Decoded even for a stream we closed: the HPACK table is
    /// the connection's.
    fn on_block(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
        now: &mut Option<Instant>,
    ) -> Result<(), FrameError> {
        let compression = |_| FrameError { code: code::COMPRESSION_ERROR, what: "header block HPACK cannot decode" };
        let Some(x) = self.stream_of(stream)? else {
            return self.decoder.decode(block, &mut |_, _| {}).map_err(compression);
        };
        let Inner { decoder, slab, .. } = self;
        let slot = &mut slab[x];
        let trailers = slot.headers_done;
        let mut status = None;
        let mut grpc = None;
        let mut bytes = 0usize;
        let mut captured = slot.captured.as_deref_mut();
        let set_cookies = &mut slot.set_cookies;
        decoder
            .decode(block, &mut |name, value| {
                if name.first() == Some(&b':') {
                    if name == b":status" {
                        status = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u16>().ok());
                    }
                    return;
                }
                bytes += name.len() + value.len() + 4;
                if name == b"grpc-status" {
                    grpc = std::str::from_utf8(value).ok().and_then(|v| v.trim().parse::<u32>().ok());
                } else if name == b"set-cookie" && set_cookies.len() < MAX_SET_COOKIES {
                    // HPACK's names are lowercase (RFC 9113 8.2.1). Kept
                    // whatever the step captures: the flow's jar reads them.
                    set_cookies.push(value.to_vec());
                }
                if let Some(c) = captured.as_deref_mut() {
                    let field = (String::from_utf8_lossy(name).into_owned(), value.to_vec());
                    if trailers { c.trailers.push(field) } else { c.headers.push(field) }
                }
            })
            .map_err(compression)?;
        if grpc.is_some() {
            slot.grpc_status = grpc;
        }
        if trailers {
            if !end_stream {
                self.stream_error(x, code::PROTOCOL_ERROR);
                return Ok(());
            }
            slot.bytes_in += bytes as u64;
        } else {
            match status {
                Some(s) if (100..200).contains(&s) && !end_stream => return Ok(()),
                Some(s) if (200..1000).contains(&s) => {
                    slot.status = s;
                    slot.headers_done = true;
                    slot.bytes_in += 16 + bytes as u64;
                    slot.first_byte = Some(at(now, slot.opened));
                }
                _ => {
                    self.stream_error(x, code::PROTOCOL_ERROR);
                    return Ok(());
                }
            }
        }
        if end_stream {
            let slot = &mut self.slab[x];
            slot.last_byte = Some(at(now, slot.opened));
            slot.end(Phase::Done);
        }
        Ok(())
    }
}
