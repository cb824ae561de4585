//! The comparison of small hand-made results: deltas, capacity sentences,
//! throughput at equal p95, unmatched stages, incomplete and newer runs.

use std::collections::BTreeMap;

use StageVerdict::{Fails, Holds};
use perfops_core::analysis::verdict::{RunResult, RunVerdict, SloCheck};
use perfops_core::measure::{Counter, HistogramSummary, SeriesCounters, Stats, SummaryCounters};

use super::*;
use crate::run::GeneratorUse;
use crate::run::{Figures, ProtocolUse, RunMeta, RunSummary, SeriesLine, StageSummary, VerdictSummary};

/// A stage: name, target, achieved, p50, p95, p99, error ratio, verdict.
type S = (&'static str, f64, f64, f64, f64, f64, f64, StageVerdict);

/// Figures with only what the comparison reads: its failures, of 1000
/// requests, are 5xx answers.
fn figures(name: &str, target: Option<f64>, achieved: f64, latency_ms: HistogramSummary, error_ratio: f64) -> Figures {
    let failed = (error_ratio * 1000.0).round() as u64;
    Figures {
        name: name.into(),
        duration_s: 10.0,
        target_rate: target,
        achieved_rate: achieved,
        counters: SummaryCounters::of(&Stats { sent: 1000, completed: 1000, ..Stats::default() }),
        succeeded: 1000 - failed,
        failed,
        error_ratio,
        failures: BTreeMap::from([("http_5xx".to_string(), failed)]),
        latency_ms,
        service_ms: HistogramSummary::default(),
        latency_ok_ms: None,
        service_ok_ms: None,
        histograms: Default::default(),
    }
}

fn summary(name: &str, capacity: Option<f64>, breaks: Option<f64>, slo: &[&str], stages: &[S]) -> RunSummary {
    let stage = |s: &S| StageSummary {
        figures: figures(
            s.0,
            Some(s.1),
            s.2,
            HistogramSummary { count: 1000, p50: s.3, p95: s.4, p99: s.5, ..HistogramSummary::default() },
            s.6,
        ),
        from_s: 0.0,
        verdict: Some(s.7),
        reasons: Vec::new(),
        slo: Vec::new(),
        by_hand: Vec::new(),
    };
    let result = if breaks.is_some() { RunResult::Failed } else { RunResult::Passed };
    RunSummary {
        protocols: Vec::new(),
        format: "perfops.summary".into(),
        version: 1,
        name: name.into(),
        target: String::new(),
        model: "open".into(),
        started_at: String::new(),
        elapsed_s: 0.0,
        interrupted: false,
        aborted: None,
        verdict: Some(VerdictSummary {
            verdict: RunVerdict { result, capacity_rps: capacity, breaks_at_rps: breaks, breaks_at_stage: None },
            headline: String::new(),
            why: None,
        }),
        stages: stages.iter().map(stage).collect(),
        steps: Vec::new(),
        total: figures(
            "total",
            None,
            100.0,
            HistogramSummary { count: 1, p95: 10.0, ..HistogramSummary::default() },
            0.0,
        ),
        slo: slo.iter().map(|l| SloCheck { slo: (*l).into(), value: None, passed: true }).collect(),
        diagnostics: Vec::new(),
        probes: BTreeMap::new(),
        limit: None,
        sweep: None,
        generator: GeneratorUse::default(),
        warnings: Vec::new(),
        failures: Vec::new(),
    }
}

fn model(dir: &str, summary: RunSummary) -> Model {
    Model::new(RunFiles { dir_name: dir.into(), summary: Some(summary), ..RunFiles::default() })
}

fn killed(dir: &str, name: &str, seconds: &[(u32, &str, f64)]) -> Model {
    let series = seconds
        .iter()
        .map(|&(t, stage, rate)| SeriesLine {
            t,
            length_s: 1.0,
            stage: stage.into(),
            target_rate: Some(rate),
            achieved_rate: rate,
            counters: {
                let mut c = SeriesCounters::default();
                c[Counter::Completed] = rate as u64;
                c
            },
            succeeded: rate as u64,
            ..SeriesLine::default()
        })
        .collect();
    let meta = RunMeta { name: name.into(), ..RunMeta::default() };
    Model::new(RunFiles { dir_name: dir.into(), meta: Some(meta), series, ..RunFiles::default() })
}

const THREADS: [S; 2] = [
    ("200/s", 200.0, 199.5, 20.5, 21.0, 24.0, 0.0, Holds),
    ("800/s", 800.0, 480.0, 900.0, 1800.0, 2100.0, 0.05, Fails),
];
const ASYNC: [S; 2] =
    [("200/s", 200.0, 200.0, 20.4, 20.8, 22.0, 0.0, Holds), ("800/s", 800.0, 799.0, 20.9, 22.0, 30.0, 0.0, Holds)];

fn threads_vs_async() -> Comparison {
    let a = model("t", summary("threads", Some(200.0), Some(800.0), &["p95 < 250ms"], &THREADS));
    let b = model("a", summary("async", Some(800.0), None, &["p95 < 250ms"], &ASYNC));
    compare_models(&[a, b], Options::default())
}

#[test]
fn deltas_against_the_baseline() {
    let c = threads_vs_async();
    assert_eq!(c.stages.len(), 2);
    // (stage, field, abs, pct) of B against A.
    let cases: [(usize, &str, f64, Option<f64>); 6] = [
        (0, "achieved", 0.5, Some(0.5 / 199.5 * 100.0)),
        (0, "p95", -0.2, Some(-0.2 / 21.0 * 100.0)),
        (1, "achieved", 319.0, Some(319.0 / 480.0 * 100.0)),
        (1, "p50", -879.1, Some(-879.1 / 900.0 * 100.0)),
        (1, "p99", -2070.0, Some(-2070.0 / 2100.0 * 100.0)),
        // Errors: a difference of ratios; no % of the baseline's 5%.
        (1, "errors", -0.05, Some(-100.0)),
    ];
    for (row, field, abs, pct) in cases {
        let d = c.stages[row].cells[1].as_ref().unwrap().delta.unwrap();
        let got = match field {
            "achieved" => d.achieved_rate,
            "p50" => d.p50_ms,
            "p95" => d.p95_ms,
            "p99" => d.p99_ms,
            _ => d.error_ratio,
        }
        .unwrap();
        assert!((got.abs - abs).abs() < 1e-9, "{row} {field}: {got:?}");
        assert!((got.pct.unwrap() - pct.unwrap()).abs() < 1e-9, "{row} {field}: {got:?}");
    }
    assert!(c.stages.iter().all(|r| r.cells[0].as_ref().unwrap().delta.is_none()), "the baseline has no delta");
    assert_eq!(c.stages[1].cells[1].as_ref().unwrap().matched_by, MatchedBy::Name);
}

#[test]
fn capacity_sentences() {
    let c = threads_vs_async();
    assert_eq!(
        c.capacity[0].text,
        "B async holds 4.0x the capacity of A threads: 800/s vs 200/s (B async did not break: its capacity is at least that)"
    );
    assert_eq!(c.capacity[0].ratio, Some(4.0));
    let run = |cap: Option<f64>, breaks: Option<f64>, result: Outcome| RunInfo {
        label: "X".into(),
        name: "x".into(),
        dir: String::new(),
        target: None,
        protocol: None,
        started_at: None,
        complete: result != Outcome::Incomplete,
        result,
        capacity_rps: cap,
        breaks_at_rps: breaks,
        why: None,
        any_held: false,
        kind: None,
    };
    let cases = [
        (
            run(Some(400.0), Some(450.0), Outcome::Failed),
            run(Some(380.0), Some(400.0), Outcome::Failed),
            "X x holds 5% less capacity than X x: 380/s vs 400/s",
        ),
        (
            run(Some(400.0), Some(450.0), Outcome::Failed),
            run(Some(440.0), Some(480.0), Outcome::Failed),
            "X x holds 10% more capacity than X x: 440/s vs 400/s",
        ),
        (
            run(Some(400.0), Some(450.0), Outcome::Failed),
            run(Some(405.0), Some(450.0), Outcome::Failed),
            "X x and X x hold the same capacity: 405/s vs 400/s",
        ),
        (
            run(Some(400.0), Some(450.0), Outcome::Failed),
            run(None, None, Outcome::Incomplete),
            "X x is incomplete (no summary.json); X x holds 400/s",
        ),
        (
            run(None, Some(50.0), Outcome::Failed),
            run(Some(100.0), Some(150.0), Outcome::Failed),
            "X x holds 100/s; X x held no stage",
        ),
        (
            // An older summary.json: judged, but no capacity named.
            run(Some(100.0), Some(150.0), Outcome::Failed),
            run(None, None, Outcome::Failed),
            "X x states no capacity (its summary.json has no verdict per stage); X x holds 100/s",
        ),
        (
            // Neither broke: two lower bounds rank nothing (two sweeps of
            // other levels read "B holds 52% less capacity than A").
            run(Some(800.0), None, Outcome::Passed),
            run(Some(400.0), None, Outcome::Passed),
            "no capacity ranking: X x did not break at 400/s (its capacity is at least that); \
             X x did not break at 800/s (its capacity is at least that); run higher to find out",
        ),
        (
            // B did not break below A's capacity: B may hold more.
            run(Some(400.0), Some(450.0), Outcome::Failed),
            run(Some(300.0), None, Outcome::Passed),
            "no capacity ranking: X x did not break at 300/s (its capacity is at least that); \
             X x holds 400/s and breaks at 450/s; run higher to find out",
        ),
        (
            // A did not break above B's capacity: A holds more, by at least that.
            run(Some(400.0), None, Outcome::Passed),
            run(Some(300.0), Some(350.0), Outcome::Failed),
            "X x holds 25% less capacity than X x: 300/s vs 400/s (X x did not break: its capacity is at least that)",
        ),
        (
            // A did not break below B's capacity: A may hold as much.
            run(Some(400.0), None, Outcome::Passed),
            run(Some(600.0), Some(650.0), Outcome::Failed),
            "no capacity ranking: X x holds 600/s and breaks at 650/s; \
             X x did not break at 400/s (its capacity is at least that); run higher to find out",
        ),
        (
            run(None, None, Outcome::NoSlo),
            run(None, None, Outcome::NoSlo),
            "no capacity to compare: X x has no SLO, so no verdict; X x has no SLO, so no verdict",
        ),
        (
            // A sweep names no capacity: said as such, not as an older summary's.
            RunInfo { kind: Some("sweep".into()), ..run(None, None, Outcome::Passed) },
            run(Some(175.0), Some(200.0), Outcome::Failed),
            "X x holds 175/s; X x is a sweep: throughput at each concurrency, not a capacity (`limit` finds one)",
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(capacity_statement(&a, &b, 1).text, want);
    }
}

#[test]
fn throughput_at_the_slo_p95() {
    // L = 100 ms from the SLO. A: 300 + 80 * 50/350 = 311.43/s at 100 ms;
    // B: 290 + 60 * 20/520 = 292.31/s: 6.1% less.
    let a = [
        ("100/s", 100.0, 100.0, 10.0, 20.0, 30.0, 0.0, Holds),
        ("200/s", 200.0, 200.0, 12.0, 30.0, 40.0, 0.0, Holds),
        ("300/s", 300.0, 300.0, 20.0, 50.0, 90.0, 0.0, Holds),
        ("400/s", 400.0, 380.0, 200.0, 400.0, 600.0, 0.0, Fails),
    ];
    let b = [
        ("100/s", 100.0, 100.0, 10.0, 22.0, 30.0, 0.0, Holds),
        ("200/s", 200.0, 200.0, 12.0, 35.0, 40.0, 0.0, Holds),
        ("300/s", 300.0, 290.0, 40.0, 80.0, 120.0, 0.0, Fails),
        ("400/s", 400.0, 350.0, 300.0, 600.0, 900.0, 0.0, Fails),
    ];
    let slo = ["p99 < 1s", "p95 < 100ms"];
    let runs = [
        model("a", summary("in-process", Some(300.0), Some(400.0), &slo, &a)),
        model("b", summary("redis", Some(200.0), Some(300.0), &slo, &b)),
    ];
    let c = compare_models(&runs, Options::default());
    let e = &c.equal_p95;
    assert_eq!(e.p95_ms, Some(100.0));
    assert_eq!(e.source, "the SLO `p95 < 100ms` of A in-process");
    let (ra, rb) = (300.0 + 80.0 * 50.0 / 350.0, 290.0 + 60.0 * 20.0 / 520.0);
    assert!((e.runs[0].rate().unwrap() - ra).abs() < 1e-9 && (e.runs[1].rate().unwrap() - rb).abs() < 1e-9, "{e:?}");
    assert_eq!(
        e.statements[0].text,
        "B redis lost 6.1% throughput at equal p95 (100.0ms): 292.3/s vs 311.4/s for A in-process"
    );
    assert!((e.statements[0].ratio.unwrap() - rb / ra).abs() < 1e-12);

    // --at-p95 overrides; without an SLO, the baseline's p95 at its capacity stage (50 ms).
    let c = compare_models(&runs, Options { at_p95_ms: Some(30.0) });
    assert_eq!((c.equal_p95.p95_ms, c.equal_p95.source.as_str()), (Some(30.0), "--at-p95"));
    let runs = [
        model("a", summary("in-process", Some(300.0), Some(400.0), &[], &a)),
        model("b", summary("redis", Some(200.0), Some(300.0), &[], &b)),
    ];
    let c = compare_models(&runs, Options::default());
    assert_eq!(c.equal_p95.p95_ms, Some(50.0));
    assert_eq!(c.equal_p95.source, "the p95 of A in-process at its capacity stage (300/s)");
}

#[test]
fn errors_answered_fast_are_no_throughput() {
    // B's second stage is fast (p95 30 ms) but half its answers are errors:
    // at p95 40 ms it carried 500 * 0.5 = 250/s, not 500/s.
    let a =
        [("100/s", 100.0, 100.0, 10.0, 20.0, 30.0, 0.0, Holds), ("500/s", 500.0, 500.0, 20.0, 40.0, 50.0, 0.0, Holds)];
    let b =
        [("100/s", 100.0, 100.0, 10.0, 20.0, 30.0, 0.0, Holds), ("500/s", 500.0, 500.0, 20.0, 30.0, 50.0, 0.5, Fails)];
    let runs = [
        model("a", summary("a", Some(500.0), None, &["p95 < 40ms"], &a)),
        model("b", summary("b", Some(100.0), Some(500.0), &["p95 < 40ms"], &b)),
    ];
    let c = compare_models(&runs, Options::default());
    assert_eq!(c.equal_p95.runs, vec![ThroughputAt::At { rate: 500.0 }, ThroughputAt::AtLeast { rate: 250.0 }]);
    assert!(c.equal_p95.statements[0].text.contains("cannot be told"), "{:?}", c.equal_p95.statements);
}

/// Each run says why it broke, as its own headline does (review 2's tester,
/// C1: compare said "breaks at 200/s" and left the why in each run's report).
#[test]
fn each_run_says_why_it_broke() {
    let stages = [
        ("100/s", 100.0, 100.0, 10.0, 20.0, 30.0, 0.0, Holds),
        ("200/s", 200.0, 150.0, 10.0, 900.0, 950.0, 0.0, Fails),
    ];
    let mut broke = summary("threads", Some(100.0), Some(200.0), &["p95 < 250ms"], &stages);
    broke.diagnostics = vec![perfops_core::analysis::diagnose::Diagnostic {
        kind: "pool_bound".into(),
        title: "pool-bound: 10 of 10 workers busy with the CPU at 11%".into(),
        detail: String::new(),
        stage: Some("200/s".into()),
        evidence: Vec::new(),
    }];
    let mut held = summary("async", Some(200.0), None, &["p95 < 250ms"], &stages[..1]);
    held.diagnostics = broke.diagnostics.clone(); // a note beside a pass is no "why"
    let c = compare_models(&[model("a", broke), model("b", held)], Options::default());
    assert_eq!(c.runs[0].why.as_deref(), Some("pool-bound: 10 of 10 workers busy with the CPU at 11%"));
    assert_eq!(c.runs[1].why, None);
    assert!(text::table(&c).contains("why: pool-bound: 10 of 10 workers busy"), "{}", text::table(&c));
}

/// Refused connects are not in the achieved rate (only answered arrivals
/// are): 300/s with 30% refused achieved 210/s, all good; taking the error
/// share off again plotted 147/s (review 2).
#[test]
fn refused_connects_are_not_taken_off_twice() {
    let a = [("300/s", 300.0, 300.0, 10.0, 20.0, 30.0, 0.0, Holds)];
    let b = [("300/s", 300.0, 210.0, 10.0, 20.0, 30.0, 0.3, Fails)];
    let mut sb = summary("b", None, Some(300.0), &["p95 < 40ms"], &b);
    sb.stages[0].figures.succeeded = 700;
    sb.stages[0].figures.failures = BTreeMap::from([("connect_refused".to_string(), 300)]);
    let runs = [model("a", summary("a", Some(300.0), None, &["p95 < 40ms"], &a)), model("b", sb)];
    let c = compare_models(&runs, Options::default());
    assert_eq!(c.equal_p95.runs[1], ThroughputAt::AtLeast { rate: 210.0 }, "{:?}", c.equal_p95);
}

#[test]
fn renamed_and_unmatched_stages() {
    let a = model("a", summary("a", Some(200.0), None, &[], &[("warm", 100.0, 100.0, 1.0, 2.0, 3.0, 0.0, Holds)]));
    let b = model(
        "b",
        summary(
            "b",
            Some(300.0),
            None,
            &[],
            &[("step 1", 102.0, 101.0, 1.0, 2.5, 3.0, 0.0, Holds), ("step 2", 300.0, 300.0, 1.0, 2.0, 3.0, 0.0, Holds)],
        ),
    );
    let c = compare_models(&[a, b], Options::default());
    assert_eq!(c.stages.len(), 2);
    let matched = c.stages[0].cells[1].as_ref().unwrap();
    assert_eq!((matched.stage.as_str(), matched.matched_by), ("step 1", MatchedBy::TargetRate));
    assert!(c.stages[1].cells[0].is_none());
    assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    assert!(c.notes[0].starts_with("stage step 2 of B b has no counterpart"), "{:?}", c.notes);
    let text = table(&c);
    assert!(text.contains("B b (step 1)") && text.contains("(no such stage)"), "{text}");
}

#[test]
fn an_incomplete_run_compares_from_its_seconds() {
    let a = model("a", summary("orders", Some(200.0), Some(800.0), &[], &THREADS));
    let b = killed("b", "orders", &[(0, "200/s", 200.0), (1, "200/s", 200.0), (2, "800/s", 790.0)]);
    let c = compare_models(&[a, b], Options::default());
    assert!(!c.runs[1].complete);
    assert_eq!(c.runs[1].result, Outcome::Incomplete);
    assert_eq!(c.capacity[0].text, "B orders is incomplete (no summary.json); A orders holds 200/s");
    assert!(c.notes.iter().any(|n| n.starts_with("B orders is incomplete")), "{:?}", c.notes);
    // Rebuilt from the series: stage 800/s achieved 790/s.
    let cell = c.stages[1].cells[1].as_ref().unwrap();
    assert_eq!(cell.achieved_rate, Some(790.0));
    assert!((cell.delta.unwrap().achieved_rate.unwrap().abs - 310.0).abs() < 1e-9);
}

#[test]
fn text_lines_are_aligned_and_carry_the_deltas() {
    let text = table(&threads_vs_async());
    assert!(text.starts_with("compare: A threads (baseline) vs B async\n"), "{text}");
    assert!(text.contains("capacity: B async holds 4.0x the capacity of A threads: 800/s vs 200/s"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("stage ")).expect("a header");
    let row =
        lines.iter().find(|l| l.trim_start().starts_with("Δ vs A") && l.contains("+319.0")).expect("a delta line");
    assert!(row.contains("(+66.5%)") && row.contains("-879.1ms") && row.contains("-5.00pp"), "{text}");
    // Every line of the table ends its p99 column at the same place.
    let end = lines[header].find("p99").unwrap() + 3;
    for l in &lines[header + 1..] {
        if l.starts_with("note:") || l.contains("(no such stage)") {
            continue;
        }
        let before: String = l.chars().take(end).collect();
        assert!(!before.ends_with(' ') || before.trim().is_empty(), "misaligned p99 column:\n{l}\n{text}");
    }
}

#[test]
fn a_newer_results_format_is_refused() {
    let dir = std::env::temp_dir().join(format!("perfops-compare-newer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("meta.json"), r#"{"format": "perfops.meta", "version": 99, "name": "future"}"#).unwrap();
    std::fs::write(dir.join("series.jsonl"), "{\"t\": 0, \"achieved_rate\": 1}\n").unwrap();
    let err = load(&[dir.clone(), dir.clone()]).err().expect("refused");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(matches!(err, CompareError::NewerFormat { version: 99, file: "meta.json", known: 2, .. }), "{err}");
    assert!(err.to_string().contains("compare with a newer perfops"), "{err}");
    assert!(matches!(load(std::slice::from_ref(&dir)), Err(CompareError::TooFew)));
}

/// #14: the most common A/B of HTTP/2 is an h1 run against an h2 run: the
/// comparison says so first, and says nothing when both spoke the same or
/// either's results do not say.
#[test]
fn a_change_of_protocol_is_said_plainly() {
    let with = |name: &str, protocols: &[(&str, &[&str])]| {
        let mut s = summary(
            name,
            Some(100.0),
            Some(200.0),
            &["p95 < 100ms"],
            &[("s1", 100.0, 99.0, 5.0, 9.0, 12.0, 0.0, Holds)],
        );
        s.protocols = protocols
            .iter()
            .map(|(p, steps)| ProtocolUse {
                protocol: p.to_string(),
                steps: steps.iter().map(|s| s.to_string()).collect(),
            })
            .collect();
        model(name, s)
    };
    let h1 = || with("h1", &[("http/1.1 (ALPN)", &["orders"])]);
    let h2 = || with("h2", &[("h2 (ALPN)", &["orders"])]);
    // (runs, the protocol statements, why)
    let cases: Vec<(Vec<Model>, Vec<&str>, &str)> = vec![
        (
            vec![h1(), h2()],
            vec![
                "B h2 spoke h2 (ALPN), A h1 http/1.1 (ALPN): the deltas below are the protocols' as much as the target's",
            ],
            "h1 against h2: said",
        ),
        (vec![h2(), h2()], vec![], "the same protocol: nothing to say"),
        (vec![with("old", &[]), h2()], vec![], "a run from before #14 does not say: no claim"),
    ];
    for (models, want, why) in cases {
        let c = compare_models(&models, Options::default());
        let got: Vec<&str> = c.protocols.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(got, want, "{why}");
        if !want.is_empty() {
            let text = table(&c);
            assert!(text.contains("protocol: h2 (ALPN)") && text.contains(want[0]), "{why}: {text}");
        }
    }
}

/// A stage changed by hand in one run says so beside its verdict, in the
/// table and the JSON; the other run's stage, untouched, says nothing more.
#[test]
fn a_stage_changed_by_hand_says_so_beside_its_verdict() {
    let mut steered = summary("async", None, None, &["p95 < 250ms"], &ASYNC);
    steered.stages[1].verdict = Some(StageVerdict::Inconclusive);
    steered.stages[1].by_hand = vec![perfops_core::pipeline::control::ControlEvent {
        t: 12.0,
        action: "rate".into(),
        value: Some(1200.0),
        stage: "800/s".into(),
        by: "ctl".into(),
    }];
    let c = compare_models(
        &[model("t", summary("threads", Some(200.0), Some(800.0), &["p95 < 250ms"], &THREADS)), model("a", steered)],
        Options::default(),
    );
    let table = text::table(&c);
    let marked: Vec<&str> = table.lines().filter(|l| l.ends_with("inconclusive (changed by hand)")).collect();
    assert_eq!(marked.len(), 1, "{table}");
    assert!(!table.lines().any(|l| l.ends_with("fails (changed by hand)")), "{table}");
    let json = serde_json::to_value(&c).unwrap().to_string();
    assert_eq!(json.matches("\"by_hand\":true").count(), 1, "{json}");
}

/// A step's stream histograms are compared run against run, from the
/// summaries alone: a step only one run has shows `-` in the other; runs
/// without any show no such lines.
#[test]
fn stream_histograms_are_compared_per_step() {
    use perfops_core::measure::HistogramFigures;
    let step = |first_event_ms: u64, events: u64| {
        let mut st = Stats::default();
        st.first_event.record(std::time::Duration::from_millis(first_event_ms));
        st.events.record_count(events);
        let mut f = figures("feed", None, 5.0, HistogramSummary::default(), 0.0);
        f.histograms = HistogramFigures::of(&st);
        f
    };
    let mut a = summary("a", None, None, &[], &THREADS);
    a.steps.push(step(12, 10));
    let mut b = summary("b", None, None, &[], &ASYNC);
    b.steps.push(step(30, 8));
    let c = compare_models(&[model("a", a), model("b", b)], Options::default());
    // (figure, count?, baseline's p50, other's p50)
    let want = [("first_event_ms", false, 12.0, 30.0), ("events", true, 10.0, 8.0)];
    assert_eq!(c.histograms.len(), want.len(), "{:?}", c.histograms);
    for (row, (figure, count, p_a, p_b)) in c.histograms.iter().zip(want) {
        assert_eq!((row.step.as_str(), row.figure.as_str(), row.count), ("feed", figure, count));
        let p50 = |i: usize| row.runs[i].map(|[p50, ..]| p50);
        assert!(p50(0).is_some_and(|v| (v - p_a).abs() < 0.05) && p50(1).is_some_and(|v| (v - p_b).abs() < 0.05));
    }
    let text = super::text::table(&c);
    assert!(text.contains("streams (p50 / p95 / p99") && text.contains("first_event_ms"), "{text}");
    // Nothing streamed: no rows, no lines, no key in the JSON.
    let quiet = threads_vs_async();
    assert!(quiet.histograms.is_empty() && !super::text::table(&quiet).contains("streams"));
    assert!(serde_json::to_value(&quiet).unwrap().get("histograms").is_none());
}
