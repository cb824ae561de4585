//! What a run says to the person who started it, beside its results files:
//! notes on the way ("perfops: started the demo target at ..."), a file's
//! errors and warnings, and a command's result text (`check`'s lines,
//! `k8s`'s commands, the end-of-run summary). The library says them; where
//! they go is the program's choice, made once with [`set_console`]. Without
//! one, notes go to stderr and results to stdout, and a write that fails is
//! dropped: a library never ends the process. The `perfops` binary's console
//! ends it with exit 0 when stdout is closed (`perfops ... | head`).
//!
//! The live line is not said here: it is an output (`perfops_report::live`),
//! shown or not by `-q` and the terminal.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where what a run says goes.
pub trait Console: Send + Sync {
    /// Text for the person running it, newlines included (stderr, by default).
    fn tell(&self, text: &str);
    /// A command's result text, newlines included (stdout, by default).
    fn out(&self, text: &str);
}

/// stderr and stdout, errors dropped.
struct Standard;

impl Console for Standard {
    fn tell(&self, text: &str) {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    fn out(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    }
}

static CONSOLE: OnceLock<Box<dyn Console>> = OnceLock::new();

/// Set when an output streams to stdout (`--output jsonl=-`): result text
/// goes where notes go, so that stdout carries that stream alone.
static RESULTS_TO_TELL: AtomicBool = AtomicBool::new(false);

/// Choose where what runs say goes, once, before the first run; `false` if
/// it was chosen already.
pub fn set_console(console: Box<dyn Console>) -> bool {
    CONSOLE.set(console).is_ok()
}

fn console() -> &'static dyn Console {
    CONSOLE.get().map_or(&Standard, |c| c.as_ref())
}

/// Say `text` to the person (newlines included).
pub fn tell(text: &str) {
    console().tell(text);
}

/// A command's result text (newlines included).
pub fn out(text: &str) {
    if RESULTS_TO_TELL.load(Ordering::Relaxed) {
        console().tell(text);
    } else {
        console().out(text);
    }
}

/// Stdout belongs to an output from now on: [`out`] says its text as
/// [`tell`] does.
pub(crate) fn results_to_tell() {
    RESULTS_TO_TELL.store(true, Ordering::Relaxed);
}
