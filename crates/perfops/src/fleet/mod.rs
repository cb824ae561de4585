//! `perfops coordinator` and `perfops agent`: one run over many generators,
//! live. The pure parts (wire format, clock offsets, the join of seconds)
//! are `perfops_core::fleet`; here are the sockets, the token proofs
//! ([`auth`]), the connections and their threads ([`conn`]), and the two
//! commands ([`coordinator`], [`agent`]). The long explanation is the
//! README's "Many generators" and docs/architecture.md.

pub(crate) mod agent;
mod auth;
mod conn;
pub(crate) mod coordinator;

use anyhow::Result;

use crate::exit::UsageError;

/// The token from `--token` or `PERFOPS_TOKEN` (clap reads both); none, or
/// an empty one, is a usage error. Never printed.
pub(crate) fn token(flag: Option<&str>) -> Result<String> {
    match flag {
        Some(t) if !t.is_empty() => Ok(t.to_string()),
        _ => Err(anyhow::Error::new(UsageError(
            "a token is required: --token T or the environment variable PERFOPS_TOKEN".into(),
        ))),
    }
}
