//! `perfops import har FILE`: a browser recording (HAR 1.2) becomes a
//! scenario that replays one visit per arrival, with the values that pass
//! from a response to a later request saved and referenced.
//!
//! This module owns the shape of that scenario and what its comments say;
//! its parts own the rest: `read.rs` the file (bounded, errors with line and
//! column), `select.rs` which requests and header fields are kept,
//! `correlate.rs` what flows between requests and the credentials made
//! `${env.NAME}`. The YAML is the draft's ([`crate::draft`]).
//!
//! Choices, and why:
//! - **One flow**, the recorded requests as its steps in the order they
//!   started, pages marked by comments. A value saved on one page is used on
//!   the next (a token from the login page, an id from a listing), and a
//!   `save` lives within one arrival's flow: one flow per page would cut
//!   those threads.
//! - **The login stays in the flow, where it was recorded** (its first step
//!   after the page itself), not in `setup:`: a recording is one visit, and an
//!   arrival replays a visit, login included, as each new user would. The
//!   access-log import is the one that measures how many requests share one
//!   login; a scenario that wants one token for all can move the step to
//!   `setup:` by hand (its `save` works the same there).
//! - **Think time** is the gap between a kept step's response end and the next
//!   kept step's start, written as `pause:` when it is at least
//!   [`MIN_PAUSE`]: shorter gaps are the page's own script chaining requests
//!   (a `fetch` after a `fetch`), not a person.
//! - **Status**: each step expects the status it got (a recorded 404 is
//!   expected, so it is not an unexpected 4xx), but a 304, which the browser's
//!   cache validators caused and the scenario does not send, expects 200.

pub mod correlate;
pub mod hooks;
pub mod read;
pub mod replay;
pub mod select;

use std::path::Path;
use std::time::Duration;

use correlate::{Body, Piece, Request, Response, Tpl};
use read::{Entry, Har, HarError};
use select::{Left, Selection};

use crate::draft::{self, Draft, Flow, Step, Text};
use crate::{DataFile, ImportError, Imported};

/// Gaps shorter than this are the page's script, not think time.
pub const MIN_PAUSE: Duration = Duration::from_millis(100);

/// How many left-out requests a comment names before it only counts.
const NAMED: usize = 5;

/// How many saves (and environment variables) the summary names before it only counts.
const SUMMARY_LINES: usize = 20;

/// What `perfops import har` is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarOptions {
    /// The scenario's `name:` (default: the file's stem).
    pub name: Option<String>,
    /// Keep static assets (images, scripts, styles, fonts), left out by default.
    pub include_static: bool,
    /// Hosts kept besides the recording's main one (third-party hosts are left out by default).
    pub include_hosts: Vec<String>,
    /// The main host (`host` or `host:port`); default: the host of the first page.
    pub host: Option<String>,
    /// Keep the recorded `User-Agent` header (dropped by default).
    pub keep_user_agent: bool,
}

/// Read the recording at `path` into a scenario.
pub fn import(path: &Path, options: &HarOptions) -> Result<Imported, ImportError> {
    let har = read::read_file(path).map_err(|e| match e {
        HarError::Io { source, .. } => ImportError::Read { path: path.to_path_buf(), source },
        other => ImportError::Input(other.to_string()),
    })?;
    let stem = path.file_name().and_then(|n| n.to_str()).map_or("recording", |n| n.split('.').next().unwrap_or(n));
    from_har(&har, &path.display().to_string(), stem, options)
}

/// The scenario of a HAR already read; `file` names it in comments, `stem` is the default name.
pub fn from_har(har: &Har, file: &str, stem: &str, options: &HarOptions) -> Result<Imported, ImportError> {
    visit(har, file, stem, options).map(|(imported, _)| imported)
}

/// [`from_har`]'s scenario, and the recorded entry of each of its flow's
/// steps (`--replay` places them at their start and carries their cookies).
fn visit<'h>(
    har: &'h Har,
    file: &str,
    stem: &str,
    options: &HarOptions,
) -> Result<(Imported, Vec<&'h Entry>), ImportError> {
    let sel = Selection {
        host: options.host.clone(),
        include_static: options.include_static,
        include_hosts: options.include_hosts.clone(),
        keep_user_agent: options.keep_user_agent,
    };
    let Some((main, scheme)) = select::main_host(&har.entries, sel.host.as_deref()) else {
        return Err(ImportError::Input(format!("{file}: no request to import ({})", skipped_text(har))));
    };
    // Kept entries, and what was left out before each (for its comment).
    let mut kept: Vec<&Entry> = Vec::new();
    let mut left_before: Vec<Vec<(Left, &Entry)>> = vec![Vec::new()];
    let (mut statics, mut others): (Vec<&Entry>, Vec<&Entry>) = (Vec::new(), Vec::new());
    for e in &har.entries {
        match select::keep(e, &main, &sel) {
            Ok(()) => {
                kept.push(e);
                left_before.push(Vec::new());
            }
            Err(why) => {
                if let Some(l) = left_before.last_mut() {
                    l.push((why, e));
                }
                match why {
                    Left::Static => statics.push(e),
                    Left::OtherHost => others.push(e),
                }
            }
        }
    }
    if kept.is_empty() {
        return Err(ImportError::Input(format!(
            "{file}: nothing left to import on {main}: {} static asset(s) (--include-static keeps them), {} request(s) \
             to other hosts (--include-host HOST, or --host HOST to choose the main one)",
            statics.len(),
            others.len()
        )));
    }

    let mut requests: Vec<Request> = kept.iter().map(|e| request_of(e, &sel)).collect();
    let correlated = |requests: &[Request]| {
        let exchanges: Vec<(Request, Response<'_>)> = requests
            .iter()
            .cloned()
            .zip(kept.iter().map(|e| Response {
                headers: &e.response_headers,
                mime: &e.mime,
                text: e.response_text.as_deref(),
            }))
            .collect();
        correlate::correlate(&exchanges)
    };
    let mut found = correlated(&requests);
    // Fields the page computed per request are the request hook's to set: left out of the
    // steps, and correlated again without them (a signature is no credential to read from
    // the environment, and a stale copy of one is no use).
    let computed = hooks::computed(&requests, &found.requests);
    if !computed.is_empty() {
        for r in &mut requests {
            r.headers.retain(|(n, _)| !computed.iter().any(|c| c.name.eq_ignore_ascii_case(n)));
        }
        found = correlated(&requests);
    }
    let script = (!computed.is_empty()).then(|| format!("{}-hooks.js", file_stem(stem)));

    let mut names = correlate::Names::new("-");
    let mut steps = Vec::with_capacity(kept.len());
    let mut page = None;
    for (i, (e, r)) in kept.iter().zip(&found.requests).enumerate() {
        let mut comments = Vec::new();
        if e.page != page {
            if let Some(p) = &e.page {
                let title = har.pages.iter().find(|(id, _)| id == p).map_or("", |(_, t)| t.as_str());
                comments.push(if title.is_empty() { format!("page {p}") } else { format!("page {p}: {title}") });
            }
            page = e.page.clone();
        }
        let left = &left_before[i];
        if !left.is_empty() {
            comments.push(left_out_text(left));
        }
        let took = if e.started_ms.is_some() { format!(" in {:.0} ms", e.time_ms) } else { String::new() };
        comments.push(match e.status {
            Some(s) => {
                format!("entry {}: {s} {}{took}", e.index, if e.mime.is_empty() { "(no type)" } else { &e.mime })
            }
            None => format!("entry {}: no response recorded", e.index),
        });
        for s in &found.saves[i] {
            comments.push(format!(
                "saves `{}` ({}): the value it answered is sent again by step{} {}",
                s.name,
                s.extractor,
                if s.used_by.len() == 1 { "" } else { "s" },
                correlate::list(&s.used_by)
            ));
        }
        comments.extend(found.notes[i].iter().cloned());
        let hooked: Vec<&str> = computed.iter().filter(|c| c.steps.contains(&i)).map(|c| c.name.as_str()).collect();
        if let (false, Some(file)) = (hooked.is_empty(), &script) {
            comments.push(format!(
                "{}: computed by the page per request (a new value each time, carried by no earlier answer): \
                 set by the request hook `{}` in {file}",
                hooked.join(", "),
                hooks::FUNCTION
            ));
        }
        let expect_status = match e.status {
            Some(304) => {
                comments.push(
                    "recorded 304 from the browser's cache; without its validators the full answer is 200".into(),
                );
                vec![200]
            }
            Some(s) => vec![s],
            None => Vec::new(),
        };
        let pause = kept.get(i + 1).and_then(|next| {
            let gap = next.started_ms? - e.ended_ms()?;
            let gap = Duration::from_millis((gap / 10.0).round().max(0.0) as u64 * 10);
            (gap >= MIN_PAUSE).then_some(gap)
        });
        steps.push(Step {
            comments,
            name: Some(step_name(&e.method, &r.target, &mut names)),
            method: e.method.clone(),
            path: path_text(&r.target),
            headers: r.headers.iter().map(|(n, t)| (n.clone(), text(t))).collect(),
            body: match &r.body {
                Body::None => None,
                Body::Json(v) => Some(draft::Body::Json(v.clone())),
                Body::Form(fields) => {
                    Some(draft::Body::Form(fields.iter().map(|(k, t)| (k.clone(), text(t))).collect()))
                }
                Body::Text(t) => Some(draft::Body::Raw(text(t))),
            },
            save: found.saves[i].iter().map(|s| (s.name.clone(), s.extractor.clone())).collect(),
            expect_status,
            pause,
            before: (!hooked.is_empty()).then(|| hooks::FUNCTION.to_string()),
        });
    }

    let target = format!("{scheme}://{main}");
    let saves: usize = found.saves.iter().map(Vec::len).sum();
    let mut comments = vec![
        format!(
            "Imported from {file}{} by `perfops import har`: {} request(s) recorded, {} kept as steps.",
            har.creator.as_ref().map_or(String::new(), |c| format!(" (written by {c})")),
            har.entries.len() + har.skipped,
            kept.len()
        ),
        format!("The main host is {main} (`--host` chooses another); every step is sent to `target:`."),
        "One flow: the visit as recorded, steps in the order they started; one arrival replays it, login included."
            .to_string(),
    ];
    let mut summary =
        vec![format!("{} step(s) from {} recorded request(s) on {target}", kept.len(), har.entries.len())];
    if !statics.is_empty() {
        let line =
            format!("left out: {} static asset(s) ({}); --include-static keeps them", statics.len(), sample(&statics));
        comments.push(line.clone());
        summary.push(line);
    }
    if !others.is_empty() {
        let line = format!(
            "left out: {} request(s) to other hosts ({}); --include-host HOST keeps them",
            others.len(),
            hosts(&others)
        );
        comments.push(line.clone());
        summary.push(line);
    }
    if har.skipped > 0 {
        let line = format!("skipped: {}", skipped_text(har));
        comments.push(line.clone());
        summary.push(line);
    }
    comments.push(format!(
        "Correlation: {saves} value(s) saved from a response and sent again later (see each step's comments). \
         Cookies go as a browser's: each arrival keeps what its answers set and sends it back \
         (defaults.cookies), so the recorded Cookie fields it carries are not written."
    ));
    summary.push(format!("correlation: {saves} value(s) saved and reused"));
    let listed = found.saves.iter().enumerate().flat_map(|(i, saves)| saves.iter().map(move |s| (i, s)));
    for (i, s) in listed.take(SUMMARY_LINES) {
        summary.push(format!(
            "  step {} saves {} ({}), used by step(s) {}",
            i + 1,
            s.name,
            s.extractor,
            correlate::list(&s.used_by)
        ));
    }
    if saves > SUMMARY_LINES {
        summary.push(format!("  ... {} more, each in its step's comments", saves - SUMMARY_LINES));
    }
    let mut files = Vec::new();
    if let Some(name) = &script {
        let line = format!(
            "computed per request by the page: {} (step(s) {}); the request hook `{}` in {name} sets them: \
             make it compute what the page did",
            computed.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            correlate::list(&hook_steps(&computed)),
            hooks::FUNCTION
        );
        comments.push(line.clone());
        summary.push(line);
        files.push(DataFile { name: name.clone(), text: hooks::script(file, &computed) });
    }
    if !found.env.is_empty() {
        comments.push(format!(
            "Credentials typed or recorded are read from the environment: set {} before running.",
            found.env.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
        summary.push("set these environment variables before running (credentials from the recording):".into());
        for v in found.env.iter().take(SUMMARY_LINES) {
            summary.push(format!("  {} ({})", v.name, v.found));
        }
        if found.env.len() > SUMMARY_LINES {
            summary.push(format!("  ... {} more, named at the top of the file", found.env.len() - SUMMARY_LINES));
        }
    }
    let draft = Draft {
        comments,
        name: options.name.clone().unwrap_or_else(|| stem.to_string()),
        target: Text::lit(&target),
        scripts: script,
        flows: vec![Flow { name: "visit".into(), comments: Vec::new(), weight: 1, steps }],
        load: Some(draft::Load {
            comments: vec!["One visit per second for a minute: set the rate you expect.".into()],
            stages: vec![draft::Stage {
                name: None,
                comment: None,
                kind: draft::StageKind::Hold { rate: 1.0, hold: Duration::from_secs(60) },
            }],
            max_in_flight: None,
            replay: None,
        }),
        ..Draft::default()
    };
    Ok((Imported { draft, files, summary }, kept))
}

/// A recorded request as the finder reads it: kept header fields, its body parsed by its type.
fn request_of(e: &Entry, sel: &Selection) -> Request {
    let target = match e.url.query() {
        Some(q) => format!("{}?{q}", e.url.path()),
        None => e.url.path().to_string(),
    };
    let body = match &e.post {
        None => Body::None,
        Some(p) if p.text.is_empty() => Body::None,
        Some(p) if p.mime == "application/json" || p.mime.ends_with("+json") => {
            match serde_json::from_str::<serde_json::Value>(&p.text) {
                Ok(v) => Body::Json(v),
                Err(_) => Body::Text(p.text.clone()),
            }
        }
        Some(p) if p.mime == "application/x-www-form-urlencoded" => {
            let fields: Vec<(String, String)> =
                url::form_urlencoded::parse(p.text.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
            // `form:` is a mapping of token names: a field sent twice (`a=1&a=2`) or named
            // otherwise (`field[1]`) is sent as the text it was.
            let repeated = fields.iter().enumerate().any(|(i, (k, _))| fields[..i].iter().any(|(j, _)| j == k));
            let tokens = fields.iter().all(|(k, _)| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            });
            if repeated || !tokens { Body::Text(p.text.clone()) } else { Body::Form(fields) }
        }
        Some(p) => Body::Text(p.text.clone()),
    };
    // `json:` and `form:` send their own Content-Type.
    let typed = matches!(body, Body::Json(_) | Body::Form(_));
    // `headers:` is a mapping: a field sent twice is sent once with both values, as HTTP
    // allows (`, `; `; ` for cookies).
    let mut headers: Vec<(String, String)> = Vec::new();
    for (n, v) in &e.request_headers {
        if !select::keep_header(n, sel) || (typed && n.eq_ignore_ascii_case("content-type")) {
            continue;
        }
        match headers.iter_mut().find(|(m, _)| m.eq_ignore_ascii_case(n)) {
            Some((_, joined)) => {
                joined.push_str(if n.eq_ignore_ascii_case("cookie") { "; " } else { ", " });
                joined.push_str(v);
            }
            None => headers.push((n.clone(), v.clone())),
        }
    }
    Request { method: e.method.clone(), target, headers, body }
}

/// The steps (indexes) that send any of `computed`, in order.
fn hook_steps(computed: &[hooks::Computed]) -> Vec<usize> {
    let mut steps: Vec<usize> = computed.iter().flat_map(|c| c.steps.iter().copied()).collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// A file name's stem made of `A-Za-z0-9_-` only (the script is written beside the scenario).
fn file_stem(stem: &str) -> String {
    let s: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    let s = s.trim_start_matches(['-', '.']);
    if s.is_empty() { "recording".to_string() } else { s.to_string() }
}

/// A template as the draft's text.
fn text(t: &Tpl) -> Text {
    t.iter().fold(Text::default(), |acc, p| {
        acc.then(match p {
            Piece::Lit(s) => Text::lit(s),
            Piece::Var(v) => Text::var(v),
        })
    })
}

/// A path template as the draft's text: its literal parts made fit for a request line.
fn path_text(t: &Tpl) -> Text {
    t.iter().fold(Text::default(), |acc, p| {
        acc.then(match p {
            Piece::Lit(s) => Text::path(s),
            Piece::Var(v) => Text::var(v),
        })
    })
}

/// A step's name: the last path segment of its `target` (as sent, correlated values as
/// `${...}`) that reads as a word (`orders`, `auth`), `home` for `/`. A segment that holds a
/// correlated value names nothing: a recorded token in a path (`/items/RESPTOKEN`) was the
/// step's name, and a name is in every result (attacker review).
fn step_name(method: &str, target: &Tpl, taken: &mut correlate::Names) -> String {
    // The path, each correlated value as a NUL (no path segment holds one).
    let sent: String = target
        .iter()
        .map(|p| match p {
            Piece::Lit(s) => s.as_str(),
            Piece::Var(_) => "\0",
        })
        .collect();
    let path = sent.split(['?', '#']).next().unwrap_or("");
    let segment = path
        .split('/')
        .rev()
        .find(|s| {
            !s.is_empty() && !s.contains('\0') && s.chars().filter(char::is_ascii_alphabetic).count() * 2 > s.len()
        })
        .map(|s| s.split('.').next().unwrap_or(s).to_ascii_lowercase());
    let method = method.to_ascii_lowercase();
    let base = match segment {
        Some(s) if !s.is_empty() && method == "get" => s,
        Some(s) if !s.is_empty() => format!("{method}-{s}"),
        _ if path == "/" && method == "get" => "home".to_string(),
        _ => method,
    };
    taken.unique(base)
}

/// `2 static (GET /app.css, GET /favicon.ico), 1 to other hosts (fonts.example.com)`.
fn left_out_text(left: &[(Left, &Entry)]) -> String {
    let of = |kind: Left| left.iter().filter(|(k, _)| *k == kind).map(|(_, e)| *e).collect::<Vec<_>>();
    let (statics, others) = (of(Left::Static), of(Left::OtherHost));
    let mut parts = Vec::new();
    if !statics.is_empty() {
        parts.push(format!("{} static ({})", statics.len(), sample(&statics)));
    }
    if !others.is_empty() {
        parts.push(format!("{} to other hosts ({})", others.len(), hosts(&others)));
    }
    format!("left out before this step: {}", parts.join(", "))
}

/// The first few entries as `GET /path`, and how many more.
fn sample(entries: &[&Entry]) -> String {
    let mut s: Vec<String> = entries.iter().take(NAMED).map(|e| format!("{} {}", e.method, e.url.path())).collect();
    if entries.len() > NAMED {
        s.push(format!("{} more", entries.len() - NAMED));
    }
    s.join(", ")
}

/// The distinct hosts of `entries`, each with its count.
fn hosts(entries: &[&Entry]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in entries {
        let h = select::authority(&e.url);
        match counts.iter_mut().find(|(x, _)| *x == h) {
            Some((_, n)) => *n += 1,
            None => counts.push((h, 1)),
        }
    }
    let mut s: Vec<String> = counts.iter().take(NAMED).map(|(h, n)| format!("{h}: {n}")).collect();
    if counts.len() > NAMED {
        s.push(format!("{} more hosts", counts.len() - NAMED));
    }
    s.join(", ")
}

fn skipped_text(har: &Har) -> String {
    if har.skipped == 0 {
        return "no entries".into();
    }
    format!(
        "{} entr{} skipped, e.g. {}",
        har.skipped,
        if har.skipped == 1 { "y" } else { "ies" },
        har.skipped_examples.join("; ")
    )
}

#[cfg(test)]
mod tests;
