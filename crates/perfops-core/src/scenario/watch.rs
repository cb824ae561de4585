//! Decoding `watch:` (what to sample on the target while the load runs) and
//! `probe:` (Kubernetes-style liveness and readiness checks). Part of the
//! decoder in `decode.rs`; the engine does the sampling.
//!
//! ```yaml
//! watch:
//!   prometheus: [ /metrics, http://127.0.0.1:9394/metrics ]   # paths are on the target
//!   json: [ { url: /stats, fields: { gvl: $.avg_gvl_vs_running } } ]
//!   process: { port: 8080 }            # or { pid: 1234 }
//!   pool: { busy: puma_busy_threads, max: puma_max_threads }   # max may be a number
//!   promql:                            # instant queries against the team's Prometheus
//!     url: https://prometheus.example:9090
//!     every: 5s                        # default: watch.every
//!     queries: { busy: 'sum(puma_busy_threads)', restarts: 'sum(kube_pod_container_status_restarts_total)' }
//!     bearer_env: PROM_TOKEN           # or user: alice + password_env: PROM_PASSWORD
//!     ca_file: ca.pem
//!   chart: [ busy, restarts ]          # what the report charts first
//!   every: 2s
//! probe:
//!   liveness: { path: /health, period: 10s, timeout: 1s, failure_threshold: 3 }
//! ```

use std::time::Duration;

use marked_yaml::Node;

use super::decode::{Dec, join};
use super::extract::Extractor;
use super::{JsonWatch, PoolMax, PoolMetrics, ProbeSettings, Probes, ProcessWatch, PromqlAuth, PromqlWatch, Watch};

pub(super) const WATCH: &[&str] = &["prometheus", "json", "process", "pool", "promql", "chart", "every"];
pub(super) const PROMQL: &[&str] =
    &["url", "every", "timeout", "queries", "bearer_env", "user", "password_env", "ca_file"];
pub(super) const JSON_SOURCE: &[&str] = &["url", "fields"];
pub(super) const PROCESS: &[&str] = &["pid", "port"];
pub(super) const POOL: &[&str] = &["busy", "max"];
pub(super) const PROBE: &[&str] = &["liveness", "readiness"];
pub(super) const PROBE_SPEC: &[&str] =
    &["path", "period", "timeout", "failure_threshold", "success_threshold", "initial_delay"];

/// The default sampling period: often enough to see a stage of 30 s change,
/// rare enough that scraping costs the target nothing.
const EVERY: Duration = Duration::from_secs(2);

/// The names of `watch.chart` in a scenario's text, without validating the rest: for the report,
/// which reads the `scenario.yaml` of a results directory (redacted, perhaps of another version).
/// Nothing when the text is not YAML or has no such list.
pub fn chart_picks(yaml: &str) -> Vec<String> {
    let Ok(root) = marked_yaml::parse_yaml(0, yaml) else { return Vec::new() };
    let Some(chart) = root.as_mapping().and_then(|m| m.get_mapping("watch")).and_then(|w| w.get_node("chart")) else {
        return Vec::new();
    };
    match chart {
        Node::Sequence(s) => s.iter().filter_map(|n| n.as_scalar()).map(|n| n.as_str().to_string()).collect(),
        Node::Scalar(n) => vec![n.as_str().to_string()],
        Node::Mapping(_) => Vec::new(),
    }
}

impl Dec<'_> {
    pub(super) fn watch(&mut self, node: &Node) -> Option<Watch> {
        let m = self.map(node, "watch", WATCH)?;
        let mut out = Watch { every: EVERY, ..Watch::default() };
        if let Some(e) = m.get_node("every").and_then(|n| self.duration(n, "watch.every")) {
            if e < Duration::from_millis(100) {
                self.at(node.span(), "watch.every", "sampling faster than every 100ms would load the target", None);
            } else {
                out.every = e;
            }
        }
        if let Some(n) = m.get_node("prometheus") {
            let items: Vec<&Node> = match n {
                Node::Sequence(s) => s.iter().collect(),
                other => vec![other],
            };
            for (i, item) in items.into_iter().enumerate() {
                let p = format!("watch.prometheus[{i}]");
                if let Some(url) = self.url(item, &p) {
                    out.prometheus.push(url);
                }
            }
        }
        if let Some(n) = m.get_node("json") {
            for (i, item) in self.list(n, "watch.json", "endpoints").iter().enumerate() {
                let p = format!("watch.json[{i}]");
                let Some(jm) = self.map(item, &p, JSON_SOURCE) else { continue };
                let url = self.required(jm, "url", &p, "url: /stats").and_then(|u| self.url(u, &join(&p, "url")));
                let fp = join(&p, "fields");
                let mut fields = Vec::new();
                match self.required(jm, "fields", &p, "fields: { name: $.path }").map(|f| (f, f.as_mapping())) {
                    Some((_, Some(fm))) => {
                        for (k, v) in fm.iter() {
                            let Some(s) = self.scalar(v, &join(&fp, k.as_str()), "a JSONPath") else { continue };
                            match Extractor::parse(s.as_str()) {
                                Ok(x @ Extractor::JsonPath { .. }) => fields.push((k.as_str().to_string(), x)),
                                _ => self.at(
                                    s.span(),
                                    &join(&fp, k.as_str()),
                                    format!("`{}` is not a JSONPath", s.as_str()),
                                    Some("e.g. $.avg_gvl_vs_running".into()),
                                ),
                            }
                        }
                    }
                    Some((f, None)) => self.at(
                        f.span(),
                        &fp,
                        "expected a mapping of names to JSONPaths",
                        Some("fields: { gvl: $.gvl }".into()),
                    ),
                    None => {}
                }
                if let Some(url) = url {
                    out.json.push(JsonWatch { url, fields });
                }
            }
        }
        if let Some(n) = m.get_node("process") {
            out.process = self.process(n);
        }
        if let Some(n) = m.get_node("pool")
            && let Some(pm) = self.map(n, "watch.pool", POOL)
        {
            let hint = "pool: { busy: puma_busy_threads, max: puma_max_threads }";
            let busy = self.required(pm, "busy", "watch.pool", hint).and_then(|b| self.string(b, "watch.pool.busy"));
            let max = self.required(pm, "max", "watch.pool", hint).and_then(|x| {
                let s = self.scalar(x, "watch.pool.max", "a metric name or a number")?;
                Some(match s.as_str().parse::<f64>() {
                    Ok(v) if v > 0.0 => PoolMax::Value(v),
                    _ => PoolMax::Metric(s.as_str().to_string()),
                })
            });
            if let (Some(busy), Some(max)) = (busy, max) {
                out.pool = Some(PoolMetrics { busy, max });
            }
        }
        if let Some(n) = m.get_node("promql") {
            out.promql = self.promql(n);
        }
        if let Some(n) = m.get_node("chart") {
            let items: Vec<&Node> = match n {
                Node::Sequence(s) => s.iter().collect(),
                other => vec![other],
            };
            for (i, item) in items.into_iter().enumerate() {
                if let Some(name) = self.string(item, &format!("watch.chart[{i}]")) {
                    out.chart.push(name);
                }
            }
        }
        Some(out)
    }

    /// `watch.promql`: the server, the queries by name, and how to reach it.
    fn promql(&mut self, node: &Node) -> Option<PromqlWatch> {
        let p = "watch.promql";
        let m = self.map(node, p, PROMQL)?;
        let url = self.required(m, "url", p, "url: http://prometheus:9090").and_then(|n| {
            let s = self.scalar(n, "watch.promql.url", "the Prometheus server's URL")?;
            let t = s.as_str().trim().trim_end_matches('/');
            if (t.starts_with("http://") || t.starts_with("https://")) && t.len() > "https://".len() {
                Some(t.to_string())
            } else {
                self.at(
                    s.span(),
                    "watch.promql.url",
                    format!("`{t}` is not an absolute http(s) URL"),
                    Some("the server's base URL, such as http://prometheus:9090".into()),
                );
                None
            }
        });
        let every = m.get_node("every").and_then(|n| self.duration(n, "watch.promql.every"));
        if let (Some(e), Some(n)) = (every, m.get_node("every"))
            && e < Duration::from_millis(100)
        {
            self.at(n.span(), "watch.promql.every", "querying faster than every 100ms would load Prometheus", None);
        }
        let timeout = m.get_node("timeout").and_then(|n| self.duration(n, "watch.promql.timeout"));
        if let (Some(t), Some(n)) = (timeout, m.get_node("timeout"))
            && t.is_zero()
        {
            self.at(n.span(), "watch.promql.timeout", "the timeout must be longer than 0s", None);
        }
        let mut queries = Vec::new();
        let hint = "queries: { busy: 'sum(puma_busy_threads)' }";
        match self.required(m, "queries", p, hint).map(|q| (q, q.as_mapping())) {
            Some((_, Some(qm))) => {
                for (k, v) in qm.iter() {
                    let qp = join("watch.promql.queries", k.as_str());
                    let Some(q) = self.scalar(v, &qp, "a PromQL expression") else { continue };
                    let name = k.as_str();
                    if name.is_empty() || name.contains(['{', '}', '"']) {
                        self.at(
                            k.span(),
                            &qp,
                            format!("`{name}` cannot name a series"),
                            Some("a plain name: busy".into()),
                        );
                    } else if q.as_str().trim().is_empty() {
                        self.at(q.span(), &qp, "an empty query", Some(hint.into()));
                    } else {
                        queries.push((name.to_string(), q.as_str().trim().to_string()));
                    }
                }
                if qm.is_empty() {
                    self.at(node.span(), "watch.promql.queries", "no queries", Some(hint.into()));
                }
            }
            Some((q, None)) => {
                self.at(q.span(), "watch.promql.queries", "expected a mapping of names to PromQL", Some(hint.into()))
            }
            None => {}
        }
        let text = |d: &mut Self, key: &str| m.get_node(key).and_then(|n| d.string(n, &join(p, key)));
        let (bearer, user, password) = (text(self, "bearer_env"), text(self, "user"), text(self, "password_env"));
        let auth = match (bearer, user, password) {
            (None, None, None) => PromqlAuth::None,
            (Some(token_env), None, None) => PromqlAuth::Bearer { token_env },
            (None, Some(user), Some(password_env)) => PromqlAuth::Basic { user, password_env },
            _ => {
                self.at(
                    node.span(),
                    p,
                    "give either `bearer_env`, or `user` with `password_env`",
                    Some("bearer_env: PROM_TOKEN (the name of an environment variable, not the token)".into()),
                );
                PromqlAuth::None
            }
        };
        let ca_file = text(self, "ca_file");
        Some(PromqlWatch { url: url?, every, timeout, queries, auth, ca_file })
    }

    /// An absolute http(s) URL, or a path on the target.
    fn url(&mut self, node: &Node, path: &str) -> Option<String> {
        let s = self.scalar(node, path, "a URL or a path such as /metrics")?;
        let t = s.as_str().trim();
        if t.starts_with('/') || t.starts_with("http://") || t.starts_with("https://") {
            Some(t.to_string())
        } else {
            self.at(
                s.span(),
                path,
                format!("`{t}` is neither a URL nor a path"),
                Some("a path on the target (/metrics) or http://host:port/metrics".into()),
            );
            None
        }
    }

    fn process(&mut self, node: &Node) -> Option<ProcessWatch> {
        let m = self.map(node, "watch.process", PROCESS)?;
        match (m.get_node("pid"), m.get_node("port")) {
            (Some(p), None) => self.number::<u32>(p, "watch.process.pid", "a process id").map(ProcessWatch::Pid),
            (None, Some(p)) => match self.number::<u16>(p, "watch.process.port", "a TCP port") {
                Some(0) => {
                    self.at(p.span(), "watch.process.port", "port 0 is no listening port", None);
                    None
                }
                other => other.map(ProcessWatch::Port),
            },
            _ => {
                self.at(
                    node.span(),
                    "watch.process",
                    "give the process by `pid` or by `port`, one of them",
                    Some("process: { port: 8080 }".into()),
                );
                None
            }
        }
    }

    pub(super) fn probes(&mut self, node: &Node) -> Probes {
        let Some(m) = self.map(node, "probe", PROBE) else { return Probes::default() };
        Probes {
            liveness: m.get_node("liveness").and_then(|n| self.probe(n, "probe.liveness")),
            readiness: m.get_node("readiness").and_then(|n| self.probe(n, "probe.readiness")),
        }
    }

    fn probe(&mut self, node: &Node, p: &str) -> Option<ProbeSettings> {
        let m = self.map(node, p, PROBE_SPEC)?;
        let path = self.required(m, "path", p, "path: /health").and_then(|n| self.string(n, &join(p, "path")));
        if let (Some(path), Some(n)) = (&path, m.get_node("path"))
            && !path.starts_with('/')
        {
            self.at(n.span(), &join(p, "path"), format!("`{path}`: the path must start with `/`"), None);
        }
        // Kubernetes' defaults, so a probe copied from a pod spec behaves the same.
        let dur = |d: &mut Self, key: &str, default: Duration| {
            m.get_node(key).and_then(|n| d.duration(n, &join(p, key))).unwrap_or(default)
        };
        let period = dur(self, "period", Duration::from_secs(10));
        let timeout = dur(self, "timeout", Duration::from_secs(1));
        let initial_delay = dur(self, "initial_delay", Duration::ZERO);
        let count = |d: &mut Self, key: &str, default: u32| match m.get_node(key) {
            Some(n) => match d.number::<u32>(n, &join(p, key), "a whole number") {
                Some(0) => {
                    d.at(n.span(), &join(p, key), format!("`{key}` must be at least 1"), None);
                    default
                }
                v => v.unwrap_or(default),
            },
            None => default,
        };
        let failure_threshold = count(self, "failure_threshold", 3);
        let success_threshold = count(self, "success_threshold", 1);
        if period.is_zero() || timeout.is_zero() {
            self.at(node.span(), p, "`period` and `timeout` must be longer than 0s", None);
        }
        Some(ProbeSettings {
            path: path.filter(|p| p.starts_with('/'))?,
            period,
            timeout,
            failure_threshold,
            success_threshold,
            initial_delay,
        })
    }
}
