//! A finished [`Tally`] -> the scenario draft, its CSV feeders and the
//! summary. This module owns the choices that turn counts into a workload:
//! which session shapes become flows, how weights are reduced, which stages
//! the rates make, what each comment says. It reads nothing.

use std::fmt::Write as _;
use std::time::Duration;

use super::Options;
use super::endpoint::{Part, display};
use super::line::Skip;
use super::replay::{Plan, Route};
use super::tally::{Endpoint, Tally};
use crate::draft::{Draft, FeedMode, Feeder, Flow, Load, Stage, StageKind, Step, Text};
use crate::{DataFile, ImportError, Imported};

/// Session shapes written as flows at most (the others' requests are single-request flows).
const MAX_SHAPE_FLOWS: usize = 10;
/// Weights are reduced until their sum is at most this (shares kept to 1 in 100,000).
const MAX_WEIGHT_SUM: u64 = 100_000;
/// How long the mean and peak stages hold, and the ramp between them.
const HOLD: Duration = Duration::from_secs(60);
const RAMP: Duration = Duration::from_secs(30);

/// An endpoint's feeder: its name and columns (`id`, `id_2`, ..., `query`).
struct FeederPlan {
    name: String,
    columns: Vec<String>,
    query: bool,
}

pub(super) fn build(t: &Tally, o: &Options, file_name: &str) -> Result<Imported, ImportError> {
    if t.requests == 0 {
        let mut why = format!("{file_name}: no line is an access-log request ({} lines read", t.lines);
        if let Some(c) = &t.cut_short {
            let _ = write!(why, "; {c}");
        }
        why.push(')');
        for ex in &t.examples {
            let _ = write!(why, "\n  line {}: {}: {}", ex.line, ex.skip.why(), printable(&ex.excerpt));
        }
        why.push_str("\n  formats read: nginx/Apache combined and common, JSON lines (--format, --field)");
        return Err(ImportError::Input(why));
    }
    let name = o.name.clone().unwrap_or_else(|| stem(file_name));
    let feeders = plan_feeders(t, o);

    // Shapes: the most frequent ones of 2 or more sessions; the rest go back to single requests.
    let mut shapes: Vec<(&Vec<u32>, &super::tally::Shape)> = t.shapes.iter().collect();
    shapes.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(b.0)));
    let mut singles = t.singles.clone();
    let mut kept = Vec::new();
    let mut shapes_dropped = 0u64;
    for (i, (key, shape)) in shapes.into_iter().enumerate() {
        if i < MAX_SHAPE_FLOWS && shape.count >= 2 {
            kept.push((key, shape));
        } else {
            shapes_dropped += shape.count;
            for e in key {
                singles[*e as usize] += shape.count;
            }
        }
    }

    // Flows: (weight as counted, flow); the endpoints their steps use.
    let mut flows: Vec<(u64, Flow)> = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for (n, (key, shape)) in kept.iter().enumerate() {
        let steps: Vec<Step> = key
            .iter()
            .enumerate()
            .map(|(i, e)| {
                used.insert(*e as usize);
                let mut s = step(&t.endpoints[*e as usize], &feeders[*e as usize], o);
                // The pause after a step is the mean gap before the next one.
                if let Some(sum) = shape.gap_sum_us.get(i + 1) {
                    let mean_ms = (*sum as f64 / shape.count as f64 / 1000.0).round() as u64;
                    if mean_ms > 0 {
                        s.pause = Some(Duration::from_millis(mean_ms));
                    }
                }
                s.comments.clear();
                s
            })
            .collect();
        let path: Vec<String> = key.iter().map(|e| endpoint_name(&t.endpoints[*e as usize])).collect();
        flows.push((
            shape.count,
            Flow {
                name: format!("session {}: {}", n + 1, short(&path.join(" > "), 100)),
                comments: vec![format!(
                    "{} went {} (the pauses: their mean gaps)",
                    count(shape.count, "session"),
                    path.join(" > ")
                )],
                weight: shape.count,
                steps,
            },
        ));
    }
    let mut by_count: Vec<usize> = (0..t.endpoints.len()).filter(|e| singles[*e] > 0).collect();
    by_count.sort_by(|a, b| singles[*b].cmp(&singles[*a]).then(a.cmp(b)));
    let mut left_out = (0usize, 0u64);
    for (rank, e) in by_count.into_iter().enumerate() {
        let ep = &t.endpoints[e];
        if flows.len() >= o.max_flows.max(1) && rank > 0 {
            left_out.0 += 1;
            left_out.1 += singles[e];
            continue;
        }
        used.insert(e);
        let step = step(ep, &feeders[e], o);
        let comments = step.comments.clone();
        let mut step = step;
        step.comments.clear();
        flows.push((singles[e], Flow { name: endpoint_name(ep), comments, weight: singles[e], steps: vec![step] }));
    }
    let counted: Vec<u64> = flows.iter().map(|(c, _)| *c).collect();
    let weights = reduce(&counted);
    for ((_, f), w) in flows.iter_mut().zip(&weights) {
        f.weight = *w;
    }

    // Rates: requests/s -> arrivals/s (one arrival runs one flow, whatever its length).
    let requests_in_flows: u64 = flows.iter().map(|(c, f)| c * f.steps.len() as u64).sum();
    let arrivals: u64 = flows.iter().map(|(c, _)| *c).sum();
    let per_request = arrivals as f64 / requests_in_flows.max(1) as f64;
    let mean = t.mean_rate();
    let peak = t.peak.1 as f64;
    let span_s = t.span_s();
    let scaled = |r: f64| r * per_request * o.scale;
    let scale_note =
        if (o.scale - 1.0).abs() > f64::EPSILON { format!(", x{} (--scale)", o.scale) } else { String::new() };
    let load = Load {
        comments: vec![
            format!(
                "Rates are arrivals/s: the log's requests/s x {:.3} (each arrival runs one flow; {} requests in {} arrivals){}.",
                per_request, requests_in_flows, arrivals, scale_note
            ),
            "The holds are a start: make them as long as the test needs.".into(),
        ],
        stages: vec![
            Stage {
                name: Some("mean".into()),
                comment: Some(format!("the log's mean: {} requests/s over {}", fmt_rate(mean), fmt_span(span_s))),
                kind: StageKind::Hold { rate: scaled(mean), hold: HOLD },
            },
            Stage {
                name: Some("to peak".into()),
                comment: None,
                kind: StageKind::Ramp { to: scaled(peak), over: RAMP },
            },
            Stage {
                name: Some("peak".into()),
                comment: Some(format!(
                    "the log's busiest second: {} at {}",
                    count(t.peak.1, "request"),
                    fmt_utc(t.peak.0 * 1_000_000)
                )),
                kind: StageKind::Hold { rate: scaled(peak), hold: HOLD },
            },
        ],
        max_in_flight: None,
        replay: None,
    };

    let mut comments = vec![
        format!("Imported by `perfops import access-log` from {file_name}:"),
        format!(
            "{} requests ({}) from {} to {}; {} lines not read.",
            t.requests,
            formats(t),
            fmt_utc(t.first_us),
            fmt_utc(t.last_us),
            t.skipped_lines()
        ),
        format!(
            "Endpoints: {} (identifiers in paths are templates fed from the CSV files beside this one; {}).",
            t.endpoints.len(),
            if o.keep_query {
                "query strings are a feeder column, as logged"
            } else {
                "query strings dropped (--no-query)"
            }
        ),
    ];
    comments.extend(sessions_note(t, o.session_gap, kept.len(), shapes_dropped));
    if !t.endpoints.iter().any(|e| e.authorized > 0) && o.headers.is_empty() {
        comments.push(
            "The log holds no request headers: where the service wants a credential (a 401 or 403 when run), \
             pass --header 'Authorization: Bearer ${env.TOKEN}' or add a setup login (docs/guide/flows.md)."
                .into(),
        );
    }
    if t.endpoints.iter().any(|e| matches!(e.method, "POST" | "PUT" | "PATCH")) {
        comments.push("The log holds no request bodies: a POST, PUT or PATCH step is sent without one; add `json:`, `body:` or `form:` where the service wants it.".into());
    }
    if left_out.0 > 0 {
        comments.push(format!(
            "Left out: the {} least frequent endpoints ({} requests, {:.2}%): --max-flows writes more.",
            left_out.0,
            left_out.1,
            100.0 * left_out.1 as f64 / t.requests as f64
        ));
    }
    if t.untracked > 0 {
        comments.push(format!(
            "Left out: {} requests to endpoints past the first {} distinct ones (paths with names, not ids, that vary).",
            t.untracked,
            t.endpoints.len()
        ));
    }
    if let Some(c) = &t.cut_short {
        comments.push(format!("Read short: {c}."));
    }

    // The feeders that are used, and their files.
    let mut data = Vec::new();
    let mut files = Vec::new();
    for e in used {
        let Some(plan) = &feeders[e] else { continue };
        let file = format!("{}-{}.csv", o.data_prefix, plan.name);
        let rows = &t.endpoints[e].samples;
        data.push(Feeder {
            name: plan.name.clone(),
            comments: vec![format!(
                "{} of {} taken from the log",
                count(rows.len() as u64, "value row"),
                endpoint_name(&t.endpoints[e])
            )],
            csv: file.clone(),
            mode: FeedMode::Cycle,
        });
        files.push(DataFile { name: file, text: csv(plan, rows) });
    }

    let draft = Draft {
        comments,
        name,
        target: Text::lit(&o.target),
        scripts: None,
        timeout: None,
        headers: o.headers.iter().map(|(k, v)| (k.clone(), Text::template(v))).collect(),
        setup: Vec::new(),
        flows: flows.into_iter().map(|(_, f)| f).collect(),
        data,
        load: Some(load),
        slo: Vec::new(),
    };
    let summary = summary(t, &draft, mean, peak, span_s, &weights, &counted);
    Ok(Imported { draft, files, summary })
}

/// `--replay`: the scenario of [`build`] with one single-request flow per
/// endpoint (named as the endpoint, its values `${replay.NAME}`) and a replay
/// load, no feeders; and the plan of the replay file's rows.
pub(super) fn build_replay(t: &Tally, o: &Options, file_name: &str) -> Result<(Imported, Plan), ImportError> {
    let replay_file = o.replay.clone().unwrap_or_default();
    let mut imported = build(t, o, file_name)?;
    let mut plan = Plan::default();
    let mut flows = Vec::new();
    for (ep, feeder) in t.endpoints.iter().zip(plan_feeders(t, o)) {
        // The same column names as the feeders' (`id`, `id_2`, `query`), shared by the endpoints.
        let feeder = feeder.map(|p| FeederPlan { name: "replay".into(), ..p });
        let mut column = |c: &str| match plan.columns.iter().position(|x| x == c) {
            Some(i) => i,
            None => {
                plan.columns.push(c.to_string());
                plan.columns.len() - 1
            }
        };
        let (holes, query) = match &feeder {
            Some(f) => (f.columns.iter().map(|c| column(c)).collect(), f.query.then(|| column("query"))),
            None => (Vec::new(), None),
        };
        let mut step = step(ep, &feeder, o);
        let comments = std::mem::take(&mut step.comments);
        let name = endpoint_name(ep);
        plan.routes.insert((ep.method, ep.parts.clone()), Route { flow: name.clone(), holes, query });
        flows.push(Flow { name, comments, weight: ep.count, steps: vec![step] });
    }
    let counted: Vec<u64> = flows.iter().map(|f| f.weight).collect();
    for (f, w) in flows.iter_mut().zip(reduce(&counted)) {
        f.weight = w;
    }
    let d = &mut imported.draft;
    let mut comments: Vec<String> = d.comments.iter().take(2).cloned().collect();
    comments.push(format!(
        "Endpoints: {}, each a flow of one request; identifiers in paths{} are the replay file's value columns (`${{replay.NAME}}`), taken line by line from the log.",
        t.endpoints.len(),
        if o.keep_query { " and query strings" } else { "" }
    ));
    comments.push(
        "Sessions are not used with --replay: each logged request is one arrival of its endpoint's flow, at its recorded offset."
            .into(),
    );
    comments.extend(
        d.comments
            .iter()
            .skip(2)
            .filter(|c| c.starts_with("The log holds") || c.starts_with("Read short") || c.contains("past the first"))
            .cloned(),
    );
    d.comments = comments;
    d.flows = flows;
    d.data = Vec::new();
    imported.files = Vec::new();
    d.load = Some(Load {
        comments: vec![
            format!(
                "Replays the log's requests at their recorded offsets ({replay_file}, written by --replay; the offsets are the log's, from its first request)."
            ),
            "`speed: 2` sends them twice as fast, `speed: 0.5` at half speed.".into(),
        ],
        stages: Vec::new(),
        max_in_flight: None,
        replay: Some(replay_file),
    });
    Ok((imported, plan))
}

/// `GET /orders/{id}`.
fn endpoint_name(e: &Endpoint) -> String {
    format!("{} {}", e.method, display(&e.parts))
}

fn stem(file_name: &str) -> String {
    let base = file_name.split('.').next().unwrap_or(file_name);
    if base.is_empty() { "imported".into() } else { base.to_string() }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}...", s.chars().take(n).collect::<String>()) }
}

/// Control characters as `\u{..}`: an excerpt of a bad line must not drive the terminal.
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { format!("\\u{{{:x}}}", c as u32) } else { c.to_string() }).collect()
}

/// Each endpoint's feeder, when it has placeholders or (kept) query strings.
fn plan_feeders(t: &Tally, o: &Options) -> Vec<Option<FeederPlan>> {
    let mut taken: Vec<String> = Vec::new();
    t.endpoints
        .iter()
        .map(|e| {
            let holes: Vec<&'static str> = e
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Hole(k) => Some(k.name()),
                    Part::Lit(_) => None,
                })
                .collect();
            let query = o.keep_query && e.with_query > 0;
            if holes.is_empty() && !query {
                return None;
            }
            // The name: the path's words and placeholders, as a variable can hold them (`orders_id`).
            let words: String = e
                .parts
                .iter()
                .map(|p| match p {
                    Part::Lit(s) => s.as_str(),
                    Part::Hole(k) => k.name(),
                })
                .collect::<Vec<_>>()
                .join("/")
                .split('/')
                .filter(|w| !w.is_empty())
                .map(|w| {
                    w.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
                })
                .collect::<Vec<String>>()
                .join("_");
            let base = if words.is_empty() || words.starts_with(|c: char| c.is_ascii_digit()) {
                format!("{}_{}", e.method.to_ascii_lowercase(), if words.is_empty() { "root" } else { &words })
            } else {
                words
            };
            let base = short_ident(&base);
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{base}_{n}");
                n += 1;
            }
            taken.push(name.clone());
            let mut columns: Vec<String> = Vec::new();
            for h in holes {
                let mut c = h.to_string();
                let mut k = 2;
                while columns.contains(&c) {
                    c = format!("{h}_{k}");
                    k += 1;
                }
                columns.push(c);
            }
            Some(FeederPlan { name, columns, query })
        })
        .collect()
}

fn short_ident(s: &str) -> String {
    s.chars().take(40).collect()
}

/// The step of one endpoint.
fn step(e: &Endpoint, feeder: &Option<FeederPlan>, o: &Options) -> Step {
    let mut path = Text::default();
    let mut hole = 0;
    for p in &e.parts {
        match p {
            Part::Lit(s) => path = path.then(Text::path(s)),
            Part::Hole(_) => {
                let col = feeder.as_ref().map_or("id", |f| f.columns[hole].as_str());
                let feeder_name = feeder.as_ref().map_or("", |f| f.name.as_str());
                path = path.then(Text::var(&format!("{feeder_name}.{col}")));
                hole += 1;
            }
        }
    }
    if let Some(f) = feeder.as_ref().filter(|f| f.query) {
        path = path.then(Text::lit("?")).then(Text::var(&format!("{}.query", f.name)));
    }
    let errors: u64 = e.statuses.range(400..).map(|(_, n)| n).sum();
    let statuses: Vec<String> = e.statuses.iter().map(|(s, n)| format!("{s} x {n}")).take(8).collect();
    let mut comments = vec![format!("{}; answered {}", count(e.count, "request"), statuses.join(", "))];
    // An endpoint answered mostly with errors in the log (a scanner's 404s, a
    // client's 401s) is expected to be answered so, and counted as answered.
    let expect_status = if errors * 2 >= e.count {
        comments.push("most of its answers in the log were errors: `expect` lists the statuses seen".into());
        e.statuses.keys().copied().take(8).collect()
    } else {
        Vec::new()
    };
    if e.secret_queries > 0 {
        comments.push(format!(
            "{} of its requests had query parameters named like credentials ({}): left out of the feeder; add them as `${{env.NAME}}`",
            e.secret_queries,
            e.secret_names.join(", ")
        ));
    }
    let mut headers = Vec::new();
    if e.authorized > 0 && !o.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
        comments.push(format!(
            "{} of its requests carried an Authorization value (never written): set AUTHORIZATION (e.g. `Bearer ...`)",
            e.authorized
        ));
        headers.push(("Authorization".to_string(), Text::var("env.AUTHORIZATION")));
    }
    Step {
        comments,
        name: Some(endpoint_name(e)),
        method: e.method.to_string(),
        path,
        headers,
        body: None,
        save: Vec::new(),
        expect_status,
        pause: None,
        before: None,
    }
}

/// A feeder's CSV text: a header row, then its rows (RFC 4180 quoting).
fn csv(plan: &FeederPlan, rows: &[(Vec<String>, String)]) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut header = plan.columns.clone();
    if plan.query {
        header.push("query".into());
    }
    let mut out = header.join(",");
    out.push('\n');
    for (values, query) in rows {
        let mut cells: Vec<String> = values.iter().map(|v| field(v)).collect();
        // A row of another shape cannot happen (one endpoint, one template); keep the file rectangular anyway.
        cells.resize(plan.columns.len(), String::new());
        if plan.query {
            cells.push(field(query));
        }
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// Weights with their common divisor taken out, then scaled down (each at
/// least 1) until they sum to at most [`MAX_WEIGHT_SUM`].
pub(super) fn reduce(counts: &[u64]) -> Vec<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let g = counts.iter().copied().fold(0, gcd).max(1);
    let mut w: Vec<u64> = counts.iter().map(|c| (c / g).max(1)).collect();
    let sum: u64 = w.iter().sum();
    if sum > MAX_WEIGHT_SUM {
        let f = MAX_WEIGHT_SUM as f64 / sum as f64;
        w = w.iter().map(|c| ((*c as f64 * f).round() as u64).max(1)).collect();
    }
    w
}

fn formats(t: &Tally) -> String {
    t.formats.iter().map(|(f, n)| format!("{n} {f}")).collect::<Vec<_>>().join(", ")
}

fn sessions_note(t: &Tally, gap: Duration, kept: usize, dropped: u64) -> Vec<String> {
    let mut lines = vec![
        format!(
            "Sessions: {} (a client is its Authorization hash where the log has one, else address + user agent; a gap over {} ends its session).",
            t.sessions,
            crate::draft::duration(gap)
        ),
        format!(
            "{} (2 to 8 requests, seen twice or more) {} flows; every other request is a single-request flow.",
            count(kept as u64, "session shape"),
            if kept == 1 { "is a" } else { "are" }
        ),
    ];
    let mut alone = Vec::new();
    if t.long_sessions > 0 {
        alone.push(format!(
            "{} of more than 8 requests without a pause (a proxy, a NAT, a robot or a load generator)",
            count(t.long_sessions, "session")
        ));
    }
    if dropped > 0 {
        alone.push(format!("{dropped} sessions of rarer shapes"));
    }
    if t.anonymous > 0 {
        alone.push(format!("{} requests without a client", t.anonymous));
    }
    if t.crowded > 0 {
        alone.push(format!("{} requests of clients past the 100,000 in flight", t.crowded));
    }
    if !alone.is_empty() {
        lines.push(format!("Single requests from: {}.", alone.join("; ")));
    }
    lines
}

/// The lines printed on stderr.
fn summary(t: &Tally, d: &Draft, mean: f64, peak: f64, span_s: f64, weights: &[u64], counted: &[u64]) -> Vec<String> {
    let mut out = vec![format!(
        "read {} lines: {} requests ({}), {} not read",
        t.lines,
        t.requests,
        formats(t),
        t.skipped_lines()
    )];
    out.push(format!(
        "span {} ({} to {}); mean {} requests/s; peak {} requests/s at {}",
        fmt_span(span_s),
        fmt_utc(t.first_us),
        fmt_utc(t.last_us),
        fmt_rate(mean),
        fmt_rate(peak),
        fmt_utc(t.peak.0 * 1_000_000)
    ));
    let mut top: Vec<&Endpoint> = t.endpoints.iter().collect();
    top.sort_by_key(|e| std::cmp::Reverse(e.count));
    out.push(format!("endpoints: {} (top {}):", t.endpoints.len(), top.len().min(10)));
    for e in top.iter().take(10) {
        out.push(format!(
            "  {:>6.2}%  {:>9}  {}",
            100.0 * e.count as f64 / t.requests as f64,
            e.count,
            endpoint_name(e)
        ));
    }
    out.push(format!("flows: {} (weight: what the log counted)", d.flows.len()));
    for ((f, w), c) in d.flows.iter().zip(weights).zip(counted).take(12) {
        out.push(format!("  {:>9}  ({:>9})  {}", w, c, f.name));
    }
    if d.flows.len() > 12 {
        out.push(format!("  ... {} more", d.flows.len() - 12));
    }
    let secret: Vec<&Endpoint> = t.endpoints.iter().filter(|e| e.secret_queries > 0).collect();
    if !secret.is_empty() {
        let names: std::collections::BTreeSet<&str> =
            secret.iter().flat_map(|e| e.secret_names.iter().map(String::as_str)).collect();
        out.push(format!(
            "query parameters named like credentials ({}) in {} requests: left out of the feeders, never written",
            names.into_iter().collect::<Vec<_>>().join(", "),
            secret.iter().map(|e| e.secret_queries).sum::<u64>()
        ));
    }
    if t.untracked > 0 {
        out.push(format!(
            "{} requests to endpoints past the first {} distinct ones: counted, not in the scenario",
            t.untracked,
            t.endpoints.len()
        ));
    }
    if t.late > 0 {
        out.push(format!("{} lines came over 5 minutes out of time order: counted, but not in the peak", t.late));
    }
    if let Some(c) = &t.cut_short {
        out.push(c.clone());
    }
    if t.skipped_lines() > 0 {
        let by: Vec<String> =
            Skip::ALL.iter().filter_map(|s| t.skipped.get(s).map(|n| format!("{n} {}", s.why()))).collect();
        out.push(format!("not read: {}", by.join("; ")));
        for ex in &t.examples {
            out.push(format!("  line {}: {}: {}", ex.line, ex.skip.why(), printable(&ex.excerpt)));
        }
    }
    out
}

/// `1 session`, `2 sessions`.
fn count(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

fn fmt_rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.4}")
    }
}

pub(super) fn fmt_span(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// `2026-11-29T08:30:01Z` (to the second).
pub(super) fn fmt_utc(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table: weights as written.
    #[test]
    fn weights() {
        let cases: [(&[u64], &[u64]); 4] = [
            // a common divisor comes out: 1:1000 stays 1:1000
            (&[20, 20_000], &[1, 1000]),
            // nothing to reduce
            (&[3, 7], &[3, 7]),
            // too large a sum: scaled down, the smallest kept at 1
            (&[1, 1_000_000, 999_999], &[1, 50_000, 50_000]),
            // one flow
            (&[12345], &[1]),
        ];
        for (counts, want) in cases {
            assert_eq!(reduce(counts), want, "{counts:?}");
        }
    }

    /// Table: UTC times.
    #[test]
    fn utc() {
        let cases = [
            // the epoch
            (0, "1970-01-01T00:00:00Z"),
            // Apache's example instant
            (971_211_336_000_000, "2000-10-10T20:55:36Z"),
            // a leap day
            (1_709_164_800_000_000, "2024-02-29T00:00:00Z"),
        ];
        for (us, want) in cases {
            assert_eq!(fmt_utc(us), want);
        }
    }
}
