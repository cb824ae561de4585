//! `perfops coordinator` and `perfops agent`: one run over many generators,
//! live. The pure parts (wire format, clock offsets, the join of seconds)
//! are `perfops_core::fleet`; here are the token, its strength and its
//! proofs ([`auth`]), what the coordinator decides about a peer before it
//! trusts it ([`gate`], pure), the coordinator's door: accepting and
//! handshaking on its event loop ([`accept`]), the TLS connections and the
//! hub that runs them ([`conn`]), and the two commands ([`coordinator`],
//! [`agent`]). What perfops promises about the channel is
//! docs/guide/security.md's. The long explanation is the
//! README's "Many generators" and docs/architecture.md.

mod accept;
pub mod agent;
mod auth;
mod conn;
pub mod coordinator;
mod gate;

use anyhow::Result;

use crate::exit::UsageError;

/// How to make a token, for the usage errors.
const MAKE_ONE: &str = "make one with `openssl rand -hex 16` (or start the coordinator without --token: it \
                        generates one and prints it)";

/// The token from `--token` or `PERFOPS_TOKEN` (clap reads both); none, an
/// empty one, or one weaker than 128 bits ([`auth::strength`]) is a usage
/// error. Never printed.
pub(crate) fn token(flag: Option<&str>) -> Result<String> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    match flag {
        Some(t) if !t.is_empty() => match auth::strength(t) {
            Ok(()) => Ok(t.to_string()),
            Err(why) => Err(usage(format!("--token / PERFOPS_TOKEN: {why}: {MAKE_ONE}"))),
        },
        _ => {
            Err(usage(format!("a token is required: --token T or the environment variable PERFOPS_TOKEN; {MAKE_ONE}")))
        }
    }
}
