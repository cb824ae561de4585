//! What `perfops sweep` found, said in words: the table of its levels and
//! the sentences on the fit (the Universal Scalability Law, the peak it
//! predicts, a hidden cap), which the terminal prints and the HTML report
//! shows. The figures are the sweep's ([`SweepResult`], decided by the
//! binary as it measures); here they are only said, once for both.

use std::fmt::Write;

use crate::run::SweepResult;

/// The table's columns: header and width, in the order of [`SweepResult::table`]'s rows.
const COLUMNS: [(&str, usize); 7] = [
    ("users", 5),
    ("throughput/s", 14),
    ("x vs first", 12),
    ("p50 ok ms", 11),
    ("p99 ms", 9),
    ("p50 x first", 13),
    ("errors", 8),
];

/// The columns a sweep of a scenario with an LLM step adds: its tokens per second.
const TOKEN_COLUMNS: [(&str, usize); 2] = [("tokens in/s", 12), ("tokens out/s", 13)];

impl SweepResult {
    /// Whether its levels measured tokens (the scenario has an LLM step).
    pub fn has_tokens(&self) -> bool {
        self.levels.iter().any(|l| l.tokens_out_per_s.is_some())
    }

    /// The terminal's table: a header, then one row per level.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let tokens = self.has_tokens();
        let extra: &[(&str, usize)] = if tokens { &TOKEN_COLUMNS } else { &[] };
        let header: Vec<String> = COLUMNS.iter().chain(extra).map(|(name, w)| format!("{name:>w$}")).collect();
        out.push_str(&header.join(" "));
        out.push('\n');
        for l in &self.levels {
            let _ = write!(
                out,
                "{:>5} {:>14.1} {:>12.2} {:>11.2} {:>9.2} {:>13.2} {:>7.2}%",
                l.concurrency,
                l.throughput,
                l.throughput_ratio,
                l.p50_ms,
                l.p99_ms,
                l.p50_ratio,
                l.error_ratio * 100.0
            );
            if tokens {
                let _ = write!(
                    out,
                    " {:>12.1} {:>13.1}",
                    l.tokens_in_per_s.unwrap_or(0.0),
                    l.tokens_out_per_s.unwrap_or(0.0)
                );
            }
            out.push('\n');
        }
        out
    }

    /// What the fit and the plateau say, one sentence each: the fit's
    /// parameters, the peak it predicts (an extrapolation when it lies past
    /// the levels measured, as [`perfops_core::analysis::usl::UslFit::peak_concurrency`]
    /// warns), and the cap when throughput stopped growing.
    pub fn findings(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.usl {
            Some(f) => {
                out.push(format!(
                    "USL fit: lambda {:.1}/s per user, sigma (contention) {:.4}, kappa (coherency) {:.6}; R² {:.3}, error {:.1}%",
                    f.lambda,
                    f.sigma,
                    f.kappa,
                    f.r_squared,
                    f.rmse_ratio * 100.0
                ));
                out.push(match (self.predicted_peak_throughput, self.predicted_peak_concurrency) {
                    (Some(x), Some(n)) => {
                        let largest = self.levels.iter().map(|l| l.concurrency).max().unwrap_or(0);
                        let beyond = if n > f64::from(largest) {
                            format!(" (past the largest level measured, {largest} users: an extrapolation)")
                        } else {
                            String::new()
                        };
                        format!("predicted peak: {x:.1}/s at about {n:.0} users{beyond}")
                    }
                    _ => "predicted peak: none in sight (no coherency cost measured)".into(),
                });
            }
            None => out.push("USL fit: needs at least 3 levels with throughput".into()),
        }
        if let Some(c) = self.concurrency_cap {
            out.push(format!(
                "throughput stops growing: the target serves about {c:.0} requests at once (a pool, a connection cap or a lock)"
            ));
        }
        out
    }

    /// The verdict's headline: the best level measured and the fit's peak.
    pub fn headline(&self) -> String {
        let best = self.best_level.and_then(|n| self.levels.iter().find(|l| l.concurrency == n));
        let Some(b) = best else { return "nothing measured".into() };
        let measured = format!("best measured {:.1}/s at {} users", b.throughput, b.concurrency);
        match (&self.usl, self.predicted_peak_throughput, self.predicted_peak_concurrency) {
            (None, ..) => measured,
            (Some(_), Some(x), Some(n)) => format!("{measured}; USL peak {x:.1}/s at ~{n:.0} users"),
            (Some(_), ..) => format!("{measured}; USL peak not in sight"),
        }
    }
}

#[cfg(test)]
mod tests {
    use perfops_core::analysis::usl::UslFit;

    use crate::run::{SweepLevel, SweepResult};

    fn level(concurrency: u32, throughput: f64) -> SweepLevel {
        SweepLevel {
            concurrency,
            throughput,
            p50_ms: 20.0,
            p99_ms: 30.0,
            p50_ratio: 1.0,
            throughput_ratio: throughput / 50.0,
            error_ratio: 0.0,
            tokens_in_per_s: None,
            tokens_out_per_s: None,
        }
    }

    fn sweep(peak: Option<(f64, f64)>, cap: Option<f64>) -> SweepResult {
        let fit = UslFit { lambda: 50.0, sigma: 0.01, kappa: 0.0001, r_squared: 0.99, rmse_ratio: 0.02 };
        SweepResult {
            levels: vec![level(1, 50.0), level(10, 480.0), level(20, 900.0)],
            usl: Some(fit),
            predicted_peak_concurrency: peak.map(|p| p.0),
            predicted_peak_throughput: peak.map(|p| p.1),
            best_level: Some(20),
            concurrency_cap: cap,
        }
    }

    /// The header stands over its columns: each name ends where its figures
    /// end ("x vs first p50 ok ms" once ran together, session 13); a sweep
    /// with an LLM step's tokens too.
    #[test]
    fn the_header_is_aligned_with_the_rows() {
        let mut llm = sweep(None, None);
        for l in &mut llm.levels {
            (l.tokens_in_per_s, l.tokens_out_per_s) = (Some(l.throughput * 12.0), Some(l.throughput * 16.0));
        }
        // (sweep, its columns)
        let tokens: Vec<(&str, usize)> = super::COLUMNS.iter().chain(&super::TOKEN_COLUMNS).copied().collect();
        let cases = [(sweep(None, None), super::COLUMNS.to_vec()), (llm, tokens)];
        for (s, columns) in cases {
            let table = s.table();
            let lines: Vec<&str> = table.lines().collect();
            assert_eq!(lines.len(), 4, "a header and three levels:\n{table}");
            let mut end = 0;
            for (name, width) in &columns {
                end += width;
                for line in &lines {
                    let (last, next) = (line.as_bytes()[end - 1], line.as_bytes().get(end));
                    assert!(last != b' ' && next.is_none_or(|c| *c == b' '), "column {name} ends at {end}:\n{table}");
                }
                end += 1;
            }
            assert_eq!(lines[0].split_whitespace().next(), Some("users"), "{table}");
            assert_eq!(lines[0].len(), end - 1, "no column more than {columns:?}:\n{table}");
        }
    }

    /// An LLM scenario's sweep gives each level's tokens per second; another's has no such columns.
    #[test]
    fn an_llm_sweep_shows_tokens_per_second() {
        let mut s = sweep(None, None);
        assert!(!s.has_tokens() && !s.table().contains("tokens"));
        s.levels[2].tokens_in_per_s = Some(0.0); // a server that gives no usage: no prompt tokens
        s.levels[2].tokens_out_per_s = Some(14_400.0); // 900 answers/s of 16 tokens
        let table = s.table();
        assert!(table.lines().next().is_some_and(|h| h.ends_with("tokens in/s  tokens out/s")), "{table}");
        assert!(table.lines().nth(3).is_some_and(|r| r.ends_with("0.0       14400.0")), "{table}");
    }

    #[test]
    fn a_peak_past_the_levels_is_called_an_extrapolation() {
        // (peak concurrency, peak throughput), what the peak sentence says.
        let cases = [
            // Within the levels measured (up to 20 users): a prediction, said plainly.
            (Some((15.0, 950.0)), "predicted peak: 950.0/s at about 15 users"),
            // Past them: said to be an extrapolation.
            (
                Some((99.0, 2475.0)),
                "predicted peak: 2475.0/s at about 99 users (past the largest level measured, 20 users: an extrapolation)",
            ),
            // No coherency cost: no peak.
            (None, "predicted peak: none in sight (no coherency cost measured)"),
        ];
        for (peak, want) in cases {
            let findings = sweep(peak, None).findings();
            assert_eq!(findings[1], want, "{findings:?}");
        }
    }

    #[test]
    fn findings_and_headline() {
        let s = sweep(Some((15.0, 950.0)), Some(12.4));
        let findings = s.findings();
        assert!(findings[0].starts_with("USL fit: lambda 50.0/s per user, sigma (contention) 0.0100"), "{findings:?}");
        assert_eq!(
            findings[2],
            "throughput stops growing: the target serves about 12 requests at once (a pool, a connection cap or a lock)"
        );
        assert_eq!(s.headline(), "best measured 900.0/s at 20 users; USL peak 950.0/s at ~15 users");
        let no_fit = SweepResult { usl: None, ..sweep(None, None) };
        assert_eq!(no_fit.findings(), vec!["USL fit: needs at least 3 levels with throughput".to_string()]);
        assert_eq!(no_fit.headline(), "best measured 900.0/s at 20 users");
        assert_eq!(sweep(None, None).headline(), "best measured 900.0/s at 20 users; USL peak not in sight");
        let none = SweepResult { levels: Vec::new(), usl: None, ..sweep(None, None) };
        assert_eq!(none.headline(), "nothing measured");
    }
}
