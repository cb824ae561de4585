//! Decoding what a scenario asks of its scripts: the top-level `scripts:`
//! (the JavaScript files and their limits), a `script: NAME` step (a call,
//! not a request), and the request and response hooks of a step or of
//! `defaults:` (`before: sign`, `after: check_page`).
//!
//! Where a function name goes, a few lines of JavaScript may go instead
//! (inline code: anything that is not a bare name, e.g.
//! `before: "req.headers['X-Ts'] = String(Date.now())"`): each becomes a
//! function of its own ([`InlineCode`]), which the caller compiles beside the
//! files, so that it runs in the same sandbox and is called as a named hook
//! is, with nothing looked up per call.
//!
//! Only names are checked here: that a function name is one JavaScript
//! could define, that hooks have a `scripts:` (or inline code) to live in,
//! that a script step carries nothing a request would. Whether the files compile and define the
//! functions named is asked of the script engine by the caller (`check`,
//! `run`), with every use kept in [`ScriptsSpec::uses`] so that its answer
//! ("no function `sgin` in auth.js") points at the line that named it.
//! Nothing here reads files: the caller does, relative to the scenario's
//! folder.

use std::time::Duration;

use marked_yaml::Node;
use marked_yaml::types::MarkedMappingNode;

use super::Origin;
use super::decode::{Dec, join};
use super::diag::did_you_mean;

/// The fields of `scripts:` written as a mapping.
pub(super) const SCRIPTS: &[&str] = &["files", "timeout", "memory", "on_error"];
/// The fields of a `script:` step.
pub(super) const SCRIPT_STEP: &[&str] = &["name", "script", "pause"];
const ON_ERROR: &[&str] = &["end_flow", "continue"];

/// A call's time limit when `scripts.timeout` is not given: a hook that
/// signs a request takes microseconds; one that takes 50 ms is looping.
pub const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_millis(50);
/// A runtime's memory limit when `scripts.memory` is not given (one runtime
/// per worker, whatever the users: this is the whole cost per core).
pub const DEFAULT_SCRIPT_MEMORY_BYTES: u64 = 64 << 20;

/// `scripts:`: the JavaScript files a scenario's hooks and script steps
/// call into, their limits, and every place a function is named.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptsSpec {
    /// The files, as written (relative to the scenario file's folder), each
    /// with where it is written.
    pub files: Vec<(String, Origin)>,
    /// The longest one call may run before it is interrupted.
    pub timeout: Duration,
    /// A runtime's memory limit.
    pub memory_bytes: u64,
    /// What a script error (an exception, a timeout, memory) does to its flow.
    pub on_error: OnScriptError,
    /// Every function the scenario names (hooks, script steps), where: the
    /// engine is asked whether each is defined.
    pub uses: Vec<FunctionUse>,
    /// The inline code written where a function name goes, each made a
    /// function of its own (its name begins with [`INLINE_PREFIX`]).
    pub inline: Vec<InlineCode>,
}

impl ScriptsSpec {
    /// No files, nothing named, the default limits.
    fn empty() -> ScriptsSpec {
        ScriptsSpec {
            files: Vec::new(),
            timeout: DEFAULT_SCRIPT_TIMEOUT,
            memory_bytes: DEFAULT_SCRIPT_MEMORY_BYTES,
            on_error: OnScriptError::EndFlow,
            uses: Vec::new(),
            inline: Vec::new(),
        }
    }
}

/// What the name of a function made from inline code begins with: no
/// scenario names one, and `check` leaves them out of its suggestions.
pub const INLINE_PREFIX: &str = "__perfops_inline_";
/// What the name its errors print ends with ([`InlineCode::file_name`]).
pub const INLINE_FILE_SUFFIX: &str = " (inline)";

/// Inline code: a function body written in the scenario where a function
/// name goes (`before:`, `after:`, `script:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineCode {
    /// The name it is called by ([`INLINE_PREFIX`] and a number).
    pub function: String,
    /// The parameter it takes: `req` (a request hook), `res` (a response
    /// hook) or none (a script step).
    pub param: &'static str,
    /// The code, as written: the body of the function.
    pub code: String,
    /// Where it is written (the scalar's start).
    pub at: Origin,
}

impl InlineCode {
    /// The JavaScript source that defines it: its body from the second line
    /// on, so that a line `n` of the code is line `n + 1` of the source.
    pub fn source(&self) -> String {
        format!("function {}({}) {{\n{}\n}}\n", self.function, self.param, self.code)
    }

    /// The file name its errors print: the scenario's place of the code.
    pub fn file_name(&self) -> String {
        format!("{}:{}:{}{INLINE_FILE_SUFFIX}", self.at.file, self.at.line, self.at.column)
    }
}

/// One place the scenario names a script function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionUse {
    /// The function's name.
    pub function: String,
    /// Where it is written.
    pub at: Origin,
}

/// `scripts.on_error`: what a flow does after a script error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnScriptError {
    /// The flow ends, as after any failed step (the default).
    #[default]
    EndFlow,
    /// The flow goes on with its next step (the failing step still counts
    /// as failed).
    Continue,
}

/// A step's part in scripts: a call instead of a request, or hooks around
/// its request. Empty for a step that names no function (every step of a
/// scenario without `scripts:`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepScript {
    /// `script: NAME`: the step calls the function and sends nothing.
    pub call: Option<String>,
    /// The request hook: called with the rendered request just before it
    /// is sent; it may change method, path, headers and body.
    pub before: Option<String>,
    /// The response hook: called with status, headers and body; it may save
    /// values and fail the step with a reason.
    pub after: Option<String>,
}

impl StepScript {
    /// Names no function.
    pub fn is_empty(&self) -> bool {
        self.call.is_none() && self.before.is_none() && self.after.is_none()
    }
}

/// A name JavaScript accepts for a function declared with `function NAME`
/// (ASCII only: what a scenario names must be typed in YAML as in the file).
pub fn is_function_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

impl Dec<'_> {
    /// `scripts: auth.js`, `scripts: [a.js, b.js]` or
    /// `scripts: { files: [...], timeout: 50ms, memory: 64MiB, on_error: continue }`.
    pub(super) fn scripts(&mut self, node: &Node) -> Option<ScriptsSpec> {
        let mut spec = ScriptsSpec::empty();
        let files = match node {
            Node::Mapping(_) => {
                let m = self.map(node, "scripts", SCRIPTS)?;
                self.script_settings(m, &mut spec);
                match self.required(m, "files", "scripts", "files: [auth.js]") {
                    Some(f) => f,
                    None => return Some(spec),
                }
            }
            other => other,
        };
        let path = if matches!(node, Node::Mapping(_)) { "scripts.files" } else { "scripts" };
        let items: Vec<&Node> = match files {
            Node::Sequence(s) => s.iter().collect(),
            one => vec![one],
        };
        if items.is_empty() {
            self.at(files.span(), path, "no script files", Some("scripts: auth.js".into()));
        }
        for (i, item) in items.into_iter().enumerate() {
            let p = if matches!(files, Node::Sequence(_)) { format!("{path}[{i}]") } else { path.to_string() };
            let Some(s) = self.scalar(item, &p, "a file name such as auth.js") else { continue };
            let name = s.as_str().trim();
            if name.is_empty() {
                self.at(s.span(), &p, "an empty file name", Some("scripts: auth.js".into()));
                continue;
            }
            let at = self.origin(s.span().start(), &p);
            if spec.files.iter().any(|(f, _)| f == name) {
                self.at(s.span(), &p, format!("`{name}` is named twice"), Some("name each file once".into()));
                continue;
            }
            spec.files.push((name.to_string(), at));
        }
        Some(spec)
    }

    fn script_settings(&mut self, m: &MarkedMappingNode, spec: &mut ScriptsSpec) {
        if let Some(t) = m.get_node("timeout").and_then(|n| self.duration(n, "scripts.timeout")) {
            if t.is_zero() {
                let at = m.get_node("timeout").map(|n| *n.span()).unwrap_or(*m.span());
                self.at(&at, "scripts.timeout", "a time limit of 0 stops every call", Some("e.g. 50ms".into()));
            } else {
                spec.timeout = t;
            }
        }
        if let Some(n) = m.get_node("memory") {
            let Some(s) = self.scalar(n, "scripts.memory", "a size such as 64MiB") else { return };
            match parse_size(s.as_str()) {
                Some(b) if b >= 1 << 20 => spec.memory_bytes = b,
                Some(_) => self.at(
                    s.span(),
                    "scripts.memory",
                    format!("`{}` is too little for a JavaScript runtime", s.as_str()),
                    Some("1MiB at least; the default is 64MiB".into()),
                ),
                None => self.at(
                    s.span(),
                    "scripts.memory",
                    format!("`{}` is not a size", s.as_str()),
                    Some("e.g. 64MiB, 512KiB, 1GiB (or MB, KB, GB)".into()),
                ),
            }
        }
        if let Some(s) = m.get_node("on_error").and_then(|n| self.scalar(n, "scripts.on_error", "end_flow or continue"))
        {
            spec.on_error = match s.as_str().trim() {
                "end_flow" => OnScriptError::EndFlow,
                "continue" => OnScriptError::Continue,
                other => {
                    let hint = did_you_mean(other, ON_ERROR)
                        .map_or_else(|| "end_flow or continue".to_string(), |d| format!("did you mean `{d}`?"));
                    self.at(s.span(), "scripts.on_error", format!("unknown `on_error` `{other}`"), Some(hint));
                    OnScriptError::EndFlow
                }
            };
        }
    }

    /// A function name written at `node` (`before:`, `after:`, `script:`),
    /// noted as a use for the engine's check; or inline code (anything that
    /// is not a bare name), made a function taking `param` and named so.
    pub(super) fn function(&mut self, node: &Node, path: &str, param: &'static str) -> Option<String> {
        let s = self.scalar(node, path, "a function name, or JavaScript code")?;
        let name = s.as_str().trim();
        let at = self.origin(s.span().start(), path);
        if name.is_empty() {
            self.at(
                s.span(),
                path,
                "no function name and no code",
                Some("the name of a function the scripts declare, e.g. `sign`, or a line of JavaScript".into()),
            );
            return None;
        }
        if is_function_name(name) {
            self.function_uses.push(FunctionUse { function: name.to_string(), at });
            return Some(name.to_string());
        }
        let function = format!("{INLINE_PREFIX}{}", self.inline_code.len());
        self.inline_code.push(InlineCode { function: function.clone(), param, code: s.as_str().to_string(), at });
        Some(function)
    }

    /// A step's `before:` and `after:`, over `defaults` (the hooks of
    /// `defaults:`, for a step that names none of its own).
    pub(super) fn hooks(&mut self, m: &MarkedMappingNode, path: &str, defaults: &StepScript) -> StepScript {
        let mut out = StepScript { call: None, before: defaults.before.clone(), after: defaults.after.clone() };
        if let Some(n) = m.get_node("before") {
            out.before = self.function(n, &join(path, "before"), "req");
        }
        if let Some(n) = m.get_node("after") {
            out.after = self.function(n, &join(path, "after"), "res");
        }
        out
    }

    /// A `script: NAME` step: the call, its name in results and its pause.
    pub(super) fn script_step(&mut self, node: &Node, path: &str) -> Option<super::Step> {
        let m = self.map(node, path, SCRIPT_STEP)?;
        let sp = join(path, "script");
        let call = m.get_node("script").and_then(|n| self.function(n, &sp, ""));
        let pause = m.get_node("pause").and_then(|p| self.duration(p, &join(path, "pause"))).unwrap_or_default();
        let call = call?;
        // Inline code's step is named by its place, not by its generated function.
        let unnamed = if call.starts_with(INLINE_PREFIX) {
            format!("script at line {}", self.origin(node.span().start(), path).line)
        } else {
            format!("script {call}")
        };
        let name = m.get_node("name").and_then(|n| self.string(n, &join(path, "name"))).unwrap_or(unnamed);
        Some(super::Step {
            name,
            method: String::new(),
            path: super::template::Template::literal(""),
            headers: Vec::new(),
            body: super::Body::None,
            expect: None,
            save: Vec::new(),
            pause,
            grpc: None,
            websocket: None,
            stream: None,
            script: StepScript { call: Some(call), before: None, after: None },
            llm: None,
        })
    }

    /// Hooks need `scripts:`: each use of a name reported when the scenario
    /// has none. Inline code needs no file: a scenario with inline code and
    /// no `scripts:` gets one with no files and the default limits.
    pub(super) fn check_functions(&mut self, scripts: &mut Option<ScriptsSpec>) {
        let uses = std::mem::take(&mut self.function_uses);
        let inline = std::mem::take(&mut self.inline_code);
        if scripts.is_none() && !inline.is_empty() && uses.is_empty() {
            *scripts = Some(ScriptsSpec::empty());
        }
        match scripts {
            Some(s) => {
                s.uses = uses;
                s.inline = inline;
            }
            None => {
                for u in uses {
                    let error = u.at.error(
                        format!("`{}` names a script function, and the scenario has no `scripts:`", u.function),
                        Some("name the file that defines it: `scripts: auth.js` at the top level".into()),
                    );
                    self.errors.push(error);
                }
            }
        }
    }
}

/// A size: `64MiB`, `512KiB`, `1GiB`, `64MB`, or bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "KB" | "K" | "k" => 1 << 10,
        "MiB" | "MB" | "M" => 1 << 20,
        "GiB" | "GB" | "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Whether `node` is a `script:` step (it has the key).
pub(super) fn is_script_step(node: &Node) -> bool {
    node.as_mapping().is_some_and(|m| m.get_node("script").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes as `scripts.memory` takes them.
    #[test]
    fn sizes() {
        let cases: &[(&str, Option<u64>)] = &[
            // Binary units, the documented spelling.
            ("64MiB", Some(64 << 20)),
            ("512KiB", Some(512 << 10)),
            ("1GiB", Some(1 << 30)),
            // MB read as MiB: a memory limit is not a disk size, and nobody means 10^6 here.
            ("64MB", Some(64 << 20)),
            // Plain bytes.
            ("1048576", Some(1 << 20)),
            // Not sizes.
            ("MiB", None),
            ("64 parsecs", None),
            ("-1MiB", None),
            // Past u64: refused, not wrapped.
            ("99999999999999999999GiB", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), *want, "{text}");
        }
    }

    /// Function names: what `function NAME` declares.
    #[test]
    fn function_names() {
        let cases: &[(&str, bool)] = &[
            ("sign", true),
            ("check_page", true),
            ("$sign", true),
            ("_private", true),
            ("sign2", true),
            // A leading digit is not an identifier.
            ("2sign", false),
            // Calls and expressions are not names.
            ("sign()", false),
            ("a.b", false),
            ("", false),
            ("with space", false),
        ];
        for (name, ok) in cases {
            assert_eq!(is_function_name(name), *ok, "{name}");
        }
    }
}
