//! The flags of `perfops ctl`.

use clap::Args;

/// Flags of `perfops ctl`.
#[derive(Debug, Args)]
pub(crate) struct CtlFlags {
    /// The live page: HOST:PORT (as given to --live) or its address http://HOST:PORT/.
    #[arg(value_name = "ADDR")]
    addr: String,
    /// stop, hold, next, or rate N (arrivals per second; users for a closed model).
    #[arg(value_name = "ACTION", num_args = 1..=2, required = true)]
    action: Vec<String>,
}

impl From<CtlFlags> for perfops_run::ctl::CtlArgs {
    fn from(f: CtlFlags) -> Self {
        Self { addr: f.addr, action: f.action }
    }
}
