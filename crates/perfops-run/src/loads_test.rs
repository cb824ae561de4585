//! Run behaviour in-process, in milliseconds: seconds from an interval
//! source through the pipeline a session assembles (the judge with its
//! `abort_when` rules, the results writer), into stages, verdicts, the
//! summary and the results files. No engine, no server, no process: what only
//! those can show (signals, real targets, exit codes, the terminal) is the
//! binary's tests' (crates/perfops/tests).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use perfops_core::analysis::verdict::{RunResult, StageVerdict};
use perfops_core::measure::{FailureKind, Interval, Key, Stats};
use perfops_core::pipeline::{AbortWhen, Sink, StageLedger, StagePlan};
use perfops_core::scenario::Scenario;
use perfops_report::results::{JsonLines, RunDir};
use perfops_report::run::{GeneratorUse, RunSummary};
use perfops_report::sink::ResultsWriter;

use crate::conclude::{self, Ending, Judging, Loaded};
use crate::outputs::{self, Stations};
use crate::source::{self, Feed, IntervalSource, Produced};
use crate::watching::{Judge, Store};

/// A folder of this test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("perfops-run-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Second `index` of a one-step flow in stage `stage`: `n` arrivals due,
/// `answered` of them answered in `ms` each, `failed` of those with a 500.
fn second(index: u32, stage: u16, n: u64, answered: u64, ms: u64, failed: u64) -> Interval {
    let mut s =
        Stats { sent: n, completed: answered, arrivals_answered: answered, iterations: answered, ..Stats::default() };
    let took = Duration::from_millis(ms);
    for i in 0..answered {
        s.latency.record(took);
        s.service.record(took);
        if i >= failed {
            s.latency_ok.record(took);
            s.service_ok.record(took);
        }
    }
    s.failures.add_n(FailureKind::Http5xx, failed);
    Interval {
        index,
        length: Duration::from_secs(1),
        in_flight: 0,
        target: Some(n as f64),
        stats: s.clone(),
        parts: vec![(Key { stage, step: 0 }, s)],
        samples: Default::default(),
    }
}

/// A scenario with `slo` and `abort_when` lines (YAML lists, as written).
fn scenario(slo: &str, abort_when: &str) -> Scenario {
    let text = format!(
        "name: inproc\ntarget: http://127.0.0.1:9\nflows:\n  f:\n    steps:\n      - {{ name: get, request: GET / }}\n\
         load:\n  stages:\n    - {{ name: warm, rate: 10, hold: 3s }}\n    - {{ name: peak, rate: 20, hold: 3s }}\n\
         slo: {slo}\nabort_when: {abort_when}\n"
    );
    perfops_core::scenario::parse("inproc.yaml", &text, &[]).expect("a valid scenario")
}

/// The scenario's two stages as a load plans them.
fn stages(s: &Scenario) -> Vec<StagePlan> {
    crate::loading::stage_plans(&s.load, perfops_core::model::Shard::WHOLE)
}

/// A source that hands on its seconds one by one and, like the engine,
/// stops at the end of the second in which the stop flag was set.
struct Scripted(Vec<Interval>);

impl IntervalSource for Scripted {
    fn produce(&mut self, stop: &Arc<AtomicBool>, feed: &mut dyn Feed) -> Result<Produced> {
        let mut p = Produced { workers: 1, ..Produced::default() };
        for iv in self.0.drain(..) {
            p.total.merge(&iv.stats);
            p.elapsed += iv.length;
            feed.second(&iv);
            if stop.load(Ordering::Relaxed) {
                p.interrupted = true;
                break;
            }
        }
        Ok(p)
    }
}

/// What a session does with a load's seconds, without the session: the
/// judge (watched metrics, none here, then `abort`), the results writer,
/// then the summary, as `run` concludes.
fn load(scenario: &Scenario, seconds: Vec<Interval>, dir: &mut RunDir) -> (Loaded, RunSummary, Option<String>) {
    let names = vec!["get".to_string()];
    let stop = Arc::new(AtomicBool::new(false));
    let mut store = Store::new(JsonLines::new(dir.path()));
    let (_tx, events) = mpsc::channel();
    let mut abort = AbortWhen::new(&scenario.abort_when);
    let loaded = {
        let mut judge = Judge::new(&mut store, &events, Some(&mut abort), None);
        let mut write_error = false;
        let results = ResultsWriter::new(dir, &mut write_error);
        let stations = Stations {
            decisions: vec![&mut judge as &mut dyn Sink],
            results: Some(Box::new(results)),
            ..Stations::default()
        };
        let pipeline = outputs::pipeline(StageLedger::new(&stages(scenario), 0.0), 0, &names, stop.clone(), stations);
        let (produced, measured) = source::drive(&mut Scripted(seconds), &stop, pipeline).expect("the load runs");
        Loaded::of(produced, measured, false)
    };
    let reason = abort.reason().map(str::to_string);
    let judging = Judging {
        scenario,
        store: &store,
        step_names: &names,
        target_label: "http://127.0.0.1:9",
        target_addr: "127.0.0.1:9",
        started: SystemTime::UNIX_EPOCH,
    };
    let ending = Ending {
        interrupted: false,
        aborted: reason.clone(),
        generator: GeneratorUse::default(),
        gaps: Vec::new(),
        notes: Vec::new(),
        short_from: None,
    };
    let summary = judging.summarize(&loaded, ending);
    (loaded, summary, reason)
}

#[test]
fn a_load_that_keeps_its_rate_and_slo_holds_every_stage() {
    let tmp = Scratch::new("holds");
    let mut dir = RunDir::create(&tmp.0, "inproc", SystemTime::UNIX_EPOCH).unwrap();
    let s = scenario("[p95 < 100ms, errors < 1%]", "[]");
    let seconds = (0..6).map(|t| if t < 3 { second(t, 0, 10, 10, 20, 0) } else { second(t, 1, 20, 20, 20, 0) });
    let (loaded, summary, reason) = load(&s, seconds.collect(), &mut dir);

    assert_eq!(reason, None);
    assert_eq!(loaded.total.sent, 90, "every second's requests are in the totals");
    let verdicts: Vec<_> = summary.stages.iter().map(|st| st.verdict).collect();
    assert_eq!(verdicts, [Some(StageVerdict::Holds), Some(StageVerdict::Holds)]);
    assert_eq!(result(&summary), RunResult::Passed);
    // The results writer had every second: one line each in series.jsonl.
    let series = std::fs::read_to_string(dir.path().join("series.jsonl")).unwrap();
    assert_eq!(series.lines().count(), 6, "{series}");
}

#[test]
fn a_stage_answered_below_its_rate_fails_by_the_rate_rule() {
    let tmp = Scratch::new("rate");
    let mut dir = RunDir::create(&tmp.0, "inproc", SystemTime::UNIX_EPOCH).unwrap();
    let s = scenario("[p95 < 100ms]", "[]");
    // The peak's 20/s answered at 14/s (70%): the SLO on latency holds, the rate does not.
    let seconds = (0..6).map(|t| if t < 3 { second(t, 0, 10, 10, 20, 0) } else { second(t, 1, 20, 14, 20, 0) });
    let (_, summary, _) = load(&s, seconds.collect(), &mut dir);

    assert_eq!(summary.stages[0].verdict, Some(StageVerdict::Holds));
    assert_eq!(summary.stages[1].verdict, Some(StageVerdict::Fails));
    let why = summary.stages[1].reasons.join("; ");
    assert!(why.contains("14") && why.contains("20"), "the why names the rates: {why}");
    assert_eq!(result(&summary), RunResult::Failed);
}

#[test]
fn an_abort_rule_stops_the_source_at_the_end_of_the_second_it_held_in() {
    let tmp = Scratch::new("abort");
    let mut dir = RunDir::create(&tmp.0, "inproc", SystemTime::UNIX_EPOCH).unwrap();
    let s = scenario("[]", "[errors > 20% for 1s]");
    // Second 3 fails half its requests: the rule holds there, and the load stops after it.
    let seconds = (0..6).map(|t| second(t, u16::from(t >= 3), 10, 10, 20, if t == 3 { 5 } else { 0 }));
    let (loaded, summary, reason) = load(&s, seconds.collect(), &mut dir);

    let reason = reason.expect("the rule held");
    assert!(reason.contains("errors"), "{reason}");
    assert!(loaded.stopped, "the load is marked stopped");
    assert_eq!(loaded.total.sent, 40, "seconds 0..=3 ran, 4 and 5 never did");
    let series = std::fs::read_to_string(dir.path().join("series.jsonl")).unwrap();
    assert_eq!(series.lines().count(), 4, "{series}");
    assert_eq!(result(&summary), RunResult::Failed, "an aborted run does not pass");
}

#[test]
fn seconds_read_back_replay_into_the_same_stages_as_the_load_that_wrote_them() {
    // What `merge` and a coordinator do with seconds from elsewhere: the
    // stages and totals are what the seconds say, whoever produced them.
    let tmp = Scratch::new("replay");
    let mut dir = RunDir::create(&tmp.0, "inproc", SystemTime::UNIX_EPOCH).unwrap();
    let s = scenario("[p95 < 100ms]", "[]");
    let mut seconds: Vec<Interval> =
        (0..6).map(|t| if t < 3 { second(t, 0, 10, 10, 20, 0) } else { second(t, 1, 20, 20, 20, 0) }).collect();
    // The last second is cut short, as the engine's last one may be.
    seconds[5].length = Duration::from_millis(400);
    let names = vec!["get".to_string()];
    let loaded =
        conclude::replay(seconds, StageLedger::new(&stages(&s), 0.0), &names, &mut dir, false, None, 2).unwrap();

    assert_eq!(loaded.total.sent, 90);
    assert_eq!(loaded.workers, 2);
    assert_eq!(loaded.elapsed, Duration::from_millis(5400), "the cut second counts what it lasted");
    assert_eq!(loaded.stages.len(), 2);
    assert_eq!(loaded.stages[1].stats.sent, 60);
    assert!(!loaded.stopped);
}

/// The run's overall result.
fn result(summary: &RunSummary) -> RunResult {
    summary.verdict.as_ref().expect("a verdict").verdict.result
}

/// Steering by hand, end to end on one machine: a real load of the engine
/// against the demo target on loopback, steered from another thread as the
/// live page's server would (`rate`, `hold`, `next`, then `stop`); the
/// results show each action at its instant: the series' targets, the stages'
/// lengths, `events.jsonl`, the verdicts and the headline.
#[test]
fn actions_by_hand_take_effect_at_their_instants_and_are_recorded() {
    use perfops_core::pipeline::control::{Action, ControlEvent, Steer};
    use perfops_report::run::SeriesLine;

    let demo = perfops_demo::spawn(perfops_demo::DemoConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..perfops_demo::DemoConfig::default()
    })
    .expect("the demo target starts");
    let tmp = Scratch::new("steer");
    let file = tmp.0.join("steer.yaml");
    std::fs::write(
        &file,
        format!(
            "name: steer\ntarget: http://{}\nflows:\n  f:\n    steps:\n      - {{ name: get, request: GET /health }}\n\
             load:\n  stages:\n    - {{ name: a, rate: 50, hold: 3s }}\n    - {{ name: b, rate: 50, hold: 3s }}\n\
             \x20   - {{ name: c, rate: 50, hold: 3s }}\n    - {{ name: d, rate: 50, hold: 30s }}\n",
            demo.addr()
        ),
    )
    .unwrap();
    let args = crate::session::SessionArgs {
        scenario: file,
        set: Vec::new(),
        target: None,
        out: tmp.0.join("runs"),
        workers: 2,
        insecure: false,
        quiet: true,
        junit: None,
        outputs: crate::outputs::OutputArgs::default(),
        wait_in_flight: false,
    };
    let placement = crate::shard::Placement::default();
    let mut s = crate::session::Session::open(&args, "run", &placement).unwrap().expect("the session opens");
    // Second 0 of the session clock is 100 ms after it opened.
    let t0 = std::time::Instant::now() + Duration::from_millis(100);
    let steering = s.steering.clone();
    // Asked between two loads (before this one), an action is refused.
    assert_eq!(steering.act(Action::Stop, "test").unwrap_err(), "no load is running");
    let hand = std::thread::spawn(move || {
        let at = |s: f64| {
            std::thread::sleep((t0 + Duration::from_secs_f64(s)).saturating_duration_since(std::time::Instant::now()))
        };
        let mut taken: Vec<ControlEvent> = Vec::new();
        // (asked at s into the load, action): each takes effect at the next whole second.
        for (when, action) in
            [(0.5, Action::Rate(100.0)), (3.5, Action::Hold), (6.5, Action::Next), (8.5, Action::Stop)]
        {
            at(when);
            taken.push(steering.act(action, "test").unwrap_or_else(|e| panic!("{action} refused: {e}")));
        }
        // After a stop, the last stage's `next` is refused, as any action past the arrivals' end.
        let late = steering.act(Action::Next, "test").unwrap_err();
        (taken, late)
    });
    let model = crate::loading::load_model(&s.scenario.load).unwrap();
    let stages = crate::loading::stage_plans(&s.scenario.load, placement.shard());
    let loaded = s.load(model, &stages, None).expect("the load runs");
    s.close();
    let (taken, late) = hand.join().unwrap();
    assert!(late.contains("end at"), "{late}");
    let t: Vec<f64> = taken.iter().map(|e| e.t).collect();
    assert_eq!(t, [1.0, 4.0, 7.0, 9.0], "the next whole second at least 200 ms away");
    assert_eq!(taken.iter().map(|e| e.stage.as_str()).collect::<Vec<_>>(), ["a", "b", "b", "c"]);

    // The stages: a as planned; b held past its 3 s until `next` at 7 s; c cut by the stop at 9 s.
    let ran: Vec<(String, f64)> = loaded.stages.iter().map(|st| (st.plan.name.clone(), st.ran_s)).collect();
    assert_eq!(ran, [("a".into(), 3.0), ("b".into(), 4.0), ("c".into(), 2.0), ("d".into(), 0.0)]);
    assert_eq!(loaded.elapsed.as_secs_f64().round(), 9.0, "the arrivals ended at the stop: {:?}", loaded.elapsed);

    // The series: 100/s in a's rest from 1 s, 50/s from the next stage on, nothing after the stop.
    let series: Vec<SeriesLine> = std::fs::read_to_string(s.dir.path().join("series.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let targets: Vec<(u32, &str, Option<f64>)> =
        series.iter().map(|l| (l.t, l.stage.as_str(), l.target_rate.map(f64::round))).take(9).collect();
    let want: Vec<(u32, &str, Option<f64>)> = vec![
        (0, "a", Some(50.0)),
        (1, "a", Some(100.0)),
        (2, "a", Some(100.0)),
        (3, "b", Some(50.0)),
        (4, "b", Some(50.0)),
        (5, "b", Some(50.0)),
        (6, "b", Some(50.0)),
        (7, "c", Some(50.0)),
        (8, "c", Some(50.0)),
    ];
    assert_eq!(targets, want);
    assert!(series.iter().skip(9).all(|l| l.stage == "(draining)"), "nothing after the stop");
    let answered: u64 = series.iter().map(|l| l.succeeded).sum();
    // 50 + 2 x 100 + 6 x 50 arrivals (and a few ms' jitter at the edges).
    assert!((540..=560).contains(&answered), "{answered} answered");

    // events.jsonl: each action once, as returned to the asker.
    let events: Vec<ControlEvent> = std::fs::read_to_string(s.dir.path().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events, taken);

    // Verdicts: the changed stages judge nothing; d never ran; the headline says so.
    let reason = None;
    let by_hand = loaded.events.iter().any(|(_, e)| e.action == "stop");
    let ending = Ending::local(&loaded, loaded.stopped && !by_hand, reason);
    let summary = s.judging().summarize(&loaded, ending);
    let verdicts: Vec<_> = summary.stages.iter().map(|st| st.verdict.unwrap()).collect();
    assert_eq!(
        verdicts,
        [StageVerdict::Inconclusive, StageVerdict::Inconclusive, StageVerdict::Inconclusive, StageVerdict::NotRun]
    );
    assert_eq!(summary.stages[0].reasons[0], "changed by hand: rate 100 at t=1s");
    assert_eq!(summary.stages[1].by_hand.len(), 2, "hold and next");
    let headline = &summary.verdict.as_ref().unwrap().headline;
    assert!(headline.starts_with("INCONCLUSIVE: stopped by hand at t=9s; changed by hand"), "{headline}");
    assert!(headline.contains("b (hold at t=4s, next at t=7s)"), "{headline}");
    assert_eq!(result(&summary), RunResult::Inconclusive);
    demo.stop().unwrap();
}

/// The fleet's relay as its agents take it, in-process: two shards of one
/// load (two engines against the demo, as two agents would run them) from
/// one start; one action relayed to both with one second switches both at
/// it (each its half of the new rate), and a hostile one (an instant
/// already past, words it does not know) is refused by each, the load
/// going on as it was.
#[test]
fn a_relayed_action_switches_every_shard_at_one_second_and_a_hostile_one_is_refused() {
    use perfops_core::model::Shard;
    use perfops_core::scenario::Step;

    use crate::control::{Steered, Steering};
    use crate::fleet::agent::steer;

    let demo = perfops_demo::spawn(perfops_demo::DemoConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..perfops_demo::DemoConfig::default()
    })
    .expect("the demo target starts");
    let url = format!("http://{}", demo.addr());
    let yaml = format!(
        "name: relay\ntarget: {url}\nflows:\n  f:\n    steps:\n      - {{ name: get, request: GET /health }}\n\
         load:\n  stages:\n    - {{ name: a, rate: 40, hold: 4s }}\n    - {{ name: b, rate: 40, hold: 2s }}\n"
    );
    let scenario = perfops_core::scenario::parse("relay.yaml", &yaml, &[]).expect("a valid scenario");
    let target = perfops_engine::Target::parse(&url).unwrap();
    let flows: Vec<(String, u32, Vec<Step>)> =
        scenario.flows.iter().map(|f| (f.name.clone(), f.weight, f.steps.clone())).collect();
    let work = perfops_engine::Work::new(&target, flows, Default::default(), Default::default(), Default::default());
    let base = crate::launch::PlanBase::of_scenario(target, &scenario.defaults, false, 1, false);
    let model = crate::loading::load_model(&scenario.load).unwrap();
    let stages: Vec<(String, Duration)> =
        scenario.load.stages().iter().map(|s| (s.name.clone(), s.segment.duration)).collect();
    let start = std::time::Instant::now() + Duration::from_millis(300);
    let stop = Arc::new(AtomicBool::new(false));
    // Each agent: its shard's plan, its steering, its engine on a thread of its own.
    let agents: Vec<_> = (0..2u32)
        .map(|index| {
            let mut plan = base.plan(Arc::new(work.clone()), model.clone());
            plan.stage_ends = vec![Duration::from_secs(4), Duration::from_secs(6)];
            plan.shard = Shard { index, count: 2 };
            plan.start_at = Some(start);
            plan.keep_start = true;
            let engine = perfops_engine::Replan::new();
            plan.replan = Some(engine.clone());
            let steering = Arc::new(Steering::default());
            steering.begin(Steered {
                plan: crate::control::staged(&plan.load, stages.clone()).expect("steerable"),
                model: plan.load.clone(),
                start,
                offset: 0,
                share: 0.5,
                engine,
                pipeline: Default::default(),
                lead: crate::control::LEAD,
                relay: None,
            });
            let stop = stop.clone();
            let run = std::thread::spawn(move || {
                struct Targets(Vec<(u32, f64, u64)>);
                impl Feed for Targets {
                    fn second(&mut self, iv: &Interval) {
                        self.0.push((iv.index, iv.target.unwrap_or(0.0), iv.stats.sent));
                    }
                }
                let mut seen = Targets(Vec::new());
                source::Engine::new(plan).produce(&stop, &mut seen).expect("the shard runs");
                seen.0
            });
            (steering, run)
        })
        .collect();
    std::thread::sleep((start + Duration::from_millis(1500)).saturating_duration_since(std::time::Instant::now()));
    for (steering, _) in &agents {
        // One frame to each agent: rate 100 from second 2 of the load.
        let e = steer(steering, start, "rate 100", 2, "test").expect("taken");
        assert_eq!((e.t, e.stage.as_str(), e.value), (2.0, "a", Some(100.0)));
        // Hostile frames: an instant already past, words it does not know, a rate that is no number.
        assert!(steer(steering, start, "rate 5", 1, "evil").unwrap_err().contains("has passed"));
        assert!(steer(steering, start, "\u{1b}]0;pwned\u{7}", 3, "evil").unwrap_err().starts_with("unknown action"));
        assert!(steer(steering, start, "rate inf", 3, "evil").unwrap_err().starts_with("rate needs a number"));
    }
    let shards: Vec<Vec<(u32, f64, u64)>> = agents.into_iter().map(|(_, run)| run.join().unwrap()).collect();
    for (i, seen) in shards.iter().enumerate() {
        let targets: Vec<(u32, f64)> = seen.iter().map(|&(k, t, _)| (k, t.round())).take(6).collect();
        // Each shard half of the load: 20/s, 50/s from second 2 to the end of a, 20/s in b.
        assert_eq!(targets, [(0, 20.0), (1, 20.0), (2, 50.0), (3, 50.0), (4, 20.0), (5, 20.0)], "shard {i}");
        // And its workers sent them: what the target says is what went out
        // (give or take the one arrival the pacer sends a few µs early, in
        // the second before its own).
        let sent: Vec<u64> = seen.iter().map(|s| s.2).take(6).collect();
        let near = |got: u64, want: u64| got.abs_diff(want) <= 1;
        assert!(sent.iter().zip([20, 20, 50, 50, 20, 20]).all(|(&g, w)| near(g, w)), "shard {i}: {sent:?}");
    }
    demo.stop().unwrap();
}

/// The closed model steered: `rate N` sets the users for the rest of the
/// stage (whole, at most the connections the load opened), a fraction or
/// more users than that are refused; the series' in-flight requests follow
/// the users from the instant on.
#[test]
fn a_closed_models_users_are_re_rated_whole_at_their_instant() {
    use perfops_core::pipeline::control::{Action, Steer};
    use perfops_report::run::SeriesLine;

    let demo = perfops_demo::spawn(perfops_demo::DemoConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..perfops_demo::DemoConfig::default()
    })
    .expect("the demo target starts");
    let tmp = Scratch::new("steer-closed");
    let file = tmp.0.join("closed.yaml");
    std::fs::write(
        &file,
        format!(
            "name: closed\ntarget: http://{}\nflows:\n  f:\n    steps:\n      - {{ name: p, request: GET /health }}\n\
             load:\n  model: closed\n  think: 50ms\n  stages:\n    - {{ name: few, users: 2, hold: 4s }}\n    - {{ name: more, users: 6, hold: 2s }}\n",
            demo.addr()
        ),
    )
    .unwrap();
    let args = crate::session::SessionArgs {
        scenario: file,
        set: Vec::new(),
        target: None,
        out: tmp.0.join("runs"),
        workers: 2,
        insecure: false,
        quiet: true,
        junit: None,
        outputs: crate::outputs::OutputArgs::default(),
        wait_in_flight: false,
    };
    let placement = crate::shard::Placement::default();
    let mut s = crate::session::Session::open(&args, "run", &placement).unwrap().expect("the session opens");
    let t0 = std::time::Instant::now() + Duration::from_millis(100);
    let steering = s.steering.clone();
    let hand = std::thread::spawn(move || {
        std::thread::sleep((t0 + Duration::from_millis(1500)).saturating_duration_since(std::time::Instant::now()));
        let refused = [steering.act(Action::Rate(2.5), "test"), steering.act(Action::Rate(7.0), "test")];
        (steering.act(Action::Rate(5.0), "test"), refused)
    });
    let model = crate::loading::load_model(&s.scenario.load).unwrap();
    let stages = crate::loading::stage_plans(&s.scenario.load, placement.shard());
    let loaded = s.load(model, &stages, None).expect("the load runs");
    s.close();
    let (taken, [fraction, too_many]) = hand.join().unwrap();
    assert!(fraction.unwrap_err().starts_with("a closed model's users are whole"));
    assert!(too_many.unwrap_err().starts_with("at most 6 users"), "the load opened 6 connections");
    let taken = taken.expect("rate 5 taken");
    assert_eq!((taken.t, taken.stage.as_str()), (2.0, "few"));
    let series: Vec<SeriesLine> = std::fs::read_to_string(s.dir.path().join("series.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Requests a second: each user thinks 50 ms between them, 2 users (~40/s) before the instant, 5 after it.
    let rate = |t: u32| series.iter().find(|l| l.t == t).map_or(0.0, |l| l.achieved_rate);
    let (before, after) = (rate(1), rate(3));
    assert!(before > 20.0 && before < 45.0, "2 users: {before}/s");
    assert!(after > 2.0 * before, "5 users from t=2 s: {after}/s against {before}/s");
    assert_eq!(loaded.stages.iter().map(|st| st.ran_s).collect::<Vec<_>>(), [4.0, 2.0]);
    assert_eq!(loaded.events.len(), 1);
    demo.stop().unwrap();
}
