//! Debian's Prometheus on 127.0.0.1, for the tests of the PromQL watch and of perfops' own
//! exports (#15): a real server that scrapes real loopback targets every second and answers real
//! PromQL. `.ci/run` installs it (Debian's `prometheus`; its systemd service plays no part: this
//! starts a process of its own with its own configuration, a storage path in a temporary
//! directory and a free loopback port, and stops it by its PID when dropped).
//!
//! It owns the configuration (one job per target, a 1 s scrape interval and timeout), the wait
//! until the server is ready, and two plain clients for the tests: an instant query returning the
//! API's JSON, and a wait until a query has data (both shared with the current Prometheus of
//! [`crate::receivers`], in `client.rs`). Requests are HTTP/1.0 on a new connection with
//! timeouts: nothing here can hang a test.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{PromApi, get};

/// A running Prometheus; dropping it stops it (by its PID) and removes its files.
pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

/// A target to scrape: a job name, an address and the path of its metrics.
#[derive(Debug, Clone)]
pub struct ScrapeTarget {
    /// The `job` label its series get.
    pub job: String,
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    /// `/metrics`.
    pub path: String,
}

impl ScrapeTarget {
    /// `/metrics` of `addr` as job `job`.
    pub fn new(job: &str, addr: SocketAddr) -> ScrapeTarget {
        ScrapeTarget { job: job.into(), addr, path: "/metrics".into() }
    }
}

impl Prometheus {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the base URL a `watch.promql` takes.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An instant query at `time` (unix seconds; now when `None`): the API's JSON answer.
    pub fn query(&self, query: &str, time: Option<f64>) -> Result<Value, String> {
        PromApi(self.addr).query(query, time)
    }

    /// The result array of `query` (now), empty on an error.
    pub fn series(&self, query: &str) -> Vec<Value> {
        PromApi(self.addr).series(query)
    }

    /// Wait until `query` returns at least one series, for at most `limit`; the series.
    pub fn wait_for_data(&self, query: &str, limit: Duration) -> Result<Vec<Value>, String> {
        PromApi(self.addr).wait_for_data(query, limit)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Start Prometheus on a free port of 127.0.0.1, scraping `targets` every second, and wait until
/// it is ready. Panics, saying how to install it, when there is no `prometheus`.
pub fn prometheus(targets: &[ScrapeTarget]) -> Prometheus {
    prometheus_with(targets, &[])
}

/// [`prometheus`] with `flags` besides its own: `--web.enable-remote-write-receiver` (2.42
/// takes remote-write 1.0 only, and reads a 2.0 request as an empty 1.0 one),
/// `--enable-feature=native-histograms` (without it, 2.42 answers a native histogram 500).
pub fn prometheus_with(targets: &[ScrapeTarget], flags: &[&str]) -> Prometheus {
    let mut last = String::new();
    // The port is free when asked and taken a moment later; another process may take it in
    // between, so try a few.
    for attempt in 0..3 {
        let port =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()).expect("a free port").port();
        let dir = std::env::temp_dir().join(format!("perfops-prometheus-{}-{port}-{attempt}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus storage dir");
        std::fs::write(dir.join("prometheus.yml"), config(targets)).expect("prometheus.yml");
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(["--log.level=warn", "--storage.tsdb.retention.time=1h"])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run prometheus ({e}): install it (apt-get install prometheus)"));
        let mut p = Prometheus { child, dir, addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = p.child.try_wait() {
                break; // exited: the port was taken, or the config refused
            }
            if matches!(get(p.addr, "/-/ready"), Ok((200, _))) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        last = std::fs::read_to_string(p.dir.join("prometheus.log")).unwrap_or_default();
    }
    panic!("prometheus did not start on 127.0.0.1; its log:\n{last}");
}

fn config(targets: &[ScrapeTarget]) -> String {
    let mut c = String::from(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
    );
    for t in targets {
        c.push_str(&format!(
            "  - job_name: '{}'\n    metrics_path: '{}'\n    static_configs:\n      - targets: ['{}']\n",
            t.job, t.path, t.addr
        ));
    }
    c
}
