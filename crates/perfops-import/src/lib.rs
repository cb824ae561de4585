//! Scenarios from real traffic: a service's access log or a browser's
//! recording (HAR) becomes a scenario draft that `perfops check` accepts,
//! with comments saying what was found.
//!
//! This crate is pure in the house's sense: it reads the file it is given and
//! returns what to write ([`Imported`]: the scenario, the CSV feeders beside
//! it, a summary for the terminal); no sockets, no clock, no terminal. The
//! binary (`perfops import`) chooses where the files go and prints.
//!
//! - [`draft`]: the typed scenario and its one YAML renderer, shared by the
//!   importers so that none of them writes YAML (or quotes) by hand.
//! - [`access_log`]: nginx/Apache `combined` and `common`, JSON lines,
//!   gzip'd or not, read as a stream in bounded memory.
//! - [`har`]: a browser recording.
//! - [`replay`]: the replay file both write with `--replay`, one writer.

pub mod access_log;
pub mod draft;
pub mod har;
pub mod replay;

use std::path::PathBuf;

pub use draft::Draft;

/// What an import produced: the scenario and what must be written beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The scenario.
    pub draft: Draft,
    /// Files the scenario names (CSV feeders), relative to it.
    pub files: Vec<DataFile>,
    /// What was found, a line each, for the terminal.
    pub summary: Vec<String>,
}

/// A file written beside the scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Its name, as the scenario's `data:` names it (no directory).
    pub name: String,
    /// Its contents.
    pub text: String,
}

/// Why an import wrote nothing. Every variant but `Replay` (exit 3) is about the input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The input was read but is not what the importer reads.
    #[error("{0}")]
    Input(String),
    /// The replay file could not be written whole (`--replay`).
    #[error("the replay file: {0}")]
    Replay(String),
}
