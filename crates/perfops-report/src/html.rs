//! The HTML report of a run (`perfops report RUN_DIR`): one self-contained
//! file that reads top-down as a team would ask — did it hold, up to what
//! rate, where did it break and why — then the stage table, then every
//! measurement on one time axis, then latency against throughput and the
//! percentile spectrum.
//!
//! It reads only the results directory, through the types that wrote it
//! (`read`), decides what to say (`model`), prepares chart data (`charts`)
//! and writes the page (`page`, inside the document `shell` with
//! `report.js` and `report.css`; figures are formatted by
//! [`crate::format`]). A run without `summary.json` (killed, or still
//! going) renders from what it recorded, marked incomplete. Writing the
//! file is the caller's business.

pub(crate) mod charts;
pub(crate) mod model;
pub(crate) mod page;
pub(crate) mod read;
pub(crate) mod shell;

use std::path::{Path, PathBuf};

pub use charts::DATA_VERSION;
pub use model::Outcome;

pub use crate::format::escape;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The path is a file, not a results directory.
    #[error("{0} is not a directory (give the results directory of a run, e.g. runs/20261122T043000Z-orders)")]
    NotADirectory(PathBuf),
    /// The directory is missing or cannot be listed.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither `series.jsonl` nor `summary.json` is there.
    #[error("{0} holds no results (neither series.jsonl nor summary.json): is it the results directory of a run?")]
    NothingToReport(PathBuf),
}

/// Render the report of the results directory `dir` as one HTML document.
pub fn render(dir: &Path) -> Result<String, ReportError> {
    let files = read::RunFiles::read(dir)?;
    let model = model::Model::new(files);
    let data = charts::data(&model);
    Ok(page::page(&model, &data))
}
