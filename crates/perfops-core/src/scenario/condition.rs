//! Conditions on measured figures, shared by `slo:` lines (the verdict) and
//! `abort_when:` rules (stop early, Yandex.Tank's autostop).
//!
//! ```text
//!   p95 < 500ms            latency quantile of all requests that ended,
//!                          failures at the time they took (a timeout its 2 s)
//!   p99(ok) < 300ms        ... of the successes alone
//!   p99(orders) < 1s       ... of one step's requests, by name
//!   p99(orders, ok) < 1s   ... of one step's successes
//!   first_event p95 < 200ms   ... of another histogram a summary shows: a
//!   event_gap p99(feed) < 50ms  stream's first event (from the intended start),
//!   events p50 >= 10          its gaps, its events per answer (a count), its
//!   stream p99 < 5s           duration; `mean` and `max` too
//!   errors < 1%            failed / finished
//!   rate >= 97%            achieved / target arrival rate
//!   metric(puma_backlog) < 100    a watched metric, at its worst (the SLO: over the stage,
//!                                 highest against `<`, lowest against `>`; abort_when: its latest)
//!   max(metric(busy)) < 10        ... its highest; also min(...), last(...)
//!   increase(metric(restarts)) > 0  ... its last sample less its first (a counter that went up)
//!   errors > 50% for 10s   (abort_when only) held for 10 consecutive seconds
//!   ttft p95 < 500ms       an LLM step's histograms, as a stream's above: time to first token
//!   itl p99 < 60ms         (from the intended start), inter-token latency, time per output
//!   tpot p50(ask) < 30ms   token; `ttft_sent` (from the send) and `output_tps` (per answer) too
//!   output_tps >= 200      output tokens per second over the stage (every LLM step's): a number
//! ```

use std::fmt;
use std::time::Duration;

use crate::measure::{HistogramKind, Shown, Unit};
use crate::units::parse_duration;

/// What a condition looks at.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A latency quantile, 0..=1 (p50, p99.9, ...).
    Quantile(f64),
    /// Mean latency.
    Mean,
    /// Largest latency.
    Max,
    /// Failed requests as a share of finished ones.
    Errors,
    /// Achieved arrival rate as a share of the target.
    Rate,
    /// A watched (scraped or sampled) metric by name.
    Watched(String),
    /// Output tokens per second over the span judged (a stage), every LLM step's.
    OutputTps,
}

impl Metric {
    /// True for latency metrics, whose thresholds are durations.
    pub fn is_latency(&self) -> bool {
        matches!(self, Metric::Quantile(_) | Metric::Mean | Metric::Max)
    }
}

/// How a watched metric's samples become the one value a condition compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Agg {
    /// `metric(x)`: at its worst for the comparison (highest against `<`, lowest against `>`).
    #[default]
    Worst,
    /// `max(metric(x))`: the highest sample.
    Max,
    /// `min(metric(x))`: the lowest sample.
    Min,
    /// `last(metric(x))`: the latest sample.
    Last,
    /// `increase(metric(x))`: the latest sample less the first (0 when it went down).
    Increase,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// `metric op threshold`, e.g. `p95 < 500ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// As written.
    pub text: String,
    /// What is measured.
    pub metric: Metric,
    /// Only this step's requests (`p99(orders)`).
    pub step: Option<String>,
    /// Latency metrics: only the successes (`p99(ok)`, `p99(orders, ok)`);
    /// otherwise every request that ended, failures included.
    pub ok: bool,
    /// Watched metrics: how the samples are taken ([`Agg::Worst`] for the others).
    pub agg: Agg,
    /// Latency metrics: of this histogram instead of latency's
    /// (`first_event p95 < 200ms`): one a summary shows.
    pub histogram: Option<HistogramKind>,
    /// The comparison.
    pub op: Op,
    /// Seconds for latency metrics, a ratio (0..1) for errors and rate, the
    /// value itself for watched metrics.
    pub threshold: f64,
}

/// An abort rule: a condition that must hold for `window` to stop the run.
#[derive(Debug, Clone, PartialEq)]
pub struct AbortRule {
    /// The condition.
    pub condition: Condition,
    /// How long it must hold, in consecutive seconds.
    pub window: Duration,
}

/// A condition that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionError {
    /// Byte offset in the text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

const FORMS: &str = "write `p95 < 500ms`, `p99(step) < 1s`, `p99(ok) < 1s`, `mean < 200ms`, `max < 2s`, `errors < 1%`, `rate >= 97%`, `metric(name) < 100`, `max(metric(name)) < 100`, `ttft p95 < 500ms`, `itl p99 < 60ms`, `tpot p50 < 30ms` or `output_tps >= 100`";

/// A percentile's word (`p99.9`) as a ratio; `None` if it is none.
fn percentile(p: &str) -> Option<f64> {
    // p99.9 -> 0.999 exactly: round to the written precision, not 99.9/100.
    let q = p.strip_prefix('p')?.parse::<f64>().ok()?;
    (q > 0.0 && q <= 100.0).then(|| (q * 1000.0).round() / 100_000.0)
}

impl Condition {
    /// Parse `metric op threshold`.
    pub fn parse(text: &str) -> Result<Condition, ConditionError> {
        let err = |offset: usize, message: String, hint: Option<&str>| ConditionError {
            offset,
            message,
            hint: hint.map(str::to_string),
        };
        let t = text.trim_end();
        let lead = t.len() - t.trim_start().len();
        let Some(op_at) = t.find(['<', '>']) else {
            return Err(err(lead, format!("`{t}` has no comparison"), Some(FORMS)));
        };
        let (op, op_len) = match (&t[op_at..op_at + 1], t[op_at + 1..].starts_with('=')) {
            ("<", true) => (Op::Le, 2),
            ("<", false) => (Op::Lt, 1),
            (_, true) => (Op::Ge, 2),
            (_, false) => (Op::Gt, 1),
        };
        let mut left = t[..op_at].trim();
        // `first_event p95`: a quantile of another histogram than latency's.
        let mut histogram = None;
        if let Some((word, rest)) = left.split_once(char::is_whitespace)
            && let Some(h) = HistogramKind::from_name(word).filter(|h| h.in_summary() != Shown::Never)
        {
            histogram = Some(h);
            left = rest.trim();
        }
        let right_at = op_at + op_len;
        let right = t[right_at..].trim();
        let right_off = right_at + (t[right_at..].len() - t[right_at..].trim_start().len());

        let (name, arg) = match left.split_once('(') {
            Some((n, rest)) => match rest.strip_suffix(')') {
                Some(a) if !a.trim().is_empty() => (n.trim(), Some(a.trim().to_string())),
                _ => return Err(err(lead, format!("`{left}`: unbalanced or empty parentheses"), Some(FORMS))),
            },
            None => (left, None),
        };
        // `max(metric(busy))`: an aggregate of a watched metric's samples (#15).
        let mut agg = Agg::Worst;
        let (name, arg) = match arg.as_deref().and_then(|a| a.strip_prefix("metric(")) {
            Some(inner) => {
                agg = match name {
                    "max" => Agg::Max,
                    "min" => Agg::Min,
                    "last" => Agg::Last,
                    "increase" => Agg::Increase,
                    other => {
                        return Err(err(
                            lead,
                            format!("`{other}(metric(...))`: unknown aggregate"),
                            Some("max, min, last or increase: `max(metric(busy)) < 10`"),
                        ));
                    }
                };
                match inner.strip_suffix(')').map(str::trim) {
                    Some(n) if !n.is_empty() && !n.contains(['(', ')']) => ("metric", Some(n.to_string())),
                    _ => return Err(err(lead, format!("`{left}`: unbalanced or empty parentheses"), Some(FORMS))),
                }
            }
            None => (name, arg),
        };
        let metric = match name {
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "errors" | "error_rate" => Metric::Errors,
            "rate" => Metric::Rate,
            "output_tps" if arg.is_none() => Metric::OutputTps,
            "metric" => match &arg {
                Some(a) => Metric::Watched(a.clone()),
                None => return Err(err(lead, "`metric` needs a name: `metric(name)`".into(), None)),
            },
            p if p.starts_with('p') => match percentile(p) {
                Some(q) => Metric::Quantile(q),
                None => {
                    return Err(err(
                        lead,
                        format!("`{p}` is not a percentile"),
                        Some("write p50, p90, p95, p99 or p99.9"),
                    ));
                }
            },
            "" => return Err(err(lead, "nothing before the comparison".into(), Some(FORMS))),
            other => return Err(err(lead, format!("unknown metric `{other}`"), Some(FORMS))),
        };
        // `p99(orders)`, `errors(orders)`: restricted to one step's requests;
        // a last `ok` (`p99(ok)`, `p99(orders, ok)`) keeps the successes only.
        // So a step named `ok` is `p99(ok, ok)`: the filter is always last.
        let (step, ok) = match arg {
            _ if matches!(metric, Metric::Watched(_)) => (None, false),
            None => (None, false),
            Some(a) => match a.rsplit_once(',') {
                Some((step, filter)) if filter.trim() == "ok" && !step.trim().is_empty() => {
                    (Some(step.trim().to_string()), true)
                }
                Some(_) => {
                    return Err(err(
                        lead,
                        format!("`{left}`: after the step name only `ok` may follow"),
                        Some("write `p99(orders)`, `p99(ok)` or `p99(orders, ok)`"),
                    ));
                }
                None if a == "ok" => (None, true),
                None => (Some(a), false),
            },
        };
        if ok && !metric.is_latency() {
            return Err(err(
                lead,
                format!("`{left}`: `ok` (successes only) applies to latency: p99, mean, max"),
                Some("errors and rate count every request already"),
            ));
        }
        if histogram.is_some() && (ok || !metric.is_latency()) {
            return Err(err(
                lead,
                format!("`{}`: a histogram takes p50, p99, mean or max, of every answer", t[..op_at].trim()),
                Some("write `first_event p95 < 200ms` or `event_gap p99(step) < 50ms`"),
            ));
        }
        if right.is_empty() {
            return Err(err(right_off, "no threshold after the comparison".into(), Some(FORMS)));
        }
        let counted = histogram.is_some_and(|h| h.unit() == Unit::Count);
        let threshold = if metric.is_latency() && !counted {
            duration_threshold(right, right_off)?
        } else if matches!(metric, Metric::Errors | Metric::Rate) {
            match right.strip_suffix('%').map(|p| p.trim().parse::<f64>()) {
                Some(Ok(p)) if (0.0..=100.0).contains(&p) => p / 100.0,
                _ => {
                    return Err(err(
                        right_off,
                        format!("`{right}` is not a percentage"),
                        Some("write it as a percentage: 1%, 97%"),
                    ));
                }
            }
        } else {
            match right.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                _ => return Err(err(right_off, format!("`{right}` is not a number"), None)),
            }
        };
        Ok(Condition { text: t.trim().to_string(), metric, step, ok, agg, op, threshold, histogram })
    }

    /// Its threshold is a duration (in seconds): latency's, and another
    /// histogram's of durations; not a count's (`events p50 >= 10`).
    pub fn is_duration(&self) -> bool {
        self.metric.is_latency() && self.histogram.is_none_or(|h| h.unit() == Unit::Micros)
    }

    /// Whether it judges an LLM step's tokens (`ttft`, `itl`, `tpot`, `output_tps`): a scenario
    /// without such a step would never measure it.
    pub fn is_token_term(&self) -> bool {
        const TOKENS: [HistogramKind; 5] = [
            HistogramKind::Ttft,
            HistogramKind::TtftSent,
            HistogramKind::Itl,
            HistogramKind::Tpot,
            HistogramKind::OutputTps,
        ];
        self.metric == Metric::OutputTps || self.histogram.is_some_and(|h| TOKENS.contains(&h))
    }

    /// Does `value` (same units as the threshold) satisfy the condition?
    pub fn holds(&self, value: f64) -> bool {
        match self.op {
            Op::Lt => value < self.threshold,
            Op::Le => value <= self.threshold,
            Op::Gt => value > self.threshold,
            Op::Ge => value >= self.threshold,
        }
    }
}

/// A latency threshold (`500ms`, `1s`) in seconds; `right_off` is where it starts in the text.
fn duration_threshold(right: &str, right_off: usize) -> Result<f64, ConditionError> {
    let err = |message: String| ConditionError {
        offset: right_off,
        message,
        hint: Some("latency thresholds are durations: 500ms, 1s".into()),
    };
    if right.is_empty() {
        return Err(ConditionError {
            offset: right_off,
            message: "no threshold after the comparison".into(),
            hint: Some(FORMS.into()),
        });
    }
    match parse_duration(right) {
        // A bare number would silently mean seconds: make the unit explicit.
        Ok(_) if !right.chars().any(|c| c.is_ascii_alphabetic()) => Err(err(format!("`{right}` needs a unit"))),
        Ok(d) => Ok(d.as_secs_f64()),
        Err(_) => Err(err(format!("`{right}` is not a duration"))),
    }
}

impl AbortRule {
    /// Parse `condition for 10s`.
    pub fn parse(text: &str) -> Result<AbortRule, ConditionError> {
        let Some(at) = text.rfind(" for ") else {
            return Err(ConditionError {
                offset: text.len(),
                message: format!("`{}` has no window", text.trim()),
                hint: Some("say how long it must hold: `errors > 50% for 10s`".into()),
            });
        };
        let window_text = text[at + 5..].trim();
        let window = parse_duration(window_text).map_err(|e| ConditionError {
            offset: at + 5,
            message: e.to_string(),
            hint: Some("`for` takes a duration such as 10s".into()),
        })?;
        if window < Duration::from_secs(1) {
            return Err(ConditionError {
                offset: at + 5,
                message: "the window must be at least 1s (rules are checked once per second)".into(),
                hint: None,
            });
        }
        Ok(AbortRule { condition: Condition::parse(&text[..at])?, window })
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_conditions() {
        let cases = [
            ("p95 < 500ms", Metric::Quantile(0.95), None, false, Op::Lt, 0.5), // the usual SLO: every request
            ("p99.9 <= 1s", Metric::Quantile(0.999), None, false, Op::Le, 1.0), // fractional percentile
            ("p99(orders) < 1s", Metric::Quantile(0.99), Some("orders"), false, Op::Lt, 1.0), // one step
            // #11: successes only, alone or after a step; a step named `ok` is `p99(ok, ok)`
            ("p99(ok) < 300ms", Metric::Quantile(0.99), None, true, Op::Lt, 0.3),
            ("p99(orders, ok) < 1s", Metric::Quantile(0.99), Some("orders"), true, Op::Lt, 1.0),
            ("p99( orders ,ok ) < 1s", Metric::Quantile(0.99), Some("orders"), true, Op::Lt, 1.0),
            ("p99(ok, ok) < 1s", Metric::Quantile(0.99), Some("ok"), true, Op::Lt, 1.0),
            ("max(ok) < 2s", Metric::Max, None, true, Op::Lt, 2.0),
            ("errors < 1%", Metric::Errors, None, false, Op::Lt, 0.01), // error ratio
            ("rate >= 97%", Metric::Rate, None, false, Op::Ge, 0.97),   // achieved share
            ("metric(puma_backlog) < 100", Metric::Watched("puma_backlog".into()), None, false, Op::Lt, 100.0),
            ("  mean>200ms ", Metric::Mean, None, false, Op::Gt, 0.2), // spacing is free
        ];
        for (text, metric, step, ok, op, threshold) in cases {
            let c = Condition::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!((c.metric, c.step.as_deref(), c.ok, c.op), (metric, step, ok, op), "{text}");
            assert!((c.threshold - threshold).abs() < 1e-12, "{text}");
        }
    }

    /// A stream's histograms by name before the quantile: durations take a
    /// unit, a count a number; `ok` and non-quantile metrics are refused.
    #[test]
    fn conditions_on_other_histograms() {
        use HistogramKind::{EventGap, Events, FirstEvent};
        // (text, histogram, metric, step, threshold in its unit)
        let cases = [
            ("first_event p95 < 200ms", FirstEvent, Metric::Quantile(0.95), None, 0.2),
            ("event_gap p99(feed) < 50ms", EventGap, Metric::Quantile(0.99), Some("feed"), 0.05), // one step
            ("events p50 >= 10", Events, Metric::Quantile(0.5), None, 10.0),                      // a count: no unit
            ("event_gap max < 1s", EventGap, Metric::Max, None, 1.0),
        ];
        for (text, h, metric, step, threshold) in cases {
            let c = Condition::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!((c.histogram, &c.metric, c.step.as_deref()), (Some(h), &metric, step), "{text}");
            assert!((c.threshold - threshold).abs() < 1e-12, "{text}");
            assert_eq!(c.is_duration(), h != Events, "{text}");
        }
        let bad = [
            ("first_event p95(ok) < 1s", "of every answer"), // no successes-only for these
            ("event_gap errors < 1%", "of every answer"),    // not a quantile
            ("events p50 >= 10ms", "not a number"),          // a count has no unit
            ("ttfb p50 < 1ms", "unknown metric"),            // a histogram no summary shows
        ];
        for (text, needle) in bad {
            let e = Condition::parse(text).expect_err(text);
            assert!(e.message.contains(needle), "{text}: {}", e.message);
        }
        assert_eq!(Condition::parse("p95 < 1s").unwrap().histogram, None, "latency's, as before");
    }

    #[test]
    fn aggregates_of_watched_metrics() {
        let cases = [
            ("metric(busy) < 10", "busy", Agg::Worst),       // bare: at its worst
            ("max(metric(busy)) < 10", "busy", Agg::Max),    // #15: the highest sample
            ("min( metric( up ) ) >= 1", "up", Agg::Min),    // spacing is free
            ("last(metric(queue)) < 5", "queue", Agg::Last), // the latest sample
            ("increase(metric(restarts)) > 0", "restarts", Agg::Increase), // a counter that went up
        ];
        for (text, name, agg) in cases {
            let c = Condition::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!((c.metric, c.agg), (Metric::Watched(name.into()), agg), "{text}");
        }
        let bad = [
            ("avg(metric(busy)) < 1", "unknown aggregate"),  // not one of ours
            ("max(metric()) < 1", "unbalanced or empty"),    // no name
            ("max(metric(busy) < 1", "unbalanced or empty"), // a parenthesis short
        ];
        for (text, needle) in bad {
            let e = Condition::parse(text).expect_err(text);
            assert!(e.message.contains(needle), "{text}: {}", e.message);
        }
        // `max` alone is still the latency maximum.
        assert_eq!(Condition::parse("max < 2s").unwrap().metric, Metric::Max);
    }

    #[test]
    fn bad_conditions_point_at_the_problem() {
        let cases = [
            ("p95 500ms", 0, "no comparison"),                     // missing operator
            ("p95 < 500", 6, "needs a unit"),                      // latency without unit
            ("errors < 1", 9, "not a percentage"),                 // ratio without %
            ("p101 < 1s", 0, "not a percentile"),                  // out of range
            ("latency < 1s", 0, "unknown metric"),                 // unknown name
            ("p95 <", 5, "no threshold"),                          // nothing after
            ("errors(ok) < 1%", 0, "applies to latency"),          // #11: `ok` filters latency only
            ("p99(orders, slow) < 1s", 0, "only `ok` may follow"), // an unknown filter
            ("p99(, ok) < 1s", 0, "only `ok` may follow"),         // a filter without its step
        ];
        for (text, offset, needle) in cases {
            let e = Condition::parse(text).expect_err(text);
            assert!(e.message.contains(needle), "{text}: {}", e.message);
            assert_eq!(e.offset, offset, "{text}");
        }
    }

    /// The LLM histograms through the histograms' grammar, and `output_tps` over the stage.
    #[test]
    fn token_terms() {
        use HistogramKind::{Itl, OutputTps, Tpot, Ttft, TtftSent};
        // (text, histogram, metric, step, threshold in its unit)
        let cases = [
            ("ttft p95 < 500ms", Ttft, Metric::Quantile(0.95), None, 0.5), // the three of an LLM's SLO
            ("itl p99 < 60ms", Itl, Metric::Quantile(0.99), None, 0.06),
            ("tpot p50 < 30ms", Tpot, Metric::Quantile(0.5), None, 0.03),
            ("ttft p99.9 < 2s", Ttft, Metric::Quantile(0.999), None, 2.0), // fractional percentile
            ("ttft_sent mean(ask) < 1s", TtftSent, Metric::Mean, Some("ask"), 1.0), // from the send, one step
            ("output_tps p50 >= 20", OutputTps, Metric::Quantile(0.5), None, 20.0), // per answer: a count
        ];
        for (text, h, metric, step, threshold) in cases {
            let c = Condition::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert!(c.is_token_term(), "{text}");
            assert_eq!((c.histogram, &c.metric, c.step.as_deref()), (Some(h), &metric, step), "{text}");
            assert!((c.threshold - threshold).abs() < 1e-12, "{text}");
        }
        // Output tokens per second over the stage: a number, not a duration.
        let c = Condition::parse("output_tps >= 150").unwrap();
        assert!(c.is_token_term() && !c.is_duration());
        assert_eq!((&c.metric, c.op, c.threshold), (&Metric::OutputTps, Op::Ge, 150.0));
        // The latency terms and a stream's are not token terms.
        assert!(!Condition::parse("p95 < 1s").unwrap().is_token_term());
        assert!(!Condition::parse("first_event p95 < 1s").unwrap().is_token_term());
        let bad = [
            ("itl p99 < 60", 10, "needs a unit"),          // a duration without unit
            ("tpot p50 < fast", 11, "not a duration"),     // no duration at all
            ("ttft p95(ok) < 1s", 0, "of every answer"),   // every token is an answer's
            ("output_tps >= 1s", 14, "not a number"),      // tokens per second are a number
            ("output_tps(ask) >= 1", 0, "unknown metric"), // the stage's, not a step's
        ];
        for (text, offset, needle) in bad {
            let e = Condition::parse(text).expect_err(text);
            assert!(e.message.contains(needle), "{text}: {}", e.message);
            assert_eq!(e.offset, offset, "{text}");
        }
    }

    #[test]
    fn abort_rules_need_a_window() {
        let r = AbortRule::parse("errors > 50% for 10s").unwrap();
        assert_eq!(r.window, Duration::from_secs(10));
        assert!(r.condition.holds(0.6) && !r.condition.holds(0.5));
        assert!(AbortRule::parse("p99 > 5s").unwrap_err().message.contains("no window"));
        assert!(AbortRule::parse("p99 > 5s for 100ms").is_err());
    }
}
