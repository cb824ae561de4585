//! The HTML report of a run (`perfops report RUN_DIR`): one self-contained
//! file that reads top-down as a team would ask — did it hold, up to what
//! rate, where did it break and why — then the stage table, then every
//! measurement on one time axis, then latency against throughput and the
//! percentile spectrum.
//!
//! It reads only the results directory, through the types that wrote it
//! (`crate::read`), decides what to say (`model`), prepares chart data (`charts`)
//! and writes the page (`page`, inside the document `shell` with
//! `report.js` and `report.css`; figures are formatted by
//! [`crate::format`]). A run without `summary.json` (killed, or still
//! going) renders from what it recorded, marked incomplete. Writing the
//! file is the caller's business.

pub(crate) mod charts;
pub mod live;
pub(crate) mod model;
pub(crate) mod page;
pub(crate) mod shell;

use std::path::Path;

pub use charts::DATA_VERSION;
pub use model::Outcome;

pub use crate::format::escape;
pub use crate::read::ReportError;
use crate::read::RunFiles;

/// Render the report of the results directory `dir` as one HTML document.
pub fn render(dir: &Path) -> Result<String, ReportError> {
    render_noting(dir).map(|(page, _)| page)
}

/// [`render`], and what could not be read (the page's notes), for the
/// terminal: a file refused or left out must not be said only inside the
/// page (#31).
pub fn render_noting(dir: &Path) -> Result<(String, Vec<String>), ReportError> {
    let files = RunFiles::read(dir)?;
    let notes = files.notes.clone();
    let model = model::Model::new(files);
    let data = charts::data(&model);
    Ok((page::page(&model, &data), notes))
}
