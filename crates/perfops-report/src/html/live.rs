//! The report page in its live mode (`--live`): the same document as
//! `report.html` (the shell's styles, uPlot, `report.js`) with the charts
//! empty at first, and `live.js`, which opens `GET /events` and fills them
//! second by second. This module owns the page as served at the run's start
//! and what each Server-Sent Event carries ([`second_event`],
//! [`stages_event`]); the server that serves them is `perfops_run::live`.
//!
//! ```text
//!   start(meta) ─> page(meta): header, planned stages, empty charts, controls
//!   each second ─> second_event: one line of JSON (t, stage, rates, p50/p90/p99,
//!                  failures by kind, in flight, streamed answers' figures
//!                  (their chart is held back until they come), per step, control events,
//!                  what was watched (samples, probe checks) since the last,
//!                  the verdicts of the stages that closed with it, its
//!                  failing exchanges: the first few of each step and kind)
//!   the end     ─> stages_event(summary): verdicts and SLO lines of each stage,
//!                  then `final` (the page fetches /report and becomes it)
//! ```
//!
//! Why the figures are computed here, once per second, and not in the page:
//! the page gets a few hundred bytes a second instead of histograms, and
//! every browser shows the same quantiles the results directory keeps (the
//! interval's HDR histograms, as `series.jsonl`). Measured
//! (`second_event_cost` below, 5 steps of 20,000 requests each, the test
//! profile, on the 2-core VM while it built): ~170 µs a second, 0.02 % of
//! the collector's core, most of it the 24 quantiles walked over the
//! histograms' buckets; the line is ~650 bytes.

use std::fmt::Write;

use serde_json::{Map, Value, json};

use perfops_core::measure::{SampleBound, Stats};
use perfops_core::pipeline::Second;

use super::charts::{STREAMED, STREAMS, color};
use super::shell::{close_with, frame, open, script_json};
use crate::failures::FailureLine;
use crate::format::escape;
use crate::run::{RunMeta, RunSummary};

const LIVE_JS: &str = include_str!("live.js");

/// The live page of a run that starts with `meta`; `control` says whether
/// the page shows the buttons (it always may: the run answers 409 when it
/// takes no control, and the page says so).
pub fn page(meta: &RunMeta) -> String {
    let planned: f64 = meta.stages.iter().map(|s| s.duration_s).sum();
    let mut start = 0.0;
    let stages: Vec<Value> = meta
        .stages
        .iter()
        .map(|s| {
            let v = json!({"name": s.name, "start_s": start, "end_s": start + s.duration_s, "verdict": null,
                "from": s.from, "to": s.to});
            start += s.duration_s;
            v
        })
        .collect();
    let empty = |label: &str, key: &str, style: Value| {
        let mut o = Map::new();
        o.insert("label".into(), label.into());
        o.insert("key".into(), key.into());
        o.insert("values".into(), json!([]));
        if let Value::Object(style) = style {
            o.extend(style);
        }
        Value::Object(o)
    };
    let chart = |id: &str, title: &str, unit: &str, log: bool, series: Vec<Value>| json!({"id": id, "title": title, "unit": unit, "log": log, "x": [], "series": series});
    // Drawn by live.js when a second first carries its figures (a run that
    // streams nothing shows no such chart, as its report does not).
    let (id, title, note) = STREAMS;
    let mut streams = chart(
        id,
        title,
        "ms",
        true,
        STREAMED.iter().map(|st| empty(st.label, st.key, json!({"color": st.color, "width": 2}))).collect(),
    );
    streams["note"] = note.into();
    let data = json!({
        "version": super::DATA_VERSION,
        "live": true,
        "name": meta.name,
        "model": meta.model,
        "duration_s": planned.max(1.0),
        "stages": stages,
        "restarts": [],
        // Filled as samples come (live.js), drawn by the report's own
        // watched-metrics chart; the scenario's `watch.chart` picks are the
        // final report's.
        "watch": {"groups": [], "default": {"group": 0, "metric": 0}, "picked": []},
        "time_charts": [
            chart("rate", "Arrival rate: target and achieved", "/s", false, vec![
                empty("target", "target", json!({"color": color::TARGET, "dash": true, "stepped": true})),
                empty("achieved", "achieved", json!({"color": color::ACHIEVED, "width": 2, "stepped": true})),
            ]),
            chart("latency", "Latency from the intended start (log scale)", "ms", true, vec![
                empty("p50", "p50", json!({"color": color::P50, "width": 1.5})),
                empty("p90", "p90", json!({"color": color::P90, "width": 1.5})),
                empty("p99", "p99", json!({"color": color::P99, "width": 2})),
                empty("max", "max", json!({"color": color::MAX, "width": 1})),
            ]),
            chart("failures", "Failures per second, by kind", "/s", false, vec![
                empty("failed", "failed", json!({"color": color::FAILED, "stepped": true})),
            ]),
            chart("load", "In flight", "", false, vec![
                empty("in flight", "in_flight", json!({"color": color::IN_FLIGHT, "width": 2})),
            ]),
        ],
        "pending_charts": [streams],
    });
    let mut o = String::with_capacity(192 * 1024);
    open(&mut o, &format!("{} · live · perfops", meta.name), &data);
    let _ = write!(
        o,
        "<header class=\"top\">\n<p class=\"brand\">perfops live</p>\n<h1>{}</h1>\n<p class=\"meta\">{} <span class=\"sep\">·</span> \
         {} model <span class=\"sep\">·</span> {} <span class=\"sep\">·</span> started {}</p>\n</header>\n",
        escape(&meta.name),
        escape(&meta.target),
        escape(&meta.model),
        escape(&meta.kind),
        escape(&meta.started_at),
    );
    o.push_str(
        "<section class=\"verdict live-status\" id=\"live-status\">\n<span class=\"badge\" id=\"live-badge\">CONNECTING</span>\n\
         <p class=\"headline\" id=\"live-headline\">Waiting for the first second…</p>\n\
         <p class=\"hint\" id=\"live-note\">Every second appears as it is measured; a stage's verdict fills in once its responses are in \
         (provisional until the run's end judges every stage again). \
         A page opened late gets the whole run so far.</p>\n\
         <div class=\"controls\" id=\"live-controls\">\
         <button type=\"button\" data-action=\"stop\">Stop</button> \
         <button type=\"button\" data-action=\"hold\">Hold stage</button> \
         <button type=\"button\" data-action=\"next\">Next stage</button> \
         <label class=\"pick\">rate <input id=\"live-rate\" type=\"number\" min=\"0\" step=\"any\" size=\"8\"></label> \
         <button type=\"button\" data-action=\"rate\">Set</button> \
         <span class=\"note\" id=\"live-answer\" role=\"status\"></span></div>\n</section>\n",
    );
    o.push_str("<section>\n<h2>Stages</h2>\n<table class=\"stages\" id=\"live-stages\"><thead><tr><th>stage</th><th>planned</th><th>verdict</th><th>why</th></tr></thead><tbody>");
    for s in &meta.stages {
        let planned = if (s.from - s.to).abs() < f64::EPSILON {
            format!("{} for {}s", crate::format::rate(Some(s.from)), s.duration_s)
        } else {
            format!(
                "{} → {} over {}s",
                crate::format::rate(Some(s.from)),
                crate::format::rate(Some(s.to)),
                s.duration_s
            )
        };
        let _ = write!(
            o,
            "<tr><th>{}</th><td>{}</td><td class=\"live-v\">…</td><td class=\"live-why\"></td></tr>",
            escape(&s.name),
            escape(&planned)
        );
    }
    o.push_str("</tbody></table>\n</section>\n");
    o.push_str(
        "<section>\n<h2>Steps, last second</h2>\n<table class=\"steps\" id=\"live-steps\"><thead><tr><th>step</th>\
         <th>throughput</th><th>failed</th><th>p50</th><th>p90</th><th>p99</th></tr></thead><tbody></tbody></table>\n</section>\n",
    );
    o.push_str(
        "<section>\n<h2>Over time</h2>\n<p class=\"hint\">One time axis for every chart, as in the report: hover one to read \
         all at that second, drag to zoom, double-click to zoom out. Dashed vertical lines are stage boundaries; \
         solid violet ones are actions by hand.</p>\n",
    );
    for c in data["time_charts"].as_array().into_iter().flatten() {
        frame(&mut o, c["id"].as_str().unwrap_or(""), c["title"].as_str().unwrap_or(""), "", "");
    }
    frame(
        &mut o,
        "watch",
        "Watched metrics and probes",
        "Sampled from the target and the generator while the run goes, and each probe check; pick one by source.",
        "<label class=\"pick\">metric <select id=\"watch-select\"></select></label>",
    );
    o.push_str("</section>\n");
    o.push_str(
        "<section>\n<h2>Failing exchanges</h2>\n<p class=\"hint\" id=\"live-failing-note\">None so far. The first few of each \
         step and kind appear as they fail, as they were (secrets redacted): open one to read it.</p>\n\
         <div class=\"exchanges\" id=\"live-failing\"></div>\n</section>\n",
    );
    close_with(&mut o, "the live run", &data, LIVE_JS);
    o
}

/// One second as the page draws it: a line of JSON (an SSE `data:` line).
/// `shown`: the failing exchanges already sent over the run, so that the
/// page gets the first few of each step and kind, as `failures.jsonl` keeps
/// them, whatever the failure rate.
pub fn second_event(s: &Second<'_>, shown: &mut SampleBound) -> String {
    let iv = s.interval;
    let secs = iv.length.as_secs_f64().max(1e-9);
    let st = &iv.stats;
    let mut steps = Vec::new();
    for (step, stats) in iv.by_step() {
        let name = s.step_names.get(usize::from(step)).cloned().unwrap_or_else(|| step.to_string());
        let mut o = figures(&stats, secs);
        o.insert("name".into(), name.into());
        steps.push(Value::Object(o));
    }
    let mut o = figures(st, secs);
    let failures: Map<String, Value> =
        st.failures.nonzero().into_iter().map(|(k, n)| (k.name().to_string(), json!(n as f64 / secs))).collect();
    o.insert("t".into(), json!(s.t));
    o.insert("len".into(), json!(round(secs)));
    o.insert("stage".into(), s.stage.into());
    o.insert("draining".into(), s.draining.into());
    o.insert("target".into(), json!(s.target().map(|t| round(t / secs))));
    o.insert("achieved".into(), json!(round(st.arrivals_answered as f64 / secs)));
    o.insert("in_flight".into(), json!(iv.in_flight));
    o.insert("failures".into(), Value::Object(failures));
    o.insert("max".into(), json!(ms(st, 1.0)));
    // Streamed answers' figures, where the second has them.
    for streamed in &STREAMED {
        let h = st.histogram(streamed.kind);
        if !h.is_empty() {
            o.insert(streamed.key.into(), json!(round(h.quantile(streamed.q).as_secs_f64() * 1000.0)));
        }
    }
    o.insert("steps".into(), Value::Array(steps));
    if !s.events.is_empty() {
        o.insert("events".into(), json!(s.events));
    }
    // What was watched since the second before, as `watch.jsonl` and
    // `probe.jsonl` have it: a few lines a second.
    if !s.watched.is_empty() {
        o.insert("watch".into(), json!(s.watched));
    }
    if !s.probes.is_empty() {
        o.insert("probes".into(), json!(s.probes));
    }
    let failing: Vec<FailureLine> = iv
        .samples
        .iter()
        .flat_map(|(key, list)| list.iter().map(move |sample| (key, sample)))
        .filter(|(key, _)| shown.admit(*key))
        .map(|(key, sample)| FailureLine::of(s.step_names, key, sample))
        .collect();
    if !failing.is_empty() {
        o.insert("failing".into(), json!(failing));
    }
    // The stages that closed with this second, judged as the run's end
    // judges them (provisional: the end judges them again on everything).
    if !s.stages.is_empty() {
        let verdicts: Vec<Value> = s
            .stages
            .iter()
            .map(|c| json!({"index": c.index, "name": c.name, "verdict": c.judged.verdict, "reasons": c.judged.reasons, "slo": c.judged.slo}))
            .collect();
        o.insert("verdicts".into(), Value::Array(verdicts));
    }
    script_json(&Value::Object(o))
}

/// Throughput, failures and latency quantiles of one aggregate (the
/// second's, or a step's).
fn figures(st: &Stats, secs: f64) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("rate".into(), json!(round(st.completed as f64 / secs)));
    o.insert("failed".into(), json!(round(st.failures.total() as f64 / secs)));
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        o.insert(name.into(), json!(ms(st, q)));
    }
    o
}

/// A latency quantile in ms, or nothing when no request ended.
fn ms(st: &Stats, q: f64) -> Option<f64> {
    (!st.latency.is_empty()).then(|| round(st.latency.quantile(q).as_secs_f64() * 1000.0))
}

/// Four significant digits: more than a chart or an HDR histogram shows.
fn round(v: f64) -> f64 {
    super::charts::sig(v).unwrap_or(0.0)
}

/// Each stage's verdict, its reasons and SLO lines, and the run's
/// headline, as the run concluded them (the summary's own types).
pub fn stages_event(summary: &RunSummary) -> String {
    let stages: Vec<Value> = summary
        .stages
        .iter()
        .map(|s| json!({"name": s.figures.name, "verdict": s.verdict, "reasons": s.reasons, "slo": s.slo}))
        .collect();
    let verdict = summary.verdict.as_ref();
    script_json(&json!({
        "stages": stages,
        "result": verdict.map(|v| v.verdict.result),
        "headline": verdict.map(|v| v.headline.as_str()),
        "why": verdict.and_then(|v| v.why.as_deref()),
    }))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use perfops_core::measure::{Interval, Key};

    use super::*;

    /// Second `t` of `iv`, in stage `stage`, with nothing else in it.
    fn second<'a>(iv: &'a Interval, t: u32, stage: &'a str, step_names: &'a [String]) -> Second<'a> {
        Second {
            interval: iv,
            t,
            start: Duration::from_secs(t.into()),
            stage,
            draining: false,
            step_names,
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        }
    }

    fn stats(values: u64) -> Stats {
        let mut stats = Stats::default();
        for v in 1..=values {
            stats.latency.record(Duration::from_micros(v * 37 % 900_000));
        }
        stats.completed = values;
        stats.arrivals_answered = values;
        stats
    }

    /// A second's event: the figures of the whole and of each step, named.
    #[test]
    fn a_second_event_carries_the_figures_of_the_second_and_its_steps() {
        let parts = vec![(Key { stage: 0, step: 0 }, stats(100)), (Key { stage: 0, step: 1 }, stats(50))];
        let iv = Interval {
            parts,
            stats: stats(150),
            target: Some(200.0),
            in_flight: 7,
            length: Duration::from_secs(1),
            ..Interval::empty(4)
        };
        let names = vec!["login".to_string(), "orders".to_string()];
        let s = second(&iv, 4, "warm", &names);
        let v: Value = serde_json::from_str(&second_event(&s, &mut SampleBound::default())).expect("json");
        assert_eq!(v["t"], 4);
        assert_eq!(v["stage"], "warm");
        assert_eq!(v["achieved"], 150.0);
        assert_eq!(v["target"], 200.0);
        assert_eq!(v["in_flight"], 7);
        assert!(v["p99"].as_f64().unwrap() > v["p50"].as_f64().unwrap());
        assert_eq!(v["steps"][1]["name"], "orders");
        assert_eq!(v["steps"][1]["rate"], 50.0);
        // No events key when nothing was done by hand: the line stays short.
        assert!(v.get("events").is_none());
        // One line: an SSE data field must not hold a newline.
        assert!(!second_event(&s, &mut SampleBound::default()).contains('\n'));
    }

    /// A second with streamed answers carries their figures under the keys
    /// of the page's held-back streams chart; one without carries none.
    #[test]
    fn a_second_carries_its_streamed_answers_figures() {
        use perfops_core::measure::HistogramKind;
        let mut st = stats(10);
        for ms in [100, 200, 300] {
            st.histogram_mut(HistogramKind::FirstEvent).record(Duration::from_millis(ms));
        }
        let iv = Interval { stats: st, length: Duration::from_secs(1), ..Interval::empty(4) };
        let s = second(&iv, 1, "s", &[]);
        let v: Value = serde_json::from_str(&second_event(&s, &mut SampleBound::default())).expect("json");
        let p95 = v["first_event_p95"].as_f64().expect("first_event_p95");
        assert!((299.0..=301.0).contains(&p95), "{v}");
        assert!(v.get("ttft_p95").is_none() && v.get("itl_p99").is_none(), "no LLM answer, no key: {v}");
        // The page holds the chart back with those keys.
        let page = page(&RunMeta::default());
        for key in ["first_event_p95", "ttft_p95", "itl_p99"] {
            assert!(page.contains(&format!("\"key\":\"{key}\"")), "{key} in the pending chart");
        }
    }

    /// An action by hand that took effect in a second travels with it, for
    /// the page to draw as a marker.
    #[test]
    fn a_second_carries_its_actions_by_hand() {
        use perfops_core::pipeline::control::ControlEvent;
        let iv = Interval { length: Duration::from_secs(1), ..Interval::empty(7) };
        let events = [ControlEvent {
            t: 7.2,
            action: "rate".into(),
            value: Some(300.0),
            stage: "steady".into(),
            by: "page".into(),
        }];
        let s = Second { events: &events, ..second(&iv, 7, "steady", &[]) };
        let v: Value = serde_json::from_str(&second_event(&s, &mut SampleBound::default())).expect("json");
        assert_eq!(v["events"][0]["action"], "rate");
        assert_eq!(v["events"][0]["value"], 300.0);
        assert_eq!(v["events"][0]["t"], 7.2);
        // A second where nothing ended has no quantiles, not zeros.
        assert!(v["p99"].is_null(), "{v}");
    }

    /// A stage that closed with a second rides on it with its verdict, its
    /// reasons and SLO lines, by name and index; none on other seconds.
    #[test]
    fn a_second_carries_the_verdicts_of_the_stages_that_closed_with_it() {
        use perfops_core::analysis::verdict::{Judged, StageVerdict};
        use perfops_core::pipeline::ClosedStage;
        let iv = Interval { length: Duration::from_secs(1), ..Interval::empty(9) };
        let closed = [ClosedStage {
            index: 0,
            name: "warm".into(),
            judged: Judged {
                verdict: StageVerdict::Fails,
                reasons: vec!["p99 < 10ms".into()],
                broke: Vec::new(),
                slo: Vec::new(),
                expected_rate: None,
                generator_limited: false,
            },
        }];
        let s = Second { stages: &closed, ..second(&iv, 9, "peak", &[]) };
        let v: Value = serde_json::from_str(&second_event(&s, &mut SampleBound::default())).expect("json");
        assert_eq!(v["verdicts"][0]["name"], "warm");
        assert_eq!(v["verdicts"][0]["index"], 0);
        assert_eq!(v["verdicts"][0]["verdict"], serde_json::to_value(StageVerdict::Fails).unwrap());
        assert_eq!(v["verdicts"][0]["reasons"][0], "p99 < 10ms");
        let none: Value =
            serde_json::from_str(&second_event(&Second { stages: &[], ..s }, &mut SampleBound::default()))
                .expect("json");
        assert!(none.get("verdicts").is_none(), "{none}");
    }

    /// A second's failing exchanges ride on it as `failures.jsonl`'s lines
    /// (the step named, the kind's name), and over the run no more than the
    /// first few of each step and kind, whatever the failure rate.
    #[test]
    fn a_second_carries_its_failing_exchanges_bounded_over_the_run() {
        use perfops_core::measure::{FailureKind, FailureSample, FailureSamples, PER_KEY};
        let names = vec!["login".to_string(), "orders".to_string()];
        let second_of = |k: u32, n: usize| {
            let mut samples = FailureSamples::default();
            for i in 0..n {
                let sample = FailureSample {
                    t: f64::from(k) + i as f64 / 100.0,
                    status: Some(503),
                    body: Some(format!("busy {k}.{i}")),
                    ..FailureSample::default()
                };
                samples.add((1, FailureKind::Http5xx), sample);
            }
            Interval { samples, length: Duration::from_secs(1), ..Interval::empty(k) }
        };
        let mut shown = SampleBound::default();
        let event = |iv: &Interval, shown: &mut SampleBound| -> Value {
            let s = second(iv, iv.index, "a", &names);
            serde_json::from_str(&second_event(&s, shown)).expect("json")
        };
        let first = event(&second_of(1, 2), &mut shown);
        assert_eq!(first["failing"].as_array().map(Vec::len), Some(2), "{first}");
        assert_eq!(first["failing"][0]["step"], "orders");
        assert_eq!(first["failing"][0]["kind"], FailureKind::Http5xx.name());
        assert_eq!(first["failing"][0]["status"], 503);
        assert_eq!(first["failing"][1]["body"], "busy 1.1");
        // The next second's are shown up to the key's few over the run...
        let next = event(&second_of(2, PER_KEY), &mut shown);
        assert_eq!(next["failing"].as_array().map(Vec::len), Some(PER_KEY - 2), "{next}");
        // ...then none: the key is full, and the line has no such field.
        let full = event(&second_of(3, PER_KEY), &mut shown);
        assert!(full.get("failing").is_none(), "{full}");
    }

    /// What was watched since the second before rides on it as
    /// `watch.jsonl`'s and `probe.jsonl`'s lines; none when nothing was read.
    #[test]
    fn a_second_carries_what_was_watched_since_the_last() {
        use perfops_core::telemetry::watched::Sample;
        let iv = Interval { length: Duration::from_secs(1), ..Interval::empty(2) };
        let watched =
            [Sample { t: 2.4, source: "prometheus http://x/metrics".into(), values: vec![("busy".into(), 3.0)] }];
        let s = Second { watched: &watched, ..second(&iv, 2, "a", &[]) };
        let v: Value = serde_json::from_str(&second_event(&s, &mut SampleBound::default())).expect("json");
        assert_eq!(v["watch"][0]["source"], "prometheus http://x/metrics");
        assert_eq!(v["watch"][0]["t"], 2.4);
        assert_eq!(v["watch"][0]["values"]["busy"], 3.0);
        assert!(v.get("probes").is_none(), "{v}");
        let none: Value =
            serde_json::from_str(&second_event(&Second { watched: &[], ..s }, &mut SampleBound::default()))
                .expect("json");
        assert!(none.get("watch").is_none(), "{none}");
    }

    /// The verdicts' event is the summary's own: each stage's verdict and
    /// reasons, and the run's headline.
    #[test]
    fn the_stages_event_is_what_the_run_concluded() {
        let summary: RunSummary =
            serde_json::from_str(include_str!("../../tests/fixtures/20261122T043000Z-orders-stepped/summary.json"))
                .expect("a summary");
        let v: Value = serde_json::from_str(&stages_event(&summary)).expect("json");
        assert_eq!(v["stages"].as_array().map(Vec::len), Some(summary.stages.len()));
        for (got, want) in v["stages"].as_array().unwrap().iter().zip(&summary.stages) {
            assert_eq!(got["name"], want.figures.name.as_str());
            assert_eq!(got["verdict"], serde_json::to_value(want.verdict).unwrap());
        }
        assert_eq!(v["headline"], summary.verdict.as_ref().unwrap().headline.as_str());
    }

    /// What `second_event` costs the collector thread (the module doc's figure).
    #[test]
    #[ignore = "a measurement, not a check"]
    #[allow(clippy::print_stdout)] // what it measured is its output
    fn second_event_cost() {
        let parts: Vec<(Key, Stats)> = (0..5).map(|step| (Key { stage: 0, step }, stats(20_000))).collect();
        let iv = Interval { parts, stats: stats(100_000), ..Interval::empty(3) };
        let names: Vec<String> = (0..5).map(|i| format!("step{i}")).collect();
        let s = Second { start: Duration::ZERO, ..second(&iv, 3, "a", &names) };
        let n = 1000;
        let began = Instant::now();
        for _ in 0..n {
            std::hint::black_box(second_event(&s, &mut SampleBound::default()));
        }
        println!("second_event, 5 steps: {:?}", began.elapsed() / n);
    }
}
