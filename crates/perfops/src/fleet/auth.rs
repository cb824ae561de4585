//! The token, proved both ways without ever crossing the wire: each side
//! sends a fresh random nonce and an HMAC-SHA256, keyed by the token, over
//! both nonces and its role; the other side checks it in constant time
//! (`ring::hmac::verify`). The role in the message keeps a coordinator's
//! proof from being replayed as an agent's, and fresh nonces keep an old
//! proof from being replayed at all.
//!
//! ```text
//!  agent ── Hello { nonce_a } ──────────────────────────> coordinator
//!        <── Challenge { nonce_c, HMAC(T, "coordinator" nonce_a nonce_c) }
//!  (agent checks: a coordinator that does not know T is refused)
//!        ── Proof { HMAC(T, "agent" nonce_c nonce_a) } ─>
//!                                      (coordinator checks: wrong token, refused)
//! ```

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Who proves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Coordinator,
    Agent,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Coordinator => b"perfops fleet v1 coordinator\0",
            Role::Agent => b"perfops fleet v1 agent\0",
        }
    }
}

/// A fresh random nonce, hex.
pub(crate) fn nonce() -> anyhow::Result<String> {
    let mut n = [0u8; 32];
    SystemRandom::new().fill(&mut n).map_err(|_| anyhow::anyhow!("no system randomness for a nonce"))?;
    Ok(hex(&n))
}

/// `role`'s proof over its peer's nonce then its own (both as sent, hex).
pub(crate) fn prove(token: &str, role: Role, peer_nonce: &str, own_nonce: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hex(hmac::sign(&key, &message(role, peer_nonce, own_nonce)).as_ref())
}

/// Does `proof` (hex, as received) show that `role` knows `token`? Constant time in the proof.
pub(crate) fn check(token: &str, role: Role, peer_nonce: &str, own_nonce: &str, proof: &str) -> bool {
    let Some(tag) = unhex(proof) else { return false };
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hmac::verify(&key, &message(role, peer_nonce, own_nonce), &tag).is_ok()
}

fn message(role: Role, first: &str, second: &str) -> Vec<u8> {
    let mut m = role.label().to_vec();
    m.extend_from_slice(first.as_bytes());
    m.push(0);
    m.extend_from_slice(second.as_bytes());
    m
}

fn hex(bytes: &[u8]) -> String {
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

    #[test]
    fn proofs_hold_only_for_the_token_the_role_and_the_nonces() {
        let (a, c) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, c, "fresh nonces");
        // The coordinator proves over (agent's nonce, its own); the agent checks the same way round.
        let p = prove("s3cret", Role::Coordinator, &a, &c);
        // (token, role, peer nonce, own nonce, proof, holds): one change at a time.
        let cases = [
            ("s3cret", Role::Coordinator, &a, &c, p.clone(), true), // as proved
            ("wrong", Role::Coordinator, &a, &c, p.clone(), false), // another token
            ("s3cret", Role::Agent, &a, &c, p.clone(), false),      // replayed as the other role
            ("s3cret", Role::Coordinator, &c, &a, p.clone(), false), // nonces swapped
            ("s3cret", Role::Coordinator, &a, &a, p.clone(), false), // a stale nonce
            ("s3cret", Role::Coordinator, &a, &c, p[..62].to_string(), false), // truncated
            ("s3cret", Role::Coordinator, &a, &c, "zz".repeat(32), false), // not hex
            ("s3cret", Role::Coordinator, &a, &c, String::new(), false), // empty
        ];
        for (i, (token, role, first, second, proof, want)) in cases.into_iter().enumerate() {
            assert_eq!(check(token, role, first, second, &proof), want, "case {i}");
        }
        assert!(!p.contains("s3cret"));
    }
}
