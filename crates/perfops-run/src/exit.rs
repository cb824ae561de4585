//! How the `perfops` command ends and speaks: the documented exit codes
//! ([`Exit`]: 0 passed, 1 thresholds failed, 2 usage or input error, 3
//! runtime failure), the error that means "what the user gave us is wrong"
//! ([`UsageError`], exit 2) and writing to stdout, where a closed pipe
//! (`perfops ... | head`) exits 0. Every command uses them; they use nothing
//! of the commands, so they stand below them rather than in `main.rs`.

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

/// Set when an output streams to stdout (`--output jsonl=-`): what [`out`]
/// prints goes to stderr, so that stdout carries that stream alone.
static TEXT_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stdout belongs to an output from now on: [`out`] writes to stderr.
pub(crate) fn text_to_stderr() {
    TEXT_TO_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Write `text` to stdout. A closed stdout (`perfops ... | head`) ends the
/// program with exit code 0, as documented: the reader has what it wanted.
pub fn out(text: &str) {
    use std::io::Write;
    if TEXT_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        eprint!("{text}");
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("perfops: cannot write to stdout: {e}");
        std::process::exit(Exit::Runtime as i32);
    }
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
