//! `perfops k8s SCENARIO --agents N --image IMAGE [--namespace NS] --out DIR`:
//! the Kubernetes objects of a distributed run, written as YAML files, and the
//! `kubectl` commands that start it, follow it, copy its results out and clean
//! up. Kubernetes places and starts the generators; perfops never schedules
//! machines itself.
//!
//! This file is the glue: it reads the scenario and the files it reads beside
//! itself (`crate::shipped`: CSV, `.proto`, a replay's recording),
//! reads the scenario's `${env.X}` values from the environment, makes a token
//! and the coordinator's TLS material ([`tls`]), writes the files and prints
//! the commands. What the objects hold is
//! [`manifest`]'s (pure, typed, table-tested), after [`check`] accepted the
//! user's names and sizes; how they become YAML is [`yaml`]'s; [`tar`] is
//! `perfops tar`, which copies the results out of the shell-less image. The
//! pods run `perfops coordinator` and `perfops agent`.

mod check;
pub(crate) mod manifest;
pub mod tar;
mod tls;
mod yaml;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use perfops_core::scenario::{TargetSpec, sources};
use perfops_engine::{Target, TargetError};
use serde::Serialize;

use crate::exit::{Exit, UsageError};
use crate::loading::{load_scenario, read_sources};
use crate::shipped::Shipped;
use manifest::{Bundle, FETCH_DIR, FETCH_FILE, FILES, Names, Size, Spec};

/// Flags of `perfops k8s`.
#[derive(Debug, Clone)]
pub struct K8sArgs {
    /// The scenario file; it and the files it reads beside itself go into the Secret.
    pub scenario: PathBuf,
    /// How many agents: one pod each, each running 1/N of the load.
    pub agents: u32,
    /// The container image, with `perfops` on its PATH (see the Dockerfile).
    pub image: String,
    /// The namespace of every object (it must exist).
    pub namespace: String,
    /// The folder to write the manifests into (created; files of ours are replaced).
    pub out: PathBuf,
    /// Prefix of the objects' names [default: perfops-<scenario name>].
    pub name: Option<String>,
    /// CPU of each agent, request and limit.
    pub agent_cpu: String,
    /// Memory of each agent, request and limit.
    pub agent_memory: String,
    /// CPU of the coordinator, request and limit.
    pub coordinator_cpu: String,
    /// Memory of the coordinator, request and limit.
    pub coordinator_memory: String,
    /// Size of the results volume (the cluster's default StorageClass).
    pub results_size: String,
    /// How long the coordinator waits for every agent before it gives up
    /// (exit 3, naming the missing shards) [default: the coordinator's, 120s].
    pub join_timeout: Option<String>,
    /// The coordinator serves its live page on its pod's loopback
    /// (`--live`), opened with the `kubectl port-forward` command printed.
    pub live: bool,
}

/// The most a Secret holds (the API server refuses more).
const SECRET_MAX_BYTES: usize = 1024 * 1024;

fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(message))
}

/// `perfops k8s`: write the manifests of a distributed run and print the kubectl commands.
pub fn run(args: K8sArgs) -> Result<Exit> {
    let Some((scenario, text)) = load_scenario(&args.scenario, &[])? else { return Ok(Exit::Usage) };
    let folder = args.scenario.parent().unwrap_or(Path::new("."));
    // What it reads beside itself (CSV, .proto and their imports, a replay's recording), as
    // the coordinator's pod will find it beside the scenario and send it to the agents.
    let shipped =
        Shipped::gather(&scenario, folder).map_err(|e| usage(format!("{}: {e:#}", args.scenario.display())))?;
    if let Some((rel, _)) = shipped.iter().find(|(rel, _)| *rel == manifest::SCENARIO_KEY) {
        return Err(usage(format!(
            "{}: `{rel}` is where perfops k8s puts the scenario itself; rename it",
            args.scenario.display()
        )));
    }
    let files: Vec<(String, String)> = shipped.into_map().into_iter().collect();
    // What `run` would read besides the file (CSV files, environment), checked alike;
    // the target as the pods will see it.
    let Some((env, _)) = read_sources(&scenario, folder, &text) else { return Ok(Exit::Usage) };
    let env: BTreeMap<String, String> = env.into_iter().collect();
    let in_env = env.clone().into_iter().collect();
    target_for_pods(&sources::target(&scenario, &in_env))
        .map_err(|e| usage(format!("{}: {e}", args.scenario.display())))?;
    // The Secret holds them beside the token and the ${env.X} values.
    let bytes = text.len()
        + files.iter().map(|(p, c)| p.len() + c.len()).sum::<usize>()
        + env.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    if bytes > SECRET_MAX_BYTES - 4096 {
        return Err(usage(format!(
            "the scenario, the files it reads (CSV, .proto, a replay's recording) and its ${{env.X}} values are \
             {:.2} MiB; a Secret holds at most 1 MiB",
            bytes as f64 / 1048576.0
        )));
    }
    let name = match args.name {
        Some(n) => {
            check::name(&n).map_err(usage)?;
            n
        }
        None => check::default_name(&scenario.name),
    };
    check::dns_label("--namespace", &args.namespace, 63).map_err(usage)?;
    for (flag, q) in [
        ("--agent-cpu", &args.agent_cpu),
        ("--agent-memory", &args.agent_memory),
        ("--coordinator-cpu", &args.coordinator_cpu),
        ("--coordinator-memory", &args.coordinator_memory),
        ("--results-size", &args.results_size),
    ] {
        check::quantity(flag, q).map_err(usage)?;
    }
    if let Some(t) = &args.join_timeout {
        perfops_core::units::parse_duration(t).map_err(|e| usage(format!("--join-timeout `{t}`: {e}")))?;
    }
    if args.image.is_empty() || args.image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(usage(format!("--image `{}` is not an image reference", args.image)));
    }
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs()
        / 86_400;
    let service = Names::new(&name).coordinator;
    let tls = tls::material(&tls::service_names(&service, &args.namespace), days as i64)
        .context("making the coordinator's TLS certificate")?;
    let spec = Spec {
        name,
        namespace: args.namespace,
        image: args.image,
        agents: args.agents,
        scenario: text,
        files,
        token: token()?,
        tls,
        env,
        agent: Size { cpu: args.agent_cpu, memory: args.agent_memory },
        coordinator: Size { cpu: args.coordinator_cpu, memory: args.coordinator_memory },
        results_size: args.results_size,
        join_timeout: args.join_timeout,
        live: args.live,
    };
    write(&args.out, &manifest::bundle(&spec))?;
    let secrets: Vec<&str> = spec.env.keys().map(String::as_str).collect();
    note!(
        "wrote {} objects for {} agents to {} (namespace {}); the Secrets hold the fleet token, the \
         coordinator's TLS key and certificate, the scenario and its files{}",
        FILES.len(),
        spec.agents,
        args.out.display(),
        spec.namespace,
        if secrets.is_empty() { String::new() } else { format!(" and, from your environment, {}", secrets.join(", ")) }
    );
    crate::say::out(&manifest::commands(&spec, &shell_word(&args.out.display().to_string())));
    Ok(Exit::Passed)
}

/// The target as the agents will reach it: a URL whose host is looked up in
/// the pods, where a Service's name resolves (`http://perfops-demo:8080`),
/// so a name this machine cannot resolve is fine; the demo target is refused,
/// since the coordinator would start it on its own pod's loopback, out of the
/// agents' reach.
fn target_for_pods(target: &TargetSpec) -> Result<(), String> {
    match target {
        TargetSpec::Demo(..) => Err("a `demo:` target would start the demo inside the coordinator's pod, on its \
                                     loopback, where the agents cannot reach it: run the demo in a pod of its own \
                                     (examples/k8s/demo.yaml) and give its Service's URL as the target \
                                     (examples/k8s/orders.yaml)"
            .into()),
        TargetSpec::Url(url) => match Target::parse(url) {
            Ok(_) | Err(TargetError::Resolve { .. }) => Ok(()),
            Err(e) => Err(format!("target `{url}`: {e}")),
        },
    }
}

/// A fresh fleet token: 32 random bytes (256 bits, twice the 128 that #31
/// asks of a fleet token), in hex.
fn token() -> Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for the fleet token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The objects as YAML files under `out` (the fetch pod in `out/fetch`).
/// Anything else in those folders is refused: `kubectl apply -f DIR` would
/// apply it too.
fn write(out: &Path, b: &Bundle) -> Result<()> {
    let fetch_dir = out.join(FETCH_DIR);
    for (dir, ours) in [(out, &FILES[..]), (&fetch_dir, &[FETCH_FILE][..])] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let ok = ours.contains(&name.as_str()) || (dir == out && name == FETCH_DIR);
            if !ok {
                return Err(usage(format!(
                    "{} holds {name}, which `kubectl apply -f` would apply too; give --out a folder of its own",
                    dir.display()
                )));
            }
        }
    }
    std::fs::create_dir_all(&fetch_dir).with_context(|| format!("creating {}", fetch_dir.display()))?;
    let docs: [(&str, String); 7] = [
        (FILES[0], doc(&b.secret)?),
        (FILES[1], doc(&b.tls)?),
        (FILES[2], doc(&b.results)?),
        (FILES[3], doc(&b.policy)?),
        (FILES[4], doc(&b.service)?),
        (FILES[5], doc(&b.coordinator)?),
        (FILES[6], doc(&b.agents)?),
    ];
    for (file, text) in docs {
        // The Secrets' files are readable by their owner only, like the token and key they hold.
        let private = file == FILES[0] || file == FILES[1];
        write_file(&out.join(file), &text, private)?;
    }
    write_file(&fetch_dir.join(FETCH_FILE), &doc(&b.fetch)?, false)
}

fn doc(object: &impl Serialize) -> Result<String> {
    Ok(yaml::to_yaml(&serde_json::to_value(object).context("serializing a Kubernetes object")?))
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mode = if private { 0o600 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    // A file that existed keeps its mode through `open`: set it.
    f.set_permissions(std::fs::Permissions::from_mode(mode)).with_context(|| format!("chmod {}", path.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// `s` as one word for a POSIX shell: as it is when it is made of safe
/// characters, else single-quoted.
fn shell_word(s: &str) -> String {
    let safe = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._/-+=:,@%".contains(c));
    if safe { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::{TargetSpec, shell_word, target_for_pods};

    /// Targets as the pods will see them: names this machine cannot resolve
    /// pass, the demo and broken URLs do not.
    #[test]
    fn targets_for_pods() {
        let cases: &[(&str, Result<(), &str>)] = &[
            // A Service in the same namespace: resolved in the pods only.
            ("http://perfops-demo:8080", Ok(())),
            // A cluster DNS name (`.invalid` never resolves here either).
            ("http://orders.shop.svc.cluster.invalid", Ok(())),
            // An address.
            ("https://127.0.0.1:8443/api", Ok(())),
            // Not a scheme perfops speaks.
            ("ftp://orders:21", Err("only http://, https://")),
            // Not a URL.
            ("http://", Err("is not a valid URL")),
        ];
        for (url, want) in cases {
            let got = target_for_pods(&TargetSpec::Url(url.to_string()));
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(w)) => assert!(e.contains(w), "{url}: {e}"),
                (got, want) => panic!("{url}: got {got:?}, want {want:?}"),
            }
        }
        let demo = perfops_core::scenario::parse(
            "s.yaml",
            "name: x\ntarget: demo:async\nflows: { f: { steps: [ { request: GET / } ] } }\nload: { stages: [ { rate: 1, hold: 1s } ] }\n",
            &[],
        );
        let demo = demo.unwrap_or_else(|_| panic!("a valid scenario"));
        let e = target_for_pods(&demo.target).unwrap_err();
        assert!(e.contains("the agents cannot reach it") && e.contains("examples/k8s/demo.yaml"), "{e}");
    }

    /// Paths in the printed commands, quoted only when needed.
    #[test]
    fn shell_words() {
        let cases: &[(&str, &str)] = &[
            ("k8s/orders", "k8s/orders"), // the usual: as it is
            ("/tmp/a b", "'/tmp/a b'"),   // a space: quoted
            ("it's", r"'it'\''s'"),       // a quote: closed, escaped, reopened
            ("$HOME/x", "'$HOME/x'"),     // no expansion
            ("", "''"),                   // empty: still one word
        ];
        for (s, want) in cases {
            assert_eq!(shell_word(s), *want, "{s}");
        }
    }
}
