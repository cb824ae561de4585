//! Steering by hand end to end, as users would: the real `perfops
//! coordinator --live` on 127.0.0.1 with two real agents, steered by
//! `perfops ctl` from another process. One action reaches both agents with
//! one instant: each agent switches at that second, the coordinator's
//! merged seconds follow, and the results record it (`events.jsonl`, the
//! stage's verdict, the headline). Refusals are the run's (exit 1).
//!
//! Servers and processes are stopped by their PID (`Drop`); every
//! connection goes to 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::{Demo, RUN_LIMIT, Workdir, free_port, page_up, shared, spawn_perfops};
use serde_json::Value;

const FLEET: &str = r#"
name: steered-fleet
target: @URL@
flows:
  health:
    steps:
      - { request: GET /health }
load:
  model: open
  stages:
    - { name: steady, rate: 100, hold: 6s }
"#;

/// The lines of a JSON-lines file.
fn lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn an_action_on_a_coordinator_reaches_every_agent_at_one_second() {
    let _cpu = shared();
    let demo = Demo::start(&["--model", "async"]);
    let wd = Workdir::new("steered-fleet");
    let scenario = wd.scenario("fleet.yaml", &FLEET.replace("@URL@", &demo.url));
    let addr = format!("127.0.0.1:{}", free_port());
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let live = format!("--live={addr}");
    let (coord, agents) = wd.fleet(&scenario, 2, TOKEN, &[&live]);
    let started = Instant::now();
    while !page_up(&addr) {
        assert!(started.elapsed() < Duration::from_secs(30), "no live page at {addr}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The page is up once the load started: a second or so in, set 300/s for the rest of the stage.
    std::thread::sleep(Duration::from_millis(1500));
    let ctl = |args: &[&str]| spawn_perfops(&[&["ctl", addr.as_str()][..], args].concat(), |_| {}).wait(RUN_LIMIT);
    let rated = ctl(&["rate", "300"]);
    assert_eq!(rated.code, Some(0), "{}", rated.stderr);
    // `rate 300 at t=N (stage "steady")`
    let said = format!("{}{}", rated.stdout, rated.stderr);
    let at: u32 = said
        .split("at t=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no instant in {said:?}"));
    assert!((2..=6).contains(&at), "the next whole second half a second away: {said}");
    // The only stage is the last: `next` is refused by the run.
    let next = ctl(&["next"]);
    assert_eq!(next.code, Some(1), "{}", next.stderr);
    assert!(next.stderr.contains("is the last stage"), "{}", next.stderr);

    let out = coord.wait(RUN_LIMIT);
    let agents: Vec<_> = agents.into_iter().map(|a| a.wait(RUN_LIMIT)).collect();
    // Changed by hand: inconclusive, exit 1.
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let dir = wd.result_dir(&out);
    // The load's first second on the session clock: the agents count from it.
    let first = lines(&dir.join("series.jsonl"))[0]["t"].as_u64().expect("t") as u32;
    for a in &agents {
        assert_eq!(a.code, Some(0), "agent: {}", a.stderr);
        // Each agent took it at the same second of the load.
        let took = format!("agent: rate 300 from second {} of the load (stage steady), by ctl", at - first);
        assert!(a.stderr.contains(&took), "{said}\nagent: {}", a.stderr);
    }
    let events = lines(&dir.join("events.jsonl"));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0]["action"].as_str(), events[0]["value"].as_f64()), (Some("rate"), Some(300.0)));
    assert_eq!(events[0]["t"].as_f64(), Some(f64::from(at)));
    // The merged seconds: 100/s before the instant, the fleet's 300/s from it.
    let series = lines(&dir.join("series.jsonl"));
    let target = |t: u32| series.iter().find(|l| l["t"] == t).and_then(|l| l["target_rate"].as_f64());
    assert_eq!(target(at - 1).map(f64::round), Some(100.0), "{series:?}");
    assert_eq!(target(at).map(f64::round), Some(300.0));
    assert_eq!(target(first + 5).map(f64::round), Some(300.0), "the rest of the stage");
    // Each agent's seconds: half of it each, from the same second.
    let per_agent = lines(&dir.join("agents.jsonl"));
    for agent in 0..2u64 {
        let sent = |t: u32| {
            per_agent
                .iter()
                .find(|l| l["event"] == "second" && l["agent"] == agent && l["t"] == t)
                .and_then(|l| l["sent"].as_u64())
                .unwrap_or(0)
        };
        assert!(sent(at - 1).abs_diff(50) <= 2, "agent {agent} before: {}", sent(at - 1));
        assert!(sent(at).abs_diff(150) <= 2, "agent {agent} at {at}: {}", sent(at));
    }
    let summary = wd.summary(&out);
    let headline = summary["verdict"]["headline"].as_str().unwrap_or_default();
    assert!(headline.contains(&format!("steady (rate 300 at t={at}s)")), "{headline}");
    assert_eq!(summary["stages"][0]["by_hand"][0]["action"], "rate");
}
