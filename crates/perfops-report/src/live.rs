//! The live line: one per second on stderr while a run goes. [`line`]
//! formats it; [`LiveLine`] is the pipeline's output that writes it where the
//! binary says (stderr, when it is a terminal).

use std::fmt::Write;
use std::time::Duration;

use perfops_core::measure::{FailureKind, Stats};
use perfops_core::pipeline::{Second, SinkError};

use crate::output::Output;
use crate::run::SHORTEST_RATE_WINDOW_S;

/// Writes the live line of each second to `out`.
pub struct LiveLine<W: std::io::Write> {
    out: W,
    color: bool,
    stage: bool,
}

impl<W: std::io::Write> LiveLine<W> {
    /// Lines to `out`, errors in red if `color`, each followed by its stage
    /// (` [ramp]`) if `stage`.
    pub fn new(out: W, color: bool, stage: bool) -> Self {
        LiveLine { out, color, stage }
    }
}

impl<W: std::io::Write> Output for LiveLine<W> {
    fn second(&mut self, s: &Second<'_>) -> Result<(), SinkError> {
        let iv = s.interval;
        let live =
            LiveSecond { index: s.t, length: iv.length, target: s.target(), in_flight: iv.in_flight, stats: &iv.stats };
        let mut text = line(&live, self.color);
        if self.stage {
            let _ = write!(text, " [{}]", s.stage);
        }
        text.push('\n');
        // A terminal that cannot take a progress line is no reason to stop measuring.
        let _ = self.out.write_all(text.as_bytes());
        Ok(())
    }
}

/// What the live line shows for one second.
#[derive(Debug, Clone, Copy)]
pub struct LiveSecond<'a> {
    /// Second number, from 0.
    pub index: u32,
    /// Length of that second (shorter at the end).
    pub length: Duration,
    /// Open model: arrivals scheduled in it.
    pub target: Option<f64>,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// What happened in it.
    pub stats: &'a Stats,
}

/// One line, e.g. `  3s  req/s 99,812  p50 0.45ms p95 0.90ms p99 1.20ms  in-flight 50  errors 0`;
/// in the open model `arrivals/s 480 of 500`: arrivals answered (their first
/// request, #32) against those the schedule asked for, as the achieved rate
/// counts them. Responses
/// against arrivals read `req/s 291 of 300` for 97 three-step flows a second
/// (review 2).
pub fn line(s: &LiveSecond<'_>, color: bool) -> String {
    let secs = s.length.as_secs_f64().max(1e-3);
    let mut out = match s.target {
        // A drain of a few ms: its answers, not a rate over them.
        _ if secs < SHORTEST_RATE_WINDOW_S => {
            format!("{:>4}s  answered {:>6}", s.index + 1, group(s.stats.completed as f64))
        }
        Some(target) => format!(
            "{:>4}s  arrivals/s {:>7} of {:>7}",
            s.index + 1,
            group(s.stats.arrivals_answered as f64 / secs),
            group(target / secs)
        ),
        None => format!("{:>4}s  req/s {:>9}", s.index + 1, group(s.stats.completed as f64 / secs)),
    };
    let lat = &s.stats.latency;
    if lat.is_empty() {
        out.push_str("  p50 -      p95 -      p99 -     ");
    } else {
        let _ = write!(
            out,
            "  p50 {} p95 {} p99 {}",
            ms(lat.quantile(0.5)),
            ms(lat.quantile(0.95)),
            ms(lat.quantile(0.99))
        );
    }
    let _ = write!(out, "  in-flight {:>5}", s.in_flight);
    if s.target.is_some() {
        let _ = write!(out, "  dropped {}", s.stats.dropped);
    }
    // The generator's time in scripts, as a share of one core: only a scenario with scripts has any.
    if s.stats.script_ns > 0 {
        let _ = write!(out, "  scripts {:.1}% of a core", s.stats.script_ns as f64 / 1e7 / secs);
    }
    let errors = s.stats.failures.total();
    // `total` leaves cut requests out (no failure of the server): so does the label.
    let text = match s.stats.failures.nonzero().into_iter().find(|(k, _)| *k != FailureKind::Cut) {
        Some((kind, _)) if errors > 0 => format!("errors {errors} ({kind})"),
        _ => "errors 0".to_string(),
    };
    if color && errors > 0 {
        let _ = write!(out, "  \x1b[31m{text}\x1b[0m");
    } else {
        let _ = write!(out, "  {text}");
    }
    out
}

/// A duration in milliseconds, rounded as every output rounds it
/// ([`crate::format::ms_compact`]), 7 columns wide (` 0.45ms`, `812.3ms`, `  1.23s`).
pub fn ms(d: Duration) -> String {
    format!("{:>7}", crate::format::ms_compact(d.as_secs_f64() * 1000.0))
}

/// A number with thousands separators and no decimals: `1,234,567`.
pub fn group(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use perfops_core::measure::FailureKind;

    use super::*;

    #[test]
    fn grouping_and_units() {
        assert_eq!(group(0.0), "0");
        assert_eq!(group(999.4), "999");
        assert_eq!(group(1_234_567.0), "1,234,567");
        assert_eq!(ms(Duration::from_micros(450)), " 0.45ms");
        assert_eq!(ms(Duration::from_micros(12_340)), " 12.3ms");
        // Past 100 ms and 1 s, as every other output: not `  812ms`, ` 1234ms`.
        assert_eq!(ms(Duration::from_micros(812_340)), "812.3ms");
        assert_eq!(ms(Duration::from_millis(1234)), "  1.23s");
    }

    #[test]
    fn a_second_with_failures() {
        let mut stats = Stats { completed: 480, iterations: 480, arrivals_answered: 480, ..Stats::default() };
        for _ in 0..480 {
            stats.latency.record(Duration::from_millis(10));
        }
        stats.failures.add_n(FailureKind::Timeout, 20);
        stats.dropped = 3;
        let s =
            LiveSecond { index: 2, length: Duration::from_secs(1), target: Some(500.0), in_flight: 7, stats: &stats };
        let text = line(&s, false);
        assert_eq!(
            text,
            "   3s  arrivals/s     480 of     500  p50  10.0ms p95  10.0ms p99  10.0ms  in-flight     7  dropped 3  errors 20 (timeout)"
        );
        assert!(line(&s, true).contains("\x1b[31m"), "errors in red on a colour terminal");
        // Three-step flows: 97 arrivals answered a second, 291 responses.
        let flows = Stats { completed: 291, iterations: 97, arrivals_answered: 97, ..stats.clone() };
        let text = line(&LiveSecond { target: Some(100.0), stats: &flows, ..s }, false);
        assert!(text.starts_with("   3s  arrivals/s      97 of     100  p50"), "{text}");
        // #32: flows with pauses; 100 arrivals answered this second, 60 flows
        // ended (the rest end in the next seconds): the arrivals are the rate.
        let paused = Stats { completed: 291, iterations: 60, arrivals_answered: 100, ..stats.clone() };
        let text = line(&LiveSecond { target: Some(100.0), stats: &paused, ..s }, false);
        assert!(text.starts_with("   3s  arrivals/s     100 of     100  p50"), "{text}");
    }

    /// A scenario with scripts: their time in the second, as a share of one core (250 ms of
    /// 1 s: 25%), beside the errors; without scripts the line is as it was.
    #[test]
    fn a_second_with_scripts_shows_their_share() {
        let stats = Stats { completed: 10, script_ns: 250_000_000, ..Stats::default() };
        let s = LiveSecond { index: 0, length: Duration::from_secs(1), target: None, in_flight: 0, stats: &stats };
        assert!(line(&s, false).ends_with("in-flight     0  scripts 25.0% of a core  errors 0"), "{}", line(&s, false));
        let half = LiveSecond { length: Duration::from_millis(500), ..s };
        assert!(line(&half, false).contains("scripts 50.0% of a core"), "{}", line(&half, false));
        let none = Stats { script_ns: 0, ..stats.clone() };
        assert!(!line(&LiveSecond { stats: &none, ..s }, false).contains("scripts"));
    }

    /// The drain after the last arrival, 1 answer in 4 ms, is no 250 req/s
    /// (after a ramp that never passed 138/s): its answers are counted.
    #[test]
    fn a_drain_of_a_few_ms_shows_its_answers_not_a_rate() {
        let mut stats = Stats { completed: 1, ..Stats::default() };
        stats.latency.record(Duration::from_millis(22));
        let drain =
            LiveSecond { index: 8, length: Duration::from_millis(4), target: None, in_flight: 0, stats: &stats };
        let text = line(&drain, false);
        assert!(text.starts_with("   9s  answered      1  p50"), "{text}");
        // The columns after it stand where a whole second's do.
        let whole = line(&LiveSecond { length: Duration::from_secs(1), ..drain }, false);
        assert!(whole.starts_with("   9s  req/s         1  p50"), "{whole}");
        assert_eq!(text.find("p50"), whole.find("p50"));
    }
}
