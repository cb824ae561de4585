//! `${...}` templates: request lines, headers and bodies that carry variables. This module owns the
//! template syntax (parsed once, when the scenario is validated, with byte offsets for every error) and
//! rendering (per request, on the hot path: no allocation when the output buffer has room). It does not
//! own where values come from: the engine answers through [`Vars`], and randomness comes from a
//! caller-owned [`fastrand::Rng`] so that runs are reproducible and this crate reads no clock.
//!
//! Syntax:
//!
//! | form | value |
//! |---|---|
//! | `${token}` | saved by an earlier step or by `setup` ([`VarRef::Saved`]) |
//! | `${env.NAME}` | the environment variable `NAME` ([`VarRef::Env`]) |
//! | `${seq}` | the arrival number ([`VarRef::Seq`]) |
//! | `${uuid}` | a random v4 UUID ([`VarRef::Uuid`]) |
//! | `${random.int(1,100)}` | a random integer, bounds inclusive ([`VarRef::RandomInt`]) |
//! | `${users.email}` | column `email` of feeder `users` ([`VarRef::Feeder`]) |
//! | `$${` | a literal `${` |
//! | `${orders.qty:number}`, `${id:string}` | the same value, typed where it is a whole `json:` value ([`typed`]) |
//!
//! Names are `[A-Za-z_][A-Za-z0-9_]*`; blanks just inside the braces are ignored (`${ token }`).
//! `seq`, `uuid`, `env` and `random` are reserved: they never name a saved value or a feeder.
//!
//! A template that lands in a request's head (its target, a header value, gRPC metadata) is rendered
//! with [`Template::render_head`]: a value holding CR, LF or NUL is refused there, whatever its
//! source (issue #31: a token saved from a response smuggled a header and a second request), and the
//! target is percent-encoded ([`head`]).
//!
//! A template that is a whole value of a `json:` body (`qty: ${orders.qty}`) is rendered with
//! [`Template::render_json_value`]: it keeps its value's JSON type, or the one a conversion asks for
//! (issue #32, [`typed`]).

pub mod head;
pub mod typed;

pub use typed::{Conversion, NotANumber};

use std::fmt;
use std::ops::Range;

/// A reference inside `${...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VarRef {
    /// `${token}`: a value saved by an earlier step or by `setup`.
    Saved(String),
    /// `${env.NAME}`: an environment variable.
    Env(String),
    /// `${seq}`: the arrival number.
    Seq,
    /// `${uuid}`: random v4 UUID text (lowercase, hyphenated).
    Uuid,
    /// `${random.int(MIN,MAX)}`: a random integer in `MIN..=MAX` (`MIN <= MAX`, checked by the parser).
    RandomInt(i64, i64),
    /// `${users.email}` where `users` is a declared feeder.
    Feeder {
        /// The feeder's name (`users`).
        feeder: String,
        /// The column's name (`email`).
        column: String,
    },
}

/// How rendered text is escaped for the place it lands in.
///
/// The escape applies to the *whole* rendered text, literal parts included: use [`Escape::JsonString`]
/// when the template is the content of a JSON string (a leaf of a `json:` body, written without its
/// quotes) and [`Escape::Form`] when it is a key or value of an `application/x-www-form-urlencoded`
/// body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Escape {
    /// Raw bytes, as they are (request lines, headers, raw bodies).
    #[default]
    None,
    /// The content of a JSON string: `"`, `\` and control characters are escaped (RFC 8259 §7).
    JsonString,
    /// `application/x-www-form-urlencoded`: alphanumerics and `*-._` stay, a space becomes `+`, every
    /// other byte becomes `%XX` (the WHATWG URL standard's serializer).
    Form,
}

/// A template could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    /// Byte offset in the template text where the problem is.
    pub offset: usize,
    /// What is wrong, in one line.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    pub hint: Option<String>,
}

impl TemplateError {
    fn new(offset: usize, message: impl Into<String>) -> TemplateError {
        TemplateError { offset, message: message.into(), hint: None }
    }

    fn hint(mut self, hint: impl Into<String>) -> TemplateError {
        self.hint = Some(hint.into());
        self
    }
}

/// A variable had no value when a template was rendered; it rendered as an empty string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no value for {0}")]
pub struct MissingVar(
    /// The `${...}` text that had no value, as written in the template.
    pub String,
);

/// Where in a request's head a template's text lands ([`Template::render_head`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadPlace {
    /// The request target (path and query): percent-encoded ([`head::write_target`]).
    Target,
    /// A header value or gRPC metadata: as it is.
    HeaderValue,
}

/// A CR, LF or NUL would have gone into a request's head: the request is not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} holds {} where it would go into the request's head", .var.as_deref().unwrap_or("the text"), head::refused_name(*byte))]
pub struct UnsafeValue {
    /// The `${...}` whose value held it, as written in the template; `None`: the template's own text.
    /// The value itself is not kept: it may be a secret.
    pub var: Option<String>,
    /// The byte: `\r`, `\n` or `\0`.
    pub byte: u8,
}

/// Why a head's template did not render cleanly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A variable had no value; it rendered empty and rendering went on.
    #[error(transparent)]
    Missing(#[from] MissingVar),
    /// A value held CR, LF or NUL; rendering stopped, and the request must not be sent.
    #[error(transparent)]
    Unsafe(#[from] UnsafeValue),
    /// A value forced to a number (`${x:number}`) was not one; rendering stopped, and the request must
    /// not be sent.
    #[error(transparent)]
    NotANumber(#[from] NotANumber),
}

impl RenderError {
    /// True when the request must not be sent (a refused value), false when it was only incomplete (a
    /// missing value rendered empty).
    pub fn refuses(&self) -> bool {
        !matches!(self, RenderError::Missing(_))
    }
}

/// Where the values of variables come from at render time (the engine's per-request state).
pub trait Vars {
    /// A value saved by `save:` in an earlier step or in `setup`.
    fn saved(&self, name: &str) -> Option<&str>;
    /// An environment variable.
    fn env(&self, name: &str) -> Option<&str>;
    /// The arrival number of the request being rendered.
    fn seq(&self) -> u64;
    /// Column `column` of the row that feeder `feeder` gave this arrival.
    fn feeder(&self, feeder: &str, column: &str) -> Option<&str>;
}

const SUPPORTED: &str =
    "supported: `${name}`, `${env.NAME}`, `${seq}`, `${uuid}`, `${random.int(MIN,MAX)}`, `${FEEDER.COLUMN}`";
const NAME_RULE: &str = "names are letters, digits and `_`, and do not start with a digit";

/// A literal run, with whether it can be copied as is under each [`Escape`] (decided once, at parse
/// time, so rendering a plain literal stays one `extend_from_slice` whatever the escape).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Literal {
    text: Box<str>,
    json_clean: bool,
    form_clean: bool,
    /// Goes into a request target as it is ([`head::target_clean`]).
    target_clean: bool,
    /// Holds CR, LF or NUL: the first such byte.
    refused: Option<u8>,
}

impl Literal {
    fn new(text: &str) -> Literal {
        let bytes = text.as_bytes();
        Literal {
            text: text.into(),
            json_clean: bytes.iter().all(|&b| json_safe(b)),
            form_clean: bytes.iter().all(|&b| form_safe(b)),
            target_clean: head::target_clean(bytes),
            refused: head::first_refused(bytes).map(|i| bytes[i]),
        }
    }

    fn write(&self, out: &mut Vec<u8>, escape: Escape) {
        let clean = match escape {
            Escape::None => true,
            Escape::JsonString => self.json_clean,
            Escape::Form => self.form_clean,
        };
        if clean {
            out.extend_from_slice(self.text.as_bytes());
        } else {
            write_escaped(out, self.text.as_bytes(), escape);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(Literal),
    /// `span` is the `${...}` in the source, for [`MissingVar`]; `to` its `:string` / `:number`.
    Var {
        var: VarRef,
        span: Range<usize>,
        to: Option<Conversion>,
    },
}

/// A compiled template: literal runs and variable references, in order. Parse it once with
/// [`Template::parse`], render it per request with [`Template::render`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: Box<str>,
    /// Adjacent literals are merged, so a template without variables has at most one part.
    parts: Vec<Part>,
}

impl Template {
    /// Parse `text`. `feeders` are the names of the declared feeders, so that `${users.email}` is a
    /// [`VarRef::Feeder`] and `${token}` a [`VarRef::Saved`].
    pub fn parse(text: &str, feeders: &[&str]) -> Result<Template, TemplateError> {
        let bytes = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = String::new();
        // Start of the literal run not yet copied into `lit`.
        let mut run = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'$' {
                i += 1;
                continue;
            }
            if bytes[i..].starts_with(b"$${") {
                lit.push_str(&text[run..i]);
                lit.push_str("${");
                i += 3;
                run = i;
                continue;
            }
            if bytes.get(i + 1) != Some(&b'{') {
                // A lone `$` is literal text: `$5`, `$.token` in a body, `a$`.
                i += 1;
                continue;
            }
            let inner_start = i + 2;
            let Some(len) = text[inner_start..].find('}') else {
                return Err(TemplateError::new(i, "unterminated `${`")
                    .hint("close it with `}`, or write `$${` for a literal `${`"));
            };
            let inner = &text[inner_start..inner_start + len];
            // `${orders.qty:number}`: no reference holds a `:`, so the first one starts a conversion.
            let (reference, to) = match inner.find(':') {
                Some(colon) => {
                    (&inner[..colon], Some(Conversion::parse(&inner[colon + 1..], inner_start + colon + 1)?))
                }
                None => (inner, None),
            };
            let var = parse_ref(reference, inner_start, i, feeders)?;
            lit.push_str(&text[run..i]);
            if !lit.is_empty() {
                parts.push(Part::Lit(Literal::new(&lit)));
                lit.clear();
            }
            let end = inner_start + len + 1;
            parts.push(Part::Var { var, span: i..end, to });
            i = end;
            run = end;
        }
        lit.push_str(&text[run..]);
        if !lit.is_empty() {
            parts.push(Part::Lit(Literal::new(&lit)));
        }
        Ok(Template { source: text.into(), parts })
    }

    /// A template that renders `text` exactly, with no `${...}` interpretation. Its
    /// [`source`](Template::source) is `text` itself.
    pub fn literal(text: &str) -> Template {
        let parts = if text.is_empty() { Vec::new() } else { vec![Part::Lit(Literal::new(text))] };
        Template { source: text.into(), parts }
    }

    /// The variables referenced, in order of appearance (repeats included).
    pub fn vars(&self) -> impl Iterator<Item = &VarRef> {
        self.parts.iter().filter_map(|part| match part {
            Part::Var { var, .. } => Some(var),
            Part::Lit(_) => None,
        })
    }

    /// True when the template has no variables (it may still have had `$${` escapes).
    pub fn is_literal(&self) -> bool {
        self.as_literal().is_some()
    }

    /// The text a template without variables always renders to (escapes resolved); `None` when it has
    /// variables.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Lit(lit)] => Some(&lit.text),
            _ => None,
        }
    }

    /// The original text, as given to [`Template::parse`] or [`Template::literal`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Append the rendered text to `out`, raw. Same as [`Template::render_escaped`] with
    /// [`Escape::None`].
    pub fn render(&self, vars: &dyn Vars, rng: &mut fastrand::Rng, out: &mut Vec<u8>) -> Result<(), MissingVar> {
        self.render_escaped(vars, rng, out, Escape::None)
    }

    /// Append the rendered text to `out`, escaped for the place it lands in (see [`Escape`]).
    ///
    /// Missing values render as empty strings and rendering goes on; the first one is reported as the
    /// error, so the caller decides whether that fails the request. Nothing is allocated unless `out`
    /// must grow (or a value is missing: the error owns its text).
    pub fn render_escaped(
        &self,
        vars: &dyn Vars,
        rng: &mut fastrand::Rng,
        out: &mut Vec<u8>,
        escape: Escape,
    ) -> Result<(), MissingVar> {
        let mut missing: Option<&Range<usize>> = None;
        for part in &self.parts {
            let (var, span) = match part {
                Part::Lit(lit) => {
                    lit.write(out, escape);
                    continue;
                }
                Part::Var { var, span, .. } => (var, span),
            };
            match var.value(vars, rng, out) {
                Value::Written => {}
                Value::Found(value) => write_escaped(out, value.as_bytes(), escape),
                Value::Missing => {
                    missing.get_or_insert(span);
                }
            }
        }
        match missing {
            None => Ok(()),
            Some(span) => Err(MissingVar(self.source[span.clone()].to_owned())),
        }
    }
}

impl Template {
    /// Append the rendered text to `out` for `place` in a request's head: the target percent-encoded,
    /// a header value as it is; a CR, LF or NUL anywhere (in a value or in the text itself) stops
    /// rendering with [`RenderError::Unsafe`], and the caller must not send the request.
    ///
    /// One pass over each value's bytes; literal text was classified at parse time, so a clean
    /// literal is one copy, as in [`Template::render`]. Missing values render empty as there, and the
    /// first is reported unless a value was refused.
    pub fn render_head(
        &self,
        vars: &dyn Vars,
        rng: &mut fastrand::Rng,
        out: &mut Vec<u8>,
        place: HeadPlace,
    ) -> Result<(), RenderError> {
        let mut missing: Option<&Range<usize>> = None;
        for part in &self.parts {
            let (var, span) = match part {
                Part::Lit(lit) => {
                    if let Some(byte) = lit.refused {
                        return Err(UnsafeValue { var: None, byte }.into());
                    }
                    match place {
                        HeadPlace::Target if !lit.target_clean => {
                            // Cannot fail: the literal holds no refused byte.
                            let _ = head::write_target(out, lit.text.as_bytes());
                        }
                        _ => out.extend_from_slice(lit.text.as_bytes()),
                    }
                    continue;
                }
                Part::Var { var, span, .. } => (var, span),
            };
            let bytes = match var.value(vars, rng, out) {
                Value::Written => continue,
                Value::Found(value) => value.as_bytes(),
                Value::Missing => {
                    missing.get_or_insert(span);
                    continue;
                }
            };
            let written = match place {
                HeadPlace::Target => head::write_target(out, bytes),
                HeadPlace::HeaderValue => head::write_header_value(out, bytes),
            };
            if let Err(i) = written {
                return Err(UnsafeValue { var: Some(self.source[span.clone()].to_owned()), byte: bytes[i] }.into());
            }
        }
        match missing {
            None => Ok(()),
            Some(span) => Err(MissingVar(self.source[span.clone()].to_owned()).into()),
        }
    }
}

/// What [`VarRef::value`] found.
enum Value<'v> {
    /// A built-in, already written.
    Written,
    /// The variable's value, to write as the place asks.
    Found(&'v str),
    /// No such value: it renders empty.
    Missing,
}

impl VarRef {
    /// This variable's value from `vars`. The built-ins (`${seq}`,
    /// `${random.int}`, `${uuid}`) are written to `out` at once: digits, `-`
    /// and hex need no escape under any [`Escape`] and are allowed everywhere
    /// in a request's head.
    #[inline]
    fn value<'v>(&self, vars: &'v dyn Vars, rng: &mut fastrand::Rng, out: &mut Vec<u8>) -> Value<'v> {
        let found = match self {
            VarRef::Saved(name) => vars.saved(name),
            VarRef::Env(name) => vars.env(name),
            VarRef::Feeder { feeder, column } => vars.feeder(feeder, column),
            VarRef::Seq => {
                write_u64(out, vars.seq());
                return Value::Written;
            }
            VarRef::RandomInt(lo, hi) => {
                write_i64(out, rng.i64(*lo..=*hi));
                return Value::Written;
            }
            VarRef::Uuid => {
                write_uuid(out, rng);
                return Value::Written;
            }
        };
        found.map_or(Value::Missing, Value::Found)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The forms `value` takes where a template puts it and an answer may echo
/// it, beside itself: in a request target (percent-encoded), a JSON string
/// and a form body. A secret is redacted in every form it was sent in: a
/// secret with a space showed in a request line as `Sup3r%20s3cret`
/// (attacker review). Only the forms that differ from `value`.
pub fn encoded_forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = Vec::new();
    let mut target = Vec::with_capacity(bytes.len());
    if head::write_target(&mut target, bytes).is_ok() {
        forms.push(target);
    }
    for escape in [Escape::JsonString, Escape::Form] {
        let mut out = Vec::with_capacity(bytes.len());
        write_escaped(&mut out, bytes, escape);
        forms.push(out);
    }
    let mut forms: Vec<String> =
        forms.into_iter().filter(|f| f != bytes).filter_map(|f| String::from_utf8(f).ok()).collect();
    forms.sort();
    forms.dedup();
    forms
}

/// Parse the text between `${` and `}`. `start` is its byte offset in the template, `dollar` the offset
/// of the `$` that opened it.
fn parse_ref(inner: &str, start: usize, dollar: usize, feeders: &[&str]) -> Result<VarRef, TemplateError> {
    let lead = inner.len() - inner.trim_start().len();
    let body = inner.trim();
    let base = start + lead;
    if body.is_empty() {
        return Err(TemplateError::new(dollar, "empty `${}`")
            .hint(format!("write a name, e.g. `${{token}}`; {SUPPORTED}; `$${{` is a literal `${{`")));
    }
    let head_len = ident_len(body);
    if head_len == 0 {
        return Err(unexpected(body, 0, base));
    }
    let head = &body[..head_len];
    let rest = &body[head_len..];
    if rest.is_empty() {
        return match head {
            "seq" => Ok(VarRef::Seq),
            "uuid" => Ok(VarRef::Uuid),
            "env" => Err(TemplateError::new(base, "`${env}` needs a variable name").hint("write `${env.NAME}`")),
            "random" => Err(TemplateError::new(base, "`${random}` needs a function").hint(SUPPORTED)),
            _ if feeders.contains(&head) => Err(TemplateError::new(base, format!("`{head}` is a feeder, not a value"))
                .hint(format!("name one of its columns: `${{{head}.COLUMN}}`"))),
            _ => Ok(VarRef::Saved(head.to_owned())),
        };
    }
    if rest.starts_with('(') {
        return Err(unknown_function(head, base));
    }
    if !rest.starts_with('.') {
        return Err(unexpected(body, head_len, base));
    }
    let second_at = head_len + 1;
    let second_len = ident_len(&body[second_at..]);
    if second_len == 0 {
        if second_at == body.len() {
            return Err(TemplateError::new(base + head_len, format!("expected a name after `{head}.`")).hint(NAME_RULE));
        }
        return Err(unexpected(body, second_at, base));
    }
    let second = &body[second_at..second_at + second_len];
    let tail_at = second_at + second_len;
    let tail = &body[tail_at..];
    match head {
        "random" => match (second, tail.starts_with('(')) {
            ("int", true) => parse_random_int(body, tail_at, base),
            ("int", false) => Err(TemplateError::new(base, "`random.int` needs bounds")
                .hint("write `${random.int(MIN,MAX)}`, e.g. `${random.int(1,100)}`")),
            _ => Err(unknown_function(&body[..tail_at], base)),
        },
        _ if !tail.is_empty() => Err(unexpected(body, tail_at, base)),
        "env" => Ok(VarRef::Env(second.to_owned())),
        _ if feeders.contains(&head) => Ok(VarRef::Feeder { feeder: head.to_owned(), column: second.to_owned() }),
        _ => {
            let declared = if feeders.is_empty() {
                "no feeders are declared; declare one under `data:`".to_owned()
            } else {
                format!("declared feeders: {}", feeders.join(", "))
            };
            Err(TemplateError::new(base, format!("unknown feeder `{head}` in `${{{head}.{second}}}`"))
                .hint(format!("{declared}; saved values have plain names like `${{token}}`")))
        }
    }
}

/// `body[open..]` starts with `(` after `random.int`.
fn parse_random_int(body: &str, open: usize, base: usize) -> Result<VarRef, TemplateError> {
    let usage = "write `${random.int(MIN,MAX)}` with integer bounds, e.g. `${random.int(1,100)}`";
    let Some(close) = body[open..].find(')').map(|c| open + c) else {
        return Err(TemplateError::new(base + open, "unclosed `(` in `random.int(`").hint(usage));
    };
    if close + 1 < body.len() {
        return Err(unexpected(body, close + 1, base));
    }
    let mut bounds = [0i64; 2];
    let mut count = 0;
    let mut at = open + 1;
    for arg in body[open + 1..close].split(',') {
        let arg_at = at + (arg.len() - arg.trim_start().len());
        at += arg.len() + 1;
        if count == 2 {
            return Err(TemplateError::new(base + arg_at - 1, "`random.int` takes two bounds").hint(usage));
        }
        let arg = arg.trim();
        bounds[count] = arg.parse().map_err(|_| {
            let message =
                if arg.is_empty() { "missing bound".to_owned() } else { format!("`{arg}` is not an integer") };
            TemplateError::new(base + arg_at, message).hint(usage)
        })?;
        count += 1;
    }
    if count < 2 {
        return Err(TemplateError::new(base + close, "`random.int` takes two bounds").hint(usage));
    }
    let [lo, hi] = bounds;
    if lo > hi {
        return Err(TemplateError::new(base + open + 1, format!("empty range: {lo} > {hi}"))
            .hint(format!("the smaller bound comes first: `${{random.int({hi},{lo})}}`")));
    }
    Ok(VarRef::RandomInt(lo, hi))
}

fn unknown_function(name: &str, offset: usize) -> TemplateError {
    TemplateError::new(offset, format!("unknown function `{name}()`")).hint(SUPPORTED)
}

/// An error for the character at `body[at..]`.
fn unexpected(body: &str, at: usize, base: usize) -> TemplateError {
    let c = body[at..].chars().next().unwrap_or(' ');
    TemplateError::new(base + at, format!("unexpected {c:?} in `${{...}}`")).hint(NAME_RULE)
}

/// Length in bytes of the `[A-Za-z_][A-Za-z0-9_]*` name at the start of `s` (0 if none).
fn ident_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
            1 + bytes[1..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count()
        }
        _ => 0,
    }
}

fn json_safe(b: u8) -> bool {
    b >= 0x20 && b != b'"' && b != b'\\'
}

fn form_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'*' | b'-' | b'.' | b'_')
}

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn write_escaped(out: &mut Vec<u8>, bytes: &[u8], escape: Escape) {
    let safe = match escape {
        Escape::None => {
            out.extend_from_slice(bytes);
            return;
        }
        Escape::JsonString => json_safe,
        Escape::Form => form_safe,
    };
    // Copy runs of safe bytes in one go; escape the rest one byte at a time.
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if safe(b) {
            continue;
        }
        out.extend_from_slice(&bytes[run..i]);
        run = i + 1;
        match escape {
            Escape::JsonString => match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                _ => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX_LOWER[usize::from(b >> 4)],
                    HEX_LOWER[usize::from(b & 0xf)],
                ]),
            },
            Escape::Form if b == b' ' => out.push(b'+'),
            _ => out.extend_from_slice(&[b'%', HEX_UPPER[usize::from(b >> 4)], HEX_UPPER[usize::from(b & 0xf)]]),
        }
    }
    out.extend_from_slice(&bytes[run..]);
}

fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    // u64::MAX has 20 digits; fill from the right so no reversal is needed.
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
}

/// A random (version 4, RFC 9562 §5.4) UUID from two `u64`s, as 36 bytes of lowercase hex and hyphens.
fn write_uuid(out: &mut Vec<u8>, rng: &mut fastrand::Rng) {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&rng.u64(..).to_be_bytes());
    raw[8..].copy_from_slice(&rng.u64(..).to_be_bytes());
    raw[6] = (raw[6] & 0x0f) | 0x40; // version 4
    raw[8] = (raw[8] & 0x3f) | 0x80; // variant 10xx
    let mut text = [0u8; 36];
    let mut j = 0;
    for (i, byte) in raw.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text[j] = b'-';
            j += 1;
        }
        text[j] = HEX_LOWER[usize::from(byte >> 4)];
        text[j + 1] = HEX_LOWER[usize::from(byte & 0xf)];
        j += 2;
    }
    out.extend_from_slice(&text);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value's forms where templates put it: only those that differ.
    #[test]
    fn a_values_encoded_forms() {
        // (value, its other forms, sorted)
        let cases: [(&str, &[&str]); 4] = [
            // nothing to encode: no other form
            ("plainSECRET123", &[]),
            // a space, a quote and a slash: target, form and JSON each differ
            (
                "Sup3r s3cret/val+ue\"x",
                &["Sup3r s3cret/val+ue\\\"x", "Sup3r%20s3cret/val+ue%22x", "Sup3r+s3cret%2Fval%2Bue%22x"],
            ),
            // non-ASCII: percent-encoded in a target and a form, as is in JSON
            ("pässword", &["p%C3%A4ssword"]),
            // a CR goes into no target (refused), but into JSON and a form
            ("a\rb", &["a%0Db", "a\\rb"]),
        ];
        for (i, (value, want)) in cases.into_iter().enumerate() {
            assert_eq!(encoded_forms(value), want, "case {i}");
        }
    }
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Test values: saved and env from maps, one feeder row.
    #[derive(Default)]
    struct MapVars {
        saved: HashMap<&'static str, &'static str>,
        env: HashMap<&'static str, &'static str>,
        feeder: HashMap<(&'static str, &'static str), &'static str>,
        seq: u64,
    }

    impl Vars for MapVars {
        fn saved(&self, name: &str) -> Option<&str> {
            self.saved.get(name).copied()
        }
        fn env(&self, name: &str) -> Option<&str> {
            self.env.get(name).copied()
        }
        fn seq(&self) -> u64 {
            self.seq
        }
        fn feeder(&self, feeder: &str, column: &str) -> Option<&str> {
            self.feeder.get(&(feeder, column)).copied()
        }
    }

    fn vars() -> MapVars {
        MapVars {
            saved: HashMap::from([("token", "abc123"), ("quote", "say \"hi\"\n\\ok"), ("amp", "a b&c=d/é")]),
            env: HashMap::from([("HOST", "example.com")]),
            feeder: HashMap::from([(("users", "email"), "u1@example.com")]),
            seq: 42,
        }
    }

    fn render(t: &Template, escape: Escape) -> (String, Result<(), MissingVar>) {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut out = Vec::new();
        let r = t.render_escaped(&vars(), &mut rng, &mut out, escape);
        (String::from_utf8(out).unwrap(), r)
    }

    const FEEDERS: &[&str] = &["users", "items"];

    #[test]
    fn parse_good() {
        use VarRef::*;
        let cases: &[(&str, Vec<VarRef>, Option<&str>)] = &[
            // No `$` at all: one literal.
            ("GET /orders", vec![], Some("GET /orders")),
            // Empty text: a literal that renders nothing.
            ("", vec![], Some("")),
            // A saved value inside a header.
            ("Bearer ${token}", vec![Saved("token".into())], None),
            // Blanks inside the braces are ignored.
            ("${ token }", vec![Saved("token".into())], None),
            // Underscores and digits after the first character.
            ("${_a1_b2}", vec![Saved("_a1_b2".into())], None),
            // An environment variable.
            ("${env.HOST}", vec![Env("HOST".into())], None),
            // The built-ins.
            ("u-${seq}-${uuid}", vec![Seq, Uuid], None),
            // Inclusive random bounds, with blanks and negatives.
            ("${random.int( -5 , 10 )}", vec![RandomInt(-5, 10)], None),
            // A one-value range is allowed.
            ("${random.int(3,3)}", vec![RandomInt(3, 3)], None),
            // A declared feeder's column.
            ("${users.email}", vec![Feeder { feeder: "users".into(), column: "email".into() }], None),
            // `$${` is a literal `${`, so the whole text is literal.
            ("cost $${x} $5", vec![], Some("cost ${x} $5")),
            // A lone `$` (JSONPath-looking text) is literal.
            ("$.token $ a$", vec![], Some("$.token $ a$")),
            // `$$` not followed by `{` stays as is.
            ("$$", vec![], Some("$$")),
            // A `}` outside a reference is literal.
            ("{\"a\": \"}\"}", vec![], Some("{\"a\": \"}\"}")),
            // An escape next to a reference.
            ("$${${seq}}", vec![Seq], None),
        ];
        for (text, want_vars, want_literal) in cases {
            let t = Template::parse(text, FEEDERS).unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
            assert_eq!(&t.vars().cloned().collect::<Vec<_>>(), want_vars, "{text:?}");
            assert_eq!(t.as_literal(), *want_literal, "{text:?}");
            assert_eq!(t.is_literal(), want_literal.is_some(), "{text:?}");
            assert_eq!(t.source(), *text, "{text:?}");
        }
    }

    #[test]
    fn parse_bad() {
        // (text, byte offset, message contains, has hint)
        let cases: &[(&str, usize, &str, bool)] = &[
            // Unterminated: points at the `$`.
            ("Bearer ${token", 7, "unterminated", true),
            // Empty reference.
            ("a${}", 1, "empty", true),
            // Only blanks is empty too.
            ("${  }", 0, "empty", true),
            // A name cannot start with a digit.
            ("${1abc}", 2, "unexpected '1'", true),
            // A bad character inside a name points at it.
            ("${to-ken}", 4, "unexpected '-'", true),
            // Blanks are trimmed before offsets are counted.
            ("${  a b}", 5, "unexpected ' '", true),
            // `${env}` alone.
            ("${env}", 2, "env", true),
            // `${env.}` has no name after the dot: points at the dot.
            ("${env.}", 5, "after `env.`", true),
            // Extra segments after an env name.
            ("${env.A.B}", 7, "unexpected '.'", true),
            // Unknown random function: hint lists the supported forms.
            ("${random.float()}", 2, "unknown function `random.float()`", true),
            // Unknown top-level function.
            ("x ${uuid()}", 4, "unknown function `uuid()`", true),
            // `random.int` without bounds.
            ("${random.int}", 2, "needs bounds", true),
            // Bounds the wrong way round: points at the first bound.
            ("${random.int(10,1)}", 13, "empty range", true),
            // Non-integer bound: points at it.
            ("${random.int(1, 2.5)}", 16, "`2.5` is not an integer", true),
            // A missing bound.
            ("${random.int(1,)}", 15, "missing bound", true),
            // One bound only.
            ("${random.int(1)}", 14, "two bounds", true),
            // Three bounds.
            ("${random.int(1,2,3)}", 16, "two bounds", true),
            // Out of i64 range.
            ("${random.int(0,99999999999999999999)}", 15, "not an integer", true),
            // Unclosed parenthesis (the `}` ends the reference first).
            ("${random.int(1,2}", 12, "unclosed", true),
            // Trailing text after the call.
            ("${random.int(1,2)x}", 17, "unexpected 'x'", true),
            // A dotted name whose head is not a feeder.
            ("${user.email}", 2, "unknown feeder `user`", true),
            // A feeder without a column.
            ("${users}", 2, "is a feeder", true),
            // `${random}` alone.
            ("${random}", 2, "needs a function", true),
            // Non-ASCII in a name; the offset is in bytes.
            ("é${aé}", 5, "unexpected 'é'", true),
            // A nested reference is not supported: the first `}` closes the outer one.
            ("${a${b}}", 3, "unexpected '$'", true),
        ];
        for (text, offset, message, hint) in cases {
            let err = Template::parse(text, FEEDERS).expect_err(text);
            assert_eq!(err.offset, *offset, "{text:?}: {err:?}");
            assert!(err.message.contains(message), "{text:?}: {err:?}");
            assert_eq!(err.hint.is_some(), *hint, "{text:?}: {err:?}");
        }
    }

    #[test]
    fn unknown_function_hint_lists_supported_forms() {
        let err = Template::parse("${random.float()}", &[]).unwrap_err();
        let hint = err.hint.unwrap();
        for form in ["${env.NAME}", "${seq}", "${uuid}", "${random.int(MIN,MAX)}"] {
            assert!(hint.contains(form), "{hint}");
        }
    }

    #[test]
    fn rendering() {
        // (template, escape, expected output, missing var)
        let cases: &[(&str, Escape, &str, Option<&str>)] = &[
            // Literal only.
            ("GET /orders", Escape::None, "GET /orders", None),
            // Saved, env, seq and feeder values, raw.
            ("${token} ${env.HOST} ${seq} ${users.email}", Escape::None, "abc123 example.com 42 u1@example.com", None),
            // Raw rendering does not escape values.
            ("\"${quote}\"", Escape::None, "\"say \"hi\"\n\\ok\"", None),
            // JSON string content: value and literal quotes, backslash and newline escaped.
            ("q=\"${quote}\"", Escape::JsonString, "q=\\\"say \\\"hi\\\"\\n\\\\ok\\\"", None),
            // JSON string: other control characters become \u00XX; non-ASCII stays.
            ("\u{1}\t\u{8}\u{c}é", Escape::JsonString, "\\u0001\\t\\b\\fé", None),
            // Form: space is `+`, reserved and non-ASCII bytes are %XX, `*-._` stay.
            ("${amp} *-._~", Escape::Form, "a+b%26c%3Dd%2F%C3%A9+*-._%7E", None),
            // Numbers need no escape.
            ("${seq}", Escape::Form, "42", None),
            // Missing values render empty; the first is reported.
            ("a${nope}b${env.NOPE}c", Escape::None, "abc", Some("${nope}")),
            // Missing feeder column; the source spelling (blanks included) is reported.
            ("[${ users.name }]", Escape::JsonString, "[]", Some("${ users.name }")),
            // Escaped `${` renders as text.
            ("$${token}", Escape::None, "${token}", None),
        ];
        for (text, escape, want, missing) in cases {
            let t = Template::parse(text, FEEDERS).unwrap();
            let (got, r) = render(&t, *escape);
            assert_eq!(got, *want, "{text:?} {escape:?}");
            assert_eq!(r, missing.map(|m| Err(MissingVar(m.to_owned()))).unwrap_or(Ok(())), "{text:?}");
        }
    }

    /// Issue #31 point 5: what lands in a request's head. Saved, env and feeder values holding CR, LF
    /// or NUL are refused wherever they land; the target is percent-encoded, a header value is not.
    #[test]
    fn head_rendering_encodes_the_target_and_refuses_crlf() {
        let smuggle = "abc\r\nX-Evil: 1\r\n\r\nGET /other HTTP/1.1";
        let v = MapVars {
            saved: HashMap::from([("token", smuggle), ("q", "two words"), ("enc", "a%20b"), ("ok", "abc123")]),
            env: HashMap::from([("LF", "x\ny"), ("NUL", "x\0y")]),
            feeder: HashMap::from([(("users", "email"), "u1@example.com\r\nX: 1")]),
            seq: 42,
        };
        use HeadPlace::{HeaderValue, Target};
        let unsafe_in = |var: &str, byte: u8| Err(RenderError::Unsafe(UnsafeValue { var: Some(var.into()), byte }));
        // (template, place, rendered text when it renders, error)
        let cases: Vec<(&str, HeadPlace, &str, Result<(), RenderError>)> = vec![
            // A clean value in a header: as it is.
            ("Bearer ${ok}", HeaderValue, "Bearer abc123", Ok(())),
            // The finding of #31: a saved token with CR/LF in a header is refused.
            ("Bearer ${token}", HeaderValue, "", unsafe_in("${token}", b'\r')),
            // ... and in the path.
            ("/o?t=${token}", Target, "", unsafe_in("${token}", b'\r')),
            // An environment variable with a bare LF.
            ("${env.LF}", HeaderValue, "", unsafe_in("${env.LF}", b'\n')),
            // NUL from the environment, in the target.
            ("/${env.NUL}", Target, "", unsafe_in("${env.NUL}", 0)),
            // A CSV field, spelled as written.
            ("/u/${ users.email }", Target, "", unsafe_in("${ users.email }", b'\r')),
            // A space in a value is percent-encoded in the target ...
            ("/search?q=${q}&n=${seq}", Target, "/search?q=two%20words&n=42", Ok(())),
            // ... and left alone in a header value.
            ("${q}", HeaderValue, "two words", Ok(())),
            // An already encoded value is not encoded twice.
            ("/f/${enc}", Target, "/f/a%20b", Ok(())),
            // The template's own text is encoded too (a literal space in a path).
            ("/a b/${ok}", Target, "/a%20b/abc123", Ok(())),
            // A missing value renders empty and is reported, as `render` does.
            ("/x/${nope}", Target, "/x/", Err(RenderError::Missing(MissingVar("${nope}".into())))),
            // A refused value wins over a missing one: the request is not sent at all.
            ("${nope}${token}", HeaderValue, "", unsafe_in("${token}", b'\r')),
        ];
        for (text, place, want, want_err) in cases {
            let t = Template::parse(text, FEEDERS).unwrap();
            let mut out = Vec::new();
            let r = t.render_head(&v, &mut fastrand::Rng::with_seed(1), &mut out, place);
            assert_eq!(r, want_err, "{text:?} {place:?}");
            if !matches!(r, Err(RenderError::Unsafe(_))) {
                assert_eq!(String::from_utf8(out).unwrap(), want, "{text:?} {place:?}");
            }
        }
        // Literal text with CR/LF (a template built in code; `check` refuses it in a file) is refused too.
        let r =
            Template::literal("a\r\nb").render_head(&v, &mut fastrand::Rng::with_seed(1), &mut Vec::new(), HeaderValue);
        assert_eq!(r, Err(RenderError::Unsafe(UnsafeValue { var: None, byte: b'\r' })));
        // The message names the variable and the byte, never the value (it may be a secret).
        let e = Template::parse("${token}", &[]).unwrap().render_head(
            &v,
            &mut fastrand::Rng::with_seed(1),
            &mut Vec::new(),
            HeaderValue,
        );
        let text = e.unwrap_err().to_string();
        assert!(text.contains("${token}") && text.contains("CR") && !text.contains("abc"), "{text}");
    }

    #[test]
    fn render_head_does_not_reallocate_a_buffer_with_room() {
        let t = Template::parse("/u/${seq}?t=${token}&id=${uuid}&q=${amp}", FEEDERS).unwrap();
        let mut out = Vec::with_capacity(256);
        let ptr = out.as_ptr();
        let mut rng = fastrand::Rng::with_seed(1);
        for place in [HeadPlace::Target, HeadPlace::HeaderValue] {
            out.clear();
            t.render_head(&vars(), &mut rng, &mut out, place).unwrap();
            assert_eq!((out.as_ptr(), out.capacity()), (ptr, 256));
        }
    }

    #[test]
    fn render_appends() {
        let t = Template::parse("-${seq}", &[]).unwrap();
        let mut out = b"x".to_vec();
        t.render(&vars(), &mut fastrand::Rng::with_seed(1), &mut out).unwrap();
        assert_eq!(out, b"x-42");
    }

    #[test]
    fn numbers_render_at_their_limits() {
        let cases: &[(i64, &str)] = &[
            // Zero has one digit.
            (0, "0"),
            // Negative.
            (-7, "-7"),
            // The extremes (i64::MIN has no positive counterpart).
            (i64::MIN, "-9223372036854775808"),
            (i64::MAX, "9223372036854775807"),
        ];
        for (n, want) in cases {
            let mut out = Vec::new();
            write_i64(&mut out, *n);
            assert_eq!(out, want.as_bytes());
        }
        let mut out = Vec::new();
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, b"18446744073709551615");
    }

    #[test]
    fn random_int_stays_in_bounds_and_is_reproducible() {
        let t = Template::parse("${random.int(-2,2)}", &[]).unwrap();
        let mut rng = fastrand::Rng::with_seed(3);
        let mut seen = [false; 5];
        for _ in 0..200 {
            let mut out = Vec::new();
            t.render(&vars(), &mut rng, &mut out).unwrap();
            let n: i64 = std::str::from_utf8(&out).unwrap().parse().unwrap();
            assert!((-2..=2).contains(&n), "{n}");
            seen[(n + 2) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s), "both bounds are reachable");
        // The same seed gives the same text.
        let (a, _) = render(&t, Escape::None);
        let (b, _) = render(&t, Escape::None);
        assert_eq!(a, b);
    }

    #[test]
    fn uuid_is_v4_text() {
        let t = Template::parse("${uuid}", &[]).unwrap();
        let mut rng = fastrand::Rng::with_seed(9);
        let mut first = Vec::new();
        t.render(&vars(), &mut rng, &mut first).unwrap();
        let mut second = Vec::new();
        t.render(&vars(), &mut rng, &mut second).unwrap();
        assert_ne!(first, second);
        for out in [first, second] {
            let s = std::str::from_utf8(&out).unwrap();
            assert_eq!(s.len(), 36, "{s}");
            let groups: Vec<_> = s.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{s}");
            assert!(s.bytes().all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{s}");
            assert_eq!(&s[14..15], "4", "version nibble: {s}");
            assert!("89ab".contains(&s[19..20]), "variant nibble: {s}");
        }
    }

    #[test]
    fn render_does_not_reallocate_a_buffer_with_room() {
        let t = Template::parse("POST /u/${seq}?t=${token}&id=${uuid}&n=${random.int(1,9)} ${users.email}", FEEDERS)
            .unwrap();
        let mut out = Vec::with_capacity(256);
        let ptr = out.as_ptr();
        let mut rng = fastrand::Rng::with_seed(1);
        for escape in [Escape::None, Escape::JsonString, Escape::Form] {
            out.clear();
            t.render_escaped(&vars(), &mut rng, &mut out, escape).unwrap();
            assert_eq!((out.as_ptr(), out.capacity()), (ptr, 256));
        }
    }

    #[test]
    fn literal_constructor_does_not_interpret() {
        let t = Template::literal("${token} $${x}");
        assert_eq!(t.as_literal(), Some("${token} $${x}"));
        assert_eq!(t.vars().count(), 0);
        assert_eq!(render(&t, Escape::None).0, "${token} $${x}");
        assert_eq!(Template::literal("").as_literal(), Some(""));
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = Template::parse(&text, FEEDERS);
        }

        #[test]
        fn parse_never_panics_on_template_like_text(text in "[$\\{\\}a-z._(), 0-9-é]{0,40}") {
            if let Ok(t) = Template::parse(&text, FEEDERS) {
                let _ = render(&t, Escape::JsonString);
            }
        }

        #[test]
        fn text_without_dollar_round_trips(text in "[^$]*") {
            let t = Template::parse(&text, FEEDERS).unwrap();
            prop_assert_eq!(t.as_literal(), Some(text.as_str()));
            prop_assert_eq!(render(&t, Escape::None).0, text);
        }

        #[test]
        fn json_string_escape_round_trips_through_serde_json(text in any::<String>()) {
            let t = Template::literal(&text);
            let quoted = format!("\"{}\"", render(&t, Escape::JsonString).0);
            prop_assert_eq!(serde_json::from_str::<String>(&quoted).unwrap(), text);
        }

        #[test]
        fn form_escape_leaves_only_safe_bytes(text in any::<String>()) {
            let out = render(&Template::literal(&text), Escape::Form).0;
            prop_assert!(out.bytes().all(|b| form_safe(b) || b == b'+' || b == b'%'));
        }
    }
}
