//! The comparison as one self-contained HTML page, made with the report's
//! machinery: its document shell, style and script (`html::page`,
//! `report.js`), its chart data builders and LTTB (`html::charts`).
//!
//! Charts overlay the runs on one time axis, each relative to its own start
//! (a run's second `t` is plotted at `t`): target and achieved rate, latency
//! p99 and p50 (log), failures per second; then each run's latency against
//! throughput per stage (p95 solid, p99 dashed), the hockey sticks side by
//! side. Colours are per run, the same on every chart and in the tables.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use perfops_core::analysis::verdict::StageVerdict;
use serde_json::{Value, json};

use super::{Comparison, Delta, Row};
use crate::format::{escape, ms, number, percent, rate, utc};
use crate::html::charts::{DATA_VERSION, Series, latency, percentile, secs, sig, time_chart};
use crate::html::model::Model;
use crate::html::page::chart_list_frames;
use crate::html::shell::{close, open};
use crate::run::SeriesLine;

/// One colour per run, in order; distinct on white and for the colour-blind
/// as far as eight colours go (blue and orange first).
const RUN_COLORS: [&str; 8] = ["#2563eb", "#ea580c", "#16a34a", "#7c3aed", "#db2777", "#0891b2", "#ca8a04", "#4b5563"];

fn run_color(i: usize) -> &'static str {
    RUN_COLORS[i % RUN_COLORS.len()]
}

/// The page.
pub(crate) fn page(models: &[Model], c: &Comparison) -> String {
    let data = data(models, c);
    let titles: Vec<String> = c.runs.iter().map(super::RunInfo::title).collect();
    let mut o = String::with_capacity(256 * 1024);
    open(&mut o, &format!("{} · perfops compare", titles.join(" vs ")), &data);
    let _ = writeln!(
        o,
        "<header class=\"top\">\n<p class=\"brand\">perfops compare</p>\n<h1>{}</h1>\n<p class=\"meta\">{} is the \
         baseline: every delta is against it.</p>\n</header>",
        escape(&titles.join(" vs ")),
        escape(&titles[0])
    );
    runs_table(&mut o, c);
    headlines(&mut o, c);
    stages_table(&mut o, c);
    charts(&mut o, &data);
    let dirs: Vec<&str> = c.runs.iter().map(|r| r.dir.as_str()).collect();
    close(&mut o, &dirs.join(", "), &data);
    o
}

fn swatch(i: usize) -> String {
    format!("<span class=\"swatch\" style=\"background:{}\"></span>", run_color(i))
}

fn runs_table(o: &mut String, c: &Comparison) {
    o.push_str(
        "<section>\n<h2>Runs</h2>\n<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>run</th><th class=\"left\">result</th>\
         <th>capacity</th><th>breaks at</th><th class=\"left\">target</th><th class=\"left\">protocol</th>\
         <th class=\"left\">started</th><th class=\"left\">results</th></tr></thead>\n<tbody>\n",
    );
    for (i, r) in c.runs.iter().enumerate() {
        let _ = writeln!(
            o,
            "<tr><th>{}{}</th><td class=\"left\"><span class=\"pill\">{}</span></td><td>{}</td><td>{}</td>\
             <td class=\"left\">{}</td><td class=\"left\">{}</td><td class=\"left\">{}</td><td class=\"left\"><code>{}</code></td></tr>",
            swatch(i),
            escape(&r.title()),
            r.result.badge(),
            rate(r.capacity_rps),
            match (r.breaks_at_rps, r.capacity_rps) {
                (Some(b), _) => match &r.why {
                    Some(why) => format!("{}<div class=\"hint why\">why: {}</div>", rate(Some(b)), escape(why)),
                    None => rate(Some(b)),
                },
                (None, Some(_)) => "did not break".into(),
                (None, None) => "–".into(),
            },
            escape(r.target.as_deref().unwrap_or("–")),
            escape(r.protocol.as_deref().unwrap_or("–")),
            escape(&r.started_at.as_deref().map_or("–".into(), utc)),
            escape(&r.dir),
        );
    }
    o.push_str("</tbody></table></div>\n</section>\n");
}

fn headlines(o: &mut String, c: &Comparison) {
    o.push_str("<section class=\"verdict\">\n<h2>What changed</h2>\n");
    for s in c.protocols.iter().chain(&c.capacity).chain(&c.equal_p95.statements) {
        let _ = writeln!(o, "<p class=\"headline\">{}</p>", escape(&s.text));
    }
    if let Some(l) = c.equal_p95.p95_ms {
        let _ = writeln!(
            o,
            "<p class=\"hint\">Equal p95: L = {} ({}). Definition: {}. Capacity is each run's highest stage that held.</p>",
            escape(&ms(Some(l))),
            escape(&c.equal_p95.source),
            escape(c.equal_p95.definition)
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "<div class=\"banner warn\">{}</div>", escape(n));
    }
    o.push_str("</section>\n");
}

/// A delta under a value: `+0.1 (+0.1%)`, red when worse for the target's
/// users (less throughput, more latency or errors).
fn delta_html(d: Option<Delta>, fmt: impl Fn(f64) -> String, more_is_better: bool) -> String {
    let Some(d) = d else { return String::new() };
    let worse = if more_is_better { d.abs < 0.0 } else { d.abs > 0.0 };
    let cls = if d.abs == 0.0 {
        ""
    } else if worse {
        " worse"
    } else {
        " better"
    };
    let sign = if d.abs < 0.0 { "-" } else { "+" };
    let pct = d.pct.map_or(String::new(), |p| format!(" ({p:+.1}%)"));
    format!("<span class=\"delta{cls}\">{sign}{}{pct}</span>", escape(&fmt(d.abs.abs())))
}

fn stage_rows(o: &mut String, r: &Row, titles: &[String], total: bool) {
    let n = r.cells.len();
    for (i, cell) in r.cells.iter().enumerate() {
        let first = i == 0;
        let cls = if total { " class=\"total\"" } else { "" };
        let _ = write!(o, "<tr{cls}>");
        if first {
            let _ = write!(o, "<th rowspan=\"{n}\">{}</th>", escape(&r.name));
        }
        let Some(c) = cell.as_ref() else {
            let _ = writeln!(
                o,
                "<td class=\"left\">{}{}</td><td class=\"na left\" colspan=\"7\">no such stage</td></tr>",
                swatch(i),
                escape(&titles[i])
            );
            continue;
        };
        let own = if c.stage != r.name {
            format!(" <span class=\"at\">({})</span>", escape(&c.stage))
        } else {
            String::new()
        };
        let d = c.delta;
        let v = c.verdict.map_or("", StageVerdict::name);
        let _ = writeln!(
            o,
            "<td class=\"left\">{}{}{own}</td><td>{}</td><td>{}{}</td><td>{}{}</td><td>{}{}</td><td>{}{}</td>\
             <td>{}{}</td><td>{}{}</td><td class=\"left s-{}\"><span class=\"pill\">{}</span></td></tr>",
            swatch(i),
            escape(&titles[i]),
            rate(c.target_rate),
            rate(c.achieved_rate),
            delta_html(d.and_then(|d| d.achieved_rate), |v| format!("{}/s", number(v)), true),
            ms(c.p50_ms),
            delta_html(d.and_then(|d| d.p50_ms), |v| ms(Some(v)), false),
            ms(c.p95_ms),
            delta_html(d.and_then(|d| d.p95_ms), |v| ms(Some(v)), false),
            ms(c.p99_ms),
            delta_html(d.and_then(|d| d.p99_ms), |v| ms(Some(v)), false),
            ms(c.p99_ok_ms),
            delta_html(d.and_then(|d| d.p99_ok_ms), |v| ms(Some(v)), false),
            percent(c.error_ratio),
            delta_html(
                d.and_then(|d| d.error_ratio).map(|e| Delta { pct: None, ..e }),
                |v| format!("{} pp", number(v * 100.0)),
                false
            ),
            escape(&v.replace(' ', "-")),
            escape(v),
        );
    }
}

fn stages_table(o: &mut String, c: &Comparison) {
    let titles: Vec<String> = c.runs.iter().map(super::RunInfo::title).collect();
    o.push_str(
        "<section>\n<h2>Stages side by side</h2>\n<div class=\"table-wrap\"><table class=\"stages compare\">\n<thead><tr>\
         <th>stage</th><th class=\"left\">run</th><th>target</th><th>achieved</th><th>p50</th><th>p95</th><th>p99</th>\
         <th title=\"p99 of the successes alone\">p99 ok</th><th>errors</th><th class=\"left\">verdict</th></tr></thead>\n<tbody>\n",
    );
    for r in &c.stages {
        stage_rows(o, r, &titles, false);
    }
    stage_rows(o, &c.total, &titles, true);
    let _ = writeln!(
        o,
        "</tbody></table></div>\n<p class=\"hint\">Stages are paired by name, else by target rate within {:.0}%. \
         Under each value, its difference from {} and that difference in % of {}'s value (errors: in percentage points); \
         red is worse for the users of the target. Latency counts every request that ended, failures at the time \
         they took; p99 ok, the successes alone.</p>\n</section>",
        super::RATE_TOLERANCE * 100.0,
        escape(&titles[0]),
        escape(&c.runs[0].label)
    );
}

fn charts(o: &mut String, data: &Value) {
    o.push_str(
        "<section>\n<h2>Over time</h2>\n<p class=\"hint\">Each run from its own start: the same second of each run's \
         schedule at the same x. Hover to read every run at that second, drag to zoom, double-click to zoom out.</p>\n",
    );
    chart_list_frames(o, data, "time_charts", "chart");
    o.push_str("</section>\n<section>\n<h2>Where it bends</h2>\n");
    chart_list_frames(o, data, "xy_charts", "xy");
    o.push_str("</section>\n");
}

/// The charts' data: the report's document with overlaid series.
fn data(models: &[Model], c: &Comparison) -> Value {
    // One x for all: whole seconds from each run's start (series lines are
    // seconds `t` = 0, 1, 2, ...), so run k's value at x is its second x.
    let by_t: Vec<BTreeMap<u32, &SeriesLine>> =
        models.iter().map(|m| m.files.series.iter().map(|l| (l.t, l)).collect()).collect();
    // The seconds some run recorded, and the second after each one that ends
    // a stretch (a null there breaks the line at a gap), not every second up
    // to the last: a damaged line's `t: 4294967295` made that 4 billion points
    // and tens of GiB (#12).
    let recorded: BTreeSet<u32> = by_t.iter().flat_map(|m| m.keys().copied()).collect();
    let last = recorded.last().copied();
    let gaps: Vec<u32> =
        recorded.iter().filter_map(|t| t.checked_add(1)).filter(|n| !recorded.contains(n) && Some(*n) < last).collect();
    let x: Vec<f64> = recorded.into_iter().chain(gaps).collect::<BTreeSet<u32>>().into_iter().map(f64::from).collect();
    let duration = models.iter().map(|m| m.elapsed_s).chain(x.last().map(|t| t + 1.0)).fold(1.0, f64::max);
    let col = |k: usize, f: &dyn Fn(&SeriesLine) -> Option<f64>| -> Vec<Option<f64>> {
        x.iter().map(|t| by_t[k].get(&(*t as u32)).and_then(|l| f(l))).collect()
    };
    let titles: Vec<String> = c.runs.iter().map(super::RunInfo::title).collect();
    let (mut rates, mut lat, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for (k, title) in titles.iter().enumerate() {
        let color = run_color(k);
        rates.push(Series::new(
            &format!("{title} target"),
            col(k, &|l| l.target_rate),
            json!({"color": color, "dash": true, "width": 1, "stepped": true}),
        ));
        rates.push(Series::new(
            &format!("{title} achieved"),
            col(k, &|l| Some(l.achieved_rate)),
            json!({"color": color, "width": 2, "stepped": true}),
        ));
        let p99 = col(k, &|l| percentile(l, latency, |h| h.p99));
        lat.push(Series::new(&format!("{title} p99"), p99, json!({"color": color, "width": 2})));
        lat.push(Series::new(
            &format!("{title} p50"),
            col(k, &|l| percentile(l, latency, |h| h.p50)),
            json!({"color": color, "width": 1, "dash": true}),
        ));
        failed.push(Series::new(
            &format!("{title} failed/s"),
            col(k, &|l| Some(l.per_s(l.failed))),
            json!({"color": color, "width": 2, "stepped": true}),
        ));
    }
    let time_charts = if x.is_empty() {
        Vec::new()
    } else {
        vec![
            time_chart("rate", "Arrival rate: target (dashed) and achieved", "/s", false, &x, rates, json!({})),
            time_chart(
                "latency",
                "Latency per second (log scale): p99 solid, p50 dashed",
                "ms",
                true,
                &x,
                lat,
                json!({"note": "Latency from each arrival's intended start."}),
            ),
            time_chart("errors", "Failed requests per second", "/s", false, &x, failed, json!({})),
        ]
    };
    json!({
        "format": "perfops.compare-data",
        "version": DATA_VERSION,
        "duration_s": secs(duration),
        "stages": common_stages(models, duration),
        "restarts": [],
        "time_charts": time_charts,
        "xy_charts": hockey(models, &titles),
        "watch": null, "hockey": null, "spectrum": null,
    })
}

/// The baseline's stage boundaries, when every run followed the same plan
/// (same stages, boundaries within half a second); none otherwise, since
/// the marks would then be true of one run only.
fn common_stages(models: &[Model], duration: f64) -> Vec<Value> {
    let base = &models[0].stages;
    let same = models.iter().all(|m| {
        m.stages.len() == base.len()
            && m.stages
                .iter()
                .zip(base)
                .all(|(a, b)| (a.start_s - b.start_s).abs() < 0.5 && (a.end_s - b.end_s).abs() < 0.5)
    });
    if !same {
        return Vec::new();
    }
    base.iter()
        .filter(|s| s.start_s < duration)
        .map(|s| json!({"name": s.name, "start_s": secs(s.start_s), "end_s": secs(s.end_s.min(duration)), "verdict": null}))
        .collect()
}

/// Latency against achieved throughput, one curve per run and percentile.
fn hockey(models: &[Model], titles: &[String]) -> Vec<Value> {
    let mut series = Vec::new();
    for (k, m) in models.iter().enumerate() {
        for (p, dash) in [("p95", false), ("p99", true)] {
            let pts: Vec<(f64, f64, &str)> = m
                .stages
                .iter()
                .filter(|s| s.ran)
                .filter_map(|s| {
                    let l = s.latency?;
                    let y = if p == "p95" { l.p95? } else { l.p99? };
                    Some((s.achieved.filter(|a| *a > 0.0)?, y, s.name.as_str()))
                })
                .filter(|(_, y, _)| *y > 0.0)
                .collect();
            // In stage order, as the run's own report draws it: sorted by
            // throughput, a stage past capacity (192/s at 2 s) came before
            // the one below it (193/s at 100 ms), and the line zigzagged
            // (review 2's tester, C2).
            if pts.is_empty() {
                continue;
            }
            series.push(json!({
                "label": format!("{} {p}", titles[k]),
                "color": run_color(k),
                "dash": dash,
                "width": if dash { 1.25 } else { 2.0 },
                "x": pts.iter().map(|p| sig(p.0)).collect::<Vec<_>>(),
                "y": pts.iter().map(|p| sig(p.1)).collect::<Vec<_>>(),
                "names": pts.iter().map(|p| p.2).collect::<Vec<_>>(),
            }));
        }
    }
    if series.is_empty() {
        return Vec::new();
    }
    vec![json!({
        "id": "hockey", "title": "Latency vs achieved throughput, per stage (log scale)",
        "x_label": "achieved throughput (/s)", "unit": "ms", "log": true, "series": series,
        "note": "One point per stage of each run: p95 solid, p99 dashed. Where a curve turns up, that run has reached its capacity; a curve further right at the same height carries more at that latency.",
    })]
}
