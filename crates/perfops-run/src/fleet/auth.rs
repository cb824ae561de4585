//! The token: how strong it must be, how one is made, and how each side
//! proves it knows it without sending it.
//!
//! Each side sends a fresh random nonce; a proof is an HMAC-SHA256, keyed
//! by the token, over its role, the TLS session's exported keying material
//! (the *binding*, RFC 5705/8446 exporter) and both nonces; the other side
//! checks it in constant time (`ring::hmac::verify`). The agent proves
//! first, and the coordinator says nothing that depends on the token
//! before that proof held (issue #31: it used to answer a hello with its
//! own proof over a nonce the stranger chose, and a recorded answer was
//! enough to guess a short token offline).
//!
//! ```text
//!  agent ── Hello { nonce_a } ─────────────────────────────────> coordinator
//!        <── Challenge { nonce_c }                     (nothing that depends on T)
//!        ── Proof { HMAC(T, "agent" binding nonce_c nonce_a) } ─>
//!                                       (checked; a wrong one is refused, nothing more said)
//!        <── Accepted { HMAC(T, "coordinator" binding nonce_a nonce_c) }
//!  (the agent checks it before it trusts a word: assignments carry env values and setup tokens)
//! ```
//!
//! The binding ties the proofs to this very TLS session: a machine in the
//! middle that terminates TLS on both sides has two sessions with two
//! different bindings, so the proof it relays holds for neither, and it
//! cannot make one without the token. That is why an agent may accept a
//! coordinator's certificate unverified (no `--tls-ca`): whoever completes
//! the handshake knows the token. The role in the message keeps one
//! side's proof from being replayed as the other's, and fresh nonces keep
//! an old proof from being replayed at all.

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The exporter label both sides derive the binding with.
pub(crate) const BINDING_LABEL: &[u8] = b"EXPORTER-perfops-fleet-v4";

/// The TLS session's exported keying material: what every proof is bound to.
pub(crate) type Binding = [u8; 32];

/// Random bytes in a nonce (sent as hex, so 64 characters).
const NONCE_BYTES: usize = 32;

/// The least entropy a token may have, by [`strength`]'s estimate.
pub(crate) const MIN_TOKEN_BITS: f64 = 128.0;

/// Who proves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Coordinator,
    Agent,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Coordinator => b"perfops fleet v4 coordinator\0",
            Role::Agent => b"perfops fleet v4 agent\0",
        }
    }
}

/// A fresh random nonce, hex.
pub(crate) fn nonce() -> anyhow::Result<String> {
    let mut n = [0u8; NONCE_BYTES];
    SystemRandom::new().fill(&mut n).map_err(|_| anyhow::anyhow!("no system randomness for a nonce"))?;
    Ok(hex(&n))
}

/// Is `n` a nonce as [`nonce`] makes them (64 hex characters)? A peer's
/// nonce is checked before it is used: a short or empty one would make a
/// proof easier to replay.
pub(crate) fn is_nonce(n: &str) -> bool {
    n.len() == 2 * NONCE_BYTES && n.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new token: 32 random bytes, hex (256 bits).
pub(crate) fn generate_token() -> anyhow::Result<String> {
    let mut t = [0u8; 32];
    SystemRandom::new().fill(&mut t).map_err(|_| anyhow::anyhow!("no system randomness for a token"))?;
    Ok(hex(&t))
}

/// Why `token` is too weak to stand between a stranger and the fleet, if it is.
///
/// The estimate is the entropy a random token of this length and these
/// character classes would have (length x log2 of the classes' alphabet:
/// lower case 26, upper case 26, digits 10, other ASCII 33, anything else
/// 128): `openssl rand -hex 16` gives 32 characters of [0-9a-f], about 165
/// bits. It cannot see that a word is a word, so it is an upper bound: a
/// token must also use at least 8 distinct characters, which throws out
/// the long repetitions (`aaaa...`, `abababab...`) that the length alone
/// would let through.
pub(crate) fn strength(token: &str) -> Result<(), String> {
    let (mut lower, mut upper, mut digit, mut other, mut wide) = (false, false, false, false, false);
    for c in token.chars() {
        match c {
            'a'..='z' => lower = true,
            'A'..='Z' => upper = true,
            '0'..='9' => digit = true,
            c if c.is_ascii() => other = true,
            _ => wide = true,
        }
    }
    let alphabet: u32 = [(lower, 26), (upper, 26), (digit, 10), (other, 33), (wide, 128)]
        .iter()
        .filter(|(used, _)| *used)
        .map(|(_, n)| n)
        .sum();
    let bits = token.chars().count() as f64 * f64::from(alphabet.max(1)).log2();
    let mut distinct: Vec<char> = token.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if bits < MIN_TOKEN_BITS {
        return Err(format!("the token is too weak (about {bits:.0} bits, at least {MIN_TOKEN_BITS:.0} needed)"));
    }
    if distinct.len() < 8 {
        return Err(format!("the token is too weak (only {} distinct characters)", distinct.len()));
    }
    Ok(())
}

/// `role`'s proof, over the session's `binding` and the nonces: the
/// coordinator proves over (agent's, its own), the agent over
/// (coordinator's, its own): each side's own nonce last.
pub(crate) fn prove(token: &str, role: Role, binding: &Binding, peer_nonce: &str, own_nonce: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hex(hmac::sign(&key, &message(role, binding, peer_nonce, own_nonce)).as_ref())
}

/// Does `proof` (hex, as received) show that `role` knows `token`, in the
/// session of `binding`? Constant time in the proof.
pub(crate) fn check(
    token: &str,
    role: Role,
    binding: &Binding,
    peer_nonce: &str,
    own_nonce: &str,
    proof: &str,
) -> bool {
    let Some(tag) = unhex(proof) else { return false };
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hmac::verify(&key, &message(role, binding, peer_nonce, own_nonce), &tag).is_ok()
}

fn message(role: Role, binding: &Binding, first: &str, second: &str) -> Vec<u8> {
    let mut m = role.label().to_vec();
    m.extend_from_slice(binding);
    m.extend_from_slice(first.as_bytes());
    m.push(0);
    m.extend_from_slice(second.as_bytes());
    m
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "3f9c1e0b7a52d8e4c6019ab2f47d3e85";

    #[test]
    fn proofs_hold_only_for_the_token_the_role_the_session_and_the_nonces() {
        let (a, c) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, c, "fresh nonces");
        let (b, other_b) = ([7u8; 32], [8u8; 32]);
        // The coordinator proves over (agent's nonce, its own); the agent checks the same way round.
        let p = prove(T, Role::Coordinator, &b, &a, &c);
        // (token, role, binding, peer nonce, own nonce, proof, holds): one change at a time.
        let cases = [
            (T, Role::Coordinator, &b, &a, &c, p.clone(), true), // as proved
            ("wrong", Role::Coordinator, &b, &a, &c, p.clone(), false), // another token
            (T, Role::Agent, &b, &a, &c, p.clone(), false),      // replayed as the other role
            (T, Role::Coordinator, &other_b, &a, &c, p.clone(), false), // relayed into another TLS session
            (T, Role::Coordinator, &b, &c, &a, p.clone(), false), // nonces swapped
            (T, Role::Coordinator, &b, &a, &a, p.clone(), false), // a stale nonce
            (T, Role::Coordinator, &b, &a, &c, p[..62].to_string(), false), // truncated
            (T, Role::Coordinator, &b, &a, &c, "zz".repeat(32), false), // not hex
            (T, Role::Coordinator, &b, &a, &c, String::new(), false), // empty
        ];
        for (i, (token, role, binding, first, second, proof, want)) in cases.into_iter().enumerate() {
            assert_eq!(check(token, role, binding, first, second, &proof), want, "case {i}");
        }
        assert!(!p.contains(T));
    }

    #[test]
    fn weak_tokens_are_refused() {
        // Issue #31: any non-empty token used to do. (token, accepted)
        let (one, two) = ("a".repeat(64), "ab".repeat(40));
        let cases: [(&str, bool); 8] = [
            ("s3cret", false),                                     // the old --help example: a six-letter word
            ("t0ken-for-tests", false),                            // 15 characters: about 92 bits
            ("correcthorsebatterystaple", false),                  // 25 lower case: about 118 bits
            (&one, false),                                         // long, but one character
            (&two, false),                                         // long, but two characters
            (T, true),                                             // `openssl rand -hex 16`: about 165 bits
            ("Vq3xLr8TzPn2WkYc9HsJd4Mf6GbQe1Ua", true),            // 32 mixed-case alphanumerics: about 190 bits
            ("YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY", true), // base64url of 32 bytes
        ];
        for (token, ok) in cases {
            assert_eq!(strength(token).is_ok(), ok, "{token}: {:?}", strength(token));
        }
        let made = generate_token().unwrap();
        assert!(strength(&made).is_ok(), "a generated token passes its own rule");
        assert_ne!(made, generate_token().unwrap());
    }

    #[test]
    fn nonces_are_checked_for_shape() {
        // (nonce, well formed)
        let cases = [
            (nonce().unwrap(), true), // as made
            (String::new(), false),   // empty: a proof over it is easier to replay
            ("00".repeat(31), false), // short
            ("zz".repeat(32), false), // not hex
            ("00".repeat(33), false), // long
        ];
        for (n, ok) in cases {
            assert_eq!(is_nonce(&n), ok, "{n}");
        }
    }
}
