//! The demo's JWT-look-alike bearer tokens: `base64url(header).base64url(payload).base64url(sig)`.
//!
//! The signature is std's SipHash keyed by a `RandomState` made once per server (so a token from
//! another run, or from another server in the same process, is refused), computed twice with a
//! domain byte for 128 bits. Keep it in proportion: this makes the auth step of a load test real
//! (a token must be obtained and carried), it is not a security mechanism. It does not decode the
//! payload: a valid signature is all `/orders` asks for.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `{"alg":"DEMO-SIP128","typ":"JWT"}`, base64url-encoded once.
const HEADER_JSON: &str = r#"{"alg":"DEMO-SIP128","typ":"JWT"}"#;

/// Issues and verifies tokens with a key private to this server instance.
#[derive(Debug)]
pub(crate) struct Signer {
    key: RandomState,
    issued: AtomicU64,
    header: String,
}

impl Signer {
    /// A signer with a fresh random key.
    pub(crate) fn new() -> Signer {
        Signer { key: RandomState::new(), issued: AtomicU64::new(0), header: base64url(HEADER_JSON.as_bytes()) }
    }

    /// A new token for `user`; its payload carries the user, a per-server counter and the time.
    pub(crate) fn issue(&self, user: &str) -> String {
        let n = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        let iat = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let payload = serde_json::json!({ "user": user, "n": n, "iat": iat }).to_string();
        let signing_input = format!("{}.{}", self.header, base64url(payload.as_bytes()));
        let signature = self.sign(&signing_input);
        format!("{signing_input}.{signature}")
    }

    /// Whether `token` was issued by this signer (and not altered).
    pub(crate) fn verify(&self, token: &str) -> bool {
        let Some((signing_input, signature)) = token.rsplit_once('.') else {
            return false;
        };
        if !signing_input.starts_with(&self.header) || signing_input.matches('.').count() != 1 {
            return false;
        }
        constant_time_eq(self.sign(signing_input).as_bytes(), signature.as_bytes())
    }

    /// The user a token was issued to, read from its payload (call [`Signer::verify`] first: this
    /// trusts the payload).
    pub(crate) fn user_of(&self, token: &str) -> Option<String> {
        let payload = base64url_decode(token.split('.').nth(1)?)?;
        let value: serde_json::Value = serde_json::from_slice(&payload).ok()?;
        value.get("user")?.as_str().map(str::to_owned)
    }

    fn sign(&self, signing_input: &str) -> String {
        let mut mac = [0u8; 16];
        mac[..8].copy_from_slice(&self.key.hash_one((0u8, signing_input)).to_be_bytes());
        mac[8..].copy_from_slice(&self.key.hash_one((1u8, signing_input)).to_be_bytes());
        base64url(&mac)
    }
}

/// Compares without an early exit, so the time taken does not tell how much of a forgery matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// base64url without padding (RFC 4648 section 5), as JWTs use it.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // 1 byte -> 2 characters, 2 -> 3, 3 -> 4.
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The inverse of [`base64url`]; `None` for a character outside the alphabet or a dangling one.
pub(crate) fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.as_bytes().chunks(4) {
        // 2 characters -> 1 byte, 3 -> 2, 4 -> 3; 1 is no byte at all.
        if chunk.len() < 2 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_vectors() {
        // RFC 4648 test vectors, unpadded.
        for (input, expected) in
            [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE")]
        {
            assert_eq!(base64url(input.as_bytes()), expected);
        }
        // The url-safe alphabet: 0xfb 0xff -> "-_8".
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        // Decoding undoes encoding, whatever the length's remainder.
        for input in ["", "f", "fo", "foo", "foob", "fooba", "\u{fb}\u{ff}"] {
            assert_eq!(base64url_decode(&base64url(input.as_bytes())).as_deref(), Some(input.as_bytes()));
        }
        // A character outside the alphabet, or one left alone, is no base64url.
        assert_eq!(base64url_decode("Zm9v+"), None);
        assert_eq!(base64url_decode("Zm9vY"), None);
    }

    #[test]
    fn tokens_verify_only_for_their_signer() {
        let signer = Signer::new();
        let token = signer.issue("alice");
        assert_eq!(token.split('.').count(), 3);
        assert!(signer.verify(&token));
        assert_eq!(signer.user_of(&token).as_deref(), Some("alice"), "GET /me reads the user back");
        // Another server's key refuses it.
        assert!(!Signer::new().verify(&token));
        // A changed payload (same signature) is refused.
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged_payload = base64url(br#"{"user":"mallory","n":1,"iat":0}"#);
        parts[1] = &forged_payload;
        assert!(!signer.verify(&parts.join(".")));
        assert!(!signer.verify("") && !signer.verify("a.b") && !signer.verify(&format!("{token}.x")));
    }
}
