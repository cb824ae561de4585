//! `--metrics-listen ADDR`, the same as `--output prometheus=ADDR`: the
//! endpoint started before the load (a busy or bad address is a usage
//! error, exit 2) and fed with each merged second as an output of the
//! per-second pipeline, off the hot path. Publishing a second renders the
//! page into memory, which a scrape then reads: nothing waits on the
//! network, so it is not detached. The names and the arithmetic are in
//! `perfops_report::exposition`, the server in `perfops_engine::exporter`;
//! this is the glue.

use std::borrow::Cow;

use anyhow::Result;
use perfops_core::pipeline::{Second, SinkError};
use perfops_engine::exporter::Exporter;
use perfops_report::exposition::{Exposition, Second as ExpositionSecond};
use perfops_report::output::Output;
use perfops_report::run::RunMeta;

use crate::exit::UsageError;

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
        note!("metrics for Prometheus at http://{}/metrics", exporter.local_addr());
        Ok(Metrics { exporter, exposition })
    }

    /// Declare more steps (a session knows them only after its setup ran).
    pub(crate) fn declare(&mut self, steps: &[String]) {
        self.exposition.declare(steps);
        self.exporter.publish(self.exposition.render());
    }
}

/// `prometheus=ADDR` (also `--metrics-listen ADDR`).
pub(crate) const ENTRY: super::Entry = super::Entry {
    name: "prometheus",
    help: "prometheus=ADDR: serve the generator's metrics at http://ADDR/metrics (as --metrics-listen)",
    make,
    arg: super::Arg::Address,
};

/// `prometheus=ADDR`: bound now, so that a busy address costs nothing.
fn make(arg: Option<&str>) -> Result<Box<dyn Output>, String> {
    let addr = arg.filter(|a| !a.is_empty()).ok_or("say where: prometheus=ADDR (e.g. 127.0.0.1:9464)")?;
    Ok(Box::new(Metrics::start(addr, &[]).map_err(|e| e.to_string())?))
}

impl Output for Metrics {
    /// Every step at 0 from the start (a session knows them only after its setup ran).
    fn start(&mut self, meta: &RunMeta) -> Result<(), SinkError> {
        self.declare(&meta.steps);
        Ok(())
    }

    /// Add one merged second, labelled with its stage; no target when closed
    /// or draining.
    fn second(&mut self, s: &Second<'_>) -> Result<(), SinkError> {
        let iv = s.interval;
        // Named as in series.jsonl: by the step's name, or its index if it has none.
        let names: Vec<Cow<'_, str>> = iv
            .parts
            .iter()
            .map(|(key, _)| {
                s.step_names.get(usize::from(key.step)).map_or_else(|| key.step.to_string().into(), |n| n.into())
            })
            .collect();
        let by_step = names.iter().map(AsRef::as_ref).zip(iv.parts.iter().map(|(_, stats)| stats)).collect();
        self.exposition.add_second(&ExpositionSecond {
            stage: s.stage,
            length: iv.length,
            target: s.target(),
            in_flight: iv.in_flight,
            total: &iv.stats,
            steps: by_step,
        });
        self.exporter.publish(self.exposition.render());
        Ok(())
    }
}
