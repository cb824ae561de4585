//! `live=ADDR` (also `--live [ADDR]`): the report page served while the run
//! goes. The server, its log and its guards are `crate::live`; this is the
//! registry's entry. It is not detached: its `second` only appends one line
//! to a log in memory (see `crate::live`'s module doc for the figure).

use perfops_report::output::Output;

use crate::live::{Live, TOKEN_ENV};

/// `live=ADDR` (also `--live [ADDR]`).
pub(crate) const ENTRY: super::Entry = super::Entry {
    name: "live",
    help: "live=ADDR: serve the report page live at http://ADDR/, with its control (as --live)",
    make,
    arg: super::Arg::Address,
};

/// `live=ADDR`: bound now, so that a busy address is a usage error before the load.
fn make(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let addr = arg.filter(|a| !a.is_empty()).ok_or("say where: live=ADDR (e.g. 127.0.0.1:5665)")?;
    Ok(Box::new(Live::bind(addr, std::env::var(TOKEN_ENV).ok())?))
}
