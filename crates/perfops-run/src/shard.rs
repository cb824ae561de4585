//! Where this generator sits in a run over several machines (#13):
//! `run --shard I/N` (which part of the load is its own), `--start-at TIME`
//! (the wall-clock instant every shard's schedule starts at) and
//! `--setup-values FILE` (what the scenario's `setup` saved, run once for all
//! shards by `perfops setup SCENARIO --out FILE`).
//!
//! ```text
//!   perfops setup s.yaml --out values.json         setup once: 1 login, not N
//!   perfops run s.yaml --shard 0/3 --start-at T --setup-values values.json   (machine A)
//!   perfops run s.yaml --shard 1/3 --start-at T --setup-values values.json   (machine B)
//!   perfops run s.yaml --shard 2/3 --start-at T --setup-values values.json   (machine C)
//!   perfops merge A/runs/x B/runs/y C/runs/z --out merged
//! ```
//!
//! The division itself is `perfops_core::model::Shard` (arrival k to shard
//! k mod N, units such as users divided exactly); this module parses the
//! flags into a [`Placement`], reads and writes the setup values, and makes
//! the fingerprint that lets `merge` refuse shards of different scenarios. A
//! coordinator hands out the same three things and calls the same functions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use perfops_core::model::Shard;
use perfops_core::scenario::{Override, Scenario, Step, TargetSpec};
use perfops_engine::{Target, Work};
use perfops_report::results::{parse_time, utc_rfc3339_ms};

use crate::exit::{Exit, UsageError};
use crate::launch::PlanBase;
use crate::loading::{Inputs, inputs, load_scenario};

/// `--shard`, `--start-at` and `--setup-values` (`perfops run` only).
#[derive(Debug, Default, Clone)]
pub struct ShardArgs {
    /// Run part I of N of the load (0 <= I < N): open-model arrival k is shard
    /// k mod N's, closed-model users and max_in_flight are divided exactly.
    /// Merge the shards' results with `perfops merge`.
    pub shard: Option<Shard>,
    /// Start the schedule at this wall-clock instant (RFC 3339, e.g.
    /// 2026-11-24T18:00:00Z, or unix seconds), the same for every shard. A
    /// start already past sends at once what is due in the stage under way,
    /// latency from when it was due; stages already over are not sent (unsent).
    pub start_at: Option<SystemTime>,
    /// Skip the scenario's setup and use the values it saved, from FILE (a
    /// JSON object, as `perfops setup --out FILE` writes it).
    pub setup_values: Option<PathBuf>,
}

/// The same flags, hidden, in commands that refuse them (`limit`, `sweep`):
/// a clear usage error rather than clap's "unexpected argument".
#[derive(Debug, Default, Clone)]
pub struct RefusedShardArgs {
    /// `--shard`, as given.
    pub shard: Option<String>,
    /// `--start-at`, as given.
    pub start_at: Option<String>,
    /// `--setup-values`, as given.
    pub setup_values: Option<PathBuf>,
}

impl RefusedShardArgs {
    /// A usage error if any was given: `command` runs on one generator only.
    pub(crate) fn refuse(&self, command: &str) -> Result<()> {
        let given: Vec<&str> = [
            ("--shard", self.shard.is_some()),
            ("--start-at", self.start_at.is_some()),
            ("--setup-values", self.setup_values.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, on)| on.then_some(flag))
        .collect();
        if given.is_empty() {
            return Ok(());
        }
        Err(anyhow::Error::new(UsageError(format!(
            "{} {}: `{command}` decides from what it measures itself, so it runs on one generator; \
             shards are for `perfops run`",
            given.join(", "),
            if given.len() == 1 { "is not for this command" } else { "are not for this command" }
        ))))
    }
}

impl ShardArgs {
    /// The placement these flags ask for (setup values read now).
    pub(crate) fn placement(&self) -> Result<Placement> {
        let setup_values = self.setup_values.as_deref().map(read_setup_values).transpose()?;
        Ok(Placement { shard: self.shard, start_at: self.start_at, setup_values })
    }
}

/// Where a session's load sits among several generators; the default is a
/// generator alone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placement {
    /// This generator's part (`None`: alone, the whole load).
    pub(crate) shard: Option<Shard>,
    /// When second 0 is, on the wall clock (`None`: as soon as ready).
    pub(crate) start_at: Option<SystemTime>,
    /// What the setup saved, run elsewhere once (`None`: run it here).
    pub(crate) setup_values: Option<HashMap<String, String>>,
}

impl Placement {
    /// The part of the load that is this generator's.
    pub(crate) fn shard(&self) -> Shard {
        self.shard.unwrap_or(Shard::WHOLE)
    }
}

/// `I/N` with `0 <= I < N`.
pub fn parse_shard(text: &str) -> Result<Shard, String> {
    let bad = || format!("`{text}` is not a shard: give I/N with 0 <= I < N, e.g. 0/3");
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if count == 0 || index >= count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

/// `I/N` as `meta.json` writes it.
pub(crate) fn shard_text(shard: Shard) -> String {
    format!("{}/{}", shard.index, shard.count)
}

/// RFC 3339 or unix seconds.
pub fn parse_start(text: &str) -> Result<SystemTime, String> {
    parse_time(text).ok_or_else(|| {
        format!("`{text}` is not a time: give RFC 3339 (2026-11-24T18:00:00Z, +02:00 offsets) or unix seconds")
    })
}

/// Check a start instant against `now` for a load of `length`: one past by
/// more than the load's length would send the whole load at once, which
/// measures nothing.
pub(crate) fn check_start(start: SystemTime, now: SystemTime, length: Duration) -> Result<()> {
    if let Ok(past) = now.duration_since(start)
        && past > length
    {
        return Err(anyhow::Error::new(UsageError(format!(
            "--start-at {} is {:.1} s ago, more than the load's {:.0} s: every arrival would be late",
            utc_rfc3339_ms(start),
            past.as_secs_f64(),
            length.as_secs_f64()
        ))));
    }
    Ok(())
}

/// A hash of the redacted scenario text and the overrides it ran with
/// (FNV-1a, 64 bits, hex): equal for shards of one scenario, different when
/// a stage, a flow or an `--set` differs. Not a secret and not a defence
/// against forgery: a guard against merging the wrong directories. The
/// overrides are hashed redacted too (#31): a fast hash of a short secret
/// in `meta.json` would give it back to whoever tries the candidates.
pub(crate) fn fingerprint(redacted: &str, overrides: &[Override]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(redacted.as_bytes());
    for o in overrides {
        eat(b"\n--set ");
        eat(o.path.as_bytes());
        eat(b"=");
        eat(perfops_core::scenario::redact::redact_override_value(&o.path, &o.value).as_bytes());
    }
    format!("fnv1a64:{h:016x}")
}

/// Read setup values: a JSON object of strings.
pub(crate) fn read_setup_values(path: &Path) -> Result<HashMap<String, String>> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read setup values {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "{}: not setup values (a JSON object of strings, as `perfops setup` writes): {e}",
            path.display()
        ))
    })
}

/// Check that `values` hold every variable the scenario's setup saves.
pub(crate) fn check_setup_values(scenario: &Scenario, values: &HashMap<String, String>, from: &str) -> Result<()> {
    let missing: Vec<&str> = scenario
        .setup
        .iter()
        .flat_map(|s| s.save.iter().map(|(name, _)| name.as_str()))
        .filter(|name| !values.contains_key(*name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(UsageError(format!(
        "{from} lacks what the scenario's setup saves: {} (make it with `perfops setup SCENARIO --out FILE`)",
        missing.join(", ")
    ))))
}

/// Run the scenario's setup once, against `target`, and return what it saved
/// (empty when it has no setup). `run` calls it when it runs alone, `perfops
/// setup` (and a coordinator) once for every shard.
pub(crate) fn run_setup(
    scenario: &Scenario,
    inputs: &Inputs,
    target: &Target,
    base: &PlanBase,
) -> Result<HashMap<String, String>> {
    if scenario.setup.is_empty() {
        return Ok(HashMap::new());
    }
    let setup: Vec<(String, u32, Vec<Step>)> = vec![("setup".to_string(), 1, scenario.setup.clone())];
    let mut work =
        Work::new(target, setup, scenario.defaults.headers.clone(), inputs.env.clone(), inputs.feeders.clone())
            .with_cookies(scenario.defaults.cookies);
    work.resolve_grpc(&inputs.folder, &[], Some(base.reflection()))
        .map_err(|e| anyhow::Error::new(UsageError(e.to_string())))?;
    if let Some(plan) = &inputs.scripts {
        work.attach_scripts(plan.clone()).map_err(|e| anyhow::Error::new(UsageError(e)))?;
    }
    let one = perfops_core::model::LoadModel::Closed {
        connections: 1,
        think: Duration::ZERO,
        profile: None,
        duration: None,
        max_requests: None,
    };
    Ok(perfops_engine::run_setup(&base.plan(std::sync::Arc::new(work), one))?)
}

/// Write setup values to `path`, readable by its owner only (they hold
/// tokens). A results directory is refused: its files are meant to be shared.
pub(crate) fn write_setup_values(path: &Path, values: &HashMap<String, String>) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if folder.join("meta.json").exists() || folder.join("series.jsonl").exists() {
        return Err(anyhow::Error::new(UsageError(format!(
            "{} is in a results directory, whose files are shared: setup values hold tokens, write them elsewhere",
            path.display()
        ))));
    }
    let sorted: std::collections::BTreeMap<&String, &String> = values.iter().collect();
    let mut bytes = serde_json::to_vec_pretty(&sorted)?;
    bytes.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing setup values to {}", path.display()))?;
    // An existing file keeps its mode through open(): narrow it too.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(&bytes)?;
    f.sync_data()?;
    Ok(())
}

/// Flags of `perfops setup`.
#[derive(Debug, Clone)]
pub struct SetupArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    /// Where to write what the setup saved (JSON, mode 0600: it holds tokens).
    pub out: PathBuf,
    /// Override a field before validation (repeatable), as for `run`.
    pub set: Vec<Override>,
    /// Override the scenario's target (a URL).
    pub target: Option<String>,
    /// Accept any TLS certificate.
    pub insecure: bool,
}

/// `perfops setup SCENARIO --out FILE`: run the scenario's setup once and
/// write what it saved, for `run --setup-values FILE` on every shard.
pub fn setup(args: SetupArgs) -> Result<Exit> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let mut overrides = args.set.clone();
    if let Some(t) = &args.target {
        overrides.push(Override { path: "target".into(), value: t.clone() });
    }
    let Some((scenario, text)) = load_scenario(&args.scenario, &overrides)? else { return Ok(Exit::Usage) };
    let Some(inputs) = inputs(&scenario, &args.scenario, &text)? else { return Ok(Exit::Usage) };
    let TargetSpec::Url(url) = &inputs.target else {
        return Err(usage(
            "the target is a demo this command would start and stop: its tokens would be worthless; \
             give the running target with --target URL"
                .into(),
        ));
    };
    if scenario.setup.is_empty() {
        return Err(usage(format!("{} has no setup: there is nothing to save", args.scenario.display())));
    }
    let target = match inputs.url_target() {
        Some(target) => target.map_err(|why| usage(format!("target `{url}`: {why}")))?,
        None => Target::parse(url).map_err(|e| usage(format!("target `{url}`: {e}")))?,
    };
    let base = PlanBase::of_scenario(target.clone(), &scenario.defaults, args.insecure, 1, false);
    let values = run_setup(&scenario, &inputs, &target, &base)?;
    write_setup_values(&args.out, &values)?;
    let mut names: Vec<&String> = values.keys().collect();
    names.sort();
    note!(
        "setup saved {} into {} (mode 0600)",
        names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", "),
        args.out.display()
    );
    Ok(Exit::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_i_of_n() {
        // (text, shard)
        let cases = [
            ("0/3", Some((0, 3))),     // the first of three
            ("2/3", Some((2, 3))),     // the last
            ("0/1", Some((0, 1))),     // alone, as a shard
            (" 1 / 2 ", Some((1, 2))), // spaces around the numbers
            ("3/3", None),             // I must be below N
            ("0/0", None),             // no shards
            ("1", None),               // no N
            ("-1/3", None),            // negative
            ("a/b", None),             // not numbers
        ];
        for (text, want) in cases {
            let got = parse_shard(text).ok().map(|s| (s.index, s.count));
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn a_start_too_far_in_the_past_is_refused() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let length = Duration::from_secs(10);
        // (seconds before now, accepted)
        let cases = [
            (-5.0, true),  // in the future: wait for it
            (0.0, true),   // now
            (3.0, true),   // late, within the load: sent at once
            (10.5, false), // past the whole load
        ];
        for (ago, ok) in cases {
            let start =
                if ago < 0.0 { now + Duration::from_secs_f64(-ago) } else { now - Duration::from_secs_f64(ago) };
            assert_eq!(check_start(start, now, length).is_ok(), ok, "{ago} s ago");
        }
    }

    #[test]
    fn fingerprints_differ_with_the_scenario_and_its_overrides() {
        let set = |v: &str| vec![Override { path: "load.stages[0].rate".into(), value: v.into() }];
        let a = fingerprint("name: a\n", &[]);
        assert_eq!(a, fingerprint("name: a\n", &[]), "stable");
        assert_ne!(a, fingerprint("name: b\n", &[]), "another text");
        assert_ne!(fingerprint("name: a\n", &set("10")), fingerprint("name: a\n", &set("20")), "another --set");
        assert_ne!(a, fingerprint("name: a\n", &set("10")), "an --set at all");
    }
}
