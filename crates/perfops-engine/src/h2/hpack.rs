//! HPACK (RFC 7541): the decoder of a server's header blocks, with its
//! dynamic table, and blocks encoded without any table (`encode_field`);
//! our requests' blocks, indexed per connection, are `encoder.rs`'s.
//!
//! Why our own: the `h2` crate decoded each of nginx's responses into a
//! `HeaderMap` (~9,000 instructions and 8 allocations per request of
//! ~27,900 under callgrind, bench/README.md "Where an HTTP/2 request's CPU
//! goes"). Here a block is decoded into name/value slices handed to a
//! visitor, which keeps what it needs (`:status`, `grpc-status`, the fields
//! a step saves or checks) and nothing else: no allocation per field. A
//! dynamic-table entry keeps its own buffer, reused when it is evicted, so
//! a server that indexes every field (nginx does, with incremental indexing
//! of `date`, `server`, `content-type`, `content-length`) costs copies into
//! buffers that already exist.
//!
//! `encode_field` never indexes: static-table indices and literals
//! *without indexing*, so its bytes do not depend on any table (the
//! reflection client's few calls, and tests).
//!
//! Every block is untrusted: integers that overflow, strings past the end,
//! indices past the table, a size update above our limit or after a field,
//! bad Huffman, and a decoded list above [`MAX_LIST`] (an HPACK bomb: one
//! byte that names a 4 KiB entry, many times) are errors, never panics.

use std::collections::VecDeque;

use super::huffman;

/// Our SETTINGS_HEADER_TABLE_SIZE: the default, and what a server's size
/// update may not exceed.
pub(crate) const TABLE_SIZE: usize = 4096;

/// The most a header list may decode to (RFC 7541's size: name, value and
/// 32 per field), bytes; advertised as SETTINGS_MAX_HEADER_LIST_SIZE.
pub(crate) const MAX_LIST: usize = 1 << 20;

/// Why a header block could not be decoded (a COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HpackError {
    /// The block ended inside a representation.
    #[error("truncated header block")]
    Truncated,
    /// An integer above what any table or string could need.
    #[error("integer overflow")]
    Overflow,
    /// An index of no entry.
    #[error("index {0} out of the table")]
    Index(usize),
    /// A dynamic table size update above our SETTINGS, or after a field.
    #[error("bad table size update")]
    SizeUpdate,
    /// A Huffman string that is not one.
    #[error("bad Huffman string")]
    Huffman,
    /// The list decodes to more than [`MAX_LIST`].
    #[error("header list too large")]
    TooLarge,
}

/// The static table (RFC 7541 Appendix A), index 1 first.
pub(crate) const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// A dynamic-table entry: name then value in one buffer (the decoder's
/// buffers are reused on eviction). The encoder's table holds the same.
#[derive(Debug, Default)]
pub(super) struct Entry {
    pub(super) buf: Vec<u8>,
    pub(super) name_len: usize,
}

impl Entry {
    pub(super) fn name(&self) -> &[u8] {
        &self.buf[..self.name_len]
    }
    pub(super) fn value(&self) -> &[u8] {
        &self.buf[self.name_len..]
    }
    /// RFC 7541 §4.1.
    pub(super) fn size(&self) -> usize {
        self.buf.len() + 32
    }
}

/// Where a field's name or value is while it is decoded.
#[derive(Clone, Copy)]
enum Src {
    /// In the static table (index from 0), name or value.
    Static(usize, bool),
    /// In the dynamic table (index from 0, newest first), name or value.
    Dynamic(usize, bool),
    /// In the block, raw: `start..end`.
    Raw(usize, usize),
    /// Decoded from Huffman into scratch buffer 0 (name) or 1 (value).
    Scratch(usize),
}

/// A server's header blocks, decoded in order on one connection.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Newest first.
    table: VecDeque<Entry>,
    size: usize,
    /// The size the server chose (a size update), at most `limit`.
    max_size: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE.
    limit: usize,
    /// Evicted entries' buffers, for the next insertions.
    spare: Vec<Vec<u8>>,
    scratch: [Vec<u8>; 2],
    /// Huffman strings decoded lately: (as sent, decoded), the oldest
    /// replaced first. A server sends the same values again and again (nginx:
    /// `server`, `content-type`, `content-length`, `date` within its
    /// second); a hit costs a compare and a copy instead of the decoding,
    /// which was ~1,600 of ~10,800 instructions per request (callgrind).
    memo: [(Vec<u8>, Vec<u8>); MEMO],
    /// The memo slot to replace next.
    memo_next: usize,
}

/// Memo slots.
const MEMO: usize = 8;

/// Strings longer than this (as sent) are not memoized.
const MEMO_MAX: usize = 64;

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new(TABLE_SIZE)
    }
}

impl Decoder {
    /// A decoder whose table may grow to `limit` bytes.
    pub(crate) fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
            spare: Vec::new(),
            scratch: [Vec::new(), Vec::new()],
            memo: Default::default(),
            memo_next: 0,
        }
    }

    /// The dynamic table's size now, bytes (RFC 7541 §4.1).
    #[cfg(test)]
    pub(crate) fn table_size(&self) -> usize {
        self.size
    }

    /// The dynamic table's entries, newest first.
    #[cfg(test)]
    fn entries(&self) -> Vec<(String, String)> {
        self.table
            .iter()
            .map(|e| (String::from_utf8_lossy(e.name()).into_owned(), String::from_utf8_lossy(e.value()).into_owned()))
            .collect()
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(e) = self.table.pop_back() else { break };
            self.size -= e.size();
            if self.spare.len() < 16 {
                self.spare.push(e.buf);
            }
        }
    }

    /// Decode `block`, handing each field to `visit` (name, value).
    pub(crate) fn decode(&mut self, block: &[u8], visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut list = 0usize;
        let mut fields = false;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = int(block, &mut pos, 7)?;
                let (name, value) = self.field(index)?;
                list += name.len() + value.len() + 32;
                if list > MAX_LIST {
                    return Err(HpackError::TooLarge);
                }
                visit(name, value);
                fields = true;
                continue;
            }
            if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the first field.
                let size = int(block, &mut pos, 5)?;
                if fields || size > self.limit {
                    return Err(HpackError::SizeUpdate);
                }
                self.max_size = size;
                self.evict_to(size);
                continue;
            }
            // Literal (§6.2): with incremental indexing (01), without (0000) or never (0001).
            let (prefix, index_it) = if b & 0xc0 == 0x40 { (6, true) } else { (4, false) };
            let index = int(block, &mut pos, prefix)?;
            let name = if index == 0 { self.string(block, &mut pos, 0)? } else { self.name_src(index)? };
            let value = self.string(block, &mut pos, 1)?;
            fields = true;
            let (n, v) = (self.resolve(block, name), self.resolve(block, value));
            list += n.len() + v.len() + 32;
            if list > MAX_LIST {
                return Err(HpackError::TooLarge);
            }
            visit(n, v);
            if index_it {
                self.insert(block, name, value);
            }
        }
        Ok(())
    }

    /// Entry `index` (from 1: static, then dynamic).
    fn field(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::Index(0)),
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self.table.get(index - 62).map(|e| (e.name(), e.value())).ok_or(HpackError::Index(index)),
        }
    }

    fn name_src(&self, index: usize) -> Result<Src, HpackError> {
        match index {
            1..=61 => Ok(Src::Static(index - 1, false)),
            _ if index - 62 < self.table.len() => Ok(Src::Dynamic(index - 62, false)),
            _ => Err(HpackError::Index(index)),
        }
    }

    /// A string literal (§5.2) at `pos`: raw in place, or Huffman-decoded
    /// into scratch buffer `which`.
    fn string(&mut self, block: &[u8], pos: &mut usize, which: usize) -> Result<Src, HpackError> {
        let huff = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let len = int(block, pos, 7)?;
        let start = *pos;
        let end = start.checked_add(len).filter(|&e| e <= block.len()).ok_or(HpackError::Truncated)?;
        *pos = end;
        if !huff {
            return Ok(Src::Raw(start, end));
        }
        let sent = &block[start..end];
        let out = &mut self.scratch[which];
        out.clear();
        if sent.is_empty() || sent.len() > MEMO_MAX {
            huffman::decode(sent, out).map_err(|_| HpackError::Huffman)?;
            return Ok(Src::Scratch(which));
        }
        // Searched whole: a slot picked by a hash thrashed when two of
        // nginx's four values fell in it.
        if let Some((_, decoded)) = self.memo.iter().find(|(key, _)| key.as_slice() == sent) {
            out.extend_from_slice(decoded);
        } else {
            huffman::decode(sent, out).map_err(|_| HpackError::Huffman)?;
            let (key, decoded) = &mut self.memo[self.memo_next];
            self.memo_next = (self.memo_next + 1) % MEMO;
            key.clear();
            key.extend_from_slice(sent);
            decoded.clear();
            decoded.extend_from_slice(out);
        }
        Ok(Src::Scratch(which))
    }

    fn resolve<'a>(&'a self, block: &'a [u8], src: Src) -> &'a [u8] {
        match src {
            Src::Static(i, value) => {
                let (n, v) = STATIC[i];
                if value { v.as_bytes() } else { n.as_bytes() }
            }
            Src::Dynamic(i, value) => {
                let e = &self.table[i];
                if value { e.value() } else { e.name() }
            }
            Src::Raw(s, e) => &block[s..e],
            Src::Scratch(w) => &self.scratch[w],
        }
    }

    /// Add a field to the table (§4.4): evict first; an entry larger than
    /// the table empties it and is not added.
    fn insert(&mut self, block: &[u8], name: Src, value: Src) {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        // Copied before evicting: the name may be an entry about to go.
        let (n, v) = (self.resolve(block, name), self.resolve(block, value));
        let size = n.len() + v.len() + 32;
        if size > self.max_size {
            self.spare.push(buf);
            self.evict_to(0);
            return;
        }
        buf.extend_from_slice(n);
        buf.extend_from_slice(v);
        let name_len = n.len();
        self.evict_to(self.max_size - size);
        self.table.push_front(Entry { buf, name_len });
        self.size += size;
    }
}

/// An HPACK integer (§5.1) with an `n`-bit prefix at `pos`; at most what a
/// `u32` holds (no table, string or size needs more).
fn int(block: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    let mask = (1u32 << n) - 1;
    let first = u32::from(*block.get(*pos).ok_or(HpackError::Truncated)?) & mask;
    *pos += 1;
    if first < mask {
        return Ok(first as usize);
    }
    let mut value = u64::from(mask);
    let mut shift = 0;
    loop {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(HpackError::Overflow);
        }
        if b & 0x80 == 0 {
            return Ok(value as usize);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::Overflow);
        }
    }
}

/// Append an HPACK integer with an `n`-bit prefix, `flags` in the bits above it.
pub(super) fn put_int(out: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Append one field to a request's block without touching any table: the
/// static entry's index if name and value are one, else a literal without
/// indexing (§6.2.2), its name by static index when there is one. Strings
/// go raw (no Huffman): a server reads them in place.
pub(crate) fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match static_index(name, value) {
        Ok(index) => put_int(out, 0x80, 7, index),
        Err(name_index) => put_literal(out, false, name_index, name, value),
    }
}

/// The static table's index (from 1) of the entry that is `name` and
/// `value` (`Ok`), else of the first entry named `name` (`Err`; 0: none).
pub(super) fn static_index(name: &[u8], value: &[u8]) -> Result<usize, usize> {
    let mut name_index = 0;
    for (i, (n, v)) in STATIC.iter().enumerate() {
        if n.as_bytes() == name {
            if v.as_bytes() == value {
                return Ok(i + 1);
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    Err(name_index)
}

/// Append a literal field (§6.2.1 with incremental indexing if `indexed`,
/// else §6.2.2 without), its name by `name_index` or, at 0, raw; strings
/// raw (no Huffman).
pub(super) fn put_literal(out: &mut Vec<u8>, indexed: bool, name_index: usize, name: &[u8], value: &[u8]) {
    if indexed {
        put_int(out, 0x40, 6, name_index);
    } else {
        put_int(out, 0x00, 4, name_index);
    }
    if name_index == 0 {
        put_int(out, 0x00, 7, name.len());
        out.extend_from_slice(name);
    }
    put_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Bytes written as hex, spaces ignored (the RFC's examples).
    pub(in crate::h2) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
    }

    /// Every field of `block`, decoded by `d`, as text.
    pub(in crate::h2) fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut got = Vec::new();
        d.decode(block, &mut |n, v| {
            got.push((String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned()))
        })?;
        Ok(got)
    }

    type Block = (&'static str, &'static [(&'static str, &'static str)], usize);

    /// RFC 7541 Appendix C.3 (requests, no Huffman) and C.4 (the same with
    /// Huffman): three blocks on one connection, the dynamic table growing.
    #[test]
    fn rfc_request_examples_decode() {
        let c3: [Block; 3] = [
            // C.3.1: indexed fields and a literal with incremental indexing
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                &[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")],
                57,
            ),
            // C.3.2: the authority from the dynamic table, a new field indexed
            (
                "8286 84be 5808 6e6f 2d63 6163 6865",
                &[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ],
                110,
            ),
            // C.3.3: a literal name, indexed
            (
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                &[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ],
                164,
            ),
        ];
        let c4: [Block; 3] = [
            // C.4.1: the authority Huffman-coded
            (
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                &[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")],
                57,
            ),
            // C.4.2
            (
                "8286 84be 5886 a8eb 1064 9cbf",
                &[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ],
                110,
            ),
            // C.4.3: Huffman name and value
            (
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
                &[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ],
                164,
            ),
        ];
        for (set, blocks) in [("C.3", c3), ("C.4", c4)] {
            let mut d = Decoder::default();
            for (i, (block, want, size)) in blocks.iter().enumerate() {
                let got = decode_all(&mut d, &hex(block)).unwrap_or_else(|e| panic!("{set} block {i}: {e}"));
                let want: Vec<(String, String)> = want.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
                assert_eq!(got, want, "{set} block {i}");
                assert_eq!(d.table_size(), *size, "{set} block {i}");
            }
        }
    }

    /// RFC 7541 Appendix C.5 (responses, a 256-byte table: entries evicted)
    /// and C.6 (the same with Huffman).
    #[test]
    fn rfc_response_examples_evict_from_a_small_table() {
        let c5 = [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 \
             3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 \
             7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 \
             6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
        ];
        let c6 = [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad \
             1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 \
             e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ];
        type Fields = &'static [(&'static str, &'static str)];
        // (fields of the block, table after it: entries newest first, size)
        let want: [(Fields, Fields, usize); 3] = [
            // the first response fills the table with its four fields
            (
                &[
                    (":status", "302"),
                    ("cache-control", "private"),
                    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                    ("location", "https://www.example.com"),
                ],
                &[
                    ("location", "https://www.example.com"),
                    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                    ("cache-control", "private"),
                    (":status", "302"),
                ],
                222,
            ),
            // ":status 307" evicts ":status 302"
            (
                &[
                    (":status", "307"),
                    ("cache-control", "private"),
                    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                    ("location", "https://www.example.com"),
                ],
                &[
                    (":status", "307"),
                    ("location", "https://www.example.com"),
                    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                    ("cache-control", "private"),
                ],
                222,
            ),
            // a long set-cookie evicts all but itself and two others
            (
                &[
                    (":status", "200"),
                    ("cache-control", "private"),
                    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                    ("location", "https://www.example.com"),
                    ("content-encoding", "gzip"),
                    ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"),
                ],
                &[
                    ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"),
                    ("content-encoding", "gzip"),
                    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ],
                215,
            ),
        ];
        for (set, blocks) in [("C.5", c5), ("C.6", c6)] {
            let mut d = Decoder::new(256);
            for (i, block) in blocks.iter().enumerate() {
                let (fields, table, size) = want[i];
                let got = decode_all(&mut d, &hex(block)).unwrap_or_else(|e| panic!("{set} block {i}: {e}"));
                let owned = |l: &[(&str, &str)]| -> Vec<(String, String)> {
                    l.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
                };
                assert_eq!(got, owned(fields), "{set} block {i}");
                assert_eq!(d.entries(), owned(table), "{set} block {i}");
                assert_eq!(d.table_size(), size, "{set} block {i}");
            }
        }
    }

    /// Size updates shrink the table; one above our limit, or after a
    /// field, is an error; so is every malformed representation.
    #[test]
    fn size_updates_and_bad_blocks() {
        // (blocks in turn on one decoder, result of the last, table size after)
        let cases: [(&[&str], Result<(), HpackError>, usize); 9] = [
            // a size update to 0 empties the table
            (&["4001 6101 62", "20"], Ok(()), 0),
            // to 4096, our limit: allowed, the entry stays
            (&["4001 6101 62", "3fe1 1f"], Ok(()), 34),
            // to 4097: above our SETTINGS
            (&["3fe2 1f"], Err(HpackError::SizeUpdate), 0),
            // after a field
            (&["8220"], Err(HpackError::SizeUpdate), 0),
            // index 0
            (&["80"], Err(HpackError::Index(0)), 0),
            // an index past the (empty) dynamic table
            (&["be"], Err(HpackError::Index(62)), 0),
            // a string longer than the block
            (&["0003 6162"], Err(HpackError::Truncated), 0),
            // an integer that never ends
            (&["ffff ffff ffff ff"], Err(HpackError::Overflow), 0),
            // bad Huffman (EOS)
            (&["0001 6184 ffff fffc"], Err(HpackError::Huffman), 0),
        ];
        for (i, (blocks, want, size)) in cases.into_iter().enumerate() {
            let mut d = Decoder::default();
            let mut last = Ok(());
            for b in blocks {
                last = d.decode(&hex(b), &mut |_, _| {});
            }
            assert_eq!(last, want, "case {i}");
            if want.is_ok() {
                assert_eq!(d.table_size(), size, "case {i}");
            }
        }
    }

    /// An HPACK bomb: a 4 KiB entry named by one byte, again and again,
    /// stops at MAX_LIST instead of decoding gigabytes.
    #[test]
    fn a_bomb_stops_at_the_list_limit() {
        let mut block = vec![0x40, 0x01, b'x'];
        block.push(0x7f);
        let value_len = 4000usize;
        // length 4000 with a 7-bit prefix: 127 + 3873
        let rest = value_len - 127;
        block.extend_from_slice(&[(rest & 0x7f) as u8 | 0x80, (rest >> 7) as u8]);
        block.extend(std::iter::repeat_n(b'a', value_len));
        block.extend(std::iter::repeat_n(0xbe, 10_000));
        let mut d = Decoder::default();
        let mut seen = 0usize;
        assert_eq!(d.decode(&block, &mut |_, _| seen += 1), Err(HpackError::TooLarge));
        assert!(seen < 300, "{seen} fields visited before the stop");
    }

    /// Huffman values memoized: strings alike as sent (same length, same
    /// first byte) still decode each to its own, in turn and again, names
    /// and values alike, and more strings than memo slots too.
    #[test]
    fn memoized_strings_stay_themselves() {
        let values =
            ["abc", "abd", "abe", "abc", "Mon, 21 Oct 2013 20:13:21 GMT", "abd", "Mon, 21 Oct 2013 20:13:22 GMT"];
        let huff = |s: &str| {
            let mut enc = Vec::new();
            huffman::encode(s.as_bytes(), &mut enc);
            let mut out = Vec::new();
            put_int(&mut out, 0x80, 7, enc.len());
            out.extend_from_slice(&enc);
            out
        };
        let mut d = Decoder::default();
        for round in 0..2 {
            for v in values {
                // a literal without indexing, its name and its value both Huffman
                let block = [&[0x00][..], &huff("x-abd"), &huff(v)].concat();
                assert_eq!(decode_all(&mut d, &block), Ok(vec![("x-abd".to_string(), v.to_string())]), "{round} {v}");
            }
        }
        assert_eq!(huff("abc")[..2], huff("abe")[..2], "alike as sent: same length, same first byte");
    }

    /// What we send decodes to what we meant, touching no table.
    #[test]
    fn our_blocks_decode_back_and_index_nothing() {
        // (name, value, encoded)
        let cases: [(&str, &str, &str); 5] = [
            // a whole static entry: one byte
            (":method", "GET", "82"),
            (":scheme", "https", "87"),
            // a static name, a literal value, not indexed
            (":path", "/orders", "0407 2f6f 7264 6572 73"),
            // a name of no entry
            ("x-a", "b", "0003 782d 6101 62"),
            // a value of 127 bytes takes a two-byte length
            ("user-agent", &"u".repeat(127), ""),
        ];
        for (i, (name, value, encoded)) in cases.into_iter().enumerate() {
            let mut out = Vec::new();
            encode_field(&mut out, name.as_bytes(), value.as_bytes());
            if !encoded.is_empty() {
                assert_eq!(out, hex(encoded), "case {i}");
            }
            let mut d = Decoder::default();
            assert_eq!(decode_all(&mut d, &out), Ok(vec![(name.to_string(), value.to_string())]), "case {i}");
            assert_eq!(d.table_size(), 0, "case {i}");
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes: an error or fields, never a panic, and the
        /// table within its limit.
        #[test]
        fn arbitrary_blocks_never_panic(blocks in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), 1..4)) {
            let mut d = Decoder::default();
            for b in &blocks {
                let mut list = 0usize;
                let _ = d.decode(b, &mut |n, v| list += n.len() + v.len() + 32);
                proptest::prop_assert!(list <= MAX_LIST);
                proptest::prop_assert!(d.size <= d.max_size && d.max_size <= TABLE_SIZE);
            }
        }
    }
}
