//! The run listing of `perfops runs` over the committed fixtures (see
//! `make_fixtures.rs`): a stepped run that broke, and a later one killed
//! mid-way.

use std::path::Path;

use perfops_report::runs;

const STEPPED: &str = "20261122T043000Z-orders-stepped";
const KILLED: &str = "20261123T091500Z-orders-killed";

/// `perfops runs`: the fixtures, newest first, with verdict and capacity,
/// "incomplete" for the killed one.
#[test]
fn runs_are_listed_newest_first() {
    let found = runs::list(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")).unwrap();
    let dirs: Vec<&str> = found.iter().map(|r| r.dir.as_str()).collect();
    assert_eq!(dirs, [KILLED, STEPPED]);
    assert_eq!((found[0].result.name(), found[0].complete, found[0].duration_s), ("incomplete", false, Some(23.0)));
    assert_eq!(
        (found[1].result.name(), found[1].capacity_rps, found[1].breaks_at_rps),
        ("failed", Some(200.0), Some(250.0))
    );
    let table = runs::table(&found);
    assert!(table.lines().nth(1).unwrap().contains("incomplete"), "{table}");
    assert!(table.lines().nth(2).unwrap().contains("200/s"), "{table}");
}
