//! The flags that choose outputs by name, flattened into every command that
//! runs a load (`run`, `limit`, `sweep`, `coordinator` through the session's
//! flags, and `quick`): declared once here. The registry they name is the
//! library's (`perfops_run::outputs`).

use clap::Args;
use perfops_core::scenario::output::OutputSpec;

/// `--output NAME[=ARG]`, `--metrics-listen ADDR` and `--live[=ADDR]`.
#[derive(Debug, Args)]
pub(crate) struct OutputFlags {
    /// Also send every second to the output NAME (repeatable): `jsonl=-` or
    /// `jsonl=FILE` (one JSON object per second, with a start and a finish
    /// line), `prometheus=ADDR` (as --metrics-listen), `live=ADDR` (as
    /// --live), `prometheus-rw=URL[#watched]` (pushed to a Prometheus
    /// remote-write URL, latency as native histograms; auth headers from
    /// PERFOPS_REMOTE_WRITE_HEADERS), `otlp=URL` and `otlp-grpc=URL`
    /// (OpenTelemetry metrics over OTLP/HTTP or gRPC, exponential
    /// histograms, delta unless
    /// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=cumulative; auth
    /// headers from OTEL_EXPORTER_OTLP_HEADERS). With a scenario, added to
    /// its `outputs:`, beside the results directory that a scenario's run
    /// always writes (`quick` writes none).
    #[arg(long = "output", value_name = "NAME[=ARG]", value_parser = perfops_run::outputs::parse_spec)]
    outputs: Vec<OutputSpec>,
    /// Serve the generator's own metrics for Prometheus at http://ADDR/metrics
    /// while it runs (e.g. 127.0.0.1:9464; port 0 picks a free one): the same
    /// as `--output prometheus=ADDR`.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Serve the report page live while the run goes, with buttons to stop,
    /// hold, skip a stage or set the rate (`perfops ctl` does the same):
    /// `--live` on 127.0.0.1:5665, or `--live=ADDR` (port 0 picks a free
    /// one). Off loopback it asks for a token, from PERFOPS_LIVE_TOKEN or
    /// made and printed once. The same as `--output live=ADDR`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true,
          default_missing_value = perfops_run::live::DEFAULT_ADDR)]
    live: Option<String>,
}

impl From<OutputFlags> for perfops_run::outputs::OutputArgs {
    fn from(f: OutputFlags) -> Self {
        Self { outputs: f.outputs, metrics_listen: f.metrics_listen, live: f.live }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use perfops_core::measure::{Interval, Key, Stats};
    use perfops_core::pipeline::Second;
    use perfops_report::output::Copied;

    // Here, not beside the adapter: the collector runs with this binary's
    // allocator (mimalloc), and a copy's cost is mostly its allocations.
    /// What the collector pays for the adapter's copy of a second with 5
    /// steps whose histograms hold values, with this binary's allocator: the
    /// figure in `perfops_report::detach`'s module doc.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn copy_cost() {
        let mut stats = Stats::default();
        for v in 1..20_000u64 {
            stats.latency.record(Duration::from_micros(v * 37 % 900_000));
            stats.service.record(Duration::from_micros(v * 29 % 800_000));
            stats.latency_ok.record(Duration::from_micros(v * 31 % 700_000));
        }
        let parts: Vec<(Key, Stats)> = (0..5).map(|step| (Key { stage: 0, step }, stats.clone())).collect();
        let iv = Interval { parts, stats, ..Interval::empty(3) };
        let names: Vec<String> = (0..5).map(|i| format!("step{i}")).collect();
        let s = Second {
            interval: &iv,
            t: 3,
            start: Duration::ZERO,
            stage: "a",
            draining: false,
            step_names: &names,
            stage_names: &[],
            events: &[],
            stages: &[],
            watched: &[],
            probes: &[],
        };
        // As the adapter does: a copy made, handed to another thread, dropped there later.
        let mut kept = std::collections::VecDeque::new();
        let n = 1000;
        let began = Instant::now();
        for _ in 0..n {
            kept.push_back(Copied::of(&s, None));
            if kept.len() > 4 {
                kept.pop_front();
            }
        }
        println!("the whole second, 5 steps: {:?}", began.elapsed() / n);
        // As the adapter does: in the memory of a copy its output is done with.
        let mut old = Some(Copied::of(&s, None));
        let began = Instant::now();
        for _ in 0..n {
            old = Some(Copied::of(&s, old.take()));
        }
        println!("the same, into a copy done with: {:?}", began.elapsed() / n);
        let began = Instant::now();
        for _ in 0..n {
            std::hint::black_box(perfops_report::sink::series_line(&s));
        }
        println!("its series.jsonl line, for comparison: {:?}", began.elapsed() / n);
    }
}
