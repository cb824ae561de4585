//! How a command ends: the documented exit codes ([`Exit`]: 0 passed, 1
//! thresholds failed, 2 usage or input error, 3 runtime failure) and the
//! error that means "what the user gave us is wrong" ([`UsageError`], exit
//! 2). Every command uses them; they use nothing of the commands.

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every judged stage held (or, for `quick`, no more failures than allowed).
    Passed = 0,
    /// A threshold failed: the SLO, the rate, a probe.
    ThresholdsFailed = 1,
    /// What the user gave is wrong: a flag, a file, a value.
    Usage = 2,
    /// The run itself failed: the target down, a write, a peer.
    Runtime = 3,
}

/// An error in what the user gave us (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
