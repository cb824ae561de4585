//! `--replay FILE`: the log's requests written as a replay file (format 1,
//! `perfops_core::model::replay`), one row per request, so that the
//! `load: { model: replay }` of the written scenario sends the recorded
//! traffic again at its recorded offsets.
//!
//! Each request is one arrival of its endpoint's one-request flow (the flow
//! is named as the endpoint, `GET /orders/{id}`); its identifiers and query
//! string are the row's value columns, named as the feeders' columns are
//! (`id`, `id_2`, `uuid`, `query`), empty in rows of endpoints without them.
//! Sessions play no part here: the recording already holds each request's
//! instant. The rows go through the importers' one writer
//! ([`crate::replay::Writer`]: time order within a window, caps); this module
//! owns which flow and columns a logged request fills.

use std::collections::HashMap;

pub use crate::replay::{MAX_PENDING, WINDOW_US, WriteError, Writer, Written};

use super::endpoint::Part;

/// Where a request of one endpoint goes: its flow's name and, per hole of the
/// path, the column it fills; the query string's column when it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The flow's name (`GET /orders/{id}`).
    pub flow: String,
    /// For each placeholder of the path, in order, its column's index.
    pub holes: Vec<usize>,
    /// The `query` column's index, if the query string is kept.
    pub query: Option<usize>,
}

/// The endpoints' routes and the file's value columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The value columns, in the header's order.
    pub columns: Vec<String>,
    /// Method + templated path -> its route.
    pub routes: HashMap<(&'static str, Vec<Part>), Route>,
}

/// `query` without its parameters named like credentials (the feeders' rule:
/// their values never reach a file).
pub(super) fn without_credentials(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| {
            let name = pair.split_once('=').map_or(*pair, |(n, _)| n);
            !pair.is_empty() && !perfops_core::scenario::redact::credential_name(name)
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credential-like query parameters are left out of the `query` value.
    #[test]
    fn credentials() {
        assert_eq!(without_credentials("q=shoes&access_token=s3cr3t&apiKey=x&page=2"), "q=shoes&page=2");
        assert_eq!(without_credentials("password=p"), "");
    }
}
