//! What must not reach a results directory, a report or a log: secrets in the copied scenario and in
//! the recorded command line. This module owns the rule and the rewriting; it does not own where the
//! redacted text goes (`scenario.yaml`, `meta.json`'s `command`, the report that shows both), which
//! its callers decide, nor the Kubernetes manifests (`perfops k8s` keeps literal secrets in a Secret).
//!
//! # The rule: by position in the structure, not by a list of names
//!
//! The scenario is parsed as YAML and each value is judged by where it sits, whatever the header or
//! field is called (issue #31: a list of names missed `X-Auth-Token`):
//!
//! | where | what is replaced by `"<redacted>"` |
//! |---|---|
//! | a value under `headers:` or `metadata:` (defaults, setup, flows, steps, gRPC, WebSocket), at any depth | the whole value, when it holds any literal text, unless the header is harmless (below) |
//! | a field of a body (`json:`, `form:`, `body:`, `message:`, `send:` of a step) whose name looks like a credential | every value under it that holds literal text |
//! | any other text value (request lines, URLs, string bodies, `target`, watched URLs...) | the value of a `name=value` pair (a query or form parameter) and of a `"name": value` JSON pair whose name looks like a credential; the password of a URL's `user:password@` (the whole user part when it has no password) |
//!
//! A value *holds literal text* unless it is made only of `${...}` references, optionally after one
//! authentication scheme word (`Bearer`, `Basic`, `Digest`, `Token`, `Bot`, `Negotiate`):
//! `Bearer ${token}` and `${env.API_KEY}` are kept as written (references, whose values are never
//! written), `Bearer abc ${seq}` is redacted whole. `$${` is a literal `${`, so it counts as literal.
//!
//! *Harmless headers*, kept as written: `Accept`, `Accept-Charset`, `Accept-Encoding`,
//! `Accept-Language`, `Cache-Control`, `Connection`, `Content-Encoding`, `Content-Language`,
//! `Content-Length`, `Content-Type`, `DNT`, `Expect`, `Host`, `Keep-Alive`, `Origin`, `Pragma`, `TE`,
//! `Upgrade`, `User-Agent`, `X-Requested-With`, and gRPC's `grpc-accept-encoding`, `grpc-encoding`,
//! `grpc-timeout`. Each says how to talk, never who is talking; `Referer` is not among them (its URL may
//! carry a token).
//!
//! *A name looks like a credential* when one of its words (split at `-`, `_`, `.`, brackets and
//! camelCase) is one of `password passwd pwd pass passphrase secret token key apikey auth
//! authorization credential credentials session sessionid sid private cookie otp pin signature sig
//! jwt bearer csrf xsrf`, or when it contains `password`, `passwd`, `secret`, `token`, `apikey`,
//! `accesskey`, `credential`, `privatekey` or `sessionid` (`client_secret`, `X-Api-Key`,
//! `accessToken`). Over-redacting a harmless field (`cache_key`) costs a reader a value; missing one
//! costs a secret, so the list errs wide.
//!
//! Comments between a redacted value and the next token go with it (`Authorization: abc  # was xyz`);
//! other comments are kept. Keys are never redacted, nor what `save:` extracts (a JSONPath,
//! `header:NAME`, a regex): it says where a value is found, never the value.
//!
//! # The copy keeps its lines
//!
//! Each redacted value's text, from its first character to the next YAML token, is replaced by the
//! new value and the same line breaks and indentation: a folded block `Authorization: >-` over three
//! lines becomes `Authorization: "<redacted>"` and two blank lines, so a line number in a later message
//! (`merge` re-reads the copy) still points at the same line of the user's file. The result is parsed
//! again and compared with the tree it should be; if that ever fails, or the input is not YAML, or it
//! holds a second document (`---`) that the scenario ignores, the copy holds a comment and blank lines
//! instead of any of the text: never a secret, never a guess.
//!
//! # The command line
//!
//! [`redact_command`] rewrites the arguments recorded in `meta.json` (and shown by the report): the
//! value after any flag whose name looks like a credential (`--token T`, `--token=T`), `--set
//! path=value` judged by where `path` points with the rule above (`--set defaults.headers.X-Secret=v`
//! loses `v`, `--set load.stages[0].rate=50` keeps it), `-H`/`--header Name: value` as a header,
//! and every other argument as "any other text value" (a URL's query and password).
//!
//! Deterministic: the same text gives the same output, so shards compare fingerprints of it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use marked_yaml::Node;
use regex::Regex;
use yaml_rust2::scanner::{Scanner, TScalarStyle, TokenType};

/// What a redacted value becomes.
pub const REDACTED: &str = "<redacted>";

/// `REDACTED` as a YAML double-quoted scalar.
const REDACTED_YAML: &str = "\"<redacted>\"";

/// What the copy holds when it cannot be rewritten in place (first line; the others are left blank).
const UNREDACTABLE: &str = "# perfops: this scenario could not be redacted in place; its text is left out";

/// Headers that say how to talk, never who is talking: kept as written (compared lowercased).
const HARMLESS_HEADERS: &[&str] = &[
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "connection",
    "content-encoding",
    "content-language",
    "content-length",
    "content-type",
    "dnt",
    "expect",
    "grpc-accept-encoding",
    "grpc-encoding",
    "grpc-timeout",
    "host",
    "keep-alive",
    "origin",
    "pragma",
    "te",
    "upgrade",
    "user-agent",
    "x-requested-with",
];

/// Words that make a name look like a credential (whole words of the name).
const CREDENTIAL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "secret",
    "token",
    "key",
    "apikey",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "session",
    "sessionid",
    "sid",
    "private",
    "cookie",
    "otp",
    "pin",
    "signature",
    "sig",
    "jwt",
    "bearer",
    "csrf",
    "xsrf",
];

/// Parts that make a name look like a credential wherever they are in it (`accessToken`, `x-api-key`
/// is caught by its words, `myapikey` only by this).
const CREDENTIAL_PARTS: &[&str] =
    &["password", "passwd", "secret", "token", "apikey", "accesskey", "credential", "privatekey", "sessionid"];

/// Authentication scheme words that may stand before a reference (`Bearer ${token}`).
const SCHEMES: &[&str] = &["bearer", "basic", "digest", "token", "bot", "negotiate"];

/// Whether `name` (a header, a field, a query parameter, a flag) looks like it names a credential.
pub fn credential_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let squashed: String = lower.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    if CREDENTIAL_PARTS.iter().any(|p| squashed.contains(p)) {
        return true;
    }
    words(name).any(|w| CREDENTIAL_WORDS.contains(&w.to_ascii_lowercase().as_str()))
}

/// The words of a name: split at non-alphanumerics and at a lowercase-to-uppercase step (camelCase).
fn words(name: &str) -> impl Iterator<Item = &str> {
    let mut cuts = Vec::new();
    let b = name.as_bytes();
    for i in 1..b.len() {
        if b[i - 1].is_ascii_lowercase() && b[i].is_ascii_uppercase() {
            cuts.push(i);
        }
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain(std::iter::once(b.len())) {
        pieces.push(&name[start..c]);
        start = c;
    }
    pieces.into_iter().flat_map(|p| p.split(|c: char| !c.is_ascii_alphanumeric())).filter(|w| !w.is_empty())
}

/// Whether a header is harmless (its value kept as written).
pub fn harmless_header(name: &str) -> bool {
    HARMLESS_HEADERS.contains(&name.trim().to_ascii_lowercase().as_str())
}

/// Whether `value` holds literal text: anything but `${...}` references, blanks and one leading
/// scheme word before a reference (`Bearer ${token}` holds none, `Bearer abc ${seq}` does).
pub fn holds_literal(value: &str) -> bool {
    let mut rest = String::new();
    let mut refs = 0;
    let b = value.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while i < b.len() {
        if b[i..].starts_with(b"$${") {
            // `$${` is a literal `${`: keep it as text (it is literal).
            i += 3;
            continue;
        }
        if b[i..].starts_with(b"${") {
            let Some(len) = value[i + 2..].find('}') else { return true };
            rest.push_str(&value[run..i]);
            rest.push(' ');
            refs += 1;
            i += 2 + len + 1;
            run = i;
            continue;
        }
        i += 1;
    }
    rest.push_str(&value[run..]);
    let mut left = rest.split_whitespace();
    match (left.next(), left.next()) {
        (None, _) => false,
        (Some(w), None) => {
            !(refs > 0 && SCHEMES.contains(&w.to_ascii_lowercase().as_str()) && value.trim_start().starts_with(w))
        }
        _ => true,
    }
}

/// The shortest secret value [`redact_values`] looks for: a shorter one (`1`, `on`) would blank
/// every digit of a body while it hides nothing worth guessing.
pub const SHORTEST_SECRET: usize = 4;

/// Text that came back from a server (the first bytes of a failing response's body, #32), made
/// safe for results: every occurrence of one of `secrets` (values known to be secret: `${env.*}`
/// values, literal values of headers that are not harmless) replaced by `<redacted>`, then
/// [`redact_text`]'s rule (credential-like `"name": value` and `name=value` pairs). A server
/// that echoes the request's token back must not put it in `summary.json`.
pub fn redact_values<'a>(text: &'a str, secrets: &[String]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for secret in secrets.iter().filter(|s| s.len() >= SHORTEST_SECRET) {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
        }
    }
    match out {
        Cow::Borrowed(t) => redact_text(t),
        Cow::Owned(t) => Cow::Owned(redact_text(&t).into_owned()),
    }
}

/// Redact the credentials inside one text value (not a header): the values of `name=value` pairs and
/// `"name": value` JSON pairs whose name looks like a credential, and the password of a URL's
/// `user:password@`. Borrowed when nothing changed.
pub fn redact_text(text: &str) -> Cow<'_, str> {
    static USERINFO: OnceLock<Regex> = OnceLock::new();
    static PAIR: OnceLock<Regex> = OnceLock::new();
    static JSON_PAIR: OnceLock<Regex> = OnceLock::new();
    // Constant patterns, exercised by the tests below: they cannot fail at run time.
    let userinfo = USERINFO.get_or_init(|| {
        Regex::new(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^/@\s:?#]*)(:[^/@\s?#]*)?@").expect("valid userinfo pattern")
    });
    let pair = PAIR.get_or_init(|| {
        Regex::new(r#"(^|[?&;,\s])([A-Za-z0-9_.\-\[\]]+)=([^&;,\s#"']*)"#).expect("valid pair pattern")
    });
    let json_pair = JSON_PAIR.get_or_init(|| {
        Regex::new(r#""((?:[^"\\]|\\.)*)"(\s*:\s*)("(?:[^"\\]|\\.)*"|[^,}\]\s]+)"#).expect("valid JSON pair pattern")
    });
    let mut out = Cow::Borrowed(text);
    if userinfo.is_match(&out) {
        let new: String = userinfo
            .replace_all(&out, |c: &regex::Captures<'_>| match c.get(3) {
                Some(_) => format!("{}{}:{REDACTED}@", &c[1], &c[2]),
                None if c[2].is_empty() => c[0].to_string(),
                None => format!("{}{REDACTED}@", &c[1]),
            })
            .into_owned();
        if new != *out {
            out = Cow::Owned(new);
        }
    }
    if pair.is_match(&out) {
        let new = pair
            .replace_all(&out, |c: &regex::Captures<'_>| {
                if credential_name(&c[2]) && !c[3].is_empty() && holds_literal(&c[3]) {
                    format!("{}{}={REDACTED}", &c[1], &c[2])
                } else {
                    c[0].to_string()
                }
            })
            .into_owned();
        if new != *out {
            out = Cow::Owned(new);
        }
    }
    if json_pair.is_match(&out) {
        let new = json_pair
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let value = c[3].trim_matches('"');
                if credential_name(&c[1]) && holds_literal(value) && c[3] != *"null" {
                    format!("\"{}\"{}\"{REDACTED}\"", &c[1], &c[2])
                } else {
                    c[0].to_string()
                }
            })
            .into_owned();
        if new != *out {
            out = Cow::Owned(new);
        }
    }
    out
}

/// Where a value sits, which decides how it is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The scenario's top level, or a step: `headers` and the body keys mean what they say.
    Top,
    /// Under `expect`, `save`, `watch`, `data`...: a `json:` there is no request body.
    Other,
    /// The mapping of a `headers:` or `metadata:`.
    Headers,
    /// A header's value (not a harmless one).
    HeaderValue,
    /// A harmless header's value, or what `save:` extracts (a JSONPath, `header:NAME`, a regex that
    /// names a token it finds, never a secret itself): kept.
    Kept,
    /// Inside a request body.
    Body,
    /// Under a credential-like field of a body.
    Secret,
}

impl Place {
    /// The place of the value under `key` of a mapping at `self`.
    fn child(self, key: &str) -> Place {
        match self {
            Place::Secret | Place::HeaderValue | Place::Kept => self,
            Place::Headers if harmless_header(key) => Place::Kept,
            Place::Headers => Place::HeaderValue,
            Place::Body if credential_name(key) => Place::Secret,
            Place::Body => Place::Body,
            Place::Top | Place::Other => match key {
                "headers" | "metadata" => Place::Headers,
                "json" | "form" | "body" | "message" | "send" if self == Place::Top => Place::Body,
                "save" => Place::Kept,
                "expect" | "watch" | "data" | "slo" | "abort_when" | "load" | "probe" => Place::Other,
                _ => self,
            },
        }
    }

    /// An item of a list at `self`: a header list's items are values.
    fn item(self) -> Place {
        if self == Place::Headers { Place::HeaderValue } else { self }
    }

    /// The place `path` (`defaults.headers.X-Secret`, `flows.a.steps[0].json`) points at.
    fn of_path(path: &str) -> Place {
        path.split('.').fold(Place::Top, |place, seg| {
            let key = seg.split('[').next().unwrap_or(seg).trim();
            let place = place.child(key);
            if seg.contains('[') { place.item() } else { place }
        })
    }

    /// What a scalar `value` at this place becomes, if it must change.
    fn judge(self, value: &str) -> Option<String> {
        match self {
            Place::Kept => None,
            Place::HeaderValue | Place::Secret | Place::Headers => holds_literal(value).then(|| REDACTED.to_string()),
            Place::Top | Place::Other | Place::Body => match redact_text(value) {
                Cow::Borrowed(_) => None,
                Cow::Owned(s) => Some(s),
            },
        }
    }
}

/// Replace the secrets of scenario `text` (YAML) by `"<redacted>"`, by their place in the structure
/// (the module doc gives the rule). The output is YAML with the same lines.
pub fn redact(text: &str) -> String {
    rewrite(text, None).unwrap_or_else(|| unredactable(text))
}

/// The copy when the text cannot be rewritten in place: no text at all, the same number of lines.
fn unredactable(text: &str) -> String {
    let lines = text.lines().count().max(1);
    let mut out = String::from(UNREDACTABLE);
    out.push_str(&"\n".repeat(lines));
    out
}

/// Rewrite YAML `text` with the secrets replaced; `under`: judge only the value of this top key, at
/// this place (an `--set` value parsed behind `v: `). `None` when the text is not YAML or the rewrite
/// could not be checked.
fn rewrite(text: &str, under: Option<(&str, Place)>) -> Option<String> {
    let options = marked_yaml::LoaderOptions::default().prevent_coercion(true);
    let root = marked_yaml::parse_yaml_with_options(0, text, options).ok()?;
    let mut edits: HashMap<usize, String> = HashMap::new();
    match under {
        None => walk(&root, Place::Top, &mut edits),
        Some((key, place)) => walk(root.as_mapping()?.get_node(key)?, place, &mut edits),
    }
    let scanned: Vec<_> = Scanner::new(text.chars()).collect();
    if later_documents(scanned.iter().map(|t| &t.1)) {
        return None;
    }
    if edits.is_empty() {
        return Some(text.to_string());
    }
    // Where each scalar's text ends: at the next token (a scalar has only a start in the tree).
    // Marks count characters; the text is sliced by bytes.
    let bytes_at: Vec<usize> = text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len())).collect();
    let chars: Vec<char> = text.chars().collect();
    let tokens: Vec<(usize, Option<TScalarStyle>)> = scanned
        .iter()
        .map(|t| {
            let style = match t.1 {
                TokenType::Scalar(style, _) => Some(style),
                _ => None,
            };
            (t.0.index(), style)
        })
        .collect();
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for (at, value) in &edits {
        let k = tokens.iter().position(|&(i, style)| style.is_some() && i == *at)?;
        let mut start = *at;
        if matches!(tokens[k].1, Some(TScalarStyle::Literal | TScalarStyle::Folded)) {
            // A block scalar's mark is its first line of content: its header (`|`, `>-`) is the first
            // thing after the token before it (the `:` of its key or the `-` of its item).
            start = tokens.get(k.checked_sub(1)?)?.0 + 1;
            while chars.get(start).is_some_and(|c| *c == ' ' || *c == '\t') {
                start += 1;
            }
            if !matches!(chars.get(start), Some('|' | '>')) {
                return None;
            }
        }
        let end = tokens.get(k + 1).map_or(chars.len(), |t| t.0);
        spans.push((*bytes_at.get(start)?, *bytes_at.get(end)?, value));
    }
    spans.sort_by_key(|s| s.0);
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (start, end, value) in spans {
        if start < done {
            return None;
        }
        out.push_str(&text[done..start]);
        out.push_str(&yaml_string(value));
        out.push_str(&breaks_and_indent(&text[start..end]));
        done = end;
    }
    out.push_str(&text[done..]);
    check(&root, &out, &edits).then_some(out)
}

/// Whether the stream holds a document after the first one: the tree is the first document's only,
/// so a second one would be copied unjudged.
fn later_documents<'a>(tokens: impl Iterator<Item = &'a TokenType>) -> bool {
    // 0: before the first document's content, 1: in it, 2: after its end.
    let mut phase = 0;
    for t in tokens {
        match t {
            TokenType::StreamStart(_)
            | TokenType::StreamEnd
            | TokenType::BlockEnd
            | TokenType::VersionDirective(..)
            | TokenType::TagDirective(..) => {}
            TokenType::DocumentStart | TokenType::DocumentEnd => {
                if phase == 1 {
                    phase = 2;
                }
            }
            _ if phase == 2 => return true,
            _ => phase = 1,
        }
    }
    false
}

/// The line breaks of a replaced region and the blanks before the next token, so that the lines and
/// the next token's column stay where they were.
fn breaks_and_indent(region: &str) -> String {
    let mut out = String::new();
    for (i, _) in region.match_indices('\n') {
        out.push_str(if region[..i].ends_with('\r') { "\r\n" } else { "\n" });
    }
    let last = region.rfind('\n').map_or(0, |i| i + 1);
    let tail = &region[last..];
    let blanks = tail.len() - tail.trim_end_matches([' ', '\t']).len();
    out.push_str(&tail[tail.len() - blanks..]);
    out
}

/// `value` as a YAML double-quoted scalar (JSON's string syntax is a subset of it).
fn yaml_string(value: &str) -> String {
    if value == REDACTED {
        return REDACTED_YAML.to_string();
    }
    serde_json::to_string(value).unwrap_or_else(|_| REDACTED_YAML.to_string())
}

/// Collect the edits of the scalars under `node` at `place`, keyed by their start (characters).
fn walk(node: &Node, place: Place, edits: &mut HashMap<usize, String>) {
    match node {
        Node::Scalar(s) => {
            if let (Some(new), Some(start)) = (place.judge(s.as_str()), s.span().start()) {
                edits.insert(start.character(), new);
            }
        }
        Node::Sequence(seq) => seq.iter().for_each(|item| walk(item, place.item(), edits)),
        Node::Mapping(map) => map.iter().for_each(|(k, v)| walk(v, place.child(k.as_str()), edits)),
    }
}

/// Whether `out` parses to the tree of `root` with exactly the edited values changed, each scalar on
/// its line: the guard that a rewrite never damages the copy or misses its target.
fn check(root: &Node, out: &str, edits: &HashMap<usize, String>) -> bool {
    let options = marked_yaml::LoaderOptions::default().prevent_coercion(true);
    let Ok(new) = marked_yaml::parse_yaml_with_options(0, out, options) else { return false };
    same(root, &new, edits)
}

/// Whether `new` is `old` with the edits made and every scalar on the line it was on.
fn same(old: &Node, new: &Node, edits: &HashMap<usize, String>) -> bool {
    match (old, new) {
        (Node::Scalar(a), Node::Scalar(b)) => {
            let edit = a.span().start().and_then(|m| edits.get(&m.character()));
            // An edited block scalar's mark moves up to its header's line: only the others are held
            // to theirs.
            let line_kept = match (a.span().start(), b.span().start()) {
                (Some(x), Some(y)) => edit.is_some() || x.line() == y.line(),
                _ => true,
            };
            edit.map_or(a.as_str(), String::as_str) == b.as_str() && line_kept
        }
        (Node::Sequence(a), Node::Sequence(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| same(x, y, edits))
        }
        (Node::Mapping(a), Node::Mapping(b)) => {
            a.len() == b.len()
                && a.iter().zip(b.iter()).all(|((ka, va), (kb, vb))| ka.as_str() == kb.as_str() && same(va, vb, edits))
        }
        _ => false,
    }
}

/// One `--set path=value` with its value judged by where `path` points (`<redacted>` under a header or
/// a credential-like body field; a flow mapping or list judged inside). Not `path=value`: as any text.
pub fn redact_override(arg: &str) -> String {
    let Some((path, value)) = arg.split_once('=') else { return redact_text(arg).into_owned() };
    format!("{path}={}", redact_override_value(path, value))
}

/// The value of `--set path=value`, redacted by where `path` points.
pub fn redact_override_value(path: &str, value: &str) -> String {
    let place = Place::of_path(path.trim());
    let value_t = value.trim();
    if value_t.starts_with(['[', '{']) {
        let text = format!("v: {value_t}");
        return match rewrite(&text, Some(("v", place))) {
            Some(out) => out.strip_prefix("v: ").unwrap_or(REDACTED).to_string(),
            // Not YAML: no structure to judge by, so nothing of it is kept.
            None => REDACTED.to_string(),
        };
    }
    place.judge(value_t).unwrap_or_else(|| value.to_string())
}

/// A header given as `Name: value` (`quick -H`): the value redacted unless the header is harmless or
/// the value holds no literal.
pub fn redact_header_line(line: &str) -> String {
    match line.split_once(':') {
        // The name escaped: it is printed in messages, and a line break in it would forge a line.
        Some((name, value)) if !harmless_header(name) && holds_literal(value) => {
            format!("{}: {REDACTED}", name.escape_debug())
        }
        Some(_) if line.contains(|c: char| c.is_control()) => {
            format!("{}: {REDACTED}", line.split(':').next().unwrap_or("").escape_debug())
        }
        Some(_) => line.to_string(),
        None => REDACTED.to_string(),
    }
}

/// How the value after a flag is judged.
enum FlagValue {
    /// `--set path=value`.
    Override,
    /// `-H Name: value`.
    Header,
    /// A flag named like a credential: the whole value.
    Secret,
}

fn flag_value(flag: &str) -> Option<FlagValue> {
    match flag {
        "--set" => Some(FlagValue::Override),
        "-H" | "--header" => Some(FlagValue::Header),
        f if f.starts_with("--") && credential_name(&f[2..]) => Some(FlagValue::Secret),
        _ => None,
    }
}

fn judge_flag(kind: &FlagValue, value: &str) -> String {
    match kind {
        FlagValue::Override => redact_override(value),
        FlagValue::Header => redact_header_line(value),
        FlagValue::Secret => REDACTED.to_string(),
    }
}

/// The command line as it may be recorded (`meta.json`) and shown (the report): the module doc gives
/// the rule.
pub fn redact_command(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        // `--flag=value`.
        if let Some((flag, value)) = a.split_once('=').filter(|(f, _)| f.starts_with("--"))
            && let Some(kind) = flag_value(flag)
        {
            out.push(format!("{flag}={}", judge_flag(&kind, value)));
            continue;
        }
        // `-HName: value`, the short flag with its value attached.
        if let Some(h) = a.strip_prefix("-H").filter(|h| !h.is_empty()) {
            out.push(format!("-H{}", redact_header_line(h)));
            continue;
        }
        match flag_value(a) {
            Some(kind) if i < args.len() => {
                // A flag named like a credential that takes no value (a switch) leaves the next flag.
                let next = args[i].as_str();
                if matches!(kind, FlagValue::Secret) && a != "--token" && next.starts_with('-') && next.len() > 1 {
                    out.push(a.to_string());
                    continue;
                }
                out.push(a.to_string());
                out.push(judge_flag(&kind, next));
                i += 1;
            }
            _ => out.push(redact_text(a).into_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #31: redaction by structure. Each case: the scenario text, then what must be in the copy
    /// and what must not.
    #[test]
    fn scenario_values_are_redacted_by_their_place() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            // A header outside any list of names: a literal X-Auth-Token is redacted.
            ("defaults:\n  headers:\n    X-Auth-Token: abc123\n", &["X-Auth-Token: \"<redacted>\""], &["abc123"]),
            // A literal mixed with a reference is still a literal.
            (
                "defaults:\n  headers:\n    Authorization: \"Bearer abc ${seq}\"\n",
                &["Authorization: \"<redacted>\""],
                &["abc"],
            ),
            // A folded block: the value spans three lines, all of them go; the lines stay.
            (
                "defaults:\n  headers:\n    Authorization: >-\n      Bearer\n      s3cr3t\n    Accept: json\n",
                &["Authorization: \"<redacted>\"\n\n\n    Accept: json\n"],
                &["s3cr3t", "Bearer"],
            ),
            // A literal block, in a step.
            (
                "flows:\n  f:\n    steps:\n      - request: GET /\n        headers:\n          Cookie: |\n            sid=xyz789\n",
                &["Cookie: \"<redacted>\"\n"],
                &["xyz789"],
            ),
            // A flow mapping: the next header and the braces stay.
            (
                "defaults: { headers: { Authorization: \"x-lit\", Accept: json } }\n",
                &["{ Authorization: \"<redacted>\", Accept: json }"],
                &["x-lit"],
            ),
            // A password in a json body.
            (
                "setup:\n  - request: POST /auth\n    json: { user: bob, password: hunter2 }\n",
                &["user: bob", "password: \"<redacted>\""],
                &["hunter2"],
            ),
            // Nested body fields: everything under a credential-like field, a harmless one kept.
            (
                "setup:\n  - request: POST /auth\n    json:\n      login:\n        name: bob\n        credentials:\n          pin: 1234\n          otp: [\"9876\"]\n",
                &["name: bob"],
                &["1234", "9876"],
            ),
            // A form body, and a raw body with a form and a JSON pair.
            (
                "setup:\n  - request: POST /a\n    form: { client_secret: cs-1, grant_type: password }\n  - request: POST /b\n    body: 'user=a&passwd=pw-2&x=1'\n  - request: POST /c\n    body: '{\"apiKey\": \"k-3\", \"n\": 1}'\n",
                &["grant_type: password", "user=a&passwd=<redacted>&x=1", r#"\"n\": 1"#],
                &["cs-1", "pw-2", "k-3"],
            ),
            // A key in the query string of a request line; the other parameter kept.
            (
                "flows:\n  f:\n    steps:\n      - request: GET /x?api_key=abc&page=2\n",
                &["GET /x?api_key=<redacted>&page=2"],
                &["abc"],
            ),
            // A value that is only a reference: kept, the copy stays runnable.
            ("defaults:\n  headers:\n    X-Token: ${token}\n", &["X-Token: ${token}"], &["<redacted>"]),
            // A scheme word before a reference holds no secret.
            (
                "defaults:\n  headers: { Authorization: \"Bearer ${token}\" }\n",
                &["Authorization: \"Bearer ${token}\""],
                &["<redacted>"],
            ),
            // A harmless header: kept as written.
            (
                "defaults:\n  headers:\n    Accept: application/json\n    User-Agent: perfops-test\n",
                &["Accept: application/json", "User-Agent: perfops-test"],
                &["<redacted>"],
            ),
            // Environment references are kept as references, in headers and bodies alike.
            (
                "setup:\n  - request: POST /auth\n    headers: { X-Key: \"${env.API_KEY}\" }\n    json: { password: \"${env.PASS}\" }\n",
                &["X-Key: \"${env.API_KEY}\"", "password: \"${env.PASS}\""],
                &["<redacted>"],
            ),
            // gRPC metadata and WebSocket headers are headers.
            (
                "flows:\n  g:\n    steps:\n      - grpc: a.B/C\n        metadata: { authorization: lit-g }\n      - websocket: /ws?token=lit-w\n        headers: { Sec-Key: lit-h }\n",
                &["websocket: \"/ws?token=<redacted>\""],
                &["lit-g", "lit-w", "lit-h"],
            ),
            // A password in the target's URL; the user stays.
            ("target: http://bob:pw-t@127.0.0.1:1/\n", &["http://bob:<redacted>@127.0.0.1:1/"], &["pw-t"]),
            // A comment after a redacted value goes with it; a `json:` under `expect` is no body, and
            // `save:` names variables and where to find them (a regex that names a token), no secret.
            (
                "flows:\n  f:\n    steps:\n      - request: GET /\n        headers:\n          X-A: lit-c  # was old-c\n        expect: { json: { token: ok } }\n        save: { token: $.token, t2: 'regex:\"token\":\"([^\"]+)\"' }\n",
                &[
                    "X-A: \"<redacted>\"\n",
                    "json: { token: ok }",
                    "save: { token: $.token, t2: 'regex:\"token\":\"([^\"]+)\"' }",
                ],
                &["lit-c", "old-c"],
            ),
        ];
        for (input, want, gone) in cases {
            let out = redact(input);
            for w in *want {
                assert!(out.contains(w), "{input:?}\n-> {out}\nlacks {w:?}");
            }
            for g in *gone {
                assert!(!out.contains(g), "{input:?}\n-> {out}\nstill holds {g:?}");
            }
            assert_eq!(out.lines().count(), input.lines().count(), "{input:?} -> {out}: lines moved");
            assert!(!out.contains(UNREDACTABLE), "{input:?} was not rewritten in place: {out}");
            // Deterministic, and a second pass changes nothing.
            assert_eq!(redact(input), out);
            assert_eq!(redact(&out), out, "{out}");
        }
    }

    #[test]
    fn the_examples_stay_scenarios_once_redacted() {
        // `merge` re-reads the copy: each example, redacted, is rewritten in place, keeps its lines
        // and still parses as a scenario whenever the original does.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("examples/") {
            let path = entry.expect("an entry").path();
            if path.extension().is_none_or(|x| x != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("an example");
            let out = redact(&text);
            let name = path.display().to_string();
            assert!(!out.contains(UNREDACTABLE), "{name}:\n{out}");
            assert_eq!(out.lines().count(), text.lines().count(), "{name}");
            let (before, after) = (super::super::parse(&name, &text, &[]), super::super::parse(&name, &out, &[]));
            assert_eq!(before.is_ok(), after.is_ok(), "{name}:\n{out}");
            seen += 1;
        }
        assert!(seen >= 5, "{seen} examples in {}", dir.display());
    }

    #[test]
    fn a_second_document_is_no_hiding_place() {
        // Only the first document is a scenario; a second one is still text of the copy.
        let out = redact("name: a\n---\ndefaults: { headers: { X-K: lit-doc2 } }\n");
        assert!(!out.contains("lit-doc2"), "{out}");
        assert_eq!(out.lines().count(), 3, "{out}");
    }

    proptest::proptest! {
        /// Whatever the style a header value is written in (plain, quoted, a flow mapping, a block)
        /// and whatever surrounds the secret in it, the copy lacks the secret, keeps the lines and is
        /// rewritten in place.
        #[test]
        fn no_style_hides_a_header_secret(
            secret in "zq[a-z0-9]{6,10}",
            before in "[ a-zA-Z#:,=-]{0,6}",
            after in "[ a-zA-Z#:,=-]{0,6}",
            name in "X-[A-Za-z]{1,8}",
            style in 0..6usize,
        ) {
            let value = format!("{}{secret}{}", before.trim(), after.trim_end());
            let quoted = serde_json::to_string(&value).unwrap();
            let single = format!("'{}'", value.replace('\'', "''"));
            let header = match style {
                0 => format!("    {name}: {quoted}\n"),
                1 => format!("    {name}: {single}\n"),
                2 => format!("    {name}: |-\n      {value}\n      more\n"),
                3 => format!("    {name}: >\n      {value}\n\n      more\n"),
                4 => format!("    {name}: {quoted}  # note\n"),
                // A literal beside a reference.
                _ => format!("    {name}: {}\n", serde_json::to_string(&format!("${{seq}} {value}")).unwrap()),
            };
            let text = format!("defaults:\n  headers:\n{header}    Accept: a/b\nflows: {{ f: {{ steps: [ {{ request: GET / }} ] }} }}\n");
            let out = redact(&text);
            proptest::prop_assert!(!out.contains(&secret), "{text}\n->\n{out}");
            proptest::prop_assert_eq!(out.lines().count(), text.lines().count());
            proptest::prop_assert!(!out.contains(UNREDACTABLE), "{text}\n->\n{out}");
            proptest::prop_assert!(out.contains("Accept: a/b"));
        }
    }

    #[test]
    fn text_that_is_not_yaml_is_left_out_whole() {
        // An unterminated quote: no structure, so none of the text is kept; the lines are.
        let out = redact("a: \"x\nb: secret-1\n");
        assert!(out.starts_with(UNREDACTABLE));
        assert!(!out.contains("secret-1"));
        assert_eq!(out.lines().count(), 2);
    }

    #[test]
    fn names_that_look_like_credentials() {
        let cases = [
            // Words of a header name.
            ("X-Auth-Token", true),
            ("X-Api-Key", true),
            // camelCase and a squashed part.
            ("accessToken", true),
            ("myapikey", true),
            ("client_secret", true),
            ("PASSWORD", true),
            // Harmless names, including one that merely starts like a word of the list.
            ("author", false),
            ("page", false),
            ("grant_type", false),
            ("Accept", false),
        ];
        for (name, want) in cases {
            assert_eq!(credential_name(name), want, "{name}");
        }
    }

    #[test]
    fn literals_and_references() {
        let cases = [
            // Only references, or a scheme word before one: no literal.
            ("${token}", false),
            ("Bearer ${token}", false),
            (" ${a} ${b} ", false),
            ("", false),
            // A literal beside a reference, a scheme word alone, an escaped `$${`.
            ("Bearer abc ${seq}", true),
            ("Bearer", true),
            ("$${token}", true),
            ("${seq}-x", true),
            ("x ${token}", true),
        ];
        for (value, want) in cases {
            assert_eq!(holds_literal(value), want, "{value:?}");
        }
    }

    #[test]
    fn text_from_a_server_loses_known_secrets_and_credential_pairs() {
        let secrets = vec!["s3cr3t-token".to_string(), "ab".to_string()];
        // (text, redacted)
        let cases = [
            // an echoed secret, wherever it is
            ("you sent Bearer s3cr3t-token", "you sent Bearer <redacted>"),
            // a credential-like JSON field, whatever its value
            (r#"{"error":"bad","token":"xyz"}"#, r#"{"error":"bad","token":"<redacted>"}"#),
            // a value too short to be looked for is kept (it would blank every "ab")
            ("abc", "abc"),
            // nothing secret: as is
            (r#"{"error":"qty must be a number"}"#, r#"{"error":"qty must be a number"}"#),
        ];
        for (i, (text, want)) in cases.into_iter().enumerate() {
            assert_eq!(redact_values(text, &secrets), want, "case {i}");
        }
    }

    #[test]
    fn command_lines_lose_secret_values() {
        let args = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let cases: &[(&[&str], &[&str])] = &[
            // The fleet token, as a separate value and attached.
            (
                &["perfops", "coordinator", "s.yaml", "--token", "tok-1"],
                &["perfops", "coordinator", "s.yaml", "--token", "<redacted>"],
            ),
            (&["perfops", "agent", "--token=tok-2"], &["perfops", "agent", "--token=<redacted>"]),
            // `--set` into a header, into a body field, and a harmless one kept.
            (
                &["perfops", "run", "--set", "defaults.headers.X-Secret=lit", "--set=load.max_in_flight=5"],
                &["perfops", "run", "--set", "defaults.headers.X-Secret=<redacted>", "--set=load.max_in_flight=5"],
            ),
            (
                &["perfops", "run", "--set", "setup[0].json={user: bob, password: pw}"],
                &["perfops", "run", "--set", "setup[0].json={user: bob, password: \"<redacted>\"}"],
            ),
            // A header list replaced whole.
            (
                &["perfops", "run", "--set", "defaults.headers={X-K: lit, Accept: a/b}"],
                &["perfops", "run", "--set", "defaults.headers={X-K: \"<redacted>\", Accept: a/b}"],
            ),
            // quick's headers: a harmless one kept, others redacted, attached or not.
            (
                &[
                    "perfops",
                    "quick",
                    "-H",
                    "Accept: a/b",
                    "-H",
                    "Authorization: Bearer x",
                    "-HX-K: y",
                    "--header=Cookie: c",
                ],
                &[
                    "perfops",
                    "quick",
                    "-H",
                    "Accept: a/b",
                    "-H",
                    "Authorization: <redacted>",
                    "-HX-K: <redacted>",
                    "--header=Cookie: <redacted>",
                ],
            ),
            // A URL's query key and password, in any argument.
            (
                &["perfops", "quick", "http://u:pw@h/x?access_token=t&q=1"],
                &["perfops", "quick", "http://u:<redacted>@h/x?access_token=<redacted>&q=1"],
            ),
            // A credential-like switch followed by a flag keeps the flag.
            (&["perfops", "x", "--no-auth", "--quiet"], &["perfops", "x", "--no-auth", "--quiet"]),
        ];
        for (input, want) in cases {
            assert_eq!(redact_command(&args(input)), args(want), "{input:?}");
        }
    }
}
