//! The comparison on a terminal: the runs, the two headline sentences
//! (capacity, throughput at equal p95, with the definition), then one block
//! per stage with a line per run and, under each run after the baseline, its
//! deltas in the same columns — aligned like `perfops run`'s stage table.
//!
//! Names come from the runs' files (#31): each is printed with its control
//! characters escaped ([`perfops_core::printable`]), and the whole text is
//! escaped again but for its newlines, so that no sentence built from a name
//! carries a terminal escape either.

use std::fmt::Write;

use perfops_core::analysis::verdict::StageVerdict;
use perfops_core::printable::{self, escape};

use super::{Cell, Comparison, Delta, Row};
use crate::format::{ms_compact as ms, none_held, per_second};

/// A rate without its unit: `812`, `12.3`, as every output says it.
pub(crate) fn rate(v: f64) -> String {
    crate::format::rate_number(v)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

fn pct(v: Option<f64>) -> String {
    v.map_or(String::new(), |p| format!(" ({p:+.1}%)"))
}

/// `+0.1 (+0.1%)`, `-0.40ms (-1.9%)`: a delta and its share of the baseline.
fn delta(d: Option<Delta>, unit_ms: bool) -> String {
    let Some(d) = d else { return "-".into() };
    let abs = if unit_ms {
        format!("{}{}", if d.abs < 0.0 { '-' } else { '+' }, ms(d.abs.abs()))
    } else {
        format!("{:+.1}", d.abs)
    };
    format!("{abs}{}", pct(d.pct))
}

const W: usize = 17;

fn header(o: &mut String, stage_w: usize, run_w: usize) {
    let _ = writeln!(
        o,
        "{:<stage_w$}  {:<run_w$}  {:>9}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>9}  verdict",
        "stage", "run", "target/s", "achieved/s", "p50", "p95", "p99", "p99 ok", "errors"
    );
}

fn row(o: &mut String, r: &Row, titles: &[String], stage_w: usize, run_w: usize) {
    let mut first = true;
    for (i, c) in r.cells.iter().enumerate() {
        let own = escape(&r.name);
        let stage = if first { own.as_ref() } else { "" };
        first = false;
        let Some(c) = c else {
            let _ = writeln!(o, "{stage:<stage_w$}  {:<run_w$}  (no such stage)", titles[i]);
            continue;
        };
        let name = if c.stage != r.name { format!("{} ({})", titles[i], escape(&c.stage)) } else { titles[i].clone() };
        let _ = writeln!(
            o,
            "{stage:<stage_w$}  {name:<run_w$}  {:>9}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>9}  {}{}",
            opt(c.target_rate, rate),
            opt(c.achieved_rate, rate),
            opt(c.p50_ms, ms),
            opt(c.p95_ms, ms),
            opt(c.p99_ms, ms),
            opt(c.p99_ok_ms, ms),
            opt(c.error_ratio, |v| format!("{:.2}%", v * 100.0)),
            // A stage changed by hand judged nothing: said beside its verdict.
            c.verdict.map_or("-", StageVerdict::name),
            if c.by_hand { " (changed by hand)" } else { "" }
        );
        deltas(o, c, &titles[0], stage_w, run_w);
    }
}

fn deltas(o: &mut String, c: &Cell, base: &str, stage_w: usize, run_w: usize) {
    // A stage the baseline or this run did not run has nothing to subtract.
    let Some(d) = c.delta.filter(|d| d.achieved_rate.is_some() || d.p95_ms.is_some()) else { return };
    let base_letter = base.split(' ').next().unwrap_or(base);
    let _ = writeln!(
        o,
        "{:<stage_w$}  {:<run_w$}  {:>9}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>W$}  {:>9}",
        "",
        format!("  Δ vs {base_letter}"),
        "",
        delta(d.achieved_rate, false),
        delta(d.p50_ms, true),
        delta(d.p95_ms, true),
        delta(d.p99_ms, true),
        delta(d.p99_ok_ms, true),
        d.error_ratio.map_or("-".into(), |e| format!("{:+.2}pp", e.abs * 100.0)),
    );
}

/// The whole comparison as text.
pub fn table(c: &Comparison) -> String {
    let mut o = String::new();
    let titles: Vec<String> = c.runs.iter().map(|r| escape(&r.title()).into_owned()).collect();
    let _ = writeln!(o, "compare: {} (baseline) vs {}", titles[0], titles[1..].join(", "));
    let title_w = titles.iter().map(|t| t.chars().count()).max().unwrap_or(1);
    for (r, t) in c.runs.iter().zip(&titles) {
        let cap = match (r.capacity_rps, r.breaks_at_rps) {
            (Some(c), Some(b)) => format!("capacity {}, breaks at {}", per_second(c), per_second(b)),
            (Some(c), None) => format!("capacity {}, did not break", per_second(c)),
            (None, Some(b)) => format!("{}, breaks at {}", none_held(r.any_held), per_second(b)),
            (None, None) => "no capacity".into(),
        };
        let _ = writeln!(o, "  {t:<title_w$}  {:<12}  {cap}  [{}]", r.result.name(), escape(&r.dir));
        if let Some(why) = &r.why {
            let _ = writeln!(o, "  {:<title_w$}  why: {why}", "");
        }
        if let Some(t) = &r.target {
            // As resolved (#32): one file run against two ports shows the two ports.
            let _ = writeln!(o, "  {:<title_w$}  target: {}", "", escape(t));
        }
        if let Some(p) = &r.protocol {
            let _ = writeln!(o, "  {:<title_w$}  protocol: {p}", "");
        }
    }
    o.push('\n');
    for s in &c.protocols {
        let _ = writeln!(o, "protocol: {}", s.text);
    }
    for s in &c.capacity {
        let _ = writeln!(o, "capacity: {}", s.text);
    }
    let e = &c.equal_p95;
    for s in &e.statements {
        let _ = writeln!(o, "throughput: {}", s.text);
    }
    match e.p95_ms {
        Some(l) => {
            let _ = writeln!(o, "  L = p95 {}, from {}", ms(l), e.source);
            let _ = writeln!(o, "  ({})", e.definition);
        }
        None => {
            let _ = writeln!(o, "throughput at equal p95: {}", e.source);
        }
    }
    o.push('\n');
    let stage_w = c.stages.iter().map(|r| escape(&r.name).chars().count()).max().unwrap_or(5).clamp(9, 24);
    // A run's line names its own stage when it differs from the row's.
    let run_w = c
        .stages
        .iter()
        .flat_map(|r| {
            r.cells.iter().enumerate().map(|(i, cell)| {
                let own =
                    cell.as_ref().filter(|c| c.stage != r.name).map_or(0, |c| escape(&c.stage).chars().count() + 3);
                titles[i].chars().count() + own
            })
        })
        .max()
        .unwrap_or(8)
        .clamp(10, 40);
    header(&mut o, stage_w, run_w);
    for r in c.stages.iter().chain(std::iter::once(&c.total)) {
        row(&mut o, r, &titles, stage_w, run_w);
    }
    if !c.histograms.is_empty() {
        let _ = writeln!(o, "\nstreams (p50 / p95 / p99, each run):");
        for h in &c.histograms {
            let cells: Vec<String> = h
                .runs
                .iter()
                .zip(&titles)
                .map(|(v, t)| {
                    let f = |x: f64| if h.count { format!("{x:.0}") } else { ms(x) };
                    let letter = t.split(' ').next().unwrap_or(t);
                    v.map_or(format!("{letter} -"), |[a, b, c]| format!("{letter} {} / {} / {}", f(a), f(b), f(c)))
                })
                .collect();
            let _ = writeln!(o, "  {:<stage_w$}  {:<15}  {}", escape(&h.step), h.figure, cells.join("   "));
        }
    }
    for n in &c.notes {
        let _ = writeln!(o, "note: {n}");
    }
    printable::lines(&o).into_owned()
}
