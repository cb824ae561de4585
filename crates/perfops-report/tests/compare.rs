//! The comparison from results directories on disk: the committed fixtures
//! (`tests/fixtures/`), and copies of them edited for one question each — the
//! same run twice, an older format, a newer one, a hostile name. That its page
//! draws is checked in Chromium by the `perfops` crate's `tests/compare.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use perfops_core::analysis::verdict::StageVerdict;
use perfops_report::compare::{self, CompareError, Options, ThroughputAt};
use perfops_report::html::Outcome;
use serde_json::Value;

const STEPPED: &str = "20261122T043000Z-orders-stepped";
const KILLED: &str = "20261123T091500Z-orders-killed";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A fresh directory, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "perfops-compare-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    /// A copy of fixture `name` as `as_name`, after `edit` had its say on
    /// its `meta.json` and `summary.json` (`None`: remove the file).
    fn copy(&self, name: &str, as_name: &str, edit: impl Fn(&str, Value) -> Option<Value>) -> PathBuf {
        let to = self.0.join(as_name);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(fixture(name)).unwrap() {
            let e = e.unwrap();
            let file = e.file_name().to_string_lossy().into_owned();
            if file.ends_with(".json") {
                let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
                if let Some(v) = edit(&file, v) {
                    std::fs::write(to.join(&file), serde_json::to_vec(&v).unwrap()).unwrap();
                }
            } else {
                std::fs::copy(e.path(), to.join(&file)).unwrap();
            }
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

fn unchanged(_: &str, v: Value) -> Option<Value> {
    Some(v)
}

/// The same run twice: every delta is zero, the capacities and throughputs equal.
#[test]
fn a_run_against_itself() {
    let s = Scratch::new("same");
    let again = s.copy(STEPPED, "again", unchanged);
    let c = compare::load(&[fixture(STEPPED), again]).unwrap().compare(Options::default());
    assert_eq!(c.capacity[0].text, "B orders and A orders hold the same capacity: 200/s vs 200/s");
    assert!(c.equal_p95.statements[0].text.starts_with("B orders carried the same throughput as A orders"), "{c:#?}");
    assert_eq!(c.stages.len(), 6);
    for row in c.stages.iter().chain(std::iter::once(&c.total)) {
        let d = row.cells[1].as_ref().unwrap().delta.unwrap();
        for x in [d.achieved_rate, d.p50_ms, d.p95_ms, d.p99_ms, d.error_ratio].into_iter().flatten() {
            assert_eq!(x.abs, 0.0, "{}: {d:?}", row.name);
        }
    }
    // Nothing to note but what format 1 measured (#11: the page's legend is format 2's).
    assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
    assert!(
        c.notes.iter().all(|n| n.contains("before results format 2") && !n.contains("like the others")),
        "{:?}",
        c.notes
    );
}

/// A summary of an older format — no verdict object, no version, no
/// percentiles beyond p50 — and no meta.json compares from what it has.
#[test]
fn an_older_format_compares_from_what_it_has() {
    let s = Scratch::new("older");
    let old = s.copy(STEPPED, "old", |file, mut v| {
        if file == "meta.json" {
            return None;
        }
        let o = v.as_object_mut().unwrap();
        o.remove("verdict");
        o.remove("version");
        for st in o.get_mut("stages").unwrap().as_array_mut().unwrap() {
            let l = st["latency_ms"].as_object_mut().unwrap();
            l.retain(|k, _| k == "p50" || k == "count");
        }
        Some(v)
    });
    let c = compare::load(&[fixture(STEPPED), old]).unwrap().compare(Options::default());
    assert_eq!(c.runs[1].capacity_rps, None);
    assert_eq!(c.runs[1].result, Outcome::Failed, "judged from its SLO lines");
    assert!(c.capacity[0].text.starts_with("B orders states no capacity"), "{}", c.capacity[0].text);
    let cell = c.stages[0].cells[1].as_ref().unwrap();
    assert_eq!((cell.p50_ms.is_some(), cell.p95_ms), (true, None));
    let d = cell.delta.unwrap();
    assert_eq!((d.p50_ms.map(|d| d.abs), d.p95_ms), (Some(0.0), None));
    // No p95 at all: nothing to say at equal p95, and it says so.
    assert_eq!(c.equal_p95.runs[1], ThroughputAt::NoData);
    assert!(c.equal_p95.statements[0].text.contains("not enough stages with a p95"), "{:?}", c.equal_p95);
    let text = compare::table(&c);
    assert!(text.contains("capacity: B orders states no capacity"), "{text}");
}

/// A killed run beside the stepped one: incomplete, its three recorded
/// stages compared, the rest "not run".
#[test]
fn a_killed_run_is_incomplete() {
    let c = compare::load(&[fixture(STEPPED), fixture(KILLED)]).unwrap().compare(Options::default());
    assert!(!c.runs[1].complete);
    assert!(c.notes.iter().any(|n| n.contains("B orders is incomplete")), "{:?}", c.notes);
    let ran: Vec<&str> = c
        .stages
        .iter()
        .filter(|r| r.cells[1].as_ref().is_some_and(|c| c.achieved_rate.is_some()))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(ran, ["50/s", "100/s", "150/s"]);
    assert_eq!(c.stages[5].cells[1].as_ref().unwrap().verdict, Some(StageVerdict::NotRun));
}

/// A results format newer than this build is refused, naming the file.
#[test]
fn a_newer_summary_is_refused() {
    let s = Scratch::new("newer");
    let newer = s.copy(STEPPED, "newer", |file, mut v| {
        if file == "summary.json" {
            v["version"] = (perfops_report::results::RESULTS_VERSION + 1).into();
        }
        Some(v)
    });
    let err = compare::load(&[fixture(STEPPED), newer]).err().expect("refused");
    assert!(
        matches!(err, CompareError::NewerFormat { file: "summary.json", version: v, .. } if v == u64::from(perfops_report::results::RESULTS_VERSION + 1)),
        "{err}"
    );
    let missing = s.0.join("missing");
    let err = compare::load(&[fixture(STEPPED), missing]).err().expect("refused");
    assert!(err.to_string().contains("cannot read"), "{err}");
}

/// The page escapes what the runs say, and overlays both runs' seconds on one x.
#[test]
fn the_page_escapes_and_overlays() {
    let s = Scratch::new("page");
    let hostile = s.copy(STEPPED, "hostile", |file, mut v| {
        if file == "meta.json" || file == "summary.json" {
            v["name"] = "</script><script>alert(1)</script>".into();
        }
        Some(v)
    });
    let runs = compare::load(&[hostile, fixture(KILLED)]).unwrap();
    let c = runs.compare(Options::default());
    let html = runs.html(&c);
    assert!(!html.contains("<script>alert(1)"), "a name ended a script element");
    assert!(html.contains("&lt;/script&gt;&lt;script&gt;alert(1)"), "the name is shown, escaped");
    let open = r#"<script type="application/json" id="perfops-data">"#;
    let start = html.find(open).unwrap() + open.len();
    let data: Value = serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()]).unwrap();
    let charts = data["time_charts"].as_array().unwrap();
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["rate", "latency", "errors"]);
    assert_eq!(data["xy_charts"].as_array().map(Vec::len), Some(1));
    assert!(html.contains("data-charts-expected=\"4\""));
    // One x for both: the longer run's seconds; the killed run's achieved
    // rate stops where it stopped.
    let rate = &charts[0];
    let x = rate["x"].as_array().unwrap();
    // Seconds recorded: lines that are JSON (the killed run's last was cut mid-write).
    let secs = |run: &str| {
        let text = std::fs::read_to_string(fixture(run).join("series.jsonl")).unwrap();
        text.lines().filter(|l| serde_json::from_str::<Value>(l).is_ok()).count()
    };
    let (stepped_secs, killed_secs) = (secs(STEPPED), secs(KILLED));
    assert_eq!(killed_secs, 23);
    assert_eq!(x.len(), stepped_secs.max(killed_secs));
    let killed = rate["series"].as_array().unwrap().iter().find(|s| s["label"] == "B orders achieved").unwrap();
    let values = killed["values"].as_array().unwrap();
    assert!(
        values[..killed_secs].iter().all(Value::is_number) && values[killed_secs..].iter().all(Value::is_null),
        "{values:?}"
    );
}
