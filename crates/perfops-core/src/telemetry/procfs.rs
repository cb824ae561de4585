//! The kernel's view of a local target, from the text of `/proc` and cgroup v2 files: a process'
//! CPU time, memory, threads and context switches, the machine's CPU time, TCP sockets and their
//! queues, the `TcpExt` counters (`ListenOverflows`, `ListenDrops`) and cgroup CPU throttling.
//!
//! It owns the layouts of those files and their units (ticks, pages, kB, µs, host-order hex). It
//! does not read them, does not know the clock-tick rate or the page size (the engine asks the
//! system and converts), does not count open descriptors (that is a directory listing of
//! `/proc/<pid>/fd`, nothing to parse) and keeps no history: rates are the caller's arithmetic on
//! two readings. The accept-queue *maximum* of a listen socket is not in any of these files; see
//! [`TcpSocket::rx_queue`] and [`super::sockdiag`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// A file that does not have the layout its parser expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ProcError {
    /// Which file it was, as a path pattern (`/proc/<pid>/stat`).
    pub file: &'static str,
    /// What is wrong.
    pub message: String,
}

fn err(file: &'static str, message: impl Into<String>) -> ProcError {
    ProcError { file, message: message.into() }
}

fn number<T: std::str::FromStr>(file: &'static str, field: &str, s: &str) -> Result<T, ProcError> {
    s.parse().map_err(|_| err(file, format!("{field}: {s:?} is not a number")))
}

/// The fields of `/proc/<pid>/stat` a load test watches (see proc(5) for the numbering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidStat {
    /// (1) The process id.
    pub pid: u32,
    /// (2) The command name, without the parentheses; may contain spaces and parentheses.
    pub comm: String,
    /// (3) One letter: R running, S sleeping, D disk sleep, Z zombie, ...
    pub state: char,
    /// (4) The parent's pid: a pre-forking server's workers have the master's.
    pub ppid: u32,
    /// (10) Minor page faults.
    pub minflt: u64,
    /// (12) Major page faults (the page had to be read from disk).
    pub majflt: u64,
    /// (14) Time in user mode, in clock ticks (`sysconf(_SC_CLK_TCK)`, usually 100 per second).
    pub utime_ticks: u64,
    /// (15) Time in kernel mode, in clock ticks.
    pub stime_ticks: u64,
    /// (20) Threads in the process.
    pub num_threads: u64,
    /// (22) Start time after boot, in clock ticks.
    pub starttime_ticks: u64,
    /// (23) Virtual memory size.
    pub vsize_bytes: u64,
    /// (24) Resident set size, in pages (`sysconf(_SC_PAGESIZE)`).
    pub rss_pages: u64,
}

impl PidStat {
    /// User plus kernel time, in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.utime_ticks.saturating_add(self.stime_ticks)
    }
}

/// Parse `/proc/<pid>/stat`.
///
/// Subtleness ahead: the command name (field 2) is whatever the process set, spaces and
/// parentheses included (`1234 (x) (y z) S ...` is a process named `x) (y z`). The kernel does not
/// escape it, so the only safe split is at the *last* `)`: nothing after it can contain one.
pub fn parse_pid_stat(text: &str) -> Result<PidStat, ProcError> {
    const FILE: &str = "/proc/<pid>/stat";
    let open = text.find('(').ok_or_else(|| err(FILE, "no `(` before the command name"))?;
    let close = text.rfind(')').filter(|&c| c > open).ok_or_else(|| err(FILE, "no `)` after the command name"))?;
    let pid = number(FILE, "pid", text[..open].trim())?;
    let comm = text[open + 1..close].to_string();
    // Field n (1-based, as proc(5) numbers them) is fields[n - 3]: the split starts at field 3.
    let fields: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    if fields.len() < 22 {
        return Err(err(FILE, format!("{} fields after the command name, expected at least 22", fields.len())));
    }
    let field = |n: usize, name: &str| number::<u64>(FILE, name, fields[n - 3]);
    // rss is printed signed (%ld); a negative value has never been seen but must not fail the read.
    let rss: i64 = number(FILE, "rss", fields[24 - 3])?;
    Ok(PidStat {
        pid,
        comm,
        state: fields[0].chars().next().unwrap_or('?'),
        ppid: number(FILE, "ppid", fields[4 - 3])?,
        minflt: field(10, "minflt")?,
        majflt: field(12, "majflt")?,
        utime_ticks: field(14, "utime")?,
        stime_ticks: field(15, "stime")?,
        num_threads: field(20, "num_threads")?,
        starttime_ticks: field(22, "starttime")?,
        vsize_bytes: field(23, "vsize")?,
        rss_pages: u64::try_from(rss).unwrap_or(0),
    })
}

/// The fields of `/proc/<pid>/status` a load test watches. Each is `None` when the line is absent:
/// kernel threads have no `VmRSS`, old kernels no `voluntary_ctxt_switches`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PidStatus {
    /// `Name`, the command name as the kernel escapes it here (`\n`, `\\`).
    pub name: Option<String>,
    /// `VmRSS`: resident memory now.
    pub vm_rss_bytes: Option<u64>,
    /// `VmHWM`: the peak of resident memory.
    pub vm_hwm_bytes: Option<u64>,
    /// `Threads`.
    pub threads: Option<u64>,
    /// `voluntary_ctxt_switches`: the process gave up the CPU (waited for I/O, a lock, a sleep).
    pub voluntary_ctxt_switches: Option<u64>,
    /// `nonvoluntary_ctxt_switches`: the scheduler took the CPU away (time slice over: CPU contention).
    pub nonvoluntary_ctxt_switches: Option<u64>,
    /// `Cpus_allowed_list`, counted: how many CPUs the process may run on (its affinity mask, which
    /// a cpuset cgroup or `taskset` narrows). See [`parse_cpu_list`].
    pub cpus_allowed: Option<u32>,
}

/// Parse `/proc/<pid>/status`: `Key:\tvalue` lines; memory is printed in kB (KiB) and returned in
/// bytes. Unknown keys are ignored; a known key with a value that is not a number is an error.
pub fn parse_pid_status(text: &str) -> Result<PidStatus, ProcError> {
    const FILE: &str = "/proc/<pid>/status";
    let mut st = PidStatus::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        let kb = |v: &str| -> Result<u64, ProcError> {
            let n = v.strip_suffix("kB").unwrap_or(v).trim();
            Ok(number::<u64>(FILE, key, n)?.saturating_mul(1024))
        };
        match key {
            "Name" => st.name = Some(value.to_string()),
            "VmRSS" => st.vm_rss_bytes = Some(kb(value)?),
            "VmHWM" => st.vm_hwm_bytes = Some(kb(value)?),
            "Threads" => st.threads = Some(number(FILE, key, value)?),
            "voluntary_ctxt_switches" => st.voluntary_ctxt_switches = Some(number(FILE, key, value)?),
            "nonvoluntary_ctxt_switches" => st.nonvoluntary_ctxt_switches = Some(number(FILE, key, value)?),
            "Cpus_allowed_list" => st.cpus_allowed = Some(parse_cpu_list(value)?),
            _ => {}
        }
    }
    Ok(st)
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11` is 7), as `Cpus_allowed_list` and the
/// cpuset files print it. An empty list is 0. Ranges may overlap in hand-written input; they are
/// counted as written, since the kernel never prints overlapping ones.
pub fn parse_cpu_list(text: &str) -> Result<u32, ProcError> {
    const FILE: &str = "cpu list";
    let mut count: u32 = 0;
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let n = match part.split_once('-') {
            None => {
                number::<u32>(FILE, "cpu", part)?;
                1
            }
            Some((from, to)) => {
                let from: u32 = number(FILE, "cpu", from)?;
                let to: u32 = number(FILE, "cpu", to)?;
                if to < from {
                    return Err(err(FILE, format!("range {part:?} goes down")));
                }
                to - from + 1
            }
        };
        count = count.saturating_add(n);
    }
    Ok(count)
}

/// Where the cgroup v2 hierarchy is mounted, from `/proc/self/mountinfo`: the first `cgroup2`
/// mount. `/sys/fs/cgroup` on a pure v2 host, `/sys/fs/cgroup/unified` on a hybrid one, elsewhere
/// in a container that mounts it so. `None` when there is none (pure v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup2Mount {
    /// Field 4, the path inside the hierarchy that is mounted (`/` unless a sub-tree is bind-mounted).
    pub root: String,
    /// Field 5, where it is mounted.
    pub mount_point: String,
}

impl Cgroup2Mount {
    /// The directory of a cgroup path as [`parse_pid_cgroup`] gives it, or `None` when the path is
    /// outside the mounted sub-tree.
    pub fn dir_of(&self, cgroup: &str) -> Option<String> {
        let rest = if self.root == "/" { cgroup } else { cgroup.strip_prefix(self.root.as_str())? };
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None; // `/a` is not a prefix of `/ab` as a path
        }
        let rest = rest.trim_end_matches('/');
        Some(format!("{}{rest}", self.mount_point.trim_end_matches('/')))
    }
}

/// Parse `/proc/<pid>/mountinfo` for the cgroup v2 mount (see proc(5): optional fields end with a
/// lone `-`, then the file system type). Paths come back unescaped (`\040` is a space).
pub fn parse_cgroup2_mount(mountinfo: &str) -> Option<Cgroup2Mount> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split_ascii_whitespace().next() != Some("cgroup2") {
            return None;
        }
        let fields: Vec<&str> = before.split_ascii_whitespace().collect();
        let (root, mount_point) = (fields.get(3)?, fields.get(4)?);
        Some(Cgroup2Mount { root: unescape_octal(root), mount_point: unescape_octal(mount_point) })
    })
}

/// The kernel writes space, tab, newline and backslash in mountinfo paths as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::try_from(d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0'))).ok());
        match (b[i], code) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The path of the process' cgroup v2 (the `0::/path` line of `/proc/<pid>/cgroup`), to be joined
/// to the cgroup2 mount point. `None` on a pure cgroup v1 system.
pub fn parse_pid_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

/// CPU time of the whole machine, from the `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Normal processes in user mode (guest time included).
    pub user: u64,
    /// Niced processes in user mode (niced guest time included).
    pub nice: u64,
    /// Kernel mode.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle while I/O was outstanding.
    pub iowait: u64,
    /// Servicing hardware interrupts.
    pub irq: u64,
    /// Servicing softirqs (much of the network stack).
    pub softirq: u64,
    /// Stolen by the hypervisor for other guests.
    pub steal: u64,
}

impl CpuTimes {
    /// All time, in ticks. `guest` and `guest_nice` are not added: the kernel already counts them
    /// in `user` and `nice`.
    pub fn total(&self) -> u64 {
        [self.user, self.nice, self.system, self.idle, self.iowait, self.irq, self.softirq, self.steal]
            .into_iter()
            .fold(0u64, u64::saturating_add)
    }

    /// Time not idle (and not waiting for I/O), in ticks.
    pub fn busy(&self) -> u64 {
        self.total().saturating_sub(self.idle.saturating_add(self.iowait))
    }
}

/// What `/proc/stat` says about the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemStat {
    /// The aggregate `cpu` line: all CPUs together.
    pub cpu: CpuTimes,
    /// The number of `cpuN` lines: online CPUs. A process' CPU ticks over the delta of
    /// [`CpuTimes::total`], times this, is the number of cores it used.
    pub cpus: usize,
}

/// Parse `/proc/stat` (the `cpu` and `cpuN` lines; the rest is ignored). Columns added by newer
/// kernels are ignored; columns missing on older ones (steal before 2.6.11) read as 0.
pub fn parse_stat(text: &str) -> Result<SystemStat, ProcError> {
    const FILE: &str = "/proc/stat";
    let mut cpu = None;
    let mut cpus = 0;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        match words.next() {
            Some("cpu") => {
                let mut v = [0u64; 8];
                let mut n = 0;
                for (slot, w) in v.iter_mut().zip(words) {
                    *slot = number(FILE, "cpu", w)?;
                    n += 1;
                }
                if n < 4 {
                    return Err(err(FILE, "the `cpu` line has fewer than 4 columns"));
                }
                let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
                cpu = Some(CpuTimes { user, nice, system, idle, iowait, irq, softirq, steal });
            }
            Some(w) if w.len() > 3 && w.starts_with("cpu") && w[3..].bytes().all(|b| b.is_ascii_digit()) => cpus += 1,
            _ => {}
        }
    }
    let cpu = cpu.ok_or_else(|| err(FILE, "no `cpu` line"))?;
    Ok(SystemStat { cpu, cpus })
}

/// `st` of a socket in the LISTEN state (`TCP_LISTEN` in include/net/tcp_states.h).
pub const TCP_LISTEN: u8 = 0x0A;

/// One line of `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocket {
    /// `local_address`.
    pub local: SocketAddr,
    /// `rem_address` (`0.0.0.0:0` or `[::]:0` for a listen socket).
    pub remote: SocketAddr,
    /// `st`: the TCP state; [`TCP_LISTEN`] for a listen socket.
    pub state: u8,
    /// The first half of `tx_queue:rx_queue`.
    ///
    /// For a connected socket, bytes sent and not yet acknowledged (`write_seq - snd_una`). For a
    /// listen socket it is that same difference, which is always 0: it is **not** the listen
    /// backlog. (`netstat` documents Send-Q of a listen socket as the backlog, but it reads this
    /// file and shows 0; `ss` shows the backlog because it asks sock_diag, see
    /// [`super::sockdiag`].)
    pub tx_queue: u32,
    /// The second half of `tx_queue:rx_queue`.
    ///
    /// For a listen socket: the accept-queue length, connections that completed the handshake and
    /// wait for `accept()` (`sk_ack_backlog`). For a connected socket: bytes received and not yet
    /// read.
    ///
    /// What was checked, against Linux's `get_tcp4_sock()` and `get_tcp6_sock()`
    /// (net/ipv4/tcp_ipv4.c, net/ipv6/tcp_ipv6.c, unchanged in this respect since 2.6.18):
    /// `rx_queue = (state == TCP_LISTEN) ? sk->sk_ack_backlog : rcv_nxt - copied_seq` and
    /// `tx_queue = write_seq - snd_una` whatever the state. The backlog, `sk_max_ack_backlog`, is
    /// only in inet_diag (`tcp_diag_get_info()` sets `idiag_wqueue` to it for a listen socket). A
    /// 2024 netdev patch to print it as `tx_queue` here was not merged: on the 6.18 kernel this
    /// was written on, a socket after `listen(7)` reads `00000000:00000000`, `ss -ltn` shows
    /// Send-Q 7, and after 15 connects with no `accept()` it reads `00000000:00000008`, 7 clients
    /// sit in SYN_SENT and `ListenOverflows` grows by 14 (their SYNs and one retransmission each). Eight, not seven: the queue is full only when it holds *more* than
    /// the backlog (`sk_acceptq_is_full()` compares with `>`), so a full queue reads backlog + 1.
    pub rx_queue: u32,
    /// `uid` of the owner.
    pub uid: u32,
    /// `inode` of the socket: the target's `/proc/<pid>/fd/*` links to `socket:[inode]`, which is
    /// how a process is found from its port.
    pub inode: u64,
}

impl TcpSocket {
    /// True for a socket in the LISTEN state on `port` (any address).
    pub fn listens_on(&self, port: u16) -> bool {
        self.state == TCP_LISTEN && self.local.port() == port
    }

    /// The accept-queue length of a listen socket (see [`TcpSocket::rx_queue`]); `None` for any
    /// other state, where `rx_queue` means unread bytes.
    pub fn accept_queue_len(&self) -> Option<u32> {
        (self.state == TCP_LISTEN).then_some(self.rx_queue)
    }
}

/// Parse `/proc/net/tcp` or `/proc/net/tcp6` (told apart by the address width). A server on
/// `0.0.0.0` and `::`, or several processes with `SO_REUSEPORT`, has one listen socket each, each
/// with its own accept queue: filter with [`TcpSocket::listens_on`] and look at all of them.
pub fn parse_net_tcp(text: &str) -> Result<Vec<TcpSocket>, ProcError> {
    const FILE: &str = "/proc/net/tcp";
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.is_empty() || f[0] == "sl" {
            continue;
        }
        if f.len() < 10 {
            return Err(err(FILE, format!("{} fields in {line:?}, expected at least 10", f.len())));
        }
        let (tx, rx) = f[4].split_once(':').ok_or_else(|| err(FILE, format!("tx_queue:rx_queue {:?}", f[4])))?;
        out.push(TcpSocket {
            local: hex_socket_addr(f[1]).ok_or_else(|| err(FILE, format!("local address {:?}", f[1])))?,
            remote: hex_socket_addr(f[2]).ok_or_else(|| err(FILE, format!("remote address {:?}", f[2])))?,
            state: u8::from_str_radix(f[3], 16).map_err(|_| err(FILE, format!("state {:?}", f[3])))?,
            tx_queue: u32::from_str_radix(tx, 16).map_err(|_| err(FILE, format!("tx_queue {tx:?}")))?,
            rx_queue: u32::from_str_radix(rx, 16).map_err(|_| err(FILE, format!("rx_queue {rx:?}")))?,
            uid: number(FILE, "uid", f[7])?,
            inode: number(FILE, "inode", f[9])?,
        });
    }
    Ok(out)
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6).
///
/// The kernel prints the address as 32-bit words in *host* byte order (`%08X` of a `__be32` read
/// as a native integer) and the port after `ntohs`, so the port reads as it is and each word goes
/// back to its bytes with `to_ne_bytes`. Right for a file read on the machine that wrote it, which
/// is the only way the engine reads it (the test fixtures come from a little-endian host).
fn hex_socket_addr(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| addr.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok());
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?.to_ne_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The counters of `/proc/net/netstat` (also `/proc/net/snmp`, which has the same layout).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Netstat {
    /// `(section, name, value)`, e.g. `("TcpExt", "ListenOverflows", 12)`, in file order.
    pub counters: Vec<(String, String, u64)>,
}

impl Netstat {
    /// The counter `name` of `section` (`TcpExt`, `IpExt`, ...).
    pub fn counter(&self, section: &str, name: &str) -> Option<u64> {
        self.counters.iter().find(|(s, n, _)| s == section && n == name).map(|&(_, _, v)| v)
    }

    /// `TcpExt: ListenOverflows`: packets dropped because a listen socket's accept queue was full,
    /// a SYN (`tcp_conn_request()`) or a handshake's final ACK (`tcp_v4_syn_recv_sock()`). Clients
    /// retransmit, so one connection attempt may count several times.
    pub fn listen_overflows(&self) -> Option<u64> {
        self.counter("TcpExt", "ListenOverflows")
    }

    /// `TcpExt: ListenDrops`: every connection dropped at a listen socket, overflows included
    /// (also SYN-queue drops and failures to create the child socket).
    pub fn listen_drops(&self) -> Option<u64> {
        self.counter("TcpExt", "ListenDrops")
    }
}

/// Parse `/proc/net/netstat`: pairs of lines, `Section: Name1 Name2 ...` then
/// `Section: value1 value2 ...`. Host-wide counters (per network namespace), not per socket.
/// A negative value (`/proc/net/snmp`'s `Tcp: MaxConn -1`) is a setting, not a counter, and is
/// skipped.
pub fn parse_netstat(text: &str) -> Result<Netstat, ProcError> {
    const FILE: &str = "/proc/net/netstat";
    let mut counters = Vec::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    while let Some(names) = lines.next() {
        let values = lines.next().ok_or_else(|| err(FILE, format!("no value line after {:?}", cut(names))))?;
        let (section, names) = names.split_once(':').ok_or_else(|| err(FILE, format!("no `Section:` in {names:?}")))?;
        let Some((section2, values)) = values.split_once(':').filter(|(s, _)| *s == section) else {
            return Err(err(FILE, format!("the line after the {section} names is not {section} values")));
        };
        let names: Vec<&str> = names.split_ascii_whitespace().collect();
        let values: Vec<&str> = values.split_ascii_whitespace().collect();
        if names.len() != values.len() {
            return Err(err(FILE, format!("{section2}: {} names but {} values", names.len(), values.len())));
        }
        for (name, value) in names.into_iter().zip(values) {
            match value.parse::<u64>() {
                Ok(v) => counters.push((section.to_string(), name.to_string(), v)),
                Err(_) if value.parse::<i64>().is_ok() => {}
                Err(_) => return Err(err(FILE, format!("{section}: {name}: {value:?} is not a number"))),
            }
        }
    }
    Ok(Netstat { counters })
}

fn cut(s: &str) -> String {
    s.chars().take(40).collect()
}

/// A cgroup's `cpu.stat`. Every field is optional: v2 always has the `usage`/`user`/`system`
/// times, and the throttling ones only where the cpu controller is enabled for the group; the
/// cgroup v1 cpu controller's `cpu.stat` has only the throttling ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupCpuStat {
    /// `usage_usec`: CPU time used by the group.
    pub usage: Option<Duration>,
    /// `user_usec`.
    pub user: Option<Duration>,
    /// `system_usec`.
    pub system: Option<Duration>,
    /// `nr_periods`: enforcement periods (`cpu.max`'s period) in which the group was runnable.
    pub nr_periods: Option<u64>,
    /// `nr_throttled`: periods in which the group used up its quota and was stopped.
    pub nr_throttled: Option<u64>,
    /// `throttled_usec` (v2) or `throttled_time` (v1, in ns): time spent stopped.
    pub throttled: Option<Duration>,
}

/// Parse a cgroup `cpu.stat` (`key value` lines; unknown keys ignored).
pub fn parse_cgroup_cpu_stat(text: &str) -> Result<CgroupCpuStat, ProcError> {
    const FILE: &str = "cpu.stat";
    let mut st = CgroupCpuStat::default();
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(' ') else { continue };
        let value = value.trim();
        let usec = |v: &str| number::<u64>(FILE, key, v).map(Duration::from_micros);
        match key {
            "usage_usec" => st.usage = Some(usec(value)?),
            "user_usec" => st.user = Some(usec(value)?),
            "system_usec" => st.system = Some(usec(value)?),
            "nr_periods" => st.nr_periods = Some(number(FILE, key, value)?),
            "nr_throttled" => st.nr_throttled = Some(number(FILE, key, value)?),
            "throttled_usec" => st.throttled = Some(usec(value)?),
            "throttled_time" => st.throttled = Some(Duration::from_nanos(number(FILE, key, value)?)),
            _ => {}
        }
    }
    Ok(st)
}

/// A cgroup v2 `cpu.max`: at most `quota` of CPU time per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    /// CPU time allowed per period; `None` for `max` (no limit).
    pub quota: Option<Duration>,
    /// The enforcement period (100 ms by default).
    pub period: Duration,
}

impl CpuMax {
    /// The limit in cores (`quota / period`), e.g. 1.5; `None` when unlimited.
    pub fn cores(&self) -> Option<f64> {
        // A ratio of integer nanoseconds: 150000/100000 is exactly 1.5, a ratio of f64 seconds is not.
        let period = self.period.as_nanos() as f64;
        self.quota.filter(|_| period > 0.0).map(|q| q.as_nanos() as f64 / period)
    }
}

/// Parse a cgroup v2 `cpu.max` (`max 100000` or `150000 100000`, in µs).
pub fn parse_cpu_max(text: &str) -> Result<CpuMax, ProcError> {
    const FILE: &str = "cpu.max";
    let mut words = text.split_ascii_whitespace();
    let (Some(quota), Some(period), None) = (words.next(), words.next(), words.next()) else {
        return Err(err(FILE, format!("expected `QUOTA PERIOD`, got {:?}", cut(text))));
    };
    let quota = match quota {
        "max" => None,
        q => Some(Duration::from_micros(number(FILE, "quota", q)?)),
    };
    Ok(CpuMax { quota, period: Duration::from_micros(number(FILE, "period", period)?) })
}
