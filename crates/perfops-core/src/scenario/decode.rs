//! YAML node tree -> [`Scenario`], collecting every error.
//!
//! Each `decode_*` function takes a node and its field path, reports what is
//! wrong with it to the [`Dec`] and returns what it could make of it (`None`
//! when nothing), so one pass finds all problems. Overrides (`--set a.b=v`)
//! are applied to the tree first and then validated like the file itself.
//!
//! This module owns the decoder, its helpers (maps with known fields,
//! scalars, durations, rates, templates, positions of errors) and the top
//! level: name, target, defaults, data, conditions. The parts with their own
//! vocabulary live beside it: `flow.rs` (flows, steps, saved variables),
//! `load.rs` (the load model and its stages) and `watch.rs` (watched metrics
//! and probes).

use std::str::FromStr;
use std::time::Duration;

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode};
use marked_yaml::{LoaderOptions, Marker, Node, Span};

use super::condition::{AbortRule, Condition, ConditionError};
use super::diag::{Diagnostic, Diagnostics, did_you_mean};
use super::feeder::FeedMode;
use super::output::OutputSpec;
use super::template::head::{first_refused, is_token, refused_name};
use super::template::{Template, VarRef};
use super::{Defaults, DemoModel, FeederSpec, Http2Options, HttpVersion, Origin, Scenario, Step, TargetSpec, VarUse};
use crate::model::Rate;
use crate::units::parse_duration;

/// The hint for a CR, LF or NUL written into a scalar that goes into a request's head.
const QUOTED_ESCAPES: &str = "in double quotes YAML turns `\\r`, `\\n` and `\\0` into control characters; remove them \
     (single quotes keep a backslash as text)";

/// Source id of nodes that came from `--set` rather than the file.
const OVERRIDE_SOURCE: usize = 1;
/// Source id of nodes of a `--set` flow value, parsed behind [`FLOW_PREFIX`].
const OVERRIDE_FLOW_SOURCE: usize = 2;
/// What a `--set` flow value is parsed behind (the loader wants a mapping on
/// top); its columns are taken off again when an error points into the value.
const FLOW_PREFIX: &str = "v: ";

/// Where a value given with `--set` "is": diagnostics name the file `--set`.
fn override_marker() -> Marker {
    Marker::new(OVERRIDE_SOURCE, 0, 1, 1)
}

/// `--set path=value`: replace (or add) one field before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Dotted path, e.g. `load.max_in_flight` or `load.stages[0].rate`.
    pub path: String,
    /// The value, as it would be written in YAML.
    pub value: String,
}

impl FromStr for Override {
    type Err = String;
    fn from_str(s: &str) -> Result<Override, String> {
        match s.split_once('=') {
            Some((p, v)) if !p.trim().is_empty() => Ok(Override { path: p.trim().into(), value: v.trim().into() }),
            _ => Err(format!("`{s}` is not `path=value` (e.g. load.max_in_flight=100)")),
        }
    }
}

const TOP: &[&str] = &[
    "name",
    "target",
    "defaults",
    "setup",
    "flows",
    "data",
    "load",
    "slo",
    "abort_when",
    "watch",
    "probe",
    "outputs",
    "scripts",
];
const DEFAULTS: &[&str] = &["timeout", "connect_timeout", "headers", "protocol", "http2", "cookies", "before", "after"];
pub(super) const HTTP2: &[&str] = &["streams", "connections", "stream_window", "connection_window"];
const FEEDER: &[&str] = &["csv", "mode"];
const DEMO_OPTIONS: &[&str] = &["workers", "threads", "backlog", "io_wait", "cpu_work"];

/// Parse and validate scenario `text` read from `file` (the name is used in
/// diagnostics and as the default scenario name).
pub fn parse(file: &str, text: &str, overrides: &[Override]) -> Result<Scenario, Diagnostics> {
    parse_partial(file, text, overrides).map_err(|(d, _)| d)
}

/// What a file with errors still says about the inputs it reads besides itself: its feeders and where
/// it uses `${env.X}` and feeder columns. `check` reads those too, so that an unknown CSV column or an
/// unset variable is reported in the same pass as the file's own errors, not after they are fixed
/// (issue #32).
#[derive(Debug, Clone, Default)]
pub struct Partial {
    /// The feeders declared under `data:` whose `csv:` was readable in the file (one with a bad `mode`
    /// included: its columns can still be checked).
    pub data: Vec<FeederSpec>,
    /// Every `${env.NAME}` and `${feeder.column}` used where it was decoded ([`Scenario::outside_vars`]).
    pub outside_vars: Vec<VarUse>,
    /// `scripts:` as far as it decoded, with the functions named: `check` compiles them too.
    /// Boxed: a result's error stays small.
    pub scripts: Option<Box<super::script::ScriptsSpec>>,
}

/// [`parse`], and on errors what the file still says ([`Partial`]).
pub fn parse_partial(file: &str, text: &str, overrides: &[Override]) -> Result<Scenario, (Diagnostics, Partial)> {
    let mut d = Dec {
        file,
        text,
        errors: Vec::new(),
        uses: Vec::new(),
        outside_vars: Vec::new(),
        data: Vec::new(),
        salvaged_steps: Vec::new(),
        salvaged_saves: Vec::new(),
        function_uses: Vec::new(),
        inline_code: Vec::new(),
        scripts: None,
    };
    // Without `prevent_coercion`, quoted scalars claim to be plain: `"123"`
    // would become a JSON number and caret columns would miss the quote.
    let options = LoaderOptions::default().error_on_duplicate_keys(true).prevent_coercion(true);
    let mut root = match marked_yaml::parse_yaml_with_options(0, text, options) {
        Ok(node) => node,
        Err(e) => return Err((Diagnostics(vec![d.load_error(e)]), Partial::default())),
    };
    for o in overrides {
        d.apply_override(&mut root, o);
    }
    let scenario = d.scenario(&root);
    match scenario {
        Some(s) if d.errors.is_empty() => Ok(s),
        scenario => {
            d.errors.sort_by_key(|e| (e.file == "--set", e.line, e.column));
            let outside_vars = match scenario {
                Some(s) => s.outside_vars,
                None => d.outside_vars,
            };
            Err((Diagnostics(d.errors), Partial { data: d.data, outside_vars, scripts: d.scripts.map(Box::new) }))
        }
    }
}

/// The decoder: where errors go.
pub(super) struct Dec<'f> {
    file: &'f str,
    /// The file's text, to place an error inside a quoted scalar ([`Dec::marker_in`]).
    text: &'f str,
    pub(super) errors: Vec<Diagnostic>,
    /// Every `${saved}` variable used, where, for the final check that each
    /// is saved somewhere.
    pub(super) uses: Vec<(String, Option<Marker>, String)>,
    /// Every `${env.NAME}` and `${feeder.column}` used, where ([`Scenario::outside_vars`]).
    outside_vars: Vec<VarUse>,
    /// The feeders decoded, for [`Partial`].
    data: Vec<FeederSpec>,
    /// The names of steps that did not decode ([`Dec::step_or_salvage`]).
    pub(super) salvaged_steps: Vec<String>,
    /// The names every step's `save:` meant, decoded or not.
    pub(super) salvaged_saves: Vec<(String, String)>,
    /// Every script function named (hooks, script steps), where ([`super::script::ScriptsSpec::uses`]).
    pub(super) function_uses: Vec<super::script::FunctionUse>,
    /// Inline code written where a function name goes ([`super::script::ScriptsSpec::inline`]).
    pub(super) inline_code: Vec<super::script::InlineCode>,
    /// `scripts:` once decoded, for [`Partial`].
    scripts: Option<super::script::ScriptsSpec>,
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// Where a YAML syntax error really is, when the scanner names another place: a tab, which it
/// reported at the start of the scalar before it (`1:7` for a tab that starts line 2), and a
/// flow `{` or `[` left open, which it reported at the next line's key as "invalid
/// indentation" (a new user's review). `None`: the scanner's place is the one.
fn syntax_cause(text: &str, at: &Marker, info: &str) -> Option<(Marker, String, &'static str)> {
    let line_start = |line: usize| text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum::<usize>();
    let marker = |offset: usize| {
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Marker::new(at.source(), before.chars().count(), line, column)
    };
    if info.contains("tab") {
        let from = line_start(at.line());
        let tab = text.get(from..)?.find('\t')? + from;
        let m = marker(tab);
        return Some((m, "YAML syntax: a tab; YAML indents with spaces".into(), "replace the tab with spaces"));
    }
    // The flow brackets open where the scanner stopped, outside quotes and comments: one opened
    // on an earlier line, when the scanner speaks of indentation or a missing `,`/`}`/`]`.
    if !(info.contains("indentation") || info.contains("did not find expected")) {
        return None;
    }
    let end = line_start(at.line()) + at.column().saturating_sub(1);
    let mut open: Vec<(char, usize)> = Vec::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    // The last character, and the last that was not a space on this line (`None` at its start):
    // a quote opens a string only where a value starts (`user's orders` is plain text), a `#`
    // a comment only after a space.
    let (mut last, mut token) = ('\n', None::<char>);
    for (i, c) in text.get(..end)?.char_indices() {
        let starts_value = token.is_none_or(|t| matches!(t, ':' | ',' | '[' | '{' | '-' | '?'));
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') if starts_value => quote = Some(c),
            (None, '#') if last.is_whitespace() => comment = true,
            (None, '{' | '[') => open.push((c, i)),
            (None, '}' | ']') => {
                open.pop();
            }
            _ => {}
        }
        last = c;
        if c == '\n' {
            token = None;
        } else if !c.is_whitespace() {
            token = Some(c);
        }
    }
    let &(bracket, offset) = open.last()?;
    let m = marker(offset);
    if m.line() >= at.line() {
        return None;
    }
    let close = if bracket == '{' { '}' } else { ']' };
    let message = format!("YAML syntax: this `{bracket}` is never closed (the scanner stopped at line {})", at.line());
    Some((m, message, if close == '}' { "close it with `}`" } else { "close it with `]`" }))
}

pub(super) fn kind(node: &Node) -> &'static str {
    match node {
        Node::Scalar(_) => "a single value",
        Node::Mapping(_) => "a mapping",
        Node::Sequence(_) => "a list",
    }
}

impl Dec<'_> {
    /// Where `marker` is, in the file or in a `--set` value.
    pub(super) fn origin(&self, marker: Option<&Marker>, path: &str) -> Origin {
        let (line, mut column, source) = marker.map_or((0, 0, 0), |m| (m.line(), m.column(), m.source()));
        if source == OVERRIDE_FLOW_SOURCE {
            column = column.saturating_sub(FLOW_PREFIX.len()).max(1);
        }
        let file = if source == OVERRIDE_SOURCE || source == OVERRIDE_FLOW_SOURCE {
            "--set".to_string()
        } else {
            self.file.to_string()
        };
        Origin { file, line, column, path: path.to_string() }
    }

    pub(super) fn at_marker(&mut self, marker: Option<&Marker>, path: &str, message: String, hint: Option<String>) {
        let error = self.origin(marker, path).error(message, hint);
        self.errors.push(error);
    }

    pub(super) fn at(&mut self, span: &Span, path: &str, message: impl Into<String>, hint: Option<String>) {
        self.at_marker(span.start(), path, message.into(), hint);
    }

    fn load_error(&mut self, e: marked_yaml::LoadError) -> Diagnostic {
        use marked_yaml::LoadError as E;
        let (marker, message, hint) = match e {
            E::TopLevelMustBeMapping(m) => {
                (m, "a scenario is a mapping of fields".to_string(), Some("start with `name:` and `target:`"))
            }
            E::UnexpectedAnchor(m) => (m, "YAML anchors are not supported".into(), None),
            E::MappingKeyMustBeScalar(m) => (m, "mapping keys must be plain names".into(), None),
            E::UnexpectedTag(m) => (m, "YAML tags (`!name`) are not supported".into(), None),
            E::ScanError(m, se) => match syntax_cause(self.text, &m, se.info()) {
                Some((at, message, hint)) => (at, message, Some(hint)),
                None => (
                    m,
                    format!("YAML syntax: {}", se.info()),
                    Some("check the indentation and the `key: value` shape near here"),
                ),
            },
            E::DuplicateKey(dup) => {
                let prev = dup.prev_key.span().start().map_or(0, |m| m.line());
                (
                    *dup.key.span().start().unwrap_or(&Marker::new(0, 0, 0, 0)),
                    format!("`{}` appears twice (first on line {prev})", dup.key.as_str()),
                    Some("remove one of them"),
                )
            }
            other => (Marker::new(0, 0, 0, 0), format!("YAML: {other:?}"), None),
        };
        self.at_marker(Some(&marker), "", message, hint.map(str::to_string));
        self.errors.pop().unwrap_or_else(|| unreachable!("just pushed"))
    }

    /// A mapping with only `known` keys (each unknown one is reported).
    pub(super) fn map<'n>(&mut self, node: &'n Node, path: &str, known: &[&str]) -> Option<&'n MarkedMappingNode> {
        let Some(m) = node.as_mapping() else {
            self.at(
                node.span(),
                path,
                format!("expected a mapping of fields, found {}", kind(node)),
                Some(format!("fields here: {}", known.join(", "))),
            );
            return None;
        };
        for key in m.keys() {
            if !known.contains(&key.as_str()) {
                let hint = match did_you_mean(key.as_str(), known) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("fields here: {}", known.join(", ")),
                };
                self.at(key.span(), &join(path, key.as_str()), format!("unknown field `{}`", key.as_str()), Some(hint));
            }
        }
        Some(m)
    }

    pub(super) fn required<'n>(
        &mut self,
        m: &'n MarkedMappingNode,
        key: &str,
        path: &str,
        hint: &str,
    ) -> Option<&'n Node> {
        let node = m.get_node(key);
        if node.is_none() {
            // A block mapping's span starts after its first key: point at that key.
            let start = m.keys().next().and_then(|k| k.span().start()).or(m.span().start()).copied();
            self.at_marker(start.as_ref(), path, format!("missing field `{key}`"), Some(hint.to_string()));
        }
        node
    }

    pub(super) fn scalar<'n>(&mut self, node: &'n Node, path: &str, what: &str) -> Option<&'n MarkedScalarNode> {
        let s = node.as_scalar();
        if s.is_none() {
            self.at(node.span(), path, format!("expected {what}, found {}", kind(node)), None);
        }
        s
    }

    pub(super) fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        self.scalar(node, path, "a text value").map(|s| s.as_str().to_string())
    }

    pub(super) fn duration(&mut self, node: &Node, path: &str) -> Option<Duration> {
        let s = self.scalar(node, path, "a duration")?;
        match parse_duration(s.as_str()) {
            Ok(d) => Some(d),
            Err(e) => {
                self.at(s.span(), path, e.to_string(), Some("e.g. 500ms, 30s, 5m".into()));
                None
            }
        }
    }

    pub(super) fn number<T: FromStr>(&mut self, node: &Node, path: &str, what: &str) -> Option<T> {
        let s = self.scalar(node, path, what)?;
        match s.as_str().trim().replace('_', "").parse::<T>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.at(s.span(), path, format!("`{}` is not {what}", s.as_str()), None);
                None
            }
        }
    }

    pub(super) fn rate(&mut self, node: &Node, path: &str) -> Option<Rate> {
        let s = self.scalar(node, path, "a rate")?;
        match s.as_str().parse::<Rate>() {
            Ok(r) => Some(r),
            Err(e) => {
                self.at(s.span(), path, e.to_string(), Some("arrivals per second, e.g. 50, 300/s, 6000/m".into()));
                None
            }
        }
    }

    /// A template where its text is sent as it is: a `:string` / `:number` conversion would change
    /// nothing there, and is an error (issue #32).
    pub(super) fn template(&mut self, node: &Node, path: &str, feeders: &[&str]) -> Option<Template> {
        let t = self.typed_template(node, path, feeders)?;
        if let (Some(at), Some(s)) = (t.conversion_at(), node.as_scalar()) {
            self.misplaced_conversion(s, at, path);
            return None;
        }
        Some(t)
    }

    /// A `:string` / `:number` at byte `at` of `s`, where the text is sent as it is.
    pub(super) fn misplaced_conversion(&mut self, s: &MarkedScalarNode, at: usize, path: &str) {
        let marker = self.column_in(s, at);
        self.at_marker(
            marker.as_ref(),
            path,
            "a conversion (`:string`, `:number`) only applies to a whole value in `json:` or `message:`".into(),
            Some("here the text is sent as it is: remove the conversion".into()),
        );
    }

    /// A template that may carry conversions: a leaf of a `json:` body or a gRPC message.
    pub(super) fn typed_template(&mut self, node: &Node, path: &str, feeders: &[&str]) -> Option<Template> {
        let s = self.scalar(node, path, "a text value")?;
        match Template::parse(s.as_str(), feeders) {
            Ok(t) => {
                self.record_uses(&t, s, 0, path);
                Some(t)
            }
            Err(e) => {
                let marker = self.column_in(s, e.offset);
                self.at_marker(marker.as_ref(), path, e.message.clone(), e.hint.clone());
                None
            }
        }
    }

    /// The position of byte `offset` of scalar `s`'s text.
    fn column_in(&self, s: &MarkedScalarNode, offset: usize) -> Option<Marker> {
        let mut marker = s.span().start().copied();
        if let Some(m) = marker.as_mut() {
            // Quoted scalars start one column before their text.
            m.set_column(m.column() + offset + usize::from(!s.may_coerce()));
        }
        marker
    }

    /// Note where each saved, environment and feeder variable of `t`
    /// (parsed from `s` at byte `at`) is used.
    pub(super) fn record_uses(&mut self, t: &Template, s: &MarkedScalarNode, at: usize, path: &str) {
        for v in t.vars() {
            let written = match v {
                VarRef::Saved(name) => format!("${{{name}"),
                VarRef::Env(name) => format!("${{env.{name}"),
                VarRef::Feeder { feeder, column } => format!("${{{feeder}.{column}"),
                _ => continue,
            };
            let mut marker = s.span().start().copied();
            if let Some(m) = marker.as_mut() {
                let offset = t.source().find(&written).unwrap_or(0);
                m.set_column(m.column() + at + offset + usize::from(!s.may_coerce()));
            }
            if let VarRef::Saved(name) = v {
                self.uses.push((name.clone(), marker, path.to_string()));
            } else {
                let at = self.origin(marker.as_ref(), path);
                self.outside_vars.push(VarUse { var: v.clone(), used_in: t.source().to_string(), at });
            }
        }
    }

    fn condition_error(&mut self, s: &MarkedScalarNode, path: &str, e: ConditionError) {
        let mut marker = s.span().start().copied();
        if let Some(m) = marker.as_mut() {
            m.set_column(m.column() + e.offset + usize::from(!s.may_coerce()));
        }
        self.at_marker(marker.as_ref(), path, e.message, e.hint);
    }

    pub(super) fn list<'n>(&mut self, node: &'n Node, path: &str, what: &str) -> &'n [Node] {
        match node.as_sequence() {
            Some(s) => s,
            None => {
                self.at(
                    node.span(),
                    path,
                    format!("expected a list of {what}, found {}", kind(node)),
                    Some("list items start with `- `".into()),
                );
                &[]
            }
        }
    }

    fn apply_override(&mut self, root: &mut Node, o: &Override) {
        let Some(value) = self.override_value(o) else { return };
        let mut node = root;
        let parts: Vec<&str> = o.path.split('.').collect();
        for (i, raw) in parts.iter().enumerate() {
            let (key, index) = match raw.split_once('[') {
                Some((k, rest)) => (k, rest.strip_suffix(']').and_then(|n| n.parse::<usize>().ok())),
                None => (*raw, None),
            };
            let last = i + 1 == parts.len() && index.is_none();
            let Some(map) = node.as_mapping_mut() else {
                self.at_marker(Some(&override_marker()), &o.path, format!("`{key}` is not inside a mapping"), None);
                return;
            };
            // What --set adds is dated to --set: an unknown field it names is
            // reported at `--set:1:1`, not at line 0 of the file.
            let here = || Span::new_start(override_marker());
            if last {
                // `stages` and `steps` are two ways to write one load profile:
                // setting one replaces the other ("give `stages` or `steps`, not
                // both" refused the guide's own `--set 'load.stages=[...]'` on a
                // file that wrote `steps`).
                if i == 1 && parts[0] == "load" && matches!(key, "stages" | "steps") {
                    map.remove(if key == "stages" { "steps" } else { "stages" });
                }
                map.insert(MarkedScalarNode::new(here(), key), value);
                return;
            }
            let key_node = MarkedScalarNode::new(here(), key);
            let child = map.entry(key_node).or_insert_with(|| Node::Mapping(MarkedMappingNode::new_empty(here())));
            node = match index {
                None => child,
                Some(n) => match child.as_sequence_mut().and_then(|s| s.get_mut(n)) {
                    Some(item) if i + 1 == parts.len() => {
                        *item = value;
                        return;
                    }
                    Some(item) => item,
                    None => {
                        self.at_marker(Some(&override_marker()), &o.path, format!("`{raw}`: no such list item"), None);
                        return;
                    }
                },
            };
        }
    }

    /// The value of `--set path=value`: a scalar as it is, or a YAML flow list or
    /// mapping (`slo=[p95 < 1s, errors < 1%]`, `load.stages=[{rate: 50, hold: 10s}]`)
    /// parsed as the file's values are.
    fn override_value(&mut self, o: &Override) -> Option<Node> {
        if !o.value.starts_with(['[', '{']) {
            let mut s = MarkedScalarNode::new(Span::new_start(override_marker()), o.value.as_str());
            s.set_coerce(true);
            return Some(Node::Scalar(s));
        }
        let options = LoaderOptions::default().error_on_duplicate_keys(true).prevent_coercion(true);
        let text = format!("{FLOW_PREFIX}{}", o.value);
        let parsed = marked_yaml::parse_yaml_with_options(OVERRIDE_FLOW_SOURCE, text, options);
        match parsed.map(|mut n| n.as_mapping_mut().and_then(|m| m.remove("v"))) {
            Ok(Some(node)) => Some(node),
            Ok(None) | Err(_) => {
                let hint = "a flow list or mapping, e.g. `slo=[p95 < 1s, errors < 1%]`".to_string();
                self.at_marker(Some(&override_marker()), &o.path, format!("`{}` is not YAML", o.value), Some(hint));
                None
            }
        }
    }

    fn scenario(&mut self, root: &Node) -> Option<Scenario> {
        let top = self.map(root, "", TOP)?;
        let default_name = std::path::Path::new(self.file)
            .file_stem()
            .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned());
        let name = top.get_node("name").and_then(|n| self.string(n, "name")).unwrap_or(default_name);
        let target = self
            .required(top, "target", "", "e.g. `target: http://127.0.0.1:8080` or `target: demo:threads`")
            .and_then(|n| self.target(n));
        let (data, mut declared) = top.get_node("data").map(|n| self.data(n)).unwrap_or_default();
        self.data = data.clone();
        // A replay's value columns are read as `${replay.NAME}`, as a feeder's.
        let model = top.get_node("load").and_then(Node::as_mapping).and_then(|m| m.get_node("model"));
        if model.and_then(Node::as_scalar).is_some_and(|s| s.as_str() == "replay") {
            if let Some((k, _)) = top
                .get_node("data")
                .and_then(Node::as_mapping)
                .and_then(|m| m.iter().find(|(k, _)| k.as_str() == "replay"))
            {
                self.at(
                    k.span(),
                    "data.replay",
                    "`replay` is the name of the replay's values (`${replay.NAME}`)",
                    Some("give this feeder another name".into()),
                );
            }
            declared.push("replay".into());
        }
        // Every name declared, even one whose `csv:` or `mode` is wrong: `${users.email}` is then a
        // use of that feeder, not a second, false "unknown feeder" error (issue #32).
        let feeders: Vec<&str> = declared.iter().map(String::as_str).collect();
        let mut scripts = top.get_node("scripts").and_then(|n| self.scripts(n));
        let defaults = self.defaults(top.get_node("defaults"), &feeders);
        let setup: Vec<Step> = match top.get_node("setup") {
            Some(n) => self
                .list(n, "setup", "steps")
                .iter()
                .enumerate()
                .filter_map(|(i, s)| self.step_or_salvage(s, &format!("setup[{i}]"), &feeders, &defaults.hooks))
                .collect(),
            None => Vec::new(),
        };
        // What setup saves is known to the flows; its steps are not measured, so an SLO cannot name them.
        self.salvaged_steps.clear();
        let flows = match self.required(top, "flows", "", "flows: { name: { steps: [ { request: GET / } ] } }") {
            Some(n) => self.flows(n, &feeders, &defaults.hooks),
            None => Vec::new(),
        };
        let load =
            self.required(top, "load", "", "load: { stages: [ { rate: 50, hold: 30s } ] }").and_then(|n| self.load(n));
        let watch = top.get_node("watch").and_then(|n| self.watch(n));
        let probe = top.get_node("probe").map(|n| self.probes(n)).unwrap_or_default();
        // The demo target is always watched (its /metrics and its process).
        let watched = watch.is_some() || matches!(target, Some(TargetSpec::Demo(..)));
        let steps: Vec<String> = flows
            .iter()
            .flat_map(|f| &f.steps)
            .flat_map(|s| std::iter::once(s.name.clone()).chain(s.messages_name()))
            .chain(std::mem::take(&mut self.salvaged_steps))
            .collect();
        let known = Measurable { watched, steps: &steps };
        let slo = match top.get_node("slo") {
            Some(n) => self.conditions(n, "slo", |t| Condition::parse(t).and_then(|c| measurable(c, &known))),
            // No `slo:` at all: a stage whose requests failed did not hold, whatever
            // its rate (100% 404s used to read "PASSED"). `slo: []` opts out.
            None => vec![default_slo()],
        };
        let abort_when = match top.get_node("abort_when") {
            Some(n) => self.conditions(n, "abort_when", |t| {
                AbortRule::parse(t).and_then(|r| measurable(r.condition.clone(), &known).map(|_| r))
            }),
            None => Vec::new(),
        };
        let outputs = top.get_node("outputs").map(|n| self.outputs(n)).unwrap_or_default();
        self.check_variables(&flows, scripts.is_some() || !self.inline_code.is_empty());
        self.check_functions(&mut scripts);
        self.scripts = scripts.clone();
        Some(Scenario {
            name,
            target: target?,
            defaults,
            setup,
            flows,
            data,
            load: load?,
            slo,
            abort_when,
            watch,
            probe,
            outputs,
            scripts,
            outside_vars: std::mem::take(&mut self.outside_vars),
        })
    }

    fn target(&mut self, node: &Node) -> Option<TargetSpec> {
        let s = self.scalar(node, "target", "a URL")?;
        let t = s.as_str().trim();
        if let Some(rest) = t.strip_prefix("demo:") {
            let (model, query) = rest.split_once('?').unwrap_or((rest, ""));
            let model = match model {
                "threads" => DemoModel::Threads,
                "async" => DemoModel::Async,
                other => {
                    self.at(
                        s.span(),
                        "target",
                        format!("unknown demo model `{other}`"),
                        Some("demo:threads or demo:async".into()),
                    );
                    return None;
                }
            };
            let mut options = Vec::new();
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let ok = match k {
                    "workers" | "threads" | "backlog" => v.parse::<u32>().is_ok(),
                    "io_wait" | "cpu_work" => parse_duration(v).is_ok(),
                    _ => {
                        let hint = did_you_mean(k, DEMO_OPTIONS).map_or_else(
                            || format!("settings: {}", DEMO_OPTIONS.join(", ")),
                            |d| format!("did you mean `{d}`?"),
                        );
                        self.at(s.span(), "target", format!("unknown demo setting `{k}`"), Some(hint));
                        continue;
                    }
                };
                if !ok {
                    self.at(
                        s.span(),
                        "target",
                        format!("demo setting `{k}={v}` has a bad value"),
                        Some("e.g. demo:threads?workers=2&threads=5&io_wait=50ms".into()),
                    );
                }
                options.push((k.to_string(), v.to_string()));
            }
            return Some(TargetSpec::Demo(model, options));
        }
        // `${env.NAME}` (#11): resolved once, before the URL is parsed
        // (`sources::target`); nothing else is known before the load.
        if t.contains("${") {
            match Template::parse(t, &[]) {
                Ok(tpl) if tpl.vars().all(|v| matches!(v, VarRef::Env(_))) && tpl.conversion_at().is_none() => {
                    self.record_uses(&tpl, s, s.as_str().find(t).unwrap_or(0), "target");
                }
                Ok(_) => {
                    self.at(
                        s.span(),
                        "target",
                        format!("`{t}`: only `${{env.NAME}}` can be used in target"),
                        Some("the target is resolved once, before the load: saved values, feeders and ${seq} are not known yet".into()),
                    );
                    return None;
                }
                Err(e) => {
                    self.at(s.span(), "target", format!("`{t}`: {}", e.message), e.hint);
                    return None;
                }
            }
        }
        let schemes = ["http://", "https://", "h2c://", "grpc://", "grpcs://", "ws://", "wss://", "${"];
        if schemes.iter().any(|p| t.starts_with(p)) {
            return Some(TargetSpec::Url(t.trim_end_matches('/').to_string()));
        }
        self.at(
            s.span(),
            "target",
            format!("`{t}` is not a target"),
            Some("use http://, https://, h2c://, grpc://, grpcs://, ws:// or wss://host:port, demo:threads or demo:async".into()),
        );
        None
    }

    fn defaults(&mut self, node: Option<&Node>, feeders: &[&str]) -> Defaults {
        let mut out = Defaults {
            timeout: Duration::from_secs(10),
            connect_timeout: None,
            headers: Vec::new(),
            protocol: None,
            http2: Http2Options::default(),
            cookies: true,
            hooks: super::script::StepScript::default(),
        };
        let Some(m) = node.and_then(|n| self.map(n, "defaults", DEFAULTS)) else { return out };
        if let Some(c) = m.get_node("cookies").and_then(|n| self.scalar(n, "defaults.cookies", "true or false")) {
            match c.as_str() {
                "true" => out.cookies = true,
                "false" => out.cookies = false,
                other => self.at(
                    c.span(),
                    "defaults.cookies",
                    format!("`{other}` is not true or false"),
                    Some("true (the default: each flow keeps its answers' cookies, as a browser) or false".into()),
                ),
            }
        }
        out.hooks = self.hooks(m, "defaults", &super::script::StepScript::default());
        if let Some(t) = m.get_node("timeout").and_then(|n| self.duration(n, "defaults.timeout")) {
            out.timeout = t;
        }
        if let Some(n) = m.get_node("connect_timeout")
            && let Some(t) = self.duration(n, "defaults.connect_timeout")
        {
            let hint = |why: String| Some(format!("{why}; the default is 5s (at most `timeout`)"));
            if t.is_zero() {
                self.at(
                    n.span(),
                    "defaults.connect_timeout",
                    "a connect timeout of 0 fails every connection",
                    hint("give it a time".into()),
                );
            } else if t > out.timeout {
                let why = format!("the whole request's `timeout` ({:?}) ends a connect first", out.timeout);
                self.at(
                    n.span(),
                    "defaults.connect_timeout",
                    format!("`connect_timeout` ({t:?}) is longer than `timeout`"),
                    hint(why),
                );
            }
            out.connect_timeout = Some(t);
        }
        if let Some(h) = m.get_node("headers") {
            out.headers = self.headers(h, "defaults.headers", feeders);
        }
        if let Some(p) = m.get_node("protocol").and_then(|n| self.scalar(n, "defaults.protocol", "http1 or h2")) {
            out.protocol = match p.as_str() {
                "http1" => Some(HttpVersion::Http1),
                "h2" => Some(HttpVersion::H2),
                other => {
                    let hint = did_you_mean(other, &["http1", "h2"])
                        .map_or_else(|| "http1 or h2".to_string(), |d| format!("did you mean `{d}`?"));
                    self.at(p.span(), "defaults.protocol", format!("unknown protocol `{other}`"), Some(hint));
                    None
                }
            };
        }
        if let Some(h) = m.get_node("http2") {
            out.http2 = self.http2(h);
        }
        out
    }

    /// `defaults.http2`: streams and connections (at least 1), windows
    /// (HTTP/2's bounds: 65,535 to 2^31-1 bytes).
    fn http2(&mut self, node: &Node) -> Http2Options {
        let mut out = Http2Options::default();
        let Some(m) = self.map(node, "defaults.http2", HTTP2) else { return out };
        let mut field = |key: &str, min: u32, max: u32, hint: &str| -> Option<u32> {
            let n = m.get_node(key)?;
            let path = join("defaults.http2", key);
            let v = self.number::<u32>(n, &path, "a whole number")?;
            if !(min..=max).contains(&v) {
                self.at(n.span(), &path, format!("{v} is out of range ({min} to {max})"), Some(hint.to_string()));
                return None;
            }
            Some(v)
        };
        out.streams = field("streams", 1, u32::MAX, "streams in flight per connection, e.g. 100");
        out.connections = field("connections", 1, u32::MAX, "connections over the run, e.g. 50");
        let window = "bytes, from 65535 (HTTP/2's default) to 2147483647";
        out.stream_window = field("stream_window", 65_535, i32::MAX as u32, window);
        out.connection_window = field("connection_window", 65_535, i32::MAX as u32, window);
        out
    }

    /// A mapping of header names to templated values: `headers:`, `defaults.headers`, gRPC
    /// `metadata:` (`in_head`: they go into the request's head) and a `form:` body (they do not: its
    /// values are percent-encoded).
    pub(super) fn headers(&mut self, node: &Node, path: &str, feeders: &[&str]) -> Vec<(String, Template)> {
        self.fields(node, path, feeders, true)
    }

    /// [`Dec::headers`], or a `form:` body's fields when `in_head` is false.
    pub(super) fn fields(
        &mut self,
        node: &Node,
        path: &str,
        feeders: &[&str],
        in_head: bool,
    ) -> Vec<(String, Template)> {
        let Some(m) = node.as_mapping() else {
            self.at(
                node.span(),
                path,
                format!("expected a mapping of header names to values, found {}", kind(node)),
                Some("headers: { Accept: application/json }".into()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in m.iter() {
            let p = join(path, k.as_str());
            let name = k.as_str();
            if !is_token(name.as_bytes()) {
                let hint = first_refused(name.as_bytes()).map(|_| QUOTED_ESCAPES.to_string());
                self.at(k.span(), &p, format!("`{}` is not a valid header name", name.escape_debug()), hint);
                continue;
            }
            if in_head
                && let Some(s) = v.as_scalar()
                && self.refuse_in_head(s, 0, &p, "a header value")
            {
                continue;
            }
            if let Some(t) = self.template(v, &p, feeders) {
                out.push((name.to_string(), t));
            }
        }
        out
    }

    /// Report a CR, LF or NUL in `s`'s text from byte `from` on, where it would go into a request's
    /// head as `what` (issue #31): at its line and column, with how YAML made it. True when reported.
    pub(super) fn refuse_in_head(&mut self, s: &MarkedScalarNode, from: usize, path: &str, what: &str) -> bool {
        let text = s.as_str().as_bytes();
        let Some(i) = text.get(from..).and_then(first_refused) else { return false };
        let marker = self.marker_in(s, from + i);
        let message = format!(
            "{what} cannot hold {}: it would end the line, and what follows would be sent as headers or a request of its own",
            refused_name(text[from + i])
        );
        self.at_marker(marker.as_ref(), path, message, Some(QUOTED_ESCAPES.into()));
        true
    }

    /// Where byte `offset` of scalar `s`'s text is in the file: exact for a scalar on one line, its
    /// escapes counted as written (`\r` is two columns, `\x0d` four); the scalar's start for one over
    /// several lines (a block scalar, a folded string) or from `--set`.
    pub(super) fn marker_in(&self, s: &MarkedScalarNode, offset: usize) -> Option<Marker> {
        let start = s.span().start().copied()?;
        if start.source() != 0 {
            return Some(start);
        }
        let want = s.as_str().get(..offset).map_or(0, |t| t.chars().count());
        let mut src = self.text.chars().skip(start.character()).peekable();
        let (double, single) = match src.peek() {
            Some('"') => (true, false),
            Some('\'') => (false, true),
            _ => (false, false),
        };
        let mut column = start.column();
        if double || single {
            src.next();
            column += 1;
        }
        for _ in 0..want {
            match src.next() {
                None | Some('\n' | '\r') => return Some(start),
                Some('\\') if double => {
                    let digits = match src.next() {
                        Some('x') => 2,
                        Some('u') => 4,
                        Some('U') => 8,
                        Some('\n' | '\r') | None => return Some(start),
                        Some(_) => 0,
                    };
                    src.by_ref().take(digits).for_each(drop);
                    column += 2 + digits;
                }
                // `''` is one `'` in a single-quoted scalar.
                Some('\'') if single => {
                    src.next();
                    column += 2;
                }
                Some(_) => column += 1,
            }
        }
        let mut marker = start;
        marker.set_column(column);
        Some(marker)
    }

    /// The feeders whose `csv:` decoded (a bad `mode` reported, and read as `cycle`), and the name of
    /// every feeder declared.
    fn data(&mut self, node: &Node) -> (Vec<FeederSpec>, Vec<String>) {
        let Some(m) = node.as_mapping() else {
            self.at(
                node.span(),
                "data",
                "expected a mapping of feeder names",
                Some("data: { users: { csv: users.csv, mode: cycle } }".into()),
            );
            return (Vec::new(), Vec::new());
        };
        let mut out = Vec::new();
        let mut declared = Vec::new();
        for (k, v) in m.iter() {
            let p = join("data", k.as_str());
            declared.push(k.as_str().to_string());
            let Some(f) = self.map(v, &p, FEEDER) else { continue };
            let csv_node = self.required(f, "csv", &p, "csv: users.csv");
            let csv = csv_node.and_then(|n| self.string(n, &join(&p, "csv")));
            let at = self.origin(csv_node.and_then(|n| n.span().start()), &join(&p, "csv"));
            let mode = match f.get_node("mode").and_then(|n| self.scalar(n, &join(&p, "mode"), "cycle, random or once"))
            {
                None => Some(FeedMode::Cycle),
                Some(s) => match s.as_str() {
                    "cycle" => Some(FeedMode::Cycle),
                    "random" => Some(FeedMode::Random),
                    "once" => Some(FeedMode::Once),
                    other => {
                        let names: Vec<&str> = FeedMode::ALL.iter().map(|m| m.name()).collect();
                        let hint = match did_you_mean(other, &names) {
                            Some(near) => format!("did you mean `{near}`? modes: cycle, random or once"),
                            None => "cycle, random or once".into(),
                        };
                        self.at(s.span(), &join(&p, "mode"), format!("unknown mode `{other}`"), Some(hint));
                        // The error stands; its file's columns can still be checked.
                        Some(FeedMode::Cycle)
                    }
                },
            };
            if let (Some(csv), Some(mode)) = (csv, mode) {
                out.push(FeederSpec { name: k.as_str().to_string(), csv, mode, at });
            }
        }
        (out, declared)
    }

    /// `outputs: [ NAME=ARG, ... ]`: each kept with where it is written, for
    /// the registry's errors.
    fn outputs(&mut self, node: &Node) -> Vec<OutputSpec> {
        let mut out = Vec::new();
        for (i, item) in self.list(node, "outputs", "outputs").iter().enumerate() {
            let p = format!("outputs[{i}]");
            let Some(s) = self.scalar(item, &p, "an output such as `jsonl=results.jsonl`") else { continue };
            match OutputSpec::parse(s.as_str()) {
                Ok(spec) => out.push(OutputSpec { at: self.origin(s.span().start(), &p), ..spec }),
                Err(e) => {
                    self.at(s.span(), &p, e, Some("e.g. `jsonl=results.jsonl` or `prometheus=127.0.0.1:9464`".into()))
                }
            }
        }
        out
    }

    fn conditions<T>(&mut self, node: &Node, path: &str, parse: impl Fn(&str) -> Result<T, ConditionError>) -> Vec<T> {
        let mut out = Vec::new();
        for (i, item) in self.list(node, path, "conditions").iter().enumerate() {
            let p = format!("{path}[{i}]");
            let Some(s) = self.scalar(item, &p, "a condition such as `p95 < 500ms`") else { continue };
            match parse(s.as_str()) {
                Ok(c) => out.push(c),
                Err(e) => self.condition_error(s, &p, e),
            }
        }
        out
    }
}

/// The SLO of a scenario that writes no `slo:`: see [`DEFAULT_SLO`].
fn default_slo() -> Condition {
    Condition::parse(super::DEFAULT_SLO).expect("the default SLO line parses")
}

/// What a scenario's conditions can be measured against.
struct Measurable<'a> {
    /// Something is watched: `metric(...)` has samples.
    watched: bool,
    /// The names the flows' requests are measured under: `p99(NAME)`.
    steps: &'a [String],
}

/// A condition that can be evaluated: `metric(...)` needs something watched,
/// `p99(step)` a step of that name. A condition that could never be
/// measured would fail every stage as "nothing measured" (a typo in a step
/// name passed `check`, then failed the run with exit 1, as if the service
/// had missed its SLO).
fn measurable(c: Condition, known: &Measurable<'_>) -> Result<Condition, ConditionError> {
    if let super::Metric::Watched(name) = &c.metric
        && !known.watched
    {
        return Err(ConditionError {
            offset: 0,
            message: format!("`metric({name})` needs watched metrics, and nothing is watched"),
            hint: Some("add `watch: { prometheus: [ /metrics ] }` (or `json:`, `process:`)".into()),
        });
    }
    if let Some(step) = &c.step
        && !known.steps.contains(step)
    {
        let names: Vec<&str> = known.steps.iter().map(String::as_str).collect();
        return Err(ConditionError {
            offset: c.text.find(step.as_str()).unwrap_or(0),
            message: format!("no step is named `{step}`"),
            hint: Some(match did_you_mean(step, &names) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("the flows' steps are named: {}", names.join(", ")),
            }),
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::super::flow::{EXPECT, FLOW, STEP};
    use super::super::load::{CLOSED_STAGE, LOAD, OPEN_STAGE, STEPS};
    use super::super::watch::{JSON_SOURCE, POOL, PROBE, PROBE_SPEC, PROCESS, PROMQL, WATCH};
    use super::*;

    /// The committed JSON Schema (what editors complete) names exactly the
    /// fields the parser accepts: neither may grow without the other.
    #[test]
    fn json_schema_is_in_sync_with_the_parser() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../../schema/scenario.schema.json")).expect("valid JSON");
        let props = |v: &serde_json::Value| -> Vec<String> {
            let mut keys: Vec<String> = v["properties"].as_object().expect("properties").keys().cloned().collect();
            keys.sort();
            keys
        };
        let sorted = |keys: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        let defs = &schema["$defs"];
        let mut stage: Vec<&str> = OPEN_STAGE.to_vec();
        stage.extend(CLOSED_STAGE.iter().filter(|k| !OPEN_STAGE.contains(k)));
        let cases: [(&str, &serde_json::Value, &[&str]); 18] = [
            ("top level", &schema, TOP),
            ("defaults", &defs["defaults"], DEFAULTS),
            ("http2", &defs["http2"], HTTP2),
            ("flow", &defs["flow"], FLOW),
            ("step", &defs["step"], STEP),
            ("expect", &defs["expect"], EXPECT),
            ("feeder", &defs["feeder"], FEEDER),
            ("load", &defs["load"], LOAD),
            ("stage", &defs["stage"], &stage),
            ("steps", &defs["steps"], STEPS),
            ("watch", &defs["watch"], WATCH),
            ("json source", &defs["json_source"], JSON_SOURCE),
            ("process", &defs["process"], PROCESS),
            ("pool", &defs["pool"], POOL),
            ("promql", &defs["promql"], PROMQL),
            ("probe", &defs["probe"], PROBE),
            ("probe spec", &defs["probe_spec"], PROBE_SPEC),
            ("scripts", &defs["scripts"], super::super::script::SCRIPTS),
        ];
        for (what, node, keys) in cases {
            assert_eq!(props(node), sorted(keys), "{what}: schema and parser disagree");
        }
    }

    /// `defaults.connect_timeout`: kept when it is a time within `timeout`; 0, or past
    /// `timeout`, said where it is written.
    #[test]
    fn connect_timeouts_are_checked() {
        let head = "name: c\ntarget: http://127.0.0.1:1\nflows: { f: { steps: [ { request: GET / } ] } }\n\
                    load: { stages: [ { rate: 1, hold: 1s } ] }\n";
        // (defaults, Ok(the connect timeout) or Err(the message's words))
        let cases: [(&str, Result<u64, &str>); 5] = [
            // none said: 5 s
            ("{ timeout: 10s }", Ok(5_000)),
            // none said, a shorter timeout: the timeout
            ("{ timeout: 2s }", Ok(2_000)),
            ("{ timeout: 10s, connect_timeout: 1s }", Ok(1_000)),
            ("{ connect_timeout: 0s }", Err("a connect timeout of 0")),
            ("{ timeout: 2s, connect_timeout: 3s }", Err("is longer than `timeout`")),
        ];
        for (defaults, want) in cases {
            let got = parse("c.yaml", &format!("{head}defaults: {defaults}\n"), &[]);
            match (got, want) {
                (Ok(s), Ok(ms)) => assert_eq!(s.defaults.connect_timeout().as_millis() as u64, ms, "{defaults}"),
                (Err(e), Err(words)) => {
                    let d = &e.0[0];
                    assert!(d.message.contains(words) && d.line == 5, "{defaults}: {d:?}");
                }
                (got, want) => panic!("{defaults}: {:?} vs {want:?}", got.map(|s| s.defaults.connect_timeout())),
            }
        }
    }

    /// A YAML syntax error is placed where its cause is: a tab where it is, a flow bracket left
    /// open where it opened (the scanner named the start of the scalar before the tab, and the
    /// next line's key).
    #[test]
    fn yaml_syntax_errors_point_at_their_cause() {
        // (text, where, the message's words)
        let cases = [
            // a tab that starts line 2: there, not at line 1's scalar
            ("name: t\n\ttarget: x\n", (2, 1), "a tab"),
            // a `{` not closed on line 2, the scanner stopping at line 3
            ("name: t\nflows: { f: { steps: [ { request: GET / } ] }\nload: x\n", (2, 8), "this `{` is never closed"),
            // a `[` not closed
            ("name: t\nslo: [ \"p95 < 1s\"\nload: x\n", (2, 6), "this `[` is never closed"),
            // a bracket in a quoted string or a comment opens nothing: the scanner's own words
            ("name: \"{\" # [\n\tx: 1\n", (2, 1), "a tab"),
            // an error inside a flow mapping on its own line: the scanner's place and words
            ("name: t\nflows: { f: : }\n", (2, 0), "YAML syntax"),
            // an apostrophe or a # inside plain text opens nothing: the closed `{` is not blamed
            (
                "name: t\nflows: { f: { steps: [ { name: user's orders#1, request: GET / } ] } }\n load: x\n",
                (3, 0),
                "YAML syntax",
            ),
        ];
        for (text, (line, column), words) in cases {
            let e = parse("s.yaml", text, &[]).expect_err(text);
            let d = &e.0[0];
            assert!(d.message.contains(words), "{text:?}: {d:?}");
            assert_eq!(d.line, line, "{text:?}: {d:?}");
            if column > 0 {
                assert_eq!(d.column, column, "{text:?}: {d:?}");
            }
        }
    }

    /// `outputs:` keeps each name, its argument and where it is written (the
    /// binary's registry reports an unknown name there); a wrong shape is an
    /// error of the file.
    #[test]
    fn outputs_are_kept_with_their_place() {
        let head = "name: o\ntarget: demo:async\nflows: { f: { steps: [ { request: GET / } ] } }\n\
                    load: { stages: [ { rate: 10, hold: 1s } ] }\n";
        let s = parse("o.yaml", &format!("{head}outputs: [ jsonl=out.jsonl, prometheus ]\n"), &[]).expect("valid");
        let got: Vec<(String, Option<String>, usize, usize, String)> = s
            .outputs
            .iter()
            .map(|o| (o.name.clone(), o.arg.clone(), o.at.line, o.at.column, o.at.path.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("jsonl".into(), Some("out.jsonl".into()), 5, 12, "outputs[0]".into()),
                ("prometheus".into(), None, 5, 29, "outputs[1]".into()),
            ]
        );
        // No `outputs:`: none.
        assert!(parse("o.yaml", head, &[]).expect("valid").outputs.is_empty());
        let cases = [
            // Not a list.
            ("outputs: jsonl=-\n", "o.yaml:5:10", "expected a list of outputs"),
            // A mapping where a name is wanted.
            ("outputs: [ { jsonl: x } ]\n", "o.yaml:5:12", "expected an output such as `jsonl=results.jsonl`"),
            // Not a name.
            ("outputs: [ \"=x\" ]\n", "o.yaml:5:12", "names no output"),
        ];
        for (tail, at, message) in cases {
            let e = parse("o.yaml", &format!("{head}{tail}"), &[]).expect_err(tail);
            let d = &e.0[0];
            assert_eq!(format!("{}:{}:{}", d.file, d.line, d.column), at, "{tail}: {e:?}");
            assert!(d.message.contains(message), "{tail}: {}", d.message);
        }
    }

    /// `--set` takes a scalar, or a flow list or mapping written as in the file.
    #[test]
    fn overrides_take_scalars_lists_and_mappings() {
        let file = "name: o\ntarget: demo:async\nflows: { f: { steps: [ { request: GET / } ] } }\n\
                    load: { stages: [ { rate: 10, hold: 1s } ] }\n";
        let set = |pairs: &[&str]| {
            let o: Vec<Override> = pairs.iter().map(|p| p.parse().expect("path=value")).collect();
            parse("o.yaml", file, &o)
        };
        // A scalar replaces a scalar inside a list item.
        let s = set(&["load.stages[0].rate=20"]).expect("valid");
        assert_eq!(s.load.stages()[0].segment.to.as_f64(), 20.0);
        // A flow list replaces a whole list (and says the SLO lines, which the file has none of).
        let s = set(&["slo=[p95 < 1s, errors < 2%]", "load.stages=[{rate: 5, hold: 2s}, {rate: 7, hold: 1s}]"])
            .expect("valid");
        assert_eq!(s.slo.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(), ["p95 < 1s", "errors < 2%"]);
        let stages: Vec<(f64, u64)> =
            s.load.stages().iter().map(|st| (st.segment.to.as_f64(), st.segment.duration.as_secs())).collect();
        assert_eq!(stages, [(5.0, 2), (7.0, 1)]);
        // A flow mapping replaces a mapping.
        let s = set(&["defaults={timeout: 3s}"]).expect("valid");
        assert_eq!(s.defaults.timeout, std::time::Duration::from_secs(3));
        // What is not YAML is an error at `--set`, with a hint; so is a bad value inside it.
        // `soon` is at column 18 of the value.
        for (bad, column) in [("slo=[p95 < 1s", 1), ("load.stages=[{rate: 5, hold: soon}]", 18)] {
            let e = set(&[bad]).expect_err(bad);
            assert!(e.0.iter().all(|d| d.file == "--set" && d.column == column), "{bad}: {e:?}");
        }
        // A field --set adds that the scenario has no place for is its error, not the file's
        // (it was `o.yaml:0:0`).
        let e = set(&["nosuch=1"]).expect_err("unknown field");
        assert_eq!(
            (e.0[0].file.as_str(), e.0[0].line, e.0[0].message.as_str()),
            ("--set", 1, "unknown field `nosuch`")
        );
        // `steps` replaces `stages` (and the other way): two ways to write one profile, and
        // "give `stages` or `steps`, not both" refused the guide's own example.
        let s = set(&["load.steps={from: 10, to: 30, by: 10, hold: 1s}"]).expect("steps replace stages");
        assert_eq!(s.load.stages().len(), 3);
        let stepped =
            file.replace("stages: [ { rate: 10, hold: 1s } ]", "steps: { from: 10, to: 20, by: 10, hold: 1s }");
        let o: Vec<Override> = vec!["load.stages=[{rate: 5, hold: 2s}]".parse().unwrap()];
        let s = parse("o.yaml", &stepped, &o).expect("stages replace steps");
        assert_eq!(s.load.stages().len(), 1);
    }
}
