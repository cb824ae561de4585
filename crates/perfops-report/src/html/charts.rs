//! The data of the report's charts, as the one JSON document embedded in the
//! page: each chart's x values, its series and how to draw them (colour,
//! dashes, steps, log scale). The page's script only turns this into uPlot
//! charts, so what is plotted, and how much of it, is decided and tested here.
//!
//! Long series are cut down with LTTB ([`crate::lttb`]) to about a chart's
//! width in points; numbers keep four significant digits, which is more than
//! a chart or an HDR histogram (three) can show.

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;
use serde_json::{Map, Value, json};

use perfops_core::measure::{Counter, FailureKind, HistogramKind, HistogramSummary};

use super::model::{Model, recorded_s};
use crate::lttb;
use crate::run::{SHORTEST_RATE_WINDOW_S, SeriesLine, SweepLevel};
use perfops_core::telemetry::watched::ProbeResult;

/// Version of the embedded data document.
pub const DATA_VERSION: u32 = 1;

/// Points per time chart: about its width in pixels on a wide screen.
const CHART_POINTS: usize = 1200;
/// Points per watched metric (each has its own x values).
const WATCH_POINTS: usize = 600;
/// Points of the latency-vs-throughput scatter of single seconds.
const SCATTER_POINTS: usize = 1500;
/// Points of the fitted USL curve of a sweep.
const USL_POINTS: u32 = 64;
/// Percentile spectrum: points per decade of 1/(1-q), and decades (to 99.9999%).
const SPECTRUM_STEPS: u32 = 20;
const SPECTRUM_DECADES: u32 = 6;

/// The colours of the page, named by what they show.
pub(crate) mod color {
    pub const TARGET: &str = "#8792a2";
    pub const ACHIEVED: &str = "#2563eb";
    pub const P50: &str = "#16a34a";
    pub const P90: &str = "#ca8a04";
    pub const P99: &str = "#dc2626";
    pub const MAX: &str = "#7c3aed";
    pub const IN_FLIGHT: &str = "#0891b2";
    pub const DROPPED: &str = "#ea580c";
    /// The percentile spectrum's whole-run lines: latency (what a user
    /// waits) dark, service time (from the send) magenta, a hue no stage line takes, so the two
    /// read apart in the legend and on the chart (#32: both were black).
    pub const LATENCY: &str = "#0f172a";
    pub const SERVICE: &str = "#c026d3";
    pub const OK: &str = "#16a34a";
    pub const FAILED: &str = "#dc2626";
    /// For categories (failure kinds, probes): distinct, and red first.
    pub const PALETTE: [&str; 8] =
        ["#dc2626", "#ea580c", "#7c3aed", "#0891b2", "#db2777", "#ca8a04", "#4b5563", "#65a30d"];
}

/// `v` to four significant digits (`None` for NaN or infinity).
pub(crate) fn sig(v: f64) -> Option<f64> {
    if !v.is_finite() {
        return None;
    }
    if v == 0.0 {
        return Some(0.0);
    }
    let digits = 3 - v.abs().log10().floor() as i32;
    if digits <= 0 {
        let m = 10f64.powi(-digits);
        return Some((v / m).round() * m);
    }
    let m = 10f64.powi(digits.min(12));
    Some((v * m).round() / m)
}

/// A time in seconds to the millisecond: times keep every digit they need
/// on a long run, which [`sig`] would not.
pub(crate) fn secs(v: f64) -> Option<f64> {
    v.is_finite().then(|| (v * 1000.0).round() / 1000.0)
}

pub(crate) fn times(v: &[f64]) -> Vec<Option<f64>> {
    v.iter().map(|t| secs(*t)).collect()
}

/// A colour along blue (first stage) to red (last), for per-stage series.
pub(crate) fn stage_color(i: usize, n: usize) -> String {
    let f = if n <= 1 { 0.0 } else { i as f64 / (n - 1) as f64 };
    format!("hsl({:.0},70%,{:.0}%)", 215.0 - 215.0 * f, 42.0 + 4.0 * (1.0 - f))
}

/// One series of a chart: its label, values (aligned with the chart's x) and style.
pub(crate) struct Series {
    label: String,
    values: Vec<Option<f64>>,
    style: Value,
}

impl Series {
    pub(crate) fn new(label: &str, values: Vec<Option<f64>>, style: Value) -> Series {
        Series { label: label.to_string(), values, style }
    }
}

/// A time chart, downsampled: `{id, title, unit, log, x, series: [...]}`.
pub(crate) fn time_chart(
    id: &str,
    title: &str,
    unit: &str,
    log: bool,
    x: &[f64],
    series: Vec<Series>,
    extra: Value,
) -> Value {
    let ys: Vec<&[Option<f64>]> = series.iter().map(|s| s.values.as_slice()).collect();
    let keep = lttb::keep(x, &ys, CHART_POINTS);
    let series: Vec<Value> = series
        .into_iter()
        .map(|s| {
            let mut o = Map::new();
            o.insert("label".into(), s.label.into());
            o.insert("values".into(), json!(rounded(&lttb::pick(&s.values, &keep))));
            if let Value::Object(style) = s.style {
                o.extend(style);
            }
            Value::Object(o)
        })
        .collect();
    let mut chart = json!({
        "id": id, "title": title, "unit": unit, "log": log,
        "x": times(&lttb::pick(x, &keep)),
        "series": series,
    });
    if let (Value::Object(c), Value::Object(e)) = (&mut chart, extra) {
        c.extend(e);
    }
    chart
}

fn rounded(v: &[Option<f64>]) -> Vec<Option<f64>> {
    v.iter().map(|x| x.and_then(sig)).collect()
}

/// The whole data document.
pub(crate) fn data(m: &Model) -> Value {
    let series = &m.files.series;
    let (x, rows): (Vec<f64>, Vec<Option<&SeriesLine>>) = timeline(series).into_iter().unzip();
    let duration = m.elapsed_s.max(recorded_s(series)).max(1.0);
    let stages: Vec<Value> = m
        .stages
        .iter()
        .filter(|s| s.start_s < duration)
        .map(|s| json!({"name": s.name, "start_s": secs(s.start_s), "end_s": secs(s.end_s.min(duration)), "verdict": s.verdict}))
        .collect();
    let restarts: Vec<f64> = m.files.probe.iter().filter(|p| p.restart).map(|p| p.t).collect();
    let mut charts = Vec::new();
    if !series.is_empty() {
        charts.extend(series_charts(&rows, &x));
    }
    if let Some(probe) = probe_chart(&m.files.probe) {
        charts.push(probe);
    }
    let mut data = json!({
        "format": "perfops.report-data",
        "version": DATA_VERSION,
        "duration_s": secs(duration),
        "stages": stages,
        "restarts": restarts,
        "time_charts": charts,
        "watch": watch(m),
        "hockey": hockey(m),
        "spectrum": spectrum(m),
    });
    let xy = sweep(m);
    if !xy.is_empty() {
        data["xy_charts"] = Value::Array(xy);
    }
    // Only where there are some: the data of runs without them is as it was.
    if !m.files.events.is_empty() {
        data["events"] = events(&m.files.events);
    }
    data
}

/// The actions by hand (`events.jsonl`), as the time charts mark them: at
/// their instant, with their words (`rate 300`, `stop`) and who asked.
fn events(events: &[perfops_core::pipeline::control::ControlEvent]) -> Value {
    let words = |e: &perfops_core::pipeline::control::ControlEvent| match e.value {
        Some(v) => format!("{} {v}", e.action),
        None => e.action.clone(),
    };
    Value::Array(events.iter().map(|e| json!({"t": secs(e.t), "label": words(e), "by": e.by})).collect())
}

/// The time axis of the per-second charts: each second recorded, at its
/// start; at the end of each stretch of seconds, its last second again (so
/// that a stepped line holds its value to that second's end, and a stretch
/// of one second draws at all), then a break (no value) before the next
/// stretch: between the loads of `limit` and `sweep`, which each start on a
/// whole second, no line is drawn across the second between them.
///
/// A second shorter than [`SHORTEST_RATE_WINDOW_S`] is left off: the drain of a
/// load, its last few answers within a few ms of its last arrival (counted
/// in its stage), is no rate (3 answers in 8 ms drew a spike of 375/s at
/// the end of each level of a sweep) and too narrow to see.
///
/// ```text
///   seconds:  | 8 | 9 |10: 8 ms| 11 missing | 12 | 13 |
///   axis:     8   9   10       10.5         12   13   14
///   values:   v8  v9  v9       –            v12  v13  v13
/// ```
fn timeline(lines: &[SeriesLine]) -> Vec<(f64, Option<&SeriesLine>)> {
    let length = |l: &SeriesLine| if l.length_s > 0.0 && l.length_s < 1.0 { l.length_s } else { 1.0 };
    let mut kept: Vec<&SeriesLine> = lines.iter().filter(|l| length(l) >= SHORTEST_RATE_WINDOW_S).collect();
    kept.sort_by_key(|l| l.t);
    let mut out = Vec::with_capacity(kept.len() + 2);
    for (i, l) in kept.iter().enumerate() {
        let start = f64::from(l.t);
        out.push((start, Some(*l)));
        let end = start + length(l);
        let next = kept.get(i + 1).map(|n| f64::from(n.t));
        if next.is_none_or(|next| next > end) {
            out.push((end, Some(*l)));
            if let Some(next) = next {
                out.push(((end + next) / 2.0, None));
            }
        }
    }
    out
}

/// A histogram of a second: its latency or its service time.
type Which = fn(&SeriesLine) -> &HistogramSummary;
/// A figure of a histogram.
type Figure = fn(&HistogramSummary) -> f64;

/// One series of the streamed answers' chart, in the report and on the live
/// page: the histogram, the series' label, the key of the live page's
/// second (`live.rs`), and the quantile drawn (as a summary's figure for the
/// report, as a number for the live page, which reads the histogram).
pub(super) struct Streamed {
    pub(super) kind: HistogramKind,
    pub(super) label: &'static str,
    pub(super) key: &'static str,
    pub(super) figure: Figure,
    pub(super) q: f64,
    pub(super) color: &'static str,
}

/// The streamed answers' chart: per second, the figures their SLO lines
/// judge most.
pub(super) const STREAMED: [Streamed; 3] = [
    Streamed {
        kind: HistogramKind::FirstEvent,
        label: "first event p95",
        key: "first_event_p95",
        figure: |h| h.p95,
        q: 0.95,
        color: color::P50,
    },
    Streamed {
        kind: HistogramKind::Ttft,
        label: "ttft p95",
        key: "ttft_p95",
        figure: |h| h.p95,
        q: 0.95,
        color: color::P99,
    },
    Streamed {
        kind: HistogramKind::Itl,
        label: "itl p99",
        key: "itl_p99",
        figure: |h| h.p99,
        q: 0.99,
        color: color::P90,
    },
];
/// Its id, title and note.
pub(super) const STREAMS: (&str, &str, &str) = (
    "streams",
    "Streamed answers per second (log scale)",
    "First event: from the intended start to a streamed answer's first event. TTFT: to an LLM answer's first token. ITL: the gaps between its tokens.",
);

/// Latency from the intended start.
pub(crate) fn latency(l: &SeriesLine) -> &HistogramSummary {
    &l.latency_ms
}

fn service(l: &SeriesLine) -> &HistogramSummary {
    &l.service_ms
}

/// Figure `p` of histogram `which` of second `l`. A percentile of a second
/// that counted nothing is no value, not 0 (and 0 has no place on a log scale).
pub(crate) fn percentile(l: &SeriesLine, which: Which, p: Figure) -> Option<f64> {
    let h = which(l);
    if h.count == 0 {
        return None;
    }
    Some(p(h)).filter(|v| *v > 0.0)
}

/// Rate, latency, failures, and in-flight/dropped charts from `series.jsonl`:
/// `rows` are the seconds of the axis `x`, `None` where none was recorded.
fn series_charts(rows: &[Option<&SeriesLine>], x: &[f64]) -> Vec<Value> {
    let lines: Vec<&SeriesLine> = rows.iter().flatten().copied().collect();
    let col = |f: &dyn Fn(&SeriesLine) -> Option<f64>| rows.iter().map(|l| l.and_then(f)).collect::<Vec<_>>();
    let pct = |which: Which, p: Figure| col(&move |l: &SeriesLine| percentile(l, which, p));
    let style = |color: &str| json!({ "color": color });
    let mut out = Vec::new();

    let target = col(&|l| l.target_rate);
    // Steps, not lines: a second's rate holds over [t, t + 1), and a line
    // would start each stage's climb a second early.
    let mut rate = vec![Series::new(
        "achieved",
        col(&|l| Some(l.achieved_rate)),
        json!({"color": color::ACHIEVED, "width": 2, "stepped": true}),
    )];
    if target.iter().any(Option::is_some) {
        rate.insert(0, Series::new("target", target, json!({"color": color::TARGET, "dash": true, "stepped": true})));
    }
    out.push(time_chart("rate", "Arrival rate: target and achieved", "/s", false, x, rate, json!({})));

    let latency = vec![
        Series::new("p50", pct(latency, |h| h.p50), style(color::P50)),
        Series::new("p90", pct(latency, |h| h.p90), style(color::P90)),
        Series::new("p99", pct(latency, |h| h.p99), json!({"color": color::P99, "width": 2})),
        Series::new("max", pct(latency, |h| h.max), json!({"color": color::MAX, "width": 1})),
        Series::new("service p50", pct(service, |h| h.p50), json!({"color": color::P50, "dash": true, "width": 1})),
        Series::new("service p99", pct(service, |h| h.p99), json!({"color": color::P99, "dash": true, "width": 1})),
    ];
    out.push(time_chart(
        "latency",
        "Latency per second (log scale)",
        "ms",
        true,
        x,
        latency,
        json!({"note": "Solid: latency from the intended start (what a user waits). Dashed: service time from the actual send. A gap between them is time spent waiting to be sent."}),
    ));

    // Streamed answers and LLM steps, where the run has them. A run that
    // streams nothing draws no chart more (its seconds have none of these
    // figures).
    let streams: Vec<Series> = STREAMED
        .iter()
        .map(|st| {
            let (h, p) = (st.kind, st.figure);
            let values =
                col(&move |l: &SeriesLine| l.histograms.get(h).filter(|s| s.count > 0).map(p).filter(|v| *v > 0.0));
            Series::new(st.label, values, json!({"color": st.color, "width": 2}))
        })
        .filter(|s| s.values.iter().any(Option::is_some))
        .collect();
    if !streams.is_empty() {
        let (id, title, note) = STREAMS;
        out.push(time_chart(id, title, "ms", true, x, streams, json!({ "note": note })));
    }

    // `cut` is not the target's: requests still in flight when the run ended,
    // shown with the generator's own counts below (#12).
    let cut = FailureKind::Cut.name();
    let kinds: BTreeSet<&str> =
        lines.iter().flat_map(|l| l.failures.keys().map(String::as_str)).filter(|k| *k != cut).collect();
    let mut failures: Vec<Series> = kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let values = col(&|l| Some(l.per_s(l.failures.get(*kind).copied().unwrap_or(0))));
            Series::new(kind, values, json!({"color": color::PALETTE[i % color::PALETTE.len()], "stepped": true}))
        })
        .collect();
    if failures.is_empty() {
        let zeros = col(&|l| Some(l.per_s(l.failed)));
        failures.push(Series::new("failed", zeros, json!({"color": color::FAILED, "stepped": true})));
    }
    let note = if kinds.is_empty() { "No request failed." } else { "" };
    out.push(time_chart("failures", "Failures per second, by kind", "/s", false, x, failures, json!({"note": note})));

    let mut load = vec![
        Series::new("in flight", col(&|l| Some(l.in_flight as f64)), json!({"color": color::IN_FLIGHT, "width": 2})),
        Series::new(
            "dropped/s",
            col(&|l| Some(l.per_s(l.counters[Counter::Dropped]))),
            json!({"color": color::DROPPED, "stepped": true, "axis": "right", "unit": "/s"}),
        ),
    ];
    let cuts = col(&|l| l.failures.get(cut).map(|&n| l.per_s(n)));
    let any_cut = cuts.iter().any(Option::is_some);
    if any_cut {
        load.push(Series::new(
            "cut at the end/s",
            cuts,
            json!({"color": color::MAX, "stepped": true, "axis": "right", "unit": "/s"}),
        ));
    }
    let load_note = if any_cut {
        "Dropped arrivals hit max_in_flight: the generator, not the server, was the limit in those seconds. Cut: requests still in flight when the run ended, not counted as failures."
    } else {
        "Dropped arrivals hit max_in_flight: the generator, not the server, was the limit in those seconds."
    };
    out.push(time_chart(
        "load",
        "Requests in flight, and arrivals dropped",
        "",
        false,
        x,
        load,
        json!({ "note": load_note }),
    ));
    out
}

/// Probe attempts as points: response time when it answered, failures in red
/// (at the time they took, or at the top when they took none).
fn probe_chart(probe: &[ProbeResult]) -> Option<Value> {
    let mut attempts: Vec<&ProbeResult> = probe.iter().collect();
    if attempts.is_empty() {
        return None;
    }
    attempts.sort_by(|a, b| a.t.partial_cmp(&b.t).unwrap_or(std::cmp::Ordering::Equal));
    let names: BTreeSet<&str> = attempts.iter().map(|p| p.probe.name()).collect();
    let top = attempts.iter().map(|p| p.ms).fold(1.0, f64::max);
    let x: Vec<f64> = attempts.iter().map(|p| p.t).collect();
    let mut series = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mine = |p: &ProbeResult| p.probe.name() == *name;
        let answered: Vec<Option<f64>> =
            attempts.iter().map(|p| (mine(p) && p.ok && p.ms > 0.0).then_some(p.ms)).collect();
        let failed: Vec<Option<f64>> =
            attempts.iter().map(|p| (mine(p) && !p.ok).then_some(if p.ms > 0.0 { p.ms } else { top })).collect();
        let notes: Vec<Option<String>> = attempts.iter().map(|p| (mine(p) && !p.ok).then(|| probe_note(p))).collect();
        let shape = if i == 0 { "circle" } else { "diamond" };
        series.push(Series::new(
            &format!("{name} ok"),
            answered,
            json!({"color": color::OK, "points_only": true, "shape": shape}),
        ));
        series.push(Series::new(
            &format!("{name} failed"),
            failed,
            json!({"color": color::FAILED, "points_only": true, "shape": shape, "notes": notes}),
        ));
    }
    // Few points (one per probe period): no downsampling, which would also
    // misalign the notes.
    Some(json!({
        "id": "probe", "title": "Probes (log scale): response time; failures in red", "unit": "ms", "log": true,
        "x": times(&x),
        "series": series.into_iter().map(|s| {
            let mut o = Map::new();
            o.insert("label".into(), s.label.into());
            o.insert("values".into(), json!(rounded(&s.values)));
            if let Value::Object(style) = s.style { o.extend(style); }
            Value::Object(o)
        }).collect::<Vec<_>>(),
        "note": "A vertical red line marks a restart: where Kubernetes would have restarted the target.",
    }))
}

fn probe_note(p: &ProbeResult) -> String {
    let mut parts =
        vec![p.error.clone().unwrap_or_else(|| p.status.map_or("failed".into(), |s| format!("status {s}")))];
    // 0: not known (a line of an older writer); a failed check is at least the first in a row.
    if p.failures > 0 {
        parts.push(format!("{} in a row", p.failures));
    }
    if p.restart {
        parts.push("restart".into());
    }
    if p.unready {
        parts.push("unready".into());
    }
    parts.join(", ")
}

/// One watched metric's sample times and values.
type Samples = (Vec<f64>, Vec<Option<f64>>);

/// Watched metrics by source, each with its own x values (sources sample at
/// their own pace); flat stretches are cut to their ends, then LTTB.
fn watch(m: &Model) -> Value {
    let mut groups: Vec<(String, BTreeMap<String, Samples>)> = Vec::new();
    for line in &m.files.watch {
        let gi = match groups.iter().position(|(s, _)| *s == line.source) {
            Some(i) => i,
            None => {
                groups.push((line.source.clone(), BTreeMap::new()));
                groups.len() - 1
            }
        };
        for (name, v) in &line.values {
            let (xs, ys) = groups[gi].1.entry(name.clone()).or_default();
            xs.push(line.t);
            ys.push(Some(*v).filter(|v| v.is_finite()));
        }
    }
    if groups.is_empty() {
        return Value::Null;
    }
    // The metrics the scenario picks (`watch.chart`, #15), in its order: a name is the series of
    // that name, or every series of it by label set (`busy` is `busy{pod="a"}`, `busy{pod="b"}`).
    let picks = m.files.scenario.as_deref().map(perfops_core::scenario::chart_picks).unwrap_or_default();
    let mut picked: Vec<Value> = Vec::new();
    for name in &picks {
        for (gi, (_, metrics)) in groups.iter().enumerate() {
            for (mi, k) in metrics.keys().enumerate() {
                let of_it = k == name || k.strip_prefix(name.as_str()).is_some_and(|rest| rest.starts_with('{'));
                let entry = json!({"group": gi, "metric": mi});
                if of_it && !picked.contains(&entry) {
                    picked.push(entry);
                }
            }
        }
    }
    // Else the top diagnostic's first watched metric is what a reader wants first.
    let cited: Vec<&str> = m.diagnostics.iter().flat_map(|d| d.evidence.iter().map(|e| e.metric.as_str())).collect();
    let mut default = picked.first().cloned().unwrap_or_else(|| json!({"group": 0, "metric": 0}));
    'find: for c in cited.into_iter().filter(|_| picked.is_empty()) {
        for (gi, (_, metrics)) in groups.iter().enumerate() {
            if let Some(mi) = metrics.keys().position(|k| k == c) {
                default = json!({"group": gi, "metric": mi});
                break 'find;
            }
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(source, metrics)| {
            let metrics: Vec<Value> = metrics
                .into_iter()
                .map(|(name, (xs, ys))| {
                    let flat = without_flat_runs(&ys);
                    let (xs, ys) = (lttb::pick(&xs, &flat), lttb::pick(&ys, &flat));
                    let keep = lttb::indices(&xs, &ys, WATCH_POINTS);
                    json!({
                        "name": name,
                        "x": times(&lttb::pick(&xs, &keep)),
                        "values": rounded(&lttb::pick(&ys, &keep)),
                    })
                })
                .collect();
            json!({"source": source, "metrics": metrics})
        })
        .collect();
    json!({"groups": groups, "default": default, "picked": picked})
}

/// Indices of `ys` without the inside of runs of equal values: a gauge that
/// sits at 10 for an hour needs its two ends, not 1800 points.
fn without_flat_runs(ys: &[Option<f64>]) -> Vec<usize> {
    (0..ys.len()).filter(|&i| i == 0 || i + 1 == ys.len() || !(ys[i - 1] == ys[i] && ys[i] == ys[i + 1])).collect()
}

/// Latency against achieved throughput: one point per stage (p50, p90, p99),
/// and one per second (p99) behind them.
fn hockey(m: &Model) -> Value {
    let n = m.stages.len();
    let stages: Vec<Value> = m
        .stages
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let (a, l) = (s.achieved.filter(|a| *a > 0.0)?, s.latency?);
            Some(json!({
                "name": s.name, "achieved": sig(a), "target": s.target.and_then(sig),
                "p50": l.p50.and_then(sig), "p90": l.p90.and_then(sig), "p99": l.p99.and_then(sig),
                "verdict": s.verdict, "color": stage_color(i, n),
            }))
        })
        .collect();
    let seconds: Vec<(f64, f64)> = m
        .files
        .series
        .iter()
        .filter(|l| !l.is_drain())
        .filter_map(|l| Some((Some(l.achieved_rate).filter(|a| *a > 0.0)?, percentile(l, latency, |h| h.p99)?)))
        .collect();
    if stages.is_empty() && seconds.is_empty() {
        return Value::Null;
    }
    let stride = seconds.len().div_ceil(SCATTER_POINTS).max(1);
    let seconds: Vec<&(f64, f64)> = seconds.iter().step_by(stride).collect();
    json!({
        "stages": stages,
        "seconds": {
            "x": seconds.iter().map(|p| sig(p.0)).collect::<Vec<_>>(),
            "y": seconds.iter().map(|p| sig(p.1)).collect::<Vec<_>>(),
        },
    })
}

/// Latency at each percentile, HdrHistogram style: x is 1/(1-q) on a log
/// scale, so 90%, 99%, 99.9% are evenly spaced and the tail gets the room.
///
/// ```text
///   x = 1/(1-q):   1     2     10    100    1000    10^4 ...
///   q:             0%    50%   90%   99%    99.9%   99.99%
/// ```
///
/// A histogram of n values says nothing past x = n; its line stops there.
fn spectrum(m: &Model) -> Value {
    let mg = &m.merged;
    let mut hs: Vec<(String, &Histogram<u64>, Value)> = Vec::new();
    if let Some(h) = &mg.latency {
        hs.push(("latency, whole run".into(), h, json!({"color": color::LATENCY, "width": 2.5})));
    }
    if let Some(h) = &mg.service {
        hs.push(("service time, whole run".into(), h, json!({"color": color::SERVICE, "width": 1.5, "dash": true})));
    }
    let n = m.stages.len();
    // One stage alone is the whole run again.
    if n > 1 {
        for (i, (stage, h)) in m.stages.iter().zip(&mg.latency_by_stage).enumerate() {
            if let Some(h) = h {
                hs.push((stage.name.clone(), h, json!({"color": stage_color(i, n), "width": 1.25})));
            }
        }
    }
    if hs.is_empty() {
        return Value::Null;
    }
    let x: Vec<f64> =
        (0..=SPECTRUM_STEPS * SPECTRUM_DECADES).map(|k| 10f64.powf(f64::from(k) / f64::from(SPECTRUM_STEPS))).collect();
    let series: Vec<Value> = hs
        .into_iter()
        .map(|(label, h, style)| {
            let count = h.len() as f64;
            let values: Vec<Option<f64>> = x
                .iter()
                .map(|&x| {
                    (x <= count.max(1.0)).then(|| h.value_at_quantile(1.0 - 1.0 / x) as f64 / 1000.0).and_then(sig)
                })
                .collect();
            let mut o = Map::new();
            o.insert("label".into(), label.into());
            o.insert("values".into(), json!(values));
            o.insert("count".into(), json!(h.len()));
            if let Value::Object(style) = style {
                o.extend(style);
            }
            Value::Object(o)
        })
        .collect();
    json!({"x": x.iter().map(|v| sig(*v)).collect::<Vec<_>>(), "series": series})
}

/// `perfops sweep`: throughput and latency against the users, one point per
/// level, with the Universal Scalability Law's curve through the throughput
/// (to its predicted peak when that lies within twice the largest level).
/// Nothing for other runs.
fn sweep(m: &Model) -> Vec<Value> {
    let Some(sweep) = m.files.summary.as_ref().and_then(|s| s.sweep.as_ref()) else { return Vec::new() };
    let levels: Vec<_> = sweep.levels.iter().filter(|l| l.throughput > 0.0).collect();
    if levels.is_empty() {
        return Vec::new();
    }
    let users: Vec<Option<f64>> = levels.iter().map(|l| sig(f64::from(l.concurrency))).collect();
    let column = |f: &dyn Fn(&SweepLevel) -> f64| {
        levels.iter().map(|l| Some(f(l)).filter(|v| *v > 0.0).and_then(sig)).collect::<Vec<_>>()
    };
    let mut throughput = vec![json!({
        "label": "measured", "color": color::ACHIEVED, "x": users, "y": column(&|l| l.throughput),
    })];
    if let Some(fit) = &sweep.usl {
        let largest = levels.iter().map(|l| f64::from(l.concurrency)).fold(1.0, f64::max);
        let last = sweep.predicted_peak_concurrency.filter(|n| *n <= 2.0 * largest).map_or(largest, |n| n.max(largest));
        let xs: Vec<f64> =
            (0..=USL_POINTS).map(|k| 1.0 + (last - 1.0) * f64::from(k) / f64::from(USL_POINTS)).collect();
        throughput.push(json!({
            "label": "USL fit", "color": color::TARGET, "dash": true, "width": 1.5, "points": false,
            "x": xs.iter().map(|n| sig(*n)).collect::<Vec<_>>(),
            "y": xs.iter().map(|n| sig(fit.throughput(*n))).collect::<Vec<_>>(),
        }));
    }
    let latency = vec![
        json!({"label": "p50 ok", "color": color::P50, "x": users, "y": column(&|l| l.p50_ms)}),
        json!({"label": "p99", "color": color::P99, "x": users, "y": column(&|l| l.p99_ms)}),
    ];
    vec![
        json!({
            "id": "sweep-throughput", "title": "Throughput vs users", "x_label": "users (concurrency)", "unit": "/s",
            "log": false, "series": throughput,
            "note": "One point per level. Dashed: the Universal Scalability Law fitted to them. Where the points flatten, a pool, a connection cap or a lock holds the throughput.",
        }),
        json!({
            "id": "sweep-latency", "title": "Latency vs users (log scale)", "x_label": "users (concurrency)", "unit": "ms",
            "log": true, "series": latency,
            "note": "p50 of the answered requests and p99 of every request, per level. Latency that grows in proportion to the users while throughput stays flat is a queue (Little's law).",
        }),
    ]
}

/// How many charts the page draws from `data`: what the browser test expects.
pub fn expected_charts(data: &Value) -> usize {
    let len = |key: &str| data[key].as_array().map_or(0, Vec::len);
    len("time_charts")
        + len("xy_charts")
        + usize::from(!data["watch"].is_null())
        + usize::from(!data["hockey"].is_null())
        + usize::from(!data["spectrum"].is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_significant_digits() {
        let cases = [
            (812.3456, 812.3),
            (0.934_51, 0.9345),
            (123_456.0, 123_500.0),
            (1.0, 1.0),
            (0.0, 0.0),
            (-12.345_67, -12.35),
            (0.000_123_456, 0.000_123_5),
        ];
        for (v, want) in cases {
            assert_eq!(sig(v), Some(want), "{v}");
        }
        assert_eq!(sig(f64::NAN), None);
    }

    /// The streams chart's series draw the same quantile in the report (a
    /// summary's figure) and on the live page (the histogram's quantile).
    #[test]
    fn streamed_series_say_one_quantile_twice_alike() {
        let mut h = perfops_core::measure::Histogram::default();
        for ms in 1..=1000 {
            h.record(std::time::Duration::from_millis(ms));
        }
        let summary = h.summary();
        for st in &STREAMED {
            let live = h.quantile(st.q).as_secs_f64() * 1000.0;
            assert_eq!((st.figure)(&summary), live, "{}", st.label);
        }
    }

    /// #12: requests cut at the run's end are the generator's, not the
    /// target's failures: they are drawn with in flight and dropped, and a
    /// run where nothing else failed says "No request failed.".
    #[test]
    fn cut_requests_are_charted_beside_in_flight_not_as_failures() {
        let line = |t: u32, failures: &[(&str, u64)]| SeriesLine {
            t,
            length_s: 1.0,
            failures: failures.iter().map(|(k, n)| ((*k).to_string(), *n)).collect(),
            ..SeriesLine::default()
        };
        let names = |chart: &Value| -> Vec<String> {
            chart["series"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["label"].as_str().map(String::from))
                .collect()
        };
        let find = |charts: &[Value], id: &str| charts.iter().find(|c| c["id"] == id).cloned().expect(id);

        let (a, b) = (line(0, &[]), line(1, &[("cut", 3)]));
        let charts = series_charts(&[Some(&a), Some(&b)], &[0.0, 1.0]);
        let (failures, load) = (find(&charts, "failures"), find(&charts, "load"));
        assert_eq!(names(&failures), vec!["failed"], "{failures}");
        assert_eq!(failures["note"], "No request failed.");
        assert_eq!(names(&load), vec!["in flight", "dropped/s", "cut at the end/s"], "{load}");

        let charts = series_charts(&[Some(&line(0, &[("timeout", 1), ("cut", 2)]))], &[0.0]);
        assert_eq!(names(&find(&charts, "failures")), vec!["timeout"]);
        // Nothing cut: the load chart as before.
        let charts = series_charts(&[Some(&line(0, &[("timeout", 1)]))], &[0.0]);
        assert_eq!(names(&find(&charts, "load")), vec!["in flight", "dropped/s"]);
    }

    /// A run with streamed or LLM answers gets a chart of them per second (the
    /// figures their SLO lines judge most), read from each second's figures; a
    /// run without has none, and its charts are as they were.
    #[test]
    fn streamed_answers_are_charted_per_second_where_the_run_has_them() {
        use std::time::Duration;

        use perfops_core::measure::{HistogramFigures, Stats};
        let line = |t: u32, st: &Stats| SeriesLine {
            t,
            length_s: 1.0,
            histograms: HistogramFigures::of(st),
            ..SeriesLine::default()
        };
        let mut llm = Stats::default();
        for ms in [100, 200, 300] {
            llm.ttft.record(Duration::from_millis(ms));
            llm.itl.record(Duration::from_millis(ms / 10));
            llm.first_event.record(Duration::from_millis(ms / 2));
        }
        let (a, b) = (line(0, &llm), line(1, &Stats::default()));
        let charts = series_charts(&[Some(&a), Some(&b)], &[0.0, 1.0]);
        let chart = charts.iter().find(|c| c["id"] == "streams").expect("a streams chart");
        // (label, its value in the second that streamed: ms)
        let cases = [("first event p95", 150.0), ("ttft p95", 300.0), ("itl p99", 30.0)];
        for (label, want) in cases {
            let series = chart["series"].as_array().unwrap().iter().find(|s| s["label"] == label).expect(label);
            let v = series["values"][0].as_f64().expect("a value");
            assert!((v - want).abs() <= want * 0.002, "{label}: {v} vs {want}");
            assert!(series["values"][1].is_null(), "{label}: a second without answers has no value");
        }
        // A run that streamed nothing: no such chart.
        let charts = series_charts(&[Some(&b)], &[0.0]);
        assert!(charts.iter().all(|c| c["id"] != "streams"));
        // Nor an SSE run without LLM steps the LLM's lines.
        let mut sse = Stats::default();
        sse.first_event.record(Duration::from_millis(5));
        let charts = series_charts(&[Some(&line(0, &sse))], &[0.0]);
        let chart = charts.iter().find(|c| c["id"] == "streams").expect("a streams chart");
        assert_eq!(chart["series"].as_array().map(Vec::len), Some(1), "{chart}");
    }

    /// A stretch of seconds ends with its last second again, at its end,
    /// then a break before the next stretch; a drain of a few ms is left off.
    #[test]
    fn the_time_axis_breaks_where_the_seconds_stop() {
        let line = |t: u32, length_s: f64| SeriesLine { t, length_s, ..SeriesLine::default() };
        let axis = |lines: &[SeriesLine]| -> Vec<(f64, Option<u32>)> {
            timeline(lines).into_iter().map(|(x, l)| (x, l.map(|l| l.t))).collect()
        };
        // (the seconds recorded; the axis: x and the second drawn there, if any)
        type Case<'a> = (&'a [SeriesLine], &'a [(f64, Option<u32>)]);
        let cases: [Case; 5] = [
            // Whole seconds one after another: the last again at its end.
            (&[line(0, 1.0), line(1, 1.0)], &[(0.0, Some(0)), (1.0, Some(1)), (2.0, Some(1))]),
            // A drain of 20 ms (left off), then the next load two seconds on.
            (
                &[line(8, 1.0), line(9, 0.02), line(11, 1.0)],
                &[(8.0, Some(8)), (9.0, Some(8)), (10.0, None), (11.0, Some(11)), (12.0, Some(11))],
            ),
            // One second alone between two gaps still draws: its end stands on the axis.
            (
                &[line(3, 1.0), line(4, 0.01), line(5, 1.0)],
                &[(3.0, Some(3)), (4.0, Some(3)), (4.5, None), (5.0, Some(5)), (6.0, Some(5))],
            ),
            // The half second whose requests are cut at a run's end is drawn, to its end.
            (&[line(0, 1.0), line(1, 0.55)], &[(0.0, Some(0)), (1.0, Some(1)), (1.55, Some(1))]),
            // A missing or odd length reads as a whole second; out of order, sorted.
            (
                &[line(2, 0.0), line(0, 7.0)],
                &[(0.0, Some(0)), (1.0, Some(0)), (1.5, None), (2.0, Some(2)), (3.0, Some(2))],
            ),
        ];
        for (lines, want) in cases {
            assert_eq!(axis(lines), want, "{:?}", lines.iter().map(|l| (l.t, l.length_s)).collect::<Vec<_>>());
        }

        // Drawn from that axis: the level's rate holds to its end, the drain's 375/s is nowhere.
        let level = SeriesLine { achieved_rate: 47.0, in_flight: 1, ..line(1, 1.0) };
        let drain = SeriesLine { achieved_rate: 375.0, stage: "(draining)".into(), ..line(2, 0.008) };
        let next = SeriesLine { achieved_rate: 94.0, in_flight: 2, ..line(3, 1.0) };
        let lines = [level, drain, next];
        let (x, rows): (Vec<f64>, Vec<Option<&SeriesLine>>) = timeline(&lines).into_iter().unzip();
        assert_eq!(x, [1.0, 2.0, 2.5, 3.0, 4.0]);
        let charts = series_charts(&rows, &x);
        let values = |id: &str, label: &str| -> Value {
            let chart = charts.iter().find(|c| c["id"] == id).expect(id);
            chart["series"].as_array().unwrap().iter().find(|s| s["label"] == label).expect(label)["values"].clone()
        };
        assert_eq!(values("rate", "achieved"), json!([47.0, 47.0, null, 94.0, 94.0]));
        assert_eq!(values("load", "in flight"), json!([1.0, 1.0, null, 2.0, 2.0]));
    }

    #[test]
    fn flat_runs_keep_their_ends() {
        let ys = [Some(1.0), Some(1.0), Some(1.0), Some(2.0), Some(2.0), None, None, None];
        assert_eq!(without_flat_runs(&ys), vec![0, 2, 3, 4, 5, 7]);
    }
}
