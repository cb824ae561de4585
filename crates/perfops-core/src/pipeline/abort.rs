//! `abort_when`: rules checked every second, each on that second's figures
//! (a watched metric on its latest sample; an aggregate of one, `max(metric(busy))` or
//! `increase(metric(restarts))`, over the run so far); one that holds for its window
//! stops the load. The rules and their arithmetic are here; where the
//! watched samples come from is the caller's.

use std::collections::BTreeMap;

use crate::analysis::verdict::{self, Range};
use crate::measure::{Interval, Stats};
use crate::scenario::{AbortRule, Agg, Metric};

/// The scenario's `abort_when` rules and how long each has held.
#[derive(Debug, Clone, Default)]
pub struct AbortWhen {
    rules: Vec<(AbortRule, u32)>,
    reason: Option<String>,
}

impl AbortWhen {
    /// Watch `rules`, none held yet.
    pub fn new(rules: &[AbortRule]) -> AbortWhen {
        AbortWhen { rules: rules.iter().map(|r| (r.clone(), 0)).collect(), reason: None }
    }

    /// Why the load was aborted, once a rule held for its window.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Count consecutive seconds each rule held; the reason once one held
    /// for its window (said once: later seconds return `None`). `latest`
    /// gives a watched metric's latest sample.
    pub fn second(&mut self, iv: &Interval, latest: &dyn Fn(&str) -> Option<f64>) -> Option<String> {
        self.second_over(iv, &|name| latest(name).map(Range::of))
    }

    /// [`AbortWhen::second`], with each watched metric's samples over the run so far: a bare
    /// `metric(x)` is judged on the latest of them, an aggregate on all of them.
    pub fn second_over(&mut self, iv: &Interval, watched: &dyn Fn(&str) -> Option<Range>) -> Option<String> {
        if self.reason.is_some() {
            return None;
        }
        for (rule, held) in &mut self.rules {
            // Arrivals answered, as a stage's achieved rate counts them (#32).
            let share = iv.target.filter(|t| *t > 0.0).map(|t| iv.stats.arrivals_answered as f64 / t);
            // A watched metric is judged by its latest sample.
            let mut values = BTreeMap::new();
            if let Metric::Watched(name) = &rule.condition.metric
                && let Some(r) = watched(name)
            {
                let r = if rule.condition.agg == Agg::Worst { Range::of(r.last) } else { r };
                values.insert(name.clone(), r);
            }
            let steps = BTreeMap::<String, Stats>::new();
            let holds =
                verdict::check(&rule.condition, &iv.stats, &steps, share, iv.length.as_secs_f64(), &values).passed;
            *held = if holds { *held + 1 } else { 0 };
            if u64::from(*held) >= rule.window.as_secs().max(1) {
                let from = iv.index + 1 - *held;
                let reason = format!(
                    "`{} for {}s` held for {} s (t={}s..{}s)",
                    rule.condition.text,
                    rule.window.as_secs(),
                    held,
                    from,
                    iv.index + 1
                );
                self.reason = Some(reason.clone());
                return Some(reason);
            }
        }
        None
    }
}
