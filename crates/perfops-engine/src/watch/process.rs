//! Sampling a local process from `/proc` and cgroup v2: the target's (by pid, or by the port it
//! listens on) and the generator's own, each on its own thread.
//!
//! It owns finding the process (a port's LISTEN socket inode in `/proc/net/tcp{,6}`, then the
//! `/proc/*/fd` link `socket:[inode]` that holds it; found again when the process exits) and the
//! tree under it, reading the files each period, and the arithmetic between two readings: CPU
//! seconds per second, the
//! share of the CPUs the process may use, context switches and cgroup throttling per second, and
//! the namespace's `ListenOverflows`/`ListenDrops` per second. The file layouts are
//! `perfops_core::telemetry::procfs`'s; the listen queues come from [`super::netlink`].
//!
//! A pre-forking server (nginx, gunicorn, Puma in cluster mode, uWSGI) listens in a master that
//! does no work: its workers are its children. So the target is the whole process tree under the
//! process found (issue #11): CPU, memory, threads, descriptors and context switches are summed
//! over it, found again each period (workers come and go), and `process_workers` says how many
//! processes under the master there were. RSS is summed as each process reports it, so pages a
//! master shares with its forked workers count once per process: an upper bound.
//!
//! Values (the generator has the first six, named `generator_*`; its sockets are its
//! connections to the target, give or take a listener):
//!
//! ```text
//!   process_cpu_cores           user+sys CPU seconds per second (from the second sample)
//!   process_cpu_share           cpu_cores / CPUs it may use: Cpus_allowed_list, capped by cpu.max
//!   process_rss_bytes           VmRSS
//!   process_threads             Threads
//!   process_open_fds            entries of /proc/<pid>/fd
//!   process_sockets             those of them that are sockets
//!   process_pid                 which process this is (it may change with a port): the tree's root
//!   process_workers             processes under it (a pre-forking server's workers); 0 for one process
//!   process_ctx_switches_per_s  voluntary + involuntary, all threads
//!   process_throttled_share     cgroup throttled time per second of wall time (when counted)
//!   listen_queue                accept queue now, of the process' fullest listening port
//!   listen_queue_max            that port's backlog (sockets of one port summed: v4 + v6, REUSEPORT)
//!   listen_overflows_per_s      TcpExt ListenOverflows of the process' network namespace
//!   listen_drops_per_s          TcpExt ListenDrops, the same
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use perfops_core::telemetry::procfs::{
    Cgroup2Mount, parse_cgroup_cpu_stat, parse_cgroup2_mount, parse_cpu_max, parse_net_tcp, parse_netstat,
    parse_pid_cgroup, parse_pid_stat, parse_pid_status,
};

use super::{Ctx, ProcessSel, Sample, Slots, WatchEvent, netlink};

/// Which process a sampler follows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Which {
    /// The target, as the plan selects it.
    Target(ProcessSel),
    /// This process.
    Generator,
}

/// Sample `which` every `every` until stopped.
pub(super) fn run(ctx: &Ctx, every: Duration, which: Which) {
    let mut sampler = Sampler::new(which);
    let source = match which {
        Which::Target(_) => "process",
        Which::Generator => "generator",
    };
    let mut slots = Slots::new(ctx.start, every);
    // A process that is not there stays a state, not news: said when it changes.
    let mut last_error: Option<String> = None;
    loop {
        if !ctx.sleep_until(slots.next_due(Instant::now())) {
            return;
        }
        let t = ctx.t(Instant::now());
        let result = sampler.sample(t);
        for message in std::mem::take(&mut sampler.problems) {
            if !ctx.problem(t, source, message) {
                return;
            }
        }
        let go_on = match result {
            Ok(values) => {
                last_error = None;
                values.is_empty() || ctx.send(WatchEvent::Sample(Sample { t, source: source.to_string(), values }))
            }
            Err(message) if last_error.as_ref() != Some(&message) => {
                last_error = Some(message.clone());
                ctx.problem(t, source, message)
            }
            Err(_) => true,
        };
        if !go_on {
            return;
        }
    }
}

/// One reading's counters, kept for the next one's rates.
#[derive(Debug, Clone)]
struct Reading {
    t: f64,
    starttime: u64,
    /// CPU ticks of each process of the tree, by (pid, start time): a worker that exits takes its
    /// ticks along, so a rate is the sum of each process' own difference, never of two sums.
    cpu_ticks: HashMap<(u32, u64), u64>,
    /// Context switches of each thread of the tree, by thread id: threads come and go (a pool
    /// grows, a test harness's threads end), so the rate is, like the CPU's, a sum of each
    /// thread's own difference, never a difference of two sums.
    ctx_switches: Option<HashMap<u32, u64>>,
    throttled: Option<Duration>,
    overflows: Option<u64>,
    drops: Option<u64>,
}

struct Sampler {
    which: Which,
    /// The process followed now; `None` until found (by port).
    pid: Option<u32>,
    prev: Option<Reading>,
    /// Clock ticks per second of `/proc/<pid>/stat` times.
    ticks_per_s: f64,
    cgroup2: Option<Cgroup2Mount>,
    /// Problems already reported once (a file we may not read, a query that fails).
    warned: HashSet<&'static str>,
    /// Problems to report with this sample.
    problems: Vec<String>,
}

impl Sampler {
    fn new(which: Which) -> Sampler {
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().filter(|&t| t > 0);
        let pid = match which {
            Which::Target(ProcessSel::Pid(pid)) => Some(pid),
            Which::Target(ProcessSel::Port(_)) => None,
            Which::Generator => Some(std::process::id()),
        };
        Sampler {
            which,
            pid,
            prev: None,
            // 100 is USER_HZ on every Linux architecture perfops runs on.
            ticks_per_s: ticks.map_or(100.0, |t| t as f64),
            cgroup2: fs::read_to_string("/proc/self/mountinfo").ok().and_then(|m| parse_cgroup2_mount(&m)),
            warned: HashSet::new(),
            problems: Vec::new(),
        }
    }

    fn full(&self) -> bool {
        matches!(self.which, Which::Target(_))
    }

    fn warn_once(&mut self, key: &'static str, message: String) {
        if self.warned.insert(key) {
            self.problems.push(message);
        }
    }

    /// The values at `t`, or why there are none.
    fn sample(&mut self, t: f64) -> Result<Vec<(String, f64)>, String> {
        let pid = match self.pid {
            Some(pid) => pid,
            None => {
                let Which::Target(ProcessSel::Port(port)) = self.which else { return Err("no process".into()) };
                let pid = pid_by_port(port)?;
                self.pid = Some(pid);
                pid
            }
        };
        let dir = format!("/proc/{pid}");
        let stat = match fs::read_to_string(format!("{dir}/stat")) {
            Ok(text) => parse_pid_stat(&text).map_err(|e| e.to_string())?,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(nix::libc::ESRCH) => {
                self.prev = None;
                return Err(match self.which {
                    Which::Target(ProcessSel::Port(port)) => {
                        self.pid = None;
                        format!("process {pid} exited; looking for the one listening on port {port}")
                    }
                    _ => format!("process {pid} not found"),
                });
            }
            Err(e) => return Err(format!("{dir}/stat: {e}")),
        };
        if self.prev.as_ref().is_some_and(|p| p.starttime != stat.starttime_ticks) {
            // The pid was reused by another process: no rate spans the two.
            self.prev = None;
        }
        let status = fs::read_to_string(format!("{dir}/status"))
            .map_err(|e| format!("{dir}/status: {e}"))
            .and_then(|text| parse_pid_status(&text).map_err(|e| e.to_string()))?;
        let full = self.full();
        let prefix = if full { "process" } else { "generator" };
        let name = |what: &str| format!("{prefix}_{what}");

        let (mut fds, mut sockets) = match fd_table(&dir) {
            Ok(found) => (Some(found.0), found.1),
            Err(e) => {
                self.warn_once("fds", format!("cannot list {dir}/fd: {e}"));
                (None, HashSet::new())
            }
        };
        let mut cpu_ticks = HashMap::from([((pid, stat.starttime_ticks), stat.cpu_ticks())]);
        let mut rss = status.vm_rss_bytes;
        let mut threads = status.threads.unwrap_or(stat.num_threads);
        // The target's workers: whatever is under it now. One that exits meanwhile is not counted.
        let tree = if full { process_tree(pid) } else { vec![pid] };
        let mut workers = 0u32;
        for &child in &tree[1..] {
            let child_dir = format!("/proc/{child}");
            let Some(s) = fs::read_to_string(format!("{child_dir}/stat")).ok().and_then(|t| parse_pid_stat(&t).ok())
            else {
                continue;
            };
            workers += 1;
            cpu_ticks.insert((child, s.starttime_ticks), s.cpu_ticks());
            let st = fs::read_to_string(format!("{child_dir}/status")).ok().and_then(|t| parse_pid_status(&t).ok());
            if let Some(r) = st.as_ref().and_then(|st| st.vm_rss_bytes) {
                rss = Some(rss.unwrap_or(0).saturating_add(r));
            }
            threads = threads.saturating_add(st.and_then(|st| st.threads).unwrap_or(s.num_threads));
            if let (Some(n), Ok((count, inodes))) = (fds.as_mut(), fd_table(&child_dir)) {
                *n += count;
                sockets.extend(inodes);
            }
        }
        let cgroup = self.cgroup_dir(&dir);
        let cpus = self.allowed_cpus(&status, cgroup.as_deref());
        let now = Reading {
            t,
            starttime: stat.starttime_ticks,
            cpu_ticks,
            ctx_switches: if full { self.ctx_switches(&tree) } else { None },
            throttled: match (&cgroup, full) {
                (Some(cg), true) => fs::read_to_string(format!("{cg}/cpu.stat"))
                    .ok()
                    .and_then(|text| parse_cgroup_cpu_stat(&text).ok())
                    .and_then(|s| s.throttled),
                _ => None,
            },
            overflows: None,
            drops: None,
        };
        let now = if full { self.netstat(&dir, now) } else { now };

        let mut values: Vec<(String, f64)> = Vec::new();
        if full {
            values.push(("process_pid".into(), f64::from(pid)));
            values.push(("process_workers".into(), f64::from(workers)));
        }
        let prev = self.prev.take();
        let dt = prev.as_ref().map(|p| t - p.t).filter(|dt| *dt > 0.0);
        if let (Some(p), Some(dt)) = (&prev, dt) {
            // A process new since the last reading: all its ticks are since then.
            let ticks: u64 = now
                .cpu_ticks
                .iter()
                .map(|(key, &n)| n.saturating_sub(p.cpu_ticks.get(key).copied().unwrap_or(0)))
                .fold(0, u64::saturating_add);
            let cores = ticks as f64 / self.ticks_per_s / dt;
            values.push((name("cpu_cores"), cores));
            if let Some(cpus) = cpus {
                values.push((name("cpu_share"), cores / cpus));
            }
        }
        if let Some(rss) = rss {
            values.push((name("rss_bytes"), rss as f64));
        }
        values.push((name("threads"), threads as f64));
        if let Some(fds) = fds {
            values.push((name("open_fds"), fds as f64));
            values.push((name("sockets"), sockets.len() as f64));
        }
        if full {
            let per_s = |a: Option<u64>, b: Option<u64>| match (a, b, dt) {
                // A counter that went down (threads that exited took theirs along) gives no rate.
                (Some(a), Some(b), Some(dt)) if b >= a => Some((b - a) as f64 / dt),
                _ => None,
            };
            let before = prev.as_ref();
            if let (Some(a), Some(b), Some(dt)) = (before.and_then(|p| p.ctx_switches.as_ref()), &now.ctx_switches, dt)
            {
                // A thread born since the last reading brings all of its switches: they are recent.
                let n = b.iter().map(|(tid, &n)| n.saturating_sub(a.get(tid).copied().unwrap_or(0))).sum::<u64>();
                values.push(("process_ctx_switches_per_s".into(), n as f64 / dt));
            }
            if let (Some(a), Some(b), Some(dt)) = (before.and_then(|p| p.throttled), now.throttled, dt) {
                values.push(("process_throttled_share".into(), b.saturating_sub(a).as_secs_f64() / dt));
            }
            if let Some((queue, max)) = self.listen_queue(&sockets) {
                values.push(("listen_queue".into(), f64::from(queue)));
                values.push(("listen_queue_max".into(), f64::from(max)));
            }
            if let Some(r) = per_s(before.and_then(|p| p.overflows), now.overflows) {
                values.push(("listen_overflows_per_s".into(), r));
            }
            if let Some(r) = per_s(before.and_then(|p| p.drops), now.drops) {
                values.push(("listen_drops_per_s".into(), r));
            }
        }
        self.prev = Some(now);
        Ok(values)
    }

    /// The process' cgroup v2 directory, when there is a v2 hierarchy and it is visible here.
    fn cgroup_dir(&self, dir: &str) -> Option<String> {
        let path = parse_pid_cgroup(&fs::read_to_string(format!("{dir}/cgroup")).ok()?)?;
        self.cgroup2.as_ref()?.dir_of(&path)
    }

    /// How many CPUs the process may use: its affinity, capped by the tightest `cpu.max` quota of
    /// its cgroup and every ancestor (a pod's limit may sit on the pod's group, not the container's).
    fn allowed_cpus(&self, status: &perfops_core::telemetry::procfs::PidStatus, cgroup: Option<&str>) -> Option<f64> {
        let affinity = status
            .cpus_allowed
            .filter(|&n| n > 0)
            .map(f64::from)
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get() as f64));
        let mut quota: Option<f64> = None;
        if let (Some(mut dir), Some(mount)) = (cgroup.map(Path::new), &self.cgroup2) {
            loop {
                if let Some(cores) = fs::read_to_string(dir.join("cpu.max"))
                    .ok()
                    .and_then(|text| parse_cpu_max(&text).ok())
                    .and_then(|m| m.cores())
                {
                    quota = Some(quota.map_or(cores, |q| q.min(cores)));
                }
                match dir.parent() {
                    Some(up) if up.starts_with(&mount.mount_point) && dir != Path::new(&mount.mount_point) => dir = up,
                    _ => break,
                }
            }
        }
        match (affinity, quota) {
            (Some(a), Some(q)) => Some(a.min(q)),
            (a, q) => a.or(q),
        }
    }

    /// Voluntary plus involuntary context switches of each thread of every process of `tree`
    /// (its root first), by thread id. `/proc/<pid>/status` has only the main thread's, which for
    /// a pool server is the one that does nothing.
    fn ctx_switches(&mut self, tree: &[u32]) -> Option<HashMap<u32, u64>> {
        let root = format!("/proc/{}/task", tree.first()?);
        if let Err(e) = fs::read_dir(&root) {
            self.warn_once("tasks", format!("cannot list {root}: {e}"));
            return None;
        }
        let mut by_thread = HashMap::new();
        // A worker that exits meanwhile is simply not counted.
        let tasks = tree.iter().filter_map(|pid| fs::read_dir(format!("/proc/{pid}/task")).ok()).flatten();
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            // A thread that exits meanwhile is simply not counted.
            let Ok(text) = fs::read_to_string(task.path().join("status")) else { continue };
            if let Ok(s) = parse_pid_status(&text) {
                let n =
                    s.voluntary_ctxt_switches.unwrap_or(0).saturating_add(s.nonvoluntary_ctxt_switches.unwrap_or(0));
                by_thread.insert(tid, n);
            }
        }
        Some(by_thread)
    }

    /// `ListenOverflows` and `ListenDrops` of the process' network namespace.
    fn netstat(&mut self, dir: &str, mut r: Reading) -> Reading {
        match fs::read_to_string(format!("{dir}/net/netstat"))
            .map_err(|e| e.to_string())
            .and_then(|text| parse_netstat(&text).map_err(|e| e.to_string()))
        {
            Ok(n) => {
                r.overflows = n.listen_overflows();
                r.drops = n.listen_drops();
            }
            Err(e) => self.warn_once("netstat", format!("{dir}/net/netstat: {e}")),
        }
        r
    }

    /// The accept queue of the process' fullest listening port: (length, backlog), each summed
    /// over that port's sockets. By port, the sockets on that port; by pid, the listen sockets
    /// among its descriptors. The fullest, because a server with a control port beside its
    /// main one must not have a quiet port hide the full one.
    fn listen_queue(&mut self, sockets: &HashSet<u64>) -> Option<(u32, u32)> {
        let all = match netlink::listeners() {
            Ok(all) => all,
            Err(e) => {
                self.warn_once("sock_diag", format!("sock_diag query failed, no listen queue: {e}"));
                return None;
            }
        };
        let mine: Vec<_> = all
            .iter()
            .filter(|l| match self.which {
                Which::Target(ProcessSel::Port(port)) => l.local.port() == port,
                _ => sockets.contains(&u64::from(l.inode)),
            })
            .collect();
        if mine.is_empty() {
            return None;
        }
        let mut ports: Vec<(u16, u32, u32)> = Vec::new();
        for l in &mine {
            match ports.iter_mut().find(|p| p.0 == l.local.port()) {
                Some(p) => {
                    p.1 = p.1.saturating_add(l.accept_queue_len);
                    p.2 = p.2.saturating_add(l.accept_queue_max);
                }
                None => ports.push((l.local.port(), l.accept_queue_len, l.accept_queue_max)),
            }
        }
        let fill = |p: &(u16, u32, u32)| f64::from(p.1) / f64::from(p.2.max(1));
        ports.iter().max_by(|a, b| fill(a).total_cmp(&fill(b))).map(|p| (p.1, p.2))
    }
}

/// `root` and every process under it, root first, then its descendants breadth first, from every
/// process' parent in `/proc/*/stat`. Just `root` when `/proc` cannot be listed.
fn process_tree(root: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else { return vec![root] };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            // A process that exits meanwhile is not in the tree.
            let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parse_pid_stat(&text).ok()?.ppid))
        })
        .collect();
    descendants(root, &parents)
}

/// `root` then the processes under it, breadth first (children by pid), given each process'
/// (pid, parent). A pid met twice (a malformed table) is listed once.
fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(pid, ppid) in parents {
        if pid != root && pid != ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = vec![root];
    let mut seen = HashSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(p) = queue.pop_front() {
        let mut kids = children.remove(&p).unwrap_or_default();
        kids.sort_unstable();
        for k in kids {
            if seen.insert(k) {
                out.push(k);
                queue.push_back(k);
            }
        }
    }
    out
}

/// The number of open descriptors, and the inodes of the sockets among them.
fn fd_table(dir: &str) -> io::Result<(u64, HashSet<u64>)> {
    let mut count = 0;
    let mut inodes = HashSet::new();
    for entry in fs::read_dir(format!("{dir}/fd"))? {
        let Ok(entry) = entry else { continue };
        count += 1;
        if let Some(inode) = fs::read_link(entry.path()).ok().as_deref().and_then(socket_inode) {
            inodes.insert(inode);
        }
    }
    Ok((count, inodes))
}

/// The inode of a `/proc/<pid>/fd` link to a socket: `socket:[12345]`.
fn socket_inode(link: &Path) -> Option<u64> {
    link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The process that holds the socket listening on `port`: its inode from `/proc/net/tcp{,6}`,
/// then, of the processes with a descriptor on it, the one whose parent holds none (for a
/// pre-forking server, the parent: [`topmost`]).
fn pid_by_port(port: u16) -> Result<u32, String> {
    let mut inodes = HashSet::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // no IPv6
            Err(e) => return Err(format!("{file}: {e}")),
        };
        let sockets = parse_net_tcp(&text).map_err(|e| e.to_string())?;
        inodes.extend(sockets.iter().filter(|s| s.listens_on(port) && s.inode != 0).map(|s| s.inode));
    }
    if inodes.is_empty() {
        return Err(format!("nothing listens on port {port}"));
    }
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .map_err(|e| format!("/proc: {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let holds = |pid: u32| {
        // Another user's process cannot be looked into without privileges: skipped.
        let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
        entries.flatten().any(|entry| {
            fs::read_link(entry.path()).ok().as_deref().and_then(socket_inode).is_some_and(|i| inodes.contains(&i))
        })
    };
    let holders: Vec<(u32, u32)> = pids
        .into_iter()
        .filter(|&pid| holds(pid))
        .map(|pid| {
            let ppid = fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|t| parse_pid_stat(&t).ok());
            (pid, ppid.map_or(0, |s| s.ppid))
        })
        .collect();
    topmost(&holders).ok_or_else(|| {
        format!("port {port} listens, but its process is not visible (another user's, without privileges?)")
    })
}

/// Of the processes holding a listening socket, `(pid, parent)` by pid, the one whose parent
/// holds none of it: a pre-forking server's parent. The lowest pid was taken for it, but after
/// a reload (`nginx -s reload`, a phased restart) or the pids' wrap-around a worker can have a
/// lower pid than its parent, and one worker was watched for the whole server (review 2's
/// tester, W3).
fn topmost(holders: &[(u32, u32)]) -> Option<u32> {
    let holds = |pid: u32| holders.iter().any(|&(p, _)| p == pid);
    holders.iter().find(|&&(_, parent)| !holds(parent)).or(holders.first()).map(|&(pid, _)| pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_whose_parent_holds_nothing_is_the_server() {
        // (holders as (pid, parent), by pid; the server's process)
        type Case<'a> = (&'a [(u32, u32)], Option<u32>);
        let cases: [Case<'_>; 5] = [
            (&[(9662, 1), (9663, 9662), (9664, 9662)], Some(9662)), // parent first: as before
            (&[(5636, 24806), (24806, 1)], Some(24806)),            // a reloaded nginx: its worker has the lower pid
            (&[(700, 1), (701, 1)], Some(700)),                     // two unrelated holders (SO_REUSEPORT): the first
            (&[(42, 0)], Some(42)),                                 // a parent not read: itself
            (&[], None),                                            // nothing visible
        ];
        for (holders, want) in cases {
            assert_eq!(topmost(holders), want, "{holders:?}");
        }
    }

    #[test]
    fn socket_links() {
        let cases: [(&str, Option<u64>); 4] = [
            ("socket:[12345]", Some(12345)), // a socket
            ("pipe:[77]", None),             // a pipe
            ("/dev/null", None),             // a file
            ("socket:[x]", None),            // not a number
        ];
        for (link, want) in cases {
            assert_eq!(socket_inode(Path::new(link)), want, "{link}");
        }
    }

    #[test]
    fn a_process_tree_is_its_root_and_everything_under_it() {
        // (root, (pid, parent) pairs, want)
        type Case<'a> = (u32, &'a [(u32, u32)], &'a [u32]);
        let cases: [Case; 5] = [
            // One process: itself.
            (10, &[(1, 0), (10, 1), (11, 1)], &[10]),
            // An nginx-like master with two workers; its siblings are not its.
            (10, &[(1, 0), (10, 1), (12, 10), (11, 10), (13, 1)], &[10, 11, 12]),
            // Grandchildren (a worker's own helper): the whole tree, breadth first.
            (10, &[(1, 0), (10, 1), (20, 10), (30, 20), (21, 10)], &[10, 20, 21, 30]),
            // A table where the root is absent (it exited): still just the root and its orphans' none.
            (10, &[(1, 0), (11, 1)], &[10]),
            // A cycle in a malformed table does not loop.
            (10, &[(10, 11), (11, 10)], &[10, 11]),
        ];
        for (root, parents, want) in cases {
            assert_eq!(descendants(root, parents), want, "{parents:?}");
        }
    }

    #[test]
    fn the_generator_samples_itself() {
        let mut s = Sampler::new(Which::Generator);
        let first = s.sample(0.0).unwrap();
        let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["generator_rss_bytes", "generator_threads", "generator_open_fds", "generator_sockets"],
            "no rate yet"
        );
        let second = s.sample(0.5).unwrap();
        let names: Vec<&str> = second.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..2], ["generator_cpu_cores", "generator_cpu_share"]);
        assert!(second.iter().all(|(_, v)| v.is_finite() && *v >= 0.0), "{second:?}");
    }
}
