//! Running the real `perfops` binary from end-to-end tests: spawn it with
//! `--json` into a unique temporary file, bound its run time, collect exit
//! code, stdout, stderr and the parsed JSON summary. Commands without
//! `--json` (`run`, `check`) start through [`spawn_perfops`]; signals and the
//! processes a run starts (its demo target) are seen through kill(1) and
//! `/proc`. A test's scenario files and `runs/` live in a [`Workdir`].
//!
//! It owns no server: the tests bring their own from `perfops-testkit`.

// Each test binary that includes this module uses a subset of it.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod browser;

/// The longest any single run may take before the test kills it and fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(30);

/// Timing-sensitive tests hold this exclusively, every other test shares it.
///
/// The harness runs tests on as many threads as there are cores; a second
/// generator and its server running beside a precise measurement would steal
/// the CPU it needs and turn scheduler noise into "latency".
static CPU: RwLock<()> = RwLock::new(());

/// For a test whose assertions depend on timing: no other test runs meanwhile.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    CPU.write().unwrap_or_else(PoisonError::into_inner)
}

/// For a functional test: may run beside other functional tests.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    CPU.read().unwrap_or_else(PoisonError::into_inner)
}

/// A free port on 127.0.0.1 (bound, read, released: the program under test binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A unique path in the temporary directory (no tempfile crate needed).
pub fn temp_path(tag: &str, ext: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("perfops-e2e-{}-{n}-{tag}.{ext}", std::process::id()))
}

/// A fresh temporary directory for one test: its scenario files and `runs/`.
/// Removed when the test passes, kept (its path printed) when it fails.
pub struct Workdir {
    /// The directory.
    pub path: PathBuf,
}

impl Workdir {
    /// A new empty directory; `tag` goes into its name.
    pub fn new(tag: &str) -> Workdir {
        let path = temp_path(tag, "d");
        std::fs::create_dir_all(&path).expect("create the test directory");
        Workdir { path }
    }

    /// Write scenario `name` and return its path.
    pub fn scenario(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.path.join(name);
        std::fs::write(&path, yaml).expect("write the scenario file");
        path
    }

    /// Where the runs write their results (`--out`).
    pub fn runs(&self) -> PathBuf {
        self.path.join("runs")
    }

    /// Start `perfops COMMAND SCENARIO --out DIR/runs -q EXTRA...`, after
    /// `configure` had its say (as with [`spawn_perfops`]).
    pub fn spawn(
        &self,
        command: &str,
        scenario: &Path,
        extra: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Running {
        let (scenario, out) = (scenario.display().to_string(), self.runs().display().to_string());
        let mut args = vec![command, scenario.as_str(), "--out", out.as_str(), "-q"];
        args.extend_from_slice(extra);
        spawn_perfops(&args, configure)
    }

    /// A fleet on loopback: `perfops coordinator SCENARIO --agents N` on a
    /// free port (one worker each, 20 s to join, `extra` after), and N
    /// agents joining it, all with `token`.
    #[allow(dead_code)] // not every test file runs a fleet
    pub fn fleet(&self, scenario: &Path, agents: usize, token: &str, extra: &[&str]) -> (Running, Vec<Running>) {
        let listen = format!("127.0.0.1:{}", free_port());
        let n = agents.to_string();
        let mut args =
            vec!["--agents", n.as_str(), "--listen", listen.as_str(), "--workers", "1", "--join-timeout", "20s"];
        args.extend_from_slice(extra);
        let coordinator = self.spawn("coordinator", scenario, &args, |c| {
            c.env("PERFOPS_TOKEN", token);
        });
        let join = format!("https://{listen}");
        let agents = (0..agents)
            .map(|_| {
                spawn_perfops(&["agent", "--join", &join, "--connect-timeout", "20s"], |c| {
                    c.env("PERFOPS_TOKEN", token).env_remove("JOB_COMPLETION_INDEX");
                })
            })
            .collect();
        (coordinator, agents)
    }

    /// The results directories under `runs/`.
    pub fn result_dirs(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.runs()) else { return Vec::new() };
        entries.map(|e| e.expect("list runs/").path()).filter(|p| p.is_dir()).collect()
    }

    /// The results directory of finished run `out`: exactly one under `runs/`.
    pub fn result_dir(&self, out: &Finished) -> PathBuf {
        let dirs = self.result_dirs();
        assert_eq!(
            dirs.len(),
            1,
            "want exactly one results directory under {}, found {dirs:?}\nexit {:?}, stderr:\n{}",
            self.runs().display(),
            out.code,
            out.stderr
        );
        dirs[0].clone()
    }

    /// `summary.json` of finished run `out`, the only one.
    pub fn summary(&self, out: &Finished) -> Value {
        let text = std::fs::read_to_string(self.result_dir(out).join("summary.json")).expect("summary.json");
        serde_json::from_str(&text).expect("summary.json is JSON")
    }
}

/// A finished `perfops run` and its results directory; each test file adds
/// the constructor its scenarios need (`Run::new`).
pub struct Run {
    /// The exit, stdout and stderr.
    pub out: Finished,
    /// The results directory.
    pub dir: PathBuf,
}

impl Run {
    /// The results of a run of `wd` that finished: exactly one directory under `runs/`.
    pub fn of(wd: &Workdir, out: Finished) -> Run {
        let dir = wd.result_dir(&out);
        Run { out, dir }
    }

    /// A results file, as text.
    pub fn text(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_else(|e| panic!("cannot read {file} in {} ({e})\n{}", self.dir.display(), self.context()))
    }

    /// A results file, as JSON.
    pub fn json(&self, file: &str) -> Value {
        serde_json::from_str(&self.text(file)).unwrap_or_else(|e| panic!("{file} is not JSON ({e})"))
    }

    /// `summary.json`.
    pub fn summary(&self) -> Value {
        self.json("summary.json")
    }

    /// The figures of step `name` in the summary.
    #[track_caller]
    pub fn step(&self, name: &str) -> Value {
        let s = self.summary();
        s["steps"]
            .as_array()
            .and_then(|steps| steps.iter().find(|st| st["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no step {name:?} in\n{s:#}\n{}", self.context()))
    }

    /// The exit, output and summary, for assertion messages.
    pub fn context(&self) -> String {
        let summary = std::fs::read_to_string(self.dir.join("summary.json")).unwrap_or_else(|_| "(none)".into());
        format!(
            "perfops {:?} exited {:?}\nstdout:\n{}\nstderr:\n{}\nsummary.json:\n{summary}",
            self.out.args, self.out.code, self.out.stdout, self.out.stderr
        )
    }

    #[track_caller]
    pub fn assert_exit(&self, code: i32) {
        assert_eq!(self.out.code, Some(code), "exit code\n{}", self.context());
    }
}

/// Whether the live page at `addr` answers 200 (the run started).
pub fn page_up(addr: &str) -> bool {
    use std::io::Write;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && &head[9..12] == b"200"
}

/// Every file under `dir`, with its bytes (to search a results directory for what must not be there).
pub fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("list the results") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).expect("read a results file")));
        }
    }
}

/// A count at JSON pointer `ptr`, 0 when absent (as failure kinds that did not occur are).
pub fn count(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr).and_then(Value::as_u64).unwrap_or(0)
}

/// A number at JSON pointer `ptr`.
#[track_caller]
pub fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number at {ptr} in {v:#}"))
}

impl Drop for Workdir {
    // Captured by the harness and shown with the failing test's output only.
    #[allow(clippy::print_stderr)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A `perfops` process still running.
pub struct Running {
    child: Child,
    /// Where `--json` goes (`None`: the command writes no JSON summary).
    json_path: Option<PathBuf>,
    args: Vec<String>,
    started: Instant,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

/// What a finished `perfops` run left behind.
#[derive(Debug)]
pub struct Finished {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything written on stdout.
    pub stdout: String,
    /// Everything written on stderr.
    pub stderr: String,
    /// The `--json` summary, if the run wrote one.
    pub json: Option<Value>,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// The arguments, for assertion messages.
    pub args: Vec<String>,
}

/// Start `perfops quick ARGS --json <unique file>`; stdout and stderr are
/// pipes (so neither is a terminal).
pub fn spawn_quick(args: &[&str]) -> Running {
    spawn_quick_with(args, |_| {})
}

/// [`spawn_quick`], after `configure` had its say on the command (an
/// environment variable, say).
pub fn spawn_quick_with(args: &[&str], configure: impl FnOnce(&mut Command)) -> Running {
    let json_path = temp_path("summary", "json");
    let mut full: Vec<String> = vec!["quick".into()];
    full.extend(args.iter().map(|a| (*a).to_string()));
    full.push("--json".into());
    full.push(json_path.display().to_string());
    spawn_with(full, Some(json_path), configure)
}

/// Start `perfops ARGS` (any command), after `configure` had its say on the
/// command (environment variables, say); stdout and stderr are pipes, as
/// with [`spawn_quick`]. The result has no JSON summary.
pub fn spawn_perfops(args: &[&str], configure: impl FnOnce(&mut Command)) -> Running {
    spawn_with(args.iter().map(|a| (*a).to_string()).collect(), None, configure)
}

fn spawn_with(full: Vec<String>, json_path: Option<PathBuf>, configure: impl FnOnce(&mut Command)) -> Running {
    let mut command = Command::new(env!("CARGO_BIN_EXE_perfops"));
    command.args(&full).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).env_remove("NO_COLOR");
    configure(&mut command);
    let mut child = command.spawn().expect("spawn the perfops binary");
    let started = Instant::now();
    // Drain both pipes on their own threads so a chatty child never blocks on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    Running { child, json_path, args: full, started, stdout, stderr }
}

/// Run `perfops quick ARGS` to completion (at most [`RUN_LIMIT`]).
pub fn quick(args: &[&str]) -> Finished {
    spawn_quick(args).wait(RUN_LIMIT)
}

/// [`quick`], after `configure` had its say on the command (an environment
/// variable, say).
pub fn quick_with(args: &[&str], configure: impl FnOnce(&mut Command)) -> Finished {
    spawn_quick_with(args, configure).wait(RUN_LIMIT)
}

impl Running {
    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the exit, at most `limit`; a run that overstays is killed
    /// (with the processes it started) and the test fails (a hung generator
    /// must not hang the test suite).
    pub fn wait(mut self, limit: Duration) -> Finished {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for perfops") {
                break status;
            }
            if self.started.elapsed() > limit {
                // A run's demo target first: it shares perfops' stderr, and an
                // orphan holding the pipe would hang the read below forever.
                for pid in children_of(self.child.id()) {
                    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                }
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self.stderr.join().unwrap_or_default();
                if let Some(path) = &self.json_path {
                    let _ = std::fs::remove_file(path);
                }
                panic!("perfops {:?} still running after {limit:?}; killed. stderr:\n{stderr}", self.args);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall = self.started.elapsed();
        let stdout = self.stdout.join().unwrap_or_default();
        let stderr = self.stderr.join().unwrap_or_default();
        let json = self.json_path.as_ref().and_then(|path| std::fs::read(path).ok()).map(|bytes| {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("--json output is not JSON ({e}):\n{stdout}"))
        });
        if let Some(path) = &self.json_path {
            let _ = std::fs::remove_file(path);
        }
        Finished { code: status.code(), stdout, stderr, json, wall, args: self.args }
    }
}

impl Finished {
    /// The JSON summary; fails the test (showing the output) if there is none.
    pub fn json(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| {
            panic!("no JSON summary from {:?}\nstdout:\n{}\nstderr:\n{}", self.args, self.stdout, self.stderr)
        })
    }

    /// A number of the summary at JSON pointer `ptr` (e.g. `/latency_ms/p50`).
    pub fn f64(&self, ptr: &str) -> f64 {
        let json = self.json();
        json.pointer(ptr).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number at {ptr} in {json:#}"))
    }

    /// A count of the summary at JSON pointer `ptr` (e.g. `/completed`).
    pub fn u64(&self, ptr: &str) -> u64 {
        let json = self.json();
        json.pointer(ptr).and_then(Value::as_u64).unwrap_or_else(|| panic!("no count at {ptr} in {json:#}"))
    }

    /// Failures of `kind` (absent from the JSON when zero).
    pub fn failures(&self, kind: &str) -> u64 {
        self.json()["failures"].get(kind).map_or(0, |v| v.as_u64().expect("failure counts are integers"))
    }

    /// Asserts the exit code, showing the whole output when it differs.
    #[track_caller]
    pub fn assert_exit(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "exit code of perfops {:?}\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
    }

    /// The summary, pretty-printed, for assertion messages.
    pub fn dump(&self) -> String {
        match &self.json {
            Some(j) => format!("{j:#}"),
            None => format!("(no JSON)\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr),
        }
    }
}

/// Send `signal` (as kill(1) spells it: `-INT`, `-KILL`) to process `pid`.
#[track_caller]
pub fn send_signal(signal: &str, pid: u32) {
    let status = Command::new("kill").args([signal, &pid.to_string()]).status().expect("run kill(1)");
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// The processes whose parent is `pid`, from `/proc/*/stat` (Linux).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|(_, parent)| parent == pid))
        .collect()
}

/// Whether process `pid` exists and has not exited (a zombie has exited).
pub fn is_running(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// State letter and parent id of `pid`, from `/proc/PID/stat`.
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ppid ...`: the command name may hold spaces and parentheses.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// `perfops demo` in a process of its own on a free loopback port, stopped
/// by its PID (SIGKILL) when dropped.
pub struct Demo {
    child: Child,
    /// Where it listens: `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Demo {
    /// `perfops demo --listen 127.0.0.1:0` with `extra` flags (`--model
    /// async`, `--io-wait 5ms`, ...).
    pub fn start(extra: &[&str]) -> Demo {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_perfops"))
            .args(["demo", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start perfops demo");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the demo's first line");
        // Kept draining: a demo that writes to a closed pipe dies of SIGPIPE.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = line.split_whitespace().last().expect("a URL").to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        Demo { child, url }
    }

    /// The demo's `demo_requests_total` for `path` with status 200.
    pub fn answered(&self, path: &str) -> u64 {
        use std::io::Write;
        let addr = self.url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).expect("connect to the demo");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n").expect("ask /metrics");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read /metrics");
        let want = format!("demo_requests_total{{path=\"{path}\",code=\"200\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&want)).map_or(0, |n| n.trim().parse().expect("a count"))
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        // Child::kill: SIGKILL to this PID, never by name.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
