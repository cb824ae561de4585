//! HPACK encoding of our requests with a dynamic table (RFC 7541 §2.3):
//! a request's fields ([`Fields`], each marked whether it is the same on
//! every request of its step) and one connection's [`Encoder`], whose table
//! mirrors the server's decoder.
//!
//! Why: without a table, every request of a step carried its authority,
//! path and headers as literals (~36 bytes against nginx for `quick`), and
//! nginx decrypted and parsed them again on every request; h2load's blocks
//! after the first are one-byte references into nginx's table (~5 bytes).
//! Under callgrind nginx spent ~320 more user-space instructions on each of
//! our requests than on h2load's (23,935 vs 23,617), most of it decrypting
//! and parsing those bytes (bench/README.md, "nginx's cost per request").
//!
//! The policy, so that the table never churns: a field marked constant is
//! sent *with incremental indexing* the first time on a connection, if it
//! fits in what is left of the table, and as an indexed field after that; a
//! field that varies (`${seq}`, a saved token) is a literal *without
//! indexing*. Nothing is ever evicted to make room: once the table is full
//! the rest goes as literals. Entries leave the table only when the server
//! shrinks it (SETTINGS_HEADER_TABLE_SIZE): we evict as its decoder will,
//! oldest first, and start the next block with a table size update (§4.2),
//! the smallest size of the interval first if it grew again since.
//!
//! [`Encoder::generation`] changes whenever the table does (an insertion, an
//! eviction, an update owed), so a connection can keep a step's encoded
//! block and send the same bytes while the generation holds, if encoding it
//! changed nothing (a block that inserted would insert again): from a
//! step's second request on a connection, encoding it is a memcpy
//! ([`Blocks`], one per connection).

use std::collections::VecDeque;

use super::hpack::{Entry, STATIC, TABLE_SIZE, put_int, put_literal, static_index};

/// A request's header fields in order: names and values in one buffer,
/// each field marked whether it may be indexed (its value is the same on
/// every request of the step).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    bytes: Vec<u8>,
    /// Each field's name end, value end (in `bytes`, the field starting
    /// where the previous one ended) and whether it may be indexed.
    ends: Vec<(u32, u32, bool)>,
}

impl Fields {
    /// Append a field.
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8], index: bool) {
        self.bytes.extend_from_slice(name);
        let name_end = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.ends.push((name_end, self.bytes.len() as u32, index));
    }

    /// The fields in order: (name, value, may be indexed).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8], bool)> {
        let mut start = 0usize;
        self.ends.iter().map(move |&(n, v, index)| {
            let (n, v) = (n as usize, v as usize);
            let field = (&self.bytes[start..n], &self.bytes[n..v], index);
            start = v;
            field
        })
    }
}

/// One connection's HPACK encoder: its dynamic table, as the server's
/// decoder holds it after every block we sent.
#[derive(Debug)]
pub(crate) struct Encoder {
    /// Newest first, as the decoder indexes them (62 is the newest).
    table: VecDeque<Entry>,
    size: usize,
    /// The table's maximum size: the server's SETTINGS_HEADER_TABLE_SIZE,
    /// at most [`TABLE_SIZE`] (4096, the default both sides start from).
    max_size: usize,
    /// A size update owed at the next block's start: (the smallest maximum
    /// since the last block, the maximum now).
    update: Option<(usize, usize)>,
    generation: u64,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder { table: VecDeque::new(), size: 0, max_size: TABLE_SIZE, update: None, generation: 0 }
    }
}

impl Encoder {
    /// Changes whenever the table or an owed update does: a block encoded at
    /// one generation is the same bytes at that generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The table's size now, bytes (RFC 7541 §4.1).
    #[cfg(test)]
    pub(crate) fn table_size(&self) -> usize {
        self.size
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE: the table may be that large
    /// (at most [`TABLE_SIZE`]); entries above it are evicted now, as the
    /// server's decoder will when it reads the update owed.
    pub(crate) fn set_max_size(&mut self, settings: u32) {
        let max = (settings as usize).min(TABLE_SIZE);
        if max == self.max_size {
            return;
        }
        self.max_size = max;
        while self.size > max {
            let Some(e) = self.table.pop_back() else { break };
            self.size -= e.size();
        }
        let smallest = self.update.map_or(max, |(s, _)| s.min(max));
        self.update = Some((smallest, max));
        self.generation += 1;
    }

    /// Append `fields`' block to `out`, inserting the indexable ones that
    /// are not in the table yet and fit in it.
    pub(crate) fn encode(&mut self, fields: &Fields, out: &mut Vec<u8>) {
        if let Some((smallest, now)) = self.update.take() {
            if smallest < now {
                put_int(out, 0x20, 5, smallest);
            }
            put_int(out, 0x20, 5, now);
            // The next block owes nothing: it differs from this one.
            self.generation += 1;
        }
        for (name, value, index) in fields.iter() {
            self.field(out, name, value, index);
        }
    }

    fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8], index: bool) {
        let mut name_index = match static_index(name, value) {
            Ok(i) => {
                put_int(out, 0x80, 7, i);
                return;
            }
            Err(name_index) => name_index,
        };
        for (i, e) in self.table.iter().enumerate() {
            if e.name() == name {
                if e.value() == value {
                    put_int(out, 0x80, 7, STATIC.len() + 1 + i);
                    return;
                }
                if name_index == 0 {
                    name_index = STATIC.len() + 1 + i;
                }
            }
        }
        let size = name.len() + value.len() + 32;
        // Inserted only where it fits without evicting: the table never churns.
        let insert = index && self.size + size <= self.max_size;
        put_literal(out, insert, name_index, name, value);
        if insert {
            let mut buf = Vec::with_capacity(name.len() + value.len());
            buf.extend_from_slice(name);
            buf.extend_from_slice(value);
            self.table.push_front(Entry { buf, name_len: name.len() });
            self.size += size;
            self.generation += 1;
        }
    }
}

/// Literal steps' blocks kept per connection, at most.
const KEPT: usize = 16;

/// A request's header block, as `Conn::open` takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Block<'a> {
    /// Encoded already, without any table (`hpack::encode_field`).
    Raw(&'a [u8]),
    /// Fields for the connection's encoder, and the key its block is kept
    /// under (a literal step's: the same fields every time; 0: not kept).
    Fields(&'a Fields, u64),
}

/// A literal step's block, and the encoder's generation at which it may
/// be sent again as it is (`None`: it changed the table, encode it again).
#[derive(Debug)]
struct Kept {
    key: u64,
    generation: Option<u64>,
    bytes: Vec<u8>,
}

/// A connection's request blocks: its [`Encoder`] and the
/// literal steps' blocks as last encoded, sent again while the encoder's
/// generation holds (a memcpy per request, as before the table).
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// The connection's encoder (its SETTINGS change its table size).
    pub(crate) encoder: Encoder,
    kept: Vec<Kept>,
    /// The kept block to replace next when `kept` is full.
    kept_next: usize,
    /// A block encoded for one request only.
    scratch: Vec<u8>,
}

impl Blocks {
    /// `block`'s bytes for the next HEADERS: encoded now, or as kept.
    pub(crate) fn block<'a>(&'a mut self, block: Block<'a>) -> &'a [u8] {
        let Blocks { encoder, kept, kept_next, scratch } = self;
        match block {
            Block::Raw(raw) => {
                // A size update owed goes first, whatever block comes next.
                scratch.clear();
                encoder.encode(&Fields::default(), scratch);
                if scratch.is_empty() {
                    return raw;
                }
                scratch.extend_from_slice(raw);
                scratch
            }
            Block::Fields(fields, 0) => {
                scratch.clear();
                encoder.encode(fields, scratch);
                scratch
            }
            Block::Fields(fields, key) => {
                let generation = encoder.generation();
                let at = match kept.iter().position(|k| k.key == key) {
                    Some(at) if kept[at].generation == Some(generation) => return &kept[at].bytes,
                    Some(at) => at,
                    None if kept.len() < KEPT => {
                        kept.push(Kept { key, generation: None, bytes: Vec::new() });
                        kept.len() - 1
                    }
                    None => {
                        *kept_next = (*kept_next + 1) % KEPT;
                        *kept_next
                    }
                };
                let k = &mut kept[at];
                k.bytes.clear();
                encoder.encode(fields, &mut k.bytes);
                k.key = key;
                // Sent again only if it changed nothing in the table: a
                // block that inserted must not insert twice (its next
                // encoding refers to what it inserted).
                k.generation = (encoder.generation() == generation).then_some(generation);
                &k.bytes
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::hpack::Decoder;
    use super::super::hpack::tests::{decode_all, hex};
    use super::*;

    fn fields(list: &[(&str, &str, bool)]) -> Fields {
        let mut f = Fields::default();
        for (n, v, i) in list {
            f.push(n.as_bytes(), v.as_bytes(), *i);
        }
        f
    }

    fn owned(list: &[(&str, &str, bool)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v, _)| (n.to_string(), v.to_string())).collect()
    }

    /// RFC 7541 Appendix C.3: the three requests, every field indexable,
    /// encode to the RFC's bytes and decode back through our decoder with
    /// the same table sizes.
    #[test]
    fn rfc_requests_encode_to_the_rfc_bytes() {
        type Case = (&'static [(&'static str, &'static str, bool)], &'static str, usize);
        let cases: [Case; 3] = [
            // C.3.1: three static entries, the authority inserted
            (
                &[
                    (":method", "GET", true),
                    (":scheme", "http", true),
                    (":path", "/", true),
                    (":authority", "www.example.com", true),
                ],
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                57,
            ),
            // C.3.2: the authority now a reference (62), cache-control inserted
            (
                &[
                    (":method", "GET", true),
                    (":scheme", "http", true),
                    (":path", "/", true),
                    (":authority", "www.example.com", true),
                    ("cache-control", "no-cache", true),
                ],
                "8286 84be 5808 6e6f 2d63 6163 6865",
                110,
            ),
            // C.3.3: the authority is 63 now; a new name inserted literally
            (
                &[
                    (":method", "GET", true),
                    (":scheme", "https", true),
                    (":path", "/index.html", true),
                    (":authority", "www.example.com", true),
                    ("custom-key", "custom-value", true),
                ],
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                164,
            ),
        ];
        let mut enc = Encoder::default();
        let mut dec = Decoder::default();
        for (i, (list, want, size)) in cases.into_iter().enumerate() {
            let mut out = Vec::new();
            enc.encode(&fields(list), &mut out);
            assert_eq!(out, hex(want), "C.3.{}", i + 1);
            assert_eq!(decode_all(&mut dec, &out), Ok(owned(list)), "C.3.{}", i + 1);
            assert_eq!((enc.table_size(), dec.table_size()), (size, size), "C.3.{}", i + 1);
        }
    }

    /// What is indexed and what is not, and what a block costs the second
    /// time: (the fields, the first block, the same fields' block again).
    #[test]
    fn constant_fields_become_one_byte_references() {
        type Case = (&'static [(&'static str, &'static str, bool)], &'static str, &'static str);
        let cases: [Case; 4] = [
            // a `quick` request: authority and user-agent inserted, then 62/63
            (
                &[
                    (":method", "GET", true),
                    (":scheme", "https", true),
                    (":authority", "a:1", true),
                    (":path", "/", true),
                    ("user-agent", "p", true),
                ],
                "8287 4103 613a 3184 7a01 70",
                "8287 bf84 be",
            ),
            // a varying field is a literal without indexing, both times
            (&[(":path", "/o?1", false)], "0404 2f6f 3f31", "0404 2f6f 3f31"),
            // a varying value under a name already in the table takes the name's index
            (&[("x-id", "a", true), ("x-id", "b", false)], "4004 782d 6964 0161 0f2f 0162", "be0f 2f01 62"),
            // the same field twice in one block: inserted once, then referenced
            (&[("x-a", "b", true), ("x-a", "b", true)], "4003 782d 6101 62be", "bebe"),
        ];
        for (i, (list, first, again)) in cases.into_iter().enumerate() {
            let mut enc = Encoder::default();
            let mut dec = Decoder::default();
            for (round, want) in [first, again].into_iter().enumerate() {
                let mut out = Vec::new();
                enc.encode(&fields(list), &mut out);
                assert_eq!(out, hex(want), "case {i} round {round}");
                assert_eq!(decode_all(&mut dec, &out), Ok(owned(list)), "case {i} round {round}");
                assert_eq!(enc.table_size(), dec.table_size(), "case {i} round {round}");
            }
        }
    }

    /// A server's table of 0 or a few bytes: the update goes first, nothing
    /// that does not fit is inserted, and a shrink evicts as the decoder
    /// does. (SETTINGS sizes in turn, then blocks of the same fields:
    /// each block's expected bytes.)
    #[test]
    fn small_tables_and_shrinks_stay_in_step_with_the_decoder() {
        let list: &[(&str, &str, bool)] = &[(":authority", "a:1", true), ("x-a", "b", true)];
        // 45 for the authority (10 + 3 + 32), 36 for x-a
        type Case = (&'static [u32], &'static [&'static str]);
        let cases: [Case; 5] = [
            // HEADER_TABLE_SIZE 0: an update to 0, then literals only, forever
            (&[0], &["2001 0361 3a31 0003 782d 6101 62", "0103 613a 3100 0378 2d61 0162"]),
            // room for the authority only: x-a stays literal
            (&[50], &["3f13 4103 613a 3100 0378 2d61 0162", "be00 0378 2d61 0162"]),
            // larger than ours: no update, 4096 is used
            (&[65_536], &["4103 613a 3140 0378 2d61 0162", "bfbe"]),
            // shrunk to 40 and back to 100 between blocks: 40 then 100 said
            (&[40, 100], &["3f09 3f45 4103 613a 3140 0378 2d61 0162", "bfbe"]),
            // unchanged: nothing said
            (&[4096], &["4103 613a 3140 0378 2d61 0162", "bfbe"]),
        ];
        for (i, (sizes, blocks)) in cases.into_iter().enumerate() {
            let mut enc = Encoder::default();
            let mut dec = Decoder::default();
            for s in sizes {
                enc.set_max_size(*s);
            }
            for (b, want) in blocks.iter().enumerate() {
                let mut out = Vec::new();
                enc.encode(&fields(list), &mut out);
                assert_eq!(out, hex(want), "case {i} block {b}");
                assert_eq!(decode_all(&mut dec, &out), Ok(owned(list)), "case {i} block {b}");
                assert_eq!(enc.table_size(), dec.table_size(), "case {i} block {b}");
            }
        }
    }

    /// Entries evicted by a shrink after they were used: the next block
    /// says the new size and no longer refers to them; the generation moves
    /// with every change and holds while nothing changes.
    #[test]
    fn a_shrink_after_use_evicts_the_oldest_and_moves_the_generation() {
        let list: &[(&str, &str, bool)] = &[(":authority", "a:1", true), ("x-a", "b", true)];
        let mut enc = Encoder::default();
        let mut dec = Decoder::default();
        let mut out = Vec::new();
        enc.encode(&fields(list), &mut out);
        decode_all(&mut dec, &out).expect("first");
        let g = enc.generation();
        out.clear();
        enc.encode(&fields(list), &mut out);
        assert_eq!(out, hex("bfbe"));
        assert_eq!(enc.generation(), g, "nothing inserted: the same bytes next time");
        decode_all(&mut dec, &out).expect("second");
        // 40: the authority (45, the oldest) goes, x-a (36) stays
        enc.set_max_size(40);
        assert_ne!(enc.generation(), g);
        out.clear();
        enc.encode(&fields(list), &mut out);
        assert_eq!(out, hex("3f09 0103 613a 31be"), "update, authority literal (no room), x-a still 62");
        assert_eq!(decode_all(&mut dec, &out), Ok(owned(list)));
        assert_eq!((enc.table_size(), dec.table_size()), (36, 36));
    }
}
