//! Issue #12, point 3: a damaged results directory is read for what it
//! holds, and what could not be read is named; nothing a file holds makes
//! the readers panic, hang or run out of memory.
//!
//! The readers are the report (`html::render`), the comparison
//! (`compare::load`, its table and its page) and the listing (`runs::list`).
//! The base is a real run (`tests/corpus/results/base/`: 4 s of
//! `bench/scenario/soak.yaml` at 200/s against the async demo, every file a
//! run writes). Two kinds of input:
//!
//! - the checked-in corpus, `tests/corpus/results/{named,survive}/FILE--WHAT`:
//!   a replacement for FILE of the base, kept because it was interesting when
//!   a campaign of ~10,000 corruptions was run against the real binary (see
//!   the corpus README). `named/` files cannot be read (whole, or some of
//!   their lines): every reader must say so, naming FILE. `survive/` files
//!   hold odd values that do read (huge, negative, NaN timestamps, lines out
//!   of order): every reader must simply get through them;
//! - property tests that damage a copy of the base at random (cut, flip,
//!   splice, drop lines) and read it the three ways.
//!
//! The real binary replays the same corpus in the `perfops` crate's
//! `tests/corrupt.rs` (exit codes, stderr).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use perfops_report::compare::{self, Options};
use perfops_report::{html, runs};
use proptest::prelude::*;

const FILES: [&str; 7] =
    ["meta.json", "summary.json", "series.jsonl", "latency.hlog", "watch.jsonl", "probe.jsonl", "scenario.yaml"];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/results")
}

/// The base run's directory.
fn base() -> PathBuf {
    let dir = corpus().join("base");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(found.len(), 1, "one base run in {}", dir.display());
    found.remove(0)
}

/// A scratch folder holding a copy of the base run, removed when dropped
/// (kept when the test fails, for a look).
struct Copy {
    root: PathBuf,
    run: PathBuf,
}

impl Copy {
    fn new(tag: &str) -> Copy {
        static N: AtomicU64 = AtomicU64::new(0);
        let root = std::env::temp_dir().join(format!(
            "perfops-corrupt-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let base = base();
        let run = root.join(base.file_name().unwrap());
        std::fs::create_dir_all(&run).unwrap();
        for f in FILES {
            std::fs::copy(base.join(f), run.join(f)).unwrap();
        }
        Copy { root, run }
    }

    fn put(&self, file: &str, bytes: &[u8]) {
        std::fs::write(self.run.join(file), bytes).unwrap();
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// What the three readers said of `dir`: the report's page (or its error),
/// the comparison's notes, table and page (against the intact base), and
/// the listing's notes. Any panic fails the test that called it.
struct Said {
    report: String,
    compare: String,
    runs: String,
}

fn read_three_ways(copy: &Copy) -> Said {
    let report = match html::render(&copy.run) {
        Ok(page) => page,
        Err(e) => e.to_string(),
    };
    let compare = match compare::load(&[base(), copy.run.clone()]) {
        Ok(runs) => {
            let c = runs.compare(Options::default());
            let page = runs.html(&c);
            format!("{}\n{}\n{}", c.notes.join("\n"), compare::table(&c), page.len())
        }
        Err(e) => e.to_string(),
    };
    let runs = match runs::list(&copy.root) {
        Ok(found) => found.iter().flat_map(|r| r.notes.iter().map(|n| format!("{}: {n}\n", r.dir))).collect(),
        Err(e) => e.to_string(),
    };
    Said { report, compare, runs }
}

/// The corpus cases of `kind`: (file replaced, case name, its bytes).
fn cases(kind: &str) -> Vec<(String, String, Vec<u8>)> {
    let mut out: Vec<(String, String, Vec<u8>)> = std::fs::read_dir(corpus().join(kind))
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let file = name.split("--").next().unwrap().to_string();
            assert!(FILES.contains(&file.as_str()), "corpus case {name} names no results file");
            (file, name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    assert!(!out.is_empty(), "no corpus cases in {kind}/");
    out
}

/// #12: every unreadable file of the corpus is named by the report, by the
/// comparison and, for the files it reads (`meta.json`, `summary.json`), by
/// the listing; the rest of the run is still reported.
#[test]
fn unreadable_files_are_named_by_every_reader() {
    for (file, name, bytes) in cases("named") {
        let copy = Copy::new("named");
        copy.put(&file, &bytes);
        let said = read_three_ways(&copy);
        assert!(said.report.contains("<!DOCTYPE html>"), "{name}: no report:\n{}", said.report);
        assert!(said.report.contains(&file), "{name}: the report does not name {file}");
        assert!(said.compare.contains(&file), "{name}: the comparison does not name {file}:\n{}", said.compare);
        if file == "meta.json" || file == "summary.json" {
            assert!(said.runs.contains(&file), "{name}: the listing does not name {file}: {:?}", said.runs);
        }
    }
}

/// #12: odd values that do read (a second numbered 4294967295 made the
/// comparison's page allocate tens of GiB) are read by every reader.
#[test]
fn odd_values_are_read_by_every_reader() {
    for (file, name, bytes) in cases("survive") {
        let copy = Copy::new("survive");
        copy.put(&file, &bytes);
        let said = read_three_ways(&copy);
        assert!(said.report.contains("<!DOCTYPE html>"), "{name}: no report:\n{}", said.report);
        assert!(!said.compare.is_empty(), "{name}");
        assert!(said.runs.is_empty(), "{name}: the listing found something unreadable: {}", said.runs);
    }
}

/// #12: a directory where a results file should be is named, not followed.
#[test]
fn a_directory_in_place_of_a_file_is_named() {
    for file in FILES {
        let copy = Copy::new("dir");
        std::fs::remove_file(copy.run.join(file)).unwrap();
        std::fs::create_dir(copy.run.join(file)).unwrap();
        let said = read_three_ways(&copy);
        assert!(said.report.contains("<!DOCTYPE html>"), "{file}: no report:\n{}", said.report);
        assert!(said.report.contains(file), "{file} as a directory: the report does not name it");
        assert!(said.compare.contains(file), "{file} as a directory: the comparison does not name it");
        if ["meta.json", "summary.json", "series.jsonl"].contains(&file) {
            assert!(said.runs.contains(file), "{file} as a directory: the listing does not name it");
        }
    }
}

/// One way of damaging a file.
#[derive(Debug, Clone)]
enum Damage {
    /// Keep the first part (a kill, a full disk).
    Cut(prop::sample::Index),
    /// Flip bits of one byte.
    Flip(prop::sample::Index, u8),
    /// Write these bytes over the file from somewhere.
    Splice(prop::sample::Index, Vec<u8>),
    /// Remove one line.
    DropLine(prop::sample::Index),
    /// Repeat one line.
    RepeatLine(prop::sample::Index),
}

fn damage() -> impl Strategy<Value = Damage> {
    let index = any::<prop::sample::Index>();
    // Bytes that matter to JSON, to the hlog's CSV and to numbers.
    let soup = prop::collection::vec(
        prop::sample::select(b"{}[]\",:-+.0123456789eE \n\r\0\xff\xc3ntrufalsTag=HIST/AZ".to_vec()),
        1..24,
    );
    prop_oneof![
        index.clone().prop_map(Damage::Cut),
        (index.clone(), 1u8..=255).prop_map(|(i, b)| Damage::Flip(i, b)),
        (index.clone(), soup).prop_map(|(i, s)| Damage::Splice(i, s)),
        index.clone().prop_map(Damage::DropLine),
        index.prop_map(Damage::RepeatLine),
    ]
}

fn apply(bytes: &[u8], d: &Damage) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let lines = || bytes.split_inclusive(|&c| c == b'\n').collect::<Vec<_>>();
    match d {
        Damage::Cut(i) => b.truncate(i.index(b.len() + 1)),
        Damage::Flip(i, x) if !b.is_empty() => b[i.index(bytes.len())] ^= x,
        Damage::Splice(i, s) => {
            let at = i.index(b.len() + 1);
            let end = (at + s.len()).min(b.len());
            b.splice(at..end, s.iter().copied());
        }
        Damage::DropLine(i) if !b.is_empty() => {
            let mut l = lines();
            l.remove(i.index(l.len()));
            b = l.concat();
        }
        Damage::RepeatLine(i) if !b.is_empty() => {
            let mut l = lines();
            let k = i.index(l.len());
            l.insert(k, l[k]);
            b = l.concat();
        }
        Damage::Flip(..) | Damage::DropLine(_) | Damage::RepeatLine(_) => {}
    }
    b
}

proptest! {
    // Each case reads a directory three ways: a few dozen per file keep it to seconds.
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    /// #12: up to three damages to one or two files of a real run; every
    /// reader gets through, and the report is still a page.
    #[test]
    fn damaged_runs_are_read_without_panic(
        edits in prop::collection::vec((0usize..FILES.len(), prop::collection::vec(damage(), 1..4)), 1..3),
    ) {
        let copy = Copy::new("prop");
        for (f, damages) in &edits {
            let file = FILES[*f];
            let mut bytes = std::fs::read(copy.run.join(file)).unwrap();
            for d in damages {
                bytes = apply(&bytes, d);
            }
            copy.put(file, &bytes);
        }
        let said = read_three_ways(&copy);
        prop_assert!(
            said.report.contains("<!DOCTYPE html>") || said.report.contains("holds no results"),
            "{}", said.report
        );
    }
}
