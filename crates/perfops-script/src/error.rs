//! What can go wrong with a script, as types: [`ScriptError`] and the place it points at
//! ([`Place`]). Each renders as one line that starts with `file:line:column` where the engine
//! knows it, so `perfops check` can list script errors beside the scenario's own, and a failure
//! sample names the line that failed.
//!
//! This module owns the rendering and the reading of QuickJS's error positions (the first frame
//! of an exception's stack, `at sign (auth.js:12:7)`); it does not decide what a caller does with
//! an error (a failed request, a stopped flow, an error of `check`).

use std::fmt;
use std::time::Duration;

/// A position in a script file: `file:line:column`, 1-based as editors count them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file's name as the caller gave it to [`crate::Scripts::compile`].
    pub file: String,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1 (QuickJS counts in UTF-16 units, as browsers do).
    pub column: u32,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Renders `Some(place)` as `"file:line:column: "` and `None` as nothing, so each variant's
/// message is one line whether or not the engine knew where.
struct At<'a>(&'a Option<Place>);

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(place) => write!(f, "{place}: "),
            None => Ok(()),
        }
    }
}

/// Why compiling or calling a script failed. Every variant is one line of text; none carries a
/// value that came from the network (a response body stays out of messages: a script that
/// throws it is quoted only as far as its own message goes, cut at [`MESSAGE_MAX`] characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The file does not parse, or its top-level code threw while the runtime was built.
    #[error("{}{message}", At(at))]
    Compile {
        /// Where, when QuickJS said (a syntax error always has a place).
        at: Option<Place>,
        /// QuickJS's message, e.g. `unexpected token in expression: '}'`.
        message: String,
    },
    /// The hook threw: an `Error` (with its place) or any other value (`throw "no token"`).
    #[error("{}{function}: {message}", At(at))]
    Exception {
        /// The hook that was called.
        function: String,
        /// Where it was thrown, when the thrown value was an `Error` with a stack.
        at: Option<Place>,
        /// The error's `name: message`, or the thrown value as text.
        message: String,
    },
    /// The call ran past [`crate::Limits::call_time`] and was interrupted.
    #[error("{}{function}: interrupted after {} ms (the script's call time limit)", At(at), limit.as_millis())]
    Timeout {
        /// The hook that was called.
        function: String,
        /// The limit it ran past.
        limit: Duration,
        /// Where it was running when interrupted.
        at: Option<Place>,
    },
    /// The runtime reached [`crate::Limits::memory_bytes`]; the runtime was rebuilt after it.
    #[error("{function}: out of memory (the script runtime's limit is {limit_bytes} bytes)")]
    OutOfMemory {
        /// The hook that was called.
        function: String,
        /// The limit it reached.
        limit_bytes: usize,
    },
    /// The hook returned a value of the wrong shape (e.g. a number from a response hook).
    #[error("{function}: {message}")]
    BadReturn {
        /// The hook that was called.
        function: String,
        /// What was expected and what came.
        message: String,
    },
}

/// Messages of thrown values are cut here: a script that throws a whole response body must not
/// put megabytes into a failure sample.
pub const MESSAGE_MAX: usize = 300;

/// Cuts `text` to [`MESSAGE_MAX`] characters, to one line.
pub(crate) fn one_line(text: &str) -> String {
    let mut out: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MESSAGE_MAX).collect();
    if text.chars().count() > MESSAGE_MAX {
        out.push('…');
    }
    out
}

/// The place of the innermost frame of a QuickJS stack that lies in a script file, read from
/// lines like `    at sign (auth.js:12:7)` or `    at auth.js:3:1`. Frames of native functions
/// (`at hmac (native)`) are skipped: the line that matters is the script's.
pub(crate) fn place_from_stack(stack: &str) -> Option<Place> {
    stack.lines().find_map(|line| {
        let line = line.trim().strip_prefix("at ")?;
        // `name (file:line:col)` or `file:line:col`.
        let loc = match (line.rfind('('), line.ends_with(')')) {
            (Some(open), true) => &line[open + 1..line.len() - 1],
            _ => line,
        };
        let mut parts = loc.rsplitn(3, ':');
        let column = parts.next()?.parse().ok()?;
        let line_no = parts.next()?.parse().ok()?;
        let file = parts.next()?;
        if file.is_empty() || file == "native" {
            return None;
        }
        Some(Place { file: file.to_string(), line: line_no, column })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's file, line and column.
    type Frame<'a> = Option<(&'a str, u32, u32)>;

    #[test]
    fn stack_frames() {
        let cases: &[(&str, Frame)] = &[
            // A named function's frame.
            ("    at sign (auth.js:12:7)\n", Some(("auth.js", 12, 7))),
            // Top-level code has no function name.
            ("    at auth.js:3:1\n", Some(("auth.js", 3, 1))),
            // A native frame is skipped for the script's frame under it.
            ("    at hmac (native)\n    at sign (lib/auth.js:4:20)\n", Some(("lib/auth.js", 4, 20))),
            // A file name with a colon in it (a Windows path) keeps it.
            ("    at f (C:\\s\\a.js:1:2)\n", Some(("C:\\s\\a.js", 1, 2))),
            // No frame at all.
            ("", None),
            // A line that is not a frame.
            ("garbage (x:y:z)", None),
        ];
        for (stack, want) in cases {
            let got = place_from_stack(stack);
            let want = want.map(|(f, l, c)| Place { file: f.to_string(), line: l, column: c });
            assert_eq!(got, want, "{stack:?}");
        }
    }

    #[test]
    fn one_line_each() {
        let at = Some(Place { file: "auth.js".into(), line: 3, column: 9 });
        let cases: &[(ScriptError, &str)] = &[
            // A syntax error with its place.
            (
                ScriptError::Compile { at: at.clone(), message: "SyntaxError: unexpected token".into() },
                "auth.js:3:9: SyntaxError: unexpected token",
            ),
            // A thrown string has no place.
            (
                ScriptError::Exception { function: "sign".into(), at: None, message: "no token".into() },
                "sign: no token",
            ),
            // A timeout says the limit.
            (
                ScriptError::Timeout { function: "spin".into(), limit: Duration::from_millis(100), at },
                "auth.js:3:9: spin: interrupted after 100 ms (the script's call time limit)",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), *want);
        }
    }

    #[test]
    fn messages_are_cut_to_one_line() {
        let long = format!("a\nb{}", "x".repeat(1000));
        let cut = one_line(&long);
        assert!(!cut.contains('\n'));
        assert_eq!(cut.chars().count(), MESSAGE_MAX + 1);
    }
}
