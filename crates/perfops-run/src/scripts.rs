//! A scenario's `scripts:` read and compiled for `check` and for the
//! commands that run load: each file read beside the scenario (never
//! through a link out of its folder, under [`Cap::SCRIPT`]), compiled by
//! the script engine, and every function the scenario names looked up. What
//! is wrong comes back as diagnostics in the scenario's format, each with
//! the text it points into: a syntax error at the script's own
//! file:line:column (rendered under that file's line), a function the
//! scripts do not define at the scenario's line that names it ("no function
//! `sgin` in auth.js; did you mean `sign`?").

use std::path::Path;

use perfops_core::input::{self, Cap};
use perfops_core::scenario::script::{InlineCode, ScriptsSpec};
use perfops_core::scenario::{Diagnostic, Diagnostics};
use perfops_engine::{ScriptPlan, missing_function};
use perfops_script::{Limits, ScriptError, Scripts};

/// Diagnostics, each with the text its line is shown from.
pub(crate) struct Problems(pub(crate) Vec<(Diagnostic, String)>);

impl Problems {
    /// All of them rendered as `check` prints errors.
    pub(crate) fn render(&self) -> String {
        self.0.iter().map(|(d, text)| Diagnostics(vec![d.clone()]).render(text)).collect()
    }
}

/// The files of `spec` read beside the scenario in `folder` (each named as
/// the scenario names it, the name its errors print), or what could not be
/// read, at the place each is written.
pub(crate) fn read(spec: &ScriptsSpec, folder: &Path) -> Result<Vec<(String, String)>, Vec<Diagnostic>> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for (name, at) in &spec.files {
        let text = input::read_beside(folder, Path::new(name), Cap::SCRIPT)
            .map_err(|e| e.to_string())
            .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8 text".to_owned()));
        match text {
            Ok(t) => files.push((name.clone(), t)),
            Err(why) => errors.push(at.error(
                format!("script file {}: {why}", folder.join(name).display()),
                Some("a script's path is relative to the scenario file's folder".into()),
            )),
        }
    }
    if errors.is_empty() { Ok(files) } else { Err(errors) }
}

/// `spec`'s files (read with [`read`]) compiled, with its limits, and every
/// function the scenario names defined; or every problem, in the scenario
/// file `scenario_text`'s place or a script's.
pub(crate) fn compile(spec: &ScriptsSpec, folder: &Path, scenario_text: &str) -> Result<ScriptPlan, Problems> {
    let mut files = read(spec, folder)
        .map_err(|errors| Problems(errors.into_iter().map(|d| (d, scenario_text.to_string())).collect()))?;
    // Inline code: a function each, after the files (so that it may call theirs).
    files.extend(spec.inline.iter().map(|c| (c.file_name(), c.source())));
    let scripts = Scripts::compile(&files).map_err(|errors| {
        Problems(errors.into_iter().map(|e| script_diagnostic(&e, &files, spec, scenario_text)).collect())
    })?;
    let missing: Vec<(Diagnostic, String)> = spec
        .uses
        .iter()
        .filter(|u| !scripts.has(&u.function))
        .map(|u| {
            let d = u.at.error(
                missing_function(&scripts, &u.function),
                Some("a hook or script step names a top-level `function NAME(...)` of the scripts".into()),
            );
            (d, scenario_text.to_string())
        })
        .collect();
    if !missing.is_empty() {
        return Err(Problems(missing));
    }
    let limits =
        Limits { call_time: spec.timeout, memory_bytes: usize::try_from(spec.memory_bytes).unwrap_or(usize::MAX) };
    Ok(ScriptPlan { scripts, limits, on_error: spec.on_error })
}

/// A compile error as a diagnostic at its file:line:column, with that file's
/// text; inline code's at the scenario's place of the code, with the line
/// and column inside it said when the code has more than one line.
fn script_diagnostic(
    e: &ScriptError,
    files: &[(String, String)],
    spec: &ScriptsSpec,
    scenario_text: &str,
) -> (Diagnostic, String) {
    let (at, message) = match e {
        ScriptError::Compile { at, message } => (at.clone(), message.clone()),
        other => (None, other.to_string()),
    };
    if let Some((code, p)) =
        at.as_ref().and_then(|p| spec.inline.iter().find(|c| c.file_name() == p.file).map(|c| (c, p)))
    {
        let mut d = code.at.error(
            message,
            Some("inline code is the body of a function: `return` what a hook or script step returns".into()),
        );
        (d.line, d.column) = inline_place(code, scenario_text, p.line as usize, p.column as usize);
        return (d, scenario_text.to_string());
    }
    let file = at.as_ref().map_or_else(|| files.first().map(|f| f.0.clone()).unwrap_or_default(), |p| p.file.clone());
    let text = files.iter().find(|(name, _)| *name == file).map(|(_, t)| t.clone()).unwrap_or_default();
    let d = Diagnostic {
        file,
        line: at.as_ref().map_or(0, |p| p.line as usize),
        column: at.as_ref().map_or(0, |p| p.column as usize),
        path: String::new(),
        message,
        hint: Some("the scripts are JavaScript (ES2023), evaluated once per worker".into()),
    };
    (d, text)
}

/// The scenario's line and column of the source's `line`:`column` in inline
/// code `code` (1-based; its line n is the source's n + 1, after the
/// function's head). A block scalar (`|`) starts at its first line of code
/// with the indentation stripped, so a line and column map one to one; a
/// one-line scalar at its first character, or its quote. An error past the
/// code (an unclosed expression, found at the function's closing brace) is
/// placed at the end of its last line.
fn inline_place(code: &InlineCode, scenario_text: &str, line: usize, column: usize) -> (usize, usize) {
    let (at_line, at_column) = (code.at.line, code.at.column);
    let lines: Vec<&str> = code.code.trim_end_matches('\n').split('\n').collect();
    let (n, column) = match line.checked_sub(2) {
        Some(n) if n < lines.len() => (n, column.max(1)),
        // The head (line 1) cannot hold an error of the code's; past the code: its end.
        _ => (lines.len() - 1, lines[lines.len() - 1].chars().count() + 1),
    };
    if lines.len() > 1 {
        return (at_line + n, at_column + column - 1);
    }
    let quoted = scenario_text
        .lines()
        .nth(at_line.saturating_sub(1))
        .and_then(|l| l.chars().nth(at_column.saturating_sub(1)))
        .is_some_and(|c| c == '"' || c == '\'');
    (at_line, at_column + usize::from(quoted) + column - 1)
}
