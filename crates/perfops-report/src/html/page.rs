//! The page itself: the text parts of the report as HTML (the verdict first,
//! then the SLO by stage, the stage table, the diagnostics) and the frames
//! the charts are drawn into, with uPlot, the page's script and its style
//! inlined so the file opens anywhere, offline.
//!
//! Every string that comes from a results file goes through [`escape`]; the
//! chart data goes in once, as JSON in a `<script type="application/json">`
//! with `<`, `>` and `&` escaped so no value can end that element.

use std::fmt::Write;

use serde_json::Value;

use super::charts;
use super::model::{Model, SloCell, Stage};
use crate::run::slo_value;

const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
const REPORT_JS: &str = include_str!("report.js");
const REPORT_CSS: &str = include_str!("report.css");

/// `s` safe as HTML text or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON that can sit inside a `<script>` element: `</script>` and `<!--`
/// in a string would end or confuse it, so `<`, `>` and `&` become `\u003c`
/// and so on (the same string to a JSON parser).
pub fn script_json(v: &Value) -> String {
    let json = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// A number for people: no more decimals than it needs.
pub(crate) fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Milliseconds, as `0.42 ms`, `812 ms`, `1.52 s`; `–` when not available.
pub(crate) fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v < 10.0 => format!("{v:.2} ms"),
        Some(v) if v < 1000.0 => format!("{v:.0} ms"),
        Some(v) => format!("{:.2} s", v / 1000.0),
    }
}

pub(crate) fn rate(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{}/s", number(v)))
}

pub(crate) fn percent(ratio: Option<f64>) -> String {
    match ratio {
        None => "–".into(),
        Some(0.0) => "0%".into(),
        Some(r) if r < 0.0001 => "<0.01%".into(),
        Some(r) => format!("{}%", number(r * 100.0)),
    }
}

fn count(v: Option<u64>) -> String {
    v.map_or("–".into(), |n| n.to_string())
}

/// `m:ss` (or `h:mm:ss`) from the run's start.
pub(crate) fn clock(t: f64) -> String {
    let s = t.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// The whole HTML document.
pub(crate) fn page(m: &Model, data: &Value) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let result = m.verdict.result.as_str();
    open(&mut o, &format!("{} · {} · perfops report", m.name, badge(result)), data);
    header(&mut o, m);
    banners(&mut o, m);
    verdict(&mut o, m);
    slo_matrix(&mut o, m);
    stage_table(&mut o, m);
    diagnostics(&mut o, m);
    chart_frames(&mut o, data);
    details(&mut o, m);
    close(&mut o, &m.files.dir_name, data);
    o
}

/// The document up to `<main>`: title, the inlined styles, and the error
/// capture; `<body>` says how many charts `data` should draw.
pub(crate) fn open(o: &mut String, title: &str, data: &Value) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"perfops {version}\">\n\
         <title>{title}</title>\n<style>{UPLOT_CSS}</style>\n<style>{REPORT_CSS}</style>\n</head>\n\
         <body data-charts-expected=\"{expected}\" data-charts-drawn=\"0\" data-errors=\"0\">\n{CAPTURE}\n<main>\n",
        version = env!("CARGO_PKG_VERSION"),
        title = escape(title),
        expected = charts::expected_charts(data),
    );
}

/// From `</main>` to the end: the footer naming `source`, the chart data,
/// uPlot and the page's script.
pub(crate) fn close(o: &mut String, source: &str, data: &Value) {
    let _ = write!(
        o,
        "</main>\n<footer>Made by perfops {} from <code>{}</code>. One self-contained file: it opens offline and \
         loads nothing. Charts by <a href=\"https://github.com/leeoniya/uPlot\">uPlot</a> (MIT licence, © Leon Sorokin).</footer>\n\
         <script type=\"application/json\" id=\"perfops-data\">{}</script>\n<script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(source),
        script_json(data),
    );
}

/// First in the body, before any other script: every error and
/// `console.error` is counted on `<body data-errors>` (and the messages kept
/// in `data-error-messages`), so a headless browser's DOM dump shows them.
const CAPTURE: &str = r#"<script>
(function () {
  var errors = [];
  function note(msg) {
    errors.push(String(msg).slice(0, 300));
    document.body.setAttribute("data-errors", String(errors.length));
    document.body.setAttribute("data-error-messages", errors.join(" | "));
  }
  window.addEventListener("error", function (e) { note(e.message || "error"); });
  window.addEventListener("unhandledrejection", function (e) { note("unhandled rejection: " + e.reason); });
  var orig = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, " ")); return orig.apply(console, arguments); };
})();
</script>"#;

pub(crate) fn badge(result: &str) -> &'static str {
    match result {
        "passed" => "PASSED",
        "failed" => "FAILED",
        "inconclusive" => "INCONCLUSIVE",
        "incomplete" => "INCOMPLETE",
        "none" => "NO SLO",
        _ => "UNKNOWN",
    }
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
    if let Some(model) = &m.model {
        parts.push(format!("{} model", escape(model)));
    }
    if let Some(s) = &m.started_at {
        parts.push(format!("started {}", escape(&s.replace('T', " ").replace('Z', " UTC"))));
    }
    parts.push(format!("ran {}", clock(m.elapsed_s)));
    if let Some(v) = super::model::text(&m.files.meta, "perfops_version") {
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
        cls = escape(&v.result),
        badge = badge(&v.result),
        headline = escape(&v.headline),
    );
    let mut tile = |label: &str, value: String, cls: &str| {
        let _ =
            write!(o, "<div class=\"tile {cls}\"><div class=\"k\">{label}</div><div class=\"v\">{value}</div></div>");
    };
    if v.capacity_rps.is_some()
        || v.breaks_at_rps.is_some()
        || v.result != "incomplete" && m.stages.iter().any(|s| s.verdict.is_some())
    {
        tile("capacity", v.capacity_rps.map_or("none held".into(), |c| format!("{}/s", number(c))), "good");
        tile("breaks at", v.breaks_at_rps.map_or("did not break".into(), |b| format!("{}/s", number(b))), "bad");
    }
    let peak =
        m.stages.iter().filter_map(|s| s.achieved).fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    tile("peak achieved", rate(peak.or(m.total.achieved)), "");
    tile("p99, whole run", ms(m.total.latency.and_then(|l| l.p99)), "");
    tile(
        "errors, whole run",
        percent(m.total.error_ratio),
        if m.total.error_ratio.unwrap_or(0.0) > 0.0 { "bad" } else { "" },
    );
    tile("ran", clock(m.elapsed_s), "");
    o.push_str("</div>\n");
    if let Some(d) = m.diagnostics.first() {
        let _ = write!(o, "<div class=\"why\"><span class=\"k\">Why</span> <b>{}</b>", escape(&d.title));
        if !d.detail.is_empty() {
            let _ = write!(o, " — {}", escape(&d.detail));
        }
        evidence(o, &d.evidence);
        o.push_str("</div>\n");
    }
    o.push_str("</section>\n");
}

fn evidence(o: &mut String, evidence: &[(String, Option<f64>, Option<f64>)]) {
    if evidence.is_empty() {
        return;
    }
    o.push_str("<ul class=\"evidence\">");
    for (metric, value, t) in evidence {
        let _ = write!(o, "<li><code>{}</code>", escape(metric));
        if let Some(v) = value {
            let _ = write!(o, " = {}", number(*v));
        }
        if let Some(t) = t {
            let _ = write!(o, " at {}", clock(*t));
        }
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
    let cell = |o: &mut String, cells: &[SloCell], line: &str| match cells.iter().find(|c| c.slo == line) {
        None => o.push_str("<td class=\"na\">–</td>"),
        Some(c) => {
            let (cls, mark) = match c.passed {
                Some(true) => ("pass", "✓"),
                Some(false) => ("fail", "✗"),
                None => ("na", "?"),
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
         <th class=\"opt\">max</th><th>errors</th><th>dropped</th>",
    );
    if any_verdict {
        o.push_str("<th class=\"left\">verdict</th>");
    }
    o.push_str("</tr></thead>\n<tbody>\n");
    for s in m.stages.iter().chain(std::iter::once(&m.total)) {
        let is_total = std::ptr::eq(s, &m.total);
        let v = s.verdict.as_deref().unwrap_or(if s.ran { "" } else { "not run" });
        let cls = if is_total { "total".to_string() } else { format!("s-{}", v.replace(' ', "-")) };
        let l = s.latency.unwrap_or_default();
        let short = s.achieved.zip(s.target).is_some_and(|(a, t)| t > 0.0 && a < 0.97 * t);
        let _ = write!(
            o,
            "<tr class=\"{cls}\"><th>{}</th><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td class=\"opt\">{}</td><td class=\"opt\">{}</td>\
             <td>{}</td><td class=\"opt\">{}</td><td class=\"{}\" title=\"{} failed\">{}</td><td class=\"{}\">{}</td>",
            escape(&s.name),
            rate(s.target),
            if short { "bad" } else { "" },
            rate(s.achieved),
            ms(l.p50),
            ms(l.p90),
            ms(l.p95),
            ms(l.p99),
            ms(l.max),
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
    o.push_str("</tbody></table></div>\n<p class=\"hint\">Target and achieved are arrivals per second; latency counts from \
                each arrival's intended start. A stage holds at ≥ 97% of its target rate with its SLO met.</p>\n</section>\n");
}

fn diagnostics(o: &mut String, m: &Model) {
    if m.diagnostics.is_empty() && m.warnings.is_empty() {
        return;
    }
    o.push_str("<section>\n<h2>Diagnostics</h2>\n");
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

pub(crate) fn frame(o: &mut String, id: &str, title: &str, note: &str, extra: &str) {
    let _ = write!(o, "<figure class=\"chart-box\" id=\"box-{id}\"><figcaption><h3>{}</h3>{extra}", escape(title));
    if !note.is_empty() {
        let _ = write!(o, "<p class=\"note\">{}</p>", escape(note));
    }
    let _ = writeln!(o, "</figcaption><div class=\"chart\" data-chart=\"{id}\"></div></figure>");
}

fn chart_frames(o: &mut String, data: &Value) {
    o.push_str(
        "<section>\n<h2>Over time</h2>\n<p class=\"hint\">One time axis for every chart: hover one to read all at that \
         second, drag to zoom, double-click to zoom out. Dashed vertical lines are stage boundaries; a stage that failed \
         is tinted red.",
    );
    if super::model::list(data, "restarts").iter().any(|_| true) {
        o.push_str(" Solid red lines are liveness-probe restarts: where Kubernetes would have restarted the target.");
    }
    o.push_str("</p>\n");
    for c in super::model::list(data, "time_charts") {
        let id = super::model::text(c, "id").unwrap_or("chart");
        frame(o, id, super::model::text(c, "title").unwrap_or(""), super::model::text(c, "note").unwrap_or(""), "");
    }
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
                "From latency.hlog, whole run and per stage. The x axis stretches the tail: 90%, 99%, 99.9% are evenly spaced.",
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
            escape(s)
        );
    }
    let meta = &m.files.meta;
    let mut rows: Vec<(String, String)> = vec![("results".into(), m.files.dir_name.clone())];
    if let Some(cmd) = meta.get("command").and_then(Value::as_array) {
        let words: Vec<&str> = cmd.iter().filter_map(Value::as_str).collect();
        rows.push(("command".into(), words.join(" ")));
    }
    for key in ["host", "shard"] {
        if let Some(v) = super::model::text(meta, key) {
            rows.push((key.into(), v.into()));
        }
    }
    if let Some(g) = m.files.summary.as_ref().and_then(|s| s.get("generator")) {
        let cpu = super::model::num(g, "cpu_user_s").unwrap_or(0.0) + super::model::num(g, "cpu_sys_s").unwrap_or(0.0);
        rows.push((
            "generator".into(),
            format!(
                "{} worker(s) on {} core(s), {} CPU-s, {} MiB peak",
                super::model::num(g, "workers").unwrap_or(0.0),
                super::model::num(g, "cores").unwrap_or(0.0),
                number(cpu),
                number(super::model::num(g, "max_rss_kib").unwrap_or(0.0) / 1024.0)
            ),
        ));
        let naps = serde_json::from_value::<crate::quick::GeneratorUse>(g.clone()).ok().and_then(|g| g.naps_line());
        if let Some(naps) = naps {
            rows.push(("wake-ups".into(), naps));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let cases = [
            ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
            ("a & b", "a &amp; b"),
            (r#"x="1" y='2'"#, "x=&quot;1&quot; y=&#39;2&#39;"),
            ("plain é", "plain é"),
        ];
        for (input, want) in cases {
            assert_eq!(escape(input), want);
        }
        let v = serde_json::json!({"name": "</script><!-- & -->"});
        let s = script_json(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'), "{s}");
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v, "the same JSON to a parser");
    }

    #[test]
    fn figures_for_people() {
        let cases = [
            (ms(Some(0.421)), "0.42 ms"),
            (ms(Some(812.34)), "812 ms"),
            (ms(Some(1523.0)), "1.52 s"),
            (ms(None), "–"),
            (rate(Some(205.345)), "205/s"),
            (rate(Some(12.34)), "12.3/s"),
            (percent(Some(0.032)), "3.20%"),
            (percent(Some(0.0)), "0%"),
            (percent(Some(0.000_01)), "<0.01%"),
            (clock(63.4), "1:03"),
            (clock(3725.0), "1:02:05"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
