//! The scenario an import writes: a typed draft ([`Draft`]) and its one
//! renderer ([`Draft::render`]), YAML with `#` comments saying what was found.
//!
//! This module owns the syntax of what an import writes; the importers
//! (`access_log`, `har`) own what goes into it and never write YAML
//! themselves. It does not validate: perfops-core's decoder does, and a test
//! here feeds every rendered draft to it.
//!
//! Quoting is never left to chance: every string scalar (names, request
//! lines, header values, JSON strings, durations) is written as a JSON
//! string, which YAML reads as a double-quoted scalar with the same escapes.
//! A value taken from traffic may hold `"`, `#`, `: `, a leading `-` or `*`,
//! unicode or control characters, and each of those breaks a plain YAML
//! scalar in its own way; a JSON string breaks on none of them. The escaper
//! is our own, not serde_json's: serde_json leaves DEL, the C1 controls and
//! U+2028/U+2029 raw, which perfops' reader takes as they are but a YAML 1.1
//! reader (PyYAML, many editors) folds as line breaks inside a quoted
//! scalar; escaped, the file means the same to every reader.
//!
//! What is sent is a template: a value seen in traffic is literal text
//! ([`Text::lit`], which writes a `${` in it as `$${` so that it stays text),
//! a reference is made on purpose ([`Text::var`]). A comment is one line of
//! text per `#`: line breaks in it start a new `#` line, so a value quoted in
//! a comment cannot end it.

use std::fmt::Write as _;
use std::time::Duration;

/// A scenario as an import found it, before it is YAML.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Draft {
    /// Comment lines at the top of the file: what was read and how.
    pub comments: Vec<String>,
    /// `name:`.
    pub name: String,
    /// `target:` (a base URL, or a `${env.NAME}` template).
    pub target: Text,
    /// `scripts:`: the JavaScript file the steps' hooks are in, beside the scenario.
    pub scripts: Option<String>,
    /// `defaults.timeout`.
    pub timeout: Option<Duration>,
    /// `defaults.headers`, sent with every request.
    pub headers: Vec<(String, Text)>,
    /// `setup:` steps, run once before the load.
    pub setup: Vec<Step>,
    /// `flows:`, in the order written.
    pub flows: Vec<Flow>,
    /// `data:`: CSV feeders the steps use.
    pub data: Vec<Feeder>,
    /// `load:` (open model).
    pub load: Option<Load>,
    /// `slo:` lines, e.g. `p95 < 500ms`.
    pub slo: Vec<String>,
}

/// One flow: picked per arrival by its weight.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flow {
    /// Its key under `flows:`.
    pub name: String,
    /// Comment lines above it.
    pub comments: Vec<String>,
    /// `weight:` (at least 1).
    pub weight: u64,
    /// Its steps, in order.
    pub steps: Vec<Step>,
}

/// One HTTP step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// Comment lines above it.
    pub comments: Vec<String>,
    /// `name:` (the row it is measured on); `None`: the request line.
    pub name: Option<String>,
    /// The method, e.g. `GET`.
    pub method: String,
    /// The path and query, from `/`; literal parts are percent-encoded where
    /// a request line could not carry them (see [`Text::path`]).
    pub path: Text,
    /// `headers:`.
    pub headers: Vec<(String, Text)>,
    /// `json:`, `body:` or `form:`.
    pub body: Option<Body>,
    /// `save:`: variable -> extractor (`$.token`, `header:ETag`, `regex:...`).
    pub save: Vec<(String, String)>,
    /// `expect.status`.
    pub expect_status: Vec<u16>,
    /// `pause:` after the step (think time).
    pub pause: Option<Duration>,
    /// `before:`: the request hook (a function of the draft's `scripts:`).
    pub before: Option<String>,
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// `json:`: string values in it are templates (see [`Text`]); build them
    /// with [`Text::lit`] and [`Text::var`] and store their [`Text::as_template`].
    Json(serde_json::Value),
    /// `body:` sent as it is.
    Raw(Text),
    /// `form:` fields, URL-encoded when sent.
    Form(Vec<(String, Text)>),
}

/// A CSV feeder: `data: { NAME: { csv: FILE, mode: MODE } }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Feeder {
    /// Its name (`${NAME.column}`): letters, digits and `_`.
    pub name: String,
    /// Comment lines above it.
    pub comments: Vec<String>,
    /// The CSV file, relative to the scenario.
    pub csv: String,
    /// `cycle`, `random` or `once`.
    pub mode: FeedMode,
}

/// How a feeder hands out its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedMode {
    /// Each row in turn, again and again.
    Cycle,
    /// A random row per arrival.
    Random,
    /// Each row once.
    Once,
}

/// `load:`, open model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Load {
    /// Comment lines above it.
    pub comments: Vec<String>,
    /// `stages:`.
    pub stages: Vec<Stage>,
    /// `max_in_flight:`.
    pub max_in_flight: Option<u64>,
    /// `model: replay` with this `file:` (the stages are then unused).
    pub replay: Option<String>,
}

/// One open-model stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// `name:` of the stage.
    pub name: Option<String>,
    /// A comment above it.
    pub comment: Option<String>,
    /// What it does.
    pub kind: StageKind,
}

/// A stage's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StageKind {
    /// `{ rate: R, hold: D }`: arrivals per second, held.
    Hold {
        /// Arrivals per second (> 0).
        rate: f64,
        /// For how long.
        hold: Duration,
    },
    /// `{ ramp_to: R, over: D }`: from the previous rate to R.
    Ramp {
        /// The rate at its end (> 0).
        to: f64,
        /// Its length.
        over: Duration,
    },
}

/// Template text: what a request sends, with `${...}` references made on
/// purpose and everything else literal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(String);

impl Text {
    /// Literal text, sent as it is: a `${` in it is written `$${`.
    pub fn lit(s: &str) -> Text {
        Text(s.replace("${", "$${"))
    }

    /// A template as a person wrote it (a flag's value): its `${...}` are references.
    pub fn template(s: &str) -> Text {
        Text(s.to_string())
    }

    /// A reference: `${name}` (`token`, `env.API_KEY`, `ids.id`).
    pub fn var(name: &str) -> Text {
        Text(format!("${{{name}}}"))
    }

    /// A literal part of a request path: percent-encoded where a request
    /// line cannot carry it as it is (space, control characters, non-ASCII,
    /// `%` that does not start an escape), then as [`Text::lit`].
    pub fn path(s: &str) -> Text {
        Text::lit(&encode_path(s))
    }

    /// This text followed by `other`.
    pub fn then(mut self, other: Text) -> Text {
        self.0.push_str(&other.0);
        self
    }

    /// The template as perfops reads it.
    pub fn as_template(&self) -> &str {
        &self.0
    }
}

/// Percent-encode what a request line cannot hold as it is.
fn encode_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in b.iter().enumerate() {
        let escape_start = c == b'%' && b.len() > i + 2 && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
        if c.is_ascii_graphic() && (c != b'%' || escape_start) {
            out.push(char::from(c));
        } else {
            let _ = write!(out, "%{c:02X}");
        }
    }
    out
}

/// `s` as a JSON string, which YAML reads back as the same string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // C0, DEL, C1, the line and paragraph separators, the BOM: escaped,
            // so that no reader takes them for a line break or drops them.
            c if (c as u32) < 0x20
                || (0x7f..=0x9f).contains(&(c as u32))
                || c == '\u{2028}'
                || c == '\u{2029}'
                || c == '\u{feff}' =>
            {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            // Non-characters: YAML's printable set leaves them out.
            c if (0xfdd0..=0xfdef).contains(&(c as u32)) || (c as u32) & 0xfffe == 0xfffe => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A duration as perfops reads one, to the millisecond: `250ms`, `2s`, `2500ms`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        format!("{}us", d.as_micros().max(1))
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A rate with at most three decimals, never 0.
fn rate(r: f64) -> String {
    let r = if r.is_finite() { r.max(0.001) } else { 0.001 };
    let s = format!("{r:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// One or more `# ` lines at `indent`: each line of `text` its own comment,
/// with what could end a comment or a line made a space.
fn comment(out: &mut String, indent: usize, text: &str) {
    for line in text.split('\n') {
        let clean: String = line
            .chars()
            .map(|c| if c.is_control() || c == '\u{2028}' || c == '\u{2029}' || c == '\u{feff}' { ' ' } else { c })
            .collect();
        let clean = clean.trim_end();
        let _ = writeln!(out, "{:indent$}#{}{}", "", if clean.is_empty() { "" } else { " " }, clean);
    }
}

fn comments(out: &mut String, indent: usize, lines: &[String]) {
    for l in lines {
        comment(out, indent, l);
    }
}

/// `{ "k": "v", ... }` on one line.
fn map_inline(pairs: &[(String, Text)]) -> String {
    let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("{}: {}", quote(k), quote(v.as_template()))).collect();
    format!("{{ {} }}", fields.join(", "))
}

/// Header fields as perfops can send them: a name is an HTTP token (other
/// characters become `-`), and CR, LF and NUL in a value, which would end or
/// cut the request's head, become spaces (no `${` is made or broken by that).
fn header_fields(pairs: &[(String, Text)]) -> String {
    let clean: Vec<(String, Text)> = pairs
        .iter()
        .map(|(k, v)| {
            let name: String = k
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c) { c } else { '-' })
                .collect();
            let name = if name.is_empty() { "-".to_string() } else { name };
            (name, Text(v.0.replace(['\r', '\n', '\0'], " ")))
        })
        .collect();
    map_inline(&clean)
}

/// A JSON value as a YAML flow node, strings quoted by [`quote`].
fn json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(a) => format!("[{}]", a.iter().map(json).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => {
            let fields: Vec<String> = o.iter().map(|(k, v)| format!("{}: {}", quote(k), json(v))).collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

impl Draft {
    /// The scenario file.
    pub fn render(&self) -> String {
        let mut out = String::new();
        comments(&mut out, 0, &self.comments);
        let _ = writeln!(out, "name: {}", quote(&self.name));
        let _ = writeln!(out, "target: {}", quote(self.target.as_template()));
        if let Some(file) = &self.scripts {
            let _ = writeln!(out, "scripts: {}", quote(file));
        }
        if self.timeout.is_some() || !self.headers.is_empty() {
            out.push_str("defaults:\n");
            if let Some(t) = self.timeout {
                let _ = writeln!(out, "  timeout: {}", quote(&duration(t)));
            }
            if !self.headers.is_empty() {
                let _ = writeln!(out, "  headers: {}", header_fields(&self.headers));
            }
        }
        if !self.data.is_empty() {
            out.push_str("data:\n");
            for f in &self.data {
                comments(&mut out, 2, &f.comments);
                let mode = match f.mode {
                    FeedMode::Cycle => "cycle",
                    FeedMode::Random => "random",
                    FeedMode::Once => "once",
                };
                let _ = writeln!(out, "  {}: {{ csv: {}, mode: {mode} }}", quote(&f.name), quote(&f.csv));
            }
        }
        if !self.setup.is_empty() {
            out.push_str("setup:\n");
            for s in &self.setup {
                step(&mut out, 2, s);
            }
        }
        out.push_str("flows:\n");
        for f in &self.flows {
            comments(&mut out, 2, &f.comments);
            let _ = writeln!(out, "  {}:", quote(&f.name));
            let _ = writeln!(out, "    weight: {}", f.weight.max(1));
            out.push_str("    steps:\n");
            for s in &f.steps {
                step(&mut out, 6, s);
            }
        }
        if let Some(load) = &self.load {
            comments(&mut out, 0, &load.comments);
            if let Some(file) = &load.replay {
                let _ = writeln!(out, "load:\n  model: replay\n  file: {}\n  speed: 1", quote(file));
            } else {
                out.push_str("load:\n  model: open\n  stages:\n");
            }
            for s in load.stages.iter().filter(|_| load.replay.is_none()) {
                let name = s.name.as_ref().map_or(String::new(), |n| format!("name: {}, ", quote(n)));
                let body = match s.kind {
                    StageKind::Hold { rate: r, hold } => format!("rate: {}, hold: {}", rate(r), quote(&duration(hold))),
                    StageKind::Ramp { to, over } => format!("ramp_to: {}, over: {}", rate(to), quote(&duration(over))),
                };
                if let Some(c) = &s.comment {
                    comment(&mut out, 4, c);
                }
                let _ = writeln!(out, "    - {{ {name}{body} }}");
            }
            if let Some(m) = load.max_in_flight {
                let _ = writeln!(out, "  max_in_flight: {m}");
            }
        }
        if !self.slo.is_empty() {
            out.push_str("slo:\n");
            for l in &self.slo {
                let _ = writeln!(out, "  - {}", quote(l));
            }
        }
        out
    }
}

/// One step as a block sequence item at `indent`.
fn step(out: &mut String, indent: usize, s: &Step) {
    comments(out, indent, &s.comments);
    let pad = " ".repeat(indent + 2);
    let _ = writeln!(out, "{:indent$}- request: {}", "", quote(&format!("{} {}", s.method, s.path.as_template())));
    if let Some(n) = &s.name {
        let _ = writeln!(out, "{pad}name: {}", quote(n));
    }
    if !s.headers.is_empty() {
        let _ = writeln!(out, "{pad}headers: {}", header_fields(&s.headers));
    }
    match &s.body {
        Some(Body::Json(v)) => {
            let _ = writeln!(out, "{pad}json: {}", json(v));
        }
        Some(Body::Raw(t)) => {
            let _ = writeln!(out, "{pad}body: {}", quote(t.as_template()));
        }
        Some(Body::Form(f)) => {
            let _ = writeln!(out, "{pad}form: {}", map_inline(f));
        }
        None => {}
    }
    if !s.save.is_empty() {
        let fields: Vec<String> = s.save.iter().map(|(k, v)| format!("{}: {}", quote(k), quote(v))).collect();
        let _ = writeln!(out, "{pad}save: {{ {} }}", fields.join(", "));
    }
    if !s.expect_status.is_empty() {
        let codes: Vec<String> = s.expect_status.iter().map(u16::to_string).collect();
        let _ = writeln!(out, "{pad}expect: {{ status: [{}] }}", codes.join(", "));
    }
    if let Some(p) = s.pause {
        let _ = writeln!(out, "{pad}pause: {}", quote(&duration(p)));
    }
    if let Some(f) = &s.before {
        let _ = writeln!(out, "{pad}before: {}", quote(f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfops_core::scenario::parse;
    use proptest::prelude::*;

    /// A draft with one of everything, `awkward` in every place a string goes.
    fn full(awkward: &str) -> Draft {
        let name = awkward.to_string();
        Draft {
            comments: vec![format!("read: {awkward}"), "second line\nthird".into()],
            name: name.clone(),
            target: Text::lit("http://127.0.0.1:8080"),
            scripts: Some("hooks.js".into()),
            timeout: Some(Duration::from_millis(2500)),
            headers: vec![("Accept".into(), Text::lit("application/json")), ("X-Note".into(), Text::lit(awkward))],
            setup: vec![Step {
                comments: vec![format!("login: {awkward}")],
                name: Some(format!("login {awkward}")),
                method: "POST".into(),
                path: Text::path("/auth"),
                body: Some(Body::Json(
                    serde_json::json!({ "user": Text::lit(awkward).as_template(), "n": 3, "ok": true, "list": [1, "a", null] }),
                )),
                save: vec![("token".into(), "$.token".into())],
                expect_status: vec![200],
                ..Step::default()
            }],
            flows: vec![
                Flow {
                    name: format!("flow {awkward}"),
                    comments: vec![awkward.into()],
                    weight: 1000,
                    steps: vec![Step {
                        method: "GET".into(),
                        path: Text::path(&format!("/orders/{awkward}/")).then(Text::var("ids.id")),
                        headers: vec![("Authorization".into(), Text::lit("Bearer ").then(Text::var("token")))],
                        pause: Some(Duration::from_millis(120)),
                        before: Some("sign".into()),
                        ..Step::default()
                    }],
                },
                Flow {
                    name: "form".into(),
                    weight: 1,
                    steps: vec![Step {
                        method: "POST".into(),
                        path: Text::path("/f"),
                        body: Some(Body::Form(vec![("q".into(), Text::lit(awkward))])),
                        ..Step::default()
                    }],
                    ..Flow::default()
                },
                Flow {
                    name: "raw".into(),
                    weight: 2,
                    steps: vec![Step {
                        method: "PUT".into(),
                        path: Text::path("/r"),
                        body: Some(Body::Raw(Text::lit(awkward))),
                        ..Step::default()
                    }],
                    ..Flow::default()
                },
            ],
            data: vec![Feeder {
                name: "ids".into(),
                comments: vec![awkward.into()],
                csv: "ids.csv".into(),
                mode: FeedMode::Cycle,
            }],
            load: Some(Load {
                comments: vec![awkward.into()],
                stages: vec![
                    Stage {
                        name: Some(format!("mean {awkward}")),
                        comment: Some(awkward.into()),
                        kind: StageKind::Hold { rate: 12.345_678, hold: Duration::from_secs(60) },
                    },
                    Stage {
                        name: None,
                        comment: None,
                        kind: StageKind::Ramp { to: 300.0, over: Duration::from_secs(30) },
                    },
                ],
                max_in_flight: Some(1000),
                replay: None,
            }),
            slo: vec!["p95 < 500ms".into(), "errors < 1%".into()],
        }
    }

    /// Strings that break plain YAML scalars, each in its own way.
    const AWKWARD: &[&str] = &[
        // a double quote and a backslash: the two JSON escapes
        r#"say "hi" \ bye"#,
        // a comment start and a mapping separator
        "a # not a comment: b",
        // YAML indicators at the start
        "- * & ! | > ' % @ `",
        // unicode, an emoji (outside the BMP), a right-to-left mark
        "zürich 東京 🚀 \u{200f}",
        // line breaks of YAML 1.1 and JSON's control characters
        "line\u{2028}sep\u{85}nel\u{7f}del\ttab",
        // a template-looking value seen in traffic: must stay text
        "price ${amount} and $${x}",
        // YAML's booleans and nulls
        "yes",
        // empty
        "",
    ];

    /// Every awkward string, in every place, renders a file the decoder accepts,
    /// and literal text comes back as it was.
    #[test]
    fn awkward_strings_render_valid_scenarios() {
        for a in AWKWARD {
            let yaml = full(a).render();
            let s = parse("draft.yaml", &yaml, &[]).unwrap_or_else(|e| panic!("{a:?}:\n{yaml}\n{e}"));
            assert_eq!(s.name, *a, "{yaml}");
        }
    }

    /// A literal `${...}` stays text and a reference made on purpose stays a
    /// reference: the first needs no variable, the second is an error of the
    /// decoder when nothing saves it (which proves it is read as a reference).
    #[test]
    fn literal_and_reference_templates() {
        let mut d = full("x");
        // Without scripts: a script may save any name, so a scenario with them reads any reference.
        d.scripts = None;
        d.flows[0].steps[0].before = None;
        d.flows[0].steps[0].path = Text::path("/p/${nothing}");
        d.flows[0].steps[0].headers.clear();
        parse("d.yaml", &d.render(), &[]).expect("a literal ${ is text");
        d.flows[0].steps[0].path = Text::path("/p/").then(Text::var("nothing"));
        let err = parse("d.yaml", &d.render(), &[]).expect_err("an unknown reference");
        assert!(err.to_string().contains("nothing"), "{err}");
    }

    /// Table: paths that a request line cannot carry as they are.
    #[test]
    fn paths_are_encoded() {
        let cases = [
            // nothing to do
            ("/orders/1?x=2", "/orders/1?x=2"),
            // a space and a tab
            ("/a b\tc", "/a%20b%09c"),
            // a valid escape is kept, a lone % is escaped
            ("/a%2Fb%zz%", "/a%2Fb%25zz%25"),
            // non-ASCII as its UTF-8 bytes
            ("/é", "/%C3%A9"),
            // a literal ${ stays text
            ("/${x}", "/$${x}"),
        ];
        for (input, want) in cases {
            assert_eq!(Text::path(input).as_template(), want, "{input}");
        }
    }

    /// Table: durations as perfops reads them.
    #[test]
    fn durations() {
        let cases = [
            // whole seconds
            (Duration::from_secs(60), "60s"),
            // not whole seconds: milliseconds, exact (rounded down to one)
            (Duration::from_millis(2500), "2500ms"),
            // long and not whole: still exact
            (Duration::from_millis(12_340), "12340ms"),
            // under a millisecond
            (Duration::from_micros(250), "250us"),
            // zero
            (Duration::ZERO, "0s"),
        ];
        for (d, want) in cases {
            assert_eq!(duration(d), want);
            assert_eq!(perfops_core::units::parse_duration(want).map(|p| p.as_millis()), Ok(d.as_millis()));
        }
    }

    proptest! {
        /// Any string at all, as a name, a header value, a comment and a
        /// literal path: the file parses and the name comes back unchanged.
        #[test]
        fn any_string_renders_valid(s in any::<String>()) {
            let yaml = full(&s).render();
            let parsed = parse("draft.yaml", &yaml, &[]);
            prop_assert!(parsed.is_ok(), "{:?}\n{}", s, yaml);
            prop_assert_eq!(parsed.map(|p| p.name).unwrap_or_default(), s);
        }
    }
}
