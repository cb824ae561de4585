//! The Kubernetes objects of one distributed run, built from typed API
//! values (`k8s-openapi`, Kubernetes 1.34) so that a field that does not exist
//! cannot be written: a [`Spec`] (already read and checked) in, a [`Bundle`]
//! out, and the `kubectl` commands that drive it. Pure: no files, no clock, no
//! randomness (the token comes in with the spec); `mod.rs` does the I/O.
//!
//! ```text
//!   Secret <base>-secret ───────────────────┐ PERFOPS_TOKEN, ${env.X} (env);
//!   (token, ${env.X}, scenario.yaml + CSV   │ scenario.yaml and its files
//!    and .proto files)                      │ (volume, /etc/perfops)
//!   Secret <base>-tls ──── tls.crt+tls.key ──┤
//!                                           ▼
//!   NetworkPolicy ──────▶ Job <base>-coordinator ──── PVC <base>-results
//!   (ingress: agents     `perfops coordinator`          (/results)
//!    only, on :7070)       --tls-cert --tls-key              ▲
//!                                 ▲ https :7070              │ after the run
//!              Service <base>-coordinator             Pod <base>-fetch (fetch/)
//!                                 ▲                   `perfops tar /results`
//!   Indexed Job <base>-agents ────┘ --tls-ca tls.crt (the certificate only)
//!   N pods, JOB_COMPLETION_INDEX = shard,                through `kubectl exec`
//!   spread over nodes (preferred anti-affinity)
//! ```
//!
//! Choices that the objects encode, and why:
//! - Each pod runs as a non-root user (65532, distroless' `nonroot`) with no
//!   privilege escalation, no capabilities, the runtime's seccomp profile and
//!   a read-only root filesystem (an `emptyDir` at `/tmp` is the working
//!   directory): the "restricted" Pod Security Standard. None of it lowers the
//!   open-files limit; perfops raises its soft limit to the runtime's hard one.
//! - Requests equal limits (Guaranteed QoS): an agent is neither starved nor
//!   evicted before its peers, and with whole CPUs the static CPU manager can
//!   give it cores of its own. A throttled generator measures its own stalls.
//! - The coordinator's Job has `backoffLimit: 0`: a second coordinator would
//!   start another run into the same results. The agents' Job has
//!   `backoffLimitPerIndex: 0`: a failed agent is not retried (the coordinator
//!   refuses a late replacement anyway) and does not fail its peers.
//! - Anti-affinity is preferred, not required: agents spread over nodes when
//!   there are enough, and still run on a single node.
//! - The fetch pod is in `fetch/`, apart: `kubectl apply -f DIR` must not start
//!   it beside the coordinator, which holds the results volume while it runs.
//! - The scenario and its files go into the Secret, always, not a ConfigMap
//!   (#31, point 6): a scenario carries credentials in forms no list of names
//!   catches (a literal header, a `password` body field, an `api_key` query
//!   parameter, a CSV column of passwords), and one miss would give them to
//!   everyone who may read ConfigMaps (Kubernetes' `view` role may; it may
//!   not read Secrets, which a cluster can also encrypt at rest). Moving only
//!   the literals into `${env.X}` would rewrite the user's file and still
//!   depend on finding every one.
//! - The fleet channel is TLS with a certificate made for this run
//!   ([`super::tls`]): the coordinator mounts the certificate and its key,
//!   the agents the certificate alone, which they pin (`--tls-ca`). A
//!   NetworkPolicy admits the agents' pods, and nothing else, to the
//!   coordinator's pods, on its port only (#31, point 3); where the cluster's
//!   network does not enforce policies, TLS and the token still hold.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, Pod,
    PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, Secret, SecretKeySelector, SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec,
    TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Where the scenario's part of the Secret is mounted: the scenario is `CONFIG_DIR/scenario.yaml`,
/// the files it reads (CSV, `.proto`, a replay's recording) at the same paths relative to it as on
/// the user's machine.
pub(crate) const CONFIG_DIR: &str = "/etc/perfops";
/// The scenario's file name in the Secret and under [`CONFIG_DIR`].
pub(crate) const SCENARIO_KEY: &str = "scenario.yaml";
/// Where the results volume is mounted (the coordinator's `--out`).
pub(crate) const RESULTS_DIR: &str = "/results";
/// The coordinator's port.
pub(crate) const PORT: i32 = 7070;
/// The Secret's key holding the fleet token.
pub(crate) const TOKEN_KEY: &str = "token";
/// Where the TLS Secret is mounted: `tls.crt` in every pod, `tls.key` in the coordinator's only.
pub(crate) const TLS_DIR: &str = "/etc/perfops-tls";
/// The TLS Secret's keys (those of the `kubernetes.io/tls` type).
pub(crate) const TLS_CERT_KEY: &str = "tls.crt";
pub(crate) const TLS_KEY_KEY: &str = "tls.key";
/// The user and group the pods run as (distroless' `nonroot`).
pub(crate) const USER_ID: i64 = 65532;
/// How long the fetch pod waits to be read from before it ends by itself.
pub(crate) const FETCH_HOLD: &str = "1h";

/// CPU and memory for one container: both its request and its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Size {
    /// A CPU quantity (`1`, `500m`).
    pub(crate) cpu: String,
    /// A memory quantity (`512Mi`).
    pub(crate) memory: String,
}

/// Everything the objects are made from, read and checked by the caller.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// Prefix of every object's name (a DNS label, at most [`MAX_NAME`] bytes).
    pub(crate) name: String,
    /// The namespace every object goes in.
    pub(crate) namespace: String,
    /// The image with `perfops` on its PATH.
    pub(crate) image: String,
    /// How many agents (shards).
    pub(crate) agents: u32,
    /// The scenario file's text, as written.
    pub(crate) scenario: String,
    /// The files it reads besides itself (CSV feeders, `.proto` files, a
    /// replay's recording): path relative to the scenario (as
    /// `shipped::Shipped::gather` made it) and content.
    pub(crate) files: Vec<(String, String)>,
    /// The fleet token (goes into the Secret only).
    pub(crate) token: String,
    /// The coordinator's certificate and key for its Service's names
    /// ([`super::tls::service_names`] of [`Names::coordinator`]).
    pub(crate) tls: super::tls::Material,
    /// The scenario's `${env.X}` values, by name (go into the Secret, and into
    /// every container's environment from there).
    pub(crate) env: BTreeMap<String, String>,
    /// Each agent's CPU and memory.
    pub(crate) agent: Size,
    /// The coordinator's CPU and memory.
    pub(crate) coordinator: Size,
    /// The results volume's size (`1Gi`).
    pub(crate) results_size: String,
    /// The coordinator's `--join-timeout`, as the user wrote it (else its default).
    pub(crate) join_timeout: Option<String>,
    /// The coordinator serves its live page (`--live`) on the pod's
    /// loopback, which `kubectl port-forward` reaches and nothing else does:
    /// no token needed, nothing exposed by a Service.
    pub(crate) live: bool,
}

/// The longest name prefix: `<name>-coordinator` must stay a DNS label
/// (63 bytes) and `<name>-agents-<index>` a pod's host name.
pub(crate) const MAX_NAME: usize = 40;

/// The objects of one run, in the order they are applied.
#[derive(Debug, Clone)]
pub(crate) struct Bundle {
    /// The token, the scenario's `${env.X}` values, the scenario and the files it reads.
    pub(crate) secret: Secret,
    /// The coordinator's certificate and key.
    pub(crate) tls: Secret,
    /// Only the agents reach the coordinator's port.
    pub(crate) policy: NetworkPolicy,
    /// The results volume.
    pub(crate) results: PersistentVolumeClaim,
    /// The coordinator's address for the agents.
    pub(crate) service: Service,
    /// The coordinator.
    pub(crate) coordinator: Job,
    /// The agents, one pod per shard.
    pub(crate) agents: Job,
    /// Reads the results volume after the run (applied on its own).
    pub(crate) fetch: Pod,
}

/// Object names, from the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    pub(crate) secret: String,
    pub(crate) tls: String,
    pub(crate) results: String,
    /// The Service and the coordinator's Job share it.
    pub(crate) coordinator: String,
    pub(crate) agents: String,
    pub(crate) fetch: String,
}

impl Names {
    pub(crate) fn new(name: &str) -> Names {
        Names {
            secret: format!("{name}-secret"),
            tls: format!("{name}-tls"),
            results: format!("{name}-results"),
            coordinator: format!("{name}-coordinator"),
            agents: format!("{name}-agents"),
            fetch: format!("{name}-fetch"),
        }
    }
}

/// The label every object carries, whose value is the spec's name: what the
/// printed commands select by.
pub(crate) const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

/// The file each object is written to, relative to `--out`, in apply order
/// (`kubectl apply -f DIR` takes a folder's files by name).
pub(crate) const FILES: [&str; 7] = [
    "01-secret.yaml",
    "02-tls-secret.yaml",
    "03-results-volume.yaml",
    "04-coordinator-network-policy.yaml",
    "04-coordinator-service.yaml",
    "05-coordinator.yaml",
    "06-agents.yaml",
];
/// The fetch pod's folder and file, relative to `--out`.
pub(crate) const FETCH_DIR: &str = "fetch";
pub(crate) const FETCH_FILE: &str = "results-pod.yaml";

/// The agents' URL of the coordinator: its Service's cluster DNS name, one
/// of the certificate's names, over TLS.
pub(crate) fn join_url(spec: &Spec) -> String {
    format!("https://{}.{}.svc:{PORT}", Names::new(&spec.name).coordinator, spec.namespace)
}

/// The Secret key of the shipped file at relative path `path` (the `i`th):
/// keys allow neither `/` nor most punctuation (and cannot meet `token`, `env.X`
/// or `scenario.yaml`), and the index keeps two paths
/// that sanitize alike apart.
fn file_key(i: usize, path: &str) -> String {
    let flat: String =
        path.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    // Keys are at most 253 bytes; keep the end, which holds the extension.
    let tail = flat.len().saturating_sub(200);
    format!("data-{i}-{}", flat[tail..].trim_start_matches('.'))
}

/// Build every object of the run.
pub(crate) fn bundle(spec: &Spec) -> Bundle {
    let names = Names::new(&spec.name);
    Bundle {
        secret: secret(spec, &names),
        tls: tls_secret(spec, &names),
        policy: policy(spec, &names),
        results: results(spec, &names),
        service: service(spec, &names),
        coordinator: coordinator(spec, &names),
        agents: agents(spec, &names),
        fetch: fetch(spec, &names),
    }
}

fn labels(spec: &Spec, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "perfops".to_string()),
        (INSTANCE_LABEL.to_string(), spec.name.clone()),
        (COMPONENT_LABEL.to_string(), component.to_string()),
    ])
}

fn meta(spec: &Spec, name: &str, component: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(spec.namespace.clone()),
        labels: Some(labels(spec, component)),
        ..ObjectMeta::default()
    }
}

/// The Secret's key for `${env.NAME}`.
pub(crate) fn env_key(name: &str) -> String {
    format!("env.{name}")
}

fn secret(spec: &Spec, names: &Names) -> Secret {
    let mut data = BTreeMap::from([(TOKEN_KEY.to_string(), spec.token.clone())]);
    for (name, value) in &spec.env {
        data.insert(env_key(name), value.clone());
    }
    data.insert(SCENARIO_KEY.to_string(), spec.scenario.clone());
    for (i, (path, text)) in spec.files.iter().enumerate() {
        data.insert(file_key(i, path), text.clone());
    }
    Secret {
        metadata: meta(spec, &names.secret, "secret"),
        type_: Some("Opaque".into()),
        string_data: Some(data),
        ..Secret::default()
    }
}

fn tls_secret(spec: &Spec, names: &Names) -> Secret {
    let data = BTreeMap::from([
        (TLS_CERT_KEY.to_string(), spec.tls.cert_pem.clone()),
        (TLS_KEY_KEY.to_string(), spec.tls.key_pem.clone()),
    ]);
    Secret {
        metadata: meta(spec, &names.tls, "tls"),
        type_: Some("kubernetes.io/tls".into()),
        string_data: Some(data),
        ..Secret::default()
    }
}

/// Ingress to the coordinator's pods: from the agents' pods of this run, on
/// the fleet port, and nothing else (a policy that selects a pod denies what
/// its rules do not allow). Egress is left alone: the coordinator reaches the
/// target for `setup` and `watch`.
fn policy(spec: &Spec, names: &Names) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(spec, &names.coordinator, "coordinator"),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector(spec, "coordinator")),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(LabelSelector {
                        match_labels: Some(selector(spec, "agent")),
                        ..LabelSelector::default()
                    }),
                    ..NetworkPolicyPeer::default()
                }]),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(PORT)),
                    protocol: Some("TCP".into()),
                    end_port: None,
                }]),
            }]),
            ..NetworkPolicySpec::default()
        }),
    }
}

fn results(spec: &Spec, names: &Names) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(spec, &names.results, "results"),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(spec.results_size.clone()))])),
                ..VolumeResourceRequirements::default()
            }),
            // No storageClassName: the cluster's default class.
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

fn service(spec: &Spec, names: &Names) -> Service {
    Service {
        metadata: meta(spec, &names.coordinator, "coordinator"),
        spec: Some(ServiceSpec {
            selector: Some(selector(spec, "coordinator")),
            ports: Some(vec![ServicePort {
                name: Some("fleet".into()),
                port: PORT,
                target_port: Some(IntOrString::String("fleet".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The labels that pick a component's pods (the name label is implied).
fn selector(spec: &Spec, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (INSTANCE_LABEL.to_string(), spec.name.clone()),
        (COMPONENT_LABEL.to_string(), component.to_string()),
    ])
}

fn size(s: &Size) -> ResourceRequirements {
    let both = BTreeMap::from([
        ("cpu".to_string(), Quantity(s.cpu.clone())),
        ("memory".to_string(), Quantity(s.memory.clone())),
    ]);
    ResourceRequirements { requests: Some(both.clone()), limits: Some(both), ..ResourceRequirements::default() }
}

fn from_secret(names: &Names, var: &str, key: &str) -> EnvVar {
    EnvVar {
        name: var.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: names.secret.clone(),
                key: key.to_string(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// PERFOPS_TOKEN and the scenario's `${env.X}`, all from the Secret.
fn env(spec: &Spec, names: &Names) -> Vec<EnvVar> {
    let mut env = vec![from_secret(names, "PERFOPS_TOKEN", TOKEN_KEY)];
    env.extend(spec.env.keys().map(|name| from_secret(names, name, &env_key(name))));
    env
}

fn container(name: &str, spec: &Spec, args: Vec<String>, env: Vec<EnvVar>, mounts: Vec<VolumeMount>) -> Container {
    Container {
        name: name.to_string(),
        image: Some(spec.image.clone()),
        command: Some(vec!["perfops".into()]),
        args: Some(args),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(mounts),
        working_dir: Some("/tmp".into()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Capabilities::default() }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn tmp_volume() -> Volume {
    Volume { name: "tmp".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() }
}

/// The scenario and its files from the Secret; the listed items only, so
/// the token and `${env.X}` values (given as environment) are no files.
fn scenario_volume(spec: &Spec, names: &Names) -> Volume {
    let mut items = vec![KeyToPath { key: SCENARIO_KEY.into(), path: SCENARIO_KEY.into(), mode: None }];
    items.extend(spec.files.iter().enumerate().map(|(i, (path, _))| KeyToPath {
        key: file_key(i, path),
        path: path.clone(),
        mode: None,
    }));
    secret_volume("scenario", &names.secret, items)
}

/// The TLS Secret: the certificate, and the key too when `with_key` (the
/// coordinator's pod; never an agent's).
fn tls_volume(names: &Names, with_key: bool) -> Volume {
    let mut keys = vec![TLS_CERT_KEY];
    if with_key {
        keys.push(TLS_KEY_KEY);
    }
    let items = keys.into_iter().map(|k| KeyToPath { key: k.into(), path: k.into(), mode: None }).collect();
    secret_volume("tls", &names.tls, items)
}

fn secret_volume(name: &str, secret: &str, items: Vec<KeyToPath>) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            items: Some(items),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn results_volume(names: &Names, read_only: bool) -> Volume {
    Volume {
        name: "results".into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: names.results.clone(),
            read_only: read_only.then_some(true),
        }),
        ..Volume::default()
    }
}

/// The pod settings every pod shares.
fn pod(containers: Vec<Container>, volumes: Vec<Volume>) -> PodSpec {
    PodSpec {
        containers,
        volumes: Some(volumes),
        restart_policy: Some("Never".into()),
        // perfops does not call the API; and no Service's variables in its
        // environment (a Service named `perfops` would add PERFOPS_* ones).
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(USER_ID),
            run_as_group: Some(USER_ID),
            // The results volume becomes writable by that group.
            fs_group: Some(USER_ID),
            fs_group_change_policy: Some("OnRootMismatch".into()),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..SeccompProfile::default() }),
            ..PodSecurityContext::default()
        }),
        ..PodSpec::default()
    }
}

fn template(spec: &Spec, component: &str, pod: PodSpec) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels(spec, component)), ..ObjectMeta::default() }),
        spec: Some(pod),
    }
}

fn coordinator(spec: &Spec, names: &Names) -> Job {
    let mut args: Vec<String> = vec![
        "coordinator".into(),
        format!("{CONFIG_DIR}/{SCENARIO_KEY}"),
        "--agents".into(),
        spec.agents.to_string(),
        "--listen".into(),
        format!("0.0.0.0:{PORT}"),
        "--out".into(),
        RESULTS_DIR.into(),
        "--tls-cert".into(),
        format!("{TLS_DIR}/{TLS_CERT_KEY}"),
        "--tls-key".into(),
        format!("{TLS_DIR}/{TLS_KEY_KEY}"),
    ];
    if let Some(t) = &spec.join_timeout {
        args.extend(["--join-timeout".into(), t.clone()]);
    }
    if spec.live {
        args.push(format!("--live={}", crate::live::DEFAULT_ADDR));
    }
    let mounts = vec![
        mount("scenario", CONFIG_DIR, true),
        mount("tls", TLS_DIR, true),
        mount("results", RESULTS_DIR, false),
        mount("tmp", "/tmp", false),
    ];
    let mut c = container("coordinator", spec, args, env(spec, names), mounts);
    c.resources = Some(size(&spec.coordinator));
    c.ports = Some(vec![ContainerPort {
        name: Some("fleet".into()),
        container_port: PORT,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }]);
    // The Service publishes the coordinator once it listens: agents that
    // start first find no address rather than a refused connection.
    c.readiness_probe = Some(Probe {
        tcp_socket: Some(TCPSocketAction { port: IntOrString::String("fleet".into()), host: None }),
        period_seconds: Some(2),
        ..Probe::default()
    });
    let volumes =
        vec![scenario_volume(spec, names), tls_volume(names, true), results_volume(names, false), tmp_volume()];
    Job {
        metadata: meta(spec, &names.coordinator, "coordinator"),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            completions: Some(1),
            parallelism: Some(1),
            template: template(spec, "coordinator", pod(vec![c], volumes)),
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

fn agents(spec: &Spec, names: &Names) -> Job {
    // The certificate is the agents' only trust anchor: they accept this
    // coordinator and no other, whatever the system's roots would say.
    let args =
        vec!["agent".into(), "--join".into(), join_url(spec), "--tls-ca".into(), format!("{TLS_DIR}/{TLS_CERT_KEY}")];
    let mut env = env(spec, names);
    // Kubernetes sets it for Indexed Jobs; written out so the manifest shows
    // where the shard comes from (the Job controller keeps one given).
    env.push(EnvVar {
        name: "JOB_COMPLETION_INDEX".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.annotations['batch.kubernetes.io/job-completion-index']".into(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    });
    let mounts = vec![mount("scenario", CONFIG_DIR, true), mount("tls", TLS_DIR, true), mount("tmp", "/tmp", false)];
    let mut c = container("agent", spec, args, env, mounts);
    c.resources = Some(size(&spec.agent));
    let mut pod = pod(vec![c], vec![scenario_volume(spec, names), tls_volume(names, false), tmp_volume()]);
    pod.affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(selector(spec, "agent")),
                        ..LabelSelector::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..PodAffinityTerm::default()
                },
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
    let n = i32::try_from(spec.agents).unwrap_or(i32::MAX);
    Job {
        metadata: meta(spec, &names.agents, "agent"),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(n),
            parallelism: Some(n),
            backoff_limit_per_index: Some(0),
            template: template(spec, "agent", pod),
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

fn fetch(spec: &Spec, names: &Names) -> Pod {
    let args = vec!["tar".into(), RESULTS_DIR.into(), "--hold".into(), FETCH_HOLD.into()];
    let mut c = container("fetch", spec, args, Vec::new(), vec![mount("results", RESULTS_DIR, true)]);
    c.working_dir = None;
    c.resources = Some(size(&Size { cpu: "100m".into(), memory: "64Mi".into() }));
    let mut pod = pod(vec![c], vec![results_volume(names, true)]);
    // `perfops tar --hold` ends on SIGTERM at once.
    pod.termination_grace_period_seconds = Some(5);
    Pod { metadata: meta(spec, &names.fetch, "fetch"), spec: Some(pod), ..Pod::default() }
}

/// The commands that drive the run, as printed after writing `out` (the
/// README's "Running on Kubernetes" shows them for its example).
pub(crate) fn commands(spec: &Spec, out: &str) -> String {
    let names = Names::new(&spec.name);
    let ns = &spec.namespace;
    let sel = format!("{INSTANCE_LABEL}={}", spec.name);
    let mut s = String::new();
    s.push_str(&format!("# Start (the namespace must exist: kubectl create namespace {ns}):\n"));
    s.push_str(&format!("kubectl apply -f {out}\n"));
    // `logs -f` fails at once on a container not started yet (it waits only for
    // the pod to exist): wait for the coordinator to listen first.
    s.push_str(
        "# Follow the coordinator once it listens: its live line, then the summary; returns when the run ends:\n",
    );
    s.push_str(&format!(
        "kubectl -n {ns} wait --for=jsonpath='{{.status.ready}}'=1 job/{} --timeout=10m\n",
        names.coordinator
    ));
    s.push_str(&format!("kubectl -n {ns} logs -f job/{}\n", names.coordinator));
    if spec.live {
        let port = crate::live::DEFAULT_ADDR.rsplit(':').next().unwrap_or("5665");
        s.push_str(&format!(
            "# Its live page (on the pod's loopback: port-forward reaches it), then open http://127.0.0.1:{port}/:\n"
        ));
        s.push_str(&format!("kubectl -n {ns} port-forward job/{} {port}:{port}\n", names.coordinator));
    }
    s.push_str(
        "# Pods not running? Why (image pull, resources, scheduling: the Events at the end), and how the Jobs ended:\n",
    );
    s.push_str(&format!("kubectl -n {ns} get pods -l {sel} -o wide\n"));
    s.push_str(&format!("kubectl -n {ns} describe pods -l {sel}\n"));
    s.push_str(&format!("kubectl -n {ns} get jobs -l {sel}\n"));
    s.push_str("# Copy the results out (the image has no shell and no tar: `perfops tar` writes the archive):\n");
    s.push_str(&format!("kubectl apply -f {out}/{FETCH_DIR}\n"));
    s.push_str(&format!("kubectl -n {ns} wait --for=condition=Ready pod/{} --timeout=5m\n", names.fetch));
    s.push_str(&format!(
        "mkdir -p results && kubectl -n {ns} exec {} -- perfops tar {RESULTS_DIR} | tar -x -C results\n",
        names.fetch
    ));
    s.push_str("# Delete everything, the results volume included:\n");
    s.push_str(&format!("kubectl delete --ignore-not-found -f {out}/{FETCH_DIR} -f {out}\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            name: "perfops-orders".into(),
            namespace: "load".into(),
            image: "registry.example/perfops:0.1.0".into(),
            agents: 3,
            scenario: "name: orders\n".into(),
            files: vec![("users.csv".into(), "id\n1\n".into()), ("data/pages.csv".into(), "path\n/\n".into())],
            token: "t0k3n".into(),
            tls: super::super::tls::Material { cert_pem: "CERT".into(), key_pem: "KEY".into() },
            env: BTreeMap::from([("API_KEY".to_string(), "secret".to_string())]),
            agent: Size { cpu: "2".into(), memory: "1Gi".into() },
            coordinator: Size { cpu: "1".into(), memory: "512Mi".into() },
            results_size: "1Gi".into(),
            join_timeout: None,
            live: false,
        }
    }

    /// Names derived from the prefix, and the URL the agents join.
    #[test]
    fn names_and_url() {
        let n = Names::new("perfops-orders");
        assert_eq!(n.coordinator, "perfops-orders-coordinator");
        assert_eq!(n.agents, "perfops-orders-agents");
        // #31, point 3: TLS, to a name the certificate holds.
        assert_eq!(join_url(&spec()), "https://perfops-orders-coordinator.load.svc:7070");
        assert!(
            super::super::tls::service_names(&n.coordinator, "load")
                .contains(&"perfops-orders-coordinator.load.svc".into())
        );
        // The longest prefix still makes DNS labels of every name.
        let long = "a".repeat(MAX_NAME);
        let n = Names::new(&long);
        for name in [&n.secret, &n.tls, &n.results, &n.coordinator, &n.agents, &n.fetch] {
            assert!(name.len() <= 63, "{name}");
        }
    }

    /// The agents' Job: Indexed, N of N, shard from the completion index,
    /// token from the Secret, spread over nodes.
    #[test]
    fn agents_job() {
        let b = bundle(&spec());
        let js = b.agents.spec.as_ref().unwrap();
        assert_eq!(js.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((js.completions, js.parallelism, js.backoff_limit_per_index), (Some(3), Some(3), Some(0)));
        let pod = js.template.spec.as_ref().unwrap();
        let c = &pod.containers[0];
        assert_eq!(
            c.args.as_deref().unwrap(),
            [
                "agent",
                "--join",
                "https://perfops-orders-coordinator.load.svc:7070",
                "--tls-ca",
                "/etc/perfops-tls/tls.crt"
            ]
        );
        let env: Vec<&str> = c.env.as_ref().unwrap().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(env, ["PERFOPS_TOKEN", "API_KEY", "JOB_COMPLETION_INDEX"]);
        let anti = pod.affinity.as_ref().unwrap().pod_anti_affinity.as_ref().unwrap();
        let term = &anti.preferred_during_scheduling_ignored_during_execution.as_ref().unwrap()[0];
        assert_eq!(term.pod_affinity_term.topology_key, "kubernetes.io/hostname");
        // The selector picks exactly the pods the template labels.
        let picked = term.pod_affinity_term.label_selector.as_ref().unwrap().match_labels.as_ref().unwrap();
        let labels = js.template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert!(picked.iter().all(|(k, v)| labels.get(k) == Some(v)), "{picked:?} vs {labels:?}");
    }

    /// The Service selects the coordinator's pods, and only them.
    #[test]
    fn service_selects_the_coordinator() {
        let b = bundle(&spec());
        let sel = b.service.spec.as_ref().unwrap().selector.as_ref().unwrap();
        let coord = b.coordinator.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        let agent = b.agents.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert!(sel.iter().all(|(k, v)| coord.get(k) == Some(v)));
        assert!(!sel.iter().all(|(k, v)| agent.get(k) == Some(v)));
    }

    /// The Secret's keys are valid keys, and the volume puts each file at
    /// its path relative to the scenario, and nothing else (#31, point 6:
    /// the scenario is in the Secret, and the token is no file).
    #[test]
    fn scenario_in_the_secret_and_paths() {
        let b = bundle(&spec());
        let data = b.secret.string_data.as_ref().unwrap();
        assert!(data.keys().all(|k| k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))));
        let pod = b.coordinator.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let vol = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == "scenario").unwrap();
        let source = vol.secret.as_ref().unwrap();
        assert_eq!(source.secret_name.as_deref(), Some("perfops-orders-secret"));
        let items = source.items.as_ref().unwrap();
        let at: BTreeMap<&str, &str> = items.iter().map(|i| (i.path.as_str(), data[&i.key].as_str())).collect();
        assert_eq!(
            at,
            BTreeMap::from([
                ("scenario.yaml", "name: orders\n"),
                ("users.csv", "id\n1\n"),
                ("data/pages.csv", "path\n/\n")
            ])
        );
    }

    /// #31, point 3: the coordinator serves with the certificate and its
    /// key; the agents mount the certificate only and pin it.
    #[test]
    fn tls_key_in_the_coordinators_pod_only() {
        let b = bundle(&spec());
        assert_eq!(b.tls.type_.as_deref(), Some("kubernetes.io/tls"));
        let data = b.tls.string_data.as_ref().unwrap();
        assert_eq!((data["tls.crt"].as_str(), data["tls.key"].as_str()), ("CERT", "KEY"));
        // (job, mounted keys, TLS flags and their files)
        let cases: [(&Job, &[&str], &[&str]); 2] = [
            // The coordinator: both, given to --tls-cert and --tls-key.
            (
                &b.coordinator,
                &["tls.crt", "tls.key"],
                &["--tls-cert", "/etc/perfops-tls/tls.crt", "--tls-key", "/etc/perfops-tls/tls.key"],
            ),
            // An agent: the certificate alone, as its only trust anchor.
            (&b.agents, &["tls.crt"], &["--tls-ca", "/etc/perfops-tls/tls.crt"]),
        ];
        for (job, keys, flags) in cases {
            let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
            let vol = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == "tls").unwrap();
            let source = vol.secret.as_ref().unwrap();
            assert_eq!(source.secret_name.as_deref(), Some("perfops-orders-tls"));
            let got: Vec<&str> = source.items.as_ref().unwrap().iter().map(|i| i.key.as_str()).collect();
            assert_eq!(got, keys);
            let c = &pod.containers[0];
            let m = c.volume_mounts.as_ref().unwrap().iter().find(|m| m.name == "tls").unwrap();
            assert_eq!((m.mount_path.as_str(), m.read_only), ("/etc/perfops-tls", Some(true)));
            let args = c.args.as_ref().unwrap();
            let at = args.iter().position(|a| a == flags[0]).unwrap();
            assert_eq!(&args[at..at + flags.len()], flags);
        }
    }

    /// #31, point 3: the NetworkPolicy picks the coordinator's pods and lets
    /// in the agents' pods of this run alone, on the fleet port alone.
    #[test]
    fn network_policy_admits_the_agents_only() {
        let b = bundle(&spec());
        let p = b.policy.spec.as_ref().unwrap();
        let labels = |j: &Job| j.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
        let (coord, agent) = (labels(&b.coordinator), labels(&b.agents));
        let picks = |sel: &LabelSelector, l: &BTreeMap<String, String>| {
            sel.match_expressions.is_none()
                && sel.match_labels.as_ref().unwrap().iter().all(|(k, v)| l.get(k) == Some(v))
        };
        let target = p.pod_selector.as_ref().unwrap();
        assert!(picks(target, &coord) && !picks(target, &agent));
        assert_eq!(p.policy_types.as_deref(), Some(&["Ingress".to_string()][..]));
        let rules = p.ingress.as_ref().unwrap();
        assert_eq!(rules.len(), 1, "one rule: nothing else is let in");
        let from = rules[0].from.as_ref().unwrap();
        assert_eq!(from.len(), 1);
        assert!(from[0].namespace_selector.is_none() && from[0].ip_block.is_none(), "this namespace's pods only");
        let peers = from[0].pod_selector.as_ref().unwrap();
        assert!(picks(peers, &agent) && !picks(peers, &coord));
        // Another run's agents (another instance label) are not let in.
        let mut stranger = agent.clone();
        stranger.insert(INSTANCE_LABEL.into(), "perfops-other".into());
        assert!(!picks(peers, &stranger));
        let ports = rules[0].ports.as_ref().unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!((ports[0].port.clone(), ports[0].protocol.as_deref()), (Some(IntOrString::Int(PORT)), Some("TCP")));
    }

    /// Two paths that flatten alike get distinct keys.
    #[test]
    fn file_keys_are_distinct() {
        assert_ne!(file_key(0, "a/b.csv"), file_key(1, "a-b.csv"));
        assert_eq!(file_key(0, "data/pages.csv"), "data-0-data-pages.csv");
        // A very long path is cut to a valid key length, keeping its end.
        let k = file_key(7, &format!("{}/x.csv", "d".repeat(400)));
        assert!(k.len() <= 253 && k.ends_with("x.csv"), "{k}");
    }

    /// The printed commands name the folder, the namespace and the objects.
    #[test]
    fn printed_commands() {
        let text = commands(&spec(), "k8s/orders");
        assert!(text.contains("kubectl apply -f k8s/orders\n"), "{text}");
        assert!(text.contains("kubectl -n load logs -f job/perfops-orders-coordinator\n"), "{text}");
        // The wait comes first: `logs -f` fails on a container not started yet.
        let wait = text.find("wait --for=jsonpath='{.status.ready}'=1 job/perfops-orders-coordinator").unwrap();
        assert!(wait < text.find("logs -f").unwrap(), "{text}");
        assert!(text.contains("kubectl -n load describe pods -l app.kubernetes.io/instance=perfops-orders\n"));
        assert!(text.contains("exec perfops-orders-fetch -- perfops tar /results | tar -x -C results\n"));
        assert!(text.contains("kubectl delete --ignore-not-found -f k8s/orders/fetch -f k8s/orders\n"));
        // Every command line is one kubectl (or mkdir) call: nothing shell-specific but the pipe.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("kubectl ") || line.starts_with("mkdir -p results && kubectl "), "{line}");
        }
        // No live page asked: no port-forward.
        assert!(!text.contains("port-forward"), "{text}");
    }

    /// `--live`: the coordinator serves its page on its pod's loopback, and
    /// the printed commands say how to open it (port-forward reaches a
    /// pod's loopback; no Service or token exposes it).
    #[test]
    fn a_live_coordinator_and_its_port_forward() {
        let spec = Spec { live: true, ..spec() };
        let b = bundle(&spec);
        let pod = b.coordinator.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let args = pod.containers[0].args.as_ref().unwrap();
        assert!(args.contains(&"--live=127.0.0.1:5665".to_string()), "{args:?}");
        let text = commands(&spec, "k8s/orders");
        let forward = "kubectl -n load port-forward job/perfops-orders-coordinator 5665:5665\n";
        assert!(text.contains(forward), "{text}");
        assert!(text.contains("open http://127.0.0.1:5665/"), "{text}");
        // After the coordinator is followed: it listens only once it runs.
        assert!(text.find(forward).unwrap() > text.find("logs -f").unwrap(), "{text}");
        let plain = bundle(&super::tests::spec());
        let args = plain.coordinator.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].args.clone();
        assert!(!args.unwrap().iter().any(|a| a.starts_with("--live")));
    }
}
