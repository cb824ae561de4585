//! The HTML report from results directories on disk: the committed fixtures
//! (`tests/fixtures/`, see `make_fixtures.rs`), and directories made here
//! for one question each (hostile strings, an hour of seconds, missing
//! files). What the page says is checked in its text; what its charts get,
//! in the embedded data, against a golden file (`UPDATE_GOLDEN=1` rewrites
//! it). That the charts draw is checked in a real browser by the `perfops`
//! crate's `tests/report.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use perfops_report::html::{ReportError, render};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

const STEPPED: &str = "20261122T043000Z-orders-stepped";
const KILLED: &str = "20261123T091500Z-orders-killed";

/// A fresh directory, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "perfops-report-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    /// A copy of fixture `name` whose `summary.json` `edit` rewrote.
    fn copy_with_summary(&self, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
        let dir = self.copy_of(name);
        let path = dir.join("summary.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&path, v.to_string()).unwrap();
        dir
    }

    /// A copy of fixture `name` inside this directory.
    fn copy_of(&self, name: &str) -> PathBuf {
        let to = self.0.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(fixture(name)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
        to
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The JSON embedded in the page for its charts.
fn data_of(html: &str) -> Value {
    let open = r#"<script type="application/json" id="perfops-data">"#;
    let start = html.find(open).expect("the page embeds its data") + open.len();
    let end = start + html[start..].find("</script>").expect("the data element ends");
    serde_json::from_str(&html[start..end]).expect("the embedded data is JSON")
}

/// `needles` appear in `html` in this order.
#[track_caller]
fn in_order(html: &str, needles: &[&str]) {
    let mut at = 0;
    for n in needles {
        match html[at..].find(n) {
            Some(i) => at += i + n.len(),
            None => panic!("{n:?} missing, or not after {:?}", &html[at.saturating_sub(80)..at]),
        }
    }
}

#[track_caller]
fn golden(name: &str, got: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let text = format!("{}\n", serde_json::to_string_pretty(got).unwrap());
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}); create it with UPDATE_GOLDEN=1", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{} differs from the data rendered, first at line {}:\n  want: {}\n  got:  {}\n(UPDATE_GOLDEN=1 rewrites it)",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or(""),
            text.lines().nth(line).unwrap_or("")
        );
    }
}

/// The page of the stepped run reads in the order of the questions: the
/// verdict, capacity and breaking point, why, then the SLO by stage, the
/// stage table, the findings with their evidence, and only then the charts.
#[test]
fn stepped_run_reads_verdict_first_then_stages_then_charts() {
    let html = render(&fixture(STEPPED)).unwrap();
    in_order(
        &html,
        &[
            "<h1>orders</h1>",
            "FAILED",
            "holds 200/s; breaks at 250/s",
            "capacity</div><div class=\"v\">200/s",
            "breaks at</div><div class=\"v\">250/s",
            // A summary from before #32 names no why: its first diagnostic, as it did.
            "<div class=\"why\"><span class=\"k\">Why</span> <b>Worker pool full, CPU idle",
            "<h2>SLO</h2>",
            "<th>p95 &lt; 500ms</th>",
            "<h2>Stages</h2>",
            "<th>250/s</th>",
            "fails",
            "p95 &lt; 500ms (measured 1658 ms)",
            "<th>300/s</th>",
            "inconclusive",
            "<h2>Findings</h2>",
            "Worker pool full, CPU idle",
            "<code>demo_workers_busy</code> = 10 at 0:41",
            "Liveness probe timed out",
            "<h2>Over time</h2>",
            "data-chart=\"rate\"",
            "data-chart=\"latency\"",
            "data-chart=\"failures\"",
            "data-chart=\"load\"",
            "data-chart=\"probe\"",
            "data-chart=\"watch\"",
            "data-chart=\"hockey\"",
            "data-chart=\"spectrum\"",
            "scenario.yaml",
        ],
    );
    // The SLO per stage: 200/s met p95 (55.3 ms), 250/s did not (1657.9 ms).
    in_order(&html, &["<th>p95 &lt; 500ms</th>", "✓</span> 55.3ms", "✗</span> 1657.9ms"]);
    assert!(html.contains("data-charts-expected=\"8\""));
    assert!(!html.contains("Incomplete"), "a complete run has no incomplete banner");
}

/// #11: a run recorded in results format 1 counted the answered requests only;
/// its page must not say its latency includes the failures (it did, once
/// format 2 made that the rule). The stepped fixture is format 1.
#[test]
fn a_format_1_run_says_its_latency_is_the_answered_requests() {
    let html = render(&fixture(STEPPED)).unwrap();
    assert!(html.contains("recorded before results format 2"), "no format-1 note");
    assert!(!html.contains("failures at the time they took"), "a format-1 run described with format 2's meaning");
}

/// Self-contained: no resource is loaded from anywhere (the one link, to
/// uPlot's home, is only followed if clicked).
#[test]
fn the_page_loads_nothing() {
    let html = render(&fixture(STEPPED)).unwrap();
    for needle in ["<script src", "<link", "@import", "url(http", "<img", "<iframe", "fetch("] {
        assert!(!html.contains(needle), "the page contains {needle:?}");
    }
    assert_eq!(html.matches("href=\"http").count(), 1, "one link: uPlot's credit");
    assert!(!html.contains("src=\"http") && !html.contains("src='http"));
    assert_eq!(html.matches("id=\"perfops-data\"").count(), 1, "the data is embedded once");
    assert!(html.contains("uPlot v1.6.32") || html.contains("(v1.6.32)"), "uPlot is inlined");
}

/// The embedded chart data of the stepped fixture, pinned.
#[test]
fn chart_data_of_the_stepped_run_is_golden() {
    let data = data_of(&render(&fixture(STEPPED)).unwrap());
    golden("orders-stepped.data.json", &data);
    // What the golden file pins, said in words.
    let ids: Vec<&str> = data["time_charts"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["rate", "latency", "failures", "load", "probe"]);
    assert_eq!(data["restarts"], json!([49.0, 55.0]), "restarts where the probe failed a third time");
    assert_eq!(data["stages"][4]["verdict"], "fails");
    let sources: Vec<&str> =
        data["watch"]["groups"].as_array().unwrap().iter().map(|g| g["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["process", "prometheus http://127.0.0.1:8080/metrics", "generator"]);
    // The watch chart opens on the metric the top diagnostic cites.
    let d = &data["watch"]["default"];
    let g = &data["watch"]["groups"][d["group"].as_u64().unwrap() as usize];
    assert_eq!(g["metrics"][d["metric"].as_u64().unwrap() as usize]["name"], "demo_workers_busy");
    let stages = data["hockey"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 6);
    assert!(stages[4]["p99"].as_f64().unwrap() > 1000.0 && stages[3]["p99"].as_f64().unwrap() < 100.0);
    // Spectrum: whole run, service time, and one line per stage.
    assert_eq!(data["spectrum"]["series"].as_array().unwrap().len(), 8);
}

/// Actions by hand (`events.jsonl`) are in the charts' data, each at its
/// instant with its words, pinned; a run without the file has none (the
/// fixtures' golden data above are unchanged).
#[test]
fn actions_by_hand_are_marked_on_the_time_charts() {
    let tmp = Scratch::new("events");
    let dir = tmp.copy_of(STEPPED);
    std::fs::write(
        dir.join("events.jsonl"),
        concat!(
            r#"{"t":12.0,"action":"rate","value":300.0,"stage":"100/s","by":"ctl"}"#,
            "\n",
            r#"{"t":20.0,"action":"hold","stage":"150/s","by":"page"}"#,
            "\n",
            r#"{"t":41.0,"action":"stop","stage":"250/s","by":"page"}"#,
            "\n",
        ),
    )
    .unwrap();
    let html = render(&dir).unwrap();
    let data = data_of(&html);
    golden("orders-steered.events.json", &data["events"]);
    assert_eq!(data["events"][0], json!({"t": 12.0, "label": "rate 300", "by": "ctl"}));
    assert!(html.contains("function eventMarks("), "the page draws them");
    assert!(data_of(&render(&fixture(STEPPED)).unwrap()).get("events").is_none());
}

/// #32: the why is the verdict's, tied to the rule that failed, and a run
/// that passed shows none (a PASSED report showed the first diagnostic in a
/// WHY box); the diagnostics are findings, below.
#[test]
fn the_why_box_is_the_verdicts_and_a_pass_has_none() {
    let scratch = Scratch::new("why");
    // (why, the verdict's result and why, the why box wanted)
    let cases = [
        // A failed run's why, as its summary says it.
        (
            "failed",
            "failed",
            Some("errors < 1% (measured 3.20%): step orders: 32 of 1000 failed (http_5xx 32)"),
            Some("errors &lt; 1% (measured 3.20%): step orders: 32 of 1000 failed (http_5xx 32)"),
        ),
        // A passed run: no box, whatever was found (the fixture has findings).
        ("passed", "passed", None, None),
        // ... even with a why written (by hand) beside it.
        ("passed, why", "passed", Some("anything"), None),
    ];
    for (why, result, text, want) in cases {
        let dir = scratch.copy_with_summary(STEPPED, |v| {
            v["verdict"]["result"] = json!(result);
            v["verdict"]["why"] = json!(text);
        });
        let html = render(&dir).unwrap();
        let boxed = html.find("<div class=\"why\">").map(|at| {
            let b = &html[at..];
            b[b.find("<b>").unwrap() + 3..b.find("</b>").unwrap()].to_string()
        });
        assert_eq!(boxed.as_deref(), want, "{why}");
        assert!(html.contains("<h2>Findings</h2>"), "{why}: the diagnostics are listed as findings");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// #32: "best stage, achieved" showed a failed stage's rate (250/s answered
/// 205.3/s and failed): it is the best of the stages that held, or says none held.
#[test]
fn the_best_stage_card_never_shows_a_failed_stage() {
    let card = |html: &str| -> String {
        let label = "best stage that held, achieved</div><div class=\"v\">";
        let at = html.find(label).expect("the card") + label.len();
        html[at..at + html[at..].find('<').unwrap()].to_string()
    };
    assert_eq!(card(&render(&fixture(STEPPED)).unwrap()), "199.8/s", "200/s held, 250/s (205.3/s) failed");
    let scratch = Scratch::new("best");
    let dir = scratch.copy_with_summary(STEPPED, |v| {
        for s in v["stages"].as_array_mut().unwrap() {
            s["verdict"] = json!("fails");
        }
    });
    assert_eq!(card(&render(&dir).unwrap()), "none held");
}

/// #32: in the percentile spectrum, latency and service time are drawn in
/// two colours (both were black), each apart from every stage's line, and
/// named in the legend by their labels.
#[test]
fn the_spectrum_draws_latency_and_service_time_apart() {
    let data = data_of(&render(&fixture(STEPPED)).unwrap());
    let series = data["spectrum"]["series"].as_array().unwrap();
    let color = |label: &str| -> String {
        let s = series.iter().find(|s| s["label"] == label).unwrap_or_else(|| panic!("no {label} in {series:?}"));
        s["color"].as_str().unwrap().to_string()
    };
    let (latency, service) = (color("latency, whole run"), color("service time, whole run"));
    assert_ne!(latency, service);
    let others: Vec<&str> = series.iter().skip(2).map(|s| s["color"].as_str().unwrap()).collect();
    assert_eq!(others.len(), 6, "one line per stage");
    assert!(!others.contains(&latency.as_str()) && !others.contains(&service.as_str()), "{series:?}");
}

/// A killed run (no summary, a half-written last line) renders from what it
/// recorded: a clear banner, no verdict, stages it never reached marked.
#[test]
fn a_killed_run_renders_as_incomplete() {
    let html = render(&fixture(KILLED)).unwrap();
    in_order(
        &html,
        &[
            "Incomplete: the run was interrupted.",
            "INCOMPLETE",
            "No verdict: the run stopped 0:23 in, during stage 150/s.",
            "<th>150/s</th><td>150/s</td><td class=\"\">149.7/s</td>",
            "<tr class=\"s-not-run\"><th>200/s</th>",
            "series.jsonl: 1 line(s) that are not JSON objects were skipped",
        ],
    );
    let data = data_of(&html);
    assert_eq!(data["duration_s"], json!(23.0));
    // The 23 seconds recorded, and the last again at its end.
    assert_eq!(data["time_charts"][0]["x"].as_array().unwrap().len(), 24);
    golden("orders-killed.data.json", &data);
}

/// Strings from the files are text, never markup: in the page they are
/// escaped, in the embedded JSON `<` is `\u003c`, so nothing can close the
/// data's `<script>` element.
/// A run that never broke says so in a neutral tile: "did not break" was
/// in the red of a breaking point.
#[test]
fn a_run_that_did_not_break_is_not_shown_in_red() {
    let scratch = Scratch::new("unbroken");
    let dir = scratch.copy_with_summary(STEPPED, |v| v["verdict"]["breaks_at_rps"] = Value::Null);
    let html = render(&dir).unwrap();
    in_order(
        &html,
        &[
            "<div class=\"tile good\"><div class=\"k\">capacity</div><div class=\"v\">200/s",
            "<div class=\"tile \"><div class=\"k\">breaks at</div><div class=\"v\">did not break",
        ],
    );
}

/// A sweep's report: its levels, what the fit says, and two charts against
/// the users; and on the time axis, the second between two loads (each
/// starts on a whole second) is a gap in every line, not a line across it.
#[test]
fn a_sweep_shows_its_levels_and_the_second_between_loads_is_a_gap() {
    let scratch = Scratch::new("sweep");
    let level = |users: u32, throughput: f64, p50: f64, p99: f64| {
        json!({"concurrency": users, "throughput": throughput, "p50_ms": p50, "p99_ms": p99,
               "p50_ratio": p50 / 20.0, "throughput_ratio": throughput / 48.0, "error_ratio": 0.0})
    };
    let dir = scratch.copy_with_summary(STEPPED, |v| {
        v["sweep"] = json!({
            "levels": [level(1, 48.0, 20.0, 22.0), level(2, 94.0, 20.5, 25.0), level(4, 188.0, 21.0, 29.0),
                       level(8, 192.0, 41.5, 46.0), level(16, 185.0, 42.0, 1065.0)],
            "usl": {"lambda": 49.7, "sigma": 0.0196, "kappa": 0.013288, "r_squared": 0.94, "rmse_ratio": 0.078},
            "predicted_peak_concurrency": 8.6, "predicted_peak_throughput": 211.7,
            "best_level": 8, "concurrency_cap": 4.1,
        });
    });
    // Second 10 was never written: the second between two loads.
    let series = dir.join("series.jsonl");
    let text = std::fs::read_to_string(&series).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.contains("\"t\":10,")).collect();
    assert_eq!(kept.len() + 1, text.lines().count(), "the fixture has a second 10");
    std::fs::write(&series, kept.join("\n") + "\n").unwrap();

    let html = render(&dir).unwrap();
    in_order(
        &html,
        &[
            // No capacity tile: a sweep measures throughput at each concurrency.
            "<div class=\"k\">best level</div><div class=\"v\">192/s at 8 users</div>",
            "<div class=\"k\">USL peak</div><div class=\"v\">212/s at ~9 users</div>",
            "<h2>Stages</h2>",
            "<h2>Concurrency sweep</h2>",
            "<tr class=\"best\" title=\"the best level measured\"><th>8</th><td>192/s</td><td>4×</td>",
            "<li>USL fit: lambda 49.7/s per user, sigma (contention) 0.0196, kappa (coherency) 0.013288; R² 0.940, error 7.8%</li>",
            "<li>predicted peak: 211.7/s at about 9 users</li>",
            "<li>throughput stops growing: the target serves about 4 requests at once",
            "data-chart=\"sweep-throughput\"",
            "data-chart=\"sweep-latency\"",
            "<h2>Findings</h2>",
        ],
    );
    let data = data_of(&html);
    let xy = data["xy_charts"].as_array().expect("a sweep's charts");
    assert_eq!(xy.len(), 2, "{xy:?}");
    let (measured, fit) = (&xy[0]["series"][0], &xy[0]["series"][1]);
    assert_eq!(measured["x"], json!([1.0, 2.0, 4.0, 8.0, 16.0]));
    assert_eq!(measured["y"], json!([48.0, 94.0, 188.0, 192.0, 185.0]));
    // The fitted curve, from 1 user to the largest level (the peak, 8.6, lies within it).
    let (xs, ys) = (fit["x"].as_array().unwrap(), fit["y"].as_array().unwrap());
    assert_eq!((xs.first(), xs.last(), fit["points"].as_bool()), (Some(&json!(1.0)), Some(&json!(16.0)), Some(false)));
    assert!((ys[0].as_f64().unwrap() - 49.7).abs() < 0.01, "X(1) = lambda: {fit}");
    assert_eq!(xy[1]["log"], true);
    assert_eq!(xy[1]["series"][1]["y"], json!([22.0, 25.0, 29.0, 46.0, 1065.0]));

    let rate = data["time_charts"].as_array().unwrap().iter().find(|c| c["id"] == "rate").unwrap();
    let x = rate["x"].as_array().unwrap();
    // Second 9 again at its end, then a break in the second no one recorded.
    let at = x.iter().position(|t| t == &json!(10.5)).expect("a break inside second 10");
    assert_eq!((&x[at - 1], &x[at + 1]), (&json!(10.0), &json!(11.0)));
    for s in rate["series"].as_array().unwrap() {
        assert_eq!(s["values"][at], Value::Null, "{} is broken at second 10", s["label"]);
        assert_eq!(s["values"][at - 1], s["values"][at - 2], "{} holds second 9 to its end", s["label"]);
        assert!(!s["values"][at + 1].is_null(), "{}", s["label"]);
    }
    assert!(!html.contains("<div class=\"k\">capacity</div>"), "a sweep names no capacity");
    // A run that is no sweep has no such charts.
    assert!(data_of(&render(&fixture(STEPPED)).unwrap()).get("xy_charts").is_none());
}

/// An interrupted run's whole-run target is the mean of what ran, over the
/// time it ran: with the stages it never reached (and the planned length
/// of the one cut short) it read 175/s beside 67.9/s achieved, in red.
#[test]
fn an_interrupted_runs_target_is_what_ran() {
    let scratch = Scratch::new("interrupted-target");
    // Stopped 5 s into 200/s: it ran half its time, 250/s and 300/s never ran.
    let dir = scratch.copy_with_summary(STEPPED, |v| {
        v["interrupted"] = json!(true);
        v["stages"][3]["duration_s"] = json!(5.0);
        v["stages"][3]["verdict"] = json!("inconclusive");
        for i in [4, 5] {
            v["stages"][i]["duration_s"] = json!(0.0);
            v["stages"][i]["verdict"] = json!("not run");
        }
    });
    let html = render(&dir).unwrap();
    // (50 + 100 + 150) x 10 s + 200 x 5 s over 35 s.
    in_order(&html, &["<tr class=\"total\"><th>whole run</th><td>114.3/s</td>"]);
}

#[test]
fn strings_from_files_are_escaped() {
    let scratch = Scratch::new("escape");
    let dir = scratch.copy_of(STEPPED);
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let edit = |file: &str, f: &dyn Fn(&mut Value)| {
        let path = dir.join(file);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&path, v.to_string()).unwrap();
    };
    edit("meta.json", &|v| v["name"] = json!(evil));
    edit("summary.json", &|v| {
        v["verdict"]["headline"] = json!(evil);
        v["diagnostics"][0]["title"] = json!(evil);
        v["stages"][0]["name"] = json!(evil);
        v["warnings"] = json!([evil]);
    });
    let mut watch = std::fs::read_to_string(dir.join("watch.jsonl")).unwrap();
    watch.push_str(&json!({"t": 3.0, "source": "</script>", "values": {evil: 1.0}}).to_string());
    std::fs::write(dir.join("watch.jsonl"), watch).unwrap();
    std::fs::write(dir.join("scenario.yaml"), format!("name: \"{evil}\"\n")).unwrap();

    let html = render(&dir).unwrap();
    assert!(!html.contains(evil), "a raw hostile string reached the page");
    assert!(!html.contains("<script>alert"), "{}", &html[..2000]);
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"));
    // Scripts: the error capture, the data, uPlot, the report's own; no more.
    assert_eq!(html.matches("<script").count(), 4);
    let data = data_of(&html);
    let sources: Vec<&str> =
        data["watch"]["groups"].as_array().unwrap().iter().map(|g| g["source"].as_str().unwrap()).collect();
    assert!(sources.contains(&"</script>"), "{sources:?}");
}

/// An hour-long run: 3600 seconds, 40 watched metrics every 2 s, a probe
/// every 10 s. Charts are cut to about their width in points, and the page
/// stays under 3 MiB.
#[test]
fn an_hour_long_run_stays_small() {
    let scratch = Scratch::new("hour");
    let dir = scratch.0.join("20261122T000000Z-hour");
    std::fs::create_dir_all(&dir).unwrap();
    let meta = json!({"name": "hour", "model": "open", "started_at": "2026-11-22T00:00:00Z",
        "stages": [{"name": "ramp", "from": 10.0, "to": 1000.0, "duration_s": 1800.0},
                   {"name": "hold", "from": 1000.0, "to": 1000.0, "duration_s": 1800.0}]});
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let mut series = String::new();
    for t in 0..3600u32 {
        let f = f64::from(t);
        let rate = if t < 1800 { 10.0 + 990.0 * f / 1800.0 } else { 1000.0 };
        let wobble = (f * 0.37).sin();
        let lat = |base: f64| {
            json!({"count": 1000, "p50": base, "p90": base * 1.8, "p95": base * 2.1,
            "p99": base * 3.0 + wobble, "p99_9": base * 5.0, "max": base * 9.0 + if t % 97 == 0 { 400.0 } else { 0.0 }})
        };
        let line = json!({"t": t, "length_s": 1.0, "stage": if t < 1800 { "ramp" } else { "hold" },
            "target_rate": rate, "achieved_rate": rate * (0.99 + 0.01 * wobble), "sent": rate as u64, "completed": rate as u64,
            "succeeded": rate as u64, "failed": t % 13, "dropped": 0, "in_flight": 40 + t % 7,
            "failures": {"timeout": t % 13, "http_5xx": t % 5}, "latency_ms": lat(20.0 + f / 100.0), "service_ms": lat(19.0 + f / 100.0)});
        series.push_str(&line.to_string());
        series.push('\n');
    }
    std::fs::write(dir.join("series.jsonl"), series).unwrap();
    let mut watch = String::new();
    for t in (0..3600u32).step_by(2) {
        let values: serde_json::Map<String, Value> = (0..40)
            .map(|i| {
                (format!("metric_{i}{{instance=\"a\"}}"), json!(f64::from(t * i % 1000) + (f64::from(t) * 0.1).sin()))
            })
            .collect();
        watch.push_str(
            &json!({"t": t, "source": "prometheus http://127.0.0.1:9/metrics", "values": values}).to_string(),
        );
        watch.push('\n');
    }
    std::fs::write(dir.join("watch.jsonl"), watch).unwrap();
    let probe: String = (0..360)
        .map(|i| json!({"t": i * 10, "probe": "liveness", "ok": i % 50 != 0, "ms": 2.0}).to_string() + "\n")
        .collect();
    std::fs::write(dir.join("probe.jsonl"), probe).unwrap();

    let html = render(&dir).unwrap();
    assert!(html.len() < 3 * 1024 * 1024, "{} bytes for an hour", html.len());
    let data = data_of(&html);
    for c in data["time_charts"].as_array().unwrap() {
        let n = c["x"].as_array().unwrap().len();
        if c["id"] != "probe" {
            assert!((300..=1200).contains(&n), "{}: {n} points", c["id"]);
        }
    }
    // The spikes of `max` every 97 s survive the cut (LTTB keeps extremes).
    let latency = &data["time_charts"][1];
    let max = latency["series"].as_array().unwrap().iter().find(|s| s["label"] == "max").unwrap();
    let spikes = max["values"].as_array().unwrap().iter().filter(|v| v.as_f64().unwrap_or(0.0) > 400.0).count();
    assert!(spikes >= 30, "only {spikes} of 38 spikes kept");
    assert!(html.contains("<th>ramp</th>") && html.contains("<th>hold</th>"));
}

/// Files and fields that are missing mean "not available": a directory with
/// nothing but a bare series still renders; one with nothing to report, or
/// that is not a directory, is an error that says what it wants.
#[test]
fn missing_files_and_fields_are_not_errors() {
    let scratch = Scratch::new("lenient");
    let bare = scratch.0.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(bare.join("series.jsonl"), "{\"t\":0}\n{\"t\":1,\"stage\":\"x\",\"achieved_rate\":5}\n[1,2]\n")
        .unwrap();
    std::fs::write(bare.join("summary.json"), "{ not json").unwrap();
    let html = render(&bare).unwrap();
    assert!(html.contains("summary.json is not valid JSON"), "the note says why it was ignored");
    assert!(html.contains("Incomplete"));
    let data = data_of(&html);
    assert!(data["spectrum"].is_null() && data["watch"].is_null(), "no hlog, no watch: no such charts");

    let empty = scratch.0.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = render(&empty).unwrap_err();
    assert!(matches!(err, ReportError::NothingToReport(_)), "{err}");
    assert!(err.to_string().contains("neither series.jsonl nor summary.json"), "{err}");
    let err = render(&bare.join("series.jsonl")).unwrap_err();
    assert!(matches!(err, ReportError::NotADirectory(_)), "{err}");
    let err = render(&scratch.0.join("missing")).unwrap_err();
    assert!(matches!(err, ReportError::Unreadable { .. }), "{err}");
}

/// Issue #14: a run of several protocols names them in its header and, per
/// step, in the steps table; the new protocols' failure kinds (a gRPC
/// status, an HTTP/2 reset or GOAWAY, a WebSocket close) appear by name in
/// that table and in the failures chart, as HTTP's do.
#[test]
fn protocols_and_their_failure_kinds_are_named() {
    let scratch = Scratch::new("protocols");
    let dir = scratch.copy_of(STEPPED);
    let path = dir.join("summary.json");
    let mut summary: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let step = |name: &str, failures: Value| {
        let mut f = summary["total"].clone();
        f["name"] = json!(name);
        f["failures"] = failures;
        f["error_ratio"] = json!(0.02);
        f
    };
    let steps = json!([
        step("say", json!({"grpc_unavailable": 41, "grpc_deadline_exceeded": 2})),
        step("orders", json!({"reset_stream": 3, "goaway": 1})),
        step("chat", json!({"ws_close": 5})),
    ]);
    summary["steps"] = steps;
    summary["protocols"] = json!([
        {"protocol": "grpc over h2c", "steps": ["say"]},
        {"protocol": "h2 (ALPN)", "steps": ["orders"]},
        {"protocol": "websocket", "steps": ["chat"]},
    ]);
    std::fs::write(&path, summary.to_string()).unwrap();
    // Two seconds with those failures in series.jsonl: the chart's series.
    let series = std::fs::read_to_string(dir.join("series.jsonl")).unwrap();
    let lines: Vec<String> = series
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if i < 2 {
                v["failures"] = json!({"grpc_unavailable": 20, "reset_stream": 1, "goaway": 1, "ws_close": 2});
            }
            v.to_string()
        })
        .collect();
    std::fs::write(dir.join("series.jsonl"), lines.join("\n") + "\n").unwrap();

    let html = render(&dir).unwrap();
    in_order(
        &html,
        &[
            "<p class=\"meta\">",
            "grpc over h2c: say; h2 (ALPN): orders; websocket: chat",
            "<h2>Stages</h2>",
            "<h2>Steps</h2>",
            "<th>say</th><td class=\"left\">grpc over h2c</td>",
            "grpc_unavailable 41, grpc_deadline_exceeded 2",
            "<th>orders</th><td class=\"left\">h2 (ALPN)</td>",
            "reset_stream 3, goaway 1",
            "<th>chat</th><td class=\"left\">websocket</td>",
            "ws_close 5",
        ],
    );
    let data = data_of(&html);
    let failures = data["time_charts"].as_array().unwrap().iter().find(|c| c["id"] == "failures").unwrap().clone();
    let names: Vec<&str> = failures["series"].as_array().unwrap().iter().filter_map(|s| s["label"].as_str()).collect();
    for kind in ["grpc_unavailable", "reset_stream", "goaway", "ws_close"] {
        assert!(names.contains(&kind), "the failures chart has {kind}: {names:?}");
    }

    // A summary from before #14 has no protocols: nothing is claimed.
    let old = scratch.copy_of(KILLED);
    let html = render(&old).unwrap();
    assert!(!html.contains("title=\"protocol\""), "no protocol claimed for results that do not say one");
}
