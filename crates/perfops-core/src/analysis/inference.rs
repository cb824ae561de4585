//! Why an LLM inference server broke, from its own gauges: requests queueing behind a full
//! batch, and how full its KV cache was. Part of the diagnosis ([`super::diagnose`]), which
//! calls [`queueing`] with the failing stage's window.
//!
//! An inference server's capacity is not its CPU's nor a thread pool's: it runs a batch of
//! requests (vLLM's scheduler, llama.cpp's slots, TGI's batcher) and queues the rest; a request
//! that waits has no token yet, so the time to first token grows while the CPU (or GPU) graph
//! says nothing new. Each server counts the two in its `/metrics`; the names are the servers' own,
//! read from their sources:
//!
//! ```text
//!   server      waiting                       running                       KV cache used (0..1)
//!   vLLM        vllm:num_requests_waiting     vllm:num_requests_running     vllm:kv_cache_usage_perc
//!                                                                           (vllm:gpu_cache_usage_perc
//!                                                                            before 0.9, deprecated)
//!   llama.cpp   llamacpp:requests_deferred    llamacpp:requests_processing  llamacpp:kv_cache_usage_ratio
//!                                                                           (older builds only)
//!   TGI         tgi_queue_size                tgi_batch_current_size        -
//! ```
//!
//! - vLLM: `vllm/v1/metrics/loggers.py` (`PrometheusStatLogger`: the gauges, labelled
//!   `model_name` and `engine`, one series per engine; "Deprecated in 0.9 - Renamed as
//!   vllm:kv_cache_usage_perc").
//! - llama.cpp: `tools/server/server-task.cpp` (`server_task_result_metrics::to_metrics`: the
//!   gauges `requests_processing` (busy slots) and `requests_deferred` (tasks waiting for a
//!   slot) under the prefix `llamacpp:`, unlabelled; served with `--metrics`). The
//!   `kv_cache_usage_ratio` gauge of older builds is gone from the current source.
//! - TGI: `router/src/server.rs` (`describe_gauge!("tgi_queue_size", ...)`,
//!   `"tgi_batch_current_size"`) and the queue that sets it.
//!
//! Several series of one name (vLLM's engines, a PromQL query per pod) are added at each
//! instant for the counts, and the fullest is taken for the cache. Names are those of
//! `watch.jsonl`: a scraped series as PromQL writes it, `name{label="value"}`.

use std::collections::BTreeMap;

use super::diagnose::{Diagnostic, Evidence};

/// One server's names.
struct Server {
    /// What the server is called in a sentence.
    name: &'static str,
    /// Requests waiting for a place in the batch.
    waiting: &'static str,
    /// Requests in the batch.
    running: &'static str,
    /// KV-cache use, 0..1, newest name first.
    kv_cache: &'static [&'static str],
}

/// The servers known, by their names in `/metrics`.
const SERVERS: [Server; 3] = [
    Server {
        name: "vLLM",
        waiting: "vllm:num_requests_waiting",
        running: "vllm:num_requests_running",
        kv_cache: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    },
    Server {
        name: "llama.cpp",
        waiting: "llamacpp:requests_deferred",
        running: "llamacpp:requests_processing",
        kv_cache: &["llamacpp:kv_cache_usage_ratio"],
    },
    Server { name: "TGI", waiting: "tgi_queue_size", running: "tgi_batch_current_size", kv_cache: &[] },
];

/// A KV cache this full (of 1) is named as the limit: new sequences wait for room, and vLLM
/// preempts running ones.
const KV_FULL: f64 = 0.9;

/// The samples of every series of metric `name` (`name` itself and `name{...}`) within
/// `[from, to]`, as one series: at each instant, the sum (`add`) or the largest of the series'
/// values; with the first series' full name for the evidence (its base name when several).
fn combined(
    watched: &BTreeMap<String, Vec<(f64, f64)>>,
    name: &str,
    (from, to): (f64, f64),
    add: bool,
) -> Option<(String, Vec<(f64, f64)>)> {
    let labelled = format!("{name}{{");
    let series: Vec<(&String, &Vec<(f64, f64)>)> =
        watched.iter().filter(|(k, _)| k.as_str() == name || k.starts_with(&labelled)).collect();
    let cited = match series.as_slice() {
        [] => return None,
        [(one, _)] => (*one).clone(),
        _ => name.to_string(),
    };
    // Instants in ms: samples of one scrape share theirs exactly.
    let mut at: BTreeMap<i64, f64> = BTreeMap::new();
    for (_, points) in series {
        for &(t, v) in points.iter().filter(|(t, v)| *t >= from && *t <= to && v.is_finite()) {
            let slot = at.entry((t * 1000.0).round() as i64).or_insert(if add { 0.0 } else { f64::NEG_INFINITY });
            *slot = if add { *slot + v } else { slot.max(v) };
        }
    }
    let points: Vec<(f64, f64)> = at.into_iter().map(|(ms, v)| (ms as f64 / 1000.0, v)).collect();
    (!points.is_empty()).then_some((cited, points))
}

/// The value of `points` nearest to `t`.
fn near(points: &[(f64, f64)], t: f64) -> Option<(f64, f64)> {
    points.iter().copied().min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
}

/// "requests queueing: 48 waiting, 16 running, KV cache 98 % used": the first known server
/// whose requests waited within `window` (seconds), at the moment most waited, with its batch
/// and KV cache then; or whose KV cache was full there. `None` when no known gauge says so.
pub fn queueing(
    watched: &BTreeMap<String, Vec<(f64, f64)>>,
    window: (f64, f64),
    stage: Option<String>,
) -> Option<Diagnostic> {
    for s in &SERVERS {
        let waiting = combined(watched, s.waiting, window, true);
        let running = combined(watched, s.running, window, true);
        let kv = s.kv_cache.iter().find_map(|n| combined(watched, n, window, false));
        let peak = |p: &(String, Vec<(f64, f64)>)| {
            p.1.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).map(|x| (p.0.clone(), x))
        };
        let most_waiting = waiting.as_ref().and_then(peak).filter(|(_, (_, v))| *v >= 1.0);
        let kv_full = kv.as_ref().and_then(peak).filter(|(_, (_, v))| *v >= KV_FULL);
        // The moment to tell: the most waiting, else the cache at its fullest.
        let (t, mut evidence) = match (&most_waiting, &kv_full) {
            (Some((name, (t, v))), _) => (*t, vec![Evidence { metric: name.clone(), value: *v, t: *t }]),
            (None, Some(_)) => (kv_full.as_ref().map_or(0.0, |k| k.1.0), Vec::new()),
            (None, None) => continue,
        };
        let mut parts = Vec::new();
        if let Some((_, (_, w))) = &most_waiting {
            parts.push(format!("{w:.0} waiting"));
        }
        if let Some((name, points)) = &running
            && let Some((rt, r)) = near(points, t)
        {
            parts.push(format!("{r:.0} running"));
            evidence.push(Evidence { metric: name.clone(), value: r, t: rt });
        }
        let kv_then = kv.as_ref().and_then(|(name, points)| near(points, t).map(|p| (name.clone(), p)));
        if let Some((name, (kt, k))) = &kv_then {
            parts.push(format!("KV cache {:.0} % used", k * 100.0));
            evidence.push(Evidence { metric: name.clone(), value: *k, t: *kt });
        }
        let cache_bound = kv_then.as_ref().is_some_and(|(_, (_, k))| *k >= KV_FULL);
        let title = match most_waiting {
            Some(_) => format!("requests queueing: {}", parts.join(", ")),
            None => format!("KV cache full: {}", parts.join(", ")),
        };
        let detail = if cache_bound {
            format!(
                "{}'s KV cache was nearly full at t={t:.0}s: new requests wait for room in it (and vLLM preempts \
                 running ones), so the time to first token grows with the queue; more memory for the cache, \
                 shorter contexts or more replicas raise capacity",
                s.name
            )
        } else {
            format!(
                "{} ran a full batch at t={t:.0}s and queued the rest: a waiting request has no token yet, so the \
                 time to first token grows with the queue while the accelerator is busy with the batch; a larger \
                 batch (vLLM's max_num_seqs, llama.cpp's --parallel slots, TGI's max_batch_total_tokens) or more \
                 replicas raise capacity",
                s.name
            )
        };
        return Some(Diagnostic { kind: "inference_queue".into(), title, detail, stage, evidence });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::prometheus::{gauges, parse};

    /// Scrapes: each body with its instant.
    type Scrapes<'a> = Vec<(f64, &'a str)>;

    /// Watched series as the scraper stores them: each gauge of `text` under its PromQL name,
    /// one scrape per `(t, text)`.
    fn scraped(scrapes: &[(f64, &str)]) -> BTreeMap<String, Vec<(f64, f64)>> {
        let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for &(t, text) in scrapes {
            let families = parse(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
            for (key, v) in gauges(&families) {
                out.entry(key.to_string()).or_default().push((t, v));
            }
        }
        out
    }

    /// vLLM's exposition (prometheus_client's text, as `PrometheusStatLogger` registers the
    /// gauges: HELP from their documentation, labels model_name and engine).
    fn vllm(waiting: f64, running: f64, kv: f64) -> String {
        format!(
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
             # TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {running}\n\
             # HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
             # TYPE vllm:num_requests_waiting gauge\n\
             vllm:num_requests_waiting{{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {waiting}\n\
             # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
             # TYPE vllm:kv_cache_usage_perc gauge\n\
             vllm:kv_cache_usage_perc{{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {kv}\n\
             # HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n\
             # TYPE vllm:prompt_tokens_total counter\n\
             vllm:prompt_tokens_total{{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} 1026.0\n"
        )
    }

    /// llama.cpp's server (`to_metrics`: HELP, TYPE and an unlabelled sample per gauge).
    fn llamacpp(processing: f64, deferred: f64) -> String {
        format!(
            "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n\
             # TYPE llamacpp:prompt_tokens_total counter\n\
             llamacpp:prompt_tokens_total 4096\n\
             # HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s\n\
             # TYPE llamacpp:prompt_tokens_seconds gauge\n\
             llamacpp:prompt_tokens_seconds 812.5\n\
             # HELP llamacpp:requests_processing Number of requests processing\n\
             # TYPE llamacpp:requests_processing gauge\n\
             llamacpp:requests_processing {processing}\n\
             # HELP llamacpp:requests_deferred Number of requests deferred\n\
             # TYPE llamacpp:requests_deferred gauge\n\
             llamacpp:requests_deferred {deferred}\n\
             # HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call\n\
             # TYPE llamacpp:n_busy_slots_per_decode gauge\n\
             llamacpp:n_busy_slots_per_decode 3.87\n"
        )
    }

    /// TGI's router (the `metrics` crate's Prometheus exporter: TYPE lines, no HELP).
    fn tgi(queue: f64, batch: f64) -> String {
        format!(
            "# TYPE tgi_queue_size gauge\ntgi_queue_size {queue}\n\
             # TYPE tgi_batch_current_size gauge\ntgi_batch_current_size {batch}\n\
             # TYPE tgi_batch_current_max_tokens gauge\ntgi_batch_current_max_tokens 16000\n"
        )
    }

    #[test]
    fn each_server_queueing_is_named_with_its_evidence() {
        let (a, b, c) = (vllm(0.0, 12.0, 0.41), vllm(48.0, 16.0, 0.98), vllm(30.0, 16.0, 0.97));
        let (d, e) = (llamacpp(4.0, 0.0), llamacpp(4.0, 46.0));
        let (f, g) = (tgi(0.0, 8.0), tgi(21.0, 32.0));
        // (case, scrapes at t, the title, the first evidence's metric and t)
        let cases: [(&str, Scrapes<'_>, &str, &str, f64); 3] = [
            // vLLM at its worst at t=12: the cache full, so the cache is named the limit.
            (
                "vllm",
                vec![(10.0, &a), (12.0, &b), (14.0, &c)],
                "requests queueing: 48 waiting, 16 running, KV cache 98 % used",
                "vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}",
                12.0,
            ),
            // llama.cpp: every slot busy, 46 deferred; no KV gauge in its current builds.
            (
                "llama.cpp",
                vec![(10.0, &d), (12.0, &e)],
                "requests queueing: 46 waiting, 4 running",
                "llamacpp:requests_deferred",
                12.0,
            ),
            // TGI: its queue and batch.
            ("tgi", vec![(10.0, &f), (12.0, &g)], "requests queueing: 21 waiting, 32 running", "tgi_queue_size", 12.0),
        ];
        for (case, scrapes, title, metric, t) in cases {
            let w = scraped(&scrapes);
            let d = queueing(&w, (0.0, 20.0), Some("8/s".into())).unwrap_or_else(|| panic!("{case}: none"));
            assert_eq!(d.kind, "inference_queue", "{case}");
            assert_eq!(d.title, title, "{case}");
            assert_eq!((d.evidence[0].metric.as_str(), d.evidence[0].t), (metric, t), "{case}");
            assert_eq!(d.stage.as_deref(), Some("8/s"), "{case}");
        }
        // vLLM's full cache is said in the detail; llama.cpp's queue is the batch's.
        let w = scraped(&[(12.0, &b)]);
        assert!(queueing(&w, (0.0, 20.0), None).unwrap().detail.contains("KV cache was nearly full"));
        let w = scraped(&[(12.0, &e)]);
        assert!(queueing(&w, (0.0, 20.0), None).unwrap().detail.contains("--parallel"));
    }

    #[test]
    fn what_is_not_queueing_is_not_said() {
        let idle = vllm(0.0, 3.0, 0.2);
        let busy = llamacpp(4.0, 9.0);
        // (case, scrapes, window)
        let cases: [(&str, Scrapes<'_>, (f64, f64)); 3] = [
            ("nothing waited, the cache had room", vec![(5.0, &idle)], (0.0, 20.0)),
            ("the queue was outside the stage", vec![(30.0, &busy)], (0.0, 20.0)),
            ("no inference server's gauges", vec![(5.0, "# TYPE puma_backlog gauge\npuma_backlog 12\n")], (0.0, 20.0)),
        ];
        for (case, scrapes, window) in cases {
            assert_eq!(queueing(&scraped(&scrapes), window, None), None, "{case}");
        }
    }

    #[test]
    fn engines_add_up_and_the_old_cache_name_is_read() {
        // Two vLLM engines behind one API server: their waiting requests add up, the fuller
        // cache is the one that binds. The gauge under its name before 0.9.
        let text = "# TYPE vllm:num_requests_waiting gauge\n\
                    vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 7\n\
                    vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5\n\
                    # TYPE vllm:gpu_cache_usage_perc gauge\n\
                    vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n\
                    vllm:gpu_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.93\n";
        let d = queueing(&scraped(&[(3.0, text)]), (0.0, 10.0), None).unwrap();
        assert_eq!(d.title, "requests queueing: 12 waiting, KV cache 93 % used");
        assert_eq!(d.evidence[0].metric, "vllm:num_requests_waiting", "several series: the name they share");
        // A full cache with nothing waiting yet is said too.
        let full =
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.99\n";
        let d = queueing(&scraped(&[(3.0, full)]), (0.0, 10.0), None).unwrap();
        assert_eq!(d.title, "KV cache full: KV cache 99 % used");
    }
}
