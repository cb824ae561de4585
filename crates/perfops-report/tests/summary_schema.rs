//! `schema/summary.schema.json` against what writes `summary.json`: a
//! summary made of the writer's own types with every optional part filled
//! (so each object the writer can emit is checked, and a field added to one
//! of them without the schema fails here), the same with the optional parts
//! empty, and the committed fixture. The schema closes every object
//! (`additionalProperties` / `unevaluatedProperties: false`); a test shows
//! that it does, so the first ones can fail.
//!
//! And against what reads it: the same types read every summary the schema
//! accepts back to what was written, and a table of mutations says, for
//! each, whether the schema and the reader refuse it; where they differ, the
//! case says why (the reader also reads older summaries, and tolerates
//! fields it does not know).
//!
//! Real summaries of `run`, `limit` and `sweep` are checked end to end in
//! `crates/perfops/tests/metrics.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use perfops_core::analysis::diagnose::{Diagnostic, Evidence};
use perfops_core::analysis::usl::{self, Observation, UslFit};
use perfops_core::analysis::verdict::{RunResult, RunVerdict, SloCheck, StageVerdict};
use perfops_core::measure::{FailureKind, FailureSample, Stats, Timings};
use perfops_report::failures::FailureGroup;
use perfops_report::run::{
    Figures, LimitAttempt, LimitSearch, ProbeSummary, ProtocolUse, RunSummary, StageSummary, SweepLevel, SweepResult,
    VerdictSummary,
};
use perfops_report::run::{GeneratorUse, Pacer};
use serde_json::{Value, json};

const SCHEMA: &str = include_str!("../../../schema/summary.schema.json");
const FIXTURE: &str = include_str!("fixtures/20261122T043000Z-orders-stepped/summary.json");

fn errors(v: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    perfops_testkit::schema::errors(&schema, v)
}

#[track_caller]
fn assert_valid(v: &Value, what: &str) {
    let e = errors(v);
    assert!(e.is_empty(), "{what} does not match the schema:\n{}\n{v:#}", e.join("\n"));
}

fn stats() -> Stats {
    let mut s = Stats { sent: 12, iterations: 10, completed: 11, bytes_in: 900, bytes_out: 300, ..Stats::default() };
    for ms in [3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377] {
        s.latency.record(Duration::from_millis(ms));
        s.service.record(Duration::from_millis(ms / 2));
    }
    s.failures.add(FailureKind::Http5xx);
    s.failures.add(FailureKind::Timeout);
    // A stream's histograms: written only when filled.
    s.first_event.record(Duration::from_millis(4));
    s.event_gap.record(Duration::from_millis(20));
    s.events.record_count(10);
    s.stream.record(Duration::from_millis(180));
    // An LLM step's histograms and counters: likewise.
    s.ttft.record(Duration::from_millis(90));
    s.ttft_sent.record(Duration::from_millis(80));
    s.itl.record(Duration::from_millis(25));
    s.tpot.record(Duration::from_millis(24));
    s.output_tps.record_count(40);
    s.tokens_in = 12;
    s.tokens_out = 160;
    s
}

/// A summary with every part the writer has, each optional one filled.
fn full() -> RunSummary {
    let s = stats();
    let slo = vec![SloCheck { slo: "p95 < 500ms".into(), value: Some(233.0), passed: true }];
    let stage = |name: &str, from_s: f64| StageSummary {
        figures: Figures::new(name, &s, 10.0, Some(50.0), 49.5),
        from_s,
        verdict: Some(StageVerdict::Fails),
        reasons: vec!["errors < 1% (measured 18.2%)".into()],
        slo: slo.clone(),
        by_hand: vec![perfops_core::pipeline::control::ControlEvent {
            t: 12.0,
            action: "rate".into(),
            value: Some(300.0),
            stage: name.into(),
            by: "ctl".into(),
        }],
    };
    RunSummary {
        format: "perfops.summary".into(),
        version: perfops_report::results::RESULTS_VERSION,
        name: "orders".into(),
        target: "demo:async (http://127.0.0.1:40000)".into(),
        protocols: vec![
            ProtocolUse { protocol: "h2 (ALPN)".into(), steps: vec!["orders".into()] },
            ProtocolUse { protocol: "websocket (TLS)".into(), steps: vec!["chat".into(), "chat messages".into()] },
        ],
        model: "open".into(),
        started_at: "2026-11-22T04:30:00Z".into(),
        elapsed_s: 20.2,
        interrupted: false,
        aborted: Some("`errors > 50% for 2s` held for 2 s (t=3s..5s)".into()),
        verdict: Some(VerdictSummary {
            verdict: RunVerdict {
                result: RunResult::Failed,
                capacity_rps: Some(50.0),
                breaks_at_rps: Some(100.0),
                breaks_at_stage: Some("100/s".into()),
            },
            headline: "FAILED; holds 50/s; breaks at 100/s: errors < 1% (measured 3.00%)".into(),
            why: Some("errors < 1% (measured 3.00%)".into()),
        }),
        stages: vec![stage("50/s", 0.0), stage("100/s", 10.0)],
        steps: vec![Figures::new("orders", &s, 20.2, None, 0.5)],
        total: Figures::new("total", &s, 20.2, None, 0.5),
        slo,
        diagnostics: vec![Diagnostic {
            kind: "pool_bound".into(),
            title: "Worker pool full, CPU idle".into(),
            detail: "more threads would help".into(),
            stage: Some("100/s".into()),
            evidence: vec![Evidence { metric: "demo_workers_busy".into(), value: 10.0, t: 12.0 }],
        }],
        probes: BTreeMap::from([("liveness".to_string(), ProbeSummary { checks: 10, failures: 3, trips: vec![14.0] })]),
        limit: Some(LimitSearch {
            capacity_rps: Some(50.0),
            breaks_at_rps: Some(100.0),
            confirmed: Some(true),
            precision: 0.05,
            attempts: vec![LimitAttempt {
                rate: 50.0,
                achieved: 49.9,
                p50_ms: 20.1,
                p95_ms: 30.2,
                p99_ms: 40.3,
                error_ratio: 0.0,
                verdict: StageVerdict::Holds,
            }],
        }),
        sweep: Some(SweepResult {
            levels: vec![SweepLevel {
                concurrency: 1,
                throughput: 50.0,
                p50_ms: 20.0,
                p99_ms: 25.0,
                p50_ratio: 1.0,
                throughput_ratio: 1.0,
                error_ratio: 0.0,
                tokens_in_per_s: Some(0.0),
                tokens_out_per_s: Some(1600.0),
            }],
            usl: Some(usl_fit()),
            predicted_peak_concurrency: Some(99.0),
            predicted_peak_throughput: Some(3000.0),
            best_level: Some(1),
            concurrency_cap: Some(10.0),
        }),
        generator: GeneratorUse {
            workers: 2,
            cores: 2,
            cpu_user_s: 1.5,
            cpu_sys_s: 0.5,
            max_rss_kib: 20_000,
            naps: 1_200,
            longest_nap_us: 9.6,
            cpu_wait_s: 0.25,
            pacer: Some(Pacer::IoUring),
        },
        warnings: vec!["3 arrivals were dropped".into()],
        failures: vec![FailureGroup {
            step: "create-order".into(),
            kind: "http_4xx".into(),
            count: 523,
            samples: vec![FailureSample {
                t: 1.25,
                status: Some(422),
                check: Some("status: expected 201, found 422".into()),
                body: Some(r#"{"error":"qty must be a number"}"#.into()),
                request: Some("POST /orders HTTP/1.1".into()),
                request_headers: vec![("Authorization".into(), "<redacted>".into())],
                response_headers: vec![("Content-Type".into(), "application/json".into())],
                timings: Some(Timings { due: 1.2, sent: Some(1.2), latency_ms: 50.0, service_ms: Some(50.0) }),
            }],
        }],
    }
}

/// A fit of a curve that flattens: 1, 2, 4, 8 and 16 users.
fn usl_fit() -> UslFit {
    let obs: Vec<Observation> = [(1.0, 50.0), (2.0, 98.0), (4.0, 185.0), (8.0, 310.0), (16.0, 420.0)]
        .into_iter()
        .map(|(concurrency, throughput)| Observation { concurrency, throughput })
        .collect();
    usl::fit(&obs).expect("a fit")
}

/// What the writer emits for `summary` (as `RunDir::write_json` does).
fn written(summary: &RunSummary) -> Value {
    serde_json::to_value(summary).expect("serialisable")
}

#[test]
fn every_part_the_writer_emits_is_declared() {
    assert_valid(&written(&full()), "a summary with every part");
}

#[test]
fn optional_parts_may_be_null_or_absent() {
    let mut s = full();
    s.aborted = None;
    s.limit = None;
    s.sweep = None;
    s.verdict.as_mut().expect("a verdict").verdict =
        RunVerdict { result: RunResult::Inconclusive, capacity_rps: None, breaks_at_rps: None, breaks_at_stage: None };
    s.diagnostics[0].stage = None;
    s.probes.clear();
    s.steps.clear();
    s.stages[0].figures = Figures::new("empty", &Stats::default(), 0.0, None, 0.0);
    s.stages[0].slo = vec![SloCheck { slo: "p99 < 1s".into(), value: None, passed: true }];
    let v = written(&s);
    assert!(v.get("limit").is_none() && v.get("sweep").is_none(), "skipped when absent");
    assert_valid(&v, "a summary with no optional part");

    let mut sweep = full();
    let r = sweep.sweep.as_mut().expect("sweep");
    (r.usl, r.predicted_peak_concurrency, r.best_level, r.concurrency_cap) = (None, None, None, None);
    sweep.limit.as_mut().expect("limit").confirmed = None;
    assert_valid(&written(&sweep), "a sweep without a fit");
}

#[test]
fn the_committed_fixture_matches() {
    let fixture: Value = serde_json::from_str(FIXTURE).expect("the fixture is JSON");
    assert_valid(&fixture, "fixtures/20261122T043000Z-orders-stepped/summary.json");
}

/// A change made to a valid summary.
type Mutation = fn(&mut Value);

/// The schema is closed and typed everywhere it matters: each mutation
/// (a case per line) of a valid summary must be refused.
#[test]
fn undeclared_or_mistyped_fields_are_refused() {
    let base = written(&full());
    let cases: [(&str, Mutation); 12] = [
        ("a new top-level field", |v| v["new_field"] = json!(1)),
        ("a new field in a stage", |v| v["stages"][0]["new_field"] = json!(1)),
        ("a new field in the total's figures", |v| v["total"]["new_field"] = json!(1)),
        ("a new field in a latency summary", |v| v["total"]["latency_ms"]["p75"] = json!(1.0)),
        ("a new field in the verdict", |v| v["verdict"]["new_field"] = json!(1)),
        ("a new field in a limit attempt", |v| v["limit"]["attempts"][0]["new_field"] = json!(1)),
        ("a new field in a sweep level", |v| v["sweep"]["levels"][0]["new_field"] = json!(1)),
        ("a new field in the USL fit", |v| v["sweep"]["usl"]["new_field"] = json!(1)),
        ("a new field in a diagnostic's evidence", |v| v["diagnostics"][0]["evidence"][0]["new_field"] = json!(1)),
        ("an unknown failure kind", |v| v["total"]["failures"]["teapot"] = json!(1)),
        ("a count that is not an integer", |v| v["total"]["sent"] = json!(1.5)),
        ("a missing required field", |v| {
            v.as_object_mut().expect("an object").remove("generator");
        }),
    ];
    for (what, mutate) in cases {
        let mut v = base.clone();
        mutate(&mut v);
        assert!(!errors(&v).is_empty(), "the schema accepted {what}");
    }
}

/// What the reader makes of `v`: the summary, or why not.
fn read(v: &Value) -> Result<RunSummary, serde_json::Error> {
    serde_json::from_value(v.clone())
}

/// Summaries the schema accepts, each with what it is: the writer's with
/// every part, with no optional part, a sweep without a fit, and the fixture.
fn accepted() -> Vec<(&'static str, Value)> {
    let mut empty = full();
    (empty.aborted, empty.limit, empty.sweep) = (None, None, None);
    empty.diagnostics.clear();
    empty.probes.clear();
    empty.failures.clear();
    empty.steps.clear();
    let mut sweep = full();
    sweep.sweep.as_mut().expect("sweep").usl = None;
    sweep.limit.as_mut().expect("limit").confirmed = None;
    vec![
        ("a summary with every part", written(&full())),
        ("a summary with no optional part", written(&empty)),
        ("a sweep without a fit", written(&sweep)),
        ("the committed fixture", serde_json::from_str(FIXTURE).expect("the fixture is JSON")),
    ]
}

/// Every summary the schema accepts reads back through the writer's types,
/// to exactly what was written: no field is lost, renamed or retyped on the
/// way (verdicts are enums that spell today's strings).
#[test]
fn the_reader_reads_back_what_the_schema_accepts() {
    for (what, v) in accepted() {
        assert_valid(&v, what);
        let summary = read(&v).unwrap_or_else(|e| panic!("{what} does not read: {e}"));
        assert_eq!(written(&summary), v, "{what} reads back to something else");
    }
    assert_eq!(read(&written(&full())).expect("reads"), full(), "the same summary, field for field");
}

/// Refused by the schema? By the reader?
type Verdicts = (bool, bool);

/// The schema and the reader against one mutation each (a case per line)
/// of a valid summary. Both refuse a value of the wrong type or outside its
/// enum, and a field without which a summary means nothing. Where only the
/// schema refuses, the case says why the reader does not.
#[test]
fn the_schema_and_the_reader_refuse_alike() {
    const BOTH: Verdicts = (true, true);
    // Readable, though not what this version writes.
    const READER_ONLY_ACCEPTS: Verdicts = (true, false);
    let base = written(&full());
    let cases: [(&str, Mutation, Verdicts); 16] = [
        ("a stage verdict no perfops writes", |v| v["stages"][0]["verdict"] = json!("fail"), BOTH),
        ("`not run` spelled as a Rust name", |v| v["stages"][0]["verdict"] = json!("not_run"), BOTH),
        ("a run result no perfops writes", |v| v["verdict"]["result"] = json!("none"), BOTH),
        ("a limit attempt's verdict misspelt", |v| v["limit"]["attempts"][0]["verdict"] = json!("Holds"), BOTH),
        ("a count that is not an integer", |v| v["total"]["sent"] = json!(1.5), BOTH),
        ("a rate that is a string", |v| v["stages"][0]["achieved_rate"] = json!("49.5"), BOTH),
        ("an SLO check without its outcome", |v| remove(&mut v["slo"][0], "passed"), BOTH),
        ("a USL fit without its lambda", |v| remove(&mut v["sweep"]["usl"], "lambda"), BOTH),
        ("evidence whose value is text", |v| v["diagnostics"][0]["evidence"][0]["value"] = json!("10"), BOTH),
        ("a missing generator", |v| remove(v, "generator"), BOTH),
        ("a missing total", |v| remove(v, "total"), BOTH),
        // Unknown fields: a tolerant reader, since the version (checked
        // before reading) is what says a format changed.
        ("a new top-level field", |v| v["new_field"] = json!(1), READER_ONLY_ACCEPTS),
        // Older summaries, from before verdicts, diagnostics and naps.
        ("no verdict", |v| remove(v, "verdict"), READER_ONLY_ACCEPTS),
        ("a stage without its verdict", |v| remove(&mut v["stages"][0], "verdict"), READER_ONLY_ACCEPTS),
        ("no diagnostics", |v| remove(v, "diagnostics"), READER_ONLY_ACCEPTS),
        ("a generator without naps", |v| remove(&mut v["generator"], "naps"), READER_ONLY_ACCEPTS),
    ];
    for (what, mutate, (schema_refuses, reader_refuses)) in cases {
        let mut v = base.clone();
        mutate(&mut v);
        assert_eq!(!errors(&v).is_empty(), schema_refuses, "the schema on {what}");
        assert_eq!(read(&v).is_err(), reader_refuses, "the reader on {what}");
    }
}

fn remove(v: &mut Value, key: &str) {
    v.as_object_mut().expect("an object").remove(key);
}

/// The schema's list of failure kinds (a summary's `failures` keys) is the
/// one `perfops-core` declares, in its order: a kind added to the table
/// there is refreshed here with `UPDATE_GOLDEN=1 cargo test -p
/// perfops-report --test summary_schema`, as golden files are, never
/// written out by hand.
#[test]
fn the_schemas_failure_kinds_are_the_declared_ones() {
    let declared: Vec<&str> = FailureKind::ALL.iter().map(|k| k.name()).collect();
    let schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    let enums = kind_lists(&schema);
    assert_eq!(enums.len(), 1, "one list of failure kinds in the schema");
    let listed: Vec<&str> = enums[0].iter().filter_map(Value::as_str).collect();
    if listed == declared {
        return;
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/summary.schema.json");
    assert!(
        std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1"),
        "schema/summary.schema.json lists the failure kinds {listed:?}, perfops-core declares {declared:?}: \
         refresh it with UPDATE_GOLDEN=1 cargo test -p perfops-report --test summary_schema"
    );
    // The list's lines, in the file's own layout: the enum after the kinds' first name.
    let text = std::fs::read_to_string(&path).expect("the schema");
    let first = text.find(&format!("\"{}\"", listed[0])).expect("the first kind");
    let open = text[..first].rfind('[').expect("the list's start");
    let close = first + text[first..].find(']').expect("the list's end");
    let indent = " ".repeat(first - text[..first].rfind('\n').expect("a line") - 1);
    let items: Vec<String> = declared.iter().map(|k| format!("{indent}\"{k}\"")).collect();
    let outdent = &indent[2..];
    let fresh = format!("{}[\n{}\n{outdent}]{}", &text[..open], items.join(",\n"), &text[close + 1..]);
    std::fs::write(&path, fresh).expect("the schema written");
}

/// Every `propertyNames.enum` of the schema that lists failure kinds.
fn kind_lists(v: &Value) -> Vec<&Vec<Value>> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(e)) = m.get("propertyNames").and_then(|p| p.get("enum"))
                && e.iter().any(|k| k == "connect_refused")
            {
                out.push(e);
            }
            for x in m.values() {
                out.extend(kind_lists(x));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| out.extend(kind_lists(x))),
        _ => {}
    }
    out
}
