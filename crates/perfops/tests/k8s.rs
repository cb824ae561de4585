//! `perfops k8s` end to end: the real binary writes the manifests of a
//! scenario with CSV files and an `${env.X}`; the YAML is read back (with a
//! parser other than the writer's) into the typed Kubernetes objects and each
//! is checked; then a real kube-apiserver (the kit in `bench/k8s`, built by
//! `scripts/test`) validates every object with a strict server-side dry run,
//! and refuses broken ones. Also `perfops tar`, the way results leave a
//! shell-less pod, against the system's `tar`.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Finished, Workdir, send_signal, shared, spawn_perfops};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, PersistentVolumeClaim, Pod, PodSpec, Secret, Service, Volume};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde_json::Value;

const FILES: [&str; 7] = [
    "01-secret.yaml",
    "02-tls-secret.yaml",
    "03-results-volume.yaml",
    "04-coordinator-network-policy.yaml",
    "04-coordinator-service.yaml",
    "05-coordinator.yaml",
    "06-agents.yaml",
];
const FETCH: &str = "fetch/results-pod.yaml";

/// A scenario with a CSV file beside it, one in a subfolder (named by two
/// feeders, once with `./`), and an `${env.X}` in a header. Its target is
/// never contacted.
const SCENARIO: &str = "\
name: Checkout API
target: http://127.0.0.1:9
data:
  users: { csv: users.csv, mode: cycle }
  pages: { csv: data/pages.csv }
  again: { csv: ./data/pages.csv }
defaults:
  headers: { X-Api-Key: \"${env.PERFOPS_TEST_API_KEY}\" }
flows:
  browse:
    steps:
      - { name: page, request: \"GET /${pages.path}?u=${users.id}\" }
load: { stages: [ { rate: 20, hold: 2s } ] }
";
const USERS: &str = "id\n1\n2\n";
const PAGES: &str = "path\nhealth\n";

/// A folder with the scenario and its CSV files.
fn scenario_dir(tag: &str) -> (Workdir, PathBuf) {
    let wd = Workdir::new(tag);
    std::fs::create_dir_all(wd.path.join("data")).unwrap();
    std::fs::write(wd.path.join("users.csv"), USERS).unwrap();
    std::fs::write(wd.path.join("data/pages.csv"), PAGES).unwrap();
    let scenario = wd.scenario("checkout.yaml", SCENARIO);
    (wd, scenario)
}

/// `perfops ARGS` in `dir`, with `PERFOPS_TEST_API_KEY` set unless `api_key` is None.
fn perfops_in(dir: &Path, args: &[&str], api_key: Option<&str>) -> Finished {
    let dir = dir.to_path_buf();
    let key = api_key.map(str::to_string);
    spawn_perfops(args, move |c| {
        c.current_dir(&dir);
        match &key {
            Some(k) => c.env("PERFOPS_TEST_API_KEY", k),
            None => c.env_remove("PERFOPS_TEST_API_KEY"),
        };
    })
    .wait(Duration::from_secs(30))
}

/// yaml-rust2's tree as JSON; strings stay strings.
fn to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Hash(h) => {
            Value::Object(h.iter().map(|(k, v)| (k.as_str().expect("string keys").to_string(), to_json(v))).collect())
        }
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML value {other:?}"),
    }
}

/// The one YAML document in `path`, as JSON.
fn read_doc(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{}: one object per file", path.display());
    to_json(&docs[0])
}

/// The object in `path` as `T` (which checks its apiVersion and kind).
fn read<T: DeserializeOwned>(path: &Path) -> T {
    serde_json::from_value(read_doc(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pod_of(job: &Job) -> &PodSpec {
    job.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn env_from_secret(c: &Container) -> BTreeMap<String, (String, String)> {
    c.env
        .iter()
        .flatten()
        .filter_map(|e| {
            let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
            Some((e.name.clone(), (r.name.clone(), r.key.clone())))
        })
        .collect()
}

fn mounts(c: &Container) -> BTreeMap<String, (String, bool)> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.mount_path.clone(), (m.name.clone(), m.read_only == Some(true))))
        .collect()
}

fn volume<'a>(pod: &'a PodSpec, name: &str) -> &'a Volume {
    pod.volumes.iter().flatten().find(|v| v.name == name).unwrap_or_else(|| panic!("no volume {name}"))
}

/// Requests and limits, as `cpu`/`memory` strings.
fn resources(c: &Container) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let r = c.resources.as_ref().expect("resources");
    let q = |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
        m.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect::<BTreeMap<_, _>>()
    };
    (q(&r.requests), q(&r.limits))
}

/// What every pod shares: non-root, nothing that lowers the open-files limit
/// or adds a privilege, no API token, no Service variables.
fn assert_locked_down(what: &str, pod: &PodSpec) {
    let sc = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(sc.run_as_non_root, Some(true), "{what}");
    assert_eq!((sc.run_as_user, sc.run_as_group, sc.fs_group), (Some(65532), Some(65532), Some(65532)), "{what}");
    assert_eq!(sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()), Some("RuntimeDefault"), "{what}");
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"), "{what}");
    assert_eq!(pod.automount_service_account_token, Some(false), "{what}");
    assert_eq!(pod.enable_service_links, Some(false), "{what}");
    for c in &pod.containers {
        let cs = c.security_context.as_ref().expect("container securityContext");
        assert_eq!(cs.allow_privilege_escalation, Some(false), "{what}");
        assert_eq!(cs.privileged, None, "{what}");
        assert_eq!(cs.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_string()]), "{what}");
        assert_eq!(cs.capabilities.as_ref().and_then(|c| c.add.clone()), None, "{what}");
        assert_eq!(c.command.as_deref(), Some(&["perfops".to_string()][..]), "{what}");
        assert_eq!(c.image.as_deref(), Some("perfops:test"), "{what}");
    }
}

/// Every object, read back into its type, holds what the run needs.
#[test]
fn manifests_read_back() {
    let _cpu = shared();
    let (wd, _) = scenario_dir("k8s-read-back");
    let args = [
        "k8s",
        "checkout.yaml",
        "--agents",
        "4",
        "--image",
        "perfops:test",
        "--namespace",
        "load",
        "--out",
        "out",
        "--agent-cpu",
        "2",
        "--agent-memory",
        "1Gi",
    ];
    let run = perfops_in(&wd.path, &args, Some("s3cret"));
    run.assert_exit(0);
    let out = wd.path.join("out");

    // Exactly the seven objects and the fetch pod, nothing else.
    let mut found: Vec<String> = Vec::new();
    for e in walk(&out) {
        found.push(e.strip_prefix(&out).unwrap().display().to_string());
    }
    found.sort();
    let mut want: Vec<String> = FILES.iter().map(|f| f.to_string()).chain([FETCH.to_string()]).collect();
    want.sort();
    assert_eq!(found, want);

    // Secret: the token (256 bits; only its owner reads the file), the ${env.X} value,
    // the scenario and its CSV files (#31, point 6: no ConfigMap any more).
    let secret: Secret = read(&out.join(FILES[0]));
    assert_eq!(secret.metadata.name.as_deref(), Some("perfops-checkout-api-secret"));
    assert_eq!(secret.metadata.namespace.as_deref(), Some("load"));
    let data = secret.string_data.as_ref().expect("stringData");
    let token = &data["token"];
    assert!(token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    assert_eq!(data["env.PERFOPS_TEST_API_KEY"], "s3cret");
    assert_eq!(data["scenario.yaml"], SCENARIO);
    assert_eq!(data.len(), 5, "token, env, scenario and two CSV files: {:?}", data.keys());
    for f in [FILES[0], FILES[1]] {
        let mode = std::fs::metadata(out.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f}: a Secret's file");
    }
    // A second run makes another token, and another TLS key.
    let first_tls: Secret = read(&out.join(FILES[1]));
    let again = perfops_in(&wd.path, &args, Some("s3cret"));
    again.assert_exit(0);
    let secret2: Secret = read(&out.join(FILES[0]));
    assert_ne!(secret2.string_data.as_ref().unwrap()["token"], *token, "a fresh token per run");
    let second_tls: Secret = read(&out.join(FILES[1]));
    assert_ne!(first_tls.string_data.unwrap()["tls.key"], second_tls.string_data.unwrap()["tls.key"], "a fresh key");

    let secret_name = secret.metadata.name.clone().unwrap();
    let cm_data = data;

    // #31, point 3: the TLS Secret, a certificate for the Service's names and its key.
    let tls: Secret = read(&out.join(FILES[1]));
    assert_eq!(tls.type_.as_deref(), Some("kubernetes.io/tls"));
    let tls_name = tls.metadata.name.clone().unwrap();
    let tls_data = tls.string_data.as_ref().expect("stringData");
    assert!(tls_data["tls.crt"].starts_with("-----BEGIN CERTIFICATE-----\n"), "{:?}", tls_data.get("tls.crt"));
    assert!(tls_data["tls.key"].starts_with("-----BEGIN PRIVATE KEY-----\n"));
    assert_eq!(tls_data.len(), 2);

    // The results volume.
    let pvc: PersistentVolumeClaim = read(&out.join(FILES[2]));
    let pvc_name = pvc.metadata.name.clone().unwrap();
    let ps = pvc.spec.as_ref().unwrap();
    assert_eq!(ps.access_modes.as_deref(), Some(&["ReadWriteOnce".to_string()][..]));
    assert_eq!(ps.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0, "1Gi");
    assert_eq!(ps.storage_class_name, None, "the cluster's default class");

    // The coordinator: its Job, and the Service the agents reach it by.
    let svc: Service = read(&out.join(FILES[4]));
    let coord: Job = read(&out.join(FILES[5]));
    assert_eq!(coord.metadata.name, svc.metadata.name);
    let cs = coord.spec.as_ref().unwrap();
    assert_eq!((cs.backoff_limit, cs.completions, cs.parallelism), (Some(0), Some(1), Some(1)));
    let cpod = pod_of(&coord);
    assert_locked_down("coordinator", cpod);
    let c = &cpod.containers[0];
    assert_eq!(
        c.args.as_deref().unwrap(),
        [
            "coordinator",
            "/etc/perfops/scenario.yaml",
            "--agents",
            "4",
            "--listen",
            "0.0.0.0:7070",
            "--out",
            "/results",
            "--tls-cert",
            "/etc/perfops-tls/tls.crt",
            "--tls-key",
            "/etc/perfops-tls/tls.key"
        ]
    );
    let want_env = BTreeMap::from([
        ("PERFOPS_TOKEN".to_string(), (secret_name.clone(), "token".to_string())),
        ("PERFOPS_TEST_API_KEY".to_string(), (secret_name.clone(), "env.PERFOPS_TEST_API_KEY".to_string())),
    ]);
    assert_eq!(env_from_secret(c), want_env);
    assert_eq!(
        mounts(c),
        BTreeMap::from([
            ("/etc/perfops".to_string(), ("scenario".to_string(), true)),
            ("/etc/perfops-tls".to_string(), ("tls".to_string(), true)),
            ("/results".to_string(), ("results".to_string(), false)),
            ("/tmp".to_string(), ("tmp".to_string(), false)),
        ])
    );
    assert_eq!(volume(cpod, "results").persistent_volume_claim.as_ref().unwrap().claim_name, pvc_name);
    let (req, lim) = resources(c);
    assert_eq!(req, BTreeMap::from([("cpu".into(), "1".into()), ("memory".into(), "512Mi".into())]));
    assert_eq!(req, lim, "Guaranteed QoS");
    // The Service picks the coordinator's pod, on the port it names.
    let ss = svc.spec.as_ref().unwrap();
    let labels = coord.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert!(ss.selector.as_ref().unwrap().iter().all(|(k, v)| labels.get(k) == Some(v)));
    let port = &ss.ports.as_ref().unwrap()[0];
    assert_eq!(port.port, 7070);
    let IntOrString::String(target) = port.target_port.clone().unwrap() else { panic!("a named target port") };
    let cport = c.ports.as_ref().unwrap().iter().find(|p| p.name.as_deref() == Some(target.as_str())).unwrap();
    assert_eq!(cport.container_port, 7070);
    assert!(c.readiness_probe.as_ref().unwrap().tcp_socket.is_some(), "ready when it listens");

    // The coordinator's TLS volume: the certificate and the key.
    let ctls = volume(cpod, "tls").secret.as_ref().unwrap();
    assert_eq!(ctls.secret_name.as_deref(), Some(tls_name.as_str()));
    let keys: Vec<&str> = ctls.items.iter().flatten().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["tls.crt", "tls.key"]);

    // The scenario's relative CSV paths resolve under the mount: lay the
    // Secret out as the volume would and let `perfops check` read it.
    let scenario_volume = volume(cpod, "scenario").secret.as_ref().unwrap();
    assert_eq!(scenario_volume.secret_name.as_deref(), Some(secret_name.as_str()));
    let projected: Vec<&str> = scenario_volume.items.iter().flatten().map(|i| i.key.as_str()).collect();
    assert!(!projected.iter().any(|k| k.starts_with("token") || k.starts_with("env.")), "{projected:?}");
    let mount = wd.path.join("etc-perfops");
    for item in scenario_volume.items.iter().flatten() {
        let file = mount.join(&item.path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &cm_data[&item.key]).unwrap();
    }
    assert_eq!(std::fs::read_to_string(mount.join("data/pages.csv")).unwrap(), PAGES);
    assert_eq!(std::fs::read_to_string(mount.join("users.csv")).unwrap(), USERS);
    let check = perfops_in(&wd.path, &["check", "etc-perfops/scenario.yaml"], Some("s3cret"));
    check.assert_exit(0);

    // The agents: an Indexed Job of 4, each with its shard index.
    let agents: Job = read(&out.join(FILES[6]));
    let js = agents.spec.as_ref().unwrap();
    assert_eq!(js.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!((js.completions, js.parallelism, js.backoff_limit_per_index), (Some(4), Some(4), Some(0)));
    let apod = pod_of(&agents);
    assert_locked_down("agents", apod);
    let a = &apod.containers[0];
    // #31, point 3: https, to the Service's name, pinning the run's certificate.
    let join = format!("https://{}.load.svc:7070", svc.metadata.name.as_deref().unwrap());
    assert_eq!(
        a.args.as_deref().unwrap(),
        ["agent".to_string(), "--join".to_string(), join, "--tls-ca".into(), "/etc/perfops-tls/tls.crt".into()]
    );
    // The agents mount the certificate, never the key.
    let atls = volume(apod, "tls").secret.as_ref().unwrap();
    assert_eq!(atls.secret_name.as_deref(), Some(tls_name.as_str()));
    let keys: Vec<&str> = atls.items.iter().flatten().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["tls.crt"], "the agents get no key");
    assert_eq!(mounts(a)["/etc/perfops-tls"], ("tls".to_string(), true));
    assert_eq!(env_from_secret(a), want_env);
    let index = a.env.iter().flatten().find(|e| e.name == "JOB_COMPLETION_INDEX").expect("JOB_COMPLETION_INDEX");
    assert_eq!(
        index.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path,
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let (req, lim) = resources(a);
    assert_eq!(req, BTreeMap::from([("cpu".into(), "2".into()), ("memory".into(), "1Gi".into())]));
    assert_eq!(req, lim);
    // Spread over nodes: preferred anti-affinity to the Job's own pods.
    let anti = apod.affinity.as_ref().unwrap().pod_anti_affinity.as_ref().unwrap();
    assert!(anti.required_during_scheduling_ignored_during_execution.is_none(), "agents still run on one node");
    let term = &anti.preferred_during_scheduling_ignored_during_execution.as_ref().unwrap()[0];
    assert_eq!(term.pod_affinity_term.topology_key, "kubernetes.io/hostname");
    let picked = term.pod_affinity_term.label_selector.as_ref().unwrap().match_labels.clone().unwrap();
    let alabels = js.template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert!(picked.iter().all(|(k, v)| alabels.get(k) == Some(v)), "selects the agents");
    assert!(!picked.iter().all(|(k, v)| labels.get(k) == Some(v)), "not the coordinator");
    // Agents get the scenario's files at the same paths (no results volume).
    assert_eq!(volume(apod, "scenario").secret, Some(scenario_volume.clone()));
    assert!(apod.volumes.iter().flatten().all(|v| v.persistent_volume_claim.is_none()));

    // The fetch pod: the results volume, read-only, and a process that holds.
    let fetch: Pod = read(&out.join(FETCH));
    let fpod = fetch.spec.as_ref().unwrap();
    assert_locked_down("fetch", fpod);
    let claim = volume(fpod, "results").persistent_volume_claim.as_ref().unwrap();
    assert_eq!((claim.claim_name.as_str(), claim.read_only), (pvc_name.as_str(), Some(true)));
    assert_eq!(fpod.containers[0].args.as_deref().unwrap(), ["tar", "/results", "--hold", "1h"]);

    // #31, point 3: the NetworkPolicy lets the agents' pods, and nothing
    // else, reach the coordinator's pods, on its port.
    let policy: NetworkPolicy = read(&out.join(FILES[3]));
    let ps = policy.spec.as_ref().unwrap();
    let sel = ps.pod_selector.as_ref().unwrap().match_labels.clone().unwrap();
    assert!(sel.iter().all(|(k, v)| labels.get(k) == Some(v)), "selects the coordinator");
    assert!(!sel.iter().all(|(k, v)| alabels.get(k) == Some(v)), "not the agents");
    assert_eq!(ps.policy_types.as_deref(), Some(&["Ingress".to_string()][..]));
    let rules = ps.ingress.as_ref().unwrap();
    assert_eq!(rules.len(), 1);
    let from = rules[0].from.as_ref().unwrap();
    assert_eq!(from.len(), 1);
    assert!(from[0].namespace_selector.is_none() && from[0].ip_block.is_none());
    let peers = from[0].pod_selector.as_ref().unwrap().match_labels.clone().unwrap();
    assert!(peers.iter().all(|(k, v)| alabels.get(k) == Some(v)), "admits the agents");
    assert!(!peers.iter().all(|(k, v)| labels.get(k) == Some(v)), "not the coordinator itself");
    let ports = rules[0].ports.as_ref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, Some(IntOrString::Int(7070)));

    // Every object carries the label the printed commands select by.
    for f in FILES.iter().chain([&FETCH]) {
        let v = read_doc(&out.join(f));
        assert_eq!(v["metadata"]["labels"]["app.kubernetes.io/instance"], "perfops-checkout-api", "{f}");
        assert_eq!(v["metadata"]["namespace"], "load", "{f}");
    }
    assert!(run.stdout.contains("kubectl -n load get pods -l app.kubernetes.io/instance=perfops-checkout-api"));
    assert!(run.stderr.contains("PERFOPS_TEST_API_KEY"), "says which values went into the Secret: {}", run.stderr);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// What `perfops k8s` refuses, with exit 2 and a message that says why.
#[test]
fn input_errors() {
    let _cpu = shared();
    let (wd, _) = scenario_dir("k8s-errors");
    // A scenario in a subfolder that reads ../users.csv (which exists).
    std::fs::create_dir_all(wd.path.join("sub")).unwrap();
    std::fs::write(wd.path.join("sub/outside.yaml"), SCENARIO.replace("users.csv", "../users.csv")).unwrap();
    let base = |extra: &[&'static str]| {
        let mut a = vec!["k8s", "checkout.yaml", "--agents", "2", "--image", "perfops:test", "--out", "out"];
        a.extend_from_slice(extra);
        a
    };
    let cases: Vec<(Vec<&str>, Option<&str>, &str)> = vec![
        // A CSV file outside the scenario's folder has no place under the mount.
        (
            vec!["k8s", "sub/outside.yaml", "--agents", "2", "--image", "x:1", "--out", "o1"],
            Some("k"),
            "must be inside the scenario's folder",
        ),
        // An ${env.X} that is not set.
        (base(&[]), None, "PERFOPS_TEST_API_KEY is not set"),
        // Not a Kubernetes quantity.
        (base(&["--agent-cpu", "2GB"]), Some("k"), "--agent-cpu `2GB`"),
        // Not a namespace.
        (base(&["--namespace", "Load"]), Some("k"), "--namespace `Load`"),
        // Not a name.
        (base(&["--name", "9lives"]), Some("k"), "must start with a letter"),
        // No agents.
        (base(&["--agents", "0"]), Some("k"), "--agents"),
        // A scenario that does not exist.
        (
            vec!["k8s", "nope.yaml", "--agents", "1", "--image", "x:1", "--out", "o2"],
            Some("k"),
            "cannot read nope.yaml",
        ),
    ];
    for (args, key, want) in &cases {
        let run = perfops_in(&wd.path, args, *key);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: want {want:?} in:\n{}", run.stderr);
    }
    assert!(!wd.path.join("out").exists(), "nothing written on an input error");
    // A folder holding other files: `kubectl apply -f` would apply them too.
    std::fs::create_dir_all(wd.path.join("busy")).unwrap();
    std::fs::write(wd.path.join("busy/notes.txt"), "mine").unwrap();
    let run =
        perfops_in(&wd.path, &["k8s", "checkout.yaml", "--agents", "1", "--image", "x:1", "--out", "busy"], Some("k"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("holds notes.txt"), "{}", run.stderr);
}

/// #14, point 3: a scenario's gRPC `.proto` files, and the files they
/// import, go into the Secret at their paths relative to the scenario,
/// as CSV files do, so the coordinator's pod compiles them (`perfops check`
/// on the Secret laid out as the volume mounts it) and ships them to its
/// agents; a `.proto` outside the scenario's folder is refused.
#[test]
fn proto_files_go_beside_the_scenario() {
    let _cpu = shared();
    let wd = Workdir::new("k8s-protos");
    std::fs::create_dir_all(wd.path.join("protos/types")).unwrap();
    let msg = "syntax = \"proto3\";\npackage bench;\nmessage Msg { string text = 1; }\n";
    let echo = "syntax = \"proto3\";\npackage bench;\nimport \"types/msg.proto\";\nservice Echo { rpc Say (Msg) returns (Msg); }\n";
    std::fs::write(wd.path.join("protos/types/msg.proto"), msg).unwrap();
    std::fs::write(wd.path.join("protos/echo.proto"), echo).unwrap();
    let yaml = "name: grpc fleet\ntarget: grpc://127.0.0.1:9\nflows:\n  main:\n    steps:\n      - { name: say, grpc: \
                bench.Echo/Say, proto: protos/echo.proto, message: { text: hi } }\nload: { stages: [ { rate: 20, hold: 2s } ] }\n";
    wd.scenario("grpc.yaml", yaml);
    let run = perfops_in(&wd.path, &["k8s", "grpc.yaml", "--agents", "2", "--image", "x:1", "--out", "out"], None);
    run.assert_exit(0);
    let secret: Secret = read(&wd.path.join("out").join(FILES[0]));
    let cm_data = secret.string_data.as_ref().expect("stringData");
    assert_eq!(cm_data.len(), 4, "the token, the scenario, the .proto and its import: {:?}", cm_data.keys());
    let coord: Job = read(&wd.path.join("out").join(FILES[5]));
    let scenario_volume = volume(pod_of(&coord), "scenario").secret.as_ref().unwrap();
    let mount = wd.path.join("etc-perfops");
    let mut paths = Vec::new();
    for item in scenario_volume.items.iter().flatten() {
        let file = mount.join(&item.path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &cm_data[&item.key]).unwrap();
        paths.push(item.path.clone());
    }
    paths.sort();
    assert_eq!(paths, ["protos/echo.proto", "protos/types/msg.proto", "scenario.yaml"]);
    assert_eq!(std::fs::read_to_string(mount.join("protos/types/msg.proto")).unwrap(), msg);
    // `check` compiles the step's .proto from the mount: the import resolves there.
    perfops_in(&wd.path, &["check", "etc-perfops/scenario.yaml"], None).assert_exit(0);

    // A .proto outside the scenario's folder has no place under the mount.
    std::fs::create_dir_all(wd.path.join("sub")).unwrap();
    wd.scenario("sub/outside.yaml", &yaml.replace("proto: protos/echo.proto", "proto: ../protos/echo.proto"));
    let run =
        perfops_in(&wd.path, &["k8s", "sub/outside.yaml", "--agents", "1", "--image", "x:1", "--out", "o2"], None);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("is outside the scenario's folder"), "{}", run.stderr);
}

/// A replay's scenario: its recording, in a subfolder, read beside it.
const REPLAY_SCENARIO: &str = "\
name: replayed
target: http://orders.shop.svc:8080
flows:
  orders:
    steps:
      - { name: orders, request: \"GET /orders?u=${replay.user}\" }
load: { model: replay, file: recordings/rec.csv }
";
const RECORDING: &str = "# perfops replay v1\noffset_ms,flow,user\n0,orders,a\n250,orders,b\n1250,orders,c\n";

/// A replay's recording goes into the Secret at its path relative to the
/// scenario, beside the CSV and `.proto` files, so the coordinator's pod
/// reads it (`perfops check` on the Secret laid out as the volume mounts it)
/// and ships it to its agents, each of which sends its shard of it.
#[test]
fn replay_file_goes_beside_the_scenario() {
    let _cpu = shared();
    let wd = Workdir::new("k8s-replay");
    std::fs::create_dir_all(wd.path.join("recordings")).unwrap();
    std::fs::write(wd.path.join("recordings/rec.csv"), RECORDING).unwrap();
    wd.scenario("replay.yaml", REPLAY_SCENARIO);
    let run = perfops_in(&wd.path, &["k8s", "replay.yaml", "--agents", "2", "--image", "x:1", "--out", "out"], None);
    run.assert_exit(0);
    let secret: Secret = read(&wd.path.join("out").join(FILES[0]));
    let data = secret.string_data.as_ref().expect("stringData");
    assert_eq!(data.len(), 3, "the token, the scenario, the recording: {:?}", data.keys());
    let coord: Job = read(&wd.path.join("out").join(FILES[5]));
    let scenario_volume = volume(pod_of(&coord), "scenario").secret.as_ref().unwrap();
    let mount = wd.path.join("etc-perfops");
    let mut paths = Vec::new();
    for item in scenario_volume.items.iter().flatten() {
        let file = mount.join(&item.path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &data[&item.key]).unwrap();
        paths.push(item.path.clone());
    }
    paths.sort();
    assert_eq!(paths, ["recordings/rec.csv", "scenario.yaml"]);
    assert_eq!(std::fs::read_to_string(mount.join("recordings/rec.csv")).unwrap(), RECORDING);
    // `check` reads the recording from the mount (its 3 arrivals over 1.25 s).
    let check = perfops_in(&wd.path, &["check", "etc-perfops/scenario.yaml"], None);
    check.assert_exit(0);
    assert!(check.stdout.contains("ok (1 flows, 1 stages, 2 s)"), "{}", check.stdout);

    // A recording outside the scenario's folder has no place under the mount.
    std::fs::create_dir_all(wd.path.join("sub")).unwrap();
    wd.scenario("sub/outside.yaml", &REPLAY_SCENARIO.replace("recordings/rec.csv", "../recordings/rec.csv"));
    let run =
        perfops_in(&wd.path, &["k8s", "sub/outside.yaml", "--agents", "1", "--image", "x:1", "--out", "o2"], None);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("load.file:") && run.stderr.contains("is outside the scenario's folder"),
        "{}",
        run.stderr
    );
}

/// #31, point 6: literal secrets in a scenario (a header value, a custom
/// auth header, a password body field, an `api_key` query parameter) and the
/// values of its `${env.X}` reach no manifest but the Secret's file (0600),
/// nor what `perfops k8s` prints; nor does the token, nor the TLS key but in
/// its own Secret. Before, the scenario went into a ConfigMap as written.
#[test]
fn literal_secrets_stay_in_the_secret() {
    let _cpu = shared();
    let wd = Workdir::new("k8s-literal-secrets");
    // Each literal is distinctive, so that finding it anywhere is no accident.
    let yaml = "\
name: secrets
target: http://127.0.0.1:9
defaults:
  headers:
    Authorization: Bearer abc-7f3e9
    X-Auth-Token: lit-51c2d
    Accept: application/json
flows:
  login:
    steps:
      - name: login
        request: POST /login?api_key=xyz-0a8b4&page=1
        json: { user: alice, password: hunter2-9d1e }
      - { name: env, request: GET /me, headers: { X-Api-Key: \"${env.PERFOPS_TEST_API_KEY}\" } }
load: { stages: [ { rate: 1, hold: 1s } ] }
";
    wd.scenario("secrets.yaml", yaml);
    let run = perfops_in(
        &wd.path,
        &["k8s", "secrets.yaml", "--agents", "2", "--image", "perfops:test", "--out", "out"],
        Some("env-secret-6e2f"),
    );
    run.assert_exit(0);
    let out = wd.path.join("out");
    let literals = ["abc-7f3e9", "lit-51c2d", "hunter2-9d1e", "xyz-0a8b4", "env-secret-6e2f"];
    let secret_file = out.join(FILES[0]);
    let secret: Secret = read(&secret_file);
    let data = secret.string_data.as_ref().unwrap();
    let token = data["token"].clone();
    // The Secret holds the scenario as written: the pods run what the user wrote.
    assert_eq!(data["scenario.yaml"], yaml);
    assert_eq!(data["env.PERFOPS_TEST_API_KEY"], "env-secret-6e2f");
    let tls: Secret = read(&out.join(FILES[1]));
    let key = tls.string_data.unwrap()["tls.key"].clone();
    let key_body: String = key.lines().nth(1).unwrap().to_string();
    let mut checked = 0;
    for file in walk(&out) {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(&out).unwrap().display().to_string();
        if file == secret_file {
            continue;
        }
        for secret in literals.iter().copied().chain([token.as_str()]) {
            assert!(!text.contains(secret), "{name} holds {secret:?}:\n{text}");
        }
        if name != FILES[1] {
            assert!(!text.contains(&key_body), "{name} holds the TLS key");
        }
        checked += 1;
    }
    assert_eq!(checked, FILES.len(), "every file but the Secret's, the fetch pod's included");
    // Nor what it prints: the kubectl commands and the note on stderr.
    for secret in literals.iter().copied().chain([token.as_str(), key_body.as_str()]) {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret), "printed {secret:?}");
    }
}

/// The README's "Running on Kubernetes" shows exactly what `perfops k8s`
/// prints for its example.
#[test]
fn readme_shows_the_printed_commands() {
    let _cpu = shared();
    let wd = Workdir::new("k8s-readme");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir_all(wd.path.join("examples/k8s")).unwrap();
    std::fs::copy(root.join("examples/k8s/orders.yaml"), wd.path.join("examples/k8s/orders.yaml")).unwrap();
    let args = [
        "k8s",
        "examples/k8s/orders.yaml",
        "--agents",
        "3",
        "--image",
        "registry.example.com/perfops:0.1.0",
        "--namespace",
        "perfops",
        "--agent-cpu",
        "250m",
        "--coordinator-cpu",
        "250m",
        "--out",
        "k8s/orders",
    ];
    let run = perfops_in(&wd.path, &args, None);
    run.assert_exit(0);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let invocation = format!("perfops {}", args.join(" "));
    assert!(readme.contains(&invocation), "README.md should run `{invocation}`");
    assert!(readme.contains(&run.stdout), "README.md should show what it prints:\n{}", run.stdout);
}

/// `perfops tar DIR | tar -x` gives back the folder; `--hold` waits, and
/// ends at once on SIGTERM (it is a container's PID 1).
#[test]
fn tar_copies_a_folder_out() {
    let _cpu = shared();
    let wd = Workdir::new("k8s-tar");
    let src = wd.path.join("results");
    std::fs::create_dir_all(src.join("20261124T180000Z-orders")).unwrap();
    std::fs::write(src.join("20261124T180000Z-orders/summary.json"), "{\"verdict\":\"pass\"}\n").unwrap();
    let bin: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(src.join("20261124T180000Z-orders/latency.hlog"), &bin).unwrap();
    let dest = wd.path.join("copy");
    std::fs::create_dir_all(&dest).unwrap();

    let mut producer = Command::new(env!("CARGO_BIN_EXE_perfops"))
        .args(["tar", src.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let extract = Command::new("tar")
        .args(["-x", "-C", dest.to_str().unwrap()])
        .stdin(producer.stdout.take().unwrap())
        .status()
        .expect("the system's tar");
    assert!(producer.wait().unwrap().success());
    assert!(extract.success());
    let got = |p: &str| std::fs::read(dest.join("20261124T180000Z-orders").join(p)).unwrap();
    assert_eq!(got("summary.json"), b"{\"verdict\":\"pass\"}\n");
    assert_eq!(got("latency.hlog"), bin, "binary content unchanged");

    let hold = spawn_perfops(&["tar", src.to_str().unwrap(), "--hold", "30s"], |_| {});
    std::thread::sleep(Duration::from_millis(500));
    assert!(common::is_running(hold.pid()), "holds");
    let t = Instant::now();
    send_signal("-TERM", hold.pid());
    let done = hold.wait(Duration::from_secs(5));
    done.assert_exit(0);
    assert!(t.elapsed() < Duration::from_secs(2), "ended {:?} after SIGTERM", t.elapsed());
    assert!(done.stdout.is_empty(), "--hold writes no archive");

    // Not a folder: an input error.
    let run = spawn_perfops(&["tar", "/nonexistent/results"], |_| {}).wait(Duration::from_secs(5));
    run.assert_exit(2);
}

// The start-up and test times go to stderr (shown with --nocapture): CI's cost of this test.
#[allow(clippy::print_stderr)]
mod dry_run {
    //! The strict server-side dry run against a real kube-apiserver.

    use super::*;
    use k8s_openapi::Resource;

    /// The API-server kit `bench/k8s/install.sh` builds (`scripts/test` does).
    fn kit_bin() -> PathBuf {
        let home = std::env::var_os("PERFOPS_K8S_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/perfops-k8s"));
        home.join("bin")
    }

    fn kit_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/k8s")
    }

    /// A kube-apiserver (with etcd and the controller manager) in its own
    /// run directory; dropping it runs `stop.sh RUN_DIR --purge`, whether
    /// the test passed or not.
    struct ApiServer {
        run_dir: PathBuf,
        url: String,
        token: String,
        ca: PathBuf,
    }

    impl ApiServer {
        fn start(wd: &Workdir) -> ApiServer {
            let bin = kit_bin();
            assert!(
                bin.join("kube-apiserver").is_file() && bin.join("kubectl").is_file(),
                "the API-server kit is missing from {}: run \
                 K8S_COMPONENTS=\"etcd kube-apiserver kube-controller-manager kubectl\" bench/k8s/install.sh \
                 (scripts/test does)",
                bin.display()
            );
            // Three free ports, so that tests (and people) on this machine do not collide.
            let listeners: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
            let ports: Vec<u16> = listeners.iter().map(|l| l.local_addr().unwrap().port()).collect();
            drop(listeners);
            let run_dir = wd.path.join("k8s-run");
            let mut server =
                ApiServer { run_dir: run_dir.clone(), url: String::new(), token: String::new(), ca: PathBuf::new() };
            let t = Instant::now();
            let out = Command::new(kit_dir().join("start.sh"))
                .arg(&run_dir)
                .env("K8S_API_PORT", ports[0].to_string())
                .env("K8S_ETCD_PORT", ports[1].to_string())
                .env("K8S_ETCD_PEER_PORT", ports[2].to_string())
                .stdin(Stdio::null())
                .output()
                .expect("run start.sh");
            assert!(
                out.status.success(),
                "start.sh failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("API server ready in {:?}", t.elapsed());
            server.url = format!("https://127.0.0.1:{}", ports[0]);
            server.token = std::fs::read_to_string(run_dir.join("token")).unwrap().trim().to_string();
            server.ca = run_dir.join("ca.crt");
            server
        }

        /// `METHOD path` with `body` (a file) of `content_type`: status, headers, body.
        fn call(&self, method: &str, path: &str, content_type: &str, body: &Path) -> (u16, String, String) {
            let headers = body.with_extension("headers");
            let out = Command::new("curl")
                .args(["-sS", "--max-time", "30", "-X", method, "--cacert"])
                .arg(&self.ca)
                .args(["-H", &format!("Authorization: Bearer {}", self.token)])
                .args(["-H", &format!("Content-Type: {content_type}")])
                .arg("--data-binary")
                .arg(format!("@{}", body.display()))
                .arg("-D")
                .arg(&headers)
                .args(["-w", "%{http_code}", "-o", "/dev/stderr"])
                .arg(format!("{}{path}", self.url))
                .output()
                .expect("run curl");
            let code = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
            let h = std::fs::read_to_string(&headers).unwrap_or_default();
            (code, h, String::from_utf8_lossy(&out.stderr).into_owned())
        }

        fn get(&self, path: &str) -> u16 {
            let out = Command::new("curl")
                .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
                .arg(&self.ca)
                .args(["-H", &format!("Authorization: Bearer {}", self.token)])
                .arg(format!("{}{path}", self.url))
                .output()
                .expect("run curl");
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
        }
    }

    impl Drop for ApiServer {
        fn drop(&mut self) {
            if !self.run_dir.exists() {
                return;
            }
            match Command::new(kit_dir().join("stop.sh")).arg(&self.run_dir).arg("--purge").output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!("stop.sh {}: {}", self.run_dir.display(), String::from_utf8_lossy(&o.stderr)),
                Err(e) => eprintln!("stop.sh {}: {e}", self.run_dir.display()),
            }
        }
    }

    /// The collection URL of `T` in `ns`, with the strict dry run asked.
    fn collection<T: Resource>(ns: &str) -> String {
        let base = if T::GROUP.is_empty() {
            format!("/api/{}", T::VERSION)
        } else {
            format!("/apis/{}/{}", T::GROUP, T::VERSION)
        };
        format!("{base}/namespaces/{ns}/{}?dryRun=All&fieldValidation=Strict", T::URL_PATH_SEGMENT)
    }

    fn collection_of(kind: &str, ns: &str) -> String {
        match kind {
            "Secret" => collection::<Secret>(ns),
            "NetworkPolicy" => collection::<NetworkPolicy>(ns),
            "PersistentVolumeClaim" => collection::<PersistentVolumeClaim>(ns),
            "Service" => collection::<Service>(ns),
            "Job" => collection::<Job>(ns),
            "Pod" => collection::<Pod>(ns),
            other => panic!("perfops k8s wrote a {other}, which this test does not know"),
        }
    }

    /// Every object passes `dryRun=All&fieldValidation=Strict` in a namespace
    /// that enforces the "restricted" Pod Security Standard, with no warning;
    /// `kubectl apply --dry-run=server` takes the folders as printed; broken
    /// objects are refused with the field named.
    #[test]
    fn manifests_pass_a_strict_server_side_dry_run() {
        let _cpu = shared();
        let t0 = Instant::now();
        let (wd, _) = scenario_dir("k8s-dry-run");
        let ns = "perfops-dry-run";
        let run = perfops_in(
            &wd.path,
            &["k8s", "checkout.yaml", "--agents", "3", "--image", "perfops:test", "--namespace", ns, "--out", "out"],
            Some("s3cret"),
        );
        run.assert_exit(0);
        let out = wd.path.join("out");

        let api = ApiServer::start(&wd);
        let ns_file = wd.path.join("namespace.json");
        std::fs::write(
            &ns_file,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": { "name": ns, "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/warn": "restricted" } }
            })
            .to_string(),
        )
        .unwrap();
        let (code, _, body) = api.call("POST", "/api/v1/namespaces", "application/json", &ns_file);
        assert_eq!(code, 201, "creating the namespace: {body}");
        // Pods are refused until the controller manager gave the namespace its ServiceAccount.
        let deadline = Instant::now() + Duration::from_secs(60);
        while api.get(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default")) != 200 {
            assert!(Instant::now() < deadline, "no default ServiceAccount in {ns} after 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }

        for f in FILES.iter().chain([&FETCH]) {
            let path = out.join(f);
            let kind = read_doc(&path)["kind"].as_str().unwrap().to_string();
            let (code, headers, body) = api.call("POST", &collection_of(&kind, ns), "application/yaml", &path);
            assert_eq!(code, 201, "{f} ({kind}) refused:\n{body}");
            let warnings: Vec<&str> =
                headers.lines().filter(|l| l.to_ascii_lowercase().starts_with("warning:")).collect();
            assert!(warnings.is_empty(), "{f}: {warnings:?}");
        }

        // The printed `kubectl apply -f DIR` and `-f DIR/fetch`, as a dry run.
        let kubectl = Command::new(kit_bin().join("kubectl"))
            .env("KUBECONFIG", api.run_dir.join("kubeconfig"))
            .args(["apply", "--dry-run=server", "-f", "out", "-f", "out/fetch"])
            .current_dir(&wd.path)
            .output()
            .expect("run kubectl");
        let said = String::from_utf8_lossy(&kubectl.stdout);
        assert!(kubectl.status.success(), "kubectl apply: {said}{}", String::from_utf8_lossy(&kubectl.stderr));
        assert_eq!(said.matches("(server dry run)").count(), 8, "{said}");

        // Broken objects: refused, with the field named (the check can fail).
        let agents = std::fs::read_to_string(out.join(FILES[6])).unwrap();
        let broken: [(&str, String, u16, &str); 3] = [
            // A value the API does not know.
            (
                "bad value",
                agents.replace("completionMode: Indexed", "completionMode: Bogus"),
                422,
                "spec.completionMode: Unsupported value: \"Bogus\"",
            ),
            // A field that does not exist: only strict validation refuses it.
            ("unknown field", agents.replace("parallelism:", "paralelism:"), 400, "unknown field \"spec.paralelism\""),
            // A request above its limit.
            (
                "request above limit",
                agents.replacen("cpu: \"1\"", "cpu: \"500m\"", 1),
                422,
                "must be less than or equal to cpu limit",
            ),
        ];
        for (what, text, want_code, want) in broken {
            assert_ne!(text, agents, "{what}: the edit must change the manifest");
            let path = wd.path.join("broken.yaml");
            std::fs::write(&path, &text).unwrap();
            let (code, _, body) = api.call("POST", &collection::<Job>(ns), "application/yaml", &path);
            assert_eq!(code, want_code, "{what}: {body}");
            let status: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
            let message = status["message"].as_str().unwrap_or_default();
            assert!(message.contains(want), "{what}: want {want:?} in {message:?}");
        }
        // The NetworkPolicy is validated too: a policy type the API does not know is refused.
        let policy = std::fs::read_to_string(out.join(FILES[3])).unwrap();
        let bad = policy.replace("- Ingress", "- Ingres");
        assert_ne!(bad, policy, "the edit must change the policy");
        let path = wd.path.join("broken-policy.yaml");
        std::fs::write(&path, &bad).unwrap();
        let (code, _, body) = api.call("POST", &collection::<NetworkPolicy>(ns), "application/yaml", &path);
        assert_eq!(code, 422, "{body}");
        assert!(body.contains("spec.policyTypes[0]"), "{body}");
        // A replay's manifests: its recording in the Secret and among the coordinator's
        // mounted items, accepted as they are.
        std::fs::create_dir_all(wd.path.join("recordings")).unwrap();
        std::fs::write(wd.path.join("recordings/rec.csv"), RECORDING).unwrap();
        wd.scenario("replay.yaml", REPLAY_SCENARIO);
        let run = perfops_in(
            &wd.path,
            &["k8s", "replay.yaml", "--agents", "2", "--image", "perfops:test", "--namespace", ns, "--out", "replay"],
            None,
        );
        run.assert_exit(0);
        for f in FILES {
            let path = wd.path.join("replay").join(f);
            let kind = read_doc(&path)["kind"].as_str().unwrap().to_string();
            let (code, _, body) = api.call("POST", &collection_of(&kind, ns), "application/yaml", &path);
            assert_eq!(code, 201, "replay: {f} ({kind}) refused:\n{body}");
        }
        let secret = std::fs::read_to_string(wd.path.join("replay").join(FILES[0])).unwrap();
        assert!(secret.contains("1250,orders,c"), "the recording is in the Secret: {secret}");
        // Dry runs store nothing.
        assert_eq!(api.get(&format!("/apis/batch/v1/namespaces/{ns}/jobs/perfops-checkout-api-agents")), 404);
        eprintln!("dry-run test took {:?}", t0.elapsed());
    }
}
