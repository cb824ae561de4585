//! End to end, issue #31 point 4: an agent that holds the token but sends
//! seconds outside the plan is refused, named and lost; the run goes on
//! with the others and is inconclusive. The agents are real `perfops agent`
//! processes replaying wire frames written here (`--replay-seconds FILE`),
//! so they make no request: the coordinator gets exactly these seconds.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{RUN_LIMIT, Workdir, shared, spawn_perfops};
use perfops_core::fleet::wire::{Message, encode};
use perfops_core::measure::{Interval, Key, Stats};
use serde_json::Value;

/// 128 bits, as a strong token is.
const TOKEN: &str = "4f1c9a7e2b6d8035c1e9f27a4b6d0e83";

const SCENARIO: &str = r#"
name: fleet-seconds
target: http://127.0.0.1:9
flows:
  f:
    steps:
      - { name: only, request: GET / }
load:
  model: open
  stages:
    - { rate: 10, hold: 4s }
"#;

/// A whole second of `sent` answered requests under `key`, as an engine counts them.
fn second(key: Key, sent: u64) -> Interval {
    let mut st = Stats { sent, completed: sent, iterations: sent, ..Stats::default() };
    for i in 0..sent {
        let d = Duration::from_millis(2 + i);
        st.latency.record(d);
        st.service.record(d);
        st.latency_ok.record(d);
        st.service_ok.record(d);
        st.ttfb.record(d / 2);
    }
    Interval {
        index: 0,
        length: Duration::from_secs(1),
        in_flight: 0,
        target: Some(10.0),
        stats: st.clone(),
        parts: vec![(key, st)],
        samples: Default::default(),
    }
}

fn frames(path: &Path, iv: Interval) {
    std::fs::write(path, encode(&Message::Second(Box::new(iv)))).expect("frames written");
}

fn lines(dir: &Path, file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// #31: shard 1 sends seconds of stage 7, step 9 in a plan of one stage and
/// one step: refused at its first second, named on stderr and in
/// agents.jsonl with what was wrong, its connection closed; shard 0's
/// seconds are all kept; the verdict is inconclusive (exit 1).
#[test]
fn an_agent_sending_keys_outside_the_plan_is_refused_and_the_run_is_inconclusive() {
    let _cpu = shared();
    let wd = Workdir::new("fleet-seconds");
    let scenario = wd.scenario("s.yaml", SCENARIO);
    let (honest, rogue) = (wd.path.join("honest.frames"), wd.path.join("rogue.frames"));
    frames(&honest, second(Key { stage: 0, step: 0 }, 10));
    frames(&rogue, second(Key { stage: 7, step: 9 }, 10));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let coordinator = wd.spawn("coordinator", &scenario, &["--agents", "2", "--listen", &listen], |c| {
        c.env("PERFOPS_TOKEN", TOKEN);
    });
    let url = format!("https://{listen}");
    let agents: Vec<_> = [&honest, &rogue]
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let index = i.to_string();
            let args = ["agent", "--join", &url, "--index", &index, "--connect-timeout", "20s", "--replay-seconds"];
            let mut args = args.to_vec();
            args.push(file.to_str().unwrap());
            spawn_perfops(&args, |c| {
                c.env("PERFOPS_TOKEN", TOKEN).env_remove("JOB_COMPLETION_INDEX");
            })
        })
        .collect();
    let out = coordinator.wait(RUN_LIMIT);
    let said: Vec<String> = agents.into_iter().map(|a| a.wait(RUN_LIMIT).stderr).collect();
    let ctx = format!("{}\n{said:#?}", out.stderr);
    assert_eq!(out.code, Some(1), "{ctx}");
    assert!(out.stderr.contains("(shard 1, 127.0.0.1:"), "the refused agent is named\n{ctx}");
    assert!(
        out.stderr.contains("agent 1's second 0 refused: stage 7 step 9 is not in the plan (1 stages, 1 steps)"),
        "what was wrong\n{ctx}"
    );
    let dir = wd.result_dir(&out);
    let summary = wd.summary(&out);
    assert_eq!(summary["verdict"]["result"], "inconclusive", "{ctx}");
    let agent_lines = lines(&dir, "agents.jsonl");
    let lost: Vec<&Value> = agent_lines.iter().filter(|l| l["event"] == "lost").collect();
    assert_eq!(lost.len(), 1, "{agent_lines:#?}");
    assert_eq!(lost[0]["agent"], 1);
    assert!(lost[0]["reason"].as_str().unwrap().contains("not in the plan"), "{agent_lines:#?}");
    // Shard 0's seconds are all in: 4 of 10 requests each.
    let sent: u64 = lines(&dir, "series.jsonl").iter().map(|l| l["sent"].as_u64().unwrap_or(0)).sum();
    assert_eq!(sent, 40, "{ctx}");
}
