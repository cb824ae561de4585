//! HPACK's Huffman code (RFC 7541 Appendix B): decoding the strings a
//! server sends, four bits at a time, and encoding (for tests and a
//! server's view; our own requests send their strings raw).
//!
//! The decoder walks a table of 256 states x 16 nibbles built once from the
//! code table (a state is an inner node of the code's tree): one lookup per
//! four bits, no branch per bit. nginx Huffman-codes its `date` and
//! `server` values in every response; a 29-byte date is ~44 lookups.
//! Untrusted input: a code that reaches EOS, or padding longer than 7 bits or
//! not all ones, is an error ([`Invalid`]); the output is at most 8/5 of the
//! input (the shortest code has 5 bits).

use std::sync::OnceLock;

/// A Huffman string that is not one (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid;

/// (code, bits) of each byte, RFC 7541 Appendix B; EOS is 0x3fffffff, 30 bits.
#[rustfmt::skip]
const CODES: [(u32, u8); 256] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28), (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28), (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12), (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6), (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8), (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7), (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7), (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20), (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23), (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24), (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21), (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27), (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27), (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21), (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27), (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
];

const EOS: (u32, u8) = (0x3fff_ffff, 30);

/// One step: the state after four bits, and what they did.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

/// A byte was completed in these four bits (`sym`).
const EMIT: u8 = 1;
/// The string may end here: at the root, or in up to 7 bits of ones.
const ACCEPT: u8 = 2;
/// EOS, or a code that does not exist.
const FAIL: u8 = 4;

struct Table {
    steps: Vec<[Step; 16]>,
}

/// The tree: inner nodes with children, a child either a node (>= 0) or a
/// leaf `-(symbol + 1)` (EOS is symbol 256).
fn tree() -> Vec<[i32; 2]> {
    let mut nodes: Vec<[i32; 2]> = vec![[0, 0]];
    let all = CODES.iter().copied().chain(std::iter::once(EOS)).enumerate();
    for (sym, (code, bits)) in all {
        let mut node = 0usize;
        for i in (0..bits).rev() {
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                nodes[node][bit] = -(sym as i32 + 1);
            } else {
                if nodes[node][bit] == 0 {
                    nodes.push([0, 0]);
                    nodes[node][bit] = (nodes.len() - 1) as i32;
                }
                node = nodes[node][bit] as usize;
            }
        }
    }
    nodes
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let nodes = tree();
        // Nodes reached from the root by 1 to 7 one-bits: a string may end there.
        let mut padding = vec![false; nodes.len()];
        let mut n = 0usize;
        padding[0] = true;
        for _ in 0..7 {
            n = nodes[n][1] as usize;
            padding[n] = true;
        }
        let steps = (0..nodes.len())
            .map(|state| {
                let mut row = [Step::default(); 16];
                for (nibble, step) in row.iter_mut().enumerate() {
                    let mut node = state;
                    for i in (0..4).rev() {
                        let child = nodes[node][(nibble >> i) & 1];
                        if child < 0 {
                            let sym = -child - 1;
                            if sym == 256 {
                                step.flags = FAIL;
                                break;
                            }
                            step.sym = sym as u8;
                            step.flags |= EMIT;
                            node = 0;
                        } else if child == 0 {
                            step.flags = FAIL;
                            break;
                        } else {
                            node = child as usize;
                        }
                    }
                    if step.flags & FAIL == 0 {
                        step.next = node as u8;
                        if padding[node] {
                            step.flags |= ACCEPT;
                        }
                    }
                }
                row
            })
            .collect();
        Table { steps }
    })
}

/// Append the decoding of `src` to `out`.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), Invalid> {
    let steps = &table().steps;
    out.reserve(src.len() * 8 / 5 + 1);
    let mut state = 0usize;
    let mut accept = true;
    for &b in src {
        for nibble in [b >> 4, b & 0xf] {
            let step = steps[state][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err(Invalid);
            }
            if step.flags & EMIT != 0 {
                out.push(step.sym);
            }
            state = usize::from(step.next);
            accept = step.flags & ACCEPT != 0;
        }
    }
    if accept { Ok(()) } else { Err(Invalid) }
}

/// Append the encoding of `src` to `out`, padded with ones.
#[cfg(test)]
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) | (0xff >> bits)) as u8);
    }
}

/// Length of the encoding of `src`, bytes.
#[cfg(test)]
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| usize::from(CODES[usize::from(b)].1)).sum();
    bits.div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings of RFC 7541 Appendix C.4 and C.6, and the edges of the code.
    #[test]
    fn strings_decode_and_encode_as_the_rfc_says() {
        let cases: [(&str, &[u8]); 6] = [
            // C.4.1: a host name
            ("www.example.com", &[0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff]),
            // C.4.2: a short value, padding of 4 bits
            ("no-cache", &[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]),
            // C.4.3: a custom name and value
            ("custom-key", &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f]),
            // C.6.1: a status
            ("302", &[0x64, 0x02]),
            // C.6.1: a date, as nginx sends one per response
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                &[
                    0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04, 0x0b, 0x81, 0x66,
                    0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff,
                ],
            ),
            // the empty string
            ("", &[]),
        ];
        for (i, (text, coded)) in cases.into_iter().enumerate() {
            let mut out = Vec::new();
            decode(coded, &mut out).unwrap_or_else(|_| panic!("case {i}"));
            assert_eq!(out, text.as_bytes(), "case {i}");
            let mut enc = Vec::new();
            encode(text.as_bytes(), &mut enc);
            assert_eq!(enc, coded, "case {i}");
            assert_eq!(encoded_len(text.as_bytes()), coded.len(), "case {i}");
        }
    }

    /// Every byte value survives a round trip (the 28- and 30-bit codes too).
    #[test]
    fn every_octet_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut out = Vec::new();
        decode(&enc, &mut out).expect("round trip");
        assert_eq!(out, all);
    }

    /// What RFC 7541 §5.2 forbids is an error, not garbage.
    #[test]
    fn bad_strings_are_errors() {
        let cases: [&[u8]; 4] = [
            // EOS itself (30 one-bits) inside the string
            &[0xff, 0xff, 0xff, 0xfc],
            // padding of 8 one-bits: a whole byte of padding
            &[0xf1, 0xff],
            // padding that is not all ones ("0" is 00000, then 000)
            &[0x00],
            // a code cut short: the first 7 bits of a 13-bit code and a zero
            &[0xfe],
        ];
        for (i, coded) in cases.into_iter().enumerate() {
            assert_eq!(decode(coded, &mut Vec::new()), Err(Invalid), "case {i}");
        }
    }
}
