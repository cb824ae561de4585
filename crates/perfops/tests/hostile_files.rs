//! End to end, issue #31 point 7: files someone else prepared, read by the
//! real `perfops` binary. A results directory whose files are links out of
//! it, FIFOs or endless devices; a scenario whose CSV feeder is a link out
//! of its folder, or too large; run names holding terminal escapes; a
//! damaged line of `series.jsonl`. Each command returns promptly, reads
//! nothing outside, prints nothing raw and names what it refused.
//!
//! And `--metrics-listen` of a running `quick`, scraped on loopback while a
//! client trickles its request a byte a second.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Finished, Workdir, shared, spawn_perfops};

/// What a command that reads a results directory may take: it reads a few
/// KiB; more means it waits on something.
const PROMPT: Duration = Duration::from_secs(15);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../perfops-report/tests/fixtures")
}

const STEPPED: &str = "20261122T043000Z-orders-stepped";

/// Copy the fixture run `name` into `into` under the name `as_name`.
fn copy_fixture(name: &str, into: &Path, as_name: &str) -> PathBuf {
    let to = into.join(as_name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(fixtures().join(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

fn perfops(args: &[&str]) -> Finished {
    spawn_perfops(args, |_| {}).wait(PROMPT)
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// A `scenario.yaml` linked to a system file: the report renders without
/// it, embeds nothing of the file, and says why on stderr (exit 0). Before,
/// `/etc/passwd` was in the page.
#[test]
fn a_scenario_yaml_linked_out_of_the_run_is_not_embedded() {
    let _cpu = shared();
    let wd = Workdir::new("linked-scenario");
    let run = copy_fixture(STEPPED, &wd.path, STEPPED);
    std::fs::remove_file(run.join("scenario.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", run.join("scenario.yaml")).unwrap();
    let secret = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let first = secret.lines().next().expect("a line of /etc/passwd");
    let page = wd.path.join("report.html");
    let out = perfops(&["report", &run.display().to_string(), "-o", &page.display().to_string()]);
    out.assert_exit(0);
    let html = std::fs::read_to_string(&page).expect("the report is written");
    assert!(!html.contains(first), "the report embeds /etc/passwd ({first})");
    assert!(
        out.stderr.contains("scenario.yaml was not read:")
            && out.stderr.contains("is a symbolic link that leads out of")
            && out.stderr.contains("a results file is read only inside its folder"),
        "stderr does not say why scenario.yaml was left out:\n{}",
        out.stderr
    );
    assert!(html.contains("scenario.yaml was not read"), "the page's notes do not say it");
}

/// `series.jsonl` a FIFO (nobody writes it) and a link to `/dev/zero`:
/// `report`, `compare` and `runs` return promptly and name it. Before, the
/// FIFO blocked every one of them forever, and `/dev/zero` was read until
/// memory ran out.
#[test]
fn a_series_that_never_ends_is_refused_promptly() {
    let _cpu = shared();
    let wd = Workdir::new("endless-series");
    let base = copy_fixture(STEPPED, &wd.path, "base");
    // (the case, how its series.jsonl is made, what the error says)
    type Make<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Make, &str); 2] = [
        ("fifo", &|p: &Path| mkfifo(p), "series.jsonl is a FIFO, not a regular file"),
        (
            "zero",
            &|p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "is a symbolic link that leads out of",
        ),
    ];
    for (name, make, says) in cases {
        let runs = wd.path.join(format!("runs-{name}"));
        let run = copy_fixture(STEPPED, &runs, name);
        // Only meta.json and the endless series: nothing else to report.
        for f in ["summary.json", "series.jsonl", "latency.hlog", "watch.jsonl", "probe.jsonl", "scenario.yaml"] {
            std::fs::remove_file(run.join(f)).unwrap();
        }
        make(&run.join("series.jsonl"));
        let dir = run.display().to_string();
        let report = perfops(&["report", &dir, "-o", &wd.path.join("r.html").display().to_string()]);
        report.assert_exit(2);
        assert!(
            report.stderr.contains("holds no results that can be read") && report.stderr.contains(says),
            "{name}: {}",
            report.stderr
        );
        let compare = perfops(&["compare", &base.display().to_string(), &dir, "--no-html"]);
        compare.assert_exit(2);
        assert!(compare.stderr.contains(says), "{name}: {}", compare.stderr);
        let listed = perfops(&["runs", "--dir", &runs.display().to_string()]);
        listed.assert_exit(0);
        assert!(listed.stderr.contains(says), "{name}: {}", listed.stderr);
        assert!(listed.stdout.contains("orders"), "{name}: the run is still listed from meta.json:\n{}", listed.stdout);
    }
}

/// A scenario whose CSV feeder is a link out of the scenario's folder:
/// `check` and `run` refuse it at its place in the file (exit 2), before
/// anything is sent. Before, both read the file the link led to.
#[test]
fn a_csv_feeder_linked_out_of_the_scenario_folder_is_refused() {
    let _cpu = shared();
    let wd = Workdir::new("linked-csv");
    std::fs::write(wd.path.join("secret.csv"), "token\nS3CRET\n").unwrap();
    let folder = wd.path.join("scenario");
    std::fs::create_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink("../secret.csv", folder.join("users.csv")).unwrap();
    let scenario = folder.join("s.yaml");
    std::fs::write(
        &scenario,
        "target: http://127.0.0.1:9\ndata: { users: { csv: users.csv } }\n\
         flows: { f: { steps: [ { request: \"GET /?t=${users.token}\" } ] } }\n\
         load: { stages: [ { rate: 1, hold: 1s } ] }\n",
    )
    .unwrap();
    let path = scenario.display().to_string();
    let check = perfops(&["check", &path]);
    let out = wd.runs().display().to_string();
    let run = perfops(&["run", &path, "--out", &out, "-q"]);
    for (command, got) in [("check", &check), ("run", &run)] {
        got.assert_exit(2);
        assert!(
            got.stderr.contains("s.yaml:2:")
                && got.stderr.contains("is a symbolic link that leads out of")
                && got.stderr.contains("a CSV file is read only inside its folder"),
            "{command}: {}",
            got.stderr
        );
    }
    assert!(wd.result_dirs().is_empty(), "a run started");
}

/// A CSV feeder larger than the cap (a sparse file: nothing is written) is
/// refused without being read.
#[test]
fn an_oversized_csv_feeder_is_refused() {
    let _cpu = shared();
    let wd = Workdir::new("big-csv");
    let big = std::fs::File::create(wd.path.join("big.csv")).unwrap();
    big.set_len(257 * 1024 * 1024).unwrap();
    let scenario = wd.scenario(
        "s.yaml",
        "target: http://127.0.0.1:9\ndata: { rows: { csv: big.csv } }\n\
         flows: { f: { steps: [ { request: \"GET /${rows.id}\" } ] } }\n\
         load: { stages: [ { rate: 1, hold: 1s } ] }\n",
    );
    let check = perfops(&["check", &scenario.display().to_string()]);
    check.assert_exit(2);
    assert!(
        check.stderr.contains("big.csv is larger than 256 MiB, the most perfops reads of a CSV file"),
        "{}",
        check.stderr
    );
}

/// A run named with terminal escapes (clear the screen, set the window's
/// title, an 8-bit CSI): `compare` and `runs` print the name escaped, never
/// the raw bytes. Before, the terminal ran them.
#[test]
fn names_with_terminal_escapes_are_printed_escaped() {
    let _cpu = shared();
    let wd = Workdir::new("escapes");
    let runs = wd.path.join("runs");
    let base = copy_fixture(STEPPED, &runs, "base");
    let evil = copy_fixture(STEPPED, &runs, "evil");
    let name = "evil\u{1b}[2J\u{1b}]0;pwned\u{7}\u{9b}31m\rforged";
    for file in ["meta.json", "summary.json"] {
        let path = evil.join(file);
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["name"] = name.into();
        std::fs::write(&path, v.to_string()).unwrap();
    }
    let compare = perfops(&["compare", &base.display().to_string(), &evil.display().to_string(), "--no-html"]);
    compare.assert_exit(0);
    let listed = perfops(&["runs", "--dir", &runs.display().to_string()]);
    listed.assert_exit(0);
    for (command, out) in [("compare", &compare.stdout), ("runs", &listed.stdout)] {
        let raw: Vec<char> = out.chars().filter(|c| c.is_control() && *c != '\n').collect();
        assert!(raw.is_empty(), "{command} printed control characters {raw:?}:\n{out}");
        assert!(out.contains("evil\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{9b}31m\\rforged"), "{command}:\n{out}");
    }
}

/// A broken third line of `series.jsonl` is named `series.jsonl:3:COLUMN`,
/// on stderr and in the page; never as the parser's "line 1", which reads
/// as the file's first line.
#[test]
fn a_damaged_third_line_is_named_by_its_place_in_the_file() {
    let _cpu = shared();
    let wd = Workdir::new("third-line");
    let run = copy_fixture(STEPPED, &wd.path, STEPPED);
    let series = std::fs::read_to_string(run.join("series.jsonl")).unwrap();
    let mut lines: Vec<&str> = series.lines().collect();
    // `achieved_rate` a string: a JSON object, not what perfops writes; the
    // parser stops after the string, at column 32.
    lines[2] = r#"{"t": 2, "achieved_rate": "fast"}"#;
    std::fs::write(run.join("series.jsonl"), lines.join("\n") + "\n").unwrap();
    let page = wd.path.join("report.html");
    let out = perfops(&["report", &run.display().to_string(), "-o", &page.display().to_string()]);
    out.assert_exit(0);
    let html = std::fs::read_to_string(&page).unwrap();
    let want = "series.jsonl:3:32: invalid type: string \"fast\", expected f64";
    assert!(out.stderr.contains(want), "stderr:\n{}", out.stderr);
    assert!(html.contains("series.jsonl:3:32: invalid type"), "the page does not name line 3");
    assert!(!out.stderr.contains("at line 1 column"), "stderr:\n{}", out.stderr);
}

/// `--metrics-listen` of a running `quick`: a client sending a byte a second
/// delays no scrape, each answered within a second, and is cut off at its
/// deadline. Before, the endpoint answered one connection at a time and the
/// slow client held it for as long as it kept sending.
#[test]
fn a_slow_client_blocks_no_scrape_of_metrics_listen() {
    let _cpu = shared();
    let server = perfops_testkit::status(200);
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr")
    };
    let url = server.url();
    let run = spawn_perfops(&["quick", "-r", "20", "-d", "8s", "--metrics-listen", &addr.to_string(), &url], |_| {});
    let up = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < up, "--metrics-listen {addr} never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut slow = TcpStream::connect(addr).expect("connect");
    let mut slow_reader = slow.try_clone().expect("clone");
    let opened = Instant::now();
    let trickle = std::thread::spawn(move || {
        for b in b"GET /metrics HTTP/1.1".iter().take(7) {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    for _ in 0..3 {
        let started = Instant::now();
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
        let mut page = String::new();
        s.read_to_string(&mut page).unwrap_or_else(|e| panic!("no scrape within 1 s ({e}): {page:?}"));
        assert!(page.starts_with("HTTP/1.1 200 OK") && page.contains("perfops_"), "{page}");
        assert!(started.elapsed() < Duration::from_secs(1), "scraped in {:?}", started.elapsed());
        std::thread::sleep(Duration::from_millis(500));
    }
    slow_reader.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let read = slow_reader.read(&mut [0u8; 64]);
    let cut = opened.elapsed();
    assert!(matches!(read, Ok(0) | Err(_)), "the slow client got an answer: {read:?}");
    assert!(cut < Duration::from_secs(7), "the slow client was held {cut:?}");
    trickle.join().expect("trickle");
    run.wait(Duration::from_secs(30)).assert_exit(0);
}
