//! `check`'s warnings (issue #32 want 7): what a valid scenario will surely do wrong when it runs, said
//! before it runs. This module owns the rules and their arithmetic; it does not read files (the
//! caller hands in the feeders `run` would read) nor print (the binary renders them with
//! [`Diagnostics::render_warnings`]). A warning does not fail `check`: the file is valid, the plan is
//! what is doubtful.
//!
//! The rules:
//!
//! - **More in flight than `max_in_flight` can hold** (open model). Little's law: arrivals in flight
//!   = arrival rate x time each stays. A flow stays at least the sum of its pauses (and WebSocket
//!   holds), whatever the server does, so at the profile's peak rate
//!
//!   ```text
//!   in flight >= peak rate x mean flow pause    (weights of the flows)
//!             =   40/s     x    0.6 s           = 24  > max_in_flight 20
//!   ```
//!
//!   and the arrivals beyond `max_in_flight` are dropped: the stage is inconclusive on a server that
//!   answers at once.
//! - **A `mode: once` feeder shorter than the arrivals that read it** (open model): the profile plans
//!   `sum((from + to) / 2 x duration)` arrivals, the flows that render one of its columns take their
//!   weights' share of them, and past its last row those flows stop.
//! - **A column forced to a number that holds text** (`qty: ${orders.qty:number}`, a row `abc`): the
//!   arrivals that get that row are refused as `bad_value` (any model). Said with the row's line in
//!   the CSV file, never its value (it may be a secret).

use std::time::Duration;

use marked_yaml::{LoaderOptions, Node};

use super::diag::{Diagnostic, Diagnostics};
use super::feeder::{FeedMode, Feeder};
use super::template::typed::is_json_number;
use super::template::{Template, VarRef};
use super::{Flow, Load, Scenario};

/// The warnings for `scenario` (parsed from `text`, read from `file`), whose feeders `run` would read
/// as `feeders`; each at the place in the file that decides it.
pub fn warnings(file: &str, text: &str, scenario: &Scenario, feeders: &[Feeder]) -> Diagnostics {
    let root = marked_yaml::parse_yaml_with_options(0, text, LoaderOptions::default().prevent_coercion(true)).ok();
    let at = |path: &[&str], message: String, hint: String| {
        let (line, column) = root.as_ref().and_then(|r| locate(r, path)).unwrap_or((0, 0));
        Diagnostic { file: file.to_owned(), line, column, path: path.join("."), message, hint: Some(hint) }
    };
    let mut out = Vec::new();
    out.extend(text_forced_to_numbers(scenario, feeders, &at));
    let Load::Open { stages, max_in_flight, .. } = &scenario.load else { return Diagnostics(out) };
    let total_weight: f64 = scenario.flows.iter().map(|f| f64::from(f.weight)).sum();
    if total_weight == 0.0 {
        return Diagnostics(out);
    }
    // Little's law at the peak rate.
    let peak = stages.iter().map(|s| s.segment.from.as_f64().max(s.segment.to.as_f64())).fold(0.0, f64::max);
    let pause =
        scenario.flows.iter().map(|f| f64::from(f.weight) * least_time(f).as_secs_f64()).sum::<f64>() / total_weight;
    let in_flight = peak * pause;
    if in_flight > f64::from(*max_in_flight) {
        let path: &[&str] = if root.as_ref().and_then(|r| locate(r, &["load", "max_in_flight"])).is_some() {
            &["load", "max_in_flight"]
        } else {
            &["load"]
        };
        out.push(at(
            path,
            format!(
                "at {} arrivals/s, flows that last at least {:.2} s (their pauses) keep about {:.0} arrivals in flight, more than max_in_flight {max_in_flight}: the arrivals beyond it will be dropped",
                trim(peak),
                pause,
                in_flight.ceil()
            ),
            format!(
                "raise `max_in_flight` to at least {:.0}, or lower the rate (Little's law: in flight = rate x time in the flow)",
                in_flight.ceil()
            ),
        ));
    }
    // `once` feeders against the arrivals planned.
    let planned: f64 = stages
        .iter()
        .map(|s| (s.segment.from.as_f64() + s.segment.to.as_f64()) / 2.0 * s.segment.duration.as_secs_f64())
        .sum();
    for feeder in feeders.iter().filter(|f| f.mode() == FeedMode::Once) {
        let reads =
            |t: &Template| t.vars().any(|v| matches!(v, VarRef::Feeder { feeder: n, .. } if n == feeder.name()));
        let everyone = scenario.defaults.headers.iter().any(|(_, t)| reads(t));
        let share: f64 = scenario
            .flows
            .iter()
            .filter(|f| everyone || f.steps.iter().any(|s| s.templates().into_iter().any(reads)))
            .map(|f| f64::from(f.weight))
            .sum::<f64>()
            / total_weight;
        let using = (planned * share).floor();
        let rows = feeder.len() as f64;
        if using > rows {
            out.push(at(
                &["data", feeder.name(), "mode"],
                format!(
                    "feeder `{}` (mode: once) has {} rows, but about {using:.0} arrivals read it: past its last row their flows stop (about {:.0} not sent)",
                    feeder.name(),
                    feeder.len(),
                    using - rows
                ),
                "add rows to its file, use `mode: cycle` to reuse them, or plan fewer arrivals".into(),
            ));
        }
    }
    out.sort_by_key(|d| (d.line, d.column));
    Diagnostics(out)
}

/// A `${feeder.column:number}` whose column holds a row that is not a number, once per reference.
fn text_forced_to_numbers(
    scenario: &Scenario,
    feeders: &[Feeder],
    at: &dyn Fn(&[&str], String, String) -> Diagnostic,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut said: Vec<(&str, &str)> = Vec::new();
    let steps = scenario.setup.iter().chain(scenario.flows.iter().flat_map(|f| f.steps.iter()));
    let forced = steps.flat_map(|s| s.templates()).flat_map(|t| t.forced_numbers());
    for var in forced {
        let VarRef::Feeder { feeder, column } = var else { continue };
        if said.contains(&(feeder.as_str(), column.as_str())) {
            continue;
        }
        let Some(f) = feeders.iter().find(|f| f.name() == feeder) else { continue };
        let Some(col) = f.column_index(column) else { continue };
        let bad: Vec<usize> = f
            .rows()
            .enumerate()
            .filter(|(_, row)| row.get(col).is_some_and(|v| !is_json_number(v.as_bytes())))
            .map(|(i, _)| i)
            .collect();
        if let Some(first) = bad.first() {
            said.push((feeder, column));
            out.push(at(
                &["data", feeder, "csv"],
                format!(
                    "`${{{feeder}.{column}:number}}`: {} of {} rows of column `{column}` are not numbers (the first: data row {}): their requests will be refused as `bad_value`",
                    bad.len(),
                    f.len(),
                    first + 1
                ),
                format!("fix those rows, or send the column as text with `${{{feeder}.{column}:string}}`"),
            ));
        }
    }
    out
}

/// The least time an arrival spends in `flow` whatever the server does: its pauses and WebSocket holds.
fn least_time(flow: &Flow) -> Duration {
    flow.steps.iter().map(|s| s.pause + s.websocket.as_ref().map_or(Duration::ZERO, |ws| ws.hold)).sum()
}

/// `40` for 40.0, `2.5` for 2.5.
fn trim(rate: f64) -> String {
    if rate.fract() == 0.0 { format!("{rate:.0}") } else { format!("{rate}") }
}

/// The line and column of the key at `path` (mapping keys), if the file has it.
fn locate(root: &Node, path: &[&str]) -> Option<(usize, usize)> {
    let (last, parents) = path.split_last()?;
    let mut node = root;
    for key in parents {
        node = node.as_mapping()?.get_node(key)?;
    }
    let key = node.as_mapping()?.keys().find(|k| k.as_str() == *last)?;
    let start = key.span().start()?;
    Some((start.line(), start.column()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str, rows: usize) -> Vec<String> {
        let s = super::super::parse("t.yaml", yaml, &[]).unwrap_or_else(|d| panic!("{}", d.render(yaml)));
        let csv = std::iter::once("email".to_owned()).chain((0..rows).map(|i| format!("u{i}@x"))).collect::<Vec<_>>();
        let feeders: Vec<Feeder> =
            s.data.iter().map(|spec| Feeder::from_csv(&spec.name, &csv.join("\n"), spec.mode).unwrap()).collect();
        warnings("t.yaml", yaml, &s, &feeders)
            .0
            .iter()
            .map(|d| format!("{}:{}: {}", d.line, d.column, d.message))
            .collect()
    }

    /// Issue #32 want 7: a rate far beyond what `max_in_flight` carries at the flows' pauses, and a
    /// `once` feeder shorter than its arrivals, are warned of at their place; plans that fit are not.
    #[test]
    fn what_will_surely_fail_is_warned_of() {
        let flow = |pause: &str| {
            format!(
                "flows:\n  buy:\n    steps:\n      - {{ request: \"GET /p?u=${{users.email}}\", pause: {pause} }}\n      - {{ request: GET /q, pause: {pause} }}\n"
            )
        };
        let data = |mode: &str| format!("data:\n  users: {{ csv: u.csv, mode: {mode} }}\n");
        // (file, rows in the feeder, warnings as "line:column: message start")
        let cases: Vec<(String, usize, Vec<&str>)> = vec![
            // 40/s x (2 x 300 ms) = 24 in flight > 20: warned at `max_in_flight`.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  max_in_flight: 20\n  stages: [ {{ rate: 40, hold: 1s }} ]\n",
                    data("cycle"),
                    flow("300ms")
                ),
                10,
                vec![
                    "10:3: at 40 arrivals/s, flows that last at least 0.60 s (their pauses) keep about 24 arrivals in flight, more than max_in_flight 20",
                ],
            ),
            // 24 in flight fits a cap of 24 (equal is not beyond).
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  max_in_flight: 24\n  stages: [ {{ rate: 40, hold: 1s }} ]\n",
                    data("cycle"),
                    flow("300ms")
                ),
                10,
                vec![],
            ),
            // The peak of a ramp counts; without `max_in_flight` written the default (1000) applies, at `load`.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  stages: [ {{ rate: 1, hold: 1s }}, {{ ramp_to: 2000, over: 1s }} ]\n",
                    data("cycle"),
                    flow("300ms")
                ),
                10,
                vec![
                    "9:1: at 2000 arrivals/s, flows that last at least 0.60 s (their pauses) keep about 1200 arrivals in flight, more than max_in_flight 1000",
                ],
            ),
            // No pauses: Little's law says nothing the server does not decide.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  max_in_flight: 1\n  stages: [ {{ rate: 500, hold: 1s }} ]\n",
                    data("cycle"),
                    flow("0s")
                ),
                10,
                vec![],
            ),
            // once with 10 rows, 5/s for 4 s = 20 arrivals: warned at its `mode`.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  stages: [ {{ rate: 5, hold: 4s }} ]\n",
                    data("once"),
                    flow("0s")
                ),
                10,
                vec!["3:24: feeder `users` (mode: once) has 10 rows, but about 20 arrivals read it"],
            ),
            // ... with 20 rows, it fits.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  stages: [ {{ rate: 5, hold: 4s }} ]\n",
                    data("once"),
                    flow("0s")
                ),
                20,
                vec![],
            ),
            // cycle reuses its rows: no warning however short.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  stages: [ {{ rate: 5, hold: 4s }} ]\n",
                    data("cycle"),
                    flow("0s")
                ),
                1,
                vec![],
            ),
            // Only the flows that read the feeder count: weight 1 of 4 reads it, 20 x 1/4 = 5 <= 10.
            (
                format!(
                    "target: http://h:1\n{}{}  other: {{ weight: 3, steps: [ {{ request: GET /o }} ] }}\nload:\n  stages: [ {{ rate: 5, hold: 4s }} ]\n",
                    data("once"),
                    flow("0s")
                ),
                10,
                vec![],
            ),
            // A column forced to a number holding text: said at the feeder, whatever the model.
            (
                "target: http://h:1\ndata: { users: { csv: u.csv } }\nflows: { f: { steps: [ { request: POST /, json: { n: \"${users.email:number}\" } } ] } }\nload:\n  model: closed\n  stages: [ { users: 1, hold: 1s } ]\n".into(),
                2,
                vec!["2:18: `${users.email:number}`: 2 of 2 rows of column `email` are not numbers (the first: data row 1)"],
            ),
            // The closed model has no arrival rate: nothing to say.
            (
                format!(
                    "target: http://h:1\n{}{}load:\n  model: closed\n  stages: [ {{ users: 50, hold: 10s }} ]\n",
                    data("once"),
                    flow("1s")
                ),
                1,
                vec![],
            ),
        ];
        for (yaml, rows, want) in cases {
            let got = check(&yaml, rows);
            assert_eq!(got.len(), want.len(), "{yaml}\n{got:#?}");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.starts_with(w), "{yaml}\ngot  {g}\nwant {w}");
            }
        }
    }
}
