//! Issue #19: a fleet run in pods on a real single-node cluster (the kit in
//! `bench/k8s`: kube-apiserver, controller manager, scheduler, a kubelet on
//! containerd + runc, kube-proxy, CoreDNS, a pod network, a StorageClass).
//!
//! The image is the Dockerfile's content made without Docker
//! (`bench/k8s/perfops-image.sh`, with this build's binary). Then the
//! README's "Running on Kubernetes", command for command: the demo target in
//! its own pod behind a Service, `perfops k8s` for 3 agents, and exactly the
//! commands it prints (apply, wait, follow the coordinator's log, copy the
//! results out with `perfops tar`, delete everything). Checked: the agents
//! found the coordinator by its Service name and passed the clock check, the
//! start held (no late start), one results directory whose merged count is
//! the target's own request counter, one setup login in all, a verdict, and
//! `perfops report` renders it. Then faults on the cluster: an agent pod
//! deleted mid-run (named, its seconds marked, inconclusive, exit 1, the
//! Jobs end, a replacement for its index refused), a wrong token (refused,
//! the coordinator gives up with a message), an image that does not exist
//! (the printed `describe` says why the pods wait).
//!
//! The load is small and bounded (30 arrivals/s for 10 to 20 s) and goes
//! only to the demo pod, on the node's own pod network (10.244.0.0/24, in
//! network namespaces the kit makes). The node is stopped and purged by its
//! run directory when the test ends, passed or not.
//!
//! Needs root and the node kit (`bench/k8s/install.sh`; `scripts/test` builds
//! it when run as root, and sets PERFOPS_K8S_E2E=required so that a missing
//! kit fails instead of skipping).

// The cluster's story (pods, the coordinator's log, times) goes to stderr: shown on a
// failure, and with --nocapture as the record of what ran.
#![allow(clippy::print_stderr)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Workdir;
use serde_json::Value;

/// The image name of the README (the node has no registry: the image is
/// imported into its containerd under this name, and the kubelet finds it).
const IMAGE: &str = "registry.example.com/perfops:0.1.0";
const NS: &str = "perfops";

/// The README's commands before `perfops k8s` prints its own, in order.
const BEFORE: [&str; 3] = [
    "kubectl create namespace perfops",
    "kubectl -n perfops apply -f examples/k8s/demo.yaml",
    "kubectl -n perfops wait --for=condition=Ready pod/perfops-demo --timeout=2m",
];
/// The README's `perfops k8s` invocation.
const INVOCATION: &str = "perfops k8s examples/k8s/orders.yaml --agents 3 --image registry.example.com/perfops:0.1.0 \
                          --namespace perfops --agent-cpu 250m --coordinator-cpu 250m --out k8s/orders";

fn kit_bin() -> PathBuf {
    let home = std::env::var_os("PERFOPS_K8S_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/perfops-k8s"));
    home.join("bin")
}

fn kit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/k8s")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Why this machine cannot run a node, if it cannot.
fn missing() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.as_deref() != Some("0") {
        return Some("not root (a node needs containerd, cgroups and iptables)".into());
    }
    let bin = kit_bin();
    for b in ["kube-apiserver", "kubelet", "kube-scheduler", "kube-proxy", "coredns", "pause", "volume-provisioner"] {
        if !bin.join(b).is_file() {
            return Some(format!(
                "{} is missing: run bench/k8s/install.sh (scripts/test does, as root)",
                bin.join(b).display()
            ));
        }
    }
    for tool in ["containerd", "ctr", "runc", "iptables", "conntrack"] {
        let found =
            Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("`{tool}` is not installed: run bench/k8s/install.sh"));
        }
    }
    None
}

/// A command's outcome, printable.
struct Ran {
    line: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn ok(self) -> Ran {
        assert_eq!(self.code, Some(0), "`{}` failed:\n{}{}", self.line, self.stdout, self.stderr);
        self
    }
}

fn ran(line: &str, out: Output) -> Ran {
    Ran {
        line: line.to_string(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A single-node cluster in its own run directory (API and etcd on free
/// ports); dropping it runs `stop.sh RUN_DIR --purge`, passed or not.
struct Cluster {
    run_dir: PathBuf,
    /// PATH for the commands: the kit's kubectl and this build's perfops first.
    path: String,
}

impl Cluster {
    fn start(wd: &Workdir) -> Cluster {
        let listeners: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let ports: Vec<u16> = listeners.iter().map(|l| l.local_addr().unwrap().port()).collect();
        drop(listeners);
        let run_dir = wd.path.join("cluster");
        let perfops_dir = Path::new(env!("CARGO_BIN_EXE_perfops")).parent().unwrap().to_path_buf();
        let path =
            format!("{}:{}:{}", kit_bin().display(), perfops_dir.display(), std::env::var("PATH").unwrap_or_default());
        let cluster = Cluster { run_dir: run_dir.clone(), path };
        let t = Instant::now();
        let out = Command::new("timeout")
            .arg("180")
            .arg(kit_dir().join("start.sh"))
            .arg(&run_dir)
            .env("K8S_NODE", "1")
            .env("K8S_API_PORT", ports[0].to_string())
            .env("K8S_ETCD_PORT", ports[1].to_string())
            .env("K8S_ETCD_PEER_PORT", ports[2].to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run start.sh");
        let r = ran("K8S_NODE=1 start.sh", out);
        assert_eq!(r.code, Some(0), "start.sh failed:\n{}{}", r.stdout, r.stderr);
        eprintln!("node ready in {:.1} s", t.elapsed().as_secs_f64());
        cluster
    }

    /// `line` through `sh -c` in `dir`, with kubectl and perfops on PATH, at most `limit`.
    fn sh(&self, dir: &Path, line: &str, limit: Duration) -> Ran {
        let out = Command::new("timeout")
            .arg(limit.as_secs().to_string())
            .args(["sh", "-c", line])
            .current_dir(dir)
            .env("PATH", &self.path)
            .env("KUBECONFIG", self.run_dir.join("kubeconfig"))
            .stdin(Stdio::null())
            .output()
            .expect("run sh");
        ran(line, out)
    }

    fn kubectl(&self, dir: &Path, args: &str) -> Ran {
        self.sh(dir, &format!("kubectl -n {NS} {args}"), Duration::from_secs(120))
    }

    /// Poll `kubectl ARGS` until its output satisfies `done`, at most `limit`.
    fn until(&self, dir: &Path, args: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let r = self.kubectl(dir, args);
            if r.code == Some(0) && done(&r.stdout) {
                return r.stdout;
            }
            assert!(
                Instant::now() < deadline,
                "`kubectl {args}` not as wanted after {limit:?}:\n{}{}",
                r.stdout,
                r.stderr
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the pods said, for the failure's story.
            let dump = self.sh(
                &self.run_dir,
                &format!("kubectl -n {NS} get pods,jobs,pvc -o wide; kubectl -n {NS} logs --tail=30 --prefix -l app.kubernetes.io/name=perfops"),
                Duration::from_secs(30),
            );
            eprintln!("--- cluster at failure:\n{}{}", dump.stdout, dump.stderr);
        }
        let out = Command::new("timeout")
            .arg("120")
            .arg(kit_dir().join("stop.sh"))
            .arg(&self.run_dir)
            .arg("--purge")
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("stop.sh {}: {}", self.run_dir.display(), String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("stop.sh {}: {e}", self.run_dir.display()),
        }
    }
}

/// The printed commands, without comments.
fn commands(printed: &str) -> Vec<&str> {
    printed.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect()
}

/// The printed command that starts with `prefix` (and contains `has`).
fn command<'a>(printed: &'a str, prefix: &str, has: &str) -> &'a str {
    commands(printed)
        .into_iter()
        .find(|l| l.starts_with(prefix) && l.contains(has))
        .unwrap_or_else(|| panic!("no printed command `{prefix}...{has}...` in:\n{printed}"))
}

/// The demo's `demo_requests_total` for `path` (code 200), read through the
/// API server's Service proxy.
fn demo_count(c: &Cluster, dir: &Path, path: &str) -> u64 {
    let r = c
        .sh(
            dir,
            &format!("kubectl get --raw /api/v1/namespaces/{NS}/services/perfops-demo:http/proxy/metrics"),
            Duration::from_secs(30),
        )
        .ok();
    let prefix = format!("demo_requests_total{{path=\"{path}\",code=\"200\"}} ");
    r.stdout.lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok()).unwrap_or(0)
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// The one results directory copied out into `folder`.
fn results_dir(folder: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(folder)
        .expect("the results were copied out")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "one results directory: {runs:?}");
    runs[0].clone()
}

/// `perfops k8s` for a variant: the README's example under another name
/// (`--name`), with another hold, image and extra flags; what it printed.
fn variant(c: &Cluster, wd: &Path, name: &str, hold: &str, image: &str, extra: &str) -> String {
    let text = std::fs::read_to_string(wd.join("examples/k8s/orders.yaml")).unwrap();
    let text = text.replace("hold: 10s", &format!("hold: {hold}"));
    assert!(text.contains(&format!("hold: {hold}")));
    std::fs::write(wd.join(format!("{name}.yaml")), text).unwrap();
    c.sh(
        wd,
        &format!(
            "perfops k8s {name}.yaml --agents 3 --image {image} --namespace {NS} --agent-cpu 250m \
             --coordinator-cpu 250m --name {name} --out {name} {extra}"
        ),
        Duration::from_secs(30),
    )
    .ok()
    .stdout
}

#[test]
fn a_fleet_run_in_pods_end_to_end() {
    let required = std::env::var("PERFOPS_K8S_E2E").is_ok_and(|v| v == "required");
    if let Some(why) = missing() {
        assert!(!required, "PERFOPS_K8S_E2E=required, but this machine cannot run the node: {why}");
        eprintln!("SKIPPED a_fleet_run_in_pods_end_to_end: {why}");
        return;
    }
    let t0 = Instant::now();
    let wd = Workdir::new("k8s-e2e");
    let dir = wd.path.clone();
    std::fs::create_dir_all(dir.join("examples/k8s")).unwrap();
    for f in ["orders.yaml", "demo.yaml"] {
        std::fs::copy(repo().join("examples/k8s").join(f), dir.join("examples/k8s").join(f)).unwrap();
    }
    let c = Cluster::start(&wd);

    // The image: the Dockerfile's content, this build's binary.
    let t = Instant::now();
    let img = Command::new("timeout")
        .arg("120")
        .arg(kit_dir().join("perfops-image.sh"))
        .args(["--run-dir", c.run_dir.to_str().unwrap(), "--binary", env!("CARGO_BIN_EXE_perfops"), IMAGE])
        .output()
        .expect("run perfops-image.sh");
    let img = ran("perfops-image.sh", img).ok();
    assert_eq!(img.stdout.trim(), IMAGE, "{}", img.stderr);
    eprintln!("image imported in {:.1} s", t.elapsed().as_secs_f64());

    // ---- The README, command for command.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for line in BEFORE.iter().chain([&INVOCATION]) {
        assert!(readme.contains(line), "README.md should run `{line}`");
    }
    for line in BEFORE {
        c.sh(&dir, line, Duration::from_secs(150)).ok();
    }
    let k8s = c.sh(&dir, INVOCATION, Duration::from_secs(30)).ok();
    let printed = k8s.stdout;
    assert!(readme.contains(&printed), "README.md should show what `perfops k8s` prints:\n{printed}");
    let mut logs = None;
    let mut pods = String::new();
    let mut counts = (0, 0);
    for line in commands(&printed) {
        if line.starts_with("kubectl delete") {
            // Before the cleanup: the target's own counters.
            counts = (demo_count(&c, &dir, "/orders"), demo_count(&c, &dir, "/auth"));
        }
        let r = c.sh(&dir, line, Duration::from_secs(300)).ok();
        if line.contains(" logs -f ") {
            logs = Some(r.stdout.clone() + &r.stderr);
        } else if line.contains("get pods") {
            pods = r.stdout.clone();
        }
    }
    let logs = logs.expect("a logs -f command was printed");
    eprintln!("--- pods:\n{pods}--- the coordinator's log:\n{logs}");

    // The agents found the coordinator by its Service name, passed the clock check, each its shard.
    for i in 0..3 {
        let joined = format!("perfops: agent perfops-orders-agents-{i} (");
        let line = logs.lines().find(|l| l.starts_with(&joined)).unwrap_or_else(|| panic!("agent {i} joined:\n{logs}"));
        assert!(line.contains(&format!("joined as shard {i}/3: clock offset")), "{line}");
    }
    assert!(logs.contains("verdict: "), "{logs}");
    for i in 0..3 {
        assert!(pods.contains(&format!("perfops-orders-agents-{i}-")), "{pods}");
    }

    // One results directory: the merged count is the target's own, one login in all.
    let run = results_dir(&dir.join("results"));
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let total = &summary["total"];
    let (orders, logins) = counts;
    eprintln!(
        "merged: sent {} completed {} failed {}; the target counted /orders {orders}, /auth {logins}",
        total["sent"], total["completed"], total["failed"]
    );
    assert_eq!(total["sent"].as_u64(), Some(orders), "merged sent vs the target's counter");
    assert_eq!(total["completed"].as_u64(), Some(orders), "merged completed vs the target's counter");
    assert_eq!(orders, 300, "30/s for 10 s, every arrival once");
    assert_eq!(logins, 1, "setup ran once, in the coordinator");
    let verdict = summary["verdict"]["result"].as_str().unwrap_or_default();
    assert!(["passed", "failed"].contains(&verdict), "a verdict: {}", summary["verdict"]);
    // The start held across pods: nobody started late.
    let warnings = summary["warnings"].as_array().unwrap();
    assert!(warnings.iter().all(|w| !w.as_str().unwrap_or_default().contains("late")), "{warnings:?}");
    let agents = json_lines(&run.join("agents.jsonl"));
    let joined: Vec<&Value> = agents.iter().filter(|l| l["event"] == "joined").collect();
    assert_eq!(joined.len(), 3, "{agents:?}");
    for j in &joined {
        assert!(j["clock_offset_ms"].as_f64().unwrap().abs() < 20.0, "{j}");
        assert!(j["name"].as_str().unwrap().starts_with("perfops-orders-agents-"), "{j}");
    }
    assert!(agents.iter().all(|l| l["event"] != "lost" && l["event"] != "missed"), "{agents:?}");
    // `perfops report` renders what came out of the cluster.
    std::fs::remove_file(run.join("report.html")).unwrap();
    c.sh(&dir, &format!("perfops report {}", run.display()), Duration::from_secs(60)).ok();
    assert!(std::fs::metadata(run.join("report.html")).unwrap().len() > 10_000);
    // Everything deleted, the results volume too.
    let left = c
        .kubectl(
            &dir,
            "get jobs,pods,pvc,secrets,configmaps,networkpolicies -l app.kubernetes.io/instance=perfops-orders -o name",
        )
        .ok();
    assert!(left.stdout.trim().is_empty(), "left over: {}", left.stdout);
    c.until(&dir, "get pv -o name", Duration::from_secs(30), |s| s.trim().is_empty());
    eprintln!("README run done at {:.1} s", t0.elapsed().as_secs_f64());

    lost_agent(&c, &dir);
    eprintln!("lost agent done at {:.1} s", t0.elapsed().as_secs_f64());
    wrong_token(&c, &dir);
    eprintln!("wrong token done at {:.1} s", t0.elapsed().as_secs_f64());
    missing_image(&c, &dir);
    eprintln!("test took {:.1} s", t0.elapsed().as_secs_f64());
}

/// Follow `kubectl logs -f` of a Job in the background; the lines go to the returned receiver.
fn follow(c: &Cluster, dir: &Path, job: &str) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new("timeout")
        .args(["120", "kubectl", "-n", NS, "logs", "-f", &format!("job/{job}")])
        .current_dir(dir)
        .env("PATH", &c.path)
        .env("KUBECONFIG", c.run_dir.join("kubeconfig"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for pipe in [Box::new(stdout) as Box<dyn std::io::Read + Send>, Box::new(stderr)] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    (child, rx)
}

/// Wait for a line containing `what`; every line read goes into `seen`.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, seen: &mut String, what: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !seen.contains(what) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
            }
            Err(_) => panic!("no `{what}` in the coordinator's log after {limit:?}:\n{seen}"),
        }
    }
}

/// The exit code of the first container of the pod selected by `sel`.
fn exit_code(c: &Cluster, dir: &Path, sel: &str) -> String {
    c.until(
        dir,
        &format!("get pods -l {sel} -o jsonpath={{.items[0].status.containerStatuses[0].state.terminated.exitCode}}"),
        Duration::from_secs(60),
        |s| !s.trim().is_empty(),
    )
    .trim()
    .to_string()
}

/// `kubectl delete pod` of agent 1 mid-run: named, what it sent kept, its
/// seconds marked, inconclusive, the coordinator exits 1; the Jobs end; a
/// replacement for index 1 is refused.
fn lost_agent(c: &Cluster, dir: &Path) {
    let printed = variant(c, dir, "lost", "20s", IMAGE, "");
    c.sh(dir, command(&printed, "kubectl apply", ""), Duration::from_secs(60)).ok();
    c.sh(dir, command(&printed, "kubectl", "wait --for=jsonpath"), Duration::from_secs(150)).ok();
    let (mut child, rx) = follow(c, dir, "lost-coordinator");
    let mut log = String::new();
    wait_line(&rx, &mut log, "results in /results/", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(5));
    let agent1 = "app.kubernetes.io/instance=lost,batch.kubernetes.io/job-completion-index=1";
    c.kubectl(dir, &format!("delete pod -l {agent1} --wait=false")).ok();

    // A replacement for index 1, as a controller with other settings would make one:
    // the agents' pod template with JOB_COMPLETION_INDEX=1. (From the file as written:
    // `apply --dry-run` would merge in the live Job's labels, and the Job would adopt it.)
    let job = c.sh(dir, "kubectl create --dry-run=client -o json -f lost/06-agents.yaml", Duration::from_secs(30)).ok();
    let job: Value = serde_json::from_str(&job.stdout).expect("kubectl's JSON");
    let mut pod = job["spec"]["template"].clone();
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    pod["metadata"]["name"] = "lost-agents-1-replacement".into();
    pod["metadata"]["namespace"] = NS.into();
    pod["metadata"]["labels"]["app.kubernetes.io/component"] = "replacement".into();
    for e in pod["spec"]["containers"][0]["env"].as_array_mut().unwrap() {
        if e["name"] == "JOB_COMPLETION_INDEX" {
            *e = serde_json::json!({ "name": "JOB_COMPLETION_INDEX", "value": "1" });
        }
    }
    std::fs::write(dir.join("replacement.json"), pod.to_string()).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    c.sh(dir, "kubectl apply -f replacement.json", Duration::from_secs(60)).ok();
    let code = c.until(
        dir,
        "get pod lost-agents-1-replacement -o jsonpath={.status.containerStatuses[0].state.terminated.exitCode}",
        Duration::from_secs(60),
        |s| !s.trim().is_empty(),
    );
    assert_eq!(code.trim(), "3", "the replacement exits 3");
    let replaced = c.kubectl(dir, "logs lost-agents-1-replacement").ok();
    let said = replaced.stdout + &replaced.stderr;
    eprintln!("--- the replacement for index 1:\n{said}");
    assert!(said.contains("refused by the coordinator") && said.contains("shard 1 is already running"), "{said}");

    wait_line(&rx, &mut log, "verdict: ", Duration::from_secs(60));
    wait_line(&rx, &mut log, "report: ", Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("--- the coordinator's log, an agent deleted:\n{log}");
    assert!(log.contains("agent lost-agents-1 (shard 1, "), "the lost agent and its shard are named:\n{log}");
    assert!(
        log.contains("refused agent lost-agents-1-replacement") && log.contains("shard 1 is already running"),
        "the replacement is refused:\n{log}"
    );
    assert!(log.contains("verdict: INCONCLUSIVE"), "{log}");
    assert_eq!(exit_code(c, dir, "app.kubernetes.io/instance=lost,app.kubernetes.io/component=coordinator"), "1");
    // Both Jobs end: the coordinator's failed (exit 1), the agents' with index 1 failed, not retried.
    let coord = c.until(
        dir,
        "get job lost-coordinator -o jsonpath={.status.conditions[*].type}",
        Duration::from_secs(60),
        |s| s.contains("Failed") || s.contains("Complete"),
    );
    assert!(coord.contains("Failed"), "{coord}");
    let agents = c.until(
        dir,
        "get job lost-agents -o jsonpath={.status.failedIndexes}/{.status.completedIndexes}/{.status.conditions[*].type}",
        Duration::from_secs(60),
        |s| s.contains("Failed") || s.contains("Complete"),
    );
    assert!(agents.starts_with("1/0,2/"), "index 1 failed, 0 and 2 completed: {agents}");
    eprintln!("--- pods:\n{}", c.kubectl(dir, "get pods -o wide -l app.kubernetes.io/instance=lost").stdout);

    // The results: what it sent is kept, the seconds it missed are marked.
    c.sh(dir, command(&printed, "kubectl apply", "/fetch"), Duration::from_secs(60)).ok();
    c.sh(dir, command(&printed, "kubectl", "wait --for=condition=Ready"), Duration::from_secs(150)).ok();
    let copy = command(&printed, "mkdir -p results", "")
        .replace("mkdir -p results", "mkdir -p lost-results")
        .replace("-C results", "-C lost-results");
    c.sh(dir, &copy, Duration::from_secs(60)).ok();
    let run = results_dir(&dir.join("lost-results"));
    let agents = json_lines(&run.join("agents.jsonl"));
    let of = |event: &str| agents.iter().filter(|l| l["event"] == event && l["agent"] == 1).count();
    assert!(of("second") >= 3, "what it sent is kept: {agents:?}");
    assert_eq!(of("lost"), 1, "{agents:?}");
    assert!(of("missed") >= 5, "the seconds it missed are marked: {agents:?}");
    assert!(agents.iter().any(|l| l["event"] == "refused"), "the replacement's refusal is in the results");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["verdict"]["result"], "inconclusive", "{}", summary["verdict"]);
    c.sh(dir, "kubectl delete --ignore-not-found -f replacement.json", Duration::from_secs(60)).ok();
    c.sh(dir, command(&printed, "kubectl delete", ""), Duration::from_secs(120)).ok();
}

/// A wrong token in the Secret: the coordinator runs with one token, the
/// agents (applied after `perfops k8s` was run again) with another.
fn wrong_token(c: &Cluster, dir: &Path) {
    let printed = variant(c, dir, "token", "10s", IMAGE, "--join-timeout 15s");
    for f in [
        "01-secret.yaml",
        "02-tls-secret.yaml",
        "03-results-volume.yaml",
        "04-coordinator-network-policy.yaml",
        "04-coordinator-service.yaml",
        "05-coordinator.yaml",
    ] {
        c.sh(dir, &format!("kubectl apply -f token/{f}"), Duration::from_secs(60)).ok();
    }
    c.sh(dir, command(&printed, "kubectl", "wait --for=jsonpath"), Duration::from_secs(150)).ok();
    // `perfops k8s` again: a fresh token in the Secret, which the agents read.
    variant(c, dir, "token", "10s", IMAGE, "--join-timeout 15s");
    c.sh(dir, "kubectl apply -f token/01-secret.yaml -f token/06-agents.yaml", Duration::from_secs(60)).ok();
    let logs = c.sh(dir, command(&printed, "kubectl", "logs -f"), Duration::from_secs(120));
    let log = logs.stdout + &logs.stderr;
    eprintln!("--- the coordinator's log, a wrong token:\n{log}");
    assert!(log.contains("token"), "the refusals name the token:\n{log}");
    assert!(log.contains("3 of 3 agent(s) did not join within 15s"), "{log}");
    assert_eq!(exit_code(c, dir, "app.kubernetes.io/instance=token,app.kubernetes.io/component=coordinator"), "3");
    let agent = c.kubectl(dir, "logs -l app.kubernetes.io/instance=token,app.kubernetes.io/component=agent --tail=5");
    eprintln!("--- the agents:\n{}{}", agent.stdout, agent.stderr);
    assert!(agent.stdout.contains("token") || agent.stderr.contains("token"), "{}{}", agent.stdout, agent.stderr);
    c.sh(dir, command(&printed, "kubectl delete", ""), Duration::from_secs(120)).ok();
}

/// An image that does not exist (in a "registry" on a closed port of the
/// node's loopback: the pull fails at once and nothing leaves the machine):
/// the printed `describe` says why the pods wait.
fn missing_image(c: &Cluster, dir: &Path) {
    let missing = "127.0.0.1:1/perfops:0.1.0";
    let printed = variant(c, dir, "noimage", "10s", missing, "");
    c.sh(dir, command(&printed, "kubectl apply", ""), Duration::from_secs(60)).ok();
    c.until(
        dir,
        "get pods -l app.kubernetes.io/instance=noimage -o jsonpath={.items[*].status.containerStatuses[0].state.waiting.reason}",
        Duration::from_secs(90),
        |s| s.contains("ErrImagePull") || s.contains("ImagePullBackOff"),
    );
    let described = c.sh(dir, command(&printed, "kubectl", "describe pods"), Duration::from_secs(60)).ok();
    assert!(described.stdout.contains(missing), "{}", described.stdout);
    let reason = described.stdout.lines().find(|l| l.contains("Failed to pull image"));
    let reason = reason.unwrap_or_else(|| panic!("describe says why:\n{}", described.stdout));
    eprintln!("--- describe, a missing image: {}", reason.trim());
    c.sh(dir, command(&printed, "kubectl delete", ""), Duration::from_secs(120)).ok();
}
