//! The server's own counters and their Prometheus text rendering (exposition format 0.0.4).
//!
//! Counters are fixed arrays of atomics indexed by route and status (no map keyed by strings, so
//! recording is a couple of relaxed adds on the hot path); [`Route`], the label set, is declared
//! here for that reason, and `app.rs` tags each answer with one. The gauges (`busy`, `queue_depth`,
//! `connections`) are moved by the models; this module only stores and renders them. Durations are
//! measured by the models from "request parsed" to "response written": the time spent waiting in
//! the ready queue or the kernel's backlog is invisible here, as it is to a real server's metrics,
//! which is one of the lessons the demo is there to show.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};

use crate::Model;

/// What a request was routed to; the label of its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Root,
    Auth,
    /// `GET /orders`, `POST /orders`.
    Orders,
    /// `GET /orders/{id}`.
    OrderById,
    Me,
    Products,
    Health,
    Metrics,
    /// Any other path or method (404).
    Other,
    /// A request that could not be framed (400 and close).
    Invalid,
}

impl Route {
    /// Every route, in the order of their metric arrays.
    pub(crate) const ALL: [Route; 10] = [
        Route::Root,
        Route::Auth,
        Route::Orders,
        Route::OrderById,
        Route::Me,
        Route::Products,
        Route::Health,
        Route::Metrics,
        Route::Other,
        Route::Invalid,
    ];

    /// The `path` label: the route's path, or a fixed word so that scanners cannot blow up the
    /// label set.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Route::Root => "/",
            Route::Auth => "/auth",
            Route::Orders => "/orders",
            Route::OrderById => "/orders/{id}",
            Route::Me => "/me",
            Route::Products => "/products",
            Route::Health => "/health",
            Route::Metrics => "/metrics",
            Route::Other => "other",
            Route::Invalid => "invalid",
        }
    }
}

/// Status codes the server can answer; anything else would be counted as 500.
const CODES: [u16; 9] = [200, 201, 400, 401, 404, 413, 422, 431, 500];
/// Histogram upper bounds in seconds, from a fast in-memory answer to a badly queued one.
const BUCKETS: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Counters and gauges shared by every thread or task of one server.
#[derive(Debug)]
pub(crate) struct Metrics {
    model: Model,
    /// `workers_max`: handler threads (threads model) or runtime worker threads (async model).
    max: usize,
    requests: [[AtomicU64; CODES.len()]; Route::ALL.len()],
    /// Per route, the count of durations that fell in each bucket (not cumulative; the last slot
    /// is +Inf). Cumulated when rendered.
    buckets: [[AtomicU64; BUCKETS.len() + 1]; Route::ALL.len()],
    duration_sum_micros: [AtomicU64; Route::ALL.len()],
    /// Requests being handled right now (from parsed to written).
    pub(crate) busy: AtomicUsize,
    /// Requests accepted (or read off a keep-alive connection) and waiting for a handler thread.
    pub(crate) queue_depth: AtomicUsize,
    /// Open client connections.
    pub(crate) connections: AtomicUsize,
    /// Connections accepted since start.
    pub(crate) accepted: AtomicU64,
}

impl Metrics {
    /// Empty metrics for a server of `model` with `max` workers.
    pub(crate) fn new(model: Model, max: usize) -> Metrics {
        Metrics {
            model,
            max,
            requests: Default::default(),
            buckets: Default::default(),
            duration_sum_micros: Default::default(),
            busy: AtomicUsize::new(0),
            queue_depth: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
        }
    }

    /// Counts one answered request.
    pub(crate) fn record(&self, route: Route, status: u16, elapsed: Duration) {
        let r = route as usize;
        let code = CODES.iter().position(|&c| c == status).unwrap_or(CODES.len() - 1);
        self.requests[r][code].fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&le| secs <= le).unwrap_or(BUCKETS.len());
        self.buckets[r][bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.duration_sum_micros[r].fetch_add(micros, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of everything, plus the process' CPU time.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail; the results below are ignored for that reason.
        let _ = self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) -> std::fmt::Result {
        writeln!(out, "# HELP demo_info The demo server's scheduling model.")?;
        writeln!(out, "# TYPE demo_info gauge")?;
        writeln!(out, "demo_info{{model=\"{}\"}} 1", self.model)?;

        writeln!(out, "# HELP demo_requests_total Requests answered, by route and status code.")?;
        writeln!(out, "# TYPE demo_requests_total counter")?;
        for route in Route::ALL {
            for (i, code) in CODES.iter().enumerate() {
                let n = self.requests[route as usize][i].load(Ordering::Relaxed);
                if n > 0 {
                    writeln!(out, "demo_requests_total{{path=\"{}\",code=\"{code}\"}} {n}", route.label())?;
                }
            }
        }

        let busy_help = match self.model {
            Model::Threads => "Handler threads busy with a request.",
            Model::Async => "Requests in flight (tasks between request parsed and response written).",
        };
        gauge(out, "demo_workers_busy", busy_help, self.busy.load(Ordering::Relaxed))?;
        let max_help = match self.model {
            Model::Threads => "Handler threads in the pool (workers x threads).",
            Model::Async => "Runtime worker threads (requests in flight are not bounded by it).",
        };
        gauge(out, "demo_workers_max", max_help, self.max)?;
        let queue_help = "Requests accepted but waiting for a handler thread.";
        gauge(out, "demo_queue_depth", queue_help, self.queue_depth.load(Ordering::Relaxed))?;
        gauge(out, "demo_connections_open", "Open client connections.", self.connections.load(Ordering::Relaxed))?;
        writeln!(out, "# HELP demo_connections_accepted_total Connections accepted since start.")?;
        writeln!(out, "# TYPE demo_connections_accepted_total counter")?;
        writeln!(out, "demo_connections_accepted_total {}", self.accepted.load(Ordering::Relaxed))?;

        writeln!(
            out,
            "# HELP demo_request_duration_seconds Time from request parsed to response written (queueing excluded)."
        )?;
        writeln!(out, "# TYPE demo_request_duration_seconds histogram")?;
        for route in Route::ALL {
            let r = route as usize;
            let counts: Vec<u64> = self.buckets[r].iter().map(|b| b.load(Ordering::Relaxed)).collect();
            let total: u64 = counts.iter().sum();
            if total == 0 {
                continue;
            }
            let path = route.label();
            let mut cumulative = 0;
            for (le, n) in BUCKETS.iter().zip(&counts) {
                cumulative += n;
                writeln!(out, "demo_request_duration_seconds_bucket{{path=\"{path}\",le=\"{le}\"}} {cumulative}")?;
            }
            writeln!(out, "demo_request_duration_seconds_bucket{{path=\"{path}\",le=\"+Inf\"}} {total}")?;
            let sum = self.duration_sum_micros[r].load(Ordering::Relaxed) as f64 / 1e6;
            writeln!(out, "demo_request_duration_seconds_sum{{path=\"{path}\"}} {sum}")?;
            writeln!(out, "demo_request_duration_seconds_count{{path=\"{path}\"}} {total}")?;
        }

        if let Some(cpu) = process_cpu_seconds() {
            writeln!(out, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.")?;
            writeln!(out, "# TYPE process_cpu_seconds_total counter")?;
            writeln!(out, "process_cpu_seconds_total {cpu}")?;
        }
        Ok(())
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: usize) -> std::fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} gauge")?;
    writeln!(out, "{name} {value}")
}

/// User plus system CPU time of the whole process, from getrusage(2).
fn process_cpu_seconds() -> Option<f64> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(secs(usage.user_time()) + secs(usage.system_time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_cumulative_buckets() {
        let m = Metrics::new(Model::Threads, 10);
        m.record(Route::Orders, 200, Duration::from_millis(21));
        m.record(Route::Orders, 200, Duration::from_millis(30));
        m.record(Route::Orders, 401, Duration::from_micros(50));
        m.busy.store(3, Ordering::Relaxed);
        let text = m.render();
        assert!(text.contains("demo_requests_total{path=\"/orders\",code=\"200\"} 2\n"), "{text}");
        assert!(text.contains("demo_requests_total{path=\"/orders\",code=\"401\"} 1\n"));
        assert!(text.contains("demo_workers_busy 3\n") && text.contains("demo_workers_max 10\n"));
        // 50 µs and 21 ms are <= 25 ms; 30 ms is not.
        assert!(text.contains("demo_request_duration_seconds_bucket{path=\"/orders\",le=\"0.025\"} 2\n"));
        assert!(text.contains("demo_request_duration_seconds_bucket{path=\"/orders\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("demo_request_duration_seconds_count{path=\"/orders\"} 3\n"));
        assert!(text.contains("process_cpu_seconds_total "));
        // Routes never hit render no series.
        assert!(!text.contains("path=\"/auth\""));
    }
}
