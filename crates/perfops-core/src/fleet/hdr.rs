//! HdrHistogram's V2 encoding (and its deflate wrapper) read straight into
//! a histogram that is being merged: the coordinator's hot path.
//!
//! hdrhistogram's own `Deserializer` builds a whole new histogram per
//! encoded one: at perfops' bounds (1 µs to 1 h, 3 digits) a 188 KiB
//! counts array, zeroed, then walked again by the merge. A coordinator of
//! 200 agents gets 200 x 7 histograms per second and key, mostly a few
//! dozen non-zero buckets each; reading the run-length payload and adding
//! each non-zero bucket to the merged histogram costs a few µs instead.
//!
//! ```text
//!  deflate  = 0x1c849314:u32be len:u32be zlib(v2)
//!  v2       = 0x1c849313:u32be payload_len:u32be normalizing_offset:u32be(0) digits:u32be
//!             lowest:u64be highest:u64be int_to_double:f64be(1.0) payload
//!  payload  = zig-zag LEB128 (9 bytes at most): n >= 0 the count at the next index,
//!             n < 0 a run of -n empty indices
//! ```
//!
//! The index of a bucket maps to a value by the layout that `lowest` and
//! `digits` imply (hdrhistogram's `value_for`), and the value is recorded
//! with its count, so the bucket lands where it was, in perfops' bounds.

use std::io::Read;

use crate::measure::Histogram;

const V2: u32 = 0x1c84_9303 | 0x10;
const V2_DEFLATE: u32 = 0x1c84_9304 | 0x10;

/// Add the histogram encoded in `bytes` (V2, or V2 deflate) to `into`.
/// `scratch` is reused between calls for the inflated bytes. Returns how
/// many values it added.
pub(crate) fn add_encoded(bytes: &[u8], into: &mut Histogram, scratch: &mut Vec<u8>) -> Result<u64, String> {
    read_encoded(bytes, scratch, |us, n| into.record_us(us, n))
}

/// How many values the histogram encoded in `bytes` holds, read to its end
/// (every bucket in range, the total within a `u64`) without recording it.
pub(crate) fn count_encoded(bytes: &[u8], scratch: &mut Vec<u8>) -> Result<u64, String> {
    read_encoded(bytes, scratch, |_, _| {})
}

/// Walk the histogram encoded in `bytes`: `each(value_us, count)` for every
/// non-zero bucket, in order; the total count is returned. A total past
/// `u64::MAX` is an error, never a wrap: HdrHistogram saturates its counts
/// silently, and a peer must not be able to make a merged count lie.
fn read_encoded(bytes: &[u8], scratch: &mut Vec<u8>, each: impl FnMut(u64, u64)) -> Result<u64, String> {
    let (cookie, rest) = be_u32(bytes)?;
    match cookie {
        V2 => walk_v2(rest, each),
        V2_DEFLATE => {
            let (len, rest) = be_u32(rest)?;
            let zipped = rest.get(..len as usize).ok_or("truncated deflate payload")?;
            scratch.clear();
            // A bomb cannot make this grow past what a histogram at perfops' bounds needs
            // (every index one byte, and the header): the limit is a generous multiple of it.
            flate2::read::ZlibDecoder::new(zipped)
                .take(1 << 20)
                .read_to_end(scratch)
                .map_err(|e| format!("inflate: {e}"))?;
            let (inner, rest) = be_u32(scratch)?;
            if inner != V2 {
                return Err(format!("inner cookie {inner:#x}"));
            }
            walk_v2(rest, each)
        }
        other => Err(format!("cookie {other:#x} is no V2 histogram")),
    }
}

fn be_u32(b: &[u8]) -> Result<(u32, &[u8]), String> {
    let head = b.get(..4).ok_or("truncated")?;
    Ok((u32::from_be_bytes([head[0], head[1], head[2], head[3]]), &b[4..]))
}

fn be_u64(b: &[u8]) -> Result<(u64, &[u8]), String> {
    let head = b.get(..8).ok_or("truncated")?;
    let mut a = [0u8; 8];
    a.copy_from_slice(head);
    Ok((u64::from_be_bytes(a), &b[8..]))
}

fn walk_v2(b: &[u8], mut each: impl FnMut(u64, u64)) -> Result<u64, String> {
    let (payload_len, b) = be_u32(b)?;
    let (offset, b) = be_u32(b)?;
    let (digits, b) = be_u32(b)?;
    let (lowest, b) = be_u64(b)?;
    let (_highest, b) = be_u64(b)?;
    let (ratio, b) = be_u64(b)?;
    if offset != 0 || f64::from_bits(ratio) != 1.0 {
        return Err("a shifted or floating-point histogram".into());
    }
    if !(1..=5).contains(&digits) || lowest == 0 || lowest > 1 << 40 {
        return Err(format!("bounds {lowest} / {digits} digits"));
    }
    let layout = Layout::new(lowest, digits);
    let mut payload = b.get(..payload_len as usize).ok_or("truncated payload")?;
    let (mut index, mut total): (u64, u64) = (0, 0);
    while !payload.is_empty() {
        let (n, used) = varint(payload)?;
        payload = &payload[used..];
        let n = ((n >> 1) as i64) ^ -((n & 1) as i64);
        if n < 0 {
            // Saturating: a peer's run of 2^63 empty buckets lands out of range (an
            // error at the next count), not back at a small index.
            index = index.saturating_add(n.unsigned_abs());
        } else {
            if n > 0 {
                let value = layout.value_for(index).ok_or("index out of range")?;
                total = total.checked_add(n as u64).ok_or("counts past u64::MAX")?;
                each(value, n as u64);
            }
            index = index.saturating_add(1);
        }
    }
    Ok(total)
}

/// LEB128, at most 9 bytes, the ninth taken whole (hdrhistogram's LEB128-64b9B).
fn varint(b: &[u8]) -> Result<(u64, usize), String> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(9) {
        if i == 8 {
            return Ok((v | (u64::from(byte) << 56), 9));
        }
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    Err("truncated varint".into())
}

/// hdrhistogram's bucket layout for a lowest value and a precision.
struct Layout {
    unit_magnitude: u32,
    half_count_magnitude: u32,
    half_count: u64,
}

impl Layout {
    fn new(lowest: u64, digits: u32) -> Layout {
        let largest = 2 * 10u64.pow(digits);
        let count_magnitude = (largest as f64).log2().ceil() as u32;
        let half_count_magnitude = count_magnitude.saturating_sub(1);
        Layout {
            unit_magnitude: (lowest as f64).log2().floor() as u32,
            half_count_magnitude,
            half_count: 1 << half_count_magnitude,
        }
    }

    /// The lowest value of bucket `index` (`None` past what a u64 holds).
    fn value_for(&self, index: u64) -> Option<u64> {
        let mut bucket = (index >> self.half_count_magnitude) as i64 - 1;
        let mut sub = (index & (self.half_count - 1)) + self.half_count;
        if bucket < 0 {
            sub -= self.half_count;
            bucket = 0;
        }
        // Compared before narrowing: a bucket of 2^32 must not wrap to bucket 0
        // (a peer's far index would land on a small value instead of being refused).
        let shift = u64::try_from(bucket).ok()?.checked_add(u64::from(self.unit_magnitude))?;
        (shift < 64 && u64::from(sub.leading_zeros()) >= shift).then(|| sub << shift)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    use proptest::prelude::*;

    use super::*;

    fn buckets(h: &Histogram) -> Vec<(u64, u64)> {
        h.recorded().collect()
    }

    proptest! {
        /// Whatever was recorded, decoding its encoding adds the very same buckets.
        #[test]
        fn decodes_what_hdrhistogram_encodes(values in prop::collection::vec((1u64..4_000_000_000, 1u64..1000), 0..200)) {
            let mut h = Histogram::new();
            for &(us, n) in &values {
                h.record_us(us, n);
            }
            let mut scratch = Vec::new();
            for deflate in [false, true] {
                let mut bytes = Vec::new();
                if deflate {
                    V2DeflateSerializer::new().serialize(h.inner(), &mut bytes).unwrap();
                } else {
                    V2Serializer::new().serialize(h.inner(), &mut bytes).unwrap();
                }
                let mut back = Histogram::new();
                add_encoded(&bytes, &mut back, &mut scratch).unwrap();
                prop_assert_eq!(buckets(&back), buckets(&h));
                prop_assert_eq!(back.len(), h.len());
                prop_assert_eq!(back.max(), h.max());
            }
        }
    }

    #[test]
    fn adds_to_what_is_there_and_refuses_garbage() {
        let mut a = Histogram::new();
        a.record(Duration::from_millis(3));
        let mut bytes = Vec::new();
        V2DeflateSerializer::new().serialize(a.inner(), &mut bytes).unwrap();
        let mut merged = Histogram::new();
        merged.record(Duration::from_millis(7));
        let mut scratch = Vec::new();
        add_encoded(&bytes, &mut merged, &mut scratch).unwrap();
        assert_eq!(merged.len(), 2, "added, not replaced");
        // (bytes, why): each a way an encoding can be broken.
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "empty"),
            (vec![0xde, 0xad, 0xbe, 0xef], "not a V2 cookie"),
            (bytes[..bytes.len() - 3].to_vec(), "deflate stream cut short"),
            (
                {
                    let mut b = bytes.clone();
                    b[9] ^= 0xff;
                    b
                },
                "zlib data damaged",
            ),
        ];
        for (b, why) in cases {
            assert!(add_encoded(&b, &mut Histogram::new(), &mut scratch).is_err(), "{why}");
        }
    }

    /// A V2 histogram of perfops' bounds (1 µs, 3 digits) with `payload`: zig-zag LEB128 counts.
    fn v2(counts: &[i64]) -> Vec<u8> {
        let mut payload = Vec::new();
        for &n in counts {
            let mut z = ((n << 1) ^ (n >> 63)) as u64;
            for i in 0..9 {
                if i == 8 {
                    payload.push((z & 0xff) as u8);
                    break;
                }
                let byte = (z & 0x7f) as u8;
                z >>= 7;
                if z == 0 {
                    payload.push(byte);
                    break;
                }
                payload.push(byte | 0x80);
            }
        }
        let mut b = V2.to_be_bytes().to_vec();
        b.extend((payload.len() as u32).to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(3u32.to_be_bytes());
        b.extend(1u64.to_be_bytes());
        b.extend(3_600_000_000u64.to_be_bytes());
        b.extend(1.0f64.to_bits().to_be_bytes());
        b.extend(payload);
        b
    }

    /// #31: what a peer can put in a payload that HdrHistogram's own encoder
    /// never writes: each refused, none a panic, none a wrong value.
    #[test]
    fn hostile_payloads_are_refused() {
        let mut scratch = Vec::new();
        // The v2 helper agrees with hdrhistogram on an honest payload: 3 empty, then 5 at index 3.
        let mut h = Histogram::new();
        assert_eq!(add_encoded(&v2(&[-3, 5]), &mut h, &mut scratch), Ok(5));
        assert_eq!(buckets(&h), vec![(3, 5)]);
        // (counts, why): each would have been a panic or a wrong value before.
        let cases: Vec<(Vec<i64>, &str)> = vec![
            // Runs of empty buckets that add up past u64::MAX, then a zero count: the index
            // saturates instead of wrapping (was: an overflow panic).
            (vec![i64::MIN, i64::MIN, i64::MIN, 0, 1], "index out of range"),
            // Bucket 2^32 narrowed to a u32 was bucket 0: a small value, recorded (was: 1 µs).
            (vec![-((1i64 << 42) + (1 << 10)), 1], "index out of range"),
            // Two counts whose sum passes u64::MAX: HdrHistogram would saturate silently.
            (vec![i64::MAX, i64::MAX, 2], "counts past u64::MAX"),
        ];
        for (counts, want) in cases {
            let mut h = Histogram::new();
            assert_eq!(add_encoded(&v2(&counts), &mut h, &mut scratch), Err(want.to_string()), "{counts:?}");
            assert_eq!(count_encoded(&v2(&counts), &mut scratch), Err(want.to_string()), "{counts:?}");
        }
    }
}
