//! `perfops import har FILE`: a browser recording (HAR 1.2) becomes a scenario. Its parts are
//! here; [`import`] says the command is not available until they are joined into a scenario.

pub mod correlate;
pub mod read;
pub mod select;

use std::path::Path;

use crate::{ImportError, Imported};

/// What `perfops import har` is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarOptions {
    /// The scenario's `name:` (default: the file's stem).
    pub name: Option<String>,
    /// Keep static assets (images, scripts, styles, fonts), left out by default.
    pub include_static: bool,
    /// Hosts kept besides the recording's main one (third-party hosts are left out by default).
    pub include_hosts: Vec<String>,
}

/// Read the recording at `path` into a scenario.
pub fn import(_path: &Path, _options: &HarOptions) -> Result<Imported, ImportError> {
    Err(ImportError::NotAvailable("har"))
}
