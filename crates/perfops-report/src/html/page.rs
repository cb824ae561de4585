//! The report's page: the text parts as HTML (the verdict first, then the
//! SLO by stage, the stage table, the diagnostics) and the frames of its
//! charts, inside the document shell (`shell.rs`).
//!
//! Every string that comes from a results file goes through [`escape`].

use std::fmt::Write;

use perfops_core::analysis::diagnose::Evidence;
use perfops_core::analysis::verdict::{SloCheck, StageVerdict};
use serde_json::Value;

use super::model::{Model, Outcome, Percentiles, Stage};
use super::shell::{close, frame, open};
use crate::format::{clock, count, escape, ms, none_held, number, per_second, percent, rate, utc};
use crate::run::{ProtocolUse, slo_value};

/// The whole HTML document.
pub(crate) fn page(m: &Model, data: &Value) -> String {
    let mut o = String::with_capacity(256 * 1024);
    open(&mut o, &format!("{} · {} · perfops report", m.name, m.verdict.result.badge()), data);
    header(&mut o, m);
    banners(&mut o, m);
    verdict(&mut o, m);
    slo_matrix(&mut o, m);
    stage_table(&mut o, m);
    step_table(&mut o, m);
    stream_table(&mut o, m);
    failures(&mut o, m);
    sweep(&mut o, m, data);
    diagnostics(&mut o, m);
    chart_frames(&mut o, data);
    details(&mut o, m);
    close(&mut o, &m.files.dir_name, data);
    o
}

fn header(o: &mut String, m: &Model) {
    let _ = write!(
        o,
        "<header class=\"top\">\n<p class=\"brand\">perfops report</p>\n<h1>{}</h1>\n<p class=\"meta\">",
        escape(&m.name)
    );
    let mut parts: Vec<String> = Vec::new();
    if let Some(t) = &m.target {
        parts.push(format!("<span title=\"target\">{}</span>", escape(t)));
    }
    if !m.protocols.is_empty() {
        parts.push(format!("<span title=\"protocol\">{}</span>", escape(&ProtocolUse::line(&m.protocols))));
    }
    if let Some(model) = &m.model {
        parts.push(format!("{} model", escape(model)));
    }
    if let Some(s) = &m.started_at {
        parts.push(format!("started {}", escape(&utc(s))));
    }
    parts.push(format!("ran {}", clock(m.elapsed_s)));
    if let Some(v) = m.files.meta.as_ref().map(|m| &m.perfops_version).filter(|v| !v.is_empty()) {
        parts.push(format!("perfops {}", escape(v)));
    }
    o.push_str(&parts.join(" <span class=\"sep\">·</span> "));
    o.push_str("</p>\n</header>\n");
}

fn banners(o: &mut String, m: &Model) {
    if !m.complete {
        let _ = writeln!(
            o,
            "<div class=\"banner warn\" role=\"alert\"><b>Incomplete: the run was interrupted.</b> It left no \
             <code>summary.json</code>, so there is no verdict; what follows is rebuilt from the {} second(s) it recorded.</div>",
            m.files.series.len()
        );
    } else if m.interrupted {
        let _ = writeln!(
            o,
            "<div class=\"banner warn\" role=\"alert\"><b>Interrupted</b> by a signal after {}: stages after that did not run.</div>",
            clock(m.elapsed_s)
        );
    }
    if let Some(a) = &m.aborted {
        let _ = writeln!(o, "<div class=\"banner bad\" role=\"alert\"><b>Aborted</b> early: {}</div>", escape(a));
    }
}

fn verdict(o: &mut String, m: &Model) {
    let v = &m.verdict;
    let _ = write!(
        o,
        "<section class=\"verdict r-{cls}\">\n<div class=\"badge\">{badge}</div>\n<p class=\"headline\">{headline}</p>\n<div class=\"tiles\">",
        cls = v.result.name(),
        badge = v.result.badge(),
        headline = escape(&v.headline),
    );
    let mut tile = |label: &str, value: String, cls: &str| {
        let _ =
            write!(o, "<div class=\"tile {cls}\"><div class=\"k\">{label}</div><div class=\"v\">{value}</div></div>");
    };
    let sweep = m.files.summary.as_ref().and_then(|s| s.sweep.as_ref());
    if let Some(sw) = sweep {
        // A sweep measures throughput at each concurrency, not a capacity.
        let best = sw.best_level.and_then(|n| sw.levels.iter().find(|l| l.concurrency == n));
        tile(
            "best level",
            best.map_or("–".into(), |b| format!("{}/s at {} users", number(b.throughput), b.concurrency)),
            "",
        );
        let peak = sw.predicted_peak_throughput.zip(sw.predicted_peak_concurrency);
        tile("USL peak", peak.map_or("not in sight".into(), |(x, n)| format!("{}/s at ~{n:.0} users", number(x))), "");
    } else if v.capacity_rps.is_some()
        || v.breaks_at_rps.is_some()
        || v.result != Outcome::Incomplete && m.stages.iter().any(|s| s.verdict.is_some())
    {
        // In colour only what it found: "did not break" in red read as a failure.
        let found = |x: Option<f64>, cls| if x.is_some() { cls } else { "" };
        // "None held" only when no stage held: a stage may hold after the
        // break (a recovery), which is no capacity but is no "none" either.
        let held = m.stages.iter().any(|s| s.verdict == Some(StageVerdict::Holds));
        let none = if v.breaks_at_rps.is_some() { none_held(held) } else { "none held" };
        tile("capacity", v.capacity_rps.map_or(none.into(), per_second), found(v.capacity_rps, "good"));
        tile("breaks at", v.breaks_at_rps.map_or("did not break".into(), per_second), found(v.breaks_at_rps, "bad"));
    }
    let best = |judged: bool| {
        m.stages
            .iter()
            .filter(|s| !judged || s.verdict == Some(StageVerdict::Holds))
            .filter_map(|s| s.achieved)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
    };
    // A stage's mean, as the stage table: "peak" read as the best second's
    // (a ramp that held showed 600/s beside a chart at 900/s; review 2's tester).
    // Of the stages that held, where they were judged: a failed stage's rate is
    // no achievement (#32: the card showed a failed stage's).
    if m.stages.iter().any(|s| s.verdict.is_some()) {
        tile("best stage that held, achieved", best(true).map_or("none held".into(), per_second), "");
    } else {
        tile("best stage, achieved", rate(best(false).or(m.total.achieved)), "");
    }
    tile("p99, whole run", ms(m.total.latency.and_then(|l| l.p99)), "");
    tile(
        "errors, whole run",
        percent(m.total.error_ratio),
        if m.total.error_ratio.unwrap_or(0.0) > 0.0 { "bad" } else { "" },
    );
    tile("ran", clock(m.elapsed_s), "");
    o.push_str("</div>\n");
    // The why of what failed, tied to its rule; none where the run passed
    // (#32: a PASSED report showed a WHY box). Diagnostics are findings, below.
    if let Some(why) = v.why.as_ref().filter(|_| v.result != Outcome::Passed) {
        let _ = writeln!(o, "<div class=\"why\"><span class=\"k\">Why</span> <b>{}</b></div>", escape(why));
    }
    o.push_str("</section>\n");
}

fn evidence(o: &mut String, evidence: &[Evidence]) {
    if evidence.is_empty() {
        return;
    }
    o.push_str("<ul class=\"evidence\">");
    for e in evidence {
        let _ = write!(o, "<li><code>{}</code> = {} at {}", escape(&e.metric), number(e.value), clock(e.t));
        o.push_str("</li>");
    }
    o.push_str("</ul>");
}

fn slo_matrix(o: &mut String, m: &Model) {
    let staged: Vec<&Stage> = m.stages.iter().filter(|s| !s.slo.is_empty()).collect();
    let mut lines: Vec<&str> = Vec::new();
    for c in staged.iter().flat_map(|s| s.slo.iter()).chain(m.run_slo.iter()) {
        if !lines.contains(&c.slo.as_str()) {
            lines.push(&c.slo);
        }
    }
    if lines.is_empty() {
        return;
    }
    o.push_str(
        "<section>\n<h2>SLO</h2>\n<div class=\"table-wrap\"><table class=\"slo\">\n<thead><tr><th>SLO line</th>",
    );
    for s in &staged {
        let _ = write!(o, "<th>{}</th>", escape(&s.name));
    }
    if !m.run_slo.is_empty() {
        o.push_str("<th>whole run</th>");
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    let cell = |o: &mut String, cells: &[SloCheck], line: &str| match cells.iter().find(|c| c.slo == line) {
        None => o.push_str("<td class=\"na\">–</td>"),
        Some(c) => {
            // Not measured is no failure of the target's (an SLO's watched metric
            // whose source was down makes the stage inconclusive): no red cross.
            let (cls, mark) = match (c.passed, c.value) {
                (true, _) => ("pass", "✓"),
                (false, None) => ("na", "?"),
                (false, Some(_)) => ("fail", "✗"),
            };
            let value = c.value.map_or("not measured".into(), |v| slo_value(line, v));
            let _ = write!(o, "<td class=\"{cls}\"><span class=\"mark\">{mark}</span> {}</td>", escape(&value));
        }
    };
    for line in lines {
        let _ = write!(o, "<tr><th>{}</th>", escape(line));
        for s in &staged {
            cell(o, &s.slo, line);
        }
        if !m.run_slo.is_empty() {
            cell(o, &m.run_slo, line);
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n</section>\n");
}

fn stage_table(o: &mut String, m: &Model) {
    if m.stages.is_empty() {
        return;
    }
    let any_verdict = m.stages.iter().any(|s| s.verdict.is_some());
    o.push_str(
        "<section>\n<h2>Stages</h2>\n<div class=\"table-wrap\"><table class=\"stages\">\n<thead><tr><th>stage</th>\
         <th>target</th><th>achieved</th><th>p50</th><th class=\"opt\">p90</th><th class=\"opt\">p95</th><th>p99</th>\
         <th class=\"opt\">max</th><th title=\"p99 of the successes alone\">p99 ok</th><th>errors</th><th>dropped</th>",
    );
    if any_verdict {
        o.push_str("<th class=\"left\">verdict</th>");
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for s in m.stages.iter().chain(std::iter::once(&m.total)) {
        let is_total = std::ptr::eq(s, &m.total);
        let v = s.verdict.map_or(if s.ran { "" } else { StageVerdict::NotRun.name() }, StageVerdict::name);
        let cls = if is_total { "total".to_string() } else { format!("s-{}", v.replace(' ', "-")) };
        let l = s.latency.unwrap_or_default();
        // Red where the verdict says the rate fell short, by its own rule (what a
        // server that holds answers while the stage runs): the plain 97% of the
        // target painted a first stage red beside "holds" (review 2). A stage no
        // verdict judged (a killed run) is read by the plain rule.
        let short = match s.verdict {
            Some(_) => s.reasons.iter().any(|r| r.starts_with("achieved ")),
            None => s.achieved.zip(s.target).is_some_and(|(a, t)| t > 0.0 && a < 0.97 * t),
        };
        let _ = write!(
            o,
            "<tr class=\"{cls}\"><th>{}</th><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td class=\"opt\">{}</td><td class=\"opt\">{}</td>\
             <td>{}</td><td class=\"opt\">{}</td><td>{}</td><td class=\"{}\" title=\"{} failed\">{}</td><td class=\"{}\">{}</td>",
            escape(&s.name),
            rate(s.target),
            if short { "bad" } else { "" },
            rate(s.achieved),
            ms(l.p50),
            ms(l.p90),
            ms(l.p95),
            ms(l.p99),
            ms(l.max),
            ms(s.latency_ok.and_then(|l| l.p99)),
            if s.error_ratio.unwrap_or(0.0) > 0.0 { "bad" } else { "" },
            count(s.failed),
            percent(s.error_ratio),
            if s.dropped.unwrap_or(0) > 0 { "warn" } else { "" },
            count(s.dropped),
        );
        if any_verdict {
            let _ = write!(o, "<td class=\"verdict-cell\"><span class=\"pill\">{}</span>", escape(v));
            for r in &s.reasons {
                let _ = write!(o, "<div class=\"reason\">{}</div>", escape(r));
            }
            o.push_str("</td>");
        }
        o.push_str("</tr>\n");
    }
    // Results format 1 counted the answered requests only (#11): say what this run's figures are.
    let latency = if m.files.versions.iter().any(|(_, v)| *v < 2) {
        "latency counts from each arrival's intended start to the end of each answered request (this run was \
         recorded before results format 2: timeouts and refused connections are not in it, and it has no p99 ok)"
    } else {
        "latency counts from each arrival's intended start to the end of every request, failures at the time they \
         took (a timeout its timeout); p99 ok counts the successes alone"
    };
    let _ = write!(
        o,
        "</tbody></table></div>\n<p class=\"hint\">Target and achieved are arrivals per second; {latency}. A stage \
         holds at ≥ 97% of its target rate (less the answers of its last median latency, which come after \
         it) with its SLO met.</p>\n</section>\n"
    );
}

/// Per step: the protocol it spoke and its failures by kind, by name (a
/// gRPC status, an HTTP/2 reset, a WebSocket close code's kind): what the
/// stage table sums up as one error ratio. From the summary alone.
fn step_table(o: &mut String, m: &Model) {
    let Some(summary) = &m.files.summary else { return };
    if summary.steps.is_empty() {
        return;
    }
    let protocol_of = |step: &str| -> String {
        let names: Vec<&str> =
            m.protocols.iter().filter(|u| u.steps.iter().any(|s| s == step)).map(|u| u.protocol.as_str()).collect();
        names.join(", ")
    };
    let with_protocol = !m.protocols.is_empty();
    o.push_str(
        "<section>\n<h2>Steps</h2>\n<div class=\"table-wrap\"><table class=\"steps\">\n<thead><tr><th>step</th>",
    );
    if with_protocol {
        o.push_str("<th class=\"left\">protocol</th>");
    }
    o.push_str(
        "<th>answered/s</th><th>p50</th><th>p99</th><th>errors</th><th class=\"left\">failures by kind</th></tr></thead>\n<tbody>\n",
    );
    for f in &summary.steps {
        let l = Percentiles::from_summary(&f.latency_ms).unwrap_or_default();
        let _ = write!(o, "<tr><th>{}</th>", escape(&f.name));
        if with_protocol {
            let _ = write!(o, "<td class=\"left\">{}</td>", escape(&protocol_of(&f.name)));
        }
        let mut kinds: Vec<(&String, &u64)> = f.failures.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{} {}", k, count(Some(**n)))).collect();
        let _ = writeln!(
            o,
            "<td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"left kinds\">{}</td></tr>",
            rate(Some(f.achieved_rate)),
            ms(l.p50),
            ms(l.p99),
            if f.error_ratio > 0.0 { "bad" } else { "" },
            percent(Some(f.error_ratio)),
            escape(&kinds.join(", "))
        );
    }
    o.push_str("</tbody></table></div>\n</section>\n");
}

/// Per step, the histograms a summary shows beside latency (a streamed
/// answer's first event, gaps, events, duration: `stats!`'s rows with a
/// summary), one row each; nothing when no step has one.
fn stream_table(o: &mut String, m: &Model) {
    use perfops_core::measure::Unit;
    let Some(summary) = &m.files.summary else { return };
    if summary.steps.iter().all(|f| f.histograms.is_empty()) {
        return;
    }
    o.push_str(
        "<section>\n<h2>Streams</h2>\n<div class=\"table-wrap\"><table class=\"steps streams\">\n<thead><tr><th>step</th>\
         <th class=\"left\">figure</th><th>count</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr></thead>\n<tbody>\n",
    );
    for f in &summary.steps {
        for (h, s) in f.histograms.iter() {
            let v = |x: f64| match h.unit() {
                Unit::Micros => ms(Some(x)),
                Unit::Count => number(x),
            };
            let _ = writeln!(
                o,
                "<tr><th>{}</th><td class=\"left\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&f.name),
                escape(&h.summary_key()),
                count(Some(s.count)),
                v(s.p50),
                v(s.p95),
                v(s.p99),
                v(s.max)
            );
        }
    }
    o.push_str("</tbody></table></div>\n</section>\n");
}

/// What failed, by step and kind, with the first failing exchange of each
/// (#32): its status, the check with expected vs found, and the first bytes
/// of its body (redacted and escaped by the engine, escaped for HTML here);
/// then each group's exchanges as they were, one collapsed `<details>`
/// each (request, response head, body head, timings). From the summary, or
/// from `failures.jsonl` when a killed run left none (the counts are then
/// those of the exchanges kept); nothing when nothing failed.
fn failures(o: &mut String, m: &Model) {
    if m.files.failures.is_empty() {
        return;
    }
    let killed = m.files.summary.is_none();
    let mut groups: Vec<&crate::failures::FailureGroup> = m.files.failures.iter().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    o.push_str(
        "<section>\n<h2>Failures</h2>\n<p class=\"hint\">The first failing exchange of each step and kind; \
         up to three of each, as they were, open below (and in failures.jsonl).</p>\n\
         <div class=\"table-wrap\"><table class=\"failures\">\n<thead><tr><th>step</th><th class=\"left\">kind</th>\
         <th>count</th><th>status</th><th class=\"left\">check: expected, found</th><th class=\"left\">body</th>\
         <th>at</th></tr></thead>\n<tbody>\n",
    );
    for g in &groups {
        let first = g.samples.first();
        let _ = writeln!(
            o,
            "<tr><th>{}</th><td class=\"left\">{}</td><td>{}</td><td>{}</td><td class=\"left\">{}</td>\
             <td class=\"left body\"><code>{}</code></td><td>{}</td></tr>",
            escape(&g.step),
            escape(&g.kind),
            count(Some(g.count)),
            first.and_then(|s| s.status).map_or("-".to_string(), |s| s.to_string()),
            escape(first.and_then(|s| s.check.as_deref()).unwrap_or("-")),
            escape(first.and_then(|s| s.body.as_deref()).unwrap_or("")),
            first.map_or("-".to_string(), |s| format!("t={:.1}s", s.t)),
        );
    }
    o.push_str("</tbody></table></div>\n");
    if killed {
        o.push_str(
            "<p class=\"hint\">No summary.json (the run was killed): the failing exchanges failures.jsonl kept; \
             the counts are of those.</p>\n",
        );
    }
    exchanges(o, &groups);
    o.push_str("</section>\n");
}

/// Each group's exchanges as they were, collapsed: the request line and
/// header fields as sent (redacted), the response's status line and header
/// fields, the head of its body and the timings. Every string is text of
/// the page (HTML-escaped), never markup: a body that holds `<script>` shows
/// it.
fn exchanges(o: &mut String, groups: &[&crate::failures::FailureGroup]) {
    if groups.iter().all(|g| g.samples.is_empty()) {
        return;
    }
    o.push_str("<div class=\"exchanges\">\n");
    for g in groups {
        for s in &g.samples {
            let status = s.status.map_or(String::new(), |st| format!(", status {st}"));
            let _ = write!(
                o,
                "<details class=\"exchange\"><summary>{} · {} · t={:.3}s{}</summary><dl class=\"kv\">",
                escape(&g.step),
                escape(&g.kind),
                s.t,
                status
            );
            if let Some(check) = &s.check {
                let _ = write!(o, "<dt>check</dt><dd><code>{}</code></dd>", escape(check));
            }
            if s.request.is_some() || !s.request_headers.is_empty() {
                let mut text = s.request.clone().unwrap_or_default();
                for (name, value) in &s.request_headers {
                    text.push_str(&format!("\n{name}: {value}"));
                }
                let _ = write!(o, "<dt>request</dt><dd><pre class=\"request\">{}</pre></dd>", escape(&text));
            }
            if s.status.is_some() || !s.response_headers.is_empty() {
                let mut text = s.status.map_or(String::new(), |st| format!("status {st}"));
                for (name, value) in &s.response_headers {
                    text.push_str(&format!("\n{name}: {value}"));
                }
                let _ = write!(o, "<dt>response</dt><dd><pre class=\"response\">{}</pre></dd>", escape(&text));
            }
            if let Some(body) = &s.body {
                let _ = write!(o, "<dt>body</dt><dd><pre class=\"body\">{}</pre></dd>", escape(body));
            }
            if let Some(t) = &s.timings {
                let sent = t.sent.map_or("never sent".to_string(), |x| format!("sent t={x:.3}s"));
                let service = t.service_ms.map_or(String::new(), |x| format!(", service {x:.1} ms"));
                let _ = write!(
                    o,
                    "<dt>timings</dt><dd class=\"timings\">due t={:.3}s, {sent}, latency {:.1} ms{service}</dd>",
                    t.due, t.latency_ms
                );
            }
            o.push_str("</dl></details>\n");
        }
    }
    o.push_str("</div>\n");
}

/// `perfops sweep`: its levels, what the fit says, and throughput and
/// latency against the users. From the summary alone.
fn sweep(o: &mut String, m: &Model, data: &Value) {
    let Some(sw) = m.files.summary.as_ref().and_then(|s| s.sweep.as_ref()) else { return };
    // An LLM step's tokens per second, where the levels measured them.
    let tokens = sw.has_tokens();
    o.push_str(
        "<section>\n<h2>Concurrency sweep</h2>\n<div class=\"table-wrap\"><table class=\"sweep\">\n<thead><tr>\
         <th>users</th><th>throughput</th><th>x vs first</th><th title=\"p50 of the answered requests\">p50 ok</th>\
         <th>p99</th><th>p50 x first</th><th>errors</th>",
    );
    if tokens {
        o.push_str("<th>tokens in/s</th><th>tokens out/s</th>");
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for l in &sw.levels {
        let best = sw.best_level == Some(l.concurrency);
        let _ = write!(
            o,
            "<tr{}><th>{}</th><td>{}</td><td>{}×</td><td>{}</td><td>{}</td><td>{}×</td><td class=\"{}\">{}</td>",
            if best { " class=\"best\" title=\"the best level measured\"" } else { "" },
            l.concurrency,
            rate(Some(l.throughput)),
            number(l.throughput_ratio),
            ms(Some(l.p50_ms)),
            ms(Some(l.p99_ms)),
            number(l.p50_ratio),
            if l.error_ratio > 0.0 { "bad" } else { "" },
            percent(Some(l.error_ratio)),
        );
        if tokens {
            let _ = write!(o, "<td>{}</td><td>{}</td>", rate(l.tokens_in_per_s), rate(l.tokens_out_per_s));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n<ul class=\"findings\">");
    for line in sw.findings() {
        let _ = write!(o, "<li>{}</li>", escape(&line));
    }
    o.push_str("</ul>\n<div class=\"pair\">\n");
    chart_list_frames(o, data, "xy_charts", "xy");
    o.push_str("</div>\n</section>\n");
}

fn diagnostics(o: &mut String, m: &Model) {
    if m.diagnostics.is_empty() && m.warnings.is_empty() {
        return;
    }
    // Findings: what was seen, each with its evidence; the why above is the
    // failed rule's, and names one of these only where it caused the failure.
    o.push_str("<section>\n<h2>Findings</h2>\n");
    for d in &m.diagnostics {
        let _ = write!(
            o,
            "<div class=\"diag\"><div class=\"diag-head\"><span class=\"kind\">{}</span> <b>{}</b>",
            escape(&d.kind),
            escape(&d.title)
        );
        if let Some(s) = &d.stage {
            let _ = write!(o, " <span class=\"at\">at {}</span>", escape(s));
        }
        o.push_str("</div>");
        if !d.detail.is_empty() {
            let _ = write!(o, "<p>{}</p>", escape(&d.detail));
        }
        evidence(o, &d.evidence);
        o.push_str("</div>\n");
    }
    for w in &m.warnings {
        let _ = writeln!(o, "<div class=\"diag warning\"><span class=\"kind\">warning</span> {}</div>", escape(w));
    }
    o.push_str("</section>\n");
}

fn chart_frames(o: &mut String, data: &Value) {
    o.push_str(
        "<section>\n<h2>Over time</h2>\n<p class=\"hint\">One time axis for every chart: hover one to read all at that \
         second, drag to zoom, double-click to zoom out. Dashed vertical lines are stage boundaries; a stage that failed \
         is tinted red.",
    );
    if data["restarts"].as_array().is_some_and(|r| !r.is_empty()) {
        o.push_str(" Solid red lines are liveness-probe restarts: where Kubernetes would have restarted the target.");
    }
    o.push_str("</p>\n");
    chart_list_frames(o, data, "time_charts", "chart");
    if !data["watch"].is_null() {
        frame(
            o,
            "watch",
            "Watched metrics",
            "Sampled from the target and the generator while the run went; pick one by source.",
            "<label class=\"pick\">metric <select id=\"watch-select\"></select></label>",
        );
    }
    o.push_str("</section>\n");
    if !data["hockey"].is_null() || !data["spectrum"].is_null() {
        o.push_str("<section>\n<h2>Where it bends</h2>\n<div class=\"pair\">\n");
        if !data["hockey"].is_null() {
            frame(
                o,
                "hockey",
                "Latency vs achieved throughput (log scale)",
                "One point per stage (p50, p90, p99); grey dots are single seconds (p99). Past capacity, throughput stops growing while latency climbs: the hockey stick.",
                "",
            );
        }
        if !data["spectrum"].is_null() {
            frame(
                o,
                "spectrum",
                "Latency by percentile (log scales)",
                "From latency.hlog, whole run and per stage: a stage's curve holds the requests that ended in its seconds (a backlog answered after a spike lands in the stage after it; the stage table counts each request in the stage it was due in). The x axis stretches the tail: 90%, 99%, 99.9% are evenly spaced.",
                "",
            );
        }
        o.push_str("</div>\n</section>\n");
    }
}

fn details(o: &mut String, m: &Model) {
    o.push_str("<section class=\"details\">\n");
    if let Some(s) = &m.files.scenario {
        let _ = writeln!(
            o,
            "<details><summary>Scenario (<code>scenario.yaml</code>, secrets redacted)</summary><pre>{}</pre></details>",
            // Redacted again (it changes nothing already redacted): a directory written by an older
            // perfops, or by hand, may hold what this one redacts (#31).
            escape(&perfops_core::scenario::redact::redact(s))
        );
    }
    let mut rows: Vec<(String, String)> = vec![("results".into(), m.files.dir_name.clone())];
    if let Some(meta) = &m.files.meta {
        // An empty command is one the file did not have.
        if !meta.command.is_empty() {
            rows.push(("command".into(), perfops_core::scenario::redact::redact_command(&meta.command).join(" ")));
        }
        for (key, v) in [("host", &meta.host), ("shard", &meta.shard)] {
            if let Some(v) = v {
                rows.push((key.into(), v.clone()));
            }
        }
    }
    if let Some(g) = m.files.summary.as_ref().map(|s| &s.generator) {
        rows.push((
            "generator".into(),
            format!(
                "{} worker(s) on {} core(s), {} CPU-s, {} MiB peak",
                g.workers,
                g.cores,
                number(g.cpu_user_s + g.cpu_sys_s),
                number(g.max_rss_kib as f64 / 1024.0)
            ),
        ));
        if let Some(naps) = g.naps_line() {
            rows.push(("wake-ups".into(), naps));
        }
    }
    if let Some(s) = &m.files.summary
        && let Some(line) = s.scripts_line()
    {
        rows.push(("scripts".into(), line));
    }
    for n in &m.files.notes {
        rows.push(("note".into(), n.clone()));
    }
    o.push_str("<details><summary>Run details</summary><dl class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    o.push_str("</dl></details>\n</section>\n");
}

/// A frame for each chart listed under `key` of the chart data.
pub(crate) fn chart_list_frames(o: &mut String, data: &Value, key: &str, default_id: &str) {
    for c in data[key].as_array().map_or(&[][..], Vec::as_slice) {
        let text = |k: &str| c[k].as_str().unwrap_or("");
        frame(o, c["id"].as_str().unwrap_or(default_id), text("title"), text("note"), "");
    }
}
