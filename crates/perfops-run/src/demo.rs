//! `perfops demo`, and `demo:threads` / `demo:async` targets: the built-in
//! target server, run as a child process so its CPU is not the generator's
//! (and, on a machine with several cores, pinned to a core of its own).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use perfops_demo::DemoConfig;

use crate::exit::Exit;

/// What `perfops demo` runs: the server, and how this process hosts it.
#[derive(Debug, Clone)]
pub struct DemoArgs {
    /// The server itself.
    pub config: DemoConfig,
    /// Pin the server to these CPUs (e.g. `1` or `0,1`).
    pub cpus: Option<String>,
    /// Exit when this process (the `perfops run` that started us) dies, even by SIGKILL.
    pub parent_pid: Option<i32>,
}

/// `perfops demo`: serve the built-in target until stopped.
pub fn run(args: DemoArgs) -> Result<Exit> {
    if let Some(parent) = args.parent_pid {
        // The kernel sends SIGTERM (handled below like Ctrl-C) when the parent
        // goes, so a killed `perfops run` leaves no server behind. If it died
        // before this line, we were already handed to init: leave now.
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).context("prctl(PR_SET_PDEATHSIG)")?;
        if nix::unistd::getppid().as_raw() != parent {
            return Ok(Exit::Passed);
        }
    }
    if let Some(list) = &args.cpus {
        pin(list)?;
    }
    let config = args.config;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    perfops_demo::serve(&config, stop, |addr, metrics| {
        // The first line of stdout is read by `perfops run` to find the port.
        crate::say::out(&format!("perfops demo ({}) listening on http://{addr}\n", config.model));
        if let Some(m) = metrics {
            crate::say::out(&format!("metrics (outside the pool) on http://{m}/metrics\n"));
        }
    })?;
    Ok(Exit::Passed)
}

/// Pin the calling thread (and threads it starts later) to the listed CPUs.
pub(crate) fn pin(list: &str) -> Result<()> {
    let mut set = nix::sched::CpuSet::new();
    for cpu in list.split(',') {
        let cpu: usize = cpu.trim().parse().with_context(|| format!("`{list}` is not a list of CPU numbers"))?;
        set.set(cpu).with_context(|| format!("CPU {cpu} does not exist"))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).context("pinning to CPUs")?;
    Ok(())
}

/// A demo server started for a run; stopped (by its PID) when dropped.
pub(crate) struct DemoChild {
    child: Child,
    /// Where it listens.
    pub(crate) url: String,
    /// Its `/metrics` outside the pool.
    pub(crate) metrics_url: Option<String>,
}

impl DemoChild {
    /// Start `perfops demo --model MODEL` on a free loopback port. On a machine
    /// with two or more CPUs the server gets the last one and this process
    /// (the generator) the others.
    pub(crate) fn start(model: &str, options: &[(String, String)]) -> Result<DemoChild> {
        let exe = std::env::current_exe().context("finding the perfops executable")?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cmd = Command::new(exe);
        cmd.args(["demo", "--model", model, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]);
        cmd.arg(format!("--parent-pid={}", std::process::id()));
        for (k, v) in options {
            cmd.arg(format!("--{}={v}", k.replace('_', "-")));
        }
        let allowed: Vec<usize> = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| (0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
            .unwrap_or_default();
        if cpus >= 2 && allowed.len() >= 2 {
            let last = allowed[allowed.len() - 1];
            cmd.args(["--cpus", &last.to_string()]);
            let rest: Vec<String> = allowed[..allowed.len() - 1].iter().map(|c| c.to_string()).collect();
            pin(&rest.join(","))?;
        }
        // A process group of its own: a terminal's Ctrl-C goes to the whole
        // foreground group, and the server stopping with us cut the requests
        // in flight and refused the last arrivals (counted as the target's
        // `connect_refused`). It is stopped after the run, by its PID (Drop),
        // or by the kernel when this process dies (`--parent-pid`).
        cmd.process_group(0);
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().context("starting the demo target")?;
        let stdout = child.stdout.take().context("demo target stdout")?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).context("reading the demo target's address")?;
        let Some(url) = line.split_whitespace().last().filter(|u| u.starts_with("http://")) else {
            let _ = child.kill();
            bail!("the demo target did not start (it said {line:?})");
        };
        let mut second = String::new();
        stdout.read_line(&mut second).context("reading the demo target's metrics address")?;
        let metrics_url = second.split_whitespace().last().filter(|u| u.starts_with("http://")).map(str::to_string);
        Ok(DemoChild { url: url.to_string(), metrics_url, child })
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for DemoChild {
    fn drop(&mut self) {
        // SIGTERM by PID, then reap; SIGKILL if it does not go.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
