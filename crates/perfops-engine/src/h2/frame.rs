//! HTTP/2 frames (RFC 9113 §4, §6): the reader that cuts a server's bytes
//! into frames and checks each one's shape, and the writers of ours.
//!
//! The reader works on a slice of the connection's read buffer and hands
//! back borrowed payloads: a frame is never copied out of the buffer it was
//! read into (the `h2` crate moved each into a `Bytes` of its own). The
//! writers append to the connection's one write buffer, which holds the
//! frames of every stream until the connection task writes them in one go
//! (bench/README.md: ~7 requests per write at 50 x 10 streams).
//!
//! Every length, padding and stream id comes from the server and is
//! checked here ([`FrameError`]); what a frame means for the connection is
//! `conn.rs`'s.

/// The 9 bytes before every payload.
pub(crate) const HEAD_LEN: usize = 9;

/// SETTINGS_MAX_FRAME_SIZE's default, and what we accept (we never raise it).
pub(crate) const DEFAULT_MAX_FRAME: usize = 16_384;

/// The client connection preface (§3.4).
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (§6).
pub(crate) mod kind {
    pub(crate) const DATA: u8 = 0x0;
    pub(crate) const HEADERS: u8 = 0x1;
    pub(crate) const PRIORITY: u8 = 0x2;
    pub(crate) const RST_STREAM: u8 = 0x3;
    pub(crate) const SETTINGS: u8 = 0x4;
    pub(crate) const PUSH_PROMISE: u8 = 0x5;
    pub(crate) const PING: u8 = 0x6;
    pub(crate) const GOAWAY: u8 = 0x7;
    pub(crate) const WINDOW_UPDATE: u8 = 0x8;
    pub(crate) const CONTINUATION: u8 = 0x9;
}

/// Flags.
pub(crate) mod flag {
    pub(crate) const END_STREAM: u8 = 0x1;
    pub(crate) const ACK: u8 = 0x1;
    pub(crate) const END_HEADERS: u8 = 0x4;
    pub(crate) const PADDED: u8 = 0x8;
    pub(crate) const PRIORITY: u8 = 0x20;
}

/// Error codes (§7).
pub(crate) mod code {
    pub(crate) const NO_ERROR: u32 = 0x0;
    pub(crate) const PROTOCOL_ERROR: u32 = 0x1;
    pub(crate) const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub(crate) const FRAME_SIZE_ERROR: u32 = 0x6;
    pub(crate) const REFUSED_STREAM: u32 = 0x7;
    pub(crate) const CANCEL: u32 = 0x8;
    pub(crate) const COMPRESSION_ERROR: u32 = 0x9;
}

/// Settings identifiers (§6.5.2).
pub(crate) mod setting {
    pub(crate) const HEADER_TABLE_SIZE: u16 = 0x1;
    pub(crate) const ENABLE_PUSH: u16 = 0x2;
    pub(crate) const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub(crate) const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub(crate) const MAX_FRAME_SIZE: u16 = 0x5;
    pub(crate) const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// A frame the server sent that breaks RFC 9113; the code we end the
/// connection with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} (error code {code})")]
pub(crate) struct FrameError {
    /// The HTTP/2 error code (§7).
    pub(crate) code: u32,
    /// What was wrong.
    pub(crate) what: &'static str,
}

fn err(code: u32, what: &'static str) -> FrameError {
    FrameError { code, what }
}

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) len: usize,
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
}

/// A frame, its payload borrowed from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// DATA: the payload without padding; `flow` is the whole frame's
    /// length, which flow control counts (§6.9.1).
    Data { stream: u32, data: &'a [u8], end: bool, flow: usize },
    /// HEADERS: a header block fragment, padding and priority removed.
    Headers { stream: u32, block: &'a [u8], end_stream: bool, end_headers: bool },
    /// CONTINUATION of a header block.
    Continuation { stream: u32, block: &'a [u8], end_headers: bool },
    /// RST_STREAM.
    Reset { stream: u32, code: u32 },
    /// SETTINGS: pairs of (identifier, value), 6 bytes each; or its ACK.
    Settings { ack: bool, pairs: &'a [u8] },
    /// PING.
    Ping { ack: bool, data: [u8; 8] },
    /// GOAWAY.
    GoAway { last_stream: u32, code: u32 },
    /// WINDOW_UPDATE (an increment of 0 is kept: its error depends on the stream).
    WindowUpdate { stream: u32, increment: u32 },
    /// PUSH_PROMISE (we disable push: receiving one is an error).
    PushPromise { stream: u32 },
    /// PRIORITY, or a type this client does not know: ignored (§4.1).
    Ignored,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Read one frame from the front of `buf`: `Ok(None)` if it is not all
/// there yet, else the frame and the bytes it took. `max` is our
/// SETTINGS_MAX_FRAME_SIZE.
pub(crate) fn read(buf: &[u8], max: usize) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    if buf.len() < HEAD_LEN {
        return Ok(None);
    }
    let head = Head {
        len: (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]),
        kind: buf[3],
        flags: buf[4],
        stream: u32_at(buf, 5) & 0x7fff_ffff,
    };
    if head.len > max {
        return Err(err(code::FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE"));
    }
    let Some(payload) = buf.get(HEAD_LEN..HEAD_LEN + head.len) else { return Ok(None) };
    Ok(Some((parse(head, payload)?, HEAD_LEN + head.len)))
}

/// Remove padding (§6.1): the pad length byte and the pad.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], FrameError> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or(err(code::FRAME_SIZE_ERROR, "padded frame without pad length"))?;
    let keep =
        rest.len().checked_sub(usize::from(pad)).ok_or(err(code::PROTOCOL_ERROR, "padding longer than the payload"))?;
    Ok(&rest[..keep])
}

fn parse(head: Head, p: &[u8]) -> Result<Frame<'_>, FrameError> {
    let Head { kind: k, flags, stream, len } = head;
    let on_stream = |what| if stream == 0 { Err(err(code::PROTOCOL_ERROR, what)) } else { Ok(()) };
    let on_connection = |what| if stream != 0 { Err(err(code::PROTOCOL_ERROR, what)) } else { Ok(()) };
    Ok(match k {
        kind::DATA => {
            on_stream("DATA on stream 0")?;
            Frame::Data { stream, data: unpad(flags, p)?, end: flags & flag::END_STREAM != 0, flow: len }
        }
        kind::HEADERS => {
            on_stream("HEADERS on stream 0")?;
            let mut block = unpad(flags, p)?;
            if flags & flag::PRIORITY != 0 {
                block = block.get(5..).ok_or(err(code::FRAME_SIZE_ERROR, "HEADERS too short for its priority"))?;
            }
            Frame::Headers {
                stream,
                block,
                end_stream: flags & flag::END_STREAM != 0,
                end_headers: flags & flag::END_HEADERS != 0,
            }
        }
        kind::PRIORITY => {
            on_stream("PRIORITY on stream 0")?;
            if len != 5 {
                return Err(err(code::FRAME_SIZE_ERROR, "PRIORITY of a length other than 5"));
            }
            Frame::Ignored
        }
        kind::RST_STREAM => {
            on_stream("RST_STREAM on stream 0")?;
            if len != 4 {
                return Err(err(code::FRAME_SIZE_ERROR, "RST_STREAM of a length other than 4"));
            }
            Frame::Reset { stream, code: u32_at(p, 0) }
        }
        kind::SETTINGS => {
            on_connection("SETTINGS on a stream")?;
            let ack = flags & flag::ACK != 0;
            if (ack && len != 0) || len % 6 != 0 {
                return Err(err(code::FRAME_SIZE_ERROR, "SETTINGS of a bad length"));
            }
            Frame::Settings { ack, pairs: p }
        }
        kind::PUSH_PROMISE => Frame::PushPromise { stream },
        kind::PING => {
            on_connection("PING on a stream")?;
            let data: [u8; 8] =
                p.try_into().map_err(|_| err(code::FRAME_SIZE_ERROR, "PING of a length other than 8"))?;
            Frame::Ping { ack: flags & flag::ACK != 0, data }
        }
        kind::GOAWAY => {
            on_connection("GOAWAY on a stream")?;
            if len < 8 {
                return Err(err(code::FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes"));
            }
            Frame::GoAway { last_stream: u32_at(p, 0) & 0x7fff_ffff, code: u32_at(p, 4) }
        }
        kind::WINDOW_UPDATE => {
            if len != 4 {
                return Err(err(code::FRAME_SIZE_ERROR, "WINDOW_UPDATE of a length other than 4"));
            }
            Frame::WindowUpdate { stream, increment: u32_at(p, 0) & 0x7fff_ffff }
        }
        kind::CONTINUATION => {
            on_stream("CONTINUATION on stream 0")?;
            Frame::Continuation { stream, block: p, end_headers: flags & flag::END_HEADERS != 0 }
        }
        _ => Frame::Ignored,
    })
}

/// The settings of a SETTINGS payload, (identifier, value).
pub(crate) fn settings(pairs: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    pairs.chunks_exact(6).map(|c| (u16::from_be_bytes([c[0], c[1]]), u32_at(c, 2)))
}

/// Append a frame header.
pub(crate) fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Append a SETTINGS frame.
pub(crate) fn put_settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    put_head(out, pairs.len() * 6, kind::SETTINGS, 0, 0);
    for (id, value) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Append a SETTINGS ACK.
pub(crate) fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Append a WINDOW_UPDATE.
pub(crate) fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Append a PING ACK.
pub(crate) fn put_ping_ack(out: &mut Vec<u8>, data: [u8; 8]) {
    put_head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(&data);
}

/// Append a RST_STREAM.
pub(crate) fn put_reset(out: &mut Vec<u8>, stream: u32, code: u32) {
    put_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Append a GOAWAY (a client accepts no streams: last stream 0).
pub(crate) fn put_goaway(out: &mut Vec<u8>, code: u32) {
    put_head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Append a header block as HEADERS and, past `max` bytes a frame, CONTINUATIONs.
pub(crate) fn put_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max: usize) {
    let mut chunks = block.chunks(max.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let more = block.len() > first.len();
    let flags = if end_stream { flag::END_STREAM } else { 0 } | if more { 0 } else { flag::END_HEADERS };
    put_head(out, first.len(), kind::HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut rest = chunks.peekable();
    while let Some(c) = rest.next() {
        let flags = if rest.peek().is_none() { flag::END_HEADERS } else { 0 };
        put_head(out, c.len(), kind::CONTINUATION, flags, stream);
        out.extend_from_slice(c);
    }
}

/// Append one DATA frame.
pub(crate) fn put_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end: bool) {
    put_head(out, data.len(), kind::DATA, if end { flag::END_STREAM } else { 0 }, stream);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_head(&mut out, payload.len(), kind, flags, stream);
        out.extend_from_slice(payload);
        out
    }

    /// Each frame type as a server sends it, and what the reader makes of it.
    #[test]
    fn frames_read_as_sent() {
        use kind::*;
        let cases: [(Vec<u8>, Frame<'static>); 12] = [
            // DATA ending its stream
            (frame(DATA, flag::END_STREAM, 1, b"hi"), Frame::Data { stream: 1, data: b"hi", end: true, flow: 2 }),
            // padded DATA: pad length 3, the pad counts for flow control
            (
                frame(DATA, flag::PADDED, 3, b"\x03hi\0\0\0"),
                Frame::Data { stream: 3, data: b"hi", end: false, flow: 6 },
            ),
            // HEADERS with padding and priority: both removed
            (
                frame(HEADERS, flag::PADDED | flag::PRIORITY | flag::END_HEADERS, 5, b"\x01\0\0\0\0\x10\x88\0"),
                Frame::Headers { stream: 5, block: b"\x88", end_stream: false, end_headers: true },
            ),
            // CONTINUATION
            (
                frame(CONTINUATION, flag::END_HEADERS, 5, b"\x88"),
                Frame::Continuation { stream: 5, block: b"\x88", end_headers: true },
            ),
            // RST_STREAM REFUSED_STREAM
            (frame(RST_STREAM, 0, 7, &7u32.to_be_bytes()), Frame::Reset { stream: 7, code: 7 }),
            // SETTINGS with one pair
            (frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 1]), Frame::Settings { ack: false, pairs: &[0, 3, 0, 0, 0, 1] }),
            // SETTINGS ACK
            (frame(SETTINGS, flag::ACK, 0, b""), Frame::Settings { ack: true, pairs: b"" }),
            // PING
            (frame(PING, 0, 0, b"12345678"), Frame::Ping { ack: false, data: *b"12345678" }),
            // GOAWAY with debug data; the reserved bit of the last stream cleared
            (frame(GOAWAY, 0, 0, b"\x80\0\0\x09\0\0\0\0debug"), Frame::GoAway { last_stream: 9, code: 0 }),
            // WINDOW_UPDATE of a stream
            (frame(WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()), Frame::WindowUpdate { stream: 1, increment: 100 }),
            // PRIORITY: ignored
            (frame(PRIORITY, 0, 1, &[0; 5]), Frame::Ignored),
            // an unknown type: ignored (§4.1)
            (frame(0xfa, 0xff, 1, b"whatever"), Frame::Ignored),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            let got = read(bytes, DEFAULT_MAX_FRAME).unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(got, Some((*want, bytes.len())), "case {i}");
            // any prefix: not there yet
            assert_eq!(read(&bytes[..bytes.len() - 1], DEFAULT_MAX_FRAME), Ok(None), "case {i}");
        }
    }

    /// Frames of a bad shape: the error code the connection ends with.
    #[test]
    fn bad_frames_are_errors_with_their_code() {
        use code::*;
        use kind::*;
        let mut big = Vec::new();
        put_head(&mut big, DEFAULT_MAX_FRAME + 1, DATA, 0, 1);
        let cases: [(Vec<u8>, u32); 10] = [
            // longer than our SETTINGS_MAX_FRAME_SIZE (only the head needed)
            (big, FRAME_SIZE_ERROR),
            // DATA on stream 0
            (frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
            // padding longer than the payload
            (frame(DATA, flag::PADDED, 1, b"\x05ab"), PROTOCOL_ERROR),
            // padded with no pad length byte
            (frame(HEADERS, flag::PADDED, 1, b""), FRAME_SIZE_ERROR),
            // HEADERS with priority flag but 3 bytes
            (frame(HEADERS, flag::PRIORITY, 1, b"abc"), FRAME_SIZE_ERROR),
            // SETTINGS of 5 bytes
            (frame(SETTINGS, 0, 0, b"12345"), FRAME_SIZE_ERROR),
            // SETTINGS ACK with a payload
            (frame(SETTINGS, flag::ACK, 0, &[0; 6]), FRAME_SIZE_ERROR),
            // PING on a stream
            (frame(PING, 0, 1, b"12345678"), PROTOCOL_ERROR),
            // GOAWAY too short
            (frame(GOAWAY, 0, 0, b"1234"), FRAME_SIZE_ERROR),
            // RST_STREAM of 3 bytes
            (frame(RST_STREAM, 0, 1, b"123"), FRAME_SIZE_ERROR),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            match read(bytes, DEFAULT_MAX_FRAME) {
                Err(e) => assert_eq!(e.code, *want, "case {i}: {e}"),
                other => panic!("case {i}: {other:?}"),
            }
        }
    }

    /// A block larger than the server's frame size goes out as HEADERS and
    /// CONTINUATIONs, END_HEADERS on the last, and reads back whole.
    #[test]
    fn long_blocks_are_split_into_continuations() {
        let block: Vec<u8> = (0..25u8).collect();
        let mut out = Vec::new();
        put_headers(&mut out, 3, &block, true, 10);
        let mut got = Vec::new();
        let mut at = 0;
        let mut kinds = Vec::new();
        while let Some((f, n)) = read(&out[at..], DEFAULT_MAX_FRAME).expect("valid") {
            at += n;
            match f {
                Frame::Headers { block, end_stream, end_headers, .. } => {
                    kinds.push(("HEADERS", end_stream, end_headers));
                    got.extend_from_slice(block);
                }
                Frame::Continuation { block, end_headers, .. } => {
                    kinds.push(("CONTINUATION", false, end_headers));
                    got.extend_from_slice(block);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, block);
        assert_eq!(kinds, [("HEADERS", true, false), ("CONTINUATION", false, false), ("CONTINUATION", false, true)]);
    }

    proptest::proptest! {
        /// Arbitrary bytes: frames or an error, never a panic, and never a
        /// frame claimed longer than the bytes.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000)) {
            let mut at = 0;
            while let Ok(Some((_, n))) = read(&bytes[at..], DEFAULT_MAX_FRAME) {
                proptest::prop_assert!(n >= HEAD_LEN && at + n <= bytes.len());
                at += n;
            }
        }
    }
}
