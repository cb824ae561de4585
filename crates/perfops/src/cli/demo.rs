//! The flags of `perfops demo`.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use perfops_core::units::parse_duration;
use perfops_demo::{DemoConfig, Model};

/// Flags of `perfops demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoFlags {
    /// Server model: `threads` (a fixed pool, like Puma) or `async`.
    #[arg(long, default_value = "threads")]
    model: Model,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Worker processes' worth of pools (threads model).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Threads per worker (threads model) or runtime threads (async; 0 = one per core).
    #[arg(long, default_value_t = 5)]
    threads: usize,
    /// Listen backlog (threads model).
    #[arg(long, default_value_t = 16)]
    backlog: u32,
    /// Simulated I/O wait per request to a route behind the token (/orders, /me, /products, /orders/{id}).
    #[arg(long, value_parser = parse_duration, default_value = "20ms")]
    io_wait: Duration,
    /// CPU work per request to a route behind the token.
    #[arg(long, value_parser = parse_duration, default_value = "500us")]
    cpu_work: Duration,
    /// Also serve /metrics on this address, outside the pool (like Puma's control app).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Pin the server to these CPUs (e.g. `1` or `0,1`).
    #[arg(long)]
    cpus: Option<String>,
    /// Exit when this process (the `perfops run` that started us) dies, even by SIGKILL.
    #[arg(long, hide = true)]
    parent_pid: Option<i32>,
}

impl From<DemoFlags> for perfops_run::demo::DemoArgs {
    fn from(f: DemoFlags) -> Self {
        Self {
            config: DemoConfig {
                model: f.model,
                listen: f.listen,
                workers: f.workers,
                threads: f.threads,
                backlog: f.backlog,
                io_wait: f.io_wait,
                cpu_work: f.cpu_work,
                metrics_listen: f.metrics_listen,
            },
            cpus: f.cpus,
            parent_pid: f.parent_pid,
        }
    }
}
