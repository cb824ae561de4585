//! `--metrics-listen ADDR`: the endpoint started before the load (a busy or
//! bad address is a usage error, exit 2) and fed with each merged second by
//! the collector's interval callback, off the hot path. The names and the
//! arithmetic are in `perfops_report::exposition`, the server in
//! `perfops_engine::exporter`; this is the glue.

use std::borrow::Cow;

use anyhow::Result;
use perfops_engine::Interval;
use perfops_engine::exporter::Exporter;
use perfops_report::exposition::{Exposition, Second};

use crate::UsageError;

/// A running endpoint and the counters behind it.
pub(crate) struct Metrics {
    exporter: Exporter,
    exposition: Exposition,
}

impl Metrics {
    /// Bind `addr` and serve every step of `steps` at 0 until the first second.
    pub(crate) fn start(addr: &str, steps: &[String]) -> Result<Metrics> {
        let exposition = Exposition::new(steps);
        let exporter =
            Exporter::start(addr, exposition.render()).map_err(|e| anyhow::Error::new(UsageError(e.to_string())))?;
        eprintln!("perfops: metrics for Prometheus at http://{}/metrics", exporter.local_addr());
        Ok(Metrics { exporter, exposition })
    }

    /// Declare more steps (a session knows them only after its setup ran).
    pub(crate) fn declare(&mut self, steps: &[String]) {
        self.exposition.declare(steps);
        self.exporter.publish(self.exposition.render());
    }

    /// Add one merged second: `stage` is its label, `target` the arrivals it
    /// was scheduled (`None` when closed or draining), `steps` names the
    /// engine's step indices.
    pub(crate) fn second(&mut self, iv: &Interval, stage: &str, target: Option<f64>, steps: &[String]) {
        // Named as in series.jsonl: by the step's name, or its index if it has none.
        let names: Vec<Cow<'_, str>> = iv
            .parts
            .iter()
            .map(|(key, _)| steps.get(usize::from(key.step)).map_or_else(|| key.step.to_string().into(), |n| n.into()))
            .collect();
        let by_step = names.iter().map(AsRef::as_ref).zip(iv.parts.iter().map(|(_, stats)| stats)).collect();
        self.exposition.add_second(&Second {
            stage,
            length: iv.length,
            target,
            in_flight: iv.in_flight,
            total: &iv.stats,
            steps: by_step,
        });
        self.exporter.publish(self.exposition.render());
    }
}
