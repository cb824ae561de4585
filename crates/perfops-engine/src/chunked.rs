//! A streaming decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1).
//!
//! It is fed whatever bytes the socket gave, in any split, and says how many it
//! consumed and whether the body (with its trailers) is complete. It never
//! buffers: a load generator only needs to know where the body ends.

/// The body framing is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size; `digits` seen so far.
    Size { digits: u8 },
    /// After the size: an extension (`;name=value`) or white space up to CR LF.
    SizeRest,
    /// Expecting the LF after the CR of a size line.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// Expecting CR (or a bare LF) after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// At the start of a trailer line (an empty line ends the body).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    /// Expecting the LF of the final empty line.
    EndLf,
    /// The body is complete.
    Done,
}

/// Decoder state between socket reads.
#[derive(Debug, Clone)]
pub(crate) struct ChunkedDecoder {
    state: State,
    /// Chunk size being parsed, then bytes of chunk data left.
    remaining: u64,
}

impl ChunkedDecoder {
    pub(crate) fn new() -> ChunkedDecoder {
        ChunkedDecoder { state: State::Size { digits: 0 }, remaining: 0 }
    }

    /// Consume from `input`; returns (bytes consumed, body complete). When the
    /// body is not complete, all of `input` was consumed.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), ChunkError> {
        self.feed_inner(input, None)
    }

    /// Like [`ChunkedDecoder::feed`], appending the decoded body to `body`.
    pub(crate) fn feed_into(&mut self, input: &[u8], body: &mut Vec<u8>) -> Result<(usize, bool), ChunkError> {
        self.feed_inner(input, Some(body))
    }

    fn feed_inner(&mut self, input: &[u8], mut body: Option<&mut Vec<u8>>) -> Result<(usize, bool), ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size { digits } => match (b as char).to_digit(16) {
                    Some(d) => {
                        // 16 hex digits overflow u64: no sane chunk is that large.
                        if digits >= 15 {
                            return Err(ChunkError);
                        }
                        self.remaining = self.remaining * 16 + u64::from(d);
                        self.state = State::Size { digits: digits + 1 };
                    }
                    None if digits == 0 => return Err(ChunkError),
                    None => {
                        self.state = State::SizeRest;
                        continue; // re-examine this byte as the rest of the line
                    }
                },
                State::SizeRest => match b {
                    b'\r' => self.state = State::SizeLf,
                    b'\n' => self.end_size_line(),
                    _ => {} // chunk extensions are ignored
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ChunkError);
                    }
                    self.end_size_line();
                }
                State::Data => {
                    let take = (self.remaining.min((input.len() - i) as u64)) as usize;
                    if let Some(b) = body.as_deref_mut() {
                        b.extend_from_slice(&input[i..i + take]);
                    }
                    self.remaining -= take as u64;
                    i += take;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    continue;
                }
                State::DataCr => match b {
                    b'\r' => self.state = State::DataLf,
                    b'\n' => self.state = State::Size { digits: 0 },
                    _ => return Err(ChunkError),
                },
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkError);
                    }
                    self.state = State::Size { digits: 0 };
                }
                State::TrailerStart => match b {
                    b'\r' => self.state = State::EndLf,
                    b'\n' => {
                        self.state = State::Done;
                        return Ok((i + 1, true));
                    }
                    _ => self.state = State::Trailer,
                },
                State::Trailer => {
                    if b == b'\n' {
                        self.state = State::TrailerStart;
                    }
                }
                State::EndLf => {
                    if b != b'\n' {
                        return Err(ChunkError);
                    }
                    self.state = State::Done;
                    return Ok((i + 1, true));
                }
                State::Done => return Ok((i, true)),
            }
            i += 1;
        }
        Ok((i, self.state == State::Done))
    }

    fn end_size_line(&mut self) {
        self.state = if self.remaining == 0 { State::TrailerStart } else { State::Data };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` split at every position into two reads; every split must
    /// give the same answer as one read.
    fn decode_all_splits(input: &[u8]) -> Result<usize, ChunkError> {
        let mut whole = ChunkedDecoder::new();
        let (n, done) = whole.feed(input)?;
        assert!(done, "incomplete: {:?}", String::from_utf8_lossy(input));
        for cut in 0..input.len() {
            let mut d = ChunkedDecoder::new();
            let (a, done_a) = d.feed(&input[..cut])?;
            assert_eq!(a, cut);
            assert!(!done_a || cut >= n);
            if !done_a {
                let (b, done_b) = d.feed(&input[cut..])?;
                assert!(done_b);
                assert_eq!(cut + b, n, "split at {cut}");
            }
        }
        Ok(n)
    }

    #[test]
    fn well_formed_bodies() {
        let cases: [(&[u8], &str); 5] = [
            (b"5\r\nhello\r\n0\r\n\r\n", "one chunk"),
            (b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n", "extension ignored"),
            (b"A\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n\r\n", "hex size and a trailer"),
            (b"0\r\n\r\n", "empty body"),
            (b"3\nabc\n0\n\n", "bare LF, as some servers send"),
        ];
        for (input, why) in cases {
            assert_eq!(decode_all_splits(input), Ok(input.len()), "{why}");
        }
    }

    #[test]
    fn decodes_the_body_when_asked() {
        let mut body = Vec::new();
        let mut d = ChunkedDecoder::new();
        assert_eq!(d.feed_into(b"5\r\nhello\r\n6;x=y\r\n world\r\n", &mut body), Ok((25, false)));
        assert_eq!(d.feed_into(b"0\r\n\r\n", &mut body), Ok((5, true)));
        assert_eq!(body, b"hello world");
    }

    #[test]
    fn stops_at_the_end_of_the_body() {
        let mut d = ChunkedDecoder::new();
        let input = b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK";
        assert_eq!(d.feed(input), Ok((12, true)), "bytes after the body belong to the next response");
    }

    #[test]
    fn malformed_bodies() {
        let cases: [&[u8]; 4] = [
            b"zz\r\n",                // size not hex
            b"2\r\nokX\r\n",          // data longer than its size
            b"2\rX",                  // CR not followed by LF
            b"fffffffffffffffff\r\n", // 17 hex digits: overflow
        ];
        for input in cases {
            assert_eq!(ChunkedDecoder::new().feed(input), Err(ChunkError), "{:?}", String::from_utf8_lossy(input));
        }
    }
}
