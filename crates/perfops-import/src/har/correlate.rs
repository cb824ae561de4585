//! What flows between recorded requests, found automatically: a value that a
//! response carried (a JSON field, a response header, a `Set-Cookie`, an HTML
//! form field) and a later request sent again (in its path, query, a header or
//! its body) becomes a `save` on the step whose response first carried it and
//! a `${name}` reference where it is reused. Credentials typed or recorded (a
//! password field, `Authorization: Basic`, an API key header, a token from
//! before the recording) become `${env.NAME}` references.
//!
//! This module owns the finder and what it writes into requests; it reads no
//! file and writes no YAML (`read.rs` and the draft do). Its parts:
//! `sources.rs` (what a response offers, and which values are trivial) and
//! `index.rs` (where those values stand in a request's text).
//!
//! How a value is found, and why so:
//! - Every value a response carries is a candidate: each JSON leaf (a string
//!   or a number, by its JSONPath), each response header but the standard ones
//!   (`Date`, `Content-Type`...), the cookie of each `Set-Cookie`, each
//!   `<input>` with a value and each `<meta name content>` of an HTML page.
//!   The earliest response that carried a value is its source; within one
//!   response the most specific kind wins (a JSON field, then a form field,
//!   then a header, then a cookie).
//! - Trivial values are not candidates: shorter than 6 characters, numbers of
//!   fewer than 5 digits, booleans, lowercase words (`pending`, `shipped`) and
//!   dates. They recur by chance (a page number, a status, a quantity) and a
//!   `save` of one would tie unrelated requests together.
//! - A value that a request sent no later than the response that carried it
//!   is the client's own (a user name typed at login and echoed back by
//!   `/me`): it is not a correlation, and stays as recorded.
//! - A match must stand on its own: the characters around it in the request
//!   are not letters or digits, so `12345` is not found inside `912345`. The
//!   search is an index on each candidate's first word, so a recording with
//!   thousands of JSON leaves and hundreds of requests costs one pass over
//!   each request's text.
//! - Cookies go as a browser's would: each arrival of the run keeps a jar of
//!   what its answers set (`defaults.cookies`, on by default) and sends it
//!   back. So a recorded `Cookie` pair whose cookie an earlier answer set is
//!   left out of the request (the jar carries it; the step's comment says
//!   so), and is no use of the value: a cookie's value is saved
//!   (`cookie:NAME`) only where a later request sends it elsewhere (a CSRF
//!   token echoed in a header or a form). A pair no earlier answer set (sent
//!   from before the recording, or set by the page's scripts) is dropped and
//!   said so: a literal session cookie would be a stale secret in the file.

mod index;
mod sources;

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use index::Index;
pub use sources::trivial;
use sources::{Candidate, Kind, candidates_of, json_leaves};

/// One part of a template: literal text or a reference (`token`, `env.PASSWORD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Sent as it is.
    Lit(String),
    /// `${name}`.
    Var(String),
}

/// A template: pieces in order.
pub type Tpl = Vec<Piece>;

/// `text` as a template with no reference.
pub fn lit(text: &str) -> Tpl {
    if text.is_empty() { Vec::new() } else { vec![Piece::Lit(text.to_string())] }
}

/// The template as perfops reads it: `${` in literal text written `$${`.
pub fn render(t: &[Piece]) -> String {
    t.iter()
        .map(|p| match p {
            Piece::Lit(s) => s.replace("${", "$${"),
            Piece::Var(v) => format!("${{{v}}}"),
        })
        .collect()
}

/// A request as recorded, its header fields already selected.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query, as they were on the wire (percent-encoded).
    pub target: String,
    /// Header fields sent.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Body<String>,
}

/// A request body; `S` is the recorded text or its template.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<S> {
    /// None.
    None,
    /// JSON: for a template, its strings are template text (see [`render`]).
    Json(Value),
    /// URL-encoded form fields, decoded.
    Form(Vec<(String, S)>),
    /// Any other body, as text.
    Text(S),
}

/// A response as recorded: what the finder reads from it.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    /// Header fields.
    pub headers: &'a [(String, String)],
    /// MIME type, lowercase, without parameters.
    pub mime: &'a str,
    /// The body as text, when the recording kept it.
    pub text: Option<&'a str>,
}

/// A request with its references.
#[derive(Debug, Clone, PartialEq)]
pub struct Templated {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query.
    pub target: Tpl,
    /// Header fields.
    pub headers: Vec<(String, Tpl)>,
    /// The body.
    pub body: Body<Tpl>,
}

/// A value saved by a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Save {
    /// The variable.
    pub name: String,
    /// Its extractor: `$.token`, `header:ETag`, `cookie:csrf`, `regex:...`.
    pub extractor: String,
    /// The steps (indexes) that use it.
    pub used_by: Vec<usize>,
}

/// An environment variable the scenario reads in place of a recorded credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// `PASSWORD`, `BASIC_AUTH`, `X_API_KEY`...
    pub name: String,
    /// Where it was found, for the summary: `step 2, json field password`.
    pub found: String,
}

/// What the finder made of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Each request with its references, in order.
    pub requests: Vec<Templated>,
    /// What each step saves (by step index).
    pub saves: Vec<Vec<Save>>,
    /// Notes per step, for comments (cookies dropped, values left as recorded).
    pub notes: Vec<Vec<String>>,
    /// The environment variables to set.
    pub env: Vec<EnvVar>,
}

/// A name as perfops takes it: lowercase letters, digits and `_`, starting with a letter.
fn ident(hint: &str) -> String {
    let mut out = String::new();
    for c in hint.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_string();
    let out = if out.is_empty() {
        "value".to_string()
    } else if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("v_{out}")
    } else {
        out
    };
    if matches!(out.as_str(), "env" | "seq" | "uuid" | "random") { format!("{out}_value") } else { out }
}

/// Names handed out, each once: `base`, then `base_2`, `base_3`... The next number is kept per
/// base, so that ten thousand steps or values named alike cost ten thousand lookups, not a
/// search from `_2` each time (a 20,000-request recording took minutes that way).
#[derive(Debug)]
pub(crate) struct Names {
    taken: HashSet<String>,
    next: HashMap<String, usize>,
    sep: &'static str,
}

impl Names {
    /// None taken yet; `sep` goes between a base and its number.
    pub(crate) fn new(sep: &'static str) -> Names {
        Names { taken: HashSet::new(), next: HashMap::new(), sep }
    }

    /// `base` if it is free, else the first free `base{sep}N`; taken from now on.
    pub(crate) fn unique(&mut self, base: String) -> String {
        if self.taken.insert(base.clone()) {
            return base;
        }
        let n = self.next.entry(base.clone()).or_insert(2);
        loop {
            let name = format!("{base}{}{n}", self.sep);
            *n += 1;
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
    }
}

/// Every text a request sends, with where it is: (place, text). Cookie pairs are their own places.
fn texts(r: &Request) -> Vec<(Place, String)> {
    let mut out = vec![(Place::Target, r.target.clone())];
    for (i, (name, value)) in r.headers.iter().enumerate() {
        if name.eq_ignore_ascii_case("cookie") {
            for (j, pair) in cookie_pairs(value).into_iter().enumerate() {
                out.push((Place::Cookie(i, j), pair.1));
            }
        } else {
            out.push((Place::Header(i), value.clone()));
        }
    }
    match &r.body {
        Body::None => {}
        Body::Json(v) => {
            let mut leaves = Vec::new();
            json_leaves(v, &mut String::new(), &mut Vec::new(), 0, &mut leaves);
            out.extend(leaves.into_iter().map(|(v, _, _)| (Place::Body, v)));
        }
        Body::Form(fields) => out.extend(fields.iter().map(|(_, v)| (Place::Body, v.clone()))),
        Body::Text(t) => out.push((Place::Body, t.clone())),
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Target,
    Header(usize),
    /// Header field, pair.
    Cookie(usize, usize),
    Body,
}

/// `a=1; b=2` -> [("a", "1"), ("b", "2")].
fn cookie_pairs(value: &str) -> Vec<(String, String)> {
    value
        .split(';')
        .filter_map(|p| {
            let (n, v) = p.trim().split_once('=')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Whether a field, parameter or header name says it holds a credential.
pub fn credential_name(name: &str) -> bool {
    let n: String = name.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
    ["password", "passwd", "passphrase", "pwd", "secret", "apikey", "accesskey", "privatekey", "token", "csrf", "xsrf"]
        .iter()
        .any(|w| n.contains(w))
        || matches!(
            n.as_str(),
            "pass" | "pin" | "otp" | "key" | "sessionid" | "session" | "sid" | "signature" | "sig" | "auth"
        )
}

/// Find what flows between `exchanges` (each request with the response it got, in order) and
/// write the references.
pub fn correlate(exchanges: &[(Request, Response<'_>)]) -> Found {
    // Candidates: each value once, from its earliest and most specific source.
    let mut all = Vec::new();
    for (step, (_, resp)) in exchanges.iter().enumerate() {
        candidates_of(step, resp, &mut all);
    }
    let mut cands: Vec<Candidate> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for c in all {
        match at.get(&c.value) {
            Some(&i) if cands[i].step < c.step || cands[i].kind.rank() <= c.kind.rank() => {}
            Some(&i) => cands[i] = c,
            None => {
                at.insert(c.value.clone(), cands.len());
                cands.push(c);
            }
        }
    }
    let index = Index::new(&cands);
    // Each cookie's first setter: from the step after it, the run's jar sends it.
    let mut set_by: HashMap<String, usize> = HashMap::new();
    for (step, (_, resp)) in exchanges.iter().enumerate() {
        for (name, value) in resp.headers {
            if name.eq_ignore_ascii_case("set-cookie")
                && let Some((cookie, _)) = sources::set_cookie_pair(value)
            {
                set_by.entry(cookie.to_string()).or_insert(step);
            }
        }
    }
    let jar_sends = |name: &str, j: usize| set_by.get(name).is_some_and(|&s| s < j);
    // Uses: a request after the source; a request no later than it makes the value the client's.
    for (j, (req, _)) in exchanges.iter().enumerate() {
        for (place, text) in texts(req) {
            if let Place::Cookie(i, k) = place
                && cookie_pairs(&req.headers[i].1).get(k).is_some_and(|(name, _)| jar_sends(name, j))
            {
                // The jar's to send: no use of the value.
                continue;
            }
            let mut seen = Vec::new();
            index.matches(&text, |c| {
                let cand = &cands[c];
                if cand.step >= j {
                    seen.push((c, false));
                    return false;
                }
                let ok = !cand.clients;
                if ok {
                    seen.push((c, true));
                }
                ok
            });
            for (c, used) in seen {
                if !used {
                    cands[c].clients = true;
                } else if cands[c].used_by.last() != Some(&j) {
                    // Requests are read in order: `used_by` stays sorted.
                    cands[c].used_by.push(j);
                }
            }
        }
    }
    // A value the client sent first is never a correlation, even where it was counted as one before.
    for c in &mut cands {
        if c.clients {
            c.used_by.clear();
        }
    }
    // Names, in the order the values were first carried.
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| !cands[i].used_by.is_empty()).collect();
    order.sort_by_key(|&i| (cands[i].step, cands[i].used_by[0]));
    let mut taken = Names::new("_");
    let mut saves = vec![Vec::new(); exchanges.len()];
    let mut notes = vec![Vec::new(); exchanges.len()];
    for &i in &order {
        let c = &mut cands[i];
        let name = taken.unique(ident(&c.hint));
        saves[c.step].push(Save { name: name.clone(), extractor: c.extractor.clone(), used_by: c.used_by.clone() });
        c.name = Some(name);
    }

    let mut env = Envs::new();
    let mut requests = Vec::with_capacity(exchanges.len());
    for (j, (req, _)) in exchanges.iter().enumerate() {
        // A named candidate carried before this step.
        let var_at = |c: usize| -> Option<&str> {
            let cand = &cands[c];
            (cand.step < j && cand.used_by.binary_search(&j).is_ok()).then_some(cand.name.as_deref()).flatten()
        };
        let sub = |text: &str| -> Tpl {
            let mut out = Vec::new();
            let mut last = 0;
            for (s, e, c) in index.matches(text, |c| var_at(c).is_some()) {
                if s > last {
                    out.push(Piece::Lit(text[last..s].to_string()));
                }
                out.push(Piece::Var(var_at(c).unwrap_or_default().to_string()));
                last = e;
            }
            if last < text.len() {
                out.push(Piece::Lit(text[last..].to_string()));
            }
            out
        };
        let step = j + 1;
        let mut headers = Vec::new();
        for (name, value) in &req.headers {
            let lower = name.to_ascii_lowercase();
            if lower == "cookie" {
                let mut t: Tpl = Vec::new();
                let (mut carried, mut dropped) = (Vec::new(), Vec::new());
                for (cookie, v) in cookie_pairs(value) {
                    if jar_sends(&cookie, j) {
                        carried.push(cookie);
                        continue;
                    }
                    let inner = sub(&v);
                    if !has_var(&inner) {
                        dropped.push(cookie);
                        continue;
                    }
                    if !t.is_empty() {
                        t.push(Piece::Lit("; ".into()));
                    }
                    t.extend(lit(&format!("{cookie}=")));
                    t.extend(inner);
                }
                if !carried.is_empty() {
                    notes[j].push(format!(
                        "cookie {}: sent by the cookie jar (set by an earlier answer), not written here",
                        carried.join(", ")
                    ));
                }
                if !dropped.is_empty() {
                    notes[j].push(format!(
                        "cookie {} left out: no earlier answer set it (sent from before the recording, or set by the page's scripts)",
                        dropped.join(", ")
                    ));
                }
                if !t.is_empty() {
                    headers.push((name.clone(), merge(t)));
                }
                continue;
            }
            let t = sub(value);
            let t = if has_var(&t) {
                t
            } else if lower == "authorization" {
                let (scheme, secret) = value.split_once(' ').unwrap_or(("", value));
                let env_name = match scheme.to_ascii_lowercase().as_str() {
                    "basic" => "BASIC_AUTH".to_string(),
                    "bearer" => "BEARER_TOKEN".to_string(),
                    _ => "AUTHORIZATION".to_string(),
                };
                let var = env.name_for(&env_name, secret, format!("step {step}, header {name}"));
                let mut t = if scheme.is_empty() { Vec::new() } else { lit(&format!("{scheme} ")) };
                t.push(Piece::Var(var));
                t
            } else if credential_name(&lower) && !value.is_empty() {
                vec![Piece::Var(env.name_for(&env_ident(&lower), value, format!("step {step}, header {name}")))]
            } else {
                t
            };
            headers.push((name.clone(), merge(t)));
        }
        let target = {
            let (path, query) = req.target.split_once('?').map_or((req.target.as_str(), None), |(p, q)| (p, Some(q)));
            let mut t = sub(path);
            if let Some(q) = query {
                t.push(Piece::Lit("?".into()));
                for (k, pair) in q.split('&').enumerate() {
                    if k > 0 {
                        t.push(Piece::Lit("&".into()));
                    }
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    let tv = sub(value);
                    if !has_var(&tv) && credential_name(key) && !value.is_empty() {
                        t.push(Piece::Lit(format!("{key}=")));
                        t.push(Piece::Var(env.name_for(&env_ident(key), value, format!("step {step}, query {key}"))));
                    } else {
                        t.extend(sub(pair));
                    }
                }
            }
            merge(t)
        };
        let body = match &req.body {
            Body::None => Body::None,
            Body::Text(text) => Body::Text(merge(sub(text))),
            Body::Form(fields) => Body::Form(
                fields
                    .iter()
                    .map(|(k, v)| {
                        let t = sub(v);
                        if !has_var(&t) && credential_name(k) && !v.is_empty() {
                            let var = env.name_for(&env_ident(k), v, format!("step {step}, form field {k}"));
                            (k.clone(), vec![Piece::Var(var)])
                        } else {
                            (k.clone(), merge(t))
                        }
                    })
                    .collect(),
            ),
            Body::Json(v) => Body::Json(json_template(v, None, &sub, &mut env, step)),
        };
        requests.push(Templated { method: req.method.clone(), target, headers, body });
    }
    // A credential typed in one place and sent again elsewhere as it was: the same reference there.
    let creds = env.elsewhere();
    let cred_index = Index::new(&creds);
    for r in &mut requests {
        let swap = |t: &mut Tpl| *t = replace_in(t, &cred_index, &creds);
        swap(&mut r.target);
        r.headers.iter_mut().for_each(|(_, t)| swap(t));
        match &mut r.body {
            Body::Text(t) => swap(t),
            Body::Form(fields) => fields.iter_mut().for_each(|(_, t)| swap(t)),
            Body::Json(v) => replace_in_json(v, &cred_index, &creds),
            Body::None => {}
        }
    }
    Found { requests, saves, notes, env: env.vars }
}

fn has_var(t: &[Piece]) -> bool {
    t.iter().any(|p| matches!(p, Piece::Var(_)))
}

/// Adjacent literal pieces joined.
fn merge(t: Tpl) -> Tpl {
    let mut out: Tpl = Vec::with_capacity(t.len());
    for p in t {
        match (out.last_mut(), p) {
            (Some(Piece::Lit(a)), Piece::Lit(b)) => a.push_str(&b),
            (_, Piece::Lit(b)) if b.is_empty() => {}
            (_, p) => out.push(p),
        }
    }
    out
}

/// Steps by their number (1-based), the first few and how many in all: a value reused by every
/// step of a long recording would otherwise make a line of thousands.
pub(crate) fn list(steps: &[usize]) -> String {
    const SHOWN: usize = 5;
    let mut s: Vec<String> = steps.iter().take(SHOWN).map(|u| (u + 1).to_string()).collect();
    if steps.len() > SHOWN {
        s.push(format!("... ({} in all)", steps.len()));
    }
    s.join(", ")
}

/// `X-Api-Key` -> `X_API_KEY`.
fn env_ident(name: &str) -> String {
    ident(name).to_ascii_uppercase()
}

/// A JSON body with references: strings become template text, a number equal to a saved value its reference.
fn json_template(v: &Value, key: Option<&str>, sub: &dyn Fn(&str) -> Tpl, env: &mut Envs, step: usize) -> Value {
    match v {
        Value::String(s) => {
            let t = sub(s);
            if !has_var(&t) && key.is_some_and(credential_name) && !s.is_empty() {
                let k = key.unwrap_or_default();
                let var = env.name_for(&env_ident(k), s, format!("step {step}, JSON field {k}"));
                Value::String(render(&[Piece::Var(var)]))
            } else {
                Value::String(render(&t))
            }
        }
        Value::Number(n) => {
            let text = n.to_string();
            let t = sub(&text);
            if t.len() == 1 && has_var(&t) { Value::String(render(&t)) } else { v.clone() }
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| json_template(i, key, sub, env, step)).collect()),
        Value::Object(fields) => Value::Object(
            fields.iter().map(|(k, i)| (k.replace("${", "$${"), json_template(i, Some(k), sub, env, step))).collect(),
        ),
        Value::Bool(_) | Value::Null => v.clone(),
    }
}

/// The environment variables chosen so far, by the value each stands for.
struct Envs {
    vars: Vec<EnvVar>,
    by_value: HashMap<String, String>,
    names: Names,
}

impl Envs {
    fn new() -> Envs {
        Envs { vars: Vec::new(), by_value: HashMap::new(), names: Names::new("_") }
    }

    /// The reference for credential `value` (`env.NAME`): the same name for the same value.
    fn name_for(&mut self, base: &str, value: &str, found: String) -> String {
        if let Some(n) = self.by_value.get(value) {
            return format!("env.{n}");
        }
        let name = self.names.unique(base.to_string());
        self.vars.push(EnvVar { name: name.clone(), found });
        self.by_value.insert(value.to_string(), name.clone());
        format!("env.{name}")
    }

    /// The credentials long enough not to be found by chance elsewhere than their own field
    /// (6 characters), as candidates named `env.NAME`, for [`Index`].
    fn elsewhere(&self) -> Vec<Candidate> {
        self.by_value
            .iter()
            .filter(|(v, _)| v.chars().count() >= 6)
            .map(|(v, n)| Candidate {
                value: v.clone(),
                step: 0,
                kind: Kind::Header,
                extractor: String::new(),
                hint: String::new(),
                clients: false,
                used_by: Vec::new(),
                name: Some(format!("env.{n}")),
            })
            .collect()
    }
}

/// `t` with every standing credential of `cands` in its literal text replaced by its reference.
fn replace_in(t: &Tpl, index: &Index, cands: &[Candidate]) -> Tpl {
    let mut out = Vec::new();
    for p in t {
        let Piece::Lit(text) = p else {
            out.push(p.clone());
            continue;
        };
        let mut last = 0;
        for (s, e, c) in index.matches(text, |_| true) {
            out.push(Piece::Lit(text[last..s].to_string()));
            out.push(Piece::Var(cands[c].name.clone().unwrap_or_default()));
            last = e;
        }
        out.push(Piece::Lit(text[last..].to_string()));
    }
    merge(out)
}

fn replace_in_json(v: &mut Value, index: &Index, cands: &[Candidate]) {
    match v {
        Value::String(s) if !s.contains("${") => {
            let t = replace_in(&lit(s), index, cands);
            if has_var(&t) {
                *s = render(&t);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| replace_in_json(i, index, cands)),
        Value::Object(fields) => fields.values_mut().for_each(|i| replace_in_json(i, index, cands)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
