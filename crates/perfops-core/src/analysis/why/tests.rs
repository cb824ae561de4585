//! The why of a failed stage, chosen by the rule that failed (#32): a table
//! of stages judged by the real rules, each with the diagnostics the run
//! found, and what the why must (and must not) say.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::analysis::diagnose::Evidence;
use crate::analysis::verdict::{Range, StageFacts, judge};

/// A step's requests: `ok` answered in `ms`, and failures by kind (each
/// taking `ms` too), `dropped` arrivals.
fn stats(ms: u64, ok: u64, failed: &[(FailureKind, u64)], dropped: u64) -> Stats {
    let mut s = Stats::default();
    let took = Duration::from_millis(ms);
    for _ in 0..ok {
        s.latency.record(took);
        s.latency_ok.record(took);
    }
    let mut answered = ok;
    for &(k, n) in failed {
        s.failures.add_n(k, n);
        for _ in 0..n {
            s.latency.record(took);
        }
        if k.has_response() {
            answered += n;
        }
    }
    s.completed = answered;
    s.iterations = ok;
    s.sent = ok + failed.iter().map(|x| x.1).sum::<u64>();
    s.dropped = dropped;
    s
}

/// A diagnostic of `kind` seen in stage `stage`, titled `title`.
fn diag(kind: &str, title: &str, stage: Option<&str>) -> Diagnostic {
    Diagnostic {
        kind: kind.into(),
        title: title.into(),
        detail: String::new(),
        stage: stage.map(String::from),
        evidence: vec![Evidence { metric: "m".into(), value: 1.0, t: 0.0 }],
    }
}

/// Nagle's stall, found at t=0s: a finding, never a why (#32).
fn nagle() -> Diagnostic {
    diag("quantized_stalls", "33% of requests stalled ~40 ms: Nagle's algorithm meeting delayed ACK?", Some("40/s"))
}

struct Case {
    /// What the case is.
    name: &'static str,
    slo: &'static [&'static str],
    /// Per step: its requests.
    steps: Vec<(&'static str, Stats)>,
    /// The stage's achieved rate, of a 40/s target.
    achieved: f64,
    restarts: Vec<f64>,
    diagnostics: Vec<Diagnostic>,
    /// The kind of why wanted, none for no why.
    want: Option<WhyKind>,
    /// What the why must say.
    says: &'static [&'static str],
    /// What it must not.
    not: &'static [&'static str],
}

fn run(c: &Case) -> Option<Why> {
    judged_why(c, c.slo).0
}

/// The why of case `c` under SLO lines `lines`, and the stage's judgement.
fn judged_why(c: &Case, lines: &[&str]) -> (Option<Why>, crate::analysis::verdict::Judged) {
    let mut total = Stats::default();
    let steps: BTreeMap<String, Stats> = c.steps.iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
    for s in steps.values() {
        total.merge(s);
    }
    let watched: BTreeMap<String, Range> = BTreeMap::new();
    let slo: Vec<Condition> = lines.iter().map(|l| Condition::parse(l).unwrap()).collect();
    let judged = judge(
        &slo,
        &StageFacts {
            ran_s: 10.0,
            planned_s: 10.0,
            stats: &total,
            steps: &steps,
            target_rate: Some(40.0),
            end_rate: None,
            achieved_rate: c.achieved,
            first_lag_s: None,
            previous_rate: 40.0,
            watched: &watched,
            restarts: &c.restarts,
            unready: &[],
            generator_cpu: Some(0.2),
        },
    );
    let failing = step_failures(&steps);
    let why = why(
        &Stage { name: "40/s", judged: &judged, slo: &slo, stats: &total, failing: &failing },
        &c.diagnostics,
        "http://127.0.0.1:8089",
    );
    (why, judged)
}

#[test]
fn the_why_is_tied_to_the_rule_that_failed() {
    use FailureKind::*;
    let ok = || stats(20, 400, &[], 0);
    let cases = vec![
        // 4xx answers fail `errors < 1%` while a Nagle finding is present: the
        // why names the step and the status class; Nagle stays a finding.
        Case {
            name: "4xx with Nagle",
            slo: &["p95 < 500ms", "errors < 1%"],
            steps: vec![("login", ok()), ("create-order", stats(20, 77, &[(Http4xx, 323)], 0))],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: Some(WhyKind::FailingAnswers),
            says: &["errors < 1% (measured", "step create-order: 323 of 400 failed (http_4xx 323)"],
            not: &["Nagle", "login"],
        },
        // A failed check is named as such, beside the step.
        Case {
            name: "check failed",
            slo: &["errors < 1%"],
            steps: vec![("create-order", stats(20, 370, &[(CheckFailed, 30)], 0))],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![],
            want: Some(WhyKind::FailingAnswers),
            says: &["step create-order: 30 of 400 failed (check_failed 30)"],
            not: &[],
        },
        // Timeouts at a saturated server: the failing step and the saturation.
        Case {
            name: "timeouts, CPU",
            slo: &["errors < 1%"],
            steps: vec![("orders", stats(20, 300, &[(Timeout, 100)], 0))],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![nagle(), diag("cpu_saturated", "CPU saturated: the target used 98%", Some("40/s"))],
            want: Some(WhyKind::FailingAnswers),
            says: &["step orders: 100 of 400 failed (timeout 100)", "— CPU saturated"],
            not: &["Nagle"],
        },
        // The rate fell short with arrivals dropped at max_in_flight, and an
        // SLO line failed too (so the stage fails, not inconclusive): the why
        // of the rate names the cap.
        Case {
            name: "rate, dropped",
            slo: &["rate >= 97%"],
            steps: vec![("orders", stats(20, 300, &[], 100))],
            achieved: 30.0,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: Some(WhyKind::Rate),
            says: &["rate >= 97% (measured", "limited by max_in_flight: 100 arrivals dropped"],
            not: &["Nagle"],
        },
        // The rate rule fell short at a pool-bound server: the pool is named.
        Case {
            name: "rate, pool",
            slo: &["p95 < 500ms"],
            steps: vec![("orders", stats(20, 300, &[], 0))],
            achieved: 30.0,
            restarts: vec![],
            diagnostics: vec![nagle(), diag("pool_bound", "pool-bound: 10 of 10 workers busy", Some("40/s"))],
            want: Some(WhyKind::Rate),
            says: &["achieved 30.0/s is 75%", "limited by the server: pool-bound: 10 of 10 workers busy"],
            not: &["Nagle"],
        },
        // ... but not by a pool seen in another stage, nor by Nagle: nothing watched says.
        Case {
            name: "rate, cause elsewhere",
            slo: &["p95 < 500ms"],
            steps: vec![("orders", stats(20, 300, &[], 0))],
            achieved: 30.0,
            restarts: vec![],
            diagnostics: vec![nagle(), diag("pool_bound", "pool-bound: 10 of 10 workers busy", Some("80/s"))],
            want: Some(WhyKind::Rate),
            says: &["nothing watched shows what limited it"],
            not: &["Nagle", "pool-bound"],
        },
        // Connections that failed limited the rate.
        Case {
            name: "rate, connections",
            slo: &[],
            steps: vec![("orders", stats(20, 300, &[(ConnectTimeout, 60)], 0))],
            achieved: 30.0,
            restarts: vec![],
            diagnostics: vec![],
            want: Some(WhyKind::Rate),
            says: &["limited by connections: 60 of 360 requests could not connect"],
            not: &[],
        },
        // Everything refused: the target is down, not an SLO line measured on nothing.
        Case {
            name: "all refused",
            slo: &["p99(create-order, ok) < 500ms", "p95 < 300ms", "errors < 1%"],
            steps: vec![("create-order", stats(0, 0, &[(ConnectRefused, 400)], 0))],
            achieved: 0.0,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: Some(WhyKind::TargetDown),
            says: &["the target is down (connection refused at 127.0.0.1:8089: 400 of 400 requests never connected)"],
            not: &["p99", "nothing measured", "Nagle"],
        },
        // Nearly all: a few answered before it went down.
        Case {
            name: "nearly all refused",
            slo: &["errors < 1%"],
            steps: vec![("orders", stats(1, 10, &[(ConnectRefused, 390)], 0))],
            achieved: 1.0,
            restarts: vec![],
            diagnostics: vec![],
            want: Some(WhyKind::TargetDown),
            says: &["the target is down (connection refused at 127.0.0.1:8089"],
            not: &[],
        },
        // A latency line at a saturated server names the saturation, not Nagle.
        Case {
            name: "latency, queue",
            slo: &["p95 < 10ms"],
            steps: vec![("orders", ok())],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![nagle(), diag("listen_queue_full", "listen queue full: 16 of 16", Some("40/s"))],
            want: Some(WhyKind::Latency),
            says: &["p95 < 10ms (measured 20", "— listen queue full"],
            not: &["Nagle"],
        },
        // Listen overflows of the namespace while the target's own queue was
        // never deep: another listener's, a finding, not the cause.
        Case {
            name: "latency, someone else's overflows",
            slo: &["p95 < 10ms"],
            steps: vec![("orders", ok())],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![Diagnostic {
                evidence: vec![
                    Evidence { metric: "listen_queue".into(), value: 0.0, t: 1.0 },
                    Evidence { metric: "listen_queue_max".into(), value: 128.0, t: 1.0 },
                    Evidence { metric: "listen_overflows_per_s".into(), value: 3.0, t: 1.0 },
                ],
                ..diag("listen_queue_full", "listen overflows in the target's network namespace", Some("40/s"))
            }],
            want: Some(WhyKind::Latency),
            says: &["p95 < 10ms (measured 20"],
            not: &["listen overflows", "—"],
        },
        // A latency line with nothing to explain it: the line alone (Nagle a finding).
        Case {
            name: "latency alone",
            slo: &["p95 < 10ms"],
            steps: vec![("orders", ok())],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: Some(WhyKind::Latency),
            says: &["p95 < 10ms (measured 20"],
            not: &["Nagle", "—"],
        },
        // The liveness probe tripped.
        Case {
            name: "probe",
            slo: &[],
            steps: vec![("orders", ok())],
            achieved: 40.0,
            restarts: vec![31.0],
            diagnostics: vec![],
            want: Some(WhyKind::Probe),
            says: &["the liveness probe tripped at t=31s"],
            not: &[],
        },
        // A stage that held has no why, whatever was found.
        Case {
            name: "passed",
            slo: &["p95 < 500ms", "errors < 1%"],
            steps: vec![("orders", ok())],
            achieved: 40.0,
            restarts: vec![],
            diagnostics: vec![nagle(), diag("memory_growth", "memory grew", None)],
            want: None,
            says: &[],
            not: &[],
        },
        // Dropped arrivals and nothing else: inconclusive, and the why is the cap.
        Case {
            name: "inconclusive, dropped",
            slo: &["p95 < 500ms"],
            steps: vec![("orders", stats(20, 300, &[], 100))],
            achieved: 30.0,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: Some(WhyKind::Generator),
            says: &["100 arrivals dropped at max_in_flight"],
            not: &["Nagle"],
        },
    ];
    for c in &cases {
        let got = run(c);
        assert_eq!(got.as_ref().map(|w| w.kind), c.want, "{}: {got:?}", c.name);
        let text = got.map(|w| w.text).unwrap_or_default();
        for s in c.says {
            assert!(text.contains(s), "{}: {text:?} lacks {s:?}", c.name);
        }
        for s in c.not {
            assert!(!text.contains(s), "{}: {text:?} says {s:?}", c.name);
        }
    }
}

/// A latency line over requests that never connected measures nothing: it
/// neither passes on their 0.33 ms nor reads as good news (#32).
#[test]
fn latency_over_refused_connections_measures_nothing() {
    let refused = stats(0, 0, &[(FailureKind::ConnectRefused, 400)], 0);
    let c = Condition::parse("p95 < 300ms").unwrap();
    let got = crate::analysis::verdict::check(&c, &refused, &BTreeMap::new(), None, 1.0, &BTreeMap::new());
    assert_eq!((got.passed, got.value), (false, None));
    // A few answered: their latency is measured again.
    let some = stats(1, 10, &[(FailureKind::ConnectRefused, 390)], 0);
    assert!(crate::analysis::verdict::check(&c, &some, &BTreeMap::new(), None, 1.0, &BTreeMap::new()).passed);
}

#[test]
fn the_address_of_a_target() {
    // (the target as a run names it, its address)
    let cases = [
        ("http://127.0.0.1:8080", "127.0.0.1:8080"),                  // a URL
        ("http://127.0.0.1:8080/api?x=1", "127.0.0.1:8080"),          // with a path
        ("demo:threads (http://127.0.0.1:41234)", "127.0.0.1:41234"), // the demo names its URL
        ("grpc://[::1]:50051", "[::1]:50051"),                        // IPv6
        ("shop", "shop"),                                             // no URL: as it is
    ];
    for (target, want) in cases {
        assert_eq!(address(target), want, "{target}");
    }
}

proptest::proptest! {
    /// Any stage, any findings: a why exactly where the stage failed (or the
    /// generator made it judge nothing), never empty, never a finding's words;
    /// and the target is said to be down exactly when 90% or more of its
    /// requests never connected.
    #[test]
    fn a_why_exactly_where_a_stage_did_not_hold(
        ok in 0u64..500,
        refused in 0u64..500,
        client in 0u64..100,
        timeouts in 0u64..100,
        dropped in 0u64..50,
        achieved in 0.0f64..45.0,
        lines in proptest::sample::subsequence(vec!["p95 < 30ms", "errors < 1%", "p99(orders, ok) < 500ms"], 0..=3),
    ) {
        use FailureKind::*;
        let failed = [(ConnectRefused, refused), (Http4xx, client), (Timeout, timeouts)];
        let c = Case {
            name: "any",
            slo: &[],
            steps: vec![("orders", stats(25, ok, &failed, dropped))],
            achieved,
            restarts: vec![],
            diagnostics: vec![nagle()],
            want: None,
            says: &[],
            not: &[],
        };
        let (got, judged) = judged_why(&c, &lines);
        let total = &c.steps[0].1;
        let ended = total.completed + total.failures.total();
        let down = ended > 0 && refused as f64 >= DOWN_SHARE * ended as f64;
        let owed = match judged.verdict {
            StageVerdict::Fails => true,
            StageVerdict::Inconclusive => judged.generator_limited || down,
            _ => false,
        };
        proptest::prop_assert_eq!(got.is_some(), owed, "{:?} {:?}", got, judged);
        if let Some(w) = &got {
            proptest::prop_assert!(!w.text.is_empty());
            proptest::prop_assert!(!w.text.contains("Nagle"), "{:?}", w);
            proptest::prop_assert_eq!(w.kind == WhyKind::TargetDown, down, "{:?}", w);
        }
    }
}
