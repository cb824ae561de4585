//! Issue #12, point 3, end to end: the real binary's `report`, `compare` and
//! `runs` on a real run damaged by each case of the checked-in corpus
//! (`perfops-report/tests/corpus/results/`, described in its README): each
//! exits 0 or 2, never panics (101) and never hangs; a file it could not
//! read is named (in the report's notes, the comparison's, or on stderr for
//! the listing, whose stdout stays the table).

mod common;

use std::path::{Path, PathBuf};

use common::{Finished, RUN_LIMIT, Workdir, shared, spawn_perfops};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../perfops-report/tests/corpus/results")
}

fn base() -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(corpus().join("base")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(found.len(), 1, "one base run");
    found[0].clone()
}

fn perfops(args: &[&str]) -> Finished {
    spawn_perfops(args, |_| {}).wait(RUN_LIMIT)
}

/// Exit 0 or 2 and no panic: what every reader owes any input.
fn check_exit(out: &Finished, case: &str) {
    assert!(matches!(out.code, Some(0 | 2)), "{case}: {:?} exited {:?}\n{}", out.args, out.code, out.stderr);
    assert!(!out.stderr.contains("panicked"), "{case}: {:?} panicked\n{}", out.args, out.stderr);
}

/// Every case of `kind`: the base with one file replaced, read three ways.
/// `named`: the file must be named by each reader that reads it.
fn replay(kind: &str) {
    let _cpu = shared();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus().join(kind)).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(!cases.is_empty());
    let base = base();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let file = name.split("--").next().unwrap().to_string();
        let wd = Workdir::new("corrupt");
        let runs = wd.runs();
        let run = runs.join(base.file_name().unwrap());
        std::fs::create_dir_all(&run).unwrap();
        for e in std::fs::read_dir(&base).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), run.join(e.file_name())).unwrap();
        }
        std::fs::copy(&case, run.join(&file)).unwrap();
        let (run_s, runs_s, base_s) =
            (run.display().to_string(), runs.display().to_string(), base.display().to_string());
        let page = wd.path.join("page.html").display().to_string();

        let report = perfops(&["report", &run_s, "-o", &page]);
        check_exit(&report, &name);
        let html = std::fs::read_to_string(&page).unwrap_or_default();
        let compare = perfops(&["compare", &base_s, &run_s, "--no-html"]);
        check_exit(&compare, &name);
        let compare_page = perfops(&["compare", &base_s, &run_s, "-o", &page]);
        check_exit(&compare_page, &name);
        let listed = perfops(&["runs", "--dir", &runs_s]);
        check_exit(&listed, &name);
        if kind == "named" {
            assert!(html.contains(&file), "{name}: the report does not name {file}");
            assert!(compare.stdout.contains(&file), "{name}: compare does not name {file}:\n{}", compare.stdout);
            if file == "meta.json" || file == "summary.json" {
                assert!(listed.stderr.contains(&file), "{name}: runs does not name {file}: {}", listed.stderr);
                assert!(!listed.stdout.contains(&file), "{name}: runs' stdout stays the table");
            }
        }
    }
}

/// #12: unreadable files are named by `report`, `compare` and `runs`.
#[test]
fn corpus_of_unreadable_files_is_named() {
    replay("named");
}

/// #12: odd values that read (`compare` on a second numbered 4294967295
/// took tens of GiB and never ended) are got through.
#[test]
fn corpus_of_odd_values_is_got_through() {
    replay("survive");
}
