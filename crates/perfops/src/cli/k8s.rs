//! The flags of `perfops k8s`.

use std::path::PathBuf;

use clap::Args;

/// Flags of `perfops k8s`.
#[derive(Debug, Args)]
pub(crate) struct K8sFlags {
    /// The scenario file; it and its CSV and .proto files go into the Secret.
    scenario: PathBuf,
    /// How many agents: one pod each, each running 1/N of the load.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    agents: u32,
    /// The container image, with `perfops` on its PATH (see the Dockerfile).
    #[arg(long)]
    image: String,
    /// The namespace of every object (it must exist).
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The folder to write the manifests into (created; files of ours are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Prefix of the objects' names [default: perfops-<scenario name>].
    #[arg(long)]
    name: Option<String>,
    /// CPU of each agent, request and limit.
    #[arg(long, default_value = "1")]
    agent_cpu: String,
    /// Memory of each agent, request and limit.
    #[arg(long, default_value = "512Mi")]
    agent_memory: String,
    /// CPU of the coordinator, request and limit.
    #[arg(long, default_value = "1")]
    coordinator_cpu: String,
    /// Memory of the coordinator, request and limit.
    #[arg(long, default_value = "512Mi")]
    coordinator_memory: String,
    /// Size of the results volume (the cluster's default StorageClass).
    #[arg(long, default_value = "1Gi")]
    results_size: String,
    /// How long the coordinator waits for every agent before it gives up
    /// (exit 3, naming the missing shards) [default: the coordinator's, 120s].
    #[arg(long, value_name = "DURATION")]
    join_timeout: Option<String>,
    /// The coordinator serves its live page (`--live`) on its pod's
    /// loopback; the printed `kubectl port-forward` command opens it.
    #[arg(long)]
    live: bool,
}

impl From<K8sFlags> for perfops_run::k8s::K8sArgs {
    fn from(f: K8sFlags) -> Self {
        Self {
            scenario: f.scenario,
            agents: f.agents,
            image: f.image,
            namespace: f.namespace,
            out: f.out,
            name: f.name,
            agent_cpu: f.agent_cpu,
            agent_memory: f.agent_memory,
            coordinator_cpu: f.coordinator_cpu,
            coordinator_memory: f.coordinator_memory,
            results_size: f.results_size,
            join_timeout: f.join_timeout,
            live: f.live,
        }
    }
}
