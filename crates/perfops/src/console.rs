//! Where what perfops says goes: notes on stderr, a command's result on
//! stdout. A closed stdout (`perfops ... | head`) ends the program with exit
//! code 0, as documented: the reader has what it wanted; any other failure
//! to write it is a runtime failure (exit 3).

use std::io::Write;

use perfops_run::exit::Exit;
use perfops_run::say::Console;

/// stderr and stdout, as the exit codes promise.
pub(crate) struct Terminal;

impl Console for Terminal {
    fn tell(&self, text: &str) {
        // Nothing better to do if stderr is gone than to go on.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    fn out(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            self.tell(&format!("perfops: cannot write to stdout: {e}\n"));
            std::process::exit(Exit::Runtime as i32);
        }
    }
}
