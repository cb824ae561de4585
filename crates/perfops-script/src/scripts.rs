//! The compiled form of a scenario's script files: [`Scripts`] (their text, checked, and the
//! names of the functions they define) and [`Hook`] (one of those functions, by index).
//!
//! `Scripts` is what the scenario holds and every worker shares (`Send + Sync`, cheap to clone):
//! it keeps the sources, not a live engine, because a QuickJS runtime belongs to one thread.
//! Each worker's [`crate::Runtime`] evaluates them once when it is built (about 1 ms for a
//! small file on the loaded build machine, measured in the README), so nothing is compiled per
//! call. Checking happens here, once, in a throwaway runtime, so that `perfops check` reports
//! every file's error at file:line:column before any worker starts.

use std::sync::Arc;

use crate::error::ScriptError;
use crate::runtime::{Clock, Limits, Probe};

/// One script file: its name (as errors print it) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceFile {
    pub(crate) name: String,
    pub(crate) text: String,
}

/// Script files checked and ready for runtimes. Shared by every worker: `Send + Sync`, and a
/// clone shares the text. Two are equal when their files are (names and texts, in order), so a
/// scenario that holds them can still be compared.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub(crate) files: Arc<[SourceFile]>,
    pub(crate) functions: Arc<[String]>,
}

/// A function the scripts define, found by name once (when a scenario is built) and called by
/// index on every request: no name is looked up per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hook(pub(crate) u32);

impl PartialEq for Scripts {
    fn eq(&self, other: &Scripts) -> bool {
        // The functions follow from the files.
        self.files == other.files
    }
}

impl Eq for Scripts {}

impl Scripts {
    /// Checks the files, in order, as one program (a later file may call an earlier one's
    /// functions): each is parsed and its top-level code run once in a throwaway runtime with
    /// the default [`Limits`]. Returns every file's error (one per file: QuickJS stops at a
    /// file's first syntax error), each with its file:line:column.
    ///
    /// A hook is a top-level `function NAME(...)` declaration (or any global property holding a
    /// function); `const f = () => ...` at top level is not visible as a hook, since JS keeps
    /// top-level `let`/`const` off the global object.
    pub fn compile<N: AsRef<str>, S: AsRef<str>>(files: &[(N, S)]) -> Result<Scripts, Vec<ScriptError>> {
        let files: Arc<[SourceFile]> = files
            .iter()
            .map(|(name, text)| SourceFile { name: name.as_ref().to_string(), text: text.as_ref().to_string() })
            .collect();
        let functions = Probe::functions(&files, Limits::default(), Clock::frozen(0))?;
        Ok(Scripts { files, functions: functions.into() })
    }

    /// The functions the scripts define, in the order they were found (file order, then
    /// definition order within a file).
    pub fn functions(&self) -> &[String] {
        &self.functions
    }

    /// Whether the scripts define a function `name` (for `check`'s "no such hook" error).
    pub fn has(&self, name: &str) -> bool {
        self.hook(name).is_some()
    }

    /// The hook named `name`, to call through a [`crate::Runtime`].
    pub fn hook(&self, name: &str) -> Option<Hook> {
        let index = self.functions.iter().position(|f| f == name)?;
        Some(Hook(u32::try_from(index).ok()?))
    }

    /// The name of `hook` (as errors print it). A hook from other `Scripts` gives `"?"`.
    pub fn name(&self, hook: Hook) -> &str {
        self.functions.get(hook.0 as usize).map_or("?", String::as_str)
    }

    /// The files' names and texts, in order (what a fleet ships to its agents).
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().map(|f| (f.name.as_str(), f.text.as_str()))
    }
}
