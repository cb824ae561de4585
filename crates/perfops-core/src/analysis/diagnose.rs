//! Why a server broke, from what was watched while it did: each diagnostic
//! names a cause and cites its evidence (metric, value, time).
//!
//! The rules look at the **first failing stage** (where it broke); when no
//! stage failed they look at the whole run, for what is worth knowing anyway.
//! They come out most fundamental first, so the first one is the headline:
//!
//! ```text
//!   generator_saturated   the generator dropped arrivals or used > 90% CPU (`generator`'s rule):
//!                         not the server's fault
//!   cpu_saturated         the target used >= 90% of the CPUs it may use
//!   pool_bound            busy workers == pool size while the CPU was not saturated
//!   inference_queue       an LLM inference server's requests waited for its batch (vLLM,
//!                         llama.cpp, TGI gauges), with its KV cache's use (`inference`)
//!   listen_queue_full     accept queue at its maximum, or ListenOverflows/Drops growing
//!                         (the namespace's: said so where the target's queue was read, never deep)
//!   listen_queue_high     else: accept queue at half its maximum or more (named with its depth)
//!   probe_failed          liveness (restart at t) or readiness (out of rotation at t) tripped
//!   pod_restarted         a watched restart counter (a name with `restart` in it, such as a PromQL
//!                         query over kube_pod_container_status_restarts_total) went up at t: a
//!                         real restart, beside the simulated probe
//!   process_restarted     the process on the target's port changed at t (`process_pid`): a local
//!                         target killed and started again, its requests in flight lost
//!   memory_growth         RSS grew by half and >= 32 MiB over the run; or a watched heap or
//!                         memory metric (`heap`, `memory` in its name) grew by half
//!   gc_growth             a watched GC time or pause metric (`gc` in its name, not a count of
//!                         objects or collections) doubled from the first third of the run to the
//!                         last, to 1% (or 10 ms) or more when in seconds
//!   quantized_stalls      in a stage, a narrow mode ~40 ms / ~200 ms above the main one, or every
//!                         request ~40 / ~200 ms after its first byte, and no queue to explain it
//!                         (Nagle + delayed ACK; see `modes`)
//! ```
//!
//! Inputs are time series the caller assembled (seconds since the start of
//! the run, the clock of `series.jsonl`); names are those of `watch.jsonl`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::generator;
use super::verdict::StageVerdict;

/// Target CPU share at or above which the CPU counts as saturated.
const CPU_SATURATED: f64 = 0.90;
/// Below this, a full pool is not waiting on the CPU.
const CPU_IDLE: f64 = 0.80;
/// An accept queue this full (of its backlog) is named with its depth: connections wait there
/// before the server sees them, a wait no server-side timing shows (#11: Puma at 831 of 1024).
const QUEUE_HIGH: f64 = 0.5;

/// A stage's time window and verdict.
#[derive(Debug, Clone)]
pub struct Window {
    /// Stage name.
    pub name: String,
    /// Start, seconds.
    pub from: f64,
    /// End, seconds.
    pub to: f64,
    /// Its verdict.
    pub verdict: StageVerdict,
}

/// A probe that reached its failure threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeTrip {
    /// When, seconds.
    pub t: f64,
    /// `liveness` or `readiness`.
    pub probe: &'static str,
    /// Consecutive failures at that moment.
    pub failures: u32,
    /// The last failure's reason (`timeout`, `refused`, `HTTP 503`).
    pub error: Option<String>,
}

/// A quantized stall pattern found in a stage's service time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StallFinding {
    /// 40 or 200 (ms).
    pub quantum_ms: f64,
    /// Where unstalled requests sit, ms (every request stalled: where the first byte came).
    pub base_ms: f64,
    /// Where stalled ones sit, ms.
    pub stalled_ms: f64,
    /// Share of requests in the stalled mode.
    pub share: f64,
    /// Every request stalled, after its first byte.
    pub every: bool,
    /// Requests in flight on average (Little's law) in that stage.
    pub in_flight: f64,
    /// The stage it was found in.
    pub stage: Option<String>,
}

impl StallFinding {
    /// The finding of [`super::modes::quantized_stalls`], in `stage` if one.
    pub fn of(s: &super::modes::Stalls, stage: Option<String>) -> StallFinding {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        StallFinding {
            quantum_ms: ms(s.quantum),
            base_ms: ms(s.base.at),
            stalled_ms: ms(s.stalled.at),
            share: s.stalled.share,
            every: s.every,
            in_flight: s.in_flight,
            stage,
        }
    }

    /// One line: what stalled, how long, and the suspect.
    pub fn title(&self) -> String {
        let gap = self.stalled_ms - self.base_ms;
        if self.every {
            format!(
                "every request stalled ~{gap:.0} ms after its first byte ({:.1} ms vs {:.2} ms to the first byte): \
                 Nagle's algorithm meeting delayed ACK?",
                self.stalled_ms, self.base_ms
            )
        } else {
            format!(
                "{:.0}% of requests stalled ~{gap:.0} ms ({:.1} ms vs {:.1} ms): Nagle's algorithm meeting delayed ACK?",
                self.share * 100.0,
                self.stalled_ms,
                self.base_ms
            )
        }
    }

    /// What it means, what rules queueing out, and where to look.
    pub fn detail(&self) -> String {
        let gap = self.stalled_ms - self.base_ms;
        let shape = if self.every {
            "every response's first packet came at once and the rest one delayed-ACK timeout later".to_string()
        } else {
            format!("a separate latency mode {gap:.0} ms above the main one")
        };
        format!(
            "{shape}: the signature of a request or response written in two packets without TCP_NODELAY, the \
             second waiting for a delayed ACK (~{:.0} ms). Not a queue: with {:.1} requests in flight on average \
             (Little's law), waiting behind the others adds at most {:.1} ms. perfops writes each request in one \
             packet with TCP_NODELAY, so look at the server and its proxies",
            self.quantum_ms,
            self.in_flight,
            (self.in_flight - 1.0).max(0.0) * self.base_ms
        )
    }
}

/// How the pool's fullness is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// Metric of busy workers.
    pub busy: String,
    /// Metric of the pool size, or `None` with `size` fixed.
    pub max_metric: Option<String>,
    /// Fixed pool size.
    pub size: Option<f64>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Stages in run order.
    pub stages: &'a [Window],
    /// Watched metrics: name -> (t, value) in time order.
    pub watched: &'a BTreeMap<String, Vec<(f64, f64)>>,
    /// The pool, if known.
    pub pool: Option<&'a Pool>,
    /// Probe trips.
    pub trips: &'a [ProbeTrip],
    /// Per second: (t, arrivals dropped).
    pub dropped: &'a [(f64, u64)],
    /// Quantized stalls, if the latency distribution shows them.
    pub stalls: Option<&'a StallFinding>,
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The metric.
    pub metric: String,
    /// Its value.
    pub value: f64,
    /// When, seconds since the start.
    pub t: f64,
}

/// A cause, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Machine-readable kind (see the module docs). A string, not an enum:
    /// summaries are read back by later versions, which may know kinds this
    /// one does not.
    pub kind: String,
    /// One line.
    pub title: String,
    /// What it means and what to do.
    pub detail: String,
    /// The stage it was seen in, if one.
    pub stage: Option<String>,
    /// What shows it.
    pub evidence: Vec<Evidence>,
}

/// The diagnostics, most fundamental first.
pub fn diagnose(i: &Inputs<'_>) -> Vec<Diagnostic> {
    let broke = i.stages.iter().find(|s| s.verdict == StageVerdict::Fails);
    let (from, to) = match broke {
        Some(s) => (s.from, s.to),
        None => (f64::NEG_INFINITY, f64::INFINITY),
    };
    let stage = broke.map(|s| s.name.clone());
    let within = |name: &str| -> Vec<(f64, f64)> {
        i.watched
            .get(name)
            .map_or_else(Vec::new, |v| v.iter().copied().filter(|(t, _)| *t >= from && *t <= to).collect())
    };
    let peak = |name: &str| within(name).into_iter().max_by(|a, b| a.1.total_cmp(&b.1));
    let mean = |name: &str| {
        let v = within(name);
        (!v.is_empty()).then(|| v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64)
    };
    let ev = |metric: &str, (t, value): (f64, f64)| Evidence { metric: metric.to_string(), value, t };
    // A pre-forking server's CPU is its whole process tree's (#11): say so, so that a reader
    // does not take "CPU at 3%" for the master's alone or wonder which process it was.
    let processes = match peak("process_workers") {
        Some((_, w)) if w >= 1.0 => format!(" (over its {:.0} processes)", w + 1.0),
        _ => String::new(),
    };
    let mut out = Vec::new();

    // The generator first: if it was the limit, nothing else is the server's fault.
    // Arrivals dropped while a stage failed were dropped because the server
    // was slow (in flight piled up to the cap): the server's doing, not ours.
    let dropped: u64 = match broke {
        Some(_) => 0,
        None => i.dropped.iter().map(|x| x.1).sum(),
    };
    let gen_peak = peak("generator_cpu_share");
    let gen_cpu = gen_peak.filter(|p| generator::saturated(p.1));
    // Scripts that took most of a saturated generator are named: the figures judge them.
    // The two are read by different clocks over different windows: their peaks are compared.
    let scripts = peak(generator::SCRIPT_CPU_SHARE).filter(|p| generator::scripts_bound(gen_peak.map(|g| g.1), p.1));
    if let Some(p) = scripts {
        let mut evidence = vec![ev(generator::SCRIPT_CPU_SHARE, p)];
        evidence.extend(gen_cpu.map(|g| ev("generator_cpu_share", g)));
        out.push(Diagnostic {
            kind: "generator_saturated".into(),
            title: format!("the load generator was the limit: its scripts took {:.0}% of its CPU", p.1 * 100.0),
            detail: "the scenario's scripts (hooks and script steps) used most of the generator's CPU: these figures \
                     judge the scripts, not the server; make the hooks cheaper, call them on fewer steps, or shard \
                     the load over more generators"
                .into(),
            stage: stage.clone(),
            evidence,
        });
    } else if dropped > 0 || gen_cpu.is_some() {
        let mut evidence = Vec::new();
        if let Some(first) = i.dropped.iter().find(|(_, n)| *n > 0 && dropped > 0) {
            evidence.push(Evidence { metric: "dropped".into(), value: dropped as f64, t: first.0 });
        }
        if let Some(p) = gen_cpu {
            evidence.push(ev("generator_cpu_share", p));
        }
        out.push(Diagnostic {
            kind: "generator_saturated".into(),
            title: "the load generator was the limit".into(),
            detail: "arrivals were dropped at max_in_flight or the generator ran out of CPU: these figures do not \
                     judge the server; raise max_in_flight, give perfops more cores, or shard the load"
                .into(),
            stage: stage.clone(),
            evidence,
        });
    }

    let cpu_peak = peak("process_cpu_share");
    let cpu_saturated = cpu_peak.filter(|p| p.1 >= CPU_SATURATED);
    if let Some(p) = cpu_saturated {
        out.push(Diagnostic {
            kind: "cpu_saturated".into(),
            title: format!("CPU saturated: the target used {:.0}% of the CPU it may use{processes}", p.1 * 100.0),
            detail: "requests wait for the CPU: more instances or cores add capacity; a larger pool would not".into(),
            stage: stage.clone(),
            evidence: vec![ev("process_cpu_share", p)],
        });
    }

    if let Some(pool) = i.pool {
        let busy = within(&pool.busy);
        let size_at = |t: f64| -> Option<f64> {
            match (&pool.max_metric, pool.size) {
                (_, Some(s)) => Some(s),
                (Some(m), None) => {
                    i.watched.get(m)?.iter().min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs())).map(|x| x.1)
                }
                (None, None) => None,
            }
        };
        let full: Vec<(f64, f64, f64)> =
            busy.iter().filter_map(|&(t, b)| size_at(t).filter(|s| *s > 0.0 && b >= *s).map(|s| (t, b, s))).collect();
        // A pool never has more busy than it has: a "size" that the busy count
        // passes bounds nothing (the async demo's runtime threads, 10 requests
        // in flight on 5 of them), and "pool-bound" would blame a pool that
        // is not there.
        let bounded = !full.iter().any(|&(_, b, s)| b > s + 0.5);
        if let Some(&(t, b, s)) = full.first()
            && cpu_saturated.is_none()
            && bounded
        {
            let cpu = mean("process_cpu_share");
            let mut evidence = vec![Evidence { metric: pool.busy.clone(), value: b, t }];
            if let Some(m) = &pool.max_metric {
                evidence.push(Evidence { metric: m.clone(), value: s, t });
            }
            let cpu_text = match cpu {
                Some(c) if c < CPU_IDLE => {
                    evidence.push(Evidence { metric: "process_cpu_share".into(), value: c, t });
                    format!(" with the CPU at {:.0}%{processes}", c * 100.0)
                }
                Some(_) => String::new(),
                None => " (CPU not watched)".into(),
            };
            out.push(Diagnostic {
                kind: "pool_bound".into(),
                title: format!("pool-bound: {b:.0} of {s:.0} workers busy{cpu_text}"),
                detail: format!(
                    "every worker was busy in {} of {} samples while the CPU had room: requests queue for a \
                     worker, not for the CPU; more threads (or an async server) raise capacity, more CPU would not",
                    full.len(),
                    busy.len()
                ),
                stage: stage.clone(),
                evidence,
            });
        }
    }

    out.extend(super::inference::queueing(i.watched, (from, to), stage.clone()));

    let queue = within("listen_queue");
    let with_max: Vec<(f64, f64, f64)> = queue
        .iter()
        .filter_map(|&(t, q)| {
            let max = i.watched.get("listen_queue_max")?.iter().find(|x| (x.0 - t).abs() < 1e-6)?.1;
            (max > 0.0).then_some((t, q, max))
        })
        .collect();
    let full_queue = with_max.iter().copied().find(|&(_, q, max)| q >= max);
    // The deepest it got, relative to its backlog, when that is high.
    let high_queue = with_max
        .iter()
        .copied()
        .filter(|&(_, q, max)| q >= 2.0 && q >= QUEUE_HIGH * max)
        .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)));
    let overflows = peak("listen_overflows_per_s").filter(|p| p.1 > 0.0);
    let drops = peak("listen_drops_per_s").filter(|p| p.1 > 0.0);
    if full_queue.is_some() || overflows.is_some() || drops.is_some() {
        let mut evidence = Vec::new();
        let mut title = "listen queue full".to_string();
        let mut detail = "the kernel's accept queue overflowed: new connections were dropped (clients see connect \
                          timeouts and SYN retries), health checks included"
            .to_string();
        if let Some((t, q, max)) = full_queue {
            title = format!("listen queue full: {q:.0} of {max:.0} connections waiting to be accepted");
            evidence.push(Evidence { metric: "listen_queue".into(), value: q, t });
            evidence.push(Evidence { metric: "listen_queue_max".into(), value: max, t });
        } else if let (None, Some(&(t, q, max))) =
            (high_queue, with_max.iter().max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2))))
        {
            // `ListenOverflows` and `ListenDrops` count every listener of the
            // network namespace, and the target's own queue, read by its port,
            // was never deep: say whose they may be. A sweep of 8 users whose
            // queue never held 2 connections read "listen queue full" while
            // another server on the host overflowed its own.
            title =
                format!("listen overflows in the target's network namespace, its own queue at most {q:.0} of {max:.0}");
            detail = "the kernel dropped connections at a full accept queue, but its counters are every \
                      listener's of the namespace, and the target's own queue was never near its backlog when \
                      read: another server's overflows, or a burst between two reads (clients of the target \
                      would see connect timeouts and SYN retries)"
                .into();
            evidence.push(Evidence { metric: "listen_queue".into(), value: q, t });
            evidence.push(Evidence { metric: "listen_queue_max".into(), value: max, t });
        }
        if let Some(p) = overflows {
            evidence.push(ev("listen_overflows_per_s", p));
        }
        if let Some(p) = drops {
            evidence.push(ev("listen_drops_per_s", p));
        }
        out.push(Diagnostic { kind: "listen_queue_full".into(), title, detail, stage: stage.clone(), evidence });
    } else if let Some((t, q, max)) = high_queue {
        out.push(Diagnostic {
            kind: "listen_queue_high".into(),
            title: format!("listen queue high: {q:.0} of {max:.0} connections waiting to be accepted"),
            detail: format!(
                "{:.0}% of the backlog was taken: connections wait in the kernel's accept queue until the server \
                 is free to accept them, a wait the clients see but no server-side timing shows; once it is \
                 full, new connections are dropped",
                q / max * 100.0
            ),
            stage: stage.clone(),
            evidence: vec![
                Evidence { metric: "listen_queue".into(), value: q, t },
                Evidence { metric: "listen_queue_max".into(), value: max, t },
            ],
        });
    }

    // One diagnostic per probe: the first trip is the news, the others its evidence.
    for probe in ["liveness", "readiness"] {
        let trips: Vec<&ProbeTrip> = i.trips.iter().filter(|t| t.probe == probe).collect();
        let Some(first) = trips.first() else { continue };
        let consequence = match probe {
            "liveness" => "Kubernetes would have restarted the pod",
            _ => "Kubernetes would have taken the pod out of the Service",
        };
        let again = match trips.len() {
            1 => String::new(),
            n => format!(" (and {} more time{} after)", n - 1, if n == 2 { "" } else { "s" }),
        };
        out.push(Diagnostic {
            kind: "probe_failed".into(),
            title: format!(
                "{probe} probe failed {} times in a row at t={:.0}s: {consequence}{again}",
                first.failures, first.t
            ),
            detail: format!(
                "the probe is served by the same server as the load, so it waits in the same queue{}",
                first.error.as_ref().map_or(String::new(), |e| format!(" (last failure: {e})"))
            ),
            stage: i.stages.iter().find(|s| first.t >= s.from && first.t < s.to).map(|s| s.name.clone()),
            evidence: trips
                .iter()
                .map(|t| Evidence { metric: format!("probe_{probe}_failures"), value: f64::from(t.failures), t: t.t })
                .collect(),
        });
    }

    out.extend(restarts(i));
    out.extend(process_restart(i));

    if let Some(rss) = i.watched.get("process_rss_bytes")
        && let (Some(first), Some(last)) = (rss.first(), rss.last())
        && last.1 >= first.1 * 1.5
        && last.1 - first.1 >= 32.0 * 1024.0 * 1024.0
    {
        out.push(Diagnostic {
            kind: "memory_growth".into(),
            title: format!("memory grew from {:.0} MiB to {:.0} MiB", first.1 / 1048576.0, last.1 / 1048576.0),
            detail: "a leak, a growing cache or queued work: check whether it levels off in a longer run".into(),
            stage: None,
            evidence: vec![ev("process_rss_bytes", *first), ev("process_rss_bytes", *last)],
        });
    }

    out.extend(heap_and_gc(i));

    if let Some(s) = i.stalls {
        let t = s.stage.as_ref().and_then(|n| i.stages.iter().find(|w| &w.name == n)).map_or(0.0, |w| w.from);
        out.push(Diagnostic {
            kind: "quantized_stalls".into(),
            title: s.title(),
            detail: s.detail(),
            stage: s.stage.clone(),
            evidence: vec![
                Evidence { metric: "latency_mode_ms".into(), value: s.stalled_ms, t },
                Evidence { metric: "latency_base_ms".into(), value: s.base_ms, t },
                Evidence { metric: "in_flight".into(), value: s.in_flight, t },
            ],
        });
    }
    out
}

/// Watched series that name a restart counter: labelled ones (one per pod) rather than their sum.
fn restart_series(watched: &BTreeMap<String, Vec<(f64, f64)>>) -> Vec<(&String, &Vec<(f64, f64)>)> {
    let is_restart = |n: &str| n.split('{').next().is_some_and(|b| b.to_ascii_lowercase().contains("restart"));
    watched
        .iter()
        .filter(|(n, _)| is_restart(n))
        .filter(|(n, _)| n.contains('{') || !watched.keys().any(|k| k.starts_with(&format!("{n}{{"))))
        .collect()
}

/// "The pod restarted at t": each restart counter that went up, at the first sample above the one
/// before it (#15). A counter that goes down (a new pod's own count) is no restart of this one.
fn restarts(i: &Inputs<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (name, points) in restart_series(i.watched) {
        let ups: Vec<(f64, f64, f64)> =
            points.windows(2).filter(|w| w[1].1 > w[0].1).map(|w| (w[1].0, w[0].1, w[1].1)).collect();
        let Some(&(t, from, to)) = ups.first() else { continue };
        let again = match ups.len() {
            1 => String::new(),
            n => format!(" (and {} more time{} after)", n - 1, if n == 2 { "" } else { "s" }),
        };
        out.push(Diagnostic {
            kind: "pod_restarted".into(),
            title: format!("the pod restarted at t={t:.0}s: {name} went from {from} to {to}{again}"),
            detail: "a real restart, counted by the cluster (not the simulated probe): the container was killed \
                     (liveness probe, OOM kill, a crash) while the load ran, and the requests in flight on it \
                     failed; look at the pod's events and its last state"
                .into(),
            stage: i.stages.iter().find(|s| t >= s.from && t < s.to).map(|s| s.name.clone()),
            evidence: ups.iter().map(|&(t, _, v)| Evidence { metric: name.clone(), value: v, t }).collect(),
        });
    }
    out
}

/// "The target's process restarted at t": the process listening on its port
/// (the process watch's `process_pid`) changed. Errors from a restart read as
/// a rate the server could not hold, with no cause named (review 2's tester,
/// W2: "process 30663 exited" on stderr, no diagnosis).
fn process_restart(i: &Inputs<'_>) -> Option<Diagnostic> {
    let pids = i.watched.get("process_pid")?;
    let changes: Vec<(f64, f64, f64)> =
        pids.windows(2).filter(|w| w[1].1 != w[0].1).map(|w| (w[1].0, w[0].1, w[1].1)).collect();
    let &(t, from, to) = changes.first()?;
    // A pid that comes back is no restart: the samples of several generators
    // merged, each watching its own machine's process, alternate.
    if pids.iter().any(|&(at, pid)| at > t && pid == from) {
        return None;
    }
    let again = match changes.len() {
        1 => String::new(),
        n => format!(" (and {} more time{} after)", n - 1, if n == 2 { "" } else { "s" }),
    };
    Some(Diagnostic {
        kind: "process_restarted".into(),
        title: format!("the target's process restarted at t={t:.0}s: pid {from} is now pid {to}{again}"),
        detail: "another process took the target's port during the load (a crash and a supervisor's restart, \
                 a deploy, a reload): the requests in flight on the old one failed, and the new one started cold"
            .into(),
        stage: i.stages.iter().find(|s| t >= s.from && t < s.to).map(|s| s.name.clone()),
        evidence: changes.iter().map(|&(t, _, v)| Evidence { metric: "process_pid".into(), value: v, t }).collect(),
    })
}

/// A watched heap or memory metric that grew by half, and a GC metric that doubled (#15: a Node
/// service's heap and GC beside the concurrency). RSS is the process watch's, judged above.
fn heap_and_gc(i: &Inputs<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let base = |n: &str| n.split('{').next().unwrap_or(n).to_ascii_lowercase();
    for (name, points) in i.watched {
        let b = base(name);
        if name == "process_rss_bytes" || name.starts_with("process_") || name.starts_with("generator_") {
            continue;
        }
        if (b.contains("heap") || b.contains("memory"))
            && let (Some(&first), Some(&last)) = (points.first(), points.last())
            && first.1 > 0.0
            && last.1 >= first.1 * 1.5
            && (!b.contains("bytes") || last.1 - first.1 >= 32.0 * 1024.0 * 1024.0)
        {
            let v = |x: f64| if b.contains("bytes") { format!("{:.0} MiB", x / 1048576.0) } else { format!("{x}") };
            out.push(Diagnostic {
                kind: "memory_growth".into(),
                title: format!("{name} grew from {} to {}", v(first.1), v(last.1)),
                detail: "a leak, a growing cache or queued work: check whether it levels off in a longer run, \
                         and whether the GC works harder as it grows"
                    .into(),
                stage: None,
                evidence: vec![
                    Evidence { metric: name.clone(), value: first.1, t: first.0 },
                    Evidence { metric: name.clone(), value: last.1, t: last.0 },
                ],
            });
        }
        // GC time or pauses, not the objects a collector counts (Python's
        // `python_gc_objects_collected_total` rises with any load): those say nothing of time lost.
        let words: Vec<&str> = b.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        let counts = ["objects", "collected", "uncollectable", "collections", "count"];
        let gc = words.contains(&"gc") && !words.iter().any(|w| counts.contains(w));
        // In seconds (a share of time, or a pause), below 1% or 10 ms it costs nothing worth naming.
        let floor = if words.contains(&"seconds") { 0.01 } else { 0.0 };
        if gc && points.len() >= 6 {
            let third = points.len() / 3;
            let mean = |p: &[(f64, f64)]| p.iter().map(|x| x.1).sum::<f64>() / p.len() as f64;
            let (early, late) = (mean(&points[..third]), mean(&points[points.len() - third..]));
            if late > floor && late >= 2.0 * early {
                let peak = points.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(points[0]);
                out.push(Diagnostic {
                    kind: "gc_growth".into(),
                    title: format!("{name} grew from {early:.3} to {late:.3} (mean of the first and last third)"),
                    detail: "the garbage collector worked harder as the run went on: time in GC is time not \
                             serving; a growing heap or allocation rate is the usual cause"
                        .into(),
                    stage: None,
                    evidence: vec![Evidence { metric: name.clone(), value: peak.1, t: peak.0 }],
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
        points.to_vec()
    }

    fn stages() -> Vec<Window> {
        vec![
            Window { name: "100/s".into(), from: 0.0, to: 10.0, verdict: StageVerdict::Holds },
            Window { name: "200/s".into(), from: 10.0, to: 20.0, verdict: StageVerdict::Fails },
        ]
    }

    fn kinds(d: &[Diagnostic]) -> Vec<&str> {
        d.iter().map(|d| d.kind.as_str()).collect()
    }

    #[test]
    fn a_full_pool_with_an_idle_cpu_is_pool_bound_not_cpu() {
        let mut w = BTreeMap::new();
        w.insert("demo_workers_busy".into(), series(&[(2.0, 4.0), (12.0, 10.0), (14.0, 10.0)]));
        w.insert("demo_workers_max".into(), series(&[(2.0, 10.0), (12.0, 10.0), (14.0, 10.0)]));
        w.insert("process_cpu_share".into(), series(&[(2.0, 0.1), (12.0, 0.3), (14.0, 0.35)]));
        w.insert("listen_queue".into(), series(&[(12.0, 3.0), (14.0, 16.0)]));
        w.insert("listen_queue_max".into(), series(&[(12.0, 16.0), (14.0, 16.0)]));
        let pool = Pool { busy: "demo_workers_busy".into(), max_metric: Some("demo_workers_max".into()), size: None };
        let trips = [
            ProbeTrip { t: 15.0, probe: "liveness", failures: 3, error: Some("timeout".into()) },
            ProbeTrip { t: 18.0, probe: "liveness", failures: 3, error: Some("timeout".into()) },
        ];
        let st = stages();
        let d = diagnose(&Inputs {
            stages: &st,
            watched: &w,
            pool: Some(&pool),
            trips: &trips,
            dropped: &[],
            stalls: None,
        });
        assert_eq!(kinds(&d), vec!["pool_bound", "listen_queue_full", "probe_failed"]);
        assert!(d[0].title.contains("10 of 10 workers busy with the CPU at 32%"), "{}", d[0].title);
        assert_eq!(d[0].stage.as_deref(), Some("200/s"));
        assert_eq!(d[1].evidence[0], Evidence { metric: "listen_queue".into(), value: 16.0, t: 14.0 });
        // Two trips of one probe: one diagnostic, both as evidence.
        assert!(d[2].title.contains("t=15s") && d[2].title.contains("1 more time after"), "{:?}", d[2]);
        assert!(d[2].detail.contains("timeout") && d[2].evidence.len() == 2, "{:?}", d[2]);
    }

    #[test]
    fn a_listen_queue_is_named_with_its_depth_when_high_not_only_when_full() {
        // #11: Puma's 831 of 1024. (queue depths at t = 12, 14; backlog; want kind and title)
        type Case<'a> = (&'a [f64], f64, Option<(&'a str, &'a str)>);
        let cases: [Case; 5] = [
            // High, not full: named with its depth, the deepest sample.
            (&[400.0, 831.0], 1024.0, Some(("listen_queue_high", "listen queue high: 831 of 1024 connections"))),
            // Full: the full diagnosis, not also the high one.
            (&[831.0, 1025.0], 1024.0, Some(("listen_queue_full", "listen queue full: 1025 of 1024 connections"))),
            // A third of the backlog: not high.
            (&[300.0, 341.0], 1024.0, None),
            // Half of a tiny backlog, one connection: noise, not a queue.
            (&[0.0, 1.0], 2.0, None),
            // Half of a small one: high.
            (&[2.0, 4.0], 8.0, Some(("listen_queue_high", "listen queue high: 4 of 8"))),
        ];
        for (depths, max, want) in cases {
            let mut w = BTreeMap::new();
            w.insert("listen_queue".into(), series(&[(12.0, depths[0]), (14.0, depths[1])]));
            w.insert("listen_queue_max".into(), series(&[(12.0, max), (14.0, max)]));
            let st = stages();
            let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
            let got = d.first().map(|d| (d.kind.as_str(), d.title.as_str()));
            match (got, want) {
                (Some((kind, title)), Some((k, t))) => {
                    assert_eq!(kind, k, "{depths:?}");
                    assert!(title.starts_with(t), "{depths:?}: {title}");
                    assert_eq!(d.len(), 1, "{d:?}");
                }
                (None, None) => {}
                _ => panic!("{depths:?} of {max}: {d:?}"),
            }
        }
    }

    /// The namespace's overflow counters are every listener's: where the
    /// target's own queue was read and never deep, the diagnosis says so
    /// instead of calling the target's queue full.
    #[test]
    fn listen_overflows_say_whose_they_may_be() {
        // (the target's queue depths at t = 12, 14 of a backlog of 16, or not read; the title)
        let cases: [(Option<[f64; 2]>, &str); 4] = [
            // Its queue never held 2 connections: maybe another listener's.
            (Some([0.0, 1.0]), "listen overflows in the target's network namespace, its own queue at most 1 of 16"),
            // Its queue at 12 of 16 when the counters grew: its own.
            (Some([3.0, 12.0]), "listen queue full"),
            // Full: its own, named with its depth.
            (Some([3.0, 17.0]), "listen queue full: 17 of 16 connections waiting to be accepted"),
            // Not read (no port, or no sock_diag): the counters are all there is.
            (None, "listen queue full"),
        ];
        for (depths, want) in cases {
            let mut w = BTreeMap::new();
            w.insert("listen_overflows_per_s".into(), series(&[(12.0, 0.0), (14.0, 211.0)]));
            if let Some(q) = depths {
                w.insert("listen_queue".into(), series(&[(12.0, q[0]), (14.0, q[1])]));
                w.insert("listen_queue_max".into(), series(&[(12.0, 16.0), (14.0, 16.0)]));
            }
            let st = stages();
            let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
            assert_eq!(kinds(&d), vec!["listen_queue_full"], "{depths:?}: {d:?}");
            assert_eq!(d[0].title, want, "{d:?}");
            assert!(d[0].detail.contains("another server's") == want.contains("namespace"), "{d:?}");
            let ev = d[0].evidence.iter().find(|e| e.metric == "listen_overflows_per_s");
            assert_eq!(ev.map(|e| e.value), Some(211.0), "{d:?}");
        }
    }

    /// The process on the target's port changed (review 2's tester, W2).
    #[test]
    fn a_new_process_on_the_port_is_a_restart() {
        let w: BTreeMap<String, Vec<(f64, f64)>> =
            [("process_pid".to_string(), vec![(1.0, 30663.0), (3.0, 30663.0), (5.0, 8125.0), (7.0, 8125.0)])].into();
        let st = stages();
        let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
        assert_eq!(kinds(&d), ["process_restarted"], "{d:?}");
        assert_eq!(d[0].title, "the target's process restarted at t=5s: pid 30663 is now pid 8125");
        // The same process all along, or two generators' processes merged: nothing.
        for pids in [vec![(1.0, 7.0), (3.0, 7.0)], vec![(1.0, 7.0), (1.0, 9.0), (3.0, 7.0), (3.0, 9.0)]] {
            let w: BTreeMap<String, Vec<(f64, f64)>> = [("process_pid".to_string(), pids)].into();
            let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
            assert!(d.is_empty(), "{d:?}");
        }
    }

    #[test]
    fn a_watched_restart_counter_that_went_up_is_a_pod_restart() {
        // #15: (series, points, want the title to start with, or no diagnostic)
        type Case<'a> = (&'a [(&'a str, &'a [(f64, f64)])], Option<&'a str>);
        let cases: [Case; 5] = [
            // A PromQL sum that steps from 0 to 1 at t=12: restarted at 12, in the failing stage.
            (
                &[("restarts", &[(2.0, 0.0), (10.0, 0.0), (12.0, 1.0), (14.0, 1.0)])],
                Some("the pod restarted at t=12s: restarts went from 0 to 1"),
            ),
            // Already restarted 3 times before the run, no change: nothing.
            (&[("restarts", &[(2.0, 3.0), (12.0, 3.0)])], None),
            // Per pod: the labelled series is named, not the sum the store adds.
            (
                &[("restarts", &[(2.0, 0.0), (6.0, 1.0)]), (r#"restarts{pod="a"}"#, &[(2.0, 0.0), (6.0, 1.0)])],
                Some(r#"the pod restarted at t=6s: restarts{pod="a"} went from 0 to 1"#),
            ),
            // The cluster's own counter by its name.
            (
                &[("kube_pod_container_status_restarts_total", &[(0.0, 5.0), (3.0, 7.0)])],
                Some("the pod restarted at t=3s"),
            ),
            // A counter that went down (a new pod) is not a restart of this one; other names are not restarts.
            (&[("restarts", &[(0.0, 2.0), (3.0, 0.0)]), ("busy", &[(0.0, 1.0), (3.0, 9.0)])], None),
        ];
        for (input, want) in cases {
            let w: BTreeMap<String, Vec<(f64, f64)>> = input.iter().map(|(n, p)| (n.to_string(), p.to_vec())).collect();
            let st = stages();
            let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
            match want {
                Some(t) => {
                    assert_eq!(kinds(&d), ["pod_restarted"], "{input:?}");
                    assert!(d[0].title.starts_with(t), "{}", d[0].title);
                }
                None => assert!(d.is_empty(), "{input:?}: {d:?}"),
            }
        }
        let w: BTreeMap<String, Vec<(f64, f64)>> =
            [("restarts".to_string(), vec![(2.0, 0.0), (12.0, 1.0)])].into_iter().collect();
        let st = stages();
        let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
        assert_eq!(d[0].stage.as_deref(), Some("200/s"), "the stage it happened in");
        assert_eq!(d[0].evidence, [Evidence { metric: "restarts".into(), value: 1.0, t: 12.0 }]);
    }

    #[test]
    fn watched_heap_and_gc_growth() {
        let mib = 1048576.0;
        // (name, values at t = 0, 1, 2, ..., want kind)
        let cases: [(&str, &[f64], Option<&str>); 8] = [
            // A Node heap in bytes doubling by 64 MiB: memory growth.
            ("nodejs_heap_size_used_bytes", &[64.0 * mib, 80.0 * mib, 128.0 * mib], Some("memory_growth")),
            // Half again, but only 3 MiB: noise.
            ("heap_bytes", &[6.0 * mib, 9.0 * mib], None),
            // A query named without a unit: growth by half is enough.
            ("heap", &[100.0, 120.0, 160.0], Some("memory_growth")),
            // GC time per second doubling from the first third to the last.
            ("gc_seconds", &[0.01, 0.01, 0.02, 0.03, 0.04, 0.05], Some("gc_growth")),
            // GC steady: nothing.
            ("gc_seconds", &[0.01, 0.02, 0.01, 0.02, 0.01, 0.02], None),
            // `gc` inside a word is not GC.
            ("bgcolor_count", &[1.0, 1.0, 1.0, 5.0, 5.0, 5.0], None),
            // Objects collected rise with any load: not time lost to GC.
            (r#"python_gc_objects_collected_total{generation="0"}"#, &[1.0, 1.0, 9.0, 9.0, 9.0, 9.0], None),
            // Pauses tripled, but at 3 ms: nothing worth naming.
            (r#"go_gc_duration_seconds{quantile="0.5"}"#, &[0.001, 0.001, 0.002, 0.003, 0.003, 0.003], None),
        ];
        for (name, values, want) in cases {
            let points: Vec<(f64, f64)> = values.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect();
            let w: BTreeMap<String, Vec<(f64, f64)>> = [(name.to_string(), points)].into_iter().collect();
            let st = stages();
            let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
            assert_eq!(d.first().map(|d| d.kind.as_str()), want, "{name} {values:?}: {d:?}");
        }
    }

    #[test]
    fn a_size_that_the_busy_count_passes_is_no_pool() {
        // The async demo: 10 requests in flight on its 5 runtime threads. Its
        // "workers_max" bounds nothing: no "pool-bound: 10 of 5 workers busy".
        let mut w = BTreeMap::new();
        w.insert("demo_workers_busy".into(), series(&[(12.0, 5.0), (13.0, 10.0)]));
        w.insert("demo_workers_max".into(), series(&[(12.0, 5.0), (13.0, 5.0)]));
        w.insert("process_cpu_share".into(), series(&[(12.0, 0.14), (13.0, 0.14)]));
        let pool = Pool { busy: "demo_workers_busy".into(), max_metric: Some("demo_workers_max".into()), size: None };
        let st = stages();
        let d =
            diagnose(&Inputs { stages: &st, watched: &w, pool: Some(&pool), trips: &[], dropped: &[], stalls: None });
        assert!(!kinds(&d).contains(&"pool_bound"), "{d:?}");
    }

    #[test]
    fn a_saturated_cpu_explains_a_full_pool() {
        let mut w = BTreeMap::new();
        w.insert("busy".into(), series(&[(12.0, 8.0)]));
        w.insert("process_cpu_share".into(), series(&[(11.0, 0.5), (12.0, 0.97)]));
        let pool = Pool { busy: "busy".into(), max_metric: None, size: Some(8.0) };
        let st = stages();
        let d =
            diagnose(&Inputs { stages: &st, watched: &w, pool: Some(&pool), trips: &[], dropped: &[], stalls: None });
        assert_eq!(kinds(&d), vec!["cpu_saturated"]);
        assert_eq!(d[0].evidence[0].t, 12.0);
        assert!(d[0].title.ends_with("may use"), "one process: nothing to add: {}", d[0].title);
    }

    #[test]
    fn a_pre_forking_servers_cpu_is_said_to_be_its_process_trees() {
        // #11: a master and 4 workers, the pool full, the CPU (of the tree) at 45%.
        let mut w = BTreeMap::new();
        w.insert("puma_busy_threads".into(), series(&[(12.0, 20.0)]));
        w.insert("process_cpu_share".into(), series(&[(12.0, 0.45)]));
        w.insert("process_workers".into(), series(&[(12.0, 4.0)]));
        let pool = Pool { busy: "puma_busy_threads".into(), max_metric: None, size: Some(20.0) };
        let st = stages();
        let d =
            diagnose(&Inputs { stages: &st, watched: &w, pool: Some(&pool), trips: &[], dropped: &[], stalls: None });
        assert_eq!(d[0].title, "pool-bound: 20 of 20 workers busy with the CPU at 45% (over its 5 processes)");
        w.insert("process_cpu_share".into(), series(&[(12.0, 0.97)]));
        let d =
            diagnose(&Inputs { stages: &st, watched: &w, pool: Some(&pool), trips: &[], dropped: &[], stalls: None });
        assert!(d[0].title.ends_with("may use (over its 5 processes)"), "{}", d[0].title);
    }

    #[test]
    fn the_generator_is_blamed_before_the_server() {
        let mut w = BTreeMap::new();
        w.insert("generator_cpu_share".into(), series(&[(12.0, 0.99)]));
        w.insert("process_cpu_share".into(), series(&[(12.0, 0.95)]));
        let st = stages();
        let dropped = [(11.0, 0), (12.0, 40)];
        // No stage failed (the dropping one was inconclusive): the run as a whole is looked at.
        let st: Vec<Window> = st.into_iter().map(|w| Window { verdict: StageVerdict::Inconclusive, ..w }).collect();
        let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &dropped, stalls: None });
        assert_eq!(kinds(&d), vec!["generator_saturated", "cpu_saturated"]);
        assert_eq!(d[0].evidence[0], Evidence { metric: "dropped".into(), value: 40.0, t: 12.0 });
    }

    /// Scripts that took most of a saturated generator are named as its limit, before the server.
    #[test]
    fn scripts_that_took_the_generator_are_named() {
        let mut w = BTreeMap::new();
        w.insert("generator_cpu_share".into(), series(&[(12.0, 0.97)]));
        w.insert(generator::SCRIPT_CPU_SHARE.into(), series(&[(12.0, 0.81)]));
        w.insert("process_cpu_share".into(), series(&[(12.0, 0.95)]));
        let st = stages();
        let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
        assert_eq!(kinds(&d), vec!["generator_saturated", "cpu_saturated"]);
        assert_eq!(d[0].title, "the load generator was the limit: its scripts took 81% of its CPU");
        assert_eq!(d[0].evidence[0].metric, "script_cpu_share");
        // Scripts a small part of a saturated generator: the generator is blamed, the scripts are not.
        w.insert(generator::SCRIPT_CPU_SHARE.into(), series(&[(12.0, 0.05)]));
        let d = diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: None });
        assert_eq!(d[0].title, "the load generator was the limit");
    }

    #[test]
    fn quiet_runs_have_nothing_to_say_but_what_is_always_worth_saying() {
        let mut w = BTreeMap::new();
        // Outside the failing stage: not evidence for why it broke.
        w.insert("process_cpu_share".into(), series(&[(5.0, 0.99), (12.0, 0.2)]));
        w.insert("process_rss_bytes".into(), series(&[(0.0, 40e6), (19.0, 120e6)]));
        let st = stages();
        let stall = StallFinding {
            quantum_ms: 200.0,
            base_ms: 0.3,
            stalled_ms: 200.5,
            share: 0.33,
            every: false,
            in_flight: 1.5,
            stage: Some("200/s".into()),
        };
        let d =
            diagnose(&Inputs { stages: &st, watched: &w, pool: None, trips: &[], dropped: &[], stalls: Some(&stall) });
        assert_eq!(kinds(&d), vec!["memory_growth", "quantized_stalls"]);
        assert!(d[1].title.starts_with("33% of requests stalled ~200 ms"), "{}", d[1].title);
        assert!(d[1].detail.contains("with 1.5 requests in flight on average"), "{}", d[1].detail);
        assert_eq!((d[1].stage.as_deref(), d[1].evidence[0].t), (Some("200/s"), 10.0));
        // #11: every request, after its first byte.
        let every = StallFinding { every: true, share: 1.0, base_ms: 0.12, stalled_ms: 44.1, ..stall };
        assert_eq!(
            every.title(),
            "every request stalled ~44 ms after its first byte (44.1 ms vs 0.12 ms to the first byte): \
             Nagle's algorithm meeting delayed ACK?"
        );
        let none = diagnose(&Inputs {
            stages: &st,
            watched: &BTreeMap::new(),
            pool: None,
            trips: &[],
            dropped: &[],
            stalls: None,
        });
        assert!(none.is_empty());
    }
}
