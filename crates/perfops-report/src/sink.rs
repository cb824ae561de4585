//! The results writer: each second of a load as one line of `series.jsonl`
//! and its histograms in `latency.hlog` (and its failing exchanges in
//! `failures.jsonl`, the first few of each step and kind), an [`Output`] of the pipeline
//! (always on: not chosen by name). What a line holds is [`SeriesLine`]; where the files
//! are, [`RunDir`]. The live line's output is [`crate::live::LiveLine`].

use std::collections::BTreeMap;

use perfops_core::measure::{HistogramFigures, SeriesCounters, step_name};
use perfops_core::pipeline::{Second, SinkError};

use crate::failures::{FAILURES_FILE, FailureLine};
use crate::output::Output;
use crate::results::RunDir;
use crate::run::{SeriesLine, StepSecond, failures};

/// Writes each second to a results directory.
///
/// A failed write (a full disk, EIO, a file-size limit) is an error of the
/// pipeline, which stops the load: a run whose results cannot be kept
/// proves nothing (#12). Nothing more is written after it, so the files keep
/// every second before it, readable by `perfops report`. The latch is the
/// caller's, so it holds across the loads of one session (`limit`'s attempts).
pub struct ResultsWriter<'a> {
    dir: &'a mut RunDir,
    failed: &'a mut bool,
    parts: bool,
}

impl<'a> ResultsWriter<'a> {
    /// Write to `dir`, unless `failed` already.
    pub fn new(dir: &'a mut RunDir, failed: &'a mut bool) -> Self {
        ResultsWriter { dir, failed, parts: false }
    }

    /// Also write each second's parts by (stage, step) key ([`crate::parts`]):
    /// a shard's seconds, which `merge` adds exactly.
    pub fn with_parts(mut self, parts: bool) -> Self {
        self.parts = parts;
        self
    }
}

impl Output for ResultsWriter<'_> {
    fn second(&mut self, s: &Second<'_>) -> Result<(), SinkError> {
        if *self.failed {
            return Ok(());
        }
        let iv = s.interval;
        let st = &iv.stats;
        let mut line = series_line(s);
        let by_key = if self.parts { crate::parts::part_histograms(iv) } else { Vec::new() };
        let mut histograms = vec![("latency", &st.latency), ("service", &st.service), ("latency_ok", &st.latency_ok)];
        if self.parts {
            line.parts = crate::parts::part_lines(iv);
            histograms.extend(by_key.iter().map(|(tag, h)| (tag.as_str(), *h)));
        }
        let written = self.dir.append_second(&line, s.start, iv.length, &histograms).and_then(|()| {
            // The failing exchanges of the second, as they come: a killed run keeps them.
            for (key, list) in iv.samples.iter() {
                for sample in list {
                    if self.dir.failures.admit(key) {
                        let line = FailureLine::of(s.step_names, key, sample);
                        self.dir.append_jsonl(FAILURES_FILE, &line)?;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = written {
            *self.failed = true;
            return Err(SinkError(format!("cannot write results in {} ({e})", self.dir.path().display())));
        }
        // Actions by hand, as they take effect: a kill keeps those of the
        // seconds written.
        for event in s.events {
            if let Err(e) = self.dir.append_jsonl(EVENTS, event) {
                *self.failed = true;
                return Err(SinkError(format!("cannot write results in {} ({e})", self.dir.path().display())));
            }
        }
        Ok(())
    }
}

/// The file of actions by hand: one [`ControlEvent`](perfops_core::pipeline::control::ControlEvent) a line.
pub const EVENTS: &str = "events.jsonl";

/// The `series.jsonl` line of one second.
pub fn series_line(s: &Second<'_>) -> SeriesLine {
    let iv = s.interval;
    let secs = iv.length.as_secs_f64().max(1e-9);
    let mut steps = BTreeMap::new();
    for (step, st) in iv.by_step() {
        let ms = |q: f64| st.latency.quantile(q).as_secs_f64() * 1000.0;
        steps.insert(
            step_name(s.step_names, step),
            StepSecond {
                completed: st.completed,
                failed: st.failures.total(),
                p50: ms(0.5),
                p95: ms(0.95),
                p99: ms(0.99),
            },
        );
    }
    let st = &iv.stats;
    SeriesLine {
        t: s.t,
        length_s: iv.length.as_secs_f64(),
        stage: s.stage.to_string(),
        // None once the arrivals ended: past the schedule's end it asks for
        // nothing, and after a stop (Ctrl-C, abort_when) nothing was sent,
        // though the schedule's full rate read as a server collapsing (review 2).
        target_rate: s.target().map(|t| t / secs),
        achieved_rate: st.arrivals_answered as f64 / secs,
        counters: SeriesCounters::of(st),
        succeeded: st.succeeded(),
        failed: st.failures.total(),
        in_flight: iv.in_flight,
        failures: failures(st),
        latency_ms: st.latency.summary(),
        latency_ok_ms: st.latency_ok.summary(),
        service_ms: st.service.summary(),
        histograms: HistogramFigures::of(st),
        steps,
        parts: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use perfops_core::measure::Interval;

    use super::*;

    /// A second after a stop asks for nothing: the schedule's full rate there
    /// read as a server collapsing (review 2).
    #[test]
    fn a_second_after_the_arrivals_ended_has_no_target() {
        let iv = Interval { target: Some(300.0), length: Duration::from_secs(1), ..Interval::empty(9) };
        let second = |draining| Second {
            interval: &iv,
            t: 9,
            start: Duration::from_secs(9),
            stage: if draining { "(draining)" } else { "300/s" },
            draining,
            step_names: &[],
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        };
        assert_eq!(series_line(&second(false)).target_rate, Some(300.0));
        assert_eq!(series_line(&second(true)).target_rate, None);
    }
}
