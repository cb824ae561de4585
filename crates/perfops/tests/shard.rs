//! Shards and merge end to end (#13): the real binary, several `perfops run
//! --shard I/N --start-at T` processes at once against one demo target that
//! the test starts on a free loopback port, `perfops setup` once, and
//! `perfops merge` of their directories. The demo's own `/metrics` counters
//! are the independent witness of what was sent.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::{Demo, Finished, RUN_LIMIT, Running, Workdir, free_port, page_up, shared, spawn_perfops};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::{Value, json};

/// A start instant `ahead` from now, as unix seconds with fractions.
fn start_in(ahead: Duration) -> String {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970") + ahead;
    format!("{:.3}", t.as_secs_f64())
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The one results directory under `base`.
fn only_dir(base: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> =
        std::fs::read_dir(base).map(|d| d.map(|e| e.expect("entry").path()).collect()).unwrap_or_default();
    assert_eq!(dirs.len(), 1, "{}: {dirs:?}", base.display());
    dirs[0].clone()
}

/// Start `count` shards of `scenario` at one instant 1.5 s from now,
/// concurrently, each into its own `runs-I/`, shard I with `extra(I)` flags.
fn spawn_shards(w: &Workdir, scenario: &Path, count: u32, extra: impl Fn(u32) -> Vec<String>) -> Vec<Running> {
    let start = start_in(Duration::from_millis(1500));
    (0..count)
        .map(|i| {
            let (shard, out) = (format!("{i}/{count}"), w.path.join(format!("runs-{i}")).display().to_string());
            let mut args = vec!["run", scenario.to_str().unwrap(), "--out", &out, "-q", "--shard", &shard];
            args.extend_from_slice(&["--start-at", &start]);
            let extra = extra(i);
            args.extend(extra.iter().map(String::as_str));
            spawn_perfops(&args, |_| {})
        })
        .collect()
}

/// Wait for each of the `running` shards (within `limit`): its finish and
/// its `runs-I/` folder, for the caller to look at the finish first.
fn finish_shards(w: &Workdir, running: Vec<Running>, limit: Duration) -> Vec<(Finished, PathBuf)> {
    running.into_iter().enumerate().map(|(i, r)| (r.wait(limit), w.path.join(format!("runs-{i}")))).collect()
}

/// Run `count` shards of `scenario` at one instant, concurrently, each into
/// its own `runs-I/`; returns each one's finish and results directory.
fn shards(w: &Workdir, scenario: &Path, count: u32, extra: &[&str]) -> Vec<(Finished, PathBuf)> {
    let flags: Vec<String> = ["--workers", "1"].iter().chain(extra).map(|s| s.to_string()).collect();
    let running = spawn_shards(w, scenario, count, |_| flags.clone());
    finish_shards(w, running, Duration::from_secs(30)).into_iter().map(|(f, runs)| (f, only_dir(&runs))).collect()
}

fn merge(dirs: &[&Path], out: &Path) -> Finished {
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    spawn_perfops(&args, |_| {}).wait(Duration::from_secs(30))
}

/// Histogram counts of `latency.hlog` by tag, read with HdrHistogram's own
/// interval log reader and decoder.
fn hlog_counts(path: &Path) -> BTreeMap<String, u64> {
    let bytes = std::fs::read(path).expect("latency.hlog");
    let mut decoder = Deserializer::new();
    let mut counts = BTreeMap::new();
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.expect("a well-formed interval log") {
            LogEntry::Interval(iv) => {
                let raw = base64::engine::general_purpose::STANDARD.decode(iv.encoded_histogram()).expect("base64");
                let h: hdrhistogram::Histogram<u64> =
                    decoder.deserialize(&mut std::io::Cursor::new(raw)).expect("a V2 histogram");
                *counts.entry(iv.tag().map_or("", |t| t.as_str()).to_string()).or_default() += h.len();
            }
            LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
        }
    }
    counts
}

const JWT: &str = r#"
defaults: { timeout: 2s }
setup:
  - { name: login, request: POST /auth, json: { user: "load-test" }, expect: { status: 200 }, save: { token: $.token } }
flows:
  refresh:
    weight: 1
    steps:
      - { name: auth, request: POST /auth, json: { user: "u-${seq}" }, save: { token: $.token } }
  list:
    weight: 9
    steps:
      - { name: orders, request: GET /orders, headers: { Authorization: "Bearer ${token}" }, expect: { status: 200 } }
load:
  model: open
  stages: [ { rate: 60, hold: 3s } ]
slo: [ "p99 < 1s", "errors < 1%" ]
"#;

/// #13: setup once, three shards at one instant, and their merge: exactly
/// the single-node schedule (180 arrivals, flows 1:9 exact), one setup
/// login in all, and a merged directory that counts what the demo counted.
#[test]
fn three_shards_and_their_merge_are_the_single_node_run() {
    let _cpu = shared();
    let w = Workdir::new("shards");
    let demo = Demo::start(&["--model", "async", "--io-wait", "5ms", "--cpu-work", "0s"]);
    let scenario = w.scenario("s.yaml", &format!("name: shards\ntarget: {}\n{JWT}", demo.url));

    // Setup once: its values in a file only its owner reads.
    let values = w.path.join("values.json");
    spawn_perfops(&["setup", scenario.to_str().unwrap(), "--out", values.to_str().unwrap()], |_| {})
        .wait(Duration::from_secs(30))
        .assert_exit(0);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&values).expect("setup values").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "setup values hold tokens");
    assert!(json(&values)["token"].as_str().is_some_and(|t| !t.is_empty()), "the token saved");
    assert_eq!(demo.answered("/auth"), 1, "one setup login");

    let runs = shards(&w, &scenario, 3, &["--setup-values", values.to_str().unwrap()]);
    let mut sent = 0;
    let mut latency_count = 0;
    let mut starts = Vec::new();
    for (i, (f, dir)) in runs.iter().enumerate() {
        f.assert_exit(0);
        let s = json(&dir.join("summary.json"));
        let meta = json(&dir.join("meta.json"));
        assert_eq!(meta["shard"], format!("{i}/3"));
        starts.push(meta["start"].as_str().expect("a start instant").to_string());
        // Arrival k is shard k mod 3's: 60 of the 180 each.
        assert_eq!(s["total"]["sent"], 60, "shard {i}: {}", f.stderr);
        assert_eq!(s["stages"][0]["target_rate"], 20.0, "shard {i} is judged on its share of the rate");
        sent += s["total"]["sent"].as_u64().unwrap();
        latency_count += s["total"]["latency_ms"]["count"].as_u64().unwrap();
    }
    assert!(starts.iter().all(|s| *s == starts[0]), "one start instant: {starts:?}");
    assert_eq!(sent, 180, "the shards' arrivals are the single-node schedule's 3 s x 60/s");
    // One login in setup, and the flows' 1:9 exact over the union: 18 + 162.
    assert_eq!(demo.answered("/auth"), 1 + 18, "one setup login in all, 18 refreshes");
    assert_eq!(demo.answered("/orders"), 162);

    let merged = w.path.join("merged");
    let dirs: Vec<&Path> = runs.iter().map(|(_, d)| d.as_path()).collect();
    let f = merge(&dirs, &merged);
    f.assert_exit(0);
    let s = json(&merged.join("summary.json"));
    assert_eq!(s["total"]["sent"], 180, "{}", f.stderr);
    assert_eq!(s["total"]["latency_ms"]["count"].as_u64(), Some(latency_count), "merged count = the shards' sum");
    assert_eq!(s["stages"][0]["target_rate"], 60.0, "judged as one generator");
    let steps: BTreeMap<&str, u64> = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["name"].as_str().unwrap(), x["sent"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, BTreeMap::from([("auth", 18), ("orders", 162)]));
    // #14: what the shards' steps spoke, carried through the merge.
    let spoke = |s: &Value| -> Vec<(String, Vec<String>)> {
        s["protocols"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|u| {
                let mut steps: Vec<String> =
                    u["steps"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
                steps.sort();
                (u["protocol"].as_str().unwrap().to_string(), steps)
            })
            .collect()
    };
    let want = vec![("http/1.1".to_string(), vec!["auth".to_string(), "orders".to_string()])];
    assert_eq!(spoke(&json(&runs[0].1.join("summary.json"))), want, "a shard names its protocol");
    assert_eq!(spoke(&s), want, "the merge names the shards' protocol");
    assert!(s["verdict"]["headline"].as_str().unwrap().starts_with("PASSED"), "{s:#}");
    let meta = json(&merged.join("meta.json"));
    assert_eq!(meta["merged"].as_array().map(Vec::len), Some(3), "{meta:#}");
    assert_eq!(meta["shard"], Value::Null);

    // The merged log is a standard HdrHistogram interval log: totals and parts count every request.
    let counts = hlog_counts(&merged.join("latency.hlog"));
    assert_eq!(counts.get("latency").copied(), Some(latency_count), "{counts:?}");
    let parts: u64 = counts.iter().filter(|(t, _)| t.starts_with("latency@")).map(|(_, n)| n).sum();
    assert_eq!(parts, latency_count, "{counts:?}");

    // The coordinator's live merge of the same seconds (3 agents replaying
    // the shards' directories) is `perfops merge`'s, second by second.
    let live = coordinated_replay(&w, &scenario, &dirs);
    same_seconds(&merged, &live);

    // The other commands read it as any run.
    let report = spawn_perfops(&["report", merged.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    report.assert_exit(0);
    let html = w.path.join("compare.html");
    let compare = spawn_perfops(
        &["compare", merged.to_str().unwrap(), dirs[0].to_str().unwrap(), "-o", html.to_str().unwrap()],
        |_| {},
    )
    .wait(Duration::from_secs(30));
    compare.assert_exit(0);
    let runs_list = spawn_perfops(&["runs", "--dir", w.path.to_str().unwrap()], |_| {}).wait(Duration::from_secs(30));
    runs_list.assert_exit(0);
    assert!(runs_list.stdout.contains("merged"), "{}", runs_list.stdout);

    // Into a directory that holds something: the user's to change (exit 2, not 3).
    let again = merge(&dirs, &merged);
    again.assert_exit(2);
    assert!(again.stderr.contains("it exists and is not empty"), "{}", again.stderr);

    // A merge of 2 of the 3 names the missing shard and judges nothing (exit 1).
    let partial = w.path.join("partial");
    let f = merge(&[dirs[0], dirs[2]], &partial);
    f.assert_exit(1);
    assert!(f.stderr.contains("shard 1/3 is missing"), "{}", f.stderr);
    let s = json(&partial.join("summary.json"));
    let headline = s["verdict"]["headline"].as_str().unwrap();
    assert!(headline.starts_with("INCONCLUSIVE: shard 1/3 is missing"), "{headline}");
    assert_eq!(s["verdict"]["result"], "inconclusive");
    // Its stages lack a share: none "fails" at 67% of its target, and no red
    // "breaks at" stands beside the inconclusive result (review 2).
    for st in s["stages"].as_array().unwrap() {
        assert_eq!(st["verdict"], "inconclusive", "{st:#}");
        assert!(st["reasons"][0].as_str().unwrap().starts_with("a shard is missing"), "{st:#}");
    }
    assert_eq!(s["verdict"]["breaks_at_rps"], Value::Null, "{headline}");
    assert!(!headline.contains("breaks at"), "{headline}");

    // A shard killed after writing second 0's line and before its
    // histograms: the seconds it lacks and the one without latency are named.
    let killed = w.path.join("killed");
    copy_dir(dirs[1], &killed);
    let series = std::fs::read_to_string(killed.join("series.jsonl")).unwrap();
    std::fs::write(killed.join("series.jsonl"), format!("{}\n", series.lines().next().unwrap())).unwrap();
    let hlog = std::fs::read_to_string(killed.join("latency.hlog")).unwrap();
    let header: String = hlog.lines().take_while(|l| !l.starts_with("Tag=")).map(|l| format!("{l}\n")).collect();
    std::fs::write(killed.join("latency.hlog"), header).unwrap();
    std::fs::remove_file(killed.join("summary.json")).unwrap();
    let out = w.path.join("with-killed");
    let f = merge(&[dirs[0], &killed, dirs[2]], &out);
    f.assert_exit(1);
    for said in ["lacks second(s) 1-2", "has no latency histograms for second(s) 0", "has no summary.json"] {
        assert!(
            f.stderr.contains(said) || json(&out.join("summary.json")).to_string().contains(said),
            "{said}\n{}",
            f.stderr
        );
    }

    // Shards of another scenario or another start are refused (exit 2), naming the directories.
    for (field, value, word) in [
        ("scenario_fingerprint", "fnv1a64:0000000000000000", "different scenarios"),
        ("start", "2026-01-01T00:00:00.000Z", "one instant"),
    ] {
        let other = w.path.join(format!("other-{field}"));
        copy_dir(dirs[1], &other);
        let mut meta = json(&other.join("meta.json"));
        meta[field] = Value::String(value.into());
        std::fs::write(other.join("meta.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
        let out = w.path.join(format!("refused-{field}"));
        let f = merge(&[dirs[0], &other, dirs[2]], &out);
        f.assert_exit(2);
        assert!(f.stderr.contains(word) && f.stderr.contains(&*other.to_string_lossy()), "{}", f.stderr);
        assert!(!out.join("summary.json").exists(), "nothing merged");
    }
}

/// The fleet token of [`coordinated_replay`]: 128 bits, as a coordinator requires (#31).
const REPLAY_TOKEN: &str = "5e0c7a91d2b84f36a1c9e07d4b2f8a63";

/// A coordinator whose 3 agents send no request but replay the seconds of
/// the shards' directories (`--replay-seconds DIR`, shard i as agent i);
/// returns its results directory.
fn coordinated_replay(w: &Workdir, scenario: &Path, dirs: &[&Path]) -> PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let out = w.path.join("live");
    let (n, out_s) = (dirs.len().to_string(), out.display().to_string());
    let args = ["coordinator", scenario.to_str().unwrap(), "--agents", &n, "--listen", &listen, "-q", "--out", &out_s];
    let coordinator = spawn_perfops(&args, |c| {
        c.env("PERFOPS_TOKEN", REPLAY_TOKEN);
    });
    let url = format!("https://{listen}");
    let agents: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let index = i.to_string();
            let args = ["agent", "--join", &url, "--index", &index, "--connect-timeout", "20s", "--replay-seconds"];
            let mut args = args.to_vec();
            args.push(d.to_str().unwrap());
            spawn_perfops(&args, |c| {
                c.env("PERFOPS_TOKEN", REPLAY_TOKEN).env_remove("JOB_COMPLETION_INDEX");
            })
        })
        .collect();
    let f = coordinator.wait(Duration::from_secs(60));
    let said: Vec<String> = agents.into_iter().map(|a| a.wait(Duration::from_secs(30)).stderr).collect();
    assert_eq!(f.code, Some(0), "{}\n{said:#?}", f.stderr);
    only_dir(&out)
}

/// Two results directories hold the same seconds and the same stages:
/// counters, failures and every percentile of every histogram, in order.
fn same_seconds(a: &Path, b: &Path) {
    let lines = |d: &Path| -> Vec<Value> {
        let text = std::fs::read_to_string(d.join("series.jsonl")).expect("series.jsonl");
        text.lines().map(|l| serde_json::from_str(l).expect("a series line")).collect()
    };
    const SECOND: [&str; 12] = [
        "length_s",
        "stage",
        "sent",
        "completed",
        "succeeded",
        "failed",
        "dropped",
        "failures",
        "latency_ms",
        "latency_ok_ms",
        "service_ms",
        "steps",
    ];
    let (la, lb) = (lines(a), lines(b));
    assert_eq!(la.len(), lb.len(), "as many seconds in {} as in {}", a.display(), b.display());
    assert!(la.iter().map(|l| l["sent"].as_u64().unwrap()).sum::<u64>() > 0, "seconds with requests");
    for (x, y) in la.iter().zip(&lb) {
        for k in SECOND {
            assert_eq!(x[k], y[k], "second t={} vs t={}: {k}", x["t"], y["t"]);
        }
    }
    let (sa, sb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    for k in ["sent", "completed", "failed", "dropped", "failures", "latency_ms", "service_ms"] {
        assert_eq!(sa["total"][k], sb["total"][k], "total: {k}");
        assert_eq!(sa["stages"][0][k], sb["stages"][0][k], "stage 0: {k}");
    }
    assert_eq!(sa["steps"], sb["steps"], "steps");
    assert_eq!(sa["verdict"]["result"], sb["verdict"]["result"], "verdict");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// #13: closed-model users divide exactly, the remainder on the first
/// shards: 10 users over 3 shards are 4 + 3 + 3. Each user is in flight
/// nearly all the time (100 ms per request, no think time), so a shard's
/// most requests in flight at a second's end is its users.
#[test]
fn closed_users_divide_exactly_over_shards() {
    let _cpu = shared();
    let w = Workdir::new("closed");
    let demo = Demo::start(&["--model", "async", "--io-wait", "100ms", "--cpu-work", "0s"]);
    let scenario = w.scenario(
        "c.yaml",
        &format!(
            "name: closed\ntarget: {}\nsetup:\n  - {{ request: POST /auth, json: {{ user: t }}, save: {{ token: $.token }} }}\n\
             flows:\n  list:\n    steps:\n      - {{ request: GET /orders, headers: {{ Authorization: \"Bearer ${{token}}\" }} }}\n\
             load: {{ model: closed, stages: [ {{ users: 10, hold: 2s }} ] }}\n",
            demo.url
        ),
    );
    let values = w.path.join("values.json");
    spawn_perfops(&["setup", scenario.to_str().unwrap(), "--out", values.to_str().unwrap()], |_| {})
        .wait(Duration::from_secs(30))
        .assert_exit(0);
    let runs = shards(&w, &scenario, 3, &["--setup-values", values.to_str().unwrap()]);
    let users: Vec<u64> = runs
        .iter()
        .map(|(f, dir)| {
            let series = std::fs::read_to_string(dir.join("series.jsonl")).expect("series.jsonl");
            let most = series
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line")["in_flight"].as_u64().unwrap_or(0))
                .max();
            most.unwrap_or_else(|| panic!("no seconds: {}", f.stderr))
        })
        .collect();
    assert_eq!(users, vec![4, 3, 3]);
    let merged = w.path.join("merged");
    let dirs: Vec<&Path> = runs.iter().map(|(_, d)| d.as_path()).collect();
    let f = merge(&dirs, &merged);
    assert!(f.code == Some(0) || f.code == Some(1), "{}", f.stderr);
    let most = std::fs::read_to_string(merged.join("series.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["in_flight"].as_u64().unwrap_or(0))
        .max();
    assert_eq!(most, Some(10), "the merged run had the scenario's 10 users");
    assert_eq!(demo.answered("/auth"), 1, "one setup login");
}

/// #13: `${seq}` is the global arrival number, so a `once` feeder hands each
/// row to one arrival of one shard: 10 rows for 30 arrivals over 3 shards
/// are 10 sent (4 + 3 + 3) and 20 dropped, not 10 per shard.
#[test]
fn a_once_feeder_gives_disjoint_rows_across_shards() {
    let _cpu = shared();
    let w = Workdir::new("once");
    let demo = Demo::start(&["--model", "async", "--io-wait", "1ms", "--cpu-work", "0s"]);
    let rows: String = (0..10).map(|i| format!("user-{i}\n")).collect();
    std::fs::write(w.path.join("users.csv"), format!("name\n{rows}")).unwrap();
    let scenario = w.scenario(
        "o.yaml",
        &format!(
            "name: once\ntarget: {}\ndata: {{ users: {{ csv: users.csv, mode: once }} }}\n\
             flows:\n  login:\n    steps:\n      - {{ request: POST /auth, json: {{ user: \"${{users.name}}\" }} }}\n\
             load: {{ stages: [ {{ rate: 10, hold: 3s }} ] }}\n",
            demo.url
        ),
    );
    let runs = shards(&w, &scenario, 3, &[]);
    let sent: Vec<u64> =
        runs.iter().map(|(_, d)| json(&d.join("summary.json"))["total"]["sent"].as_u64().unwrap()).collect();
    assert_eq!(sent, vec![4, 3, 3], "rows 0..10 go to arrivals 0..10, wherever they run");
    let dropped: u64 =
        runs.iter().map(|(_, d)| json(&d.join("summary.json"))["total"]["dropped"].as_u64().unwrap()).sum();
    assert_eq!(dropped, 20);
    assert_eq!(demo.answered("/auth"), 10, "each row sent once");
}

/// #13: the merge of 3 shards at 50/s each reads as one generator at 150/s:
/// the same latency distribution, from histograms added, never percentiles
/// averaged. The demo's fixed 100 ms wait dominates both, so a difference
/// would be the merge's, not the server's; the first second (new
/// connections, three processes starting at once) is a warm-up stage of its
/// own, and the steady stage is compared. The median within 5%, and the
/// merged p99 between the shards' own (a quantile of an exact union is).
#[test]
fn merged_percentiles_match_one_generator_at_the_same_rate() {
    attempts(&["p50"]);
}

/// The same for p99 within 5%: measured on this 2-core machine shared with
/// other builds, a stall of the whole machine in one run and not the other
/// moves a p99 of 450 requests by 6-30% (seen: 104.5 vs 111.7 ms, 106.6 vs
/// 136.4 ms), whatever the merge does. Run it on a quiet machine.
#[test]
#[ignore = "timing: p99 of two separate runs within 5% needs a quiet machine (cargo test -- --ignored)"]
fn merged_p99_matches_one_generator_on_a_quiet_machine() {
    attempts(&["p50", "p99"]);
}

/// Up to three measured pairs (a machine-wide stall in one run and not the
/// other is no fault of the merge); fails with what each attempt saw.
fn attempts(quantiles: &[&str]) {
    let _cpu = common::exclusive();
    let demo = Demo::start(&["--model", "async", "--io-wait", "100ms", "--cpu-work", "0s"]);
    let mut seen = Vec::new();
    for _ in 0..3 {
        match percentiles_pair(&demo, quantiles) {
            Ok(()) => return,
            Err(e) => seen.push(e),
        }
    }
    panic!("merged percentiles off in every attempt:\n{}", seen.join("\n"));
}

/// One run at 150/s and 3 shards at 50/s each, merged: `Err` says which of
/// the steady stage's `quantiles` differ by more than 5%.
fn percentiles_pair(demo: &Demo, quantiles: &[&str]) -> Result<(), String> {
    let w = Workdir::new("percentiles");
    // Each run logs in for itself: logins are not what this test counts.
    let one = w.scenario(
        "one.yaml",
        &format!(
            "name: p\ntarget: {}\nsetup:\n  - {{ request: POST /auth, json: {{ user: t }}, save: {{ token: $.token }} }}\n\
             flows:\n  list:\n    steps:\n      - {{ request: GET /orders, headers: {{ Authorization: \"Bearer ${{token}}\" }} }}\n\
             load: {{ stages: [ {{ name: warm, rate: 150, hold: 1s }}, {{ name: steady, rate: 150, hold: 3s }} ] }}\n",
            demo.url
        ),
    );
    let out = w.path.join("runs-one");
    // Verdicts are not this test's business (at 100 ms each, the last
    // arrivals' answers fall after the stage): the distributions are.
    spawn_perfops(&["run", one.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], |_| {})
        .wait(Duration::from_secs(30));
    let single = json(&only_dir(&out).join("summary.json"));
    let runs = shards(&w, &one, 3, &[]);
    let merged = w.path.join("merged");
    let dirs: Vec<&Path> = runs.iter().map(|(_, d)| d.as_path()).collect();
    let f = merge(&dirs, &merged);
    let m = json(&merged.join("summary.json"));
    assert!(!m["verdict"]["headline"].as_str().unwrap().contains("missing"), "{}", f.stderr);
    assert_eq!(m["total"]["sent"], single["total"]["sent"], "the same schedule");
    assert_eq!(m["stages"][1]["name"], "steady");
    let at = |s: &Value, q: &str| s["stages"][1]["latency_ms"][q].as_f64().unwrap();
    // Deterministic, whatever the machine: a quantile of the union of the
    // shards' values lies between the shards' own.
    let shard_p99: Vec<f64> = dirs.iter().map(|d| at(&json(&d.join("summary.json")), "p99")).collect();
    let (lo, hi) = shard_p99.iter().fold((f64::MAX, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    assert!((lo..=hi).contains(&at(&m, "p99")), "merged p99 {} outside the shards' {shard_p99:?}", at(&m, "p99"));
    let off: Vec<String> = quantiles
        .iter()
        .copied()
        .filter(|q| (at(&single, q) - at(&m, q)).abs() > 0.05 * at(&single, q))
        .map(|q| format!("{q}: one generator {} ms, merged shards {} ms", at(&single, q), at(&m, q)))
        .collect();
    if off.is_empty() { Ok(()) } else { Err(off.join("; ")) }
}

/// Shards that one Ctrl-C stopped, merged: the arrivals stopped there, so
/// the stage it cut short is inconclusive and judged over the time it ran;
/// its planned seconds after the stop are no gap. The merge replayed the
/// seconds as if nothing stopped: the cut stage read "achieved 9/s is 45% of
/// the target 20/s", FAILS, and the headline named the missing seconds
/// (review 2).
#[test]
fn shards_stopped_together_merge_as_one_stopped_run() {
    let _cpu = shared();
    let w = Workdir::new("stopped");
    let demo = Demo::start(&["--model", "async", "--io-wait", "1ms", "--cpu-work", "0s"]);
    let scenario = w.scenario(
        "s.yaml",
        &format!(
            "name: stopped\ntarget: {}\nflows:\n  h:\n    steps:\n      - {{ request: GET /health }}\n\
             load: {{ stages: [ {{ rate: 20, hold: 2s }}, {{ rate: 20, hold: 4s }} ] }}\n",
            demo.url
        ),
    );
    let running = spawn_shards(&w, &scenario, 2, |_| Vec::new());
    // 2.5 s in: half-way through the second stage.
    std::thread::sleep(Duration::from_millis(1500 + 3500));
    for r in &running {
        common::send_signal("-INT", r.pid());
    }
    let dirs: Vec<PathBuf> = finish_shards(&w, running, Duration::from_secs(15))
        .into_iter()
        .map(|(f, runs)| {
            assert_eq!(f.code, Some(1), "an interrupted shard: {}", f.stderr);
            only_dir(&runs)
        })
        .collect();
    let merged = w.path.join("merged");
    let f = merge(&[&dirs[0], &dirs[1]], &merged);
    f.assert_exit(1);
    let s = json(&merged.join("summary.json"));
    let headline = s["verdict"]["headline"].as_str().unwrap();
    assert!(!f.stderr.contains("lacks second"), "{}", f.stderr);
    assert_eq!(s["stages"][0]["verdict"], "holds", "{s:#}");
    let cut = &s["stages"][1];
    assert_eq!(cut["verdict"], "inconclusive", "{headline}\n{cut:#}");
    let (ran, achieved) = (cut["duration_s"].as_f64().unwrap(), cut["achieved_rate"].as_f64().unwrap());
    assert!(ran < 3.5, "judged over the {ran} s it ran, not its planned 4 s");
    assert!((achieved / 20.0 - 1.0).abs() < 0.1, "achieved {achieved}/s of 20/s over {ran} s");
    assert_eq!(s["verdict"]["result"], "inconclusive", "{headline}");
    assert_eq!(s["verdict"]["breaks_at_rps"], Value::Null, "{headline}");
}

/// An action by hand on one shard (its own `--live`, `perfops ctl`) is the
/// merged run's: its `events.jsonl` holds it, said to be that shard's, and
/// the stage it changed judges nothing automatic, as in a run changed by
/// hand. A merge once left it out and judged the stage as planned.
#[test]
fn a_shards_action_by_hand_is_the_merged_runs() {
    let _cpu = shared();
    let w = Workdir::new("steered-shard");
    let demo = Demo::start(&["--model", "async", "--io-wait", "1ms", "--cpu-work", "0s"]);
    let scenario = w.scenario(
        "s.yaml",
        &format!(
            "name: steered\ntarget: {}\nflows:\n  h:\n    steps:\n      - {{ request: GET /health }}\n\
             load: {{ stages: [ {{ name: first, rate: 20, hold: 4s }}, {{ name: second, rate: 20, hold: 2s }} ] }}\n",
            demo.url
        ),
    );
    let addr = format!("127.0.0.1:{}", free_port());
    let running = spawn_shards(&w, &scenario, 2, |i| if i == 0 { vec![format!("--live={addr}")] } else { Vec::new() });
    let waiting = std::time::Instant::now();
    while !page_up(&addr) {
        assert!(waiting.elapsed() < Duration::from_secs(20), "no live page at {addr}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Up once the load started: in its first stage, 10/s for the rest of it on shard 0.
    std::thread::sleep(Duration::from_millis(500));
    let rated = spawn_perfops(&["ctl", &addr, "rate", "10"], |_| {}).wait(RUN_LIMIT);
    assert_eq!(rated.code, Some(0), "{}", rated.stderr);
    let dirs: Vec<PathBuf> = finish_shards(&w, running, Duration::from_secs(30))
        .into_iter()
        .enumerate()
        .map(|(i, (f, runs))| {
            assert!(matches!(f.code, Some(0 | 1)), "shard {i}: {}", f.stderr);
            only_dir(&runs)
        })
        .collect();
    let merged = w.path.join("merged");
    let f = merge(&[&dirs[0], &dirs[1]], &merged);
    assert!(matches!(f.code, Some(0 | 1)), "{}", f.stderr);
    let events = std::fs::read_to_string(merged.join("events.jsonl")).expect("the merged events.jsonl");
    let events: Vec<Value> = events.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (&events[0]["action"], &events[0]["value"], &events[0]["stage"]),
        (&json!("rate"), &json!(10.0), &json!("first"))
    );
    assert_eq!(events[0]["by"], "ctl, shard 0/2", "{events:?}");
    let s = json(&merged.join("summary.json"));
    let first = &s["stages"][0];
    assert_eq!(first["by_hand"][0]["action"], "rate", "{first:#}");
    let why = first["reasons"][0].as_str().unwrap_or_default();
    assert!(why.starts_with("changed by hand: rate 10 at t="), "{first:#}");
    assert!(s["stages"][1]["by_hand"].as_array().is_none_or(Vec::is_empty), "the second stage ran as planned: {s:#}");
}

/// The failing exchanges each shard kept (`failures.jsonl`) are the merged
/// run's too: its summary shows them beside their counts and its
/// `failures.jsonl` holds them, as one generator's would. A merge once kept
/// the counts and dropped every exchange.
#[test]
fn a_merge_keeps_the_shards_failing_exchanges() {
    let _cpu = shared();
    let w = Workdir::new("merge-failures");
    let demo = Demo::start(&["--model", "async", "--io-wait", "1ms", "--cpu-work", "0s"]);
    // No token: the demo answers every /orders 401.
    let scenario = w.scenario(
        "s.yaml",
        &format!(
            "name: refused\ntarget: {}\nflows:\n  o:\n    steps:\n      - {{ name: orders, request: GET /orders, expect: {{ status: 200 }} }}\n\
             load: {{ stages: [ {{ rate: 20, hold: 2s }} ] }}\n",
            demo.url
        ),
    );
    let runs = shards(&w, &scenario, 2, &[]);
    let kept: Vec<usize> = runs
        .iter()
        .map(|(f, dir)| {
            f.assert_exit(1);
            std::fs::read_to_string(dir.join("failures.jsonl")).map_or(0, |t| t.lines().count())
        })
        .collect();
    assert!(kept.iter().all(|&n| n > 0), "each shard kept some failing exchanges: {kept:?}");
    let merged = w.path.join("merged");
    let dirs: Vec<&Path> = runs.iter().map(|(_, d)| d.as_path()).collect();
    let f = merge(&dirs, &merged);
    f.assert_exit(1);
    let s = json(&merged.join("summary.json"));
    let groups = s["failures"].as_array().expect("failures");
    assert_eq!(groups.len(), 1, "{s:#}");
    assert_eq!((groups[0]["step"].as_str(), groups[0]["kind"].as_str()), (Some("orders"), Some("http_4xx")));
    assert_eq!(groups[0]["count"], 40, "{s:#}");
    let samples = groups[0]["samples"].as_array().expect("samples");
    assert!(!samples.is_empty(), "the shards' exchanges are the merged run's: {s:#}");
    assert!(
        samples
            .iter()
            .all(|x| x["status"] == 401 && x["request"].as_str().is_some_and(|r| r.starts_with("GET /orders")))
    );
    let lines = std::fs::read_to_string(merged.join("failures.jsonl")).expect("the merged failures.jsonl");
    assert!(lines.lines().count() >= samples.len(), "{lines}");
    // The report shows them (its failures table names the status).
    let html = std::fs::read_to_string(merged.join("report.html")).expect("report");
    assert!(html.contains("401"), "the report shows the exchanges");
}
