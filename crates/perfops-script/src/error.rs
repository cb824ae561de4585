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

/// Where an interrupted call was looping, from the place QuickJS gave (`at`) and the file's
/// `text`: `at` itself, unless it is a function's own definition (`function spin() {`), and then
/// the first loop (`for`, `while`, `do`) after it.
///
/// Subtleness ahead: QuickJS dates an interrupt at a loop's back edge by the instruction before
/// the loop's head (its frame's pc, less one, is looked up after the jump), so it names the last
/// statement it located before the loop, and when the loop is the function's first located
/// statement (`for (;;) {}` alone, `while (true) { n++; }` first), the function's own definition.
/// The loop that was running is then the first one after that definition: a loop before it
/// would have been located (a finite loop tests a condition, which QuickJS locates). Comments and
/// string literals are skipped; a regular expression holding a quote could mislead the scan, and
/// then the place is at worst another line of the same function.
pub(crate) fn loop_after(at: Place, text: &str) -> Place {
    let Some(start) = offset_of(text, at.line, at.column) else { return at };
    let rest = &text[start..];
    if !(rest.starts_with("function") || rest.starts_with("async function")) {
        return at;
    }
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = rest[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = rest[i + 2..].find("*/").map_or(bytes.len(), |n| i + 2 + n + 2);
            }
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b if b.is_ascii_alphabetic() || b == b'_' || b == b'$' => {
                let word_end = rest[i..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                    .map_or(rest.len(), |n| i + n);
                if matches!(&rest[i..word_end], "for" | "while" | "do") {
                    return place_of(text, start + i, at.file);
                }
                i = word_end;
            }
            _ => i += 1,
        }
    }
    at
}

/// The byte offset of 1-based `line` and `column` (UTF-16 units, as QuickJS counts) in `text`.
fn offset_of(text: &str, line: u32, column: u32) -> Option<usize> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(usize::try_from(line - 2).ok()?).map(|(i, _)| i + 1)?
    };
    let mut units = 1;
    for (i, c) in text[line_start..].char_indices() {
        if units >= column {
            return Some(line_start + i);
        }
        if c == '\n' {
            return None;
        }
        units += u32::try_from(c.len_utf16()).unwrap_or(1);
    }
    None
}

/// The place of byte `offset` of `text` in `file`, its column in UTF-16 units.
fn place_of(text: &str, offset: usize, file: String) -> Place {
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = u32::try_from(before.matches('\n').count() + 1).unwrap_or(u32::MAX);
    let column = u32::try_from(before[line_start..].encode_utf16().count() + 1).unwrap_or(u32::MAX);
    Place { file, line, column }
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

    /// Where an interrupted loop is placed, from the place QuickJS gave.
    #[test]
    fn an_interrupt_at_a_functions_definition_is_placed_at_its_loop() {
        let text = "// a comment: for (;;) here is no loop\nfunction spin(req) {\n  /* while */ const s = \"do\";\n  for (;;) {}\n}\nfunction é(x) { while (true) {} }\n";
        let at = |line, column| Place { file: "a.js".into(), line, column };
        let cases = [
            // The function's definition: its first loop, past a comment and a string that name loops.
            (at(2, 1), at(4, 3)),
            // A statement QuickJS located (a call in the loop): kept.
            (at(4, 3), at(4, 3)),
            // A place on a comment: not a function's definition, kept.
            (at(1, 1), at(1, 1)),
            // A one-line function with a non-ASCII name: the column in UTF-16 units, as QuickJS counts.
            (at(6, 1), at(6, 17)),
            // A place past the end of its line or file: kept.
            (at(9, 1), at(9, 1)),
        ];
        for (given, want) in cases {
            assert_eq!(loop_after(given.clone(), text), want, "{given}");
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
