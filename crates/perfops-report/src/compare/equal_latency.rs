//! Throughput at equal latency: "B lost 5.2% throughput at equal p95".
//!
//! Each run's stages give points (p95, achieved rate less its answered
//! failures: an error answered fast is no traffic carried; a refused connect
//! was never in the achieved rate). A run's **throughput at
//! p95 = L** is the most it carried while its p95 stayed at or under L,
//! read on the line through those points: the points sorted by p95, the
//! achieved rate made non-decreasing along them (a faster point that carried
//! less does not lower what the run showed it can carry at that latency),
//! then linear between the two points around L.
//!
//! ```text
//!   achieved/s
//!     500 |                    *------*        * stage (p95, achieved)
//!     400 |              *----/                -- the envelope, read at L
//!     300 |        *----/
//!         |        ^     ^  L = 30 ms: 300 + (30-20)/(40-20) * (400-300) = 350/s
//!         +--------+-----+----------------- p95 (ms)
//!                  20    40
//! ```
//!
//! Outside its points a run says less: with every p95 under L it carried
//! **at least** its highest rate (it was never pushed to L); with every
//! p95 over L it never was that fast. The precision is that of the stages'
//! spacing: two stages far apart in rate make a coarse line.
//!
//! Which L: `--at-p95` when given; else the baseline's SLO p95 threshold
//! (`p95 < 250ms`: throughput within the latency budget); else the
//! baseline's p95 at its capacity stage (or, with no verdict, at its
//! busiest stage).

use serde::Serialize;

/// What one run carried at p95 = L.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ThroughputAt {
    /// Read on the line between two stages (or at a stage with that p95).
    At {
        /// Arrivals per second.
        rate: f64,
    },
    /// Every stage was faster than L: the run carried at least this.
    AtLeast {
        /// Its highest achieved rate, arrivals per second.
        rate: f64,
    },
    /// Every stage was slower than L.
    NeverThatFast {
        /// Its lowest p95, ms.
        lowest_p95_ms: f64,
    },
    /// No stage with both a p95 and an achieved rate.
    NoData,
}

impl ThroughputAt {
    /// The rate, exact or a lower bound.
    pub fn rate(self) -> Option<f64> {
        match self {
            ThroughputAt::At { rate } | ThroughputAt::AtLeast { rate } => Some(rate),
            _ => None,
        }
    }
}

/// Throughput at p95 = `l_ms` from stage points `(p95_ms, achieved_rate)`.
pub fn throughput_at(points: &[(f64, f64)], l_ms: f64) -> ThroughputAt {
    let mut pts: Vec<(f64, f64)> =
        points.iter().copied().filter(|(p, a)| p.is_finite() && a.is_finite() && *a >= 0.0).collect();
    if pts.is_empty() {
        return ThroughputAt::NoData;
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut best = 0.0_f64;
    for p in &mut pts {
        best = best.max(p.1);
        p.1 = best;
    }
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    if l_ms < first.0 {
        return ThroughputAt::NeverThatFast { lowest_p95_ms: first.0 };
    }
    if l_ms >= last.0 {
        return if l_ms == last.0 { ThroughputAt::At { rate: last.1 } } else { ThroughputAt::AtLeast { rate: last.1 } };
    }
    let i = pts.iter().rposition(|p| p.0 <= l_ms).unwrap_or(0);
    let (lo, hi) = (pts[i], pts[i + 1]);
    let rate = if hi.0 > lo.0 { lo.1 + (l_ms - lo.0) / (hi.0 - lo.0) * (hi.1 - lo.1) } else { hi.1 };
    ThroughputAt::At { rate }
}

/// The p95 threshold of an SLO line such as `p95 < 250ms` or `p95 <= 1s`,
/// in ms; `None` for any other line (another percentile, a step's, errors).
pub fn p95_threshold_ms(slo: &str) -> Option<f64> {
    let mut words = slo.split_whitespace();
    if words.next()? != "p95" || !matches!(words.next()?, "<" | "<=") {
        return None;
    }
    let v = words.next()?;
    if words.next().is_some() {
        return None;
    }
    let (number, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    number.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0).map(|x| x * scale)
}

/// One run against the baseline at p95 = `l_ms`, as a sentence; `None` when
/// the two say nothing comparable. `complete`: whether each run ran its
/// whole profile: a run killed before its later stages did not "never get
/// that slow", it stopped first (review 2's tester, K1).
pub fn sentence(base: (&str, ThroughputAt), other: (&str, ThroughputAt), l_ms: f64, complete: (bool, bool)) -> String {
    let (a_name, a) = base;
    let (b_name, b) = other;
    let never = |complete: bool| if complete { "it never got that slow" } else { "it stopped before it got that slow" };
    let at = format!("at equal p95 ({})", crate::format::ms_compact(l_ms));
    let rate = |r: f64| format!("{}/s", super::text::rate(r));
    match (a, b) {
        (ThroughputAt::At { rate: ra }, ThroughputAt::At { rate: rb }) if ra > 0.0 => {
            let pct = (rb - ra) / ra * 100.0;
            if pct.abs() < 0.05 {
                format!("{b_name} carried the same throughput as {a_name} {at}: {} vs {}", rate(rb), rate(ra))
            } else {
                let verb = if pct < 0.0 { "lost" } else { "gained" };
                format!("{b_name} {verb} {:.1}% throughput {at}: {} vs {} for {a_name}", pct.abs(), rate(rb), rate(ra))
            }
        }
        (ThroughputAt::At { rate: ra }, ThroughputAt::AtLeast { rate: rb }) if ra > 0.0 && rb >= ra => {
            format!(
                "{b_name} gained at least {:.1}% throughput {at}: at least {} ({}) vs {} for {a_name}",
                (rb - ra) / ra * 100.0,
                rate(rb),
                never(complete.1),
                rate(ra)
            )
        }
        (ThroughputAt::AtLeast { rate: ra }, ThroughputAt::At { rate: rb }) if ra > 0.0 && rb <= ra => {
            format!(
                "{b_name} lost at least {:.1}% throughput {at}: {} vs at least {} for {a_name} ({})",
                (ra - rb) / ra * 100.0,
                rate(rb),
                rate(ra),
                never(complete.0)
            )
        }
        (_, ThroughputAt::NeverThatFast { lowest_p95_ms }) => format!(
            "{b_name} never had a p95 as low as {} (its lowest: {}): no throughput {at}",
            crate::format::ms_compact(l_ms),
            crate::format::ms_compact(lowest_p95_ms)
        ),
        (ThroughputAt::NeverThatFast { lowest_p95_ms }, _) => format!(
            "{a_name} never had a p95 as low as {} (its lowest: {}): no throughput {at} to compare",
            crate::format::ms_compact(l_ms),
            crate::format::ms_compact(lowest_p95_ms)
        ),
        // A lower bound below the other's figure (or two lower bounds) decides nothing.
        (
            ThroughputAt::At { .. } | ThroughputAt::AtLeast { .. },
            ThroughputAt::At { .. } | ThroughputAt::AtLeast { .. },
        ) => {
            let say = |t: ThroughputAt| match t {
                ThroughputAt::AtLeast { rate: r } => format!("at least {}", rate(r)),
                t => rate(t.rate().unwrap_or(0.0)),
            };
            format!(
                "{b_name} carried {} vs {} for {a_name} {at}: a run whose p95 never reached {} shows only a lower \
                 bound, so which carries more cannot be told",
                say(b),
                say(a),
                crate::format::ms_compact(l_ms)
            )
        }
        _ => format!("{b_name} and {a_name}: not enough stages with a p95 to compare throughput {at}"),
    }
}

#[cfg(test)]
mod tests {
    use super::ThroughputAt::{At, AtLeast, NeverThatFast, NoData};
    use super::*;

    fn close(a: ThroughputAt, b: ThroughputAt) -> bool {
        match (a, b) {
            (At { rate: x }, At { rate: y }) | (AtLeast { rate: x }, AtLeast { rate: y }) => (x - y).abs() < 1e-9,
            _ => a == b,
        }
    }

    #[test]
    fn throughput_at_table() {
        let steps = [(20.0, 300.0), (40.0, 400.0), (60.0, 500.0)];
        // (what, stage points, L, want)
        type Case = (&'static str, Vec<(f64, f64)>, f64, ThroughputAt);
        let cases: Vec<Case> = vec![
            // The sketch in the module docs: halfway between 20 and 40 ms.
            ("between stages", steps.to_vec(), 30.0, At { rate: 350.0 }),
            ("on a stage", steps.to_vec(), 40.0, At { rate: 400.0 }),
            ("at the last stage", steps.to_vec(), 60.0, At { rate: 500.0 }),
            // Never pushed to 100 ms: at least its best.
            ("beyond", steps.to_vec(), 100.0, AtLeast { rate: 500.0 }),
            ("below", steps.to_vec(), 10.0, NeverThatFast { lowest_p95_ms: 20.0 }),
            // Past the knee: 800/s offered, 480/s carried at 900 ms; the
            // envelope keeps 480 from 900 ms on, and climbs to it from 25 ms.
            ("past the knee", vec![(25.0, 200.0), (900.0, 480.0)], 250.0, At { rate: 200.0 + 225.0 / 875.0 * 280.0 }),
            // A slower stage that carried less (overload collapse) does not
            // lower what was carried at a lower latency.
            ("collapse", vec![(20.0, 300.0), (40.0, 500.0), (2000.0, 150.0)], 1000.0, At { rate: 500.0 }),
            // Unsorted input; equal p95 keeps the higher rate.
            ("unsorted", vec![(40.0, 400.0), (20.0, 300.0), (20.0, 320.0)], 20.0, At { rate: 320.0 }),
            ("nothing", vec![], 20.0, NoData),
            ("NaN dropped", vec![(f64::NAN, 100.0), (20.0, 300.0)], 20.0, At { rate: 300.0 }),
        ];
        for (what, points, l, want) in cases {
            let got = throughput_at(&points, l);
            assert!(close(got, want), "{what}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn p95_thresholds() {
        let cases = [
            ("p95 < 250ms", Some(250.0)),
            ("p95 <= 1s", Some(1000.0)),
            ("p95 < 1.5s", Some(1500.0)),
            ("p95 < 800us", Some(0.8)),
            ("p99 < 1s", None),
            ("p95(orders) < 1s", None),
            ("errors < 1%", None),
            ("p95 > 1s", None),
            ("p95 < fast", None),
        ];
        for (slo, want) in cases {
            assert_eq!(p95_threshold_ms(slo), want, "{slo}");
        }
    }

    #[test]
    fn sentences() {
        let a = ("A", At { rate: 300.0 });
        let cases = [
            (a, ("B", At { rate: 284.4 }), "B lost 5.2% throughput at equal p95 (50.0ms): 284.4/s vs 300/s for A"),
            (a, ("B", At { rate: 330.0 }), "B gained 10.0% throughput at equal p95 (50.0ms): 330/s vs 300/s for A"),
            (a, ("B", At { rate: 300.0 }), "B carried the same throughput as A at equal p95 (50.0ms): 300/s vs 300/s"),
            (
                a,
                ("B", AtLeast { rate: 800.0 }),
                "B gained at least 166.7% throughput at equal p95 (50.0ms): at least 800/s (it never got that slow) vs 300/s for A",
            ),
            (
                a,
                ("B", AtLeast { rate: 150.0 }),
                "B carried at least 150/s vs 300/s for A at equal p95 (50.0ms): a run whose p95 never reached 50.0ms shows only a lower bound, so which carries more cannot be told",
            ),
            (
                ("A", AtLeast { rate: 300.0 }),
                ("B", AtLeast { rate: 350.0 }),
                "B carried at least 350/s vs at least 300/s for A at equal p95 (50.0ms): a run whose p95 never reached 50.0ms shows only a lower bound, so which carries more cannot be told",
            ),
            (
                a,
                ("B", NeverThatFast { lowest_p95_ms: 61.0 }),
                "B never had a p95 as low as 50.0ms (its lowest: 61.0ms): no throughput at equal p95 (50.0ms)",
            ),
        ];
        for (base, other, want) in cases {
            assert_eq!(sentence(base, other, 50.0, (true, true)), want);
        }
        // A run killed before its later stages stopped; it did not "never get that slow".
        let killed = sentence(a, ("B", AtLeast { rate: 310.0 }), 50.0, (true, false));
        assert!(killed.contains("at least 310/s (it stopped before it got that slow)"), "{killed}");
    }
}
