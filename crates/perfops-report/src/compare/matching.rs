//! Which stage of one run stands beside which stage of another.
//!
//! The first run (the baseline) lays out the rows, one per stage in its
//! order. Each later run's stages join a row by name first (the same
//! scenario run twice names its stages alike), then, for those left, by
//! target rate within [`RATE_TOLERANCE`] (a scenario whose stages were
//! renamed, or `200/s` against `step 4` at 200/s), the closest rate first.
//! A stage that finds no row gets its own, shown as unmatched, placed among
//! the rows by its rate: it is never forced beside a stage of another rate.
//!
//! Pure: it sees only names and rates, so it is table-tested.

use serde::Serialize;

/// Two target rates match when they differ by at most this share of the
/// larger one: 5% lets `200/s` meet `205/s` (a rounded ramp's mean) but not
/// `250/s`.
pub const RATE_TOLERANCE: f64 = 0.05;

/// What matching sees of a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageKey {
    /// The stage's name.
    pub name: String,
    /// Its target rate (open model), arrivals per second.
    pub target_rate: Option<f64>,
}

/// How a run's stage came to stand in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// The row is this run's stage (the first run to have it).
    Own,
    /// Same name as the row's stage.
    Name,
    /// Target rate within [`RATE_TOLERANCE`] of the row's.
    TargetRate,
}

/// One row: for each run, the index of its stage there (if any) and how it matched.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedRow {
    /// Per run, in the runs' order.
    pub members: Vec<Option<(usize, MatchedBy)>>,
}

impl MatchedRow {
    /// True when only one run has a stage in this row.
    pub fn unmatched(&self) -> bool {
        self.members.iter().flatten().count() == 1
    }
}

/// Rows for `runs` (each a list of stages, in order).
pub fn match_stages(runs: &[Vec<StageKey>]) -> Vec<MatchedRow> {
    let n = runs.len();
    // Each row remembers the stage that opened it: later runs match against that.
    let mut rows: Vec<(StageKey, MatchedRow)> = Vec::new();
    for (r, stages) in runs.iter().enumerate() {
        let mut placed: Vec<Option<usize>> = vec![None; stages.len()];
        let taken = |rows: &[(StageKey, MatchedRow)], row: usize| rows[row].1.members[r].is_some();
        for (s, key) in stages.iter().enumerate() {
            if let Some(row) = (0..rows.len()).find(|&i| !taken(&rows, i) && rows[i].0.name == key.name) {
                rows[row].1.members[r] = Some((s, MatchedBy::Name));
                placed[s] = Some(row);
            }
        }
        for (s, key) in stages.iter().enumerate() {
            if placed[s].is_some() {
                continue;
            }
            let Some(rate) = key.target_rate else { continue };
            let closest = (0..rows.len())
                .filter(|&i| !taken(&rows, i))
                .filter_map(|i| Some((i, (rows[i].0.target_rate? - rate).abs())))
                .filter(|&(i, d)| d <= RATE_TOLERANCE * rate.max(rows[i].0.target_rate.unwrap_or(0.0)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((row, _)) = closest {
                rows[row].1.members[r] = Some((s, MatchedBy::TargetRate));
                placed[s] = Some(row);
            }
        }
        for (s, key) in stages.iter().enumerate() {
            if placed[s].is_none() {
                let mut members = vec![None; n];
                members[r] = Some((s, MatchedBy::Own));
                // Among the rows by rate, not after them all: B's unmatched
                // 150/s stood after A's 400/s (review 2's tester).
                let at = key
                    .target_rate
                    .filter(|_| r > 0)
                    .and_then(|rate| rows.iter().position(|(k, _)| k.target_rate.is_some_and(|t| t > rate)));
                rows.insert(at.unwrap_or(rows.len()), (key.clone(), MatchedRow { members }));
            }
        }
    }
    rows.into_iter().map(|(_, row)| row).collect()
}

#[cfg(test)]
mod tests {
    use super::MatchedBy::{Name, Own, TargetRate};
    use super::*;

    fn stages(list: &[(&str, Option<f64>)]) -> Vec<StageKey> {
        list.iter().map(|(n, r)| StageKey { name: (*n).to_string(), target_rate: *r }).collect()
    }

    type Members = Vec<Vec<Option<(usize, MatchedBy)>>>;

    fn members(rows: &[MatchedRow]) -> Members {
        rows.iter().map(|r| r.members.clone()).collect()
    }

    #[test]
    fn table() {
        // (what, each run's stages, rows wanted)
        type Case = (&'static str, Vec<Vec<(&'static str, Option<f64>)>>, Members);
        let cases: Vec<Case> = vec![
            (
                // The same scenario run twice: every stage by name, in order.
                "same plan",
                vec![vec![("200/s", Some(200.0)), ("800/s", Some(800.0))]; 2],
                vec![vec![Some((0, Own)), Some((0, Name))], vec![Some((1, Own)), Some((1, Name))]],
            ),
            (
                // Renamed stages meet by rate, whatever their order.
                "renamed",
                vec![
                    vec![("warm", Some(100.0)), ("peak", Some(400.0))],
                    vec![("step 2", Some(400.0)), ("step 1", Some(100.0))],
                ],
                vec![vec![Some((0, Own)), Some((1, TargetRate))], vec![Some((1, Own)), Some((0, TargetRate))]],
            ),
            (
                // 205 is within 5% of 200; 250 is not and stands alone.
                "tolerance",
                vec![vec![("a", Some(200.0))], vec![("b", Some(205.0)), ("c", Some(250.0))]],
                vec![vec![Some((0, Own)), Some((0, TargetRate))], vec![None, Some((1, Own))]],
            ),
            (
                // A name wins over a closer rate: "peak" is "peak" even at another rate.
                "name first",
                vec![vec![("peak", Some(300.0)), ("x", Some(500.0))], vec![("peak", Some(500.0))]],
                vec![vec![Some((0, Own)), Some((0, Name))], vec![Some((1, Own)), None]],
            ),
            (
                // Closed model: no rates, so unnamed-alike stages stay apart.
                "no rates",
                vec![vec![("10 users", None)], vec![("20 users", None)]],
                vec![vec![Some((0, Own)), None], vec![None, Some((0, Own))]],
            ),
            (
                // Three runs: the third meets a row opened by the second.
                "three runs",
                vec![vec![("a", Some(100.0))], vec![("a", Some(100.0)), ("b", Some(900.0))], vec![("c", Some(890.0))]],
                vec![vec![Some((0, Own)), Some((0, Name)), None], vec![None, Some((1, Own)), Some((0, TargetRate))]],
            ),
            (
                // Other steps: B's unmatched stages stand among A's by rate.
                "interleaved",
                vec![
                    vec![("100/s", Some(100.0)), ("200/s", Some(200.0)), ("300/s", Some(300.0))],
                    vec![("150/s", Some(150.0)), ("300/s", Some(300.0)), ("450/s", Some(450.0))],
                ],
                vec![
                    vec![Some((0, Own)), None],
                    vec![None, Some((0, Own))],
                    vec![Some((1, Own)), None],
                    vec![Some((2, Own)), Some((1, Name))],
                    vec![None, Some((2, Own))],
                ],
            ),
            (
                // Two stages at one rate (warm-up and cool-down): each row is used once.
                "repeated rate",
                vec![vec![("up", Some(50.0)), ("down", Some(50.0))], vec![("s1", Some(50.0)), ("s2", Some(50.0))]],
                vec![vec![Some((0, Own)), Some((0, TargetRate))], vec![Some((1, Own)), Some((1, TargetRate))]],
            ),
        ];
        for (what, runs, want) in cases {
            let runs: Vec<Vec<StageKey>> = runs.iter().map(|r| stages(r)).collect();
            assert_eq!(members(&match_stages(&runs)), want, "{what}");
        }
    }

    #[test]
    fn unmatched_rows() {
        let rows = match_stages(&[stages(&[("a", Some(1.0))]), stages(&[("b", Some(9.0))])]);
        assert!(rows.iter().all(MatchedRow::unmatched));
    }
}
